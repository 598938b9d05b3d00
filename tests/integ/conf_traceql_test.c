/*
 * conf_traceql_test.c - the TraceQL conformance suite: every case of
 * tests/conformance/traceql.cases (Tempo's own test queries and docs, see
 * extract-traceql.py) sent to /api/search of one daemon holding a small
 * corpus. A `valid` case must answer 200 with a JSON body holding a
 * "traces" array, an `invalid` one 400 with a non-empty message; none may
 * answer 5xx or fail to answer (httpc's 30 s deadline per request). The
 * test lists every case that answered wrongly. traceql_metrics.cases runs
 * the same way against /api/metrics/query_range (a "series" array). Then
 * answer checks: exact trace ids and span counts for
 * the forms Tempo accepts that MiraDB once refused.
 */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

/* Trace 1: service "api" with a root "GET /users" (attributes with spaces
 * and dots in their names, ints a and b) and a child in "db"; trace 2:
 * service "web", a root "GET /home" with an error status. */
static const char CORPUS[] =
    "{\"resourceSpans\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"api\"}}]"
    "},"
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a1\","
    "   \"name\":\"GET /users\",\"kind\":2,\"startTimeUnixNano\":\"1700000001000000000\","
    "   \"endTimeUnixNano\":\"1700000001100000000\",\"status\":{\"code\":1},"
    "   \"attributes\":[{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"200\"}},"
    "    {\"key\":\"foo.bar baz\",\"value\":{\"stringValue\":\"q1\"}},"
    "    {\"key\":\"attribute.attribute name with space\",\"value\":{\"stringValue\":\"value\"}},"
    "    {\"key\":\"a\",\"value\":{\"intValue\":\"2\"}},"
    "    {\"key\":\"b\",\"value\":{\"intValue\":\"3\"}}]}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"db\"}}]}"
    ","
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a3\","
    "   \"parentSpanId\":\"00000000000000a1\",\"name\":\"SELECT users\",\"kind\":3,"
    "   \"startTimeUnixNano\":\"1700000001020000000\",\"endTimeUnixNano\":\"1700000001070000000\","
    "   \"status\":{\"code\":2,\"message\":\"boom\"},"
    "   \"attributes\":[{\"key\":\"db.system\",\"value\":{\"stringValue\":\"postgres\"}},"
    "    {\"key\":\"a\",\"value\":{\"intValue\":\"5\"}}]}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"web\"}}]"
    "},"
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000002\",\"spanId\":\"00000000000000b1\","
    "   \"name\":\"GET /home\",\"kind\":2,\"startTimeUnixNano\":\"1700000002000000000\","
    "   \"endTimeUnixNano\":\"1700000002300000000\",\"status\":{\"code\":2},"
    "   \"attributes\":[{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"500\"}},"
    "    {\"key\":\"foo.bar baz\",\"value\":{\"stringValue\":\"q2\"}}]}]}]}"
    "]}";

static void post_corpus(const struct daemon *d)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(
        httpc_request(d->http_port, "POST", "/v1/traces", hdrs, CORPUS, strlen(CORPUS), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* Undoes the case file's escapes (\\ \t \n \r) in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1] != 0) {
            s++;
            *o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
        } else {
            *o++ = *s;
        }
    }
    *o = 0;
}

/* $MIRADB_CONFORMANCE, else the conformance folder beside the vectors one. */
static const char *conformance_dir(void)
{
    static char dir[480];
    const char *d = getenv("MIRADB_CONFORMANCE");
    if (d != NULL) {
        return d;
    }
    snprintf(dir, sizeof(dir), "%s/../conformance", httpc_vectors_dir());
    return dir;
}

struct tally {
    unsigned cases, ok;
    unsigned valid_unsupported, valid_refused, invalid_accepted, invalid_other, server_error,
        no_answer, bad_body;
};

/* True when |body| is a JSON object holding an array under |key| (or, with
 * |key| NULL, any JSON object). */
static bool well_formed(const uint8_t *body, size_t len, const char *key)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)body, len, 0, &je);
    bool ok = json_is_object(j) && (key == NULL || json_is_array(json_object_get(j, key)));
    json_decref(j);
    return ok;
}

/*
 * Sends every case of |file| to |path_fmt| (printf format with one %s for
 * the encoded query) and counts the answers; prints each wrong one.
 */
static void run_cases(const struct daemon *d, const char *file, const char *path_fmt,
                      const char *body_key, struct tally *t)
{
    char fpath[600];
    snprintf(fpath, sizeof(fpath), "%s/%s", conformance_dir(), file);
    FILE *f = fopen(fpath, "r");
    cr_assert_not_null(f, "cannot open %s (set MIRADB_CONFORMANCE)", fpath);
    static char line[32768], enc[98304], path[98400];
    memset(t, 0, sizeof(*t));
    unsigned lineno = 0;
    while (fgets(line, sizeof(line), f) != NULL && lineno < 100000) {
        lineno++;
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            line[--n] = 0;
        }
        if (n == 0 || line[0] == '#') {
            continue;
        }
        char *src = strchr(line, '\t');
        char *q = src ? strchr(src + 1, '\t') : NULL;
        cr_assert_not_null(q, "%s:%u: not <verdict>\\t<source>\\t<query>", file, lineno);
        *src++ = 0;
        *q++ = 0;
        bool valid = strcmp(line, "valid") == 0;
        cr_assert(valid || strcmp(line, "invalid") == 0, "%s:%u: verdict %s", file, lineno, line);
        unescape(q);
        httpc_url_enc(enc, sizeof(enc), q);
        snprintf(path, sizeof(path), path_fmt, enc);
        struct http_resp r;
        t->cases++;
        if (httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r) != 0) {
            t->no_answer++;
            fprintf(stderr, "NO ANSWER %s %s: %s\n", line, src, q);
            continue;
        }
        const char *body = r.body ? (const char *)r.body : "";
        bool good;
        if (r.status >= 500) {
            t->server_error++;
            good = false;
        } else if (valid) {
            good = r.status == 200 && well_formed(r.body, r.body_len, body_key);
            if (!good && r.status == 200) {
                t->bad_body++;
            } else if (!good && strstr(body, "not supported") != NULL) {
                t->valid_unsupported++;
            } else if (!good) {
                t->valid_refused++;
            }
        } else {
            good = r.status == 400 && r.body_len > 0;
            if (!good && r.status == 200) {
                t->invalid_accepted++;
            } else if (!good) {
                t->invalid_other++;
            }
        }
        if (good) {
            t->ok++;
        } else {
            fprintf(stderr, "WRONG %s %s: %d %.200s\n    query: %.300s\n", line, src, r.status,
                    body, q);
        }
        http_resp_free(&r);
    }
    fclose(f);
    fprintf(stderr,
            "%s: %u cases, %u right; valid refused as not supported %u, valid refused otherwise "
            "%u, valid with a bad body %u, invalid accepted %u, invalid answered neither 200 nor "
            "400 %u, 5xx %u, no answer %u\n",
            file, t->cases, t->ok, t->valid_unsupported, t->valid_refused, t->bad_body,
            t->invalid_accepted, t->invalid_other, t->server_error, t->no_answer);
}

Test(conf_traceql, search_cases)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    post_corpus(&d);
    struct tally t;
    run_cases(&d, "traceql.cases", "/api/search?q=%s&start=1700000000&end=1700000100", "traces",
              &t);
    cr_assert_gt(t.cases, 700, "only %u cases read", t.cases);
    cr_assert_eq(t.ok, t.cases, "%u of %u TraceQL cases answered wrongly (listed above)",
                 t.cases - t.ok, t.cases);
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(conf_traceql, metrics_cases, .timeout = 600)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    post_corpus(&d);
    struct tally t;
    run_cases(&d, "traceql_metrics.cases",
              "/api/metrics/query_range?q=%s&start=1700000000&end=1700000100&step=10s", "series",
              &t);
    cr_assert_gt(t.cases, 250, "only %u cases read", t.cases);
    cr_assert_eq(t.ok, t.cases, "%u of %u TraceQL metrics cases answered wrongly (listed above)",
                 t.cases - t.ok, t.cases);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* "traceID:matched[:spanID...]" of each trace /api/search?q=<q> lists,
 * joined by ','; spans listed in the answer's order. */
static void answer(const struct daemon *d, const char *q, char *out, size_t cap)
{
    char enc[2048], path[2200];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/api/search?q=%s&start=1700000000&end=1700000100", enc);
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200, "%s: %d %s", q, r.status, r.body ? (char *)r.body : "");
    json_error_t je;
    json_t *j = json_loadb((const char *)r.body, r.body_len, 0, &je);
    cr_assert_not_null(j, "%s: not JSON", q);
    json_t *traces = json_object_get(j, "traces");
    cr_assert(json_is_array(traces), "%s: no traces array", q);
    size_t o = 0, i;
    json_t *t;
    out[0] = 0;
    json_array_foreach(traces, i, t)
    {
        json_t *ss = json_object_get(t, "spanSet");
        o += (size_t)snprintf(out + o, cap - o, "%s%s:%lld", i ? "," : "",
                              json_string_value(json_object_get(t, "traceID")),
                              (long long)json_integer_value(json_object_get(ss, "matched")));
        size_t k;
        json_t *sp;
        json_array_foreach(json_object_get(ss, "spans"), k, sp)
        {
            o += (size_t)snprintf(out + o, cap - o, ":%s",
                                  json_string_value(json_object_get(sp, "spanID")) + 14);
        }
        cr_assert_lt(o, cap);
    }
    json_decref(j);
    http_resp_free(&r);
}

static void expect_answer(const struct daemon *d, const char *q, const char *want)
{
    char got[512];
    answer(d, q, got, sizeof(got));
    cr_expect_str_eq(got, want, "q=%s: got \"%s\", want \"%s\"", q, got, want);
}

/* Trace 1 = spans a1 (root, api) and a3 (its child, db); trace 2 = b1. */
Test(conf_traceql, newly_accepted_forms_match_as_tempo_evaluates_them)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    post_corpus(&d);
    /* quoted segments after dotted ones: the attribute "foo.bar baz" */
    expect_answer(&d, "{ .foo.\"bar baz\" = \"q1\" }", "1:1:a1");
    expect_answer(&d, "{ span.foo.\"bar baz\" =~ \"q.*\" }", "2:1:b1,1:1:a1");
    expect_answer(&d, "{ .\"foo\".\"bar baz\" = \"q2\" }", "2:1:b1");
    expect_answer(&d, "{ span.attribute.\"attribute name with space\" = \"value\" }", "1:1:a1");
    expect_answer(&d, "{ .foo.\"bar\" = \"q1\" }", "");
    /* nil: nil = nil and nil != nil are false; an intrinsic != nil always holds */
    expect_answer(&d, "{ nil = nil }", "");
    expect_answer(&d, "{ nil != nil }", "");
    expect_answer(&d, "{ name != nil }", "2:1:b1,1:2:a1:a3");
    expect_answer(&d, "{ statusMessage != nil && status = error }", "2:1:b1,1:1:a3");
    /* 1. is the float 1 */
    expect_answer(&d, "{ 1 = 1. }", "2:1:b1,1:2:a1:a3");
    expect_answer(&d, "{ .a * -1. = -2 }", "1:1:a1");
    expect_answer(&d, "{ .a > 4. }", "1:1:a3");
    /* arithmetic over attributes is no condition: it matches no span */
    expect_answer(&d, "{ .a + .b }", "");
    expect_answer(&d, "{ -.a }", "");
    expect_answer(&d, "{ .a + .b } || { name = \"GET /home\" }", "2:1:b1");
    expect_answer(&d, "{ .a + .b = 5 }", "1:1:a1");
    /* nested set: a1 = [1,4] (root, parent -1), a3 = [2,3] under a1, b1 = [1,2] */
    expect_answer(&d, "{ nestedSetLeft > 1 }", "1:1:a3");
    expect_answer(&d, "{ nestedSetRight = 4 }", "1:1:a1");
    expect_answer(&d, "{ nestedSetParent = -1 }", "2:1:b1,1:1:a1");
    expect_answer(&d, "{ nestedSetParent = 1 && nestedSetRight = 3 }", "1:1:a3");
    expect_answer(&d, "{ nestedSetRight - nestedSetLeft = 1 }", "2:1:b1,1:1:a3");

    /* select() of the nested set: a3's own numbers in its attributes */
    const char *q = "{ name = \"SELECT users\" } | select(nestedSetLeft, nestedSetParent)";
    char enc[256], path[400];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/api/search?q=%s&start=1700000000&end=1700000100", enc);
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200, "%s", r.body ? (char *)r.body : "");
    json_error_t je;
    json_t *j = json_loadb((const char *)r.body, r.body_len, 0, &je);
    json_t *sp = json_array_get(
        json_object_get(json_object_get(json_array_get(json_object_get(j, "traces"), 0), "spanSet"),
                        "spans"),
        0);
    char *attrs = json_dumps(json_object_get(sp, "attributes"), JSON_COMPACT);
    cr_assert_str_eq(attrs, "[{\"key\":\"nestedSetLeft\",\"value\":{\"intValue\":\"2\"}},"
                            "{\"key\":\"nestedSetParent\",\"value\":{\"intValue\":\"1\"}}]");
    free(attrs);
    json_decref(j);
    http_resp_free(&r);
    cr_assert_eq(daemon_stop(&d), 0);
}
