/*
 * fuzz_logql.c - libFuzzer target for the LogQL parser: any input must parse
 * or fail with a message, never crash, leak or hang. Accepted queries also
 * run their matchers, line filters and label filters against the input
 * bytes (arbitrary, often invalid UTF-8) to exercise the regex wrapper,
 * and render their line_format / label_format templates over labels whose
 * values are those bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "query/logql.h"
#include "query/logql_tmpl.h"
#include "storage/arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void lf_walk(const struct logql_lf *lf, const char *s, size_t n)
{
    if (lf == NULL) {
        return;
    }
    if (lf->kind == LOGQL_LF_AND || lf->kind == LOGQL_LF_OR) {
        lf_walk(lf->left, s, n);
        lf_walk(lf->right, s, n);
        return;
    }
    (void)logql_lf_test(lf, s, n);
    (void)logql_lf_test(lf, NULL, 0);
}

struct subject {
    const char *s;
    size_t n;
};

/* Every label exists and holds the subject, but __error__ (absent). */
static const char *fz_label(void *ctx, const char *name, size_t nn, size_t *vn)
{
    const struct subject *sj = ctx;
    if (nn == 9 && memcmp(name, "__error__", 9) == 0) {
        return NULL;
    }
    *vn = sj->n;
    return sj->s;
}

/* Two labels, "a" and "b", both holding the subject. */
static bool fz_label_at(void *ctx, size_t i, const char **name, size_t *nn, const char **v,
                        size_t *vn)
{
    const struct subject *sj = ctx;
    if (i >= 2) {
        return false;
    }
    *name = i == 0 ? "b" : "a";
    *nn = 1;
    *v = sj->s;
    *vn = sj->n;
    return true;
}

static void tmpl_run(const struct logql_tmpl *t, const char *s, size_t n)
{
    if (t == NULL) {
        return;
    }
    arena *scratch = arena_new(4096);
    if (scratch == NULL) {
        return;
    }
    arena_set_limit(scratch, 64u << 20);
    struct subject sj = {s, n};
    struct logql_tmpl_env env = {.label = fz_label,
                                 .label_at = fz_label_at,
                                 .ctx = &sj,
                                 .line = s,
                                 .line_n = n,
                                 .ts_ns = 1700000000123456789};
    const char *out;
    size_t on;
    char err[256];
    int rc = logql_tmpl_render(t, &env, scratch, &out, &on, err, sizeof(err));
    if (rc != 0 && (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL)) {
        __builtin_trap(); /* a failed render always says why */
    }
    arena_free(scratch);
}

static void log_walk(const struct logql_log *log, const char *s, size_t n)
{
    for (size_t i = 0; i < log->n_matchers; i++) {
        (void)logql_match_label(&log->matchers[i], s, n);
    }
    for (size_t i = 0; i < log->n_stages; i++) {
        const struct logql_stage *st = &log->stages[i];
        if (st->kind == LOGQL_STAGE_LINE_FILTER) {
            (void)logql_line_filter_match(st, s, n);
        } else if (st->kind == LOGQL_STAGE_LABEL_FILTER) {
            lf_walk(st->lf, s, n);
        } else if (st->kind == LOGQL_STAGE_DROP || st->kind == LOGQL_STAGE_KEEP) {
            for (size_t k = 0; k < st->n_labels; k++) {
                if (st->labels[k].value.s != NULL) {
                    (void)logql_match_label(&st->labels[k], s, n);
                }
            }
        } else if (st->kind == LOGQL_STAGE_PATTERN) {
            (void)logql_pattern_match(&st->pattern, s, n);
        } else if (st->kind == LOGQL_STAGE_LINE_FORMAT) {
            tmpl_run(st->tmpl, s, n);
        } else if (st->kind == LOGQL_STAGE_LABEL_FORMAT) {
            for (size_t k = 0; k < st->n_params; k++) {
                tmpl_run(st->params[k].tmpl, s, n);
            }
        }
    }
    size_t nn;
    const struct logql_str *nd = logql_log_needles(log, &nn);
    for (size_t i = 0; i < nn; i++) {
        if (nd[i].n == 0 || nd[i].s[nd[i].n] != '\0') {
            __builtin_trap();
        }
    }
}

static void expr_walk(const struct logql_expr *e, const char *s, size_t n, int depth)
{
    if (e == NULL || depth > 200) {
        return;
    }
    if (e->kind == LOGQL_EXPR_LOG || e->kind == LOGQL_EXPR_RANGE) {
        log_walk(&e->log, s, n);
    }
    if (e->kind == LOGQL_EXPR_LABEL_REPLACE && e->regex != NULL) {
        (void)qlex_re_match(e->regex, s, n);
    }
    expr_walk(e->inner, s, n, depth + 1);
    expr_walk(e->lhs, s, n, depth + 1);
    expr_walk(e->rhs, s, n, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct logql_expr *e = NULL;
    if (logql_parse_selector((const char *)data, size, size % 2 == 0, &e, err, sizeof(err)) == 0) {
        if (e->kind != LOGQL_EXPR_LOG || e->log.n_stages != 0) {
            __builtin_trap();
        }
        logql_free(e);
    }
    int rc = logql_parse((const char *)data, size, &e, err, sizeof(err));
    if (rc != 0) {
        if (e != NULL || err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL) {
            __builtin_trap(); /* a failure always leaves NULL and a message */
        }
        return 0;
    }
    /* the subject: the query bytes themselves, capped */
    expr_walk(e, (const char *)data, size < 512 ? size : 512, 0);
    (void)logql_is_metric(e);
    logql_free(e);
    return 0;
}
