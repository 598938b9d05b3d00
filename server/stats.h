/*
 * stats.h - the ingest path's counters. Each I/O thread owns one io_stats
 * and is its only writer (plain increments, no atomics on the hot path);
 * /metrics sums them with relaxed loads, which may read a counter one
 * update behind.
 */
#ifndef MIRADB_STATS_H
#define MIRADB_STATS_H

#include <stdint.h>

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
    uint64_t connections_accepted;
};

const char *stats_transport_name(enum transport t);
const char *stats_reject_reason_name(enum reject_reason r);

#endif
