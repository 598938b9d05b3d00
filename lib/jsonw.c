/*
 * jsonw.c - streaming JSON writer (see jsonw.h).
 *
 * Escaping works on runs: bytes that need nothing are appended in one
 * evbuffer_add per run, so a long clean log line costs one copy.
 */
#include "lib/jsonw.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "lib/hex.h"
#include "lib/utf8.h"

static void add(struct jsonw *w, const void *p, size_t n)
{
    if (w->over > 0) {
        return; /* inside a container refused as too deep */
    }
    if (evbuffer_add(w->out, p, n) < 0) {
        w->err = -ENOMEM;
    }
}

void jsonw_init(struct jsonw *w, struct evbuffer *out)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
}

/* Before any value or key: a comma when this is not the first member. */
static void sep(struct jsonw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth == 0 || w->over > 0) {
        return;
    }
    unsigned d = (unsigned)w->depth - 1;
    uint64_t bit = 1ull << (d % 64);
    if (w->nonempty[d / 64] & bit) {
        add(w, ",", 1);
    } else {
        w->nonempty[d / 64] |= bit;
    }
}

static void open_c(struct jsonw *w, char c)
{
    if (w->over > 0 || w->depth >= JSONW_MAX_DEPTH) {
        /* Refused: written as null, so the text stays valid JSON; what
         * comes before the matching close is not written (add() checks
         * |over|) and that close is dropped. */
        if (w->over == 0) {
            sep(w);
            add(w, "null", 4);
        }
        w->err = -E2BIG;
        w->over++;
        return;
    }
    sep(w);
    add(w, &c, 1);
    unsigned d = (unsigned)w->depth++;
    w->nonempty[d / 64] &= ~(1ull << (d % 64));
}

static void close_c(struct jsonw *w, char c)
{
    if (w->over > 0) {
        w->over--;
        return;
    }
    if (w->depth == 0) {
        return;
    }
    w->depth--;
    add(w, &c, 1);
}

void jsonw_obj_begin(struct jsonw *w)
{
    open_c(w, '{');
}

void jsonw_obj_end(struct jsonw *w)
{
    close_c(w, '}');
}

void jsonw_arr_begin(struct jsonw *w)
{
    open_c(w, '[');
}

void jsonw_arr_end(struct jsonw *w)
{
    close_c(w, ']');
}

/* Inlined into each caller below, so the evbuffer one makes direct calls. */
static inline __attribute__((always_inline)) void escape(jsonw_put_fn put, void *ctx,
                                                         const char *str, size_t n, bool html)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* start of the pending clean run */
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\' &&
            !(html && (c == '<' || c == '>' || c == '&'))) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t l = utf8_seq(s + i, n - i);
            if (l > 0) {
                i += l;
                continue;
            }
        }
        if (i > run) {
            put(ctx, s + run, i - run);
        }
        char esc[8];
        size_t el = 2;
        esc[0] = '\\';
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        default:
            if (c >= 0x80) {
                put(ctx, UTF8_REPLACEMENT, 3); /* for one bad byte */
                el = 0;
            } else {
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex_lower[c >> 4];
                esc[5] = hex_lower[c & 15];
                el = 6;
            }
            break;
        }
        if (el > 0) {
            put(ctx, esc, el);
        }
        i++;
        run = i;
    }
    if (n > run) {
        put(ctx, s + run, n - run);
    }
}

static void put_evbuffer(void *ctx, const void *p, size_t n)
{
    evbuffer_add(ctx, p, n);
}

void jsonw_escape(struct evbuffer *out, const char *s, size_t n, bool html)
{
    escape(put_evbuffer, out, s, n, html);
}

void jsonw_escape_to(jsonw_put_fn put, void *ctx, const char *s, size_t n, bool html)
{
    escape(put, ctx, s, n, html);
}

static void put_str(struct jsonw *w, const char *s, size_t n)
{
    if (w->over > 0) {
        return;
    }
    add(w, "\"", 1);
    jsonw_escape(w->out, s, n, w->html);
    add(w, "\"", 1);
}

void jsonw_keyn(struct jsonw *w, const char *k, size_t n)
{
    if (w->over > 0) {
        return; /* no member of a dropped container is pending */
    }
    sep(w);
    put_str(w, k, n);
    add(w, ":", 1);
    w->after_key = true;
}

void jsonw_key(struct jsonw *w, const char *k)
{
    jsonw_keyn(w, k, strlen(k));
}

void jsonw_str(struct jsonw *w, const char *s, size_t n)
{
    sep(w);
    put_str(w, s, n);
}

void jsonw_cstr(struct jsonw *w, const char *s)
{
    if (s == NULL) {
        jsonw_null(w);
        return;
    }
    jsonw_str(w, s, strlen(s));
}

void jsonw_strf(struct jsonw *w, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    }
    if ((size_t)n < sizeof(buf)) {
        jsonw_str(w, buf, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        w->err = -ENOMEM;
        jsonw_str(w, buf, sizeof(buf) - 1);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jsonw_str(w, big, (size_t)n);
    free(big);
}

void jsonw_int(struct jsonw *w, int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "%" PRId64, v);
    sep(w);
    add(w, buf, (size_t)n);
}

void jsonw_uint(struct jsonw *w, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "%" PRIu64, v);
    sep(w);
    add(w, buf, (size_t)n);
}

void jsonw_uint_str(struct jsonw *w, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "\"%" PRIu64 "\"", v);
    sep(w);
    add(w, buf, (size_t)n);
}

size_t jsonw_fmt_double(char *buf, double v)
{
    if (isnan(v)) {
        memcpy(buf, "NaN", 4);
        return 3;
    }
    if (isinf(v)) {
        memcpy(buf, v > 0 ? "+Inf" : "-Inf", 5);
        return 4;
    }
    if (v == 0) {
        /* -0 prints as 0, as Go's FormatFloat(..., 'f', -1) of a sample does */
        memcpy(buf, "0", 2);
        return 1;
    }
    /* Integers that fit exactly print without exponent or fraction. */
    if (fabs(v) < 1e15 && v == (double)(int64_t)v) {
        return (size_t)snprintf(buf, 32, "%" PRId64, (int64_t)v);
    }
    int n = 0;
    for (int prec = 1; prec <= 17; prec++) {
        n = snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            break;
        }
    }
    return (size_t)n;
}

void jsonw_double(struct jsonw *w, double v)
{
    char buf[32];
    size_t n = jsonw_fmt_double(buf, v);
    if (isnan(v) || isinf(v)) {
        jsonw_str(w, buf, n);
        return;
    }
    sep(w);
    add(w, buf, n);
}

void jsonw_double_str(struct jsonw *w, double v)
{
    char buf[32];
    size_t n = jsonw_fmt_double(buf, v);
    jsonw_str(w, buf, n);
}

void jsonw_bool(struct jsonw *w, bool v)
{
    sep(w);
    if (v) {
        add(w, "true", 4);
    } else {
        add(w, "false", 5);
    }
}

void jsonw_null(struct jsonw *w)
{
    sep(w);
    add(w, "null", 4);
}

void jsonw_raw(struct jsonw *w, const char *json, size_t n)
{
    sep(w);
    add(w, json, n);
}
