/*
 * hex.h - hexadecimal digits: trace and span ids in Tempo/Loki answers and
 * OTLP/JSON, %XX in URLs and grpc-message, \u00XX in JSON.
 *
 * The digit helpers are static inline: the OTLP/JSON decoder reads two ids
 * per span with them. No allocation; callable from any thread.
 */
#ifndef MIRADB_LIB_HEX_H
#define MIRADB_LIB_HEX_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern const char hex_lower[16]; /* "0123456789abcdef" */
extern const char hex_upper[16]; /* "0123456789ABCDEF" */

/* The value of hex digit |c| (either case), or -1. */
static inline int hex_digit(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* |n| bytes as lower-case hex: 2n digits and a NUL into |out|. */
static inline void hex_encode(char *out, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_lower[p[i] >> 4];
        out[2 * i + 1] = hex_lower[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* 2n hex digits (either case) at |h| into |n| bytes at |out|: 0, or
 * -EINVAL at a byte that is not a hex digit (|out| is then partly written). */
static inline int hex_decode(uint8_t *out, const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit((unsigned char)h[2 * i]), lo = hex_digit((unsigned char)h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -EINVAL;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

#endif
