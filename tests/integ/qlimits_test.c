/*
 * qlimits_test.c - queries that grow without bound in one request, against
 * the real daemon (issue 9, findings 1 and 7): operator chains far longer
 * than any nesting (1+1+...+1, 2,000 count_over_time joined by +, TraceQL
 * {} && {} && ...) are refused with a 400 naming the limit and the daemon
 * keeps answering; | json and | logfmt on a line of 100,000 keys answer
 * before a 5 s --query-timeout; a regex with catastrophic backtracking
 * ends the query with an error at once instead of running the match limit
 * out line after line.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"
#include "tests/util/tstr.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)

/* ---- helpers ------------------------------------------------------------------- */

/* |term| |n| times joined by |op|; returned owned. */
static char *chain(const char *term, const char *op, int n)
{
    struct tstr s = {0};
    for (int i = 0; i < n; i++) {
        tstr_add(&s, "%s%s", i ? op : "", term);
    }
    return s.p;
}

/* Percent-encodes |s|; returned owned. */
static char *url_enc_dup(const char *s)
{
    size_t cap = 3 * strlen(s) + 4;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    httpc_url_enc(out, cap, s);
    return out;
}

/* One request; the status, the body (owned) and the time it took. A
 * connection that fails (the daemon died) fails the test. */
static int request(const struct daemon *d, const char *method, const char *path, const char *form,
                   char **body, long long *ms)
{
    const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    struct http_resp r;
    long long t0 = tclock_ms();
    cr_assert_eq(httpc_request(d->http_port, method, path, form ? hdrs : NULL, form,
                               form ? strlen(form) : 0, 0, &r),
                 0, "%s %.80s...: no answer (did the daemon die?)", method, path);
    if (ms != NULL) {
        *ms = tclock_ms() - t0;
    }
    *body = strndup(r.body ? (char *)r.body : "", r.body_len);
    int st = r.status;
    http_resp_free(&r);
    return st;
}

static void export(const struct daemon *d, const char *path, const char *json)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", path, hdrs, json, strlen(json), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* One resource |svc| with one log record per line (body strings, already
 * JSON-escaped), at T0 + 1 s, then 1 ms apart. */
static void export_logs(const struct daemon *d, const char *svc, const char *const *lines, size_t n)
{
    struct tstr s = {0};
    tstr_add(&s,
             "{\"resourceLogs\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
             "\"value\":{\"stringValue\":\"%s\"}}]},\"scopeLogs\":[{\"scope\":{},"
             "\"logRecords\":[",
             svc);
    for (size_t i = 0; i < n; i++) {
        tstr_add(&s, "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":\"%s\"}}",
                 i ? "," : "", (T0 + 1) * NS + (uint64_t)i * 1000000, lines[i]);
    }
    tstr_add(&s, "]}]}]}");
    export(d, "/v1/logs", s.p);
    free(s.p);
}

/* An instant LogQL query at T0 + 30 s (GET, or a form POST when |post|). */
static int loki_instant(const struct daemon *d, const char *q, bool post, char **body,
                        long long *ms)
{
    char *enc = url_enc_dup(q);
    struct tstr s = {0};
    int st;
    if (post) {
        tstr_add(&s, "query=%s&time=%" PRIu64, enc, (T0 + 30) * NS);
        st = request(d, "POST", "/loki/api/v1/query", s.p, body, ms);
    } else {
        tstr_add(&s, "/loki/api/v1/query?query=%s&time=%" PRIu64, enc, (T0 + 30) * NS);
        st = request(d, "GET", s.p, NULL, body, ms);
    }
    free(s.p);
    free(enc);
    return st;
}

/* The value of a one-element vector or of a scalar answer. */
static void expect_value(const char *q, const char *body, const char *want)
{
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "%.60s: not JSON: %.200s", q, body);
    json_t *data = json_object_get(j, "data");
    const char *rt = json_string_value(json_object_get(data, "resultType"));
    cr_assert_not_null(rt, "%.60s: %.200s", q, body);
    json_t *res = json_object_get(data, "result");
    const char *got;
    if (strcmp(rt, "scalar") == 0) {
        got = json_string_value(json_array_get(res, 1));
    } else {
        cr_assert_str_eq(rt, "vector", "%.60s", q);
        cr_assert_eq(json_array_size(res), 1, "%.60s: %.300s", q, body);
        got =
            json_string_value(json_array_get(json_object_get(json_array_get(res, 0), "value"), 1));
    }
    cr_assert_not_null(got, "%.60s: %.200s", q, body);
    cr_assert_str_eq(got, want, "%.60s", q);
    json_decref(j);
}

static void expect_loki(const struct daemon *d, const char *q, bool post, int status,
                        const char *frag)
{
    char *body;
    int st = loki_instant(d, q, post, &body, NULL);
    cr_assert_eq(st, status, "%.60s...: %d %.300s", q, st, body);
    cr_assert(strstr(body, frag) != NULL, "%.60s...: %.300s", q, body);
    free(body);
}

static void expect_loki_value(const struct daemon *d, const char *q, bool post, const char *want)
{
    char *body;
    int st = loki_instant(d, q, post, &body, NULL);
    cr_assert_eq(st, 200, "%.60s...: %d %.300s", q, st, body);
    expect_value(q, body, want);
    free(body);
}

static const char *const ONE_SHARD[] = {"--shards", "1", "--io-threads", "1", NULL};

/* ---- finding 1: operator chains ------------------------------------------------ */

Test(qlimits, logql_operator_chains_past_the_limit_are_400_and_the_daemon_lives)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    static const char *const lines[] = {"a=1 b=x", "a=1 b=y", "a=2 b=z"};
    export_logs(&d, "chain", lines, 3);

    /* 2,000 terms (the crash), 1,025 (one past the limit), 2,000 range aggregations */
    char *q = chain("1", "+", 2000);
    expect_loki(&d, q, false, 400, "query too complex: more than 1024 binary operators");
    free(q);
    q = chain("1", "+", 1026);
    expect_loki(&d, q, false, 400, "query too complex: more than 1024 binary operators");
    free(q);
    q = chain("count_over_time({service_name=\"chain\"}[1m])", "+", 2000);
    expect_loki(&d, q, true, 400, "query too complex: more than 1024 binary operators");
    free(q);
    q = chain("sum(count_over_time({service_name=\"chain\"}[1m]))", " * ", 3000);
    expect_loki(&d, q, true, 400, "query too complex: more than 1024 binary operators");
    free(q);
    /* label filter chains: and/or are operators too */
    char *lf = chain("b=\"q\"", " or ", 2000);
    struct tstr s = {0};
    tstr_add(&s, "count_over_time({service_name=\"chain\"} | logfmt | %s [1m])", lf);
    expect_loki(&d, s.p, true, 400, "query too complex: more than 1024 label filter operators");
    free(s.p);
    free(lf);

    /* up to the limit, chains evaluate (left-deep: in a loop, not one frame a term) */
    q = chain("1", "+", 1025);
    expect_loki_value(&d, q, false, "1025");
    free(q);
    q = chain("sum(count_over_time({service_name=\"chain\"}[1m]))", "+", 300);
    expect_loki_value(&d, q, true, "900");
    free(q);
    lf = chain("b=\"q\"", " or ", 1000);
    s = (struct tstr){0};
    tstr_add(&s, "sum(count_over_time({service_name=\"chain\"} | logfmt | %s or b=\"y\" [1m]))",
             lf);
    expect_loki_value(&d, s.p, true, "1");
    free(s.p);
    free(lf);

    /* and the daemon still answers an ordinary query */
    expect_loki_value(&d, "sum(count_over_time({service_name=\"chain\"} | logfmt | a=\"1\" [1m]))",
                      false, "2");
    cr_assert_eq(daemon_stop(&d), 0);
}

static int tempo_search(const struct daemon *d, const char *q, char **body, long long *ms)
{
    char *enc = url_enc_dup(q);
    struct tstr s = {0};
    tstr_add(&s, "/api/search?q=%s&start=%" PRIu64 "&end=%" PRIu64, enc, T0, T0 + 100);
    int st = request(d, "GET", s.p, NULL, body, ms);
    free(s.p);
    free(enc);
    return st;
}

static void expect_tempo(const struct daemon *d, const char *q, int status, const char *frag)
{
    char *body;
    int st = tempo_search(d, q, &body, NULL);
    cr_assert_eq(st, status, "%.60s...: %d %.300s", q, st, body);
    cr_assert(strstr(body, frag) != NULL, "%.60s...: %.300s", q, body);
    free(body);
}

/* Two spans of one trace: root "GET /a" (span.a = 1) and its child
 * |child_name|; start T0 + 10 s. */
static void export_trace(const struct daemon *d, const char *child_name)
{
    struct tstr s = {0};
    tstr_add(&s,
             "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
             "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"t\"},"
             "\"spans\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":"
             "\"1111111111111111\",\"name\":\"GET /a\",\"kind\":2,\"startTimeUnixNano\":\"%" PRIu64
             "\",\"endTimeUnixNano\":\"%" PRIu64 "\",\"attributes\":[{\"key\":\"a\",\"value\":"
             "{\"intValue\":\"1\"}}]},{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
             "\"spanId\":\"2222222222222222\",\"parentSpanId\":\"1111111111111111\",\"name\":"
             "\"%s\",\"kind\":3,\"startTimeUnixNano\":\"%" PRIu64
             "\",\"endTimeUnixNano\":\"%" PRIu64 "\"}]}]}]}",
             (T0 + 10) * NS, (T0 + 11) * NS, child_name, (T0 + 10) * NS + 1000,
             (T0 + 10) * NS + 2000);
    export(d, "/v1/traces", s.p);
    free(s.p);
}

static void expect_tempo_found(const struct daemon *d, const char *q)
{
    char *body;
    int st = tempo_search(d, q, &body, NULL);
    cr_assert_eq(st, 200, "%.60s...: %d %.300s", q, st, body);
    cr_assert(strstr(body, "\"traceID\":\"102030405060708090a0b0c0d0e0f10\"") != NULL ||
                  strstr(body, "\"traceID\":\"0102030405060708090a0b0c0d0e0f10\"") != NULL,
              "%.60s...: %.300s", q, body);
    free(body);
}

Test(qlimits, traceql_operator_chains_past_the_limit_are_400_and_the_daemon_lives)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_trace(&d, "child");

    const char *msg = "query too complex: more than 1024 operators";
    char *q = chain("{}", "&&", 2000);
    expect_tempo(&d, q, 400, msg);
    free(q);
    q = chain("{ }", " >> ", 2000);
    expect_tempo(&d, q, 400, msg);
    free(q);
    char *f = chain("span.a = 1", " || ", 2000);
    struct tstr s = {0};
    tstr_add(&s, "{ %s }", f);
    expect_tempo(&d, s.p, 400, msg);
    free(s.p);
    free(f);
    f = chain("1", " + ", 2000);
    s = (struct tstr){0};
    tstr_add(&s, "{ } | count() + %s > 0", f);
    expect_tempo(&d, s.p, 400, msg);
    free(s.p);
    free(f);

    /* up to the limit they evaluate */
    q = chain("{ }", " && ", 1000); /* 999 && and the = */
    s = (struct tstr){0};
    tstr_add(&s, "{ span.a = 1 } && %s", q);
    expect_tempo_found(&d, s.p);
    free(s.p);
    free(q);
    f = chain("span.a + 0", " + ", 500);
    s = (struct tstr){0};
    tstr_add(&s, "{ %s > 0 }", f);
    expect_tempo_found(&d, s.p);
    free(s.p);
    free(f);

    expect_tempo_found(&d, "{ span.a = 1 } > { name = \"child\" }");
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- finding 7: work that grows in one query --------------------------------- */

static const char *const TIMEOUT_5S[] = {"--shards", "1", "--io-threads", "1", "--query-timeout",
                                         "5s",       NULL};

static const char *const TIMEOUT_10S[] = {"--shards", "1", "--io-threads", "1", "--query-timeout",
                                          "10s",      NULL};

/* One line of 100,000 keys, each as logfmt and as JSON, answers before a 10 s
 * timeout, as a metric and as a log query (the quadratic label lookups, in
 * the parsers and again when an entry's labels were collected, took 20 s
 * and more; 120,000 keys 32 s). Duplicate keys keep the last value; a key
 * taken by a stream label becomes <name>_extracted. */
Test(qlimits, json_and_logfmt_are_linear_in_the_keys_of_a_line)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, TIMEOUT_10S), 0);
    enum { KEYS = 100000 };
    struct tstr lf = {0}, js = {0};
    tstr_add(&js, "{");
    for (int i = 0; i < KEYS; i++) {
        tstr_add(&lf, "%sk%d=v%d", i ? " " : "", i, i);
        tstr_add(&js, "%s\\\"k%d\\\":\\\"v%d\\\"", i ? "," : "", i, i);
    }
    tstr_add(&lf, " k7=last service_name=mine");
    tstr_add(&js, ",\\\"k7\\\":\\\"last\\\",\\\"service_name\\\":\\\"mine\\\"}");
    const char *lines[] = {lf.p, js.p};
    export_logs(&d, "wide", lines, 2);
    free(lf.p);
    free(js.p);

    static const char *const queries[] = {
        "sum(count_over_time({service_name=\"wide\"} |= \"k0=\" | logfmt | k99999=\"v99999\" "
        "and k7=\"last\" and service_name_extracted=\"mine\" [1m]))",
        "sum(count_over_time({service_name=\"wide\"} |= \"{\" | json | k99999=\"v99999\" "
        "and k7=\"last\" and service_name_extracted=\"mine\" [1m]))",
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        char *body;
        long long ms;
        int st = loki_instant(&d, queries[i], false, &body, &ms);
        cr_assert_eq(st, 200, "%s: %d after %lld ms: %.300s", queries[i], st, ms, body);
        expect_value(queries[i], body, "1");
        free(body);
    }

    /* log queries: the entry with every parsed label */
    static const char *const logq[] = {
        "{service_name=\"wide\"} |= \"k0=\" | logfmt",
        "{service_name=\"wide\"} |= \"{\" | json",
    };
    for (size_t i = 0; i < sizeof(logq) / sizeof(logq[0]); i++) {
        char *enc = url_enc_dup(logq[i]), *body;
        struct tstr s = {0};
        long long ms;
        tstr_add(&s, "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&limit=10",
                 enc, T0 * NS, (T0 + 60) * NS);
        int st = request(&d, "GET", s.p, NULL, &body, &ms);
        cr_assert_eq(st, 200, "%s: %d after %lld ms: %.300s", logq[i], st, ms, body);
        json_error_t je;
        json_t *j = json_loads(body, 0, &je);
        cr_assert_not_null(j, "%s: not JSON", logq[i]);
        json_t *res = json_object_get(json_object_get(j, "data"), "result");
        cr_assert_eq(json_array_size(res), 1, "%s", logq[i]);
        json_t *labels = json_object_get(json_array_get(res, 0), "stream");
        size_t nk = 0;
        const char *k;
        json_t *v;
        json_object_foreach(labels, k, v)
        {
            nk += k[0] == 'k' && k[1] >= '0' && k[1] <= '9';
        }
        cr_assert_eq(nk, KEYS, "%s", logq[i]);
        cr_assert_str_eq(json_string_value(json_object_get(labels, "k99999")), "v99999");
        cr_assert_str_eq(json_string_value(json_object_get(labels, "k7")), "last");
        cr_assert_str_eq(json_string_value(json_object_get(labels, "service_name")), "wide");
        cr_assert_str_eq(json_string_value(json_object_get(labels, "service_name_extracted")),
                         "mine");
        cr_assert_eq(json_array_size(json_object_get(json_array_get(res, 0), "values")), 1);
        json_decref(j);
        free(body);
        free(s.p);
        free(enc);
    }
    cr_assert_eq(daemon_stop(&d), 0);
}

/* 40 a's and a '!': (a|aa)+$ backtracks through every split of the a's
 * (Fibonacci(40) ways) before it fails. */
#define PATHOLOGICAL "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"

Test(qlimits, a_catastrophic_regex_ends_the_query_with_an_error_at_once)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, TIMEOUT_5S), 0);
    enum { LINES = 2000 };
    const char **lines = malloc(LINES * sizeof(*lines));
    for (int i = 0; i < LINES; i++) {
        lines[i] = PATHOLOGICAL;
    }
    export_logs(&d, "re", lines, LINES);
    free(lines);

    static const char *const queries[] = {
        "{service_name=\"re\"} |~ \"(a|aa)+$\"",
        "sum(count_over_time({service_name=\"re\"} |~ \"(a|aa)+$\" [1m]))",
        "sum(count_over_time({service_name=\"re\"} != \"zzz\" !~ \"(a|aa)+$\" [1m]))",
    };
    for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
        char *body;
        long long ms;
        char *enc = url_enc_dup(queries[i]);
        struct tstr s = {0};
        tstr_add(&s, "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=60",
                 enc, T0 * NS, (T0 + 60) * NS);
        int st = request(&d, "GET", s.p, NULL, &body, &ms);
        free(s.p);
        free(enc);
        cr_assert_eq(st, 400, "%s: %d after %lld ms: %.300s", queries[i], st, ms, body);
        cr_assert(strstr(body, "too much backtracking") != NULL, "%s: %.300s", queries[i], body);
        cr_assert_lt(ms, 5000, "%s: the error came after %lld ms", queries[i], ms);
        free(body);
    }
    /* an ordinary regex over the same lines still answers */
    expect_loki_value(&d, "sum(count_over_time({service_name=\"re\"} |~ \"a+!$\" [1m]))", false,
                      "2000");
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(qlimits, a_catastrophic_traceql_regex_ends_the_search_with_an_error_at_once)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, TIMEOUT_5S), 0);
    export_trace(&d, PATHOLOGICAL);
    char *body;
    long long ms;
    int st = tempo_search(&d, "{ name =~ \"(a|aa)+\" }", &body, &ms);
    cr_assert_eq(st, 422, "%d after %lld ms: %.300s", st, ms, body);
    cr_assert(strstr(body, "too much backtracking") != NULL, "%.300s", body);
    cr_assert_lt(ms, 5000, "the error came after %lld ms", ms);
    free(body);
    expect_tempo_found(&d, "{ name =~ \"a+!\" }");
    cr_assert_eq(daemon_stop(&d), 0);
}
