/*
 * logs_metric.c - metric queries: series keyed by labels, range
 * aggregations accumulated per source and merged, then vector
 * aggregations, binary operators and the rest of the tree evaluated per
 * step (see logs_int.h).
 */
#include "query/logs_int.h"

#include "query/pool.h"

/* |v| clamped into int64_t: window edges computed in 128 bits (a query may
 * name any range, offset and time) and then compared with timestamps. */
static int64_t clamp64(__int128 v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* ---- metric queries: series ----------------------------------------------- */

uint64_t logs_hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct series *smap_get(struct smap *m, uint64_t h, const char *key, size_t kn)
{
    if (m->cap == 0) {
        return NULL;
    }
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct series *s = m->slots[i];
        if (s == NULL) {
            return NULL;
        }
        if (s->hash == h && s->keylen == kn && memcmp(s->key, key, kn) == 0) {
            return s;
        }
    }
}

static int smap_put(struct smap *m, struct series *s)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        struct series **sl = calloc(nc, sizeof(*sl));
        if (sl == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i] != NULL) {
                size_t j = m->slots[i]->hash & (nc - 1);
                while (sl[j] != NULL) {
                    j = (j + 1) & (nc - 1);
                }
                sl[j] = m->slots[i];
            }
        }
        free(m->slots);
        m->slots = sl;
        m->cap = nc;
    }
    size_t j = s->hash & (m->cap - 1);
    while (m->slots[j] != NULL) {
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = s;
    m->n++;
    return 0;
}

void logs_smap_free(struct smap *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

void logs_smap_free_samples(struct smap *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i] != NULL) {
            free(m->slots[i]->samp);
            m->slots[i]->samp = NULL;
            m->slots[i]->ns = m->slots[i]->cap_s = 0;
        }
    }
}

/* Appends n samples; false on out of memory. */
static bool samp_add(struct query *q, struct series *se, const struct qsamp *x, size_t n)
{
    if (se->ns + n > se->cap_s) {
        size_t nc = se->cap_s ? se->cap_s : 64;
        while (nc < se->ns + n) {
            nc *= 2;
        }
        struct qsamp *a = realloc(se->samp, nc * sizeof(*a));
        if (a == NULL) {
            return false;
        }
        qctx_charge(&q->c, (uint64_t)((nc - se->cap_s) * sizeof(*a)));
        se->samp = a;
        se->cap_s = nc;
    }
    memcpy(se->samp + se->ns, x, n * sizeof(*x));
    se->ns += n;
    return true;
}

static int qsamp_ts_cmp(const void *a, const void *b)
{
    const struct qsamp *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prometheus quantile: linear interpolation between the closest ranks. */
static double quantile_of(double phi, double *v, size_t n)
{
    if (phi < 0) {
        return -INFINITY;
    }
    if (phi > 1) {
        return INFINITY;
    }
    qsort(v, n, sizeof(double), dbl_cmp);
    double rank = phi * (double)(n - 1);
    size_t lo = (size_t)rank;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double w = rank - (double)lo;
    return v[lo] * (1 - w) + v[hi] * w;
}

static bool range_unwrapped(enum logql_range_op op)
{
    return op >= LOGQL_RANGE_RATE_COUNTER;
}

/* Range aggregations that keep every sample of a series (their window
 * value is no running sum or extreme). */
static bool range_samples(enum logql_range_op op)
{
    return op == LOGQL_RANGE_QUANTILE_OVER_TIME || op == LOGQL_RANGE_RATE_COUNTER;
}

/* Range aggregations whose window value is a sum: a row adds to every
 * step of its window through a difference array (O(1) per row however
 * many steps the window spans), summed up once in series_finish. */
static bool range_additive(enum logql_range_op op)
{
    switch (op) {
    case LOGQL_RANGE_COUNT_OVER_TIME:
    case LOGQL_RANGE_RATE:
    case LOGQL_RANGE_BYTES_OVER_TIME:
    case LOGQL_RANGE_BYTES_RATE:
    case LOGQL_RANGE_ABSENT_OVER_TIME:
    case LOGQL_RANGE_SUM_OVER_TIME:
    case LOGQL_RANGE_AVG_OVER_TIME:
        return true;
    default:
        return false;
    }
}

/* Creates a series (arena |a|) with copies of |l| and K-step arrays. */
static struct series *series_new(struct query *q, arena *a, const struct lbl *l, uint32_t nl,
                                 const char *key, size_t kn, uint64_t h, size_t K, bool aux)
{
    struct series *s = arena_alloc(a, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->hash = h;
    s->key = adup(a, key, kn);
    s->keylen = (uint32_t)kn;
    s->l = arena_alloc(a, (nl + 1) * sizeof(struct lbl));
    /* K + 1: additive range aggregations keep a difference array */
    s->v = arena_alloc(a, (K + 1) * sizeof(double));
    s->cnt = arena_alloc(a, (K + 1) * sizeof(uint32_t));
    if (s->key == NULL || s->l == NULL || s->v == NULL || s->cnt == NULL) {
        return NULL;
    }
    memset(s->v, 0, (K + 1) * sizeof(double));
    memset(s->cnt, 0, (K + 1) * sizeof(uint32_t));
    if (aux) {
        s->aux = arena_alloc(a, K * sizeof(double));
        s->aux2 = arena_alloc(a, K * sizeof(double));
        if (s->aux == NULL || s->aux2 == NULL) {
            return NULL;
        }
        memset(s->aux, 0, K * sizeof(double));
        memset(s->aux2, 0, K * sizeof(double));
    }
    for (uint32_t i = 0; i < nl; i++) {
        s->l[i] = l[i];
        s->l[i].n = adup(a, l[i].n, l[i].nn);
        s->l[i].v = adup(a, l[i].v, l[i].vn);
        if (s->l[i].n == NULL || s->l[i].v == NULL) {
            return NULL;
        }
    }
    s->nl = nl;
    qctx_charge(&q->c, (uint64_t)(sizeof(*s) + kn + K * (sizeof(double) + sizeof(uint32_t)) +
                                  (aux ? 2 * K * sizeof(double) : 0)));
    return s;
}

/* Labels of a series from the row's labels: sorted, non-empty, projected
 * by |keep| (names, n_keep) when |project|, or minus |drop| names. */
static uint32_t series_labels(const struct lset *in, struct lbl *out, uint32_t cap, bool project,
                              const struct logql_str *names, size_t n_names, bool without,
                              const struct logql_str *drop)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < in->n && n < cap; i++) {
        const struct lbl *l = &in->a[i];
        if (l->vn == 0 || (drop->n > 0 && drop->n == l->nn && memcmp(drop->s, l->n, l->nn) == 0)) {
            continue;
        }
        if (project) {
            bool listed = false;
            for (size_t k = 0; k < n_names && !listed; k++) {
                listed = names[k].n == l->nn && memcmp(names[k].s, l->n, l->nn) == 0;
            }
            if (listed == without) {
                continue;
            }
        }
        bool dup = false;
        for (uint32_t k = 0; k < n && !dup; k++) {
            dup = out[k].nn == l->nn && memcmp(out[k].n, l->n, l->nn) == 0;
        }
        if (!dup) {
            out[n++] = *l;
        }
    }
    qsort(out, n, sizeof(*out), lbl_cmp);
    return n;
}

/* Adds the current row to its series at every step whose window holds it. */
bool logs_on_metric_match(struct rctx *c, uint64_t row)
{
    (void)row;
    struct scan *s = c->s;
    struct query *q = s->q;
    const struct logql_expr *r = s->range;
    if (!c->built) {
        logs_build_labels(c);
    }
    const struct lbl *err = lset_get(&c->l, "__error__", 9);
    if (err != NULL) {
        c->sb.n = 0;
        sb_labels_key(&c->sb, c->l.a, c->l.n);
        qctx_fail(&q->c, -EINVAL,
                  "pipeline error: '%.*s' for series: '%.*s'. Use a label filter to intentionally "
                  "skip this error. (e.g | __error__!=\"%.*s\"). To skip all potential errors you "
                  "can match empty errors.(e.g __error__=\"\")",
                  (int)err->vn, err->v, (int)(c->sb.n < 120 ? c->sb.n : 120),
                  c->sb.p ? c->sb.p : "", (int)err->vn, err->v);
        return false;
    }
    double x = 0;
    if (range_unwrapped(r->range_op) || s->has_unwrap) {
        if (!c->has_unwrap_val) {
            return true;
        }
        x = c->unwrap_val;
    } else if (r->range_op == LOGQL_RANGE_BYTES_OVER_TIME ||
               r->range_op == LOGQL_RANGE_BYTES_RATE) {
        x = (double)c->line_n;
    } else {
        x = 1;
    }
    /* steps k with t_k - off - range < ts <= t_k - off, in 128 bits: a
     * range or offset of any size a query may name cannot overflow it */
    __int128 ts = (__int128)c->ts + r->offset_ns;
    __int128 st = (__int128)s->start, step = (__int128)(s->step ? s->step : 1);
    __int128 lo = ts <= st ? 0 : (ts - st + step - 1) / step;
    __int128 lim = ts + r->range_ns; /* t_k < lim */
    __int128 hi = lim <= st ? -1 : (lim - st - 1) / step;
    if (hi >= (__int128)s->K) {
        hi = (__int128)s->K - 1;
    }
    if (lo > hi) {
        return true;
    }
    int64_t klo = (int64_t)lo, khi = (int64_t)hi; /* 0 <= klo <= khi < K */
    struct lbl tmp[128];
    uint32_t nl;
    if (s->by_pushdown) {
        nl = series_labels(&c->l, tmp, 128, true, s->by, s->n_by, false, &s->unwrap_drop);
    } else if (r->grouping.has) {
        nl = series_labels(&c->l, tmp, 128, true, r->grouping.labels, r->grouping.n_labels,
                           r->grouping.without, &s->unwrap_drop);
    } else {
        nl = series_labels(&c->l, tmp, 128, false, NULL, 0, false, &s->unwrap_drop);
    }
    c->sb.n = 0;
    sb_labels_key(&c->sb, tmp, nl);
    if (c->sb.oom) {
        c->err = -ENOMEM;
        return false;
    }
    uint64_t h = logs_hash_bytes(c->sb.p, c->sb.n);
    struct src *src = c->src;
    struct series *se = smap_get(&src->m, h, c->sb.p, c->sb.n);
    if (se == NULL) {
        bool aux = r->range_op == LOGQL_RANGE_STDVAR_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_STDDEV_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_FIRST_OVER_TIME ||
                   r->range_op == LOGQL_RANGE_LAST_OVER_TIME;
        se = series_new(q, src->a, tmp, nl, c->sb.p, c->sb.n, h, s->K, aux);
        if (se == NULL || smap_put(&src->m, se) < 0) {
            c->err = -ENOMEM;
            return false;
        }
    }
    if (range_samples(r->range_op)) {
        struct qsamp qs = {c->ts, x};
        if (!samp_add(q, se, &qs, 1)) {
            c->err = -ENOMEM;
            return false;
        }
        return true;
    }
    if (range_additive(r->range_op)) {
        se->v[klo] += x;
        se->v[khi + 1] -= x;
        se->cnt[klo]++;
        se->cnt[khi + 1]--; /* unsigned: wraps back in the prefix sum */
        return true;
    }
    for (int64_t k = klo; k <= khi; k++) {
        uint32_t n = se->cnt[k]++;
        switch (r->range_op) {
        case LOGQL_RANGE_MIN_OVER_TIME:
            se->v[k] = n == 0 || x < se->v[k] ? x : se->v[k];
            break;
        case LOGQL_RANGE_MAX_OVER_TIME:
            se->v[k] = n == 0 || x > se->v[k] ? x : se->v[k];
            break;
        case LOGQL_RANGE_FIRST_OVER_TIME:
            if (n == 0 || (double)c->ts < se->aux[k]) {
                se->v[k] = x;
                se->aux[k] = (double)c->ts;
            }
            break;
        case LOGQL_RANGE_LAST_OVER_TIME:
            if (n == 0 || (double)c->ts >= se->aux[k]) {
                se->v[k] = x;
                se->aux[k] = (double)c->ts;
            }
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME:
            se->aux[k] += x;
            se->aux2[k] += x * x;
            break;
        default:
            se->v[k] += x;
            break;
        }
    }
    return true;
}

/* Merges |from| into |into| (same key). */
static void series_merge(const struct logql_expr *r, size_t K, struct series *into,
                         const struct series *from)
{
    if (range_additive(r->range_op)) {
        for (size_t k = 0; k <= K; k++) {
            into->v[k] += from->v[k];
            into->cnt[k] += from->cnt[k];
        }
        return;
    }
    if (range_samples(r->range_op)) {
        return; /* samples: see merge_samples */
    }
    for (size_t k = 0; k < K; k++) {
        if (from->cnt[k] == 0) {
            continue;
        }
        bool first = into->cnt[k] == 0;
        into->cnt[k] += from->cnt[k];
        double x = from->v[k];
        switch (r->range_op) {
        case LOGQL_RANGE_MIN_OVER_TIME:
            into->v[k] = first || x < into->v[k] ? x : into->v[k];
            break;
        case LOGQL_RANGE_MAX_OVER_TIME:
            into->v[k] = first || x > into->v[k] ? x : into->v[k];
            break;
        case LOGQL_RANGE_FIRST_OVER_TIME:
            if (first || from->aux[k] < into->aux[k]) {
                into->v[k] = x;
                into->aux[k] = from->aux[k];
            }
            break;
        case LOGQL_RANGE_LAST_OVER_TIME:
            if (first || from->aux[k] >= into->aux[k]) {
                into->v[k] = x;
                into->aux[k] = from->aux[k];
            }
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME:
            into->aux[k] += from->aux[k];
            into->aux2[k] += from->aux2[k];
            break;
        default:
            into->v[k] += x;
            break;
        }
    }
}

/* Loki's extrapolatedRate (from Prometheus) for rate_counter: the
 * increase of a counter over the window's |n| samples (time order; a drop
 * is a reset), extrapolated towards the window's edges (range_ns ending at
 * |end|), per second. Fewer than two samples: 0, as Loki answers. */
static double counter_rate(const struct qsamp *x, size_t n, int64_t end, int64_t range_ns)
{
    if (n < 2) {
        return 0;
    }
    double result = x[n - 1].v - x[0].v, last = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i].v < last) {
            result += last;
        }
        last = x[i].v;
    }
    int64_t start = clamp64((__int128)end - range_ns);
    double to_start = (double)((__int128)x[0].ts - start) / 1e9;
    double to_end = (double)((__int128)end - (__int128)x[n - 1].ts) / 1e9;
    double sampled = (double)(x[n - 1].ts - x[0].ts) / 1e9;
    double avg = sampled / (double)(n - 1);
    double threshold = avg * 1.1;
    if (to_start >= threshold) {
        to_start = avg / 2;
    }
    double to_zero = to_start;
    if (result > 0 && x[0].v >= 0) {
        to_zero = sampled * (x[0].v / result);
    }
    if (to_zero < to_start) {
        to_start = to_zero;
    }
    if (to_end >= threshold) {
        to_end = avg / 2;
    }
    double interval = sampled + to_start + to_end;
    result = sampled > 0 ? result * (interval / sampled) : result;
    return result / ((double)range_ns / 1e9);
}

/* quantile_over_time and rate_counter: per step, the value of the samples
 * in its window; frees the samples. false on out of memory. */
static bool samples_finish(const struct logql_expr *r, size_t K, uint64_t start, uint64_t step,
                           struct series *s)
{
    bool ok = true;
    if (s->ns > 1) {
        qsort(s->samp, s->ns, sizeof(*s->samp), qsamp_ts_cmp);
    }
    double *tmp = malloc((s->ns + 1) * sizeof(double));
    if (tmp == NULL) {
        ok = false;
        s->ns = 0;
    }
    size_t lo = 0, hi = 0;
    for (size_t k = 0; k < K; k++) {
        /* window (t - off - range, t - off] */
        int64_t t = clamp64((__int128)start + (__int128)k * step - r->offset_ns);
        int64_t from = clamp64((__int128)t - r->range_ns);
        while (lo < s->ns && (int64_t)s->samp[lo].ts <= from) {
            lo++;
        }
        if (hi < lo) {
            hi = lo;
        }
        while (hi < s->ns && (int64_t)s->samp[hi].ts <= t) {
            hi++;
        }
        s->cnt[k] = (uint32_t)(hi - lo);
        if (hi > lo && r->range_op == LOGQL_RANGE_RATE_COUNTER) {
            s->v[k] = counter_rate(s->samp + lo, hi - lo, t, r->range_ns);
        } else if (hi > lo) {
            for (size_t i = lo; i < hi; i++) {
                tmp[i - lo] = s->samp[i].v;
            }
            s->v[k] = quantile_of(r->param, tmp, hi - lo);
        }
    }
    free(tmp);
    free(s->samp);
    s->samp = NULL;
    s->ns = s->cap_s = 0;
    return ok;
}

static void series_finish(const struct logql_expr *r, size_t K, struct series *s, bool unwrap)
{
    double secs = (double)r->range_ns / 1e9;
    if (range_additive(r->range_op)) {
        double acc = 0;
        uint32_t cacc = 0;
        for (size_t k = 0; k < K; k++) {
            acc += s->v[k];
            cacc += s->cnt[k];
            s->v[k] = cacc != 0 ? acc : 0;
            s->cnt[k] = cacc;
        }
    }
    for (size_t k = 0; k < K; k++) {
        double n = s->cnt[k];
        if (n == 0) {
            continue;
        }
        switch (r->range_op) {
        case LOGQL_RANGE_COUNT_OVER_TIME:
            s->v[k] = n;
            break;
        case LOGQL_RANGE_RATE:
            s->v[k] = (unwrap ? s->v[k] : n) / secs;
            break;
        case LOGQL_RANGE_BYTES_RATE:
            s->v[k] = s->v[k] / secs;
            break;
        case LOGQL_RANGE_AVG_OVER_TIME:
            s->v[k] = s->v[k] / n;
            break;
        case LOGQL_RANGE_STDVAR_OVER_TIME:
        case LOGQL_RANGE_STDDEV_OVER_TIME: {
            double mean = s->aux[k] / n;
            double var = s->aux2[k] / n - mean * mean;
            if (var < 0) {
                var = 0;
            }
            s->v[k] = r->range_op == LOGQL_RANGE_STDDEV_OVER_TIME ? sqrt(var) : var;
            break;
        }
        default:
            break;
        }
    }
}

/* ---- metric queries: evaluation ------------------------------------------- */

/* A set of series with finished values (cnt[k] != 0: a point at step k). */
struct mat {
    struct series **s;
    size_t n, cap;
    bool scalar; /* one label-less series, a point at every step */
};

static int mat_add(struct mat *m, struct series *s)
{
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        struct series **a = realloc(m->s, nc * sizeof(*a));
        if (a == NULL) {
            return -ENOMEM;
        }
        m->s = a;
        m->cap = nc;
    }
    m->s[m->n++] = s;
    return 0;
}

static void mat_free(struct mat *m)
{
    free(m->s);
    memset(m, 0, sizeof(*m));
}

struct eval {
    struct logs_result *res;
    struct query *q;
    size_t K;
    uint64_t start, step;
    struct sbuf sb;
};

static struct series *ev_series(struct eval *ev, const struct lbl *l, uint32_t nl)
{
    ev->sb.n = 0;
    sb_labels_key(&ev->sb, l, nl);
    if (ev->sb.oom) {
        return NULL;
    }
    return series_new(ev->q, ev->q->a, l, nl, ev->sb.p, ev->sb.n,
                      logs_hash_bytes(ev->sb.p, ev->sb.n), ev->K, false);
}

static int eval_expr(struct eval *ev, const struct logql_expr *e, struct mat *out);
static int eval_chain(struct eval *ev, const struct logql_expr *e, struct mat *out);

static int eval_range(struct eval *ev, const struct logql_expr *e, const struct logql_expr *parent,
                      struct mat *out)
{
    struct query *q = ev->q;
    struct scan s;
    memset(&s, 0, sizeof(s));
    s.q = q;
    s.log = &e->log;
    s.range = e;
    s.K = ev->K;
    s.start = ev->start;
    s.step = ev->step;
    for (size_t i = 0; i < e->log.n_stages; i++) {
        if (e->log.stages[i].kind == LOGQL_STAGE_UNWRAP) {
            s.has_unwrap = true;
            if (!(e->grouping.has && !e->grouping.without)) {
                s.unwrap_drop = e->log.stages[i].unwrap_label; /* Loki: without (..., label) */
            }
        }
    }
    /* sum by (labels) right above a plain range aggregation: the series
     * need only those labels (and so, often, no attribute table). Only
     * where the value of merged rows is the sum of the series' values
     * (counts, rates, bytes, sums): sum(max_over_time(...)) is a sum of
     * maxima, not the max of the merged rows. */
    bool linear = e->range_op == LOGQL_RANGE_COUNT_OVER_TIME || e->range_op == LOGQL_RANGE_RATE ||
                  e->range_op == LOGQL_RANGE_BYTES_OVER_TIME ||
                  e->range_op == LOGQL_RANGE_BYTES_RATE || e->range_op == LOGQL_RANGE_SUM_OVER_TIME;
    if (parent != NULL && parent->kind == LOGQL_EXPR_VECTOR_AGG &&
        parent->agg_op == LOGQL_AGG_SUM && !parent->grouping.without && !e->grouping.has &&
        linear) {
        s.by_pushdown = true; /* sum (...) without by: no label at all */
        s.by = parent->grouping.has ? parent->grouping.labels : NULL;
        s.n_by = parent->grouping.has ? parent->grouping.n_labels : 0;
    } else if (e->grouping.has && !e->grouping.without) {
        s.by_pushdown = false;
    }
    bool all = !s.by_pushdown && !(e->grouping.has && !e->grouping.without);
    if (e->grouping.has && !e->grouping.without) {
        s.by = e->grouping.labels;
        s.n_by = e->grouping.n_labels;
    }
    logs_plan_needs(&s, all);
    __int128 lo = (__int128)ev->start - e->offset_ns - e->range_ns + 1;
    __int128 hi = (__int128)ev->start + (__int128)(ev->K - 1) * ev->step - e->offset_ns + 1;
    s.lo = lo < 0 ? 0 : lo > UINT64_MAX ? UINT64_MAX : (uint64_t)lo;
    s.hi = hi < 0 ? 0 : hi > UINT64_MAX ? UINT64_MAX : (uint64_t)hi;
    int rc = s.hi > s.lo ? logs_scan_plan(&s) : 0;
    if (rc < 0) {
        qctx_fail(&q->c, rc, "out of memory");
        logs_scan_fini(&s);
        return rc;
    }
    qpool_parallel(s.n_srcs, logs_scan_item_metric, &s);
    if (qctx_err(&q->c)) {
        logs_scan_fini(&s);
        return qctx_err(&q->c);
    }
    /* merge the per-source maps into series owned by the query arena */
    struct smap all_m = {0};
    for (size_t i = 0; i < s.n_srcs && rc == 0; i++) {
        struct smap *m = &s.srcs[i].m;
        for (size_t j = 0; j < m->cap && rc == 0; j++) {
            struct series *se = m->slots[j];
            if (se == NULL) {
                continue;
            }
            struct series *into = smap_get(&all_m, se->hash, se->key, se->keylen);
            if (into == NULL) {
                into = series_new(q, q->a, se->l, se->nl, se->key, se->keylen, se->hash, ev->K,
                                  se->aux != NULL);
                if (into == NULL || smap_put(&all_m, into) < 0 || mat_add(out, into) < 0) {
                    rc = -ENOMEM;
                    break;
                }
            }
            series_merge(e, ev->K, into, se);
            if (se->ns > 0 && !samp_add(q, into, se->samp, se->ns)) {
                rc = -ENOMEM;
            }
        }
    }
    logs_smap_free(&all_m);
    if (rc < 0) {
        for (size_t i = 0; i < out->n; i++) {
            free(out->s[i]->samp);
            out->s[i]->samp = NULL;
        }
        logs_scan_fini(&s);
        qctx_fail(&q->c, rc, "out of memory");
        return rc;
    }
    for (size_t i = 0; i < out->n; i++) {
        if (range_samples(e->range_op)) {
            if (!samples_finish(e, ev->K, ev->start, ev->step, out->s[i]) && rc == 0) {
                rc = -ENOMEM;
            }
            continue;
        }
        series_finish(e, ev->K, out->s[i], s.has_unwrap);
    }
    if (e->range_op == LOGQL_RANGE_ABSENT_OVER_TIME) {
        /* one series, 1 where nothing was seen; labels from = matchers */
        struct lbl l[32];
        uint32_t nl = 0;
        for (size_t i = 0; i < e->log.n_matchers && nl < 32; i++) {
            const struct logql_matcher *m = &e->log.matchers[i];
            if (m->op == LOGQL_MATCH_EQ) {
                l[nl++] = (struct lbl){m->name.s, m->value.s, (uint32_t)m->name.n,
                                       (uint32_t)m->value.n, LC_INDEX};
            }
        }
        qsort(l, nl, sizeof(l[0]), lbl_cmp);
        struct series *a = ev_series(ev, l, nl);
        if (a == NULL) {
            logs_scan_fini(&s);
            return -ENOMEM;
        }
        for (size_t k = 0; k < ev->K; k++) {
            bool any = false;
            for (size_t i = 0; i < out->n && !any; i++) {
                any = out->s[i]->cnt[k] != 0;
            }
            a->cnt[k] = any ? 0 : 1;
            a->v[k] = 1;
        }
        out->n = 0;
        rc = mat_add(out, a);
    }
    logs_scan_fini(&s);
    return rc;
}

/* The labels of |s| projected: on/by keep the names, ignoring/without drop them. */
static uint32_t project(const struct series *s, const struct logql_str *names, size_t n, bool keep,
                        struct lbl *out, uint32_t cap)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < s->nl && m < cap; i++) {
        if (listed(names, n, s->l[i].n, s->l[i].nn) == keep) {
            out[m++] = s->l[i];
        }
    }
    return m;
}

struct dv {
    double v;
    size_t i;
};

static int dv_desc(const void *a, const void *b)
{
    const struct dv *x = a, *y = b;
    if (x->v != y->v) {
        return x->v > y->v ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static int dv_asc(const void *a, const void *b)
{
    const struct dv *x = a, *y = b;
    if (x->v != y->v) {
        return x->v < y->v ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static int eval_vector_agg(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    struct mat in = {0};
    int rc;
    if (e->inner->kind == LOGQL_EXPR_RANGE) {
        rc = eval_range(ev, e->inner, e, &in);
    } else {
        rc = eval_expr(ev, e->inner, &in);
    }
    if (rc < 0) {
        mat_free(&in);
        return rc;
    }
    if (e->agg_op == LOGQL_AGG_SORT || e->agg_op == LOGQL_AGG_SORT_DESC) {
        *out = in;
        out->scalar = false;
        return 0;
    }
    const struct logql_grouping *g = &e->grouping;
    size_t K = ev->K;
    /* group of each input series */
    size_t *grp = calloc(in.n + 1, sizeof(size_t));
    struct mat groups = {0};
    struct smap gm = {0};
    if (grp == NULL) {
        mat_free(&in);
        return -ENOMEM;
    }
    for (size_t i = 0; i < in.n && rc == 0; i++) {
        struct lbl l[128];
        uint32_t nl = 0;
        if (g->has) {
            nl = project(in.s[i], g->labels, g->n_labels, !g->without, l, 128);
        }
        ev->sb.n = 0;
        sb_labels_key(&ev->sb, l, nl);
        uint64_t h = logs_hash_bytes(ev->sb.p ? ev->sb.p : "", ev->sb.n);
        struct series *gs = smap_get(&gm, h, ev->sb.p ? ev->sb.p : "", ev->sb.n);
        if (gs == NULL) {
            gs = series_new(ev->q, ev->q->a, l, nl, ev->sb.p ? ev->sb.p : "", ev->sb.n, h, K, true);
            if (gs == NULL || smap_put(&gm, gs) < 0 || mat_add(&groups, gs) < 0) {
                rc = -ENOMEM;
                break;
            }
            gs->hash = h;
            gs->aux2[0] = (double)(groups.n - 1); /* group index, read below */
        }
        grp[i] = (size_t)gs->aux2[0];
    }
    logs_smap_free(&gm);
    if (rc < 0) {
        free(grp);
        mat_free(&in);
        mat_free(&groups);
        return rc;
    }
    for (size_t i = 0; i < groups.n; i++) {
        memset(groups.s[i]->aux2, 0, K * sizeof(double));
    }
    if (e->agg_op == LOGQL_AGG_TOPK || e->agg_op == LOGQL_AGG_BOTTOMK ||
        e->agg_op == LOGQL_AGG_APPROX_TOPK) {
        size_t kk = e->param < 1 ? 0 : (size_t)e->param;
        struct dv *tmp = malloc((in.n + 1) * sizeof(*tmp));
        /* one output series per input series, points only where selected */
        struct series **outs = calloc(in.n + 1, sizeof(*outs));
        if (tmp == NULL || outs == NULL) {
            free(tmp);
            free(outs);
            free(grp);
            mat_free(&in);
            mat_free(&groups);
            return -ENOMEM;
        }
        for (size_t k = 0; k < K && rc == 0; k++) {
            for (size_t gi = 0; gi < groups.n && rc == 0; gi++) {
                size_t n = 0;
                for (size_t i = 0; i < in.n; i++) {
                    if (grp[i] == gi && in.s[i]->cnt[k] != 0) {
                        tmp[n++] = (struct dv){in.s[i]->v[k], i};
                    }
                }
                qsort(tmp, n, sizeof(*tmp), e->agg_op == LOGQL_AGG_BOTTOMK ? dv_asc : dv_desc);
                for (size_t j = 0; j < n && j < kk; j++) {
                    size_t i = tmp[j].i;
                    if (outs[i] == NULL) {
                        outs[i] = ev_series(ev, in.s[i]->l, in.s[i]->nl);
                        if (outs[i] == NULL || mat_add(out, outs[i]) < 0) {
                            rc = -ENOMEM;
                            break;
                        }
                    }
                    outs[i]->v[k] = tmp[j].v;
                    outs[i]->cnt[k] = 1;
                }
            }
        }
        free(tmp);
        free(outs);
        free(grp);
        mat_free(&in);
        mat_free(&groups);
        return rc;
    }
    for (size_t i = 0; i < in.n; i++) {
        struct series *gs = groups.s[grp[i]];
        const struct series *s = in.s[i];
        for (size_t k = 0; k < K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            double x = s->v[k];
            uint32_t n = gs->cnt[k]++;
            switch (e->agg_op) {
            case LOGQL_AGG_MIN:
                gs->v[k] = n == 0 || x < gs->v[k] ? x : gs->v[k];
                break;
            case LOGQL_AGG_MAX:
                gs->v[k] = n == 0 || x > gs->v[k] ? x : gs->v[k];
                break;
            case LOGQL_AGG_COUNT:
                gs->v[k] += 1;
                break;
            case LOGQL_AGG_STDDEV:
            case LOGQL_AGG_STDVAR:
                gs->aux[k] += x;
                gs->aux2[k] += x * x;
                break;
            default: /* sum, avg */
                gs->v[k] += x;
                break;
            }
        }
    }
    for (size_t gi = 0; gi < groups.n; gi++) {
        struct series *gs = groups.s[gi];
        for (size_t k = 0; k < K; k++) {
            double n = gs->cnt[k];
            if (n == 0) {
                continue;
            }
            if (e->agg_op == LOGQL_AGG_AVG) {
                gs->v[k] /= n;
            } else if (e->agg_op == LOGQL_AGG_STDDEV || e->agg_op == LOGQL_AGG_STDVAR) {
                double mean = gs->aux[k] / n;
                double var = gs->aux2[k] / n - mean * mean;
                if (var < 0) {
                    var = 0;
                }
                gs->v[k] = e->agg_op == LOGQL_AGG_STDDEV ? sqrt(var) : var;
            }
        }
        if (mat_add(out, gs) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    free(grp);
    mat_free(&in);
    mat_free(&groups);
    return rc;
}

static bool bin_cmp(enum logql_bin_op op)
{
    return op >= LOGQL_BIN_EQ && op <= LOGQL_BIN_LE;
}

/* Arithmetic or comparison; *keep = false drops the point (filtering
 * comparison that is false). */
static double bin_apply(enum logql_bin_op op, bool ret_bool, double a, double b, bool *keep)
{
    *keep = true;
    bool t;
    switch (op) {
    case LOGQL_BIN_ADD:
        return a + b;
    case LOGQL_BIN_SUB:
        return a - b;
    case LOGQL_BIN_MUL:
        return a * b;
    case LOGQL_BIN_DIV:
        return a / b;
    case LOGQL_BIN_MOD:
        return fmod(a, b);
    case LOGQL_BIN_POW:
        return pow(a, b);
    case LOGQL_BIN_EQ:
        t = a == b;
        break;
    case LOGQL_BIN_NE:
        t = a != b;
        break;
    case LOGQL_BIN_GT:
        t = a > b;
        break;
    case LOGQL_BIN_GE:
        t = a >= b;
        break;
    case LOGQL_BIN_LT:
        t = a < b;
        break;
    case LOGQL_BIN_LE:
        t = a <= b;
        break;
    default:
        return a;
    }
    if (ret_bool) {
        return t ? 1 : 0;
    }
    *keep = t;
    return a;
}

/* The match key of |s| under on(...) / ignoring(...) into l (cap 128). */
static uint32_t match_key(const struct logql_expr *e, const struct series *s, struct lbl *l)
{
    return e->has_matching ? project(s, e->match_labels, e->n_match_labels, e->on, l, 128)
                           : project(s, NULL, 0, false, l, 128);
}

/* Many-to-one matching (group_left: the left side is the "many" side;
 * group_right: the right side), as PromQL does it: each series of the many
 * side meets the series of the one side with its match key; a result keeps
 * the many side's labels, with each group_x(...) label taken from the one
 * side (removed when the one side lacks it). Two series of the one side
 * with the same key at one step: the query fails, as in Loki. The value is
 * op(left, right); a filtering comparison keeps the left value. */
static int eval_group(struct eval *ev, const struct logql_expr *e, struct mat L, struct mat R,
                      struct mat *out)
{
    int rc = 0;
    size_t K = ev->K;
    bool left_many = e->group_side < 0;
    const struct mat *M = left_many ? &L : &R, *O = left_many ? &R : &L;
    struct lbl l[129];
    uint64_t *oh = calloc(O->n + 1, sizeof(*oh));
    struct series **ok = calloc(O->n + 1, sizeof(*ok));
    if (oh == NULL || ok == NULL) {
        rc = -ENOMEM;
    }
    for (size_t j = 0; j < O->n && rc == 0; j++) {
        uint32_t nl = match_key(e, O->s[j], l);
        ok[j] = ev_series(ev, l, nl); /* holds the key */
        if (ok[j] == NULL) {
            rc = -ENOMEM;
            break;
        }
        oh[j] = ok[j]->hash;
    }
    for (size_t i = 0; i < M->n && rc == 0; i++) {
        const struct series *m = M->s[i];
        uint32_t nl = match_key(e, m, l);
        ev->sb.n = 0;
        sb_labels_key(&ev->sb, l, nl);
        if (ev->sb.oom) {
            rc = -ENOMEM;
            break;
        }
        size_t keylen = ev->sb.n;
        /* a copy: ev_series below reuses ev->sb */
        const char *key = arena_strndup(ev->q->a, ev->sb.p ? ev->sb.p : "", keylen);
        if (key == NULL) {
            rc = -ENOMEM;
            break;
        }
        uint64_t h = logs_hash_bytes(key, keylen);
        for (size_t j = 0; j < O->n && rc == 0; j++) {
            if (oh[j] != h || ok[j]->keylen != keylen || memcmp(ok[j]->key, key, keylen) != 0) {
                continue;
            }
            const struct series *o = O->s[j];
            /* result labels: the many side's, group_x(...) ones from the one side */
            uint32_t rn = 0;
            for (uint32_t a = 0; a < m->nl && rn < 128; a++) {
                if (!listed(e->include_labels, e->n_include_labels, m->l[a].n, m->l[a].nn)) {
                    l[rn++] = m->l[a];
                }
            }
            for (uint32_t a = 0; a < o->nl && rn < 128; a++) {
                if (listed(e->include_labels, e->n_include_labels, o->l[a].n, o->l[a].nn) &&
                    o->l[a].vn > 0) {
                    l[rn++] = o->l[a];
                }
            }
            qsort(l, rn, sizeof(l[0]), lbl_cmp);
            struct series *r = NULL;
            for (size_t k = 0; k < K; k++) {
                if (m->cnt[k] == 0 || o->cnt[k] == 0) {
                    continue;
                }
                for (size_t j2 = j + 1; j2 < O->n; j2++) {
                    if (oh[j2] == h && ok[j2]->keylen == keylen &&
                        memcmp(ok[j2]->key, key, keylen) == 0 && O->s[j2]->cnt[k] != 0) {
                        qctx_fail(&ev->q->c, -EINVAL,
                                  "found duplicate series for the match group on the %s "
                                  "hand-side of the operation; many-to-many matching not "
                                  "allowed: matching labels must be unique on one side",
                                  left_many ? "right" : "left");
                        rc = -EINVAL;
                        break;
                    }
                }
                if (rc < 0) {
                    break;
                }
                double a = left_many ? m->v[k] : o->v[k], b = left_many ? o->v[k] : m->v[k];
                bool keep;
                double v = bin_apply(e->bin_op, e->return_bool, a, b, &keep);
                if (!keep) {
                    continue;
                }
                if (r == NULL) {
                    r = ev_series(ev, l, rn);
                    if (r == NULL || mat_add(out, r) < 0) {
                        rc = -ENOMEM;
                        break;
                    }
                }
                r->v[k] = v;
                r->cnt[k] = 1;
            }
        }
    }
    free(oh);
    free(ok);
    mat_free(&L);
    mat_free(&R);
    return rc;
}

/* One binary operator over its evaluated operands |L| and |R| (freed
 * here) into the empty |out|. */
static int eval_binop(struct eval *ev, const struct logql_expr *e, struct mat L, struct mat R,
                      struct mat *out)
{
    int rc = 0;
    size_t K = ev->K;
    enum logql_bin_op op = e->bin_op;
    bool setop = op == LOGQL_BIN_AND || op == LOGQL_BIN_OR || op == LOGQL_BIN_UNLESS;
    if (L.scalar || R.scalar) {
        /* scalar with scalar or vector: apply per point */
        const struct mat *V = L.scalar ? &R : &L;
        const struct series *sc = L.scalar ? L.s[0] : R.s[0];
        out->scalar = L.scalar && R.scalar;
        for (size_t i = 0; i < V->n && rc == 0; i++) {
            const struct series *s = V->s[i];
            struct series *o = ev_series(ev, s->l, s->nl);
            if (o == NULL || mat_add(out, o) < 0) {
                rc = -ENOMEM;
                break;
            }
            for (size_t k = 0; k < K; k++) {
                if (s->cnt[k] == 0 || sc->cnt[k] == 0) {
                    continue;
                }
                bool keep;
                double a = L.scalar ? sc->v[k] : s->v[k];
                double b = L.scalar ? s->v[k] : sc->v[k];
                double v = bin_apply(op, e->return_bool || out->scalar, a, b, &keep);
                if (bin_cmp(op) && !e->return_bool && !out->scalar && L.scalar) {
                    v = s->v[k]; /* a filtering comparison keeps the vector's value */
                }
                if (keep) {
                    o->v[k] = v;
                    o->cnt[k] = 1;
                }
            }
        }
        mat_free(&L);
        mat_free(&R);
        return rc;
    }
    if (e->group_side != 0) {
        return eval_group(ev, e, L, R, out);
    }
    /* vector with vector: one-to-one matching on the label set (or on / ignoring) */
    struct lbl l[128];
    struct smap rm = {0};
    struct series **rkeys = calloc(R.n + 1, sizeof(*rkeys));
    if (rkeys == NULL) {
        mat_free(&L);
        mat_free(&R);
        return -ENOMEM;
    }
    for (size_t i = 0; i < R.n && rc == 0; i++) {
        uint32_t nl = e->has_matching
                          ? project(R.s[i], e->match_labels, e->n_match_labels, e->on, l, 128)
                          : project(R.s[i], NULL, 0, false, l, 128);
        rkeys[i] = ev_series(ev, l, nl);
        if (rkeys[i] == NULL) {
            rc = -ENOMEM;
            break;
        }
        rkeys[i]->aux = (double *)R.s[i]; /* the matched series */
        if (smap_get(&rm, rkeys[i]->hash, rkeys[i]->key, rkeys[i]->keylen) == NULL &&
            smap_put(&rm, rkeys[i]) < 0) {
            rc = -ENOMEM;
        }
    }
    struct smap lm = {0};
    for (size_t i = 0; i < L.n && rc == 0; i++) {
        const struct series *s = L.s[i];
        uint32_t nl = e->has_matching
                          ? project(s, e->match_labels, e->n_match_labels, e->on, l, 128)
                          : project(s, NULL, 0, false, l, 128);
        ev->sb.n = 0;
        sb_labels_key(&ev->sb, l, nl);
        uint64_t h = logs_hash_bytes(ev->sb.p ? ev->sb.p : "", ev->sb.n);
        struct series *mk = smap_get(&rm, h, ev->sb.p ? ev->sb.p : "", ev->sb.n);
        const struct series *r = mk ? (const struct series *)mk->aux : NULL;
        /* result labels: the left side's (on(...) keeps only those for arithmetic) */
        const struct lbl *ol = s->l;
        uint32_t onl = s->nl;
        if (!setop && !bin_cmp(op) && e->has_matching) {
            ol = l;
            onl = nl;
        }
        struct series *o = ev_series(ev, ol, onl);
        if (o == NULL || mat_add(out, o) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (op == LOGQL_BIN_OR) {
            struct series *lk = ev_series(ev, l, nl);
            if (lk == NULL || smap_put(&lm, lk) < 0) {
                rc = -ENOMEM;
                break;
            }
            lk->aux = (double *)s;
        }
        for (size_t k = 0; k < K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            bool rp = r != NULL && r->cnt[k] != 0;
            if (op == LOGQL_BIN_AND || op == LOGQL_BIN_UNLESS || op == LOGQL_BIN_OR) {
                if ((op == LOGQL_BIN_AND && rp) || (op == LOGQL_BIN_UNLESS && !rp) ||
                    op == LOGQL_BIN_OR) {
                    o->v[k] = s->v[k];
                    o->cnt[k] = 1;
                }
                continue;
            }
            if (!rp) {
                continue;
            }
            bool keep;
            double v = bin_apply(op, e->return_bool, s->v[k], r->v[k], &keep);
            if (keep) {
                o->v[k] = v;
                o->cnt[k] = 1;
            }
        }
    }
    if (op == LOGQL_BIN_OR && rc == 0) {
        /* right-side points whose key the left side lacks at that step */
        for (size_t i = 0; i < R.n && rc == 0; i++) {
            const struct series *r = R.s[i];
            const struct series *lk =
                smap_get(&lm, rkeys[i]->hash, rkeys[i]->key, rkeys[i]->keylen);
            const struct series *ls = lk ? (const struct series *)lk->aux : NULL;
            struct series *o = ev_series(ev, r->l, r->nl);
            if (o == NULL || mat_add(out, o) < 0) {
                rc = -ENOMEM;
                break;
            }
            for (size_t k = 0; k < K; k++) {
                if (r->cnt[k] != 0 && (ls == NULL || ls->cnt[k] == 0)) {
                    o->v[k] = r->v[k];
                    o->cnt[k] = 1;
                }
            }
        }
    }
    logs_smap_free(&lm);
    logs_smap_free(&rm);
    free(rkeys);
    mat_free(&L);
    mat_free(&R);
    return rc;
}

/* A binary operator and the binary operators down its left operand, in a
 * loop: the parser builds left-deep trees for chains (1+1+...+1, up to
 * LOGQL_MAX_OPS), which recursion would follow one stack frame (and an
 * eval_binop frame of some KiB) per operator. Only right operands recurse,
 * and their depth is bounded by the parser's nesting limit. */
static int eval_chain(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    size_t n = 0;
    const struct logql_expr *x;
    for (x = e; x->kind == LOGQL_EXPR_BINARY; x = x->lhs) {
        n++;
    }
    const struct logql_expr **spine = malloc(n * sizeof(*spine));
    if (spine == NULL) {
        return -ENOMEM;
    }
    size_t i = n;
    for (x = e; x->kind == LOGQL_EXPR_BINARY; x = x->lhs) {
        spine[--i] = x; /* spine[0]: the innermost operator; x ends at its left operand */
    }
    struct mat acc = {0};
    int rc = eval_expr(ev, x, &acc);
    for (i = 0; i < n && rc == 0; i++) {
        struct mat R = {0}, o = {0};
        rc = qctx_tick(&ev->q->c); /* one operator can be 500 series x 11,000 points */
        if (rc == 0) {
            rc = eval_expr(ev, spine[i]->rhs, &R);
        }
        if (rc < 0) {
            mat_free(&R);
            break;
        }
        rc = eval_binop(ev, spine[i], acc, R, &o); /* frees acc and R */
        acc = o;
    }
    free(spine);
    if (rc < 0) {
        mat_free(&acc);
        return rc;
    }
    *out = acc;
    return 0;
}

#define LR_MAX_PAIRS 64

static int eval_expr(struct eval *ev, const struct logql_expr *e, struct mat *out)
{
    if (qctx_err(&ev->q->c)) {
        return qctx_err(&ev->q->c);
    }
    switch (e->kind) {
    case LOGQL_EXPR_RANGE:
        return eval_range(ev, e, NULL, out);
    case LOGQL_EXPR_VECTOR_AGG:
        return eval_vector_agg(ev, e, out);
    case LOGQL_EXPR_BINARY:
        return eval_chain(ev, e, out);
    case LOGQL_EXPR_NUMBER:
    case LOGQL_EXPR_VECTOR: {
        struct series *s = ev_series(ev, NULL, 0);
        if (s == NULL || mat_add(out, s) < 0) {
            return -ENOMEM;
        }
        for (size_t k = 0; k < ev->K; k++) {
            s->v[k] = e->value;
            s->cnt[k] = 1;
        }
        out->scalar = e->kind == LOGQL_EXPR_NUMBER;
        return 0;
    }
    case LOGQL_EXPR_LABEL_REPLACE: {
        struct mat in = {0};
        int rc = eval_expr(ev, e->inner, &in);
        if (rc < 0) {
            mat_free(&in);
            return rc;
        }
        for (size_t i = 0; i < in.n && rc == 0; i++) {
            struct series *s = in.s[i];
            const struct lbl *src = NULL;
            for (uint32_t j = 0; j < s->nl; j++) {
                if (s->l[j].nn == e->src.n && memcmp(s->l[j].n, e->src.s, e->src.n) == 0) {
                    src = &s->l[j];
                }
            }
            const char *sv = src ? src->v : "";
            size_t svn = src ? src->vn : 0;
            size_t ovec[2 * LR_MAX_PAIRS];
            unsigned pairs = qlex_re_capture_count(e->regex) + 1;
            pairs = pairs > LR_MAX_PAIRS ? LR_MAX_PAIRS : pairs;
            if (qlex_re_exec(e->regex, sv, svn, ovec, pairs) != 1) {
                rc = mat_add(out, s);
                continue;
            }
            size_t rn = logql_re_expand(e->regex, e->replacement.s, e->replacement.n, sv, ovec,
                                        pairs, NULL, 0);
            char *rv = arena_alloc(ev->q->a, rn + 1);
            if (rv == NULL) {
                rc = -ENOMEM;
                break;
            }
            logql_re_expand(e->regex, e->replacement.s, e->replacement.n, sv, ovec, pairs, rv,
                            rn + 1);
            struct lbl l[129];
            uint32_t nl = 0;
            for (uint32_t j = 0; j < s->nl && nl < 128; j++) {
                if (!(s->l[j].nn == e->dst.n && memcmp(s->l[j].n, e->dst.s, e->dst.n) == 0)) {
                    l[nl++] = s->l[j];
                }
            }
            if (rn > 0) {
                l[nl++] = (struct lbl){e->dst.s, rv, (uint32_t)e->dst.n, (uint32_t)rn, LC_PARSED};
            }
            qsort(l, nl, sizeof(l[0]), lbl_cmp);
            struct series *o = ev_series(ev, l, nl);
            if (o == NULL) {
                rc = -ENOMEM;
                break;
            }
            memcpy(o->v, s->v, ev->K * sizeof(double));
            memcpy(o->cnt, s->cnt, ev->K * sizeof(uint32_t));
            rc = mat_add(out, o);
        }
        mat_free(&in);
        return rc < 0 ? rc : qctx_tick(&ev->q->c); /* the regex's match limit */
    }
    case LOGQL_EXPR_LOG:
        break;
    }
    return -EINVAL;
}

/* Checks every log expression of a metric tree before scanning. */
int logs_check_tree(const struct logql_expr *e, bool instant, char *err, size_t errlen)
{
    if (e == NULL) {
        return 0;
    }
    switch (e->kind) {
    case LOGQL_EXPR_RANGE:
        return logs_check_log(&e->log, err, errlen);
    case LOGQL_EXPR_VECTOR_AGG:
    case LOGQL_EXPR_LABEL_REPLACE:
        if (e->kind == LOGQL_EXPR_VECTOR_AGG && e->agg_op == LOGQL_AGG_APPROX_TOPK && !instant) {
            /* Loki's count-min sketch behind approx_topk (its message) */
            snprintf(err, errlen, "count min sketches are only supported on instant queries");
            return -EINVAL;
        }
        return logs_check_tree(e->inner, instant, err, errlen);
    case LOGQL_EXPR_BINARY:
        for (; e->kind == LOGQL_EXPR_BINARY; e = e->lhs) { /* the left spine in a loop */
            if (logs_check_tree(e->rhs, instant, err, errlen) < 0) {
                return -EINVAL;
            }
        }
        return logs_check_tree(e, instant, err, errlen);
    case LOGQL_EXPR_LOG:
        return logs_check_log(&e->log, err, errlen);
    default:
        return 0;
    }
}

int logs_run_metric_query(struct logs_result *res)
{
    struct query *q = &res->q;
    struct eval ev = {.res = res, .q = q};
    if (q->rq.instant) {
        ev.K = 1;
        ev.start = q->rq.start_ns;
        ev.step = 1;
    } else {
        ev.step = q->rq.step_ns ? q->rq.step_ns : 1;
        ev.start = q->rq.start_ns;
        ev.K = (size_t)((q->rq.end_ns - q->rq.start_ns) / ev.step) + 1;
        if (ev.K > LOGS_MAX_POINTS) {
            qctx_fail(
                &q->c, -E2BIG,
                "exceeded maximum resolution of 11,000 points per time series. Try increasing "
                "the value of the step parameter");
            return -E2BIG;
        }
    }
    res->K = ev.K;
    res->start = ev.start;
    res->step = ev.step;
    struct mat m = {0};
    int rc = eval_expr(&ev, q->rq.expr, &m);
    sb_fini(&ev.sb);
    if (rc < 0 || qctx_err(&q->c)) {
        mat_free(&m);
        if (qctx_err(&q->c) == 0) {
            qctx_fail(&q->c, rc, rc == -ENOMEM ? "out of memory" : "query failed");
        }
        return qctx_err(&q->c);
    }
    /* drop series without any point; sort by label string */
    size_t w = 0;
    for (size_t i = 0; i < m.n; i++) {
        bool any = false;
        for (size_t k = 0; k < ev.K && !any; k++) {
            any = m.s[i]->cnt[k] != 0;
        }
        if (any) {
            m.s[w++] = m.s[i];
        }
    }
    m.n = w;
    if (m.n > LOGS_MAX_SERIES) {
        mat_free(&m);
        qctx_fail(&q->c, -E2BIG,
                  "maximum number of series (%d) reached for a single query; consider reducing "
                  "query cardinality by adding more filters",
                  LOGS_MAX_SERIES);
        return -E2BIG;
    }
    res->ser = m.s;
    res->n_ser = m.n;
    if (m.scalar) {
        res->kind = q->rq.instant ? RK_SCALAR : RK_MATRIX;
    } else {
        res->kind = q->rq.instant ? RK_VECTOR : RK_MATRIX;
    }
    return 0;
}
