#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/u64range.h"

static void expect_range(const struct u64_range *r, uint64_t mn, uint64_t mx, uint64_t dmn,
                         uint64_t dmx)
{
    cr_expect_eq(r->mn, mn, "mn %llx, want %llx", (unsigned long long)r->mn,
                 (unsigned long long)mn);
    cr_expect_eq(r->mx, mx, "mx %llx, want %llx", (unsigned long long)r->mx,
                 (unsigned long long)mx);
    cr_expect_eq(r->dmn, dmn, "dmn %llx, want %llx", (unsigned long long)r->dmn,
                 (unsigned long long)dmn);
    cr_expect_eq(r->dmx, dmx, "dmx %llx, want %llx", (unsigned long long)r->dmx,
                 (unsigned long long)dmx);
}

Test(u64range, empty_and_one_value_have_no_differences)
{
    struct u64_range r;
    u64_range(NULL, 0, &r);
    expect_range(&r, 0, 0, UINT64_MAX, 0);
    uint64_t one = 77;
    u64_range(&one, 1, &r);
    expect_range(&r, 77, 77, UINT64_MAX, 0);
}

/* Values on both sides of 2^63 (where a signed compare would misorder
 * them), long enough for the vector path, the extremes in the last lanes
 * and in the scalar tail. */
Test(u64range, orders_values_as_unsigned_across_the_top_bit)
{
    uint64_t v[11] = {5,
                      UINT64_C(0x8000000000000000),
                      UINT64_C(0x7fffffffffffffff),
                      3,
                      UINT64_MAX,
                      9,
                      UINT64_C(0x8000000000000001),
                      4,
                      2,
                      UINT64_C(0x7ffffffffffffff0),
                      6};
    struct u64_range r;
    u64_range(v, 11, &r);
    /* differences (mod 2^64): 2^63-5, 2^64-1, 2^63+4, 2^64-4, 10, 2^63-8,
     * 2^63+3, 2^64-2, 2^63-18, 2^63+22 */
    expect_range(&r, 2, UINT64_MAX, 10, UINT64_MAX);
    u64_range(v, 5, &r); /* one vector step, no tail */
    expect_range(&r, 3, UINT64_MAX, UINT64_C(0x7ffffffffffffffb), UINT64_MAX);
}

Test(u64range, sorted_times_give_their_smallest_and_largest_step)
{
    uint64_t v[9];
    for (int i = 0; i < 9; i++) {
        v[i] = UINT64_C(1767225600000000000) + (uint64_t)i * 1000 + (i == 6 ? 7 : 0);
    }
    struct u64_range r;
    u64_range(v, 9, &r);
    expect_range(&r, v[0], v[8], 993, 1007);
}

/* Every length from 0 to 40 and random values of every magnitude, with
 * runs of equal values: the vector path answers as the scalar one. */
Test(u64range, matches_the_scalar_reference_at_every_length)
{
    uint64_t v[40];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 40; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            unsigned shift = (unsigned)(s >> 58); /* 0..63: every magnitude */
            v[i] = (round & 1) && i > 0 && (s & 3) == 0 ? v[i - 1] : s >> shift;
            if (round % 5 == 0) {
                v[i] = UINT64_MAX - v[i]; /* the top half */
            }
        }
        for (uint64_t n = 0; n <= 40; n++) {
            struct u64_range a, b;
            u64_range(v, n, &a);
            u64_range_scalar(v, n, &b);
            cr_assert(a.mn == b.mn && a.mx == b.mx && a.dmn == b.dmn && a.dmx == b.dmx,
                      "round %d, n %llu", round, (unsigned long long)n);
        }
    }
}

/* Frame of reference in place, by width: the bytes are the values less
 * the base, little-endian, value after value, whatever the length (the
 * vector steps, the scalar tail, both); each array exactly n long, so
 * that a read or write past it is the sanitizer's error. */
Test(u64range, narrows_in_place_to_exact_bytes)
{
    uint64_t keep[80];
    uint64_t s = 0x243f6a8885a308d3ull, base = UINT64_C(0xfffffffffff00000);
    static const unsigned widths[] = {1, 2, 4};
    for (int k = 0; k < 3; k++) {
        unsigned w = widths[k];
        uint64_t lim = w == 4 ? UINT64_C(0xffffffff) : (UINT64_C(1) << (8 * w)) - 1;
        for (uint64_t n = 0; n <= 80; n++) {
            uint64_t *v = malloc((n ? n : 1) * sizeof(*v));
            cr_assert_not_null(v);
            for (uint64_t i = 0; i < n; i++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                uint64_t d = i % 7 == 0 ? lim : i % 5 == 0 ? 0 : s % (lim + 1);
                v[i] = keep[i] = base + d; /* wraps past 2^64: the difference still fits */
            }
            u64_narrow(v, n, base, w);
            const uint8_t *p = (const uint8_t *)v;
            for (uint64_t i = 0; i < n; i++) {
                uint64_t got = 0;
                for (unsigned b = 0; b < w; b++) {
                    got |= (uint64_t)p[i * w + b] << (8 * b);
                }
                cr_assert_eq(got, keep[i] - base, "w %u, n %llu, value %llu", w,
                             (unsigned long long)n, (unsigned long long)i);
            }
            free(v);
        }
    }
}

Test(u64range, narrows_as_the_scalar_reference)
{
    uint64_t a[64], b[64];
    for (unsigned w = 1; w <= 4; w *= 2) {
        for (uint64_t i = 0; i < 64; i++) {
            a[i] = b[i] = 1000 + (i * 2654435761u) % ((UINT64_C(1) << (8 * w)) - 1);
        }
        u64_narrow(a, 64, 1000, w);
        u64_narrow_scalar(b, 64, 1000, w);
        cr_assert(memcmp(a, b, 64 * w) == 0, "w %u", w);
    }
}

Test(u64range, this_machine_takes_the_vector_path)
{
    /* The bench machine has AVX2: the tests above then ran the vector path.
     * Elsewhere this says so rather than failing. */
    if (!__builtin_cpu_supports("avx2")) {
        cr_skip_test("no AVX2 here: only the scalar path was tested");
    }
    cr_expect(u64_range_simd());
}
