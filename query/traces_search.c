/*
 * traces_search.c - search: planning (the seeds a span must match, the
 * blooms and zone maps a source must pass), candidate traces from the
 * seed scan, then gathering and evaluating whole traces in batches,
 * newest first (see traces.h, traces_int.h).
 */
#include "query/traces_int.h"

#include <event2/buffer.h>

#include "query/pool.h"

/* ---- search: planning ----------------------------------------------------- */

/* A field that needs the whole trace to evaluate. */
static bool needs_trace(const struct traceql_field *f)
{
    if (f == NULL) {
        return false;
    }
    switch (f->kind) {
    case TRACEQL_F_INTRINSIC:
        return f->intrinsic == TRACEQL_I_CHILD_COUNT || f->intrinsic == TRACEQL_I_ROOT_NAME ||
               f->intrinsic == TRACEQL_I_ROOT_SERVICE || f->intrinsic == TRACEQL_I_TRACE_DURATION ||
               f->intrinsic == TRACEQL_I_NESTED_SET_LEFT ||
               f->intrinsic == TRACEQL_I_NESTED_SET_RIGHT ||
               f->intrinsic == TRACEQL_I_NESTED_SET_PARENT;
    case TRACEQL_F_BINARY:
        return needs_trace(f->l) || needs_trace(f->r);
    case TRACEQL_F_UNARY:
        return needs_trace(f->l);
    default:
        return false;
    }
}

void traces_seeds_of(const struct traceql_node *nd, struct seeds *s)
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
            traces_seeds_of(nd->l, s);
            traces_seeds_of(nd->r, s);
        } else if (nd->sop == TRACEQL_SOP_AND) {
            traces_seeds_of(nd->l, s);
        } else {
            traces_seeds_of(nd->r, s); /* every form needs a right-hand span */
        }
        return;
    case TRACEQL_N_PIPELINE:
        traces_seeds_of(nd->input, s);
        return;
    }
}

unsigned traces_field_tables(const struct traceql_field *f)
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
        return traces_field_tables(f->l) | traces_field_tables(f->r);
    case TRACEQL_F_UNARY:
        return traces_field_tables(f->l);
    default:
        return 0;
    }
}

static unsigned scalar_tables(const struct traceql_scalar *s)
{
    if (s == NULL) {
        return 0;
    }
    return traces_field_tables(s->field) | scalar_tables(s->l) | scalar_tables(s->r);
}

unsigned traces_node_tables(const struct traceql_node *nd)
{
    if (nd == NULL) {
        return 0;
    }
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        return traces_field_tables(nd->filter);
    case TRACEQL_N_SPANSET_OP:
        return traces_node_tables(nd->l) | traces_node_tables(nd->r);
    case TRACEQL_N_PIPELINE:
        break;
    }
    unsigned t = traces_node_tables(nd->input);
    for (size_t i = 0; i < nd->n_stages; i++) {
        const struct traceql_stage *st = &nd->stages[i];
        t |= traces_node_tables(st->node) | scalar_tables(st->lhs) | scalar_tables(st->rhs);
        for (size_t k = 0; k < st->n_fields; k++) {
            t |= traces_field_tables(st->fields[k]);
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
        if (sp.v.resource != NULL && traces_eval_bool(&e, f, &sp)) {
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

/* ---- search: candidate traces --------------------------------------------- */

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
    bool *item_loaded; /* run_batch: loaded again for the batch */
    uint64_t inspected;
};

/* Rows [lo, hi) of a sealed source that can overlap [start, end]. */
void traces_row_window(const struct qctx *q, const struct traces_search_req *rq, size_t si,
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

/* Zone maps, blooms and the resource dictionary for a sealed source: MAY,
 * or the reason to skip it (NO_ZONE, NO_BLOOM, NO_DICT). */
int traces_source_may(const struct qctx *q, const struct traces_search_req *rq,
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

static void seed_scan(struct search *s, size_t si);

static void seed_item(void *arg, size_t si)
{
    struct search *s = arg;
    struct qctx *q = &s->q;
    if (qctx_check(q) != 0) {
        return;
    }
    int may = traces_source_may(q, s->rq, &s->seeds, si);
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
    seed_scan(s, si);
    /* the candidates hold copies (ids, times), nothing of the block: its
     * tables and pages may go until the gather loads it again */
    qctx_done(q, src);
}

static void seed_scan(struct search *s, size_t si)
{
    struct qctx *q = &s->q;
    struct qctx_src *src = &q->src[si];
    qctx_add(&q->st.blocks_scanned, 1);
    uint64_t lo, hi, r;
    traces_row_window(q, s->rq, si, &lo, &hi);
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
                hit = traces_eval_bool(&e, s->seeds.f[k], &sp);
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

/* ---- search: gathering and evaluating whole traces ------------------------ */

static void gather_scan(struct search *s, size_t si);

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
    gather_scan(s, si);
    /* the hits are (source, row) refs: run_batch loads the block again
     * before it reads their spans */
    qctx_done(q, src);
}

static void gather_scan(struct search *s, size_t si)
{
    struct qctx *q = &s->q;
    struct qctx_src *src = &q->src[si];
    struct hits *h = &s->item_hits[si];
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
            if (traces_hits_push(q, h, &t) < 0) {
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
/* Numbers the span tree as Tempo's nested set model does: depth first from
 * each root (in start order), children in start order, a span's left on
 * the way down and right on the way up from 1; parent = the parent's
 * left, -1 for a root. Spans under no root keep 0s. */
static int nested_set(struct ectx *e, struct etrace *tr)
{
    int32_t *first = arena_alloc(e->a, 3 * (size_t)tr->n * sizeof(int32_t) + sizeof(int32_t));
    if (first == NULL) {
        return -ENOMEM;
    }
    int32_t *last = first + tr->n, *next = last + tr->n;
    for (uint32_t i = 0; i < tr->n; i++) {
        first[i] = last[i] = next[i] = -1;
        tr->s[i].ns_left = tr->s[i].ns_right = tr->s[i].ns_parent = 0;
    }
    for (uint32_t i = 0; i < tr->n; i++) {
        int32_t pa = tr->s[i].parent;
        if (pa < 0) {
            continue;
        }
        if (last[pa] < 0) {
            first[pa] = (int32_t)i;
        } else {
            next[last[pa]] = (int32_t)i;
        }
        last[pa] = (int32_t)i;
    }
    int32_t bound = 1;
    for (uint32_t r = 0; r < tr->n; r++) {
        if (tr->s[r].v.has_parent) {
            continue;
        }
        int32_t node = (int32_t)r;
        tr->s[node].ns_left = bound++;
        tr->s[node].ns_parent = -1;
        while (node >= 0) { /* each span is entered once: bounded by 2n steps */
            int32_t c = first[node];
            if (c >= 0) {
                first[node] = next[c]; /* first[] doubles as the next child to visit */
                tr->s[c].ns_left = bound++;
                tr->s[c].ns_parent = tr->s[node].ns_left;
                node = c;
            } else {
                tr->s[node].ns_right = bound++;
                node = node == (int32_t)r ? -1 : tr->s[node].parent;
            }
        }
    }
    return 0;
}

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
    return nested_set(e, tr);
}

/* The stored value of an attribute leaf (first scope that has it). */
static bool attr_raw(const struct traceql_field *f, const struct span_view *sv, struct val *out)
{
    bool any = f->scope == TRACEQL_SCOPE_ANY;
    if ((any || f->scope == TRACEQL_SCOPE_SPAN) &&
        traces_attrs_find(&sv->attrs, f->name, f->name_len, out)) {
        return true;
    }
    if ((any || f->scope == TRACEQL_SCOPE_RESOURCE) &&
        traces_attrs_find(&sv->resource->attrs, f->name, f->name_len, out)) {
        return true;
    }
    if (any || f->scope == TRACEQL_SCOPE_EVENT) {
        struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
        for (uint32_t i = 0; i < sv->n_events; i++) {
            uint64_t t;
            const char *nm;
            size_t nn;
            struct oattrs at;
            if (otlpenc_event_next(&r, &t, &nm, &nn, &at) < 0) {
                break;
            }
            if (traces_attrs_find(&at, f->name, f->name_len, out)) {
                return true;
            }
        }
    }
    if (any || f->scope == TRACEQL_SCOPE_LINK) {
        struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
        for (uint32_t i = 0; i < sv->n_links; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (otlpenc_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            if (traces_attrs_find(&at, f->name, f->name_len, out)) {
                return true;
            }
        }
    }
    return (any || f->scope == TRACEQL_SCOPE_INSTRUMENTATION) &&
           traces_attrs_find(&sv->scope->attrs, f->name, f->name_len, out);
}

void traces_json_tv(struct jsonw *w, const struct tv *v)
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
        jsonw_cstr(w, traceql_status_word(v->i));
        break;
    case TRACEQL_T_KIND:
        jsonw_key(w, "stringValue");
        jsonw_cstr(w, traceql_kind_word(v->i));
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
        hex_encode(id, sp->v.span_id, 8);
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
                v = traces_eval_val(e, f, sp);
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
                otlpenc_json_value(w, &raw);
            } else {
                traces_json_tv(w, &v);
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
    hex_encode(h, id, 16);
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
    uint8_t *done = traces_mark_new(e);
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
static int batch_eval(struct search *s, const struct cand *cands, size_t from, size_t nb,
                      struct result *res, size_t *n_res, const struct shown *sh, arena *a);

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
    /* The blocks holding hits, loaded (and pinned) again while this batch's
     * traces are read, evaluated and rendered (span views point into
     * their tables); given up at the batch's end. */
    for (size_t si = 0; si < q->n_src; si++) {
        if (s->item_hits[si].n > 0 && qctx_load(q, &q->src[si], BLK_ROOT | s->trace_want) < 0) {
            s->item_hits[si].n = 0; /* quarantined: its spans are lost */
            if (qctx_err(q) != 0) {
                return qctx_err(q);
            }
        } else if (s->item_hits[si].n > 0) {
            s->item_loaded[si] = true;
        }
    }
    rc = batch_eval(s, cands, from, nb, res, n_res, sh, a);
    for (size_t si = 0; si < q->n_src; si++) {
        if (s->item_loaded[si]) {
            s->item_loaded[si] = false;
            qctx_done(q, &q->src[si]);
        }
    }
    return rc;
}

/* run_batch's evaluation of the gathered hits. */
static int batch_eval(struct search *s, const struct cand *cands, size_t from, size_t nb,
                      struct result *res, size_t *n_res, const struct shown *sh, arena *a)
{
    struct qctx *q = &s->q;
    int rc = 0;
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
        if (link_trace(&e, &tr) < 0 || traces_eval_trace(&e, s->rq->expr, &out) < 0) {
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
    int rc = traces_query_open(&s.q, &rq->lim);
    if (rc < 0) {
        traces_set_err(err, errlen, rc);
        return rc;
    }
    struct qctx *q = &s.q;
    struct cand *cands = NULL;
    struct result *res = NULL;
    size_t n_res = 0, nc = 0;
    arena *a = arena_new(0);
    struct shown sh = {0};
    if (rq->expr != NULL && rq->expr->root != NULL) {
        traces_seeds_of(rq->expr->root, &s.seeds);
        shown_node(&sh, rq->expr->root);
        s.trace_want = traces_node_tables(rq->expr->root);
    } else {
        s.seeds.all = true;
    }
    for (size_t i = 0; i < s.seeds.n; i++) {
        s.seed_want |= traces_field_tables(s.seeds.f[i]);
    }
    for (size_t i = 0; i < sh.n; i++) {
        s.trace_want |= traces_field_tables(sh.f[i]);
    }
    s.item_maps = calloc(q->n_src + 1, sizeof(*s.item_maps));
    s.item_hits = calloc(q->n_src + 1, sizeof(*s.item_hits));
    s.item_loaded = calloc(q->n_src + 1, sizeof(*s.item_loaded));
    res = calloc((size_t)rq->limit + 1, sizeof(*res));
    if (a == NULL || s.item_maps == NULL || s.item_hits == NULL || s.item_loaded == NULL ||
        res == NULL) {
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
    free(s.item_loaded);
    cmap_free(q, &s.batch);
    arena_free(a);
    qstats_scan_add(&q->st);
    if (scan != NULL) {
        *scan = q->st;
    }
    qctx_close(q);
    if (rc != 0) {
        rc = traces_err_msg(q, err, errlen, rc);
    }
    return rc;
}

/* ---- for query/tqmx_scan.c (traces_int.h) ----------------------------------- */

bool traces_field_needs_trace(const struct traceql_field *f)
{
    return needs_trace(f);
}

int traces_espan_cmp(const void *pa, const void *pb)
{
    return espan_cmp(pa, pb);
}

int traces_link_trace(struct ectx *e, struct etrace *tr)
{
    return link_trace(e, tr);
}
