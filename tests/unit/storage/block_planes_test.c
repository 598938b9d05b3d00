/*
 * block_planes_test.c - format 6's INT byte planes (footer META flag bit
 * 7, blk_wopts.int_planes; block_int.h INT encodings 3 and 4): the exact
 * column bytes of a small log block's time (delta planes) and observed -
 * time (planes) columns, every row back; the generator's logs and spans
 * read back as without the option; forged headers refused at the open.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

#include "storage/block_int.h" /* INT_PLANES, INT_DPLANES */

TestSuite(block_planes, .init = fresh_dir);

#define T0 1767225600000000000ull

/* Four log rows: times T0 + 10 k (k = 0, 1, 3, 6: deltas 10, 20, 30),
 * observed 1 ms + 2^17 j ns later (j = 0, 3, 1, 2). */
static oblock *four_logs(void)
{
    static const uint64_t k[4] = {0, 1, 3, 6}, j[4] = {0, 3, 1, 2};
    struct batch *bt = log_batch();
    for (int i = 0; i < 4; i++) {
        struct log_row *r = log_at(bt, T0 + 10 * k[i]);
        r->observed_ns = r->time_ns + 1000000 + (j[i] << 17);
        r->severity_number = 9;
    }
    oblock *ob = NULL;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    return ob;
}

static const struct blk_wopts plane_opts = {
    .codec = BLK_CODEC_ZSTD, .plain_tables = 7, .int_planes = true};

static uint8_t *four_logs_file(char *path, size_t cap, size_t *n)
{
    oblock *ob = four_logs();
    uint8_t *f = write_and_read(ob, 4, 1, &plane_opts, path, cap, n);
    blk *b = open_ok(path);
    check_block(b, ob, 4);
    blk_unref(b);
    oblock_free(ob);
    return f;
}

static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t l, m = section(f, n, 1, &l);
    cr_assert_neq(m, 0);
    return get64(f + m + 32);
}

Test(block_planes, time_and_observed_columns_store_their_exact_planes)
{
    char path[512];
    size_t n;
    uint8_t *f = four_logs_file(path, sizeof(path), &n);
    const char *corpus = getenv("MIRADB_BLK_CORPUS_DIR"); /* a fuzz seed (block_test.c) */
    if (corpus != NULL) {
        cr_assert_eq(tmpdir_write_file(corpus, "v6-logs-planes-4.blk", f, n), 0);
    }
    cr_assert_eq(meta_flags(f, n) & 128, 128);
    uint64_t len, c = column_at(f, n, 0, 0, &len);
    /* count 4, base (the least delta) 10, 1 plane, INT_DPLANES; first, g 10;
     * deltas less 10 over 10: 0, 1, 2 */
    static const uint8_t tcol[] = {4, 0, 0,  0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0,
                                   0, 1, 4,  0, 0, 0, 0, 0, 0,  0, 0, 0, 0, 0, 0,
                                   0, 0, 10, 0, 0, 0, 0, 0, 0,  0, 0, 1, 2};
    cr_assert_eq(len, sizeof(tcol));
    cr_assert_eq(get64(f + c + 24), T0);
    cr_assert_eq(memcmp(f + c, tcol, 24), 0);
    cr_assert_eq(memcmp(f + c + 32, tcol + 32, sizeof(tcol) - 32), 0);
    /* detail column 0, zz(observed - time): 2e6 + 2^18 j, base 2e6, g 2^18,
     * one plane 0, 3, 1, 2 */
    c = column_at(f, n, 2, 0, &len);
    cr_assert_eq(len, INT_HDR + 8 + 4);
    cr_assert_eq(get64(f + c), 4);
    cr_assert_eq(get64(f + c + 8), 2000000);
    cr_assert_eq(f[c + 16], 1);
    cr_assert_eq(f[c + 17], INT_PLANES);
    cr_assert_eq(get64(f + c + 24), 1u << 18);
    static const uint8_t ocol[] = {0, 3, 1, 2};
    cr_assert_eq(memcmp(f + c + 32, ocol, 4), 0);
    free(f);
    /* without the option: bit 7 clear, the old encodings */
    oblock *ob = four_logs();
    struct blk_wopts o = plane_opts;
    o.int_planes = false;
    f = write_and_read(ob, 4, 2, &o, path, sizeof(path), &n);
    cr_assert_eq(meta_flags(f, n) & 128, 0);
    c = column_at(f, n, 0, 0, &len);
    cr_assert_lt(f[c + 17], INT_PLANES);
    c = column_at(f, n, 2, 0, &len);
    cr_assert_lt(f[c + 17], INT_PLANES);
    free(f);
    oblock_free(ob);
}

/* |path|'s bytes |f| forged by |forge|, CRCs recomputed: the open's code. */
static int forged_open(const char *path, uint8_t *f, size_t n)
{
    fix_crcs(f, n);
    put_file(path, f, n);
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    if (rc == 0) {
        /* the detail table loads with the first read of observed_ns */
        struct log_view lv;
        rc = blk_log(b, 0, BLK_DETAIL, &lv);
        blk_unref(b);
    }
    return rc;
}

Test(block_planes, forged_plane_columns_fail_the_open)
{
    char path[512];
    size_t n;
    uint8_t *f = four_logs_file(path, sizeof(path), &n);
    uint64_t len, tc = column_at(f, n, 0, 0, &len), oc = column_at(f, n, 2, 0, &len);
    uint64_t ml, meta = section(f, n, 1, &ml) + 32;
    for (int forge = 0; forge < 7; forge++) {
        uint8_t *g = malloc(n);
        cr_assert_not_null(g);
        memcpy(g, f, n);
        switch (forge) {
        case 0: /* no planes */
            g[tc + 16] = 0;
            break;
        case 1: /* nine planes */
            g[tc + 16] = 9;
            break;
        case 2: /* two planes of the bytes of one */
            g[tc + 16] = 2;
            break;
        case 3: /* a divisor of 0 */
            put64(g + tc + 32, 0);
            break;
        case 4: /* the detail's divisor 0 */
            put64(g + oc + 24, 0);
            break;
        case 5: /* planes without bit 7 */
            put64(g + meta, get64(g + meta) & ~128ull);
            break;
        default: /* an encoding past 4 */
            g[oc + 17] = 5;
            break;
        }
        cr_assert_eq(forged_open(path, g, n), -EBADMSG, "forge %d", forge);
        free(g);
    }
    free(f);
}

Test(block_planes, generator_logs_and_spans_read_back)
{
    for (int sg = 0; sg < 2; sg++) {
        enum signal sig = sg == 0 ? SIG_LOGS : SIG_TRACES;
        oblock *ob = gen_oblock(sig, 9009 + (uint64_t)sg, 500, 50);
        uint64_t rows = oblock_rows(ob);
        struct blk_wopts z = {
            .codec = BLK_CODEC_ZSTD, .zstd_root = true, .var_seqs = true, .int_planes = true};
        char pt[512];
        size_t nt;
        uint8_t *ft = write_and_read(ob, rows, 91 + 2 * (uint64_t)sg, &z, pt, sizeof(pt), &nt);
        cr_assert_eq(meta_flags(ft, nt) & 128, 128);
        blk *b = open_ok(pt);
        check_block(b, ob, rows);
        blk_unref(b);
        free(ft);
        oblock_free(ob);
    }
}

Test(block_planes, metric_blocks_have_no_bit_7)
{
    oblock *ob = gen_oblock(SIG_METRICS, 9011, 500, 50);
    uint64_t rows = oblock_rows(ob);
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true, .int_planes = true};
    char p[512];
    size_t n;
    uint8_t *f = write_and_read(ob, rows, 95, &z, p, sizeof(p), &n);
    uint64_t ml, meta = section(f, n, 1, &ml) + 32;
    cr_assert_eq(get64(f + meta) & 128, 0);
    put64(f + meta, get64(f + meta) | 128);
    fix_crcs(f, n);
    put_file(p, f, n);
    blk *b = NULL;
    char err[256];
    cr_assert_eq(blk_open_ex(p, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "unknown") != NULL, "%s", err);
    free(f);
    oblock_free(ob);
}
