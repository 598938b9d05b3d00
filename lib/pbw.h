/*
 * pbw.h - protobuf wire-format writer: varints, tags, fixed and
 * length-delimited fields, hand-encoded so an answer streams out without
 * building protobuf-c messages (the OTLP encoders of proto/otlpenc.c, the
 * response bodies of proto/resp.c).
 *
 * One writer, three sinks:
 *   pbw_init(w, evb)            staged in the writer, moved to |evb| by
 *                               pbw_flush (call it before reading evb)
 *   pbw_init(w, NULL)           counts only: w->n is the size a message
 *                               would have (a length prefix before writing)
 *   pbw_init_buf(w, out, cap)   into a fixed buffer; past |cap| it only
 *                               counts, so w->n > cap means it did not fit
 * Whatever the sink, w->n is the bytes produced so far. Memory errors of
 * the evbuffer are not reported (as evbuffer_add's callers here never
 * did): the answer comes out short. Not thread-safe: one writer per thread.
 */
#ifndef MIRADB_LIB_PBW_H
#define MIRADB_LIB_PBW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct evbuffer;

enum { PBW_VARINT = 0, PBW_I64 = 1, PBW_LEN = 2, PBW_I32 = 5 };

struct pbw {
    struct evbuffer *evb; /* borrowed; NULL: not an evbuffer sink */
    uint8_t *out;         /* where the next bytes go: stage or the caller's buffer; NULL counts */
    size_t cap;           /* of |out| */
    size_t blen;          /* bytes in |out| */
    size_t n;             /* bytes produced so far (written or counted) */
    uint8_t stage[2048];  /* evbuffer sink: staged before evbuffer_add */
};

void pbw_init(struct pbw *w, struct evbuffer *evb);
void pbw_init_buf(struct pbw *w, uint8_t *out, size_t cap);
/* Moves the staged bytes to the evbuffer (no-op for the other sinks). */
void pbw_flush(struct pbw *w);
/* The rare cases of pbw_raw: a large piece, a full stage, a full buffer. */
void pbw_raw_slow(struct pbw *w, const void *p, size_t n);

static inline bool pbw_counting(const struct pbw *w)
{
    return w->out == NULL;
}

static inline void pbw_raw(struct pbw *w, const void *p, size_t n)
{
    if (w->out == NULL) {
        w->n += n;
        return;
    }
    if (n <= sizeof(w->stage) / 2 && w->cap - w->blen >= n) {
        memcpy(w->out + w->blen, p, n);
        w->blen += n;
        w->n += n;
        return;
    }
    pbw_raw_slow(w, p, n);
}

static inline size_t pbw_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline void pbw_varint(struct pbw *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    pbw_raw(w, b, n);
}

static inline void pbw_tag(struct pbw *w, uint32_t field, uint32_t wire)
{
    pbw_varint(w, ((uint64_t)field << 3) | wire);
}

/* Length-delimited field of |len| bytes: tag and length only. */
static inline void pbw_len(struct pbw *w, uint32_t field, size_t len)
{
    pbw_tag(w, field, PBW_LEN);
    pbw_varint(w, len);
}

static inline void pbw_bytes(struct pbw *w, uint32_t field, const void *p, size_t n)
{
    pbw_len(w, field, n);
    pbw_raw(w, p, n);
}

void pbw_fixed64(struct pbw *w, uint32_t field, uint64_t v);
void pbw_fixed32(struct pbw *w, uint32_t field, uint32_t v);

/* A varint field, omitted when zero (proto3). Negative int32 enums are
 * passed sign-extended to 64 bits, as protobuf encodes them. */
static inline void pbw_uint_field(struct pbw *w, uint32_t field, uint64_t v)
{
    if (v != 0) {
        pbw_tag(w, field, PBW_VARINT);
        pbw_varint(w, v);
    }
}

/* A string or bytes field, omitted when empty (proto3). */
static inline void pbw_str_field(struct pbw *w, uint32_t field, const void *p, size_t n)
{
    if (n > 0) {
        pbw_bytes(w, field, p, n);
    }
}

/* A nested message written by |fn|: counted first (its length prefixes
 * it), then written; a counting writer only counts. */
typedef void (*pbw_msg_fn)(struct pbw *w, const void *arg);
void pbw_sub(struct pbw *w, uint32_t field, pbw_msg_fn fn, const void *arg);

#endif
