/*
 * hist.c - log-linear latency histogram (see hist.h).
 *
 * Bucket index of v: below 2^S (S = HIST_SUB_BITS) the value itself; else,
 * with e the position of v's top bit, (e - S + 1) * 2^S plus the S bits
 * after the top bit. Bucket i >= 2^S therefore covers
 *   [(2^S + m) << (e - S), ((2^S + m + 1) << (e - S)) - 1], m = i mod 2^S.
 */
#include "bench/otlp-load/hist.h"

#include <math.h>
#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

static uint32_t bucket_of(uint64_t v)
{
    if (v < (1ULL << HIST_SUB_BITS)) {
        return (uint32_t)v;
    }
    uint32_t e = 63 - (uint32_t)__builtin_clzll(v);
    uint32_t shift = e - HIST_SUB_BITS;
    return ((e - HIST_SUB_BITS + 1) << HIST_SUB_BITS) +
           (uint32_t)((v >> shift) - (1ULL << HIST_SUB_BITS));
}

static uint64_t bucket_top(uint32_t i)
{
    if (i < (1u << HIST_SUB_BITS)) {
        return i;
    }
    uint32_t e = (i >> HIST_SUB_BITS) + HIST_SUB_BITS - 1;
    uint64_t m = i & ((1u << HIST_SUB_BITS) - 1);
    uint32_t shift = e - HIST_SUB_BITS;
    return (((1ULL << HIST_SUB_BITS) + m + 1) << shift) - 1;
}

void hist_add(struct hist *h, uint64_t v)
{
    h->n++;
    if (v < h->min) {
        h->min = v;
    }
    if (v > h->max) {
        h->max = v;
    }
    if (v >= HIST_CEILING) {
        h->overflow++;
        return;
    }
    h->counts[bucket_of(v)]++;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    dst->n += src->n;
    dst->overflow += src->overflow;
    if (src->min < dst->min) {
        dst->min = src->min;
    }
    if (src->max > dst->max) {
        dst->max = src->max;
    }
    for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
        dst->counts[i] += src->counts[i];
    }
}

uint64_t hist_quantile(const struct hist *h, double q, bool *clamped)
{
    *clamped = false;
    if (h->n == 0) {
        return 0;
    }
    uint64_t rank = (uint64_t)ceil(q * (double)h->n);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > h->n) {
        rank = h->n;
    }
    uint64_t seen = 0;
    for (uint32_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t top = bucket_top(i);
            return top < h->max ? top : h->max;
        }
    }
    *clamped = true;
    return HIST_CEILING;
}
