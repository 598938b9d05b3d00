/*
 * tqmx_scan.c - the scans that feed a metrics query's accumulators (see
 * tqmx_int.h). A spanset filter judged on the span alone runs span by
 * span over the rows of the range; any other input (structural operators,
 * pipelines, trace-level intrinsics such as rootServiceName, in the input
 * or in by()) is evaluated on whole traces: the traces with a seed span
 * overlapping the range are gathered from every source and evaluated by the
 * traces module, and each span of their result spansets that starts in the
 * range counts once. (A trace whose only seed spans lie wholly outside the
 * range is not looked at: for {A} && {B}, a B span in the range whose A
 * spans all ended before it is missed.)
 */
#include "query/tqmx_int.h"

static bool needs_whole(const struct tqmx_query *q)
{
    const struct traceql_node *n = q->input->root;
    if (n->kind != TRACEQL_N_FILTER || traces_field_needs_trace(n->filter) ||
        traces_field_needs_trace(&q->attr)) {
        return true;
    }
    for (size_t i = 0; i < q->n_by; i++) {
        if (traces_field_needs_trace(&q->by[i])) {
            return true;
        }
    }
    return q->cmp != NULL && traces_field_needs_trace(q->cmp->root->filter);
}

static unsigned query_tables(const struct tqmx_query *q)
{
    unsigned t = BLK_ROOT | traces_field_tables(&q->attr);
    for (size_t i = 0; i < q->n_by; i++) {
        t |= traces_field_tables(&q->by[i]);
    }
    if (q->fn == TQMX_COMPARE) {
        t |= BLK_ATTRS;
    }
    return t;
}

/* Plans source |si|: false to skip it (counted). */
static bool source_use(struct tqmx_run *x, const struct traces_search_req *sr,
                       const struct seeds *sd, size_t si, unsigned want)
{
    struct qctx *q = &x->q;
    int may = traces_source_may(q, sr, sd, si);
    if (may != MAY) {
        q->st.blocks_skipped_zone += may == NO_ZONE;
        q->st.blocks_skipped_dict += may == NO_DICT;
        q->st.blocks_skipped_bloom += may == NO_BLOOM;
        return false;
    }
    if (qctx_load(q, &q->src[si], want) < 0) {
        return false; /* quarantined (the query goes on) or the query's error */
    }
    q->st.blocks_scanned++;
    return true;
}

/* ---- span by span -------------------------------------------------------------- */

static int scan_spans(struct tqmx_run *x, struct qrun *qr, const struct traces_search_req *sr,
                      const struct seeds *sd, unsigned want)
{
    struct qctx *q = &x->q;
    const struct traceql_field *f = qr->q->input->root->filter;
    struct etrace lone = {.n = 1, .root = -1, .whole = false};
    struct espan sp = {.parent = -1};
    lone.s = &sp;
    struct ectx e = {.tr = &lone};
    (void)qlex_re_take_limit_hit(); /* a note left by an earlier request on this thread */
    for (size_t si = 0; si < q->n_src && qctx_err(q) == 0; si++) {
        if (!source_use(x, sr, sd, si, want)) {
            continue;
        }
        struct qctx_src *src = &q->src[si];
        uint64_t lo, hi, r;
        traces_row_window(q, sr, si, &lo, &hi);
        struct qctx_scan it;
        qctx_scan_begin(&it, q, lo, hi, false, SCAN_STRIDE, true);
        while (qctx_scan_next(&it, &r)) {
            if (qctx_span(q, src, r, want, &sp.v) < 0) {
                break;
            }
            x->spans++;
            if (f != NULL && !traces_eval_bool(&e, f, &sp)) {
                continue;
            }
            if (tqmx_observe(x, qr, &e, &sp) < 0) {
                break;
            }
        }
        qctx_scan_end(&it);
        /* what observing kept (labels, exemplar ids) is copied: the block
         * can go (its pin; the table cap and the page window drop it) */
        qctx_done(q, src);
    }
    return qctx_err(q);
}

/* ---- whole traces ----------------------------------------------------------------- */

struct idset {
    uint8_t (*id)[16];
    uint8_t *used;
    size_t n, cap;
};

static size_t id_slot(const struct idset *s, const uint8_t *id)
{
    uint64_t h;
    memcpy(&h, id + 8, 8);
    h ^= h >> 29;
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 7) & (s->cap - 1);
}

/* The index of |id| in the set (added when |add|), or -1. */
static int64_t idset_get(struct tqmx_run *x, struct idset *s, const uint8_t *id, bool add,
                         uint32_t **ix)
{
    if (add && s->n * 2 >= s->cap) {
        struct idset ns = {.cap = s->cap ? s->cap * 2 : 1024};
        ns.id = arena_alloc(x->a, ns.cap * 16);
        ns.used = arena_alloc(x->a, ns.cap);
        uint32_t *nix = arena_alloc(x->a, ns.cap * sizeof(uint32_t));
        if (ns.id == NULL || ns.used == NULL || nix == NULL) {
            qctx_fail(&x->q, -ENOMEM, "the metrics query needs more memory than allowed");
            return -1;
        }
        memset(ns.used, 0, ns.cap);
        for (size_t i = 0; i < s->cap; i++) {
            if (s->used[i]) {
                size_t j = id_slot(&ns, s->id[i]);
                while (ns.used[j]) {
                    j = (j + 1) & (ns.cap - 1);
                }
                ns.used[j] = 1;
                memcpy(ns.id[j], s->id[i], 16);
                nix[j] = (*ix)[i];
            }
        }
        ns.n = s->n;
        *s = ns;
        *ix = nix;
    }
    if (s->cap == 0) {
        return -1;
    }
    size_t j = id_slot(s, id);
    while (s->used[j]) {
        if (memcmp(s->id[j], id, 16) == 0) {
            return (*ix)[j];
        }
        j = (j + 1) & (s->cap - 1);
    }
    if (!add) {
        return -1;
    }
    s->used[j] = 1;
    memcpy(s->id[j], id, 16);
    (*ix)[j] = (uint32_t)s->n;
    return (int64_t)s->n++;
}

/* Whether a sealed source may hold a span of one of the traces (its
 * trace-id bloom; asked for up to MAY_HOLD_IDS traces, else yes). */
#define MAY_HOLD_IDS 256
static bool may_hold(const struct qctx_src *src, const struct idset *ids)
{
    if (src->b == NULL || ids->n > MAY_HOLD_IDS) {
        return true;
    }
    for (size_t i = 0; i < ids->cap; i++) {
        if (ids->used[i] && blk_may_have_trace(src->b, ids->id[i])) {
            return true;
        }
    }
    return false;
}

struct sref {
    uint32_t tix, src;
    uint64_t row;
};

static int sref_cmp(const void *pa, const void *pb)
{
    const struct sref *a = pa, *b = pb;
    if (a->tix != b->tix) {
        return a->tix < b->tix ? -1 : 1;
    }
    if (a->src != b->src) {
        return a->src < b->src ? -1 : 1;
    }
    return a->row < b->row ? -1 : a->row > b->row;
}

/* Evaluates one assembled trace and observes the spans of its result. */
static int eval_trace(struct tqmx_run *x, struct qrun *qr, const struct sref *r, size_t n,
                      unsigned want, arena *ta)
{
    struct qctx *q = &x->q;
    arena_reset(ta);
    struct etrace tr = {.n = (uint32_t)n, .whole = true};
    tr.s = arena_alloc(ta, n * sizeof(struct espan));
    if (tr.s == NULL) {
        return -ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
        tr.s[k].src = r[k].src;
        tr.s[k].row = r[k].row;
        if (qctx_span(q, &q->src[r[k].src], r[k].row, want, &tr.s[k].v) < 0) {
            return qctx_err(q) != 0 ? qctx_err(q) : 0; /* quarantined: skip the trace */
        }
    }
    memcpy(tr.id, tr.s[0].v.trace_id, 16);
    qsort(tr.s, n, sizeof(struct espan), traces_espan_cmp);
    struct ectx e = {.tr = &tr, .a = ta};
    struct slist out;
    if (traces_link_trace(&e, &tr) < 0 || traces_eval_trace(&e, qr->q->input, &out) < 0) {
        return -ENOMEM;
    }
    x->traces++;
    uint8_t *m = traces_mark_new(&e);
    if (m == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < out.n; i++) {
        for (uint32_t k = 0; k < out.v[i].n; k++) {
            m[out.v[i].idx[k]] = 1;
        }
    }
    for (uint32_t k = 0; k < tr.n; k++) {
        if (m[k] && tqmx_observe(x, qr, &e, &tr.s[k]) < 0) {
            return qctx_err(q);
        }
    }
    return qctx_tick(q);
}

static int scan_traces(struct tqmx_run *x, struct qrun *qr, const struct traces_search_req *sr,
                       const struct seeds *sd, unsigned want)
{
    struct qctx *q = &x->q;
    struct idset ids = {0};
    uint32_t *ix = NULL;
    struct etrace lone = {.n = 1, .root = -1, .whole = false};
    struct espan sp = {.parent = -1};
    lone.s = &sp;
    struct ectx e = {.tr = &lone};
    (void)qlex_re_take_limit_hit();
    /* 1: the traces with a seed span starting in the range */
    for (size_t si = 0; si < q->n_src && qctx_err(q) == 0; si++) {
        if (!source_use(x, sr, sd, si, want)) {
            continue;
        }
        uint64_t lo, hi, r;
        traces_row_window(q, sr, si, &lo, &hi);
        struct qctx_scan it;
        qctx_scan_begin(&it, q, lo, hi, false, SCAN_STRIDE, true);
        while (qctx_scan_next(&it, &r)) {
            if (qctx_span(q, &q->src[si], r, want, &sp.v) < 0) {
                break;
            }
            if (!in_range(sr, &sp.v)) {
                continue; /* seeds: any span overlapping the range (a counted span starts in it) */
            }
            bool hit = sd->all || sd->n == 0;
            for (size_t k = 0; !hit && k < sd->n; k++) {
                hit = traces_eval_bool(&e, sd->f[k], &sp);
            }
            if (hit && idset_get(x, &ids, sp.v.trace_id, true, &ix) < 0) {
                break;
            }
        }
        qctx_scan_end(&it);
        qctx_done(q, &q->src[si]); /* ids copied; pass 2 loads what it reads again */
    }
    if (qctx_err(q) != 0 || ids.n == 0) {
        return qctx_err(q);
    }
    /* 2: every span of those traces, from every source */
    struct sref *refs = NULL;
    size_t n = 0, cap = 0;
    for (size_t si = 0; si < q->n_src && qctx_err(q) == 0; si++) {
        struct qctx_src *src = &q->src[si];
        if (qctx_src_failed(src) || !may_hold(src, &ids) || qctx_load(q, src, want) < 0) {
            continue;
        }
        struct qctx_scan it;
        uint64_t r;
        qctx_scan_begin(&it, q, 0, src->rows, false, SCAN_STRIDE, false);
        while (qctx_scan_next(&it, &r)) {
            struct span_view v;
            if (qctx_span(q, src, r, BLK_ROOT, &v) < 0) {
                break;
            }
            int64_t t = idset_get(x, &ids, v.trace_id, false, &ix);
            if (t < 0) {
                continue;
            }
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 1024;
                if (qctx_charge(q, (ncap - cap) * sizeof(*refs)) < 0) {
                    break;
                }
                struct sref *nr = realloc(refs, ncap * sizeof(*refs));
                if (nr == NULL) {
                    qctx_fail(q, -ENOMEM, "out of memory");
                    break;
                }
                refs = nr;
                cap = ncap;
            }
            refs[n++] = (struct sref){(uint32_t)t, (uint32_t)si, r};
        }
        qctx_scan_end(&it);
    }
    arena *ta = arena_new(0);
    if (ta == NULL) {
        qctx_fail(q, -ENOMEM, "out of memory");
    } else {
        qctx_arena_bind(q, ta); /* one trace's spans at a time, charged */
    }
    if (qctx_err(q) == 0 && n > 0) {
        qsort(refs, n, sizeof(*refs), sref_cmp);
        (void)qlex_re_take_limit_hit();
        for (size_t i = 0; i < n && qctx_err(q) == 0;) {
            size_t j = i;
            while (j < n && refs[j].tix == refs[i].tix) {
                j++;
            }
            int rc = eval_trace(x, qr, refs + i, j - i, want, ta);
            if (rc < 0 && qctx_err(q) == 0) {
                qctx_fail(q, rc, "out of memory");
            }
            i = j;
        }
    }
    arena_free(ta);
    qctx_uncharge(q, cap * sizeof(*refs));
    free(refs);
    return qctx_err(q);
}

int tqmx_scan(struct tqmx_run *x, struct qrun *qr)
{
    const struct tqmx_query *q = qr->q;
    struct traces_search_req sr = {
        .expr = q->input, .start_ns = x->rq->range.start + 1, .end_ns = x->rq->range.end};
    struct seeds sd = {0};
    traces_seeds_of(q->input->root, &sd);
    unsigned want = query_tables(q) | traces_node_tables(q->input->root);
    if (q->cmp != NULL) {
        want |= traces_node_tables(q->cmp->root);
    }
    x->q.st.blocks_considered += x->q.n_src;
    return needs_whole(q) ? scan_traces(x, qr, &sr, &sd, want) : scan_spans(x, qr, &sr, &sd, want);
}
