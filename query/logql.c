/*
 * logql.c - recursive-descent LogQL parser (see logql.h; grammar after
 * FACTS.md section C and Loki's syntax.y, with messages that name what was
 * expected).
 *
 * GRAMMAR (informal)
 *   query     := expr EOF
 *   expr      := unary (binop [bool] [on|ignoring (l,...) [group_left|group_right (l,...)]] unary)*
 *                with PromQL precedence: or < and,unless < == != > >= < <= < + - < * / % < ^
 * (right) unary     := [+|-] NUMBER | primary primary   := NUMBER | "(" expr ")" | vector "("
 * NUMBER ")" | logexpr | rangeop "(" [NUMBER ","] logrange ")" [grouping] | aggop [grouping] "("
 * [NUMBER ","] expr ")" [grouping] | label_replace "(" expr "," STR "," STR "," STR "," STR ")"
 *   logexpr   := selector stage*
 *   logrange  := "(" logrange ")" | selector stage* [range [offset]] stage*   (one range;
 *                stages after it only if none came before it)
 *   selector  := "{" name (=|!=|=~|!~) STR ("," ...)* "}"
 *   stage     := lineop STR ("or" STR)* | "|" (parser | format | drop | keep | unwrap | lfexpr)
 *   lfexpr    := lfand ("or" lfand)* ;  lfand := lfprim (("and"|","|<nothing>) lfprim)*
 *   lfprim    := "(" lfexpr ")" | name op (STR | NUMBER | DURATION | BYTES | ip "(" STR ")")
 *
 * The parser spans query/logql*.c; logql_int.h says which file does what.
 */
#include "query/logql.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/logql_int.h"

#define LOGQL_ROOT_MAGIC 0x6c6f6771u /* "logq" */
#define LOGQL_ARENA_CHUNK 8192
#define LOGQL_ARENA_LIMIT (16u << 20)

struct logql_root {
    uint32_t magic;
    arena *a;
    qlex_re *res;
    struct logql_expr e;
};

static const char EMPTY_SELECTOR_MSG[] =
    "queries require at least one regexp or equality matcher that does not have an "
    "empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but "
    "app=~\".+\" will";

/* ---- selectors and log expressions -------------------------------------------- */

static bool matcher_matches_empty(const struct logql_matcher *m)
{
    return logql_match_label(m, "", 0);
}

int logql_parse_stream_selector(struct parser *p, struct logql_log *log)
{
    size_t sel_pos = p->tok.pos, cap = 0;
    if (advance(p) != 0) { /* { */
        return p->lx.rc;
    }
    if (p->tok.kind == QT_RBRACE) {
        if (p->allow_empty_selector) {
            return advance(p);
        }
        return qlex_fail(&p->lx, sel_pos, "%s", EMPTY_SELECTOR_MSG);
    }
    for (;;) {
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a label name in the stream selector");
        }
        struct logql_matcher *m = PUSH(p, log->matchers, log->n_matchers, cap);
        if (m == NULL) {
            return p->lx.rc;
        }
        m->name = tok_str(p);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        switch (p->tok.kind) {
        case QT_EQ:
            m->op = LOGQL_MATCH_EQ;
            break;
        case QT_NEQ:
            m->op = LOGQL_MATCH_NEQ;
            break;
        case QT_RE:
            m->op = LOGQL_MATCH_RE;
            break;
        case QT_NRE:
            m->op = LOGQL_MATCH_NRE;
            break;
        default:
            return fail_expected(p, "\"=\", \"!=\", \"=~\" or \"!~\" after label name");
        }
        char what[64];
        snprintf(what, sizeof(what), "a string value in quotes after \"%.*s\"",
                 (int)(p->tok.end - p->tok.pos), p->lx.src + p->tok.pos);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_STRING) {
            return fail_expected(p, what);
        }
        m->value = tok_str(p);
        if (m->op == LOGQL_MATCH_RE || m->op == LOGQL_MATCH_NRE) {
            qlex_re *re;
            if (qlex_re_compile(&p->lx, p->tok.pos, m->value.s, m->value.n, true, &re) != 0) {
                return p->lx.rc;
            }
            m->re = re;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_RBRACE) {
            break;
        }
        if (p->tok.kind != QT_COMMA) {
            return fail_expected(p, "\",\" or \"}\" in the stream selector");
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
    bool ok = false;
    for (size_t i = 0; i < log->n_matchers; i++) {
        const struct logql_matcher *m = &log->matchers[i];
        if ((m->op == LOGQL_MATCH_EQ || m->op == LOGQL_MATCH_RE) && !matcher_matches_empty(m)) {
            ok = true;
        }
    }
    if (!ok && !p->allow_empty_selector) {
        return qlex_fail(&p->lx, sel_pos, "%s", EMPTY_SELECTOR_MSG);
    }
    return advance(p); /* } */
}

static int parse_duration_tok(struct parser *p, const char *what, int64_t *ns)
{
    if (p->tok.kind != QT_DURATION) {
        return fail_expected(p, what);
    }
    *ns = p->tok.i;
    return advance(p);
}

/* Pipeline stages while they come. */
int logql_parse_stages(struct parser *p, struct logql_log *log, size_t *cap)
{
    while (logql_is_stage_start(p->tok.kind)) {
        struct logql_stage *st = PUSH(p, log->stages, log->n_stages, *cap);
        if (st == NULL || logql_parse_stage(p, st) != 0) {
            return p->lx.rc;
        }
    }
    return 0;
}

/* Checks where | unwrap may appear: only as the last stage but label
 * filters, and only when the caller allows it. */
int logql_check_unwrap(struct parser *p, const struct logql_log *log, bool allowed, const char *fn,
                       bool *has)
{
    *has = false;
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        if (*has && st->kind != LOGQL_STAGE_LABEL_FILTER) {
            return qlex_fail(&p->lx, st->pos, "only label filters may follow | unwrap");
        }
        if (st->kind == LOGQL_STAGE_UNWRAP) {
            if (*has) {
                return qlex_fail(&p->lx, st->pos, "| unwrap may appear only once");
            }
            if (!allowed) {
                return qlex_fail(&p->lx, st->pos,
                                 fn == NULL ? "| unwrap is only allowed inside a range "
                                              "aggregation such as sum_over_time(... [5m])"
                                            : "%s does not take an unwrapped value; remove | "
                                              "unwrap",
                                 fn);
            }
            *has = true;
        }
    }
    return 0;
}

/* "[" duration "]" [offset [-]duration] at the current token. */
static int parse_range_offset(struct parser *p, struct logql_expr *e)
{
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    size_t dur_pos = p->tok.pos;
    if (parse_duration_tok(p, "a duration such as 5m in the range", &e->range_ns) != 0) {
        return p->lx.rc;
    }
    if (e->range_ns <= 0) {
        return qlex_fail(&p->lx, dur_pos, "the range must be greater than 0");
    }
    if (expect(p, QT_RBRACKET, "\"]\" closing the range") != 0) {
        return p->lx.rc;
    }
    if (is_ident(&p->tok, "offset")) {
        bool neg = false;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_SUB) { /* Loki takes a negative offset */
            neg = true;
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        }
        if (parse_duration_tok(p, "a duration such as 1h after offset", &e->offset_ns) != 0) {
            return p->lx.rc;
        }
        if (neg) {
            e->offset_ns = -e->offset_ns;
        }
    }
    return 0;
}

/* Loki's logRangeExpr: selector stages [range [offset]] stages, or
 * "(" selector stages ")" range [offset], or "(" logRangeExpr ")". *got
 * says whether a range was read (the caller wants one). */
static int log_range(struct parser *p, struct logql_expr *e, bool *got)
{
    *got = false;
    if (p->tok.kind == QT_LPAREN) {
        bool inner;
        if (enter(p) != 0 || advance(p) != 0 || log_range(p, e, &inner) != 0) {
            return p->lx.rc;
        }
        leave(p);
        if (expect(p, QT_RPAREN, "\")\"") != 0) {
            return p->lx.rc;
        }
        if (inner) {
            *got = true;
            return 0;
        }
        if (p->tok.kind != QT_LBRACKET) {
            return fail_expected(p, "a range such as [5m] after the log query");
        }
        *got = true;
        return parse_range_offset(p, e);
    }
    if (p->tok.kind != QT_LBRACE) {
        return fail_expected(p, "a log query starting with a stream selector \"{...}\"");
    }
    if (logql_parse_stream_selector(p, &e->log) != 0) {
        return p->lx.rc;
    }
    size_t cap = 0;
    if (logql_parse_stages(p, &e->log, &cap) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind != QT_LBRACKET) {
        return 0; /* "(" selector stages ")" range: the caller reads it */
    }
    size_t before = e->log.n_stages;
    *got = true;
    if (parse_range_offset(p, e) != 0) {
        return p->lx.rc;
    }
    if (logql_is_stage_start(p->tok.kind) && before > 0) {
        return qlex_fail(&p->lx, p->tok.pos,
                         "the range must come right after the stream selector or after the whole "
                         "pipeline, not in the middle");
    }
    if (logql_parse_stages(p, &e->log, &cap) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind == QT_LBRACKET) {
        return qlex_fail(&p->lx, p->tok.pos, "a log query takes only one range");
    }
    return 0;
}

int logql_parse_log_range(struct parser *p, struct logql_expr *e)
{
    bool got;
    if (log_range(p, e, &got) != 0) {
        return p->lx.rc;
    }
    if (!got) {
        return fail_expected(p, "a range such as [5m] after the log query");
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------------- */

/* Collects needles for every log expression of the tree. */
static int finish_tree(struct parser *p, struct logql_expr *e)
{
    for (; e != NULL; e = e->lhs) { /* the left spine in a loop */
        if (e->kind == LOGQL_EXPR_LOG || e->kind == LOGQL_EXPR_RANGE) {
            if (logql_collect_needles(p, &e->log) != 0 || logql_collect_substrs(p, &e->log) != 0) {
                return p->lx.rc;
            }
        }
        if (finish_tree(p, e->inner) != 0 || finish_tree(p, e->rhs) != 0) {
            return p->lx.rc;
        }
    }
    return 0;
}

enum parse_mode {
    MODE_QUERY,
    MODE_SELECTOR,
    MODE_SELECTOR_ANY,
};

static void parse_root(struct parser *p, enum parse_mode mode, struct logql_expr **out)
{
    struct logql_expr *e = NULL;
    if (advance(p) != 0) {
        return;
    }
    if (mode != MODE_QUERY) {
        if (p->tok.kind != QT_LBRACE) {
            fail_expected(p, "a stream selector \"{...}\"");
            return;
        }
        e = qlex_alloc(&p->lx, sizeof(*e));
        if (e == NULL || logql_parse_stream_selector(p, &e->log) != 0) {
            return;
        }
        e->kind = LOGQL_EXPR_LOG;
        if (p->tok.kind != QT_EOF) {
            fail_expected(p, "the end of the stream selector");
            return;
        }
        *out = e;
        return;
    }
    if (logql_parse_expr(p, 1, &e) != 0) {
        return;
    }
    if (p->tok.kind != QT_EOF) {
        char d[96];
        const char *what = "an operator or the end of the query";
        if (e->kind == LOGQL_EXPR_LOG) {
            what = "a pipeline stage (|=, !=, |~, !~, |>, !>, or \"|\" and a parser or label "
                   "filter) or the end of the query";
        }
        qlex_fail(&p->lx, p->tok.pos, "expected %s, got %s", what,
                  qlex_desc(&p->lx, &p->tok, d, sizeof(d)));
        return;
    }
    bool has;
    if (e->kind == LOGQL_EXPR_LOG && logql_check_unwrap(p, &e->log, false, NULL, &has) != 0) {
        return;
    }
    if (finish_tree(p, e) != 0) {
        return;
    }
    *out = e;
}

static int parse_with(const char *src, size_t len, enum parse_mode mode, struct logql_expr **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    arena *a = arena_new(LOGQL_ARENA_CHUNK);
    if (a == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "out of memory");
        }
        return -ENOMEM;
    }
    arena_set_limit(a, LOGQL_ARENA_LIMIT);
    struct parser p;
    memset(&p, 0, sizeof(p));
    p.allow_empty_selector = mode == MODE_SELECTOR_ANY;
    qlex_init(&p.lx, QLEX_LOGQL, src, len, a, err, errlen);
    struct logql_root *r = qlex_alloc(&p.lx, sizeof(*r));
    struct logql_expr *e = NULL;
    if (r != NULL) {
        parse_root(&p, mode, &e);
    }
    if (p.lx.rc != 0 || e == NULL) {
        int rc = p.lx.rc != 0 ? p.lx.rc : -EINVAL;
        qlex_re_free_all(p.lx.res);
        arena_free(a);
        return rc;
    }
    r->magic = LOGQL_ROOT_MAGIC;
    r->a = a;
    r->res = p.lx.res;
    r->e = *e;
    *out = &r->e;
    return 0;
}

int logql_parse(const char *src, size_t len, struct logql_expr **out, char *err, size_t errlen)
{
    return parse_with(src, len, MODE_QUERY, out, err, errlen);
}

int logql_parse_selector(const char *src, size_t len, bool allow_empty, struct logql_expr **out,
                         char *err, size_t errlen)
{
    return parse_with(src, len, allow_empty ? MODE_SELECTOR_ANY : MODE_SELECTOR, out, err, errlen);
}

void logql_free(struct logql_expr *root)
{
    if (root == NULL) {
        return;
    }
    struct logql_root *r = (struct logql_root *)((char *)root - offsetof(struct logql_root, e));
    if (r->magic != LOGQL_ROOT_MAGIC) {
        abort(); /* not a root returned by logql_parse */
    }
    r->magic = 0;
    qlex_re_free_all(r->res);
    arena_free(r->a);
}

bool logql_is_metric(const struct logql_expr *e)
{
    return e->kind != LOGQL_EXPR_LOG;
}
