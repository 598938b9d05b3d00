/*
 * jsondec_counts.c - jdcounts_run and jdcounts_run_avx2 (jsondec_counts.h).
 *
 * One at a time: a count of 1 or 2 digits followed by ',' by one 8-byte
 * load from its '"'; any other by one 8-byte load of its digits and one
 * 2-byte load of the closing '"' and the ',' or ']' after it.
 *
 * Three at a time (AVX2): three counts of 1 or 2 digits, each followed by
 * ',' (or the third by ']'), take 12 to 15 bytes, laid out in one of 8
 * ways. One 16-byte load from the first '"'; its ends (',' and ']') tell
 * the way; then the masks of digits, quotes,
 * ends and zeros must be exactly the way's (and no 2-digit count starts
 * with '0'), and a shuffle puts each count's digits in a 16-bit lane, tens
 * then ones, that one multiply-add turns into its value. Any other text
 * goes one at a time, so both give the same answer.
 */
#include "proto/jsondec_counts.h"

#include <stdbool.h>
#include <string.h>

#include "lib/cpu.h"
#include "proto/jsondec_num.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define COUNTS_AVX2 1
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/*
 * The count whose '"' is at |p| (10 bytes readable) into |*v|: returns the
 * bytes it takes with the ',' or ']' after it, 0 when it is not one;
 * |*last| whether a ']' ends it.
 */
__attribute__((always_inline)) static inline unsigned count_one(const char *p, uint64_t *v,
                                                                bool *last)
{
    uint64_t w;
    uint16_t qc;
    memcpy(&w, p, 8);
    /* most counts have 1 or 2 digits and a ',' after: "d", or "dd", taken
     * by a compare of the quotes and the ',' at their places and a test of
     * the digits (no leading zero); the third byte tells which can match;
     * anything else, the last count before a ']' too, goes the 1-7-digit
     * way below */
    unsigned d1 = (uint8_t)(w >> 8) - (unsigned)'0';
    if ((uint8_t)(w >> 16) == '"') {
        if ((w & 0xffff00ffu) == 0x2c220022u && d1 < 10) {
            *v = d1;
            return 4;
        }
    } else {
        unsigned d2 = (uint8_t)(w >> 16) - (unsigned)'0';
        if ((w & 0xffff0000ffull) == 0x2c22000022ull && d1 - 1 < 9 && d2 < 10) {
            *v = d1 * 10 + d2;
            return 5;
        }
    }
    if (*p != '"') {
        return 0;
    }
    memcpy(&w, p + 1, 8);
    /* digits are the bytes of t below 10; the lowest other byte is flagged
     * exactly (no carry reaches it from below), which is all k asks for:
     * the bytes above it may carry */
    uint64_t t = w ^ 0x3030303030303030ull;
    uint64_t nd = ((t + 0x7676767676767676ull) | t) & 0x8080808080808080ull;
    unsigned k = (unsigned)__builtin_ctzll(nd | (1ull << 63)) >> 3;
    memcpy(&qc, p + 1 + k, 2); /* p + 9 at most: readable */
    if (k == 0 || ((uint8_t)t == 0 && k != 1) ||
        (qc != ('"' | ',' << 8) && qc != ('"' | ']' << 8))) {
        return 0;
    }
    uint64_t d0 = t & 0xf;
    if (k <= 2) { /* most counts: no 8-digit join and its constants */
        *v = k == 1 ? d0 : d0 * 10 + ((t >> 8) & 0xf);
    } else {
        *v = jdnum_eight_value((w << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k)));
    }
    *last = qc == ('"' | ']' << 8);
    return k + 3;
}
#endif

/*
 * The loop's one bound for the reads from |p|: 8 + 2 bytes readable and,
 * as every count takes 4 bytes or more, room in dst for the next one;
 * NULL when there is nothing to read.
 */
static const char *loop_lim(const char *s, size_t len, size_t i, uint32_t max)
{
    if (len < 10 || i > len - 10 || max == 0) {
        return NULL;
    }
    const char *p = s + i, *lim = s + len - 10;
    if ((size_t)(lim - p) > 4 * ((size_t)max - 1)) {
        lim = p + 4 * ((size_t)max - 1);
    }
    return lim;
}

/* A function of its own with locals only, so that the loop keeps its
 * constants and cursor in registers (GCC spilled them otherwise). */
__attribute__((noinline)) uint32_t jdcounts_run(const char *s, size_t len, size_t i, uint8_t *dst,
                                                uint32_t max, size_t *stop)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const char *p = s + i, *lim = loop_lim(s, len, i, max);
    if (lim == NULL) {
        return 0;
    }
    uint8_t *d = dst;
    while (p <= lim) {
        uint64_t v;
        bool last = false;
        unsigned took = count_one(p, &v, &last);
        if (took == 0) {
            break;
        }
        memcpy(d, &v, 8);
        d += 8;
        p += took;
        if (last) {
            break;
        }
    }
    uint32_t cnt = (uint32_t)((size_t)(d - dst) / 8);
    if (cnt != 0) {
        *stop = (size_t)(p - s) - 1; /* the ',' or ']' after the last */
    }
    return cnt;
#else
    (void)s, (void)len, (void)i, (void)dst, (void)max, (void)stop;
    return 0;
#endif
}

#ifdef COUNTS_AVX2
#define Z -128 /* a shuffle lane that takes no byte (zero) */
/*
 * The 8 ways three counts can be laid out (the digits of each noted), each
 * at the slot the multiply in three() sends the mask of its ends (',', or
 * ']' after the third) to. Masks bit x for byte x from the first '"'.
 * want: digits | quotes << 16 | ends << 32 (the 12-15 bytes the way takes
 * are all one of the three); mask: those bytes at 0, 16 and 32, and at 48
 * the tens digits and the first two ends, where the mask of '0' and ']'
 * bytes must be clear; shuf: count e's tens (Z for 1 digit) and ones to
 * lanes 2e and 2e + 1 (32 bytes an entry: the index a shift).
 */
static const struct way3 {
    uint64_t mask, want;
    int8_t shuf[16] __attribute__((aligned(16)));
} ways3[8] = {
    {0x02523fff3fff3fffull,
     0x00002210152908c6ull,
     {1, 2, 6, 7, Z, 11, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 2,2,1 */
    {0x05283fff3fff3fffull,
     0x0000210812950c62ull,
     {Z, 1, 5, 6, 10, 11, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 1,2,2 */
    {0x0a527fff7fff7fffull,
     0x00004210252918c6ull,
     {1, 2, 6, 7, 11, 12, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 2,2,2 */
    {0x05123fff3fff3fffull,
     0x0000211012a90c46ull,
     {1, 2, Z, 6, 10, 11, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 2,1,2 */
    {0x01281fff1fff1fffull,
     0x000011080a950462ull,
     {Z, 1, 5, 6, Z, 10, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 1,2,1 */
    {0x02881fff1fff1fffull,
     0x0000108809550622ull,
     {Z, 1, Z, 5, 9, 10, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 1,1,2 */
    {0x01121fff1fff1fffull,
     0x000011100aa90446ull,
     {1, 2, Z, 6, Z, 10, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 2,1,1 */
    {0x00880fff0fff0fffull,
     0x0000088805550222ull,
     {Z, 1, Z, 5, Z, 9, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z}}, /* 1,1,1 */
};
#undef Z
/* The bytes each way takes: 12 and one for each count of 2 digits. */
static const uint8_t adv3[8] = {14, 14, 15, 14, 13, 13, 13, 12};

/* The bytes three() compares with, made once a run. */
struct bytes3 {
    __m128i zero, nine, quote, comma, close, tens;
};

/* Three counts from the '"' at |p| (16 bytes readable) into d[0..31]
 * (the values at 0, 8, 16; 0 at 24): false when the text is not three,
 * else true with |*took| the bytes they take. */
__attribute__((target("avx2"), always_inline)) static inline bool
three(const char *p, uint8_t *d, const struct bytes3 *c, unsigned *took)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i dg = _mm_sub_epi8(x, c->zero);
    __m128i close = _mm_cmpeq_epi8(x, c->close);
    uint64_t digits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(dg, c->nine), dg));
    uint64_t quotes = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, c->quote));
    uint64_t ends = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, c->comma), close));
    uint64_t bad = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, c->zero), close));
    /* the ends in bytes 0-14 are those of the way the text is, if any (a
     * count after the third has none there): the multiply (found by
     * search) sends the 8 ways' masks to 8 slots; any other text to a slot
     * whose way it then fails */
    size_t slot = ((ends & 0x7fff) * 0x47b963b439798287ull) >> 61;
    const struct way3 *w = &ways3[slot];
    if (((digits | quotes << 16 | ends << 32 | bad << 48) & w->mask) != w->want) {
        return false;
    }
    __m128i pairs = _mm_shuffle_epi8(dg, _mm_load_si128((const __m128i *)(const void *)w->shuf));
    __m128i vals = _mm_maddubs_epi16(pairs, c->tens); /* tens * 10 + ones */
    _mm256_storeu_si256((__m256i *)(void *)d, _mm256_cvtepu16_epi64(vals));
    *took = adv3[slot];
    return true;
}

/* jdcounts_run's loop, three at a time up to a ']': where three() fails,
 * the next three one at a time (the last one or two, or a longer count). */
__attribute__((target("avx2"))) uint32_t jdcounts_run_avx2(const char *s, size_t len, size_t i,
                                                           uint8_t *dst, uint32_t max, size_t *stop)
{
    const char *p = s + i, *lim = loop_lim(s, len, i, max);
    if (lim == NULL) {
        return 0;
    }
    struct bytes3 c = {_mm_set1_epi8('0'), _mm_set1_epi8(9),   _mm_set1_epi8('"'),
                       _mm_set1_epi8(','), _mm_set1_epi8(']'), _mm_set1_epi16(0x010a)};
    /* opaque to GCC, so kept in registers rather than made again in the loop */
    __asm__(""
            : "+x"(c.zero), "+x"(c.nine), "+x"(c.quote), "+x"(c.comma), "+x"(c.close),
              "+x"(c.tens));
    uint8_t *d = dst;
    while (p <= lim) {
        unsigned took;
        /* three when the third starts at lim or before, as the loop
         * below would read it: 16 bytes readable, and room for 4 more (the
         * counts so far take 4 bytes or more each) */
        if (lim - p >= 10 && three(p, d, &c, &took)) {
            d += 24;
            p += took;
            if (p[-1] == ']') {
                break;
            }
            continue;
        }
        for (int k = 0; k < 3 && p <= lim; k++) {
            uint64_t v;
            bool last = false;
            took = count_one(p, &v, &last);
            if (took == 0) {
                goto out;
            }
            memcpy(d, &v, 8);
            d += 8;
            p += took;
            if (last) {
                goto out;
            }
        }
    }
out:;
    uint32_t cnt = (uint32_t)((size_t)(d - dst) / 8);
    if (cnt != 0) {
        *stop = (size_t)(p - s) - 1; /* the ',' or ']' after the last */
    }
    return cnt;
}
#endif

#ifndef COUNTS_AVX2
uint32_t jdcounts_run_avx2(const char *s, size_t len, size_t i, uint8_t *dst, uint32_t max,
                           size_t *stop)
{
    return jdcounts_run(s, len, i, dst, max, stop);
}
#endif
