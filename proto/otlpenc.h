/*
 * otlpenc.h - OTLP encoders of stored spans, for the Tempo endpoints:
 * protobuf (opentelemetry/proto/trace/v1/trace.proto field numbers, onto a
 * lib/pbw.h writer) and JSON as gogo jsonpb writes it (onto a lib/jsonw.h
 * writer: base64 ids, enum names, 64-bit ints as strings). The decoders of
 * the same messages are pbdec.c and jsondec.c.
 *
 * Inputs are views into blocks (storage/oblock.h), borrowed for the call.
 * Stored values are trusted to be well formed; a malformed nested value
 * ends its list early rather than failing the answer. Thread-safe (no
 * state of their own).
 */
#ifndef MIRADB_OTLPENC_H
#define MIRADB_OTLPENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/oblock.h"
#include "storage/val.h"

struct jsonw;
struct pbw;

/* ---- protobuf ---- */

void otlpenc_pb_resource(struct pbw *s, const struct res_view *r); /* Resource fields */
void otlpenc_pb_scope(struct pbw *s, const struct scope_view *sc); /* InstrumentationScope fields */
void otlpenc_pb_span(struct pbw *s, const struct span_view *v);    /* Span fields */
/* Size of the message otlpenc_pb_span writes. */
size_t otlpenc_pb_span_size(const struct span_view *v);

/* ---- JSON ---- */

/* {"attributes":[...],"droppedAttributesCount":N} members of an object. */
void otlpenc_json_attrs(struct jsonw *w, const struct oattrs *a);
void otlpenc_json_resource(struct jsonw *w, const struct res_view *r); /* an object */
void otlpenc_json_scope(struct jsonw *w, const struct scope_view *sc); /* an object */
void otlpenc_json_span(struct jsonw *w, const struct span_view *v);    /* an object */
/* An AnyValue object for one decoded value. */
void otlpenc_json_value(struct jsonw *w, const struct val *v);

/* ---- span events and links ---- */

/* Walk a span's events / links blob (batch.h encodings): 0, or -1 at the
 * end or on a malformed entry. Pointers point into the blob. */
int otlpenc_event_next(struct val_rd *r, uint64_t *time_ns, const char **name, size_t *name_len,
                       struct oattrs *attrs);
int otlpenc_link_next(struct val_rd *r, const uint8_t **trace_id, const uint8_t **span_id,
                      struct oattrs *attrs);

#endif
