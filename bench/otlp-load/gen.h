/*
 * gen.h - otlp-load's payload generator: deterministic OTLP export requests
 * shaped like real telemetry, encoded as protobuf or OTLP/JSON.
 *
 * A request is a pure function of (seed, time base, records per request,
 * request index): the same inputs give the same bytes. Its shape:
 *   - 1 to 3 resources out of GEN_RESOURCES (service x host, with
 *     service.name, service.version, host.name, ... ), 1 or 2 scopes each;
 *   - logs: severities mostly INFO, some DEBUG/WARN, few ERROR/FATAL; bodies
 *     of varied length from a vocabulary plus unique-ish tokens (request ids,
 *     user ids, addresses); 4-12 attributes of mixed types; most records
 *     carry the trace and span id of a span of the traces generator with the
 *     same seed and index (trace_id/span_id link logs to spans);
 *   - traces: span trees (root, children pointing at earlier spans as
 *     parents) spread over the services, with events, links to earlier
 *     traces, error statuses, 4-12 attributes;
 *   - metrics: |records| data points spread over gauges, sums, histograms,
 *     exponential histograms and summaries (every kind present when
 *     records >= 5), with series attributes and exemplars.
 * "records" means log records, spans or data points, as the server counts
 * them.
 *
 * Encoding is done once per pool entry, off the measured path; nothing here
 * is tuned for speed.
 */
#ifndef MIRADB_BENCH_GEN_H
#define MIRADB_BENCH_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/val.h"

#define GEN_RESOURCES 24 /* distinct resources (12 services x 2 hosts) */
#define GEN_MAX_TRACE_SPANS 24

enum gen_format {
    GEN_PROTOBUF = 0,
    GEN_JSON = 1,
};

struct gen_config {
    enum signal signal;
    uint64_t seed;
    uint64_t time_base_ns; /* the first record's time; records advance from it */
    uint32_t records;      /* per request; >= 1 */
};

/* What one encoded request holds (for the report and the tests). */
struct gen_stats {
    uint32_t records;
    uint32_t resources;
    uint32_t scopes;
    uint64_t attrs;      /* attributes on records (logs, spans, points) */
    uint64_t body_bytes; /* log bodies */
    uint32_t events;     /* span events */
    uint32_t links;      /* span links */
    uint32_t by_kind[6]; /* metrics: points per enum metric_kind */
    uint32_t by_sev[6];  /* logs: TRACE, DEBUG, INFO, WARN, ERROR, FATAL */
};

/*
 * Appends request |idx| to |out| in format |f|. Fills |st| when non-NULL.
 * Returns 0; -EINVAL for a bad config (records 0, unknown signal); -ENOMEM.
 */
int gen_request(const struct gen_config *c, uint64_t idx, enum gen_format f, struct vbuf *out,
                struct gen_stats *st);

/*
 * The trace and span id of span |k| of trace |t| under |seed|: the traces
 * generator uses these for its spans, and the logs generator for the ids it
 * links records to.
 */
void gen_trace_id(uint64_t seed, uint64_t t, uint8_t out[16]);
void gen_span_id(uint64_t seed, uint64_t t, uint32_t k, uint8_t out[8]);

/*
 * The traces of request |idx|: fills |sizes| (capacity |records|) with the
 * span count of each trace, in order, summing to |records|; returns how
 * many traces. Trace i of the request has number idx * records + i.
 */
uint32_t gen_trace_plan(uint64_t seed, uint64_t idx, uint32_t records, uint32_t *sizes);

/*
 * How far the records of requests 0 .. n-1 spread in time from the time
 * base: logs and traces advance 1 ms per record, metric points 10 s per
 * request.
 */
uint64_t gen_time_span_ns(const struct gen_config *c, uint64_t n);

/* Gzips |in| into |out| (replacing its content) at |level|. 0 or -ENOMEM. */
int gen_gzip(const uint8_t *in, size_t len, int level, struct vbuf *out);

#endif
