/*
 * promcheck_test.c - metric points PromQL cannot show are stored, counted on
 * /metrics by reason and logged once per metric name (issue 11: "nothing is
 * ever dropped silently"). One OTLP/JSON export, sent twice, holds a gauge
 * that maps (2 points), a sum with an unspecified aggregation temporality
 * (3 points) and a gauge whose name has no character Prometheus allows (1
 * point).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

static const char BODY[] =
    "{\"resourceMetrics\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
    "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeMetrics\":[{\"metrics\":["
    "{\"name\":\"ok.gauge\",\"gauge\":{\"dataPoints\":["
    "{\"timeUnixNano\":\"1700000000000000000\",\"asDouble\":1},"
    "{\"timeUnixNano\":\"1700000015000000000\",\"asDouble\":2}]}},"
    "{\"name\":\"bad.sum\",\"sum\":{\"aggregationTemporality\":0,\"isMonotonic\":true,"
    "\"dataPoints\":["
    "{\"timeUnixNano\":\"1700000000000000000\",\"asInt\":\"1\"},"
    "{\"timeUnixNano\":\"1700000015000000000\",\"asInt\":\"2\"},"
    "{\"timeUnixNano\":\"1700000030000000000\",\"asInt\":\"3\"}]}},"
    "{\"name\":\"!!!\",\"gauge\":{\"dataPoints\":["
    "{\"timeUnixNano\":\"1700000000000000000\",\"asDouble\":5}]}}"
    "]}]}]}";

static int count_lines_with(const char *text, const char *a, const char *b)
{
    int n = 0;
    for (const char *p = text; p != NULL && *p != '\0';) {
        const char *e = strchr(p, '\n');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        char *line = strndup(p, len);
        if (strstr(line, a) != NULL && strstr(line, b) != NULL) {
            n++;
        }
        free(line);
        p = e != NULL ? e + 1 : NULL;
    }
    return n;
}

Test(promcheck, unmapped_points_counted_and_logged_once)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    const char *hdr[] = {"Content-Type: application/json", NULL};
    for (int i = 0; i < 2; i++) {
        struct http_resp r;
        cr_assert_eq(
            httpc_request(d.http_port, "POST", "/v1/metrics", hdr, BODY, strlen(BODY), 0, &r), 0);
        cr_assert_eq(r.status, 200, "status %d: %.*s", r.status, (int)r.body_len, r.body);
        http_resp_free(&r);
    }
    cr_assert_eq(
        daemon_metric(&d, "miradb_otlp_records_total{signal=\"metrics\",transport=\"http_json\"}"),
        12.0);
    cr_assert_eq(
        daemon_metric(&d, "miradb_promql_unmapped_points_total{reason=\"invalid_temporality\"}"),
        6.0);
    cr_assert_eq(daemon_metric(&d, "miradb_promql_unmapped_points_total{reason=\"invalid_name\"}"),
                 2.0);
    size_t len;
    char *log = (char *)httpc_read_file(d.log_path, &len);
    cr_assert_not_null(log);
    cr_assert_eq(
        count_lines_with(log, "metric \"bad.sum\": 3 points", "temporality is unspecified"), 1,
        "log:\n%s", log);
    cr_assert_eq(count_lines_with(log, "metric \"!!!\": 1 points", "no character Prometheus"), 1,
                 "log:\n%s", log);
    cr_assert_eq(count_lines_with(log, "ok.gauge", "PromQL"), 0, "log:\n%s", log);
    free(log);
    cr_assert_eq(daemon_stop(&d), 0);
}
