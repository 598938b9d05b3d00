/*
 * logql_tmpl.c - the template module's syntax tree, parser and evaluator,
 * and the JSON access of fromJson values (see logql_tmpl.h; the functions
 * live in logql_tmpl_fn.c, Go time layouts in logql_tmpl_time.c).
 */
#include "query/logql_tmpl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonlex.h"
#include "query/logql_tmpl_int.h"

#define TMPL_MAX_VARS 32
#define TMPL_MAX_DEPTH 32
#define TMPL_MAX_ARGS 16
#define TMPL_MAX_RANGE 100000 /* elements one range visits */

/* ---- tree ------------------------------------------------------------------ */

enum targ_kind {
    A_DOT,   /* . or .a.b */
    A_VAR,   /* $x or $x.a.b ($ is variable 0) */
    A_LIT,   /* string, number, bool, nil */
    A_FUNC,  /* a function name */
    A_PIPE,  /* ( pipeline ) */
    A_LINE,  /* __line__ */
    A_TSTAMP /* __timestamp__ */
};

struct tfield {
    const char *s;
    size_t n;
};

struct tpipe;

struct targ {
    enum targ_kind k;
    const qlex_re *re; /* A_FUNC of a regex function: its compiled regex */
    struct tv lit;
    int var, fn;
    struct tfield *fields;
    size_t n_fields;
    struct tpipe *pipe;
};

struct tcmd {
    struct targ args[TMPL_MAX_ARGS];
    size_t n;
};

struct tpipe {
    struct tcmd *cmds;
    size_t n;
    int decl; /* variable set by $x := / $x = (-1: none) */
};

enum tnode_kind { N_TEXT, N_ACTION, N_IF, N_RANGE, N_WITH, N_BREAK, N_CONTINUE };

struct tnode {
    enum tnode_kind k;
    struct tnode *next;
    const char *s; /* TEXT */
    size_t n;
    struct tpipe *pipe;
    struct tnode *body, *alt; /* IF/RANGE/WITH: then / else */
    int kvar, vvar;           /* RANGE: $i, $x (-1: none) */
};

struct logql_tmpl {
    struct tnode *root;
    int n_vars;
    bool literal;
};

/* ---- parser ---------------------------------------------------------------- */

struct tparse {
    const char *s;
    size_t n, pos;
    struct qlex *lx;
    size_t at; /* the template's place in the query (messages) */
    int rc;
    const char *vars[TMPL_MAX_VARS]; /* names in scope ("" for $) */
    size_t var_n[TMPL_MAX_VARS];
    int var_slot[TMPL_MAX_VARS];
    int n_scope, n_slots;
    int depth, loops;
};

static int pfail(struct tparse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int pfail(struct tparse *p, const char *fmt, ...)
{
    if (p->rc == 0) {
        char m[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof(m), fmt, ap);
        va_end(ap);
        p->rc = qlex_fail(p->lx, p->at, "template: %s", m);
    }
    return p->rc;
}

static void *palloc(struct tparse *p, size_t n)
{
    void *v = qlex_alloc(p->lx, n);
    if (v == NULL) {
        p->rc = p->lx->rc != 0 ? p->lx->rc : -ENOMEM;
        return NULL;
    }
    memset(v, 0, n);
    return v;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_alnum_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void skip_ws(struct tparse *p)
{
    while (p->pos < p->n && is_space(p->s[p->pos])) {
        p->pos++;
    }
}

/* At the end of an action: optional "-" trim marker and "}}". */
static bool at_close(struct tparse *p)
{
    size_t i = p->pos;
    if (i + 2 < p->n + 1 && p->s[i] == '-' && i + 2 < p->n && p->s[i + 1] == '}' &&
        p->s[i + 2] == '}') {
        return true;
    }
    return i + 1 < p->n && p->s[i] == '}' && p->s[i + 1] == '}';
}

static int var_find(struct tparse *p, const char *s, size_t n)
{
    for (int i = p->n_scope - 1; i >= 0; i--) {
        if (p->var_n[i] == n && memcmp(p->vars[i], s, n) == 0) {
            return p->var_slot[i];
        }
    }
    return -1;
}

static int var_declare(struct tparse *p, const char *s, size_t n)
{
    if (p->n_scope >= TMPL_MAX_VARS || p->n_slots >= TMPL_MAX_VARS) {
        return pfail(p, "too many variables (at most %d)", TMPL_MAX_VARS - 1);
    }
    p->vars[p->n_scope] = s;
    p->var_n[p->n_scope] = n;
    p->var_slot[p->n_scope] = p->n_slots++;
    return p->var_slot[p->n_scope++];
}

/* Go string literal ("..." with escapes, or `raw`) at p->pos. */
static int parse_string(struct tparse *p, struct tv *out)
{
    char q = p->s[p->pos++];
    size_t start = p->pos;
    if (q == '`') {
        while (p->pos < p->n && p->s[p->pos] != '`') {
            p->pos++;
        }
        if (p->pos >= p->n) {
            return pfail(p, "unterminated raw quoted string");
        }
        *out = tmpl_str(p->s + start, p->pos - start);
        p->pos++;
        return 0;
    }
    char *buf = palloc(p, p->n - start + 1);
    if (buf == NULL) {
        return p->rc;
    }
    size_t o = 0;
    while (p->pos < p->n && p->s[p->pos] != '"') {
        char c = p->s[p->pos++];
        if (c == '\n') {
            return pfail(p, "unterminated quoted string");
        }
        if (c != '\\') {
            buf[o++] = c;
            continue;
        }
        if (p->pos >= p->n) {
            break;
        }
        c = p->s[p->pos++];
        switch (c) {
        case 'n':
            buf[o++] = '\n';
            break;
        case 't':
            buf[o++] = '\t';
            break;
        case 'r':
            buf[o++] = '\r';
            break;
        case 'a':
            buf[o++] = '\a';
            break;
        case 'b':
            buf[o++] = '\b';
            break;
        case 'f':
            buf[o++] = '\f';
            break;
        case 'v':
            buf[o++] = '\v';
            break;
        case '\\':
        case '"':
        case '\'':
            buf[o++] = c;
            break;
        case 'x': {
            unsigned v = 0;
            for (int k = 0; k < 2; k++) {
                char h = p->pos < p->n ? p->s[p->pos++] : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0) {
                    return pfail(p, "invalid \\x escape in string");
                }
                v = v * 16 + (unsigned)d;
            }
            buf[o++] = (char)v;
            break;
        }
        default:
            return pfail(p, "unknown escape sequence \\%c in string", c);
        }
    }
    if (p->pos >= p->n) {
        return pfail(p, "unterminated quoted string");
    }
    p->pos++;
    *out = tmpl_str(buf, o);
    return 0;
}

static int parse_number(struct tparse *p, struct tv *out)
{
    const char *s = p->s + p->pos;
    size_t i = 0, lim = p->n - p->pos;
    if (i < lim && (s[i] == '-' || s[i] == '+')) {
        i++;
    }
    bool flt = false;
    while (i < lim && (is_alnum_(s[i]) || s[i] == '.' ||
                       ((s[i] == '-' || s[i] == '+') && (s[i - 1] == 'e' || s[i - 1] == 'E')))) {
        if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') {
            flt = true;
        }
        i++;
    }
    char buf[64];
    if (i >= sizeof(buf)) {
        return pfail(p, "number too long");
    }
    memcpy(buf, s, i);
    buf[i] = '\0';
    bool hex = i > 2 && (buf[0] == '0' || buf[1] == '0') && (strchr(buf, 'x') || strchr(buf, 'X'));
    char *end;
    if (!flt || hex) {
        errno = 0;
        long long v = strtoll(buf, &end, 0);
        if (*end == '\0' && errno == 0) {
            *out = (struct tv){.k = TV_INT, .i = v};
            p->pos += i;
            return 0;
        }
    }
    double d = strtod(buf, &end);
    if (*end != '\0' || i == 0) {
        return pfail(p, "bad number syntax: %s", buf);
    }
    *out = (struct tv){.k = TV_FLOAT, .f = d};
    p->pos += i;
    return 0;
}

/* .a.b.c after the first '.' was consumed (or after $x). */
static int parse_fields(struct tparse *p, struct targ *a)
{
    size_t cap = 0;
    while (p->pos < p->n && p->s[p->pos] == '.' && p->pos + 1 < p->n &&
           is_alnum_(p->s[p->pos + 1])) {
        p->pos++;
        size_t st = p->pos;
        while (p->pos < p->n && is_alnum_(p->s[p->pos])) {
            p->pos++;
        }
        if (a->n_fields == cap) {
            size_t nc = cap ? cap * 2 : 4;
            struct tfield *f = palloc(p, nc * sizeof(*f));
            if (f == NULL) {
                return p->rc;
            }
            if (a->n_fields) {
                memcpy(f, a->fields, a->n_fields * sizeof(*f));
            }
            a->fields = f;
            cap = nc;
        }
        a->fields[a->n_fields++] = (struct tfield){p->s + st, p->pos - st};
    }
    return 0;
}

static int parse_pipeline(struct tparse *p, struct tpipe **out, bool in_parens, bool allow_decl);

static int parse_operand(struct tparse *p, struct targ *a)
{
    char c = p->s[p->pos];
    if (c == '"' || c == '`') {
        a->k = A_LIT;
        return parse_string(p, &a->lit);
    }
    if (c == '(') {
        p->pos++;
        a->k = A_PIPE;
        if (parse_pipeline(p, &a->pipe, true, false) != 0) {
            return p->rc;
        }
        return parse_fields(p, a);
    }
    if (c == '.') {
        a->k = A_DOT;
        if (p->pos + 1 < p->n && is_alnum_(p->s[p->pos + 1])) {
            return parse_fields(p, a);
        }
        p->pos++;
        return 0;
    }
    if (c == '$') {
        size_t st = ++p->pos;
        while (p->pos < p->n && is_alnum_(p->s[p->pos])) {
            p->pos++;
        }
        a->k = A_VAR;
        a->var = var_find(p, p->s + st, p->pos - st);
        if (a->var < 0) {
            return pfail(p, "undefined variable \"$%.*s\"", (int)(p->pos - st), p->s + st);
        }
        return parse_fields(p, a);
    }
    if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        a->k = A_LIT;
        return parse_number(p, &a->lit);
    }
    if (is_alnum_(c)) {
        size_t st = p->pos;
        while (p->pos < p->n && is_alnum_(p->s[p->pos])) {
            p->pos++;
        }
        const char *w = p->s + st;
        size_t wn = p->pos - st;
        a->k = A_LIT;
        if (wn == 4 && memcmp(w, "true", 4) == 0) {
            a->lit = (struct tv){.k = TV_BOOL, .b = true};
        } else if (wn == 5 && memcmp(w, "false", 5) == 0) {
            a->lit = (struct tv){.k = TV_BOOL, .b = false};
        } else if (wn == 3 && memcmp(w, "nil", 3) == 0) {
            a->lit = (struct tv){.k = TV_NIL};
        } else if (wn == 8 && memcmp(w, "__line__", 8) == 0) {
            a->k = A_LINE;
        } else if (wn == 13 && memcmp(w, "__timestamp__", 13) == 0) {
            a->k = A_TSTAMP;
        } else {
            a->k = A_FUNC;
            a->fn = tmpl_fn_lookup(w, wn);
            if (a->fn < 0) {
                return pfail(p, "function \"%.*s\" not defined", (int)wn, w);
            }
        }
        return 0;
    }
    return pfail(p, "unexpected \"%c\" in command", c);
}

/* cmd ("|" cmd)* up to "}}" (or ")" when in_parens). With allow_decl, a
 * leading "$x :=" / "$x =" sets a variable. */
static int parse_pipeline(struct tparse *p, struct tpipe **out, bool in_parens, bool allow_decl)
{
    if (++p->depth > TMPL_MAX_DEPTH) {
        return pfail(p, "expression nested too deeply");
    }
    struct tpipe *pl = palloc(p, sizeof(*pl));
    if (pl == NULL) {
        return p->rc;
    }
    pl->decl = -1;
    *out = pl;
    skip_ws(p);
    if (allow_decl && p->pos < p->n && p->s[p->pos] == '$') {
        size_t save = p->pos, st = p->pos + 1, e = st;
        while (e < p->n && is_alnum_(p->s[e])) {
            e++;
        }
        size_t q = e;
        while (q < p->n && is_space(p->s[q])) {
            q++;
        }
        if (q + 1 < p->n && p->s[q] == ':' && p->s[q + 1] == '=') {
            pl->decl = -2 - (int)st; /* declared after the pipeline (Go scoping) */
            p->pos = q + 2;
        } else if (q < p->n && p->s[q] == '=' && (q + 1 >= p->n || p->s[q + 1] != '=')) {
            pl->decl = var_find(p, p->s + st, e - st);
            if (pl->decl < 0) {
                return pfail(p, "undefined variable \"$%.*s\"", (int)(e - st), p->s + st);
            }
            p->pos = q + 1;
        } else {
            p->pos = save;
        }
    }
    size_t cap = 0;
    for (;;) {
        skip_ws(p);
        if (pl->n == cap) {
            size_t nc = cap ? cap * 2 : 2;
            struct tcmd *c = palloc(p, nc * sizeof(*c));
            if (c == NULL) {
                return p->rc;
            }
            if (pl->n) {
                memcpy(c, pl->cmds, pl->n * sizeof(*c));
            }
            pl->cmds = c;
            cap = nc;
        }
        struct tcmd *cmd = &pl->cmds[pl->n++];
        for (;;) {
            skip_ws(p);
            if (p->pos >= p->n) {
                return pfail(p, "unclosed action");
            }
            if ((in_parens && p->s[p->pos] == ')') || (!in_parens && at_close(p)) ||
                p->s[p->pos] == '|') {
                break;
            }
            if (cmd->n == TMPL_MAX_ARGS) {
                return pfail(p, "too many arguments (at most %d)", TMPL_MAX_ARGS - 1);
            }
            if (parse_operand(p, &cmd->args[cmd->n++]) != 0) {
                return p->rc;
            }
            if (p->pos < p->n && !is_space(p->s[p->pos]) && p->s[p->pos] != ')' &&
                p->s[p->pos] != '|' && !at_close(p)) {
                return pfail(p, "unexpected \"%c\" in operand", p->s[p->pos]);
            }
        }
        if (cmd->n == 0) {
            return pfail(p, "missing value for command");
        }
        if (cmd->args[0].k == A_FUNC && tmpl_fn_takes_regex(cmd->args[0].fn)) {
            const struct targ *ra = cmd->n > 1 ? &cmd->args[1] : NULL;
            if (ra == NULL || ra->k != A_LIT || ra->lit.k != TV_STR) {
                return pfail(p, "the regex of this function must be a string literal");
            }
            qlex_re *re;
            if (qlex_re_compile(p->lx, p->at, ra->lit.s, ra->lit.n, false, &re) != 0) {
                p->rc = p->lx->rc;
                return p->rc;
            }
            cmd->args[0].re = re;
        }
        if (p->s[p->pos] != '|') {
            break;
        }
        p->pos++;
    }
    if (in_parens) {
        p->pos++; /* ) */
    }
    if (pl->decl <= -2) {
        size_t st = (size_t)(-2 - pl->decl), e = st;
        while (e < p->n && is_alnum_(p->s[e])) {
            e++;
        }
        pl->decl = var_declare(p, p->s + st, e - st);
        if (pl->decl < 0) {
            return p->rc;
        }
    }
    p->depth--;
    return 0;
}

/* Reads the keyword of an action if it has one. */
static bool keyword(struct tparse *p, const char *kw)
{
    size_t l = strlen(kw);
    if (p->pos + l <= p->n && memcmp(p->s + p->pos, kw, l) == 0 &&
        (p->pos + l == p->n || !is_alnum_(p->s[p->pos + l]))) {
        p->pos += l;
        return true;
    }
    return false;
}

/* "}}" (with its trim marker) closing an action; *trim_next set for "-}}". */
static int close_action(struct tparse *p, bool *trim_next)
{
    skip_ws(p);
    *trim_next = false;
    if (p->pos < p->n && p->s[p->pos] == '-') {
        *trim_next = true;
        p->pos++;
    }
    if (p->pos + 1 < p->n && p->s[p->pos] == '}' && p->s[p->pos + 1] == '}') {
        p->pos += 2;
        return 0;
    }
    return pfail(p, "unexpected text in action (expected \"}}\")");
}

/* What ended a list of nodes. */
enum list_end { END_EOF, END_END, END_ELSE, END_ELSE_IF };

static int parse_list(struct tparse *p, struct tnode **out, enum list_end *how, bool *trim_next);

/* if / with / range after the keyword: the pipeline, the body, else. */
static int parse_block(struct tparse *p, struct tnode *nd, bool *trim_next)
{
    int mark = p->n_scope;
    skip_ws(p);
    if (nd->k == N_RANGE && p->pos < p->n && p->s[p->pos] == '$') {
        /* range $x := ... / range $i, $x := ... */
        size_t save = p->pos;
        const char *nm[2];
        size_t nl[2];
        int cnt = 0;
        while (cnt < 2 && p->pos < p->n && p->s[p->pos] == '$') {
            size_t st = ++p->pos;
            while (p->pos < p->n && is_alnum_(p->s[p->pos])) {
                p->pos++;
            }
            nm[cnt] = p->s + st;
            nl[cnt++] = p->pos - st;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                skip_ws(p);
                continue;
            }
            break;
        }
        if (p->pos + 1 < p->n && p->s[p->pos] == ':' && p->s[p->pos + 1] == '=') {
            p->pos += 2;
            nd->kvar = cnt == 2 ? var_declare(p, nm[0], nl[0]) : -1;
            nd->vvar = var_declare(p, nm[cnt - 1], nl[cnt - 1]);
            if (p->rc != 0) {
                return p->rc;
            }
        } else {
            p->pos = save;
        }
    }
    if (parse_pipeline(p, &nd->pipe, false, nd->k != N_RANGE) != 0 ||
        close_action(p, trim_next) != 0) {
        return p->rc;
    }
    if (nd->k == N_RANGE) {
        p->loops++;
    }
    enum list_end how;
    if (parse_list(p, &nd->body, &how, trim_next) != 0) {
        return p->rc;
    }
    if (nd->k == N_RANGE) {
        p->loops--;
    }
    if (how == END_ELSE_IF) {
        if (nd->k != N_IF) {
            return pfail(p, "else if is only allowed after if");
        }
        struct tnode *sub = palloc(p, sizeof(*sub));
        if (sub == NULL) {
            return p->rc;
        }
        sub->k = N_IF;
        sub->kvar = sub->vvar = -1;
        nd->alt = sub;
        p->n_scope = mark;
        return parse_block(p, sub, trim_next); /* its end closes this if too */
    }
    if (how == END_ELSE) {
        if (parse_list(p, &nd->alt, &how, trim_next) != 0) {
            return p->rc;
        }
    }
    if (how != END_END) {
        return pfail(p, "unexpected EOF (missing {{end}})");
    }
    p->n_scope = mark;
    return 0;
}

static struct tnode *new_node(struct tparse *p, enum tnode_kind k)
{
    struct tnode *nd = palloc(p, sizeof(*nd));
    if (nd != NULL) {
        nd->k = k;
        nd->kvar = nd->vvar = -1;
    }
    return nd;
}

static int parse_list(struct tparse *p, struct tnode **out, enum list_end *how, bool *trim_next)
{
    struct tnode **tail = out;
    *out = NULL;
    for (;;) {
        size_t st = p->pos;
        const char *o = p->pos < p->n ? memmem(p->s + p->pos, p->n - p->pos, "{{", 2) : NULL;
        size_t te = o ? (size_t)(o - p->s) : p->n;
        bool trim_prev = o != NULL && te + 3 < p->n + 1 && te + 2 < p->n && p->s[te + 2] == '-' &&
                         te + 3 < p->n && is_space(p->s[te + 3]);
        if (*trim_next) {
            while (st < te && is_space(p->s[st])) {
                st++;
            }
        }
        size_t tend = te;
        if (trim_prev) {
            while (tend > st && is_space(p->s[tend - 1])) {
                tend--;
            }
        }
        if (tend > st) {
            struct tnode *t = new_node(p, N_TEXT);
            if (t == NULL) {
                return p->rc;
            }
            t->s = p->s + st;
            t->n = tend - st;
            *tail = t;
            tail = &t->next;
        }
        if (o == NULL) {
            p->pos = p->n;
            *how = END_EOF;
            return 0;
        }
        p->pos = te + 2 + (trim_prev ? 2 : 0);
        *trim_next = false;
        skip_ws(p);
        if (p->pos + 1 < p->n && p->s[p->pos] == '/' && p->s[p->pos + 1] == '*') {
            const char *ce = memmem(p->s + p->pos, p->n - p->pos, "*/", 2);
            if (ce == NULL) {
                return pfail(p, "unclosed comment");
            }
            p->pos = (size_t)(ce - p->s) + 2;
            if (close_action(p, trim_next) != 0) {
                return p->rc;
            }
            continue;
        }
        if (keyword(p, "end")) {
            *how = END_END;
            return close_action(p, trim_next);
        }
        if (keyword(p, "else")) {
            skip_ws(p);
            if (keyword(p, "if")) {
                *how = END_ELSE_IF;
                return 0;
            }
            *how = END_ELSE;
            return close_action(p, trim_next);
        }
        if (keyword(p, "define") || keyword(p, "template") || keyword(p, "block")) {
            return pfail(p, "define, template and block are not supported in LogQL templates");
        }
        struct tnode *nd;
        if (keyword(p, "if") || keyword(p, "range") || keyword(p, "with")) {
            char c = p->s[p->pos - 1];
            nd = new_node(p, c == 'f' ? N_IF : c == 'e' ? N_RANGE : N_WITH);
            if (nd == NULL || parse_block(p, nd, trim_next) != 0) {
                return p->rc;
            }
        } else if (keyword(p, "break") || keyword(p, "continue")) {
            bool brk = p->s[p->pos - 1] == 'k';
            if (p->loops == 0) {
                return pfail(p, "{{%s}} outside {{range}}", brk ? "break" : "continue");
            }
            nd = new_node(p, brk ? N_BREAK : N_CONTINUE);
            if (nd == NULL || close_action(p, trim_next) != 0) {
                return p->rc;
            }
        } else {
            nd = new_node(p, N_ACTION);
            if (nd == NULL || parse_pipeline(p, &nd->pipe, false, true) != 0 ||
                close_action(p, trim_next) != 0) {
                return p->rc;
            }
        }
        *tail = nd;
        tail = &nd->next;
    }
}

int logql_tmpl_compile(struct qlex *lx, size_t pos, const char *src, size_t n, logql_tmpl **out)
{
    struct tparse p = {.s = src, .n = n, .lx = lx, .at = pos};
    *out = NULL;
    logql_tmpl *t = palloc(&p, sizeof(*t));
    if (t == NULL) {
        return p.rc;
    }
    var_declare(&p, "", 0); /* $: the root dot */
    enum list_end how;
    bool trim = false;
    if (parse_list(&p, &t->root, &how, &trim) != 0) {
        return p.rc;
    }
    if (how == END_END) {
        return pfail(&p, "unexpected {{end}}");
    }
    if (how != END_EOF) {
        return pfail(&p, "unexpected {{else}}");
    }
    t->n_vars = p.n_slots;
    t->literal = t->root == NULL || (t->root->k == N_TEXT && t->root->next == NULL);
    *out = t;
    return 0;
}

bool logql_tmpl_is_literal(const logql_tmpl *t)
{
    return t->literal;
}

/* ---- evaluation ------------------------------------------------------------ */

int tmpl_fail(struct tctx *c, const char *fmt, ...)
{
    if (!c->failed) {
        c->failed = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* ---- JSON ------------------------------------------------------------------ */

int tmpl_json_value(struct tctx *c, const char *p, size_t n, struct tv *out)
{
    struct jsonlex x;
    jsonlex_init(&x, p, n);
    int ch = jsonlex_peek(&x);
    if (ch == '{' || ch == '[') {
        /* empty containers: compact "{}" / "[]" for the truth test */
        size_t st = x.pos;
        if (jsonlex_skip(&x) != 0) {
            return tmpl_fail(c, "fromJson: %s", x.err);
        }
        struct jsonlex y;
        jsonlex_init(&y, p + st + 1, x.pos - st - 2);
        bool empty = jsonlex_peek(&y) < 0;
        *out = (struct tv){.k = TV_JSON,
                           .s = empty ? (ch == '{' ? "{}" : "[]") : p + st,
                           .n = empty ? 2 : x.pos - st};
        return 0;
    }
    if (ch == '"') {
        struct jsonlex_str js;
        if (jsonlex_str(&x, &js) != 0) {
            return tmpl_fail(c, "fromJson: %s", x.err);
        }
        char *d = arena_alloc(c->a, js.len ? js.len : 1);
        if (d == NULL) {
            return tmpl_fail(c, "out of memory");
        }
        jsonlex_unescape(&x, &js, d);
        *out = tmpl_str(d, js.len);
        return 0;
    }
    if (ch == 't' || ch == 'f') {
        bool t = ch == 't';
        if (jsonlex_lit(&x, t ? "true" : "false", t ? 4 : 5) != 0) {
            return tmpl_fail(c, "fromJson: %s", x.err);
        }
        *out = (struct tv){.k = TV_BOOL, .b = t};
        return 0;
    }
    if (ch == 'n') {
        if (jsonlex_lit(&x, "null", 4) != 0) {
            return tmpl_fail(c, "fromJson: %s", x.err);
        }
        *out = (struct tv){.k = TV_NIL};
        return 0;
    }
    size_t at, len;
    if (jsonlex_num(&x, &at, &len) != 0) {
        return tmpl_fail(c, "fromJson: %s", x.err);
    }
    char buf[64];
    size_t l = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
    memcpy(buf, p + at, l);
    buf[l] = '\0';
    *out = (struct tv){.k = TV_FLOAT, .f = strtod(buf, NULL)}; /* json.Unmarshal: float64 */
    return 0;
}

int tmpl_json_member(struct tctx *c, const struct tv *obj, const char *key, size_t kn,
                     struct tv *out)
{
    *out = (struct tv){.k = TV_NIL};
    struct jsonlex x;
    jsonlex_init(&x, obj->s, obj->n);
    if (jsonlex_peek(&x) != '{') {
        return tmpl_fail(c, "can't evaluate field %.*s in a list", (int)kn, key);
    }
    x.pos++;
    bool first = true;
    struct jsonlex_str k;
    int more;
    while ((more = jsonlex_obj_next(&x, &k, &first)) == 1) {
        char kb[256];
        const char *kp;
        bool hit = k.len == kn && jsonlex_str_bytes(&x, &k, kb, sizeof(kb), &kp) &&
                   memcmp(kp, key, kn) == 0;
        jsonlex_ws(&x);
        size_t vs = x.pos;
        if (jsonlex_skip(&x) != 0) {
            break;
        }
        if (hit) {
            return tmpl_json_value(c, obj->s + vs, x.pos - vs, out); /* last one wins in Go */
        }
    }
    return more < 0 ? tmpl_fail(c, "bad JSON value: %s", x.err) : 0;
}

int tmpl_json_index(struct tctx *c, const struct tv *arr, int64_t i, struct tv *out)
{
    struct jsonlex x;
    jsonlex_init(&x, arr->s, arr->n);
    if (jsonlex_peek(&x) != '[') {
        return tmpl_fail(c, "index of a non-list value");
    }
    x.pos++;
    bool first = true;
    for (int64_t k = 0;; k++) {
        int more = jsonlex_arr_next(&x, &first);
        if (more <= 0) {
            return tmpl_fail(c, "error calling index: index out of range: %" PRId64, i);
        }
        jsonlex_ws(&x);
        size_t vs = x.pos;
        if (jsonlex_skip(&x) != 0) {
            return tmpl_fail(c, "bad JSON value: %s", x.err);
        }
        if (k == i) {
            return tmpl_json_value(c, arr->s + vs, x.pos - vs, out);
        }
    }
}

struct teval {
    struct tctx c;
    struct tv vars[TMPL_MAX_VARS];
    struct obuf out;
    unsigned steps;
    int depth;
};

static int emit(struct teval *e, const char *s, size_t n)
{
    tmpl_buf_put(&e->out, s, n);
    if (e->out.big) {
        return tmpl_fail(&e->c, "template output too large");
    }
    return e->out.oom ? -ENOMEM : 0;
}

static const char *env_label(const struct tctx *c, const char *name, size_t nn, size_t *vn)
{
    return c->env->label ? c->env->label(c->env->ctx, name, nn, vn) : NULL;
}

/* .f on a value: a label of the root, a member of a JSON object. */
static int field_of(struct teval *e, const struct tv *base, const struct tfield *f, struct tv *out)
{
    if (base->k == TV_LABELS) {
        size_t vn = 0;
        const char *v = env_label(&e->c, f->s, f->n, &vn);
        *out = tmpl_str(v ? v : "", v ? vn : 0);
        return 0;
    }
    if (base->k == TV_JSON) {
        return tmpl_json_member(&e->c, base, f->s, f->n, out);
    }
    if (base->k == TV_NIL) {
        *out = (struct tv){.k = TV_NIL};
        return 0;
    }
    return tmpl_fail(&e->c, "can't evaluate field %.*s in a non-map value", (int)f->n, f->s);
}

static int eval_pipe(struct teval *e, const struct tpipe *pl, const struct tv *dot, struct tv *out);

static int eval_arg(struct teval *e, const struct targ *a, const struct tv *dot, struct tv *out)
{
    struct tv base;
    int rc = 0;
    switch (a->k) {
    case A_LIT:
        *out = a->lit;
        return 0;
    case A_LINE:
        *out = tmpl_str(e->c.env->line ? e->c.env->line : "", e->c.env->line_n);
        return 0;
    case A_TSTAMP:
        *out = (struct tv){.k = TV_TIME, .i = e->c.env->ts_ns};
        return 0;
    case A_DOT:
        base = *dot;
        break;
    case A_VAR:
        base = e->vars[a->var];
        break;
    case A_PIPE:
        rc = eval_pipe(e, a->pipe, dot, &base);
        break;
    case A_FUNC:
        return tmpl_fn_call(&e->c, a->fn, a->re, NULL, 0, out);
    }
    for (size_t i = 0; i < a->n_fields && rc == 0; i++) {
        struct tv nx;
        rc = field_of(e, &base, &a->fields[i], &nx);
        base = nx;
    }
    *out = base;
    return rc;
}

static int eval_cmd(struct teval *e, const struct tcmd *cmd, const struct tv *dot,
                    const struct tv *piped, struct tv *out)
{
    const struct targ *a0 = &cmd->args[0];
    if (a0->k != A_FUNC) {
        if (cmd->n > 1 || piped != NULL) {
            return tmpl_fail(&e->c, "can't give argument to non-function");
        }
        return eval_arg(e, a0, dot, out);
    }
    struct tv argv[TMPL_MAX_ARGS + 1];
    size_t argc = 0;
    for (size_t i = 1; i < cmd->n; i++) {
        int rc = eval_arg(e, &cmd->args[i], dot, &argv[argc++]);
        if (rc != 0) {
            return rc;
        }
    }
    if (piped != NULL) {
        argv[argc++] = *piped;
    }
    return tmpl_fn_call(&e->c, a0->fn, a0->re, argv, argc, out);
}

static int eval_pipe(struct teval *e, const struct tpipe *pl, const struct tv *dot, struct tv *out)
{
    struct tv v = {.k = TV_NIL};
    for (size_t i = 0; i < pl->n; i++) {
        struct tv nx;
        int rc = eval_cmd(e, &pl->cmds[i], dot, i ? &v : NULL, &nx);
        if (rc != 0) {
            return rc;
        }
        v = nx;
    }
    if (pl->decl >= 0) {
        e->vars[pl->decl] = v;
    }
    *out = v;
    return 0;
}

/* Go's %v of a value into the output. */
static int emit_value(struct teval *e, const struct tv *v)
{
    if (v->k == TV_NIL) {
        return emit(e, "<no value>", 10);
    }
    const char *s;
    size_t n;
    int rc = tmpl_to_str(&e->c, v, &s, &n);
    return rc != 0 ? rc : emit(e, s, n);
}

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static int eval_list(struct teval *e, const struct tnode *nd, const struct tv *dot, enum flow *fl);

struct kv {
    const char *k, *v;
    size_t kn, vn;
};

static int kv_cmp(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    size_t m = x->kn < y->kn ? x->kn : y->kn;
    int r = memcmp(x->k, y->k, m);
    return r != 0 ? r : (x->kn > y->kn) - (x->kn < y->kn);
}

static int run_body(struct teval *e, const struct tnode *nd, struct tv k, struct tv elem, bool *brk)
{
    if (++e->steps > TMPL_MAX_RANGE) {
        return tmpl_fail(&e->c, "range: too many iterations");
    }
    if (nd->kvar >= 0) {
        e->vars[nd->kvar] = k;
    }
    if (nd->vvar >= 0) {
        e->vars[nd->vvar] = elem;
    }
    enum flow f = FLOW_NEXT;
    int rc = eval_list(e, nd->body, &elem, &f);
    *brk = f == FLOW_BREAK;
    return rc;
}

/* range over the row's labels (Go ranges a map in key order). */
static int range_labels(struct teval *e, const struct tnode *nd, const struct tv *dot,
                        enum flow *fl)
{
    const struct logql_tmpl_env *env = e->c.env;
    size_t n = 0;
    const char *k, *v;
    size_t kn, vn;
    while (env->label_at != NULL && env->label_at(env->ctx, n, &k, &kn, &v, &vn) && n < 4096) {
        n++;
    }
    struct kv *all = n ? arena_alloc(e->c.a, n * sizeof(*all)) : NULL;
    if (n > 0 && all == NULL) {
        return -ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (env->label_at(env->ctx, i, &all[m].k, &all[m].kn, &all[m].v, &all[m].vn) &&
            all[m].vn > 0) {
            m++; /* an empty label is no label */
        }
    }
    qsort(all, m, sizeof(*all), kv_cmp);
    for (size_t i = 0; i < m; i++) {
        bool brk;
        int rc =
            run_body(e, nd, tmpl_str(all[i].k, all[i].kn), tmpl_str(all[i].v, all[i].vn), &brk);
        if (rc != 0 || brk) {
            return rc;
        }
    }
    if (m == 0 && nd->alt != NULL) {
        return eval_list(e, nd->alt, dot, fl);
    }
    return 0;
}

static int eval_range(struct teval *e, const struct tnode *nd, const struct tv *dot,
                      const struct tv *coll, enum flow *fl)
{
    if (coll->k == TV_NIL) {
        return nd->alt ? eval_list(e, nd->alt, dot, fl) : 0;
    }
    if (coll->k == TV_INT) { /* range N: 0 .. N-1 (Go 1.22) */
        if (coll->i <= 0) {
            return nd->alt ? eval_list(e, nd->alt, dot, fl) : 0;
        }
        for (int64_t i = 0; i < coll->i; i++) {
            bool brk;
            struct tv x = {.k = TV_INT, .i = i};
            int rc = run_body(e, nd, x, x, &brk);
            if (rc != 0 || brk) {
                return rc;
            }
        }
        return 0;
    }
    if (coll->k == TV_LABELS) {
        return range_labels(e, nd, dot, fl);
    }
    if (coll->k != TV_JSON) {
        return tmpl_fail(&e->c, "range can't iterate over a non-list value");
    }
    struct jsonlex x;
    jsonlex_init(&x, coll->s, coll->n);
    bool obj = jsonlex_peek(&x) == '{', first = true;
    x.pos++;
    size_t visited = 0;
    for (;;) {
        struct jsonlex_str key;
        int more = obj ? jsonlex_obj_next(&x, &key, &first) : jsonlex_arr_next(&x, &first);
        if (more < 0) {
            return tmpl_fail(&e->c, "range: bad JSON value: %s", x.err);
        }
        if (more == 0) {
            break;
        }
        jsonlex_ws(&x);
        size_t vs = x.pos;
        if (jsonlex_skip(&x) != 0) {
            return tmpl_fail(&e->c, "range: bad JSON value: %s", x.err);
        }
        struct tv elem, k;
        int rc = tmpl_json_value(&e->c, coll->s + vs, x.pos - vs, &elem);
        if (rc != 0) {
            return rc;
        }
        if (obj) {
            rc = tmpl_json_value(&e->c, coll->s + key.at - 1, key.raw + 2, &k);
            if (rc != 0) {
                return rc;
            }
        } else {
            k = (struct tv){.k = TV_INT, .i = (int64_t)visited};
        }
        visited++;
        bool brk;
        rc = run_body(e, nd, k, elem, &brk);
        if (rc != 0) {
            return rc;
        }
        if (brk) {
            break;
        }
    }
    if (visited == 0 && nd->alt) {
        return eval_list(e, nd->alt, dot, fl);
    }
    return 0;
}

static int eval_list(struct teval *e, const struct tnode *nd, const struct tv *dot, enum flow *fl)
{
    if (++e->depth > TMPL_MAX_DEPTH * 2) {
        return tmpl_fail(&e->c, "template nested too deeply");
    }
    int rc = 0;
    for (; nd != NULL && rc == 0 && *fl == FLOW_NEXT; nd = nd->next) {
        struct tv v;
        switch (nd->k) {
        case N_TEXT:
            rc = emit(e, nd->s, nd->n);
            break;
        case N_ACTION:
            rc = eval_pipe(e, nd->pipe, dot, &v);
            if (rc == 0 && nd->pipe->decl < 0) {
                rc = emit_value(e, &v);
            }
            break;
        case N_IF:
        case N_WITH:
            rc = eval_pipe(e, nd->pipe, dot, &v);
            if (rc == 0) {
                if (tmpl_truth(&v)) {
                    rc = eval_list(e, nd->body, nd->k == N_WITH ? &v : dot, fl);
                } else if (nd->alt != NULL) {
                    rc = eval_list(e, nd->alt, dot, fl); /* else, or the else-if node */
                }
            }
            break;
        case N_RANGE:
            rc = eval_pipe(e, nd->pipe, dot, &v);
            if (rc == 0) {
                rc = eval_range(e, nd, dot, &v, fl);
            }
            break;
        case N_BREAK:
            *fl = FLOW_BREAK;
            break;
        case N_CONTINUE:
            *fl = FLOW_CONTINUE;
            break;
        }
    }
    e->depth--;
    return rc;
}

int logql_tmpl_render(const logql_tmpl *t, const struct logql_tmpl_env *env, arena *scratch,
                      const char **out, size_t *out_n, char *err, size_t errlen)
{
    struct teval e;
    memset(&e, 0, sizeof(e));
    e.c = (struct tctx){.env = env, .a = scratch, .err = err, .errlen = errlen};
    e.out.c = &e.c;
    e.vars[0] = (struct tv){.k = TV_LABELS};
    struct tv root = {.k = TV_LABELS};
    enum flow fl = FLOW_NEXT;
    int rc = eval_list(&e, t->root, &root, &fl);
    if (rc == -ENOMEM || (rc != 0 && !e.c.failed)) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (rc != 0) {
        return -EINVAL;
    }
    *out = e.out.p ? e.out.p : "";
    *out_n = e.out.n;
    return 0;
}
