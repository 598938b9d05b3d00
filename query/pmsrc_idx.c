/*
 * pmsrc_idx.c - the label index of a sealed block (pmsrc_int.h): assembling
 * it from the series an index run found, postings, matching, and the time
 * test of a series, a label name or a label value.
 *
 * ASSEMBLY
 *   The run hands over each series' pairs in row order: (stream, whole)
 *   for a stream every row of which makes the series, (stream, row) for
 *   the rows of a histogram or summary stream that made it, (no stream,
 *   row) in a block without a stream section. A series' refs are its pairs
 *   grouped by stream: the stream's own row list when every row of it made
 *   the series (so no copy in the common case), else the rows copied.
 *   Postings come from sorting every (name, value, series) triple once.
 *
 * TIME
 *   A ref is present in [lo, hi) when its first row at or after lo is
 *   before hi (a binary search over its rows in the block's time column;
 *   a block wholly inside the range answers without one).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmsrc_int.h"
#include "storage/adm.h"

static _Atomic uint64_t cached;

static uint64_t cache_cap(void)
{
    uint64_t b = adm_budget();
    return b != 0 ? b / 8 : (1ull << 30);
}

bool pmx_cache_room(size_t bytes)
{
    return atomic_load(&cached) + bytes <= cache_cap();
}

bool pmx_charge(struct pmx *x)
{
    if (adm_budget() == 0) {
        adm_charge(x->bytes); /* no budget set (tests, tools): counted only */
    } else if (!adm_try_charge(x->bytes)) {
        return false;
    }
    atomic_fetch_add(&cached, x->bytes);
    x->charged = true;
    return true;
}

uint64_t pmsrc_index_bytes(void)
{
    return atomic_load(&cached);
}

void pmx_free(void *p)
{
    struct pmx *x = p;
    if (x == NULL) {
        return;
    }
    if (x->charged) {
        atomic_fetch_sub(&cached, x->bytes);
        adm_uncharge(x->bytes);
    }
    arena_free(x->a);
    free(x);
}

struct triple {
    const struct pm_label *l;
    uint32_t ser;
};

static int str_cmp(const char *a, uint32_t an, const char *b, uint32_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c != 0 ? c : (an > bn) - (an < bn);
}

static int triple_cmp(const void *pa, const void *pb)
{
    const struct triple *a = pa, *b = pb;
    int c = str_cmp(a->l->name, a->l->name_len, b->l->name, b->l->name_len);
    if (c == 0) {
        c = str_cmp(a->l->value, a->l->value_len, b->l->value, b->l->value_len);
    }
    return c != 0 ? c : (a->ser > b->ser) - (a->ser < b->ser);
}

/* The refs of one series from its pairs. */
static int refs_of(struct pmx *x, blk *b, const struct pms_series *s, uint32_t *nref)
{
    uint32_t k = 0;
    while (k < s->npx) {
        uint32_t st = s->px[k].stream, j = k;
        bool whole = false;
        while (j < s->npx && s->px[j].stream == st && st != PMS_NOSTREAM) {
            whole = whole || s->px[j].row == PMS_WHOLE;
            j++;
        }
        if (st == PMS_NOSTREAM) {
            while (j < s->npx && s->px[j].stream == PMS_NOSTREAM) {
                j++;
            }
        }
        struct pmx_ref *r = &x->ref[(*nref)++];
        r->stream = st;
        struct blk_stream bs = {0};
        if (st != PMS_NOSTREAM && blk_stream(b, st, &bs) == 0 && (whole || j - k == bs.n_rows)) {
            r->rows = bs.rows;
            r->n = bs.n_rows;
        } else {
            uint32_t *rows = arena_alloc(x->a, (size_t)(j - k) * sizeof(*rows));
            if (rows == NULL) {
                return -ENOMEM;
            }
            uint32_t n = 0;
            for (uint32_t i = k; i < j; i++) {
                if (s->px[i].row != PMS_WHOLE && (n == 0 || rows[n - 1] != s->px[i].row)) {
                    rows[n++] = s->px[i].row;
                }
            }
            r->rows = rows;
            r->n = n;
        }
        k = j;
    }
    return 0;
}

int pmx_assemble(struct pmx *x, blk *b, const struct pms_series *s, uint32_t n, arena *tmp)
{
    size_t npairs = 0, nlab = 0;
    for (uint32_t i = 0; i < n; i++) {
        npairs += s[i].npx;
        nlab += s[i].labels.n;
    }
    x->ser = arena_alloc(x->a, (n ? n : 1) * sizeof(*x->ser));
    x->ref = arena_alloc(x->a, (npairs ? npairs : 1) * sizeof(*x->ref));
    struct triple *t = arena_alloc(tmp, (nlab ? nlab : 1) * sizeof(*t));
    if (x->ser == NULL || x->ref == NULL || t == NULL) {
        return -ENOMEM;
    }
    x->nser = n;
    x->nref = 0;
    size_t nt = 0;
    for (uint32_t i = 0; i < n; i++) {
        x->ser[i].labels = s[i].labels;
        x->ser[i].hash = s[i].hash;
        x->ser[i].ref0 = x->nref;
        if (refs_of(x, b, &s[i], &x->nref) < 0) {
            return -ENOMEM;
        }
        x->ser[i].nref = x->nref - x->ser[i].ref0;
        for (uint32_t k = 0; k < s[i].labels.n; k++) {
            t[nt++] = (struct triple){&s[i].labels.v[k], i};
        }
    }
    qsort(t, nt, sizeof(*t), triple_cmp);
    uint32_t nn = 0, nv = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct pm_label *l = t[i].l, *p = i > 0 ? t[i - 1].l : NULL;
        bool new_name = p == NULL || str_cmp(p->name, p->name_len, l->name, l->name_len) != 0;
        nn += new_name;
        nv += new_name || str_cmp(p->value, p->value_len, l->value, l->value_len) != 0;
    }
    x->name = arena_alloc(x->a, (nn ? nn : 1) * sizeof(*x->name));
    x->val = arena_alloc(x->a, (nv ? nv : 1) * sizeof(*x->val));
    x->post = arena_alloc(x->a, (nt ? nt : 1) * sizeof(*x->post));
    if (x->name == NULL || x->val == NULL || x->post == NULL) {
        return -ENOMEM;
    }
    x->nname = 0;
    uint32_t v = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct pm_label *l = t[i].l, *p = i > 0 ? t[i - 1].l : NULL;
        bool new_name = p == NULL || str_cmp(p->name, p->name_len, l->name, l->name_len) != 0;
        if (new_name) {
            x->name[x->nname++] = (struct pmx_name){l->name, l->name_len, v, 0};
        }
        if (new_name || str_cmp(p->value, p->value_len, l->value, l->value_len) != 0) {
            x->val[v++] = (struct pmx_val){l->value, l->value_len, (uint32_t)i, 0};
            x->name[x->nname - 1].nval++;
        }
        x->val[v - 1].npost++;
        x->post[i] = t[i].ser;
    }
    return 0;
}

static bool ref_present(const struct pmx *x, const struct pmx_ref *r, uint64_t lo, uint64_t hi)
{
    uint32_t a = 0, b = r->n;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (x->time[r->rows[mid]] < lo) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    return a < r->n && x->time[r->rows[a]] < hi;
}

bool pmx_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns)
{
    const struct pmx_series *s = &x->ser[i];
    bool all = x->tmin >= lo_ns && x->tmax < hi_ns;
    for (uint32_t k = 0; k < s->nref; k++) {
        if (all || ref_present(x, &x->ref[s->ref0 + k], lo_ns, hi_ns)) {
            return true;
        }
    }
    return false;
}

bool pmx_val_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns)
{
    const struct pmx_val *v = &x->val[i];
    for (uint32_t k = 0; k < v->npost; k++) {
        if (pmx_present(x, x->post[v->post0 + k], lo_ns, hi_ns)) {
            return true;
        }
    }
    return false;
}

bool pmx_name_present(const struct pmx *x, uint32_t i, uint64_t lo_ns, uint64_t hi_ns)
{
    const struct pmx_name *nm = &x->name[i];
    for (uint32_t k = 0; k < nm->nval; k++) {
        if (pmx_val_present(x, nm->val0 + k, lo_ns, hi_ns)) {
            return true;
        }
    }
    return false;
}

int64_t pmx_find_name(const struct pmx *x, const char *p, size_t n)
{
    uint32_t a = 0, b = x->nname;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        int c = str_cmp(x->name[mid].s, x->name[mid].n, p, (uint32_t)n);
        if (c == 0) {
            return mid;
        }
        if (c < 0) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    return -1;
}

#define EXCLUDED UINT16_MAX

/*
 * A matcher that does not admit "" needs its label with an admitted value:
 * each series in the postings of such a value gets a count, and a series
 * is in when its count is the number of those matchers. A matcher that
 * admits "" excludes the series in the postings of the values it refuses.
 */
int64_t pmx_match(const struct pmx *x, const struct promql_matcher *m, size_t n, arena *tmp,
                  uint32_t **out)
{
    uint32_t *v = arena_alloc(tmp, (x->nser ? x->nser : 1) * sizeof(*v));
    uint16_t *cnt = n > 0 ? arena_alloc(tmp, (x->nser ? x->nser : 1) * sizeof(*cnt)) : NULL;
    if (v == NULL || (n > 0 && cnt == NULL) || n >= EXCLUDED) {
        return -ENOMEM;
    }
    *out = v;
    if (n == 0) {
        for (uint32_t i = 0; i < x->nser; i++) {
            v[i] = i;
        }
        return x->nser;
    }
    memset(cnt, 0, (x->nser ? x->nser : 1) * sizeof(*cnt));
    uint16_t npos = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t ni = pmx_find_name(x, m[i].name.s, m[i].name.n);
        bool empty_ok = promql_matcher_matches(&m[i], "", 0);
        if (!empty_ok) {
            npos++;
            if (ni < 0) {
                return 0;
            }
        }
        if (ni < 0) {
            continue;
        }
        const struct pmx_name *nm = &x->name[ni];
        for (uint32_t k = 0; k < nm->nval; k++) {
            const struct pmx_val *val = &x->val[nm->val0 + k];
            bool ok = promql_matcher_matches(&m[i], val->s, val->n);
            if (ok == empty_ok) {
                continue; /* admitted where "" is too, or refused where "" is: no change */
            }
            const uint32_t *p = x->post + val->post0;
            for (uint32_t j = 0; j < val->npost; j++) {
                if (!ok) {
                    cnt[p[j]] = EXCLUDED;
                } else if (cnt[p[j]] != EXCLUDED) {
                    cnt[p[j]]++;
                }
            }
        }
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < x->nser; i++) {
        if (cnt[i] == npos) {
            v[k++] = i;
        }
    }
    return k;
}
