/*
 * qmem_test.c - query memory against the budget (issue 13), on the real
 * daemon: --query-memory's default follows --memory-budget (a quarter), a
 * PromQL range query and a TraceQL metrics query that need more than that
 * fail with their APIs' memory-limit answers (422, exact bodies), and the
 * daemon goes on serving and ingesting: a follow-up query answers exactly,
 * a new export is queryable, and the query memory gauge is back to 0.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

#define T0 1700000000LL
#define N_SERIES 1000

/* One OTLP/JSON gauge export: |n| series of |name| (attribute id=i), value
 * i at T0 + |at| s. Returned owned. */
static char *gauges(const char *name, int n, int at)
{
    size_t cap = (size_t)n * 160 + 512, o = 0;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    o += (size_t)snprintf(b + o, cap - o,
                          "{\"resourceMetrics\":[{\"resource\":{\"attributes\":[{\"key\":\"service."
                          "name\",\"value\":{\"stringValue\":\"svc\"}}]},\"scopeMetrics\":[{"
                          "\"metrics\":[{\"name\":\"%s\",\"gauge\":{\"dataPoints\":[",
                          name);
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(b + o, cap - o,
                              "%s{\"attributes\":[{\"key\":\"id\",\"value\":{\"stringValue\":"
                              "\"%d\"}}],\"timeUnixNano\":\"%lld000000000\",\"asInt\":\"%d\"}",
                              i ? "," : "", i, T0 + at, i);
    }
    snprintf(b + o, cap - o, "]}}]}]}]}");
    return b;
}

static void post(const struct daemon *d, const char *path, const char *body)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", path, hdrs, body, strlen(body), 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* GET |path|: the status, and the body (owned). */
static int get(const struct daemon *d, const char *path, char **body)
{
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0, "GET %s", path);
    *body = strndup(r.body ? (char *)r.body : "", r.body_len);
    int st = r.status;
    http_resp_free(&r);
    return st;
}

static void expect(const struct daemon *d, const char *path, int status, const char *want)
{
    char *body;
    int st = get(d, path, &body);
    cr_expect_eq(st, status, "GET %s: %d %s", path, st, body);
    cr_expect_str_eq(body, want, "GET %s: %s", path, body);
    free(body);
}

#define PROM_OK(data) "{\"status\":\"success\",\"data\":" data "}"

/* 1000 series, each with a point on every 0.1 s step for the 5 minutes of
 * lookback: 3,001 points of 16 bytes a series, 48 MB of matrix, far past
 * the 16 MiB that a 64 MiB budget gives one query. */
#define BIG_RANGE "/api/v1/query_range?query=load&start=1700000000&end=1700001000&step=0.1"

Test(qmem, a_promql_query_past_the_budgets_share_fails_and_the_daemon_goes_on, .timeout = 120)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "64MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char *b = gauges("load", N_SERIES, 0);
    post(&d, "/v1/metrics", b);
    free(b);

    expect(&d, BIG_RANGE, 422,
           "{\"status\":\"error\",\"errorType\":\"execution\",\"error\":\"the query needs more "
           "than 16777216 bytes of memory (--query-memory); narrow the time range or the "
           "selector\"}");
    cr_expect_eq(daemon_metric(&d, "miradb_queries_total{endpoint=\"prom_query_range\","
                                   "outcome=\"limit\"}"),
                 1);
    /* nothing of it is held any more */
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 0);

    /* the same series, answered small */
    expect(&d, "/api/v1/query?query=count(load)&time=1700000010", 200,
           PROM_OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1700000010,"
                   "\"1000\"]}]}"));
    expect(&d, "/api/v1/query?query=sum(load)&time=1700000010", 200,
           PROM_OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1700000010,"
                   "\"499500\"]}]}"));
    /* and ingest goes on */
    b = gauges("after", 2, 20);
    post(&d, "/v1/metrics", b);
    free(b);
    expect(&d, "/api/v1/query?query=sum(after)&time=1700000030", 200,
           PROM_OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":[1700000030,"
                   "\"1\"]}]}"));
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 0);
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(qmem, an_explicit_query_memory_overrides_the_budgets_share, .timeout = 120)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "64MiB", "--query-memory", "512MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char *b = gauges("load", N_SERIES, 0);
    post(&d, "/v1/metrics", b);
    free(b);
    /* the same selection as above, not rendered whole: a count per step */
    expect(&d, "/api/v1/query_range?query=count(load)&start=1700000000&end=1700000400&step=100",
           200,
           PROM_OK("{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},\"values\":[["
                   "1700000000,\"1000\"],[1700000100,\"1000\"],[1700000200,\"1000\"],["
                   "1700000300,\"1000\"]]}]}"));
    char *body;
    int st = get(&d, BIG_RANGE, &body);
    cr_expect_eq(st, 200, "%d %.300s", st, body);
    free(body);
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 0);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* |n| one-span traces named n<i>, one a second from T0 + 1 s (60 s
 * apart at most), in one OTLP/JSON export. Returned owned. */
static char *spans(int n)
{
    size_t cap = (size_t)n * 220 + 512, o = 0;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    o += (size_t)snprintf(b + o, cap - o,
                          "{\"resourceSpans\":[{\"resource\":{},\"scopeSpans\":[{\"spans\":[");
    for (int i = 0; i < n; i++) {
        long long s = (T0 + 1 + i % 59) * 1000000000LL;
        o +=
            (size_t)snprintf(b + o, cap - o,
                             "%s{\"traceId\":\"%032x\",\"spanId\":\"0000000000000001\",\"name\":"
                             "\"n%d\",\"startTimeUnixNano\":\"%lld\",\"endTimeUnixNano\":\"%lld\"}",
                             i ? "," : "", i + 1, i, s, s + 1000000);
    }
    snprintf(b + o, cap - o, "]}]}]}");
    return b;
}

Test(qmem, a_traceql_metrics_query_past_the_budgets_share_fails_and_the_daemon_goes_on,
     .timeout = 120)
{
    struct daemon d;
    const char *args[] = {"--memory-budget", "64MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char *b = spans(500);
    post(&d, "/v1/traces", b);
    free(b);
    /* 500 series (one a name) over 10,000 steps: 40 MB of counts */
    expect(&d,
           "/api/metrics/query_range?q=%7B%7D%20%7C%20count_over_time()%20by%20(name)&start="
           "1700000000&end=1700000060&step=0.006",
           422, "the metrics query needs more memory than allowed");
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 0);
    char *body;
    int st = get(&d,
                 "/api/metrics/query_range?q=%7B%7D%20%7C%20count_over_time()&start=1700000000&"
                 "end=1700000060&step=60",
                 &body);
    cr_expect_eq(st, 200, "%d %s", st, body);
    /* buckets end on multiples of the step: (T0-20, T0+40] holds the
     * spans at T0+1 .. T0+40 (i % 59 < 40: 8 x 40 + 28), the next the
     * other 152 */
    cr_expect(strstr(body, "\"promLabels\":\"{__name__=\\\"count_over_time\\\"}\",\"samples\":[{"
                           "\"timestampMs\":\"1699999980000\",\"value\":0},{\"timestampMs\":"
                           "\"1700000040000\",\"value\":348},{\"timestampMs\":\"1700000100000\","
                           "\"value\":152}]") != NULL,
              "%s", body);
    cr_expect(strstr(body, "\"inspectedSpans\":\"500\"") != NULL, "%s", body);
    free(body);
    /* and ingest goes on: one more span, counted */
    b = spans(1);
    post(&d, "/v1/traces", b);
    free(b);
    st = get(&d,
             "/api/metrics/query_range?q=%7B%7D%20%7C%20count_over_time()&start=1700000000&"
             "end=1700000060&step=60",
             &body);
    cr_expect_eq(st, 200, "%d %s", st, body);
    cr_expect(strstr(body, "\"value\":349},") != NULL, "%s", body);
    free(body);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* A label index build that needs more than the query has left is dropped
 * and the block read without one: the query answers, and later queries
 * do not try the build again (the rows they read are the block's own). */
Test(qmem, an_index_build_past_the_querys_room_is_dropped_and_the_query_answers, .timeout = 120)
{
    struct daemon d;
    const char *args[] = {"--shards", "1", "--block-max-age", "1s", "--query-memory", "3MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char *b = gauges("load", N_SERIES, 0);
    post(&d, "/v1/metrics", b);
    free(b);
    /* in the same block, series the query does not select but the index
     * build must: its scratch is several times the query's */
    b = gauges("other", 6 * N_SERIES, 0);
    post(&d, "/v1/metrics", b);
    free(b);
    for (int i = 0; daemon_metric(&d, "miradb_blocks{signal=\"metrics\"}") < 1 ||
                    daemon_metric(&d, "miradb_open_block_rows{signal=\"metrics\"}") != 0;
         i++) {
        cr_assert_lt(i, 1500, "the metric block was not sealed in 30 s");
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
    for (int pass = 0; pass < 3; pass++) {
        double before = daemon_metric(&d, "miradb_promql_points_scanned_total");
        expect(&d, "/api/v1/query?query=count(load)&time=1700000010", 200,
               PROM_OK("{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"value\":["
                       "1700000010,\"1000\"]}]}"));
        double read = daemon_metric(&d, "miradb_promql_points_scanned_total") - before;
        cr_expect_eq(daemon_metric(&d, "miradb_promql_label_index_bytes"), 0, "pass %d", pass);
        if (pass > 0) {
            cr_expect_eq(read, N_SERIES, "pass %d: the block's points, no build: %.0f", pass, read);
        } else {
            cr_expect_gt(read, N_SERIES, "the build tried, and read rows of its own: %.0f", read);
        }
    }
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- the open queries' bound: other queries' memory is the cause ---- */

/* GET |path|: expects 503 with Retry-After: 1 and exactly |want|. */
static void expect_busy(const struct daemon *d, const char *path, const char *want)
{
    struct http_resp r;
    char ra[16];
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0, "GET %s", path);
    cr_expect_eq(r.status, 503, "GET %s: %d %s", path, r.status, r.body ? (char *)r.body : "");
    cr_expect_str_eq(http_resp_header(&r, "Retry-After", ra, sizeof(ra)) ? ra : "(none)", "1");
    cr_expect_str_eq(r.body ? (char *)r.body : "", want, "GET %s", path);
    http_resp_free(&r);
}

#define SHARED_MSG                                                                                 \
    "the queries running now need more than 16777216 bytes of memory together (the server's "      \
    "query share of --memory-budget); retry later"

/* A daemon whose open queries' bound (16 MiB at a 64 MiB budget) is held
 * whole by some other query (--test-query-held): every query that charges
 * memory waits for it (250 ms) and is refused with 503 + Retry-After on
 * each API, not with the per-query 422; the wait is counted. */
static void start_held(struct daemon *d)
{
    const char *args[] = {"--memory-budget", "64MiB", "--test-query-held", "16MiB", NULL};
    cr_assert_eq(daemon_start(d, NULL, args), 0);
}

Test(qmem, promql_at_the_shared_bound_answers_503_with_retry_after, .timeout = 120)
{
    struct daemon d;
    start_held(&d);
    char *b = gauges("load", 10, 0);
    post(&d, "/v1/metrics", b);
    free(b);
    expect_busy(&d, "/api/v1/query_range?query=load&start=1700000000&end=1700000100&step=10",
                "{\"status\":\"error\",\"errorType\":\"unavailable\",\"error\":\"" SHARED_MSG
                "\"}");
    cr_expect_eq(daemon_metric(&d, "miradb_queries_total{endpoint=\"prom_query_range\","
                                   "outcome=\"overloaded\"}"),
                 1);
    cr_expect_eq(daemon_metric(&d, "miradb_query_shared_waits_total"), 1);
    cr_expect_geq(daemon_metric(&d, "miradb_query_shared_wait_seconds_total"), 0.25);
    /* what the refused query charged is back: only the stand-in is held */
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 16 << 20);
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(qmem, logql_at_the_shared_bound_answers_503_with_retry_after, .timeout = 120)
{
    struct daemon d;
    start_held(&d);
    const char *logs =
        "{\"resourceLogs\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeLogs\":[{\"logRecords\":[{"
        "\"timeUnixNano\":\"1700000001000000000\",\"body\":{\"stringValue\":\"hello "
        "world\"}}]}]}]}";
    post(&d, "/v1/logs", logs);
    expect_busy(&d,
                "/loki/api/v1/query_range?query=%7Bservice_name%3D%22svc%22%7D&start="
                "1700000000000000000&end=1700000010000000000&limit=10",
                SHARED_MSG);
    cr_expect_eq(daemon_metric(&d, "miradb_query_shared_waits_total"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 16 << 20);
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(qmem, tempo_search_at_the_shared_bound_answers_503_with_retry_after, .timeout = 120)
{
    struct daemon d;
    start_held(&d);
    char *b = spans(3);
    post(&d, "/v1/traces", b);
    free(b);
    expect_busy(&d, "/api/search?q=%7B%7D&start=1700000000&end=1700000100&limit=20", SHARED_MSG);
    cr_expect_eq(daemon_metric(&d, "miradb_query_shared_waits_total"), 1);
    cr_expect_eq(daemon_metric(&d, "miradb_query_memory_bytes"), 16 << 20);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* The per-query bound stays 422 while another query holds memory, when
 * the query meets its own bound first (8 MiB of its own, 1 MiB held by
 * another, 16 MiB together): no wait, the limit's answer. */
Test(qmem, the_per_query_bound_stays_422_beside_a_held_share, .timeout = 120)
{
    struct daemon d;
    const char *args[] = {
        "--memory-budget", "64MiB", "--query-memory", "8MiB", "--test-query-held", "1MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    char *b = gauges("load", N_SERIES, 0);
    post(&d, "/v1/metrics", b);
    free(b);
    expect(&d, BIG_RANGE, 422,
           "{\"status\":\"error\",\"errorType\":\"execution\",\"error\":\"the query needs more "
           "than 8388608 bytes of memory (--query-memory); narrow the time range or the "
           "selector\"}");
    cr_expect_eq(daemon_metric(&d, "miradb_query_shared_waits_total"), 0);
    cr_assert_eq(daemon_stop(&d), 0);
}
