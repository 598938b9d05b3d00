/*
 * shard.h - a shard: one thread owning one WAL and one open block for one
 * signal. Rows never move between shards; a shard is the unit of ordering
 * and of replay.
 *
 * Producers (I/O threads) first reserve a queue slot (shard_reserve), so a
 * request is admitted or made to wait before its body is decoded, then hand
 * over a job (shard_submit_take). A drain takes the whole queue at once:
 * one WAL write(2) and one open-block append per job, one fdatasync per
 * drain under --ack fsync, then every job's done() — flush first, then
 * reply. A job handed to an idle shard with nothing queued is drained by
 * the submitting thread itself, within shard_submit_take (not under --ack
 * fsync); otherwise the shard thread drains it.
 */
#ifndef MIRADB_SHARD_H
#define MIRADB_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/wal.h"

typedef struct shard shard;
struct oblock;

struct shard_job {
    struct shard_job *next;
    const struct batch *batch; /* borrowed until done() */
    /* The WAL frame's payload: the request body as decoded, or (plain_len
     * != 0) as it arrived, coded |coding| (WAL_CODING_GZIP or _ZSTD) and
     * decoding to plain_len bytes (wal_append_coded). */
    const void *payload;
    size_t payload_len;
    size_t plain_len;
    uint8_t coding;
    enum otlp_fmt format;
    int result; /* set before done(): 0, or -errno from the WAL (rows not appended) */
    /* Runs once the job is durable per the ack mode, on the thread that
     * drained it: the submitter's (inside shard_submit_take), the shard
     * thread's, or under --ack seal the sealer's; must only hand the job
     * back (e.g. iot_post) — no blocking, no reply written from here. */
    void (*done)(struct shard_job *j);
};

/* Decodes one replayed WAL payload into |scratch| (reset by the caller),
 * allocating from |a| if needed (reset by the caller too).
 * 0, or negative to skip the frame (counted in replay_bad_frames). */
typedef int (*shard_decode_fn)(enum signal sig, enum otlp_fmt fmt, const uint8_t *payload, size_t n,
                               struct batch *scratch, arena *a);

enum shard_ack {
    SHARD_ACK_WAL = 0,   /* after the frame's write(2) */
    SHARD_ACK_FSYNC = 1, /* after one fdatasync per drain */
    SHARD_ACK_SEAL = 2,  /* no WAL: after the block holding the rows is sealed */
};

struct shard_cfg {
    const char *wal_dir;   /* this shard's WAL directory */
    const char *block_dir; /* DATA/<signal>: where its sealed blocks go */
    enum signal signal;
    int index;
    int queue_cap; /* reserved + queued jobs */
    enum shard_ack ack;
    size_t block_target;  /* seal once the open block holds this many bytes */
    int block_max_age_ms; /* ... or once its first row is this old */
    uint64_t wal_after;   /* highest WAL seq already in sealed blocks */
    uint64_t next_seal_id;
    shard_decode_fn decode;
    int delay_ms; /* tests only: sleep per drain (a slow disk) */
};

struct shard_stats {
    uint32_t queue_depth; /* reserved + queued */
    uint64_t seals_started;
    uint64_t sealed_seq; /* WAL watermark of the newest published block */
    struct wal_stats wal;
    uint64_t replay_bad_frames;
    /* Appends the open block refused (full, or no memory): the block was
     * sealed and the append retried once in a fresh one. */
    uint64_t append_failures;
    uint64_t block_rows;
    uint64_t block_bytes;
    bool replayed;
    uint64_t replay_frames; /* progress while replaying (frames, payload bytes) */
    uint64_t replay_bytes;
    int error; /* -errno when the WAL could not be opened; the shard then serves nothing */
};

/* Allocates the shard and starts its thread, which first replays the WAL
 * frames above cfg->wal_after into a fresh open block registered in the
 * catalog (shard_stats().replayed turns true), then serves the queue.
 * Full open blocks go to the sealer (sealer.h), which must be running.
 * 0 or -errno. */
int shard_start(const struct shard_cfg *c, shard **out);

/* Takes a queue slot if one is free; any thread. */
bool shard_reserve(shard *s);
void shard_unreserve(shard *s);
/* Hands |j| over on a slot taken by shard_reserve; any thread. May run
 * j->done() before it returns (an inline drain, see above). */
void shard_submit_take(shard *s, struct shard_job *j);

/* A consistent copy of the shard's counters; any thread. */
void shard_get_stats(shard *s, struct shard_stats *out);
/* Finishes every queued job, syncs and closes the WAL (under --ack seal:
 * seals what is open, so every pending ack is answered), joins the thread,
 * waits for the shard's seals in flight, frees the shard. A seal that keeps
 * failing is retried until sealer_give_up_at's deadline, so call that first
 * for a bounded stop. Call before sealer_stop(). NULL is fine. */
void shard_stop(shard *s);

#endif
