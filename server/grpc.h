/*
 * grpc.h - the OTLP/gRPC listener: HTTP/2 with prior knowledge, cleartext
 * or over TLS (tls.h), one nghttp2 session per connection (grpc.c says how
 * it reads, admits and answers).
 *
 * Each I/O thread gets its own SO_REUSEPORT listening socket (main binds
 * them); the listener accepts on it with an evconnlistener on that
 * thread's base and keeps its per-thread state in an array indexed by
 * iot->idx. grpc_attach runs before the loops start; the others on |t|'s
 * thread.
 */
#ifndef MIRADB_GRPC_H
#define MIRADB_GRPC_H

struct iot;
struct evbuffer;

/* Listens on |fd| (taken) on |t|'s loop. 0 or -errno. */
int grpc_attach(struct iot *t, int fd);
/* Sends GOAWAY and stops accepting; connections close once their streams
 * end. */
void grpc_quiesce(struct iot *t);
/* Connections still open on |t|. */
int grpc_active(struct iot *t);
/* Appends the gRPC listener's metrics (Prometheus text) to |o|. Any thread. */
void grpc_metrics_text(struct evbuffer *o);

#endif
