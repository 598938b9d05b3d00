/*
 * block_pstart_test.c - format 6's point start times by reference (footer
 * META flag bit 9, blk_wopts.point_starts; block_int.h "v6 POINT STARTS"):
 * the exact bytes of the start column of a small crafted block, the
 * column left as before when too few rows find an entry, every row's
 * start back on mixed and edge series, and forged columns refused.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

#include "storage/block_int.h" /* INT_PSTART, INT_HDR */

TestSuite(block_pstart, .init = fresh_dir);

static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t len, at = section(f, n, 1, &len);
    cr_assert_neq(at, 0);
    return get64(f + at + 32);
}

static void add_pt(struct batch *bt, uint64_t t, uint64_t start)
{
    struct point_row *p = batch_add_point(bt);
    cr_assert_not_null(p);
    p->metric = 0;
    p->time_ns = t;
    p->start_ns = start;
    p->value_type = PV_INT;
    p->value.i = (int64_t)t;
}

static oblock *oblock_of(struct batch *bt)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    return ob;
}

/* Every row's time and start as the oblock's. */
static void starts_match(const char *path, const oblock *ob)
{
    blk *b = open_ok(path);
    uint64_t rows = oblock_rows(ob);
    cr_assert_eq(blk_rows(b), rows);
    check_block(b, ob, rows);
    blk_unref(b);
}

/*
 * Rows (in time order): a cumulative start 100 three times, a delta of
 * 1000 twice, one row of neither: entries (100 a start, zz 1000 = 2000 a
 * delta), kinds 0b10, codes 0 1 0 1 0 and a literal (code 2, zz 1 = 2).
 */
static oblock *crafted(void)
{
    struct batch *bt = metric_batch("c", MK_SUM);
    add_pt(bt, 1000, 100);
    add_pt(bt, 2000, 1000);
    add_pt(bt, 3000, 100);
    add_pt(bt, 4000, 3000);
    add_pt(bt, 5000, 100);
    add_pt(bt, 6000, 5999);
    return oblock_of(bt);
}

static const uint8_t want_col[] = {
    2,    0, 0, 0, 0, 0, 0, 0, /* n */
    100,  0, 0, 0, 0, 0, 0, 0, /* entry 0: a start */
    0xd0, 7, 0, 0, 0, 0, 0, 0, /* entry 1: zz(1000) */
    2,                         /* kinds */
    0,    1, 0, 1, 0, 2, 2,    /* codes, the literal zz(1) */
};

Test(block_pstart, crafted_column_exact_and_rows_back)
{
    oblock *ob = crafted();
    struct blk_wopts o = {.point_starts = true};
    char p[512], q[512];
    size_t n, m;
    uint8_t *f = write_and_read(ob, 6, 1, &o, p, sizeof(p), &n);
    cr_assert_eq(meta_flags(f, n), 1 | 512);
    uint64_t len, at = column_at(f, n, 0, 1, &len);
    cr_assert_eq(len, INT_HDR + sizeof(want_col));
    cr_assert_eq(get64(f + at), 6);
    cr_assert_eq(get64(f + at + 8), 0);
    cr_assert(f[at + 16] == 0 && f[at + 17] == INT_PSTART);
    cr_assert_arr_eq(f + at + INT_HDR, want_col, sizeof(want_col));
    starts_match(p, ob);
    /* without the option: the column as before, the same rows */
    uint8_t *g = write_and_read(ob, 6, 2, &(struct blk_wopts){0}, q, sizeof(q), &m);
    cr_assert_eq(meta_flags(g, m), 1);
    at = column_at(g, m, 0, 1, &len);
    cr_assert_neq(g[at + 17], INT_PSTART);
    starts_match(q, ob);
    free(f);
    free(g);
    oblock_free(ob);
}

/* Half the rows without an entry or more: no flag, the file byte for
 * byte the one written without the option. */
Test(block_pstart, too_few_references_leave_the_column_as_before)
{
    struct batch *bt = metric_batch("c", MK_SUM);
    add_pt(bt, 1000, 100);
    add_pt(bt, 2000, 200);
    add_pt(bt, 3000, 100); /* start 100 twice: 2 rows of 5 find it */
    add_pt(bt, 4000, 400);
    add_pt(bt, 5000, 600);
    oblock *ob = oblock_of(bt);
    char p[512], q[512];
    size_t n, m;
    uint8_t *f =
        write_and_read(ob, 5, 1, &(struct blk_wopts){.point_starts = true}, p, sizeof(p), &n);
    uint8_t *g = write_and_read(ob, 5, 1, &(struct blk_wopts){0}, q, sizeof(q), &m);
    cr_assert_eq(meta_flags(f, n), 1);
    cr_assert(n == m && memcmp(f, g, n) == 0);
    starts_match(p, ob);
    free(f);
    free(g);
    oblock_free(ob);
}

/*
 * Points as the OpenTelemetry JS exporters send them: every point of a
 * collection at one time, each instrument's start its creation time (11
 * instruments a process, 250 points a collection, 20 collections of 4
 * processes): the values repeat in runs zstd takes whole, the dictionary
 * would cost more than it saves, so the column stays as before (no flag,
 * the file byte for byte the one without the option).
 */
Test(block_pstart, runs_zstd_takes_whole_leave_the_column_as_before)
{
    struct batch *bt = metric_batch("c", MK_SUM);
    for (uint64_t c = 0; c < 20; c++) {
        uint64_t proc = 1796298628000000000ull + (c / 5) * 3600000000000ull;
        uint64_t t = proc + 60000000000ull + c * 10000000000ull;
        for (uint64_t i = 0; i < 250; i++) {
            add_pt(bt, t, proc + (i % 11) * 1000000ull + 672000000ull);
        }
    }
    oblock *ob = oblock_of(bt);
    struct blk_wopts o = blk_hot_wopts(3, SIG_METRICS);
    o.point_starts = true;
    char p[512], q[512];
    size_t n, m;
    uint8_t *f = write_and_read(ob, 5000, 1, &o, p, sizeof(p), &n);
    o.point_starts = false;
    uint8_t *g = write_and_read(ob, 5000, 1, &o, q, sizeof(q), &m);
    cr_assert_eq(meta_flags(f, n) & 512, 0);
    cr_assert(n == m && memcmp(f, g, n) == 0);
    starts_match(p, ob);
    free(f);
    free(g);
    oblock_free(ob);
}

/*
 * 3,000 points in shuffled time order: cumulative series of three
 * process starts, delta series whose points of one collection share
 * their start and time, and one row in eight with an edge start (0, the
 * time itself, past the time, 2^64 - 1): zstd tables with the cold
 * options, the flag set, every row back; the generator's edge points and
 * random points with the option read back whatever the writer chose.
 */
Test(block_pstart, mixed_series_and_edge_starts_read_back)
{
    static const uint64_t procs[] = {1767225540000000000ull, 1767225000123456789ull, 17};
    struct batch *bt = metric_batch("c", MK_SUM);
    uint64_t s = 99;
    for (uint32_t i = 0; i < 3000; i++) {
        uint64_t coll = gen_below(&s, 40), t = 1767225600000000000ull + coll * 10000000000ull;
        uint64_t start;
        switch (gen_below(&s, 8)) {
        case 0:
            start = (uint64_t[]){0, t, t + 1 + gen_below(&s, 1000), UINT64_MAX}[gen_below(&s, 4)];
            break;
        case 1:
        case 2:
        case 3:
            start = procs[gen_below(&s, 3)];
            break;
        default:
            start = t - 10000000000ull - gen_below(&s, 3) * 7;
            break;
        }
        add_pt(bt, t + gen_below(&s, 2) * 1000, start);
    }
    oblock *ob = oblock_of(bt);
    struct blk_wopts o = blk_hot_wopts(3, SIG_METRICS);
    o.point_starts = true;
    o.var_seqs = true;
    char p[512];
    size_t n;
    uint8_t *f = write_and_read(ob, oblock_rows(ob), 1, &o, p, sizeof(p), &n);
    cr_assert_eq(meta_flags(f, n) & 512, 512);
    starts_match(p, ob);
    free(f);
    oblock_free(ob);
    for (int k = 0; k < 2; k++) {
        ob = k == 0 ? gen_edge_points(5, 400) : gen_oblock(SIG_METRICS, 4242, 600, 60);
        write_block(ob, oblock_rows(ob), 0, 10 + (uint64_t)k, &o, p, sizeof(p));
        starts_match(p, ob);
        oblock_free(ob);
    }
}

/* The crafted block's file with byte |at| of the start column's coded
 * part (after its INT header) set to |v|, or (at < 0) the column's length
 * in the root's directory changed by |dlen|; its open must fail. */
static void forged_refused(const uint8_t *f, size_t n, long at, uint8_t v, int dlen)
{
    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    uint64_t len, c = column_at(g, n, 0, 1, &len);
    if (at >= 0) {
        g[c + INT_HDR + (size_t)at] = v;
    } else {
        uint64_t l, d = section(g, n, 2, &l);
        uint64_t toff = get64(g + d + 8 + 8);
        put64(g + toff + 8 + 16 + 8, len + (uint64_t)(int64_t)dlen);
    }
    fix_crcs(g, n);
    cr_assert_eq(tmpdir_write_file(dir, "forged.blk", g, n), 0);
    char fp[600], err[256];
    snprintf(fp, sizeof(fp), "%s/forged.blk", dir);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(fp, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG,
                 "forge at %ld = %u, dlen %d", at, v, dlen);
    free(g);
}

/*
 * Forged (CRCs recomputed; the unforged copy opens): a code past the
 * entries, n past the rows, n making the entries overrun, a kind bit past
 * n, a literal turned into a code (its value left over), the column one
 * byte short (the literal cut), encoding 5 with the flag cleared, another
 * encoding with the flag set, and the flag on a log block.
 */
Test(block_pstart, forged_columns_fail_the_open)
{
    oblock *ob = crafted();
    char p[512];
    size_t n;
    uint8_t *f =
        write_and_read(ob, 6, 1, &(struct blk_wopts){.point_starts = true}, p, sizeof(p), &n);
    forged_refused(f, n, 25, 3, 0);  /* row 0's code 3 of 2 entries */
    forged_refused(f, n, 0, 7, 0);   /* n 7 > 6 rows */
    forged_refused(f, n, 0, 3, 0);   /* n 3: 24 bytes of entries, the codes read as kinds */
    forged_refused(f, n, 24, 6, 0);  /* a kind bit past n */
    forged_refused(f, n, 30, 0, 0);  /* the literal's code 2 -> 0: its byte left over */
    forged_refused(f, n, -1, 0, -1); /* the literal's value cut */
    uint64_t len, c = column_at(f, n, 0, 1, &len);
    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    g[c + 17] = INT_FOR; /* the flag set, the column not encoding 5 */
    fix_crcs(g, n);
    put_file(p, g, n);
    blk *b = NULL;
    char err[256];
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    memcpy(g, f, n);
    uint64_t sl, sa = section(g, n, 1, &sl);
    put64(g + sa + 32, 1); /* encoding 5 without the flag */
    fix_crcs(g, n);
    put_file(p, g, n);
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    memcpy(g, f, n); /* control: the same file rewritten opens */
    fix_crcs(g, n);
    put_file(p, g, n);
    b = open_ok(p);
    blk_unref(b);
    free(g);
    free(f);
    oblock_free(ob);
    /* bit 9 on a log block */
    struct batch *lb = log_batch();
    log_at(lb, 5);
    oblock *lo;
    cr_assert_eq(oblock_new(SIG_LOGS, &lo), 0);
    cr_assert_eq(oblock_append(lo, lb, 1), 0);
    batch_free(lb);
    f = write_and_read(lo, 1, 3, &(struct blk_wopts){0}, p, sizeof(p), &n);
    sa = section(f, n, 1, &sl);
    put64(f + sa + 32, 1 | 512);
    fix_crcs(f, n);
    put_file(p, f, n);
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "footer meta flags 0x201 unknown") != NULL, "%s", err);
    free(f);
    oblock_free(lo);
}
