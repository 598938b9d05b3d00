/*
 * ingest_test.c - admission (waiting, then refusing with a retry delay)
 * and WAL replay across a hard kill, against the real daemon.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/oblock.h"
#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/httpc.h"

struct export_call {
    int port;
    const uint8_t *body;
    size_t len;
    struct http_resp resp;
    int rc;
};

static void *export_thread(void *arg)
{
    struct export_call *c = arg;
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    c->rc = httpc_request(c->port, "POST", "/v1/logs", hdrs, c->body, c->len, 0, &c->resp);
    return NULL;
}

/* Fires |n| exports at once and waits for every answer. */
static void export_concurrently(struct daemon *d, struct export_call *calls, int n,
                                const uint8_t *body, size_t len)
{
    pthread_t th[16];
    for (int i = 0; i < n; i++) {
        calls[i] = (struct export_call){.port = d->http_port, .body = body, .len = len};
        pthread_create(&th[i], NULL, export_thread, &calls[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(calls[i].rc, 0, "request %d got no answer", i);
    }
}

Test(admission, requests_wait_for_queue_room_instead_of_failing)
{
    struct daemon d;
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    const char *args[] = {"--shards",     "1",     "--io-threads",       "1",   "--queue", "1",
                          "--admit-wait", "20000", "--test-shard-delay", "300", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    struct export_call calls[4];
    export_concurrently(&d, calls, 4, body, len);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(calls[i].resp.status, 200, "request %d: %d", i, calls[i].resp.status);
        http_resp_free(&calls[i].resp);
    }
    /* One slot, a slow shard: at least the later arrivals had to wait. */
    cr_expect_geq(daemon_metric(&d, "miradb_admission_waits_total"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_admission_shed_total"), 0);
    cr_expect_eq(
        daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"http_protobuf\"}"),
        40);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 40);
    cr_expect_eq(daemon_stop(&d), 0);
    free(body);
}

Test(admission, past_the_wait_requests_get_503_with_retry_after_and_nothing_accepted_is_lost)
{
    struct daemon d;
    size_t len;
    char buf[64];
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    const char *args[] = {"--shards",     "1",   "--io-threads",       "1",    "--queue", "1",
                          "--admit-wait", "200", "--test-shard-delay", "1500", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    struct export_call calls[3];
    export_concurrently(&d, calls, 3, body, len);
    int ok = 0, shed = 0;
    for (int i = 0; i < 3; i++) {
        if (calls[i].resp.status == 200) {
            ok++;
        } else {
            cr_expect_eq(calls[i].resp.status, 503, "request %d: %d", i, calls[i].resp.status);
            const char *ra = http_resp_header(&calls[i].resp, "Retry-After", buf, sizeof(buf));
            cr_expect_not_null(ra, "a 503 carries Retry-After");
            cr_expect(ra != NULL && atoi(ra) >= 1, "Retry-After is whole seconds: %s", ra);
            cr_expect_gt(calls[i].resp.body_len, 0, "a google.rpc.Status body");
            shed++;
        }
        http_resp_free(&calls[i].resp);
    }
    cr_expect_eq(ok, 1);
    cr_expect_eq(shed, 2);
    cr_expect_eq(daemon_metric(&d, "miradb_admission_shed_total"), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 2);
    cr_expect_eq(
        daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"http_protobuf\"}"),
        10);

    /* What was acknowledged survives a hard kill; what was refused never appears. */
    daemon_kill(&d);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    cr_assert_eq(daemon_start(&d, dir, NULL), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 10);
    cr_expect_eq(daemon_stop(&d), 0);
    free(body);
}

/* Appends |n| garbage bytes to the newest WAL segment of |sigdir|. */
/* POSTs |body| to |path| and asserts a 200. */
static void post_ok(const struct daemon *d, const char *path, const char *const *hdrs,
                    const void *body, size_t len)
{
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", path, hdrs, body, len, 0, &r), 0, "%s", path);
    cr_assert_eq(r.status, 200, "%s: status %d", path, r.status);
    http_resp_free(&r);
}

static void tear_wal(const char *data_dir, const char *sigdir, size_t n)
{
    char dir[600], path[900], best[300] = "";
    snprintf(dir, sizeof(dir), "%s/wal/%s", data_dir, sigdir);
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp, "no WAL directory %s", dir);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        if (strstr(e->d_name, ".wal") != NULL && strcmp(e->d_name, best) > 0) {
            snprintf(best, sizeof(best), "%s", e->d_name);
        }
    }
    closedir(dp);
    cr_assert(best[0] != '\0', "no WAL segment in %s", dir);
    snprintf(path, sizeof(path), "%s/%s", dir, best);
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert_geq(fd, 0);
    uint8_t junk[64];
    memset(junk, 0x5a, sizeof(junk));
    cr_assert_eq(write(fd, junk, n), (ssize_t)n);
    close(fd);
}

Test(replay, every_acknowledged_export_is_back_after_sigkill_and_a_torn_tail_is_cut)
{
    struct daemon d;
    size_t lpb, ljs, ltr, lm;
    uint8_t *logs_pb = httpc_vector("http-protobuf-logs.pb", &lpb);
    uint8_t *logs_js = httpc_vector("http-json-logs.json", &ljs);
    uint8_t *traces = httpc_vector("http-protobuf-traces.pb", &ltr);
    uint8_t *metrics = httpc_vector("http-protobuf-metrics.pb", &lm);
    const char *pb[] = {"Content-Type: application/x-protobuf", NULL};
    const char *js[] = {"Content-Type: application/json", NULL};
    const char *args[] = {"--shards", "1", NULL};

    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int i = 0; i < 3; i++) {
        post_ok(&d, "/v1/logs", pb, logs_pb, lpb);
    }
    post_ok(&d, "/v1/logs", js, logs_js, ljs);
    post_ok(&d, "/v1/traces", pb, traces, ltr);
    post_ok(&d, "/v1/metrics", pb, metrics, lm);
    double points = daemon_metric(&d, "miradb_open_block_rows{signal=\"metrics\"}");
    cr_assert_eq(points, 21, "the vector holds 21 data points");
    daemon_kill(&d);

    char dir[256];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    tear_wal(dir, "logs-0", 37); /* a torn frame after the last good one */
    cr_assert_eq(daemon_start(&d, dir, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 4);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_torn_frames_total{signal=\"logs\"}"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 40);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"traces\"}"), 57);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"metrics\"}"), 21);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replay_bad_frames_total{signal=\"logs\"}"), 0);

    /* Appends continue after the replayed frames; a clean stop replays them all again. */
    post_ok(&d, "/v1/logs", pb, logs_pb, lpb);
    cr_assert_eq(daemon_stop(&d), 0);
    cr_assert_eq(daemon_start(&d, dir, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 5);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_torn_frames_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 50);
    cr_expect_eq(daemon_stop(&d), 0);
    free(logs_pb);
    free(logs_js);
    free(traces);
    free(metrics);
}

Test(ops, help_names_every_flag_and_bad_flags_exit_2)
{
    char out[8192];
    const char *bin = getenv("MIRADB_BIN") ? getenv("MIRADB_BIN") : "build/asan/miradb";
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "%s serve --help", bin);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    cr_expect_eq(pclose(p), 0);
    const char *flags[] = {"--data",       "--grpc-listen",      "--http-listen",
                           "--io-threads", "--shards",           "--queue",
                           "--admit-wait", "--memory-budget",    "--max-request-bytes",
                           "--ack",        "--shutdown-timeout", NULL};
    for (int i = 0; flags[i] != NULL; i++) {
        cr_expect(strstr(out, flags[i]) != NULL, "--help does not mention %s", flags[i]);
    }
    snprintf(cmd, sizeof(cmd), "%s serve --ack maybe 2>/dev/null", bin);
    cr_expect_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof(cmd), "%s --help >/dev/null", bin);
    cr_expect_eq(WEXITSTATUS(system(cmd)), 0);
}

/* Logs rows the dump util reads back from the WAL, by frame (seq 1 or 2). */
struct wal_logs {
    struct log_view v[2][16];
    uint8_t attrs[2][16][4096];
    char body[2][16][1024];
    int n[2];
};

static int keep_wal_log(void *ctx, const struct dump_row *r)
{
    struct wal_logs *w = ctx;
    if (r->sig != SIG_LOGS || !r->from_wal) {
        return 0;
    }
    cr_assert(r->wal_seq == 1 || r->wal_seq == 2, "frame seq %llu", (unsigned long long)r->wal_seq);
    int f = (int)r->wal_seq - 1, i = w->n[f]++;
    cr_assert_lt(i, 16);
    cr_assert_lt(r->log->attrs.len, sizeof(w->attrs[f][i]));
    cr_assert_lt(r->log->body_str.len, sizeof(w->body[f][i]));
    w->v[f][i] = *r->log;
    memcpy(w->attrs[f][i], r->log->attrs.p, r->log->attrs.len);
    memcpy(w->body[f][i], r->log->body_str.p, r->log->body_str.len);
    return 0;
}

Test(replay, a_gzip_export_is_logged_as_it_arrived_and_replays_to_the_same_records)
{
    struct daemon d;
    size_t lgz, lpb, tgz;
    /* Real exporters' requests, gzip'd as they sent them (each inflates to
     * the plain vector beside it). */
    uint8_t *logs_gz = httpc_vector("http-protobuf-logs.pb.gz", &lgz);
    uint8_t *logs_pb = httpc_vector("http-protobuf-logs.pb", &lpb);
    uint8_t *traces_gz = httpc_vector("http-json-traces.json.gz", &tgz);
    const char *pbz[] = {"Content-Type: application/x-protobuf", "Content-Encoding: gzip", NULL};
    const char *pb[] = {"Content-Type: application/x-protobuf", NULL};
    const char *jsz[] = {"Content-Type: application/json", "Content-Encoding: gzip", NULL};
    const char *args[] = {"--shards", "1", NULL};

    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    post_ok(&d, "/v1/logs", pbz, logs_gz, lgz);
    post_ok(&d, "/v1/logs", pb, logs_pb, lpb);
    post_ok(&d, "/v1/traces", jsz, traces_gz, tgz);
    /* The gzip'd ones as they arrived (a 20-byte header and the u32 length),
     * the plain one as it is. */
    cr_expect_eq(daemon_metric(&d, "miradb_wal_bytes_total{signal=\"logs\"}"),
                 (double)(24 + lgz + 20 + lpb));
    cr_expect_eq(daemon_metric(&d, "miradb_wal_bytes_total{signal=\"traces\"}"),
                 (double)(24 + tgz));
    double spans = daemon_metric(&d, "miradb_open_block_rows{signal=\"traces\"}");
    cr_assert_gt(spans, 0);
    cr_assert_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 20);
    daemon_kill(&d);

    /* Offline, as the next boot reads it: frame 1 (gzip'd) gives the same
     * rows, field by field, as frame 2 (the same request plain). */
    static struct wal_logs w;
    struct dump_stats st;
    char err[256];
    memset(&w, 0, sizeof(w));
    cr_assert_eq(dump_data_dir(d.data_dir, keep_wal_log, &w, &st, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(w.n[0], 10);
    cr_assert_eq(w.n[1], 10);
    cr_assert_eq(st.sig[0].wal_bad_frames, 0);
    for (int i = 0; i < 10; i++) {
        const struct log_view *a = &w.v[0][i], *b = &w.v[1][i];
        cr_expect_eq(a->time_ns, b->time_ns, "row %d", i);
        cr_expect_eq(a->observed_ns, b->observed_ns, "row %d", i);
        cr_expect_eq(a->severity_number, b->severity_number, "row %d", i);
        cr_expect_eq(a->body_type, b->body_type, "row %d", i);
        cr_expect_eq(a->flags, b->flags, "row %d", i);
        cr_expect_eq(memcmp(a->trace_id, b->trace_id, 16), 0, "row %d", i);
        cr_expect_eq(a->body_str.len, b->body_str.len, "row %d", i);
        cr_expect_eq(memcmp(w.body[0][i], w.body[1][i], a->body_str.len), 0, "row %d", i);
        cr_expect_eq(a->attrs.len, b->attrs.len, "row %d", i);
        cr_expect_eq(a->attrs.count, b->attrs.count, "row %d", i);
        cr_expect_eq(memcmp(w.attrs[0][i], w.attrs[1][i], a->attrs.len), 0, "row %d", i);
    }

    /* And the daemon's own replay. */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    cr_assert_eq(daemon_start(&d, dir, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"logs\"}"), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replayed_frames_total{signal=\"traces\"}"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replay_bad_frames_total{signal=\"logs\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_wal_replay_bad_frames_total{signal=\"traces\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 20);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"traces\"}"), spans);
    cr_expect_eq(daemon_stop(&d), 0);
    free(logs_gz);
    free(logs_pb);
    free(traces_gz);
}
