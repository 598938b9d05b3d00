/*
 * decomp_test.c - lib/decomp.c: gzip members and zstd frames into a bounded
 * buffer; the limit exact to the byte, bad and trailing bytes refused, the
 * grow callback's refusal passed on.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/decomp.h"
#include "tests/util/zbody.h"

struct growth {
    int calls;
    size_t refuse_over; /* grow() refuses a capacity past this (0: never) */
};

static int grow(struct decomp_out *o, size_t cap, void *arg)
{
    struct growth *g = arg;
    g->calls++;
    if (g->refuse_over != 0 && cap > g->refuse_over) {
        return -ENOBUFS;
    }
    uint8_t *p = realloc(o->p, cap);
    cr_assert_not_null(p);
    o->p = p;
    o->cap = cap;
    return 0;
}

static uint8_t *text(size_t n)
{
    uint8_t *p = malloc(n);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)("0123456789 the quick brown fox\n"[(i * 7 + i / 131) % 31]);
    }
    return p;
}

/* decomp_all of in[0, n) with |limit|: its return; the output in |o|. */
static int run(struct decomp *d, enum decomp_coding k, const uint8_t *in, size_t n, size_t limit,
               struct decomp_out *o, struct growth *g)
{
    *o = (struct decomp_out){NULL, 0, 0, grow, g};
    return decomp_all(d, k, in, n, limit, o);
}

Test(decomp, each_coding_decodes_exactly_and_the_limit_holds_to_the_byte)
{
    struct decomp *d = decomp_new();
    cr_assert_not_null(d);
    size_t n = 200000;
    uint8_t *plain = text(n);
    size_t cn[3];
    uint8_t *c[3];
    c[0] = zbody_gzip(plain, n, &cn[0]);
    c[1] = zbody_zstd(plain, n, true, &cn[1]);
    c[2] = zbody_zstd(plain, n, false, &cn[2]);
    const enum decomp_coding k[3] = {DECOMP_GZIP, DECOMP_ZSTD, DECOMP_ZSTD};
    for (int i = 0; i < 3; i++) {
        struct growth g = {0};
        struct decomp_out o;
        cr_assert_eq(run(d, k[i], c[i], cn[i], n, &o, &g), 0, "case %d", i);
        cr_assert_eq(o.len, n, "case %d", i);
        cr_assert_eq(memcmp(o.p, plain, n), 0, "case %d", i);
        cr_assert_leq(o.cap, n + 1, "case %d: grown past what the limit allows", i);
        free(o.p);
        /* One byte under what it decodes to: refused, never written past. */
        cr_assert_eq(run(d, k[i], c[i], cn[i], n - 1, &o, &g), -E2BIG, "case %d", i);
        cr_assert_leq(o.cap, n - 1, "case %d", i);
        free(o.p);
        /* Cut short (the last byte, or half of it), or with bytes after
         * it: not valid (room to spare, so no overrun reads as too large). */
        const size_t cuts[2] = {cn[i] - 1, cn[i] / 2};
        for (int j = 0; j < 2; j++) {
            int rc = run(d, k[i], c[i], cuts[j], 2 * n, &o, &g);
            cr_assert_eq(rc, -EBADMSG, "case %d, %zu of %zu bytes: %d", i, cuts[j], cn[i], rc);
            free(o.p);
        }
        uint8_t *more = malloc(cn[i] + 3);
        memcpy(more, c[i], cn[i]);
        memcpy(more + cn[i], "xyz", 3);
        cr_assert_eq(run(d, k[i], more, cn[i] + 3, 2 * n, &o, &g), -EBADMSG, "case %d", i);
        free(o.p);
        free(more);
        /* The grow callback's refusal comes back as it was. */
        struct growth tight = {.refuse_over = 8192};
        cr_assert_eq(run(d, k[i], c[i], cn[i], n, &o, &tight), -ENOBUFS, "case %d", i);
        cr_assert_gt(tight.calls, 0);
        free(o.p);
    }
    /* Nothing in, nothing out; plain bytes are neither coding. */
    struct growth g = {0};
    struct decomp_out o;
    cr_assert_eq(run(d, DECOMP_GZIP, plain, 0, n, &o, &g), 0);
    cr_assert_eq(o.len, 0);
    cr_assert_eq(run(d, DECOMP_ZSTD, plain, 64, n, &o, &g), -EBADMSG);
    free(o.p);
    cr_assert_eq(run(d, DECOMP_GZIP, plain, 64, n, &o, &g), -EBADMSG);
    free(o.p);
    for (int i = 0; i < 3; i++) {
        free(c[i]);
    }
    free(plain);
    decomp_free(d);
}

Test(decomp, members_and_frames_back_to_back_decode_to_their_concatenation)
{
    struct decomp *d = decomp_new();
    size_t n = 50000;
    uint8_t *plain = text(n);
    size_t cut[3] = {0, 1, 17000}; /* an empty first part, one byte, a third */
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++) {
            size_t a, b;
            uint8_t *pa =
                k == 0 ? zbody_gzip(plain, cut[i], &a) : zbody_zstd(plain, cut[i], i != 1, &a);
            uint8_t *pb = k == 0 ? zbody_gzip(plain + cut[i], n - cut[i], &b)
                                 : zbody_zstd(plain + cut[i], n - cut[i], i == 1, &b);
            /* zstd: a skippable frame (magic 0x184D2A5?, size, bytes) between */
            static const uint8_t skip[10] = {0x5a, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9};
            size_t sk = k == 1 ? sizeof(skip) : 0;
            uint8_t *both = malloc(a + sk + b);
            memcpy(both, pa, a);
            memcpy(both + a, skip, sk);
            memcpy(both + a + sk, pb, b);
            struct growth g = {0};
            struct decomp_out o;
            cr_assert_eq(run(d, k == 0 ? DECOMP_GZIP : DECOMP_ZSTD, both, a + sk + b, n, &o, &g), 0,
                         "coding %d cut %zu", k, cut[i]);
            cr_assert_eq(o.len, n);
            cr_assert_eq(memcmp(o.p, plain, n), 0, "coding %d cut %zu", k, cut[i]);
            free(o.p);
            free(both);
            free(pa);
            free(pb);
        }
    }
    free(plain);
    decomp_free(d);
}

Test(decomp, empty_frames_decode_to_nothing_under_any_limit)
{
    struct decomp *d = decomp_new();
    /* A frame holding one empty RLE block (the fuzzer's find: the frame ends
     * with nothing to flush, which is not a full output asking for room),
     * alone and twice; and an empty gzip member. */
    static const uint8_t one[10] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x03, 0x00, 0x00, 0x02};
    uint8_t two[20];
    memcpy(two, one, 10);
    memcpy(two + 10, one, 10);
    size_t gn, zn;
    uint8_t *gz = zbody_gzip("", 0, &gn), *zs = zbody_zstd("", 0, false, &zn);
    for (size_t limit = 0; limit < 2; limit++) {
        struct growth g = {0};
        struct decomp_out o;
        cr_assert_eq(run(d, DECOMP_ZSTD, one, sizeof(one), limit, &o, &g), 0);
        cr_assert_eq(o.len, 0);
        free(o.p);
        cr_assert_eq(run(d, DECOMP_ZSTD, two, sizeof(two), limit, &o, &g), 0);
        cr_assert_eq(o.len, 0);
        free(o.p);
        cr_assert_eq(run(d, DECOMP_ZSTD, zs, zn, limit, &o, &g), 0);
        cr_assert_eq(o.len, 0);
        free(o.p);
        cr_assert_eq(run(d, DECOMP_GZIP, gz, gn, limit, &o, &g), 0, "limit %zu", limit);
        cr_assert_eq(o.len, 0);
        free(o.p);
    }
    free(gz);
    free(zs);
    decomp_free(d);
}
