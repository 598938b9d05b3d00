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
 */
#include "query/logql.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOGQL_ROOT_MAGIC 0x6c6f6771u /* "logq" */
#define LOGQL_MAX_DEPTH 64           /* nesting of parentheses / aggregations */
/* Operators per query, of each kind (binary operators between metric
 * expressions; and/or between label filter predicates). Left-associative
 * chains such as 1+1+...+1 do not nest, so LOGQL_MAX_DEPTH does not bound
 * them; every walk over the tree (executor included) recurses at most
 * about this deep along such a chain plus LOGQL_MAX_DEPTH levels. */
#define LOGQL_MAX_OPS 1024
#define LOGQL_ARENA_CHUNK 8192
#define LOGQL_ARENA_LIMIT (16u << 20)

struct logql_root {
    uint32_t magic;
    arena *a;
    qlex_re *res;
    struct logql_expr e;
};

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

static const char EMPTY_SELECTOR_MSG[] =
    "queries require at least one regexp or equality matcher that does not have an "
    "empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but "
    "app=~\".+\" will";

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

static bool is_ident(const struct qlex_tok *t, const char *word)
{
    size_t l = strlen(word);
    return t->kind == QT_IDENT && t->n == l && memcmp(t->s, word, l) == 0;
}

/* "expected <what>, got <token>" at the current token. */
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

static struct logql_str tok_str(struct parser *p)
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

#define PUSH(p, arr, n, cap) push((p), (void **)&(arr), &(n), &(cap), sizeof(*(arr)))

static int enter(struct parser *p)
{
    if (++p->depth > LOGQL_MAX_DEPTH) {
        return qlex_fail(&p->lx, p->tok.pos, "query nested too deeply (more than %d levels)",
                         LOGQL_MAX_DEPTH);
    }
    return 0;
}

static void leave(struct parser *p)
{
    p->depth--;
}

/* Counts one more operator of a kind; past LOGQL_MAX_OPS, a parse error at
 * |pos|. */
static int count_op(struct parser *p, unsigned *n, size_t pos, const char *what)
{
    if (++*n > LOGQL_MAX_OPS) {
        return qlex_fail(&p->lx, pos, "query too complex: more than %d %s", LOGQL_MAX_OPS, what);
    }
    return 0;
}

/* ---- patterns (| pattern, |>) ------------------------------------------- */

static bool pat_name_ok(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) {
            return false;
        }
    }
    return true;
}

/* Splits "<a> x <_> y" into parts. stage: `| pattern` needs a named
 * capture; otherwise (|> and !>) only <_> is allowed. */
static int parse_pattern(struct parser *p, size_t pos, struct logql_str text, bool stage,
                         struct logql_pattern *out)
{
    const char *s = text.s;
    size_t n = text.n, cap = 0, lit0 = 0, named = 0;
    struct logql_pattern_part *parts = NULL;
    size_t n_parts = 0;
    bool last_capture = false;
    size_t i = 0;
    while (i < n) {
        if (s[i] == '<') {
            size_t j = i + 1;
            while (j < n && s[j] != '>' && s[j] != '<') {
                j++;
            }
            if (j < n && s[j] == '>' && pat_name_ok(s + i + 1, j - i - 1)) {
                if (last_capture && lit0 == i) {
                    return qlex_fail(&p->lx, pos,
                                     "invalid pattern \"%.*s\": consecutive captures are not "
                                     "allowed (put literal text between them)",
                                     (int)(n > 60 ? 60 : n), s);
                }
                struct logql_pattern_part *pt = PUSH(p, parts, n_parts, cap);
                if (pt == NULL) {
                    return p->lx.rc;
                }
                pt->lit.s = qlex_strndup(&p->lx, s + lit0, i - lit0);
                pt->lit.n = i - lit0;
                pt->capture.s = qlex_strndup(&p->lx, s + i + 1, j - i - 1);
                pt->capture.n = j - i - 1;
                pt->named = !(j - i - 1 == 1 && s[i + 1] == '_');
                if (pt->named && !stage) {
                    return qlex_fail(&p->lx, pos,
                                     "named captures are not allowed in a line filter pattern; "
                                     "use <_>");
                }
                if (pt->named) {
                    for (size_t k = 0; k + 1 < n_parts; k++) {
                        if (parts[k].named && parts[k].capture.n == pt->capture.n &&
                            memcmp(parts[k].capture.s, pt->capture.s, pt->capture.n) == 0) {
                            return qlex_fail(&p->lx, pos,
                                             "invalid pattern: duplicate capture name \"%.*s\"",
                                             (int)pt->capture.n, pt->capture.s);
                        }
                    }
                    named++;
                }
                last_capture = true;
                i = j + 1;
                lit0 = i;
                continue;
            }
        }
        i++;
    }
    if (lit0 < n || n_parts == 0) {
        struct logql_pattern_part *pt = PUSH(p, parts, n_parts, cap);
        if (pt == NULL) {
            return p->lx.rc;
        }
        pt->lit.s = qlex_strndup(&p->lx, s + lit0, n - lit0);
        pt->lit.n = n - lit0;
    }
    if (p->lx.rc != 0) {
        return p->lx.rc;
    }
    if (stage && named == 0) {
        return qlex_fail(&p->lx, pos,
                         "invalid pattern: at least one named capture such as <name> is required");
    }
    out->parts = parts;
    out->n_parts = n_parts;
    return 0;
}

/* Loki's pattern.Matcher.Test: literal runs are found left to right (first
 * occurrence); a run that follows a capture must not start right where the
 * capture starts (captures are never empty); a pattern ending in a capture
 * needs text left over, one ending in a literal needs none. An empty line
 * matches only an empty pattern. The first run is searched, not anchored. */
bool logql_pattern_match(const struct logql_pattern *pt, const char *s, size_t n)
{
    bool empty_pattern = pt->n_parts == 0 || (pt->n_parts == 1 && pt->parts[0].lit.n == 0 &&
                                              pt->parts[0].capture.s == NULL);
    if (n == 0 || empty_pattern) {
        return n == 0 && empty_pattern;
    }
    size_t off = 0, elem = 0;
    for (size_t k = 0; k < pt->n_parts; k++) {
        const struct logql_pattern_part *part = &pt->parts[k];
        if (part->lit.n > 0) {
            const char *hit = memmem(s + off, n - off, part->lit.s, part->lit.n);
            if (hit == NULL) {
                return false;
            }
            size_t j = (size_t)(hit - (s + off));
            if (elem != 0 && j == 0) {
                return false;
            }
            off += j + part->lit.n;
            elem++;
        }
        if (part->capture.s != NULL) {
            elem++;
        }
    }
    bool ends_with_capture = pt->parts[pt->n_parts - 1].capture.s != NULL;
    return ends_with_capture == (off != n);
}

/* ---- json paths ----------------------------------------------------------- */

static int parse_json_path(struct parser *p, size_t pos, struct logql_param *prm)
{
    const char *s = prm->value.s;
    size_t n = prm->value.n, i = 0, cap = 0;
    struct logql_json_step *steps = NULL;
    size_t ns = 0;
    const char *why = NULL;
    while (i < n) {
        struct logql_json_step *st;
        if (s[i] == '[') {
            i++;
            st = PUSH(p, steps, ns, cap);
            if (st == NULL) {
                return p->lx.rc;
            }
            if (i < n && s[i] == '"') {
                size_t j = ++i;
                char *k = qlex_alloc(&p->lx, n - i + 1);
                if (k == NULL) {
                    return p->lx.rc;
                }
                size_t o = 0;
                while (j < n && s[j] != '"') {
                    if (s[j] == '\\' && j + 1 < n) {
                        j++;
                    }
                    k[o++] = s[j++];
                }
                if (j >= n) {
                    why = "unterminated string in brackets";
                    break;
                }
                st->key.s = k;
                st->key.n = o;
                i = j + 1;
            } else {
                size_t d0 = i;
                int64_t v = 0;
                while (i < n && s[i] >= '0' && s[i] <= '9') {
                    if (v < 100000000) {
                        v = v * 10 + (s[i] - '0');
                    }
                    i++;
                }
                if (i == d0) {
                    why = "expected an index or a \"key\" in brackets";
                    break;
                }
                st->index = v;
            }
            if (i >= n || s[i] != ']') {
                why = "missing ]";
                break;
            }
            i++;
            continue;
        }
        if (s[i] == '.') {
            if (ns == 0) {
                why = "path starts with \".\"";
                break;
            }
            i++;
        } else if (ns != 0) {
            why = "expected \".\" or \"[\" between path elements";
            break;
        }
        size_t k0 = i;
        while (i < n && s[i] != '.' && s[i] != '[' && s[i] != ']' && s[i] != ' ') {
            i++;
        }
        if (i == k0) {
            why = "empty key";
            break;
        }
        st = PUSH(p, steps, ns, cap);
        if (st == NULL) {
            return p->lx.rc;
        }
        st->key.s = qlex_strndup(&p->lx, s + k0, i - k0);
        st->key.n = i - k0;
    }
    if (why == NULL && ns == 0) {
        why = "empty path";
    }
    if (why != NULL) {
        return qlex_fail(&p->lx, pos, "invalid json path \"%.*s\": %s", (int)(n > 60 ? 60 : n), s,
                         why);
    }
    prm->path = steps;
    prm->n_path = ns;
    return p->lx.rc;
}

/* ---- stages ----------------------------------------------------------------- */

static bool is_line_filter_tok(enum qtok k)
{
    return k == QT_PIPE_EQ || k == QT_NEQ || k == QT_PIPE_RE || k == QT_NRE || k == QT_PIPE_GT ||
           k == QT_BANG_GT;
}

static bool is_stage_start(enum qtok k)
{
    return k == QT_PIPE || is_line_filter_tok(k);
}

static int parse_line_filter(struct parser *p, struct logql_stage *st)
{
    const char *opname = "|=";
    switch (p->tok.kind) {
    case QT_PIPE_EQ:
        st->filter_op = LOGQL_FILTER_CONTAINS;
        break;
    case QT_NEQ:
        st->filter_op = LOGQL_FILTER_NOT_CONTAINS;
        opname = "!=";
        break;
    case QT_PIPE_RE:
        st->filter_op = LOGQL_FILTER_RE;
        opname = "|~";
        break;
    case QT_NRE:
        st->filter_op = LOGQL_FILTER_NOT_RE;
        opname = "!~";
        break;
    case QT_PIPE_GT:
        st->filter_op = LOGQL_FILTER_PATTERN;
        opname = "|>";
        break;
    default:
        st->filter_op = LOGQL_FILTER_NOT_PATTERN;
        opname = "!>";
        break;
    }
    st->kind = LOGQL_STAGE_LINE_FILTER;
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    size_t cap = 0;
    for (;;) {
        if (p->tok.kind != QT_STRING) {
            char what[64];
            snprintf(what, sizeof(what), "a string in quotes after \"%s\"", opname);
            if (is_ident(&p->tok, "ip")) {
                return qlex_fail(&p->lx, p->tok.pos, "ip() line filters are not supported");
            }
            return fail_expected(p, what);
        }
        struct logql_filter_alt *alt = PUSH(p, st->alts, st->n_alts, cap);
        if (alt == NULL) {
            return p->lx.rc;
        }
        alt->value = tok_str(p);
        if (st->filter_op == LOGQL_FILTER_RE || st->filter_op == LOGQL_FILTER_NOT_RE) {
            qlex_re *re;
            if (qlex_re_compile(&p->lx, p->tok.pos, alt->value.s, alt->value.n, false, &re) != 0) {
                return p->lx.rc;
            }
            alt->re = re;
        } else if (st->filter_op == LOGQL_FILTER_PATTERN ||
                   st->filter_op == LOGQL_FILTER_NOT_PATTERN) {
            if (parse_pattern(p, p->tok.pos, alt->value, false, &alt->pattern) != 0) {
                return p->lx.rc;
            }
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (!is_ident(&p->tok, "or")) {
            return 0;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
}

static bool is_lf_op(enum qtok k)
{
    return k == QT_EQ || k == QT_EQEQ || k == QT_NEQ || k == QT_RE || k == QT_NRE || k == QT_GT ||
           k == QT_GE || k == QT_LT || k == QT_LE;
}

static int parse_lf_or(struct parser *p, struct logql_lf **out);

static int parse_lf_prim(struct parser *p, struct logql_lf **out)
{
    if (p->tok.kind == QT_LPAREN) {
        if (enter(p) != 0 || advance(p) != 0 || parse_lf_or(p, out) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return expect(p, QT_RPAREN, "\")\" closing the label filter group");
    }
    if (p->tok.kind != QT_IDENT) {
        return fail_expected(p, "a label name in a label filter");
    }
    struct logql_lf *lf = qlex_alloc(&p->lx, sizeof(*lf));
    if (lf == NULL) {
        return p->lx.rc;
    }
    lf->m.name = tok_str(p);
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    enum qtok op = p->tok.kind;
    size_t op_pos = p->tok.pos;
    if (!is_lf_op(op)) {
        return fail_expected(p, "a comparison (=, !=, =~, !~, ==, >, >=, <, <=) after the label "
                                "name");
    }
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    switch (op) {
    case QT_EQ:
    case QT_EQEQ:
        lf->cmp = LOGQL_CMP_EQ;
        break;
    case QT_NEQ:
        lf->cmp = LOGQL_CMP_NE;
        break;
    case QT_GT:
        lf->cmp = LOGQL_CMP_GT;
        break;
    case QT_GE:
        lf->cmp = LOGQL_CMP_GE;
        break;
    case QT_LT:
        lf->cmp = LOGQL_CMP_LT;
        break;
    default:
        lf->cmp = LOGQL_CMP_LE;
        break;
    }
    bool neg = false;
    if (p->tok.kind == QT_SUB || p->tok.kind == QT_ADD) {
        neg = p->tok.kind == QT_SUB;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_NUMBER && p->tok.kind != QT_DURATION && p->tok.kind != QT_BYTES) {
            return fail_expected(p, "a number after the sign");
        }
    }
    switch (p->tok.kind) {
    case QT_STRING:
        if (op == QT_RE || op == QT_NRE) {
            lf->m.op = op == QT_RE ? LOGQL_MATCH_RE : LOGQL_MATCH_NRE;
        } else if (op == QT_EQ || op == QT_EQEQ) {
            lf->m.op = LOGQL_MATCH_EQ;
        } else if (op == QT_NEQ) {
            lf->m.op = LOGQL_MATCH_NEQ;
        } else {
            return qlex_fail(&p->lx, op_pos,
                             "a string label filter supports =, !=, =~ and !~; compare with a "
                             "number, duration or bytes value for >, >=, < or <=");
        }
        lf->kind = LOGQL_LF_STRING;
        lf->m.value = tok_str(p);
        if (op == QT_RE || op == QT_NRE) {
            qlex_re *re;
            if (qlex_re_compile(&p->lx, p->tok.pos, lf->m.value.s, lf->m.value.n, true, &re) != 0) {
                return p->lx.rc;
            }
            lf->m.re = re;
        }
        break;
    case QT_NUMBER:
    case QT_DURATION:
    case QT_BYTES:
        if (op == QT_RE || op == QT_NRE) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "expected a regular expression in quotes after \"%s\"",
                             op == QT_RE ? "=~" : "!~");
        }
        if (p->tok.kind == QT_DURATION) {
            lf->kind = LOGQL_LF_DURATION;
            lf->dur_ns = neg ? -p->tok.i : p->tok.i;
        } else {
            lf->kind = p->tok.kind == QT_NUMBER ? LOGQL_LF_NUMBER : LOGQL_LF_BYTES;
            lf->num = neg ? -p->tok.num : p->tok.num;
        }
        break;
    case QT_IDENT:
        if (is_ident(&p->tok, "ip") && peek(p)->kind == QT_LPAREN) {
            if (op != QT_EQ && op != QT_EQEQ && op != QT_NEQ) {
                return qlex_fail(&p->lx, op_pos, "ip() label filters support only = and !=");
            }
            if (advance(p) != 0 || advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind != QT_STRING) {
                return fail_expected(p, "an address or range in quotes inside ip()");
            }
            lf->kind = LOGQL_LF_IP;
            lf->ip = tok_str(p);
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind != QT_RPAREN) {
                return fail_expected(p, "\")\" after the ip() argument");
            }
            break;
        }
        /* fall through */
    default:
        return fail_expected(p, "a value (\"string\", number, duration such as 10s, bytes such as "
                                "20MB, or ip(\"...\")) in the label filter");
    }
    *out = lf;
    return advance(p);
}

/* An identifier at the current token that starts another predicate
 * (`| a="1" b="2"`): a name followed by a comparison. */
static bool lf_juxtaposed(struct parser *p)
{
    if (p->tok.kind == QT_IDENT && !is_ident(&p->tok, "or") && !is_ident(&p->tok, "and")) {
        return is_lf_op(peek(p)->kind);
    }
    return false;
}

static int parse_lf_and(struct parser *p, struct logql_lf **out)
{
    struct logql_lf *left;
    if (parse_lf_prim(p, &left) != 0) {
        return p->lx.rc;
    }
    for (;;) {
        size_t op_pos = p->tok.pos;
        if (is_ident(&p->tok, "and") || p->tok.kind == QT_COMMA) {
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        } else if (!lf_juxtaposed(p)) {
            break;
        }
        if (count_op(p, &p->n_lfops, op_pos, "label filter operators (and, or)") != 0) {
            return p->lx.rc;
        }
        struct logql_lf *right, *n = qlex_alloc(&p->lx, sizeof(*n));
        if (n == NULL || parse_lf_prim(p, &right) != 0) {
            return p->lx.rc;
        }
        n->kind = LOGQL_LF_AND;
        n->left = left;
        n->right = right;
        left = n;
    }
    *out = left;
    return 0;
}

static int parse_lf_or(struct parser *p, struct logql_lf **out)
{
    struct logql_lf *left;
    if (parse_lf_and(p, &left) != 0) {
        return p->lx.rc;
    }
    while (is_ident(&p->tok, "or")) {
        if (count_op(p, &p->n_lfops, p->tok.pos, "label filter operators (and, or)") != 0 ||
            advance(p) != 0) {
            return p->lx.rc;
        }
        struct logql_lf *right, *n = qlex_alloc(&p->lx, sizeof(*n));
        if (n == NULL || parse_lf_and(p, &right) != 0) {
            return p->lx.rc;
        }
        n->kind = LOGQL_LF_OR;
        n->left = left;
        n->right = right;
        left = n;
    }
    *out = left;
    return 0;
}

/* | json a="path", b  /  | logfmt a, b="key" */
static int parse_extract_params(struct parser *p, struct logql_stage *st, bool json)
{
    size_t cap = 0;
    while (p->tok.kind == QT_IDENT) {
        struct logql_param *prm = PUSH(p, st->params, st->n_params, cap);
        if (prm == NULL) {
            return p->lx.rc;
        }
        prm->name = tok_str(p);
        size_t vpos = p->tok.pos;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_EQ) {
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind != QT_STRING) {
                return fail_expected(p, json ? "a json path in quotes such as \"a.b[0]\""
                                             : "a logfmt key in quotes");
            }
            prm->value = tok_str(p);
            vpos = p->tok.pos;
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        } else {
            prm->value = prm->name;
        }
        if (json && parse_json_path(p, vpos, prm) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_COMMA) {
            break;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a label name after \",\"");
        }
    }
    return 0;
}

/* | drop a, b="v"  /  | keep a, b=~"re" */
static int parse_label_list(struct parser *p, struct logql_stage *st, const char *stage)
{
    size_t cap = 0;
    for (;;) {
        if (p->tok.kind != QT_IDENT) {
            char what[64];
            snprintf(what, sizeof(what), "a label name after \"%s\"",
                     st->n_labels == 0 ? stage : ",");
            return fail_expected(p, what);
        }
        struct logql_matcher *m = PUSH(p, st->labels, st->n_labels, cap);
        if (m == NULL) {
            return p->lx.rc;
        }
        m->name = tok_str(p);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        enum qtok op = p->tok.kind;
        if (op == QT_EQ || op == QT_NEQ || op == QT_RE || op == QT_NRE) {
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind != QT_STRING) {
                return fail_expected(p, "a string value in quotes");
            }
            m->op = op == QT_EQ    ? LOGQL_MATCH_EQ
                    : op == QT_NEQ ? LOGQL_MATCH_NEQ
                    : op == QT_RE  ? LOGQL_MATCH_RE
                                   : LOGQL_MATCH_NRE;
            m->value = tok_str(p);
            if (op == QT_RE || op == QT_NRE) {
                qlex_re *re;
                if (qlex_re_compile(&p->lx, p->tok.pos, m->value.s, m->value.n, true, &re) != 0) {
                    return p->lx.rc;
                }
                m->re = re;
            }
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        }
        if (p->tok.kind != QT_COMMA) {
            return 0;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
}

static int parse_label_format(struct parser *p, struct logql_stage *st)
{
    size_t cap = 0;
    for (;;) {
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a label name (dst=src or dst=\"{{.template}}\")");
        }
        struct logql_param *prm = PUSH(p, st->params, st->n_params, cap);
        if (prm == NULL) {
            return p->lx.rc;
        }
        prm->name = tok_str(p);
        for (size_t k = 0; k + 1 < st->n_params; k++) {
            if (st->params[k].name.n == prm->name.n &&
                memcmp(st->params[k].name.s, prm->name.s, prm->name.n) == 0) {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "label_format sets label \"%.*s\" more than once",
                                 (int)prm->name.n, prm->name.s);
            }
        }
        if (advance(p) != 0 || expect(p, QT_EQ, "\"=\" after the label name") != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_STRING) {
            prm->is_template = true;
        } else if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a source label name or a template in quotes");
        }
        prm->value = tok_str(p);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_COMMA) {
            return 0;
        }
        if (advance(p) != 0) {
            return p->lx.rc;
        }
    }
}

static int parse_stage(struct parser *p, struct logql_stage *st)
{
    st->pos = p->tok.pos;
    if (is_line_filter_tok(p->tok.kind)) {
        return parse_line_filter(p, st);
    }
    if (advance(p) != 0) { /* the | */
        return p->lx.rc;
    }
    const struct qlex_tok *t = &p->tok;
    bool kw = t->kind == QT_IDENT && !is_lf_op(peek(p)->kind);
    if (kw && is_ident(t, "json")) {
        st->kind = LOGQL_STAGE_JSON;
        return advance(p) != 0 ? p->lx.rc : parse_extract_params(p, st, true);
    }
    if (kw && is_ident(t, "logfmt")) {
        st->kind = LOGQL_STAGE_LOGFMT;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        while (p->tok.kind == QT_FLAG) {
            if (p->tok.n == 6 && memcmp(p->tok.s, "strict", 6) == 0) {
                st->logfmt_strict = true;
            } else if (p->tok.n == 10 && memcmp(p->tok.s, "keep-empty", 10) == 0) {
                st->logfmt_keep_empty = true;
            } else {
                return qlex_fail(
                    &p->lx, p->tok.pos,
                    "unknown logfmt flag \"--%.*s\": expected --strict or --keep-empty",
                    (int)p->tok.n, p->tok.s);
            }
            if (advance(p) != 0) {
                return p->lx.rc;
            }
        }
        return parse_extract_params(p, st, false);
    }
    if (kw && (is_ident(t, "regexp") || is_ident(t, "pattern") || is_ident(t, "line_format"))) {
        st->kind = is_ident(t, "regexp")    ? LOGQL_STAGE_REGEXP
                   : is_ident(t, "pattern") ? LOGQL_STAGE_PATTERN
                                            : LOGQL_STAGE_LINE_FORMAT;
        char what[64];
        snprintf(what, sizeof(what), "a string in quotes after \"%.*s\"", (int)t->n, t->s);
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind != QT_STRING) {
            return fail_expected(p, what);
        }
        st->text = tok_str(p);
        if (st->kind == LOGQL_STAGE_REGEXP) {
            qlex_re *re;
            if (qlex_re_compile(&p->lx, p->tok.pos, st->text.s, st->text.n, false, &re) != 0) {
                return p->lx.rc;
            }
            if (qlex_re_named_groups(re) == 0) {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "| regexp needs at least one named capture such as "
                                 "(?P<name>...)");
            }
            st->re = re;
        } else if (st->kind == LOGQL_STAGE_PATTERN) {
            if (parse_pattern(p, p->tok.pos, st->text, true, &st->pattern) != 0) {
                return p->lx.rc;
            }
        }
        return advance(p);
    }
    if (kw && (is_ident(t, "unpack") || is_ident(t, "decolorize"))) {
        st->kind = is_ident(t, "unpack") ? LOGQL_STAGE_UNPACK : LOGQL_STAGE_DECOLORIZE;
        return advance(p);
    }
    if (kw && is_ident(t, "label_format")) {
        st->kind = LOGQL_STAGE_LABEL_FORMAT;
        return advance(p) != 0 ? p->lx.rc : parse_label_format(p, st);
    }
    if (kw && (is_ident(t, "drop") || is_ident(t, "keep"))) {
        bool drop = is_ident(t, "drop");
        st->kind = drop ? LOGQL_STAGE_DROP : LOGQL_STAGE_KEEP;
        return advance(p) != 0 ? p->lx.rc : parse_label_list(p, st, drop ? "drop" : "keep");
    }
    if (kw && is_ident(t, "unwrap")) {
        st->kind = LOGQL_STAGE_UNWRAP;
        if (advance(p) != 0) {
            return p->lx.rc;
        }
        if (p->tok.kind == QT_IDENT && peek(p)->kind == QT_LPAREN) {
            if (is_ident(&p->tok, "bytes")) {
                st->unwrap_conv = LOGQL_CONV_BYTES;
            } else if (is_ident(&p->tok, "duration")) {
                st->unwrap_conv = LOGQL_CONV_DURATION;
            } else if (is_ident(&p->tok, "duration_seconds")) {
                st->unwrap_conv = LOGQL_CONV_DURATION_SECONDS;
            } else {
                return qlex_fail(&p->lx, p->tok.pos,
                                 "unknown unwrap conversion \"%.*s\": expected bytes, duration "
                                 "or duration_seconds",
                                 (int)p->tok.n, p->tok.s);
            }
            if (advance(p) != 0 || advance(p) != 0) {
                return p->lx.rc;
            }
            if (p->tok.kind != QT_IDENT) {
                return fail_expected(p, "a label name to unwrap");
            }
            st->unwrap_label = tok_str(p);
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            return expect(p, QT_RPAREN, "\")\" after the unwrapped label");
        }
        if (p->tok.kind != QT_IDENT) {
            return fail_expected(p, "a label name to unwrap");
        }
        st->unwrap_label = tok_str(p);
        return advance(p);
    }
    if (t->kind == QT_IDENT || t->kind == QT_LPAREN) {
        st->kind = LOGQL_STAGE_LABEL_FILTER;
        return parse_lf_or(p, &st->lf);
    }
    return fail_expected(p, "a parser (json, logfmt, regexp, pattern, unpack), a format stage "
                            "(line_format, label_format), drop, keep, unwrap or a label filter "
                            "after \"|\"");
}

/* ---- needles ------------------------------------------------------------------ */

static bool tok_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Adds the tokens of s that are bounded inside s (or by a subject edge when
 * left_edge/right_edge say the text is anchored there). */
static int add_needles(struct parser *p, struct logql_log *log, size_t *cap, const char *s,
                       size_t n, bool left_edge, bool right_edge)
{
    size_t i = 0;
    while (i < n) {
        if (!tok_byte((unsigned char)s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && tok_byte((unsigned char)s[j])) {
            j++;
        }
        bool bounded = (i > 0 || left_edge) && (j < n || right_edge);
        if (bounded) {
            bool dup = false;
            for (size_t k = 0; k < log->n_needles; k++) {
                if (log->needles[k].n == j - i &&
                    strncasecmp(log->needles[k].s, s + i, j - i) == 0) {
                    dup = true;
                }
            }
            if (!dup) {
                struct logql_str *nd = PUSH(p, log->needles, log->n_needles, *cap);
                char *t = nd != NULL ? qlex_strndup(&p->lx, s + i, j - i) : NULL;
                if (t == NULL) {
                    return p->lx.rc;
                }
                for (size_t k = 0; k < j - i; k++) {
                    if (t[k] >= 'A' && t[k] <= 'Z') {
                        t[k] = (char)(t[k] - 'A' + 'a');
                    }
                }
                nd->s = t;
                nd->n = j - i;
            }
        }
        i = j;
    }
    return 0;
}

static int collect_needles(struct parser *p, struct logql_log *log)
{
    size_t cap = 0;
    for (size_t k = 0; k < log->n_stages; k++) {
        const struct logql_stage *st = &log->stages[k];
        if (st->kind == LOGQL_STAGE_LINE_FORMAT || st->kind == LOGQL_STAGE_DECOLORIZE) {
            break; /* later filters see a rewritten line */
        }
        if (st->kind != LOGQL_STAGE_LINE_FILTER || st->n_alts != 1) {
            continue;
        }
        const struct logql_filter_alt *a = &st->alts[0];
        if (st->filter_op == LOGQL_FILTER_CONTAINS) {
            if (add_needles(p, log, &cap, a->value.s, a->value.n, false, false) != 0) {
                return p->lx.rc;
            }
        } else if (st->filter_op == LOGQL_FILTER_PATTERN) {
            const struct logql_pattern *pt = &a->pattern;
            for (size_t i = 0; i < pt->n_parts; i++) {
                const struct logql_pattern_part *part = &pt->parts[i];
                /* the first run is searched, not anchored; a final run ends the line */
                bool last_lit = i == pt->n_parts - 1 && part->capture.s == NULL;
                if (add_needles(p, log, &cap, part->lit.s, part->lit.n, false, last_lit) != 0) {
                    return p->lx.rc;
                }
            }
        }
    }
    return 0;
}

const struct logql_str *logql_log_needles(const struct logql_log *log, size_t *n)
{
    *n = log->n_needles;
    return log->needles;
}

/* ---- selectors and log expressions -------------------------------------------- */

static bool matcher_matches_empty(const struct logql_matcher *m)
{
    return logql_match_label(m, "", 0);
}

static int parse_selector(struct parser *p, struct logql_log *log)
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
static int parse_stages(struct parser *p, struct logql_log *log, size_t *cap)
{
    while (is_stage_start(p->tok.kind)) {
        struct logql_stage *st = PUSH(p, log->stages, log->n_stages, *cap);
        if (st == NULL || parse_stage(p, st) != 0) {
            return p->lx.rc;
        }
    }
    return 0;
}

/* Checks where | unwrap may appear: only as the last stage but label
 * filters, and only when the caller allows it. */
static int check_unwrap(struct parser *p, const struct logql_log *log, bool allowed, const char *fn,
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

/* selector stages [range [offset]] stages, inside a range aggregation. */
static int parse_log_range(struct parser *p, struct logql_expr *e)
{
    if (p->tok.kind == QT_LPAREN) {
        if (enter(p) != 0 || advance(p) != 0 || parse_log_range(p, e) != 0) {
            return p->lx.rc;
        }
        leave(p);
        return expect(p, QT_RPAREN, "\")\"");
    }
    if (p->tok.kind != QT_LBRACE) {
        return fail_expected(p, "a log query starting with a stream selector \"{...}\"");
    }
    if (parse_selector(p, &e->log) != 0) {
        return p->lx.rc;
    }
    size_t cap = 0;
    if (parse_stages(p, &e->log, &cap) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind != QT_LBRACKET) {
        return fail_expected(p, "a range such as [5m] after the log query");
    }
    size_t before = e->log.n_stages;
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
        if (advance(p) != 0 ||
            parse_duration_tok(p, "a duration such as 1h after offset", &e->offset_ns) != 0) {
            return p->lx.rc;
        }
    }
    if (is_stage_start(p->tok.kind) && before > 0) {
        return qlex_fail(&p->lx, p->tok.pos,
                         "the range must come right after the stream selector or after the whole "
                         "pipeline, not in the middle");
    }
    if (parse_stages(p, &e->log, &cap) != 0) {
        return p->lx.rc;
    }
    if (p->tok.kind == QT_LBRACKET) {
        return qlex_fail(&p->lx, p->tok.pos, "a log query takes only one range");
    }
    return 0;
}

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
    {"sum", LOGQL_AGG_SUM},
    {"avg", LOGQL_AGG_AVG},
    {"min", LOGQL_AGG_MIN},
    {"max", LOGQL_AGG_MAX},
    {"count", LOGQL_AGG_COUNT},
    {"stddev", LOGQL_AGG_STDDEV},
    {"stdvar", LOGQL_AGG_STDVAR},
    {"topk", LOGQL_AGG_TOPK},
    {"bottomk", LOGQL_AGG_BOTTOMK},
    {"sort", LOGQL_AGG_SORT},
    {"sort_desc", LOGQL_AGG_SORT_DESC},
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

static int parse_expr(struct parser *p, int min_prec, struct logql_expr **out);

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
        if (p->tok.kind != QT_NUMBER) {
            return fail_expected(p, "the quantile (a number such as 0.99)");
        }
        e->param = neg ? -p->tok.num : p->tok.num;
        if (advance(p) != 0 || expect(p, QT_COMMA, "\",\" after the quantile") != 0) {
            return p->lx.rc;
        }
    }
    if (parse_log_range(p, e) != 0 || expect(p, QT_RPAREN, "\")\" closing the function") != 0) {
        return p->lx.rc;
    }
    bool has_unwrap;
    if (check_unwrap(p, &e->log, true, NULL, &has_unwrap) != 0) {
        return p->lx.rc;
    }
    if (has_unwrap && !range_unwrapped(op) && op != LOGQL_RANGE_RATE) {
        return qlex_fail(&p->lx, e->pos, "%s does not take an unwrapped value; remove | unwrap",
                         fn);
    }
    if (!has_unwrap && range_unwrapped(op)) {
        return qlex_fail(&p->lx, e->pos, "%s needs an unwrapped value: add | unwrap <label>", fn);
    }
    if (at_grouping(p)) {
        if (!has_unwrap) {
            return qlex_fail(&p->lx, p->tok.pos,
                             "grouping is not allowed for %s; use e.g. sum by (...) (%s(...))", fn,
                             fn);
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
    e->kind = LOGQL_EXPR_VECTOR_AGG;
    e->agg_op = op;
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    if (at_grouping(p)) {
        if (sort) {
            return qlex_fail(&p->lx, p->tok.pos, "%s takes no by/without", fn);
        }
        if (parse_grouping(p, &e->grouping) != 0) {
            return p->lx.rc;
        }
    }
    if (expect(p, QT_LPAREN, "\"(\" after the aggregation") != 0) {
        return p->lx.rc;
    }
    if (op == LOGQL_AGG_TOPK || op == LOGQL_AGG_BOTTOMK) {
        if (p->tok.kind != QT_NUMBER) {
            return fail_expected(p, "the number of series k (e.g. topk(5, ...))");
        }
        if (!p->tok.is_int || p->tok.i < 1) {
            return qlex_fail(&p->lx, p->tok.pos, "%s: k must be a positive integer", fn);
        }
        e->param = (double)p->tok.i;
        if (advance(p) != 0 || expect(p, QT_COMMA, "\",\" after k") != 0) {
            return p->lx.rc;
        }
    }
    if (parse_expr(p, 1, &e->inner) != 0 || check_vector_arg(p, e->inner, fn) != 0) {
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
            return qlex_fail(&p->lx, p->tok.pos, "%s takes no by/without", fn);
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
    if (parse_expr(p, 1, &e->inner) != 0 || check_vector_arg(p, e->inner, "label_replace") != 0) {
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
        if (advance(p) != 0 || parse_expr(p, 1, out) != 0) {
            return p->lx.rc;
        }
        rc = expect(p, QT_RPAREN, "\")\"");
        break;
    case QT_LBRACE: {
        e->kind = LOGQL_EXPR_LOG;
        size_t cap = 0;
        if (parse_selector(p, &e->log) != 0 || parse_stages(p, &e->log, &cap) != 0) {
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

static int parse_expr(struct parser *p, int min_prec, struct logql_expr **out)
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
        if (enter(p) != 0 || parse_expr(p, b.op == LOGQL_BIN_POW ? b.prec : b.prec + 1, &e->rhs)) {
            return p->lx.rc;
        }
        leave(p);
        if (check_operand(p, e->rhs) != 0) {
            return p->lx.rc;
        }
        bool ls = is_scalar(lhs), rs = is_scalar(e->rhs);
        bool cmp = b.op >= LOGQL_BIN_EQ && b.op <= LOGQL_BIN_LE;
        if (b.op >= LOGQL_BIN_AND && (ls || rs)) {
            return qlex_fail(&p->lx, op_pos,
                             "set operators (and, or, unless) are not allowed with scalars");
        }
        if (cmp && ls && rs && !e->return_bool) {
            return qlex_fail(&p->lx, op_pos,
                             "comparisons between scalars must use the bool modifier");
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

/* Collects needles for every log expression of the tree. */
static int finish_tree(struct parser *p, struct logql_expr *e)
{
    for (; e != NULL; e = e->lhs) { /* the left spine in a loop */
        if (e->kind == LOGQL_EXPR_LOG || e->kind == LOGQL_EXPR_RANGE) {
            if (collect_needles(p, &e->log) != 0) {
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
        if (e == NULL || parse_selector(p, &e->log) != 0) {
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
    if (parse_expr(p, 1, &e) != 0) {
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
    if (e->kind == LOGQL_EXPR_LOG && check_unwrap(p, &e->log, false, NULL, &has) != 0) {
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

/* ---- executor helpers ----------------------------------------------------------- */

bool logql_match_label(const struct logql_matcher *m, const char *v, size_t n)
{
    if (v == NULL) {
        v = "";
        n = 0;
    }
    switch (m->op) {
    case LOGQL_MATCH_EQ:
        return n == m->value.n && memcmp(v, m->value.s, n) == 0;
    case LOGQL_MATCH_NEQ:
        return !(n == m->value.n && memcmp(v, m->value.s, n) == 0);
    case LOGQL_MATCH_RE:
        return qlex_re_match(m->re, v, n) == 1;
    case LOGQL_MATCH_NRE:
        return qlex_re_match(m->re, v, n) != 1;
    }
    return false;
}

static bool alt_match(enum logql_filter_op op, const struct logql_filter_alt *a, const char *s,
                      size_t n)
{
    switch (op) {
    case LOGQL_FILTER_CONTAINS:
    case LOGQL_FILTER_NOT_CONTAINS:
        return a->value.n == 0 || memmem(s, n, a->value.s, a->value.n) != NULL;
    case LOGQL_FILTER_RE:
    case LOGQL_FILTER_NOT_RE:
        return qlex_re_match(a->re, s, n) == 1;
    case LOGQL_FILTER_PATTERN:
    case LOGQL_FILTER_NOT_PATTERN:
        return logql_pattern_match(&a->pattern, s, n);
    }
    return false;
}

bool logql_line_filter_match(const struct logql_stage *st, const char *line, size_t n)
{
    if (line == NULL) {
        line = "";
        n = 0;
    }
    bool any = false;
    for (size_t i = 0; i < st->n_alts && !any; i++) {
        any = alt_match(st->filter_op, &st->alts[i], line, n);
    }
    bool negative = st->filter_op == LOGQL_FILTER_NOT_CONTAINS ||
                    st->filter_op == LOGQL_FILTER_NOT_RE ||
                    st->filter_op == LOGQL_FILTER_NOT_PATTERN;
    return negative ? !any : any;
}

static bool cmp_double(enum logql_cmp c, double a, double b)
{
    switch (c) {
    case LOGQL_CMP_EQ:
        return a == b;
    case LOGQL_CMP_NE:
        return a != b;
    case LOGQL_CMP_GT:
        return a > b;
    case LOGQL_CMP_GE:
        return a >= b;
    case LOGQL_CMP_LT:
        return a < b;
    case LOGQL_CMP_LE:
        return a <= b;
    }
    return false;
}

static bool cmp_i64(enum logql_cmp c, int64_t a, int64_t b)
{
    switch (c) {
    case LOGQL_CMP_EQ:
        return a == b;
    case LOGQL_CMP_NE:
        return a != b;
    case LOGQL_CMP_GT:
        return a > b;
    case LOGQL_CMP_GE:
        return a >= b;
    case LOGQL_CMP_LT:
        return a < b;
    case LOGQL_CMP_LE:
        return a <= b;
    }
    return false;
}

/* Go strconv.ParseFloat-like: the whole value must be a number. */
static int parse_float(const char *v, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return -EINVAL;
    }
    memcpy(buf, v, n);
    buf[n] = '\0';
    if (buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n') {
        return -EINVAL;
    }
    char *end;
    double d = strtod(buf, &end);
    if (*end != '\0') {
        return -EINVAL;
    }
    *out = d;
    return 0;
}

int logql_lf_test(const struct logql_lf *lf, const char *v, size_t n)
{
    switch (lf->kind) {
    case LOGQL_LF_STRING:
        return logql_match_label(&lf->m, v, n) ? 1 : 0;
    case LOGQL_LF_NUMBER:
    case LOGQL_LF_BYTES: {
        if (v == NULL) {
            return 0;
        }
        double d;
        int rc = lf->kind == LOGQL_LF_NUMBER ? parse_float(v, n, &d) : qlex_parse_bytes(v, n, &d);
        if (rc != 0) {
            return -EINVAL;
        }
        return cmp_double(lf->cmp, d, lf->num) ? 1 : 0;
    }
    case LOGQL_LF_DURATION: {
        if (v == NULL) {
            return 0;
        }
        int64_t ns;
        if (qlex_parse_duration(v, n, false, &ns) != 0) {
            return -EINVAL;
        }
        return cmp_i64(lf->cmp, ns, lf->dur_ns) ? 1 : 0;
    }
    case LOGQL_LF_IP:
        /* TODO(#4): ip() matching belongs to the executor (address/CIDR/range parse). */
        return -EINVAL;
    case LOGQL_LF_AND:
    case LOGQL_LF_OR:
        break;
    }
    return -EINVAL;
}
