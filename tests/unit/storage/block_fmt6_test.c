/*
 * block_fmt6_test.c - format 6's log and span attribute lists by key
 * (block_int.h, "v6 ATTRS"): the exact bytes the writer lays out with
 * blk_wopts.attrs_by_key (the code stream, then each key's values, the T
 * column's stream lengths), the same views as without it, and forged
 * stream lengths and codes refused at the table load.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_fmt6, .init = fresh_dir);

#define ROWS 3

/* Row i (time i + 1 s): s="x<i>" (key id 0, unique: inline), n=1000 i
 * (key id 1, inline), c="same" (key id 2, in every row: the value
 * dictionary's entry 0, code 4). */
static struct batch *three_logs(void)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < ROWS; i++) {
        struct log_row *r = batch_add_log(bt);
        cr_assert_not_null(r);
        r->time_ns = r->observed_ns = (uint64_t)(i + 1) * 1000000000ull;
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        char s[4] = {'x', (char)('0' + i), 0, 0};
        cr_assert_eq(val_put_key(h, "s", 1), 0);
        cr_assert_eq(val_put_str(h, s, 2), 0);
        cr_assert_eq(val_put_key(h, "n", 1), 0);
        cr_assert_eq(val_put_int(h, 1000 * (int64_t)i), 0);
        cr_assert_eq(val_put_key(h, "c", 1), 0);
        cr_assert_eq(val_put_str(h, "same", 4), 0);
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 3};
    }
    return bt;
}

/* |bt| sealed at |path| (plain tables, lists by key or not); the file's
 * bytes, malloc'd. */
static uint8_t *seal(struct batch *bt, bool by_key, uint64_t seal_id, oblock **ob, char *path,
                     size_t cap, size_t *n)
{
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .attrs_by_key = by_key};
    cr_assert_eq(oblock_new(SIG_LOGS, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    write_block(*ob, ROWS, 0, seal_id, &o, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 6, "format 6");
    return f;
}

/* The lists as format 5 lays them out, row by row: code 1, "x<i>"; code
 * 2, zz(1000 i); code 4 (c="same"). */
static const uint8_t interleaved[] = {
    1, VAL_STR, 2, 'x', '0', 2, VAL_INT, 0,    4,       /* row 0 */
    1, VAL_STR, 2, 'x', '1', 2, VAL_INT, 0xd0, 0x0f, 4, /* zz(1000) = 2000 */
    1, VAL_STR, 2, 'x', '2', 2, VAL_INT, 0xa0, 0x1f, 4, /* zz(2000) = 4000 */
};
/* The same bytes by key: the codes, then key 0's values, key 1's, key 2's
 * (none: its only value is the dictionary's). */
static const uint8_t by_key[] = {
    1,       2, 4,       1,    2,       4,       1,    2,    4,                    /* codes */
    VAL_STR, 2, 'x',     '0',  VAL_STR, 2,       'x',  '1',  VAL_STR, 2, 'x', '2', /* s */
    VAL_INT, 0, VAL_INT, 0xd0, 0x0f,    VAL_INT, 0xa0, 0x1f,                       /* n */
};

/*
 * attrs_by_key writes the lists' bytes by key with the T column's
 * lengths (12 bytes of s, 8 of n, 0 of c), the same list offsets; without
 * it the T column is empty and the lists are as in format 5. Both files
 * read back every row exactly.
 */
Test(block_fmt6, format_6_stores_each_keys_values_together)
{
    struct batch *bt = three_logs();
    oblock *ob, *ob2;
    char path[512], path2[512];
    size_t n, n2;
    uint8_t *f = seal(bt, true, 60, &ob, path, sizeof(path), &n);
    uint8_t *g = seal(bt, false, 61, &ob2, path2, sizeof(path2), &n2);

    /* attrs: count, list codes, offsets, data, key offsets, key data,
     * value offsets, value data, T */
    uint64_t len, at = column_at(f, n, 1, 3, &len);
    cr_assert_eq(len, sizeof(by_key));
    cr_assert_arr_eq(f + at, by_key, sizeof(by_key));
    at = column_at(f, n, 1, 8, &len);
    cr_assert_eq(len, 24);
    cr_assert(get64(f + at) == 12 && get64(f + at + 8) == 8 && get64(f + at + 16) == 0);
    uint64_t o1, o2, l1, l2;
    o1 = column_at(f, n, 1, 2, &l1);
    o2 = column_at(g, n2, 1, 2, &l2);
    cr_assert(l1 == l2 && memcmp(f + o1, g + o2, l1) == 0, "the same list offsets");

    at = column_at(g, n2, 1, 3, &len);
    cr_assert_eq(len, sizeof(interleaved));
    cr_assert_arr_eq(g + at, interleaved, sizeof(interleaved));
    column_at(g, n2, 1, 8, &len);
    cr_assert_eq(len, 0, "not by key: an empty T column");

    blk *b = open_ok(path);
    check_block(b, ob, ROWS);
    blk_unref(b);
    b = open_ok(path2);
    check_block(b, ob2, ROWS);
    blk_unref(b);
    free(f);
    free(g);
    oblock_free(ob);
    oblock_free(ob2);
    batch_free(bt);
}

/*
 * Forged by-key lists fail the attribute table's load with -EBADMSG:
 * stream lengths over the data, a byte moved from one key's stream to the
 * next (a value then runs past its stream), a stream left unused (a code
 * retyped to the dictionary's), a code past the value dictionary, and a T
 * column that is not one u64 per key.
 */
Test(block_fmt6, format_6_forged_streams_fail_the_load)
{
    struct batch *bt = three_logs();
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal(bt, true, 62, &ob, path, sizeof(path), &n);
    uint64_t len, data = column_at(f, n, 1, 3, &len), t = column_at(f, n, 1, 8, &len);
    uint64_t l, d = section(f, n, 2, &l);
    uint64_t toff = get64(f + d + 8 + 32 * 1 + 8); /* the attrs table */
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);

    memcpy(g, f, n);
    fix_crcs(g, n);
    put_file(path, g, n);
    cr_assert_eq(load_attrs(path), 0, "unforged");
    for (int forge = 0; forge < 6; forge++) {
        memcpy(g, f, n);
        if (forge == 0) {
            put64(g + t, 40); /* 40 + 8 + 0 bytes in 29 */
        } else if (forge == 1) {
            put64(g + t, 11); /* s 11 bytes, n 9 */
            put64(g + t + 8, 9);
        } else if (forge == 2) {
            put64(g + t, 13); /* the code stream one byte short */
        } else if (forge == 3) {
            g[data + 7] = 4; /* row 2's n: its value left in the stream */
        } else if (forge == 4) {
            g[data + 2] = 5; /* one entry in the value dictionary: 4 is the last */
        } else {
            put64(g + toff + 8 + 16 * 8 + 8, 16); /* T: 16 bytes for 3 keys */
        }
        fix_crcs(g, n);
        put_file(path, g, n);
        cr_assert_eq(load_attrs(path), -EBADMSG, "forge %d", forge);
    }
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* Spans take the same layout: a zstd table (the cold tier's) of the
 * generator's spans reads back exactly, and smaller than in format 5's
 * layout. */
Test(block_fmt6, format_6_span_lists_by_key_read_back_and_shrink)
{
    oblock *ob = gen_oblock(SIG_TRACES, 6006, 400, 40);
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true};
    char p5[512], p6[512];
    write_block(ob, 400, 0, 63, &z, p5, sizeof(p5));
    z.attrs_by_key = true;
    write_block(ob, 400, 0, 64, &z, p6, sizeof(p6));
    blk *b5 = open_ok(p5), *b6 = open_ok(p6);
    check_block(b6, ob, 400);
    struct blk_table_info i5, i6;
    cr_assert_eq(blk_table_info(b5, 1, &i5), 0);
    cr_assert_eq(blk_table_info(b6, 1, &i6), 0);
    cr_assert_lt(i6.length, i5.length, "%llu vs %llu", (unsigned long long)i6.length,
                 (unsigned long long)i5.length);
    blk_unref(b5);
    blk_unref(b6);
    oblock_free(ob);
}

/*
 * Past the writer's 4096 counted keys a list is stored literal (code 0,
 * then the whole key-value): by key, a literal stays in the code stream.
 * 4200 rows, each "h" = "x" (in every row: a value dictionary code) then
 * a key of its own "k0" .. "k4199" with int i: T has 4096 lengths (h and
 * k0 .. k4094), h's stream is empty, each k's holds its one int, and
 * every row (literal ones from 4095 on) and hot value reads back.
 */
Test(block_fmt6, format_6_keeps_literal_lists_in_the_code_stream)
{
    enum { N = 4200 };
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < N; i++) {
        struct log_row *r = batch_add_log(bt);
        cr_assert_not_null(r);
        r->time_ns = r->observed_ns = (uint64_t)(i + 1) * 1000000ull;
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        char k[16];
        snprintf(k, sizeof(k), "k%u", i);
        cr_assert_eq(val_put_key(h, "h", 1), 0);
        cr_assert_eq(val_put_str(h, "x", 1), 0);
        cr_assert_eq(val_put_key(h, k, strlen(k)), 0);
        cr_assert_eq(val_put_int(h, i), 0);
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 2};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .attrs_by_key = true};
    char path[512];
    write_block(ob, N, 0, 65, &o, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t len, t = column_at(f, n, 1, 8, &len);
    cr_assert_eq(len, 8 * 4096);
    cr_assert_eq(get64(f + t), 0, "h: every value a dictionary code");
    for (uint32_t k = 1; k < 4096; k++) {
        uint64_t want = 1 + (k - 1 < 64 ? 1 : k - 1 < 8192 ? 2 : 3); /* type + uv zz(i) */
        cr_assert_eq(get64(f + t + 8 * k), want, "key %u", k);
    }
    free(f);
    blk *b = open_ok(path);
    cr_assert_eq(blk_n_hot_attrs(b), 1);
    for (uint64_t j = 0; j < N; j++) { /* rows in time order: as appended */
        struct val v;
        cr_assert_eq(blk_hot_attr(b, 0, j, &v), 1, "row %llu", (unsigned long long)j);
        cr_assert(v.type == VAL_STR && v.n == 1 && v.s[0] == 'x');
        struct log_view got, want;
        cr_assert_eq(blk_log(b, j, BLK_ATTRS, &got), 0);
        cr_assert_eq(oblock_log(ob, j, &want), 0);
        cr_assert(got.attrs.count == 2 && got.attrs.len == want.attrs.len &&
                      memcmp(got.attrs.p, want.attrs.p, want.attrs.len) == 0,
                  "row %llu", (unsigned long long)j);
    }
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
}

/* ---- format 6's stream index by row (section 9, codec 2) ---- */

/* The two gauges' index by row: the streams' metrics in order of first
 * row (b, a{k=1}, a{k=2}), then per row 0 for a new stream or how many
 * streams back: rows 0-2 new, row 3 b (3 back), rows 4 and 5 a{k=1} (2). */
Test(block_fmt6, streams_by_row_code_each_rows_stream)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .streams_by_row = true};
    write_block(ob, 6, 0, 81, &o, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t len, at = section(f, n, 9, &len);
    cr_assert_neq(at, 0);
    static const uint8_t want[] = {3, 0, 0, 0, 2, 0, 0, 0, 9, 0,
                                   0, 0, 0, 0, 0, 0, 1, 0, 0, /* metrics: b, a, a */
                                   0, 0, 0, 3, 2, 2};         /* rows 0..5 */
    cr_assert_eq(len, sizeof(want));
    cr_assert_arr_eq(f + at, want, sizeof(want));
    blk *b = open_ok(path);
    cr_assert_eq(blk_n_streams(b), 3);
    static const uint32_t metric[3] = {0, 0, 1}, nrows[3] = {3, 1, 2};
    static const uint32_t rows[3][3] = {{1, 4, 5}, {2}, {0, 3}};
    for (uint32_t i = 0; i < 3; i++) {
        struct blk_stream st;
        cr_assert_eq(blk_stream(b, i, &st), 0);
        cr_assert_eq(st.metric_id, metric[i], "stream %u", i);
        cr_assert_eq(st.n_rows, nrows[i], "stream %u", i);
        cr_assert_arr_eq(st.rows, rows[i], 4 * nrows[i], "stream %u", i);
    }
    blk_unref(b);
    /* forgeries: a code past the streams opened, a metric past the
     * block's, a fourth new stream of three, a body length one short */
    for (int forge = 0; forge < 4; forge++) {
        uint8_t *g = malloc(n);
        cr_assert_not_null(g);
        memcpy(g, f, n);
        if (forge == 0) {
            g[at + 16 + 6] = 4;
        } else if (forge == 1) {
            g[at + 16 + 0] = 2;
        } else if (forge == 2) {
            g[at + 16 + 8] = 0;
        } else {
            g[at + 8] = 8;
        }
        streams_refused(g, n, forge);
        free(g);
    }
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* The generator's points, zstd (the cold tier's options) with the index by
 * row and without: the same streams, metrics and rows, and fewer bytes. */
Test(block_fmt6, streams_by_row_give_the_same_index)
{
    oblock *ob = gen_oblock(SIG_METRICS, 8008, 600, 60);
    uint64_t rows = oblock_rows(ob);
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true};
    char p4[512], p6[512];
    write_block(ob, rows, 0, 82, &z, p4, sizeof(p4));
    z.streams_by_row = true;
    write_block(ob, rows, 0, 83, &z, p6, sizeof(p6));
    blk *b4 = open_ok(p4), *b6 = open_ok(p6);
    check_block(b6, ob, rows);
    cr_assert_gt(blk_n_streams(b4), 1);
    cr_assert_eq(blk_n_streams(b6), blk_n_streams(b4));
    for (uint32_t i = 0; i < blk_n_streams(b4); i++) {
        struct blk_stream s4, s6;
        cr_assert_eq(blk_stream(b4, i, &s4), 0);
        cr_assert_eq(blk_stream(b6, i, &s6), 0);
        cr_assert_eq(s6.metric_id, s4.metric_id, "stream %u", i);
        cr_assert_eq(s6.n_rows, s4.n_rows, "stream %u", i);
        cr_assert_arr_eq(s6.rows, s4.rows, 4 * (size_t)s4.n_rows, "stream %u", i);
    }
    blk_unref(b4);
    blk_unref(b6);
    oblock_free(ob);
}
