/*
 * blkgen.h - random open blocks for the block tests (block_test.c) and the
 * fuzz seed corpus: every field of every signal set, edge values included
 * (time 0, end before start, negative enums, empty and long strings,
 * every value type, NaN bit patterns), rows out of time order so the
 * writer's sort is exercised. Deterministic for a seed.
 *
 * Header-only (static functions) because the Makefile builds only
 * tests/unit/x/y_test.c files; include it from one test file each.
 */
#ifndef MIRADB_TEST_BLKGEN_H
#define MIRADB_TEST_BLKGEN_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/oblock.h"
#include "storage/val.h"

#define GEN_OK(x)                                                                                  \
    do {                                                                                           \
        if ((x) < 0) {                                                                             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline uint64_t gen_rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t gen_below(uint64_t *s, uint64_t n)
{
    return n ? gen_rnd(s) % n : 0;
}

static const char *const gen_words[] = {
    "error", "timeout",   "GET",    "user_id", "connection", "refused", "OK",      "x42",
    "db",    "Query",     "slow",   "retry",   "upstream",   "cache",   "miss",    "_private",
    "ÅÄÖ",   "tab\there", "{json}", "a-b.c",   "",           "zz9",     "Payment", "latency"};
#define GEN_N_WORDS (sizeof(gen_words) / sizeof(gen_words[0]))

static inline struct mstr gen_copy(arena *a, const char *p, size_t n)
{
    char *c = arena_alloc(a, n + 1);
    if (c == NULL) {
        abort();
    }
    if (n) {
        memcpy(c, p, n);
    }
    c[n] = '\0';
    return (struct mstr){c, (uint32_t)n};
}

/* Empty (NULL or not), a word, or a sentence of words. */
static inline struct mstr gen_text(arena *a, uint64_t *s, unsigned max_words)
{
    char buf[4096];
    size_t n = 0;
    uint64_t r = gen_below(s, 10);
    if (r == 0) {
        return (struct mstr){NULL, 0};
    }
    if (r == 1) {
        return gen_copy(a, "", 0);
    }
    unsigned words = 1 + (unsigned)gen_below(s, max_words);
    for (unsigned i = 0; i < words && n < sizeof(buf) - 64; i++) {
        const char *w = gen_words[gen_below(s, GEN_N_WORDS)];
        size_t wl = strlen(w);
        if (i > 0) {
            buf[n++] = " ,:=/"[gen_below(s, 5)];
        }
        memcpy(buf + n, w, wl);
        n += wl;
        if (gen_below(s, 4) == 0) {
            n += (size_t)snprintf(buf + n, 24, "%llu", (unsigned long long)gen_below(s, 100000));
        }
    }
    return gen_copy(a, buf, n);
}

static inline void gen_value(struct vbuf *h, uint64_t *s, int depth)
{
    uint8_t raw[24];
    long at;
    for (int i = 0; i < 24; i++) {
        raw[i] = (uint8_t)gen_rnd(s);
    }
    switch (gen_below(s, depth > 2 ? 6 : 8)) {
    case 0: {
        const char *w = gen_words[gen_below(s, GEN_N_WORDS)];
        GEN_OK(val_put_str(h, w, strlen(w)));
        break;
    }
    case 1:
        GEN_OK(val_put_int(h, (int64_t)gen_rnd(s)));
        break;
    case 2: {
        double d;
        uint64_t bits = gen_rnd(s);
        memcpy(&d, &bits, 8); /* any bit pattern, NaNs included */
        GEN_OK(val_put_double(h, d));
        break;
    }
    case 3:
        GEN_OK(val_put_bool(h, gen_below(s, 2)));
        break;
    case 4:
        GEN_OK(val_put_bytes(h, raw, gen_below(s, 25)));
        break;
    case 5:
        GEN_OK(val_put_empty(h));
        break;
    case 6: {
        uint32_t n = (uint32_t)gen_below(s, 4);
        GEN_OK(at = val_open(h, VAL_ARRAY));
        for (uint32_t i = 0; i < n; i++) {
            gen_value(h, s, depth + 1);
        }
        val_close(h, at, n);
        break;
    }
    default: {
        uint32_t n = (uint32_t)gen_below(s, 4);
        GEN_OK(at = val_open(h, VAL_KVLIST));
        for (uint32_t i = 0; i < n; i++) {
            GEN_OK(val_put_key(h, gen_words[i], strlen(gen_words[i])));
            gen_value(h, s, depth + 1);
        }
        val_close(h, at, n);
        break;
    }
    }
}

static const char *const gen_keys[] = {
    "http.method", "http.status_code", "user.id", "region", "k8s.pod.name",
    "error",       "db.statement",     "peer"};

static inline struct attrs gen_attrs(struct batch *b, uint64_t *s, uint32_t max)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    uint32_t n = (uint32_t)gen_below(s, max + 1);
    for (uint32_t i = 0; i < n; i++) {
        const char *k = gen_keys[(i + gen_below(s, 3)) % 8];
        GEN_OK(val_put_key(h, k, strlen(k)));
        gen_value(h, s, 0);
    }
    return (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, n};
}

static inline void gen_id(uint64_t *s, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)gen_rnd(s);
    }
}

static inline uint64_t gen_time(uint64_t *s)
{
    switch (gen_below(s, 20)) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX - gen_below(s, 3);
    default:
        return 1700000000000000000ull + gen_below(s, 3600000000000ull);
    }
}

static inline void gen_dicts(struct batch *b, arena *a, uint64_t *s)
{
    uint32_t nr = 1 + (uint32_t)gen_below(s, 3), ns = 1 + (uint32_t)gen_below(s, 4);
    for (uint32_t i = 0; i < nr; i++) {
        struct res_row *r = batch_add_resource(b);
        GEN_OK(r ? 0 : -1);
        size_t off = b->heap.len;
        char v[32];
        int n = snprintf(v, sizeof(v), "svc-%llu", (unsigned long long)gen_below(s, 5));
        GEN_OK(val_put_key(&b->heap, "service.name", 12));
        GEN_OK(val_put_str(&b->heap, v, (size_t)n));
        GEN_OK(val_put_key(&b->heap, "host.id", 7));
        GEN_OK(val_put_int(&b->heap, (int64_t)gen_below(s, 9)));
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(b->heap.len - off)}, 2};
        r->dropped_attrs = (uint32_t)gen_below(s, 3);
        r->schema_url = gen_text(a, s, 1);
    }
    for (uint32_t i = 0; i < ns; i++) {
        struct scope_row *c = batch_add_scope(b);
        GEN_OK(c ? 0 : -1);
        c->resource = (uint32_t)gen_below(s, nr);
        c->name = gen_text(a, s, 2);
        c->version = gen_text(a, s, 1);
        c->attrs = gen_attrs(b, s, 2);
        c->dropped_attrs = (uint32_t)gen_below(s, 2);
        c->schema_url = gen_text(a, s, 1);
    }
}

static inline struct blob gen_events(struct batch *b, uint64_t *s, uint32_t n)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    for (uint32_t e = 0; e < n; e++) {
        GEN_OK(vbuf_put_u64(h, gen_time(s)));
        const char *w = gen_words[gen_below(s, GEN_N_WORDS)];
        GEN_OK(vbuf_put_str(h, w, strlen(w)));
        GEN_OK(vbuf_put_u32(h, (uint32_t)gen_below(s, 3)));
        size_t cat = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t at = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t start = h->len;
        struct attrs at2 = gen_attrs(b, s, 2);
        vbuf_patch_u32(h, cat, at2.count);
        vbuf_patch_u32(h, at, (uint32_t)(h->len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

static inline struct blob gen_links(struct batch *b, uint64_t *s, uint32_t n)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    for (uint32_t l = 0; l < n; l++) {
        uint8_t id[24];
        gen_id(s, id, 24);
        GEN_OK(vbuf_put(h, id, 24));
        GEN_OK(vbuf_put_str(h, "rojo=00f067aa0ba902b7", gen_below(s, 22)));
        GEN_OK(vbuf_put_u32(h, (uint32_t)gen_rnd(s)));
        GEN_OK(vbuf_put_u32(h, (uint32_t)gen_below(s, 4)));
        size_t cat = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t at = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t start = h->len;
        struct attrs at2 = gen_attrs(b, s, 2);
        vbuf_patch_u32(h, cat, at2.count);
        vbuf_patch_u32(h, at, (uint32_t)(h->len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

static inline struct blob gen_detail(struct batch *b, uint64_t *s, enum metric_kind kind)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    uint32_t n = (uint32_t)gen_below(s, 6);
    switch (kind) {
    case MK_HISTOGRAM:
        GEN_OK(vbuf_put_u32(h, n + 1));
        for (uint32_t i = 0; i <= n; i++) {
            GEN_OK(vbuf_put_u64(h, gen_below(s, 1000)));
        }
        GEN_OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            GEN_OK(vbuf_put_f64(h, 0.5 * (i + 1)));
        }
        break;
    case MK_EXP_HISTOGRAM:
        GEN_OK(vbuf_put_u32(h, (uint32_t)(int32_t)-3));
        GEN_OK(vbuf_put_u64(h, gen_below(s, 17)));
        GEN_OK(vbuf_put_f64(h, 1e-9));
        GEN_OK(vbuf_put_u32(h, (uint32_t)(int32_t)-2));
        GEN_OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            GEN_OK(vbuf_put_u64(h, gen_rnd(s)));
        }
        GEN_OK(vbuf_put_u32(h, 1));
        GEN_OK(vbuf_put_u32(h, 0));
        break;
    case MK_SUMMARY:
        GEN_OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            GEN_OK(vbuf_put_f64(h, i / 4.0));
            GEN_OK(vbuf_put_f64(h, (double)gen_below(s, 1000)));
        }
        break;
    default:
        break;
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

static inline struct blob gen_exemplars(struct batch *b, uint64_t *s, uint32_t n)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    for (uint32_t e = 0; e < n; e++) {
        uint8_t id[24];
        gen_id(s, id, 24);
        GEN_OK(vbuf_put_u64(h, gen_time(s)));
        GEN_OK(vbuf_put_u8(h, PV_DOUBLE));
        GEN_OK(vbuf_put_f64(h, 1.25 * e));
        GEN_OK(vbuf_put_u8(h, 1));
        GEN_OK(vbuf_put(h, id, 16));
        GEN_OK(vbuf_put_u8(h, 1));
        GEN_OK(vbuf_put(h, id + 16, 8));
        size_t cat = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t at = h->len;
        GEN_OK(vbuf_put_u32(h, 0));
        size_t start = h->len;
        struct attrs at2 = gen_attrs(b, s, 1);
        vbuf_patch_u32(h, cat, at2.count);
        vbuf_patch_u32(h, at, (uint32_t)(h->len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

/* Set by a test that needs every log body to be a string (token blooms). */
static bool gen_string_bodies_only;

static inline void gen_log_rows(struct batch *b, arena *a, uint64_t *s, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        struct log_row *r = batch_add_log(b);
        GEN_OK(r ? 0 : -1);
        r->time_ns = gen_time(s);
        r->observed_ns = gen_below(s, 4) == 0 ? gen_time(s) : r->time_ns + gen_below(s, 1000);
        r->scope = (uint32_t)gen_below(s, b->n_scopes);
        r->severity_number = (int32_t)gen_below(s, 30) - 3;
        static const char *const sev[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", ""};
        const char *st = sev[gen_below(s, 6)];
        r->severity_text =
            gen_below(s, 8) ? (struct mstr){st, (uint32_t)strlen(st)} : (struct mstr){NULL, 0};
        switch (gen_string_bodies_only ? 5 : gen_below(s, 6)) {
        case 0:
            r->body_type = VAL_EMPTY;
            break;
        case 1: {
            size_t off = b->heap.len;
            gen_value(&b->heap, s, 0);
            r->body_type = (enum val_type)b->heap.p[off];
            if (r->body_type == VAL_STR) { /* a string body is kept as a string */
                b->heap.len = off;
                r->body_str = gen_text(a, s, 3);
            } else if (r->body_type != VAL_EMPTY) {
                r->body_val = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
            } else {
                b->heap.len = off;
            }
            break;
        }
        default:
            r->body_type = VAL_STR;
            r->body_str = gen_text(a, s, 12);
            break;
        }
        r->attrs = gen_attrs(b, s, 6);
        r->dropped_attrs = (uint32_t)gen_below(s, 4);
        r->flags = (uint32_t)gen_rnd(s);
        r->has_trace_id = gen_below(s, 3) != 0;
        r->has_span_id = gen_below(s, 3) != 0;
        if (r->has_trace_id) {
            gen_id(s, r->trace_id, 16);
        }
        if (r->has_span_id) {
            gen_id(s, r->span_id, 8);
        }
        r->event_name = gen_below(s, 3) ? (struct mstr){NULL, 0} : gen_text(a, s, 1);
    }
}

static inline void gen_span_rows(struct batch *b, arena *a, uint64_t *s, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        struct span_row *r = batch_add_span(b);
        GEN_OK(r ? 0 : -1);
        r->start_ns = gen_time(s);
        r->end_ns = gen_below(s, 10) == 0 ? gen_time(s) : r->start_ns + gen_below(s, 5000000000ull);
        r->scope = (uint32_t)gen_below(s, b->n_scopes);
        gen_id(s, r->trace_id, 16);
        gen_id(s, r->span_id, 8);
        r->has_parent = gen_below(s, 4) != 0;
        if (r->has_parent) {
            gen_id(s, r->parent_span_id, 8);
        }
        r->trace_state = gen_below(s, 3) ? (struct mstr){NULL, 0} : gen_text(a, s, 2);
        r->name = gen_text(a, s, 3);
        r->kind = (int32_t)gen_below(s, 8) - 1;
        r->flags = (uint32_t)gen_rnd(s);
        r->status_code = (int32_t)gen_below(s, 4) - 1;
        r->status_message = gen_text(a, s, 4);
        r->attrs = gen_attrs(b, s, 8);
        r->dropped_attrs = (uint32_t)gen_below(s, 4);
        r->n_events = (uint32_t)gen_below(s, 3);
        r->events = gen_events(b, s, r->n_events);
        r->dropped_events = (uint32_t)gen_below(s, 3);
        r->n_links = (uint32_t)gen_below(s, 3);
        r->links = gen_links(b, s, r->n_links);
        r->dropped_links = (uint32_t)gen_below(s, 3);
    }
}

static inline void gen_metric_rows(struct batch *b, arena *a, uint64_t *s, uint32_t n)
{
    uint32_t nm = 1 + (uint32_t)gen_below(s, 6);
    for (uint32_t i = 0; i < nm; i++) {
        struct metric_row *m = batch_add_metric(b);
        GEN_OK(m ? 0 : -1);
        m->scope = (uint32_t)gen_below(s, b->n_scopes);
        m->name = gen_text(a, s, 1);
        m->description = gen_text(a, s, 5);
        m->unit = gen_text(a, s, 1);
        m->kind = (enum metric_kind)(i == 0 ? 1 + gen_below(s, 5) : gen_below(s, 6));
        m->temporality = (int32_t)gen_below(s, 3);
        m->monotonic = gen_below(s, 2);
        m->metadata = gen_attrs(b, s, 2);
    }
    for (uint32_t k = 0; k < n; k++) {
        struct point_row *r = batch_add_point(b);
        GEN_OK(r ? 0 : -1);
        uint32_t m;
        do {
            m = (uint32_t)gen_below(s, nm);
        } while (b->metrics[m].kind == MK_NONE);
        enum metric_kind kind = b->metrics[m].kind;
        r->metric = m;
        r->time_ns = gen_time(s);
        r->start_ns = gen_below(s, 5) ? r->time_ns - gen_below(s, 60000000000ull) : gen_time(s);
        r->attrs = gen_attrs(b, s, 5);
        r->flags = (uint32_t)gen_below(s, 2);
        if (kind == MK_GAUGE || kind == MK_SUM) {
            r->value_type = (enum point_value)gen_below(s, 3);
            if (r->value_type == PV_DOUBLE) {
                uint64_t bits = gen_rnd(s);
                memcpy(&r->value.d, &bits, 8);
            } else if (r->value_type == PV_INT) {
                r->value.i = (int64_t)gen_rnd(s);
            }
        } else {
            r->count = gen_rnd(s) >> gen_below(s, 64);
            r->sum = (double)gen_below(s, 100000) / 7;
            r->has_sum = kind == MK_SUMMARY || gen_below(s, 2);
            r->has_min = gen_below(s, 2);
            r->has_max = gen_below(s, 2);
            r->min = r->has_min ? -(double)gen_below(s, 1000) : 0;
            r->max = r->has_max ? (double)gen_below(s, 1000) : 0;
        }
        r->detail = gen_detail(b, s, kind);
        r->n_exemplars = (uint32_t)gen_below(s, 3);
        r->exemplars = gen_exemplars(b, s, r->n_exemplars);
    }
}

/* One random batch of |n| rows of |sig| (the batch and arena are reset). */
static inline void gen_batch(struct batch *b, arena *a, enum signal sig, uint64_t *s, uint32_t n)
{
    batch_reset(b, sig);
    arena_reset(a);
    gen_dicts(b, a, s);
    if (sig == SIG_LOGS) {
        gen_log_rows(b, a, s, n);
    } else if (sig == SIG_TRACES) {
        gen_span_rows(b, a, s, n);
    } else {
        gen_metric_rows(b, a, s, n);
    }
}

/* An open block of |total| random rows appended in batches of up to
 * |max_batch|. Returned owned (oblock_free); aborts on failure. */
static inline oblock *gen_oblock(enum signal sig, uint64_t seed, uint64_t total, uint32_t max_batch)
{
    oblock *ob;
    uint64_t s = seed;
    if (oblock_new(sig, &ob) < 0) {
        abort();
    }
    struct batch *b = batch_new(sig);
    arena *a = arena_new(0);
    if (b == NULL || a == NULL) {
        abort();
    }
    uint64_t seq = 1;
    for (uint64_t k = 0; k < total;) {
        uint32_t n = 1 + (uint32_t)gen_below(&s, max_batch);
        if (n > total - k) {
            n = (uint32_t)(total - k);
        }
        gen_batch(b, a, sig, &s, n);
        if (oblock_append(ob, b, seq++) != 0) {
            abort();
        }
        k += n;
    }
    batch_free(b);
    arena_free(a);
    return ob;
}

/*
 * An open block of |total| metric points that exercise what a metric
 * encoding can get wrong (deterministic for |seed|): a histogram stream
 * whose bounds change mid-block, histograms with no bounds, exponential
 * histograms with empty and huge buckets, summaries, a point with sum but
 * no min or max, values NaN (two bit patterns), +-Inf, -0.0 and the
 * largest and smallest integers, a gauge carrying detail bytes and a
 * histogram whose detail does not parse as its kind (kept as given).
 */
static inline oblock *gen_edge_points(uint64_t seed, uint64_t total)
{
    static const uint64_t fbits[] = {
        0x7ff8000000000000ull, 0x7ff0000000000001ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
        0x8000000000000000ull, 0x0000000000000001ull, 0x3ff0000000000000ull, 0x0000000000000000ull};
    oblock *ob;
    uint64_t s = seed;
    GEN_OK(oblock_new(SIG_METRICS, &ob));
    struct batch *b = batch_new(SIG_METRICS);
    arena *a = arena_new(0);
    GEN_OK(b && a ? 0 : -1);
    batch_reset(b, SIG_METRICS);
    gen_dicts(b, a, &s);
    static const enum metric_kind kinds[] = {MK_HISTOGRAM, MK_EXP_HISTOGRAM, MK_SUMMARY, MK_GAUGE,
                                             MK_SUM};
    for (uint32_t i = 0; i < 5; i++) {
        struct metric_row *m = batch_add_metric(b);
        GEN_OK(m ? 0 : -1);
        m->scope = 0;
        m->name = gen_copy(a, gen_words[i + 1], strlen(gen_words[i + 1]));
        m->kind = kinds[i];
        m->temporality = 2;
    }
    struct vbuf *h = &b->heap;
    for (uint64_t k = 0; k < total; k++) {
        struct point_row *r = batch_add_point(b);
        GEN_OK(r ? 0 : -1);
        uint32_t m = (uint32_t)(k % 5);
        uint32_t series = (uint32_t)gen_below(&s, 3);
        r->metric = m;
        r->time_ns = 1700000000000000000ull + k * 1000000000ull + gen_below(&s, 1000);
        r->start_ns = 1700000000000000000ull;
        size_t off = h->len;
        GEN_OK(val_put_key(h, "series", 6));
        GEN_OK(val_put_int(h, series));
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 1};
        r->flags = (uint32_t)(k % 7 == 0);
        off = h->len;
        double fv;
        uint64_t fb = fbits[gen_below(&s, 8)];
        memcpy(&fv, &fb, 8);
        switch (kinds[m]) {
        case MK_HISTOGRAM: {
            /* series 0 changes its bounds half way; series 2 has none */
            uint32_t nb = series == 2 ? 0 : series == 0 && k >= total / 2 ? 5 : 3;
            bool bad = k % 45 == 0; /* a detail that does not parse as a histogram */
            GEN_OK(vbuf_put_u32(h, nb + 1));
            for (uint32_t i = 0; i <= nb; i++) {
                GEN_OK(vbuf_put_u64(h, i == 1 ? UINT64_MAX - k : gen_below(&s, 300)));
            }
            GEN_OK(vbuf_put_u32(h, bad ? nb + 1 : nb));
            for (uint32_t i = 0; i < nb; i++) {
                GEN_OK(vbuf_put_f64(h, series == 1 ? (i == 0 ? -0.0 : 0.25 * i) : 0.5 * (i + 1)));
            }
            r->count = gen_rnd(&s);
            r->sum = fv;
            r->has_sum = true;
            r->has_min = k % 3 != 0; /* sum but no min */
            r->has_max = k % 4 != 0;
            r->min = r->has_min ? -fv : 0;
            r->max = r->has_max ? fv : 0;
            break;
        }
        case MK_EXP_HISTOGRAM: {
            uint32_t np = (uint32_t)gen_below(&s, 9), nn = (uint32_t)gen_below(&s, 2);
            GEN_OK(vbuf_put_u32(h, (uint32_t)(int32_t)((int)gen_below(&s, 21) - 10)));
            GEN_OK(vbuf_put_u64(h, gen_below(&s, 5)));
            GEN_OK(vbuf_put_f64(h, k % 2 ? 0.0 : 1e-300));
            GEN_OK(vbuf_put_u32(h, (uint32_t)(int32_t)((int)gen_below(&s, 200) - 100)));
            GEN_OK(vbuf_put_u32(h, np));
            for (uint32_t i = 0; i < np; i++) {
                GEN_OK(vbuf_put_u64(h, i == 3 ? UINT64_MAX : gen_below(&s, 70)));
            }
            GEN_OK(vbuf_put_u32(h, (uint32_t)INT32_MIN));
            GEN_OK(vbuf_put_u32(h, nn));
            for (uint32_t i = 0; i < nn; i++) {
                GEN_OK(vbuf_put_u64(h, gen_below(&s, 4)));
            }
            r->count = gen_below(&s, 1000);
            r->has_sum = k % 2 == 0;
            r->sum = r->has_sum ? fv : 0;
            r->has_min = r->has_max = true;
            r->min = -0.0;
            r->max = fv;
            break;
        }
        case MK_SUMMARY: {
            uint32_t nq = series == 2 ? 0 : 3;
            GEN_OK(vbuf_put_u32(h, nq));
            for (uint32_t i = 0; i < nq; i++) {
                GEN_OK(vbuf_put_f64(h, series == 1 && k > total / 2 ? 0.1 * i : 0.5 * i));
                GEN_OK(vbuf_put_f64(h, i == 1 ? fv : (double)gen_below(&s, 1000)));
            }
            r->count = 1 + gen_below(&s, 100);
            r->has_sum = true;
            r->sum = (double)gen_below(&s, 100000) / 7;
            break;
        }
        case MK_GAUGE:
            r->value_type = k % 10 == 3 ? PV_NONE : PV_DOUBLE;
            r->value.d = r->value_type == PV_DOUBLE ? fv : 0;
            if (k % 11 == 0) { /* detail bytes a gauge does not have: kept */
                GEN_OK(vbuf_put_u32(h, 7));
                GEN_OK(vbuf_put_u8(h, 9));
            }
            break;
        default:
            r->value_type = PV_INT;
            r->value.i = k % 3 == 0 ? INT64_MIN : k % 3 == 1 ? INT64_MAX : (int64_t)k - 20;
            break;
        }
        r->detail = (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
        r->n_exemplars = 0;
        r->exemplars = (struct blob){(uint32_t)h->len, 0};
    }
    GEN_OK(oblock_append(ob, b, 1) != 0 ? -1 : 0);
    batch_free(b);
    arena_free(a);
    return ob;
}

#endif
