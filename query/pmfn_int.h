/*
 * pmfn_int.h - private to the PromQL function library (pmfn.c dispatch,
 * math, date and label functions; pmfn_range.c the range-vector functions;
 * pmfn_hist.c histogram_quantile and the native-histogram functions;
 * pmhist.c the histogram arithmetic). Nothing outside these files
 * includes it.
 */
#ifndef MIRADB_PMFN_INT_H
#define MIRADB_PMFN_INT_H

#include <math.h>
#include <stdio.h>

#include "query/pmeval_int.h"

/* The value Prometheus 2.42 reads from an element: a histogram sample's
 * Point has V == 0, and every function that is not histogram-aware uses
 * that 0 (abs(h) == 0, count_over_time counts it, label_replace turns it
 * into a float 0). */
static inline double pmfn_val(const struct pm_velem *e)
{
    return e->h != NULL ? 0.0 : e->v;
}

/* |in| without __name__, sharing the label array when the name is first
 * or last (labels sort bytewise, so __name__ is usually first), else a
 * copy in the arena. 0 or -ENOMEM. */
static inline int pmfn_drop_name(arena *a, const struct pm_labels *in, struct pm_labels *out)
{
    if (in->n != 0 && in->v[0].name_len == 8 && memcmp(in->v[0].name, "__name__", 8) == 0) {
        out->v = in->n > 1 ? in->v + 1 : NULL;
        out->n = in->n - 1;
        return 0;
    }
    if (in->n != 0 && in->v[in->n - 1].name_len == 8 &&
        memcmp(in->v[in->n - 1].name, "__name__", 8) == 0) {
        out->v = in->n > 1 ? in->v : NULL;
        out->n = in->n - 1;
        return 0;
    }
    return pm_labels_drop_name(a, in, out);
}

/* Appends one output element at the step time. 0 or -ENOMEM. */
static inline int pmfn_emit(struct pm_fnenv *env, struct pm_vec *out, const struct pm_labels *ls,
                            double v, const struct pm_hist *h)
{
    struct pm_velem e = {.v = v, .h = h, .t = env->ts};
    if (ls != NULL) {
        e.labels = *ls;
    }
    return pm_vec_push(env->a, out, &e);
}

/* Same, with __name__ dropped from |ls|. */
static inline int pmfn_emit_noname(struct pm_fnenv *env, struct pm_vec *out,
                                   const struct pm_labels *ls, double v, const struct pm_hist *h)
{
    struct pm_labels d;
    int rc = pmfn_drop_name(env->a, ls, &d);
    return rc < 0 ? rc : pmfn_emit(env, out, &d, v, h);
}

/* Execution error: message into env->err, -EDOM. */
int pmfn_fail(struct pm_fnenv *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Neumaier-compensated running sum (Prometheus kahanSumInc). */
static inline void pmfn_kahan_inc(double inc, double *sum, double *c)
{
    double t = *sum + inc;
    if (fabs(*sum) >= fabs(inc)) {
        *c += (*sum - t) + inc;
    } else {
        *c += (inc - t) + *sum;
    }
    *sum = t;
}

/* The range-vector functions (pmfn_range.c): every *_over_time, rate,
 * increase, delta, irate, idelta, resets, changes, deriv, predict_linear,
 * holt_winters, absent_over_time. */
int pmfn_range(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args,
               struct pm_vec *out);

/* histogram_quantile, histogram_count, histogram_sum, histogram_fraction
 * (pmfn_hist.c). */
int pmfn_hist(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args, struct pm_vec *out);

/* pmhist.c: x converted to |schema| (<= both schemas) minus y, as
 * histogramRate computes last.CopyToSchema(minSchema).Sub(prev). */
struct pm_hist *pm_hist_sub_at(arena *a, const struct pm_hist *x, const struct pm_hist *y,
                               int32_t schema);

#endif
