/*
 * logql_tmpl_fn.c - the functions LogQL templates may call (Loki's
 * function map: Go's builtins, Loki's own, the sprig subset Loki
 * enables), with their arities, and value conversions and printing (see
 * logql_tmpl.h and logql_tmpl_int.h).
 */
#include "query/logql_tmpl_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/base64.h"
#include "lib/dtoa.h"
#include "lib/jsonlex.h"
#include "query/logql.h"
#include "query/qlex.h"

enum fn_id {
    F_AND,
    F_OR,
    F_NOT,
    F_LEN,
    F_INDEX,
    F_PRINT,
    F_PRINTF,
    F_PRINTLN,
    F_EQ,
    F_NE,
    F_LT,
    F_LE,
    F_GT,
    F_GE,
    F_HTML,
    F_JS,
    F_URLQUERY,
    /* Loki's own */
    F_TOLOWER,
    F_TOUPPER,
    F_REPLACE_GO,
    F_TRIM_GO,
    F_TRIMLEFT_GO,
    F_TRIMRIGHT_GO,
    F_TRIMPREFIX_GO,
    F_TRIMSUFFIX_GO,
    F_TRIMSPACE_GO,
    F_REGEX_REPLACE_ALL,
    F_REGEX_REPLACE_ALL_LITERAL,
    F_COUNT,
    F_URLDECODE,
    F_URLENCODE,
    F_BYTES,
    F_DURATION,
    F_DURATION_SECONDS,
    F_UNIX_EPOCH_MILLIS,
    F_UNIX_EPOCH_NANOS,
    F_TO_DATE_IN_ZONE,
    F_UNIX_TO_TIME,
    F_ALIGN_LEFT,
    F_ALIGN_RIGHT,
    F_B64DEC,
    /* sprig */
    F_B64ENC,
    F_LOWER,
    F_UPPER,
    F_TITLE,
    F_TRUNC,
    F_SUBSTR,
    F_CONTAINS,
    F_HASPREFIX,
    F_HASSUFFIX,
    F_INDENT,
    F_NINDENT,
    F_REPLACE,
    F_REPEAT,
    F_TRIM,
    F_TRIMALL,
    F_TRIMSUFFIX,
    F_TRIMPREFIX,
    F_INT,
    F_FLOAT64,
    F_ADD,
    F_SUB,
    F_MUL,
    F_DIV,
    F_MOD,
    F_ADDF,
    F_SUBF,
    F_MULF,
    F_DIVF,
    F_MAX,
    F_MIN,
    F_MAXF,
    F_MINF,
    F_CEIL,
    F_FLOOR,
    F_ROUND,
    F_FROMJSON,
    F_DATE,
    F_TODATE,
    F_NOW,
    F_UNIX_EPOCH,
    F_DEFAULT,
    F_COUNT_OF
};

/* Name and number of arguments (the piped value included) of each. */
static const struct {
    const char *name;
    unsigned char lo, hi;
} FNS[F_COUNT_OF] = {
    {"and", 1, TMPL_MAX_ARGS_FN},
    {"or", 1, TMPL_MAX_ARGS_FN},
    {"not", 1, 1},
    {"len", 1, 1},
    {"index", 1, TMPL_MAX_ARGS_FN},
    {"print", 0, TMPL_MAX_ARGS_FN},
    {"printf", 1, TMPL_MAX_ARGS_FN},
    {"println", 0, TMPL_MAX_ARGS_FN},
    {"eq", 2, TMPL_MAX_ARGS_FN},
    {"ne", 2, 2},
    {"lt", 2, 2},
    {"le", 2, 2},
    {"gt", 2, 2},
    {"ge", 2, 2},
    {"html", 0, TMPL_MAX_ARGS_FN},
    {"js", 0, TMPL_MAX_ARGS_FN},
    {"urlquery", 0, TMPL_MAX_ARGS_FN},
    {"ToLower", 1, 1},
    {"ToUpper", 1, 1},
    {"Replace", 4, 4},
    {"Trim", 2, 2},
    {"TrimLeft", 2, 2},
    {"TrimRight", 2, 2},
    {"TrimPrefix", 2, 2},
    {"TrimSuffix", 2, 2},
    {"TrimSpace", 1, 1},
    {"regexReplaceAll", 3, 3},
    {"regexReplaceAllLiteral", 3, 3},
    {"count", 2, 2},
    {"urldecode", 1, 1},
    {"urlencode", 1, 1},
    {"bytes", 1, 1},
    {"duration", 1, 1},
    {"duration_seconds", 1, 1},
    {"unixEpochMillis", 1, 1},
    {"unixEpochNanos", 1, 1},
    {"toDateInZone", 3, 3},
    {"unixToTime", 1, 1},
    {"alignLeft", 2, 2},
    {"alignRight", 2, 2},
    {"b64dec", 1, 1},
    {"b64enc", 1, 1},
    {"lower", 1, 1},
    {"upper", 1, 1},
    {"title", 1, 1},
    {"trunc", 2, 2},
    {"substr", 3, 3},
    {"contains", 2, 2},
    {"hasPrefix", 2, 2},
    {"hasSuffix", 2, 2},
    {"indent", 2, 2},
    {"nindent", 2, 2},
    {"replace", 3, 3},
    {"repeat", 2, 2},
    {"trim", 1, 1},
    {"trimAll", 2, 2},
    {"trimSuffix", 2, 2},
    {"trimPrefix", 2, 2},
    {"int", 1, 1},
    {"float64", 1, 1},
    {"add", 1, TMPL_MAX_ARGS_FN},
    {"sub", 2, 2},
    {"mul", 1, TMPL_MAX_ARGS_FN},
    {"div", 2, 2},
    {"mod", 2, 2},
    {"addf", 1, TMPL_MAX_ARGS_FN},
    {"subf", 1, TMPL_MAX_ARGS_FN},
    {"mulf", 1, TMPL_MAX_ARGS_FN},
    {"divf", 1, TMPL_MAX_ARGS_FN},
    {"max", 1, TMPL_MAX_ARGS_FN},
    {"min", 1, TMPL_MAX_ARGS_FN},
    {"maxf", 1, TMPL_MAX_ARGS_FN},
    {"minf", 1, TMPL_MAX_ARGS_FN},
    {"ceil", 1, 1},
    {"floor", 1, 1},
    {"round", 2, 3},
    {"fromJson", 1, 1},
    {"date", 2, 2},
    {"toDate", 2, 2},
    {"now", 0, 0},
    {"unixEpoch", 1, 1},
    {"default", 1, 2},
};

int tmpl_fn_lookup(const char *name, size_t n)
{
    for (int i = 0; i < F_COUNT_OF; i++) {
        if (strlen(FNS[i].name) == n && memcmp(FNS[i].name, name, n) == 0) {
            return i;
        }
    }
    return -1;
}

bool tmpl_fn_takes_regex(int fn)
{
    return fn == F_REGEX_REPLACE_ALL || fn == F_REGEX_REPLACE_ALL_LITERAL || fn == F_COUNT;
}

/* ---- values ---------------------------------------------------------------- */

struct tv tmpl_str(const char *s, size_t n)
{
    return (struct tv){.k = TV_STR, .s = s, .n = n};
}

static struct tv tv_int(int64_t i)
{
    return (struct tv){.k = TV_INT, .i = i};
}

static struct tv tv_float(double f)
{
    return (struct tv){.k = TV_FLOAT, .f = f};
}

static struct tv tv_bool(bool b)
{
    return (struct tv){.k = TV_BOOL, .b = b};
}

static char *talloc(struct tctx *c, size_t n)
{
    char *p = arena_alloc(c->a, n ? n : 1);
    if (p == NULL) {
        tmpl_fail(c, "out of memory");
    }
    return p;
}

/* Go's strconv.FormatFloat(f, 'g', -1, 64), which %v uses: 1e+06, 123456,
 * 0.0001, 1e-05. */
static size_t fmt_float(double f, char *out)
{
    if (isnan(f)) {
        return (size_t)sprintf(out, "NaN");
    }
    if (isinf(f)) {
        return (size_t)sprintf(out, f > 0 ? "+Inf" : "-Inf");
    }
    if (f == 0) {
        return (size_t)sprintf(out, signbit(f) ? "-0" : "0");
    }
    char d[17];
    int dp, o = 0;
    int nd = dtoa_shortest(fabs(f), d, &dp);
    if (f < 0) {
        out[o++] = '-';
    }
    int exp = dp - 1;
    if (exp < -4 || exp >= 6) { /* 'g' with the shortest precision: Go decides with 6 */
        out[o++] = d[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, d + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        o += sprintf(out + o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return (size_t)o;
    }
    if (dp <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -dp; i++) {
            out[o++] = '0';
        }
        memcpy(out + o, d, (size_t)nd);
        return (size_t)(o + nd);
    }
    for (int i = 0; i < dp; i++) {
        out[o++] = i < nd ? d[i] : '0';
    }
    if (nd > dp) {
        out[o++] = '.';
        memcpy(out + o, d + dp, (size_t)(nd - dp));
        o += nd - dp;
    }
    return (size_t)o;
}

int tmpl_to_str(struct tctx *c, const struct tv *v, const char **s, size_t *n)
{
    char buf[64];
    size_t l = 0;
    switch (v->k) {
    case TV_STR:
    case TV_JSON:
        *s = v->s;
        *n = v->n;
        return 0;
    case TV_NIL:
        *s = "";
        *n = 0;
        return 0;
    case TV_INT:
        l = (size_t)snprintf(buf, sizeof(buf), "%" PRId64, v->i);
        break;
    case TV_FLOAT:
        l = fmt_float(v->f, buf);
        break;
    case TV_BOOL:
        *s = v->b ? "true" : "false";
        *n = v->b ? 4 : 5;
        return 0;
    case TV_TIME:
        l = tmpl_fmt_time(v, buf, sizeof(buf));
        break;
    case TV_LABELS:
        *s = "map[]";
        *n = 5;
        return 0;
    }
    char *p = talloc(c, l);
    if (p == NULL) {
        return -ENOMEM;
    }
    memcpy(p, buf, l);
    *s = p;
    *n = l;
    return 0;
}

/* spf13/cast ToInt64: strings parse as integers (base prefixes allowed,
 * a ".0" tail trimmed), otherwise 0. */
int64_t tmpl_to_int(const struct tv *v)
{
    switch (v->k) {
    case TV_INT:
    case TV_TIME:
        return v->i;
    case TV_FLOAT:
        return isfinite(v->f) ? (int64_t)v->f : 0;
    case TV_BOOL:
        return v->b;
    case TV_STR: {
        char buf[64];
        size_t n = v->n < sizeof(buf) - 1 ? v->n : 0;
        memcpy(buf, v->s, n);
        buf[n] = '\0';
        char *dot = strchr(buf, '.');
        if (dot != NULL && strspn(dot + 1, "0") == strlen(dot + 1)) {
            *dot = '\0';
        }
        char *end;
        errno = 0;
        long long r = strtoll(buf, &end, 0);
        return n > 0 && *end == '\0' && errno == 0 ? r : 0;
    }
    default:
        return 0;
    }
}

double tmpl_to_float(const struct tv *v)
{
    switch (v->k) {
    case TV_INT:
    case TV_TIME:
        return (double)v->i;
    case TV_FLOAT:
        return v->f;
    case TV_BOOL:
        return v->b;
    case TV_STR: {
        char buf[64];
        size_t n = v->n < sizeof(buf) - 1 ? v->n : 0;
        memcpy(buf, v->s, n);
        buf[n] = '\0';
        char *end;
        double r = strtod(buf, &end);
        return n > 0 && *end == '\0' ? r : 0;
    }
    default:
        return 0;
    }
}

bool tmpl_truth(const struct tv *v)
{
    switch (v->k) {
    case TV_NIL:
        return false;
    case TV_STR:
        return v->n > 0;
    case TV_INT:
        return v->i != 0;
    case TV_FLOAT:
        return v->f != 0;
    case TV_BOOL:
        return v->b;
    case TV_JSON:
        return v->n > 2 && !(v->n == 2); /* "{}" / "[]" are empty */
    default:
        return true;
    }
}

/* ---- helpers -------------------------------------------------------------- */

void tmpl_buf_put(struct obuf *b, const char *s, size_t n)
{
    if (b->oom || b->big || n == 0) {
        return;
    }
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n) {
            nc *= 2;
        }
        if (nc > TMPL_MAX_OUT) {
            b->big = true;
            return;
        }
        char *np = arena_alloc(b->c->a, nc);
        if (np == NULL) {
            b->oom = true;
            return;
        }
        if (b->n) {
            memcpy(np, b->p, b->n);
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static int ob_done(struct obuf *b, struct tv *out)
{
    if (b->oom || b->big) {
        return tmpl_fail(b->c, b->big ? "template output too large" : "out of memory");
    }
    *out = tmpl_str(b->p ? b->p : "", b->n);
    return 0;
}

/* Arguments as strings (into sv/sn). */
static int strs(struct tctx *c, const struct tv *argv, size_t argc, const char **sv, size_t *sn)
{
    for (size_t i = 0; i < argc; i++) {
        int rc = tmpl_to_str(c, &argv[i], &sv[i], &sn[i]);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static bool in_set(char ch, const char *set, size_t n)
{
    return memchr(set, ch, n) != NULL;
}

static int str_out(struct tctx *c, const char *s, size_t n, struct tv *out)
{
    char *p = talloc(c, n);
    if (p == NULL) {
        return -ENOMEM;
    }
    memcpy(p, s, n);
    *out = tmpl_str(p, n);
    return 0;
}

/* strings.Replace(s, old, new, n) (n < 0: all). */
static int replace(struct tctx *c, const char *s, size_t n, const char *o, size_t on,
                   const char *nw, size_t nn, int64_t lim, struct tv *out)
{
    struct obuf b = {.c = c};
    size_t i = 0;
    int64_t done = 0;
    if (on == 0) { /* Go: inserts at the start and after each UTF-8 sequence */
        while (i <= n && (lim < 0 || done < lim)) {
            tmpl_buf_put(&b, nw, nn);
            done++;
            if (i == n) {
                i++;
                break;
            }
            size_t l = 1;
            while (i + l < n && ((unsigned char)s[i + l] & 0xC0) == 0x80) {
                l++;
            }
            tmpl_buf_put(&b, s + i, l);
            i += l;
        }
        if (i < n) {
            tmpl_buf_put(&b, s + i, n - i);
        }
        return ob_done(&b, out);
    }
    while (i < n && (lim < 0 || done < lim)) {
        const char *h = memmem(s + i, n - i, o, on);
        if (h == NULL) {
            break;
        }
        tmpl_buf_put(&b, s + i, (size_t)(h - (s + i)));
        tmpl_buf_put(&b, nw, nn);
        i = (size_t)(h - s) + on;
        done++;
    }
    tmpl_buf_put(&b, s + i, n - i);
    return ob_done(&b, out);
}

static size_t utf8_len(const char *s, size_t n, size_t i)
{
    size_t l = 1;
    while (i + l < n && ((unsigned char)s[i + l] & 0xC0) == 0x80) {
        l++;
    }
    return l;
}

static size_t rune_count(const char *s, size_t n)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i += utf8_len(s, n, i)) {
        r++;
    }
    return r;
}

/* Byte offset of rune |r| (n when past the end). */
static size_t rune_off(const char *s, size_t n, size_t r)
{
    size_t i = 0;
    while (r-- > 0 && i < n) {
        i += utf8_len(s, n, i);
    }
    return i;
}

static int cmp_vals(struct tctx *c, const struct tv *a, const struct tv *b, int *res)
{
    bool an = a->k == TV_INT || a->k == TV_FLOAT, bn = b->k == TV_INT || b->k == TV_FLOAT;
    if (an && bn) {
        if (a->k == TV_INT && b->k == TV_INT) {
            *res = a->i < b->i ? -1 : a->i > b->i;
        } else {
            double x = tmpl_to_float(a), y = tmpl_to_float(b);
            *res = x < y ? -1 : x > y;
        }
        return 0;
    }
    if (a->k == TV_STR && b->k == TV_STR) {
        size_t m = a->n < b->n ? a->n : b->n;
        int r = memcmp(a->s, b->s, m);
        *res = r != 0 ? (r < 0 ? -1 : 1) : (a->n < b->n ? -1 : a->n > b->n);
        return 0;
    }
    if (a->k == TV_BOOL && b->k == TV_BOOL) {
        *res = a->b == b->b ? 0 : 2; /* 2: unequal, unordered */
        return 0;
    }
    if (a->k == TV_NIL && b->k == TV_NIL) {
        *res = 0;
        return 0;
    }
    return tmpl_fail(c, "incompatible types for comparison");
}

static bool url_unreserved(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

/* A regex function's replace or count over s. */
static int regex_fn(struct tctx *c, int fn, const qlex_re *re, const char *s, size_t n,
                    const char *repl, size_t rn, struct tv *out)
{
    enum { PAIRS = 32 };
    size_t ov[2 * PAIRS];
    unsigned pairs = qlex_re_capture_count(re) + 1;
    pairs = pairs > PAIRS ? PAIRS : pairs;
    struct obuf b = {.c = c};
    size_t i = 0, last = 0;
    int64_t cnt = 0;
    size_t prev_end = SIZE_MAX;
    for (unsigned iter = 0; i <= n && iter < 10000000; iter++) {
        int m = qlex_re_exec_at(re, s, n, i, ov, pairs);
        if (m < 0) {
            return tmpl_fail(c, "regex match limit hit");
        }
        if (m == 0) {
            break;
        }
        size_t ms = ov[0], me = ov[1];
        if (!(ms == me && ms == prev_end)) { /* Go skips an empty match right after a match */
            cnt++;
            if (fn != F_COUNT) {
                tmpl_buf_put(&b, s + last, ms - last);
                if (fn == F_REGEX_REPLACE_ALL) {
                    size_t l = logql_re_expand(re, repl, rn, s, ov, pairs, NULL, 0);
                    char *t = talloc(c, l + 1);
                    if (t == NULL) {
                        return -ENOMEM;
                    }
                    logql_re_expand(re, repl, rn, s, ov, pairs, t, l + 1);
                    tmpl_buf_put(&b, t, l);
                } else {
                    tmpl_buf_put(&b, repl, rn);
                }
                last = me;
            }
        }
        prev_end = me;
        if (me > i) {
            i = me;
        } else {
            if (i >= n) {
                break;
            }
            i += utf8_len(s, n, i);
        }
    }
    if (fn == F_COUNT) {
        *out = tv_int(cnt);
        return 0;
    }
    tmpl_buf_put(&b, s + last, n - last);
    return ob_done(&b, out);
}

/* ---- the dispatcher ------------------------------------------------------- */

/* The arity check every call passes first (FNS). */
static int need(struct tctx *c, int fn, size_t argc, size_t lo, size_t hi)
{
    if (argc < lo || argc > hi) {
        if (lo == hi) {
            return tmpl_fail(c, "wrong number of args for %s: want %zu got %zu", FNS[fn].name, lo,
                             argc);
        }
        if (hi == TMPL_MAX_ARGS_FN && argc < lo) {
            return tmpl_fail(c, "wrong number of args for %s: want at least %zu got %zu",
                             FNS[fn].name, lo, argc);
        }
        return tmpl_fail(c, "wrong number of args for %s: want %zu to %zu got %zu", FNS[fn].name,
                         lo, hi, argc);
    }
    return 0;
}

/* Go's fmt.Sprintf for the verbs templates use: %s %v %d %f %g %e %q %x %t
 * %%, with flags, width and precision. */
static int do_printf(struct tctx *c, const struct tv *argv, size_t argc, struct tv *out)
{
    const char *f;
    size_t fn_;
    if (tmpl_to_str(c, &argv[0], &f, &fn_) != 0) {
        return -EINVAL;
    }
    struct obuf b = {.c = c};
    size_t ai = 1;
    for (size_t i = 0; i < fn_; i++) {
        if (f[i] != '%') {
            tmpl_buf_put(&b, f + i, 1);
            continue;
        }
        size_t st = i++;
        while (i < fn_ && strchr("+-# 0", f[i])) {
            i++;
        }
        while (i < fn_ && ((f[i] >= '0' && f[i] <= '9') || f[i] == '.')) {
            i++;
        }
        if (i >= fn_) {
            tmpl_buf_put(&b, "%!(NOVERB)", 10);
            break;
        }
        char verb = f[i];
        if (verb == '%') {
            tmpl_buf_put(&b, "%", 1);
            continue;
        }
        char spec[32];
        size_t sl = i - st;
        if (sl > 20) {
            sl = 20;
        }
        memcpy(spec, f + st, sl);
        if (ai >= argc) {
            char m[32];
            int ml = snprintf(m, sizeof(m), "%%!%c(MISSING)", verb);
            tmpl_buf_put(&b, m, (size_t)ml);
            continue;
        }
        const struct tv *a = &argv[ai++];
        char buf[512];
        int l = 0;
        if (verb == 'd' || verb == 'x' || verb == 'X' || verb == 'o' || verb == 'c') {
            if (a->k == TV_STR && verb == 'x') {
                for (size_t k = 0; k < a->n && l + 3 < (int)sizeof(buf); k++) {
                    l += snprintf(buf + l, sizeof(buf) - (size_t)l, "%02x", (unsigned char)a->s[k]);
                }
            } else {
                memcpy(spec + sl, "ll", 2);
                spec[sl + 2] = verb == 'c' ? 'c' : verb;
                spec[sl + 3] = '\0';
                l = verb == 'c' ? snprintf(buf, sizeof(buf), "%c", (int)tmpl_to_int(a))
                                : snprintf(buf, sizeof(buf), spec, (long long)tmpl_to_int(a));
            }
        } else if (verb == 'f' || verb == 'F' || verb == 'e' || verb == 'E' || verb == 'g' ||
                   verb == 'G') {
            spec[sl] = verb;
            spec[sl + 1] = '\0';
            l = snprintf(buf, sizeof(buf), spec, tmpl_to_float(a));
        } else if (verb == 'q') {
            const char *s;
            size_t n;
            if (tmpl_to_str(c, a, &s, &n) != 0) {
                return -EINVAL;
            }
            tmpl_buf_put(&b, "\"", 1);
            for (size_t k = 0; k < n; k++) {
                if (s[k] == '"' || s[k] == '\\') {
                    tmpl_buf_put(&b, "\\", 1);
                }
                tmpl_buf_put(&b, s + k, 1);
            }
            tmpl_buf_put(&b, "\"", 1);
            continue;
        } else { /* s v t and the rest: the value's %v, with width */
            const char *s;
            size_t n;
            if (tmpl_to_str(c, a, &s, &n) != 0) {
                return -EINVAL;
            }
            if (a->k == TV_NIL) {
                s = "<nil>";
                n = 5;
            }
            spec[sl] = 's';
            spec[sl + 1] = '\0';
            if (sl == 1) {
                tmpl_buf_put(&b, s, n);
                continue;
            }
            char *t = talloc(c, n + 1);
            if (t == NULL) {
                return -ENOMEM;
            }
            memcpy(t, s, n);
            t[n] = '\0';
            l = snprintf(buf, sizeof(buf), spec, t);
        }
        if (l > 0) {
            tmpl_buf_put(&b, buf, (size_t)l < sizeof(buf) ? (size_t)l : sizeof(buf) - 1);
        }
    }
    return ob_done(&b, out);
}

/* Go's fmt.Sprint (spaces between operands when neither is a string) and
 * Sprintln (spaces always, a newline at the end). */
static int do_print(struct tctx *c, const struct tv *argv, size_t argc, bool ln, struct tv *out)
{
    struct obuf b = {.c = c};
    for (size_t i = 0; i < argc; i++) {
        if (i > 0 && (ln || (argv[i].k != TV_STR && argv[i - 1].k != TV_STR))) {
            tmpl_buf_put(&b, " ", 1);
        }
        const char *s;
        size_t n;
        if (argv[i].k == TV_NIL) {
            s = "<nil>";
            n = 5;
        } else if (tmpl_to_str(c, &argv[i], &s, &n) != 0) {
            return -EINVAL;
        }
        tmpl_buf_put(&b, s, n);
    }
    if (ln) {
        tmpl_buf_put(&b, "\n", 1);
    }
    return ob_done(&b, out);
}

static int escape_fn(struct tctx *c, int fn, const char *s, size_t n, struct tv *out)
{
    struct obuf b = {.c = c};
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[8];
        const char *r = NULL;
        if (fn == F_HTML) {
            r = ch == '&'    ? "&amp;"
                : ch == '\'' ? "&#39;"
                : ch == '<'  ? "&lt;"
                : ch == '>'  ? "&gt;"
                : ch == '"'  ? "&#34;"
                : ch == 0    ? "\xEF\xBF\xBD"
                             : NULL;
        } else if (fn == F_JS) {
            r = ch == '\\'   ? "\\\\"
                : ch == '\'' ? "\\'"
                : ch == '"'  ? "\\\""
                : ch == '<'  ? "\\u003C"
                : ch == '>'  ? "\\u003E"
                : ch == '&'  ? "\\u0026"
                : ch == '='  ? "\\u003D"
                : ch == '\n' ? "\\n"
                : ch == '\r' ? "\\r"
                : ch == '\t' ? "\\t"
                             : NULL;
            if (r == NULL && ch < 0x20) {
                snprintf(e, sizeof(e), "\\u%04X", ch);
                r = e;
            }
        } else { /* urlquery / urlencode: url.QueryEscape */
            if (url_unreserved(ch)) {
                r = NULL;
            } else if (ch == ' ') {
                r = "+";
            } else {
                snprintf(e, sizeof(e), "%%%02X", ch);
                r = e;
            }
        }
        if (r != NULL) {
            tmpl_buf_put(&b, r, strlen(r));
        } else {
            tmpl_buf_put(&b, s + i, 1);
        }
    }
    return ob_done(&b, out);
}

static int hexv(char h)
{
    return h >= '0' && h <= '9'   ? h - '0'
           : h >= 'a' && h <= 'f' ? h - 'a' + 10
           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                  : -1;
}

static int arith(struct tctx *c, int fn, const struct tv *argv, size_t argc, struct tv *out)
{
    if (fn == F_ADDF || fn == F_SUBF || fn == F_MULF || fn == F_DIVF || fn == F_MAXF ||
        fn == F_MINF) {
        double r = tmpl_to_float(&argv[0]);
        for (size_t i = 1; i < argc; i++) {
            double x = tmpl_to_float(&argv[i]);
            r = fn == F_ADDF   ? r + x
                : fn == F_SUBF ? r - x
                : fn == F_MULF ? r * x
                : fn == F_DIVF ? r / x
                : fn == F_MAXF ? (x > r ? x : r)
                               : (x < r ? x : r);
        }
        if (fn == F_DIVF && !isfinite(r)) {
            return tmpl_fail(c, "error calling divf: division by zero");
        }
        *out = tv_float(r);
        return 0;
    }
    if (fn == F_ADD || fn == F_MUL || fn == F_MAX || fn == F_MIN) {
        int64_t r = tmpl_to_int(&argv[0]);
        for (size_t i = 1; i < argc; i++) {
            int64_t x = tmpl_to_int(&argv[i]);
            r = fn == F_ADD   ? (int64_t)((uint64_t)r + (uint64_t)x)
                : fn == F_MUL ? (int64_t)((uint64_t)r * (uint64_t)x)
                : fn == F_MAX ? (x > r ? x : r)
                              : (x < r ? x : r);
        }
        *out = tv_int(r);
        return 0;
    }
    int64_t a = tmpl_to_int(&argv[0]), b = tmpl_to_int(&argv[1]);
    if ((fn == F_DIV || fn == F_MOD) && b == 0) {
        return tmpl_fail(c, "error calling %s: runtime error: integer divide by zero",
                         FNS[fn].name);
    }
    if ((fn == F_DIV || fn == F_MOD) && a == INT64_MIN && b == -1) {
        *out = tv_int(fn == F_DIV ? INT64_MIN : 0);
        return 0;
    }
    *out = tv_int(fn == F_SUB ? (int64_t)((uint64_t)a - (uint64_t)b) : fn == F_DIV ? a / b : a % b);
    return 0;
}

static int now_ns(int64_t *ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return 0;
}

int tmpl_fn_call(struct tctx *c, int fn, const qlex_re *re, const struct tv *argv, size_t argc,
                 struct tv *out)
{
    const char *sv[TMPL_MAX_ARGS_FN];
    size_t sn[TMPL_MAX_ARGS_FN];
    int rc = 0;
    if (need(c, fn, argc, FNS[fn].lo, FNS[fn].hi) != 0) {
        return -EINVAL;
    }
    switch (fn) {
    case F_AND:
    case F_OR:
        for (size_t i = 0; i < argc; i++) {
            if (tmpl_truth(&argv[i]) == (fn == F_OR) || i == argc - 1) {
                *out = argv[i];
                return 0;
            }
        }
        return 0;
    case F_NOT:
        *out = tv_bool(!tmpl_truth(&argv[0]));
        return 0;
    case F_LEN:
        if (argv[0].k == TV_STR) {
            *out = tv_int((int64_t)argv[0].n);
            return 0;
        }
        if (argv[0].k == TV_JSON) {
            struct jsonlex x;
            jsonlex_init(&x, argv[0].s, argv[0].n);
            bool obj = jsonlex_peek(&x) == '{', first = true;
            x.pos++;
            int64_t k = 0;
            struct jsonlex_str key;
            while ((obj ? jsonlex_obj_next(&x, &key, &first) : jsonlex_arr_next(&x, &first)) == 1 &&
                   jsonlex_skip(&x) == 0) {
                k++;
            }
            *out = tv_int(k);
            return 0;
        }
        return tmpl_fail(c, "error calling len: len of a value with no length");
    case F_INDEX: {
        struct tv v = argv[0];
        for (size_t i = 1; i < argc && rc == 0; i++) {
            struct tv nx = {.k = TV_NIL};
            if (v.k == TV_JSON && v.s[0] == '[') {
                rc = tmpl_json_index(c, &v, tmpl_to_int(&argv[i]), &nx);
            } else if (v.k == TV_JSON) {
                rc = tmpl_to_str(c, &argv[i], &sv[0], &sn[0]);
                if (rc == 0) {
                    rc = tmpl_json_member(c, &v, sv[0], sn[0], &nx);
                }
            } else if (v.k == TV_STR) {
                int64_t k = tmpl_to_int(&argv[i]);
                if (k < 0 || (size_t)k >= v.n) {
                    return tmpl_fail(c, "error calling index: index out of range: %" PRId64, k);
                }
                nx = tv_int((unsigned char)v.s[k]);
            } else if (v.k == TV_LABELS) {
                rc = tmpl_to_str(c, &argv[i], &sv[0], &sn[0]);
                size_t vn = 0;
                const char *lv =
                    rc == 0 && c->env->label ? c->env->label(c->env->ctx, sv[0], sn[0], &vn) : NULL;
                nx = tmpl_str(lv ? lv : "", lv ? vn : 0);
            } else {
                return tmpl_fail(c, "error calling index: can't index item of this type");
            }
            v = nx;
        }
        *out = v;
        return rc;
    }
    case F_PRINT:
    case F_PRINTLN:
        return do_print(c, argv, argc, fn == F_PRINTLN, out);
    case F_PRINTF:
        return do_printf(c, argv, argc, out);
    case F_EQ: {
        bool any = false;
        for (size_t i = 1; i < argc && !any; i++) {
            int r;
            if (cmp_vals(c, &argv[0], &argv[i], &r) != 0) {
                return -EINVAL;
            }
            any = r == 0;
        }
        *out = tv_bool(any);
        return 0;
    }
    case F_NE:
    case F_LT:
    case F_LE:
    case F_GT:
    case F_GE: {
        int r;
        if (cmp_vals(c, &argv[0], &argv[1], &r) != 0) {
            return -EINVAL;
        }
        if (r == 2 && fn != F_NE) {
            return tmpl_fail(c, "invalid type for comparison");
        }
        *out = tv_bool(fn == F_NE   ? r != 0
                       : fn == F_LT ? r < 0
                       : fn == F_LE ? r <= 0
                       : fn == F_GT ? r > 0
                                    : r >= 0);
        return 0;
    }
    case F_HTML:
    case F_JS:
    case F_URLQUERY: {
        struct tv j;
        if (do_print(c, argv, argc, false, &j) != 0) {
            return -EINVAL;
        }
        return escape_fn(c, fn, j.s, j.n, out);
    }
    case F_NOW:
        out->k = TV_TIME;
        return now_ns(&out->i);
    case F_DEFAULT:
        *out = argc == 2 && tmpl_truth(&argv[1]) ? argv[1] : argv[0];
        return 0;
    case F_FROMJSON:
        if (strs(c, argv, 1, sv, sn) != 0) {
            return -EINVAL;
        }
        if (tmpl_json_value(c, sv[0], sn[0], out) != 0) {
            *out = (struct tv){.k = TV_STR, .s = "", .n = 0}; /* sprig's fromJson: "" on error */
            c->failed = false;
        }
        return 0;
    case F_INT:
        *out = tv_int(tmpl_to_int(&argv[0]));
        return 0;
    case F_FLOAT64:
        *out = tv_float(tmpl_to_float(&argv[0]));
        return 0;
    case F_ADD:
    case F_SUB:
    case F_MUL:
    case F_DIV:
    case F_MOD:
    case F_ADDF:
    case F_SUBF:
    case F_MULF:
    case F_DIVF:
    case F_MAX:
    case F_MIN:
    case F_MAXF:
    case F_MINF:
        return arith(c, fn, argv, argc, out);
    case F_CEIL:
    case F_FLOOR:
        *out =
            tv_float(fn == F_CEIL ? ceil(tmpl_to_float(&argv[0])) : floor(tmpl_to_float(&argv[0])));
        return 0;
    case F_ROUND: {
        double x = tmpl_to_float(&argv[0]), r = argc == 3 ? tmpl_to_float(&argv[2]) : 0.5;
        double pw = pow(10, (double)tmpl_to_int(&argv[1]));
        double d = x * pw, whole;
        double fr = modf(d, &whole);
        double rd = fabs(fr) >= r ? (d >= 0 ? ceil(d) : floor(d)) : (d >= 0 ? floor(d) : ceil(d));
        *out = tv_float(rd / pw);
        return 0;
    }
    case F_DATE: {
        if (strs(c, argv, 1, sv, sn) != 0) {
            return -EINVAL;
        }
        /* sprig's date: a time, or Unix seconds (int); anything else is "now" */
        struct tv t = argv[1];
        if (t.k == TV_INT) {
            t = (struct tv){.k = TV_TIME, .i = t.i * 1000000000};
        } else if (t.k == TV_FLOAT) {
            t = (struct tv){.k = TV_TIME, .i = (int64_t)(t.f * 1e9)};
        } else if (t.k != TV_TIME) {
            t = (struct tv){.k = TV_TIME};
            now_ns(&t.i);
        }
        char buf[256];
        size_t l = tmpl_go_format(sv[0], sn[0], &t, buf, sizeof(buf));
        return str_out(c, buf, l, out);
    }
    case F_TODATE:
    case F_TO_DATE_IN_ZONE: {
        size_t want = fn == F_TODATE ? 2 : 3;
        if (strs(c, argv, argc, sv, sn) != 0) {
            return -EINVAL;
        }
        int64_t ns = 0;
        if (tmpl_go_parse(sv[0], sn[0], sv[want - 1], sn[want - 1], &ns) != 0) {
            *out = (struct tv){.k = TV_TIME, .b = true}; /* Go's zero Time, 0001-01-01 UTC */
            return 0;
        }
        *out = (struct tv){.k = TV_TIME, .i = ns};
        return 0;
    }
    case F_UNIX_EPOCH:
    case F_UNIX_EPOCH_MILLIS:
    case F_UNIX_EPOCH_NANOS: {
        if (argv[0].k != TV_TIME) {
            return tmpl_fail(c, "error calling %s: wrong type for value; expected time.Time",
                             FNS[fn].name);
        }
        int64_t ns = argv[0].i;
        if (argv[0].b) { /* the zero time (its nanoseconds wrap in Go too) */
            if (fn == F_UNIX_EPOCH) {
                *out = tv_int(GO_ZERO_TIME);
                return 0;
            }
            static const char MS[] = "-62135596800000", NS_[] = "-6795364578871345152";
            return fn == F_UNIX_EPOCH_MILLIS ? str_out(c, MS, sizeof(MS) - 1, out)
                                             : str_out(c, NS_, sizeof(NS_) - 1, out);
        }
        int64_t s = ns >= 0 ? ns / 1000000000 : -((-ns + 999999999) / 1000000000);
        int64_t ms = ns >= 0 ? ns / 1000000 : -((-ns + 999999) / 1000000);
        if (fn == F_UNIX_EPOCH) {
            *out = tv_int(s); /* sprig returns a string of it; printed the same */
            return 0;
        }
        char buf[32];
        int l = snprintf(buf, sizeof(buf), "%" PRId64, fn == F_UNIX_EPOCH_MILLIS ? ms : ns);
        return str_out(c, buf, (size_t)l, out);
    }
    case F_UNIX_TO_TIME: {
        if (strs(c, argv, 1, sv, sn) != 0) {
            return -EINVAL;
        }
        char buf[32];
        size_t l = sn[0] < sizeof(buf) - 1 ? sn[0] : 0;
        memcpy(buf, sv[0], l);
        buf[l] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        if (l == 0 || *end != '\0' || errno != 0) {
            return tmpl_fail(c, "unable to parse time '%s'", buf);
        }
        int64_t ns;
        switch (l) {
        case 5:
            ns = (int64_t)v * 86400 * 1000000000;
            break;
        case 10:
            ns = (int64_t)v * 1000000000;
            break;
        case 13:
            ns = (int64_t)v * 1000000;
            break;
        case 16:
            ns = (int64_t)v * 1000;
            break;
        case 19:
            ns = (int64_t)v;
            break;
        default:
            return tmpl_fail(c, "unable to parse time '%s': unsupported length", buf);
        }
        *out = (struct tv){.k = TV_TIME, .i = ns};
        return 0;
    }
    case F_BYTES:
    case F_DURATION:
    case F_DURATION_SECONDS: {
        if (strs(c, argv, 1, sv, sn) != 0) {
            return -EINVAL;
        }
        if (fn == F_BYTES) {
            double b;
            if (qlex_parse_bytes(sv[0], sn[0], &b) != 0) {
                return tmpl_fail(c, "error calling bytes: invalid size \"%.*s\"", (int)sn[0],
                                 sv[0]);
            }
            *out = tv_float(b);
            return 0;
        }
        int64_t ns;
        if (qlex_parse_duration(sv[0], sn[0], false, &ns) != 0) {
            return tmpl_fail(c, "error calling %s: invalid duration \"%.*s\"", FNS[fn].name,
                             (int)sn[0], sv[0]);
        }
        *out = tv_float((double)ns / 1e9);
        return 0;
    }
    default:
        break;
    }
    /* the string functions: every argument as a string */
    if (strs(c, argv, argc, sv, sn) != 0) {
        return -EINVAL;
    }
    switch (fn) {
    case F_TOLOWER:
    case F_TOUPPER:
    case F_LOWER:
    case F_UPPER:
    case F_TITLE: {
        char *p = talloc(c, sn[0]);
        if (p == NULL) {
            return -ENOMEM;
        }
        bool up = fn == F_TOUPPER || fn == F_UPPER, word = true;
        for (size_t i = 0; i < sn[0]; i++) {
            char ch = sv[0][i];
            if (fn == F_TITLE) {
                p[i] = word && ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
                word = ch == ' ' || ch == '\t' || ch == '\n' || ch == '-' || ch == '_';
            } else if (up) {
                p[i] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
            } else {
                p[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
            }
        }
        *out = tmpl_str(p, sn[0]);
        return 0;
    }
    case F_REPLACE_GO: /* strings.Replace(s, old, new, n) */
        return replace(c, sv[0], sn[0], sv[1], sn[1], sv[2], sn[2], tmpl_to_int(&argv[3]), out);
    case F_REPLACE: /* sprig replace old new src */
        return replace(c, sv[2], sn[2], sv[0], sn[0], sv[1], sn[1], -1, out);
    case F_TRIM_GO:
    case F_TRIMLEFT_GO:
    case F_TRIMRIGHT_GO:
    case F_TRIMALL:
    case F_TRIM:
    case F_TRIMSPACE_GO: {
        const char *s, *set = " \t\n\r\v\f";
        size_t n, setn = 6;
        if (fn == F_TRIM || fn == F_TRIMSPACE_GO) {
            s = sv[0];
            n = sn[0];
        } else {
            bool sprig = fn == F_TRIMALL; /* trimAll cutset s */
            s = sprig ? sv[1] : sv[0];
            n = sprig ? sn[1] : sn[0];
            set = sprig ? sv[0] : sv[1];
            setn = sprig ? sn[0] : sn[1];
        }
        size_t a = 0, b = n;
        if (fn != F_TRIMRIGHT_GO) {
            while (a < b && in_set(s[a], set, setn)) {
                a++;
            }
        }
        if (fn != F_TRIMLEFT_GO) {
            while (b > a && in_set(s[b - 1], set, setn)) {
                b--;
            }
        }
        *out = tmpl_str(s + a, b - a);
        return 0;
    }
    case F_TRIMPREFIX_GO:
    case F_TRIMSUFFIX_GO:
    case F_TRIMPREFIX:
    case F_TRIMSUFFIX:
    case F_HASPREFIX:
    case F_HASSUFFIX:
    case F_CONTAINS: {
        bool go = fn == F_TRIMPREFIX_GO || fn == F_TRIMSUFFIX_GO;
        const char *s = go ? sv[0] : sv[1], *a = go ? sv[1] : sv[0];
        size_t n = go ? sn[0] : sn[1], an = go ? sn[1] : sn[0];
        bool pre = an <= n && memcmp(s, a, an) == 0;
        bool suf = an <= n && memcmp(s + n - an, a, an) == 0;
        switch (fn) {
        case F_HASPREFIX:
            *out = tv_bool(pre);
            break;
        case F_HASSUFFIX:
            *out = tv_bool(suf);
            break;
        case F_CONTAINS:
            *out = tv_bool(an == 0 || memmem(s, n, a, an) != NULL);
            break;
        case F_TRIMPREFIX_GO:
        case F_TRIMPREFIX:
            *out = pre ? tmpl_str(s + an, n - an) : tmpl_str(s, n);
            break;
        default:
            *out = suf ? tmpl_str(s, n - an) : tmpl_str(s, n);
            break;
        }
        return 0;
    }
    case F_TRUNC: { /* trunc n s: n < 0 keeps the last -n bytes */
        int64_t k = tmpl_to_int(&argv[0]);
        size_t n = sn[1];
        if (k < 0) {
            size_t m = (size_t)(-k) > n ? n : (size_t)(-k);
            *out = tmpl_str(sv[1] + n - m, m);
        } else {
            *out = tmpl_str(sv[1], (size_t)k < n ? (size_t)k : n);
        }
        return 0;
    }
    case F_SUBSTR: { /* substr start end s (bytes; end < 0: to the end) */
        int64_t a = tmpl_to_int(&argv[0]), b = tmpl_to_int(&argv[1]);
        size_t n = sn[2];
        if (a < 0) {
            *out = tmpl_str(sv[2], b < 0 || (size_t)b > n ? n : (size_t)b);
        } else if (b < 0 || (size_t)b > n) {
            *out = (size_t)a > n ? tmpl_str("", 0) : tmpl_str(sv[2] + a, n - (size_t)a);
        } else {
            *out = a > b ? tmpl_str("", 0) : tmpl_str(sv[2] + a, (size_t)(b - a));
        }
        return 0;
    }
    case F_INDENT:
    case F_NINDENT: {
        int64_t k = tmpl_to_int(&argv[0]);
        k = k < 0 ? 0 : k > 1024 ? 1024 : k;
        struct obuf b = {.c = c};
        char pad[1024];
        memset(pad, ' ', (size_t)k);
        if (fn == F_NINDENT) {
            tmpl_buf_put(&b, "\n", 1);
        }
        tmpl_buf_put(&b, pad, (size_t)k);
        for (size_t i = 0; i < sn[1]; i++) {
            tmpl_buf_put(&b, sv[1] + i, 1);
            if (sv[1][i] == '\n') {
                tmpl_buf_put(&b, pad, (size_t)k);
            }
        }
        return ob_done(&b, out);
    }
    case F_REPEAT: {
        int64_t k = tmpl_to_int(&argv[0]);
        if (k < 0 || (sn[1] > 0 && (uint64_t)k > (16u << 20) / sn[1])) {
            return tmpl_fail(c, "error calling repeat: count out of range");
        }
        struct obuf b = {.c = c};
        for (int64_t i = 0; i < k; i++) {
            tmpl_buf_put(&b, sv[1], sn[1]);
        }
        return ob_done(&b, out);
    }
    case F_ALIGN_LEFT:
    case F_ALIGN_RIGHT: {
        int64_t k = tmpl_to_int(&argv[0]);
        size_t runes = rune_count(sv[1], sn[1]);
        if (k < 0 || (size_t)k == runes || k > (1 << 20)) {
            *out = argv[1].k == TV_STR ? argv[1] : tmpl_str(sv[1], sn[1]);
            return 0;
        }
        if ((size_t)k < runes) {
            size_t cut = fn == F_ALIGN_LEFT ? rune_off(sv[1], sn[1], (size_t)k)
                                            : rune_off(sv[1], sn[1], runes - (size_t)k);
            *out = fn == F_ALIGN_LEFT ? tmpl_str(sv[1], cut) : tmpl_str(sv[1] + cut, sn[1] - cut);
            return 0;
        }
        struct obuf b = {.c = c};
        if (fn == F_ALIGN_RIGHT) {
            for (size_t i = runes; i < (size_t)k; i++) {
                tmpl_buf_put(&b, " ", 1);
            }
        }
        tmpl_buf_put(&b, sv[1], sn[1]);
        if (fn == F_ALIGN_LEFT) {
            for (size_t i = runes; i < (size_t)k; i++) {
                tmpl_buf_put(&b, " ", 1);
            }
        }
        return ob_done(&b, out);
    }
    case F_URLENCODE:
        return escape_fn(c, F_URLQUERY, sv[0], sn[0], out);
    case F_URLDECODE: {
        char *p = talloc(c, sn[0]);
        if (p == NULL) {
            return -ENOMEM;
        }
        size_t o = 0;
        for (size_t i = 0; i < sn[0]; i++) {
            char ch = sv[0][i];
            if (ch == '+') {
                p[o++] = ' ';
            } else if (ch == '%') {
                int h = i + 2 < sn[0] ? hexv(sv[0][i + 1]) : -1;
                int l = i + 2 < sn[0] ? hexv(sv[0][i + 2]) : -1;
                if (h < 0 || l < 0) {
                    return tmpl_fail(c, "error calling urldecode: invalid URL escape \"%.3s\"",
                                     sv[0] + i);
                }
                p[o++] = (char)(h * 16 + l);
                i += 2;
            } else {
                p[o++] = ch;
            }
        }
        *out = tmpl_str(p, o);
        return 0;
    }
    case F_B64ENC: {
        char *p = talloc(c, BASE64_ENCODED_LEN(sn[0]) + 1);
        if (p == NULL) {
            return -ENOMEM;
        }
        size_t l = base64_encode(p, (const uint8_t *)sv[0], sn[0], true);
        *out = tmpl_str(p, l);
        return 0;
    }
    case F_B64DEC: {
        size_t digits = base64_unpad(sv[0], sn[0]);
        long dl = base64_decoded_len(digits);
        uint8_t *p = dl >= 0 ? (uint8_t *)talloc(c, (size_t)dl) : NULL;
        if (dl < 0 || p == NULL || base64_decode(p, sv[0], digits) != 0) {
            static const char E[] = "illegal base64 data at input byte 0";
            *out = tmpl_str(E, sizeof(E) - 1); /* Loki's b64dec returns the error text */
            return 0;
        }
        *out = tmpl_str((const char *)p, (size_t)dl);
        return 0;
    }
    case F_REGEX_REPLACE_ALL:
    case F_REGEX_REPLACE_ALL_LITERAL:
        return regex_fn(c, fn, re, sv[1], sn[1], sv[2], sn[2], out);
    case F_COUNT:
        return regex_fn(c, fn, re, sv[1], sn[1], NULL, 0, out);
    default:
        return tmpl_fail(c, "function %s is not callable here", FNS[fn].name);
    }
}
