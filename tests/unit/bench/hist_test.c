/*
 * hist_test.c - otlp-load's latency histogram (bench/otlp-load/hist.c).
 *
 * hist.c lives under bench/ (not in the project library), so it is
 * compiled into this test by inclusion.
 */
#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench/otlp-load/hist.c"

Test(loadgen_hist, quantiles_within_one_bucket_and_exact_extremes)
{
    struct hist *h = malloc(sizeof(*h));
    bool clamped;
    hist_init(h);
    cr_assert_eq(hist_quantile(h, 0.5, &clamped), 0);
    cr_assert_eq(h->n, 0);
    /* small values are exact */
    for (uint64_t v = 1; v <= 100; v++) {
        hist_add(h, v);
    }
    cr_assert_eq(hist_quantile(h, 0.50, &clamped), 50);
    cr_assert_eq(hist_quantile(h, 0.99, &clamped), 99);
    cr_assert_eq(hist_quantile(h, 1.0, &clamped), 100);
    cr_assert_not(clamped);

    /* 1..1e6 us in ns: each quantile within 1/128 above the true value */
    hist_init(h);
    for (uint64_t v = 1; v <= 1000000; v++) {
        hist_add(h, v * 1000);
    }
    const double qs[] = {0.5, 0.9, 0.99, 0.999};
    for (int i = 0; i < 4; i++) {
        double want = qs[i] * 1e9;
        double got = (double)hist_quantile(h, qs[i], &clamped);
        cr_assert(got >= want && got <= want * (1 + 1.0 / 128), "q%.3f: %.0f vs %.0f", qs[i], got,
                  want);
    }
    cr_assert_eq(h->min, 1000);
    cr_assert_eq(h->max, 1000000000);
    cr_assert_eq(hist_quantile(h, 1.0, &clamped), 1000000000); /* capped at the exact max */

    /* beyond the ceiling: reported as clamped, never as a value */
    struct hist *o = malloc(sizeof(*o));
    hist_init(o);
    hist_add(o, 5);
    hist_add(o, HIST_CEILING + 7);
    hist_add(o, HIST_CEILING * 2);
    cr_assert_eq(hist_quantile(o, 0.2, &clamped), 5);
    cr_assert_not(clamped);
    cr_assert_eq(hist_quantile(o, 0.99, &clamped), HIST_CEILING);
    cr_assert(clamped);
    cr_assert_eq(o->overflow, 2);
    cr_assert_eq(o->max, HIST_CEILING * 2);

    hist_merge(h, o);
    cr_assert_eq(h->n, 1000003);
    cr_assert_eq(h->min, 5);
    cr_assert_eq(h->overflow, 2);
    uint64_t q50 = hist_quantile(h, 0.5, &clamped);
    cr_assert(q50 >= 500000000 && q50 <= 500000000 + 500000000 / 128 && !clamped);
    free(o);
    free(h);
}
