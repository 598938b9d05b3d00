/*
 * traces_eval.c - TraceQL evaluation over one assembled trace: field
 * values, comparisons, structural operators, and the spansets of a
 * pipeline (see traces_int.h).
 */
#include "query/traces_int.h"

/* ---- TraceQL evaluation over one assembled trace -------------------------- */

static struct tv tv_int(enum traceql_type t, int64_t i)
{
    return (struct tv){.t = t, .i = i};
}

static struct tv tv_hex(struct ectx *e, const uint8_t *p, size_t n)
{
    char *b = e->hex[e->hexi++ & 3];
    hex_encode(b, p, n);
    return tv_str(b, 2 * n);
}

static bool is_num(enum traceql_type t)
{
    return t == TRACEQL_T_INT || t == TRACEQL_T_FLOAT || t == TRACEQL_T_DURATION;
}

static double num(const struct tv *v)
{
    return v->t == TRACEQL_T_FLOAT ? v->f : (double)v->i;
}

/* A stored scalar as a value; containers and bytes are not comparable. */
static struct tv tv_of_val(const struct val *v)
{
    switch (v->type) {
    case VAL_STR:
        return tv_str(v->s, v->n);
    case VAL_INT:
        return tv_int(TRACEQL_T_INT, v->i);
    case VAL_BOOL:
        return tv_int(TRACEQL_T_BOOL, v->b);
    case VAL_DOUBLE:
        return (struct tv){.t = TRACEQL_T_FLOAT, .f = v->d};
    default:
        return tv_nil;
    }
}

bool traces_attrs_find(const struct oattrs *a, const char *k, size_t kn, struct val *out)
{
    struct val_rd r = {a->p, a->p + a->len};
    for (uint32_t i = 0; i < a->count; i++) {
        const char *key;
        size_t n;
        if (val_rd_kv(&r, &key, &n, out) < 0) {
            return false;
        }
        if (n == kn && memcmp(key, k, n) == 0) {
            return true;
        }
    }
    return false;
}

static void visit_one(struct visit *vi, const struct tv *v)
{
    if (vi->stop || v->t == TRACEQL_T_NIL) {
        return;
    }
    vi->n++;
    if (!vi->fn(vi->ctx, v)) {
        vi->stop = true;
    }
}

static void visit_val(struct visit *vi, const struct val *v)
{
    if (v->type != VAL_ARRAY) {
        struct tv x = tv_of_val(v);
        visit_one(vi, &x);
        return;
    }
    struct val_rd r = v->inner;
    for (uint32_t i = 0; i < v->count && !vi->stop; i++) {
        struct val m;
        if (val_rd_value(&r, &m) < 0) {
            return;
        }
        struct tv x = tv_of_val(&m);
        visit_one(vi, &x);
    }
}

/* One attribute list: visits the key's value; true when present. */
bool traces_visit_attrs(struct visit *vi, const struct oattrs *a, const struct traceql_field *f)
{
    struct val v;
    if (!traces_attrs_find(a, f->name, f->name_len, &v)) {
        return false;
    }
    visit_val(vi, &v);
    return true;
}

static bool visit_events(struct visit *vi, const struct span_view *sv,
                         const struct traceql_field *f)
{
    struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
    bool any = false;
    for (uint32_t i = 0; i < sv->n_events && !vi->stop; i++) {
        uint64_t t;
        const char *name;
        size_t nn;
        struct oattrs at;
        if (otlpenc_event_next(&r, &t, &name, &nn, &at) < 0) {
            break;
        }
        any |= traces_visit_attrs(vi, &at, f);
    }
    return any;
}

static bool visit_links(struct visit *vi, const struct span_view *sv, const struct traceql_field *f)
{
    struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
    bool any = false;
    for (uint32_t i = 0; i < sv->n_links && !vi->stop; i++) {
        const uint8_t *tid, *sid;
        struct oattrs at;
        if (otlpenc_link_next(&r, &tid, &sid, &at) < 0) {
            break;
        }
        any |= traces_visit_attrs(vi, &at, f);
    }
    return any;
}

/* Values of a multi-valued leaf (is_multi) on span |sp|. */
size_t traces_leaf_each(struct ectx *e, const struct traceql_field *f, const struct espan *sp,
                        tv_fn fn, void *ctx)
{
    struct visit vi = {.fn = fn, .ctx = ctx};
    const struct span_view *sv = &sp->v;
    if (f->kind == TRACEQL_F_ATTR) {
        switch (f->scope) {
        case TRACEQL_SCOPE_SPAN:
            traces_visit_attrs(&vi, &sv->attrs, f);
            break;
        case TRACEQL_SCOPE_RESOURCE:
            traces_visit_attrs(&vi, &sv->resource->attrs, f);
            break;
        case TRACEQL_SCOPE_EVENT:
            visit_events(&vi, sv, f);
            break;
        case TRACEQL_SCOPE_LINK:
            visit_links(&vi, sv, f);
            break;
        case TRACEQL_SCOPE_INSTRUMENTATION:
            traces_visit_attrs(&vi, &sv->scope->attrs, f);
            break;
        case TRACEQL_SCOPE_ANY:
            /* span, then resource, event, link, instrumentation: first hit wins */
            if (!traces_visit_attrs(&vi, &sv->attrs, f) &&
                !traces_visit_attrs(&vi, &sv->resource->attrs, f) && !visit_events(&vi, sv, f) &&
                !visit_links(&vi, sv, f)) {
                traces_visit_attrs(&vi, &sv->scope->attrs, f);
            }
            break;
        }
        return vi.n;
    }
    if (f->intrinsic == TRACEQL_I_EVENT_NAME || f->intrinsic == TRACEQL_I_EVENT_TIME_SINCE_START) {
        struct val_rd r = {sv->events.p, sv->events.p + sv->events.len};
        for (uint32_t i = 0; i < sv->n_events && !vi.stop; i++) {
            uint64_t t;
            const char *name;
            size_t nn;
            struct oattrs at;
            if (otlpenc_event_next(&r, &t, &name, &nn, &at) < 0) {
                break;
            }
            struct tv x = f->intrinsic == TRACEQL_I_EVENT_NAME
                              ? tv_str(name, nn)
                              : tv_int(TRACEQL_T_DURATION, (int64_t)(t - sv->start_ns));
            visit_one(&vi, &x);
        }
    } else {
        struct val_rd r = {sv->links.p, sv->links.p + sv->links.len};
        for (uint32_t i = 0; i < sv->n_links && !vi.stop; i++) {
            const uint8_t *tid, *sid;
            struct oattrs at;
            if (otlpenc_link_next(&r, &tid, &sid, &at) < 0) {
                break;
            }
            struct tv x =
                f->intrinsic == TRACEQL_I_LINK_TRACE_ID ? tv_hex(e, tid, 16) : tv_hex(e, sid, 8);
            visit_one(&vi, &x);
        }
    }
    return vi.n;
}

static bool take_first(void *ctx, const struct tv *v)
{
    *(struct tv *)ctx = *v;
    return false;
}

static struct tv root_service(const struct etrace *tr)
{
    struct mstr m;
    if (tr->root < 0 || !service_name(tr->s[tr->root].v.resource, &m)) {
        return tv_nil;
    }
    return tv_str(m.p, m.len);
}

struct tv traces_intrinsic(struct ectx *e, enum traceql_intrinsic i, const struct espan *sp)
{
    const struct span_view *v = &sp->v;
    const struct etrace *tr = e->tr;
    switch (i) {
    case TRACEQL_I_NAME:
        return tv_str(v->name.p, v->name.len);
    case TRACEQL_I_STATUS:
        return tv_int(TRACEQL_T_STATUS, v->status_code);
    case TRACEQL_I_STATUS_MESSAGE:
        return tv_str(v->status_message.p, v->status_message.len);
    case TRACEQL_I_KIND:
        return tv_int(TRACEQL_T_KIND, v->kind);
    case TRACEQL_I_DURATION:
        return tv_int(TRACEQL_T_DURATION, (int64_t)(v->end_ns - v->start_ns));
    case TRACEQL_I_SPAN_ID:
        return tv_hex(e, v->span_id, 8);
    case TRACEQL_I_PARENT_ID:
        return v->has_parent ? tv_hex(e, v->parent_span_id, 8) : tv_nil;
    case TRACEQL_I_CHILD_COUNT:
        return tr->whole ? tv_int(TRACEQL_T_INT, sp->children) : tv_nil;
    case TRACEQL_I_NESTED_SET_LEFT:
        return tr->whole ? tv_int(TRACEQL_T_INT, sp->ns_left) : tv_nil;
    case TRACEQL_I_NESTED_SET_RIGHT:
        return tr->whole ? tv_int(TRACEQL_T_INT, sp->ns_right) : tv_nil;
    case TRACEQL_I_NESTED_SET_PARENT:
        return tr->whole ? tv_int(TRACEQL_T_INT, sp->ns_parent) : tv_nil;
    case TRACEQL_I_ROOT_NAME:
        if (!tr->whole || tr->root < 0) {
            return tv_nil;
        }
        return tv_str(tr->s[tr->root].v.name.p, tr->s[tr->root].v.name.len);
    case TRACEQL_I_ROOT_SERVICE:
        return tr->whole ? root_service(tr) : tv_nil;
    case TRACEQL_I_TRACE_DURATION:
        return tr->whole ? tv_int(TRACEQL_T_DURATION, (int64_t)(tr->end - tr->start)) : tv_nil;
    case TRACEQL_I_TRACE_ID:
        return tv_hex(e, v->trace_id, 16);
    case TRACEQL_I_INSTR_NAME:
        return tv_str(v->scope->name.p, v->scope->name.len);
    case TRACEQL_I_INSTR_VERSION:
        return tv_str(v->scope->version.p, v->scope->version.len);
    default: {
        struct tv x = tv_nil;
        struct traceql_field leaf = {.kind = TRACEQL_F_INTRINSIC, .intrinsic = i};
        traces_leaf_each(e, &leaf, sp, take_first, &x);
        return x;
    }
    }
}

static struct tv arith(enum traceql_op op, struct tv a, struct tv b)
{
    if (!is_num(a.t) || !is_num(b.t)) {
        return tv_nil;
    }
    enum traceql_type t = (a.t == TRACEQL_T_FLOAT || b.t == TRACEQL_T_FLOAT) ? TRACEQL_T_FLOAT
                          : (a.t == TRACEQL_T_DURATION || b.t == TRACEQL_T_DURATION)
                              ? TRACEQL_T_DURATION
                              : TRACEQL_T_INT;
    if (op == TRACEQL_OP_POW) {
        double r = 1, x = num(&a);
        double y = num(&b);
        /* integer exponents exactly; others through exp/log would need libm */
        if (y >= 0 && y == (double)(int64_t)y && y < 1024) {
            for (int64_t k = 0; k < (int64_t)y; k++) {
                r *= x;
            }
            return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
        }
        return tv_nil;
    }
    if (t == TRACEQL_T_FLOAT) {
        double x = num(&a), y = num(&b), r;
        switch (op) {
        case TRACEQL_OP_ADD:
            r = x + y;
            break;
        case TRACEQL_OP_SUB:
            r = x - y;
            break;
        case TRACEQL_OP_MUL:
            r = x * y;
            break;
        case TRACEQL_OP_DIV:
            if (y == 0) {
                return tv_nil;
            }
            r = x / y;
            break;
        default:
            return tv_nil;
        }
        return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
    }
    int64_t x = a.i, y = b.i, r;
    switch (op) {
    case TRACEQL_OP_ADD:
        r = (int64_t)((uint64_t)x + (uint64_t)y);
        break;
    case TRACEQL_OP_SUB:
        r = (int64_t)((uint64_t)x - (uint64_t)y);
        break;
    case TRACEQL_OP_MUL:
        r = (int64_t)((uint64_t)x * (uint64_t)y);
        break;
    case TRACEQL_OP_DIV:
    case TRACEQL_OP_MOD:
        if (y == 0 || (x == INT64_MIN && y == -1)) {
            return tv_nil;
        }
        r = op == TRACEQL_OP_DIV ? x / y : x % y;
        break;
    default:
        return tv_nil;
    }
    return tv_int(t, r);
}

struct tv traces_eval_val(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    switch (f->kind) {
    case TRACEQL_F_STATIC:
        return (struct tv){.t = f->st.type, .i = f->st.i, .f = f->st.f, .s = f->st.s, .n = f->st.n};
    case TRACEQL_F_INTRINSIC:
        return traces_intrinsic(e, f->intrinsic, sp);
    case TRACEQL_F_ATTR: {
        struct tv x = tv_nil;
        traces_leaf_each(e, f, sp, take_first, &x);
        return x;
    }
    case TRACEQL_F_UNARY:
        if (f->op == TRACEQL_OP_NOT) {
            return tv_int(TRACEQL_T_BOOL, !traces_eval_bool(e, f->l, sp));
        } else {
            struct tv x = traces_eval_val(e, f->l, sp);
            if (x.t == TRACEQL_T_FLOAT) {
                x.f = -x.f;
            } else if (is_num(x.t)) {
                x.i = (int64_t)(0 - (uint64_t)x.i);
            } else {
                x = tv_nil;
            }
            return x;
        }
    case TRACEQL_F_BINARY:
        if (f->op >= TRACEQL_OP_ADD) {
            return arith(f->op, traces_eval_val(e, f->l, sp), traces_eval_val(e, f->r, sp));
        }
        return tv_int(TRACEQL_T_BOOL, traces_eval_bool(e, f, sp));
    }
    return tv_nil;
}

static int cmp3(int c, enum traceql_op op)
{
    switch (op) {
    case TRACEQL_OP_EQ:
        return c == 0;
    case TRACEQL_OP_NE:
        return c != 0;
    case TRACEQL_OP_GT:
        return c > 0;
    case TRACEQL_OP_GE:
        return c >= 0;
    case TRACEQL_OP_LT:
        return c < 0;
    case TRACEQL_OP_LE:
        return c <= 0;
    default:
        return 0;
    }
}

/* a op b under Tempo's typing: incompatible operands compare false. */
static bool cmp_tv(enum traceql_op op, const struct tv *a, const struct tv *b,
                   const struct traceql_field *f)
{
    if (a->t == TRACEQL_T_NIL || b->t == TRACEQL_T_NIL) {
        return false;
    }
    if (op == TRACEQL_OP_RE || op == TRACEQL_OP_NRE) {
        return a->t == TRACEQL_T_STRING && f->re != NULL && traceql_regex_match(f, a->s, a->n);
    }
    int c;
    if (is_num(a->t) && is_num(b->t)) {
        if (a->t != TRACEQL_T_FLOAT && b->t != TRACEQL_T_FLOAT) {
            c = a->i < b->i ? -1 : a->i > b->i;
        } else {
            double x = num(a), y = num(b);
            if (x != x || y != y) {
                return op == TRACEQL_OP_NE;
            }
            c = x < y ? -1 : x > y;
        }
    } else if (a->t == TRACEQL_T_STRING && b->t == TRACEQL_T_STRING) {
        size_t m = a->n < b->n ? a->n : b->n;
        c = m ? memcmp(a->s, b->s, m) : 0;
        if (c == 0) {
            c = a->n < b->n ? -1 : a->n > b->n;
        }
    } else if (a->t == b->t &&
               (a->t == TRACEQL_T_BOOL || a->t == TRACEQL_T_STATUS || a->t == TRACEQL_T_KIND)) {
        if (op != TRACEQL_OP_EQ && op != TRACEQL_OP_NE) {
            return false;
        }
        c = a->i < b->i ? -1 : a->i > b->i;
    } else {
        return false;
    }
    return cmp3(c, op);
}

struct cmp_each {
    enum traceql_op op;
    const struct tv *other;
    bool leaf_left;
    const struct traceql_field *f;
    bool any, all;
};

static bool cmp_each_fn(void *ctx, const struct tv *v)
{
    struct cmp_each *c = ctx;
    bool r = c->leaf_left ? cmp_tv(c->op, v, c->other, c->f) : cmp_tv(c->op, c->other, v, c->f);
    c->any |= r;
    c->all &= r;
    /* positive operators stop at the first hit, negative ones at the first miss */
    return (c->op == TRACEQL_OP_NE || c->op == TRACEQL_OP_NRE) ? r : !r;
}

static bool count_fn(void *ctx, const struct tv *v)
{
    (void)ctx, (void)v;
    return false;
}

static bool eval_cmp(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    const struct traceql_field *l = f->l, *r = f->r;
    bool lnil = l->kind == TRACEQL_F_STATIC && l->st.type == TRACEQL_T_NIL;
    bool rnil = r->kind == TRACEQL_F_STATIC && r->st.type == TRACEQL_T_NIL;
    if (lnil || rnil) {
        const struct traceql_field *x = rnil ? l : r;
        bool present = is_multi(x) ? traces_leaf_each(e, x, sp, count_fn, NULL) > 0
                                   : traces_eval_val(e, x, sp).t != TRACEQL_T_NIL;
        if (lnil && rnil) {
            present = false;
        }
        return f->op == TRACEQL_OP_EQ ? !present : f->op == TRACEQL_OP_NE ? present : false;
    }
    bool ml = is_multi(l), mr = !ml && is_multi(r);
    if (!ml && !mr) {
        struct tv a = traces_eval_val(e, l, sp), b = traces_eval_val(e, r, sp);
        return cmp_tv(f->op, &a, &b, f);
    }
    struct tv other = traces_eval_val(e, ml ? r : l, sp);
    struct cmp_each c = {.op = f->op, .other = &other, .leaf_left = ml, .f = f, .all = true};
    size_t n = traces_leaf_each(e, ml ? l : r, sp, cmp_each_fn, &c);
    if (f->op == TRACEQL_OP_NE || f->op == TRACEQL_OP_NRE) {
        return n > 0 && c.all; /* every element must differ */
    }
    return c.any;
}

bool traces_eval_bool(struct ectx *e, const struct traceql_field *f, const struct espan *sp)
{
    if (f->kind == TRACEQL_F_BINARY) {
        switch (f->op) {
        case TRACEQL_OP_AND:
            return traces_eval_bool(e, f->l, sp) && traces_eval_bool(e, f->r, sp);
        case TRACEQL_OP_OR:
            return traces_eval_bool(e, f->l, sp) || traces_eval_bool(e, f->r, sp);
        case TRACEQL_OP_EQ:
        case TRACEQL_OP_NE:
        case TRACEQL_OP_GT:
        case TRACEQL_OP_GE:
        case TRACEQL_OP_LT:
        case TRACEQL_OP_LE:
        case TRACEQL_OP_RE:
        case TRACEQL_OP_NRE:
            return eval_cmp(e, f, sp);
        default:
            break;
        }
    }
    if (f->kind == TRACEQL_F_UNARY && f->op == TRACEQL_OP_NOT) {
        return !traces_eval_bool(e, f->l, sp);
    }
    struct tv v = traces_eval_val(e, f, sp);
    return v.t == TRACEQL_T_BOOL && v.i != 0;
}

/* ---- spansets ------------------------------------------------------------- */

static int sl_push(struct ectx *e, struct slist *l, struct sset s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct sset *v = arena_alloc(e->a, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        if (l->n) {
            memcpy(v, l->v, l->n * sizeof(*v));
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

uint8_t *traces_mark_new(struct ectx *e)
{
    uint8_t *m = arena_alloc(e->a, e->tr->n + 1);
    if (m != NULL) {
        memset(m, 0, e->tr->n + 1);
    }
    return m;
}

/* The spans marked in |m| as one spanset (none when empty). */
static int sset_of_mark(struct ectx *e, const uint8_t *m, struct slist *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->tr->n; i++) {
        n += m[i] != 0;
    }
    if (n == 0) {
        return 0;
    }
    struct sset s = {.idx = arena_alloc(e->a, n * sizeof(uint32_t)), .n = 0};
    if (s.idx == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < e->tr->n; i++) {
        if (m[i]) {
            s.idx[s.n++] = i;
        }
    }
    return sl_push(e, out, s);
}

static int eval_node(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                     struct slist *out);

/* Marks the spans of every spanset of |l|. */
static void mark_list(const struct slist *l, uint8_t *m)
{
    for (size_t i = 0; i < l->n; i++) {
        for (uint32_t k = 0; k < l->v[i].n; k++) {
            m[l->v[i].idx[k]] = 1;
        }
    }
}

static bool has_ancestor_in(const struct etrace *tr, uint32_t i, const uint8_t *set)
{
    int32_t p = tr->s[i].parent;
    for (uint32_t guard = 0; p >= 0 && guard < tr->n; guard++) {
        if (set[p]) {
            return true;
        }
        p = tr->s[p].parent;
    }
    return false;
}

/* Structural relation between the marked L and R spans: which R spans
 * satisfy it (rm), and for the &-forms which L spans take part (lm). */
static int structural(struct ectx *e, enum traceql_sop op, const uint8_t *L, const uint8_t *R,
                      uint8_t *out)
{
    const struct etrace *tr = e->tr;
    uint32_t n = tr->n;
    uint8_t *hit = traces_mark_new(e), *lhit = traces_mark_new(e);
    uint32_t *cnt = arena_alloc(e->a, (n + 1) * sizeof(uint32_t));
    if (hit == NULL || lhit == NULL || cnt == NULL) {
        return -ENOMEM;
    }
    enum traceql_sop base = op;
    if (op >= TRACEQL_SOP_UNION_CHILD && op <= TRACEQL_SOP_UNION_SIBLING) {
        base = (enum traceql_sop)(op - TRACEQL_SOP_UNION_CHILD + TRACEQL_SOP_CHILD);
    } else if (op >= TRACEQL_SOP_NOT_CHILD) {
        base = (enum traceql_sop)(op - TRACEQL_SOP_NOT_CHILD + TRACEQL_SOP_CHILD);
    }
    switch (base) {
    case TRACEQL_SOP_CHILD: /* R spans whose parent is in L */
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (R[i] && p >= 0 && L[p]) {
                hit[i] = 1;
                lhit[p] = 1;
            }
        }
        break;
    case TRACEQL_SOP_DESC: /* R spans with an ancestor in L */
        for (uint32_t i = 0; i < n; i++) {
            if (R[i] && has_ancestor_in(tr, i, L)) {
                hit[i] = 1;
                int32_t p = tr->s[i].parent;
                for (uint32_t g = 0; p >= 0 && g < n; g++, p = tr->s[p].parent) {
                    if (L[p]) {
                        lhit[p] = 1;
                    }
                }
            }
        }
        break;
    case TRACEQL_SOP_PARENT: /* R spans that are the parent of an L span */
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (L[i] && p >= 0 && R[p]) {
                hit[p] = 1;
                lhit[i] = 1;
            }
        }
        break;
    case TRACEQL_SOP_ANCESTOR: /* R spans that are an ancestor of an L span */
        for (uint32_t i = 0; i < n; i++) {
            if (!L[i]) {
                continue;
            }
            int32_t p = tr->s[i].parent;
            for (uint32_t g = 0; p >= 0 && g < n; g++, p = tr->s[p].parent) {
                if (R[p]) {
                    hit[p] = 1;
                    lhit[i] = 1;
                }
            }
        }
        break;
    case TRACEQL_SOP_SIBLING: { /* R spans with a sibling (same parent, not itself) in L */
        memset(cnt, 0, (n + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++) {
            if (L[i] && tr->s[i].parent >= 0) {
                cnt[tr->s[i].parent]++;
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (R[i] && p >= 0 && cnt[p] - (L[i] ? 1u : 0u) > 0) {
                hit[i] = 1;
            }
        }
        /* L spans with a sibling among the matched R spans */
        memset(cnt, 0, (n + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < n; i++) {
            if (hit[i]) {
                cnt[tr->s[i].parent]++;
            }
        }
        for (uint32_t i = 0; i < n; i++) {
            int32_t p = tr->s[i].parent;
            if (L[i] && p >= 0 && cnt[p] - (hit[i] ? 1u : 0u) > 0) {
                lhit[i] = 1;
            }
        }
        break;
    }
    default:
        break;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (op >= TRACEQL_SOP_NOT_CHILD) {
            out[i] = R[i] && !hit[i];
        } else if (op >= TRACEQL_SOP_UNION_CHILD) {
            out[i] = hit[i] || lhit[i];
        } else {
            out[i] = hit[i];
        }
    }
    return 0;
}

/* An aggregate or arithmetic over one spanset. */
static struct tv scalar(struct ectx *e, const struct traceql_scalar *sc, const struct sset *ss)
{
    switch (sc->kind) {
    case TRACEQL_S_STATIC:
        return (struct tv){
            .t = sc->st.type, .i = sc->st.i, .f = sc->st.f, .s = sc->st.s, .n = sc->st.n};
    case TRACEQL_S_BINARY:
        return arith(sc->op, scalar(e, sc->l, ss), scalar(e, sc->r, ss));
    case TRACEQL_S_AGG:
        break;
    }
    if (sc->agg == TRACEQL_AGG_COUNT) {
        return tv_int(TRACEQL_T_INT, ss->n);
    }
    double sum = 0, mn = 0, mx = 0;
    size_t n = 0;
    bool all_int = true;
    enum traceql_type t = TRACEQL_T_INT;
    for (uint32_t k = 0; k < ss->n; k++) {
        struct tv v = traces_eval_val(e, sc->field, &e->tr->s[ss->idx[k]]);
        if (!is_num(v.t)) {
            continue;
        }
        if (v.t == TRACEQL_T_FLOAT) {
            all_int = false;
        }
        if (v.t == TRACEQL_T_DURATION) {
            t = TRACEQL_T_DURATION;
        }
        double x = num(&v);
        sum += x;
        mn = n == 0 || x < mn ? x : mn;
        mx = n == 0 || x > mx ? x : mx;
        n++;
    }
    if (n == 0) {
        return tv_nil;
    }
    double r = sc->agg == TRACEQL_AGG_SUM   ? sum
               : sc->agg == TRACEQL_AGG_MIN ? mn
               : sc->agg == TRACEQL_AGG_MAX ? mx
                                            : sum / (double)n;
    if (all_int && sc->agg != TRACEQL_AGG_AVG) {
        return tv_int(t, (int64_t)r);
    }
    return (struct tv){.t = TRACEQL_T_FLOAT, .f = r};
}

static bool tv_same(const struct tv *a, const struct tv *b)
{
    if (a->t != b->t) {
        return false;
    }
    switch (a->t) {
    case TRACEQL_T_NIL:
        return true;
    case TRACEQL_T_FLOAT:
        return a->f == b->f;
    case TRACEQL_T_STRING:
        return a->n == b->n && (a->n == 0 || memcmp(a->s, b->s, a->n) == 0);
    default:
        return a->i == b->i;
    }
}

static int stage_by(struct ectx *e, const struct traceql_field *f, const struct slist *in,
                    struct slist *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const struct sset *ss = &in->v[i];
        struct tv *keys = arena_alloc(e->a, (ss->n + 1) * sizeof(*keys));
        uint32_t *grp = arena_alloc(e->a, (ss->n + 1) * sizeof(*grp));
        if (keys == NULL || grp == NULL) {
            return -ENOMEM;
        }
        uint32_t ng = 0;
        struct tv *gkey = arena_alloc(e->a, (ss->n + 1) * sizeof(*gkey));
        if (gkey == NULL) {
            return -ENOMEM;
        }
        for (uint32_t k = 0; k < ss->n; k++) {
            keys[k] = traces_eval_val(e, f, &e->tr->s[ss->idx[k]]);
            if (keys[k].t == TRACEQL_T_STRING) {
                /* hex buffers rotate: keep a copy */
                char *c = arena_alloc(e->a, keys[k].n + 1);
                if (c == NULL) {
                    return -ENOMEM;
                }
                memcpy(c, keys[k].s, keys[k].n);
                keys[k].s = c;
            }
            uint32_t g = 0;
            while (g < ng && !tv_same(&gkey[g], &keys[k])) {
                g++;
            }
            if (g == ng) {
                gkey[ng++] = keys[k];
            }
            grp[k] = g;
        }
        for (uint32_t g = 0; g < ng; g++) {
            if (gkey[g].t == TRACEQL_T_NIL) {
                continue; /* spans without the field are dropped */
            }
            struct sset s = {.idx = arena_alloc(e->a, ss->n * sizeof(uint32_t)), .n = 0};
            if (s.idx == NULL) {
                return -ENOMEM;
            }
            for (uint32_t k = 0; k < ss->n; k++) {
                if (grp[k] == g) {
                    s.idx[s.n++] = ss->idx[k];
                }
            }
            if (sl_push(e, out, s) < 0) {
                return -ENOMEM;
            }
        }
    }
    return 0;
}

static int eval_pipeline(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                         struct slist *out)
{
    struct slist cur = {0};
    int rc = eval_node(e, nd->input, in, &cur);
    for (size_t i = 0; rc == 0 && i < nd->n_stages && cur.n > 0; i++) {
        const struct traceql_stage *st = &nd->stages[i];
        struct slist next = {0};
        switch (st->kind) {
        case TRACEQL_STAGE_SPANSET:
            rc = eval_node(e, st->node, &cur, &next);
            break;
        case TRACEQL_STAGE_SCALAR_FILTER:
            for (size_t k = 0; rc == 0 && k < cur.n; k++) {
                struct tv a = scalar(e, st->lhs, &cur.v[k]);
                struct tv b = scalar(e, st->rhs, &cur.v[k]);
                if (cmp_tv(st->cmp, &a, &b, NULL)) {
                    rc = sl_push(e, &next, cur.v[k]);
                }
            }
            break;
        case TRACEQL_STAGE_SELECT:
            next = cur;
            break;
        case TRACEQL_STAGE_BY:
            rc = st->n_fields > 0 ? stage_by(e, st->fields[0], &cur, &next) : 0;
            break;
        case TRACEQL_STAGE_COALESCE: {
            uint8_t *m = traces_mark_new(e);
            if (m == NULL) {
                return -ENOMEM;
            }
            mark_list(&cur, m);
            rc = sset_of_mark(e, m, &next);
            break;
        }
        }
        cur = next;
    }
    *out = cur;
    return rc;
}

static int eval_node(struct ectx *e, const struct traceql_node *nd, const struct slist *in,
                     struct slist *out)
{
    out->v = NULL;
    out->n = out->cap = 0;
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        for (size_t i = 0; i < in->n; i++) {
            const struct sset *ss = &in->v[i];
            struct sset s = {.idx = arena_alloc(e->a, (ss->n + 1) * sizeof(uint32_t)), .n = 0};
            if (s.idx == NULL) {
                return -ENOMEM;
            }
            for (uint32_t k = 0; k < ss->n; k++) {
                if (nd->filter == NULL || traces_eval_bool(e, nd->filter, &e->tr->s[ss->idx[k]])) {
                    s.idx[s.n++] = ss->idx[k];
                }
            }
            if (s.n > 0 && sl_push(e, out, s) < 0) {
                return -ENOMEM;
            }
        }
        return 0;
    case TRACEQL_N_PIPELINE:
        return eval_pipeline(e, nd, in, out);
    case TRACEQL_N_SPANSET_OP:
        break;
    }
    /* Both sides see each input spanset on its own (Tempo's evaluation). */
    for (size_t i = 0; i < in->n; i++) {
        struct slist one = {.v = &in->v[i], .n = 1, .cap = 1};
        struct slist l, r;
        if (eval_node(e, nd->l, &one, &l) < 0 || eval_node(e, nd->r, &one, &r) < 0) {
            return -ENOMEM;
        }
        uint8_t *L = traces_mark_new(e), *R = traces_mark_new(e), *m = traces_mark_new(e);
        if (L == NULL || R == NULL || m == NULL) {
            return -ENOMEM;
        }
        mark_list(&l, L);
        mark_list(&r, R);
        if (nd->sop == TRACEQL_SOP_AND || nd->sop == TRACEQL_SOP_UNION) {
            if (nd->sop == TRACEQL_SOP_AND && (l.n == 0 || r.n == 0)) {
                continue;
            }
            for (uint32_t k = 0; k < e->tr->n; k++) {
                m[k] = L[k] | R[k];
            }
        } else if (structural(e, nd->sop, L, R, m) < 0) {
            return -ENOMEM;
        }
        if (sset_of_mark(e, m, out) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* Evaluates the query on a whole trace: the result spansets (arena). */
int traces_eval_trace(struct ectx *e, const struct traceql_expr *q, struct slist *out)
{
    const struct etrace *tr = e->tr;
    struct sset *all = arena_alloc(e->a, sizeof(*all));
    if (all == NULL || (all->idx = arena_alloc(e->a, (tr->n + 1) * sizeof(uint32_t))) == NULL) {
        return -ENOMEM;
    }
    all->n = tr->n;
    for (uint32_t i = 0; i < tr->n; i++) {
        all->idx[i] = i;
    }
    struct slist in = {.v = all, .n = 1, .cap = 1};
    if (q == NULL || q->root == NULL) {
        *out = in;
        return 0;
    }
    return eval_node(e, q->root, &in, out);
}
