/*
 * lathist.h - a fixed latency histogram for /metrics: LH_BUCKETS upper
 * bounds from 250 us to 1.024 s, then +Inf, and the sum. The bounds are 1 ms
 * apart from 1 to 6 ms, 2 ms apart to 12 ms, then 16, 24, 32, 48, 64 ms and
 * doubling, so that a 5 or 10 ms ack target can be read off them. Adding is
 * at most a score of compares and two increments; lathist_add for a single writer
 * (plain stores, read with relaxed loads), lathist_add_shared for several.
 */
#ifndef MIRADB_LATHIST_H
#define MIRADB_LATHIST_H

#include <stdint.h>

#define LH_BUCKETS 20 /* finite bounds; n[LH_BUCKETS] counts the rest */

struct lathist {
    uint64_t n[LH_BUCKETS + 1];
    uint64_t sum_ns;
};

/* Bucket |i|'s upper bound in microseconds (i < LH_BUCKETS). */
static inline uint64_t lathist_bound_us(int i)
{
    static const uint32_t us[LH_BUCKETS] = {250,   500,   1000,   2000,   3000,   4000,   5000,
                                            6000,  8000,  10000,  12000,  16000,  24000,  32000,
                                            48000, 64000, 128000, 256000, 512000, 1024000};
    return us[i];
}

static inline int lathist_bucket(uint64_t ns)
{
    uint64_t us = ns / 1000;
    int i = 0;
    while (i < LH_BUCKETS && us > lathist_bound_us(i)) {
        i++;
    }
    return i;
}

static inline void lathist_add(struct lathist *h, uint64_t ns)
{
    h->n[lathist_bucket(ns)]++;
    h->sum_ns += ns;
}

static inline void lathist_add_shared(struct lathist *h, uint64_t ns)
{
    __atomic_add_fetch(&h->n[lathist_bucket(ns)], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

/* |into| += |h|, read with relaxed loads. */
static inline void lathist_sum(struct lathist *into, const struct lathist *h)
{
    for (int i = 0; i <= LH_BUCKETS; i++) {
        into->n[i] += __atomic_load_n(&h->n[i], __ATOMIC_RELAXED);
    }
    into->sum_ns += __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
}

#endif
