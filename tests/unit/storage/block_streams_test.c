/*
 * block_streams_test.c - format 6's metric stream index from the rows
 * (footer META flag bit 2, block_int.h "v6 STREAMS FROM ROWS";
 * blk_wopts.streams_derived): no section 9 in the file, the index the
 * attribute table's first load derives equal to the one the writer would
 * have stored, stream by stream, and forged files refused.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_streams, .init = fresh_dir);

static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t len, at = section(f, n, 1, &len);
    cr_assert_neq(at, 0);
    return get64(f + at + 32);
}

/* b4 and b6 hold the same streams: metric, rows, in the same order. */
static void same_index(blk *b4, blk *b6)
{
    uint32_t n = blk_n_streams(b4);
    cr_assert_eq(blk_n_streams(b6), n);
    for (uint32_t i = 0; i < n; i++) {
        struct blk_stream s4, s6;
        cr_assert_eq(blk_stream(b4, i, &s4), 0);
        cr_assert_eq(blk_stream(b6, i, &s6), 0);
        cr_assert_eq(s6.metric_id, s4.metric_id, "stream %u", i);
        cr_assert_eq(s6.n_rows, s4.n_rows, "stream %u", i);
        cr_assert_arr_eq(s6.rows, s4.rows, 4 * (size_t)s4.n_rows, "stream %u", i);
    }
    struct blk_stream st;
    cr_assert_eq(blk_stream(b6, n, &st), -EINVAL);
    uint32_t m = blk_n_metrics(b4);
    for (uint32_t k = 0; k <= m; k++) {
        uint32_t f4, c4, f6, c6;
        blk_streams_of_metric(b4, k, &f4, &c4);
        blk_streams_of_metric(b6, k, &f6, &c6);
        cr_assert(f4 == f6 && c4 == c6, "metric %u: %u+%u, %u+%u", k, f4, c4, f6, c6);
    }
}

/* The two gauges (blkfile.h): no section 9, META flags 5 (sorted, streams
 * from the rows), and the three streams the stored index gives: a{k=1}
 * rows 1,4,5; a{k=2} row 2; b (no attributes: the empty list) rows 0,3.
 * The attribute table is loaded by the first question, not at open. */
Test(block_streams, derived_two_gauges_store_no_section_and_read_three_streams)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512], pr[512];
    size_t n, nr;
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .streams_by_row = true};
    uint8_t *fr = write_and_read(ob, 6, 90, &o, pr, sizeof(pr), &nr);
    o.streams_derived = true; /* over streams_by_row */
    uint8_t *f = write_and_read(ob, 6, 91, &o, path, sizeof(path), &n);
    uint64_t len;
    cr_assert_eq(section(f, n, 9, &len), 0, "no stream section");
    cr_assert_neq(section(fr, nr, 9, &len), 0);
    cr_assert_eq(meta_flags(f, n), 5);
    cr_assert_eq(meta_flags(fr, nr), 1);
    uint64_t s9 = section(fr, nr, 9, &len);
    cr_assert_eq(n + ((16 + len + 7) / 8 * 8), nr, "the file is section 9 shorter, no more");
    free(fr);
    free(f);

    blk *b = open_ok(path);
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_assert_eq(ti.state, 0, "attrs not loaded by the open");
    cr_assert_eq(blk_n_streams(b), 3);
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_assert_eq(ti.state, 1, "attrs loaded by blk_n_streams");
    static const uint32_t metric[3] = {0, 0, 1}, nrows[3] = {3, 1, 2};
    static const uint32_t rows[3][3] = {{1, 4, 5}, {2}, {0, 3}};
    for (uint32_t i = 0; i < 3; i++) {
        struct blk_stream st;
        cr_assert_eq(blk_stream(b, i, &st), 0);
        cr_assert_eq(st.metric_id, metric[i], "stream %u", i);
        cr_assert_eq(st.n_rows, nrows[i], "stream %u", i);
        cr_assert_arr_eq(st.rows, rows[i], 4 * nrows[i], "stream %u", i);
    }
    /* dropped tables: the index stays, nothing is loaded again for it */
    blk_drop_tables(b);
    cr_assert_eq(blk_n_streams(b), 3);
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_assert_eq(ti.state, 0, "the index outlives the tables");
    blk *br = open_ok(pr);
    same_index(br, b);
    check_block(b, ob, 6);
    blk_unref(br);
    blk_unref(b);
    (void)s9;
    oblock_free(ob);
    batch_free(bt);
}

/* Streams asked for first through blk_stream or blk_streams_of_metric
 * (no blk_n_streams before): the same answers. */
Test(block_streams, derived_index_answers_whichever_question_comes_first)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    size_t n;
    struct blk_wopts o = {.codec = BLK_CODEC_ZSTD, .zstd_root = true, .streams_derived = true};
    free(write_and_read(ob, 6, 92, &o, path, sizeof(path), &n));
    blk *b = open_ok(path);
    struct blk_stream st;
    cr_assert_eq(blk_stream(b, 2, &st), 0);
    cr_assert(st.metric_id == 1 && st.n_rows == 2 && st.rows[0] == 0 && st.rows[1] == 3);
    blk_unref(b);
    b = open_ok(path);
    uint32_t first, count;
    blk_streams_of_metric(b, 0, &first, &count);
    cr_assert(first == 0 && count == 2, "%u+%u", first, count);
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * Lists shared between metrics (the (metric, list) pairs past each
 * list's first metric: the derivation's second table, grown past its
 * first 256 slots), one metric with many lists, a block of one row, and
 * an empty block: the derived index equals the stored one.
 */
Test(block_streams, derived_index_of_shared_lists_one_row_and_no_rows)
{
    struct batch *bt = batch_new(SIG_METRICS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    enum { NM = 300 };
    static char names[NM][16];
    for (int i = 0; i < NM; i++) {
        struct metric_row *m = batch_add_metric(bt);
        m->scope = 0;
        snprintf(names[i], sizeof(names[i]), "m%d", i);
        m->name = (struct mstr){names[i], (uint32_t)strlen(names[i])};
        m->kind = MK_GAUGE;
    }
    /* each metric: k=0 and k=1 twice, in rounds (times increase), and
     * metric 7 also k=2 .. k=99 */
    char v[16];
    uint64_t t = 1;
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < NM; i++) {
                snprintf(v, sizeof(v), "%d", k);
                add_point(bt, (uint32_t)i, t++, v);
            }
        }
    }
    for (int k = 2; k < 100; k++) {
        snprintf(v, sizeof(v), "%d", k);
        add_point(bt, 7, t++, v);
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    uint64_t rows = oblock_rows(ob);
    cr_assert_eq(rows, 4 * NM + 98);
    char p4[512], p6[512];
    size_t n;
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN};
    free(write_and_read(ob, rows, 93, &o, p4, sizeof(p4), &n));
    o.streams_derived = true;
    free(write_and_read(ob, rows, 94, &o, p6, sizeof(p6), &n));
    blk *b4 = open_ok(p4), *b6 = open_ok(p6);
    cr_assert_eq(blk_n_streams(b4), 2 * NM + 98);
    same_index(b4, b6);
    check_block(b6, ob, rows);
    blk_unref(b4);
    blk_unref(b6);
    oblock_free(ob);
    batch_free(bt);

    /* one row, then none */
    for (int one = 1; one >= 0; one--) {
        bt = batch_new(SIG_METRICS);
        cr_assert_not_null(bt);
        cr_assert_not_null(batch_add_resource(bt));
        batch_add_scope(bt)->resource = 0;
        struct metric_row *m = batch_add_metric(bt);
        m->scope = 0;
        m->name = (struct mstr){"g", 1};
        m->kind = MK_GAUGE;
        if (one) {
            add_point(bt, 0, 5, "x");
        }
        cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
        cr_assert_eq(oblock_append(ob, bt, 1), 0);
        free(write_and_read(ob, (uint64_t)one, 95 + 2 * (uint64_t)one, &o, p6, sizeof(p6), &n));
        o.streams_derived = false;
        free(write_and_read(ob, (uint64_t)one, 96 + 2 * (uint64_t)one, &o, p4, sizeof(p4), &n));
        o.streams_derived = true;
        b4 = open_ok(p4);
        b6 = open_ok(p6);
        cr_assert_eq(blk_n_streams(b6), (uint32_t)one);
        same_index(b4, b6);
        blk_unref(b4);
        blk_unref(b6);
        oblock_free(ob);
        batch_free(bt);
    }
}

/* The generator's points with the cold tier's options: the derived index
 * equals the by-row one stream by stream, every row reads back, and the
 * file is smaller by about the section. */
Test(block_streams, derived_index_of_the_generators_points_equals_the_stored_one)
{
    oblock *ob = gen_oblock(SIG_METRICS, 8008, 600, 60);
    uint64_t rows = oblock_rows(ob);
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true, .streams_by_row = true};
    char pr[512], pd[512];
    size_t nr, nd;
    uint8_t *fr = write_and_read(ob, rows, 100, &z, pr, sizeof(pr), &nr);
    z.streams_derived = true;
    uint8_t *fd = write_and_read(ob, rows, 101, &z, pd, sizeof(pd), &nd);
    uint64_t len;
    cr_assert_neq(section(fr, nr, 9, &len), 0);
    cr_assert_eq(nd + (16 + len + 7) / 8 * 8, nr);
    free(fr);
    free(fd);
    blk *br = open_ok(pr), *bd = open_ok(pd);
    cr_assert_gt(blk_n_streams(br), 100);
    same_index(br, bd);
    check_block(bd, ob, rows);
    blk_unref(br);
    blk_unref(bd);
    oblock_free(ob);
}

static void open_refused(const uint8_t *f, size_t n, const char *why)
{
    cr_assert_eq(tmpdir_write_file(dir, "forged.blk", f, n), 0);
    char fp[600], err[256];
    snprintf(fp, sizeof(fp), "%s/forged.blk", dir);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(fp, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG, "%s", why);
    cr_assert(strstr(err, why) != NULL, "%s", err);
}

/*
 * Forged: META bit 2 on a block that has section 9 (an index both stored
 * and derived) and on span blocks refuse the open; two list
 * dictionary entries made equal (a{k=2} turned a{k=1}: one series in two
 * streams) fail the attribute load, and the block then has no streams.
 */
Test(block_streams, forged_derived_blocks_are_refused)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    size_t n;
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .streams_by_row = true};
    uint8_t *f = write_and_read(ob, 6, 110, &o, path, sizeof(path), &n);
    uint64_t len, at = section(f, n, 1, &len);
    put64(f + at + 32, 5);
    fix_crcs(f, n);
    open_refused(f, n, "metric stream section in a block whose streams are its rows'");
    free(f);

    for (int s = SIG_TRACES; s <= SIG_TRACES; s++) { /* logs' bit 2 is their bodies' */
        oblock *lo = gen_oblock((enum signal)s, 7, 20, 20);
        struct blk_wopts lz = {.codec = BLK_CODEC_PLAIN, .streams_derived = true};
        f = write_and_read(lo, oblock_rows(lo), 111 + (uint64_t)s, &lz, path, sizeof(path), &n);
        at = section(f, n, 1, &len);
        cr_assert_eq(get64(f + at + 32), 1, "the option is the metric writer's only");
        put64(f + at + 32, 5);
        fix_crcs(f, n);
        open_refused(f, n, "footer meta flags 0x5 unknown");
        free(f);
        oblock_free(lo);
    }

    o.streams_derived = true;
    f = write_and_read(ob, 6, 115, &o, path, sizeof(path), &n);
    /* the attrs table: count, then the list dictionary's codes, offsets,
     * data (physical column 3): entries "" (b), k=1, k=2 */
    uint64_t dat = column_at(f, n, 1, 3, &len);
    uint64_t two = UINT64_MAX;
    for (uint64_t i = 0; i < len; i++) {
        if (f[dat + i] == '2') {
            cr_assert_eq(two, UINT64_MAX, "one '2' in the lists");
            two = i;
        }
    }
    cr_assert_neq(two, UINT64_MAX);
    f[dat + two] = '1';
    fix_crcs(f, n);
    put_file(path, f, n);
    blk *b = open_ok(path);
    cr_assert_eq(blk_n_streams(b), 0, "no index from a dictionary that repeats a list");
    struct blk_stream st;
    cr_assert_eq(blk_stream(b, 0, &st), -EINVAL);
    cr_assert_eq(blk_load(b, BLK_ATTRS), -EBADMSG, "the attribute load fails");
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_assert_eq(ti.state, -1);
    cr_assert_eq(blk_load(b, BLK_ROOT), 0, "the root still reads");
    blk_unref(b);
    /* the same edit without the flag: a valid block (the stored index
     * keeps the two streams), so the refusal is the derivation's */
    o.streams_derived = false;
    uint8_t *g = write_and_read(ob, 6, 116, &o, path, sizeof(path), &n);
    dat = column_at(g, n, 1, 3, &len);
    for (uint64_t i = 0; i < len; i++) {
        g[dat + i] = g[dat + i] == '2' ? '1' : g[dat + i];
    }
    fix_crcs(g, n);
    put_file(path, g, n);
    b = open_ok(path);
    cr_assert_eq(blk_load(b, BLK_ATTRS), 0);
    cr_assert_eq(blk_n_streams(b), 3);
    blk_unref(b);
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}
