/*
 * pmodel.c - label sets and series sets of the PromQL side (pmodel.h).
 */
#include "query/pmodel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static const char NAME_LABEL[] = "__name__";
#define NAME_LABEL_LEN (sizeof NAME_LABEL - 1)

static bool is_name_label(const char *s, size_t n)
{
    return n == NAME_LABEL_LEN && memcmp(s, NAME_LABEL, n) == 0;
}

static bool in_names(const char *s, size_t n, const char *const *names, const uint32_t *lens,
                     size_t n_names)
{
    for (size_t i = 0; i < n_names; i++) {
        if (lens[i] == n && memcmp(names[i], s, n) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether label |l| takes part in a hash_on / keep with these arguments. */
static bool kept(const struct pm_label *l, bool on, const char *const *names, const uint32_t *lens,
                 size_t n_names, bool drop_name)
{
    if (drop_name && is_name_label(l->name, l->name_len)) {
        return false;
    }
    bool listed = in_names(l->name, l->name_len, names, lens, n_names);
    return on ? listed : !listed;
}

static uint64_t hash_labels(const struct pm_labels *ls, bool filter, bool on,
                            const char *const *names, const uint32_t *lens, size_t n_names,
                            bool drop_name)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    static const unsigned char sep = 0xff;
    for (uint32_t i = 0; i < ls->n; i++) {
        const struct pm_label *l = &ls->v[i];
        if (filter && !kept(l, on, names, lens, n_names, drop_name)) {
            continue;
        }
        XXH3_64bits_update(&st, l->name, l->name_len);
        XXH3_64bits_update(&st, &sep, 1);
        XXH3_64bits_update(&st, l->value, l->value_len);
        XXH3_64bits_update(&st, &sep, 1);
    }
    return XXH3_64bits_digest(&st);
}

uint64_t pm_labels_hash(const struct pm_labels *ls)
{
    return hash_labels(ls, false, false, NULL, NULL, 0, false);
}

uint64_t pm_labels_hash_on(const struct pm_labels *ls, bool on, const char *const *names,
                           const uint32_t *name_lens, size_t n_names, bool drop_name)
{
    return hash_labels(ls, true, on, names, name_lens, n_names, drop_name || !on);
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = n != 0 ? memcmp(a, b, n) : 0;
    if (c != 0) {
        return c < 0 ? -1 : 1;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

int pm_labels_cmp(const struct pm_labels *a, const struct pm_labels *b)
{
    uint32_t n = a->n < b->n ? a->n : b->n;
    for (uint32_t i = 0; i < n; i++) {
        const struct pm_label *x = &a->v[i], *y = &b->v[i];
        int c = cmp_bytes(x->name, x->name_len, y->name, y->name_len);
        if (c != 0) {
            return c;
        }
        c = cmp_bytes(x->value, x->value_len, y->value, y->value_len);
        if (c != 0) {
            return c;
        }
    }
    return a->n < b->n ? -1 : a->n > b->n ? 1 : 0;
}

bool pm_labels_equal(const struct pm_labels *a, const struct pm_labels *b)
{
    return a->n == b->n && pm_labels_cmp(a, b) == 0;
}

const char *pm_labels_get(const struct pm_labels *ls, const char *name, size_t nlen, uint32_t *len)
{
    /* Sorted: binary search. */
    uint32_t lo = 0, hi = ls->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const struct pm_label *l = &ls->v[mid];
        int c = cmp_bytes(l->name, l->name_len, name, nlen);
        if (c == 0) {
            *len = l->value_len;
            return l->value;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *len = 0;
    return NULL;
}

/* ---- builder ---- */

static bool lb_grow(struct pm_lb *b, uint32_t need)
{
    if (b->err != 0) {
        return false;
    }
    if (need <= b->cap) {
        return true;
    }
    uint32_t cap = b->cap != 0 ? b->cap * 2 : 8;
    while (cap < need) {
        cap *= 2;
    }
    struct pm_label *v = (struct pm_label *)arena_alloc(b->a, cap * sizeof *v);
    if (v == NULL) {
        b->err = -ENOMEM;
        return false;
    }
    if (b->n != 0) {
        memcpy(v, b->v, b->n * sizeof *v);
    }
    b->v = v;
    b->cap = cap;
    return true;
}

void pm_lb_init(struct pm_lb *b, arena *a, const struct pm_labels *from)
{
    memset(b, 0, sizeof *b);
    b->a = a;
    if (from != NULL && from->n != 0 && lb_grow(b, from->n)) {
        memcpy(b->v, from->v, from->n * sizeof *b->v);
        b->n = from->n;
    }
}

/* Index of |name| or of where it goes; *found tells. */
static uint32_t lb_find(const struct pm_lb *b, const char *name, size_t nlen, bool *found)
{
    uint32_t lo = 0, hi = b->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = cmp_bytes(b->v[mid].name, b->v[mid].name_len, name, nlen);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

void pm_lb_del(struct pm_lb *b, const char *name, size_t nlen)
{
    if (b->err != 0) {
        return;
    }
    bool found;
    uint32_t i = lb_find(b, name, nlen, &found);
    if (found) {
        memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof *b->v);
        b->n--;
    }
}

void pm_lb_set(struct pm_lb *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (b->err != 0) {
        return;
    }
    if (vlen == 0) {
        pm_lb_del(b, name, nlen);
        return;
    }
    bool found;
    uint32_t i = lb_find(b, name, nlen, &found);
    if (!found) {
        if (!lb_grow(b, b->n + 1)) {
            return;
        }
        memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
        b->n++;
        b->v[i].name = name;
        b->v[i].name_len = (uint32_t)nlen;
    }
    b->v[i].value = value;
    b->v[i].value_len = (uint32_t)vlen;
}

void pm_lb_set_copy(struct pm_lb *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (b->err != 0) {
        return;
    }
    if (vlen == 0) {
        pm_lb_del(b, name, nlen);
        return;
    }
    char *n = arena_strndup(b->a, name, nlen);
    char *v = arena_strndup(b->a, value, vlen);
    if (n == NULL || v == NULL) {
        b->err = -ENOMEM;
        return;
    }
    pm_lb_set(b, n, nlen, v, vlen);
}

void pm_lb_keep(struct pm_lb *b, bool on, const char *const *names, const uint32_t *name_lens,
                size_t n_names, bool drop_name)
{
    if (b->err != 0) {
        return;
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        if (kept(&b->v[i], on, names, name_lens, n_names, drop_name)) {
            b->v[w++] = b->v[i];
        }
    }
    b->n = w;
}

int pm_lb_done(struct pm_lb *b, struct pm_labels *out)
{
    if (b->err != 0) {
        return b->err;
    }
    struct pm_label *v = NULL;
    if (b->n != 0) {
        v = (struct pm_label *)arena_alloc(b->a, b->n * sizeof *v);
        if (v == NULL) {
            return -ENOMEM;
        }
        memcpy(v, b->v, b->n * sizeof *v);
    }
    out->v = v;
    out->n = b->n;
    return 0;
}

int pm_labels_drop_name(arena *a, const struct pm_labels *in, struct pm_labels *out)
{
    for (uint32_t i = 0; i < in->n; i++) {
        if (!is_name_label(in->v[i].name, in->v[i].name_len)) {
            continue;
        }
        struct pm_label *v = NULL;
        if (in->n > 1) {
            v = (struct pm_label *)arena_alloc(a, (in->n - 1) * sizeof *v);
            if (v == NULL) {
                return -ENOMEM;
            }
            memcpy(v, in->v, i * sizeof *v);
            memcpy(v + i, in->v + i + 1, (in->n - i - 1) * sizeof *v);
        }
        out->v = v;
        out->n = in->n - 1;
        return 0;
    }
    *out = *in;
    return 0;
}

static int cmp_series(const void *x, const void *y)
{
    const struct pm_series *a = x, *b = y;
    return pm_labels_cmp(&a->labels, &b->labels);
}

void pm_set_sort(struct pm_set *set)
{
    if (set->n > 1) {
        qsort(set->s, set->n, sizeof *set->s, cmp_series);
    }
}

struct pm_hist *pm_hist_dup(arena *a, const struct pm_hist *h)
{
    struct pm_hist *c = (struct pm_hist *)arena_alloc(a, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    *c = *h;
    c->pos = c->neg = NULL;
    if (h->n_pos != 0) {
        c->pos = (double *)arena_alloc(a, h->n_pos * sizeof(double));
        if (c->pos == NULL) {
            return NULL;
        }
        memcpy(c->pos, h->pos, h->n_pos * sizeof(double));
    }
    if (h->n_neg != 0) {
        c->neg = (double *)arena_alloc(a, h->n_neg * sizeof(double));
        if (c->neg == NULL) {
            return NULL;
        }
        memcpy(c->neg, h->neg, h->n_neg * sizeof(double));
    }
    return c;
}
