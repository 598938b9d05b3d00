/*
 * tempo.h - the Tempo HTTP API on the HTTP listener (FACTS.md D): trace by
 * id (/api/traces/<id>, /api/v2/traces/<id>; OTLP JSON or protobuf),
 * TraceQL search (/api/search), tag names and values (v1 and v2), the
 * data source's health check (/api/echo), /api/status/buildinfo, and TraceQL
 * metrics (/api/metrics/query_range, /api/metrics/query; query/tqmx.h).
 *
 * Handlers run on the I/O thread and never block it: each query runs as a
 * job on the query pool (pool.h) and its answer comes back through
 * iot_post; a trace is rendered in pieces, one pool job per piece, each
 * started when the connection has taken most of the previous one.
 */
#ifndef MIRADB_TEMPO_H
#define MIRADB_TEMPO_H

struct config;

/* The version /api/status/buildinfo reports (Grafana gates features on it). */
#define TEMPO_COMPAT_VERSION "2.7.0"

/*
 * Adds the routes (before the I/O threads start) and starts the query pool
 * if nothing started it yet (--query-workers). Keeps |c|'s query limits.
 * 0, or -errno (-ENOSPC: route table full).
 */
int tempo_register(const struct config *c);

#endif
