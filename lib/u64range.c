/*
 * u64range.c - u64_range: an array's range and its differences' range
 * (u64range.h). The build targets baseline x86-64 (SSE2, which has no
 * 64-bit compare), so the vector path is compiled for AVX2 alone and
 * chosen at run time; values are compared as signed after flipping the
 * top bit (x ^ 2^63 orders as signed the way x does as unsigned).
 */
#include "lib/u64range.h"

#include "lib/cpu.h"

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define U64R_AVX2 1
#endif

/* From value |i| on, into |r| (already holding v[0, i)'s ranges, i >= 1). */
static void range_tail(const uint64_t *v, uint64_t i, uint64_t n, struct u64_range *r)
{
    uint64_t mn = r->mn, mx = r->mx, dmn = r->dmn, dmx = r->dmx;
    for (; i < n; i++) {
        uint64_t x = v[i], d = x - v[i - 1];
        mn = x < mn ? x : mn;
        mx = x > mx ? x : mx;
        dmn = d < dmn ? d : dmn;
        dmx = d > dmx ? d : dmx;
    }
    *r = (struct u64_range){mn, mx, dmn, dmx};
}

void u64_range_scalar(const uint64_t *v, uint64_t n, struct u64_range *r)
{
    *r = (struct u64_range){n ? v[0] : 0, n ? v[0] : 0, UINT64_MAX, 0};
    if (n >= 2) {
        range_tail(v, 1, n, r);
    }
}

#ifdef U64R_AVX2
/* n >= 5: values 1 .. 4k by four lanes, the rest by range_tail. */
__attribute__((target("avx2"))) static void range_avx2(const uint64_t *v, uint64_t n,
                                                       struct u64_range *r)
{
    const __m256i bias = _mm256_set1_epi64x(INT64_MIN);
    __m256i mn = _mm256_set1_epi64x((int64_t)(v[0] ^ (uint64_t)INT64_MIN)), mx = mn;
    __m256i dmn = _mm256_set1_epi64x(INT64_MAX), dmx = bias; /* UINT64_MAX and 0, biased */
    uint64_t i = 1;
    for (; i + 4 <= n; i += 4) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
        __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)(v + i - 1));
        __m256i d = _mm256_xor_si256(_mm256_sub_epi64(x, p), bias);
        x = _mm256_xor_si256(x, bias);
        mn = _mm256_blendv_epi8(mn, x, _mm256_cmpgt_epi64(mn, x));
        mx = _mm256_blendv_epi8(mx, x, _mm256_cmpgt_epi64(x, mx));
        dmn = _mm256_blendv_epi8(dmn, d, _mm256_cmpgt_epi64(dmn, d));
        dmx = _mm256_blendv_epi8(dmx, d, _mm256_cmpgt_epi64(d, dmx));
    }
    int64_t a[4], b[4], c[4], e[4];
    _mm256_storeu_si256((__m256i *)(void *)a, mn);
    _mm256_storeu_si256((__m256i *)(void *)b, mx);
    _mm256_storeu_si256((__m256i *)(void *)c, dmn);
    _mm256_storeu_si256((__m256i *)(void *)e, dmx);
    for (int k = 1; k < 4; k++) {
        a[0] = a[k] < a[0] ? a[k] : a[0];
        b[0] = b[k] > b[0] ? b[k] : b[0];
        c[0] = c[k] < c[0] ? c[k] : c[0];
        e[0] = e[k] > e[0] ? e[k] : e[0];
    }
    const uint64_t f = (uint64_t)INT64_MIN;
    *r = (struct u64_range){(uint64_t)a[0] ^ f, (uint64_t)b[0] ^ f, (uint64_t)c[0] ^ f,
                            (uint64_t)e[0] ^ f};
    range_tail(v, i, n, r);
}
#endif

/* From value |i| on (the values below are written already). */
static void narrow_tail(uint64_t *v, uint64_t i, uint64_t n, uint64_t base, unsigned w)
{
    uint8_t *p = (uint8_t *)v;
    switch (w) {
    case 1:
        for (; i < n; i++) {
            p[i] = (uint8_t)(v[i] - base);
        }
        break;
    case 2:
        for (; i < n; i++) {
            uint16_t x = (uint16_t)(v[i] - base);
            memcpy(p + 2 * i, &x, 2);
        }
        break;
    case 4:
        for (; i < n; i++) {
            uint32_t x = (uint32_t)(v[i] - base);
            memcpy(p + 4 * i, &x, 4);
        }
        break;
    default:
        break;
    }
}

void u64_narrow_scalar(uint64_t *v, uint64_t n, uint64_t base, unsigned w)
{
    narrow_tail(v, 0, n, base, w);
}

#ifdef U64R_AVX2
/* The low 32 bits of four values less |b|, in the low 128 bits. */
__attribute__((target("avx2"))) static inline __m128i low4(const uint64_t *v, __m256i b)
{
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)v);
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_sub_epi64(x, b), even));
}

/* 16 output bytes a step, from 16 / w values all loaded before the store:
 * the store covers bytes [i*w, i*w + 16), below 8 (i + 16 / w) and, from
 * the second step on, below 8 i (values already read); packs saturate
 * nothing, each difference fitting w bytes. */
__attribute__((target("avx2"))) static void narrow_avx2(uint64_t *v, uint64_t n, uint64_t base,
                                                        unsigned w)
{
    uint8_t *p = (uint8_t *)v;
    __m256i b = _mm256_set1_epi64x((int64_t)base);
    uint64_t i = 0, step = 16 / w;
    for (; i + step <= n; i += step) {
        __m128i out;
        if (w == 4) {
            out = low4(v + i, b);
        } else if (w == 2) {
            out = _mm_packus_epi32(low4(v + i, b), low4(v + i + 4, b));
        } else {
            __m128i lo = _mm_packus_epi32(low4(v + i, b), low4(v + i + 4, b));
            __m128i hi = _mm_packus_epi32(low4(v + i + 8, b), low4(v + i + 12, b));
            out = _mm_packus_epi16(lo, hi);
        }
        _mm_storeu_si128((__m128i *)(void *)(p + i * w), out);
    }
    narrow_tail(v, i, n, base, w);
}
#endif

void u64_narrow(uint64_t *v, uint64_t n, uint64_t base, unsigned w)
{
#ifdef U64R_AVX2
    if ((w == 1 || w == 2 || w == 4) && n >= 16 && u64_range_simd()) {
        narrow_avx2(v, n, base, w);
        return;
    }
#endif
    u64_narrow_scalar(v, n, base, w);
}

bool u64_range_simd(void)
{
#ifdef U64R_AVX2
    return cpu_avx2();
#else
    return false;
#endif
}

void u64_range(const uint64_t *v, uint64_t n, struct u64_range *r)
{
#ifdef U64R_AVX2
    if (n >= 5 && u64_range_simd()) {
        range_avx2(v, n, r);
        return;
    }
#endif
    u64_range_scalar(v, n, r);
}
