/*
 * val.h - the storage encoding of OTLP values: AnyValue, attribute lists,
 * and the nested lists a row carries (span events and links, histogram
 * buckets, exemplars).
 *
 * ENCODING (integers little-endian; "uv" = unsigned LEB128 varint)
 *   value  := u8 type, then by type:
 *     VAL_EMPTY   nothing
 *     VAL_STR     uv len, len bytes (UTF-8 as received; not validated)
 *     VAL_BYTES   uv len, len bytes
 *     VAL_BOOL    u8 0|1
 *     VAL_INT     uv zigzag(int64)
 *     VAL_DOUBLE  8 bytes IEEE-754
 *     VAL_ARRAY   u32 nbytes, u32 count, count values       (nbytes = what follows
 *     VAL_KVLIST  u32 nbytes, u32 count, count kv            the two u32s)
 *   kv     := uv keylen, key bytes, value
 *   attrs  := count kv back to back; the count is kept beside the blob
 *
 * Nested containers carry a fixed-width byte length so a reader can skip one
 * without walking it and a writer can patch it after writing the content.
 * Blobs live in a vbuf (below) and are named by offset, because a vbuf grows
 * by realloc and its base pointer moves until the batch is complete.
 */
#ifndef MIRADB_VAL_H
#define MIRADB_VAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum val_type {
    VAL_EMPTY = 0,
    VAL_STR = 1,
    VAL_BOOL = 2,
    VAL_INT = 3,
    VAL_DOUBLE = 4,
    VAL_ARRAY = 5,
    VAL_KVLIST = 6,
    VAL_BYTES = 7,
};

/* AnyValue nesting deeper than this is refused by both decoders. */
#define VAL_MAX_DEPTH 64

/* A growable byte buffer. Owned by whoever embeds it; not thread-safe. */
struct vbuf {
    uint8_t *p;
    size_t len;
    size_t cap;
};

/* A range inside a vbuf (or inside any byte area, once the vbuf is final). */
struct blob {
    uint32_t off;
    uint32_t len;
};

void vbuf_init(struct vbuf *b);
void vbuf_fini(struct vbuf *b);
/* Keeps the capacity. */
void vbuf_reset(struct vbuf *b);
/* 0, or -ENOMEM. Makes room for |n| more bytes. */
int vbuf_reserve(struct vbuf *b, size_t n);
/* The writers return 0 or -ENOMEM. */
int vbuf_put(struct vbuf *b, const void *p, size_t n);
int vbuf_put_u8(struct vbuf *b, uint8_t v);
int vbuf_put_u32(struct vbuf *b, uint32_t v);
int vbuf_put_u64(struct vbuf *b, uint64_t v);
int vbuf_put_f64(struct vbuf *b, double v);
int vbuf_put_uv(struct vbuf *b, uint64_t v);
/* uv length + bytes */
int vbuf_put_str(struct vbuf *b, const void *p, size_t n);
void vbuf_patch_u32(struct vbuf *b, size_t off, uint32_t v);

/* Scalar values. */
int val_put_empty(struct vbuf *b);
int val_put_str(struct vbuf *b, const char *p, size_t n);
int val_put_bytes(struct vbuf *b, const void *p, size_t n);
int val_put_bool(struct vbuf *b, bool v);
int val_put_int(struct vbuf *b, int64_t v);
int val_put_double(struct vbuf *b, double v);
/* A key of an attribute list or kvlist; the value follows with a val_put_*. */
int val_put_key(struct vbuf *b, const char *p, size_t n);

/*
 * Containers: open, write the members, close with the member count.
 * Open returns the offset to hand to close (>= 0), or -ENOMEM.
 */
long val_open(struct vbuf *b, enum val_type array_or_kvlist);
void val_close(struct vbuf *b, long at, uint32_t count);

/* ---- reading ---- */

/* A cursor over encoded bytes. Readers never run past |end|. */
struct val_rd {
    const uint8_t *p;
    const uint8_t *end;
};

/* One decoded value. For STR/BYTES, s/n point into the encoding; for
 * ARRAY/KVLIST, |inner| reads the members and |count| says how many. */
struct val {
    enum val_type type;
    uint32_t count;
    union {
        struct {
            const char *s;
            size_t n;
        };
        bool b;
        int64_t i;
        double d;
        struct val_rd inner;
    };
};

/* 0, or -EBADMSG if the bytes are not a well-formed encoding. */
int val_rd_u8(struct val_rd *r, uint8_t *out);
int val_rd_u32(struct val_rd *r, uint32_t *out);
int val_rd_u64(struct val_rd *r, uint64_t *out);
int val_rd_f64(struct val_rd *r, double *out);
int val_rd_uv(struct val_rd *r, uint64_t *out);
int val_rd_str(struct val_rd *r, const char **s, size_t *n);
int val_rd_bytes(struct val_rd *r, const void **p, size_t n);
int val_rd_value(struct val_rd *r, struct val *out);
/* A key then its value (attribute lists and kvlist members). */
int val_rd_kv(struct val_rd *r, const char **key, size_t *keylen, struct val *out);
/* Checks a whole attribute blob of |count| entries, nesting included. */
int val_check_attrs(const uint8_t *p, size_t n, uint32_t count);

/* val_rd_str and val_rd_value with their common cases inline (a length or
 * an integer in one varint byte, a bool) and the rest by the calls above:
 * the same results, errors included. For per-attribute loops. */
static inline int val_rd_str_in(struct val_rd *r, const char **s, size_t *n)
{
    if (r->p < r->end && *r->p < 0x80 && *r->p < r->end - r->p) {
        *n = *r->p;
        *s = (const char *)r->p + 1;
        r->p += 1 + *n;
        return 0;
    }
    return val_rd_str(r, s, n);
}

static inline int val_rd_value_in(struct val_rd *r, struct val *out)
{
    if (r->end - r->p >= 2) {
        uint8_t t = r->p[0], c = r->p[1];
        if ((t == VAL_STR || t == VAL_BYTES) && c < 0x80 && c <= r->end - r->p - 2) {
            out->type = (enum val_type)t;
            out->count = 0;
            out->s = (const char *)r->p + 2;
            out->n = c;
            r->p += 2 + c;
            return 0;
        }
        if ((t == VAL_INT && c < 0x80) || (t == VAL_BOOL && c <= 1)) {
            out->type = (enum val_type)t;
            out->count = 0;
            if (t == VAL_INT) {
                out->i = (int64_t)(c >> 1) ^ -(int64_t)(c & 1);
            } else {
                out->b = c != 0;
            }
            r->p += 2;
            return 0;
        }
    }
    return val_rd_value(r, out);
}

#endif
