/*
 * ops.h - the operator endpoints' content: /health, /ready, /metrics
 * (Prometheus text exposition format 0.0.4). Any I/O thread may call these.
 */
#ifndef MIRADB_OPS_H
#define MIRADB_OPS_H

#include <stdbool.h>

struct evbuffer;

/* /ready: true once WAL replay is done and the daemon is not stopping. */
bool ops_ready(void);
/* Appends the whole /metrics page to |out|. */
void ops_metrics_text(struct evbuffer *out);

#endif
