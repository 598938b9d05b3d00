/*
 * logql_lits.c - the substrings a line filter requires (logql.h: struct
 * logql_substage), for the body gram bloom: the literal of |= and of |>'s
 * literal runs, and the required literals of a |~ regex.
 *
 * A regex yields only literals it provably requires: runs of literal
 * characters of its top-level concatenation. Anything this code is not sure
 * about ends the current run (which only loses information); a top-level
 * alternation yields nothing at all; groups, classes, escapes that are not
 * one literal character, anchors and '.' end a run; a quantifier that may
 * repeat its atom zero times (*, ?, {n,m}) takes that atom off the run
 * first, one that repeats it at least once (+) keeps it. Under the (?i)
 * flag a character is kept only when its case variants are all ASCII (the
 * gram bloom folds ASCII case only): not k or s (the Kelvin sign and the
 * long s fold to them), nor any non-ASCII character.
 */
#include "query/logql_int.h"

#include <string.h>

/* Length of the UTF-8 sequence a lead byte starts (1 for a stray byte). */
static size_t utf8_len(unsigned char c)
{
    return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(unsigned char c)
{
    return is_digit((char)c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* End of a character class opening at p[i] ('['), or 0 when it does not
 * close. A ']' right after '[' or '[^' is a member; so are [:name:]. */
static size_t class_end(const char *p, size_t n, size_t i)
{
    size_t j = i + 1;
    if (j < n && p[j] == '^') {
        j++;
    }
    size_t first = j;
    while (j < n) {
        if (p[j] == '\\') {
            j += 2;
            continue;
        }
        if (p[j] == '[' && j + 1 < n && p[j + 1] == ':') {
            size_t k = j + 2;
            while (k + 1 < n && !(p[k] == ':' && p[k + 1] == ']')) {
                k++;
            }
            if (k + 1 < n) {
                j = k + 2;
                continue;
            }
        }
        if (p[j] == ']' && j != first) {
            return j + 1;
        }
        j++;
    }
    return 0;
}

/* Length of the escape at p[i] ('\\') when it is not one literal byte. */
static size_t escape_len(const char *p, size_t n, size_t i)
{
    size_t j = i + 2;
    char d = i + 1 < n ? p[i + 1] : '\0';
    switch (d) {
    case 'x':
        if (j < n && p[j] == '{') {
            while (j < n && p[j] != '}') {
                j++;
            }
            return (j < n ? j + 1 : n) - i;
        }
        return (j + 2 <= n ? j + 2 : n) - i;
    case 'p':
    case 'P':
        if (j < n && p[j] == '{') {
            while (j < n && p[j] != '}') {
                j++;
            }
            return (j < n ? j + 1 : n) - i;
        }
        return (j + 1 <= n ? j + 1 : n) - i;
    case 'Q':
        while (j < n && !(p[j] == '\\' && j + 1 < n && p[j + 1] == 'E')) {
            j++;
        }
        return (j < n ? j + 2 : n) - i;
    default:
        if (d >= '0' && d <= '7') {
            for (int k = 0; k < 3 && j < n && p[j] >= '0' && p[j] <= '7'; k++) {
                j++;
            }
        }
        return (j <= n ? j : n) - i;
    }
}

/* End of the group opening at p[i] ('('), or 0 when it does not close. */
static size_t group_end(const char *p, size_t n, size_t i)
{
    unsigned depth = 0;
    size_t j = i;
    while (j < n) {
        char c = p[j];
        if (c == '\\') {
            j += escape_len(p, n, j);
            continue;
        }
        if (c == '[') {
            size_t e = class_end(p, n, j);
            if (e == 0) {
                return 0;
            }
            j = e;
            continue;
        }
        if (c == '(') {
            depth++;
        } else if (c == ')' && --depth == 0) {
            return j + 1;
        }
        j++;
    }
    return 0;
}

/* A repeat {n}, {n,}, {n,m} at p[i]: its length, or 0. */
static size_t repeat_len(const char *p, size_t n, size_t i)
{
    size_t j = i + 1, d0 = j;
    while (j < n && is_digit(p[j])) {
        j++;
    }
    if (j == d0) {
        return 0;
    }
    if (j < n && p[j] == ',') {
        j++;
        while (j < n && is_digit(p[j])) {
            j++;
        }
    }
    return j < n && p[j] == '}' ? j + 1 - i : 0;
}

/* The literal run being gathered into buf. */
struct lits {
    char *buf;
    size_t used; /* bytes of buf in emitted literals */
    size_t run;  /* bytes of the current run, at buf + used */
    size_t last; /* bytes of the run's last atom; 0: the last atom is not in it */
    struct logql_str *out;
    size_t n, max;
};

static void run_end(struct lits *l)
{
    if (l->run >= 3 && l->n < l->max) {
        l->out[l->n++] = (struct logql_str){l->buf + l->used, l->run};
        l->used += l->run;
    }
    l->run = l->last = 0;
}

static void run_add(struct lits *l, const char *s, size_t k)
{
    memcpy(l->buf + l->used + l->run, s, k);
    l->run += k;
    l->last = k;
}

size_t logql_re_literals(const char *p, size_t n, char *buf, struct logql_str *out, size_t max)
{
    struct lits l = {buf, 0, 0, 0, out, 0, max};
    bool ci = false;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        switch (c) {
        case '|':
            return 0; /* top-level alternation: no literal is required */
        case ')':
            return 0; /* unbalanced: not a pattern this code understands */
        case '(': {
            if (i + 1 < n && p[i + 1] == '?') {
                size_t k = i + 2;
                bool neg = false, ci_now = ci;
                while (k < n && strchr("imsU-", p[k]) != NULL && p[k] != '\0') {
                    if (p[k] == '-') {
                        neg = true;
                    } else if (p[k] == 'i') {
                        ci_now = !neg;
                    }
                    k++;
                }
                if (k < n && p[k] == ')') { /* (?flags): for the rest of the pattern */
                    run_end(&l);
                    ci = ci_now;
                    i = k + 1;
                    continue;
                }
            }
            size_t e = group_end(p, n, i);
            if (e == 0) {
                return 0;
            }
            run_end(&l);
            i = e;
            continue;
        }
        case '[': {
            size_t e = class_end(p, n, i);
            if (e == 0) {
                return 0;
            }
            run_end(&l);
            i = e;
            continue;
        }
        case '*':
        case '?':
        case '+':
        case '{': {
            size_t q = 1;
            if (c == '{') {
                q = repeat_len(p, n, i);
                if (q == 0) { /* a literal '{' in RE2; ending the run is enough */
                    run_end(&l);
                    i++;
                    continue;
                }
            }
            if (c != '+') {
                l.run -= l.last; /* the atom may occur zero times */
            }
            run_end(&l);
            i += q;
            if (i < n && p[i] == '?') {
                i++; /* lazy */
            }
            continue;
        }
        case '^':
        case '$':
        case '.':
            run_end(&l);
            i++;
            continue;
        case '\\': {
            char d = i + 1 < n ? p[i + 1] : '\0';
            char lit = 0;
            if (d != '\0' && (unsigned char)d < 0x80 && !is_alnum((unsigned char)d)) {
                lit = d; /* escaped punctuation */
            } else {
                static const char esc[] = "tnrfav", val[] = "\t\n\r\f\a\v";
                const char *e = d != '\0' ? strchr(esc, d) : NULL;
                lit = e != NULL ? val[e - esc] : 0;
            }
            if (lit != 0 && !(ci && strchr("kKsS", lit) != NULL)) {
                run_add(&l, &lit, 1);
                i += 2;
                continue;
            }
            run_end(&l);
            i += escape_len(p, n, i);
            continue;
        }
        default: {
            size_t k = utf8_len(c);
            if (k > n - i) {
                k = n - i;
            }
            if (ci && (c >= 0x80 || c == 'k' || c == 'K' || c == 's' || c == 'S')) {
                run_end(&l); /* a case variant outside ASCII */
            } else {
                run_add(&l, p + i, k);
            }
            i += k;
            continue;
        }
        }
    }
    run_end(&l);
    return l.n;
}

/* ---- the substages of a log expression ------------------------------------------ */

#define ALT_LITS_MAX 8

/* The literals alternative |a| of a stage with |op| requires, into |sa|;
 * false when it requires none (the stage cannot rule a block out). */
static bool alt_lits(struct parser *p, enum logql_filter_op op, const struct logql_filter_alt *a,
                     struct logql_subalt *sa)
{
    struct logql_str tmp[ALT_LITS_MAX];
    size_t n = 0;
    if (op == LOGQL_FILTER_CONTAINS) {
        if (!a->ip && a->value.n >= 3) {
            tmp[n++] = a->value;
        }
    } else if (op == LOGQL_FILTER_PATTERN) {
        for (size_t i = 0; i < a->pattern.n_parts && n < ALT_LITS_MAX; i++) {
            if (a->pattern.parts[i].lit.n >= 3) {
                tmp[n++] = a->pattern.parts[i].lit;
            }
        }
    } else if (op == LOGQL_FILTER_RE) {
        char *buf = qlex_alloc(&p->lx, a->value.n + 1);
        if (buf == NULL) {
            return false;
        }
        n = logql_re_literals(a->value.s, a->value.n, buf, tmp, ALT_LITS_MAX);
    }
    if (n == 0) {
        return false;
    }
    sa->lits = qlex_alloc(&p->lx, n * sizeof(*sa->lits));
    if (sa->lits == NULL) {
        return false;
    }
    memcpy(sa->lits, tmp, n * sizeof(*tmp));
    sa->n_lits = n;
    return true;
}

int logql_collect_substrs(struct parser *p, struct logql_log *log)
{
    size_t cap = 0;
    for (size_t k = 0; k < log->n_stages; k++) {
        const struct logql_stage *st = &log->stages[k];
        if (st->kind == LOGQL_STAGE_LINE_FORMAT || st->kind == LOGQL_STAGE_DECOLORIZE ||
            st->kind == LOGQL_STAGE_UNPACK) {
            break; /* later filters see a rewritten line */
        }
        if (st->kind != LOGQL_STAGE_LINE_FILTER || st->n_alts == 0 ||
            (st->filter_op != LOGQL_FILTER_CONTAINS && st->filter_op != LOGQL_FILTER_RE &&
             st->filter_op != LOGQL_FILTER_PATTERN)) {
            continue;
        }
        struct logql_subalt *alts = qlex_alloc(&p->lx, st->n_alts * sizeof(*alts));
        if (alts == NULL) {
            return p->lx.rc;
        }
        bool all = true;
        for (size_t i = 0; i < st->n_alts && all; i++) {
            all = alt_lits(p, st->filter_op, &st->alts[i], &alts[i]);
        }
        if (p->lx.rc != 0) {
            return p->lx.rc;
        }
        if (!all) {
            continue; /* one alternative may match anything */
        }
        struct logql_substage *ss = PUSH(p, log->substages, log->n_substages, cap);
        if (ss == NULL) {
            return p->lx.rc;
        }
        ss->alts = alts;
        ss->n_alts = st->n_alts;
    }
    return 0;
}

const struct logql_substage *logql_log_substrs(const struct logql_log *log, size_t *n)
{
    *n = log->n_substages;
    return log->substages;
}
