/*
 * loki.h - the Loki HTTP API (FACTS.md A) and the native /api/v1/logs
 * endpoint on the HTTP/1.1 listener, answered by the LogQL executor
 * (query/logs.h) on the query worker pool (query/pool.h).
 */
#ifndef MIRADB_LOKI_H
#define MIRADB_LOKI_H

struct config;

/* Starts the query pool (if not yet started) and registers the routes.
 * Call from main before the I/O threads start. 0 or -errno. */
int loki_register(const struct config *c);

#endif
