/*
 * chains_test.c - the LogQL and TraceQL parsers and executors on operator
 * chains (issue 9, finding 1): left-associative chains (1+1+...+1) do not
 * nest, so a nesting limit alone let a 2,000-term query recurse the
 * evaluator off the end of the worker's stack.
 *
 * Exact boundaries first (1024 operators accepted and evaluated, 1025
 * refused with "query too complex"), then a property test: random chains of
 * operators, operands and parentheses, lengths around the limits, from
 * fixed seeds. Each query must either fail to parse with a message, or
 * parse and run through the executor (logs_exec / traces_search over a
 * small corpus) to an answer or a query error; never crash. Everything runs
 * on a thread with a 1 MiB stack, an eighth of a query worker's (pthread
 * default 8 MiB), so "fits the stack" is checked with a margin, under ASan.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "lib/jsonw.h"
#include "query/logql.h"
#include "query/logs.h"
#include "query/traceql.h"
#include "query/traces.h"
#include "storage/batch.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/val.h"
#include "tests/util/tmpdir.h"
#include "tests/util/tstr.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)
#define STACK (1u << 20)
#define MAX_OPS 1024

/* ---- corpus: three log lines of service "svc", one trace of two spans ---- */

static char dir[256];

static void put_kv(struct batch *b, struct attrs *out, const char *k, const char *v)
{
    size_t off = b->heap.len;
    cr_assert_eq(val_put_key(&b->heap, k, strlen(k)), 0);
    cr_assert_eq(val_put_str(&b->heap, v, strlen(v)), 0);
    out->blob = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    out->count = 1;
}

static void corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);

    static const char *const lines[] = {"a=1 b=x", "a=1 b=y", "a=2 b=z"};
    struct batch *b = batch_new(SIG_LOGS);
    cr_assert_not_null(b);
    struct res_row *rr = batch_add_resource(b);
    put_kv(b, &rr->attrs, "service.name", "svc");
    struct scope_row *sc = batch_add_scope(b);
    sc->resource = 0;
    for (int i = 0; i < 3; i++) {
        struct log_row *l = batch_add_log(b);
        l->time_ns = (T0 + 1 + (uint64_t)i) * NS;
        l->scope = 0;
        l->body_type = VAL_STR;
        l->body_str = (struct mstr){lines[i], (uint32_t)strlen(lines[i])};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    cr_assert_not_null(catalog_open_add(SIG_LOGS, ob));

    b = batch_new(SIG_TRACES);
    cr_assert_not_null(b);
    rr = batch_add_resource(b);
    put_kv(b, &rr->attrs, "service.name", "svc");
    sc = batch_add_scope(b);
    sc->resource = 0;
    for (int i = 0; i < 2; i++) {
        struct span_row *s = batch_add_span(b);
        memset(s->trace_id, 0, 16);
        s->trace_id[15] = 1;
        memset(s->span_id, 0, 8);
        s->span_id[7] = (uint8_t)(i + 1);
        if (i == 1) {
            memset(s->parent_span_id, 0, 8);
            s->parent_span_id[7] = 1;
            s->has_parent = true;
        }
        s->scope = 0;
        s->name = i == 0 ? (struct mstr){"root", 4} : (struct mstr){"child", 5};
        s->kind = 2;
        s->start_ns = (T0 + 10) * NS + (uint64_t)i * 1000;
        s->end_ns = s->start_ns + 1000000;
        put_kv(b, &s->attrs, "a", "1");
    }
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    cr_assert_not_null(catalog_open_add(SIG_TRACES, ob));
}

static void teardown(void)
{
    catalog_fini();
}

TestSuite(chains, .init = corpus, .fini = teardown, .timeout = 120);

/* ---- running on a small stack ------------------------------------------------- */

static void on_small_stack(void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_t t;
    cr_assert_eq(pthread_attr_init(&a), 0);
    cr_assert_eq(pthread_attr_setstacksize(&a, STACK), 0);
    cr_assert_eq(pthread_create(&t, &a, fn, arg), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&a);
}

/* Outcome of one query, filled on the small-stack thread (criterion's
 * asserts are for the test thread). */
struct run {
    const char *q;
    int parse_rc, exec_rc;
    char err[512];
    char *answer; /* owned */
};

static void *run_logql(void *arg)
{
    struct run *r = arg;
    struct logql_expr *e = NULL;
    r->answer = NULL;
    r->parse_rc = logql_parse(r->q, strlen(r->q), &e, r->err, sizeof(r->err));
    r->exec_rc = 0;
    if (r->parse_rc != 0) {
        return NULL;
    }
    struct logs_req rq = {
        .expr = e,
        .start_ns = (T0 + 30) * NS,
        .end_ns = (T0 + 30) * NS,
        .instant = true,
        .limit = 10,
        .max_memory = 64u << 20,
    };
    if (!logql_is_metric(e)) {
        rq.start_ns = T0 * NS;
        rq.instant = false;
    }
    struct logs_result *res = NULL;
    r->exec_rc = logs_exec(&rq, &res, r->err, sizeof(r->err));
    if (r->exec_rc == 0) {
        struct evbuffer *out = evbuffer_new();
        struct jsonw w;
        jsonw_init(&w, out);
        logs_write_loki(res, &w);
        size_t n = evbuffer_get_length(out);
        r->answer = strndup((const char *)evbuffer_pullup(out, (ssize_t)n), n);
        evbuffer_free(out);
        logs_result_free(res);
    }
    logql_free(e);
    return NULL;
}

static void *run_traceql(void *arg)
{
    struct run *r = arg;
    struct traceql_expr *e = NULL;
    r->answer = NULL;
    r->parse_rc = traceql_parse(r->q, strlen(r->q), &e, r->err, sizeof(r->err));
    r->exec_rc = 0;
    if (r->parse_rc != 0) {
        return NULL;
    }
    struct traces_search_req rq = {
        .expr = e,
        .start_ns = T0 * NS,
        .end_ns = (T0 + 100) * NS,
        .limit = 20,
        .spss = 3,
    };
    struct evbuffer *out = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, out);
    r->exec_rc = traces_search(&rq, &w, NULL, r->err, sizeof(r->err));
    size_t n = evbuffer_get_length(out);
    r->answer = strndup((const char *)evbuffer_pullup(out, (ssize_t)n), n);
    evbuffer_free(out);
    traceql_free(e);
    return NULL;
}

static struct run logql(const char *q)
{
    struct run r = {.q = q};
    on_small_stack(run_logql, &r);
    return r;
}

static struct run traceql(const char *q)
{
    struct run r = {.q = q};
    on_small_stack(run_traceql, &r);
    return r;
}

static char *chain(const char *term, const char *op, int n)
{
    struct tstr s = {0};
    for (int i = 0; i < n; i++) {
        tstr_add(&s, "%s%s", i ? op : "", term);
    }
    return s.p;
}

/* ---- exact boundaries ------------------------------------------------------------ */

Test(chains, logql_accepts_and_evaluates_1024_operators_and_refuses_1025)
{
    char *q = chain("1", "+", MAX_OPS + 1);
    struct run r = logql(q);
    cr_assert_eq(r.parse_rc, 0, "%s", r.err);
    cr_assert_eq(r.exec_rc, 0, "%s", r.err);
    cr_assert(strstr(r.answer, "\"1025\"") != NULL, "%.300s", r.answer);
    free(r.answer);
    free(q);

    q = chain("1", "+", MAX_OPS + 2);
    r = logql(q);
    cr_assert_eq(r.parse_rc, -EINVAL);
    cr_assert(strstr(r.err, "query too complex: more than 1024 binary operators") != NULL, "%s",
              r.err);
    /* the position is the 1025th operator's: "1+" is two bytes */
    cr_assert(strstr(r.err, "col 2050") != NULL, "%s", r.err);
    free(q);

    /* vectors: one range aggregation per term, evaluated in a loop */
    q = chain("count_over_time({service_name=\"svc\"}[1m])", " + ", MAX_OPS + 1);
    r = logql(q);
    cr_assert_eq(r.parse_rc, 0, "%s", r.err);
    cr_assert_eq(r.exec_rc, 0, "%s", r.err);
    cr_assert(strstr(r.answer, "\"3075\"") != NULL, "%.300s", r.answer); /* 3 x 1025 */
    free(r.answer);
    free(q);

    /* label filter chains: 1024 and/or accepted, 1025 refused */
    char *lf = chain("b=\"q\"", " or ", MAX_OPS);
    struct tstr s = {0};
    tstr_add(&s, "sum(count_over_time({service_name=\"svc\"} | logfmt | %s or b=\"y\" [1m]))", lf);
    r = logql(s.p);
    cr_assert_eq(r.parse_rc, 0, "%s", r.err);
    cr_assert_eq(r.exec_rc, 0, "%s", r.err);
    cr_assert(strstr(r.answer, "\"1\"]") != NULL, "%.300s", r.answer);
    free(r.answer);
    free(s.p);
    s = (struct tstr){0};
    tstr_add(&s, "{service_name=\"svc\"} | logfmt | %s and b=\"y\" or a=\"2\"", lf);
    r = logql(s.p);
    cr_assert_eq(r.parse_rc, -EINVAL);
    cr_assert(strstr(r.err, "query too complex: more than 1024 label filter operators") != NULL,
              "%s", r.err);
    free(s.p);
    free(lf);
}

Test(chains, traceql_accepts_and_evaluates_1024_operators_and_refuses_1025)
{
    static const char *const ops[] = {" && ", " || ", " > ", " >> ", " ~ ", " !< "};
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
        char *q = chain("{ }", ops[k], MAX_OPS + 1);
        struct run r = traceql(q);
        cr_assert_eq(r.parse_rc, 0, "%s: %s", ops[k], r.err);
        cr_assert_eq(r.exec_rc, 0, "%s: %s", ops[k], r.err);
        free(r.answer);
        free(q);
        q = chain("{ }", ops[k], MAX_OPS + 2);
        r = traceql(q);
        cr_assert_eq(r.parse_rc, -EINVAL, "%s", ops[k]);
        cr_assert(strstr(r.err, "query too complex: more than 1024 operators") != NULL, "%s",
                  r.err);
        free(q);
    }
    /* field chains and scalar chains inside one filter */
    char *f = chain("span.a = \"1\"", " && ", 512); /* 512 = and 511 && */
    struct tstr s = {0};
    tstr_add(&s, "{ %s }", f);
    struct run r = traceql(s.p);
    cr_assert_eq(r.parse_rc, 0, "%s", r.err);
    cr_assert_eq(r.exec_rc, 0, "%s", r.err);
    cr_assert(strstr(r.answer, "\"traceID\"") != NULL, "%.300s", r.answer);
    free(r.answer);
    free(s.p);
    s = (struct tstr){0};
    tstr_add(&s, "{ %s && span.a = \"1\" }", f); /* 1025 */
    r = traceql(s.p);
    cr_assert_eq(r.parse_rc, -EINVAL);
    cr_assert(strstr(r.err, "query too complex") != NULL, "%s", r.err);
    free(s.p);
    free(f);
    f = chain("1", " + ", MAX_OPS);
    s = (struct tstr){0};
    tstr_add(&s, "{ %s > 1000 }",
             f); /* 1023 + and a >: Tempo takes scalar arithmetic in a filter */
    r = traceql(s.p);
    cr_assert_eq(r.parse_rc, 0, "%s", r.err);
    cr_assert_eq(r.exec_rc, 0, "%s", r.err);
    cr_assert(strstr(r.answer, "\"traceID\"") != NULL, "%.300s", r.answer);
    free(r.answer);
    free(s.p);
    s = (struct tstr){0};
    tstr_add(&s, "{ 1 + %s > 1000 }", f);
    r = traceql(s.p);
    cr_assert_eq(r.parse_rc, -EINVAL);
    cr_assert(strstr(r.err, "query too complex") != NULL, "%s", r.err);
    free(s.p);
    free(f);
}

/* ---- property: random chains ------------------------------------------------------ */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* A length around the interesting places: short, near the limit, past it. */
static int chain_len(void)
{
    switch (rnd(4)) {
    case 0:
        return 1 + (int)rnd(20);
    case 1:
        return MAX_OPS - 8 + (int)rnd(16);
    case 2:
        return 1 + (int)rnd(MAX_OPS);
    default:
        return MAX_OPS + (int)rnd(2000);
    }
}

struct gen {
    struct tstr s;
    bool long_inner; /* operands may hold long chains of their own */
    int ops;         /* binary operators emitted (LogQL metric / TraceQL all) */
    int lf_ops;      /* LogQL label filter and/or */
    int depth;       /* open parentheses now */
    int max_depth;   /* deepest */
};

static void open_paren(struct gen *g, const char *what)
{
    tstr_add(&g->s, "%s", what);
    if (++g->depth > g->max_depth) {
        g->max_depth = g->depth;
    }
}

/* One operand: a number (scalar chains) or a vector expression. */
static void logql_operand(struct gen *g, bool vec)
{
    if (!vec) {
        static const char *const nums[] = {"1", "2.5", "-3", "0.5"};
        tstr_add(&g->s, "%s", nums[rnd(4)]);
        return;
    }
    switch (rnd(4)) {
    case 0:
        tstr_add(&g->s, "vector(1)");
        break;
    case 1:
        tstr_add(&g->s, "count_over_time({service_name=\"svc\"}[1m])");
        break;
    case 2: {
        /* a label filter chain: long now and then */
        int n = g->long_inner && rnd(3) == 0 ? chain_len() : 1 + (int)rnd(4);
        static const char *const lops[] = {" and ", " or ", ", ", " "};
        tstr_add(&g->s, "sum(count_over_time({service_name=\"svc\"} | logfmt | ");
        for (int i = 0; i < n; i++) {
            tstr_add(&g->s, "%s%s", i ? lops[rnd(4)] : "", rnd(2) ? "a=\"1\"" : "b!=\"q\"");
            g->lf_ops += i ? 1 : 0;
        }
        tstr_add(&g->s, " [1m]))");
        break;
    }
    default:
        tstr_add(&g->s, "sum(rate({service_name=\"svc\"}[5m]))");
        break;
    }
}

/* |n| operands joined by binary operators: arithmetic and comparisons
 * with bool for scalars, and also set operators between vectors. Now and
 * then an operand is a parenthesized (or, for vectors, sum(...)) chain. */
static void logql_chain(struct gen *g, int n, bool vec)
{
    static const char *const bops[] = {"+",         "-",        "*",     "/",    "%",       "^",
                                       " == bool ", " > bool ", " and ", " or ", " unless "};
    size_t nb = sizeof(bops) / sizeof(bops[0]) - (vec ? 0 : 3);
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            tstr_add(&g->s, "%s", bops[rnd((uint32_t)nb)]);
            g->ops++;
        }
        uint32_t c = rnd(40);
        if (c == 0 && g->depth < 80) {
            open_paren(g, "(");
            logql_chain(g, 1 + (int)rnd(4), vec);
            tstr_add(&g->s, ")");
            g->depth--;
        } else if (c == 1 && vec && g->depth < 80) {
            open_paren(g, "sum(");
            logql_chain(g, 1 + (int)rnd(3), true);
            tstr_add(&g->s, ")");
            g->depth--;
        } else {
            logql_operand(g, vec);
        }
    }
}

/* |n| well-typed conditions joined by && / ||. */
static void traceql_field(struct gen *g, int n)
{
    static const struct {
        const char *text;
        int ops;
    } conds[] = {
        {"span.a = \"1\"", 1},     {"duration > 0", 1},      {"name != \"x\"", 1},
        {"span.n + 1 * 2 > 3", 3}, {"span.a =~ \"1|2\"", 1}, {"true", 0},
    };
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            tstr_add(&g->s, "%s", rnd(2) ? " && " : " || ");
            g->ops++;
        }
        uint32_t c = rnd(30);
        if (c == 0 && g->depth < 80) {
            open_paren(g, rnd(2) ? "(" : "!(");
            traceql_field(g, 1 + (int)rnd(3));
            tstr_add(&g->s, ")");
            g->depth--;
        } else {
            size_t k = rnd(sizeof(conds) / sizeof(conds[0]));
            tstr_add(&g->s, "%s", conds[k].text);
            g->ops += conds[k].ops;
        }
    }
}

static void traceql_chain(struct gen *g, int n)
{
    static const char *const sops[] = {" && ", " || ", " > ",   " >> ",
                                       " < ",  " ~ ",  " &>> ", " !> "};
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            tstr_add(&g->s, "%s", sops[rnd(sizeof(sops) / sizeof(sops[0]))]);
            g->ops++;
        }
        uint32_t c = rnd(30);
        if (c == 0 && g->depth < 80) {
            open_paren(g, "(");
            traceql_chain(g, 1 + (int)rnd(3));
            if (rnd(2)) {
                tstr_add(&g->s, " | count() > 0"); /* a stage, not an operator */
            }
            tstr_add(&g->s, ")");
            g->depth--;
        } else if (c < 8) {
            tstr_add(&g->s, "{ ");
            traceql_field(g, g->long_inner && rnd(4) == 0 ? chain_len() : 1 + (int)rnd(3));
            tstr_add(&g->s, " }");
        } else {
            bool cond = rnd(2);
            tstr_add(&g->s, cond ? "{ span.a = \"1\" }" : "{ }");
            g->ops += cond;
        }
    }
}

/* A parse failure has a message; past either limit the parse must fail. */
static void check(const struct run *r, const struct gen *g, int limit_ops)
{
    bool too_many = g->ops > limit_ops || g->lf_ops > MAX_OPS;
    if (r->parse_rc != 0) {
        cr_assert_eq(r->parse_rc, -EINVAL, "%.120s: %d %s", r->q, r->parse_rc, r->err);
        cr_assert(r->err[0] != '\0', "%.120s: no message", r->q);
        return;
    }
    cr_assert(!too_many, "%d operators (%d label filter) accepted: %.120s", g->ops, g->lf_ops,
              r->q);
    cr_assert(g->max_depth <= 64 + 2, "nesting %d accepted: %.120s", g->max_depth, r->q);
    cr_assert(r->exec_rc == 0 || r->exec_rc == -EINVAL || r->exec_rc == -E2BIG ||
                  r->exec_rc == -ENOMEM,
              "%.120s: exec %d %s", r->q, r->exec_rc, r->err);
    if (r->exec_rc == 0) {
        cr_assert(r->answer != NULL && r->answer[0] == '{', "%.120s", r->q);
    }
}

Test(chains, random_logql_chains_parse_or_fail_cleanly_and_evaluate_within_a_small_stack)
{
    int parsed = 0, refused = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng_state = seed * 0x9E3779B97F4A7C15ull;
        struct gen g = {0};
        int n = chain_len();
        g.long_inner = n < 30; /* else mostly refused: one long chain at a time */
        logql_chain(&g, n, seed % 2 == 0);
        struct run r = logql(g.s.p);
        check(&r, &g, MAX_OPS);
        parsed += r.parse_rc == 0;
        refused += r.parse_rc != 0 && strstr(r.err, "too complex") != NULL;
        free(r.answer);
        free(g.s.p);
    }
    /* the generator reaches both sides of the limit */
    cr_assert_gt(parsed, 0);
    cr_assert_gt(refused, 0, "parsed %d", parsed);
}

Test(chains, random_traceql_chains_parse_or_fail_cleanly_and_evaluate_within_a_small_stack)
{
    int parsed = 0, refused = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng_state = seed * 0xD1B54A32D192ED03ull;
        struct gen g = {0};
        int n = chain_len();
        g.long_inner = n < 30;
        traceql_chain(&g, n);
        if (seed % 3 == 0) {
            /* a scalar filter stage with an arithmetic chain */
            int k = chain_len();
            tstr_add(&g.s, " | count()");
            for (int i = 0; i < k; i++) {
                static const char *const aops[] = {" + ", " - ", " * ", " / ", " ^ "};
                bool paren = rnd(2);
                tstr_add(&g.s, "%s%s", aops[rnd(5)], paren ? "(2 * 1)" : "1");
                g.ops += paren ? 2 : 1;
            }
            tstr_add(&g.s, " > 0");
        }
        struct run r = traceql(g.s.p);
        check(&r, &g, MAX_OPS);
        parsed += r.parse_rc == 0;
        refused += r.parse_rc != 0 && strstr(r.err, "too complex") != NULL;
        free(r.answer);
        free(g.s.p);
    }
    cr_assert_gt(parsed, 0);
    cr_assert_gt(refused, 0, "parsed %d", parsed);
}
