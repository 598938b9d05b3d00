/*
 * store.c - storage's lifecycle (see store.h): budget, catalog, seal
 * threads and shards, started in that order and stopped in reverse.
 *
 * DATA LAYOUT (under cfg->data_dir)
 *   wal/<signal>-<i>/   shard i's WAL segments (wal.c); none under --ack seal
 *   <signal>/           sealed blocks (block.c) and retained-<i>.seq (catalog.c)
 *   quarantine/         blocks that failed to open or verify
 *
 * SHUTDOWN ORDER
 *   0. compact_stop(): a merge in progress is abandoned (its temp file
 *      removed); the compactor reads and publishes blocks;
 *   1. sealer_give_up_at(deadline): no shard_stop below can then wait for
 *      ever on a seal that keeps failing (disk full);
 *   2. every shard_stop(): drains its queue, syncs its WAL, hands its last
 *      seal over and waits for its seals in flight;
 *   3. sealer_stop(): after the shards, which may hand over a last seal;
 *   4. diskfree_stop(): the shards no longer read its flag or kick it;
 *   5. catalog_fini(): after everything that reads or publishes blocks.
 */
#include "storage/store.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/clock.h"
#include "storage/adm.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/compact.h"
#include "storage/oblock.h"

#define ADM_RESERVE_DIV 8 /* the budget's share admission leaves free */
/* ... and this much more for what queries load on top of ingest at its
 * limit (tables, pages: the rss bench's query arm at 256 MiB peaked at
 * 254-257 MiB with the eighth alone, 244 with this; bench/PERFORMANCE.md,
 * "Peak RSS inside the budget"). */
#define ADM_RESERVE_QUERY_DIV 32
/* ... and at least this (or a 16th, below 64 MiB): at the 64 MiB floor a
 * query's tables and pages are a larger share of the budget (query arm at
 * 64 MiB: 65.0-65.5 MiB peak with the 32nd alone, 63.9-64.1 with this). */
#define ADM_RESERVE_QUERY_MIN (4u << 20)
#define MAX_SHARDS_ON_DISK 64

static shard **shards[SIG_COUNT]; /* [signal - 1][i] */
static int n_shards;
static uint64_t wal_bytes_at_boot; /* segment bytes found before replay */

/* Bytes of the files in |dir| (a shard's WAL segments). */
static uint64_t dir_bytes(const char *dir)
{
    char path[900];
    uint64_t n = 0;
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            n += (uint64_t)st.st_size;
        }
    }
    closedir(dp);
    return n;
}

static int mkdir_p(const char *path)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *q = tmp + 1; *q != '\0'; q++) {
        if (*q == '/') {
            *q = '\0';
            if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
                return -errno;
            }
            *q = '/';
        }
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
        return -errno;
    }
    return 0;
}

/*
 * Shards that left a WAL behind must replay it even if --shards is now
 * lower, or acknowledged records would be stranded: the shard count is the
 * larger of the flag and the WAL directories found.
 */
static int shards_on_disk(const char *data_dir)
{
    char dir[600];
    int n = 0;
    for (int s = 1; s <= SIG_COUNT; s++) {
        for (int i = n; i < MAX_SHARDS_ON_DISK; i++) {
            struct stat st;
            snprintf(dir, sizeof(dir), "%s/wal/%s-%d", data_dir, signal_name(s), i);
            if (stat(dir, &st) == 0) {
                n = i + 1;
            }
        }
    }
    return n;
}

/* The chunk cache is emptied once no open block has taken a chunk from it
 * (or allocated one) for this long: ingest stopped, and the memory goes back
 * to the system rather than staying resident for a load that may not come. */
#define CACHE_IDLE_NS (10 * 1000000000ull)
/* ... and not filled, or emptied as far as needed, to leave admission this
 * share of the budget (16 MiB of 256: dozens of the peer case's 1,000-record
 * exports). */
#define CACHE_ROOM_DIV 16

int store_open(const struct store_cfg *c, struct store_boot *boot, char *err, size_t errlen)
{
    char dir[600];
    int rc;

    memset(boot, 0, sizeof(*boot));
    sealer_set_failure_hook(c->seal_failed);
    adm_init(c->memory_budget);
    /* The committed charges that may land after admission filled the
     * budget (open-block growth, seal scratch, what queries load) come out
     * of this reserve, not past the budget. What the process holds
     * uncharged (thread stacks, the listeners' and ingest's per-thread
     * buffers, allocator slack, the mapped binary) is measured from its
     * RSS and comes off admission besides (store_memory_tick). */
    uint64_t qres = c->memory_budget / ADM_RESERVE_QUERY_DIV, qmin = c->memory_budget / 16;
    qmin = qmin < ADM_RESERVE_QUERY_MIN ? qmin : ADM_RESERVE_QUERY_MIN;
    adm_set_reserve(c->memory_budget / ADM_RESERVE_DIV + (qres > qmin ? qres : qmin));
    n_shards = c->shards;
    if (shards_on_disk(c->data_dir) > n_shards) {
        n_shards = shards_on_disk(c->data_dir);
        boot->shards_raised = true;
    }
    boot->shards = n_shards;
    catalog_init(c->data_dir);
    /* Sealed blocks' loaded tables are charged to the budget; a quarter of
     * it keeps the blocks queries read most recently decoded and leaves
     * admission three quarters (catalog.h). */
    catalog_set_table_cap(c->memory_budget / 4);
    /* Before the shards: a start on a nearly full disk refuses from the
     * first export. mkdir first, statvfs needs the directory. */
    rc = mkdir_p(c->data_dir);
    if (rc == 0) {
        rc = diskfree_start(c->data_dir, c->min_free_bytes, c->disk_changed);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot watch the free space of %s: %s", c->data_dir, strerror(-rc));
        return rc;
    }
    sealer_test_delay(c->test_seal_delay_ms);
    sealer_set_zstd_level(c->hot_zstd_level == 0  ? BLK_HOT_ZSTD_LEVEL
                          : c->hot_zstd_level < 0 ? 0
                                                  : c->hot_zstd_level);
    rc = sealer_start(c->retention_age_ms * 1000000u, c->retention_bytes);
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the sealer: %s", strerror(-rc));
        return rc;
    }
    /* Open blocks may hold a third of the budget between them (a third more
     * while their successors fill during a seal), whatever --block-target says. */
    size_t target = c->block_target;
    size_t share = c->memory_budget / (3u * SIG_COUNT * (size_t)n_shards);
    if (share < target) {
        target = share;
    }
    /* An empty open block already holds about 1.6 MiB of column directories:
     * below 2 MiB a block would seal on every drain. */
    if (target < (2u << 20)) {
        target = 2u << 20;
    }
    /* A seal's scratch is kept for the next seal only when its block was
     * about the target (sealed after the batch that passed it); the scratch
     * of a block one huge export made is freed and its charge returned. */
    blk_scratch_keep(target + target / 2);
    /* A sealed block's chunks are cached for the next block to fill: room
     * for one block (and the batch that passed the target) per shard, or
     * the chunks of a seal that completes before its successor drew the
     * last one's are freed and the next blocks fill fresh memory, a page
     * fault and a kernel zeroing per 4 KiB (bench/PERFORMANCE.md, h-oblk:
     * room for one signal's shards measured 2-3 times the faults of this).
     * A third of the budget at most (the open blocks' share, above): what
     * the cache holds is what sealed blocks held, charged while cached,
     * and given back as soon as admission runs short of room, a query
     * waits for room, or no block has drawn a chunk for a while
     * (store_memory_tick). */
    oblock_cache_limit((size_t)SIG_COUNT * (size_t)n_shards * (target + target / 8));
    oblock_cache_keep_room(c->memory_budget / CACHE_ROOM_DIV);
    uint64_t max_age_ms = c->block_max_age_ms != 0   ? c->block_max_age_ms
                          : c->ack == SHARD_ACK_SEAL ? 1000
                                                     : 60000;
    uint64_t *watermarks = calloc((size_t)n_shards, sizeof(uint64_t));
    uint64_t *seal_ids = calloc((size_t)n_shards, sizeof(uint64_t));
    if (watermarks == NULL || seal_ids == NULL) {
        free(watermarks);
        free(seal_ids);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int s = 0; s < SIG_COUNT && rc == 0; s++) {
        rc =
            catalog_load(s + 1, n_shards, watermarks, seal_ids, &boot->quarantined[s], err, errlen);
        if (rc < 0) {
            break;
        }
        shards[s] = calloc((size_t)n_shards, sizeof(shard *));
        if (shards[s] == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
            break;
        }
        char bdir[600];
        snprintf(bdir, sizeof(bdir), "%s/%s", c->data_dir, signal_name(s + 1));
        for (int i = 0; i < n_shards; i++) {
            snprintf(dir, sizeof(dir), "%s/wal/%s-%d", c->data_dir, signal_name(s + 1), i);
            rc = c->ack == SHARD_ACK_SEAL ? 0 : mkdir_p(dir);
            if (rc < 0) {
                snprintf(err, errlen, "cannot create %s: %s", dir, strerror(-rc));
                break;
            }
            wal_bytes_at_boot += dir_bytes(dir);
            struct shard_cfg sc = {
                .wal_dir = dir,
                .block_dir = bdir,
                .signal = (enum signal)(s + 1),
                .index = i,
                .queue_cap = c->queue,
                .ack = c->ack,
                .block_target = target,
                .block_max_age_ms = (int)max_age_ms,
                .wal_after = watermarks[i],
                .next_seal_id = seal_ids[i],
                .decode = c->replay,
                .delay_ms = c->test_shard_delay_ms,
            };
            rc = shard_start(&sc, &shards[s][i]);
            if (rc < 0) {
                snprintf(err, errlen, "cannot start the %s shard %d: %s", signal_name(s + 1), i,
                         strerror(-rc));
                break;
            }
        }
    }
    free(watermarks);
    free(seal_ids);
    if (rc == 0) {
        /* After the catalog is loaded (it picks from it); low priority. */
        struct compact_cfg cc = {.data_dir = c->data_dir,
                                 .compact_after_ms = c->compact_after_ms,
                                 .cold_target_bytes = c->cold_target,
                                 .zstd_level = c->zstd_level};
        rc = compact_start(&cc);
        if (rc < 0) {
            snprintf(err, errlen, "cannot start the compactor: %s", strerror(-rc));
        }
    }
    return rc;
}

/* store_memory_tick's thread only */
static uint64_t cache_draws, cache_draw_ns, seen_refusals;

void store_memory_tick(uint64_t rss)
{
    uint64_t counted = adm_in_use(), now = clock_mono_ns();
    adm_set_uncounted(rss > counted ? rss - counted : 0);
    struct oblock_cache_stats cs;
    oblock_cache_get_stats(&cs);
    if (cs.reused + cs.fresh != cache_draws) {
        cache_draws = cs.reused + cs.fresh;
        cache_draw_ns = now;
    } else if (cs.bytes > 0 && now - cache_draw_ns >= CACHE_IDLE_NS) {
        oblock_cache_trim(cs.bytes);
    }
    /* The cache goes first when memory is short: before admission stops
     * (less than CACHE_ROOM_DIV of the budget left to admit), while a query
     * waits for room (qctx.c waits for what seals free, which the cache
     * would keep), and before the tables a query may read again. */
    uint64_t over = adm_excess(), want = adm_demand(), margin = adm_budget() / CACHE_ROOM_DIV;
    uint64_t room = adm_room(), refusals = adm_refusals();
    if (room < margin && margin - room > want) {
        want = margin - room;
    }
    /* An export found no room since the last tick: the cache is memory
     * admission could have had, whatever the margin (an export may need
     * more than it). */
    if (refusals != seen_refusals) {
        seen_refusals = refusals;
        want = UINT64_MAX;
    }
    if (cs.bytes > 0 && (over > 0 || want > 0)) {
        oblock_cache_trim(over > want ? over : want);
    }
    if (over > 0 && adm_excess() > 0) {
        catalog_trim_tables();
    }
}

bool store_ready(void)
{
    struct shard_stats st;
    for (int s = 0; s < SIG_COUNT; s++) {
        for (int i = 0; i < n_shards; i++) {
            shard_get_stats(shards[s][i], &st);
            if (!st.replayed) {
                return false;
            }
        }
    }
    return n_shards > 0;
}

void store_close(uint64_t give_up_ns)
{
    compact_stop();
    sealer_give_up_at(give_up_ns);
    for (int s = 0; s < SIG_COUNT; s++) {
        for (int i = 0; i < n_shards && shards[s] != NULL; i++) {
            shard_stop(shards[s][i]);
        }
        free(shards[s]);
        shards[s] = NULL;
    }
    sealer_stop();
    diskfree_stop();
    catalog_fini();
    sealer_set_failure_hook(NULL);
}

uint64_t store_wal_bytes_at_boot(void)
{
    return wal_bytes_at_boot;
}

int store_shard_count(void)
{
    return n_shards;
}

void store_shard_stats(enum signal s, int i, struct shard_stats *out)
{
    shard_get_stats(shards[s - 1][i], out);
}

shard *store_reserve(enum signal s, unsigned start)
{
    shard **row = shards[s - 1];
    for (int i = 0; i < n_shards; i++) {
        shard *cand = row[(start + (unsigned)i) % (unsigned)n_shards];
        if (shard_reserve(cand)) {
            return cand;
        }
    }
    return NULL;
}
