/*
 * resp_test.c - exact bytes of the OTLP responses and google.rpc.Status
 * bodies, decoded back with protobuf-c (protobuf) and jansson (JSON).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "proto/resp.h"

#define RETRY_URL "type.googleapis.com/google.rpc.RetryInfo"

static void expect_bytes(long n, const uint8_t *got, const void *want, size_t wn)
{
    cr_assert_eq(n, (long)wn, "length %ld, want %zu", n, wn);
    cr_assert(memcmp(got, want, wn) == 0, "bytes differ");
}

static void expect_json(long n, const uint8_t *got, const char *want)
{
    cr_assert_eq(n, (long)strlen(want), "got '%.*s', want '%s'", (int)(n > 0 ? n : 0), got, want);
    cr_assert(memcmp(got, want, (size_t)n) == 0, "got '%.*s', want '%s'", (int)n, got, want);
    json_error_t je;
    json_t *doc = json_loadb((const char *)got, (size_t)n, 0, &je);
    cr_assert_not_null(doc, "not valid JSON: %s", je.text);
    json_decref(doc);
}

Test(resp, full_success_is_empty_protobuf_and_empty_json_object)
{
    uint8_t out[64];
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        cr_assert_eq(resp_export(OTLP_PROTOBUF, s, 0, NULL, out, sizeof(out)), 0);
        cr_assert_eq(resp_export(OTLP_PROTOBUF, s, 0, "", out, sizeof(out)), 0);
        cr_assert_eq(resp_export(OTLP_PROTOBUF, s, 0, NULL, NULL, 0), 0);
        expect_json(resp_export(OTLP_JSON, s, 0, NULL, out, sizeof(out)), out, "{}");
        expect_json(resp_export(OTLP_JSON, s, 0, "", out, sizeof(out)), out, "{}");
    }
}

Test(resp, partial_success_protobuf_bytes_decode_with_protobuf_c)
{
    uint8_t out[256];
    long n = resp_export(OTLP_PROTOBUF, SIG_LOGS, 3, "bad", out, sizeof(out));
    expect_bytes(n, out,
                 "\x0a\x07\x08\x03\x12\x03"
                 "bad",
                 9);
    Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceResponse *l =
        opentelemetry__proto__collector__logs__v1__export_logs_service_response__unpack(
            NULL, (size_t)n, out);
    cr_assert_not_null(l);
    cr_assert_not_null(l->partial_success);
    cr_assert_eq(l->partial_success->rejected_log_records, 3);
    cr_assert_str_eq(l->partial_success->error_message, "bad");
    opentelemetry__proto__collector__logs__v1__export_logs_service_response__free_unpacked(l, NULL);

    n = resp_export(OTLP_PROTOBUF, SIG_TRACES, 300, "x", out, sizeof(out));
    expect_bytes(n, out, "\x0a\x06\x08\xac\x02\x12\x01x", 8);
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse *t =
        opentelemetry__proto__collector__trace__v1__export_trace_service_response__unpack(
            NULL, (size_t)n, out);
    cr_assert_not_null(t);
    cr_assert_eq(t->partial_success->rejected_spans, 300);
    cr_assert_str_eq(t->partial_success->error_message, "x");
    opentelemetry__proto__collector__trace__v1__export_trace_service_response__free_unpacked(t,
                                                                                             NULL);

    /* a warning: nothing rejected, a message */
    n = resp_export(OTLP_PROTOBUF, SIG_METRICS, 0, "warn", out, sizeof(out));
    expect_bytes(n, out, "\x0a\x06\x12\x04warn", 8);
    /* rejected without a message */
    n = resp_export(OTLP_PROTOBUF, SIG_METRICS, 21, NULL, out, sizeof(out));
    expect_bytes(n, out, "\x0a\x02\x08\x15", 4);
    Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceResponse *m =
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__unpack(
            NULL, (size_t)n, out);
    cr_assert_not_null(m);
    cr_assert_eq(m->partial_success->rejected_data_points, 21);
    cr_assert_str_eq(m->partial_success->error_message, "");
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__free_unpacked(
        m, NULL);

    /* invalid UTF-8 is replaced, so strict proto3 parsers accept the message */
    n = resp_export(OTLP_PROTOBUF, SIG_LOGS, 1,
                    "a\xff"
                    "b",
                    out, sizeof(out));
    expect_bytes(n, out,
                 "\x0a\x09\x08\x01\x12\x05"
                 "a\xef\xbf\xbd"
                 "b",
                 11);
}

Test(resp, partial_success_json_names_the_signal_items)
{
    uint8_t out[256];
    expect_json(resp_export(OTLP_JSON, SIG_LOGS, 3, "bad", out, sizeof(out)), out,
                "{\"partialSuccess\":{\"rejectedLogRecords\":\"3\",\"errorMessage\":\"bad\"}}");
    expect_json(resp_export(OTLP_JSON, SIG_TRACES, 57, "x", out, sizeof(out)), out,
                "{\"partialSuccess\":{\"rejectedSpans\":\"57\",\"errorMessage\":\"x\"}}");
    expect_json(resp_export(OTLP_JSON, SIG_METRICS, 9223372036854775807LL, NULL, out, sizeof(out)),
                out, "{\"partialSuccess\":{\"rejectedDataPoints\":\"9223372036854775807\"}}");
    expect_json(resp_export(OTLP_JSON, SIG_LOGS, 0, "only a warning", out, sizeof(out)), out,
                "{\"partialSuccess\":{\"errorMessage\":\"only a warning\"}}");
}

Test(resp, status_with_retry_info_protobuf_bytes_decode_with_protobuf_c)
{
    uint8_t out[256];
    long n = resp_status(OTLP_PROTOBUF, GRPC_UNAVAILABLE, "busy", 5, out, sizeof(out));
    static const uint8_t want[] = "\x08\x0e" /* code 14 */
                                  "\x12\x04"
                                  "busy"                      /* message */
                                  "\x1a\x30"                  /* details: Any, 48 bytes */
                                  "\x0a\x28" RETRY_URL        /* type_url */
                                  "\x12\x04\x0a\x02\x08\x05"; /* RetryInfo{Duration{5}} */
    expect_bytes(n, out, want, sizeof(want) - 1);

    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, (size_t)n, out);
    cr_assert_not_null(st);
    cr_assert_eq(st->code, 14);
    cr_assert_str_eq(st->message, "busy");
    cr_assert_eq(st->n_details, 1);
    cr_assert_str_eq(st->details[0]->type_url, RETRY_URL);
    Google__Rpc__RetryInfo *ri = google__rpc__retry_info__unpack(NULL, st->details[0]->value.len,
                                                                 st->details[0]->value.data);
    cr_assert_not_null(ri);
    cr_assert_not_null(ri->retry_delay);
    cr_assert_eq(ri->retry_delay->seconds, 5);
    cr_assert_eq(ri->retry_delay->nanos, 0);
    google__rpc__retry_info__free_unpacked(ri, NULL);
    google__rpc__status__free_unpacked(st, NULL);

    /* a delay needing a 2-byte varint */
    n = resp_status(OTLP_PROTOBUF, GRPC_RESOURCE_EXHAUSTED, "", 300, out, sizeof(out));
    st = google__rpc__status__unpack(NULL, (size_t)n, out);
    cr_assert_not_null(st);
    cr_assert_eq(st->code, 8);
    cr_assert_str_eq(st->message, "");
    ri = google__rpc__retry_info__unpack(NULL, st->details[0]->value.len,
                                         st->details[0]->value.data);
    cr_assert_eq(ri->retry_delay->seconds, 300);
    google__rpc__retry_info__free_unpacked(ri, NULL);
    google__rpc__status__free_unpacked(st, NULL);
}

Test(resp, status_without_retry_info)
{
    uint8_t out[256];
    long n = resp_status(OTLP_PROTOBUF, GRPC_INVALID_ARGUMENT, "bad data", 0, out, sizeof(out));
    expect_bytes(n, out,
                 "\x08\x03\x12\x08"
                 "bad data",
                 12);
    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, (size_t)n, out);
    cr_assert_not_null(st);
    cr_assert_eq(st->code, 3);
    cr_assert_eq(st->n_details, 0);
    google__rpc__status__free_unpacked(st, NULL);

    expect_json(resp_status(OTLP_JSON, GRPC_INVALID_ARGUMENT, "bad data", 0, out, sizeof(out)), out,
                "{\"code\":3,\"message\":\"bad data\"}");
    expect_json(resp_status(OTLP_JSON, GRPC_INTERNAL, NULL, 0, out, sizeof(out)), out,
                "{\"code\":13}");
}

Test(resp, status_json_with_retry_info)
{
    uint8_t out[256];
    expect_json(resp_status(OTLP_JSON, GRPC_UNAVAILABLE, "server overloaded", 5, out, sizeof(out)),
                out,
                "{\"code\":14,\"message\":\"server overloaded\",\"details\":[{\"@type\":"
                "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"5s\"}]}");
    expect_json(resp_status(OTLP_JSON, GRPC_UNAVAILABLE, NULL, 30, out, sizeof(out)), out,
                "{\"code\":14,\"details\":[{\"@type\":"
                "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"30s\"}]}");
}

Test(resp, json_strings_are_escaped_and_made_valid_utf8)
{
    uint8_t out[512];
    const char *msg = "a\"b\\c\nd\te\x01"
                      "f\xff"
                      "g \xc3\xa9 \xe2\x82"
                      "\x7f/\r\b\f";
    long n = resp_status(OTLP_JSON, GRPC_INVALID_ARGUMENT, msg, 0, out, sizeof(out));
    expect_json(n, out,
                "{\"code\":3,\"message\":\"a\\\"b\\\\c\\nd\\te\\u0001f\xef\xbf\xbdg \xc3\xa9 "
                "\xef\xbf\xbd\xef\xbf\xbd\x7f/\\r\\b\\f\"}");
    json_t *doc = json_loadb((const char *)out, (size_t)n, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "message")),
                     "a\"b\\c\nd\te\x01"
                     "f\xef\xbf\xbdg \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\x7f/\r\b\f");
    json_decref(doc);

    n = resp_export(OTLP_JSON, SIG_TRACES, 1, "\xed\xa0\x80 surrogate", out, sizeof(out));
    expect_json(n, out,
                "{\"partialSuccess\":{\"rejectedSpans\":\"1\",\"errorMessage\":"
                "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd surrogate\"}}");
}

Test(resp, small_buffers_get_e2big_and_exact_ones_suffice)
{
    uint8_t out[256];
    struct {
        enum otlp_fmt f;
        int which;
    } cases[] = {{OTLP_PROTOBUF, 0}, {OTLP_JSON, 0}, {OTLP_PROTOBUF, 1}, {OTLP_JSON, 1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long full = cases[i].which == 0
                        ? resp_export(cases[i].f, SIG_LOGS, 7, "partial", out, sizeof(out))
                        : resp_status(cases[i].f, GRPC_UNAVAILABLE, "busy", 5, out, sizeof(out));
        cr_assert_gt(full, 0);
        uint8_t ref[256];
        memcpy(ref, out, (size_t)full);
        for (long cap = 0; cap <= full; cap++) {
            uint8_t small[256];
            memset(small, 0xaa, sizeof(small));
            long n = cases[i].which == 0
                         ? resp_export(cases[i].f, SIG_LOGS, 7, "partial", small, (size_t)cap)
                         : resp_status(cases[i].f, GRPC_UNAVAILABLE, "busy", 5, small, (size_t)cap);
            if (cap < full) {
                cr_assert_eq(n, -E2BIG, "cap %ld", cap);
                cr_assert_eq(small[cap], 0xaa, "wrote past cap %ld", cap);
            } else {
                cr_assert_eq(n, full);
                cr_assert(memcmp(small, ref, (size_t)full) == 0);
            }
        }
    }
}
