/*
 * prom_test.c - the Prometheus HTTP API (server/prom.c) against the real
 * daemon.
 *
 * Suite prom_api: what the API decides by itself, whatever the store
 * holds: parameter errors with Prometheus 2.42's exact status and body
 * (PROMQL.md A.2-A.5; texts checked against web/api/v1/api.go at v2.42.0),
 * form POST answering as GET (Grafana's default), the health check query,
 * buildinfo and rules, the counters on /metrics.
 *
 * Suite prom_e2e: OTLP/JSON metrics posted, then exact answers of every
 * endpoint, hand-computed from PROMQL.md's mapping (C.1-C.5, C.8) and
 * semantics (B.1, B.3, B.6). These need the real series source and
 * evaluator (query/pmsrc.c, query/pmeval.c).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

static struct daemon d;

static void start(void)
{
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
}

/* A clean exit: no sanitizer report in the daemon either. */
static void stop(void)
{
    int st = daemon_stop(&d);
    if (st != 0) {
        daemon_dump_log(&d);
    }
    cr_expect_eq(st, 0, "daemon exit status %d", st);
}

/* One request; the status, the body (malloc'd) and the Content-Type. */
static int req(const char *method, const char *path, const char *form, char **body, char *ctype,
               size_t ccap)
{
    const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, method, path, form ? hdrs : NULL, form,
                               form ? strlen(form) : 0, 0, &r),
                 0, "%s %s failed", method, path);
    *body = strndup(r.body ? (char *)r.body : "", r.body_len);
    if (ctype != NULL && http_resp_header(&r, "Content-Type", ctype, ccap) == NULL) {
        ctype[0] = '\0';
    }
    int st = r.status;
    http_resp_free(&r);
    return st;
}

/* GET |path|: expects |status|, Content-Type application/json and exactly |want|. */
static void expect_get(const char *path, int status, const char *want)
{
    char *body, ct[128];
    int st = req("GET", path, NULL, &body, ct, sizeof(ct));
    cr_expect_eq(st, status, "GET %s: status %d, body %s", path, st, body);
    cr_expect_str_eq(ct, "application/json", "GET %s: Content-Type %s", path, ct);
    cr_expect_str_eq(body, want, "GET %s", path);
    free(body);
}

/* The same as a form POST: |path| without the query, |form| the body. */
static void expect_post(const char *path, const char *form, int status, const char *want)
{
    char *body, ct[128];
    int st = req("POST", path, form, &body, ct, sizeof(ct));
    cr_expect_eq(st, status, "POST %s %s: status %d, body %s", path, form, st, body);
    cr_expect_str_eq(ct, "application/json");
    cr_expect_str_eq(body, want, "POST %s %s", path, form);
    free(body);
}

#define BAD(msg) "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"" msg "\"}"

/* ---- prom_api ----------------------------------------------------------------- */

TestSuite(prom_api, .init = start, .fini = stop, .timeout = 120);

Test(prom_api, health_check_query_answers_like_prometheus)
{
    const char *want = "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[4,"
                       "\"2\"]}}";
    expect_get("/api/v1/query?query=1%2B1&time=4", 200, want);
    expect_post("/api/v1/query", "query=1%2B1&time=4", 200, want);
    /* float and RFC3339 times; a scalar's timestamp in Go's float form */
    expect_get("/api/v1/query?query=2&time=1.1", 200,
               "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1.1,"
               "\"2\"]}}");
    expect_get("/api/v1/query?query=0.0000001&time=1970-01-01T00:00:01.5Z", 200,
               "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1.5,"
               "\"0.0000001\"]}}");
    /* a string literal, escaped as Go escapes it */
    expect_get("/api/v1/query?query=%22a%3Cb%22&time=4", 200,
               "{\"status\":\"success\",\"data\":{\"resultType\":\"string\",\"result\":[4,"
               "\"a\\u003cb\"]}}");
}

Test(prom_api, parameter_errors_are_prometheus_texts)
{
    expect_get("/api/v1/query?query=1&time=abc", 400,
               BAD("invalid parameter \\\"time\\\": Invalid time value for 'time': cannot parse "
                   "\\\"abc\\\" to a valid timestamp"));
    expect_get("/api/v1/query?time=4", 400,
               BAD("invalid parameter \\\"query\\\": 1:1: parse error: no expression found in "
                   "input"));
    expect_get("/api/v1/query?query=(1%2B1&time=4", 400,
               BAD("invalid parameter \\\"query\\\": 1:5: parse error: unclosed left "
                   "parenthesis"));
    expect_get("/api/v1/query?query=%7Bjob%3D~%22.*%22%7D", 400,
               BAD("invalid parameter \\\"query\\\": 1:1: parse error: vector selector must "
                   "contain at least one non-empty matcher"));
    expect_get("/api/v1/query?query=1%3E1", 400,
               BAD("invalid parameter \\\"query\\\": 1:2: parse error: comparisons between "
                   "scalars must use BOOL modifier"));
    expect_get("/api/v1/query?query=1&timeout=abc", 400,
               BAD("invalid parameter \\\"timeout\\\": cannot parse \\\"abc\\\" to a valid "
                   "duration"));
    /* 2.42 gives the range query's parse error no parameter prefix */
    expect_get("/api/v1/query_range?query=(1%2B1&start=0&end=10&step=1", 400,
               BAD("1:5: parse error: unclosed left parenthesis"));
    expect_get("/api/v1/query_range?query=1&end=10&step=1", 400,
               BAD("invalid parameter \\\"start\\\": cannot parse \\\"\\\" to a valid "
                   "timestamp"));
    expect_get("/api/v1/query_range?query=1&start=0&end=x&step=1", 400,
               BAD("invalid parameter \\\"end\\\": cannot parse \\\"x\\\" to a valid "
                   "timestamp"));
    expect_get("/api/v1/query_range?query=1&start=10&end=9.999&step=1", 400,
               BAD("invalid parameter \\\"end\\\": end timestamp must not be before start "
                   "time"));
    expect_get("/api/v1/query_range?query=1&start=0&end=10", 400,
               BAD("invalid parameter \\\"step\\\": cannot parse \\\"\\\" to a valid "
                   "duration"));
    expect_get("/api/v1/query_range?query=1&start=0&end=10&step=1.5s", 400,
               BAD("invalid parameter \\\"step\\\": cannot parse \\\"1.5s\\\" to a valid "
                   "duration"));
    const char *zero = BAD("invalid parameter \\\"step\\\": zero or negative query resolution "
                           "step widths are not accepted. Try a positive integer");
    expect_get("/api/v1/query_range?query=1&start=0&end=10&step=0", 400, zero);
    expect_get("/api/v1/query_range?query=1&start=0&end=10&step=-15", 400, zero);
    expect_get("/api/v1/query_range?query=1&start=0&end=11001&step=1", 400,
               BAD("exceeded maximum resolution of 11,000 points per timeseries. Try "
                   "decreasing the query resolution (?step=XX)"));
    expect_get("/api/v1/query_range?query=up%5B5m%5D&start=0&end=10&step=1", 400,
               BAD("invalid expression type \\\"range vector\\\" for range query, must be "
                   "Scalar or instant Vector"));
    expect_get("/api/v1/query_range?query=%22s%22&start=0&end=10&step=1", 400,
               BAD("invalid expression type \\\"string\\\" for range query, must be Scalar or "
                   "instant Vector"));

    expect_get("/api/v1/series", 400, BAD("no match[] parameter provided"));
    expect_get("/api/v1/series?match%5B%5D=%7Ba%3D%22%22%7D", 400,
               BAD("invalid parameter \\\"match[]\\\": match[] must contain at least one "
                   "non-empty matcher"));
    expect_get("/api/v1/series?match%5B%5D=up&start=x", 400,
               BAD("invalid parameter \\\"start\\\": Invalid time value for 'start': cannot "
                   "parse \\\"x\\\" to a valid timestamp"));
    expect_get("/api/v1/labels?match%5B%5D=%7Ba%3D~%22.*%22%7D", 400,
               BAD("match[] must contain at least one non-empty matcher"));
    expect_get("/api/v1/label/bad-name/values", 400, BAD("invalid label name: \\\"bad-name\\\""));
    expect_get("/api/v1/metadata?limit=x", 400, BAD("limit must be a number"));
    expect_get("/api/v1/query_exemplars?query=up&start=10&end=9", 400,
               BAD("end timestamp must not be before start timestamp"));
    expect_get("/api/v1/query_exemplars?query=sum(up", 400,
               BAD("1:7: parse error: unclosed left parenthesis"));
}

Test(prom_api, limits_at_their_edges)
{
    char *body;
    /* floor((end - start) / step) <= 11000 passes: 11,001 points */
    cr_expect_eq(
        req("GET", "/api/v1/query_range?query=1&start=0&end=11000&step=1", NULL, &body, NULL, 0),
        200, "%s", body);
    free(body);
    cr_expect_eq(
        req("GET", "/api/v1/query_range?query=1&start=0&end=11000.9&step=1", NULL, &body, NULL, 0),
        200, "%s", body);
    free(body);
    /* end == start: one point */
    expect_get("/api/v1/query_range?query=3&start=60&end=60&step=15", 200,
               "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{"
               "\"metric\":{},\"values\":[[60,\"3\"]]}]}}");
    /* a timeout already over: Prometheus's 503 */
    expect_get("/api/v1/query?query=1&timeout=0s", 503,
               "{\"status\":\"error\",\"errorType\":\"timeout\",\"error\":\"query timed out in "
               "expression evaluation\"}");
}

Test(prom_api, form_post_answers_as_get)
{
    expect_post("/api/v1/query_range", "end=120&query=3&start=0&step=1m", 200,
                "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{"
                "\"metric\":{},\"values\":[[0,\"3\"],[60,\"3\"],[120,\"3\"]]}]}}");
    expect_get("/api/v1/query_range?end=120&query=3&start=0&step=1m", 200,
               "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{"
               "\"metric\":{},\"values\":[[0,\"3\"],[60,\"3\"],[120,\"3\"]]}]}}");
    expect_post("/api/v1/series", "start=0", 400, BAD("no match[] parameter provided"));
    expect_post("/api/v1/labels", "match%5B%5D=%7Ba%3D%22%22%7D", 400,
                BAD("match[] must contain at least one non-empty matcher"));
    expect_post("/api/v1/query", "query=1%3E1", 400,
                BAD("invalid parameter \\\"query\\\": 1:2: parse error: comparisons between "
                    "scalars must use BOOL modifier"));
    /* label values take POST too (2.42 answers 405; Grafana retries as GET) */
    expect_post("/api/v1/label/bad-name/values", "start=0", 400,
                BAD("invalid label name: \\\"bad-name\\\""));
    expect_post("/api/v1/label/nope/values", "start=0", 200,
                "{\"status\":\"success\",\"data\":[]}");
    expect_get("/api/v1/query_exemplars?query=nope_total", 200,
               "{\"status\":\"success\",\"data\":[]}");
    /* Go's ParseForm: a body value wins over the URL's, "+" is a space */
    expect_post("/api/v1/query?query=1&time=4", "query=2+%2B+5&time=5", 200,
                "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[5,"
                "\"7\"]}}");
    /* and the URL still answers what the body does not say */
    expect_post("/api/v1/query?time=6", "query=2", 200,
                "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[6,"
                "\"2\"]}}");
}

Test(prom_api, buildinfo_rules_and_unknown_paths)
{
    /* version 2.42.0: Grafana turns on what that version has; no "features" (that means Mimir) */
    expect_get("/api/v1/status/buildinfo", 200,
               "{\"status\":\"success\",\"data\":{\"version\":\"2.42.0\",\"revision\":\"miradb\","
               "\"branch\":\"main\",\"buildUser\":\"miradb\",\"buildDate\":\"\",\"goVersion\":"
               "\"\"}}");
    expect_get("/api/v1/rules", 200, "{\"status\":\"success\",\"data\":{\"groups\":[]}}");
    char *body;
    cr_expect_eq(req("GET", "/api/v1/label/job", NULL, &body, NULL, 0), 404);
    cr_expect_str_eq(body, "404 page not found\n");
    free(body);
    /* a query without selectors has no exemplars: 2.42 answers 204 */
    cr_expect_eq(req("GET", "/api/v1/query_exemplars?query=1", NULL, &body, NULL, 0), 204);
    cr_expect_str_eq(body, "");
    free(body);
}

Test(prom_api, queries_are_counted_on_metrics)
{
    char *body;
    cr_assert_eq(req("GET", "/api/v1/query?query=1&time=1", NULL, &body, NULL, 0), 200);
    free(body);
    cr_assert_eq(req("POST", "/api/v1/query", "query=2&time=1", &body, NULL, 0), 200);
    free(body);
    cr_assert_eq(
        req("GET", "/api/v1/query_range?query=(1&start=0&end=1&step=1", NULL, &body, NULL, 0), 400);
    free(body);
    cr_expect_eq(daemon_metric(&d, "miradb_queries_total{endpoint=\"prom_query\",outcome=\"ok\"}"),
                 2);
    cr_expect_eq(daemon_metric(&d, "miradb_queries_total{endpoint=\"prom_query_range\","
                                   "outcome=\"bad_request\"}"),
                 1);
    cr_expect_eq(daemon_metric(&d, "miradb_query_duration_seconds_count{endpoint=\"prom_query\"}"),
                 2);
    cr_expect_eq(daemon_metric(&d, "miradb_promql_series_selected_total"), 0);
}

/* ---- prom_e2e (needs query/pmsrc.c and query/pmeval.c) ---------------------------- */

#define T0 "1700000000"
#define NS(s) "\"" s "000000000\""

/*
 * One resource (job shop/cart, instance pod-1, k8s.cluster.name eu1), a
 * monotonic cumulative sum with an exemplar, a gauge in Cel and a
 * cumulative histogram, all at T0 + 0 / 15 / 30 / 60 s.
 */
static const char
    BATCH[] =
        "{\"resourceMetrics\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.namespace\",\"value\":{\"stringValue\":\"shop\"}},"
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"cart\"}},"
        "{\"key\":\"service.instance.id\",\"value\":{\"stringValue\":\"pod-1\"}},"
        "{\"key\":\"k8s.cluster.name\",\"value\":{\"stringValue\":\"eu1\"}}]},"
        "\"scopeMetrics\":[{\"scope\":{\"name\":\"s\",\"version\":\"1.0\"},\"metrics\":["
        "{\"name\":\"http.server.requests\",\"description\":\"Handled requests\",\"unit\":"
        "\"{request}\",\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,\"dataPoints\":["
        "{\"attributes\":[{\"key\":\"http.request.method\",\"value\":{\"stringValue\":\"GET\"}},"
        "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":200}}],"
        "\"startTimeUnixNano\":" NS("1699999990") ",\"timeUnixNano\":" NS(
            T0) ",\"asInt\":10},"
                "{\"attributes\":[{\"key\":\"http.request.method\",\"value\":{\"stringValue\":"
                "\"GET\"}},"
                "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":200}}],"
                "\"startTimeUnixNano\":" NS("1699999990") ",\"timeUnixNano\":" NS(
                    "1700000015") ",\"asInt\":25},"
                                  "{\"attributes\":[{\"key\":\"http.request.method\",\"value\":{"
                                  "\"stringValue\":\"GET\"}},"
                                  "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":"
                                  "200}}],"
                                  "\"startTimeUnixNano\":" NS("1699999990") ",\"timeUnixNano\":" NS(
                                      "1700000030") ",\"asInt\":40,"
                                                    "\"exemplars\":[{\"timeUnixNano\":"
                                                    "\"1700000029500000000\",\"asDouble\":1,"
                                                    "\"traceId\":"
                                                    "\"0102030405060708090a0b0c0d0e0f10\","
                                                    "\"spanId\":\"1112131415161718\"}]}]}},"
                                                    "{\"name\":\"temperature\",\"unit\":\"Cel\","
                                                    "\"gauge\":{\"dataPoints\":["
                                                    "{\"timeUnixNano\":" NS(
                                                        T0) ",\"asDouble\":20.5},"
                                                            "{\"timeUnixNano\":" NS(
                                                                "1700000060") ",\"asDouble\":22}]}}"
                                                                              ","
                                                                              "{\"name\":\"http."
                                                                              "server.request."
                                                                              "duration\","
                                                                              "\"description\":"
                                                                              "\"Latency\","
                                                                              "\"unit\":\"s\","
                                                                              "\"histogram\":{"
                                                                              "\"aggregationTempora"
                                                                              "lity\":2,"
                                                                              "\"dataPoints\":[{"
                                                                              "\"startTimeUnixNano"
                                                                              "\":" NS("1699999990") ",\"timeUnixNano\":" NS(
                                                                                  "1700000030") ","
                                                                                                "\""
                                                                                                "co"
                                                                                                "un"
                                                                                                "t"
                                                                                                "\""
                                                                                                ":1"
                                                                                                "0,"
                                                                                                "\""
                                                                                                "su"
                                                                                                "m"
                                                                                                "\""
                                                                                                ":4"
                                                                                                ".2"
                                                                                                ","
                                                                                                "\""
                                                                                                "bu"
                                                                                                "ck"
                                                                                                "et"
                                                                                                "Co"
                                                                                                "un"
                                                                                                "ts"
                                                                                                "\""
                                                                                                ":["
                                                                                                "3,"
                                                                                                "5,"
                                                                                                "1,"
                                                                                                "1]"
                                                                                                ","
                                                                                                "\""
                                                                                                "ex"
                                                                                                "pl"
                                                                                                "ic"
                                                                                                "it"
                                                                                                "Bo"
                                                                                                "un"
                                                                                                "ds"
                                                                                                "\""
                                                                                                ":["
                                                                                                "0."
                                                                                                "1,"
                                                                                                "0."
                                                                                                "5,"
                                                                                                "1]"
                                                                                                "}]"
                                                                                                "}}"
                                                                                                "]}"
                                                                                                "]}"
                                                                                                "]"
                                                                                                "}";

static void start_with_data(void)
{
    start();
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(
        httpc_request(d.http_port, "POST", "/v1/metrics", hdrs, BATCH, strlen(BATCH), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

TestSuite(prom_e2e, .init = start_with_data, .fini = stop, .timeout = 120);

#define OK(data) "{\"status\":\"success\",\"data\":" data "}"
#define REQ_LABELS                                                                                 \
    "\"http_request_method\":\"GET\",\"http_response_status_code\":\"200\",\"instance\":"          \
    "\"pod-1\",\"job\":\"shop/cart\""
#define COUNTER "{\"__name__\":\"http_server_requests_total\"," REQ_LABELS "}"

Test(prom_e2e, instant_and_range_queries)
{
    expect_get("/api/v1/query?query=http_server_requests_total&time=1700000040", 200,
               OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":" COUNTER
                  ",\"value\":[1700000040,\"40\"]}]}"));
    /* rate at T0+30 over [T0-30, T0+30]: samples 10, 25, 40; 2.42 clamps the start
     * to dZero = 30 * 10 / 30 = 10 s: 30 * (40 / 30) / 60 (PROMQL.md B.3) */
    expect_post("/api/v1/query",
                "query=rate%28http_server_requests_total%5B1m%5D%29&time=1700000030", 200,
                OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{" REQ_LABELS
                   "},\"value\":[1700000030,\"0.6666666666666666\"]}]}"));
    /* the gauge: lookback keeps 22 at T0+120 (60 s old) */
    expect_post("/api/v1/query_range",
                "end=1700000120&query=temperature_celsius&start=1700000000&step=60", 200,
                OK("{\"resultType\":\"matrix\",\"result\":[{\"metric\":{\"__name__\":"
                   "\"temperature_celsius\",\"instance\":\"pod-1\",\"job\":\"shop/cart\"},"
                   "\"values\":[[1700000000,\"20.5\"],[1700000060,\"22\"],[1700000120,\"22\"]]}"
                   "]}"));
    /* classic buckets 3, 8, 9, 10: rank 5 in le=0.5: 0.1 + 0.4 * (2 / 5) */
    expect_get("/api/v1/query?query=histogram_quantile(0.5%2C%20http_server_request_duration_"
               "seconds_bucket)&time=1700000030.5",
               200,
               OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"instance\":\"pod-1\","
                  "\"job\":\"shop/cart\"},\"value\":[1700000030.500,\"0.26\"]}]}"));
    /* a range vector at an instant: raw samples with their own times */
    expect_get("/api/v1/query?query=http_server_requests_total%5B20s%5D&time=1700000030", 200,
               OK("{\"resultType\":\"matrix\",\"result\":[{\"metric\":" COUNTER
                  ",\"values\":[[1700000015,\"25\"],[1700000030,\"40\"]]}]}"));
    /* Prometheus' execution error for a many-to-many match is a 422 */
    char *body;
    cr_expect_eq(req("GET",
                     "/api/v1/query?query=http_server_request_duration_seconds_bucket%20%2B%20on("
                     "job)%20http_server_request_duration_seconds_bucket&time=1700000030",
                     NULL, &body, NULL, 0),
                 422, "%s", body);
    cr_expect(strstr(body, "\"errorType\":\"execution\"") != NULL, "%s", body);
    free(body);
}

Test(prom_e2e, series_labels_and_values)
{
    expect_get("/api/v1/series?match%5B%5D=http_server_request_duration_seconds_count", 200,
               OK("[{\"__name__\":\"http_server_request_duration_seconds_count\",\"instance\":"
                  "\"pod-1\",\"job\":\"shop/cart\"}]"));
    /* two match[] OR-ed, each series once, sorted */
    expect_post("/api/v1/series",
                "match%5B%5D=temperature_celsius&match%5B%5D=%7Bjob%3D%22shop%2Fcart%22%2C__name_"
                "_%3D~%22temp.%2A%7Ctarget_info%22%7D",
                200,
                OK("[{\"__name__\":\"target_info\",\"instance\":\"pod-1\",\"job\":\"shop/cart\","
                   "\"k8s_cluster_name\":\"eu1\"},{\"__name__\":\"temperature_celsius\","
                   "\"instance\":\"pod-1\",\"job\":\"shop/cart\"}]"));
    expect_get("/api/v1/labels", 200,
               OK("[\"__name__\",\"http_request_method\",\"http_response_status_code\","
                  "\"instance\",\"job\",\"k8s_cluster_name\",\"le\"]"));
    expect_post("/api/v1/labels", "match%5B%5D=temperature_celsius", 200,
                OK("[\"__name__\",\"instance\",\"job\"]"));
    expect_get("/api/v1/label/__name__/values", 200,
               OK("[\"http_server_request_duration_seconds_bucket\","
                  "\"http_server_request_duration_seconds_count\","
                  "\"http_server_request_duration_seconds_sum\",\"http_server_requests_total\","
                  "\"target_info\",\"temperature_celsius\"]"));
    expect_get("/api/v1/label/le/values", 200, OK("[\"+Inf\",\"0.1\",\"0.5\",\"1\"]"));
    expect_get("/api/v1/label/job/values?match%5B%5D=temperature_celsius", 200,
               OK("[\"shop/cart\"]"));
    expect_get("/api/v1/label/nope/values", 200, OK("[]"));
    /* outside the time range: nothing */
    expect_get("/api/v1/label/job/values?start=1600000000&end=1600000100", 200, OK("[]"));
}

/* ---- the same data sealed: the label calls answer from the block's index ---- */

static void start_sealed(void)
{
    static const char *const args[] = {"--shards", "1", "--block-max-age", "1s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(
        httpc_request(d.http_port, "POST", "/v1/metrics", hdrs, BATCH, strlen(BATCH), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
    long long dl = tclock_ms() + 30000;
    while (daemon_metric(&d, "miradb_blocks{signal=\"metrics\"}") < 1 ||
           daemon_metric(&d, "miradb_open_block_rows{signal=\"metrics\"}") != 0) {
        cr_assert_lt(tclock_ms(), dl, "the metric block was not sealed in 30 s");
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

TestSuite(prom_sealed, .init = start_sealed, .fini = stop, .timeout = 120);

Test(prom_sealed, label_calls_answer_from_the_index_once_built)
{
    cr_expect_eq(daemon_metric(&d, "miradb_promql_label_index_bytes"), 0);
    for (int pass = 0; pass < 2; pass++) {
        double scanned = daemon_metric(&d, "miradb_promql_points_scanned_total");
        expect_get("/api/v1/labels", 200,
                   OK("[\"__name__\",\"http_request_method\",\"http_response_status_code\","
                      "\"instance\",\"job\",\"k8s_cluster_name\",\"le\"]"));
        expect_get("/api/v1/label/le/values", 200, OK("[\"+Inf\",\"0.1\",\"0.5\",\"1\"]"));
        expect_get("/api/v1/label/job/values?start=1600000000&end=1600000100", 200, OK("[]"));
        expect_get("/api/v1/series?match%5B%5D=http_server_request_duration_seconds_count", 200,
                   OK("[{\"__name__\":\"http_server_request_duration_seconds_count\","
                      "\"instance\":\"pod-1\",\"job\":\"shop/cart\"}]"));
        double now = daemon_metric(&d, "miradb_promql_points_scanned_total");
        if (pass == 0) {
            cr_expect_gt(now, scanned, "the first call builds the index from the rows");
            cr_expect_gt(daemon_metric(&d, "miradb_promql_label_index_bytes"), 0);
        } else {
            cr_expect_eq(now, scanned, "no point read once the index is built");
        }
    }
}

Test(prom_e2e, metadata_and_exemplars)
{
    expect_get("/api/v1/metadata?metric=http_server_requests_total", 200,
               OK("{\"http_server_requests_total\":[{\"type\":\"counter\",\"help\":\"Handled "
                  "requests\",\"unit\":\"\"}]}"));
    expect_get("/api/v1/metadata?metric=http_server_request_duration_seconds", 200,
               OK("{\"http_server_request_duration_seconds\":[{\"type\":\"histogram\",\"help\":"
                  "\"Latency\",\"unit\":\"seconds\"}]}"));
    expect_get("/api/v1/metadata?metric=temperature_celsius&limit=5", 200,
               OK("{\"temperature_celsius\":[{\"type\":\"gauge\",\"help\":\"\",\"unit\":"
                  "\"celsius\"}]}"));
    expect_get("/api/v1/metadata?metric=nope", 200, OK("{}"));
    expect_get("/api/v1/metadata?limit=0", 200, OK("{}"));
    expect_post("/api/v1/query_exemplars",
                "end=1700000060&query=http_server_requests_total&start=1700000000", 200,
                OK("[{\"seriesLabels\":" COUNTER ",\"exemplars\":[{\"labels\":{\"span_id\":"
                   "\"1112131415161718\",\"trace_id\":\"0102030405060708090a0b0c0d0e0f10\"},"
                   "\"value\":\"1\",\"timestamp\":1700000029.500}]}]"));
    /* Grafana's init probe: ms read as seconds, nothing there */
    expect_get("/api/v1/query_exemplars?query=test&start=1700000000000&end=1700000060000", 200,
               OK("[]"));
}
