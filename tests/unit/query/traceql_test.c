#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "query/qlex.h"
#include "query/traceql.h"

/* ---- helpers ------------------------------------------------------------- */

static struct traceql_expr *ok(const char *q)
{
    char err[512] = "";
    struct traceql_expr *e = NULL;
    int rc = traceql_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, 0, "query %s failed: %s", q, err);
    cr_assert_not_null(e);
    cr_assert_not_null(e->root);
    return e;
}

static void bad(const char *q, unsigned col, const char *frag)
{
    char err[512] = "";
    struct traceql_expr *e = (struct traceql_expr *)1;
    int rc = traceql_parse(q, strlen(q), &e, err, sizeof(err));
    cr_assert_eq(rc, -EINVAL, "query %s: rc %d, want -EINVAL", q, rc);
    cr_assert_null(e, "query %s: *out must be NULL on error", q);
    char want[64];
    snprintf(want, sizeof(want), "parse error at line 1, col %u: ", col);
    cr_assert_eq(strncmp(err, want, strlen(want)), 0, "query %s: got \"%s\", want prefix \"%s\"", q,
                 err, want);
    cr_assert_not_null(strstr(err, frag), "query %s: \"%s\" lacks \"%s\"", q, err, frag);
}

/* The filter of a query that is a single { ... }. */
static const struct traceql_field *filter_of(const struct traceql_expr *e)
{
    cr_assert_eq(e->root->kind, TRACEQL_N_FILTER);
    return e->root->filter;
}

static void is_attr(const struct traceql_field *f, enum traceql_scope scope, const char *name)
{
    cr_assert_eq(f->kind, TRACEQL_F_ATTR);
    cr_assert_eq(f->type, TRACEQL_T_ANY);
    cr_assert_eq(f->scope, scope, "scope %d want %d", f->scope, scope);
    cr_assert_eq(f->name_len, strlen(name));
    cr_assert_str_eq(f->name, name);
}

static void is_intrinsic(const struct traceql_field *f, enum traceql_intrinsic i,
                         enum traceql_type t)
{
    cr_assert_eq(f->kind, TRACEQL_F_INTRINSIC);
    cr_assert_eq(f->intrinsic, i, "intrinsic %d want %d", f->intrinsic, i);
    cr_assert_eq(f->type, t);
}

static void is_static_int(const struct traceql_field *f, enum traceql_type t, int64_t v)
{
    cr_assert_eq(f->kind, TRACEQL_F_STATIC);
    cr_assert_eq(f->st.type, t, "type %d want %d", f->st.type, t);
    cr_assert_eq(f->st.i, v, "value %lld want %lld", (long long)f->st.i, (long long)v);
}

static void is_static_str(const struct traceql_field *f, const char *s)
{
    cr_assert_eq(f->kind, TRACEQL_F_STATIC);
    cr_assert_eq(f->st.type, TRACEQL_T_STRING);
    cr_assert_eq(f->st.n, strlen(s));
    cr_assert_str_eq(f->st.s, s);
}

static const struct traceql_field *bin(const struct traceql_field *f, enum traceql_op op)
{
    cr_assert_eq(f->kind, TRACEQL_F_BINARY);
    cr_assert_eq(f->op, op, "op %d want %d", f->op, op);
    return f;
}

/* ---- spanset filters ------------------------------------------------------- */

Test(traceql, empty_filter_selects_every_span)
{
    static const char *const qs[] = {"{}", "{ }", " {\n} "};
    for (size_t i = 0; i < 3; i++) {
        struct traceql_expr *e = ok(qs[i]);
        cr_assert_eq(e->root->kind, TRACEQL_N_FILTER);
        cr_assert_null(e->root->filter);
        cr_assert_not(e->most_recent);
        size_t n;
        traceql_facts(e, &n);
        cr_assert_eq(n, 0);
        traceql_free(e);
    }
}

Test(traceql, grafana_search_builder_query)
{
    struct traceql_expr *e =
        ok("{resource.service.name=\"api\" && span.http.method=\"GET\" && status=error && "
           "duration>100ms && name=~\"GET /users/.*\"}");
    const struct traceql_field *f = filter_of(e);
    /* (((svc && method) && status) && duration) && name */
    bin(f, TRACEQL_OP_AND);
    cr_assert_eq(f->type, TRACEQL_T_BOOL);
    const struct traceql_field *name = bin(f->r, TRACEQL_OP_RE);
    is_intrinsic(name->l, TRACEQL_I_NAME, TRACEQL_T_STRING);
    is_static_str(name->r, "GET /users/.*");
    cr_assert_not_null(name->re);
    cr_assert(traceql_regex_match(name, "GET /users/42", 13));
    cr_assert_not(traceql_regex_match(name, "xGET /users/42", 14), "fully anchored");
    const struct traceql_field *l = bin(f->l, TRACEQL_OP_AND);
    const struct traceql_field *dur = bin(l->r, TRACEQL_OP_GT);
    is_intrinsic(dur->l, TRACEQL_I_DURATION, TRACEQL_T_DURATION);
    is_static_int(dur->r, TRACEQL_T_DURATION, 100000000LL);
    l = bin(l->l, TRACEQL_OP_AND);
    const struct traceql_field *st = bin(l->r, TRACEQL_OP_EQ);
    is_intrinsic(st->l, TRACEQL_I_STATUS, TRACEQL_T_STATUS);
    is_static_int(st->r, TRACEQL_T_STATUS, 2);
    l = bin(l->l, TRACEQL_OP_AND);
    const struct traceql_field *svc = bin(l->l, TRACEQL_OP_EQ);
    is_attr(svc->l, TRACEQL_SCOPE_RESOURCE, "service.name");
    is_static_str(svc->r, "api");
    const struct traceql_field *m = bin(l->r, TRACEQL_OP_EQ);
    is_attr(m->l, TRACEQL_SCOPE_SPAN, "http.method");
    cr_assert_eq(svc->pos, 22, "a binary node carries its operator's offset");

    size_t n;
    const struct traceql_fact *fa = traceql_facts(e, &n);
    cr_assert_eq(n, 4);
    cr_assert_eq(fa[0].kind, TRACEQL_FACT_ATTR_EQ);
    cr_assert_eq(fa[0].scope, TRACEQL_SCOPE_RESOURCE);
    cr_assert_str_eq(fa[0].name, "service.name");
    cr_assert_str_eq(fa[0].value.s, "api");
    cr_assert_eq(fa[1].kind, TRACEQL_FACT_ATTR_EQ);
    cr_assert_eq(fa[1].scope, TRACEQL_SCOPE_SPAN);
    cr_assert_str_eq(fa[1].name, "http.method");
    cr_assert_eq(fa[2].kind, TRACEQL_FACT_STATUS_EQ);
    cr_assert_eq(fa[2].value.i, 2);
    cr_assert_eq(fa[3].kind, TRACEQL_FACT_DURATION);
    cr_assert_eq(fa[3].op, TRACEQL_OP_GT);
    cr_assert_eq(fa[3].value.i, 100000000LL);
    traceql_free(e);
}

Test(traceql, and_or_share_one_precedence_left_to_right_as_in_tempo)
{
    struct traceql_expr *e = ok("{ .a = 1 || .b = 2 && .c = 3 }");
    const struct traceql_field *f = bin(filter_of(e), TRACEQL_OP_AND);
    bin(f->l, TRACEQL_OP_OR);
    bin(f->r, TRACEQL_OP_EQ);
    traceql_free(e);
    e = ok("{ .a = 1 || (.b = 2 && .c = 3) }");
    f = bin(filter_of(e), TRACEQL_OP_OR);
    bin(f->r, TRACEQL_OP_AND);
    traceql_free(e);
}

Test(traceql, arithmetic_unary_and_comparison_precedence)
{
    struct traceql_expr *e = ok("{ span.a + 2 * 3 ^ 2 ^ 1 - -4 > 10 }");
    const struct traceql_field *gt = bin(filter_of(e), TRACEQL_OP_GT);
    const struct traceql_field *sub = bin(gt->l, TRACEQL_OP_SUB);
    is_static_int(sub->r, TRACEQL_T_INT, -4); /* folded literal */
    const struct traceql_field *add = bin(sub->l, TRACEQL_OP_ADD);
    is_attr(add->l, TRACEQL_SCOPE_SPAN, "a");
    const struct traceql_field *mul = bin(add->r, TRACEQL_OP_MUL);
    const struct traceql_field *pw = bin(mul->r, TRACEQL_OP_POW);
    bin(pw->r, TRACEQL_OP_POW); /* right associative */
    cr_assert_eq(add->type, TRACEQL_T_FLOAT, "arithmetic on an attribute is numeric");
    cr_assert_eq(mul->type, TRACEQL_T_INT);
    traceql_free(e);

    e = ok("{ !(.a = 1) && -span.b < 0 && !.flag }");
    const struct traceql_field *f = bin(filter_of(e), TRACEQL_OP_AND);
    cr_assert_eq(f->r->kind, TRACEQL_F_UNARY);
    cr_assert_eq(f->r->op, TRACEQL_OP_NOT);
    is_attr(f->r->l, TRACEQL_SCOPE_ANY, "flag");
    f = bin(f->l, TRACEQL_OP_AND);
    cr_assert_eq(f->l->kind, TRACEQL_F_UNARY);
    cr_assert_eq(f->l->op, TRACEQL_OP_NOT);
    bin(f->l->l, TRACEQL_OP_EQ);
    const struct traceql_field *lt = bin(f->r, TRACEQL_OP_LT);
    cr_assert_eq(lt->l->kind, TRACEQL_F_UNARY);
    cr_assert_eq(lt->l->op, TRACEQL_OP_NEG);
    traceql_free(e);
}

Test(traceql, statics_intrinsics_and_attribute_names)
{
    struct traceql_expr *e =
        ok("{ .i = 200 && .f = 1.5 && .neg = -7 && .s = \"x\\ty\" && .raw = `a\\d` && .t = true && "
           ".u = false && .n = nil && .d1 = 5ns && .d2 = 10us && .d3 = 10\xc2\xb5s && .d4 = 3ms && "
           ".d5 = 1.5s && .d6 = 2m && .d7 = 1h30m && .big = maxInt && .small = minInt && "
           ".e = 1e3 }");
    const struct traceql_field *f = filter_of(e);
    static const struct {
        enum traceql_type t;
        int64_t v;
    } want_rev[] = {
        /* walking the left-deep && chain from the right */
        {TRACEQL_T_FLOAT, 0},
        {TRACEQL_T_INT, INT64_MIN},
        {TRACEQL_T_INT, INT64_MAX},
        {TRACEQL_T_DURATION, 5400000000000LL},
        {TRACEQL_T_DURATION, 120000000000LL},
        {TRACEQL_T_DURATION, 1500000000LL},
        {TRACEQL_T_DURATION, 3000000LL},
        {TRACEQL_T_DURATION, 10000LL},
        {TRACEQL_T_DURATION, 10000LL},
        {TRACEQL_T_DURATION, 5LL},
        {TRACEQL_T_NIL, 0},
        {TRACEQL_T_BOOL, 0},
        {TRACEQL_T_BOOL, 1},
    };
    for (size_t i = 0; i < sizeof(want_rev) / sizeof(want_rev[0]); i++) {
        bin(f, TRACEQL_OP_AND);
        const struct traceql_field *cmp = f->r;
        if (want_rev[i].t == TRACEQL_T_FLOAT) {
            cr_assert_eq(cmp->r->st.type, TRACEQL_T_FLOAT);
            cr_assert_float_eq(cmp->r->st.f, 1000.0, 1e-9);
        } else if (want_rev[i].t == TRACEQL_T_NIL) {
            cr_assert_eq(cmp->r->st.type, TRACEQL_T_NIL);
        } else {
            is_static_int(cmp->r, want_rev[i].t, want_rev[i].v);
        }
        f = f->l;
    }
    /* .raw, .s, .neg, .f, .i remain */
    bin(f, TRACEQL_OP_AND);
    is_static_str(f->r->r, "a\\d");
    f = f->l;
    is_static_str(f->r->r, "x\ty");
    f = f->l;
    is_static_int(f->r->r, TRACEQL_T_INT, -7);
    f = f->l;
    cr_assert_float_eq(f->r->r->st.f, 1.5, 1e-12);
    is_static_int(f->l->r, TRACEQL_T_INT, 200);
    traceql_free(e);

    e = ok("{ span.\"a b\" = 1 && resource.\"q\\\"x\\\\\" = 2 && .\"dot.ted\" = 3 && "
           "event.exception.type = \"E\" && link.x = 1 && instrumentation.lib = \"l\" && "
           "span.http.status_code=500 && span.a-b/c:d = 1}");
    f = filter_of(e);
    static const struct {
        enum traceql_scope scope;
        const char *name;
    } attrs_rev[] = {
        {TRACEQL_SCOPE_SPAN, "a-b/c:d"},         {TRACEQL_SCOPE_SPAN, "http.status_code"},
        {TRACEQL_SCOPE_INSTRUMENTATION, "lib"},  {TRACEQL_SCOPE_LINK, "x"},
        {TRACEQL_SCOPE_EVENT, "exception.type"}, {TRACEQL_SCOPE_ANY, "dot.ted"},
        {TRACEQL_SCOPE_RESOURCE, "q\"x\\"},
    };
    for (size_t i = 0; i < sizeof(attrs_rev) / sizeof(attrs_rev[0]); i++) {
        bin(f, TRACEQL_OP_AND);
        is_attr(f->r->l, attrs_rev[i].scope, attrs_rev[i].name);
        f = f->l;
    }
    is_attr(f->l, TRACEQL_SCOPE_SPAN, "a b");
    traceql_free(e);

    static const struct {
        const char *q;
        enum traceql_intrinsic i;
        enum traceql_type t;
    } intr[] = {
        {"{ name = \"x\" }", TRACEQL_I_NAME, TRACEQL_T_STRING},
        {"{ span:name = \"x\" }", TRACEQL_I_NAME, TRACEQL_T_STRING},
        {"{ status = ok }", TRACEQL_I_STATUS, TRACEQL_T_STATUS},
        {"{ span:status = unset }", TRACEQL_I_STATUS, TRACEQL_T_STATUS},
        {"{ statusMessage = \"m\" }", TRACEQL_I_STATUS_MESSAGE, TRACEQL_T_STRING},
        {"{ kind = server }", TRACEQL_I_KIND, TRACEQL_T_KIND},
        {"{ span:kind != consumer }", TRACEQL_I_KIND, TRACEQL_T_KIND},
        {"{ duration >= 1s }", TRACEQL_I_DURATION, TRACEQL_T_DURATION},
        {"{ span:duration < 2 }", TRACEQL_I_DURATION, TRACEQL_T_DURATION},
        {"{ span:id = \"0102030405060708\" }", TRACEQL_I_SPAN_ID, TRACEQL_T_STRING},
        {"{ span:parentID = \"01\" }", TRACEQL_I_PARENT_ID, TRACEQL_T_STRING},
        {"{ span:childCount > 2 }", TRACEQL_I_CHILD_COUNT, TRACEQL_T_INT},
        {"{ rootName = \"r\" }", TRACEQL_I_ROOT_NAME, TRACEQL_T_STRING},
        {"{ trace:rootName = \"r\" }", TRACEQL_I_ROOT_NAME, TRACEQL_T_STRING},
        {"{ rootServiceName = \"s\" }", TRACEQL_I_ROOT_SERVICE, TRACEQL_T_STRING},
        {"{ trace:rootService = \"s\" }", TRACEQL_I_ROOT_SERVICE, TRACEQL_T_STRING},
        {"{ traceDuration > 1m }", TRACEQL_I_TRACE_DURATION, TRACEQL_T_DURATION},
        {"{ trace:duration > 1m }", TRACEQL_I_TRACE_DURATION, TRACEQL_T_DURATION},
        {"{ trace:id = \"ab\" }", TRACEQL_I_TRACE_ID, TRACEQL_T_STRING},
        {"{ event:name = \"e\" }", TRACEQL_I_EVENT_NAME, TRACEQL_T_STRING},
        {"{ event:timeSinceStart > 1ms }", TRACEQL_I_EVENT_TIME_SINCE_START, TRACEQL_T_DURATION},
        {"{ link:traceID = \"ab\" }", TRACEQL_I_LINK_TRACE_ID, TRACEQL_T_STRING},
        {"{ link:spanID = \"ab\" }", TRACEQL_I_LINK_SPAN_ID, TRACEQL_T_STRING},
        {"{ instrumentation:name = \"n\" }", TRACEQL_I_INSTR_NAME, TRACEQL_T_STRING},
        {"{ instrumentation:version = \"v\" }", TRACEQL_I_INSTR_VERSION, TRACEQL_T_STRING},
    };
    for (size_t i = 0; i < sizeof(intr) / sizeof(intr[0]); i++) {
        e = ok(intr[i].q);
        const struct traceql_field *c = filter_of(e);
        cr_assert_eq(c->kind, TRACEQL_F_BINARY, "%s", intr[i].q);
        is_intrinsic(c->l, intr[i].i, intr[i].t);
        traceql_free(e);
    }
    cr_assert_str_eq(traceql_intrinsic_name(TRACEQL_I_ROOT_SERVICE), "rootServiceName");
    cr_assert_str_eq(traceql_intrinsic_name(TRACEQL_I_SPAN_ID), "span:id");

    static const char *const kinds[] = {"unspecified", "internal", "server",
                                        "client",      "producer", "consumer"};
    for (int k = 0; k < 6; k++) {
        char q[64];
        snprintf(q, sizeof(q), "{ kind = %s }", kinds[k]);
        e = ok(q);
        is_static_int(filter_of(e)->r, TRACEQL_T_KIND, k);
        traceql_free(e);
    }
}

/* ---- spanset operators and pipelines ------------------------------------------------- */

Test(traceql, spanset_operators_and_their_precedence)
{
    /* structural operators bind tighter than && and ||, which share a level */
    struct traceql_expr *e = ok("{ .a = 1 } && { .b = 2 } > { .c = 3 } || { } >> { .d = 4 }");
    const struct traceql_node *n = e->root;
    cr_assert_eq(n->kind, TRACEQL_N_SPANSET_OP);
    cr_assert_eq(n->sop, TRACEQL_SOP_UNION);
    cr_assert_eq(n->r->sop, TRACEQL_SOP_DESC);
    cr_assert_eq(n->l->sop, TRACEQL_SOP_AND);
    cr_assert_eq(n->l->l->kind, TRACEQL_N_FILTER);
    cr_assert_eq(n->l->r->sop, TRACEQL_SOP_CHILD);
    cr_assert_eq(n->l->r->r->kind, TRACEQL_N_FILTER);
    size_t nf;
    traceql_facts(e, &nf);
    cr_assert_eq(nf, 0, "an || of spansets requires neither side");
    traceql_free(e);

    static const struct {
        const char *op;
        enum traceql_sop sop;
    } ops[] = {
        {">", TRACEQL_SOP_CHILD},
        {">>", TRACEQL_SOP_DESC},
        {"<", TRACEQL_SOP_PARENT},
        {"<<", TRACEQL_SOP_ANCESTOR},
        {"~", TRACEQL_SOP_SIBLING},
        {"&>", TRACEQL_SOP_UNION_CHILD},
        {"&>>", TRACEQL_SOP_UNION_DESC},
        {"&<", TRACEQL_SOP_UNION_PARENT},
        {"&<<", TRACEQL_SOP_UNION_ANCESTOR},
        {"&~", TRACEQL_SOP_UNION_SIBLING},
        {"!>", TRACEQL_SOP_NOT_CHILD},
        {"!>>", TRACEQL_SOP_NOT_DESC},
        {"!<", TRACEQL_SOP_NOT_PARENT},
        {"!<<", TRACEQL_SOP_NOT_ANCESTOR},
        {"!~", TRACEQL_SOP_NOT_SIBLING},
        {"&&", TRACEQL_SOP_AND},
        {"||", TRACEQL_SOP_UNION},
    };
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char q[96];
        snprintf(q, sizeof(q), "{ name = \"a\" } %s { name = \"b\" }", ops[i].op);
        e = ok(q);
        cr_assert_eq(e->root->kind, TRACEQL_N_SPANSET_OP, "%s", q);
        cr_assert_eq(e->root->sop, ops[i].sop, "%s", q);
        cr_assert_eq(e->root->pos, 15, "%s", q);
        size_t n_facts;
        const struct traceql_fact *fa = traceql_facts(e, &n_facts);
        /* both sides must be non-empty except for || and the negated forms */
        size_t want = ops[i].sop == TRACEQL_SOP_UNION       ? 0
                      : ops[i].sop >= TRACEQL_SOP_NOT_CHILD ? 1
                                                            : 2;
        cr_assert_eq(n_facts, want, "%s: %zu facts", q, n_facts);
        if (want == 1) {
            cr_assert_str_eq(fa[0].value.s, "b", "%s: the right side's fact", q);
        }
        traceql_free(e);
    }

    /* left to right within a level */
    e = ok("{} > {} > {}");
    cr_assert_eq(e->root->l->sop, TRACEQL_SOP_CHILD);
    cr_assert_eq(e->root->r->kind, TRACEQL_N_FILTER);
    traceql_free(e);
    e = ok("{} > ({} > {})");
    cr_assert_eq(e->root->l->kind, TRACEQL_N_FILTER);
    cr_assert_eq(e->root->r->sop, TRACEQL_SOP_CHILD);
    traceql_free(e);
}

Test(traceql, pipelines_scalar_filters_select_by_and_hints)
{
    struct traceql_expr *e = ok("{ status = error } | count() > 2");
    const struct traceql_node *n = e->root;
    cr_assert_eq(n->kind, TRACEQL_N_PIPELINE);
    cr_assert_eq(n->input->kind, TRACEQL_N_FILTER);
    cr_assert_eq(n->n_stages, 1);
    const struct traceql_stage *st = &n->stages[0];
    cr_assert_eq(st->kind, TRACEQL_STAGE_SCALAR_FILTER);
    cr_assert_eq(st->cmp, TRACEQL_OP_GT);
    cr_assert_eq(st->lhs->kind, TRACEQL_S_AGG);
    cr_assert_eq(st->lhs->agg, TRACEQL_AGG_COUNT);
    cr_assert_null(st->lhs->field);
    cr_assert_eq(st->rhs->kind, TRACEQL_S_STATIC);
    cr_assert_eq(st->rhs->st.i, 2);
    cr_assert_eq(st->pos, 21);
    size_t nf;
    traceql_facts(e, &nf);
    cr_assert_eq(nf, 1);
    traceql_free(e);

    /* a bare aggregate filter runs on {} */
    e = ok("count() > 10");
    n = e->root;
    cr_assert_eq(n->kind, TRACEQL_N_PIPELINE);
    cr_assert_eq(n->input->kind, TRACEQL_N_FILTER);
    cr_assert_null(n->input->filter);
    cr_assert_eq(n->stages[0].kind, TRACEQL_STAGE_SCALAR_FILTER);
    traceql_free(e);

    e = ok("{} | avg(duration) > 20ms | max(span.x) <= 3.5 / 2 | sum(.n) != -1 | "
           "min(duration) = 1s");
    n = e->root;
    cr_assert_eq(n->n_stages, 4);
    cr_assert_eq(n->stages[0].lhs->agg, TRACEQL_AGG_AVG);
    is_intrinsic(n->stages[0].lhs->field, TRACEQL_I_DURATION, TRACEQL_T_DURATION);
    cr_assert_eq(n->stages[0].rhs->st.type, TRACEQL_T_DURATION);
    cr_assert_eq(n->stages[0].rhs->st.i, 20000000LL);
    cr_assert_eq(n->stages[1].lhs->agg, TRACEQL_AGG_MAX);
    cr_assert_eq(n->stages[1].rhs->kind, TRACEQL_S_BINARY);
    cr_assert_eq(n->stages[1].rhs->op, TRACEQL_OP_DIV);
    cr_assert_eq(n->stages[1].cmp, TRACEQL_OP_LE);
    cr_assert_eq(n->stages[2].lhs->agg, TRACEQL_AGG_SUM);
    cr_assert_eq(n->stages[2].rhs->st.i, -1);
    cr_assert_eq(n->stages[3].lhs->agg, TRACEQL_AGG_MIN);
    traceql_free(e);

    e = ok("{ resource.service.name = \"api\" } | select(span.http.url, resource.k8s.pod.name, "
           "duration, .x) | by(resource.service.name) | { duration > 1s } | coalesce() "
           "with (most_recent=true)");
    cr_assert(e->most_recent);
    n = e->root;
    cr_assert_eq(n->n_stages, 4);
    st = &n->stages[0];
    cr_assert_eq(st->kind, TRACEQL_STAGE_SELECT);
    cr_assert_eq(st->n_fields, 4);
    is_attr(st->fields[0], TRACEQL_SCOPE_SPAN, "http.url");
    is_attr(st->fields[1], TRACEQL_SCOPE_RESOURCE, "k8s.pod.name");
    is_intrinsic(st->fields[2], TRACEQL_I_DURATION, TRACEQL_T_DURATION);
    is_attr(st->fields[3], TRACEQL_SCOPE_ANY, "x");
    cr_assert_eq(n->stages[1].kind, TRACEQL_STAGE_BY);
    cr_assert_eq(n->stages[1].n_fields, 1);
    is_attr(n->stages[1].fields[0], TRACEQL_SCOPE_RESOURCE, "service.name");
    cr_assert_eq(n->stages[2].kind, TRACEQL_STAGE_SPANSET);
    cr_assert_eq(n->stages[2].node->kind, TRACEQL_N_FILTER);
    cr_assert_eq(n->stages[3].kind, TRACEQL_STAGE_COALESCE);
    size_t nf2;
    const struct traceql_fact *fa = traceql_facts(e, &nf2);
    cr_assert_eq(nf2, 2, "the input's and the later filter stage's facts");
    cr_assert_eq(fa[0].kind, TRACEQL_FACT_ATTR_EQ);
    cr_assert_eq(fa[1].kind, TRACEQL_FACT_DURATION);
    traceql_free(e);

    e = ok("({ .a = 1 } | count() > 1) && { .b = 2 }");
    cr_assert_eq(e->root->sop, TRACEQL_SOP_AND);
    cr_assert_eq(e->root->l->kind, TRACEQL_N_PIPELINE);
    traceql_free(e);
    e = ok("{} with (most_recent=false, unknown_hint=3)");
    cr_assert_not(e->most_recent);
    traceql_free(e);
}

/* ---- facts for block pruning ------------------------------------------------------ */

Test(traceql, pruning_facts_come_from_required_conditions_only)
{
    struct traceql_expr *e =
        ok("{ trace:id = \"abc\" && rootServiceName = \"svc\" && rootName = \"root\" && "
           "traceDuration >= 1m && kind = client && name = \"n\" && 5 < duration && .k = 5 && "
           "span.b = true && .f = 1.5 && .gone = nil && .x != \"y\" && .r =~ \"z\" }");
    size_t n;
    const struct traceql_fact *f = traceql_facts(e, &n);
    cr_assert_eq(n, 10);
    cr_assert_eq(f[0].kind, TRACEQL_FACT_TRACE_ID_EQ);
    cr_assert_str_eq(f[0].value.s, "abc");
    cr_assert_eq(f[1].kind, TRACEQL_FACT_ROOT_SERVICE_EQ);
    cr_assert_str_eq(f[1].value.s, "svc");
    cr_assert_eq(f[2].kind, TRACEQL_FACT_ROOT_NAME_EQ);
    cr_assert_eq(f[3].kind, TRACEQL_FACT_TRACE_DURATION);
    cr_assert_eq(f[3].op, TRACEQL_OP_GE);
    cr_assert_eq(f[3].value.i, 60000000000LL);
    cr_assert_eq(f[4].kind, TRACEQL_FACT_KIND_EQ);
    cr_assert_eq(f[4].value.i, 3);
    cr_assert_eq(f[5].kind, TRACEQL_FACT_NAME_EQ);
    cr_assert_eq(f[6].kind, TRACEQL_FACT_DURATION);
    cr_assert_eq(f[6].op, TRACEQL_OP_GT, "5 < duration is duration > 5");
    cr_assert_eq(f[6].value.type, TRACEQL_T_INT);
    cr_assert_eq(f[7].kind, TRACEQL_FACT_ATTR_EQ);
    cr_assert_eq(f[7].scope, TRACEQL_SCOPE_ANY);
    cr_assert_eq(f[7].value.type, TRACEQL_T_INT);
    cr_assert_eq(f[8].value.type, TRACEQL_T_BOOL);
    cr_assert_eq(f[9].value.type, TRACEQL_T_FLOAT);
    traceql_free(e);

    static const char *const none[] = {
        "{ .a = 1 || .b = 2 }",
        "{ !(.a = 1) }",
        "{ .a != 1 }",
        "{ .a = 1 } || { .b = 1 }",
        "{ .a = .b }",
        "{ duration != 1s }",
        "{ name =~ \"x\" }",
        "count() > 1",
        "{ .a = 1 || .b = 2 && .c = 3 }", /* (a || b) && c gives c */
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        e = ok(none[i]);
        traceql_facts(e, &n);
        cr_assert_eq(n, i == 8 ? 1 : 0, "%s: %zu facts", none[i], n);
        traceql_free(e);
    }
}

/* ---- regexes ------------------------------------------------------------------------- */

Test(traceql, regexes_are_fully_anchored_and_re2_checked)
{
    struct traceql_expr *e = ok("{ name =~ \"foo\" && .x !~ \"a.b\" && resource.r =~ `\\d+` }");
    const struct traceql_field *f = filter_of(e);
    const struct traceql_field *r = bin(f->r, TRACEQL_OP_RE);
    cr_assert(traceql_regex_match(r, "123", 3));
    cr_assert_not(traceql_regex_match(r, "12a", 3));
    const struct traceql_field *nre = bin(f->l->r, TRACEQL_OP_NRE);
    cr_assert_not(traceql_regex_match(nre, "a\nb", 3), "(?s): dot matches newline");
    cr_assert(traceql_regex_match(nre, "xa_b", 4));
    cr_assert(traceql_regex_match(nre,
                                  "a\xff"
                                  "b",
                                  3),
              "a bad byte matches nothing");
    const struct traceql_field *re = bin(f->l->l, TRACEQL_OP_RE);
    cr_assert(traceql_regex_match(re, "foo", 3));
    cr_assert_not(traceql_regex_match(re, "xfoox", 5));
    cr_assert_not(traceql_regex_match(re, "foo\n", 4));
    cr_assert_not(traceql_regex_match(f->l, "foo", 3), "not a regex node");
    traceql_free(e);
    e = ok("{ .x =~ \"(a+)+$\" || .y !~ \"(a+)+$\" }");
    char evil[48];
    memset(evil, 'a', 40);
    evil[40] = 'b';
    cr_assert_not(traceql_regex_match(filter_of(e)->l, evil, 41), "match limit: no match");
    cr_assert(traceql_regex_match(filter_of(e)->r, evil, 41));
    traceql_free(e);
    qlex_thread_cleanup();

    bad("{ name =~ \"a(?=b)\" }", 11, "lookahead assertions are not supported");
    bad("{ name =~ \"(a)\\\\1\" }", 11, "backreferences are not supported");
    bad("{ name =~ \"a{1001}\" }", 11, "invalid repeat count");
    bad("{ name =~ \"(\" }", 11, "missing closing parenthesis");
}

/* ---- rejected forms ------------------------------------------------------------------ */

Test(traceql, rejected_queries_name_the_column_and_what_was_expected)
{
    bad("", 1, "expected a query such as { span.http.status_code = 500 }, got end of query");
    bad("{", 2, "expected an attribute (span.x, resource.x, .x), an intrinsic");
    bad("{ .a = 1", 9, "expected \"}\", \"&&\", \"||\" or an operator, got end of query");
    bad("{ .a = }", 8, "expected a value after \"=\", got \"}\"");
    bad("{ .a = 1 } extra", 12, "expected \"|\", \"&&\", \"||\", a structural operator");
    bad("{ foo = 1 }", 3, "unknown identifier \"foo\": attributes need a scope (span.foo");
    bad("{ span:foo = 1 }", 3, "unknown intrinsic \"span:foo\"");
    bad("{ span. = 1 }", 3, "expected an attribute name after \"span.\"");
    bad("{ . = 1 }", 3, "expected an attribute name after \".\"");
    bad("{ span.\"a = 1 }", 8, "unterminated quoted attribute name");
    bad("{ span.\"a\\x\" = 1 }", 10, "invalid escape in quoted attribute name");
    bad("{ trace: = 1 }", 3, "expected an intrinsic name after \"trace:\"");
    bad("{ status = 200 }", 10, "cannot compare status with int");
    bad("{ kind = error }", 8, "cannot compare kind with status");
    bad("{ name = 1 }", 8, "cannot compare string with int");
    bad("{ duration > \"1s\" }", 12, "cannot compare duration with string");
    bad("{ status > ok }", 10, "> cannot be used with status");
    bad("{ name = nil }", 8, "name = nil is not valid because intrinsics cannot be nil");
    bad("{ 1 = nil }", 5, "nil can only be compared with an attribute or intrinsic");
    bad("{ resource.service.name = nil }", 25,
        "resource.service.name = nil is not valid because resource.service.name cannot be nil");
    bad("{ nil = resource.service.name }", 7, "resource.service.name cannot be nil");
    bad("sum(3) = 2", 5, "aggregate field expressions must reference the span: sum(3)");
    bad("{} | max(1h + 2h) > 1", 10, "must reference the span: max(1h + 2h)");
    bad("{ true } | by(1)", 15, "grouping field expressions must reference the span: by(1)");
    bad("{ true } | by(\"foo\")", 15, "must reference the span: by(\"foo\")");
    bad("coalesce() | { true }", 1, "coalesce() cannot start a pipeline");
    bad("{} | count() + count() = 1", 6,
        "not supported (as in Tempo): a scalar filter compares one aggregate with a number");
    bad("min(.a) < max(duration)", 1, "a scalar filter compares one aggregate with a number");
    bad("{ .a + 1 }", 3, "a spanset filter must be a condition");
    bad("{ .foo.\"a }", 8, "unterminated quoted attribute name");
    bad("{ duration =~ \"1.*\" }", 12, "=~ needs a string on its left, got duration");
    bad("{ name =~ .x }", 11, "the right side of =~ must be a regular expression in quotes");
    bad("{ 1 }", 3, "a spanset filter must be a condition");
    bad("{ name }", 3, "a spanset filter must be a condition");
    bad("{ .a = 1 && 2 }", 10, "&& needs boolean operands, got bool and int");
    bad("{ name + 1 > 2 }", 8, "+ needs numeric operands, got string and int");
    bad("{ -name = \"x\" }", 3, "unary - needs a number, got string");
    bad("{ !duration }", 3, "! needs a boolean, got duration");
    bad("{ .a = \"x\\q\" }", 10, "unknown escape sequence");
    bad("{ .a = 5xs }", 8, "invalid number or duration \"5xs\"");
    bad("{ .a = 5KiB }", 8, "invalid number or duration");
    bad("{ .a = 1 } | rate()", 14, "TraceQL metrics queries (rate) are not supported");
    bad("{} | quantile_over_time(duration, .9)", 6, "metrics queries (quantile_over_time)");
    bad("{} | foo()", 6, "unknown pipeline function \"foo\"");
    bad("{} | count()", 13, "expected a comparison (=, !=, >, >=, <, <=) after the aggregate");
    bad("{} | count(duration) > 1", 12, "count() takes no argument");
    bad("{} | avg(name) > 1", 10, "aggregates need a numeric field, got string");
    bad("{} | 1 > 2", 6, "a scalar filter needs an aggregate such as count()");
    bad("{} | select(.a = 1)", 13, "select() takes attributes and intrinsics");
    bad("{} |", 5, "expected a spanset filter \"{...}\", select(...), by(...)");
    bad("{} with (most_recent=1)", 22, "most_recent takes true or false");
    bad("{} >", 5, "expected a spanset filter \"{ ... }\"");
    bad("{ .a = 1 } & { }", 12, "unexpected \"&\": expected \"&&\"");
    bad("{ .a = 1 } # c", 12, "unexpected character \"#\"");
    bad("{ .a = 1 } | count( > 1", 21, "expected \")\": count() takes no argument");
}

Test(traceql, nesting_is_bounded_and_free_accepts_null)
{
    char q[512];
    size_t n = 0;
    q[n++] = '{';
    for (int i = 0; i < 100; i++) {
        q[n++] = '(';
    }
    memcpy(q + n, ".a=1", 4);
    n += 4;
    for (int i = 0; i < 100; i++) {
        q[n++] = ')';
    }
    q[n++] = '}';
    q[n] = '\0';
    bad(q, 66, "query nested too deeply");
    n = 0;
    q[n++] = '{';
    q[n++] = ' ';
    for (int i = 0; i < 100; i++) {
        q[n++] = '!';
    }
    memcpy(q + n, "true }", 7);
    bad(q, 67, "query nested too deeply");
    q[2 + 100 - 60] = '{';
    q[2 + 100 - 60 + 1] = ' ';
    struct traceql_expr *e = ok(q + 2 + 100 - 60); /* 58 of them are fine */
    cr_assert_eq(e->root->filter->kind, TRACEQL_F_UNARY);
    traceql_free(e);
    char err[128];
    traceql_free(NULL);
    /* exactly len bytes are read */
    cr_assert_eq(traceql_parse("{}}", 2, &e, err, sizeof(err)), 0);
    traceql_free(e);
}

/* ---- tag identifiers -------------------------------------------------------------- */

Test(traceql, tag_identifiers_for_the_tag_values_endpoint)
{
    struct traceql_field f;
    char buf[64];
    static const struct {
        const char *s;
        enum traceql_scope scope;
        const char *name;
    } attrs[] = {
        {"resource.service.name", TRACEQL_SCOPE_RESOURCE, "service.name"},
        {"span.http.method", TRACEQL_SCOPE_SPAN, "http.method"},
        {".foo", TRACEQL_SCOPE_ANY, "foo"},
        {"span.\"a b\"", TRACEQL_SCOPE_SPAN, "a b"},
        {"event.exception.message", TRACEQL_SCOPE_EVENT, "exception.message"},
        {"link.x", TRACEQL_SCOPE_LINK, "x"},
        {"instrumentation.lib", TRACEQL_SCOPE_INSTRUMENTATION, "lib"},
    };
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        memset(buf, 'x', sizeof(buf));
        cr_assert_eq(traceql_parse_identifier(attrs[i].s, strlen(attrs[i].s), &f, buf, sizeof(buf)),
                     0, "%s", attrs[i].s);
        is_attr(&f, attrs[i].scope, attrs[i].name);
        cr_assert_eq(f.name, buf);
    }
    static const struct {
        const char *s;
        enum traceql_intrinsic i;
    } intr[] = {
        {"name", TRACEQL_I_NAME},
        {"status", TRACEQL_I_STATUS},
        {"kind", TRACEQL_I_KIND},
        {"span:name", TRACEQL_I_NAME},
        {"trace:rootService", TRACEQL_I_ROOT_SERVICE},
        {"rootServiceName", TRACEQL_I_ROOT_SERVICE},
        {"statusMessage", TRACEQL_I_STATUS_MESSAGE},
        {"event:name", TRACEQL_I_EVENT_NAME},
    };
    for (size_t i = 0; i < sizeof(intr) / sizeof(intr[0]); i++) {
        cr_assert_eq(traceql_parse_identifier(intr[i].s, strlen(intr[i].s), &f, buf, sizeof(buf)),
                     0, "%s", intr[i].s);
        cr_assert_eq(f.kind, TRACEQL_F_INTRINSIC);
        cr_assert_eq(f.intrinsic, intr[i].i, "%s", intr[i].s);
    }
    static const char *const no[] = {"",          "service.name", "foo",     "span.a = 1",
                                     "span:nope", "{}",           "span.",   "1",
                                     "\"x\"",     "name name",    "resource"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        cr_assert_eq(traceql_parse_identifier(no[i], strlen(no[i]), &f, buf, sizeof(buf)), -EINVAL,
                     "%s", no[i]);
    }
    cr_assert_eq(traceql_parse_identifier("span.abcdefgh", 13, &f, buf, 8), -ENOSPC);
    cr_assert_eq(traceql_parse_identifier("span.abcdefg", 12, &f, buf, 8), 0);
    cr_assert_str_eq(buf, "abcdefg");
}

/* Forms Tempo accepts (its test_examples.yaml, parse_test.go and docs) that
 * were once refused. */
Test(traceql, tempo_forms_quoted_segments_nil_floats_attribute_arithmetic)
{
    static const struct {
        const char *q;
        enum traceql_scope scope;
        const char *name;
    } names[] = {
        {"{ .foo.\"bar baz\" }", TRACEQL_SCOPE_ANY, "foo.bar baz"},
        {"{ .foo.\"bar baz\".bar }", TRACEQL_SCOPE_ANY, "foo.bar baz.bar"},
        {"{ .\"bar z\".foo.\"bar\" }", TRACEQL_SCOPE_ANY, "bar z.foo.bar"},
        {"{ span.\"bar z\".foo }", TRACEQL_SCOPE_SPAN, "bar z.foo"},
        {"{ .foo.\"bar \\\" baz\" }", TRACEQL_SCOPE_ANY, "foo.bar \" baz"},
        {"{ .foo.\"bar \\\\\".\" baz\" }", TRACEQL_SCOPE_ANY, "foo.bar \\. baz"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct traceql_expr *e = ok(names[i].q);
        is_attr(filter_of(e), names[i].scope, names[i].name);
        traceql_free(e);
    }
    struct traceql_expr *e = ok("{ span.attribute.\"attribute name with space\" = \"value\" }");
    const struct traceql_field *f = bin(filter_of(e), TRACEQL_OP_EQ);
    is_attr(f->l, TRACEQL_SCOPE_SPAN, "attribute.attribute name with space");
    is_static_str(f->r, "value");
    traceql_free(e);

    /* nil = nil and nil != nil fold to false; an intrinsic may be != nil */
    e = ok("{ nil = nil }");
    is_static_int(filter_of(e), TRACEQL_T_BOOL, 0);
    traceql_free(e);
    e = ok("{ nil != nil }");
    is_static_int(filter_of(e), TRACEQL_T_BOOL, 0);
    traceql_free(e);
    e = ok("{ name != nil }");
    f = bin(filter_of(e), TRACEQL_OP_NE);
    is_intrinsic(f->l, TRACEQL_I_NAME, TRACEQL_T_STRING);
    traceql_free(e);

    /* `1.` and `.5` are floats */
    e = ok("{ .foo * -1. = -.5 }");
    f = bin(filter_of(e), TRACEQL_OP_EQ);
    bin(f->l, TRACEQL_OP_MUL);
    cr_assert_eq(f->l->r->st.type, TRACEQL_T_FLOAT);
    cr_assert_float_eq(f->l->r->st.f, -1.0, 1e-12);
    cr_assert_eq(f->r->st.type, TRACEQL_T_FLOAT);
    cr_assert_float_eq(f->r->st.f, -0.5, 1e-12);
    traceql_free(e);

    e = ok("{ duration > .24h }"); /* Tempo's lexer test: `.24h` is a duration */
    is_static_int(bin(filter_of(e), TRACEQL_OP_GT)->r, TRACEQL_T_DURATION, 864000000000LL);
    traceql_free(e);

    /* arithmetic over attributes only keeps the attribute type (a filter
     * that matches no span), as Tempo types it */
    e = ok("{ .a + .b }");
    f = bin(filter_of(e), TRACEQL_OP_ADD);
    cr_assert_eq(f->type, TRACEQL_T_ANY);
    traceql_free(e);
    e = ok("{ .c - -( .a + .b ) }");
    cr_assert_eq(filter_of(e)->type, TRACEQL_T_ANY);
    traceql_free(e);

    e = ok("{ nestedSetLeft > 3 } | select(nestedSetRight, nestedSetParent)");
    f = bin(e->root->input->filter, TRACEQL_OP_GT);
    is_intrinsic(f->l, TRACEQL_I_NESTED_SET_LEFT, TRACEQL_T_INT);
    is_intrinsic(e->root->stages[0].fields[1], TRACEQL_I_NESTED_SET_PARENT, TRACEQL_T_INT);
    traceql_free(e);
}
