/*
 * limits_test.c - limits that hold against slow clients, against the real
 * daemon: a body trickled slower than --min-receive-rate is cut off
 * (408 / DEADLINE_EXCEEDED) after one --receive-rate-window and gives its
 * admission slot back, so honest exports on HTTP and gRPC get through
 * while the trickle goes on; a body sent at a fair pace is unaffected;
 * request headers and the HTTP/2 preface must arrive within
 * --header-timeout (a gRPC stream's HEADERS and CONTINUATION too: reset, or
 * GOAWAY when alone). Each cut-off is logged with the client's address.
 * The header and stream limits: a request exactly at each is served, one
 * over gets 431 / RESOURCE_EXHAUSTED / REFUSED_STREAM.
 */
#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define SLOW_MSG_PREFIX "the request body arrived too slowly: "
#define CUT_LOG "event=slow_client_cut_off peer=127.0.0.1:"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Lines of the daemon's log that contain |needle|. */
static int log_count(const struct daemon *d, const char *needle)
{
    size_t len;
    uint8_t *text = httpc_read_file(d->log_path, &len);
    int n = 0;
    if (text == NULL) {
        return -1;
    }
    const char *s = (const char *)text; /* NUL-terminated by httpc_read_file */
    for (char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    free(text);
    return n;
}

static int post_vector(int port, struct http_resp *resp)
{
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    int rc = httpc_request(port, "POST", "/v1/logs", hdrs, body, len, 0, resp);
    free(body);
    return rc;
}

/* ---- trickling HTTP clients, fed from a thread ---- */

#define TRICKLERS 4 /* = --shards 1 x --queue 4: every logs slot */
#define TRICKLE_DECLARED 5000

struct trickle {
    int fds[TRICKLERS];
    atomic_bool stop;
    int bytes_sent[TRICKLERS];
};

/* One body byte to each connection every 100 ms (10 bytes a second, far
 * under 1 KiB/s, yet never silent long enough for a no-progress timer),
 * until told to stop, the connection refuses, or 30 s pass. */
static void *trickle_run(void *arg)
{
    struct trickle *t = arg;
    for (int round = 0; round < 300 && !atomic_load(&t->stop); round++) {
        for (int i = 0; i < TRICKLERS; i++) {
            if (t->fds[i] >= 0 && t->bytes_sent[i] < TRICKLE_DECLARED &&
                send(t->fds[i], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
                t->bytes_sent[i]++;
            }
        }
        sleep_ms(100);
    }
    return NULL;
}

Test(limits, trickled_bodies_are_cut_off_and_honest_exports_get_through_on_http_and_grpc)
{
    struct daemon d;
    const char *args[] = {"--shards",
                          "1",
                          "--queue",
                          "4",
                          "--io-threads",
                          "1",
                          "--admit-wait",
                          "20000",
                          "--body-timeout",
                          "60s",
                          "--min-receive-rate",
                          "1KiB",
                          "--receive-rate-window",
                          "1s",
                          NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    struct trickle t = {.stop = false};
    char head[256];
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
             "Content-Length: %d\r\n\r\n",
             TRICKLE_DECLARED);
    for (int i = 0; i < TRICKLERS; i++) {
        t.fds[i] = httpc_connect(d.http_port);
        cr_assert_geq(t.fds[i], 0);
        cr_assert_eq(httpc_send_all(t.fds[i], head, strlen(head)), 0);
    }
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, trickle_run, &t), 0);

    /* While they trickle: an honest HTTP export and an honest gRPC export.
     * Both wait for a slot (--admit-wait 20 s); before the rate limit the
     * trickle held every slot for --body-timeout (60 s) and both got 503 /
     * UNAVAILABLE. */
    struct http_resp resp;
    cr_assert_eq(post_vector(d.http_port, &resp), 0);
    cr_expect_eq(resp.status, 200, "honest HTTP export during the trickle: %d", resp.status);
    http_resp_free(&resp);

    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);
    struct h2c_call call = {0};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, NULL, frame, fl, &call), 0);
    cr_expect_eq(call.grpc_status, 0, "honest gRPC export during the trickle: %d (%s)",
                 call.grpc_status, call.grpc_message);
    h2c_call_free(&call);
    free(frame);
    free(v);
    bool still_trickling = !atomic_load(&t.stop);
    atomic_store(&t.stop, true);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect(still_trickling);

    /* Every trickler was answered 408, with the reason, and closed. */
    for (int i = 0; i < TRICKLERS; i++) {
        char carry[256];
        size_t carry_len = 0;
        int rc = httpc_read_response(t.fds[i], 0, carry, sizeof(carry), &carry_len, &resp);
        cr_expect_eq(rc, 0, "trickler %d: no answer", i);
        if (rc == 0) {
            cr_expect_eq(resp.status, 408, "trickler %d: %d", i, resp.status);
            char buf[128];
            cr_expect_str_eq(http_resp_header(&resp, "Connection", buf, sizeof(buf)), "close");
            cr_expect(memmem(resp.body, resp.body_len, SLOW_MSG_PREFIX, strlen(SLOW_MSG_PREFIX)) !=
                          NULL,
                      "trickler %d: body without the reason", i);
            http_resp_free(&resp);
        }
        cr_expect_lt(t.bytes_sent[i], 100, "trickler %d sent %d bytes before the cut", i,
                     t.bytes_sent[i]);
        cr_expect(httpc_wait_closed(t.fds[i]), "trickler %d: connection left open", i);
        close(t.fds[i]);
    }
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"timeout\"}"),
                 TRICKLERS);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"overloaded\"}"), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\","
                                   "transport=\"http_protobuf\"}"),
                 10);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
                 10);
    cr_expect_eq(log_count(&d, CUT_LOG), TRICKLERS);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(limits, a_body_at_a_fair_pace_is_not_cut_off)
{
    struct daemon d;
    const char *args[] = {
        "--io-threads", "1", "--min-receive-rate", "1KiB", "--receive-rate-window", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    char head[256];
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
             "Content-Length: %zu\r\n\r\n",
             len);
    int fd = httpc_connect(d.http_port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, head, strlen(head)), 0);
    /* Five pieces 400 ms apart: about 4.5 KiB a second over more than two
     * windows, four times the minimum. */
    size_t piece = len / 5 + 1;
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        cr_assert_eq(httpc_send_all(fd, body + off, n), 0);
        if (off + n < len) {
            sleep_ms(400);
        }
    }
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &resp), 0);
    cr_expect_eq(resp.status, 200);
    http_resp_free(&resp);
    close(fd);
    free(body);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"timeout\"}"), 0);
    cr_expect_eq(log_count(&d, CUT_LOG), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(limits, a_grpc_message_slower_than_the_minimum_gets_deadline_exceeded)
{
    struct daemon d;
    const char *args[] = {"--io-threads",
                          "1",
                          "--min-receive-rate",
                          "1KiB",
                          "--receive-rate-window",
                          "1s",
                          "--body-timeout",
                          "60s",
                          NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    struct h2c *h;
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);
    /* The length prefix and 20 bytes, then 10 bytes at each PING (every
     * 100 ms or so): well under 1 KiB a second, never silent. */
    struct h2c_call slow = {.body = frame, .body_len = fl, .send_limit = 25, .keep_open = true};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &slow), 0);
    cr_assert_eq(h2c_pump(h, &slow), 0);
    size_t limit = 25;
    for (int i = 0; i < 300 && !slow.closed; i++) {
        limit += 10;
        cr_assert_eq(h2c_resume(h, &slow, limit, true), 0);
        if (h2c_ping(h, 100) < 0) {
            break;
        }
    }
    cr_expect(slow.closed, "the slow stream is still open after %zu bytes", limit);
    cr_expect_lt(limit, 1000, "cut off only after %zu bytes", limit);
    cr_expect_eq(slow.grpc_status, 4, "grpc-status %d (%s)", slow.grpc_status, slow.grpc_message);
    cr_expect(strncmp(slow.grpc_message, SLOW_MSG_PREFIX, strlen(SLOW_MSG_PREFIX)) == 0, "%s",
              slow.grpc_message);
    h2c_call_free(&slow);

    /* The same connection carries an honest export afterwards. */
    struct h2c_call ok = {.body = frame, .body_len = fl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &ok), 0);
    cr_assert_eq(h2c_wait(h), 0);
    cr_expect_eq(ok.grpc_status, 0, "grpc-status %d (%s)", ok.grpc_status, ok.grpc_message);
    h2c_call_free(&ok);
    h2c_free(h);
    free(frame);
    free(v);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_request_errors_total{reason=\"timeout\"}"), 1);
    cr_expect_eq(log_count(&d, CUT_LOG), 1);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(limits, headers_and_the_http2_preface_must_arrive_within_header_timeout)
{
    struct daemon d;
    const char *args[] = {"--io-threads", "1", "--header-timeout", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    /* HTTP: a request head trickled a byte every 100 ms. */
    static const char partial[] = "POST /v1/logs HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    int fd = httpc_connect(d.http_port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, partial, strlen(partial)), 0);
    int sent = 0;
    while (sent < 300 && send(fd, "a", 1, MSG_NOSIGNAL) == 1) {
        sent++;
        sleep_ms(100);
        /* Stop once the answer is there (the socket is readable). */
        char peek;
        if (recv(fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
            break;
        }
    }
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &resp), 0);
    cr_expect_eq(resp.status, 408);
    cr_expect_lt(sent, 100, "answered only after %d trickled bytes", sent);
    http_resp_free(&resp);
    cr_expect(httpc_wait_closed(fd));
    close(fd);

    /* gRPC: half the preface, then nothing: the connection is closed. */
    fd = httpc_connect(d.grpc_port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, "PRI * HTTP/2.0\r\n", 16), 0);
    cr_expect(httpc_wait_closed(fd), "a half preface keeps its connection");
    close(fd);
    cr_expect_eq(log_count(&d, CUT_LOG), 2);

    /* Requests that arrive whole are unaffected. */
    cr_assert_eq(post_vector(d.http_port, &resp), 0);
    cr_expect_eq(resp.status, 200);
    http_resp_free(&resp);
    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);
    struct h2c_call call = {0};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, NULL, frame, fl, &call), 0);
    cr_expect_eq(call.grpc_status, 0);
    h2c_call_free(&call);
    free(frame);
    free(v);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- connection caps and the idle timeout ---- */

/* A blocking connection to 127.0.0.1:|port| from source address |src|
 * (any of 127.0.0.0/8 is local on Linux). The fd, or -1. */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0) {
        return -1;
    }
    inet_pton(AF_INET, src, &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* GET /health on |fd|, kept alive: its status, or -1. */
static int health_on(int fd)
{
    static const char req[] = "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    if (httpc_send_all(fd, req, strlen(req)) != 0 ||
        httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &resp) != 0) {
        return -1;
    }
    int st = resp.status;
    http_resp_free(&resp);
    return st;
}

/* The value of |series| in GET /metrics asked on |fd| (kept alive, so no
 * new connection is counted), or -1. */
static double metric_on(int fd, const char *series)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    double v = -1;
    if (httpc_send_all(fd, req, strlen(req)) != 0 ||
        httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &resp) != 0) {
        return -1;
    }
    char *text = malloc(resp.body_len + 1);
    cr_assert_not_null(text);
    memcpy(text, resp.body, resp.body_len);
    text[resp.body_len] = '\0';
    size_t sl = strlen(series);
    for (char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (strncmp(p, series, sl) == 0 && p[sl] == ' ') {
            v = strtod(p + sl + 1, NULL);
            break;
        }
    }
    free(text);
    http_resp_free(&resp);
    return v;
}

/* Waits (bounded) until |fd|'s /metrics shows |want| open HTTP connections. */
static double wait_open_http(int fd, double want)
{
    double v = -1;
    for (int i = 0; i < 200; i++) {
        v = metric_on(fd, "miradb_connections_open{listener=\"http\"}");
        if (v == want) {
            break;
        }
        sleep_ms(50);
    }
    return v;
}

Test(limits, connections_past_the_caps_are_refused_at_accept_and_counted)
{
    struct daemon d;
    const char *args[] = {
        "--io-threads", "1", "--max-connections", "5", "--max-connections-per-client", "3", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    cr_expect_eq(log_count(&d, "event=connection_limits max_connections=5 per_client=3 "
                               "rlimit_nofile="),
                 1);

    /* Three from 127.0.0.1 are served; the fourth gets 503 and the close. */
    int own[3];
    for (int i = 0; i < 3; i++) {
        own[i] = connect_from("127.0.0.1", d.http_port);
        cr_assert_geq(own[i], 0);
        cr_expect_eq(health_on(own[i]), 200, "connection %d", i);
    }
    int extra = connect_from("127.0.0.1", d.http_port);
    cr_assert_geq(extra, 0);
    char carry[256];
    size_t carry_len = 0;
    struct http_resp resp;
    cr_assert_eq(httpc_read_response(extra, 0, carry, sizeof(carry), &carry_len, &resp), 0);
    cr_expect_eq(resp.status, 503);
    char buf[64];
    cr_expect_str_eq(http_resp_header(&resp, "Connection", buf, sizeof(buf)), "close");
    cr_expect_eq(resp.body_len, 21);
    cr_expect(resp.body_len == 21 && memcmp(resp.body, "too many connections\n", 21) == 0);
    http_resp_free(&resp);
    cr_expect(httpc_wait_closed(extra));
    close(extra);

    /* Other addresses still get in, up to the total of 5; then both
     * listeners refuse. */
    int other = connect_from("127.0.0.2", d.http_port);
    cr_assert_geq(other, 0);
    cr_expect_eq(health_on(other), 200);
    int g = connect_from("127.0.0.3", d.grpc_port);
    cr_assert_geq(g, 0);
    /* The server's SETTINGS answer the preface: the connection was taken. */
    cr_assert_eq(httpc_send_all(g, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24), 0);
    char settings[9];
    cr_assert_eq(recv(g, settings, sizeof(settings), MSG_WAITALL), 9);
    cr_expect_eq(settings[3], 4, "a SETTINGS frame first");
    cr_expect_eq(health_on(own[0]), 200, "the admitted connections are served on");
    int h = connect_from("127.0.0.4", d.http_port);
    cr_assert_geq(h, 0);
    carry_len = 0;
    cr_assert_eq(httpc_read_response(h, 0, carry, sizeof(carry), &carry_len, &resp), 0);
    cr_expect_eq(resp.status, 503);
    http_resp_free(&resp);
    close(h);
    int g2 = connect_from("127.0.0.4", d.grpc_port);
    cr_assert_geq(g2, 0);
    cr_expect(httpc_wait_closed(g2), "a gRPC connection past the cap stays open");
    close(g2);

    /* Closing gives the places back. */
    close(g);
    close(other);
    close(own[2]);
    cr_expect_eq(wait_open_http(own[0], 2), 2);
    cr_expect_eq(metric_on(own[0], "miradb_connections_open{listener=\"grpc\"}"), 0);
    cr_expect_eq(metric_on(own[0], "miradb_connections_refused_total{reason=\""
                                   "max_connections_per_client\"}"),
                 1);
    cr_expect_eq(metric_on(own[0], "miradb_connections_refused_total{reason=\"max_connections\"}"),
                 2);
    cr_expect_geq(log_count(&d, "event=connection_refused reason=max_connections_per_client "
                                "peer=127.0.0.1:"),
                  1);
    extra = connect_from("127.0.0.1", d.http_port);
    cr_assert_geq(extra, 0);
    cr_expect_eq(health_on(extra), 200, "a place freed by a close is taken again");
    close(extra);
    close(own[0]);
    close(own[1]);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(limits, idle_keep_alive_connections_are_closed_after_idle_timeout)
{
    struct daemon d;
    const char *args[] = {"--io-threads", "1", "--idle-timeout", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    /* Busy: a request every 300 ms for 2 s keeps it open. */
    int busy = httpc_connect(d.http_port);
    cr_assert_geq(busy, 0);
    for (int i = 0; i < 7; i++) {
        cr_expect_eq(health_on(busy), 200, "request %d on the busy connection", i);
        sleep_ms(300);
    }
    close(busy);

    /* Idle after one request: closed by the server. */
    int idle = httpc_connect(d.http_port);
    cr_assert_geq(idle, 0);
    cr_expect_eq(health_on(idle), 200);
    cr_expect(httpc_wait_closed(idle), "the idle HTTP connection stays open");
    close(idle);

    /* gRPC: a connection that sends nothing after its preface gets GOAWAY and the close. */
    struct h2c *h;
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    cr_expect_eq(h2c_wait_closed(h), 0, "the idle gRPC connection stays open");
    cr_expect(h2c_goaway(h, NULL));
    h2c_free(h);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- HTTP/2 control-frame floods ---- */

#define CALM 11 /* ENHANCE_YOUR_CALM */
#define FLOOD_LOG "event=h2_flood_goaway peer=127.0.0.1:"

/* A gRPC length prefix declaring 1000 bytes. */
static const uint8_t prefix_1000[5] = {0, 0, 0, 0x03, 0xe8};

/* Opens a stream (HEADERS and the prefix) and resets it at once, |n|
 * times or until the server sends GOAWAY. Returns the resets sent. */
static int rapid_reset(struct h2c *h, int n)
{
    int sent = 0;
    for (int i = 0; i < n && !h2c_goaway(h, NULL); i++) {
        struct h2c_call call = {.body = prefix_1000, .body_len = 5, .keep_open = true};
        if (h2c_submit(h, LOGS_PATH, NULL, &call) != 0 || h2c_pump(h, &call) != 0 ||
            h2c_rst(h, &call, 8 /* CANCEL */) != 0) {
            h2c_call_free(&call);
            break;
        }
        sent++;
        h2c_call_free(&call);
    }
    return sent;
}

static void expect_export_ok(struct h2c *h, const char *what)
{
    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);
    struct h2c_call call = {.body = frame, .body_len = fl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &call), 0);
    cr_expect_eq(h2c_wait(h), 0, "%s: no answer", what);
    cr_expect_eq(call.grpc_status, 0, "%s: grpc-status %d (%s)", what, call.grpc_status,
                 call.grpc_message);
    h2c_call_free(&call);
    free(frame);
    free(v);
}

Test(limits, rapid_reset_ping_and_settings_floods_get_goaway_enhance_your_calm)
{
    struct daemon d;
    const char *args[] = {"--io-threads",
                          "1",
                          "--grpc-reset-rate",
                          "20",
                          "--grpc-ping-rate",
                          "10",
                          "--grpc-settings-rate",
                          "5",
                          NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    /* Under the burst: ten resets, then an export on the same connection. */
    struct h2c *fair;
    cr_assert_eq(h2c_connect(d.grpc_port, true, &fair), 0);
    cr_expect_eq(rapid_reset(fair, 10), 10);
    cr_expect_eq(h2c_ping(fair, 10), 0);
    cr_expect(!h2c_goaway(fair, NULL), "GOAWAY after ten resets");
    expect_export_ok(fair, "after ten resets");

    /* Rapid Reset: streams opened and reset as fast as the client can. */
    struct h2c *h;
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    int sent = rapid_reset(h, 500);
    cr_expect_eq(h2c_wait_closed(h), 0, "the flooding connection stays open");
    cr_expect_eq(h2c_goaway_code(h), CALM, "GOAWAY code %u after %d resets", h2c_goaway_code(h),
                 sent);
    cr_expect_lt(sent, 500, "%d resets taken", sent);
    cr_expect_geq(sent, 20, "GOAWAY after only %d resets", sent);
    h2c_free(h);

    /* PING flood. */
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    for (int i = 0; i < 500 && !h2c_goaway(h, NULL); i++) {
        if (h2c_ping(h, 0) < 0) {
            break;
        }
    }
    cr_expect_eq(h2c_wait_closed(h), 0);
    cr_expect_eq(h2c_goaway_code(h), CALM);
    h2c_free(h);

    /* SETTINGS flood. */
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    for (int i = 0; i < 500 && !h2c_goaway(h, NULL); i++) {
        if (h2c_settings(h) < 0) {
            break;
        }
    }
    cr_expect_eq(h2c_wait_closed(h), 0);
    cr_expect_eq(h2c_goaway_code(h), CALM);
    h2c_free(h);

    /* Everyone else is served: the fair connection and a new one. */
    expect_export_ok(fair, "the fair connection after the floods");
    h2c_free(fair);
    struct h2c *fresh;
    cr_assert_eq(h2c_connect(d.grpc_port, true, &fresh), 0);
    expect_export_ok(fresh, "a new connection after the floods");
    h2c_free(fresh);

    cr_expect_eq(daemon_metric(&d, "miradb_grpc_flood_goaways_total{frame=\"rst_stream\"}"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_grpc_flood_goaways_total{frame=\"ping\"}"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_grpc_flood_goaways_total{frame=\"settings\"}"), 1);
    cr_expect_eq(log_count(&d, FLOOD_LOG), 3);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
                 30);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- header and stream limits (--max-header-bytes, --max-headers,
 * --grpc-max-header-list, --grpc-max-streams) and a stream's header deadline ---- */

#define REFUSED_STREAM 7

/*
 * POST /v1/logs of the logs vector on a fresh connection, with |pad| bytes
 * in an X-Pad header and |extra| more headers X-0..X-(extra-1) ("X-N: v").
 * The head as the server counts it (the URL, then each header's name and
 * value plus 4 for ": " and CRLF) is 82 + digits(Content-Length) + pad +
 * the extra headers' bytes.
 */
static int post_padded(int port, size_t pad, int extra, struct http_resp *resp)
{
    size_t vl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    size_t cap = pad + 64 * (size_t)extra + 256 + vl;
    char *req = malloc(cap);
    int n = snprintf(req, cap,
                     "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/x-protobuf\r\nContent-Length: %zu\r\nX-Pad: ",
                     vl);
    memset(req + n, 'p', pad);
    size_t len = (size_t)n + pad;
    len += (size_t)snprintf(req + len, cap - len, "\r\n");
    for (int i = 0; i < extra; i++) {
        len += (size_t)snprintf(req + len, cap - len, "X-%d: v\r\n", i);
    }
    len += (size_t)snprintf(req + len, cap - len, "\r\n");
    memcpy(req + len, v, vl);
    len += vl;
    int fd = httpc_connect(port);
    int rc = -1;
    if (fd >= 0 && httpc_send_all(fd, req, len) == 0) {
        char carry[256];
        size_t carry_len = 0;
        rc = httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, resp);
    }
    if (fd >= 0) {
        close(fd);
    }
    free(req);
    free(v);
    return rc;
}

static size_t digits(size_t v)
{
    char b[32];
    return (size_t)snprintf(b, sizeof(b), "%zu", v);
}

Test(limits, http_head_bytes_and_header_count_follow_their_flags)
{
    struct daemon d;
    const char *args[] = {"--io-threads", "1", "--max-header-bytes", "2KiB", "--max-headers",
                          "10",           NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    size_t vl;
    free(httpc_vector("http-protobuf-logs.pb", &vl));
    size_t at_limit = 2048 - 82 - digits(vl);

    struct http_resp r;
    cr_assert_eq(post_padded(d.http_port, at_limit, 0, &r), 0);
    cr_expect_eq(r.status, 200, "a head of exactly 2 KiB: %d %s", r.status, (char *)r.body);
    http_resp_free(&r);
    cr_assert_eq(post_padded(d.http_port, at_limit + 1, 0, &r), 0);
    cr_expect_eq(r.status, 431);
    cr_expect_str_eq((char *)r.body, "request headers too large\n");
    http_resp_free(&r);

    /* Host, Content-Type, Content-Length, X-Pad and six more: ten. */
    cr_assert_eq(post_padded(d.http_port, 1, 6, &r), 0);
    cr_expect_eq(r.status, 200, "ten headers: %d %s", r.status, (char *)r.body);
    http_resp_free(&r);
    cr_assert_eq(post_padded(d.http_port, 1, 7, &r), 0);
    cr_expect_eq(r.status, 431);
    cr_expect_str_eq((char *)r.body, "too many request headers\n");
    http_resp_free(&r);

    cr_expect_eq(
        daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"http_protobuf\"}"),
        2 * 10);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(limits, grpc_header_list_and_concurrent_streams_follow_their_flags)
{
    struct daemon d;
    const char *args[] = {
        "--io-threads", "1", "--grpc-max-header-list", "2KiB", "--grpc-max-streams", "2", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);

    /* h2c's six headers, then x-padding; each counts name + value + 32. */
    char authority[32];
    snprintf(authority, sizeof(authority), "127.0.0.1:%d", d.grpc_port);
    size_t fixed = (7 + 4 + 32) * 2 + (10 + strlen(authority) + 32) + (5 + strlen(LOGS_PATH) + 32) +
                   (12 + 16 + 32) + (2 + 8 + 32) + (9 + 32);
    size_t at_limit = 2048 - fixed;
    char *pad = malloc(at_limit + 32);
    for (int over = 0; over <= 1; over++) {
        size_t n = at_limit + (size_t)over;
        memcpy(pad, "x-padding: ", 11);
        memset(pad + 11, 'p', n);
        pad[11 + n] = '\0';
        const char *extra[] = {pad, NULL};
        struct h2c_call call = {0};
        cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, extra, frame, fl, &call), 0);
        if (over) {
            cr_expect_eq(call.grpc_status, 8, "%zu bytes over: %d", n, call.grpc_status);
            cr_expect_str_eq(call.grpc_message, "request headers exceed 2048 bytes");
        } else {
            cr_expect_eq(call.grpc_status, 0, "exactly 2 KiB: %d %s", call.grpc_status,
                         call.grpc_message);
        }
        h2c_call_free(&call);
    }
    free(pad);

    /* Three streams in the first flight (before the client has our
     * SETTINGS): two are served, the third is refused. */
    struct h2c *h;
    cr_assert_eq(h2c_connect(d.grpc_port, false, &h), 0);
    struct h2c_call calls[3];
    for (int i = 0; i < 3; i++) {
        calls[i] =
            (struct h2c_call){.body = frame, .body_len = fl, .send_limit = 5, .keep_open = true};
        cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &calls[i]), 0);
    }
    cr_assert_eq(h2c_pump(h, &calls[2]), 0);
    cr_assert_eq(h2c_resume(h, &calls[0], SIZE_MAX, false), 0);
    cr_assert_eq(h2c_resume(h, &calls[1], SIZE_MAX, false), 0);
    cr_assert_eq(h2c_wait(h), 0);
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(calls[i].grpc_status, 0, "stream %d: %d %s", i, calls[i].grpc_status,
                     calls[i].grpc_message);
        cr_expect(!calls[i].rst_received);
    }
    cr_expect(calls[2].rst_received, "the third stream was not reset");
    cr_expect_eq(calls[2].rst_code, REFUSED_STREAM);
    cr_expect_eq(calls[2].grpc_status, -1);
    for (int i = 0; i < 3; i++) {
        h2c_call_free(&calls[i]);
    }
    h2c_free(h);

    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
                 3 * 10);
    free(frame);
    free(v);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- a stream's request headers trickled ---- */

#define HDR_CUT "reason=\"a stream's request headers did not arrive within --header-timeout\""

enum { F_DATA = 0, F_HEADERS = 1, F_RST = 3, F_SETTINGS = 4, F_GOAWAY = 7 };
enum { FL_END_STREAM = 1, FL_END_HEADERS = 4 };

/* What the server sent, frame by frame (read off the wire, no session). */
struct seen {
    bool closed;
    bool goaway;
    uint32_t goaway_code;
    int32_t rst_id;
    uint32_t rst_code;
    bool answer_end[8]; /* by stream id: a HEADERS frame with END_STREAM */
    uint8_t buf[1 << 16];
    size_t len;
};

static int send_frame(int fd, int type, int flags, int32_t id, const void *p, size_t n)
{
    uint8_t h[9] = {(uint8_t)(n >> 16),  (uint8_t)(n >> 8),  (uint8_t)n,
                    (uint8_t)type,       (uint8_t)flags,     (uint8_t)(id >> 24),
                    (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
    if (httpc_send_all(fd, h, 9) != 0) {
        return -1;
    }
    return p == NULL ? 0 : httpc_send_all(fd, p, n);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads what arrives within |ms| and records the frames completed. */
static void take_frames(int fd, int ms, struct seen *s)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (s->closed || poll(&pfd, 1, ms) <= 0) {
        return;
    }
    ssize_t n = recv(fd, s->buf + s->len, sizeof(s->buf) - s->len, MSG_DONTWAIT);
    if (n <= 0) {
        s->closed = true;
        return;
    }
    s->len += (size_t)n;
    size_t off = 0;
    while (s->len - off >= 9) {
        const uint8_t *h = s->buf + off;
        size_t plen = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        if (s->len - off < 9 + plen) {
            break;
        }
        int32_t id = (int32_t)(be32(h + 5) & 0x7fffffffu);
        if (h[3] == F_GOAWAY && plen >= 8) {
            s->goaway = true;
            s->goaway_code = be32(h + 9 + 4);
        } else if (h[3] == F_RST && plen == 4) {
            s->rst_id = id;
            s->rst_code = be32(h + 9);
        } else if (h[3] == F_HEADERS && (h[4] & FL_END_STREAM) && id > 0 && id < 8) {
            s->answer_end[id] = true;
        }
        off += 9 + plen;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }

/* The HPACK block of an export request, with an x-pad header of |pad| bytes. */
static size_t header_block(nghttp2_hd_deflater *def, size_t pad, uint8_t *out, size_t cap)
{
    char *p = malloc(pad + 1);
    memset(p, 'p', pad);
    p[pad] = '\0';
    nghttp2_nv nv[] = {NV(":method", "POST"),
                       NV(":scheme", "http"),
                       NV(":path", LOGS_PATH),
                       NV(":authority", "127.0.0.1"),
                       NV("content-type", "application/grpc"),
                       NV("te", "trailers"),
                       NV("x-pad", p)};
    ssize_t n = nghttp2_hd_deflate_hd(def, out, cap, nv, pad > 0 ? 7 : 6);
    free(p);
    cr_assert_gt(n, 0);
    return (size_t)n;
}

static int h2_open(int port)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    int fd = httpc_connect(port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, preface, 24), 0);
    cr_assert_eq(send_frame(fd, F_SETTINGS, 0, 0, NULL, 0), 0);
    return fd;
}

/* Stream |id|'s HEADERS frame (the whole block, END_HEADERS), its payload
 * a byte every 100 ms until |done| says so (at most 50; nghttp2 itself caps
 * the CONTINUATION frames of a block, so a frame trickled is the slow
 * case). The bytes sent; *off gets how far into |blk| they went. */
static int trickle_block(int fd, int32_t id, const uint8_t *blk, size_t len, size_t *off,
                         struct seen *s, bool (*done)(const struct seen *))
{
    int sent = 0;
    cr_assert_eq(send_frame(fd, F_HEADERS, FL_END_HEADERS, id, NULL, len), 0);
    *off = 0;
    while (sent < 50 && *off < len - 1 && !done(s)) {
        if (httpc_send_all(fd, blk + *off, 1) != 0) {
            break;
        }
        (*off)++;
        sent++;
        take_frames(fd, 100, s);
    }
    return sent;
}

static bool got_goaway(const struct seen *s)
{
    return s->goaway || s->closed;
}

static bool got_rst(const struct seen *s)
{
    return s->rst_id != 0 || s->closed;
}

Test(limits, a_grpc_stream_whose_headers_trickle_is_cut_off_after_header_timeout)
{
    struct daemon d;
    const char *args[] = {"--io-threads", "1", "--header-timeout", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    nghttp2_hd_deflater *def;
    uint8_t blk[1024];
    size_t off;
    struct seen *s = calloc(1, sizeof(*s));

    /* Alone on its connection: GOAWAY, then the connection is closed. */
    int fd = h2_open(d.grpc_port);
    cr_assert_eq(nghttp2_hd_deflate_new(&def, 4096), 0);
    size_t blen = header_block(def, 200, blk, sizeof(blk));
    int sent = trickle_block(fd, 1, blk, blen, &off, s, got_goaway);
    cr_expect(s->goaway, "no GOAWAY after %d trickled bytes", sent);
    cr_expect_eq(s->goaway_code, 0);
    cr_expect_lt(sent, 40, "cut off only after %d trickled bytes", sent);
    for (int i = 0; i < 300 && !s->closed; i++) {
        take_frames(fd, 100, s);
    }
    cr_expect(s->closed, "the connection stays open after its GOAWAY");
    close(fd);
    nghttp2_hd_deflate_del(def);

    /* Beside a stream in progress: only the slow stream is reset, and the
     * other one completes once the block is finished. */
    memset(s, 0, sizeof(*s));
    fd = h2_open(d.grpc_port);
    cr_assert_eq(nghttp2_hd_deflate_new(&def, 4096), 0);
    size_t vl, fl;
    uint8_t *v = httpc_vector("http-protobuf-logs.pb", &vl);
    uint8_t *frame = h2c_frame(v, vl, false, &fl);
    uint8_t blk1[512];
    size_t b1 = header_block(def, 0, blk1, sizeof(blk1));
    cr_assert_eq(send_frame(fd, F_HEADERS, FL_END_HEADERS, 1, blk1, b1), 0);
    cr_assert_eq(send_frame(fd, F_DATA, 0, 1, frame, fl / 2), 0);
    blen = header_block(def, 200, blk, sizeof(blk));
    sent = trickle_block(fd, 3, blk, blen, &off, s, got_rst);
    cr_expect_eq(s->rst_id, 3, "no RST_STREAM after %d trickled bytes", sent);
    cr_expect_eq(s->rst_code, 8 /* CANCEL */);
    cr_expect(!s->goaway && !s->closed);
    cr_assert_eq(httpc_send_all(fd, blk + off, blen - off), 0);
    cr_assert_eq(send_frame(fd, F_DATA, FL_END_STREAM, 1, frame + fl / 2, fl - fl / 2), 0);
    for (int i = 0; i < 300 && !s->answer_end[1] && !s->closed; i++) {
        take_frames(fd, 100, s);
    }
    cr_expect(s->answer_end[1], "stream 1 was not answered");
    close(fd);
    nghttp2_hd_deflate_del(def);
    free(frame);
    free(v);
    free(s);

    cr_expect_eq(log_count(&d, HDR_CUT), 2);
    cr_expect_eq(daemon_metric(&d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
                 10);
    cr_expect_eq(daemon_stop(&d), 0);
}
