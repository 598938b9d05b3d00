/*
 * pmsrc_test.c - query/pmsrc.c, OTLP points as Prometheus series, over a
 * real catalog of metric blocks: one sealed block (points at T0 .. T0+21 s
 * and the PROMQL.md C.10 histogram) and one open block (T0+12.0005 s ..
 * T0+35 s). Expected series, labels and samples are written by hand from
 * PROMQL.md C.1-C.10 and pmsrc.h, not from the code.
 *
 * Resources: R1 = the C.10 resource (shop/cart, pod-1, k8s.cluster.name,
 * telemetry.sdk.language: a target_info), R2 = {service.name=api,
 * service.instance.id=i2} (identifying attributes only: no target_info).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "query/pmsrc.h"
#include "query/promql.h"
#include "query/qctx.h"
#include "storage/adm.h"
#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/promname.h"
#include "storage/val.h"
#include "tests/util/blkflip.h"
#include "tests/util/tmpdir.h"

#define T0 UINT64_C(1700000000)
#define NS UINT64_C(1000000000)
#define S(x) ((T0 + (uint64_t)(x)) * NS)
#define MS(x) ((int64_t)(T0 * 1000 + (x)*1000))
#define HIST_NS UINT64_C(1700000000123456789)

static char dir[256];

/* ---- building batches ---- */

struct kv {
    const char *k;
    const char *s; /* string value, or NULL: the int |i| */
    int64_t i;
};

static struct attrs put_attrs(struct batch *b, const struct kv *kv, size_t n)
{
    size_t off = b->heap.len;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(val_put_key(&b->heap, kv[i].k, strlen(kv[i].k)), 0);
        if (kv[i].s != NULL) {
            cr_assert_eq(val_put_str(&b->heap, kv[i].s, strlen(kv[i].s)), 0);
        } else {
            cr_assert_eq(val_put_int(&b->heap, kv[i].i), 0);
        }
    }
    return (struct attrs){.blob = {(uint32_t)off, (uint32_t)(b->heap.len - off)},
                          .count = (uint32_t)n};
}

#define KV(...)                                                                                    \
    (const struct kv[]){__VA_ARGS__}, sizeof((const struct kv[]){__VA_ARGS__}) / sizeof(struct kv)
#define NOKV NULL, 0

static struct mstr ms_(const char *s)
{
    return (struct mstr){s, (uint32_t)strlen(s)};
}

/* Resources 0 (R1) and 1 (R2), scopes 0 and 1 on them. */
static void resources(struct batch *b)
{
    struct attrs a1 = put_attrs(b, KV({"service.namespace", "shop"}, {"service.name", "cart"},
                                      {"service.instance.id", "pod-1"}, {"k8s.cluster.name", "eu1"},
                                      {"telemetry.sdk.language", "go"}));
    batch_add_resource(b)->attrs = a1;
    struct attrs a2 = put_attrs(b, KV({"service.name", "api"}, {"service.instance.id", "i2"}));
    batch_add_resource(b)->attrs = a2;
    struct scope_row *s = batch_add_scope(b);
    s->resource = 0;
    s->name = ms_("io.opentelemetry.http");
    s->version = ms_("1.2.0");
    batch_add_scope(b)->resource = 1;
}

static uint32_t metric(struct batch *b, uint32_t scope, const char *name, const char *unit,
                       enum metric_kind k, int32_t temporality, bool monotonic, const char *desc)
{
    struct metric_row *m = batch_add_metric(b);
    m->scope = scope;
    m->name = ms_(name);
    m->unit = ms_(unit);
    m->description = ms_(desc);
    m->kind = k;
    m->temporality = temporality;
    m->monotonic = monotonic;
    return b->n_metrics - 1;
}

static struct point_row *point(struct batch *b, uint32_t m, uint64_t start, uint64_t t,
                               struct attrs a)
{
    struct point_row *p = batch_add_point(b);
    p->metric = m;
    p->start_ns = start;
    p->time_ns = t;
    p->attrs = a;
    return p;
}

static void pt_d(struct batch *b, uint32_t m, uint64_t start, uint64_t t, struct attrs a, double v)
{
    struct point_row *p = point(b, m, start, t, a);
    p->value_type = PV_DOUBLE;
    p->value.d = v;
}

static void pt_i(struct batch *b, uint32_t m, uint64_t start, uint64_t t, struct attrs a, int64_t v)
{
    struct point_row *p = point(b, m, start, t, a);
    p->value_type = PV_INT;
    p->value.i = v;
}

/* One exemplar into the heap (batch.h layout). */
static void put_exemplar(struct batch *b, uint64_t tns, double v, bool is_int, const uint8_t *trace,
                         const uint8_t *span, const struct kv *kv, size_t n)
{
    struct vbuf *h = &b->heap;
    cr_assert_eq(vbuf_put_u64(h, tns), 0);
    cr_assert_eq(vbuf_put_u8(h, is_int ? PV_INT : PV_DOUBLE), 0);
    if (is_int) {
        cr_assert_eq(vbuf_put_u64(h, (uint64_t)(int64_t)v), 0);
    } else {
        cr_assert_eq(vbuf_put_f64(h, v), 0);
    }
    static const uint8_t z[16];
    cr_assert_eq(vbuf_put_u8(h, trace != NULL), 0);
    cr_assert_eq(vbuf_put(h, trace != NULL ? trace : z, 16), 0);
    cr_assert_eq(vbuf_put_u8(h, span != NULL), 0);
    cr_assert_eq(vbuf_put(h, span != NULL ? span : z, 8), 0);
    cr_assert_eq(vbuf_put_u32(h, (uint32_t)n), 0);
    size_t at = h->len;
    cr_assert_eq(vbuf_put_u32(h, 0), 0);
    size_t st = h->len;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(val_put_key(h, kv[i].k, strlen(kv[i].k)), 0);
        cr_assert_eq(val_put_str(h, kv[i].s, strlen(kv[i].s)), 0);
    }
    vbuf_patch_u32(h, at, (uint32_t)(h->len - st));
}

static const uint8_t TRACE_A[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10};
static const uint8_t SPAN_A[8] = {0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18};
static const uint8_t TRACE_B[16] = {0xab, 0xcd, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42};
static const uint8_t SPAN_B[8] = {0, 0, 0, 0, 0, 0, 0, 0x99};

/* An exponential histogram's detail blob. */
static struct blob exp_detail(struct batch *b, int32_t scale, uint64_t zc, int32_t poff,
                              const uint64_t *pos, uint32_t np, int32_t noff, const uint64_t *neg,
                              uint32_t nn)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    cr_assert_eq(vbuf_put_u32(h, (uint32_t)scale), 0);
    cr_assert_eq(vbuf_put_u64(h, zc), 0);
    cr_assert_eq(vbuf_put_f64(h, 0.0), 0);
    cr_assert_eq(vbuf_put_u32(h, (uint32_t)poff), 0);
    cr_assert_eq(vbuf_put_u32(h, np), 0);
    for (uint32_t i = 0; i < np; i++) {
        cr_assert_eq(vbuf_put_u64(h, pos[i]), 0);
    }
    cr_assert_eq(vbuf_put_u32(h, (uint32_t)noff), 0);
    cr_assert_eq(vbuf_put_u32(h, nn), 0);
    for (uint32_t i = 0; i < nn; i++) {
        cr_assert_eq(vbuf_put_u64(h, neg[i]), 0);
    }
    return (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
}

/* A classic histogram's detail blob. */
static struct blob hist_detail(struct batch *b, const uint64_t *counts, uint32_t n,
                               const double *bounds, uint32_t m)
{
    size_t off = b->heap.len;
    cr_assert_eq(vbuf_put_u32(&b->heap, n), 0);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(vbuf_put_u64(&b->heap, counts[i]), 0);
    }
    cr_assert_eq(vbuf_put_u32(&b->heap, m), 0);
    for (uint32_t i = 0; i < m; i++) {
        cr_assert_eq(vbuf_put_f64(&b->heap, bounds[i]), 0);
    }
    return (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
}

/* A delta histogram "queue.wait" (s) point. */
static void delta_hist(struct batch *b, uint32_t m, uint64_t start, uint64_t t, uint64_t c0,
                       uint64_t c1, double sum)
{
    static const double bounds[] = {1};
    const uint64_t counts[] = {c0, c1};
    struct blob det = hist_detail(b, counts, 2, bounds, 1);
    struct point_row *p = point(b, m, start, t, (struct attrs){0});
    p->count = c0 + c1;
    p->sum = sum;
    p->has_sum = true;
    p->detail = det;
}

/* The sealed block's batch. */
static struct batch *batch_sealed(void)
{
    struct batch *b = batch_new(SIG_METRICS);
    cr_assert_not_null(b);
    resources(b);
    /* C.10: histogram, cumulative (2) */
    uint32_t mh = metric(b, 0, "http.server.request.duration", "s", MK_HISTOGRAM, 2, false, "");
    uint32_t mg = metric(b, 1, "temp", "Cel", MK_GAUGE, 0, false, "room temperature");
    uint32_t mc = metric(b, 1, "http.server.requests", "{request}", MK_SUM, 2, true, "requests");
    uint32_t ms = metric(b, 1, "rpc.latency", "ms", MK_SUMMARY, 0, false, "");
    uint32_t me = metric(b, 1, "req.size", "By", MK_EXP_HISTOGRAM, 2, false, "");
    uint32_t md = metric(b, 1, "jobs.done", "", MK_SUM, 1, true, "");
    uint32_t mb = metric(b, 1, "bad.sum", "", MK_SUM, 0, true, ""); /* UNSPECIFIED */

    /* the C.10 point, with two exemplars */
    struct attrs ha =
        put_attrs(b, KV({"http.request.method", "GET"}, {"http.response.status_code", NULL, 200}));
    size_t off = b->heap.len;
    cr_assert_eq(vbuf_put_u32(&b->heap, 4), 0);
    static const uint64_t counts[] = {3, 5, 1, 1};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(vbuf_put_u64(&b->heap, counts[i]), 0);
    }
    cr_assert_eq(vbuf_put_u32(&b->heap, 3), 0);
    static const double bounds[] = {0.1, 0.5, 1};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(vbuf_put_f64(&b->heap, bounds[i]), 0);
    }
    struct blob det = {(uint32_t)off, (uint32_t)(b->heap.len - off)};
    off = b->heap.len;
    put_exemplar(b, S(0) + 100 * 1000000ull, 0.3, false, TRACE_A, SPAN_A, NOKV);
    put_exemplar(b, S(0) + 110 * 1000000ull, 2.0, false, NULL, NULL, NOKV);
    struct blob ex = {(uint32_t)off, (uint32_t)(b->heap.len - off)};
    struct point_row *p = point(b, mh, S(0), HIST_NS, ha);
    p->count = 10;
    p->sum = 4.2;
    p->has_sum = true;
    p->detail = det;
    p->exemplars = ex;
    p->n_exemplars = 2;

    /* gauge: room=a 21.5 at +1 s, 22 (int) at +11 s, the staleness marker
     * at +21 s; room=b 19 then 20 at the same nanosecond (+1 s) */
    struct attrs ra = put_attrs(b, KV({"room", "a"}));
    struct attrs rb = put_attrs(b, KV({"room", "b"}));
    pt_d(b, mg, 0, S(1), ra, 21.5);
    pt_i(b, mg, 0, S(11), ra, 22);
    off = b->heap.len;
    put_exemplar(b, S(10), 3, false, TRACE_A, SPAN_A, NOKV); /* a gauge's: dropped */
    b->points[b->n_rows - 1].exemplars =
        (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    b->points[b->n_rows - 1].n_exemplars = 1;
    pt_d(b, mg, 0, S(21), ra, 99);
    b->points[b->n_rows - 1].flags = PROMNAME_FLAG_NO_RECORDED_VALUE;
    pt_d(b, mg, 0, S(1), rb, 19);
    pt_d(b, mg, 0, S(1), rb, 20);

    /* counter: 5 at +2 s, 7 at +12 s and 8 at +12.0003 s (the same ms); an
     * int exemplar with trace and span ids and a filtered attribute */
    struct attrs c200 = put_attrs(b, KV({"code", "200"}));
    pt_d(b, mc, S(0), S(2), c200, 5);
    pt_d(b, mc, S(0), S(12), c200, 7);
    off = b->heap.len;
    put_exemplar(b, S(11) + 500 * 1000000ull, 1, true, TRACE_B, SPAN_B, KV({"user.id", "u1"}));
    ex = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    pt_d(b, mc, S(0), S(12) + 300000, c200, 8);
    b->points[b->n_rows - 1].exemplars = ex;
    b->points[b->n_rows - 1].n_exemplars = 1;

    /* summary at +3 s */
    off = b->heap.len;
    cr_assert_eq(vbuf_put_u32(&b->heap, 2), 0);
    cr_assert_eq(vbuf_put_f64(&b->heap, 0.5), 0);
    cr_assert_eq(vbuf_put_f64(&b->heap, 1.5), 0);
    cr_assert_eq(vbuf_put_f64(&b->heap, 0.99), 0);
    cr_assert_eq(vbuf_put_f64(&b->heap, 9), 0);
    det = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    p = point(b, ms, 0, S(3), (struct attrs){0});
    p->count = 10;
    p->sum = 30;
    p->has_sum = true;
    p->detail = det;

    /* exponential histograms at +4 s (scale 0) and +14 s (scale 10) */
    static const uint64_t pa[] = {2, 3}, na[] = {1};
    det = exp_detail(b, 0, 1, 0, pa, 2, -1, na, 1);
    p = point(b, me, S(0), S(4), (struct attrs){0});
    p->count = 7;
    p->sum = 12.5;
    p->has_sum = true;
    p->detail = det;
    static const uint64_t pb[] = {1, 2, 3, 4, 5}, nb[] = {1, 1};
    det = exp_detail(b, 10, 0, 3, pb, 5, -3, nb, 2);
    p = point(b, me, S(0), S(14), (struct attrs){0});
    p->count = 17;
    p->sum = 3;
    p->has_sum = true;
    p->detail = det;

    /* delta counter q=x: 2 over (0, +5], 3 over (+5, +15] */
    struct attrs qx = put_attrs(b, KV({"q", "x"}));
    pt_i(b, md, S(0), S(5), qx, 2);
    pt_i(b, md, S(5), S(15), qx, 3);

    pt_d(b, mb, 0, S(6), (struct attrs){0}, 1);

    uint32_t mq = metric(b, 1, "queue.wait", "s", MK_HISTOGRAM, 1, false, "");
    delta_hist(b, mq, S(0), S(5), 1, 2, 4);
    return b;
}

/* The open block's batch. */
static struct batch *batch_open(void)
{
    struct batch *b = batch_new(SIG_METRICS);
    cr_assert_not_null(b);
    resources(b);
    uint32_t mg = metric(b, 1, "temp", "Cel", MK_GAUGE, 0, false, "room temperature");
    uint32_t mc = metric(b, 1, "http.server.requests", "{request}", MK_SUM, 2, true, "requests");
    uint32_t md = metric(b, 1, "jobs.done", "", MK_SUM, 1, true, "");
    struct attrs c200 = put_attrs(b, KV({"code", "200"}));
    struct attrs qx = put_attrs(b, KV({"q", "x"}));
    struct attrs ra = put_attrs(b, KV({"room", "a"}));
    /* two exemplars at the receiver's rune limit: trace_id + span_id make
     * 8+32 + 7+16 = 63 runes, "note" 4 more: a 61-rune value totals 128
     * (kept), a 62-rune one 129 (the attributes dropped, the ids kept) */
    char v61[62], v62[63];
    memset(v61, 'x', 61);
    v61[61] = '\0';
    memset(v62, 'y', 62);
    v62[62] = '\0';
    size_t off = b->heap.len;
    put_exemplar(b, S(31), 0.5, false, TRACE_A, SPAN_A, KV({"note", v61}));
    put_exemplar(b, S(31) + 1000000, 0.25, false, TRACE_A, SPAN_A, KV({"note", v62}));
    pt_d(b, mc, S(0), S(32), c200, 10);
    b->points[b->n_rows - 1].exemplars =
        (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    b->points[b->n_rows - 1].n_exemplars = 2;
    pt_d(b, mc, S(0), S(12) + 500000, c200, 9); /* the same ms again, a later block */
    /* delta: 4 over (+15, +25] continues the run; (+30, +35] starts anew */
    pt_i(b, md, S(15), S(25), qx, 4);
    pt_i(b, md, S(30), S(35), qx, 1);
    pt_d(b, mg, 0, S(31), ra, 23);
    uint32_t mq = metric(b, 1, "queue.wait", "s", MK_HISTOGRAM, 1, false, "");
    delta_hist(b, mq, S(5), S(25), 2, 0, 1);
    return b;
}

static oblock *make_block(struct batch *b)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    return ob;
}

static void corpus_ex(bool damage)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    struct cat_open *h = catalog_open_add(SIG_METRICS, make_block(batch_sealed()));
    cr_assert_not_null(h);
    oblock *ob = catalog_open_block(h);
    struct blk_meta m = {.shard = 0, .wal_seq = 1, .seal_id = 1};
    char sub[300], err[256], path[512];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "metrics"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    if (damage) {
        blk_unref(b);
        cr_assert_eq(blkflip_table(path, BLK_T_DETAIL), 0);
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    }
    cr_assert_eq(catalog_publish(h, b, path), 0);
    cr_assert_not_null(catalog_open_add(SIG_METRICS, make_block(batch_open())));
}

static void corpus(void)
{
    corpus_ex(false);
}

static void damaged_corpus(void)
{
    corpus_ex(true);
}

static void teardown(void)
{
    catalog_fini();
}

TestSuite(pmsrc, .init = corpus, .fini = teardown);

/* ---- running and rendering ---- */

struct fx {
    struct qctx q;
    arena *a;
    struct pmsrc *s;
    struct promql_expr *sel;
};

static void fx_open(struct fx *f)
{
    cr_assert_eq(qctx_open(&f->q, SIG_METRICS, NULL, "points"), 0);
    f->a = arena_new(0);
    cr_assert_not_null(f->a);
    cr_assert_eq(pmsrc_open(&f->s, &f->q, f->a), 0);
    f->sel = NULL;
}

static void fx_close(struct fx *f)
{
    pmsrc_close(f->s);
    promql_free(f->sel);
    arena_free(f->a);
    qctx_close(&f->q);
}

static const struct promql_matcher *matchers(struct fx *f, const char *sel, size_t *n)
{
    char err[256];
    promql_free(f->sel);
    int rc = promql_parse_selector(sel, strlen(sel), &f->sel, err, sizeof(err));
    cr_assert_eq(rc, 0, "%s: %s", sel, err);
    *n = f->sel->sel.n_matchers;
    return f->sel->sel.matchers;
}

static size_t render_labels(const struct pm_labels *l, bool with_name, char *o, size_t cap)
{
    size_t n = 0;
    uint32_t nl;
    const char *name = pm_labels_get(l, "__name__", 8, &nl);
    if (with_name && name != NULL) {
        n += (size_t)snprintf(o + n, cap - n, "%.*s", (int)nl, name);
    }
    n += (size_t)snprintf(o + n, cap - n, "{");
    bool first = true;
    for (uint32_t i = 0; i < l->n; i++) {
        if (with_name && l->v[i].name_len == 8 && memcmp(l->v[i].name, "__name__", 8) == 0) {
            continue;
        }
        n += (size_t)snprintf(o + n, cap - n, "%s%.*s=\"%.*s\"", first ? "" : ",",
                              (int)l->v[i].name_len, l->v[i].name, (int)l->v[i].value_len,
                              l->v[i].value);
        first = false;
    }
    n += (size_t)snprintf(o + n, cap - n, "}");
    return n;
}

static size_t render_hist(const struct pm_hist *h, char *o, size_t cap)
{
    char c[PROMNAME_FMT_MAX], s[PROMNAME_FMT_MAX], z[PROMNAME_FMT_MAX];
    promname_fmt_value(h->count, c);
    promname_fmt_value(h->sum, s);
    promname_fmt_value(h->zero_threshold, z);
    size_t n =
        (size_t)snprintf(o, cap, "H(schema=%d zt=%s zc=%g count=%s%s sum=%s%s hint=%u", h->schema,
                         z, h->zero_count, c, promname_is_stale_nan(h->count) ? "(stale)" : "", s,
                         promname_is_stale_nan(h->sum) ? "(stale)" : "", h->reset_hint);
    n += (size_t)snprintf(o + n, cap - n, " pos@%d=[", h->pos_offset);
    for (uint32_t i = 0; i < h->n_pos; i++) {
        n += (size_t)snprintf(o + n, cap - n, "%s%g", i ? "," : "", h->pos[i]);
    }
    n += (size_t)snprintf(o + n, cap - n, "] neg@%d=[", h->neg_offset);
    for (uint32_t i = 0; i < h->n_neg; i++) {
        n += (size_t)snprintf(o + n, cap - n, "%s%g", i ? "," : "", h->neg[i]);
    }
    n += (size_t)snprintf(o + n, cap - n, "])");
    return n;
}

/* One line per sample: name{labels} value ms (value "stale" for the
 * staleness marker), series in the set's order. */
static char *render_set(const struct pm_set *set)
{
    size_t cap = 1 << 16, n = 0;
    char *o = malloc(cap);
    cr_assert_not_null(o);
    o[0] = '\0';
    for (size_t i = 0; i < set->n; i++) {
        const struct pm_series *s = &set->s[i];
        char lab[1024];
        render_labels(&s->labels, true, lab, sizeof(lab));
        for (size_t k = 0; k < s->nf; k++) {
            char v[PROMNAME_FMT_MAX];
            if (promname_is_stale_nan(s->f[k].v)) {
                strcpy(v, "stale");
            } else {
                promname_fmt_value(s->f[k].v, v);
            }
            n += (size_t)snprintf(o + n, cap - n, "%s %s %" PRId64 "\n", lab, v, s->f[k].t);
        }
        for (size_t k = 0; k < s->nh; k++) {
            char h[1024];
            render_hist(s->h[k].h, h, sizeof(h));
            n += (size_t)snprintf(o + n, cap - n, "%s %s %" PRId64 "\n", lab, h, s->h[k].t);
        }
        cr_assert_lt(n, cap);
    }
    return o;
}

static char *select_str(struct fx *f, const char *sel, int64_t mint, int64_t maxt)
{
    size_t n;
    const struct promql_matcher *m = matchers(f, sel, &n);
    struct pm_set set;
    int rc = pmsrc_select(f->s, m, n, mint, maxt, &set);
    cr_assert_eq(rc, 0, "%s: %d %s", sel, rc, qctx_message(&f->q));
    return render_set(&set);
}

static void expect_select(const char *sel, int64_t mint, int64_t maxt, const char *want)
{
    struct fx f;
    fx_open(&f);
    char *got = select_str(&f, sel, mint, maxt);
    cr_expect_str_eq(got, want, "%s\n--- got\n%s--- want\n%s", sel, got, want);
    free(got);
    fx_close(&f);
}

#define ALL_T MS(0) - 1000, MS(60)
#define API "instance=\"i2\",job=\"api\""

/* ---- series and samples by type ---- */

Test(pmsrc, gauges_take_int_and_double_values_and_no_recorded_value_is_the_staleness_marker)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "temp_celsius", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_select(f.s, m, n, ALL_T, &set), 0);
    cr_assert_eq(set.n, 2);
    /* the marker's exact bits, not any NaN */
    cr_assert_eq(set.s[0].nf, 4);
    uint64_t bits;
    memcpy(&bits, &set.s[0].f[2].v, 8);
    cr_expect_eq(bits, PROMNAME_STALE_NAN_BITS);
    char *got = render_set(&set);
    cr_expect_str_eq(got,
                     "temp_celsius{" API ",room=\"a\"} 21.5 1700000001000\n"
                     "temp_celsius{" API ",room=\"a\"} 22 1700000011000\n"
                     "temp_celsius{" API ",room=\"a\"} stale 1700000021000\n"
                     "temp_celsius{" API ",room=\"a\"} 23 1700000031000\n"
                     "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n",
                     "%s", got);
    free(got);
    fx_close(&f);
}

Test(pmsrc, counter_duplicates_at_one_millisecond_keep_the_last_ingested)
{
    /* 7 at +12 s, 8 at +12.0003 s (same block, later row), 9 at +12.0005 s
     * (the open block): all three fall on one ms and 9 wins */
    expect_select("http_server_requests_total", ALL_T,
                  "http_server_requests_total{code=\"200\"," API "} 5 1700000002000\n"
                  "http_server_requests_total{code=\"200\"," API "} 9 1700000012000\n"
                  "http_server_requests_total{code=\"200\"," API "} 10 1700000032000\n");
}

Test(pmsrc, summary_series_quantiles_sum_and_count)
{
    expect_select("{__name__=~\"rpc_latency_milliseconds.*\"}", ALL_T,
                  "rpc_latency_milliseconds{" API ",quantile=\"0.5\"} 1.5 1700000003000\n"
                  "rpc_latency_milliseconds{" API ",quantile=\"0.99\"} 9 1700000003000\n"
                  "rpc_latency_milliseconds_count{" API "} 10 1700000003000\n"
                  "rpc_latency_milliseconds_sum{" API "} 30 1700000003000\n");
}

Test(pmsrc, exponential_histograms_become_native_histograms_scale_above_8_merged_down)
{
    /* scale 0: OTLP pos index 0,1 -> Prometheus 1,2; neg index -1 -> 0.
     * scale 10 -> schema 8, two buckets merged per step twice (d = 2):
     * OTLP 3 -> floor(3/4) = 0 -> 1; 4..7 -> 1 -> 2 (2+3+4+5 = 14);
     * neg -3, -2 -> floor(-3/4) = floor(-2/4) = -1 -> 0 (1+1 = 2). */
    expect_select(
        "req_size_bytes", ALL_T,
        "req_size_bytes{" API "} H(schema=0 zt=1e-128 zc=1 count=7 sum=12.5 hint=0 pos@1=[2,3] "
        "neg@0=[1]) 1700000004000\n"
        "req_size_bytes{" API "} H(schema=8 zt=1e-128 zc=0 count=17 sum=3 hint=0 pos@1=[1,14] "
        "neg@0=[2]) 1700000014000\n");
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "req_size_bytes", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_series(f.s, m, n, ALL_T, &set), 0);
    cr_assert_eq(set.n, 1, "a native histogram series exists for /series too");
    cr_expect_eq(set.s[0].nf + set.s[0].nh, 0);
    fx_close(&f);
}

/* ---- PROMQL.md C.10 through real blocks ---- */

Test(pmsrc, worked_example_c10_through_a_sealed_block)
{
#define J                                                                                          \
    "{http_request_method=\"GET\",http_response_status_code=\"200\",instance=\"pod-1\","           \
    "job=\"shop/cart\""
    expect_select("{job=\"shop/cart\"}", ALL_T,
                  "http_server_request_duration_seconds_bucket" J ",le=\"+Inf\"} 10 1700000000123\n"
                  "http_server_request_duration_seconds_bucket" J ",le=\"0.1\"} 3 1700000000123\n"
                  "http_server_request_duration_seconds_bucket" J ",le=\"0.5\"} 8 1700000000123\n"
                  "http_server_request_duration_seconds_bucket" J ",le=\"1\"} 9 1700000000123\n"
                  "http_server_request_duration_seconds_count" J "} 10 1700000000123\n"
                  "http_server_request_duration_seconds_sum" J "} 4.2 1700000000123\n"
                  "target_info{instance=\"pod-1\",job=\"shop/cart\",k8s_cluster_name=\"eu1\","
                  "telemetry_sdk_language=\"go\"} 1 1700000000123\n");
#undef J
}

Test(pmsrc, target_info_only_for_resources_with_other_attributes)
{
    /* R2 has only identifying attributes: no target_info for it */
    expect_select("target_info", ALL_T,
                  "target_info{instance=\"pod-1\",job=\"shop/cart\",k8s_cluster_name=\"eu1\","
                  "telemetry_sdk_language=\"go\"} 1 1700000000123\n");
    /* a negative name matcher admits target_info too */
    expect_select("{__name__!~\"http.*|temp.*|rpc.*|req.*|jobs.*\",job=~\"shop/.*\"}", ALL_T,
                  "target_info{instance=\"pod-1\",job=\"shop/cart\",k8s_cluster_name=\"eu1\","
                  "telemetry_sdk_language=\"go\"} 1 1700000000123\n");
}

/* ---- delta temporality ---- */

Test(pmsrc, delta_sums_accumulate_per_stream_across_blocks_with_a_restart)
{
    /* 2, 2+3, 2+3+4 (start = previous time: one run), then start +30 s
     * != previous time +25 s: a new run, 1 */
    expect_select("jobs_done_total", ALL_T,
                  "jobs_done_total{" API ",q=\"x\"} 2 1700000005000\n"
                  "jobs_done_total{" API ",q=\"x\"} 5 1700000015000\n"
                  "jobs_done_total{" API ",q=\"x\"} 9 1700000025000\n"
                  "jobs_done_total{" API ",q=\"x\"} 1 1700000035000\n");
    /* a range after the sealed block still reads the stream from its
     * oldest point: the sealed block is not skipped by its zone map */
    struct fx f;
    fx_open(&f);
    char *got = select_str(&f, "jobs_done_total", MS(20), MS(40));
    cr_expect_str_eq(got,
                     "jobs_done_total{" API ",q=\"x\"} 9 1700000025000\n"
                     "jobs_done_total{" API ",q=\"x\"} 1 1700000035000\n",
                     "%s", got);
    free(got);
    cr_expect_eq(f.q.st.blocks_considered, 2);
    cr_expect_eq(f.q.st.blocks_skipped_zone, 0);
    cr_expect_eq(f.q.st.blocks_scanned, 2);
    fx_close(&f);
}

Test(pmsrc, delta_histograms_accumulate_every_series_of_the_stream)
{
    /* (0, +5]: buckets [1, 2], count 3, sum 4; (+5, +25]: [2, 0], 2, 1 */
    expect_select("{__name__=~\"queue_wait_seconds_.*\"}", ALL_T,
                  "queue_wait_seconds_bucket{" API ",le=\"+Inf\"} 3 1700000005000\n"
                  "queue_wait_seconds_bucket{" API ",le=\"+Inf\"} 5 1700000025000\n"
                  "queue_wait_seconds_bucket{" API ",le=\"1\"} 1 1700000005000\n"
                  "queue_wait_seconds_bucket{" API ",le=\"1\"} 3 1700000025000\n"
                  "queue_wait_seconds_count{" API "} 3 1700000005000\n"
                  "queue_wait_seconds_count{" API "} 5 1700000025000\n"
                  "queue_wait_seconds_sum{" API "} 4 1700000005000\n"
                  "queue_wait_seconds_sum{" API "} 5 1700000025000\n");
}

/* ---- matchers and pruning ---- */

Test(pmsrc, label_matchers_equal_not_equal_regex_and_negated_regex)
{
    expect_select("temp_celsius{room!=\"a\"}", ALL_T,
                  "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n");
    expect_select("{__name__=\"temp_celsius\",room=~\"a|c\"}", MS(30), MS(40),
                  "temp_celsius{" API ",room=\"a\"} 23 1700000031000\n");
    expect_select("{__name__=~\"http_server_request_duration_seconds_bucket\",le!~\"0\\\\..*\"}",
                  ALL_T,
                  "http_server_request_duration_seconds_bucket{http_request_method=\"GET\","
                  "http_response_status_code=\"200\",instance=\"pod-1\",job=\"shop/cart\","
                  "le=\"+Inf\"} 10 1700000000123\n"
                  "http_server_request_duration_seconds_bucket{http_request_method=\"GET\","
                  "http_response_status_code=\"200\",instance=\"pod-1\",job=\"shop/cart\","
                  "le=\"1\"} 9 1700000000123\n");
    /* a label that no series has matches only the empty value */
    expect_select("temp_celsius{nope=\"\",room=\"b\"}", ALL_T,
                  "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n");
    expect_select("temp_celsius{nope=\"x\"}", ALL_T, "");
}

Test(pmsrc, blocks_are_pruned_by_zone_map_and_by_the_metric_dictionary)
{
    struct fx f;
    fx_open(&f);
    /* a name in neither dictionary: both blocks skipped, no row read */
    free(select_str(&f, "nope_total", ALL_T));
    cr_expect_eq(f.q.st.blocks_considered, 2);
    cr_expect_eq(f.q.st.blocks_skipped_dict, 2);
    cr_expect_eq(f.q.st.blocks_scanned, 0);
    cr_expect_eq(f.q.st.rows_scanned, 0);
    fx_close(&f);

    fx_open(&f);
    /* rpc_latency is only in the sealed block: the open one is skipped */
    free(select_str(&f, "rpc_latency_milliseconds_sum", ALL_T));
    cr_expect_eq(f.q.st.blocks_skipped_dict, 1);
    cr_expect_eq(f.q.st.blocks_scanned, 1);
    fx_close(&f);

    fx_open(&f);
    /* a gauge after the sealed block's last point (+21 s): zone map */
    char *got = select_str(&f, "temp_celsius", MS(25), MS(40));
    cr_expect_str_eq(got, "temp_celsius{" API ",room=\"a\"} 23 1700000031000\n", "%s", got);
    free(got);
    cr_expect_eq(f.q.st.blocks_skipped_zone, 1);
    cr_expect_eq(f.q.st.blocks_skipped_dict, 0);
    cr_expect_eq(f.q.st.blocks_scanned, 1);
    cr_expect_eq(f.q.st.rows_scanned, 6, "the open block's six rows");
    fx_close(&f);

    fx_open(&f);
    /* a range before the sealed block: zone map (its first point is T0) */
    free(select_str(&f, "temp_celsius", MS(-100), MS(-50)));
    cr_expect_eq(f.q.st.blocks_skipped_zone, 1);
    fx_close(&f);
}

/* The sealed block's stream index (block.h): temp_celsius{room="b"} reads
 * the two rows of that stream and, of room="a"'s three, only the first (for
 * its labels); the open block, which has no index, is scanned (its six
 * rows). */
Test(pmsrc, the_stream_index_leaves_other_streams_rows_unread)
{
    struct fx f;
    fx_open(&f);
    char *got = select_str(&f, "temp_celsius{room=\"b\"}", ALL_T);
    cr_expect_str_eq(got, "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n", "%s", got);
    free(got);
    fx_close(&f);

    /* the label index the first query built is the block's: the second
     * query reads room=b's two rows and none of room=a's three */
    fx_open(&f);
    got = select_str(&f, "temp_celsius{room=\"b\"}", ALL_T);
    cr_expect_str_eq(got, "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n", "%s", got);
    free(got);
    cr_expect_eq(f.q.st.rows_skipped_index, 3, "room=a's three rows: its labels are indexed");
    cr_expect_eq(f.q.st.rows_scanned, 2 + 6, "room=b's two rows, the open block's six");
    fx_close(&f);
}

Test(pmsrc, series_lists_label_sets_with_a_sample_in_the_range)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "{job=\"api\"}", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_series(f.s, m, n, MS(20), MS(40), &set), 0);
    char out[4096];
    size_t k = 0;
    for (size_t i = 0; i < set.n; i++) {
        k += render_labels(&set.s[i].labels, true, out + k, sizeof(out) - k);
        k += (size_t)snprintf(out + k, sizeof(out) - k, "\n");
    }
    cr_expect_str_eq(out,
                     "http_server_requests_total{code=\"200\"," API "}\n"
                     "jobs_done_total{" API ",q=\"x\"}\n"
                     "queue_wait_seconds_bucket{" API ",le=\"+Inf\"}\n"
                     "queue_wait_seconds_bucket{" API ",le=\"1\"}\n"
                     "queue_wait_seconds_count{" API "}\n"
                     "queue_wait_seconds_sum{" API "}\n"
                     "temp_celsius{" API ",room=\"a\"}\n",
                     "%s", out);
    fx_close(&f);
}

/* Series mode over the stream index: a gauge stream makes one series, so one
 * row of it in the range is enough (room="a" has three in the sealed block,
 * room="b" two; one of each is read), and the open block is scanned. Every
 * series is listed, target_info included. */
Test(pmsrc, series_read_one_row_per_single_series_stream)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "temp_celsius", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_series(f.s, m, n, MS(-100), MS(100), &set), 0);
    cr_expect_eq(set.n, 2);
    fx_close(&f);

    /* once the sealed block's label index is built, it answers alone */
    fx_open(&f);
    m = matchers(&f, "temp_celsius", &n);
    cr_assert_eq(pmsrc_series(f.s, m, n, MS(-100), MS(100), &set), 0);
    cr_expect_eq(set.n, 2);
    cr_expect_eq(f.q.st.rows_scanned, 6, "no sealed row, the open block's six");
    cr_expect_eq(f.q.st.rows_skipped_index, 0);
    fx_close(&f);

    fx_open(&f);
    struct pm_set everything;
    cr_assert_eq(pmsrc_series(f.s, NULL, 0, MS(-100), MS(100), &everything), 0);
    bool ti = false;
    for (size_t i = 0; i < everything.n; i++) {
        uint32_t vl;
        const char *v = pm_labels_get(&everything.s[i].labels, "__name__", 8, &vl);
        ti |= v != NULL && vl == 11 && memcmp(v, "target_info", 11) == 0;
    }
    cr_expect(ti, "target_info is listed with no matcher");
    fx_close(&f);
}

Test(pmsrc, unmapped_metrics_are_counted_not_served)
{
    uint64_t before = pmsrc_unmapped();
    expect_select("{__name__=~\"bad.*\"}", ALL_T, "");
    cr_expect_eq(pmsrc_unmapped() - before, 1, "bad.sum in the sealed block's dictionary");
    char name[64];
    cr_expect_eq(pmsrc_unmapped_last(name, sizeof(name)), 7);
    cr_expect_str_eq(name, "bad.sum");
}

/* ---- metadata ---- */

Test(pmsrc, metadata_from_the_dictionaries_one_row_per_family)
{
    struct fx f;
    fx_open(&f);
    struct pm_meta *m;
    size_t n;
    cr_assert_eq(pmsrc_metadata(f.s, NULL, 0, &m, &n), 0);
    char out[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += (size_t)snprintf(out + k, sizeof(out) - k, "%s|%s|%s|%s\n", m[i].name, m[i].type,
                              m[i].help, m[i].unit);
    }
    cr_expect_str_eq(out,
                     "http_server_request_duration_seconds|histogram||seconds\n"
                     "http_server_requests_total|counter|requests|\n"
                     "jobs_done_total|unknown||\n"
                     "queue_wait_seconds|unknown||seconds\n"
                     "req_size_bytes|histogram||bytes\n"
                     "rpc_latency_milliseconds|summary||milliseconds\n"
                     "target_info|gauge|Target metadata|\n"
                     "temp_celsius|gauge|room temperature|celsius\n",
                     "%s", out);
    cr_assert_eq(pmsrc_metadata(f.s, "temp_celsius", 12, &m, &n), 0);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(m[0].unit, "celsius");
    cr_assert_eq(pmsrc_metadata(f.s, "temp", 4, &m, &n), 0);
    cr_expect_eq(n, 0);
    fx_close(&f);
}

/* ---- exemplars ---- */

Test(pmsrc, exemplars_with_trace_ids_on_their_bucket_or_series)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "{job=~\".+\"}", &n);
    struct pm_exemplar_series *e;
    size_t ne;
    cr_assert_eq(pmsrc_exemplars(f.s, m, n, ALL_T, &e, &ne), 0);
    char out[4096];
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) {
        k += render_labels(&e[i].series, true, out + k, sizeof(out) - k);
        for (size_t j = 0; j < e[i].n; j++) {
            char v[PROMNAME_FMT_MAX];
            promname_fmt_value(e[i].e[j].value, v);
            k += (size_t)snprintf(out + k, sizeof(out) - k, " ");
            k += render_labels(&e[i].e[j].labels, false, out + k, sizeof(out) - k);
            k += (size_t)snprintf(out + k, sizeof(out) - k, " %s %" PRId64, v, e[i].e[j].t);
        }
        k += (size_t)snprintf(out + k, sizeof(out) - k, "\n");
    }
    /* 0.3 -> the first bound >= it (0.5); 2 -> above every bound, +Inf; the
     * gauge's exemplar is dropped (only histograms and monotonic sums);
     * attribute keys stay as they are (user.id), as the receiver keeps them */
#define X61 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    cr_expect_str_eq(
        out,
        "http_server_request_duration_seconds_bucket{http_request_method=\"GET\","
        "http_response_status_code=\"200\",instance=\"pod-1\",job=\"shop/cart\",le=\"+Inf\"}"
        " {} 2 1700000000110\n"
        "http_server_request_duration_seconds_bucket{http_request_method=\"GET\","
        "http_response_status_code=\"200\",instance=\"pod-1\",job=\"shop/cart\",le=\"0.5\"}"
        " {span_id=\"a1b2c3d4e5f60718\",trace_id=\"0102030405060708090a0b0c0d0e0f10\"} 0.3 "
        "1700000000100\n"
        "http_server_requests_total{code=\"200\"," API "}"
        " {span_id=\"0000000000000099\",trace_id=\"abcdef00000000000000000000000042\","
        "user.id=\"u1\"} 1 1700000011500"
        " {note=\"" X61
        "\",span_id=\"a1b2c3d4e5f60718\",trace_id=\"0102030405060708090a0b0c0d0e0f10\"}"
        " 0.5 1700000031000"
        " {span_id=\"a1b2c3d4e5f60718\",trace_id=\"0102030405060708090a0b0c0d0e0f10\"} 0.25 "
        "1700000031001\n",
        "%s", out);
#undef X61
    /* a range without them */
    cr_assert_eq(pmsrc_exemplars(f.s, m, n, MS(20), MS(30), &e, &ne), 0);
    cr_expect_eq(ne, 0);
    fx_close(&f);
}

/* ---- memory ---- */

Test(pmsrc, what_the_source_holds_is_charged_and_a_memory_limit_stops_it)
{
    struct fx f;
    fx_open(&f);
    free(select_str(&f, "{job=~\".+\"}", ALL_T));
    cr_expect_gt(f.q.mem, 0);
    fx_close(&f);

    struct qctx_limits lim = {.max_memory = 1024};
    struct qctx q;
    cr_assert_eq(qctx_open(&q, SIG_METRICS, &lim, "points"), 0);
    arena *a = arena_new(0);
    struct pmsrc *s;
    cr_assert_eq(pmsrc_open(&s, &q, a), 0);
    struct promql_expr *sel;
    char err[128];
    cr_assert_eq(promql_parse_selector("{job=~\".+\"}", 11, &sel, err, sizeof(err)), 0);
    struct pm_set set;
    cr_expect_eq(pmsrc_select(s, sel->sel.matchers, sel->sel.n_matchers, ALL_T, &set), -ENOMEM);
    cr_expect_eq(qctx_err(&q), -ENOMEM);
    promql_free(sel);
    pmsrc_close(s);
    arena_free(a);
    qctx_close(&q);
}

/* ---- quarantine ---- */

TestSuite(pmsrc_damaged, .init = damaged_corpus, .fini = teardown);

Test(pmsrc_damaged, a_block_failing_verification_is_quarantined_and_the_open_block_answers)
{
    struct fx f;
    fx_open(&f);
    char *got = select_str(&f, "temp_celsius", ALL_T);
    cr_expect_str_eq(got, "temp_celsius{" API ",room=\"a\"} 23 1700000031000\n", "%s", got);
    free(got);
    cr_expect_eq(f.q.st.blocks_failed, 1);
    char w[512];
    qctx_warnings_join(&f.q, w, sizeof(w));
    cr_expect(strstr(w, "failed verification and was quarantined") != NULL, "%s", w);
    fx_close(&f);
}

/* ---- many series ---- */

#define MANY 3000

/* Series id=<i> of gauge "load": value 10 i + k at +k s, k 0..3 in the
 * sealed block and 4..7 in the open one, each written newest first. */
static struct batch *batch_many(int k0)
{
    struct batch *b = batch_new(SIG_METRICS);
    cr_assert_not_null(b);
    resources(b);
    uint32_t m = metric(b, 1, "load", "", MK_GAUGE, 0, false, "");
    for (int k = k0 + 3; k >= k0; k--) {
        for (int i = 0; i < MANY; i++) {
            char id[16];
            snprintf(id, sizeof(id), "%d", i);
            pt_d(b, m, 0, S(k), put_attrs(b, KV({"id", id})), 10.0 * i + k);
        }
    }
    return b;
}

static void many_corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    struct cat_open *h = catalog_open_add(SIG_METRICS, make_block(batch_many(0)));
    oblock *ob = catalog_open_block(h);
    struct blk_meta m = {.shard = 0, .wal_seq = 1, .seal_id = 1};
    char sub[300], err[256], path[512];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "metrics"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(catalog_publish(h, b, path), 0);
    cr_assert_not_null(catalog_open_add(SIG_METRICS, make_block(batch_many(4))));
}

TestSuite(pmsrc_many, .init = many_corpus, .fini = teardown);

Test(pmsrc_many, thousands_of_series_each_with_its_samples_in_time_order)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "load", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_select(f.s, m, n, ALL_T, &set), 0);
    cr_assert_eq(set.n, MANY);
    bool seen[MANY] = {false};
    for (size_t i = 0; i < set.n; i++) {
        if (i > 0) {
            cr_assert_lt(pm_labels_cmp(&set.s[i - 1].labels, &set.s[i].labels), 0);
        }
        uint32_t vl;
        const char *id = pm_labels_get(&set.s[i].labels, "id", 2, &vl);
        cr_assert_not_null(id);
        int k = atoi(id);
        cr_assert(k >= 0 && k < MANY && !seen[k]);
        seen[k] = true;
        cr_assert_eq(set.s[i].labels.n, 4, "__name__, id, instance, job");
        cr_assert_eq(set.s[i].nf, 8);
        for (int j = 0; j < 8; j++) {
            cr_assert_eq(set.s[i].f[j].t, MS(j));
            cr_assert_eq(set.s[i].f[j].v, 10.0 * k + j);
        }
    }
    cr_expect_eq(f.q.st.rows_scanned, MANY + 8 * MANY,
                 "the label index's build reads each sealed stream's first row, once");
    fx_close(&f);
}

/* ---- the label index ---- */

/* The label names (|name| NULL) or values of |name| in [mint, maxt],
 * joined by ",". */
static char *values_str(struct fx *f, const char *name, int64_t mint, int64_t maxt)
{
    struct pmsrc_str *v;
    size_t n;
    int rc = pmsrc_label_values(f->s, name, name != NULL ? strlen(name) : 0, mint, maxt, &v, &n);
    cr_assert_eq(rc, 0, "%d %s", rc, qctx_message(&f->q));
    char *out = malloc(4096);
    cr_assert_not_null(out);
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        k += (size_t)snprintf(out + k, 4096 - k, "%s%.*s", i > 0 ? "," : "", (int)v[i].n, v[i].s);
    }
    return out;
}

/* A cold call (it builds the sealed block's index) and a warm one answer
 * the same; the warm one reads the open block's rows only. */
static void expect_values(const char *name, int64_t mint, int64_t maxt, const char *want)
{
    for (int pass = 0; pass < 2; pass++) {
        struct fx f;
        fx_open(&f);
        char *got = values_str(&f, name, mint, maxt);
        cr_expect_str_eq(got, want, "%s pass %d [%" PRId64 ", %" PRId64 "]: got %s",
                         name ? name : "names", pass, mint, maxt, got);
        free(got);
        if (pass == 1) {
            cr_expect_leq(f.q.st.rows_scanned, 6, "the open block's rows at most");
        }
        fx_close(&f);
    }
}

Test(pmsrc, label_names_over_sealed_and_open_blocks)
{
    expect_values(NULL, ALL_T,
                  "__name__,code,http_request_method,http_response_status_code,instance,job,"
                  "k8s_cluster_name,le,q,quantile,room,telemetry_sdk_language");
    /* +2 s .. +3 s: the counter (+2 s) and the summary (+3 s) only */
    expect_values(NULL, MS(2), MS(3), "__name__,code,instance,job,quantile");
    /* +31 s .. +32 s: the open block's gauge and counter only */
    expect_values(NULL, MS(31), MS(31), "__name__,instance,job,room");
    expect_values(NULL, MS(31), MS(32), "__name__,code,instance,job,room");
    /* before every block */
    expect_values(NULL, MS(-100), MS(-50), "");
}

Test(pmsrc, label_values_honour_a_range_that_cuts_a_stream)
{
    /* room=a has points at +1, +11, +21 s (sealed) and +31 s (open) */
    expect_values("room", ALL_T, "a,b");
    expect_values("room", MS(1), MS(1), "a,b");
    expect_values("room", MS(2), MS(10), "");
    expect_values("room", MS(11), MS(11), "a");
    expect_values("room", MS(22), MS(40), "a");
    expect_values("__name__", MS(2), MS(3),
                  "http_server_requests_total,rpc_latency_milliseconds,"
                  "rpc_latency_milliseconds_count,rpc_latency_milliseconds_sum");
    /* the histogram at +0.123 s and its resource's target_info */
    expect_values("le", MS(0), MS(0) + 123, "+Inf,0.1,0.5,1");
    expect_values("le", MS(0) + 124, MS(1), "");
    expect_values("k8s_cluster_name", MS(0) + 123, MS(0) + 123, "eu1");
    expect_values("k8s_cluster_name", MS(0), MS(0) + 122, "");
    expect_values("k8s_cluster_name", MS(1), MS(60), "");
    expect_values("nope", ALL_T, "");
}

/* pmsrc_series over the index: matchers intersect postings. */
static void expect_series(const char *sel, int64_t mint, int64_t maxt, const char *want)
{
    for (int pass = 0; pass < 2; pass++) {
        struct fx f;
        fx_open(&f);
        size_t n;
        const struct promql_matcher *m = matchers(&f, sel, &n);
        struct pm_set set;
        cr_assert_eq(pmsrc_series(f.s, m, n, mint, maxt, &set), 0);
        char out[4096];
        size_t k = 0;
        out[0] = '\0';
        for (size_t i = 0; i < set.n; i++) {
            k += render_labels(&set.s[i].labels, true, out + k, sizeof(out) - k);
            k += (size_t)snprintf(out + k, sizeof(out) - k, "\n");
        }
        cr_expect_str_eq(out, want, "%s pass %d:\n%s--- want\n%s", sel, pass, out, want);
        fx_close(&f);
    }
}

Test(pmsrc, series_matchers_on_the_index_regexes_negations_and_nothing)
{
    expect_series("{__name__=~\"temp_.+\",room=~\"a|b\"}", ALL_T,
                  "temp_celsius{" API ",room=\"a\"}\ntemp_celsius{" API ",room=\"b\"}\n");
    expect_series("temp_celsius{room!~\"a\"}", ALL_T, "temp_celsius{" API ",room=\"b\"}\n");
    expect_series("temp_celsius{room!=\"b\"}", MS(2), MS(10), "");
    expect_series("{room=~\".+\"}", MS(22), MS(40), "temp_celsius{" API ",room=\"a\"}\n");
    expect_series("{job=\"shop/cart\",le=\"0.5\"}", ALL_T,
                  "http_server_request_duration_seconds_bucket{http_request_method=\"GET\","
                  "http_response_status_code=\"200\",instance=\"pod-1\",job=\"shop/cart\","
                  "le=\"0.5\"}\n");
    expect_series("{__name__=\"target_info\"}", ALL_T,
                  "target_info{instance=\"pod-1\",job=\"shop/cart\",k8s_cluster_name=\"eu1\","
                  "telemetry_sdk_language=\"go\"}\n");
    expect_series("{room=\"zzz\"}", ALL_T, "");
    expect_series("{nope=~\".+\"}", ALL_T, "");
    expect_series("temp_celsius{room=\"\"}", ALL_T, "");
    expect_series("{__name__=~\"temp_.+\",nope=\"\",room=\"b\"}", ALL_T,
                  "temp_celsius{" API ",room=\"b\"}\n");
}

/* A selector on a warm index reads the streams its matchers admit: the
 * open block's rows and room=b's two sealed rows, nothing of room=a (and,
 * no target_info having a room, the block is not scanned for one). */
Test(pmsrc, a_selector_on_a_warm_index_reads_the_admitted_streams_only)
{
    struct fx f;
    fx_open(&f);
    free(values_str(&f, NULL, ALL_T));
    fx_close(&f);
    fx_open(&f);
    char *got = select_str(&f, "{room=~\"b|c\"}", ALL_T);
    cr_expect_str_eq(got, "temp_celsius{" API ",room=\"b\"} 20 1700000001000\n", "%s", got);
    free(got);
    cr_expect_eq(f.q.st.rows_scanned, 2 + 6, "room=b's two rows, the open block's six");
    fx_close(&f);
}

/* A label call meets bad.sum (UNSPECIFIED temporality) in the sealed
 * block once, whether it builds the index or reads it. */
Test(pmsrc, label_calls_count_unmapped_metrics_once_each)
{
    for (int pass = 0; pass < 2; pass++) {
        uint64_t before = pmsrc_unmapped();
        struct fx f;
        fx_open(&f);
        free(values_str(&f, NULL, ALL_T));
        fx_close(&f);
        cr_expect_eq(pmsrc_unmapped() - before, 1, "pass %d", pass);
        char name[64];
        cr_expect_eq(pmsrc_unmapped_last(name, sizeof(name)), 7);
        cr_expect_str_eq(name, "bad.sum");
    }
}

/* The index is charged to the memory budget while its block lives, and
 * freed with it: retention deletes the block once the last query holding
 * it is done. */
/* The budget's charges other than the blocks' loaded tables (also charged,
 * block.h) and the open queries' own memory and page windows (qctx.h). */
static uint64_t charged_but_tables(void)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    return adm_in_use() - bs.table_heap_bytes - qctx_memory_held() - qctx_window_bytes();
}

Test(pmsrc, the_label_index_is_charged_and_freed_with_its_block)
{
    cr_assert_eq(pmsrc_index_bytes(), 0);
    uint64_t before = charged_but_tables();
    struct fx f;
    fx_open(&f);
    char *got = values_str(&f, "room", ALL_T);
    cr_expect_str_eq(got, "a,b");
    free(got);
    uint64_t held = pmsrc_index_bytes();
    cr_expect_gt(held, 0);
    cr_expect_eq(charged_but_tables() - before, held, "charged to the memory budget");
    cr_assert_eq(catalog_retain(S(3600), 1, 0), 1, "the sealed block is past any age");
    cr_expect_eq(pmsrc_index_bytes(), held, "the query's snapshot still holds the block");
    fx_close(&f);
    cr_expect_eq(pmsrc_index_bytes(), 0, "freed with the block");
    cr_expect_eq(charged_but_tables(), before);

    fx_open(&f); /* the open block alone */
    got = values_str(&f, "room", ALL_T);
    cr_expect_str_eq(got, "a");
    free(got);
    fx_close(&f);
}

/* The table cap (catalog.h) drops an idle block's label index with its
 * tables (the index points into its time column) and returns its charge;
 * the next query builds it again and answers the same. */
/* The label call gives a block up once it has read it (qctx_done_all):
 * over the cap, its tables and the index built on them go at once, while
 * the query is still open, and the next query builds the index again. */
Test(pmsrc, the_table_cap_drops_the_label_index_once_the_query_is_done_with_its_block)
{
    uint64_t left[2];
    catalog_set_table_cap(1);
    for (int pass = 0; pass < 2; pass++) {
        struct fx f;
        struct blk_stats after;
        uint64_t dropped = catalog_tables_dropped();
        fx_open(&f);
        char *got = values_str(&f, "room", ALL_T);
        cr_expect_str_eq(got, "a,b", "pass %d", pass);
        free(got);
        /* the index built (its run read the sealed block's 8 mapped
         * streams, one row each; the values came from it) and the open
         * block's 6 rows */
        cr_expect_eq(f.q.st.rows_scanned, 8 + 6, "pass %d: %" PRIu64, pass, f.q.st.rows_scanned);
        cr_expect_eq(pmsrc_index_bytes(), 0, "pass %d: dropped with the block's tables", pass);
        cr_expect_gt(catalog_tables_dropped(), dropped, "pass %d", pass);
        fx_close(&f);
        blk_get_stats(&after);
        left[pass] = after.table_heap_bytes;
    }
    cr_expect_eq(left[1], left[0]);
}

/* A budget whose eighth cannot hold an index: none is kept, and the calls
 * read the rows (the same answers). The block's own tables take the
 * process past this budget's admission limit, so the build (optional
 * work, a child context) is refused at its first charge and reads no row
 * of its own (qctx.h: qctx_sub_open). */
Test(pmsrc, without_room_for_the_index_the_rows_are_read)
{
    adm_init(16 << 10);
    for (int pass = 0; pass < 3; pass++) {
        struct fx f;
        fx_open(&f);
        char *got = values_str(&f, "room", ALL_T);
        cr_expect_str_eq(got, "a,b");
        free(got);
        /* the sealed block's 8 mapped streams, one row each (no histogram
         * there has two points), and the open block's 6 rows */
        cr_expect_gt(adm_excess(), 0);
        cr_expect_eq(f.q.st.rows_scanned, 8 + 6, "pass %d: %" PRIu64, pass, f.q.st.rows_scanned);
        cr_expect_eq(pmsrc_index_bytes(), 0);
        fx_close(&f);
    }
    adm_init(0);
}

/* ---- the label index of a block sealed before the stream index ---- */

static void v2_corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    char src[1024], sub[300], path[512], err[256];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(src, sizeof(src), "%s/blocks/v2-metrics-8.blk", v != NULL ? v : "tests/vectors");
    FILE *in = fopen(src, "rb");
    cr_assert_not_null(in, "%s", src);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    cr_assert_gt(n, 0);
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "metrics"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(tmpdir_write_file(sub, "s0-00000000000001f7.blk", buf, n), 0);
    cr_assert_eq(tmpdir_join(path, sizeof(path), sub, "s0-00000000000001f7.blk"), 0);
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    struct cat_open *h = catalog_open_add(SIG_METRICS, ob);
    cr_assert_not_null(h);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(blk_n_streams(b), 0);
    cr_assert_eq(catalog_publish(h, b, path), 0);
}

TestSuite(pmsrc_v2, .init = v2_corpus, .fini = teardown);

#define V2_UP "http_method=\"2124799334913080733\",job=\"svc-0\""
#define V2_USER "user_id=\"timeout;BchS3nodvKu5BpfV\""

/* Rows (ms): 1700000525446 (metric "error", job svc-2), 1700001485854
 * (error_upstream, a summary), 1700001903490, 1700002095601, 1700002500241,
 * 1700002853239 ("error" again), 1700003334493, and one in 2554. The
 * expected sets are what the row scan before the index answered. */
Test(pmsrc_v2, series_names_and_values_of_a_block_without_streams)
{
    expect_series("{__name__=~\".+\"}", 1700001485854, 1700002095601,
                  "error_upstream{" V2_UP ",quantile=\"0\"," V2_USER "}\n"
                  "error_upstream{" V2_UP ",quantile=\"0.25\"," V2_USER "}\n"
                  "error_upstream_count{" V2_UP "," V2_USER "}\n"
                  "error_upstream_sum{" V2_UP "," V2_USER "}\n"
                  "private{error=\"false\",http_status_code=\"{\"error\":[],\"timeout\":{\"error\":"
                  "\"/L4vW8dlCMAm\",\"timeout\":null}}\",job=\"svc-0\",k8s_pod_name=\"a-b.c\","
                  "user_id=\"233U\"}\n"
                  "target_info{host_id=\"3\",job=\"svc-0\"}\n"
                  "target_info{host_id=\"7\",job=\"svc-0\"}\n"
                  "target_info{host_id=\"8\",job=\"svc-1\"}\n");
    expect_series("{__name__=~\".+\"}", 1700000525447, 1700001485853, "");
    expect_series("{__name__=~\".+\"}", 1700002853239, 1700002853239,
                  "error{job=\"svc-2\"}\ntarget_info{host_id=\"6\",job=\"svc-2\"}\n");
    expect_series("{user_id=\"\"}", 0, 1800000000000,
                  "error{job=\"svc-2\"}\n"
                  "target_info{host_id=\"3\",job=\"svc-0\"}\n"
                  "target_info{host_id=\"6\",job=\"svc-2\"}\n"
                  "target_info{host_id=\"7\",job=\"svc-0\"}\n"
                  "target_info{host_id=\"8\",job=\"svc-1\"}\n");
    expect_series("{job=\"nope\"}", 0, 1800000000000, "");
    expect_values("job", 1700002853239, 1700002853239, "svc-2");
    expect_values("job", INT64_MIN / 2, INT64_MAX / 2, "svc-0,svc-1,svc-2,svc-3,svc-4");
    expect_values(NULL, 1700000525447, 1700001485853, "");
}

/* ---- a sealed block's streams read in runs ---- */

#define RUNROWS 300 /* a gauge stream's rows: more than one run of blk_point_values */

/* A classic histogram "lat" (s) with two streams, its bounds changing in
 * one of them, and a gauge "level" of two streams over RUNROWS rows each,
 * ints, doubles and staleness markers, the rows of all streams interleaved. */
static struct batch *batch_streams(void)
{
    struct batch *b = batch_new(SIG_METRICS);
    cr_assert_not_null(b);
    resources(b);
    uint32_t mh = metric(b, 1, "lat", "s", MK_HISTOGRAM, 2, false, "");
    uint32_t ml = metric(b, 1, "level", "", MK_GAUGE, 0, false, "");
    struct attrs pa = put_attrs(b, KV({"path", "a"}));
    struct attrs pb = put_attrs(b, KV({"path", "b"}));
    static const double b1[] = {0.1, 0.5}, b2[] = {0.1, 0.25};
    static const uint64_t c[4][3] = {{1, 2, 3}, {2, 2, 4}, {3, 1, 5}, {0, 0, 0}};
    for (int k = 0; k < 4; k++) {
        struct blob det = hist_detail(b, c[k], 3, k < 2 ? b1 : b2, 2);
        struct point_row *p = point(b, mh, S(0), S(10 * k), pa);
        p->count = c[k][0] + c[k][1] + c[k][2];
        p->sum = 1.5 * (k + 1);
        p->has_sum = k != 1; /* no _sum sample at +10 s */
        p->detail = det;
        p->flags = k == 3 ? PROMNAME_FLAG_NO_RECORDED_VALUE : 0;
        det = hist_detail(b, c[0], 3, b1, 2);
        p = point(b, mh, S(0), S(10 * k) + 1000000, pb);
        p->count = 6;
        p->sum = 2;
        p->has_sum = true;
        p->detail = det;
    }
    for (int k = 0; k < RUNROWS; k++) {
        pt_i(b, ml, 0, S(0) + (uint64_t)k * 1000000, pa, k);
        pt_d(b, ml, 0, S(0) + (uint64_t)k * 1000000, pb, k + 0.5);
        if (k % 100 == 99) {
            b->points[b->n_rows - 1].flags = PROMNAME_FLAG_NO_RECORDED_VALUE;
        }
    }
    return b;
}

static void streams_corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    struct cat_open *h = catalog_open_add(SIG_METRICS, make_block(batch_streams()));
    oblock *ob = catalog_open_block(h);
    struct blk_meta m = {.shard = 0, .wal_seq = 1, .seal_id = 1};
    char sub[300], err[256], path[512];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "metrics"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_gt(blk_n_streams(b), 0, "the block has a stream index");
    cr_assert_eq(catalog_publish(h, b, path), 0);
}

TestSuite(pmsrc_streams, .init = streams_corpus, .fini = teardown);

Test(pmsrc_streams, classic_histogram_rows_make_their_buckets_when_the_bounds_change)
{
    /* +0 s and +10 s: bounds 0.1, 0.5 (no _sum at +10 s); +20 s: 0.1, 0.25;
     * +30 s: the staleness marker on every series the row makes */
    expect_select("{__name__=~\"lat_seconds.*\",path=\"a\"}", ALL_T,
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"a\"} 6 1700000000000\n"
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"a\"} 8 1700000010000\n"
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"a\"} 9 1700000020000\n"
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"a\"} stale 1700000030000\n"
                  "lat_seconds_bucket{" API ",le=\"0.1\",path=\"a\"} 1 1700000000000\n"
                  "lat_seconds_bucket{" API ",le=\"0.1\",path=\"a\"} 2 1700000010000\n"
                  "lat_seconds_bucket{" API ",le=\"0.1\",path=\"a\"} 3 1700000020000\n"
                  "lat_seconds_bucket{" API ",le=\"0.1\",path=\"a\"} stale 1700000030000\n"
                  "lat_seconds_bucket{" API ",le=\"0.25\",path=\"a\"} 4 1700000020000\n"
                  "lat_seconds_bucket{" API ",le=\"0.25\",path=\"a\"} stale 1700000030000\n"
                  "lat_seconds_bucket{" API ",le=\"0.5\",path=\"a\"} 3 1700000000000\n"
                  "lat_seconds_bucket{" API ",le=\"0.5\",path=\"a\"} 4 1700000010000\n"
                  "lat_seconds_count{" API ",path=\"a\"} 6 1700000000000\n"
                  "lat_seconds_count{" API ",path=\"a\"} 8 1700000010000\n"
                  "lat_seconds_count{" API ",path=\"a\"} 9 1700000020000\n"
                  "lat_seconds_count{" API ",path=\"a\"} stale 1700000030000\n"
                  "lat_seconds_sum{" API ",path=\"a\"} 1.5 1700000000000\n"
                  "lat_seconds_sum{" API ",path=\"a\"} 4.5 1700000020000\n"
                  "lat_seconds_sum{" API ",path=\"a\"} stale 1700000030000\n");
}

Test(pmsrc_streams, bucket_series_only_of_the_other_stream)
{
    expect_select("lat_seconds_bucket{path=\"b\",le=~\"0.5|\\\\+Inf\"}", MS(0), MS(15),
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"b\"} 6 1700000000001\n"
                  "lat_seconds_bucket{" API ",le=\"+Inf\",path=\"b\"} 6 1700000010001\n"
                  "lat_seconds_bucket{" API ",le=\"0.5\",path=\"b\"} 3 1700000000001\n"
                  "lat_seconds_bucket{" API ",le=\"0.5\",path=\"b\"} 3 1700000010001\n");
}

Test(pmsrc_streams, gauge_streams_read_in_runs_keep_every_value_and_marker)
{
    struct fx f;
    fx_open(&f);
    size_t n;
    const struct promql_matcher *m = matchers(&f, "level", &n);
    struct pm_set set;
    cr_assert_eq(pmsrc_select(f.s, m, n, MS(0) + 5, MS(0) + 250, &set), 0);
    cr_assert_eq(set.n, 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(set.s[i].nf, 246, "rows +5 .. +250 ms");
        for (uint32_t j = 0; j < set.s[i].nf; j++) {
            int k = (int)j + 5;
            cr_assert_eq(set.s[i].f[j].t, MS(0) + k);
            if (i == 1 && k % 100 == 99) {
                uint64_t bits;
                memcpy(&bits, &set.s[i].f[j].v, 8);
                cr_assert_eq(bits, PROMNAME_STALE_NAN_BITS, "row %d", k);
            } else {
                cr_assert_eq(set.s[i].f[j].v, i == 0 ? (double)k : k + 0.5, "row %d", k);
            }
        }
    }
    fx_close(&f);
}
