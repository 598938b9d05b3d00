/*
 * block_zcols_test.c - format 6's span tables by column (block_int.h, "v6
 * TABLES BY COLUMN"; blk_wopts.zstd_cols, META flag bit 6): each zstd
 * table stored as one frame a column rebuilds exactly the raw table one
 * frame gives, every row reads back, other signals and plain tables are
 * written as without the option, and forged tables are refused.
 */
#include <zstd.h>

#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_zcols, .init = fresh_dir);

#define ROWS 400
#define BIG 3000

/* The cold tier's span options, with or without the tables by column. */
static struct blk_wopts cold(bool by_col)
{
    return (struct blk_wopts){.codec = BLK_CODEC_ZSTD,
                              .zstd_root = true,
                              .attrs_by_key = true,
                              .typed_vals = true,
                              .span_refs = true,
                              .events_by_key = true,
                              .var_seqs = true,
                              .dicts_zstd = true,
                              .zstd_cols = by_col};
}

/* Table |t|'s directory entry (footer section 2) in f[0, n). */
static uint8_t *tdir(uint8_t *f, size_t n, int t)
{
    uint64_t len, d = section(f, n, 2, &len);
    cr_assert_neq(d, 0);
    return f + d + 8 + 32 * t;
}

static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t len, m = section(f, n, 1, &len);
    cr_assert_neq(m, 0);
    return get64(f + m + 32);
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

/* A stored table by column, parsed: its column count, each column's part
 * count, each part's raw and stored length, the offset of its stored
 * bytes (from the table's start) and of its two lengths' uv. */
struct zc {
    uint64_t ncols, np[64], rlen[64][64], zlen[64][64], at[64][64], hr[64][64], hz[64][64];
};

static void zc_parse(const uint8_t *p, uint64_t n, struct zc *z)
{
    const uint8_t *q = p;
    z->ncols = uv_at(&q);
    cr_assert(z->ncols > 0 && z->ncols <= 64);
    for (uint64_t c = 0; c < z->ncols; c++) {
        z->np[c] = uv_at(&q);
        cr_assert(z->np[c] > 0 && z->np[c] <= 64);
        for (uint64_t i = 0; i < z->np[c]; i++) {
            z->hr[c][i] = (uint64_t)(q - p);
            z->rlen[c][i] = uv_at(&q);
            z->hz[c][i] = (uint64_t)(q - p);
            z->zlen[c][i] = uv_at(&q);
        }
    }
    uint64_t at = (uint64_t)(q - p);
    for (uint64_t c = 0; c < z->ncols; c++) {
        for (uint64_t i = 0; i < z->np[c]; i++) {
            z->at[c][i] = at;
            at += z->zlen[c][i];
        }
    }
    cr_assert_eq(at, n, "the parts fill the stored bytes");
}

/* Column |c|'s raw length. */
static uint64_t col_len(const struct zc *z, uint64_t c)
{
    uint64_t r = 0;
    for (uint64_t i = 0; i < z->np[c]; i++) {
        r += z->rlen[c][i];
    }
    return r;
}

/* The raw table's length the columns of |z| give. */
static uint64_t layout_len(const struct zc *z)
{
    uint64_t at = 8 + 16 * z->ncols;
    for (uint64_t c = 0; c < z->ncols; c++) {
        at = (at + 7) / 8 * 8 + col_len(z, c);
    }
    return at;
}

/* Table |t| of f[0, n) inflated by the test's own reading of the format
 * (one frame: ZSTD_decompress; by column: each column at the next
 * multiple of 8 after the column directory); its raw length in *raw. */
static uint8_t *raw_table(uint8_t *f, size_t n, int t, size_t *raw)
{
    const uint8_t *e = tdir(f, n, t);
    const uint8_t *p = f + get64(e + 8);
    uint64_t len = get64(e + 16);
    *raw = get64(e + 24);
    uint8_t *r = calloc(1, *raw);
    cr_assert_not_null(r);
    if (e[1] == BLK_CODEC_ZSTD) {
        cr_assert_eq(ZSTD_decompress(r, *raw, p, len), *raw);
        return r;
    }
    cr_assert_eq(e[1], BLK_CODEC_ZSTD_COLS);
    struct zc z;
    zc_parse(p, len, &z);
    put32(r, (uint32_t)z.ncols);
    uint64_t at = 8 + 16 * z.ncols;
    for (uint64_t c = 0; c < z.ncols; c++) {
        at = (at + 7) / 8 * 8;
        put64(r + 8 + 16 * c, at);
        put64(r + 16 + 16 * c, col_len(&z, c));
        for (uint64_t i = 0; i < z.np[c]; i++) {
            uint64_t rl = z.rlen[c][i], zl = z.zlen[c][i];
            if (zl == rl) {
                memcpy(r + at, p + z.at[c][i], rl);
            } else {
                cr_assert_lt(zl, rl);
                cr_assert_eq(ZSTD_decompress(r + at, rl, p + z.at[c][i], zl), rl);
            }
            at += rl;
        }
    }
    cr_assert_eq(at, *raw);
    return r;
}

/*
 * The generator's rows of each signal (spans: ids, times, names,
 * attributes, events, links), written with the cold options with and
 * without zstd_cols: the by-column file's META flags are the other's and
 * bit 6, each table is codec 2 and rebuilds exactly the raw table of the
 * other's one frame; the attrs table's lists by key (logs and spans) are
 * in parts; spans: columns that do not shrink (the random span ids) are
 * stored as they are, the others as frames, and the three tables take
 * fewer bytes; every row reads back (check_block).
 */
Test(block_zcols, tables_by_column_rebuild_the_tables_of_one_frame)
{
    for (int s = 0; s < 3; s++) {
        enum signal sig = s == 0 ? SIG_TRACES : s == 1 ? SIG_LOGS : SIG_METRICS;
        oblock *ob = gen_oblock(sig, 1212 + (uint64_t)s, BIG, 40);
        struct blk_wopts a = cold(true), b = cold(false);
        char pa[512], pb[512];
        size_t na, nb;
        uint8_t *fa = write_and_read(ob, BIG, 1, &a, pa, sizeof(pa), &na);
        uint8_t *fb = write_and_read(ob, BIG, 2, &b, pb, sizeof(pb), &nb);
        cr_assert_eq(meta_flags(fa, na), meta_flags(fb, nb) | 64, "signal %d", s);
        cr_assert_eq(meta_flags(fb, nb) & 64, 0);
        unsigned as_is = 0, frames = 0;
        uint64_t za = 0, zb = 0;
        for (int t = 0; t < 3; t++) {
            const uint8_t *ea = tdir(fa, na, t), *eb = tdir(fb, nb, t);
            cr_assert_eq(ea[1], BLK_CODEC_ZSTD_COLS, "signal %d table %d", s, t);
            cr_assert_eq(eb[1], BLK_CODEC_ZSTD, "signal %d table %d", s, t);
            za += get64(ea + 16);
            zb += get64(eb + 16);
            size_t ra, rb;
            uint8_t *xa = raw_table(fa, na, t, &ra), *xb = raw_table(fb, nb, t, &rb);
            cr_assert_eq(ra, rb, "signal %d table %d", s, t);
            cr_assert_eq(memcmp(xa, xb, ra), 0, "signal %d table %d: the same raw bytes", s, t);
            struct zc z;
            zc_parse(fa + get64(ea + 8), get64(ea + 16), &z);
            for (uint64_t c = 0; c < z.ncols; c++) {
                for (uint64_t i = 0; i < z.np[c]; i++) {
                    as_is += z.zlen[c][i] == z.rlen[c][i] && z.rlen[c][i] > 0;
                    frames += z.zlen[c][i] < z.rlen[c][i];
                }
            }
            /* the attrs table's lists by key: the code stream, then each
             * non-empty key's values, a part each */
            cr_assert_eq(z.ncols > 3 && z.np[3] > 2, t == 1 && sig != SIG_METRICS,
                         "signal %d table %d", s, t);
            free(xa);
            free(xb);
        }
        cr_assert_gt(frames, 5, "signal %d", s);
        if (sig == SIG_TRACES) {
            /* at 3,000 rows (at 400, 12 frame heads on the detail's 2 KB and
             * the parts' cost more than they gain) */
            cr_assert_lt(za, zb, "%llu bytes by column, %llu in one frame", (unsigned long long)za,
                         (unsigned long long)zb);
            cr_assert_gt(as_is, 0, "span ids stored as they are");
        }
        blk *c = open_ok(pa);
        check_block(c, ob, BIG);
        blk_unref(c);
        free(fa);
        free(fb);
        oblock_free(ob);
    }
}

/* Blocks of plain tables ignore the option: the same bytes as without it
 * (so no flag bit 6). */
Test(block_zcols, plain_tables_are_written_as_without_it)
{
    for (int s = 0; s < 3; s++) {
        enum signal sig = s == 0 ? SIG_LOGS : s == 1 ? SIG_METRICS : SIG_TRACES;
        oblock *ob = gen_oblock(sig, 77 + (uint64_t)s, 300, 30);
        struct blk_wopts a = cold(true), b = cold(false);
        a.codec = b.codec = BLK_CODEC_PLAIN;
        char pa[512], pb[512];
        size_t na, nb;
        /* the same seal id: the files may be equal byte for byte */
        uint8_t *fa = write_and_read(ob, 300, 5, &a, pa, sizeof(pa), &na);
        uint8_t *fb = write_and_read(ob, 300, 5, &b, pb, sizeof(pb), &nb);
        cr_assert_eq(na, nb, "signal %d", s);
        cr_assert_eq(memcmp(fa, fb, na), 0, "signal %d", s);
        cr_assert_eq(meta_flags(fa, na) & 64, 0);
        free(fa);
        free(fb);
        oblock_free(ob);
    }
}

/* Opens |path| (no verification cache) and reads every span with all its
 * parts: 0, or the first error (open's included). */
static int read_all(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    for (uint64_t i = 0; rc == 0 && i < blk_rows(b); i++) {
        struct span_view v;
        rc = blk_span(b, i, BLK_ALL, &v);
    }
    blk_unref(b);
    return rc;
}

/* The first part of |z| stored as a frame: its column in *c, part in *i. */
static void first_frame(const struct zc *z, uint64_t *c, uint64_t *i)
{
    for (*c = 0; *c < z->ncols; (*c)++) {
        for (*i = 0; *i < z->np[*c]; (*i)++) {
            if (z->zlen[*c][*i] < z->rlen[*c][*i]) {
                return;
            }
        }
    }
    cr_assert_fail("no part stored as a frame");
}

/*
 * Forged tables by column (CRCs fixed; the unforged control reads): each
 * fails the read of the table with -EBADMSG (the root's: the open), never
 * reading or writing past what was proven: the column count 0 or past the
 * most a table has, a frame's magic damaged, the table directory's raw
 * length 8 over (the layout the columns give is not it), a part's raw
 * length one over its frame's content (its stored length kept), a frame's
 * stored length one over (the parts no longer fill the stored bytes),
 * codec 2 without flag bit 6.
 */
Test(block_zcols, forged_tables_by_column_are_refused)
{
    oblock *ob = gen_oblock(SIG_TRACES, 4242, ROWS, 40);
    struct blk_wopts o = cold(true);
    char p[512];
    size_t n;
    uint8_t *f = write_and_read(ob, ROWS, 1, &o, p, sizeof(p), &n);
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    for (int forge = -1; forge < 7; forge++) {
        for (int t = 0; t < 3; t++) {
            memcpy(g, f, n);
            uint8_t *e = tdir(g, n, t);
            uint8_t *tp = g + get64(e + 8);
            struct zc z;
            zc_parse(tp, get64(e + 16), &z);
            uint64_t c, pi;
            first_frame(&z, &c, &pi);
            uint8_t *rl = tp + z.hr[c][pi], *zl = tp + z.hz[c][pi];
            if (forge == 0) {
                tp[0] = 0; /* ncols: one byte, as every table's */
            } else if (forge == 1) {
                tp[0] = 0x7f;
            } else if (forge == 2) {
                tp[z.at[c][pi]] ^= 0xff; /* the frame's magic */
            } else if (forge == 3) {
                put64(e + 24, get64(e + 24) + 8);
            } else if (forge == 4) {
                /* one over its frame's content (the low bits of a LEB128's
                 * first byte are its value's), the directory's raw length
                 * the layout's */
                if ((*rl & 0x7f) == 0x7f) {
                    continue;
                }
                (*rl)++;
                zc_parse(tp, get64(e + 16), &z);
                put64(e + 24, layout_len(&z));
            } else if (forge == 5) {
                /* the frame's stored length one over: the parts no longer
                 * fill the stored bytes */
                if ((*zl & 0x7f) == 0x7f) {
                    continue;
                }
                (*zl)++;
            } else if (forge == 6) {
                uint64_t ml, m = section(g, n, 1, &ml);
                put64(g + m + 32, get64(g + m + 32) & ~(uint64_t)64);
            }
            fix_crcs(g, n);
            put_file(p, g, n);
            cr_assert_eq(read_all(p), forge < 0 ? 0 : -EBADMSG, "forge %d table %d", forge, t);
        }
    }
    free(g);
    free(f);
    oblock_free(ob);
}
