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
 *   The distinct (name, value) pairs are found by hashing, sorted (few:
 *   values repeat across series), numbered in that order and stored once;
 *   a series' labels are its value ids, and each value's postings list its
 *   series in ascending order (filled in series order).
 *
 * MATCHING
 *   Per matcher, each distinct value of its label is tested once; the
 *   postings of the admitted values count towards the series (a matcher
 *   that refuses "" must be met), those of refused values exclude them (a
 *   matcher that admits ""), so a regex never runs per series.
 *
 * MEMORY
 *   The cache is an eighth of the memory budget (1 GiB without one),
 *   charged with adm_try_charge; an index that does not fit is not kept
 *   and that block is read row by row. On the bench data (14 blocks, 11,200
 *   series each) the indexes hold 17.7 MB.
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

#define XXH_INLINE_ALL
#include <xxhash.h>

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

/* What the builds so far held per stream (or per row of a block without a
 * stream section), to guess an index's size before building it. */
static _Atomic uint64_t built_bytes, built_units;

static uint64_t units_of(const blk *b)
{
    uint32_t n = blk_n_streams(b);
    return n > 0 ? n : blk_rows(b);
}

void pmx_note_built(const blk *b, size_t bytes)
{
    atomic_fetch_add(&built_bytes, bytes);
    atomic_fetch_add(&built_units, units_of(b));
}

size_t pmx_guess(const blk *b)
{
    uint64_t bb = atomic_load(&built_bytes), bu = atomic_load(&built_units);
    uint64_t per = bu > 0 ? bb / bu : 64;
    return (size_t)(units_of(b) * (per > 16 ? per : 16));
}

/* The most scratch per unit a dropped build proved a build needs. */
static _Atomic uint64_t scratch_per_unit;

void pmx_note_too_big(const blk *b, size_t allowed)
{
    uint64_t u = units_of(b), per = u > 0 ? allowed / u : 0;
    uint64_t cur = atomic_load(&scratch_per_unit);
    while (per > cur && !atomic_compare_exchange_weak(&scratch_per_unit, &cur, per)) {
    }
}

bool pmx_build_fits(const blk *b, size_t allowed)
{
    uint64_t per = atomic_load(&scratch_per_unit);
    /* only once the room is twice what a build was proven to need: a
     * query with a little more room than the one that failed would fail
     * again, its scratch thrown away */
    return allowed == 0 || per == 0 || 2 * units_of(b) * per <= allowed;
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

static int str_cmp(const char *a, uint32_t an, const char *b, uint32_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c != 0 ? c : (an > bn) - (an < bn);
}

/* A distinct (name, value) of the block while assembling. */
struct pair {
    const struct pm_label *l;
    uint64_t h;
    uint32_t count;
};

static int pair_cmp(const void *pa, const void *pb, void *ctx)
{
    const struct pair *v = ctx;
    const struct pm_label *a = v[*(const uint32_t *)pa].l, *b = v[*(const uint32_t *)pb].l;
    int c = str_cmp(a->name, a->name_len, b->name, b->name_len);
    return c != 0 ? c : str_cmp(a->value, a->value_len, b->value, b->value_len);
}

static uint64_t pair_hash(const struct pm_label *l)
{
    return XXH3_64bits_withSeed(l->value, l->value_len, XXH3_64bits(l->name, l->name_len));
}

static bool pair_eq(const struct pm_label *a, const struct pm_label *b)
{
    return a->name_len == b->name_len && a->value_len == b->value_len &&
           memcmp(a->name, b->name, a->name_len) == 0 &&
           memcmp(a->value, b->value, a->value_len) == 0;
}

/* The refs of one series from its pairs (copied rows in x->a). */
static int refs_of(struct pmx *x, blk *b, const struct pms_series *s, uint32_t *nref)
{
    uint32_t k = 0;
    while (k < s->npx) {
        uint32_t st = s->px[k].stream, j = k;
        bool whole = false;
        while (j < s->npx && s->px[j].stream == st) {
            whole = whole || s->px[j].row == PMS_WHOLE;
            j++;
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

/* The distinct (name, value) pairs of the series' labels: their ids in
 * first-seen order into |tp| (one per label, in series order); -ENOMEM. */
static int64_t pairs_of(const struct pms_series *s, uint32_t n, size_t nlab, arena *tmp,
                        uint32_t *tp, struct pair **out)
{
    size_t cap = 64;
    while (cap < 2 * nlab) {
        cap *= 2;
    }
    uint32_t *tab = arena_alloc(tmp, cap * sizeof(*tab));
    struct pair *v = arena_alloc(tmp, (nlab ? nlab : 1) * sizeof(*v));
    if (tab == NULL || v == NULL) {
        return -ENOMEM;
    }
    memset(tab, 0, cap * sizeof(*tab));
    uint32_t np = 0;
    size_t t = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < s[i].labels.n; k++, t++) {
            const struct pm_label *l = &s[i].labels.v[k];
            uint64_t h = pair_hash(l);
            size_t j = h & (cap - 1);
            while (tab[j] != 0 && (v[tab[j] - 1].h != h || !pair_eq(v[tab[j] - 1].l, l))) {
                j = (j + 1) & (cap - 1);
            }
            if (tab[j] == 0) {
                v[np] = (struct pair){l, h, 0};
                tab[j] = ++np;
            }
            tp[t] = tab[j] - 1;
            v[tp[t]].count++;
        }
    }
    *out = v;
    return np;
}

/*
 * The index keeps each distinct name and value once (in its own arena, the
 * run's labels are left behind): a series' labels are the ids of its
 * values, ascending, which is the order of their names (values are
 * numbered in (name, value) order). Postings fill in series order, so each
 * value's series ascend.
 */
int pmx_assemble(struct pmx *x, blk *b, const struct pms_series *s, uint32_t n, arena *tmp)
{
    size_t npairs = 0, nlab = 0;
    for (uint32_t i = 0; i < n; i++) {
        npairs += s[i].npx;
        nlab += s[i].labels.n;
    }
    if (nlab >= UINT32_MAX || npairs >= UINT32_MAX) {
        return -ENOMEM;
    }
    x->ser = arena_alloc(x->a, (n ? n : 1) * sizeof(*x->ser));
    x->ref = arena_alloc(x->a, (npairs ? npairs : 1) * sizeof(*x->ref));
    x->lab = arena_alloc(x->a, (nlab ? nlab : 1) * sizeof(*x->lab));
    x->post = arena_alloc(x->a, (nlab ? nlab : 1) * sizeof(*x->post));
    uint32_t *tp = arena_alloc(tmp, (nlab ? nlab : 1) * sizeof(*tp));
    if (x->ser == NULL || x->ref == NULL || x->lab == NULL || x->post == NULL || tp == NULL) {
        return -ENOMEM;
    }
    x->nser = n;
    x->nref = 0;
    uint32_t nt = 0;
    for (uint32_t i = 0; i < n; i++) {
        x->ser[i] = (struct pmx_series){
            .hash = s[i].hash, .ref0 = x->nref, .lab0 = nt, .nlab = s[i].labels.n};
        if (refs_of(x, b, &s[i], &x->nref) < 0) {
            return -ENOMEM;
        }
        x->ser[i].nref = x->nref - x->ser[i].ref0;
        nt += s[i].labels.n;
    }
    struct pair *pv;
    int64_t np = pairs_of(s, n, nlab, tmp, tp, &pv);
    uint32_t *order = np >= 0 ? arena_alloc(tmp, (np ? np : 1) * sizeof(*order)) : NULL;
    uint32_t *rank = np >= 0 ? arena_alloc(tmp, (np ? np : 1) * sizeof(*rank)) : NULL;
    x->val = np >= 0 ? arena_alloc(x->a, (np ? np : 1) * sizeof(*x->val)) : NULL;
    x->name = np >= 0 ? arena_alloc(x->a, (np ? np : 1) * sizeof(*x->name)) : NULL;
    if (order == NULL || rank == NULL || x->val == NULL || x->name == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < np; i++) {
        order[i] = i;
    }
    qsort_r(order, (size_t)np, sizeof(*order), pair_cmp, pv);
    x->nname = 0;
    uint32_t off = 0;
    for (uint32_t v = 0; v < np; v++) {
        const struct pair *p = &pv[order[v]];
        const struct pm_label *l = p->l;
        const struct pmx_name *last = x->nname > 0 ? &x->name[x->nname - 1] : NULL;
        if (last == NULL || str_cmp(last->s, last->n, l->name, l->name_len) != 0) {
            char *c = arena_strndup(x->a, l->name, l->name_len);
            if (c == NULL) {
                return -ENOMEM;
            }
            x->name[x->nname++] = (struct pmx_name){c, l->name_len, v, 0};
        }
        char *c = arena_strndup(x->a, l->value, l->value_len);
        if (c == NULL) {
            return -ENOMEM;
        }
        x->val[v] = (struct pmx_val){c, l->value_len, off, 0, x->nname - 1};
        x->name[x->nname - 1].nval++;
        rank[order[v]] = v;
        off += p->count;
    }
    x->ti_val = UINT32_MAX;
    int64_t ni = pmx_find_name(x, "__name__", 8);
    for (uint32_t k = 0; ni >= 0 && k < x->name[ni].nval; k++) {
        const struct pmx_val *val = &x->val[x->name[ni].val0 + k];
        if (val->n == 11 && memcmp(val->s, "target_info", 11) == 0) {
            x->ti_val = x->name[ni].val0 + k;
        }
    }
    for (uint32_t t = 0, i = 0; i < n; i++) {
        for (uint32_t k = 0; k < s[i].labels.n; k++, t++) {
            struct pmx_val *val = &x->val[rank[tp[t]]];
            x->post[val->post0 + val->npost++] = i;
            x->lab[t] = rank[tp[t]];
        }
    }
    return 0;
}

int pmx_labels(const struct pmx *x, uint32_t i, arena *a, struct pm_labels *out)
{
    const struct pmx_series *s = &x->ser[i];
    struct pm_label *v = arena_alloc(a, (s->nlab ? s->nlab : 1) * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (uint32_t k = 0; k < s->nlab; k++) {
        const struct pmx_val *val = &x->val[x->lab[s->lab0 + k]];
        const struct pmx_name *nm = &x->name[val->name];
        v[k] = (struct pm_label){nm->s, val->s, nm->n, val->n};
    }
    out->v = v;
    out->n = s->nlab;
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
