/*
 * block_keys.c - format 3's key-coded attribute lists: the writer replaces
 * each attribute key of a record attribute list with a code into the
 * block's key dictionary, and (format 5) each key-value of the value
 * dictionary with its code, and a table load rebuilds the lists, byte for
 * byte, into memory the block owns (block_int.h, "v3 ATTRS", "v5 ATTRS").
 * Both directions are here; the writer's value dictionary is
 * block_vdict.c's.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
                 const struct kc_pos *ap, uint64_t nap, const uint32_t *klen, const uint32_t *vcode)
{
    uint32_t at = 0;
    if (nap == count) {
        /* Every key has an id (< KC_MAX: its code takes at most 2 bytes,
         * where the key took at least 1; a value code at most 3, where the
         * key-value took at least 2) and |ap| says where each value
         * starts: the value ends where the next key (of known length)
         * starts. */
        if (vbuf_reserve(out, (size_t)len + count + 8 + COPY_SLACK) < 0) {
            return -ENOMEM;
        }
        uint8_t *o = out->p + out->len;
        for (uint64_t e = 0; e < nap; e++) {
            uint32_t vs = ap[e].off - 1, ve = len, code = ap[e].id + 1;
            if (e + 1 < nap) {
                uint32_t kn = klen[ap[e + 1].id];
                ve = ap[e + 1].off - 1 - kn - (unsigned)pbw_varint_size(kn);
            }
            if (vs < at || ve < vs || ve > len) {
                return -EINVAL;
            }
            uint32_t vc = vcode != NULL && ap[e].ve != 0 ? vcode[ap[e].ve - 1] : 0;
            if (vc != 0) { /* the whole key-value is a value dictionary entry */
                code = vc;
                vs = ve;
            }
            if (code >= (1u << 21)) {
                return -EINVAL;
            }
            if (code < 0x80) {
                *o++ = (uint8_t)code;
            } else if (code < (1u << 14)) {
                *o++ = (uint8_t)(code | 0x80);
                *o++ = (uint8_t)(code >> 7);
            } else {
                *o++ = (uint8_t)(code | 0x80);
                *o++ = (uint8_t)(code >> 7 | 0x80);
                *o++ = (uint8_t)(code >> 14);
            }
            copy16(o, p + vs, ve - vs);
            o += ve - vs;
            at = ve;
        }
        out->len = (size_t)(o - out->p);
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

/*
 * Each value dictionary entry (uv key id, then one value filling the
 * entry) expanded into the key-value a list holds: the key's encoding from
 * kenc/kat, then the value's bytes, into |vx| at offsets vat[0, nvals].
 * 0, -EBADMSG (a key id past the keys, a value that does not fill its
 * entry), -ENOMEM.
 */
static int vals_expand(const struct scol *vals, uint64_t nvals, const struct vbuf *kenc,
                       const uint32_t *kat, uint64_t nkeys, struct vbuf *vx, uint64_t *vat,
                       uint32_t *vkey)
{
    vat[0] = 0;
    for (uint64_t v = 0; v < nvals; v++) {
        const uint8_t *p = vals->data + ic_get(&vals->off, v);
        const uint8_t *end = vals->data + ic_get(&vals->off, v + 1);
        bool bad = false;
        uint64_t key = uv_take(&p, end, &bad);
        if (bad || key >= nkeys || value_end(p, end) != end) {
            return -EBADMSG;
        }
        vkey[v] = (uint32_t)key;
        if (vbuf_put(vx, kenc->p + kat[key], kat[key + 1] - kat[key]) < 0 ||
            vbuf_put(vx, p, (size_t)(end - p)) < 0) {
            return -ENOMEM;
        }
        vat[v + 1] = vx->len;
    }
    return vbuf_reserve(vx, COPY_SLACK) < 0 ? -ENOMEM : 0; /* copy16 reads past the last */
}

/* The hot slot of literal key k[0, kn) (kn: its encoding's length, uv
 * length first), or -1. */
static int literal_slot(const uint8_t *k, size_t kn, const struct akeys_hot *hp)
{
    for (unsigned h = 0; h < hp->n; h++) {
        size_t hn = hp->key[h].len;
        if (kn == hn + (size_t)pbw_varint_size(hn) && memcmp(k + kn - hn, hp->key[h].p, hn) == 0) {
            return (int)h;
        }
    }
    return -1;
}

int akeys_rebuild(struct dcol *dc, uint64_t nd, const struct scol *keys, uint64_t nkeys,
                  const struct scol *vals, uint64_t nvals, const struct akeys_hot *hp,
                  uint8_t **buf, uint64_t **offs)
{
    uint64_t *o = malloc((nd + 1) * sizeof(*o));
    /* Each key's encoding (uv length, bytes) as a list holds it; each value
     * entry's key-value (format 5). */
    struct vbuf kenc, vx;
    uint32_t *kat = malloc((nkeys + 1) * sizeof(*kat));
    uint64_t *vat = malloc((nvals + 1) * sizeof(*vat));
    uint32_t *vkey = malloc((nvals + 1) * sizeof(*vkey));
    vbuf_init(&kenc);
    vbuf_init(&vx);
    if (o == NULL || kat == NULL || vat == NULL || vkey == NULL) {
        free(o);
        free(kat);
        free(vat);
        free(vkey);
        return -ENOMEM;
    }
    int rc = 0;
    for (uint64_t k = 0; k < nkeys && rc == 0; k++) {
        struct mstr s = sc_get(keys, k);
        kat[k] = (uint32_t)kenc.len;
        rc = vbuf_put_str(&kenc, s.p, s.len);
    }
    kat[nkeys] = (uint32_t)kenc.len;
    if (rc == 0) {
        rc = vbuf_reserve(&kenc, COPY_SLACK); /* copy16 may read past the last key */
    }
    if (rc == 0 && nvals > 0) {
        rc = vals_expand(vals, nvals, &kenc, kat, nkeys, &vx, vat, vkey);
    }
    /* The lists come out at most (longest key + 1) per byte larger, or
     * (format 5) the longest value entry per byte. */
    uint64_t in = ic_get(&dc->dict.off, nd), kmax = 0;
    for (uint64_t k = 0; k < nkeys; k++) {
        kmax = kat[k + 1] - kat[k] > kmax ? kat[k + 1] - kat[k] : kmax;
    }
    for (uint64_t v = 0; v < nvals && rc == 0; v++) {
        kmax = vat[v + 1] - vat[v] > kmax ? vat[v + 1] - vat[v] : kmax;
    }
    struct vbuf out;
    vbuf_init(&out);
    if (rc == 0 && vbuf_reserve(&out, in + in / 2 + 64) < 0) {
        rc = -ENOMEM;
    }
    o[0] = 0;
    for (uint64_t c = 0; c < nd && rc == 0; c++) {
        const uint8_t *p = dc->dict.data + ic_get(&dc->dict.off, c);
        const uint8_t *end = dc->dict.data + ic_get(&dc->dict.off, c + 1);
        while (p < end) {
            uint64_t code = *p++;
            if (code & 0x80) { /* three bytes at most: codes are below 2^21 */
                if (p == end) {
                    rc = -EBADMSG;
                    break;
                }
                code = (code & 0x7f) | (uint64_t)(*p & 0x7f) << 7;
                if (*p++ & 0x80) {
                    if (p == end || (*p & 0x80)) {
                        rc = -EBADMSG;
                        break;
                    }
                    code |= (uint64_t)*p++ << 14;
                }
            }
            const uint8_t *ks = NULL, *vs = p, *ve;
            size_t kn = 0, vat_in = 0; /* the value's offset in the key-value */
            int h = -1;
            if (code == 0) { /* a literal key-value: uv length, key, value */
                struct val_rd r = {p, end};
                const char *k;
                if (val_rd_str(&r, &k, &kn) < 0) {
                    rc = -EBADMSG;
                    break;
                }
                ks = p;
                kn = vat_in = (size_t)(r.p - p);
                vs = r.p;
                ve = value_end(vs, end);
                h = hp != NULL ? literal_slot(ks, kn, hp) : -1;
            } else if (code <= nkeys) {
                ks = kenc.p + kat[code - 1];
                kn = vat_in = kat[code] - kat[code - 1];
                ve = value_end(vs, end);
                h = hp != NULL ? hp->kslot[code - 1] : -1;
            } else if (code - nkeys <= nvals) { /* a whole key-value, nothing follows */
                uint32_t key = vkey[code - nkeys - 1];
                ks = vx.p + vat[code - nkeys - 1];
                kn = vat[code - nkeys] - vat[code - nkeys - 1];
                vat_in = kat[key + 1] - kat[key];
                ve = vs;
                h = hp != NULL ? hp->kslot[key] : -1;
            } else {
                rc = -EBADMSG;
                break;
            }
            if (ve == NULL) {
                rc = -EBADMSG;
                break;
            }
            size_t vn = (size_t)(ve - vs), need = kn + vn;
            if (need + 2 * COPY_SLACK > out.cap - out.len &&
                vbuf_reserve(&out, need + 2 * COPY_SLACK +
                                       (in - (uint64_t)(p - dc->dict.data)) / 2 + kmax) < 0) {
                rc = -ENOMEM;
                break;
            }
            if (h >= 0 && hp->pos[c * hp->n + (unsigned)h] == 0) { /* a key's first value */
                hp->pos[c * hp->n + (unsigned)h] = (uint32_t)(out.len - o[c] + vat_in + 1);
            }
            copy16(out.p + out.len, ks, kn);
            copy16(out.p + out.len + kn, vs, vn);
            out.len += need;
            p = ve;
        }
        o[c + 1] = out.len;
    }
    free(kat);
    free(vat);
    free(vkey);
    vbuf_fini(&kenc);
    vbuf_fini(&vx);
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

/*
 * Format 5: the hot key columns of the rows from each list's positions
 * (hp->pos, by list dictionary entry, of |nd| entries), into memory the
 * block owns, as narrow as the largest position. 0 or -ENOMEM.
 */
static int hot_expand(blk *b, const struct akeys_hot *hp, uint64_t nd)
{
    uint64_t rows = b->rows;
    uint32_t max = 0;
    unsigned n = hp->n;
    for (uint64_t i = 0; i < nd * n; i++) {
        max = hp->pos[i] > max ? hp->pos[i] : max;
    }
    unsigned w = max < 256 ? 1 : max < 65536 ? 2 : 4;
    blk_heap_free(b->hotpos);
    b->hotpos = malloc(rows ? rows * n * w : 1);
    if (b->hotpos == NULL) {
        return -ENOMEM;
    }
    blk_heap_add(b->hotpos);
    const struct icol *codes = &b->D[X_ADICT].codes;
    uint8_t *p1 = b->hotpos;
    uint16_t *p2 = (uint16_t *)(void *)b->hotpos;
    uint32_t *p4 = (uint32_t *)(void *)b->hotpos;
    for (uint64_t r = 0; r < rows; r++) {
        const uint32_t *pp = hp->pos + ic_get(codes, r) * n;
        if (w == 1) {
            for (unsigned h = 0; h < n; h++) {
                p1[h * rows + r] = (uint8_t)pp[h];
            }
        } else if (w == 2) {
            for (unsigned h = 0; h < n; h++) {
                p2[h * rows + r] = (uint16_t)pp[h];
            }
        } else {
            for (unsigned h = 0; h < n; h++) {
                p4[h * rows + r] = pp[h];
            }
        }
    }
    for (unsigned h = 0; h < n; h++) {
        b->hot[h] = (struct icol){b->hotpos + (size_t)h * rows * w, 0, w};
    }
    return 0;
}

int akeys_load(blk *b, uint64_t nd, bool vd)
{
    struct dcol *ad = &b->D[X_ADICT];
    struct akeys_hot hk = {0};
    int8_t kslot[KC_MAX];
    if (vd && b->n_hot > 0) {
        hk = (struct akeys_hot){b->n_hot, b->hot_key, kslot,
                                calloc(nd ? nd * b->n_hot : 1, sizeof(uint32_t))};
        if (hk.pos == NULL) {
            return -ENOMEM;
        }
        for (uint64_t k = 0; k < b->n_keys; k++) {
            struct mstr ks = sc_get(&b->S[X_KEYS], k);
            kslot[k] = -1;
            for (unsigned h = 0; h < b->n_hot && kslot[k] < 0; h++) {
                if (ks.len == b->hot_key[h].len && memcmp(ks.p, b->hot_key[h].p, ks.len) == 0) {
                    kslot[k] = (int8_t)h;
                }
            }
        }
    }
    int rc =
        akeys_rebuild(ad, nd, &b->S[X_KEYS], b->n_keys, vd ? &b->S[X_VALS] : NULL,
                      vd ? b->n_vals : 0, hk.pos != NULL ? &hk : NULL, &b->alists, &b->alists_off);
    if (rc == 0) {
        blk_heap_add(b->alists);
        blk_heap_add(b->alists_off);
        if (hk.pos != NULL) {
            rc = hot_expand(b, &hk, nd);
        }
    }
    free(hk.pos);
    return rc;
}
