/*
 * catalog_test.c - storage/catalog.c: a publish replaces its open block in
 * one step (a snapshot sees every row once), snapshots keep what they hold
 * alive, and the boot load recovers watermarks, seal ids, quarantine and
 * retention's watermark from the files.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/adm.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    adm_init(1ull << 30);
    oblock_cache_limit(0); /* freed chunks go back to malloc, not to a charged cache */
}

TestSuite(catalog, .init = fresh);

/* Writes |ob| as DATA/logs/s<shard>-<seal_id>.blk and opens it. */
static blk *write_block(const oblock *ob, uint32_t shard, uint64_t wal_seq, uint64_t seal_id,
                        char *path, size_t cap)
{
    char sub[300], err[256];
    struct blk_meta m = {.shard = shard, .wal_seq = wal_seq, .seal_id = seal_id};
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, cap), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    return b;
}

static uint64_t snap_rows(const struct cat_snap *sn)
{
    uint64_t n = 0;
    for (size_t i = 0; i < sn->n_blocks; i++) {
        n += blk_rows(sn->blocks[i]);
    }
    for (size_t i = 0; i < sn->n_open; i++) {
        n += sn->open_rows[i];
    }
    return n;
}

Test(catalog, publish_replaces_the_open_block_so_a_snapshot_sees_each_row_once)
{
    char path[512];
    struct cat_snap before, after;
    struct cat_stats st;
    oblock *ob = gen_oblock(SIG_LOGS, 7, 300, 40);
    struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
    cr_assert_not_null(h);

    cr_assert_eq(catalog_snapshot(SIG_LOGS, &before), 0);
    cr_expect_eq(before.n_blocks, 0);
    cr_assert_eq(before.n_open, 1);
    cr_expect_eq(before.open[0], ob);
    cr_expect_eq(before.open_rows[0], 300);

    blk *b = write_block(ob, 0, 12, 1, path, sizeof(path));
    cr_assert_eq(catalog_publish(h, b, path), 0);

    cr_assert_eq(catalog_snapshot(SIG_LOGS, &after), 0);
    cr_expect_eq(after.n_open, 0, "the open block is gone once its sealed block is in");
    cr_assert_eq(after.n_blocks, 1);
    cr_expect_eq(blk_rows(after.blocks[0]), 300);
    cr_expect_eq(snap_rows(&before), 300);
    cr_expect_eq(snap_rows(&after), 300);
    /* The earlier snapshot still reads the open block it holds. */
    cr_expect_eq(oblock_rows(before.open[0]), 300);

    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 1);
    cr_expect_eq(st.rows, 300);
    cr_expect_eq(st.unsealed_rows, 0);
    cr_expect_eq(st.unsealed_blocks, 0);
    cr_expect_gt(st.block_bytes, 0);

    /* Other signals are untouched. */
    struct cat_snap other;
    cr_assert_eq(catalog_snapshot(SIG_TRACES, &other), 0);
    cr_expect_eq(other.n_blocks + other.n_open, 0);
    catalog_snap_release(&other);

    catalog_snap_release(&before);
    catalog_snap_release(&after);
    catalog_fini();
}

Test(catalog, a_snapshot_keeps_a_dropped_open_block_and_its_charge_until_released)
{
    struct cat_snap sn, later;
    struct log_view v;
    oblock *ob = gen_oblock(SIG_LOGS, 3, 50, 8);
    struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
    cr_assert_not_null(h);
    adm_charge(123456); /* what the shard charged for the block */
    catalog_open_set_charged(h, 123456);

    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    catalog_open_drop(h); /* the catalog's reference goes */

    cr_assert_eq(catalog_snapshot(SIG_LOGS, &later), 0);
    cr_expect_eq(later.n_open, 0, "a dropped block is not in new snapshots");
    catalog_snap_release(&later);

    /* Still alive through |sn| (ASan would report a use after free). */
    cr_expect_eq(adm_in_use(), 123456, "charge returned while a snapshot holds the block");
    cr_assert_eq(sn.n_open, 1);
    cr_expect_eq(oblock_rows(sn.open[0]), 50);
    cr_expect_eq(oblock_log(sn.open[0], 49, &v), 0);

    catalog_snap_release(&sn);
    cr_expect_eq(adm_in_use(), 0, "the last release frees the block and returns its charge");
    catalog_fini();
}

Test(catalog, load_finds_watermarks_and_seal_ids_and_quarantines_what_does_not_open)
{
    char path[512], sub[300], qdir[300];
    uint64_t wm[3], ids[3], quarantined = 0;
    char err[256];
    oblock *a = gen_oblock(SIG_LOGS, 11, 20, 5);
    oblock *b = gen_oblock(SIG_LOGS, 12, 30, 5);
    blk_unref(write_block(a, 0, 5, 1, path, sizeof(path)));
    blk_unref(write_block(b, 1, 9, 4, path, sizeof(path)));
    oblock_free(a);
    oblock_free(b);
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    /* Not a block (seal id 0xa of shard 0), and a seal that did not finish. */
    cr_assert_eq(tmpdir_write_file(sub, "s0000-000000000000000a.blk", "garbage", 7), 0);
    cr_assert_eq(tmpdir_write_file(sub, "s0001-0000000000000005.blk.tmp", "half", 4), 0);

    cr_assert_eq(catalog_load(SIG_LOGS, 3, wm, ids, &quarantined, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(wm[0], 5);
    cr_expect_eq(wm[1], 9);
    cr_expect_eq(wm[2], 0);
    cr_expect_eq(ids[0], 0xb, "the quarantined block keeps its seal id: %llu",
                 (unsigned long long)ids[0]);
    cr_expect_eq(ids[1], 5);
    cr_expect_eq(ids[2], 1);
    cr_expect_eq(quarantined, 1);
    cr_expect_lt(tmpdir_file_size(sub, "s0000-000000000000000a.blk"), 0, "left in place");
    cr_expect_lt(tmpdir_file_size(sub, "s0001-0000000000000005.blk.tmp"), 0, "tmp not removed");
    cr_assert_eq(tmpdir_join(qdir, sizeof(qdir), dir, "quarantine"), 0);
    cr_expect_eq(tmpdir_file_size(qdir, "logs-s0000-000000000000000a.blk"), 7);

    struct cat_stats st;
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 2);
    cr_expect_eq(st.rows, 50);
    cr_expect_eq(st.quarantined_at_boot, 1);
    catalog_fini();
}

Test(catalog, retention_keeps_the_deleted_blocks_watermark_for_the_next_load)
{
    char path[512], sub[300];
    uint64_t wm[1], ids[1], quarantined = 0;
    char err[256];
    for (uint64_t k = 1; k <= 2; k++) {
        oblock *ob = gen_oblock(SIG_LOGS, 20 + k, 10, 5);
        struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
        cr_assert_not_null(h);
        cr_assert_eq(catalog_publish(h, write_block(ob, 0, 4 * k, k, path, sizeof(path)), path), 0);
    }
    cr_expect_eq(catalog_retain(0, 0, 1), 2, "both blocks are over a 1-byte limit");
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    cr_expect_lt(tmpdir_file_size(sub, "s0000-0000000000000001.blk"), 0);
    cr_expect_lt(tmpdir_file_size(sub, "s0000-0000000000000002.blk"), 0);
    struct cat_stats st;
    catalog_get_stats(SIG_LOGS, &st);
    cr_expect_eq(st.blocks, 0);
    cr_expect_eq(st.retention_deleted, 2);
    catalog_fini();

    /* The next boot must not replay the WAL frames retention removed. */
    catalog_init(dir);
    cr_assert_eq(catalog_load(SIG_LOGS, 1, wm, ids, &quarantined, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(wm[0], 8, "watermark %llu", (unsigned long long)wm[0]);
    cr_expect_eq(quarantined, 0);
    catalog_fini();
}

/* ---- the cap on sealed blocks' loaded tables ---- */

#define TC_BLOCKS 8
#define TC_ROWS 400

static uint64_t heap_now(void)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    return bs.table_heap_bytes;
}

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const uint8_t *c = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ c[i]) * 0x100000001b3ull;
    }
    return h;
}

/* A digest of every field of log row |i| of |b|, all tables loaded. */
static uint64_t row_digest(blk *b, uint64_t i)
{
    struct log_view v;
    cr_assert_eq(blk_log(b, i, BLK_ALL, &v), 0);
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, &v.time_ns, sizeof(v.time_ns));
    h = mix(h, &v.observed_ns, sizeof(v.observed_ns));
    h = mix(h, &v.severity_number, sizeof(v.severity_number));
    h = mix(h, v.severity_text.p, v.severity_text.len);
    h = mix(h, &v.body_type, sizeof(v.body_type));
    h = mix(h, v.body_str.p, v.body_str.len);
    h = mix(h, v.body_val.p, v.body_val.len);
    h = mix(h, v.attrs.p, v.attrs.len);
    h = mix(h, &v.attrs.count, sizeof(v.attrs.count));
    h = mix(h, &v.dropped_attrs, sizeof(v.dropped_attrs));
    h = mix(h, &v.flags, sizeof(v.flags));
    h = mix(h, v.has_trace_id ? v.trace_id : NULL, v.has_trace_id ? 16 : 0);
    h = mix(h, v.has_span_id ? v.span_id : NULL, v.has_span_id ? 8 : 0);
    return mix(h, v.event_name.p, v.event_name.len);
}

/* Publishes TC_BLOCKS sealed log blocks from |first| on, their tables
 * dropped as the sealer leaves them; their blk pointers in bs[]. */
static void publish_blocks(blk **bs, int first, int n)
{
    char path[512];
    for (int k = first; k < first + n; k++) {
        oblock *ob = gen_oblock(SIG_LOGS, 100 + (uint64_t)k, TC_ROWS, 50);
        struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
        cr_assert_not_null(h);
        bs[k] = write_block(ob, 0, (uint64_t)k + 1, (uint64_t)k + 1, path, sizeof(path));
        blk_drop_tables(bs[k]);
        cr_assert_eq(catalog_publish(h, bs[k], path), 0);
    }
}

/* One query: a snapshot, every row of bs[k] read into dig[], released. */
static void read_block(blk *b, uint64_t *dig)
{
    struct cat_snap sn;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    bool found = false;
    for (size_t i = 0; i < sn.n_blocks; i++) {
        found |= sn.blocks[i] == b;
    }
    cr_assert(found);
    cr_assert_eq(blk_load(b, BLK_ALL), 0);
    for (uint64_t i = 0; i < TC_ROWS; i++) {
        dig[i] = row_digest(b, i);
    }
    catalog_snap_release(&sn);
}

Test(catalog, the_cap_drops_the_least_recently_read_idle_tables_and_rows_read_back_equal)
{
    static blk *bs[TC_BLOCKS];
    static uint64_t first[TC_BLOCKS][TC_ROWS], again[TC_ROWS];
    publish_blocks(bs, 0, TC_BLOCKS);
    cr_assert_eq(heap_now(), 0, "published blocks hold no tables");

    /* No cap: one block's tables, measured, stay after its query. */
    read_block(bs[0], first[0]);
    uint64_t one = heap_now();
    cr_assert_gt(one, 0);
    cr_expect_eq(catalog_trim_tables(), 0, "no cap, nothing dropped");
    cr_expect(blk_holds_tables(bs[0]));

    uint64_t cap = one * 5 / 2; /* room for two blocks' tables */
    catalog_set_table_cap(cap);
    for (int k = 1; k < TC_BLOCKS; k++) {
        read_block(bs[k], first[k]);
        cr_expect_leq(heap_now(), cap, "after reading block %d: %llu > cap %llu", k,
                      (unsigned long long)heap_now(), (unsigned long long)cap);
    }
    /* Least recently read first: only the last two read keep their tables. */
    for (int k = 0; k < TC_BLOCKS; k++) {
        cr_expect_eq(blk_holds_tables(bs[k]), k >= TC_BLOCKS - 2, "block %d", k);
    }
    cr_expect_eq(catalog_tables_dropped(), TC_BLOCKS - 2);
    blk_scratch_release(); /* the writer's kept scratch */
    cr_expect_eq(adm_in_use(), heap_now(), "the tables are charged to the budget: %llu, %llu",
                 (unsigned long long)adm_in_use(), (unsigned long long)heap_now());

    /* Dropped and reloaded: every row reads back the same. */
    for (int k = 0; k < TC_BLOCKS; k++) {
        read_block(bs[k], again);
        cr_expect_leq(heap_now(), cap);
        for (uint64_t i = 0; i < TC_ROWS; i++) {
            cr_assert_eq(again[i], first[k][i], "block %d row %llu", k, (unsigned long long)i);
        }
    }
    cr_expect_eq(catalog_tables_dropped(), 2 * TC_BLOCKS - 2);
    catalog_fini();
    cr_expect_eq(heap_now(), 0);
    cr_expect_eq(adm_in_use(), 0);
}

static uint64_t inflated_now(void)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    return bs.table_inflated_bytes;
}

/* As publish_blocks, sealed as the hot seal writes logs (root and detail
 * zstd: their inflated copies are counted apart). */
static void publish_hot_blocks(blk **bs, int n)
{
    char path[512], sub[300], err[256];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "logs"), 0);
    mkdir(sub, 0755);
    struct blk_wopts o = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, SIG_LOGS);
    for (int k = 0; k < n; k++) {
        oblock *ob = gen_oblock(SIG_LOGS, 300 + (uint64_t)k, TC_ROWS, 50);
        struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
        cr_assert_not_null(h);
        struct blk_meta m = {.shard = 0, .wal_seq = (uint64_t)k + 1, .seal_id = (uint64_t)k + 1};
        cr_assert_eq(blk_write_ex(sub, ob, oblock_rows(ob), &m, &o, path, sizeof(path)), 0);
        cr_assert_eq(blk_open(path, &bs[k], err, sizeof(err)), 0, "%s", err);
        blk_drop_tables(bs[k]);
        cr_assert_eq(catalog_publish(h, bs[k], path), 0);
    }
}

/* The blocks the cap keeps, least recently read dropped first: the
 * longest run of the last read whose built heap (d) stays within |cap| and
 * whose inflated copies (z) stay within half of it. */
static int expect_kept(const uint64_t *d, const uint64_t *z, int n, uint64_t cap)
{
    uint64_t sd = 0, sz = 0;
    int first = n;
    while (first > 0 && sd + d[first - 1] <= cap && sz + z[first - 1] <= cap / 2) {
        first--;
        sd += d[first];
        sz += z[first];
    }
    return first;
}

Test(catalog, inflated_zstd_tables_have_an_allowance_of_their_own_under_the_cap)
{
    enum { N = 4 };
    static blk *bs[N];
    static uint64_t first[N][TC_ROWS], again[TC_ROWS];
    uint64_t d[N], z[N], sd = 0, sz = 0;
    publish_hot_blocks(bs, N);
    cr_assert_eq(heap_now(), 0);
    /* Each block's loaded tables, measured alone: what they built on the
     * heap and their inflated root and detail. */
    for (int k = 0; k < N; k++) {
        read_block(bs[k], first[k]);
        z[k] = inflated_now();
        d[k] = heap_now() - z[k];
        cr_assert_gt(z[k], 0, "block %d: the root is zstd", k);
        cr_assert_gt(d[k], 0);
        blk_drop_tables(bs[k]);
        cr_assert_eq(heap_now(), 0);
        cr_assert_eq(inflated_now(), 0, "the inflated copies are freed with the tables");
        sd += d[k];
        sz += z[k];
    }
    for (int k = 0; k < N; k++) {
        read_block(bs[k], again);
    }
    cr_assert_eq(heap_now(), sd + sz);
    cr_assert_eq(inflated_now(), sz);

    /* Room for every block's built heap and twice their inflated copies:
     * nothing is dropped, though the whole heap is over the cap. */
    uint64_t cap = sd > 2 * sz ? sd : 2 * sz;
    cr_assert_gt(heap_now(), cap);
    catalog_set_table_cap(cap);
    cr_expect_eq(catalog_trim_tables(), 0);
    for (int k = 0; k < N; k++) {
        cr_expect(blk_holds_tables(bs[k]), "block %d", k);
    }

    /* The inflated copies over half the cap: the least recently read go
     * until they fit; and again with the built heap the tighter bound. */
    uint64_t caps[2] = {sz + z[N - 1] / 2, sd - d[0] / 2};
    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < N; k++) {
            read_block(bs[k], again); /* all loaded, read in order */
            for (uint64_t i = 0; i < TC_ROWS; i++) {
                cr_assert_eq(again[i], first[k][i], "block %d row %llu", k, (unsigned long long)i);
            }
        }
        catalog_set_table_cap(0);
        catalog_trim_tables();
        for (int k = 0; k < N; k++) {
            cr_assert(blk_holds_tables(bs[k]));
        }
        int keep = expect_kept(d, z, N, caps[c]);
        cr_assert(keep > 0 && keep < N, "cap %d drops some but not all (%d)", c, keep);
        catalog_set_table_cap(caps[c]);
        cr_expect_eq(catalog_trim_tables(), keep, "cap %d", c);
        for (int k = 0; k < N; k++) {
            cr_expect_eq(blk_holds_tables(bs[k]), k >= keep, "cap %d block %d", c, k);
        }
        cr_expect_leq(inflated_now(), caps[c] / 2);
        cr_expect_leq(heap_now() - inflated_now(), caps[c]);
        catalog_set_table_cap(0);
    }
    blk_scratch_release();
    cr_expect_eq(adm_in_use(), heap_now(), "charged to the budget, the inflated copies too");
    catalog_fini();
    cr_expect_eq(heap_now(), 0);
    cr_expect_eq(inflated_now(), 0);
    cr_expect_eq(adm_in_use(), 0);
}

Test(catalog, a_block_an_open_snapshot_holds_keeps_its_tables_past_the_cap)
{
    static blk *bs[TC_BLOCKS];
    static uint64_t dig[TC_BLOCKS][TC_ROWS];
    struct log_view held[TC_ROWS];
    struct cat_snap sn;
    publish_blocks(bs, 0, 1);
    /* A query holds block 0 and pointers into its tables. */
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    cr_assert_eq(sn.n_blocks, 1);
    for (uint64_t i = 0; i < TC_ROWS; i++) {
        dig[0][i] = row_digest(bs[0], i);
        cr_assert_eq(blk_log(bs[0], i, BLK_ALL, &held[i]), 0);
    }
    uint64_t one = heap_now();
    catalog_set_table_cap(one / 2); /* already over: only block 0 is loaded */
    cr_expect_eq(catalog_trim_tables(), 0, "the snapshot holds block 0");

    publish_blocks(bs, 1, TC_BLOCKS - 1);
    for (int k = 1; k < TC_BLOCKS; k++) {
        read_block(bs[k], dig[k]); /* each of these queries ends over the cap */
        cr_expect(blk_holds_tables(bs[0]), "block 0 is held, after block %d", k);
        cr_expect(!blk_holds_tables(bs[k]), "block %d is idle", k);
        cr_expect_leq(heap_now(), one + one / 2);
    }
    /* Its rows, through the pointers taken before, are intact (ASan would
     * report a use after free). */
    for (uint64_t i = 0; i < TC_ROWS; i++) {
        uint64_t h = 0xcbf29ce484222325ull;
        h = mix(h, &held[i].time_ns, sizeof(held[i].time_ns));
        h = mix(h, held[i].body_str.p, held[i].body_str.len);
        h = mix(h, held[i].attrs.p, held[i].attrs.len);
        struct log_view v;
        cr_assert_eq(blk_log(bs[0], i, BLK_ALL, &v), 0);
        uint64_t w = 0xcbf29ce484222325ull;
        w = mix(w, &v.time_ns, sizeof(v.time_ns));
        w = mix(w, v.body_str.p, v.body_str.len);
        w = mix(w, v.attrs.p, v.attrs.len);
        cr_assert_eq(h, w, "row %llu", (unsigned long long)i);
        cr_assert_eq(row_digest(bs[0], i), dig[0][i]);
    }
    catalog_snap_release(&sn); /* now idle: dropped */
    cr_expect(!blk_holds_tables(bs[0]));
    cr_expect_eq(heap_now(), 0);
    catalog_fini();
}

/* Index of |b| in snapshot |sn| (asserted present). */
static size_t snap_index(const struct cat_snap *sn, const blk *b)
{
    for (size_t i = 0; i < sn->n_blocks; i++) {
        if (sn->blocks[i] == b) {
            return i;
        }
    }
    cr_assert_fail("block not in the snapshot");
    return 0;
}

Test(catalog,
     a_block_its_snapshot_unpinned_is_dropped_under_the_cap_and_pinned_again_reads_the_same)
{
    static blk *bs[TC_BLOCKS];
    static uint64_t first[TC_BLOCKS][TC_ROWS];
    publish_blocks(bs, 0, TC_BLOCKS);
    struct cat_snap sn;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &sn), 0);
    cr_assert_eq(sn.n_blocks, TC_BLOCKS);
    for (int k = 0; k < TC_BLOCKS; k++) {
        cr_assert_eq(sn.pinned[snap_index(&sn, bs[k])], 1, "a snapshot pins its blocks");
    }
    /* One query scans every block, done with each in turn, under a cap
     * smaller than one block's tables: only the block being read holds
     * tables at any time. */
    cr_assert_eq(blk_load(bs[0], BLK_ALL), 0);
    uint64_t one = heap_now();
    cr_assert_gt(one, 0);
    catalog_set_table_cap(one / 2);
    uint64_t dropped = catalog_tables_dropped();
    for (int k = 0; k < TC_BLOCKS; k++) {
        cr_assert_eq(blk_load(bs[k], BLK_ALL), 0);
        for (uint64_t i = 0; i < TC_ROWS; i++) {
            first[k][i] = row_digest(bs[k], i);
        }
        cr_expect_eq(catalog_trim_tables(), 0, "block %d is pinned while read", k);
        cr_expect(blk_holds_tables(bs[k]));
        catalog_snap_unpin(&sn, snap_index(&sn, bs[k]));
        cr_expect_eq(catalog_trim_tables(), 1, "block %d, unpinned, is dropped", k);
        cr_expect(!blk_holds_tables(bs[k]));
        cr_expect_eq(heap_now(), 0, "after block %d: %llu", k, (unsigned long long)heap_now());
    }
    cr_expect_eq(catalog_tables_dropped() - dropped, TC_BLOCKS);
    /* Pinned again and loaded: the same rows; then held past the cap. */
    for (int k = 0; k < TC_BLOCKS; k++) {
        catalog_snap_pin(&sn, snap_index(&sn, bs[k]));
        cr_assert_eq(blk_load(bs[k], BLK_ALL), 0);
        for (uint64_t i = 0; i < TC_ROWS; i++) {
            cr_assert_eq(row_digest(bs[k], i), first[k][i], "block %d row %llu", k,
                         (unsigned long long)i);
        }
        cr_expect_eq(catalog_trim_tables(), 0);
    }
    catalog_snap_release(&sn); /* unpins what is pinned, then trims */
    cr_expect_eq(heap_now(), 0);
    catalog_set_table_cap(0);
    catalog_fini();
}

Test(catalog, a_block_another_snapshot_pins_is_not_dropped_when_one_unpins_it)
{
    static blk *bs[TC_BLOCKS];
    struct log_view held[TC_ROWS];
    publish_blocks(bs, 0, 1);
    struct cat_snap a, b;
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &a), 0);
    cr_assert_eq(catalog_snapshot(SIG_LOGS, &b), 0);
    cr_assert_eq(blk_load(bs[0], BLK_ALL), 0);
    for (uint64_t i = 0; i < TC_ROWS; i++) {
        cr_assert_eq(blk_log(bs[0], i, BLK_ALL, &held[i]), 0); /* b's pointers */
    }
    catalog_set_table_cap(1);
    catalog_snap_unpin(&a, 0);
    catalog_snap_unpin(&a, 0); /* once each way: a second unpin changes nothing */
    cr_expect_eq(catalog_trim_tables(), 0, "snapshot b still pins it");
    cr_expect(blk_holds_tables(bs[0]));
    catalog_snap_release(&a);
    cr_expect(blk_holds_tables(bs[0]), "releasing a does not unpin b's pin");
    for (uint64_t i = 0; i < TC_ROWS; i++) {
        struct log_view v;
        cr_assert_eq(blk_log(bs[0], i, BLK_ALL, &v), 0);
        cr_assert_eq(v.body_str.p, held[i].body_str.p, "row %llu", (unsigned long long)i);
        cr_assert_eq(v.attrs.p, held[i].attrs.p);
        cr_assert_eq(memcmp(v.attrs.p, held[i].attrs.p, v.attrs.len), 0); /* ASan: not freed */
    }
    catalog_snap_release(&b);
    cr_expect(!blk_holds_tables(bs[0]), "the last pin gone: dropped");
    cr_expect_eq(heap_now(), 0);
    catalog_set_table_cap(0);
    catalog_fini();
}
