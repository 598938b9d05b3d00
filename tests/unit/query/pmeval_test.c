/*
 * pmeval_test.c - the PromQL evaluator core (query/pmeval*.c) over an
 * in-memory pm_source holding PROMQL.md section D's data set (plus a few
 * series of our own): lookback and staleness, offset and @, subquery
 * alignment, step-invariant subtrees, every aggregation, every class of
 * binary operator with Prometheus's matching errors, unary minus, result
 * shapes of instant and range queries, the duplicate-labelset check,
 * max_samples, and what each selector asks the source for.
 *
 * Expected values are PROMQL.md D's (executed against Prometheus 2.42) or
 * worked out by hand from engine.go's rules at v2.42.0, never from this
 * code. Functions come from pmfn_call; where a test goes through one
 * (rate, count_over_time, ...) the value is the function's as PROMQL.md
 * B.3 / B.5 define it, and the point of the test is the engine's part
 * (windows, steps, alignment, names).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval.h"
#include "query/pmeval_eng.h"
#include "query/pmeval_int.h"
#include "query/promql.h"
#include "storage/arena.h"
#include "storage/promname.h"

/* ---- in-memory source ------------------------------------------------------ */

#define MAXS 64
#define S(x) ((int64_t)(x)*1000)

struct db {
    arena *a;
    struct pm_series s[MAXS];
    size_t n;
    /* every select call */
    int calls;
    int64_t mint[16], maxt[16];
};

static struct db db;

static int db_select(void *ctx, const struct promql_matcher *m, size_t n, int64_t mint,
                     int64_t maxt, struct pm_set *out)
{
    struct db *d = ctx;
    if (d->calls < 16) {
        d->mint[d->calls] = mint;
        d->maxt[d->calls] = maxt;
    }
    d->calls++;
    out->s = arena_alloc(d->a, (d->n + 1) * sizeof *out->s);
    cr_assert_not_null(out->s);
    out->n = 0;
    for (size_t i = 0; i < d->n; i++) {
        const struct pm_series *s = &d->s[i];
        bool ok = true;
        for (size_t j = 0; j < n && ok; j++) {
            uint32_t len;
            const char *v = pm_labels_get(&s->labels, m[j].name.s, m[j].name.n, &len);
            ok = promql_matcher_matches(&m[j], v != NULL ? v : "", len);
        }
        if (!ok) {
            continue;
        }
        struct pm_series c = {.labels = s->labels};
        size_t f0 = 0, f1;
        while (f0 < s->nf && s->f[f0].t < mint) {
            f0++;
        }
        for (f1 = f0; f1 < s->nf && s->f[f1].t <= maxt; f1++) {
        }
        c.f = s->f + f0;
        c.nf = f1 - f0;
        size_t h0 = 0, h1;
        while (h0 < s->nh && s->h[h0].t < mint) {
            h0++;
        }
        for (h1 = h0; h1 < s->nh && s->h[h1].t <= maxt; h1++) {
        }
        c.h = s->h + h0;
        c.nh = h1 - h0;
        if (c.nf + c.nh != 0) {
            out->s[out->n++] = c;
        }
    }
    pm_set_sort(out);
    return 0;
}

static const struct pm_source src = {.ctx = &db, .select = db_select};

/* A series from "name", "k1", "v1", ..., NULL; floats from (t seconds, v) pairs. */
static struct pm_series *add(const char *name, const char *const *kv)
{
    cr_assert_lt(db.n, MAXS);
    struct pm_series *s = &db.s[db.n++];
    memset(s, 0, sizeof *s);
    struct pm_lb b;
    pm_lb_init(&b, db.a, NULL);
    pm_lb_set(&b, "__name__", 8, name, strlen(name));
    for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2) {
        pm_lb_set(&b, kv[i], strlen(kv[i]), kv[i + 1], strlen(kv[i + 1]));
    }
    cr_assert_eq(pm_lb_done(&b, &s->labels), 0);
    return s;
}

static void floats(struct pm_series *s, const double *tv, size_t n)
{
    struct pm_fsample *f = arena_alloc(db.a, n * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        f[i].t = S(tv[2 * i]);
        f[i].v = tv[2 * i + 1];
    }
    s->f = f;
    s->nf = n;
}

/* every 15 s from 0 to 300 at value v (or t when v is NaN) */
static void every15(struct pm_series *s, double v)
{
    double tv[2 * 21];
    for (int i = 0; i <= 20; i++) {
        tv[2 * i] = 15 * i;
        tv[2 * i + 1] = isnan(v) ? 15 * i : v;
    }
    floats(s, tv, 21);
}

#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void setup(void)
{
    memset(&db, 0, sizeof db);
    db.a = arena_new(1 << 16);
    cr_assert_not_null(db.a);
    every15(add("http_requests_total", KV("job", "api", "instance", "a")), NAN);
    floats(add("http_requests_total", KV("job", "api", "instance", "b")),
           (double[]){0, 100, 15, 110, 30, 120, 45, 130, 60, 140, 75, 2, 90, 12, 105, 22, 120, 32},
           9);
    floats(add("http_requests_total", KV("job", "api", "instance", "c")),
           (double[]){90, 3, 105, 6, 120, 9}, 3);
    floats(add("temperature_celsius", KV("room", "x")),
           (double[]){0, 20, 60, 22, 120, 21, 180, 25, 240, 24}, 5);
    every15(add("node_load", KV("host", "a", "env", "prod")), 1);
    every15(add("node_load", KV("host", "b", "env", "prod")), 4);
    every15(add("node_load", KV("host", "c", "env", "dev")), 2);
    every15(add("node_load", KV("host", "d", "env", "dev")), 8);
    every15(add("node_load", KV("host", "e", "env", "dev")), 2);
    every15(add("node_info", KV("host", "a", "os", "linux")), 1);
    every15(add("node_info", KV("host", "b", "os", "linux")), 1);
    every15(add("node_info", KV("host", "c", "os", "bsd")), 1);
    floats(add("weird", KV("k", "nan")), (double[]){0, NAN}, 1);
    floats(add("weird", KV("k", "inf")), (double[]){0, INFINITY}, 1);
    floats(add("weird", KV("k", "one")), (double[]){0, 1}, 1);
    every15(add("up", KV("job", "node", "instance", "10.0.0.1:9100")), 1);
    /* ours */
    every15(add("other_load", KV("host", "a", "env", "prod")), 3);
    floats(add("stale", KV("k", "s")), (double[]){0, 1, 30, 2, 60, promname_stale_nan(), 90, 4}, 4);
    floats(add("early", KV("k", "x")), (double[]){0, 1, 30, 1, 60, 1}, 3);
    floats(add("late", KV("k", "x")), (double[]){400, 1, 430, 1, 460, 1}, 3);
}

static void teardown(void)
{
    arena_free(db.a);
}

TestSuite(pmeval, .init = setup, .fini = teardown);

/* ---- running queries ---------------------------------------------------------- */

static char err[1024];
static uint64_t max_samples = PM_DEFAULT_MAX_SAMPLES;

static int run_range(const char *q, int64_t start, int64_t end, int64_t step, struct pm_result *r)
{
    struct promql_expr *e;
    char perr[256];
    int rc = promql_parse(q, strlen(q), &e, perr, sizeof perr);
    cr_assert_eq(rc, 0, "%s: %s", q, perr);
    struct pm_eval_opts o = {
        .start_ms = start, .end_ms = end, .step_ms = step, .max_samples = max_samples};
    err[0] = '\0';
    rc = pm_eval(e, &o, &src, db.a, r, err, sizeof err);
    /* The result must not point into the AST: free it before anyone reads. */
    promql_free(e);
    return rc;
}

static void ok_range(const char *q, int64_t start, int64_t end, int64_t step, struct pm_result *r)
{
    int rc = run_range(q, start, end, step, r);
    cr_assert_eq(rc, 0, "%s: rc %d: %s", q, rc, err);
}

static void ok_at(const char *q, int64_t t, struct pm_result *r)
{
    ok_range(q, t, t, 0, r);
}

static const char *lstr(const struct pm_labels *ls)
{
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    size_t w = 0;
    b[w++] = '{';
    for (uint32_t i = 0; i < ls->n; i++) {
        w += (size_t)snprintf(b + w, 512 - w, "%s%.*s=\"%.*s\"", i ? ", " : "",
                              (int)ls->v[i].name_len, ls->v[i].name, (int)ls->v[i].value_len,
                              ls->v[i].value);
    }
    snprintf(b + w, 512 - w, "}");
    return b;
}

struct ex {
    const char *labels;
    double v;
};

/* Instant vector result: exactly these elements in this order, values to
 * the bit (NaN matches NaN). */
static void vec_is(const char *q, int64_t t, const struct ex *want, size_t n)
{
    struct pm_result r;
    ok_at(q, t, &r);
    cr_assert_eq(r.type, PM_RES_VECTOR, "%s: type %d", q, r.type);
    cr_assert_eq(r.t, t);
    cr_assert_eq(r.set.n, n, "%s: %zu elements, want %zu (first %s)", q, r.set.n, n,
                 r.set.n ? lstr(&r.set.s[0].labels) : "-");
    for (size_t i = 0; i < n; i++) {
        const struct pm_series *s = &r.set.s[i];
        cr_assert_str_eq(lstr(&s->labels), want[i].labels, "%s: element %zu", q, i);
        cr_assert_eq(s->nf, 1, "%s", q);
        cr_assert_eq(s->f[0].t, t, "%s", q);
        if (isnan(want[i].v)) {
            cr_assert(isnan(s->f[0].v), "%s: %zu is %.17g", q, i, s->f[0].v);
        } else {
            cr_assert_eq(s->f[0].v, want[i].v, "%s: %s is %.17g, want %.17g", q, want[i].labels,
                         s->f[0].v, want[i].v);
        }
    }
}

#define VEC(q, t, ...)                                                                             \
    do {                                                                                           \
        static const struct ex w_[] = {__VA_ARGS__};                                               \
        vec_is(q, S(t), w_, sizeof w_ / sizeof w_[0]);                                             \
    } while (0)

static void empty_at(const char *q, int64_t t)
{
    struct pm_result r;
    ok_at(q, S(t), &r);
    cr_assert_eq(r.type, PM_RES_VECTOR, "%s", q);
    cr_assert_eq(r.set.n, 0, "%s: %zu elements (%s)", q, r.set.n,
                 r.set.n ? lstr(&r.set.s[0].labels) : "");
}

static void scalar_is(const char *q, int64_t t, double v)
{
    struct pm_result r;
    ok_at(q, S(t), &r);
    cr_assert_eq(r.type, PM_RES_SCALAR, "%s", q);
    cr_assert_eq(r.t, S(t));
    cr_assert_eq(r.v, v, "%s: %.17g want %.17g", q, r.v, v);
}

static void fails_at(const char *q, int64_t t, int want_rc, const char *msg)
{
    struct pm_result r;
    int rc = run_range(q, S(t), S(t), 0, &r);
    cr_assert_eq(rc, want_rc, "%s: rc %d (%s)", q, rc, err);
    cr_assert_str_eq(err, msg, "%s", q);
}

/* ---- selectors ------------------------------------------------------------------ */

Test(pmeval, instant_selector_takes_newest_sample_with_eval_time)
{
    /* D.1 */
    VEC("http_requests_total{instance=\"a\"}", 130,
        {"{__name__=\"http_requests_total\", instance=\"a\", job=\"api\"}", 120});
}

Test(pmeval, lookback_is_closed_on_the_left_in_2x)
{
    /* D.2: 240 is exactly 5m before 540 and still counts in 2.x. */
    VEC("temperature_celsius", 539, {"{__name__=\"temperature_celsius\", room=\"x\"}", 24});
    VEC("temperature_celsius", 540, {"{__name__=\"temperature_celsius\", room=\"x\"}", 24});
    empty_at("temperature_celsius", 541);
}

Test(pmeval, staleness_marker_hides_the_series)
{
    VEC("stale", 59, {"{__name__=\"stale\", k=\"s\"}", 2});
    empty_at("stale", 60); /* the marker is the newest sample: nothing, not 2 */
    empty_at("stale", 89);
    VEC("stale", 90, {"{__name__=\"stale\", k=\"s\"}", 4});
    /* A range selector skips the marker. */
    struct pm_result r;
    ok_at("stale[90s]", S(90), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 3);
    cr_assert_eq(r.set.s[0].f[0].t, S(0));
    cr_assert_eq(r.set.s[0].f[1].t, S(30));
    cr_assert_eq(r.set.s[0].f[2].t, S(90));
    cr_assert_eq(r.set.s[0].f[2].v, 4);
}

Test(pmeval, instant_range_selector_gives_raw_samples_closed_both_ends)
{
    /* D.3 */
    struct pm_result r;
    ok_at("temperature_celsius[2m]", S(240), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{__name__=\"temperature_celsius\", room=\"x\"}");
    cr_assert_eq(r.set.s[0].nf, 3);
    const double want[3][2] = {{120, 21}, {180, 25}, {240, 24}};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(want[i][0]));
        cr_assert_eq(r.set.s[0].f[i].v, want[i][1]);
    }
    /* count_over_time over [60, 120] takes 5 samples, 60 included (D.3). */
    VEC("count_over_time(http_requests_total{instance=\"a\"}[1m])", 120,
        {"{instance=\"a\", job=\"api\"}", 5});
}

Test(pmeval, offset_and_at)
{
    /* D.25 */
    VEC("temperature_celsius offset 1m", 250,
        {"{__name__=\"temperature_celsius\", room=\"x\"}", 25});
    VEC("temperature_celsius @ 100", 250, {"{__name__=\"temperature_celsius\", room=\"x\"}", 22});
    VEC("temperature_celsius @ 100 offset 1m", 250,
        {"{__name__=\"temperature_celsius\", room=\"x\"}", 20});
    VEC("temperature_celsius offset -2m", 60,
        {"{__name__=\"temperature_celsius\", room=\"x\"}", 25});
    VEC("timestamp(temperature_celsius)", 250, {"{room=\"x\"}", 240});
    VEC("timestamp(temperature_celsius @ 100)", 250, {"{room=\"x\"}", 60});
    /* @ start() / end() of a range query: the same sample at every step. */
    struct pm_result r;
    ok_range("temperature_celsius @ end()", S(0), S(240), S(60), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 5);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(60 * i));
        cr_assert_eq(r.set.s[0].f[i].v, 24);
    }
    ok_range("temperature_celsius @ start()", S(120), S(240), S(60), &r);
    cr_assert_eq(r.set.s[0].nf, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(120 + 60 * i));
        cr_assert_eq(r.set.s[0].f[i].v, 21);
    }
}

Test(pmeval, step_invariant_subtree_is_evaluated_once_and_repeated)
{
    struct pm_result r;
    /* The whole expression is step-invariant: one select, the @ time's
     * range, the value at every step. */
    ok_range("sum(temperature_celsius @ 100) * 2", S(0), S(600), S(60), &r);
    cr_assert_eq(db.calls, 1);
    cr_assert_eq(db.mint[0], S(100 - 300));
    cr_assert_eq(db.maxt[0], S(100));
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{}");
    cr_assert_eq(r.set.s[0].nf, 11);
    for (int i = 0; i < 11; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(60 * i));
        cr_assert_eq(r.set.s[0].f[i].v, 44);
    }
    /* A range function with @ end(): every step gets the window at end(). */
    ok_range("count_over_time(temperature_celsius[2m] @ end())", S(0), S(240), S(120), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r.set.s[0].f[i].v, 3); /* 120, 180, 240 */
    }
    /* Mixed: an invariant side next to a per-step side. */
    ok_range("temperature_celsius - on(room) temperature_celsius @ 0", S(0), S(240), S(120), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{room=\"x\"}");
    cr_assert_eq(r.set.s[0].nf, 3);
    cr_assert_eq(r.set.s[0].f[0].v, 0);
    cr_assert_eq(r.set.s[0].f[1].v, 1);
    cr_assert_eq(r.set.s[0].f[2].v, 4);
}

Test(pmeval, selector_time_ranges)
{
    struct pm_result r;
    ok_range("count_over_time(temperature_celsius[5m] offset 1m)", S(1000), S(2000), S(100), &r);
    cr_assert_eq(db.calls, 1);
    cr_assert_eq(db.mint[0], S(1000 - 300 - 60));
    cr_assert_eq(db.maxt[0], S(2000 - 60));
    db.calls = 0;
    ok_range("max_over_time(temperature_celsius[10m:1m] offset 2m)", S(1000), S(2000), S(100), &r);
    cr_assert_eq(db.calls, 1);
    cr_assert_eq(db.mint[0], S(1000 - 120 - 600 - 300));
    cr_assert_eq(db.maxt[0], S(2000 - 120));
    db.calls = 0;
    ok_range("max_over_time(temperature_celsius[10m:1m] @ 500)", S(1000), S(2000), S(100), &r);
    cr_assert_eq(db.mint[0], S(500 - 600 - 300));
    cr_assert_eq(db.maxt[0], S(500));
    db.calls = 0;
    /* One select per selector node, even when a node is used twice. */
    ok_at("node_load + node_load", S(100), &r);
    cr_assert_eq(db.calls, 2);
    cr_assert_eq(db.mint[0], S(100 - 300));
    cr_assert_eq(db.maxt[1], S(100));
}

Test(pmeval, subquery_steps_are_aligned_to_the_epoch)
{
    /* D.24 */
    VEC("max_over_time(temperature_celsius[2m:1m])", 250, {"{room=\"x\"}", 25});
    VEC("count_over_time(temperature_celsius[2m:1m])", 240, {"{room=\"x\"}", 3});
    /* @ 250: first multiple of 60 >= 130 is 180: steps 180, 240. */
    VEC("count_over_time(temperature_celsius[2m:1m])", 250, {"{room=\"x\"}", 2});
    /* step 45s, @ 250: >= 130 -> 135, 180, 225 (values 21, 25, 25). */
    VEC("sum_over_time(temperature_celsius[2m:45s])", 250, {"{room=\"x\"}", 71});
    /* offset moves the window: [70, 190] -> 120, 180 -> 21 + 25. */
    VEC("sum_over_time(temperature_celsius[2m:1m] offset 1m)", 250, {"{room=\"x\"}", 46});
    /* @ on the subquery: window [0, 120] at every step. */
    VEC("sum_over_time(temperature_celsius[2m:1m] @ 120)", 600, {"{room=\"x\"}", 63});
    /* An instant query of a subquery: a matrix at the inner steps, name kept. */
    struct pm_result r;
    ok_at("temperature_celsius[2m:1m]", S(250), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{__name__=\"temperature_celsius\", room=\"x\"}");
    cr_assert_eq(r.set.s[0].nf, 2);
    cr_assert_eq(r.set.s[0].f[0].t, S(180));
    cr_assert_eq(r.set.s[0].f[1].t, S(240));
    cr_assert_eq(r.set.s[0].f[1].v, 24);
}

Test(pmeval, rate_windows_through_pmfn)
{
    /* D.4 - D.7 with the engine's windows [t - 1m, t] */
    struct pm_result r;
    ok_at("sum(rate(http_requests_total[1m]))", S(125), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_float_eq(r.set.s[0].f[0].v, 1.7555555555555555, 1e-12);
    ok_at("increase(http_requests_total{instance=\"b\"}[2m])", S(125), &r);
    cr_assert_float_eq(r.set.s[0].f[0].v, 70.85714285714285, 1e-12);
    ok_at("rate(http_requests_total{instance=\"b\"}[2m])", S(120), &r);
    cr_assert_float_eq(r.set.s[0].f[0].v, 0.6, 1e-12);
    empty_at("rate(http_requests_total{instance=\"c\"}[30s])", 100);
}

/* ---- aggregations --------------------------------------------------------------------- */

Test(pmeval, aggregations)
{
    /* D.18; groups in first-seen order, the source's: dev c d e, prod a b */
    VEC("sum by (env) (node_load)", 100, {"{env=\"dev\"}", 12}, {"{env=\"prod\"}", 5});
    VEC("quantile(0.9, node_load)", 100, {"{}", 6.4});
    VEC("stddev(node_load)", 100, {"{}", 2.4979991993593593});
    VEC("stdvar(node_load)", 100, {"{}", 6.24});
    VEC("avg(node_load)", 100, {"{}", 3.4});
    VEC("count without (host) (node_load)", 100, {"{env=\"dev\"}", 3}, {"{env=\"prod\"}", 2});
    VEC("group by (env) (node_load)", 100, {"{env=\"dev\"}", 1}, {"{env=\"prod\"}", 1});
    VEC("max by (env) (node_load)", 100, {"{env=\"dev\"}", 8}, {"{env=\"prod\"}", 4});
    VEC("min(node_load)", 100, {"{}", 1});
    VEC("sum by (__name__) (node_load)", 100, {"{__name__=\"node_load\"}", 17});
    VEC("sum without (env) (node_load)", 100, {"{host=\"c\"}", 2}, {"{host=\"d\"}", 8},
        {"{host=\"e\"}", 2}, {"{host=\"a\"}", 1}, {"{host=\"b\"}", 4});
    VEC("quantile(-1, node_load)", 100, {"{}", -INFINITY});
    VEC("quantile(2, node_load)", 100, {"{}", INFINITY});
    VEC("quantile by (env) (0.5, node_load)", 100, {"{env=\"dev\"}", 2}, {"{env=\"prod\"}", 2.5});
    /* D.20 weird: NaN propagates through sum, min/max skip it */
    VEC("max(weird)", 0, {"{}", INFINITY});
    VEC("min(weird)", 0, {"{}", 1});
    VEC("sum(weird)", 0, {"{}", NAN});
    VEC("avg(weird)", 0, {"{}", NAN});
    empty_at("sum(nonexistent)", 0);
}

Test(pmeval, avg_keeps_infinities)
{
    /* mean Inf plus a finite value stays Inf; Inf + -Inf is NaN */
    VEC("avg(weird{k!=\"nan\"})", 0, {"{}", INFINITY});
}

Test(pmeval, topk_bottomk)
{
    /* D.20 */
    VEC("topk by (env) (1, node_load)", 100,
        {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    VEC("topk(2, weird)", 0, {"{__name__=\"weird\", k=\"inf\"}", INFINITY},
        {"{__name__=\"weird\", k=\"one\"}", 1});
    VEC("bottomk(2, weird)", 0, {"{__name__=\"weird\", k=\"one\"}", 1},
        {"{__name__=\"weird\", k=\"inf\"}", INFINITY});
    /* NaN only when nothing else is left */
    VEC("topk(3, weird)", 0, {"{__name__=\"weird\", k=\"inf\"}", INFINITY},
        {"{__name__=\"weird\", k=\"one\"}", 1}, {"{__name__=\"weird\", k=\"nan\"}", NAN});
    /* heap order worked through container/heap and Go's insertion sort: e before c */
    VEC("bottomk(3, node_load)", 100, {"{__name__=\"node_load\", env=\"prod\", host=\"a\"}", 1},
        {"{__name__=\"node_load\", env=\"dev\", host=\"e\"}", 2},
        {"{__name__=\"node_load\", env=\"dev\", host=\"c\"}", 2});
    VEC("topk(2.9, node_load)", 100, {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    empty_at("topk(0, node_load)", 100);
    fails_at("topk(NaN, node_load)", 100, -EDOM, "Scalar value NaN overflows int64");
}

Test(pmeval, count_values)
{
    /* D.19 */
    VEC("count_values(\"load\", node_load)", 100, {"{load=\"2\"}", 2}, {"{load=\"8\"}", 1},
        {"{load=\"1\"}", 1}, {"{load=\"4\"}", 1});
    VEC("count_values(\"v\", vector(0.1+0.2))", 0, {"{v=\"0.30000000000000004\"}", 1});
    VEC("count_values by (env) (\"v\", node_load)", 100, {"{env=\"dev\", v=\"2\"}", 2},
        {"{env=\"dev\", v=\"8\"}", 1}, {"{env=\"prod\", v=\"1\"}", 1},
        {"{env=\"prod\", v=\"4\"}", 1});
    VEC("count_values without (host) (\"v\", node_load)", 100, {"{env=\"dev\", v=\"2\"}", 2},
        {"{env=\"dev\", v=\"8\"}", 1}, {"{env=\"prod\", v=\"1\"}", 1},
        {"{env=\"prod\", v=\"4\"}", 1});
    VEC("count_values(\"v\", weird)", 0, {"{v=\"+Inf\"}", 1}, {"{v=\"NaN\"}", 1}, {"{v=\"1\"}", 1});
    fails_at("count_values(\"a-b\", node_load)", 100, -EDOM, "invalid label name \"a-b\"");
}

/* ---- binary operators -------------------------------------------------------------------- */

Test(pmeval, scalar_arithmetic)
{
    scalar_is("1+1", 4, 2);
    scalar_is("-7 % 3", 0, -1);
    scalar_is("2 ^ 3 ^ 2", 0, 512);
    scalar_is("-2 ^ 2", 0, -4);
    scalar_is("2 ^ 0.5", 0, sqrt(2));
    scalar_is("2 ^ -1", 0, 0.5);
    scalar_is("1 / 0", 0, INFINITY);
    scalar_is("1 atan2 1", 0, 0.7853981633974483);
    scalar_is("0 atan2 -1", 0, 3.141592653589793);
    scalar_is("1 > bool 2", 0, 0);
    scalar_is("2 >= bool 2", 0, 1);
    scalar_is("NaN != bool NaN", 0, 1);
    struct pm_result r;
    ok_at("0 / 0", 0, &r);
    cr_assert(isnan(r.v));
}

Test(pmeval, vector_scalar)
{
    /* D.22 */
    VEC("node_load > 3", 100, {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    VEC("3 < node_load", 100, {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    VEC("node_load > bool 3", 100, {"{env=\"dev\", host=\"c\"}", 0},
        {"{env=\"dev\", host=\"d\"}", 1}, {"{env=\"dev\", host=\"e\"}", 0},
        {"{env=\"prod\", host=\"a\"}", 0}, {"{env=\"prod\", host=\"b\"}", 1});
    VEC("weird > 0", 0, {"{__name__=\"weird\", k=\"inf\"}", INFINITY},
        {"{__name__=\"weird\", k=\"one\"}", 1});
    VEC("node_load{host=\"b\"} * 2", 100, {"{env=\"prod\", host=\"b\"}", 8});
    VEC("10 - node_load{host=\"b\"}", 100, {"{env=\"prod\", host=\"b\"}", 6});
    VEC("2 ^ node_load{host=\"b\"}", 100, {"{env=\"prod\", host=\"b\"}", 16});
    VEC("node_load{host=\"d\"} % 3", 100, {"{env=\"dev\", host=\"d\"}", 2});
}

Test(pmeval, vector_vector_one_to_one)
{
    /* D.22 */
    VEC("weird != weird", 0, {"{__name__=\"weird\", k=\"nan\"}", NAN});
    VEC("node_load - node_load", 100, {"{env=\"dev\", host=\"c\"}", 0},
        {"{env=\"dev\", host=\"d\"}", 0}, {"{env=\"dev\", host=\"e\"}", 0},
        {"{env=\"prod\", host=\"a\"}", 0}, {"{env=\"prod\", host=\"b\"}", 0});
    /* on() keeps only the on labels; comparisons keep the name */
    VEC("other_load + on(host) node_load", 100, {"{host=\"a\"}", 4});
    VEC("other_load > ignoring(env) node_load", 100, {"{__name__=\"other_load\", host=\"a\"}", 3});
    VEC("other_load > bool on(host, env) node_load", 100, {"{env=\"prod\", host=\"a\"}", 1});
    /* atan2 keeps the name in 2.42 (not in shouldDropMetricName); Go's atan */
    VEC("node_load{host=\"a\"} atan2 ignoring(env) other_load", 100,
        {"{__name__=\"node_load\", host=\"a\"}", 0.3217505543966422});
    /* on() keeps only the on labels, so the name goes even for a comparison */
    VEC("other_load > on(host) node_load", 100, {"{host=\"a\"}", 3});
}

Test(pmeval, group_left_and_right)
{
    /* D.21 */
    VEC("node_load * on(host) group_left(os) node_info", 100,
        {"{env=\"dev\", host=\"c\", os=\"bsd\"}", 2},
        {"{env=\"prod\", host=\"a\", os=\"linux\"}", 1},
        {"{env=\"prod\", host=\"b\", os=\"linux\"}", 4});
    /* group_right: labels from the right (many) side, value from the left */
    VEC("node_info < on(host) group_right node_load", 100,
        {"{__name__=\"node_load\", env=\"dev\", host=\"c\"}", 1},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 1});
    VEC("sum by (env) (node_load) / on(env) group_right node_load", 100,
        {"{env=\"dev\", host=\"c\"}", 6}, {"{env=\"dev\", host=\"d\"}", 1.5},
        {"{env=\"dev\", host=\"e\"}", 6}, {"{env=\"prod\", host=\"a\"}", 5},
        {"{env=\"prod\", host=\"b\"}", 1.25});
    /* include label missing on the one side: removed from the result */
    VEC("node_load{host=\"a\"} * on(host) group_left(env) node_info", 100, {"{host=\"a\"}", 1});
}

Test(pmeval, matching_errors)
{
    /* D.25, storage order a, b, c: b meets a */
    fails_at("http_requests_total + on(job) http_requests_total", 100, -EDOM,
             "found duplicate series for the match group {job=\"api\"} on the right hand-side of "
             "the operation: [{__name__=\"http_requests_total\", instance=\"b\", job=\"api\"}, "
             "{__name__=\"http_requests_total\", instance=\"a\", job=\"api\"}];many-to-many "
             "matching not allowed: matching labels must be unique on one side");
    fails_at("node_info * on(os) group_right node_load", 100, -EDOM,
             "found duplicate series for the match group {os=\"linux\"} on the left hand-side of "
             "the operation: [{__name__=\"node_info\", host=\"b\", os=\"linux\"}, "
             "{__name__=\"node_info\", host=\"a\", os=\"linux\"}];many-to-many matching not "
             "allowed: matching labels must be unique on one side");
    fails_at("node_load + on(env) sum by (env) (node_load)", 100, -EDOM,
             "multiple matches for labels: many-to-one matching must be explicit "
             "(group_left/group_right)");
    fails_at("{__name__=~\"node_load|other_load\", host=\"a\"} * on(host) group_left node_info",
             100, -EDOM, "multiple matches for labels: grouping labels must ensure unique matches");
    /* With nothing on one side there is nothing to match and no error. */
    empty_at("nonexistent + on(job) http_requests_total", 100);
}

Test(pmeval, set_operators)
{
    /* D.21 */
    VEC("node_load unless on(host) node_info", 100,
        {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"dev\", host=\"e\"}", 2});
    VEC("node_load and on(host) node_info{os=\"bsd\"}", 100,
        {"{__name__=\"node_load\", env=\"dev\", host=\"c\"}", 2});
    VEC("node_load{env=\"prod\"} or other_load", 100,
        {"{__name__=\"node_load\", env=\"prod\", host=\"a\"}", 1},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    VEC("node_load{host=\"b\"} or on(host) other_load", 100,
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4},
        {"{__name__=\"other_load\", env=\"prod\", host=\"a\"}", 3});
    VEC("nonexistent or other_load", 100,
        {"{__name__=\"other_load\", env=\"prod\", host=\"a\"}", 3});
    VEC("other_load unless nonexistent", 100,
        {"{__name__=\"other_load\", env=\"prod\", host=\"a\"}", 3});
    empty_at("other_load and nonexistent", 100);
}

Test(pmeval, unary_minus_drops_the_name)
{
    VEC("-node_load{host=\"b\"}", 100, {"{env=\"prod\", host=\"b\"}", -4});
    VEC("+node_load{host=\"b\"}", 100, {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4});
    scalar_is("-(1+2)", 0, -3);
    fails_at("-{__name__=~\"node_load|other_load\", host=\"a\"}", 100, -EDOM,
             "vector cannot contain metrics with the same labelset");
}

/* ---- functions: the engine's side ---------------------------------------------------------- */

Test(pmeval, duplicate_labelset_after_a_function)
{
    fails_at("sum_over_time({__name__=~\"node_load|other_load\", host=\"a\"}[1m])", 100, -EDOM,
             "vector cannot contain metrics with the same labelset");
    fails_at("abs({__name__=~\"node_load|other_load\", host=\"a\"})", 100, -EDOM,
             "vector cannot contain metrics with the same labelset");
    fails_at("{__name__=~\"node_load|other_load\", host=\"a\"} * 2", 100, -EDOM,
             "vector cannot contain metrics with the same labelset");
    fails_at("{__name__=~\"node_load|other_load\", host=\"a\"} > bool 0", 100, -EDOM,
             "vector cannot contain metrics with the same labelset");
    /* a filtering comparison keeps the names: no clash */
    VEC("{__name__=~\"node_load|other_load\", host=\"a\"} > 0", 100,
        {"{__name__=\"node_load\", env=\"prod\", host=\"a\"}", 1},
        {"{__name__=\"other_load\", env=\"prod\", host=\"a\"}", 3});
    /* last_over_time keeps the name: no clash */
    VEC("last_over_time({__name__=~\"node_load|other_load\", host=\"a\"}[1m])", 100,
        {"{__name__=\"node_load\", env=\"prod\", host=\"a\"}", 1},
        {"{__name__=\"other_load\", env=\"prod\", host=\"a\"}", 3});
    /* Range query: early and late never share a step, but Prometheus keeps one
     * output series per input over the whole range and refuses. */
    struct pm_result r;
    int rc = run_range("sum_over_time({__name__=~\"early|late\"}[1m])", S(0), S(480), S(60), &r);
    cr_assert_eq(rc, -EDOM);
    cr_assert_str_eq(err, "vector cannot contain metrics with the same labelset");
    /* Per step (instant) the two never meet. */
    VEC("sum_over_time({__name__=~\"early|late\"}[1m])", 60, {"{k=\"x\"}", 3});
}

Test(pmeval, absent_gets_empty_input)
{
    /* D.25 */
    VEC("absent(nonexistent{job=\"x\",env=~\"p.*\"})", 100, {"{job=\"x\"}", 1});
    empty_at("absent(node_load)", 250);
    struct pm_result r;
    ok_range("absent_over_time(temperature_celsius[1m])", S(0), S(600), S(120), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{}");
    cr_assert_eq(r.set.s[0].nf, 3); /* 360, 480, 600: no sample in their minute */
    cr_assert_eq(r.set.s[0].f[0].t, S(360));
    cr_assert_eq(r.set.s[0].f[1].t, S(480));
    cr_assert_eq(r.set.s[0].f[2].t, S(600));
    cr_assert_eq(r.set.s[0].f[2].v, 1);
}

Test(pmeval, sort_orders_the_instant_result)
{
    VEC("sort_desc(node_load)", 100, {"{__name__=\"node_load\", env=\"dev\", host=\"d\"}", 8},
        {"{__name__=\"node_load\", env=\"prod\", host=\"b\"}", 4},
        {"{__name__=\"node_load\", env=\"dev\", host=\"c\"}", 2},
        {"{__name__=\"node_load\", env=\"dev\", host=\"e\"}", 2},
        {"{__name__=\"node_load\", env=\"prod\", host=\"a\"}", 1});
    VEC("sort(weird)", 0, {"{__name__=\"weird\", k=\"one\"}", 1},
        {"{__name__=\"weird\", k=\"inf\"}", INFINITY}, {"{__name__=\"weird\", k=\"nan\"}", NAN});
    VEC("sort_desc(weird)", 0, {"{__name__=\"weird\", k=\"inf\"}", INFINITY},
        {"{__name__=\"weird\", k=\"one\"}", 1}, {"{__name__=\"weird\", k=\"nan\"}", NAN});
}

/* ---- result shapes --------------------------------------------------------------------------- */

Test(pmeval, result_shapes)
{
    struct pm_result r;
    ok_at("\"hello\"", S(7), &r);
    cr_assert_eq(r.type, PM_RES_STRING);
    cr_assert_eq(r.str.n, 5);
    cr_assert_eq(memcmp(r.str.s, "hello", 5), 0);
    cr_assert_eq(r.t, S(7));
    /* D.25 range query of a selector: no point at 600 (newest sample 360 s old) */
    ok_range("temperature_celsius", S(0), S(600), S(120), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    const double want[5][2] = {{0, 20}, {120, 21}, {240, 24}, {360, 24}, {480, 24}};
    cr_assert_eq(r.set.s[0].nf, 5);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(want[i][0]));
        cr_assert_eq(r.set.s[0].f[i].v, want[i][1]);
    }
    /* range query of a scalar: one series {} at every step */
    ok_range("1+1", S(0), S(30), S(10), &r);
    cr_assert_eq(r.type, PM_RES_MATRIX);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].labels.n, 0);
    cr_assert_eq(r.set.s[0].nf, 4);
    cr_assert_eq(r.set.s[0].f[3].t, S(30));
    cr_assert_eq(r.set.s[0].f[3].v, 2);
    ok_range("time()", S(0), S(30), S(10), &r);
    cr_assert_eq(r.set.s[0].nf, 4);
    cr_assert_eq(r.set.s[0].f[2].v, 20);
    /* scalar(v) with 5 elements is NaN */
    ok_at("scalar(node_load)", S(250), &r);
    cr_assert_eq(r.type, PM_RES_SCALAR);
    cr_assert(isnan(r.v));
    /* range query results are sorted by labels */
    ok_range("node_load * -1", S(0), S(60), S(60), &r);
    cr_assert_eq(r.set.n, 5);
    for (size_t i = 1; i < r.set.n; i++) {
        cr_assert_lt(pm_labels_cmp(&r.set.s[i - 1].labels, &r.set.s[i].labels), 0);
    }
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{env=\"dev\", host=\"c\"}");
    cr_assert_eq(r.set.s[0].nf, 2);
    /* range queries of range vectors or strings are refused */
    cr_assert_eq(run_range("temperature_celsius[5m]", S(0), S(60), S(10), &r), -EINVAL);
    cr_assert_str_eq(err, "invalid expression type \"range vector\" for range query, must be "
                          "Scalar or instant Vector");
    cr_assert_eq(run_range("\"x\"", S(0), S(60), S(10), &r), -EINVAL);
    cr_assert_str_eq(err, "invalid expression type \"string\" for range query, must be Scalar or "
                          "instant Vector");
}

Test(pmeval, range_query_of_aggregation_and_topk_per_step)
{
    struct pm_result r;
    /* b is above a until it resets at 75 */
    ok_range("topk(1, http_requests_total)", S(60), S(90), S(15), &r);
    cr_assert_eq(r.set.n, 2);
    /* sorted by labels: instance a, then b */
    cr_assert_str_eq(lstr(&r.set.s[0].labels),
                     "{__name__=\"http_requests_total\", instance=\"a\", job=\"api\"}");
    cr_assert_eq(r.set.s[0].nf, 2); /* 75: a=75 > b=2; 90: a=90 > 12 */
    cr_assert_eq(r.set.s[0].f[0].t, S(75));
    cr_assert_eq(r.set.s[0].f[1].t, S(90));
    cr_assert_eq(r.set.s[1].nf, 1); /* 60: b=140 */
    cr_assert_eq(r.set.s[1].f[0].t, S(60));
    cr_assert_eq(r.set.s[1].f[0].v, 140);
}

/* ---- limits ------------------------------------------------------------------------------------
 */

Test(pmeval, max_samples)
{
    struct pm_result r;
    max_samples = 5;
    ok_at("node_load", S(100), &r);
    max_samples = 4;
    cr_assert_eq(run_range("node_load", S(100), S(100), 0, &r), -E2BIG);
    cr_assert_str_eq(err,
                     "query processing would load too many samples into memory in query execution");
    /* sum() holds the selector's 5 and gathers them again, then its 1 result */
    max_samples = 11;
    ok_at("sum(node_load)", S(100), &r);
    max_samples = 10;
    cr_assert_eq(run_range("sum(node_load)", S(100), S(100), 0, &r), -E2BIG);
    /* a range selector: 21 samples of a in [0, 300] */
    max_samples = 21;
    ok_at("http_requests_total{instance=\"a\"}[5m]", S(300), &r);
    max_samples = 20;
    cr_assert_eq(run_range("http_requests_total{instance=\"a\"}[5m]", S(300), S(300), 0, &r),
                 -E2BIG);
    max_samples = PM_DEFAULT_MAX_SAMPLES;
}

Test(pmeval, cancel_and_deadline_from_the_qctx)
{
    struct qctx q;
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.lock, NULL);
    int cancel = 1;
    q.lim.cancel = &cancel;
    struct promql_expr *e;
    char perr[128];
    cr_assert_eq(promql_parse("sum(node_load)", 14, &e, perr, sizeof perr), 0);
    struct pm_eval_opts o = {.start_ms = 0, .end_ms = S(300), .step_ms = S(15), .q = &q};
    struct pm_result r;
    cr_assert_eq(pm_eval(e, &o, &src, db.a, &r, err, sizeof err), -ECANCELED);
    cr_assert_str_eq(err, "query was canceled in expression evaluation");
    /* a deadline long past */
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.lock, NULL);
    q.lim.deadline_ns = 1;
    cr_assert_eq(pm_eval(e, &o, &src, db.a, &r, err, sizeof err), -ETIMEDOUT);
    cr_assert_str_eq(err, "query timed out in expression evaluation");
    /* and with neither, the same query runs */
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.lock, NULL);
    cr_assert_eq(pm_eval(e, &o, &src, db.a, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 21);
    promql_free(e);
}

Test(pmeval, range_query_over_a_subquery)
{
    /* at 120: inner steps 0, 60, 120 -> max 22; at 180: 60..180 -> 25; at 240: 25 */
    struct pm_result r;
    ok_range("max_over_time(temperature_celsius[2m:1m])", S(120), S(240), S(60), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{room=\"x\"}");
    cr_assert_eq(r.set.s[0].nf, 3);
    cr_assert_eq(r.set.s[0].f[0].v, 22);
    cr_assert_eq(r.set.s[0].f[1].v, 25);
    cr_assert_eq(r.set.s[0].f[2].v, 25);
    /* a subquery of an aggregation with @ on a selector inside */
    ok_range("sum_over_time(sum(temperature_celsius @ 60)[2m:1m])", S(120), S(240), S(120), &r);
    cr_assert_eq(r.set.s[0].nf, 2);
    cr_assert_eq(r.set.s[0].f[0].v, 66); /* 22 at inner steps 0, 60, 120 */
    cr_assert_eq(r.set.s[0].f[1].v, 66);
}

Test(pmeval, timestamp_with_at_loses_the_offset_as_in_2_42)
{
    /* engine.go 2.42 sets the selector's offset to ts - @ for timestamp():
     * the sample at 100 (t = 60), not at 100 - 60s (t = 0). */
    VEC("timestamp(temperature_celsius @ 100 offset 1m)", 250, {"{room=\"x\"}", 60});
    VEC("timestamp(temperature_celsius offset 1m)", 250, {"{room=\"x\"}", 180});
}

Test(pmeval, stale_native_histogram_hides_the_series)
{
    static struct pm_hist h = {.schema = 0, .count = 1, .sum = 1};
    static struct pm_hist hs = {.schema = 0};
    hs.sum = promname_stale_nan();
    static struct pm_hsample smp[2] = {{0, &h}, {S(30), &hs}};
    struct pm_series *a = add("hs", KV("k", "1"));
    a->h = smp;
    a->nh = 2;
    struct pm_result r;
    ok_at("hs", S(20), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].h[0].h, &h);
    empty_at("hs", 40);
}

/* ---- native histograms -------------------------------------------------------------------------
 */

Test(pmeval, sum_of_native_histograms)
{
    static double pos1[] = {1, 2}, pos2[] = {3};
    static struct pm_hist h1 = {.schema = 0, .count = 3, .sum = 4, .n_pos = 2, .pos = pos1};
    static struct pm_hist h2 = {.schema = 0, .count = 3, .sum = 10, .n_pos = 1, .pos = pos2};
    static struct pm_hsample s1[] = {{0, &h1}}, s2[] = {{0, &h2}};
    struct pm_series *a = add("hist", KV("k", "1"));
    a->h = s1;
    a->nh = 1;
    struct pm_series *b = add("hist", KV("k", "2"));
    b->h = s2;
    b->nh = 1;
    struct pm_result r;
    ok_at("sum(hist)", S(10), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 0);
    cr_assert_eq(r.set.s[0].nh, 1);
    cr_assert_eq(r.set.s[0].h[0].t, S(10));
    cr_assert_eq(r.set.s[0].h[0].h->count, 6); /* pm_hist_add's job; the engine passes both */
    cr_assert_eq(r.set.s[0].h[0].h->sum, 14);
    /* a histogram and a float in one group: no output */
    empty_at("sum({__name__=~\"hist|other_load\"})", 10);
    /* the selector returns the histogram sample itself */
    ok_at("hist{k=\"2\"}", S(10), &r);
    cr_assert_eq(r.set.s[0].nh, 1);
    cr_assert_eq(r.set.s[0].h[0].h, &h2);
}

/* ---- @ modifier: Prometheus's own cases ------------------------------------------------------ */

/*
 * promql/testdata/at_modifier.test at v2.42.0 (the cases that need no
 * function besides sum_over_time, timestamp, time and vector), on its
 * data: metric{job="1"} 0+1x1000 and metric{job="2"} 0+2x1000 every 10 s,
 * metric_ms 0+1x10000 every millisecond.
 */
static void setup_at(void)
{
    memset(&db, 0, sizeof db);
    db.a = arena_new(1 << 20);
    cr_assert_not_null(db.a);
    for (int j = 1; j <= 2; j++) {
        struct pm_series *s = add("metric", KV("job", j == 1 ? "1" : "2"));
        struct pm_fsample *f = arena_alloc(db.a, 1001 * sizeof *f);
        for (int i = 0; i <= 1000; i++) {
            f[i] = (struct pm_fsample){S(10 * i), (double)(j * i)};
        }
        s->f = f;
        s->nf = 1001;
    }
    struct pm_series *s = add("metric_ms", NULL);
    struct pm_fsample *f = arena_alloc(db.a, 10001 * sizeof *f);
    for (int i = 0; i <= 10000; i++) {
        f[i] = (struct pm_fsample){i, (double)i};
    }
    s->f = f;
    s->nf = 10001;
}

TestSuite(pmeval_at, .init = setup_at, .fini = teardown);

Test(pmeval_at, instant_selectors)
{
    VEC("metric @ 100", 10, {"{__name__=\"metric\", job=\"1\"}", 10},
        {"{__name__=\"metric\", job=\"2\"}", 20});
    VEC("metric @ 100 offset 50s", 10, {"{__name__=\"metric\", job=\"1\"}", 5},
        {"{__name__=\"metric\", job=\"2\"}", 10});
    VEC("metric offset 50s @ 100", 10, {"{__name__=\"metric\", job=\"1\"}", 5},
        {"{__name__=\"metric\", job=\"2\"}", 10});
    VEC("metric @ 0 offset -50s", 10, {"{__name__=\"metric\", job=\"1\"}", 5},
        {"{__name__=\"metric\", job=\"2\"}", 10});
    VEC("-metric @ 100", 10, {"{job=\"1\"}", -10}, {"{job=\"2\"}", -20});
    VEC("---metric @ 100", 10, {"{job=\"1\"}", -10}, {"{job=\"2\"}", -20});
    VEC("metric_ms @ 1.234", 100, {"{__name__=\"metric_ms\"}", 1234});
}

Test(pmeval_at, range_selectors_and_subqueries)
{
    VEC("sum_over_time(metric{job=\"1\"}[100s] @ 100)", 25, {"{job=\"1\"}", 55});
    VEC("sum_over_time(metric{job=\"1\"}[100s] @ 100 offset 50s)", 25, {"{job=\"1\"}", 15});
    VEC("sum_over_time(metric{job=\"1\"}[100s] offset 50s @ 100)", 25, {"{job=\"1\"}", 15});
    VEC("sum_over_time(metric{job=\"1\"}[100s:1s] @ 100)", 25, {"{job=\"1\"}", 460});
    VEC("sum_over_time(metric{job=\"1\"}[100s:1s] @ 100 offset 20s)", 25, {"{job=\"1\"}", 288});
    VEC("sum_over_time(metric{job=\"1\"}[100s:1s] offset 20s @ 100)", 25, {"{job=\"1\"}", 288});
    VEC("sum_over_time(sum_over_time(metric{job=\"1\"}[100s] @ 100)[100s:25s] @ 50)", 100,
        {"{job=\"1\"}", 275});
    VEC("sum_over_time(sum_over_time(sum_over_time(metric{job=\"1\"}[100s] @ 100)[100s:25s] @ "
        "50)[3s:1s] @ 3000)",
        0, {"{job=\"1\"}", 1100});
    VEC("sum_over_time(sum_over_time(sum_over_time(metric{job=\"1\"}[10s])[100s:25s] @ 50)[3s:1s] "
        "@ 200)",
        0, {"{job=\"1\"}", 44});
    VEC("sum_over_time(sum_over_time(sum_over_time(metric{job=\"1\"}[10s])[100s:25s] @ "
        "200)[3s:1s] @ 50)",
        0, {"{job=\"1\"}", 464});
    VEC("sum_over_time(sum_over_time(sum_over_time(metric{job=\"1\"}[20s])[20s:10s] offset "
        "10s)[100s:25s] @ 1000)",
        0, {"{job=\"1\"}", 3588});
}

Test(pmeval_at, time_and_timestamp)
{
    VEC("timestamp(metric{job=\"1\"} @ 10)", 600, {"{job=\"1\"}", 10});
    VEC("timestamp(timestamp(metric{job=\"1\"} @ 10))", 600, {"{job=\"1\"}", 600});
    VEC("timestamp(timestamp(metric{job=\"1\"} @ 10))", 900, {"{job=\"1\"}", 900});
    VEC("sum_over_time(vector(time())[100s:1s] @ 3000)", 0, {"{}", 297950});
    VEC("sum_over_time(vector(time())[100s:1s] @ 3000 offset 600s)", 0, {"{}", 237350});
    VEC("sum_over_time(timestamp(metric{job=\"1\"} @ 10)[100s:10s] @ 3000)", 0,
        {"{job=\"1\"}", 110});
    VEC("sum_over_time(timestamp(timestamp(metric{job=\"1\"} @ 999))[10s:1s] @ 10)", 0,
        {"{job=\"1\"}", 55});
}

Test(pmeval_at, range_query_with_at_is_step_invariant)
{
    /* every step sees metric @ 100 = 10; selected once, at 100 */
    struct pm_result r;
    ok_range("metric{job=\"1\"} @ 100", S(0), S(1000), S(100), &r);
    cr_assert_eq(db.calls, 1);
    cr_assert_eq(db.mint[0], S(100 - 300));
    cr_assert_eq(db.maxt[0], S(100));
    cr_assert_eq(r.set.n, 1);
    cr_assert_eq(r.set.s[0].nf, 11);
    for (int i = 0; i < 11; i++) {
        cr_assert_eq(r.set.s[0].f[i].t, S(100 * i));
        cr_assert_eq(r.set.s[0].f[i].v, 10);
    }
    /* a window pinned at end(): the same at every step */
    ok_range("sum_over_time(metric{job=\"1\"}[100s] @ end())", S(0), S(1000), S(500), &r);
    cr_assert_eq(r.set.s[0].nf, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r.set.s[0].f[i].v, 1045); /* [900, 1000]: 90 + ... + 100 */
    }
}

/* ---- subqueries: Prometheus's own cases ---------------------------------------------------- */

/* promql/testdata/subquery.test at v2.42.0: metric 1 2 (at 0 s and 10 s);
 * metric1/2/3 0+1x1000 / 0+2x1000 / 0+3x1000 every 10 s. */
static void setup_subq(void)
{
    memset(&db, 0, sizeof db);
    db.a = arena_new(1 << 20);
    cr_assert_not_null(db.a);
    floats(add("metric", NULL), (double[]){0, 1, 10, 2}, 2);
    static const char *const names[3] = {"metric1", "metric2", "metric3"};
    for (int j = 1; j <= 3; j++) {
        struct pm_series *s = add(names[j - 1], NULL);
        struct pm_fsample *f = arena_alloc(db.a, 1001 * sizeof *f);
        for (int i = 0; i <= 1000; i++) {
            f[i] = (struct pm_fsample){S(10 * i), (double)(j * i)};
        }
        s->f = f;
        s->nf = 1001;
    }
}

TestSuite(pmeval_subq, .init = setup_subq, .fini = teardown);

Test(pmeval_subq, alignment_lookback_and_offsets)
{
    VEC("sum_over_time(metric[50s:10s])", 10, {"{}", 3});
    VEC("sum_over_time(metric[50s:5s])", 10, {"{}", 4});
    VEC("sum_over_time(metric[50s:10s])", 300, {"{}", 12});
    VEC("sum_over_time(metric[50s:10s])", 360, {"{}", 2}); /* stale after 310 */
    VEC("sum_over_time(metric1[30s:10s])", 1000, {"{}", 394});
    VEC("sum_over_time(metric1[30s:5s])", 1000, {"{}", 688});
    VEC("sum_over_time(metric1[30s:10s] offset 10s)", 1010, {"{}", 394});
    VEC("sum_over_time(metric1[30s:10s] offset 9s)", 1010, {"{}", 297});
    VEC("sum_over_time(metric1[30s:10s] offset 7s)", 1010, {"{}", 297});
    VEC("sum_over_time(metric1[30s:10s] offset 5s)", 1010, {"{}", 297});
    VEC("sum_over_time(metric1[30s:10s] offset 3s)", 1010, {"{}", 297});
    VEC("sum_over_time((metric1)[30s:10s] offset 3s)", 1010, {"{}", 297});
}

Test(pmeval_subq, rates_over_subqueries)
{
    struct pm_result r;
    ok_at("rate(metric[20s:10s])", S(10), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_float_eq(r.set.s[0].f[0].v, 0.1, 1e-12);
    ok_at("rate(metric[20s:5s])", S(20), &r);
    cr_assert_float_eq(r.set.s[0].f[0].v, 0.05, 1e-12);
    static const struct {
        const char *q;
        double v;
    } cases[] = {
        {"rate(sum_over_time(metric1[30s:10s])[50s:10s])", 0.4},
        {"rate(sum_over_time(metric2[30s:10s])[50s:10s])", 0.8},
        {"rate(sum_over_time(metric3[30s:10s])[50s:10s])", 1.2},
        {"rate(sum_over_time((metric1+metric2+metric3)[30s:10s])[30s:10s])", 2.4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ok_at(cases[i].q, S(1000), &r);
        cr_assert_eq(r.set.n, 1, "%s", cases[i].q);
        cr_assert_eq(r.set.s[0].labels.n, 0);
        cr_assert_float_eq(r.set.s[0].f[0].v, cases[i].v, 1e-12, "%s: %.17g", cases[i].q,
                           r.set.s[0].f[0].v);
    }
}

/* ---- range functions over the steps: the sliding window ---------------------------------------
 * Expected points worked out by hand from engine.go 2.42's matrix-function
 * loop (series by series, window [ts - range, ts] closed on both ends,
 * staleness markers dropped from the window). */

static void setup_slide(void)
{
    setup();
    /* a gap of 170 s: windows empty out and fill again */
    floats(add("gap", KV("k", "g")), (double[]){0, 1, 15, 2, 30, 3, 200, 4, 215, 5, 230, 6}, 6);
    /* input order a, b, c (labels); a starts late. 1 + 1e16 rounds to 1e16. */
    floats(add("ord", KV("k", "a")), (double[]){60, 1}, 1);
    floats(add("ord", KV("k", "b")), (double[]){0, 1e16, 60, 1e16}, 2);
    floats(add("ord", KV("k", "c")), (double[]){0, -1e16, 60, -1e16}, 2);
    /* resets at 30 and 60; a marker between 45 and 60 (the pair 15 -> 2 is
     * still a reset once the marker is out of the window) */
    floats(add("ctr", KV("k", "r")),
           (double[]){0, 10, 15, 20, 30, 5, 45, 15, 50, promname_stale_nan(), 60, 2, 75, 4}, 7);
}

TestSuite(pmeval_slide, .init = setup_slide, .fini = teardown);

/* One series of a range result: exactly these (t seconds, v) points. */
static void points_are(const struct pm_series *s, const double *tv, size_t n)
{
    cr_assert_eq(s->nf, n, "%s: %zu points, want %zu", lstr(&s->labels), s->nf, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(s->f[i].t, S(tv[2 * i]), "point %zu at %lld", i, (long long)s->f[i].t);
        cr_assert_eq(s->f[i].v, tv[2 * i + 1], "point %zu (t %g): %.17g, want %.17g", i, tv[2 * i],
                     s->f[i].v, tv[2 * i + 1]);
    }
}

#define POINTS(s, ...)                                                                             \
    do {                                                                                           \
        static const double tv_[] = {__VA_ARGS__};                                                 \
        points_are(s, tv_, sizeof tv_ / sizeof tv_[0] / 2);                                        \
    } while (0)

Test(pmeval_slide, window_empties_and_refills)
{
    struct pm_result r;
    ok_range("count_over_time(gap[30s])", 0, S(260), S(20), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{k=\"g\"}");
    /* 60: [30, 60] holds 30 (closed on the left); 80..180 nothing */
    POINTS(&r.set.s[0], 0, 1, 20, 2, 40, 2, 60, 1, 200, 1, 220, 2, 240, 2, 260, 1);
    ok_range("sum_over_time(gap[30s])", 0, S(260), S(20), &r);
    POINTS(&r.set.s[0], 0, 1, 20, 3, 40, 5, 60, 3, 200, 4, 220, 9, 240, 11, 260, 6);
}

Test(pmeval_slide, stale_marker_at_the_window_edges)
{
    struct pm_result r;
    /* stale: 0 -> 1, 30 -> 2, 60 -> marker, 90 -> 4 */
    ok_range("count_over_time(stale[30s])", S(30), S(120), S(30), &r);
    cr_assert_eq(r.set.n, 1);
    /* 60: [30, 60] = {2, marker}; 90: [60, 90] = {marker, 4} */
    POINTS(&r.set.s[0], 30, 2, 60, 1, 90, 1, 120, 1);
    ok_range("sum_over_time(stale[30s])", S(30), S(120), S(30), &r);
    POINTS(&r.set.s[0], 30, 3, 60, 2, 90, 4, 120, 4);
    /* 60: [50, 60] holds the marker alone: no point */
    ok_range("count_over_time(stale[10s])", S(40), S(80), S(20), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 40, 1);
}

Test(pmeval_slide, steps_before_the_first_sample)
{
    struct pm_result r;
    /* late: 400, 430, 460 */
    ok_range("count_over_time(late[1m])", S(300), S(480), S(60), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 420, 1, 480, 2);
    ok_range("count_over_time(late[1m])", 0, S(300), S(60), &r);
    cr_assert_eq(r.set.n, 0);
}

Test(pmeval_slide, at_and_offset_fix_or_shift_the_window)
{
    struct pm_result r;
    /* @ 220: [190, 220] = {200, 215} at every step */
    ok_range("count_over_time(gap[30s] @ 220)", 0, S(60), S(30), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 0, 2, 30, 2, 60, 2);
    /* offset 200s: step 220 reads [-10, 20], 240 [10, 40], 420 [190, 220] */
    ok_range("sum_over_time(gap[30s] offset 200s)", S(220), S(420), S(20), &r);
    POINTS(&r.set.s[0], 220, 3, 240, 5, 260, 3, 400, 4, 420, 9);
    /* a negative offset reads ahead */
    ok_range("count_over_time(gap[30s] offset -200s)", 0, S(40), S(40), &r);
    POINTS(&r.set.s[0], 0, 1, 40, 2);
}

Test(pmeval_slide, subquery_windows)
{
    struct pm_result r;
    /* inner steps 20, 40, ..., 260 of gap with the 5m lookback:
     * 20 -> 2, 40..180 -> 3, 200 -> 4, 220 -> 5, 240 -> 6, 260 -> 6 */
    ok_range("max_over_time(gap[40s:20s])", S(60), S(260), S(200), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 60, 3, 260, 6);
    ok_range("count_over_time(gap[40s:20s])", S(60), S(260), S(100), &r);
    POINTS(&r.set.s[0], 60, 3, 160, 3, 260, 3);
    ok_range("sum_over_time(gap[40s:20s])", S(60), S(260), S(100), &r);
    POINTS(&r.set.s[0], 60, 8, 160, 9, 260, 17);
}

Test(pmeval_slide, outputs_in_input_order_as_2_42)
{
    /* engine.go appends one output series per input series in the input's
     * order; sum adds in that order: (1 + 1e16) - 1e16 = 0 at 60, where
     * first-seen order (b, c, a) would give 1. */
    struct pm_result r;
    ok_range("sum(last_over_time(ord[1m]))", 0, S(60), S(60), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 0, 0, 60, 0);
}

Test(pmeval_slide, max_samples_where_2_42_checks)
{
    /* count_over_time over a (every 15 s) at 0, 30, 60: windows of 1, 3 and
     * 5 samples; at the series' end 2.42 holds its last window (5) and its
     * 3 outputs: 8. */
    struct pm_result r;
    max_samples = 8;
    ok_range("count_over_time(http_requests_total{instance=\"a\"}[1m])", 0, S(60), S(30), &r);
    POINTS(&r.set.s[0], 0, 1, 30, 3, 60, 5);
    max_samples = 7;
    cr_assert_eq(
        run_range("count_over_time(http_requests_total{instance=\"a\"}[1m])", 0, S(60), S(30), &r),
        -E2BIG);
    cr_assert_str_eq(err,
                     "query processing would load too many samples into memory in query execution");
    max_samples = PM_DEFAULT_MAX_SAMPLES;
}

Test(pmeval_slide, stale_native_histogram_left_out_of_windows)
{
    static struct pm_hist h1 = {.schema = 0, .count = 1, .sum = 1};
    static struct pm_hist h2 = {.schema = 0, .count = 2, .sum = 3};
    static struct pm_hist hs = {.schema = 0};
    hs.sum = promname_stale_nan();
    static struct pm_hsample smp[3] = {{0, &h1}, {S(30), &hs}, {S(60), &h2}};
    struct pm_series *a = add("hsl", KV("k", "1"));
    a->h = smp;
    a->nh = 3;
    struct pm_result r;
    /* 30: [0, 30] = {h1, marker}; 45: [15, 45] = {marker}; 60: [30, 60] = {marker, h2} */
    ok_range("count_over_time(hsl[30s])", S(30), S(60), S(15), &r);
    cr_assert_eq(r.set.n, 1);
    POINTS(&r.set.s[0], 30, 1, 60, 1);
}

Test(pmeval_slide, window_bounds_that_go_back_are_searched_again)
{
    /* gap: 0, 15, 30, 200, 215, 230 */
    struct pe_slide sl;
    struct pm_win w;
    const struct pm_series *g = &db.s[db.n - 5];
    cr_assert_str_eq(lstr(&g->labels), "{__name__=\"gap\", k=\"g\"}");
    cr_assert_eq(pe_slide_init(db.a, &sl, g, false), 0);
    cr_assert_eq(sl.f, g->f); /* no marker: no copy */
    pe_slide_window(&sl, S(10), S(215), &w);
    cr_assert_eq(w.nf, 4);
    cr_assert_eq(w.f[0].t, S(15));
    pe_slide_window(&sl, S(0), S(15), &w); /* both bounds back */
    cr_assert_eq(w.nf, 2);
    cr_assert_eq(w.f[0].t, 0);
    pe_slide_window(&sl, S(5), S(10), &w); /* maxt back, mint forward */
    cr_assert_eq(w.nf, 0);
    cr_assert_null(w.f);
    pe_slide_window(&sl, S(200), S(300), &w); /* forward past the gap */
    cr_assert_eq(w.nf, 3);
    cr_assert_eq(w.f[0].t, S(200));
    pe_slide_window(&sl, S(231), S(300), &w);
    cr_assert_eq(w.nf, 0);
    /* the stale series: one copy without the marker */
    const struct pm_series *st = NULL;
    for (size_t i = 0; i < db.n; i++) {
        if (strcmp(lstr(&db.s[i].labels), "{__name__=\"stale\", k=\"s\"}") == 0) {
            st = &db.s[i];
        }
    }
    cr_assert_not_null(st);
    cr_assert_eq(pe_slide_init(db.a, &sl, st, false), 0);
    cr_assert_eq(sl.nf, 3);
    pe_slide_window(&sl, S(30), S(90), &w);
    cr_assert_eq(w.nf, 2);
    cr_assert_eq(w.f[0].v, 2);
    cr_assert_eq(w.f[1].v, 4);
}

Test(pmeval_slide, increase_reads_the_resets_of_each_window)
{
    /* windows of 30 s holding samples at both ends: factor 1, so increase
     * is last - first plus the value before each reset inside the window.
     * 30: 5 - 10 + 20; 45: 15 - 20 + 20; 60: 2 - 5 + 15 (the reset at 30 is
     * the window's first sample: its predecessor is outside); 75: 4 - 15 +
     * 15; 90: {2, 4} over 15 s, extrapolated to the end: 2 * 30 / 15. */
    struct pm_result r;
    ok_range("increase(ctr[30s])", S(30), S(90), S(15), &r);
    cr_assert_eq(r.set.n, 1);
    cr_assert_str_eq(lstr(&r.set.s[0].labels), "{k=\"r\"}");
    POINTS(&r.set.s[0], 30, 15, 45, 15, 60, 12, 75, 4, 90, 4);
    /* the same steps one at a time (a fresh search each) */
    for (int t = 30; t <= 90; t += 15) {
        ok_range("increase(ctr[30s])", S(t), S(t), S(15), &r);
        cr_assert_eq(r.set.s[0].nf, 1);
        cr_assert_eq(r.set.s[0].f[0].v, t == 60 ? 12 : t >= 75 ? 4 : 15, "at %d", t);
    }
}

Test(pmeval_slide, reset_list_follows_windows_that_go_back)
{
    const struct pm_series *c = &db.s[db.n - 1];
    cr_assert_str_eq(lstr(&c->labels), "{__name__=\"ctr\", k=\"r\"}");
    struct pe_slide sl;
    struct pm_win w;
    cr_assert_eq(pe_slide_init(db.a, &sl, c, true), 0);
    cr_assert_eq(sl.nf, 6); /* the marker left out */
    cr_assert_eq(sl.nrs, 2);
    pe_slide_window(&sl, 0, S(60), &w); /* 10 20 5 15 2: resets at 5 and 2 */
    cr_assert(w.resets_known);
    cr_assert_eq(w.nrs, 2);
    cr_assert_eq(w.f[w.rs[0] - w.rs_base].v, 5);
    cr_assert_eq(w.f[w.rs[1] - w.rs_base].v, 2);
    pe_slide_window(&sl, S(30), S(75), &w); /* 5 15 2 4: the 5 starts it */
    cr_assert_eq(w.nrs, 1);
    cr_assert_eq(w.f[w.rs[0] - w.rs_base].v, 2);
    pe_slide_window(&sl, S(60), S(75), &w); /* 2 4 */
    cr_assert_eq(w.nrs, 0);
    pe_slide_window(&sl, 0, S(30), &w); /* back: 10 20 5 */
    cr_assert_eq(w.nf, 3);
    cr_assert_eq(w.nrs, 1);
    cr_assert_eq(w.f[w.rs[0] - w.rs_base].v, 5);
    pe_slide_window(&sl, 0, S(10), &w); /* 10 */
    cr_assert_eq(w.nrs, 0);
}
