/*
 * jsonlex.h - a validating JSON lexer (RFC 8259) over a text in memory:
 * the cursor the OTLP/JSON decoder (proto/jsondec.c) drives through a
 * request body, and the one LogQL's `| json` stage is to share.
 *
 * The caller walks the text by grammar (an object's members with
 * jsonlex_obj_next, an array's elements with jsonlex_arr_next, a scalar
 * with jsonlex_str / jsonlex_num / jsonlex_lit) and the lexer validates
 * as it goes: string escapes and surrogate pairs, the number grammar,
 * what may follow a value. It does not check UTF-8 (check the whole text
 * once with lib/utf8.h first) and allocates nothing: a string is given as
 * its place in the text, to be unescaped where the caller wants it.
 *
 * Errors: a call that fails returns -EPROTO with x->err (a NUL-terminated
 * message such as "unterminated string") and x->err_at (the offset it
 * concerns) set; the cursor is then wherever the call stopped. The text
 * is borrowed for the lexer's life. One lexer per thread.
 */
#ifndef MIRADB_LIB_JSONLEX_H
#define MIRADB_LIB_JSONLEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Nesting jsonlex_skip accepts inside the value it skips. */
#define JSONLEX_SKIP_DEPTH 1024

struct jsonlex {
    const char *s; /* the text, borrowed */
    size_t n;
    size_t pos;    /* the cursor: offset of the next byte to read */
    size_t err_at; /* after a failed call: the offset the error concerns */
    char err[96];  /* after a failed call: what is wrong */
};

/* A lexed string: its raw bytes s[at, at+raw) and its unescaped length. */
struct jsonlex_str {
    size_t at;
    size_t raw;
    size_t len;
    bool esc; /* it has escapes: raw != len, or a \/ style one */
};

/* Records an error (printf-style message, offset |at|) and returns -EPROTO:
 * for callers that find the text wrong by their own rules, so they report
 * it as the lexer does. */
__attribute__((format(printf, 3, 4))) int jsonlex_fail(struct jsonlex *x, size_t at,
                                                       const char *fmt, ...);

static inline void jsonlex_init(struct jsonlex *x, const char *s, size_t n)
{
    x->s = s;
    x->n = n;
    x->pos = 0;
    x->err_at = 0;
    x->err[0] = '\0';
}

/* Moves past blanks (space, tab, CR, LF). */
static inline void jsonlex_ws(struct jsonlex *x)
{
    while (x->pos < x->n) {
        char c = x->s[x->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            break;
        }
        x->pos++;
    }
}

/* The next non-blank byte (the cursor moved to it), or -1 at the end. */
static inline int jsonlex_peek(struct jsonlex *x)
{
    jsonlex_ws(x);
    return x->pos < x->n ? (unsigned char)x->s[x->pos] : -1;
}

/* At '"': validates the string (escapes, surrogate pairs) and moves past it. */
int jsonlex_str(struct jsonlex *x, struct jsonlex_str *out);

/* The offset of the first '"', '\\' or control byte in s[i, n), or |n|:
 * where a run of string bytes that need no look ends. */
size_t jsonlex_plain_end(const char *s, size_t i, size_t n);

/* Writes the js->len unescaped bytes of a string jsonlex_str accepted to |d|. */
void jsonlex_unescape(const struct jsonlex *x, const struct jsonlex_str *js, char *d);

/* The string's bytes: in the text when it has no escapes, else unescaped
 * into |buf| (false when it does not fit in |cap|). */
static inline bool jsonlex_str_bytes(const struct jsonlex *x, const struct jsonlex_str *js,
                                     char *buf, size_t cap, const char **p)
{
    if (!js->esc) {
        *p = x->s + js->at;
        return true;
    }
    if (js->len > cap) {
        return false;
    }
    jsonlex_unescape(x, js, buf);
    *p = buf;
    return true;
}

/* Length of the JSON number at p[0..n) (0 if none starts there). */
size_t jsonlex_num_span(const char *p, size_t n);

/* At a number: moves past it; |at|/|len| give its text. */
int jsonlex_num(struct jsonlex *x, size_t *at, size_t *len);

/* At the literal |lit| (true, false, null; |n| bytes): moves past it.
 * Inline, so the compare of a constant literal is a few instructions. */
static inline int jsonlex_lit(struct jsonlex *x, const char *lit, size_t n)
{
    if (x->n - x->pos < n || memcmp(x->s + x->pos, lit, n) != 0) {
        return jsonlex_fail(x, x->pos, "unexpected characters (expected a JSON value)");
    }
    x->pos += n;
    return 0;
}

/* Consumes a null literal if one is next. */
static inline bool jsonlex_null(struct jsonlex *x)
{
    jsonlex_ws(x);
    if (x->n - x->pos >= 4 && memcmp(x->s + x->pos, "null", 4) == 0) {
        x->pos += 4;
        return true;
    }
    return false;
}

/* Skips one value of any kind, validating it, without recursion; nesting
 * deeper than JSONLEX_SKIP_DEPTH is an error. */
int jsonlex_skip(struct jsonlex *x);

/* After an object's '{': 1 when a member follows (|key| set, the cursor at
 * its value), 0 when the object ended (the cursor past '}'). |first| is
 * true before the first call and the lexer keeps it. */
int jsonlex_obj_next(struct jsonlex *x, struct jsonlex_str *key, bool *first);

/* After an array's '[': 1 when an element follows (the cursor at it), 0
 * when the array ended. |first| as for jsonlex_obj_next. */
int jsonlex_arr_next(struct jsonlex *x, bool *first);

#endif
