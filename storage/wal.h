/*
 * wal.h - per-shard write-ahead log (frames in numbered segment files).
 *
 * One wal per shard, used by one thread at a time: the one holding the
 * shard's drain (shard.c; wal_open may run on any thread before the shard
 * starts). The frame format is specified in
 * wal.c. An append is one write(2); durability beyond the page cache is
 * wal_sync() (fdatasync), which the shard calls once per drain under
 * --ack fsync.
 */
#ifndef MIRADB_WAL_H
#define MIRADB_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/lathist.h"
#include "storage/batch.h"

typedef struct wal wal;

struct wal_stats {
    uint64_t frames_appended;
    uint64_t bytes_appended; /* frame bytes, headers included */
    uint64_t fsyncs;
    uint64_t frames_replayed;
    uint64_t bytes_replayed;
    uint64_t frames_skipped;     /* intact frames at or below |after| */
    uint64_t frames_undecodable; /* intact compressed frames that did not decode
                                  * to their length: not handed to replay */
    uint64_t torn_frames;        /* torn or corrupt tails truncated at open (0 or 1 per open) */
    uint64_t torn_bytes;         /* bytes cut off by those truncations */
    uint64_t segments;           /* segment files now open or on disk, the spare included */
    uint64_t disk_bytes;         /* their bytes (whole files: a recycled segment's old bytes
                                  * past its last frame, the spare): what the WAL takes on
                                  * disk now */
};

/* A frame's payload format is byte 17 (enum otlp_fmt, batch.h); byte 16
 * is the signal; byte 18 the payload's coding (0, or WAL_CODING_GZIP /
 * WAL_CODING_ZSTD: the body as it arrived, decoded by replay); byte 19 is
 * zero. A frame with an unknown signal, format or coding is corrupt. */
#define WAL_CODING_GZIP 1
#define WAL_CODING_ZSTD 2

/* Called for each intact frame above |after|, in seq order. A negative
 * return stops the replay and wal_open returns it. */
typedef int (*wal_replay_fn)(void *ctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt,
                             const uint8_t *payload, size_t n);

/*
 * Opens the WAL in |dir| (created if missing), replaying it through |fn|
 * (may be NULL). Intact frames at or below |after| are checked but not
 * handed to |fn| (frames_skipped). A frame that runs past the end of its
 * segment, fails its CRC, has a zero or oversized length, a seq not above
 * the previous one (or, first in a segment, other than the segment's name),
 * an unknown signal, format or coding or non-zero padding ends the log: the segment
 * is truncated before it, any later segments are removed, and the event is
 * counted in torn_frames/torn_bytes — never an error. Empty segments are
 * removed. New frames continue after the highest seq seen (or |after|, if
 * higher). The payload pointer handed to |fn| is valid only during the call.
 * Returns 0 and sets |*out|; -errno for I/O errors (-ENOMEM when a frame
 * cannot be buffered); whatever negative |fn| returned (then nothing is
 * returned in |*out|).
 */
int wal_open(const char *dir, uint64_t after, wal_replay_fn fn, void *ctx, wal **out);

/*
 * Appends one frame holding |payload| with one write(2) (a short write is
 * continued). Returns its seq (>= 1, strictly increasing), or -errno: a
 * failed write is cut back off the file (ftruncate to the frame's start),
 * so the log stays well-formed, and the seq is not used up. -E2BIG if |n|
 * exceeds WAL_FRAME_MAX; -EINVAL if |n| is 0 (a zero length marks the end
 * of the log, so an empty body must not be logged) or |sig|/|fmt| is not
 * one of the enums. No fsync (see wal_sync). A new segment is started
 * first when the current one holds wal_segment_bytes or more: the spare
 * (see wal_release_upto) renamed and overwritten in place, or else a new
 * file (its directory entry is fsynced by a background thread, and by the
 * next wal_sync before it returns). A recycled segment is truncated to its
 * last frame before that rotation away from it.
 */
int64_t wal_append(wal *w, enum signal sig, enum otlp_fmt fmt, const void *payload, size_t n);
/*
 * wal_append of a body that arrived compressed, logged as it arrived: |p|
 * (n bytes: gzip members, or zstd frames, as |coding| says) decodes to
 * |plain| bytes, which is what replay hands to its callback. The caller
 * decoded it already (the decode needs it), and chooses this only when n is
 * well below |plain|. -E2BIG if |plain| or n + 4 exceeds WAL_FRAME_MAX;
 * -EINVAL for another coding or a |plain| of 0; otherwise as wal_append.
 */
int64_t wal_append_coded(wal *w, enum signal sig, enum otlp_fmt fmt, int coding, const void *p,
                         size_t n, size_t plain);
#define WAL_FRAME_MAX (256u << 20)

/* Segment size: a segment is closed once it holds at least this much. */
#define WAL_SEGMENT_BYTES (64u << 20)
/* The threshold wal_open copies into each new wal: WAL_SEGMENT_BYTES unless
 * the daemon (--wal-segment) or a test sets it before wal_open (not
 * thread-safe: set it before any WAL is opened). */
extern size_t wal_segment_bytes;

/* Older segments rotated away unsynced that a wal waits to fdatasync (at
 * wal_sync, or never if a release deletes them first); past this many the
 * oldest is synced at the rotation. */
#define WAL_UNSYNCED_MAX 8

/* fdatasync of the current segment (and of the older ones rotated away
 * with unsynced frames or truncated at the rotation), and an fsync of the directory if
 * a segment was created since, so every frame appended so far is durable. No-op when nothing was
 * written since the last sync. 0 or -errno. */
int wal_sync(wal *w);

/* Releases whole segments whose frames all have seq <= |upto|, oldest
 * first (never the newest segment, the one appended to): they leave the
 * WAL's segments at once. The first, if no spare is held, is renamed to
 * the spare ("spare-segment" in |dir|, not a segment name) for the next
 * rotation to recycle; the others are unlinked, then the directory fsynced,
 * by a background thread (wal_settle waits for it); a deletion or rename
 * that fails or that a crash undoes is redone after the next boot's replay.
 * Returns how many were released. */
int wal_release_upto(wal *w, uint64_t upto);
/* Waits until the background thread has done every unlink and directory
 * fsync handed to it so far (tests; any thread). */
void wal_settle(void);

/* The highest seq appended or replayed (or |after| of wal_open, if higher);
 * the next append gets this + 1. */
uint64_t wal_last_seq(const wal *w);
/* Borrowed; valid until wal_close. */
const struct wal_stats *wal_stats(const wal *w);
/* Adds to |out| how long wal_append took, every WAL of the process
 * (the write, and a segment rotation when one was due). Any thread. */
void wal_append_hist(struct lathist *out);
/* Closes the files without syncing them (call wal_sync first if the frames
 * must be durable), after wal_settle; a recycled newest segment is first
 * truncated to its last frame. Accepts NULL. */
void wal_close(wal *w);

#endif
