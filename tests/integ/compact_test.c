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

/* LogQL pipelines with label filters before and after a line filter, each
 * with the rows it keeps (ids over the record's rec.id and its body,
 * "rec-" and 16 hex digits), and how many rows reach a line stage: a row
 * the leading label filters drop has its line neither read (a cold
 * block's bodies are not rebuilt for it) nor counted. */
struct pq {
    const char *pipe;
    bool (*keep)(uint64_t id, const char *body);
    bool (*pre)(uint64_t id);
};

static bool id_1001_1010(uint64_t id)
{
    return id > 1000 && id <= 1010;
}

static bool k_1001_1010(uint64_t id, const char *body)
{
    (void)body;
    return id_1001_1010(id);
}

static bool id_over_1000(uint64_t id)
{
    return id > 1000;
}

static bool k_over_1000_hex3(uint64_t id, const char *body)
{
    const char *h = body + 4;
    while (*h == '0') {
        h++;
    }
    return id > 1000 && *h == '3' && h > body + 4;
}

static bool id_none(uint64_t id)
{
    (void)id;
    return false;
}

static bool k_none(uint64_t id, const char *body)
{
    (void)id;
    (void)body;
    return false;
}

static bool id_all(uint64_t id)
{
    (void)id;
    return true;
}

static bool k_hex7_under_100(uint64_t id, const char *body)
{
    return strstr(body, "7") != NULL && id < 100;
}

static const struct pq pqs[] = {
    {" | rec_id > 1000 | rec_id <= 1010", k_1001_1010, id_1001_1010},
    {" | rec_id > 1000 |~ \"rec-0+3\"", k_over_1000_hex3, id_over_1000},
    {" | rec_id > 999999 |= \"rec-\"", k_none, id_none},
    {" |= \"7\" | rec_id < 100", k_hex7_under_100, id_all},
};

/* Every pipeline of pqs over the hour: its lines, exactly, and its stats'
 * bytes; the answers' bytes appended to |acc| (hot and cold must agree). */
static void check_pipelines(const struct daemon *d, char *acc, size_t cap)
{
    for (size_t k = 0; k < sizeof(pqs) / sizeof(pqs[0]); k++) {
        char q[256], enc[512], path[900];
        snprintf(q, sizeof(q), "{service_name=\"miradb-test\"}%s", pqs[k].pipe);
        httpc_url_enc(enc, sizeof(enc), q);
        snprintf(path, sizeof(path),
                 "/loki/api/v1/query_range?query=%s&start=%llu&end=%llu&limit=5000"
                 "&direction=forward",
                 enc, (unsigned long long)T0_S, (unsigned long long)T0_S + 3600);
        json_t *j = get_json(d, path);
        json_t *data = json_object_get(j, "data"), *res = json_object_get(data, "result");
        cr_assert(json_is_array(res), "%s", q);
        static uint8_t got[TOTAL + 1];
        memset(got, 0, sizeof(got));
        size_t n = 0;
        for (size_t r = 0; r < json_array_size(res); r++) {
            json_t *vals = json_object_get(json_array_get(res, r), "values");
            for (size_t i = 0; i < json_array_size(vals); i++) {
                const char *line = json_string_value(json_array_get(json_array_get(vals, i), 1));
                cr_assert(line != NULL && strlen(line) == 20, "%s: line %s", q, line);
                uint64_t id = strtoull(line + 4, NULL, 16);
                cr_assert(id >= 1 && id <= TOTAL && got[id]++ == 0, "%s: line %s", q, line);
                n++;
            }
        }
        size_t want = 0, pre = 0;
        for (uint64_t id = 1; id <= TOTAL; id++) {
            char body[32];
            snprintf(body, sizeof(body), "rec-%016llx", (unsigned long long)id);
            bool keep = pqs[k].keep(id, body);
            cr_assert_eq(got[id], keep, "%s: record %llu", q, (unsigned long long)id);
            want += keep;
            pre += pqs[k].pre(id);
        }
        cr_assert_eq(n, want, "%s", q);
        json_t *sum = json_object_get(json_object_get(data, "stats"), "summary");
        cr_assert_eq(json_integer_value(json_object_get(sum, "totalBytesProcessed")), 20 * pre,
                     "%s: the lines of the rows the label filters keep", q);
        cr_assert_eq(json_integer_value(json_object_get(sum, "totalLinesProcessed")), TOTAL, "%s",
                     q);
        char *txt = json_dumps(res, JSON_COMPACT);
        size_t at = strlen(acc);
        cr_assert_lt(at + strlen(txt) + 1, cap);
        memcpy(acc + at, txt, strlen(txt) + 1);
        free(txt);
        json_decref(j);
    }
}

Test(compact, cold_blocks_answer_every_endpoint_with_the_same_rows)
{
    static char hot_ans[1 << 20], cold_ans[1 << 20];
    struct daemon d;
    char dir[256];
    const char *hot[] = {"--shards", "2", "--block-max-age", "150ms", "--compact-after", "0", NULL};
    cr_assert_eq(daemon_start(&d, NULL, hot), 0);
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    ingest_all(&d);
    cr_assert_eq(log_count(&d), TOTAL);
    cr_assert_eq(point_count(&d), TOTAL);
    cr_assert_eq(trace_count(&d), TOTAL);
    check_pipelines(&d, hot_ans, sizeof(hot_ans));
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
    check_pipelines(&d, cold_ans, sizeof(cold_ans));
    cr_expect_str_eq(cold_ans, hot_ans, "the cold block answers as the hot ones did");
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
