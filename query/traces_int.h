/*
 * traces_int.h - forwarding header, kept so query/traces.c builds unchanged
 * while it waits for its split (issue 10): the OTLP span encoders moved to
 * proto/otlpenc.h, the protobuf writer to lib/pbw.h, hex and base64 to
 * lib/. The old names below map onto the new ones; this file goes when
 * traces.c calls them by their names. Nothing outside query/traces*.c
 * includes it.
 */
#ifndef MIRADB_TRACES_INT_H
#define MIRADB_TRACES_INT_H

#include "lib/hex.h"
#include "lib/pbw.h"
#include "proto/otlpenc.h"

#define pbs pbw
#define pbs_init pbw_init
#define pbs_flush pbw_flush
#define pbs_raw pbw_raw
#define pbs_varint pbw_varint
#define pbs_tag pbw_tag
#define pbs_bytes pbw_bytes
#define pbs_len pbw_len
#define pbs_varint_size pbw_varint_size

#define totlp_pb_resource otlpenc_pb_resource
#define totlp_pb_scope otlpenc_pb_scope
#define totlp_pb_span otlpenc_pb_span
#define totlp_pb_span_size otlpenc_pb_span_size
#define totlp_json_attrs otlpenc_json_attrs
#define totlp_json_resource otlpenc_json_resource
#define totlp_json_scope otlpenc_json_scope
#define totlp_json_span otlpenc_json_span
#define totlp_json_value otlpenc_json_value
#define totlp_event_next otlpenc_event_next
#define totlp_link_next otlpenc_link_next

/* Lower-case hex, 2n chars + NUL. */
static inline void totlp_hex(const uint8_t *p, size_t n, char *out)
{
    hex_encode(out, p, n);
}

#endif
