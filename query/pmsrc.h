/*
 * pmsrc.h - the metric points of a qctx snapshot as Prometheus series: what
 * a PromQL selector, /api/v1/series, /labels, /label/<n>/values,
 * /metadata and /query_exemplars read.
 *
 * Every point of the snapshot's sources (sealed blocks, then open blocks)
 * becomes the samples promname.h says: gauges and sums one sample, classic
 * histograms _bucket{le}/_sum/_count, summaries {quantile}/_sum/_count,
 * exponential histograms one native-histogram sample (pm_hist), and each
 * resource with attributes besides the identifying ones a target_info
 * series of value 1 (PROMQL.md C.3). A point flagged NO_RECORDED_VALUE is
 * the staleness marker (promname_stale_nan) in every series it makes.
 *
 * TARGET_INFO: one sample (value 1) at every distinct millisecond at which
 * the resource has a point, any metric (pmsrc.c says why).
 *
 * DELTA TEMPORALITY: delta sums and delta histograms are turned into
 * cumulative ones per stream at read time (the OTel specification's advice):
 * the samples of a stream (one series) are accumulated in time order from
 * the oldest point the store holds; a point whose start time is not the
 * previous point's time starts a new run from zero (a counter reset, which
 * PromQL's rate() handles). So a selector on a delta metric reads the
 * stream from its oldest retained point, whatever its time range.
 * A retry of a delta point (same time to the nanosecond) counts once, the
 * last ingested; a staleness marker stays one and ends the run. Delta
 * exponential histograms are not accumulated: each point is a gauge
 * histogram (reset_hint 3), as Prometheus's native delta ingestion stores
 * them. (Documented in README.md "Metrics and PromQL".)
 *
 * EXEMPLARS are read from the points at or after the range's start (an
 * exemplar is recorded before the point that reports it), any time after
 * its end, and kept when their own time is in the range.
 *
 * Duplicates: when one series has two samples at the same millisecond (an
 * exporter's retry, two points folded by the ms truncation), the one
 * ingested last wins.
 *
 * LABEL INDEX: a sealed block gets one the first time a query reads it
 * (pmsrc.c): its series' label sets, postings (name -> value -> series)
 * and where each series has rows, cached with the block and charged to
 * the memory budget (bounded: an eighth of it), freed with the block.
 * Series, label names and values answer from it; a selector reads only the
 * streams whose series its matchers admit (regexes tested once per
 * distinct value). Open blocks are read row by row (they are small and
 * change). The build's rows count on the query that builds it.
 *
 * Cost: a block whose metric dictionary has no metric whose series names a
 * selector's __name__ matchers admit is not read; nor is one whose zone
 * map misses the time range. Rows are counted on the qctx (limits, deadline
 * checks every QCTX_CLOCK_ROWS rows).
 *
 * Threads: one pmsrc per query; its calls on the query's thread (they fan
 * out over qpool themselves when they want to).
 */
#ifndef MIRADB_PMSRC_H
#define MIRADB_PMSRC_H

#include <stddef.h>
#include <stdint.h>

#include "query/pmodel.h"
#include "query/promql.h"
#include "query/qctx.h"

struct pmsrc;

/* A source over the qctx |q| (opened on SIG_METRICS), allocating its
 * results in |a|, which it binds to |q| (qctx_arena_bind: a fresh arena,
 * freed by the caller after pmsrc_close; whatever else the caller
 * allocates there is charged to the query too). 0 or -ENOMEM. */
int pmsrc_open(struct pmsrc **out, struct qctx *q, arena *a);
void pmsrc_close(struct pmsrc *s);

/*
 * The series matching every matcher (n == 0: every series) with samples
 * in [mint_ms, maxt_ms], only those samples, sorted per series by time;
 * the set sorted by labels. Selecting the same matchers twice reads twice.
 * Returns 0 and *out (arena memory), or a negative errno that is also the
 * qctx's error (-E2BIG, -ENOMEM, -ETIMEDOUT, -ECANCELED, -EIO).
 */
int pmsrc_select(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                 int64_t maxt_ms, struct pm_set *out);

/* As pmsrc_select, without samples: the label sets of the series with at
 * least one sample in the range (for /series, /labels, /label values). */
int pmsrc_series(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                 int64_t maxt_ms, struct pm_set *out);

/* A string of a label call's answer. */
struct pmsrc_str {
    const char *s;
    uint32_t n;
};

/*
 * The label names (|name| NULL) or the values of label |name| (len bytes)
 * of every series with a sample in [mint_ms, maxt_ms], sorted (bytewise),
 * each once: what pmsrc_series with no matcher would give, but a sealed
 * block answers from its label index (no row read once it is built).
 * 0 and out/n (arena memory), or a negative errno as pmsrc_select.
 */
int pmsrc_label_values(struct pmsrc *s, const char *name, size_t len, int64_t mint_ms,
                       int64_t maxt_ms, struct pmsrc_str **out, size_t *n);

/* One metric's metadata (Prometheus /api/v1/metadata). */
struct pm_meta {
    const char *name; /* the Prometheus metric family name (no _bucket...) */
    const char *type; /* "counter", "gauge", "histogram", "summary", "unknown" */
    const char *help; /* the OTLP description ("" when none) */
    const char *unit; /* promname_unit of the OTLP unit */
};

/*
 * Every distinct (name, type, help, unit) of the snapshot's metrics, sorted
 * by name then type, help, unit; |metric| (len > 0) keeps only that family.
 * 0 and out/n (arena memory), or -errno.
 */
int pmsrc_metadata(struct pmsrc *s, const char *metric, size_t len, struct pm_meta **out,
                   size_t *n);

/* One exemplar. */
struct pm_exemplar {
    struct pm_labels labels; /* trace_id / span_id (lower-case hex) + filtered attributes */
    double value;
    int64_t t;
};

/* The exemplars of one series. */
struct pm_exemplar_series {
    struct pm_labels series; /* the series' labels */
    struct pm_exemplar *e;   /* sorted by t */
    size_t n;
};

/*
 * Exemplars in [mint_ms, maxt_ms] of the series matching every matcher,
 * grouped by series (sorted by labels). An exemplar of a histogram point
 * belongs to the _bucket series whose le holds its value; of a sum or gauge
 * to its one series. 0 or -errno as pmsrc_select.
 */
int pmsrc_exemplars(struct pmsrc *s, const struct promql_matcher *m, size_t n, int64_t mint_ms,
                    int64_t maxt_ms, struct pm_exemplar_series **out, size_t *n_out);

/*
 * What the source could not map, process-wide (for /metrics): metrics of
 * invalid temporality (UNSPECIFIED), names Prometheus refuses, series whose
 * attribute keys it refuses, exponential histograms of a scale below -4.
 * Counted each time a query meets one (once per block and metric, or per
 * block and series), so the counter grows with the queries that read them.
 */
uint64_t pmsrc_unmapped(void);
/* Bytes the cached label indexes of sealed blocks hold, process-wide. */
uint64_t pmsrc_index_bytes(void);

/* The OTLP name of the last metric counted there, NUL-terminated into |out|
 * (cap > 0; "" when none); its length. For the caller's "logged once" note. */
size_t pmsrc_unmapped_last(char *out, size_t cap);

#endif
