/*
 * pmsrc_lbl.c - the series source's use of the blocks' label indexes
 * (pmsrc_int.h; the index itself is pmsrc_idx.c): building one with a run
 * in index mode, caching it on the block (charged, bounded), series mode
 * answered from it, the streams a selector needs, and the label names and
 * values calls (pmsrc_label_values).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "query/pmsrc_int.h"

/*
 * Builds the index of sealed source |qs| with a run in index mode over the
 * whole block (every stream's first row; every row of the histogram and
 * summary streams, and of a block without a stream section), on the
 * query's qctx: its rows count and its deadline holds. NULL with the
 * query's error set, or NULL (no error) when the block failed verification.
 */
/* What an index build may hold: what the query has left (0: no bound). */
static uint64_t build_allowance(const struct qctx *q)
{
    uint64_t max = q->lim.max_memory, held = (uint64_t)__atomic_load_n(&q->mem, __ATOMIC_RELAXED);
    return max == 0 ? 0 : held < max ? max - held : 1;
}

static struct pmx *index_build(struct pms_run *r, struct qctx_src *qs)
{
    struct qctx *q = r->q;
    /* The build reads the block through the query's load (its pin and
     * page window; run_blocks' qctx_done_all lets it go) and runs on a
     * child context bounded by what the query has left: its scratch (every
     * series of the block, labels and all) can be many times the index it
     * leaves and the query's own series, so one that does not fit is
     * dropped and the block read without an index, the query unharmed. */
    int rc = qctx_load(q, qs, BLK_ALL);
    if (rc < 0) {
        return NULL; /* quarantined, or the query's error */
    }
    struct pmx *x = calloc(1, sizeof(*x));
    if (x == NULL || (x->a = arena_new(64 << 10)) == NULL) {
        free(x);
        qctx_fail(q, -ENOMEM, "out of memory");
        return NULL;
    }
    arena *labels = arena_new(256 << 10); /* the run's labels: copied compactly, then freed */
    if (labels == NULL) {
        pmx_free(x);
        qctx_fail(q, -ENOMEM, "out of memory");
        return NULL;
    }
    uint64_t allowed = build_allowance(q);
    struct qctx sub;
    qctx_sub_open(&sub, q, allowed);
    qctx_arena_bind(&sub, labels);
    struct pmsrc ps = {.q = &sub, .a = labels};
    struct pms_run ir;
    rc = pms_run_init(&ir, &ps, NULL, 0, 0, INT64_MAX, PMS_INDEX);
    bool have_run = rc == 0;
    if (rc == 0) {
        pms_note_record(x);
        rc = pms_do_block(&ir, qs);
        pms_note_record(NULL);
    }
    if (rc == 0 && !qctx_src_failed(qs)) {
        blk_time_range(qs->b, &x->tmin, &x->tmax);
        x->time = blk_col_time(qs->b);
        rc = x->time == NULL ? -ENOMEM : pmx_assemble(x, qs->b, ir.ser, ir.nser, ir.call);
        if (rc < 0) {
            qctx_fail(&sub, rc, "out of memory");
        }
    }
    if (rc == 0) {
        rc = qctx_err(&sub);
    }
    if (have_run) {
        pms_run_fini(&ir);
    }
    arena_free(labels);
    if (qctx_sub_close(&sub, q) == -ENOMEM) {
        r->no_index = true; /* too big for what the query has left: row by row */
        pmx_note_too_big(qs->b, allowed);
    }
    if (rc == 0) {
        rc = qctx_err(q);
    }
    if (rc < 0 || qctx_src_failed(qs)) {
        pmx_free(x);
        return NULL;
    }
    x->bytes = sizeof(*x) + arena_footprint(x->a);
    return x;
}

/* The index of sealed source |qs|: cached on the block, built on first use
 * when the cache has room. NULL when there is none (then the query's error
 * is set, or the source failed, or the block is read without the index). */
const struct pmx *pms_index_of(struct pms_run *r, struct qctx_src *qs)
{
    struct pmx *x = blk_aux(qs->b);
    if (x != NULL || r->no_index) {
        return x;
    }
    if (!pmx_cache_room(pmx_guess(qs->b)) || !pmx_build_fits(qs->b, build_allowance(r->q))) {
        r->no_index = true;
        return NULL;
    }
    x = index_build(r, qs);
    if (x == NULL) {
        return NULL;
    }
    pmx_note_built(qs->b, x->bytes);
    if (!pmx_cache_room(x->bytes) || !pmx_charge(x)) {
        pmx_free(x); /* the cache is full: this block is read row by row */
        r->no_index = true;
        return NULL;
    }
    if (!blk_aux_set(qs->b, x, pmx_free)) {
        pmx_free(x); /* another query attached one first */
        x = blk_aux(qs->b);
    }
    return x;
}

static void notes_replay(const struct pmx *x)
{
    for (uint32_t i = 0; i < x->n_notes; i++) {
        pms_unmapped_note(x->note, x->note_len);
    }
}

/* Series mode over a block's index: the series the matchers admit with a
 * sample in the range, no row read. */
int pms_series_from_index(struct pms_run *r, const struct pmx *x)
{
    struct qctx *q = r->q;
    q->st.blocks_scanned++;
    notes_replay(x);
    uint32_t *c;
    int64_t nc = pmx_match(x, r->m, r->n_m, r->blk, &c);
    for (int64_t i = 0; i < nc; i++) {
        if (!pmx_present(x, c[i], r->lo_ns, r->hi_ns)) {
            continue;
        }
        struct pm_labels ls;
        int64_t si = pmx_labels(x, c[i], r->blk, &ls);
        if (si == 0) {
            si = pms_intern(r, &ls, x->ser[c[i]].hash, true);
        }
        if (si < 0) {
            nc = si;
            break;
        }
        r->ser[si].seen = true;
    }
    if (nc < 0) {
        qctx_fail(q, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    if (pms_charge(r) < 0) {
        return qctx_err(q);
    }
    return qctx_err(q);
}

/* Samples and exemplars: the streams that make a series the matchers admit
 * (one byte per block stream), or NULL with the query's error set;
 * *ti_admitted: whether one of those series is a target_info. */
uint8_t *pms_streams_wanted(struct pms_run *r, const struct pmx *x, uint32_t n_streams,
                            bool *ti_admitted)
{
    uint32_t *c;
    int64_t nc = pmx_match(x, r->m, r->n_m, r->blk, &c);
    uint8_t *want = nc >= 0 ? arena_alloc(r->blk, n_streams ? n_streams : 1) : NULL;
    if (want == NULL) {
        qctx_fail(r->q, -ENOMEM, "out of memory");
        return NULL;
    }
    memset(want, 0, n_streams ? n_streams : 1);
    *ti_admitted = false;
    for (int64_t i = 0; i < nc; i++) {
        const struct pmx_series *xs = &x->ser[c[i]];
        for (uint32_t k = 0; k < xs->nlab && !*ti_admitted; k++) {
            *ti_admitted = x->lab[xs->lab0 + k] == x->ti_val;
        }
        for (uint32_t k = 0; k < xs->nref; k++) {
            uint32_t st = x->ref[xs->ref0 + k].stream;
            if (st < n_streams) {
                want[st] = 1;
            }
        }
    }
    return want;
}

/* ---- label names and values ---- */

/* A set of distinct strings (copied into the result arena when new). */
struct strset {
    struct pmsrc_str *v;
    uint32_t n, cap;
    uint32_t *tab; /* index + 1 */
    uint32_t tcap;
};

static uint64_t str_hash(const char *p, uint32_t n)
{
    return XXH3_64bits(p, n);
}

static int strset_add(struct pms_run *r, struct strset *ss, const char *p, uint32_t n)
{
    if ((uint64_t)(ss->n + 1) * 2 > ss->tcap) {
        uint32_t nc = ss->tcap ? ss->tcap * 2 : 64;
        uint32_t *t = arena_alloc(r->call, (size_t)nc * sizeof(*t));
        if (t == NULL) {
            return -ENOMEM;
        }
        memset(t, 0, (size_t)nc * sizeof(*t));
        for (uint32_t i = 0; i < ss->n; i++) {
            uint32_t k = (uint32_t)str_hash(ss->v[i].s, ss->v[i].n) & (nc - 1);
            while (t[k] != 0) {
                k = (k + 1) & (nc - 1);
            }
            t[k] = i + 1;
        }
        ss->tab = t;
        ss->tcap = nc;
    }
    uint32_t k = (uint32_t)str_hash(p, n) & (ss->tcap - 1);
    while (ss->tab[k] != 0) {
        const struct pmsrc_str *e = &ss->v[ss->tab[k] - 1];
        if (e->n == n && memcmp(e->s, p, n) == 0) {
            return 0;
        }
        k = (k + 1) & (ss->tcap - 1);
    }
    if (pms_grow(r->call, (void **)&ss->v, &ss->cap, ss->n, sizeof(*ss->v)) < 0) {
        return -ENOMEM;
    }
    char *c = arena_strndup(r->a, p, n);
    if (c == NULL) {
        return -ENOMEM;
    }
    ss->v[ss->n] = (struct pmsrc_str){c, n};
    ss->tab[k] = ++ss->n;
    return 0;
}

/* The names, or the values of |name|, a block's index has in the range. */
static int strset_from_index(struct pms_run *r, struct strset *ss, const struct pmx *x,
                             const char *name, size_t len)
{
    bool all = x->tmin >= r->lo_ns && x->tmax < r->hi_ns;
    notes_replay(x);
    if (name == NULL) {
        for (uint32_t i = 0; i < x->nname; i++) {
            if ((all || pmx_name_present(x, i, r->lo_ns, r->hi_ns)) &&
                strset_add(r, ss, x->name[i].s, x->name[i].n) < 0) {
                return -ENOMEM;
            }
        }
        return 0;
    }
    int64_t ni = pmx_find_name(x, name, len);
    for (uint32_t i = 0; ni >= 0 && i < x->name[ni].nval; i++) {
        uint32_t vi = x->name[ni].val0 + i;
        if ((all || pmx_val_present(x, vi, r->lo_ns, r->hi_ns)) &&
            strset_add(r, ss, x->val[vi].s, x->val[vi].n) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int pstr_cmp(const void *pa, const void *pb)
{
    const struct pmsrc_str *a = pa, *b = pb;
    int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return c != 0 ? c : (a->n > b->n) - (a->n < b->n);
}

int pmsrc_label_values(struct pmsrc *s, const char *name, size_t len, int64_t mint_ms,
                       int64_t maxt_ms, struct pmsrc_str **out, size_t *n)
{
    struct pms_run r;
    *out = NULL;
    *n = 0;
    int rc = pms_run_init(&r, s, NULL, 0, mint_ms, maxt_ms, PMS_SERIES);
    if (rc < 0) {
        return rc;
    }
    struct strset ss = {0};
    struct qctx *q = s->q;
    rc = qctx_err(q);
    for (size_t i = 0; rc == 0 && i < q->n_src; i++) {
        struct qctx_src *qs = &q->src[i];
        const struct pmx *x = NULL;
        if (qs->b != NULL && !qctx_src_failed(qs) && qs->rows > 0 && qs->tmin < r.hi_ns &&
            qs->tmax >= r.lo_ns) {
            x = pms_index_of(&r, qs);
            rc = qctx_err(q);
        }
        if (rc == 0 && x != NULL) {
            q->st.blocks_considered++;
            q->st.blocks_scanned++;
            rc = strset_from_index(&r, &ss, x, name, len);
        } else if (rc == 0) {
            rc = pms_do_block(&r, qs); /* open, failed, out of range, or no index */
        }
        qctx_done_all(q, qs); /* the strings are copied (run_blocks) */
    }
    for (uint32_t i = 0; rc == 0 && i < r.nser; i++) {
        const struct pm_labels *ls = &r.ser[i].labels;
        if (!r.ser[i].match || !r.ser[i].seen) {
            continue;
        }
        for (uint32_t k = 0; rc == 0 && k < ls->n; k++) {
            const struct pm_label *l = &ls->v[k];
            if (name == NULL) {
                rc = strset_add(&r, &ss, l->name, l->name_len);
            } else if (l->name_len == len && memcmp(l->name, name, len) == 0) {
                rc = strset_add(&r, &ss, l->value, l->value_len);
            }
        }
    }
    struct pmsrc_str *v = NULL;
    if (rc == 0) {
        v = arena_alloc(s->a, (ss.n ? ss.n : 1) * sizeof(*v));
        rc = v == NULL ? -ENOMEM : pms_charge(&r);
    }
    if (rc < 0 && qctx_err(q) == 0) {
        qctx_fail(q, rc, "out of memory");
    }
    if (rc == 0) {
        if (ss.n > 0) {
            memcpy(v, ss.v, ss.n * sizeof(*v));
        }
        qsort(v, ss.n, sizeof(*v), pstr_cmp);
        *out = v;
        *n = ss.n;
    }
    pms_run_fini(&r);
    return rc < 0 ? (qctx_err(q) != 0 ? qctx_err(q) : rc) : 0;
}
