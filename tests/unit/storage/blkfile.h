/*
 * blkfile.h - what the block tests share (block_test.c, block_fmt4_test.c):
 * the test directory and writing and opening blocks in it, small
 * hand-made metric batches, and forging block files (reading and
 * patching integers, finding a footer section or a table's column,
 * recomputing every CRC after a patch). Header-only like blkgen.h; each
 * including test file gets its own directory.
 */
#ifndef MIRADB_TEST_BLKFILE_H
#define MIRADB_TEST_BLKFILE_H

#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "storage/batch.h"
#include "storage/block.h"
#include "storage/oblock.h"
#include "storage/val.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static inline void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

static inline void write_block(const oblock *ob, uint64_t rows, uint32_t shard, uint64_t seal,
                               const struct blk_wopts *o, char *path, size_t cap)
{
    struct blk_meta m = {.shard = shard, .wal_seq = 1000 + seal, .seal_id = seal};
    int rc = blk_write_ex(dir, ob, rows, &m, o, path, cap);
    cr_assert_eq(rc, 0, "blk_write: %s", strerror(-rc));
}

static inline blk *open_ok(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open(path, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "blk_open %s: %d %s", path, rc, err);
    return b;
}

static inline void put_file(const char *path, const uint8_t *p, size_t n)
{
    const char *name = strrchr(path, '/') + 1;
    cr_assert_eq(tmpdir_write_file(dir, name, p, n), 0);
}

static inline uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* Offset of footer section |id|'s body (block_int.h's layout); 0 if absent. */
static inline uint64_t section(const uint8_t *f, size_t n, uint32_t id, uint64_t *len)
{
    uint64_t foff = get64(f + n - 40), p = foff + 8;
    uint32_t nsec;
    memcpy(&nsec, f + foff, 4);
    for (uint32_t i = 0; i < nsec; i++) {
        uint32_t sid;
        p = (p + 7) / 8 * 8;
        memcpy(&sid, f + p, 4);
        *len = get64(f + p + 8);
        if (sid == id) {
            return p + 16;
        }
        p += 16 + *len;
    }
    return 0;
}

/* Recomputes every CRC: tables (in the footer's directory), footer,
 * header, trailer. */
static inline void fix_crcs(uint8_t *f, size_t n)
{
    uint64_t len, t = section(f, n, 2, &len);
    cr_assert_neq(t, 0);
    for (int k = 0; k < 3; k++) {
        uint8_t *e = f + t + 8 + 32 * k;
        put32(e + 4, libdeflate_crc32(0, f + get64(e + 8), get64(e + 16)));
    }
    uint64_t foff = get64(f + n - 40), flen = get64(f + n - 32);
    put32(f + n - 24, libdeflate_crc32(0, f + foff, flen));
    put32(f + n - 16, libdeflate_crc32(0, f + n - 40, 24));
    put32(f + 56, libdeflate_crc32(0, f, 56));
}

/* A point of gauge |metric| at |t| s with attribute k=|v| (none when NULL). */
static inline void add_point(struct batch *b, uint32_t metric, uint64_t t, const char *v)
{
    struct point_row *p = batch_add_point(b);
    cr_assert_not_null(p);
    p->metric = metric;
    p->time_ns = t * 1000000000ull;
    p->value_type = PV_DOUBLE;
    p->value.d = (double)t;
    if (v != NULL) {
        size_t off = b->heap.len;
        cr_assert_eq(val_put_key(&b->heap, "k", 1), 0);
        cr_assert_eq(val_put_str(&b->heap, v, strlen(v)), 0);
        p->attrs =
            (struct attrs){.blob = {(uint32_t)off, (uint32_t)(b->heap.len - off)}, .count = 1};
    }
}

/* A metrics batch: one resource, one scope and metric 0 named |name| of |kind|. */
static inline struct batch *metric_batch(const char *name, enum metric_kind kind)
{
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    struct metric_row *m = batch_add_metric(bt);
    cr_assert_not_null(m);
    m->scope = 0;
    m->name = (struct mstr){name, (uint32_t)strlen(name)};
    m->kind = kind;
    return bt;
}

/* Two gauges, a (id 0) and b (id 1), points out of time order:
 *   a{k=1}@5 b@1 a{k=2}@3 a{k=1}@2 b@4 a{k=1}@6
 * sorted by time into block rows 0..5 = b@1 a1@2 a2@3 b@4 a1@5 a1@6, so
 * the streams are a{k=1} rows 1,4,5; a{k=2} row 2; b rows 0,3. */
static inline struct batch *two_gauges(void)
{
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    struct scope_row *sc = batch_add_scope(bt);
    sc->resource = 0;
    const char *names[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        struct metric_row *m = batch_add_metric(bt);
        m->scope = 0;
        m->name = (struct mstr){names[i], 1};
        m->kind = MK_GAUGE;
    }
    add_point(bt, 0, 5, "1");
    add_point(bt, 1, 1, NULL);
    add_point(bt, 0, 3, "2");
    add_point(bt, 0, 2, "1");
    add_point(bt, 1, 4, NULL);
    add_point(bt, 0, 6, "1");
    return bt;
}

/* Physical column |c| of table |t| in file |f|: its start (0 if none). */
static inline uint64_t column_at(const uint8_t *f, size_t n, int t, unsigned c, uint64_t *len)
{
    uint64_t l, d = section(f, n, 2, &l);
    cr_assert_neq(d, 0);
    const uint8_t *e = f + d + 8 + 32 * t;
    cr_assert_eq(e[1], BLK_CODEC_PLAIN);
    uint64_t toff = get64(e + 8);
    *len = get64(f + toff + 8 + 16 * c + 8);
    return toff + get64(f + toff + 8 + 16 * c);
}

/* Forged file f[0, n) written to the test directory fails its open as a
 * malformed stream section. */
static inline void streams_refused(uint8_t *f, size_t n, int forge)
{
    fix_crcs(f, n);
    cr_assert_eq(tmpdir_write_file(dir, "forged-streams.blk", f, n), 0);
    char fp[600], err[256];
    snprintf(fp, sizeof(fp), "%s/forged-streams.blk", dir);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(fp, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG, "forge %d",
                 forge);
    cr_assert(strstr(err, "malformed metric stream section") != NULL, "forge %d: %s", forge, err);
}

/* An empty log batch of one resource and one scope. */
static inline struct batch *log_batch(void)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    return bt;
}

/* A log row of |bt| at time (and observed time) |t_ns|; its attributes
 * start at the heap's end. */
static inline struct log_row *log_at(struct batch *bt, uint64_t t_ns)
{
    struct log_row *r = batch_add_log(bt);
    cr_assert_not_null(r);
    r->time_ns = r->observed_ns = t_ns;
    return r;
}

/* |ob|'s first |rows| rows written at |path| with |o| (shard 0, seal
 * |seal|); the file's bytes, malloc'd. */
static inline uint8_t *write_and_read(const oblock *ob, uint64_t rows, uint64_t seal,
                                      const struct blk_wopts *o, char *path, size_t cap, size_t *n)
{
    write_block(ob, rows, 0, seal, o, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    return f;
}

/* Opens |path| (no verification cache; the root must open) and reads row
 * 0's attributes: 0, or the attrs table load's error. */
static inline int load_attrs(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "the root still opens: %s", err);
    struct log_view lv;
    rc = blk_log(b, 0, BLK_ATTRS, &lv);
    blk_unref(b);
    return rc;
}

/* Forged file g[0, n) (its CRCs recomputed) written at |path|: what
 * load_attrs gives for it. */
static inline int forged_load(const char *path, uint8_t *g, size_t n)
{
    fix_crcs(g, n);
    put_file(path, g, n);
    return load_attrs(path);
}

#endif
