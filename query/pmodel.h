/*
 * pmodel.h - the values PromQL works on, shared by the series source
 * (pmsrc.h), the evaluator (pmeval.h) and the Prometheus HTTP API
 * (server/prom.c): label sets, float and native-histogram samples, series
 * and series sets, and the label-set helpers every one of them needs.
 *
 * MEMORY: everything here lives in one arena per query (storage/arena.h):
 * strings, label arrays, sample arrays, histograms. Nothing is freed one by
 * one; the query frees its arena at the end. Pointers stay valid until then.
 *
 * LABELS: a label set is sorted by name, bytewise (as Prometheus's
 * labels.Labels), names unique, no empty values (Prometheus drops a label
 * whose value is ""). The metric name is the label "__name__" like any
 * other (it sorts after upper-case names, bytewise).
 *
 * NATIVE HISTOGRAMS: struct pm_hist is Prometheus's FloatHistogram with
 * the buckets held dense: bucket index i of schema s covers
 * (base^(i-1), base^i] for base = 2^(2^-s) (positive side; the negative
 * side mirrors it). An OTLP exponential histogram's bucket index j covers
 * (base^j, base^(j+1)], so OTLP j is Prometheus j + 1. Counts are
 * absolute per bucket (not Prometheus's chunk deltas).
 *
 * Threads: the functions are pure over their arguments.
 */
#ifndef MIRADB_PMODEL_H
#define MIRADB_PMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/arena.h"

struct pm_label {
    const char *name;
    const char *value;
    uint32_t name_len;
    uint32_t value_len;
};

struct pm_labels {
    const struct pm_label *v; /* sorted by name; may be NULL when n == 0 */
    uint32_t n;
};

/* Hash of a label set (names and values with separators), stable within
 * the process: equal sets hash equal. */
uint64_t pm_labels_hash(const struct pm_labels *ls);
/* Same, leaving out the labels pm_labels_keep() would drop: the hash of
 * what matching on(names) (on = true) or ignoring(names) (on = false)
 * compares. With |drop_name| the __name__ label is left out too
 * (ignoring always drops it, as Prometheus's signatureFunc does). */
uint64_t pm_labels_hash_on(const struct pm_labels *ls, bool on, const char *const *names,
                           const uint32_t *name_lens, size_t n_names, bool drop_name);
/* Prometheus labels.Compare: label by label, names then values bytewise;
 * a prefix sorts first. */
int pm_labels_cmp(const struct pm_labels *a, const struct pm_labels *b);
bool pm_labels_equal(const struct pm_labels *a, const struct pm_labels *b);
/* The value of |name|, or NULL (then *len = 0) when the set lacks it. */
const char *pm_labels_get(const struct pm_labels *ls, const char *name, size_t nlen, uint32_t *len);

/*
 * A label-set builder (labels.Builder): start from a set, set / delete
 * labels, then pm_lb_done copies the result into the arena. Setting a
 * value of length 0 deletes the label. The strings passed are borrowed
 * until pm_lb_done, which copies the label array (not the strings: they
 * must already live in the arena or in the query; pm_lb_set_copy copies).
 */
struct pm_lb {
    arena *a;
    struct pm_label *v;
    uint32_t n, cap;
    int err; /* -ENOMEM once an allocation failed: every later call is a no-op */
};
void pm_lb_init(struct pm_lb *b, arena *a, const struct pm_labels *from);
void pm_lb_set(struct pm_lb *b, const char *name, size_t nlen, const char *value, size_t vlen);
/* pm_lb_set with the value copied into the arena first. */
void pm_lb_set_copy(struct pm_lb *b, const char *name, size_t nlen, const char *value, size_t vlen);
void pm_lb_del(struct pm_lb *b, const char *name, size_t nlen);
/* Keeps only (on) or drops (!on) the named labels; __name__ is dropped
 * too when |drop_name| (by / without grouping, on / ignoring matching). */
void pm_lb_keep(struct pm_lb *b, bool on, const char *const *names, const uint32_t *name_lens,
                size_t n_names, bool drop_name);
/* 0 and *out (arena memory), or -ENOMEM. */
int pm_lb_done(struct pm_lb *b, struct pm_labels *out);

/* The set without __name__ (shares |in|'s strings; |in| itself when it has
 * no name). 0 or -ENOMEM. */
int pm_labels_drop_name(arena *a, const struct pm_labels *in, struct pm_labels *out);

/* ---- samples ---- */

struct pm_hist {
    int32_t schema; /* -4 .. 8 */
    double zero_threshold;
    double zero_count;
    double count; /* all observations, NaN ones included */
    double sum;
    int32_t pos_offset; /* Prometheus index of pos[0] */
    int32_t neg_offset; /* Prometheus index of neg[0] */
    uint32_t n_pos, n_neg;
    double *pos, *neg; /* absolute counts (arena memory) */
    /* 0 unknown, 1 counter reset, 2 not a reset, 3 gauge histogram
     * (Prometheus's CounterResetHint) */
    uint8_t reset_hint;
};

struct pm_fsample {
    int64_t t; /* ms since the epoch */
    double v;
};

struct pm_hsample {
    int64_t t;
    const struct pm_hist *h;
};

/* One series: float samples and histogram samples, each sorted by t,
 * strictly increasing (a series that switched between the two kinds has
 * both arrays; a timestamp is in at most one of them). */
struct pm_series {
    struct pm_labels labels;
    const struct pm_fsample *f;
    size_t nf;
    const struct pm_hsample *h;
    size_t nh;
};

struct pm_set {
    struct pm_series *s;
    size_t n;
};

/* Sorts a set by labels (pm_labels_cmp), as Prometheus sorts a matrix. */
void pm_set_sort(struct pm_set *set);

/* Bucket |i|'s bounds (Prometheus index, schema s): (lower, upper] on the
 * positive side, [lower, upper) on the negative one, bit-identical to
 * Prometheus's getBound (its precalculated table). Implemented in
 * pmhist.c; declared here too (as in pmeval_int.h) because the HTTP API
 * writes these bounds into native-histogram answers. */
void pm_hist_bounds(int32_t schema, int32_t i, bool negative, double *lower, double *upper);

/* Deep copy of a histogram into the arena (NULL on -ENOMEM). */
struct pm_hist *pm_hist_dup(arena *a, const struct pm_hist *h);

#endif
