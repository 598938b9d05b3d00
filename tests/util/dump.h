/*
 * dump.h - every row a data directory holds, read offline the way the
 * daemon reads it at boot, for tests that must check exactly which records
 * survived (crash and corruption tests) before a query language can say so.
 *
 * For each signal: every DATA/<signal>/ *.blk that opens (trailer, footer
 * and root table verified; BLK_OPEN_NO_CACHE, so every table read is hashed
 * here, whatever this process verified before) contributes its rows, and
 * its per-shard WAL watermark; a block that fails to open is skipped and
 * counted (the daemon quarantines it). Then, per shard, the WAL segments of
 * DATA/wal/<signal>-<i>/ are replayed above that shard's watermark with
 * wal_open, decoded with pbdec/jsondec into a batch and appended to an open
 * block, exactly as a shard replays at boot, and the open block's rows are
 * handed out too. The WAL is replayed from a private copy, so the data
 * directory is never changed (the daemon, at its next boot, cuts torn tails
 * itself). Leftover *.tmp files of unfinished seals are counted, not read.
 * A hot block that a cold block names as its input is skipped and counted,
 * and a cold block's inputs' watermarks count as its shards' (the daemon's
 * boot rules, storage/compact.h).
 *
 * Single-threaded; call it while no daemon runs on the directory (after a
 * kill or a stop).
 */
#ifndef MIRADB_TEST_DUMP_H
#define MIRADB_TEST_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/oblock.h"

/* One row. The views (and |source|) are borrowed for the callback only. */
struct dump_row {
    enum signal sig;
    uint32_t shard;
    bool from_wal;      /* a replayed WAL frame; false: a sealed block */
    uint64_t wal_seq;   /* WAL rows: the frame's seq; block rows: the block's watermark */
    const char *source; /* the block file, or the WAL directory */
    /* BLK_ROOT | BLK_ATTRS | BLK_DETAIL: the tables this row was read from.
     * A block table that failed its check is left out (its fields come back
     * empty); WAL rows have them all. */
    unsigned tables;
    const struct log_view *log;     /* SIG_LOGS, else NULL */
    const struct span_view *span;   /* SIG_TRACES, else NULL */
    const struct point_view *point; /* SIG_METRICS, else NULL */
};

/* A negative return stops the dump; dump_data_dir returns it. */
typedef int (*dump_fn)(void *ctx, const struct dump_row *r);

struct dump_sig_stats {
    uint64_t blocks;           /* opened */
    uint64_t blocks_bad;       /* failed to open (the daemon quarantines them) */
    uint64_t tables_bad;       /* attribute or detail tables that failed their check */
    uint64_t tmp_files;        /* *.tmp left by a seal that did not finish */
    uint64_t compacted_inputs; /* hot blocks a cold block names (skipped: the boot removes them) */
    uint64_t block_rows;       /* rows of the blocks that opened */
    uint64_t wal_shards;       /* WAL directories found */
    uint64_t wal_frames;       /* frames above the watermark, replayed */
    uint64_t wal_skipped;      /* intact frames at or below the watermark */
    uint64_t wal_bad_frames;   /* intact frames that did not decode (skipped, as the daemon does) */
    uint64_t wal_torn;         /* torn or corrupt tails wal_open cut (in the copy) */
    uint64_t wal_rows;         /* rows of the replayed frames */
    uint64_t watermark_max;    /* highest block watermark over the shards */
};

struct dump_stats {
    struct dump_sig_stats sig[SIG_COUNT]; /* [signal - 1] */
    uint64_t quarantined_files;           /* files in DATA/quarantine/ */
};

/*
 * Hands every row of |data| to |fn| (may be NULL to only count), signal by
 * signal: block rows first (blocks in file-name order, rows in block
 * order), then WAL rows (shard by shard, in seq order). |st| (may be NULL)
 * is filled in. Returns 0; -errno for an I/O error or out of memory, with a
 * one-line reason in |err|; or whatever negative |fn| returned.
 */
int dump_data_dir(const char *data, dump_fn fn, void *ctx, struct dump_stats *st, char *err,
                  size_t errlen);

/* Total rows of one signal in |st| (block rows + WAL rows). */
uint64_t dump_rows(const struct dump_stats *st, enum signal s);

/* ---- test records that carry a unique id ----
 *
 * A test that must check exact-once gives every record it exports a unique
 * id (at most DUMP_ID_MAX) and reads it back with dump_row_id. The id is
 * stored redundantly, so a row whose fields disagree is caught too:
 *   logs     body "rec-<id as 16 hex digits>", time T0 + id, observed
 *            T0 + id + 7, severity 9, attribute rec.id = id
 *   traces   trace id "MiraTest" + id (big-endian), span id = id
 *            (big-endian), name "rec-span", start T0 + id, end start +
 *            1000, trace_state "rec", attribute rec.id = id
 *   metrics  one gauge "rec.gauge" per request, points with start T0 + id
 *            - 5, time T0 + id, as_int = id, attribute rec.id = id
 * T0 = DUMP_T0 (2026-01-01T00:00:00Z). Resource service.name =
 * "miradb-test", scope "rec".
 */
#define DUMP_T0 1767225600000000000ull
#define DUMP_ID_MAX (1ull << 48)

/* The body of an export request holding records id0 .. id0 + n - 1 of
 * signal |s| (n >= 1): protobuf, or OTLP/JSON when |json|. Returned owned
 * (free()); NULL on out of memory. */
uint8_t *dump_request(enum signal s, bool json, uint64_t id0, uint32_t n, size_t *len);

/* The id of a row made from dump_request, or -1 with the reason in |why|
 * when the row is not one, or its fields do not agree (the fields of tables
 * the row was not read from are not checked). */
int64_t dump_row_id(const struct dump_row *r, char *why, size_t whylen);

#endif
