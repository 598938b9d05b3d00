/*
 * iot.h - I/O threads: each runs its own libevent event_base and owns the
 * connections accepted on its listening sockets. The only disk work one
 * does is an idle shard's drain under --ack wal or seal (shard.h): the WAL
 * frame's write(2) into the page cache, never an fsync or a read.
 * Other threads reach an I/O thread only through iot_post(). The bases
 * keep precise time (EVENT_BASE_FLAG_PRECISE_TIMER): a timer fires when
 * due, not at the next kernel tick.
 */
#ifndef MIRADB_IOT_H
#define MIRADB_IOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/stats.h"

struct event_base;

/* The most I/O threads (--io-threads); modules size their per-thread state
 * arrays by it and index them with iot->idx. */
#define IOT_MAX 64

struct iot_msg {
    struct iot_msg *next;
    void (*fn)(struct iot_msg *m); /* runs on the I/O thread */
};

struct iot {
    int idx;
    struct event_base *base;
    struct io_stats stats; /* written only by this thread; summed on read */
    struct iot_internal *in;
};

/* Creates |n| threads' bases (not yet running). 0 or -errno. */
int iot_init(int n);
int iot_count(void);
struct iot *iot_get(int i);
/* The I/O thread the caller runs on, or NULL. */
struct iot *iot_self(void);
/* Starts the loops. */
int iot_start(void);
/* Queues |m| to run on |t|'s thread; callable from any thread. */
void iot_post(struct iot *t, struct iot_msg *m);
/* Begins shutdown: on every thread runs |quiesce| (stop accepting, close
 * idle connections), then polls |active| until it reports 0 connections or
 * |grace_ms| pass, and ends the loop. Joins the threads. */
void iot_stop_and_join(void (*quiesce)(struct iot *t), int (*active)(struct iot *t), int grace_ms);
/* True once shutdown has begun: listeners stop accepting. */
bool iot_stopping(void);
/* After the loops ended and the shards stopped: runs the messages still
 * queued (late completions) on the calling thread, so nothing leaks. */
void iot_run_pending(void);
void iot_fini(void);
/* The peer address of connected socket |fd| as "ADDR:PORT" ("?" when
 * unknown), for the log lines of clients cut off by a limit. */
void iot_peer_name(int fd, char *buf, size_t cap);

#endif
