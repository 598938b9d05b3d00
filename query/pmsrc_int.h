/*
 * pmsrc_int.h - what the two files of the series source share (pmsrc.c:
 * planning, the row loop and the series table; pmsrc_out.c: exponential
 * histograms, sorting and folding the collected samples, metadata,
 * exemplar decoding). Nothing outside query/pmsrc*.c includes it.
 */
#ifndef MIRADB_PMSRC_INT_H
#define MIRADB_PMSRC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/pmodel.h"
#include "query/pmsrc.h"
#include "storage/oblock.h"

struct pmsrc {
    struct qctx *q;
    arena *a;         /* the results */
    size_t charged_a; /* arena_footprint(a) charged to the qctx so far */
};

/* A delta sample before it is accumulated. */
struct pms_dsample {
    uint64_t sns, tns;
    double v;
};

/* An exemplar collected for a series. */
struct pms_ex {
    int64_t t;
    double v;
    struct pm_labels labels;
};

/* One distinct series of a call. */
struct pms_series {
    struct pm_labels labels;
    uint64_t hash;
    bool match; /* every matcher admits it (evaluated once) */
    bool seen;  /* a sample in [mint, maxt] (series mode) */
    struct pm_fsample *f;
    uint32_t nf, cf;
    struct pm_hsample *h;
    uint32_t nh, ch;
    struct pms_dsample *d; /* delta samples, accumulated at the end */
    uint32_t nd, cd;
    struct pms_ex *e;
    uint32_t ne, ce;
};

/* 0, or -ENOMEM: makes room for one more element of |sz| bytes in *p. */
int pms_grow(arena *a, void **p, uint32_t *cap, uint32_t n, size_t sz);

/*
 * The native histogram of an exponential-histogram point (|detail| as
 * batch.h says): schema = scale, clamped to 8 by merging buckets, indexes
 * shifted by one, zero threshold Prometheus's 1e-128, count and sum;
 * |stale| makes count and sum the staleness marker; |gauge| sets
 * reset_hint 3. 0, -EINVAL (a scale below -4: Prometheus refuses it),
 * -EBADMSG, -ENOMEM.
 */
int pms_exp_hist(arena *a, const uint8_t *detail, size_t len, uint64_t count, double sum,
                 bool has_sum, bool stale, bool gauge, struct pm_hist **out);

/* Folds a series' collected samples into sorted, deduplicated arrays in
 * [mint, maxt] (delta samples accumulated first), the result in |a| and
 * the scratch in |tmp|. 0 or -ENOMEM. */
int pms_series_finish(arena *a, arena *tmp, struct pms_series *s, int64_t mint, int64_t maxt,
                      struct pm_series *out);

/* Sorts a series' exemplars by time (stable), keeping [mint, maxt]. */
int pms_ex_finish(arena *tmp, struct pms_ex *e, uint32_t n, int64_t mint, int64_t maxt,
                  uint32_t *n_out);

/* The bucket an exemplar of value |v| goes to in a classic histogram
 * point: the index of the first explicit bound >= v among the bounds that
 * make a _bucket series (min(bounds, counts)), its le text written to |le|;
 * -1 for +Inf; -2 for a malformed detail blob. */
int pms_hist_bucket_of(const uint8_t *detail, size_t len, double v, char le[352], size_t *le_len);

/*
 * Walks an exemplars blob (batch.h) of |n| entries: calls |fn| with each
 * exemplar's time (ms), value and its label set built in |a| (trace_id,
 * span_id in lower-case hex, the filtered attributes). 0, -EBADMSG,
 * -ENOMEM, or |fn|'s negative return.
 */
typedef int (*pms_ex_fn)(void *ctx, int64_t t, double v, const struct pm_labels *labels);
int pms_exemplars_walk(arena *a, const uint8_t *p, size_t len, uint32_t n, pms_ex_fn fn, void *ctx);

/* Counts a metric or series Prometheus would refuse (pmsrc_unmapped). */
void pms_unmapped_note(const char *name, size_t len);

#endif
