/*
 * tqmx.c - the TraceQL metrics parser (grammar in tqmx.h). The input
 * pipeline of each metrics query is TraceQL's (traceql_parse_metrics_input,
 * which stops before the metrics stage); this file parses what follows it
 * and the arithmetic around it, on the same source so that positions in
 * messages are the query's own.
 */
#include "query/tqmx.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/qlex.h"
#include "storage/arena.h"

#define TQMX_MAX_DEPTH 32
#define TQMX_MAX_INPUTS 64
#define TQMX_MAGIC 0x74716d78u /* "tqmx" */

struct tqmx_root {
    uint32_t magic;
    arena *a;
    struct traceql_expr *inputs[TQMX_MAX_INPUTS];
    size_t n_inputs;
    struct tqmx_expr e;
};

struct mp {
    struct qlex lx;
    struct qlex_tok tok;
    struct tqmx_root *root;
    int depth;
};

static const struct {
    const char *name;
    enum tqmx_fn fn;
} first_fns[] = {
    {"rate", TQMX_RATE},
    {"count_over_time", TQMX_COUNT_OVER_TIME},
    {"min_over_time", TQMX_MIN_OVER_TIME},
    {"max_over_time", TQMX_MAX_OVER_TIME},
    {"avg_over_time", TQMX_AVG_OVER_TIME},
    {"sum_over_time", TQMX_SUM_OVER_TIME},
    {"quantile_over_time", TQMX_QUANTILE_OVER_TIME},
    {"histogram_over_time", TQMX_HISTOGRAM_OVER_TIME},
    {"compare", TQMX_COMPARE},
};

static bool word(const struct qlex_tok *t, const char *w)
{
    size_t l = strlen(w);
    return t->kind == QT_IDENT && t->n == l && memcmp(t->s, w, l) == 0;
}

static int next(struct mp *p)
{
    return qlex_next(&p->lx, &p->tok);
}

/* Re-lexes from byte |off|. */
static int seek(struct mp *p, size_t off)
{
    p->lx.pos = off;
    return next(p);
}

static int fail_tok(struct mp *p, const char *what)
{
    char d[96];
    return qlex_fail(&p->lx, p->tok.pos, "syntax error: unexpected %s, expecting %s",
                     qlex_desc(&p->lx, &p->tok, d, sizeof(d)), what);
}

static int expect(struct mp *p, enum qtok k, const char *what)
{
    if (p->tok.kind != k) {
        return fail_tok(p, what);
    }
    return next(p);
}

static void *alloc(struct mp *p, size_t n)
{
    return qlex_alloc(&p->lx, n);
}

/* ---- lookahead: what a "(" opens ---------------------------------------- */

enum paren { P_METRICS, P_PIPELINE, P_SCALAR };

static enum paren classify_paren(struct mp *p)
{
    struct qlex lx = p->lx; /* a copy: errors here are the real parse's to report */
    lx.err = NULL;
    lx.errlen = 0;
    struct qlex_tok t;
    int depth = 1;
    bool brace = false;
    while (depth > 0 && qlex_next(&lx, &t) == 0 && t.kind != QT_EOF) {
        if (t.kind == QT_LPAREN) {
            depth++;
        } else if (t.kind == QT_RPAREN) {
            depth--;
        } else if (t.kind == QT_LBRACE) {
            brace = true;
        } else if (t.kind == QT_IDENT && traceql_is_metrics_fn(t.s, t.n, true)) {
            return P_METRICS;
        }
    }
    return brace ? P_PIPELINE : P_SCALAR;
}

/* ---- scalars --------------------------------------------------------------- */

struct num {
    double v;
    bool is_int, is_dur;
};

static int parse_num_expr(struct mp *p, int min_prec, struct num *out);

static int num_prim(struct mp *p, struct num *out)
{
    size_t pos = p->tok.pos;
    if (p->tok.kind == QT_SUB) {
        if (next(p) != 0 || num_prim(p, out) != 0) {
            return p->lx.rc;
        }
        out->v = -out->v;
        return 0;
    }
    if (p->tok.kind == QT_LPAREN) {
        if (++p->depth > TQMX_MAX_DEPTH) {
            return qlex_fail(&p->lx, pos, "query nested too deeply");
        }
        if (next(p) != 0 || parse_num_expr(p, 1, out) != 0) {
            return p->lx.rc;
        }
        p->depth--;
        return expect(p, QT_RPAREN, "\")\"");
    }
    if (p->tok.kind == QT_DURATION) {
        *out = (struct num){(double)p->tok.i / 1e9, false, true};
        return next(p);
    }
    if (p->tok.kind != QT_NUMBER) {
        return fail_tok(p, "a number");
    }
    bool plain = memchr(p->lx.src + p->tok.pos, '.', p->tok.end - p->tok.pos) == NULL &&
                 memchr(p->lx.src + p->tok.pos, 'e', p->tok.end - p->tok.pos) == NULL &&
                 memchr(p->lx.src + p->tok.pos, 'E', p->tok.end - p->tok.pos) == NULL;
    if (plain && !p->tok.is_int) {
        return qlex_fail(&p->lx, pos, "integer literal %.*s is out of range",
                         (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos);
    }
    *out = (struct num){p->tok.is_int ? (double)p->tok.i : p->tok.num, p->tok.is_int, false};
    return next(p);
}

static int arith_prec(enum qtok k)
{
    return k == QT_ADD || k == QT_SUB ? 1 : k == QT_MUL || k == QT_DIV ? 2 : 0;
}

static int fold(struct mp *p, size_t pos, enum qtok op, struct num *l, const struct num *r)
{
    if (l->is_dur || r->is_dur) {
        return qlex_fail(&p->lx, pos, "durations cannot take part in metrics arithmetic");
    }
    bool ints = l->is_int && r->is_int;
    double a = l->v, b = r->v;
    switch (op) {
    case QT_ADD:
        l->v = a + b;
        break;
    case QT_SUB:
        l->v = a - b;
        break;
    case QT_MUL:
        l->v = a * b;
        break;
    default:
        if (ints) {
            if (b == 0) {
                return qlex_fail(&p->lx, pos, "integer division by zero");
            }
            l->v = (double)((int64_t)a / (int64_t)b); /* Tempo folds 1/2 to 0 */
        } else {
            l->v = a / b;
        }
        break;
    }
    l->is_int = ints;
    return 0;
}

static int parse_num_expr(struct mp *p, int min_prec, struct num *out)
{
    if (num_prim(p, out) != 0) {
        return p->lx.rc;
    }
    for (;;) {
        int prec = arith_prec(p->tok.kind);
        if (prec == 0 || prec < min_prec) {
            return 0;
        }
        enum qtok op = p->tok.kind;
        size_t pos = p->tok.pos;
        struct num r;
        if (next(p) != 0 || parse_num_expr(p, prec + 1, &r) != 0 || fold(p, pos, op, out, &r)) {
            return p->lx.rc;
        }
    }
}

/* ---- the first stage ----------------------------------------------------- */

static int parse_attr(struct mp *p, struct traceql_field *f)
{
    size_t pos = p->tok.pos, n = p->tok.end - p->tok.pos;
    if (p->tok.kind != QT_ATTR && p->tok.kind != QT_SCOPED && p->tok.kind != QT_IDENT) {
        return fail_tok(p, "an attribute or intrinsic such as duration or span.http.route");
    }
    char *buf = alloc(p, n + 1);
    if (buf == NULL) {
        return p->lx.rc;
    }
    int rc = traceql_parse_identifier(p->lx.src + pos, n, f, buf, n + 1);
    if (rc != 0) {
        return qlex_fail(&p->lx, pos, "\"%.*s\" is not an attribute or intrinsic", (int)n,
                         p->lx.src + pos);
    }
    return next(p);
}

static int parse_by(struct mp *p, struct tqmx_query *q)
{
    if (next(p) != 0 || expect(p, QT_LPAREN, "\"(\" after by") != 0) {
        return p->lx.rc;
    }
    for (;;) {
        if (q->n_by == TQMX_MAX_BY) {
            return qlex_fail(&p->lx, p->tok.pos, "by() takes at most %d attributes", TQMX_MAX_BY);
        }
        if (parse_attr(p, &q->by[q->n_by++]) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_COMMA) {
            break;
        }
        if (next(p) != 0) {
            return p->lx.rc;
        }
    }
    return expect(p, QT_RPAREN, "\",\" or \")\" in by()");
}

static int parse_compare_args(struct mp *p, struct tqmx_query *q)
{
    size_t pos = p->tok.pos, end;
    if (p->tok.kind != QT_LBRACE) {
        return fail_tok(p, "a spanset filter {...} as compare()'s first argument");
    }
    struct tqmx_root *r = p->root;
    if (r->n_inputs == TQMX_MAX_INPUTS) {
        return qlex_fail(&p->lx, pos, "query too complex");
    }
    int rc = traceql_parse_metrics_input(p->lx.src, p->lx.len, pos, &q->cmp, &end, p->lx.err,
                                         p->lx.errlen);
    if (rc != 0) {
        p->lx.rc = rc;
        return rc;
    }
    r->inputs[r->n_inputs++] = q->cmp;
    if (q->cmp->root->kind != TRACEQL_N_FILTER) {
        return qlex_fail(&p->lx, pos, "compare() takes one spanset filter {...}");
    }
    if (seek(p, end) != 0) {
        return p->lx.rc;
    }
    q->topn = 10;
    int64_t args[3];
    int n = 0;
    while (p->tok.kind == QT_COMMA && n < 3) {
        if (next(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_NUMBER || !p->tok.is_int || p->tok.i < 0) {
            return fail_tok(p, "a non-negative integer");
        }
        args[n++] = p->tok.i;
        if (next(p) != 0) {
            return p->lx.rc;
        }
    }
    if (n == 2) {
        return fail_tok(p, "\",\" and the end of the selection window");
    }
    if (n >= 1) {
        if (args[0] < 1 || args[0] > 1000) { /* Tempo's maxCompareTopN */
            return qlex_fail(&p->lx, pos,
                             "compare() top number of values must be an integer between 1 and "
                             "1000");
        }
        q->topn = (uint32_t)args[0];
    }
    if (n == 3) {
        /* Unix nanoseconds, as Tempo takes them */
        q->cmp_start_ns = (uint64_t)args[1];
        q->cmp_end_ns = (uint64_t)args[2];
        if (q->cmp_end_ns != 0 && q->cmp_end_ns <= q->cmp_start_ns) {
            return qlex_fail(&p->lx, pos, "compare(): the selection window ends before it starts");
        }
    }
    return 0;
}

static int parse_first(struct mp *p, struct tqmx_query *q)
{
    size_t fpos = p->tok.pos;
    size_t k = 0, nf = sizeof(first_fns) / sizeof(first_fns[0]);
    while (k < nf && !word(&p->tok, first_fns[k].name)) {
        k++;
    }
    if (k == nf) {
        if (word(&p->tok, "topk") || word(&p->tok, "bottomk")) {
            return qlex_fail(&p->lx, fpos,
                             "%.*s() is a second stage: it follows a metrics function such as "
                             "rate() or count_over_time()",
                             (int)p->tok.n, p->tok.s);
        }
        return fail_tok(p, "a metrics function such as rate()");
    }
    q->fn = first_fns[k].fn;
    if (next(p) != 0 || expect(p, QT_LPAREN, "\"(\"") != 0) {
        return p->lx.rc;
    }
    switch (q->fn) {
    case TQMX_RATE:
    case TQMX_COUNT_OVER_TIME:
        break;
    case TQMX_COMPARE:
        if (parse_compare_args(p, q) != 0) {
            return p->lx.rc;
        }
        break;
    default:
        if (parse_attr(p, &q->attr) != 0) {
            return p->lx.rc;
        }
        if (q->fn != TQMX_QUANTILE_OVER_TIME) {
            break;
        }
        if (p->tok.kind != QT_COMMA) {
            return fail_tok(p, "\",\" and the quantiles (0 to 1)");
        }
        while (p->tok.kind == QT_COMMA) {
            if (next(p) != 0) {
                return p->lx.rc;
            }
            double v;
            if (p->tok.kind == QT_NUMBER) {
                v = p->tok.is_int ? (double)p->tok.i : p->tok.num;
            } else if (p->tok.kind == QT_ATTR && p->tok.scope == QLEX_SCOPE_NONE && p->tok.n > 0 &&
                       strspn(p->tok.s, "0123456789") == p->tok.n) {
                v = strtod(p->lx.src + p->tok.pos, NULL); /* ".5": lexed as an attribute */
            } else {
                return fail_tok(p, "a quantile between 0 and 1");
            }
            if (!(v >= 0 && v <= 1)) {
                return qlex_fail(&p->lx, p->tok.pos, "quantile must be between 0 and 1: %g", v);
            }
            if (q->n_qs == TQMX_MAX_QS) {
                return qlex_fail(&p->lx, p->tok.pos, "at most %d quantiles", TQMX_MAX_QS);
            }
            q->qs[q->n_qs++] = v;
            if (next(p) != 0) {
                return p->lx.rc;
            }
        }
        break;
    }
    if (expect(p, QT_RPAREN, "\")\"") != 0) {
        return p->lx.rc;
    }
    if (word(&p->tok, "by") && q->fn != TQMX_COMPARE) {
        if (parse_by(p, q) != 0) {
            return p->lx.rc;
        }
        /* Tempo's maxGroupBys: 5, one kept for the p or __bucket label */
        size_t cap = q->fn == TQMX_QUANTILE_OVER_TIME || q->fn == TQMX_HISTOGRAM_OVER_TIME ? 4 : 5;
        if (q->n_by > cap) {
            return qlex_fail(&p->lx, fpos, "metrics group by %zu values not yet supported",
                             q->n_by);
        }
    }
    return 0;
}

/* pipeline "|" first [by]: the input starts at the current token. */
static int parse_query(struct mp *p, struct tqmx_node **out)
{
    struct tqmx_root *r = p->root;
    size_t pos = p->tok.pos, end;
    if (r->n_inputs == TQMX_MAX_INPUTS) {
        return qlex_fail(&p->lx, pos, "query too complex");
    }
    struct tqmx_node *n = alloc(p, sizeof(*n));
    struct tqmx_query *q = alloc(p, sizeof(*q));
    if (n == NULL || q == NULL) {
        return p->lx.rc;
    }
    int rc = traceql_parse_metrics_input(p->lx.src, p->lx.len, pos, &q->input, &end, p->lx.err,
                                         p->lx.errlen);
    if (rc != 0) {
        p->lx.rc = rc;
        return rc;
    }
    r->inputs[r->n_inputs++] = q->input;
    if (seek(p, end) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind != QT_PIPE) {
        return fail_tok(p, "\"|\" and a metrics function such as rate()");
    }
    if (next(p) != 0 || parse_first(p, q) != 0) {
        return p->lx.rc;
    }
    n->kind = TQMX_N_QUERY;
    n->q = q;
    r->e.n_queries++;
    *out = n;
    return 0;
}

/* ---- second stages and metric filters -------------------------------------- */

/* A metric filter compares values with a number: no regex operators. */
static bool filter_op(enum qtok k, enum traceql_op *op)
{
    return traceql_cmp_op(k, op) && *op != TRACEQL_OP_RE && *op != TRACEQL_OP_NRE;
}

static struct tqmx_stage *push_stage(struct mp *p, struct tqmx_node *n)
{
    struct tqmx_stage *v = alloc(p, (n->n_stages + 1) * sizeof(*v));
    if (v == NULL) {
        return NULL;
    }
    if (n->n_stages > 0) {
        memcpy(v, n->stages, n->n_stages * sizeof(*v));
    }
    n->stages = v;
    return &v[n->n_stages++];
}

static int parse_stages(struct mp *p, struct tqmx_node *n)
{
    for (;;) {
        enum traceql_op op;
        if (filter_op(p->tok.kind, &op)) {
            if (next(p) != 0) {
                return p->lx.rc;
            }
            struct num v;
            if (parse_num_expr(p, 1, &v) != 0) {
                return p->lx.rc;
            }
            struct tqmx_stage *st = push_stage(p, n);
            if (st == NULL) {
                return p->lx.rc;
            }
            *st = (struct tqmx_stage){.kind = TQMX_ST_FILTER, .op = op, .v = v.v};
            continue;
        }
        if (p->tok.kind != QT_PIPE) {
            return 0;
        }
        if (next(p) != 0) {
            return p->lx.rc;
        }
        bool top = word(&p->tok, "topk");
        if (!top && !word(&p->tok, "bottomk")) {
            return fail_tok(p, "topk(n) or bottomk(n)");
        }
        size_t pos = p->tok.pos;
        if (next(p) != 0 || expect(p, QT_LPAREN, "\"(\"") != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_NUMBER || !p->tok.is_int) {
            return fail_tok(p, "a whole number");
        }
        int64_t k = p->tok.i;
        if (next(p) != 0 || expect(p, QT_RPAREN, "\")\"") != 0) {
            return p->lx.rc;
        }
        if (k < 1) {
            return qlex_fail(&p->lx, pos, "limit must be greater than 0"); /* Tempo's words */
        }
        if (k > 100000) {
            return qlex_fail(&p->lx, pos, "%s() takes a limit up to 100000",
                             top ? "topk" : "bottomk");
        }
        struct tqmx_stage *st = push_stage(p, n);
        if (st == NULL) {
            return p->lx.rc;
        }
        *st = (struct tqmx_stage){.kind = top ? TQMX_ST_TOPK : TQMX_ST_BOTTOMK, .k = (uint32_t)k};
    }
}

/* ---- arithmetic -------------------------------------------------------------- */

static int parse_mexpr(struct mp *p, int min_prec, struct tqmx_node **out, bool *bare);

static int parse_mprim(struct mp *p, struct tqmx_node **out, bool *bare)
{
    size_t pos = p->tok.pos;
    *bare = false;
    if (p->tok.kind == QT_LPAREN) {
        enum paren k = classify_paren(p);
        if (k == P_METRICS) {
            if (++p->depth > TQMX_MAX_DEPTH) {
                return qlex_fail(&p->lx, pos, "query nested too deeply");
            }
            bool inner_bare;
            if (next(p) != 0 || parse_mexpr(p, 1, out, &inner_bare) != 0 ||
                parse_stages(p, *out) != 0) {
                return p->lx.rc;
            }
            p->depth--;
            return expect(p, QT_RPAREN, "\")\"");
        }
        if (k == P_PIPELINE) {
            *bare = true;
            return parse_query(p, out);
        }
    } else if (p->tok.kind == QT_LBRACE ||
               (p->tok.kind != QT_NUMBER && p->tok.kind != QT_DURATION && p->tok.kind != QT_SUB)) {
        *bare = true;
        return parse_query(p, out);
    }
    struct num v;
    if (parse_num_expr(p, 3, &v) != 0) { /* one operand: the operators are ours */
        return p->lx.rc;
    }
    if (v.is_dur) {
        return qlex_fail(&p->lx, pos, "durations cannot take part in metrics arithmetic");
    }
    struct tqmx_node *n = alloc(p, sizeof(*n));
    if (n == NULL) {
        return p->lx.rc;
    }
    n->kind = TQMX_N_SCALAR;
    n->v = v.v;
    n->op = v.is_int ? 'i' : 'f';
    *out = n;
    return 0;
}

static int parse_mexpr(struct mp *p, int min_prec, struct tqmx_node **out, bool *bare)
{
    if (parse_mprim(p, out, bare) != 0) {
        return p->lx.rc;
    }
    for (;;) {
        int prec = arith_prec(p->tok.kind);
        if (p->tok.kind == QT_MOD || p->tok.kind == QT_POW) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "metrics arithmetic takes +, -, * and / (not %% or ^)");
        }
        if (prec == 0 || prec < min_prec) {
            return 0;
        }
        char opc = p->tok.kind == QT_ADD   ? '+'
                   : p->tok.kind == QT_SUB ? '-'
                   : p->tok.kind == QT_MUL ? '*'
                                           : '/';
        size_t pos = p->tok.pos;
        struct tqmx_node *r;
        bool rbare;
        if (*bare) {
            return qlex_fail(&p->lx, pos,
                             "metrics arithmetic needs each metrics query in parentheses: "
                             "({...} | rate()) %c ...",
                             opc);
        }
        if (next(p) != 0 || parse_mexpr(p, prec + 1, &r, &rbare) != 0) {
            return p->lx.rc;
        }
        if (rbare) {
            return qlex_fail(&p->lx, pos,
                             "metrics arithmetic needs each metrics query in parentheses: "
                             "... %c ({...} | rate())",
                             opc);
        }
        struct tqmx_node *l = *out;
        if (l->kind == TQMX_N_SCALAR && r->kind == TQMX_N_SCALAR) {
            struct num a = {l->v, l->op == 'i', false}, b = {r->v, r->op == 'i', false};
            enum qtok k = opc == '+' ? QT_ADD : opc == '-' ? QT_SUB : opc == '*' ? QT_MUL : QT_DIV;
            if (fold(p, pos, k, &a, &b) != 0) {
                return p->lx.rc;
            }
            l->v = a.v;
            l->op = a.is_int ? 'i' : 'f';
            continue;
        }
        struct tqmx_node *n = alloc(p, sizeof(*n));
        if (n == NULL) {
            return p->lx.rc;
        }
        n->kind = TQMX_N_BINARY;
        n->op = opc;
        n->l = l;
        n->r = r;
        *out = n;
    }
}

/* ---- validation ---------------------------------------------------------------- */

static int validate(struct mp *p, const struct tqmx_node *n, bool in_math)
{
    if (n->kind == TQMX_N_BINARY) {
        if (validate(p, n->l, true) != 0) {
            return p->lx.rc;
        }
        return validate(p, n->r, true);
    }
    if (n->kind == TQMX_N_QUERY && n->q->fn == TQMX_COMPARE && (in_math || n->n_stages > 0)) {
        return qlex_fail(&p->lx, 0, "`compare()` cannot be used with second stage functions");
    }
    return 0;
}

/* ---- hints and entry points ----------------------------------------------------- */

static int parse_hints(struct mp *p)
{
    if (next(p) != 0 || expect(p, QT_LPAREN, "\"(\" after with") != 0) {
        return p->lx.rc;
    }
    for (;;) {
        if (p->tok.kind != QT_IDENT) {
            return fail_tok(p, "a hint name such as sample");
        }
        bool sample = word(&p->tok, "sample");
        bool exemplars = word(&p->tok, "exemplars");
        if (next(p) != 0 || expect(p, QT_EQ, "\"=\" after the hint name") != 0) {
            return p->lx.rc;
        }
        enum qtok k = p->tok.kind;
        bool neg = false;
        if (k == QT_SUB) {
            neg = true;
            if (next(p) != 0) {
                return p->lx.rc;
            }
            k = p->tok.kind;
        }
        if (k != QT_NUMBER && k != QT_DURATION && k != QT_STRING &&
            !(!neg && (word(&p->tok, "true") || word(&p->tok, "false")))) {
            return fail_tok(p, "a hint value");
        }
        if (sample) {
            double v = k == QT_NUMBER ? (p->tok.is_int ? (double)p->tok.i : p->tok.num) : 1;
            if (neg || (k == QT_NUMBER && !(v > 0 && v <= 1) && !p->tok.is_int)) {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "sample takes true, false or a fraction in "
                                 "(0, 1]");
            }
            p->root->e.has_sample = true;
        }
        if (exemplars) {
            if (k == QT_NUMBER && p->tok.is_int && !neg) {
                p->root->e.exemplars_hint = p->tok.i;
            } else if (word(&p->tok, "true") || word(&p->tok, "false")) {
                p->root->e.exemplars_hint = word(&p->tok, "true") ? -2 : 0;
            } else {
                return qlex_fail(&p->lx, p->tok.pos, "exemplars takes a count, true or false");
            }
        }
        if (next(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_COMMA) {
            break;
        }
        if (next(p) != 0) {
            return p->lx.rc;
        }
    }
    return expect(p, QT_RPAREN, "\",\" or \")\" in with (...)");
}

void tqmx_free(struct tqmx_expr *e)
{
    if (e == NULL) {
        return;
    }
    struct tqmx_root *r = (struct tqmx_root *)((char *)e - offsetof(struct tqmx_root, e));
    if (r->magic != TQMX_MAGIC) {
        abort(); /* not a query returned by tqmx_parse */
    }
    r->magic = 0;
    for (size_t i = 0; i < r->n_inputs; i++) {
        traceql_free(r->inputs[i]);
    }
    arena_free(r->a);
}

int tqmx_parse(const char *src, size_t len, struct tqmx_expr **out, char *err, size_t errlen)
{
    *out = NULL;
    arena *a = arena_new(4096);
    if (a == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "out of memory");
        }
        return -ENOMEM;
    }
    arena_set_limit(a, 4u << 20);
    struct mp p;
    memset(&p, 0, sizeof(p));
    qlex_init(&p.lx, QLEX_TRACEQL, src, len, a, err, errlen);
    p.root = qlex_alloc(&p.lx, sizeof(*p.root));
    if (p.root != NULL) {
        p.root->a = a;
        p.root->magic = TQMX_MAGIC;
        p.root->e.exemplars_hint = -1;
        bool bare;
        if (next(&p) == 0 && p.tok.kind == QT_EOF) {
            fail_tok(&p, "a metrics query such as {} | rate()");
        } else if (p.lx.rc == 0 && parse_mexpr(&p, 1, &p.root->e.root, &bare) == 0 &&
                   parse_stages(&p, p.root->e.root) == 0) {
            if (word(&p.tok, "with")) {
                (void)parse_hints(&p);
            }
            if (p.lx.rc == 0 && p.tok.kind != QT_EOF) {
                fail_tok(&p, "an operator, \"|\" and topk/bottomk, with (...) or the end of the "
                             "query");
            }
            if (p.lx.rc == 0 && p.root->e.n_queries == 0) {
                qlex_fail(&p.lx, 0, "not a metrics query: no metrics function such as rate()");
            }
            if (p.lx.rc == 0) {
                (void)validate(&p, p.root->e.root, false);
            }
        }
    }
    if (p.lx.rc != 0) {
        int rc = p.lx.rc;
        if (p.root != NULL) {
            tqmx_free(&p.root->e);
        } else {
            arena_free(a);
        }
        return rc;
    }
    *out = &p.root->e;
    return 0;
}
