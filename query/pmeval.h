/*
 * pmeval.h - the PromQL evaluator: a typed AST (promql.h) evaluated at one
 * instant or over a range of steps, as Prometheus 2.42's engine does
 * (PROMQL.md section B; where 2.x and 3.x differ, 2.x).
 *
 * The evaluator reads series through a struct pm_source (the store's is
 * pmsrc_select; unit tests pass their own) and allocates everything,
 * results included, in the caller's arena. It never logs.
 *
 * SEMANTICS (the traps, each with unit tests): lookback 5 minutes by
 * default, an instant selector takes the newest sample in
 * [t - lookback, t] unless it is the staleness marker; range selectors
 * take [t - range, t] (2.x: closed on both ends; 3.x opens the left);
 * offset / @ / start() / end(); subqueries step from
 * floor((t - range) / step) * step aligned to the epoch; extrapolated
 * rate/increase/delta; histogram_quantile on classic buckets and native
 * histograms; every aggregation with by/without; vector matching with
 * on/ignoring/group_left/group_right and Prometheus's errors; metric names
 * dropped where Prometheus drops them; "vector cannot contain metrics with
 * the same labelset"; NaN and Inf as Go's math does them.
 *
 * LIMITS: at most o->max_samples samples held at once (Prometheus's
 * --query.max-samples, default 50,000,000): past it -E2BIG with
 * "query processing would load too many samples into memory in query
 * execution"; a range query over more than 11,000 steps is the API's to
 * refuse. With o->q set, the qctx deadline and cancel flag are looked at
 * every step and every few thousand samples (-ETIMEDOUT, -ECANCELED).
 *
 * Threads: one evaluation per thread; the AST may be shared.
 */
#ifndef MIRADB_PMEVAL_H
#define MIRADB_PMEVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/pmodel.h"
#include "query/promql.h"
#include "query/qctx.h"

/* Where selectors read from. */
struct pm_source {
    void *ctx;
    /* The series matching every matcher with samples in [mint_ms, maxt_ms]
     * (only those samples; pmsrc_select's contract). 0 or -errno. */
    int (*select)(void *ctx, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                  int64_t maxt_ms, struct pm_set *out);
};

#define PM_DEFAULT_LOOKBACK_MS (5 * 60 * 1000)
#define PM_DEFAULT_MAX_SAMPLES 50000000u

struct pm_eval_opts {
    int64_t start_ms; /* instant query: start == end, step 0 */
    int64_t end_ms;
    int64_t step_ms;     /* range query: > 0 */
    int64_t lookback_ms; /* 0: PM_DEFAULT_LOOKBACK_MS */
    uint64_t max_samples;
    struct qctx *q; /* limits; NULL in unit tests */
};

enum pm_result_type {
    PM_RES_SCALAR = 1,
    PM_RES_VECTOR, /* instant query of an instant vector */
    PM_RES_MATRIX, /* range query, or instant query of a range vector */
    PM_RES_STRING,
};

struct pm_result {
    enum pm_result_type type;
    /* SCALAR: t, v. STRING: t, str. VECTOR: set with exactly one sample per
     * series (float in f[0] or histogram in h[0]), timestamped t (the
     * evaluation time), in the evaluator's order (sort() / sort_desc()
     * order when the query's outermost call is one; else as Prometheus
     * emits it). MATRIX: set sorted by labels, each series' samples in
     * time order. */
    int64_t t;
    double v;
    struct promql_str str;
    struct pm_set set;
    /* Warnings Prometheus would attach (e.g. "PromQL info: ..." is 3.x;
     * 2.42 has none from the engine but we keep the slot). NULL-terminated
     * array of arena strings, or NULL. */
    const char **warnings;
};

/*
 * Evaluates |root| (promql_parse's result). Returns 0 and *out; else
 *   -EDOM     an execution error Prometheus reports as errorType
 *             "execution" (422): many-to-many matching, duplicate label
 *             sets, "found duplicate series for the match group", ...
 *   -E2BIG    max_samples (also "execution", 422)
 *   -EINVAL   a bad parameter of the query Prometheus reports as bad_data
 *             (e.g. a range query of a range-vector or string expression:
 *             "invalid expression type \"range vector\" for range query,
 *             must be Scalar or instant Vector")
 *   -ETIMEDOUT / -ECANCELED / -ENOMEM / storage errors from the source
 * with the message in |err| (Prometheus's text).
 */
int pm_eval(const struct promql_expr *root, const struct pm_eval_opts *o,
            const struct pm_source *src, arena *a, struct pm_result *out, char *err, size_t errlen);

#endif
