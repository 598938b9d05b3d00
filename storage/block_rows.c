/*
 * block_rows.c - row views of a sealed block (blk_log, blk_span,
 * blk_point), its time column and hot attribute values, read from the
 * tables block_read.c loaded and checked: no bounds check of their own
 * (block_int.h, "Reading").
 */
#include "storage/block_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- rows ---- */

static const struct mstr mempty = {empty, 0};
static const struct obytes bempty = {(const uint8_t *)empty, 0};
static const struct oattrs aempty = {(const uint8_t *)empty, 0, 0};

static inline struct oattrs attrs_get(const blk *b, unsigned ci, uint64_t i)
{
    struct mstr s = attrs_bytes(b, i);
    return (struct oattrs){(const uint8_t *)s.p, s.len, (uint32_t)ic_get(&b->I[ci], i)};
}

/*
 * The row functions write every field once (no memset of the view first:
 * on a scan the clear-then-write cost as much as the reads).
 */
int blk_log(blk *b, uint64_t i, unsigned want, struct log_view *v)
{
    if (b->sig != SIG_LOGS || i >= b->rows) {
        return -EINVAL;
    }
    /* observed_ns is stored relative to the root's time column. */
    int rc = ready(b, (want & BLK_DETAIL) ? want | BLK_ROOT : want);
    bool body = wants_body(want);
    if (rc == 0 && body) {
        rc = body_ready(b);
    }
    if (rc < 0) {
        return rc;
    }
    uint64_t t = (want & (BLK_ROOT | BLK_DETAIL)) ? ic_get(&b->I[L_TIME], i) : 0;
    if (want & BLK_ROOT) {
        unsigned idf = (unsigned)ic_get(&b->I[L_IDF], i);
        uint32_t sc = (uint32_t)ic_get(&b->I[L_SCOPE], i);
        enum val_type bt = (enum val_type)ic_get(&b->I[L_BTYPE], i);
        struct mstr bs = body ? sc_get(&b->S[L_BODY], i) : mempty;
        v->time_ns = (idf & 4) ? 0 : t;
        v->scope_id = sc;
        v->scope = &b->scopes[sc];
        v->resource = b->scopes[sc].resource;
        v->severity_number = (int32_t)unzz(ic_get(&b->I[L_SEV], i));
        v->severity_text = dc_get(&b->D[L_SEVTEXT], i);
        v->body_type = bt;
        v->body_str = bt == VAL_STR ? bs : mempty;
        v->body_val = bt == VAL_STR || !body ? bempty : ob_of(bs);
        v->has_trace_id = (idf & 1) != 0;
        v->has_span_id = (idf & 2) != 0;
        memcpy(v->trace_id, b->R[L_TRACE] + 16 * i, 16);
        memcpy(v->span_id, b->R[L_SPAN] + 8 * i, 8);
        v->event_name = dc_get(&b->D[L_EVNAME], i);
    } else {
        v->time_ns = 0;
        v->scope_id = 0;
        v->scope = NULL;
        v->resource = NULL;
        v->severity_number = 0;
        v->severity_text = v->body_str = v->event_name = mempty;
        v->body_type = VAL_EMPTY;
        v->body_val = bempty;
        v->has_trace_id = v->has_span_id = false;
        memset(v->trace_id, 0, 16);
        memset(v->span_id, 0, 8);
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, L_ACOUNT, i) : aempty;
    if (want & BLK_DETAIL) {
        v->observed_ns = t + (uint64_t)unzz(ic_get(&b->I[L_OBS], i));
        v->dropped_attrs = (uint32_t)ic_get(&b->I[L_DROP], i);
        v->flags = (uint32_t)ic_get(&b->I[L_FLAGS], i);
    } else {
        v->observed_ns = 0;
        v->dropped_attrs = 0;
        v->flags = 0;
    }
    return 0;
}

int blk_log_body(blk *b, uint64_t i, struct log_view *v)
{
    if (b->sig != SIG_LOGS || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, BLK_ROOT);
    if (rc == 0) {
        rc = body_ready(b);
    }
    if (rc < 0) {
        return rc;
    }
    struct mstr bs = sc_get(&b->S[L_BODY], i);
    bool str = v->body_type == VAL_STR;
    v->body_str = str ? bs : mempty;
    v->body_val = str ? bempty : ob_of(bs);
    return 0;
}

int blk_span(blk *b, uint64_t i, unsigned want, struct span_view *v)
{
    if (b->sig != SIG_TRACES || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, want);
    if (rc < 0) {
        return rc;
    }
    if (want & BLK_ROOT) {
        uint32_t sc = (uint32_t)ic_get(&b->I[T_SCOPE], i);
        v->start_ns = ic_get(&b->I[T_START], i);
        v->end_ns = v->start_ns + (uint64_t)unzz(ic_get(&b->I[T_DUR], i));
        v->scope_id = sc;
        v->scope = &b->scopes[sc];
        v->resource = b->scopes[sc].resource;
        if (b->version >= 4) { /* every entry is 16 bytes (checked at load) */
            memcpy(v->trace_id, dc_get(&b->D[X_TRACES], i).p, 16);
        } else {
            memcpy(v->trace_id, b->R[T_TRACE] + 16 * i, 16);
        }
        memcpy(v->span_id, b->R[T_SPAN] + 8 * i, 8);
        memcpy(v->parent_span_id, b->R[T_PARENT] + 8 * i, 8);
        v->has_parent = ic_get(&b->I[T_HASPAR], i) != 0;
        v->name = dc_get(&b->D[T_NAME], i);
        v->kind = (int32_t)unzz(ic_get(&b->I[T_KIND], i));
        v->status_code = (int32_t)unzz(ic_get(&b->I[T_STATUS], i));
        v->status_message = sc_get(&b->S[T_STATMSG], i);
    } else {
        v->start_ns = v->end_ns = 0;
        v->scope_id = 0;
        v->scope = NULL;
        v->resource = NULL;
        memset(v->trace_id, 0, 16);
        memset(v->span_id, 0, 8);
        memset(v->parent_span_id, 0, 8);
        v->has_parent = false;
        v->name = v->status_message = mempty;
        v->kind = v->status_code = 0;
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, T_ACOUNT, i) : aempty;
    if (want & BLK_DETAIL) {
        v->trace_state = sc_get(&b->S[T_TSTATE], i);
        v->flags = (uint32_t)ic_get(&b->I[T_FLAGS], i);
        v->dropped_attrs = (uint32_t)ic_get(&b->I[T_DROP], i);
        v->events = ob_of(sc_get(&b->S[T_EVENTS], i));
        v->n_events = (uint32_t)ic_get(&b->I[T_NEV], i);
        v->dropped_events = (uint32_t)ic_get(&b->I[T_DROPEV], i);
        v->links = ob_of(sc_get(&b->S[T_LINKS], i));
        v->n_links = (uint32_t)ic_get(&b->I[T_NLINK], i);
        v->dropped_links = (uint32_t)ic_get(&b->I[T_DROPLINK], i);
    } else {
        v->trace_state = mempty;
        v->flags = v->dropped_attrs = 0;
        v->events = v->links = bempty;
        v->n_events = v->dropped_events = v->n_links = v->dropped_links = 0;
    }
    return 0;
}

int blk_point(blk *b, uint64_t i, unsigned want, struct point_view *v)
{
    if (b->sig != SIG_METRICS || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, want);
    if (rc < 0) {
        return rc;
    }
    if (want & BLK_ROOT) {
        uint32_t m = (uint32_t)ic_get(&b->I[M_METRIC], i);
        unsigned has = (unsigned)ic_get(&b->I[M_HAS], i);
        v->time_ns = ic_get(&b->I[M_TIME], i);
        v->start_ns = v->time_ns - (uint64_t)unzz(ic_get(&b->I[M_START], i));
        v->metric_id = m;
        v->metric = &b->metrics[m];
        v->scope = b->metrics[m].scope;
        v->resource = b->metrics[m].scope->resource;
        v->value_type = (enum point_value)ic_get(&b->I[M_VTYPE], i);
        memcpy(&v->value, b->R[M_VALUE] + 8 * i, 8);
        v->count = ic_get(&b->I[M_COUNT], i);
        memcpy(&v->sum, b->R[M_SUM] + 8 * i, 8);
        memcpy(&v->min, b->R[M_MIN] + 8 * i, 8);
        memcpy(&v->max, b->R[M_MAX] + 8 * i, 8);
        v->has_sum = (has & 1) != 0;
        v->has_min = (has & 2) != 0;
        v->has_max = (has & 4) != 0;
    } else {
        v->time_ns = v->start_ns = 0;
        v->metric_id = 0;
        v->metric = NULL;
        v->scope = NULL;
        v->resource = NULL;
        v->value_type = PV_NONE;
        v->value.i = 0;
        v->count = 0;
        v->sum = v->min = v->max = 0;
        v->has_sum = v->has_min = v->has_max = false;
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, M_ACOUNT, i) : aempty;
    if (want & BLK_DETAIL) {
        v->flags = (uint32_t)ic_get(&b->I[M_FLAGS], i);
        v->detail = ob_of(sc_get(&b->S[M_DETAIL], i));
        v->exemplars = ob_of(sc_get(&b->S[M_EXEMPLARS], i));
        v->n_exemplars = (uint32_t)ic_get(&b->I[M_NEX], i);
    } else {
        v->flags = 0;
        v->detail = v->exemplars = bempty;
        v->n_exemplars = 0;
    }
    return 0;
}

int blk_point_sample(blk *b, uint64_t i, struct point_view *v)
{
    if (b->sig != SIG_METRICS || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, BLK_ROOT | BLK_DETAIL);
    if (rc < 0) {
        return rc;
    }
    v->time_ns = ic_get(&b->I[M_TIME], i);
    v->start_ns = v->time_ns - (uint64_t)unzz(ic_get(&b->I[M_START], i));
    v->value_type = (enum point_value)ic_get(&b->I[M_VTYPE], i);
    memcpy(&v->value, b->R[M_VALUE] + 8 * i, 8);
    v->flags = (uint32_t)ic_get(&b->I[M_FLAGS], i);
    return 0;
}

int blk_point_hist(blk *b, uint64_t i, struct point_view *v)
{
    if (b->sig != SIG_METRICS || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, BLK_ROOT | BLK_DETAIL);
    if (rc < 0) {
        return rc;
    }
    v->time_ns = ic_get(&b->I[M_TIME], i);
    v->start_ns = v->time_ns - (uint64_t)unzz(ic_get(&b->I[M_START], i));
    v->count = ic_get(&b->I[M_COUNT], i);
    memcpy(&v->sum, b->R[M_SUM] + 8 * i, 8);
    v->has_sum = (ic_get(&b->I[M_HAS], i) & 1) != 0;
    v->flags = (uint32_t)ic_get(&b->I[M_FLAGS], i);
    v->detail = ob_of(sc_get(&b->S[M_DETAIL], i));
    return 0;
}

/* Prefetches row |i|'s entry of integer column |c| (nothing for a constant one). */
static inline void ic_prefetch(const struct icol *c, uint64_t i)
{
    if (c->width != 0) {
        __builtin_prefetch(c->p + (size_t)c->width * i);
    }
}

int blk_point_values(blk *b, const uint32_t *rows, uint32_t n, struct blk_value *out)
{
    if (b->sig != SIG_METRICS) {
        return -EINVAL;
    }
    for (uint32_t j = 0; j < n; j++) {
        if (rows[j] >= b->rows) {
            return -EINVAL;
        }
    }
    int rc = ready(b, BLK_ROOT | BLK_DETAIL);
    if (rc < 0) {
        return rc;
    }
    /* a stream's rows lie a series count apart: every read a cache miss
     * without the prefetch a few rows ahead */
    enum { AHEAD = 8 };
    for (uint32_t j = 0; j < n && j < AHEAD; j++) {
        ic_prefetch(&b->I[M_TIME], rows[j]);
        __builtin_prefetch(b->R[M_VALUE] + 8 * (size_t)rows[j]);
    }
    for (uint32_t j = 0; j < n; j++) {
        if (j + AHEAD < n) {
            uint64_t a = rows[j + AHEAD];
            ic_prefetch(&b->I[M_TIME], a);
            ic_prefetch(&b->I[M_VTYPE], a);
            ic_prefetch(&b->I[M_FLAGS], a);
            __builtin_prefetch(b->R[M_VALUE] + 8 * a);
        }
        uint64_t i = rows[j];
        out[j].time_ns = ic_get(&b->I[M_TIME], i);
        memcpy(&out[j].value, b->R[M_VALUE] + 8 * i, 8);
        out[j].flags = (uint32_t)ic_get(&b->I[M_FLAGS], i);
        out[j].value_type = (uint8_t)ic_get(&b->I[M_VTYPE], i);
    }
    return 0;
}

const uint64_t *blk_col_time(blk *b)
{
    uint64_t *t = atomic_load_explicit(&b->col_time, memory_order_acquire);
    if (t != NULL) {
        return t;
    }
    if (ready(b, BLK_ROOT) < 0) {
        return NULL;
    }
    pthread_mutex_lock(&b->lock);
    t = atomic_load_explicit(&b->col_time, memory_order_relaxed);
    if (t == NULL) {
        t = malloc((b->rows ? b->rows : 1) * sizeof(*t));
        if (t != NULL) {
            blk_heap_add(t);
            const struct icol *c = &b->I[0]; /* L_TIME, T_START, M_TIME */
            for (uint64_t i = 0; i < b->rows; i++) {
                t[i] = ic_get(c, i);
            }
            atomic_store_explicit(&b->col_time, t, memory_order_release);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return t;
}

uint64_t blk_lower_bound(blk *b, uint64_t t)
{
    if (ready(b, BLK_ROOT) < 0) {
        return b->rows;
    }
    uint64_t lo = 0, hi = b->rows;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ic_get(&b->I[0], mid) < t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* ---- hot attribute keys ---- */

uint32_t blk_n_hot_attrs(const blk *b)
{
    return b->n_hot;
}

struct mstr blk_hot_attr_key(const blk *b, uint32_t h)
{
    return h < b->n_hot ? b->hot_key[h] : mempty;
}

int blk_hot_attr_find(const blk *b, const char *key, size_t kn)
{
    for (uint32_t h = 0; h < b->n_hot; h++) {
        if (b->hot_key[h].len == kn && (kn == 0 || memcmp(b->hot_key[h].p, key, kn) == 0)) {
            return (int)h;
        }
    }
    return -1;
}

int blk_hot_attr(blk *b, uint32_t h, uint64_t i, struct val *v)
{
    if (h >= b->n_hot || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, BLK_ATTRS);
    if (rc < 0) {
        return rc;
    }
    uint64_t at = ic_get(&b->hot[h], i);
    if (at == 0) {
        return 0;
    }
    struct mstr a = attrs_bytes(b, i);
    const uint8_t *p = (const uint8_t *)a.p;
    struct val_rd r = {p + at - 1, p + a.len};
    return val_rd_value(&r, v) == 0 ? 1 : -EBADMSG;
}
