/*
 * otlpnames.h - the OTLP enum values OTLP/JSON spells by name (Span.kind,
 * Status.code), indexed by their protobuf numbers: one table for the JSON
 * decoder (proto/jsondec_traces.c) and the encoder (proto/otlpenc.c).
 */
#ifndef MIRADB_PROTO_OTLPNAMES_H
#define MIRADB_PROTO_OTLPNAMES_H

#define OTLP_SPAN_KINDS 6
#define OTLP_STATUS_CODES 3

extern const char *const otlp_span_kind_names[OTLP_SPAN_KINDS];
extern const char *const otlp_status_names[OTLP_STATUS_CODES];

#endif
