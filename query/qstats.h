/*
 * qstats.h - query counters for /metrics: queries by endpoint and outcome,
 * a latency histogram per endpoint, and what the planner and scanners did
 * (blocks considered / skipped by zone map / skipped by bloom / skipped by
 * the selector over the block's resource dictionary / scanned, rows
 * scanned, bytes read).
 *
 * Counters are process-wide atomics bumped once per query or once per
 * block (never per row: scanners add their row and byte counts when a
 * block is done). Any thread.
 */
#ifndef MIRADB_QSTATS_H
#define MIRADB_QSTATS_H

#include <stdint.h>

struct evbuffer;

enum qs_endpoint {
    QS_EP_QUERY_RANGE = 0, /* /loki/api/v1/query_range */
    QS_EP_QUERY,           /* /loki/api/v1/query */
    QS_EP_LABELS,          /* labels and label values */
    QS_EP_SERIES,
    QS_EP_NATIVE_LOGS, /* /api/v1/logs */
    QS_EP_TRACE_BY_ID, /* Tempo side */
    QS_EP_TRACE_SEARCH,
    QS_EP_TRACE_TAGS,
    QS_EP_INDEX,            /* Loki index/stats, index/volume, detected_labels */
    QS_EP_PROM_QUERY,       /* /api/v1/query */
    QS_EP_PROM_QUERY_RANGE, /* /api/v1/query_range */
    QS_EP_PROM_SERIES,      /* /api/v1/series */
    QS_EP_PROM_LABELS,      /* /api/v1/labels and /api/v1/label/<name>/values */
    QS_EP_PROM_METADATA,    /* /api/v1/metadata */
    QS_EP_PROM_EXEMPLARS,   /* /api/v1/query_exemplars */
    QS_EP_TRACE_METRICS,    /* /api/metrics/query_range and /api/metrics/query */
};
#define QS_EP_COUNT 16

enum qs_outcome {
    QS_OK = 0,
    QS_BAD_REQUEST, /* 400: parse error, bad parameter */
    QS_LIMIT,       /* a query limit ended it (rows, memory, series, entries) */
    QS_TIMEOUT,
    QS_CANCELED,   /* the client left */
    QS_OVERLOADED, /* queue full: 503 */
    QS_ERROR,      /* internal */
};
#define QS_OUTCOME_COUNT 7

/* Planner and scan counters: add a per-query tally once it is done. */
struct qs_scan {
    uint64_t blocks_considered; /* sealed + open blocks in the snapshot */
    uint64_t blocks_skipped_zone;
    uint64_t blocks_skipped_bloom;
    uint64_t blocks_skipped_dict; /* no resource of the block matches the selector */
    uint64_t blocks_scanned;
    uint64_t rows_scanned;
    uint64_t rows_skipped_index; /* rows a block index let the query leave unread */
    uint64_t bytes_read;         /* line (body) bytes examined */
    uint64_t blocks_failed;      /* quarantined during the query */
};

void qstats_query_done(enum qs_endpoint ep, enum qs_outcome oc, uint64_t latency_ns);
void qstats_scan_add(const struct qs_scan *s);
void qstats_scan_get(struct qs_scan *out);
/* Completed queries for one endpoint and outcome (tests). */
uint64_t qstats_queries(enum qs_endpoint ep, enum qs_outcome oc);

/* Appends the query section of /metrics. */
void query_metrics_text(struct evbuffer *o);

#endif
