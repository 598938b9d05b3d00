/*
 * traces_int.h - what the two files of the traces module share: the OTLP
 * encoders of stored spans (traces_otlp.c) used by traces.c. Nothing
 * outside query/traces*.c includes this file.
 */
#ifndef MIRADB_TRACES_INT_H
#define MIRADB_TRACES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/oblock.h"
#include "storage/val.h"

struct evbuffer;
struct jsonw;

/* ---- protobuf sink: writes to |out|, or only counts when out is NULL ---- */

struct pbs {
    struct evbuffer *out;
    size_t n; /* bytes produced so far (written or counted) */
    size_t blen;
    uint8_t buf[2048]; /* staged before evbuffer_add */
};

void pbs_init(struct pbs *s, struct evbuffer *out);
/* Moves the staged bytes to |out|. */
void pbs_flush(struct pbs *s);
void pbs_raw(struct pbs *s, const void *p, size_t n);
void pbs_varint(struct pbs *s, uint64_t v);
void pbs_tag(struct pbs *s, uint32_t field, uint32_t wire);
void pbs_bytes(struct pbs *s, uint32_t field, const void *p, size_t n);
/* Length-delimited field of |len| bytes: tag and length only. */
void pbs_len(struct pbs *s, uint32_t field, size_t len);
size_t pbs_varint_size(uint64_t v);

/* OTLP messages. */
void totlp_pb_resource(struct pbs *s, const struct res_view *r); /* Resource fields */
void totlp_pb_scope(struct pbs *s, const struct scope_view *sc); /* InstrumentationScope fields */
void totlp_pb_span(struct pbs *s, const struct span_view *v);    /* Span fields */
/* Size of the message a function above writes. */
size_t totlp_pb_span_size(const struct span_view *v);

/* ---- JSON (gogo jsonpb: base64 ids, enum names, 64-bit ints as strings) ---- */

/* {"attributes":[...],"droppedAttributesCount":N} members of an object. */
void totlp_json_attrs(struct jsonw *w, const struct oattrs *a);
void totlp_json_resource(struct jsonw *w, const struct res_view *r); /* an object */
void totlp_json_scope(struct jsonw *w, const struct scope_view *sc); /* an object */
void totlp_json_span(struct jsonw *w, const struct span_view *v);    /* an object */
/* An AnyValue object for one decoded value. */
void totlp_json_value(struct jsonw *w, const struct val *v);
/* Standard base64 with padding of |n| bytes into |out| (4 * ceil(n/3) + 1). */
size_t totlp_base64(const uint8_t *p, size_t n, char *out);
/* Lower-case hex, 2n chars + NUL. */
void totlp_hex(const uint8_t *p, size_t n, char *out);

/* Walk a span's events / links blob (batch.h encodings): 0, or -1 at the
 * end or on a malformed entry. Pointers point into the blob. */
int totlp_event_next(struct val_rd *r, uint64_t *time_ns, const char **name, size_t *name_len,
                     struct oattrs *attrs);
int totlp_link_next(struct val_rd *r, const uint8_t **trace_id, const uint8_t **span_id,
                    struct oattrs *attrs);

#endif
