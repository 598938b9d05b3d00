/*
 * pmhist_test.c - native-histogram arithmetic (query/pmhist.c) on small
 * hand-made histograms: bucket bounds per schema (bit-exact with
 * Prometheus's getBound, including its table constants and the DBL_MAX /
 * +Inf top buckets), quantile and fraction (2.42's linear interpolation,
 * zero-bucket rules, NaN observations), add and sub across schemas and
 * zero thresholds, scale, and counter-reset detection. Every expected
 * number is worked out by hand in the comment beside it.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "query/pmeval_int.h"

static arena *A;

static void setup(void)
{
    A = arena_new(0);
    cr_assert_not_null(A);
}

static void teardown(void)
{
    arena_free(A);
}

TestSuite(pmhist, .init = setup, .fini = teardown);

#define SAME(got, want)                                                                            \
    cr_assert((isnan(got) && isnan(want)) || ((got) == (want) && signbit(got) == signbit(want)),   \
              "got %.17g want %.17g", (double)(got), (double)(want))

/* A histogram with positive buckets pos[0..np) from index po. */
static struct pm_hist H(int32_t schema, double count, double sum, double zt, double zc, int32_t po,
                        const double *pos, uint32_t np, int32_t no, const double *neg,
                        uint32_t nn) {
    struct pm_hist h = {.schema = schema,
                        .count = count,
                        .sum = sum,
                        .zero_threshold = zt,
                        .zero_count = zc,
                        .pos_offset = po,
                        .n_pos = np,
                        .neg_offset = no,
                        .n_neg = nn};
    if (np != 0) {
        h.pos = arena_alloc(A, np * sizeof(double));
        memcpy(h.pos, pos, np * sizeof(double));
    }
    if (nn != 0) {
        h.neg = arena_alloc(A, nn * sizeof(double));
        memcpy(h.neg, neg, nn * sizeof(double));
    }
    return h;
}

Test(pmhist, bounds_per_schema)
{
    double lo, up;
    pm_hist_bounds(0, 1, false, &lo, &up); /* (1, 2] */
    SAME(lo, 1.0);
    SAME(up, 2.0);
    pm_hist_bounds(0, 0, false, &lo, &up); /* (0.5, 1] */
    SAME(lo, 0.5);
    SAME(up, 1.0);
    pm_hist_bounds(0, -2, false, &lo, &up); /* (1/8, 1/4] */
    SAME(lo, 0.125);
    SAME(up, 0.25);
    pm_hist_bounds(0, 1, true, &lo, &up); /* [-2, -1) */
    SAME(lo, -2.0);
    SAME(up, -1.0);
    pm_hist_bounds(-1, 1, false, &lo, &up); /* base 4: (1, 4] */
    SAME(lo, 1.0);
    SAME(up, 4.0);
    pm_hist_bounds(-2, 2, false, &lo, &up); /* base 16: (16, 256] */
    SAME(lo, 16.0);
    SAME(up, 256.0);
    /* schema 1: base sqrt 2, bound of index 1 = 2 * 0.7071067811865475 as
     * Go parses that table constant: one ulp below the double nearest
     * sqrt(2) */
    pm_hist_bounds(1, 1, false, &lo, &up);
    SAME(lo, 1.0);
    SAME(up, 2 * 0.7071067811865475);
    cr_assert(up != sqrt(2.0));
    pm_hist_bounds(1, 2, false, &lo, &up);
    SAME(up, 2.0);
    /* schema 3, index -3: frac index 5 of 8 -> 0.7711054127039704 * 2^0 */
    pm_hist_bounds(3, -3, false, &lo, &up);
    SAME(up, 0.7711054127039704);
    SAME(lo, 0.7071067811865475);
    /* the last finite bucket ends at DBL_MAX, the one above at +Inf */
    pm_hist_bounds(0, 1024, false, &lo, &up);
    SAME(lo, ldexp(1, 1023));
    SAME(up, DBL_MAX);
    pm_hist_bounds(0, 1025, false, &lo, &up);
    SAME(lo, DBL_MAX);
    SAME(up, INFINITY);
    pm_hist_bounds(-1, 512, false, &lo, &up);
    SAME(up, DBL_MAX);
    pm_hist_bounds(8, 1024 * 256, false, &lo, &up);
    SAME(up, DBL_MAX);
}

Test(pmhist, quantile_linear_within_a_bucket)
{
    static const double p[] = {2, 2}; /* (1,2]: 2, (2,4]: 2 */
    struct pm_hist h = H(0, 4, 10, 0, 0, 1, p, 2, 0, NULL, 0);
    SAME(pm_hist_quantile(0.5, &h), 2.0);  /* rank 2: end of (1,2] */
    SAME(pm_hist_quantile(0.25, &h), 1.5); /* rank 1: 1 + 1 * 1/2 */
    SAME(pm_hist_quantile(0.75, &h), 3.0); /* rank 3 - 2 = 1 in (2,4]: 2 + 2/2 */
    SAME(pm_hist_quantile(1, &h), 4.0);
    SAME(pm_hist_quantile(0, &h), 1.0); /* rank 0 in the first non-empty bucket */
    SAME(pm_hist_quantile(-0.1, &h), -INFINITY);
    SAME(pm_hist_quantile(1.1, &h), INFINITY);
    SAME(pm_hist_quantile(NAN, &h), NAN);
    struct pm_hist empty = H(0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, 0);
    SAME(pm_hist_quantile(0.5, &empty), NAN);
    /* one NaN observation: count 5, buckets hold 4; q = 1 never reaches
     * rank 5, so the upper bound of the last bucket */
    struct pm_hist withnan = H(0, 5, NAN, 0, 0, 1, p, 2, 0, NULL, 0);
    SAME(pm_hist_quantile(1, &withnan), 4.0);
    /* empty buckets inside are passed over: (1,2]: 2, (2,4]: 0, (4,8]: 2;
     * rank 3 -> 4 + 4 * 1/2 */
    static const double gap[] = {2, 0, 2};
    struct pm_hist g = H(0, 4, 0, 0, 0, 1, gap, 3, 0, NULL, 0);
    SAME(pm_hist_quantile(0.75, &g), 6.0);
}

Test(pmhist, quantile_zero_bucket_and_negative_side)
{
    /* zero bucket [-0.001, 0.001]: 2, (1,2]: 2. Only positive buckets:
     * the zero bucket's lower bound becomes 0; rank 1 -> 0 + 0.001 / 2 */
    static const double p[] = {2};
    struct pm_hist h = H(0, 4, 3, 0.001, 2, 1, p, 1, 0, NULL, 0);
    SAME(pm_hist_quantile(0.25, &h), 0.0005);
    /* rank 3: 1 into (1,2] (its lower bound 1 >= threshold stays) */
    SAME(pm_hist_quantile(0.75, &h), 1.5);
    /* only negative: [-2,-1): 2 -> rank 1: -2 + 1 * 1/2 */
    static const double n[] = {2};
    struct pm_hist neg = H(0, 2, -3, 0, 0, 0, NULL, 0, 1, n, 1);
    SAME(pm_hist_quantile(0.5, &neg), -1.5);
    /* negative and zero bucket: the zero bucket's upper bound becomes 0;
     * [-2,-1): 2, zero 2 (thr 0.5): rank 3 -> -0.5 + 0.5 * 1/2 */
    struct pm_hist nz = H(0, 4, -3, 0.5, 2, 0, NULL, 0, 1, n, 1);
    SAME(pm_hist_quantile(0.75, &nz), -0.25);
    /* both sides: [-2,-1): 2, zero [-0.5,0.5]: 2, (1,2]: 2; rank 3 ->
     * -0.5 + 1 * 1/2 = 0 */
    struct pm_hist both = H(0, 6, 0, 0.5, 2, 1, p, 1, 1, n, 1);
    SAME(pm_hist_quantile(0.5, &both), 0.0);
    /* negative buckets run from the most negative: rank 1 in [-4,-2) of
     * neg {idx 1: 1, idx 2: 1} -> -4 + 2 * 1 = -2 */
    static const double n2[] = {1, 1};
    struct pm_hist two = H(0, 2, 0, 0, 0, 0, NULL, 0, 1, n2, 2);
    SAME(pm_hist_quantile(0.5, &two), -2.0);
    SAME(pm_hist_quantile(0.25, &two), -3.0);
}

Test(pmhist, fraction_between_bounds)
{
    static const double p[] = {2, 2}; /* (1,2]: 2, (2,4]: 2 */
    struct pm_hist h = H(0, 4, 10, 0, 0, 1, p, 2, 0, NULL, 0);
    SAME(pm_hist_fraction(-INFINITY, 2, &h), 0.5);
    SAME(pm_hist_fraction(-INFINITY, INFINITY, &h), 1.0);
    /* lower 1.5 -> rank 1; upper 3 -> 2 + 2 * 1/2 = 3; (3 - 1) / 4 */
    SAME(pm_hist_fraction(1.5, 3, &h), 0.5);
    SAME(pm_hist_fraction(3, 3, &h), 0.0);
    SAME(pm_hist_fraction(4, 1, &h), 0.0);
    SAME(pm_hist_fraction(NAN, 1, &h), NAN);
    SAME(pm_hist_fraction(0, 100, &h), 1.0);
    struct pm_hist empty = H(0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, 0);
    SAME(pm_hist_fraction(0, 1, &empty), NAN);
    /* zero bucket [-0.001,0.001]: 2 read as [0, 0.001]: up to 0.0005 is
     * half of it: 1 / 4 */
    static const double q[] = {2};
    struct pm_hist z = H(0, 4, 3, 0.001, 2, 1, q, 1, 0, NULL, 0);
    SAME(pm_hist_fraction(-INFINITY, 0.0005, &z), 0.25);
}

Test(pmhist, add_same_schema_and_across_schemas)
{
    /* a: (1,2]: 1, (2,4]: 2; b: (2,4]: 3, (4,8]: 4 */
    static const double pa[] = {1, 2}, pb[] = {3, 4};
    struct pm_hist a = H(0, 3, 5, 0, 0, 1, pa, 2, 0, NULL, 0);
    struct pm_hist b = H(0, 7, 20, 0, 0, 2, pb, 2, 0, NULL, 0);
    struct pm_hist *s = pm_hist_add(A, &a, &b);
    cr_assert_not_null(s);
    SAME(s->count, 10.0);
    SAME(s->sum, 25.0);
    cr_assert_eq(s->schema, 0);
    cr_assert_eq(s->pos_offset, 1);
    cr_assert_eq(s->n_pos, 3);
    SAME(s->pos[0], 1.0);
    SAME(s->pos[1], 5.0);
    SAME(s->pos[2], 4.0);
    /* inputs untouched */
    SAME(a.pos[1], 2.0);
    SAME(b.pos[0], 3.0);

    /* schema 1 into schema 0: indexes 1, 2 -> 1 and 3 -> 2:
     * (1,1.41]: 1 + (1.41,2]: 2 = 3 in (1,2]; (2,2.83]: 3 in (2,4] */
    static const double p1[] = {1, 2, 3};
    struct pm_hist fine = H(1, 6, 9, 0, 0, 1, p1, 3, 0, NULL, 0);
    static const double pc[] = {1};
    struct pm_hist coarse = H(0, 1, 1.5, 0, 0, 1, pc, 1, 0, NULL, 0);
    for (int order = 0; order < 2; order++) {
        s = order == 0 ? pm_hist_add(A, &fine, &coarse) : pm_hist_add(A, &coarse, &fine);
        cr_assert_not_null(s);
        cr_assert_eq(s->schema, 0);
        SAME(s->count, 7.0);
        SAME(s->sum, 10.5);
        cr_assert_eq(s->pos_offset, 1);
        cr_assert_eq(s->n_pos, 2);
        SAME(s->pos[0], 4.0);
        SAME(s->pos[1], 3.0);
    }
    /* negative side merges the same way: schema 2 idx 0..3 -> schema 0
     * idx ((i-1) >> 2) + 1: 0 -> 0, 1..3 -> 1 */
    static const double n4[] = {1, 1, 1, 1};
    struct pm_hist n2 = H(2, 4, -4, 0, 0, 0, NULL, 0, 0, n4, 4);
    struct pm_hist n0 = H(0, 0, 0, 0, 0, 0, NULL, 0, 0, NULL, 0);
    s = pm_hist_add(A, &n2, &n0);
    cr_assert_eq(s->schema, 0);
    cr_assert_eq(s->neg_offset, 0);
    cr_assert_eq(s->n_neg, 2);
    SAME(s->neg[0], 1.0);
    SAME(s->neg[1], 3.0);
}

Test(pmhist, add_reconciles_zero_thresholds)
{
    /* a: threshold 0.5, zero 1, (0.5,1]: 2, (1,2]: 3
     * b: threshold 1, zero 4, (1,2]: 1
     * a's zero bucket widens to 1: takes (0.5,1] (2) -> zero 3; then
     * zero 3 + 4 = 7, (1,2]: 3 + 1 = 4 */
    static const double pa[] = {2, 3}, pb[] = {1};
    struct pm_hist a = H(0, 6, 5, 0.5, 1, 0, pa, 2, 0, NULL, 0);
    struct pm_hist b = H(0, 5, 2, 1, 4, 1, pb, 1, 0, NULL, 0);
    struct pm_hist *s = pm_hist_add(A, &a, &b);
    cr_assert_not_null(s);
    SAME(s->zero_threshold, 1.0);
    SAME(s->zero_count, 7.0);
    SAME(s->count, 11.0);
    cr_assert_eq(s->pos_offset, 1);
    cr_assert_eq(s->n_pos, 1);
    SAME(s->pos[0], 4.0);
    /* a unchanged */
    SAME(a.zero_threshold, 0.5);
    SAME(a.pos[0], 2.0);

    /* the mirror image on the negative side: [-1,-0.5): 2 joins the zero
     * bucket and is cleared, [-2,-1): 3 + 1 */
    struct pm_hist na = H(0, 6, -5, 0.5, 1, 0, NULL, 0, 0, pa, 2);
    struct pm_hist nb = H(0, 5, -2, 1, 4, 0, NULL, 0, 1, pb, 1);
    s = pm_hist_add(A, &na, &nb);
    cr_assert_not_null(s);
    SAME(s->zero_threshold, 1.0);
    SAME(s->zero_count, 7.0);
    cr_assert_eq(s->neg_offset, 1);
    cr_assert_eq(s->n_neg, 1);
    SAME(s->neg[0], 4.0);
    cr_assert_eq(s->n_pos, 0);
}

Test(pmhist, sub_and_scale)
{
    static const double px[] = {5, 7}, py[] = {2, 3, 1};
    struct pm_hist x = H(0, 12, 30, 0, 1, 1, px, 2, 0, NULL, 0);
    struct pm_hist y = H(0, 7, 10, 0, 1, 0, py, 3, 0, NULL, 0);
    /* (0.5,1]: 0 - 2, (1,2]: 5 - 3, (2,4]: 7 - 1 */
    struct pm_hist *d = pm_hist_sub(A, &x, &y);
    cr_assert_not_null(d);
    SAME(d->count, 5.0);
    SAME(d->sum, 20.0);
    SAME(d->zero_count, 0.0);
    cr_assert_eq(d->pos_offset, 0);
    cr_assert_eq(d->n_pos, 3);
    SAME(d->pos[0], -2.0);
    SAME(d->pos[1], 2.0);
    SAME(d->pos[2], 6.0);
    /* x - x: every bucket 0, trimmed away */
    d = pm_hist_sub(A, &x, &x);
    SAME(d->count, 0.0);
    cr_assert_eq(d->n_pos, 0);

    struct pm_hist *m = pm_hist_scale(A, &x, 0.5);
    SAME(m->count, 6.0);
    SAME(m->sum, 15.0);
    SAME(m->zero_count, 0.5);
    SAME(m->pos[0], 2.5);
    SAME(m->pos[1], 3.5);
    SAME(x.pos[0], 5.0);
}

Test(pmhist, counter_reset_detection)
{
    static const double p1[] = {1, 2}, p2[] = {1, 3}, p3[] = {0, 3}, p4[] = {1, 2, 5};
    struct pm_hist a = H(0, 3, 5, 0, 0, 1, p1, 2, 0, NULL, 0);
    struct pm_hist grow = H(0, 4, 6, 0, 0, 1, p2, 2, 0, NULL, 0);
    cr_assert_not(pm_hist_is_reset(&a, &grow));
    cr_assert_not(pm_hist_is_reset(&a, &a));
    /* a bucket went down (count did not) */
    struct pm_hist down = H(0, 3, 6, 0, 0, 1, p3, 2, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&a, &down));
    /* count went down */
    struct pm_hist less = H(0, 2, 6, 0, 0, 1, p2, 2, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&a, &less));
    /* a new higher bucket is fine */
    struct pm_hist more = H(0, 8, 9, 0, 0, 1, p4, 3, 0, NULL, 0);
    cr_assert_not(pm_hist_is_reset(&a, &more));
    /* a non-empty bucket of the old one missing in the new one */
    static const double p5[] = {9};
    struct pm_hist gone = H(0, 9, 9, 0, 0, 2, p5, 1, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&a, &gone));
    /* a larger schema, a smaller zero threshold, a smaller zero count */
    struct pm_hist finer = H(1, 3, 5, 0, 0, 1, p1, 2, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&a, &finer));
    struct pm_hist az = H(0, 5, 5, 0.5, 2, 1, p1, 2, 0, NULL, 0);
    struct pm_hist narrower = H(0, 5, 5, 0.25, 2, 1, p1, 2, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&az, &narrower));
    struct pm_hist zless = H(0, 5, 5, 0.5, 1, 1, p2, 2, 0, NULL, 0);
    cr_assert(pm_hist_is_reset(&az, &zless));
    /* a coarser schema: the old buckets merged down compare: schema 1
     * idx 1, 2 (1 + 2 = 3) against schema 0 (1,2]: 3 -> no reset */
    static const double f[] = {1, 2}, c[] = {3};
    struct pm_hist fine = H(1, 3, 1, 0, 0, 1, f, 2, 0, NULL, 0);
    struct pm_hist coarse = H(0, 3, 1, 0, 0, 1, c, 1, 0, NULL, 0);
    cr_assert_not(pm_hist_is_reset(&fine, &coarse));
}
