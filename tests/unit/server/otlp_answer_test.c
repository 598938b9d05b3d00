/*
 * otlp_answer_test.c - server/otlp_answer.c: the one table both listeners
 * answer an export from.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "server/otlp_answer.h"

static struct otlp_answer of(enum ingest_status st, int retry_after_s, const char *msg)
{
    struct ingest_result res = {.status = st, .retry_after_s = retry_after_s};
    struct otlp_answer a;
    snprintf(res.message, sizeof(res.message), "%s", msg);
    otlp_answer_of(&res, &a);
    return a;
}

Test(otlp_answer, every_status_has_its_http_status_and_grpc_code)
{
    static const struct {
        enum ingest_status st;
        int http;
        enum grpc_code code;
        const char *msg;
    } want[] = {
        {IS_OK, 200, GRPC_OK, ""},
        {IS_MALFORMED, 400, GRPC_INVALID_ARGUMENT, "malformed request"},
        {IS_TOO_LARGE, 413, GRPC_RESOURCE_EXHAUSTED, "request too large"},
        {IS_UNSUPPORTED, 415, GRPC_UNIMPLEMENTED, "unsupported"},
        {IS_OVERLOADED, 503, GRPC_UNAVAILABLE, "server overloaded, retry later"},
        {IS_INTERNAL, 500, GRPC_INTERNAL, "internal error"},
        {IS_SHUTTING_DOWN, 503, GRPC_UNAVAILABLE, "server shutting down"},
        {IS_STORAGE_FAILED, 503, GRPC_UNAVAILABLE, "storage unavailable, retry later"},
        {IS_TIMEOUT, 408, GRPC_DEADLINE_EXCEEDED, "request body timeout"},
        /* no answer yet is never sent; if it were, it is an internal error */
        {IS_PENDING, 500, GRPC_INTERNAL, "internal error"},
        {IS_ADMITTED, 500, GRPC_INTERNAL, "internal error"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct otlp_answer a = of(want[i].st, 0, "");
        cr_expect_eq(a.http_status, want[i].http, "status %d: %d", want[i].st, a.http_status);
        cr_expect_eq(a.grpc_code, want[i].code, "status %d: code %d", want[i].st, a.grpc_code);
        cr_expect_str_eq(a.message, want[i].msg, "status %d", want[i].st);
    }
}

Test(otlp_answer, only_unavailable_answers_carry_a_retry_delay_of_at_least_one_second)
{
    cr_expect_eq(of(IS_OVERLOADED, 0, "x").retry_after_s, 1);
    cr_expect_eq(of(IS_SHUTTING_DOWN, 0, "x").retry_after_s, 1);
    cr_expect_eq(of(IS_STORAGE_FAILED, 5, "x").retry_after_s, 5);
    cr_expect_eq(of(IS_OVERLOADED, 2, "x").retry_after_s, 2);
    cr_expect_eq(of(IS_MALFORMED, 5, "x").retry_after_s, 0);
    cr_expect_eq(of(IS_TOO_LARGE, 5, "x").retry_after_s, 0);
    cr_expect_eq(of(IS_TIMEOUT, 5, "x").retry_after_s, 0);
    cr_expect_eq(of(IS_INTERNAL, 5, "x").retry_after_s, 0);
    cr_expect_eq(of(IS_OK, 5, "").retry_after_s, 0);
}

Test(otlp_answer, the_results_own_message_wins_over_the_default)
{
    struct ingest_result res = {.status = IS_MALFORMED};
    struct otlp_answer a;
    snprintf(res.message, sizeof(res.message), "field 3 has wire type 7");
    otlp_answer_of(&res, &a);
    cr_expect_eq(a.message, res.message, "borrowed from the result");
    cr_expect_str_eq(a.message, "field 3 has wire type 7");
}

Test(otlp_answer, the_export_response_carries_partial_success_only_when_records_were_rejected)
{
    uint8_t out[256], plain[256];
    struct ingest_result ok = {.status = IS_OK, .records = 3};
    cr_expect_eq(otlp_answer_export(OTLP_PROTOBUF, SIG_LOGS, &ok, out, sizeof(out)), 0);
    cr_expect_eq(otlp_answer_export(OTLP_JSON, SIG_LOGS, &ok, out, sizeof(out)), 2);
    cr_expect_eq(memcmp(out, "{}", 2), 0);

    struct ingest_result part = {.status = IS_OK, .records = 3, .rejected = 2};
    snprintf(part.message, sizeof(part.message), "2 records had no body");
    long n = otlp_answer_export(OTLP_JSON, SIG_TRACES, &part, out, sizeof(out));
    long m = resp_export(OTLP_JSON, SIG_TRACES, 2, "2 records had no body", plain, sizeof(plain));
    cr_assert_gt(n, 2);
    cr_assert_eq(n, m);
    cr_expect_eq(memcmp(out, plain, (size_t)n), 0);
    cr_expect_eq(otlp_answer_export(OTLP_JSON, SIG_TRACES, &part, out, 4), -E2BIG);
}
