/*
 * prom.h - the Prometheus HTTP API on the HTTP listener (PROMQL.md section
 * A): /api/v1/query, /query_range, /series, /labels, /label/<name>/values,
 * /metadata, /query_exemplars, /status/buildinfo and /rules, GET and form
 * POST, answered as Prometheus 2.42 answers them.
 *
 * Handlers read and check the parameters on the I/O thread (parse errors
 * and bad parameters are answered there); every query runs as a qhttp job
 * on the query pool: a qctx snapshot of the metrics signal, a pmsrc over
 * it, pm_eval for PromQL, the JSON from prom_render.
 */
#ifndef MIRADB_PROM_H
#define MIRADB_PROM_H

struct config;
struct evbuffer;

/* The version /api/v1/status/buildinfo reports: Grafana enables the
 * features of the Prometheus version it reads there. */
#define PROM_COMPAT_VERSION "2.42.0"

/* Adds the routes (before the I/O threads start) and starts the query pool
 * if nothing started it yet. 0, or -errno (-ENOSPC: route table full). */
int prom_register(const struct config *c);

/* Appends the PromQL section of /metrics (series and samples selected,
 * points scanned, OTLP points pmsrc could not map). Any thread. */
void prom_metrics_text(struct evbuffer *o);

#endif
