#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cpu.h"
#include "proto/jsondec_counts.h"

/* |n| bytes of |t| in a buffer of exactly |n| bytes, so that ASan sees
 * any read past the end. */
static char *exact(const char *t, size_t n)
{
    char *s = malloc(n ? n : 1);
    cr_assert_not_null(s);
    memcpy(s, t, n);
    return s;
}

/* What a reader gives for s[0..len) from |i|, into dst of exactly
 * 8 * max bytes (the AVX2 one only where it can run). */
struct got {
    uint32_t n;
    size_t stop;
    uint64_t v[64];
};

static struct got run(bool avx2, const char *s, size_t len, size_t i, uint32_t max)
{
    struct got g = {.stop = (size_t)-1};
    uint8_t *dst = malloc(8 * (size_t)max + !max);
    cr_assert_not_null(dst);
    g.n = avx2 && cpu_avx2() ? jdcounts_run_avx2(s, len, i, dst, max, &g.stop)
                             : jdcounts_run(s, len, i, dst, max, &g.stop);
    cr_assert_leq(g.n, max);
    memcpy(g.v, dst, 8 * (size_t)g.n);
    free(dst);
    return g;
}

static void same(const struct got *a, const struct got *b, const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %u vs %u counts", what, a->n, b->n);
    cr_assert_eq(a->stop, b->stop, "%s: stop %zu vs %zu", what, a->stop, b->stop);
    cr_assert_eq(memcmp(a->v, b->v, 8 * (size_t)a->n), 0, "%s: values differ", what);
}

/* "v0","v1",...,"vn-1"] then |pad| bytes of '}' */
static size_t list(char *out, const uint64_t *v, int n, int pad)
{
    size_t k = 0;
    for (int e = 0; e < n; e++) {
        k +=
            (size_t)sprintf(out + k, "\"%llu\"%c", (unsigned long long)v[e], e + 1 < n ? ',' : ']');
    }
    memset(out + k, '}', (size_t)pad);
    return k + (size_t)pad;
}

Test(jsondec_counts, lists_of_one_and_two_digit_counts_are_read_exactly_to_the_bracket)
{
    /* every way three counts can be laid out, at every place in lists of
     * 1-20 counts, and the text's end 0-20 bytes after the ']' */
    uint64_t v[20];
    char text[256];
    unsigned seed = 7;
    for (int n = 1; n <= 20; n++) {
        for (int rep = 0; rep < 40; rep++) {
            for (int e = 0; e < n; e++) {
                seed = seed * 1103515245u + 12345u;
                v[e] = (seed >> 8) % 3 == 0 ? (seed >> 12) % 10 : 10 + (seed >> 12) % 90;
            }
            for (int pad = 0; pad <= 20; pad++) {
                size_t len = list(text, v, n, pad);
                char *s = exact(text, len);
                size_t bracket = (size_t)(strchr(s, ']') - s);
                for (int avx2 = 0; avx2 <= 1; avx2++) {
                    struct got g = run(avx2, s, len, 0, 32);
                    /* an element less than 10 bytes from the end is left */
                    uint32_t want = 0;
                    for (size_t at = 0, e = 0; e < (size_t)n && at + 10 <= len; e++) {
                        want++;
                        at += v[e] < 10 ? 4 : 5;
                    }
                    cr_assert_eq(g.n, want, "n %d pad %d avx2 %d: %u", n, pad, avx2, g.n);
                    for (uint32_t e = 0; e < g.n; e++) {
                        cr_assert_eq(g.v[e], v[e], "n %d pad %d count %u", n, pad, e);
                    }
                    if (want == (uint32_t)n) {
                        cr_assert_eq(g.stop, bracket);
                    }
                }
                free(s);
            }
        }
    }
}

Test(jsondec_counts, what_three_at_a_time_must_refuse_stops_both_at_the_same_place)
{
    static const struct {
        const char *text;
        uint32_t n;  /* counts read */
        size_t stop; /* the ',' or ']' after the last */
        uint64_t v[4];
    } cases[] = {
        {"\"1\"]\"2\",\"3\",\"4\",\"5\",\"6\"]}}}}}}", 1, 3, {1}},    /* ']' after the first */
        {"\"1\",\"2\"]\"3\",\"4\",\"5\",\"6\"]}}}}}}", 2, 7, {1, 2}}, /* after the second */
        {"\"05\",\"1\",\"2\",\"3\",\"4\"]}}}}}}}", 0, 0, {0}},        /* a leading zero */
        {"\"1\",\"05\",\"2\",\"3\",\"4\"]}}}}}}}", 1, 3, {1}},
        {"\"1\",\"2\",\"09\",\"3\",\"4\"]}}}}}}}", 2, 7, {1, 2}},
        {"\"1\",\"2\",\"3\" ,\"4\",\"5\"]}}}}}}}", 2, 7, {1, 2}}, /* a blank */
        {"\"1\",\"2\",3,\"4\",\"5\",\"6\"]}}}}}}", 2, 7, {1, 2}}, /* a bare number */
        {"\"1\",\"2\",\"3\",\"4\"]}}}}}}}}}}}}", 4, 15, {1, 2, 3, 4}},
        {"\"0\",\"0\",\"0\",\"99\"]}}}}}}}}}}}}", 4, 16, {0, 0, 0, 99}},
        {"\"12\",\"345\",\"6\",\"7\"]}}}}}}}}}}", 4, 18, {12, 345, 6, 7}}, /* 3 digits */
        {"\"1\",\"2\",\"3\"}\"4\",\"5\"]}}}}}}}", 2, 7, {1, 2}},           /* not ',' or ']' */
        {"\"1\",\"2\",\"3\",,\"4\",\"5\"]}}}}}}}", 3, 11, {1, 2, 3}},
        {"\"1\",\"2:\",\"3\",\"4\",\"5\"]}}}}}}}", 1, 3, {1}}, /* digits' neighbours */
        {"\"1\",\"2\",\"/\",\"4\",\"5\"]}}}}}}}", 2, 7, {1, 2}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t len = strlen(cases[c].text);
        char *s = exact(cases[c].text, len);
        for (int avx2 = 0; avx2 <= 1; avx2++) {
            struct got g = run(avx2, s, len, 0, 32);
            cr_assert_eq(g.n, cases[c].n, "case %zu avx2 %d: %u counts", c, avx2, g.n);
            if (g.n != 0) {
                cr_assert_eq(g.stop, cases[c].stop, "case %zu avx2 %d: stop %zu", c, avx2, g.stop);
            }
            cr_assert_eq(memcmp(g.v, cases[c].v, 8 * (size_t)g.n), 0, "case %zu avx2 %d", c, avx2);
        }
        free(s);
    }
}

static unsigned rnd(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

Test(jsondec_counts, any_text_gets_the_answer_of_one_at_a_time)
{
    /* lists of counts of 0-8 digits, bent at random: a byte changed to one
     * of the bytes that matter, or anything; starts inside the list; every
     * max from 1; the text cut short */
    static const char bytes[] = "\"\",,]]0123456789 }x\0\xff:/";
    char text[200];
    unsigned seed = 11;
    for (int it = 0; it < 60000; it++) {
        size_t k = 0;
        int n = 1 + (int)(rnd(&seed) % 16);
        for (int e = 0; e < n && k < 150; e++) {
            unsigned digits = rnd(&seed) % 10 < 8 ? 1 + rnd(&seed) % 2 : rnd(&seed) % 9;
            text[k++] = '"';
            for (unsigned d = 0; d < digits; d++) {
                text[k++] = (char)('0' + rnd(&seed) % 10);
            }
            text[k++] = '"';
            text[k++] = e + 1 < n ? ',' : ']';
        }
        size_t len = k + rnd(&seed) % 24;
        memset(text + k, '}', len - k);
        for (unsigned b = rnd(&seed) % 3; b > 0; b--) {
            size_t at = rnd(&seed) % len;
            text[at] = bytes[rnd(&seed) % (sizeof(bytes) - 1)];
        }
        if (rnd(&seed) % 8 == 0) {
            len -= rnd(&seed) % (len / 2 + 1);
        }
        size_t i = rnd(&seed) % 4 == 0 ? rnd(&seed) % (len + 1) : 0;
        uint32_t max = rnd(&seed) % 4 == 0 ? 1 + rnd(&seed) % 12 : 32;
        char *s = exact(text, len);
        struct got a = run(false, s, len, i, max), b = run(true, s, len, i, max);
        char what[64];
        snprintf(what, sizeof(what), "iteration %d", it);
        same(&a, &b, what);
        free(s);
    }
}

Test(jsondec_counts, this_machine_takes_the_avx2_path)
{
    /* the tests above compared the two paths only where AVX2 runs */
    if (!__builtin_cpu_supports("avx2")) {
        cr_skip_test("no AVX2 here: jdcounts_run_avx2 must not be called");
    }
    cr_expect(cpu_avx2());
}
