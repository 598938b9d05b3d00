/*
 * block_fmt5_test.c - format 5's attribute value dictionary byte for byte
 * (block_int.h, "v5 ATTRS"): which key-values the writer puts in the V
 * column and in what order, a row's list coded against it, the lists read
 * back exactly, and forged value codes and entries refused at load.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block.h"
#include "storage/block_wint.h" /* VD_WMAX */
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkfile.h"

TestSuite(block_fmt5, .init = fresh_dir);

#define ROWS 200
#define BIG 600 /* over the writer's VD_VAL_MAX (512): never in the dictionary */

static void put_kv_str(struct vbuf *h, const char *k, const char *v, size_t vn)
{
    cr_assert_eq(val_put_key(h, k, strlen(k)), 0);
    cr_assert_eq(val_put_str(h, v, vn), 0);
}

/*
 * Row i (time i s): every tenth row (i % 10 == 9) has no attributes, the
 * others, in this key order (key ids 0..10):
 *   m    "GET" / "POST" / "PUT" by i % 3          (60 rows each)
 *   u    "u%05d" of i                             (unique)
 *   sw   rows < 100: "b" even, "a" odd (50 / 40); from 100 on unique
 *   i    int 200 even, 201 odd                    (100 / 80)
 *   d    double 1.5, y bytes 00 01 02, arr ["x", 7], kv {a: "b"},
 *        e empty                                  (180 each)
 *   b    bool false even, true odd                (100 / 80)
 *   big  600 bytes of 'z'                         (180, too long)
 */
static struct batch *dict_logs(void)
{
    static const char *const methods[] = {"GET", "POST", "PUT"};
    struct batch *bt = log_batch();
    char big[BIG], tmp[32];
    memset(big, 'z', sizeof(big));
    for (uint32_t i = 0; i < ROWS; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        uint32_t n = 0;
        if (i % 10 != 9) {
            put_kv_str(h, "m", methods[i % 3], strlen(methods[i % 3]));
            snprintf(tmp, sizeof(tmp), "u%05u", i);
            put_kv_str(h, "u", tmp, strlen(tmp));
            if (i < 100) {
                put_kv_str(h, "sw", i % 2 ? "a" : "b", 1);
            } else {
                snprintf(tmp, sizeof(tmp), "s%05u", i);
                put_kv_str(h, "sw", tmp, strlen(tmp));
            }
            cr_assert_eq(val_put_key(h, "i", 1), 0);
            cr_assert_eq(val_put_int(h, 200 + i % 2), 0);
            cr_assert_eq(val_put_key(h, "d", 1), 0);
            cr_assert_eq(val_put_double(h, 1.5), 0);
            cr_assert_eq(val_put_key(h, "b", 1), 0);
            cr_assert_eq(val_put_bool(h, i % 2), 0);
            cr_assert_eq(val_put_key(h, "y", 1), 0);
            cr_assert_eq(val_put_bytes(h, "\0\1\2", 3), 0);
            cr_assert_eq(val_put_key(h, "arr", 3), 0);
            long at = val_open(h, VAL_ARRAY);
            cr_assert_geq(at, 0);
            cr_assert_eq(val_put_str(h, "x", 1), 0);
            cr_assert_eq(val_put_int(h, 7), 0);
            val_close(h, at, 2);
            cr_assert_eq(val_put_key(h, "kv", 2), 0);
            at = val_open(h, VAL_KVLIST);
            cr_assert_geq(at, 0);
            put_kv_str(h, "a", "b", 1);
            val_close(h, at, 1);
            cr_assert_eq(val_put_key(h, "e", 1), 0);
            cr_assert_eq(val_put_empty(h), 0);
            put_kv_str(h, "big", big, sizeof(big));
            n = 11;
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, n};
    }
    return bt;
}

/* |bt|'s |rows| appended to a new open block (*ob) and sealed at |path|;
 * the file's bytes (*n of them, malloc'd), checked to be format 6 with
 * format 5's layout (the lists not by key: blk_write's default). */
static uint8_t *seal_v5(struct batch *bt, uint64_t rows, oblock **ob, char *path, size_t cap,
                        size_t *n)
{
    cr_assert_eq(oblock_new(SIG_LOGS, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    write_block(*ob, rows, 0, 90, NULL, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 6, "format 6, format 5's layout (lists not by key)");
    return f;
}

/* The value encoding of |put| into |out| after uv key id |key| (< 128). */
static void entry(struct vbuf *out, uint8_t key, int (*put)(struct vbuf *))
{
    cr_assert_eq(vbuf_put_u8(out, key), 0);
    cr_assert_eq(put(out), 0);
}

static int put_d(struct vbuf *b)
{
    return val_put_double(b, 1.5);
}
static int put_y(struct vbuf *b)
{
    return val_put_bytes(b, "\0\1\2", 3);
}
static int put_arr(struct vbuf *b)
{
    long at = val_open(b, VAL_ARRAY);
    int rc = at < 0 || val_put_str(b, "x", 1) < 0 || val_put_int(b, 7) < 0 ? -1 : 0;
    val_close(b, at, 2);
    return rc;
}
static int put_kv(struct vbuf *b)
{
    long at = val_open(b, VAL_KVLIST);
    int rc = at < 0 || val_put_key(b, "a", 1) < 0 || val_put_str(b, "b", 1) < 0 ? -1 : 0;
    val_close(b, at, 1);
    return rc;
}
static int put_e(struct vbuf *b)
{
    return val_put_empty(b);
}
static int put_200(struct vbuf *b)
{
    return val_put_int(b, 200);
}
static int put_201(struct vbuf *b)
{
    return val_put_int(b, 201);
}
static int put_f(struct vbuf *b)
{
    return val_put_bool(b, false);
}
static int put_t(struct vbuf *b)
{
    return val_put_bool(b, true);
}
static int put_get(struct vbuf *b)
{
    return val_put_str(b, "GET", 3);
}
static int put_post(struct vbuf *b)
{
    return val_put_str(b, "POST", 4);
}
static int put_put(struct vbuf *b)
{
    return val_put_str(b, "PUT", 3);
}
static int put_sb(struct vbuf *b)
{
    return val_put_str(b, "b", 1);
}
static int put_sa(struct vbuf *b)
{
    return val_put_str(b, "a", 1);
}

/*
 * The value dictionary holds the key-values seen in two rows or more of
 * the keys whose values repeat, most frequent first (ties in order of
 * first sight), each as uv key id then the value; a unique key (u), a key
 * that turns unique (sw: its unique values after row 100), and a value
 * over the length cap (big) stay inline. Row 0's list is coded against
 * it (codes 12 + rank after the 11 keys' 1..11) and every list reads
 * back byte for byte.
 */
Test(block_fmt5, format_5_codes_repeating_values_through_a_value_dictionary)
{
    struct batch *bt = dict_logs();
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, ROWS, &ob, path, sizeof(path), &n);

    /* attrs: count, list codes, offsets, data, key offsets, key data,
     * value offsets (14 entries + 1), value data */
    uint64_t len, at = column_at(f, n, 1, 6, &len);
    cr_assert_eq(get64(f + at), 15);
    struct vbuf want;
    vbuf_init(&want);
    entry(&want, 4, put_d);
    entry(&want, 6, put_y);
    entry(&want, 7, put_arr);
    entry(&want, 8, put_kv);
    entry(&want, 9, put_e);
    entry(&want, 3, put_200);
    entry(&want, 5, put_f);
    entry(&want, 3, put_201);
    entry(&want, 5, put_t);
    entry(&want, 0, put_get);
    entry(&want, 0, put_post);
    entry(&want, 0, put_put);
    entry(&want, 2, put_sb);
    entry(&want, 2, put_sa);
    at = column_at(f, n, 1, 7, &len);
    cr_assert_eq(len, want.len);
    cr_assert_arr_eq(f + at, want.p, want.len);
    uint64_t vdat = at, vlen = len;

    /* Row 0 (the first list): m=GET 21, u 2 "u00000", sw=b 24, i=200 17,
     * d 12, b=false 18, y 13, arr 14, kv 15, e 16, big 11 + its value. */
    vbuf_reset(&want);
    static const uint8_t head[] = {21, 2,  VAL_STR, 6,  'u', '0', '0', '0', '0', '0',
                                   24, 17, 12,      18, 13,  14,  15,  16,  11};
    cr_assert_eq(vbuf_put(&want, head, sizeof(head)), 0);
    char big[BIG];
    memset(big, 'z', sizeof(big));
    cr_assert_eq(val_put_str(&want, big, sizeof(big)), 0);
    uint64_t lat = column_at(f, n, 1, 3, &len);
    cr_assert_geq(len, want.len);
    cr_assert_arr_eq(f + lat, want.p, want.len);
    vbuf_fini(&want);

    blk *b = open_ok(path);
    check_block(b, ob, ROWS);
    blk_unref(b);

    /* Forged: a list code past the value dictionary (25 is its last), a
     * value entry whose key is past the keys (11) or whose value does not
     * fill it (a double retyped as a bool; a string running past it), and
     * more entries than the bytes can hold: the attribute table fails. */
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    memcpy(g, f, n);
    g[lat] = 25;
    fix_crcs(g, n);
    put_file(path, g, n);
    cr_assert_eq(load_attrs(path), 0, "code 25: the last entry, sw=a");
    uint64_t vat = column_at(f, n, 1, 6, &len);
    for (int forge = 0; forge < 5; forge++) {
        memcpy(g, f, n);
        if (forge == 0) {
            g[lat] = 26;
        } else if (forge == 1) {
            g[vdat] = 11; /* entry 0's key id */
        } else if (forge == 2) {
            g[vdat + 1] = VAL_BOOL; /* entry 0: uv 4, then the double's type */
        } else if (forge == 3) {
            /* entry 9 (GET): uv 0, VAL_STR, uv 3: claims 100 bytes */
            static const uint8_t get[] = {0, VAL_STR, 3, 'G', 'E', 'T'};
            uint8_t *e9 = memmem(g + vdat, vlen, get, sizeof(get));
            cr_assert_not_null(e9);
            e9[2] = 100;
        } else {
            put64(g + vat, 1000); /* 999 entries in 63 bytes */
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

/*
 * The writer's value table holds at most VD_WMAX entries (a bigger table
 * made every lookup a cache miss): VD_WMAX + 200 distinct values, each in
 * three adjacent rows (so the key never looks unique), put the first
 * VD_WMAX in the V column and leave the rest inline; every list still
 * reads back byte for byte.
 */
Test(block_fmt5, format_5_value_table_stops_at_the_writers_cap)
{
    enum { DISTINCT = VD_WMAX + 200, NROWS = 3 * DISTINCT };
    struct batch *bt = log_batch();
    char tmp[32];
    for (uint32_t i = 0; i < NROWS; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        snprintf(tmp, sizeof(tmp), "val%06u", i / 3);
        put_kv_str(h, "v", tmp, strlen(tmp));
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 1};
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, NROWS, &ob, path, sizeof(path), &n);
    uint64_t len, at = column_at(f, n, 1, 6, &len);
    cr_assert_eq(get64(f + at), VD_WMAX + 1, "value offsets: %llu",
                 (unsigned long long)get64(f + at));
    blk *b = open_ok(path);
    check_block(b, ob, NROWS);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * Past the writer's 4096 counted keys a row's list is stored literal
 * (code 0 and the whole key-value): the hot key columns the load finds
 * must still point at the hot key's value in those rows. 4200 rows, each
 * "h" = "x" (hot: every row) then a key of its own, "k0" .. "k4199": the
 * keys from row 4095 on are not counted.
 */
Test(block_fmt5, format_5_finds_hot_values_in_literal_lists)
{
    enum { N = 4200 };
    struct batch *bt = log_batch();
    for (uint32_t i = 0; i < N; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        char k[16];
        snprintf(k, sizeof(k), "k%u", i);
        put_kv_str(h, "h", "x", 1);
        cr_assert_eq(val_put_key(h, k, strlen(k)), 0);
        cr_assert_eq(val_put_int(h, i), 0);
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 2};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, N, 0, 91, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    cr_assert_eq(blk_n_hot_attrs(b), 1);
    for (uint64_t j = 0; j < N; j++) { /* rows in time order: as appended */
        struct val v;
        cr_assert_eq(blk_hot_attr(b, 0, j, &v), 1, "row %llu", (unsigned long long)j);
        cr_assert(v.type == VAL_STR && v.n == 1 && v.s[0] == 'x', "row %llu",
                  (unsigned long long)j);
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

static int put_25(struct vbuf *b)
{
    return val_put_double(b, 2.5);
}
static int put_300(struct vbuf *b)
{
    return val_put_int(b, 300);
}
static int put_sx(struct vbuf *b)
{
    return val_put_str(b, "x", 1);
}
static int put_sy(struct vbuf *b)
{
    return val_put_str(b, "y", 1);
}

/*
 * The writer remembers each list position's last key and each entered
 * key's last two values (block_write.c, struct akmem); what it finds there
 * must count exactly as the lookups would. 13 rows, keys in first sight
 * order k n d ab ba (ids 0..4):
 *   k   "x" in rows 0-4 (five in a row: the last value), then "y" in the
 *       odd rows 5-11 between unique "p6" .. "p12" (the older of the two
 *       values each time)
 *   n   int 300 (two varint bytes), but 5 in row 3 and INT64_MIN (ten
 *       varint bytes) in row 8
 *   d   double 2.5 in every row
 *   ab  true and ba false, in that order in even rows and swapped in odd
 *       rows: the same key lengths at the same positions, other keys
 * So V is d, ab, ba (13 each, first sight order), n=300 (11), k=x (5),
 * k=y (4): codes 6 .. 11 after the 5 keys, and every row's coded list is
 * known byte for byte.
 */
Test(block_fmt5, format_5_recent_keys_and_values_count_as_lookups)
{
    enum { NR = 13 };
    struct batch *bt = log_batch();
    char tmp[16];
    for (uint32_t i = 0; i < NR; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        if (i < 5) {
            put_kv_str(h, "k", "x", 1);
        } else if (i % 2) {
            put_kv_str(h, "k", "y", 1);
        } else {
            snprintf(tmp, sizeof(tmp), "p%u", i);
            put_kv_str(h, "k", tmp, strlen(tmp));
        }
        cr_assert_eq(val_put_key(h, "n", 1), 0);
        cr_assert_eq(val_put_int(h, i == 3 ? 5 : i == 8 ? INT64_MIN : 300), 0);
        cr_assert_eq(val_put_key(h, "d", 1), 0);
        cr_assert_eq(val_put_double(h, 2.5), 0);
        for (int e = 0; e < 2; e++) {
            bool ab = (e == 0) == (i % 2 == 0);
            cr_assert_eq(val_put_key(h, ab ? "ab" : "ba", 2), 0);
            cr_assert_eq(val_put_bool(h, ab), 0);
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 5};
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, NR, &ob, path, sizeof(path), &n);

    uint64_t len, at = column_at(f, n, 1, 6, &len);
    cr_assert_eq(get64(f + at), 7, "6 value entries");
    struct vbuf want;
    vbuf_init(&want);
    entry(&want, 2, put_25);
    entry(&want, 3, put_t);
    entry(&want, 4, put_f);
    entry(&want, 1, put_300);
    entry(&want, 0, put_sx);
    entry(&want, 0, put_sy);
    at = column_at(f, n, 1, 7, &len);
    cr_assert_eq(len, want.len);
    cr_assert_arr_eq(f + at, want.p, want.len);

    /* Each row's list differs from the row before: 13 lists, in row order. */
    vbuf_reset(&want);
    for (uint32_t i = 0; i < NR; i++) {
        if (i < 5 || i % 2) {
            cr_assert_eq(vbuf_put_u8(&want, i < 5 ? 10 : 11), 0);
        } else {
            snprintf(tmp, sizeof(tmp), "p%u", i);
            cr_assert_eq(vbuf_put_u8(&want, 1), 0);
            cr_assert_eq(val_put_str(&want, tmp, strlen(tmp)), 0);
        }
        if (i == 3 || i == 8) {
            cr_assert_eq(vbuf_put_u8(&want, 2), 0);
            cr_assert_eq(val_put_int(&want, i == 3 ? 5 : INT64_MIN), 0);
        } else {
            cr_assert_eq(vbuf_put_u8(&want, 9), 0);
        }
        uint8_t tail[3] = {6, i % 2 ? 8 : 7, i % 2 ? 7 : 8};
        cr_assert_eq(vbuf_put(&want, tail, 3), 0);
    }
    at = column_at(f, n, 1, 3, &len);
    cr_assert_eq(len, want.len, "lists: %llu bytes", (unsigned long long)len);
    cr_assert_arr_eq(f + at, want.p, want.len);
    vbuf_fini(&want);

    blk *b = open_ok(path);
    check_block(b, ob, NR);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * What the writer remembers of a block's keys and values is forgotten at
 * the next seal: block 1 enters k="p" then k="q", block 2 (the same
 * writer's scratch, block 1's open block freed) sees "q" first and more
 * often, so its V must be q then p, counted from its own rows only.
 */
Test(block_fmt5, format_5_recent_values_do_not_outlive_their_block)
{
    static const char *const seq[2][5] = {{"p", "p", "q", "p", "q"}, {"q", "q", "p", "q", "p"}};
    for (int blkno = 0; blkno < 2; blkno++) {
        struct batch *bt = log_batch();
        for (uint32_t i = 0; i < 5; i++) {
            struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
            struct vbuf *h = &bt->heap;
            size_t off = h->len;
            put_kv_str(h, "k", seq[blkno][i], 1);
            r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 1};
        }
        oblock *ob;
        char path[512];
        size_t n;
        uint8_t *f = seal_v5(bt, 5, &ob, path, sizeof(path), &n);
        uint64_t len, at = column_at(f, n, 1, 6, &len);
        cr_assert_eq(get64(f + at), 3, "block %d: 2 value entries", blkno);
        const uint8_t want[] = {0, VAL_STR, 1, (uint8_t)seq[blkno][0][0],
                                0, VAL_STR, 1, (uint8_t)seq[blkno][2][0]};
        at = column_at(f, n, 1, 7, &len);
        cr_assert_eq(len, sizeof(want), "block %d", blkno);
        cr_assert_arr_eq(f + at, want, sizeof(want), "block %d", blkno);
        blk *b = open_ok(path);
        check_block(b, ob, 5);
        blk_unref(b);
        free(f);
        oblock_free(ob);
        batch_free(bt);
    }
}

/*
 * A row whose list is byte for byte the row before's is counted without
 * a walk (block_write.c, attrs_repeat) unless the row before had an array
 * value or a value its key's table did not take: the counts, codes, hot
 * keys and bloom come out as walked. 12 rows, four runs:
 *   0-3   m "GET", n 300             (rows 1-3 repeat)
 *   4-6   arr ["x", 7], m "GET"      (an array: walked again)
 *   7-8   big 600 'z', m "GET"       (big is never entered: walked again)
 *   9-11  m "GET", n 300             (rows 10-11 repeat)
 * Keys m n arr big (ids 0..3); V is m=GET (12), n=300 (7), arr (3): codes
 * 5, 6, 7 (n=300 ahead of arr only if the repeats were counted); the hot
 * keys m (12 rows) and n (7); one list per run.
 */
Test(block_fmt5, format_5_repeated_lists_count_as_walked)
{
    enum { NR = 12 };
    struct batch *bt = log_batch();
    char big[BIG];
    memset(big, 'z', sizeof(big));
    for (uint32_t i = 0; i < NR; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        if (i >= 4 && i < 7) {
            cr_assert_eq(val_put_key(h, "arr", 3), 0);
            cr_assert_eq(put_arr(h), 0);
        } else if (i >= 7 && i < 9) {
            put_kv_str(h, "big", big, sizeof(big));
        }
        put_kv_str(h, "m", "GET", 3);
        if (i < 4 || i >= 9) {
            cr_assert_eq(val_put_key(h, "n", 1), 0);
            cr_assert_eq(val_put_int(h, 300), 0);
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 2};
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, NR, &ob, path, sizeof(path), &n);

    uint64_t len, at = column_at(f, n, 1, 6, &len);
    cr_assert_eq(get64(f + at), 4, "3 value entries");
    struct vbuf want;
    vbuf_init(&want);
    entry(&want, 0, put_get);
    entry(&want, 1, put_300);
    entry(&want, 2, put_arr);
    at = column_at(f, n, 1, 7, &len);
    cr_assert_eq(len, want.len);
    cr_assert_arr_eq(f + at, want.p, want.len);

    vbuf_reset(&want);
    static const uint8_t l1[] = {5, 6}, l2[] = {7, 5};
    cr_assert_eq(vbuf_put(&want, l1, 2), 0);
    cr_assert_eq(vbuf_put(&want, l2, 2), 0);
    cr_assert_eq(vbuf_put_u8(&want, 4), 0);
    cr_assert_eq(val_put_str(&want, big, sizeof(big)), 0);
    cr_assert_eq(vbuf_put_u8(&want, 5), 0);
    cr_assert_eq(vbuf_put(&want, l1, 2), 0);
    at = column_at(f, n, 1, 3, &len);
    cr_assert_eq(len, want.len, "lists: %llu bytes", (unsigned long long)len);
    cr_assert_arr_eq(f + at, want.p, want.len);
    vbuf_fini(&want);

    blk *b = open_ok(path);
    check_block(b, ob, NR); /* the hot keys recounted from the rows */
    cr_assert_eq(blk_n_hot_attrs(b), 2);
    cr_assert(blk_may_have_attr(b, "m", 1, "GET", 3));
    cr_assert(blk_may_have_attr(b, "arr", 3, "x", 1));
    cr_assert(blk_may_have_attr(b, "big", 3, big, sizeof(big)));
    struct blk_bloom_info bi;
    bool found = false;
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        cr_assert_eq(blk_bloom_info(b, i, &bi), 0);
        if (bi.kind == BLK_BLOOM_ATTRS) {
            found = true;
            cr_assert_eq(bi.n_items, 3, "m=GET, arr=x, big=z..: %llu",
                         (unsigned long long)bi.n_items);
        }
    }
    cr_assert(found);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * |ny| rows of the list y = "a", then 70 equal lists z = 600 'z' (too long
 * to enter: each one a distinct-looking value to the table, which stops
 * entering z's values after 64), then 5 rows of z = "s", sealed (the
 * block checked against its rows): the value-dictionary column's first
 * word, 1 with no entry.
 */
static uint64_t z_rows_vdict_word(uint32_t ny)
{
    enum { NLONG = 70 };
    uint32_t nr = ny + NLONG + 5;
    struct batch *bt = log_batch();
    char big[BIG];
    memset(big, 'z', sizeof(big));
    for (uint32_t i = 0; i < nr; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        if (i < ny) {
            put_kv_str(h, "y", "a", 1);
        } else if (i < ny + NLONG) {
            put_kv_str(h, "z", big, sizeof(big));
        } else {
            put_kv_str(h, "z", "s", 1);
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 1};
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, nr, &ob, path, sizeof(path), &n);
    uint64_t len, at = column_at(f, n, 1, 6, &len);
    uint64_t word = get64(f + at);
    blk *b = open_ok(path);
    check_block(b, ob, nr);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
    return word;
}

/*
 * A repeated list whose value its key's table left out is walked again,
 * so the value still counts towards the key looking unique (z_rows_vdict_word
 * without y rows). Counted so, "s" stays inline and V is empty; had the
 * repeats been skipped, z would still be entered and "s" (5 rows) in V.
 */
Test(block_fmt5, format_5_repeated_lists_still_count_values_left_out)
{
    uint64_t w = z_rows_vdict_word(0);
    cr_assert_eq(w, 1, "no value entries: %llu", (unsigned long long)w);
}

/*
 * A walk ends the repeats' run (block_write.c, akmem.rall): 3 rows of
 * y = "a" (rows 1-2 repeats, so the run's check was done) before the z
 * rows. The long z lists must each be walked although the row before the
 * first z walk was a repeat: z stops being entered, "s" stays inline and
 * V holds only y = "a" (2, where no entry reads 1); had the first z repeat
 * skipped its check on row 2's account, z would still be entered and "s"
 * in V too (3). Main's writer gives 2; with the walk's `am->rall = false`
 * removed it gives 3 and this fails.
 */
Test(block_fmt5, format_5_walk_ends_the_repeats_run)
{
    uint64_t w = z_rows_vdict_word(3);
    cr_assert_eq(w, 2, "value entries: %llu", (unsigned long long)w);
}

/*
 * Rows side by side with one trace id add it to the trace id bloom once
 * (block_write.c skips the repeats): rows 0-2 trace A, row 3 A's bytes
 * but no trace id, row 4 A, row 5 B. The bloom holds exactly A and B.
 */
Test(block_fmt5, adjacent_rows_of_one_trace_fill_the_trace_bloom_as_before)
{
    struct batch *bt = log_batch();
    uint8_t a[16], b2[16], c[16];
    memset(a, 0xa1, sizeof(a));
    memset(b2, 0xb2, sizeof(b2));
    memset(c, 0xc3, sizeof(c));
    for (uint32_t i = 0; i < 6; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        memcpy(r->trace_id, i == 5 ? b2 : a, 16);
        r->has_trace_id = i != 3;
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, 6, &ob, path, sizeof(path), &n);
    blk *b = open_ok(path);
    check_block(b, ob, 6);
    cr_assert(blk_may_have_trace(b, a));
    cr_assert(blk_may_have_trace(b, b2));
    cr_assert_not(blk_may_have_trace(b, c));
    struct blk_bloom_info bi;
    bool found = false;
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        cr_assert_eq(blk_bloom_info(b, i, &bi), 0);
        if (bi.kind == BLK_BLOOM_TRACE_IDS) {
            found = true;
            cr_assert_eq(bi.n_items, 2, "%llu", (unsigned long long)bi.n_items);
        }
    }
    cr_assert(found);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* A V entry: uv key id |key| (< 128), then the string |s| as val.h writes it. */
static void entry_str(struct vbuf *out, uint8_t key, const char *s)
{
    cr_assert_eq(vbuf_put_u8(out, key), 0);
    cr_assert_eq(val_put_str(out, s, strlen(s)), 0);
}

/*
 * A run of repeated lists counts every row of the run (block_write.c adds
 * a run's counts when the next walk starts, or once the rows are in:
 * attrs_flush). 18 rows:
 *   0-5    k "A", d "x", d "x"     (rows 1-5 repeat; d twice in a list)
 *   6-10   k "B", p "1" / p "2"    (alternating: each row walked)
 *   11-17  k "C"                   (rows 12-17 repeat, to the last row)
 * Keys k d p (ids 0..2). V, most frequent first: d=x (12: each of its two
 * places a row), k=C (7), k=A (6), k=B (5), p=1 (3), p=2 (2). Only k is
 * hot (18 rows; d is in 6 rows, not 9: counted once a row though it is
 * twice in the list). Counting a run as one row puts B ahead of A and C
 * last; leaving out the last run's counts puts C last; counting d twice a
 * repeated row makes it hot (1 + 5 x 2 = 11 rows).
 */
Test(block_fmt5, a_run_of_repeated_lists_counts_every_row)
{
    enum { NR = 18 };
    struct batch *bt = log_batch();
    for (uint32_t i = 0; i < NR; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        uint32_t n;
        if (i < 6) {
            put_kv_str(h, "k", "A", 1);
            put_kv_str(h, "d", "x", 1);
            put_kv_str(h, "d", "x", 1);
            n = 3;
        } else if (i < 11) {
            put_kv_str(h, "k", "B", 1);
            put_kv_str(h, "p", i % 2 ? "2" : "1", 1);
            n = 2;
        } else {
            put_kv_str(h, "k", "C", 1);
            n = 1;
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, n};
    }
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal_v5(bt, NR, &ob, path, sizeof(path), &n);
    uint64_t len, at = column_at(f, n, 1, 6, &len);
    cr_assert_eq(get64(f + at), 7, "6 value entries: %llu", (unsigned long long)get64(f + at));
    struct vbuf want;
    vbuf_init(&want);
    entry_str(&want, 1, "x");
    entry_str(&want, 0, "C");
    entry_str(&want, 0, "A");
    entry_str(&want, 0, "B");
    entry_str(&want, 2, "1");
    entry_str(&want, 2, "2");
    at = column_at(f, n, 1, 7, &len);
    cr_assert_eq(len, want.len, "V: %llu bytes", (unsigned long long)len);
    cr_assert_arr_eq(f + at, want.p, want.len);
    vbuf_fini(&want);
    blk *b = open_ok(path);
    check_block(b, ob, NR); /* the hot keys recounted from the rows */
    cr_assert_eq(blk_n_hot_attrs(b), 1);
    struct mstr k = blk_hot_attr_key(b, 0);
    cr_assert(k.len == 1 && k.p[0] == 'k');
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * A metric block writes each row's hot key position (block_write.c's
 * hot_build); a repeated list has no positions of its own and takes the
 * row before's. Gauge a: k "1" at 1-6 s (rows 1-5 repeat), k "22" at 7 s,
 * k "1" at 8-9 s (row 8 repeats), sealed and checked: every row's hot
 * value of k read back as the rows have it (check_block's check_hot).
 */
Test(block_fmt5, a_repeated_list_in_a_metric_block_has_the_row_befores_positions)
{
    struct batch *bt = metric_batch("a", MK_GAUGE);
    for (uint64_t t = 1; t <= 9; t++) {
        add_point(bt, 0, t, t == 7 ? "22" : "1");
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 9, 0, 91, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    check_block(b, ob, 9);
    cr_assert_eq(blk_n_hot_attrs(b), 1);
    struct val v;
    for (uint64_t j = 0; j < 9; j++) {
        cr_assert_eq(blk_hot_attr(b, 0, j, &v), 1, "row %llu", (unsigned long long)j);
        cr_assert(v.type == VAL_STR && v.n == (j == 6 ? 2u : 1u), "row %llu",
                  (unsigned long long)j);
    }
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
}
