/*
 * promcheck.h - metric points PromQL will never see, counted and logged at
 * ingest. MiraDB stores every OTLP point it acknowledges; the Prometheus
 * view (query/pmsrc.h) leaves out those Prometheus's own OTLP receiver
 * refuses: sums and histograms with an UNSPECIFIED (or unknown)
 * aggregation temporality, and metrics whose name sanitises to nothing
 * (storage/promname.h). Each export's metrics are checked once (per
 * metric, not per point: one pass over the metric dictionary and one
 * compare per point), counted by reason on /metrics and logged once per
 * metric name (the first 4,096 names; later ones are counted only).
 *
 * Threads: promcheck_batch from any I/O thread; promcheck_count any thread.
 */
#ifndef MIRADB_PROMCHECK_H
#define MIRADB_PROMCHECK_H

#include <stdint.h>

#include "storage/batch.h"

enum promcheck_reason {
    PROMCHECK_TEMPORALITY = 0, /* "invalid_temporality" */
    PROMCHECK_NAME = 1,        /* "invalid_name" */
    PROMCHECK_COUNT_
};

const char *promcheck_reason_name(enum promcheck_reason r);

/* Checks a decoded SIG_METRICS batch (anything else is ignored). */
void promcheck_batch(const struct batch *b);

/* After a PromQL read (query/pmsrc.h): when the source met metrics or
 * series it could not map since the last call (attribute keys Prometheus
 * refuses, an exponential histogram scale below -4, what ingest counts),
 * logs the last one's name, once per name. Any thread. */
void promcheck_reads(void);

/* Points counted for |r| since start. */
uint64_t promcheck_count(enum promcheck_reason r);

#endif
