/*
 * logs_labels.c - label names, the per-source caches of resources and
 * scopes (stream labels, the selector's verdict, resource and scope
 * structured metadata) and the labels of one record (see logs_int.h).
 */
#include "query/logs_int.h"

/* ---- label names ---------------------------------------------------------- */

size_t logs_label_name(const char *key, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    if (cap == 0) {
        return 0;
    }
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < cap) {                                                                         \
            out[o++] = (c);                                                                        \
        }                                                                                          \
    } while (0)
    /* __x__ keeps its wrapper */
    bool wrapped =
        n > 4 && key[0] == '_' && key[1] == '_' && key[n - 1] == '_' && key[n - 2] == '_';
    size_t from = 0, to = n;
    if (wrapped) {
        from = 2;
        to = n - 2;
        PUT('_');
        PUT('_');
    } else if (n > 0 && key[0] >= '0' && key[0] <= '9') {
        PUT('k');
        PUT('e');
        PUT('y');
        PUT('_');
    }
    bool in_run = false;
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)key[i];
        if (is_alnum(c)) {
            PUT((char)c);
            in_run = false;
        } else if (!in_run) {
            PUT('_');
            in_run = true;
        }
    }
    if (wrapped) {
        PUT('_');
        PUT('_');
    }
#undef PUT
    out[o] = '\0';
    return o;
}

static bool is_index_key(const char *k, size_t n)
{
    for (size_t i = 0; i < N_INDEX_KEYS; i++) {
        if (strlen(index_keys[i]) == n && memcmp(index_keys[i], k, n) == 0) {
            return true;
        }
    }
    return false;
}

/* ---- resources, scopes, record labels ------------------------------------- */

/* Pushes an attribute as label(s): kvlists flatten to name_child
 * (FACTS.md B.2). Strings come from |a| (names) and |sb| scratch. */
static void push_attr(struct lset *out, arena *a, struct sbuf *sb, const char *prefix, size_t pn,
                      const char *k, size_t kn, const struct val *v, uint8_t cat, int depth)
{
    char raw[512], name[600];
    size_t rn = 0;
    if (pn > 0) {
        size_t cp = pn < 255 ? pn : 255;
        memcpy(raw, prefix, cp);
        raw[cp] = '_';
        rn = cp + 1;
    }
    size_t ck = kn < sizeof(raw) - rn ? kn : sizeof(raw) - rn;
    memcpy(raw + rn, k, ck);
    rn += ck;
    size_t nn = logs_label_name(raw, rn, name, sizeof(name));
    if (v->type == VAL_KVLIST && depth < 16) {
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            const char *ck2;
            size_t ckn;
            struct val cv;
            if (val_rd_kv(&r, &ck2, &ckn, &cv) != 0) {
                break;
            }
            push_attr(out, a, sb, name, nn, ck2, ckn, &cv, cat, depth + 1);
        }
        return;
    }
    const char *np = adup(a, name, nn);
    const char *vp;
    size_t vn;
    if (v->type == VAL_STR) {
        vp = v->s;
        vn = v->n;
    } else {
        sb->n = 0;
        sb_val_str(sb, v);
        vn = sb->n;
        vp = adup(a, sb->p ? sb->p : "", vn);
    }
    if (np == NULL || vp == NULL) {
        out->oom = true;
        return;
    }
    lset_push(out, np, nn, vp, vn, cat);
}

static const char *const svc_fallback[] = {"container_name", "k8s_container_name", "k8s_job_name"};

bool logs_selector_match(const struct logql_log *log, const struct lbl *idx, uint32_t n)
{
    for (size_t i = 0; i < log->n_matchers; i++) {
        const struct logql_matcher *m = &log->matchers[i];
        const struct lbl *hit = NULL;
        for (uint32_t j = 0; j < n; j++) {
            if (idx[j].nn == m->name.n && memcmp(idx[j].n, m->name.s, m->name.n) == 0) {
                hit = &idx[j];
                break;
            }
        }
        if (!logql_match_label(m, hit ? hit->v : NULL, hit ? hit->vn : 0)) {
            return false;
        }
    }
    return true;
}

/* Builds the stream labels and resource SM of |rv| into |ri| (arena |a|). */
static int build_rinfo(const struct res_view *rv, arena *a, const struct logql_log *sel,
                       struct rinfo *ri)
{
    struct lset idx = {0}, sm = {0};
    struct sbuf sb = {0};
    struct val_rd r = {rv->attrs.p, rv->attrs.p + rv->attrs.len};
    bool has_svc = false;
    int rc = 0;
    for (uint32_t i = 0; i < rv->attrs.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) != 0) {
            break;
        }
        if (is_index_key(k, kn)) {
            size_t before = idx.n;
            push_attr(&idx, a, &sb, NULL, 0, k, kn, &v, LC_INDEX, 0);
            /* an empty value is no label (Prometheus) */
            if (idx.n > before && idx.a[idx.n - 1].vn == 0) {
                idx.n--;
            } else if (idx.n > before && name_eq(k, kn, "service.name")) {
                has_svc = true;
            }
        } else {
            push_attr(&sm, a, &sb, NULL, 0, k, kn, &v, LC_SM, 0);
        }
    }
    if (!has_svc) {
        const char *val = "unknown_service";
        size_t vn = strlen(val);
        for (size_t f = 0; f < 3; f++) {
            struct lbl *l = lset_get(&idx, svc_fallback[f], strlen(svc_fallback[f]));
            if (l != NULL) {
                val = l->v;
                vn = l->vn;
                break;
            }
        }
        lset_push(&idx, "service_name", 12, val, vn, LC_INDEX);
    }
    if (idx.oom || sm.oom || sb.oom) {
        rc = -ENOMEM;
        goto out;
    }
    qsort(idx.a, idx.n, sizeof(idx.a[0]), lbl_cmp);
    /* a duplicate name after sanitizing: keep the first */
    for (uint32_t i = 1; i < idx.n;) {
        if (idx.a[i].nn == idx.a[i - 1].nn &&
            memcmp(idx.a[i].n, idx.a[i - 1].n, idx.a[i].nn) == 0) {
            lset_del(&idx, i);
        } else {
            i++;
        }
    }
    ri->idx = arena_alloc(a, (idx.n + 1) * sizeof(struct lbl));
    ri->sm = arena_alloc(a, (sm.n + 1) * sizeof(struct lbl));
    if (ri->idx == NULL || ri->sm == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (idx.n > 0) {
        memcpy(ri->idx, idx.a, idx.n * sizeof(struct lbl));
    }
    ri->n_idx = idx.n;
    if (sm.n > 0) {
        memcpy(ri->sm, sm.a, sm.n * sizeof(struct lbl));
    }
    ri->n_sm = sm.n;
    sb.n = 0;
    sb_labels_key(&sb, ri->idx, ri->n_idx);
    ri->key = adup(a, sb.p ? sb.p : "", sb.n);
    ri->keylen = (uint32_t)sb.n;
    if (ri->key == NULL || sb.oom) {
        rc = -ENOMEM;
        goto out;
    }
    ri->match = sel == NULL || logs_selector_match(sel, ri->idx, ri->n_idx);
    ri->done = true;
out:
    free(idx.a);
    free(sm.a);
    sb_fini(&sb);
    return rc;
}

/* Makes the per-resource cache of |s| and fills every entry (resources
 * are few: a dictionary per block). */
int logs_src_rinfo_all(struct src *s, const struct logql_log *sel)
{
    if (s->ri != NULL) {
        return 0;
    }
    uint32_t n = qctx_n_resources(s->qs);
    s->ri = arena_alloc(s->a, (n + 1) * sizeof(*s->ri));
    if (s->ri == NULL) {
        return -ENOMEM;
    }
    memset(s->ri, 0, (n + 1) * sizeof(*s->ri));
    s->n_ri = n;
    for (uint32_t i = 0; i < n; i++) {
        const struct res_view *rv = qctx_resource(s->qs, i);
        if (rv == NULL) {
            continue;
        }
        int rc = build_rinfo(rv, s->a, sel, &s->ri[i]);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

const struct sinfo *logs_src_sinfo(struct rctx *c, const struct scope_view *sv)
{
    struct src *s = c->src;
    if (s->si == NULL) {
        uint32_t n = qctx_n_scopes(s->qs);
        s->si = arena_alloc(s->a, (n + 1) * sizeof(*s->si));
        if (s->si == NULL) {
            return NULL;
        }
        memset(s->si, 0, (n + 1) * sizeof(*s->si));
        s->n_si = n;
    }
    if (sv == NULL || sv->id >= s->n_si) {
        return NULL;
    }
    struct sinfo *si = &s->si[sv->id];
    if (si->done) {
        return si;
    }
    struct lset sm = {0};
    struct val_rd r = {sv->attrs.p, sv->attrs.p + sv->attrs.len};
    for (uint32_t i = 0; i < sv->attrs.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) != 0) {
            break;
        }
        push_attr(&sm, s->a, &c->sb, NULL, 0, k, kn, &v, LC_SM, 0);
    }
    if (sv->name.len > 0) {
        lset_push(&sm, "scope_name", 10, sv->name.p, sv->name.len, LC_SM);
    }
    if (sv->version.len > 0) {
        lset_push(&sm, "scope_version", 13, sv->version.p, sv->version.len, LC_SM);
    }
    if (sv->dropped_attrs != 0) {
        char num[16];
        int nn = snprintf(num, sizeof(num), "%u", sv->dropped_attrs);
        lset_push(&sm, "scope_dropped_attributes_count", 30, adup(s->a, num, (size_t)nn),
                  (size_t)nn, LC_SM);
    }
    c->sb.n = 0;
    si->sm = arena_alloc(s->a, (sm.n + 1) * sizeof(struct lbl));
    if (si->sm == NULL || sm.oom) {
        free(sm.a);
        return NULL;
    }
    if (sm.n > 0) {
        memcpy(si->sm, sm.a, sm.n * sizeof(struct lbl));
    }
    si->n_sm = sm.n;
    si->done = true;
    free(sm.a);
    return si;
}

/* FACTS.md B.7 */
static const char *const level_names[] = {
    "level",    "LEVEL",         "Level",         "log.level",     "severity",
    "SEVERITY", "Severity",      "SeverityText",  "lvl",           "LVL",
    "Lvl",      "severity_text", "Severity_Text", "SEVERITY_TEXT",
};

static bool ieq(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && strncasecmp(a, b, an) == 0;
}

static void normalize_level(const char *v, size_t n, const char **out, size_t *on)
{
    static const struct {
        const char *in, *out;
    } map[] = {
        {"trace", "trace"},       {"trc", "trace"},    {"debug", "debug"},      {"dbg", "debug"},
        {"info", "info"},         {"inf", "info"},     {"information", "info"}, {"warn", "warn"},
        {"wrn", "warn"},          {"warning", "warn"}, {"error", "error"},      {"err", "error"},
        {"critical", "critical"}, {"fatal", "fatal"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (ieq(v, n, map[i].in)) {
            *out = map[i].out;
            *on = strlen(map[i].out);
            return;
        }
    }
    *out = v;
    *on = n;
}

static const char *level_of_number(int32_t sn)
{
    if (sn >= 1 && sn <= 4) {
        return "trace";
    }
    if (sn >= 5 && sn <= 8) {
        return "debug";
    }
    if (sn >= 9 && sn <= 12) {
        return "info";
    }
    if (sn >= 13 && sn <= 16) {
        return "warn";
    }
    if (sn >= 17 && sn <= 20) {
        return "error";
    }
    if (sn >= 21 && sn <= 24) {
        return "fatal";
    }
    return NULL;
}

static void push_num(struct rctx *c, const char *name, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRIu64, v);
    lset_push(&c->l, name, strlen(name), scratch_dup(c, num, (size_t)n), (size_t)n, LC_SM);
}

/* Stream labels + structured metadata of the current row (FACTS.md B.3 order). */
void logs_build_labels(struct rctx *c)
{
    const struct log_view *v = c->v;
    const struct rinfo *ri = c->ri;
    c->built = true;
    c->l.n = 0;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        lset_push(&c->l, ri->idx[i].n, ri->idx[i].nn, ri->idx[i].v, ri->idx[i].vn, LC_INDEX);
    }
    if (!c->s->need_labels) {
        return;
    }
    if (c->s->attrs) {
        struct val_rd r = {v->attrs.p, v->attrs.p + v->attrs.len};
        for (uint32_t i = 0; i < v->attrs.count; i++) {
            const char *k;
            size_t kn;
            struct val av;
            if (val_rd_kv(&r, &k, &kn, &av) != 0) {
                break;
            }
            if (v->event_name.len > 0 && name_eq(k, kn, "event_name")) {
                continue;
            }
            push_attr(&c->l, c->scratch, &c->sb, NULL, 0, k, kn, &av, LC_SM, 0);
        }
    }
    if (v->time_ns != 0 && v->observed_ns != 0) {
        push_num(c, "observed_timestamp", v->observed_ns);
    }
    if (v->severity_number != 0) {
        char num[16];
        int n = snprintf(num, sizeof(num), "%d", v->severity_number);
        lset_push(&c->l, "severity_number", 15, scratch_dup(c, num, (size_t)n), (size_t)n, LC_SM);
    }
    if (v->severity_text.len > 0) {
        lset_push(&c->l, "severity_text", 13, v->severity_text.p, v->severity_text.len, LC_SM);
    }
    if (v->dropped_attrs != 0) {
        push_num(c, "dropped_attributes_count", v->dropped_attrs);
    }
    if (v->flags != 0) {
        push_num(c, "flags", v->flags);
    }
    if (v->has_trace_id) {
        c->sb.n = 0;
        sb_hex(&c->sb, v->trace_id, 16);
        size_t n;
        const char *p = sb_take(c, &n);
        lset_push(&c->l, "trace_id", 8, p, n, LC_SM);
    }
    if (v->has_span_id) {
        c->sb.n = 0;
        sb_hex(&c->sb, v->span_id, 8);
        size_t n;
        const char *p = sb_take(c, &n);
        lset_push(&c->l, "span_id", 7, p, n, LC_SM);
    }
    if (v->event_name.len > 0) {
        lset_push(&c->l, "event_name", 10, v->event_name.p, v->event_name.len, LC_SM);
    }
    for (uint32_t i = 0; i < ri->n_sm; i++) {
        lset_push(&c->l, ri->sm[i].n, ri->sm[i].nn, ri->sm[i].v, ri->sm[i].vn, LC_SM);
    }
    const struct sinfo *si = logs_src_sinfo(c, v->scope);
    if (si != NULL) {
        for (uint32_t i = 0; i < si->n_sm; i++) {
            lset_push(&c->l, si->sm[i].n, si->sm[i].nn, si->sm[i].v, si->sm[i].vn, LC_SM);
        }
    }
    /* detected_level: an existing one is normalised; else the first level
     * name among the labels; else severity_number; else unknown. */
    struct lbl *dl = lset_get(&c->l, "detected_level", 14);
    if (dl != NULL) {
        const char *o;
        size_t on;
        normalize_level(dl->v, dl->vn, &o, &on);
        dl->v = o;
        dl->vn = (uint32_t)on;
        return;
    }
    const char *lv = NULL;
    size_t ln = 0;
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]) && lv == NULL; i++) {
        struct lbl *l = lset_get(&c->l, level_names[i], strlen(level_names[i]));
        if (l != NULL && l->vn > 0) {
            normalize_level(l->v, l->vn, &lv, &ln);
        }
    }
    if (lv == NULL) {
        lv = level_of_number(v->severity_number);
        if (lv == NULL) {
            lv = "unknown";
        }
        ln = strlen(lv);
    }
    lset_push(&c->l, "detected_level", 14, lv, ln, LC_SM);
}
