/*
 * base64.c - base64 encoding and decoding (see base64.h).
 */
#include "lib/base64.h"

#include <errno.h>

static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(char *out, const uint8_t *p, size_t n, bool pad)
{
    size_t o = 0;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = tab[x >> 18];
        out[o++] = tab[(x >> 12) & 63];
        out[o++] = tab[(x >> 6) & 63];
        out[o++] = tab[x & 63];
    }
    if (i < n) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = tab[x >> 18];
        out[o++] = tab[(x >> 12) & 63];
        if (i + 1 < n) {
            out[o++] = tab[(x >> 6) & 63];
        } else if (pad) {
            out[o++] = '=';
        }
        if (pad) {
            out[o++] = '=';
        }
    }
    out[o] = '\0';
    return o;
}

/* Digit value + 1 (0: not a digit); both alphabets. */
static const uint8_t dig[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,  ['H'] = 8,
    ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['-'] = 63,
    ['/'] = 64, ['_'] = 64,
};

size_t base64_unpad(const char *p, size_t n)
{
    for (int k = 0; k < 2 && n > 0 && p[n - 1] == '='; k++) {
        n--;
    }
    return n;
}

long base64_decoded_len(size_t n)
{
    if (n % 4 == 1) {
        return -1;
    }
    return (long)(n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0));
}

int base64_decode(uint8_t *out, const char *p, size_t n)
{
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = dig[(unsigned char)p[i]] - 1;
        if (v < 0) {
            return -EINVAL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *out++ = (uint8_t)(acc >> bits);
        }
    }
    return 0;
}
