/*
 * sealer.h - the thread that turns full open blocks into block files, off
 * the shard threads: a shard swaps in a fresh open block and hands the full
 * one here, then keeps appending.
 *
 * Seals run one at a time in hand-over order, so each shard's sealed WAL
 * watermark only grows. After a block is published in the catalog the
 * sealer reports it to the shard through |sealed| (the shard then deletes
 * WAL segments the block covers) and runs the acks that waited for it
 * (--ack seal).
 */
#ifndef MIRADB_SEALER_H
#define MIRADB_SEALER_H

#include <stdint.h>

#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/shard.h"

struct seal_job {
    struct seal_job *next;
    struct cat_open *h; /* the full open block, still readable through the catalog */
    uint64_t rows;
    struct blk_meta meta;
    char dir[600];
    /* Acks waiting for this seal (--ack seal); done() runs after publish. */
    struct shard_job *acks;
    /* Called on the sealer thread once published (rc 0) or failed (-errno). */
    void (*sealed)(struct seal_job *j, int rc);
    void *owner;
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

/* Called on a sealer thread, without the sealer's lock held, once per
 * failed attempt; |f| is borrowed for the call. Must not block long
 * (a log line). */
typedef void (*sealer_failure_fn)(const struct seal_failure *f);
/* Sets the hook (NULL: none). Any thread. */
void sealer_set_failure_hook(sealer_failure_fn fn);

/* Starts the thread. |retention_*| as catalog_retain, checked every second. */
int sealer_start(uint64_t retention_age_ns, uint64_t retention_bytes);
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
 * up), then joins. */
void sealer_stop(void);
void sealer_get_stats(struct sealer_stats *out);

#endif
