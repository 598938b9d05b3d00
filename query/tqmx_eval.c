/*
 * tqmx_eval.c - TraceQL metrics evaluation (see tqmx.h): Tempo's bucket
 * arithmetic, the scan of the stored spans feeding one accumulator table
 * per metrics query, the series those tables give, arithmetic between
 * series and scalars, second stages, and the JSON answer.
 *
 * Each metrics query of the expression is one scan over the snapshot's
 * sources (zone maps and the seed filter's dictionaries first, as search
 * does: traces_int.h). A query whose input needs whole traces (structural
 * operators, pipelines, trace-level intrinsics) goes through
 * tqmx_traces.c, which assembles them and hands each matching span to the
 * same accumulator. Values are exact: every span of the range counts (a
 * sample hint changes nothing), quantiles are taken over the exact
 * values.
 */
#include "query/tqmx_int.h"

#include <math.h>

/* ---- buckets ----------------------------------------------------------------- */

int tqmx_range_init(struct tqmx_range *r, uint64_t start, uint64_t end, uint64_t step, bool instant,
                    uint32_t max_buckets)
{
    memset(r, 0, sizeof(*r));
    if (end <= start) {
        return -EINVAL;
    }
    if (instant) {
        *r = (struct tqmx_range){start, end, end - start, 1, true};
        return 0;
    }
    if (step == 0) {
        return -EINVAL;
    }
    uint64_t s = start - start % step;
    uint64_t e = end % step == 0 ? end : end + (step - end % step);
    if (e < end) {
        return -EINVAL; /* overflow */
    }
    if (s > step) {
        s -= step; /* Tempo's extra first bucket */
    }
    uint64_t n = (e - s) / step;
    if (n > max_buckets) {
        return -E2BIG;
    }
    *r = (struct tqmx_range){s, e, step, (uint32_t)n, false};
    return 0;
}

int64_t tqmx_bucket_of(const struct tqmx_range *r, uint64_t ts)
{
    if (ts <= r->start || ts > r->end) {
        return -1;
    }
    if (r->instant) {
        return 0;
    }
    uint64_t off = ts - r->start;
    uint64_t i = off / r->step;
    if (i * r->step == off) {
        i--; /* right-closed: a boundary belongs to the bucket before */
    }
    return (int64_t)i;
}

uint64_t tqmx_bucket_ts(const struct tqmx_range *r, uint32_t i)
{
    return r->instant ? r->end : r->start + ((uint64_t)i + 1) * r->step;
}

uint64_t tqmx_default_step(uint64_t start, uint64_t end)
{
    const uint64_t ms = 1000000ull, sec = 1000 * ms;
    uint64_t delta = end > start ? end - start : 0;
    uint64_t base = delta / 240;
    if (delta < 60 * sec) {
        uint64_t g = 50 * ms;
        return base > g ? base / g * g : g;
    }
    static const uint64_t gs[] = {3600 * sec, 300 * sec, 60 * sec, 15 * sec, 5 * sec, sec};
    for (size_t i = 0; i < sizeof(gs) / sizeof(gs[0]); i++) {
        if (base > gs[i]) {
            return base / gs[i] * gs[i];
        }
    }
    return sec;
}

/* ---- accumulators -------------------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

static void *ealloc(struct tqmx_run *x, size_t n)
{
    void *p = arena_alloc(x->a, n ? n : 1);
    if (p == NULL) {
        qctx_fail(&x->q, -ENOMEM, "the metrics query needs more memory than allowed");
    }
    return p;
}

/* Appends a label value's key bytes at |at|; past |cap| (also when |at|
 * already is) the result is cap + 1. */
static size_t key_put(uint8_t *k, size_t cap, size_t at, const struct tv *v)
{
    if (at > cap || at + 9 > cap) {
        return cap + 1;
    }
    k[at++] = (uint8_t)v->t;
    switch (v->t) {
    case TRACEQL_T_NIL:
    case TRACEQL_T_ANY:
        return at;
    case TRACEQL_T_STRING:
        if (at + 4 + v->n > cap) {
            return cap + 1;
        }
        memcpy(k + at, &(uint32_t){(uint32_t)v->n}, 4);
        memcpy(k + at + 4, v->s, v->n);
        return at + 4 + v->n;
    case TRACEQL_T_FLOAT:
        memcpy(k + at, &v->f, 8);
        return at + 8;
    default:
        memcpy(k + at, &v->i, 8);
        return at + 8;
    }
}

/* The accumulator of |key|, created when new with |n_lb| label slots; NULL
 * on failure (the query's error) or, with no error, when a new series would
 * pass the series limit. A series (|sparse| false) counts against that
 * limit and gets its
 * per-bucket arrays at once; a compare() table (|sparse|) does not (its
 * answer keeps topN) and starts with one bucket inline: most values of a
 * high-cardinality attribute fall in one bucket. */
static struct acc *acc_find(struct tqmx_run *x, struct accs *t, const uint8_t *key, size_t kn,
                            bool sparse, uint32_t n_lb)
{
    uint64_t h = hash_bytes(key, kn);
    if (t->n * 2 >= t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        struct acc **nv = ealloc(x, ncap * sizeof(*nv));
        if (nv == NULL) {
            return NULL;
        }
        memset(nv, 0, ncap * sizeof(*nv));
        for (size_t i = 0; i < t->cap; i++) {
            if (t->v[i] != NULL) {
                size_t j = t->v[i]->hash & (ncap - 1);
                while (nv[j] != NULL) {
                    j = (j + 1) & (ncap - 1);
                }
                nv[j] = t->v[i];
            }
        }
        t->v = nv;
        t->cap = ncap;
    }
    size_t j = h & (t->cap - 1);
    while (t->v[j] != NULL) {
        struct acc *a = t->v[j];
        if (a->hash == h && a->klen == kn && memcmp(a->key, key, kn) == 0) {
            return a;
        }
        j = (j + 1) & (t->cap - 1);
    }
    if (!sparse && x->rq->max_series != 0 && x->n_series >= x->rq->max_series) {
        x->truncated = true; /* Tempo answers what it has, PARTIAL */
        return NULL;
    }
    x->n_series += !sparse;
    uint32_t nb = x->rq->range.n;
    struct acc *a = ealloc(x, sizeof(*a));
    uint8_t *k = ealloc(x, kn);
    struct tv *lv = ealloc(x, (n_lb + 1) * sizeof(*lv));
    if (a == NULL || k == NULL || lv == NULL) {
        return NULL;
    }
    memset(a, 0, sizeof(*a));
    memcpy(k, key, kn);
    a->lv = lv;
    a->b0 = UINT32_MAX;
    if (!sparse) {
        a->v = ealloc(x, nb * sizeof(double));
        a->cnt = ealloc(x, nb * sizeof(uint64_t));
        if (a->v == NULL || a->cnt == NULL) {
            return NULL;
        }
        memset(a->v, 0, nb * sizeof(double));
        memset(a->cnt, 0, nb * sizeof(uint64_t));
    }
    a->hash = h;
    a->key = k;
    a->klen = (uint32_t)kn;
    t->v[j] = a;
    t->n++;
    return a;
}

/* One more span in bucket |b| of a sparse accumulator. */
static int acc_bump(struct tqmx_run *x, struct acc *a, uint32_t b)
{
    if (a->cnt == NULL && (a->b0 == UINT32_MAX || a->b0 == b)) {
        a->b0 = b;
        a->c0++;
        return 0;
    }
    if (a->cnt == NULL) {
        uint32_t nb = x->rq->range.n;
        a->cnt = ealloc(x, nb * sizeof(uint64_t));
        if (a->cnt == NULL) {
            return -ENOMEM;
        }
        memset(a->cnt, 0, nb * sizeof(uint64_t));
        a->cnt[a->b0] = a->c0;
    }
    a->cnt[b]++;
    return 0;
}

uint64_t tqmx_acc_count(const struct acc *a, uint32_t b)
{
    if (a->cnt != NULL) {
        return a->cnt[b];
    }
    return a->b0 == b ? a->c0 : 0;
}

/* Copies a label value's string into the run's arena. */
static int keep_tv(struct tqmx_run *x, struct tv *v)
{
    if (v->t == TRACEQL_T_STRING && v->n > 0) {
        char *s = ealloc(x, v->n);
        if (s == NULL) {
            return -ENOMEM;
        }
        memcpy(s, v->s, v->n);
        v->s = s;
    }
    return 0;
}

static bool tv_num(const struct tv *v, double *out)
{
    switch (v->t) {
    case TRACEQL_T_INT:
        *out = (double)v->i;
        return true;
    case TRACEQL_T_FLOAT:
        *out = v->f;
        return true;
    case TRACEQL_T_DURATION:
        *out = (double)v->i / 1e9; /* seconds, as Tempo reports durations */
        return true;
    default:
        return false;
    }
}

/* Tempo's Log2Bucketize: the next power of two at or above v (v >= 2). */
static double log2_bucket(uint64_t v)
{
    if (v < 2) {
        return -1;
    }
    return (double)(1ull << (64 - __builtin_clzll(v - 1)));
}

/* Exemplars: |rq->exemplars| for the whole query (Tempo's limit), at most
 * TQMX_EX_PER_BUCKET per series and bucket so that they spread over the range. */
static int ex_add(struct tqmx_run *x, struct acc *a, const struct espan *sp, double v, uint32_t b)
{
    if (x->n_ex >= x->rq->exemplars) {
        return 0;
    }
    if (a->ex_per == NULL) {
        a->ex_per = ealloc(x, x->rq->range.n);
        if (a->ex_per == NULL) {
            return -ENOMEM;
        }
        memset(a->ex_per, 0, x->rq->range.n);
    }
    if (a->ex_per[b] >= TQMX_EX_PER_BUCKET) {
        return 0;
    }
    if (a->n_ex == a->ex_cap) {
        uint32_t ncap = a->ex_cap ? a->ex_cap * 2 : 4;
        struct tqmx_ex *nv = ealloc(x, ncap * sizeof(*nv));
        if (nv == NULL) {
            return -ENOMEM;
        }
        if (a->n_ex > 0) {
            memcpy(nv, a->ex, a->n_ex * sizeof(*nv));
        }
        a->ex = nv;
        a->ex_cap = ncap;
    }
    struct tqmx_ex *e = &a->ex[a->n_ex++];
    memcpy(e->trace_id, sp->v.trace_id, 16);
    memcpy(e->span_id, sp->v.span_id, 8);
    e->ts_ns = sp->v.start_ns;
    e->v = v;
    a->ex_per[b]++;
    x->n_ex++;
    return 0;
}

static int dvec_push(struct tqmx_run *x, struct dvec *d, double v)
{
    if (d->n == d->cap) {
        uint32_t ncap = d->cap ? d->cap * 2 : 8;
        double *nv = ealloc(x, ncap * sizeof(double));
        if (nv == NULL) {
            return -ENOMEM;
        }
        if (d->n > 0) {
            memcpy(nv, d->v, d->n * sizeof(double));
        }
        d->v = nv;
        d->cap = ncap;
    }
    d->v[d->n++] = v;
    return 0;
}

static int observe_compare(struct tqmx_run *x, struct qrun *qr, struct ectx *e,
                           const struct espan *sp, int64_t b);

/* The run's key buffer, at least |need| bytes (grown, never shrunk; freed by
 * tqmx_eval). NULL and the query's error when out of memory. */
static uint8_t *key_room(struct tqmx_run *x, size_t need)
{
    if (need > x->kcap) {
        size_t ncap = need < 1024 ? 1024 : need * 2;
        if (qctx_charge(&x->q, ncap - x->kcap) < 0) {
            return NULL;
        }
        uint8_t *nb = realloc(x->kbuf, ncap);
        if (nb == NULL) {
            qctx_fail(&x->q, -ENOMEM, "out of memory");
            return NULL;
        }
        x->kbuf = nb;
        x->kcap = ncap;
    }
    return x->kbuf;
}

int tqmx_observe(struct tqmx_run *x, struct qrun *qr, struct ectx *e, const struct espan *sp)
{
    const struct tqmx_query *q = qr->q;
    int64_t b = tqmx_bucket_of(&x->rq->range, sp->v.start_ns);
    if (b < 0) {
        return 0;
    }
    if (q->fn == TQMX_COMPARE) {
        return observe_compare(x, qr, e, sp, b);
    }
    double val = 0;
    if (q->fn != TQMX_RATE && q->fn != TQMX_COUNT_OVER_TIME) {
        struct tv v = traces_eval_val(e, &q->attr, sp);
        if (!tv_num(&v, &val)) {
            return 0; /* Tempo skips spans without a numeric value */
        }
        if (q->fn == TQMX_HISTOGRAM_OVER_TIME) {
            val = v.t == TRACEQL_T_DURATION ? log2_bucket((uint64_t)v.i) / 1e9
                                            : log2_bucket(val > 0 ? (uint64_t)val : 0);
        }
    }
    struct tv lv[TQMX_MAX_BY];
    size_t need = 9;
    for (size_t i = 0; i < q->n_by; i++) {
        lv[i] = traces_eval_val(e, &q->by[i], sp);
        need += 13 + (lv[i].t == TRACEQL_T_STRING ? lv[i].n : 0);
    }
    uint8_t *key = key_room(x, need);
    if (key == NULL) {
        return -ENOMEM;
    }
    size_t kn = 0;
    for (size_t i = 0; i < q->n_by; i++) {
        kn = key_put(key, need, kn, &lv[i]);
    }
    if (q->fn == TQMX_HISTOGRAM_OVER_TIME) {
        struct tv bv = {.t = TRACEQL_T_FLOAT, .f = val};
        kn = key_put(key, need, kn, &bv);
    }
    struct acc *a = acc_find(x, &qr->accs, key, kn, false, (uint32_t)q->n_by);
    if (a == NULL) {
        return qctx_err(&x->q) != 0 ? -ENOMEM : 0; /* else: over the series limit */
    }
    if (a->total == 0) { /* new: its labels */
        for (size_t i = 0; i < q->n_by; i++) {
            a->lv[i] = lv[i];
            if (keep_tv(x, &a->lv[i]) < 0) {
                return -ENOMEM;
            }
        }
        a->n_lb = (uint32_t)q->n_by;
        a->bucket = val;
    }
    uint32_t i = (uint32_t)b;
    switch (q->fn) {
    case TQMX_MIN_OVER_TIME:
        a->v[i] = a->cnt[i] == 0 || val < a->v[i] ? val : a->v[i];
        break;
    case TQMX_MAX_OVER_TIME:
        a->v[i] = a->cnt[i] == 0 || val > a->v[i] ? val : a->v[i];
        break;
    case TQMX_AVG_OVER_TIME:
    case TQMX_SUM_OVER_TIME:
        a->v[i] += val;
        break;
    case TQMX_QUANTILE_OVER_TIME:
        if (a->qv == NULL) {
            a->qv = ealloc(x, x->rq->range.n * sizeof(*a->qv));
            if (a->qv == NULL) {
                return -ENOMEM;
            }
            memset(a->qv, 0, x->rq->range.n * sizeof(*a->qv));
        }
        if (dvec_push(x, &a->qv[i], val) < 0) {
            return -ENOMEM;
        }
        break;
    default:
        break;
    }
    a->cnt[i]++;
    a->total++;
    double exv = val;
    if (q->fn == TQMX_RATE || q->fn == TQMX_COUNT_OVER_TIME || q->fn == TQMX_HISTOGRAM_OVER_TIME) {
        exv = (double)(sp->v.end_ns > sp->v.start_ns ? sp->v.end_ns - sp->v.start_ns : 0) / 1e9;
    }
    return ex_add(x, a, sp, exv, i);
}

/* ---- compare() ------------------------------------------------------------------- */

/* One attribute value of a span into the compare table: key = side, name, value. */
static int cmp_add(struct tqmx_run *x, struct qrun *qr, const struct espan *sp, bool sel,
                   const char *name, size_t nn, const struct tv *v, uint32_t b)
{
    uint8_t key[1200];
    size_t kn = 0;
    if (nn > 256) {
        return 0;
    }
    key[kn++] = sel ? 1 : 0;
    memcpy(key + kn, &(uint32_t){(uint32_t)nn}, 4);
    memcpy(key + kn + 4, name, nn);
    kn += 4 + nn;
    kn = key_put(key, sizeof(key), kn, v);
    if (kn > sizeof(key)) {
        return 0;
    }
    struct acc *a = acc_find(x, &qr->accs, key, kn, true, 1);
    if (a == NULL) {
        return -ENOMEM;
    }
    if (a->total == 0) {
        char *nm = ealloc(x, nn + 1);
        if (nm == NULL) {
            return -ENOMEM;
        }
        memcpy(nm, name, nn);
        nm[nn] = '\0';
        a->name = nm;
        a->lv[0] = *v;
        if (keep_tv(x, &a->lv[0]) < 0) {
            return -ENOMEM;
        }
        a->n_lb = 1;
        a->sel = sel;
    }
    if (acc_bump(x, a, b) < 0) {
        return -ENOMEM;
    }
    a->total++;
    return ex_add(x, a, sp, NAN, b);
}

static struct tv tv_of_val(const struct val *v)
{
    switch (v->type) {
    case VAL_STR:
        return tv_str(v->s, v->n);
    case VAL_BOOL:
        return (struct tv){.t = TRACEQL_T_BOOL, .i = v->b};
    case VAL_INT:
        return (struct tv){.t = TRACEQL_T_INT, .i = v->i};
    case VAL_DOUBLE:
        return (struct tv){.t = TRACEQL_T_FLOAT, .f = v->d};
    default:
        return tv_nil;
    }
}

static int cmp_attrs(struct tqmx_run *x, struct qrun *qr, const struct espan *sp, bool sel,
                     const struct oattrs *at, const char *prefix, uint32_t b)
{
    struct val_rd r = {at->p, at->p + at->len};
    char name[300];
    size_t pl = strlen(prefix);
    for (uint32_t i = 0; i < at->count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            return 0;
        }
        struct tv tv = tv_of_val(&v);
        if (tv.t == TRACEQL_T_NIL || kn + pl >= sizeof(name)) {
            continue; /* arrays, maps, bytes: not compared */
        }
        memcpy(name, prefix, pl);
        memcpy(name + pl, k, kn);
        if (cmp_add(x, qr, sp, sel, name, pl + kn, &tv, b) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int observe_compare(struct tqmx_run *x, struct qrun *qr, struct ectx *e,
                           const struct espan *sp, int64_t b)
{
    const struct tqmx_query *q = qr->q;
    const struct traceql_field *f = q->cmp->root->filter;
    bool sel = f == NULL || traces_eval_bool(e, f, sp);
    if (sel && q->cmp_end_ns != 0) {
        sel = sp->v.start_ns >= q->cmp_start_ns && sp->v.start_ns < q->cmp_end_ns;
    }
    uint32_t i = (uint32_t)b;
    static const enum traceql_intrinsic intr[] = {TRACEQL_I_NAME, TRACEQL_I_STATUS, TRACEQL_I_KIND};
    for (size_t k = 0; k < sizeof(intr) / sizeof(intr[0]); k++) {
        struct tv v = traces_intrinsic(e, intr[k], sp);
        const char *nm = traceql_intrinsic_name(intr[k]);
        if (cmp_add(x, qr, sp, sel, nm, strlen(nm), &v, i) < 0) {
            return -ENOMEM;
        }
    }
    if (cmp_attrs(x, qr, sp, sel, &sp->v.attrs, "span.", i) < 0) {
        return -ENOMEM;
    }
    if (sp->v.resource != NULL &&
        cmp_attrs(x, qr, sp, sel, &sp->v.resource->attrs, "resource.", i) < 0) {
        return -ENOMEM;
    }
    return 0;
}
