/*
 * fuzz_pmeval.c - libFuzzer target for the PromQL evaluator: every query the
 * parser accepts is evaluated, as an instant query and (for scalar and
 * vector expressions) as a range query, over a small fixed dataset held in
 * memory: counters with a reset, gauges with NaN, infinities and a
 * staleness marker, classic buckets, a native histogram series. It must
 * answer or fail with an error and a message, never crash, leak or run
 * past its deadline (2 s per evaluation through the qctx, as
 * --query-timeout bounds it in the daemon) or its memory (the arena cap).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "query/pmeval.h"
#include "query/promql.h"
#include "query/qctx.h"
#include "storage/promname.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NSER 8
#define NPTS 41 /* 0 .. 600 s at 15 s */

static struct pm_series ds[NSER];
static struct pm_label lab[NSER][4];
static struct pm_fsample fs[NSER][NPTS];
static struct pm_hsample hs[NPTS];
static struct pm_hist hist[NPTS];
static double hb[NPTS][3];

static void set_labels(int i, const char *name, const char *k1, const char *v1, const char *k2,
                       const char *v2)
{
    uint32_t n = 0;
    struct pm_label *l = lab[i];
    /* sorted by name: "__name__" after upper case, before lower case keys */
    l[n++] = (struct pm_label){"__name__", name, 8, (uint32_t)strlen(name)};
    if (k1 != NULL) {
        l[n++] = (struct pm_label){k1, v1, (uint32_t)strlen(k1), (uint32_t)strlen(v1)};
    }
    if (k2 != NULL) {
        l[n++] = (struct pm_label){k2, v2, (uint32_t)strlen(k2), (uint32_t)strlen(v2)};
    }
    ds[i].labels = (struct pm_labels){l, n};
}

static void build(void)
{
    static const char *const les[3] = {"0.1", "1", "+Inf"};
    set_labels(0, "req_total", "code", "200", "job", "a");
    set_labels(1, "req_total", "code", "500", "job", "b");
    set_labels(2, "g", "job", "a", NULL, NULL);
    for (int b = 0; b < 3; b++) {
        set_labels(3 + b, "lat_bucket", "job", "a", "le", les[b]);
    }
    set_labels(6, "up", "instance", "x", "job", "a");
    set_labels(7, "nh", "job", "a", NULL, NULL);
    for (int k = 0; k < NPTS; k++) {
        int64_t t = (int64_t)k * 15000;
        fs[0][k] = (struct pm_fsample){t, k < 20 ? 10.0 * k : 3.0 * (k - 20)}; /* a reset */
        fs[1][k] = (struct pm_fsample){t + 7, 0.5 * k};
        double g = k % 7 == 3 ? NAN : k % 11 == 5 ? INFINITY : k % 13 == 8 ? -INFINITY : k - 20.0;
        fs[2][k] = (struct pm_fsample){t, k == 30 ? promname_stale_nan() : g};
        fs[3][k] = (struct pm_fsample){t, 1.0 * k};
        fs[4][k] = (struct pm_fsample){t, 3.0 * k};
        fs[5][k] = (struct pm_fsample){t, 4.0 * k};
        fs[6][k] = (struct pm_fsample){t, 1};
        hb[k][0] = k;
        hb[k][1] = 2.0 * k;
        hb[k][2] = 0.5 * k;
        hist[k] = (struct pm_hist){.schema = k % 3,
                                   .zero_threshold = 1e-128,
                                   .zero_count = 1,
                                   .count = 1 + 3.5 * k,
                                   .sum = 10.0 * k,
                                   .pos_offset = -1,
                                   .n_pos = 3,
                                   .pos = hb[k]};
        hs[k] = (struct pm_hsample){t, &hist[k]};
    }
    for (int i = 0; i < 7; i++) {
        ds[i].f = fs[i];
        ds[i].nf = NPTS;
    }
    ds[7].h = hs;
    ds[7].nh = NPTS;
}

static int sel(void *ctx, const struct promql_matcher *m, size_t n, int64_t mint, int64_t maxt,
               struct pm_set *out)
{
    arena *a = ctx;
    out->s = arena_alloc(a, NSER * sizeof(*out->s));
    out->n = 0;
    if (out->s == NULL) {
        return -ENOMEM;
    }
    for (int i = 0; i < NSER; i++) {
        bool ok = true;
        for (size_t j = 0; j < n && ok; j++) {
            uint32_t vl;
            const char *v = pm_labels_get(&ds[i].labels, m[j].name.s, m[j].name.n, &vl);
            ok = promql_matcher_matches(&m[j], v != NULL ? v : "", v != NULL ? vl : 0);
        }
        if (!ok) {
            continue;
        }
        struct pm_series s = ds[i];
        size_t lo = 0, hi = 0;
        const size_t cnt = s.nf != 0 ? s.nf : s.nh;
        while (lo < cnt && (s.nf ? s.f[lo].t : s.h[lo].t) < mint) {
            lo++;
        }
        hi = lo;
        while (hi < cnt && (s.nf ? s.f[hi].t : s.h[hi].t) <= maxt) {
            hi++;
        }
        if (hi == lo) {
            continue;
        }
        if (s.nf != 0) {
            s.f += lo;
            s.nf = hi - lo;
        } else {
            s.h += lo;
            s.nh = hi - lo;
        }
        out->s[out->n++] = s;
    }
    return 0;
}

static void eval(const struct promql_expr *e, int64_t start, int64_t end, int64_t step)
{
    arena *a = arena_new(0);
    if (a == NULL) {
        return;
    }
    arena_set_limit(a, 64u << 20);
    struct qctx q;
    struct qctx_limits lim = {.deadline_ns = clock_mono_ns() + 2000000000ull};
    if (qctx_open(&q, SIG_METRICS, &lim, "points") < 0) {
        arena_free(a);
        return;
    }
    struct pm_source src = {.ctx = a, .select = sel};
    struct pm_eval_opts o = {
        .start_ms = start, .end_ms = end, .step_ms = step, .max_samples = 200000, .q = &q};
    struct pm_result r;
    char err[256];
    err[0] = '\0';
    int rc = pm_eval(e, &o, &src, a, &r, err, sizeof(err));
    if (rc < 0 && err[0] == '\0' && rc != -ENOMEM) {
        __builtin_trap(); /* an error without a message */
    }
    if (rc == 0 && (r.type == PM_RES_VECTOR || r.type == PM_RES_MATRIX)) {
        for (size_t i = 0; i < r.set.n; i++) {
            if (r.type == PM_RES_VECTOR && r.set.s[i].nf + r.set.s[i].nh != 1) {
                __builtin_trap(); /* a vector element is one sample */
            }
        }
    }
    qctx_close(&q);
    arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool built;
    if (!built) {
        build();
        built = true;
    }
    if (size > 4096) {
        return 0;
    }
    char perr[256];
    struct promql_expr *e = NULL;
    if (promql_parse((const char *)data, size, &e, perr, sizeof(perr)) != 0) {
        return 0;
    }
    eval(e, 300000, 300000, 0);
    if (e->type == PROMQL_TYPE_SCALAR || e->type == PROMQL_TYPE_VECTOR) {
        eval(e, 0, 600000, 60000);
    }
    promql_free(e);
    return 0;
}
