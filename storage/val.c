/*
 * val.c - writers and readers of the value encoding specified in val.h.
 */
#include "storage/val.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void vbuf_init(struct vbuf *b)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
}

void vbuf_fini(struct vbuf *b)
{
    free(b->p);
    vbuf_init(b);
}

void vbuf_reset(struct vbuf *b)
{
    b->len = 0;
}

int vbuf_reserve(struct vbuf *b, size_t n)
{
    if (b->cap - b->len >= n) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL) {
        return -ENOMEM;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

int vbuf_put(struct vbuf *b, const void *p, size_t n)
{
    if (vbuf_reserve(b, n) < 0) {
        return -ENOMEM;
    }
    if (n != 0) {
        memcpy(b->p + b->len, p, n);
    }
    b->len += n;
    return 0;
}

int vbuf_put_u8(struct vbuf *b, uint8_t v)
{
    if (vbuf_reserve(b, 1) < 0) {
        return -ENOMEM;
    }
    b->p[b->len++] = v;
    return 0;
}

int vbuf_put_u32(struct vbuf *b, uint32_t v)
{
    uint8_t t[4] = {v, v >> 8, v >> 16, v >> 24};
    return vbuf_put(b, t, 4);
}

int vbuf_put_u64(struct vbuf *b, uint64_t v)
{
    uint8_t t[8];
    for (int i = 0; i < 8; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    return vbuf_put(b, t, 8);
}

int vbuf_put_f64(struct vbuf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return vbuf_put_u64(b, u);
}

int vbuf_put_uv(struct vbuf *b, uint64_t v)
{
    if (vbuf_reserve(b, 10) < 0) {
        return -ENOMEM;
    }
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
    return 0;
}

int vbuf_put_str(struct vbuf *b, const void *p, size_t n)
{
    if (vbuf_reserve(b, 10 + n) < 0) {
        return -ENOMEM;
    }
    vbuf_put_uv(b, n);
    return vbuf_put(b, p, n);
}

void vbuf_patch_u32(struct vbuf *b, size_t off, uint32_t v)
{
    b->p[off] = (uint8_t)v;
    b->p[off + 1] = (uint8_t)(v >> 8);
    b->p[off + 2] = (uint8_t)(v >> 16);
    b->p[off + 3] = (uint8_t)(v >> 24);
}

int val_put_empty(struct vbuf *b)
{
    return vbuf_put_u8(b, VAL_EMPTY);
}

int val_put_str(struct vbuf *b, const char *p, size_t n)
{
    if (vbuf_put_u8(b, VAL_STR) < 0) {
        return -ENOMEM;
    }
    return vbuf_put_str(b, p, n);
}

int val_put_bytes(struct vbuf *b, const void *p, size_t n)
{
    if (vbuf_put_u8(b, VAL_BYTES) < 0) {
        return -ENOMEM;
    }
    return vbuf_put_str(b, p, n);
}

int val_put_bool(struct vbuf *b, bool v)
{
    uint8_t t[2] = {VAL_BOOL, v ? 1 : 0};
    return vbuf_put(b, t, 2);
}

int val_put_int(struct vbuf *b, int64_t v)
{
    if (vbuf_put_u8(b, VAL_INT) < 0) {
        return -ENOMEM;
    }
    return vbuf_put_uv(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

int val_put_double(struct vbuf *b, double v)
{
    if (vbuf_put_u8(b, VAL_DOUBLE) < 0) {
        return -ENOMEM;
    }
    return vbuf_put_f64(b, v);
}

int val_put_key(struct vbuf *b, const char *p, size_t n)
{
    return vbuf_put_str(b, p, n);
}

long val_open(struct vbuf *b, enum val_type array_or_kvlist)
{
    if (vbuf_reserve(b, 9) < 0) {
        return -ENOMEM;
    }
    b->p[b->len++] = (uint8_t)array_or_kvlist;
    long at = (long)b->len;
    b->len += 8;
    return at;
}

void val_close(struct vbuf *b, long at, uint32_t count)
{
    vbuf_patch_u32(b, (size_t)at, (uint32_t)(b->len - (size_t)at - 8));
    vbuf_patch_u32(b, (size_t)at + 4, count);
}

/* ---- reading ---- */

int val_rd_u8(struct val_rd *r, uint8_t *out)
{
    if (r->end - r->p < 1) {
        return -EBADMSG;
    }
    *out = *r->p++;
    return 0;
}

int val_rd_u32(struct val_rd *r, uint32_t *out)
{
    if (r->end - r->p < 4) {
        return -EBADMSG;
    }
    const uint8_t *p = r->p;
    *out = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    r->p += 4;
    return 0;
}

int val_rd_u64(struct val_rd *r, uint64_t *out)
{
    if (r->end - r->p < 8) {
        return -EBADMSG;
    }
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | r->p[i];
    }
    r->p += 8;
    *out = v;
    return 0;
}

int val_rd_f64(struct val_rd *r, double *out)
{
    uint64_t u;
    if (val_rd_u64(r, &u) < 0) {
        return -EBADMSG;
    }
    memcpy(out, &u, 8);
    return 0;
}

int val_rd_uv(struct val_rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            return -EBADMSG;
        }
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (c < 0x80) {
            *out = v;
            return 0;
        }
    }
    return -EBADMSG;
}

int val_rd_str(struct val_rd *r, const char **s, size_t *n)
{
    uint64_t len;
    if (val_rd_uv(r, &len) < 0 || len > (uint64_t)(r->end - r->p)) {
        return -EBADMSG;
    }
    *s = (const char *)r->p;
    *n = (size_t)len;
    r->p += len;
    return 0;
}

int val_rd_bytes(struct val_rd *r, const void **p, size_t n)
{
    if ((size_t)(r->end - r->p) < n) {
        return -EBADMSG;
    }
    *p = r->p;
    r->p += n;
    return 0;
}

int val_rd_value(struct val_rd *r, struct val *out)
{
    uint8_t t;
    uint64_t u;
    uint32_t nbytes;
    if (val_rd_u8(r, &t) < 0) {
        return -EBADMSG;
    }
    out->type = (enum val_type)t;
    out->count = 0;
    switch (t) {
    case VAL_EMPTY:
        return 0;
    case VAL_STR:
    case VAL_BYTES:
        return val_rd_str(r, &out->s, &out->n);
    case VAL_BOOL:
        if (val_rd_u8(r, &t) < 0 || t > 1) {
            return -EBADMSG;
        }
        out->b = t != 0;
        return 0;
    case VAL_INT:
        if (val_rd_uv(r, &u) < 0) {
            return -EBADMSG;
        }
        out->i = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        return 0;
    case VAL_DOUBLE:
        return val_rd_f64(r, &out->d);
    case VAL_ARRAY:
    case VAL_KVLIST:
        if (val_rd_u32(r, &nbytes) < 0 || val_rd_u32(r, &out->count) < 0 ||
            nbytes > (size_t)(r->end - r->p)) {
            return -EBADMSG;
        }
        out->inner.p = r->p;
        out->inner.end = r->p + nbytes;
        r->p += nbytes;
        return 0;
    default:
        return -EBADMSG;
    }
}

int val_rd_kv(struct val_rd *r, const char **key, size_t *keylen, struct val *out)
{
    if (val_rd_str(r, key, keylen) < 0) {
        return -EBADMSG;
    }
    return val_rd_value(r, out);
}

static int check_value(struct val_rd *r, int depth);

static int check_members(struct val_rd r, uint32_t count, bool keyed, int depth)
{
    const char *k;
    size_t kn;
    for (uint32_t i = 0; i < count; i++) {
        if (keyed && val_rd_str(&r, &k, &kn) < 0) {
            return -EBADMSG;
        }
        if (check_value(&r, depth) < 0) {
            return -EBADMSG;
        }
    }
    return r.p == r.end ? 0 : -EBADMSG;
}

static int check_value(struct val_rd *r, int depth)
{
    struct val v;
    if (depth > VAL_MAX_DEPTH || val_rd_value(r, &v) < 0) {
        return -EBADMSG;
    }
    if (v.type == VAL_ARRAY || v.type == VAL_KVLIST) {
        return check_members(v.inner, v.count, v.type == VAL_KVLIST, depth + 1);
    }
    return 0;
}

int val_check_attrs(const uint8_t *p, size_t n, uint32_t count)
{
    struct val_rd r = {p, p + n};
    return check_members(r, count, true, 1);
}
