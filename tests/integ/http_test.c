/*
 * http_test.c - the OTLP/HTTP listener against the real daemon: every
 * captured exporter request (plain and gzip, Content-Length and chunked),
 * exact /metrics counts, every error class with its status and body, the
 * size caps (before the body, while reading it, while inflating it),
 * keep-alive, pipelining, clients that vanish, CORS, the operator
 * endpoints, and a clean SIGTERM exit at the end of every test.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "google/rpc/status.pb-c.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/zbody.h"

#define CT_PB "Content-Type: application/x-protobuf"
#define CT_JSON "Content-Type: application/json"

static const char *hdr(const struct http_resp *r, const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    return http_resp_header(r, name, buf[i], sizeof(buf[i]));
}

/* The response's Content-Type is exactly |want|. */
static void expect_ctype(const struct http_resp *r, const char *want)
{
    const char *ct = hdr(r, "Content-Type");
    cr_expect_not_null(ct, "no Content-Type");
    if (ct != NULL) {
        cr_expect_str_eq(ct, want);
    }
}

/* A 200 whose body decodes as an Export*ServiceResponse with no partial success. */
static void expect_empty_success(const struct http_resp *r, const char *signal, bool json)
{
    cr_expect_eq(r->status, 200, "%s %s: status %d: %.*s", signal, json ? "json" : "protobuf",
                 r->status, (int)r->body_len, r->body ? (const char *)r->body : "");
    expect_ctype(r, json ? "application/json" : "application/x-protobuf");
    /* CORS is off without --cors-origins (tls_test covers it on) */
    cr_expect_null(hdr(r, "Access-Control-Allow-Origin"));
    if (json) {
        json_error_t e;
        json_t *v = json_loadb((const char *)r->body, r->body_len, 0, &e);
        cr_assert_not_null(v, "success body is not JSON: %s", e.text);
        cr_expect(json_is_object(v));
        json_t *ps = json_object_get(v, "partialSuccess");
        if (ps != NULL) {
            json_t *msg = json_object_get(ps, "errorMessage");
            cr_expect(json_object_size(ps) == 0 ||
                          (msg == NULL || strcmp(json_string_value(msg), "") == 0),
                      "partialSuccess in a full success");
        }
        json_decref(v);
        return;
    }
    if (strcmp(signal, "logs") == 0) {
        Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceResponse *m =
            opentelemetry__proto__collector__logs__v1__export_logs_service_response__unpack(
                NULL, r->body_len, r->body);
        cr_assert_not_null(m, "logs success body does not decode");
        cr_expect(m->partial_success == NULL || m->partial_success->rejected_log_records == 0);
        opentelemetry__proto__collector__logs__v1__export_logs_service_response__free_unpacked(
            m, NULL);
    } else if (strcmp(signal, "traces") == 0) {
        Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *m =
            opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
                NULL, r->body_len, r->body);
        cr_assert_not_null(m, "traces success body does not decode");
        cr_expect(m->partial_success == NULL || m->partial_success->rejected_spans == 0);
        opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(
            m, NULL);
    } else {
        Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceResponse *m =
            opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__unpack(
                NULL, r->body_len, r->body);
        cr_assert_not_null(m, "metrics success body does not decode");
        cr_expect(m->partial_success == NULL || m->partial_success->rejected_data_points == 0);
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__free_unpacked(
            m, NULL);
    }
}

/* |status| with a google.rpc.Status body in the request's encoding and a
 * non-empty message. */
static void expect_status_body(const struct http_resp *r, int status, bool json)
{
    cr_expect_eq(r->status, status, "status %d, want %d: %.*s", r->status, status, (int)r->body_len,
                 r->body ? (const char *)r->body : "");
    expect_ctype(r, json ? "application/json" : "application/x-protobuf");
    if (json) {
        json_error_t e;
        json_t *v = json_loadb((const char *)r->body, r->body_len, 0, &e);
        cr_assert_not_null(v, "Status body is not JSON: %s", e.text);
        json_t *msg = json_object_get(v, "message");
        cr_expect(json_is_string(msg) && strlen(json_string_value(msg)) > 0,
                  "Status JSON without a message");
        json_decref(v);
        return;
    }
    Google__Rpc__Status *s = google__rpc__status__unpack(NULL, r->body_len, r->body);
    cr_assert_not_null(s, "Status body does not decode");
    cr_expect(s->message != NULL && strlen(s->message) > 0, "Status without a message");
    google__rpc__status__free_unpacked(s, NULL);
}

static int post(const struct daemon *d, const char *path, const char *const *headers,
                const void *body, size_t len, size_t chunk, struct http_resp *out)
{
    return httpc_request(d->http_port, "POST", path, headers, body, len, chunk, out);
}

/* The captured logs export must still succeed (after an error class). */
static void good_export(const struct daemon *d, const char *after)
{
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    struct http_resp r;
    const char *h[] = {CT_PB, NULL};
    cr_assert_eq(post(d, "/v1/logs", h, body, len, 0, &r), 0, "no answer after %s", after);
    cr_expect_eq(r.status, 200, "a good export after %s got %d", after, r.status);
    http_resp_free(&r);
    free(body);
}

static double metric(const struct daemon *d, const char *fmt, const char *a, const char *b)
{
    char series[256];
    snprintf(series, sizeof(series), fmt, a, b);
    return daemon_metric(d, series);
}

/* Polls |series| until it equals |want| (deadline 30 s); the last value. */
static double wait_metric(const struct daemon *d, const char *series, double want)
{
    double v = -1;
    for (int i = 0; i < 3000; i++) {
        v = daemon_metric(d, series);
        if (v == want) {
            break;
        }
        usleep(10000);
    }
    return v;
}

/* ---- every captured request, counted exactly ---- */

struct vec {
    char file[64];
    char signal[16];
    bool json;
    long items;
    long bytes;
};

static int load_http_vectors(struct vec *out, int cap)
{
    char path[512];
    json_error_t e;
    int n = 0;
    snprintf(path, sizeof(path), "%s/index.json", httpc_vectors_dir());
    json_t *idx = json_load_file(path, 0, &e);
    cr_assert_not_null(idx, "index.json: %s", e.text);
    json_t *files = json_object_get(idx, "files");
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *proto = json_string_value(json_object_get(f, "protocol"));
        if (proto == NULL || strncmp(proto, "http/", 5) != 0) {
            continue;
        }
        cr_assert_lt(n, cap);
        struct vec *v = &out[n++];
        snprintf(v->file, sizeof(v->file), "%s", json_string_value(json_object_get(f, "file")));
        snprintf(v->signal, sizeof(v->signal), "%s",
                 json_string_value(json_object_get(f, "signal")));
        v->json = strcmp(proto, "http/json") == 0;
        v->items = (long)json_integer_value(json_object_get(f, "items"));
        v->bytes = (long)json_integer_value(json_object_get(f, "bytes"));
    }
    json_decref(idx);
    return n;
}

Test(http, every_captured_export_is_acknowledged_with_length_or_chunked_and_counted_exactly)
{
    struct daemon d;
    struct vec vecs[32];
    int nv = load_http_vectors(vecs, 32);
    const char *signals[] = {"logs", "traces", "metrics"};
    const char *transports[] = {"http_protobuf", "http_json"};
    long want_records[3][2] = {{0}}, want_requests[3][2] = {{0}}, want_bytes[3][2] = {{0}};

    cr_assert_eq(nv, 12, "index.json lists %d HTTP vectors, expected 12", nv);
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    for (int i = 0; i < nv; i++) {
        const struct vec *v = &vecs[i];
        bool gz = strstr(v->file, ".gz") != NULL;
        size_t len;
        uint8_t *body = httpc_vector(v->file, &len);
        char path[32];
        snprintf(path, sizeof(path), "/v1/%s", v->signal);
        for (int chunked = 0; chunked < 2; chunked++) {
            const char *h[4] = {v->json ? CT_JSON : CT_PB, NULL, NULL, NULL};
            int nh = 1;
            if (gz) {
                h[nh++] = "Content-Encoding: gzip";
            }
            if (chunked) {
                h[nh++] = "Transfer-Encoding: chunked";
            }
            struct http_resp r;
            cr_assert_eq(post(&d, path, h, body, len, chunked ? 1000 : 0, &r), 0, "%s: no answer",
                         v->file);
            expect_empty_success(&r, v->signal, v->json);
            http_resp_free(&r);
        }
        int s = strcmp(v->signal, "logs") == 0 ? 0 : strcmp(v->signal, "traces") == 0 ? 1 : 2;
        want_records[s][v->json] += 2 * v->items;
        want_requests[s][v->json] += 2;
        want_bytes[s][v->json] += 2 * (long)len;
        cr_expect_eq((long)len, v->bytes, "%s: size differs from index.json", v->file);
        free(body);
    }
    for (int s = 0; s < 3; s++) {
        for (int t = 0; t < 2; t++) {
            cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}",
                                signals[s], transports[t]),
                         (double)want_records[s][t], "records %s %s", signals[s], transports[t]);
            cr_expect_eq(metric(&d, "miradb_otlp_requests_total{signal=\"%s\",transport=\"%s\"}",
                                signals[s], transports[t]),
                         (double)want_requests[s][t], "requests %s %s", signals[s], transports[t]);
            cr_expect_eq(metric(&d, "miradb_otlp_bytes_total{signal=\"%s\",transport=\"%s\"}",
                                signals[s], transports[t]),
                         (double)want_bytes[s][t], "bytes %s %s", signals[s], transports[t]);
        }
        double grpc = metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}",
                             signals[s], "grpc");
        cr_expect(grpc == 0 || grpc == -1, "grpc records %s: %g", signals[s], grpc);
        cr_expect_eq(
            metric(&d, "miradb_otlp_rejected_records_total{signal=\"%s\"%s}", signals[s], ""), 0);
    }
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- errors ---- */

static double errors_of(const struct daemon *d, const char *reason)
{
    return metric(d, "miradb_otlp_request_errors_total{reason=\"%s\"}%s", reason, "");
}

Test(http, each_error_class_gets_its_status_and_a_good_export_follows)
{
    struct daemon d;
    struct http_resp r;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);

    /* Malformed protobuf: field 1 announces 5 bytes, 2 follow. */
    const char *pb[] = {CT_PB, NULL};
    cr_assert_eq(post(&d, "/v1/logs", pb,
                      "\x0a\x05"
                      "ab",
                      4, 0, &r),
                 0);
    expect_status_body(&r, 400, false);
    http_resp_free(&r);
    good_export(&d, "malformed protobuf");

    /* Malformed JSON, with a charset parameter on the media type. */
    const char *js[] = {"Content-Type: application/json; charset=utf-8", NULL};
    const char *bad_json = "{\"resourceSpans\": [";
    cr_assert_eq(post(&d, "/v1/traces", js, bad_json, strlen(bad_json), 0, &r), 0);
    expect_status_body(&r, 400, true);
    http_resp_free(&r);
    good_export(&d, "malformed JSON");

    /* Unknown path. */
    cr_assert_eq(post(&d, "/v1/nope", pb, "", 0, 0, &r), 0);
    cr_expect_eq(r.status, 404);
    http_resp_free(&r);
    good_export(&d, "404");

    /* Wrong method on an OTLP path. */
    cr_assert_eq(httpc_request(d.http_port, "GET", "/v1/logs", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 405);
    const char *allow = hdr(&r, "Allow");
    cr_expect(allow != NULL && strstr(allow, "POST") != NULL, "405 without Allow: POST");
    http_resp_free(&r);
    good_export(&d, "405");

    /* A content type that is not OTLP. */
    const char *txt[] = {"Content-Type: text/plain", NULL};
    cr_assert_eq(post(&d, "/v1/logs", txt, "hello", 5, 0, &r), 0);
    cr_expect_eq(r.status, 415);
    http_resp_free(&r);
    good_export(&d, "415 content type");

    /* An encoding we do not speak: a Status in the request's format. */
    const char *br[] = {CT_PB, "Content-Encoding: br", NULL};
    cr_assert_eq(post(&d, "/v1/metrics", br, "xxxx", 4, 0, &r), 0);
    expect_status_body(&r, 415, false);
    http_resp_free(&r);
    good_export(&d, "415 content encoding");

    cr_expect_eq(errors_of(&d, "malformed"), 2);
    cr_expect_eq(errors_of(&d, "not_found"), 1);
    cr_expect_eq(errors_of(&d, "bad_method"), 1);
    cr_expect_eq(errors_of(&d, "unsupported"), 2);
    cr_expect_eq(errors_of(&d, "too_large"), 0);
    cr_expect_eq(metric(&d, "miradb_otlp_requests_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 6);

    /* CORS preflight from a browser exporter: without --cors-origins no
     * origin is allowed, so no Access-Control-* header (tls_test has the
     * allowed case). */
    const char *pre[] = {"Origin: http://app.example", "Access-Control-Request-Method: POST",
                         "Access-Control-Request-Headers: content-type", NULL};
    cr_assert_eq(httpc_request(d.http_port, "OPTIONS", "/v1/traces", pre, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 204);
    cr_expect_null(hdr(&r, "Access-Control-Allow-Origin"));
    cr_expect_null(hdr(&r, "Access-Control-Allow-Methods"));
    cr_expect_null(hdr(&r, "Access-Control-Allow-Headers"));
    cr_expect_str_eq(hdr(&r, "Allow"), "POST, OPTIONS");
    http_resp_free(&r);

    /* Operator endpoints. */
    cr_assert_eq(httpc_request(d.http_port, "GET", "/health", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    cr_expect(r.body_len == 2 && memcmp(r.body, "ok", 2) == 0);
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "GET", "/ready", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "GET", "/metrics", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    expect_ctype(&r, "text/plain; version=0.0.4; charset=utf-8");
    cr_expect(r.body_len > 0 && strstr((const char *)r.body, "miradb_ready") != NULL);
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/health", NULL, "x", 1, 0, &r), 0);
    cr_expect_eq(r.status, 405);
    http_resp_free(&r);

    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- size caps ---- */

/* A connection with |head| written on it; the fd. */
static int send_head(const struct daemon *d, const char *head)
{
    int fd = httpc_connect(d->http_port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, head, strlen(head)), 0);
    return fd;
}

Test(http, over_the_cap_is_413_before_the_body_while_reading_and_while_inflating)
{
    struct daemon d;
    struct http_resp r;
    char carry[65536];
    size_t carry_len = 0;
    const char *args[] = {"--max-request-bytes", "1048576", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);

    /* Declared too large, asking for 100-continue: the answer is 413 and
     * no 100 comes first; the body is never sent. */
    int fd = send_head(&d, "POST /v1/logs HTTP/1.1\r\nHost: x\r\n" CT_PB "\r\n"
                           "Content-Length: 2097152\r\nExpect: 100-continue\r\n\r\n");
    cr_assert_eq(httpc_read_response(fd, 1, carry, sizeof(carry), &carry_len, &r), 0);
    expect_status_body(&r, 413, false);
    const char *conn = hdr(&r, "Connection");
    cr_expect(conn != NULL && strcasecmp(conn, "close") == 0, "413 without Connection: close");
    http_resp_free(&r);
    cr_expect(httpc_wait_closed(fd), "the connection stayed open after 413");
    close(fd);
    good_export(&d, "413 on Content-Length with 100-continue");

    /* Declared too large, body started: answered before the rest is sent. */
    fd = send_head(&d, "POST /v1/logs HTTP/1.1\r\nHost: x\r\n" CT_PB "\r\n"
                       "Content-Length: 2097152\r\n\r\n");
    char part[1000];
    memset(part, 0x0a, sizeof(part));
    httpc_send_all(fd, part, sizeof(part));
    carry_len = 0;
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    expect_status_body(&r, 413, false);
    http_resp_free(&r);
    close(fd);
    good_export(&d, "413 on Content-Length");

    /* Chunked, no length: refused once the running total passes the cap. */
    size_t big = 2u << 20;
    uint8_t *zeros = calloc(1, big);
    cr_assert_not_null(zeros);
    const char *chunked[] = {CT_JSON, "Transfer-Encoding: chunked", NULL};
    cr_assert_eq(post(&d, "/v1/logs", chunked, zeros, big, 65536, &r), 0);
    expect_status_body(&r, 413, true);
    http_resp_free(&r);
    good_export(&d, "chunked over the cap");

    /* A gzip bomb: 64 MiB of zeros in ~64 KiB, inflated only up to the cap. */
    size_t plain = 64u << 20;
    uint8_t *bomb_src = calloc(1, plain);
    cr_assert_not_null(bomb_src);
    size_t blen;
    uint8_t *bomb = zbody_gzip(bomb_src, plain, &blen);
    free(bomb_src);
    cr_assert_lt(blen, 1u << 20, "the bomb (%zu bytes) must fit under the cap", blen);
    const char *gz[] = {CT_PB, "Content-Encoding: gzip", NULL};
    cr_assert_eq(post(&d, "/v1/logs", gz, bomb, blen, 0, &r), 0);
    expect_status_body(&r, 413, false);
    http_resp_free(&r);
    free(bomb);
    good_export(&d, "gzip bomb");

    /* Headers past 64 KiB. */
    size_t hl = 70000;
    char *hbig = malloc(hl + 16);
    memcpy(hbig, "X-Big: ", 7);
    memset(hbig + 7, 'a', hl);
    hbig[7 + hl] = '\0';
    const char *hh[] = {CT_PB, hbig, NULL};
    cr_assert_eq(post(&d, "/v1/logs", hh, "", 0, 0, &r), 0);
    cr_expect_eq(r.status, 431);
    http_resp_free(&r);
    free(hbig);
    good_export(&d, "431");

    /* A body within the cap with 100-continue: 100 first, then the answer. */
    size_t len;
    uint8_t *body = httpc_vector("http-protobuf-traces.pb", &len);
    char head[256];
    snprintf(head, sizeof(head),
             "POST /v1/traces HTTP/1.1\r\nHost: x\r\n" CT_PB "\r\nContent-Length: %zu\r\n"
             "Expect: 100-continue\r\n\r\n",
             len);
    fd = send_head(&d, head);
    carry_len = 0;
    cr_assert_eq(httpc_read_response(fd, 1, carry, sizeof(carry), &carry_len, &r), 0);
    cr_expect_eq(r.status, 100);
    http_resp_free(&r);
    cr_assert_eq(httpc_send_all(fd, body, len), 0);
    cr_assert_eq(httpc_read_response(fd, 1, carry, sizeof(carry), &carry_len, &r), 0);
    expect_empty_success(&r, "traces", false);
    http_resp_free(&r);
    close(fd);
    free(body);

    cr_expect_eq(errors_of(&d, "too_large"), 5);
    cr_expect_eq(metric(&d, "miradb_otlp_requests_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 5);
    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "traces",
                        "http_protobuf"),
                 57);
    free(zeros);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- one connection, several requests ---- */

static char *request_text(const char *path, const char *ctype, const uint8_t *body, size_t len,
                          size_t *out_len)
{
    char head[256];
    int hn = snprintf(head, sizeof(head),
                      "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, ctype, len);
    char *p = malloc((size_t)hn + len);
    memcpy(p, head, (size_t)hn);
    memcpy(p + hn, body, len);
    *out_len = (size_t)hn + len;
    return p;
}

Test(http, keep_alive_and_pipelined_requests_are_answered_in_order)
{
    struct daemon d;
    struct http_resp r;
    char carry[65536];
    size_t carry_len = 0;
    size_t llen, tlen, n1, n2, n3;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    uint8_t *logs = httpc_vector("http-protobuf-logs.pb", &llen);
    uint8_t *traces = httpc_vector("http-json-traces.json", &tlen);
    char *q1 = request_text("/v1/logs", "application/x-protobuf", logs, llen, &n1);
    char *q2 = request_text("/v1/traces", "application/json", traces, tlen, &n2);
    const char *health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *bad = "{\"resourceLogs\":";
    char *q3 = request_text("/v1/logs", "application/json", (const uint8_t *)bad, strlen(bad), &n3);
    double conns0 = daemon_metric(&d, "miradb_connections_accepted_total");

    int fd = httpc_connect(d.http_port);
    cr_assert_geq(fd, 0);
    /* Keep-alive: one request after another on one connection. */
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(httpc_send_all(fd, q1, n1), 0);
        cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
        expect_empty_success(&r, "logs", false);
        http_resp_free(&r);
        cr_assert_eq(httpc_send_all(fd, health, strlen(health)), 0);
        cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
        cr_expect_eq(r.status, 200);
        http_resp_free(&r);
    }
    /* Pipelined: four requests in one write, four answers in order (the
     * content types tell them apart), an error among them not breaking
     * the connection. */
    size_t total = n1 + n2 + strlen(health) + n3;
    char *all = malloc(total);
    memcpy(all, q1, n1);
    memcpy(all + n1, q2, n2);
    memcpy(all + n1 + n2, health, strlen(health));
    memcpy(all + n1 + n2 + strlen(health), q3, n3);
    cr_assert_eq(httpc_send_all(fd, all, total), 0);
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    expect_empty_success(&r, "logs", false);
    http_resp_free(&r);
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    expect_empty_success(&r, "traces", true);
    http_resp_free(&r);
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    cr_expect_eq(r.status, 200);
    expect_ctype(&r, "text/plain; charset=utf-8");
    http_resp_free(&r);
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    expect_status_body(&r, 400, true);
    http_resp_free(&r);
    /* ...and the connection still serves. */
    cr_assert_eq(httpc_send_all(fd, q1, n1), 0);
    cr_assert_eq(httpc_read_response(fd, 0, carry, sizeof(carry), &carry_len, &r), 0);
    expect_empty_success(&r, "logs", false);
    http_resp_free(&r);
    cr_expect_eq(carry_len, 0, "bytes after the last answer");
    close(fd);

    /* Everything above used one connection (plus one per /metrics read). */
    cr_expect_eq(daemon_metric(&d, "miradb_connections_accepted_total"), conns0 + 2);
    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 40);
    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "traces",
                        "http_json"),
                 57);
    free(all);
    free(q1);
    free(q2);
    free(q3);
    free(logs);
    free(traces);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- clients that go away ---- */

Test(http, clients_that_vanish_mid_request_leave_the_daemon_serving)
{
    struct daemon d;
    size_t len;
    char head[256];
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);

    /* Mid-body, with a length. */
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: x\r\n" CT_PB "\r\nContent-Length: %zu\r\n\r\n", len);
    int fd = send_head(&d, head);
    httpc_send_all(fd, body, len / 2);
    close(fd);
    good_export(&d, "a disconnect mid-body");

    /* Mid-body, chunked. */
    fd = send_head(&d, "POST /v1/logs HTTP/1.1\r\nHost: x\r\n" CT_PB
                       "\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n");
    httpc_send_all(fd, body, 0x400);
    close(fd);
    good_export(&d, "a disconnect mid-chunk");

    /* Mid-headers. */
    fd = send_head(&d, "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Ty");
    close(fd);
    good_export(&d, "a disconnect mid-headers");

    /* A whole request, then gone before the answer. */
    size_t n;
    char *q = request_text("/v1/logs", "application/x-protobuf", body, len, &n);
    fd = httpc_connect(d.http_port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send_all(fd, q, n), 0);
    close(fd);
    good_export(&d, "a disconnect before the answer");

    /* Only the whole requests were acknowledged: 4 good + the abandoned one
     * (which may still be on its way through a shard: wait for it). */
    cr_expect_eq(wait_metric(&d,
                             "miradb_otlp_requests_total{signal=\"logs\","
                             "transport=\"http_protobuf\"}",
                             5),
                 5);
    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 50);
    /* Nothing the vanished requests held stays charged: once idle, the
     * budget holds exactly the open blocks and what ingest's caches keep
     * for the next request (miradb_ingest_cache_bytes). */
    double in_use = -1, blocks = -2;
    for (int i = 0; i < 3000 && in_use != blocks; i++) {
        in_use = daemon_metric(&d, "miradb_memory_in_use_bytes");
        blocks = 0;
        for (int s = 0; s < 3; s++) {
            const char *sig[] = {"logs", "traces", "metrics"};
            blocks += metric(&d, "miradb_open_block_bytes{signal=\"%s\"}%s", sig[s], "");
        }
        blocks += daemon_metric(&d, "miradb_ingest_cache_bytes{kind=\"buffers\"}") +
                  daemon_metric(&d, "miradb_ingest_cache_bytes{kind=\"batches\"}");
        if (in_use != blocks) {
            usleep(10000);
        }
    }
    cr_expect_eq(in_use, blocks, "memory in use %g, open blocks and caches %g", in_use, blocks);
    free(q);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(http, sigterm_closes_idle_keep_alive_connections_and_exits_zero)
{
    struct daemon d;
    struct http_resp r;
    char carry[4096];
    size_t carry_len = 0, len, n;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    uint8_t *body = httpc_vector("http-protobuf-logs.pb", &len);
    char *q = request_text("/v1/logs", "application/x-protobuf", body, len, &n);

    /* One idle keep-alive connection after an export, one stuck in its headers. */
    int idle = httpc_connect(d.http_port);
    cr_assert_geq(idle, 0);
    cr_assert_eq(httpc_send_all(idle, q, n), 0);
    cr_assert_eq(httpc_read_response(idle, 0, carry, sizeof(carry), &carry_len, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    int stuck = send_head(&d, "POST /v1/logs HTTP/1.1\r\nHost: x\r\n");
    /* Both are established once the daemon has served a later request. */
    good_export(&d, "opening the connections");

    cr_expect_eq(daemon_stop(&d), 0);
    /* They were closed when the listener quiesced, not when the grace
     * period ran out. */
    size_t loglen;
    char *log = (char *)httpc_read_file(d.log_path, &loglen);
    cr_assert_not_null(log);
    cr_expect(strstr(log, "stop_grace_expired") == NULL, "shutdown waited for connections:\n%s",
              log);
    cr_expect(strstr(log, "event=stopped exit=0") != NULL, "no clean stop in the log:\n%s", log);
    free(log);
    close(idle);
    close(stuck);
    free(q);
    free(body);
}

/* ---- zstd (Content-Encoding: zstd, as the Collector's otlphttp sends it
 * with compression: zstd) ---- */

Test(http, a_zstd_body_is_decoded_and_a_bad_or_oversize_one_refused)
{
    struct daemon d;
    struct http_resp r;
    const char *args[] = {"--max-request-bytes", "1048576", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    size_t lpb, ljs;
    uint8_t *logs = httpc_vector("http-protobuf-logs.pb", &lpb);
    uint8_t *traces = httpc_vector("http-json-traces.json", &ljs);
    const char *zpb[] = {CT_PB, "Content-Encoding: zstd", NULL};
    const char *zjs[] = {CT_JSON, "Content-Encoding: zstd", NULL};

    /* Sized, unsized, and two frames with a skippable frame between them
     * (the records of both frames, the skippable one ignored). */
    size_t a, b;
    uint8_t *za = zbody_zstd(logs, lpb, true, &a), *zb = zbody_zstd(logs, lpb, false, &b);
    cr_assert_eq(post(&d, "/v1/logs", zpb, za, a, 0, &r), 0);
    expect_empty_success(&r, "logs", false);
    http_resp_free(&r);
    cr_assert_eq(post(&d, "/v1/logs", zpb, zb, b, 0, &r), 0);
    expect_empty_success(&r, "logs", false);
    http_resp_free(&r);
    /* Frames decode to the concatenation of their contents: the request cut
     * anywhere into two frames, a skippable frame (magic 0x184D2A50, a
     * 4-byte size, that many bytes) between them, is the same request. */
    size_t h1, h2;
    uint8_t *f1 = zbody_zstd(logs, lpb / 2, true, &h1);
    uint8_t *f2 = zbody_zstd(logs + lpb / 2, lpb - lpb / 2, false, &h2);
    uint8_t two[32768];
    const uint8_t skip[11] = {0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'};
    cr_assert_lt(h1 + sizeof(skip) + h2, sizeof(two));
    memcpy(two, f1, h1);
    memcpy(two + h1, skip, sizeof(skip));
    memcpy(two + h1 + sizeof(skip), f2, h2);
    free(f1);
    free(f2);
    cr_assert_eq(post(&d, "/v1/logs", zpb, two, h1 + sizeof(skip) + h2, 0, &r), 0);
    expect_empty_success(&r, "logs", false);
    http_resp_free(&r);
    size_t t;
    uint8_t *zt = zbody_zstd(traces, ljs, true, &t);
    cr_assert_eq(post(&d, "/v1/traces", zjs, zt, t, 0, &r), 0);
    expect_empty_success(&r, "traces", true);
    http_resp_free(&r);
    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 30);

    /* Not zstd, cut short, or followed by other bytes: 400, and nothing kept. */
    cr_assert_eq(post(&d, "/v1/logs", zpb, logs, lpb, 0, &r), 0);
    expect_status_body(&r, 400, false);
    http_resp_free(&r);
    cr_assert_eq(post(&d, "/v1/logs", zpb, za, a - 3, 0, &r), 0);
    expect_status_body(&r, 400, false);
    http_resp_free(&r);
    cr_assert_eq(post(&d, "/v1/logs", zpb, zb, b - 3, 0, &r), 0);
    expect_status_body(&r, 400, false);
    http_resp_free(&r);
    memcpy(two, za, a);
    memcpy(two + a, "junk", 4);
    cr_assert_eq(post(&d, "/v1/logs", zpb, two, a + 4, 0, &r), 0);
    expect_status_body(&r, 400, false);
    http_resp_free(&r);
    good_export(&d, "bad zstd");

    /* Bombs: 4 MiB of zeros against a 1 MiB cap, sized (refused from its
     * header) and unsized (decoded up to the cap). */
    size_t plain = 4u << 20;
    uint8_t *zeros = calloc(1, plain);
    cr_assert_not_null(zeros);
    for (int sized = 0; sized < 2; sized++) {
        size_t bn;
        uint8_t *bomb = zbody_zstd(zeros, plain, sized, &bn);
        cr_assert_lt(bn, 4096);
        cr_assert_eq(post(&d, "/v1/logs", zpb, bomb, bn, 0, &r), 0);
        expect_status_body(&r, 413, false);
        cr_expect(r.body_len > 0 && memmem(r.body, r.body_len, "unzstd", 6) != NULL,
                  "413 body without 'unzstd'");
        http_resp_free(&r);
        free(bomb);
    }
    free(zeros);
    good_export(&d, "zstd bomb");

    cr_expect_eq(metric(&d, "miradb_otlp_records_total{signal=\"%s\",transport=\"%s\"}", "logs",
                        "http_protobuf"),
                 50, "30 zstd'd records and two good exports of 10");
    cr_expect_eq(errors_of(&d, "malformed"), 4);
    cr_expect_eq(errors_of(&d, "too_large"), 2);
    cr_expect_eq(daemon_stop(&d), 0);
    free(za);
    free(zb);
    free(zt);
    free(logs);
    free(traces);
}
