/*
 * blkcheck.h - a sealed block checked against the open block it was
 * written from (block_test.c, block_compat_test.c): block row j must equal
 * open block row perm[j], where perm is the stable sort of the open
 * block's rows by time (the writer's order), field by field and byte by
 * byte; dictionaries (resource, scope, metric) compared by content; the
 * hot attribute keys and the metric stream index recomputed.
 *
 * Header-only (static functions, criterion asserts) like blkgen.h; include
 * it from one test file each.
 */
#ifndef MIRADB_TEST_BLKCHECK_H
#define MIRADB_TEST_BLKCHECK_H

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block.h"
#include "storage/oblock.h"
#include "storage/val.h"

/* ---- comparison: NULL when equal, else the first field that differs ---- */

#define CK(cond, field)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            return field;                                                                          \
        }                                                                                          \
    } while (0)

static bool s_eq(struct mstr a, struct mstr b)
{
    return a.p != NULL && b.p != NULL && a.len == b.len &&
           (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool o_eq(struct obytes a, struct obytes b)
{
    return a.p != NULL && b.p != NULL && a.len == b.len &&
           (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool a_eq(struct oattrs a, struct oattrs b)
{
    return a.count == b.count && o_eq((struct obytes){a.p, a.len}, (struct obytes){b.p, b.len});
}

static const char *ck_res(const struct res_view *a, const struct res_view *b)
{
    CK(a != NULL && b != NULL, "resource");
    CK(a->id == b->id, "resource.id");
    CK(a_eq(a->attrs, b->attrs), "resource.attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "resource.dropped_attrs");
    CK(s_eq(a->schema_url, b->schema_url), "resource.schema_url");
    return NULL;
}

static const char *ck_scope(const struct scope_view *a, const struct scope_view *b)
{
    CK(a != NULL && b != NULL, "scope");
    CK(a->id == b->id, "scope.id");
    CK(a->resource_id == b->resource_id, "scope.resource_id");
    CK(s_eq(a->name, b->name), "scope.name");
    CK(s_eq(a->version, b->version), "scope.version");
    CK(a_eq(a->attrs, b->attrs), "scope.attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "scope.dropped_attrs");
    CK(s_eq(a->schema_url, b->schema_url), "scope.schema_url");
    return ck_res(a->resource, b->resource);
}

static const char *ck_metric(const struct metric_view *a, const struct metric_view *b)
{
    CK(a != NULL && b != NULL, "metric");
    CK(a->id == b->id, "metric.id");
    CK(a->scope_id == b->scope_id, "metric.scope_id");
    CK(s_eq(a->name, b->name), "metric.name");
    CK(s_eq(a->description, b->description), "metric.description");
    CK(s_eq(a->unit, b->unit), "metric.unit");
    CK(a->kind == b->kind, "metric.kind");
    CK(a->temporality == b->temporality, "metric.temporality");
    CK(a->monotonic == b->monotonic, "metric.monotonic");
    CK(a_eq(a->metadata, b->metadata), "metric.metadata");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_log(const struct log_view *a, const struct log_view *b)
{
    CK(a->time_ns == b->time_ns, "time_ns");
    CK(a->observed_ns == b->observed_ns, "observed_ns");
    CK(a->scope_id == b->scope_id, "scope_id");
    CK(a->severity_number == b->severity_number, "severity_number");
    CK(s_eq(a->severity_text, b->severity_text), "severity_text");
    CK(a->body_type == b->body_type, "body_type");
    CK(s_eq(a->body_str, b->body_str), "body_str");
    CK(o_eq(a->body_val, b->body_val), "body_val");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "dropped_attrs");
    CK(a->flags == b->flags, "flags");
    CK(a->has_trace_id == b->has_trace_id, "has_trace_id");
    CK(a->has_span_id == b->has_span_id, "has_span_id");
    CK(memcmp(a->trace_id, b->trace_id, 16) == 0, "trace_id");
    CK(memcmp(a->span_id, b->span_id, 8) == 0, "span_id");
    CK(s_eq(a->event_name, b->event_name), "event_name");
    CK(a->resource == a->scope->resource, "resource");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_span(const struct span_view *a, const struct span_view *b)
{
    CK(a->start_ns == b->start_ns, "start_ns");
    CK(a->end_ns == b->end_ns, "end_ns");
    CK(a->scope_id == b->scope_id, "scope_id");
    CK(memcmp(a->trace_id, b->trace_id, 16) == 0, "trace_id");
    CK(memcmp(a->span_id, b->span_id, 8) == 0, "span_id");
    CK(memcmp(a->parent_span_id, b->parent_span_id, 8) == 0, "parent_span_id");
    CK(a->has_parent == b->has_parent, "has_parent");
    CK(s_eq(a->trace_state, b->trace_state), "trace_state");
    CK(s_eq(a->name, b->name), "name");
    CK(a->kind == b->kind, "kind");
    CK(a->flags == b->flags, "flags");
    CK(a->status_code == b->status_code, "status_code");
    CK(s_eq(a->status_message, b->status_message), "status_message");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "dropped_attrs");
    CK(o_eq(a->events, b->events), "events");
    CK(a->n_events == b->n_events, "n_events");
    CK(a->dropped_events == b->dropped_events, "dropped_events");
    CK(o_eq(a->links, b->links), "links");
    CK(a->n_links == b->n_links, "n_links");
    CK(a->dropped_links == b->dropped_links, "dropped_links");
    CK(a->resource == a->scope->resource, "resource");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_point(const struct point_view *a, const struct point_view *b)
{
    CK(a->start_ns == b->start_ns, "start_ns");
    CK(a->time_ns == b->time_ns, "time_ns");
    CK(a->metric_id == b->metric_id, "metric_id");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->flags == b->flags, "flags");
    CK(a->value_type == b->value_type, "value_type");
    CK(memcmp(&a->value, &b->value, 8) == 0, "value");
    CK(a->count == b->count, "count");
    CK(memcmp(&a->sum, &b->sum, 8) == 0, "sum");
    CK(memcmp(&a->min, &b->min, 8) == 0, "min");
    CK(memcmp(&a->max, &b->max, 8) == 0, "max");
    CK(a->has_sum == b->has_sum, "has_sum");
    CK(a->has_min == b->has_min, "has_min");
    CK(a->has_max == b->has_max, "has_max");
    CK(o_eq(a->detail, b->detail), "detail");
    CK(o_eq(a->exemplars, b->exemplars), "exemplars");
    CK(a->n_exemplars == b->n_exemplars, "n_exemplars");
    CK(a->scope == a->metric->scope && a->resource == a->scope->resource, "scope/resource");
    return ck_metric(a->metric, b->metric);
}

/* ---- the writer's order, recomputed ---- */

static uint64_t ob_time(const oblock *ob, uint64_t i)
{
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    switch (oblock_signal(ob)) {
    case SIG_LOGS:
        cr_assert_eq(oblock_log(ob, i, &lv), 0);
        return lv.time_ns ? lv.time_ns : lv.observed_ns;
    case SIG_TRACES:
        cr_assert_eq(oblock_span(ob, i, &sv), 0);
        return sv.start_ns;
    default:
        cr_assert_eq(oblock_point(ob, i, &pv), 0);
        return pv.time_ns;
    }
}

struct tk {
    uint64_t t, i;
};

static int cmp_tk(const void *a, const void *b)
{
    const struct tk *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static uint64_t *expected_order(const oblock *ob, uint64_t rows)
{
    struct tk *k = malloc((rows + 1) * sizeof(*k));
    uint64_t *perm = malloc((rows + 1) * sizeof(*perm));
    cr_assert(k != NULL && perm != NULL);
    for (uint64_t i = 0; i < rows; i++) {
        k[i] = (struct tk){ob_time(ob, i), i};
    }
    qsort(k, rows, sizeof(*k), cmp_tk);
    for (uint64_t i = 0; i < rows; i++) {
        perm[i] = k[i].i;
    }
    free(k);
    return perm;
}

/* ---- hot attribute keys, recomputed ---- */

struct kcount {
    char key[64];
    size_t len;
    uint64_t count, last;
};

static int cmp_kcount(const void *a, const void *b)
{
    const struct kcount *x = a, *y = b;
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static struct oattrs row_attrs(blk *b, uint64_t i)
{
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    switch (blk_signal(b)) {
    case SIG_LOGS:
        cr_assert_eq(blk_log(b, i, BLK_ATTRS, &lv), 0);
        return lv.attrs;
    case SIG_TRACES:
        cr_assert_eq(blk_span(b, i, BLK_ATTRS, &sv), 0);
        return sv.attrs;
    default:
        cr_assert_eq(blk_point(b, i, BLK_ATTRS, &pv), 0);
        return pv.attrs;
    }
}

static bool val_same(const struct val *a, const struct val *b)
{
    if (a->type != b->type) {
        return false;
    }
    switch (a->type) {
    case VAL_STR:
    case VAL_BYTES:
        return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    case VAL_BOOL:
        return a->b == b->b;
    case VAL_INT:
        return a->i == b->i;
    case VAL_DOUBLE:
        return memcmp(&a->d, &b->d, 8) == 0;
    case VAL_ARRAY:
    case VAL_KVLIST:
        return a->count == b->count && a->inner.end - a->inner.p == b->inner.end - b->inner.p &&
               memcmp(a->inner.p, b->inner.p, (size_t)(a->inner.end - a->inner.p)) == 0;
    default:
        return true;
    }
}

/* The hot keys are the keys in at least half the rows, most frequent
 * first, and each row's hot value is its first value of that key. */
static void check_hot(blk *b)
{
    static struct kcount kc[64];
    size_t nk = 0;
    uint64_t rows = blk_rows(b);
    for (uint64_t i = 0; i < rows; i++) {
        struct oattrs a = row_attrs(b, i);
        struct val_rd r = {a.p, a.p + a.len};
        for (uint32_t j = 0; j < a.count; j++) {
            const char *k;
            size_t kn, x;
            struct val v;
            cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
            cr_assert_lt(kn, sizeof(kc[0].key));
            for (x = 0; x < nk && !(kc[x].len == kn && memcmp(kc[x].key, k, kn) == 0); x++) {
            }
            if (x == nk) {
                cr_assert_lt(nk, 64);
                memcpy(kc[nk].key, k, kn);
                kc[nk] = (struct kcount){.len = kn, .count = 0, .last = UINT64_MAX};
                memcpy(kc[nk].key, k, kn);
                nk++;
            }
            if (kc[x].last != i) {
                kc[x].count++;
                kc[x].last = i;
            }
        }
    }
    qsort(kc, nk, sizeof(kc[0]), cmp_kcount);
    uint32_t want = 0;
    while (want < nk && want < 12 && kc[want].count * 2 >= rows) {
        want++;
    }
    cr_assert_eq(blk_n_hot_attrs(b), want);
    for (uint32_t h = 0; h < want; h++) {
        struct mstr k = blk_hot_attr_key(b, h);
        cr_assert(k.len == kc[h].len && memcmp(k.p, kc[h].key, k.len) == 0, "hot key %u", h);
        cr_assert_eq(blk_hot_attr_find(b, k.p, k.len), (int)h);
        for (uint64_t i = 0; i < rows; i++) {
            struct oattrs a = row_attrs(b, i);
            struct val_rd r = {a.p, a.p + a.len};
            struct val first = {.type = VAL_EMPTY}, got;
            int found = 0;
            for (uint32_t j = 0; j < a.count && !found; j++) {
                const char *kk;
                size_t kn;
                struct val v;
                cr_assert_eq(val_rd_kv(&r, &kk, &kn, &v), 0);
                if (kn == k.len && memcmp(kk, k.p, kn) == 0) {
                    first = v;
                    found = 1;
                }
            }
            cr_assert_eq(blk_hot_attr(b, h, i, &got), found, "row %llu key %u",
                         (unsigned long long)i, h);
            cr_assert(!found || val_same(&got, &first), "row %llu key %u value",
                      (unsigned long long)i, h);
        }
    }
    cr_assert_eq(blk_hot_attr_find(b, "no.such.key", 11), -1);
    struct val v;
    cr_assert_eq(blk_hot_attr(b, want, 0, &v), -EINVAL);
}

/* Every row of |b| against |ob|, all tables; also the dictionaries. */
/* The stream index of a metric block (block_streams.c): every row in
 * exactly one stream, rows ascending within a stream, every row of a
 * stream with its metric id and attribute bytes, no two streams with the
 * same (metric, attributes), streams sorted by metric id then first row,
 * and blk_streams_of_metric agreeing. */
static void check_streams(blk *b, uint64_t rows)
{
    uint32_t n = blk_n_streams(b);
    cr_assert(rows == 0 || n > 0);
    uint8_t *seen = calloc(rows + 1, 1);
    cr_assert_not_null(seen);
    uint64_t total = 0;
    struct blk_stream prev = {0};
    for (uint32_t i = 0; i < n; i++) {
        struct blk_stream st;
        cr_assert_eq(blk_stream(b, i, &st), 0);
        cr_assert_gt(st.n_rows, 0);
        total += st.n_rows;
        if (i > 0) {
            cr_assert(prev.metric_id < st.metric_id ||
                      (prev.metric_id == st.metric_id && prev.rows[0] < st.rows[0]));
        }
        struct point_view first;
        cr_assert_eq(blk_point(b, st.rows[0], BLK_ALL, &first), 0);
        for (uint32_t k = 0; k < st.n_rows; k++) {
            uint32_t r = st.rows[k];
            cr_assert_lt(r, rows);
            cr_assert(k == 0 || st.rows[k - 1] < r);
            cr_assert_eq(seen[r], 0, "row %u in two streams", r);
            seen[r] = 1;
            struct point_view pv;
            cr_assert_eq(blk_point(b, r, BLK_ALL, &pv), 0);
            cr_assert_eq(pv.metric_id, st.metric_id);
            cr_assert_eq(pv.attrs.len, first.attrs.len);
            cr_assert(pv.attrs.len == 0 || memcmp(pv.attrs.p, first.attrs.p, pv.attrs.len) == 0);
        }
        for (uint32_t j = 0; j < i; j++) { /* distinct streams differ */
            struct blk_stream o;
            struct point_view ov;
            cr_assert_eq(blk_stream(b, j, &o), 0);
            if (o.metric_id != st.metric_id) {
                continue;
            }
            cr_assert_eq(blk_point(b, o.rows[0], BLK_ALL, &ov), 0);
            cr_assert(ov.attrs.len != first.attrs.len ||
                      (ov.attrs.len != 0 && memcmp(ov.attrs.p, first.attrs.p, ov.attrs.len) != 0));
        }
        uint32_t f, c;
        blk_streams_of_metric(b, st.metric_id, &f, &c);
        cr_assert(f <= i && i < f + c);
        prev = st;
    }
    cr_assert_eq(total, rows);
    struct blk_stream none;
    cr_assert_eq(blk_stream(b, n, &none), -EINVAL);
    free(seen);
}

static void check_block(blk *b, const oblock *ob, uint64_t rows)
{
    cr_assert_eq(blk_rows(b), rows);
    cr_assert_eq(blk_signal(b), oblock_signal(ob));
    cr_assert_eq(blk_n_resources(b), oblock_n_resources(ob));
    cr_assert_eq(blk_n_scopes(b), oblock_n_scopes(ob));
    cr_assert_eq(blk_n_metrics(b), oblock_n_metrics(ob));
    for (uint32_t i = 0; i < blk_n_scopes(b); i++) {
        const char *bad = ck_scope(blk_scope(b, i), oblock_scope(ob, i));
        cr_assert_null(bad, "scope %u: %s differs", i, bad);
    }
    for (uint32_t i = 0; i < blk_n_metrics(b); i++) {
        const char *bad = ck_metric(blk_metric(b, i), oblock_metric(ob, i));
        cr_assert_null(bad, "metric %u: %s differs", i, bad);
    }
    cr_assert_null(blk_resource(b, blk_n_resources(b)));
    uint64_t *perm = expected_order(ob, rows);
    uint64_t tmin = UINT64_MAX, tmax = 0;
    for (uint64_t j = 0; j < rows; j++) {
        const char *bad = NULL;
        struct log_view la, lb;
        struct span_view sa, sb;
        struct point_view pa, pb;
        uint64_t t = ob_time(ob, perm[j]);
        tmin = t < tmin ? t : tmin;
        tmax = t > tmax ? t : tmax;
        switch (blk_signal(b)) {
        case SIG_LOGS:
            cr_assert_eq(blk_log(b, j, BLK_ALL, &la), 0);
            cr_assert_eq(oblock_log(ob, perm[j], &lb), 0);
            bad = ck_log(&la, &lb);
            break;
        case SIG_TRACES:
            cr_assert_eq(blk_span(b, j, BLK_ALL, &sa), 0);
            cr_assert_eq(oblock_span(ob, perm[j], &sb), 0);
            bad = ck_span(&sa, &sb);
            break;
        case SIG_METRICS:
            cr_assert_eq(blk_point(b, j, BLK_ALL, &pa), 0);
            cr_assert_eq(oblock_point(ob, perm[j], &pb), 0);
            bad = ck_point(&pa, &pb);
            break;
        }
        cr_assert_null(bad, "%s row %llu (open block row %llu): %s differs",
                       signal_name(blk_signal(b)), (unsigned long long)j,
                       (unsigned long long)perm[j], bad);
    }
    uint64_t zmin, zmax;
    blk_time_range(b, &zmin, &zmax);
    cr_assert_eq(zmin, tmin);
    cr_assert_eq(zmax, tmax);
    const uint64_t *ct = blk_col_time(b);
    cr_assert_not_null(ct);
    for (uint64_t j = 0; j < rows; j++) {
        cr_assert_eq(ct[j], ob_time(ob, perm[j]));
        cr_assert(j == 0 || ct[j - 1] <= ct[j]);
    }
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    int rc = blk_signal(b) == SIG_LOGS     ? blk_log(b, rows, BLK_ALL, &lv)
             : blk_signal(b) == SIG_TRACES ? blk_span(b, rows, BLK_ALL, &sv)
                                           : blk_point(b, rows, BLK_ALL, &pv);
    cr_assert_eq(rc, -EINVAL);
    cr_assert_eq(blk_signal(b) == SIG_LOGS ? blk_span(b, 0, BLK_ALL, &sv)
                                           : blk_log(b, 0, BLK_ALL, &lv),
                 -EINVAL);
    check_hot(b);
    if (blk_signal(b) == SIG_METRICS) {
        check_streams(b, rows);
    }
    free(perm);
}

/* Every row's events and links of the block at |path| (opened uncached)
 * equal |ob|'s, byte for byte, and so do their counts: 0, or the error of
 * the first read (the detail table's load). */
static inline int span_detail_matches(const char *path, const oblock *ob, uint64_t rows)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "the file still opens: %s", err);
    for (uint64_t i = 0; i < rows && rc == 0; i++) {
        struct span_view v, w;
        rc = blk_span(b, i, BLK_ALL, &v);
        if (rc == 0) {
            oblock_span(ob, i, &w);
            cr_assert(o_eq(v.events, w.events), "row %llu's events", (unsigned long long)i);
            cr_assert(o_eq(v.links, w.links), "row %llu's links", (unsigned long long)i);
            cr_assert_eq(v.n_events, w.n_events);
            cr_assert_eq(v.n_links, w.n_links);
        }
    }
    blk_unref(b);
    return rc;
}

#endif
