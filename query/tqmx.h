/*
 * tqmx.h - TraceQL metrics: the parser of metrics queries (the first stage
 * after a spanset pipeline, second stages, metric filters, arithmetic
 * between metrics queries and scalars, hints) and their evaluator over the
 * stored spans, rendering Tempo's /api/metrics/query_range and
 * /api/metrics/query answers (tempopb.QueryRangeResponse and
 * QueryInstantResponse as protobuf-JSON).
 *
 * Grammar (Tempo's expr.y, pkg/traceql @ ad33aa8):
 *   root   := mexpr stages [with "(" hint ("," hint)* ")"]
 *   mexpr  := mterm (("+" | "-") mterm)* ;  mterm := mprim (("*" | "/") mprim)*
 *   mprim  := scalar | "(" mexpr stages ")" | query   (a bare query only alone)
 *   query  := pipeline "|" first [by "(" attr ("," attr)* ")"]
 *   first  := rate() | count_over_time() | min|max|avg|sum|histogram_over_time(attr)
 *           | quantile_over_time(attr, q, ...) | compare({filter}[, topN[, start, end]])
 *   stages := ("|" (topk | bottomk) "(" n ")" | (= != < <= > >=) scalar)*
 *   scalar := integer, float or duration literals folded with + - * / ( )
 * compare() takes no second stage, filter or arithmetic; topk/bottomk need
 * n >= 1; durations are only compared with, never combined.
 *
 * Memory: one parse = one arena (and the TraceQL inputs), released by
 * tqmx_free(). Read-only after parsing.
 */
#ifndef MIRADB_TQMX_H
#define MIRADB_TQMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/traceql.h"

struct jsonw;

enum tqmx_fn {
    TQMX_RATE,
    TQMX_COUNT_OVER_TIME,
    TQMX_MIN_OVER_TIME,
    TQMX_MAX_OVER_TIME,
    TQMX_AVG_OVER_TIME,
    TQMX_SUM_OVER_TIME,
    TQMX_QUANTILE_OVER_TIME,
    TQMX_HISTOGRAM_OVER_TIME,
    TQMX_COMPARE,
};

#define TQMX_MAX_BY 8
#define TQMX_MAX_QS 16

/* One metrics query: input pipeline | first stage [by (...)]. */
struct tqmx_query {
    struct traceql_expr *input; /* owned by the tqmx_expr */
    enum tqmx_fn fn;
    struct traceql_field attr; /* the _over_time argument */
    double qs[TQMX_MAX_QS];    /* quantile_over_time */
    size_t n_qs;
    struct traceql_field by[TQMX_MAX_BY];
    size_t n_by;
    struct traceql_expr *cmp;          /* compare(): the selection filter */
    uint32_t topn;                     /* compare(): values per attribute (default 10) */
    uint64_t cmp_start_ns, cmp_end_ns; /* compare(): the selection window (0: whole) */
};

enum tqmx_stage_kind {
    TQMX_ST_TOPK,
    TQMX_ST_BOTTOMK,
    TQMX_ST_FILTER, /* keep samples whose value cmp v */
};

struct tqmx_stage {
    enum tqmx_stage_kind kind;
    uint32_t k;         /* TOPK, BOTTOMK */
    enum traceql_op op; /* FILTER: EQ NE GT GE LT LE */
    double v;           /* FILTER */
};

enum tqmx_node_kind {
    TQMX_N_QUERY,
    TQMX_N_SCALAR,
    TQMX_N_BINARY, /* op '+' '-' '*' '/' */
};

struct tqmx_node {
    enum tqmx_node_kind kind;
    struct tqmx_query *q; /* QUERY */
    double v;             /* SCALAR */
    char op;              /* BINARY */
    struct tqmx_node *l, *r;
    struct tqmx_stage *stages; /* applied to this node's series, in order */
    size_t n_stages;
};

struct tqmx_expr {
    struct tqmx_node *root;
    bool has_sample;        /* with (sample=...): accepted; the evaluation stays exact */
    int64_t exemplars_hint; /* with (exemplars=N | true | false): N, -2 true, 0 false; -1 none */
    size_t n_queries;
};

/* Parses a metrics query. 0 and *out (free with tqmx_free), or -EINVAL
 * (syntax or validation: "parse error at line L, col C: <what>" or Tempo's
 * reason in err) or -ENOMEM; *out = NULL then. A query without a metrics
 * stage is -EINVAL ("not a metrics query..."). */
int tqmx_parse(const char *src, size_t len, struct tqmx_expr **out, char *err, size_t errlen);

/* NULL-safe. */
void tqmx_free(struct tqmx_expr *e);

/* ---- buckets (Tempo's IntervalMapperQueryRange after AlignRequest) ---- */

struct tqmx_range {
    uint64_t start, end, step; /* aligned: buckets (start + i*step, start + (i+1)*step] */
    uint32_t n;                /* buckets */
    bool instant;              /* one bucket (start, end] */
};

/* Aligns [start, end] to |step| as Tempo does (start down, end up, one
 * extra bucket before) or, |instant|, keeps it as one bucket. 0, or
 * -EINVAL (end <= start, step 0) / -E2BIG (more than |max_buckets|). */
int tqmx_range_init(struct tqmx_range *r, uint64_t start, uint64_t end, uint64_t step, bool instant,
                    uint32_t max_buckets);
/* The bucket of a span starting at |ts|, or -1 outside the range. */
int64_t tqmx_bucket_of(const struct tqmx_range *r, uint64_t ts);
/* The timestamp (ns) a bucket's sample carries: its right edge. */
uint64_t tqmx_bucket_ts(const struct tqmx_range *r, uint32_t i);

/* Tempo's default step for a range (DefaultQueryRangeStep). */
uint64_t tqmx_default_step(uint64_t start, uint64_t end);

/* ---- evaluation ---- */

struct tqmx_req {
    const struct tqmx_expr *expr;
    struct tqmx_range range;
    uint32_t exemplars;   /* for the whole query at most (0: none), 2 per series and step */
    uint32_t max_series;  /* 0: no limit; past it the answer is cut, status PARTIAL */
    uint64_t max_rows;    /* spans scanned before -E2BIG (0: none) */
    uint64_t max_memory;  /* bytes of query state before -ENOMEM (0: none) */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC (0: none) */
    const int *cancel;
};

/*
 * Evaluates the query and writes Tempo's answer object to |w|: with
 * range.instant {"series":[{"labels":[...],"value":v}]}, else
 * {"series":[{"labels":[...],"promLabels":"{...}","samples":[{"timestampMs":
 * "..","value":v}],"exemplars":[...]}]}, and "metrics" (and "status":
 * "PARTIAL" with a "message" when series were left out or a block was
 * quarantined). 0; otherwise nothing useful was written, a message in err,
 * and -ETIMEDOUT, -ECANCELED, -E2BIG (rows), -ENOMEM.
 */
int tqmx_eval(const struct tqmx_req *rq, struct jsonw *w, char *err, size_t errlen);

#endif
