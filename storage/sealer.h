/*
 * sealer.h - the seal threads (SEALER_THREADS of them, sealer.c) that turn
 * full open blocks into block files, off the shard threads: a shard swaps
 * in a fresh open block and hands the full one here, then keeps appending.
 *
 * A shard's seals run one at a time in hand-over order, so its sealed WAL
 * watermark only grows; different shards' seals run in parallel. After a
 * block is published in the catalog the sealer reports it to its owner
 * through |sealed| (the shard then deletes the WAL segments the block
 * covers and, under --ack seal, answers the exports that waited for it).
 * The sealer knows nothing of shards: |owner| only orders the seals.
 */
#ifndef MIRADB_SEALER_H
#define MIRADB_SEALER_H

#include <stdint.h>

#include "storage/block.h"
#include "storage/catalog.h"

struct seal_job {
    struct seal_job *next;
    struct cat_open *h; /* the full open block, still readable through the catalog */
    uint64_t rows;
    struct blk_meta meta;
    char dir[600];
    /* Called on a seal thread once published (rc 0) or failed (-errno);
     * it takes |j| back. */
    void (*sealed)(struct seal_job *j, int rc);
    void *owner; /* seals of one owner run one at a time, in order */
};

struct sealer_stats {
    uint64_t seals;
    uint64_t seal_failures;   /* failed attempts (each one reported to the failure hook) */
    uint64_t seals_abandoned; /* blocks given up at shutdown, or cancelled behind one */
    uint64_t rows_sealed;
    uint64_t bytes_written;
    uint64_t seal_ns; /* total time spent writing and publishing */
    uint64_t retention_runs;
};

/* One failed seal attempt, as the failure hook sees it. */
struct seal_failure {
    enum signal signal;
    uint32_t shard;
    uint64_t seal_id;
    uint64_t rows;
    unsigned attempt; /* 1 for the first failure of this block */
    const char *step; /* "write", "open" or "publish": what failed */
    int error;        /* -errno: -ENOSPC, -EIO, -EMFILE, -EBADMSG (read back damaged) ... */
    char path[700];   /* the block file (or its directory, if no name was made) */
    char detail[200]; /* blk_open's reason, or "" */
    int retry_in_s;   /* seconds until the next attempt; -1: given up (shutdown) */
};

/* Called on one of the seal threads, without the sealer's lock held, once
 * per failed attempt; both threads may call it at once. |f| is borrowed
 * for the call. Must not block long (a log line). */
typedef void (*sealer_failure_fn)(const struct seal_failure *f);
/* Sets the hook (NULL: none). Any thread. */
void sealer_set_failure_hook(sealer_failure_fn fn);

/* Starts the seal threads. |retention_*| as catalog_retain, checked every
 * second (by one of them). 0 or -errno. */
int sealer_start(uint64_t retention_age_ns, uint64_t retention_bytes);
/*
 * Seals are background work: no export waits for one (--ack wal / fsync).
 * The seal threads then run at nice SEALER_NICE (10), below the I/O and
 * shard threads, so that an export being read, decoded or logged preempts a
 * seal at once instead of waiting out its slice for a core. The sealer
 * still keeps up: admission paces ingest against the memory it holds
 * (adm.h), and that idle time is the sealer's. Not called under --ack
 * seal, where the seal is the ack. Any thread, any time; applied before
 * each thread's next job.
 */
void sealer_background(void);
/* Tests only: every seal first sleeps |ms| (a sealer that lags). */
void sealer_test_delay(int ms);
/* The codec of the blocks seals write from now on: |zstd_level| > 0 the
 * signal's zstd tables (block.h, blk_hot_wopts) at that level, 0 plain.
 * The default is BLK_HOT_ZSTD_LEVEL (block.h). Any thread (read by each
 * seal). */
void sealer_set_zstd_level(int zstd_level);
/* Queues |j| (taken). Any thread. */
void sealer_submit_take(struct seal_job *j);
/* Shutdown: a seal that fails at or after |deadline_ns| (CLOCK_MONOTONIC)
 * is not retried, and a retry pause ends at the deadline. The block stays
 * unsealed and its shard publishes no later block (the jobs end with
 * -ECANCELED), so the WAL keeps every row of them for the next boot. A
 * seal that is writing when the deadline passes is not interrupted. Any
 * thread; call before shard_stop() so that it cannot wait forever. */
void sealer_give_up_at(uint64_t deadline_ns);
/* Runs every queued seal (a failing one is tried once more, then given
 * up), then joins the seal threads. */
void sealer_stop(void);
void sealer_get_stats(struct sealer_stats *out);

#endif
