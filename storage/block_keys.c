/*
 * block_keys.c - format 3's key-coded attribute lists: the writer replaces
 * each attribute key of a record attribute list with a code into the
 * block's key dictionary (the attribute table's last fixed column), and a
 * table load rebuilds the lists, byte for byte, into memory the block owns
 * (block_int.h, "Key-coded attribute lists"). Both directions are here.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static unsigned uv_len(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* One key-value of p[0, len) starting at |*at| copied verbatim behind a
 * literal code (0): 0, -EINVAL when it does not parse, -ENOMEM. */
static int put_literal(struct vbuf *out, const uint8_t *p, uint32_t len, uint32_t *at)
{
    struct val_rd r = {p + *at, p + len};
    const char *k;
    size_t kn;
    struct val v;
    if (val_rd_kv(&r, &k, &kn, &v) < 0) {
        return -EINVAL;
    }
    uint32_t end = (uint32_t)(r.p - p);
    if (vbuf_put_u8(out, 0) < 0 || vbuf_put(out, p + *at, end - *at) < 0) {
        return -ENOMEM;
    }
    *at = end;
    return 0;
}

int akeys_encode(struct vbuf *out, const uint8_t *p, uint32_t len, uint32_t count,
                 const struct kc_pos *ap, uint64_t nap, const uint32_t *klen)
{
    uint32_t at = 0;
    if (nap == count) {
        /* Every key has an id and |ap| says where each value starts: the
         * value ends where the next key (of known length) starts. */
        for (uint64_t e = 0; e < nap; e++) {
            uint32_t vs = ap[e].off - 1, ve = len;
            if (e + 1 < nap) {
                uint32_t kn = klen[ap[e + 1].id];
                ve = ap[e + 1].off - 1 - kn - uv_len(kn);
            }
            if (vs < at || ve < vs || ve > len) {
                return -EINVAL;
            }
            if (vbuf_put_uv(out, (uint64_t)ap[e].id + 1) < 0 ||
                vbuf_put(out, p + vs, ve - vs) < 0) {
                return -ENOMEM;
            }
            at = ve;
        }
        return at == len ? 0 : -EINVAL;
    }
    while (at < len) {
        int rc = put_literal(out, p, len, &at);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int akeys_rebuild(struct dcol *dc, uint64_t nd, const struct scol *keys, uint64_t nkeys,
                  uint8_t **buf, uint64_t **offs)
{
    struct vbuf out;
    vbuf_init(&out);
    uint64_t *o = malloc((nd + 1) * sizeof(*o));
    if (o == NULL) {
        return -ENOMEM;
    }
    o[0] = 0;
    int rc = 0;
    for (uint64_t c = 0; c < nd && rc == 0; c++) {
        uint64_t a = ic_get(&dc->dict.off, c), z = ic_get(&dc->dict.off, c + 1);
        struct val_rd r = {dc->dict.data + a, dc->dict.data + z};
        while (r.p < r.end && rc == 0) {
            uint64_t code;
            const uint8_t *kv = r.p;
            struct val v;
            if (val_rd_uv(&r, &code) < 0 || code > nkeys) {
                rc = -EBADMSG;
                break;
            }
            if (code == 0) { /* a literal key-value */
                const char *k;
                size_t kn;
                kv = r.p;
                if (val_rd_kv(&r, &k, &kn, &v) < 0) {
                    rc = -EBADMSG;
                } else if (vbuf_put(&out, kv, (size_t)(r.p - kv)) < 0) {
                    rc = -ENOMEM;
                }
                continue;
            }
            struct mstr k = sc_get(keys, code - 1);
            const uint8_t *vs = r.p;
            if (val_rd_value(&r, &v) < 0) {
                rc = -EBADMSG;
            } else if (vbuf_put_str(&out, k.p, k.len) < 0 ||
                       vbuf_put(&out, vs, (size_t)(r.p - vs)) < 0) {
                rc = -ENOMEM;
            }
        }
        o[c + 1] = out.len;
    }
    if (rc < 0) {
        free(o);
        vbuf_fini(&out);
        return rc;
    }
    *buf = out.p; /* NULL when every list is empty: bound to |empty| below */
    *offs = o;
    dc->dict.off = (struct icol){(const uint8_t *)o, 0, 8};
    dc->dict.data = out.p != NULL ? out.p : (const uint8_t *)empty;
    return 0;
}
