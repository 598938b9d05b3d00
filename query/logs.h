/*
 * logs.h - the LogQL executor: evaluates a parsed query (logql.h) over a
 * catalog snapshot of the logs signal (sealed + open blocks) and renders
 * the result in Loki's JSON shapes or as whole records (native API).
 *
 * Plan (DESIGN.md "Queries"): time range -> candidate blocks -> skip by
 * zone map -> skip by blooms (whole-token positive line filters; equality
 * matchers on indexed resource attributes) -> skip blocks whose resource
 * dictionary has no stream the selector accepts -> scan (query workers,
 * pool.h, one block per item) -> merge in time order.
 *
 * Data model (FACTS.md B): stream labels are the default-indexed resource
 * attributes (names sanitized: service.name -> service_name) plus
 * service_name; structured metadata are record attributes, record fields
 * (severity_text, severity_number, trace_id, span_id, flags, ...), other
 * resource attributes, scope attributes, scope_name/scope_version and
 * detected_level; the line is the body (a non-string body as JSON).
 * Record attributes are read only when the query filters on or renders
 * them (a metric query grouped by stream labels reads no attribute table).
 *
 * Threads: logs_exec runs on a query worker (it fans out through
 * qpool_parallel, or runs alone outside the pool). A result is then owned
 * by one thread at a time.
 */
#ifndef MIRADB_LOGS_H
#define MIRADB_LOGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/logql.h"
#include "query/qstats.h"

struct evbuffer;
struct jsonw;

/* Loki's max_entries_limit_per_query. */
#define LOGS_MAX_ENTRIES 5000
/* Loki's max_query_series (series in a metric result). */
#define LOGS_MAX_SERIES 500
/* Loki's 11,000 points per series. */
#define LOGS_MAX_POINTS 11000

struct logs_req {
    const struct logql_expr *expr; /* borrowed for the call and the result's life */
    /* Log queries: entries with start <= ts < end. Metric range queries:
     * evaluation instants start, start+step, ... <= end. Instant queries:
     * one instant, start == end. */
    uint64_t start_ns, end_ns;
    uint64_t step_ns;     /* range metric queries (> 0) */
    bool instant;         /* /query: vector result */
    uint32_t limit;       /* log queries: entries (1..LOGS_MAX_ENTRIES) */
    bool forward;         /* direction; default backward */
    uint64_t interval_ns; /* log queries: min gap between entries (0: none) */
    bool categorize;      /* X-Loki-Response-Encoding-Flags: categorize-labels */
    uint64_t max_rows;    /* rows scanned before -E2BIG (0: none) */
    uint64_t max_memory;  /* bytes held before -ENOMEM (0: none) */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: none */
    const int *cancel;    /* polled: nonzero ends the query with -ECANCELED (may be NULL) */
};

struct logs_result;

/*
 * Runs the query. 0 and *out (free with logs_result_free); otherwise
 * *out = NULL, a message in err, and:
 *   -EINVAL     a query Loki rejects at run time (400): unsupported stage,
 *               pipeline error (__error__ in a metric series), ...
 *   -E2BIG      a limit: --query-max-rows, entries, series or points (400 /
 *               422 as Loki)
 *   -ENOMEM     --query-memory (or allocation failure)
 *   -ETIMEDOUT  the deadline passed
 *   -ECANCELED  *cancel was set
 * Blocks failing verification are quarantined and reported as warnings
 * in the result, never as an error.
 */
int logs_exec(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen);

/* As logs_exec for the native API (log queries only: a metric query is
 * -EINVAL); rows are read whole (every table) when rendered. */
int logs_exec_native(const struct logs_req *rq, struct logs_result **out, char *err, size_t errlen);

/*
 * Renders the answer into |out| piece by piece: each call appends about
 * |budget| bytes (whole items: a stream, a series, a record; 0 = all)
 * and returns true once the answer is complete. Loki JSON
 * ({"status":"success",["warnings":[...],]"data":{...}}) for logs_exec
 * results; for logs_exec_native results every field of each record with
 * its type, attributes, resource and scope (rows are read from the blocks
 * here, so call it on a query worker, not on an I/O thread). One thread at
 * a time; |out| may differ between calls.
 */
bool logs_render(struct logs_result *r, struct evbuffer *out, size_t budget);
/* 0, or -ENOMEM if a piece could not be appended. */
int logs_render_error(const struct logs_result *r);

/* The whole answer at once (logs_render with no budget). */
void logs_write_loki(struct logs_result *r, struct jsonw *w);
void logs_write_native(struct logs_result *r, struct jsonw *w);

/* The planner/scan tally of the query (also added to qstats already). */
const struct qs_scan *logs_result_scan(const struct logs_result *r);

void logs_result_free(struct logs_result *r);

/*
 * Metadata endpoints over the index labels of streams whose blocks overlap
 * [start, end] (no row is read: resource dictionaries only).
 *   logs_labels: name == NULL: label names; else the values of |name|.
 *   logs_series: label sets of streams matching any selector (n == 0: all).
 * |sel| may be NULL (all streams). Writes the whole Loki envelope.
 * 0, or -ENOMEM.
 */
int logs_labels(const struct logql_log *sel, const char *name, uint64_t start_ns, uint64_t end_ns,
                struct jsonw *w);
int logs_series(const struct logql_log *const *sels, size_t n, uint64_t start_ns, uint64_t end_ns,
                struct jsonw *w);

enum logs_index_mode {
    LOGS_INDEX_STATS,  /* /index/stats: {"streams","chunks","entries","bytes"} */
    LOGS_INDEX_VOLUME, /* /index/volume: a vector of line bytes per group */
};

/*
 * Index endpoints over the rows of streams matching rq->expr (a log
 * selector) with start <= ts <= end. Volume groups by the |targets| label
 * names (none: the names the selector's matchers use), or, with
 * |agg_labels|, one group per label name (value ""), sorted by bytes
 * descending, at most |limit| (0: all). Writes the whole answer. 0, or the
 * errors of logs_exec with a message in err.
 */
int logs_index(const struct logs_req *rq, enum logs_index_mode mode,
               const struct logql_str *targets, size_t n_targets, bool agg_labels, uint32_t limit,
               struct jsonw *w, char *err, size_t errlen);

/* Logs Drilldown's /detected_labels: each stream label with the number of
 * its distinct values among streams of blocks overlapping the window. */
int logs_detected_labels(const struct logql_log *sel, uint64_t start_ns, uint64_t end_ns,
                         struct jsonw *w);

/* Label name sanitizing as Loki's OTLP ingest does (FACTS.md B.2): writes
 * at most cap - 1 bytes plus a NUL, returns the length. */
size_t logs_label_name(const char *key, size_t n, char *out, size_t cap);

#endif
