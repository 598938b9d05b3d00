/*
 * compact.h - the cold tier: settled sealed blocks merged into fewer,
 * larger, zstd-compressed blocks by one low-priority thread.
 *
 * WHAT IS COMPACTED
 *   Hot blocks (written by a seal) of one signal whose newest row is older
 *   than compact_after are grouped by time window (the window of a block
 *   is its newest row's time divided by compact_after; a window is taken
 *   once its end is compact_after in the past), and each window's blocks,
 *   oldest first, are merged into cold blocks of at most
 *   compact_group_cap input bytes each: cold_target, or less so that the
 *   merge holds at most an eighth of the memory budget (it holds its rows
 *   in memory: the inputs' tables, the open block, then the writer's
 *   scratch at twice the open block; measured by each merge, 8x to 25x
 *   the input file bytes); a single input larger than that is still
 *   rewritten alone. The rows are read back whole, appended into one open block
 *   (its dictionaries hold each distinct resource, scope and metric once)
 *   and written by blk_write_ex with every table zstd at zstd_level: the
 *   writer sorts them by time (readers rely on time order: blk_lower_bound,
 *   the scans) and rebuilds blooms, zone maps, hot keys, the stream index
 *   and the gram bloom as for a seal. A cold block is never compacted
 *   again; its inputs may be of any format this miradb reads (2 to 6),
 *   it is written in the current one (6) with its log and span attribute
 *   lists by key (blk_wopts.attrs_by_key), its span events and links
 *   coded (blk_wopts.span_refs) and its point stream index by row
 *   (blk_wopts.streams_by_row).
 *
 * A COLD BLOCK ON DISK
 *   Named s65535-<cold id>.blk (BLK_COLD_SHARD: no shard's), header WAL
 *   watermark 0, and footer section 11 naming each input (shard, seal id,
 *   WAL watermark): the presence of that section is what makes it cold.
 *
 * THE WATERMARK RULE
 *   A shard's watermark (the WAL seq below which replay skips frames) is
 *   the highest of: its hot blocks' watermarks, its retained-<i>.seq file
 *   (catalog.c) and the source watermarks of every cold block. Compaction
 *   raises retained-<i>.seq to each input shard's highest input watermark
 *   (fsynced) before it writes the cold block, so removing the
 *   inputs never lowers a watermark, and a merged block that spans shards
 *   needs no per-shard header field: replay after a crash at any point
 *   neither duplicates nor loses a row. (The seal publishes a shard's
 *   blocks in WAL order, so every row at or below that watermark is in a
 *   block: hot, or cold through its sources.)
 *
 * THE ORDER OF A COMPACTION, and what a crash at each step leaves
 *   1. raise retained-<i>.seq           crash: harmless (the inputs still
 *                                       hold the rows and those watermarks)
 *   2. write <name>.blk.tmp, fsync      crash: the boot removes the .tmp
 *   3. rename to <name>.blk, fsync dir  crash: the boot finds the cold block
 *                                       and its inputs: the cold block wins,
 *                                       each input it names is unlinked
 *   4. catalog_replace: one swap under the catalog lock (a snapshot sees
 *      the inputs or the output, never both, never neither)
 *   5. each input unlinked when its last reference goes (running queries
 *      finish on it)                   crash: as after 3
 *   If retention or quarantine removed an input between 1 and 4, the cold
 *   block is removed and the window retried later (nothing changed); a
 *   crash in that gap keeps the cold block, with the rows retention had
 *   deleted, until retention deletes the cold block (it is as old).
 *
 * STEPPING BACK FOR INGEST
 *   What a merge holds is charged to the budget ingest is admitted
 *   against, and a closed-loop load fills whatever room is left, so a
 *   merge only takes memory while ingest is not short of it: a pass over
 *   a signal starts (takes its snapshot, whose pins keep the catalog from
 *   trimming those blocks' tables) once admission has had no refusal
 *   (adm_refusals) and no pacing (adm_pace_ns) for 200 ms, waiting up to
 *   1 s for that, else it is skipped; each merge starts only with room for
 *   its measured need and neither refusal nor pacing since (it does not
 *   wait holding the snapshot; compact_merge called alone waits up to 1 s
 *   for 200 ms of room); before each row chunk and before the write it looks
 *   again, and at the first refusal, pacing or lack of room it gives up
 *   (-EAGAIN: everything freed, nothing written, counted in yields) and
 *   the pass stops; the window is retried on the next pass. It never holds
 *   a lock ingest takes, so it cannot block ingest; it makes progress
 *   whenever ingest leaves room, and under a load that never does it
 *   waits (the backlog gauge shows it).
 *
 * The verification cache keys files by device, inode, size and mtime
 * (vcache.h), and a cold block has a new name and inode: no entry of an
 * input can match it.
 *
 * Threads: compact_start and compact_stop on the main thread (store.c);
 * the compaction thread runs at SCHED_IDLE (nice 19 where that fails),
 * so it takes only CPU that ingest and queries leave. compact_get_stats
 * from any thread. storage/ does not log: failures are
 * counted.
 */
#ifndef MIRADB_COMPACT_H
#define MIRADB_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/block.h"

struct compact_cfg {
    const char *data_dir;       /* copied */
    uint64_t compact_after_ms;  /* 0: no compaction (the thread is not started) */
    uint64_t cold_target_bytes; /* input bytes per cold block; 0: 256 MiB */
    int zstd_level;             /* 0: 3 */
};

#define COMPACT_TARGET_DEFAULT (256ull << 20)

/* Starts the compaction thread (nothing when compact_after_ms is 0).
 * 0 or -errno. */
int compact_start(const struct compact_cfg *c);
/* Stops it: a merge in progress is abandoned at its next row chunk (one
 * already writing its file finishes first). Before the shards and the catalog stop. */
void compact_stop(void);

/*
 * Merges in[0, n) (sealed blocks of one signal, referenced by the caller)
 * into one cold block in |dir| with seal id |cold_id|, every table zstd at
 * |zstd_level|, sources listing the inputs: the path in |path|. Does not
 * touch the catalog or the watermarks (compact.c's pass does; the unit
 * tests call this alone). The tables it loads of an input are freed once
 * that input's rows are in (unless another reader pins it). With |stop| non-NULL, an abandoned
 * merge (*stop set) returns -ECANCELED; one that stepped back for ingest (STEPPING BACK above;
 * never with no budget set) -EAGAIN. 0; -EINVAL (no input, mixed signals); -EBADMSG (an input table
 * fails its check: *bad is that input); -ENOMEM; -errno. Nothing is left behind on failure.
 */
int compact_merge(const char *dir, blk *const *in, size_t n, uint64_t cold_id, int zstd_level,
                  const _Atomic int *stop, size_t *bad, char *path, size_t cap);

/*
 * The input file bytes of one merge of signal |s|: |cold_target|, or less
 * so that the merge's peak memory (the measured peak per input byte of
 * the last merge of |s|, compact.c) stays within budget/COMPACT_MEM_DIV.
 * A single larger input is still merged alone. |budget| 0: cold_target.
 */
#define COMPACT_MEM_DIV 8
uint64_t compact_group_cap(enum signal s, uint64_t cold_target, uint64_t budget);

/* Is the window of a block whose newest row is at |max_ns| settled at
 * |now_ns|: its end (the next multiple of |after_ns|) at least |after_ns|
 * in the past? False for after_ns 0 (no overflow for times near 2^64). */
bool compact_window_settled(uint64_t max_ns, uint64_t after_ns, uint64_t now_ns);

struct compact_stats {
    uint64_t passes;             /* passes over the catalog */
    uint64_t compactions;        /* cold blocks written and published */
    uint64_t failures;           /* merges that failed (I/O, memory, a bad input) */
    uint64_t blocks_in;          /* hot blocks replaced */
    uint64_t bytes_in;           /* their file bytes */
    uint64_t bytes_out;          /* the cold blocks' file bytes */
    uint64_t rows;               /* rows rewritten */
    uint64_t ns;                 /* wall time spent merging */
    uint64_t backlog[SIG_COUNT]; /* [signal - 1]: hot blocks older than compact_after */
    uint64_t peak_bytes;         /* the most one merge held charged (adm_track_peak) */
    uint64_t peak_bytes_in;      /* that merge's input file bytes */
    uint64_t last_peak_bytes;    /* the same for the last merge (also compact_merge alone) */
    uint64_t last_bytes_in;
    uint64_t deferrals;   /* times a merge waited for ingest to leave room */
    uint64_t deferred_ns; /* time spent so */
    uint64_t yields;      /* merges given up for lack of room (retried later) */
};
void compact_get_stats(struct compact_stats *out);

#endif
