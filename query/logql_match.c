/*
 * logql_match.c - what the LogQL executor runs per row on a parsed tree:
 * stream matchers, line filters, patterns, label filter tests (see
 * logql.h).
 */
#include "query/logql.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- executor helpers ----------------------------------------------------------- */

bool logql_match_label(const struct logql_matcher *m, const char *v, size_t n)
{
    if (v == NULL) {
        v = "";
        n = 0;
    }
    switch (m->op) {
    case LOGQL_MATCH_EQ:
        return n == m->value.n && memcmp(v, m->value.s, n) == 0;
    case LOGQL_MATCH_NEQ:
        return !(n == m->value.n && memcmp(v, m->value.s, n) == 0);
    case LOGQL_MATCH_RE:
        return qlex_re_match(m->re, v, n) == 1;
    case LOGQL_MATCH_NRE:
        return qlex_re_match(m->re, v, n) != 1;
    }
    return false;
}

/* Loki's pattern.Matcher.Test: literal runs are found left to right (first
 * occurrence); a run that follows a capture must not start right where the
 * capture starts (captures are never empty); a pattern ending in a capture
 * needs text left over, one ending in a literal needs none. An empty line
 * matches only an empty pattern. The first run is searched, not anchored. */
bool logql_pattern_match(const struct logql_pattern *pt, const char *s, size_t n)
{
    bool empty_pattern = pt->n_parts == 0 || (pt->n_parts == 1 && pt->parts[0].lit.n == 0 &&
                                              pt->parts[0].capture.s == NULL);
    if (n == 0 || empty_pattern) {
        return n == 0 && empty_pattern;
    }
    size_t off = 0, elem = 0;
    for (size_t k = 0; k < pt->n_parts; k++) {
        const struct logql_pattern_part *part = &pt->parts[k];
        if (part->lit.n > 0) {
            const char *hit = memmem(s + off, n - off, part->lit.s, part->lit.n);
            if (hit == NULL) {
                return false;
            }
            size_t j = (size_t)(hit - (s + off));
            if (elem != 0 && j == 0) {
                return false;
            }
            off += j + part->lit.n;
            elem++;
        }
        if (part->capture.s != NULL) {
            elem++;
        }
    }
    bool ends_with_capture = pt->parts[pt->n_parts - 1].capture.s != NULL;
    return ends_with_capture == (off != n);
}

static bool alt_match(enum logql_filter_op op, const struct logql_filter_alt *a, const char *s,
                      size_t n)
{
    switch (op) {
    case LOGQL_FILTER_CONTAINS:
    case LOGQL_FILTER_NOT_CONTAINS:
        return a->value.n == 0 || memmem(s, n, a->value.s, a->value.n) != NULL;
    case LOGQL_FILTER_RE:
    case LOGQL_FILTER_NOT_RE:
        return qlex_re_match(a->re, s, n) == 1;
    case LOGQL_FILTER_PATTERN:
    case LOGQL_FILTER_NOT_PATTERN:
        return logql_pattern_match(&a->pattern, s, n);
    }
    return false;
}

bool logql_line_filter_match(const struct logql_stage *st, const char *line, size_t n)
{
    if (line == NULL) {
        line = "";
        n = 0;
    }
    bool any = false;
    for (size_t i = 0; i < st->n_alts && !any; i++) {
        any = alt_match(st->filter_op, &st->alts[i], line, n);
    }
    bool negative = st->filter_op == LOGQL_FILTER_NOT_CONTAINS ||
                    st->filter_op == LOGQL_FILTER_NOT_RE ||
                    st->filter_op == LOGQL_FILTER_NOT_PATTERN;
    return negative ? !any : any;
}

static bool cmp_double(enum logql_cmp c, double a, double b)
{
    switch (c) {
    case LOGQL_CMP_EQ:
        return a == b;
    case LOGQL_CMP_NE:
        return a != b;
    case LOGQL_CMP_GT:
        return a > b;
    case LOGQL_CMP_GE:
        return a >= b;
    case LOGQL_CMP_LT:
        return a < b;
    case LOGQL_CMP_LE:
        return a <= b;
    }
    return false;
}

static bool cmp_i64(enum logql_cmp c, int64_t a, int64_t b)
{
    switch (c) {
    case LOGQL_CMP_EQ:
        return a == b;
    case LOGQL_CMP_NE:
        return a != b;
    case LOGQL_CMP_GT:
        return a > b;
    case LOGQL_CMP_GE:
        return a >= b;
    case LOGQL_CMP_LT:
        return a < b;
    case LOGQL_CMP_LE:
        return a <= b;
    }
    return false;
}

/* Go strconv.ParseFloat-like: the whole value must be a number. */
static int parse_float(const char *v, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return -EINVAL;
    }
    memcpy(buf, v, n);
    buf[n] = '\0';
    if (buf[0] == ' ' || buf[0] == '\t' || buf[0] == '\n') {
        return -EINVAL;
    }
    char *end;
    double d = strtod(buf, &end);
    if (*end != '\0') {
        return -EINVAL;
    }
    *out = d;
    return 0;
}

int logql_lf_test(const struct logql_lf *lf, const char *v, size_t n)
{
    switch (lf->kind) {
    case LOGQL_LF_STRING:
        return logql_match_label(&lf->m, v, n) ? 1 : 0;
    case LOGQL_LF_NUMBER:
    case LOGQL_LF_BYTES: {
        if (v == NULL) {
            return 0;
        }
        double d;
        int rc = lf->kind == LOGQL_LF_NUMBER ? parse_float(v, n, &d) : qlex_parse_bytes(v, n, &d);
        if (rc != 0) {
            return -EINVAL;
        }
        return cmp_double(lf->cmp, d, lf->num) ? 1 : 0;
    }
    case LOGQL_LF_DURATION: {
        if (v == NULL) {
            return 0;
        }
        int64_t ns;
        if (qlex_parse_duration(v, n, false, &ns) != 0) {
            return -EINVAL;
        }
        return cmp_i64(lf->cmp, ns, lf->dur_ns) ? 1 : 0;
    }
    case LOGQL_LF_IP:
        /* TODO(#4): ip() matching belongs to the executor (address/CIDR/range parse). */
        return -EINVAL;
    case LOGQL_LF_AND:
    case LOGQL_LF_OR:
        break;
    }
    return -EINVAL;
}
