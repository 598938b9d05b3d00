/*
 * ops.h - the operator endpoints' content: /health, /ready, /metrics
 * (Prometheus text exposition format 0.0.4). Any I/O thread may call these.
 */
#ifndef MIRADB_OPS_H
#define MIRADB_OPS_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;

#include <stdint.h>

/* /ready: true once WAL replay is done, the daemon is not stopping and the
 * data directory has --min-free-bytes free. */
bool ops_ready(void);
/* Why /ready is 503 (a sentence in |buf|), or NULL when it is 200. */
const char *ops_not_ready_reason(char *buf, size_t cap);
/* The store's disk_changed hook (diskfree.h): logs low / recovered. */
void ops_disk_changed(bool low, uint64_t free_bytes, uint64_t min_free);
/* The main loop gave freed heap back (malloc_trim) in |ns|: counted for
 * /metrics. Any thread. */
void ops_note_trim(uint64_t ns);
/* Appends the whole /metrics page to |out|. */
void ops_metrics_text(struct evbuffer *out);

#endif
