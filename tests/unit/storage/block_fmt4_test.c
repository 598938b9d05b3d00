/*
 * block_fmt4_test.c - format 4's encodings byte for byte (block_int.h):
 * the varint stream index, sparse metric values, coded metric detail,
 * varint delta INT columns and parent span ids as row references, each
 * read back exactly, and forged files of each refused.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkfile.h"

TestSuite(block_fmt4, .init = fresh_dir);

/* ---- format 4's metric encodings ---- */

/* The two gauges' stream index as varints: per stream (metric id delta,
 * row count), then each stream's first row and the gaps less one. */
Test(block_fmt4, format_4_codes_the_stream_index_as_varints)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 6, 0, 80, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t len, at = section(f, n, 9, &len);
    cr_assert_neq(at, 0);
    static const uint8_t want[] = {3, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0,
                                   /* a{k=1} 3 rows, a{k=2} 1, b 2 */
                                   0, 3, 0, 1, 1, 2,
                                   /* rows 1,4,5; 2; 0,3 */
                                   1, 2, 0, 2, 0, 2};
    cr_assert_eq(len, sizeof(want));
    cr_assert_arr_eq(f + at, want, sizeof(want));
    /* forgeries: an unknown codec, a body length that is not the body's,
     * counts that do not add up to the rows, a row past the block */
    for (int forge = 0; forge < 4; forge++) {
        uint8_t *g = malloc(n);
        memcpy(g, f, n);
        if (forge == 0) {
            g[at + 4] = 4; /* (2 and 3 are format 6's by-row bodies) */
        } else if (forge == 1) {
            g[at + 8] = 11;
        } else if (forge == 2) {
            g[at + 16 + 5] = 3;
        } else {
            g[at + 16 + 11] = 5;
        }
        streams_refused(g, n, forge);
        free(g);
    }
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

static void add_hist(struct batch *b, uint64_t t, const uint64_t *counts, uint32_t nc,
                     const double *bounds, uint32_t nb, double sum, int has, double mn, double mx)
{
    struct point_row *p = batch_add_point(b);
    cr_assert_not_null(p);
    p->metric = 0;
    p->time_ns = t * 1000000000ull;
    size_t off = b->heap.len;
    cr_assert_eq(vbuf_put_u32(&b->heap, nc), 0);
    for (uint32_t i = 0; i < nc; i++) {
        cr_assert_eq(vbuf_put_u64(&b->heap, counts[i]), 0);
        p->count += counts[i];
    }
    cr_assert_eq(vbuf_put_u32(&b->heap, nb), 0);
    for (uint32_t i = 0; i < nb; i++) {
        cr_assert_eq(vbuf_put_f64(&b->heap, bounds[i]), 0);
    }
    p->detail = (struct blob){(uint32_t)off, (uint32_t)(b->heap.len - off)};
    p->sum = sum;
    p->min = mn;
    p->max = mx;
    p->has_sum = (has & 1) != 0;
    p->has_min = (has & 2) != 0;
    p->has_max = (has & 4) != 0;
}

/* A histogram (metric 0, one stream) at 1..4 s whose bounds change from
 * {1, 2} to {1, 2, 4} at 3 s (the 2 s point has a sum but no min or max,
 * the 4 s point nothing), then a gauge (metric 1) at 5 s (-0.0) and 6 s
 * (a NaN). */
static struct batch *hist_points(void)
{
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    struct metric_row *m = batch_add_metric(bt);
    m->name = (struct mstr){"h", 1};
    m->kind = MK_HISTOGRAM;
    m = batch_add_metric(bt);
    m->name = (struct mstr){"g", 1};
    m->kind = MK_GAUGE;
    static const double b2[] = {1, 2}, b3[] = {1, 2, 4};
    add_hist(bt, 1, (const uint64_t[]){3, 0, 7}, 3, b2, 2, 12.5, 7, 0.5, 1.5);
    add_hist(bt, 2, (const uint64_t[]){1, 1, 0}, 3, b2, 2, 2.5, 1, 0, 0);
    add_hist(bt, 3, (const uint64_t[]){0, 200, 1, 1}, 4, b3, 3, 300, 7, 1, 5);
    add_hist(bt, 4, (const uint64_t[]){0, 0, 0, 0}, 4, b3, 3, 0, 0, 0, 0);
    add_point(bt, 1, 5, NULL);
    bt->points[4].value.d = -0.0;
    add_point(bt, 1, 6, NULL);
    uint64_t nan = 0x7ff8000000000001ull;
    memcpy(&bt->points[5].value.d, &nan, 8);
    return bt;
}

/* Root columns (format 4): value, sum, min and max each a bitmap of the
 * rows whose bits are not all zero, then only those values; detail: the
 * entries varint coded, the bounds as codes into the f64 list dictionary
 * (two lists: the bounds changed mid-stream). The views hand out what the
 * rows gave, byte for byte. */
Test(block_fmt4, format_4_stores_metric_values_sparse_and_detail_coded)
{
    struct batch *bt = hist_points();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 6, 0, 81, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    /* root: time, start, metric, type, value (bitmap, values), count,
     * sum (2), min (2), max (2), has */
    static const struct {
        unsigned col;
        uint8_t bits;
        double v[3];
        unsigned nv;
    } sparse[] = {{4, 0x30, {-0.0, 0}, 2},
                  {7, 0x07, {12.5, 2.5, 300}, 3},
                  {9, 0x05, {0.5, 1}, 2},
                  {11, 0x05, {1.5, 5}, 2}};
    for (unsigned k = 0; k < 4; k++) {
        uint64_t len, at = column_at(f, n, 0, sparse[k].col, &len);
        cr_assert_eq(len, 1, "column %u", sparse[k].col);
        cr_assert_eq(f[at], sparse[k].bits, "column %u", sparse[k].col);
        at = column_at(f, n, 0, sparse[k].col + 1, &len);
        cr_assert_eq(len, 8 * sparse[k].nv, "column %u", sparse[k].col);
        if (k == 0) {
            cr_assert_eq(get64(f + at), 0x8000000000000000ull, "-0.0");
            cr_assert_eq(get64(f + at + 8), 0x7ff8000000000001ull, "the NaN's bits");
        } else {
            cr_assert_arr_eq(f + at, sparse[k].v, len);
        }
    }
    /* detail: flags, entries (offsets, data), exemplars (2), n_exemplars,
     * the f64 lists (offsets, data) */
    uint64_t len, at = column_at(f, n, 2, 6, &len);
    cr_assert_eq(get64(f + at), 3, "2 lists + 1 offsets");
    at = column_at(f, n, 2, 7, &len);
    static const double lists[] = {1, 2, 1, 2, 4};
    cr_assert_eq(len, sizeof(lists));
    cr_assert_arr_eq(f + at, lists, sizeof(lists));
    at = column_at(f, n, 2, 2, &len);
    static const uint8_t entries[] = {1, 3, 3, 0,    7, 0,       /* {3, 0, 7} code 0 */
                                      1, 3, 1, 1,    0, 0,       /* {1, 1, 0} code 0 */
                                      1, 4, 0, 0xc8, 1, 1, 1, 1, /* {0, 200, 1, 1} code 1 */
                                      1, 4, 0, 0,    0, 0, 1};   /* {0, 0, 0, 0} code 1 */
    cr_assert_eq(len, sizeof(entries));
    cr_assert_arr_eq(f + at, entries, sizeof(entries));
    blk *b = open_ok(path);
    check_block(b, ob, 6);
    struct point_view pv;
    cr_assert_eq(blk_point(b, 1, BLK_ALL, &pv), 0);
    cr_assert(pv.sum == 2.5 && pv.has_sum && !pv.has_min && !pv.has_max && pv.min == 0);
    cr_assert_eq(pv.detail.len, 4 + 24 + 4 + 16);
    blk_unref(b);

    /* forgeries: a list code past the dictionary fails the detail table
     * (the root still reads); a value bit past the rows, or more bits
     * than values, fails the root at open */
    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    g[at + sizeof(entries) - 1] = 2;
    fix_crcs(g, n);
    put_file(path, g, n);
    char err[256];
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(blk_point(b, 3, BLK_ROOT, &pv), 0);
    cr_assert_eq(pv.time_ns, 4000000000ull);
    cr_assert_eq(blk_point(b, 3, BLK_DETAIL, &pv), -EBADMSG);
    blk_unref(b);
    uint64_t vat = column_at(f, n, 0, 4, &len);
    for (int forge = 0; forge < 2; forge++) {
        memcpy(g, f, n);
        g[vat] = forge == 0 ? 0x70 : 0x31;
        fix_crcs(g, n);
        put_file(path, g, n);
        b = NULL;
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG,
                     "forge %d", forge);
    }
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* Times in bursts (10 points 1 us apart, bursts 100 s apart): the gaps
 * between bursts need 8-byte deltas, so the time column is varint deltas
 * (format 4, encoding 2: 8 bytes of first value, then 1 byte for each
 * 1 us gap and 5 for each 100 s one) and reads back exactly; a varint
 * that runs past the column, or a column with bytes left over, fails the
 * root at open. */
Test(block_fmt4, format_4_codes_bursty_times_as_varint_deltas)
{
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    struct metric_row *m = batch_add_metric(bt);
    m->name = (struct mstr){"g", 1};
    m->kind = MK_GAUGE;
    for (unsigned i = 0; i < 100; i++) {
        add_point(bt, 0, 1, NULL);
        bt->points[i].time_ns =
            1700000000000000000ull + (i / 10) * 100000000000ull + (i % 10) * 1000;
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 100, 0, 82, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t len, at = column_at(f, n, 0, 0, &len);
    cr_assert_eq(f[at + 17], 2, "varint delta encoding");
    cr_assert_eq(f[at + 16], 0, "width");
    cr_assert_eq(get64(f + at), 100);
    cr_assert_eq(get64(f + at + 24), 1700000000000000000ull, "the first time");
    cr_assert_eq(len, 24 + 8 + 90 * 2 + 9 * 6, "zz(1000) takes 2 bytes, zz(1e11 - 9000) 6");
    cr_assert_eq(f[at + 32], 0xd0, "zz(1000) = 2000 = 0xd0 0x0f");
    cr_assert_eq(f[at + 33], 0x0f);
    blk *b = open_ok(path);
    check_block(b, ob, 100);
    blk_unref(b);
    uint8_t *g = malloc(n);
    for (int forge = 0; forge < 2; forge++) {
        memcpy(g, f, n);
        if (forge == 0) {
            g[at + len - 1] |= 0x80; /* the last varint runs on */
        } else {
            g[at + 32] = 0x01; /* 0x01, 0x0f: two varints, the count's last one left over */
        }
        fix_crcs(g, n);
        put_file(path, g, n);
        char err[256];
        b = NULL;
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG,
                     "forge %d", forge);
    }
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

static void add_span(struct batch *b, uint64_t t, uint8_t id, uint8_t parent)
{
    struct span_row *s = batch_add_span(b);
    cr_assert_not_null(s);
    s->start_ns = s->end_ns = t * 1000000000ull;
    memset(s->trace_id, 7, 16);
    memset(s->span_id, id, 8);
    memset(s->parent_span_id, parent, 8);
    s->has_parent = parent != 0;
    s->name = (struct mstr){"op", 2};
}

/* Format 4's trace ids: a dictionary of 16-byte entries (an entry of
 * another length fails the root at open). Parent ids: references to the parent's row (2 + zz(row -
 * parent row)) when the parent is a span of the block, before or after
 * the child or the span itself; 0 for no parent; 1 and the id raw for a
 * parent outside the block. A reference outside the block, or raw ids
 * that do not match the references, fail the root at open. */
Test(block_fmt4, format_4_stores_parent_ids_as_row_references)
{
    struct batch *bt = batch_new(SIG_TRACES);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    add_span(bt, 1, 0x11, 0);
    add_span(bt, 2, 0x22, 0x11);
    add_span(bt, 3, 0x33, 0x99);
    add_span(bt, 4, 0x44, 0x55);
    add_span(bt, 5, 0x55, 0x55);
    memset(bt->spans[4].trace_id, 8, 16); /* a second trace */
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 5, 0, 83, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    /* root: start, duration, scope, trace ids (codes, offsets, data), span,
     * parent refs, parent raw; two traces: codes 0 0 0 0 1, two entries */
    uint64_t len, at = column_at(f, n, 0, 3, &len);
    static const uint8_t codes[] = {0, 0, 0, 0, 1};
    cr_assert(len == 24 + 5 && get64(f + at) == 5 && f[at + 16] == 1);
    cr_assert_arr_eq(f + at + 24, codes, 5);
    uint64_t oat = column_at(f, n, 0, 4, &len);
    cr_assert_eq(get64(f + oat), 3, "2 trace ids + 1 offsets");
    cr_assert(f[oat + 16] == 1 && f[oat + 17] == 0 && f[oat + 25] == 16, "offsets 0 16 32");
    at = column_at(f, n, 0, 5, &len);
    uint8_t tid[32];
    memset(tid, 7, 16);
    memset(tid + 16, 8, 16);
    cr_assert_eq(len, 32);
    cr_assert_arr_eq(f + at, tid, 32);
    at = column_at(f, n, 0, 7, &len);
    static const uint8_t refs[] = {0, 4, 1, 3, 2};
    cr_assert_eq(len, 24 + sizeof(refs));
    cr_assert(get64(f + at) == 5 && get64(f + at + 8) == 0 && f[at + 16] == 1 && f[at + 17] == 0);
    cr_assert_arr_eq(f + at + 24, refs, sizeof(refs));
    uint64_t rat = column_at(f, n, 0, 8, &len);
    static const uint8_t raw[8] = {0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99, 0x99};
    cr_assert_eq(len, 8);
    cr_assert_arr_eq(f + rat, raw, 8);
    blk *b = open_ok(path);
    check_block(b, ob, 5);
    blk_unref(b);
    uint8_t *g = malloc(n);
    for (int forge = 0; forge < 4; forge++) {
        memcpy(g, f, n);
        if (forge == 3) {
            g[oat + 25] = 15; /* trace id entries of 15 and 17 bytes */
        } else if (forge == 0) {
            g[at + 24 + 1] = 6; /* row 1's parent at row -1 */
        } else if (forge == 1) {
            g[at + 24 + 4] = 2 + 9; /* row 4's parent at row 9 (of 5): zz(4 - 9) = 9 */
        } else {
            g[at + 24 + 0] = 1; /* two raw references, one raw id */
        }
        fix_crcs(g, n);
        put_file(path, g, n);
        char err[256];
        b = NULL;
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG,
                     "forge %d", forge);
    }
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}
