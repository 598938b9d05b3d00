/*
 * pmsrc.c - the series source: plans over the snapshot's blocks (zone map,
 * then the metric dictionary against the selector's __name__ matchers),
 * reads the surviving blocks' points and turns them into Prometheus series
 * (pmsrc.h). Exponential histograms, the folding of samples, metadata and
 * exemplar decoding are in pmsrc_out.c; the label index of a sealed block
 * in pmsrc_idx.c (the structure) and pmsrc_lbl.c (its use). The index is
 * built by a run of this file's row loop in index mode, which records
 * where each series has rows instead of collecting samples.
 *
 * PER BLOCK
 *   A metric table (one entry per dictionary metric: candidate or not, its
 *   Prometheus names, which of them the __name__ matchers admit, delta or
 *   not), a resource table (job/instance, the target_info series) and a
 *   series cache keyed by (resource id, metric id, hash of the point's raw
 *   attribute bytes; the bytes compared on a hit) whose entries hold the
 *   labels without __name__ and the slots: one per sample kind the point
 *   makes (suffix + le/quantile) -> the call's series index. A row costs a
 *   root read, a metric-id test, the attribute hash and a cache probe; the
 *   labels of a series are built once per block it appears in and the
 *   matchers run once per distinct series of the call.
 *   With a stream index, a gauge or sum stream's rows are read in runs of
 *   time, value and flags only (blk_point_values, prefetched: a stream's
 *   rows lie a series count apart), and a classic histogram row's detail
 *   is decoded straight into its bucket series (no le text per row: the
 *   slots keep their bounds' bits).
 *
 * TARGET_INFO (PROMQL.md C.3)
 *   One series per resource with attributes besides the identifying ones,
 *   value 1, one sample at every distinct millisecond at which that resource
 *   has a point in the block (any metric). Prometheus's receiver on main
 *   writes samples from the batch's earliest to latest point every
 *   lookback/2 plus one at the latest; we store no batches, so we write
 *   what a batch-per-point receiver would write: a sample with every point.
 *   It is deterministic, invents no timestamps, and target_info is present
 *   exactly where the resource's series are (so `* on(job, instance)
 *   group_left(...) target_info` finds it at every step they have a value).
 *
 * MEMORY
 *   Results (labels, samples, histograms) in the pmsrc's arena; the call's
 *   sample vectors in a call arena, per-block tables in a block arena reset
 *   after each block. All three charge their chunks to the qctx as they come
 *   and go (qctx_arena_bind), so the query's count is what they hold. A
 *   stream-read series' floats live in the results' arena, grown per
 *   block by its row count and folded in place at the end.
 */
#include "query/pmsrc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmsrc_int.h"
#include "storage/promname.h"

#define ROW_CHECK 1024
#define NS_PER_MS 1000000ull

/* ---- unmapped counter ---- */

static uint64_t unmapped;
static pthread_mutex_t unmapped_lock = PTHREAD_MUTEX_INITIALIZER;
static char unmapped_name[128];

/* An index build on this thread records the notes it makes, for the
 * queries that use the index to replay (pmsrc.h: counted per query). */
static __thread struct pmx *note_rec;

void pms_note_record(struct pmx *x)
{
    note_rec = x;
}

void pms_unmapped_note(const char *name, size_t len)
{
    if (note_rec != NULL) { /* counted by the queries that read the index */
        note_rec->n_notes++;
        note_rec->note = name;
        note_rec->note_len = (uint32_t)len;
        return;
    }
    __atomic_fetch_add(&unmapped, 1, __ATOMIC_RELAXED);
    if (len >= sizeof(unmapped_name)) {
        len = sizeof(unmapped_name) - 1;
    }
    pthread_mutex_lock(&unmapped_lock);
    memcpy(unmapped_name, name, len);
    unmapped_name[len] = '\0';
    pthread_mutex_unlock(&unmapped_lock);
}

uint64_t pmsrc_unmapped(void)
{
    return __atomic_load_n(&unmapped, __ATOMIC_RELAXED);
}

size_t pmsrc_unmapped_last(char *out, size_t cap)
{
    pthread_mutex_lock(&unmapped_lock);
    size_t n = strlen(unmapped_name);
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(out, unmapped_name, n);
    out[n] = '\0';
    pthread_mutex_unlock(&unmapped_lock);
    return n;
}

/* ---- helpers ---- */

int pms_grow(arena *a, void **p, uint32_t *cap, uint32_t n, size_t sz)
{
    if (n < *cap) {
        return 0;
    }
    uint32_t nc = *cap ? *cap * 2 : 8;
    if (nc <= *cap) {
        return -ENOMEM;
    }
    void *np = arena_alloc(a, (size_t)nc * sz);
    if (np == NULL) {
        return -ENOMEM;
    }
    if (*cap) {
        memcpy(np, *p, (size_t)*cap * sz);
    }
    *p = np;
    *cap = nc;
    return 0;
}

int pms_grow_f(arena *a, struct pms_series *s)
{
    uint32_t cap = s->cf;
    if (pms_grow(a, (void **)&s->f, &s->cf, s->nf, sizeof(*s->f)) < 0) {
        return -ENOMEM;
    }
    if (s->cf != cap) {
        s->f_res = false;
    }
    return 0;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The hash of a point's raw attribute bytes: 8 bytes at a time. */
static uint64_t bytes_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix64(h ^ w);
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w ^ 0x5555);
}

/* ---- the call's state ---- */

struct pms_slot {
    const char *extra; /* le / quantile value (result arena); NULL for none */
    uint32_t elen;
    uint8_t sfx;
    uint8_t bkind; /* a _bucket slot: 1 its bound is |bits|, 2 the +Inf one; 0 unknown */
    uint32_t ser;
    uint64_t bits;
};

struct pms_ent {
    uint64_t h;
    uint32_t res, metric;
    const uint8_t *ap;
    uint32_t alen;
    bool bad;
    struct pm_labels base; /* without __name__ */
    struct pms_slot *slot;
    uint32_t ns, cs;
};

struct pms_metric {
    bool cand;
    bool delta; /* accumulated per stream */
    bool gauge_hist;
    bool exemplars; /* histograms and monotonic sums carry them (PROMQL.md C.8) */
    bool sfx_ok[4];
    enum metric_kind kind;
    const char *name[4]; /* family, _bucket, _sum, _count (result arena) */
    uint32_t nlen[4];
};

struct pms_res {
    int state; /* 0 not built, 1 built, -1 refused */
    struct promname_resource r;
    int64_t ti; /* target_info series, or -1 */
    int64_t ti_last;
};

static const char *const sfx_str[4] = {"", "_bucket", "_sum", "_count"};

int pms_charge(struct pms_run *r)
{
    /* the arenas charge their chunks as they come (qctx_arena_bind) */
    return qctx_err(r->q);
}

static bool name_admitted(const struct pms_run *r, const char *name, size_t len)
{
    for (size_t i = 0; i < r->n_m; i++) {
        const struct promql_matcher *m = &r->m[i];
        if (m->name.n == 8 && memcmp(m->name.s, "__name__", 8) == 0 &&
            !promql_matcher_matches(m, name, len)) {
            return false;
        }
    }
    return true;
}

static bool labels_admitted(const struct pms_run *r, const struct pm_labels *ls)
{
    for (size_t i = 0; i < r->n_m; i++) {
        const struct promql_matcher *m = &r->m[i];
        uint32_t vl;
        const char *v = pm_labels_get(ls, m->name.s, m->name.n, &vl);
        if (!promql_matcher_matches(m, v != NULL ? v : "", v != NULL ? vl : 0)) {
            return false;
        }
    }
    return true;
}

static int labels_copy(arena *a, const struct pm_labels *in, struct pm_labels *out);

/* The call's series of |ls| (its strings in the result arena, or copied
 * there when new with |copy|, which a label index's series are, already
 * matched): its index, created (and matched) when new; -ENOMEM. */
int64_t pms_intern(struct pms_run *r, const struct pm_labels *ls, uint64_t h, bool copy)
{
    if ((uint64_t)(r->nser + 1) * 2 > r->tcap) {
        uint32_t nc = r->tcap ? r->tcap * 2 : 256;
        uint32_t *t = arena_alloc(r->call, (size_t)nc * sizeof(*t));
        if (t == NULL) {
            return -ENOMEM;
        }
        memset(t, 0, (size_t)nc * sizeof(*t));
        for (uint32_t i = 0; i < r->nser; i++) {
            uint32_t k = (uint32_t)r->ser[i].hash & (nc - 1);
            while (t[k] != 0) {
                k = (k + 1) & (nc - 1);
            }
            t[k] = i + 1;
        }
        r->tab = t;
        r->tcap = nc;
    }
    uint32_t k = (uint32_t)h & (r->tcap - 1);
    while (r->tab[k] != 0) {
        struct pms_series *s = &r->ser[r->tab[k] - 1];
        if (s->hash == h && pm_labels_equal(&s->labels, ls)) {
            return r->tab[k] - 1;
        }
        k = (k + 1) & (r->tcap - 1);
    }
    if (pms_grow(r->call, (void **)&r->ser, &r->cser, r->nser, sizeof(*r->ser)) < 0) {
        return -ENOMEM;
    }
    struct pms_series *s = &r->ser[r->nser];
    memset(s, 0, sizeof(*s));
    s->labels = *ls;
    if (copy && labels_copy(r->a, ls, &s->labels) < 0) {
        return -ENOMEM;
    }
    s->hash = h;
    s->match = copy || labels_admitted(r, ls); /* copy: from an index, matched there */
    r->tab[k] = ++r->nser;
    return r->nser - 1;
}

static int64_t intern(struct pms_run *r, const struct pm_labels *ls)
{
    return pms_intern(r, ls, pm_labels_hash(ls), false);
}

static int labels_copy(arena *a, const struct pm_labels *in, struct pm_labels *out)
{
    struct pm_label *v = arena_alloc(a, (in->n ? in->n : 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < in->n; i++) {
        const struct pm_label *l = &in->v[i];
        char *n = arena_strndup(a, l->name, l->name_len);
        char *val = arena_strndup(a, l->value, l->value_len);
        if (n == NULL || val == NULL) {
            return -ENOMEM;
        }
        v[i] = (struct pm_label){n, val, l->name_len, l->value_len};
    }
    out->v = v;
    out->n = in->n;
    return 0;
}

/* Index mode: series |s| was seen at |row| of the current stream (or the
 * stream as a whole). */
static int idx_note(struct pms_run *r, struct pms_series *s, uint32_t row, bool whole)
{
    uint32_t st = r->cur_stream;
    if (st != PMS_NOSTREAM && whole) {
        row = PMS_WHOLE;
    }
    if (s->npx > 0) {
        const struct pms_pair *l = &s->px[s->npx - 1];
        if (l->stream == st && l->row == row) {
            return 0;
        }
    }
    if (pms_grow(r->call, (void **)&s->px, &s->cpx, s->npx, sizeof(*s->px)) < 0) {
        return -ENOMEM;
    }
    s->px[s->npx++] = (struct pms_pair){st, row};
    return 0;
}

/* A promname label set copied into the result arena as a pm_labels. */
static int lset_copy(struct pms_run *r, const struct promname_lset *ls, struct pm_labels *out)
{
    struct pm_label *v = arena_alloc(r->a, (ls->n ? ls->n : 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < ls->n; i++) {
        const struct promname_label *l = &ls->lab[i];
        char *n = arena_strndup(r->a, l->name, l->name_len);
        char *val = arena_strndup(r->a, l->value, l->value_len);
        if (n == NULL || val == NULL) {
            return -ENOMEM;
        }
        v[i] = (struct pm_label){n, val, l->name_len, l->value_len};
    }
    out->v = v;
    out->n = ls->n;
    return 0;
}

/* Runs |build| over a promname set with room for |nlab| labels and about
 * |bytes| bytes, doubling the room on -ENOBUFS (bounded). */
typedef int (*lset_fn)(struct promname_lset *ls, void *ctx);
static int with_lset(struct pms_run *r, uint32_t nlab, size_t bytes, lset_fn build, void *ctx,
                     struct promname_lset *ls)
{
    for (int tries = 0; tries < 8; tries++) {
        struct promname_label *lab = arena_alloc(r->blk, nlab * sizeof(*lab));
        char *buf = arena_alloc(r->blk, bytes);
        if (lab == NULL || buf == NULL) {
            return -ENOMEM;
        }
        promname_lset_init(ls, lab, nlab, buf, bytes);
        int rc = build(ls, ctx);
        if (rc != -ENOBUFS) {
            return rc;
        }
        nlab *= 2;
        bytes *= 2;
    }
    return -ENOBUFS;
}

struct res_ctx {
    const struct res_view *rv;
    const struct promname_resource *pr;
    const struct oattrs *pa;
};

static int build_ti(struct promname_lset *ls, void *ctx)
{
    struct res_ctx *c = ctx;
    return promname_target_info(ls, c->rv->attrs.p, c->rv->attrs.len, c->rv->attrs.count, c->pr);
}

static int build_point(struct promname_lset *ls, void *ctx)
{
    struct res_ctx *c = ctx;
    int rc = promname_lset_add_attrs(ls, c->pa->p, c->pa->len, c->pa->count, PROMNAME_SKIP_NAME);
    if (rc == 0) {
        rc = promname_lset_add_resource(ls, c->pr);
    }
    return rc;
}

/* Resource |id| of the current block: job/instance and target_info. */
static struct pms_res *res_of(struct pms_run *r, uint32_t id)
{
    if (id >= r->nri) {
        return NULL;
    }
    struct pms_res *x = &r->ri[id];
    if (x->state != 0) {
        return x->state > 0 ? x : NULL;
    }
    x->state = -1;
    x->ti = -1;
    x->ti_last = INT64_MIN;
    const struct res_view *rv = qctx_resource(r->src, id);
    if (rv == NULL) {
        return NULL;
    }
    size_t cap = (size_t)rv->attrs.len * 8 + 256;
    char *buf = arena_alloc(r->blk, cap);
    if (buf == NULL) {
        r->err = -ENOMEM;
        return NULL;
    }
    if (promname_resource_init(&x->r, rv->attrs.p, rv->attrs.len, rv->attrs.count, buf, cap) < 0) {
        pms_unmapped_note("target_info", 11);
        return NULL;
    }
    x->state = 1;
    if (r->want_ti) {
        struct res_ctx c = {.rv = rv, .pr = &x->r};
        struct promname_lset ls;
        int rc =
            with_lset(r, rv->attrs.count + 4, (size_t)rv->attrs.len * 8 + 256, build_ti, &c, &ls);
        if (rc == 1) {
            struct pm_labels l;
            int64_t si;
            if (lset_copy(r, &ls, &l) < 0 || (si = intern(r, &l)) < 0) {
                r->err = -ENOMEM;
                return x;
            }
            x->ti = si;
        } else if (rc == -ENOMEM) {
            r->err = -ENOMEM;
        } else if (rc < 0) {
            pms_unmapped_note("target_info", 11);
        }
    }
    return x;
}

/* ---- planning one block ---- */

static const struct metric_view *metric_at(const struct qctx_src *s, uint32_t id)
{
    return s->b != NULL ? blk_metric(s->b, id) : oblock_metric(s->ob, id);
}

static uint32_t n_metrics(const struct qctx_src *s)
{
    return s->b != NULL ? blk_n_metrics(s->b) : oblock_n_metrics(s->ob);
}

/* Fills r->mi for the block; returns the number of candidates, -ENOMEM.
 * *any_delta tells whether a candidate is read from its oldest point. */
static int plan_metrics(struct pms_run *r, bool *any_delta)
{
    uint32_t nm = n_metrics(r->src);
    r->nmi = nm;
    r->mi = arena_alloc(r->blk, (nm ? nm : 1) * sizeof(*r->mi));
    if (r->mi == NULL) {
        return -ENOMEM;
    }
    memset(r->mi, 0, (nm ? nm : 1) * sizeof(*r->mi));
    int cands = 0;
    *any_delta = false;
    for (uint32_t i = 0; i < nm; i++) {
        const struct metric_view *mv = metric_at(r->src, i);
        struct pms_metric *mi = &r->mi[i];
        if (mv == NULL || mv->kind == MK_NONE) {
            continue;
        }
        mi->kind = mv->kind;
        mi->exemplars = mv->kind == MK_HISTOGRAM || mv->kind == MK_EXP_HISTOGRAM ||
                        (mv->kind == MK_SUM && mv->monotonic);
        enum promname_temporality tp = promname_temporality(mv->kind, mv->temporality);
        int pt = promname_type_of(mv->kind, mv->monotonic);
        if (tp == PROMNAME_T_INVALID || pt < 0) {
            pms_unmapped_note(mv->name.p, mv->name.len);
            continue;
        }
        size_t cap = (size_t)mv->name.len + mv->unit.len + 48;
        char *nb = arena_alloc(r->blk, cap);
        if (nb == NULL) {
            return -ENOMEM;
        }
        int nl = promname_metric(mv->name.p, mv->name.len, mv->unit.p, mv->unit.len,
                                 (enum promname_type)pt, nb, cap);
        if (nl < 0) {
            pms_unmapped_note(mv->name.p, mv->name.len);
            continue;
        }
        bool sfx_possible[4] = {false, false, false, false};
        switch (mv->kind) {
        case MK_HISTOGRAM:
            sfx_possible[1] = sfx_possible[2] = sfx_possible[3] = true;
            break;
        case MK_SUMMARY:
            sfx_possible[0] = sfx_possible[2] = sfx_possible[3] = true;
            break;
        default:
            sfx_possible[0] = true;
            break;
        }
        for (int k = 0; k < 4; k++) {
            if (!sfx_possible[k]) {
                continue;
            }
            size_t sl = strlen(sfx_str[k]);
            memcpy(nb + nl, sfx_str[k], sl + 1);
            if (!name_admitted(r, nb, (size_t)nl + sl)) {
                continue;
            }
            char *nm_ = arena_strndup(r->a, nb, (size_t)nl + sl);
            if (nm_ == NULL) {
                return -ENOMEM;
            }
            mi->name[k] = nm_;
            mi->nlen[k] = (uint32_t)(nl + sl);
            mi->sfx_ok[k] = true;
            mi->cand = true;
        }
        if (!mi->cand) {
            continue;
        }
        cands++;
        if (tp == PROMNAME_T_DELTA) {
            if (mv->kind == MK_EXP_HISTOGRAM) {
                mi->gauge_hist = true;
            } else {
                mi->delta = r->mode == PMS_SAMPLES;
                *any_delta = *any_delta || mi->delta;
            }
        }
    }
    return cands;
}

/* Whether some resource of the block makes a target_info series (building
 * the resource table). */
static bool plan_resources(struct pms_run *r)
{
    bool any = false;
    for (uint32_t i = 0; i < r->nri && r->err == 0; i++) {
        struct pms_res *x = res_of(r, i);
        any = any || (x != NULL && x->ti >= 0);
    }
    return any;
}

/* ---- rows ---- */

static struct pms_ent *ent_find(struct pms_run *r, const struct point_view *v)
{
    uint32_t res = v->resource != NULL ? v->resource->id : UINT32_MAX;
    uint64_t h = mix64(bytes_hash(v->attrs.p, v->attrs.len) ^ ((uint64_t)res << 32 | v->metric_id));
    if ((uint64_t)(r->nent + 1) * 2 > r->etcap) {
        uint32_t nc = r->etcap ? r->etcap * 2 : 256;
        uint32_t *t = arena_alloc(r->blk, (size_t)nc * sizeof(*t));
        if (t == NULL) {
            return NULL;
        }
        memset(t, 0, (size_t)nc * sizeof(*t));
        for (uint32_t i = 0; i < r->nent; i++) {
            uint32_t k = (uint32_t)r->ent[i].h & (nc - 1);
            while (t[k] != 0) {
                k = (k + 1) & (nc - 1);
            }
            t[k] = i + 1;
        }
        r->etab = t;
        r->etcap = nc;
    }
    uint32_t k = (uint32_t)h & (r->etcap - 1);
    while (r->etab[k] != 0) {
        struct pms_ent *e = &r->ent[r->etab[k] - 1];
        if (e->h == h && e->res == res && e->metric == v->metric_id && e->alen == v->attrs.len &&
            memcmp(e->ap, v->attrs.p, e->alen) == 0) {
            return e;
        }
        k = (k + 1) & (r->etcap - 1);
    }
    if (pms_grow(r->blk, (void **)&r->ent, &r->cent, r->nent, sizeof(*r->ent)) < 0) {
        return NULL;
    }
    struct pms_ent *e = &r->ent[r->nent];
    memset(e, 0, sizeof(*e));
    e->h = h;
    e->res = res;
    e->metric = v->metric_id;
    e->ap = v->attrs.p;
    e->alen = v->attrs.len;
    r->etab[k] = ++r->nent;

    struct pms_res *x = res_of(r, res);
    if (r->err != 0) {
        return NULL;
    }
    if (x == NULL) {
        e->bad = true;
        return e;
    }
    struct res_ctx c = {.pr = &x->r, .pa = &v->attrs};
    struct promname_lset ls;
    int rc = with_lset(r, v->attrs.count + 4, (size_t)v->attrs.len * 8 + 256, build_point, &c, &ls);
    if (rc == -ENOMEM || (rc == 0 && lset_copy(r, &ls, &e->base) < 0)) {
        return NULL;
    }
    if (rc < 0) {
        e->bad = true;
        pms_unmapped_note(v->metric->name.p, v->metric->name.len);
    }
    return e;
}

/* The series of sample |k| of entry |e| (suffix, extra label). */
static int64_t slot_of(struct pms_run *r, struct pms_ent *e, const struct pms_metric *mi,
                       uint32_t k, uint8_t sfx, const char *xname, const char *x, uint32_t xl)
{
    if (k < e->ns) {
        const struct pms_slot *s = &e->slot[k];
        if (s->sfx == sfx && s->elen == xl && (xl == 0 || memcmp(s->extra, x, xl) == 0)) {
            return s->ser;
        }
    }
    for (uint32_t i = 0; i < e->ns; i++) {
        const struct pms_slot *s = &e->slot[i];
        if (s->sfx == sfx && s->elen == xl && (xl == 0 || memcmp(s->extra, x, xl) == 0)) {
            return s->ser;
        }
    }
    struct pm_lb lb;
    struct pm_labels ls;
    pm_lb_init(&lb, r->a, &e->base);
    pm_lb_set(&lb, "__name__", 8, mi->name[sfx], mi->nlen[sfx]);
    const char *xc = NULL;
    if (xname != NULL) {
        xc = arena_strndup(r->a, x, xl);
        if (xc == NULL) {
            return -ENOMEM;
        }
        pm_lb_set(&lb, xname, strlen(xname), xc, xl);
    }
    if (pm_lb_done(&lb, &ls) < 0) {
        return -ENOMEM;
    }
    int64_t si = intern(r, &ls);
    if (si < 0) {
        return si;
    }
    if (pms_grow(r->blk, (void **)&e->slot, &e->cs, e->ns, sizeof(*e->slot)) < 0) {
        return -ENOMEM;
    }
    e->slot[e->ns++] = (struct pms_slot){xc, xl, sfx, 0, (uint32_t)si, 0};
    return si;
}

static int add_float(struct pms_run *r, struct pms_series *s, const struct point_view *v,
                     const struct pms_metric *mi, double val)
{
    int64_t t = promname_ts_ms(v->time_ns);
    if (r->mode == PMS_INDEX) {
        return idx_note(r, s, r->cur_row, r->idx_whole);
    }
    if (r->mode == PMS_SERIES) {
        s->seen = s->seen || (t >= r->mint && t <= r->maxt);
        return 0;
    }
    if (mi->delta) {
        if (pms_grow(r->call, (void **)&s->d, &s->cd, s->nd, sizeof(*s->d)) < 0) {
            return -ENOMEM;
        }
        s->d[s->nd++] = (struct pms_dsample){v->start_ns, v->time_ns, val};
        return 0;
    }
    if (pms_grow_f(r->call, s) < 0) {
        return -ENOMEM;
    }
    s->f[s->nf++] = (struct pm_fsample){t, val};
    return 0;
}

struct ex_ctx {
    struct pms_run *r;
    struct pms_series *s;
};

static int ex_add(void *ctx, int64_t t, double v, const struct pm_labels *labels)
{
    struct ex_ctx *c = ctx;
    struct pms_series *s = c->s;
    if (t < c->r->mint || t > c->r->maxt) {
        return 0;
    }
    if (pms_grow(c->r->call, (void **)&s->e, &s->ce, s->ne, sizeof(*s->e)) < 0) {
        return -ENOMEM;
    }
    s->e[s->ne++] = (struct pms_ex){t, v, *labels};
    return 0;
}

/* A classic histogram's exemplars go to their bucket's series. */
struct hex_ctx {
    struct pms_run *r;
    struct pms_ent *e;
    const struct pms_metric *mi;
    const struct point_view *v;
};

static int hex_add(void *ctx, int64_t t, double val, const struct pm_labels *labels)
{
    struct hex_ctx *c = ctx;
    char le[PROMNAME_FMT_MAX];
    size_t ll = 0;
    int b = pms_hist_bucket_of(c->v->detail.p, c->v->detail.len, val, le, &ll);
    if (b < -1) {
        return 0;
    }
    if (b == -1) {
        memcpy(le, "+Inf", 5);
        ll = 4;
    }
    int64_t si =
        slot_of(c->r, c->e, c->mi, UINT32_MAX, PROMNAME_SFX_BUCKET, "le", le, (uint32_t)ll);
    if (si < 0) {
        return (int)si;
    }
    struct ex_ctx ec = {c->r, &c->r->ser[si]};
    if (!ec.s->match) {
        return 0;
    }
    return ex_add(&ec, t, val, labels);
}

static int do_exemplars(struct pms_run *r, struct pms_ent *e, const struct pms_metric *mi,
                        const struct point_view *v, int64_t si)
{
    if (v->n_exemplars == 0 || !mi->exemplars) {
        return 0; /* gauges, non-monotonic sums, summaries: the receiver drops them */
    }
    int rc;
    if (mi->kind == MK_HISTOGRAM) {
        if (!mi->sfx_ok[PROMNAME_SFX_BUCKET]) {
            return 0;
        }
        struct hex_ctx c = {r, e, mi, v};
        rc =
            pms_exemplars_walk(r->a, v->exemplars.p, v->exemplars.len, v->n_exemplars, hex_add, &c);
    } else {
        if (si < 0 || !r->ser[si].match) {
            return 0;
        }
        struct ex_ctx c = {r, &r->ser[si]};
        rc = pms_exemplars_walk(r->a, v->exemplars.p, v->exemplars.len, v->n_exemplars, ex_add, &c);
    }
    return rc == -ENOMEM ? rc : 0; /* a malformed blob: no exemplars */
}

/* The little-endian u64 at |p| (a detail blob's counts and bounds, batch.h). */
static inline uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/*
 * The series of the |j|th admitted sample of a classic histogram row when
 * it is a bucket: |kind| 1 an explicit bound (|le|), 2 the +Inf bucket. The
 * slot at |j| remembers its bound's bits, so the le text is made (and
 * compared) only when a row's bounds differ from the stream's first.
 */
static int64_t bucket_slot(struct pms_run *r, struct pms_ent *e, const struct pms_metric *mi,
                           uint32_t j, double le, uint8_t kind)
{
    uint64_t bits = 0;
    if (kind == 1) {
        memcpy(&bits, &le, 8);
    }
    if (j < e->ns && e->slot[j].bkind == kind && e->slot[j].bits == bits) {
        return e->slot[j].ser;
    }
    char txt[PROMNAME_FMT_MAX];
    size_t n = 4;
    if (kind == 1) {
        n = promname_fmt_le(le, txt);
    } else {
        memcpy(txt, "+Inf", 5);
    }
    int64_t si = slot_of(r, e, mi, j, PROMNAME_SFX_BUCKET, "le", txt, (uint32_t)n);
    if (si >= 0 && j < e->ns && e->slot[j].ser == (uint32_t)si) {
        e->slot[j].bkind = kind;
        e->slot[j].bits = bits;
    }
    return si;
}

/* Sample |j| of a classic histogram row into its series. */
static int hist_add(struct pms_run *r, const struct pms_metric *mi, const struct point_view *v,
                    int64_t si, double val)
{
    if (si < 0) {
        return (int)si;
    }
    struct pms_series *s = &r->ser[si];
    return s->match ? add_float(r, s, v, mi, val) : 0;
}

/*
 * A classic histogram row in samples mode: its samples in the order
 * promname_expand makes them (_sum, _count, the buckets cumulated, +Inf =
 * the count), read straight from the detail blob without the expansion's
 * le texts. A malformed blob makes nothing, as there.
 */
static int do_hist(struct pms_run *r, const struct point_view *v, struct pms_ent *e,
                   const struct pms_metric *mi, bool stale)
{
    if (v->detail.p == NULL) {
        return 0;
    }
    struct val_rd rd = {v->detail.p, v->detail.p + v->detail.len};
    uint32_t nc, nb;
    if (val_rd_u32(&rd, &nc) < 0 || (size_t)(rd.end - rd.p) / 8 < nc) {
        return 0;
    }
    const uint8_t *counts = rd.p;
    rd.p += (size_t)nc * 8;
    if (val_rd_u32(&rd, &nb) < 0 || (size_t)(rd.end - rd.p) / 8 < nb) {
        return 0;
    }
    const uint8_t *bounds = rd.p;
    uint32_t n = nc < nb ? nc : nb;
    double nan = promname_stale_nan();
    uint32_t j = 0;
    int rc = 0;
    if (v->has_sum && mi->sfx_ok[PROMNAME_SFX_SUM]) {
        int64_t si = slot_of(r, e, mi, j++, PROMNAME_SFX_SUM, NULL, NULL, 0);
        rc = hist_add(r, mi, v, si, stale ? nan : v->sum);
    }
    if (rc == 0 && mi->sfx_ok[PROMNAME_SFX_COUNT]) {
        int64_t si = slot_of(r, e, mi, j++, PROMNAME_SFX_COUNT, NULL, NULL, 0);
        rc = hist_add(r, mi, v, si, stale ? nan : (double)v->count);
    }
    if (rc < 0 || !mi->sfx_ok[PROMNAME_SFX_BUCKET]) {
        return rc;
    }
    uint64_t cum = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        uint64_t lb = le64(bounds + 8 * (size_t)i); /* the lengths were checked above */
        double le;
        memcpy(&le, &lb, 8);
        cum += le64(counts + 8 * (size_t)i); /* wrapping, as promname_expand's */
        rc = hist_add(r, mi, v, bucket_slot(r, e, mi, j++, le, 1), stale ? nan : (double)cum);
    }
    if (rc == 0) {
        rc = hist_add(r, mi, v, bucket_slot(r, e, mi, j, 0, 2), stale ? nan : (double)v->count);
    }
    return rc;
}

/* One point of entry |e| (NULL: looked up from the point's attributes). */
static int do_point(struct pms_run *r, const struct point_view *v, struct pms_ent *e)
{
    const struct pms_metric *mi = &r->mi[v->metric_id];
    if (e == NULL && (e = ent_find(r, v)) == NULL) {
        return -ENOMEM;
    }
    if (e->bad) {
        return 0;
    }
    bool stale = (v->flags & PROMNAME_FLAG_NO_RECORDED_VALUE) != 0;
    if (mi->kind == MK_EXP_HISTOGRAM) {
        int64_t si = slot_of(r, e, mi, 0, PROMNAME_SFX_NONE, NULL, NULL, 0);
        if (si < 0) {
            return (int)si;
        }
        struct pms_series *s = &r->ser[si];
        if (!s->match) {
            return 0;
        }
        if (r->mode == PMS_EXEMPLARS) {
            return do_exemplars(r, e, mi, v, si);
        }
        if (r->mode == PMS_INDEX) {
            return idx_note(r, s, r->cur_row, r->idx_whole);
        }
        int64_t t = promname_ts_ms(v->time_ns);
        if (r->mode == PMS_SERIES) {
            s->seen = s->seen || (t >= r->mint && t <= r->maxt);
            return 0;
        }
        struct pm_hist *h;
        int rc = pms_exp_hist(r->a, v->detail.p, v->detail.len, v->count, v->sum, v->has_sum, stale,
                              mi->gauge_hist, &h);
        if (rc == -ENOMEM) {
            return rc;
        }
        if (rc < 0) {
            pms_unmapped_note(v->metric->name.p, v->metric->name.len);
            return 0;
        }
        if (pms_grow(r->call, (void **)&s->h, &s->ch, s->nh, sizeof(*s->h)) < 0) {
            return -ENOMEM;
        }
        s->h[s->nh++] = (struct pm_hsample){t, h};
        return 0;
    }
    if ((mi->kind == MK_GAUGE || mi->kind == MK_SUM) && r->mode == PMS_SAMPLES) {
        /* one sample, as promname_expand makes it, without the expansion */
        if (!mi->sfx_ok[PROMNAME_SFX_NONE]) {
            return 0;
        }
        int64_t si = slot_of(r, e, mi, 0, PROMNAME_SFX_NONE, NULL, NULL, 0);
        if (si < 0) {
            return (int)si;
        }
        struct pms_series *s = &r->ser[si];
        if (!s->match) {
            return 0;
        }
        double val = stale                        ? promname_stale_nan()
                     : v->value_type == PV_DOUBLE ? v->value.d
                     : v->value_type == PV_INT    ? (double)v->value.i
                                                  : 0.0;
        return add_float(r, s, v, mi, val);
    }
    if (mi->kind == MK_HISTOGRAM && r->mode == PMS_SAMPLES) {
        return do_hist(r, v, e, mi, stale);
    }
    struct point_row pt = {
        .start_ns = v->start_ns,
        .time_ns = v->time_ns,
        .flags = v->flags,
        .value_type = v->value_type,
        .count = v->count,
        .sum = v->sum,
        .has_sum = v->has_sum,
    };
    memcpy(&pt.value, &v->value, sizeof(pt.value));
    struct promname_expand x;
    if (promname_expand_init(&x, mi->kind, &pt, v->detail.p, v->detail.len) < 0) {
        return 0; /* a malformed detail blob: the point makes nothing */
    }
    struct promname_sample smp;
    int64_t first = -1;
    for (uint32_t k = 0; promname_expand_next(&x, &smp) == 1; k++) {
        if (!mi->sfx_ok[smp.suffix]) {
            continue;
        }
        int64_t si = slot_of(r, e, mi, k, (uint8_t)smp.suffix, smp.extra_name, smp.extra,
                             smp.extra_name != NULL ? smp.extra_len : 0);
        if (si < 0) {
            return (int)si;
        }
        if (first < 0) {
            first = si;
        }
        struct pms_series *s = &r->ser[si];
        if (r->mode == PMS_EXEMPLARS || !s->match) {
            continue;
        }
        if (add_float(r, s, v, mi, smp.value) < 0) {
            return -ENOMEM;
        }
    }
    if (r->mode == PMS_EXEMPLARS) {
        return do_exemplars(r, e, mi, v, first);
    }
    return 0;
}

static int do_target_info(struct pms_run *r, const struct point_view *v)
{
    if (v->resource == NULL) {
        return 0;
    }
    struct pms_res *x = res_of(r, v->resource->id);
    if (x == NULL || x->ti < 0 || v->time_ns < r->lo_ns || v->time_ns >= r->hi_ns) {
        return r->err;
    }
    int64_t t = promname_ts_ms(v->time_ns);
    if (r->mode == PMS_INDEX) {
        return idx_note(r, &r->ser[x->ti], r->cur_row, true);
    }
    if (t == x->ti_last) {
        return 0;
    }
    x->ti_last = t;
    struct pms_series *s = &r->ser[x->ti];
    if (!s->match) {
        return 0;
    }
    if (r->mode == PMS_SERIES) {
        s->seen = true;
        return 0;
    }
    if (r->mode == PMS_EXEMPLARS) {
        return 0;
    }
    if (pms_grow_f(r->call, s) < 0) {
        return -ENOMEM;
    }
    s->f[s->nf++] = (struct pm_fsample){t, 1.0};
    return 0;
}

/*
 * One row of a block: its root table first (metric id, time), then, for a
 * candidate in range, its attributes and detail. Returns 0, or -1 when the
 * scan must stop (the query failed, or the block was quarantined).
 */
static int do_row(struct pms_run *r, struct qctx_src *qs, uint64_t row, bool ti, struct pms_ent *e,
                  struct qctx_scan *it, uint32_t *since_charge)
{
    struct qctx *q = r->q;
    struct point_view v;
    int rc;
    if (++*since_charge == ROW_CHECK) {
        *since_charge = 0;
        if (pms_charge(r) < 0) {
            return -1; /* the memory limit: the query's error now */
        }
    }
    r->cur_row = (uint32_t)row;
    if (qs->b != NULL) {
        rc = blk_point(qs->b, row, BLK_ROOT, &v);
    } else {
        rc = oblock_point(qs->ob, row, &v);
    }
    if (rc == -EBADMSG) {
        qctx_src_fail(q, qs, qctx_scan_left(it));
        return -1;
    }
    if (rc < 0 || v.metric_id >= r->nmi) {
        return 0;
    }
    if (ti && (rc = do_target_info(r, &v)) < 0) {
        qctx_fail(q, rc, "out of memory");
        return -1;
    }
    const struct pms_metric *mi = &r->mi[v.metric_id];
    if (!mi->cand || (v.time_ns < r->lo_ns && !mi->delta) ||
        (v.time_ns >= r->hi_ns && r->mode != PMS_EXEMPLARS)) {
        return 0;
    }
    if (qs->b != NULL) {
        /* The stream's entry known: its attributes are not read again. */
        struct point_view d;
        rc = blk_point(qs->b, row, e != NULL ? BLK_DETAIL : BLK_ATTRS | BLK_DETAIL, &d);
        if (rc == -EBADMSG) {
            qctx_src_fail(q, qs, qctx_scan_left(it));
            return -1;
        }
        if (rc < 0) {
            return 0;
        }
        if (e == NULL) {
            v.attrs = d.attrs;
        }
        v.flags = d.flags;
        v.detail = d.detail;
        v.exemplars = d.exemplars;
        v.n_exemplars = d.n_exemplars;
    }
    rc = do_point(r, &v, e);
    if (rc < 0) {
        qctx_fail(q, rc, "out of memory");
        return -1;
    }
    return 0;
}

/* A gauge, sum or classic histogram row of a known stream in samples
 * mode: only the columns its samples need (blk_point_sample,
 * blk_point_hist when |hist|) into |v|, which holds the stream's constant
 * fields. 0, or -1 as do_row. */
static int do_sample_row(struct pms_run *r, struct qctx_src *qs, uint32_t row, struct pms_ent *e,
                         bool hist, struct point_view *v, struct qctx_scan *it,
                         uint32_t *since_charge)
{
    if (++*since_charge == ROW_CHECK) {
        *since_charge = 0;
        if (pms_charge(r) < 0) {
            return -1;
        }
    }
    int rc = hist ? blk_point_hist(qs->b, row, v) : blk_point_sample(qs->b, row, v);
    if (rc == -EBADMSG) {
        qctx_src_fail(r->q, qs, qctx_scan_left(it));
        return -1;
    }
    if (rc < 0 || v->time_ns >= r->hi_ns) {
        return 0;
    }
    rc = do_point(r, v, e);
    if (rc < 0) {
        qctx_fail(r->q, rc, "out of memory");
        return -1;
    }
    return 0;
}

/* Adds |*pending| rows to the query (limits, deadline, a regex note). 0,
 * or -1 when the query stopped. */
static int rows_flush(struct pms_run *r, uint32_t *pending)
{
    uint32_t n = *pending;
    *pending = 0;
    if (qctx_rows(r->q, n) != 0 || qctx_tick(r->q) != 0) {
        return -1;
    }
    return 0;
}

/*
 * The rows k0 .. k1 of a gauge or sum stream (no delta) in samples mode,
 * one series: its sample array made room for once, then the rows read in
 * runs (blk_point_values) and appended. The rows are added to the query
 * through |*pending| every ROW_CHECK rows (a row costs nanoseconds here: no
 * cursor per stream, whose end looked at the clock twice). 0, or -1 when
 * the scan must stop (the query failed, or the block was quarantined).
 */
static int stream_floats(struct pms_run *r, struct qctx_src *qs, const struct pms_metric *mi,
                         struct pms_ent *e, const struct blk_stream *st, uint32_t k0, uint32_t k1,
                         uint32_t *pending)
{
    enum { RUN = 128 };
    struct blk_value val[RUN];
    struct pms_series *s = NULL;
    if (mi->sfx_ok[PROMNAME_SFX_NONE]) {
        int64_t si = slot_of(r, e, mi, 0, PROMNAME_SFX_NONE, NULL, NULL, 0);
        if (si < 0) {
            qctx_fail(r->q, (int)si, "out of memory");
            return -1;
        }
        s = r->ser[si].match ? &r->ser[si] : NULL;
    }
    uint32_t left = k1 - k0;
    if (s != NULL && s->cf - s->nf < left) {
        uint64_t want = (uint64_t)s->nf + left;
        uint64_t nc = (uint64_t)s->cf * 2 > want ? (uint64_t)s->cf * 2 : want;
        /* in the results' arena: the fold keeps it in place, no copy */
        struct pm_fsample *f = nc <= UINT32_MAX ? arena_alloc(r->a, nc * sizeof(*f)) : NULL;
        if (f == NULL) {
            qctx_fail(r->q, -ENOMEM, "out of memory");
            return -1;
        }
        if (s->nf != 0) {
            memcpy(f, s->f, (size_t)s->nf * sizeof(*f));
        }
        s->f = f;
        s->cf = (uint32_t)nc;
        s->f_res = true;
        if (pms_charge(r) < 0) {
            return -1;
        }
    }
    for (uint32_t k = k0; k < k1;) {
        uint32_t n = k1 - k < RUN ? k1 - k : RUN;
        int rc = s != NULL ? blk_point_values(qs->b, st->rows + k, n, val) : 0;
        if (rc == -EBADMSG) {
            qctx_src_fail(r->q, qs, k1 - k);
            return -1;
        }
        for (uint32_t j = 0; rc == 0 && s != NULL && j < n; j++) {
            const struct blk_value *x = &val[j];
            double v = (x->flags & PROMNAME_FLAG_NO_RECORDED_VALUE) != 0 ? promname_stale_nan()
                       : x->value_type == PV_DOUBLE                      ? x->value.d
                       : x->value_type == PV_INT                         ? (double)x->value.i
                                                                         : 0.0;
            s->f[s->nf++] = (struct pm_fsample){promname_ts_ms(x->time_ns), v};
        }
        k += n;
        *pending += n;
        if (*pending >= ROW_CHECK && rows_flush(r, pending) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Whether the matchers on the labels a stream's attributes and resource
 * make (everything but __name__, which the metric dictionary settled, and
 * le / quantile, which a histogram or summary sample sets) admit |e|. */
static bool stream_admitted(const struct pms_run *r, const struct pms_ent *e)
{
    for (size_t i = 0; i < r->n_m; i++) {
        const struct promql_matcher *m = &r->m[i];
        const struct promql_str *n = &m->name;
        if ((n->n == 8 && memcmp(n->s, "__name__", 8) == 0) ||
            (n->n == 2 && memcmp(n->s, "le", 2) == 0) ||
            (n->n == 8 && memcmp(n->s, "quantile", 8) == 0)) {
            continue;
        }
        uint32_t vl;
        const char *v = pm_labels_get(&e->base, n->s, n->n, &vl);
        if (!promql_matcher_matches(m, v != NULL ? v : "", v != NULL ? vl : 0)) {
            return false;
        }
    }
    return true;
}

/* First k of |st| whose row time is >= t_ns (rows ascend in time). */
static uint32_t stream_lower_bound(const uint64_t *time, const struct blk_stream *st, uint64_t t_ns)
{
    uint32_t lo = 0, hi = st->n_rows;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (time[st->rows[mid]] < t_ns) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/*
 * A sealed block with a stream index (block.h): per metric, per stream, the
 * rows in the time range are found by binary search; the labels are built
 * from the stream's first row once and the matchers decide before any more
 * of its rows is read. Rows of other streams are never touched. For the
 * label calls (series mode) a stream that makes one series (a gauge, a sum,
 * an exponential histogram) needs one row in the range, not all of them, and
 * a resource's target_info exists when one of its streams has a row there.
 */
static int do_streams(struct pms_run *r, struct qctx_src *qs, bool ti, const uint8_t *want)
{
    struct qctx *q = r->q;
    const uint64_t *time = blk_col_time(qs->b);
    if (time == NULL) {
        qctx_fail(q, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    uint32_t since_charge = 0, pending = 0;
    for (uint32_t m = 0; m < r->nmi && qctx_err(q) == 0; m++) {
        const struct pms_metric *mi = &r->mi[m];
        if (!mi->cand && !ti) {
            continue;
        }
        bool one_row = (r->mode == PMS_SERIES || r->mode == PMS_INDEX) &&
                       (mi->kind == MK_GAUGE || mi->kind == MK_SUM || mi->kind == MK_EXP_HISTOGRAM);
        r->idx_whole = one_row;
        bool hist = mi->kind == MK_HISTOGRAM;
        bool narrow =
            r->mode == PMS_SAMPLES && (mi->kind == MK_GAUGE || mi->kind == MK_SUM || hist);
        uint32_t first, count;
        blk_streams_of_metric(qs->b, m, &first, &count);
        for (uint32_t i = first; i < first + count && qctx_err(q) == 0; i++) {
            struct blk_stream st;
            if (blk_stream(qs->b, i, &st) < 0) {
                continue;
            }
            if (want != NULL && want[i] == 0) {
                q->st.rows_skipped_index += st.n_rows; /* no series of it matches: the index */
                continue;
            }
            r->cur_stream = i;
            uint32_t k0 =
                mi->delta && r->mode == PMS_SAMPLES ? 0 : stream_lower_bound(time, &st, r->lo_ns);
            uint32_t k1 =
                r->mode == PMS_EXEMPLARS ? st.n_rows : stream_lower_bound(time, &st, r->hi_ns);
            if (k1 <= k0) {
                q->st.rows_skipped_index += st.n_rows;
                continue;
            }
            struct point_view v;
            r->cur_row = st.rows[k0];
            int rc = blk_point(qs->b, st.rows[k0], BLK_ROOT | BLK_ATTRS, &v);
            if (rc == -EBADMSG) {
                qctx_src_fail(q, qs, qs->rows);
                return qctx_err(q);
            }
            if (rc < 0) {
                continue;
            }
            if (ti && (rc = do_target_info(r, &v)) < 0) {
                qctx_fail(q, rc, "out of memory");
                return rc;
            }
            if (!mi->cand) {
                q->st.rows_skipped_index += st.n_rows - 1;
                continue;
            }
            struct pms_ent *e = ent_find(r, &v);
            if (e == NULL) {
                qctx_fail(q, -ENOMEM, "out of memory");
                return -ENOMEM;
            }
            if (e->bad || !stream_admitted(r, e)) {
                q->st.rows_skipped_index += st.n_rows - 1; /* never read: the stream index */
                continue;
            }
            if (one_row) {
                k1 = k0 + 1;
            }
            if (narrow && !hist && !mi->delta) {
                q->st.rows_skipped_index += st.n_rows - (k1 - k0);
                if (stream_floats(r, qs, mi, e, &st, k0, k1, &pending) < 0) {
                    if (qctx_err(q) == 0 && pending != 0) {
                        (void)rows_flush(r, &pending); /* quarantined: what was read counts */
                    }
                    return qctx_err(q);
                }
                continue;
            }
            q->st.rows_skipped_index += st.n_rows - (k1 - k0);
            struct qctx_scan it;
            uint64_t k;
            qctx_scan_begin(&it, q, k0, k1, false, ROW_CHECK, true);
            if (narrow) {
                struct point_view sv = v; /* the stream's metric, scope, resource */
                sv.count = 0;
                sv.sum = 0;
                sv.has_sum = false;
                sv.detail = sv.exemplars = (struct obytes){0};
                sv.n_exemplars = 0;
                while (qctx_scan_next(&it, &k)) {
                    if (do_sample_row(r, qs, st.rows[k], e, hist, &sv, &it, &since_charge) < 0) {
                        break;
                    }
                }
            }
            while (!narrow && qctx_scan_next(&it, &k)) {
                if (do_row(r, qs, st.rows[k], false, e, &it, &since_charge) < 0) {
                    break;
                }
            }
            qctx_scan_end(&it);
        }
    }
    if (pending != 0 && rows_flush(r, &pending) < 0) {
        return qctx_err(q);
    }
    if (qctx_err(q) == 0 && pms_charge(r) < 0) {
        return qctx_err(q);
    }
    return qctx_err(q);
}

/* One block: plan, then its rows. 0, or the query's error. */
int pms_do_block(struct pms_run *r, struct qctx_src *qs)
{
    struct qctx *q = r->q;
    q->st.blocks_considered++;
    if (qctx_src_failed(qs)) {
        return 0; /* quarantined earlier in this query */
    }
    if (qs->rows == 0 || (qs->b != NULL && qs->tmin >= r->hi_ns && r->mode != PMS_EXEMPLARS)) {
        q->st.blocks_skipped_zone++;
        return 0;
    }
    arena_reset(r->blk);
    if (qs->b != NULL && r->mode == PMS_SERIES) {
        if (qs->tmax < r->lo_ns) {
            q->st.blocks_skipped_zone++;
            return 0;
        }
        const struct pmx *x = pms_index_of(r, qs);
        if (x != NULL) {
            return pms_series_from_index(r, x);
        }
        if (qctx_err(q) != 0 || qctx_src_failed(qs)) {
            return qctx_err(q);
        }
    }
    r->src = qs;
    r->ent = NULL;
    r->nent = r->cent = 0;
    r->etab = NULL;
    r->etcap = 0;
    r->nri = qctx_n_resources(qs);
    r->ri = arena_alloc(r->blk, (r->nri ? r->nri : 1) * sizeof(*r->ri));
    if (r->ri == NULL) {
        qctx_fail(q, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    memset(r->ri, 0, (r->nri ? r->nri : 1) * sizeof(*r->ri));
    bool any_delta;
    int cands = plan_metrics(r, &any_delta);
    if (cands < 0) {
        qctx_fail(q, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    bool ti = r->want_ti && plan_resources(r);
    if (r->err != 0) {
        qctx_fail(q, r->err, "out of memory");
        return r->err;
    }
    if (cands == 0 && !ti) {
        q->st.blocks_skipped_dict++;
        return 0;
    }
    if (qs->b != NULL && qs->tmax < r->lo_ns && !any_delta) {
        q->st.blocks_skipped_zone++;
        return 0;
    }
    /* Samples and exemplars: the index says which streams to read, and
     * whether a target_info series of the block is admitted at all. */
    const uint8_t *want = NULL;
    if ((r->mode == PMS_SAMPLES || r->mode == PMS_EXEMPLARS) && qs->b != NULL &&
        blk_n_streams(qs->b) > 0) {
        const struct pmx *x = pms_index_of(r, qs);
        if (qctx_err(q) != 0 || qctx_src_failed(qs)) {
            return qctx_err(q);
        }
        bool ti_admitted = true;
        if (x != NULL &&
            (want = pms_streams_wanted(r, x, blk_n_streams(qs->b), &ti_admitted)) == NULL) {
            return qctx_err(q);
        }
        ti = ti && ti_admitted;
        if (cands == 0 && !ti) {
            q->st.blocks_skipped_dict++;
            return 0;
        }
    }
    q->st.blocks_scanned++;
    uint64_t lo = 0, hi = qs->rows;
    if (qs->b != NULL) {
        int rc = qctx_load(q, qs, BLK_ALL);
        if (rc == -EBADMSG) {
            return 0;
        }
        if (rc < 0) {
            return qctx_err(q) != 0 ? qctx_err(q) : rc;
        }
        lo = any_delta ? 0 : blk_lower_bound(qs->b, r->lo_ns);
        if (r->mode != PMS_EXEMPLARS) {
            hi = blk_lower_bound(qs->b, r->hi_ns);
        }
    }
    if (qs->b != NULL && blk_n_streams(qs->b) > 0 &&
        (!ti || r->mode == PMS_SERIES || r->mode == PMS_INDEX)) {
        return do_streams(r, qs, ti, want);
    }
    struct qctx_scan it;
    uint64_t row;
    qctx_scan_begin(&it, q, lo, hi, false, ROW_CHECK, true);
    uint32_t since_charge = 0;
    while (qctx_scan_next(&it, &row)) {
        if (do_row(r, qs, row, ti, NULL, &it, &since_charge) < 0) {
            break;
        }
    }
    qctx_scan_end(&it);
    if (qctx_err(q) == 0 && pms_charge(r) < 0) {
        return qctx_err(q);
    }
    return qctx_err(q);
}

int pms_run_init(struct pms_run *r, struct pmsrc *s, const struct promql_matcher *m, size_t n,
                 int64_t mint, int64_t maxt, enum pms_mode mode)
{
    memset(r, 0, sizeof(*r));
    r->s = s;
    r->q = s->q;
    r->a = s->a;
    r->m = m;
    r->n_m = n;
    r->mint = mint;
    r->maxt = maxt;
    r->mode = mode;
    r->cur_stream = PMS_NOSTREAM;
    r->lo_ns = mint <= 0 ? 0 : (uint64_t)mint * NS_PER_MS;
    if (maxt < 0) {
        r->hi_ns = 0;
    } else if ((uint64_t)maxt >= UINT64_MAX / NS_PER_MS - 1) {
        r->hi_ns = UINT64_MAX;
    } else {
        r->hi_ns = ((uint64_t)maxt + 1) * NS_PER_MS;
    }
    r->want_ti = name_admitted(r, "target_info", 11);
    r->call = arena_new(256 << 10);
    r->blk = arena_new(64 << 10);
    if (r->call == NULL || r->blk == NULL) {
        arena_free(r->call);
        arena_free(r->blk);
        qctx_fail(s->q, -ENOMEM, "out of memory");
        return -ENOMEM;
    }
    qctx_arena_bind(r->q, r->call);
    qctx_arena_bind(r->q, r->blk);
    return 0;
}

void pms_run_fini(struct pms_run *r)
{
    arena_free(r->call);
    arena_free(r->blk);
}

static int run_blocks(struct pms_run *r)
{
    if (qctx_err(r->q) != 0) {
        return qctx_err(r->q);
    }
    for (size_t i = 0; i < r->q->n_src; i++) {
        int rc = pms_do_block(r, &r->q->src[i]);
        /* What the run keeps of a block (labels, names, samples, exemplars)
         * is copied into its arenas: the snapshot's pin can go, so the
         * table cap may drop the block's tables and the page window its
         * pages while the run reads the next ones (qctx_done_all: an index
         * build loads the block once more inside the run's load). */
        qctx_done_all(r->q, &r->q->src[i]);
        if (rc < 0) {
            return rc;
        }
    }
    return qctx_err(r->q);
}

/* ---- the API ---- */

int pmsrc_open(struct pmsrc **out, struct qctx *q, arena *a)
{
    struct pmsrc *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->q = q;
    s->a = a;
    qctx_arena_bind(q, a);
    *out = s;
    return 0;
}

void pmsrc_close(struct pmsrc *s)
{
    free(s); /* the results are the arena's; it uncharges them when it frees them */
}

static int collect(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint,
                   int64_t maxt, enum pms_mode mode, struct pm_set *out)
{
    struct pms_run r;
    out->s = NULL;
    out->n = 0;
    int rc = pms_run_init(&r, s, m, n, mint, maxt, mode);
    if (rc < 0) {
        return rc;
    }
    rc = run_blocks(&r);
    size_t k = 0;
    struct pm_series *v = NULL;
    if (rc == 0) {
        v = arena_alloc(s->a, (r.nser ? r.nser : 1) * sizeof(*v));
        if (v == NULL) {
            rc = -ENOMEM;
        }
    }
    for (uint32_t i = 0; rc == 0 && i < r.nser; i++) {
        struct pms_series *x = &r.ser[i];
        if (!x->match) {
            continue;
        }
        if (mode == PMS_SERIES) {
            if (x->seen) {
                v[k++] = (struct pm_series){.labels = x->labels};
            }
            continue;
        }
        rc = pms_series_finish(s->a, r.call, x, mint, maxt, &v[k]);
        if (rc == 0 && (v[k].nf > 0 || v[k].nh > 0)) {
            k++;
        }
    }
    if (rc == 0) {
        rc = pms_charge(&r);
    }
    if (rc < 0 && qctx_err(s->q) == 0) {
        qctx_fail(s->q, rc, "out of memory");
    }
    if (rc == 0) {
        out->s = v;
        out->n = k;
        pm_set_sort(out);
    }
    pms_run_fini(&r);
    return rc < 0 ? (qctx_err(s->q) != 0 ? qctx_err(s->q) : rc) : 0;
}

int pmsrc_select(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                 int64_t maxt_ms, struct pm_set *out)
{
    return collect(s, m, n, mint_ms, maxt_ms, PMS_SAMPLES, out);
}

int pmsrc_series(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                 int64_t maxt_ms, struct pm_set *out)
{
    return collect(s, m, n, mint_ms, maxt_ms, PMS_SERIES, out);
}

static int exs_cmp(const void *a, const void *b)
{
    const struct pm_exemplar_series *x = a, *y = b;
    return pm_labels_cmp(&x->series, &y->series);
}

int pmsrc_exemplars(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                    int64_t maxt_ms, struct pm_exemplar_series **out, size_t *n_out)
{
    struct pms_run r;
    *out = NULL;
    *n_out = 0;
    int rc = pms_run_init(&r, s, m, n, mint_ms, maxt_ms, PMS_EXEMPLARS);
    if (rc < 0) {
        return rc;
    }
    rc = run_blocks(&r);
    size_t k = 0;
    struct pm_exemplar_series *v = NULL;
    if (rc == 0) {
        v = arena_alloc(s->a, (r.nser ? r.nser : 1) * sizeof(*v));
        rc = v == NULL ? -ENOMEM : 0;
    }
    for (uint32_t i = 0; rc == 0 && i < r.nser; i++) {
        struct pms_series *x = &r.ser[i];
        if (!x->match || x->ne == 0) {
            continue;
        }
        uint32_t ne;
        rc = pms_ex_finish(r.call, x->e, x->ne, mint_ms, maxt_ms, &ne);
        struct pm_exemplar *e = rc == 0 ? arena_alloc(s->a, ne * sizeof(*e)) : NULL;
        if (rc == 0 && e == NULL) {
            rc = -ENOMEM;
        }
        for (uint32_t j = 0; rc == 0 && j < ne; j++) {
            e[j] = (struct pm_exemplar){x->e[j].labels, x->e[j].v, x->e[j].t};
        }
        if (rc == 0) {
            v[k++] = (struct pm_exemplar_series){x->labels, e, ne};
        }
    }
    if (rc == 0) {
        rc = pms_charge(&r);
    }
    if (rc < 0 && qctx_err(s->q) == 0) {
        qctx_fail(s->q, rc, "out of memory");
    }
    if (rc == 0) {
        qsort(v, k, sizeof(*v), exs_cmp);
        *out = v;
        *n_out = k;
    }
    pms_run_fini(&r);
    return rc < 0 ? (qctx_err(s->q) != 0 ? qctx_err(s->q) : rc) : 0;
}
