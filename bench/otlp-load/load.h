/*
 * load.h - what otlp-load's driver (main.c) and its two transports
 * (http1.c: OTLP/HTTP over HTTP/1.1 keep-alive; h2.c: OTLP/gRPC over h2c)
 * share. Internal to bench/otlp-load.
 *
 * One thread, one event_base. The driver owns the request schedule and the
 * counters; a transport owns its connections' sockets and protocol state,
 * takes requests with load_take() whenever a connection has a free slot, and
 * reports each outcome with load_done(). Every request a transport took is
 * reported exactly once: acknowledged, failed by status, or failed with the
 * connection (io, timeout).
 */
#ifndef MIRADB_BENCH_LOAD_H
#define MIRADB_BENCH_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct bufferevent;
struct event_base;
struct load;

enum load_proto {
    LP_GRPC = 0,
    LP_HTTP_PROTOBUF = 1,
    LP_HTTP_JSON = 2,
};

/* One pre-encoded request. For gRPC the body is the length-prefixed message
 * (5-byte header included). Immutable once encoded. Pool entries live for
 * the whole run (|refs| 0); a --unique request is made for one send and
 * freed when its last holder (the request, queued output) lets go. */
struct pool_entry {
    uint8_t *body;
    size_t len;
    uint32_t records;
    uint32_t refs;
};

/* Drops one hold on a --unique entry (frees it at zero); no-op for pool
 * entries. */
void load_entry_release(struct pool_entry *e);
void load_entry_hold(const struct pool_entry *e);

/* A request handed to a transport. */
struct load_req {
    uint64_t seq;
    const struct pool_entry *e;
    uint64_t t_due;  /* the schedule's send time (open loop) or the take time */
    uint64_t t_sent; /* when it was handed to the socket */
};

/* What a transport needs to know; owned by the driver. */
struct load_target {
    enum load_proto proto;
    int signal; /* enum signal */
    bool gzip;
    bool any_2xx;   /* HTTP: a 2xx other than 200 acknowledges too (no body read) */
    uint32_t slots; /* requests in flight per connection */
    char host[256]; /* Host / :authority */
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

/* A connection, as the driver sees it; transports embed it first. */
struct load_conn {
    struct load *run;
    uint32_t id;
    uint32_t inflight;
    bool ready; /* connected and able to take requests */
};

enum load_outcome {
    LO_ACK = 0,    /* success status; |code| unused */
    LO_HTTP = 1,   /* HTTP status |code| other than 200 */
    LO_GRPC = 2,   /* grpc-status |code| other than 0 */
    LO_RST = 3,    /* HTTP/2 stream reset with error code |code|, no grpc-status */
    LO_IO = 4,     /* the connection failed or closed with the request in flight */
    LO_TIMEOUT = 5 /* no answer within --timeout */
};

uint64_t load_now_ns(void);

/* Returns the next request for |c| if the budget and the schedule allow one
 * now; sets t_due. The caller sets t_sent and owns it until load_done(). */
bool load_take(struct load *l, struct load_conn *c, struct load_req *out);

/* Reports the outcome of a request taken by |c|; |rejected| is the
 * partial-success rejected count of an acknowledged request. */
void load_done(struct load *l, struct load_conn *c, const struct load_req *q, enum load_outcome o,
               int code, uint64_t rejected);

/* A connection became ready (again): the driver hands it requests. */
void load_conn_ready(struct load *l, struct load_conn *c);

/* A connection went down; the transport has already reported its in-flight
 * requests. The driver reconnects it (after a back-off when |failed_connect|). */
void load_conn_down(struct load *l, struct load_conn *c, bool failed_connect);

/* Transports: one instance per connection. */
struct load_transport {
    /* Allocate connection |id| (not yet connected); NULL on out of memory. */
    struct load_conn *(*conn_new)(struct load *l, struct event_base *base,
                                  const struct load_target *t, uint32_t id);
    /* Start connecting; completion is reported with load_conn_ready/down. */
    int (*conn_start)(struct load_conn *c);
    /* Send requests while load_take() gives them and slots are free. */
    void (*conn_pump)(struct load_conn *c);
    /* Fail every request in flight with |o| and drop the socket. */
    void (*conn_abort)(struct load_conn *c, enum load_outcome o);
    /* Oldest t_sent in flight, 0 when nothing is. */
    uint64_t (*conn_oldest)(struct load_conn *c);
    void (*conn_free)(struct load_conn *c);
};

extern const struct load_transport load_http1;
extern const struct load_transport load_h2;

/* A piece of output: |stable| bytes outlive the send and are queued by
 * reference; others are copied if they must be queued. A non-NULL |owner|
 * (the request body's entry) carries one hold taken by the caller with
 * load_entry_hold(); load_send() drops it once the bytes are written, or
 * passes it to the queued reference. */
struct load_piece {
    const uint8_t *p;
    size_t len;
    bool stable;
    const struct pool_entry *owner;
};
#define LOAD_MAX_PIECES 64

/* Writes |n| <= LOAD_MAX_PIECES pieces in order on |bev|'s socket: directly
 * when its output is empty, queuing the rest (wire.c). 0 or -ENOMEM. */
int load_send(struct bufferevent *bev, const struct load_piece *pc, int n);

/* Partial-success rejected count from an Export*ServiceResponse (protobuf
 * or JSON); 0 when absent or unreadable. */
uint64_t load_rejected_pb(const uint8_t *p, size_t n);
uint64_t load_rejected_json(const char *p, size_t n);

#endif
