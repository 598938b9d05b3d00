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

/* A log batch of one resource and scope. */
static struct batch *log_batch(void)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    return bt;
}

/* A log record of |bt| at |t| ns (time and observed time). */
static struct log_row *log_at(struct batch *bt, uint64_t t)
{
    struct log_row *r = batch_add_log(bt);
    cr_assert_not_null(r);
    r->time_ns = r->observed_ns = t;
    return r;
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
 * the file's bytes (*n of them, malloc'd), checked to be format 5. */
static uint8_t *seal_v5(struct batch *bt, uint64_t rows, oblock **ob, char *path, size_t cap,
                        size_t *n)
{
    cr_assert_eq(oblock_new(SIG_LOGS, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    write_block(*ob, rows, 0, 90, NULL, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 5, "format 5");
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

/* Opens |path| (no verification cache) and reads row 0's attributes. */
static int load_attrs(const char *path)
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
