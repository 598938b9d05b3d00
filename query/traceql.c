/*
 * traceql.c - recursive-descent TraceQL parser (see traceql.h; grammar after
 * FACTS.md section E and Tempo's expr.y, including its precedence: && and ||
 * are one level, left to right, below the comparisons and structural
 * operators).
 *
 * GRAMMAR (informal)
 *   root      := pipeline [with "(" name "=" static ("," ...)* ")"] EOF
 *   pipeline  := (sexpr | stage) ("|" stage)*        a leading stage runs on {}
 *   sexpr     := sterm (("&&" | "||") sterm)*
 *   sterm     := sprim ((">" | ">>" | "<" | "<<" | "~" | "&>" ... | "!>" ...) sprim)*
 *   sprim     := "{" [fexpr] "}" | "(" pipeline ")"
 *   stage     := sexpr | select "(" field ("," field)* ")" | by "(" fexpr ")"
 *              | coalesce "(" ")" | scalar (= != > >= < <=) scalar
 *   scalar    := arithmetic over count() | avg|min|max|sum "(" fexpr ")" | static
 *   fexpr     := fcmp (("&&" | "||") fcmp)*
 *   fcmp      := fadd ((= != > >= < <= =~ !~) fadd)*
 *   fadd      := fmul ((+ | -) fmul)* ;  fmul := funary ((* | / | %) funary)*
 *   funary    := (! | -) funary | fprim [^ funary]
 *   fprim     := "(" fexpr ")" | static | intrinsic | attribute
 */
#include "query/traceql.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACEQL_MAX_DEPTH 64
/* Operators per query (field, spanset and scalar operators together).
 * Left-associative chains ({a} && {b} && ..., x + x + ...) do not nest, so
 * TRACEQL_MAX_DEPTH does not bound them; every walk over the tree (the
 * executor's included) recurses about this deep along such a chain at most. */
#define TRACEQL_MAX_OPS 1024
#define TRACEQL_ARENA_CHUNK 8192
#define TRACEQL_ARENA_LIMIT (16u << 20)
#define TRACEQL_ROOT_MAGIC 0x74726171u /* "traq" */

struct traceql_root {
    uint32_t magic;
    arena *a;
    qlex_re *res;
    struct traceql_expr q;
};

struct parser {
    struct qlex lx;
    struct qlex_tok tok;
    struct qlex_tok peek;
    bool has_peek;
    int depth;
    unsigned n_ops; /* operators so far (TRACEQL_MAX_OPS) */
    bool metrics;   /* traceql_parse_metrics_input: stop before "| rate()" etc. */
};

/* ---- token plumbing ------------------------------------------------------ */

static int advance(struct parser *p)
{
    if (p->has_peek) {
        p->tok = p->peek;
        p->has_peek = false;
        return p->lx.rc;
    }
    return qlex_next(&p->lx, &p->tok);
}

static const struct qlex_tok *peek(struct parser *p)
{
    if (!p->has_peek) {
        (void)qlex_next(&p->lx, &p->peek);
        p->has_peek = true;
    }
    return &p->peek;
}

static bool is_word(const struct qlex_tok *t, const char *w)
{
    size_t l = strlen(w);
    return t->kind == QT_IDENT && t->n == l && memcmp(t->s, w, l) == 0;
}

static bool str_is(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

static int fail_expected(struct parser *p, const char *what)
{
    char d[96];
    return qlex_fail(&p->lx, p->tok.pos, "expected %s, got %s", what,
                     qlex_desc(&p->lx, &p->tok, d, sizeof(d)));
}

static int expect(struct parser *p, enum qtok k, const char *what)
{
    if (p->tok.kind != k) {
        return fail_expected(p, what);
    }
    return advance(p);
}

static int enter(struct parser *p)
{
    if (++p->depth > TRACEQL_MAX_DEPTH) {
        return qlex_fail(&p->lx, p->tok.pos, "query nested too deeply (more than %d levels)",
                         TRACEQL_MAX_DEPTH);
    }
    return 0;
}

static void leave(struct parser *p)
{
    p->depth--;
}

/* Counts one more operator; past TRACEQL_MAX_OPS, a parse error at |pos|. */
static int count_op(struct parser *p, size_t pos)
{
    if (++p->n_ops > TRACEQL_MAX_OPS) {
        return qlex_fail(&p->lx, pos, "query too complex: more than %d operators", TRACEQL_MAX_OPS);
    }
    return 0;
}

static void *push(struct parser *p, void **arr, size_t *n, size_t *cap, size_t elem)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        void *na = qlex_alloc(&p->lx, nc * elem);
        if (na == NULL) {
            return NULL;
        }
        if (*n > 0) {
            memcpy(na, *arr, *n * elem);
        }
        *arr = na;
        *cap = nc;
    }
    void *e = (char *)*arr + *n * elem;
    memset(e, 0, elem);
    (*n)++;
    return e;
}

/* ---- names ----------------------------------------------------------------- */

static const struct {
    const char *name;
    enum traceql_intrinsic i;
} unscoped_intrinsics[] = {
    {"name", TRACEQL_I_NAME},
    {"status", TRACEQL_I_STATUS},
    {"statusMessage", TRACEQL_I_STATUS_MESSAGE},
    {"kind", TRACEQL_I_KIND},
    {"duration", TRACEQL_I_DURATION},
    {"rootName", TRACEQL_I_ROOT_NAME},
    {"rootServiceName", TRACEQL_I_ROOT_SERVICE},
    {"traceDuration", TRACEQL_I_TRACE_DURATION},
    {"nestedSetLeft", TRACEQL_I_NESTED_SET_LEFT},
    {"nestedSetRight", TRACEQL_I_NESTED_SET_RIGHT},
    {"nestedSetParent", TRACEQL_I_NESTED_SET_PARENT},
};

static const struct {
    enum qlex_scope scope;
    const char *name;
    enum traceql_intrinsic i;
} scoped_intrinsics[] = {
    {QLEX_SCOPE_SPAN, "name", TRACEQL_I_NAME},
    {QLEX_SCOPE_SPAN, "status", TRACEQL_I_STATUS},
    {QLEX_SCOPE_SPAN, "statusMessage", TRACEQL_I_STATUS_MESSAGE},
    {QLEX_SCOPE_SPAN, "kind", TRACEQL_I_KIND},
    {QLEX_SCOPE_SPAN, "duration", TRACEQL_I_DURATION},
    {QLEX_SCOPE_SPAN, "id", TRACEQL_I_SPAN_ID},
    {QLEX_SCOPE_SPAN, "parentID", TRACEQL_I_PARENT_ID},
    {QLEX_SCOPE_SPAN, "childCount", TRACEQL_I_CHILD_COUNT},
    {QLEX_SCOPE_TRACE, "rootName", TRACEQL_I_ROOT_NAME},
    {QLEX_SCOPE_TRACE, "rootService", TRACEQL_I_ROOT_SERVICE},
    {QLEX_SCOPE_TRACE, "duration", TRACEQL_I_TRACE_DURATION},
    {QLEX_SCOPE_TRACE, "id", TRACEQL_I_TRACE_ID},
    {QLEX_SCOPE_EVENT, "name", TRACEQL_I_EVENT_NAME},
    {QLEX_SCOPE_EVENT, "timeSinceStart", TRACEQL_I_EVENT_TIME_SINCE_START},
    {QLEX_SCOPE_LINK, "traceID", TRACEQL_I_LINK_TRACE_ID},
    {QLEX_SCOPE_LINK, "spanID", TRACEQL_I_LINK_SPAN_ID},
    {QLEX_SCOPE_INSTRUMENTATION, "name", TRACEQL_I_INSTR_NAME},
    {QLEX_SCOPE_INSTRUMENTATION, "version", TRACEQL_I_INSTR_VERSION},
};

const char *traceql_status_word(int64_t v)
{
    static const char *const w[] = {"unset", "ok", "error"};
    return v >= 0 && v < 3 ? w[v] : "unset";
}

const char *traceql_kind_word(int64_t v)
{
    static const char *const w[] = {"unspecified", "internal", "server",
                                    "client",      "producer", "consumer"};
    return v >= 0 && v < 6 ? w[v] : "unspecified";
}

const char *traceql_intrinsic_name(enum traceql_intrinsic i)
{
    for (size_t k = 0; k < sizeof(unscoped_intrinsics) / sizeof(unscoped_intrinsics[0]); k++) {
        if (unscoped_intrinsics[k].i == i) {
            return unscoped_intrinsics[k].name;
        }
    }
    switch (i) {
    case TRACEQL_I_SPAN_ID:
        return "span:id";
    case TRACEQL_I_PARENT_ID:
        return "span:parentID";
    case TRACEQL_I_CHILD_COUNT:
        return "span:childCount";
    case TRACEQL_I_TRACE_ID:
        return "trace:id";
    case TRACEQL_I_EVENT_NAME:
        return "event:name";
    case TRACEQL_I_EVENT_TIME_SINCE_START:
        return "event:timeSinceStart";
    case TRACEQL_I_LINK_TRACE_ID:
        return "link:traceID";
    case TRACEQL_I_LINK_SPAN_ID:
        return "link:spanID";
    case TRACEQL_I_INSTR_NAME:
        return "instrumentation:name";
    case TRACEQL_I_INSTR_VERSION:
        return "instrumentation:version";
    default:
        return "?";
    }
}

static enum traceql_type intrinsic_type(enum traceql_intrinsic i)
{
    switch (i) {
    case TRACEQL_I_STATUS:
        return TRACEQL_T_STATUS;
    case TRACEQL_I_KIND:
        return TRACEQL_T_KIND;
    case TRACEQL_I_DURATION:
    case TRACEQL_I_TRACE_DURATION:
    case TRACEQL_I_EVENT_TIME_SINCE_START:
        return TRACEQL_T_DURATION;
    case TRACEQL_I_CHILD_COUNT:
    case TRACEQL_I_NESTED_SET_LEFT:
    case TRACEQL_I_NESTED_SET_RIGHT:
    case TRACEQL_I_NESTED_SET_PARENT:
        return TRACEQL_T_INT;
    default:
        return TRACEQL_T_STRING;
    }
}

static const char *type_name(enum traceql_type t)
{
    static const char *const names[] = {"attribute", "nil",    "bool",   "int", "float",
                                        "duration",  "string", "status", "kind"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

static bool is_numeric(enum traceql_type t)
{
    return t == TRACEQL_T_INT || t == TRACEQL_T_FLOAT || t == TRACEQL_T_DURATION;
}

static bool compatible(enum traceql_type a, enum traceql_type b)
{
    if (a == TRACEQL_T_ANY || b == TRACEQL_T_ANY) {
        return true;
    }
    if (is_numeric(a) && is_numeric(b)) {
        return true;
    }
    return a == b;
}

static const char *op_name(enum traceql_op op)
{
    static const char *const names[] = {"!",  "-",  "&&", "||", "=", "!=", ">", ">=", "<",
                                        "<=", "=~", "!~", "+",  "-", "*",  "/", "%",  "^"};
    return (unsigned)op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

/* ---- field expressions -------------------------------------------------------- */

static struct traceql_field *new_field(struct parser *p, enum traceql_field_kind k, size_t pos)
{
    struct traceql_field *f = qlex_alloc(&p->lx, sizeof(*f));
    if (f != NULL) {
        f->kind = k;
        f->pos = pos;
    }
    return f;
}

/* Does |f| read anything of the span (an attribute or an intrinsic)? */
static bool references_span(const struct traceql_field *f)
{
    switch (f->kind) {
    case TRACEQL_F_ATTR:
    case TRACEQL_F_INTRINSIC:
        return true;
    case TRACEQL_F_BINARY:
        return references_span(f->l) || references_span(f->r);
    case TRACEQL_F_UNARY:
        return references_span(f->l);
    default:
        return false;
    }
}

/* Static literal at the current token, if it is one (advances). */
static bool parse_static(struct parser *p, struct traceql_static *st)
{
    const struct qlex_tok *t = &p->tok;
    memset(st, 0, sizeof(*st));
    switch (t->kind) {
    case QT_STRING:
        st->type = TRACEQL_T_STRING;
        st->s = t->s;
        st->n = t->n;
        break;
    case QT_NUMBER:
        if (t->is_int) {
            st->type = TRACEQL_T_INT;
            st->i = t->i;
        } else {
            st->type = TRACEQL_T_FLOAT;
            st->f = t->num;
        }
        break;
    case QT_DURATION:
        st->type = TRACEQL_T_DURATION;
        st->i = t->i;
        break;
    case QT_IDENT: {
        static const struct {
            const char *w;
            enum traceql_type type;
            int64_t v;
        } words[] = {
            {"true", TRACEQL_T_BOOL, 1},
            {"false", TRACEQL_T_BOOL, 0},
            {"nil", TRACEQL_T_NIL, 0},
            {"unset", TRACEQL_T_STATUS, 0},
            {"ok", TRACEQL_T_STATUS, 1},
            {"error", TRACEQL_T_STATUS, 2},
            {"unspecified", TRACEQL_T_KIND, 0},
            {"internal", TRACEQL_T_KIND, 1},
            {"server", TRACEQL_T_KIND, 2},
            {"client", TRACEQL_T_KIND, 3},
            {"producer", TRACEQL_T_KIND, 4},
            {"consumer", TRACEQL_T_KIND, 5},
            {"minInt", TRACEQL_T_INT, INT64_MIN},
            {"maxInt", TRACEQL_T_INT, INT64_MAX},
        };
        for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
            if (is_word(t, words[k].w)) {
                st->type = words[k].type;
                st->i = words[k].v;
                return advance(p) == 0;
            }
        }
        return false;
    }
    default:
        return false;
    }
    return advance(p) == 0;
}

/* `x = nil` / `x != nil` as Tempo validates it: x must be an attribute or
 * an intrinsic, an intrinsic is never nil, and neither is
 * resource.service.name. */
static int check_nil(struct parser *p, enum traceql_op op, size_t pos,
                     const struct traceql_field *x)
{
    if (x->kind == TRACEQL_F_INTRINSIC) {
        if (op == TRACEQL_OP_EQ) {
            return qlex_fail(&p->lx, pos, "%s = nil is not valid because intrinsics cannot be nil",
                             traceql_intrinsic_name(x->intrinsic));
        }
        return 0;
    }
    if (x->type != TRACEQL_T_ANY) {
        return qlex_fail(&p->lx, pos, "nil can only be compared with an attribute or intrinsic");
    }
    if (op == TRACEQL_OP_EQ && x->kind == TRACEQL_F_ATTR && x->scope == TRACEQL_SCOPE_RESOURCE &&
        str_is(x->name, x->name_len, "service.name")) {
        return qlex_fail(&p->lx, pos,
                         "resource.service.name = nil is not valid because "
                         "resource.service.name cannot be nil");
    }
    return 0;
}

static int build_binary(struct parser *p, enum traceql_op op, size_t pos, struct traceql_field *l,
                        struct traceql_field *r, struct traceql_field **out)
{
    if (count_op(p, pos) != 0) {
        return p->lx.rc;
    }
    struct traceql_field *f = new_field(p, TRACEQL_F_BINARY, pos);
    if (f == NULL) {
        return p->lx.rc;
    }
    f->op = op;
    f->l = l;
    f->r = r;
    enum traceql_type lt = l->type, rt = r->type;
    switch (op) {
    case TRACEQL_OP_AND:
    case TRACEQL_OP_OR:
        if ((lt != TRACEQL_T_BOOL && lt != TRACEQL_T_ANY) ||
            (rt != TRACEQL_T_BOOL && rt != TRACEQL_T_ANY)) {
            return qlex_fail(&p->lx, pos, "%s needs boolean operands, got %s and %s", op_name(op),
                             type_name(lt), type_name(rt));
        }
        f->type = TRACEQL_T_BOOL;
        break;
    case TRACEQL_OP_EQ:
    case TRACEQL_OP_NE:
        if (lt == TRACEQL_T_NIL && rt == TRACEQL_T_NIL) {
            /* Tempo folds both nil = nil and nil != nil to false */
            f->kind = TRACEQL_F_STATIC;
            f->type = f->st.type = TRACEQL_T_BOOL;
            f->st.i = 0;
            f->l = f->r = NULL;
            *out = f;
            return 0;
        }
        if (lt == TRACEQL_T_NIL || rt == TRACEQL_T_NIL) {
            int rc = check_nil(p, op, pos, lt == TRACEQL_T_NIL ? r : l);
            if (rc != 0) {
                return rc;
            }
        } else if (!compatible(lt, rt)) {
            return qlex_fail(&p->lx, pos, "cannot compare %s with %s", type_name(lt),
                             type_name(rt));
        }
        f->type = TRACEQL_T_BOOL;
        break;
    case TRACEQL_OP_GT:
    case TRACEQL_OP_GE:
    case TRACEQL_OP_LT:
    case TRACEQL_OP_LE: {
        enum traceql_type bad[] = {TRACEQL_T_NIL, TRACEQL_T_BOOL, TRACEQL_T_STATUS, TRACEQL_T_KIND};
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            if (lt == bad[k] || rt == bad[k]) {
                return qlex_fail(&p->lx, pos, "%s cannot be used with %s", op_name(op),
                                 type_name(bad[k]));
            }
        }
        if (!compatible(lt, rt)) {
            return qlex_fail(&p->lx, pos, "cannot compare %s with %s", type_name(lt),
                             type_name(rt));
        }
        f->type = TRACEQL_T_BOOL;
        break;
    }
    case TRACEQL_OP_RE:
    case TRACEQL_OP_NRE: {
        if (lt != TRACEQL_T_STRING && lt != TRACEQL_T_ANY) {
            return qlex_fail(&p->lx, pos, "%s needs a string on its left, got %s", op_name(op),
                             type_name(lt));
        }
        if (r->kind != TRACEQL_F_STATIC || r->st.type != TRACEQL_T_STRING) {
            return qlex_fail(&p->lx, r->pos,
                             "the right side of %s must be a regular expression "
                             "in quotes",
                             op_name(op));
        }
        qlex_re *re;
        if (qlex_re_compile(&p->lx, r->pos, r->st.s, r->st.n, true, &re) != 0) {
            return p->lx.rc;
        }
        f->re = re;
        f->type = TRACEQL_T_BOOL;
        break;
    }
    default: /* arithmetic */
        if ((!is_numeric(lt) && lt != TRACEQL_T_ANY) || (!is_numeric(rt) && rt != TRACEQL_T_ANY)) {
            return qlex_fail(&p->lx, pos, "%s needs numeric operands, got %s and %s", op_name(op),
                             type_name(lt), type_name(rt));
        }
        if (lt == TRACEQL_T_ANY && rt == TRACEQL_T_ANY) {
            f->type = TRACEQL_T_ANY; /* Tempo: an attribute's type, known per span */
        } else if (lt == TRACEQL_T_FLOAT || rt == TRACEQL_T_FLOAT || lt == TRACEQL_T_ANY ||
                   rt == TRACEQL_T_ANY) {
            f->type = TRACEQL_T_FLOAT;
        } else if (lt == TRACEQL_T_DURATION || rt == TRACEQL_T_DURATION) {
            f->type = TRACEQL_T_DURATION;
        } else {
            f->type = TRACEQL_T_INT;
        }
        break;
    }
    *out = f;
    return 0;
}

static int parse_fexpr(struct parser *p, struct traceql_field **out);
static int parse_funary(struct parser *p, struct traceql_field **out);

static int parse_fprim(struct parser *p, struct traceql_field **out)
{
    size_t pos = p->tok.pos;
    struct traceql_field *f;
    switch (p->tok.kind) {
    case QT_LPAREN:
        if (enter(p) != 0 || advance(p) != 0 || parse_fexpr(p, out) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return expect(p, QT_RPAREN, "\")\"");
    case QT_ATTR:
        f = new_field(p, TRACEQL_F_ATTR, pos);
        if (f == NULL) {
            return p->lx.rc;
        }
        f->type = TRACEQL_T_ANY;
        f->scope = (enum traceql_scope)p->tok.scope; /* same order as enum qlex_scope */
        f->name = qlex_strndup(&p->lx, p->tok.s, p->tok.n);
        f->name_len = p->tok.n;
        *out = f;
        return advance(p);
    case QT_SCOPED:
        for (size_t k = 0; k < sizeof(scoped_intrinsics) / sizeof(scoped_intrinsics[0]); k++) {
            if (scoped_intrinsics[k].scope == p->tok.scope &&
                str_is(p->tok.s, p->tok.n, scoped_intrinsics[k].name)) {
                f = new_field(p, TRACEQL_F_INTRINSIC, pos);
                if (f == NULL) {
                    return p->lx.rc;
                }
                f->intrinsic = scoped_intrinsics[k].i;
                f->type = intrinsic_type(f->intrinsic);
                *out = f;
                return advance(p);
            }
        }
        return qlex_fail(&p->lx, pos, "unknown intrinsic \"%.*s\"", (int)(p->tok.end - pos),
                         p->lx.src + pos);
    case QT_IDENT:
        for (size_t k = 0; k < sizeof(unscoped_intrinsics) / sizeof(unscoped_intrinsics[0]); k++) {
            if (is_word(&p->tok, unscoped_intrinsics[k].name)) {
                f = new_field(p, TRACEQL_F_INTRINSIC, pos);
                if (f == NULL) {
                    return p->lx.rc;
                }
                f->intrinsic = unscoped_intrinsics[k].i;
                f->type = intrinsic_type(f->intrinsic);
                *out = f;
                return advance(p);
            }
        }
        /* a literal word or an unknown identifier */
        __attribute__((fallthrough));
    default: {
        struct traceql_static st;
        bool was_ident = p->tok.kind == QT_IDENT;
        char word[64];
        snprintf(word, sizeof(word), "%.*s", (int)(p->tok.n > 40 ? 40 : p->tok.n),
                 p->tok.s != NULL ? p->tok.s : "");
        if (parse_static(p, &st)) {
            f = new_field(p, TRACEQL_F_STATIC, pos);
            if (f == NULL) {
                return p->lx.rc;
            }
            f->st = st;
            f->type = st.type;
            *out = f;
            return 0;
        }
        if (p->lx.rc != 0) {
            return p->lx.rc;
        }
        if (was_ident) {
            return qlex_fail(&p->lx, pos,
                             "unknown identifier \"%s\": attributes need a scope (span.%s, "
                             "resource.%s or .%s); intrinsics are name, status, statusMessage, "
                             "kind, duration, rootName, rootServiceName, traceDuration",
                             word, word, word, word);
        }
        return fail_expected(p, "an attribute (span.x, resource.x, .x), an intrinsic (name, "
                                "status, kind, duration, ...) or a value");
    }
    }
}

static int parse_funary(struct parser *p, struct traceql_field **out)
{
    size_t pos = p->tok.pos;
    if (p->tok.kind == QT_NOT || p->tok.kind == QT_SUB) {
        bool neg = p->tok.kind == QT_SUB;
        struct traceql_field *x;
        if (enter(p) != 0 || advance(p) != 0 || parse_funary(p, &x) != 0) {
            return p->lx.rc;
        }
        leave(p);
        if (neg && x->kind == TRACEQL_F_STATIC && is_numeric(x->st.type)) {
            /* fold -literal */
            if (x->st.type == TRACEQL_T_FLOAT) {
                x->st.f = -x->st.f;
            } else {
                x->st.i = x->st.i == INT64_MIN ? INT64_MAX : -x->st.i;
            }
            x->pos = pos;
            *out = x;
            return 0;
        }
        if (neg && !is_numeric(x->type) && x->type != TRACEQL_T_ANY) {
            return qlex_fail(&p->lx, pos, "unary - needs a number, got %s", type_name(x->type));
        }
        if (!neg && x->type != TRACEQL_T_BOOL && x->type != TRACEQL_T_ANY) {
            return qlex_fail(&p->lx, pos, "! needs a boolean, got %s", type_name(x->type));
        }
        struct traceql_field *f = new_field(p, TRACEQL_F_UNARY, pos);
        if (f == NULL) {
            return p->lx.rc;
        }
        f->op = neg ? TRACEQL_OP_NEG : TRACEQL_OP_NOT;
        f->l = x;
        f->type = neg ? x->type : TRACEQL_T_BOOL;
        *out = f;
        return 0;
    }
    struct traceql_field *l;
    if (parse_fprim(p, &l) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind == QT_POW) {
        size_t op_pos = p->tok.pos;
        struct traceql_field *r;
        if (enter(p) != 0 || advance(p) != 0 || parse_funary(p, &r) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return build_binary(p, TRACEQL_OP_POW, op_pos, l, r, out);
    }
    *out = l;
    return 0;
}

static int parse_fmul(struct parser *p, struct traceql_field **out)
{
    struct traceql_field *l;
    if (parse_funary(p, &l) != 0) {
        return p->lx.rc;
    }
    while (p->tok.kind == QT_MUL || p->tok.kind == QT_DIV || p->tok.kind == QT_MOD) {
        enum traceql_op op = p->tok.kind == QT_MUL   ? TRACEQL_OP_MUL
                             : p->tok.kind == QT_DIV ? TRACEQL_OP_DIV
                                                     : TRACEQL_OP_MOD;
        size_t pos = p->tok.pos;
        struct traceql_field *r;
        if (advance(p) != 0 || parse_funary(p, &r) != 0 || build_binary(p, op, pos, l, r, &l)) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

static int parse_fadd(struct parser *p, struct traceql_field **out)
{
    struct traceql_field *l;
    if (parse_fmul(p, &l) != 0) {
        return p->lx.rc;
    }
    while (p->tok.kind == QT_ADD || p->tok.kind == QT_SUB) {
        enum traceql_op op = p->tok.kind == QT_ADD ? TRACEQL_OP_ADD : TRACEQL_OP_SUB;
        size_t pos = p->tok.pos;
        struct traceql_field *r;
        if (advance(p) != 0 || parse_fmul(p, &r) != 0 || build_binary(p, op, pos, l, r, &l)) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

bool traceql_cmp_op(enum qtok k, enum traceql_op *op)
{
    switch (k) {
    case QT_EQ:
        *op = TRACEQL_OP_EQ;
        return true;
    case QT_NEQ:
        *op = TRACEQL_OP_NE;
        return true;
    case QT_GT:
        *op = TRACEQL_OP_GT;
        return true;
    case QT_GE:
        *op = TRACEQL_OP_GE;
        return true;
    case QT_LT:
        *op = TRACEQL_OP_LT;
        return true;
    case QT_LE:
        *op = TRACEQL_OP_LE;
        return true;
    case QT_RE:
        *op = TRACEQL_OP_RE;
        return true;
    case QT_NRE:
        *op = TRACEQL_OP_NRE;
        return true;
    default:
        return false;
    }
}

static int parse_fcmp(struct parser *p, struct traceql_field **out)
{
    struct traceql_field *l;
    if (parse_fadd(p, &l) != 0) {
        return p->lx.rc;
    }
    enum traceql_op op;
    while (traceql_cmp_op(p->tok.kind, &op)) {
        size_t pos = p->tok.pos;
        struct traceql_field *r;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_RBRACE || p->tok.kind == QT_EOF || p->tok.kind == QT_RPAREN) {
            char what[64];
            snprintf(what, sizeof(what), "a value after \"%s\"", op_name(op));
            return fail_expected(p, what);
        }
        if (parse_fadd(p, &r) != 0 || build_binary(p, op, pos, l, r, &l) != 0) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

static int parse_fexpr(struct parser *p, struct traceql_field **out)
{
    struct traceql_field *l;
    if (parse_fcmp(p, &l) != 0) {
        return p->lx.rc;
    }
    while (p->tok.kind == QT_AND || p->tok.kind == QT_OR) {
        enum traceql_op op = p->tok.kind == QT_AND ? TRACEQL_OP_AND : TRACEQL_OP_OR;
        size_t pos = p->tok.pos;
        struct traceql_field *r;
        if (advance(p) != 0 || parse_fcmp(p, &r) != 0 || build_binary(p, op, pos, l, r, &l)) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

/* ---- spansets and pipelines ------------------------------------------------------ */

static int parse_pipeline(struct parser *p, struct traceql_node **out);
static int parse_sexpr(struct parser *p, struct traceql_node **out);

static struct traceql_node *new_node(struct parser *p, enum traceql_node_kind k, size_t pos)
{
    struct traceql_node *n = qlex_alloc(&p->lx, sizeof(*n));
    if (n != NULL) {
        n->kind = k;
        n->pos = pos;
    }
    return n;
}

static int parse_filter(struct parser *p, struct traceql_node **out)
{
    struct traceql_node *n = new_node(p, TRACEQL_N_FILTER, p->tok.pos);
    if (n == NULL || advance(p) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind != QT_RBRACE) {
        size_t pos = p->tok.pos;
        if (parse_fexpr(p, &n->filter) != 0) {
            return p->lx.rc;
        }
        if (n->filter->type != TRACEQL_T_BOOL && n->filter->type != TRACEQL_T_ANY) {
            return qlex_fail(
                &p->lx, pos,
                "a spanset filter must be a condition (e.g. span.x = 1), not a value of type %s",
                type_name(n->filter->type));
        }
        if (p->tok.kind != QT_RBRACE) {
            return fail_expected(p, "\"}\", \"&&\", \"||\" or an operator");
        }
    }
    *out = n;
    return advance(p);
}

static int parse_sprim(struct parser *p, struct traceql_node **out)
{
    if (p->tok.kind == QT_LBRACE) {
        return parse_filter(p, out);
    }
    if (p->tok.kind == QT_LPAREN) {
        if (enter(p) != 0 || advance(p) != 0 || parse_pipeline(p, out) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return expect(p, QT_RPAREN, "\")\"");
    }
    return fail_expected(p, "a spanset filter \"{ ... }\"");
}

static bool struct_op(enum qtok k, enum traceql_sop *op)
{
    switch (k) {
    case QT_GT:
        *op = TRACEQL_SOP_CHILD;
        return true;
    case QT_DESC:
        *op = TRACEQL_SOP_DESC;
        return true;
    case QT_LT:
        *op = TRACEQL_SOP_PARENT;
        return true;
    case QT_ANC:
        *op = TRACEQL_SOP_ANCESTOR;
        return true;
    case QT_TILDE:
        *op = TRACEQL_SOP_SIBLING;
        return true;
    case QT_AMP_GT:
        *op = TRACEQL_SOP_UNION_CHILD;
        return true;
    case QT_AMP_DESC:
        *op = TRACEQL_SOP_UNION_DESC;
        return true;
    case QT_AMP_LT:
        *op = TRACEQL_SOP_UNION_PARENT;
        return true;
    case QT_AMP_ANC:
        *op = TRACEQL_SOP_UNION_ANCESTOR;
        return true;
    case QT_AMP_TILDE:
        *op = TRACEQL_SOP_UNION_SIBLING;
        return true;
    case QT_BANG_GT:
        *op = TRACEQL_SOP_NOT_CHILD;
        return true;
    case QT_BANG_DESC:
        *op = TRACEQL_SOP_NOT_DESC;
        return true;
    case QT_BANG_LT:
        *op = TRACEQL_SOP_NOT_PARENT;
        return true;
    case QT_BANG_ANC:
        *op = TRACEQL_SOP_NOT_ANCESTOR;
        return true;
    case QT_NRE:
        *op = TRACEQL_SOP_NOT_SIBLING;
        return true;
    default:
        return false;
    }
}

static int combine(struct parser *p, enum traceql_sop op, size_t pos, struct traceql_node *l,
                   struct traceql_node *r, struct traceql_node **out)
{
    if (count_op(p, pos) != 0) {
        return p->lx.rc;
    }
    struct traceql_node *n = new_node(p, TRACEQL_N_SPANSET_OP, pos);
    if (n == NULL) {
        return p->lx.rc;
    }
    n->sop = op;
    n->l = l;
    n->r = r;
    *out = n;
    return 0;
}

static int parse_sterm(struct parser *p, struct traceql_node **out)
{
    struct traceql_node *l;
    if (parse_sprim(p, &l) != 0) {
        return p->lx.rc;
    }
    enum traceql_sop op;
    while (struct_op(p->tok.kind, &op)) {
        size_t pos = p->tok.pos;
        struct traceql_node *r;
        if (advance(p) != 0 || parse_sprim(p, &r) != 0 || combine(p, op, pos, l, r, &l) != 0) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

static int parse_sexpr(struct parser *p, struct traceql_node **out)
{
    struct traceql_node *l;
    if (parse_sterm(p, &l) != 0) {
        return p->lx.rc;
    }
    while (p->tok.kind == QT_AND || p->tok.kind == QT_OR) {
        enum traceql_sop op = p->tok.kind == QT_AND ? TRACEQL_SOP_AND : TRACEQL_SOP_UNION;
        size_t pos = p->tok.pos;
        struct traceql_node *r;
        if (advance(p) != 0 || parse_sterm(p, &r) != 0 || combine(p, op, pos, l, r, &l) != 0) {
            return p->lx.rc;
        }
    }
    *out = l;
    return 0;
}

/* ---- scalar filters ---------------------------------------------------------------- */

static const struct {
    const char *name;
    enum traceql_agg agg;
} aggs[] = {
    {"count", TRACEQL_AGG_COUNT}, {"avg", TRACEQL_AGG_AVG}, {"min", TRACEQL_AGG_MIN},
    {"max", TRACEQL_AGG_MAX},     {"sum", TRACEQL_AGG_SUM},
};

/* Metrics stages (query/tqmx.c parses them); the first 9 begin a metrics query. */
static const char *const metrics_fns[] = {
    "rate",          "count_over_time",    "min_over_time",       "max_over_time", "avg_over_time",
    "sum_over_time", "quantile_over_time", "histogram_over_time", "compare",       "topk",
    "bottomk",
};
#define METRICS_FIRST_STAGES 9

bool traceql_is_metrics_fn(const char *s, size_t n, bool first_stage)
{
    size_t k_end =
        first_stage ? METRICS_FIRST_STAGES : sizeof(metrics_fns) / sizeof(metrics_fns[0]);
    for (size_t k = 0; k < k_end; k++) {
        if (strlen(metrics_fns[k]) == n && memcmp(metrics_fns[k], s, n) == 0) {
            return true;
        }
    }
    return false;
}

static bool at_agg(struct parser *p)
{
    if (p->tok.kind != QT_IDENT || peek(p)->kind != QT_LPAREN) {
        return false;
    }
    for (size_t k = 0; k < sizeof(aggs) / sizeof(aggs[0]); k++) {
        if (is_word(&p->tok, aggs[k].name)) {
            return true;
        }
    }
    return false;
}

static int parse_scalar(struct parser *p, int min_prec, struct traceql_scalar **out);

static int parse_scalar_prim(struct parser *p, struct traceql_scalar **out)
{
    struct traceql_scalar *s = qlex_alloc(&p->lx, sizeof(*s));
    if (s == NULL) {
        return p->lx.rc;
    }
    *out = s;
    if (p->tok.kind == QT_LPAREN) {
        if (enter(p) != 0 || advance(p) != 0 || parse_scalar(p, 1, out) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return expect(p, QT_RPAREN, "\")\"");
    }
    if (at_agg(p)) {
        size_t agg_pos = p->tok.pos;
        s->kind = TRACEQL_S_AGG;
        for (size_t k = 0; k < sizeof(aggs) / sizeof(aggs[0]); k++) {
            if (is_word(&p->tok, aggs[k].name)) {
                s->agg = aggs[k].agg;
            }
        }
        if (advance(p) != 0 || advance(p) != 0) { /* name ( */
            return p->lx.rc;
        }
        if (s->agg == TRACEQL_AGG_COUNT) {
            return expect(p, QT_RPAREN, "\")\": count() takes no argument");
        }
        size_t pos = p->tok.pos;
        if (parse_fexpr(p, &s->field) != 0) {
            return p->lx.rc;
        }
        if (!is_numeric(s->field->type) && s->field->type != TRACEQL_T_ANY) {
            return qlex_fail(&p->lx, pos, "aggregates need a numeric field, got %s",
                             type_name(s->field->type));
        }
        if (!references_span(s->field)) {
            return qlex_fail(&p->lx, pos,
                             "aggregate field expressions must reference the span: %.*s",
                             (int)(p->tok.end - agg_pos), p->lx.src + agg_pos);
        }
        return expect(p, QT_RPAREN, "\")\" closing the aggregate");
    }
    bool neg = false;
    size_t pos = p->tok.pos;
    if (p->tok.kind == QT_SUB) {
        neg = true;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
    if (!parse_static(p, &s->st)) {
        if (p->lx.rc != 0) {
            return p->lx.rc;
        }
        return fail_expected(p, "count(), avg(...), min(...), max(...), sum(...) or a number");
    }
    if (!is_numeric(s->st.type)) {
        return qlex_fail(&p->lx, pos, "expected a number, got %s", type_name(s->st.type));
    }
    if (neg) {
        if (s->st.type == TRACEQL_T_FLOAT) {
            s->st.f = -s->st.f;
        } else {
            s->st.i = s->st.i == INT64_MIN ? INT64_MAX : -s->st.i;
        }
    }
    s->kind = TRACEQL_S_STATIC;
    return 0;
}

static int scalar_binop(enum qtok k, enum traceql_op *op, int *prec)
{
    switch (k) {
    case QT_ADD:
        *op = TRACEQL_OP_ADD, *prec = 1;
        return 1;
    case QT_SUB:
        *op = TRACEQL_OP_SUB, *prec = 1;
        return 1;
    case QT_MUL:
        *op = TRACEQL_OP_MUL, *prec = 2;
        return 1;
    case QT_DIV:
        *op = TRACEQL_OP_DIV, *prec = 2;
        return 1;
    case QT_MOD:
        *op = TRACEQL_OP_MOD, *prec = 2;
        return 1;
    case QT_POW:
        *op = TRACEQL_OP_POW, *prec = 3;
        return 1;
    default:
        return 0;
    }
}

static int parse_scalar(struct parser *p, int min_prec, struct traceql_scalar **out)
{
    struct traceql_scalar *l;
    if (parse_scalar_prim(p, &l) != 0) {
        return p->lx.rc;
    }
    enum traceql_op op;
    int prec;
    while (scalar_binop(p->tok.kind, &op, &prec) && prec >= min_prec) {
        if (count_op(p, p->tok.pos) != 0) {
            return p->lx.rc;
        }
        struct traceql_scalar *b = qlex_alloc(&p->lx, sizeof(*b));
        if (b == NULL || enter(p) != 0 || advance(p) != 0 ||
            parse_scalar(p, op == TRACEQL_OP_POW ? prec : prec + 1, &b->r) != 0) {
            return p->lx.rc;
        }
        leave(p);
        b->kind = TRACEQL_S_BINARY;
        b->op = op;
        b->l = l;
        l = b;
    }
    *out = l;
    return 0;
}

static bool has_agg(const struct traceql_scalar *s)
{
    if (s->kind == TRACEQL_S_AGG) {
        return true;
    }
    return s->kind == TRACEQL_S_BINARY && (has_agg(s->l) || has_agg(s->r));
}

static int parse_scalar_filter(struct parser *p, struct traceql_stage *st)
{
    st->kind = TRACEQL_STAGE_SCALAR_FILTER;
    if (parse_scalar(p, 1, &st->lhs) != 0) {
        return p->lx.rc;
    }
    enum traceql_op op;
    if (!traceql_cmp_op(p->tok.kind, &op) || op == TRACEQL_OP_RE || op == TRACEQL_OP_NRE) {
        return fail_expected(p, "a comparison (=, !=, >, >=, <, <=) after the aggregate");
    }
    st->cmp = op;
    if (advance(p) != 0 || parse_scalar(p, 1, &st->rhs) != 0) {
        return p->lx.rc;
    }
    if (!has_agg(st->lhs) && !has_agg(st->rhs)) {
        return qlex_fail(&p->lx, st->pos, "a scalar filter needs an aggregate such as count()");
    }
    /* Tempo (ast_validate.go) runs only `aggregate op number` */
    if (st->lhs->kind != TRACEQL_S_AGG || has_agg(st->rhs)) {
        return qlex_fail(&p->lx, st->pos,
                         "not supported (as in Tempo): a scalar filter compares one aggregate "
                         "with a number, such as count() > 2 or avg(duration) < 1s");
    }
    return 0;
}

/* ---- stages ---------------------------------------------------------------------------- */

static int parse_stage(struct parser *p, struct traceql_stage *st)
{
    st->pos = p->tok.pos;
    if (p->tok.kind == QT_LBRACE || p->tok.kind == QT_LPAREN) {
        st->kind = TRACEQL_STAGE_SPANSET;
        return parse_sexpr(p, &st->node);
    }
    if (p->tok.kind == QT_IDENT && peek(p)->kind == QT_LPAREN) {
        if (is_word(&p->tok, "select") || is_word(&p->tok, "by")) {
            bool sel = is_word(&p->tok, "select");
            st->kind = sel ? TRACEQL_STAGE_SELECT : TRACEQL_STAGE_BY;
            if (advance(p) != 0 || advance(p) != 0) {
                return p->lx.rc;
            }
            size_t cap = 0;
            for (;;) {
                size_t pos = p->tok.pos;
                struct traceql_field **slot =
                    push(p, (void **)&st->fields, &st->n_fields, &cap, sizeof(*st->fields));
                if (slot == NULL || parse_fexpr(p, slot) != 0) {
                    return p->lx.rc;
                }
                if (sel && (*slot)->kind != TRACEQL_F_ATTR &&
                    (*slot)->kind != TRACEQL_F_INTRINSIC) {
                    return qlex_fail(&p->lx, pos, "select() takes attributes and intrinsics");
                }
                if (!sel && !references_span(*slot)) {
                    return qlex_fail(&p->lx, pos,
                                     "grouping field expressions must reference the span: "
                                     "by(%.*s)",
                                     (int)(p->tok.pos - pos), p->lx.src + pos);
                }
                if (!sel || p->tok.kind != QT_COMMA) {
                    break;
                }
                if (advance(p) != 0) {
                    return p->lx.rc;
                }
            }
            return expect(p, QT_RPAREN, sel ? "\",\" or \")\" in select()" : "\")\" closing by()");
        }
        if (is_word(&p->tok, "coalesce")) {
            st->kind = TRACEQL_STAGE_COALESCE;
            if (advance(p) != 0 || advance(p) != 0) {
                return p->lx.rc;
            }
            return expect(p, QT_RPAREN, "\")\": coalesce() takes no argument");
        }
        for (size_t k = 0; k < sizeof(metrics_fns) / sizeof(metrics_fns[0]); k++) {
            if (is_word(&p->tok, metrics_fns[k])) {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "TraceQL metrics queries (%s) are not supported by search; "
                                 "use /api/metrics/query_range or /api/metrics/query",
                                 metrics_fns[k]);
            }
        }
        if (!at_agg(p)) {
            return qlex_fail(&p->lx, p->tok.pos, "unknown pipeline function \"%.*s\"",
                             (int)p->tok.n, p->tok.s);
        }
    }
    if (at_agg(p) || p->tok.kind == QT_NUMBER || p->tok.kind == QT_DURATION ||
        p->tok.kind == QT_SUB) {
        return parse_scalar_filter(p, st);
    }
    return fail_expected(p, "a spanset filter \"{...}\", select(...), by(...), coalesce() or an "
                            "aggregate such as count() > 1");
}

static int parse_pipeline(struct parser *p, struct traceql_node **out)
{
    struct traceql_node *input;
    size_t pos = p->tok.pos;
    struct traceql_node *pl = NULL;
    size_t cap = 0;
    if (p->tok.kind == QT_LBRACE || p->tok.kind == QT_LPAREN) {
        if (parse_sexpr(p, &input) != 0) {
            return p->lx.rc;
        }
    } else {
        /* a leading stage (count() > 2, by(...)) runs on {} */
        if (is_word(&p->tok, "coalesce") && peek(p)->kind == QT_LPAREN) {
            return qlex_fail(&p->lx, pos,
                             "coalesce() cannot start a pipeline: it merges the spansets of an "
                             "earlier by()");
        }
        input = new_node(p, TRACEQL_N_FILTER, pos);
        pl = new_node(p, TRACEQL_N_PIPELINE, pos);
        if (input == NULL || pl == NULL) {
            return p->lx.rc;
        }
        pl->input = input;
        struct traceql_stage *st =
            push(p, (void **)&pl->stages, &pl->n_stages, &cap, sizeof(*pl->stages));
        if (st == NULL || parse_stage(p, st) != 0) {
            return p->lx.rc;
        }
    }
    while (p->tok.kind == QT_PIPE) {
        if (p->metrics && peek(p)->kind == QT_IDENT &&
            traceql_is_metrics_fn(p->peek.s, p->peek.n, false)) {
            break; /* the metrics stage: the caller's */
        }
        if (pl == NULL) {
            pl = new_node(p, TRACEQL_N_PIPELINE, pos);
            if (pl == NULL) {
                return p->lx.rc;
            }
            pl->input = input;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        struct traceql_stage *st =
            push(p, (void **)&pl->stages, &pl->n_stages, &cap, sizeof(*pl->stages));
        if (st == NULL || parse_stage(p, st) != 0) {
            return p->lx.rc;
        }
    }
    *out = pl != NULL ? pl : input;
    return 0;
}

/* ---- pruning facts ------------------------------------------------------------------------ */

struct facts {
    struct traceql_fact *v;
    size_t n, cap;
};

static enum traceql_op flip(enum traceql_op op)
{
    switch (op) {
    case TRACEQL_OP_GT:
        return TRACEQL_OP_LT;
    case TRACEQL_OP_GE:
        return TRACEQL_OP_LE;
    case TRACEQL_OP_LT:
        return TRACEQL_OP_GT;
    case TRACEQL_OP_LE:
        return TRACEQL_OP_GE;
    default:
        return op;
    }
}

static int add_fact(struct parser *p, struct facts *fs, enum traceql_fact_kind k,
                    const struct traceql_field *subject, enum traceql_op op,
                    const struct traceql_static *v)
{
    struct traceql_fact *f = push(p, (void **)&fs->v, &fs->n, &fs->cap, sizeof(*fs->v));
    if (f == NULL) {
        return p->lx.rc;
    }
    f->kind = k;
    f->op = op;
    f->value = *v;
    if (subject->kind == TRACEQL_F_ATTR) {
        f->scope = subject->scope;
        f->name = subject->name;
        f->name_len = subject->name_len;
    }
    return 0;
}

/* Facts implied by a span satisfying f. */
static int field_facts(struct parser *p, const struct traceql_field *f, struct facts *fs)
{
    if (f == NULL || f->kind != TRACEQL_F_BINARY) {
        return 0;
    }
    if (f->op == TRACEQL_OP_AND) {
        if (field_facts(p, f->l, fs) != 0) {
            return p->lx.rc;
        }
        return field_facts(p, f->r, fs);
    }
    if (f->op != TRACEQL_OP_EQ && f->op != TRACEQL_OP_GT && f->op != TRACEQL_OP_GE &&
        f->op != TRACEQL_OP_LT && f->op != TRACEQL_OP_LE) {
        return 0;
    }
    const struct traceql_field *subj = f->l, *val = f->r;
    enum traceql_op op = f->op;
    if (subj->kind == TRACEQL_F_STATIC) {
        subj = f->r;
        val = f->l;
        op = flip(op);
    }
    if (val->kind != TRACEQL_F_STATIC || subj->kind == TRACEQL_F_STATIC) {
        return 0;
    }
    const struct traceql_static *v = &val->st;
    if (subj->kind == TRACEQL_F_ATTR) {
        if (op == TRACEQL_OP_EQ && v->type != TRACEQL_T_NIL) {
            return add_fact(p, fs, TRACEQL_FACT_ATTR_EQ, subj, op, v);
        }
        return 0;
    }
    if (subj->kind != TRACEQL_F_INTRINSIC) {
        return 0;
    }
    switch (subj->intrinsic) {
    case TRACEQL_I_DURATION:
        return add_fact(p, fs, TRACEQL_FACT_DURATION, subj, op, v);
    case TRACEQL_I_TRACE_DURATION:
        return add_fact(p, fs, TRACEQL_FACT_TRACE_DURATION, subj, op, v);
    default:
        break;
    }
    if (op != TRACEQL_OP_EQ) {
        return 0;
    }
    switch (subj->intrinsic) {
    case TRACEQL_I_NAME:
        return add_fact(p, fs, TRACEQL_FACT_NAME_EQ, subj, op, v);
    case TRACEQL_I_STATUS:
        return add_fact(p, fs, TRACEQL_FACT_STATUS_EQ, subj, op, v);
    case TRACEQL_I_KIND:
        return add_fact(p, fs, TRACEQL_FACT_KIND_EQ, subj, op, v);
    case TRACEQL_I_ROOT_NAME:
        return add_fact(p, fs, TRACEQL_FACT_ROOT_NAME_EQ, subj, op, v);
    case TRACEQL_I_ROOT_SERVICE:
        return add_fact(p, fs, TRACEQL_FACT_ROOT_SERVICE_EQ, subj, op, v);
    case TRACEQL_I_TRACE_ID:
        return add_fact(p, fs, TRACEQL_FACT_TRACE_ID_EQ, subj, op, v);
    default:
        return 0;
    }
}

/* Facts implied by the node's result spanset being non-empty. */
static int node_facts(struct parser *p, const struct traceql_node *n, struct facts *fs)
{
    switch (n->kind) {
    case TRACEQL_N_FILTER:
        return field_facts(p, n->filter, fs);
    case TRACEQL_N_SPANSET_OP:
        if (n->sop == TRACEQL_SOP_UNION) {
            return 0;
        }
        if (n->sop >= TRACEQL_SOP_NOT_CHILD) {
            return node_facts(p, n->r, fs); /* the left side may be empty */
        }
        if (node_facts(p, n->l, fs) != 0) {
            return p->lx.rc;
        }
        return node_facts(p, n->r, fs);
    case TRACEQL_N_PIPELINE:
        if (node_facts(p, n->input, fs) != 0) {
            return p->lx.rc;
        }
        for (size_t i = 0; i < n->n_stages; i++) {
            if (n->stages[i].kind == TRACEQL_STAGE_SPANSET &&
                node_facts(p, n->stages[i].node, fs) != 0) {
                return p->lx.rc;
            }
        }
        return 0;
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------------------------- */

static int parse_hints(struct parser *p, struct traceql_expr *q)
{
    if (advance(p) != 0 || expect(p, QT_LPAREN, "\"(\" after with") != 0) {
        return p->lx.rc;
    }
    for (;;) {
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a hint name such as most_recent");
        }
        bool mr = is_word(&p->tok, "most_recent");
        if (advance(p) != 0 || expect(p, QT_EQ, "\"=\" after the hint name") != 0) {
            return p->lx.rc;
        }
        struct traceql_static v;
        size_t vpos = p->tok.pos;
        if (!parse_static(p, &v)) {
            return p->lx.rc != 0 ? p->lx.rc : fail_expected(p, "a hint value");
        }
        if (mr) {
            if (v.type != TRACEQL_T_BOOL) {
                return qlex_fail(&p->lx, vpos, "most_recent takes true or false");
            }
            q->most_recent = v.i != 0;
        }
        if (p->tok.kind != QT_COMMA) {
            break;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
    return expect(p, QT_RPAREN, "\",\" or \")\" in with (...)");
}

/* traceql_parse, or with |metrics| the input pipeline of a metrics query
 * from byte |off| up to *end. */
static int parse_root(const char *src, size_t len, size_t off, bool metrics,
                      struct traceql_expr **out, size_t *end, char *err, size_t errlen)
{
    *out = NULL;
    arena *a = arena_new(TRACEQL_ARENA_CHUNK);
    if (a == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "out of memory");
        }
        return -ENOMEM;
    }
    arena_set_limit(a, TRACEQL_ARENA_LIMIT);
    struct parser p;
    memset(&p, 0, sizeof(p));
    qlex_init(&p.lx, QLEX_TRACEQL, src, len, a, err, errlen);
    p.lx.pos = off;
    p.metrics = metrics;
    struct traceql_root *r = qlex_alloc(&p.lx, sizeof(*r));
    if (r != NULL && advance(&p) == 0) {
        if (p.tok.kind == QT_EOF) {
            fail_expected(&p, "a query such as { span.http.status_code = 500 }");
        } else if (parse_pipeline(&p, &r->q.root) == 0) {
            if (!metrics && is_word(&p.tok, "with") && peek(&p)->kind == QT_LPAREN) {
                (void)parse_hints(&p, &r->q);
            }
            if (p.lx.rc == 0 && !metrics && p.tok.kind != QT_EOF) {
                fail_expected(&p, "\"|\", \"&&\", \"||\", a structural operator (>, >>, <, <<, "
                                  "~) or the end of the query");
            }
            struct facts fs = {NULL, 0, 0};
            if (p.lx.rc == 0 && node_facts(&p, r->q.root, &fs) == 0) {
                r->q.facts = fs.v;
                r->q.n_facts = fs.n;
            }
        }
    }
    if (p.lx.rc != 0) {
        int rc = p.lx.rc;
        qlex_re_free_all(p.lx.res);
        arena_free(a);
        return rc;
    }
    if (end != NULL) {
        *end = p.tok.pos;
    }
    r->magic = TRACEQL_ROOT_MAGIC;
    r->a = a;
    r->res = p.lx.res;
    *out = &r->q;
    return 0;
}

int traceql_parse(const char *src, size_t len, struct traceql_expr **out, char *err, size_t errlen)
{
    return parse_root(src, len, 0, false, out, NULL, err, errlen);
}

int traceql_parse_metrics_input(const char *src, size_t len, size_t off, struct traceql_expr **out,
                                size_t *end, char *err, size_t errlen)
{
    return parse_root(src, len, off, true, out, end, err, errlen);
}

void traceql_free(struct traceql_expr *q)
{
    if (q == NULL) {
        return;
    }
    struct traceql_root *r = (struct traceql_root *)((char *)q - offsetof(struct traceql_root, q));
    if (r->magic != TRACEQL_ROOT_MAGIC) {
        abort(); /* not a query returned by traceql_parse */
    }
    r->magic = 0;
    qlex_re_free_all(r->res);
    arena_free(r->a);
}

const struct traceql_fact *traceql_facts(const struct traceql_expr *q, size_t *n)
{
    *n = q->n_facts;
    return q->facts;
}

bool traceql_regex_match(const struct traceql_field *f, const char *v, size_t n)
{
    if (f->re == NULL) {
        return false;
    }
    int rc = qlex_re_match(f->re, v, n);
    return f->op == TRACEQL_OP_NRE ? rc != 1 : rc == 1;
}

int traceql_parse_identifier(const char *s, size_t n, struct traceql_field *f, char *name_buf,
                             size_t name_cap)
{
    memset(f, 0, sizeof(*f));
    arena *a = arena_new(1024);
    if (a == NULL) {
        return -ENOMEM;
    }
    arena_set_limit(a, 1u << 20);
    struct qlex lx;
    qlex_init(&lx, QLEX_TRACEQL, s, n, a, NULL, 0);
    struct qlex_tok t, end;
    int rc = -EINVAL;
    if (qlex_next(&lx, &t) == 0 && qlex_next(&lx, &end) == 0 && end.kind == QT_EOF) {
        if (t.kind == QT_ATTR) {
            if (t.n + 1 > name_cap) {
                rc = -ENOSPC;
            } else {
                memcpy(name_buf, t.s, t.n);
                name_buf[t.n] = '\0';
                f->kind = TRACEQL_F_ATTR;
                f->type = TRACEQL_T_ANY;
                f->scope = (enum traceql_scope)t.scope;
                f->name = name_buf;
                f->name_len = t.n;
                rc = 0;
            }
        } else if (t.kind == QT_SCOPED) {
            for (size_t k = 0; k < sizeof(scoped_intrinsics) / sizeof(scoped_intrinsics[0]); k++) {
                if (scoped_intrinsics[k].scope == t.scope &&
                    str_is(t.s, t.n, scoped_intrinsics[k].name)) {
                    f->kind = TRACEQL_F_INTRINSIC;
                    f->intrinsic = scoped_intrinsics[k].i;
                    f->type = intrinsic_type(f->intrinsic);
                    rc = 0;
                }
            }
        } else if (t.kind == QT_IDENT) {
            for (size_t k = 0; k < sizeof(unscoped_intrinsics) / sizeof(unscoped_intrinsics[0]);
                 k++) {
                if (is_word(&t, unscoped_intrinsics[k].name)) {
                    f->kind = TRACEQL_F_INTRINSIC;
                    f->intrinsic = unscoped_intrinsics[k].i;
                    f->type = intrinsic_type(f->intrinsic);
                    rc = 0;
                }
            }
        }
    }
    qlex_re_free_all(lx.res);
    arena_free(a);
    return rc;
}
