/*
 * compact_test.c - the cold tier through the daemon (issue 12): sealed
 * blocks compacted with a short --compact-after answer the Loki, Tempo
 * and Prometheus endpoints with exactly the same counts before and after,
 * queries running while the blocks are swapped count every record once,
 * a restart neither compacts again nor loses or duplicates a record, and
 * retention by age and by bytes deletes cold blocks too.
 *
 * The records (tests/util/dump.h) are dated 2026-01-01, so their windows
 * are settled as soon as compaction is on.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define REQS 8
#define PER_REQ 250
#define TOTAL (REQS * PER_REQ)
#define T0_S (DUMP_T0 / 1000000000ull)

static const char *const paths[] = {"/v1/logs", "/v1/traces", "/v1/metrics"};

static void export(const struct daemon *d, enum signal s, uint64_t id0, uint32_t n)
{
    size_t len;
    uint8_t *body = dump_request(s, false, id0, n, &len);
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    struct http_resp r;
    cr_assert_not_null(body);
    cr_assert_eq(httpc_request(d->http_port, "POST", paths[s - 1], hdrs, body, len, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    http_resp_free(&r);
    free(body);
}

static double wait_at_least(const struct daemon *d, const char *series, double want)
{
    long long deadline = tclock_ms() + 60000;
    double v;
    while ((v = daemon_metric(d, series)) < want && tclock_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_geq(v, want, "%s stayed at %.0f, expected >= %.0f", series, v, want);
    return v;
}

static json_t *get_json(const struct daemon *d, const char *path)
{
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200, "GET %s: %d %.*s", path, r.status, (int)r.body_len,
                 (const char *)r.body);
    json_error_t je;
    json_t *j = json_loadb((const char *)r.body, r.body_len, 0, &je);
    cr_assert_not_null(j, "GET %s: not JSON", path);
    http_resp_free(&r);
    return j;
}

/* The single sample of an instant vector query (Loki or Prometheus). */
static long long instant(const struct daemon *d, const char *prefix, const char *q)
{
    char enc[512], path[800];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "%s?query=%s&time=%llu", prefix, enc,
             (unsigned long long)T0_S + 3000);
    json_t *j = get_json(d, path);
    json_t *res = json_object_get(json_object_get(j, "data"), "result");
    cr_assert(json_is_array(res) && json_array_size(res) == 1, "%s: one sample", q);
    json_t *v = json_array_get(json_object_get(json_array_get(res, 0), "value"), 1);
    long long n = atoll(json_string_value(v));
    json_decref(j);
    return n;
}

static long long log_count(const struct daemon *d)
{
    return instant(d, "/loki/api/v1/query",
                   "sum(count_over_time({service_name=\"miradb-test\"}[1h]))");
}

static long long point_count(const struct daemon *d)
{
    return instant(d, "/api/v1/query", "count(count_over_time(rec_gauge[1h]))");
}

/* Traces found by a Tempo search over the hour (one span per trace). */
static long long trace_count(const struct daemon *d)
{
    char path[300];
    snprintf(path, sizeof(path), "/api/search?q=%%7B%%7D&start=%llu&end=%llu&limit=100000",
             (unsigned long long)T0_S, (unsigned long long)T0_S + 3600);
    json_t *j = get_json(d, path);
    json_t *t = json_object_get(j, "traces");
    cr_assert(json_is_array(t));
    long long n = (long long)json_array_size(t);
    json_decref(j);
    return n;
}

struct tally {
    uint8_t seen[SIG_COUNT][TOTAL];
    uint64_t dup, stray;
};

static int count_row(void *ctx, const struct dump_row *r)
{
    struct tally *t = ctx;
    char why[128];
    int64_t id = dump_row_id(r, why, sizeof(why));
    if (id < 1 || id > TOTAL) {
        t->stray++;
        return 0;
    }
    if (t->seen[r->sig - 1][id - 1]++ > 0) {
        t->dup++;
    }
    return 0;
}

/* Every record of every signal once in the data directory, as a boot reads it. */
static void expect_each_once(const char *dir, bool all_cold)
{
    static struct tally t;
    struct dump_stats st;
    char err[256];
    memset(&t, 0, sizeof(t));
    cr_assert_eq(dump_data_dir(dir, count_row, &t, &st, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(t.dup, 0, "%llu records twice", (unsigned long long)t.dup);
    cr_expect_eq(t.stray, 0);
    for (int s = 0; s < SIG_COUNT; s++) {
        for (int i = 0; i < TOTAL; i++) {
            cr_assert_eq(t.seen[s][i], 1, "%s record %d seen %d times", signal_name(s + 1), i + 1,
                         t.seen[s][i]);
        }
        cr_expect_eq(st.sig[s].compacted_inputs, 0);
        if (all_cold) {
            cr_expect_eq(st.sig[s].wal_frames, 0, "%s: nothing replayed", signal_name(s + 1));
        }
    }
}

static void ingest_all(const struct daemon *d)
{
    for (int k = 0; k < REQS; k++) {
        for (int s = 1; s <= SIG_COUNT; s++) {
            export(d, (enum signal)s, 1 + (uint64_t)k * PER_REQ, PER_REQ);
        }
        /* one block or more per request and signal: wait for its seal */
        wait_at_least(d, "miradb_seals_total", 3.0 * (k + 1));
    }
    for (int s = 1; s <= SIG_COUNT; s++) {
        char series[128];
        snprintf(series, sizeof(series), "miradb_block_rows{signal=\"%s\"}", signal_name(s));
        wait_at_least(d, series, TOTAL);
    }
}

static double tier(const struct daemon *d, const char *what, enum signal s, const char *t)
{
    char series[160];
    snprintf(series, sizeof(series), "miradb_tier_%s{signal=\"%s\",tier=\"%s\"}", what,
             signal_name(s), t);
    return daemon_metric(d, series);
}

Test(compact, cold_blocks_answer_every_endpoint_with_the_same_rows)
{
    struct daemon d;
    char dir[256];
    const char *hot[] = {"--shards", "2", "--block-max-age", "150ms", "--compact-after", "0", NULL};
    cr_assert_eq(daemon_start(&d, NULL, hot), 0);
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    ingest_all(&d);
    cr_assert_eq(log_count(&d), TOTAL);
    cr_assert_eq(point_count(&d), TOTAL);
    cr_assert_eq(trace_count(&d), TOTAL);
    double hot_blocks = daemon_metric(&d, "miradb_blocks{signal=\"logs\"}");
    cr_assert_geq(hot_blocks, REQS, "one block per request at least");
    cr_expect_eq(daemon_metric(&d, "miradb_compactions_total"), 0, "compaction is off");
    cr_expect_eq(daemon_stop(&d), 0);

    /* Compaction on: every signal's blocks of the one settled window go
     * cold, while queries keep counting each record once. */
    const char *cold[] = {"--shards", "2", "--block-max-age", "150ms", "--compact-after",
                          "1s",       NULL};
    cr_assert_eq(daemon_start(&d, dir, cold), 0);
    /* The compactor runs at SCHED_IDLE: leave it idle time between queries. */
    for (int i = 0; i < 1500 && daemon_metric(&d, "miradb_compactions_total") < 3; i++) {
        cr_assert_eq(log_count(&d), TOTAL, "query %d during compaction", i);
        cr_assert_eq(point_count(&d), TOTAL, "query %d during compaction", i);
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    wait_at_least(&d, "miradb_compactions_total", 3);
    for (int s = 1; s <= SIG_COUNT; s++) {
        cr_expect_eq(tier(&d, "blocks", s, "hot"), 0, "%s", signal_name(s));
        cr_expect_eq(tier(&d, "blocks", s, "cold"), 1, "%s", signal_name(s));
        cr_expect_gt(tier(&d, "block_bytes", s, "cold"), 0);
    }
    cr_expect_eq(daemon_metric(&d, "miradb_compaction_failures_total"), 0);
    cr_expect_geq(daemon_metric(&d, "miradb_compaction_blocks_in_total"), 3 * hot_blocks);
    cr_expect_eq(daemon_metric(&d, "miradb_compaction_rows_total"), 3 * TOTAL);
    cr_expect_lt(daemon_metric(&d, "miradb_compaction_bytes_out_total"),
                 daemon_metric(&d, "miradb_compaction_bytes_in_total"));
    /* The backlog is counted at the start of a pass: the next one finds none. */
    wait_at_least(&d, "miradb_compaction_passes_total",
                  daemon_metric(&d, "miradb_compaction_passes_total") + 2);
    for (int s = 1; s <= SIG_COUNT; s++) {
        char series[128];
        snprintf(series, sizeof(series), "miradb_compaction_backlog_blocks{signal=\"%s\"}",
                 signal_name(s));
        cr_expect_eq(daemon_metric(&d, series), 0, "%s", series);
    }
    cr_expect_eq(log_count(&d), TOTAL);
    cr_expect_eq(point_count(&d), TOTAL);
    cr_expect_eq(trace_count(&d), TOTAL);
    cr_expect_eq(daemon_metric(&d, "miradb_block_rows{signal=\"traces\"}"), TOTAL);
    cr_expect_eq(daemon_stop(&d), 0);
    expect_each_once(dir, true);

    /* A restart keeps the cold blocks as they are and answers the same. */
    cr_assert_eq(daemon_start(&d, dir, cold), 0);
    wait_at_least(&d, "miradb_compaction_passes_total", 2);
    cr_expect_eq(tier(&d, "blocks", SIG_LOGS, "cold"), 1);
    cr_expect_eq(log_count(&d), TOTAL);
    cr_expect_eq(trace_count(&d), TOTAL);
    cr_expect_eq(point_count(&d), TOTAL);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 0,
                 "the watermarks survived the merge");
    cr_expect_eq(daemon_metric(&d, "miradb_compactions_total"), 0, "nothing compacted again");
    cr_expect_eq(daemon_stop(&d), 0);
    expect_each_once(dir, true);
}

Test(compact, retention_by_age_and_by_bytes_deletes_cold_blocks)
{
    struct daemon d;
    char dir[256];
    const char *cold[] = {"--shards", "1", "--block-max-age", "150ms", "--compact-after",
                          "1s",       NULL};
    cr_assert_eq(daemon_start(&d, NULL, cold), 0);
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    export(&d, SIG_LOGS, 1, PER_REQ);
    wait_at_least(&d, "miradb_compactions_total", 1);
    cr_expect_eq(tier(&d, "blocks", SIG_LOGS, "cold"), 1);
    double bytes = tier(&d, "block_bytes", SIG_LOGS, "cold");
    cr_assert_gt(bytes, 0);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Bytes: a limit below the cold block deletes it. */
    char cap[32];
    snprintf(cap, sizeof(cap), "%.0f", bytes - 1);
    const char *by_bytes[] = {"--shards", "1", "--compact-after", "1s", "--retention-bytes",
                              cap,        NULL};
    cr_assert_eq(daemon_start(&d, dir, by_bytes), 0);
    wait_at_least(&d, "miradb_retention_deleted_blocks_total{signal=\"logs\"}", 1);
    cr_expect_eq(tier(&d, "blocks", SIG_LOGS, "cold"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_retention_deleted_bytes_total{signal=\"logs\"}"), bytes);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Age: a new cold block of records dated 2026-01-01 is older than 30 days. */
    cr_assert_eq(daemon_start(&d, dir, cold), 0);
    export(&d, SIG_LOGS, PER_REQ + 1, PER_REQ);
    wait_at_least(&d, "miradb_compactions_total", 1);
    cr_expect_eq(daemon_stop(&d), 0);
    const char *by_age[] = {"--shards", "1", "--compact-after", "1s", "--retention-age",
                            "30d",      NULL};
    cr_assert_eq(daemon_start(&d, dir, by_age), 0);
    wait_at_least(&d, "miradb_retention_deleted_blocks_total{signal=\"logs\"}", 1);
    cr_expect_eq(tier(&d, "blocks", SIG_LOGS, "cold"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_blocks{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Deleted for good: a restart replays none of their WAL frames. */
    cr_assert_eq(daemon_start(&d, dir, by_age), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}
