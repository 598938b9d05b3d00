/*
 * pmeval_eng.h - private header of the PromQL evaluator (pmeval.c, the
 * selectors in pmeval_sel.c, the function calls in pmeval_call.c, the
 * per-step aggregation in pmeval_agg.c, the binary operators in
 * pmeval_bin.c). Nothing outside those five files includes it.
 *
 * The shape follows Prometheus 2.42's engine: every node evaluates to a
 * value over the evaluator's steps [start, end] by interval (a scalar: one
 * number per step; an instant vector: a matrix whose points sit on the
 * steps; a range vector: raw samples, instant evaluation only), and nodes
 * that combine inputs do it step by step (pe_range_eval, Prometheus's
 * rangeEval), gathering each input's elements at the step into a pm_vec.
 */
#ifndef MIRADB_PMEVAL_ENG_H
#define MIRADB_PMEVAL_ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/pmeval.h"
#include "query/pmeval_int.h"

/* One series of a matrix value; arrays grow in the arena. */
struct pe_series {
    struct pm_labels labels;
    struct pm_fsample *f;
    size_t nf, fcap;
    struct pm_hsample *h;
    size_t nh, hcap;
};

struct pe_mat {
    struct pe_series *s;
    size_t n, cap;
};

/* A node's value. SCALAR: sc[step] for every step; VECTOR / MATRIX: m;
 * STRING: str. */
struct pe_val {
    enum promql_type type;
    double *sc;
    struct pe_mat m;
    struct promql_str str;
};

/* uint64 -> int32 open-addressing map (Prometheus keys its maps by label
 * hashes too). Arena memory; pe_hmap_clear empties it for the next step. */
struct pe_hmap {
    uint64_t *k;
    int32_t *v; /* -1: empty slot */
    uint32_t cap, n;
};

struct pe_sel; /* a selector node and the series loaded for it */

/* Per input series values computed once (Prometheus's EvalSeriesHelper):
 * v[i] valid when set[i]. Grows on demand. */
struct pe_cache {
    uint64_t *v;
    struct pm_labels *l;
    uint8_t *set;
    size_t cap;
};
/* Makes room for index i (zeroing what is new). 0 or -ENOMEM. */
int pe_cache_room(arena *a, struct pe_cache *c, size_t i);

/* What every evaluator of one query shares. */
struct pe_shared {
    arena *a;
    const struct pm_source *src;
    struct qctx *q;
    uint64_t max_samples;
    uint64_t cur; /* Prometheus's currentSamples */
    uint32_t tick;
    int64_t lookback;
    int64_t qstart, qend; /* the query's start / end: @ start() / end() */
    char *err;
    size_t errlen;
    struct pe_sel *sels;
    size_t n_sels;
    struct pe_hmap dup;             /* pe_vec_has_dup's scratch */
    const struct promql_expr **inv; /* nodes Prometheus wraps in StepInvariantExpr */
    size_t n_inv, inv_cap;
};

/* One evaluator: a time range and a step (subqueries and step-invariant
 * nodes make their own). */
struct pe_ev {
    struct pe_shared *sh;
    int64_t start, end, interval;
};

static inline size_t pe_nsteps(const struct pe_ev *ev)
{
    return ev->end < ev->start ? 0 : (size_t)((ev->end - ev->start) / ev->interval) + 1;
}

/* Writes the message (printf) and returns rc. */
int pe_fail(struct pe_shared *sh, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "query processing would load too many samples into memory in query execution" */
int pe_too_many(struct pe_shared *sh);
/* The qctx deadline / cancel flag (0 without a qctx). */
int pe_check(struct pe_shared *sh);

int pe_hmap_init(arena *a, struct pe_hmap *m, size_t hint);
void pe_hmap_clear(struct pe_hmap *m);
int32_t pe_hmap_get(const struct pe_hmap *m, uint64_t k);
/* Sets k -> v (overwrites). 0 or -ENOMEM. */
int pe_hmap_put(arena *a, struct pe_hmap *m, uint64_t k, int32_t v);

/* Whether the vector holds two elements with the same label set. */
bool pe_vec_has_dup(struct pe_shared *sh, const struct pm_vec *v);
/* The same over precomputed label hashes. */
bool pe_hashes_have_dup(struct pe_shared *sh, const uint64_t *h, size_t n);
/* "vector cannot contain metrics with the same labelset" (-EDOM). */
int pe_dup_error(struct pe_shared *sh);

/* Go's strconv.Quote, as far as error texts need it (", \\, control bytes
 * escaped). Writes at most cap bytes, NUL-terminated. */
void pe_go_quote(const char *s, size_t n, char *out, size_t cap);
/* Prometheus labels.String(): {a="1", b="2"}. Arena string, NULL on -ENOMEM. */
char *pe_fmt_labels(arena *a, const struct pm_labels *ls);

#define PE_TICK_MASK 4095u /* a qctx look every 4,096 samples */

/* pe_check every PE_TICK_MASK + 1 calls. */
static inline int pe_tick(struct pe_shared *sh)
{
    if (sh->q != NULL && (++sh->tick & PE_TICK_MASK) == 0) {
        return pe_check(sh);
    }
    return 0;
}

int pe_nomem(struct pe_shared *sh); /* "out of memory", -ENOMEM */
const struct promql_expr *pe_unparen(const struct promql_expr *e);
/* The time an @ modifier names (start() / end() resolved). */
int64_t pe_at_time(const struct pe_shared *sh, const struct promql_mod *m);
/* The series loaded for a selector node (NULL: none). */
const struct pm_set *pe_sel_set(const struct pe_shared *sh, const struct promql_expr *node);
/* vectorSelectorSingle: the newest sample at or before |ref| within the
 * lookback, unless it is the staleness marker. */
bool pe_sample_at(const struct pm_series *s, int64_t ref, int64_t lookback, int64_t *t, double *v,
                  const struct pm_hist **h);
/* The samples of |s| in [mint, maxt], staleness markers left out. 0 or -ENOMEM. */
int pe_window(arena *a, const struct pm_series *s, int64_t mint, int64_t maxt, struct pm_win *w);
/* One series' range windows across the steps (Prometheus's engine slides
 * its window the same way): pe_slide_init takes the series' samples with
 * the staleness markers left out (a copy only when it has markers), once
 * per query; pe_slide_window then gives the window [mint, maxt] as a slice
 * of those, moving two cursors forward when neither bound went back (a
 * binary search otherwise). The window is what pe_window gives, without
 * an allocation. */
struct pe_slide {
    struct pm_labels labels;
    const struct pm_fsample *f;
    size_t nf;
    const struct pm_hsample *h;
    size_t nh;
    size_t f0, f1, h0, h1; /* first sample >= mint; first sample > maxt */
    int64_t mint, maxt;    /* the previous window's */
    bool placed;
    /* With |resets| at init: the indices in f of every float sample lower
     * than the one before it, and the window's first (r0) and end (r1)
     * among them (pm_win's rs). */
    bool resets;
    const uint32_t *rs;
    size_t nrs, r0, r1;
};
/* 0 or -ENOMEM (-E2BIG past 2^32 samples with |resets|). */
int pe_slide_init(arena *a, struct pe_slide *sl, const struct pm_series *s, bool resets);
void pe_slide_window(struct pe_slide *sl, int64_t mint, int64_t maxt, struct pm_win *w);
/* A subquery's inner expression over the steps the outer evaluator needs. */
int pe_eval_subquery(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);
/* A one-series result of a scalar-typed node as the per-step array. */
int pe_mat_to_scalar(struct pe_ev *ev, struct pe_val *v);
/* pmeval_sel.c: loads every selector's series and notes the step-invariant
 * nodes (before evaluation); whether a node is one; instant and range
 * selectors evaluated. */
int pe_prep(struct pe_shared *sh, const struct promql_expr *root);
bool pe_is_inv(const struct pe_shared *sh, const struct promql_expr *e);
int pe_eval_vector_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);
int pe_eval_matrix_sel(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);
/* A function call (pmeval_call.c). */
int pe_eval_call(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);

/* Evaluates |e| over ev's steps. */
int pe_eval(struct pe_ev *ev, const struct promql_expr *e, struct pe_val *out);

/*
 * Prometheus's rangeEval: evaluates |args| (a NULL entry or a string is
 * skipped), then at every step gathers each vector argument's elements at
 * the step (vecs[i]) and each scalar's value (scs[i]) and calls |fn|,
 * which appends its result to |out|; sidx[i][j] is the index, in argument
 * i's matrix, of the series element j came from (for per-series caches:
 * Prometheus's EvalSeriesHelper). The results become the matrix |res|
 * (an instant evaluation keeps the step's order). Checks the result of
 * every step for duplicate label sets.
 */
typedef int (*pe_step_fn)(struct pe_ev *ev, void *ctx, int64_t ts, const struct pm_vec *vecs,
                          const double *scs, uint32_t *const *sidx, struct pm_vec *out);
int pe_range_eval(struct pe_ev *ev, const struct promql_expr *const *args, size_t n_args,
                  pe_step_fn fn, void *ctx, struct pe_val *res);

/* Appends one point to a series. 0 or -ENOMEM. */
int pe_series_push(arena *a, struct pe_series *s, int64_t t, double v, const struct pm_hist *h);
/* Room for |n| float (or histogram) points without regrowing (Prometheus
 * sizes an output series for the steps left). 0 or -ENOMEM. */
int pe_series_reserve(arena *a, struct pe_series *s, bool hist, size_t n);
/* Appends an empty series with |labels|; its index in *idx. */
int pe_mat_add(arena *a, struct pe_mat *m, const struct pm_labels *labels, size_t *idx);

/* ---- pmeval_agg.c ---- */

/* State of one aggregation node across steps (maps reused per step). */
struct pe_agg {
    const struct promql_expr *e;
    const char **names; /* the grouping labels, sorted (count_values: + its label) */
    uint32_t *lens;
    size_t n_names;
    struct promql_str label; /* count_values */
    struct pe_hmap lcache;   /* grouping key -> index in lv: group labels across steps */
    struct pm_labels *lv;
    size_t ln, lcap;
    /* per group of lv: its index among the step's groups (gstep), valid
     * when gstamp equals stamp (bumped every step: no clearing) */
    int32_t *gstep;
    uint32_t *gstamp;
    size_t gcap;
    uint32_t stamp;
    void *scratch; /* struct agg_group array */
    size_t scratch_cap;
    void *heap; /* element scratch for topk / bottomk / quantile */
    size_t heap_cap;
    int32_t *gidx; /* per element: its group */
    size_t gidx_cap;
    struct pm_labels *metric; /* per element: its labels (count_values: + the label) */
    size_t metric_cap;
    struct pe_cache keys; /* per input series: its group (index in lv) */
};
int pe_agg_init(struct pe_ev *ev, struct pe_agg *g, const struct promql_expr *e);
/* One step: |in| aggregated into |out|; |param| is the step's parameter. */
int pe_agg_step(struct pe_ev *ev, struct pe_agg *g, double param, const struct pm_vec *in,
                const uint32_t *sidx, struct pm_vec *out);

/* ---- pmeval_bin.c ---- */

struct pe_bin {
    const struct promql_expr *e;
    const char **names; /* on / ignoring labels */
    uint32_t *lens;
    size_t n_names;
    struct pe_hmap sigs, matched, pairs; /* pairs: (match group, result) seen */
    struct promql_str *inc;              /* group_x(include) names, arena copies */
    struct pe_cache sig[2];              /* signature per series of each side */
    struct pe_cache drop[2];             /* labels without __name__ per series of each side */
    struct pe_hmap rmcache; /* (lhs, rhs) series -> index in rm (resultMetric's cache) */
    struct pm_labels *rm;
    size_t rm_n, rm_cap;
    uint64_t *lh, *rh; /* per-step signatures */
    size_t lh_cap, rh_cap;
};
int pe_bin_init(struct pe_ev *ev, struct pe_bin *b, const struct promql_expr *e);
/* One step of vector op vector. */
int pe_bin_vv(struct pe_ev *ev, struct pe_bin *b, const struct pm_vec *l, const struct pm_vec *r,
              const uint32_t *li, const uint32_t *ri, struct pm_vec *out);
/* vector op scalar (|swap|: the scalar is the left operand). */
int pe_bin_vs(struct pe_ev *ev, struct pe_bin *b, const struct pm_vec *v, const uint32_t *vi,
              double s, bool swap, struct pm_vec *out);
/* scalar op scalar (comparisons 0/1). */
double pe_bin_ss(enum promql_binop op, double l, double r);

#endif
