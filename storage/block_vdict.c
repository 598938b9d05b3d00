/*
 * block_vdict.c - format 5's attribute value dictionary, the writer's
 * side (block_wint.h, "struct vdict"): the key-values of log and span
 * attribute lists counted while the rows are walked, then those seen in
 * two rows or more written once as the attribute table's V column, the
 * most frequent first, each with the code a list refers to it by
 * (block_int.h, "v5 ATTRS"; block_keys.c codes the lists and rebuilds
 * them).
 */
#include "storage/block_wint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int vdict_reset(struct vdict *d)
{
    d->n = 0;
    vbuf_reset(&d->bytes);
    if (d->slot == NULL) {
        d->slot = calloc(1024, sizeof(*d->slot));
        if (d->slot == NULL) {
            return -ENOMEM;
        }
        d->scap = 1024;
    } else {
        memset(d->slot, 0, d->scap * sizeof(*d->slot));
    }
    memset(d->k, 0, d->nk * sizeof(d->k[0]));
    d->nk = KC_MAX; /* until vdict_finish knows the block's keys */
    return 0;
}

void vdict_free(struct vdict *d)
{
    free(d->e);
    free(d->slot);
    free(d->code);
    free(d->order);
    vbuf_fini(&d->bytes);
    memset(d, 0, sizeof(*d));
}

/* Doubles the slot table (at most 4 x VD_WMAX slots: never more than a
 * quarter full). 0 or -ENOMEM. */
static int grow_slots(struct vdict *d)
{
    size_t ncap = d->scap ? d->scap * 2 : 1024;
    uint64_t *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < d->scap; i++) {
        if (d->slot[i] != 0) {
            size_t j = (size_t)d->e[(uint32_t)d->slot[i] - 1].h & (ncap - 1);
            while (ns[j] != 0) {
                j = (j + 1) & (ncap - 1);
            }
            ns[j] = d->slot[i];
        }
    }
    free(d->slot);
    d->slot = ns;
    d->scap = ncap;
    return 0;
}

int vdict_insert(struct vdict *d, uint32_t key, uint64_t h, const uint8_t *v, uint32_t n,
                 uint64_t a, uint64_t b, size_t i, uint32_t *ve)
{
    struct vd_key *k = &d->k[key];
    *ve = 0;
    if (++k->dist * 2 > k->occ && k->occ >= VD_PROBE) {
        k->occ = UINT32_MAX; /* unique-looking values: inline from here on */
        return 0;
    }
    if (d->n >= VD_WMAX || n > VD_VAL_MAX || d->bytes.len + n > VD_BYTES) {
        return 0; /* full: the value stays inline */
    }
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 1024;
        struct vd_ent *ne = realloc(d->e, ncap * sizeof(*ne));
        if (ne == NULL) {
            return -ENOMEM;
        }
        d->e = ne;
        d->cap = ncap;
    }
    if (vbuf_put(&d->bytes, v, n) < 0) {
        return -ENOMEM;
    }
    d->e[d->n] = (struct vd_ent){a, b, (uint64_t)key << 32 | n, h, (uint32_t)(d->bytes.len - n), 1};
    d->slot[i] = (h >> 32) << 32 | (uint64_t)(d->n + 1);
    *ve = (uint32_t)++d->n;
    if ((d->n + 1) * 4 > d->scap) {
        return grow_slots(d);
    }
    return 0;
}

/* Most frequent first; ties in order of first sight (deterministic). */
static int by_count(const void *a, const void *b, void *arg)
{
    const struct vdict *d = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint32_t cx = d->e[x].count, cy = d->e[y].count;
    if (cx != cy) {
        return cx > cy ? -1 : 1;
    }
    return x < y ? -1 : x > y;
}

int vdict_finish(struct vdict *d, uint64_t nkeys, struct strb *out, uint64_t *nvals)
{
    *nvals = 0;
    d->nk = nkeys; /* the ids the block's keys took */
    vbuf_reset(&out->data);
    size_t need = d->n ? d->n : 1;
    uint32_t *nc = realloc(d->code, need * sizeof(*nc));
    if (nc != NULL) {
        d->code = nc;
    }
    uint32_t *no = realloc(d->order, need * sizeof(*no));
    if (no != NULL) {
        d->order = no;
    }
    uint64_t *nof =
        out->cap_offs < need + 1 ? realloc(out->offs, (need + 1) * sizeof(*nof)) : out->offs;
    if (nof != NULL && nof != out->offs) {
        out->offs = nof;
        out->cap_offs = need + 1;
    }
    if (nc == NULL || no == NULL || nof == NULL) {
        return -ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < d->n; i++) {
        d->code[i] = 0;
        if (d->e[i].count >= 2) {
            d->order[m++] = (uint32_t)i;
        }
    }
    qsort_r(d->order, m, sizeof(*d->order), by_count, d);
    out->offs[0] = 0;
    for (size_t r = 0; r < m; r++) {
        const struct vd_ent *e = &d->e[d->order[r]];
        uint8_t kb[10];
        size_t kn = (size_t)(uv_put(kb, e->kl >> 32) - kb);
        if (vbuf_put(&out->data, kb, kn) < 0 ||
            vbuf_put(&out->data, d->bytes.p + e->off, (uint32_t)e->kl) < 0) {
            return -ENOMEM;
        }
        out->offs[r + 1] = out->data.len;
        d->code[d->order[r]] = (uint32_t)(nkeys + 1 + r);
    }
    *nvals = m;
    return 0;
}
