/*
 * traces.c - TraceQL execution and trace lookup (see traces.h for the
 * plan); the OTLP encoders are in traces_otlp.c.
 *
 * A query runs on a query context (query/qctx.h): one catalog snapshot
 * for its whole life, sealed blocks (referenced) and open blocks with the
 * row count visible when it was taken, so span views (which point into
 * the blocks) stay valid until the query ends. Scans fan out one source
 * (block) per qpool_parallel item; each item writes only its own slot,
 * merged once afterwards, so no lock is taken per row. Limits are checked
 * every SCAN_STRIDE rows; the clock (deadline, cancel) and a regex that
 * hit its match limit every CLOCK_STRIDE rows where rows run the query's
 * filters, and per trace.
 */
#include "query/traces.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "query/jsonw.h"
#include "query/pool.h"
#include "query/qctx.h"
#include "query/traces_int.h"
#include "storage/arena.h"
#include "storage/catalog.h"

/* Rows between two limit checks in a scan. */
#define SCAN_STRIDE 4096
/* Rows between two looks at the clock where each row runs the query's
 * filters (a regex near its match limit can take milliseconds a row). */
#define CLOCK_STRIDE 16

/* ---- query context ---- */

/* The query's snapshot of the traces signal (query/qctx.h). */
static int tq_open(struct qctx *q, const struct traces_limits *lim)
{
    struct qctx_limits l = {0};
    if (lim != NULL) {
        l = (struct qctx_limits){.max_rows = lim->max_rows,
                                 .max_memory = lim->max_memory,
                                 .deadline_ns = lim->deadline_ns,
                                 .cancel = lim->cancel};
    }
    int rc = qctx_open(q, SIG_TRACES, &l, "spans");
    if (rc < 0) {
        return rc;
    }
    q->st.blocks_considered = q->n_src;
    return 0;
}

static void set_err(char *err, size_t errlen, int rc)
{
    switch (rc) {
    case -ETIMEDOUT:
        snprintf(err, errlen, "query timed out (--query-timeout)");
        break;
    case -ECANCELED:
        snprintf(err, errlen, "query canceled: the client went away");
        break;
    case -E2BIG:
        snprintf(err, errlen, "query scanned more rows than --query-max-rows allows");
        break;
    case -ENOMEM:
        snprintf(err, errlen, "query needs more memory than --query-memory allows");
        break;
    default:
        snprintf(err, errlen, "query failed: %s", strerror(-rc));
        break;
    }
}

/* set_err for the query's error, with the regex case told apart. */
static void tq_err_msg(struct qctx *q, char *err, size_t errlen, int rc)
{
    if (rc == -E2BIG && qctx_cause(q) == QCTX_REGEX) {
        snprintf(err, errlen,
                 "a regular expression of the query needs too much backtracking (PCRE2 match "
                 "limit); simplify it, e.g. avoid nested or overlapping repetitions such as "
                 "(a|aa)+ or (a+)+");
        return;
    }
    set_err(err, errlen, rc);
}

int traces_parse_id(const char *s, size_t n, uint8_t id[16])
{
    if (n == 0 || n > 32) {
        return -EINVAL;
    }
    memset(id, 0, 16);
    for (size_t i = 0; i < n; i++) {
        char c = s[n - 1 - i];
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            d = (unsigned)(c - 'A' + 10);
        } else {
            return -EINVAL;
        }
        id[15 - i / 2] |= (uint8_t)(i % 2 == 0 ? d : d << 4);
    }
    return 0;
}

/* ---- trace by id ---- */

struct tref {
    uint32_t src;
    uint32_t pb_size; /* Span message bytes (protobuf sizing pass) */
    uint64_t row;
    uint64_t start;
    const struct scope_view *sc;
    uint32_t tix;       /* search: the candidate trace the row belongs to */
    uint8_t span_id[8]; /* by id: duplicates (an export retried) go out once */
    int32_t kind;
};

/* Per-source hits of a scan (each item writes only its own). */
struct hits {
    struct tref *v;
    size_t n, cap;
};

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

static int hits_push(struct qctx *q, struct hits *h, const struct tref *r)
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
            if (hits_push(q, h, &t) < 0) {
                return;
            }
        }
    }
    if (qctx_scan_end(&it) != 0) {
        return;
    }
    /* Rendering reads every table: verify them now, so a damaged block
     * is left out before the first byte goes out rather than midway. */
    if (h->n > 0 && qctx_load(q, s, BLK_ALL) < 0) {
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

static int mstr_cmp(const struct mstr *a, const struct mstr *b)
{
    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
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
        set_err(err, errlen, -ENOMEM);
        return -ENOMEM;
    }
    int rc = tq_open(&t->q, lim);
    if (rc < 0) {
        free(t);
        set_err(err, errlen, rc);
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
        set_err(err, errlen, rc);
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
        struct pbs c;
        pbs_init(&c, NULL);
        totlp_pb_resource(&c, rg->res);
        uint64_t rsz = 1 + pbs_varint_size(c.n) + c.n;
        for (; si < t->n_sg && t->sg[si].first < rg->end; si++) {
            struct sgroup *sg = &t->sg[si];
            pbs_init(&c, NULL);
            totlp_pb_scope(&c, sg->sc);
            uint64_t ssz = 1 + pbs_varint_size(c.n) + c.n;
            for (size_t i = sg->first; i < sg->end; i++) {
                struct span_view v;
                if (ref_span(t, &t->refs[i], &v) < 0) {
                    return -EBADMSG;
                }
                size_t n = totlp_pb_span_size(&v);
                t->refs[i].pb_size = (uint32_t)n;
                ssz += 1 + pbs_varint_size(n) + n;
            }
            if (sg->sc->schema_url.len > 0) {
                ssz += 1 + pbs_varint_size(sg->sc->schema_url.len) + sg->sc->schema_url.len;
            }
            sg->pb_size = ssz;
            rsz += 1 + pbs_varint_size(ssz) + ssz;
        }
        if (rg->res->schema_url.len > 0) {
            rsz += 1 + pbs_varint_size(rg->res->schema_url.len) + rg->res->schema_url.len;
        }
        rg->pb_size = rsz;
        total += 1 + pbs_varint_size(rsz) + rsz;
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
            totlp_json_resource(w, t->rg[rgi].res);
            jsonw_key(w, "scopeSpans");
            jsonw_arr_begin(w);
            t->cur_rg = rgi;
        }
        if (sgi != t->cur_sg) {
            json_close_sg(t);
            jsonw_obj_begin(w);
            jsonw_key(w, "scope");
            totlp_json_scope(w, t->sg[sgi].sc);
            jsonw_key(w, "spans");
            jsonw_arr_begin(w);
            t->cur_sg = sgi;
        }
        struct span_view v;
        if (ref_span(t, &t->refs[t->pos], &v) < 0) {
            return -EBADMSG;
        }
        totlp_json_span(w, &v);
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
    struct pbs s;
    pbs_init(&s, out);
    if (!t->started) {
        uint64_t trace_bytes;
        if (pb_sizes(t, &trace_bytes) < 0) {
            return -EBADMSG;
        }
        if (t->fmt == TRACES_PB_V2) {
            pbs_len(&s, 1, trace_bytes); /* TraceByIDResponse.trace */
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
            pbs_len(&s, 1, t->rg[rgi].pb_size); /* Trace.resourceSpans */
            struct pbs c;
            pbs_init(&c, NULL);
            totlp_pb_resource(&c, t->rg[rgi].res);
            pbs_len(&s, 1, c.n); /* ResourceSpans.resource */
            totlp_pb_resource(&s, t->rg[rgi].res);
        }
        if (sgi != t->cur_sg) {
            t->cur_sg = sgi;
            pbs_len(&s, 2, t->sg[sgi].pb_size); /* ResourceSpans.scope_spans */
            struct pbs c;
            pbs_init(&c, NULL);
            totlp_pb_scope(&c, t->sg[sgi].sc);
            pbs_len(&s, 1, c.n); /* ScopeSpans.scope */
            totlp_pb_scope(&s, t->sg[sgi].sc);
        }
        struct span_view v;
        if (ref_span(t, &t->refs[t->pos], &v) < 0) {
            return -EBADMSG;
        }
        pbs_len(&s, 2, t->refs[t->pos].pb_size); /* ScopeSpans.spans */
        totlp_pb_span(&s, &v);
        t->pos++;
        /* Schema URLs close their group (written after its members). */
        const struct sgroup *sg = &t->sg[sgi];
        if (t->pos == sg->end && sg->sc->schema_url.len > 0) {
            pbs_bytes(&s, 3, sg->sc->schema_url.p, sg->sc->schema_url.len);
        }
        const struct rgroup *rg = &t->rg[rgi];
        if (t->pos == rg->end && rg->res->schema_url.len > 0) {
            pbs_bytes(&s, 3, rg->res->schema_url.p, rg->res->schema_url.len);
        }
        if (s.n >= chunk) {
            pbs_flush(&s);
            return 1;
        }
    }
    if (t->fmt == TRACES_PB_V2) {
        const char *msg = partial_message(t);
        if (msg != NULL) {
            pbs_tag(&s, 3, 0);
            pbs_varint(&s, 1); /* PARTIAL */
            pbs_bytes(&s, 4, msg, strlen(msg));
        }
    }
    pbs_flush(&s);
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

/* ---- TraceQL evaluation over one assembled trace ---- */

struct espan {
    struct span_view v;
    uint32_t src;
    uint64_t row;
    int32_t parent; /* index in the trace, -1: none (or not in the trace) */
    uint32_t children;
};

struct etrace {
    uint8_t id[16];
    struct espan *s; /* sorted by start time */
    uint32_t n;
    int32_t root; /* first span without a parent, -1 */
    uint64_t start, end;
    bool whole; /* false: a lone span (seed scan): no trace-level values */
};

/* One value: the static types of the parser, NIL when absent. */
struct tv {
    enum traceql_type t;
    int64_t i;
    double f;
    const char *s;
    size_t n;
};

struct ectx {
    const struct etrace *tr;
    arena *a; /* spansets, reset per trace */
    char hex[4][40];
    unsigned hexi;
};

static const struct tv tv_nil = {.t = TRACEQL_T_NIL};

static struct tv tv_str(const char *s, size_t n)
{
    return (struct tv){.t = TRACEQL_T_STRING, .s = s, .n = n};
}

static struct tv tv_int(enum traceql_type t, int64_t i)
{
    return (struct tv){.t = t, .i = i};
}

static struct tv tv_hex(struct ectx *e, const uint8_t *p, size_t n)
{
    char *b = e->hex[e->hexi++ & 3];
    totlp_hex(p, n, b);
    return tv_str(b, 2 * n);
}

static bool is_num(enum traceql_type t)
{
    return t == TRACEQL_T_INT || t == TRACEQL_T_FLOAT || t == TRACEQL_T_DURATION;
}

static double num(const struct tv *v)
{
    return v->t == TRACEQL_T_FLOAT ? v->f : (double)v->i;
}

/* A stored scalar as a value; containers and bytes are not comparable. */
static struct tv tv_of_val(const struct val *v)
{
    switch (v->type) {
    case VAL_STR:
        return tv_str(v->s, v->n);
    case VAL_INT:
        return tv_int(TRACEQL_T_INT, v->i);
    case VAL_BOOL:
        return tv_int(TRACEQL_T_BOOL, v->b);
    case VAL_DOUBLE:
        return (struct tv){.t = TRACEQL_T_FLOAT, .f = v->d};
    default:
        return tv_nil;
    }
}

static bool attrs_find(const struct oattrs *a, const char *k, size_t kn, struct val *out)
{
    struct val_rd r = {a->p, a->p + a->len};
    for (uint32_t i = 0; i < a->count; i++) {
        const char *key;
        size_t n;
        if (val_rd_kv(&r, &key, &n, out) < 0) {
            return false;
        }
        if (n == kn && memcmp(key, k, n) == 0) {
            return true;
        }
    }
    return false;
}

/* Visits the values of a leaf: false from |fn| stops. Returns the number
 * visited. Arrays give their scalar elements. */
typedef bool (*tv_fn)(void *ctx, const struct tv *v);

struct visit {
    tv_fn fn;
    void *ctx;
    size_t n;
    bool stop;
};

static void visit_one(struct visit *vi, const struct tv *v)
{
    if (vi->stop || v->t == TRACEQL_T_NIL) {
        return;
    }
    vi->n++;
    if (!vi->fn(vi->ctx, v)) {
        vi->stop = true;
    }
}

static void visit_val(struct visit *vi, const struct val *v)
{
    if (v->type != VAL_ARRAY) {
        struct tv x = tv_of_val(v);
        visit_one(vi, &x);
        return;
    }
    struct val_rd r = v->inner;
    for (uint32_t i = 0; i < v->count && !vi->stop; i++) {
        struct val m;
        if (val_rd_value(&r, &m) < 0) {
            return;
        }
        struct tv x = tv_of_val(&m);
        visit_one(vi, &x);
    }
}

/* One attribute list: visits the key's value; true when present. */
static bool visit_attrs(struct visit *vi, const struct oattrs *a, const struct traceql_field *f)
{
    struct val v;
    if (!attrs_find(a, f->name, f->name_len, &v)) {
        return false;
    }
    visit_val(vi, &v);
    return true;
}

static bool visit_events(struct visit *vi, const struct span_view *sv,
                         const struct traceql_field *f)
{
    struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
    bool any = false;
    for (uint32_t i = 0; i < sv->n_events && !vi->stop; i++) {
        uint64_t t;
        const char *name;
        size_t nn;
        struct oattrs at;
        if (totlp_event_next(&r, &t, &name, &nn, &at) < 0) {
            break;
        }
        any |= visit_attrs(vi, &at, f);
    }
    return any;
}

static bool visit_links(struct visit *vi, const struct span_view *sv, const struct traceql_field *f)
{
    struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
    bool any = false;
    for (uint32_t i = 0; i < sv->n_links && !vi->stop; i++) {
        const uint8_t *tid, *sid;
        struct oattrs at;
        if (totlp_link_next(&r, &tid, &sid, &at) < 0) {
            break;
        }
        any |= visit_attrs(vi, &at, f);
    }
    return any;
}

static bool is_multi(const struct traceql_field *f)
{
    if (f->kind == TRACEQL_F_ATTR) {
        return true;
    }
    if (f->kind != TRACEQL_F_INTRINSIC) {
        return false;
    }
    switch (f->intrinsic) {
    case TRACEQL_I_EVENT_NAME:
    case TRACEQL_I_EVENT_TIME_SINCE_START:
    case TRACEQL_I_LINK_TRACE_ID:
    case TRACEQL_I_LINK_SPAN_ID:
        return true;
    default:
        return false;
    }
}

/* Values of a multi-valued leaf (is_multi) on span |sp|. */
static size_t leaf_each(struct ectx *e, const struct traceql_field *f, const struct espan *sp,
                        tv_fn fn, void *ctx)
{
    struct visit vi = {.fn = fn, .ctx = ctx};
    const struct span_view *sv = &sp->v;
    if (f->kind == TRACEQL_F_ATTR) {
        switch (f->scope) {
        case TRACEQL_SCOPE_SPAN:
            visit_attrs(&vi, &sv->attrs, f);
            break;
        case TRACEQL_SCOPE_RESOURCE:
            visit_attrs(&vi, &sv->resource->attrs, f);
            break;
        case TRACEQL_SCOPE_EVENT:
            visit_events(&vi, sv, f);
            break;
        case TRACEQL_SCOPE_LINK:
            visit_links(&vi, sv, f);
            break;
        case TRACEQL_SCOPE_INSTRUMENTATION:
            visit_attrs(&vi, &sv->scope->attrs, f);
            break;
        case TRACEQL_SCOPE_ANY:
            /* span, then resource, event, link, instrumentation: first hit wins */
            if (!visit_attrs(&vi, &sv->attrs, f) && !visit_attrs(&vi, &sv->resource->attrs, f) &&
                !visit_events(&vi, sv, f) && !visit_links(&vi, sv, f)) {
                visit_attrs(&vi, &sv->scope->attrs, f);
            }
            break;
        }
        return vi.n;
    }
    if (f->intrinsic == TRACEQL_I_EVENT_NAME || f->intrinsic == TRACEQL_I_EVENT_TIME_SINCE_START) {
        struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
        for (uint32_t i = 0; i < sv->n_events && !vi.stop; i++) {
            uint64_t t;
            const char *name;
            size_t nn;
            struct oattrs at;
            if (totlp_event_next(&r, &t, &name, &nn, &at) < 0) {
                break;
            }
            struct tv x = f->intrinsic == TRACEQL_I_EVENT_NAME
                              ? tv_str(name, nn)
                              : tv_int(TRACEQL_T_DURATION, (int64_t)(t - sv->start_ns));
            visit_one(&vi, &x);
        }
    } else {
        struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
        for (uint32_t i = 0; i < sv->n_links && !vi.stop; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (totlp_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            struct tv x =
                f->intrinsic == TRACEQL_I_LINK_TRACE_ID ? tv_hex(e, tid, 16) : tv_hex(e, sid, 8);
            visit_one(&vi, &x);
        }
    }
    return vi.n;
}

static bool take_first(void *ctx, const struct tv *v)
{
    *(struct tv *)ctx = *v;
    return false;
}

static bool service_name(const struct res_view *r, struct mstr *out)
{
    struct val v;
    if (attrs_find(&r->attrs, "service.name", 12, &v) && v.type == VAL_STR) {
        out->p = v.s;
        out->len = (uint32_t)v.n;
        return true;
    }
    return false;
}

static struct tv root_service(const struct etrace *tr)
{
    struct mstr m;
    if (tr->root < 0 || !service_name(tr->s[tr->root].v.resource, &m)) {
        return tv_nil;
    }
    return tv_str(m.p, m.len);
}

static struct tv eval_val(struct ectx *e, const struct traceql_field *f, const struct espan *sp);
static bool eval_bool(struct ectx *e, const struct traceql_field *f, const struct espan *sp);

static struct tv intrinsic(struct ectx *e, enum traceql_intrinsic i, const struct espan *sp)
{
    const struct span_view *v = &sp->v;
    const struct etrace *tr = e->tr;
    switch (i) {
    case TRACEQL_I_NAME:
        return tv_str(v->name.p, v->name.len);
    case TRACEQL_I_STATUS:
        return tv_int(TRACEQL_T_STATUS, v->status_code);
    case TRACEQL_I_STATUS_MESSAGE:
        return tv_str(v->status_message.p, v->status_message.len);
    case TRACEQL_I_KIND:
        return tv_int(TRACEQL_T_KIND, v->kind);
    case TRACEQL_I_DURATION:
        return tv_int(TRACEQL_T_DURATION, (int64_t)(v->end_ns - v->start_ns));
    case TRACEQL_I_SPAN_ID:
        return tv_hex(e, v->span_id, 8);
    case TRACEQL_I_PARENT_ID:
        return v->has_parent ? tv_hex(e, v->parent_span_id, 8) : tv_nil;
    case TRACEQL_I_CHILD_COUNT:
        return tr->whole ? tv_int(TRACEQL_T_INT, sp->children) : tv_nil;
    case TRACEQL_I_ROOT_NAME:
        if (!tr->whole || tr->root < 0) {
            return tv_nil;
        }
        return tv_str(tr->s[tr->root].v.name.p, tr->s[tr->root].v.name.len);
    case TRACEQL_I_ROOT_SERVICE:
        return tr->whole ? root_service(tr) : tv_nil;
    case TRACEQL_I_TRACE_DURATION:
        return tr->whole ? tv_int(TRACEQL_T_DURATION, (int64_t)(tr->end - tr->start)) : tv_nil;
    case TRACEQL_I_TRACE_ID:
        return tv_hex(e, v->trace_id, 16);
    case TRACEQL_I_INSTR_NAME:
        return tv_str(v->scope->name.p, v->scope->name.len);
    case TRACEQL_I_INSTR_VERSION:
        return tv_str(v->scope->version.p, v->scope->version.len);
    default: {
        struct tv x = tv_nil;
        struct traceql_field leaf = {.kind = TRACEQL_F_INTRINSIC, .intrinsic = i};
        leaf_each(e, &leaf, sp, take_first, &x);
        return x;
    }
    }
}

static struct tv arith(enum traceql_op op, struct tv a, struct tv b)
{
    if (!is_num(a.t) || !is_num(b.t)) {
        return tv_nil;
    }
    enum traceql_type t = (a.t == TRACEQL_T_FLOAT || b.t == TRACEQL_T_FLOAT) ? TRACEQL_T_FLOAT
                          : (a.t == TRACEQL_T_DURATION || b.t == TRACEQL_T_DURATION)
                              ? TRACEQL_T_DURATION
                              : TRACEQL_T_INT;
    if (op == TRACEQL_OP_POW) {
        double r = 1, x = num(&a);
        double y = num(&b);
        /* integer exponents exactly; others through exp/log would need libm */
        if (y >= 0 && y == (double)(int64_t)y && y < 1024) {
            for (int64_t k = 0; k < (int64_t)y; k++) {
                r *= x;
            }
            return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
        }
        return tv_nil;
    }
    if (t == TRACEQL_T_FLOAT) {
        double x = num(&a), y = num(&b), r;
        switch (op) {
        case TRACEQL_OP_ADD:
            r = x + y;
            break;
        case TRACEQL_OP_SUB:
            r = x - y;
            break;
        case TRACEQL_OP_MUL:
            r = x * y;
            break;
        case TRACEQL_OP_DIV:
            if (y == 0) {
                return tv_nil;
            }
            r = x / y;
            break;
        default:
            return tv_nil;
        }
        return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
    }
    int64_t x = a.i, y = b.i, r;
    switch (op) {
    case TRACEQL_OP_ADD:
        r = (int64_t)((uint64_t)x + (uint64_t)y);
        break;
    case TRACEQL_OP_SUB:
        r = (int64_t)((uint64_t)x - (uint64_t)y);
        break;
    case TRACEQL_OP_MUL:
        r = (int64_t)((uint64_t)x * (uint64_t)y);
        break;
    case TRACEQL_OP_DIV:
    case TRACEQL_OP_MOD:
        if (y == 0 || (x == INT64_MIN && y == -1)) {
            return tv_nil;
        }
        r = op == TRACEQL_OP_DIV ? x / y : x % y;
        break;
    default:
        return tv_nil;
    }
    return tv_int(t, r);
}

static struct tv eval_val(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    switch (f->kind) {
    case TRACEQL_F_STATIC:
        return (struct tv){.t = f->st.type, .i = f->st.i, .f = f->st.f, .s = f->st.s, .n = f->st.n};
    case TRACEQL_F_INTRINSIC:
        return intrinsic(e, f->intrinsic, sp);
    case TRACEQL_F_ATTR: {
        struct tv x = tv_nil;
        leaf_each(e, f, sp, take_first, &x);
        return x;
    }
    case TRACEQL_F_UNARY:
        if (f->op == TRACEQL_OP_NOT) {
            return tv_int(TRACEQL_T_BOOL, !eval_bool(e, f->l, sp));
        } else {
            struct tv x = eval_val(e, f->l, sp);
            if (x.t == TRACEQL_T_FLOAT) {
                x.f = -x.f;
            } else if (is_num(x.t)) {
                x.i = (int64_t)(0 - (uint64_t)x.i);
            } else {
                x = tv_nil;
            }
            return x;
        }
    case TRACEQL_F_BINARY:
        if (f->op >= TRACEQL_OP_ADD) {
            return arith(f->op, eval_val(e, f->l, sp), eval_val(e, f->r, sp));
        }
        return tv_int(TRACEQL_T_BOOL, eval_bool(e, f, sp));
    }
    return tv_nil;
}

static int cmp3(int c, enum traceql_op op)
{
    switch (op) {
    case TRACEQL_OP_EQ:
        return c == 0;
    case TRACEQL_OP_NE:
        return c != 0;
    case TRACEQL_OP_GT:
        return c > 0;
    case TRACEQL_OP_GE:
        return c >= 0;
    case TRACEQL_OP_LT:
        return c < 0;
    case TRACEQL_OP_LE:
        return c <= 0;
    default:
        return 0;
    }
}

/* a op b under Tempo's typing: incompatible operands compare false. */
static bool cmp_tv(enum traceql_op op, const struct tv *a, const struct tv *b,
                   const struct traceql_field *f)
{
    if (a->t == TRACEQL_T_NIL || b->t == TRACEQL_T_NIL) {
        return false;
    }
    if (op == TRACEQL_OP_RE || op == TRACEQL_OP_NRE) {
        return a->t == TRACEQL_T_STRING && f->re != NULL && traceql_regex_match(f, a->s, a->n);
    }
    int c;
    if (is_num(a->t) && is_num(b->t)) {
        if (a->t != TRACEQL_T_FLOAT && b->t != TRACEQL_T_FLOAT) {
            c = a->i < b->i ? -1 : a->i > b->i;
        } else {
            double x = num(a), y = num(b);
            if (x != x || y != y) {
                return op == TRACEQL_OP_NE;
            }
            c = x < y ? -1 : x > y;
        }
    } else if (a->t == TRACEQL_T_STRING && b->t == TRACEQL_T_STRING) {
        size_t m = a->n < b->n ? a->n : b->n;
        c = m ? memcmp(a->s, b->s, m) : 0;
        if (c == 0) {
            c = a->n < b->n ? -1 : a->n > b->n;
        }
    } else if (a->t == b->t &&
               (a->t == TRACEQL_T_BOOL || a->t == TRACEQL_T_STATUS || a->t == TRACEQL_T_KIND)) {
        if (op != TRACEQL_OP_EQ && op != TRACEQL_OP_NE) {
            return false;
        }
        c = a->i < b->i ? -1 : a->i > b->i;
    } else {
        return false;
    }
    return cmp3(c, op);
}

struct cmp_each {
    enum traceql_op op;
    const struct tv *other;
    bool leaf_left;
    const struct traceql_field *f;
    bool any, all;
};

static bool cmp_each_fn(void *ctx, const struct tv *v)
{
    struct cmp_each *c = ctx;
    bool r = c->leaf_left ? cmp_tv(c->op, v, c->other, c->f) : cmp_tv(c->op, c->other, v, c->f);
    c->any |= r;
    c->all &= r;
    /* positive operators stop at the first hit, negative ones at the first miss */
    return (c->op == TRACEQL_OP_NE || c->op == TRACEQL_OP_NRE) ? r : !r;
}

static bool count_fn(void *ctx, const struct tv *v)
{
    (void)ctx, (void)v;
    return false;
}

static bool eval_cmp(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    const struct traceql_field *l = f->l, *r = f->r;
    bool lnil = l->kind == TRACEQL_F_STATIC && l->st.type == TRACEQL_T_NIL;
    bool rnil = r->kind == TRACEQL_F_STATIC && r->st.type == TRACEQL_T_NIL;
    if (lnil || rnil) {
        const struct traceql_field *x = rnil ? l : r;
        bool present = is_multi(x) ? leaf_each(e, x, sp, count_fn, NULL) > 0
                                   : eval_val(e, x, sp).t != TRACEQL_T_NIL;
        if (lnil && rnil) {
            present = false;
        }
        return f->op == TRACEQL_OP_EQ ? !present : f->op == TRACEQL_OP_NE ? present : false;
    }
    bool ml = is_multi(l), mr = !ml && is_multi(r);
    if (!ml && !mr) {
        struct tv a = eval_val(e, l, sp), b = eval_val(e, r, sp);
        return cmp_tv(f->op, &a, &b, f);
    }
    struct tv other = eval_val(e, ml ? r : l, sp);
    struct cmp_each c = {.op = f->op, .other = &other, .leaf_left = ml, .f = f, .all = true};
    size_t n = leaf_each(e, ml ? l : r, sp, cmp_each_fn, &c);
    if (f->op == TRACEQL_OP_NE || f->op == TRACEQL_OP_NRE) {
        return n > 0 && c.all; /* every element must differ */
    }
    return c.any;
}

static bool eval_bool(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    if (f->kind == TRACEQL_F_BINARY) {
        switch (f->op) {
        case TRACEQL_OP_AND:
            return eval_bool(e, f->l, sp) && eval_bool(e, f->r, sp);
        case TRACEQL_OP_OR:
            return eval_bool(e, f->l, sp) || eval_bool(e, f->r, sp);
        case TRACEQL_OP_EQ:
        case TRACEQL_OP_NE:
        case TRACEQL_OP_GT:
        case TRACEQL_OP_GE:
        case TRACEQL_OP_LT:
        case TRACEQL_OP_LE:
        case TRACEQL_OP_RE:
        case TRACEQL_OP_NRE:
            return eval_cmp(e, f, sp);
        default:
            break;
        }
    }
    if (f->kind == TRACEQL_F_UNARY && f->op == TRACEQL_OP_NOT) {
        return !eval_bool(e, f->l, sp);
    }
    struct tv v = eval_val(e, f, sp);
    return v.t == TRACEQL_T_BOOL && v.i != 0;
}

/* ---- spansets ---- */

struct sset {
    uint32_t *idx; /* ascending span indexes */
    uint32_t n;
};

struct slist {
    struct sset *v;
    size_t n, cap;
};

static int sl_push(struct ectx *e, struct slist *l, struct sset s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct sset *v = arena_alloc(e->a, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        if (l->n) {
            memcpy(v, l->v, l->n * sizeof(*v));
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static uint8_t *mark_new(struct ectx *e)
{
    uint8_t *m = arena_alloc(e->a, e->tr->n + 1);
    if (m != NULL) {
        memset(m, 0, e->tr->n + 1);
    }
    return m;
}

/* The spans marked in |m| as one spanset (none when empty). */
static int sset_of_mark(struct ectx *e, const uint8_t *m, struct slist *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->tr->n; i++) {
        n += m[i] != 0;
    }
    if (n == 0) {
        return 0;
    }
    struct sset s = {.idx = arena_alloc(e->a, n * sizeof(uint32_t)), .n = 0};
    if (s.idx == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < e->tr->n; i++) {
        if (m[i]) {
            s.idx[s.n++] = i;
        }
    }
    return sl_push(e, out, s);
}

static int eval_node(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                     struct slist *out);

/* Marks the spans of every spanset of |l|. */
static void mark_list(const struct slist *l, uint8_t *m)
{
    for (size_t i = 0; i < l->n; i++) {
        for (uint32_t k = 0; k < l->v[i].n; k++) {
            m[l->v[i].idx[k]] = 1;
        }
    }
}

static bool has_ancestor_in(const struct etrace *tr, uint32_t i, const uint8_t *set)
{
    int32_t p = tr->s[i].parent;
    for (uint32_t guard = 0; p >= 0 && guard < tr->n; guard++) {
        if (set[p]) {
            return true;
        }
        p = tr->s[p].parent;
    }
    return false;
}

/* Structural relation between the marked L and R spans: which R spans
 * satisfy it (rm), and for the &-forms which L spans take part (lm). */
static int structural(struct ectx *e, enum traceql_sop op, const uint8_t *L, const uint8_t *R,
                      uint8_t *out)
{
    const struct etrace *tr = e->tr;
    uint32_t n = tr->n;
    uint8_t *hit = mark_new(e), *lhit = mark_new(e);
    uint32_t *cnt = arena_alloc(e->a, (n + 1) * sizeof(uint32_t));
    if (hit == NULL || lhit == NULL || cnt == NULL) {
        return -ENOMEM;
    }
    enum traceql_sop base = op;
    if (op >= TRACEQL_SOP_UNION_CHILD && op <= TRACEQL_SOP_UNION_SIBLING) {
        base = (enum traceql_sop)(op - TRACEQL_SOP_UNION_CHILD + TRACEQL_SOP_CHILD);
    } else if (op >= TRACEQL_SOP_NOT_CHILD) {
        base = (enum traceql_sop)(op - TRACEQL_SOP_NOT_CHILD + TRACEQL_SOP_CHILD);
    }
    switch (base) {
    case TRACEQL_SOP_CHILD: /* R spans whose parent is in L */
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (R[i] && p >= 0 && L[p]) {
                hit[i] = 1;
                lhit[p] = 1;
            }
        }
        break;
    case TRACEQL_SOP_DESC: /* R spans with an ancestor in L */
        for (uint32_t i = 0; i < n; i++) {
            if (R[i] && has_ancestor_in(tr, i, L)) {
                hit[i] = 1;
                int32_t p = tr->s[i].parent;
                for (uint32_t g = 0; p >= 0 && g < n; g++, p = tr->s[p].parent) {
                    if (L[p]) {
                        lhit[p] = 1;
                    }
                }
            }
        }
        break;
    case TRACEQL_SOP_PARENT: /* R spans that are the parent of an L span */
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (L[i] && p >= 0 && R[p]) {
                hit[p] = 1;
                lhit[i] = 1;
            }
        }
        break;
    case TRACEQL_SOP_ANCESTOR: /* R spans that are an ancestor of an L span */
        for (uint32_t i = 0; i < n; i++) {
            if (!L[i]) {
                continue;
            }
            int32_t p = tr->s[i].parent;
            for (uint32_t g = 0; p >= 0 && g < n; g++, p = tr->s[p].parent) {
                if (R[p]) {
                    hit[p] = 1;
                    lhit[i] = 1;
                }
            }
        }
        break;
    case TRACEQL_SOP_SIBLING: { /* R spans with a sibling (same parent, not itself) in L */
        memset(cnt, 0, (n + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++) {
            if (L[i] && tr->s[i].parent >= 0) {
                cnt[tr->s[i].parent]++;
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (R[i] && p >= 0 && cnt[p] - (L[i] ? 1u : 0u) > 0) {
                hit[i] = 1;
            }
        }
        /* L spans with a sibling among the matched R spans */
        memset(cnt, 0, (n + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++) {
            if (hit[i]) {
                cnt[tr->s[i].parent]++;
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (L[i] && p >= 0 && cnt[p] - (hit[i] ? 1u : 0u) > 0) {
                lhit[i] = 1;
            }
        }
        break;
    }
    default:
        break;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (op >= TRACEQL_SOP_NOT_CHILD) {
            out[i] = R[i] && !hit[i];
        } else if (op >= TRACEQL_SOP_UNION_CHILD) {
            out[i] = hit[i] || lhit[i];
        } else {
            out[i] = hit[i];
        }
    }
    return 0;
}

/* An aggregate or arithmetic over one spanset. */
static struct tv scalar(struct ectx *e, const struct traceql_scalar *sc, const struct sset *ss)
{
    switch (sc->kind) {
    case TRACEQL_S_STATIC:
        return (struct tv){
            .t = sc->st.type, .i = sc->st.i, .f = sc->st.f, .s = sc->st.s, .n = sc->st.n};
    case TRACEQL_S_BINARY:
        return arith(sc->op, scalar(e, sc->l, ss), scalar(e, sc->r, ss));
    case TRACEQL_S_AGG:
        break;
    }
    if (sc->agg == TRACEQL_AGG_COUNT) {
        return tv_int(TRACEQL_T_INT, ss->n);
    }
    double sum = 0, mn = 0, mx = 0;
    size_t n = 0;
    bool all_int = true;
    enum traceql_type t = TRACEQL_T_INT;
    for (uint32_t k = 0; k < ss->n; k++) {
        struct tv v = eval_val(e, sc->field, &e->tr->s[ss->idx[k]]);
        if (!is_num(v.t)) {
            continue;
        }
        if (v.t == TRACEQL_T_FLOAT) {
            all_int = false;
        }
        if (v.t == TRACEQL_T_DURATION) {
            t = TRACEQL_T_DURATION;
        }
        double x = num(&v);
        sum += x;
        mn = n == 0 || x < mn ? x : mn;
        mx = n == 0 || x > mx ? x : mx;
        n++;
    }
    if (n == 0) {
        return tv_nil;
    }
    double r = sc->agg == TRACEQL_AGG_SUM   ? sum
               : sc->agg == TRACEQL_AGG_MIN ? mn
               : sc->agg == TRACEQL_AGG_MAX ? mx
                                            : sum / (double)n;
    if (all_int && sc->agg != TRACEQL_AGG_AVG) {
        return tv_int(t, (int64_t)r);
    }
    return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
}

static bool tv_same(const struct tv *a, const struct tv *b)
{
    if (a->t != b->t) {
        return false;
    }
    switch (a->t) {
    case TRACEQL_T_NIL:
        return true;
    case TRACEQL_T_FLOAT:
        return a->f == b->f;
    case TRACEQL_T_STRING:
        return a->n == b->n && (a->n == 0 || memcmp(a->s, b->s, a->n) == 0);
    default:
        return a->i == b->i;
    }
}

static int stage_by(struct ectx *e, const struct traceql_field *f, const struct slist *in,
                    struct slist *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const struct sset *ss = &in->v[i];
        struct tv *keys = arena_alloc(e->a, (ss->n + 1) * sizeof(*keys));
        uint32_t *grp = arena_alloc(e->a, (ss->n + 1) * sizeof(*grp));
        if (keys == NULL || grp == NULL) {
            return -ENOMEM;
        }
        uint32_t ng = 0;
        struct tv *gkey = arena_alloc(e->a, (ss->n + 1) * sizeof(*gkey));
        if (gkey == NULL) {
            return -ENOMEM;
        }
        for (uint32_t k = 0; k < ss->n; k++) {
            keys[k] = eval_val(e, f, &e->tr->s[ss->idx[k]]);
            if (keys[k].t == TRACEQL_T_STRING) {
                /* hex buffers rotate: keep a copy */
                char *c = arena_alloc(e->a, keys[k].n + 1);
                if (c == NULL) {
                    return -ENOMEM;
                }
                memcpy(c, keys[k].s, keys[k].n);
                keys[k].s = c;
            }
            uint32_t g = 0;
            while (g < ng && !tv_same(&gkey[g], &keys[k])) {
                g++;
            }
            if (g == ng) {
                gkey[ng++] = keys[k];
            }
            grp[k] = g;
        }
        for (uint32_t g = 0; g < ng; g++) {
            if (gkey[g].t == TRACEQL_T_NIL) {
                continue; /* spans without the field are dropped */
            }
            struct sset s = {.idx = arena_alloc(e->a, ss->n * sizeof(uint32_t)), .n = 0};
            if (s.idx == NULL) {
                return -ENOMEM;
            }
            for (uint32_t k = 0; k < ss->n; k++) {
                if (grp[k] == g) {
                    s.idx[s.n++] = ss->idx[k];
                }
            }
            if (sl_push(e, out, s) < 0) {
                return -ENOMEM;
            }
        }
    }
    return 0;
}

static int eval_pipeline(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                         struct slist *out)
{
    struct slist cur = {0};
    int rc = eval_node(e, nd->input, in, &cur);
    for (size_t i = 0; rc == 0 && i < nd->n_stages && cur.n > 0; i++) {
        const struct traceql_stage *st = &nd->stages[i];
        struct slist next = {0};
        switch (st->kind) {
        case TRACEQL_STAGE_SPANSET:
            rc = eval_node(e, st->node, &cur, &next);
            break;
        case TRACEQL_STAGE_SCALAR_FILTER:
            for (size_t k = 0; rc == 0 && k < cur.n; k++) {
                struct tv a = scalar(e, st->lhs, &cur.v[k]);
                struct tv b = scalar(e, st->rhs, &cur.v[k]);
                if (cmp_tv(st->cmp, &a, &b, NULL)) {
                    rc = sl_push(e, &next, cur.v[k]);
                }
            }
            break;
        case TRACEQL_STAGE_SELECT:
            next = cur;
            break;
        case TRACEQL_STAGE_BY:
            rc = st->n_fields > 0 ? stage_by(e, st->fields[0], &cur, &next) : 0;
            break;
        case TRACEQL_STAGE_COALESCE: {
            uint8_t *m = mark_new(e);
            if (m == NULL) {
                return -ENOMEM;
            }
            mark_list(&cur, m);
            rc = sset_of_mark(e, m, &next);
            break;
        }
        }
        cur = next;
    }
    *out = cur;
    return rc;
}

static int eval_node(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                     struct slist *out)
{
    out->v = NULL;
    out->n = out->cap = 0;
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        for (size_t i = 0; i < in->n; i++) {
            const struct sset *ss = &in->v[i];
            struct sset s = {.idx = arena_alloc(e->a, (ss->n + 1) * sizeof(uint32_t)), .n = 0};
            if (s.idx == NULL) {
                return -ENOMEM;
            }
            for (uint32_t k = 0; k < ss->n; k++) {
                if (nd->filter == NULL || eval_bool(e, nd->filter, &e->tr->s[ss->idx[k]])) {
                    s.idx[s.n++] = ss->idx[k];
                }
            }
            if (s.n > 0 && sl_push(e, out, s) < 0) {
                return -ENOMEM;
            }
        }
        return 0;
    case TRACEQL_N_PIPELINE:
        return eval_pipeline(e, nd, in, out);
    case TRACEQL_N_SPANSET_OP:
        break;
    }
    /* Both sides see each input spanset on its own (Tempo's evaluation). */
    for (size_t i = 0; i < in->n; i++) {
        struct slist one = {.v = &in->v[i], .n = 1, .cap = 1};
        struct slist l, r;
        if (eval_node(e, nd->l, &one, &l) < 0 || eval_node(e, nd->r, &one, &r) < 0) {
            return -ENOMEM;
        }
        uint8_t *L = mark_new(e), *R = mark_new(e), *m = mark_new(e);
        if (L == NULL || R == NULL || m == NULL) {
            return -ENOMEM;
        }
        mark_list(&l, L);
        mark_list(&r, R);
        if (nd->sop == TRACEQL_SOP_AND || nd->sop == TRACEQL_SOP_UNION) {
            if (nd->sop == TRACEQL_SOP_AND && (l.n == 0 || r.n == 0)) {
                continue;
            }
            for (uint32_t k = 0; k < e->tr->n; k++) {
                m[k] = L[k] | R[k];
            }
        } else if (structural(e, nd->sop, L, R, m) < 0) {
            return -ENOMEM;
        }
        if (sset_of_mark(e, m, out) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Evaluates the query on a whole trace: the result spansets (arena). */
static int eval_trace(struct ectx *e, const struct traceql_expr *q, struct slist *out)
{
    const struct etrace *tr = e->tr;
    struct sset *all = arena_alloc(e->a, sizeof(*all));
    if (all == NULL || (all->idx = arena_alloc(e->a, (tr->n + 1) * sizeof(uint32_t))) == NULL) {
        return -ENOMEM;
    }
    all->n = tr->n;
    for (uint32_t i = 0; i < tr->n; i++) {
        all->idx[i] = i;
    }
    struct slist in = {.v = all, .n = 1, .cap = 1};
    if (q == NULL || q->root == NULL) {
        *out = in;
        return 0;
    }
    return eval_node(e, q->root, &in, out);
}

/* ---- search: planning ---- */

/* A field that needs the whole trace to evaluate. */
static bool needs_trace(const struct traceql_field *f)
{
    if (f == NULL) {
        return false;
    }
    switch (f->kind) {
    case TRACEQL_F_INTRINSIC:
        return f->intrinsic == TRACEQL_I_CHILD_COUNT || f->intrinsic == TRACEQL_I_ROOT_NAME ||
               f->intrinsic == TRACEQL_I_ROOT_SERVICE || f->intrinsic == TRACEQL_I_TRACE_DURATION;
    case TRACEQL_F_BINARY:
        return needs_trace(f->l) || needs_trace(f->r);
    case TRACEQL_F_UNARY:
        return needs_trace(f->l);
    default:
        return false;
    }
}

/* Seed filters: every matching trace has a span (in the time range) that
 * satisfies one of them, judged on the span alone; |all| when some branch
 * cannot be judged that way (then every span seeds its trace). */
#define MAX_SEEDS 16
struct seeds {
    const struct traceql_field *f[MAX_SEEDS];
    size_t n;
    bool all;
};

static void seeds_of(const struct traceql_node *nd, struct seeds *s)
{
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        if (nd->filter == NULL || needs_trace(nd->filter) || s->n == MAX_SEEDS) {
            s->all = true;
        } else {
            s->f[s->n++] = nd->filter;
        }
        return;
    case TRACEQL_N_SPANSET_OP:
        if (nd->sop == TRACEQL_SOP_UNION) {
            seeds_of(nd->l, s);
            seeds_of(nd->r, s);
        } else if (nd->sop == TRACEQL_SOP_AND) {
            seeds_of(nd->l, s);
        } else {
            seeds_of(nd->r, s); /* every form needs a right-hand span */
        }
        return;
    case TRACEQL_N_PIPELINE:
        seeds_of(nd->input, s);
        return;
    }
}

static unsigned field_tables(const struct traceql_field *f)
{
    if (f == NULL) {
        return 0;
    }
    switch (f->kind) {
    case TRACEQL_F_ATTR:
        switch (f->scope) {
        case TRACEQL_SCOPE_SPAN:
            return BLK_ATTRS;
        case TRACEQL_SCOPE_EVENT:
        case TRACEQL_SCOPE_LINK:
            return BLK_DETAIL;
        case TRACEQL_SCOPE_ANY:
            return BLK_ATTRS | BLK_DETAIL;
        default:
            return 0; /* resource and scope attributes live in the footer */
        }
    case TRACEQL_F_INTRINSIC:
        switch (f->intrinsic) {
        case TRACEQL_I_EVENT_NAME:
        case TRACEQL_I_EVENT_TIME_SINCE_START:
        case TRACEQL_I_LINK_TRACE_ID:
        case TRACEQL_I_LINK_SPAN_ID:
            return BLK_DETAIL;
        default:
            return 0;
        }
    case TRACEQL_F_BINARY:
        return field_tables(f->l) | field_tables(f->r);
    case TRACEQL_F_UNARY:
        return field_tables(f->l);
    default:
        return 0;
    }
}

static unsigned scalar_tables(const struct traceql_scalar *s)
{
    if (s == NULL) {
        return 0;
    }
    return field_tables(s->field) | scalar_tables(s->l) | scalar_tables(s->r);
}

static unsigned node_tables(const struct traceql_node *nd)
{
    if (nd == NULL) {
        return 0;
    }
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        return field_tables(nd->filter);
    case TRACEQL_N_SPANSET_OP:
        return node_tables(nd->l) | node_tables(nd->r);
    case TRACEQL_N_PIPELINE:
        break;
    }
    unsigned t = node_tables(nd->input);
    for (size_t i = 0; i < nd->n_stages; i++) {
        const struct traceql_stage *st = &nd->stages[i];
        t |= node_tables(st->node) | scalar_tables(st->lhs) | scalar_tables(st->rhs);
        for (size_t k = 0; k < st->n_fields; k++) {
            t |= field_tables(st->fields[k]);
        }
    }
    return t;
}

/* Fields a result span lists in its attributes: what the query touched or
 * selected, except name, duration and trace-level intrinsics. */
#define MAX_SHOWN 32
struct shown {
    const struct traceql_field *f[MAX_SHOWN];
    size_t n;
};

static bool same_leaf(const struct traceql_field *a, const struct traceql_field *b)
{
    if (a->kind != b->kind) {
        return false;
    }
    if (a->kind == TRACEQL_F_INTRINSIC) {
        return a->intrinsic == b->intrinsic;
    }
    return a->scope == b->scope && a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

static void shown_field(struct shown *sh, const struct traceql_field *f)
{
    if (f == NULL) {
        return;
    }
    if (f->kind == TRACEQL_F_BINARY || f->kind == TRACEQL_F_UNARY) {
        shown_field(sh, f->l);
        if (f->kind == TRACEQL_F_BINARY) {
            shown_field(sh, f->r);
        }
        return;
    }
    if (f->kind == TRACEQL_F_INTRINSIC) {
        switch (f->intrinsic) {
        case TRACEQL_I_NAME:
        case TRACEQL_I_DURATION:
        case TRACEQL_I_ROOT_NAME:
        case TRACEQL_I_ROOT_SERVICE:
        case TRACEQL_I_TRACE_DURATION:
        case TRACEQL_I_TRACE_ID:
            return;
        default:
            break;
        }
    } else if (f->kind != TRACEQL_F_ATTR) {
        return;
    }
    for (size_t i = 0; i < sh->n; i++) {
        if (same_leaf(sh->f[i], f)) {
            return;
        }
    }
    if (sh->n < MAX_SHOWN) {
        sh->f[sh->n++] = f;
    }
}

static void shown_node(struct shown *sh, const struct traceql_node *nd)
{
    if (nd == NULL) {
        return;
    }
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        shown_field(sh, nd->filter);
        return;
    case TRACEQL_N_SPANSET_OP:
        shown_node(sh, nd->l);
        shown_node(sh, nd->r);
        return;
    case TRACEQL_N_PIPELINE:
        shown_node(sh, nd->input);
        for (size_t i = 0; i < nd->n_stages; i++) {
            shown_node(sh, nd->stages[i].node);
            for (size_t k = 0; k < nd->stages[i].n_fields; k++) {
                shown_field(sh, nd->stages[i].fields[k]);
            }
        }
        return;
    }
}

enum { MAY = 0, NO_ZONE = 1, NO_BLOOM = 2, NO_DICT = 3 };

/* Whether |f| reads nothing but resource attributes (and literals). */
static bool resource_only(const struct traceql_field *f, bool *any_attr)
{
    switch (f->kind) {
    case TRACEQL_F_STATIC:
        return true;
    case TRACEQL_F_ATTR:
        *any_attr = true;
        return f->scope == TRACEQL_SCOPE_RESOURCE;
    case TRACEQL_F_BINARY:
        return resource_only(f->l, any_attr) && resource_only(f->r, any_attr);
    case TRACEQL_F_UNARY:
        return resource_only(f->l, any_attr);
    default:
        return false;
    }
}

/* Does some resource of the block's dictionary satisfy |f| (resource_only)?
 * Exact, arrays included, and no table is read. */
static bool dict_may(blk *b, const struct traceql_field *f)
{
    struct etrace lone = {.n = 1, .root = -1, .whole = false};
    struct espan sp = {.parent = -1};
    lone.s = &sp;
    struct ectx e = {.tr = &lone};
    uint32_t n = blk_n_resources(b);
    for (uint32_t i = 0; i < n; i++) {
        sp.v.resource = blk_resource(b, i);
        if (sp.v.resource != NULL && eval_bool(&e, f, &sp)) {
            return true;
        }
    }
    return false;
}

/*
 * Span attributes: `span.x = "v"` also matches an array holding "v"
 * (FACTS.md E.5); the block's key=value bloom indexes string values and the
 * string elements of arrays (storage/block_write.c bloom_attrs), so it can prove a
 * span attribute absent.
 */
#define SPAN_ATTR_BLOOM 1

static bool static_num(const struct traceql_field *f, double *v)
{
    if (f->kind != TRACEQL_F_STATIC) {
        return false;
    }
    if (f->st.type == TRACEQL_T_INT || f->st.type == TRACEQL_T_DURATION) {
        *v = (double)f->st.i;
        return true;
    }
    if (f->st.type == TRACEQL_T_FLOAT) {
        *v = f->st.f;
        return true;
    }
    return false;
}

/* Can block |b| hold a span satisfying |f|? From zone maps and blooms. */
static int field_may(blk *b, const struct traceql_field *f)
{
    if (f == NULL || f->kind != TRACEQL_F_BINARY) {
        return MAY;
    }
    if (f->op == TRACEQL_OP_AND) {
        int r = field_may(b, f->l);
        return r != MAY ? r : field_may(b, f->r);
    }
    if (f->op == TRACEQL_OP_OR) {
        int r1 = field_may(b, f->l);
        if (r1 == MAY) {
            return MAY;
        }
        int r2 = field_may(b, f->r);
        return r2 == MAY ? MAY : r1;
    }
    bool res_attr = false;
    if (resource_only(f, &res_attr) && res_attr) {
        return dict_may(b, f) ? MAY : NO_DICT;
    }
    const struct traceql_field *subj = f->l, *val = f->r;
    enum traceql_op op = f->op;
    if (subj->kind == TRACEQL_F_STATIC) {
        subj = f->r;
        val = f->l;
        op = op == TRACEQL_OP_GT   ? TRACEQL_OP_LT
             : op == TRACEQL_OP_GE ? TRACEQL_OP_LE
             : op == TRACEQL_OP_LT ? TRACEQL_OP_GT
             : op == TRACEQL_OP_LE ? TRACEQL_OP_GE
                                   : op;
    }
    if (val->kind != TRACEQL_F_STATIC) {
        return MAY;
    }
    if (op == TRACEQL_OP_EQ && val->st.type == TRACEQL_T_STRING) {
        if (SPAN_ATTR_BLOOM && subj->kind == TRACEQL_F_ATTR && subj->scope == TRACEQL_SCOPE_SPAN) {
            return blk_may_have_attr(b, subj->name, subj->name_len, val->st.s, val->st.n)
                       ? MAY
                       : NO_BLOOM;
        }
        uint8_t id[16];
        if (subj->kind == TRACEQL_F_INTRINSIC && subj->intrinsic == TRACEQL_I_TRACE_ID &&
            traces_parse_id(val->st.s, val->st.n, id) == 0) {
            return blk_may_have_trace(b, id) ? MAY : NO_BLOOM;
        }
        return MAY;
    }
    double v;
    int64_t mn, mx;
    if (subj->kind == TRACEQL_F_INTRINSIC && subj->intrinsic == TRACEQL_I_DURATION &&
        static_num(val, &v) && blk_duration_range(b, &mn, &mx)) {
        bool may = true;
        switch (op) {
        case TRACEQL_OP_GT:
            may = (double)mx > v;
            break;
        case TRACEQL_OP_GE:
            may = (double)mx >= v;
            break;
        case TRACEQL_OP_LT:
            may = (double)mn < v;
            break;
        case TRACEQL_OP_LE:
            may = (double)mn <= v;
            break;
        case TRACEQL_OP_EQ:
            may = (double)mn <= v && v <= (double)mx;
            break;
        default:
            break;
        }
        return may ? MAY : NO_ZONE;
    }
    return MAY;
}

/* ---- search: candidate traces ---- */

struct cand {
    uint8_t id[16];
    uint64_t start; /* newest seed span start (phase 1); candidate index (phase 2) */
    bool used;
};

struct cmap {
    struct cand *v;
    size_t cap, n;
};

static size_t id_hash(const uint8_t *id)
{
    uint64_t a, b;
    memcpy(&a, id, 8);
    memcpy(&b, id + 8, 8);
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ull));
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(h ^ (h >> 32));
}

static void cmap_free(struct qctx *q, struct cmap *m)
{
    if (m->v != NULL) {
        qctx_uncharge(q, m->cap * sizeof(*m->v));
    }
    free(m->v);
    m->v = NULL;
    m->cap = m->n = 0;
}

static struct cand *cmap_find(const struct cmap *m, const uint8_t *id)
{
    if (m->cap == 0) {
        return NULL;
    }
    for (size_t i = id_hash(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->v[i].used) {
            return NULL;
        }
        if (memcmp(m->v[i].id, id, 16) == 0) {
            return &m->v[i];
        }
    }
}

/* Inserts |id| (or keeps the larger start). 0, or -ENOMEM. */
static int cmap_put(struct qctx *q, struct cmap *m, const uint8_t *id, uint64_t start)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        if (qctx_charge(q, cap * sizeof(struct cand)) < 0) {
            return -ENOMEM;
        }
        struct cand *v = calloc(cap, sizeof(*v));
        if (v == NULL) {
            qctx_fail(q, -ENOMEM, "out of memory");
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->v[i].used) {
                size_t k = id_hash(m->v[i].id) & (cap - 1);
                while (v[k].used) {
                    k = (k + 1) & (cap - 1);
                }
                v[k] = m->v[i];
            }
        }
        if (m->v != NULL) {
            qctx_uncharge(q, m->cap * sizeof(*m->v));
        }
        free(m->v);
        m->v = v;
        m->cap = cap;
    }
    size_t i = id_hash(id) & (m->cap - 1);
    while (m->v[i].used) {
        if (memcmp(m->v[i].id, id, 16) == 0) {
            if (start > m->v[i].start) {
                m->v[i].start = start;
            }
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    memcpy(m->v[i].id, id, 16);
    m->v[i].start = start;
    m->v[i].used = true;
    m->n++;
    return 0;
}

struct search {
    struct qctx q;
    const struct traces_search_req *rq;
    struct seeds seeds;
    unsigned seed_want;     /* tables phase 1 reads */
    unsigned trace_want;    /* tables phase 2 reads */
    struct cmap *item_maps; /* phase 1: per source */
    /* phase 2 */
    struct cmap batch; /* id -> index in |cands| (start field) */
    struct hits *item_hits;
    uint64_t inspected;
};

/* Rows [lo, hi) of a sealed source that can overlap [start, end]. */
static void row_window(const struct qctx *q, const struct traces_search_req *rq, size_t si,
                       uint64_t *lo, uint64_t *hi)
{
    const struct qctx_src *src = &q->src[si];
    *lo = 0;
    *hi = src->rows;
    if (src->b == NULL) {
        return;
    }
    if (rq->end_ns != 0 && rq->end_ns < UINT64_MAX) {
        *hi = blk_lower_bound(src->b, rq->end_ns + 1);
    }
    int64_t mn, mx;
    if (rq->start_ns != 0 && blk_duration_range(src->b, &mn, &mx)) {
        uint64_t back = mx > 0 ? (uint64_t)mx : 0;
        *lo = rq->start_ns > back ? blk_lower_bound(src->b, rq->start_ns - back) : 0;
    }
}

static bool in_range(const struct traces_search_req *rq, const struct span_view *v)
{
    if (rq->end_ns != 0 && v->start_ns > rq->end_ns) {
        return false;
    }
    uint64_t end = v->end_ns > v->start_ns ? v->end_ns : v->start_ns;
    return rq->start_ns == 0 || end >= rq->start_ns;
}

/* Zone maps, blooms and the resource dictionary for a sealed source: MAY,
 * or the reason to skip it (NO_ZONE, NO_BLOOM, NO_DICT). */
static int source_may(const struct qctx *q, const struct traces_search_req *rq,
                      const struct seeds *sd, size_t si)
{
    blk *b = q->src[si].b;
    if (b == NULL) {
        return MAY;
    }
    uint64_t tmin, tmax;
    blk_time_range(b, &tmin, &tmax);
    if (tmin > tmax) {
        return NO_ZONE; /* empty */
    }
    int64_t dmn, dmx;
    uint64_t back = blk_duration_range(b, &dmn, &dmx) && dmx > 0 ? (uint64_t)dmx : 0;
    if ((rq->end_ns != 0 && tmin > rq->end_ns) ||
        (rq->start_ns != 0 && tmax + back < rq->start_ns)) {
        return NO_ZONE;
    }
    if (sd->all) {
        return MAY;
    }
    int why = NO_ZONE;
    for (size_t i = 0; i < sd->n; i++) {
        int r = field_may(b, sd->f[i]);
        if (r == MAY) {
            return MAY;
        }
        if (r != NO_ZONE) {
            why = r;
        }
    }
    return sd->n > 0 ? why : MAY;
}

static void seed_item(void *arg, size_t si)
{
    struct search *s = arg;
    struct qctx *q = &s->q;
    if (qctx_check(q) != 0) {
        return;
    }
    int may = source_may(q, s->rq, &s->seeds, si);
    if (may != MAY) {
        qctx_add(may == NO_ZONE   ? &q->st.blocks_skipped_zone
                 : may == NO_DICT ? &q->st.blocks_skipped_dict
                                  : &q->st.blocks_skipped_bloom,
                 1);
        return;
    }
    struct qctx_src *src = &q->src[si];
    if (qctx_load(q, src, BLK_ROOT | s->seed_want) < 0) {
        return;
    }
    qctx_add(&q->st.blocks_scanned, 1);
    uint64_t lo, hi, r;
    row_window(q, s->rq, si, &lo, &hi);
    struct etrace lone = {.n = 1, .root = -1, .whole = false};
    struct espan sp = {.parent = -1};
    lone.s = &sp;
    struct ectx e = {.tr = &lone};
    struct cmap *m = &s->item_maps[si];
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    struct qctx_scan it;
    qctx_scan_begin(&it, q, lo, hi, false, SCAN_STRIDE, true);
    while (qctx_scan_next(&it, &r)) {
        if (qctx_span(q, src, r, s->seed_want, &sp.v) < 0) {
            cmap_free(q, m);
            return;
        }
        if (in_range(s->rq, &sp.v)) {
            bool hit = s->seeds.all || s->seeds.n == 0;
            for (size_t k = 0; !hit && k < s->seeds.n; k++) {
                hit = eval_bool(&e, s->seeds.f[k], &sp);
            }
            if (hit && cmap_put(q, m, sp.v.trace_id, sp.v.start_ns) < 0) {
                return;
            }
        }
    }
    qctx_scan_end(&it);
}

static int cand_cmp(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    if (a->start != b->start) {
        return a->start > b->start ? -1 : 1; /* newest first */
    }
    return memcmp(a->id, b->id, 16);
}

/* ---- search: gathering and evaluating whole traces ---- */

static void gather_item(void *arg, size_t si)
{
    struct search *s = arg;
    struct qctx *q = &s->q;
    struct qctx_src *src = &q->src[si];
    struct hits *h = &s->item_hits[si];
    h->n = 0;
    if (qctx_check(q) != 0 || qctx_src_failed(src)) {
        return;
    }
    if (src->b != NULL) {
        bool any = false;
        for (size_t i = 0; i < s->batch.cap && !any; i++) {
            any = s->batch.v[i].used && blk_may_have_trace(src->b, s->batch.v[i].id);
        }
        if (!any) {
            qctx_add(&q->st.blocks_skipped_bloom, 1);
            return;
        }
    }
    if (qctx_load(q, src, BLK_ROOT | s->trace_want) < 0) {
        return;
    }
    qctx_add(&q->st.blocks_scanned, 1);
    struct qctx_scan it;
    uint64_t r;
    qctx_scan_begin(&it, q, 0, src->rows, false, SCAN_STRIDE, false);
    while (qctx_scan_next(&it, &r)) {
        struct span_view v;
        if (qctx_span(q, src, r, BLK_ROOT, &v) < 0) {
            h->n = 0;
            return;
        }
        const struct cand *c = cmap_find(&s->batch, v.trace_id);
        if (c != NULL) {
            struct tref t = {.src = (uint32_t)si,
                             .row = r,
                             .start = v.start_ns,
                             .sc = v.scope,
                             .tix = (uint32_t)c->start};
            if (hits_push(q, h, &t) < 0) {
                return;
            }
        }
    }
    qctx_scan_end(&it);
}

static int espan_cmp(const void *pa, const void *pb)
{
    const struct espan *a = pa, *b = pb;
    if (a->v.start_ns != b->v.start_ns) {
        return a->v.start_ns < b->v.start_ns ? -1 : 1;
    }
    int c = memcmp(a->v.span_id, b->v.span_id, 8);
    if (c != 0) {
        return c;
    }
    if (a->src != b->src) {
        return a->src < b->src ? -1 : 1;
    }
    return a->row < b->row ? -1 : a->row > b->row;
}

struct idx_by_id {
    const uint8_t *id;
    uint32_t i;
};

static int ibi_cmp(const void *pa, const void *pb)
{
    const struct idx_by_id *a = pa, *b = pb;
    int c = memcmp(a->id, b->id, 8);
    return c != 0 ? c : (a->i < b->i ? -1 : a->i > b->i);
}

/* Parent links, child counts, root and time span of an assembled trace. */
static int link_trace(struct ectx *e, struct etrace *tr)
{
    struct idx_by_id *ix = arena_alloc(e->a, (tr->n + 1) * sizeof(*ix));
    if (ix == NULL) {
        return -ENOMEM;
    }
    tr->start = UINT64_MAX;
    tr->end = 0;
    tr->root = -1;
    for (uint32_t i = 0; i < tr->n; i++) {
        ix[i] = (struct idx_by_id){tr->s[i].v.span_id, i};
        tr->s[i].parent = -1;
        tr->s[i].children = 0;
        if (tr->s[i].v.start_ns < tr->start) {
            tr->start = tr->s[i].v.start_ns;
        }
        uint64_t end =
            tr->s[i].v.end_ns > tr->s[i].v.start_ns ? tr->s[i].v.end_ns : tr->s[i].v.start_ns;
        if (end > tr->end) {
            tr->end = end;
        }
        if (tr->root < 0 && !tr->s[i].v.has_parent) {
            tr->root = (int32_t)i;
        }
    }
    qsort(ix, tr->n, sizeof(*ix), ibi_cmp);
    for (uint32_t i = 0; i < tr->n; i++) {
        struct espan *sp = &tr->s[i];
        if (!sp->v.has_parent) {
            continue;
        }
        size_t lo = 0, hi = tr->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (memcmp(ix[mid].id, sp->v.parent_span_id, 8) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < tr->n && memcmp(ix[lo].id, sp->v.parent_span_id, 8) == 0 && ix[lo].i != i) {
            sp->parent = (int32_t)ix[lo].i;
            tr->s[ix[lo].i].children++;
        }
    }
    return 0;
}

static const char *const status_words[] = {"unset", "ok", "error"};
static const char *const kind_words[] = {"unspecified", "internal", "server",
                                         "client",      "producer", "consumer"};

/* The stored value of an attribute leaf (first scope that has it). */
static bool attr_raw(const struct traceql_field *f, const struct span_view *sv, struct val *out)
{
    bool any = f->scope == TRACEQL_SCOPE_ANY;
    if ((any || f->scope == TRACEQL_SCOPE_SPAN) &&
        attrs_find(&sv->attrs, f->name, f->name_len, out)) {
        return true;
    }
    if ((any || f->scope == TRACEQL_SCOPE_RESOURCE) &&
        attrs_find(&sv->resource->attrs, f->name, f->name_len, out)) {
        return true;
    }
    if (any || f->scope == TRACEQL_SCOPE_EVENT) {
        struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
        for (uint32_t i = 0; i < sv->n_events; i++) {
            uint64_t t;
            const char *nm;
            size_t nn;
            struct oattrs at;
            if (totlp_event_next(&r, &t, &nm, &nn, &at) < 0) {
                break;
            }
            if (attrs_find(&at, f->name, f->name_len, out)) {
                return true;
            }
        }
    }
    if (any || f->scope == TRACEQL_SCOPE_LINK) {
        struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
        for (uint32_t i = 0; i < sv->n_links; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (totlp_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            if (attrs_find(&at, f->name, f->name_len, out)) {
                return true;
            }
        }
    }
    return (any || f->scope == TRACEQL_SCOPE_INSTRUMENTATION) &&
           attrs_find(&sv->scope->attrs, f->name, f->name_len, out);
}

static void json_tv(struct jsonw *w, const struct tv *v)
{
    jsonw_obj_begin(w);
    switch (v->t) {
    case TRACEQL_T_STRING:
        jsonw_key(w, "stringValue");
        jsonw_str(w, v->s, v->n);
        break;
    case TRACEQL_T_INT:
    case TRACEQL_T_DURATION:
        jsonw_key(w, "intValue");
        jsonw_strf(w, "%lld", (long long)v->i);
        break;
    case TRACEQL_T_FLOAT:
        jsonw_key(w, "doubleValue");
        jsonw_double(w, v->f);
        break;
    case TRACEQL_T_BOOL:
        jsonw_key(w, "boolValue");
        jsonw_bool(w, v->i != 0);
        break;
    case TRACEQL_T_STATUS:
        jsonw_key(w, "stringValue");
        jsonw_cstr(w, v->i >= 0 && v->i < 3 ? status_words[v->i] : "unset");
        break;
    case TRACEQL_T_KIND:
        jsonw_key(w, "stringValue");
        jsonw_cstr(w, v->i >= 0 && v->i < 6 ? kind_words[v->i] : "unspecified");
        break;
    default:
        break;
    }
    jsonw_obj_end(w);
}

static void json_spanset(struct ectx *e, struct jsonw *w, const struct sset *ss, uint32_t spss,
                         const struct shown *sh)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "spans");
    jsonw_arr_begin(w);
    for (uint32_t k = 0; k < ss->n && k < spss; k++) {
        const struct espan *sp = &e->tr->s[ss->idx[k]];
        char id[17];
        totlp_hex(sp->v.span_id, 8, id);
        jsonw_obj_begin(w);
        jsonw_key(w, "spanID");
        jsonw_str(w, id, 16);
        if (sp->v.name.len > 0) {
            jsonw_key(w, "name");
            jsonw_str(w, sp->v.name.p, sp->v.name.len);
        }
        jsonw_key(w, "startTimeUnixNano");
        jsonw_uint_str(w, sp->v.start_ns);
        jsonw_key(w, "durationNanos");
        jsonw_uint_str(w, sp->v.end_ns > sp->v.start_ns ? sp->v.end_ns - sp->v.start_ns : 0);
        bool open = false;
        for (size_t i = 0; i < sh->n; i++) {
            const struct traceql_field *f = sh->f[i];
            struct val raw;
            struct tv v = tv_nil;
            bool have_raw = f->kind == TRACEQL_F_ATTR && attr_raw(f, &sp->v, &raw);
            if (!have_raw) {
                if (f->kind == TRACEQL_F_ATTR) {
                    continue;
                }
                v = eval_val(e, f, sp);
                if (v.t == TRACEQL_T_NIL) {
                    continue;
                }
            }
            if (!open) {
                jsonw_key(w, "attributes");
                jsonw_arr_begin(w);
                open = true;
            }
            jsonw_obj_begin(w);
            jsonw_key(w, "key");
            if (f->kind == TRACEQL_F_ATTR) {
                jsonw_str(w, f->name, f->name_len);
            } else {
                jsonw_cstr(w, traceql_intrinsic_name(f->intrinsic));
            }
            jsonw_key(w, "value");
            if (have_raw) {
                totlp_json_value(w, &raw);
            } else {
                json_tv(w, &v);
            }
            jsonw_obj_end(w);
        }
        if (open) {
            jsonw_arr_end(w);
        }
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
    jsonw_key(w, "matched");
    jsonw_uint(w, ss->n);
    jsonw_obj_end(w);
}

/* Tempo's traceID: lower-case hex without leading zeros. */
static void json_trace_id(struct jsonw *w, const uint8_t *id)
{
    char h[33];
    totlp_hex(id, 16, h);
    size_t z = 0;
    while (z < 31 && h[z] == '0') {
        z++;
    }
    jsonw_str(w, h + z, 32 - z);
}

static int render_result(struct ectx *e, const struct slist *res, uint32_t spss,
                         const struct shown *sh, struct evbuffer *out)
{
    const struct etrace *tr = e->tr;
    struct jsonw w;
    jsonw_init(&w, out);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "traceID");
    json_trace_id(&w, tr->id);
    struct mstr svc;
    jsonw_key(&w, "rootServiceName");
    if (tr->root >= 0 && service_name(tr->s[tr->root].v.resource, &svc)) {
        jsonw_str(&w, svc.p, svc.len);
    } else if (tr->root >= 0) {
        jsonw_cstr(&w, "");
    } else {
        jsonw_cstr(&w, "<root span not yet received>");
    }
    if (tr->root >= 0) {
        jsonw_key(&w, "rootTraceName");
        jsonw_str(&w, tr->s[tr->root].v.name.p, tr->s[tr->root].v.name.len);
    }
    jsonw_key(&w, "startTimeUnixNano");
    jsonw_uint_str(&w, tr->start);
    uint64_t ms = (tr->end - tr->start) / 1000000u;
    if (ms > 0) {
        jsonw_key(&w, "durationMs");
        jsonw_uint(&w, ms > UINT32_MAX ? UINT32_MAX : ms);
    }
    jsonw_key(&w, "spanSet");
    json_spanset(e, &w, &res->v[0], spss, sh);
    jsonw_key(&w, "spanSets");
    jsonw_arr_begin(&w);
    for (size_t i = 0; i < res->n; i++) {
        json_spanset(e, &w, &res->v[i], spss, sh);
    }
    jsonw_arr_end(&w);
    /* serviceStats: spans and errors per service.name over the whole trace */
    jsonw_key(&w, "serviceStats");
    jsonw_obj_begin(&w);
    uint8_t *done = mark_new(e);
    if (done == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < tr->n; i++) {
        if (done[i]) {
            continue;
        }
        struct mstr a = {"", 0};
        service_name(tr->s[i].v.resource, &a);
        uint64_t spans = 0, errors = 0;
        for (uint32_t k = i; k < tr->n; k++) {
            struct mstr b = {"", 0};
            if (done[k]) {
                continue;
            }
            service_name(tr->s[k].v.resource, &b);
            if (mstr_cmp(&a, &b) == 0) {
                done[k] = 1;
                spans++;
                errors += tr->s[k].v.status_code == 2;
            }
        }
        jsonw_keyn(&w, a.p, a.len);
        jsonw_obj_begin(&w);
        jsonw_key(&w, "spanCount");
        jsonw_uint(&w, spans);
        if (errors > 0) {
            jsonw_key(&w, "errorCount");
            jsonw_uint(&w, errors);
        }
        jsonw_obj_end(&w);
    }
    jsonw_obj_end(&w);
    jsonw_obj_end(&w);
    return w.err;
}

struct result {
    uint64_t start;
    uint8_t id[16];
    struct evbuffer *json;
};

static int result_cmp(const void *pa, const void *pb)
{
    const struct result *a = pa, *b = pb;
    if (a->start != b->start) {
        return a->start > b->start ? -1 : 1;
    }
    return memcmp(a->id, b->id, 16);
}

/* Gathers and evaluates candidates [from, to): appends matches to res. */
static int run_batch(struct search *s, const struct cand *cands, size_t from, size_t to,
                     struct result *res, size_t *n_res, const struct shown *sh, arena *a)
{
    struct qctx *q = &s->q;
    size_t nb = to - from;
    int rc = 0;
    cmap_free(q, &s->batch);
    for (size_t i = from; i < to; i++) {
        if (cmap_put(q, &s->batch, cands[i].id, 0) < 0) {
            return -ENOMEM;
        }
        cmap_find(&s->batch, cands[i].id)->start = i - from;
    }
    qctx_add(&q->st.blocks_considered, q->n_src);
    qpool_parallel(q->n_src, gather_item, s);
    rc = qctx_check(q);
    if (rc != 0) {
        return rc;
    }
    /* bucket the hits by candidate */
    size_t *cnt = calloc(nb + 1, sizeof(size_t));
    size_t total = 0;
    if (cnt == NULL) {
        return -ENOMEM;
    }
    for (size_t si = 0; si < q->n_src; si++) {
        if (qctx_src_failed(&q->src[si])) {
            s->item_hits[si].n = 0;
        }
        for (size_t k = 0; k < s->item_hits[si].n; k++) {
            cnt[s->item_hits[si].v[k].tix + 1]++;
        }
        total += s->item_hits[si].n;
    }
    for (size_t i = 0; i < nb; i++) {
        cnt[i + 1] += cnt[i];
    }
    struct tref *all = malloc((total + 1) * sizeof(*all));
    size_t *pos = malloc((nb + 1) * sizeof(size_t));
    if (all == NULL || pos == NULL || qctx_charge(q, total * sizeof(struct espan)) < 0) {
        free(all);
        free(pos);
        free(cnt);
        return -ENOMEM;
    }
    memcpy(pos, cnt, (nb + 1) * sizeof(size_t));
    for (size_t si = 0; si < q->n_src; si++) {
        for (size_t k = 0; k < s->item_hits[si].n; k++) {
            all[pos[s->item_hits[si].v[k].tix]++] = s->item_hits[si].v[k];
        }
    }
    for (size_t t = 0; t < nb && rc == 0 && *n_res < s->rq->limit; t++) {
        size_t n = cnt[t + 1] - cnt[t];
        if (n == 0) {
            continue; /* lost with a quarantined block */
        }
        arena_reset(a);
        struct etrace tr = {.n = (uint32_t)n, .whole = true};
        memcpy(tr.id, cands[from + t].id, 16);
        tr.s = arena_alloc(a, n * sizeof(struct espan));
        if (tr.s == NULL) {
            rc = -ENOMEM;
            break;
        }
        for (size_t k = 0; k < n; k++) {
            const struct tref *r = &all[cnt[t] + k];
            tr.s[k].src = r->src;
            tr.s[k].row = r->row;
            if (qctx_span(q, &q->src[r->src], r->row, s->trace_want, &tr.s[k].v) < 0) {
                rc = qctx_err(q) != 0 ? qctx_err(q) : -EBADMSG;
                break;
            }
        }
        if (rc == -EBADMSG) {
            rc = 0; /* the block is quarantined: skip this trace */
            continue;
        }
        if (rc != 0) {
            break;
        }
        qsort(tr.s, n, sizeof(struct espan), espan_cmp);
        struct ectx e = {.tr = &tr, .a = a};
        struct slist out;
        s->inspected++;
        if (link_trace(&e, &tr) < 0 || eval_trace(&e, s->rq->expr, &out) < 0) {
            rc = -ENOMEM;
            break;
        }
        rc = qctx_tick(q); /* one trace can take long: many spans, a costly regex */
        if (rc != 0) {
            break;
        }
        if (out.n == 0) {
            continue;
        }
        struct result *r = &res[*n_res];
        r->json = evbuffer_new();
        if (r->json == NULL) {
            rc = -ENOMEM;
            break;
        }
        r->start = tr.start;
        memcpy(r->id, tr.id, 16);
        (*n_res)++;
        if (render_result(&e, &out, s->rq->spss, sh, r->json) < 0) {
            rc = -ENOMEM;
        }
    }
    qctx_uncharge(q, total * sizeof(struct espan));
    free(all);
    free(pos);
    free(cnt);
    for (size_t si = 0; si < q->n_src; si++) {
        s->item_hits[si].n = 0;
    }
    return rc != 0 ? rc : qctx_check(q);
}

int traces_search(const struct traces_search_req *rq, struct jsonw *w, struct qs_scan *scan,
                  char *err, size_t errlen)
{
    struct search s = {.rq = rq};
    int rc = tq_open(&s.q, &rq->lim);
    if (rc < 0) {
        set_err(err, errlen, rc);
        return rc;
    }
    struct qctx *q = &s.q;
    struct cand *cands = NULL;
    struct result *res = NULL;
    size_t n_res = 0, nc = 0;
    arena *a = arena_new(0);
    struct shown sh = {0};
    if (rq->expr != NULL && rq->expr->root != NULL) {
        seeds_of(rq->expr->root, &s.seeds);
        shown_node(&sh, rq->expr->root);
        s.trace_want = node_tables(rq->expr->root);
    } else {
        s.seeds.all = true;
    }
    for (size_t i = 0; i < s.seeds.n; i++) {
        s.seed_want |= field_tables(s.seeds.f[i]);
    }
    for (size_t i = 0; i < sh.n; i++) {
        s.trace_want |= field_tables(sh.f[i]);
    }
    s.item_maps = calloc(q->n_src + 1, sizeof(*s.item_maps));
    s.item_hits = calloc(q->n_src + 1, sizeof(*s.item_hits));
    res = calloc((size_t)rq->limit + 1, sizeof(*res));
    if (a == NULL || s.item_maps == NULL || s.item_hits == NULL || res == NULL) {
        rc = -ENOMEM;
        goto out;
    }

    /* Phase 1: candidate traces from seed spans, newest first. */
    qpool_parallel(q->n_src, seed_item, &s);
    rc = qctx_check(q);
    if (rc != 0) {
        goto out;
    }
    struct cmap all = {0};
    for (size_t si = 0; si < q->n_src && rc == 0; si++) {
        struct cmap *m = &s.item_maps[si];
        for (size_t k = 0; k < m->cap && rc == 0; k++) {
            if (m->v[k].used) {
                rc = cmap_put(q, &all, m->v[k].id, m->v[k].start);
            }
        }
        cmap_free(q, m);
    }
    if (rc == 0) {
        cands = malloc((all.n + 1) * sizeof(*cands));
        if (cands == NULL) {
            rc = -ENOMEM;
        }
    }
    for (size_t k = 0; rc == 0 && k < all.cap; k++) {
        if (all.v[k].used) {
            cands[nc++] = all.v[k];
        }
    }
    cmap_free(q, &all);
    if (rc != 0) {
        goto out;
    }
    qsort(cands, nc, sizeof(*cands), cand_cmp);
    (void)qlex_re_take_limit_hit(); /* phase 2 evaluates on this thread */

    /* Phase 2: whole traces, in growing batches, until |limit| match. */
    size_t batch = rq->limit < 32 ? 64 : (size_t)rq->limit * 2;
    for (size_t from = 0; from < nc && n_res < rq->limit && rc == 0;) {
        size_t to = from + batch < nc ? from + batch : nc;
        rc = run_batch(&s, cands, from, to, res, &n_res, &sh, a);
        from = to;
        batch *= 2;
    }
    if (rc != 0) {
        goto out;
    }
    qsort(res, n_res, sizeof(*res), result_cmp);
    jsonw_obj_begin(w);
    jsonw_key(w, "traces");
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n_res; i++) {
        size_t len = evbuffer_get_length(res[i].json);
        const char *p = (const char *)evbuffer_pullup(res[i].json, (ssize_t)len);
        jsonw_raw(w, p != NULL ? p : "{}", p != NULL ? len : 2);
    }
    jsonw_arr_end(w);
    jsonw_key(w, "metrics");
    jsonw_obj_begin(w);
    jsonw_key(w, "inspectedTraces");
    jsonw_uint(w, s.inspected);
    jsonw_key(w, "inspectedBytes");
    jsonw_cstr(w, "0");
    jsonw_key(w, "totalBlocks");
    jsonw_uint(w, q->n_src);
    jsonw_key(w, "completedJobs");
    jsonw_uint(w, 1);
    jsonw_key(w, "totalJobs");
    jsonw_uint(w, 1);
    jsonw_obj_end(w);
    char warn[512];
    qctx_warnings_join(q, warn, sizeof(warn));
    if (warn[0] != '\0') {
        jsonw_key(w, "warnings");
        jsonw_arr_begin(w);
        jsonw_cstr(w, warn);
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
out:
    for (size_t i = 0; res != NULL && i < n_res; i++) {
        evbuffer_free(res[i].json);
    }
    free(res);
    free(cands);
    if (s.item_maps != NULL) {
        for (size_t si = 0; si < q->n_src; si++) {
            cmap_free(q, &s.item_maps[si]);
        }
    }
    if (s.item_hits != NULL) {
        for (size_t si = 0; si < q->n_src; si++) {
            free(s.item_hits[si].v);
        }
    }
    free(s.item_maps);
    free(s.item_hits);
    cmap_free(q, &s.batch);
    arena_free(a);
    qstats_scan_add(&q->st);
    if (scan != NULL) {
        *scan = q->st;
    }
    qctx_close(q);
    if (rc != 0) {
        tq_err_msg(q, err, errlen, rc);
    }
    return rc;
}

/* ---- tags and tag values ---- */

/* A set of distinct (type, string) pairs, strings copied into an arena. */
struct sentry {
    uint64_t h;
    const char *s;
    uint32_t n;
    uint8_t type; /* enum traceql_type */
    bool used;
};

struct strset {
    struct sentry *v;
    size_t cap, n, max;
    arena *a;
    bool full;
};

static uint64_t str_hash(uint8_t type, const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ type;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    }
    return h;
}

/* 0, or -ENOMEM. Silently ignores additions once |max| are held. */
static int strset_add(struct strset *ss, uint8_t type, const char *s, size_t n)
{
    uint64_t h = str_hash(type, s, n);
    if ((ss->n + 1) * 2 > ss->cap) {
        size_t cap = ss->cap ? ss->cap * 2 : 64;
        struct sentry *v = calloc(cap, sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < ss->cap; i++) {
            if (ss->v[i].used) {
                size_t k = ss->v[i].h & (cap - 1);
                while (v[k].used) {
                    k = (k + 1) & (cap - 1);
                }
                v[k] = ss->v[i];
            }
        }
        free(ss->v);
        ss->v = v;
        ss->cap = cap;
    }
    size_t i = h & (ss->cap - 1);
    while (ss->v[i].used) {
        struct sentry *x = &ss->v[i];
        if (x->h == h && x->type == type && x->n == n && (n == 0 || memcmp(x->s, s, n) == 0)) {
            return 0;
        }
        i = (i + 1) & (ss->cap - 1);
    }
    if (ss->n >= ss->max) {
        ss->full = true;
        return 0;
    }
    char *c = arena_strndup(ss->a, s, n);
    if (c == NULL) {
        return -ENOMEM;
    }
    ss->v[i] = (struct sentry){.h = h, .s = c, .n = (uint32_t)n, .type = type, .used = true};
    ss->n++;
    return 0;
}

static int sentry_cmp(const void *pa, const void *pb)
{
    const struct sentry *a = pa, *b = pb;
    size_t m = a->n < b->n ? a->n : b->n;
    int c = m ? memcmp(a->s, b->s, m) : 0;
    if (c == 0 && a->n != b->n) {
        c = a->n < b->n ? -1 : 1;
    }
    return c != 0 ? c : (int)a->type - (int)b->type;
}

/* The entries, sorted (compacted in place). */
static size_t strset_sorted(struct strset *ss)
{
    size_t n = 0;
    for (size_t i = 0; i < ss->cap; i++) {
        if (ss->v[i].used) {
            ss->v[n++] = ss->v[i];
        }
    }
    qsort(ss->v, n, sizeof(*ss->v), sentry_cmp);
    ss->cap = 0; /* no longer a hash table */
    return n;
}

static void strset_fini(struct strset *ss)
{
    free(ss->v);
    ss->v = NULL;
}

static const char *const type_names[] = {
    [TRACEQL_T_STRING] = "string",     [TRACEQL_T_INT] = "int",
    [TRACEQL_T_FLOAT] = "float",       [TRACEQL_T_BOOL] = "bool",
    [TRACEQL_T_DURATION] = "duration", [TRACEQL_T_STATUS] = "keyword",
    [TRACEQL_T_KIND] = "keyword",
};

/* Adds a typed value as its text (v1 answers use the text only). */
static int strset_add_tv(struct strset *ss, const struct tv *v, bool typed)
{
    char b[40];
    int n;
    uint8_t t = typed ? (uint8_t)v->t : (uint8_t)TRACEQL_T_STRING;
    switch (v->t) {
    case TRACEQL_T_STRING:
        return strset_add(ss, t, v->s, v->n);
    case TRACEQL_T_INT:
    case TRACEQL_T_DURATION:
        n = snprintf(b, sizeof(b), "%lld", (long long)v->i);
        return strset_add(ss, t, b, (size_t)n);
    case TRACEQL_T_FLOAT:
        n = (int)jsonw_fmt_double(b, v->f);
        return strset_add(ss, t, b, (size_t)n);
    case TRACEQL_T_BOOL:
        return strset_add(ss, t, v->i ? "true" : "false", v->i ? 4 : 5);
    default:
        return 0;
    }
}

static const char *const intrinsic_tags[] = {
    "duration",
    "event:name",
    "event:timeSinceStart",
    "instrumentation:name",
    "instrumentation:version",
    "kind",
    "link:spanID",
    "link:traceID",
    "name",
    "rootName",
    "rootServiceName",
    "span:childCount",
    "span:duration",
    "span:id",
    "span:kind",
    "span:name",
    "span:parentID",
    "span:status",
    "span:statusMessage",
    "status",
    "statusMessage",
    "trace:duration",
    "trace:id",
    "trace:rootName",
    "trace:rootService",
    "traceDuration",
};

/* What a tag scan collects per span or dictionary entry. */
enum { TS_RES, TS_SPAN, TS_EVENT, TS_LINK, TS_INSTR, TS_N };

struct tagscan {
    struct qctx q;
    const struct traces_tags_req *rq;
    struct seeds seeds;
    unsigned want;
    /* tags: one set per scope; values: sets[0] */
    struct strset sets[TS_N];
    unsigned scopes;
    /* values */
    const struct traceql_field *field; /* NULL for tag names */
    bool v2;
};

static int add_keys(struct strset *ss, const struct oattrs *a)
{
    struct val_rd r = {a->p, a->p + a->len};
    for (uint32_t i = 0; i < a->count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            return 0;
        }
        if (strset_add(ss, TRACEQL_T_STRING, k, kn) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Tag names of one span (scopes the request asked for). */
static int span_tags(struct tagscan *t, const struct span_view *v)
{
    int rc = 0;
    if (t->scopes & TRACES_SCOPE_SPAN) {
        rc |= add_keys(&t->sets[TS_SPAN], &v->attrs);
    }
    if (t->scopes & TRACES_SCOPE_RESOURCE) {
        rc |= add_keys(&t->sets[TS_RES], &v->resource->attrs);
    }
    if (t->scopes & TRACES_SCOPE_INSTRUMENTATION) {
        rc |= add_keys(&t->sets[TS_INSTR], &v->scope->attrs);
    }
    if (t->scopes & TRACES_SCOPE_EVENT) {
        struct val_rd r = {v->events.p, v->events.p + v->events.len};
        for (uint32_t i = 0; i < v->n_events; i++) {
            uint64_t tm;
            const char *nm;
            size_t nn;
            struct oattrs at;
            if (totlp_event_next(&r, &tm, &nm, &nn, &at) < 0) {
                break;
            }
            rc |= add_keys(&t->sets[TS_EVENT], &at);
        }
    }
    if (t->scopes & TRACES_SCOPE_LINK) {
        struct val_rd r = {v->links.p, v->links.p + v->links.len};
        for (uint32_t i = 0; i < v->n_links; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (totlp_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            rc |= add_keys(&t->sets[TS_LINK], &at);
        }
    }
    return rc < 0 ? -ENOMEM : 0;
}

static bool values_cb(void *ctx, const struct tv *v)
{
    struct tagscan *t = ctx;
    if (strset_add_tv(&t->sets[0], v, t->v2) < 0) {
        qctx_fail(&t->q, -ENOMEM, "out of memory");
        return false;
    }
    return true;
}

/* Values of the field on one span (the root-only intrinsics need no trace:
 * a span without a parent is a root). */
static int span_values(struct tagscan *t, struct ectx *e, const struct espan *sp)
{
    const struct traceql_field *f = t->field;
    const struct span_view *v = &sp->v;
    struct tv x = tv_nil;
    if (f->kind == TRACEQL_F_ATTR || is_multi(f)) {
        leaf_each(e, f, sp, values_cb, t);
        return qctx_err(&t->q) == -ENOMEM ? -ENOMEM : 0;
    }
    switch (f->intrinsic) {
    case TRACEQL_I_NAME:
    case TRACEQL_I_STATUS_MESSAGE:
    case TRACEQL_I_INSTR_NAME:
    case TRACEQL_I_INSTR_VERSION:
        x = intrinsic(e, f->intrinsic, sp);
        break;
    case TRACEQL_I_ROOT_NAME:
        if (!v->has_parent) {
            x = tv_str(v->name.p, v->name.len);
        }
        break;
    case TRACEQL_I_ROOT_SERVICE: {
        struct mstr m;
        if (!v->has_parent && service_name(v->resource, &m)) {
            x = tv_str(m.p, m.len);
        }
        break;
    }
    default:
        return 0;
    }
    if (x.t == TRACEQL_T_STRING && x.n == 0) {
        return 0; /* an empty statusMessage or scope version is no value */
    }
    return x.t == TRACEQL_T_NIL ? 0 : strset_add_tv(&t->sets[0], &x, t->v2);
}

/* Resource or scope dictionary entries of one source, without reading rows. */
static int dict_pass(struct tagscan *t, size_t si)
{
    struct qctx_src *src = &t->q.src[si];
    uint32_t nr = qctx_n_resources(src);
    uint32_t ns = qctx_n_scopes(src);
    const struct traceql_field *f = t->field;
    for (uint32_t i = 0; i < nr; i++) {
        const struct res_view *r = qctx_resource(src, i);
        if (r == NULL) {
            continue;
        }
        if (f == NULL && (t->scopes & TRACES_SCOPE_RESOURCE) &&
            add_keys(&t->sets[TS_RES], &r->attrs) < 0) {
            return -ENOMEM;
        }
        if (f != NULL && f->kind == TRACEQL_F_ATTR && f->scope == TRACEQL_SCOPE_RESOURCE) {
            struct visit vi = {.fn = values_cb, .ctx = t};
            visit_attrs(&vi, &r->attrs, f);
        }
    }
    for (uint32_t i = 0; i < ns; i++) {
        const struct scope_view *sc = qctx_scope(src, i);
        if (sc == NULL) {
            continue;
        }
        if (f == NULL && (t->scopes & TRACES_SCOPE_INSTRUMENTATION) &&
            add_keys(&t->sets[TS_INSTR], &sc->attrs) < 0) {
            return -ENOMEM;
        }
        if (f != NULL && f->kind == TRACEQL_F_ATTR && f->scope == TRACEQL_SCOPE_INSTRUMENTATION) {
            struct visit vi = {.fn = values_cb, .ctx = t};
            visit_attrs(&vi, &sc->attrs, f);
        }
        if (f != NULL && f->kind == TRACEQL_F_INTRINSIC &&
            (f->intrinsic == TRACEQL_I_INSTR_NAME || f->intrinsic == TRACEQL_I_INSTR_VERSION)) {
            const struct mstr *m = f->intrinsic == TRACEQL_I_INSTR_NAME ? &sc->name : &sc->version;
            if (m->len > 0 && strset_add(&t->sets[0], TRACEQL_T_STRING, m->p, m->len) < 0) {
                return -ENOMEM;
            }
        }
    }
    return qctx_err(&t->q) == -ENOMEM ? -ENOMEM : 0;
}

static bool sets_full(const struct tagscan *t)
{
    for (int i = 0; i < TS_N; i++) {
        if (t->sets[i].full) {
            return true;
        }
    }
    return false;
}

struct src_order {
    uint64_t newest;
    size_t si;
};

static int order_cmp(const void *pa, const void *pb)
{
    const struct src_order *a = pa, *b = pb;
    if (a->newest != b->newest) {
        return a->newest > b->newest ? -1 : 1;
    }
    return a->si < b->si ? -1 : a->si > b->si;
}

/*
 * Walks the sources newest first: dictionaries when |dict_only|, rows
 * otherwise (spans in the time range matching the seeds). Stops quietly
 * at --query-max-rows or when a set is full: tags are a hint, a partial
 * list is better than none. 0, or -ENOMEM / -ETIMEDOUT / -ECANCELED.
 */
static int tag_walk(struct tagscan *t, bool dict_only, bool (*want_rows)(struct tagscan *t))
{
    struct qctx *q = &t->q;
    struct src_order *order = calloc(q->n_src + 1, sizeof(*order));
    if (order == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->n_src; i++) {
        order[i].si = i;
        order[i].newest = UINT64_MAX; /* open blocks hold the newest rows */
        if (q->src[i].b != NULL) {
            uint64_t mn;
            blk_time_range(q->src[i].b, &mn, &order[i].newest);
        }
    }
    qsort(order, q->n_src, sizeof(*order), order_cmp);
    struct traces_search_req range = {.start_ns = t->rq->start_ns, .end_ns = t->rq->end_ns};
    int rc = 0;
    for (size_t oi = 0; oi < q->n_src && rc == 0 && !sets_full(t); oi++) {
        size_t si = order[oi].si;
        int may = source_may(q, &range, &t->seeds, si);
        if (may != MAY) {
            q->st.blocks_skipped_zone += may == NO_ZONE;
            q->st.blocks_skipped_bloom += may == NO_BLOOM;
            q->st.blocks_skipped_dict += may == NO_DICT;
            continue;
        }
        if (dict_only) {
            rc = dict_pass(t, si);
            continue;
        }
        if (!want_rows(t) || qctx_load(q, &q->src[si], BLK_ROOT | t->want) < 0) {
            continue;
        }
        q->st.blocks_scanned++;
        struct etrace lone = {.n = 1, .root = -1, .whole = false};
        struct espan sp = {.parent = -1};
        lone.s = &sp;
        struct ectx e = {.tr = &lone};
        uint64_t lo, hi, done = 0;
        row_window(q, &range, si, &lo, &hi);
        (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
        for (uint64_t r = lo; r < hi && rc == 0; r++) {
            if (qctx_span(q, &q->src[si], r, t->want, &sp.v) < 0) {
                break;
            }
            if (in_range(&range, &sp.v)) {
                bool hit = t->seeds.all || t->seeds.n == 0;
                for (size_t k = 0; !hit && k < t->seeds.n; k++) {
                    hit = eval_bool(&e, t->seeds.f[k], &sp);
                }
                if (hit) {
                    rc = t->field == NULL ? span_tags(t, &sp.v) : span_values(t, &e, &sp);
                }
            }
            if (++done == SCAN_STRIDE) {
                q->st.rows_scanned += done;
                q->rows += done;
                done = 0;
                if (sets_full(t) || (q->lim.max_rows != 0 && q->rows >= q->lim.max_rows)) {
                    break;
                }
                rc = qctx_tick(q);
            } else if (rc == 0 && done % CLOCK_STRIDE == 0) {
                rc = qctx_tick(q);
            }
        }
        if (rc == 0) {
            rc = qctx_tick(q);
        }
        q->st.rows_scanned += done;
        q->rows += done;
        if (q->lim.max_rows != 0 && q->rows >= q->lim.max_rows) {
            break;
        }
    }
    free(order);
    return rc != 0 ? rc : qctx_check(q);
}

static int tagscan_open(struct tagscan *t, const struct traces_tags_req *rq)
{
    memset(t, 0, sizeof(*t));
    t->rq = rq;
    t->v2 = rq->v2;
    int rc = tq_open(&t->q, &rq->lim);
    if (rc < 0) {
        return rc;
    }
    arena *a = arena_new(0);
    if (a == NULL) {
        qctx_close(&t->q);
        return -ENOMEM;
    }
    for (int i = 0; i < TS_N; i++) {
        t->sets[i].a = a;
        t->sets[i].max = rq->limit ? rq->limit : TRACES_TAGS_MAX;
    }
    if (rq->expr != NULL && rq->expr->root != NULL) {
        seeds_of(rq->expr->root, &t->seeds);
        for (size_t i = 0; i < t->seeds.n; i++) {
            t->want |= field_tables(t->seeds.f[i]);
        }
    } else {
        t->seeds.all = true;
    }
    return 0;
}

static void tagscan_close(struct tagscan *t)
{
    arena *a = t->sets[0].a;
    for (int i = 0; i < TS_N; i++) {
        strset_fini(&t->sets[i]);
    }
    arena_free(a);
    qstats_scan_add(&t->q.st);
    qctx_close(&t->q);
}

static bool filtered(const struct tagscan *t)
{
    return !t->seeds.all && t->seeds.n > 0;
}

static bool rows_for_tags(struct tagscan *t)
{
    return (t->scopes & (TRACES_SCOPE_SPAN | TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK)) != 0 ||
           filtered(t);
}

static void write_names(struct jsonw *w, struct strset *ss)
{
    size_t n = strset_sorted(ss);
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        jsonw_str(w, ss->v[i].s, ss->v[i].n);
    }
    jsonw_arr_end(w);
}

static void write_metrics(struct jsonw *w, const struct qctx *q)
{
    jsonw_key(w, "metrics");
    jsonw_obj_begin(w);
    jsonw_key(w, "inspectedBytes");
    jsonw_cstr(w, "0");
    jsonw_key(w, "totalBlocks");
    jsonw_uint(w, q->n_src);
    jsonw_obj_end(w);
}

int traces_tags(const struct traces_tags_req *rq, struct jsonw *w, char *err, size_t errlen)
{
    struct tagscan t;
    int rc = tagscan_open(&t, rq);
    if (rc < 0) {
        set_err(err, errlen, rc);
        return rc;
    }
    t.scopes =
        rq->scopes
            ? rq->scopes
            : (TRACES_SCOPE_RESOURCE | TRACES_SCOPE_SPAN | TRACES_SCOPE_INTRINSIC |
               (rq->v2 ? TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK | TRACES_SCOPE_INSTRUMENTATION
                       : 0));
    if (!rq->v2) {
        t.scopes &= ~(unsigned)TRACES_SCOPE_INTRINSIC;
    }
    if (filtered(&t)) {
        t.want |= (t.scopes & TRACES_SCOPE_SPAN ? BLK_ATTRS : 0) |
                  (t.scopes & (TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK) ? BLK_DETAIL : 0);
        rc = tag_walk(&t, false, rows_for_tags);
    } else {
        /* resource and scope attributes from the dictionaries; the rest from rows */
        unsigned keep = t.scopes;
        t.want |= (t.scopes & TRACES_SCOPE_SPAN ? BLK_ATTRS : 0) |
                  (t.scopes & (TRACES_SCOPE_EVENT | TRACES_SCOPE_LINK) ? BLK_DETAIL : 0);
        rc = tag_walk(&t, true, rows_for_tags);
        t.scopes &= ~(unsigned)(TRACES_SCOPE_RESOURCE | TRACES_SCOPE_INSTRUMENTATION);
        if (rc == 0 && rows_for_tags(&t)) {
            rc = tag_walk(&t, false, rows_for_tags);
        }
        t.scopes = keep;
    }
    if (rc != 0) {
        tq_err_msg(&t.q, err, errlen, rc);
        tagscan_close(&t);
        return rc;
    }
    jsonw_obj_begin(w);
    if (!rq->v2) {
        /* v1: span and resource names together, unscoped */
        for (size_t i = 0; i < t.sets[TS_RES].cap; i++) {
            struct sentry *x = &t.sets[TS_RES].v[i];
            if (x->used && strset_add(&t.sets[TS_SPAN], x->type, x->s, x->n) < 0) {
                rc = -ENOMEM;
            }
        }
        jsonw_key(w, "tagNames");
        write_names(w, &t.sets[TS_SPAN]);
    } else {
        static const struct {
            const char *name;
            unsigned bit;
            int set;
        } order[] = {
            {"resource", TRACES_SCOPE_RESOURCE, TS_RES},
            {"span", TRACES_SCOPE_SPAN, TS_SPAN},
            {"intrinsic", TRACES_SCOPE_INTRINSIC, -1},
            {"event", TRACES_SCOPE_EVENT, TS_EVENT},
            {"link", TRACES_SCOPE_LINK, TS_LINK},
            {"instrumentation", TRACES_SCOPE_INSTRUMENTATION, TS_INSTR},
        };
        jsonw_key(w, "scopes");
        jsonw_arr_begin(w);
        for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
            if (!(t.scopes & order[k].bit)) {
                continue;
            }
            /* scopes nobody asked for by name appear only when they have tags */
            if (rq->scopes == 0 && order[k].set >= TS_EVENT && t.sets[order[k].set].n == 0) {
                continue;
            }
            jsonw_obj_begin(w);
            jsonw_key(w, "name");
            jsonw_cstr(w, order[k].name);
            jsonw_key(w, "tags");
            if (order[k].set < 0) {
                jsonw_arr_begin(w);
                for (size_t i = 0; i < sizeof(intrinsic_tags) / sizeof(intrinsic_tags[0]); i++) {
                    jsonw_cstr(w, intrinsic_tags[i]);
                }
                jsonw_arr_end(w);
            } else {
                write_names(w, &t.sets[order[k].set]);
            }
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    write_metrics(w, &t.q);
    jsonw_obj_end(w);
    tagscan_close(&t);
    if (rc != 0) {
        tq_err_msg(&t.q, err, errlen, rc);
    }
    return rc;
}

static bool rows_for_values(struct tagscan *t)
{
    const struct traceql_field *f = t->field;
    if (filtered(t)) {
        return true;
    }
    if (f->kind == TRACEQL_F_ATTR) {
        return f->scope != TRACEQL_SCOPE_RESOURCE && f->scope != TRACEQL_SCOPE_INSTRUMENTATION;
    }
    return f->intrinsic != TRACEQL_I_INSTR_NAME && f->intrinsic != TRACEQL_I_INSTR_VERSION;
}

int traces_tag_values(const struct traces_tags_req *rq, const char *tag, size_t tag_len,
                      struct jsonw *w, char *err, size_t errlen)
{
    struct traceql_field f;
    char name[512];
    if (rq->v2) {
        int prc = traceql_parse_identifier(tag, tag_len, &f, name, sizeof(name));
        if (prc < 0) {
            snprintf(err, errlen, "invalid tag: %.*s is not a TraceQL identifier",
                     (int)(tag_len > 200 ? 200 : tag_len), tag);
            return -EINVAL;
        }
    } else {
        /* v1: an unscoped attribute name, looked up on spans then resources */
        if (tag_len == 0 || tag_len >= sizeof(name)) {
            snprintf(err, errlen, "invalid tag name");
            return -EINVAL;
        }
        memcpy(name, tag, tag_len);
        name[tag_len] = '\0';
        f = (struct traceql_field){.kind = TRACEQL_F_ATTR,
                                   .type = TRACEQL_T_ANY,
                                   .scope = TRACEQL_SCOPE_ANY,
                                   .name = name,
                                   .name_len = tag_len};
    }
    struct tagscan t;
    int rc = tagscan_open(&t, rq);
    if (rc < 0) {
        set_err(err, errlen, rc);
        return rc;
    }
    t.field = &f;
    bool fixed = false;
    static const char *const kinds[] = {"client",   "consumer", "internal",
                                        "producer", "server",   "unspecified"};
    static const char *const statuses[] = {"error", "ok", "unset"};
    if (f.kind == TRACEQL_F_INTRINSIC) {
        switch (f.intrinsic) {
        case TRACEQL_I_STATUS:
        case TRACEQL_I_KIND:
        case TRACEQL_I_DURATION:
        case TRACEQL_I_TRACE_DURATION:
        case TRACEQL_I_EVENT_TIME_SINCE_START:
        case TRACEQL_I_SPAN_ID:
        case TRACEQL_I_PARENT_ID:
        case TRACEQL_I_TRACE_ID:
        case TRACEQL_I_LINK_SPAN_ID:
        case TRACEQL_I_LINK_TRACE_ID:
        case TRACEQL_I_CHILD_COUNT:
            fixed = true; /* fixed lists, or nothing worth listing */
            break;
        default:
            break;
        }
    }
    if (!fixed) {
        t.want |= field_tables(&f);
        bool rows = rows_for_values(&t);
        rc = tag_walk(&t, !rows, rows_for_values);
    }
    if (rc != 0) {
        tq_err_msg(&t.q, err, errlen, rc);
        tagscan_close(&t);
        return rc;
    }
    jsonw_obj_begin(w);
    jsonw_key(w, "tagValues");
    jsonw_arr_begin(w);
    if (fixed) {
        const char *const *list = NULL;
        size_t n = 0;
        if (f.intrinsic == TRACEQL_I_STATUS) {
            list = statuses;
            n = 3;
        } else if (f.intrinsic == TRACEQL_I_KIND) {
            list = kinds;
            n = 6;
        }
        for (size_t i = 0; i < n; i++) {
            if (rq->v2) {
                jsonw_obj_begin(w);
                jsonw_key(w, "type");
                jsonw_cstr(w, "keyword");
                jsonw_key(w, "value");
                jsonw_cstr(w, list[i]);
                jsonw_obj_end(w);
            } else {
                jsonw_cstr(w, list[i]);
            }
        }
    } else {
        size_t n = strset_sorted(&t.sets[0]);
        for (size_t i = 0; i < n; i++) {
            const struct sentry *x = &t.sets[0].v[i];
            if (rq->v2) {
                jsonw_obj_begin(w);
                jsonw_key(w, "type");
                jsonw_cstr(w, x->type < sizeof(type_names) / sizeof(type_names[0]) &&
                                      type_names[x->type] != NULL
                                  ? type_names[x->type]
                                  : "string");
                jsonw_key(w, "value");
                jsonw_str(w, x->s, x->n);
                jsonw_obj_end(w);
            } else {
                jsonw_str(w, x->s, x->n);
            }
        }
    }
    jsonw_arr_end(w);
    write_metrics(w, &t.q);
    jsonw_obj_end(w);
    tagscan_close(&t);
    return 0;
}
