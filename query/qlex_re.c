/*
 * qlex_re.c - regular expressions for the LogQL and TraceQL parsers and
 * their executors (see qlex.h): Go RE2 syntax checked and translated to
 * PCRE2, compiled with JIT, matched under limits with per-thread match
 * data, and the per-thread limit-hit flag.
 */
#include "query/qlex.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "query/qlex_int.h"

struct qlex_re {
    pcre2_code *code;
    struct qlex_re *next;
};

/* Upper bounds for one regex match (LIBS.md 9): the JIT honours the match
 * limit; depth and heap limits bound the interpreter fallback. */
#define RE_MATCH_LIMIT 1000000u
#define RE_DEPTH_LIMIT 100000u
#define RE_HEAP_LIMIT_KIB (64u << 10)
#define RE_JIT_STACK_MAX (8u << 20) /* LIBS.md 9: 200,000-char alternations need it */
#define RE_REPEAT_MAX 1000

/* ---- regular expressions ------------------------------------------------ */

static const char *const posix_classes[] = {
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
    "lower", "print", "punct", "space", "upper", "word",  "xdigit",
};

static bool valid_posix_class(const char *s, size_t n)
{
    if (n > 0 && s[0] == '^') {
        s++;
        n--;
    }
    for (size_t i = 0; i < sizeof(posix_classes) / sizeof(posix_classes[0]); i++) {
        if (strlen(posix_classes[i]) == n && memcmp(posix_classes[i], s, n) == 0) {
            return true;
        }
    }
    return false;
}

enum re_prev {
    RE_NONE,      /* start, after ( or | */
    RE_ATOM,      /* something a repeat may follow */
    RE_QUANT,     /* a repeat operator */
    RE_QUANT_LZY, /* a repeat operator plus its lazy ? */
};

struct re_out {
    char *buf;
    size_t n;
};

static void re_put(struct re_out *o, const char *s, size_t n)
{
    memcpy(o->buf + o->n, s, n);
    o->n += n;
}

static void re_put_cp(struct re_out *o, unsigned v)
{
    o->n += (size_t)sprintf(o->buf + o->n, "\\x{%x}", v);
}

/* {n}, {n,}, {n,m} at p[i] ('{'): length of the repeat or 0 when '{' is a
 * literal; *bad set when a count exceeds RE_REPEAT_MAX. */
static size_t re_repeat_len(const char *p, size_t n, size_t i, bool *bad)
{
    size_t j = i + 1;
    long a = 0, b = 0;
    size_t d0 = j;
    while (j < n && is_digit(p[j])) {
        if (a <= 100000) {
            a = a * 10 + (p[j] - '0');
        }
        j++;
    }
    if (j == d0) {
        return 0;
    }
    if (j < n && p[j] == ',') {
        j++;
        size_t d1 = j;
        while (j < n && is_digit(p[j])) {
            if (b <= 100000) {
                b = b * 10 + (p[j] - '0');
            }
            j++;
        }
        if (j == d1) {
            b = -1;
        }
    } else {
        b = a;
    }
    if (j >= n || p[j] != '}') {
        return 0;
    }
    *bad = a > RE_REPEAT_MAX || b > RE_REPEAT_MAX;
    return j + 1 - i;
}

/* Checks Go RE2 syntax and writes the PCRE2 spelling to out (capacity
 * 6*n+1). Returns NULL, or a message with *at = offset in the pattern. */
static const char *re_translate(const char *p, size_t n, struct re_out *o, size_t *at)
{
    enum re_prev prev = RE_NONE;
    bool in_class = false;
    size_t class_first = 0; /* index where a leading ']' is literal */
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        *at = i;
        if (c == '\\') {
            if (i + 1 >= n) {
                return "trailing backslash at end of expression";
            }
            unsigned char d = (unsigned char)p[i + 1];
            if (d >= 0x80) {
                return "invalid escape sequence";
            }
            if (d >= '1' && d <= '9') {
                /* Go: \1..\7 followed by an octal digit is octal; else a
                 * backreference, which RE2 does not have. */
                if (d <= '7' && i + 2 < n && p[i + 2] >= '0' && p[i + 2] <= '7') {
                    unsigned v = 0;
                    size_t j = i + 1;
                    for (int k = 0; k < 3 && j < n && p[j] >= '0' && p[j] <= '7'; k++) {
                        v = v * 8 + (unsigned)(p[j++] - '0');
                    }
                    re_put_cp(o, v);
                    i = j;
                    prev = RE_ATOM;
                    continue;
                }
                return "backreferences are not supported (RE2 syntax)";
            }
            switch (d) {
            case '0': {
                unsigned v = 0;
                size_t j = i + 2;
                for (int k = 0; k < 2 && j < n && p[j] >= '0' && p[j] <= '7'; k++) {
                    v = v * 8 + (unsigned)(p[j++] - '0');
                }
                re_put_cp(o, v);
                i = j;
                prev = RE_ATOM;
                continue;
            }
            case 'v':
                re_put_cp(o, 0x0b); /* PCRE2's \v is a class of vertical space */
                i += 2;
                prev = RE_ATOM;
                continue;
            case 's':
            case 'S':
                /* Go's \s is [\t\n\f\r ]; PCRE2 adds \v */
                if (in_class) {
                    if (d == 's') {
                        re_put(o, "\\t\\n\\f\\r ", 9);
                    } else {
                        re_put(o, "\\S", 2);
                    }
                } else {
                    re_put(o, d == 's' ? "[\\t\\n\\f\\r ]" : "[^\\t\\n\\f\\r ]",
                           d == 's' ? 11 : 12);
                }
                i += 2;
                prev = RE_ATOM;
                continue;
            case 'a':
            case 'f':
            case 't':
            case 'n':
            case 'r':
            case 'd':
            case 'D':
            case 'w':
            case 'W':
                re_put(o, p + i, 2);
                i += 2;
                prev = RE_ATOM;
                continue;
            case 'A':
            case 'b':
            case 'B':
            case 'z':
                if (in_class) {
                    return "invalid escape sequence in character class";
                }
                re_put(o, p + i, 2);
                i += 2;
                prev = RE_ATOM;
                continue;
            case 'x': {
                size_t j = i + 2;
                if (j < n && p[j] == '{') {
                    j++;
                    size_t h0 = j;
                    while (j < n && hexval(p[j]) >= 0) {
                        j++;
                    }
                    if (j == h0 || j >= n || p[j] != '}' || j - h0 > 8) {
                        return "invalid escape sequence \\x{...}";
                    }
                    j++;
                } else {
                    if (j + 1 >= n || hexval(p[j]) < 0 || hexval(p[j + 1]) < 0) {
                        return "invalid escape sequence \\x (want 2 hex digits)";
                    }
                    j += 2;
                }
                re_put(o, p + i, j - i);
                i = j;
                prev = RE_ATOM;
                continue;
            }
            case 'p':
            case 'P': {
                size_t j = i + 2;
                if (j >= n) {
                    return "invalid character class range \\p";
                }
                if (p[j] == '{') {
                    while (j < n && p[j] != '}') {
                        j++;
                    }
                    if (j >= n) {
                        return "invalid character class range \\p{...}";
                    }
                    j++;
                } else {
                    j++;
                }
                re_put(o, p + i, j - i);
                i = j;
                prev = RE_ATOM;
                continue;
            }
            case 'Q': {
                if (in_class) {
                    return "invalid escape sequence \\Q in character class";
                }
                size_t j = i + 2;
                while (j < n && !(p[j] == '\\' && j + 1 < n && p[j + 1] == 'E')) {
                    j++;
                }
                size_t end = j < n ? j + 2 : n;
                re_put(o, p + i, j - i);
                re_put(o, "\\E", 2);
                i = end;
                prev = RE_ATOM;
                continue;
            }
            default:
                if (!is_alpha(d) && !is_digit(d)) {
                    re_put(o, p + i, 2); /* escaped punctuation is a literal */
                    i += 2;
                    prev = RE_ATOM;
                    continue;
                }
                return "invalid or unsupported escape sequence (RE2 syntax)";
            }
        }
        if (in_class) {
            if (c == ']' && i != class_first) {
                in_class = false;
                prev = RE_ATOM;
                re_put(o, "]", 1);
                i++;
                continue;
            }
            if (c == '[' && i + 1 < n && p[i + 1] == ':') {
                size_t j = i + 2;
                while (j + 1 < n && !(p[j] == ':' && p[j + 1] == ']')) {
                    j++;
                }
                if (j + 1 < n) {
                    if (!valid_posix_class(p + i + 2, j - i - 2)) {
                        return "invalid character class range";
                    }
                    re_put(o, p + i, j + 2 - i);
                    i = j + 2;
                    continue;
                }
            }
            re_put(o, p + i, 1);
            i++;
            continue;
        }
        switch (c) {
        case '[':
            in_class = true;
            re_put(o, "[", 1);
            i++;
            if (i < n && p[i] == '^') {
                re_put(o, "^", 1);
                i++;
            }
            class_first = i;
            continue;
        case '(':
            if (i + 1 < n && p[i + 1] == '*') {
                return "(*VERB) and (*FLAG) sequences are not supported (RE2 syntax)";
            }
            if (i + 1 < n && p[i + 1] == '?') {
                size_t j = i + 2;
                char g = j < n ? p[j] : '\0';
                if (g == '=' || g == '!') {
                    return "lookahead assertions are not supported (RE2 syntax)";
                }
                if (g == '<' && j + 1 < n && (p[j + 1] == '=' || p[j + 1] == '!')) {
                    return "lookbehind assertions are not supported (RE2 syntax)";
                }
                if (g == '>') {
                    return "atomic groups are not supported (RE2 syntax)";
                }
                if (g == '#') {
                    return "comments in expressions are not supported (RE2 syntax)";
                }
                if (g == '|') {
                    return "branch reset groups are not supported (RE2 syntax)";
                }
                if (g == '(') {
                    return "conditional groups are not supported (RE2 syntax)";
                }
                if (g == 'R' || g == '&' || g == '+' || is_digit(g) ||
                    (g == '-' && j + 1 < n && is_digit(p[j + 1])) ||
                    (g == 'P' && j + 1 < n && (p[j + 1] == '>' || p[j + 1] == '='))) {
                    return "recursion, subroutine calls and named backreferences are not "
                           "supported (RE2 syntax)";
                }
                if (g == 'C') {
                    return "callouts are not supported (RE2 syntax)";
                }
                if (g == '<' || (g == 'P' && j + 1 < n && p[j + 1] == '<')) {
                    size_t k = j + (g == 'P' ? 2 : 1);
                    size_t k0 = k;
                    while (k < n && is_ident(p[k])) {
                        k++;
                    }
                    if (k == k0 || k >= n || p[k] != '>') {
                        return "invalid named capture";
                    }
                    re_put(o, p + i, k + 1 - i);
                    i = k + 1;
                    prev = RE_NONE;
                    continue;
                }
                if (g == ':') {
                    re_put(o, "(?:", 3);
                    i += 3;
                    prev = RE_NONE;
                    continue;
                }
                /* flags: (?imsU-imsU) or (?imsU-imsU:re) */
                size_t k = j;
                bool neg = false, any = false, any_after_neg = false;
                while (k < n && p[k] != ')' && p[k] != ':') {
                    char f = p[k];
                    if (f == '-') {
                        if (neg) {
                            return "invalid or unsupported Perl syntax in flags";
                        }
                        neg = true;
                    } else if (f == 'i' || f == 'm' || f == 's' || f == 'U') {
                        any = true;
                        any_after_neg |= neg;
                    } else {
                        return "invalid or unsupported Perl syntax (flags are i, m, s, U)";
                    }
                    k++;
                }
                if (k >= n || !any || (neg && !any_after_neg)) {
                    return "invalid or unsupported Perl syntax in flags";
                }
                re_put(o, p + i, k + 1 - i);
                i = k + 1;
                prev = RE_NONE;
                continue;
            }
            re_put(o, "(", 1);
            i++;
            prev = RE_NONE;
            continue;
        case ')':
            re_put(o, ")", 1);
            i++;
            prev = RE_ATOM;
            continue;
        case '|':
            re_put(o, "|", 1);
            i++;
            prev = RE_NONE;
            continue;
        case '*':
        case '+':
        case '?':
            if (prev == RE_QUANT && c == '?') {
                prev = RE_QUANT_LZY;
            } else if (prev == RE_QUANT || prev == RE_QUANT_LZY) {
                return "invalid nested repetition operator (possessive repeats are not RE2 "
                       "syntax)";
            } else if (prev == RE_NONE) {
                return "missing argument to repetition operator";
            } else {
                prev = RE_QUANT;
            }
            re_put(o, p + i, 1);
            i++;
            continue;
        case '{': {
            bool bad = false;
            size_t l = re_repeat_len(p, n, i, &bad);
            if (l == 0) {
                re_put(o, "\\{", 2);
                i++;
                prev = RE_ATOM;
                continue;
            }
            if (bad) {
                return "invalid repeat count (at most 1000)";
            }
            if (prev == RE_QUANT || prev == RE_QUANT_LZY) {
                return "invalid nested repetition operator";
            }
            if (prev == RE_NONE) {
                return "missing argument to repetition operator";
            }
            re_put(o, p + i, l);
            i += l;
            prev = RE_QUANT;
            continue;
        }
        default:
            re_put(o, p + i, 1);
            i++;
            prev = RE_ATOM;
            continue;
        }
    }
    if (in_class) {
        *at = n;
        return "missing closing ]";
    }
    return NULL;
}

int qlex_re_compile(struct qlex *lx, size_t pos, const char *pat, size_t n, bool anchored,
                    qlex_re **out)
{
    char shown[96] = "";
    qlex_put_escaped(shown, sizeof(shown), pat, n, 48);
    struct re_out o;
    o.buf = arena_alloc(lx->a, 6 * n + 1);
    o.n = 0;
    if (o.buf == NULL) {
        return qlex_nomem(lx);
    }
    size_t at = 0;
    const char *why = re_translate(pat, n, &o, &at);
    if (why != NULL) {
        return qlex_fail(lx, pos, "invalid regular expression \"%s\": %s (at offset %zu)", shown,
                         why, at);
    }
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_NEVER_BACKSLASH_C |
                    PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_UCP;
    if (anchored) {
        opts |= PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOTALL;
    }
    int ec;
    PCRE2_SIZE eoff;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)o.buf, o.n, opts, &ec, &eoff, NULL);
    if (code == NULL) {
        PCRE2_UCHAR m[160];
        if (pcre2_get_error_message(ec, m, sizeof(m)) < 0) {
            snprintf((char *)m, sizeof(m), "error %d", ec);
        }
        return qlex_fail(lx, pos, "invalid regular expression \"%s\": %s", shown, (char *)m);
    }
    uint32_t backrefs = 0;
    pcre2_pattern_info(code, PCRE2_INFO_BACKREFMAX, &backrefs);
    if (backrefs > 0) {
        pcre2_code_free(code);
        return qlex_fail(lx, pos,
                         "invalid regular expression \"%s\": backreferences are not "
                         "supported (RE2 syntax)",
                         shown);
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* interpreter if it fails */
    qlex_re *re = arena_alloc(lx->a, sizeof(*re));
    if (re == NULL) {
        pcre2_code_free(code);
        return qlex_nomem(lx);
    }
    re->code = code;
    re->next = lx->res;
    lx->res = re;
    *out = re;
    return 0;
}

unsigned qlex_re_capture_count(const qlex_re *re)
{
    uint32_t count = 0;
    pcre2_pattern_info(re->code, PCRE2_INFO_CAPTURECOUNT, &count);
    return count;
}

int qlex_re_group_name(const qlex_re *re, unsigned i, const char **name, unsigned *group)
{
    uint32_t count = 0, size = 0;
    PCRE2_SPTR table = NULL;
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMECOUNT, &count);
    if (i >= count) {
        return -ENOENT;
    }
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMEENTRYSIZE, &size);
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMETABLE, &table);
    const unsigned char *e = (const unsigned char *)table + (size_t)i * size;
    *group = ((unsigned)e[0] << 8) | e[1]; /* 2 bytes, most significant first */
    *name = (const char *)(e + 2);
    return 0;
}

unsigned qlex_re_named_groups(const qlex_re *re)
{
    uint32_t count = 0;
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMECOUNT, &count);
    return count;
}

void qlex_re_free_all(qlex_re *list)
{
    while (list != NULL) {
        qlex_re *next = list->next;
        pcre2_code_free(list->code);
        list = next; /* the node itself lives in the parser's arena */
    }
}

/* Per-thread match state: match data, a match context with limits and a JIT
 * stack, freed by a pthread key destructor at thread exit. */
struct re_tls {
    pcre2_match_data *md;     /* one pair: match / no match */
    pcre2_match_data *cap_md; /* capture extraction, cap_pairs pairs */
    uint32_t cap_pairs;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
};

static __thread struct re_tls *re_tls_cur;
static __thread bool re_limit_hit; /* qlex_re_take_limit_hit */
static pthread_key_t re_tls_key;
static pthread_once_t re_tls_once = PTHREAD_ONCE_INIT;

static void re_tls_free(void *p)
{
    struct re_tls *t = p;
    if (t == NULL) {
        return;
    }
    pcre2_match_data_free(t->md);
    pcre2_match_data_free(t->cap_md);
    pcre2_match_context_free(t->mc);
    pcre2_jit_stack_free(t->js);
    free(t);
}

static void re_tls_key_init(void)
{
    (void)pthread_key_create(&re_tls_key, re_tls_free);
}

static struct re_tls *re_tls_get(void)
{
    if (re_tls_cur != NULL) {
        return re_tls_cur;
    }
    pthread_once(&re_tls_once, re_tls_key_init);
    struct re_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    t->md = pcre2_match_data_create(1, NULL);
    t->mc = pcre2_match_context_create(NULL);
    t->js = pcre2_jit_stack_create(32u << 10, RE_JIT_STACK_MAX, NULL);
    if (t->md == NULL || t->mc == NULL) {
        re_tls_free(t);
        return NULL;
    }
    pcre2_set_match_limit(t->mc, RE_MATCH_LIMIT);
    pcre2_set_depth_limit(t->mc, RE_DEPTH_LIMIT);
    pcre2_set_heap_limit(t->mc, RE_HEAP_LIMIT_KIB);
    if (t->js != NULL) {
        pcre2_jit_stack_assign(t->mc, NULL, t->js);
    }
    (void)pthread_setspecific(re_tls_key, t);
    re_tls_cur = t;
    return t;
}

void qlex_thread_cleanup(void)
{
    if (re_tls_cur != NULL) {
        (void)pthread_setspecific(re_tls_key, NULL);
        re_tls_free(re_tls_cur);
        re_tls_cur = NULL;
    }
}

int qlex_re_match(const qlex_re *re, const char *s, size_t n)
{
    struct re_tls *t = re_tls_get();
    if (t == NULL) {
        return -ENOMEM;
    }
    if (s == NULL) {
        s = "";
        n = 0;
    }
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, t->md, t->mc);
    if (rc >= 0) {
        return 1;
    }
    switch (rc) {
    case PCRE2_ERROR_NOMATCH:
        return 0;
    case PCRE2_ERROR_MATCHLIMIT:
    case PCRE2_ERROR_DEPTHLIMIT:
    case PCRE2_ERROR_HEAPLIMIT:
    case PCRE2_ERROR_JIT_STACKLIMIT:
    case PCRE2_ERROR_NOMEMORY:
        re_limit_hit = true;
        return -E2BIG;
    default:
        return -EINVAL;
    }
}

bool qlex_re_take_limit_hit(void)
{
    bool hit = re_limit_hit;
    re_limit_hit = false;
    return hit;
}

int qlex_re_exec(const qlex_re *re, const char *s, size_t n, size_t *ovec, unsigned pairs)
{
    return qlex_re_exec_at(re, s, n, 0, ovec, pairs);
}

int qlex_re_exec_at(const qlex_re *re, const char *s, size_t n, size_t start, size_t *ovec,
                    unsigned pairs)
{
    struct re_tls *t = re_tls_get();
    if (t == NULL || pairs == 0) {
        return t == NULL ? -ENOMEM : -EINVAL;
    }
    if (t->cap_md == NULL || t->cap_pairs < pairs) {
        pcre2_match_data *md = pcre2_match_data_create(pairs, NULL);
        if (md == NULL) {
            return -ENOMEM;
        }
        pcre2_match_data_free(t->cap_md);
        t->cap_md = md;
        t->cap_pairs = pairs;
    }
    if (s == NULL) {
        s = "";
        n = 0;
    }
    if (start > n) {
        return 0;
    }
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, 0, t->cap_md, t->mc);
    if (rc == PCRE2_ERROR_NOMATCH) {
        return 0;
    }
    if (rc < 0) {
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
            rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT ||
            rc == PCRE2_ERROR_NOMEMORY) {
            re_limit_hit = true;
            return -E2BIG;
        }
        return -EINVAL;
    }
    /* rc = highest group set + 1 (0: every pair was filled) */
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->cap_md);
    for (unsigned g = 0; g < pairs; g++) {
        bool set = rc == 0 || g < (unsigned)rc;
        ovec[2 * g] = set && ov[2 * g] != PCRE2_UNSET ? ov[2 * g] : SIZE_MAX;
        ovec[2 * g + 1] = set && ov[2 * g + 1] != PCRE2_UNSET ? ov[2 * g + 1] : SIZE_MAX;
    }
    return 1;
}
