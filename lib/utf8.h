/*
 * utf8.h - UTF-8 validation and encoding (RFC 3629: no overlong forms, no
 * UTF-16 surrogates, nothing above U+10FFFF).
 *
 * Static inline: the ingest decoders check every string field (protobuf)
 * or the whole body (OTLP/JSON) with utf8_check, and the JSON writer every
 * byte above 0x7f with utf8_seq. No allocation; callable from any thread.
 */
#ifndef MIRADB_LIB_UTF8_H
#define MIRADB_LIB_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Length (1..4) of the valid UTF-8 sequence that starts |s|[0..n), or 0
 * when s[0] starts none (n >= 1). */
static inline size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xc2) {
        return 0; /* continuation byte or overlong 2-byte lead */
    }
    if (c < 0xe0) {
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (c < 0xf0) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f)) {
            return 0; /* overlong, or a UTF-16 surrogate */
        }
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f)) {
            return 0; /* overlong, or above U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* Offset of the first byte of |s|[0..n) at or above 0x80, or |n| when all
 * of it is ASCII. Sixteen bytes at a time (SSE2, baseline on x86-64), then
 * eight; a tail shorter than a word is read as overlapping words (the bytes
 * before it are already known to be ASCII), so there is no byte loop. */
static inline size_t utf8_ascii_len(const uint8_t *s, size_t n)
{
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 16 <= n; i += 16) {
        int m = _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        if (m != 0) {
            return i + (size_t)__builtin_ctz((unsigned)m);
        }
    }
#endif
    uint64_t w;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) {
            break;
        }
    }
    if (i + 8 <= n) {
        /* the word at i has a high byte */
    } else if (n >= 8) {
        i = n - 8; /* overlaps ASCII already checked */
        memcpy(&w, s + i, 8);
        if (!(w & 0x8080808080808080ull)) {
            return n;
        }
    } else if (n - i >= 4) {
        uint32_t a, b;
        memcpy(&a, s + i, 4);
        memcpy(&b, s + n - 4, 4);
        if (!((a | b) & 0x80808080u)) {
            return n;
        }
    } else {
        for (; i < n; i++) {
            if (s[i] >= 0x80) {
                return i;
            }
        }
        return n;
    }
    while (s[i] < 0x80) {
        i++; /* bounded: a byte at or above 0x80 lies ahead */
    }
    return i;
}

/* utf8_check's loop from |i|, where a byte at or above 0x80 sits. */
static __attribute__((noinline, unused)) size_t utf8_check_from(const uint8_t *s, size_t n,
                                                                size_t i)
{
    while (i < n) {
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0) {
            return i;
        }
        i += k;
        i += utf8_ascii_len(s + i, n - i);
    }
    return n;
}

/* Offset of the first byte of |s|[0..n) that is not part of valid UTF-8,
 * or |n| when all of it is. All-ASCII input (the usual case) stays inline. */
static inline size_t utf8_check(const uint8_t *s, size_t n)
{
    size_t i = utf8_ascii_len(s, n);
    if (__builtin_expect(i == n, 1)) {
        return n;
    }
    return utf8_check_from(s, n, i);
}

static inline bool utf8_valid(const uint8_t *s, size_t n)
{
    return utf8_check(s, n) == n;
}

/* Code point |cp| (<= 0x10FFFF, not a surrogate) as 1..4 bytes at |d|;
 * returns how many. */
static inline size_t utf8_put(char *d, uint32_t cp)
{
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xc0 | cp >> 6);
        d[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xe0 | cp >> 12);
        d[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        d[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (char)(0xf0 | cp >> 18);
    d[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    d[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    d[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* U+FFFD, what a byte that starts no valid sequence becomes in output that
 * must be UTF-8. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

#endif
