/*
 * hlimits_test.c - the header and stream limits (--max-header-bytes,
 * --max-headers, --grpc-max-header-list, --grpc-max-streams): a request
 * exactly at each limit is served, one byte / header / stream over it gets
 * the limit's answer, on a daemon started with small limits.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
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
