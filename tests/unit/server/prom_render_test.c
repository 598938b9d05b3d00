/*
 * prom_render_test.c - the Prometheus API's JSON (server/prom_render.c),
 * byte for byte as Prometheus 2.42 writes it (PROMQL.md 0.8 and A.3; the
 * shapes of web/api/v1/api.go's marshalers, worked out by hand).
 */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "server/prom_render.h"

static struct evbuffer *buf;
static struct jsonw w;

static void setup(void)
{
    buf = evbuffer_new();
    cr_assert_not_null(buf);
    prom_jsonw_init(&w, buf);
}

static void teardown(void)
{
    evbuffer_free(buf);
}

/* What has been written so far (and empties the buffer). */
static char *text(void)
{
    size_t n = evbuffer_get_length(buf);
    static char out[8192];
    cr_assert_lt(n, sizeof(out));
    evbuffer_remove(buf, out, n);
    out[n] = '\0';
    prom_jsonw_init(&w, buf);
    return out;
}

TestSuite(prom_render, .init = setup, .fini = teardown);

Test(prom_render, timestamps_have_no_fraction_or_three_digits)
{
    prom_render_ts(&w, 1435781451781LL);
    cr_expect_str_eq(text(), "1435781451.781");
    prom_render_ts(&w, 1500);
    cr_expect_str_eq(text(), "1.500");
    prom_render_ts(&w, 1000);
    cr_expect_str_eq(text(), "1");
    prom_render_ts(&w, 5);
    cr_expect_str_eq(text(), "0.005");
    prom_render_ts(&w, 0);
    cr_expect_str_eq(text(), "0");
    prom_render_ts(&w, -1500);
    cr_expect_str_eq(text(), "-1.500");
}

Test(prom_render, values_are_strings_in_jsonutil_form)
{
    const struct {
        double v;
        const char *want;
    } cases[] = {
        {2, "\"2\""},
        {0.1 + 0.2, "\"0.30000000000000004\""},
        {1e-7, "\"1e-07\""},
        {1e21, "\"1e+21\""},
        {123456789.125, "\"123456789.125\""},
        {-0.0, "\"-0\""},
        {NAN, "\"NaN\""},
        {INFINITY, "\"+Inf\""},
        {-INFINITY, "\"-Inf\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        prom_render_value(&w, cases[i].v);
        cr_expect_str_eq(text(), cases[i].want);
    }
}

Test(prom_render, scalar_and_string_results)
{
    struct pm_result r = {.type = PM_RES_SCALAR, .t = 4000, .v = 2};
    prom_render_begin(&w);
    prom_render_result(&w, &r);
    prom_render_end(&w, NULL, 0);
    cr_expect_str_eq(text(), "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\","
                             "\"result\":[4,\"2\"]}}");
    /* a scalar's value is 'f' form, its time Go's float printing */
    r = (struct pm_result){.type = PM_RES_SCALAR, .t = 1100, .v = 1e-7};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"scalar\",\"result\":[1.1,\"0.0000001\"]}");
    r = (struct pm_result){.type = PM_RES_STRING, .t = 1500, .str = {"a<b>&\"", 6}};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"string\",\"result\":[1.5,"
                             "\"a\\u003cb\\u003e\\u0026\\\"\"]}");
}

#define L(n, v)                                                                                    \
    {                                                                                              \
        n, v, sizeof(n) - 1, sizeof(v) - 1                                                         \
    }

Test(prom_render, vector_and_matrix_results)
{
    static const struct pm_label la[] = {L("__name__", "up"), L("instance", "a<1>"),
                                         L("job", "node")};
    static const struct pm_label lb[] = {L("job", "x")};
    struct pm_fsample fa[] = {{100000, 1}}, fb[] = {{100000, 0.5}};
    struct pm_series s[] = {{.labels = {la, 3}, .f = fa, .nf = 1},
                            {.labels = {lb, 1}, .f = fb, .nf = 1}};
    struct pm_result r = {.type = PM_RES_VECTOR, .t = 100000, .set = {s, 2}};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"vector\",\"result\":["
                             "{\"metric\":{\"__name__\":\"up\",\"instance\":\"a\\u003c1\\u003e\","
                             "\"job\":\"node\"},\"value\":[100,\"1\"]},"
                             "{\"metric\":{\"job\":\"x\"},\"value\":[100,\"0.5\"]}]}");

    struct pm_fsample fm[] = {{0, 20}, {120000, 21}, {240500, 24}};
    struct pm_series m[] = {{.labels = {NULL, 0}, .f = fm, .nf = 3}};
    r = (struct pm_result){.type = PM_RES_MATRIX, .set = {m, 1}};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},\"values\":"
                             "[[0,\"20\"],[120,\"21\"],[240.500,\"24\"]]}]}");

    r = (struct pm_result){.type = PM_RES_VECTOR, .t = 5};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"vector\",\"result\":[]}");
    r = (struct pm_result){.type = PM_RES_MATRIX};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"matrix\",\"result\":[]}");
}

/* schema 0: bucket i is (2^(i-1), 2^i]; the zero bucket [-zt, zt]. */
static struct pm_hist hist0(double *pos, double *neg)
{
    pos[0] = 2; /* (0.5,1] */
    pos[1] = 0; /* (1,2]: empty, left out */
    pos[2] = 5; /* (2,4] */
    neg[0] = 3; /* [-2,-1) */
    neg[1] = 1; /* [-4,-2) */
    return (struct pm_hist){.schema = 0,
                            .zero_threshold = 0.001,
                            .zero_count = 2,
                            .count = 13,
                            .sum = 18.4,
                            .pos_offset = 0,
                            .neg_offset = 1,
                            .n_pos = 3,
                            .n_neg = 2,
                            .pos = pos,
                            .neg = neg};
}

Test(prom_render, native_histogram_buckets_in_iterator_order)
{
    double pos[3], neg[2];
    struct pm_hist h = hist0(pos, neg);
    prom_render_hist(&w, &h);
    cr_expect_str_eq(text(), "{\"count\":\"13\",\"sum\":\"18.4\",\"buckets\":["
                             "[1,\"-4\",\"-2\",\"1\"],[1,\"-2\",\"-1\",\"3\"],"
                             "[3,\"-0.001\",\"0.001\",\"2\"],"
                             "[0,\"0.5\",\"1\",\"2\"],[0,\"2\",\"4\",\"5\"]]}");

    /* no bucket with a count: no "buckets" key; zero count 0: no zero bucket */
    struct pm_hist e = {.schema = 3, .count = 0, .sum = 0};
    prom_render_hist(&w, &e);
    cr_expect_str_eq(text(), "{\"count\":\"0\",\"sum\":\"0\"}");

    /* a bucket reaching into the zero bucket is clipped at the threshold */
    double p1[] = {4};
    struct pm_hist c = {.schema = 0,
                        .zero_threshold = 0.75,
                        .count = 4,
                        .sum = 3,
                        .pos_offset = 0,
                        .n_pos = 1,
                        .pos = p1};
    prom_render_hist(&w, &c);
    cr_expect_str_eq(text(),
                     "{\"count\":\"4\",\"sum\":\"3\",\"buckets\":[[0,\"0.75\",\"1\",\"4\"]]}");

    /* a vector sample of a histogram: "histogram" instead of "value" */
    struct pm_hsample hs[] = {{60000, &c}};
    struct pm_series s[] = {{.labels = {NULL, 0}, .h = hs, .nh = 1}};
    struct pm_result r = {.type = PM_RES_VECTOR, .t = 60000, .set = {s, 1}};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"vector\",\"result\":[{\"metric\":{},\"histogram\":"
                             "[60,{\"count\":\"4\",\"sum\":\"3\",\"buckets\":"
                             "[[0,\"0.75\",\"1\",\"4\"]]}]}]}");
    /* a matrix series with both kinds: "values" then "histograms" */
    struct pm_fsample f[] = {{0, 1}};
    struct pm_series m[] = {{.labels = {NULL, 0}, .f = f, .nf = 1, .h = hs, .nh = 1}};
    r = (struct pm_result){.type = PM_RES_MATRIX, .set = {m, 1}};
    prom_render_result(&w, &r);
    cr_expect_str_eq(text(), "{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},\"values\":"
                             "[[0,\"1\"]],\"histograms\":[[60,{\"count\":\"4\",\"sum\":\"3\","
                             "\"buckets\":[[0,\"0.75\",\"1\",\"4\"]]}]]}]}");
}

Test(prom_render, bucket_bounds)
{
    cr_expect_eq(prom_hist_bound(0, 0), 1);
    cr_expect_eq(prom_hist_bound(1, 0), 2);
    cr_expect_eq(prom_hist_bound(-1, 0), 0.5);
    cr_expect_eq(prom_hist_bound(2, 1), 2);
    cr_expect_eq(prom_hist_bound(1, 2), 0.5946035575013605 * 2); /* 2^(1/4) */
    cr_expect_eq(prom_hist_bound(1, -1), 4);                     /* schema -1: base 4 */
    cr_expect_eq(prom_hist_bound(-3, -2), ldexp(1, -12));        /* schema -2: base 16 */
    /* the last finite bucket ends at the largest double, the next at +Inf */
    cr_expect_eq(prom_hist_bound(1024, 0), DBL_MAX);
    cr_expect_eq(prom_hist_bound(512, -1), DBL_MAX);
    cr_expect_eq(prom_hist_bound(1024 * 256, 8), DBL_MAX);
    cr_expect(isinf(prom_hist_bound(1025, 0)));
}

Test(prom_render, error_and_warnings_envelopes)
{
    prom_render_error(buf, "bad_data", "1:5: parse error: unexpected <op:>>");
    cr_expect_str_eq(text(), "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":"
                             "\"1:5: parse error: unexpected \\u003cop:\\u003e\\u003e\"}");
    const char *warn[] = {"w1", "w<2>"};
    prom_render_begin(&w);
    jsonw_arr_begin(&w);
    jsonw_arr_end(&w);
    prom_render_end(&w, warn, 2);
    cr_expect_str_eq(text(), "{\"status\":\"success\",\"data\":[],\"warnings\":[\"w1\","
                             "\"w\\u003c2\\u003e\"]}");
}

Test(prom_render, exemplars)
{
    static const struct pm_label sl[] = {L("__name__", "x_total"), L("job", "a")};
    static const struct pm_label el[] = {L("trace_id", "0102030405060708090a0b0c0d0e0f10")};
    struct pm_exemplar e[] = {{.labels = {el, 1}, .value = 1.5, .t = 1700000000123LL},
                              {.labels = {NULL, 0}, .value = 2, .t = 1700000001000LL}};
    struct pm_exemplar_series es[] = {{.series = {sl, 2}, .e = e, .n = 2}};
    prom_render_exemplars(&w, es, 1);
    cr_expect_str_eq(text(), "[{\"seriesLabels\":{\"__name__\":\"x_total\",\"job\":\"a\"},"
                             "\"exemplars\":[{\"labels\":{\"trace_id\":"
                             "\"0102030405060708090a0b0c0d0e0f10\"},\"value\":\"1.5\","
                             "\"timestamp\":1700000000.123},{\"labels\":{},\"value\":\"2\","
                             "\"timestamp\":1700000001}]}]");
    prom_render_exemplars(&w, NULL, 0);
    cr_expect_str_eq(text(), "[]");
}

Test(prom_render, long_series_written_in_pieces_reads_as_one_array)
{
    /* 1,000 points (about 17 KB): the points go out in pieces of up to
     * 8 KiB; the text must be the one array, commas at every seam. */
    enum { N = 1000 };
    static struct pm_fsample f[N];
    for (int i = 0; i < N; i++) {
        f[i] = (struct pm_fsample){(int64_t)i * 1001, i * 0.5};
    }
    struct pm_series m[] = {{.labels = {NULL, 0}, .f = f, .nf = N}};
    struct pm_result r = {.type = PM_RES_MATRIX, .set = {m, 1}};
    prom_render_result(&w, &r);
    size_t n = evbuffer_get_length(buf);
    char *got = malloc(n + 1);
    cr_assert_not_null(got);
    evbuffer_remove(buf, got, n);
    got[n] = '\0';
    size_t cap = 64 + (size_t)N * 40;
    char *want = malloc(cap);
    cr_assert_not_null(want);
    size_t k = (size_t)snprintf(want, cap,
                                "{\"resultType\":\"matrix\",\"result\":[{\"metric\":{},"
                                "\"values\":[");
    for (int i = 0; i < N; i++) {
        long long ms = (long long)i * 1001;
        k += (size_t)snprintf(want + k, cap - k, "%s[%lld", i ? "," : "", ms / 1000);
        if (ms % 1000 != 0) {
            k += (size_t)snprintf(want + k, cap - k, ".%03lld", ms % 1000);
        }
        k += (size_t)snprintf(want + k, cap - k, i % 2 ? ",\"%d.5\"]" : ",\"%d\"]", i / 2);
    }
    snprintf(want + k, cap - k, "]}]}");
    cr_expect_gt(n, 2 * 8192);
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
}
