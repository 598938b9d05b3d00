/*
 * traces_byid.c - trace by id: every source whose bloom may hold the id is
 * scanned for its spans (duplicates of a retried export go out once),
 * grouped by resource and scope, and rendered in pieces as OTLP protobuf
 * or JSON (see traces.h, traces_int.h).
 */
#include "query/traces_int.h"

#include <event2/buffer.h>

#include "query/pool.h"

/* ---- trace by id ---------------------------------------------------------- */

struct rgroup {
    const struct res_view *res;
    size_t first, end; /* refs */
    uint64_t pb_size;  /* ResourceSpans bytes */
};

struct sgroup {
    const struct scope_view *sc;
    size_t first, end;
    uint64_t pb_size; /* ScopeSpans bytes */
};

struct traces_trace {
    struct qctx q;
    char warn[512]; /* q's warnings, joined (traces_trace_warning) */
    uint8_t id[16];
    struct tref *refs;
    size_t n;
    /* rendering */
    struct rgroup *rg;
    size_t n_rg;
    struct sgroup *sg;
    size_t n_sg;
    bool started;
    enum traces_fmt fmt;
    size_t pos;            /* next ref to render */
    size_t cur_rg, cur_sg; /* groups open in the output (SIZE_MAX: none) */
    struct jsonw w;
};

int traces_hits_push(struct qctx *q, struct hits *h, const struct tref *r)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        if (qctx_charge(q, (cap - h->cap) * sizeof(*h->v)) < 0) {
            return -ENOMEM;
        }
        struct tref *v = realloc(h->v, cap * sizeof(*v));
        if (v == NULL) {
            qctx_fail(q, -ENOMEM, "out of memory");
            return -ENOMEM;
        }
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = *r;
    return 0;
}

struct find_ctx {
    struct qctx *q;
    const uint8_t *id;
    size_t *cand;      /* source indexes to scan */
    struct hits *hits; /* per candidate */
};

static void find_item(void *arg, size_t i)
{
    struct find_ctx *f = arg;
    struct qctx *q = f->q;
    size_t si = f->cand[i];
    struct qctx_src *s = &q->src[si];
    struct hits *h = &f->hits[i];
    if (qctx_check(q) != 0 || qctx_load(q, s, BLK_ROOT) < 0) {
        return;
    }
    qctx_add(&q->st.blocks_scanned, 1);
    struct qctx_scan it;
    uint64_t r;
    qctx_scan_begin(&it, q, 0, s->rows, false, SCAN_STRIDE, false);
    while (qctx_scan_next(&it, &r)) {
        struct span_view v;
        if (qctx_span(q, s, r, BLK_ROOT, &v) < 0) {
            h->n = 0;
            return;
        }
        if (memcmp(v.trace_id, f->id, 16) == 0) {
            struct tref t = {
                .src = (uint32_t)si, .row = r, .start = v.start_ns, .sc = v.scope, .kind = v.kind};
            memcpy(t.span_id, v.span_id, 8);
            if (traces_hits_push(q, h, &t) < 0) {
                return;
            }
        }
    }
    if (qctx_scan_end(&it) != 0) {
        return;
    }
    if (h->n == 0) {
        /* none of the trace's spans here, nothing kept of the block: its
         * tables and pages may go before the trace is rendered */
        qctx_done(q, s);
        return;
    }
    /* Rendering reads every table: verify them now, so a damaged block
     * is left out before the first byte goes out rather than midway. */
    if (qctx_load(q, s, BLK_ALL) < 0) {
        h->n = 0;
    }
}

static int attrs_cmp(const struct oattrs *a, const struct oattrs *b)
{
    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }
    if (a->count != b->count) {
        return a->count < b->count ? -1 : 1;
    }
    return a->len ? memcmp(a->p, b->p, a->len) : 0;
}

static int res_cmp(const struct res_view *a, const struct res_view *b)
{
    if (a == b) {
        return 0;
    }
    int c = attrs_cmp(&a->attrs, &b->attrs);
    if (c == 0 && a->dropped_attrs != b->dropped_attrs) {
        c = a->dropped_attrs < b->dropped_attrs ? -1 : 1;
    }
    return c != 0 ? c : mstr_cmp(&a->schema_url, &b->schema_url);
}

/* Same resource content, then same scope content. */
static int scope_cmp(const struct scope_view *a, const struct scope_view *b)
{
    if (a == b) {
        return 0;
    }
    int c = res_cmp(a->resource, b->resource);
    if (c == 0) {
        c = mstr_cmp(&a->name, &b->name);
    }
    if (c == 0) {
        c = mstr_cmp(&a->version, &b->version);
    }
    if (c == 0) {
        c = attrs_cmp(&a->attrs, &b->attrs);
    }
    if (c == 0 && a->dropped_attrs != b->dropped_attrs) {
        c = a->dropped_attrs < b->dropped_attrs ? -1 : 1;
    }
    return c != 0 ? c : mstr_cmp(&a->schema_url, &b->schema_url);
}

static int tref_cmp(const void *pa, const void *pb)
{
    const struct tref *a = pa, *b = pb;
    int c = scope_cmp(a->sc, b->sc);
    if (c != 0) {
        return c;
    }
    if (a->start != b->start) {
        return a->start < b->start ? -1 : 1;
    }
    c = memcmp(a->span_id, b->span_id, 8);
    if (c != 0) {
        return c;
    }
    if (a->kind != b->kind) {
        return a->kind < b->kind ? -1 : 1;
    }
    if (a->src != b->src) {
        return a->src < b->src ? -1 : 1;
    }
    return a->row < b->row ? -1 : a->row > b->row;
}

/* Drops repeats of a span (same scope, start, id and kind: the same export
 * acknowledged twice after a client retry), as Tempo's combiner does. */
static size_t dedupe_refs(struct tref *v, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o > 0 && v[o - 1].start == v[i].start && v[o - 1].kind == v[i].kind &&
            memcmp(v[o - 1].span_id, v[i].span_id, 8) == 0 &&
            scope_cmp(v[o - 1].sc, v[i].sc) == 0) {
            continue;
        }
        v[o++] = v[i];
    }
    return o;
}

/* Resource and scope groups over the sorted refs. */
static int make_groups(struct traces_trace *t)
{
    size_t nr = 0, ns = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (i == 0 || res_cmp(t->refs[i - 1].sc->resource, t->refs[i].sc->resource) != 0) {
            nr++;
        }
        if (i == 0 || scope_cmp(t->refs[i - 1].sc, t->refs[i].sc) != 0) {
            ns++;
        }
    }
    t->rg = calloc(nr + 1, sizeof(*t->rg));
    t->sg = calloc(ns + 1, sizeof(*t->sg));
    if (t->rg == NULL || t->sg == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct scope_view *sc = t->refs[i].sc;
        if (i == 0 || res_cmp(t->refs[i - 1].sc->resource, sc->resource) != 0) {
            t->rg[t->n_rg++] = (struct rgroup){.res = sc->resource, .first = i};
        }
        t->rg[t->n_rg - 1].end = i + 1;
        if (i == 0 || scope_cmp(t->refs[i - 1].sc, sc) != 0) {
            t->sg[t->n_sg++] = (struct sgroup){.sc = sc, .first = i};
        }
        t->sg[t->n_sg - 1].end = i + 1;
    }
    return 0;
}

int traces_find(const uint8_t id[16], const struct traces_limits *lim, struct traces_trace **out,
                char *err, size_t errlen)
{
    *out = NULL;
    struct traces_trace *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        traces_set_err(err, errlen, -ENOMEM);
        return -ENOMEM;
    }
    int rc = traces_query_open(&t->q, lim);
    if (rc < 0) {
        free(t);
        traces_set_err(err, errlen, rc);
        return rc;
    }
    memcpy(t->id, id, 16);
    struct qctx *q = &t->q;
    struct find_ctx f = {.q = q, .id = id};
    f.cand = calloc(q->n_src + 1, sizeof(*f.cand));
    f.hits = calloc(q->n_src + 1, sizeof(*f.hits));
    size_t nc = 0;
    if (f.cand == NULL || f.hits == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < q->n_src; i++) {
        if (q->src[i].b != NULL && !blk_may_have_trace(q->src[i].b, id)) {
            q->st.blocks_skipped_bloom++;
            continue;
        }
        f.cand[nc++] = i;
    }
    qpool_parallel(nc, find_item, &f);
    rc = qctx_check(q);
    if (rc != 0) {
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < nc; i++) {
        total += f.hits[i].n;
    }
    t->refs = calloc(total + 1, sizeof(*t->refs));
    if (t->refs == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nc; i++) {
        if (qctx_src_failed(&q->src[f.cand[i]]) || f.hits[i].n == 0) {
            continue;
        }
        memcpy(t->refs + t->n, f.hits[i].v, f.hits[i].n * sizeof(*t->refs));
        t->n += f.hits[i].n;
    }
    qsort(t->refs, t->n, sizeof(*t->refs), tref_cmp);
    t->n = dedupe_refs(t->refs, t->n);
    rc = make_groups(t);
    qctx_warnings_join(q, t->warn, sizeof(t->warn));
out:
    if (f.hits != NULL) {
        for (size_t i = 0; i < nc; i++) {
            free(f.hits[i].v);
        }
    }
    free(f.hits);
    free(f.cand);
    qstats_scan_add(&q->st);
    if (rc < 0) {
        rc = traces_err_msg(q, err, errlen, rc);
        traces_trace_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

size_t traces_trace_spans(const struct traces_trace *t)
{
    return t->n;
}

const struct qs_scan *traces_trace_scan(const struct traces_trace *t)
{
    return &t->q.st;
}

const char *traces_trace_warning(const struct traces_trace *t)
{
    return t->warn;
}

void traces_trace_free(struct traces_trace *t)
{
    if (t == NULL) {
        return;
    }
    free(t->refs);
    free(t->rg);
    free(t->sg);
    qctx_close(&t->q);
    free(t);
}

/* The span of a ref, every table. */
static int ref_span(struct traces_trace *t, const struct tref *r, struct span_view *v)
{
    return qctx_span(&t->q, &t->q.src[r->src], r->row, BLK_ALL, v);
}

/* Protobuf sizes of every span, scope group, resource group. */
static int pb_sizes(struct traces_trace *t, uint64_t *trace_bytes)
{
    uint64_t total = 0;
    size_t si = 0;
    for (size_t g = 0; g < t->n_rg; g++) {
        struct rgroup *rg = &t->rg[g];
        struct pbw c;
        pbw_init(&c, NULL);
        otlpenc_pb_resource(&c, rg->res);
        uint64_t rsz = 1 + pbw_varint_size(c.n) + c.n;
        for (; si < t->n_sg && t->sg[si].first < rg->end; si++) {
            struct sgroup *sg = &t->sg[si];
            pbw_init(&c, NULL);
            otlpenc_pb_scope(&c, sg->sc);
            uint64_t ssz = 1 + pbw_varint_size(c.n) + c.n;
            for (size_t i = sg->first; i < sg->end; i++) {
                struct span_view v;
                if (ref_span(t, &t->refs[i], &v) < 0) {
                    return -EBADMSG;
                }
                size_t n = otlpenc_pb_span_size(&v);
                t->refs[i].pb_size = (uint32_t)n;
                ssz += 1 + pbw_varint_size(n) + n;
            }
            if (sg->sc->schema_url.len > 0) {
                ssz += 1 + pbw_varint_size(sg->sc->schema_url.len) + sg->sc->schema_url.len;
            }
            sg->pb_size = ssz;
            rsz += 1 + pbw_varint_size(ssz) + ssz;
        }
        if (rg->res->schema_url.len > 0) {
            rsz += 1 + pbw_varint_size(rg->res->schema_url.len) + rg->res->schema_url.len;
        }
        rg->pb_size = rsz;
        total += 1 + pbw_varint_size(rsz) + rsz;
    }
    *trace_bytes = total;
    return 0;
}

/* Closes the JSON scope / resource group open in the output. */
static void json_close_sg(struct traces_trace *t)
{
    if (t->cur_sg != SIZE_MAX) {
        const struct scope_view *sc = t->sg[t->cur_sg].sc;
        jsonw_arr_end(&t->w); /* spans */
        if (sc->schema_url.len > 0) {
            jsonw_key(&t->w, "schemaUrl");
            jsonw_str(&t->w, sc->schema_url.p, sc->schema_url.len);
        }
        jsonw_obj_end(&t->w);
        t->cur_sg = SIZE_MAX;
    }
}

static void json_close_rg(struct traces_trace *t)
{
    json_close_sg(t);
    if (t->cur_rg != SIZE_MAX) {
        const struct res_view *res = t->rg[t->cur_rg].res;
        jsonw_arr_end(&t->w); /* scopeSpans */
        if (res->schema_url.len > 0) {
            jsonw_key(&t->w, "schemaUrl");
            jsonw_str(&t->w, res->schema_url.p, res->schema_url.len);
        }
        jsonw_obj_end(&t->w);
        t->cur_rg = SIZE_MAX;
    }
}

static const char *partial_message(struct traces_trace *t)
{
    qctx_warnings_join(&t->q, t->warn, sizeof(t->warn)); /* a block may have failed since */
    return t->warn[0] != '\0' ? t->warn : NULL;
}

static int render_json(struct traces_trace *t, struct evbuffer *out, size_t chunk)
{
    struct jsonw *w = &t->w;
    w->out = out;
    if (!t->started) {
        jsonw_init(w, out);
        jsonw_obj_begin(w);
        if (t->fmt == TRACES_JSON_V1) {
            jsonw_key(w, "batches");
        } else {
            jsonw_key(w, "trace");
            jsonw_obj_begin(w);
            jsonw_key(w, "resourceSpans");
        }
        jsonw_arr_begin(w);
        t->started = true;
    }
    size_t start_len = evbuffer_get_length(out);
    while (t->pos < t->n) {
        /* Which groups does this span belong to? Groups are in ref order. */
        size_t rgi = t->cur_rg == SIZE_MAX ? 0 : t->cur_rg;
        while (t->rg[rgi].end <= t->pos) {
            rgi++;
        }
        size_t sgi = t->cur_sg == SIZE_MAX ? 0 : t->cur_sg;
        while (t->sg[sgi].end <= t->pos) {
            sgi++;
        }
        if (rgi != t->cur_rg) {
            json_close_rg(t);
            jsonw_obj_begin(w);
            jsonw_key(w, "resource");
            otlpenc_json_resource(w, t->rg[rgi].res);
            jsonw_key(w, "scopeSpans");
            jsonw_arr_begin(w);
            t->cur_rg = rgi;
        }
        if (sgi != t->cur_sg) {
            json_close_sg(t);
            jsonw_obj_begin(w);
            jsonw_key(w, "scope");
            otlpenc_json_scope(w, t->sg[sgi].sc);
            jsonw_key(w, "spans");
            jsonw_arr_begin(w);
            t->cur_sg = sgi;
        }
        struct span_view v;
        if (ref_span(t, &t->refs[t->pos], &v) < 0) {
            return -EBADMSG;
        }
        otlpenc_json_span(w, &v);
        t->pos++;
        if (w->err != 0) {
            return w->err;
        }
        if (evbuffer_get_length(out) - start_len >= chunk) {
            return 1;
        }
    }
    json_close_rg(t);
    jsonw_arr_end(w);
    if (t->fmt == TRACES_JSON_V2) {
        jsonw_obj_end(w); /* trace */
        const char *msg = partial_message(t);
        if (msg != NULL) {
            jsonw_key(w, "status");
            jsonw_cstr(w, "PARTIAL");
            jsonw_key(w, "message");
            jsonw_cstr(w, msg);
        }
    }
    jsonw_obj_end(w);
    return w->err != 0 ? w->err : 0;
}

static int render_pb(struct traces_trace *t, struct evbuffer *out, size_t chunk)
{
    struct pbw s;
    pbw_init(&s, out);
    if (!t->started) {
        uint64_t trace_bytes;
        if (pb_sizes(t, &trace_bytes) < 0) {
            return -EBADMSG;
        }
        if (t->fmt == TRACES_PB_V2) {
            pbw_len(&s, 1, trace_bytes); /* TraceByIDResponse.trace */
        }
        t->started = true;
    }
    while (t->pos < t->n) {
        size_t rgi = t->cur_rg == SIZE_MAX ? 0 : t->cur_rg;
        while (t->rg[rgi].end <= t->pos) {
            rgi++;
        }
        size_t sgi = t->cur_sg == SIZE_MAX ? 0 : t->cur_sg;
        while (t->sg[sgi].end <= t->pos) {
            sgi++;
        }
        if (rgi != t->cur_rg) {
            t->cur_rg = rgi;
            pbw_len(&s, 1, t->rg[rgi].pb_size); /* Trace.resourceSpans */
            struct pbw c;
            pbw_init(&c, NULL);
            otlpenc_pb_resource(&c, t->rg[rgi].res);
            pbw_len(&s, 1, c.n); /* ResourceSpans.resource */
            otlpenc_pb_resource(&s, t->rg[rgi].res);
        }
        if (sgi != t->cur_sg) {
            t->cur_sg = sgi;
            pbw_len(&s, 2, t->sg[sgi].pb_size); /* ResourceSpans.scope_spans */
            struct pbw c;
            pbw_init(&c, NULL);
            otlpenc_pb_scope(&c, t->sg[sgi].sc);
            pbw_len(&s, 1, c.n); /* ScopeSpans.scope */
            otlpenc_pb_scope(&s, t->sg[sgi].sc);
        }
        struct span_view v;
        if (ref_span(t, &t->refs[t->pos], &v) < 0) {
            return -EBADMSG;
        }
        pbw_len(&s, 2, t->refs[t->pos].pb_size); /* ScopeSpans.spans */
        otlpenc_pb_span(&s, &v);
        t->pos++;
        /* Schema URLs close their group (written after its members). */
        const struct sgroup *sg = &t->sg[sgi];
        if (t->pos == sg->end && sg->sc->schema_url.len > 0) {
            pbw_bytes(&s, 3, sg->sc->schema_url.p, sg->sc->schema_url.len);
        }
        const struct rgroup *rg = &t->rg[rgi];
        if (t->pos == rg->end && rg->res->schema_url.len > 0) {
            pbw_bytes(&s, 3, rg->res->schema_url.p, rg->res->schema_url.len);
        }
        if (s.n >= chunk) {
            pbw_flush(&s);
            return 1;
        }
    }
    if (t->fmt == TRACES_PB_V2) {
        const char *msg = partial_message(t);
        if (msg != NULL) {
            pbw_tag(&s, 3, 0);
            pbw_varint(&s, 1); /* PARTIAL */
            pbw_bytes(&s, 4, msg, strlen(msg));
        }
    }
    pbw_flush(&s);
    return 0;
}

int traces_render(struct traces_trace *t, enum traces_fmt fmt, struct evbuffer *out, size_t chunk)
{
    if (!t->started) {
        t->fmt = fmt;
        t->pos = 0;
        t->cur_rg = t->cur_sg = SIZE_MAX;
    }
    if (chunk == 0) {
        chunk = 1;
    }
    if (t->fmt == TRACES_JSON_V1 || t->fmt == TRACES_JSON_V2) {
        return render_json(t, out, chunk);
    }
    return render_pb(t, out, chunk);
}
