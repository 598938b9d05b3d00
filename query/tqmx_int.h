/*
 * tqmx_int.h - what the files of the TraceQL metrics module share; nothing
 * outside query/tqmx*.c includes this file. tqmx.h is the module's public
 * surface.
 *
 * THE FILES
 *   tqmx.c         the parser
 *   tqmx_eval.c    buckets, accumulators (one table per metrics query),
 *                  the per-span observation, compare()'s tables
 *   tqmx_scan.c    the scans feeding the accumulators: span by span, or
 *                  whole traces when the input needs them
 *   tqmx_series.c  accumulators to series, arithmetic, second stages, the
 *                  JSON answer, tqmx_eval
 * The module evaluates TraceQL with the traces module's evaluator
 * (query/traces_int.h: spans, values, whole-trace evaluation).
 */
#ifndef MIRADB_TQMX_INT_H
#define MIRADB_TQMX_INT_H

#include "query/tqmx.h"
#include "query/traces_int.h"

struct tqmx_ex {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint64_t ts_ns;
    double v;
};

struct dvec {
    double *v;
    uint32_t n, cap;
};

/* One accumulating series: its key, labels and per-bucket state. */
struct acc {
    uint64_t hash;
    uint8_t *key;
    uint32_t klen;
    struct tv *lv; /* by() values; compare: lv[0] the attribute value */
    uint32_t n_lb;
    const char *name; /* compare: the attribute */
    bool sel;         /* compare: selection (else baseline) */
    double bucket;    /* histogram_over_time: the __bucket value */
    double *v;        /* per bucket: min, max or sum (NULL: compare) */
    uint64_t *cnt;    /* per bucket: spans (compare: NULL while b0 is the only bucket) */
    uint32_t b0;      /* compare: the one bucket so far (UINT32_MAX: none) */
    uint64_t c0;      /* compare: its spans */
    struct dvec *qv;  /* quantile_over_time: per bucket values */
    struct tqmx_ex *ex;
    uint32_t n_ex, ex_cap;
    uint8_t *ex_per; /* per bucket: exemplars kept */
    uint64_t total;
};

/* Exemplars per series and bucket at most (Tempo keeps 2). */
#define TQMX_EX_PER_BUCKET 2

struct accs {
    struct acc **v; /* open addressing, cap a power of two */
    size_t n, cap;
};

/* One metrics query being evaluated. */
struct qrun {
    const struct tqmx_query *q;
    struct accs accs;
};

/* One evaluation. */
struct tqmx_run {
    const struct tqmx_req *rq;
    struct qctx q;
    arena *a; /* all query state; its limit is max_memory */
    size_t n_series;
    bool truncated; /* series were left out: over max_series */
    uint8_t *kbuf;  /* series keys are built here (malloc, charged) */
    size_t kcap;
    uint32_t n_ex;  /* exemplars kept, the whole query */
    uint64_t spans; /* inspected */
    uint64_t traces;
};

/* tqmx_eval.c: a span of the input (already matched) into qr's table. 0 or
 * -ENOMEM / -E2BIG (the query's error is set). */
int tqmx_observe(struct tqmx_run *x, struct qrun *qr, struct ectx *e, const struct espan *sp);

/* Spans of bucket |b| (either form of accumulator). */
uint64_t tqmx_acc_count(const struct acc *a, uint32_t b);

/* tqmx_scan.c: runs qr's scan over every source. 0 or the query's error. */
int tqmx_scan(struct tqmx_run *x, struct qrun *qr);

/* ---- series ---- */

struct tqmx_label {
    const char *k;
    struct tv v;
};

struct tqmx_series {
    struct tqmx_label *lb;
    uint32_t n_lb;
    double *v;    /* per bucket */
    uint8_t *has; /* per bucket: a sample */
    struct tqmx_ex *ex;
    uint32_t n_ex;
    char *prom; /* promLabels text, also the sort and match key */
};

struct tqmx_set {
    struct tqmx_series *v;
    size_t n;
};

#endif
