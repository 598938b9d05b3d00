/*
 * stats.h - the ingest path's counters. Each I/O thread owns one io_stats
 * and is its only writer (plain increments, no atomics on the hot path);
 * /metrics sums them with relaxed loads, which may read a counter one
 * update behind.
 */
#ifndef MIRADB_STATS_H
#define MIRADB_STATS_H

#include <stdint.h>

#include "lib/lathist.h"

enum transport {
    TR_HTTP = 0, /* OTLP/HTTP, protobuf */
    TR_HTTP_JSON = 1,
    TR_GRPC = 2,
};
#define TR_COUNT 3

enum reject_reason {
    RJ_MALFORMED = 0,     /* 400 / INVALID_ARGUMENT */
    RJ_TOO_LARGE = 1,     /* 413 / RESOURCE_EXHAUSTED */
    RJ_UNSUPPORTED = 2,   /* 415, unsupported encoding */
    RJ_NOT_FOUND = 3,     /* 404 / UNIMPLEMENTED */
    RJ_BAD_METHOD = 4,    /* 405 */
    RJ_OVERLOADED = 5,    /* 503 / UNAVAILABLE after the admission wait */
    RJ_INTERNAL = 6,      /* 500 / INTERNAL, out of memory; never a storage error */
    RJ_SHUTTING_DOWN = 7, /* refused while stopping */
    RJ_STORAGE = 8,       /* 503 / UNAVAILABLE: WAL write or seal failed (disk full, EIO...) */
    RJ_TIMEOUT = 9,       /* 408 / DEADLINE_EXCEEDED: the body did not arrive in time */
};
#define RJ_COUNT 10

/* Where an acknowledged export's time went (ingest.c), from its headers
 * to its answer being queued for the client. */
enum ack_phase {
    PH_ADMIT = 0,  /* waiting for a queue slot and memory */
    PH_BODY = 1,   /* admitted until the whole body was read */
    PH_DECODE = 2, /* gunzip and decode */
    PH_SHARD = 3,  /* handed to the shard until it acked: its queue, WAL write, append */
    PH_REPLY = 4,  /* back to the I/O thread */
    PH_TOTAL = 5,
};
#define PH_COUNT 6

struct io_stats {
    /* [signal - 1][transport] */
    uint64_t requests[3][TR_COUNT]; /* exports acknowledged */
    uint64_t records[3][TR_COUNT];  /* records acknowledged */
    uint64_t bytes[3][TR_COUNT];    /* request bytes as received (before gunzip) */
    uint64_t rejected_records[3];   /* partial-success rejections */
    uint64_t rejections[RJ_COUNT];  /* failed requests by reason */
    uint64_t admit_waits;           /* requests that had to wait */
    uint64_t admit_wait_ns;         /* total time waited */
    uint64_t shed;                  /* requests refused when the wait ran out */
    uint64_t paced;                 /* requests delayed while the sealer lagged (adm_pace_ns) */
    uint64_t paced_ns;              /* total delay they were given */
    uint64_t connections_accepted;
    struct lathist phase[PH_COUNT]; /* acknowledged exports only */
    uint64_t cache_bytes[2]; /* kept for reuse (charged): [0] body buffers, [1] batches, arenas */
};

const char *stats_transport_name(enum transport t);
const char *stats_reject_reason_name(enum reject_reason r);

#endif
