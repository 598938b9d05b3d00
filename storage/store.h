/*
 * store.h - the front door to storage: what the daemon starts, asks and
 * stops. Behind it: the catalog, the memory budget, the seal threads and
 * one shard per signal and index (shard.h, sealer.h, catalog.h).
 *
 * store_open() loads every signal's sealed blocks into the catalog, starts
 * the seal threads, then the shards; each shard replays its WAL on its own
 * thread (store_ready() turns true when all have), decoding the frames
 * through the replay hook: the decoders live in proto/, above storage/,
 * so the caller passes them in. store_close() stops everything in the one
 * order that loses nothing (see store.c).
 *
 * storage/ never logs: what the boot found comes back in struct store_boot,
 * each failed seal attempt goes to the hook in struct store_cfg, and replay
 * progress is read with store_shard_stats(); server/ logs them.
 *
 * One store per process. store_open() and store_close() run on the main
 * thread, neither on an I/O thread; everything else on any thread between
 * them.
 */
#ifndef MIRADB_STORE_H
#define MIRADB_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/diskfree.h"
#include "storage/sealer.h"
#include "storage/shard.h"

struct store_cfg {
    const char *data_dir; /* borrowed for the call (everything copies it) */
    int shards;           /* per signal; raised to the WAL directories found */
    int queue;            /* a shard's queue: reserved + queued exports */
    enum shard_ack ack;
    uint64_t memory_budget;        /* the whole budget (adm.h); open blocks get a share */
    uint64_t block_target;         /* seal an open block at this size (or its share) */
    uint64_t block_max_age_ms;     /* ... or this old; 0: 60 s, or 1 s under SHARD_ACK_SEAL */
    uint64_t retention_age_ms;     /* 0: keep */
    uint64_t retention_bytes;      /* 0: keep */
    uint64_t compact_after_ms;     /* the cold tier (compact.h); 0: off */
    uint64_t cold_target;          /* 0: COMPACT_TARGET_DEFAULT */
    int zstd_level;                /* cold tables; 0: 3 */
    int hot_zstd_level;            /* sealed (hot) tables; 0: BLK_HOT_ZSTD_LEVEL; -1: plain */
    shard_decode_fn replay;        /* the replay hook: decodes one WAL payload */
    sealer_failure_fn seal_failed; /* NULL: none; called as sealer_set_failure_hook says */
    uint64_t min_free_bytes;       /* refuse exports below this free space (diskfree.h); 0: never */
    diskfree_fn disk_changed;      /* NULL: none; called when the low-space flag changes */
    int test_shard_delay_ms;       /* tests only: a slow shard */
    int test_seal_delay_ms;        /* tests only: a lagging sealer (sealer_test_delay) */
};

/* What store_open found, for the boot log (filled as far as it got, also
 * when it fails). */
struct store_boot {
    int shards;                      /* per signal, as started */
    bool shards_raised;              /* shards > cfg->shards: that many WAL directories exist */
    uint64_t quarantined[SIG_COUNT]; /* [signal - 1]: blocks moved to DATA/quarantine/ */
};

/*
 * Sets the memory budget, loads the catalog, starts the seal threads and
 * the shards. Shards that left a WAL behind are all started even if
 * cfg->shards is lower, or acknowledged records would be stranded.
 * Returns 0, or -errno with a message in |err| (the process should exit:
 * what was started is not stopped).
 */
int store_open(const struct store_cfg *c, struct store_boot *boot, char *err, size_t errlen);
/*
 * Finishes every shard's queued work, syncs and closes the WALs, runs the
 * last seals, frees the catalog. Seals still failing at |give_up_ns|
 * (CLOCK_MONOTONIC) are abandoned: their rows stay in the WAL for the next
 * boot (sealer_give_up_at), so this returns soon after the deadline even
 * when the disk is full. Call once the I/O threads no longer submit.
 */
void store_close(uint64_t give_up_ns);

/* True once every shard has replayed its WAL. */
bool store_ready(void);
/*
 * The process's resident bytes now (|rss|, read by the caller from
 * /proc/self/statm): what the budget's count does not cover becomes
 * adm_set_uncounted, and when that takes the process past the admission
 * limit the open blocks' chunk cache is emptied first and then the idle
 * tables are dropped (catalog_trim_tables); the cache is also emptied
 * while a query waits for room (adm_demand), as far as needed to leave
 * admission a sixteenth of the budget, wholly once an export found no
 * room (adm_refusals), and once no open block has drawn a chunk for 10 s.
 * The daemon's main loop calls it every 20 ms; any one thread.
 */
void store_memory_tick(uint64_t rss);
/* WAL segment bytes on disk when the shards started (replay's 100%). */
uint64_t store_wal_bytes_at_boot(void);
/* Shards per signal, and a copy of one shard's counters. */
int store_shard_count(void);
void store_shard_stats(enum signal s, int i, struct shard_stats *out);
/*
 * Takes a queue slot on one of |s|'s shards, trying them round-robin from
 * index |start| (any value; taken modulo the count): the shard, or NULL
 * when every queue is full. Give the slot back with shard_unreserve() or
 * use it with shard_submit_take(). Any thread.
 */
shard *store_reserve(enum signal s, unsigned start);

#endif
