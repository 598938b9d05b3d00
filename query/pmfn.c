/*
 * pmfn.c - the PromQL function library's entry point (pmeval_int.h):
 * pmfn_call dispatches on the function, and this file holds the
 * instant-vector and scalar functions (math, clamp, round, the date
 * functions, timestamp, sort, label_replace, label_join, absent, scalar,
 * vector, time, pi). Range-vector functions are in pmfn_range.c, the
 * histogram functions in pmfn_hist.c.
 *
 * Every answer follows Prometheus 2.42's promql/functions.go, operation
 * for operation where the floating-point result depends on the order.
 * Where 2.42 calls Go's math package, we call libm, except where Go's
 * function is not the correctly rounded one and the difference shows
 * (log2, log10: Go computes log(x) * (1/ln 10), so log10(1000) is
 * 2.9999999999999996); the trigonometric and hyperbolic functions and exp
 * may still differ from Go's in the last bit for some arguments.
 */
#include "query/pmfn_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/qlex.h"

int pmfn_fail(struct pm_fnenv *env, const char *fmt, ...)
{
    if (env->err != NULL && env->errlen != 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(env->err, env->errlen, fmt, ap);
        va_end(ap);
    }
    return -EDOM;
}

/* ---- Go math semantics ---- */

static double go_max(double x, double y)
{
    if (isinf(x) && x > 0) {
        return x;
    }
    if (isinf(y) && y > 0) {
        return y;
    }
    if (isnan(x) || isnan(y)) {
        return NAN;
    }
    if (x == 0 && x == y) {
        return signbit(x) ? y : x;
    }
    return x > y ? x : y;
}

static double go_min(double x, double y)
{
    if (isinf(x) && x < 0) {
        return x;
    }
    if (isinf(y) && y < 0) {
        return y;
    }
    if (isnan(x) || isnan(y)) {
        return NAN;
    }
    if (x == 0 && x == y) {
        return signbit(x) ? x : y;
    }
    return x < y ? x : y;
}

/* Go's math.Log2: exact for powers of two, else log(frac)/ln2 + exp. */
static double go_log2(double x)
{
    int e;
    double frac = frexp(x, &e);
    if (frac == 0.5) {
        return (double)(e - 1);
    }
    return log(frac) * M_LOG2E + (double)e;
}

static double go_log10(double x)
{
    return log(x) * M_LOG10E;
}

static double fn_sgn(double v)
{
    if (v < 0) {
        return -1;
    }
    if (v > 0) {
        return 1;
    }
    return v;
}

static double fn_rad(double v)
{
    return v * M_PI / 180;
}

static double fn_deg(double v)
{
    return v * 180 / M_PI;
}

typedef double (*unary_fn)(double);

static unary_fn unary_for(enum promql_func_id id)
{
    switch (id) {
    case PROMQL_FN_ABS:
        return fabs;
    case PROMQL_FN_CEIL:
        return ceil;
    case PROMQL_FN_FLOOR:
        return floor;
    case PROMQL_FN_EXP:
        return exp;
    case PROMQL_FN_SQRT:
        return sqrt;
    case PROMQL_FN_LN:
        return log;
    case PROMQL_FN_LOG2:
        return go_log2;
    case PROMQL_FN_LOG10:
        return go_log10;
    case PROMQL_FN_SIN:
        return sin;
    case PROMQL_FN_COS:
        return cos;
    case PROMQL_FN_TAN:
        return tan;
    case PROMQL_FN_ASIN:
        return asin;
    case PROMQL_FN_ACOS:
        return acos;
    case PROMQL_FN_ATAN:
        return atan;
    case PROMQL_FN_SINH:
        return sinh;
    case PROMQL_FN_COSH:
        return cosh;
    case PROMQL_FN_TANH:
        return tanh;
    case PROMQL_FN_ASINH:
        return asinh;
    case PROMQL_FN_ACOSH:
        return acosh;
    case PROMQL_FN_ATANH:
        return atanh;
    case PROMQL_FN_RAD:
        return fn_rad;
    case PROMQL_FN_DEG:
        return fn_deg;
    case PROMQL_FN_SGN:
        return fn_sgn;
    default:
        return NULL;
    }
}

static int simple(struct pm_fnenv *env, const struct pm_vec *vec, unary_fn f, struct pm_vec *out)
{
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        int rc = pmfn_emit_noname(env, out, &vec->e[i].labels, f(pmfn_val(&vec->e[i])), NULL);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int fn_clamp(struct pm_fnenv *env, const struct pm_fnarg *args, enum promql_func_id id,
                    struct pm_vec *out)
{
    const struct pm_vec *vec = args[0].vec;
    double lo = -INFINITY, hi = INFINITY;
    if (id == PROMQL_FN_CLAMP) {
        lo = args[1].scalar;
        hi = args[2].scalar;
        if (hi < lo) {
            return 0;
        }
    }
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        double v = pmfn_val(&vec->e[i]);
        if (id == PROMQL_FN_CLAMP) {
            v = go_max(lo, go_min(hi, v));
        } else if (id == PROMQL_FN_CLAMP_MAX) {
            v = go_min(args[1].scalar, v);
        } else {
            v = go_max(args[1].scalar, v);
        }
        int rc = pmfn_emit_noname(env, out, &vec->e[i].labels, v, NULL);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int fn_round(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args,
                    struct pm_vec *out)
{
    const struct pm_vec *vec = args[0].vec;
    double to_nearest = n_args >= 2 ? args[1].scalar : 1;
    /* inverted, as Prometheus does ("fewer floating point accuracy issues") */
    double inv = 1.0 / to_nearest;
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        double v = floor(pmfn_val(&vec->e[i]) * inv + 0.5) / inv;
        int rc = pmfn_emit_noname(env, out, &vec->e[i].labels, v, NULL);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- date functions: Go's time package on UTC ---- */

/* Go's float64 -> int64 conversion on amd64 (CVTTSD2SQ): truncation, and
 * the "integer indefinite" INT64_MIN for NaN and out-of-range values. */
static int64_t go_f2i(double v)
{
    if (isnan(v) || v >= 9223372036854775808.0 || v < -9223372036854775808.0) {
        return INT64_MIN;
    }
    return (int64_t)v;
}

struct go_date {
    int64_t year;
    int month, day, yday, hour, minute, wday;
};

static bool go_is_leap(int64_t y)
{
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

/* time.Unix(sec, 0).UTC() broken down as Go's absDate does it: seconds
 * moved to Go's "absolute" epoch with wrapping int64 arithmetic, then
 * 400/100/4/1-year cycles on the unsigned value, so every int64 gives
 * Go's answer. */
static void go_date(int64_t sec, struct go_date *d)
{
    const int64_t seconds_per_day = 86400;
    const uint64_t days400 = 365 * 400 + 97, days100 = 365 * 100 + 24, days4 = 365 * 4 + 1;
    const int64_t absolute_zero_year = -292277022399LL;
    /* unixToInternal + internalToAbsolute, as Go's constants */
    const int64_t unix_to_internal =
        (int64_t)(1969 * 365 + 1969 / 4 - 1969 / 100 + 1969 / 400) * seconds_per_day;
    /* (absoluteZeroYear - 1) * 365.2425 days, exact: 292277022400 is a
     * multiple of 400, so * 3652425 / 10000 leaves no remainder */
    const int64_t absolute_to_internal = -(292277022400LL * 3652425LL / 10000LL) * seconds_per_day;
    uint64_t abs = (uint64_t)sec + (uint64_t)unix_to_internal + (uint64_t)(-absolute_to_internal);

    uint64_t days = abs / (uint64_t)seconds_per_day;
    d->wday = (int)(((abs + 86400ULL) % (7ULL * 86400ULL)) / 86400ULL); /* Monday = 1 */
    uint64_t sod = abs % (uint64_t)seconds_per_day;
    d->hour = (int)(sod / 3600);
    d->minute = (int)((sod % 3600) / 60);

    uint64_t n = days / days400;
    uint64_t y = 400 * n;
    days -= days400 * n;
    n = days / days100;
    n -= n >> 2;
    y += 100 * n;
    days -= days100 * n;
    n = days / days4;
    y += 4 * n;
    days -= days4 * n;
    n = days / 365;
    n -= n >> 2;
    y += n;
    days -= 365 * n;

    d->year = (int64_t)y + absolute_zero_year;
    d->yday = (int)days; /* 0-based */
    int day = d->yday;
    if (go_is_leap(d->year)) {
        if (day > 31 + 29 - 1) {
            day--;
        } else if (day == 31 + 29 - 1) {
            d->month = 2;
            d->day = 29;
            return;
        }
    }
    static const int before[13] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365};
    int m = day / 31;
    int end = before[m + 1], begin;
    if (day >= end) {
        m++;
        begin = end;
    } else {
        begin = before[m];
    }
    d->month = m + 1;
    d->day = day - begin + 1;
}

static double date_value(enum promql_func_id id, int64_t sec)
{
    struct go_date d;
    go_date(sec, &d);
    switch (id) {
    case PROMQL_FN_DAY_OF_MONTH:
        return d.day;
    case PROMQL_FN_DAY_OF_WEEK:
        return d.wday;
    case PROMQL_FN_DAY_OF_YEAR:
        return d.yday + 1;
    case PROMQL_FN_DAYS_IN_MONTH: {
        static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        return d.month == 2 && go_is_leap(d.year) ? 29 : dim[d.month - 1];
    }
    case PROMQL_FN_HOUR:
        return d.hour;
    case PROMQL_FN_MINUTE:
        return d.minute;
    case PROMQL_FN_MONTH:
        return d.month;
    default: /* YEAR */
        return (double)d.year;
    }
}

static int fn_date(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args,
                   enum promql_func_id id, struct pm_vec *out)
{
    if (n_args == 0) {
        return pmfn_emit(env, out, NULL, date_value(id, env->ts / 1000), NULL);
    }
    const struct pm_vec *vec = args[0].vec;
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        double v = date_value(id, go_f2i(pmfn_val(&vec->e[i])));
        int rc = pmfn_emit_noname(env, out, &vec->e[i].labels, v, NULL);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- label_replace, label_join ---- */

/* model.LabelNameRE: ^[a-zA-Z_][a-zA-Z0-9_]*$ */
static bool valid_label_name(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return false;
        }
    }
    return true;
}

static bool tmpl_name_char(unsigned char c)
{
    /* Go's extract takes letters, digits and '_' (Unicode); we take the
     * ASCII ones and any non-ASCII byte as part of a name */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c >= 0x80;
}

struct buf {
    char *p;
    size_t n, cap;
    arena *a;
    int err;
};

static void buf_put(struct buf *b, const char *s, size_t n)
{
    if (b->err != 0 || n == 0) {
        return;
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap != 0 ? b->cap * 2 : 64;
        while (cap < b->n + n) {
            cap *= 2;
        }
        char *p = (char *)arena_alloc(b->a, cap);
        if (p == NULL) {
            b->err = -ENOMEM;
            return;
        }
        if (b->n != 0) {
            memcpy(p, b->p, b->n);
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Go's Regexp.ExpandString: $$, $n, ${n}, $name, ${name}; a malformed
 * reference is copied as text; a group that did not take part (or does
 * not exist) expands to nothing. */
static void expand(struct buf *b, const qlex_re *re, const char *tmpl, size_t tn, const char *src,
                   const size_t *ovec, unsigned pairs)
{
    size_t i = 0;
    while (i < tn) {
        const char *dollar = memchr(tmpl + i, '$', tn - i);
        if (dollar == NULL) {
            break;
        }
        size_t d = (size_t)(dollar - tmpl);
        buf_put(b, tmpl + i, d - i);
        i = d + 1;
        if (i < tn && tmpl[i] == '$') {
            buf_put(b, "$", 1);
            i++;
            continue;
        }
        /* extract */
        size_t j = i;
        bool brace = false;
        if (j < tn && tmpl[j] == '{') {
            brace = true;
            j++;
        }
        size_t ns = j;
        while (j < tn && tmpl_name_char((unsigned char)tmpl[j])) {
            j++;
        }
        size_t nl = j - ns;
        bool ok = nl != 0;
        if (ok && brace) {
            if (j >= tn || tmpl[j] != '}') {
                ok = false;
            } else {
                j++;
            }
        }
        if (!ok) {
            buf_put(b, "$", 1);
            continue;
        }
        const char *name = tmpl + ns;
        long num = 0;
        for (size_t k = 0; k < nl; k++) {
            if (name[k] < '0' || name[k] > '9' || num >= 100000000) {
                num = -1;
                break;
            }
            num = num * 10 + (name[k] - '0');
        }
        if (name[0] == '0' && nl > 1) {
            num = -1;
        }
        i = j;
        long g = -1;
        if (num >= 0) {
            g = num;
        } else {
            unsigned nn = qlex_re_named_groups(re);
            for (unsigned k = 0; k < nn; k++) {
                const char *gn;
                unsigned gi;
                if (qlex_re_group_name(re, k, &gn, &gi) == 0 && strlen(gn) == nl &&
                    memcmp(gn, name, nl) == 0 && gi < pairs && ovec[2 * gi] != SIZE_MAX) {
                    g = gi;
                    break;
                }
            }
        }
        if (g >= 0 && (unsigned long)g < pairs && ovec[2 * g] != SIZE_MAX) {
            buf_put(b, src + ovec[2 * g], ovec[2 * g + 1] - ovec[2 * g]);
        }
    }
    if (i < tn) {
        buf_put(b, tmpl + i, tn - i);
    }
}

#define MAX_GROUPS 64

/* label_replace runs at every step of a range query: each thread keeps
 * its last compiled regex (keyed by the pattern text, in its own arena)
 * instead of compiling and JIT-compiling it again. Freed when the pattern
 * changes and at thread exit. */
struct re_cache {
    arena *a;
    struct qlex lx;
    char *pat;
    size_t n;
    qlex_re *re;
    char err[256];
};

static pthread_key_t re_key;
static pthread_once_t re_once = PTHREAD_ONCE_INIT;

static void re_cache_free(void *p)
{
    struct re_cache *c = p;
    if (c != NULL) {
        qlex_re_free_all(c->lx.res);
        arena_free(c->a);
        free(c);
    }
}

static void re_key_init(void)
{
    (void)pthread_key_create(&re_key, re_cache_free);
}

/* The compiled ^(?:pat)$ (pat of n bytes): 0 and *out, -EINVAL for a bad
 * regex, -ENOMEM. */
static int re_get(const char *pat, size_t n, const qlex_re **out)
{
    pthread_once(&re_once, re_key_init);
    struct re_cache *c = pthread_getspecific(re_key);
    if (c != NULL && c->n == n && memcmp(c->pat, pat, n) == 0) {
        *out = c->re;
        return 0;
    }
    re_cache_free(c);
    (void)pthread_setspecific(re_key, NULL);
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return -ENOMEM;
    }
    c->a = arena_new(0);
    c->pat = c->a != NULL ? arena_alloc(c->a, n + 1) : NULL;
    if (c->pat == NULL) {
        re_cache_free(c);
        return -ENOMEM;
    }
    memcpy(c->pat, pat, n);
    c->n = n;
    qlex_init(&c->lx, QLEX_LOGQL, pat, n, c->a, c->err, sizeof c->err);
    int rc = qlex_re_compile(&c->lx, 0, pat, n, false, &c->re);
    if (rc < 0) {
        re_cache_free(c);
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    (void)pthread_setspecific(re_key, c);
    *out = c->re;
    return 0;
}

static int fn_label_replace(struct pm_fnenv *env, const struct pm_fnarg *args, struct pm_vec *out)
{
    const struct pm_vec *vec = args[0].vec;
    struct promql_str dst = args[1].str, repl = args[2].str, src = args[3].str, rs = args[4].str;
    char *pat = (char *)arena_alloc(env->a, rs.n + 7);
    if (pat == NULL) {
        return -ENOMEM;
    }
    memcpy(pat, "^(?:", 4);
    memcpy(pat + 4, rs.s, rs.n);
    memcpy(pat + 4 + rs.n, ")$", 3);
    const qlex_re *re = NULL;
    int rc = re_get(pat, rs.n + 6, &re);
    if (rc == -ENOMEM) {
        return rc;
    }
    if (rc < 0) {
        return pmfn_fail(env, "invalid regular expression in label_replace(): %.*s", (int)rs.n,
                         rs.s);
    }
    if (!valid_label_name(dst.s, dst.n)) {
        return pmfn_fail(env, "invalid destination label name in label_replace(): %.*s", (int)dst.n,
                         dst.s);
    }
    unsigned pairs = qlex_re_capture_count(re) + 1;
    if (pairs > MAX_GROUPS) {
        pairs = MAX_GROUPS;
    }
    size_t ovec[2 * MAX_GROUPS];
    rc = 0;
    for (size_t i = 0; vec != NULL && i < vec->n && rc == 0; i++) {
        const struct pm_velem *e = &vec->e[i];
        uint32_t sl;
        const char *sv = pm_labels_get(&e->labels, src.s, src.n, &sl);
        if (sv == NULL) {
            sv = "";
        }
        int m = qlex_re_exec(re, sv, sl, ovec, pairs);
        if (m < 0 && m != -E2BIG) {
            rc = m == -ENOMEM ? m : 0;
        }
        if (m != 1) {
            /* no match (a regex past its match limit counts as none) */
            rc = rc < 0 ? rc : pmfn_emit(env, out, &e->labels, pmfn_val(e), NULL);
            continue;
        }
        struct buf b = {.a = env->a};
        expand(&b, re, repl.s, repl.n, sv, ovec, pairs);
        if (b.err != 0) {
            rc = b.err;
            break;
        }
        struct pm_lb lb;
        pm_lb_init(&lb, env->a, &e->labels);
        pm_lb_del(&lb, dst.s, dst.n);
        if (b.n != 0) {
            pm_lb_set(&lb, dst.s, dst.n, b.p, b.n);
        }
        struct pm_labels ls;
        rc = pm_lb_done(&lb, &ls);
        if (rc == 0) {
            rc = pmfn_emit(env, out, &ls, pmfn_val(e), NULL);
        }
    }
    return rc;
}

static int fn_label_join(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args,
                         struct pm_vec *out)
{
    const struct pm_vec *vec = args[0].vec;
    struct promql_str dst = args[1].str, sep = args[2].str;
    for (size_t k = 3; k < n_args; k++) {
        if (!valid_label_name(args[k].str.s, args[k].str.n)) {
            return pmfn_fail(env, "invalid source label name in label_join(): %.*s",
                             (int)args[k].str.n, args[k].str.s);
        }
    }
    if (!valid_label_name(dst.s, dst.n)) {
        return pmfn_fail(env, "invalid destination label name in label_join(): %.*s", (int)dst.n,
                         dst.s);
    }
    for (size_t i = 0; vec != NULL && i < vec->n; i++) {
        const struct pm_velem *e = &vec->e[i];
        struct buf b = {.a = env->a};
        for (size_t k = 3; k < n_args; k++) {
            if (k > 3) {
                buf_put(&b, sep.s, sep.n);
            }
            uint32_t vl;
            const char *v = pm_labels_get(&e->labels, args[k].str.s, args[k].str.n, &vl);
            if (v != NULL) {
                buf_put(&b, v, vl);
            }
        }
        if (b.err != 0) {
            return b.err;
        }
        struct pm_lb lb;
        pm_lb_init(&lb, env->a, &e->labels);
        if (b.n == 0) {
            pm_lb_del(&lb, dst.s, dst.n);
        } else {
            pm_lb_set(&lb, dst.s, dst.n, b.p, b.n);
        }
        struct pm_labels ls;
        int rc = pm_lb_done(&lb, &ls);
        if (rc == 0) {
            rc = pmfn_emit(env, out, &ls, pmfn_val(e), NULL);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- absent ---- */

/* The labels absent() reports: each '=' matcher's label, except __name__,
 * a label another matcher also names (the first '=' sets it, any later
 * matcher of that name deletes it), and empty values (createLabelsFor-
 * AbsentFunction with labels.Builder). */
static int absent_labels(struct pm_fnenv *env, struct pm_labels *out)
{
    const struct promql_expr *e = env->call->n_args != 0 ? env->call->args[0] : NULL;
    while (e != NULL && e->kind == PROMQL_PAREN) {
        e = e->inner;
    }
    if (e != NULL && e->kind == PROMQL_MATRIX) {
        e = e->inner;
    }
    out->v = NULL;
    out->n = 0;
    if (e == NULL || e->kind != PROMQL_VECTOR) {
        return 0;
    }
    const struct promql_sel *sel = &e->sel;
    struct pm_lb lb;
    pm_lb_init(&lb, env->a, NULL);
    bool *set = (bool *)arena_alloc(env->a, sel->n_matchers + 1);
    if (set == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < sel->n_matchers; i++) {
        const struct promql_matcher *m = &sel->matchers[i];
        set[i] = false;
        if (m->name.n == 8 && memcmp(m->name.s, "__name__", 8) == 0) {
            continue;
        }
        bool has = false;
        for (size_t j = 0; j < i && !has; j++) {
            has = set[j] && sel->matchers[j].name.n == m->name.n &&
                  memcmp(sel->matchers[j].name.s, m->name.s, m->name.n) == 0;
        }
        if (m->op == PROMQL_MATCH_EQ && !has) {
            pm_lb_set(&lb, m->name.s, m->name.n, m->value.s, m->value.n);
            set[i] = true;
        } else {
            pm_lb_del(&lb, m->name.s, m->name.n);
        }
    }
    return pm_lb_done(&lb, out);
}

static int fn_absent(struct pm_fnenv *env, const struct pm_fnarg *args, struct pm_vec *out)
{
    if (args[0].type == PROMQL_TYPE_MATRIX) {
        for (size_t i = 0; i < args[0].nwin; i++) {
            if (args[0].win[i].nf + args[0].win[i].nh != 0) {
                return 0;
            }
        }
    } else if (args[0].vec != NULL && args[0].vec->n != 0) {
        return 0;
    }
    struct pm_labels ls;
    int rc = absent_labels(env, &ls);
    return rc < 0 ? rc : pmfn_emit(env, out, &ls, 1, NULL);
}

/* ---- quantile (shared with quantile_over_time) ---- */

static int cmp_nan_first(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    if (isnan(a) || isnan(b)) {
        return isnan(a) ? (isnan(b) ? 0 : -1) : 1;
    }
    return a < b ? -1 : a > b ? 1 : 0;
}

double pmfn_quantile(double q, double *v, size_t n)
{
    if (n == 0 || isnan(q)) {
        return NAN;
    }
    if (q < 0) {
        return -INFINITY;
    }
    if (q > 1) {
        return INFINITY;
    }
    qsort(v, n, sizeof *v, cmp_nan_first);
    double nn = (double)n;
    double rank = q * (nn - 1);
    double lo = go_max(0, floor(rank));
    double up = go_min(nn - 1, lo + 1);
    double weight = rank - floor(rank);
    return v[(size_t)lo] * (1 - weight) + v[(size_t)up] * weight;
}

/* ---- dispatch ---- */

int pmfn_call(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args, struct pm_vec *out)
{
    enum promql_func_id id = env->call->func->id;
    unary_fn f = unary_for(id);
    if (f != NULL) {
        return simple(env, args[0].vec, f, out);
    }
    switch (id) {
    case PROMQL_FN_CLAMP:
    case PROMQL_FN_CLAMP_MAX:
    case PROMQL_FN_CLAMP_MIN:
        return fn_clamp(env, args, id, out);
    case PROMQL_FN_ROUND:
        return fn_round(env, args, n_args, out);
    case PROMQL_FN_DAY_OF_MONTH:
    case PROMQL_FN_DAY_OF_WEEK:
    case PROMQL_FN_DAY_OF_YEAR:
    case PROMQL_FN_DAYS_IN_MONTH:
    case PROMQL_FN_HOUR:
    case PROMQL_FN_MINUTE:
    case PROMQL_FN_MONTH:
    case PROMQL_FN_YEAR:
        return fn_date(env, args, n_args, id, out);
    case PROMQL_FN_LABEL_REPLACE:
        return fn_label_replace(env, args, out);
    case PROMQL_FN_LABEL_JOIN:
        return fn_label_join(env, args, n_args, out);
    case PROMQL_FN_ABSENT:
    case PROMQL_FN_ABSENT_OVER_TIME:
        return fn_absent(env, args, out);
    case PROMQL_FN_SCALAR: {
        const struct pm_vec *vec = args[0].vec;
        double v = vec != NULL && vec->n == 1 ? pmfn_val(&vec->e[0]) : NAN;
        return pmfn_emit(env, out, NULL, v, NULL);
    }
    case PROMQL_FN_VECTOR:
        return pmfn_emit(env, out, NULL, args[0].scalar, NULL);
    case PROMQL_FN_TIME:
        return pmfn_emit(env, out, NULL, (double)env->ts / 1000, NULL);
    case PROMQL_FN_PI:
        return pmfn_emit(env, out, NULL, M_PI, NULL);
    case PROMQL_FN_TIMESTAMP: {
        const struct pm_vec *vec = args[0].vec;
        for (size_t i = 0; vec != NULL && i < vec->n; i++) {
            int rc =
                pmfn_emit_noname(env, out, &vec->e[i].labels, (double)vec->e[i].t / 1000, NULL);
            if (rc < 0) {
                return rc;
            }
        }
        return 0;
    }
    case PROMQL_FN_SORT:
    case PROMQL_FN_SORT_DESC: {
        /* the engine orders; the elements pass through whole (histograms too) */
        const struct pm_vec *vec = args[0].vec;
        for (size_t i = 0; vec != NULL && i < vec->n; i++) {
            struct pm_velem e = vec->e[i];
            e.t = env->ts;
            int rc = pm_vec_push(env->a, out, &e);
            if (rc < 0) {
                return rc;
            }
        }
        return 0;
    }
    case PROMQL_FN_HISTOGRAM_COUNT:
    case PROMQL_FN_HISTOGRAM_SUM:
    case PROMQL_FN_HISTOGRAM_FRACTION:
    case PROMQL_FN_HISTOGRAM_QUANTILE:
        return pmfn_hist(env, args, n_args, out);
    default:
        return pmfn_range(env, args, n_args, out);
    }
}
