/*
 * qlex.h - lexer, literal decoders, error reporting and regex wrapper shared
 * by the LogQL and TraceQL parsers (query/logql.c, query/traceql.c).
 *
 * The parsers own nothing here but the token stream: a `struct qlex` walks one
 * query source, hands out tokens whose strings live in the parser's arena, and
 * keeps the first error as "parse error at line L, col C: <what>". Lines and
 * columns are 1-based and count bytes.
 *
 * Regular expressions use Go RE2 syntax (FACTS.md 0.11, C.9, E.5). They are
 * checked for syntax PCRE2 accepts but RE2 rejects (lookaround,
 * backreferences, possessive and nested repeats, verbs, ...), translated where
 * the two differ in meaning (`\v`, Go octal escapes) and compiled with PCRE2
 * + JIT (LIBS.md 9): anchored ones as `^(?s:re)$` by compile-time
 * ANCHORED|ENDANCHORED|DOTALL, unanchored ones as a search.
 */
#ifndef MIRADB_QLEX_H
#define MIRADB_QLEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/arena.h"

enum qlex_lang {
    QLEX_LOGQL,
    QLEX_TRACEQL,
};

enum qtok {
    QT_EOF,
    QT_IDENT,    /* [A-Za-z_][A-Za-z0-9_]*; s/n point into the source */
    QT_STRING,   /* "go string" or `raw`; s/n decoded (arena, NUL-terminated) */
    QT_NUMBER,   /* num; is_int and i when written without '.' or exponent */
    QT_DURATION, /* i = nanoseconds (Go syntax plus d, w, y units) */
    QT_BYTES,    /* num = bytes (LogQL only: 20MB, 1.5KiB) */
    QT_FLAG,     /* --strict (LogQL); s/n = "strict" */
    QT_ATTR,     /* TraceQL span.x / resource."a b" / .x; scope, s/n = name */
    QT_SCOPED,   /* TraceQL span:name, trace:duration; scope, s/n = name after ':' */
    QT_LBRACE,
    QT_RBRACE,
    QT_LPAREN,
    QT_RPAREN,
    QT_LBRACKET,
    QT_RBRACKET,
    QT_COMMA,
    QT_EQ,      /* = */
    QT_EQEQ,    /* == */
    QT_NEQ,     /* != */
    QT_RE,      /* =~ */
    QT_NRE,     /* !~ (TraceQL between spansets: not-sibling) */
    QT_GT,      /* > */
    QT_GE,      /* >= */
    QT_LT,      /* < */
    QT_LE,      /* <= */
    QT_PIPE,    /* | */
    QT_PIPE_EQ, /* |= (LogQL) */
    QT_PIPE_RE, /* |~ (LogQL) */
    QT_PIPE_GT, /* |> (LogQL pattern filter) */
    QT_BANG_GT, /* !> (LogQL negated pattern filter; TraceQL not-child) */
    QT_ADD,
    QT_SUB,
    QT_MUL,
    QT_DIV,
    QT_MOD,
    QT_POW,
    /* TraceQL only */
    QT_AND,       /* && */
    QT_OR,        /* || */
    QT_NOT,       /* ! */
    QT_DESC,      /* >> */
    QT_ANC,       /* << */
    QT_TILDE,     /* ~ */
    QT_AMP_GT,    /* &> */
    QT_AMP_DESC,  /* &>> */
    QT_AMP_LT,    /* &< */
    QT_AMP_ANC,   /* &<< */
    QT_AMP_TILDE, /* &~ */
    QT_BANG_DESC, /* !>> */
    QT_BANG_LT,   /* !< */
    QT_BANG_ANC,  /* !<< */
};

/* TraceQL attribute / intrinsic scopes as the lexer sees them. */
enum qlex_scope {
    QLEX_SCOPE_NONE, /* .x */
    QLEX_SCOPE_SPAN,
    QLEX_SCOPE_RESOURCE,
    QLEX_SCOPE_EVENT,
    QLEX_SCOPE_LINK,
    QLEX_SCOPE_INSTRUMENTATION,
    QLEX_SCOPE_TRACE, /* only in trace:xxx */
};

struct qlex_tok {
    enum qtok kind;
    size_t pos; /* byte offset of the first byte */
    size_t end; /* byte offset just past the token */
    const char *s;
    size_t n;
    double num;
    int64_t i;
    bool is_int;
    enum qlex_scope scope;
};

/* One query being lexed. Strings are allocated from |a|, which the caller
 * owns; the first error is written to err (NUL-terminated, truncated to
 * errlen) and kept in rc. */
struct qlex {
    const char *src;
    size_t len;
    size_t pos;
    enum qlex_lang lang;
    arena *a;
    char *err;
    size_t errlen;
    int rc;
    struct qlex_re *res; /* every regex compiled for this query (list) */
};

void qlex_init(struct qlex *lx, enum qlex_lang lang, const char *src, size_t len, arena *a,
               char *err, size_t errlen);

/* Next token into *t. Returns 0, or -EINVAL (lexical error, message set) or
 * -ENOMEM (arena exhausted, message set). */
int qlex_next(struct qlex *lx, struct qlex_tok *t);

/* Records "parse error at line L, col C: <fmt>" for byte offset |pos| unless
 * an error is already recorded. Returns lx->rc (-EINVAL unless set before). */
int qlex_fail(struct qlex *lx, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an out-of-memory error ("query too large ..."); returns -ENOMEM. */
int qlex_nomem(struct qlex *lx);

/* Human description of a token for messages: `"}"`, `identifier "foo"`,
 * `string "abc"`, `end of query`. Writes into buf, returns buf. */
const char *qlex_desc(const struct qlex *lx, const struct qlex_tok *t, char *buf, size_t n);

/* 1-based line and column of byte offset |pos|. */
void qlex_linecol(const char *src, size_t len, size_t pos, unsigned *line, unsigned *col);

/* Arena helpers that record -ENOMEM in lx on failure (zeroed memory). */
void *qlex_alloc(struct qlex *lx, size_t n);
char *qlex_strndup(struct qlex *lx, const char *s, size_t n);

/* --- literal parsers (also for executors parsing label values) --------- */

/* Go time.ParseDuration syntax ("1h30m", "1.5s", "300ms", "-2us", "µs"), plus
 * the d (24h), w (7d) and y (365d) units when allow_dwy. Returns 0,
 * -EINVAL on syntax, -ERANGE on overflow of int64 nanoseconds. */
int qlex_parse_duration(const char *s, size_t n, bool allow_dwy, int64_t *ns);

/* go-humanize ParseBytes: "42", "1.5KiB", "20 MB", "3k" (case-insensitive;
 * kB = 1000, KiB = 1024, ...). Returns 0, -EINVAL or -ERANGE. */
int qlex_parse_bytes(const char *s, size_t n, double *bytes);

/* --- regular expressions ------------------------------------------------ */

typedef struct qlex_re qlex_re;

/* Compiles RE2-syntax |pat| (decoded string of the token at |pos|). Anchored:
 * whole-subject match with `.` matching '\n' (Prometheus `^(?s:re)$`);
 * otherwise an unanchored search with Go defaults. The regex is added to
 * lx->res and freed by qlex_re_free_all(). Returns 0 or -EINVAL with the
 * message set. */
int qlex_re_compile(struct qlex *lx, size_t pos, const char *pat, size_t n, bool anchored,
                    qlex_re **out);

/* 1 match, 0 no match, -E2BIG when the match limit was hit (pathological
 * backtracking), -EINVAL on another matcher error. Any bytes, including
 * invalid UTF-8 (bad bytes match nothing). Thread-safe: match data are per
 * thread. */
int qlex_re_match(const qlex_re *re, const char *s, size_t n);

/* Number of named capture groups ((?P<name>...)) in the regex. */
unsigned qlex_re_named_groups(const qlex_re *re);

/* Number of capture groups, named or not (group 0, the whole match, not
 * counted). */
unsigned qlex_re_capture_count(const qlex_re *re);

/* The i-th named group (0 <= i < qlex_re_named_groups): its NUL-terminated
 * name (valid while the regex lives) and group number. 0 or -ENOENT. */
int qlex_re_group_name(const qlex_re *re, unsigned i, const char **name, unsigned *group);

/* Like qlex_re_match, and on a match writes the byte offsets of groups
 * 0 .. pairs-1 to ovec[2g], ovec[2g+1] (SIZE_MAX for a group that did not
 * take part). ovec holds 2 * pairs entries; pairs >= 1. Per-thread match
 * data, grown on demand. For | regexp and label_replace. */
int qlex_re_exec(const qlex_re *re, const char *s, size_t n, size_t *ovec, unsigned pairs);
/* qlex_re_exec searching from byte |start| of the whole subject (so ^, \b
 * and lookbehind-free anchors see the text before it, as Go's FindAll
 * does); offsets are relative to s. 0 when start > n. */
int qlex_re_exec_at(const qlex_re *re, const char *s, size_t n, size_t start, size_t *ovec,
                    unsigned pairs);

/* Whether a match on the calling thread hit a limit (-E2BIG above) since
 * the last call; clears the note. Callers that see matches only as bool
 * (logql_match_label, logql_line_filter_match, traceql_regex_match) count
 * a limit hit as "no match"; executors poll this after each row and stop
 * the query with an error instead, rather than spending the whole timeout
 * backtracking line after line. */
bool qlex_re_take_limit_hit(void);

/* Frees a list built by qlex_re_compile (lx->res). NULL-safe. */
void qlex_re_free_all(qlex_re *list);

/* Frees the calling thread's match data now (they are also freed at thread
 * exit). Optional. */
void qlex_thread_cleanup(void);

#endif
