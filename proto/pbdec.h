/*
 * pbdec.h - OTLP protobuf (wire format) decoder into the row model.
 *
 * Decodes an Export{Logs,Trace,Metrics}ServiceRequest straight from the
 * wire bytes into a struct batch, without building a message tree: strings
 * point into |body| (zero-copy), values are encoded once into batch->heap.
 * protobuf-c (build/gen) is the reference it is tested against.
 */
#ifndef MIRADB_PBDEC_H
#define MIRADB_PBDEC_H

#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

/*
 * Appends the request's resources, scopes and rows to |out| (normally reset
 * just before). |body| must outlive |out|.
 * Returns 0; -EPROTO when the bytes are not a valid request of that signal
 * (truncated varint, bad length, wrong wire type, nesting deeper than
 * VAL_MAX_DEPTH, ...), with a one-line reason in |err|; -ENOMEM.
 * A body that would decode into more than 32 times its size plus 1 MiB of
 * rows is refused (-EPROTO): a request of tiny empty records must not make
 * the batch outgrow what admission charged for the body by much.
 */
int pbdec_decode(enum signal s, const uint8_t *body, size_t len, struct batch *out, char *err,
                 size_t errlen);

#endif
