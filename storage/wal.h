/*
 * wal.h - per-shard write-ahead log (frames in numbered segment files).
 *
 * One wal per shard, used only by its shard thread (wal_open may run on
 * any thread before the shard starts). The frame format is specified in
 * wal.c. An append is one write(2); durability beyond the page cache is
 * wal_sync() (fdatasync), which the shard calls once per drain under
 * --ack fsync.
 */
#ifndef MIRADB_WAL_H
#define MIRADB_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

typedef struct wal wal;

struct wal_stats {
    uint64_t frames_appended;
    uint64_t bytes_appended; /* frame bytes, headers included */
    uint64_t fsyncs;
    uint64_t frames_replayed;
    uint64_t bytes_replayed;
    uint64_t frames_skipped; /* intact frames at or below |after| */
    uint64_t torn_frames;    /* torn or corrupt tails truncated at open (0 or 1 per segment) */
    uint64_t torn_bytes;     /* bytes cut off by those truncations */
    uint64_t segments;       /* segment files now open or on disk */
};

/* A frame's payload format (frame byte 17): the request body as received,
 * after gunzip, so replay knows which decoder to use. Byte 16 is the
 * signal; bytes 18-19 are zero. A frame with an unknown signal or format
 * is corrupt. */
enum wal_format {
    WAL_FMT_PROTOBUF = 0,
    WAL_FMT_JSON = 1,
};

/* Called for each intact frame above |after|, in seq order. A negative
 * return stops the replay and wal_open returns it. */
typedef int (*wal_replay_fn)(void *ctx, uint64_t seq, enum signal sig, enum wal_format fmt,
                             const uint8_t *payload, size_t n);

/*
 * Opens the WAL in |dir| (created if missing), replaying it through |fn|
 * (may be NULL). A frame that runs past the end of its segment or fails its
 * CRC ends the log: the segment is truncated before it, any later segments
 * are removed, and the event is counted in torn_frames/torn_bytes — never
 * an error. New frames continue after the highest seq seen (or |after|).
 * Returns 0; -errno for I/O errors; whatever |fn| returned.
 */
int wal_open(const char *dir, uint64_t after, wal_replay_fn fn, void *ctx, wal **out);

/*
 * Appends one frame holding |payload| with one write(2). Returns its seq
 * (>= 1, strictly increasing), or -errno (a failed or short write is cut
 * back off the file, so the log stays well-formed). -E2BIG if |n| exceeds
 * WAL_FRAME_MAX.
 */
int64_t wal_append(wal *w, enum signal sig, enum wal_format fmt, const void *payload, size_t n);
#define WAL_FRAME_MAX (256u << 20)

/* fdatasync of the current segment. 0 or -errno. */
int wal_sync(wal *w);

/* Deletes whole segments whose frames all have seq <= |upto| (never the
 * segment being appended to). Returns how many were deleted, or -errno. */
int wal_release_upto(wal *w, uint64_t upto);

uint64_t wal_last_seq(const wal *w);
const struct wal_stats *wal_stats(const wal *w);
void wal_close(wal *w);

#endif
