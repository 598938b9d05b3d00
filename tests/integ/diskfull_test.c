/*
 * diskfull_test.c - the daemon on a data directory that fills up (issue 9,
 * findings 4 and 5), on a small tmpfs this test mounts (it runs as root;
 * without the right to mount, each test is skipped with the reason).
 *
 *   - exports the WAL cannot take are answered HTTP 503 with Retry-After
 *     and gRPC UNAVAILABLE with RetryInfo, never 500 / INTERNAL (OTLP
 *     exporters drop data on those);
 *   - every failed seal attempt is logged with its cause, as many lines as
 *     /metrics counts;
 *   - SIGTERM while a seal keeps failing exits 0 within --shutdown-timeout
 *     (the old daemon waited for the disk to free up), and once space is
 *     back a restart on the same directory has every acknowledged record
 *     exactly once and none of the refused ones;
 *   - below --min-free-bytes (the disk not yet full) exports are refused the
 *     same way, /ready is 503 with the reason, queries answer, and exports
 *     are taken again once space returns, without a restart (issue 15).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "storage/batch.h"
#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define LOGS_GRPC_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define ACKED_N 100     /* records acknowledged before the disk fills */
#define REFUSED_ID 5000 /* first id of the exports sent once it is full */
#define REFUSED_N 400   /* a frame of several pages: it cannot fit in the WAL's last page */

static char mnt[256];
static bool mounted;

/* A fresh 16 MiB tmpfs at |mnt|, or the test is skipped. */
static void mount_small_fs(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(mnt, sizeof(mnt), "%s/miradb-full-XXXXXX", t != NULL && *t != '\0' ? t : "/tmp");
    cr_assert_not_null(mkdtemp(mnt), "mkdtemp: %s", strerror(errno));
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=16m,mode=0755") < 0) {
        int e = errno;
        rmdir(mnt);
        mnt[0] = '\0';
        cr_skip_test("cannot mount a 16 MiB tmpfs to fill (%s): run as root to test a full disk",
                     strerror(e));
    }
    mounted = true;
}

/* Detached even if a daemon still holds files there (it is killed at exit). */
static void unmount_small_fs(void)
{
    if (mounted) {
        umount2(mnt, MNT_DETACH);
        rmdir(mnt);
        mounted = false;
    }
}

TestSuite(diskfull, .init = mount_small_fs, .fini = unmount_small_fs);

/* Writes |mnt|/filler until the filesystem has |leave| bytes free or less
 * (0: no page left). */
static void fill_disk_to(uint64_t leave)
{
    char path[300];
    static char chunk[1 << 16];
    struct statvfs v;
    memset(chunk, 0x5a, sizeof(chunk));
    snprintf(path, sizeof(path), "%s/filler", mnt);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    for (int i = 0; i < 1024; i++) { /* 64 MiB at most: the tmpfs is 16 */
        cr_assert_eq(statvfs(mnt, &v), 0);
        if ((uint64_t)v.f_bavail * v.f_frsize <= leave) {
            break;
        }
        cr_assert_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk), "filling: %s",
                     strerror(errno));
    }
    close(fd);
    cr_assert_eq(statvfs(mnt, &v), 0);
    cr_assert_leq((uint64_t)v.f_bavail * v.f_frsize, leave);
    cr_assert_gt((uint64_t)v.f_bavail * v.f_frsize, leave - (2u << 20), "filled too far");
}

/* Writes |mnt|/filler until the filesystem has no page left. */
static void fill_disk(void)
{
    char path[300];
    static char chunk[1 << 16];
    memset(chunk, 0xa5, sizeof(chunk));
    snprintf(path, sizeof(path), "%s/filler", mnt);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    size_t piece = sizeof(chunk);
    for (;;) {
        ssize_t k = write(fd, chunk, piece);
        if (k < 0 && errno == ENOSPC) {
            if (piece == 1) {
                break;
            }
            piece /= 2;
            continue;
        }
        cr_assert_gt(k, 0, "filling the disk: %s", strerror(errno));
    }
    close(fd);
}

static void free_disk(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/filler", mnt);
    unlink(path);
}

/* Lines of the daemon's log holding |needle|. */
static int log_count(const struct daemon *d, const char *needle, char *first, size_t cap)
{
    size_t len;
    char *log = (char *)httpc_read_file(d->log_path, &len);
    int n = 0;
    if (first != NULL && cap > 0) {
        first[0] = '\0';
    }
    for (char *p = log; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        if (n++ == 0 && first != NULL) {
            char *bol = p;
            while (bol > log && bol[-1] != '\n') {
                bol--;
            }
            char *eol = strchr(p, '\n');
            snprintf(first, cap, "%.*s", (int)(eol != NULL ? eol - bol : (long)strlen(bol)), bol);
        }
    }
    free(log);
    return n;
}

/* Waits up to |ms| for at least |want| lines holding |needle|. */
static int log_wait(const struct daemon *d, const char *needle, int want, int ms)
{
    long long deadline = tclock_ms() + ms;
    int n;
    while ((n = log_count(d, needle, NULL, 0)) < want && tclock_ms() < deadline) {
        tclock_nap_ms(20);
    }
    return n;
}

/* One OTLP/HTTP protobuf logs export of records id0 .. id0 + n - 1. */
static void http_export(const struct daemon *d, uint64_t id0, uint32_t n, struct http_resp *r)
{
    size_t len;
    uint8_t *body = dump_request(SIG_LOGS, false, id0, n, &len);
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    cr_assert_not_null(body);
    cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/logs", hdrs, body, len, 0, r), 0,
                 "no answer to the export of ids %llu..", (unsigned long long)id0);
    free(body);
}

struct tally {
    uint64_t acked_seen[2 * ACKED_N]; /* the second half: acknowledged after recovery */
    uint64_t refused_seen;
    uint64_t other;
};

static int count_row(void *ctx, const struct dump_row *r)
{
    struct tally *t = ctx;
    char why[200];
    int64_t id = dump_row_id(r, why, sizeof(why));
    if (id >= 0 && id < 2 * ACKED_N) {
        t->acked_seen[id]++;
    } else if (id >= REFUSED_ID && id < REFUSED_ID + 2 * REFUSED_N) {
        t->refused_seen++;
    } else {
        t->other++;
    }
    return 0;
}

/*
 * Acknowledged rows sit in the open block when the disk fills; its seal
 * then fails every time it is tried. The daemon started with
 * --block-max-age 1s seals one second after the first row.
 */
static void start_and_fill(struct daemon *d, const char *data, const char *timeout)
{
    const char *args[] = {"--shards",
                          "1",
                          "--io-threads",
                          "1",
                          "--block-max-age",
                          "1s",
                          "--shutdown-timeout",
                          timeout,
                          "--min-free-bytes",
                          "0",
                          NULL};
    cr_assert_eq(daemon_start(d, data, args), 0);
    struct http_resp r;
    http_export(d, 0, ACKED_N, &r);
    cr_assert_eq(r.status, 200, "export before the disk filled: %d %.*s", r.status, (int)r.body_len,
                 (const char *)r.body);
    http_resp_free(&r);
    fill_disk();
}

Test(diskfull, refusals_are_503_and_unavailable_and_every_seal_failure_is_logged_with_its_cause)
{
    struct daemon d;
    char data[300], buf[64], line[1024];
    snprintf(data, sizeof(data), "%s/data", mnt);
    start_and_fill(&d, data, "2s");

    /* The WAL cannot take a frame of several pages: HTTP 503 + Retry-After. */
    struct http_resp r;
    http_export(&d, REFUSED_ID, REFUSED_N, &r);
    cr_expect_eq(r.status, 503, "HTTP export on a full disk: %d %.*s", r.status, (int)r.body_len,
                 (const char *)r.body);
    const char *ra = http_resp_header(&r, "Retry-After", buf, sizeof(buf));
    cr_expect_not_null(ra, "a 503 for a full disk carries Retry-After");
    cr_expect(ra != NULL && atoi(ra) >= 1, "Retry-After is whole seconds: %s", ra);
    cr_expect(r.body_len > 0 && memmem(r.body, r.body_len, "No space left on device", 23) != NULL,
              "the answer names the cause: %.*s", (int)r.body_len, (const char *)r.body);
    http_resp_free(&r);

    /* The same over gRPC: UNAVAILABLE with RetryInfo, never INTERNAL. */
    size_t len, flen;
    uint8_t *body = dump_request(SIG_LOGS, false, REFUSED_ID + REFUSED_N, REFUSED_N, &len);
    uint8_t *framed = h2c_frame(body, len, false, &flen);
    struct h2c_call c = {.body = framed, .body_len = flen};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_GRPC_PATH, NULL, framed, flen, &c), 0);
    cr_expect_eq(c.grpc_status, 14, "gRPC export on a full disk: status %d (%s)", c.grpc_status,
                 c.grpc_message);
    cr_expect_neq(c.details_bin[0], '\0',
                  "UNAVAILABLE without grpc-status-details-bin (RetryInfo)");
    h2c_call_free(&c);
    free(framed);
    free(body);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"storage\"}"), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"internal\"}"), 0);

    /* The open block's seal fails (and is retried after 1 s, 2 s...): each
     * attempt is one log line naming the cause, as many as /metrics counts. */
    cr_assert_geq(log_wait(&d, "event=seal_failed", 2, 10000), 2,
                  "fewer than 2 seal failures logged within 10 s");
    double failures = daemon_metric(&d, "miradb_seal_failures_total");
    cr_expect_geq(failures, 2);
    int logged = log_wait(&d, "event=seal_failed", (int)failures, 5000);
    cr_expect_geq(logged, (int)failures, "%d seal failures logged, %.0f counted", logged, failures);
    cr_expect_eq(log_count(&d, "event=seal_failed", line, sizeof(line)),
                 log_count(&d, "error=\"No space left on device\" path=", NULL, 0),
                 "a seal failure line without its cause: %s", line);
    cr_expect(strstr(line, "signal=logs shard=0") != NULL && strstr(line, "step=write") != NULL &&
                  strstr(line, "next=\"retry in 1s\"") != NULL,
              "first seal failure line: %s", line);

    free_disk();
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(diskfull, sigterm_while_a_seal_keeps_failing_exits_within_the_timeout_and_loses_nothing)
{
    struct daemon d;
    char data[300], line[1024];
    snprintf(data, sizeof(data), "%s/data", mnt);
    start_and_fill(&d, data, "2s");
    long long deadline = tclock_ms() + 10000;
    while (daemon_metric(&d, "miradb_seal_failures_total") < 1 && tclock_ms() < deadline) {
        tclock_nap_ms(20);
    }
    cr_assert_geq(daemon_metric(&d, "miradb_seal_failures_total"), 1, "no seal failed within 10 s");
    struct http_resp r;
    http_export(&d, REFUSED_ID, REFUSED_N, &r);
    cr_expect_eq(r.status, 503, "export on a full disk: %d", r.status);
    http_resp_free(&r);

    /* The seal keeps failing; the stop gives it --shutdown-timeout 2s, then
     * leaves the rows in the WAL. The old daemon waited for free space. */
    long long t0 = tclock_ms();
    int status = daemon_stop(&d);
    long long took = tclock_ms() - t0;
    cr_expect_eq(status, 0, "exit status %d after SIGTERM on a full disk", status);
    cr_expect_lt(took, 8000, "SIGTERM to exit took %lld ms with --shutdown-timeout 2s", took);
    cr_expect_geq(
        log_count(&d, "next=\"given up at shutdown; the WAL keeps its rows", line, sizeof(line)), 1,
        "no seal given up at shutdown");
    cr_expect_eq(log_count(&d, "event=seals_abandoned count=1 ", NULL, 0), 1);

    /* Space comes back; the next start replays the WAL: every acknowledged
     * record is there exactly once, no refused one is. */
    free_disk();
    const char *restart[] = {"--min-free-bytes", "0", NULL}; /* the default is above 16 MiB */
    cr_assert_eq(daemon_start(&d, data, restart), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), ACKED_N);
    cr_expect_eq(daemon_stop(&d), 0);

    struct tally t;
    struct dump_stats st;
    char err[256];
    memset(&t, 0, sizeof(t));
    cr_assert_eq(dump_data_dir(data, count_row, &t, &st, err, sizeof(err)), 0, "dump: %s", err);
    int lost = 0, dup = 0;
    for (int i = 0; i < ACKED_N; i++) {
        lost += t.acked_seen[i] == 0;
        dup += t.acked_seen[i] > 1;
    }
    cr_expect_eq(lost, 0, "%d acknowledged records lost", lost);
    cr_expect_eq(dup, 0, "%d acknowledged records duplicated", dup);
    cr_expect_eq(t.refused_seen, 0, "%llu refused records stored",
                 (unsigned long long)t.refused_seen);
    cr_expect_eq(t.other, 0);
    cr_expect_eq(st.sig[SIG_LOGS - 1].tmp_files, 0, "a failed seal left its temporary file");
}

/* One gRPC logs export of ids id0 .. id0 + n - 1; its grpc-status. */
static int grpc_export(const struct daemon *d, uint64_t id0, uint32_t n, bool *retry_info)
{
    size_t len, flen;
    uint8_t *body = dump_request(SIG_LOGS, false, id0, n, &len);
    uint8_t *framed = h2c_frame(body, len, false, &flen);
    struct h2c_call c = {.body = framed, .body_len = flen};
    cr_assert_eq(h2c_unary(d->grpc_port, LOGS_GRPC_PATH, NULL, framed, flen, &c), 0);
    int st = c.grpc_status;
    *retry_info = c.details_bin[0] != '\0';
    h2c_call_free(&c);
    free(framed);
    free(body);
    return st;
}

/* GET |path|: the status; the body in |body| (NUL-terminated, cap bytes). */
static int get(const struct daemon *d, const char *path, char *body, size_t cap)
{
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0, "GET %s", path);
    snprintf(body, cap, "%.*s", (int)r.body_len, (const char *)r.body);
    int st = r.status;
    http_resp_free(&r);
    return st;
}

/* Waits up to 10 s for the gauge |series| to read |want|. */
static double metric_wait(const struct daemon *d, const char *series, double want)
{
    long long deadline = tclock_ms() + 10000;
    double v;
    while ((v = daemon_metric(d, series)) != want && tclock_ms() < deadline) {
        tclock_nap_ms(20);
    }
    return v;
}

#define MIN_FREE (4u << 20)

Test(diskfull, below_min_free_bytes_exports_are_refused_until_space_returns_without_restart)
{
    struct daemon d;
    char data[300], body[2048], path[300], enc[200];
    snprintf(data, sizeof(data), "%s/data", mnt);
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--min-free-bytes", "4MiB", NULL};
    cr_assert_eq(daemon_start(&d, data, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_disk_min_free_bytes"), MIN_FREE);
    cr_expect_eq(daemon_metric(&d, "miradb_disk_low"), 0);
    cr_expect_gt(daemon_metric(&d, "miradb_disk_free_bytes"), MIN_FREE);
    struct http_resp r;
    http_export(&d, 0, ACKED_N, &r);
    cr_assert_eq(r.status, 200, "export with room: %d", r.status);
    http_resp_free(&r);

    /* 3 MiB free: the WAL could still take an export, the threshold says no. */
    fill_disk_to(3u << 20);
    cr_assert_eq(metric_wait(&d, "miradb_disk_low", 1), 1, "disk_low not set within 10 s");
    cr_expect_leq(daemon_metric(&d, "miradb_disk_free_bytes"), 3u << 20);
    http_export(&d, REFUSED_ID, REFUSED_N, &r);
    char ra[64];
    cr_expect_eq(r.status, 503, "HTTP export below the minimum: %d %.*s", r.status, (int)r.body_len,
                 (const char *)r.body);
    cr_expect_not_null(http_resp_header(&r, "Retry-After", ra, sizeof(ra)), "no Retry-After");
    const char *why = "storage unavailable: the data directory's disk has less free space than "
                      "--min-free-bytes, so the logs export was not written; retry later";
    cr_expect(r.body_len > 0 && memmem(r.body, r.body_len, why, strlen(why)) != NULL,
              "refusal text: %.*s", (int)r.body_len, (const char *)r.body);
    http_resp_free(&r);
    bool ri = false;
    cr_expect_eq(grpc_export(&d, REFUSED_ID + REFUSED_N, REFUSED_N, &ri), 14,
                 "gRPC export below the minimum is not UNAVAILABLE");
    cr_expect(ri, "UNAVAILABLE without RetryInfo");
    cr_expect_eq(daemon_metric(&d, "miradb_disk_low_refusals_total"), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"storage\"}"), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_ready"), 0);
    cr_expect_eq(get(&d, "/ready", body, sizeof(body)), 503);
    cr_expect(strstr(body, "below --min-free-bytes 4194304; exports are refused until space "
                           "returns") != NULL,
              "/ready body: %s", body);

    /* Queries keep answering: the 100 acknowledged records are there. */
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"miradb-test\"}");
    snprintf(path, sizeof(path), "/loki/api/v1/index/stats?query=%s&start=%llu&end=%llu", enc,
             (unsigned long long)DUMP_T0, (unsigned long long)DUMP_T0 + 1000000000ull);
    cr_expect_eq(get(&d, path, body, sizeof(body)), 200, "query while low: %s", body);
    cr_expect(strstr(body, "\"entries\":100,") != NULL, "index/stats while low: %s", body);

    /* Space returns: exports are taken again, no restart. */
    free_disk();
    cr_assert_eq(metric_wait(&d, "miradb_disk_low", 0), 0, "disk_low not cleared within 10 s");
    http_export(&d, ACKED_N, ACKED_N, &r);
    cr_expect_eq(r.status, 200, "export after space returned: %d %.*s", r.status, (int)r.body_len,
                 (const char *)r.body);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/ready", body, sizeof(body)), 200, "/ready after recovery: %s", body);
    cr_expect_eq(daemon_metric(&d, "miradb_disk_low_refusals_total"), 2);
    cr_expect_eq(log_count(&d, "event=disk_low ", NULL, 0), 1);
    cr_expect_eq(log_count(&d, "event=disk_recovered ", NULL, 0), 1);
    cr_expect_eq(daemon_stop(&d), 0);

    /* A restart has every acknowledged record exactly once, no refused one. */
    cr_assert_eq(daemon_start(&d, data, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_disk_low"), 0);
    cr_expect_eq(daemon_stop(&d), 0);
    struct tally t;
    struct dump_stats st;
    char err[256];
    memset(&t, 0, sizeof(t));
    cr_assert_eq(dump_data_dir(data, count_row, &t, &st, err, sizeof(err)), 0, "dump: %s", err);
    int lost = 0, dup = 0;
    for (int i = 0; i < 2 * ACKED_N; i++) {
        lost += t.acked_seen[i] == 0;
        dup += t.acked_seen[i] > 1;
    }
    cr_expect_eq(lost, 0, "%d acknowledged records lost", lost);
    cr_expect_eq(dup, 0, "%d acknowledged records duplicated", dup);
    cr_expect_eq(t.refused_seen, 0);
    cr_expect_eq(t.other, 0);
}
