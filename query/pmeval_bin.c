/*
 * pmeval_bin.c - one step of a PromQL binary operator, as Prometheus
 * 2.42's engine does it: scalarBinop, VectorscalarBinop, VectorBinop with
 * on / ignoring / group_left / group_right (resultMetric) and its three
 * errors, VectorAnd / VectorOr / VectorUnless. Signatures and result
 * label sets are compared by 64-bit hash, as Prometheus's maps do.
 *
 * Arithmetic follows Go's math package: % is math.Mod (C fmod has the
 * same definition and special cases), ^ is math.Pow's algorithm (Go 1.19,
 * what 2.42 was built with: repeated squaring of the mantissa for the
 * integer part of the exponent, exp(f * log x) for the fraction; libm's
 * exp/log there may differ from Go's amd64 assembly in the last bit),
 * atan2 is math.Atan2 with Go's Cephes-derived atan.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/pmeval_eng.h"

/* ---- Go's math.Pow and math.Atan2 ---------------------------------------- */

static bool is_odd_int(double x)
{
    if (fabs(x) >= 9007199254740992.0) {
        return false; /* past 2^53 every float64 is an even integer (and int64 may not hold it) */
    }
    double xi;
    double xf = modf(x, &xi);
    return xf == 0 && ((int64_t)xi & 1) == 1;
}

static double go_pow(double x, double y)
{
    if (y == 0 || x == 1) {
        return 1;
    }
    if (isnan(x) || isnan(y)) {
        return NAN;
    }
    if (x == 0) {
        if (y < 0) {
            return is_odd_int(y) ? copysign(INFINITY, x) : INFINITY;
        }
        if (y > 0) {
            return is_odd_int(y) ? x : 0;
        }
    }
    if (isinf(y)) {
        if (x == -1) {
            return 1;
        }
        if ((fabs(x) < 1) == (y > 0)) {
            return 0;
        }
        return INFINITY;
    }
    if (isinf(x)) {
        if (x < 0) {
            return go_pow(1 / x, -y);
        }
        if (y < 0) {
            return 0;
        }
        if (y > 0) {
            return INFINITY;
        }
    }
    if (y == 0.5) {
        return sqrt(x);
    }
    if (y == -0.5) {
        return 1 / sqrt(x);
    }
    double yi;
    double yf = modf(fabs(y), &yi);
    if (yf != 0 && x < 0) {
        return NAN;
    }
    if (yi >= 9223372036854775808.0) {
        if (x == -1) {
            return 1;
        }
        if ((fabs(x) < 1) == (y > 0)) {
            return 0;
        }
        return INFINITY;
    }
    double a1 = 1.0;
    long ae = 0;
    if (yf != 0) {
        if (yf > 0.5) {
            yf--;
            yi++;
        }
        a1 = exp(yf * log(x));
    }
    int xe_i;
    double x1 = frexp(x, &xe_i);
    long xe = xe_i;
    for (int64_t i = (int64_t)yi; i != 0; i >>= 1) {
        if (xe < -(1L << 12) || (1L << 12) < xe) {
            ae += xe;
            break;
        }
        if ((i & 1) == 1) {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe *= 2; /* Go shifts; a negative left shift is undefined in C */
        if (x1 < .5) {
            x1 += x1;
            xe--;
        }
    }
    if (y < 0) {
        a1 = 1 / a1;
        ae = -ae;
    }
    if (ae > 100000) {
        ae = 100000;
    } else if (ae < -100000) {
        ae = -100000;
    }
    return ldexp(a1, (int)ae);
}

#define GO_PI 3.14159265358979323846264338327950288419716939937510582097494459
#define GO_PI_2 1.57079632679489661923132169163975144209858469968755291048747230
#define GO_PI_4 0.785398163397448309615660845819875721049292349843776455243736148
#define GO_3PI_4 2.35619449019234492884698253745962716314787704953132936573120844

static double xatan(double x)
{
    static const double P0 = -8.750608600031904122785e-01, P1 = -1.615753718733365076637e+01,
                        P2 = -7.500855792314704667340e+01, P3 = -1.228866684490136173410e+02,
                        P4 = -6.485021904942025371773e+01, Q0 = +2.485846490142306297962e+01,
                        Q1 = +1.650270098316988542046e+02, Q2 = +4.328810604912902668951e+02,
                        Q3 = +4.853903996359136964868e+02, Q4 = +1.945506571482613964425e+02;
    double z = x * x;
    z = z * ((((P0 * z + P1) * z + P2) * z + P3) * z + P4) /
        (((((z + Q0) * z + Q1) * z + Q2) * z + Q3) * z + Q4);
    z = x * z + x;
    return z;
}

static double satan(double x)
{
    static const double morebits = 6.123233995736765886130e-17;
    static const double tan3pio8 = 2.41421356237309504880;
    if (x <= 0.66) {
        return xatan(x);
    }
    if (x > tan3pio8) {
        return GO_PI_2 - xatan(1 / x) + morebits;
    }
    return GO_PI_4 + xatan((x - 1) / (x + 1)) + 0.5 * morebits;
}

static double go_atan(double x)
{
    if (x == 0) {
        return x;
    }
    return x > 0 ? satan(x) : -satan(-x);
}

static double go_atan2(double y, double x)
{
    if (isnan(y) || isnan(x)) {
        return NAN;
    }
    if (y == 0) {
        if (x >= 0 && !signbit(x)) {
            return copysign(0, y);
        }
        return copysign(GO_PI, y);
    }
    if (x == 0) {
        return copysign(GO_PI_2, y);
    }
    if (isinf(x)) {
        if (x > 0) {
            return isinf(y) ? copysign(GO_PI_4, y) : copysign(0, y);
        }
        return isinf(y) ? copysign(GO_3PI_4, y) : copysign(GO_PI, y);
    }
    if (isinf(y)) {
        return copysign(GO_PI_2, y);
    }
    double q = go_atan(y / x);
    if (x < 0) {
        return q <= 0 ? q + GO_PI : q - GO_PI;
    }
    return q;
}

/* ---- operators --------------------------------------------------------------- */

static double btos(bool b)
{
    return b ? 1 : 0;
}

double pe_bin_ss(enum promql_binop op, double l, double r)
{
    switch (op) {
    case PROMQL_OP_ADD:
        return l + r;
    case PROMQL_OP_SUB:
        return l - r;
    case PROMQL_OP_MUL:
        return l * r;
    case PROMQL_OP_DIV:
        return l / r;
    case PROMQL_OP_POW:
        return go_pow(l, r);
    case PROMQL_OP_MOD:
        return fmod(l, r);
    case PROMQL_OP_EQLC:
        return btos(l == r);
    case PROMQL_OP_NEQ:
        return btos(l != r);
    case PROMQL_OP_GTR:
        return btos(l > r);
    case PROMQL_OP_LSS:
        return btos(l < r);
    case PROMQL_OP_GTE:
        return btos(l >= r);
    case PROMQL_OP_LTE:
        return btos(l <= r);
    case PROMQL_OP_ATAN2:
        return go_atan2(l, r);
    default:
        return NAN;
    }
}

/* vectorElemBinop: value, histogram, keep. */
static double elem_binop(arena *a, enum promql_binop op, double l, double r,
                         const struct pm_hist *hl, const struct pm_hist *hr,
                         const struct pm_hist **ho, bool *keep, bool *oom)
{
    *ho = NULL;
    *keep = true;
    switch (op) {
    case PROMQL_OP_ADD:
        if (hl != NULL && hr != NULL) {
            const struct pm_hist *s = hr->schema >= hl->schema ? hl : hr;
            const struct pm_hist *t = s == hl ? hr : hl;
            *ho = pm_hist_add(a, s, t);
            *oom = *ho == NULL;
            return 0;
        }
        return l + r;
    case PROMQL_OP_EQLC:
        *keep = l == r;
        return l;
    case PROMQL_OP_NEQ:
        *keep = l != r;
        return l;
    case PROMQL_OP_GTR:
        *keep = l > r;
        return l;
    case PROMQL_OP_LSS:
        *keep = l < r;
        return l;
    case PROMQL_OP_GTE:
        *keep = l >= r;
        return l;
    case PROMQL_OP_LTE:
        *keep = l <= r;
        return l;
    default:
        return pe_bin_ss(op, l, r);
    }
}

static bool drops_name(enum promql_binop op)
{
    switch (op) {
    case PROMQL_OP_ADD:
    case PROMQL_OP_SUB:
    case PROMQL_OP_DIV:
    case PROMQL_OP_MUL:
    case PROMQL_OP_POW:
    case PROMQL_OP_MOD:
        return true;
    default:
        return false;
    }
}

static int oom(struct pe_shared *sh)
{
    return pe_fail(sh, -ENOMEM, "out of memory");
}

int pe_bin_vs(struct pe_ev *ev, struct pe_bin *b, const struct pm_vec *v, const uint32_t *vi,
              double s, bool swap, struct pm_vec *out)
{
    arena *a = ev->sh->a;
    const struct promql_expr *e = b->e;
    struct pe_cache *dc = &b->drop[swap ? 1 : 0];
    bool cmp = promql_op_is_comparison(e->op);
    for (size_t i = 0; i < v->n; i++) {
        struct pm_velem el = v->e[i];
        double lv = el.h != NULL ? 0 : el.v, rv = s;
        if (swap) {
            double t = lv;
            lv = rv;
            rv = t;
        }
        const struct pm_hist *ho;
        bool keep, nomem = false;
        double value = elem_binop(a, e->op, lv, rv, NULL, NULL, &ho, &keep, &nomem);
        if (cmp && swap) {
            value = rv;
        }
        if (e->return_bool) {
            value = keep ? 1.0 : 0.0;
            keep = true;
        }
        if (!keep) {
            continue;
        }
        el.v = value;
        if (drops_name(e->op) || e->return_bool) {
            /* once per series, not per step */
            if (pe_cache_room(a, dc, vi[i]) != 0) {
                return oom(ev->sh);
            }
            if (!dc->set[vi[i]]) {
                if (pm_labels_drop_name(a, &el.labels, &dc->l[vi[i]]) != 0) {
                    return oom(ev->sh);
                }
                dc->set[vi[i]] = 1;
            }
            el.labels = dc->l[vi[i]];
        }
        if (pm_vec_push(a, out, &el) != 0) {
            return oom(ev->sh);
        }
    }
    return 0;
}

int pe_bin_init(struct pe_ev *ev, struct pe_bin *b, const struct promql_expr *e)
{
    arena *a = ev->sh->a;
    memset(b, 0, sizeof *b);
    b->e = e;
    const struct promql_vm *vm = e->vm;
    size_t n = vm != NULL ? vm->n_labels : 0;
    if (n != 0) {
        b->names = (const char **)arena_alloc(a, n * sizeof *b->names);
        b->lens = (uint32_t *)arena_alloc(a, n * sizeof *b->lens);
        if (b->names == NULL || b->lens == NULL) {
            return oom(ev->sh);
        }
        for (size_t i = 0; i < n; i++) {
            b->names[i] = vm->labels[i].s;
            b->lens[i] = (uint32_t)vm->labels[i].n;
        }
    }
    b->n_names = n;
    /* group_x(include) names are copied: result labels outlive the AST */
    size_t ni = vm != NULL ? vm->n_include : 0;
    if (ni != 0) {
        b->inc = (struct promql_str *)arena_alloc(a, ni * sizeof *b->inc);
        if (b->inc == NULL) {
            return oom(ev->sh);
        }
        for (size_t i = 0; i < ni; i++) {
            b->inc[i].n = vm->include[i].n;
            b->inc[i].s = arena_strndup(a, vm->include[i].s, vm->include[i].n);
            if (b->inc[i].s == NULL) {
                return oom(ev->sh);
            }
        }
    }
    if (pe_hmap_init(a, &b->sigs, 16) != 0 || pe_hmap_init(a, &b->matched, 16) != 0 ||
        pe_hmap_init(a, &b->pairs, 16) != 0) {
        return oom(ev->sh);
    }
    return 0;
}

static uint64_t signature(const struct pe_bin *b, const struct pm_labels *ls)
{
    bool on = b->e->vm != NULL && b->e->vm->on;
    return pm_labels_hash_on(ls, on, b->names, b->lens, b->n_names, !on);
}

static int sigs_of(arena *a, struct pe_bin *b, int side, const struct pm_vec *v,
                   const uint32_t *idx, uint64_t **buf, size_t *cap)
{
    if (v->n > *cap) {
        size_t n = *cap != 0 ? *cap : 16;
        while (n < v->n) {
            n *= 2;
        }
        uint64_t *p = (uint64_t *)arena_alloc(a, n * sizeof *p);
        if (p == NULL) {
            return -ENOMEM;
        }
        *buf = p;
        *cap = n;
    }
    struct pe_cache *c = &b->sig[side];
    for (size_t i = 0; i < v->n; i++) {
        if (pe_cache_room(a, c, idx[i]) != 0) {
            return -ENOMEM;
        }
        if (!c->set[idx[i]]) {
            c->v[idx[i]] = signature(b, &v->e[i].labels);
            c->set[idx[i]] = 1;
        }
        (*buf)[i] = c->v[idx[i]];
    }
    return 0;
}

static int push(struct pe_shared *sh, struct pm_vec *out, const struct pm_velem *e)
{
    return pm_vec_push(sh->a, out, e) != 0 ? oom(sh) : 0;
}

static int set_op(struct pe_ev *ev, struct pe_bin *b, const struct pm_vec *l,
                  const struct pm_vec *r, const uint32_t *li, const uint32_t *ri,
                  struct pm_vec *out)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    enum promql_binop op = b->e->op;
    int rc;
    if (op == PROMQL_OP_AND && (l->n == 0 || r->n == 0)) {
        return 0;
    }
    if (op == PROMQL_OP_OR && (l->n == 0 || r->n == 0)) {
        const struct pm_vec *all = l->n == 0 ? r : l;
        for (size_t i = 0; i < all->n; i++) {
            if ((rc = push(sh, out, &all->e[i])) != 0) {
                return rc;
            }
        }
        return 0;
    }
    if (op == PROMQL_OP_UNLESS && (l->n == 0 || r->n == 0)) {
        for (size_t i = 0; i < l->n; i++) {
            if ((rc = push(sh, out, &l->e[i])) != 0) {
                return rc;
            }
        }
        return 0;
    }
    if (sigs_of(a, b, 0, l, li, &b->lh, &b->lh_cap) != 0 ||
        sigs_of(a, b, 1, r, ri, &b->rh, &b->rh_cap) != 0) {
        return oom(sh);
    }
    pe_hmap_clear(&b->sigs);
    if (op == PROMQL_OP_OR) {
        for (size_t i = 0; i < l->n; i++) {
            if (pe_hmap_put(a, &b->sigs, b->lh[i], 0) != 0) {
                return oom(sh);
            }
            if ((rc = push(sh, out, &l->e[i])) != 0) {
                return rc;
            }
        }
        for (size_t j = 0; j < r->n; j++) {
            if (pe_hmap_get(&b->sigs, b->rh[j]) < 0 && (rc = push(sh, out, &r->e[j])) != 0) {
                return rc;
            }
        }
        return 0;
    }
    for (size_t j = 0; j < r->n; j++) {
        if (pe_hmap_put(a, &b->sigs, b->rh[j], 0) != 0) {
            return oom(sh);
        }
    }
    bool want = op == PROMQL_OP_AND;
    for (size_t i = 0; i < l->n; i++) {
        if ((pe_hmap_get(&b->sigs, b->lh[i]) >= 0) == want && (rc = push(sh, out, &l->e[i])) != 0) {
            return rc;
        }
    }
    return 0;
}

/* labels.MatchLabels(on, names...): what the match group prints as. */
static int match_labels(struct pe_shared *sh, const struct pe_bin *b, const struct pm_labels *ls,
                        struct pm_labels *out)
{
    struct pm_lb lb;
    bool on = b->e->vm->on;
    pm_lb_init(&lb, sh->a, ls);
    pm_lb_keep(&lb, on, b->names, b->lens, b->n_names, !on);
    return pm_lb_done(&lb, out);
}

static int dup_error(struct pe_shared *sh, const struct pe_bin *b, const struct pm_labels *rs,
                     const struct pm_labels *dupl)
{
    struct pm_labels ml;
    if (match_labels(sh, b, rs, &ml) != 0) {
        return oom(sh);
    }
    char *m = pe_fmt_labels(sh->a, &ml), *x = pe_fmt_labels(sh->a, rs),
         *y = pe_fmt_labels(sh->a, dupl);
    if (m == NULL || x == NULL || y == NULL) {
        return oom(sh);
    }
    const char *side = b->e->vm->card == PROMQL_CARD_ONE_TO_MANY ? "left" : "right";
    return pe_fail(sh, -EDOM,
                   "found duplicate series for the match group %s on the %s hand-side of the "
                   "operation: [%s, %s];many-to-many matching not allowed: matching labels must be "
                   "unique on one side",
                   m, side, x, y);
}

/* resultMetric */
static int result_metric(struct pe_shared *sh, const struct pe_bin *b, const struct pm_labels *ls,
                         const struct pm_labels *rs, struct pm_labels *out)
{
    const struct promql_vm *vm = b->e->vm;
    struct pm_lb lb;
    pm_lb_init(&lb, sh->a, ls);
    if (drops_name(b->e->op)) {
        pm_lb_del(&lb, "__name__", 8);
    }
    if (vm->card == PROMQL_CARD_ONE_TO_ONE) {
        pm_lb_keep(&lb, vm->on, b->names, b->lens, b->n_names, false);
    }
    for (size_t i = 0; i < vm->n_include; i++) {
        uint32_t n;
        const struct promql_str *in = &b->inc[i];
        const char *v = pm_labels_get(rs, in->s, in->n, &n);
        if (v != NULL && n != 0) {
            pm_lb_set(&lb, in->s, in->n, v, n);
        } else {
            pm_lb_del(&lb, in->s, in->n);
        }
    }
    if (b->e->return_bool) {
        pm_lb_del(&lb, "__name__", 8);
    }
    return pm_lb_done(&lb, out);
}

/* resultMetric through its cache (Prometheus keys it by both label sets). */
static int cached_result_metric(struct pe_shared *sh, struct pe_bin *b, uint64_t k,
                                const struct pm_labels *ls, const struct pm_labels *rs,
                                struct pm_labels *out)
{
    int32_t i = pe_hmap_get(&b->rmcache, k);
    if (i >= 0) {
        *out = b->rm[i];
        return 0;
    }
    if (result_metric(sh, b, ls, rs, out) != 0) {
        return -ENOMEM;
    }
    if (b->rm_n == b->rm_cap) {
        size_t cap = b->rm_cap != 0 ? 2 * b->rm_cap : 16;
        struct pm_labels *n = (struct pm_labels *)arena_alloc(sh->a, cap * sizeof *n);
        if (n == NULL) {
            return -ENOMEM;
        }
        if (b->rm_n != 0) {
            memcpy(n, b->rm, b->rm_n * sizeof *n);
        }
        b->rm = n;
        b->rm_cap = cap;
    }
    b->rm[b->rm_n] = *out;
    if (pe_hmap_put(sh->a, &b->rmcache, k, (int32_t)b->rm_n) != 0) {
        return -ENOMEM;
    }
    b->rm_n++;
    return 0;
}

int pe_bin_vv(struct pe_ev *ev, struct pe_bin *b, const struct pm_vec *l, const struct pm_vec *r,
              const uint32_t *li, const uint32_t *ri, struct pm_vec *out)
{
    struct pe_shared *sh = ev->sh;
    arena *a = sh->a;
    const struct promql_expr *e = b->e;
    const struct promql_vm *vm = e->vm;
    if (promql_op_is_set(e->op)) {
        return set_op(ev, b, l, r, li, ri, out);
    }
    if (l->n == 0 || r->n == 0) {
        return 0;
    }
    bool swapped = vm->card == PROMQL_CARD_ONE_TO_MANY;
    int lside = 0, rside = 1;
    if (swapped) {
        const struct pm_vec *t = l;
        l = r;
        r = t;
        const uint32_t *ti = li;
        li = ri;
        ri = ti;
        lside = 1;
        rside = 0;
    }
    if (sigs_of(a, b, lside, l, li, &b->lh, &b->lh_cap) != 0 ||
        sigs_of(a, b, rside, r, ri, &b->rh, &b->rh_cap) != 0) {
        return oom(sh);
    }
    pe_hmap_clear(&b->sigs);
    for (size_t j = 0; j < r->n; j++) {
        int32_t d = pe_hmap_get(&b->sigs, b->rh[j]);
        if (d >= 0) {
            return dup_error(sh, b, &r->e[j].labels, &r->e[d].labels);
        }
        if (pe_hmap_put(a, &b->sigs, b->rh[j], (int32_t)j) != 0) {
            return oom(sh);
        }
    }
    pe_hmap_clear(&b->matched);
    pe_hmap_clear(&b->pairs);
    for (size_t i = 0; i < l->n; i++) {
        uint64_t sig = b->lh[i];
        int32_t j = pe_hmap_get(&b->sigs, sig);
        if (j < 0) {
            continue;
        }
        const struct pm_velem *ls = &l->e[i], *rs = &r->e[j];
        double vl = ls->h != NULL ? 0 : ls->v, vr = rs->h != NULL ? 0 : rs->v;
        const struct pm_hist *hl = ls->h, *hr = rs->h;
        if (swapped) {
            double t = vl;
            vl = vr;
            vr = t;
            const struct pm_hist *th = hl;
            hl = hr;
            hr = th;
        }
        const struct pm_hist *ho;
        bool keep, nomem = false;
        double value = elem_binop(a, e->op, vl, vr, hl, hr, &ho, &keep, &nomem);
        if (nomem) {
            return oom(sh);
        }
        if (e->return_bool) {
            value = keep ? 1.0 : 0.0;
        } else if (!keep) {
            continue;
        }
        struct pm_velem el = {.v = value, .h = ho, .t = ls->t};
        /* the pair of series, by their indices in the left and the right argument */
        uint64_t pair = swapped ? (uint64_t)ri[j] << 32 | li[i] : (uint64_t)li[i] << 32 | ri[j];
        if (cached_result_metric(sh, b, pair, &ls->labels, &rs->labels, &el.labels) != 0) {
            return oom(sh);
        }
        if (vm->card == PROMQL_CARD_ONE_TO_ONE) {
            if (pe_hmap_get(&b->matched, sig) >= 0) {
                return pe_fail(sh, -EDOM,
                               "multiple matches for labels: many-to-one matching must be explicit "
                               "(group_left/group_right)");
            }
            if (pe_hmap_put(a, &b->matched, sig, 0) != 0) {
                return oom(sh);
            }
        } else {
            uint64_t pk = sig * 0x9e3779b97f4a7c15ULL + pm_labels_hash(&el.labels);
            if (pe_hmap_get(&b->pairs, pk) >= 0) {
                return pe_fail(sh, -EDOM,
                               "multiple matches for labels: grouping labels must ensure unique "
                               "matches");
            }
            if (pe_hmap_put(a, &b->pairs, pk, 0) != 0) {
                return oom(sh);
            }
        }
        if ((hl != NULL) == (hr != NULL)) {
            if (pm_vec_push(a, out, &el) != 0) {
                return oom(sh);
            }
        }
    }
    return 0;
}
