/*
 * hist.h - otlp-load's latency histogram: HDR-style log-linear buckets, a
 * fixed array, no allocation per sample.
 *
 * Values (nanoseconds) below 2^HIST_SUB_BITS are counted exactly; above, each
 * power of two is split into 2^HIST_SUB_BITS buckets, so a reported quantile
 * is at most 1/128 (0.8 %) above the true sample. Values at or above
 * HIST_CEILING are counted as overflow and a quantile that lands there is
 * reported as clamped ("at least the ceiling"), never as a value.
 */
#ifndef MIRADB_BENCH_HIST_H
#define MIRADB_BENCH_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_MAX_EXP 42 /* ceiling 2^42 ns, about 73 minutes */
#define HIST_CEILING (1ULL << HIST_MAX_EXP)
#define HIST_BUCKETS ((HIST_MAX_EXP - HIST_SUB_BITS + 1) << HIST_SUB_BITS)

struct hist {
    uint64_t n;        /* samples, overflow included */
    uint64_t overflow; /* samples >= HIST_CEILING */
    uint64_t min, max; /* exact; max is the largest sample even when it overflowed */
    uint64_t counts[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
/* Adds every sample of |src| to |dst|. */
void hist_merge(struct hist *dst, const struct hist *src);

/*
 * The value at quantile |q| (0..1]: the upper edge of the bucket holding the
 * sample of rank ceil(q * n), capped at the exact max. 0 when empty. Sets
 * |*clamped| when that sample is an overflow (the result is then
 * HIST_CEILING, a lower bound).
 */
uint64_t hist_quantile(const struct hist *h, double q, bool *clamped);

#endif
