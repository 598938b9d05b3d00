/*
 * logs_pipeline.c - the per-row context and the pipeline stages of a log
 * expression: line filters, label filters, parsers (| json with its own
 * parser here until the shared JSON lexer takes it over, | logfmt,
 * | pattern, | unpack), drop/keep, line_format/label_format, unwrap, and
 * eval_row, which runs them over one row (see logs_int.h).
 */
#include "query/logs_int.h"

#include "lib/utf8.h"
#include "query/logql_tmpl.h"

/* ---- per-item row context ------------------------------------------------- */

/* Below this many labels a linear lset_get is cheaper than an index. */
#define LIDX_MIN 32

/* ---- pipeline stages ------------------------------------------------------ */

static void set_label(struct rctx *c, const char *n, size_t nn, const char *v, size_t vn,
                      uint8_t cat)
{
    struct lbl *l = lset_get(&c->l, n, nn);
    if (l != NULL) {
        l->v = v;
        l->vn = (uint32_t)vn;
        l->cat = cat;
        return;
    }
    lset_push(&c->l, n, nn, v, vn, cat);
}

static void lidx_insert(struct lidx *x, const struct lset *s, uint32_t i)
{
    const struct lbl *l = &s->a[i];
    uint32_t mask = x->cap - 1;
    for (uint32_t k = (uint32_t)logs_hash_bytes(l->n, l->nn) & mask;; k = (k + 1) & mask) {
        uint32_t j = x->slot[k];
        if (j == 0) {
            x->slot[k] = i + 1;
            return;
        }
        const struct lbl *o = &s->a[j - 1];
        if (o->nn == l->nn && memcmp(o->n, l->n, l->nn) == 0) {
            return; /* the first of a name stays */
        }
    }
}

/* lset_get(s, ...) in O(1) once |s| has LIDX_MIN labels, through |x|
 * (which must be off, or on over this |s| with only pushes since). */
struct lbl *logs_lidx_lookup(struct lidx *x, const struct lset *s, const char *n, size_t nn)
{
    if (!x->on && s->n < LIDX_MIN) {
        return lset_get(s, n, nn);
    }
    if (!x->on || x->n > s->n || (size_t)s->n * 2 > x->cap) {
        /* (re)build; keeps the load factor at most 1/2 */
        uint32_t cap = x->cap ? x->cap : 2 * LIDX_MIN;
        while ((size_t)s->n * 2 > cap) {
            cap *= 2;
        }
        if (cap != x->cap) {
            uint32_t *slot = realloc(x->slot, (size_t)cap * sizeof(*slot));
            if (slot == NULL) {
                x->on = false;
                return lset_get(s, n, nn);
            }
            x->slot = slot;
            x->cap = cap;
        }
        memset(x->slot, 0, (size_t)x->cap * sizeof(*x->slot));
        x->n = 0;
        x->on = true;
    }
    for (; x->n < s->n; x->n++) {
        lidx_insert(x, s, x->n);
    }
    uint32_t mask = x->cap - 1;
    for (uint32_t k = (uint32_t)logs_hash_bytes(n, nn) & mask;; k = (k + 1) & mask) {
        uint32_t j = x->slot[k];
        if (j == 0) {
            return NULL;
        }
        struct lbl *o = &s->a[j - 1];
        if (o->nn == nn && memcmp(o->n, n, nn) == 0) {
            return o;
        }
    }
}

static struct lbl *lidx_get(struct rctx *c, const char *n, size_t nn)
{
    return logs_lidx_lookup(&c->idx, &c->l, n, nn);
}

/* A parser's label: a name taken by a stream label or structured metadata
 * becomes <name>_extracted (FACTS.md C.4). */
static void set_parsed(struct rctx *c, const char *n, size_t nn, const char *v, size_t vn)
{
    struct lbl *l = lidx_get(c, n, nn);
    if (l != NULL && l->cat != LC_PARSED) {
        char buf[600];
        size_t bn = nn < 580 ? nn : 580;
        memcpy(buf, n, bn);
        memcpy(buf + bn, "_extracted", 10);
        bn += 10;
        n = scratch_dup(c, buf, bn);
        nn = bn;
        l = lidx_get(c, n, nn);
    }
    if (l != NULL) {
        l->v = v;
        l->vn = (uint32_t)vn;
        return;
    }
    lset_push(&c->l, n, nn, v, vn, LC_PARSED);
}

static void set_error(struct rctx *c, const char *err, const char *details)
{
    if (lset_get(&c->l, "__error__", 9) != NULL) {
        return; /* the first error stays */
    }
    lset_push(&c->l, "__error__", 9, err, strlen(err), LC_PARSED);
    if (details != NULL) {
        lset_push(&c->l, "__error_details__", 17, details, strlen(details), LC_PARSED);
    }
}

/* Loki's sanitizeLabelKey for parsed keys: trim, [^A-Za-z0-9_] -> _,
 * leading digit -> _ prefix. Into c->sb; returns a scratch copy. */
static const char *parsed_key(struct rctx *c, const char *pre, size_t pn, const char *k, size_t kn,
                              size_t *out_n)
{
    while (kn > 0 && (k[0] == ' ' || k[0] == '\t')) {
        k++;
        kn--;
    }
    while (kn > 0 && (k[kn - 1] == ' ' || k[kn - 1] == '\t')) {
        kn--;
    }
    c->sb.n = 0;
    if (pn > 0) {
        sb_add(&c->sb, pre, pn);
        sb_addc(&c->sb, '_');
    } else if (kn > 0 && k[0] >= '0' && k[0] <= '9') {
        sb_addc(&c->sb, '_');
    }
    for (size_t i = 0; i < kn; i++) {
        unsigned char ch = (unsigned char)k[i];
        sb_addc(&c->sb, is_alnum(ch) || ch == '_' ? (char)ch : '_');
    }
    return sb_take(c, out_n);
}

/* -- JSON -- */

struct jp {
    const char *p, *e;
};

static void jws(struct jp *j)
{
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) {
        j->p++;
    }
}

static void sb_utf8(struct sbuf *b, uint32_t cp)
{
    if (sb_reserve(b, 4)) {
        b->n += utf8_put(b->p + b->n, cp);
    }
}

static int u4(const char *p, const char *e, uint32_t *out)
{
    if (e - p < 4) {
        return -1;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_digit((unsigned char)p[i]);
        if (h < 0) {
            return -1;
        }
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return 0;
}

/* A JSON string at j->p (the opening quote); decoded into a scratch copy
 * (or borrowed when it has no escapes). */
static int jstr(struct rctx *c, struct jp *j, const char **out, size_t *n)
{
    if (j->p >= j->e || *j->p != '"') {
        return -1;
    }
    const char *s = ++j->p;
    bool esc = false;
    while (j->p < j->e && *j->p != '"') {
        if (*j->p == '\\') {
            esc = true;
            j->p++;
        }
        j->p++;
    }
    if (j->p >= j->e) {
        return -1;
    }
    const char *end = j->p++;
    if (!esc) {
        *out = s;
        *n = (size_t)(end - s);
        return 0;
    }
    c->sb.n = 0;
    for (const char *p = s; p < end; p++) {
        if (*p != '\\') {
            sb_addc(&c->sb, *p);
            continue;
        }
        p++;
        switch (*p) {
        case 'n':
            sb_addc(&c->sb, '\n');
            break;
        case 't':
            sb_addc(&c->sb, '\t');
            break;
        case 'r':
            sb_addc(&c->sb, '\r');
            break;
        case 'b':
            sb_addc(&c->sb, '\b');
            break;
        case 'f':
            sb_addc(&c->sb, '\f');
            break;
        case 'u': {
            uint32_t cp;
            if (u4(p + 1, end, &cp) < 0) {
                return -1;
            }
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && end - p > 6 && p[1] == '\\' && p[2] == 'u') {
                uint32_t lo;
                if (u4(p + 3, end, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            }
            if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            sb_utf8(&c->sb, cp);
            break;
        }
        default:
            sb_addc(&c->sb, *p);
            break;
        }
    }
    *out = sb_take(c, n);
    return 0;
}

static int jskip(struct rctx *c, struct jp *j, int depth);

static int jskip_container(struct rctx *c, struct jp *j, char close, int depth)
{
    j->p++;
    jws(j);
    if (j->p < j->e && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            const char *k;
            size_t kn;
            jws(j);
            if (jstr(c, j, &k, &kn) < 0) {
                return -1;
            }
            jws(j);
            if (j->p >= j->e || *j->p != ':') {
                return -1;
            }
            j->p++;
        }
        if (jskip(c, j, depth + 1) < 0) {
            return -1;
        }
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) {
            j->p++;
            return 0;
        }
        return -1;
    }
}

/* Skips one value; a scalar's text is left in [start, j->p). */
static int jskip(struct rctx *c, struct jp *j, int depth)
{
    if (depth > 64) {
        return -1;
    }
    jws(j);
    if (j->p >= j->e) {
        return -1;
    }
    switch (*j->p) {
    case '{':
        return jskip_container(c, j, '}', depth);
    case '[':
        return jskip_container(c, j, ']', depth);
    case '"': {
        const char *s;
        size_t n;
        return jstr(c, j, &s, &n);
    }
    default: {
        const char *s = j->p;
        while (j->p < j->e &&
               (isalnum((unsigned char)*j->p) || *j->p == '-' || *j->p == '+' || *j->p == '.')) {
            j->p++;
        }
        return j->p > s ? 0 : -1;
    }
    }
}

/* | json (all fields): every leaf string/number/bool becomes a label,
 * objects flatten with _, arrays and null are skipped. */
static int json_obj(struct rctx *c, struct jp *j, const char *pre, size_t pn, int depth)
{
    if (depth > 64) {
        return -1;
    }
    jws(j);
    if (j->p >= j->e || *j->p != '{') {
        return -1;
    }
    j->p++;
    jws(j);
    if (j->p < j->e && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        const char *k;
        size_t kn;
        jws(j);
        if (jstr(c, j, &k, &kn) < 0) {
            return -1;
        }
        size_t nn;
        const char *name = parsed_key(c, pre, pn, k, kn, &nn);
        jws(j);
        if (j->p >= j->e || *j->p != ':') {
            return -1;
        }
        j->p++;
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        char ch = *j->p;
        if (ch == '{') {
            if (json_obj(c, j, name, nn, depth + 1) < 0) {
                return -1;
            }
        } else if (ch == '"') {
            const char *v;
            size_t vn;
            if (jstr(c, j, &v, &vn) < 0) {
                return -1;
            }
            set_parsed(c, name, nn, v, vn);
        } else if (ch == '[' || ch == 'n') {
            if (jskip(c, j, depth + 1) < 0) {
                return -1;
            }
        } else {
            const char *s = j->p;
            if (jskip(c, j, depth + 1) < 0) {
                return -1;
            }
            set_parsed(c, name, nn, s, (size_t)(j->p - s));
        }
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == '}') {
            j->p++;
            return 0;
        }
        return -1;
    }
}

/* Follows a json path from the value at j->p; leaves j->p at the target. */
static int json_path(struct rctx *c, struct jp *j, const struct logql_json_step *st, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        jws(j);
        if (j->p >= j->e) {
            return -1;
        }
        if (st[i].key.s != NULL) {
            if (*j->p != '{') {
                return -1;
            }
            j->p++;
            bool found = false;
            for (;;) {
                jws(j);
                if (j->p < j->e && *j->p == '}') {
                    return -1;
                }
                const char *k;
                size_t kn;
                if (jstr(c, j, &k, &kn) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p >= j->e || *j->p != ':') {
                    return -1;
                }
                j->p++;
                if (kn == st[i].key.n && memcmp(k, st[i].key.s, kn) == 0) {
                    found = true;
                    break;
                }
                if (jskip(c, j, 0) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p < j->e && *j->p == ',') {
                    j->p++;
                    continue;
                }
                return -1;
            }
            if (!found) {
                return -1;
            }
        } else {
            if (*j->p != '[') {
                return -1;
            }
            j->p++;
            for (int64_t k = 0; k < st[i].index; k++) {
                jws(j);
                if (j->p < j->e && *j->p == ']') {
                    return -1;
                }
                if (jskip(c, j, 0) < 0) {
                    return -1;
                }
                jws(j);
                if (j->p >= j->e || *j->p != ',') {
                    return -1;
                }
                j->p++;
            }
            jws(j);
            if (j->p < j->e && *j->p == ']') {
                return -1;
            }
        }
    }
    jws(j);
    return 0;
}

static void stage_json(struct rctx *c, const struct logql_stage *st)
{
    struct jp j = {c->line, c->line + c->line_n};
    if (st->n_params == 0) {
        size_t before = c->l.n;
        jws(&j);
        if (j.p >= j.e || *j.p != '{') {
            set_error(c, "JSONParserErr",
                      "Value looks like object, but can't find closing '}' symbol");
            return;
        }
        if (json_obj(c, &j, NULL, 0, 0) < 0) {
            (void)before;
            set_error(c, "JSONParserErr", "malformed JSON");
        }
        return;
    }
    for (size_t i = 0; i < st->n_params; i++) {
        const struct logql_param *prm = &st->params[i];
        struct jp k = {c->line, c->line + c->line_n};
        if (json_path(c, &k, prm->path, prm->n_path) < 0 || k.p >= k.e) {
            continue;
        }
        const char *v;
        size_t vn;
        if (*k.p == '"') {
            if (jstr(c, &k, &v, &vn) < 0) {
                continue;
            }
        } else if (*k.p == 'n') {
            v = "";
            vn = 0;
        } else {
            const char *s = k.p;
            if (jskip(c, &k, 0) < 0) {
                continue;
            }
            v = s;
            vn = (size_t)(k.p - s);
        }
        set_parsed(c, prm->name.s, prm->name.n, v, vn);
    }
}

/* | unpack: top-level string fields become labels; _entry replaces the line. */
static void stage_unpack(struct rctx *c)
{
    struct jp j = {c->line, c->line + c->line_n};
    jws(&j);
    if (j.p >= j.e || *j.p != '{') {
        set_error(c, "JSONParserErr", "not a JSON object");
        return;
    }
    j.p++;
    jws(&j);
    if (j.p < j.e && *j.p == '}') {
        return;
    }
    const char *entry = NULL;
    size_t entry_n = 0;
    for (;;) {
        const char *k;
        size_t kn;
        jws(&j);
        if (jstr(c, &j, &k, &kn) < 0) {
            break;
        }
        k = scratch_dup(c, k, kn);
        jws(&j);
        if (j.p >= j.e || *j.p != ':') {
            break;
        }
        j.p++;
        jws(&j);
        if (j.p < j.e && *j.p == '"') {
            const char *v;
            size_t vn;
            if (jstr(c, &j, &v, &vn) < 0) {
                break;
            }
            if (name_eq(k, kn, "_entry")) {
                entry = v;
                entry_n = vn;
            } else {
                size_t nn;
                const char *name = parsed_key(c, NULL, 0, k, kn, &nn);
                set_parsed(c, name, nn, v, vn);
            }
        } else if (jskip(c, &j, 0) < 0) {
            break;
        }
        jws(&j);
        if (j.p < j.e && *j.p == ',') {
            j.p++;
            continue;
        }
        break;
    }
    if (entry != NULL) {
        c->line = entry;
        c->line_n = entry_n;
    }
}

/* -- logfmt -- */

static bool lf_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static void stage_logfmt(struct rctx *c, const struct logql_stage *st)
{
    const char *p = c->line, *e = c->line + c->line_n;
    while (p < e) {
        while (p < e && lf_space(*p)) {
            p++;
        }
        if (p >= e) {
            break;
        }
        const char *k = p;
        while (p < e && !lf_space(*p) && *p != '=' && *p != '"') {
            p++;
        }
        size_t kn = (size_t)(p - k);
        const char *v = "";
        size_t vn = 0;
        bool bad = kn == 0;
        if (p < e && *p == '=') {
            p++;
            if (p < e && *p == '"') {
                const char *s = ++p;
                bool esc = false;
                while (p < e && *p != '"') {
                    if (*p == '\\') {
                        esc = true;
                        p++;
                    }
                    p++;
                }
                if (p >= e) {
                    bad = true;
                    v = s;
                    vn = (size_t)(e - s);
                } else {
                    if (!esc) {
                        v = s;
                        vn = (size_t)(p - s);
                    } else {
                        struct jp j = {s - 1, p + 1};
                        if (jstr(c, &j, &v, &vn) < 0) {
                            bad = true;
                        }
                    }
                    p++;
                }
            } else {
                const char *s = p;
                while (p < e && !lf_space(*p)) {
                    if (*p == '"' || *p == '=') {
                        bad = true;
                    }
                    p++;
                }
                v = s;
                vn = (size_t)(p - s);
            }
        } else if (p < e && *p == '"') {
            bad = true;
            while (p < e && !lf_space(*p)) {
                p++;
            }
        }
        if (bad) {
            if (st->logfmt_strict) {
                set_error(c, "LogfmtParserErr", "malformed logfmt pair");
                return;
            }
            continue;
        }
        if (vn == 0 && !st->logfmt_keep_empty) {
            continue;
        }
        if (st->n_params > 0) {
            for (size_t i = 0; i < st->n_params; i++) {
                const struct logql_param *prm = &st->params[i];
                const struct logql_str *want = prm->value.s != NULL ? &prm->value : &prm->name;
                if (want->n == kn && memcmp(want->s, k, kn) == 0) {
                    set_parsed(c, prm->name.s, prm->name.n, v, vn);
                }
            }
            continue;
        }
        size_t nn;
        const char *name = parsed_key(c, NULL, 0, k, kn, &nn);
        set_parsed(c, name, nn, v, vn);
    }
}

/* -- pattern -- */

static void stage_pattern(struct rctx *c, const struct logql_pattern *pt)
{
    const char *s = c->line;
    size_t n = c->line_n, off = 0;
    const struct logql_pattern_part *pending = NULL;
    size_t cap_start = 0;
    for (size_t k = 0; k < pt->n_parts; k++) {
        const struct logql_pattern_part *part = &pt->parts[k];
        if (part->lit.n > 0) {
            const char *hit = memmem(s + off, n - off, part->lit.s, part->lit.n);
            if (hit == NULL) {
                return;
            }
            size_t at = (size_t)(hit - s);
            if (pending != NULL && pending->named) {
                set_parsed(c, pending->capture.s, pending->capture.n, s + cap_start,
                           at - cap_start);
            }
            pending = NULL;
            off = at + part->lit.n;
        }
        if (part->capture.s != NULL) {
            pending = part;
            cap_start = off;
        }
    }
    if (pending != NULL && pending->named) {
        set_parsed(c, pending->capture.s, pending->capture.n, s + cap_start, n - cap_start);
    }
}

/* -- regexp -- */

/* Loki's RegexpParser: the first match of the (unanchored) regex in the
 * line sets one parsed label per named group that took part; no match sets
 * nothing. A match limit hit counts as no match (the executor polls
 * qlex_re_take_limit_hit and ends the query). */
static void stage_regexp(struct rctx *c, const qlex_re *re)
{
    enum { MAX_PAIRS = 64 };
    size_t ovec[2 * MAX_PAIRS];
    unsigned pairs = qlex_re_capture_count(re) + 1;
    if (pairs > MAX_PAIRS) {
        pairs = MAX_PAIRS; /* groups past 63 are left unset */
    }
    if (qlex_re_exec(re, c->line, c->line_n, ovec, pairs) != 1) {
        return;
    }
    unsigned ng = qlex_re_named_groups(re);
    for (unsigned i = 0; i < ng; i++) {
        const char *name;
        unsigned g;
        if (qlex_re_group_name(re, i, &name, &g) != 0 || g >= pairs || ovec[2 * g] == SIZE_MAX) {
            continue;
        }
        set_parsed(c, name, strlen(name), c->line + ovec[2 * g], ovec[2 * g + 1] - ovec[2 * g]);
    }
}

/* -- label filters -- */

static bool lf_eval(struct rctx *c, const struct logql_lf *lf)
{
    switch (lf->kind) {
    case LOGQL_LF_AND:
        return lf_eval(c, lf->left) && lf_eval(c, lf->right);
    case LOGQL_LF_OR:
        return lf_eval(c, lf->left) || lf_eval(c, lf->right);
    default:
        break;
    }
    const struct lbl *l = lset_get(&c->l, lf->m.name.s, lf->m.name.n);
    if (l != NULL && l->vn == 0) {
        l = NULL; /* an empty label is no label */
    }
    if (lf->kind == LOGQL_LF_IP) {
        int m = logql_ip_match(&lf->ip, l ? l->v : NULL, l ? l->vn : 0);
        return lf->cmp == LOGQL_CMP_NE ? m == 0 : m == 1;
    }
    int rc = logql_lf_test(lf, l ? l->v : NULL, l ? l->vn : 0);
    if (rc < 0) {
        set_error(c, "LabelFilterErr", "cannot parse the label value for the filter");
        return true;
    }
    return rc == 1;
}

static void stage_drop(struct rctx *c, const struct logql_stage *st)
{
    for (size_t k = 0; k < st->n_labels; k++) {
        const struct logql_matcher *m = &st->labels[k];
        for (uint32_t i = 0; i < c->l.n;) {
            struct lbl *l = &c->l.a[i];
            if (l->nn == m->name.n && memcmp(l->n, m->name.s, l->nn) == 0 &&
                (m->value.s == NULL || logql_match_label(m, l->v, l->vn))) {
                if (name_eq(l->n, l->nn, "__error__")) {
                    /* dropping __error__ also drops its details */
                    struct lbl *d = lset_get(&c->l, "__error_details__", 17);
                    if (d != NULL && (m->value.s == NULL)) {
                        lset_del(&c->l, (uint32_t)(d - c->l.a));
                        if (d < l) {
                            i--;
                        }
                    }
                }
                lset_del(&c->l, i);
                continue;
            }
            i++;
        }
    }
}

static void stage_keep(struct rctx *c, const struct logql_stage *st)
{
    for (uint32_t i = 0; i < c->l.n;) {
        struct lbl *l = &c->l.a[i];
        bool keep = name_eq(l->n, l->nn, "__error__") || name_eq(l->n, l->nn, "__error_details__");
        for (size_t k = 0; k < st->n_labels && !keep; k++) {
            const struct logql_matcher *m = &st->labels[k];
            keep = l->nn == m->name.n && memcmp(l->n, m->name.s, l->nn) == 0 &&
                   (m->value.s == NULL || logql_match_label(m, l->v, l->vn));
        }
        if (!keep) {
            lset_del(&c->l, i);
            continue;
        }
        i++;
    }
}

/* Templates (query/logql_tmpl.c) see the row's current labels. */
static const char *tmpl_label(void *ctx, const char *name, size_t nn, size_t *vn)
{
    struct rctx *c = ctx;
    const struct lbl *l = lset_get(&c->l, name, nn);
    if (l == NULL) {
        return NULL;
    }
    *vn = l->vn;
    return l->v;
}

static bool tmpl_label_at(void *ctx, size_t i, const char **name, size_t *nn, const char **v,
                          size_t *vn)
{
    struct rctx *c = ctx;
    if (i >= c->l.n) {
        return false;
    }
    *name = c->l.a[i].n;
    *nn = c->l.a[i].nn;
    *v = c->l.a[i].v;
    *vn = c->l.a[i].vn;
    return true;
}

/* Renders a template for the row: the result (in the row's scratch), or
 * NULL after setting __error__=TemplateFormatErr with the reason in
 * __error_details__, as Loki does (the caller then leaves the line or
 * label as it was). */
static const char *tmpl_render(struct rctx *c, const struct logql_tmpl *t, size_t *n)
{
    struct logql_tmpl_env env = {.label = tmpl_label,
                                 .label_at = tmpl_label_at,
                                 .ctx = c,
                                 .line = c->line,
                                 .line_n = c->line_n,
                                 .ts_ns = (int64_t)c->ts};
    const char *out;
    char err[256];
    int rc = logql_tmpl_render(t, &env, c->scratch, &out, n, err, sizeof(err));
    if (rc == -ENOMEM) {
        c->err = -ENOMEM;
        return NULL;
    }
    if (rc != 0) {
        set_error(c, "TemplateFormatErr", scratch_dup(c, err, strlen(err)));
        return NULL;
    }
    return out;
}

static void stage_label_format(struct rctx *c, const struct logql_stage *st)
{
    for (size_t i = 0; i < st->n_params; i++) {
        const struct logql_param *prm = &st->params[i];
        if (prm->is_template) {
            size_t vn;
            const char *v = tmpl_render(c, prm->tmpl, &vn);
            if (v != NULL) {
                set_label(c, prm->name.s, prm->name.n, v, vn, LC_PARSED);
            }
            continue;
        }
        struct lbl *src = lset_get(&c->l, prm->value.s, prm->value.n);
        if (src == NULL) {
            continue;
        }
        const char *v = src->v;
        size_t vn = src->vn;
        if (!(prm->name.n == prm->value.n && memcmp(prm->name.s, prm->value.s, prm->name.n) == 0)) {
            lset_del(&c->l, (uint32_t)(src - c->l.a));
        }
        set_label(c, prm->name.s, prm->name.n, v, vn, LC_PARSED);
    }
}

static void stage_decolorize(struct rctx *c)
{
    const char *s = c->line;
    size_t n = c->line_n;
    if (memchr(s, 0x1b, n) == NULL) {
        return;
    }
    c->sb.n = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0x1b && i + 1 < n && s[i + 1] == '[') {
            size_t j = i + 2;
            while (j < n && !((unsigned char)s[j] >= 0x40 && (unsigned char)s[j] <= 0x7e)) {
                j++;
            }
            i = j;
            continue;
        }
        sb_addc(&c->sb, s[i]);
    }
    c->line = sb_take(c, &c->line_n);
}

static void stage_unwrap(struct rctx *c, const struct logql_stage *st)
{
    const struct lbl *l = lset_get(&c->l, st->unwrap_label.s, st->unwrap_label.n);
    c->has_unwrap_val = false;
    if (l == NULL || l->vn == 0) {
        return; /* Loki skips the entry (its issue 6713), no error */
    }
    double d = 0;
    int rc = -EINVAL;
    switch (st->unwrap_conv) {
    case LOGQL_CONV_NONE: {
        char buf[64];
        if (l->vn > 0 && l->vn < sizeof(buf)) {
            memcpy(buf, l->v, l->vn);
            buf[l->vn] = '\0';
            char *end;
            d = strtod(buf, &end);
            rc = *end == '\0' ? 0 : -EINVAL;
        }
        break;
    }
    case LOGQL_CONV_BYTES:
        rc = qlex_parse_bytes(l->v, l->vn, &d);
        break;
    case LOGQL_CONV_DURATION:
    case LOGQL_CONV_DURATION_SECONDS: {
        int64_t ns;
        rc = qlex_parse_duration(l->v, l->vn, false, &ns);
        d = (double)ns / 1e9;
        break;
    }
    }
    if (rc != 0) {
        set_error(c, "SampleExtractionErr", "the unwrapped label does not parse as a number");
        return;
    }
    c->has_unwrap_val = true;
    c->unwrap_val = d;
}

/* Does attribute key |k| become label name |n| (logs_label_name)? */
static bool key_is_name(const char *k, size_t kn, const char *n, size_t nn)
{
    if (kn == nn) {
        /* same length: no run was collapsed and no prefix added, unless the
         * key starts with a digit or is __wrapped__ (then compare fully) */
        bool plain =
            !(kn > 0 && k[0] >= '0' && k[0] <= '9') &&
            !(kn > 4 && k[0] == '_' && k[1] == '_' && k[kn - 1] == '_' && k[kn - 2] == '_');
        if (plain) {
            bool prev_special = false;
            for (size_t i = 0; i < kn; i++) {
                bool sp = !is_alnum((unsigned char)k[i]);
                if (sp ? (n[i] != '_' || prev_special) : n[i] != k[i]) {
                    return false;
                }
                prev_special = sp;
            }
            return true;
        }
    } else if (nn > kn + 4) {
        return false;
    } else {
        /* a different length needs a run of specials or a digit prefix */
        bool odd = kn > 0 && k[0] >= '0' && k[0] <= '9';
        for (size_t i = 1; i < kn && !odd; i++) {
            odd = !is_alnum((unsigned char)k[i]) && !is_alnum((unsigned char)k[i - 1]);
        }
        if (!odd) {
            return false;
        }
    }
    char buf[600];
    size_t bn = logs_label_name(k, kn, buf, sizeof(buf));
    return bn == nn && memcmp(buf, n, nn) == 0;
}

/* One label of the current row by name without building the set.
 * 1 found (*v, *vn), 0 absent, -1 cannot tell cheaply (build the set). */
static int lazy_get(struct rctx *c, const char *n, size_t nn, const char **v, size_t *vn,
                    double *num, bool *has_num)
{
    *has_num = false;
    const struct rinfo *ri = c->ri;
    const struct log_view *lv = c->v;
    for (uint32_t i = 0; i < ri->n_idx; i++) {
        if (ri->idx[i].nn == nn && memcmp(ri->idx[i].n, n, nn) == 0) {
            *v = ri->idx[i].v;
            *vn = ri->idx[i].vn;
            return 1;
        }
    }
    if (!c->s->need_labels || name_eq(n, nn, "detected_level") || name_eq(n, nn, "__error__") ||
        name_eq(n, nn, "__error_details__")) {
        return -1;
    }
    if (c->s->attrs) {
        struct val_rd r = {lv->attrs.p, lv->attrs.p + lv->attrs.len};
        for (uint32_t i = 0; i < lv->attrs.count; i++) {
            const char *k;
            size_t kn;
            struct val av;
            if (val_rd_kv(&r, &k, &kn, &av) != 0) {
                break;
            }
            if (av.type == VAL_KVLIST) {
                return -1; /* flattened names: let the full build decide */
            }
            if (!key_is_name(k, kn, n, nn) ||
                (lv->event_name.len > 0 && name_eq(k, kn, "event_name"))) {
                continue;
            }
            if (av.type == VAL_STR) {
                *v = av.s;
                *vn = av.n;
            } else if (num != NULL && (av.type == VAL_INT || av.type == VAL_DOUBLE)) {
                /* a numeric filter compares the number itself: its rendering
                 * (ES6 shortest / decimal) parses back to the same double */
                *num = av.type == VAL_INT ? (double)av.i : av.d;
                *has_num = true;
                *v = "";
                *vn = 0;
            } else {
                c->sb.n = 0;
                sb_val_str(&c->sb, &av);
                *v = sb_take(c, vn);
            }
            return 1;
        }
    }
    char nb[24];
    int k = -1;
    if (name_eq(n, nn, "severity_text")) {
        if (lv->severity_text.len == 0) {
            return 0;
        }
        *v = lv->severity_text.p;
        *vn = lv->severity_text.len;
        return 1;
    }
    if (name_eq(n, nn, "severity_number")) {
        if (lv->severity_number == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%d", lv->severity_number);
    } else if (name_eq(n, nn, "observed_timestamp")) {
        if (lv->time_ns == 0 || lv->observed_ns == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%" PRIu64, lv->observed_ns);
    } else if (name_eq(n, nn, "dropped_attributes_count")) {
        if (lv->dropped_attrs == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%u", lv->dropped_attrs);
    } else if (name_eq(n, nn, "flags")) {
        if (lv->flags == 0) {
            return 0;
        }
        k = snprintf(nb, sizeof(nb), "%u", lv->flags);
    } else if (name_eq(n, nn, "trace_id") || name_eq(n, nn, "span_id")) {
        bool trace = nn == 8;
        if (!(trace ? lv->has_trace_id : lv->has_span_id)) {
            return 0;
        }
        c->sb.n = 0;
        sb_hex(&c->sb, trace ? lv->trace_id : lv->span_id, trace ? 16 : 8);
        *v = sb_take(c, vn);
        return 1;
    } else if (name_eq(n, nn, "event_name")) {
        if (lv->event_name.len == 0) {
            return 0;
        }
        *v = lv->event_name.p;
        *vn = lv->event_name.len;
        return 1;
    }
    if (k >= 0) {
        *v = scratch_dup(c, nb, (size_t)k);
        *vn = (size_t)k;
        return 1;
    }
    for (uint32_t i = 0; i < ri->n_sm; i++) {
        if (ri->sm[i].nn == nn && memcmp(ri->sm[i].n, n, nn) == 0) {
            *v = ri->sm[i].v;
            *vn = ri->sm[i].vn;
            return 1;
        }
    }
    const struct sinfo *si = logs_src_sinfo(c, lv->scope);
    if (si != NULL) {
        for (uint32_t i = 0; i < si->n_sm; i++) {
            if (si->sm[i].nn == nn && memcmp(si->sm[i].n, n, nn) == 0) {
                *v = si->sm[i].v;
                *vn = si->sm[i].vn;
                return 1;
            }
        }
    }
    return 0;
}

/* One predicate of lf_eval_lazy, out of line: its frame (some hundred
 * bytes) is not repeated per and/or level of the recursion. */
static bool __attribute__((noinline))
lf_leaf_lazy(struct rctx *c, const struct logql_lf *lf, bool *full)
{
    if (lf->kind == LOGQL_LF_IP) {
        *full = true;
        return false;
    }
    const char *v = NULL;
    size_t vn = 0;
    double num = 0;
    bool has_num = false;
    int got = lazy_get(c, lf->m.name.s, lf->m.name.n, &v, &vn,
                       lf->kind == LOGQL_LF_NUMBER ? &num : NULL, &has_num);
    if (got < 0) {
        *full = true;
        return false;
    }
    if (has_num) {
        if (isnan(num)) {
            *full = true; /* "NaN" parses, but let the general path say so */
            return false;
        }
        switch (lf->cmp) {
        case LOGQL_CMP_EQ:
            return num == lf->num;
        case LOGQL_CMP_NE:
            return num != lf->num;
        case LOGQL_CMP_GT:
            return num > lf->num;
        case LOGQL_CMP_GE:
            return num >= lf->num;
        case LOGQL_CMP_LT:
            return num < lf->num;
        case LOGQL_CMP_LE:
            return num <= lf->num;
        }
        return false;
    }
    if (got == 1 && vn == 0) {
        got = 0; /* an empty label is no label (as lf_eval) */
    }
    int rc = logql_lf_test(lf, got ? v : NULL, got ? vn : 0);
    if (rc < 0) {
        *full = true;
        return false;
    }
    return rc == 1;
}

/* A label filter before any label was built: *full = true when it cannot
 * be decided this way (then the caller builds the labels and uses lf_eval,
 * which also records __error__). */
static bool lf_eval_lazy(struct rctx *c, const struct logql_lf *lf, bool *full)
{
    switch (lf->kind) {
    case LOGQL_LF_AND:
        return lf_eval_lazy(c, lf->left, full) && !*full && lf_eval_lazy(c, lf->right, full);
    case LOGQL_LF_OR:
        return (lf_eval_lazy(c, lf->left, full) && !*full) ||
               (!*full && lf_eval_lazy(c, lf->right, full));
    default:
        return lf_leaf_lazy(c, lf, full);
    }
}

/* The line of the current row: the body, a non-string body as JSON/text. */
static void row_line(struct rctx *c)
{
    const struct log_view *v = c->v;
    if (v->body_type == VAL_STR) {
        c->line = v->body_str.p;
        c->line_n = v->body_str.len;
        return;
    }
    if (v->body_type == VAL_EMPTY) {
        c->line = "";
        c->line_n = 0;
        return;
    }
    struct val_rd r = {v->body_val.p, v->body_val.p + v->body_val.len};
    struct val val;
    c->sb.n = 0;
    if (val_rd_value(&r, &val) == 0) {
        sb_val_str(&c->sb, &val);
    }
    c->line = sb_take(c, &c->line_n);
}

/* Runs the pipeline on the current row from stage |from|. true: the row
 * is kept. */
static bool run_stages(struct rctx *c, const struct logql_log *log, size_t from)
{
    for (size_t i = from; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        c->idx.on = false; /* the last stage may have deleted or moved labels */
        if (st->kind == LOGQL_STAGE_LINE_FILTER) {
            if (!logql_line_filter_match(st, c->line, c->line_n)) {
                return false;
            }
            continue;
        }
        if (!c->built && st->kind == LOGQL_STAGE_LABEL_FILTER) {
            /* before any parser: look the names up without building every
             * label of the row */
            bool full = false;
            bool keep = lf_eval_lazy(c, st->lf, &full);
            if (!full) {
                if (!keep) {
                    return false;
                }
                continue;
            }
        }
        if (!c->built) {
            logs_build_labels(c);
        }
        switch (st->kind) {
        case LOGQL_STAGE_JSON:
            stage_json(c, st);
            break;
        case LOGQL_STAGE_LOGFMT:
            stage_logfmt(c, st);
            break;
        case LOGQL_STAGE_PATTERN:
            stage_pattern(c, &st->pattern);
            break;
        case LOGQL_STAGE_REGEXP:
            stage_regexp(c, st->re);
            break;
        case LOGQL_STAGE_UNPACK:
            stage_unpack(c);
            break;
        case LOGQL_STAGE_DECOLORIZE:
            stage_decolorize(c);
            break;
        case LOGQL_STAGE_LABEL_FILTER:
            if (!lf_eval(c, st->lf)) {
                return false;
            }
            break;
        case LOGQL_STAGE_LINE_FORMAT: {
            size_t n;
            const char *p = tmpl_render(c, st->tmpl, &n);
            if (p != NULL) {
                c->line = p;
                c->line_n = n;
            }
            break;
        }
        case LOGQL_STAGE_LABEL_FORMAT:
            stage_label_format(c, st);
            break;
        case LOGQL_STAGE_DROP:
            stage_drop(c, st);
            break;
        case LOGQL_STAGE_KEEP:
            stage_keep(c, st);
            break;
        case LOGQL_STAGE_UNWRAP:
            stage_unwrap(c, st);
            break;
        case LOGQL_STAGE_LINE_FILTER:
            break;
        }
    }
    return true;
}

/* ---- scanning ------------------------------------------------------------- */

/* Starts row |v|: false when its stream does not match. */
static bool row_begin(struct rctx *c, const struct log_view *v, uint64_t ts)
{
    struct src *src = c->src;
    if (v->resource == NULL || v->resource->id >= src->n_ri) {
        return false;
    }
    const struct rinfo *ri = &src->ri[v->resource->id];
    if (!ri->done || !ri->match) {
        return false;
    }
    arena_reset(c->scratch);
    c->built = false;
    c->l.n = 0;
    c->v = v;
    c->ri = ri;
    c->ts = ts;
    c->has_unwrap_val = false;
    return true;
}

bool logs_eval_row(struct rctx *c, const struct log_view *v, uint64_t ts)
{
    if (!row_begin(c, v, ts)) {
        return false;
    }
    row_line(c);
    c->bytes += c->line_n;
    return run_stages(c, c->s->log, 0);
}

int logs_eval_pre(struct rctx *c, const struct log_view *v, uint64_t ts)
{
    if (!row_begin(c, v, ts)) {
        return 0;
    }
    const struct logql_log *log = c->s->log;
    for (size_t i = 0; i < c->s->n_pre; i++) {
        bool full = false;
        bool keep = lf_eval_lazy(c, log->stages[i].lf, &full);
        if (full) {
            return -1;
        }
        if (!keep) {
            return 0;
        }
    }
    return 1;
}

bool logs_eval_rest(struct rctx *c, const struct log_view *v)
{
    c->v = v;
    row_line(c);
    c->bytes += c->line_n;
    return run_stages(c, c->s->log, c->s->n_pre);
}
