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
    uint64_t seal_failures;
    uint64_t rows_sealed;
    uint64_t bytes_written;
    uint64_t seal_ns; /* total time spent writing and publishing */
    uint64_t retention_runs;
};

/* Starts the thread. |retention_*| as catalog_retain, checked every second. */
int sealer_start(uint64_t retention_age_ns, uint64_t retention_bytes);
/* Queues |j| (taken). Any thread. */
void sealer_submit_take(struct seal_job *j);
/* Runs every queued seal, then joins. */
void sealer_stop(void);
void sealer_get_stats(struct sealer_stats *out);

#endif
