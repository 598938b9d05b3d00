/*
 * grpc_test.c - the OTLP/gRPC listener (server/grpc.c) against the real
 * daemon: the captured exporter vectors, concurrency and flow control on
 * one connection, every error answer (Trailers-Only, exact codes), the
 * admission cap before the body, client resets and abrupt closes, clients
 * that do not speak HTTP/2, and shutdown.
 *
 * Most calls go through tests/util/h2c (nghttp2's client session on a
 * blocking socket) so the frames sent and received are exact; one export
 * goes through curl as an independent client, and raw sockets script the
 * non-HTTP/2 cases.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <libdeflate.h>
#include <zstd.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define TRACES_PATH "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define METRICS_PATH "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

static const char *const signals[] = {"logs", "traces", "metrics"};

/* ---- helpers ---- */

static double metric(const struct daemon *d, const char *name, const char *labels)
{
    char series[256];
    snprintf(series, sizeof(series), "%s{%s}", name, labels);
    return daemon_metric(d, series);
}

static double records(const struct daemon *d, const char *sig)
{
    char labels[96];
    snprintf(labels, sizeof(labels), "signal=\"%s\",transport=\"grpc\"", sig);
    return metric(d, "miradb_otlp_records_total", labels);
}

static double errors(const struct daemon *d, const char *reason)
{
    char labels[64];
    snprintf(labels, sizeof(labels), "reason=\"%s\"", reason);
    return metric(d, "miradb_otlp_request_errors_total", labels);
}

static void start(struct daemon *d, const char *const *extra)
{
    cr_assert_eq(daemon_start(d, NULL, extra), 0, "the daemon did not start");
}

/* SIGTERM: exit 0 and no sanitizer report in the daemon's log. */
static void stop_clean(struct daemon *d)
{
    size_t len;
    int st = daemon_stop(d);
    uint8_t *log = httpc_read_file(d->log_path, &len);
    cr_assert_not_null(log);
    bool bad = strstr((char *)log, "AddressSanitizer") != NULL ||
               strstr((char *)log, "LeakSanitizer") != NULL ||
               strstr((char *)log, "runtime error") != NULL;
    if (st != 0 || bad) {
        fprintf(stderr, "%s\n", (char *)log);
    }
    free(log);
    cr_assert_eq(st, 0, "daemon exit status %d", st);
    cr_assert(!bad, "sanitizer report in the daemon's log");
}

/* An acknowledged export: 200, gRPC content type, one DATA frame holding
 * the empty Export*ServiceResponse (00 00000000), trailers with status 0. */
static void expect_ok(const struct h2c_call *c, const char *what)
{
    static const uint8_t empty[5] = {0, 0, 0, 0, 0};
    cr_assert(c->closed, "%s: not closed", what);
    cr_assert_eq(c->status, 200, "%s: :status %d", what, c->status);
    cr_assert_str_eq(c->content_type, "application/grpc", "%s", what);
    cr_assert_eq(c->grpc_status, 0, "%s: grpc-status %d (%s)", what, c->grpc_status,
                 c->grpc_message);
    cr_assert(!c->first_headers_end_stream, "%s: Trailers-Only on success", what);
    cr_assert_eq(c->header_frames, 2, "%s: %d HEADERS frames", what, c->header_frames);
    cr_assert_eq(c->data_frames, 1, "%s: %d DATA frames", what, c->data_frames);
    cr_assert_eq(c->data_len, 5, "%s: response message of %zu bytes", what, c->data_len);
    cr_assert_arr_eq(c->data, empty, 5, "%s: not the empty response", what);
    cr_assert_eq(c->close_code, 0, "%s: stream closed with error %u", what, c->close_code);
}

/* An error answer: Trailers-Only (the first and only HEADERS frame ends the
 * stream), :status 200, grpc-status |code|, a message, no DATA. */
static void expect_trailers_only(const struct h2c_call *c, int code, const char *what)
{
    cr_assert(c->closed, "%s: not closed", what);
    cr_assert_eq(c->grpc_status, code, "%s: grpc-status %d, expected %d (%s)", what, c->grpc_status,
                 code, c->grpc_message);
    cr_assert_eq(c->status, 200, "%s: :status %d", what, c->status);
    cr_assert_str_eq(c->content_type, "application/grpc", "%s", what);
    cr_assert(c->first_headers_end_stream, "%s: not Trailers-Only", what);
    cr_assert_eq(c->header_frames, 1, "%s: %d HEADERS frames", what, c->header_frames);
    cr_assert_eq(c->data_frames, 0, "%s: DATA in an error answer", what);
    cr_assert_gt(strlen(c->grpc_message), 0, "%s: no grpc-message", what);
}

/* One more export of the logs vector on |h| must still succeed. */
static void good_export(struct h2c *h, const char *what)
{
    size_t len;
    uint8_t *body = httpc_vector("grpc-logs.grpc-frame", &len);
    struct h2c_call c = {.body = body, .body_len = len};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &c), 0);
    cr_assert_eq(h2c_wait(h), 0, "%s: no answer", what);
    expect_ok(&c, what);
    h2c_call_free(&c);
    free(body);
}

static void good_export_new_conn(const struct daemon *d, const char *what)
{
    struct h2c *h;
    cr_assert_eq(h2c_connect(d->grpc_port, true, &h), 0, "%s: cannot connect", what);
    good_export(h, what);
    h2c_free(h);
}

/* ---- protobuf by hand, for messages the vectors do not cover ---- */

struct pb {
    uint8_t *p;
    size_t len, cap;
};

static void pb_bytes(struct pb *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    pb_bytes(b, tmp, n);
}

static void pb_len(struct pb *b, int field, const void *p, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_bytes(b, p, n);
}

/*
 * ExportLogsServiceRequest with one resource, one scope and |n| log records
 * (time, severity, a ~200-byte string body each). Returns the message.
 */
static struct pb logs_request(int n)
{
    struct pb recs = {0}, rec = {0}, any = {0}, res = {0}, req = {0};
    char text[256];

    for (int i = 0; i < n; i++) {
        rec.len = any.len = 0;
        uint64_t t = 1767225600000000000ull + (uint64_t)i * 1000;
        uint8_t t8[8];
        for (int k = 0; k < 8; k++) {
            t8[k] = (uint8_t)(t >> (8 * k));
        }
        pb_varint(&rec, 1 << 3 | 1); /* time_unix_nano, fixed64 */
        pb_bytes(&rec, t8, 8);
        pb_varint(&rec, 2 << 3 | 0); /* severity_number INFO */
        pb_varint(&rec, 9);
        pb_len(&rec, 3, "INFO", 4);
        int tl = snprintf(text, sizeof(text),
                          "record %07d: the quick brown fox jumps over the lazy dog while the "
                          "exporter batches log lines into one large export request to test "
                          "HTTP/2 flow control windows",
                          i);
        pb_len(&any, 1, text, (size_t)tl); /* AnyValue.string_value */
        pb_len(&rec, 5, any.p, any.len);   /* body */
        pb_len(&recs, 2, rec.p, rec.len);  /* ScopeLogs.log_records */
    }
    /* ResourceLogs.scope_logs (2) = ScopeLogs{log_records (2) ...} */
    pb_len(&res, 2, recs.p, recs.len);
    pb_len(&req, 1, res.p, res.len); /* ExportLogsServiceRequest.resource_logs */
    free(recs.p);
    free(rec.p);
    free(any.p);
    free(res.p);
    return req;
}

/* ---- index.json ---- */

struct vec {
    char file[128];
    char path[128];
    char sig[16];
    int items;
    size_t bytes;
    bool gzip;
};

/* The gRPC framed vectors listed in index.json. Returns how many. */
static int grpc_vectors(struct vec *out, int cap)
{
    char path[512];
    json_error_t err;
    int n = 0;

    snprintf(path, sizeof(path), "%s/index.json", httpc_vectors_dir());
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "index.json: %s", err.text);
    json_t *files = json_object_get(root, "files");
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        const char *file = json_string_value(json_object_get(f, "file"));
        const char *proto = json_string_value(json_object_get(f, "protocol"));
        size_t fl = strlen(file);
        if (strcmp(proto, "grpc") != 0 || fl < 11 || strcmp(file + fl - 11, ".grpc-frame") != 0) {
            continue;
        }
        cr_assert_lt(n, cap);
        struct vec *v = &out[n++];
        snprintf(v->file, sizeof(v->file), "%s", file);
        snprintf(v->path, sizeof(v->path), "%s", json_string_value(json_object_get(f, "path")));
        snprintf(v->sig, sizeof(v->sig), "%s", json_string_value(json_object_get(f, "signal")));
        v->items = (int)json_integer_value(json_object_get(f, "items"));
        v->bytes = (size_t)json_integer_value(json_object_get(f, "bytes"));
        v->gzip = strstr(file, ".gzip.") != NULL;
    }
    json_decref(root);
    return n;
}

/* ---- the vectors ---- */

Test(grpc, every_vector_is_acknowledged_and_counted_exactly)
{
    struct daemon d;
    struct vec v[16];
    int n = grpc_vectors(v, 16);
    double want_records[3] = {0}, want_requests[3] = {0}, want_bytes[3] = {0};
    struct h2c *h;

    cr_assert_eq(n, 6, "index.json lists %d gRPC framed vectors", n);
    start(&d, NULL);
    double accepted_before = daemon_metric(&d, "miradb_connections_accepted_total");
    cr_assert_geq(accepted_before, 1);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *body = httpc_vector(v[i].file, &len);
        cr_assert_eq(len, v[i].bytes);
        /* the headers the JS exporter sent (index.json grpcWireHeaders) */
        const char *hdr_id[] = {"grpc-accept-encoding: identity,deflate,gzip",
                                "grpc-timeout: 6943m",
                                "user-agent: OTel-OTLP-Exporter-JavaScript/0.223.0 "
                                "grpc-node-js/1.14.7",
                                NULL};
        const char *hdr_gz[] = {"grpc-encoding: gzip",
                                "grpc-accept-encoding: identity,deflate,gzip",
                                "grpc-timeout: 6951m",
                                "user-agent: OTel-OTLP-Exporter-JavaScript/0.223.0 "
                                "grpc-node-js/1.14.7",
                                NULL};
        struct h2c_call c = {.body = body, .body_len = len};
        cr_assert_eq(h2c_submit(h, v[i].path, v[i].gzip ? hdr_gz : hdr_id, &c), 0);
        cr_assert_eq(h2c_wait(h), 0, "%s: no answer", v[i].file);
        expect_ok(&c, v[i].file);
        cr_assert_eq(c.sent, len, "%s: body not all sent", v[i].file);
        cr_assert_str_eq(c.accept_encoding, "identity,gzip,zstd");
        for (int s = 0; s < 3; s++) {
            if (strcmp(v[i].sig, signals[s]) == 0) {
                want_records[s] += v[i].items;
                want_requests[s] += 1;
                want_bytes[s] += (double)(len - 5); /* the message, without its prefix */
            }
        }
        h2c_call_free(&c);
        free(body);
    }
    h2c_free(h);
    /* the one gRPC connection, plus the HTTP connection of this metric read */
    cr_expect_eq(daemon_metric(&d, "miradb_connections_accepted_total") - accepted_before, 2);

    for (int s = 0; s < 3; s++) {
        char labels[96];
        snprintf(labels, sizeof(labels), "signal=\"%s\",transport=\"grpc\"", signals[s]);
        cr_expect_eq(records(&d, signals[s]), want_records[s], "%s records: %g, expected %g",
                     signals[s], records(&d, signals[s]), want_records[s]);
        cr_expect_eq(metric(&d, "miradb_otlp_requests_total", labels), want_requests[s]);
        cr_expect_eq(metric(&d, "miradb_otlp_bytes_total", labels), want_bytes[s]);
    }
    cr_expect_eq(want_records[0], 20);
    cr_expect_eq(want_records[1], 114);
    cr_expect_eq(want_records[2], 42);
    const char *reasons[] = {"malformed",  "too_large",  "unsupported", "not_found",
                             "bad_method", "overloaded", "internal",    "shutting_down"};
    for (int r = 0; r < 8; r++) {
        cr_expect_eq(errors(&d, reasons[r]), 0, "errors %s", reasons[r]);
    }

    /* an independent client: curl with prior knowledge, trailers in the dump */
    char url[256], cmd[1024], hdrs[256];
    snprintf(hdrs, sizeof(hdrs), "%s", "/tmp/miradb-grpc-curl-XXXXXX");
    int fd = mkstemp(hdrs);
    cr_assert_geq(fd, 0);
    close(fd);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", d.grpc_port, TRACES_PATH);
    snprintf(cmd, sizeof(cmd),
             "curl -sS -m 20 --http2-prior-knowledge -H 'content-type: application/grpc' "
             "-H 'te: trailers' --data-binary @%s/grpc-traces.grpc-frame -D %s -o /dev/null %s",
             httpc_vectors_dir(), hdrs, url);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "curl failed: %d", st);
    size_t hl;
    uint8_t *dump = httpc_read_file(hdrs, &hl);
    unlink(hdrs);
    cr_assert_not_null(dump);
    cr_expect(strstr((char *)dump, "HTTP/2 200") != NULL, "%s", (char *)dump);
    cr_expect(strstr((char *)dump, "grpc-status: 0") != NULL, "%s", (char *)dump);
    free(dump);
    cr_expect_eq(records(&d, "traces"), want_records[1] + 57);

    stop_clean(&d);
}

/* ---- concurrency and flow control ---- */

Test(grpc, fifty_concurrent_streams_on_one_connection_all_succeed)
{
    struct daemon d;
    const char *files[3] = {"grpc-logs.grpc-frame", "grpc-traces.grpc-frame",
                            "grpc-metrics.grpc-frame"};
    const char *paths[3] = {LOGS_PATH, TRACES_PATH, METRICS_PATH};
    const int items[3] = {10, 57, 21};
    uint8_t *bodies[3];
    size_t lens[3];
    struct h2c_call calls[50];
    int per_sig[3] = {0};
    struct h2c *h;

    for (int s = 0; s < 3; s++) {
        bodies[s] = httpc_vector(files[s], &lens[s]);
    }
    start(&d, NULL);
    /* no wait for the server's SETTINGS: the first streams go out under the
     * default windows, before admission (the staged first flight) */
    cr_assert_eq(h2c_connect(d.grpc_port, false, &h), 0);
    for (int i = 0; i < 50; i++) {
        int s = i % 3;
        calls[i] = (struct h2c_call){.body = bodies[s], .body_len = lens[s]};
        cr_assert_eq(h2c_submit(h, paths[s], NULL, &calls[i]), 0);
        per_sig[s]++;
    }
    cr_assert_eq(h2c_wait(h), 0, "not every stream was answered");
    for (int i = 0; i < 50; i++) {
        char what[32];
        snprintf(what, sizeof(what), "stream %d", i);
        expect_ok(&calls[i], what);
        h2c_call_free(&calls[i]);
    }
    good_export(h, "after 50 streams");
    per_sig[0]++;
    h2c_free(h);
    for (int s = 0; s < 3; s++) {
        cr_expect_eq(records(&d, signals[s]), per_sig[s] * items[s], "%s: %g records", signals[s],
                     records(&d, signals[s]));
        free(bodies[s]);
    }
    stop_clean(&d);
}

Test(grpc, a_message_larger_than_the_stream_window_succeeds)
{
    struct daemon d;
    const int n = 46000;
    struct pb msg = logs_request(n);
    size_t len;
    uint8_t *body = h2c_frame(msg.p, msg.len, false, &len);
    struct h2c *h;

    cr_assert_gt(msg.len, 8u << 20, "built only %zu bytes", msg.len);
    start(&d, NULL);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the first 64 KiB arrive before admission (first flight);
         * pass 1: nothing but the prefix until the stream is admitted */
        struct h2c_call c = {.body = body, .body_len = len};
        cr_assert_eq(h2c_connect(d.grpc_port, pass == 1, &h), 0);
        cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &c), 0);
        cr_assert_eq(h2c_wait(h), 0, "no answer to the 8 MiB export");
        expect_ok(&c, "8 MiB export");
        cr_assert_eq(c.sent, len);
        h2c_call_free(&c);
        h2c_free(h);
    }
    cr_expect_eq(records(&d, "logs"), 2.0 * n);
    cr_expect_eq(metric(&d, "miradb_otlp_bytes_total", "signal=\"logs\",transport=\"grpc\""),
                 2.0 * (double)msg.len);
    free(msg.p);
    free(body);
    stop_clean(&d);
}

/*
 * One message delivered in odd pieces: the 5-byte prefix itself split, a
 * 1-byte DATA frame, pieces just past a 16 KiB frame, each piece sent
 * after a PING round trip so the server takes them in separate reads
 * (pacing only: nothing asserted depends on it). The same message sent
 * whole on another stream must store exactly the same: the same records
 * and the same bytes.
 */
Test(grpc, a_message_split_over_many_data_frames_and_reads_stores_the_same_records)
{
    struct daemon d;
    const int n = 2000;
    struct pb msg = logs_request(n);
    size_t len;
    uint8_t *body = h2c_frame(msg.p, msg.len, false, &len);
    const size_t cuts[] = {3, 5, 6, 1000, 1000 + 16385, 90000, 90000 + 16384, 200000};
    struct h2c *h;

    cr_assert_gt(len, 300000u, "built only %zu bytes", len);
    start(&d, NULL);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call split = {
        .body = body, .body_len = len, .send_limit = cuts[0], .keep_open = true};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &split), 0);
    cr_assert_eq(h2c_pump(h, &split), 0);
    for (size_t i = 1; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        cr_assert_eq(h2c_ping(h, 20), 0);
        cr_assert_eq(h2c_resume(h, &split, cuts[i], true), 0);
        cr_assert_eq(h2c_pump(h, &split), 0);
        cr_assert_eq(split.sent, cuts[i], "piece %zu: %zu bytes sent", i, split.sent);
        cr_assert(!split.closed, "answered after %zu of %zu bytes", split.sent, len);
    }
    cr_assert_eq(h2c_ping(h, 20), 0);
    cr_assert_eq(h2c_resume(h, &split, SIZE_MAX, false), 0);
    cr_assert_eq(h2c_wait(h), 0, "no answer to the split export");
    expect_ok(&split, "split export");
    cr_assert_eq(split.sent, len);
    h2c_call_free(&split);
    cr_expect_eq(records(&d, "logs"), (double)n);
    cr_expect_eq(metric(&d, "miradb_otlp_bytes_total", "signal=\"logs\",transport=\"grpc\""),
                 (double)msg.len);

    struct h2c_call whole = {.body = body, .body_len = len};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &whole), 0);
    cr_assert_eq(h2c_wait(h), 0, "no answer to the whole export");
    expect_ok(&whole, "whole export");
    h2c_call_free(&whole);
    h2c_free(h);
    cr_expect_eq(records(&d, "logs"), 2.0 * n);
    cr_expect_eq(metric(&d, "miradb_otlp_bytes_total", "signal=\"logs\",transport=\"grpc\""),
                 2.0 * (double)msg.len);
    free(msg.p);
    free(body);
    stop_clean(&d);
}

/*
 * A first flight (sent before the server's SETTINGS, under the RFC's
 * 64 KiB windows): the prefix and the whole message in one DATA frame,
 * admitted at once and taken from that one frame, with no answer before
 * END_STREAM. Then the same with a second message behind the first in
 * that frame: exactly one message per unary call, so UNIMPLEMENTED, and
 * the connection serves on.
 */
Test(grpc, a_first_flight_message_in_one_frame_is_stored_and_a_second_one_refused)
{
    struct daemon d;
    size_t vlen;
    uint8_t *v = httpc_vector("grpc-logs.grpc-frame", &vlen);
    struct h2c *h;

    cr_assert_lt(vlen, 16384u, "the vector no longer fits one DATA frame");
    start(&d, NULL);
    for (int i = 0; i < 3; i++) {
        struct h2c_call c = {.body = v, .body_len = vlen};
        cr_assert_eq(h2c_connect(d.grpc_port, false, &h), 0);
        cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &c), 0);
        cr_assert_eq(h2c_wait(h), 0, "first flight %d: no answer", i);
        expect_ok(&c, "first flight");
        h2c_call_free(&c);
        h2c_free(h);
    }
    cr_expect_eq(records(&d, "logs"), 3 * 10.0);
    cr_expect_eq(metric(&d, "miradb_otlp_bytes_total", "signal=\"logs\",transport=\"grpc\""),
                 3.0 * (double)(vlen - 5));

    uint8_t *two = malloc(2 * vlen);
    cr_assert_not_null(two);
    memcpy(two, v, vlen);
    memcpy(two + vlen, v, vlen);
    struct h2c_call twice = {.body = two, .body_len = 2 * vlen};
    cr_assert_eq(h2c_connect(d.grpc_port, false, &h), 0);
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &twice), 0);
    cr_assert_eq(h2c_wait(h), 0, "two messages: no answer");
    expect_trailers_only(&twice, 12, "two messages in one first-flight frame");
    h2c_call_free(&twice);
    good_export(h, "after two messages");
    h2c_free(h);
    cr_expect_eq(records(&d, "logs"), 4 * 10.0);
    cr_expect_eq(errors(&d, "unsupported"), 1);
    free(two);
    free(v);
    stop_clean(&d);
}

/* ---- errors ---- */

Test(grpc, every_error_is_a_trailers_only_answer_with_the_right_code)
{
    struct daemon d;
    size_t vlen, gzlen;
    uint8_t *v = httpc_vector("grpc-logs.grpc-frame", &vlen);
    uint8_t *gz = httpc_vector("grpc-logs.gzip.grpc-frame", &gzlen);
    struct h2c *h;

    start(&d, NULL);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);

    /* unknown method → UNIMPLEMENTED */
    struct h2c_call unk = {.body = v, .body_len = vlen};
    cr_assert_eq(
        h2c_submit(h, "/opentelemetry.proto.collector.logs.v1.LogsService/Nope", NULL, &unk), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&unk, 12, "unknown method");

    /* bytes that are not an ExportLogsServiceRequest → INVALID_ARGUMENT */
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02};
    size_t jl;
    uint8_t *jf = h2c_frame(junk, sizeof(junk), false, &jl);
    struct h2c_call garbage = {.body = jf, .body_len = jl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &garbage), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&garbage, 3, "garbage message");

    /* compressed flag without grpc-encoding → INTERNAL, at the prefix: the
     * body is never read, and RST_STREAM(NO_ERROR) ends the upload */
    struct h2c_call noenc = {.body = gz, .body_len = gzlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &noenc), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&noenc, 13, "compressed flag without grpc-encoding");
    cr_expect(noenc.rst_received, "no RST_STREAM after the early answer");
    cr_expect_eq(noenc.rst_code, 0, "RST_STREAM code %u", noenc.rst_code);
    cr_expect_eq(noenc.sent, 5, "%zu body bytes went out before the answer", noenc.sent);

    /* an encoding we do not implement → UNIMPLEMENTED + grpc-accept-encoding */
    const char *snappy[] = {"grpc-encoding: snappy", NULL};
    struct h2c_call enc = {.body = v, .body_len = vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, snappy, &enc), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&enc, 12, "grpc-encoding snappy");
    cr_expect_str_eq(enc.accept_encoding, "identity,gzip,zstd");

    /* flag 1 and grpc-encoding gzip, but not gzip inside → INVALID_ARGUMENT */
    const char *gzip_hdr[] = {"grpc-encoding: gzip", NULL};
    uint8_t *notgz = malloc(vlen);
    memcpy(notgz, v, vlen);
    notgz[0] = 1;
    struct h2c_call badgz = {.body = notgz, .body_len = vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, gzip_hdr, &badgz), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&badgz, 3, "flag 1 with a body that is not gzip");

    /* no message at all (HEADERS with END_STREAM) → UNIMPLEMENTED */
    struct h2c_call none = {.body = NULL};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &none), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&none, 12, "no message");

    /* two messages in one unary call → UNIMPLEMENTED */
    uint8_t *two = malloc(2 * vlen);
    memcpy(two, v, vlen);
    memcpy(two + vlen, v, vlen);
    struct h2c_call twice = {.body = two, .body_len = 2 * vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &twice), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&twice, 12, "two messages");

    /* the request ends inside its message → INTERNAL */
    struct h2c_call cut = {.body = v, .body_len = 100};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &cut), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&cut, 13, "truncated message");

    /* a header list over the advertised 16 KiB → RESOURCE_EXHAUSTED */
    char *bighdr = malloc(20000);
    memcpy(bighdr, "x-padding: ", 11);
    memset(bighdr + 11, 'a', 17000);
    bighdr[11 + 17000] = '\0';
    const char *big[] = {bighdr, NULL};
    struct h2c_call hl = {.body = v, .body_len = vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, big, &hl), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&hl, 8, "17 KB of headers");
    free(bighdr);

    /* not gRPC at all: HTTP 415 and 405, no grpc-status */
    const char *text[] = {"content-type: text/plain", NULL};
    struct h2c_call ct = {.body = v, .body_len = vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, text, &ct), 0);
    cr_assert_eq(h2c_wait(h), 0);
    cr_expect_eq(ct.status, 415);
    cr_expect_eq(ct.grpc_status, -1);
    const char *get[] = {":method: GET", NULL};
    struct h2c_call m = {.body = NULL};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, get, &m), 0);
    cr_assert_eq(h2c_wait(h), 0);
    cr_expect_eq(m.status, 405);
    cr_expect_eq(m.grpc_status, -1);

    /* after all of that the same connection still exports */
    good_export(h, "after the errors");
    h2c_free(h);

    cr_expect_eq(errors(&d, "not_found"), 1);
    cr_expect_eq(errors(&d, "malformed"), 2);
    cr_expect_eq(errors(&d, "internal"), 2);
    cr_expect_eq(errors(&d, "unsupported"), 4); /* snappy, no message, two messages, 415 */
    cr_expect_eq(errors(&d, "bad_method"), 1);
    cr_expect_eq(errors(&d, "too_large"), 1);
    cr_expect_eq(records(&d, "logs"), 10);

    struct h2c_call *all[] = {&unk,   &garbage, &noenc, &enc, &badgz, &none,
                              &twice, &cut,     &hl,    &ct,  &m};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        h2c_call_free(all[i]);
    }
    free(jf);
    free(notgz);
    free(two);
    free(v);
    free(gz);
    stop_clean(&d);
}

Test(grpc, over_the_cap_is_resource_exhausted_before_the_body_is_read)
{
    struct daemon d;
    const char *args[] = {"--max-request-bytes", "1048576", NULL};
    struct pb msg = logs_request(12000); /* about 2.2 MiB */
    size_t len;
    uint8_t *body = h2c_frame(msg.p, msg.len, false, &len);
    struct h2c *h;

    cr_assert_gt(msg.len, 2u << 20);
    start(&d, args);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call big = {.body = body, .body_len = len};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &big), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&big, 8, "2 MiB over a 1 MiB cap");
    cr_expect_str_eq(big.details_bin, "", "RESOURCE_EXHAUSTED must not carry RetryInfo");
    cr_expect(big.rst_received && big.rst_code == 0, "no RST_STREAM(NO_ERROR)");
    cr_expect_eq(big.sent, 5, "%zu bytes were sent: the body was read", big.sent);

    /* under the cap on the wire, over it once gunzipped: refused as well */
    size_t zlen = 4u << 20;
    uint8_t *zeros = calloc(1, zlen);
    struct libdeflate_compressor *comp = libdeflate_alloc_compressor(6);
    uint8_t gz[65536];
    size_t gl = libdeflate_gzip_compress(comp, zeros, zlen, gz + 5, sizeof(gz) - 5);
    libdeflate_free_compressor(comp);
    cr_assert_gt(gl, 0);
    gz[0] = 1;
    gz[1] = (uint8_t)(gl >> 24);
    gz[2] = (uint8_t)(gl >> 16);
    gz[3] = (uint8_t)(gl >> 8);
    gz[4] = (uint8_t)gl;
    const char *gzip_hdr[] = {"grpc-encoding: gzip", NULL};
    struct h2c_call bomb = {.body = gz, .body_len = gl + 5};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, gzip_hdr, &bomb), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&bomb, 8, "gzip bomb");
    cr_expect_str_eq(bomb.details_bin, "");

    good_export(h, "after the refusals");
    h2c_free(h);
    cr_expect_eq(errors(&d, "too_large"), 2);
    cr_expect_eq(records(&d, "logs"), 10);
    h2c_call_free(&big);
    h2c_call_free(&bomb);
    free(zeros);
    free(msg.p);
    free(body);
    stop_clean(&d);
}

/* One protobuf field of p[*i..n): varints in |v|, LEN fields in |sub|/|v|.
 * Returns false at the end or on a wire type these tests do not need. */
static bool pb_next(const uint8_t *p, size_t n, size_t *i, int *field, int *wt, uint64_t *v,
                    const uint8_t **sub)
{
    uint64_t x[2] = {0, 0};
    if (*i >= n) {
        return false;
    }
    for (int k = 0; k < 2; k++) {
        for (int s = 0;; s += 7) {
            cr_assert_lt(*i, n, "truncated varint");
            x[k] |= (uint64_t)(p[*i] & 0x7f) << s;
            if (!(p[(*i)++] & 0x80)) {
                break;
            }
        }
    }
    *field = (int)(x[0] >> 3);
    *wt = (int)(x[0] & 7);
    *v = x[1];
    if (*wt == 2) {
        cr_assert_leq(x[1], n - *i, "LEN field past the end");
        *sub = p + *i;
        *i += x[1];
        return true;
    }
    return *wt == 0;
}

/* google.rpc.Status{code 1, details 3: Any{type_url 1, value 2: RetryInfo{
 * retry_delay 1: Duration{seconds 1}}}}: the code, and the delay in seconds
 * of the RetryInfo detail (-1 when there is none). */
static long status_retry_delay(const uint8_t *p, size_t n, int *code)
{
    size_t i = 0, j, k, l;
    int f, wt;
    uint64_t v;
    const uint8_t *sub, *any_value = NULL;
    long delay = -1;

    while (pb_next(p, n, &i, &f, &wt, &v, &sub)) {
        if (f == 1 && wt == 0) {
            *code = (int)v;
        }
        if (f != 3 || wt != 2) {
            continue;
        }
        const uint8_t *any = sub;
        size_t any_len = v;
        bool retry_info = false;
        size_t value_len = 0;
        for (j = 0; pb_next(any, any_len, &j, &f, &wt, &v, &sub);) {
            if (f == 1 && wt == 2) {
                retry_info =
                    v == 40 && memcmp(sub, "type.googleapis.com/google.rpc.RetryInfo", 40) == 0;
            } else if (f == 2 && wt == 2) {
                any_value = sub;
                value_len = v;
            }
        }
        if (!retry_info || any_value == NULL) {
            continue;
        }
        for (k = 0; pb_next(any_value, value_len, &k, &f, &wt, &v, &sub);) {
            if (f != 1 || wt != 2) {
                continue;
            }
            const uint8_t *dur = sub;
            size_t dur_len = v;
            delay = 0;
            for (l = 0; pb_next(dur, dur_len, &l, &f, &wt, &v, &sub);) {
                if (f == 1 && wt == 0) {
                    delay = (long)v;
                }
            }
        }
    }
    return delay;
}

static size_t b64_decode(const char *in, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (; *in != '\0' && *in != '='; in++) {
        const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *q = strchr(tab, *in);
        cr_assert_not_null(q, "not base64: %c", *in);
        acc = acc << 6 | (uint32_t)(q - tab);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            cr_assert_lt(o, cap);
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

Test(grpc, overload_is_unavailable_with_retry_info)
{
    struct daemon d;
    /* one shard with a one-job queue that stays busy, and no admission wait */
    const char *args[] = {"--shards",           "1",    "--queue", "1", "--admit-wait", "0",
                          "--test-shard-delay", "2000", NULL};
    size_t len;
    uint8_t *body = httpc_vector("grpc-logs.grpc-frame", &len);
    struct h2c *h;

    start(&d, args);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call first = {.body = body, .body_len = len};
    struct h2c_call second = {.body = body, .body_len = len};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &first), 0);
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &second), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_ok(&first, "the export that got the queue slot");
    expect_trailers_only(&second, 14, "the export refused while the queue was full");
    cr_expect_eq(second.sent, 5, "%zu bytes of a refused export were read", second.sent);
    cr_assert_neq(second.details_bin[0], '\0', "UNAVAILABLE without grpc-status-details-bin");
    cr_assert_null(strchr(second.details_bin, '='), "details are padded base64");
    uint8_t st[1024];
    size_t sl = b64_decode(second.details_bin, st, sizeof(st));
    int code = -1;
    long delay = status_retry_delay(st, sl, &code);
    cr_expect_eq(code, 14, "google.rpc.Status code %d", code);
    cr_expect(memmem(st, sl, "type.googleapis.com/google.rpc.RetryInfo", 40) != NULL,
              "no RetryInfo detail");
    cr_expect_geq(delay, 1, "retry delay %ld s", delay);
    h2c_call_free(&first);
    h2c_call_free(&second);
    h2c_free(h);
    cr_expect_eq(errors(&d, "overloaded"), 1);
    cr_expect_eq(records(&d, "logs"), 10);
    free(body);
    stop_clean(&d);
}

Test(grpc, an_admitted_stream_flows_while_another_on_its_connection_waits_for_admission)
{
    struct daemon d;
    /* one logs shard with a one-job queue that a slow drain keeps busy */
    const char *args[] = {"--shards",           "1",    "--queue", "1", "--admit-wait", "10000",
                          "--test-shard-delay", "1000", NULL};
    struct pb msg = logs_request(1000); /* about 190 KB: many DATA frames */
    size_t bl, vl;
    uint8_t *big = h2c_frame(msg.p, msg.len, false, &bl);
    uint8_t *v = httpc_vector("grpc-logs.grpc-frame", &vl);
    struct h2c *h;

    start(&d, args);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    /* both prefixes arrive first (5-byte windows); one export gets the
     * slot, the other waits for it, and the admitted one's body must still
     * get through on the shared connection or the slot never frees */
    struct h2c_call a = {.body = big, .body_len = bl};
    struct h2c_call b = {.body = v, .body_len = vl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &a), 0);
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &b), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_ok(&a, "the large export");
    expect_ok(&b, "the small export");
    cr_expect_eq(daemon_metric(&d, "miradb_admission_waits_total"), 1, "waits %g",
                 daemon_metric(&d, "miradb_admission_waits_total"));
    cr_expect_eq(errors(&d, "overloaded"), 0);
    cr_expect_eq(records(&d, "logs"), 1010);
    h2c_call_free(&a);
    h2c_call_free(&b);
    h2c_free(h);
    free(msg.p);
    free(big);
    free(v);
    stop_clean(&d);
}

/* ---- resets, drops, strangers ---- */

Test(grpc, client_resets_and_abrupt_closes_leave_the_daemon_serving)
{
    struct daemon d;
    /* one I/O thread and one shard keep the counting below in order */
    const char *args[] = {"--io-threads", "1", "--shards", "1", NULL};
    struct pb msg = logs_request(1000); /* about 230 KiB */
    size_t len;
    uint8_t *body = h2c_frame(msg.p, msg.len, false, &len);
    struct h2c *h;

    start(&d, args);

    /* RST_STREAM(CANCEL) in the middle of an admitted message */
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call half = {.body = body, .body_len = len, .send_limit = len / 2};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &half), 0);
    cr_assert_eq(h2c_pump(h, &half), 0);
    cr_assert_eq(half.sent, len / 2);
    cr_assert(!half.closed);
    cr_assert_eq(h2c_rst(h, &half, 8 /* CANCEL */), 0);
    good_export(h, "after a reset on the same connection");
    h2c_free(h);

    /* RST_STREAM while waiting for admission (only the prefix sent) */
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call early = {.body = body, .body_len = len, .send_limit = 5};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &early), 0);
    cr_assert_eq(h2c_pump(h, &early), 0);
    cr_assert_eq(h2c_rst(h, &early, 8), 0);
    good_export(h, "after a reset before admission");
    h2c_free(h);

    /* the connection drops in the middle of a message */
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call dropped = {.body = body, .body_len = len, .send_limit = len / 3};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &dropped), 0);
    cr_assert_eq(h2c_pump(h, &dropped), 0);
    h2c_free(h);

    /* the connection drops in the first flight, before admission */
    cr_assert_eq(h2c_connect(d.grpc_port, false, &h), 0);
    struct h2c_call flight = {.body = body, .body_len = len, .send_limit = 30000};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &flight), 0);
    cr_assert_eq(h2c_pump(h, &flight), 0);
    h2c_free(h);

    /* the connection drops after the whole request went out: the export
     * still reaches the WAL (the answer has nowhere to go) */
    size_t vlen;
    uint8_t *v = httpc_vector("grpc-logs.grpc-frame", &vlen);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    struct h2c_call whole = {.body = v, .body_len = vlen};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, NULL, &whole), 0);
    cr_assert_eq(h2c_pump(h, &whole), 0);
    h2c_free(h);

    good_export_new_conn(&d, "after the drops");
    /* three good exports plus the one that was complete when its client
     * left (one shard, one I/O thread: it was counted before the last
     * answer); none of the 1000-record uploads that were cut */
    cr_expect_eq(records(&d, "logs"), 40, "%g records", records(&d, "logs"));
    h2c_call_free(&half);
    h2c_call_free(&early);
    h2c_call_free(&dropped);
    h2c_call_free(&flight);
    h2c_call_free(&whole);
    free(v);
    free(msg.p);
    free(body);
    stop_clean(&d);
}

/* Reads until the server closes |fd| (30 s at most); returns the bytes. */
static size_t read_to_eof(int fd, uint8_t *buf, size_t cap)
{
    size_t n = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&pfd, 1, 30000);
        cr_assert_gt(r, 0, "the server did not close the connection");
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            return n;
        }
        n += (size_t)k;
        cr_assert_lt(n, cap);
    }
}

/* The error code of the first GOAWAY among the frames in |p|, or -1. */
static long goaway_code(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i + 9 <= n) {
        size_t flen = (size_t)p[i] << 16 | (size_t)p[i + 1] << 8 | p[i + 2];
        if (p[i + 3] == 7 && i + 9 + flen <= n && flen >= 8) {
            const uint8_t *q = p + i + 9 + 4;
            return (long)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
        }
        i += 9 + flen;
    }
    return -1;
}

Test(grpc, clients_that_do_not_speak_http2_are_refused_and_the_daemon_serves_on)
{
    struct daemon d;
    size_t len;
    uint8_t *pb = httpc_vector("http-protobuf-logs.pb", &len);
    uint8_t buf[65536];
    size_t n;
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    start(&d, NULL);

    /* an OTLP/HTTP exporter pointed at the gRPC port */
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d.grpc_port, "POST", "/v1/logs", hdrs, pb, len, 0, &r), 0);
    cr_expect_eq(r.status, 400);
    http_resp_free(&r);

    /* garbage (a TLS ClientHello's first bytes): closed without a byte back */
    int fd = httpc_connect(d.grpc_port);
    cr_assert_geq(fd, 0);
    static const uint8_t tls[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03};
    cr_assert_eq(httpc_send_all(fd, tls, sizeof(tls)), 0);
    cr_expect_eq(read_to_eof(fd, buf, sizeof(buf)), 0, "bytes sent to a non-HTTP/2 client");
    close(fd);

    /* a preface that goes wrong half way: closed, and never a frame sent (it
     * reads like an HTTP/1.x request line, so a plain 400 is fine) */
    fd = httpc_connect(d.grpc_port);
    cr_assert_eq(httpc_send_all(fd, "PRI * HTTP/2.1\r\n\r\nSM\r\n\r\n", 24), 0);
    n = read_to_eof(fd, buf, sizeof(buf));
    cr_expect(n == 0 || (n > 12 && memcmp(buf, "HTTP/1.1 400", 12) == 0), "%zu bytes back", n);
    close(fd);

    /* a good preface, then a malformed frame: nghttp2's GOAWAY, then close */
    fd = httpc_connect(d.grpc_port);
    uint8_t bad[24 + 9 + 5];
    memcpy(bad, preface, 24);
    static const uint8_t settings5[] = {0, 0, 5, 4, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5};
    memcpy(bad + 24, settings5, sizeof(settings5));
    cr_assert_eq(httpc_send_all(fd, bad, sizeof(bad)), 0);
    n = read_to_eof(fd, buf, sizeof(buf));
    cr_expect_eq(goaway_code(buf, n), 6 /* FRAME_SIZE_ERROR */);
    close(fd);

    /* a good preface, then bytes that are no frame at all */
    fd = httpc_connect(d.grpc_port);
    uint8_t junk[24 + 32];
    memcpy(junk, preface, 24);
    memset(junk + 24, 0xee, 32);
    cr_assert_eq(httpc_send_all(fd, junk, sizeof(junk)), 0);
    n = read_to_eof(fd, buf, sizeof(buf));
    cr_expect_geq(goaway_code(buf, n), 1, "no GOAWAY with an error");
    close(fd);

    good_export_new_conn(&d, "after the strangers");
    cr_expect_eq(records(&d, "logs"), 10);
    free(pb);
    stop_clean(&d);
}

Test(grpc, shutdown_answers_the_request_in_flight_then_sends_goaway_and_exits_zero)
{
    struct daemon d;
    /* a slow shard keeps the second export in flight when SIGTERM comes */
    const char *args[] = {"--test-shard-delay", "500", NULL};
    size_t len;
    uint8_t *body = httpc_vector("grpc-traces.grpc-frame", &len);
    struct h2c *h, *idle;
    int32_t last = -1;

    start(&d, args);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &idle), 0);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    good_export(h, "before shutdown");
    struct h2c_call c = {.body = body, .body_len = len};
    cr_assert_eq(h2c_submit(h, TRACES_PATH, NULL, &c), 0);
    cr_assert_eq(h2c_pump(h, &c), 0); /* all sent: admitted, on its way to the shard */
    cr_assert_eq(kill(d.pid, SIGTERM), 0);
    cr_assert_eq(h2c_wait(h), 0, "the request in flight was not answered");
    expect_ok(&c, "the export in flight at SIGTERM");
    cr_assert_eq(h2c_wait_closed(h), 0);
    cr_expect(h2c_goaway(h, &last), "no GOAWAY before the close");
    cr_expect_eq(last, 3, "GOAWAY last stream id %d", last);
    /* the idle connection is told to go away as well */
    cr_assert_eq(h2c_wait_closed(idle), 0);
    cr_expect(h2c_goaway(idle, &last));
    cr_expect_eq(last, 0);
    stop_clean(&d);
    h2c_call_free(&c);
    h2c_free(h);
    h2c_free(idle);
    free(body);
}

/* grpc-encoding: zstd (the Collector's otlp exporter with compression: zstd):
 * a compressed message is decoded and counted; one that is not zstd is
 * INVALID_ARGUMENT; one that decodes past the cap RESOURCE_EXHAUSTED. */
Test(grpc, a_zstd_message_is_decoded_and_a_bad_or_oversize_one_refused)
{
    struct daemon d;
    const char *args[] = {"--max-request-bytes", "1048576", NULL};
    size_t vlen;
    uint8_t *v = httpc_vector("grpc-logs.pb", &vlen);
    struct h2c *h;
    start(&d, args);
    cr_assert_eq(h2c_connect(d.grpc_port, true, &h), 0);
    const char *zhdr[] = {"grpc-encoding: zstd", NULL};

    size_t zcap = ZSTD_compressBound(4u << 20);
    uint8_t *z = malloc(zcap);
    cr_assert_not_null(z);
    size_t zn = ZSTD_compress(z, zcap, v, vlen, 3);
    cr_assert(!ZSTD_isError(zn));
    size_t fl;
    uint8_t *framed = h2c_frame(z, zn, true, &fl);
    struct h2c_call ok = {.body = framed, .body_len = fl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, zhdr, &ok), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_ok(&ok, "zstd message");
    cr_expect_eq(records(&d, "logs"), 10);
    free(framed);

    /* flag 1 and grpc-encoding zstd, but not zstd inside */
    framed = h2c_frame(v, vlen, true, &fl);
    struct h2c_call bad = {.body = framed, .body_len = fl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, zhdr, &bad), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&bad, 3, "flag 1 with a body that is not zstd");
    free(framed);

    /* 4 MiB of zeros in a few hundred bytes, against a 1 MiB cap */
    uint8_t *zeros = calloc(1, 4u << 20);
    cr_assert_not_null(zeros);
    zn = ZSTD_compress(z, zcap, zeros, 4u << 20, 3);
    cr_assert(!ZSTD_isError(zn) && zn < 4096);
    framed = h2c_frame(z, zn, true, &fl);
    struct h2c_call bomb = {.body = framed, .body_len = fl};
    cr_assert_eq(h2c_submit(h, LOGS_PATH, zhdr, &bomb), 0);
    cr_assert_eq(h2c_wait(h), 0);
    expect_trailers_only(&bomb, 8, "zstd bomb");
    free(framed);

    good_export(h, "after the zstd refusals");
    cr_expect_eq(records(&d, "logs"), 20);
    cr_expect_eq(errors(&d, "malformed"), 1);
    cr_expect_eq(errors(&d, "too_large"), 1);
    h2c_free(h);
    h2c_call_free(&ok);
    h2c_call_free(&bad);
    h2c_call_free(&bomb);
    free(zeros);
    free(z);
    free(v);
    stop_clean(&d);
}
