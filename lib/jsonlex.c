/*
 * jsonlex.c - JSON lexer (see jsonlex.h): strings validated and measured in
 * one pass (sixteen bytes at a time with SSE2, else eight, where nothing
 * needs a look; the stop byte found from the mask), unescaped
 * only when asked, numbers by the JSON grammar, values skipped without
 * recursion.
 */
#include "lib/jsonlex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/hex.h"
#include "lib/utf8.h"

int jsonlex_fail(struct jsonlex *x, size_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, sizeof(x->err), fmt, ap);
    va_end(ap);
    x->err_at = at;
    return -EPROTO;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit((unsigned char)p[i]);
        if (d < 0) {
            return -1;
        }
        v = v << 4 | d;
    }
    return v;
}

/* 1 for '"', '\\' and control characters: where the string scan stops. */
static const uint8_t str_stop[256] = {
    [0 ... 0x1f] = 1,
    ['"'] = 1,
    ['\\'] = 1,
};

/* Whether any of the 8 bytes in |x| is '"', '\\' or below 0x20 (SWAR). */
static inline bool has_stop(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x)) & high;
}

/*
 * The offset of the first '"', '\\' or control byte in s[i, n), or of a byte
 * close to the end (the caller's byte loop finishes from there): sixteen
 * bytes at a time with SSE2, else eight with has_stop. The stop byte found
 * is the lowest set bit of a mask, so no byte loop runs after a hit.
 */
static inline size_t skip_plain(const unsigned char *s, size_t i, size_t n)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  ctl = _mm_set1_epi8(0x1f);
    while (n - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        /* max(v, 0x1f) == 0x1f exactly for the bytes 0x00..0x1f (unsigned) */
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                         _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
        i += 16;
    }
#endif
    while (n - i >= 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (has_stop(w)) {
            break;
        }
        i += 8;
    }
    return i;
}

size_t jsonlex_plain_end(const char *s, size_t i, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    i = skip_plain(u, i, n);
    while (i < n && !str_stop[u[i]]) {
        i++;
    }
    return i;
}

/* At '"': validates the string (escapes, surrogate pairs) and moves past it. */
int jsonlex_str(struct jsonlex *x, struct jsonlex_str *out)
{
    const unsigned char *s = (const unsigned char *)x->s;
    size_t i = x->pos + 1, shrink = 0;
    bool esc = false;
    out->at = i;
    for (;;) {
        i = skip_plain(s, i, x->n);
        while (i < x->n && !str_stop[s[i]]) {
            i++;
        }
        if (i >= x->n) {
            return jsonlex_fail(x, x->pos, "unterminated string");
        }
        if (s[i] == '"') {
            break;
        }
        if (s[i] != '\\') {
            return jsonlex_fail(x, i, "control character 0x%02x in a string", s[i]);
        }
        esc = true;
        if (i + 1 >= x->n) {
            return jsonlex_fail(x, x->pos, "unterminated string");
        }
        switch (s[i + 1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
            shrink += 1;
            i += 2;
            continue;
        case 'u':
            break;
        default:
            return jsonlex_fail(x, i, "bad escape '\\%c'", s[i + 1]);
        }
        int cp = x->n - i >= 6 ? hex4(x->s + i + 2) : -1;
        if (cp < 0) {
            return jsonlex_fail(x, i, "bad \\u escape");
        }
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            return jsonlex_fail(x, i, "lone low surrogate in a \\u escape");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            int lo =
                x->n - i >= 12 && s[i + 6] == '\\' && s[i + 7] == 'u' ? hex4(x->s + i + 8) : -1;
            if (lo < 0xdc00 || lo > 0xdfff) {
                return jsonlex_fail(x, i, "lone high surrogate in a \\u escape");
            }
            shrink += 12 - 4;
            i += 12;
            continue;
        }
        shrink += 6 - (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3);
        i += 6;
    }
    out->raw = i - out->at;
    out->len = out->raw - shrink;
    out->esc = esc;
    x->pos = i + 1;
    return 0;
}

/* Writes the js->len unescaped bytes to |d| (the string was validated by lex_str). */
void jsonlex_unescape(const struct jsonlex *x, const struct jsonlex_str *js, char *d)
{
    const char *s = x->s + js->at, *e = s + js->raw;
    if (!js->esc) {
        memcpy(d, s, js->raw);
        return;
    }
    while (s < e) {
        const char *bs = memchr(s, '\\', (size_t)(e - s));
        size_t run = (size_t)((bs ? bs : e) - s);
        memcpy(d, s, run);
        d += run;
        s += run;
        if (bs == NULL) {
            break;
        }
        char c = s[1];
        s += 2;
        switch (c) {
        case 'b':
            *d++ = '\b';
            break;
        case 'f':
            *d++ = '\f';
            break;
        case 'n':
            *d++ = '\n';
            break;
        case 'r':
            *d++ = '\r';
            break;
        case 't':
            *d++ = '\t';
            break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(s);
            s += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                uint32_t lo = (uint32_t)hex4(s + 2);
                s += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            d += utf8_put(d, cp);
            break;
        }
        default: /* '"', '\\', '/' */
            *d++ = c;
            break;
        }
    }
}

/* Length of the JSON number at p[0..n) (0 if none starts there). */
size_t jsonlex_num_span(const char *p, size_t n)
{
    size_t i = 0;
    if (i < n && p[i] == '-') {
        i++;
    }
    if (i >= n) {
        return 0;
    }
    if (p[i] == '0') {
        i++;
    } else if (p[i] >= '1' && p[i] <= '9') {
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            i++;
        }
    } else {
        return 0;
    }
    if (i < n && p[i] == '.') {
        size_t k = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            i++;
        }
        if (i == k) {
            return 0;
        }
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) {
            i++;
        }
        size_t k = i;
        while (i < n && p[i] >= '0' && p[i] <= '9') {
            i++;
        }
        if (i == k) {
            return 0;
        }
    }
    return i;
}

/* At a number: moves past it; |at|/|len| give its text. */
int jsonlex_num(struct jsonlex *x, size_t *at, size_t *len)
{
    size_t k = jsonlex_num_span(x->s + x->pos, x->n - x->pos);
    if (k == 0) {
        return jsonlex_fail(x, x->pos, "malformed number");
    }
    *at = x->pos;
    *len = k;
    x->pos += k;
    return 0;
}

/* Skips one value of any kind, validating it, without recursion. */
int jsonlex_skip(struct jsonlex *x)
{
    uint64_t is_obj[JSONLEX_SKIP_DEPTH / 64];
    int depth = 0, rc;
    struct jsonlex_str js;
    size_t at, len;
    for (;;) {
        int c = jsonlex_peek(x);
        switch (c) {
        case '{':
        case '[':
            if (depth == JSONLEX_SKIP_DEPTH) {
                return jsonlex_fail(x, x->pos, "nesting deeper than %d", JSONLEX_SKIP_DEPTH);
            }
            if (c == '{') {
                is_obj[depth / 64] |= 1ull << (depth % 64);
            } else {
                is_obj[depth / 64] &= ~(1ull << (depth % 64));
            }
            depth++;
            x->pos++;
            if (c == '{') {
                int c2 = jsonlex_peek(x);
                if (c2 == '}') {
                    x->pos++;
                    depth--;
                    break;
                }
                if (c2 != '"') {
                    return jsonlex_fail(x, x->pos, "expected a member name or '}'");
                }
                if ((rc = jsonlex_str(x, &js)) < 0) {
                    return rc;
                }
                if (jsonlex_peek(x) != ':') {
                    return jsonlex_fail(x, x->pos, "expected ':'");
                }
                x->pos++;
            } else if (jsonlex_peek(x) == ']') {
                x->pos++;
                depth--;
                break;
            }
            continue; /* a value follows */
        case '"':
            if ((rc = jsonlex_str(x, &js)) < 0) {
                return rc;
            }
            break;
        case 't':
            if ((rc = jsonlex_lit(x, "true", 4)) < 0) {
                return rc;
            }
            break;
        case 'f':
            if ((rc = jsonlex_lit(x, "false", 5)) < 0) {
                return rc;
            }
            break;
        case 'n':
            if ((rc = jsonlex_lit(x, "null", 4)) < 0) {
                return rc;
            }
            break;
        case -1:
            return jsonlex_fail(x, x->pos, "unexpected end of input");
        default:
            if (c != '-' && (c < '0' || c > '9')) {
                return jsonlex_fail(x, x->pos, "unexpected character '%c'", c);
            }
            if ((rc = jsonlex_num(x, &at, &len)) < 0) {
                return rc;
            }
            break;
        }
        /* after a value: close containers until one continues */
        for (;;) {
            if (depth == 0) {
                return 0;
            }
            bool obj = is_obj[(depth - 1) / 64] >> ((depth - 1) % 64) & 1;
            c = jsonlex_peek(x);
            if (c == ',') {
                x->pos++;
                if (obj) {
                    if (jsonlex_peek(x) != '"') {
                        return jsonlex_fail(x, x->pos, "expected a member name");
                    }
                    if ((rc = jsonlex_str(x, &js)) < 0) {
                        return rc;
                    }
                    if (jsonlex_peek(x) != ':') {
                        return jsonlex_fail(x, x->pos, "expected ':'");
                    }
                    x->pos++;
                }
                break;
            }
            if (c == (obj ? '}' : ']')) {
                x->pos++;
                depth--;
                continue;
            }
            if (c < 0) {
                return jsonlex_fail(x, x->pos, "unexpected end of input");
            }
            return jsonlex_fail(x, x->pos, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
}

/* 1: a member follows (key set, cursor at its value); 0: the object ended. */
int jsonlex_obj_next(struct jsonlex *x, struct jsonlex_str *key, bool *first)
{
    int c = jsonlex_peek(x), rc;
    if (c == '}') {
        x->pos++;
        return 0;
    }
    if (!*first) {
        if (c != ',') {
            return c < 0 ? jsonlex_fail(x, x->pos, "unexpected end of input")
                         : jsonlex_fail(x, x->pos, "expected ',' or '}'");
        }
        x->pos++;
        c = jsonlex_peek(x);
    }
    *first = false;
    if (c != '"') {
        return c < 0 ? jsonlex_fail(x, x->pos, "unexpected end of input")
                     : jsonlex_fail(x, x->pos, "expected a member name");
    }
    if ((rc = jsonlex_str(x, key)) < 0) {
        return rc;
    }
    if (jsonlex_peek(x) != ':') {
        return jsonlex_fail(x, x->pos, "expected ':'");
    }
    x->pos++;
    jsonlex_ws(x);
    return 1;
}

/* 1: an element follows (cursor at it); 0: the array ended. */
int jsonlex_arr_next(struct jsonlex *x, bool *first)
{
    int c = jsonlex_peek(x);
    if (c == ']') {
        x->pos++;
        return 0;
    }
    if (!*first) {
        if (c != ',') {
            return c < 0 ? jsonlex_fail(x, x->pos, "unexpected end of input")
                         : jsonlex_fail(x, x->pos, "expected ',' or ']'");
        }
        x->pos++;
        c = jsonlex_peek(x);
    }
    *first = false;
    if (c < 0) {
        return jsonlex_fail(x, x->pos, "unexpected end of input");
    }
    return 1;
}
