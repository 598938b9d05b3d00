/*
 * ascii.c - ascii_span (ascii.h). Each path reads whole vectors while at
 * least one fits before |n|, then finds the first high byte inside the
 * vector that has one (its movemask's lowest bit), and ends with words
 * and bytes: nothing is read at or past s + n.
 */
#include "lib/ascii.h"

#include <string.h>

#include "lib/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ASCII_AVX2 1
#endif
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* From |i|: 8 bytes a word, then bytes. */
static size_t span_tail(const uint8_t *s, size_t n, size_t i)
{
    for (; n - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        w &= 0x8080808080808080ull;
        if (w != 0) {
            return i + (size_t)__builtin_ctzll(w) / 8; /* little-endian: the lowest address */
        }
    }
    while (i < n && s[i] < 0x80) {
        i++;
    }
    return i;
}

size_t ascii_span_base(const uint8_t *s, size_t n)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; n - i >= 64; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))) != 0) {
            break;
        }
    }
    for (; n - i >= 16; i += 16) {
        int m = _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        if (m != 0) {
            return i + (size_t)__builtin_ctz((unsigned)m);
        }
    }
#endif
    return span_tail(s, n, i);
}

#ifdef ASCII_AVX2
__attribute__((target("avx2"))) static size_t span_avx2(const uint8_t *s, size_t n)
{
    size_t i = 0;
    for (; n - i >= 128; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 96));
        if (_mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d))) !=
            0) {
            break;
        }
    }
    for (; n - i >= 32; i += 32) {
        int m = _mm256_movemask_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
        if (m != 0) {
            return i + (size_t)__builtin_ctz((unsigned)m);
        }
    }
    return span_tail(s, n, i);
}
#endif

size_t ascii_span(const uint8_t *s, size_t n)
{
#ifdef ASCII_AVX2
    if (n >= 128 && cpu_avx2()) {
        return span_avx2(s, n);
    }
#endif
    return ascii_span_base(s, n);
}
