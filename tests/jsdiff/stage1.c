/*
 * stage1.c - a measurement, not part of MiraDB: simdjson's stage 1 (quote,
 * backslash and structural bytes of each 64-byte chunk as bit masks, escaped
 * quotes removed, the in-string mask by prefix XOR, then the structural
 * offsets written out) with SSE2 only, the x86-64 baseline this build
 * targets, so that its instructions per byte can be set against the JSON
 * decoder's whole budget (bench/PERFORMANCE.md, h-json5).
 *
 *   cc -O2 -g -o stage1 tests/jsdiff/stage1.c
 *   valgrind --tool=callgrind --toggle-collect=stage1 ./stage1 FILE 1
 * (last argument 0: masks only, 1: offsets written too). FILE: one request
 * from tests/jsdiff/dump.c.
 */
#include <emmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t pxor(uint64_t x)
{
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}
size_t stage1(const uint8_t *s, size_t n, uint32_t *idx, int flatten);
__attribute__((noinline)) size_t stage1(const uint8_t *s, size_t n, uint32_t *idx, int flatten)
{
    uint64_t prev_esc = 0, prev_in = 0;
    size_t ni = 0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        uint64_t bs = 0, q = 0, st = 0;
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i + 16 * k));
            bs |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')))
                  << (16 * k);
            q |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')))
                 << (16 * k);
            /* structural: { } [ ] , : ; '{'|0x20... use (v|0x20)=='{' covers [ { ; ']'|'}' same;
             * ',' ':' */
            __m128i o = _mm_or_si128(v, _mm_set1_epi8(0x20));
            __m128i t = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(o, _mm_set1_epi8('{')),
                                                  _mm_cmpeq_epi8(o, _mm_set1_epi8('}'))),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')),
                                                  _mm_cmpeq_epi8(v, _mm_set1_epi8(':'))));
            st |= (uint64_t)(uint16_t)_mm_movemask_epi8(t) << (16 * k);
        }
        /* escaped bytes (simdjson's find_escaped_branchless) */
        uint64_t esc;
        {
            uint64_t b = bs & ~prev_esc;
            uint64_t odd = 0xAAAAAAAAAAAAAAAAull;
            uint64_t starts = b & ~(b << 1);
            uint64_t even_starts = starts & ~odd, odd_starts = starts & odd;
            uint64_t es = (even_starts + b), os;
            uint64_t carry = __builtin_add_overflow(odd_starts, b, &os);
            uint64_t ece = es & ~b, oce = os & ~b;
            esc = ((ece & odd) | (oce & ~odd)) | (prev_esc & 1);
            prev_esc = carry;
        }
        q &= ~esc;
        uint64_t in = pxor(q) ^ prev_in;
        prev_in = (uint64_t)((int64_t)in >> 63);
        uint64_t bits = (st & ~in) | q;
        if (flatten) {
            while (bits) {
                idx[ni++] = (uint32_t)(i + __builtin_ctzll(bits));
                bits &= bits - 1;
            }
        } else
            ni += __builtin_popcountll(bits);
    }
    return ni;
}
int main(int argc, char **argv)
{
    static uint8_t b[1 << 21];
    FILE *f = argc == 3 ? fopen(argv[1], "rb") : NULL;
    if (f == NULL) {
        fprintf(stderr, "stage1 FILE 0|1\n");
        return 2;
    }
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    uint32_t *idx = malloc(n * 4 + 4);
    if (idx == NULL) {
        return 1;
    }
    size_t k = stage1(b, n, idx, atoi(argv[2]));
    printf("%zu bytes, %zu structurals\n", n, k);
    free(idx);
    return 0;
}
