/*
 * logql_stages.c - LogQL pipeline stages: line filters, label filter
 * expressions, parsers (json with its paths, logfmt, regexp, pattern,
 * unpack), line_format/label_format, drop/keep, unwrap; and the needles of a
 * log expression (see logql_int.h).
 */
#include "query/logql_int.h"
#include "query/logql_tmpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

bool logql_is_stage_start(enum qtok k)
{
    return k == QT_PIPE || is_line_filter_tok(k);
}

/* ip("pattern") as one alternative of a |= or != line filter (Loki refuses
 * it after |~ !~ |> !> when it builds the pipeline: "ip: invalid
 * operation"). */
static int parse_ip_alt(struct parser *p, struct logql_stage *st, size_t *cap)
{
    size_t pos = p->tok.pos;
    if (st->filter_op != LOGQL_FILTER_CONTAINS && st->filter_op != LOGQL_FILTER_NOT_CONTAINS) {
        return qlex_fail(&p->lx, pos,
                         "ip: invalid operation (ip() line filters take |= or != only)");
    }
    if (advance(p) != 0 || advance(p) != 0) { /* ip ( */
        return p->lx.rc;
    }
    if (p->tok.kind != QT_STRING) {
        return fail_expected(p, "an address, prefix or range in quotes inside ip()");
    }
    struct logql_filter_alt *alt = PUSH(p, st->alts, st->n_alts, *cap);
    if (alt == NULL) {
        return p->lx.rc;
    }
    alt->value = tok_str(p);
    alt->ip = true;
    if (logql_ip_match(&alt->value, "::1", 3) < 0) {
        return qlex_fail(&p->lx, p->tok.pos, "ip: invalid pattern: \"%.*s\"", (int)alt->value.n,
                         alt->value.s);
    }
    if (advance(p) != 0) {
        return p->lx.rc;
    }
    return expect(p, QT_RPAREN, "\")\" closing ip(");
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
        if (is_ident(&p->tok, "ip") && peek(p)->kind == QT_LPAREN) {
            if (parse_ip_alt(p, st, &cap) != 0) {
                return p->lx.rc;
            }
            if (!is_ident(&p->tok, "or")) {
                return 0;
            }
            if (advance(p) != 0) {
                return p->lx.rc;
            }
            continue;
        }
        if (p->tok.kind != QT_STRING) {
            char what[64];
            snprintf(what, sizeof(what), "a string in quotes after \"%s\"", opname);
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
        if (prm->is_template) {
            logql_tmpl *t;
            if (logql_tmpl_compile(&p->lx, p->tok.pos, prm->value.s, prm->value.n, &t) != 0) {
                return p->lx.rc;
            }
            prm->tmpl = t;
        }
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

int logql_parse_stage(struct parser *p, struct logql_stage *st)
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
        } else {
            logql_tmpl *tp;
            if (logql_tmpl_compile(&p->lx, p->tok.pos, st->text.s, st->text.n, &tp) != 0) {
                return p->lx.rc;
            }
            st->tmpl = tp;
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

int logql_collect_needles(struct parser *p, struct logql_log *log)
{
    size_t cap = 0;
    for (size_t k = 0; k < log->n_stages; k++) {
        const struct logql_stage *st = &log->stages[k];
        if (st->kind == LOGQL_STAGE_LINE_FORMAT || st->kind == LOGQL_STAGE_DECOLORIZE ||
            st->kind == LOGQL_STAGE_UNPACK) {
            break; /* later filters see a rewritten line (unpack: its _entry) */
        }
        if (st->kind != LOGQL_STAGE_LINE_FILTER || st->n_alts != 1) {
            continue;
        }
        const struct logql_filter_alt *a = &st->alts[0];
        if (st->filter_op == LOGQL_FILTER_CONTAINS && !a->ip) {
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
