/*
 * conf_logql_test.c - the LogQL conformance suite: every case of
 * tests/conformance/logql.cases (Loki's own parser/AST test tables and the
 * LogQL docs' examples, see extract-logql.py) sent to
 * /loki/api/v1/query_range of one daemon holding a little data. A `valid`
 * case must answer 200 with a well-formed Loki body, an `invalid` one 400
 * with a non-empty message; none may answer 5xx or time out. The test
 * fails listing each case that answered wrongly, and prints the counts
 * (answered / not supported / misparsed / invalid accepted / 5xx).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)
#define MAX_CASES 2000
#define MAX_QUERY 8192

static const char *const ONE_SHARD[] = {"--shards", "1", "--io-threads", "1", NULL};

/* The case file: $MIRADB_CONFORMANCE, else beside $MIRADB_VECTORS
 * (tests/vectors -> tests/conformance), else the relative path. */
static void cases_path(char *out, size_t cap, const char *name)
{
    const char *d = getenv("MIRADB_CONFORMANCE");
    if (d != NULL && *d != '\0') {
        snprintf(out, cap, "%s/%s", d, name);
        return;
    }
    const char *v = httpc_vectors_dir();
    size_t n = strlen(v);
    while (n > 0 && v[n - 1] == '/') {
        n--;
    }
    while (n > 0 && v[n - 1] != '/') {
        n--;
    }
    snprintf(out, cap, "%.*sconformance/%s", (int)n, v, name);
}

/* Undoes the case file's escapes (\\ \t \n) in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == '\\' || s[1] == 't' || s[1] == 'n')) {
            s++;
            *o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : '\\';
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

static void export_json(const struct daemon *d, const char *json)
{
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/logs", hdrs, json, strlen(json), 0, &r),
                 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

/* A little data so that queries run over real entries: service foo with
 * logfmt lines, service mysql with JSON lines (T0 .. T0+9 s). */
static void export_data(const struct daemon *d)
{
    static char buf[16384];
    size_t o = 0;
    o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                          "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
                          "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"foo\"}}]},"
                          "\"scopeLogs\":[{\"logRecords\":[");
    for (int i = 0; i < 10; i++) {
        o += (size_t)snprintf(
            buf + o, sizeof(buf) - o,
            "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
            "\"level=%s status=%d duration=%dms addr=10.0.0.%d msg=\\\"req %d\\\"\"},"
            "\"attributes\":[{\"key\":\"foo\",\"value\":{\"stringValue\":"
            "\"bar\"}}]}",
            i ? "," : "", (T0 + (uint64_t)i) * NS, i % 2 ? "error" : "info", i % 2 ? 500 : 200,
            10 * i, i, i);
    }
    o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                          "]}]},{\"resource\":{\"attributes\":["
                          "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"mysql\"}}]},"
                          "\"scopeLogs\":[{\"logRecords\":[");
    for (int i = 0; i < 5; i++) {
        o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                              "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
                              "\"{\\\"latency\\\":%d,\\\"path\\\":\\\"/home\\\"}\"}}",
                              i ? "," : "", (T0 + (uint64_t)i) * NS + 500000000u, i);
    }
    snprintf(buf + o, sizeof(buf) - o, "]}]}]}");
    export_json(d, buf);
}

/* A well-formed Loki answer: status success, data.resultType one of the
 * four, data.result an array (a number pair for a scalar). */
static bool well_formed(const char *body)
{
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (j == NULL) {
        return false;
    }
    json_t *data = json_object_get(j, "data");
    const char *st = json_string_value(json_object_get(j, "status"));
    const char *rt = json_string_value(json_object_get(data, "resultType"));
    bool ok = st != NULL && strcmp(st, "success") == 0 && rt != NULL &&
              (strcmp(rt, "streams") == 0 || strcmp(rt, "matrix") == 0 ||
               strcmp(rt, "vector") == 0 || strcmp(rt, "scalar") == 0) &&
              json_is_array(json_object_get(data, "result"));
    json_decref(j);
    return ok;
}

enum outcome { ANSWERED, REFUSED_OK, NOT_SUPPORTED, MISPARSED, INVALID_ACCEPTED, BAD_BODY, E5XX };

Test(conf_logql, every_loki_case_answers_with_its_verdict, .timeout = 1200)
{
    char path[512];
    cases_path(path, sizeof(path), "logql.cases");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);

    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_data(&d);

    static char line[MAX_QUERY * 2];
    static char enc[MAX_QUERY * 3 + 1], url[MAX_QUERY * 3 + 256];
    size_t count[E5XX + 1] = {0};
    size_t n_cases = 0, n_wrong = 0;
    while (fgets(line, sizeof(line), f) != NULL && n_cases < MAX_CASES) {
        size_t ln = strlen(line);
        cr_assert(ln > 0 && line[ln - 1] == '\n', "case line too long or unterminated: %.60s",
                  line);
        line[ln - 1] = '\0';
        if (line[0] == '#' || line[0] == '\0') {
            continue;
        }
        char *verdict = line, *src = strchr(line, '\t');
        cr_assert_not_null(src, "malformed case line: %s", line);
        *src++ = '\0';
        char *q = strchr(src, '\t');
        cr_assert_not_null(q, "malformed case line: %s", src);
        *q++ = '\0';
        unescape(q);
        bool valid = strcmp(verdict, "valid") == 0;
        cr_assert(valid || strcmp(verdict, "invalid") == 0, "bad verdict %s", verdict);
        n_cases++;

        httpc_url_enc(enc, sizeof(enc), q);
        snprintf(url, sizeof(url),
                 "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64
                 "&step=60s&limit=100&direction=backward",
                 enc, (T0 - 600) * NS, (T0 + 600) * NS);
        struct http_resp r;
        int rc = httpc_request(d.http_port, "GET", url, NULL, NULL, 0, 0, &r);
        cr_assert_eq(rc, 0, "no answer (timeout or connection error) for %s: %s", src, q);
        const char *body = r.body ? (const char *)r.body : "";
        enum outcome o;
        if (r.status >= 500) {
            o = E5XX;
        } else if (valid) {
            o = r.status == 200                         ? (well_formed(body) ? ANSWERED : BAD_BODY)
                : strstr(body, "not supported") != NULL ? NOT_SUPPORTED
                                                        : MISPARSED;
        } else {
            o = r.status == 400 && body[0] != '\0' ? REFUSED_OK
                : r.status == 200                  ? INVALID_ACCEPTED
                                                   : BAD_BODY;
        }
        count[o]++;
        if (o != ANSWERED && o != REFUSED_OK) {
            n_wrong++;
            fprintf(stderr, "WRONG %s %s -> %d %.200s\n    query: %.300s\n", verdict, src, r.status,
                    body, q);
        }
        http_resp_free(&r);
    }
    fclose(f);
    fprintf(stderr,
            "conf_logql: %zu cases: valid answered %zu, not supported %zu, misparsed %zu, bad "
            "body %zu; invalid refused %zu, invalid accepted %zu; 5xx %zu\n",
            n_cases, count[ANSWERED], count[NOT_SUPPORTED], count[MISPARSED], count[BAD_BODY],
            count[REFUSED_OK], count[INVALID_ACCEPTED], count[E5XX]);
    cr_assert_gt(n_cases, 400, "the case file holds %zu cases", n_cases);
    cr_expect_eq(n_wrong, 0, "%zu of %zu cases answered wrongly (listed above)", n_wrong, n_cases);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- answer checks: the features issue 14 adds, on the data above --------- */

static char *get_body(const struct daemon *d, const char *path, int *status)
{
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0, "GET %s", path);
    *status = r.status;
    char *b = strndup(r.body ? (const char *)r.body : "", r.body_len);
    http_resp_free(&r);
    return b;
}

/* The lines of a log query over [T0, T0+10 s), oldest first, joined by '|'. */
static void lines_of(const struct daemon *d, const char *q, char *out, size_t cap)
{
    static char enc[4096], path[4600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64
             "&limit=100&direction=forward",
             enc, T0 * NS, (T0 + 10) * NS);
    int st;
    char *body = get_body(d, path, &st);
    cr_assert_eq(st, 200, "%s: %d %s", q, st, body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "%s: %s", q, body);
    /* merge the streams' entries by timestamp (each stream is in order) */
    struct {
        uint64_t ts;
        const char *line;
    } es[64];
    size_t n = 0, i, k;
    json_t *s, *v;
    json_array_foreach(json_object_get(json_object_get(j, "data"), "result"), i, s)
    {
        json_array_foreach(json_object_get(s, "values"), k, v)
        {
            cr_assert_lt(n, 64);
            es[n].ts = strtoull(json_string_value(json_array_get(v, 0)), NULL, 10);
            es[n].line = json_string_value(json_array_get(v, 1));
            for (size_t m = n; m > 0 && es[m - 1].ts > es[m].ts; m--) {
                __typeof__(es[0]) t = es[m];
                es[m] = es[m - 1];
                es[m - 1] = t;
            }
            n++;
        }
    }
    size_t o = 0;
    out[0] = '\0';
    for (k = 0; k < n; k++) {
        o += (size_t)snprintf(out + o, cap - o, "%s%s", k ? "|" : "", es[k].line);
    }
    json_decref(j);
    free(body);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* An instant metric query at T0+10 s: its series as "k=v,k=v => value",
 * labels and series sorted, joined by "; ". */
static void vector_of(const struct daemon *d, const char *q, char *out, size_t cap)
{
    static char enc[4096], path[4600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/loki/api/v1/query?query=%s&time=%" PRIu64, enc, (T0 + 10) * NS);
    int st;
    char *body = get_body(d, path, &st);
    cr_assert_eq(st, 200, "%s: %d %s", q, st, body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "%s: %s", q, body);
    json_t *data = json_object_get(j, "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "resultType")), "vector", "%s", q);
    char *rows[64];
    size_t n = 0, i;
    json_t *s;
    json_array_foreach(json_object_get(data, "result"), i, s)
    {
        cr_assert_lt(n, 64);
        const char *keys[16];
        size_t nk = 0;
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(s, "metric"), key, val)
        {
            cr_assert_lt(nk, 16);
            keys[nk++] = key;
        }
        qsort(keys, nk, sizeof(keys[0]), str_cmp);
        char row[512];
        size_t o = 0;
        row[0] = '\0';
        for (size_t k = 0; k < nk; k++) {
            o += (size_t)snprintf(
                row + o, sizeof(row) - o, "%s%s=%s", k ? "," : "", keys[k],
                json_string_value(json_object_get(json_object_get(s, "metric"), keys[k])));
        }
        snprintf(row + o, sizeof(row) - o, " => %s",
                 json_string_value(json_array_get(json_object_get(s, "value"), 1)));
        rows[n++] = strdup(row);
    }
    qsort(rows, n, sizeof(rows[0]), str_cmp);
    size_t o = 0;
    out[0] = '\0';
    for (i = 0; i < n; i++) {
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? "; " : "", rows[i]);
        free(rows[i]);
    }
    json_decref(j);
    free(body);
}

Test(conf_logql, regexp_templates_label_replace_group_left_and_approx_topk_answers, .timeout = 300)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    export_data(&d);
    static char got[8192];

    /* | regexp with named groups */
    lines_of(&d,
             "{service_name=\"foo\"} | regexp \"status=(?P<code>\\\\d+) "
             "duration=(?P<dur>\\\\d+)ms\" | line_format \"{{.code}}:{{.dur}}\"",
             got, sizeof(got));
    cr_expect_str_eq(got, "200:0|500:10|200:20|500:30|200:40|500:50|200:60|500:70|200:80|500:90");

    /* line_format with upper, div/int/trimSuffix, printf, default and a pipe */
    lines_of(&d,
             "{service_name=\"foo\"} | logfmt | status=500 | line_format `{{ .level | upper }}/"
             "{{ div (int (trimSuffix \"ms\" .duration)) 10 }}/{{ printf \"%04d\" (int .status) }}"
             "/{{ default \"none\" .nosuch }}/{{ Replace .msg \" \" \"_\" -1 }}`",
             got, sizeof(got));
    cr_expect_str_eq(got, "ERROR/1/0500/none/req_1|ERROR/3/0500/none/req_3|ERROR/5/0500/none/"
                          "req_5|ERROR/7/0500/none/req_7|ERROR/9/0500/none/req_9");

    /* label_format: a rename drops the source, a template keeps it */
    lines_of(&d,
             "{service_name=\"foo\"} | logfmt | addr=\"10.0.0.4\" or addr=\"10.0.0.5\" | "
             "label_format sev=level, tag=\"{{.status}}-{{.addr | ToUpper}}\" | line_format "
             "\"{{.sev}} {{.tag}} [{{.level}}] {{.addr}}\"",
             got, sizeof(got));
    cr_expect_str_eq(got, "info 200-10.0.0.4 [] 10.0.0.4|error 500-10.0.0.5 [] 10.0.0.5");

    /* label_replace with $1 (and a non-matching series kept unchanged) */
    vector_of(&d,
              "label_replace(sum by (addr) (count_over_time({service_name=\"foo\"} | logfmt | "
              "addr=~\"10.0.0.[1-3]\" [1m])), \"host\", \"h-$1\", \"addr\", "
              "\"10\\\\.0\\\\.0\\\\.([12])\")",
              got, sizeof(got));
    cr_expect_str_eq(got, "addr=10.0.0.1,host=h-1 => 1; addr=10.0.0.2,host=h-2 => 1; "
                          "addr=10.0.0.3 => 1");

    /* group_left: many-to-one with a label taken from the one side */
    vector_of(&d,
              "sum by (level, addr) (count_over_time({service_name=\"foo\"} | logfmt | "
              "addr=~\"10.0.0.[34]\" [1m])) * on (level) group_left (status) sum by (level, "
              "status) (count_over_time({service_name=\"foo\"} | logfmt [1m]))",
              got, sizeof(got));
    cr_expect_str_eq(got, "addr=10.0.0.3,level=error,status=500 => 5; "
                          "addr=10.0.0.4,level=info,status=200 => 5");
    /* ... and a share of the total with on () group_left */
    vector_of(&d,
              "sum by (level) (count_over_time({service_name=\"foo\"} | logfmt | status=500 or "
              "addr=\"10.0.0.0\" [1m])) / on () group_left sum(count_over_time({service_name="
              "\"foo\"}[1m]))",
              got, sizeof(got));
    cr_expect_str_eq(got, "level=error => 0.5; level=info => 0.1");
    /* group_right keeps the right side's labels */
    vector_of(&d,
              "sum(count_over_time({service_name=\"foo\"}[1m])) / on () group_right sum by "
              "(level) (count_over_time({service_name=\"foo\"} | logfmt [1m]))",
              got, sizeof(got));
    cr_expect_str_eq(got, "level=error => 2; level=info => 2");

    /* approx_topk: answered exactly, the k largest */
    vector_of(&d,
              "approx_topk(2, sum by (addr) (sum_over_time({service_name=\"foo\"} | regexp "
              "\"duration=(?P<d>\\\\d+)ms addr=(?P<addr>\\\\S+)\" | unwrap d [1m])))",
              got, sizeof(got));
    cr_expect_str_eq(got, "addr=10.0.0.8 => 80; addr=10.0.0.9 => 90");

    /* ip() line filter and a template render error (TemplateFormatErr, line kept) */
    lines_of(&d, "{service_name=\"foo\"} |= ip(\"10.0.0.8-10.0.0.9\") | line_format \"{{.addr}}\"",
             got, sizeof(got));
    cr_expect_str_eq(got, "|");
    lines_of(&d,
             "{service_name=\"foo\"} | logfmt | addr=\"10.0.0.2\" | line_format \"{{ div 1 0 }}\" "
             "| line_format \"{{.__error__}}: {{.__error_details__}}\"",
             got, sizeof(got));
    cr_expect_str_eq(got, "TemplateFormatErr: error calling div: runtime error: integer divide by "
                          "zero");
    cr_assert_eq(daemon_stop(&d), 0);
}

/* A range query at [from, to] s after B, step s: each series' points as
 * "t=v" (seconds after B), series sorted, joined by "; ". */
static void matrix_of(const struct daemon *d, uint64_t b, const char *q, int from, int to, int step,
                      char *out, size_t cap)
{
    static char enc[4096], path[4600];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=%ds", enc,
             (b + (uint64_t)from) * NS, (b + (uint64_t)to) * NS, step);
    int st;
    char *body = get_body(d, path, &st);
    cr_assert_eq(st, 200, "%s: %d %s", q, st, body);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    cr_assert_not_null(j, "%s: %s", q, body);
    size_t o = 0, i, k;
    json_t *s, *v;
    out[0] = '\0';
    json_array_foreach(json_object_get(json_object_get(j, "data"), "result"), i, s)
    {
        json_array_foreach(json_object_get(s, "values"), k, v)
        {
            o +=
                (size_t)snprintf(out + o, cap - o, "%s%lld=%s", k ? " " : (i ? "; " : ""),
                                 (long long)json_integer_value(json_array_get(v, 0)) - (long long)b,
                                 json_string_value(json_array_get(v, 1)));
        }
    }
    json_decref(j);
    free(body);
}

/* rate_counter on the scenario of Loki's own engine tests
 * (loki@65e30f8:pkg/logql/internal/logqltest/testdata/range_aggregations.logqltest:342):
 * a counter c with resets-free increases per minute 30, 90, 60, and noise
 * lines without c, which are skipped. */
Test(conf_logql, rate_counter_and_instant_only_approx_topk, .timeout = 300)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, ONE_SHARD), 0);
    const uint64_t B = UINT64_C(1700001000);
    static const int at[] = {90, 120, 150, 180, 210, 240, 330, 360, 390, 420, 450, 480};
    static const int cv[] = {100, 130, 160, 250, 280, 340, 400, 430, 460, 550, 580, 640};
    static char buf[16384], got[4096];
    size_t o = (size_t)snprintf(buf, sizeof(buf),
                                "{\"resourceLogs\":[{\"resource\":{\"attributes\":[{\"key\":"
                                "\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
                                "\"scopeLogs\":[{\"logRecords\":[");
    for (int i = 0; i < 12; i++) {
        o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                              "%s{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
                              "\"c=%d\"}}",
                              i ? "," : "", (B + (uint64_t)at[i]) * NS, cv[i]);
    }
    for (int i = 0; i < 18; i++) {
        o += (size_t)snprintf(buf + o, sizeof(buf) - o,
                              ",{\"timeUnixNano\":\"%" PRIu64 "\",\"body\":{\"stringValue\":"
                              "\"noise\"}}",
                              (B + 15 + 30 * (uint64_t)i) * NS);
    }
    snprintf(buf + o, sizeof(buf) - o, "]}]}]}");
    export_json(&d, buf);

    const char *q1 = "rate_counter({service_name=\"a\"} | logfmt | unwrap c [1m])";
    matrix_of(&d, B, q1, 60, 540, 60, got, sizeof(got));
    cr_expect_str_eq(got, "120=1 180=3 240=2 360=1 420=3 480=2");
    matrix_of(&d, B, "rate_counter({service_name=\"a\"} | logfmt | unwrap c [3m])", 240, 360, 60,
              got, sizeof(got));
    cr_expect_str_eq(got, "240=1.6 300=1.5 360=1");
    matrix_of(&d, B, "rate_counter({service_name=\"a\"} | logfmt | unwrap c [1m] offset 60s)", 60,
              540, 60, got, sizeof(got));
    cr_expect_str_eq(got, "180=1 240=3 300=2 420=1 480=3 540=2");
    /* one sample in the window: 0; none: no point */
    matrix_of(&d, B, "rate_counter({service_name=\"a\"} | logfmt | unwrap c [10s])", 90, 90, 1, got,
              sizeof(got));
    cr_expect_str_eq(got, "90=0");
    matrix_of(&d, B, "rate_counter({service_name=\"a\"} | logfmt | unwrap c [10s])", 300, 300, 1,
              got, sizeof(got));
    cr_expect_str_eq(got, "");
    /* the unwrapped label leaves the series labels, as in Loki */
    matrix_of(&d, B, "sum by (c) (max_over_time({service_name=\"a\"} | logfmt | unwrap c [1m]))",
              120, 120, 1, got, sizeof(got));
    cr_expect_str_eq(got, "120=130");

    /* approx_topk: instant queries only, with Loki's message */
    static char enc[1024], path[1400];
    httpc_url_enc(enc, sizeof(enc), "approx_topk(1, count_over_time({service_name=\"a\"}[1m]))");
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=60s", enc,
             B * NS, (B + 600) * NS);
    int st;
    char *body = get_body(&d, path, &st);
    cr_expect_eq(st, 400, "%d %s", st, body);
    cr_expect_not_null(strstr(body, "count min sketches are only supported on instant queries"),
                       "%s", body);
    free(body);
    cr_assert_eq(daemon_stop(&d), 0);
}
