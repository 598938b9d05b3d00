/*
 * block_test.c - sealed block files (storage/block_*.c): every field of every
 * signal read back exactly (plain and zstd), random blocks in = same rows
 * out, lazy verification proven by the counters, the verification cache
 * across reopen and replacement, truncation and single bit flips in every
 * part of the file, version refusal, blooms without false negatives, zone
 * maps, quarantine, and CRC32 against a bitwise reference.
 *
 * The open block is the reference: after a round trip, block row j must
 * equal open block row perm[j], where perm is the stable sort of the open
 * block's rows by time (the writer's order), field by field and byte by
 * byte, dictionaries (resource, scope, metric) compared by content.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libdeflate.h>

#include "storage/adm.h"
#include "storage/block.h"
#include "storage/bloom.h"
#include "storage/vcache.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

TestSuite(block, .init = fresh_dir);

static void roundtrip(enum signal sig, uint64_t seed, uint64_t rows, const struct blk_wopts *o)
{
    char path[512];
    oblock *ob = gen_oblock(sig, seed, rows, 97);
    write_block(ob, oblock_rows(ob), 3, seed, o, path, sizeof(path));
    blk *b = open_ok(path);
    const struct blk_meta *m = blk_meta(b);
    cr_assert_eq(m->shard, 3);
    cr_assert_eq(m->seal_id, seed);
    cr_assert_eq(m->wal_seq, 1000 + seed);
    check_block(b, ob, oblock_rows(ob));
    blk_unref(b);
    oblock_free(ob);
}

/* ---- round trips ---- */

Test(block, every_field_of_every_signal_round_trips_exactly)
{
    roundtrip(SIG_LOGS, 11, 3000, NULL);
    roundtrip(SIG_TRACES, 12, 3000, NULL);
    roundtrip(SIG_METRICS, 13, 3000, NULL);
}

Test(block, zstd_tables_round_trip_exactly)
{
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_level = 1, .zstd_root = true};
    struct blk_wopts za = {.codec = BLK_CODEC_ZSTD};
    roundtrip(SIG_LOGS, 21, 1500, &z);
    roundtrip(SIG_TRACES, 22, 1500, &za);
    roundtrip(SIG_METRICS, 23, 1500, &z);

    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 24, 800, 50);
    write_block(ob, 800, 0, 24, &za, path, sizeof(path));
    blk *b = open_ok(path);
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 0, &ti), 0);
    cr_expect_eq(ti.codec, BLK_CODEC_PLAIN);
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_expect_eq(ti.codec, BLK_CODEC_ZSTD);
    cr_expect_lt(ti.length, ti.raw_length);
    blk_unref(b);
    oblock_free(ob);
}

Test(block, a_prefix_of_the_open_block_and_an_empty_block_round_trip)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_TRACES, 31, 500, 40);
    write_block(ob, 123, 1, 1, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    check_block(b, ob, 123);
    blk_unref(b);

    write_block(ob, 0, 1, 2, NULL, path, sizeof(path));
    b = open_ok(path);
    cr_assert_eq(blk_rows(b), 0);
    uint64_t mn, mx;
    blk_time_range(b, &mn, &mx);
    cr_expect_eq(mn, UINT64_MAX);
    cr_expect_eq(mx, 0);
    int64_t a, z;
    cr_expect_not(blk_duration_range(b, &a, &z));
    cr_expect_eq(blk_n_scopes(b), oblock_n_scopes(ob));
    uint8_t id[16] = {0};
    cr_expect_not(blk_may_have_trace(b, id));
    blk_unref(b);

    struct blk_meta m = {0};
    cr_expect_eq(blk_write(dir, ob, 501, &m, path, sizeof(path)), -EINVAL);
    cr_expect_eq(blk_write(dir, ob, 1, &m, path, 10), -ENAMETOOLONG);
    oblock_free(ob);
}

Test(block, the_writer_leaves_only_the_final_file_and_names_it_by_shard_and_seal)
{
    char path[512], want[512];
    oblock *ob = gen_oblock(SIG_LOGS, 41, 50, 10);
    write_block(ob, 50, 7, 0xabc, NULL, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/s0007-0000000000000abc.blk", dir);
    cr_assert_str_eq(path, want);
    cr_assert_eq(tmpdir_file_size(dir, "s0007-0000000000000abc.blk.tmp"), -ENOENT);
    struct blk_meta m = {0};
    cr_assert_eq(blk_write("/nonexistent-dir-h9", ob, 50, &m, path, sizeof(path)), -ENOENT);
    oblock_free(ob);
}

Test(block, random_blocks_in_same_rows_out)
{
    uint64_t s = 0x5eed0001;
    for (int it = 0; it < 24; it++) {
        enum signal sig = (enum signal)(1 + it % 3);
        uint64_t rows = gen_below(&s, 700);
        struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = gen_below(&s, 2)};
        roundtrip(sig, gen_rnd(&s), rows, it % 4 == 3 ? &z : NULL);
    }
}

/* ---- CRC ---- */

static uint32_t crc32_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xedb88320u & -(c & 1));
        }
    }
    return ~c;
}

Test(block, crc32_matches_a_bitwise_reference)
{
    cr_assert_eq(crc32_bitwise((const uint8_t *)"123456789", 9), 0xcbf43926u);
    cr_assert_eq(libdeflate_crc32(0, "123456789", 9), 0xcbf43926u);
    uint8_t buf[4099];
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (uint8_t)gen_rnd(&s);
    }
    for (size_t n = 0; n < sizeof(buf); n += 1 + n / 3) {
        cr_assert_eq(libdeflate_crc32(0, buf + (n & 7), n - (n & 7)),
                     crc32_bitwise(buf + (n & 7), n - (n & 7)), "length %zu", n);
    }
    /* And the CRCs in a written file are that CRC of the stored bytes. */
    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 51, 200, 30);
    write_block(ob, 200, 0, 51, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    size_t len;
    uint8_t *file = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
    cr_assert_not_null(file);
    for (uint32_t t = 0; t < blk_n_tables(b); t++) {
        struct blk_table_info ti;
        cr_assert_eq(blk_table_info(b, t, &ti), 0);
        cr_assert_leq(ti.offset + ti.length, len);
        cr_assert_eq(crc32_bitwise(file + ti.offset, ti.length), ti.crc32);
    }
    struct blk_layout lay;
    blk_layout(b, &lay);
    uint32_t fcrc;
    memcpy(&fcrc, file + len - 24, 4);
    cr_assert_eq(crc32_bitwise(file + lay.footer_offset, lay.footer_bytes), fcrc);
    free(file);
    blk_unref(b);
    oblock_free(ob);
}

/* ---- lazy verification and the verification cache ---- */

static struct blk_stats stats_now(void)
{
    struct blk_stats s;
    blk_get_stats(&s);
    return s;
}

/* Moves the file's mtime |secs| into the past, so it counts as settled. */
static void age_file(const char *path, int secs)
{
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= secs;
    ts[1] = ts[0];
    cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static uint64_t table_len(blk *b, uint32_t t)
{
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, t, &ti), 0);
    return ti.length;
}

Test(block, open_verifies_only_the_root_and_each_other_table_once_on_first_use)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 61, 400, 50);
    write_block(ob, 400, 0, 61, NULL, path, sizeof(path));

    struct blk_stats s0 = stats_now();
    cr_assert_eq(s0.tables_verified, 0);
    blk *b = open_ok(path);
    struct blk_layout lay;
    blk_layout(b, &lay);
    struct blk_stats s1 = stats_now();
    cr_assert_eq(s1.tables_verified, 1); /* the root */
    cr_assert_eq(s1.bytes_hashed, lay.footer_bytes + table_len(b, 0));
    struct blk_table_info ti;
    blk_table_info(b, 1, &ti);
    cr_assert_eq(ti.state, 0);
    cr_assert_eq(ti.n_columns, 0);

    /* A root-only scan reads no other table. */
    struct log_view v;
    for (uint64_t i = 0; i < 400; i++) {
        cr_assert_eq(blk_log(b, i, BLK_ROOT, &v), 0);
        cr_assert_eq(v.attrs.count, 0);
        cr_assert_eq(v.attrs.len, 0);
        cr_assert_not_null(v.attrs.p);
        cr_assert_eq(v.observed_ns, 0);
    }
    cr_assert_eq(stats_now().tables_verified, 1);

    /* The attribute table: verified once, on first use. */
    for (uint64_t i = 0; i < 400; i++) {
        cr_assert_eq(blk_log(b, i, BLK_ATTRS, &v), 0);
        cr_assert_eq(v.time_ns, 0);
        cr_assert_eq(v.body_str.len, 0);
    }
    struct blk_stats s2 = stats_now();
    cr_assert_eq(s2.tables_verified, 2);
    cr_assert_eq(s2.bytes_hashed, s1.bytes_hashed + table_len(b, 1));
    blk_table_info(b, 1, &ti);
    cr_assert_eq(ti.state, 1);
    cr_assert_gt(blk_n_hot_attrs(b), 0); /* the generator's common keys */
    /* count, list dictionary, key dictionary, value dictionary (format 5:
     * the hot key columns are found at load, not stored), T (format 6:
     * empty, the lists are not by key) */
    cr_assert_eq(ti.n_columns, 9);
    blk_table_info(b, 2, &ti);
    cr_assert_eq(ti.state, 0);

    cr_assert_eq(blk_log(b, 5, BLK_DETAIL, &v), 0);
    cr_assert_eq(blk_log(b, 6, BLK_ALL, &v), 0);
    struct blk_stats s3 = stats_now();
    cr_assert_eq(s3.tables_verified, 3);
    cr_assert_eq(s3.verify_failures, 0);
    /* A fresh file is not settled: nothing was trusted from the cache. */
    cr_assert_eq(s3.cache_hits, 0);
    blk_unref(b);
    oblock_free(ob);
}

/* blk_drop_tables (what the sealer and the boot scan call before a block is
 * published): the heap its loaded tables took comes back to the byte, and
 * the next reader loads (verifies) them again and reads the same rows. */
static void drop_and_reload(enum signal sig, uint64_t seed, const struct blk_wopts *o)
{
    char path[512];
    oblock *ob = gen_oblock(sig, seed, 3000, 50);
    write_block(ob, 3000, 0, seed, o, path, sizeof(path));
    cr_assert_eq(stats_now().table_heap_bytes, 0);
    blk *b = open_ok(path);
    /* the root's sorted times and string offsets are delta coded: decoded,
     * 8 bytes a row each (or its zstd copy inflated) */
    cr_assert_geq(stats_now().table_heap_bytes, 3000 * 8);
    blk_drop_tables(b);
    /* What stays: a format 4 metric block's decoded stream index (4 bytes
     * a row and 16 a stream, kept while the block is open); nothing else. */
    uint64_t kept = stats_now().table_heap_bytes;
    if (sig == SIG_METRICS) {
        cr_assert_gt(kept, 3000 * 4);
        cr_assert_leq(kept, 8 + 20 * 3000 + 64);
    } else {
        cr_assert_eq(kept, 0);
    }
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 0, &ti), 0);
    cr_assert_eq(ti.state, 0);
    uint64_t verified = stats_now().tables_verified;
    check_block(b, ob, 3000); /* every table loaded again, every field equal */
    cr_assert_eq(stats_now().tables_verified, verified + 3);
    cr_assert_gt(stats_now().table_heap_bytes, kept + 3000 * 8);
    blk_drop_tables(b);
    cr_assert_eq(stats_now().table_heap_bytes, kept);
    check_block(b, ob, 3000);
    blk_unref(b);
    cr_assert_eq(stats_now().table_heap_bytes, 0);
    oblock_free(ob);
}

Test(block, dropped_tables_return_their_heap_and_load_again_on_the_next_read)
{
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_level = 1, .zstd_root = true};
    drop_and_reload(SIG_LOGS, 81, NULL);
    drop_and_reload(SIG_TRACES, 82, NULL);
    drop_and_reload(SIG_METRICS, 83, &z);
}

Test(block, a_settled_file_is_verified_once_across_opens_and_a_replaced_one_again)
{
    char path[512], other[512];
    oblock *ob = gen_oblock(SIG_TRACES, 71, 300, 50);
    write_block(ob, 300, 0, 71, NULL, path, sizeof(path));

    /* Not settled yet: every open hashes again, and nothing is stored. */
    blk_unref(open_ok(path));
    blk_unref(open_ok(path));
    cr_assert_eq(stats_now().tables_verified, 2);
    cr_assert_eq(stats_now().cache_hits, 0);
    cr_assert_eq(vcache_size(), 0);

    /* Settled: the next open verifies and remembers footer and root; the
     * one after trusts both. */
    age_file(path, 10);
    blk *b = open_ok(path);
    struct span_view v;
    cr_assert_eq(blk_span(b, 0, BLK_ALL, &v), 0);
    blk_unref(b);
    struct blk_stats s1 = stats_now();
    cr_assert_eq(s1.tables_verified, 5);
    cr_assert_eq(vcache_size(), 4); /* footer + 3 tables */
    b = open_ok(path);
    for (uint64_t i = 0; i < 300; i++) {
        cr_assert_eq(blk_span(b, i, BLK_ALL, &v), 0);
    }
    blk_unref(b);
    struct blk_stats s2 = stats_now();
    cr_assert_eq(s2.tables_verified, s1.tables_verified);
    cr_assert_eq(s2.bytes_hashed, s1.bytes_hashed);
    cr_assert_eq(s2.cache_hits, s1.cache_hits + 4);

    /* Forced verification ignores the cache. */
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, NULL, 0), 0);
    cr_assert_eq(stats_now().tables_verified, s2.tables_verified + 1);
    blk_unref(b);

    /* Another block renamed over the same path, with the same mtime: a new
     * inode, so no old entry matches. */
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    oblock *ob2 = gen_oblock(SIG_TRACES, 72, 300, 50);
    write_block(ob2, 300, 9, 72, NULL, other, sizeof(other));
    struct timespec ts[2] = {st.st_mtim, st.st_mtim};
    cr_assert_eq(utimensat(AT_FDCWD, other, ts, 0), 0);
    cr_assert_eq(rename(other, path), 0);
    struct blk_stats s3 = stats_now();
    b = open_ok(path);
    cr_assert_eq(blk_meta(b)->shard, 9);
    check_block(b, ob2, 300);
    struct blk_stats s4 = stats_now();
    cr_assert_eq(s4.cache_hits, s3.cache_hits);
    cr_assert_eq(s4.tables_verified, s3.tables_verified + 3);
    blk_unref(b);

    /* The settle window can be shortened (tests, tools). */
    vcache_clear();
    vcache_set_settle_ns(0);
    cr_assert_eq(stat(path, &st), 0);
    ts[0] = ts[1] = (struct timespec){.tv_sec = time(NULL) + 3600, .tv_nsec = 0};
    cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0); /* mtime in the future: never settled */
    blk_unref(open_ok(path));
    cr_assert_eq(vcache_size(), 0);
    oblock_free(ob);
    oblock_free(ob2);
}

/* ---- damage ---- */

static int try_open(const char *path, blk **b, char *err, size_t errlen)
{
    err[0] = '\0';
    *b = NULL;
    return blk_open(path, b, err, errlen);
}

Test(block, a_file_truncated_anywhere_is_refused_at_open)
{
    char path[512], err[256];
    oblock *ob = gen_oblock(SIG_METRICS, 81, 300, 40);
    write_block(ob, 300, 0, 81, NULL, path, sizeof(path));
    size_t len;
    uint8_t *file = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
    cr_assert_not_null(file);
    size_t step = len / 400 + 1;
    int tried = 0;
    for (size_t cut = 0; cut < len; cut += (len - cut <= 200 ? 1 : step)) {
        blk *b;
        put_file(path, file, cut);
        int rc = try_open(path, &b, err, sizeof(err));
        cr_assert_eq(rc, -EBADMSG, "cut at %zu of %zu: rc %d", cut, len, rc);
        cr_assert_neq(err[0], '\0');
        cr_assert_null(b);
        tried++;
    }
    cr_assert_gt(tried, 400, "tried %d of %zu bytes", tried, len);
    put_file(path, file, len);
    blk_unref(open_ok(path));
    free(file);
    oblock_free(ob);
}

static void flip(uint8_t *file, uint64_t off, int bit)
{
    file[off] ^= (uint8_t)(1u << bit);
}

/* Rows read with |want| equal the intact block's. */
static void same_rows(blk *b, blk *good, unsigned want)
{
    for (uint64_t i = 0; i < blk_rows(good); i++) {
        struct log_view a, g;
        cr_assert_eq(blk_log(b, i, want, &a), 0);
        cr_assert_eq(blk_log(good, i, want, &g), 0);
        const char *bad = ck_log(&a, &g);
        cr_assert_null(bad, "row %llu: %s", (unsigned long long)i, bad);
    }
}

Test(block, a_bit_flip_in_any_table_footer_header_or_trailer_is_caught_where_it_lies)
{
    char path[512], gpath[512], err[256];
    oblock *ob = gen_oblock(SIG_LOGS, 91, 400, 40);
    write_block(ob, 400, 0, 91, NULL, path, sizeof(path));
    write_block(ob, 400, 1, 91, NULL, gpath, sizeof(gpath)); /* an intact copy */
    blk *good = open_ok(gpath);
    size_t len;
    uint8_t *file = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
    cr_assert_not_null(file);
    struct blk_layout lay;
    blk_layout(good, &lay);
    uint64_t s = 99;

    for (uint32_t t = 0; t < 3; t++) {
        struct blk_table_info ti;
        cr_assert_eq(blk_table_info(good, t, &ti), 0);
        uint64_t offs[] = {ti.offset, ti.offset + ti.length / 2, ti.offset + ti.length - 1,
                           ti.offset + gen_below(&s, ti.length)};
        for (int k = 0; k < 4; k++) {
            blk *b;
            int bit = (int)gen_below(&s, 8);
            flip(file, offs[k], bit);
            put_file(path, file, len);
            int rc = try_open(path, &b, err, sizeof(err));
            if (t == 0) {
                cr_assert_eq(rc, -EBADMSG, "root flip at %llu opened", (unsigned long long)offs[k]);
                cr_assert(strstr(err, "root") != NULL, "%s", err);
            } else {
                cr_assert_eq(rc, 0, "%s table flip failed the open: %s",
                             blk_table_kind_name(ti.kind), err);
                unsigned bad = t == 1 ? BLK_ATTRS : BLK_DETAIL;
                unsigned other = t == 1 ? BLK_DETAIL : BLK_ATTRS;
                struct log_view v;
                /* The other tables read exactly as the intact file's... */
                same_rows(b, good, BLK_ROOT | other);
                /* ...and the damaged one refuses, every time. */
                cr_assert_eq(blk_log(b, 0, bad, &v), -EBADMSG);
                cr_assert_eq(blk_log(b, 399, BLK_ALL, &v), -EBADMSG);
                cr_assert_eq(blk_load(b, bad), -EBADMSG);
                if (t == 1 && blk_n_hot_attrs(b) > 0) {
                    struct val hv;
                    cr_assert_eq(blk_hot_attr(b, 0, 0, &hv), -EBADMSG);
                }
                struct blk_table_info bi;
                blk_table_info(b, t, &bi);
                cr_assert_eq(bi.state, -1);
                cr_assert_eq(blk_verify_table(b, t), -EBADMSG);
                cr_assert_eq(blk_verify_table(b, 0), 0);
                same_rows(b, good, BLK_ROOT | other);
                blk_unref(b);
            }
            flip(file, offs[k], bit);
        }
    }
    /* The footer (blooms, dictionaries, directory), the header, the trailer. */
    uint64_t spots[] = {lay.footer_offset, lay.footer_offset + 9,
                        lay.footer_offset + lay.footer_bytes / 2,
                        lay.footer_offset + lay.footer_bytes - 1};
    for (int k = 0; k < 4; k++) {
        blk *b;
        flip(file, spots[k], k);
        put_file(path, file, len);
        cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG);
        cr_assert(strstr(err, "footer") != NULL, "%s", err);
        flip(file, spots[k], k);
    }
    for (uint64_t off = 0; off < 64; off++) {
        blk *b;
        flip(file, off, (int)(off % 8));
        put_file(path, file, len);
        cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG, "header byte %llu",
                     (unsigned long long)off);
        flip(file, off, (int)(off % 8));
    }
    for (uint64_t off = len - 40; off < len; off++) {
        blk *b;
        flip(file, off, (int)(off % 8));
        put_file(path, file, len);
        cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG, "trailer byte %llu",
                     (unsigned long long)(off - (len - 40)));
        flip(file, off, (int)(off % 8));
    }
    cr_assert_gt(stats_now().verify_failures, 0);
    free(file);
    blk_unref(good);
    oblock_free(ob);
}

Test(block, an_unknown_format_version_is_refused_with_a_clear_message)
{
    char path[512], err[256];
    oblock *ob = gen_oblock(SIG_LOGS, 95, 10, 5);
    write_block(ob, 10, 0, 95, NULL, path, sizeof(path));
    size_t len;
    uint8_t *file = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
    cr_assert_not_null(file);
    uint32_t v = 7, crc;
    memcpy(file + 8, &v, 4);
    crc = libdeflate_crc32(0, file, 56);
    memcpy(file + 56, &crc, 4);
    put_file(path, file, len);
    blk *b;
    cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG);
    cr_assert_str_eq(err, "block format version 7 is newer than this miradb (6)");
    v = 0;
    memcpy(file + 8, &v, 4);
    put_file(path, file, len);
    cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "version 0") != NULL, "%s", err);
    memcpy(file, "NotABlok", 8);
    put_file(path, file, len);
    cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "magic") != NULL, "%s", err);
    cr_assert_eq(try_open("/nonexistent-h9/x.blk", &b, err, sizeof(err)), -ENOENT);
    free(file);
    oblock_free(ob);
}

/* ---- blooms and zone maps ---- */

static uint64_t array_elems; /* string array elements checked */

static void check_attr_bloom(blk *b, struct oattrs a, bool resource)
{
    struct val_rd r = {a.p, a.p + a.len};
    for (uint32_t i = 0; i < a.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
        if (v.type == VAL_STR) {
            cr_assert(resource ? blk_may_have_resource_value(b, k, kn, v.s, v.n)
                               : blk_may_have_attr(b, k, kn, v.s, v.n),
                      "%.*s=%.*s missed", (int)kn, k, (int)v.n, v.s);
        } else if (v.type == VAL_ARRAY) {
            struct val_rd in = v.inner;
            for (uint32_t e = 0; e < v.count; e++) {
                struct val x;
                cr_assert_eq(val_rd_value(&in, &x), 0);
                if (x.type == VAL_STR) {
                    cr_assert(resource ? blk_may_have_resource_value(b, k, kn, x.s, x.n)
                                       : blk_may_have_attr(b, k, kn, x.s, x.n),
                              "%.*s=[%.*s] missed", (int)kn, k, (int)x.n, x.s);
                    array_elems++;
                }
            }
        }
    }
}

Test(block, blooms_find_every_inserted_item_and_reject_most_others)
{
    char path[512];
    gen_string_bodies_only = true;
    oblock *ob = gen_oblock(SIG_LOGS, 101, 2000, 100);
    write_block(ob, 2000, 0, 101, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    uint64_t tokens = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        struct log_view v;
        cr_assert_eq(blk_log(b, i, BLK_ALL, &v), 0);
        size_t pos = 0, st, n;
        while (bloom_next_token(v.body_str.p, v.body_str.len, &pos, &st, &n)) {
            char up[256];
            cr_assert(blk_may_have_token(b, v.body_str.p + st, n));
            size_t m = n < sizeof(up) ? n : sizeof(up);
            for (size_t c = 0; c < m; c++) {
                char ch = v.body_str.p[st + c];
                up[c] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 32) : ch;
            }
            if (m == n) {
                cr_assert(blk_may_have_token(b, up, n), "%.*s (upper case) missed", (int)n, up);
            }
            tokens++;
        }
        if (v.has_trace_id) {
            cr_assert(blk_may_have_trace(b, v.trace_id));
        }
        check_attr_bloom(b, v.attrs, false);
        check_attr_bloom(b, v.resource->attrs, true);
    }
    cr_assert_gt(tokens, 2000);
    cr_assert_gt(array_elems, 50);
    /* Not a token: no answer but "maybe". */
    cr_assert(blk_may_have_token(b, "two words", 9));
    cr_assert(blk_may_have_token(b, "", 0));

    uint64_t s = 4242;
    int fp_tok = 0, fp_trace = 0, fp_attr = 0;
    const int probes = 20000;
    for (int i = 0; i < probes; i++) {
        char tok[32];
        uint8_t id[16];
        int n = snprintf(tok, sizeof(tok), "qz%llx", (unsigned long long)gen_rnd(&s));
        fp_tok += blk_may_have_token(b, tok, (size_t)n);
        gen_id(&s, id, 16);
        fp_trace += blk_may_have_trace(b, id);
        fp_attr += blk_may_have_attr(b, "http.method", 11, tok, (size_t)n);
    }
    /* ~1% expected at 10 bits and 7 probes per item; allow 3%. */
    cr_expect_lt(fp_tok, probes * 3 / 100, "token false positives %d", fp_tok);
    cr_expect_lt(fp_trace, probes * 3 / 100, "trace false positives %d", fp_trace);
    cr_expect_lt(fp_attr, probes * 3 / 100, "attr false positives %d", fp_attr);
    cr_assert_not(blk_may_have_resource_value(b, "service.name", 12, "svc-nope", 8));

    uint32_t nb = blk_n_blooms(b);
    cr_assert_eq(nb, 5); /* and the body gram bloom (block_grams_test.c) */
    for (uint32_t i = 0; i < nb; i++) {
        struct blk_bloom_info bi;
        cr_assert_eq(blk_bloom_info(b, i, &bi), 0);
        cr_assert(bi.complete);
        cr_assert_eq(bi.k, BLOOM_K);
        cr_assert_eq(bi.nbits % 64, 0);
        cr_assert_gt(bi.bits_set, 0);
        cr_assert_leq(bi.bits_set, (uint64_t)bi.n_items * bi.k);
    }
    blk_unref(b);
    oblock_free(ob);

    /* A block with structured bodies cannot rule a token out. */
    gen_string_bodies_only = false;
    ob = gen_oblock(SIG_LOGS, 102, 500, 100);
    write_block(ob, 500, 0, 102, NULL, path, sizeof(path));
    b = open_ok(path);
    cr_assert(blk_may_have_token(b, "qzqzqzqz", 8));
    struct blk_bloom_info bi;
    cr_assert_eq(blk_bloom_info(b, 0, &bi), 0);
    cr_assert_eq(bi.kind, BLK_BLOOM_TOKENS);
    cr_assert_not(bi.complete);
    blk_unref(b);
    oblock_free(ob);
}

Test(block, zone_maps_hold_the_exact_extremes)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 111, 700, 60);
    write_block(ob, 700, 0, 111, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    int64_t smin = INT64_MAX, smax = INT64_MIN;
    for (uint64_t i = 0; i < 700; i++) {
        struct log_view v;
        oblock_log(ob, i, &v);
        smin = v.severity_number < smin ? v.severity_number : smin;
        smax = v.severity_number > smax ? v.severity_number : smax;
    }
    int64_t a, z;
    cr_assert(blk_severity_range(b, &a, &z));
    cr_assert_eq(a, smin);
    cr_assert_eq(z, smax);
    cr_assert_not(blk_duration_range(b, &a, &z));
    /* Rows are sorted: lower_bound finds the first row at or after t. */
    const uint64_t *t = blk_col_time(b);
    for (uint64_t i = 0; i < 700; i += 37) {
        uint64_t lb = blk_lower_bound(b, t[i]);
        cr_assert_leq(lb, i);
        cr_assert_eq(t[lb], t[i]);
        cr_assert(lb == 0 || t[lb - 1] < t[i]);
    }
    cr_assert_eq(blk_lower_bound(b, UINT64_MAX),
                 t[699] == UINT64_MAX ? blk_lower_bound(b, UINT64_MAX) : 700);
    blk_unref(b);
    oblock_free(ob);

    ob = gen_oblock(SIG_TRACES, 112, 700, 60);
    write_block(ob, 700, 0, 112, NULL, path, sizeof(path));
    b = open_ok(path);
    int64_t dmin = INT64_MAX, dmax = INT64_MIN;
    for (uint64_t i = 0; i < 700; i++) {
        struct span_view v;
        oblock_span(ob, i, &v);
        int64_t d = (int64_t)(v.end_ns - v.start_ns);
        dmin = d < dmin ? d : dmin;
        dmax = d > dmax ? d : dmax;
    }
    cr_assert(blk_duration_range(b, &a, &z));
    cr_assert_eq(a, dmin);
    cr_assert_eq(z, dmax);
    cr_assert_not(blk_severity_range(b, &a, &z));
    blk_unref(b);
    oblock_free(ob);
}

/* ---- quarantine ---- */

Test(block, quarantine_moves_the_file_under_data_and_keeps_it_readable)
{
    char sigdir[512], path[512], q[700];
    snprintf(sigdir, sizeof(sigdir), "%s/logs", dir);
    cr_assert_eq(mkdir(sigdir, 0755), 0);
    oblock *ob = gen_oblock(SIG_LOGS, 121, 100, 30);
    struct blk_meta m = {.shard = 2, .wal_seq = 5, .seal_id = 3};
    cr_assert_eq(blk_write(sigdir, ob, 100, &m, path, sizeof(path)), 0);
    blk *b = open_ok(path);
    cr_assert_eq(blk_quarantine(b), 0);
    cr_assert_eq(blk_quarantine(b), 0); /* once */
    snprintf(q, sizeof(q), "%s/quarantine/logs-s0002-0000000000000003.blk", dir);
    struct stat st;
    cr_assert_eq(stat(q, &st), 0);
    cr_assert_neq(stat(path, &st), 0);
    cr_assert_str_eq(blk_path(b), q);
    cr_assert_eq(stats_now().quarantined, 1);
    check_block(b, ob, 100);
    blk_unref(b);
    oblock_free(ob);
}

/* ---- small blocks: the fuzz seed corpus ---- */

/* Small blocks of every signal and codec read back exactly; with
 * MIRADB_BLK_CORPUS_DIR set they are also copied there (how
 * tests/fuzz/corpus/blkopen/ was made). */
Test(block, small_blocks_of_every_kind_round_trip_and_seed_the_fuzzer)
{
    const char *corpus = getenv("MIRADB_BLK_CORPUS_DIR");
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true};
    /* format 6's cold encodings, plain (mutations reach their decoders) */
    struct blk_wopts c = {.attrs_by_key = true, .span_refs = true, .streams_by_row = true};
    struct {
        enum signal sig;
        uint64_t rows;
        int opts; /* 0 plain, 1 zstd, 2 cold plain */
        const char *name;
    } seeds[] = {
        {SIG_LOGS, 6, 0, "logs-6.blk"},
        {SIG_LOGS, 0, 0, "logs-empty.blk"},
        {SIG_TRACES, 5, 0, "traces-5.blk"},
        {SIG_METRICS, 8, 0, "metrics-8.blk"},
        {SIG_LOGS, 4, 1, "logs-4-zstd.blk"},
        {SIG_TRACES, 3, 1, "traces-3-zstd.blk"},
        {SIG_METRICS, 4, 1, "metrics-4-zstd.blk"},
        {SIG_TRACES, 5, 2, "v6-cold-traces-5.blk"},
        {SIG_METRICS, 8, 2, "v6-cold-metrics-8.blk"},
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        char path[512];
        oblock *ob = gen_oblock(seeds[i].sig, 500 + i, seeds[i].rows ? seeds[i].rows : 3, 3);
        write_block(ob, seeds[i].rows, 0, 500 + i,
                    seeds[i].opts == 1   ? &z
                    : seeds[i].opts == 2 ? &c
                                         : NULL,
                    path, sizeof(path));
        blk *b = open_ok(path);
        check_block(b, ob, seeds[i].rows);
        blk_unref(b);
        if (corpus != NULL) {
            size_t len;
            uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
            cr_assert_not_null(f);
            cr_assert_eq(tmpdir_write_file(corpus, seeds[i].name, f, len), 0);
            free(f);
        }
        oblock_free(ob);
    }
}

/* ---- forged files: right checksums, wrong structure ---- */

Test(block, a_forged_row_count_is_refused_without_walking_the_rows)
{
    /* An empty logs block, its row count set to OBLOCK_MAX_ROWS in the
     * header, the footer and every row-counted INT column of the root
     * table: every such column has width 0, so it holds no bytes whatever
     * it claims. The raw columns cannot hold 2^30 ids: refused at once
     * (this once walked 2^30 rows per column). */
    char path[512], err[256];
    oblock *ob = gen_oblock(SIG_LOGS, 131, 3, 3);
    write_block(ob, 0, 0, 131, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    const uint64_t rows = OBLOCK_MAX_ROWS;
    put64(f + 24, rows);
    uint64_t len, meta = section(f, n, 1, &len);
    put64(f + meta + 8, rows);
    uint64_t t = section(f, n, 2, &len);
    uint8_t *root = f + get64(f + t + 8 + 8);
    static const int row_counted[] = {0, 1, 2, 3, 6, 9, 12}; /* by block_int.h's logs root spec */
    for (size_t i = 0; i < sizeof(row_counted) / sizeof(row_counted[0]); i++) {
        uint8_t *col = root + get64(root + 8 + 16 * row_counted[i]);
        cr_assert_eq(get64(col), 0);
        cr_assert_eq(col[16], 0); /* width 0 */
        put64(col, rows);
    }
    uint8_t *offs = root + get64(root + 8 + 16 * 7); /* the body offsets: rows + 1 */
    cr_assert_eq(get64(offs), 1);
    put64(offs, rows + 1);
    fix_crcs(f, n);
    put_file(path, f, n);
    blk *b;
    cr_assert_eq(try_open(path, &b, err, sizeof(err)), -EBADMSG);
    cr_assert(strstr(err, "root") != NULL, "%s", err);

    /* Without the raw columns' bound the forged counts are consistent:
     * the lenient open reads zero-width columns without walking them. */
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_LENIENT_ROOT, &b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(blk_rows(b), rows);
    struct log_view v;
    cr_assert_eq(blk_log(b, 0, BLK_ROOT, &v), -EBADMSG);
    cr_assert_null(blk_col_time(b));
    blk_unref(b);
    free(f);
    oblock_free(ob);
}

/* ---- sharing ---- */

struct reader_arg {
    blk *b;
    const oblock *ob;
    const uint64_t *perm;
    int bad;
};

static void *reader(void *p)
{
    struct reader_arg *a = p;
    for (uint64_t j = 0; j < blk_rows(a->b); j++) {
        struct span_view x, y;
        if (blk_span(a->b, j, BLK_ALL, &x) != 0 || oblock_span(a->ob, a->perm[j], &y) != 0 ||
            ck_span(&x, &y) != NULL) {
            a->bad++;
        }
    }
    return NULL;
}

Test(block, threads_sharing_a_block_verify_each_table_once_and_read_the_same_rows)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_TRACES, 141, 2000, 100);
    write_block(ob, 2000, 0, 141, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    uint64_t *perm = expected_order(ob, 2000);
    pthread_t th[4];
    struct reader_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct reader_arg){b, ob, perm, 0};
        blk_ref(b);
        cr_assert_eq(pthread_create(&th[i], NULL, reader, &args[i]), 0);
    }
    blk_unref(b); /* the readers' references keep it */
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_eq(args[i].bad, 0, "reader %d: %d rows differ", i, args[i].bad);
        blk_unref(b);
    }
    cr_assert_eq(stats_now().tables_verified, 3);
    free(perm);
    oblock_free(ob);
}

/* ---- seal scratch and the memory budget ---- */

Test(block, seal_scratch_is_charged_while_kept_and_returned_after_an_oversized_block)
{
    char path[512];
    adm_init(1ull << 40);
    oblock *small = gen_oblock(SIG_LOGS, 51, 300, 50);
    oblock *big = gen_oblock(SIG_LOGS, 52, 6000, 97);
    uint64_t sb = oblock_bytes(small), bb = oblock_bytes(big);
    cr_assert_lt(sb, bb);
    blk_scratch_keep(sb);

    write_block(small, oblock_rows(small), 0, 1, NULL, path, sizeof(path));
    /* a log seal's set also holds the body gram set */
    cr_expect_eq(adm_in_use(), 2 * sb + BLK_GRAM_SCRATCH, "kept scratch charged %llu, block %llu",
                 (unsigned long long)adm_in_use(), (unsigned long long)sb);
    /* The kept set serves the big block, grows, and is freed after it. */
    write_block(big, oblock_rows(big), 0, 2, NULL, path, sizeof(path));
    cr_expect_eq(adm_in_use(), 0, "%llu bytes left charged after a block of %llu",
                 (unsigned long long)adm_in_use(), (unsigned long long)bb);
    write_block(small, oblock_rows(small), 0, 3, NULL, path, sizeof(path));
    cr_expect_eq(adm_in_use(), 2 * sb + BLK_GRAM_SCRATCH);
    blk_scratch_release();
    cr_expect_eq(adm_in_use(), 0);
    oblock_free(small);
    oblock_free(big);
}

/* ---- the metric stream index ---- */

Test(block, metric_blocks_index_their_points_by_stream)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 6, 0, 77, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    cr_assert_eq(blk_n_streams(b), 3);
    struct {
        uint32_t metric, n, rows[3];
    } want[] = {{0, 3, {1, 4, 5}}, {0, 1, {2}}, {1, 2, {0, 3}}};
    for (uint32_t i = 0; i < 3; i++) {
        struct blk_stream st;
        cr_assert_eq(blk_stream(b, i, &st), 0);
        cr_assert_eq(st.metric_id, want[i].metric, "stream %u", i);
        cr_assert_eq(st.n_rows, want[i].n, "stream %u", i);
        for (uint32_t k = 0; k < st.n_rows; k++) {
            cr_assert_eq(st.rows[k], want[i].rows[k], "stream %u row %u", i, k);
        }
    }
    uint32_t f, c;
    blk_streams_of_metric(b, 0, &f, &c);
    cr_assert(f == 0 && c == 2);
    blk_streams_of_metric(b, 1, &f, &c);
    cr_assert(f == 2 && c == 1);
    blk_streams_of_metric(b, 2, &f, &c);
    cr_assert_eq(c, 0);
    check_block(b, ob, 6);
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
}

/* The narrow accessors (blk_point_values over rows in reverse order,
 * blk_point_hist) give what blk_point gives; a row past the end is refused. */
static void check_narrow(blk *b, uint32_t n)
{
    uint32_t rows[16];
    struct blk_value v[16];
    cr_assert(n > 0 && n <= 16);
    for (uint32_t j = 0; j < n; j++) {
        rows[j] = n - 1 - j;
    }
    cr_assert_eq(blk_point_values(b, rows, n, v), 0);
    for (uint32_t j = 0; j < n; j++) {
        struct point_view pv, h;
        cr_assert_eq(blk_point(b, rows[j], BLK_ALL, &pv), 0);
        cr_assert_eq(v[j].time_ns, pv.time_ns, "row %u", rows[j]);
        cr_assert_eq(v[j].value_type, (uint8_t)pv.value_type, "row %u", rows[j]);
        cr_assert_eq(v[j].value.i, pv.value.i, "row %u", rows[j]);
        cr_assert_eq(v[j].flags, pv.flags, "row %u", rows[j]);
        memset(&h, 0xa5, sizeof(h));
        cr_assert_eq(blk_point_hist(b, rows[j], &h), 0);
        cr_assert(h.time_ns == pv.time_ns && h.start_ns == pv.start_ns && h.count == pv.count &&
                      memcmp(&h.sum, &pv.sum, 8) == 0 && h.has_sum == pv.has_sum &&
                      h.flags == pv.flags && h.detail.len == pv.detail.len &&
                      memcmp(h.detail.p, pv.detail.p, pv.detail.len) == 0,
                  "row %u", rows[j]);
        cr_assert_eq(h.metric_id, 0xa5a5a5a5u, "the other fields are left as they were");
    }
    rows[0] = n;
    cr_assert_eq(blk_point_values(b, rows, 1, v), -EINVAL);
    struct point_view pv;
    cr_assert_eq(blk_point_hist(b, n, &pv), -EINVAL);
}

Test(block, narrow_point_accessors_read_what_blk_point_reads)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[1024];
    write_block(ob, 6, 0, 78, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    check_narrow(b, 6);
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s/blocks/v2-metrics-8.blk", v != NULL ? v : "tests/vectors");
    b = open_ok(path);
    check_narrow(b, 8);
    blk_unref(b);
}

/* A metric block sealed by the release before the stream index (the fuzz
 * seed metrics-8.blk, kept as tests/vectors/blocks/v2-metrics-8.blk) opens,
 * has no streams and reads all its rows: readers fall back to a scan. */
Test(block, metric_blocks_from_before_the_stream_index_open_without_one)
{
    char path[1024];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s/blocks/v2-metrics-8.blk", v != NULL ? v : "tests/vectors");
    blk *b = open_ok(path);
    cr_assert_eq(blk_signal(b), SIG_METRICS);
    cr_assert_eq(blk_rows(b), 8);
    cr_assert_eq(blk_n_streams(b), 0);
    for (uint64_t i = 0; i < 8; i++) {
        struct point_view pv;
        cr_assert_eq(blk_point(b, i, BLK_ALL, &pv), 0);
    }
    uint32_t f, c;
    blk_streams_of_metric(b, 0, &f, &c);
    cr_assert_eq(c, 0);
    blk_unref(b);
}

/* A stream section whose rows leave the block, or whose counts do not add
 * up, fails the open with its reason (CRCs recomputed: a forged file). */
/* Format 3's layout (a vector written by main before format 4). */
Test(block, a_malformed_format_3_stream_section_fails_the_open)
{
    char vdir[1024];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(vdir, sizeof(vdir), "%s/blocks", v != NULL ? v : "tests/vectors");
    size_t n;
    uint8_t *orig = tmpdir_read_file(vdir, "v3-metrics-300.blk", &n);
    cr_assert_not_null(orig);
    uint64_t len, at = section(orig, n, 9, &len);
    cr_assert_neq(at, 0);
    uint32_t ns;
    memcpy(&ns, orig + at, 4);
    cr_assert_eq(ns, 273);
    for (int forge = 0; forge < 3; forge++) {
        uint8_t *f = malloc(n);
        memcpy(f, orig, n);
        if (forge == 0) {
            put32(f + at + 8 + 16 * (ns - 1) + 12 - 8, 0); /* last stream's count -> 0 */
        } else if (forge == 1) {
            put32(f + at + 8 + 16 * (size_t)ns, 300); /* a row past the block */
        } else {
            put32(f + at + 8 + 4, 100000); /* first stream's count too large */
        }
        streams_refused(f, n, forge);
        free(f);
    }
    free(orig);
}

/* ---- format 3's encodings ---- */

/* The two gauges' block (points 1 s apart): the sorted time column is one
 * delta (8 bytes for all rows), the three distinct attribute lists ({},
 * {k=1}, {k=2}) are stored once each with the key "k" as code 1, and
 * the views still hand out the lists as the rows gave them. */
Test(block, format_3_codes_sorted_times_as_deltas_and_lists_once_with_key_codes)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 6, 0, 78, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 6, "format version (6 keeps format 3's codings for metrics)");
    uint64_t len, at = column_at(f, n, 0, 0, &len);
    cr_assert_eq(len, 32, "header + first value, no per-row bytes");
    cr_assert_eq(get64(f + at), 6);
    cr_assert_eq(get64(f + at + 8), 1000000000ull, "the delta");
    cr_assert_eq(f[at + 16], 0, "width");
    cr_assert_eq(f[at + 17], 1, "delta encoding");
    cr_assert_eq(get64(f + at + 24), 1000000000ull, "the first time");
    /* attrs: count, list codes, list offsets, list data, key offsets, key data */
    at = column_at(f, n, 1, 2, &len);
    cr_assert_eq(get64(f + at), 4, "3 distinct lists + 1 offsets");
    at = column_at(f, n, 1, 3, &len);
    static const uint8_t lists[] = {1, VAL_STR, 1, '1', 1, VAL_STR, 1, '2'};
    cr_assert_eq(len, sizeof(lists));
    cr_assert_arr_eq(f + at, lists, sizeof(lists));
    at = column_at(f, n, 1, 5, &len);
    cr_assert_eq(len, 1);
    cr_assert_eq(f[at], 'k');
    blk *b = open_ok(path);
    check_block(b, ob, 6);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* A key code past the key dictionary (CRCs recomputed: a forged file)
 * fails the attribute table at its load; the root still reads. */
Test(block, a_key_code_past_the_key_dictionary_fails_the_attribute_table)
{
    struct batch *bt = two_gauges();
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_METRICS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    char path[512];
    write_block(ob, 6, 0, 79, NULL, path, sizeof(path));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t len, at = column_at(f, n, 1, 3, &len);
    cr_assert_eq(f[at], 1);
    f[at] = 2; /* one key: code 2 names none */
    fix_crcs(f, n);
    put_file(path, f, n);
    blk *b = NULL;
    char err[256];
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    struct point_view pv;
    cr_assert_eq(blk_point(b, 1, BLK_ROOT, &pv), 0);
    cr_assert_eq(pv.time_ns, 2000000000ull);
    cr_assert_eq(blk_point(b, 1, BLK_ATTRS, &pv), -EBADMSG);
    cr_assert_eq(blk_point(b, 0, BLK_ROOT, &pv), 0);
    blk_unref(b);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}
