/*
 * retention_test.c - --retention-age and --retention-bytes delete the oldest
 * sealed blocks first and never the open block, counted in /metrics.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define BATCH 200

static void export_logs(const struct daemon *d, uint64_t id0)
{
    size_t len;
    uint8_t *body = dump_request(SIG_LOGS, false, id0, BATCH, &len);
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    struct http_resp r;
    cr_assert_not_null(body);
    cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/logs", hdrs, body, len, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    http_resp_free(&r);
    free(body);
}

/* Polls until |series| >= |want| (deadline 30 s); returns the last value. */
static double wait_at_least(const struct daemon *d, const char *series, double want)
{
    long long deadline = tclock_ms() + 30000;
    double v;
    while ((v = daemon_metric(d, series)) < want && tclock_ms() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_geq(v, want, "%s stayed at %.0f, expected >= %.0f", series, v, want);
    return v;
}

struct ids {
    uint64_t min, max, n;
};

static int note(void *ctx, const struct dump_row *r)
{
    struct ids *s = ctx;
    char why[128];
    int64_t id = dump_row_id(r, why, sizeof(why));
    cr_assert_geq(id, 0, "a row that is not a test record: %s", why);
    s->min = s->n == 0 || (uint64_t)id < s->min ? (uint64_t)id : s->min;
    s->max = s->n == 0 || (uint64_t)id > s->max ? (uint64_t)id : s->max;
    s->n++;
    return 0;
}

Test(retention, age_deletes_old_sealed_blocks_but_never_the_open_block)
{
    struct daemon d;
    /* The test records are dated 2026-01-01: older than 30 days. */
    const char *args[] = {"--shards", "1", "--block-max-age", "1h", "--retention-age", "30d", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    export_logs(&d, 1);
    double runs = daemon_metric(&d, "miradb_retention_runs_total");
    wait_at_least(&d, "miradb_retention_runs_total", runs + 2);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), BATCH,
                 "the open block is never deleted, however old its rows");
    cr_expect_eq(daemon_metric(&d, "miradb_retention_deleted_blocks_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Seal it (short max age) and it goes at the next pass. */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    const char *args2[] = {"--shards", "1", "--block-max-age", "200ms", "--retention-age",
                           "30d",      NULL};
    cr_assert_eq(daemon_start(&d, dir, args2), 0);
    wait_at_least(&d, "miradb_retention_deleted_blocks_total{signal=\"logs\"}", 1);
    cr_expect_eq(daemon_metric(&d, "miradb_blocks{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 0);
    cr_expect_gt(daemon_metric(&d, "miradb_retention_deleted_bytes_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Deleted for good, also after a restart: the WAL frames the block held
     * are not replayed although the WAL segment is still there. */
    cr_assert_eq(daemon_start(&d, dir, args2), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_stop(&d), 0);
    struct ids seen = {0};
    struct dump_stats st;
    char err[256];
    cr_assert_eq(dump_data_dir(dir, note, &seen, &st, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(seen.n, 0, "%llu rows survived retention", (unsigned long long)seen.n);
}

Test(retention, bytes_keep_the_newest_blocks_and_delete_the_oldest_first)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--block-max-age", "200ms", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    export_logs(&d, 1);
    wait_at_least(&d, "miradb_blocks{signal=\"logs\"}", 1);
    double one = daemon_metric(&d, "miradb_block_bytes{signal=\"logs\"}");
    cr_assert_gt(one, 0);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Room for two blocks of this size (all batches are alike). */
    char dir[256], cap[32];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    snprintf(cap, sizeof(cap), "%.0f", one * 2.5);
    const char *args2[] = {"--shards", "1", "--block-max-age", "200ms", "--retention-bytes",
                           cap,        NULL};
    cr_assert_eq(daemon_start(&d, dir, args2), 0);
    for (int b = 1; b <= 4; b++) {
        export_logs(&d, 1 + (uint64_t)b * BATCH);
        /* one block per batch: wait for this one's seal before the next */
        wait_at_least(&d, "miradb_seals_total", b);
    }
    wait_at_least(&d, "miradb_retention_deleted_blocks_total{signal=\"logs\"}", 3);
    cr_expect_eq(daemon_metric(&d, "miradb_blocks{signal=\"logs\"}"), 2);
    cr_expect_leq(daemon_metric(&d, "miradb_block_bytes{signal=\"logs\"}"), one * 2.5);
    cr_expect_eq(daemon_stop(&d), 0);

    /* What is left is the two newest batches, each record once. */
    struct ids seen = {0};
    struct dump_stats st;
    char err[256];
    cr_assert_eq(dump_data_dir(dir, note, &seen, &st, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(seen.n, 2 * BATCH);
    cr_expect_eq(seen.min, 1 + 3 * BATCH);
    cr_expect_eq(seen.max, 5 * BATCH);
}
