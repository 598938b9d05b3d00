/*
 * conf_traceql_metrics_test.c - the TraceQL metrics conformance suite: every
 * case of tests/conformance/traceql_metrics*.cases (Tempo's own test and
 * documentation queries, format in the files' headers) sent to
 * /api/metrics/query_range of one daemon holding a few spans. A valid case
 * must answer 200 with a JSON object holding a "series" array, an invalid
 * one 400 with a message; none may answer 5xx or hang (httpc's 30 s
 * timeout). The test fails listing every case that answered wrongly.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

static const char SPANS[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
    "{\"stringValue\":\"api\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "{\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a1\","
    "\"name\":\"GET /users\",\"kind\":2,\"startTimeUnixNano\":\"1700000001000000000\","
    "\"endTimeUnixNano\":\"1700000001100000000\",\"status\":{\"code\":2},\"attributes\":["
    "{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"500\"}}]},"
    "{\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a2\","
    "\"parentSpanId\":\"00000000000000a1\",\"name\":\"SELECT\",\"kind\":3,"
    "\"startTimeUnixNano\":\"1700000002000000000\",\"endTimeUnixNano\":\"1700000002050000000\"}"
    "]}]}]}";

static size_t unescape(const char *s, char *out)
{
    size_t o = 0;
    for (; *s != '\0'; s++) {
        if (*s == '\\' && s[1] != '\0') {
            s++;
            out[o++] = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s;
        } else {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
    return o;
}

/* 1 when the case answered as its verdict says. */
static int check(const struct daemon *d, bool valid, const char *q, int *status, char *body200)
{
    static char enc[24000], path[25000];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path),
             "/api/metrics/query_range?q=%s&start=1700000000&end=1700000060&step=10s", enc);
    struct http_resp r;
    if (httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r) != 0) {
        *status = -1; /* no answer within the timeout */
        snprintf(body200, 201, "(no answer)");
        return 0;
    }
    *status = r.status;
    size_t n = r.body_len < 200 ? r.body_len : 200;
    memcpy(body200, r.body ? (char *)r.body : "", n);
    body200[n] = '\0';
    int ok;
    if (valid) {
        json_t *j = r.status == 200 ? json_loadb((const char *)r.body, r.body_len, 0, NULL) : NULL;
        ok = j != NULL && json_is_array(json_object_get(j, "series"));
        json_decref(j);
    } else {
        ok = r.status == 400 && r.body_len > 0;
    }
    http_resp_free(&r);
    return ok;
}

static void run_file(const struct daemon *d, const char *name, unsigned *cases, unsigned *bad,
                     char *report, size_t cap)
{
    const char *vec = getenv("MIRADB_VECTORS");
    cr_assert_not_null(vec, "MIRADB_VECTORS unset");
    char path[1024];
    snprintf(path, sizeof(path), "%s/../conformance/%s", vec, name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return; /* that file is not there (yet) */
    }
    static char line[16384], q[16384];
    for (unsigned no = 1; fgets(line, sizeof(line), f) != NULL && no < 1000000; no++) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') {
            continue;
        }
        char *t1 = strchr(line, '\t');
        char *t2 = t1 != NULL ? strchr(t1 + 1, '\t') : NULL;
        cr_assert_not_null(t2, "%s:%u: not three fields", name, no);
        *t1 = *t2 = '\0';
        bool valid = strcmp(line, "valid") == 0;
        cr_assert(valid || strcmp(line, "invalid") == 0, "%s:%u: verdict %s", name, no, line);
        unescape(t2 + 1, q);
        int status;
        char body[201];
        (*cases)++;
        if (!check(d, valid, q, &status, body)) {
            (*bad)++;
            size_t at = strlen(report);
            snprintf(report + at, cap - at, "  %s %s [%s] -> %d %s\n", line, t1 + 1, q, status,
                     body);
        }
    }
    fclose(f);
}

Test(conf_traceql_metrics, every_case_answers_as_its_verdict, .timeout = 600)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(
        httpc_request(d.http_port, "POST", "/v1/traces", hdrs, SPANS, strlen(SPANS), 0, &r), 0);
    cr_assert_eq(r.status, 200);
    http_resp_free(&r);
    static char report[1 << 18];
    report[0] = '\0';
    unsigned cases = 0, bad = 0;
    run_file(&d, "traceql_metrics.cases", &cases, &bad, report, sizeof(report));
    run_file(&d, "traceql_metrics_local.cases", &cases, &bad, report, sizeof(report));
    cr_expect_geq(cases, 224, "only %u cases found", cases);
    cr_expect_eq(bad, 0, "%u of %u cases answered wrongly:\n%s", bad, cases, report);
    cr_expect_eq(daemon_stop(&d), 0);
}
