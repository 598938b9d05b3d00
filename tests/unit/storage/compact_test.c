/*
 * compact_test.c - storage/compact.c and the catalog's cold-tier hooks: a
 * merge gives back exactly the rows of its inputs (every field, the
 * resource, scope and metric each names, by content), in the writer's
 * order (time, ties in input order), for every signal and for format 2
 * inputs; the cold block names its inputs and is zstd throughout; the
 * catalog swaps inputs for the output in one step and unlinks an input
 * only when its last reference goes; a boot that finds a cold block beside
 * its inputs keeps the cold block, and the watermarks survive.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "storage/adm.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/compact.h"
#include "storage/oblock.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    adm_init(1ull << 30);
    oblock_cache_limit(0);
}

TestSuite(compact, .init = fresh);

static void sigdir(enum signal s, char *out, size_t cap)
{
    cr_assert_eq(tmpdir_join(out, cap, dir, signal_name(s)), 0);
    mkdir(out, 0755);
}

static blk *open_path(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open(path, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "blk_open %s: %d %s", path, rc, err);
    return b;
}

/* A hot block of gen_oblock(sig, seed, rows) sealed into DATA/<signal>/
 * with |o| (NULL: plain, as releases before the compressed seal wrote). */
static blk *hot_block_ex(enum signal s, uint64_t seed, uint64_t rows, uint32_t shard,
                         uint64_t wal_seq, uint64_t seal_id, const struct blk_wopts *o)
{
    char sub[300], path[512];
    sigdir(s, sub, sizeof(sub));
    oblock *ob = gen_oblock(s, seed, rows, 9);
    struct blk_meta m = {.shard = shard, .wal_seq = wal_seq, .seal_id = seal_id};
    cr_assert_eq(blk_write_ex(sub, ob, oblock_rows(ob), &m, o, path, sizeof(path)), 0);
    oblock_free(ob);
    return open_path(path);
}

/* ... as the seal writes it by default (every table zstd, block.h). */
static blk *hot_block(enum signal s, uint64_t seed, uint64_t rows, uint32_t shard, uint64_t wal_seq,
                      uint64_t seal_id)
{
    struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, s);
    return hot_block_ex(s, seed, rows, shard, wal_seq, seal_id, &o);
}

/* ---- a row by content: every field, and what its ids name ---- */

static void put_s(struct vbuf *f, const void *p, size_t n)
{
    cr_assert_eq(vbuf_put_u32(f, (uint32_t)n), 0);
    cr_assert_eq(vbuf_put(f, p, n), 0);
}
#define PUT_M(f, m) put_s(f, (m).p, (m).len)
#define PUT_V(f, x) cr_assert_eq(vbuf_put(f, &(x), sizeof(x)), 0)

static void put_res(struct vbuf *f, const struct res_view *r)
{
    put_s(f, r->attrs.p, r->attrs.len);
    PUT_V(f, r->attrs.count);
    PUT_V(f, r->dropped_attrs);
    PUT_M(f, r->schema_url);
}

static void put_scope(struct vbuf *f, const struct scope_view *s)
{
    PUT_M(f, s->name);
    PUT_M(f, s->version);
    put_s(f, s->attrs.p, s->attrs.len);
    PUT_V(f, s->attrs.count);
    PUT_V(f, s->dropped_attrs);
    PUT_M(f, s->schema_url);
    put_res(f, s->resource);
}

/* Row |i| of |b| by content into |f| (reset first). */
static void row_content(blk *b, uint64_t i, struct vbuf *f)
{
    vbuf_reset(f);
    if (blk_signal(b) == SIG_LOGS) {
        struct log_view v;
        cr_assert_eq(blk_log(b, i, BLK_ALL, &v), 0);
        PUT_V(f, v.time_ns);
        PUT_V(f, v.observed_ns);
        PUT_V(f, v.severity_number);
        PUT_M(f, v.severity_text);
        PUT_V(f, v.body_type);
        PUT_M(f, v.body_str);
        PUT_M(f, v.body_val);
        put_s(f, v.attrs.p, v.attrs.len);
        PUT_V(f, v.attrs.count);
        PUT_V(f, v.dropped_attrs);
        PUT_V(f, v.flags);
        PUT_V(f, v.has_trace_id);
        PUT_V(f, v.has_span_id);
        PUT_V(f, v.trace_id);
        PUT_V(f, v.span_id);
        PUT_M(f, v.event_name);
        put_scope(f, v.scope);
    } else if (blk_signal(b) == SIG_TRACES) {
        struct span_view v;
        cr_assert_eq(blk_span(b, i, BLK_ALL, &v), 0);
        PUT_V(f, v.start_ns);
        PUT_V(f, v.end_ns);
        PUT_V(f, v.trace_id);
        PUT_V(f, v.span_id);
        PUT_V(f, v.parent_span_id);
        PUT_V(f, v.has_parent);
        PUT_M(f, v.trace_state);
        PUT_M(f, v.name);
        PUT_V(f, v.kind);
        PUT_V(f, v.flags);
        PUT_V(f, v.status_code);
        PUT_M(f, v.status_message);
        put_s(f, v.attrs.p, v.attrs.len);
        PUT_V(f, v.attrs.count);
        PUT_V(f, v.dropped_attrs);
        PUT_M(f, v.events);
        PUT_V(f, v.n_events);
        PUT_V(f, v.dropped_events);
        PUT_M(f, v.links);
        PUT_V(f, v.n_links);
        PUT_V(f, v.dropped_links);
        put_scope(f, v.scope);
    } else {
        struct point_view v;
        cr_assert_eq(blk_point(b, i, BLK_ALL, &v), 0);
        PUT_V(f, v.start_ns);
        PUT_V(f, v.time_ns);
        put_s(f, v.attrs.p, v.attrs.len);
        PUT_V(f, v.attrs.count);
        PUT_V(f, v.flags);
        PUT_V(f, v.value_type);
        PUT_V(f, v.value.i);
        PUT_V(f, v.count);
        PUT_V(f, v.sum);
        PUT_V(f, v.min);
        PUT_V(f, v.max);
        PUT_V(f, v.has_sum);
        PUT_V(f, v.has_min);
        PUT_V(f, v.has_max);
        PUT_M(f, v.detail);
        PUT_M(f, v.exemplars);
        PUT_V(f, v.n_exemplars);
        const struct metric_view *m = v.metric;
        PUT_M(f, m->name);
        PUT_M(f, m->description);
        PUT_M(f, m->unit);
        PUT_V(f, m->kind);
        PUT_V(f, m->temporality);
        PUT_V(f, m->monotonic);
        put_s(f, m->metadata.p, m->metadata.len);
        put_scope(f, v.scope);
    }
}

struct ref {
    uint64_t t;
    uint32_t in;
    uint64_t row;
};

static int cmp_ref(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    if (x->in != y->in) {
        return x->in < y->in ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

/* Cold block |c| holds exactly the rows of in[0, n), in time order, ties
 * in input order (the merge appends the inputs in order, the writer's
 * sort is stable), and names each input as a source. */
static void check_merged(blk *c, blk *const *in, size_t n)
{
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++) {
        total += blk_rows(in[k]);
    }
    cr_assert_eq(blk_rows(c), total);
    struct ref *r = calloc(total + 1, sizeof(*r));
    uint64_t j = 0;
    for (size_t k = 0; k < n; k++) {
        cr_assert_eq(blk_load(in[k], BLK_ALL), 0);
        const uint64_t *t = blk_col_time(in[k]);
        for (uint64_t i = 0; i < blk_rows(in[k]); i++) {
            r[j++] = (struct ref){t[i], (uint32_t)k, i};
        }
    }
    qsort(r, total, sizeof(*r), cmp_ref);
    struct vbuf want, got;
    vbuf_init(&want);
    vbuf_init(&got);
    for (j = 0; j < total; j++) {
        row_content(in[r[j].in], r[j].row, &want);
        row_content(c, j, &got);
        cr_assert(want.len == got.len && memcmp(want.p, got.p, want.len) == 0,
                  "cold row %llu differs from input %u row %llu", (unsigned long long)j, r[j].in,
                  (unsigned long long)r[j].row);
    }
    vbuf_fini(&want);
    vbuf_fini(&got);
    free(r);

    cr_assert_eq(blk_n_sources(c), n);
    for (uint32_t k = 0; k < n; k++) {
        struct blk_source s;
        cr_assert_eq(blk_source(c, k, &s), 0);
        cr_expect_eq(s.shard, blk_meta(in[k])->shard);
        cr_expect_eq(s.seal_id, blk_meta(in[k])->seal_id);
        cr_expect_eq(s.wal_seq, blk_meta(in[k])->wal_seq);
    }
    struct blk_source s;
    cr_expect_eq(blk_source(c, (uint32_t)n, &s), -EINVAL);
    cr_expect_eq(blk_meta(c)->shard, BLK_COLD_SHARD);
    cr_expect_eq(blk_meta(c)->wal_seq, 0);
    for (uint32_t t = 0; t < blk_n_tables(c); t++) {
        struct blk_table_info ti;
        cr_assert_eq(blk_table_info(c, t, &ti), 0);
        /* every table by column (bit 6, "v6 TABLES BY COLUMN") */
        cr_expect_eq(ti.codec, BLK_CODEC_ZSTD_COLS, "table %u", t);
    }
    struct blk_layout lay;
    blk_layout(c, &lay);
    cr_expect_eq(lay.version, BLK_VERSION);
}

static uint64_t rd64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The whole file at |path| (its length in *n). */
static uint8_t *file_bytes(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
    *n = (size_t)ftell(fp);
    uint8_t *f = malloc(*n);
    cr_assert_not_null(f);
    rewind(fp);
    cr_assert_eq(fread(f, 1, *n, fp), *n);
    fclose(fp);
    return f;
}

/* The offset of footer section |id|'s bytes in |f, n| (its length in
 * *len), or 0 when the footer has none. */
static uint64_t footer_section(const uint8_t *f, size_t n, uint32_t id, uint64_t *len)
{
    uint64_t p = rd64_at(f + n - 40) + 8, nsec = (uint32_t)rd64_at(f + p - 8);
    for (uint64_t i = 0; i < nsec; i++, p += 16 + (*len + 7) / 8 * 8) {
        *len = rd64_at(f + p + 8);
        if ((uint32_t)rd64_at(f + p) == id) {
            return p + 16;
        }
    }
    return 0;
}

/* The LEB128 at *p (advanced). */
static uint64_t uv_at(const uint8_t **p)
{
    uint64_t v = 0;
    for (unsigned sh = 0;; sh += 7) {
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << sh;
        if ((c & 0x80) == 0) {
            return v;
        }
    }
}

/* A table stored by column (codec 2, block_int.h "v6 TABLES BY COLUMN"),
 * the |n| bytes at |p|, rebuilt into the raw table |t| of |raw| bytes. */
static void inflate_by_column(const uint8_t *p, size_t n, uint8_t *t, size_t raw)
{
    const uint8_t *h = p;
    uint64_t ncols = uv_at(&h), zsum = 0;
    cr_assert(ncols > 0 && ncols <= 64);
    const uint8_t *q = h;
    for (uint64_t c = 0; c < ncols; c++) { /* the header's end: where the parts start */
        uint64_t np = uv_at(&q);
        for (uint64_t i = 0; i < np; i++) {
            uv_at(&q);
            zsum += uv_at(&q);
        }
    }
    cr_assert_eq((size_t)(q - p) + zsum, n, "the parts fill the stored bytes");
    memset(t, 0, raw);
    memcpy(t, &(uint32_t){(uint32_t)ncols}, 4);
    uint64_t at = 8 + 16 * ncols;
    for (uint64_t c = 0; c < ncols; c++) {
        at = (at + 7) / 8 * 8;
        uint64_t start = at, np = uv_at(&h);
        for (uint64_t i = 0; i < np; i++) {
            uint64_t r = uv_at(&h), z = uv_at(&h);
            if (z == r) {
                memcpy(t + at, q, r);
            } else {
                cr_assert_eq(ZSTD_decompress(t + at, r, q, z), r);
            }
            q += z;
            at += r;
        }
        memcpy(t + 8 + 16 * c, &start, 8);
        memcpy(t + 16 + 16 * c, &(uint64_t){at - start}, 8);
    }
    cr_assert_eq(at, raw);
}

/* Table |entry| of the table directory (footer section 2) of the block at
 * |path|, of |kind| and zstd (one frame or by column), inflated (its raw
 * length in *raw). */
static uint8_t *zstd_table(const char *path, unsigned entry, uint8_t kind, size_t *raw)
{
    size_t n;
    uint64_t len;
    uint8_t *f = file_bytes(path, &n);
    uint64_t p = footer_section(f, n, 2, &len);
    cr_assert_neq(p, 0, "a table directory");
    const uint8_t *e = f + p + 8 + 32 * entry;
    cr_assert_eq(e[0], kind, "table kind");
    cr_assert(e[1] == BLK_CODEC_ZSTD || e[1] == BLK_CODEC_ZSTD_COLS);
    *raw = rd64_at(e + 24);
    uint8_t *t = malloc(*raw);
    cr_assert_not_null(t);
    if (e[1] == BLK_CODEC_ZSTD_COLS) {
        inflate_by_column(f + rd64_at(e + 8), rd64_at(e + 16), t, *raw);
    } else {
        cr_assert_eq(ZSTD_decompress(t, *raw, f + rd64_at(e + 8), rd64_at(e + 16)), *raw);
    }
    free(f);
    return t;
}

/* The length of the attrs table's v6 T column (0: the lists laid out as in
 * v5) of the block at |path|, read from the file's bytes: the trailer, the
 * footer's table directory, the attrs table's zstd frame, its column
 * directory. */
static uint64_t attrs_t_len(const char *path)
{
    size_t raw;
    uint8_t *t = zstd_table(path, 1, 2, &raw);
    uint32_t ncols = (uint32_t)rd64_at(t);
    cr_assert_eq(ncols, 9, "count, list dictionary (3), keys (2), values (2), T");
    uint64_t tl = rd64_at(t + 8 + 16 * 8 + 8);
    free(t);
    return tl;
}

/* The encoding byte (INT header byte 17) of physical column |c| of the
 * zstd root table of the block at |path|. */
static unsigned root_int_encoding(const char *path, unsigned c)
{
    size_t raw;
    uint8_t *t = zstd_table(path, 0, 1, &raw);
    unsigned enc = t[rd64_at(t + 8 + 16 * c) + 17];
    free(t);
    return enc;
}

/* The u64 at |at| in footer section |id| of the block at |path|
 * (UINT64_MAX: no such section). */
static uint64_t footer_u64(const char *path, uint32_t id, uint64_t at)
{
    size_t n;
    uint64_t len;
    uint8_t *f = file_bytes(path, &n);
    uint64_t p = footer_section(f, n, id, &len);
    uint64_t v = p != 0 ? rd64_at(f + p + at) : UINT64_MAX;
    free(f);
    return v;
}

static void merge_signal(enum signal s)
{
    char sub[300], path[600];
    /* Two blocks as the seal writes them (every table zstd), one plain (a
     * data directory of an earlier release). */
    blk *in[3] = {hot_block(s, 101, 700, 0, 11, 1), hot_block(s, 102, 5000, 1, 40, 1),
                  hot_block_ex(s, 103, 1, 0, 12, 2, NULL)};
    struct blk_table_info ti;
    for (uint32_t t = 0; t < 3; t++) {
        cr_assert_eq(blk_table_info(in[1], t, &ti), 0);
        struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, s);
        bool z = (t > 0 || o.zstd_root) && (o.plain_tables & (1u << t)) == 0;
        cr_expect_eq(ti.codec, z ? BLK_CODEC_ZSTD : BLK_CODEC_PLAIN, "table %u of a sealed block",
                     t);
        cr_assert_eq(blk_table_info(in[2], t, &ti), 0);
        cr_expect_eq(ti.codec, BLK_CODEC_PLAIN, "table %u of the plain block", t);
    }
    sigdir(s, sub, sizeof(sub));
    size_t bad = 99;
    cr_assert_eq(compact_merge(sub, in, 3, 7, 3, NULL, &bad, path, sizeof(path)), 0);
    cr_expect_eq(bad, 99);
    char want[600];
    snprintf(want, sizeof(want), "%s/s65535-0000000000000007.blk", sub);
    cr_expect_str_eq(path, want);
    blk *c = open_path(path);
    check_merged(c, in, 3);
    cr_expect_eq(blk_n_sources(in[0]), 0, "a sealed block is hot");
    if (s == SIG_METRICS) {
        cr_expect_gt(blk_n_streams(c), 0, "the stream index is rebuilt");
    } else { /* logs and spans: the lists by key, one length and tag a key */
        uint64_t tl = attrs_t_len(path);
        cr_expect(tl > 0 && tl % 9 == 0, "T column of %llu bytes", (unsigned long long)tl);
    }
    /* spans: events and links coded (block_int.h, "v6 SPAN DETAIL"),
     * the events by key (bit 5, "v6 SPAN EVENTS BY KEY"); logs: bodies
     * by template ("v6 LOG BODIES"), by slot (bit 8, "v6 LOG BODY
     * SLOTS"); points: the stream index from the
     * rows ("v6 STREAMS FROM ROWS"); all: the dictionaries in one zstd
     * frame (bit 3, section 12); logs and spans: the value streams typed
     * (bit 4, "v6 TYPED VALUES") and INT byte planes (bit 7, INT
     * encodings 3 and 4); every table by column (bit 6); logs: the
     * bodies by slot (bit 8, "v6 LOG BODY SLOTS") */
    cr_expect_eq(footer_u64(path, 1, 32), 8 | 64 |
                                              (s == SIG_TRACES ? 35 | 16 | 128
                                               : s == SIG_LOGS ? 5 | 16 | 128 | 256
                                                               : 5));
    cr_expect_neq(footer_u64(path, 12, 0), UINT64_MAX);
    cr_expect_eq(footer_u64(path, 5, 0), UINT64_MAX, "no resource section of its own");
    if (s == SIG_METRICS) { /* so no stream section */
        cr_expect_eq(footer_u64(path, 9, 0), UINT64_MAX);
        /* and the times as varint deltas (blk_wopts.var_seqs) */
        cr_expect_eq(root_int_encoding(path, 0), 2);
    }
    blk_unref(c);
    for (int k = 0; k < 3; k++) {
        blk_unref(in[k]);
    }
    blk_scratch_release(); /* the writer's kept scratch (block.h) */
    cr_expect_eq(adm_in_use(), 0, "the merge returns what it charged");
}

Test(compact, merge_gives_back_every_log_record_in_time_order)
{
    merge_signal(SIG_LOGS);
}

Test(compact, merge_gives_back_every_span_in_time_order)
{
    merge_signal(SIG_TRACES);
}

Test(compact, merge_gives_back_every_point_in_time_order)
{
    merge_signal(SIG_METRICS);
}

/* A hot point block of |n| points of one cumulative sum whose start is its
 * process's, at seconds |t0| on (shard 0, seal |seal|). */
static blk *cumulative_block(uint64_t t0, uint64_t n, uint64_t seal)
{
    char sub[300], path[512];
    sigdir(SIG_METRICS, sub, sizeof(sub));
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    struct metric_row *m = batch_add_metric(bt);
    m->scope = 0;
    m->name = (struct mstr){"requests", 8};
    m->kind = MK_SUM;
    m->temporality = 2;
    for (uint64_t i = 0; i < n; i++) {
        struct point_row *r = batch_add_point(bt);
        r->metric = 0;
        r->time_ns = (t0 + i) * 1000000000ull;
        r->start_ns = 1767225540000000000ull;
        r->value_type = PV_INT;
        r->value.i = (int64_t)(100 * i);
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    struct blk_meta meta = {.shard = 0, .wal_seq = seal, .seal_id = seal};
    struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, SIG_METRICS);
    cr_assert_eq(blk_write_ex(sub, ob, n, &meta, &o, path, sizeof(path)), 0);
    oblock_free(ob);
    return open_path(path);
}

/* Points of one start merge into a block with the starts by reference
 * (footer META flag bit 9, block_int.h "v6 POINT STARTS"), every row as
 * its input's. */
Test(compact, merge_codes_shared_point_starts)
{
    char sub[300], path[600];
    blk *in[2] = {cumulative_block(1767225600, 300, 1), cumulative_block(1767225900, 200, 2)};
    sigdir(SIG_METRICS, sub, sizeof(sub));
    cr_assert_eq(compact_merge(sub, in, 2, 9, 3, NULL, NULL, path, sizeof(path)), 0);
    blk *c = open_path(path);
    check_merged(c, in, 2);
    cr_expect_eq(footer_u64(path, 1, 32), 8 | 5 | 64 | 512);
    cr_expect_eq(root_int_encoding(path, 1), 5, "the start column by reference");
    blk_unref(c);
    blk_unref(in[0]);
    blk_unref(in[1]);
    blk_scratch_release();
}

static blk *vector(const char *name)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/blocks/%s",
             getenv("MIRADB_VECTORS") ? getenv("MIRADB_VECTORS") : "tests/vectors", name);
    return open_path(path);
}

Test(compact, format_2_inputs_are_rewritten_as_format_3)
{
    static const char *const sets[][3] = {
        {"v2-logs-grams-60.blk", "v2-logs-zstd-30.blk", "v3-logs-grams-60.blk"},
        {"v2-traces-40.blk", "v2-traces-zstd-20.blk", "v3-traces-40.blk"},
        {"v2-metrics-8.blk", "v2-metrics-streams-50.blk", "v3-metrics-streams-50.blk"},
    };
    for (int k = 0; k < 3; k++) {
        char sub[300], path[600];
        blk *in[3];
        for (int i = 0; i < 3; i++) {
            in[i] = vector(sets[k][i]);
        }
        struct blk_layout lay;
        blk_layout(in[0], &lay);
        cr_assert_eq(lay.version, 2);
        sigdir(blk_signal(in[0]), sub, sizeof(sub));
        cr_assert_eq(compact_merge(sub, in, 3, 1 + (uint64_t)k, 3, NULL, NULL, path, sizeof(path)),
                     0);
        blk *c = open_path(path);
        check_merged(c, in, 3);
        blk_unref(c);
        for (int i = 0; i < 3; i++) {
            blk_unref(in[i]);
        }
    }
}

Test(compact, merge_refuses_no_input_and_mixed_signals_and_leaves_nothing)
{
    char sub[300], path[600];
    blk *in[2] = {hot_block(SIG_LOGS, 1, 10, 0, 1, 1), hot_block(SIG_TRACES, 2, 10, 0, 1, 1)};
    sigdir(SIG_LOGS, sub, sizeof(sub));
    cr_expect_eq(compact_merge(sub, in, 0, 1, 3, NULL, NULL, path, sizeof(path)), -EINVAL);
    cr_expect_eq(compact_merge(sub, in, 2, 1, 3, NULL, NULL, path, sizeof(path)), -EINVAL);
    _Atomic int stop = 1;
    cr_expect_eq(compact_merge(sub, in, 1, 1, 3, &stop, NULL, path, sizeof(path)), -ECANCELED);
    cr_expect_lt(tmpdir_file_size(sub, "s65535-0000000000000001.blk"), 0);
    cr_expect_lt(tmpdir_file_size(sub, "s65535-0000000000000001.blk.tmp"), 0);
    blk_unref(in[0]);
    blk_unref(in[1]);
}

/* Rows alike but for their time (one per microsecond) compress far below
 * 8 bytes a row: the reader must bound a delta column by the zstd
 * table's raw length, not by the file size alone. */
Test(compact, a_cold_block_smaller_than_8_bytes_a_row_opens)
{
    char sub[300], path[600], hpath[600];
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    struct res_row *r = batch_add_resource(bt);
    r->schema_url = (struct mstr){"", 0};
    struct scope_row *sc = batch_add_scope(bt);
    sc->name = (struct mstr){"s", 1};
    for (int i = 0; i < 20000; i++) {
        struct log_row *l = batch_add_log(bt);
        l->time_ns = 1767225600000000000ull + 1000u * (uint64_t)i;
        l->body_type = VAL_STR;
        l->body_str = (struct mstr){"same line", 9};
    }
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    sigdir(SIG_LOGS, sub, sizeof(sub));
    struct blk_meta m = {.shard = 0, .wal_seq = 1, .seal_id = 1};
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, hpath, sizeof(hpath)), 0);
    oblock_free(ob);
    blk *in = open_path(hpath);
    cr_assert_eq(compact_merge(sub, &in, 1, 1, 3, NULL, NULL, path, sizeof(path)), 0);
    blk *c = open_path(path);
    cr_expect_lt(blk_file_bytes(c), 8 * 20000, "%llu bytes", (unsigned long long)blk_file_bytes(c));
    check_merged(c, &in, 1);
    blk_unref(c);
    blk_unref(in);
}

static uint64_t snap_rows(const struct cat_snap *sn)
{
    uint64_t n = 0;
    for (size_t i = 0; i < sn->n_blocks; i++) {
        n += blk_rows(sn->blocks[i]);
    }
    return n;
}

static uint64_t ids[4]; /* the next seal ids of the last load */

/* Loads DATA/logs/ into the catalog (one shard index per |n| below). */
static void load(int n, uint64_t *wm)
{
    uint64_t q = 0;
    char err[256];
    cr_assert_eq(catalog_load(SIG_LOGS, n, wm, ids, &q, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(q, 0);
}

Test(compact, replace_swaps_in_one_step_and_unlinks_an_input_after_its_last_reader)
{
    char sub[300], path[600];
    uint64_t wm[2];
    blk_unref(hot_block(SIG_LOGS, 5, 300, 0, 21, 1));
    blk_unref(hot_block(SIG_LOGS, 6, 200, 1, 33, 1));
    load(2, wm);
    struct cat_snap before, after;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &before), 0);
    cr_assert_eq(before.n_blocks, 2);
    sigdir(SIG_LOGS, sub, sizeof(sub));
    uint64_t id = catalog_cold_id_take();
    cr_expect_eq(id, 1);
    cr_assert_eq(compact_merge(sub, before.blocks, 2, id, 3, NULL, NULL, path, sizeof(path)), 0);
    blk *c = open_path(path);
    cr_assert_eq(catalog_replace(SIG_LOGS, before.blocks, 2, c, path), 0);

    cr_assert_eq(catalog_snapshot(SIG_LOGS, &after), 0);
    cr_assert_eq(after.n_blocks, 1, "the inputs are out, the cold block in");
    cr_expect_eq(after.blocks[0], c);
    cr_expect_eq(snap_rows(&before), 500);
    cr_expect_eq(snap_rows(&after), 500);
    struct cat_tier t[2];
    catalog_get_tiers(SIG_LOGS, t);
    cr_expect_eq(t[0].blocks, 0);
    cr_expect_eq(t[1].blocks, 1);
    cr_expect_eq(t[1].rows, 500);
    struct cat_stats st;
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 1);
    cr_expect_eq(st.rows, 500);
    cr_expect_eq(st.block_bytes, (uint64_t)tmpdir_file_size(sub, "s65535-0000000000000001.blk"));

    /* The earlier snapshot still reads its inputs; their files stay. */
    struct log_view v;
    cr_expect_eq(blk_log(before.blocks[1], 199, BLK_ALL, &v), 0);
    cr_expect_gt(tmpdir_file_size(sub, "s0000-0000000000000001.blk"), 0);
    cr_expect_gt(tmpdir_file_size(sub, "s0001-0000000000000001.blk"), 0);
    catalog_snap_release(&before);
    cr_expect_lt(tmpdir_file_size(sub, "s0000-0000000000000001.blk"), 0, "unlinked at release");
    cr_expect_lt(tmpdir_file_size(sub, "s0001-0000000000000001.blk"), 0, "unlinked at release");

    /* A second swap of inputs that are gone changes nothing. */
    blk *again = open_path(path);
    cr_expect_eq(catalog_replace(SIG_LOGS, after.blocks, 1, again, path), 0,
                 "the cold block itself is listed");
    catalog_snap_release(&after);
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 1);
    catalog_fini();
}

Test(compact, replace_refuses_inputs_the_catalog_no_longer_lists)
{
    char sub[300], path[600];
    uint64_t wm[1];
    blk_unref(hot_block(SIG_LOGS, 5, 30, 0, 2, 1));
    blk_unref(hot_block(SIG_LOGS, 6, 20, 0, 3, 2));
    load(1, wm);
    struct cat_snap sn;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    sigdir(SIG_LOGS, sub, sizeof(sub));
    cr_assert_eq(compact_merge(sub, sn.blocks, 2, 1, 3, NULL, NULL, path, sizeof(path)), 0);
    catalog_forget(sn.blocks[0]); /* as quarantine does */
    blk *c = open_path(path);
    cr_expect_eq(catalog_replace(SIG_LOGS, sn.blocks, 2, c, path), -ESTALE);
    struct cat_stats st;
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 1);
    cr_expect_eq(st.rows, 20);
    blk_unref(c);
    catalog_snap_release(&sn);
    cr_expect_gt(tmpdir_file_size(sub, "s0000-0000000000000002.blk"), 0, "not unlinked");
    catalog_fini();
}

Test(compact, a_boot_that_finds_a_cold_block_beside_its_inputs_keeps_each_row_once)
{
    char sub[300], path[600];
    uint64_t wm[2];
    blk *in[2] = {hot_block(SIG_LOGS, 8, 120, 0, 17, 3), hot_block(SIG_LOGS, 9, 80, 1, 25, 6)};
    blk *other = hot_block(SIG_LOGS, 10, 40, 0, 30, 4); /* not compacted */
    sigdir(SIG_LOGS, sub, sizeof(sub));
    cr_assert_eq(compact_merge(sub, in, 2, 5, 3, NULL, NULL, path, sizeof(path)), 0);
    blk_unref(in[0]);
    blk_unref(in[1]);
    blk_unref(other);
    /* The crash came after the rename, before the inputs went. */
    load(2, wm);
    cr_expect_eq(wm[0], 30);
    cr_expect_eq(wm[1], 25, "the cold block's sources keep shard 1's watermark");
    cr_expect_lt(tmpdir_file_size(sub, "s0000-0000000000000003.blk"), 0, "input removed");
    cr_expect_lt(tmpdir_file_size(sub, "s0001-0000000000000006.blk"), 0, "input removed");
    cr_expect_gt(tmpdir_file_size(sub, "s0000-0000000000000004.blk"), 0, "not an input");
    struct cat_stats st;
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 2);
    cr_expect_eq(st.rows, 240);
    cr_expect_eq(st.cold_inputs_removed, 2);
    cr_expect_eq(catalog_cold_id_take(), 6, "past every cold block found");
    catalog_fini();

    /* With the inputs gone, the watermarks and seal ids stay (retained
     * files and sources): shard 1's next block must not be named as an
     * input of the cold block, or the boot after would remove it. */
    catalog_init(dir);
    load(2, wm);
    cr_expect_eq(wm[0], 30);
    cr_expect_eq(wm[1], 25);
    cr_expect_eq(ids[0], 5);
    cr_expect_eq(ids[1], 7, "next seal id %llu", (unsigned long long)ids[1]);
    catalog_fini();
}

Test(compact, persisted_watermarks_outlive_the_cold_block_retention_deletes)
{
    char sub[300];
    uint64_t wm[2];
    sigdir(SIG_LOGS, sub, sizeof(sub));
    struct blk_source src[3] = {{0, 1, 14}, {1, 2, 9}, {0, 3, 12}};
    cr_assert_eq(catalog_persist_watermarks(SIG_LOGS, src, 3), 0);
    struct blk_source lower = {0, 4, 5};
    cr_assert_eq(catalog_persist_watermarks(SIG_LOGS, &lower, 1), 0, "never lowered");
    load(2, wm);
    cr_expect_eq(wm[0], 14);
    cr_expect_eq(wm[1], 9);
    catalog_fini();
}

Test(compact, a_window_is_settled_once_its_end_is_compact_after_past)
{
    uint64_t h = 3600000000000ull, t = 10 * h; /* now: 10 h */
    cr_expect(compact_window_settled(0, h, t));
    cr_expect(compact_window_settled(8 * h - 1, h, t), "window [7h, 8h) ended 2 h ago");
    cr_expect(compact_window_settled(8 * h, h, t), "window [8h, 9h) ended 1 h ago");
    cr_expect_not(compact_window_settled(9 * h, h, t), "window [9h, 10h) ended now");
    cr_expect_not(compact_window_settled(8 * h, h, t - 1));
    cr_expect_not(compact_window_settled(UINT64_MAX - 3, h, t), "rows dated near 2^64");
    cr_expect_not(compact_window_settled(UINT64_MAX, 1000000000ull, UINT64_MAX - 1));
    cr_expect_not(compact_window_settled(0, h, h - 1), "now before compact_after");
    cr_expect_not(compact_window_settled(0, 0, t), "compact_after 0: off");
}

/* ---- the merge's memory, and stepping back for ingest ---- */

/* The row counts of many inputs, across MERGE_CHUNK's (4096) edges. */
static const uint64_t edge_rows[] = {1, 4095, 4096, 4097, 8191, 8193, 2, 12288, 100};
#define N_EDGE (sizeof(edge_rows) / sizeof(edge_rows[0]))

Test(compact, a_merge_of_many_inputs_across_chunk_edges_keeps_every_row_once_in_time_order)
{
    char sub[300], path[600];
    for (int s = 1; s <= SIG_COUNT; s++) {
        blk *in[N_EDGE];
        for (size_t k = 0; k < N_EDGE; k++) {
            in[k] =
                hot_block((enum signal)s, 300 + k, edge_rows[k], (uint32_t)(k % 3), 5 + k, 1 + k);
            blk_drop_tables(in[k]); /* as the catalog holds a sealed block */
        }
        sigdir((enum signal)s, sub, sizeof(sub));
        cr_assert_eq(
            compact_merge(sub, in, N_EDGE, 20 + (uint64_t)s, 3, NULL, NULL, path, sizeof(path)), 0);
        for (size_t k = 0; k < N_EDGE; k++) {
            cr_expect(!blk_holds_tables(in[k]), "input %zu: what the merge loaded is freed", k);
        }
        blk *c = open_path(path);
        check_merged(c, in, N_EDGE);
        cr_expect_eq(blk_n_sources(c), N_EDGE);
        blk_unref(c);
        for (size_t k = 0; k < N_EDGE; k++) {
            blk_unref(in[k]);
        }
    }
    blk_scratch_release();
    cr_expect_eq(adm_in_use(), 0, "the merges return what they charged");
}

/*
 * Inputs many times a merge's cap: each group compact_group_cap allows
 * (as compact.c's pass forms them: whole inputs, oldest first, at least
 * one) holds at most budget / COMPACT_MEM_DIV at its peak, and the groups
 * together give back every row once. (An empty open block and its
 * writer's scratch are about 5 MiB whatever the input: the budget is
 * large enough for groups of several inputs.)
 */
Test(compact, groups_within_the_cap_hold_at_most_an_eighth_of_the_budget)
{
    const uint64_t budget = 160ull << 20;
    adm_init(budget);
    char sub[300], path[600];
    enum { N = 12 };
    blk *in[N];
    uint64_t total = 0;
    for (int k = 0; k < N; k++) {
        in[k] = hot_block(SIG_LOGS, 400 + k, 6000, 0, 10 + k, 1 + k);
        total += blk_file_bytes(in[k]);
    }
    blk_scratch_release();
    sigdir(SIG_LOGS, sub, sizeof(sub));
    uint64_t first = compact_group_cap(SIG_LOGS, 1ull << 30, budget);
    cr_expect_eq(first, budget / COMPACT_MEM_DIV / 16, "before any merge: 16x its input bytes");
    /* A first merge (one input) measures the peak per input byte. */
    cr_assert_eq(compact_merge(sub, in, 1, 1, 3, NULL, NULL, path, sizeof(path)), 0);
    blk_unref(open_path(path));
    blk_scratch_release();
    struct compact_stats st;
    compact_get_stats(&st);
    cr_assert_gt(st.last_peak_bytes, 4 * st.last_bytes_in,
                 "a merge holds several times its input (%llu for %llu)",
                 (unsigned long long)st.last_peak_bytes, (unsigned long long)st.last_bytes_in);
    uint64_t cap = compact_group_cap(SIG_LOGS, 1ull << 30, budget);
    cr_assert_lt(3 * cap, total - blk_file_bytes(in[0]), "the inputs are several caps");
    cr_expect_eq(compact_group_cap(SIG_LOGS, cap / 2, budget), cap / 2, "the target when lower");
    cr_expect_eq(compact_group_cap(SIG_LOGS, 7, 0), 7, "no budget: the target");
    size_t groups = 0;
    uint64_t rows = 0;
    for (size_t i = 1; i < N;) {
        size_t n = 0;
        uint64_t bytes = 0;
        while (i + n < N && (n == 0 || bytes + blk_file_bytes(in[i + n]) <= cap)) {
            bytes += blk_file_bytes(in[i + n]);
            n++;
        }
        cr_assert_eq(compact_merge(sub, in + i, n, 100 + groups, 3, NULL, NULL, path, sizeof(path)),
                     0);
        compact_get_stats(&st);
        cr_expect_leq(st.last_peak_bytes, budget / COMPACT_MEM_DIV,
                      "group %zu (%zu inputs, %llu bytes) held %llu", groups, n,
                      (unsigned long long)bytes, (unsigned long long)st.last_peak_bytes);
        cr_expect_eq(st.last_bytes_in, bytes);
        blk *c = open_path(path);
        check_merged(c, in + i, n);
        rows += blk_rows(c);
        blk_unref(c);
        blk_scratch_release();
        groups++;
        i += n;
    }
    cr_expect_geq(groups, 3);
    cr_expect_lt(groups, N - 1, "groups of more than one input");
    cr_expect_eq(rows, (N - 1) * 6000ull);
    for (int k = 0; k < N; k++) {
        blk_unref(in[k]);
    }
    cr_expect_eq(adm_in_use(), 0);
}

static size_t blk_files(const char *sub)
{
    size_t n = 0;
    char name[64];
    for (int id = 1; id < 64; id++) {
        snprintf(name, sizeof(name), "s65535-%016x.blk", id);
        n += tmpdir_file_size(sub, name) >= 0;
        snprintf(name, sizeof(name), "s65535-%016x.blk.tmp", id);
        n += tmpdir_file_size(sub, name) >= 0;
    }
    return n;
}

/* Too little room before admission stops: the merge waits, then gives up
 * (-EAGAIN) leaving nothing behind; with room it goes through. */
Test(compact, a_merge_waits_for_room_and_gives_up_leaving_nothing)
{
    const uint64_t budget = 64ull << 20;
    adm_init(budget);
    char sub[300], path[600];
    blk *in[2] = {hot_block(SIG_LOGS, 7, 2000, 0, 3, 1), hot_block(SIG_LOGS, 8, 2000, 1, 4, 1)};
    blk_scratch_release();
    uint64_t need = 16 * (blk_file_bytes(in[0]) + blk_file_bytes(in[1]));
    uint64_t held = adm_in_use();
    adm_charge(budget - held - need / 2); /* ingest leaves half of what the merge needs */
    sigdir(SIG_LOGS, sub, sizeof(sub));
    struct compact_stats st;
    compact_get_stats(&st);
    uint64_t yields = st.yields;
    cr_expect_eq(compact_merge(sub, in, 2, 1, 3, NULL, NULL, path, sizeof(path)), -EAGAIN);
    compact_get_stats(&st);
    cr_expect_eq(st.yields, yields, "it never started: nothing to give up");
    cr_expect_geq(st.deferrals, 1);
    cr_expect_eq(blk_files(sub), 0, "nothing written");
    cr_expect_eq(adm_in_use(), budget - need / 2, "nothing kept");
    adm_uncharge(budget - held - need / 2);
    cr_assert_eq(compact_merge(sub, in, 2, 2, 3, NULL, NULL, path, sizeof(path)), 0,
                 "with room it goes through");
    blk *c = open_path(path);
    check_merged(c, in, 2);
    blk_unref(c);
    blk_unref(in[0]);
    blk_unref(in[1]);
    blk_scratch_release();
    cr_expect_eq(adm_in_use(), 0);
}

static _Atomic int refusing;

/* Ingest being refused memory the whole time (adm_refusals moves). */
static void *refuse_main(void *arg)
{
    (void)arg;
    while (atomic_load(&refusing)) {
        cr_assert(!adm_try_charge(1ull << 62));
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

Test(compact, a_merge_gives_up_while_admission_refuses_ingest)
{
    adm_init(1ull << 30); /* room enough: only the refusals stop it */
    char sub[300], path[600];
    blk *in[2] = {hot_block(SIG_LOGS, 9, 9000, 0, 3, 1), hot_block(SIG_LOGS, 10, 9000, 1, 4, 1)};
    blk_scratch_release();
    sigdir(SIG_LOGS, sub, sizeof(sub));
    blk_drop_tables(in[0]);
    blk_drop_tables(in[1]);
    uint64_t held = adm_in_use();
    atomic_store(&refusing, 1);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, refuse_main, NULL), 0);
    int rc = compact_merge(sub, in, 2, 1, 3, NULL, NULL, path, sizeof(path));
    atomic_store(&refusing, 0);
    pthread_join(t, NULL);
    cr_expect_eq(rc, -EAGAIN);
    cr_expect_eq(blk_files(sub), 0, "nothing written");
    blk_drop_tables(in[0]); /* what the merge loaded of its inputs */
    blk_drop_tables(in[1]);
    cr_expect_eq(adm_in_use(), held, "everything given back");
    cr_expect_eq(compact_merge(sub, in, 2, 2, 3, NULL, NULL, path, sizeof(path)), 0,
                 "once the refusals stop it goes through");
    blk_unref(in[0]);
    blk_unref(in[1]);
    blk_scratch_release();
}
