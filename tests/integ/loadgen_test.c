/*
 * loadgen_test.c - build/otlp-load (path from $MIRADB_LOADGEN) against the
 * real daemon and against a scripted sink.
 *
 * Against the daemon: a few hundred requests per protocol and signal must
 * all be acknowledged, and the daemon's miradb_otlp_records_total must grow
 * by exactly the records the tool reports acknowledged. Oversized requests
 * must come back as failures by status that the daemon did not count.
 * Against the sink (a blocking HTTP/1.1 server in a thread of this test): a
 * 503 every third request and a partial-success rejection of 3 records in
 * every 200 must show up exactly in the tool's counts (refusals are failures,
 * never retried; rejected records are not acknowledged).
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <libdeflate.h>

#include "proto/pbdec.h"
#include "storage/batch.h"
#include "tests/util/daemon.h"

static const char *loadgen_bin(void)
{
    const char *p = getenv("MIRADB_LOADGEN");
    return p && *p ? p : "build/otlp-load";
}

/* Runs otlp-load with |args| (NULL-terminated) and returns its JSON report;
 * asserts it exited with |want_status|. */
static json_t *run_loadgen(const char *const *args, int want_status)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = loadgen_bin();
    for (int i = 0; args[i] && n < 39; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    cr_assert_eq(access(argv[0], X_OK), 0, "%s is not built (make %s)", argv[0], argv[0]);

    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    for (;;) {
        if (len + 1 == cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        ssize_t r = read(fd[0], out + len, cap - len - 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        len += (size_t)r;
    }
    out[len] = 0;
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == want_status,
              "otlp-load exited with status %d (want %d); output:\n%s",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, want_status, out);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert_not_null(j, "otlp-load printed no JSON (%s):\n%s", e.text, out);
    free(out);
    return j;
}

/* A number at a dotted path ("requests.sent"); asserts it exists. */
static long long jnum(json_t *j, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *cur = j;
    for (char *save, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
        cur = json_object_get(cur, k);
        cr_assert_not_null(cur, "no %s in the report", path);
    }
    cr_assert(json_is_integer(cur), "%s is not an integer", path);
    return json_integer_value(cur);
}

static double records_metric(const struct daemon *d, const char *signal, const char *transport)
{
    char s[160];
    snprintf(s, sizeof(s), "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", signal,
             transport);
    double v = daemon_metric(d, s);
    cr_assert_geq(v, 0, "%s missing from /metrics", s);
    return v;
}

/* One bounded run per signal against |d|: everything acknowledged, and the
 * daemon counted exactly what the tool says it acknowledged. */
static void every_signal(const struct daemon *d, const char *proto, const char *transport,
                         const char *const *extra)
{
    static const char *const signals[] = {"logs", "traces", "metrics"};
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d",
             strcmp(proto, "grpc") == 0 ? d->grpc_port : d->http_port);
    for (int s = 0; s < 3; s++) {
        const char *args[32] = {"--endpoint",
                                endpoint,
                                "--protocol",
                                proto,
                                "--signal",
                                signals[s],
                                "--requests",
                                "200",
                                "--records-per-request",
                                "50",
                                "--connections",
                                "4",
                                "--timeout",
                                "60",
                                "--seed",
                                "7"};
        int n = 16;
        for (int i = 0; extra && extra[i]; i++) {
            args[n++] = extra[i];
        }
        args[n] = NULL;
        double before = records_metric(d, signals[s], transport);
        json_t *j = run_loadgen(args, 0);
        cr_expect_eq(jnum(j, "requests.sent"), 200, "%s %s", proto, signals[s]);
        cr_expect_eq(jnum(j, "requests.acknowledged"), 200, "%s %s: %s", proto, signals[s],
                     json_dumps(json_object_get(j, "requests"), 0));
        cr_expect_eq(jnum(j, "requests.failed"), 0);
        cr_expect_eq(
            json_object_size(json_object_get(json_object_get(j, "requests"), "failed_by_status")),
            0);
        cr_expect_eq(jnum(j, "records.sent"), 200 * 50);
        cr_expect_eq(jnum(j, "records.acknowledged"), 200 * 50);
        cr_expect_eq(jnum(j, "records.rejected"), 0);
        cr_expect_eq(jnum(j, "ack_latency_ms.samples"), 200);
        double after = records_metric(d, signals[s], transport);
        cr_expect_eq((long long)(after - before), jnum(j, "records.acknowledged"),
                     "%s %s: the daemon counted %.0f records, the tool %lld", proto, signals[s],
                     after - before, jnum(j, "records.acknowledged"));
        json_decref(j);
    }
}

static void start(struct daemon *d, const char *const *extra)
{
    if (daemon_start(d, NULL, extra) != 0) {
        cr_assert_fail("the daemon did not start");
    }
}

Test(loadgen, grpc_every_signal_is_acknowledged_and_counted_exactly)
{
    struct daemon d;
    start(&d, NULL);
    every_signal(&d, "grpc", "grpc", NULL);
    /* --unique: every request encoded fresh, none repeated */
    const char *const more[] = {"--gzip", "--streams-per-connection", "4", "--unique", NULL};
    every_signal(&d, "grpc", "grpc", more);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(loadgen, http_protobuf_every_signal_is_acknowledged_and_counted_exactly)
{
    struct daemon d;
    start(&d, NULL);
    every_signal(&d, "http/protobuf", "http_protobuf", NULL);
    const char *const more[] = {"--gzip", NULL};
    every_signal(&d, "http/protobuf", "http_protobuf", more);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(loadgen, http_json_every_signal_is_acknowledged_and_counted_exactly)
{
    struct daemon d;
    start(&d, NULL);
    every_signal(&d, "http/json", "http_json", NULL);
    const char *const more[] = {"--gzip", "--rate", "500", NULL}; /* open loop too */
    every_signal(&d, "http/json", "http_json", more);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Every request over --max-request-bytes is refused; the tool counts each
 * as failed by that status, acknowledges nothing, and the daemon counts
 * no record. */
Test(loadgen, oversized_requests_are_failures_by_status_and_not_counted)
{
    struct daemon d;
    const char *const extra[] = {"--max-request-bytes", "1024", NULL};
    start(&d, extra);
    static const struct {
        const char *proto, *transport, *key;
    } cases[] = {
        {"http/protobuf", "http_protobuf", "http:413"},
        {"grpc", "grpc", "grpc:8"},
    };
    for (int c = 0; c < 2; c++) {
        char endpoint[64];
        snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", c == 1 ? d.grpc_port : d.http_port);
        const char *args[] = {"--endpoint",
                              endpoint,
                              "--protocol",
                              cases[c].proto,
                              "--signal",
                              "logs",
                              "--requests",
                              "40",
                              "--records-per-request",
                              "20",
                              "--connections",
                              "2",
                              "--timeout",
                              "60",
                              NULL};
        json_t *j = run_loadgen(args, 0);
        json_t *fb = json_object_get(json_object_get(j, "requests"), "failed_by_status");
        cr_expect_eq(jnum(j, "requests.sent"), 40);
        cr_expect_eq(jnum(j, "requests.acknowledged"), 0);
        cr_expect_eq(jnum(j, "requests.failed"), 40);
        cr_expect_eq(json_object_size(fb), 1, "%s: %s", cases[c].proto, json_dumps(fb, 0));
        cr_expect_eq(json_integer_value(json_object_get(fb, cases[c].key)), 40, "%s: %s",
                     cases[c].proto, json_dumps(fb, 0));
        cr_expect_eq(jnum(j, "records.acknowledged"), 0);
        cr_expect_eq(jnum(j, "ack_latency_ms.samples"), 0);
        cr_expect_eq(jnum(j, "refusal_latency_ms.samples"), 40);
        cr_expect_eq(records_metric(&d, "logs", cases[c].transport), 0);
        json_decref(j);
    }
    double too_large = daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"too_large\"}");
    cr_expect_eq(too_large, 80);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ------------------------------------------------------------ the sink */

/* A blocking HTTP/1.1 server: one connection at a time, keep-alive. Answers
 * request k (0-based) with 503 when k % 3 == 2, otherwise 200 with a
 * partial success rejecting 3 records. Decodes what it accepts (gunzip,
 * then pbdec or jansson) to count the records it was sent. */
struct sink {
    int lfd;
    int port;
    pthread_t th;
    long long requests, answered_503, records_in_200;
    char error[200];
};

static int read_full(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static long long count_json_logs(const char *body, size_t len)
{
    json_error_t e;
    json_t *root = json_loadb(body, len, 0, &e);
    if (root == NULL) {
        return -1;
    }
    long long n = 0;
    size_t i, j;
    json_t *rl, *sl;
    json_array_foreach(json_object_get(root, "resourceLogs"), i, rl)
    {
        json_array_foreach(json_object_get(rl, "scopeLogs"), j, sl)
        {
            n += (long long)json_array_size(json_object_get(sl, "logRecords"));
        }
    }
    json_decref(root);
    return n;
}

/* Records in one request body, or -1 when it does not decode. */
static long long sink_count(const char *hdr, const uint8_t *body, size_t len)
{
    uint8_t *plain = NULL;
    if (strcasestr(hdr, "\r\nContent-Encoding: gzip\r\n")) {
        struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
        size_t cap = 64u << 20, got = 0;
        plain = malloc(cap);
        int rc = libdeflate_gzip_decompress(d, body, len, plain, cap, &got);
        libdeflate_free_decompressor(d);
        if (rc != LIBDEFLATE_SUCCESS) {
            free(plain);
            return -1;
        }
        body = plain;
        len = got;
    }
    long long n = -1;
    if (strcasestr(hdr, "\r\nContent-Type: application/json")) {
        n = count_json_logs((const char *)body, len);
    } else {
        struct batch *b = batch_new(SIG_LOGS);
        char err[160];
        if (pbdec_decode(SIG_LOGS, body, len, b, err, sizeof(err)) == 0) {
            n = b->n_rows;
        }
        batch_free(b);
    }
    free(plain);
    return n;
}

static void *sink_main(void *arg)
{
    struct sink *s = arg;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            return NULL; /* the listener was shut down */
        }
        char hdr[8192];
        for (;;) {
            size_t h = 0;
            /* headers, byte by byte: small and exact */
            while (h + 1 < sizeof(hdr) && (h < 4 || memcmp(hdr + h - 4, "\r\n\r\n", 4) != 0)) {
                if (read_full(fd, hdr + h, 1) < 0) {
                    break;
                }
                h++;
            }
            hdr[h] = 0;
            if (h < 4 || memcmp(hdr + h - 4, "\r\n\r\n", 4) != 0) {
                break;
            }
            const char *cl = strcasestr(hdr, "\r\nContent-Length:");
            size_t len = cl ? strtoul(cl + 17, NULL, 10) : 0;
            uint8_t *body = malloc(len + 1);
            if (read_full(fd, (char *)body, len) < 0) {
                free(body);
                break;
            }
            long long k = s->requests++;
            bool json = strcasestr(hdr, "\r\nContent-Type: application/json") != NULL;
            char resp[512];
            int n;
            if (k % 3 == 2) {
                s->answered_503++;
                n = snprintf(resp, sizeof(resp),
                             "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                             "Content-Length: 0\r\n\r\n");
            } else {
                long long recs = sink_count(hdr, body, len);
                if (recs < 0) {
                    snprintf(s->error, sizeof(s->error), "request %lld does not decode", k);
                } else {
                    s->records_in_200 += recs;
                }
                /* ExportLogsServiceResponse{partial_success{rejected_log_records: 3}} */
                const char *pb = "\x0a\x02\x08\x03";
                const char *js = "{\"partialSuccess\":{\"rejectedLogRecords\":\"3\","
                                 "\"errorMessage\":\"three bad records\"}}";
                size_t blen = json ? strlen(js) : 4;
                n = snprintf(resp, sizeof(resp),
                             "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                             json ? "application/json" : "application/x-protobuf", blen);
                memcpy(resp + n, json ? js : pb, blen);
                n += (int)blen;
            }
            free(body);
            write_all(fd, resp, (size_t)n);
        }
        close(fd);
    }
}

static void sink_start(struct sink *s)
{
    memset(s, 0, sizeof(*s));
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s->lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(s->lfd, 16), 0);
    cr_assert_eq(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&s->th, NULL, sink_main, s), 0);
}

static void sink_stop(struct sink *s)
{
    shutdown(s->lfd, SHUT_RDWR); /* wakes accept() */
    pthread_join(s->th, NULL);
    close(s->lfd);
}

Test(loadgen, refusals_and_partial_success_are_counted_exactly)
{
    static const char *const protos[] = {"http/protobuf", "http/json"};
    for (int p = 0; p < 2; p++) {
        struct sink s;
        sink_start(&s);
        char endpoint[64];
        snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", s.port);
        /* one connection: the sink serves one at a time */
        const char *args[] = {"--endpoint",
                              endpoint,
                              "--protocol",
                              protos[p],
                              "--signal",
                              "logs",
                              "--requests",
                              "30",
                              "--records-per-request",
                              "10",
                              "--connections",
                              "1",
                              "--timeout",
                              "60",
                              p == 1 ? "--gzip" : NULL,
                              NULL};
        json_t *j = run_loadgen(args, 0);
        sink_stop(&s);
        cr_assert_str_empty(s.error, "sink: %s", s.error);
        cr_expect_eq(s.requests, 30);
        cr_expect_eq(s.answered_503, 10);
        cr_expect_eq(s.records_in_200, 20 * 10, "the sink decoded %lld records", s.records_in_200);
        cr_expect_eq(jnum(j, "requests.sent"), 30, "%s", protos[p]);
        cr_expect_eq(jnum(j, "requests.acknowledged"), 20, "%s", protos[p]);
        cr_expect_eq(jnum(j, "requests.failed"), 10);
        cr_expect_eq(jnum(j, "requests.failed_by_status.http:503"), 10);
        cr_expect_eq(jnum(j, "records.sent"), 300);
        cr_expect_eq(jnum(j, "records.rejected"), 20 * 3, "%s", protos[p]);
        cr_expect_eq(jnum(j, "records.acknowledged"), 20 * 7, "%s", protos[p]);
        cr_expect_eq(jnum(j, "ack_latency_ms.samples"), 20);
        cr_expect_eq(jnum(j, "refusal_latency_ms.samples"), 10);
        cr_expect_eq(jnum(j, "connections.reconnects"), 0);
        json_decref(j);
    }
}
