/*
 * block_tvals_test.c - format 6's typed value streams (footer META flag
 * bit 4, blk_wopts.typed_vals; block_int.h "v6 TYPED VALUES"): the exact
 * bytes of each tag in a small crafted block, a value the tag would not
 * rebuild exactly left raw (the writer's round trip), every row's
 * attributes as without the flag on the generator's logs and spans and on
 * typed ones, and forged tags, heads and streams refused at the table load.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

#include "storage/block_int.h" /* the TV_ tags */

TestSuite(block_tvals, .init = fresh_dir);

#define ROWS 3
#define NK 7

/* Row i's value of key k (h, H, u, d, i, m, f). */
static void put_value(struct vbuf *h, int k, uint32_t i, bool exact)
{
    static const char *hex[ROWS] = {"0a1b", "ff00", "9c3d"}, *uhex[ROWS] = {"AB", "C0", "1F"};
    static const char *dec[ROWS] = {"u_7", "u_-12", "u_300"};
    static const double dbl[ROWS] = {1.5, -0.25, 3.0};
    static const int64_t ints[ROWS] = {5, -1, 1000};
    switch (k) {
    case 0: /* not exact: "0A1b" (one case or the other, not both) */
        cr_assert_eq(val_put_str(h, !exact && i == 0 ? "0A1b" : hex[i], 4), 0);
        break;
    case 1:
        cr_assert_eq(val_put_str(h, uhex[i], 2), 0);
        break;
    case 2: /* not exact: "u_007" (a leading zero) */
        cr_assert_eq(val_put_str(h, !exact && i == 1 ? "u_007" : dec[i],
                                 strlen(!exact && i == 1 ? "u_007" : dec[i])),
                     0);
        break;
    case 3: /* not exact: -0.0 (== 0.0, another bit pattern) */
        cr_assert_eq(val_put_double(h, !exact && i == 2 ? -0.0 : dbl[i]), 0);
        break;
    case 4:
        cr_assert_eq(val_put_int(h, ints[i]), 0);
        break;
    case 5: /* two types: raw */
        if (i == 1) {
            cr_assert_eq(val_put_int(h, 7), 0);
        } else {
            cr_assert_eq(val_put_str(h, i == 0 ? "x" : "y", 1), 0);
        }
        break;
    default: /* 0.1 + 0.2: no m / 10^e of e <= 9, raw */
        cr_assert_eq(val_put_double(h, i == 0 ? 0.1 + 0.2 : (double)i), 0);
        break;
    }
}

static struct batch *crafted(bool exact)
{
    static const char *keys[NK] = {"h", "H", "u", "d", "i", "m", "f"};
    struct batch *bt = log_batch();
    for (uint32_t i = 0; i < ROWS; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        for (int k = 0; k < NK; k++) {
            cr_assert_eq(val_put_key(h, keys[k], 1), 0);
            put_value(h, k, i, exact);
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, NK};
    }
    return bt;
}

/* The block at |path| opened and checked against |ob| (check_block). */
static void check_file(const char *path, const oblock *ob, uint64_t rows)
{
    blk *b = open_ok(path);
    check_block(b, ob, rows);
    blk_unref(b);
}

/* |bt| sealed at |path| (plain tables, lists by key, typed or not); the
 * file's bytes, malloc'd. */
static uint8_t *seal(struct batch *bt, bool typed, uint64_t seal_id, oblock **ob, char *path,
                     size_t cap, size_t *n)
{
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .attrs_by_key = true, .typed_vals = typed};
    cr_assert_eq(oblock_new(SIG_LOGS, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    return write_and_read(*ob, ROWS, seal_id, &o, path, cap, n);
}

/* The crafted block sealed typed (f, at path) and not (g, at path2). */
struct pair {
    struct batch *bt;
    oblock *ob, *ob2;
    char path[512], path2[512];
    size_t n, n2;
    uint8_t *f, *g;
};

static void pair_seal(struct pair *x, uint64_t seal_id)
{
    x->bt = crafted(true);
    x->f = seal(x->bt, true, seal_id, &x->ob, x->path, sizeof(x->path), &x->n);
    x->g = seal(x->bt, false, seal_id + 1, &x->ob2, x->path2, sizeof(x->path2), &x->n2);
}

static void pair_free(struct pair *x)
{
    free(x->f);
    free(x->g);
    oblock_free(x->ob);
    oblock_free(x->ob2);
    batch_free(x->bt);
}

/* The crafted block's attrs data (D data, 88 bytes): the codes (key id k
 * as code k + 1, seven a row), then each key's stream in its tag. */
static const uint8_t s_codes[] = {1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7};
static const uint8_t s_h[] = {2, 10, 27, 255, 0, 156, 61};   /* uv 2 a value: 0a1b ff00 9c3d */
static const uint8_t s_uh[] = {1, 171, 192, 31};             /* uv 1: AB C0 1F */
static const uint8_t s_u[] = {2, 'u', '_', 14, 23, 216, 4};  /* prefix "u_", zz 7, -12, 300 */
static const uint8_t s_d[] = {2, 2, 1, 44, 49, 88, 1, 0, 2}; /* e 2, w 2, zz: 300 49 600 */
static const uint8_t s_i[] = {VAL_INT, 10, 1, 208, 15};      /* the type, zz 5, -1, 1000 */
static const uint8_t s_m[] = {VAL_STR, 1, 'x', VAL_INT, 14, VAL_STR, 1, 'y'}; /* "x", 7, "y" */
static const uint8_t s_f[] = {VAL_DOUBLE, 52, 51, 51, 51, 51, 51, 211, 63,    /* 0.1 + 0.2 */
                              VAL_DOUBLE, 0,  0,  0,  0,  0,  0,  240, 63,    /* 1.0 */
                              VAL_DOUBLE, 0,  0,  0,  0,  0,  0,  0,   64};   /* 2.0 */
static const struct {
    const uint8_t *p;
    uint64_t n;
    uint8_t tag;
} typed[NK] = {
    {s_h, sizeof(s_h), TV_HEXL}, {s_uh, sizeof(s_uh), TV_HEXU}, {s_u, sizeof(s_u), TV_DEC},
    {s_d, sizeof(s_d), TV_DBL},  {s_i, sizeof(s_i), TV_ONE},    {s_m, sizeof(s_m), TV_RAW},
    {s_f, sizeof(s_f), TV_RAW}, /* m: two types; f: 0.1 + 0.2 has no m / 10^e of e <= 9 */
};

/*
 * With typed_vals the writer stores each key's stream in its tag (T: u64
 * length, u8 tag a key) and sets META flag bit 4; the list offsets are
 * those without it (the lists' own length, 51 bytes more than the 88
 * stored), and every row reads back exactly.
 */
Test(block_tvals, each_tag_stores_its_exact_bytes)
{
    struct pair x;
    pair_seal(&x, 70);
    const uint8_t *f = x.f, *g = x.g;
    size_t n = x.n, n2 = x.n2;
    uint64_t dl, tl, d = column_at(f, n, 1, 3, &dl), t = column_at(f, n, 1, 8, &tl);
    cr_assert_eq(dl, 88);
    cr_assert_arr_eq(f + d, s_codes, sizeof(s_codes));
    cr_assert_eq(tl, 9 * NK);
    uint64_t at = d + sizeof(s_codes);
    for (int k = 0; k < NK; k++) {
        cr_assert_eq(get64(f + t + 9 * k), typed[k].n, "key %d", k);
        cr_assert_eq(f[t + 9 * k + 8], typed[k].tag, "key %d", k);
        cr_assert_arr_eq(f + at, typed[k].p, typed[k].n, "key %d", k);
        at += typed[k].n;
    }
    cr_assert_eq(at, d + dl);
    uint64_t ml;
    cr_assert_eq(get64(f + section(f, n, 1, &ml) + 32), 1 | 16, "META flags");
    cr_assert_eq(get64(g + section(g, n2, 1, &ml) + 32), 1, "without typed_vals: no bit 4");
    column_at(g, n2, 1, 8, &tl);
    cr_assert_eq(tl, 8 * NK, "without typed_vals: format 6's u64 lengths");
    uint64_t o1, o2, l1, l2, gl;
    o1 = column_at(f, n, 1, 2, &l1);
    o2 = column_at(g, n2, 1, 2, &l2);
    cr_assert(l1 == l2 && memcmp(f + o1, g + o2, l1) == 0, "the same list offsets");
    column_at(g, n2, 1, 3, &gl);
    cr_assert_eq(gl, 88 + 51);

    check_file(x.path, x.ob, ROWS);
    check_file(x.path2, x.ob2, ROWS);
    pair_free(&x);
}

/*
 * A value its key's tag would not rebuild exactly leaves the key raw
 * (tag 0, its val.h bytes): "0A1b" among lower-case hex (both cases),
 * "u_007" (a leading zero), -0.0 among k / 100 doubles (equal to 0.0, not
 * its bits). The other keys keep their tags; every row reads back.
 */
Test(block_tvals, a_value_that_does_not_round_trip_leaves_its_key_raw)
{
    struct batch *bt = crafted(false);
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal(bt, true, 72, &ob, path, sizeof(path), &n);
    uint64_t dl, tl, d = column_at(f, n, 1, 3, &dl), t = column_at(f, n, 1, 8, &tl);
    static const uint8_t want_tag[NK] = {TV_RAW, TV_HEXU, TV_RAW, TV_RAW, TV_ONE, TV_RAW, TV_RAW};
    /* raw: 3 x (type, uv 4, 4 digits); "u_7" "u_007" "u_300" with their
     * types and lengths; 3 x 9 */
    static const uint64_t want_len[NK] = {18, 4, 19, 27, 5, 8, 27};
    static const uint8_t h_raw[] = {VAL_STR, 4,   '0', 'A',     '1', 'b', VAL_STR, 4,   'f',
                                    'f',     '0', '0', VAL_STR, 4,   '9', 'c',     '3', 'd'};
    cr_assert_eq(tl, 9 * NK);
    uint64_t at = d + 21;
    for (int k = 0; k < NK; k++) { /* each key's failure reported: h, u and d */
        cr_expect_eq(get64(f + t + 9 * k), want_len[k], "key %d", k);
        cr_expect_eq(f[t + 9 * k + 8], want_tag[k], "key %d", k);
        at += want_len[k];
    }
    cr_assert_eq(at, d + dl);
    cr_assert_arr_eq(f + d + 21, h_raw, sizeof(h_raw));
    check_file(path, ob, ROWS);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/*
 * Forged typed streams fail the attribute table's load with -EBADMSG: an
 * unknown tag, a head out of range (0 bytes a hex value, exponent 10, 9
 * bytes a mantissa, zz flag 2), a stream overrun (h one byte short), a
 * stream not used up (d's planes read as one of 1 byte: 6 values, 3
 * taken), planes not a whole number of values (d one byte short), a
 * rebuilt length shorter or longer than the offsets' (u's -12 as 12, 7 as
 * 20), a tag that overruns, a T column of u64 lengths only, and bit 4
 * cleared (the same T read as u64 lengths) or set on a block that is not
 * typed.
 */
Test(block_tvals, forged_typed_streams_fail_the_load)
{
    struct pair x;
    pair_seal(&x, 73);
    const uint8_t *f = x.f, *f2 = x.g;
    size_t n = x.n, n2 = x.n2;
    const char *path = x.path;
    uint64_t len, d = column_at(f, n, 1, 3, &len), t = column_at(f, n, 1, 8, &len);
    uint64_t l, ts = section(f, n, 2, &l), meta = section(f, n, 1, &l);
    uint64_t toff = get64(f + ts + 8 + 32 * 1 + 8); /* the attrs table */
    uint8_t *g = malloc(n > n2 ? n : n2);
    cr_assert_not_null(g);

    memcpy(g, f, n);
    cr_assert_eq(forged_load(path, g, n), 0, "unforged");
    for (int forge = 0; forge < 14; forge++) {
        memcpy(g, f, n);
        if (forge == 0) {
            g[t + 8] = TV_NTAGS;
        } else if (forge == 1) {
            g[d + 21] = 0; /* h: 0 bytes a value */
        } else if (forge == 2) {
            g[d + 39] = TV_E_MAX + 1; /* d: exponent 10 */
        } else if (forge == 3) {
            put64(g + t, 6); /* h 6 bytes, H 5: h's last value overruns */
            put64(g + t + 9, 5);
        } else if (forge == 4) {
            g[d + 40] = 1; /* d: w 1, six values of which three taken */
        } else if (forge == 5) {
            g[d + 36] = 24; /* u: "u_12" for "u_-12": one byte short */
        } else if (forge == 6) {
            g[d + 35] = 40; /* u: "u_20" for "u_7": one byte over */
        } else if (forge == 7) {
            g[t + 8 + 9 * 4] = TV_HEXL; /* i as hex: 3 bytes a value (its head), 4 there */
        } else if (forge == 8) {
            put64(g + toff + 8 + 16 * 8 + 8, 8 * NK); /* T: u64 lengths only */
        } else if (forge == 9) {
            put64(g + meta + 32, 1); /* bit 4 cleared */
        } else if (forge == 11) {
            g[d + 40] = 9; /* d: 9 bytes a mantissa */
        } else if (forge == 12) {
            g[d + 41] = 2; /* d: zz flag 2 */
        } else if (forge == 13) {
            put64(g + t + 9 * 3, 8); /* d 8 bytes (3 + 5: not 2 planes), i 6 */
            put64(g + t + 9 * 4, 6);
        } else {               /* 10 */
            memcpy(g, f2, n2); /* bit 4 set on lists by key, not typed */
            put64(g + section(g, n2, 1, &l) + 32, 1 | 16);
        }
        cr_assert_eq(forged_load(path, g, forge == 10 ? n2 : n), -EBADMSG, "forge %d", forge);
    }
    free(g);
    pair_free(&x);
}

/* The tag of key id k's stream in the plain block f[0, n) (T entry k). */
static uint8_t plain_tag(const uint8_t *f, size_t n, uint64_t k)
{
    uint64_t tl, t = column_at(f, n, 1, 8, &tl);
    cr_assert_lt(9 * k, tl);
    return f[t + 9 * k + 8];
}

/*
 * Every single-bit flip of the typed attrs data and T column (88 + 63
 * bytes, 1,208 files) loads as 0 or -EBADMSG, never past a buffer (ASan):
 * a flip that still loads (a hex digit, a mantissa bit) reads every row.
 */
Test(block_tvals, every_bit_flip_of_the_streams_loads_or_fails_cleanly)
{
    struct pair x;
    pair_seal(&x, 90);
    uint64_t dl, tl, d = column_at(x.f, x.n, 1, 3, &dl), t = column_at(x.f, x.n, 1, 8, &tl);
    uint8_t *g = malloc(x.n);
    cr_assert_not_null(g);
    unsigned ok = 0, bad = 0;
    for (uint64_t i = 0; i < dl + tl; i++) {
        uint64_t at = i < dl ? d + i : t + (i - dl);
        for (int bit = 0; bit < 8; bit++) {
            memcpy(g, x.f, x.n);
            g[at] ^= (uint8_t)(1u << bit);
            int rc = forged_load(x.path, g, x.n);
            cr_assert(rc == 0 || rc == -EBADMSG, "byte %llu bit %d: %d", (unsigned long long)i, bit,
                      rc);
            if (rc == 0) {
                blk *b = open_ok(x.path);
                for (uint64_t j = 0; j < ROWS; j++) {
                    cr_assert_eq(row_attrs(b, j).count, NK);
                }
                blk_unref(b);
            }
            ok += rc == 0;
            bad += rc != 0;
        }
    }
    cr_assert_eq(ok + bad, 8 * (dl + tl));
    cr_assert_gt(bad, 0);
    free(g);
    pair_free(&x);
}

/* Metric blocks take no typed values: the writer leaves bit 4 clear with
 * the option set, and a reader takes the bit on one for a newer writer's. */
Test(block_tvals, metric_blocks_have_no_bit_4)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .attrs_by_key = true, .typed_vals = true};
    char path[512], err[256];
    size_t n;
    uint8_t *f = write_and_read(ob, 6, 95, &o, path, sizeof(path), &n);
    uint64_t l, meta = section(f, n, 1, &l);
    cr_assert_eq(get64(f + meta + 32) & 16, 0);
    put64(f + meta + 32, get64(f + meta + 32) | 16);
    fix_crcs(f, n);
    put_file(path, f, n);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "footer meta flags") != NULL, "%s", err);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* The stored bytes of |b|'s attrs table. */
static uint64_t attrs_stored(blk *b)
{
    struct blk_table_info i;
    cr_assert_eq(blk_table_info(b, 1, &i), 0);
    return i.length;
}

/*
 * Typed values as a service writes them, 600 log rows: session.id 16
 * lower-case hex digits (TV_HEXL), user.id "user_<n>" (TV_DEC), load
 * k / 100 (TV_DBL), count an int (TV_ONE), name a word and a number
 * (TV_ONE), big a
 * double past 2^53 / 100 (raw), neg "-<n>" (TV_DEC of no prefix). Each
 * key's tag, every row read back, zstd (the cold tier's options) and
 * plain, and the zstd attrs table smaller than without the flag.
 */
Test(block_tvals, service_values_take_their_tags_and_read_back)
{
    enum { N = 600 };
    static const char *keys[] = {"session.id", "user.id", "load", "count", "name", "big", "neg"};
    static const uint8_t want[] = {TV_HEXL, TV_DEC, TV_DBL, TV_ONE, TV_ONE, TV_RAW, TV_DEC};
    struct batch *bt = log_batch();
    uint64_t s = 1212;
    for (uint32_t i = 0; i < N; i++) {
        struct log_row *r = log_at(bt, (uint64_t)(i + 1) * 1000000ull);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        char v[32];
        for (int k = 0; k < 7; k++) {
            cr_assert_eq(val_put_key(h, keys[k], strlen(keys[k])), 0);
            uint64_t x = gen_rnd(&s);
            if (k == 0) {
                snprintf(v, sizeof(v), "%016llx", (unsigned long long)x);
            } else if (k == 1) {
                snprintf(v, sizeof(v), "user_%llu", (unsigned long long)(x % 1000000));
            } else if (k == 6) {
                snprintf(v, sizeof(v), "%lld", -(long long)(x % 100000) - 1);
            }
            if (k == 0 || k == 1 || k == 6) {
                cr_assert_eq(val_put_str(h, v, strlen(v)), 0);
            } else if (k == 2) {
                cr_assert_eq(val_put_double(h, (double)(x % 100000) / 100.0), 0);
            } else if (k == 3) {
                cr_assert_eq(val_put_int(h, (int64_t)(x % 1000000) - 500000), 0);
            } else if (k == 4) { /* no prefix of them all */
                snprintf(v, sizeof(v), "%s%llu", gen_words[x % GEN_N_WORDS],
                         (unsigned long long)(x / GEN_N_WORDS % 1000));
                cr_assert_eq(val_put_str(h, v, strlen(v)), 0);
            } else {
                cr_assert_eq(val_put_double(h, 1e17 + (double)(x % 1000) * 64.0), 0);
            }
        }
        r->attrs = (struct attrs){{(uint32_t)off, (uint32_t)(h->len - off)}, 7};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .attrs_by_key = true, .typed_vals = true};
    char pp[512], pz[512], pu[512];
    write_block(ob, N, 0, 75, &o, pp, sizeof(pp));
    o.codec = BLK_CODEC_ZSTD;
    o.zstd_root = true;
    write_block(ob, N, 0, 76, &o, pz, sizeof(pz));
    o.typed_vals = false;
    write_block(ob, N, 0, 77, &o, pu, sizeof(pu));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(pp, '/') + 1, &n);
    cr_assert_not_null(f);
    /* key ids in order of first use: as keys[] */
    for (uint64_t k = 0; k < 7; k++) {
        cr_assert_eq(plain_tag(f, n, k), want[k], "%s", keys[k]);
    }
    free(f);
    blk *bp = open_ok(pp), *bz = open_ok(pz), *bu = open_ok(pu);
    check_block(bp, ob, N);
    check_block(bz, ob, N);
    uint64_t lz = attrs_stored(bz), lu = attrs_stored(bu);
    cr_assert_lt(lz, lu, "%llu vs %llu", (unsigned long long)lz, (unsigned long long)lu);
    blk_unref(bp);
    blk_unref(bz);
    blk_unref(bu);
    oblock_free(ob);
    batch_free(bt);
}

/* The widest rebuild a stream allows (TV_DEC values of a 64-byte prefix and
 * one digit: 68 bytes of lists from 2 stored bytes) reads back whole; a
 * |want| past AKEYS_GROWTH x the stored bytes is refused before anything
 * is allocated for it, whether or not the allocation would succeed. */
Test(block_tvals, rebuilt_length_is_bounded_by_the_stored_bytes)
{
    enum { N = 1000 };
    struct vbuf d = {0};
    for (int i = 0; i < N; i++) {
        vbuf_put(&d, (const uint8_t[]){1}, 1); /* code 1: key 1 */
    }
    size_t head = d.len;
    vbuf_put(&d, (const uint8_t[]){TV_PRE_MAX}, 1);
    for (int i = 0; i < TV_PRE_MAX; i++) {
        vbuf_put(&d, (const uint8_t *)"p", 1);
    }
    for (int i = 0; i < N; i++) {
        vbuf_put(&d, (const uint8_t[]){(uint8_t)(2 * (i % 5))}, 1); /* zz of i % 5 */
    }
    uint8_t tdir[9];
    uint64_t slen = d.len - head;
    memcpy(tdir, &slen, 8);
    tdir[8] = TV_DEC;
    uint64_t want = (uint64_t)N * (1 + 2 + TV_PRE_MAX + 1);
    uint8_t *out = NULL;
    cr_assert_eq(akeys_from_keys(d.p, d.len, tdir, 9, 1, 0, true, want, &out), 0);
    for (int i = 0; i < N; i++) {
        const uint8_t *r = out + (size_t)i * (want / N);
        cr_assert(r[0] == 1 && r[1] == VAL_STR && r[2] == TV_PRE_MAX + 1 && r[3] == 'p' &&
                      r[2 + TV_PRE_MAX] == 'p' && r[3 + TV_PRE_MAX] == '0' + i % 5,
                  "value %d", i);
    }
    free(out);
    uint64_t over[] = {(uint64_t)d.len * AKEYS_GROWTH + AKEYS_GROWTH, 1ull << 40, 1ull << 62};
    for (size_t j = 0; j < sizeof(over) / sizeof(over[0]); j++) {
        out = NULL;
        cr_assert_eq(akeys_from_keys(d.p, d.len, tdir, 9, 1, 0, true, over[j], &out), -EBADMSG,
                     "want %llu", (unsigned long long)over[j]);
        cr_assert_null(out);
    }
    free(d.p);
}

/* The generator's logs and spans (mixed types a key: mostly raw), zstd
 * with typed values: every row as the oblock's, and as the same block's
 * without the flag. */
Test(block_tvals, generator_logs_and_spans_read_back)
{
    for (int sg = 0; sg < 2; sg++) {
        enum signal sig = sg == 0 ? SIG_LOGS : SIG_TRACES;
        oblock *ob = gen_oblock(sig, 7007 + (uint64_t)sg, 500, 50);
        uint64_t rows = oblock_rows(ob);
        struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true, .attrs_by_key = true};
        char pu[512], pt[512];
        write_block(ob, rows, 0, 78 + 2 * (uint64_t)sg, &z, pu, sizeof(pu));
        z.typed_vals = true;
        write_block(ob, rows, 0, 79 + 2 * (uint64_t)sg, &z, pt, sizeof(pt));
        blk *bu = open_ok(pu), *bt = open_ok(pt);
        check_block(bt, ob, rows);
        for (uint64_t j = 0; j < rows; j++) {
            struct oattrs a = row_attrs(bt, j), b = row_attrs(bu, j);
            cr_assert(a_eq(a, b), "%s row %llu", sg ? "span" : "log", (unsigned long long)j);
        }
        blk_unref(bu);
        blk_unref(bt);
        oblock_free(ob);
    }
}
