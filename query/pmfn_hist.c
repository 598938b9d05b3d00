/*
 * pmfn_hist.c - histogram_quantile over classic buckets and native
 * histograms, and histogram_count / histogram_sum / histogram_fraction
 * (native only), as Prometheus 2.42's functions.go and quantile.go compute
 * them (pmfn_int.h).
 *
 * histogram_quantile groups the classic buckets of the whole input vector
 * by every label except le (the metric name included, as 2.42's
 * signature is; the output drops both, so two metrics with one label set
 * collide into the engine's duplicate-labelset error, as in Prometheus).
 * A native histogram whose labels equal a classic group's signature
 * cancels both. Output order: native results in input order, then the
 * classic groups in first-seen order (Prometheus's is its map order).
 */
#include "query/pmfn_int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

struct bucket {
    double upper, count;
};

static int cmp_bucket(const void *x, const void *y)
{
    double a = ((const struct bucket *)x)->upper, b = ((const struct bucket *)y)->upper;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* bucketQuantile, step by step (sort.Search reproduced exactly, so NaN
 * counts give Prometheus's answer too). Sorts and rewrites |b|. */
static double bucket_quantile(double q, struct bucket *b, size_t n)
{
    if (isnan(q)) {
        return NAN;
    }
    if (q < 0) {
        return -INFINITY;
    }
    if (q > 1) {
        return INFINITY;
    }
    qsort(b, n, sizeof *b, cmp_bucket);
    if (!(isinf(b[n - 1].upper) && b[n - 1].upper > 0)) {
        return NAN;
    }
    /* coalesce equal bounds */
    struct bucket last = b[0];
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (b[i].upper == last.upper) {
            last.count += b[i].count;
        } else {
            b[k++] = last;
            last = b[i];
        }
    }
    b[k++] = last;
    n = k;
    /* ensureMonotonic */
    double max = b[0].count;
    for (size_t i = 1; i < n; i++) {
        if (b[i].count > max) {
            max = b[i].count;
        } else if (b[i].count < max) {
            b[i].count = max;
        }
    }
    if (n < 2) {
        return NAN;
    }
    double obs = b[n - 1].count;
    if (obs == 0) {
        return NAN;
    }
    double rank = q * obs;
    /* sort.Search(n - 1, count >= rank) */
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t h = (lo + hi) >> 1;
        if (!(b[h].count >= rank)) {
            lo = h + 1;
        } else {
            hi = h;
        }
    }
    size_t i = lo;
    if (i == n - 1) {
        return b[n - 2].upper;
    }
    if (i == 0 && b[0].upper <= 0) {
        return b[0].upper;
    }
    double start = 0, end = b[i].upper, count = b[i].count;
    if (i > 0) {
        start = b[i - 1].upper;
        count -= b[i - 1].count;
        rank -= b[i - 1].count;
    }
    return start + (end - start) * (rank / count);
}

static bool is_le(const struct pm_label *l)
{
    return l->name_len == 2 && l->name[0] == 'l' && l->name[1] == 'e';
}

/* Hash of a label set leaving out le (__name__ stays). */
static uint64_t hash_without_le(const struct pm_labels *ls)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    static const unsigned char sep = 0xff;
    for (uint32_t i = 0; i < ls->n; i++) {
        if (is_le(&ls->v[i])) {
            continue;
        }
        XXH3_64bits_update(&st, ls->v[i].name, ls->v[i].name_len);
        XXH3_64bits_update(&st, &sep, 1);
        XXH3_64bits_update(&st, ls->v[i].value, ls->v[i].value_len);
        XXH3_64bits_update(&st, &sep, 1);
    }
    return XXH3_64bits_digest(&st);
}

static bool label_eq(const struct pm_label *a, const struct pm_label *b)
{
    return a->name_len == b->name_len && a->value_len == b->value_len &&
           memcmp(a->name, b->name, a->name_len) == 0 &&
           memcmp(a->value, b->value, a->value_len) == 0;
}

/* Whether a and b are equal once le is left out of both. */
static bool equal_without_le(const struct pm_labels *a, const struct pm_labels *b)
{
    uint32_t i = 0, j = 0;
    for (;;) {
        while (i < a->n && is_le(&a->v[i])) {
            i++;
        }
        while (j < b->n && is_le(&b->v[j])) {
            j++;
        }
        if (i == a->n || j == b->n) {
            return i == a->n && j == b->n;
        }
        if (!label_eq(&a->v[i], &b->v[j])) {
            return false;
        }
        i++;
        j++;
    }
}

/* Go's strconv.ParseFloat(s, 64) as far as le values go: decimal and hex
 * floats, Inf/Infinity/NaN in any case with an optional sign, '_'
 * separators only between digits of a based literal are not accepted here
 * (Go takes them only with a base prefix, which ParseFloat rejects for
 * decimals). */
static bool go_parse_float(const char *s, size_t n, double *out)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    const char *p = buf;
    bool neg = false;
    if (*p == '+' || *p == '-') {
        neg = *p == '-';
        p++;
    }
    if (strcasecmp(p, "inf") == 0 || strcasecmp(p, "infinity") == 0) {
        *out = neg ? -INFINITY : INFINITY;
        return true;
    }
    if (strcasecmp(p, "nan") == 0) {
        if (p != buf) {
            return false; /* Go rejects a signed NaN */
        }
        *out = NAN;
        return true;
    }
    /* digits, '.', exponent; hex needs a p exponent in Go */
    bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    for (const char *c = p; *c != '\0'; c++) {
        unsigned char ch = (unsigned char)*c;
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' ||
              ch == '-' ||
              (hex && (ch == 'x' || ch == 'X' || ch == 'p' || ch == 'P' ||
                       (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))))) {
            return false;
        }
    }
    if (hex && strpbrk(p, "pP") == NULL) {
        return false;
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end != buf + n || end == buf) {
        return false;
    }
    if (errno == ERANGE && isinf(v)) {
        return false; /* Go: out of range is an error (value ±Inf) */
    }
    *out = v;
    return true;
}

struct group {
    const struct pm_labels *key; /* the first sample's labels */
    uint64_t hash;
    struct bucket *b;
    size_t n, cap;
    bool dead; /* cancelled by a native histogram with the same labels */
};

static int group_push(arena *a, struct group *g, double upper, double count)
{
    if (g->n == g->cap) {
        size_t cap = g->cap != 0 ? g->cap * 2 : 16;
        struct bucket *b = (struct bucket *)arena_alloc(a, cap * sizeof *b);
        if (b == NULL) {
            return -ENOMEM;
        }
        if (g->n != 0) {
            memcpy(b, g->b, g->n * sizeof *b);
        }
        g->b = b;
        g->cap = cap;
    }
    g->b[g->n++] = (struct bucket){upper, count};
    return 0;
}

static int fn_histogram_quantile(struct pm_fnenv *env, double q, const struct pm_vec *vec,
                                 struct pm_vec *out)
{
    size_t n = vec != NULL ? vec->n : 0;
    if (n == 0) {
        return 0;
    }
    /* open addressing over the groups: slots hold group index + 1 */
    size_t nslots = 16;
    while (nslots < 2 * n) {
        nslots *= 2;
    }
    uint32_t *slots = (uint32_t *)arena_alloc(env->a, nslots * sizeof *slots);
    struct group *groups = (struct group *)arena_alloc(env->a, n * sizeof *groups);
    if (slots == NULL || groups == NULL) {
        return -ENOMEM;
    }
    memset(slots, 0, nslots * sizeof *slots);
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pm_velem *e = &vec->e[i];
        if (e->h != NULL) {
            continue;
        }
        uint32_t ll;
        const char *le = pm_labels_get(&e->labels, "le", 2, &ll);
        double upper;
        if (le == NULL || !go_parse_float(le, ll, &upper)) {
            continue; /* no or malformed le: skipped */
        }
        uint64_t h = hash_without_le(&e->labels);
        size_t s = (size_t)h & (nslots - 1);
        struct group *g = NULL;
        while (slots[s] != 0) {
            struct group *c = &groups[slots[s] - 1];
            if (c->hash == h && equal_without_le(c->key, &e->labels)) {
                g = c;
                break;
            }
            s = (s + 1) & (nslots - 1);
        }
        if (g == NULL) {
            g = &groups[ng];
            memset(g, 0, sizeof *g);
            g->key = &e->labels;
            g->hash = h;
            slots[s] = (uint32_t)++ng;
        }
        int rc = group_push(env->a, g, upper, e->v);
        if (rc < 0) {
            return rc;
        }
    }
    /* native histograms */
    for (size_t i = 0; i < n; i++) {
        const struct pm_velem *e = &vec->e[i];
        if (e->h == NULL) {
            continue;
        }
        uint64_t h = hash_without_le(&e->labels);
        bool clash = false;
        for (size_t s = (size_t)h & (nslots - 1); slots[s] != 0; s = (s + 1) & (nslots - 1)) {
            struct group *c = &groups[slots[s] - 1];
            /* Prometheus compares the full labels with the signature */
            if (!c->dead && c->hash == h && equal_without_le(c->key, &e->labels) &&
                pm_labels_get(&e->labels, "le", 2, &(uint32_t){0}) == NULL) {
                c->dead = true;
                clash = true;
                break;
            }
        }
        if (clash) {
            continue;
        }
        int rc = pmfn_emit_noname(env, out, &e->labels, pm_hist_quantile(q, e->h), NULL);
        if (rc < 0) {
            return rc;
        }
    }
    for (size_t gi = 0; gi < ng; gi++) {
        struct group *g = &groups[gi];
        if (g->dead) {
            continue;
        }
        struct pm_lb lb;
        pm_lb_init(&lb, env->a, g->key);
        pm_lb_del(&lb, "__name__", 8);
        pm_lb_del(&lb, "le", 2);
        struct pm_labels ls;
        int rc = pm_lb_done(&lb, &ls);
        if (rc == 0) {
            rc = pmfn_emit(env, out, &ls, bucket_quantile(q, g->b, g->n), NULL);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int pmfn_hist(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args, struct pm_vec *out)
{
    (void)n_args;
    enum promql_func_id id = env->call->func->id;
    if (id == PROMQL_FN_HISTOGRAM_QUANTILE) {
        return fn_histogram_quantile(env, args[0].scalar, args[1].vec, out);
    }
    const struct pm_vec *vec = id == PROMQL_FN_HISTOGRAM_FRACTION ? args[2].vec : args[0].vec;
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        const struct pm_velem *e = &vec->e[i];
        if (e->h == NULL) {
            continue; /* floats are skipped */
        }
        double v;
        if (id == PROMQL_FN_HISTOGRAM_COUNT) {
            v = e->h->count;
        } else if (id == PROMQL_FN_HISTOGRAM_SUM) {
            v = e->h->sum;
        } else {
            v = pm_hist_fraction(args[0].scalar, args[1].scalar, e->h);
        }
        int rc = pmfn_emit_noname(env, out, &e->labels, v, NULL);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
