/*
 * pmfn_test.c - the PromQL function library (query/pmfn*.c) called the way
 * the evaluator calls it: one step, arguments built by hand (scalars,
 * instant vectors, range windows), the call node from a parsed query.
 *
 * Expected values: the worked examples of PROMQL.md section D (each the
 * number Prometheus 2.42 printed, so compared to the bit), and numbers
 * derived by hand from section B's rules and from 2.42's functions.go
 * (holt_winters, Kahan sums, the date functions, label_replace's Go
 * template expansion, absent()'s labels, the 2.42 treatment of histogram
 * samples by float functions: their value reads as 0).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_int.h"
#include "query/promql.h"

static arena *A;
static struct promql_expr *roots[256];
static int nroots;

static void setup(void)
{
    A = arena_new(0);
    cr_assert_not_null(A);
    nroots = 0;
}

static void teardown(void)
{
    for (int i = 0; i < nroots; i++) {
        promql_free(roots[i]);
    }
    arena_free(A);
}

TestSuite(pmfn, .init = setup, .fini = teardown);

/* "k=v,k2=v2" -> a sorted label set ("" -> {}). */
static struct pm_labels L(const char *spec) {
    struct pm_lb lb;
    pm_lb_init(&lb, A, NULL);
    const char *p = spec;
    while (*p != '\0') {
        const char *eq = strchr(p, '=');
        cr_assert_not_null(eq);
        const char *end = strchr(eq, ',');
        if (end == NULL) {
            end = eq + strlen(eq);
        }
        pm_lb_set_copy(&lb, p, (size_t)(eq - p), eq + 1, (size_t)(end - eq - 1));
        p = *end == ',' ? end + 1 : end;
    }
    struct pm_labels ls;
    cr_assert_eq(pm_lb_done(&lb, &ls), 0);
    return ls;
}

static bool
labels_are(const struct pm_labels *ls, const char *spec)
{
    struct pm_labels want = L(spec);
    return pm_labels_equal(ls, &want);
}

static const struct promql_expr *parse(const char *q)
{
    char err[256];
    struct promql_expr *e = NULL;
    cr_assert_eq(promql_parse(q, strlen(q), &e, err, sizeof err), 0, "%s: %s", q, err);
    cr_assert_lt(nroots, 256);
    roots[nroots++] = e;
    while (e->kind == PROMQL_PAREN) {
        e = e->inner;
    }
    cr_assert_eq(e->kind, PROMQL_CALL, "%s is not a call", q);
    return e;
}

/* A window of n (t seconds, v) pairs. */
static struct pm_win W(const char *labels, const double *tv, size_t n) {
    struct pm_fsample *f = arena_alloc(A, (n + 1) * sizeof *f);
    cr_assert_not_null(f);
    for (size_t i = 0; i < n; i++) {
        f[i].t = (int64_t)(tv[2 * i] * 1000);
        f[i].v = tv[2 * i + 1];
    }
    return (struct pm_win){.labels = L(labels), .f = f, .nf = n};
}

static struct pm_fnarg
mat(const struct pm_win *w, size_t n)
{
    return (struct pm_fnarg){.type = PROMQL_TYPE_MATRIX, .win = w, .nwin = n};
}

static struct pm_fnarg sca(double v)
{
    return (struct pm_fnarg){.type = PROMQL_TYPE_SCALAR, .scalar = v};
}

static struct pm_fnarg str(const char *s)
{
    return (struct pm_fnarg){.type = PROMQL_TYPE_STRING, .str = {s, strlen(s)}};
}

static struct pm_vec *V(void)
{
    struct pm_vec *v = arena_alloc(A, sizeof *v);
    cr_assert_not_null(v);
    memset(v, 0, sizeof *v);
    return v;
}

static void add(struct pm_vec *v, const char *labels, double x)
{
    struct pm_velem e = {.labels = L(labels), .v = x};
    cr_assert_eq(pm_vec_push(A, v, &e), 0);
}

static struct pm_fnarg vecarg(const struct pm_vec *v)
{
    return (struct pm_fnarg){.type = PROMQL_TYPE_VECTOR, .vec = v};
}

static char ERR[256];

/* Calls |q|'s function at step ts (s) with a range window [ts - range, ts]. */
static int call_rc(const char *q, double ts, double range, const struct pm_fnarg *args, size_t n,
                   struct pm_vec *out)
{
    struct pm_fnenv env = {
        .a = A,
        .call = parse(q),
        .ts = (int64_t)(ts * 1000),
        .range_end = (int64_t)(ts * 1000),
        .range_start = (int64_t)((ts - range) * 1000),
        .err = ERR,
        .errlen = sizeof ERR,
    };
    ERR[0] = '\0';
    memset(out, 0, sizeof *out);
    return pmfn_call(&env, args, n, out);
}

static struct pm_vec call(const char *q, double ts, double range, const struct pm_fnarg *args,
                          size_t n)
{
    struct pm_vec out;
    int rc = call_rc(q, ts, range, args, n, &out);
    cr_assert_eq(rc, 0, "%s: rc %d %s", q, rc, ERR);
    return out;
}

/* One output element's value (asserting there is exactly one). */
static double one(const char *q, double ts, double range, const struct pm_fnarg *args, size_t n)
{
    struct pm_vec out = call(q, ts, range, args, n);
    cr_assert_eq(out.n, 1, "%s: %zu elements", q, out.n);
    cr_assert_null(out.e[0].h);
    cr_assert_eq(out.e[0].t, (int64_t)(ts * 1000));
    return out.e[0].v;
}

#define SAME(got, want)                                                                            \
    cr_assert((isnan(got) && isnan(want)) || ((got) == (want) && signbit(got) == signbit(want)),   \
              "got %.17g want %.17g", (double)(got), (double)(want))

/* ---- the dataset of PROMQL.md D ---- */

/* http_requests_total{instance="a"} in [from, to]: every 15 s, value t. */
static struct pm_win req_a(double from, double to)
{
    double tv[64];
    size_t n = 0;
    for (double t = 0; t <= 300; t += 15) {
        if (t >= from && t <= to) {
            tv[2 * n] = t;
            tv[2 * n + 1] = t;
            n++;
        }
    }
    return W("__name__=http_requests_total,instance=a,job=api", tv, n);
}

static struct pm_win req_b(double from, double to)
{
    static const double all[] = {0,   100, 15, 110, 30, 120, 45, 130, 60,
                                 140, 75,  2,  90,  12, 105, 22, 120, 32};
    double tv[18];
    size_t n = 0;
    for (size_t i = 0; i < 9; i++) {
        if (all[2 * i] >= from && all[2 * i] <= to) {
            tv[2 * n] = all[2 * i];
            tv[2 * n + 1] = all[2 * i + 1];
            n++;
        }
    }
    return W("__name__=http_requests_total,instance=b,job=api", tv, n);
}

static struct pm_win temp(double from, double to)
{
    static const double all[] = {0, 20, 60, 22, 120, 21, 180, 25, 240, 24};
    double tv[10];
    size_t n = 0;
    for (size_t i = 0; i < 5; i++) {
        if (all[2 * i] >= from && all[2 * i] <= to) {
            tv[2 * n] = all[2 * i];
            tv[2 * n + 1] = all[2 * i + 1];
            n++;
        }
    }
    return W("__name__=temperature_celsius,room=x", tv, n);
}

Test(pmfn, rate_d4_extrapolates_to_the_window_and_drops_the_name)
{
    struct pm_win w = req_a(65, 125);
    struct pm_fnarg a = mat(&w, 1);
    struct pm_vec out = call("rate(http_requests_total{instance=\"a\"}[1m])", 125, 60, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 0.9999999999999999);
    cr_assert(labels_are(&out.e[0].labels, "instance=a,job=api"));
}

Test(pmfn, increase_and_rate_with_a_counter_reset_d5)
{
    struct pm_win w = req_b(5, 125);
    struct pm_fnarg a = mat(&w, 1);
    SAME(one("increase(x[2m])", 125, 120, &a, 1), 70.85714285714285);
    SAME(one("rate(x[2m])", 125, 120, &a, 1), 0.5904761904761904);
}

Test(pmfn, rate_zero_point_clamp_d6_d7_and_window_edge_d8)
{
    struct pm_win w = req_b(65, 125);
    struct pm_fnarg a = mat(&w, 1);
    SAME(one("rate(x[1m])", 125, 60, &a, 1), 0.5888888888888889);

    /* D.7: 2.42 clamps dStart to dZero before the threshold test */
    static const double c[] = {90, 3, 105, 6, 120, 9};
    struct pm_win wc = W("instance=c", c, 3);
    a = mat(&wc, 1);
    SAME(one("rate(x[1m])", 125, 60, &a, 1), 0.16666666666666669);

    struct pm_win w8 = req_b(0, 120);
    a = mat(&w8, 1);
    SAME(one("rate(x[2m])", 120, 120, &a, 1), 0.6);
}

Test(pmfn, one_sample_gives_no_rate_irate_deriv_or_holt_winters)
{
    static const double s[] = {90, 3};
    struct pm_win w = W("instance=c", s, 1);
    struct pm_fnarg a = mat(&w, 1);
    const char *qs[] = {"rate(x[30s])",  "increase(x[30s])", "delta(x[30s])",
                        "irate(x[30s])", "idelta(x[30s])",   "deriv(x[30s])"};
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        struct pm_vec out = call(qs[i], 100, 30, &a, 1);
        cr_assert_eq(out.n, 0, "%s", qs[i]);
    }
    struct pm_fnarg p[2] = {mat(&w, 1), sca(60)};
    cr_assert_eq(call("predict_linear(x[30s], 60)", 100, 30, p, 2).n, 0);
    struct pm_fnarg h[3] = {mat(&w, 1), sca(0.5), sca(0.5)};
    cr_assert_eq(call("holt_winters(x[30s], 0.5, 0.5)", 100, 30, h, 3).n, 0);
    /* but one sample is enough for the *_over_time family */
    SAME(one("count_over_time(x[30s])", 100, 30, &a, 1), 1.0);
    SAME(one("resets(x[30s])", 100, 30, &a, 1), 0.0);
    SAME(one("changes(x[30s])", 100, 30, &a, 1), 0.0);
    /* an empty window gives nothing at all */
    struct pm_win e = W("instance=c", s, 0);
    a = mat(&e, 1);
    cr_assert_eq(call("count_over_time(x[30s])", 100, 30, &a, 1).n, 0);
}

Test(pmfn, irate_idelta_delta_d9_d10_d11)
{
    struct pm_win w = req_b(20, 80);
    struct pm_fnarg a = mat(&w, 1);
    SAME(one("irate(x[1m])", 80, 60, &a, 1), 0.13333333333333333);
    SAME(one("idelta(x[1m])", 80, 60, &a, 1), -138.0);

    struct pm_win t1 = temp(70, 250);
    a = mat(&t1, 1);
    SAME(one("delta(x[3m])", 250, 180, &a, 1), 4.5);
    struct pm_win t2 = temp(60, 240);
    a = mat(&t2, 1);
    SAME(one("delta(x[3m])", 240, 180, &a, 1), 2.0);
    struct pm_win t3 = temp(-50, 250);
    a = mat(&t3, 1);
    SAME(one("idelta(x[5m])", 250, 300, &a, 1), -1.0);
}

Test(pmfn, deriv_predict_linear_changes_resets_d12_to_d14)
{
    struct pm_win w = temp(-50, 250);
    struct pm_fnarg a = mat(&w, 1);
    SAME(one("deriv(x[5m])", 250, 300, &a, 1), 0.018333333333333333);
    struct pm_fnarg p[2] = {mat(&w, 1), sca(600)};
    SAME(one("predict_linear(x[5m], 600)", 250, 300, p, 2), 35.78333333333333);
    SAME(one("changes(x[5m])", 250, 300, &a, 1), 4.0);
    SAME(one("resets(x[5m])", 250, 300, &a, 1), 2.0);
    /* constant y: slope 0; constant +Inf: NaN */
    static const double k[] = {0, 5, 10, 5, 20, 5};
    struct pm_win wk = W("a=b", k, 3);
    a = mat(&wk, 1);
    SAME(one("deriv(x[1m])", 20, 60, &a, 1), 0.0);
    static const double ki[] = {0, INFINITY, 10, INFINITY};
    struct pm_win wi = W("a=b", ki, 2);
    a = mat(&wi, 1);
    SAME(one("deriv(x[1m])", 20, 60, &a, 1), NAN);
}

Test(pmfn, over_time_family_d15)
{
    struct pm_win w = temp(-50, 250);
    struct pm_fnarg a = mat(&w, 1);
    SAME(one("avg_over_time(x[5m])", 250, 300, &a, 1), 22.4);
    SAME(one("stddev_over_time(x[5m])", 250, 300, &a, 1), 1.854723699099141);
    SAME(one("sum_over_time(x[5m])", 250, 300, &a, 1), 112.0);
    SAME(one("min_over_time(x[5m])", 250, 300, &a, 1), 20.0);
    SAME(one("max_over_time(x[5m])", 250, 300, &a, 1), 25.0);
    SAME(one("count_over_time(x[5m])", 250, 300, &a, 1), 5.0);
    SAME(one("present_over_time(x[5m])", 250, 300, &a, 1), 1.0);
    struct pm_fnarg q[2] = {sca(0.9), mat(&w, 1)};
    SAME(one("quantile_over_time(0.9, x[5m])", 250, 300, q, 2), 24.6);
    q[0] = sca(-0.1);
    SAME(one("quantile_over_time(-0.1, x[5m])", 250, 300, q, 2), -INFINITY);
    q[0] = sca(1.1);
    SAME(one("quantile_over_time(1.1, x[5m])", 250, 300, q, 2), INFINITY);
    q[0] = sca(NAN);
    SAME(one("quantile_over_time(NaN, x[5m])", 250, 300, q, 2), NAN);

    /* last_over_time keeps the name, the others drop it */
    struct pm_vec out = call("last_over_time(x[5m])", 250, 300, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 24.0);
    cr_assert(labels_are(&out.e[0].labels, "__name__=temperature_celsius,room=x"));
    out = call("max_over_time(x[5m])", 250, 300, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "room=x"));
    /* stdvar over 1, 3 (exact in binary): mean 2, variance 1 */
    static const double k2[] = {0, 1, 10, 3};
    struct pm_win w2 = W("a=b", k2, 2);
    a = mat(&w2, 1);
    SAME(one("stdvar_over_time(x[5m])", 250, 300, &a, 1), 1.0);
    SAME(one("stddev_over_time(x[5m])", 250, 300, &a, 1), 1.0);
}

Test(pmfn, over_time_nan_inf_and_compensated_sums)
{
    static const double k[] = {0, 1e100, 1, 1, 2, -1e100};
    struct pm_win w = W("a=b", k, 3);
    struct pm_fnarg a = mat(&w, 1);
    /* Neumaier: the 1 survives the cancellation */
    SAME(one("sum_over_time(x[1m])", 2, 60, &a, 1), 1.0);

    static const double n[] = {0, NAN, 1, 1, 2, 2};
    struct pm_win wn = W("a=b", n, 3);
    a = mat(&wn, 1);
    SAME(one("max_over_time(x[1m])", 2, 60, &a, 1), 2.0);
    SAME(one("min_over_time(x[1m])", 2, 60, &a, 1), 1.0);
    /* NaN -> NaN is not a change; NaN -> 1 and 1 -> 2 are */
    SAME(one("changes(x[1m])", 2, 60, &a, 1), 2.0);
    static const double nn[] = {0, NAN, 1, NAN};
    struct pm_win wnn = W("a=b", nn, 2);
    a = mat(&wnn, 1);
    SAME(one("max_over_time(x[1m])", 2, 60, &a, 1), NAN);
    SAME(one("changes(x[1m])", 2, 60, &a, 1), 0.0);

    static const double inf[] = {0, INFINITY, 1, 1, 2, INFINITY};
    struct pm_win wi = W("a=b", inf, 3);
    a = mat(&wi, 1);
    SAME(one("avg_over_time(x[1m])", 2, 60, &a, 1), INFINITY);
    static const double mix[] = {0, INFINITY, 1, -INFINITY};
    struct pm_win wm = W("a=b", mix, 2);
    a = mat(&wm, 1);
    SAME(one("avg_over_time(x[1m])", 2, 60, &a, 1), NAN);
}

Test(pmfn, holt_winters_by_hand_and_its_factor_errors)
{
    /* s1 = 1, b = 1; i=1: x = 1, y = 0.5 * (1 + 1) = 1, s1 = 2;
     * i=2: b = 0.5 * (2 - 1) + 0.5 * 1 = 1, x = 2, y = 0.5 * 3 = 1.5, s1 = 3.5 */
    static const double k[] = {0, 1, 10, 2, 20, 4};
    struct pm_win w = W("a=b", k, 3);
    struct pm_fnarg a[3] = {mat(&w, 1), sca(0.5), sca(0.5)};
    SAME(one("holt_winters(x[1m], 0.5, 0.5)", 20, 60, a, 3), 3.5);

    struct pm_vec out;
    a[1] = sca(1);
    cr_assert_eq(call_rc("holt_winters(x[1m], 1, 0.5)", 20, 60, a, 3, &out), -EDOM);
    cr_assert_str_eq(ERR, "invalid smoothing factor. Expected: 0 < sf < 1, got: 1.000000");
    a[1] = sca(0.5);
    a[2] = sca(INFINITY);
    cr_assert_eq(call_rc("holt_winters(x[1m], 0.5, Inf)", 20, 60, a, 3, &out), -EDOM);
    cr_assert_str_eq(ERR, "invalid trend factor. Expected: 0 < tf < 1, got: +Inf");
    /* no window, no call, no error (Prometheus calls it only with samples) */
    a[0] = mat(&w, 0);
    cr_assert_eq(call_rc("holt_winters(x[1m], 0.5, Inf)", 20, 60, a, 3, &out), 0);
    cr_assert_eq(out.n, 0);
}

Test(pmfn, histogram_quantile_classic_d16_d17)
{
    static const char *les[] = {"0.1", "0.25", "0.5", "1", "+Inf"};
    static const double cnt[] = {10, 30, 45, 50, 52};
    struct pm_vec *v = V();
    char buf[128];
    for (int i = 0; i < 5; i++) {
        snprintf(buf, sizeof buf, "__name__=http_request_duration_seconds_bucket,job=api,le=%s",
                 les[i]);
        add(v, buf, cnt[i]);
    }
    struct pm_fnarg a[2] = {sca(0.5), vecarg(v)};
    struct pm_vec out = call("histogram_quantile(0.5, x)", 100, 0, a, 2);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 0.22);
    cr_assert(labels_are(&out.e[0].labels, "job=api"));
    a[0] = sca(0.99);
    SAME(one("histogram_quantile(0.99, x)", 100, 0, a, 2), 1.0);
    a[0] = sca(0.1);
    SAME(one("histogram_quantile(0.1, x)", 100, 0, a, 2), 0.052000000000000005);
    a[0] = sca(NAN);
    SAME(one("histogram_quantile(NaN, x)", 100, 0, a, 2), NAN);
    a[0] = sca(-1);
    SAME(one("histogram_quantile(-1, x)", 100, 0, a, 2), -INFINITY);
    a[0] = sca(2);
    SAME(one("histogram_quantile(2, x)", 100, 0, a, 2), INFINITY);

    /* D.17: monotonicity fix */
    struct pm_vec *bad = V();
    add(bad, "__name__=bad_bucket,le=1", 5);
    add(bad, "__name__=bad_bucket,le=2", 3);
    add(bad, "__name__=bad_bucket,le=4", 8);
    add(bad, "__name__=bad_bucket,le=+Inf", 10);
    a[0] = sca(0.6);
    a[1] = vecarg(bad);
    out = call("histogram_quantile(0.6, bad_bucket)", 100, 0, a, 2);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 2.6666666666666665);
    cr_assert(labels_are(&out.e[0].labels, ""));

    /* no +Inf bucket: NaN (but phi < 0 still -Inf: checked first) */
    struct pm_vec *noinf = V();
    add(noinf, "__name__=noinf_bucket,le=1", 3);
    add(noinf, "__name__=noinf_bucket,le=2", 6);
    a[0] = sca(0.5);
    a[1] = vecarg(noinf);
    SAME(one("histogram_quantile(0.5, noinf_bucket)", 100, 0, a, 2), NAN);
    a[0] = sca(-0.5);
    SAME(one("histogram_quantile(-0.5, noinf_bucket)", 100, 0, a, 2), -INFINITY);

    /* all counts 0 (rate of idle buckets): NaN */
    struct pm_vec *zero = V();
    add(zero, "le=1", 0);
    add(zero, "le=+Inf", 0);
    a[0] = sca(0.5);
    a[1] = vecarg(zero);
    SAME(one("histogram_quantile(0.5, x)", 100, 0, a, 2), NAN);
    /* only the +Inf bucket: fewer than 2 buckets, NaN */
    struct pm_vec *only = V();
    add(only, "le=+Inf", 4);
    a[1] = vecarg(only);
    SAME(one("histogram_quantile(0.5, x)", 100, 0, a, 2), NAN);
}

Test(pmfn, histogram_quantile_merges_equal_bounds_groups_and_skips_bad_le)
{
    /* le="1" and le="1.0" are one bucket (3 + 1 = 4); "abc" and a missing
     * le are skipped; rank 0.5 * 8 = 4 -> first bucket, whose bound 1 > 0:
     * 0 + 1 * 4 / 4 = 1 */
    struct pm_vec *v = V();
    add(v, "job=a,le=1", 3);
    add(v, "job=a,le=1.0", 1);
    add(v, "job=a,le=abc", 100);
    add(v, "job=a", 100);
    add(v, "job=a,le=+Inf", 8);
    /* a second group, first bound <= 0: the bound itself when the rank
     * falls in it (rank 0.25 * 4 = 1 <= 2) */
    add(v, "job=b,le=-1", 2);
    add(v, "job=b,le=Inf", 4);
    struct pm_fnarg a[2] = {sca(0.5), vecarg(v)};
    struct pm_vec out = call("histogram_quantile(0.5, x)", 100, 0, a, 2);
    cr_assert_eq(out.n, 2);
    cr_assert(labels_are(&out.e[0].labels, "job=a"));
    SAME(out.e[0].v, 1.0);
    cr_assert(labels_are(&out.e[1].labels, "job=b"));
    /* job b at 0.5: rank 2 <= 2 -> b = 0, bound -1 <= 0 -> -1 */
    SAME(out.e[1].v, -1.0);

    /* two metric names with equal other labels: two groups, both {job=a}
     * (the engine's duplicate-labelset check fires, as in Prometheus) */
    struct pm_vec *two = V();
    add(two, "__name__=x_bucket,job=a,le=1", 1);
    add(two, "__name__=x_bucket,job=a,le=+Inf", 2);
    add(two, "__name__=y_bucket,job=a,le=1", 1);
    add(two, "__name__=y_bucket,job=a,le=+Inf", 2);
    a[1] = vecarg(two);
    out = call("histogram_quantile(0.5, x)", 100, 0, a, 2);
    cr_assert_eq(out.n, 2);
    cr_assert(labels_are(&out.e[0].labels, "job=a"));
    cr_assert(labels_are(&out.e[1].labels, "job=a"));
}

Test(pmfn, label_replace_d23_and_go_template_corners)
{
    struct pm_vec *v = V();
    add(v, "__name__=up,instance=10.0.0.1:9100,job=node", 1);
    struct pm_fnarg a[5] = {vecarg(v), str("host"), str("$1"), str("instance"), str("(.*):.*")};
    struct pm_vec out =
        call("label_replace(up, \"host\", \"$1\", \"instance\", \"(.*):.*\")", 100, 0, a, 5);
    cr_assert_eq(out.n, 1);
    cr_assert(
        labels_are(&out.e[0].labels, "__name__=up,host=10.0.0.1,instance=10.0.0.1:9100,job=node"));
    SAME(out.e[0].v, 1.0);

    const char *q = "label_replace(up, \"a\", \"b\", \"c\", \"d\")"; /* only the node matters */
    a[2] = str("$1x"); /* group "1x": empty, so host is not set */
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels, "__name__=up,instance=10.0.0.1:9100,job=node"));
    a[2] = str("${1}x");
    out = call(q, 100, 0, a, 5);
    cr_assert(
        labels_are(&out.e[0].labels, "__name__=up,host=10.0.0.1x,instance=10.0.0.1:9100,job=node"));
    a[2] = str("$1");
    a[4] = str("10\\.0"); /* anchored: no full match, unchanged */
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels, "__name__=up,instance=10.0.0.1:9100,job=node"));

    /* $$, a malformed ${ and a named group */
    a[2] = str("$$-${ip}-${-$ip");
    a[4] = str("(?P<ip>[0-9.]+):(.*)");
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels,
                         "__name__=up,host=$-10.0.0.1-${-10.0.0.1,instance=10.0.0.1:9100,"
                         "job=node"));
    /* an empty expansion deletes the destination (here: job itself) */
    a[1] = str("job");
    a[2] = str("$3");
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels, "__name__=up,instance=10.0.0.1:9100"));
    /* a missing source label is "", which (.*) matches */
    a[1] = str("dst");
    a[2] = str("x$1y");
    a[3] = str("nope");
    a[4] = str("(.*)");
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels, /* "$1y" is group "1y" */
                         "__name__=up,dst=x,instance=10.0.0.1:9100,job=node"));

    /* errors: bad destination name, bad regex (both execution errors in 2.42) */
    a[1] = str("1bad");
    cr_assert_eq(call_rc(q, 100, 0, a, 5, &out), -EDOM);
    cr_assert_str_eq(ERR, "invalid destination label name in label_replace(): 1bad");
    a[1] = str("ok");
    a[4] = str("(");
    cr_assert_eq(call_rc(q, 100, 0, a, 5, &out), -EDOM);
    cr_assert_str_eq(ERR, "invalid regular expression in label_replace(): (");
}

Test(pmfn, label_join_d23)
{
    struct pm_vec *v = V();
    add(v, "__name__=up,instance=10.0.0.1:9100,job=node", 1);
    struct pm_fnarg a[5] = {vecarg(v), str("hp"), str("-"), str("job"), str("instance")};
    const char *q = "label_join(up, \"hp\", \"-\", \"job\", \"instance\")";
    struct pm_vec out = call(q, 100, 0, a, 5);
    cr_assert_eq(out.n, 1);
    cr_assert(labels_are(&out.e[0].labels,
                         "__name__=up,hp=node-10.0.0.1:9100,instance=10.0.0.1:9100,job=node"));
    /* missing labels join as "": "-" is kept; no sources at all deletes */
    a[3] = str("x");
    a[4] = str("y");
    out = call(q, 100, 0, a, 5);
    cr_assert(labels_are(&out.e[0].labels, "__name__=up,hp=-,instance=10.0.0.1:9100,job=node"));
    a[1] = str("job");
    out = call("label_join(up, \"job\", \"-\")", 100, 0, a, 3);
    cr_assert(labels_are(&out.e[0].labels, "__name__=up,instance=10.0.0.1:9100"));
    a[3] = str("b-d");
    cr_assert_eq(call_rc(q, 100, 0, a, 5, &out), -EDOM);
    cr_assert_str_eq(ERR, "invalid source label name in label_join(): b-d");
}

Test(pmfn, absent_labels_from_equality_matchers_d25)
{
    struct pm_vec *empty = V();
    struct pm_fnarg a = vecarg(empty);
    struct pm_vec out = call("absent(nonexistent{job=\"x\",env=~\"p.*\"})", 100, 0, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 1.0);
    cr_assert(labels_are(&out.e[0].labels, "job=x"));
    /* a label matched twice is dropped, the name never appears */
    out = call("absent(x{job=\"a\",job=\"b\",foo=\"bar\"})", 100, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "foo=bar"));
    out = call("absent({__name__=\"x\",a=\"1\",a!=\"2\"})", 100, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, ""));
    /* a regex before the '=' does not stop it (2.42's map logic) */
    out = call("absent(x{a=~\"z\",a=\"1\"})", 100, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "a=1"));
    out = call("absent(((x{a=\"1\"})))", 100, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "a=1"));
    out = call("absent(sum(x{a=\"1\"}))", 100, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, ""));
    /* present: nothing */
    struct pm_vec *v = V();
    add(v, "__name__=node_load,host=a", 1);
    a = vecarg(v);
    cr_assert_eq(call("absent(node_load)", 100, 0, &a, 1).n, 0);

    /* absent_over_time: 1 only when every window is empty */
    static const double s[] = {90, 3};
    struct pm_win w[2] = {W("a=1", s, 0), W("a=2", s, 0)};
    struct pm_fnarg m = mat(w, 2);
    out = call("absent_over_time(x{a=\"1\",b=\"2\"}[1m])", 100, 60, &m, 1);
    cr_assert_eq(out.n, 1);
    cr_assert(labels_are(&out.e[0].labels, "a=1,b=2"));
    w[1] = W("a=2", s, 1);
    cr_assert_eq(call("absent_over_time(x{a=\"1\"}[1m])", 100, 60, &m, 1).n, 0);
}

Test(pmfn, scalar_vector_time_pi_timestamp_sort)
{
    struct pm_vec *v = V();
    add(v, "__name__=n,host=a", 1);
    add(v, "__name__=n,host=b", 4);
    struct pm_fnarg a = vecarg(v);
    SAME(one("scalar(n)", 250, 0, &a, 1), NAN);
    struct pm_vec *v1 = V();
    add(v1, "__name__=n,host=a", 7);
    a = vecarg(v1);
    SAME(one("scalar(n)", 250, 0, &a, 1), 7.0);
    struct pm_fnarg s = sca(3);
    struct pm_vec out = call("vector(3)", 250, 0, &s, 1);
    cr_assert_eq(out.n, 1);
    cr_assert_eq(out.e[0].labels.n, 0);
    SAME(out.e[0].v, 3.0);
    SAME(one("time()", 250.5, 0, NULL, 0), 250.5);
    SAME(one("pi()", 1, 0, NULL, 0), 3.141592653589793);

    struct pm_vec *tv = V();
    struct pm_velem e = {.labels = L("__name__=temperature_celsius,room=x"), .v = 24, .t = 240000};
    cr_assert_eq(pm_vec_push(A, tv, &e), 0);
    a = vecarg(tv);
    out = call("timestamp(temperature_celsius)", 250, 0, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 240.0);
    cr_assert(labels_are(&out.e[0].labels, "room=x"));

    /* sort / sort_desc: input order (the engine sorts), labels kept,
     * histogram samples passed through whole */
    static double pos[] = {1};
    struct pm_hist h = {.count = 1, .pos_offset = 1, .n_pos = 1, .pos = pos};
    struct pm_velem he = {.labels = L("__name__=n,host=c"), .h = &h, .t = 1};
    cr_assert_eq(pm_vec_push(A, v, &he), 0);
    a = vecarg(v);
    out = call("sort(n)", 250, 0, &a, 1);
    cr_assert_eq(out.n, 3);
    SAME(out.e[0].v, 1.0);
    cr_assert_eq(out.e[2].h, &h);
    cr_assert_eq(out.e[2].t, 250000);
    cr_assert(labels_are(&out.e[2].labels, "__name__=n,host=c"));
    v->n = 2;
    out = call("sort_desc(n)", 250, 0, &a, 1);
    cr_assert_eq(out.n, 2);
    cr_assert(labels_are(&out.e[0].labels, "__name__=n,host=a"));
    cr_assert(labels_are(&out.e[1].labels, "__name__=n,host=b"));
}

Test(pmfn, math_functions_drop_the_name_and_follow_go)
{
    struct pm_vec *v = V();
    add(v, "__name__=m,k=a", 1e15);
    struct pm_fnarg a = vecarg(v);
    struct pm_vec out = call("log10(m)", 1, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));
    /* Go: math.Log10(x) = math.Log(x) * (1/Ln10), not the correctly
     * rounded 15 (given a correctly rounded log(1e15)) */
    SAME(out.e[0].v, 14.999999999999998);
    v->e[0].v = 1000;
    SAME(one("log10(m)", 1, 0, &a, 1), 3.0);
    v->e[0].v = 8;
    SAME(one("log2(m)", 1, 0, &a, 1), 3.0);
    SAME(one("sqrt(m)", 1, 0, &a, 1), 2.8284271247461903);
    v->e[0].v = -2.5;
    SAME(one("abs(m)", 1, 0, &a, 1), 2.5);
    SAME(one("ceil(m)", 1, 0, &a, 1), -2.0);
    SAME(one("floor(m)", 1, 0, &a, 1), -3.0);
    SAME(one("sgn(m)", 1, 0, &a, 1), -1.0);
    v->e[0].v = -0.0;
    SAME(one("sgn(m)", 1, 0, &a, 1), -0.0);
    v->e[0].v = 180;
    SAME(one("rad(m)", 1, 0, &a, 1), 3.141592653589793);
    v->e[0].v = 3.141592653589793;
    SAME(one("deg(m)", 1, 0, &a, 1), 180.0);
    v->e[0].v = 0;
    SAME(one("exp(m)", 1, 0, &a, 1), 1.0);
    SAME(one("cos(m)", 1, 0, &a, 1), 1.0);
    SAME(one("sin(m)", 1, 0, &a, 1), 0.0);
    SAME(one("tan(m)", 1, 0, &a, 1), 0.0);
    SAME(one("asin(m)", 1, 0, &a, 1), 0.0);
    SAME(one("atan(m)", 1, 0, &a, 1), 0.0);
    SAME(one("sinh(m)", 1, 0, &a, 1), 0.0);
    SAME(one("cosh(m)", 1, 0, &a, 1), 1.0);
    SAME(one("tanh(m)", 1, 0, &a, 1), 0.0);
    SAME(one("asinh(m)", 1, 0, &a, 1), 0.0);
    SAME(one("atanh(m)", 1, 0, &a, 1), 0.0);
    SAME(one("ln(m)", 1, 0, &a, 1), -INFINITY);
    v->e[0].v = 1;
    SAME(one("acos(m)", 1, 0, &a, 1), 0.0);
    SAME(one("acosh(m)", 1, 0, &a, 1), 0.0);
    v->e[0].v = -1;
    SAME(one("sqrt(m)", 1, 0, &a, 1), NAN);
}

Test(pmfn, clamp_and_round)
{
    struct pm_vec *v = V();
    add(v, "__name__=m,k=a", 5);
    add(v, "__name__=m,k=b", NAN);
    add(v, "__name__=m,k=c", -7);
    struct pm_fnarg a[3] = {vecarg(v), sca(0), sca(2)};
    struct pm_vec out = call("clamp(m, 0, 2)", 1, 0, a, 3);
    cr_assert_eq(out.n, 3);
    SAME(out.e[0].v, 2.0);
    SAME(out.e[1].v, NAN); /* Go's Max/Min propagate NaN */
    SAME(out.e[2].v, 0.0);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));
    a[1] = sca(3);
    a[2] = sca(1);
    cr_assert_eq(call("clamp(m, 3, 1)", 1, 0, a, 3).n, 0);
    a[1] = sca(1);
    out = call("clamp_max(m, 1)", 1, 0, a, 2);
    SAME(out.e[0].v, 1.0);
    SAME(out.e[2].v, -7.0);
    out = call("clamp_min(m, 1)", 1, 0, a, 2);
    SAME(out.e[0].v, 5.0);
    SAME(out.e[1].v, NAN);
    SAME(out.e[2].v, 1.0);

    struct pm_vec *r = V();
    add(r, "k=a", 2.5);
    add(r, "k=b", -2.5);
    add(r, "k=c", 1.25);
    struct pm_fnarg ra[2] = {vecarg(r), sca(0.1)};
    out = call("round(m)", 1, 0, ra, 1);
    SAME(out.e[0].v, 3.0);  /* ties up */
    SAME(out.e[1].v, -2.0); /* floor(-2.5 + 0.5) */
    SAME(out.e[2].v, 1.0);
    out = call("round(m, 0.1)", 1, 0, ra, 2);
    SAME(out.e[2].v, 1.3); /* floor(12.5 + 0.5) / 10 */
    ra[1] = sca(5);
    out = call("round(m, 5)", 1, 0, ra, 2);
    SAME(out.e[0].v, 5.0); /* floor(0.5 + 0.5) / 0.2 */
    SAME(out.e[1].v, 0.0);
}

Test(pmfn, date_functions_in_utc)
{
    /* 2024-02-29 12:34:56 UTC, a Thursday, day 60 of a leap year */
    struct pm_vec *v = V();
    add(v, "__name__=t,k=a", 1709210096.9);
    struct pm_fnarg a = vecarg(v);
    SAME(one("day_of_month(t)", 1, 0, &a, 1), 29.0);
    SAME(one("day_of_week(t)", 1, 0, &a, 1), 4.0);
    SAME(one("day_of_year(t)", 1, 0, &a, 1), 60.0);
    SAME(one("days_in_month(t)", 1, 0, &a, 1), 29.0);
    SAME(one("hour(t)", 1, 0, &a, 1), 12.0);
    SAME(one("minute(t)", 1, 0, &a, 1), 34.0);
    SAME(one("month(t)", 1, 0, &a, 1), 2.0);
    SAME(one("year(t)", 1, 0, &a, 1), 2024.0);
    struct pm_vec out = call("year(t)", 1, 0, &a, 1);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));
    /* no argument: the step time, labels {} */
    out = call("year()", 1709210096, 0, NULL, 0);
    cr_assert_eq(out.n, 1);
    cr_assert_eq(out.e[0].labels.n, 0);
    SAME(out.e[0].v, 2024.0);
    SAME(one("day_of_year()", 1709210096, 0, NULL, 0), 60.0);
    /* -1: 1969-12-31 23:59:59, a Wednesday */
    v->e[0].v = -1;
    SAME(one("year(t)", 1, 0, &a, 1), 1969.0);
    SAME(one("day_of_week(t)", 1, 0, &a, 1), 3.0);
    SAME(one("hour(t)", 1, 0, &a, 1), 23.0);
    SAME(one("days_in_month(t)", 1, 0, &a, 1), 31.0);
    /* 2023-03-01 00:00:00 (1677628800): not a leap year */
    v->e[0].v = 1677628800;
    SAME(one("month(t)", 1, 0, &a, 1), 3.0);
    SAME(one("day_of_month(t)", 1, 0, &a, 1), 1.0);
    SAME(one("day_of_year(t)", 1, 0, &a, 1), 60.0);
    v->e[0].v = 1677628799;
    SAME(one("days_in_month(t)", 1, 0, &a, 1), 28.0);
    /* 2000-12-31 (leap century): day 366 */
    v->e[0].v = 978220800;
    SAME(one("day_of_year(t)", 1, 0, &a, 1), 366.0);
}

Test(pmfn, histogram_samples_read_as_zero_by_float_functions)
{
    static double pos[] = {2};
    struct pm_hist h = {.schema = 0, .count = 2, .sum = 3, .pos_offset = 1, .n_pos = 1, .pos = pos};
    struct pm_vec *v = V();
    struct pm_velem e = {.labels = L("__name__=h,k=a"), .v = 123, .h = &h};
    cr_assert_eq(pm_vec_push(A, v, &e), 0);
    add(v, "__name__=f,k=b", -4);
    struct pm_fnarg a = vecarg(v);
    /* 2.42: abs(histogram) is abs(0) */
    struct pm_vec out = call("abs(x)", 1, 0, &a, 1);
    cr_assert_eq(out.n, 2);
    SAME(out.e[0].v, 0.0);
    cr_assert_null(out.e[0].h);
    SAME(out.e[1].v, 4.0);
    /* histogram_count / histogram_sum skip the floats */
    out = call("histogram_count(x)", 1, 0, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 2.0);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));
    out = call("histogram_sum(x)", 1, 0, &a, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 3.0);
    struct pm_fnarg fa[3] = {sca(0), sca(1.5), vecarg(v)};
    out = call("histogram_fraction(0, 1.5, x)", 1, 0, fa, 3);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 0.5); /* half of bucket (1,2] */
    /* native histogram_quantile: (1,2] holds both, rank 1 -> 1.5 */
    struct pm_fnarg qa[2] = {sca(0.5), vecarg(v)};
    out = call("histogram_quantile(0.5, x)", 1, 0, qa, 2);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].v, 1.5);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));

    /* a window with a histogram: count_over_time counts it, sum adds 0,
     * last_over_time of it is 0 */
    struct pm_hsample hs = {.t = 20000, .h = &h};
    static const double f[] = {0, 5, 10, 7};
    struct pm_win w = W("__name__=x,k=c", f, 2);
    w.h = &hs;
    w.nh = 1;
    struct pm_fnarg m = mat(&w, 1);
    SAME(one("count_over_time(x[1m])", 20, 60, &m, 1), 3.0);
    SAME(one("sum_over_time(x[1m])", 20, 60, &m, 1), 12.0);
    SAME(one("last_over_time(x[1m])", 20, 60, &m, 1), 0.0);
    SAME(one("idelta(x[1m])", 20, 60, &m, 1), -7.0);
    /* rate over a mix of floats and histograms: nothing */
    cr_assert_eq(call("rate(x[1m])", 20, 60, &m, 1).n, 0);
}

Test(pmfn, native_histogram_rate_and_increase)
{
    /* counts 2, 4, 6 at 0, 15, 30 in (1,2]: rate over [0,30] (range 30 s)
     * is (6 - 2) / 30 per second, no extrapolation (both ends on the
     * window edges) */
    static double b0[] = {2}, b1[] = {4}, b2[] = {6};
    struct pm_hist h0 = {.count = 2, .sum = 3, .pos_offset = 1, .n_pos = 1, .pos = b0};
    struct pm_hist h1 = {.count = 4, .sum = 6, .pos_offset = 1, .n_pos = 1, .pos = b1};
    struct pm_hist h2 = {.count = 6, .sum = 9, .pos_offset = 1, .n_pos = 1, .pos = b2};
    struct pm_hsample hs[3] = {{0, &h0}, {15000, &h1}, {30000, &h2}};
    struct pm_win w = {.labels = L("__name__=lat,k=a"), .h = hs, .nh = 3};
    struct pm_fnarg m = mat(&w, 1);
    struct pm_vec out = call("rate(lat[30s])", 30, 30, &m, 1);
    cr_assert_eq(out.n, 1);
    cr_assert_not_null(out.e[0].h);
    cr_assert(labels_are(&out.e[0].labels, "k=a"));
    const struct pm_hist *r = out.e[0].h;
    /* factor = (30 / 30) / 30 */
    SAME(r->count, 4 * (1.0 / 30));
    SAME(r->sum, 6 * (1.0 / 30));
    cr_assert_eq(r->n_pos, 1);
    cr_assert_eq(r->pos_offset, 1);
    SAME(r->pos[0], 4 * (1.0 / 30));
    out = call("increase(lat[30s])", 30, 30, &m, 1);
    SAME(out.e[0].h->count, 4.0);

    /* a reset at 15 s (count 4 -> 1): 3 - 2 + 2 = 3 */
    static double c1[] = {1}, c2[] = {3};
    struct pm_hist r1 = {.count = 1, .sum = 1, .pos_offset = 1, .n_pos = 1, .pos = c1};
    struct pm_hist r2 = {.count = 3, .sum = 4, .pos_offset = 1, .n_pos = 1, .pos = c2};
    struct pm_hsample rs[3] = {{0, &h0}, {15000, &r1}, {30000, &r2}};
    w.h = rs;
    out = call("increase(lat[30s])", 30, 30, &m, 1);
    cr_assert_eq(out.n, 1);
    SAME(out.e[0].h->count, 3.0);
    SAME(out.e[0].h->sum, 4.0);
    SAME(out.e[0].h->pos[0], 3.0);
    /* delta does no reset handling: 3 - 2 = 1 */
    out = call("delta(lat[30s])", 30, 30, &m, 1);
    SAME(out.e[0].h->count, 1.0);
}
