/*
 * qstats.c - query counters (see qstats.h). Prometheus text exposition.
 */
#include "query/qstats.h"

#include <event2/buffer.h>

static const char *const ep_names[QS_EP_COUNT] = {
    "loki_query_range", "loki_query",    "loki_labels",      "loki_series",
    "logs_native",      "tempo_trace",   "tempo_search",     "tempo_tags",
    "loki_index",       "prom_query",    "prom_query_range", "prom_series",
    "prom_labels",      "prom_metadata", "prom_exemplars",   "tempo_metrics",
};
static const char *const oc_names[QS_OUTCOME_COUNT] = {
    "ok", "bad_request", "limit", "timeout", "canceled", "overloaded", "error",
};
/* Latency bucket upper bounds, seconds. */
static const double buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                 0.5,   1,     2.5,  5,     10,   30};
#define NB (sizeof(buckets) / sizeof(buckets[0]))

static uint64_t queries[QS_EP_COUNT][QS_OUTCOME_COUNT];
static uint64_t lat_bucket[QS_EP_COUNT][NB + 1];
static uint64_t lat_sum_ns[QS_EP_COUNT];
static struct qs_scan scan;

static void inc(uint64_t *p, uint64_t v)
{
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void qstats_query_done(enum qs_endpoint ep, enum qs_outcome oc, uint64_t latency_ns)
{
    if ((unsigned)ep >= QS_EP_COUNT || (unsigned)oc >= QS_OUTCOME_COUNT) {
        return;
    }
    inc(&queries[ep][oc], 1);
    double s = (double)latency_ns / 1e9;
    size_t b = 0;
    while (b < NB && s > buckets[b]) {
        b++;
    }
    inc(&lat_bucket[ep][b], 1);
    inc(&lat_sum_ns[ep], latency_ns);
}

void qstats_scan_add(const struct qs_scan *s)
{
    inc(&scan.blocks_considered, s->blocks_considered);
    inc(&scan.blocks_skipped_zone, s->blocks_skipped_zone);
    inc(&scan.blocks_skipped_bloom, s->blocks_skipped_bloom);
    inc(&scan.blocks_skipped_dict, s->blocks_skipped_dict);
    inc(&scan.blocks_scanned, s->blocks_scanned);
    inc(&scan.rows_scanned, s->rows_scanned);
    inc(&scan.bytes_read, s->bytes_read);
    inc(&scan.blocks_failed, s->blocks_failed);
}

void qstats_scan_get(struct qs_scan *out)
{
    out->blocks_considered = ld(&scan.blocks_considered);
    out->blocks_skipped_zone = ld(&scan.blocks_skipped_zone);
    out->blocks_skipped_bloom = ld(&scan.blocks_skipped_bloom);
    out->blocks_skipped_dict = ld(&scan.blocks_skipped_dict);
    out->blocks_scanned = ld(&scan.blocks_scanned);
    out->rows_scanned = ld(&scan.rows_scanned);
    out->bytes_read = ld(&scan.bytes_read);
    out->blocks_failed = ld(&scan.blocks_failed);
}

uint64_t qstats_queries(enum qs_endpoint ep, enum qs_outcome oc)
{
    if ((unsigned)ep >= QS_EP_COUNT || (unsigned)oc >= QS_OUTCOME_COUNT) {
        return 0;
    }
    return ld(&queries[ep][oc]);
}

static void header(struct evbuffer *o, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct evbuffer *o, const char *name, const char *help, const uint64_t *v)
{
    header(o, name, "counter", help);
    evbuffer_add_printf(o, "%s %llu\n", name, (unsigned long long)ld(v));
}

void query_metrics_text(struct evbuffer *o)
{
    header(o, "miradb_queries_total", "counter", "Queries completed, by endpoint and outcome.");
    for (int e = 0; e < QS_EP_COUNT; e++) {
        for (int c = 0; c < QS_OUTCOME_COUNT; c++) {
            evbuffer_add_printf(o, "miradb_queries_total{endpoint=\"%s\",outcome=\"%s\"} %llu\n",
                                ep_names[e], oc_names[c], (unsigned long long)ld(&queries[e][c]));
        }
    }
    header(o, "miradb_query_duration_seconds", "histogram",
           "Query latency from request to the last byte handed to the connection.");
    for (int e = 0; e < QS_EP_COUNT; e++) {
        uint64_t cum = 0;
        for (size_t b = 0; b <= NB; b++) {
            cum += ld(&lat_bucket[e][b]);
            if (b < NB) {
                evbuffer_add_printf(
                    o,
                    "miradb_query_duration_seconds_bucket{endpoint=\"%s\",le=\"%g\"} "
                    "%llu\n",
                    ep_names[e], buckets[b], (unsigned long long)cum);
            } else {
                evbuffer_add_printf(
                    o,
                    "miradb_query_duration_seconds_bucket{endpoint=\"%s\",le=\"+Inf\"} "
                    "%llu\n",
                    ep_names[e], (unsigned long long)cum);
            }
        }
        evbuffer_add_printf(o, "miradb_query_duration_seconds_sum{endpoint=\"%s\"} %.6f\n",
                            ep_names[e], (double)ld(&lat_sum_ns[e]) / 1e9);
        evbuffer_add_printf(o, "miradb_query_duration_seconds_count{endpoint=\"%s\"} %llu\n",
                            ep_names[e], (unsigned long long)cum);
    }
    counter(o, "miradb_query_blocks_considered_total",
            "Blocks (sealed and open) the planner looked at.", &scan.blocks_considered);
    counter(o, "miradb_query_blocks_skipped_zone_total", "Blocks skipped by their time zone map.",
            &scan.blocks_skipped_zone);
    counter(o, "miradb_query_blocks_skipped_bloom_total",
            "Blocks skipped by a bloom filter (body tokens and grams, resource attribute values).",
            &scan.blocks_skipped_bloom);
    counter(o, "miradb_query_blocks_skipped_dict_total",
            "Blocks skipped because no resource in their dictionary matches the selector.",
            &scan.blocks_skipped_dict);
    counter(o, "miradb_query_blocks_scanned_total", "Blocks whose rows were read.",
            &scan.blocks_scanned);
    counter(o, "miradb_query_rows_scanned_total", "Rows read by queries.", &scan.rows_scanned);
    counter(o, "miradb_query_bytes_read_total", "Log line bytes examined by queries.",
            &scan.bytes_read);
    counter(o, "miradb_query_blocks_failed_total",
            "Blocks that failed verification during a query (quarantined, rows skipped).",
            &scan.blocks_failed);
}
