/*
 * pmeval_int.h - the evaluator's private header: the per-step values the
 * engine (pmeval.c: selectors, steps, subqueries, aggregations, binary
 * operators) hands to the function library (pmfn.c: every PromQL function,
 * the native-histogram arithmetic in pmhist.c), and what comes back.
 *
 * The engine evaluates a function call step by step, as Prometheus's
 * rangeEval does: at each step it builds the arguments (a scalar's value at
 * the step, an instant vector's elements at the step, a range vector's
 * windows for the step) and calls pmfn_call, which appends the result
 * elements to |out|. Engine-side special cases, as in Prometheus:
 *   - timestamp(<selector>): the engine passes the selector's elements with
 *     t = the sample's own timestamp (everywhere else t = the step time);
 *   - a range-vector argument (selector or subquery) is given as one window
 *     per series: the samples in [range_start, range_end], staleness
 *     markers left out, with its series' full labels (for range functions
 *     the engine usually passes one window per call, series by series, as
 *     2.42 does; absent_over_time always gets every window of the step);
 *   - @ and offset are resolved into range_start / range_end (and, for
 *     instant selectors, into which sample is taken) before the call;
 *   - the engine drops nothing: the function decides whether its output
 *     keeps __name__ (most drop it: pm_labels_drop_name), and the engine
 *     checks the step's result for duplicate label sets afterwards
 *     ("vector cannot contain metrics with the same labelset").
 */
#ifndef MIRADB_PMEVAL_INT_H
#define MIRADB_PMEVAL_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "query/pmodel.h"
#include "query/promql.h"

/* One element of an instant vector at one step. */
struct pm_velem {
    struct pm_labels labels;
    double v;                /* float sample (when h == NULL) */
    const struct pm_hist *h; /* histogram sample, or NULL */
    int64_t t;               /* the step time (timestamp(): the sample's) */
    /* A range function's output: 1 + the index of the window it was
     * computed from (its labels are that window's, __name__ dropped or
     * kept as the function says); 0 otherwise. Lets the engine place the
     * element without hashing its labels. */
    uint32_t src1;
};

/* An instant vector at one step (arena memory; grows by pm_vec_push). */
struct pm_vec {
    struct pm_velem *e;
    size_t n, cap;
};

/* Appends one element (copied): 0 or -ENOMEM. The old array stays in the
 * arena (doubling keeps the waste below the vector's own size). */
static inline int pm_vec_push(arena *a, struct pm_vec *v, const struct pm_velem *e)
{
    if (v->n == v->cap) {
        size_t cap = v->cap != 0 ? 2 * v->cap : 8;
        struct pm_velem *ne = (struct pm_velem *)arena_alloc(a, cap * sizeof *ne);
        if (ne == NULL) {
            return -ENOMEM;
        }
        if (v->n != 0) {
            memcpy(ne, v->e, v->n * sizeof *ne);
        }
        v->e = ne;
        v->cap = cap;
    }
    v->e[v->n++] = *e;
    return 0;
}

/* One series' samples in a range window, staleness markers left out. */
struct pm_win {
    struct pm_labels labels;
    const struct pm_fsample *f;
    size_t nf;
    const struct pm_hsample *h;
    size_t nh;
    /* With resets_known (the engine's sliding windows for rate / increase):
     * the float counter resets in the window, ascending: f[rs[k] - rs_base]
     * is lower than the sample before it, which is in the window too; no
     * other sample is. Else (false, as a zeroed window has it) the function
     * looks for them itself. */
    bool resets_known;
    const uint32_t *rs;
    size_t nrs;
    size_t rs_base;
};

/* One argument of a call at one step; |type| is the argument's
 * promql_expr type. */
struct pm_fnarg {
    enum promql_type type;
    double scalar;            /* PROMQL_TYPE_SCALAR */
    const struct pm_vec *vec; /* PROMQL_TYPE_VECTOR */
    const struct pm_win *win; /* PROMQL_TYPE_MATRIX: the windows, one per series */
    size_t nwin;
    struct promql_str str; /* PROMQL_TYPE_STRING */
};

struct pm_fnenv {
    arena *a;
    const struct promql_expr *call; /* the PROMQL_CALL node (absent() reads its matchers) */
    int64_t ts;                     /* the step's evaluation time, ms */
    /* For a range-vector argument: the window [range_start, range_end] in
     * ms (range_end = ts - offset, @ resolved; range_start = range_end -
     * range). Equal to ts otherwise. */
    int64_t range_start, range_end;
    char *err; /* for -EDOM / -EINVAL messages */
    size_t errlen;
};

/*
 * Evaluates env->call at one step. Appends its output elements to |out|
 * (labels in the arena; t = env->ts unless the function says otherwise).
 * Returns 0; -ENOMEM; -EDOM with a message for an execution error
 * (Prometheus's text, e.g. label_replace's "invalid regular expression in
 * label_replace(): ..." is a parse-time error there, but "invalid
 * destination label name in label_replace(): ..." is at evaluation).
 *
 * absent(v) / absent_over_time(v): given an empty vector / no windows, emit
 * one element with the labels of the argument selector's equality matchers
 * (PROMQL.md B.11), value 1; else nothing. The engine calls these with the
 * (possibly empty) argument at every step.
 *
 * sort / sort_desc: pmfn_call returns the elements in input order; the
 * ordering is the engine's (it only matters for an instant query's
 * outermost call).
 */
int pmfn_call(struct pm_fnenv *env, const struct pm_fnarg *args, size_t n_args, struct pm_vec *out);

/* Prometheus quantile() over |v| (sorted in place, NaN first): rank
 * q * (n - 1), linear interpolation; NaN for n == 0 or a NaN q, -Inf / +Inf
 * for q < 0 / q > 1. Shared by quantile_over_time and the quantile
 * aggregation (pmfn.c). */
double pmfn_quantile(double q, double *v, size_t n);

/* ---- native histograms (pmhist.c) ---- */

/* a += b (as FloatHistogram.Add; the result takes the smaller schema,
 * buckets merged down). NULL on -ENOMEM; returns the new sum (arena). */
struct pm_hist *pm_hist_add(arena *a, const struct pm_hist *x, const struct pm_hist *y);
/* x - y (FloatHistogram.Sub), for rate/increase/delta. */
struct pm_hist *pm_hist_sub(arena *a, const struct pm_hist *x, const struct pm_hist *y);
/* x * f (FloatHistogram.Mul; also division by 1/f). */
struct pm_hist *pm_hist_scale(arena *a, const struct pm_hist *x, double f);
/* true when y's count or any bucket is below x's (a counter reset from x to
 * y, FloatHistogram.DetectReset), or y's schema is larger. */
bool pm_hist_is_reset(const struct pm_hist *x, const struct pm_hist *y);
/* histogram_quantile / histogram_fraction over one native histogram, as
 * Prometheus 2.42 computes them (exponential interpolation is 3.x; 2.42
 * interpolates linearly inside a bucket). */
double pm_hist_quantile(double q, const struct pm_hist *h);
double pm_hist_fraction(double lower, double upper, const struct pm_hist *h);
/* Bucket bounds: pm_hist_bounds in pmodel.h. */

#endif
