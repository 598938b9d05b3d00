/*
 * pmsrc_int.h - what the files of the series source share (pmsrc.c:
 * planning, the row loop and the series table; pmsrc_out.c: exponential
 * histograms, sorting and folding the collected samples, metadata,
 * exemplar decoding; pmsrc_idx.c: a sealed block's label index;
 * pmsrc_lbl.c: building, caching and reading it, the label calls).
 * Nothing outside query/pmsrc*.c includes it.
 */
#ifndef MIRADB_PMSRC_INT_H
#define MIRADB_PMSRC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/pmodel.h"
#include "query/pmsrc.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/oblock.h"

struct pmsrc {
    struct qctx *q;
    arena *a; /* the results (charged to q: qctx_arena_bind) */
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

/* Where an index build saw a series: a stream of the block's stream
 * section (the whole stream when row is PMS_WHOLE) or, stream
 * PMS_NOSTREAM, one row of a block without one. */
#define PMS_WHOLE UINT32_MAX
#define PMS_NOSTREAM UINT32_MAX
struct pms_pair {
    uint32_t stream, row;
};

/* One distinct series of a call. */
struct pms_series {
    struct pm_labels labels;
    uint64_t hash;
    bool match; /* every matcher admits it (evaluated once) */
    bool seen;  /* a sample in [mint, maxt] (series mode) */
    struct pm_fsample *f;
    uint32_t nf, cf;
    bool f_res; /* f is in the results' arena (stream_floats): folded in place */
    struct pm_hsample *h;
    uint32_t nh, ch;
    struct pms_dsample *d; /* delta samples, accumulated at the end */
    uint32_t nd, cd;
    struct pms_ex *e;
    uint32_t ne, ce;
    struct pms_pair *px; /* index builds: where the series was seen, in row order */
    uint32_t npx, cpx;
};

enum pms_mode {
    PMS_SAMPLES,
    PMS_SERIES,
    PMS_EXEMPLARS,
    PMS_INDEX, /* building a block's label index: where each series is */
};

/* One call's state (pmsrc.c); the per-block tables are pmsrc.c's own. */
struct pms_metric;
struct pms_res;
struct pms_ent;
struct pms_run {
    struct pmsrc *s;
    struct qctx *q;
    arena *a, *call, *blk;
    const struct promql_matcher *m;
    size_t n_m;
    int64_t mint, maxt;
    uint64_t lo_ns, hi_ns; /* [lo_ns, hi_ns): the range's points */
    enum pms_mode mode;
    bool want_ti;
    /* series */
    struct pms_series *ser;
    uint32_t nser, cser;
    uint32_t *tab; /* index + 1; 0 empty */
    uint32_t tcap;
    /* block */
    struct qctx_src *src;
    struct pms_metric *mi;
    uint32_t nmi;
    struct pms_res *ri;
    uint32_t nri;
    struct pms_ent *ent;
    uint32_t nent, cent;
    uint32_t *etab;
    uint32_t etcap;
    uint32_t cur_stream; /* index mode: the stream read, or PMS_NOSTREAM */
    uint32_t cur_row;    /* index mode: the block row read */
    bool idx_whole;      /* index mode: the stream's first row stands for all */
    bool no_index;       /* the label index is not to be tried (it could not be had) */
    int err;
};

/* 0, or -ENOMEM: makes room for one more element of |sz| bytes in *p. */
int pms_grow(arena *a, void **p, uint32_t *cap, uint32_t n, size_t sz);

/* 0, or -ENOMEM: room for one more float sample of |s| (moved into |a|
 * when it grows). */
int pms_grow_f(arena *a, struct pms_series *s);

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

/* ---- the run (pmsrc.c) ---- */

/* A call over |s| (n matchers m, the range in ms, the mode): 0, or -ENOMEM
 * (the qctx's error). pms_run_fini returns the call's scratch. */
int pms_run_init(struct pms_run *r, struct pmsrc *s, const struct promql_matcher *m, size_t n,
                 int64_t mint, int64_t maxt, enum pms_mode mode);
void pms_run_fini(struct pms_run *r);
/* One source: plan, then its rows (or its index). 0, or the query's error. */
int pms_do_block(struct pms_run *r, struct qctx_src *qs);
/* The run's arenas charge their chunks to the qctx as they grow
 * (qctx_arena_bind); this returns qctx_err, so a memory limit the growth
 * hit ends the loop that calls it. */
int pms_charge(struct pms_run *r);
/* The call's series of |ls| (hash |h| = pm_labels_hash), created when new:
 * its index, or -ENOMEM. |copy|: a label index's series, which its
 * matching admitted, its strings copied into the result arena. */
int64_t pms_intern(struct pms_run *r, const struct pm_labels *ls, uint64_t h, bool copy);
/* While |x| is set, pms_unmapped_note on this thread counts into it. */
struct pmx;
void pms_note_record(struct pmx *x);

/* ---- the label index's use (pmsrc_lbl.c) ---- */

/* The index of sealed source |qs|: cached on the block, built on first use
 * when the cache has room. NULL when there is none (then the query's error
 * is set, or the source failed, or the block is read without the index). */
const struct pmx *pms_index_of(struct pms_run *r, struct qctx_src *qs);
/* Series mode over a block's index: 0 or the query's error. */
int pms_series_from_index(struct pms_run *r, const struct pmx *x);
/* The streams (one byte per block stream) that make a series the run's
 * matchers admit, *ti_admitted whether one is a target_info; NULL with the
 * query's error set. */
uint8_t *pms_streams_wanted(struct pms_run *r, const struct pmx *x, uint32_t n_streams,
                            bool *ti_admitted);

/* ---- the label index of a sealed block (pmsrc_idx.c) ----
 *
 * Every series the block's points make (target_info included), its label
 * set, and where it has samples: refs, each a list of block rows ascending
 * (a stream's rows, or the rows of a stream that made this series when not
 * all of them did). Postings: label names sorted, each name's values
 * sorted, each value's series ids ascending. Built once per block by
 * pmsrc.c (a run in index mode), cached on the block (blk_aux) and
 * charged to the memory budget; freed with the block. Read-only once
 * attached, so any number of queries read it at once. */
struct pmx_ref {
    uint32_t stream; /* block stream, or PMS_NOSTREAM */
    uint32_t n;
    const uint32_t *rows;
};

struct pmx_series {
    uint64_t hash;       /* pm_labels_hash of its labels (with __name__) */
    uint32_t ref0, nref; /* ref[] */
    uint32_t lab0, nlab; /* lab[]: its values' ids, so its labels in name order */
};

struct pmx_val {
    const char *s;
    uint32_t n;
    uint32_t post0, npost;
    uint32_t name; /* name[] */
};

struct pmx_name {
    const char *s;
    uint32_t n;
    uint32_t val0, nval;
};

struct pmx {
    arena *a;
    size_t bytes;         /* its memory */
    bool charged;         /* bytes taken from the memory budget and the cache */
    const uint64_t *time; /* the block's time column */
    uint64_t tmin, tmax;  /* the block's first and last row times */
    struct pmx_series *ser;
    uint32_t nser;
    struct pmx_ref *ref;
    uint32_t nref;
    uint32_t *lab;
    struct pmx_name *name;
    uint32_t nname;
    struct pmx_val *val;
    uint32_t *post;
    uint32_t ti_val;  /* the value id of __name__="target_info", or UINT32_MAX */
    uint32_t n_notes; /* pms_unmapped_note calls the build made, replayed per use */
    const char *note;
    uint32_t note_len;
};

/* Builds the index, in x->a, of the |n| series of an index run (pairs in
 * row order) over a block whose stream rows |b| gives; scratch in |tmp|
 * (the series' labels may be there too). 0 or -ENOMEM. */
int pmx_assemble(struct pmx *x, blk *b, const struct pms_series *s, uint32_t n, arena *tmp);
/* The labels of series |i| (the array in |a|, the strings the index's). */
int pmx_labels(const struct pmx *x, uint32_t i, arena *a, struct pm_labels *out);

/* Frees an index (and returns its charge, once pmx_charge took it). */
void pmx_free(void *x);
/* Whether the cache (bounded: an eighth of the memory budget, 1 GiB
 * without one) has room for |bytes| more; pmx_charge takes x->bytes from
 * the memory budget and the cache (false: no room, nothing taken). */
bool pmx_cache_room(size_t bytes);
/* A guess of the size of |b|'s index, from the builds so far (a build
 * that did not fit is not repeated by every query); pmx_note_built feeds it. */
size_t pmx_guess(const blk *b);
void pmx_note_built(const blk *b, size_t bytes);
/* A build of |b| was dropped past |allowed| bytes of scratch: a build
 * needs more than that per stream (or row) of its block, so
 * pmx_build_fits refuses one that would need more than its allowance by
 * that measure, and queries do not each run a build that cannot finish. */
void pmx_note_too_big(const blk *b, size_t allowed);
bool pmx_build_fits(const blk *b, size_t allowed);
bool pmx_charge(struct pmx *x);

/* Whether series |i| has a row with time in [lo_ns, hi_ns). */
bool pmx_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns);

/* The ids of the series every matcher admits, ascending (n == 0: all),
 * into *out (|tmp| memory): postings intersected, each matcher tested once
 * per distinct value of its label. The count, or -ENOMEM. */
int64_t pmx_match(const struct pmx *x, const struct promql_matcher *m, size_t n, arena *tmp,
                  uint32_t **out);

/* The name |i| or value |i| (of names[] / vals[]) has a series with a row
 * in [lo_ns, hi_ns). */
bool pmx_name_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns);
bool pmx_val_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns);
/* Index of label name p[0, n) in names[], or -1. */
int64_t pmx_find_name(const struct pmx *x, const char *p, size_t n);

#endif
