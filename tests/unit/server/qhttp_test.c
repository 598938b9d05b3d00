/*
 * qhttp_test.c - the query runner's error table and parameters
 * (server/qhttp.c): the status each API answers for each error code, and
 * form parameters decoded the way Loki's and Tempo's handlers read them.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "server/qhttp.h"

/* Prometheus' error body, as a PromQL handler would write it (no escaping
 * needed for these messages). */
static void prom_body(struct evbuffer *b, const struct qhttp_error *e, const char *msg)
{
    evbuffer_add_printf(b, "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":\"%s\"}", e->type,
                        msg);
}

static const struct qhttp_dialect prom = {
    .api = QHTTP_PROM, .error_ctype = "application/json", .error_body = prom_body};
static const struct qhttp_dialect plain = {.api = QHTTP_LOKI};

/* The body |d| answers for |rc|, NUL-terminated into |out|; its Content-Type. */
static const char *body_of(const struct qhttp_dialect *d, int rc, const char *msg, char *out,
                           size_t cap)
{
    struct evbuffer *b = evbuffer_new();
    cr_assert_not_null(b);
    const char *ct = qhttp_error_write(d, b, qhttp_error_of(rc), msg);
    size_t n = evbuffer_remove(b, out, cap - 1);
    out[n] = '\0';
    evbuffer_free(b);
    return ct;
}

Test(qhttp, each_api_keeps_its_status_for_an_error_code)
{
    const struct qhttp_error *e = qhttp_error_of(-E2BIG);
    cr_expect_eq(e->status[QHTTP_LOKI], 400);
    cr_expect_eq(e->status[QHTTP_TEMPO], 422);
    cr_expect_eq(e->status[QHTTP_PROM], 422);
    cr_expect_eq(e->outcome, QS_LIMIT);
    cr_expect_str_eq(e->type, "execution");

    e = qhttp_error_of(-ENOMEM);
    cr_expect_eq(e->status[QHTTP_LOKI], 422);
    cr_expect_eq(e->status[QHTTP_TEMPO], 422);
    cr_expect_eq(e->outcome, QS_LIMIT);

    e = qhttp_error_of(-EINVAL);
    for (int api = 0; api < QHTTP_API_COUNT; api++) {
        cr_expect_eq(e->status[api], 400);
    }
    cr_expect_eq(e->outcome, QS_BAD_REQUEST);
    cr_expect_str_eq(e->type, "bad_data");

    e = qhttp_error_of(-ETIMEDOUT);
    cr_expect_eq(e->status[QHTTP_LOKI], 504);
    cr_expect_eq(e->status[QHTTP_TEMPO], 504);
    cr_expect_eq(e->status[QHTTP_PROM], 503);
    cr_expect_eq(e->outcome, QS_TIMEOUT);

    e = qhttp_error_of(-ENOENT);
    cr_expect_eq(e->status[QHTTP_TEMPO], 404);
    cr_expect_eq(e->outcome, QS_OK);
}

Test(qhttp, a_full_queue_is_a_503_with_retry_after_and_counted_overloaded)
{
    const struct qhttp_error *e = qhttp_error_of(-EAGAIN);
    for (int api = 0; api < QHTTP_API_COUNT; api++) {
        cr_expect_eq(e->status[api], 503);
    }
    cr_expect(e->retry_after);
    cr_expect_eq(e->outcome, QS_OVERLOADED);
    cr_expect_not(qhttp_error_of(-ENOBUFS)->retry_after);
    cr_expect_eq(qhttp_error_of(-ENOBUFS)->status[QHTTP_TEMPO], 503);
}

Test(qhttp, an_unknown_code_is_an_internal_error)
{
    const struct qhttp_error *e = qhttp_error_of(-EIO);
    cr_expect_eq(e->rc, 0);
    cr_expect_eq(e->status[QHTTP_LOKI], 500);
    cr_expect_eq(e->status[QHTTP_PROM], 500);
    cr_expect_eq(e->outcome, QS_ERROR);
    cr_expect_str_eq(e->type, "internal");
    cr_expect_eq(qhttp_error_of(-12345), e);
}

Test(qhttp, parameters_are_decoded_and_the_first_of_a_name_wins)
{
    struct qhttp_params ps;
    const char form[] = "query=%7Bapp%3D%22b%22%7D&limit=7&extra";
    cr_assert_eq(
        qhttp_params_parse(&ps, "query=a+b%21&&limit=10&query=second", form, sizeof(form) - 1), 0);
    cr_expect_eq(ps.n, 6);
    size_t n = 0;
    cr_expect_str_eq(qhttp_param(&ps, "query", &n), "a b!");
    cr_expect_eq(n, 4);
    uint64_t v = 0;
    cr_expect_eq(qhttp_param_u64(&ps, "limit", &v), 1);
    cr_expect_eq(v, 10);
    cr_expect_str_eq(qhttp_param(&ps, "extra", &n), "");
    cr_expect_eq(n, 0);
    cr_expect_null(qhttp_param(&ps, "absent", NULL));
    cr_expect_str_eq(ps.value[4], "7"); /* the form's, after the query string's */
    qhttp_params_fini(&ps);
}

Test(qhttp, a_value_keeps_its_decoded_length_past_a_nul)
{
    struct qhttp_params ps;
    cr_assert_eq(qhttp_params_parse(&ps, "q=ab%00cd&q%00x=1", NULL, 0), 0);
    size_t n = 0;
    const char *q = qhttp_param(&ps, "q", &n);
    cr_assert_not_null(q);
    cr_expect_eq(n, 5);
    cr_expect_eq(memcmp(q, "ab\0cd", 5), 0);
    cr_expect_eq(ps.name_len[1], 3); /* "q\0x" is not "q" */
    qhttp_params_fini(&ps);
}

Test(qhttp, malformed_numbers_are_told_apart_from_absent_ones)
{
    struct qhttp_params ps;
    cr_assert_eq(qhttp_params_parse(&ps, "a=&b=-1&c=12x&d=99999999999999999999&e=42", NULL, 0), 0);
    uint64_t v = 5;
    cr_expect_eq(qhttp_param_u64(&ps, "a", &v), -1);
    cr_expect_eq(qhttp_param_u64(&ps, "b", &v), -1);
    cr_expect_eq(qhttp_param_u64(&ps, "c", &v), -1);
    cr_expect_eq(qhttp_param_u64(&ps, "d", &v), -1);
    cr_expect_eq(v, 5);
    cr_expect_eq(qhttp_param_u64(&ps, "none", &v), 0);
    cr_expect_eq(v, 5);
    cr_expect_eq(qhttp_param_u64(&ps, "e", &v), 1);
    cr_expect_eq(v, 42);
    qhttp_params_fini(&ps);
}

Test(qhttp, past_the_parameter_limit_the_rest_are_dropped)
{
    char q[QHTTP_MAX_PARAMS * 8 + 16];
    size_t o = 0;
    for (int i = 0; i <= QHTTP_MAX_PARAMS; i++) {
        o += (size_t)snprintf(q + o, sizeof(q) - o, "%sp%d=1", i ? "&" : "", i);
    }
    struct qhttp_params ps;
    cr_assert_eq(qhttp_params_parse(&ps, q, NULL, 0), 0);
    cr_expect_eq(ps.n, QHTTP_MAX_PARAMS);
    cr_expect_not_null(qhttp_param(&ps, "p63", NULL));
    cr_expect_null(qhttp_param(&ps, "p64", NULL));
    qhttp_params_fini(&ps);
}

Test(qhttp, a_path_is_decoded_without_form_rules)
{
    char s[] = "a+b%2Fc%zz%4";
    size_t n = qhttp_url_decode(s, strlen(s), false);
    cr_expect_str_eq(s, "a+b/c%zz%4");
    cr_expect_eq(n, strlen("a+b/c%zz%4"));
    char f[] = "a+b%2fc";
    qhttp_url_decode(f, strlen(f), true);
    cr_expect_str_eq(f, "a b/c");
}

Test(qhttp, a_dialect_chooses_the_error_body_and_its_content_type)
{
    char out[256];
    cr_expect_str_eq(body_of(&prom, -ETIMEDOUT, NULL, out, sizeof(out)), "application/json");
    cr_expect_str_eq(out, "{\"status\":\"error\",\"errorType\":\"timeout\",\"error\":\"query "
                          "timed out (--query-timeout)\"}");
    body_of(&prom, -E2BIG, "too many samples", out, sizeof(out));
    cr_expect_str_eq(
        out, "{\"status\":\"error\",\"errorType\":\"execution\",\"error\":\"too many samples\"}");
    cr_expect_str_eq(body_of(&plain, -EINVAL, "parse error", out, sizeof(out)),
                     "text/plain; charset=utf-8");
    cr_expect_str_eq(out, "parse error");
    body_of(&plain, -EAGAIN, "", out, sizeof(out));
    cr_expect_str_eq(out, "too many queries in flight; retry later");
}
