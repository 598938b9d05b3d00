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
