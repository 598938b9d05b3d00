#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/tqmx.h"

/* ---- the conformance cases: each parses or is refused as its verdict says ---- */

static size_t unescape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            char c = s[++i];
            out[o++] = c == 't' ? '\t' : c == 'n' ? '\n' : c;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return o;
}

static void run_cases(const char *name, unsigned *n_cases)
{
    const char *vec = getenv("MIRADB_VECTORS");
    cr_assert_not_null(vec, "MIRADB_VECTORS unset");
    char path[1024];
    snprintf(path, sizeof(path), "%s/../conformance/%s", vec, name);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char line[8192], q[8192];
    unsigned bad = 0, n = 0;
    for (unsigned no = 1; fgets(line, sizeof(line), f) != NULL && no < 100000; no++) {
        size_t len = strcspn(line, "\n");
        line[len] = '\0';
        if (line[0] == '#' || line[0] == '\0') {
            continue;
        }
        char *t1 = strchr(line, '\t');
        char *t2 = t1 != NULL ? strchr(t1 + 1, '\t') : NULL;
        cr_assert_not_null(t2, "%s:%u: not three fields", name, no);
        bool valid = strncmp(line, "valid\t", 6) == 0;
        size_t qn = unescape(t2 + 1, strlen(t2 + 1), q);
        char err[512] = "";
        struct tqmx_expr *e = NULL;
        int rc = tqmx_parse(q, qn, &e, err, sizeof(err));
        if (valid != (rc == 0) || (!valid && (rc != -EINVAL || err[0] == '\0'))) {
            cr_log_error("%s:%u: %s %s: rc %d %s", name, no, valid ? "valid" : "invalid", q, rc,
                         err);
            bad++;
        }
        tqmx_free(e);
        n++;
    }
    fclose(f);
    cr_assert_eq(bad, 0, "%u of %u cases answered wrongly", bad, n);
    *n_cases = n;
}

Test(tqmx, conformance_cases)
{
    unsigned n;
    run_cases("traceql_metrics.cases", &n);
    cr_assert_eq(n, 279);
}

/* ---- the tree ---- */

static struct tqmx_expr *ok(const char *q)
{
    char err[512] = "";
    struct tqmx_expr *e = NULL;
    int rc = tqmx_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, 0, "query %s failed: %s", q, err);
    return e;
}

static void bad(const char *q, const char *frag)
{
    char err[512] = "";
    struct tqmx_expr *e = (struct tqmx_expr *)1;
    int rc = tqmx_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, -EINVAL, "query %s: rc %d", q, rc);
    cr_assert_null(e);
    cr_assert_not_null(strstr(err, frag), "query %s: \"%s\" lacks \"%s\"", q, err, frag);
}

Test(tqmx, first_stage_and_by)
{
    struct tqmx_expr *e = ok("{ status = error } | rate() by (resource.service.name, name)");
    cr_assert_eq(e->root->kind, TQMX_N_QUERY);
    const struct tqmx_query *q = e->root->q;
    cr_assert_eq(q->fn, TQMX_RATE);
    cr_assert_eq(q->n_by, 2);
    cr_assert_eq(q->by[0].kind, TRACEQL_F_ATTR);
    cr_assert_eq(q->by[0].scope, TRACEQL_SCOPE_RESOURCE);
    cr_assert_str_eq(q->by[0].name, "service.name");
    cr_assert_eq(q->by[1].kind, TRACEQL_F_INTRINSIC);
    cr_assert_eq(q->by[1].intrinsic, TRACEQL_I_NAME);
    cr_assert_eq(q->input->root->kind, TRACEQL_N_FILTER);
    tqmx_free(e);

    e = ok("{} | quantile_over_time(duration, .5, 0.9, 1)");
    q = e->root->q;
    cr_assert_eq(q->fn, TQMX_QUANTILE_OVER_TIME);
    cr_assert_eq(q->attr.intrinsic, TRACEQL_I_DURATION);
    cr_assert_eq(q->n_qs, 3);
    cr_assert_float_eq(q->qs[0], 0.5, 1e-12);
    cr_assert_float_eq(q->qs[1], 0.9, 1e-12);
    cr_assert_float_eq(q->qs[2], 1.0, 1e-12);
    tqmx_free(e);

    e = ok("{} | compare({status=error}, 5, 1000, 2000)");
    q = e->root->q;
    cr_assert_eq(q->fn, TQMX_COMPARE);
    cr_assert_eq(q->topn, 5);
    cr_assert_eq(q->cmp_start_ns, 1000);
    cr_assert_eq(q->cmp_end_ns, 2000);
    tqmx_free(e);
}

Test(tqmx, arithmetic_and_stages)
{
    struct tqmx_expr *e = ok("3 / 2 + ({} | rate()) * 100 > 5 | topk(2)");
    const struct tqmx_node *n = e->root;
    cr_assert_eq(n->kind, TQMX_N_BINARY);
    cr_assert_eq(n->op, '+');
    cr_assert_eq(n->l->kind, TQMX_N_SCALAR);
    cr_assert_float_eq(n->l->v, 1.0, 1e-12); /* integer division, as Tempo folds it */
    cr_assert_eq(n->r->op, '*');
    cr_assert_float_eq(n->r->r->v, 100.0, 1e-12);
    cr_assert_eq(n->n_stages, 2);
    cr_assert_eq(n->stages[0].kind, TQMX_ST_FILTER);
    cr_assert_eq(n->stages[0].op, TRACEQL_OP_GT);
    cr_assert_eq(n->stages[1].kind, TQMX_ST_TOPK);
    cr_assert_eq(n->stages[1].k, 2);
    tqmx_free(e);

    e = ok("({} | max_over_time(duration)) > 10s with(sample=0.1)");
    cr_assert(e->has_sample);
    cr_assert_eq(e->exemplars_hint, -1);
    cr_assert_float_eq(e->root->stages[0].v, 10.0, 1e-12);
    tqmx_free(e);
}

Test(tqmx, hints)
{
    struct tqmx_expr *e = ok("{} | rate() with(exemplars=7, sample=true)");
    cr_assert_eq(e->exemplars_hint, 7);
    cr_assert(e->has_sample);
    tqmx_free(e);
    e = ok("{} | rate() with (exemplars=false)");
    cr_assert_eq(e->exemplars_hint, 0);
    cr_assert(!e->has_sample);
    tqmx_free(e);
    e = ok("{} | rate() with (exemplars=true)");
    cr_assert_eq(e->exemplars_hint, -2);
    tqmx_free(e);
    bad("{} | rate() with (exemplars=\"x\")", "exemplars takes a count, true or false");
}

Test(tqmx, refusals)
{
    bad("{} | rate() + 5", "in parentheses");
    bad("{} | topk(10)", "topk() is a second stage");
    bad("{} | rate() | topk(0)", "limit must be greater than 0");
    bad("{} | rate() by (name, kind, status, .a, .b, .c)",
        "metrics group by 6 values not yet supported");
    bad("{} | histogram_over_time(duration) by (name, kind, status, .a, .b)",
        "metrics group by 5 values not yet supported");
    bad("{ } | compare({ .service=\"x\" }, 1000000000)",
        "compare() top number of values must be an integer between 1 and 1000");
    bad("({} | rate()) * 10s", "durations cannot");
    bad("({} | rate()) % 10", "not % or ^");
    bad("{} | compare({status=error}) > 10",
        "`compare()` cannot be used with second stage functions");
    bad("{ .a = 1 }", "expecting \"|\" and a metrics function such as rate()");
    bad("(1 + 2) > 3", "not a metrics query");
    bad("{} | quantile_over_time(duration, 2)", "quantile must be between 0 and 1: 2");
    bad("{} | rate() by (1)",
        "col 17: syntax error: unexpected number \"1\", expecting an attribute");
    bad("{} | rate() by (foo)", "\"foo\" is not an attribute or intrinsic");
    bad("{} | rate(", "parse error at line 1, col 11");
}

/* ---- buckets ---- */

Test(tqmx, bucket_alignment)
{
    struct tqmx_range r;
    /* [100s, 161s] step 30s: start 90s - 30s = 60s, end up to 180s: (60,90] (90,120] ... */
    cr_assert_eq(tqmx_range_init(&r, 100000000000ull, 161000000000ull, 30000000000ull, false, 100),
                 0);
    cr_assert_eq(r.start, 60000000000ull);
    cr_assert_eq(r.end, 180000000000ull);
    cr_assert_eq(r.n, 4);
    cr_assert_eq(tqmx_bucket_of(&r, 60000000000ull), -1);
    cr_assert_eq(tqmx_bucket_of(&r, 60000000001ull), 0);
    cr_assert_eq(tqmx_bucket_of(&r, 90000000000ull), 0); /* right-closed */
    cr_assert_eq(tqmx_bucket_of(&r, 90000000001ull), 1);
    cr_assert_eq(tqmx_bucket_of(&r, 180000000000ull), 3);
    cr_assert_eq(tqmx_bucket_of(&r, 180000000001ull), -1);
    cr_assert_eq(tqmx_bucket_ts(&r, 0), 90000000000ull);
    cr_assert_eq(tqmx_bucket_ts(&r, 3), 180000000000ull);
    cr_assert_eq(tqmx_range_init(&r, 5, 5, 1, false, 100), -EINVAL);
    cr_assert_eq(tqmx_range_init(&r, 0, 1000000000000ull, 1000000, false, 11000), -E2BIG);
    cr_assert_eq(tqmx_range_init(&r, 100, 200, 0, true, 1), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(tqmx_bucket_of(&r, 100), -1);
    cr_assert_eq(tqmx_bucket_of(&r, 200), 0);
    cr_assert_eq(tqmx_default_step(0, 3600000000000ull), 15000000000ull);
    cr_assert_eq(tqmx_default_step(0, 10000000000ull), 50000000ull);
}
