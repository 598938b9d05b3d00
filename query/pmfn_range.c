/*
 * pmfn_range.c - the range-vector functions of the PromQL library
 * (pmfn_int.h): rate, increase, delta (with 2.42's extrapolation, the zero
 * clamp before the threshold test, and native-histogram windows), irate,
 * idelta, resets, changes, deriv, predict_linear, holt_winters and every
 * *_over_time, as Prometheus 2.42's functions.go computes them.
 *
 * One call gets every series' window at one step; each non-empty window
 * gives at most one element, labelled with its series' labels minus
 * __name__ (last_over_time keeps it). Histogram samples in a window are
 * read as 2.42 reads them outside rate/increase/delta: as the value 0
 * (count_over_time counts them, sum_over_time adds 0, last_over_time of a
 * histogram is 0). rate/increase/delta of a window that mixes floats and
 * histograms give nothing.
 */
#include "query/pmfn_int.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The window's points as floats: the float array itself, or (when the
 * window has histogram samples) a merge by time with histograms as 0. */
static int window_points(arena *a, const struct pm_win *w, const struct pm_fsample **pts, size_t *n)
{
    if (w->nh == 0) {
        *pts = w->f;
        *n = w->nf;
        return 0;
    }
    size_t total = w->nf + w->nh;
    struct pm_fsample *m = (struct pm_fsample *)arena_alloc(a, total * sizeof *m);
    if (m == NULL) {
        return -ENOMEM;
    }
    size_t i = 0, j = 0, k = 0;
    while (i < w->nf || j < w->nh) {
        if (j >= w->nh || (i < w->nf && w->f[i].t < w->h[j].t)) {
            m[k++] = w->f[i++];
        } else {
            m[k].t = w->h[j++].t;
            m[k++].v = 0;
        }
    }
    *pts = m;
    *n = total;
    return 0;
}

/* Go's time.Duration.Seconds() of a duration in ms. */
static double duration_seconds(int64_t ms)
{
    int64_t sec = ms / 1000, rem = ms % 1000;
    return (double)sec + (double)(rem * 1000000) / 1e9;
}

/* ---- rate, increase, delta ---- */

/* histogramRate: last - first at the smallest schema in the window
 * (counters: of every sample; delta: of the two ends), plus every
 * sample before a counter reset. NULL on -ENOMEM (*nomem) or when the
 * window is not all histograms. */
static struct pm_hist *histogram_rate(arena *a, const struct pm_win *w, bool counter, bool *nomem)
{
    *nomem = false;
    if (w->nf != 0) {
        return NULL; /* floats and histograms mixed */
    }
    const struct pm_hist *prev = w->h[0].h, *last = w->h[w->nh - 1].h;
    int32_t min_schema = prev->schema < last->schema ? prev->schema : last->schema;
    if (counter) {
        for (size_t i = 1; i + 1 < w->nh; i++) {
            if (w->h[i].h->schema < min_schema) {
                min_schema = w->h[i].h->schema;
            }
        }
    }
    struct pm_hist *h = pm_hist_sub_at(a, last, prev, min_schema);
    if (h == NULL) {
        *nomem = true;
        return NULL;
    }
    if (counter) {
        for (size_t i = 1; i < w->nh; i++) {
            const struct pm_hist *curr = w->h[i].h;
            if (pm_hist_is_reset(prev, curr)) {
                h = pm_hist_add(a, h, prev);
                if (h == NULL) {
                    *nomem = true;
                    return NULL;
                }
            }
            prev = curr;
        }
    }
    return h;
}

static int extrapolated_rate(struct pm_fnenv *env, const struct pm_win *w, bool counter,
                             bool is_rate, double *v, const struct pm_hist **hout, bool *ok)
{
    *ok = false;
    size_t n = w->nf + w->nh;
    if (n < 2) {
        return 0;
    }
    double result = 0;
    struct pm_hist *rh = NULL;
    int64_t t0, tn;
    double v0 = 0;
    bool first_hist = w->nh != 0 && (w->nf == 0 || w->h[0].t < w->f[0].t);
    if (first_hist) {
        bool nomem;
        rh = histogram_rate(env->a, w, counter, &nomem);
        if (rh == NULL) {
            return nomem ? -ENOMEM : 0;
        }
        t0 = w->h[0].t;
        tn = w->h[w->nh - 1].t;
    } else {
        if (w->nh != 0) {
            return 0; /* a histogram among the floats */
        }
        const struct pm_fsample *f = w->f;
        result = f[n - 1].v - f[0].v;
        if (counter && w->resets_known) {
            /* the same additions in the same order, from the engine's list */
            for (size_t k = 0; k < w->nrs; k++) {
                result += f[w->rs[k] - w->rs_base - 1].v;
            }
        } else {
            double prev = f[0].v;
            for (size_t i = 1; counter && i < n; i++) {
                if (f[i].v < prev) {
                    result += prev;
                }
                prev = f[i].v;
            }
        }
        t0 = f[0].t;
        tn = f[n - 1].t;
        v0 = f[0].v;
    }
    double to_start = (double)(t0 - env->range_start) / 1000;
    double to_end = (double)(env->range_end - tn) / 1000;
    double sampled = (double)(tn - t0) / 1000;
    double avg = sampled / (double)(n - 1);
    if (counter && result > 0 && v0 >= 0) {
        /* 2.42: the zero point clamps dStart before the threshold test */
        double to_zero = sampled * (v0 / result);
        if (to_zero < to_start) {
            to_start = to_zero;
        }
    }
    double threshold = avg * 1.1;
    double interval = sampled;
    interval += to_start < threshold ? to_start : avg / 2;
    interval += to_end < threshold ? to_end : avg / 2;
    double factor = interval / sampled;
    if (is_rate) {
        factor /= duration_seconds(env->range_end - env->range_start);
    }
    if (rh != NULL) {
        *hout = pm_hist_scale(env->a, rh, factor);
        if (*hout == NULL) {
            return -ENOMEM;
        }
        *v = 0;
    } else {
        *v = result * factor;
        *hout = NULL;
    }
    *ok = true;
    return 0;
}

/* ---- the float functions over one window's points ---- */

static bool instant_value(const struct pm_fsample *p, size_t n, bool is_rate, double *v)
{
    if (n < 2) {
        return false;
    }
    const struct pm_fsample *last = &p[n - 1], *prev = &p[n - 2];
    double r = is_rate && last->v < prev->v ? last->v : last->v - prev->v;
    int64_t dt = last->t - prev->t;
    if (dt == 0) {
        return false;
    }
    if (is_rate) {
        r /= (double)dt / 1000;
    }
    *v = r;
    return true;
}

/* linearRegression: Kahan-summed least squares, x in seconds from |at|. */
static void linear_regression(const struct pm_fsample *p, size_t n, int64_t at, double *slope,
                              double *intercept)
{
    double cnt = 0, sx = 0, cx = 0, sy = 0, cy = 0, sxy = 0, cxy = 0, sx2 = 0, cx2 = 0;
    double init_y = p[0].v;
    bool const_y = true;
    for (size_t i = 0; i < n; i++) {
        if (const_y && i > 0 && p[i].v != init_y) {
            const_y = false;
        }
        cnt += 1.0;
        double x = (double)(p[i].t - at) / 1e3;
        pmfn_kahan_inc(x, &sx, &cx);
        pmfn_kahan_inc(p[i].v, &sy, &cy);
        pmfn_kahan_inc(x * p[i].v, &sxy, &cxy);
        pmfn_kahan_inc(x * x, &sx2, &cx2);
    }
    if (const_y) {
        if (isinf(init_y)) {
            *slope = *intercept = NAN;
        } else {
            *slope = 0;
            *intercept = init_y;
        }
        return;
    }
    sx += cx;
    sy += cy;
    sxy += cxy;
    sx2 += cx2;
    double cov = sxy - sx * sy / cnt;
    double var = sx2 - sx * sx / cnt;
    *slope = cov / var;
    *intercept = sy / cnt - *slope * sx / cnt;
}

static double avg_over_time(const struct pm_fsample *p, size_t n)
{
    double mean = 0, count = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        double v = p[i].v;
        count++;
        if (isinf(mean)) {
            if (isinf(v) && (mean > 0) == (v > 0)) {
                continue;
            }
            if (!isinf(v) && !isnan(v)) {
                continue;
            }
        }
        pmfn_kahan_inc(v / count - mean / count, &mean, &c);
    }
    return isinf(mean) ? mean : mean + c;
}

static double sum_over_time(const struct pm_fsample *p, size_t n)
{
    double sum = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        pmfn_kahan_inc(p[i].v, &sum, &c);
    }
    return isinf(sum) ? sum : sum + c;
}

static double stdvar_over_time(const struct pm_fsample *p, size_t n)
{
    double count = 0, mean = 0, cmean = 0, aux = 0, caux = 0;
    for (size_t i = 0; i < n; i++) {
        count++;
        double delta = p[i].v - (mean + cmean);
        pmfn_kahan_inc(delta / count, &mean, &cmean);
        pmfn_kahan_inc(delta * (p[i].v - (mean + cmean)), &aux, &caux);
    }
    return (aux + caux) / count;
}

static double minmax_over_time(const struct pm_fsample *p, size_t n, bool max)
{
    double m = p[0].v;
    for (size_t i = 0; i < n; i++) {
        if ((max ? p[i].v > m : p[i].v < m) || isnan(m)) {
            m = p[i].v;
        }
    }
    return m;
}

static double holt_winters(const struct pm_fsample *p, size_t n, double sf, double tf)
{
    double s0 = 0, s1 = p[0].v, b = p[1].v - p[0].v;
    for (size_t i = 1; i < n; i++) {
        double x = sf * p[i].v;
        /* calcTrendValue(i - 1, ...) */
        if (i - 1 != 0) {
            b = tf * (s1 - s0) + (1 - tf) * b;
        }
        double y = (1 - sf) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    return s1;
}

/* Go's %f of a factor in holt_winters' message. */
static const char *go_f(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        return "NaN";
    }
    if (isinf(v)) {
        return v > 0 ? "+Inf" : "-Inf";
    }
    snprintf(buf, n, "%f", v);
    return buf;
}

static int matrix_index(const struct pm_fnarg *args, size_t n_args)
{
    for (size_t i = 0; i < n_args; i++) {
        if (args[i].type == PROMQL_TYPE_MATRIX) {
            return (int)i;
        }
    }
    return -1;
}

/* One window: the output value (and histogram), *ok when there is one. */
static int one_window(struct pm_fnenv *env, enum promql_func_id id, const struct pm_fnarg *args,
                      const struct pm_win *w, double *v, const struct pm_hist **h, bool *ok)
{
    *h = NULL;
    *ok = false;
    switch (id) {
    case PROMQL_FN_RATE:
        return extrapolated_rate(env, w, true, true, v, h, ok);
    case PROMQL_FN_INCREASE:
        return extrapolated_rate(env, w, true, false, v, h, ok);
    case PROMQL_FN_DELTA:
        return extrapolated_rate(env, w, false, false, v, h, ok);
    default:
        break;
    }
    const struct pm_fsample *p;
    size_t n;
    int rc = window_points(env->a, w, &p, &n);
    if (rc < 0) {
        return rc;
    }
    *ok = true;
    switch (id) {
    case PROMQL_FN_IRATE:
    case PROMQL_FN_IDELTA:
        *ok = instant_value(p, n, id == PROMQL_FN_IRATE, v);
        return 0;
    case PROMQL_FN_DERIV:
    case PROMQL_FN_PREDICT_LINEAR: {
        if (n < 2) {
            *ok = false;
            return 0;
        }
        double slope, icept;
        if (id == PROMQL_FN_DERIV) {
            linear_regression(p, n, p[0].t, &slope, &icept);
            *v = slope;
        } else {
            linear_regression(p, n, env->ts, &slope, &icept);
            *v = slope * args[1].scalar + icept;
        }
        return 0;
    }
    case PROMQL_FN_HOLT_WINTERS: {
        double sf = args[1].scalar, tf = args[2].scalar;
        char b1[64];
        if (sf <= 0 || sf >= 1) {
            return pmfn_fail(env, "invalid smoothing factor. Expected: 0 < sf < 1, got: %s",
                             go_f(sf, b1, sizeof b1));
        }
        if (tf <= 0 || tf >= 1) {
            return pmfn_fail(env, "invalid trend factor. Expected: 0 < tf < 1, got: %s",
                             go_f(tf, b1, sizeof b1));
        }
        if (n < 2) {
            *ok = false;
            return 0;
        }
        *v = holt_winters(p, n, sf, tf);
        return 0;
    }
    case PROMQL_FN_RESETS:
    case PROMQL_FN_CHANGES: {
        int count = 0;
        double prev = p[0].v;
        for (size_t i = 1; i < n; i++) {
            double cur = p[i].v;
            if (id == PROMQL_FN_RESETS ? cur < prev : cur != prev && !(isnan(cur) && isnan(prev))) {
                count++;
            }
            prev = cur;
        }
        *v = count;
        return 0;
    }
    case PROMQL_FN_AVG_OVER_TIME:
        *v = avg_over_time(p, n);
        return 0;
    case PROMQL_FN_COUNT_OVER_TIME:
        *v = (double)n;
        return 0;
    case PROMQL_FN_LAST_OVER_TIME:
        *v = p[n - 1].v;
        return 0;
    case PROMQL_FN_MAX_OVER_TIME:
    case PROMQL_FN_MIN_OVER_TIME:
        *v = minmax_over_time(p, n, id == PROMQL_FN_MAX_OVER_TIME);
        return 0;
    case PROMQL_FN_SUM_OVER_TIME:
        *v = sum_over_time(p, n);
        return 0;
    case PROMQL_FN_STDDEV_OVER_TIME:
        *v = sqrt(stdvar_over_time(p, n));
        return 0;
    case PROMQL_FN_STDVAR_OVER_TIME:
        *v = stdvar_over_time(p, n);
        return 0;
    case PROMQL_FN_PRESENT_OVER_TIME:
        *v = 1;
        return 0;
    case PROMQL_FN_QUANTILE_OVER_TIME: {
        double small[128];
        double *vals = n <= 128 ? small : (double *)arena_alloc(env->a, n * sizeof *vals);
        if (vals == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            vals[i] = p[i].v;
        }
        *v = pmfn_quantile(args[0].scalar, vals, n);
        return 0;
    }
    default:
        *ok = false;
        return pmfn_fail(env, "unsupported function %s", env->call->func->name);
    }
}

int pmfn_range(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args, struct pm_vec *out)
{
    enum promql_func_id id = env->call->func->id;
    int mi = matrix_index(args, n_args);
    if (mi < 0) {
        return pmfn_fail(env, "unsupported function %s", env->call->func->name);
    }
    const struct pm_fnarg *m = &args[mi];
    for (size_t i = 0; i < m->nwin; i++) {
        const struct pm_win *w = &m->win[i];
        if (w->nf + w->nh == 0) {
            continue;
        }
        double v = 0;
        const struct pm_hist *h = NULL;
        bool ok;
        int rc = one_window(env, id, args, w, &v, &h, &ok);
        if (rc == 0 && ok) {
            rc = id == PROMQL_FN_LAST_OVER_TIME ? pmfn_emit(env, out, &w->labels, v, NULL)
                                                : pmfn_emit_noname(env, out, &w->labels, v, h);
            if (rc == 0) {
                out->e[out->n - 1].src1 = (uint32_t)i + 1;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}
