/*
 * prom_native_test.c - an OTLP exponential histogram read back through the
 * Prometheus API as a native histogram (issue 11): the instant vector's
 * "histogram" shape with Prometheus's bucket boundary rules, and the
 * native-histogram functions, with answers worked out by hand from
 * Prometheus 2.42's rules.
 *
 * The point (scale 0, base 2): zero_count 1, positive offset 0 with counts
 * 2, 3 — OTLP bucket j covers (2^j, 2^(j+1)], so (1,2] holds 2 and (2,4]
 * holds 3 — count 6, sum 12.5. Prometheus's zero threshold is 1e-128.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

static struct daemon d;

static const char BODY[] =
    "{\"resourceMetrics\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"api\"}},"
    "{\"key\":\"service.instance.id\",\"value\":{\"stringValue\":\"i-1\"}}]},"
    "\"scopeMetrics\":[{\"metrics\":[{\"name\":\"req.size\",\"unit\":\"By\","
    "\"exponentialHistogram\":{\"aggregationTemporality\":2,\"dataPoints\":[{"
    "\"startTimeUnixNano\":\"1699999990000000000\",\"timeUnixNano\":\"1700000030000000000\","
    "\"count\":\"6\",\"sum\":12.5,\"scale\":0,\"zeroCount\":\"1\","
    "\"positive\":{\"offset\":0,\"bucketCounts\":[\"2\",\"3\"]}}]}}]}]}]}";

static void start(void)
{
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    const char *hdr[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/metrics", hdr, BODY, strlen(BODY), 0, &r),
                 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

static void stop(void)
{
    cr_assert_eq(daemon_stop(&d), 0);
}

static void expect_query(const char *q, const char *want)
{
    char path[1024], enc[768];
    httpc_url_enc(enc, sizeof enc, q);
    snprintf(path, sizeof path, "/api/v1/query?query=%s&time=1700000030", enc);
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200, "%s: %d", q, r.status);
    cr_expect_str_eq((const char *)r.body, want, "%s", q);
    http_resp_free(&r);
}

#define LABELS "\"instance\":\"i-1\",\"job\":\"api\""
#define VEC(metric, value)                                                                         \
    "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{" metric \
    "},\"value\":[1700000030,\"" value "\"]}]}}"

/* One daemon for both checks, started in the test (not a suite fixture). */
Test(prom_native, an_exponential_histogram_answers_as_a_native_histogram)
{
    start();
    /* buckets in Prometheus's order: the zero bucket (closed both ends:
     * rule 3), then the positive ones (open left: rule 0) */
    expect_query("req_size_bytes",
                 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{"
                 "\"metric\":{\"__name__\":\"req_size_bytes\"," LABELS "},"
                 "\"histogram\":[1700000030,{\"count\":\"6\",\"sum\":\"12.5\",\"buckets\":["
                 "[3,\"-1e-128\",\"1e-128\",\"1\"],[0,\"1\",\"2\",\"2\"],[0,\"2\",\"4\",\"3\"]]}]}"
                 "]}}");

    expect_query("histogram_count(req_size_bytes)", VEC(LABELS, "6"));
    expect_query("histogram_sum(req_size_bytes)", VEC(LABELS, "12.5"));
    /* rank 3: cumulative 1 (zero), 3 at (1,2]: 1 + (2 - 1) * (3 - 1) / 2 = 2 */
    expect_query("histogram_quantile(0.5, req_size_bytes)", VEC(LABELS, "2"));
    /* rank 4.5 in (2,4] after 3: 2 + 2 * 1.5 / 3 = 3 */
    expect_query("histogram_quantile(0.75, req_size_bytes)", VEC(LABELS, "3"));
    /* a classic-bucket selector finds nothing: no _bucket series exist */
    expect_query("req_size_bytes_bucket",
                 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}");
    stop();
}
