/*
 * store_test.c - storage/store.c: opening starts a shard per signal and
 * index (more when WAL directories of more shards exist), replays through
 * the hook, reserves round-robin, and closing stops it all.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "storage/adm.h"
#include "storage/batch.h"
#include "storage/oblock.h"
#include "storage/store.h"
#include "storage/wal.h"
#include "tests/util/tmpdir.h"
#include "tests/util/tclock.h"
#include "tests/util/wait.h"

static char dir[256];
static int n_replayed;

/* A hook that refuses every frame (each is counted as a bad frame). */
static int refuse(enum signal sig, enum otlp_fmt fmt, const uint8_t *p, size_t n,
                  struct batch *scratch, arena *a)
{
    (void)sig, (void)fmt, (void)p, (void)n, (void)scratch, (void)a;
    __atomic_add_fetch(&n_replayed, 1, __ATOMIC_RELAXED);
    return -EINVAL;
}

static void fresh(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(store, .init = fresh);

static struct store_cfg cfg_of(int shards, enum shard_ack ack)
{
    return (struct store_cfg){
        .data_dir = dir,
        .shards = shards,
        .queue = 1,
        .ack = ack,
        .memory_budget = 256u << 20,
        .block_target = 8u << 20,
        .replay = refuse,
    };
}

static bool wait_ready(void)
{
    uint64_t deadline = tclock_ns() + 10000000000ull;
    while (!store_ready() && tclock_ns() < deadline) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return store_ready();
}

static bool exists(const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    return stat(path, &st) == 0;
}

Test(store, open_starts_a_shard_per_signal_and_index_and_reserves_round_robin)
{
    char err[256] = "";
    struct store_boot boot;
    struct store_cfg c = cfg_of(2, SHARD_ACK_WAL);
    cr_assert_eq(store_open(&c, &boot, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(boot.shards, 2);
    cr_expect_not(boot.shards_raised);
    cr_expect_eq(boot.quarantined[0] + boot.quarantined[1] + boot.quarantined[2], 0);
    cr_expect_eq(store_shard_count(), 2);
    cr_expect_eq(adm_budget(), 256u << 20);
    cr_assert(wait_ready());
    cr_expect(exists("wal/logs-0") && exists("wal/logs-1") && exists("wal/traces-1") &&
              exists("wal/metrics-0"));
    cr_expect(exists("logs") && exists("traces") && exists("metrics"));
    cr_expect_not(exists("wal/logs-2"));

    /* Queue of 1 per shard: the second reservation from the same start
     * goes to the other shard, the third finds both full. */
    shard *a = store_reserve(SIG_TRACES, 0);
    shard *b = store_reserve(SIG_TRACES, 0);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_expect_neq(a, b);
    cr_expect_null(store_reserve(SIG_TRACES, 7));
    shard *l = store_reserve(SIG_LOGS, 7);
    cr_expect_not_null(l, "another signal's shards are apart");
    shard_unreserve(l);
    struct shard_stats st;
    store_shard_stats(SIG_TRACES, 0, &st);
    cr_expect_eq(st.queue_depth, 1);
    shard_unreserve(a);
    shard_unreserve(b);
    /* From index 1: shard 1 first (|b|), then on round to shard 0 (|a|). */
    cr_expect_eq(store_reserve(SIG_TRACES, 1), b);
    cr_expect_eq(store_reserve(SIG_TRACES, 1), a);
    shard_unreserve(a);
    shard_unreserve(b);
    store_close(tclock_ns() + 5000000000ull);
}

Test(store, shards_are_raised_to_the_wal_directories_on_disk_and_replayed)
{
    char err[256] = "", wdir[300];
    uint8_t p[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wal *w;
    cr_assert_eq(tmpdir_join(wdir, sizeof(wdir), dir, "wal"), 0);
    mkdir(wdir, 0755);
    cr_assert_eq(tmpdir_join(wdir, sizeof(wdir), dir, "wal/metrics-2"), 0);
    cr_assert_eq(wal_open(wdir, 0, NULL, NULL, &w), 0);
    cr_assert_eq(wal_append(w, SIG_METRICS, OTLP_JSON, p, sizeof(p)), 1);
    cr_assert_eq(wal_append(w, SIG_METRICS, OTLP_JSON, p, sizeof(p)), 2);
    cr_assert_eq(wal_sync(w), 0);
    wal_close(w);
    uint64_t on_disk = 0;
    DIR *dp = opendir(wdir);
    cr_assert_not_null(dp);
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        if (e->d_name[0] != '.') {
            on_disk += (uint64_t)tmpdir_file_size(wdir, e->d_name);
        }
    }
    closedir(dp);
    cr_assert_gt(on_disk, 16);

    struct store_boot boot;
    struct store_cfg c = cfg_of(1, SHARD_ACK_WAL);
    cr_assert_eq(store_open(&c, &boot, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(boot.shards, 3);
    cr_expect(boot.shards_raised);
    cr_expect_eq(store_shard_count(), 3);
    cr_expect_eq(store_wal_bytes_at_boot(), on_disk);
    cr_assert(wait_ready());
    cr_expect_eq(__atomic_load_n(&n_replayed, __ATOMIC_RELAXED), 2);
    struct shard_stats st;
    store_shard_stats(SIG_METRICS, 2, &st);
    cr_expect_eq(st.replay_bad_frames, 2);
    cr_expect(exists("wal/logs-2"), "every signal gets the raised count");
    store_close(tclock_ns() + 5000000000ull);
}

Test(store, ack_seal_keeps_no_wal)
{
    char err[256] = "";
    struct store_boot boot;
    struct store_cfg c = cfg_of(1, SHARD_ACK_SEAL);
    cr_assert_eq(store_open(&c, &boot, err, sizeof(err)), 0, "%s", err);
    cr_assert(wait_ready());
    cr_expect_not(exists("wal"));
    store_close(tclock_ns() + 5000000000ull);
}

/* A freed logs block of |rows| rows with 300-byte bodies: its chunks go to
 * the open blocks' chunk cache. */
static void cache_a_block(uint32_t rows)
{
    static char body[300];
    memset(body, 'b', sizeof(body));
    struct batch *b = batch_new(SIG_LOGS);
    cr_assert_not_null(b);
    cr_assert_not_null(batch_add_resource(b));
    cr_assert_not_null(batch_add_scope(b));
    for (uint32_t i = 0; i < rows; i++) {
        struct log_row *r = batch_add_log(b);
        cr_assert_not_null(r);
        r->time_ns = 1000 + i;
        r->body_type = VAL_STR;
        r->body_str = (struct mstr){body, sizeof(body)};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    oblock_free(ob);
}

Test(store, memory_tick_empties_the_chunk_cache_as_far_as_admission_needs_room)
{
    const uint64_t budget = 64u << 20, margin = budget / 16;
    adm_init(budget);
    oblock_cache_limit(32u << 20);
    cache_a_block(20000); /* ~8 MiB of bodies and rows */
    size_t cached = oblock_cache_bytes();
    cr_assert_gt(cached, 6u << 20);
    cr_assert_eq(adm_in_use(), cached);

    /* Room to spare: the cache stays. */
    store_memory_tick(adm_in_use());
    cr_expect_eq(oblock_cache_bytes(), cached);

    /* Other charges leave admission 1 MiB: the cache gives back what it
     * takes to leave the margin free again, in whole chunks, no more
     * than a chunk past it. */
    adm_charge(budget - cached - (1u << 20));
    store_memory_tick(adm_in_use());
    size_t left = oblock_cache_bytes();
    cr_expect_lt(left, cached);
    cr_expect_geq(adm_room(), margin);
    cr_expect_lt(adm_room(), margin + (2u << 20));
    cr_expect_eq(adm_in_use(), budget - (1u << 20) - cached + left);

    /* A query waiting for room (adm_demand) takes the rest. */
    adm_uncharge(budget - cached - (1u << 20));
    adm_demand_add((int64_t)budget);
    store_memory_tick(adm_in_use());
    cr_expect_eq(oblock_cache_bytes(), 0);
    cr_expect_eq(adm_in_use(), 0);
    adm_demand_add(-(int64_t)budget);

    /* An export that found no room empties it too, margin or not (one
     * export may need more than the margin). */
    cache_a_block(20000);
    cached = oblock_cache_bytes();
    cr_assert_gt(cached, 6u << 20);
    store_memory_tick(adm_in_use());
    cr_expect_eq(oblock_cache_bytes(), cached, "room to spare");
    cr_expect(!adm_try_charge(budget));
    store_memory_tick(adm_in_use());
    cr_expect_eq(oblock_cache_bytes(), 0);
    cr_expect_eq(adm_in_use(), 0);
}
