/*
 * tqmx_test.c - TraceQL metrics over HTTP against the real daemon: spans
 * the test exports itself, then /api/metrics/query_range and
 * /api/metrics/query with exact expected series (rate by service, errors,
 * count_over_time, quantile_over_time, histogram_over_time buckets,
 * compare(), topk, arithmetic, exemplar trace ids, whole-trace inputs, an
 * instant query) and 400s with a message for bad input.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

#define T0 "17000000"
/* T0 = 1700000000 s. Spans (service, start - T0, duration, status):
 *   trace 1: api s1 +1s 100ms ok (root) -> db s4 +3s 50ms error
 *   trace 2: api s2 +2s 300ms error (root)
 *   trace 3: api s3 +12s 500ms ok (root)
 *   trace 4: db s5 +25s 1s ok (root)
 *   trace 5: web s6 +5s 200ms unset (root) */
#define SPAN(tid, sid, parent, name, start, end, code)                                             \
    "{\"traceId\":\"000000000000000000000000000000" tid "\",\"spanId\":\"00000000000000" sid       \
    "\"," parent "\"name\":\"" name "\",\"kind\":2,\"startTimeUnixNano\":\"" start                 \
    "\",\"endTimeUnixNano\":\"" end "\",\"status\":{\"code\":" code "}}"
#define RES(svc, spans)                                                                            \
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"" svc   \
    "\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":[" spans "]}]}"

static const char CORPUS[] = "{\"resourceSpans\":[" RES(
    "api",
    SPAN("01", "a1", "", "GET /users", "1700000001000000000", "1700000001100000000", "1") "," SPAN(
        "02", "b1", "", "GET /users", "1700000002000000000", "1700000002300000000",
        "2") "," SPAN("03", "c1", "", "POST /orders", "1700000012000000000", "1700000012500000000",
                      "1")) "," RES("db",
                                    SPAN("01", "a2",
                                         "\"parentSpanId\":"
                                         "\"00000000000000a1\",",
                                         "SELECT", "1700000003000000000", "1700000003050000000",
                                         "2") "," SPAN("04", "d1", "", "SELECT",
                                                       "1700000025000000"
                                                       "000",
                                                       "1700000026000000"
                                                       "000",
                                                       "1")) "," RES("w"
                                                                     "e"
                                                                     "b",
                                                                     SPAN("05", "e1", "", "GET /",
                                                                          "1700000005000000000",
                                                                          "1700000005200000000",
                                                                          "0")) "]}";

static void post_corpus(const struct daemon *d)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(
        httpc_request(d->http_port, "POST", "/v1/traces", hdrs, CORPUS, strlen(CORPUS), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* GET /api/metrics/<ep>?q=<q>&<extra>: status and body (owned). */
static int get(const struct daemon *d, const char *ep, const char *q, const char *extra,
               char **body)
{
    char enc[2048], path[3000];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/api/metrics/%s?q=%s&%s", ep, enc, extra);
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    *body = malloc(r.body_len + 1);
    memcpy(*body, r.body ? r.body : (uint8_t *)"", r.body_len);
    (*body)[r.body_len] = 0;
    int st = r.status;
    http_resp_free(&r);
    return st;
}

static void append(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, cap - n, fmt, ap);
    va_end(ap);
}

/* "promLabels t:v t:v\n" per series, times as seconds - T0. */
static void range_str(const struct daemon *d, const char *q, const char *extra, char *out,
                      size_t cap)
{
    char *body;
    int st = get(d, "query_range", q, extra, &body);
    cr_assert_eq(st, 200, "%s: %d %s", q, st, body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "%s: not JSON: %s", q, body);
    cr_assert(json_is_object(json_object_get(j, "metrics")), "%s: metrics", q);
    out[0] = 0;
    size_t i, k;
    json_t *s, *p;
    json_array_foreach(json_object_get(j, "series"), i, s)
    {
        cr_assert(json_is_array(json_object_get(s, "labels")));
        append(out, cap, "%s", json_string_value(json_object_get(s, "promLabels")));
        json_array_foreach(json_object_get(s, "samples"), k, p)
        {
            long long ms = atoll(json_string_value(json_object_get(p, "timestampMs")));
            append(out, cap, " %lld:%g", ms / 1000 - 1700000000,
                   json_number_value(json_object_get(p, "value")));
        }
        append(out, cap, "\n");
    }
    json_decref(j);
    free(body);
}

static void expect_range(const struct daemon *d, const char *q, const char *want)
{
    char got[8192];
    range_str(d, q, "start=1700000000&end=1700000060&step=10s", got, sizeof(got));
    cr_expect_str_eq(got, want, "%s:\n%s", q, got);
}

static void expect_400(const struct daemon *d, const char *ep, const char *q, const char *extra,
                       const char *frag)
{
    char *body;
    int st = get(d, ep, q, extra, &body);
    cr_expect_eq(st, 400, "%s %s: %d %s", q, extra, st, body);
    cr_expect(strstr(body, frag) != NULL, "%s %s: \"%s\" lacks \"%s\"", q, extra, body, frag);
    free(body);
}

Test(tqmx, range_queries_give_exact_series)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    post_corpus(&d);
    /* buckets (T0-10, T0], (T0, T0+10], ... (T0+50, T0+60]: 7 samples stamped on the right edge */
    expect_range(&d, "{} | rate() by (resource.service.name)",
                 "{resource.service.name=\"api\"} 0:0 10:0.2 20:0.1 30:0 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 0:0 10:0.1 20:0 30:0.1 40:0 50:0 60:0\n"
                 "{resource.service.name=\"web\"} 0:0 10:0.1 20:0 30:0 40:0 50:0 60:0\n");
    expect_range(&d, "{ status = error } | rate() by (resource.service.name)",
                 "{resource.service.name=\"api\"} 0:0 10:0.1 20:0 30:0 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 0:0 10:0.1 20:0 30:0 40:0 50:0 60:0\n");
    expect_range(&d, "{} | count_over_time()",
                 "{__name__=\"count_over_time\"} 0:0 10:4 20:1 30:1 40:0 50:0 60:0\n");
    expect_range(&d, "{} | quantile_over_time(duration, .5, 1) by (resource.service.name)",
                 "{p=\"0.5\", resource.service.name=\"api\"} 10:0.2 20:0.5\n"
                 "{p=\"0.5\", resource.service.name=\"db\"} 10:0.05 30:1\n"
                 "{p=\"0.5\", resource.service.name=\"web\"} 10:0.2\n"
                 "{p=\"1\", resource.service.name=\"api\"} 10:0.3 20:0.5\n"
                 "{p=\"1\", resource.service.name=\"db\"} 10:0.05 30:1\n"
                 "{p=\"1\", resource.service.name=\"web\"} 10:0.2\n");
    /* power-of-two buckets of the duration in ns, labelled in seconds */
    expect_range(&d, "{ resource.service.name = \"api\" } | histogram_over_time(duration)",
                 "{__bucket=\"0.134217728\"} 0:0 10:1 20:0 30:0 40:0 50:0 60:0\n"
                 "{__bucket=\"0.536870912\"} 0:0 10:1 20:1 30:0 40:0 50:0 60:0\n");
    expect_range(&d, "{} | max_over_time(duration) by (name)",
                 "{name=\"GET /\"} 10:0.2\n"
                 "{name=\"GET /users\"} 10:0.3\n"
                 "{name=\"POST /orders\"} 20:0.5\n"
                 "{name=\"SELECT\"} 10:0.05 30:1\n");
    expect_range(&d, "{} | rate() by (resource.service.name) | topk(1)",
                 "{resource.service.name=\"api\"} 0:0 10:0.2 20:0.1 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 30:0.1\n");
    expect_range(&d, "{} | count_over_time() by (resource.service.name) > 1",
                 "{resource.service.name=\"api\"} 10:2\n");
    expect_range(&d, "({} | rate()) * 100", "{} 0:0 10:40 20:10 30:10 40:0 50:0 60:0\n");
    expect_range(&d, "100 - ({} | count_over_time())",
                 "{} 0:100 10:96 20:99 30:99 40:100 50:100 60:100\n");
    /* 0/0 has no sample */
    expect_range(&d, "({ status = error } | count_over_time()) / ({} | count_over_time())",
                 "{} 10:0.5 20:0 30:0\n");
    /* one side without labels applies to every series of the other */
    expect_range(&d,
                 "({} | count_over_time() by (resource.service.name)) / ({} | count_over_time())",
                 "{resource.service.name=\"api\"} 10:0.5 20:1 30:0\n"
                 "{resource.service.name=\"db\"} 10:0.25 20:0 30:1\n"
                 "{resource.service.name=\"web\"} 10:0.25 20:0 30:0\n");
    /* whole traces: a structural operator, a trace-level intrinsic in by() */
    expect_range(&d,
                 "{ resource.service.name = \"api\" } > { resource.service.name = \"db\" } | "
                 "count_over_time()",
                 "{__name__=\"count_over_time\"} 0:0 10:1 20:0 30:0 40:0 50:0 60:0\n");
    expect_range(&d, "{ rootServiceName = \"api\" } | count_over_time() by (resource.service.name)",
                 "{resource.service.name=\"api\"} 0:0 10:2 20:1 30:0 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 0:0 10:1 20:0 30:0 40:0 50:0 60:0\n");
    /* with(sample=...) is accepted; the answer stays exact */
    expect_range(&d, "{} | count_over_time() with(sample=0.1)",
                 "{__name__=\"count_over_time\"} 0:0 10:4 20:1 30:1 40:0 50:0 60:0\n");
    /* compare(): selection and baseline per attribute value, and totals */
    char got[8192];
    range_str(&d, "{} | compare({ status = error })", "start=1700000000&end=1700000060&step=10s",
              got, sizeof(got));
    cr_expect(strstr(got,
                     "{__meta_type=\"selection\", resource.service.name=\"api\"} 0:0 10:1 20:0 "
                     "30:0 40:0 50:0 60:0\n") != NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"baseline\", resource.service.name=\"api\"} 0:0 10:1 20:1 "
                          "30:0 40:0 50:0 60:0\n") != NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"baseline_total\", resource.service.name=\"<nil>\"} 0:0 "
                          "10:2 20:1 30:1 40:0 50:0 60:0\n") != NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"selection\", status=\"error\"} 0:0 10:2 20:0 30:0 40:0 "
                          "50:0 60:0\n") != NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"baseline\", resource.service.name=\"web\"}") != NULL,
              "%s", got);
    /* topN = 1: the most frequent value per attribute and side; totals keep every span */
    range_str(&d, "{} | compare({ status = error }, 1)", "start=1700000000&end=1700000060&step=10s",
              got, sizeof(got));
    cr_expect(strstr(got, "{__meta_type=\"baseline\", resource.service.name=\"api\"}") != NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"baseline\", resource.service.name=\"web\"}") == NULL,
              "%s", got);
    cr_expect(strstr(got, "{__meta_type=\"baseline_total\", resource.service.name=\"<nil>\"} 0:0 "
                          "10:2 20:1 30:1 40:0 50:0 60:0\n") != NULL,
              "%s", got);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tqmx, exemplars_instant_and_errors)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    post_corpus(&d);
    char *body;
    int st = get(&d, "query_range", "{ status = error } | rate()",
                 "start=1700000000&end=1700000060&step=10s&exemplars=5", &body);
    cr_assert_eq(st, 200, "%s", body);
    json_t *j = json_loads(body, 0, NULL);
    cr_assert_not_null(j, "%s", body);
    json_t *s = json_array_get(json_object_get(j, "series"), 0);
    json_t *lb = json_array_get(json_object_get(s, "labels"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(lb, "key")), "__name__");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(lb, "value"), "stringValue")), "rate");
    json_t *ex = json_object_get(s, "exemplars");
    cr_assert_eq(json_array_size(ex), 2, "%s", body);
    const char *want_tid[] = {"00000000000000000000000000000002",
                              "00000000000000000000000000000001"};
    const char *want_sid[] = {"00000000000000b1", "00000000000000a2"};
    const char *want_ts[] = {"1700000002000", "1700000003000"};
    const double want_v[] = {0.3, 0.05};
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(ex, i);
        json_t *el = json_object_get(e, "labels");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(el, 0), "key")),
                         "trace:id");
        cr_expect_str_eq(json_string_value(json_object_get(
                             json_object_get(json_array_get(el, 0), "value"), "stringValue")),
                         want_tid[i]);
        cr_expect_str_eq(json_string_value(json_object_get(
                             json_object_get(json_array_get(el, 1), "value"), "stringValue")),
                         want_sid[i]);
        cr_expect_str_eq(json_string_value(json_object_get(e, "timestampMs")), want_ts[i]);
        cr_expect_float_eq(json_number_value(json_object_get(e, "value")), want_v[i], 1e-9);
    }
    json_decref(j);
    free(body);

    /* the limit is per query; a with(exemplars=...) hint wins; none given: up to 100 */
    static const struct {
        const char *q, *extra;
        size_t n;
    } lim[] = {
        {"{ status = error } | rate() by (resource.service.name)", "exemplars=1", 1},
        {"{ status = error } | rate() by (resource.service.name)", "", 2},
        {"{ status = error } | rate() with(exemplars=false)", "exemplars=5", 0},
        {"{} | rate() with(exemplars=3)", "", 3},
        /* a metric filter keeps the exemplars whose value passes: 0.3, 0.5 and 1 s */
        {"{} | max_over_time(duration) by (name) > 0.25", "", 3},
    };
    for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
        char extra[128];
        snprintf(extra, sizeof(extra), "start=1700000000&end=1700000060&step=10s&%s", lim[i].extra);
        st = get(&d, "query_range", lim[i].q, extra, &body);
        cr_assert_eq(st, 200, "%s", body);
        j = json_loads(body, 0, NULL);
        size_t n = 0, k;
        json_t *se;
        json_array_foreach(json_object_get(j, "series"), k, se)
        {
            n += json_array_size(json_object_get(se, "exemplars"));
        }
        cr_expect_eq(n, lim[i].n, "%s %s: %zu exemplars: %s", lim[i].q, lim[i].extra, n, body);
        json_decref(j);
        free(body);
    }

    /* nothing matches: no series */
    st =
        get(&d, "query_range", "{ name = \"nope\" } | quantile_over_time(duration, .9) by (span.x)",
            "start=1700000000&end=1700000060&step=10s", &body);
    cr_expect_eq(st, 200, "%s", body);
    cr_expect_eq(strncmp(body, "{\"series\":[],\"metrics\":{", 24), 0, "%s", body);
    free(body);

    /* instant: one value over (start, end] */
    st = get(&d, "query", "{} | count_over_time() by (resource.service.name)",
             "start=1700000000&end=1700000060", &body);
    cr_assert_eq(st, 200, "%s", body);
    static const char want[] =
        "{\"series\":["
        "{\"labels\":[{\"key\":\"resource.service.name\",\"value\":{\"stringValue\":\"api\"}}],"
        "\"value\":3},"
        "{\"labels\":[{\"key\":\"resource.service.name\",\"value\":{\"stringValue\":\"db\"}}],"
        "\"value\":2},"
        "{\"labels\":[{\"key\":\"resource.service.name\",\"value\":{\"stringValue\":\"web\"}}],"
        "\"value\":1}],"
        "\"metrics\":{\"inspectedTraces\":0,\"inspectedBytes\":\"0\",\"inspectedSpans\":\"6\","
        "\"totalBlocks\":"; /* one open block per shard */
    cr_expect_eq(strncmp(body, want, strlen(want)), 0, "%s", body);
    free(body);
    st = get(&d, "query", "{} | rate()", "start=1700000000&end=1700000060", &body);
    cr_assert_eq(st, 200, "%s", body);
    cr_expect(strstr(body, "\"value\":0.1}") != NULL, "%s", body); /* 6 spans / 60 s */
    free(body);

    expect_400(&d, "query_range", "{} | rate() + 5", "start=1700000000&end=1700000060",
               "invalid TraceQL query: parse error at line 1, col 13: metrics arithmetic needs");
    expect_400(&d, "query_range", "{ .a = 1 }", "start=1700000000&end=1700000060",
               "a metrics function such as rate()");
    expect_400(&d, "query_range", "", "start=1700000000&end=1700000060",
               "a metrics query is required");
    expect_400(&d, "query_range", "{} | rate()", "start=1700000060&end=1700000000",
               "end must be after start");
    expect_400(&d, "query_range", "{} | rate()", "start=1700000000&end=1700000060&step=abc",
               "invalid step");
    expect_400(&d, "query_range", "{} | rate()", "start=1700000000&end=1800000000&step=1s",
               "more than 11000 points");
    expect_400(&d, "query", "{} | rate()", "start=yesterday", "could not parse 'start'");
    /* the series limit: the first series found, PARTIAL, in Tempo's words */
    st = get(&d, "query_range", "{} | count_over_time() by (name)",
             "start=1700000000&end=1700000060&maxSeries=2", &body);
    cr_expect_eq(st, 200, "%s", body);
    j = json_loads(body, 0, NULL);
    cr_assert_not_null(j, "%s", body);
    cr_expect_eq(json_array_size(json_object_get(j, "series")), 2, "%s", body);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "PARTIAL");
    cr_expect_str_eq(json_string_value(json_object_get(j, "message")),
                     "Response exceeds maximum series limit of 2, a partial response is returned. "
                     "Warning: the accuracy of each individual value is not guaranteed.");
    json_decref(j);
    free(body);
    /* quantiles give several series per group: the answer is cut at the limit too */
    st = get(&d, "query_range", "{} | quantile_over_time(duration, .5, .9)",
             "start=1700000000&end=1700000060&maxSeries=1", &body);
    cr_expect_eq(st, 200, "%s", body);
    j = json_loads(body, 0, NULL);
    cr_expect_eq(json_array_size(json_object_get(j, "series")), 1, "%s", body);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "PARTIAL");
    json_decref(j);
    free(body);
    /* compare() keeps topN per attribute: its tables do not count against the limit */
    st = get(&d, "query_range", "{} | compare({ status = error }, 1)",
             "start=1700000000&end=1700000060&maxSeries=2", &body);
    cr_expect_eq(st, 200, "%s", body);
    free(body);
    /* the daemon still answers */
    st = get(&d, "query", "{} | rate()", "start=1700000000&end=1700000060", &body);
    cr_expect_eq(st, 200, "%s", body);
    free(body);
    /* /metrics counts them under their own endpoint */
    cr_expect_eq(
        daemon_metric(&d, "miradb_queries_total{endpoint=\"tempo_metrics\",outcome=\"ok\"}"), 13);
    cr_expect_eq(
        daemon_metric(&d,
                      "miradb_queries_total{endpoint=\"tempo_metrics\",outcome=\"bad_request\"}"),
        7);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tqmx, query_limits_end_a_metrics_query_clearly)
{
    struct daemon d;
    const char *args[] = {"--query-max-rows", "3", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    post_corpus(&d);
    char *body;
    /* span by span and over whole traces: 6 spans scanned, 3 allowed */
    static const char *const qs[] = {
        "{} | rate() by (resource.service.name)",
        "{ rootServiceName = \"api\" } | count_over_time()",
    };
    for (size_t i = 0; i < 2; i++) {
        int st = get(&d, "query_range", qs[i], "start=1700000000&end=1700000060&step=10s", &body);
        cr_expect_eq(st, 422, "%s: %d %s", qs[i], st, body);
        cr_expect_str_eq(body, "query scanned more rows than --query-max-rows allows", "%s", qs[i]);
        free(body);
    }
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tqmx, query_memory_limit_ends_a_metrics_query_clearly)
{
    struct daemon d;
    const char *args[] = {"--query-memory", "1MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    post_corpus(&d);
    char *body;
    /* 10,000 steps x 40 series (4 names x 10 quantiles): several MiB */
    static const char q[] =
        "{} | quantile_over_time(duration, .1, .2, .3, .4, .5, .6, .7, .8, .9, 1) "
        "by (name)";
    int st = get(&d, "query_range", q, "start=1700000000&end=1700000060&step=0.006", &body);
    cr_expect_eq(st, 422, "%d %s", st, body);
    cr_expect_str_eq(body, "the metrics query needs more memory than allowed");
    free(body);
    /* a small answer still fits */
    st = get(&d, "query_range", q, "start=1700000000&end=1700000060&step=10s", &body);
    cr_expect_eq(st, 200, "%d %s", st, body);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Polls until every span sits in a sealed block (deadline 30 s). */
static void wait_sealed(const struct daemon *d)
{
    for (int i = 0; i < 3000; i++) {
        if (daemon_metric(d, "miradb_open_block_rows{signal=\"traces\"}") == 0 &&
            daemon_metric(d, "miradb_blocks{signal=\"traces\"}") >= 1) {
            return;
        }
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_fail("the spans were never sealed");
}

Test(tqmx, sealed_blocks_answer_the_same)
{
    struct daemon d;
    const char *args[] = {"--block-max-age", "1s", "--shards", "1", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    post_corpus(&d);
    wait_sealed(&d);
    expect_range(&d, "{} | rate() by (resource.service.name)",
                 "{resource.service.name=\"api\"} 0:0 10:0.2 20:0.1 30:0 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 0:0 10:0.1 20:0 30:0.1 40:0 50:0 60:0\n"
                 "{resource.service.name=\"web\"} 0:0 10:0.1 20:0 30:0 40:0 50:0 60:0\n");
    /* the resource dictionary skips the block: no series */
    expect_range(&d, "{ resource.service.name = \"nope\" } | rate()", "");
    /* whole traces gathered through the trace-id bloom */
    expect_range(&d,
                 "{ resource.service.name = \"api\" } > { resource.service.name = \"db\" } | "
                 "count_over_time()",
                 "{__name__=\"count_over_time\"} 0:0 10:1 20:0 30:0 40:0 50:0 60:0\n");
    expect_range(&d, "{ rootServiceName = \"api\" } | count_over_time() by (resource.service.name)",
                 "{resource.service.name=\"api\"} 0:0 10:2 20:1 30:0 40:0 50:0 60:0\n"
                 "{resource.service.name=\"db\"} 0:0 10:1 20:0 30:0 40:0 50:0 60:0\n");
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tqmx, long_label_values_make_their_series)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    static char big[3001], json[4096];
    memset(big, 'q', 3000);
    snprintf(json, sizeof(json),
             "{\"resourceSpans\":[{\"resource\":{},\"scopeSpans\":[{\"spans\":[{\"traceId\":"
             "\"000000000000000000000000000000aa\",\"spanId\":\"00000000000000aa\",\"name\":\"x\","
             "\"startTimeUnixNano\":\"1700000001000000000\",\"endTimeUnixNano\":"
             "\"1700000001000000001\",\"attributes\":[{\"key\":\"big\",\"value\":{"
             "\"stringValue\":\"%s\"}}]}]}]}]}",
             big);
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/traces", hdrs, json, strlen(json), 0, &r),
                 0);
    cr_assert_eq(r.status, 200);
    http_resp_free(&r);
    char *body;
    int st = get(&d, "query", "{} | count_over_time() by (span.big)",
                 "start=1700000000&end=1700000060", &body);
    cr_assert_eq(st, 200, "%s", body);
    json_t *j = json_loads(body, 0, NULL);
    json_t *s = json_array_get(json_object_get(j, "series"), 0);
    json_t *v = json_object_get(json_array_get(json_object_get(s, "labels"), 0), "value");
    cr_expect_str_eq(json_string_value(json_object_get(v, "stringValue")), big);
    cr_expect_float_eq(json_number_value(json_object_get(s, "value")), 1.0, 1e-12);
    json_decref(j);
    free(body);
    cr_expect_eq(daemon_stop(&d), 0);
}
