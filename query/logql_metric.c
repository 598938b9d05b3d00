/*
 * logql_metric.c - LogQL metric expressions: range aggregations, vector
 * aggregations with grouping, vector(), label_replace, and binary operators
 * with PromQL precedence and matching modifiers (see logql_int.h).
 */
#include "query/logql_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- metric expressions ------------------------------------------------------- */

struct name_map {
    const char *name;
    int v;
};

static const struct name_map range_ops[] = {
    {"count_over_time", LOGQL_RANGE_COUNT_OVER_TIME},
    {"rate", LOGQL_RANGE_RATE},
    {"bytes_over_time", LOGQL_RANGE_BYTES_OVER_TIME},
    {"bytes_rate", LOGQL_RANGE_BYTES_RATE},
    {"absent_over_time", LOGQL_RANGE_ABSENT_OVER_TIME},
    {"rate_counter", LOGQL_RANGE_RATE_COUNTER},
    {"sum_over_time", LOGQL_RANGE_SUM_OVER_TIME},
    {"avg_over_time", LOGQL_RANGE_AVG_OVER_TIME},
    {"min_over_time", LOGQL_RANGE_MIN_OVER_TIME},
    {"max_over_time", LOGQL_RANGE_MAX_OVER_TIME},
    {"first_over_time", LOGQL_RANGE_FIRST_OVER_TIME},
    {"last_over_time", LOGQL_RANGE_LAST_OVER_TIME},
    {"stdvar_over_time", LOGQL_RANGE_STDVAR_OVER_TIME},
    {"stddev_over_time", LOGQL_RANGE_STDDEV_OVER_TIME},
    {"quantile_over_time", LOGQL_RANGE_QUANTILE_OVER_TIME},
};

static const struct name_map agg_ops[] = {
    {"sum", LOGQL_AGG_SUM},         {"avg", LOGQL_AGG_AVG},
    {"min", LOGQL_AGG_MIN},         {"max", LOGQL_AGG_MAX},
    {"count", LOGQL_AGG_COUNT},     {"stddev", LOGQL_AGG_STDDEV},
    {"stdvar", LOGQL_AGG_STDVAR},   {"topk", LOGQL_AGG_TOPK},
    {"bottomk", LOGQL_AGG_BOTTOMK}, {"approx_topk", LOGQL_AGG_APPROX_TOPK},
    {"sort", LOGQL_AGG_SORT},       {"sort_desc", LOGQL_AGG_SORT_DESC},
};

static int lookup(const struct name_map *m, size_t n, const struct qlex_tok *t)
{
    for (size_t i = 0; i < n; i++) {
        if (is_ident(t, m[i].name)) {
            return m[i].v;
        }
    }
    return -1;
}

static bool range_unwrapped(enum logql_range_op op)
{
    return op >= LOGQL_RANGE_RATE_COUNTER;
}

/* Which range aggregations take | unwrap, and which a by/without of their
 * own (Loki's RangeAggregationExpr.validate). */
static bool range_takes_unwrap(enum logql_range_op op)
{
    return range_unwrapped(op) || op == LOGQL_RANGE_RATE || op == LOGQL_RANGE_ABSENT_OVER_TIME;
}

static bool range_takes_grouping(enum logql_range_op op)
{
    switch (op) {
    case LOGQL_RANGE_AVG_OVER_TIME:
    case LOGQL_RANGE_STDDEV_OVER_TIME:
    case LOGQL_RANGE_STDVAR_OVER_TIME:
    case LOGQL_RANGE_QUANTILE_OVER_TIME:
    case LOGQL_RANGE_MAX_OVER_TIME:
    case LOGQL_RANGE_MIN_OVER_TIME:
    case LOGQL_RANGE_FIRST_OVER_TIME:
    case LOGQL_RANGE_LAST_OVER_TIME:
        return true;
    default:
        return false;
    }
}

static int parse_label_names(struct parser *p, struct logql_str **arr, size_t *n, const char *what)
{
    size_t cap = 0;
    if (expect(p, QT_LPAREN, what) != 0) {
        return p->lx.rc;
    }
    while (p->tok.kind != QT_RPAREN) {
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a label name or \")\"");
        }
        struct logql_str *s = push(p, (void **)arr, n, &cap, sizeof(**arr));
        if (s == NULL) {
            return p->lx.rc;
        }
        *s = tok_str(p);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_COMMA) {
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        } else if (p->tok.kind != QT_RPAREN) {
            return fail_expected(p, "\",\" or \")\" in the label list");
        }
    }
    return advance(p);
}

static bool at_grouping(struct parser *p)
{
    return is_ident(&p->tok, "by") || is_ident(&p->tok, "without");
}

static int parse_grouping(struct parser *p, struct logql_grouping *g)
{
    if (g->has) {
        return qlex_fail(&p->lx, p->tok.pos, "by/without may be given only once");
    }
    g->has = true;
    g->without = is_ident(&p->tok, "without");
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    return parse_label_names(p, &g->labels, &g->n_labels,
                             g->without ? "\"(\" after without" : "\"(\" after by");
}

static bool is_scalar(const struct logql_expr *e)
{
    /* along the left spine in a loop: chains are left-deep (see LOGQL_MAX_OPS) */
    while (e->kind == LOGQL_EXPR_BINARY) {
        if (!is_scalar(e->rhs)) {
            return false;
        }
        e = e->lhs;
    }
    return e->kind == LOGQL_EXPR_NUMBER;
}

static int check_vector_arg(struct parser *p, const struct logql_expr *e, const char *fn)
{
    if (e->kind == LOGQL_EXPR_LOG) {
        return qlex_fail(&p->lx, e->pos,
                         "%s expects a metric query, got a log query; wrap it in a range "
                         "aggregation such as count_over_time(... [5m])",
                         fn);
    }
    if (is_scalar(e)) {
        return qlex_fail(&p->lx, e->pos, "%s expects a vector, got a scalar", fn);
    }
    return 0;
}

static int parse_range_agg(struct parser *p, struct logql_expr *e, enum logql_range_op op)
{
    char fn[32];
    snprintf(fn, sizeof(fn), "%.*s", (int)p->tok.n, p->tok.s);
    e->kind = LOGQL_EXPR_RANGE;
    e->range_op = op;
    if (advance(p) != 0 || expect(p, QT_LPAREN, "\"(\" after the function name") != 0) {
        return p->lx.rc;
    }
    if (op == LOGQL_RANGE_QUANTILE_OVER_TIME) {
        bool neg = false;
        if (p->tok.kind == QT_SUB) {
            neg = true;
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        }
        if (p->tok.kind == QT_LBRACE || p->tok.kind == QT_LPAREN) {
            return qlex_fail(&p->lx, p->tok.pos, "parameter required for operation %s", fn);
        }
        if (p->tok.kind != QT_NUMBER) {
            return fail_expected(p, "the quantile (a number such as 0.99)");
        }
        e->param = neg ? -p->tok.num : p->tok.num;
        if (advance(p) != 0 || expect(p, QT_COMMA, "\",\" after the quantile") != 0) {
            return p->lx.rc;
        }
    }
    if (op != LOGQL_RANGE_QUANTILE_OVER_TIME && p->tok.kind == QT_NUMBER &&
        peek(p)->kind == QT_COMMA) {
        return qlex_fail(&p->lx, p->tok.pos, "parameter %.*s not supported for operation %s",
                         (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos, fn);
    }
    if (logql_parse_log_range(p, e) != 0 ||
        expect(p, QT_RPAREN, "\")\" closing the function") != 0) {
        return p->lx.rc;
    }
    bool has_unwrap;
    if (logql_check_unwrap(p, &e->log, true, NULL, &has_unwrap) != 0) {
        return p->lx.rc;
    }
    /* Loki's RangeAggregationExpr.validate, with its messages. */
    if (has_unwrap && !range_takes_unwrap(op)) {
        return qlex_fail(&p->lx, e->pos, "invalid aggregation %s with unwrap", fn);
    }
    if (!has_unwrap && range_unwrapped(op)) {
        return qlex_fail(&p->lx, e->pos, "invalid aggregation %s without unwrap", fn);
    }
    if (at_grouping(p)) {
        if (!range_takes_grouping(op)) {
            return qlex_fail(&p->lx, p->tok.pos, "grouping not allowed for %s aggregation", fn);
        }
        return parse_grouping(p, &e->grouping);
    }
    return 0;
}

static int parse_vector_agg(struct parser *p, struct logql_expr *e, enum logql_agg_op op)
{
    char fn[32];
    snprintf(fn, sizeof(fn), "%.*s", (int)p->tok.n, p->tok.s);
    bool sort = op == LOGQL_AGG_SORT || op == LOGQL_AGG_SORT_DESC;
    bool approx = op == LOGQL_AGG_APPROX_TOPK;
    e->kind = LOGQL_EXPR_VECTOR_AGG;
    e->agg_op = op;
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    if (at_grouping(p)) {
        if (sort) {
            return qlex_fail(&p->lx, p->tok.pos, "sort and sort_desc doesn't allow grouping by");
        }
        if (approx) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "grouping not allowed for approx_topk aggregation");
        }
        if (parse_grouping(p, &e->grouping) != 0) {
            return p->lx.rc;
        }
    }
    if (expect(p, QT_LPAREN, "\"(\" after the aggregation") != 0) {
        return p->lx.rc;
    }
    if (op == LOGQL_AGG_TOPK || op == LOGQL_AGG_BOTTOMK || op == LOGQL_AGG_APPROX_TOPK) {
        /* Loki's mustNewVectorAggregationExpr messages */
        if (p->tok.kind != QT_NUMBER) {
            if (p->tok.kind == QT_IDENT && peek(p)->kind == QT_COMMA) {
                return fail_expected(p, "the number of series k (e.g. topk(5, ...))");
            }
            return qlex_fail(&p->lx, p->tok.pos, "parameter required for operation %s", fn);
        }
        if (!p->tok.is_int) {
            return qlex_fail(&p->lx, p->tok.pos, "invalid parameter %s(%.*s,", fn,
                             (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos);
        }
        if (p->tok.i < 1) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "invalid parameter (must be greater than 0) %s(%.*s", fn,
                             (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos);
        }
        e->param = (double)p->tok.i;
        if (advance(p) != 0 || expect(p, QT_COMMA, "\",\" after k") != 0) {
            return p->lx.rc;
        }
    }
    if (p->tok.kind == QT_NUMBER && peek(p)->kind == QT_COMMA && !sort) {
        return qlex_fail(&p->lx, p->tok.pos, "unsupported parameter for operation %s(%.*s,", fn,
                         (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos);
    }
    if (logql_parse_expr(p, 1, &e->inner) != 0 || check_vector_arg(p, e->inner, fn) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind == QT_COMMA) {
        return qlex_fail(&p->lx, p->tok.pos, "%s takes a single argument here", fn);
    }
    if (expect(p, QT_RPAREN, "\")\" closing the aggregation") != 0) {
        return p->lx.rc;
    }
    if (at_grouping(p)) {
        if (sort) {
            return qlex_fail(&p->lx, p->tok.pos, "sort and sort_desc doesn't allow grouping by");
        }
        if (approx) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "grouping not allowed for approx_topk aggregation");
        }
        return parse_grouping(p, &e->grouping);
    }
    return 0;
}

static int parse_string_arg(struct parser *p, struct logql_str *s, const char *what)
{
    if (expect(p, QT_COMMA, "\",\"") != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind != QT_STRING) {
        return fail_expected(p, what);
    }
    *s = tok_str(p);
    return 0;
}

static int parse_label_replace(struct parser *p, struct logql_expr *e)
{
    e->kind = LOGQL_EXPR_LABEL_REPLACE;
    if (advance(p) != 0 || expect(p, QT_LPAREN, "\"(\" after label_replace") != 0) {
        return p->lx.rc;
    }
    if (logql_parse_expr(p, 1, &e->inner) != 0 ||
        check_vector_arg(p, e->inner, "label_replace") != 0) {
        return p->lx.rc;
    }
    if (parse_string_arg(p, &e->dst, "the destination label in quotes") != 0 || advance(p) != 0 ||
        parse_string_arg(p, &e->replacement, "the replacement in quotes") != 0 || advance(p) != 0 ||
        parse_string_arg(p, &e->src, "the source label in quotes") != 0 || advance(p) != 0 ||
        parse_string_arg(p, &e->regex_text, "the regex in quotes") != 0) {
        return p->lx.rc;
    }
    qlex_re *re;
    if (qlex_re_compile(&p->lx, p->tok.pos, e->regex_text.s, e->regex_text.n, true, &re) != 0) {
        return p->lx.rc;
    }
    e->regex = re;
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    return expect(p, QT_RPAREN, "\")\" closing label_replace");
}

static int parse_primary(struct parser *p, struct logql_expr **out)
{
    struct logql_expr *e = qlex_alloc(&p->lx, sizeof(*e));
    if (e == NULL) {
        return p->lx.rc;
    }
    e->pos = p->tok.pos;
    *out = e;
    if (enter(p) != 0) {
        return p->lx.rc;
    }
    int rc = 0;
    int v;
    switch (p->tok.kind) {
    case QT_NUMBER:
        e->kind = LOGQL_EXPR_NUMBER;
        e->value = p->tok.num;
        rc = advance(p);
        break;
    case QT_SUB:
    case QT_ADD: {
        bool neg = p->tok.kind == QT_SUB;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_NUMBER) {
            return fail_expected(p, "a number after the sign (unary minus applies to number "
                                    "literals only)");
        }
        e->kind = LOGQL_EXPR_NUMBER;
        e->value = neg ? -p->tok.num : p->tok.num;
        rc = advance(p);
        break;
    }
    case QT_LPAREN:
        if (advance(p) != 0 || logql_parse_expr(p, 1, out) != 0) {
            return p->lx.rc;
        }
        rc = expect(p, QT_RPAREN, "\")\"");
        break;
    case QT_LBRACE: {
        e->kind = LOGQL_EXPR_LOG;
        size_t cap = 0;
        if (logql_parse_stream_selector(p, &e->log) != 0 ||
            logql_parse_stages(p, &e->log, &cap) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_LBRACKET) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "a range such as [5m] is only allowed inside a range aggregation "
                             "such as count_over_time(... [5m]) or rate(... [5m])");
        }
        break;
    }
    case QT_IDENT:
        if ((v = lookup(range_ops, sizeof(range_ops) / sizeof(range_ops[0]), &p->tok)) >= 0) {
            rc = parse_range_agg(p, e, (enum logql_range_op)v);
        } else if ((v = lookup(agg_ops, sizeof(agg_ops) / sizeof(agg_ops[0]), &p->tok)) >= 0) {
            rc = parse_vector_agg(p, e, (enum logql_agg_op)v);
        } else if (is_ident(&p->tok, "vector")) {
            e->kind = LOGQL_EXPR_VECTOR;
            if (advance(p) != 0 || expect(p, QT_LPAREN, "\"(\" after vector") != 0) {
                return p->lx.rc;
            }
            bool neg = false;
            if (p->tok.kind == QT_SUB || p->tok.kind == QT_ADD) {
                neg = p->tok.kind == QT_SUB;
                if (advance(p) != 0) {
                    return p->lx.rc;
                }
            }
            if (p->tok.kind != QT_NUMBER) {
                return fail_expected(p, "a number inside vector()");
            }
            e->value = neg ? -p->tok.num : p->tok.num;
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            rc = expect(p, QT_RPAREN, "\")\" closing vector()");
        } else if (is_ident(&p->tok, "label_replace")) {
            rc = parse_label_replace(p, e);
        } else if (peek(p)->kind == QT_LPAREN) {
            return qlex_fail(&p->lx, p->tok.pos, "function \"%.*s\" is not supported",
                             (int)p->tok.n, p->tok.s);
        } else {
            return fail_expected(p, "a stream selector \"{...}\", a number, vector(...) or a "
                                    "function such as count_over_time or sum");
        }
        break;
    case QT_EOF:
        return fail_expected(p, "a query");
    default:
        return fail_expected(p, "a stream selector \"{...}\", a number, vector(...) or a function "
                                "such as count_over_time or sum");
    }
    if (rc == 0) {
        leave(p);
    }
    return p->lx.rc;
}

struct binop {
    enum logql_bin_op op;
    int prec;
};

static bool binop_of(const struct qlex_tok *t, struct binop *b)
{
    switch (t->kind) {
    case QT_ADD:
        *b = (struct binop){LOGQL_BIN_ADD, 4};
        return true;
    case QT_SUB:
        *b = (struct binop){LOGQL_BIN_SUB, 4};
        return true;
    case QT_MUL:
        *b = (struct binop){LOGQL_BIN_MUL, 5};
        return true;
    case QT_DIV:
        *b = (struct binop){LOGQL_BIN_DIV, 5};
        return true;
    case QT_MOD:
        *b = (struct binop){LOGQL_BIN_MOD, 5};
        return true;
    case QT_POW:
        *b = (struct binop){LOGQL_BIN_POW, 6};
        return true;
    case QT_EQEQ:
        *b = (struct binop){LOGQL_BIN_EQ, 3};
        return true;
    case QT_NEQ:
        *b = (struct binop){LOGQL_BIN_NE, 3};
        return true;
    case QT_GT:
        *b = (struct binop){LOGQL_BIN_GT, 3};
        return true;
    case QT_GE:
        *b = (struct binop){LOGQL_BIN_GE, 3};
        return true;
    case QT_LT:
        *b = (struct binop){LOGQL_BIN_LT, 3};
        return true;
    case QT_LE:
        *b = (struct binop){LOGQL_BIN_LE, 3};
        return true;
    case QT_IDENT:
        if (is_ident(t, "and")) {
            *b = (struct binop){LOGQL_BIN_AND, 2};
            return true;
        }
        if (is_ident(t, "unless")) {
            *b = (struct binop){LOGQL_BIN_UNLESS, 2};
            return true;
        }
        if (is_ident(t, "or")) {
            *b = (struct binop){LOGQL_BIN_OR, 1};
            return true;
        }
        return false;
    default:
        return false;
    }
}

static int parse_bin_modifiers(struct parser *p, struct logql_expr *b)
{
    bool cmp = b->bin_op >= LOGQL_BIN_EQ && b->bin_op <= LOGQL_BIN_LE;
    if (is_ident(&p->tok, "bool")) {
        if (!cmp) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "bool modifier can only be used on comparison "
                             "operators");
        }
        b->return_bool = true;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
    if (is_ident(&p->tok, "on") || is_ident(&p->tok, "ignoring")) {
        b->has_matching = true;
        b->on = is_ident(&p->tok, "on");
        if (advance(p) != 0 || parse_label_names(p, &b->match_labels, &b->n_match_labels,
                                                 "\"(\" and a label list") != 0) {
            return p->lx.rc;
        }
        if (is_ident(&p->tok, "group_left") || is_ident(&p->tok, "group_right")) {
            if (b->bin_op >= LOGQL_BIN_AND) {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "no grouping allowed for and, or, unless operations");
            }
            b->group_side = is_ident(&p->tok, "group_left") ? -1 : 1;
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind == QT_LPAREN &&
                parse_label_names(p, &b->include_labels, &b->n_include_labels, "\"(\"") != 0) {
                return p->lx.rc;
            }
        }
    }
    return 0;
}

static int check_operand(struct parser *p, const struct logql_expr *e)
{
    if (e->kind == LOGQL_EXPR_LOG) {
        return qlex_fail(&p->lx, e->pos,
                         "a log query cannot be an operand of a binary operator; use a metric "
                         "query such as count_over_time(... [5m])");
    }
    return 0;
}

int logql_parse_expr(struct parser *p, int min_prec, struct logql_expr **out)
{
    struct logql_expr *lhs;
    if (parse_primary(p, &lhs) != 0) {
        return p->lx.rc;
    }
    struct binop b;
    while (binop_of(&p->tok, &b) && b.prec >= min_prec) {
        struct logql_expr *e = qlex_alloc(&p->lx, sizeof(*e));
        if (e == NULL) {
            return p->lx.rc;
        }
        size_t op_pos = p->tok.pos;
        if (count_op(p, &p->n_binops, op_pos, "binary operators") != 0) {
            return p->lx.rc;
        }
        e->kind = LOGQL_EXPR_BINARY;
        e->bin_op = b.op;
        e->pos = lhs->pos;
        e->lhs = lhs;
        if (check_operand(p, lhs) != 0 || advance(p) != 0 || parse_bin_modifiers(p, e) != 0) {
            return p->lx.rc;
        }
        if (enter(p) != 0 ||
            logql_parse_expr(p, b.op == LOGQL_BIN_POW ? b.prec : b.prec + 1, &e->rhs)) {
            return p->lx.rc;
        }
        leave(p);
        if (check_operand(p, e->rhs) != 0) {
            return p->lx.rc;
        }
        bool ls = is_scalar(lhs), rs = is_scalar(e->rhs);
        bool cmp = b.op >= LOGQL_BIN_EQ && b.op <= LOGQL_BIN_LE;
        if (b.op >= LOGQL_BIN_AND && (ls || rs)) {
            static const char *const set_names[] = {"and", "unless", "or"};
            const struct logql_expr *lit = ls ? lhs : e->rhs;
            return qlex_fail(&p->lx, op_pos,
                             "unexpected literal for %s leg of logical/set binary operation (%s): "
                             "%f (set operators are not allowed with scalars)",
                             ls ? "left" : "right", set_names[b.op - LOGQL_BIN_AND],
                             lit->kind == LOGQL_EXPR_NUMBER ? lit->value : 0.0);
        }
        if (cmp && ls && rs) {
            /* Loki folds a comparison of two literals to 1 or 0 with or
             * without bool (reduceBinOp). */
            e->return_bool = true;
        }
        if (e->has_matching && (ls || rs)) {
            return qlex_fail(&p->lx, op_pos,
                             "vector matching (on/ignoring) only applies between "
                             "two vectors");
        }
        lhs = e;
    }
    *out = lhs;
    return 0;
}
