/*
 * listen.h - the two OTLP listeners, as main wires them to I/O threads.
 *
 * Each I/O thread gets its own SO_REUSEPORT listening socket per protocol
 * (main binds them); a listener module accepts on it with an
 * evconnlistener on that thread's base and keeps its per-thread state in
 * an array indexed by iot->idx. All functions run on |t|'s thread except
 * *_attach, which runs before the loops start.
 */
#ifndef MIRADB_LISTEN_H
#define MIRADB_LISTEN_H

struct iot;

#define LISTEN_MAX_IOT 64

/* OTLP/HTTP (HTTP/1.1) + /health, /ready, /metrics. Takes |fd|. 0 or -errno. */
int http1_attach(struct iot *t, int fd);
/* Stops accepting; idle keep-alive connections are closed, busy ones after
 * their current response. */
void http1_quiesce(struct iot *t);
/* Connections still open on |t|. */
int http1_active(struct iot *t);

/* OTLP/gRPC (HTTP/2 cleartext, prior knowledge). Same contract. */
int grpc_attach(struct iot *t, int fd);
/* Sends GOAWAY, stops accepting; connections close once their streams end. */
void grpc_quiesce(struct iot *t);
int grpc_active(struct iot *t);

#endif
