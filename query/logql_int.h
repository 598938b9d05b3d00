/*
 * logql_int.h - what the files of the LogQL parser (query/logql*.c) share;
 * nothing outside them includes it. logql.h is the module's public surface.
 *
 * THE FILES
 *   logql.c          the grammar, selectors and log expressions (selector,
 *                    stages, range, unwrap placement), the entry points
 *                    logql_parse, logql_parse_selector, logql_free
 *   logql_stages.c   pipeline stages (line filters, label filters, parsers,
 *                    formats, drop/keep, unwrap), | pattern and | json path
 *                    parsing, and the needles of a log expression
 *   logql_metric.c   metric expressions: range and vector aggregations,
 *                    label_replace, binary operators with precedence
 *   logql_match.c    what the executor runs per row: label matchers, line
 *                    filters, patterns, label filter tests
 *
 * The token plumbing below is static inline: every parser file calls it,
 * as it did inside the one file.
 */
#ifndef MIRADB_LOGQL_INT_H
#define MIRADB_LOGQL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "query/logql.h"
#include "query/qlex.h"

#define LOGQL_MAX_DEPTH 64 /* nesting of parentheses / aggregations */
/* Operators per query, of each kind (binary operators between metric
 * expressions; and/or between label filter predicates). Left-associative
 * chains such as 1+1+...+1 do not nest, so LOGQL_MAX_DEPTH does not bound
 * them; every walk over the tree (executor included) recurses at most
 * about this deep along such a chain plus LOGQL_MAX_DEPTH levels. */
#define LOGQL_MAX_OPS 1024

struct parser {
    struct qlex lx;
    struct qlex_tok tok;
    struct qlex_tok peek;
    bool has_peek;
    int depth;
    unsigned n_binops;         /* binary operators so far (LOGQL_MAX_OPS) */
    unsigned n_lfops;          /* label filter and/or so far (LOGQL_MAX_OPS) */
    bool allow_empty_selector; /* logql_parse_selector(..., allow_empty) */
};

/* The parse functions below return 0 or the parser's error (p->lx.rc, its
 * message recorded by qlex_fail); what they build lives in the arena. */

/* ---- logql.c: selectors and log expressions ---- */

/* "{" matchers "}" at the current token into log->matchers. */
int logql_parse_stream_selector(struct parser *p, struct logql_log *log);
/* Pipeline stages while they come, appended to log->stages (capacity *cap). */
int logql_parse_stages(struct parser *p, struct logql_log *log, size_t *cap);
/* Where | unwrap may appear (anywhere only when |allowed|; |fn| names the
 * function in the message); *has says whether the expression has one. */
int logql_check_unwrap(struct parser *p, const struct logql_log *log, bool allowed, const char *fn,
                       bool *has);
/* selector stages [range [offset]] stages, inside a range aggregation. */
int logql_parse_log_range(struct parser *p, struct logql_expr *e);

/* ---- logql_stages.c: stages and needles ---- */

/* Whether token kind |k| starts a pipeline stage (a line filter or "|"). */
bool logql_is_stage_start(enum qtok k);
/* One pipeline stage at the current token into *st. */
int logql_parse_stage(struct parser *p, struct logql_stage *st);
/* The needles (logql_log_needles) of one log expression. */
int logql_collect_needles(struct parser *p, struct logql_log *log);

/* ---- logql_lits.c: required substrings ---- */

/* The substages (logql_log_substrs) of one log expression. */
int logql_collect_substrs(struct parser *p, struct logql_log *log);

/* ---- logql_metric.c: metric expressions ---- */

/* Binary operators of precedence >= min_prec and their operands into *out. */
int logql_parse_expr(struct parser *p, int min_prec, struct logql_expr **out);

/* ---- token plumbing ---- */

static inline int advance(struct parser *p)
{
    if (p->has_peek) {
        p->tok = p->peek;
        p->has_peek = false;
        return p->lx.rc;
    }
    return qlex_next(&p->lx, &p->tok);
}

static inline const struct qlex_tok *peek(struct parser *p)
{
    if (!p->has_peek) {
        (void)qlex_next(&p->lx, &p->peek);
        p->has_peek = true;
    }
    return &p->peek;
}

static inline bool is_ident(const struct qlex_tok *t, const char *word)
{
    size_t l = strlen(word);
    return t->kind == QT_IDENT && t->n == l && memcmp(t->s, word, l) == 0;
}

/* "expected <what>, got <token>" at the current token. */
static inline int fail_expected(struct parser *p, const char *what)
{
    char d[96];
    return qlex_fail(&p->lx, p->tok.pos, "expected %s, got %s", what,
                     qlex_desc(&p->lx, &p->tok, d, sizeof(d)));
}

static inline int expect(struct parser *p, enum qtok k, const char *what)
{
    if (p->tok.kind != k) {
        return fail_expected(p, what);
    }
    return advance(p);
}

static inline struct logql_str tok_str(struct parser *p)
{
    struct logql_str s = {NULL, 0};
    if (p->tok.kind == QT_STRING) {
        s.s = p->tok.s;
        s.n = p->tok.n;
    } else {
        s.s = qlex_strndup(&p->lx, p->tok.s, p->tok.n);
        s.n = s.s != NULL ? p->tok.n : 0;
    }
    return s;
}

/* Appends one zeroed element to an arena array (doubling, old copy left in
 * the arena). Returns the element or NULL (error recorded). */
static inline void *push(struct parser *p, void **arr, size_t *n, size_t *cap, size_t elem)
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

#define PUSH(p, arr, n, cap) push((p), (void **)&(arr), &(n), &(cap), sizeof(*(arr)))

static inline int enter(struct parser *p)
{
    if (++p->depth > LOGQL_MAX_DEPTH) {
        return qlex_fail(&p->lx, p->tok.pos, "query nested too deeply (more than %d levels)",
                         LOGQL_MAX_DEPTH);
    }
    return 0;
}

static inline void leave(struct parser *p)
{
    p->depth--;
}

/* Counts one more operator of a kind; past LOGQL_MAX_OPS, a parse error at
 * |pos|. */
static inline int count_op(struct parser *p, unsigned *n, size_t pos, const char *what)
{
    if (++*n > LOGQL_MAX_OPS) {
        return qlex_fail(&p->lx, pos, "query too complex: more than %d %s", LOGQL_MAX_OPS, what);
    }
    return 0;
}

#endif /* MIRADB_LOGQL_INT_H */
