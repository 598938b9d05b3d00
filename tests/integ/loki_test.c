/*
 * loki_test.c - the Loki HTTP API and the native logs API against the real
 * daemon: a known corpus exported through OTLP/HTTP JSON, then every filter
 * kind, both directions, limits, metric queries against hand-computed
 * values, label endpoints, response shapes (FACTS.md A.3), errors, reads of
 * sealed and open blocks together, block pruning seen in /metrics.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "storage/block.h"

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)

/* ---- helpers ------------------------------------------------------------------- */

static void export_json(const struct daemon *d, const char *json)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/logs", hdrs, json, strlen(json), 0, &r),
                 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* GET |path| (with |hdr| if not NULL); the status and the body. */
static int get(const struct daemon *d, const char *path, const char *hdr, char **body)
{
    const char *hdrs[] = {hdr, NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, hdr ? hdrs : NULL, NULL, 0, 0, &r), 0,
                 "GET %s failed", path);
    *body = strndup(r.body ? (char *)r.body : "", r.body_len);
    int st = r.status;
    http_resp_free(&r);
    return st;
}

static json_t *get_json(const struct daemon *d, const char *path, const char *hdr)
{
    char *body;
    int st = get(d, path, hdr, &body);
    cr_assert_eq(st, 200, "GET %s: %d %s", path, st, body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "GET %s: not JSON: %s", path, body);
    cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "success");
    free(body);
    return j;
}

static const char *const CAT = "X-Loki-Response-Encoding-Flags: categorize-labels";

/* query_range for a log query; start/end in seconds relative to T0. */
static json_t *logq(const struct daemon *d, const char *q, int start, int end, int limit,
                    const char *dir, bool cat)
{
    char enc[2048], path[2600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64
             "&limit=%d&direction=%s",
             enc, (T0 + (uint64_t)start) * NS, (T0 + (uint64_t)end) * NS, limit, dir);
    return get_json(d, path, cat ? CAT : NULL);
}

/* All entries of a streams answer in query order: their lines joined by
 * '|' (ts checked to be in order). */
static void entries(json_t *resp, bool forward, char *out, size_t cap, size_t *count)
{
    json_t *data = json_object_get(resp, "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "resultType")), "streams");
    struct e {
        uint64_t ts;
        const char *line;
    } *es = malloc(4096 * sizeof(*es));
    size_t n = 0;
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(data, "result"), i, st)
    {
        size_t k;
        json_t *v;
        uint64_t prev = 0;
        json_array_foreach(json_object_get(st, "values"), k, v)
        {
            cr_assert_lt(n, 4096);
            const char *ts = json_string_value(json_array_get(v, 0));
            cr_assert_not_null(ts, "timestamps are strings");
            es[n].ts = strtoull(ts, NULL, 10);
            es[n].line = json_string_value(json_array_get(v, 1));
            if (k > 0) {
                cr_assert(forward ? es[n].ts >= prev : es[n].ts <= prev,
                          "entries in a stream follow the direction");
            }
            prev = es[n].ts;
            n++;
        }
    }
    /* merge streams into one list in query direction */
    for (size_t a = 1; a < n; a++) {
        for (size_t b = a; b > 0; b--) {
            bool swap = forward ? es[b - 1].ts > es[b].ts : es[b - 1].ts < es[b].ts;
            if (!swap) {
                break;
            }
            struct e t = es[b];
            es[b] = es[b - 1];
            es[b - 1] = t;
        }
    }
    size_t o = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        o += (size_t)snprintf(out + o, cap - o, "%s%s", k ? "|" : "", es[k].line);
    }
    *count = n;
    free(es);
}

/* The ids (id=N at the end of api lines) of the answer, in order: "1,3,5". */
static void ids(json_t *resp, bool forward, char *out, size_t cap)
{
    char all[16384];
    size_t n;
    entries(resp, forward, all, sizeof(all), &n);
    size_t o = 0;
    out[0] = '\0';
    char *save = NULL;
    for (char *t = strtok_r(all, "|", &save); t != NULL; t = strtok_r(NULL, "|", &save)) {
        const char *id = strstr(t, "id=");
        o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? "," : "", id ? id + 3 : "?");
    }
}

static void expect_ids(const struct daemon *d, const char *q, const char *want)
{
    json_t *r = logq(d, q, 0, 60, 100, "forward", true);
    char got[1024];
    ids(r, true, got, sizeof(got));
    cr_expect_str_eq(got, want, "query %s", q);
    json_decref(r);
}

static void expect_ids_raw(const struct daemon *d, const char *q, size_t want)
{
    json_t *r = logq(d, q, 0, 60, 100, "forward", false);
    char got[4096];
    size_t n;
    entries(r, true, got, sizeof(got), &n);
    cr_expect_eq(n, want, "query %s: %s", q, got);
    json_decref(r);
}

static const char *api_line(char *buf, size_t cap, int i)
{
    if (i % 2 == 0) {
        snprintf(buf, cap, "level=info msg=\"request done\" status=200 path=/users id=%d", i);
    } else {
        snprintf(buf, cap, "level=error msg=\"request failed\" status=500 path=/orders id=%d", i);
    }
    return buf;
}

/* JSON-escapes |s| (quotes only; the corpus has no other specials). */
static void jesc(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 3 < cap; s++) {
        if (*s == '"' || *s == '\\') {
            out[o++] = '\\';
        }
        out[o++] = *s;
    }
    out[o] = '\0';
}

/* The corpus (see the file comment of each query for what it holds):
 *   api (service.name=api, k8s.namespace.name=prod, host.name=h1), scope lib 1.0:
 *     i = 0..9 at T0+i s: even INFO/9 "level=info ... status=200 path=/users id=i",
 *     odd ERROR/17 "level=error ... status=500 path=/orders id=i"; attributes
 *     user.id = "u<i%3>", http.code = 200|500; i = 4 has a trace and span id.
 *   db (service.name=db), i = 0..4 at T0+i s+500ms: JSON bodies
 *     {"query":"select","rows":i,"slow":i>=3}.
 *   worker (k8s.container.name=worker, no service.name) at T0+20 s: a kvlist body. */
static void export_corpus(const struct daemon *d)
{
    static char buf[65536];
    size_t o = 0;
    o += (size_t)snprintf(
        buf + o, sizeof(buf) - o,
        "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"api\"}},"
        "{\"key\":\"k8s.namespace.name\",\"value\":{\"stringValue\":\"prod\"}},"
        "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"h1\"}}]},"
        "\"scopeLogs\":[{\"scope\":{\"name\":\"lib\",\"version\":\"1.0\"},\"logRecords\":[");
    for (int i = 0; i < 10; i++) {
        char line[256], esc[300];
        api_line(line, sizeof(line), i);
        jesc(esc, sizeof(esc), line);
        o += (size_t)snprintf(
            buf + o, sizeof(buf) - o,
            "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"severityNumber\":%d,\"severityText\":\"%s\","
            "\"body\":{\"stringValue\":\"%s\"},\"attributes\":["
            "{\"key\":\"user.id\",\"value\":{\"stringValue\":\"u%d\"}},"
            "{\"key\":\"http.code\",\"value\":{\"intValue\":\"%d\"}},"
            "{\"key\":\"latency\",\"value\":{\"doubleValue\":%g}},"
            "{\"key\":\"client\",\"value\":{\"stringValue\":\"10.0.0.%d\"}}]%s}",
            i ? "," : "", (T0 + (uint64_t)i) * NS, i % 2 ? 17 : 9, i % 2 ? "ERROR" : "INFO", esc,
            i % 3, i % 2 ? 500 : 200, i * 0.25, i,
            i == 4 ? ",\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":"
                     "\"b7ad6b7169203331\""
                   : "");
    }
    o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                          "]}]},{\"resource\":{\"attributes\":["
                          "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"db\"}}]},"
                          "\"scopeLogs\":[{\"scope\":{\"name\":\"dbscope\"},\"logRecords\":[");
    for (int i = 0; i < 5; i++) {
        o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                              "%s{\"timeUnixNano\":\"%" PRIu64
                              "\",\"body\":{\"stringValue\":\"{\\\"query\\\":\\\"select\\\","
                              "\\\"rows\\\":%d,\\\"slow\\\":%s}\"}}",
                              i ? "," : "", (T0 + (uint64_t)i) * NS + UINT64_C(500000000), i,
                              i >= 3 ? "true" : "false");
    }
    o += (size_t)snprintf(
        buf + o, sizeof(buf) - o,
        "]}]},{\"resource\":{\"attributes\":["
        "{\"key\":\"k8s.container.name\",\"value\":{\"stringValue\":\"worker\"}}]},"
        "\"scopeLogs\":[{\"scope\":{},\"logRecords\":[{\"timeUnixNano\":\"%" PRIu64 "\","
        "\"body\":{\"kvlistValue\":{\"values\":[{\"key\":\"b\",\"value\":{\"intValue\":\"1\"}},"
        "{\"key\":\"a\",\"value\":{\"stringValue\":\"x\"}}]}},\"attributes\":["
        "{\"key\":\"raw\",\"value\":{\"bytesValue\":\"AQID\"}},"
        "{\"key\":\"list\",\"value\":{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},"
        "{\"stringValue\":\"a<b\"},{\"boolValue\":true}]}}},"
        "{\"key\":\"big\",\"value\":{\"doubleValue\":1e21}},"
        "{\"key\":\"tiny\",\"value\":{\"doubleValue\":0.0000005}},"
        "{\"key\":\"nested\",\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"x.y\","
        "\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"z\",\"value\":{\"stringValue\":"
        "\"deep\"}}]}}}]}}}]}]}]}]}",
        (T0 + 20) * NS);
    export_json(d, buf);
}

static const char *const ONE_SHARD[] = {"--shards", "1", "--io-threads", "1", NULL};

/* ---- log queries ----------------------------------------------------------------- */

Test(loki, log_queries_every_filter_kind_both_directions_and_limits)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_corpus(&d); /* acknowledged: every query below must see it (open block) */

    expect_ids(&d, "{service_name=\"api\"}", "0,1,2,3,4,5,6,7,8,9");
    expect_ids(&d, "{service_name=\"api\"} |= \"status=500\"", "1,3,5,7,9");
    expect_ids(&d, "{service_name=\"api\"} != \"status=500\"", "0,2,4,6,8");
    expect_ids(&d, "{service_name=\"api\"} |~ \"id=[12]$\"", "1,2");
    expect_ids(&d, "{service_name=\"api\"} !~ \"id=[0-7]$\"", "8,9");
    /* a substring that is not a whole token */
    expect_ids(&d, "{service_name=\"api\"} |= \"rror\"", "1,3,5,7,9");
    expect_ids(&d, "{service_name=\"api\"} |= \"id=3\" or \"id=4\"", "3,4");
    expect_ids(&d, "{service_name=\"api\"} |= \"status\" != \"orders\" |~ \"id=[2-6]\"", "2,4,6");
    expect_ids(&d, "{service_name=\"api\"} |> \"<_> path=/orders <_>\"", "1,3,5,7,9");
    expect_ids(&d, "{service_name=\"api\"} | logfmt | status >= 500 and id > 5", "7,9");
    expect_ids(&d, "{service_name=\"api\"} | logfmt | path=\"/users\" | id < 3", "0,2");
    expect_ids(&d, "{service_name=\"api\"} | logfmt | id == 1 or id == 8", "1,8");
    expect_ids(&d, "{service_name=\"api\"} | logfmt | msg=~\"request (done|x)\" | id > 6", "8");
    /* structured metadata: record attributes, fields, detected_level */
    expect_ids(&d, "{service_name=\"api\"} | user_id=\"u1\"", "1,4,7");
    expect_ids(&d, "{service_name=\"api\"} | http_code > 300 | user_id != \"u0\"", "1,5,7");
    expect_ids(&d, "{service_name=\"api\"} | latency >= 1.5", "6,7,8,9");
    expect_ids(&d, "{service_name=\"api\"} | client=ip(\"10.0.0.0/30\")", "0,1,2,3");
    expect_ids(&d, "{service_name=\"api\"} | client=ip(\"10.0.0.5-10.0.0.6\")", "5,6");
    expect_ids(&d, "{service_name=\"api\"} | client!=ip(\"10.0.0.0/29\")", "8,9");
    expect_ids(&d, "{service_name=\"api\"} | client=ip(\"::ffff:10.0.0.9\")", "9");
    expect_ids(&d, "{service_name=\"api\"} | latency == 0.75 or latency=\"2.25\"", "3,9");
    expect_ids(&d, "{service_name=\"api\"} | logfmt | latency > 1 and id < 7", "5,6");
    expect_ids(&d, "{service_name=\"api\"} | latency > 1 | logfmt | id < 7", "5,6");
    expect_ids(&d, "{service_name=\"api\"} | detected_level=\"error\" | severity_number == 17",
               "1,3,5,7,9");
    expect_ids(&d, "{service_name=\"api\"} | trace_id=\"0af7651916cd43dd8448eb211c80319c\"", "4");
    expect_ids(&d, "{service_name=\"api\"} | scope_name=\"lib\" | scope_version=\"1.0\" | id=\"\"",
               "0,1,2,3,4,5,6,7,8,9");
    expect_ids(&d, "{k8s_namespace_name=\"prod\"} | host_name=\"h1\" |= \"id=9\"", "9");
    expect_ids(&d, "{service_name=~\"ap.\", k8s_namespace_name!=\"dev\"} |= \"id=0\"", "0");
    expect_ids(&d, "{service_name=\"api\", k8s_namespace_name=\"dev\"}", "");
    expect_ids(&d, "{service_name=\"nope\"}", "");

    /* json, the db stream */
    json_t *r = logq(&d, "{service_name=\"db\"} | json | rows >= 3", 0, 60, 100, "forward", true);
    char got[16384];
    size_t n;
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "{\"query\":\"select\",\"rows\":3,\"slow\":true}|"
                          "{\"query\":\"select\",\"rows\":4,\"slow\":true}");
    json_t *e0 = json_array_get(
        json_object_get(json_array_get(json_object_get(json_object_get(r, "data"), "result"), 0),
                        "values"),
        0);
    json_t *parsed = json_object_get(json_array_get(e0, 2), "parsed");
    cr_expect_str_eq(json_string_value(json_object_get(parsed, "query")), "select");
    cr_expect_str_eq(json_string_value(json_object_get(parsed, "rows")), "3");
    cr_expect_str_eq(json_string_value(json_object_get(parsed, "slow")), "true");
    json_decref(r);
    r = logq(&d, "{service_name=~\"api|db\"} | json | __error__=\"\" | slow=\"false\"", 0, 60, 100,
             "backward", false);
    entries(r, false, got, sizeof(got), &n);
    cr_expect_eq(n, 3);
    cr_expect_str_eq(got, "{\"query\":\"select\",\"rows\":2,\"slow\":false}|"
                          "{\"query\":\"select\",\"rows\":1,\"slow\":false}|"
                          "{\"query\":\"select\",\"rows\":0,\"slow\":false}");
    json_decref(r);
    /* the api lines are not JSON: kept, with __error__ */
    r = logq(&d, "{service_name=\"api\"} | json | __error__=\"JSONParserErr\"", 0, 60, 100,
             "forward", false);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_eq(n, 10);
    json_decref(r);

    /* a non-string body is rendered as JSON with sorted keys; service_name
     * falls back to k8s_container_name */
    r = logq(&d, "{service_name=\"worker\"}", 0, 60, 100, "forward", false);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "{\"a\":\"x\",\"b\":1}");
    json_decref(r);
    r = logq(&d, "{service_name!=\"api\", service_name=~\".+\"}", 0, 60, 100, "forward", false);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_eq(n, 6);
    json_decref(r);

    /* directions and limits; [start, end) */
    r = logq(&d, "{service_name=\"api\"}", 0, 60, 3, "backward", true);
    ids(r, false, got, sizeof(got));
    cr_expect_str_eq(got, "9,8,7");
    json_decref(r);
    r = logq(&d, "{service_name=\"api\"}", 0, 60, 3, "FORWARD", true);
    ids(r, true, got, sizeof(got));
    cr_expect_str_eq(got, "0,1,2");
    json_decref(r);
    r = logq(&d, "{service_name=\"api\"}", 2, 5, 100, "forward", true);
    ids(r, true, got, sizeof(got));
    cr_expect_str_eq(got, "2,3,4", "start inclusive, end exclusive");
    json_decref(r);
    r = logq(&d, "{service_name=~\"api|db\"} |= \"1\"", 0, 60, 4, "backward", true);
    entries(r, false, got, sizeof(got), &n);
    cr_expect_str_eq(got,
                     "{\"query\":\"select\",\"rows\":1,\"slow\":false}|"
                     "level=error msg=\"request failed\" status=500 path=/orders id=1",
                     "across streams, newest first: %s", got);
    json_decref(r);

    /* pipeline stages that reshape labels and lines */
    r = logq(&d,
             "{service_name=\"api\"} | logfmt | line_format \"{{.path}} {{ .status }}\" |= \"200\"",
             0, 60, 2, "forward", false);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "/users 200|/users 200");
    json_decref(r);
    r = logq(&d, "{service_name=\"api\"} | keep service_name", 0, 60, 100, "forward", false);
    json_t *res = json_object_get(json_object_get(r, "data"), "result");
    cr_expect_eq(json_array_size(res), 1, "one stream once only service_name is left");
    cr_expect_eq(json_object_size(json_object_get(json_array_get(res, 0), "stream")), 1);
    cr_expect_eq(json_array_size(json_object_get(json_array_get(res, 0), "values")), 10);
    json_decref(r);
    r = logq(&d, "{service_name=\"api\"} |= \"id=4\" | drop user_id, http_code", 0, 60, 100,
             "forward", true);
    json_t *sm = json_object_get(
        json_array_get(
            json_array_get(
                json_object_get(
                    json_array_get(json_object_get(json_object_get(r, "data"), "result"), 0),
                    "values"),
                0),
            2),
        "structuredMetadata");
    cr_expect_null(json_object_get(sm, "user_id"));
    cr_expect_null(json_object_get(sm, "http_code"));
    cr_expect_str_eq(json_string_value(json_object_get(sm, "trace_id")),
                     "0af7651916cd43dd8448eb211c80319c");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "span_id")), "b7ad6b7169203331");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "detected_level")), "info");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "severity_text")), "INFO");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "severity_number")), "9");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "host_name")), "h1");
    cr_expect_str_eq(json_string_value(json_object_get(sm, "scope_name")), "lib");
    json_decref(r);

    /* the native API: whole records with types */
    char enc[512], path[1024];
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"api\"} |= \"id=4\"");
    snprintf(path, sizeof(path), "/api/v1/logs?query=%s&start=%" PRIu64 "&end=%" PRIu64, enc,
             T0 * NS, (T0 + 60) * NS);
    r = get_json(&d, path, NULL);
    json_t *recs = json_object_get(json_object_get(r, "data"), "records");
    cr_assert_eq(json_array_size(recs), 1);
    json_t *rec = json_array_get(recs, 0);
    cr_expect_str_eq(json_string_value(json_object_get(rec, "timeUnixNano")),
                     "1700000004000000000");
    cr_expect_eq(json_integer_value(json_object_get(rec, "severityNumber")), 9);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(rec, "body"), "stringValue")),
        "level=info msg=\"request done\" status=200 path=/users id=4");
    json_t *a1 = json_array_get(json_object_get(rec, "attributes"), 1);
    cr_expect_str_eq(json_string_value(json_object_get(a1, "key")), "http.code");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(a1, "value"), "intValue")),
                     "200");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(rec, "scope"), "version")),
                     "1.0");
    cr_expect_eq(json_array_size(json_object_get(json_object_get(rec, "resource"), "attributes")),
                 3);
    cr_expect_str_eq(json_string_value(json_object_get(rec, "traceId")),
                     "0af7651916cd43dd8448eb211c80319c");
    json_decref(r);

    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- metric queries ------------------------------------------------------------ */

/* Instant query at T0+at s: "labels=value;..." sorted by labels. */
static void instant(const struct daemon *d, const char *q, int at, char *out, size_t cap)
{
    char enc[2048], path[2600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/loki/api/v1/query?query=%s&time=%" PRIu64, enc,
             (T0 + (uint64_t)at) * NS);
    json_t *r = get_json(d, path, CAT);
    json_t *data = json_object_get(r, "data");
    const char *rt = json_string_value(json_object_get(data, "resultType"));
    size_t o = 0;
    out[0] = '\0';
    if (strcmp(rt, "scalar") == 0) {
        json_t *v = json_object_get(data, "result");
        cr_expect_eq(json_integer_value(json_array_get(v, 0)), (json_int_t)(T0 + (uint64_t)at));
        snprintf(out, cap, "scalar=%s", json_string_value(json_array_get(v, 1)));
        json_decref(r);
        return;
    }
    cr_assert_str_eq(rt, "vector", "query %s", q);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(data, "result"), i, s)
    {
        json_t *val = json_object_get(s, "value");
        cr_expect(json_is_number(json_array_get(val, 0)), "vector timestamps are numbers");
        cr_expect_eq(json_number_value(json_array_get(val, 0)), (double)(T0 + (uint64_t)at));
        const char *k;
        json_t *lv;
        char labels[512] = "";
        size_t lo = 0;
        json_object_foreach(json_object_get(s, "metric"), k, lv)
        {
            lo += (size_t)snprintf(labels + lo, sizeof(labels) - lo, "%s%s=%s", lo ? "," : "", k,
                                   json_string_value(lv));
        }
        o += (size_t)snprintf(out + o, cap - o, "%s{%s}=%s", i ? ";" : "", labels,
                              json_string_value(json_array_get(val, 1)));
    }
    json_decref(r);
}

static void expect_instant(const struct daemon *d, const char *q, int at, const char *want)
{
    char got[4096];
    instant(d, q, at, got, sizeof(got));
    cr_expect_str_eq(got, want, "query %s at T0+%d", q, at);
}

/* Range query: "t-T0:value,..." of each series, series joined by ';'. */
static void range(const struct daemon *d, const char *q, int start, int end, const char *step,
                  char *out, size_t cap)
{
    char enc[2048], path[2600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=%s", enc,
             (T0 + (uint64_t)start) * NS, (T0 + (uint64_t)end) * NS, step);
    json_t *r = get_json(d, path, NULL);
    json_t *data = json_object_get(r, "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "resultType")), "matrix");
    size_t i, o = 0;
    json_t *s;
    out[0] = '\0';
    json_array_foreach(json_object_get(data, "result"), i, s)
    {
        size_t k;
        json_t *p;
        o += (size_t)snprintf(out + o, cap - o, "%s", i ? ";" : "");
        json_array_foreach(json_object_get(s, "values"), k, p)
        {
            cr_expect(json_is_number(json_array_get(p, 0)));
            cr_expect(json_is_string(json_array_get(p, 1)), "sample values are strings");
            double t = json_number_value(json_array_get(p, 0)) - (double)T0;
            o += (size_t)snprintf(out + o, cap - o, "%s%g:%s", k ? "," : "", t,
                                  json_string_value(json_array_get(p, 1)));
        }
    }
    json_decref(r);
}

static void expect_range(const struct daemon *d, const char *q, int start, int end,
                         const char *step, const char *want)
{
    char got[4096];
    range(d, q, start, end, step, got, sizeof(got));
    cr_expect_str_eq(got, want, "query %s", q);
}

Test(loki, metric_queries_match_hand_computed_values)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_corpus(&d);

    /* window (t - range, t]: at T0+9 with [10s] every api record counts */
    expect_instant(&d, "sum(count_over_time({service_name=\"api\"}[10s]))", 9, "{}=10");
    expect_instant(&d, "sum(count_over_time({service_name=\"api\"}[9s]))", 9, "{}=9");
    expect_instant(&d, "sum(rate({service_name=\"api\"}[10s]))", 9, "{}=1");
    expect_instant(&d, "sum by (detected_level) (count_over_time({service_name=\"api\"}[1m]))", 30,
                   "{detected_level=error}=5;{detected_level=info}=5");
    expect_instant(&d,
                   "sum by (level, detected_level) (count_over_time({service_name=\"api\"} |= "
                   "\"status=500\" | drop __error__ [1m]))",
                   30, "{detected_level=error}=5");
    expect_instant(&d, "count_over_time({service_name=\"db\"}[1m])", 30,
                   "{detected_level=unknown,scope_name=dbscope,service_name=db}=5");
    /* bytes: the exact line lengths */
    size_t bytes = 0;
    char line[256];
    for (int i = 0; i < 10; i++) {
        bytes += strlen(api_line(line, sizeof(line), i));
    }
    char want[128];
    snprintf(want, sizeof(want), "{}=%zu", bytes);
    expect_instant(&d, "sum(bytes_over_time({service_name=\"api\"}[1m]))", 30, want);
    char got[256];
    instant(&d, "sum(bytes_rate({service_name=\"api\"}[1m]))", 30, got, sizeof(got));
    cr_expect_eq(strncmp(got, "{}=", 3), 0, "%s", got);
    cr_expect(fabs(strtod(got + 3, NULL) - (double)bytes / 60) < 1e-9, "%s", got);
    /* vector aggregations over per-service counts (api 10, db 5, worker 1) */
    const char *per_svc = "sum by (service_name) (count_over_time({service_name=~\".+\"}[1m]))";
    char q[512];
    snprintf(q, sizeof(q), "%s", per_svc);
    expect_instant(&d, q, 30, "{service_name=api}=10;{service_name=db}=5;{service_name=worker}=1");
    snprintf(q, sizeof(q), "max(%s)", per_svc);
    expect_instant(&d, q, 30, "{}=10");
    snprintf(q, sizeof(q), "min(%s)", per_svc);
    expect_instant(&d, q, 30, "{}=1");
    snprintf(q, sizeof(q), "avg(%s)", per_svc);
    expect_instant(&d, q, 30, "{}=5.333333333333333");
    snprintf(q, sizeof(q), "count(%s)", per_svc);
    expect_instant(&d, q, 30, "{}=3");
    snprintf(q, sizeof(q), "topk(2, %s)", per_svc);
    expect_instant(&d, q, 30, "{service_name=api}=10;{service_name=db}=5");
    snprintf(q, sizeof(q), "bottomk(1, %s)", per_svc);
    expect_instant(&d, q, 30, "{service_name=worker}=1");
    snprintf(q, sizeof(q), "%s / 5", per_svc);
    expect_instant(&d, q, 30, "{service_name=api}=2;{service_name=db}=1;{service_name=worker}=0.2");
    snprintf(q, sizeof(q), "%s > 4", per_svc);
    expect_instant(&d, q, 30, "{service_name=api}=10;{service_name=db}=5");
    snprintf(q, sizeof(q), "%s > bool 4", per_svc);
    expect_instant(&d, q, 30, "{service_name=api}=1;{service_name=db}=1;{service_name=worker}=0");
    expect_instant(&d,
                   "sum(count_over_time({service_name=\"api\"}[1m])) - "
                   "sum(count_over_time({service_name=\"db\"}[1m]))",
                   30, "{}=5");
    expect_instant(&d,
                   "sum by (service_name) (count_over_time({service_name=\"api\"}[1m])) or "
                   "sum by (service_name) (count_over_time({service_name=\"db\"}[1m]))",
                   30, "{service_name=api}=10;{service_name=db}=5");
    /* unwrap */
    expect_instant(&d, "sum(sum_over_time({service_name=\"db\"} | json | unwrap rows [1m]))", 30,
                   "{}=10");
    expect_instant(
        &d, "max_over_time({service_name=\"db\"} | json | unwrap rows [1m]) by (service_name)", 30,
        "{service_name=db}=4");
    expect_instant(
        &d, "avg_over_time({service_name=\"db\"} | json | unwrap rows [1m]) by (service_name)", 30,
        "{service_name=db}=2");
    /* rows 0..4: p50 = 2, p90 = 3.6 (linear between ranks), p0 = 0 */
    expect_instant(&d,
                   "quantile_over_time(0.5, {service_name=\"db\"} | json | unwrap rows [1m]) by "
                   "(service_name)",
                   30, "{service_name=db}=2");
    expect_instant(&d,
                   "quantile_over_time(0.9, {service_name=\"db\"} | json | unwrap rows [1m]) by "
                   "(service_name)",
                   30, "{service_name=db}=3.6");
    expect_instant(
        &d,
        "quantile_over_time(0, {service_name=\"db\"} | json | unwrap rows [1m]) by (service_name)",
        30, "{service_name=db}=0");
    /* 2 s windows ending at T0+1, +3, +5 hold rows {0}, {1, 2}, {3, 4} (at +i.5 s) */
    expect_range(&d,
                 "quantile_over_time(0.5, {service_name=\"db\"} | json | unwrap rows [2s]) by "
                 "(service_name)",
                 1, 5, "2", "1:0,3:1.5,5:3.5");
    /* The unwrapped label leaves the series (Loki's extractor groups
     * without it), so | json makes two series, slow=false (rows 0, 1, 2)
     * and slow=true (rows 3, 4), and sum() adds their values: stddev
     * sqrt(2/3) + 0.5, first 0 + 3, last 2 + 4. */
    expect_instant(&d, "sum(stddev_over_time({service_name=\"db\"} | json | unwrap rows [1m]))", 30,
                   "{}=1.316496580927726");
    expect_instant(&d, "sum(first_over_time({service_name=\"db\"} | json | unwrap rows [1m]))", 30,
                   "{}=3");
    expect_instant(&d, "sum(last_over_time({service_name=\"db\"} | json | unwrap rows [1m]))", 30,
                   "{}=6");
    expect_instant(&d, "sum(rate({service_name=\"db\"} | json | unwrap rows [10s]))", 9, "{}=1");
    /* vector(), numbers */
    expect_instant(&d, "vector(1)+vector(1)", 0, "{}=2");
    expect_instant(&d, "2 * 3 + 1", 0, "scalar=7");

    /* steps t_k = start + k*step <= end, each a (t - range, t] window, no zero filling */
    expect_range(&d, "sum(count_over_time({service_name=\"api\"}[5s]))", 4, 9, "5", "4:5,9:5");
    expect_range(&d, "sum(count_over_time({service_name=\"api\"}[3s]))", 2, 9, "3s", "2:3,5:3,8:3");
    expect_range(&d, "sum(count_over_time({service_name=\"api\"} |= \"status=500\" [2s]))", 1, 4,
                 "1000ms", "1:1,2:1,3:1,4:1");
    expect_range(&d, "count_over_time({service_name=\"worker\"}[1s])", 0, 30, "5", "20:1");
    expect_range(&d, "sum by (service_name) (count_over_time({service_name=~\"api|db\"}[1s]))", 0,
                 2, "1", "0:1,1:1,2:1;1:1,2:1");
    expect_range(&d, "vector(3)", 0, 2, "1", "0:3,1:3,2:3");

    /* an __error__ left in a metric series is a 400 pipeline error */
    char enc[512], path[1024], *body;
    httpc_url_enc(enc, sizeof(enc),
                  "sum by (x) (count_over_time({service_name=\"api\"} | json | x=\"\" [1m]))");
    snprintf(path, sizeof(path), "/loki/api/v1/query?query=%s&time=%" PRIu64, enc, (T0 + 30) * NS);
    cr_expect_eq(get(&d, path, NULL, &body), 400);
    cr_expect_not_null(strstr(body, "pipeline error: 'JSONParserErr'"), "%s", body);
    free(body);
    expect_instant(&d,
                   "sum by (x) (count_over_time({service_name=\"api\"} | json | __error__!=\"\" | "
                   "drop __error__, __error_details__ [1m]))",
                   30, "{}=10");

    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- label endpoints, shapes, errors ---------------------------------------------- */

static void expect_strings(json_t *r, const char *want)
{
    char got[1024];
    size_t o = 0, i;
    json_t *v;
    got[0] = '\0';
    json_array_foreach(json_object_get(r, "data"), i, v)
    {
        o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%s", i ? "," : "", json_string_value(v));
    }
    cr_expect_str_eq(got, want);
    json_decref(r);
}

static void expect_400(const struct daemon *d, const char *path, const char *frag)
{
    char *body;
    int st = get(d, path, NULL, &body);
    cr_expect_eq(st, 400, "%s: %d %s", path, st, body);
    cr_expect_not_null(strstr(body, frag), "%s: \"%s\" lacks \"%s\"", path, body, frag);
    free(body);
}

Test(loki, label_endpoints_response_shapes_and_errors)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_corpus(&d);
    char path[1024], enc[512];
    size_t i;
    json_t *s;
    snprintf(path, sizeof(path), "/loki/api/v1/labels?start=%" PRIu64 "&end=%" PRIu64, T0 * NS,
             (T0 + 60) * NS);
    expect_strings(get_json(&d, path, NULL), "k8s_container_name,k8s_namespace_name,service_name");
    snprintf(path, sizeof(path), "/loki/api/v1/label/service_name/values?start=%" PRIu64, T0 * NS);
    expect_strings(get_json(&d, path, NULL), "api,db,worker");
    httpc_url_enc(enc, sizeof(enc), "{k8s_namespace_name=\"prod\"}");
    snprintf(path, sizeof(path),
             "/loki/api/v1/label/service_name/values?start=%" PRIu64 "&query=%s", T0 * NS, enc);
    expect_strings(get_json(&d, path, NULL), "api");
    /* a window before the corpus: nothing */
    snprintf(path, sizeof(path), "/loki/api/v1/labels?start=%" PRIu64 "&end=%" PRIu64,
             (T0 - 100) * NS, (T0 - 50) * NS);
    expect_strings(get_json(&d, path, NULL), "");

    httpc_url_enc(enc, sizeof(enc), "{service_name=~\"a.*|d.*\"}");
    snprintf(path, sizeof(path), "/loki/api/v1/series?match[]=%s&start=%" PRIu64, enc, T0 * NS);
    json_t *r = get_json(&d, path, NULL);
    char *dump = json_dumps(json_object_get(r, "data"), JSON_SORT_KEYS | JSON_COMPACT);
    cr_expect(strcmp(dump, "[{\"k8s_namespace_name\":\"prod\",\"service_name\":\"api\"},"
                           "{\"service_name\":\"db\"}]") == 0 ||
                  strcmp(dump, "[{\"service_name\":\"db\"},"
                               "{\"k8s_namespace_name\":\"prod\",\"service_name\":\"api\"}]") == 0,
              "%s", dump);
    free(dump);
    json_decref(r);
    snprintf(path, sizeof(path), "/loki/api/v1/series?match[]=%%7B%%7D&start=%" PRIu64, T0 * NS);
    r = get_json(&d, path, NULL);
    cr_expect_eq(json_array_size(json_object_get(r, "data")), 3);
    json_decref(r);

    /* index/stats, index/volume, detected_labels */
    size_t api_bytes = 0, db_bytes = 0;
    char line[256];
    for (int k = 0; k < 10; k++) {
        api_bytes += strlen(api_line(line, sizeof(line), k));
    }
    for (int k = 0; k < 5; k++) {
        db_bytes +=
            (size_t)snprintf(line, sizeof(line), "{\"query\":\"select\",\"rows\":%d,\"slow\":%s}",
                             k, k >= 3 ? "true" : "false");
    }
    httpc_url_enc(enc, sizeof(enc), "{service_name=~\"api|db\"}");
    snprintf(path, sizeof(path), "/loki/api/v1/index/stats?query=%s&start=%" PRIu64 "&end=%" PRIu64,
             enc, T0 * NS, (T0 + 60) * NS);
    char *ib;
    cr_assert_eq(get(&d, path, NULL, &ib), 200, "%s", ib);
    char want[256];
    snprintf(want, sizeof(want), "{\"streams\":2,\"chunks\":1,\"entries\":15,\"bytes\":%zu}",
             api_bytes + db_bytes);
    cr_expect_str_eq(ib, want);
    free(ib);
    httpc_url_enc(enc, sizeof(enc), "{service_name=~\".+\"}");
    snprintf(path, sizeof(path),
             "/loki/api/v1/index/volume?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&limit=5000", enc,
             T0 * NS, (T0 + 60) * NS);
    json_t *vr = get_json(&d, path, NULL);
    dump = json_dumps(json_object_get(json_object_get(vr, "data"), "result"), JSON_COMPACT);
    snprintf(want, sizeof(want),
             "[{\"metric\":{\"service_name\":\"api\"},\"value\":[1700000060,\"%zu\"]},"
             "{\"metric\":{\"service_name\":\"db\"},\"value\":[1700000060,\"%zu\"]},"
             "{\"metric\":{\"service_name\":\"worker\"},\"value\":[1700000060,\"15\"]}]",
             api_bytes, db_bytes);
    cr_expect_str_eq(dump, want);
    free(dump);
    json_decref(vr);
    snprintf(path, sizeof(path),
             "/loki/api/v1/index/volume?query=%s&start=%" PRIu64 "&end=%" PRIu64
             "&targetLabels=k8s_namespace_name&limit=1",
             enc, T0 * NS, (T0 + 60) * NS);
    vr = get_json(&d, path, NULL);
    dump = json_dumps(json_object_get(json_object_get(vr, "data"), "result"), JSON_COMPACT);
    snprintf(want, sizeof(want),
             "[{\"metric\":{\"k8s_namespace_name\":\"prod\"},\"value\":[1700000060,\"%zu\"]}]",
             api_bytes);
    cr_expect_str_eq(dump, want);
    free(dump);
    json_decref(vr);
    snprintf(path, sizeof(path),
             "/loki/api/v1/index/volume?query=%s&start=%" PRIu64 "&end=%" PRIu64
             "&aggregateBy=labels",
             enc, T0 * NS, (T0 + 60) * NS);
    vr = get_json(&d, path, NULL);
    dump = json_dumps(json_object_get(json_object_get(vr, "data"), "result"), JSON_COMPACT);
    snprintf(want, sizeof(want),
             "[{\"metric\":{\"service_name\":\"\"},\"value\":[1700000060,\"%zu\"]}]",
             api_bytes + db_bytes + 15);
    cr_expect_str_eq(dump, want);
    free(dump);
    json_decref(vr);
    snprintf(path, sizeof(path), "/loki/api/v1/detected_labels?start=%" PRIu64 "&end=%" PRIu64,
             T0 * NS, (T0 + 60) * NS);
    cr_assert_eq(get(&d, path, NULL, &ib), 200);
    vr = json_loads(ib, 0, NULL);
    free(ib);
    json_t *dls = json_object_get(vr, "detectedLabels");
    cr_expect_eq(json_array_size(dls), 3);
    json_array_foreach(dls, i, s)
    {
        const char *name = json_string_value(json_object_get(s, "label"));
        json_int_t card = json_integer_value(json_object_get(s, "cardinality"));
        cr_expect_eq(card, strcmp(name, "service_name") == 0 ? 3 : 1, "%s", name);
    }
    json_decref(vr);

    /* POST form = GET */
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"db\"}");
    char form[1024];
    snprintf(form, sizeof(form), "query=%s&start=%" PRIu64 "&end=%" PRIu64 "&limit=2", enc, T0 * NS,
             (T0 + 60) * NS);
    const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    struct http_resp hr;
    cr_assert_eq(httpc_request(d.http_port, "POST", "/loki/api/v1/query_range", hdrs, form,
                               strlen(form), 0, &hr),
                 0);
    cr_expect_eq(hr.status, 200);
    r = json_loads((const char *)hr.body, 0, NULL);
    char got[4096];
    size_t n;
    entries(r, false, got, sizeof(got), &n);
    cr_expect_eq(n, 2);
    json_decref(r);
    http_resp_free(&hr);

    /* categorized shape: encodingFlags before result, 3-element entries with an object */
    httpc_url_enc(enc, sizeof(enc),
                  "{service_name=~\"api|worker\"} |= \"id=4\" or \"\\\"x\\\"\" | logfmt");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64,
             enc, T0 * NS, (T0 + 60) * NS);
    char *body;
    cr_assert_eq(get(&d, path, CAT, &body), 200);
    const char *rt = strstr(body, "\"resultType\""), *ef = strstr(body, "\"encodingFlags\""),
               *res = strstr(body, "\"result\":"), *st = strstr(body, "\"stats\"");
    cr_assert(rt && ef && res && st && rt < ef && ef < res && res < st, "%s", body);
    cr_expect_eq(strncmp(body, "{\"status\":\"success\",\"data\":{", 28), 0, "%s", body);
    r = json_loads(body, 0, NULL);
    free(body);
    json_t *result = json_object_get(json_object_get(r, "data"), "result");
    cr_assert_eq(json_array_size(result), 2);
    json_array_foreach(result, i, s)
    {
        json_t *vals = json_object_get(s, "values");
        cr_assert_eq(json_array_size(vals), 1);
        json_t *e = json_array_get(vals, 0);
        cr_expect_eq(json_array_size(e), 3);
        cr_expect(json_is_object(json_array_get(e, 2)));
        json_t *stream = json_object_get(s, "stream");
        cr_expect_null(json_object_get(stream, "severity_text"), "only index labels");
        cr_expect_not_null(json_object_get(stream, "service_name"));
    }
    /* streams sort by label string: {k8s_container_name=...} before {k8s_namespace_name=...} */
    json_t *api = json_array_get(result, 1);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(api, "stream"), "service_name")), "api");
    json_t *meta = json_array_get(json_array_get(json_object_get(api, "values"), 0), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(meta, "parsed"), "id")),
                     "4");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(meta, "structuredMetadata"), "user_id")),
        "u1");
    json_decref(r);
    r = logq(&d, "{service_name=\"worker\"}", 0, 60, 100, "forward", true);
    result = json_object_get(json_object_get(r, "data"), "result");
    meta =
        json_array_get(json_array_get(json_object_get(json_array_get(result, 0), "values"), 0), 2);
    cr_expect_null(json_object_get(meta, "parsed"), "empty sections are omitted");
    json_t *wsm = json_object_get(meta, "structuredMetadata");
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "detected_level")), "unknown");
    /* values as pdata AsString renders them (FACTS.md B.4), maps flattened (B.2) */
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "raw")), "AQID");
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "list")), "[1,\"a<b\",true]");
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "big")), "1e+21");
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "tiny")), "5e-7");
    cr_expect_str_eq(json_string_value(json_object_get(wsm, "nested_x_y_z")), "deep");
    json_decref(r);
    expect_ids_raw(&d, "{service_name=\"worker\"} | nested_x_y_z=\"deep\" | big > 1e20", 1);
    /* plain shape: 2-element entries, all labels in the stream */
    cr_assert_eq(get(&d, path, NULL, &body), 200);
    r = json_loads(body, 0, NULL);
    free(body);
    cr_expect_null(json_object_get(json_object_get(r, "data"), "encodingFlags"));
    result = json_object_get(json_object_get(r, "data"), "result");
    json_array_foreach(result, i, s)
    {
        json_t *e = json_array_get(json_object_get(s, "values"), 0);
        cr_expect_eq(json_array_size(e), 2);
    }
    json_decref(r);

    /* Grafana's health check */
    r = get_json(
        &d,
        "/loki/api/v1/query?direction=backward&query=vector%281%29%2Bvector%281%29&time=4000000000",
        CAT);
    json_t *data = json_object_get(r, "data");
    cr_expect_str_eq(json_string_value(json_object_get(data, "resultType")), "vector");
    cr_assert_eq(json_array_size(json_object_get(data, "result")), 1);
    json_t *v = json_object_get(json_array_get(json_object_get(data, "result"), 0), "value");
    cr_expect_str_eq(json_string_value(json_array_get(v, 1)), "2");
    cr_expect_eq(json_number_value(json_array_get(v, 0)), 4000000000.0);
    json_decref(r);
    cr_expect_eq(get(&d, "/loki/api/v1/status/buildinfo", NULL, &body), 200);
    r = json_loads(body, 0, NULL);
    free(body);
    cr_expect_eq(strncmp(json_string_value(json_object_get(r, "version")), "3.", 2), 0);
    json_decref(r);

    /* timestamps: seconds, ns, float seconds, RFC3339 */
    const char *starts[] = {"1700000002", "1700000002000000000", "1700000002.000",
                            "2023-11-14T22:13:22Z", "2023-11-14T23:13:22.000%2B01:00"};
    for (size_t k = 0; k < 5; k++) {
        httpc_url_enc(enc, sizeof(enc), "{service_name=\"api\"}");
        snprintf(path, sizeof(path),
                 "/loki/api/v1/query_range?query=%s&start=%s&end=1700000004&direction=forward", enc,
                 starts[k]);
        r = get_json(&d, path, NULL);
        char idl[64];
        ids(r, true, idl, sizeof(idl));
        cr_expect_str_eq(idl, "2,3", "start=%s", starts[k]);
        json_decref(r);
    }

    /* errors: 400 with what was wrong */
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"api\"");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s", enc);
    expect_400(&d, path, "parse error at line 1, col ");
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"api\"} |= ");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s", enc);
    expect_400(&d, path, "parse error at line 1, col 25");
    httpc_url_enc(enc, sizeof(enc), "{}");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s", enc);
    expect_400(&d, path, "parse error");
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"api\"}");
    snprintf(path, sizeof(path), "/loki/api/v1/query?query=%s", enc);
    expect_400(&d, path, "log queries are not supported as an instant query type");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&limit=6000", enc);
    expect_400(&d, path, "max entries limit per query exceeded");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&limit=0", enc);
    expect_400(&d, path, "limit must be a positive value");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&direction=sideways", enc);
    expect_400(&d, path, "invalid direction");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&start=20&end=10", enc);
    expect_400(&d, path, "end timestamp must not be before");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&start=yesterday", enc);
    expect_400(&d, path, "could not parse 'start' parameter");
    httpc_url_enc(enc, sizeof(enc), "count_over_time({service_name=\"api\"}[1m])");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&start=0&end=100000&step=1",
             enc);
    expect_400(&d, path, "exceeded maximum resolution of 11,000 points");
    snprintf(path, sizeof(path), "/api/v1/logs?query=%s", enc);
    expect_400(&d, path, "log queries only");
    httpc_url_enc(enc, sizeof(enc),
                  "{service_name=\"api\"} | line_format `{{ regexReplaceAll .re .x \"\" }}`");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s", enc);
    expect_400(&d, path, "template: the regex of this function must be a string literal");

    /* /metrics counts queries by endpoint and outcome */
    cr_expect_geq(
        daemon_metric(&d, "miradb_queries_total{endpoint=\"loki_query_range\",outcome=\"ok\"}"), 7);
    cr_expect_geq(
        daemon_metric(
            &d, "miradb_queries_total{endpoint=\"loki_query_range\",outcome=\"bad_request\"}"),
        9);
    cr_expect_geq(
        daemon_metric(&d, "miradb_queries_total{endpoint=\"loki_labels\",outcome=\"ok\"}"), 4);
    cr_expect_geq(daemon_metric(&d, "miradb_query_duration_seconds_count{endpoint=\"loki_query\"}"),
                  2);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- sealed and open blocks, pruning, failing blocks ---------------------------------- */

/* Polls /metrics (deadline 30 s) until the logs rows in sealed blocks reach |rows|. */
static void wait_sealed_rows(const struct daemon *d, double rows)
{
    long long dl = tclock_ms() + 30000;
    double v;
    while ((v = daemon_metric(d, "miradb_block_rows{signal=\"logs\"}")) < rows) {
        cr_assert_lt(tclock_ms(), dl, "sealed rows stuck at %g, want %g", v, rows);
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(v, rows);
}

static void export_marker(const struct daemon *d, int k)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
             "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"p\"}}]},"
             "\"scopeLogs\":[{\"logRecords\":[{\"timeUnixNano\":\"%" PRIu64 "\","
             "\"body\":{\"stringValue\":\"batch marker=tok%d end\"},"
             "\"attributes\":[{\"key\":\"k\",\"value\":{\"stringValue\":\"v%d\"}}]}]}]}]}",
             (T0 + (uint64_t)k) * NS, k, k);
    export_json(d, buf);
}

static double qmetric(const struct daemon *d, const char *name)
{
    char series[128];
    snprintf(series, sizeof(series), "miradb_query_%s_total", name);
    return daemon_metric(d, series);
}

Test(loki, sealed_and_open_blocks_are_read_together_and_pruned)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--block-max-age", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    /* six sealed blocks, one record each */
    for (int k = 0; k < 6; k++) {
        export_marker(&d, k);
        wait_sealed_rows(&d, k + 1);
    }
    cr_assert_eq(daemon_metric(&d, "miradb_blocks{signal=\"logs\"}"), 6);

    /* grouped by a stream label: no attribute (or detail) table is read.
     * The sealer dropped each block's tables after verifying it, so the
     * first query loads (and verifies) the six root tables again, and
     * nothing else; the next query loads nothing. */
    double verified = daemon_metric(&d, "miradb_block_tables_verified_total");
    expect_instant(&d, "sum by (service_name) (count_over_time({service_name=\"p\"}[1h]))", 100,
                   "{service_name=p}=6");
    cr_expect_eq(daemon_metric(&d, "miradb_block_tables_verified_total") - verified, 6,
                 "the first query reads each block's root table and no other");
    verified = daemon_metric(&d, "miradb_block_tables_verified_total");
    expect_instant(&d, "sum(count_over_time({service_name=\"p\"} |= \"tok\" [1h]))", 100, "{}=6");
    cr_expect_eq(daemon_metric(&d, "miradb_block_tables_verified_total"), verified,
                 "a query that neither filters on nor renders attributes reads no attribute table");

    /* a whole-token line filter scans only the block that can match */
    double skipped = qmetric(&d, "blocks_skipped_bloom"), scanned = qmetric(&d, "blocks_scanned");
    json_t *r = logq(&d, "{service_name=\"p\"} |= \"marker=tok3 \"", 0, 100, 100, "forward", true);
    char got[4096];
    size_t n;
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok3 end");
    json_decref(r);
    cr_expect_eq(qmetric(&d, "blocks_skipped_bloom") - skipped, 5);
    cr_expect_eq(qmetric(&d, "blocks_scanned") - scanned, 1);
    cr_expect_gt(daemon_metric(&d, "miradb_block_tables_verified_total"), verified,
                 "rendering structured metadata reads the attribute table");
    /* a substring that is not a whole token skips by the body gram bloom */
    skipped = qmetric(&d, "blocks_skipped_bloom");
    scanned = qmetric(&d, "blocks_scanned");
    r = logq(&d, "{service_name=\"p\"} |= \"ok4\"", 0, 100, 100, "forward", true);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok4 end");
    json_decref(r);
    cr_expect_eq(qmetric(&d, "blocks_skipped_bloom") - skipped, 5);
    cr_expect_eq(qmetric(&d, "blocks_scanned") - scanned, 1);
    /* two bytes are no gram: every block is scanned, and the answer is right */
    skipped = qmetric(&d, "blocks_skipped_bloom");
    scanned = qmetric(&d, "blocks_scanned");
    r = logq(&d, "{service_name=\"p\"} |= \"k4\"", 0, 100, 100, "forward", true);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok4 end");
    json_decref(r);
    cr_expect_eq(qmetric(&d, "blocks_skipped_bloom"), skipped);
    cr_expect_eq(qmetric(&d, "blocks_scanned") - scanned, 6);
    /* the time zone map: a window holding two records scans two blocks */
    double zone = qmetric(&d, "blocks_skipped_zone");
    scanned = qmetric(&d, "blocks_scanned");
    r = logq(&d, "{service_name=\"p\"}", 2, 4, 100, "forward", true);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok2 end|batch marker=tok3 end");
    json_decref(r);
    cr_expect_geq(qmetric(&d, "blocks_skipped_zone") - zone, 4);
    cr_expect_eq(qmetric(&d, "blocks_scanned") - scanned, 2);
    /* a backward limit stops at the newest blocks */
    scanned = qmetric(&d, "blocks_scanned");
    r = logq(&d, "{service_name=\"p\"}", 0, 100, 2, "backward", true);
    entries(r, false, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok5 end|batch marker=tok4 end");
    json_decref(r);
    cr_expect_leq(qmetric(&d, "blocks_scanned") - scanned, 4, "older blocks are not read");

    /* read-your-writes: acknowledged, then found at once, with the sealed ones */
    for (int k = 6; k < 9; k++) {
        export_marker(&d, k);
        r = logq(&d, "{service_name=\"p\"}", 0, 100, 100, "forward", true);
        entries(r, true, got, sizeof(got), &n);
        cr_expect_eq(n, (size_t)k + 1, "after export %d: %s", k, got);
        char want[64];
        snprintf(want, sizeof(want), "batch marker=tok%d end", k);
        cr_expect_str_eq(strrchr(got, '|') + 1, want);
        json_decref(r);
    }
    char want[64];
    snprintf(want, sizeof(want), "{}=9");
    expect_instant(&d, "sum(count_over_time({service_name=\"p\"}[1h]))", 100, want);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Block |k|: three records at T0 + 10k + 0..2 s, one request. */
static void export_triple(const struct daemon *d, int k)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
             "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"g\"}}]},"
             "\"scopeLogs\":[{\"logRecords\":["
             "{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
             "\"k%d alpha: connection timeout after 30s\"}},"
             "{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
             "\"k%d beta: Payment ACCEPTED id=ord-%d1\"}},"
             "{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
             "\"k%d gamma: \u00c5ngstr\u00f6m cache miss\"}}]}]}]}",
             (T0 + 10 * (uint64_t)k) * NS, k, (T0 + 10 * (uint64_t)k + 1) * NS, k, k,
             (T0 + 10 * (uint64_t)k + 2) * NS, k);
    export_json(d, buf);
}

/* Runs |q| over [T0, T0 + 100 s): its lines joined by '|', and how many
 * blocks the bloom filters skipped and how many were scanned. */
static void gram_q(const struct daemon *d, const char *q, const char *want, double want_skipped,
                   double want_scanned)
{
    double skipped = qmetric(d, "blocks_skipped_bloom"), scanned = qmetric(d, "blocks_scanned");
    json_t *r = logq(d, q, 0, 100, 100, "forward", true);
    char got[4096];
    size_t n;
    entries(r, true, got, sizeof(got), &n);
    json_decref(r);
    cr_expect_str_eq(got, want, "%s", q);
    cr_expect_eq(qmetric(d, "blocks_skipped_bloom") - skipped, want_skipped, "%s: skipped", q);
    cr_expect_eq(qmetric(d, "blocks_scanned") - scanned, want_scanned, "%s: scanned", q);
}

Test(loki, substring_filters_skip_blocks_by_their_body_grams_and_stay_exact)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--block-max-age", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int k = 0; k < 4; k++) {
        export_triple(&d, k);
        wait_sealed_rows(&d, 3 * (k + 1));
    }
    cr_assert_eq(daemon_metric(&d, "miradb_blocks{signal=\"logs\"}"), 4);
    const char *sel = "{service_name=\"g\"}";
    char q[512];
#define GQ(filter, want, sk, sc)                                                                   \
    do {                                                                                           \
        snprintf(q, sizeof(q), "%s %s", sel, filter);                                              \
        gram_q(&d, q, want, sk, sc);                                                               \
    } while (0)
    /* a needle in no record (and no whole token): every block skipped, nothing returned */
    GQ("|= \"zqxnotth\"", "", 4, 0);
    GQ("|~ \"conn.*zqxnot\"", "", 4, 0);
    /* a needle in every block: nothing skipped, exactly its lines */
    GQ("|= \"nnection timeo\"",
       "k0 alpha: connection timeout after 30s|k1 alpha: connection timeout after 30s|"
       "k2 alpha: connection timeout after 30s|k3 alpha: connection timeout after 30s",
       0, 4);
    GQ("|~ \"\u00c5.gstr\"",
       "k0 gamma: \xc3\x85ngstr\xc3\xb6m cache miss|k1 gamma: \xc3\x85ngstr\xc3\xb6m cache miss|"
       "k2 gamma: \xc3\x85ngstr\xc3\xb6m cache miss|k3 gamma: \xc3\x85ngstr\xc3\xb6m cache miss",
       0, 4);
    /* one block holds it: the other three are skipped */
    GQ("|= \"ACCEPTED id=ord-2\"", "k2 beta: Payment ACCEPTED id=ord-21", 3, 1);
    GQ("|= \"zqxno\" or \"k1 alph\"", "k1 alpha: connection timeout after 30s", 3, 1);
    GQ("|> \"<_>ACCEPTED id=ord-3<_>\"", "k3 beta: Payment ACCEPTED id=ord-31", 3, 1);
    /* |= is case-sensitive (the bloom folds case: no skip, and no line) */
    GQ("|= \"payment accepted\"", "", 0, 4);
    /* a case-insensitive regex still finds its line */
    GQ("|~ \"(?i)payment accepted id=ORD-3\"", "k3 beta: Payment ACCEPTED id=ord-31", 3, 1);
    /* alternation at the top of a regex and negative filters rule nothing out */
    GQ("|~ \"zqx|k2 alpha\"", "k2 alpha: connection timeout after 30s", 0, 4);
    GQ("!= \"zqxnotth\" |= \"ord-01\"", "k0 beta: Payment ACCEPTED id=ord-01", 3, 1);
    /* a filter after line_format sees the rewritten line: no skip */
    GQ("| line_format \"zqx {{__line__}}\" |= \"zqx k1 b\"",
       "zqx k1 beta: Payment ACCEPTED id=ord-11", 0, 4);
#undef GQ
    /* metric queries use the same plan */
    double skipped = qmetric(&d, "blocks_skipped_bloom");
    expect_instant(&d, "sum(count_over_time({service_name=\"g\"} |= \"ion timeou\" [1h]))", 100,
                   "{}=4");
    cr_expect_eq(qmetric(&d, "blocks_skipped_bloom"), skipped);
    cr_expect_eq(daemon_stop(&d), 0);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

Test(loki, a_corrupt_block_is_quarantined_reported_and_skipped)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--block-max-age", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int k = 0; k < 3; k++) {
        export_marker(&d, k);
        wait_sealed_rows(&d, k + 1);
    }
    /* the second block (seal ids grow) holds tok1: break its attribute table */
    char dir[400], names[8][256];
    snprintf(dir, sizeof(dir), "%s/logs", d.data_dir);
    DIR *dh = opendir(dir);
    cr_assert_not_null(dh);
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL && nn < 8) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".blk") == 0) {
            snprintf(names[nn++], sizeof(names[0]), "%s", de->d_name);
        }
    }
    closedir(dh);
    cr_assert_eq(nn, 3);
    qsort(names, nn, sizeof(names[0]), name_cmp);
    char path[700], err[256];
    snprintf(path, sizeof(path), "%s/%s", dir, names[1]);
    blk *b;
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    struct blk_table_info ti = {0};
    bool found = false;
    for (uint32_t i = 0; i < blk_n_tables(b) && !found; i++) {
        cr_assert_eq(blk_table_info(b, i, &ti), 0);
        found = ti.kind == BLK_T_ATTRS;
    }
    blk_unref(b);
    cr_assert(found && ti.length > 0);
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    uint8_t junk[8];
    memset(junk, 0xa5, sizeof(junk));
    size_t nj = ti.length < sizeof(junk) ? ti.length : sizeof(junk);
    cr_assert_eq(pwrite(fd, junk, nj, (off_t)ti.offset), (ssize_t)nj);
    close(fd);

    /* the query answers with the other blocks and says what it skipped */
    json_t *r = logq(&d, "{service_name=\"p\"}", 0, 100, 100, "forward", true);
    char got[4096];
    size_t n;
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok0 end|batch marker=tok2 end");
    json_t *w = json_object_get(r, "warnings");
    cr_assert_eq(json_array_size(w), 1);
    const char *msg = json_string_value(json_array_get(w, 0));
    /* no filesystem path reaches the client: the log names the block */
    cr_expect_str_eq(msg, "a block failed verification and was quarantined: 1 rows skipped (the "
                          "server log names the block)");
    size_t ll;
    char *log = (char *)httpc_read_file(d.log_path, &ll);
    cr_assert_not_null(log);
    char want_line[800];
    snprintf(want_line, sizeof(want_line), "event=block_quarantined path=%s\n", path);
    cr_expect_not_null(strstr(log, want_line), "log lacks %s", want_line);
    free(log);
    json_decref(r);
    cr_expect_eq(qmetric(&d, "blocks_failed"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_blocks_quarantined_total"), 1);
    snprintf(path, sizeof(path), "%s/quarantine/logs-%s", d.data_dir, names[1]);
    cr_expect_eq(access(path, F_OK), 0, "moved to %s", path);
    /* the block is gone from the catalog: no warning the second time */
    r = logq(&d, "{service_name=\"p\"}", 0, 100, 100, "forward", true);
    entries(r, true, got, sizeof(got), &n);
    cr_expect_str_eq(got, "batch marker=tok0 end|batch marker=tok2 end");
    cr_expect_null(json_object_get(r, "warnings"));
    json_decref(r);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(loki, query_limits_end_a_query_with_a_message_naming_the_limit)
{
    struct daemon d;
    const char *args[] = {
        "--shards", "1", "--io-threads", "1", "--query-max-rows", "16", "--query-memory",
        "1MiB",     NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    export_corpus(&d); /* 16 rows */
    char enc[512], path[1024], *body;
    /* 16 rows: at the limit, not over it */
    json_t *r = logq(&d, "{service_name=\"api\"}", 0, 60, 100, "forward", false);
    json_decref(r);
    /* 8 series x 11000 steps do not fit in 1 MiB */
    httpc_url_enc(enc, sizeof(enc), "count_over_time({service_name=~\"api|db\"}[1m])");
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=1", enc,
             (T0 - 10000) * NS, (T0 + 999) * NS);
    cr_expect_eq(get(&d, path, NULL, &body), 422);
    cr_expect_not_null(strstr(body, "(--query-memory)"), "%s", body);
    free(body);
    export_corpus(&d);
    /* every row of the open block is read: 32 > 16 */
    httpc_url_enc(enc, sizeof(enc), "{service_name=~\".+\"}");
    snprintf(path, sizeof(path), "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64,
             enc, T0 * NS, (T0 + 60) * NS);
    cr_expect_eq(get(&d, path, NULL, &body), 400);
    cr_expect_not_null(strstr(body, "more than 16 rows (--query-max-rows)"), "%s", body);
    free(body);
    cr_expect_eq(
        daemon_metric(&d, "miradb_queries_total{endpoint=\"loki_query_range\",outcome=\"limit\"}"),
        2);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(loki, big_answers_are_streamed_in_pieces)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    /* 3000 records in three exports */
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    for (int part = 0; part < 3; part++) {
        size_t o = (size_t)snprintf(
            buf, cap,
            "{\"resourceLogs\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
            "\"value\":{\"stringValue\":\"big\"}}]},\"scopeLogs\":[{\"logRecords\":[");
        for (int i = 0; i < 1000; i++) {
            int k = part * 1000 + i;
            o += (size_t)snprintf(
                buf + o, cap - o,
                "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
                "\"line %05d of a big answer, padded to make it longer\"},"
                "\"attributes\":[{\"key\":\"n\",\"value\":{\"intValue\":\"%d\"}}]}",
                i ? "," : "", T0 * NS + (uint64_t)k * UINT64_C(1000000), k, k);
        }
        snprintf(buf + o, cap - o, "]}]}]}");
        export_json(&d, buf);
    }
    free(buf);

    char enc[256], path[1024], hv[64];
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"big\"}");
    snprintf(path, sizeof(path),
             "/api/v1/logs?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&limit=3000&direction=forward",
             enc, T0 * NS, (T0 + 60) * NS);
    struct http_resp hr;
    cr_assert_eq(httpc_request(d.http_port, "GET", path, NULL, NULL, 0, 0, &hr), 0);
    cr_assert_eq(hr.status, 200);
    cr_expect_not_null(http_resp_header(&hr, "Transfer-Encoding", hv, sizeof(hv)),
                       "a %zu-byte answer goes out in chunks", hr.body_len);
    cr_expect_gt(hr.body_len, 1u << 20);
    json_t *r = json_loads((const char *)hr.body, 0, NULL);
    cr_assert_not_null(r, "the pieces make one JSON document");
    json_t *recs = json_object_get(json_object_get(r, "data"), "records");
    cr_assert_eq(json_array_size(recs), 3000);
    for (size_t i = 0; i < 3000; i++) {
        json_t *rec = json_array_get(recs, i);
        char want[80];
        snprintf(want, sizeof(want), "line %05zu of a big answer, padded to make it longer", i);
        cr_assert_str_eq(
            json_string_value(json_object_get(json_object_get(rec, "body"), "stringValue")), want);
    }
    json_decref(r);
    http_resp_free(&hr);

    /* a small answer has a Content-Length */
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&limit=5", enc,
             T0 * NS, (T0 + 60) * NS);
    cr_assert_eq(httpc_request(d.http_port, "GET", path, NULL, NULL, 0, 0, &hr), 0);
    cr_expect_eq(hr.status, 200);
    cr_expect_not_null(http_resp_header(&hr, "Content-Length", hv, sizeof(hv)));
    http_resp_free(&hr);
    /* Loki's plain mode: one stream per label set, 3000 of them, streamed */
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64
             "&limit=3000&direction=backward",
             enc, T0 * NS, (T0 + 60) * NS);
    r = get_json(&d, path, NULL);
    char *all = malloc(1u << 20);
    size_t n;
    entries(r, false, all, 1u << 20, &n);
    cr_expect_eq(n, 3000);
    cr_expect_eq(strncmp(all, "line 02999 ", 11), 0);
    free(all);
    json_decref(r);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* A range, offset and time near int64's end (nanoseconds) must not
 * overflow the window arithmetic: each query is answered, exactly, and the
 * daemon keeps serving (under UBSan an overflow ends the daemon). */
Test(loki, ranges_and_offsets_near_the_end_of_time_are_answered)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--io-threads", "1", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    export_corpus(&d);
    const int far = 2000000000; /* T0 + 2e9 s: about 3.7e18 ns */
    expect_instant(&d, "sum(count_over_time({service_name=\"api\"}[100000d]))", far, "{}=10");
    expect_instant(&d, "sum(count_over_time({service_name=\"api\"}[100000d] offset -10y))", far,
                   "{}=10");
    expect_instant(&d,
                   "quantile_over_time(0.5, {service_name=\"api\"} | unwrap latency [100000d]) "
                   "by (service_name)",
                   far, "{service_name=api}=1.125");
    char got[4096];
    instant(&d, "sum(rate_counter({service_name=\"api\"} | unwrap latency [100000d]))", far, got,
            sizeof(got));
    cr_expect_neq(strlen(got), 0, "rate_counter over the whole corpus has a sample");
    expect_instant(&d, "sum(count_over_time({service_name=\"api\"}[1h]))", 60, "{}=10");
    cr_expect_eq(daemon_stop(&d), 0);
}
