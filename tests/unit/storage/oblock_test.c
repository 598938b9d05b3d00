/*
 * oblock_test.c - the open block (storage/oblock.c): every field of every
 * signal read back exactly, dictionary dedup, chunk boundaries, refusal of
 * inconsistent batches, and a reader thread racing the writer.
 *
 * Rows are generated from a key k: gen_*() builds a batch whose rows carry
 * keys first..first+n-1, and a checker rebuilds a one-row reference batch
 * for key k and compares a view with it field by field. Source batches are
 * freed before anything is read back, so under ASan a view that still
 * pointed into a batch would be a use-after-free.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/adm.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/oblock.h"
#include "tests/util/tmpdir.h"

#define OK(x)                                                                                      \
    do {                                                                                           \
        if ((x) < 0) {                                                                             \
            abort(); /* out of memory while building a test batch */                               \
        }                                                                                          \
    } while (0)

#define N_RES 3
#define N_SCOPE 5
#define N_METRIC 6 /* metric 0 is MK_NONE: it has no points */

static const char filler[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.";

/* ---- generators ---- */

static struct mstr str(arena *a, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *p = arena_strndup(a, buf, (size_t)n);
    if (p == NULL) {
        abort();
    }
    return (struct mstr){p, (uint32_t)n};
}

/* A string of |n| bytes derived from |k| (n may exceed 512). */
static struct mstr long_str(arena *a, uint64_t k, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (p == NULL) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = filler[(k + i * 7) % (sizeof(filler) - 1)];
    }
    return (struct mstr){p, (uint32_t)n};
}

static void put_value(struct vbuf *h, uint64_t k, unsigned kind)
{
    uint8_t raw[16];
    long at;
    for (int i = 0; i < 16; i++) {
        raw[i] = (uint8_t)(k * 31 + (uint64_t)i);
    }
    switch (kind % 8) {
    case 0:
        OK(val_put_str(h, filler, 1 + k % 40));
        break;
    case 1:
        OK(val_put_int(h, (int64_t)(k * 7919) - 1000000));
        break;
    case 2:
        OK(val_put_double(h, (double)k * 0.25 - 3.5));
        break;
    case 3:
        OK(val_put_bool(h, (k & 1) != 0));
        break;
    case 4:
        OK(val_put_bytes(h, raw, k % 16));
        break;
    case 5:
        OK(at = val_open(h, VAL_ARRAY));
        OK(val_put_int(h, (int64_t)k));
        OK(val_put_str(h, filler + 3, k % 5));
        val_close(h, at, 2);
        break;
    case 6:
        OK(at = val_open(h, VAL_KVLIST));
        OK(val_put_key(h, "inner", 5));
        OK(val_put_double(h, (double)k / 3));
        OK(val_put_key(h, "deep", 4));
        long at2;
        OK(at2 = val_open(h, VAL_ARRAY));
        OK(val_put_bool(h, true));
        val_close(h, at2, 1);
        val_close(h, at, 2);
        break;
    default:
        OK(val_put_empty(h));
        break;
    }
}

static struct attrs mk_attrs(struct batch *b, uint64_t k, uint32_t n)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    for (uint32_t i = 0; i < n; i++) {
        char key[48];
        int kl = snprintf(key, sizeof(key), "attr.%u.%llu", i, (unsigned long long)(k % 11));
        OK(val_put_key(h, key, (size_t)kl));
        put_value(h, k + i, (unsigned)(k + i));
    }
    return (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, n};
}

static void fill_id(uint8_t *p, size_t n, uint64_t k, uint8_t salt)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(k >> (i % 8 * 8)) ^ (uint8_t)(salt + i);
    }
}

/* Resource r and scope s have fixed contents; |perm| reverses their order in
 * the batch, so batch indexes differ from block ids. */
static uint32_t res_idx(uint32_t r, bool perm)
{
    return perm ? N_RES - 1 - r : r;
}

static uint32_t scope_idx(uint32_t s, bool perm)
{
    return perm ? N_SCOPE - 1 - s : s;
}

static uint32_t metric_idx(uint32_t m, bool perm)
{
    return perm ? N_METRIC - 1 - m : m;
}

static void gen_dicts(struct batch *b, arena *a, bool perm)
{
    for (uint32_t i = 0; i < N_RES; i++) {
        uint32_t r = res_idx(i, perm);
        struct res_row *row = batch_add_resource(b);
        OK(row ? 0 : -1);
        size_t off = b->heap.len;
        char v[16];
        int n = snprintf(v, sizeof(v), "svc-%u", r);
        OK(val_put_key(&b->heap, "service.name", 12));
        OK(val_put_str(&b->heap, v, (size_t)n));
        OK(val_put_key(&b->heap, "host.id", 7));
        OK(val_put_int(&b->heap, 1000 + r));
        row->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(b->heap.len - off)}, 2};
        row->dropped_attrs = r;
        row->schema_url =
            r == 2 ? (struct mstr){NULL, 0} : str(a, "https://opentelemetry.io/schemas/1.2%u.0", r);
    }
    for (uint32_t i = 0; i < N_SCOPE; i++) {
        uint32_t s = scope_idx(i, perm);
        struct scope_row *row = batch_add_scope(b);
        OK(row ? 0 : -1);
        row->resource = res_idx(s % N_RES, perm);
        row->name = str(a, "io.mira.lib%u", s);
        row->version = s % 2 ? str(a, "1.%u.0", s) : (struct mstr){NULL, 0};
        row->attrs = mk_attrs(b, 100 + s, s % 3);
        row->dropped_attrs = s;
        row->schema_url = str(a, "https://scope/%u", s);
    }
}

static const char *const sev_text[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", ""};

static void gen_logs(struct batch *b, arena *a, uint64_t first, uint32_t n, bool perm)
{
    batch_reset(b, SIG_LOGS);
    arena_reset(a);
    gen_dicts(b, a, perm);
    for (uint64_t k = first; k < first + n; k++) {
        struct log_row *r = batch_add_log(b);
        OK(r ? 0 : -1);
        r->time_ns = 1700000000000000000ull + k * 1000 + 7;
        r->observed_ns = r->time_ns + 3;
        r->scope = scope_idx((uint32_t)(k % N_SCOPE), perm);
        r->severity_number = (int32_t)(k % 24) + 1;
        r->severity_text = (struct mstr){sev_text[k % 6], (uint32_t)strlen(sev_text[k % 6])};
        switch (k % 4) {
        case 0:
            r->body_type = VAL_STR;
            /* Now and then a body bigger than a quarter byte chunk. */
            r->body_str = long_str(a, k, k % 20000 == 19996 ? 300000 + k % 1000 : k % 300);
            break;
        case 1: {
            r->body_type = VAL_KVLIST;
            size_t off = b->heap.len;
            put_value(&b->heap, k, 6);
            r->body_val = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
            break;
        }
        case 2: {
            r->body_type = VAL_INT;
            size_t off = b->heap.len;
            put_value(&b->heap, k, 1);
            r->body_val = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
            break;
        }
        default:
            r->body_type = VAL_EMPTY;
            break;
        }
        r->attrs = mk_attrs(b, k, (uint32_t)(k % 7));
        r->dropped_attrs = (uint32_t)(k % 3);
        r->flags = (uint32_t)(k & 0xff) | 0x100;
        r->has_trace_id = k % 5 != 0;
        r->has_span_id = k % 7 != 0;
        if (r->has_trace_id) {
            fill_id(r->trace_id, 16, k, 0x10);
        }
        if (r->has_span_id) {
            fill_id(r->span_id, 8, k, 0x20);
        }
        r->event_name =
            k % 2 ? str(a, "event.%llu", (unsigned long long)(k % 13)) : (struct mstr){NULL, 0};
    }
}

static struct blob mk_events(struct batch *b, uint64_t k, uint32_t n)
{
    size_t off = b->heap.len;
    for (uint32_t e = 0; e < n; e++) {
        OK(vbuf_put_u64(&b->heap, k * 10 + e));
        OK(vbuf_put_str(&b->heap, "exception", 9 - e % 3));
        OK(vbuf_put_u32(&b->heap, e));
        OK(vbuf_put_u32(&b->heap, e % 2));
        size_t at = b->heap.len;
        OK(vbuf_put_u32(&b->heap, 0));
        size_t start = b->heap.len;
        for (uint32_t i = 0; i < e % 2; i++) {
            OK(val_put_key(&b->heap, "exception.type", 14));
            OK(val_put_str(&b->heap, "Err", 3));
        }
        vbuf_patch_u32(&b->heap, at, (uint32_t)(b->heap.len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
}

static struct blob mk_links(struct batch *b, uint64_t k, uint32_t n)
{
    size_t off = b->heap.len;
    for (uint32_t l = 0; l < n; l++) {
        uint8_t id[24];
        fill_id(id, 24, k + l, 0x44);
        OK(vbuf_put(&b->heap, id, 24));
        OK(vbuf_put_str(&b->heap, "rojo=00f067aa0ba902b7", l % 2 ? 21 : 0));
        OK(vbuf_put_u32(&b->heap, l + 1));
        OK(vbuf_put_u32(&b->heap, l));
        OK(vbuf_put_u32(&b->heap, 1));
        size_t at = b->heap.len;
        OK(vbuf_put_u32(&b->heap, 0));
        size_t start = b->heap.len;
        OK(val_put_key(&b->heap, "link.n", 6));
        OK(val_put_int(&b->heap, l));
        vbuf_patch_u32(&b->heap, at, (uint32_t)(b->heap.len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
}

static void gen_spans(struct batch *b, arena *a, uint64_t first, uint32_t n, bool perm)
{
    batch_reset(b, SIG_TRACES);
    arena_reset(a);
    gen_dicts(b, a, perm);
    for (uint64_t k = first; k < first + n; k++) {
        struct span_row *r = batch_add_span(b);
        OK(r ? 0 : -1);
        r->start_ns = 1700000000000000000ull + k * 5000;
        r->end_ns = r->start_ns + k % 100000 + 1;
        r->scope = scope_idx((uint32_t)(k % N_SCOPE), perm);
        fill_id(r->trace_id, 16, k / 4, 0x01);
        fill_id(r->span_id, 8, k, 0x02);
        r->has_parent = k % 4 != 0;
        if (r->has_parent) {
            fill_id(r->parent_span_id, 8, k - 1, 0x02);
        }
        r->trace_state = k % 3 ? (struct mstr){NULL, 0}
                               : str(a, "congo=t61rcWkgMzE,k=%llu", (unsigned long long)k);
        r->name = str(a, "GET /api/v%llu/items", (unsigned long long)(k % 9));
        r->kind = (int32_t)(k % 6);
        r->flags = (uint32_t)(k % 0x300);
        r->status_code = (int32_t)(k % 3);
        r->status_message = r->status_code == 2 ? str(a, "boom %llu", (unsigned long long)k)
                                                : (struct mstr){NULL, 0};
        r->attrs = mk_attrs(b, k, (uint32_t)(k % 9));
        r->dropped_attrs = (uint32_t)(k % 4);
        r->n_events = (uint32_t)(k % 3);
        r->events = mk_events(b, k, r->n_events);
        r->dropped_events = (uint32_t)(k % 2);
        r->n_links = (uint32_t)(k % 4 == 1 ? 2 : 0);
        r->links = mk_links(b, k, r->n_links);
        r->dropped_links = (uint32_t)(k % 5);
    }
}

static void gen_metrics(struct batch *b, arena *a, bool perm)
{
    for (uint32_t i = 0; i < N_METRIC; i++) {
        uint32_t m = metric_idx(i, perm);
        struct metric_row *r = batch_add_metric(b);
        OK(r ? 0 : -1);
        r->scope = scope_idx(m % N_SCOPE, perm);
        r->name = str(a, "mira.metric.%u", m);
        r->description = m % 2 ? str(a, "what metric %u measures", m) : (struct mstr){NULL, 0};
        r->unit = m == 3 ? str(a, "ms") : str(a, "{requests}");
        r->kind = (enum metric_kind)(m % 6);
        r->temporality = r->kind == MK_SUM || r->kind == MK_HISTOGRAM ? 2 : 0;
        r->monotonic = r->kind == MK_SUM;
        r->metadata = mk_attrs(b, 500 + m, m % 2);
    }
}

static struct blob mk_detail(struct batch *b, uint64_t k, enum metric_kind kind)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    uint32_t n = (uint32_t)(k % 5);
    switch (kind) {
    case MK_HISTOGRAM:
        OK(vbuf_put_u32(h, n + 1));
        for (uint32_t i = 0; i <= n; i++) {
            OK(vbuf_put_u64(h, k + i));
        }
        OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            OK(vbuf_put_f64(h, 0.5 * (i + 1)));
        }
        break;
    case MK_EXP_HISTOGRAM:
        OK(vbuf_put_u32(h, (uint32_t)(int32_t)-3));
        OK(vbuf_put_u64(h, k % 17));
        OK(vbuf_put_f64(h, 1e-9));
        OK(vbuf_put_u32(h, (uint32_t)(int32_t)-2));
        OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            OK(vbuf_put_u64(h, k * i));
        }
        OK(vbuf_put_u32(h, 1));
        OK(vbuf_put_u32(h, 1));
        OK(vbuf_put_u64(h, 42));
        break;
    case MK_SUMMARY:
        OK(vbuf_put_u32(h, n));
        for (uint32_t i = 0; i < n; i++) {
            OK(vbuf_put_f64(h, i / 4.0));
            OK(vbuf_put_f64(h, (double)k * i));
        }
        break;
    default:
        break;
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

static struct blob mk_exemplars(struct batch *b, uint64_t k, uint32_t n)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    for (uint32_t e = 0; e < n; e++) {
        uint8_t id[24];
        fill_id(id, 24, k + e, 0x77);
        OK(vbuf_put_u64(h, k * 3 + e));
        OK(vbuf_put_u8(h, PV_DOUBLE));
        OK(vbuf_put_f64(h, (double)k / 7));
        OK(vbuf_put_u8(h, 1));
        OK(vbuf_put(h, id, 16));
        OK(vbuf_put_u8(h, 1));
        OK(vbuf_put(h, id + 16, 8));
        OK(vbuf_put_u32(h, 1));
        size_t at = h->len;
        OK(vbuf_put_u32(h, 0));
        size_t start = h->len;
        OK(val_put_key(h, "filtered", 8));
        OK(val_put_str(h, "yes", 3));
        vbuf_patch_u32(h, at, (uint32_t)(h->len - start));
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

static void gen_points(struct batch *b, arena *a, uint64_t first, uint32_t n, bool perm)
{
    batch_reset(b, SIG_METRICS);
    arena_reset(a);
    gen_dicts(b, a, perm);
    gen_metrics(b, a, perm);
    for (uint64_t k = first; k < first + n; k++) {
        struct point_row *r = batch_add_point(b);
        OK(r ? 0 : -1);
        uint32_t m = 1 + (uint32_t)(k % (N_METRIC - 1)); /* never the MK_NONE metric */
        enum metric_kind kind = (enum metric_kind)(m % 6);
        r->metric = metric_idx(m, perm);
        r->start_ns = 1700000000000000000ull + k;
        r->time_ns = r->start_ns + 60000000000ull;
        r->attrs = mk_attrs(b, k, (uint32_t)(k % 5));
        r->flags = (uint32_t)(k % 2);
        if (kind == MK_GAUGE || kind == MK_SUM) {
            r->value_type = (enum point_value)(k % 3);
            if (r->value_type == PV_DOUBLE) {
                r->value.d = (double)k * 1.5 + 0.1;
            } else if (r->value_type == PV_INT) {
                r->value.i = -(int64_t)k * 1000003;
            }
        } else {
            r->count = k * 11;
            r->sum = (double)k * 2.25;
            r->has_sum = kind == MK_SUMMARY || k % 2 == 0;
            r->has_min = k % 3 == 0;
            r->has_max = (k / 5) % 2 == 0;
            r->min = r->has_min ? -(double)k : 0;
            r->max = r->has_max ? (double)k * 9 : 0;
        }
        r->detail = mk_detail(b, k, kind);
        r->n_exemplars = (uint32_t)(k % 3);
        r->exemplars = mk_exemplars(b, k, r->n_exemplars);
    }
}

/* ---- checkers: NULL when equal, else the first field that differs ---- */

#define CK(cond, field)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            return field;                                                                          \
        }                                                                                          \
    } while (0)

static bool s_eq(struct mstr v, struct mstr r)
{
    return v.p != NULL && v.len == r.len && (r.len == 0 || memcmp(v.p, r.p, r.len) == 0);
}

static bool b_eq(struct obytes v, const struct batch *b, struct blob x)
{
    return v.p != NULL && v.len == x.len &&
           (x.len == 0 || memcmp(v.p, b->heap.p + x.off, x.len) == 0);
}

static bool a_eq(struct oattrs v, const struct batch *b, struct attrs x)
{
    return v.count == x.count && b_eq((struct obytes){v.p, v.len}, b, x.blob);
}

static const char *ck_res(const struct res_view *v, const struct batch *b, const struct res_row *r)
{
    CK(v != NULL, "resource");
    CK(a_eq(v->attrs, b, r->attrs), "resource.attrs");
    CK(v->dropped_attrs == r->dropped_attrs, "resource.dropped_attrs");
    CK(s_eq(v->schema_url, r->schema_url), "resource.schema_url");
    return NULL;
}

static const char *ck_scope(const oblock *ob, const struct scope_view *v, const struct batch *b,
                            const struct scope_row *r)
{
    CK(v != NULL, "scope");
    CK(oblock_scope(ob, v->id) == v, "scope.id");
    CK(oblock_resource(ob, v->resource_id) == v->resource, "scope.resource_id");
    CK(s_eq(v->name, r->name), "scope.name");
    CK(s_eq(v->version, r->version), "scope.version");
    CK(a_eq(v->attrs, b, r->attrs), "scope.attrs");
    CK(v->dropped_attrs == r->dropped_attrs, "scope.dropped_attrs");
    CK(s_eq(v->schema_url, r->schema_url), "scope.schema_url");
    return ck_res(v->resource, b, &b->resources[r->resource]);
}

static const char *ck_log(const oblock *ob, const struct log_view *v, const struct batch *b,
                          uint32_t j)
{
    const struct log_row *r = &b->logs[j];
    CK(v->time_ns == r->time_ns, "time_ns");
    CK(v->observed_ns == r->observed_ns, "observed_ns");
    CK(v->scope_id == v->scope->id, "scope_id");
    CK(v->resource == v->scope->resource, "resource");
    CK(v->severity_number == r->severity_number, "severity_number");
    CK(s_eq(v->severity_text, r->severity_text), "severity_text");
    CK(v->body_type == r->body_type, "body_type");
    if (r->body_type == VAL_STR) {
        CK(s_eq(v->body_str, r->body_str), "body_str");
        CK(v->body_val.p != NULL && v->body_val.len == 0, "body_val");
    } else {
        CK(b_eq(v->body_val, b, r->body_val), "body_val");
        CK(v->body_str.p != NULL && v->body_str.len == 0, "body_str");
    }
    CK(a_eq(v->attrs, b, r->attrs), "attrs");
    CK(v->dropped_attrs == r->dropped_attrs, "dropped_attrs");
    CK(v->flags == r->flags, "flags");
    CK(v->has_trace_id == r->has_trace_id, "has_trace_id");
    CK(v->has_span_id == r->has_span_id, "has_span_id");
    CK(memcmp(v->trace_id, r->trace_id, 16) == 0, "trace_id");
    CK(memcmp(v->span_id, r->span_id, 8) == 0, "span_id");
    CK(s_eq(v->event_name, r->event_name), "event_name");
    return ck_scope(ob, v->scope, b, &b->scopes[r->scope]);
}

static const char *ck_span(const oblock *ob, const struct span_view *v, const struct batch *b,
                           uint32_t j)
{
    const struct span_row *r = &b->spans[j];
    CK(v->start_ns == r->start_ns, "start_ns");
    CK(v->end_ns == r->end_ns, "end_ns");
    CK(v->scope_id == v->scope->id, "scope_id");
    CK(v->resource == v->scope->resource, "resource");
    CK(memcmp(v->trace_id, r->trace_id, 16) == 0, "trace_id");
    CK(memcmp(v->span_id, r->span_id, 8) == 0, "span_id");
    CK(memcmp(v->parent_span_id, r->parent_span_id, 8) == 0, "parent_span_id");
    CK(v->has_parent == r->has_parent, "has_parent");
    CK(s_eq(v->trace_state, r->trace_state), "trace_state");
    CK(s_eq(v->name, r->name), "name");
    CK(v->kind == r->kind, "kind");
    CK(v->flags == r->flags, "flags");
    CK(v->status_code == r->status_code, "status_code");
    CK(s_eq(v->status_message, r->status_message), "status_message");
    CK(a_eq(v->attrs, b, r->attrs), "attrs");
    CK(v->dropped_attrs == r->dropped_attrs, "dropped_attrs");
    CK(b_eq(v->events, b, r->events), "events");
    CK(v->n_events == r->n_events, "n_events");
    CK(v->dropped_events == r->dropped_events, "dropped_events");
    CK(b_eq(v->links, b, r->links), "links");
    CK(v->n_links == r->n_links, "n_links");
    CK(v->dropped_links == r->dropped_links, "dropped_links");
    return ck_scope(ob, v->scope, b, &b->scopes[r->scope]);
}

static const char *ck_metric(const oblock *ob, const struct metric_view *v, const struct batch *b,
                             const struct metric_row *r)
{
    CK(v != NULL, "metric");
    CK(oblock_metric(ob, v->id) == v, "metric.id");
    CK(oblock_scope(ob, v->scope_id) == v->scope, "metric.scope_id");
    CK(s_eq(v->name, r->name), "metric.name");
    CK(s_eq(v->description, r->description), "metric.description");
    CK(s_eq(v->unit, r->unit), "metric.unit");
    CK(v->kind == r->kind, "metric.kind");
    CK(v->temporality == r->temporality, "metric.temporality");
    CK(v->monotonic == r->monotonic, "metric.monotonic");
    CK(a_eq(v->metadata, b, r->metadata), "metric.metadata");
    return ck_scope(ob, v->scope, b, &b->scopes[r->scope]);
}

static const char *ck_point(const oblock *ob, const struct point_view *v, const struct batch *b,
                            uint32_t j)
{
    const struct point_row *r = &b->points[j];
    CK(v->start_ns == r->start_ns, "start_ns");
    CK(v->time_ns == r->time_ns, "time_ns");
    CK(v->metric_id == v->metric->id, "metric_id");
    CK(v->scope == v->metric->scope, "scope");
    CK(v->resource == v->scope->resource, "resource");
    CK(a_eq(v->attrs, b, r->attrs), "attrs");
    CK(v->flags == r->flags, "flags");
    CK(v->value_type == r->value_type, "value_type");
    CK(memcmp(&v->value, &r->value, sizeof(v->value)) == 0, "value");
    CK(v->count == r->count, "count");
    CK(memcmp(&v->sum, &r->sum, 8) == 0, "sum");
    CK(memcmp(&v->min, &r->min, 8) == 0, "min");
    CK(memcmp(&v->max, &r->max, 8) == 0, "max");
    CK(v->has_sum == r->has_sum, "has_sum");
    CK(v->has_min == r->has_min, "has_min");
    CK(v->has_max == r->has_max, "has_max");
    CK(b_eq(v->detail, b, r->detail), "detail");
    CK(b_eq(v->exemplars, b, r->exemplars), "exemplars");
    CK(v->n_exemplars == r->n_exemplars, "n_exemplars");
    return ck_metric(ob, v->metric, b, &b->metrics[r->metric]);
}

typedef void (*gen_fn)(struct batch *b, arena *a, uint64_t first, uint32_t n, bool perm);

static gen_fn gen_for(enum signal s)
{
    return s == SIG_LOGS ? gen_logs : s == SIG_TRACES ? gen_spans : gen_points;
}

/* Rows [first, first + n) of |ob| against a reference rebuilt from their
 * keys (in slices, so the reference stays small). NULL when all are equal;
 * else the first differing field, its row in |*bad_row|. */
static const char *check_rows(const oblock *ob, uint64_t first, uint64_t n, struct batch *ref,
                              arena *a, uint64_t *bad_row)
{
    gen_fn gen = gen_for(oblock_signal(ob));
    while (n > 0) {
        uint32_t m = n < 1024 ? (uint32_t)n : 1024;
        gen(ref, a, first, m, false);
        for (uint32_t j = 0; j < m; j++) {
            const char *bad = NULL;
            struct log_view lv;
            struct span_view sv;
            struct point_view pv;
            *bad_row = first + j;
            switch (oblock_signal(ob)) {
            case SIG_LOGS:
                CK(oblock_log(ob, first + j, &lv) == 0, "oblock_log");
                bad = ck_log(ob, &lv, ref, j);
                break;
            case SIG_TRACES:
                CK(oblock_span(ob, first + j, &sv) == 0, "oblock_span");
                bad = ck_span(ob, &sv, ref, j);
                break;
            case SIG_METRICS:
                CK(oblock_point(ob, first + j, &pv) == 0, "oblock_point");
                bad = ck_point(ob, &pv, ref, j);
                break;
            }
            if (bad != NULL) {
                return bad;
            }
        }
        first += m;
        n -= m;
    }
    return NULL;
}

/* Appends the rows of keys first..first+total-1 in batches of varying
 * size, each batch freed right after its append. */
static void fill_keys(oblock *ob, uint64_t first, uint64_t total, uint32_t max_batch)
{
    gen_fn gen = gen_for(oblock_signal(ob));
    uint64_t k = 0, seq = 10;
    for (uint32_t n_batch = 0; k < total; n_batch++) {
        uint32_t n = (uint32_t)((n_batch * 7919u) % max_batch) + 1;
        if (n > total - k) {
            n = (uint32_t)(total - k);
        }
        struct batch *b = batch_new(oblock_signal(ob));
        arena *a = arena_new(0);
        cr_assert(b != NULL && a != NULL);
        gen(b, a, first + k, n, n_batch % 2 == 1);
        cr_assert_eq(oblock_append(ob, b, seq), 0);
        batch_free(b);
        arena_free(a);
        k += n;
        seq += 2;
        cr_assert_eq(oblock_rows(ob), k);
        cr_assert_eq(oblock_max_seq(ob), seq - 2);
    }
}

/* Rows 0..total-1. */
static void fill(oblock *ob, uint64_t total, uint32_t max_batch)
{
    fill_keys(ob, 0, total, max_batch);
}

static void check_all(const oblock *ob, uint64_t total)
{
    struct batch *ref = batch_new(oblock_signal(ob));
    arena *a = arena_new(0);
    cr_assert(ref != NULL && a != NULL);
    cr_assert_eq(oblock_rows(ob), total);
    uint64_t row;
    const char *bad = check_rows(ob, 0, total, ref, a, &row);
    cr_assert_null(bad, "row %llu: %s differs", (unsigned long long)row, bad);
    batch_free(ref);
    arena_free(a);
}

/* ---- tests ---- */

Test(oblock, logs_read_back_exactly_across_chunks_with_deduplicated_dictionaries)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_expect_eq(oblock_rows(ob), 0);
    cr_expect_eq(oblock_max_seq(ob), 0);
    size_t empty_bytes = oblock_bytes(ob);
    cr_expect_gt(empty_bytes, 0);

    /* 20000 rows: 5 row chunks, several 1 MiB byte chunks, one body of
     * ~300 KB (row 19996) that gets a byte chunk of its own. */
    const uint64_t total = 20000;
    fill(ob, total, 3000);
    check_all(ob, total);

    /* Every batch carried the same 3 resources and 5 scopes (in two
     * orders): each is stored once. */
    cr_expect_eq(oblock_n_resources(ob), N_RES);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);
    cr_expect_eq(oblock_n_metrics(ob), 0);
    cr_expect_null(oblock_resource(ob, N_RES));
    cr_expect_null(oblock_scope(ob, N_SCOPE));
    cr_expect_null(oblock_metric(ob, 0));
    for (uint32_t id = 0; id < N_RES; id++) {
        cr_expect_eq(oblock_resource(ob, id)->id, id);
    }
    /* The first batch was in natural order: scope s got id s. */
    struct batch *ref = batch_new(SIG_LOGS);
    arena *a = arena_new(0);
    gen_logs(ref, a, 0, 0, false);
    for (uint32_t s = 0; s < N_SCOPE; s++) {
        const struct scope_view *v = oblock_scope(ob, s);
        cr_assert_null(ck_scope(ob, v, ref, &ref->scopes[s]));
        cr_expect_eq(v->resource_id, s % N_RES);
    }

    /* Memory: at least the row chunks and every copied byte. */
    size_t bytes = oblock_bytes(ob);
    cr_expect_geq(bytes, empty_bytes + 5 * (size_t)OBLOCK_CHUNK_ROWS * 100 + 300000);

    /* Reads out of range or of another signal are refused. */
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    cr_expect_eq(oblock_log(ob, total, &lv), -EINVAL);
    cr_expect_eq(oblock_span(ob, 0, &sv), -EINVAL);
    cr_expect_eq(oblock_point(ob, 0, &pv), -EINVAL);

    /* An empty batch shows no rows but moves the watermark. */
    gen_logs(ref, a, 0, 0, false);
    cr_assert_eq(oblock_append(ob, ref, 99999), 0);
    cr_expect_eq(oblock_rows(ob), total);
    cr_expect_eq(oblock_max_seq(ob), 99999);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);
    /* A lower seq does not move it back. */
    gen_logs(ref, a, total, 1, false);
    cr_assert_eq(oblock_append(ob, ref, 5), 0);
    cr_expect_eq(oblock_max_seq(ob), 99999);
    batch_free(ref);
    arena_free(a);
    check_all(ob, total + 1);
    oblock_free(ob);
    oblock_free(NULL);
}

Test(oblock, spans_read_back_exactly_across_chunks)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    const uint64_t total = 9000;
    fill(ob, total, 2500);
    check_all(ob, total);
    cr_expect_eq(oblock_n_resources(ob), N_RES);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);
    struct log_view lv;
    cr_expect_eq(oblock_log(ob, 0, &lv), -EINVAL);
    oblock_free(ob);
}

Test(oblock, points_read_back_exactly_and_metrics_without_points_are_kept)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    const uint64_t total = 9000;
    fill(ob, total, 2500);
    check_all(ob, total);
    cr_expect_eq(oblock_n_resources(ob), N_RES);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);
    /* Six distinct metrics, including metric 0 (MK_NONE) that no point names. */
    cr_expect_eq(oblock_n_metrics(ob), N_METRIC);
    struct batch *ref = batch_new(SIG_METRICS);
    arena *a = arena_new(0);
    gen_points(ref, a, 0, 0, false);
    for (uint32_t m = 0; m < N_METRIC; m++) {
        cr_assert_null(ck_metric(ob, oblock_metric(ob, m), ref, &ref->metrics[m]));
    }
    /* A metric differing only in temporality, unit or metadata is another metric. */
    struct metric_row base = ref->metrics[2];
    ref->metrics[2].temporality = 1;
    cr_assert_eq(oblock_append(ob, ref, 0), 0);
    cr_expect_eq(oblock_n_metrics(ob), N_METRIC + 1);
    ref->metrics[2] = base;
    ref->metrics[2].unit = (struct mstr){"s", 1};
    cr_assert_eq(oblock_append(ob, ref, 0), 0);
    cr_expect_eq(oblock_n_metrics(ob), N_METRIC + 2);
    ref->metrics[2] = base;
    ref->metrics[2].metadata.count++; /* same bytes, another count */
    cr_assert_eq(oblock_append(ob, ref, 0), 0);
    cr_expect_eq(oblock_n_metrics(ob), N_METRIC + 3);
    ref->metrics[2] = base;
    cr_assert_eq(oblock_append(ob, ref, 0), 0);
    cr_expect_eq(oblock_n_metrics(ob), N_METRIC + 3);
    cr_expect_eq(oblock_rows(ob), total);
    batch_free(ref);
    arena_free(a);
    oblock_free(ob);
}

/* The seal's sort key, read without the rest of the row. */
Test(oblock, a_rows_time_alone_is_the_time_its_view_sorts_by)
{
    for (enum signal sig = SIG_LOGS; sig <= SIG_METRICS; sig++) {
        oblock *ob;
        cr_assert_eq(oblock_new(sig, &ob), 0);
        const uint64_t total = 9000;
        fill(ob, total, 2500);
        cr_assert_eq(oblock_rows(ob), total);
        uint64_t distinct = 0, prev = 0;
        for (uint64_t i = 0; i < total; i++) {
            uint64_t want;
            struct log_view lv;
            struct span_view sv;
            struct point_view pv;
            if (sig == SIG_LOGS) {
                cr_assert_eq(oblock_log(ob, i, &lv), 0);
                want = lv.time_ns ? lv.time_ns : lv.observed_ns;
            } else if (sig == SIG_TRACES) {
                cr_assert_eq(oblock_span(ob, i, &sv), 0);
                want = sv.start_ns;
            } else {
                cr_assert_eq(oblock_point(ob, i, &pv), 0);
                want = pv.time_ns;
            }
            cr_assert_eq(oblock_time(ob, i), want, "signal %d row %llu", (int)sig,
                         (unsigned long long)i);
            distinct += i == 0 || want != prev;
            prev = want;
        }
        cr_expect_gt(distinct, total / 2, "signal %d: the times vary", (int)sig);
        cr_expect_eq(oblock_time(ob, total), 0);
        oblock_free(ob);
    }
}

/* i * 4099 mod n for i < n (n not a multiple of 4099): jumps between chunks. */
static uint64_t *jumping_perm(uint64_t n)
{
    uint64_t *perm = malloc(n * sizeof(*perm));
    cr_assert_not_null(perm);
    for (uint64_t i = 0; i < n; i++) {
        perm[i] = i * 4099 % n;
    }
    return perm;
}

static bool ob_same(struct obytes a, const void *p, uint32_t len)
{
    return a.p == (const uint8_t *)p && a.len == len;
}

/*
 * The seal's column reads give each row what its whole-row view does:
 * 9,000 generated rows (three chunks) and three made here (severities
 * -5 and INT32_MIN, a row with time 0, every id bit combination), read
 * through a permutation that jumps between chunks (i * 4099 mod n) and
 * compared field by field with oblock_log.
 */
Test(oblock, log_column_reads_equal_the_row_views_in_any_order)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 9000, 2500);
    struct batch *b = batch_new(SIG_LOGS);
    cr_assert_not_null(b);
    cr_assert_not_null(batch_add_resource(b));
    batch_add_scope(b)->resource = 0;
    static const int32_t sevs[] = {-5, INT32_MIN, 7};
    for (int i = 0; i < 3; i++) {
        struct log_row *r = batch_add_log(b);
        cr_assert_not_null(r);
        r->time_ns = i == 2 ? 0 : 1700000000000000000ull + (uint64_t)i;
        r->observed_ns = 1700000000000000005ull;
        r->severity_number = sevs[i];
        r->has_trace_id = i != 1;
        r->has_span_id = i != 0;
        fill_id(r->trace_id, 16, (uint64_t)i, 0x30);
        fill_id(r->span_id, 8, (uint64_t)i, 0x40);
    }
    cr_assert_eq(oblock_append(ob, b, 99), 0);
    batch_free(b);
    const uint64_t n = oblock_rows(ob);
    cr_assert_eq(n, 9003);
    uint64_t *perm = jumping_perm(n), *col = malloc(9 * n * sizeof(*col));
    uint8_t *ids = malloc(24 * n);
    cr_assert(col != NULL && ids != NULL);
    struct log_cols c = {.time = col,
                         .observed = col + n,
                         .scope = col + 2 * n,
                         .severity = col + 3 * n,
                         .body_type = col + 4 * n,
                         .ids = col + 5 * n,
                         .nattrs = col + 6 * n,
                         .dropped = col + 7 * n,
                         .flags = col + 8 * n,
                         .trace = ids,
                         .span = ids + 16 * n};
    oblock_log_cols(ob, perm, n, &c);
    int neg = 0;
    for (uint64_t j = 0; j < n; j++) {
        struct log_view v;
        cr_assert_eq(oblock_log(ob, perm[j], &v), 0);
        unsigned bits = (v.has_trace_id ? 1u : 0) | (v.has_span_id ? 2u : 0);
        cr_assert(c.time[j] == v.time_ns && c.observed[j] == v.observed_ns &&
                      c.scope[j] == v.scope_id &&
                      c.severity[j] == (uint64_t)(int64_t)v.severity_number &&
                      c.body_type[j] == (uint64_t)v.body_type && c.ids[j] == bits &&
                      c.nattrs[j] == v.attrs.count && c.dropped[j] == v.dropped_attrs &&
                      c.flags[j] == v.flags,
                  "row %llu", (unsigned long long)perm[j]);
        cr_assert_arr_eq(c.trace + 16 * j, v.trace_id, 16);
        cr_assert_arr_eq(c.span + 8 * j, v.span_id, 8);
        struct log_strs st;
        oblock_log_strs(ob, perm[j], &st);
        struct obytes body = v.body_type == VAL_STR
                                 ? (struct obytes){(const uint8_t *)v.body_str.p, v.body_str.len}
                                 : v.body_val;
        cr_assert(st.severity_text.p == (const uint8_t *)v.severity_text.p &&
                      st.severity_text.len == v.severity_text.len && st.body.p == body.p &&
                      st.body.len == body.len && st.attrs.p == v.attrs.p &&
                      st.attrs.len == v.attrs.len &&
                      st.event_name.p == (const uint8_t *)v.event_name.p &&
                      st.event_name.len == v.event_name.len,
                  "row %llu", (unsigned long long)perm[j]);
        neg += v.severity_number < 0;
    }
    cr_assert_eq(neg, 2, "the two negative severities were read");
    free(perm);
    free(col);
    free(ids);
    oblock_free(ob);
}

/* As the log test above, for spans: 9,000 generated rows and two with a
 * negative kind and status code (INT32_MIN, -3). */
Test(oblock, span_column_reads_equal_the_row_views_in_any_order)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    fill(ob, 9000, 2500);
    struct batch *b = batch_new(SIG_TRACES);
    cr_assert_not_null(b);
    cr_assert_not_null(batch_add_resource(b));
    batch_add_scope(b)->resource = 0;
    for (int i = 0; i < 2; i++) {
        struct span_row *r = batch_add_span(b);
        cr_assert_not_null(r);
        r->start_ns = 1700000000000000000ull;
        r->end_ns = r->start_ns - (uint64_t)i; /* ends before it starts: kept as sent */
        r->kind = i ? -3 : INT32_MIN;
        r->status_code = i ? INT32_MIN : -3;
        fill_id(r->trace_id, 16, (uint64_t)i, 0x50);
    }
    cr_assert_eq(oblock_append(ob, b, 99), 0);
    batch_free(b);
    const uint64_t n = oblock_rows(ob);
    uint64_t *perm = jumping_perm(n), *col = malloc(13 * n * sizeof(*col));
    uint8_t *ids = malloc(16 * n);
    cr_assert(col != NULL && ids != NULL);
    struct span_cols c = {.start = col,
                          .end = col + n,
                          .scope = col + 2 * n,
                          .kind = col + 3 * n,
                          .status_code = col + 4 * n,
                          .flags = col + 5 * n,
                          .has_parent = col + 6 * n,
                          .nattrs = col + 7 * n,
                          .dropped_attrs = col + 8 * n,
                          .n_events = col + 9 * n,
                          .dropped_events = col + 10 * n,
                          .n_links = col + 11 * n,
                          .dropped_links = col + 12 * n,
                          .span = ids,
                          .parent = ids + 8 * n};
    oblock_span_cols(ob, perm, n, &c);
    int neg = 0;
    for (uint64_t j = 0; j < n; j++) {
        struct span_view v;
        cr_assert_eq(oblock_span(ob, perm[j], &v), 0);
        cr_assert(c.start[j] == v.start_ns && c.end[j] == v.end_ns && c.scope[j] == v.scope_id &&
                      c.kind[j] == (uint64_t)(int64_t)v.kind &&
                      c.status_code[j] == (uint64_t)(int64_t)v.status_code &&
                      c.flags[j] == v.flags && c.has_parent[j] == v.has_parent &&
                      c.nattrs[j] == v.attrs.count && c.dropped_attrs[j] == v.dropped_attrs &&
                      c.n_events[j] == v.n_events && c.dropped_events[j] == v.dropped_events &&
                      c.n_links[j] == v.n_links && c.dropped_links[j] == v.dropped_links,
                  "row %llu", (unsigned long long)perm[j]);
        cr_assert_arr_eq(c.span + 8 * j, v.span_id, 8);
        cr_assert_arr_eq(c.parent + 8 * j, v.parent_span_id, 8);
        struct span_strs st;
        oblock_span_strs(ob, perm[j], &st);
        cr_assert_arr_eq(st.trace_id, v.trace_id, 16);
        cr_assert(ob_same(st.trace_state, v.trace_state.p, v.trace_state.len) &&
                      ob_same(st.name, v.name.p, v.name.len) &&
                      ob_same(st.status_message, v.status_message.p, v.status_message.len) &&
                      ob_same(st.attrs, v.attrs.p, v.attrs.len) &&
                      ob_same(st.events, v.events.p, v.events.len) &&
                      ob_same(st.links, v.links.p, v.links.len),
                  "row %llu", (unsigned long long)perm[j]);
        neg += v.kind < 0;
    }
    cr_assert_eq(neg, 2);
    free(perm);
    free(col);
    free(ids);
    oblock_free(ob);
}

/* As the log test above, for data points (every kind, value type and
 * has-bit combination the generator makes). */
Test(oblock, point_column_reads_equal_the_row_views_in_any_order)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    fill(ob, 9001, 2500);
    const uint64_t n = oblock_rows(ob);
    uint64_t *perm = jumping_perm(n), *col = malloc(9 * n * sizeof(*col));
    uint8_t *f = malloc(32 * n);
    cr_assert(col != NULL && f != NULL);
    struct point_cols c = {.time = col,
                           .start = col + n,
                           .metric = col + 2 * n,
                           .value_type = col + 3 * n,
                           .count = col + 4 * n,
                           .has = col + 5 * n,
                           .nattrs = col + 6 * n,
                           .flags = col + 7 * n,
                           .n_exemplars = col + 8 * n,
                           .value = f,
                           .sum = f + 8 * n,
                           .min = f + 16 * n,
                           .max = f + 24 * n};
    oblock_point_cols(ob, perm, n, &c);
    unsigned has_seen = 0;
    for (uint64_t j = 0; j < n; j++) {
        struct point_view v;
        cr_assert_eq(oblock_point(ob, perm[j], &v), 0);
        unsigned has = (v.has_sum ? 1u : 0) | (v.has_min ? 2u : 0) | (v.has_max ? 4u : 0);
        cr_assert(c.time[j] == v.time_ns && c.start[j] == v.start_ns &&
                      c.metric[j] == v.metric_id && c.value_type[j] == (uint64_t)v.value_type &&
                      c.count[j] == v.count && c.has[j] == has && c.nattrs[j] == v.attrs.count &&
                      c.flags[j] == v.flags && c.n_exemplars[j] == v.n_exemplars,
                  "row %llu", (unsigned long long)perm[j]);
        cr_assert_arr_eq(c.value + 8 * j, &v.value, 8);
        cr_assert_arr_eq(c.sum + 8 * j, &v.sum, 8);
        cr_assert_arr_eq(c.min + 8 * j, &v.min, 8);
        cr_assert_arr_eq(c.max + 8 * j, &v.max, 8);
        struct point_strs st;
        oblock_point_strs(ob, perm[j], &st);
        cr_assert(ob_same(st.attrs, v.attrs.p, v.attrs.len) &&
                      ob_same(st.detail, v.detail.p, v.detail.len) &&
                      ob_same(st.exemplars, v.exemplars.p, v.exemplars.len),
                  "row %llu", (unsigned long long)perm[j]);
        has_seen |= 1u << has;
    }
    cr_assert_eq(has_seen, 0xffu, "every has-bit combination: %x", has_seen);
    free(perm);
    free(col);
    free(f);
    oblock_free(ob);
}

Test(oblock, resources_and_scopes_are_stored_once_per_distinct_content)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    struct batch *b = batch_new(SIG_LOGS);
    arena *a = arena_new(0);
    gen_logs(b, a, 0, 10, false);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    gen_logs(b, a, 10, 10, true);
    cr_assert_eq(oblock_append(ob, b, 2), 0);
    cr_expect_eq(oblock_n_resources(ob), N_RES);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);

    /* One field changed at a time: each variant is a new resource, and the
     * scopes under it are new scopes. */
    for (int variant = 0; variant < 4; variant++) {
        gen_logs(b, a, 20, 5, false);
        struct res_row *r = &b->resources[0];
        switch (variant) {
        case 0:
            r->dropped_attrs += 100;
            break;
        case 1:
            r->schema_url = (struct mstr){"https://other", 13};
            break;
        case 2:
            b->heap.p[r->attrs.blob.off + r->attrs.blob.len - 1] ^= 1; /* last value byte */
            break;
        case 3:
            r->attrs.blob.len = 0; /* no attributes */
            r->attrs.count = 0;
            break;
        }
        cr_assert_eq(oblock_append(ob, b, 3), 0);
        cr_expect_eq(oblock_n_resources(ob), N_RES + 1 + (uint32_t)variant);
        /* Scopes 0 and 3 live under resource 0. */
        cr_expect_eq(oblock_n_scopes(ob), N_SCOPE + 2 * (1 + (uint32_t)variant));
    }
    /* A scope differing only in version, or only in its name's last byte. */
    gen_logs(b, a, 30, 5, false);
    b->scopes[1].version = (struct mstr){"9", 1};
    b->scopes[2].name.len--;
    cr_assert_eq(oblock_append(ob, b, 4), 0);
    cr_expect_eq(oblock_n_resources(ob), N_RES + 4);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE + 8 + 2);
    /* Rows of that batch name the new scopes; rows of others the old ones. */
    struct log_view v;
    cr_assert_eq(oblock_log(ob, 41, &v), 0); /* key 31: scope 1 */
    cr_expect_eq(v.scope->version.len, 1);
    cr_expect_eq(v.scope_id, N_SCOPE + 8);
    cr_assert_eq(oblock_log(ob, 1, &v), 0);
    cr_expect_eq(v.scope_id, 1);
    /* Same content again: nothing new. */
    gen_logs(b, a, 40, 5, true);
    cr_assert_eq(oblock_append(ob, b, 5), 0);
    cr_expect_eq(oblock_n_resources(ob), N_RES + 4);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE + 10);
    cr_expect_eq(oblock_rows(ob), 50);
    batch_free(b);
    arena_free(a);
    oblock_free(ob);
}

Test(oblock, inconsistent_batches_are_refused_and_show_no_rows)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_expect_eq(oblock_new((enum signal)0, &ob), -EINVAL);
    struct batch *b = batch_new(SIG_LOGS);
    arena *a = arena_new(0);
    gen_logs(b, a, 0, 100, false);
    cr_assert_eq(oblock_append(ob, b, 1), 0);

    for (int c = 0; c < 6; c++) {
        gen_logs(b, a, 100, 5000, false); /* crosses a row chunk */
        switch (c) {
        case 0:
            b->logs[4999].scope = N_SCOPE; /* the last row is bad */
            break;
        case 1:
            b->logs[4500].attrs.blob.off = (uint32_t)b->heap.len;
            break;
        case 2:
            b->logs[4500].event_name = (struct mstr){NULL, 3};
            break;
        case 3:
            b->scopes[2].resource = N_RES;
            break;
        case 4:
            b->resources[1].attrs.blob.len = (uint32_t)b->heap.len + 1;
            break;
        case 5:
            b->signal = SIG_TRACES;
            break;
        }
        cr_assert_eq(oblock_append(ob, b, 50), -EINVAL, "case %d", c);
        cr_assert_eq(oblock_rows(ob), 100, "case %d", c);
        cr_assert_eq(oblock_max_seq(ob), 1, "case %d", c);
    }
    /* The block is intact and takes the good batch after all. */
    gen_logs(b, a, 100, 5000, false);
    cr_assert_eq(oblock_append(ob, b, 60), 0);
    batch_free(b);
    arena_free(a);
    check_all(ob, 5100);
    cr_expect_eq(oblock_max_seq(ob), 60);
    cr_expect_eq(oblock_n_resources(ob), N_RES);
    cr_expect_eq(oblock_n_scopes(ob), N_SCOPE);
    oblock_free(ob);
}

Test(oblock, chunks_of_freed_blocks_are_reused_within_the_cache_limit)
{
    oblock *ob;
    cr_assert_eq(oblock_cache_bytes(), 0);
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 9000, 3000); /* 3 row chunks, 1+ byte chunks */
    size_t held = oblock_bytes(ob);
    oblock_free(ob);
    size_t cached = oblock_cache_bytes();
    cr_expect_gt(cached, 3 * (size_t)OBLOCK_CHUNK_ROWS * 100 + (1u << 20));
    cr_expect_lt(cached, held);

    /* A new block takes them back: its rows are written over old rows and
     * old bytes, and still read back exactly. */
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 9000, 2000);
    cr_expect_eq(oblock_cache_bytes(), 0);
    check_all(ob, 9000);
    /* Another signal's chunks are another size: a spans block takes none. */
    oblock *sp;
    cr_assert_eq(oblock_new(SIG_TRACES, &sp), 0);
    oblock_free(ob);
    cached = oblock_cache_bytes();
    fill(sp, 5000, 2000);
    cr_expect_lt(oblock_cache_bytes(), cached, "byte chunks are shared by all signals");
    cr_expect_gt(oblock_cache_bytes(), 0, "log row chunks stay cached");
    check_all(sp, 5000);
    oblock_free(sp);

    /* Lowering the limit frees down to it; 0 keeps nothing. */
    oblock_cache_limit(1u << 20);
    cr_expect_leq(oblock_cache_bytes(), 1u << 20);
    oblock_cache_limit(0);
    cr_expect_eq(oblock_cache_bytes(), 0);
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 100, 50);
    oblock_free(ob);
    cr_expect_eq(oblock_cache_bytes(), 0);
}

/* The whole file at |path| (|*n| bytes), malloc'd. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    cr_assert_gt(len, 0);
    rewind(f);
    uint8_t *p = malloc((size_t)len);
    cr_assert_not_null(p);
    cr_assert_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Seals rows [0, oblock_rows) of |ob| into a fresh directory; the file's
 * bytes are returned (malloc'd). */
static uint8_t *seal_bytes(const oblock *ob, size_t *n)
{
    char dir[256], path[512];
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    struct blk_meta m = {.shard = 1, .wal_seq = 77, .seal_id = 5};
    cr_assert_eq(blk_write(dir, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
    return slurp(path, n);
}

Test(oblock, a_block_on_recycled_chunks_holds_only_its_own_rows_and_seals_as_a_fresh_one)
{
    for (int sig = SIG_LOGS; sig <= SIG_METRICS; sig++) {
        oblock_cache_limit(256u << 20);
        size_t base = adm_in_use();
        struct oblock_cache_stats s0, s1, s2;
        oblock_cache_get_stats(&s0);

        /* A block of other rows (keys from 700000: other strings, times,
         * ids, bodies) fills more chunks than the next one needs, and is
         * freed: every chunk of it goes to the cache, charged there. */
        oblock *old, *ob, *fresh;
        cr_assert_eq(oblock_new(sig, &old), 0);
        fill_keys(old, 700000, 14000, 2500);
        oblock_free(old);
        oblock_cache_get_stats(&s1);
        cr_assert_gt(s1.bytes, 14000u * 100, "signal %d", sig);
        cr_expect_eq(adm_in_use(), base + s1.bytes, "cached chunks are charged");

        /* The next block takes only recycled chunks (none fresh) and reads
         * back exactly the rows appended to it. */
        cr_assert_eq(oblock_new(sig, &ob), 0);
        fill(ob, 9000, 1700);
        oblock_cache_get_stats(&s2);
        cr_expect_eq(s2.fresh, s1.fresh, "signal %d: no fresh chunk", sig);
        cr_expect_gt(s2.reused, s1.reused, "signal %d", sig);
        cr_expect_gt(s2.bytes, 0, "the old block was the bigger one");
        cr_expect_eq(adm_in_use(), base + s2.bytes,
                     "a chunk taken is uncharged: its block's owner charges oblock_bytes");
        check_all(ob, 9000);

        /* The same rows in a block of fresh memory: the same size, and the
         * same sealed file, byte for byte. Nothing of the old rows shows. */
        oblock_cache_limit(0);
        cr_expect_eq(adm_in_use(), base, "signal %d: the charges all returned", sig);
        cr_assert_eq(oblock_new(sig, &fresh), 0);
        fill(fresh, 9000, 1700);
        cr_expect_eq(oblock_bytes(ob), oblock_bytes(fresh), "signal %d", sig);
        size_t na, nb;
        uint8_t *a = seal_bytes(ob, &na), *b = seal_bytes(fresh, &nb);
        cr_expect_eq(na, nb, "signal %d", sig);
        cr_expect(na == nb && memcmp(a, b, na) == 0, "signal %d: sealed files differ", sig);
        free(a);
        free(b);
        size_t sealed = adm_in_use(); /* with the seal's scratch (block.h) */
        oblock_free(ob);
        oblock_free(fresh);
        cr_expect_eq(adm_in_use(), sealed, "no limit: nothing cached, nothing charged");
        cr_expect_eq(oblock_cache_bytes(), 0);
    }
}

Test(oblock, cache_trim_frees_what_is_asked_and_uncharges_it)
{
    oblock_cache_limit(64u << 20);
    size_t base = adm_in_use();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 12000, 3000);
    oblock_free(ob);
    struct oblock_cache_stats s0, s1;
    oblock_cache_get_stats(&s0);
    cr_assert_gt(s0.bytes, 2u << 20);
    cr_expect_eq(s0.limit, 64u << 20);

    /* At least the bytes asked for, in whole chunks (at most one more). */
    size_t freed = oblock_cache_trim(1u << 20);
    oblock_cache_get_stats(&s1);
    cr_expect_geq(freed, 1u << 20);
    cr_expect_leq(freed, (2u << 20) + 64, "whole chunks: one of them at most past the ask");
    cr_expect_eq(s1.bytes, s0.bytes - freed);
    cr_expect_gt(s1.trimmed, s0.trimmed);
    cr_expect_eq(adm_in_use(), base + s1.bytes);

    /* Asking for more than it holds empties it. */
    cr_expect_eq(oblock_cache_trim(SIZE_MAX), s1.bytes);
    cr_expect_eq(oblock_cache_bytes(), 0);
    cr_expect_eq(adm_in_use(), base);
    cr_expect_eq(oblock_cache_trim(1), 0);
}

Test(oblock, a_freed_block_is_not_cached_while_admission_is_short_of_room)
{
    adm_init(64u << 20);
    oblock_cache_limit(64u << 20);
    oblock_cache_keep_room(40u << 20);
    oblock *ob;
    struct oblock_cache_stats s0, s1;

    /* 16 MiB charged elsewhere: 48 MiB of room, 8 MiB more than kept, and
     * the block's chunks (its own charge is its owner's) fit in that. */
    adm_charge(16u << 20);
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 6000, 2000);
    oblock_free(ob);
    oblock_cache_get_stats(&s0);
    cr_expect_gt(s0.bytes, 1u << 20);
    cr_expect_lt(s0.bytes, 8u << 20);
    cr_expect_eq(s0.dropped, 0);
    cr_expect_eq(adm_in_use(), (16u << 20) + s0.bytes);
    oblock_cache_trim(SIZE_MAX);

    /* 24 MiB and a byte: less room than kept, and the freed chunks go back
     * to the system. */
    adm_charge((8u << 20) + 1);
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    fill(ob, 6000, 2000);
    oblock_free(ob);
    oblock_cache_get_stats(&s1);
    cr_expect_eq(s1.bytes, 0);
    cr_expect_gt(s1.dropped, s0.dropped);
    cr_expect_eq(adm_in_use(), (24u << 20) + 1, "nothing cached, nothing charged");
}

/* ---- a reader thread racing the writer ---- */

struct race {
    oblock *ob;
    uint64_t total;
    _Atomic uint64_t verified; /* rows [0, verified) checked by the reader */
    _Atomic bool writer_failed;
    _Atomic bool reader_done;
    uint64_t snapshots; /* distinct row counts the reader saw */
    uint64_t bad_row;
    const char *bad_field; /* NULL: every row matched */
};

static void *race_reader(void *arg)
{
    struct race *r = arg;
    struct batch *ref = batch_new(oblock_signal(r->ob));
    arena *a = arena_new(0);
    if (ref == NULL || a == NULL) {
        r->bad_field = "reader setup";
        goto out;
    }
    uint64_t next = 0;
    while (next < r->total) {
        uint64_t n = oblock_rows(r->ob);
        if (n == next) {
            if (atomic_load(&r->writer_failed)) {
                r->bad_field = "writer failed";
                break;
            }
            sched_yield();
            continue;
        }
        r->snapshots++;
        r->bad_field = check_rows(r->ob, next, n - next, ref, a, &r->bad_row);
        if (r->bad_field != NULL) {
            goto out;
        }
        next = n;
        /* An older row, read again while the writer goes on, is unchanged. */
        r->bad_field = check_rows(r->ob, (n * 2654435761u) % n, 1, ref, a, &r->bad_row);
        if (r->bad_field != NULL) {
            goto out;
        }
        atomic_store(&r->verified, next);
    }
out:
    batch_free(ref);
    arena_free(a);
    atomic_store(&r->reader_done, true);
    return NULL;
}

static void race(enum signal sig, uint64_t total)
{
    static struct race r;
    oblock *ob;
    cr_assert_eq(oblock_new(sig, &ob), 0);
    r = (struct race){.ob = ob, .total = total};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, race_reader, &r), 0);

    gen_fn gen = gen_for(sig);
    struct batch *b = batch_new(sig);
    arena *a = arena_new(0);
    cr_assert(b != NULL && a != NULL);
    uint64_t k = 0;
    uint32_t n_batch = 0, syncs = 0;
    while (k < total) {
        uint32_t n = (uint32_t)((n_batch * 7919u) % 1500) + 1;
        if (n > total - k) {
            n = (uint32_t)(total - k);
        }
        gen(b, a, k, n, n_batch % 2 == 1);
        if (oblock_append(ob, b, k + 1) != 0) {
            atomic_store(&r.writer_failed, true);
            break;
        }
        k += n;
        /* Every 4th batch, let the reader catch up, so the two are
         * interleaved at least that often whatever the scheduler does;
         * in between they run free. */
        if (++n_batch % 4 == 0) {
            while (atomic_load(&r.verified) < k && !atomic_load(&r.reader_done)) {
                sched_yield();
            }
            syncs++;
        }
    }
    pthread_join(th, NULL);
    batch_free(b);
    arena_free(a);
    cr_assert_eq(k, total, "writer stopped early");
    cr_assert_null(r.bad_field, "row %llu: %s differs", (unsigned long long)r.bad_row, r.bad_field);
    cr_expect_geq(r.snapshots, syncs);
    cr_expect_geq(syncs, 8);
    cr_assert_eq(oblock_rows(ob), total);
    oblock_free(ob);
}

Test(oblock, concurrent_reader_sees_complete_log_rows_while_the_writer_appends)
{
    race(SIG_LOGS, 200000);
}

Test(oblock, concurrent_reader_sees_complete_spans_and_points)
{
    race(SIG_TRACES, 30000);
    race(SIG_METRICS, 30000);
}
