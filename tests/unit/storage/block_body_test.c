/*
 * block_body_test.c - format 6's log bodies by template (block_int.h, "v6
 * LOG BODIES"; blk_wopts.body_tmpl, META flag bit 2): the exact bytes the
 * writer stores for two bodies, crafted bodies on every path (ints at
 * their edges, leading zeros, signs, 20 digits, hex of odd length and
 * either case, mixed tokens, unicode, bytes that are not UTF-8, the
 * placeholder bytes, NULs, long and empty bodies, bodies that are not
 * strings) rebuilt byte for byte, a block by template equal row for row to
 * the same rows without it, and forged encodings refused.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

#include "storage/block_wint.h"

TestSuite(block_body, .init = fresh_dir);

struct body {
    const char *p;
    size_t n;
    enum val_type type;
};
#define STR(s)                                                                                     \
    {                                                                                              \
        s, sizeof(s) - 1, VAL_STR                                                                  \
    }

static char long_hex[301], long_body[5001], long_digits[260];

static void fill_long(void)
{
    for (int i = 0; i < 300; i++) {
        long_hex[i] = "0123456789abcdef"[i % 16];
    }
    for (int i = 0; i < 5000; i++) {
        long_body[i] = i % 7 == 6 ? ' ' : (char)('a' + i % 26);
        if (i % 50 == 0) {
            long_body[i] = (char)('0' + i % 10);
        }
    }
    memset(long_digits, '7', 259);
}

/* Every path of block_body.c's tokenizer, and the literals. */
static struct body crafted[] = {
    STR(""),
    STR("plain words only"),
    STR("user_123 logged in from 10.0.0.255"),
    STR("0"),
    STR("00"),
    STR("007 leading zeros 0001 x0"),
    STR("-42 +7 signs -0"),
    STR("1234567890123456789 nineteen digits 9999999999999999999"),
    STR("10000000000000000000 twenty digits 18446744073709551615 99999999999999999999"),
    STR("184467440737095516150 twenty-one"),
    STR("req-00ff00ff00ff00ff done"),
    STR("odd hex abc1f ABC1F f 1 a1 A1"),
    STR("mixed case aBc1F 0xDEADbeef1"),
    STR("mixed tokens 12ms v2 abc123def 3rd 1x1z"),
    STR("unicode caf\xc3\xa9 \xe2\x82\xac"
        "42 \xf0\x9f\x98\x80 9"),
    STR("not utf-8 \xff\xfe\x80 9 \xc3"),
    STR("a placeholder \x01 byte 5"),
    STR("\x02"),
    STR("\x03 3"),
    STR("word \x04"),
    STR("nul \x00 inside 5\x00"),
    STR("tab\tnl\n\tat com.shop.Cart.add(Cart.java:123)\r\n"),
    STR("   "),
    STR("12"),
    STR("deadbeef cafe 1e5 1E5"),
    {long_hex, 300, VAL_STR},
    {long_hex, 256, VAL_STR},
    {long_hex, 257, VAL_STR},
    {long_digits, 259, VAL_STR},
    {long_body, 5000, VAL_STR},
    {"\x03\x2a", 2, VAL_INT}, /* not strings: literals, whatever the bytes */
    {"\x07\x03\x01\x02\x03", 5, VAL_BYTES},
    {"", 0, VAL_EMPTY},
    {"\x01\x05hello", 7, VAL_BYTES},
};
#define NCRAFTED (sizeof(crafted) / sizeof(crafted[0]))

/* The layout encode and rebuild use: META flag bit 8's (codes by use,
 * variables by slot) or bit 2's alone. */
static bool slots;

/* Bodies b[0, n) coded by btmpl_build into |x| (the caller frees it with
 * free(x->offs), vbuf_fini(&x->data)); *coded as the writer sets it. */
static void encode(const struct body *b, size_t n, struct strb *x, bool *coded)
{
    struct strb s = {0};
    uint64_t *bt = calloc(n + 1, sizeof(*bt));
    s.offs = calloc(n + 1, sizeof(*s.offs));
    cr_assert(bt != NULL && s.offs != NULL);
    vbuf_init(&s.data);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(vbuf_put(&s.data, b[i].n ? b[i].p : "", b[i].n), 0);
        s.offs[i + 1] = s.data.len;
        bt[i] = b[i].type;
    }
    struct btmpl t = {0};
    memset(x, 0, sizeof(*x));
    cr_assert_eq(btmpl_build(&t, &s, bt, n, slots, x, coded), 0);
    btmpl_free(&t);
    free(s.offs);
    vbuf_fini(&s.data);
    free(bt);
}

/* btmpl_rebuild of enc[0, len) for |rows| rows. */
static int rebuild(const uint8_t *enc, size_t len, uint64_t rows, uint8_t **buf, uint64_t **offs)
{
    struct scol sc = {{(const uint8_t *)"", 0, 0}, enc};
    int rc = btmpl_rebuild(&sc, len, rows, slots, buf, offs);
    if (rc == 0) {
        cr_assert_eq(sc.off.p, (const uint8_t *)*offs);
        cr_assert_eq(sc.off.width, 8);
    }
    return rc;
}

/* The crafted bodies coded in the layout |slots| says, rebuilt byte for
 * byte; every prefix of their encoding refused. */
static void crafted_round_trip(void)
{
    fill_long();
    struct strb x;
    bool coded;
    encode(crafted, NCRAFTED, &x, &coded);
    cr_assert(coded);
    for (size_t i = 0; i <= NCRAFTED; i++) {
        cr_assert_eq(x.offs[i], 0, "the offsets are all 0");
    }
    uint8_t *buf;
    uint64_t *offs;
    cr_assert_eq(rebuild(x.data.p, x.data.len, NCRAFTED, &buf, &offs), 0);
    for (size_t i = 0; i < NCRAFTED; i++) {
        cr_assert_eq(offs[i + 1] - offs[i], crafted[i].n, "body %zu: length", i);
        cr_assert_eq(memcmp(buf + offs[i], crafted[i].n ? crafted[i].p : "", crafted[i].n), 0,
                     "body %zu: bytes", i);
    }
    free(buf);
    free(offs);
    /* Every prefix of the encoding is refused (truncation), never read past. */
    for (size_t cut = 0; cut < x.data.len; cut++) {
        uint8_t *p = malloc(cut + 1);
        memcpy(p, x.data.p, cut);
        cr_assert_eq(rebuild(p, cut, NCRAFTED, &buf, &offs), -EBADMSG, "cut at %zu", cut);
        cr_assert_null(buf);
        cr_assert_null(offs);
        free(p);
    }
    free(x.offs);
    vbuf_fini(&x.data);
}

Test(block_body, crafted_bodies_rebuild_byte_for_byte)
{
    crafted_round_trip();
}

Test(block_body, crafted_bodies_by_slot_rebuild_byte_for_byte)
{
    slots = true;
    crafted_round_trip();
}

/* Blocks that leave streams or dictionaries empty (no buffer behind
 * them: the fuzzer's first find) rebuild too. */
static void sparse_round_trip(void)
{
    static const struct body sets[][2] = {
        {STR("only words"), STR("no numbers")},
        {STR(""), STR("")},
        {{"\x03\x02", 2, VAL_INT}, {"", 0, VAL_EMPTY}},
        {STR("42"), STR("7 ")},
        {STR("ff0a"), STR(", ")},
    };
    for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++) {
        struct strb x;
        bool coded;
        encode(sets[k], 2, &x, &coded);
        cr_assert(coded);
        uint8_t *buf;
        uint64_t *offs;
        cr_assert_eq(rebuild(x.data.p, x.data.len, 2, &buf, &offs), 0, "set %zu", k);
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(offs[i + 1] - offs[i], sets[k][i].n, "set %zu body %d", k, i);
            cr_assert_eq(memcmp(buf + offs[i], sets[k][i].p, sets[k][i].n), 0);
        }
        free(buf);
        free(offs);
        free(x.offs);
        vbuf_fini(&x.data);
    }
}

Test(block_body, sparse_blocks_rebuild)
{
    sparse_round_trip();
}

Test(block_body, sparse_blocks_by_slot_rebuild)
{
    slots = true;
    sparse_round_trip();
}

/* "user 42 ok" and "user 7 ff0a": two templates, two words, two ints, one
 * hex run. */
static const struct body two[] = {STR("user 42 ok"), STR("user 7 ff0a")};
static const uint8_t two_coded[] = {
    2,    2,    2,   21,                       /* rows, templates, words, rebuilt bytes */
    12,   8,    2,   8,   3,   2, 1,   2,   0, /* section lengths */
    5,    4,    ' ', 1,   ' ', 4,              /* template 0: word int word */
    5,    4,    ' ', 1,   ' ', 2,              /* template 1: word int hex */
    4,    'u',  's', 'e', 'r', 2, 'o', 'k',    /* words */
    1,    2,                                   /* codes */
    2,    1,    0,   0, /* template 0's bytes of word refs, ints, hex digits, hex */
    1,    1,    1,   2, /* template 1's */
    0,    1,    0,      /* word refs */
    42,   7,            /* ints */
    4,                  /* hex digits */
    0xff, 0x0a,         /* hex */
};

Test(block_body, two_bodies_take_the_documented_bytes)
{
    struct strb x;
    bool coded;
    encode(two, 2, &x, &coded);
    cr_assert(coded);
    cr_assert_eq(x.data.len, sizeof(two_coded));
    cr_assert_eq(memcmp(x.data.p, two_coded, sizeof(two_coded)), 0);
    free(x.offs);
    vbuf_fini(&x.data);
}

/* |src| with byte |at| set to |v| (or, at < 0, as it is), rebuilt as
 * |rows| rows. */
static int forged_rows(long at, uint8_t v, const uint8_t *src, size_t n, uint64_t rows)
{
    uint8_t f[64];
    cr_assert(n <= sizeof(f));
    memcpy(f, src, n);
    if (at >= 0) {
        f[at] = v;
    }
    uint8_t *buf;
    uint64_t *offs;
    int rc = rebuild(f, n, rows, &buf, &offs);
    if (rc == 0) {
        free(buf);
        free(offs);
    }
    return rc;
}

/* two_coded (or a forgery of it) with byte |at| set to |v|, rebuilt. */
static int forged(long at, uint8_t v, const uint8_t *src, size_t n)
{
    return forged_rows(at, v, src, n, 2);
}

Test(block_body, forged_encodings_fail_the_rebuild)
{
    const uint8_t *c = two_coded;
    size_t n = sizeof(two_coded);
    cr_assert_eq(forged(-1, 0, c, n), 0, "as written");
    cr_assert_eq(forged(0, 3, c, n), -EBADMSG, "rows not the block's");
    cr_assert_eq(forged(3, 22, c, n), -EBADMSG, "more bytes announced than rebuilt");
    cr_assert_eq(forged(3, 20, c, n), -EBADMSG, "fewer bytes announced");
    cr_assert_eq(forged(1, 13, c, n), -EBADMSG, "more templates than their bytes");
    cr_assert_eq(forged(4, 13, c, n), -EBADMSG, "sections past the data");
    cr_assert_eq(forged(33, 3, c, n), -EBADMSG, "a code past the templates");
    cr_assert_eq(forged(44, 2, c, n), -EBADMSG, "a word past the dictionary");
    cr_assert_eq(forged(33, 0, c, n), -EBADMSG, "a literal with no literal stream");
    cr_assert_eq(forged(13, 9, c, n), -EBADMSG, "a template entry past its section");
    cr_assert_eq(forged(48, 3, c, n), -EBADMSG, "an odd hex run needs the bytes of an even one");
    cr_assert_eq(forged(48, 0, c, n), -EBADMSG, "a hex run of no digits");
    /* template 0's int 42 as 0x87, a varint that runs past template 0's ints */
    cr_assert_eq(forged(46, 0x87, c, n), -EBADMSG, "a varint past its stream");
    cr_assert_eq(forged(36, 2, c, n), -EBADMSG, "template parts over the int stream");
    cr_assert_eq(forged(35, 1, c, n), -EBADMSG, "template parts short of the word refs");

    /* A stream not used up: one int more, its section one byte longer. */
    uint8_t f[64];
    memcpy(f, c, 48);
    f[48] = 9; /* the extra int, template 1's */
    memcpy(f + 49, c + 48, n - 48);
    f[9] = 3;
    f[40] = 2;
    cr_assert_eq(forged(-1, 0, f, n + 1), -EBADMSG, "an int left over");
    /* An odd run with its high nibble set: digits 3, bytes 0x1f 0x0a. */
    memcpy(f, c, n);
    f[3] = 20;
    f[48] = 3;
    f[49] = 0x1f;
    cr_assert_eq(forged(-1, 0, f, n), -EBADMSG, "odd hex run, high nibble set");
    f[49] = 0x0f;
    cr_assert_eq(forged(-1, 0, f, n), 0, "odd hex run f0a");

    /* Offsets that are not all zero. */
    uint8_t *buf;
    uint64_t *offs;
    struct scol sc = {{(const uint8_t *)"", 1, 0}, c};
    cr_assert_eq(btmpl_rebuild(&sc, n, 2, false, &buf, &offs), -EBADMSG);
}

/* |ob|'s rows sealed at |path| by |o|; the file's bytes (malloc'd). */
static uint8_t *seal_as(oblock *ob, uint64_t rows, uint64_t seal_id, const struct blk_wopts *o,
                        char *path, size_t *n)
{
    write_block(ob, rows, 0, seal_id, o, path, 600);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 6, "format 6");
    return f;
}

static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t len, m = section(f, n, 1, &len);
    cr_assert_neq(m, 0);
    return get64(f + m + 32);
}

static oblock *two_logs(void)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (int i = 0; i < 2; i++) {
        struct log_row *r = batch_add_log(bt);
        r->time_ns = r->observed_ns = (uint64_t)(i + 1) * 1000000000ull;
        r->body_type = VAL_STR;
        r->body_str = (struct mstr){two[i].p, (uint32_t)two[i].n};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    return ob;
}

Test(block_body, the_root_holds_the_coded_bodies_under_meta_bit_2)
{
    oblock *ob = two_logs();
    char pa[600], pb[600];
    size_t na, nb;
    struct blk_wopts plain = {.codec = BLK_CODEC_PLAIN};
    struct blk_wopts tmpl = {.codec = BLK_CODEC_PLAIN, .body_tmpl = true};
    uint8_t *fa = seal_as(ob, 2, 1, &plain, pa, &na);
    uint8_t *fb = seal_as(ob, 2, 2, &tmpl, pb, &nb);
    cr_assert_eq(meta_flags(fa, na), 1);
    cr_assert_eq(meta_flags(fb, nb), 5, "sorted, bodies by template");
    /* root columns: time, scope, severity, severity text (3), body type,
     * then the body's offsets (7) and data (8) */
    uint64_t len, at = column_at(fb, nb, 0, 8, &len);
    cr_assert_eq(len, sizeof(two_coded));
    cr_assert_eq(memcmp(fb + at, two_coded, len), 0);
    at = column_at(fb, nb, 0, 7, &len);
    cr_assert_eq(len, 24, "one INT header: every offset 0, width 0");
    cr_assert_eq(fb[at + 16], 0, "width 0");
    at = column_at(fa, na, 0, 8, &len);
    cr_assert_eq(len, 21);
    cr_assert_eq(memcmp(fa + at, "user 42 okuser 7 ff0a", 21), 0);

    blk *b = open_ok(pb);
    check_block(b, ob, 2);
    blk_unref(b);

    /* A code past the dictionary: the open and the reads that want no
     * body pass; the first read that wants one fails, and so does every
     * later one, with nothing rebuilt. */
    at = column_at(fb, nb, 0, 8, &len);
    fb[at + 33] = 3;
    fix_crcs(fb, nb);
    put_file(pb, fb, nb);
    char err[256];
    b = NULL;
    cr_assert_eq(blk_open_ex(pb, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    struct log_view v;
    cr_assert_eq(blk_log(b, 1, BLK_ALL | BLK_NOBODY, &v), 0);
    cr_assert_eq(v.time_ns, 2000000000ull);
    cr_assert_eq(v.body_type, VAL_STR);
    cr_assert_eq(v.body_str.len, 0);
    cr_assert_eq(blk_log(b, 0, BLK_ROOT, &v), -EBADMSG);
    cr_assert_eq(blk_log_body(b, 0, &v), -EBADMSG);
    cr_assert_eq(blk_load(b, BLK_ROOT), -EBADMSG);
    cr_assert_eq(blk_load(b, BLK_ROOT | BLK_NOBODY), 0);
    cr_assert_eq(blk_log(b, 1, BLK_ROOT | BLK_NOBODY, &v), 0, "the other fields stay readable");
    cr_assert_eq(blk_body_rebuilds(b), 0);
    blk_unref(b);
    free(fa);
    free(fb);
    oblock_free(ob);
}

Test(block_body, meta_bit_2_is_refused_on_other_signals)
{
    oblock *ob = gen_oblock(SIG_TRACES, 5, 40, 40);
    char p[600];
    size_t n;
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .body_tmpl = true};
    uint8_t *f = seal_as(ob, 40, 1, &o, p, &n);
    uint64_t len, m = section(f, n, 1, &len);
    cr_assert_eq(get64(f + m + 32), 1, "spans ignore body_tmpl");
    put64(f + m + 32, 5);
    fix_crcs(f, n);
    put_file(p, f, n);
    blk *b = NULL;
    char err[256];
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "meta flags") != NULL, "%s", err);
    free(f);
    oblock_free(ob);
}

/* blkgen's logs sealed hot and cold-like (zstd, by key, by template). */
struct hc {
    oblock *ob;
    uint64_t rows;
    char ph[600], pc[600];
    size_t nh, nc;
    uint8_t *fh, *fc;
};

static void hot_and_cold(struct hc *x, uint64_t seed, uint64_t n, uint32_t per)
{
    x->ob = gen_oblock(SIG_LOGS, seed, n, per);
    x->rows = oblock_rows(x->ob);
    struct blk_wopts hot = blk_hot_wopts(1, SIG_LOGS);
    struct blk_wopts cold = {.codec = BLK_CODEC_ZSTD,
                             .zstd_root = true,
                             .attrs_by_key = true,
                             .body_tmpl = true,
                             .body_slots = slots};
    x->fh = seal_as(x->ob, x->rows, 1, &hot, x->ph, &x->nh);
    x->fc = seal_as(x->ob, x->rows, 2, &cold, x->pc, &x->nc);
}

/* A cold-like block (zstd, by key, by template) of blkgen's logs gives the
 * rows of the same rows sealed hot, and the same blooms. */
static void cold_reads_as_hot(void)
{
    struct hc x;
    hot_and_cold(&x, 77, 3000, 500);
    oblock *ob = x.ob;
    uint64_t rows = x.rows;
    size_t nh = x.nh, nc = x.nc;
    uint8_t *fh = x.fh, *fc = x.fc;
    cr_assert_eq(meta_flags(fh, nh), 1);
    cr_assert_eq(meta_flags(fc, nc), slots ? 5 | 256 : 5);
    for (uint32_t id = 4; id <= 10; id += 6) { /* the blooms, the gram bloom */
        uint64_t lh, lc, sh = section(fh, nh, id, &lh), sc = section(fc, nc, id, &lc);
        cr_assert_neq(sh, 0);
        cr_assert_eq(lh, lc, "section %u", id);
        cr_assert_eq(memcmp(fh + sh, fc + sc, lh), 0, "section %u", id);
    }
    blk *bh = open_ok(x.ph), *bc = open_ok(x.pc);
    check_block(bc, ob, rows);
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view vh, vc;
        cr_assert_eq(blk_log(bh, i, BLK_ALL, &vh), 0);
        cr_assert_eq(blk_log(bc, i, BLK_ALL, &vc), 0);
        cr_assert_eq(vh.body_type, vc.body_type);
        cr_assert_eq(vh.body_str.len, vc.body_str.len, "row %llu", (unsigned long long)i);
        cr_assert_eq(memcmp(vh.body_str.p, vc.body_str.p, vh.body_str.len), 0);
        cr_assert_eq(vh.body_val.len, vc.body_val.len);
        cr_assert_eq(memcmp(vh.body_val.p, vc.body_val.p, vh.body_val.len), 0);
    }
    blk_unref(bh);
    blk_unref(bc);
    free(fh);
    free(fc);
    oblock_free(ob);
}

Test(block_body, a_cold_block_reads_as_its_hot_one)
{
    cold_reads_as_hot();
}

Test(block_body, a_cold_block_by_slot_reads_as_its_hot_one)
{
    slots = true;
    cold_reads_as_hot();
}

/* The bodies by template are rebuilt by the first read that wants one:
 * reads with BLK_NOBODY (the attributes, the times) rebuild nothing, and
 * blk_log_body then gives each row the hot block's bytes; once rebuilt
 * they are not rebuilt again, until the tables are dropped. */
Test(block_body, a_read_without_the_body_does_not_rebuild_it)
{
    struct hc x;
    hot_and_cold(&x, 78, 2000, 300);
    uint64_t rows = x.rows;
    blk *bh = open_ok(x.ph), *bc = open_ok(x.pc);
    cr_assert_eq(blk_load(bc, BLK_ALL | BLK_NOBODY), 0);
    uint64_t strs = 0;
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view vh, vc;
        cr_assert_eq(blk_log(bh, i, BLK_ALL, &vh), 0);
        cr_assert_eq(blk_log(bc, i, BLK_ALL | BLK_NOBODY, &vc), 0);
        cr_assert_eq(vc.time_ns, vh.time_ns);
        cr_assert_eq(vc.body_type, vh.body_type);
        cr_assert_eq(vc.body_str.len, 0);
        cr_assert_eq(vc.body_val.len, 0);
        cr_assert_eq(vc.attrs.len, vh.attrs.len);
        cr_assert_eq(memcmp(vc.attrs.p, vh.attrs.p, vh.attrs.len), 0);
        strs += vh.body_type == VAL_STR && vh.body_str.len > 0;
    }
    cr_assert_gt(strs, rows / 2, "blkgen's bodies are mostly strings");
    cr_assert_eq(blk_body_rebuilds(bc), 0, "no read wanted a body");
    cr_assert_eq(blk_body_rebuilds(bh), 0, "a hot block has none to rebuild");
    for (uint64_t i = rows; i-- > 0;) {
        struct log_view vh, vc;
        cr_assert_eq(blk_log(bh, i, BLK_ALL, &vh), 0);
        cr_assert_eq(blk_log(bc, i, BLK_ROOT | BLK_NOBODY, &vc), 0);
        cr_assert_eq(blk_log_body(bc, i, &vc), 0);
        cr_assert_eq(vc.body_str.len, vh.body_str.len, "row %llu", (unsigned long long)i);
        cr_assert_eq(memcmp(vc.body_str.p, vh.body_str.p, vh.body_str.len), 0);
        cr_assert_eq(vc.body_val.len, vh.body_val.len);
        cr_assert_eq(memcmp(vc.body_val.p, vh.body_val.p, vh.body_val.len), 0);
    }
    struct log_view v;
    cr_assert_eq(blk_log(bc, 0, BLK_ROOT, &v), 0);
    cr_assert_eq(blk_load(bc, BLK_ALL), 0);
    cr_assert_eq(blk_body_rebuilds(bc), 1, "rebuilt once");
    blk_drop_tables(bc);
    cr_assert_eq(blk_log(bc, 0, BLK_ROOT | BLK_NOBODY, &v), 0);
    cr_assert_eq(blk_body_rebuilds(bc), 1);
    cr_assert_eq(blk_log(bc, 0, BLK_ROOT, &v), 0);
    cr_assert_eq(blk_body_rebuilds(bc), 2, "the dropped tables' bodies rebuilt again");
    blk_unref(bh);
    blk_unref(bc);
    free(x.fh);
    free(x.fc);
    oblock_free(x.ob);
}

/* ---- META flag bit 8: codes by use, word refs as bytes, variables by slot ---- */

/* "a 1 x" once, then "b 2 c 3" twice: the second template and the words b
 * and c are used most, so they take the small codes; the twice-used
 * template's variables are stored slot by slot (b b, c c; 2 4, 3 5). */
static const struct body three[] = {STR("a 1 x"), STR("b 2 c 3"), STR("b 4 c 5")};
static const uint8_t three_slots[] = {
    3,  2,   4,   19,                         /* rows, templates, words, rebuilt bytes */
    14, 8,   3,   8,   6,   5,   0,   0,   0, /* section lengths */
    7,  4,   ' ', 1,   ' ', 4,   ' ', 1,      /* template 0 (used twice): word int word int */
    5,  4,   ' ', 1,   ' ', 4,                /* template 1: word int word */
    1,  'b', 1,   'c', 1,   'a', 1,   'x',    /* words, the most used first */
    2,  1,   1,                               /* codes */
    4,  4,   0,   0,                          /* template 0's bytes of each stream */
    2,  1,   0,   0,                          /* template 1's */
    0,  0,   1,   1,   2,   3,                /* word refs: slot 0 (b b), slot 1 (c c), a x */
    2,  4,   3,   5,   1,                     /* ints: slot 0, slot 1, template 1's */
};

Test(block_body, three_bodies_by_slot_take_the_documented_bytes)
{
    slots = true;
    struct strb x;
    bool coded;
    encode(three, 3, &x, &coded);
    cr_assert(coded);
    cr_assert_eq(x.data.len, sizeof(three_slots));
    cr_assert_eq(memcmp(x.data.p, three_slots, sizeof(three_slots)), 0);
    uint8_t *buf;
    uint64_t *offs;
    cr_assert_eq(rebuild(x.data.p, x.data.len, 3, &buf, &offs), 0);
    cr_assert_eq(offs[3], 19);
    cr_assert_eq(memcmp(buf, "a 1 xb 2 c 3b 4 c 5", 19), 0);
    free(buf);
    free(offs);
    free(x.offs);
    vbuf_fini(&x.data);
}

Test(block_body, forged_encodings_by_slot_fail_the_rebuild)
{
    slots = true;
    const uint8_t *c = three_slots;
    size_t n = sizeof(three_slots);
    cr_assert_eq(forged_rows(-1, 0, c, n, 3), 0, "as written");
    cr_assert_eq(forged_rows(46, 4, c, n, 3), -EBADMSG, "a word past the dictionary");
    cr_assert_eq(forged_rows(51, 255, c, n, 3), -EBADMSG, "an escape with no code after it");
    cr_assert_eq(forged_rows(35, 3, c, n, 3), -EBADMSG, "a code past the templates");
    /* template 0's ints part 3 bytes, template 1's 2: the sums still fit
     * the section, but template 0's two slots of two rows run past it */
    uint8_t f[64];
    memcpy(f, c, n);
    f[39] = 3;
    f[43] = 2;
    cr_assert_eq(forged_rows(-1, 0, f, n, 3), -EBADMSG, "a slot past its template's part");
    /* one int more in template 1's part (its section one byte longer):
     * the slots leave it over */
    memcpy(f, c, n);
    f[9] = 6;
    f[43] = 2;
    f[n] = 9;
    cr_assert_eq(forged_rows(-1, 0, f, n + 1, 3), -EBADMSG, "an int left over");
    /* the word x (code 3) as an escape: 255 then uv 3 - 255, impossible:
     * any escape is 255 or more, past the dictionary */
    memcpy(f, c, 52);
    f[8] = 7;
    f[42] = 3;
    f[51] = 255;
    f[52] = 0;
    memcpy(f + 53, c + 52, n - 52);
    cr_assert_eq(forged_rows(-1, 0, f, n + 1, 3), -EBADMSG, "an escaped code past the dictionary");
}

/* A vocabulary past 255 words: codes 255 and up escaped (255, uv
 * (code - 255)), each body a word of its own, all rebuilt. */
Test(block_body, a_vocabulary_past_255_words_escapes_the_rest)
{
    slots = true;
    enum { NW = 300 };
    static char w[NW][4];
    struct body b[NW];
    for (int i = 0; i < NW; i++) {
        w[i][0] = (char)('a' + i / 26 / 26 % 26);
        w[i][1] = (char)('a' + i / 26 % 26);
        w[i][2] = (char)('a' + i % 26);
        b[i] = (struct body){w[i], 3, VAL_STR};
    }
    struct strb x;
    bool coded;
    encode(b, NW, &x, &coded);
    cr_assert(coded);
    const uint8_t *p = x.data.p, *end = p + x.data.len;
    bool bad = false;
    uint64_t hdr[13];
    for (int k = 0; k < 13; k++) {
        hdr[k] = uv_take(&p, end, &bad);
    }
    cr_assert(!bad);
    cr_assert_eq(hdr[1], 1, "one template");
    cr_assert_eq(hdr[2], NW);
    cr_assert_eq(hdr[4 + 4], 255 + 2 * (NW - 255), "word refs: a byte each, then 255 and a byte");
    uint8_t *buf;
    uint64_t *offs;
    cr_assert_eq(rebuild(x.data.p, x.data.len, NW, &buf, &offs), 0);
    for (int i = 0; i < NW; i++) {
        cr_assert_eq(offs[i + 1] - offs[i], 3);
        cr_assert_eq(memcmp(buf + offs[i], w[i], 3), 0, "body %d", i);
    }
    free(buf);
    free(offs);
    free(x.offs);
    vbuf_fini(&x.data);
}

/* Realistic bodies: nginx access lines, Java exceptions, JSON lines,
 * Kubernetes events naming pods (a vocabulary of thousands of words). */
static size_t realistic(uint64_t *rng, char *o, size_t cap)
{
    static const char *const path[] = {"/api/v1/items", "/login", "/static/app.js", "/cart"};
    static const char *const cls[] = {"OrderService", "CartController", "PaymentGateway"};
    uint64_t r = *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    unsigned a = (unsigned)(r >> 33), k = (unsigned)(r >> 60) % 4;
    uint64_t r2 = *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    int n;
    if (k == 0) {
        n = snprintf(
            o, cap,
            "10.%u.%u.%u - - [03/Dec/2026:10:%02u:%02u +0000] \"GET %s/%u HTTP/1.1\" %u %u "
            "\"-\" \"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36\"",
            a % 256, a / 256 % 256, a / 65536 % 256, a % 60, a / 60 % 60, path[a % 4],
            (unsigned)(r2 % 100000), a % 7 == 0 ? 404u : 200u, (unsigned)(r2 >> 40) % 50000);
    } else if (k == 1) {
        n = snprintf(o, cap,
                     "java.lang.IllegalStateException: order %u not found\n\tat "
                     "com.acme.orders.%s.find(%s.java:%u)\n\tat "
                     "org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet."
                     "java:897)\n\t... %u more",
                     a % 1000000, cls[a % 3], cls[a % 3], 20 + a % 400, 40 + a % 9);
    } else if (k == 2) {
        n = snprintf(
            o, cap,
            "{\"level\":\"info\",\"ts\":\"2026-12-03T10:%02u:%02u.%03uZ\",\"msg\":\"request "
            "done\",\"path\":\"/v2/carts/%08x\",\"status\":%u,\"latency_ms\":%u.%u,"
            "\"trace_id\":\"%016llx\"}",
            a % 60, a / 60 % 60, a % 1000, (unsigned)r2, a % 5 == 0 ? 500u : 200u, a % 900, a % 10,
            (unsigned long long)r2);
    } else {
        char pod[6];
        for (int i = 0; i < 5; i++) {
            pod[i] = "bcdfghjklmnpqrstvwxz"[(r2 >> (5 * i)) % 20];
        }
        pod[5] = 0;
        n = snprintf(o, cap,
                     "Successfully assigned default/web-%s to node-%u; pulled image in %ums", pod,
                     a % 12, a % 3000);
    }
    return (size_t)n;
}

/* |rows| realistic bodies sealed cold-like with (|sl|) and without bit 8:
 * the root table's stored bytes. */
static uint64_t realistic_root(bool sl, uint64_t rows, char *path, oblock **obp)
{
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    uint64_t rng = 12;
    static char text[4000][400];
    cr_assert(rows <= 4000);
    for (uint64_t i = 0; i < rows; i++) {
        size_t n = realistic(&rng, text[i], sizeof(text[i]));
        struct log_row *r = batch_add_log(bt);
        r->time_ns = r->observed_ns = (i + 1) * 1000000ull;
        r->body_type = VAL_STR;
        r->body_str = (struct mstr){text[i], (uint32_t)n};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    struct blk_wopts o = {.codec = BLK_CODEC_ZSTD,
                          .zstd_root = true,
                          .attrs_by_key = true,
                          .body_tmpl = true,
                          .body_slots = sl};
    size_t n;
    uint8_t *f = seal_as(ob, rows, sl ? 2 : 1, &o, path, &n);
    cr_assert_eq(meta_flags(f, n), sl ? 261 : 5);
    uint64_t len, t = section(f, n, 2, &len);
    uint64_t stored = get64(f + t + 8 + 16); /* table 0 (root): its stored length */
    free(f);
    *obp = ob;
    return stored;
}

Test(block_body, realistic_bodies_by_slot_round_trip_and_do_not_grow)
{
    char pa[600], pb[600];
    oblock *oa, *ob;
    uint64_t a = realistic_root(false, 4000, pa, &oa);
    uint64_t b = realistic_root(true, 4000, pb, &ob);
    cr_assert_leq(b * 100, a * 101, "root %llu by slot, %llu by template", (unsigned long long)b,
                  (unsigned long long)a);
    blk *bb = open_ok(pb);
    check_block(bb, ob, 4000);
    blk_unref(bb);
    oblock_free(oa);
    oblock_free(ob);
}

Test(block_body, meta_bit_8_is_refused_without_bit_2_and_on_other_signals)
{
    oblock *ob = two_logs();
    char p[600];
    size_t n;
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .body_tmpl = true, .body_slots = true};
    uint8_t *f = seal_as(ob, 2, 1, &o, p, &n);
    cr_assert_eq(meta_flags(f, n), 261, "sorted, by template, by slot");
    blk *b = open_ok(p);
    check_block(b, ob, 2);
    blk_unref(b);
    uint64_t len, m = section(f, n, 1, &len);
    put64(f + m + 32, 257);
    fix_crcs(f, n);
    put_file(p, f, n);
    char err[256];
    b = NULL;
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "bit 8 without bit 2") != NULL, "%s", err);
    free(f);
    oblock_free(ob);

    ob = gen_oblock(SIG_TRACES, 5, 40, 40);
    struct blk_wopts so = {.codec = BLK_CODEC_PLAIN, .body_tmpl = true, .body_slots = true};
    f = seal_as(ob, 40, 1, &so, p, &n);
    m = section(f, n, 1, &len);
    cr_assert_eq(get64(f + m + 32), 1, "spans ignore body_slots");
    put64(f + m + 32, 1 | 256);
    fix_crcs(f, n);
    put_file(p, f, n);
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "meta flags") != NULL, "%s", err);
    free(f);
    oblock_free(ob);
}
