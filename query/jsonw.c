/*
 * jsonw.c - streaming JSON writer (see jsonw.h).
 *
 * Escaping works on runs: bytes that need nothing are appended in one
 * evbuffer_add per run, so a long clean log line costs one copy.
 */
#include "query/jsonw.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

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

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) {
            return 0;
        }
        if (c == 0xe0 && s[1] < 0xa0) {
            return 0; /* overlong */
        }
        if (c == 0xed && s[1] >= 0xa0) {
            return 0; /* surrogate */
        }
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) {
            return 0;
        }
        if (c == 0xf0 && s[1] < 0x90) {
            return 0;
        }
        if (c == 0xf4 && s[1] >= 0x90) {
            return 0;
        }
        return 4;
    }
    return 0;
}

void jsonw_escape(struct evbuffer *out, const char *str, size_t n, bool html)
{
    static const char hex[] = "0123456789abcdef";
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
            size_t l = utf8_len(s + i, n - i);
            if (l > 0) {
                i += l;
                continue;
            }
        }
        if (i > run) {
            evbuffer_add(out, s + run, i - run);
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
                evbuffer_add(out, "\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
                el = 0;
            } else {
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                el = 6;
            }
            break;
        }
        if (el > 0) {
            evbuffer_add(out, esc, el);
        }
        i++;
        run = i;
    }
    if (n > run) {
        evbuffer_add(out, s + run, n - run);
    }
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
