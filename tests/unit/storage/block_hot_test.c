/*
 * block_hot_test.c - hot blocks as the seal writes them by default (every
 * table zstd, the root included: block.h's BLK_HOT_ZSTD_LEVEL): blocks of
 * every signal sealed through the sealer read back exactly, plain when the
 * level is 0; a compressed table whose frame is damaged (CRCs made to
 * match) fails its load with -EBADMSG, the root at open with its reason,
 * another table at the first row access while the rest stays readable;
 * damage anywhere in the frames never makes a reader crash or read past
 * what it was given.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "lib/clock.h"
#include "storage/adm.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/sealer.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int n_sealed;
static int last_rc;

static void on_sealed(struct seal_job *j, int rc)
{
    pthread_mutex_lock(&mu);
    last_rc = rc;
    n_sealed++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    free(j);
}

static void setup(void)
{
    fresh_dir();
    catalog_init(dir);
}

TestSuite(block_hot, .init = setup);

static const char *const sig_dir[] = {"", "logs", "traces", "metrics"};

/* Seals gen_oblock(sig, seed, rows) through the sealer (seal id |seal|,
 * shard 3) into DATA/<signal>/ and returns the file's path in |path|. */
static void seal_through_sealer(enum signal sig, uint64_t seed, uint64_t rows, uint64_t seal,
                                char *path, size_t cap)
{
    char sub[400];
    snprintf(sub, sizeof(sub), "%s/%s", dir, sig_dir[sig]);
    mkdir(sub, 0755);
    struct cat_open *h = catalog_open_add(sig, gen_oblock(sig, seed, rows, 97));
    cr_assert_not_null(h);
    struct seal_job *j = calloc(1, sizeof(*j));
    cr_assert_not_null(j);
    j->h = h;
    j->rows = rows;
    j->meta = (struct blk_meta){.shard = 3, .wal_seq = 500 + seal, .seal_id = seal};
    snprintf(j->dir, sizeof(j->dir), "%s", sub);
    j->sealed = on_sealed;
    j->owner = h;
    pthread_mutex_lock(&mu);
    int want = n_sealed + 1;
    pthread_mutex_unlock(&mu);
    sealer_submit_take(j);
    pthread_mutex_lock(&mu);
    while (n_sealed < want) {
        pthread_cond_wait(&cv, &mu);
    }
    int rc = last_rc;
    pthread_mutex_unlock(&mu);
    cr_assert_eq(rc, 0, "seal: %s", strerror(-rc));
    snprintf(path, cap, "%s/s0003-%016llx.blk", sub, (unsigned long long)seal);
}

/* The hot seal's zstd tables (block.h, blk_hot_wopts), by signal and
 * table (root, attrs, detail): logs root and detail, spans attrs and
 * detail, points all three. */
static const bool hot_zstd[4][3] = {
    {false, false, false}, {true, false, true}, {false, true, true}, {true, true, true}};

/* Table t of |b| has the seal's codec at |level|; compressed ones are
 * smaller. */
static void expect_codecs(blk *b, int level)
{
    struct blk_table_info ti;
    for (uint32_t t = 0; t < blk_n_tables(b); t++) {
        cr_assert_eq(blk_table_info(b, t, &ti), 0);
        enum blk_codec codec =
            level > 0 && hot_zstd[blk_signal(b)][t] ? BLK_CODEC_ZSTD : BLK_CODEC_PLAIN;
        cr_expect_eq(ti.codec, codec, "table %u: codec %d", t, ti.codec);
        if (codec == BLK_CODEC_ZSTD) {
            cr_expect_lt(ti.length, ti.raw_length, "table %u: %llu stored of %llu", t,
                         (unsigned long long)ti.length, (unsigned long long)ti.raw_length);
        }
    }
}

static void seal_and_check(int level)
{
    static const uint64_t rows[] = {0, 3000, 2500, 4000};
    sealer_set_zstd_level(level);
    cr_assert_eq(sealer_start(0, 0), 0);
    for (enum signal s = SIG_LOGS; s <= SIG_METRICS; s++) {
        char path[600];
        uint64_t seed = 40 + (uint64_t)s + (uint64_t)level * 10;
        seal_through_sealer(s, seed, rows[s], 7 + (uint64_t)s, path, sizeof(path));
        blk *b = open_ok(path);
        cr_assert_eq(blk_meta(b)->seal_id, 7 + (uint64_t)s);
        cr_assert_eq(blk_meta(b)->wal_seq, 507 + (uint64_t)s);
        expect_codecs(b, level);
        /* The reference: the same rows generated again (the sealer's open
         * block belongs to the catalog). */
        oblock *ob = gen_oblock(s, seed, rows[s], 97);
        check_block(b, ob, rows[s]); /* every field of every row, byte for byte */
        blk_drop_tables(b);
        check_block(b, ob, rows[s]); /* the tables inflated again */
        oblock_free(ob);
        blk_unref(b);
    }
    sealer_stop();
    sealer_set_zstd_level(BLK_HOT_ZSTD_LEVEL);
    catalog_fini();
    blk_scratch_release();
}

Test(block_hot, the_seal_compresses_every_table_and_every_signal_reads_back_exactly)
{
    seal_and_check(BLK_HOT_ZSTD_LEVEL);
}

Test(block_hot, level_zero_seals_plain_tables_that_read_back_exactly)
{
    seal_and_check(0);
}

Test(block_hot, a_few_rows_that_zstd_would_not_shrink_are_stored_plain)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_METRICS, 5, 1, 1);
    struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, SIG_METRICS);
    write_block(ob, 1, 0, 5, &o, path, sizeof(path));
    blk *b = open_ok(path);
    struct blk_table_info ti;
    for (uint32_t t = 0; t < blk_n_tables(b); t++) {
        cr_assert_eq(blk_table_info(b, t, &ti), 0);
        cr_expect(ti.codec == BLK_CODEC_PLAIN || ti.length < ti.raw_length,
                  "table %u: zstd frame of %llu bytes for %llu", t, (unsigned long long)ti.length,
                  (unsigned long long)ti.raw_length);
    }
    check_block(b, ob, 1);
    blk_unref(b);
    oblock_free(ob);
    catalog_fini();
}

/* ---- damaged frames ---- */

static uint8_t *read_whole(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    fseek(fp, 0, SEEK_END);
    *n = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *f = malloc(*n);
    cr_assert_not_null(f);
    cr_assert_eq(fread(f, 1, *n, fp), *n);
    fclose(fp);
    return f;
}

/* A compressed log block of 2,000 rows (every table zstd at the hot level:
 * the reader's path for each table is the one a seal's zstd tables take),
 * its bytes in |*f| (malloc'd), the file's path in |path|. */
static size_t hot_logs(oblock **ob, uint8_t **f, char *path, size_t cap)
{
    *ob = gen_oblock(SIG_LOGS, 61, 2000, 97);
    struct blk_wopts o = {
        .codec = BLK_CODEC_ZSTD, .zstd_level = BLK_HOT_ZSTD_LEVEL, .zstd_root = true};
    write_block(*ob, 2000, 0, 61, &o, path, cap);
    size_t n;
    *f = read_whole(path, &n);
    return n;
}

/* Offset and stored length of table |t| (footer directory). */
static uint64_t table_at(const uint8_t *f, size_t n, int t, uint64_t *len)
{
    uint64_t sl, d = section(f, n, 2, &sl);
    cr_assert_neq(d, 0);
    const uint8_t *e = f + d + 8 + 32 * t;
    cr_assert_eq(e[1], BLK_CODEC_ZSTD, "table %d is not zstd", t);
    *len = get64(e + 16);
    return get64(e + 8);
}

/* The bytes of the zstd frame header at p (RFC 8878, 3.1.1.1). */
static size_t frame_header_bytes(const uint8_t *p, uint64_t len)
{
    static const unsigned dict_id_bytes[] = {0, 1, 2, 4}, fcs_bytes[] = {0, 2, 4, 8};
    cr_assert_gt(len, 6);
    cr_assert_eq(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24, ZSTD_MAGICNUMBER);
    unsigned fhd = p[4];
    bool single = (fhd & 0x20) != 0;
    unsigned fcs = fcs_bytes[fhd >> 6];
    if (fcs == 0 && single) {
        fcs = 1;
    }
    return 5 + (single ? 0 : 1) + dict_id_bytes[fhd & 3] + fcs;
}

/* Makes table |t|'s first zstd block a reserved block type (3): a frame
 * every decoder refuses. */
static void reserved_block(uint8_t *f, size_t n, int t)
{
    uint64_t len, at = table_at(f, n, t, &len);
    f[at + frame_header_bytes(f + at, len)] |= 6; /* block header bits 1-2: the type */
    fix_crcs(f, n);
}

Test(block_hot, a_damaged_root_frame_fails_the_open_with_ebadmsg_and_its_reason)
{
    char path[512], err[256];
    oblock *ob;
    uint8_t *f;
    size_t n = hot_logs(&ob, &f, path, sizeof(path));
    reserved_block(f, n, 0);
    put_file(path, f, n);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_expect_null(b);
    cr_expect(strstr(err, "root table") != NULL, "reason: %s", err);

    /* The seal's read-back (BLK_OPEN_DEFER_ROOT) checks the CRC only: the
     * damage is found by the first reader, which gets -EBADMSG. */
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE | BLK_OPEN_DEFER_ROOT, &b, err, sizeof(err)),
                 0, "%s", err);
    cr_expect(!blk_holds_tables(b));
    struct log_view v;
    cr_expect_eq(blk_log(b, 0, BLK_ROOT, &v), -EBADMSG);
    cr_expect_eq(blk_log(b, 0, BLK_ATTRS, &v), 0, "the attribute table is intact");
    blk_unref(b);
    /* ... and refuses a root whose CRC does not match. */
    uint64_t rl, ra = table_at(f, n, 0, &rl);
    f[ra + rl / 2] ^= 0x10;
    put_file(path, f, n);
    b = NULL;
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE | BLK_OPEN_DEFER_ROOT, &b, err, sizeof(err)),
                 -EBADMSG);
    cr_expect_null(b);
    cr_expect(strstr(err, "root table checksum") != NULL, "reason: %s", err);

    /* A frame that says it holds another length than the directory. */
    free(f);
    oblock_free(ob);
    n = hot_logs(&ob, &f, path, sizeof(path));
    uint64_t len, at = table_at(f, n, 0, &len);
    unsigned fhd = f[at + 4]; /* the frame header descriptor */
    cr_assert(fhd >> 6 >= 2, "the writer records the content size (descriptor %#x)", fhd);
    static const unsigned dict_id_bytes[] = {0, 1, 2, 4};
    size_t fcs_at = at + 5 + ((fhd & 0x20) ? 0 : 1) + dict_id_bytes[fhd & 3];
    f[fcs_at] ^= 1; /* the frame content size, lowest byte */
    fix_crcs(f, n);
    put_file(path, f, n);
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG);
    cr_expect(strstr(err, "root table") != NULL, "reason: %s", err);
    free(f);
    oblock_free(ob);
    catalog_fini();
}

Test(block_hot, a_damaged_attribute_frame_fails_that_table_only)
{
    char path[512];
    oblock *ob;
    uint8_t *f;
    size_t n = hot_logs(&ob, &f, path, sizeof(path));
    reserved_block(f, n, 1);
    put_file(path, f, n);
    blk *b = open_ok(path); /* the root is fine */
    struct log_view v, w;
    cr_expect_eq(blk_log(b, 5, BLK_ATTRS, &v), -EBADMSG);
    cr_expect_eq(blk_log(b, 5, BLK_ALL, &v), -EBADMSG, "the failure is remembered");
    cr_assert_eq(blk_log(b, 5, BLK_ROOT | BLK_DETAIL, &v), 0, "the other tables still read");
    uint64_t *perm = expected_order(ob, 2000);
    cr_assert_eq(oblock_log(ob, perm[5], &w), 0);
    cr_expect_eq(v.time_ns, w.time_ns);
    cr_expect_eq(v.body_str.len, w.body_str.len);
    cr_expect_eq(memcmp(v.body_str.p, w.body_str.p, w.body_str.len), 0);
    cr_expect_eq(v.observed_ns, w.observed_ns);
    free(perm);
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_expect_eq(ti.state, -1);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    catalog_fini();
}

/* Every table's frame damaged at many places (one byte changed, the CRCs
 * made to match): the open and each table's load end in 0 or -EBADMSG,
 * and a table that loads reads every row (under ASan: within bounds). */
Test(block_hot, damage_anywhere_in_a_frame_never_makes_a_reader_crash)
{
    char path[512], err[256];
    oblock *ob;
    uint8_t *f;
    size_t n = hot_logs(&ob, &f, path, sizeof(path));
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    int refused = 0, tries = 0;
    for (int t = 0; t < 3; t++) {
        uint64_t len, at = table_at(f, n, t, &len);
        for (uint64_t k = 0; k < 40; k++) {
            uint64_t pos = at + k * len / 40;
            memcpy(g, f, n);
            g[pos] ^= (uint8_t)(0x5a + k);
            fix_crcs(g, n);
            put_file(path, g, n);
            blk *b = NULL;
            tries++;
            int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
            cr_assert(rc == 0 || rc == -EBADMSG, "open: %d", rc);
            if (rc < 0) {
                refused++;
                continue;
            }
            static const unsigned want[] = {BLK_ROOT, BLK_ATTRS, BLK_DETAIL};
            rc = blk_load(b, want[t]);
            cr_assert(rc == 0 || rc == -EBADMSG, "load: %d", rc);
            if (rc < 0) {
                refused++;
            } else {
                struct log_view v;
                for (uint64_t i = 0; i < blk_rows(b); i++) {
                    cr_assert_eq(blk_log(b, i, BLK_ALL, &v), 0);
                }
            }
            blk_unref(b);
        }
    }
    cr_expect_gt(refused, tries / 4, "only %d of %d damaged frames refused", refused, tries);
    free(g);
    free(f);
    oblock_free(ob);
    catalog_fini();
}

/* One thread inflates every table with the same zstd context (kept per
 * thread): two blocks of other rows loaded in turn, a damaged frame
 * inflated between them, each reads back exactly every time, the damaged
 * one fails with -EBADMSG each time, and the inflated copies are counted
 * apart (blk_stats.table_inflated_bytes) until their tables are dropped. */
Test(block_hot, a_reused_context_never_carries_one_tables_bytes_into_another)
{
    char pa[512], pb[512], pc[600];
    oblock *oa;
    uint8_t *f;
    size_t n = hot_logs(&oa, &f, pa, sizeof(pa));
    /* a copy whose attribute frame is damaged (CRCs made to match) */
    reserved_block(f, n, 1);
    snprintf(pc, sizeof(pc), "%s/damaged.blk", dir);
    put_file(pc, f, n);
    free(f);
    /* another block: other rows, another count */
    oblock *ob = gen_oblock(SIG_LOGS, 62, 1500, 97);
    struct blk_wopts o = {
        .codec = BLK_CODEC_ZSTD, .zstd_level = BLK_HOT_ZSTD_LEVEL, .zstd_root = true};
    write_block(ob, 1500, 0, 62, &o, pb, sizeof(pb));

    blk *a = open_ok(pa), *b = open_ok(pb);
    struct blk_stats bs;
    for (int round = 0; round < 3; round++) {
        check_block(a, oa, 2000); /* every field of every row */
        blk_get_stats(&bs);
        cr_expect_gt(bs.table_inflated_bytes, 0);
        cr_expect_lt(bs.table_inflated_bytes, bs.table_heap_bytes);
        blk *c = open_ok(pc); /* its root is intact; a fresh open inflates again */
        struct log_view v;
        cr_expect_eq(blk_log(c, 7, BLK_ATTRS, &v), -EBADMSG, "round %d", round);
        cr_expect_eq(blk_log(c, 7, BLK_ROOT, &v), 0);
        check_block(b, ob, 1500);
        blk_drop_tables(a);
        check_block(b, ob, 1500);
        blk_drop_tables(b);
        blk_unref(c);
        blk_get_stats(&bs);
        cr_expect_eq(bs.table_inflated_bytes, 0, "round %d: every inflated copy freed", round);
    }
    blk_unref(a);
    blk_unref(b);
    oblock_free(oa);
    oblock_free(ob);
    catalog_fini();
}
