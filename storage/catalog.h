/*
 * catalog.h - what a query can read, per signal: the sealed blocks and the
 * open blocks (each shard's current one, and full ones being sealed).
 *
 * A sealed block replaces the open block it was written from in one step
 * under the catalog lock, so a snapshot sees every acknowledged row exactly
 * once: either in the open block or in the sealed one, never both, never
 * neither. Open blocks are refcounted through their handle: the catalog
 * holds one reference, every snapshot holding it another; the last release
 * frees the block and returns its memory to the budget.
 */
#ifndef MIRADB_CATALOG_H
#define MIRADB_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/block.h"
#include "storage/oblock.h"

/* An open block as the catalog and snapshots hold it. */
struct cat_open;

/* A consistent view of one signal's data. Release with catalog_snap_release. */
struct cat_snap {
    enum signal sig;
    blk **blocks; /* referenced */
    size_t n_blocks;
    const oblock **open; /* referenced through |handles| */
    uint64_t *open_rows; /* rows visible when the snapshot was taken */
    struct cat_open **handles;
    size_t n_open;
    uint8_t *pinned; /* per block: pinned for the holder (catalog_snap_unpin) */
};

struct cat_stats {
    uint64_t blocks;
    uint64_t block_bytes; /* sealed files on disk */
    uint64_t rows;        /* in sealed blocks */
    uint64_t retention_deleted;
    uint64_t retention_bytes_deleted;
    uint64_t quarantined_at_boot; /* blocks catalog_load could not open */
    uint64_t cold_inputs_removed; /* at boot: inputs found beside their cold block */
    uint64_t unsealed_rows;       /* rows in open blocks, those being sealed included */
    uint64_t unsealed_blocks;
};

/* Before anything else: where DATA is. */
void catalog_init(const char *data_dir);
/* Drops every block and handle (after the shards stopped). */
void catalog_fini(void);

/*
 * Opens every DATA/<signal>/ *.blk (removing leftover temp files), adds them
 * to the catalog and reports, per shard index below |n_shards|, the highest
 * WAL seq sealed (watermarks[i], 0 if none) and the next seal id to use.
 * A block that fails to open is moved to DATA/quarantine/ and counted in
 * *quarantined. A hot block that a cold block names as its source (a
 * compaction died between its rename and the inputs' unlink) is unlinked:
 * the cold block holds its rows (compact.h). Returns 0 or -errno (message
 * in err). A cold block's sources count for the watermarks and seal ids
 * of their shards, as if their files were still there.
 */
int catalog_load(enum signal s, int n_shards, uint64_t *watermarks, uint64_t *next_seal_ids,
                 uint64_t *quarantined, char *err, size_t errlen);

/* Registers an open block: the catalog takes |ob| and lists it for
 * snapshots. The handle stays valid until catalog_publish,
 * catalog_open_drop or catalog_fini. No budget charge goes with it until
 * catalog_open_set_charged. Returns NULL on out of memory (|ob| is then
 * still the caller's). */
struct cat_open *catalog_open_add(enum signal s, oblock *ob);
/* The open block behind a handle (borrowed, as long as the handle). */
oblock *catalog_open_block(struct cat_open *h);
/* Bytes of budget (adm.h) the block returns when the last reference to it
 * goes (the shard keeps it equal to what it charged for the block). */
void catalog_open_set_charged(struct cat_open *h, size_t charged);
/* Replaces the open block of |h| by sealed block |b|, the file at |path|
 * (the catalog takes the caller's reference to |b|). 0, or -ENOMEM (then
 * nothing changed and the caller still owns its reference). */
int catalog_publish(struct cat_open *h, blk *b, const char *path);
/* Removes an open block without a sealed replacement (empty block). */
void catalog_open_drop(struct cat_open *h);

/*
 * Fills |out| with a consistent view of |s|: a reference to every sealed
 * block and every open block listed now, and each open block's row count
 * now (rows appended later are not part of the snapshot). A block the
 * catalog drops later (retention, publish) stays readable through the
 * snapshot until it is released. Any thread; holds the catalog lock for
 * the copy only. 0, or -ENOMEM (then |out| holds nothing).
 */
int catalog_snapshot(enum signal s, struct cat_snap *out);
/* Drops the snapshot's references (the last one to an open block frees it
 * and returns its budget charge) and zeroes |sn|. */
void catalog_snap_release(struct cat_snap *sn);

/* Deletes the oldest sealed blocks of every signal while a block's newest
 * row is older than |max_age_ns| (0: no age limit) or the sealed bytes of
 * all signals exceed |max_bytes| (0: no limit). Open blocks are never
 * touched. Returns how many blocks were deleted. */
int catalog_retain(uint64_t now_ns, uint64_t max_age_ns, uint64_t max_bytes);

/* ---- the cold tier (compact.h) ---- */

/* The next seal id for a cold block (one sequence for the whole data
 * directory: catalog_load starts it past every cold block it found). */
uint64_t catalog_cold_id_take(void);
/*
 * Raises DATA/<signal>/retained-<shard>.seq (see catalog.c) to the highest
 * WAL watermark of |src| per shard, durably, before a cold block holding
 * those rows is renamed into place: the shards' watermarks then no longer
 * depend on the input files. 0 or -errno (then the caller must not rename).
 */
int catalog_persist_watermarks(enum signal s, const struct blk_source *src, uint32_t n);
/*
 * Replaces the sealed blocks in[0, n) of |s| by |out|, the file at |path|,
 * in one step under the catalog lock (the catalog takes the caller's
 * reference to |out|): a snapshot taken before holds the inputs, one taken
 * after holds |out|. Each input's file is unlinked when its last reference
 * goes (blk_unlink_on_release). -ESTALE when an input is no longer listed
 * (retention or quarantine took it meanwhile), -ENOMEM: then nothing
 * changed and the caller still owns |out|.
 */
int catalog_replace(enum signal s, blk *const *in, size_t n, blk *out, const char *path);

struct cat_tier {
    uint64_t blocks, bytes, rows;
};
/* Sealed blocks of |s| by tier: [0] hot, [1] cold. */
void catalog_get_tiers(enum signal s, struct cat_tier out[2]);

/* ---- sealed blocks' loaded tables ---- */

/*
 * A query loads the tables of the sealed blocks it reads (block.h); they
 * stay loaded for the next query, charged to the memory budget, until the
 * catalog drops them. The cap bounds them: when what they built on the
 * heap (blk_stats.table_heap_bytes less table_inflated_bytes) is above it,
 * or the inflated copies of zstd tables (table_inflated_bytes) are above
 * half of it, catalog_trim_tables drops the tables of the least recently
 * read blocks (blk_read_stamp) that nobody has pinned, until it is not.
 * The rule that makes that safe: a snapshot pins every block it holds
 * (blk_pin) for its holder, who may read the block's tables and keep
 * pointers into them as long as the pin is held; the drop takes the
 * block's lock and does nothing while a pin is held. A holder that is done
 * with one block before the rest (a scan that finished it and kept no
 * pointer into it) gives that pin up early with catalog_snap_unpin, and
 * from then on the cap may drop the block's tables; to read the block
 * again it pins first (catalog_snap_pin) and loads (blk_load). Without
 * that, a running query's blocks keep their tables past the cap until it
 * releases its snapshot. 0 (the default): no cap. The daemon sets a
 * quarter of --memory-budget, so loaded tables hold at most three eighths
 * of it. The inflated copies have an allowance apart because a plain
 * table is read from the file mapping (page cache, not charged): counted
 * under one cap, a compressed seal's tables would get less room for the
 * same rows than a plain seal's and be dropped and inflated again on every
 * query (bench/STORAGE.md, "Compressed hot blocks at query time").
 */
void catalog_set_table_cap(uint64_t bytes);
uint64_t catalog_table_cap(void);
/* Gives up / takes again the pin of sn->blocks[i] (see above): once each
 * way, by one thread at a time per block. */
void catalog_snap_unpin(struct cat_snap *sn, size_t i);
void catalog_snap_pin(struct cat_snap *sn, size_t i);
/* Drops idle blocks' tables while either is over the cap (see above), or
 * while the process is over the admission limit (adm_excess: a cache
 * yields to ingest and to committed charges); returns how many blocks'
 * tables it dropped. catalog_snap_release runs it
 * after letting go of its references. Any thread; not the ingest path. */
int catalog_trim_tables(void);
/* How many times a block's tables were dropped by the cap, in total. */
uint64_t catalog_tables_dropped(void);

/* Removes |b| from the catalog (after quarantine). */
void catalog_forget(blk *b);

void catalog_get_stats(enum signal s, struct cat_stats *out);

#endif
