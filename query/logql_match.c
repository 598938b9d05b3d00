/*
 * logql_match.c - what the LogQL executor runs per row on a parsed tree:
 * stream matchers, line filters, patterns, label filter tests (see
 * logql.h).
 */
#include "query/logql.h"

#include <arpa/inet.h>
#include <ctype.h>
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

/* An address as 16 bytes (IPv4 mapped into ::ffff:0:0/96). */
static bool ip_parse(const char *s, size_t n, uint8_t out[16], bool *v4)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, out + 12) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        *v4 = true;
        return true;
    }
    *v4 = false;
    return inet_pton(AF_INET6, buf, out) == 1;
}

int logql_ip_match(const struct logql_str *pat, const char *v, size_t vn)
{
    uint8_t a[16], lo[16], hi[16];
    bool v4, p4;
    if (v == NULL || !ip_parse(v, vn, a, &v4)) {
        return 0;
    }
    const char *slash = memchr(pat->s, '/', pat->n);
    const char *dash = memchr(pat->s, '-', pat->n);
    if (slash != NULL) {
        if (!ip_parse(pat->s, (size_t)(slash - pat->s), lo, &p4)) {
            return -EINVAL;
        }
        char *end;
        long bits = strtol(slash + 1, &end, 10);
        if (end != pat->s + pat->n || bits < 0 || bits > (p4 ? 32 : 128)) {
            return -EINVAL;
        }
        if (p4) {
            bits += 96;
        }
        for (long i = 0; i < bits; i++) {
            uint8_t m = (uint8_t)(0x80 >> (i % 8));
            if ((a[i / 8] & m) != (lo[i / 8] & m)) {
                return 0;
            }
        }
        return 1;
    }
    if (dash != NULL) {
        if (!ip_parse(pat->s, (size_t)(dash - pat->s), lo, &p4) ||
            !ip_parse(dash + 1, (size_t)(pat->s + pat->n - dash - 1), hi, &p4)) {
            return -EINVAL;
        }
        return memcmp(a, lo, 16) >= 0 && memcmp(a, hi, 16) <= 0;
    }
    if (!ip_parse(pat->s, pat->n, lo, &p4)) {
        return -EINVAL;
    }
    return memcmp(a, lo, 16) == 0;
}

static bool ip_v4_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || c == '.';
}

static bool ip_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool ip_v6_char(unsigned char c)
{
    return ip_hex(c) || c == ':' || c == '.';
}

/* Loki's ipFilter.filter: walk the line; where an address may start (a
 * digit with a '.' within the next 3 bytes, or a hex run of 1-4 then ':' or
 * "::" and a hex digit), take the longest run of address characters and
 * test it; a run that does not match is skipped whole. */
int logql_ip_line_match(const struct logql_str *pat, const char *line, size_t n)
{
    const unsigned char *s = (const unsigned char *)line;
#define AT(k) ((k) < n ? s[k] : 0)
    for (size_t i = 0; i < n; i++) {
        bool (*charset)(unsigned char) = NULL;
        if (i + 3 < n && s[i] >= '0' && s[i] <= '9' &&
            (s[i + 1] == '.' || s[i + 2] == '.' || s[i + 3] == '.')) {
            charset = ip_v4_char;
        } else if ((AT(i) == ':' && AT(i + 1) == ':' && ip_hex(AT(i + 2))) ||
                   (ip_hex(AT(i)) && AT(i + 1) == ':') ||
                   (ip_hex(AT(i)) && ip_hex(AT(i + 1)) && AT(i + 2) == ':') ||
                   (ip_hex(AT(i)) && ip_hex(AT(i + 1)) && ip_hex(AT(i + 2)) && AT(i + 3) == ':') ||
                   (ip_hex(AT(i)) && ip_hex(AT(i + 1)) && ip_hex(AT(i + 2)) && ip_hex(AT(i + 3)) &&
                    AT(i + 4) == ':')) {
            charset = ip_v6_char;
        }
        if (charset == NULL) {
            continue;
        }
        size_t len = 0;
        while (i + len < n && charset(s[i + len])) {
            len++;
        }
        int m = logql_ip_match(pat, line + i, len);
        if (m != 0) {
            return m;
        }
        i += len;
    }
#undef AT
    return 0;
}

/* The value of group |name| (n bytes; a number or a group name) of a
 * label_replace match, or NULL when there is no such group or it did not
 * take part. */
static const char *re_group(const qlex_re *re, const char *sv, const size_t *ovec, unsigned pairs,
                            const char *name, size_t n, size_t *vn)
{
    unsigned g = 0;
    bool num = n > 0;
    for (size_t i = 0; i < n; i++) {
        num = num && name[i] >= '0' && name[i] <= '9';
    }
    if (num) {
        for (size_t i = 0; i < n && g <= 65536; i++) {
            g = g * 10 + (unsigned)(name[i] - '0');
        }
    } else {
        unsigned ng = qlex_re_named_groups(re), i;
        for (i = 0; i < ng; i++) {
            const char *gn;
            if (qlex_re_group_name(re, i, &gn, &g) == 0 && strlen(gn) == n &&
                memcmp(gn, name, n) == 0) {
                break;
            }
        }
        if (i == ng) {
            return NULL;
        }
    }
    if (g >= pairs || ovec[2 * g] == SIZE_MAX) {
        return NULL;
    }
    *vn = ovec[2 * g + 1] - ovec[2 * g];
    return sv + ovec[2 * g];
}

/* Go's Regexp.Expand: $1, ${1}, $name,
 * ${name} (a name is the longest run of letters, digits and '_', so "$1x"
 * is the group named "1x"), "$$" is a '$'; an unknown group is empty, a '$'
 * not followed by a name is kept. Writes at most cap-1 bytes and a NUL when
 * out is not NULL; returns the full length. */
size_t logql_re_expand(const qlex_re *re, const char *t, size_t tn, const char *sv,
                       const size_t *ovec, unsigned pairs, char *out, size_t cap)
{
    size_t o = 0;
#define LR_PUT(p, k)                                                                               \
    do {                                                                                           \
        for (size_t z_ = 0; z_ < (k); z_++, o++) {                                                 \
            if (out != NULL && o + 1 < cap) {                                                      \
                out[o] = (p)[z_];                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    for (size_t i = 0; i < tn;) {
        if (t[i] != '$' || i + 1 >= tn) {
            LR_PUT(t + i, 1);
            i++;
            continue;
        }
        if (t[i + 1] == '$') {
            LR_PUT("$", 1);
            i += 2;
            continue;
        }
        size_t a = i + 1, b;
        bool brace = t[a] == '{';
        if (brace) {
            a++;
        }
        for (b = a; b < tn && (isalnum((unsigned char)t[b]) || t[b] == '_'); b++) {
        }
        if (b == a || (brace && (b >= tn || t[b] != '}'))) {
            LR_PUT(t + i, 1); /* not a reference: the '$' stays */
            i++;
            continue;
        }
        size_t vn = 0;
        const char *v = re_group(re, sv, ovec, pairs, t + a, b - a, &vn);
        if (v != NULL) {
            LR_PUT(v, vn);
        }
        i = brace ? b + 1 : b;
    }
#undef LR_PUT
    if (out != NULL && cap > 0) {
        out[o < cap ? o : cap - 1] = '\0';
    }
    return o;
}

static bool alt_match(enum logql_filter_op op, const struct logql_filter_alt *a, const char *s,
                      size_t n)
{
    switch (op) {
    case LOGQL_FILTER_CONTAINS:
    case LOGQL_FILTER_NOT_CONTAINS:
        if (a->ip) {
            return logql_ip_line_match(&a->value, s, n) == 1;
        }
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
