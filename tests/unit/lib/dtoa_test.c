/*
 * dtoa_test.c - dtoa_shortest against the slow reference it replaced in
 * storage/promname.c (printf correctly rounded digits + strtod round trip,
 * checked against Go's strconv once).
 *
 * Built with -DDTOA_TEST_MAIN this file is instead a standalone checker for
 * long runs (not part of the suite):
 *   cc -O2 -I. -DDTOA_TEST_MAIN tests/unit/lib/dtoa_test.c lib/dtoa.c -o dtoa-check
 *   ./dtoa-check 50000000 [seed]
 */
#ifndef DTOA_TEST_MAIN
#include <criterion/criterion.h>
#endif
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/dtoa.h"

/* ---- the reference: promname.c's former dec_shortest, verbatim logic ---- */

struct ref {
    char d[24];
    int nd;
    int dp;
};

static void ref_from_e(const char *s, struct ref *o)
{
    o->nd = 0;
    for (; *s != '\0' && *s != 'e'; s++) {
        if (*s >= '0' && *s <= '9' && o->nd < (int)sizeof(o->d)) {
            o->d[o->nd++] = *s;
        }
    }
    o->dp = (*s == 'e' ? atoi(s + 1) : 0) + 1;
}

static bool ref_roundtrips(const struct ref *c, double v)
{
    char s[48];
    memcpy(s, c->d, (size_t)c->nd);
    snprintf(s + c->nd, sizeof(s) - (size_t)c->nd, "e%d", c->dp - c->nd);
    return strtod(s, NULL) == v;
}

static void ref_up(struct ref *c)
{
    int i = c->nd - 1;
    while (i >= 0 && c->d[i] == '9') {
        c->d[i--] = '0';
    }
    if (i < 0) {
        c->d[0] = '1';
        c->dp++;
    } else {
        c->d[i]++;
    }
}

static void ref_down(struct ref *c)
{
    int i = c->nd - 1;
    while (i >= 0 && c->d[i] == '0') {
        c->d[i--] = '9';
    }
    c->d[i]--;
    if (c->d[0] == '0') {
        memset(c->d, '9', (size_t)c->nd);
        c->dp--;
    }
}

static void ref_shortest(double v, struct ref *o)
{
    char s[48];
    bool subnormal = v < DBL_MIN;
    if (!subnormal) {
        snprintf(s, sizeof(s), "%.14e", v);
        ref_from_e(s, o);
    }
    if (subnormal || !ref_roundtrips(o, v)) {
        for (int p = subnormal ? 1 : 16; p <= 17; p++) {
            snprintf(s, sizeof(s), "%.*e", p - 1, v);
            ref_from_e(s, o);
            if (ref_roundtrips(o, v)) {
                break;
            }
            struct ref up = *o, down = *o;
            ref_up(&up);
            if (ref_roundtrips(&up, v)) {
                *o = up;
                break;
            }
            ref_down(&down);
            if (ref_roundtrips(&down, v)) {
                *o = down;
                break;
            }
        }
    }
    while (o->nd > 1 && o->d[o->nd - 1] == '0') {
        o->nd--;
    }
}

/* ---- comparison and generators ---- */

/* Whether dtoa_shortest agrees with the reference on v; on a difference
 * prints both (once per caller's choice) into |msg|. */
static bool agrees(double v, char *msg, size_t msglen)
{
    struct ref r;
    ref_shortest(v, &r);
    char d[17];
    int dp = 0;
    int n = dtoa_shortest(v, d, &dp);
    if (n == r.nd && dp == r.dp && memcmp(d, r.d, (size_t)n) == 0) {
        return true;
    }
    if (msg != NULL) {
        snprintf(msg, msglen, "v=%a (%.17g): dtoa 0.%.*s e%d, reference 0.%.*s e%d", v, v,
                 n >= 1 && n <= 17 ? n : 0, d, dp, r.nd, r.d, r.dp);
    }
    return false;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof(v));
    return v;
}

/* A finite positive double from a random bit pattern. */
static double rand_bits(uint64_t *s)
{
    for (;;) {
        uint64_t b = splitmix(s) & ~(UINT64_C(1) << 63);
        if ((b >> 52) != 0x7ff && b != 0) {
            return from_bits(b);
        }
    }
}

/* A finite positive double read from a random short decimal: 1..17 digits,
 * exponent -340..310 (the kind of value PromQL samples hold). */
static double rand_decimal(uint64_t *s)
{
    for (;;) {
        uint64_t r = splitmix(s);
        int nd = 1 + (int)(r % 17);
        int e = -340 + (int)((r >> 8) % 651);
        uint64_t m = splitmix(s);
        uint64_t lim = 1;
        for (int i = 0; i < nd; i++) {
            lim *= 10;
        }
        m %= lim;
        char buf[48];
        snprintf(buf, sizeof(buf), "%" PRIu64 "e%d", m, e);
        double v = strtod(buf, NULL);
        if (v > 0 && isfinite(v)) {
            return v;
        }
    }
}

/* Runs |count| random values of each generator; returns the differences and
 * describes the first in |msg|. */
static uint64_t random_run(uint64_t count, uint64_t seed, char *msg, size_t msglen)
{
    uint64_t s = seed, bad = 0;
    msg[0] = '\0';
    for (uint64_t i = 0; i < count; i++) {
        double v = (i & 1) ? rand_bits(&s) : rand_decimal(&s);
        if (!agrees(v, bad == 0 ? msg : NULL, msglen)) {
            bad++;
        }
    }
    return bad;
}

#ifdef DTOA_TEST_MAIN

int main(int argc, char **argv)
{
    uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 11;
    char msg[256];
    uint64_t bad = random_run(count, seed, msg, sizeof(msg));
    printf("%" PRIu64 " values, seed %" PRIu64 ": %" PRIu64 " differences%s%s\n", count, seed, bad,
           bad != 0 ? "; first: " : "", msg);
    return bad == 0 ? 0 : 1;
}

#else

static void expect_agrees(double v)
{
    char msg[256];
    cr_assert(agrees(v, msg, sizeof(msg)), "%s", msg);
}

static void expect_digits(double v, const char *digits, int dp)
{
    char d[17];
    int got_dp = 0;
    int n = dtoa_shortest(v, d, &got_dp);
    cr_assert_eq(n, (int)strlen(digits), "%.17g: %d digits", v, n);
    cr_assert_eq(memcmp(d, digits, (size_t)n), 0, "%.17g: 0.%.*s", v, n, d);
    cr_assert_eq(got_dp, dp, "%.17g: dp %d", v, got_dp);
}

/* Hand-known shortest forms (Go: strconv.FormatFloat(v, 'e', -1, 64)). */
Test(dtoa, known_shortest_forms)
{
    expect_digits(1, "1", 1);
    expect_digits(0.1, "1", 0);
    expect_digits(0.3, "3", 0);
    expect_digits(0.1 + 0.2, "30000000000000004", 0);
    expect_digits(5e-324, "5", -323);
    expect_digits(DBL_MIN, "22250738585072014", -307);
    expect_digits(DBL_MAX, "17976931348623157", 309);
    expect_digits(9007199254740992.0, "9007199254740992", 16);
    expect_digits(9007199254740994.0, "9007199254740994", 16);
    expect_digits(123456, "123456", 6);
    expect_digits(1e23, "1", 24);
    expect_digits(0.001, "1", -2);
    expect_digits(2.5, "25", 1);
    expect_digits(1.7976931348623157e308, "17976931348623157", 309);
    expect_digits(1e-323, "1", -322);
    /* The largest subnormal and 3 x 2^-1074 (Python repr agrees). */
    expect_digits(nextafter(DBL_MIN, 0), "2225073858507201", -307);
    expect_digits(ldexp(3, -1074), "15", -322);
}

Test(dtoa, edge_cases_match_the_reference)
{
    const double fixed[] = {1,
                            0.1,
                            0.3,
                            0.2,
                            0.7,
                            5e-324,
                            1e-323,
                            DBL_MIN,
                            DBL_MAX,
                            DBL_EPSILON,
                            9007199254740992.0,
                            9007199254740993.0,
                            9007199254740991.0,
                            4503599627370497.0,
                            4503599627370495.5,
                            9007199254740994.0,
                            4503599627370496.0,
                            1e15,
                            1e16,
                            1e17,
                            1e21,
                            1e22,
                            1e23,
                            5e-310,
                            2.2250738585072009e-308,
                            2.2250738585072011e-308,
                            1.5,
                            123456789012345678.0,
                            0.000001,
                            299792458,
                            6.02214076e23,
                            1.602176634e-19};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        expect_agrees(fixed[i]);
    }
    /* DBL_MIN, DBL_MAX, 5e-324, 2^53 and the largest subnormal: their
     * neighbours up to 8 ulps either side. */
    const double around[] = {
        DBL_MIN, DBL_MAX, 5e-324, 9007199254740992.0, 1.0, 0.1, nextafter(DBL_MIN, 0)};
    for (size_t i = 0; i < sizeof(around) / sizeof(around[0]); i++) {
        double up = around[i], down = around[i];
        for (int k = 0; k < 8; k++) {
            up = nextafter(up, INFINITY);
            down = nextafter(down, 0);
            if (isfinite(up)) {
                expect_agrees(up);
            }
            if (down > 0) {
                expect_agrees(down);
            }
        }
    }
}

/* Every power of two (2^-1074 .. 2^1023, where the interval is lopsided)
 * and its neighbours, every power of ten 1e-320 .. 1e308 and its
 * neighbours. */
Test(dtoa, powers_of_two_and_ten_match_the_reference)
{
    for (int e = -1074; e <= 1023; e++) {
        double p = ldexp(1, e);
        expect_agrees(p);
        expect_agrees(nextafter(p, INFINITY));
        if (e > -1074) {
            expect_agrees(nextafter(p, 0));
        }
    }
    for (int e = -320; e <= 308; e++) {
        char buf[16];
        snprintf(buf, sizeof(buf), "1e%d", e);
        double p = strtod(buf, NULL);
        expect_agrees(p);
        expect_agrees(nextafter(p, INFINITY));
        expect_agrees(nextafter(p, 0));
    }
}

/* Integers and short decimals: v exact in decimal, ties in the digits. */
Test(dtoa, small_integers_and_halves_match_the_reference)
{
    for (int i = 1; i <= 20000; i++) {
        expect_agrees(i);
        expect_agrees(i + 0.5);
        expect_agrees(i / 1000.0);
    }
}

Test(dtoa, a_million_random_values_match_the_reference)
{
    char msg[256];
    uint64_t bad = random_run(1000000, 11, msg, sizeof(msg));
    cr_assert_eq(bad, 0, "%" PRIu64 " differences; first: %s", bad, msg);
}

#endif
