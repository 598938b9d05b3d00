/*
 * qlex.c - shared lexer, literal decoders and RE2-on-PCRE2 regex wrapper for
 * the LogQL and TraceQL parsers (see qlex.h).
 *
 * LEXICAL RULES (both languages unless marked)
 *   whitespace   space, \t, \r, \n; LogQL also skips `#` comments to end of line
 *   strings      "..." with Go escapes (\a \b \f \n \r \t \v \\ \" \xHH \OOO
 *                \uHHHH \UHHHHHHHH), no raw newline; `...` raw, \r dropped
 *   numbers      digits [. digits] [e[+-]digits]; a letter run glued to the
 *                number makes it a duration (Go syntax + d w y: 1h30m, 1.5s,
 *                10µs) or, in LogQL only, a bytes literal (20MB, 1.5KiB)
 *   identifiers  [A-Za-z_][A-Za-z0-9_]*
 *   TraceQL      span. resource. event. link. instrumentation. and a bare `.`
 *                start an attribute whose name runs to whitespace or one of
 *                { } ( ) = ~ ! < > & | ^ , (or is "quoted", only \" and \\
 *                escapes); span: trace: event: link: instrumentation: start a
 *                scoped intrinsic.
 */
#include "query/qlex.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

void qlex_init(struct qlex *lx, enum qlex_lang lang, const char *src, size_t len, arena *a,
               char *err, size_t errlen)
{
    memset(lx, 0, sizeof(*lx));
    lx->src = src != NULL ? src : "";
    lx->len = src != NULL ? len : 0;
    lx->lang = lang;
    lx->a = a;
    lx->err = err;
    lx->errlen = errlen;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
}

void qlex_linecol(const char *src, size_t len, size_t pos, unsigned *line, unsigned *col)
{
    unsigned l = 1;
    size_t start = 0;
    if (pos > len) {
        pos = len;
    }
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            l++;
            start = i + 1;
        }
    }
    *line = l;
    *col = (unsigned)(pos - start + 1);
}

int qlex_fail(struct qlex *lx, size_t pos, const char *fmt, ...)
{
    if (lx->rc != 0) {
        return lx->rc;
    }
    lx->rc = -EINVAL;
    if (lx->err == NULL || lx->errlen == 0) {
        return lx->rc;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    unsigned line, col;
    qlex_linecol(lx->src, lx->len, pos, &line, &col);
    snprintf(lx->err, lx->errlen, "parse error at line %u, col %u: %s", line, col, msg);
    return lx->rc;
}

int qlex_nomem(struct qlex *lx)
{
    if (lx->rc != 0) {
        return lx->rc;
    }
    lx->rc = -ENOMEM;
    if (lx->err != NULL && lx->errlen > 0) {
        snprintf(lx->err, lx->errlen, "query too large: out of parser memory");
    }
    return lx->rc;
}

void *qlex_alloc(struct qlex *lx, size_t n)
{
    void *p = arena_alloc(lx->a, n);
    if (p == NULL) {
        qlex_nomem(lx);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

char *qlex_strndup(struct qlex *lx, const char *s, size_t n)
{
    char *p = arena_strndup(lx->a, s, n);
    if (p == NULL) {
        qlex_nomem(lx);
    }
    return p;
}

/* Appends |s| (n bytes) to a message, printable ASCII kept, others as \xNN,
 * cut at |max| source bytes with "...". */
static void put_escaped(char *buf, size_t cap, const char *s, size_t n, size_t max)
{
    size_t o = strlen(buf);
    for (size_t i = 0; i < n && i < max && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            buf[o++] = '\\';
            buf[o++] = '"';
        } else if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        }
    }
    if (n > max && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o < cap ? o : cap - 1] = '\0';
}

const char *qlex_desc(const struct qlex *lx, const struct qlex_tok *t, char *buf, size_t n)
{
    if (n == 0) {
        return buf;
    }
    buf[0] = '\0';
    const char *kind = "";
    switch (t->kind) {
    case QT_EOF:
        snprintf(buf, n, "end of query");
        return buf;
    case QT_IDENT:
        kind = "identifier ";
        break;
    case QT_STRING:
        kind = "string ";
        break;
    case QT_NUMBER:
        kind = "number ";
        break;
    case QT_DURATION:
        kind = "duration ";
        break;
    case QT_BYTES:
        kind = "bytes ";
        break;
    case QT_ATTR:
        kind = "attribute ";
        break;
    case QT_SCOPED:
        kind = "intrinsic ";
        break;
    default:
        break;
    }
    snprintf(buf, n, "%s\"", kind);
    size_t len = t->end > t->pos ? t->end - t->pos : 0;
    put_escaped(buf, n, lx->src + t->pos, len, 40);
    size_t o = strlen(buf);
    if (o + 1 < n) {
        buf[o] = '"';
        buf[o + 1] = '\0';
    }
    return buf;
}

/* ---- character classes ---------------------------------------------- */

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_ident_start(int c)
{
    return is_alpha(c) || c == '_';
}

static bool is_ident(int c)
{
    return is_alpha(c) || is_digit(c) || c == '_';
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* µ (U+00B5, C2 B5) or μ (U+03BC, CE BC) at s[i]: both spell microseconds. */
static bool is_micro(const char *s, size_t n, size_t i)
{
    if (i + 1 >= n) {
        return false;
    }
    unsigned char a = (unsigned char)s[i], b = (unsigned char)s[i + 1];
    return (a == 0xc2 && b == 0xb5) || (a == 0xce && b == 0xbc);
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* ---- literal parsers -------------------------------------------------- */

struct unit {
    const char *name;
    int64_t ns;
};

static const struct unit dur_units[] = {
    {"ns", 1LL},
    {"us", 1000LL},
    {"\xc2\xb5s", 1000LL},
    {"\xce\xbcs", 1000LL},
    {"ms", 1000000LL},
    {"s", 1000000000LL},
    {"m", 60LL * 1000000000LL},
    {"h", 3600LL * 1000000000LL},
    {"d", 86400LL * 1000000000LL},
    {"w", 7LL * 86400LL * 1000000000LL},
    {"y", 365LL * 86400LL * 1000000000LL},
};

int qlex_parse_duration(const char *s, size_t n, bool allow_dwy, int64_t *ns)
{
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) {
        neg = s[i] == '-';
        i++;
    }
    if (i == n) {
        return -EINVAL;
    }
    if (n - i == 1 && s[i] == '0') {
        *ns = 0; /* Go accepts a bare "0" */
        return 0;
    }
    uint64_t total = 0;
    while (i < n) {
        uint64_t v = 0;
        size_t d0 = i;
        bool overflow = false;
        while (i < n && is_digit(s[i])) {
            if (v > (UINT64_MAX - 9) / 10) {
                overflow = true;
            } else {
                v = v * 10 + (uint64_t)(s[i] - '0');
            }
            i++;
        }
        bool had_int = i > d0;
        double frac = 0.0, scale = 1.0;
        bool had_frac = false;
        if (i < n && s[i] == '.') {
            i++;
            while (i < n && is_digit(s[i])) {
                if (scale < 1e18) {
                    frac = frac * 10 + (s[i] - '0');
                    scale *= 10;
                }
                had_frac = true;
                i++;
            }
        }
        if (!had_int && !had_frac) {
            return -EINVAL;
        }
        size_t u0 = i;
        while (i < n && !is_digit(s[i]) && s[i] != '.') {
            i++;
        }
        if (i == u0) {
            return -EINVAL; /* missing unit */
        }
        const struct unit *u = NULL;
        for (size_t k = 0; k < sizeof(dur_units) / sizeof(dur_units[0]); k++) {
            size_t ul = strlen(dur_units[k].name);
            if (ul == i - u0 && memcmp(s + u0, dur_units[k].name, ul) == 0) {
                u = &dur_units[k];
                break;
            }
        }
        if (u == NULL || (!allow_dwy && u->ns >= 86400LL * 1000000000LL)) {
            return -EINVAL;
        }
        if (overflow) {
            return -ERANGE;
        }
        uint64_t unit = (uint64_t)u->ns;
        if (v > (uint64_t)INT64_MAX / unit) {
            return -ERANGE;
        }
        uint64_t part = v * unit;
        if (had_frac) {
            part += (uint64_t)(frac * ((double)unit / scale));
        }
        total += part;
        if (total > (uint64_t)INT64_MAX) {
            return -ERANGE;
        }
    }
    *ns = neg ? -(int64_t)total : (int64_t)total;
    return 0;
}

int qlex_parse_bytes(const char *s, size_t n, double *bytes)
{
    static const struct {
        const char *name;
        double mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1e3},
        {"kb", 1e3},
        {"ki", 1024.0},
        {"kib", 1024.0},
        {"m", 1e6},
        {"mb", 1e6},
        {"mi", 1048576.0},
        {"mib", 1048576.0},
        {"g", 1e9},
        {"gb", 1e9},
        {"gi", 1073741824.0},
        {"gib", 1073741824.0},
        {"t", 1e12},
        {"tb", 1e12},
        {"ti", 1099511627776.0},
        {"tib", 1099511627776.0},
        {"p", 1e15},
        {"pb", 1e15},
        {"pi", 1125899906842624.0},
        {"pib", 1125899906842624.0},
        {"e", 1e18},
        {"eb", 1e18},
        {"ei", 1152921504606846976.0},
        {"eib", 1152921504606846976.0},
    };
    size_t i = 0;
    while (i < n && s[i] == ' ') {
        i++;
    }
    char num[64];
    size_t k = 0;
    bool digits = false;
    while (i < n && (is_digit(s[i]) || s[i] == '.' || s[i] == ',')) {
        if (s[i] != ',') {
            if (k + 1 >= sizeof(num)) {
                return -ERANGE;
            }
            digits |= is_digit(s[i]);
            num[k++] = s[i];
        }
        i++;
    }
    num[k] = '\0';
    if (!digits) {
        return -EINVAL;
    }
    char *endp;
    double v = strtod(num, &endp);
    if (*endp != '\0') {
        return -EINVAL;
    }
    while (i < n && s[i] == ' ') {
        i++;
    }
    size_t e = n;
    while (e > i && s[e - 1] == ' ') {
        e--;
    }
    char unit[4];
    if (e - i >= sizeof(unit)) {
        return -EINVAL;
    }
    for (size_t j = i; j < e; j++) {
        char c = s[j];
        unit[j - i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    unit[e - i] = '\0';
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (strcmp(unit, units[u].name) == 0) {
            double r = v * units[u].mult;
            if (r >= 18446744073709551616.0) {
                return -ERANGE;
            }
            *bytes = r;
            return 0;
        }
    }
    return -EINVAL;
}

/* ---- strings ------------------------------------------------------------ */

/* Lexes the string starting at lx->pos (opening quote). */
static int lex_string(struct qlex *lx, struct qlex_tok *t)
{
    const char *s = lx->src;
    size_t n = lx->len, start = lx->pos, i = start + 1;
    char q = s[start];
    size_t close = i;
    while (close < n && s[close] != q) {
        if (q == '"' && s[close] == '\\' && close + 1 < n) {
            close++;
        } else if (q == '"' && s[close] == '\n') {
            return qlex_fail(lx, close, "newline in string");
        }
        close++;
    }
    if (close >= n) {
        return qlex_fail(lx, start, "unterminated string");
    }
    char *out = arena_alloc(lx->a, close - i + 1);
    if (out == NULL) {
        return qlex_nomem(lx);
    }
    size_t o = 0;
    if (q == '`') {
        for (; i < close; i++) {
            if (s[i] != '\r') {
                out[o++] = s[i];
            }
        }
    } else {
        while (i < close) {
            if (s[i] != '\\') {
                out[o++] = s[i++];
                continue;
            }
            size_t esc = i;
            char c = s[i + 1];
            i += 2;
            switch (c) {
            case 'a':
                out[o++] = '\a';
                break;
            case 'b':
                out[o++] = '\b';
                break;
            case 'f':
                out[o++] = '\f';
                break;
            case 'n':
                out[o++] = '\n';
                break;
            case 'r':
                out[o++] = '\r';
                break;
            case 't':
                out[o++] = '\t';
                break;
            case 'v':
                out[o++] = '\v';
                break;
            case '\\':
                out[o++] = '\\';
                break;
            case '"':
                out[o++] = '"';
                break;
            case 'x': {
                int h1 = i < close ? hexval(s[i]) : -1;
                int h2 = i + 1 < close ? hexval(s[i + 1]) : -1;
                if (h1 < 0 || h2 < 0) {
                    return qlex_fail(lx, esc, "invalid \\x escape in string: want 2 hex digits");
                }
                out[o++] = (char)(h1 * 16 + h2);
                i += 2;
                break;
            }
            case 'u':
            case 'U': {
                size_t want = c == 'u' ? 4 : 8;
                uint32_t cp = 0;
                for (size_t k = 0; k < want; k++) {
                    int h = i + k < close ? hexval(s[i + k]) : -1;
                    if (h < 0) {
                        return qlex_fail(
                            lx, esc, "invalid \\%c escape in string: want %zu hex digits", c, want);
                    }
                    cp = cp * 16 + (uint32_t)h;
                }
                if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) {
                    return qlex_fail(lx, esc, "escape sequence is an invalid Unicode code point");
                }
                i += want;
                /* the escape took >= 6 source bytes and yields <= 4 */
                o += put_utf8(out + o, cp);
                break;
            }
            default:
                if (c >= '0' && c <= '7') {
                    int v = c - '0';
                    for (int k = 0; k < 2; k++) {
                        if (i >= close || s[i] < '0' || s[i] > '7') {
                            return qlex_fail(lx, esc,
                                             "invalid octal escape in string: want 3 octal digits");
                        }
                        v = v * 8 + (s[i++] - '0');
                    }
                    if (v > 255) {
                        return qlex_fail(lx, esc, "octal escape value > 255");
                    }
                    out[o++] = (char)v;
                    break;
                }
                return qlex_fail(lx, esc, "unknown escape sequence \"\\%c\" in string",
                                 (c >= 0x20 && c < 0x7f) ? c : '?');
            }
        }
    }
    out[o] = '\0';
    t->kind = QT_STRING;
    t->s = out;
    t->n = o;
    lx->pos = close + 1;
    return 0;
}

/* ---- numbers, durations, bytes ----------------------------------------- */

static int lex_number(struct qlex *lx, struct qlex_tok *t)
{
    const char *s = lx->src;
    size_t n = lx->len, start = lx->pos, i = start;
    bool is_int = true;
    while (i < n && is_digit(s[i])) {
        i++;
    }
    if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
        is_int = false;
        i++;
        while (i < n && is_digit(s[i])) {
            i++;
        }
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-')) {
            j++;
        }
        if (j < n && is_digit(s[j])) {
            is_int = false;
            i = j;
            while (i < n && is_digit(s[i])) {
                i++;
            }
        }
    }
    size_t num_end = i;
    /* A glued letter run makes a duration or bytes literal: 1h30m, 1.5KiB. */
    while (i < n) {
        if (is_alpha(s[i]) || is_digit(s[i])) {
            i++;
        } else if (s[i] == '.' && i + 1 < n && is_digit(s[i + 1])) {
            i++;
        } else if (is_micro(s, n, i)) {
            i += 2;
        } else {
            break;
        }
    }
    t->pos = start;
    t->end = i;
    lx->pos = i;
    if (i == num_end) {
        char buf[128];
        size_t len = num_end - start;
        if (len >= sizeof(buf)) {
            return qlex_fail(lx, start, "number too long");
        }
        memcpy(buf, s + start, len);
        buf[len] = '\0';
        t->kind = QT_NUMBER;
        t->num = strtod(buf, NULL);
        t->is_int = is_int;
        if (is_int) {
            errno = 0;
            long long v = strtoll(buf, NULL, 10);
            if (errno == ERANGE) {
                t->is_int = false; /* too big for int64: a float */
            } else {
                t->i = v;
            }
        }
        return 0;
    }
    int64_t ns;
    int rc = qlex_parse_duration(s + start, i - start, true, &ns);
    if (rc == 0) {
        t->kind = QT_DURATION;
        t->i = ns;
        return 0;
    }
    if (rc == -ERANGE) {
        return qlex_fail(lx, start, "duration out of range");
    }
    if (lx->lang == QLEX_LOGQL) {
        double b;
        rc = qlex_parse_bytes(s + start, i - start, &b);
        if (rc == 0) {
            t->kind = QT_BYTES;
            t->num = b;
            return 0;
        }
        return qlex_fail(
            lx, start,
            "invalid number, duration or bytes literal \"%.*s\" (durations: 5m, 1h30m, "
            "500ms; bytes: 20MB, 1.5KiB)",
            (int)(i - start > 40 ? 40 : i - start), s + start);
    }
    return qlex_fail(lx, start,
                     "invalid number or duration \"%.*s\" (durations: 100ms, 1.5s, 10us, 2m, 1h)",
                     (int)(i - start > 40 ? 40 : i - start), s + start);
}

/* ---- TraceQL attributes ------------------------------------------------- */

static bool attr_stop(int c)
{
    switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case '{':
    case '}':
    case '(':
    case ')':
    case '=':
    case '~':
    case '!':
    case '<':
    case '>':
    case '&':
    case '|':
    case '^':
    case ',':
        return true;
    default:
        return false;
    }
}

/* Attribute name at lx->pos (after the scope's dot). */
static int lex_attr_name(struct qlex *lx, struct qlex_tok *t, size_t tok_start)
{
    const char *s = lx->src;
    size_t n = lx->len, i = lx->pos;
    if (i < n && s[i] == '"') {
        size_t j = i + 1;
        char *out = arena_alloc(lx->a, n - j + 1);
        if (out == NULL) {
            return qlex_nomem(lx);
        }
        size_t o = 0;
        while (j < n && s[j] != '"') {
            if (s[j] == '\\') {
                if (j + 1 < n && (s[j + 1] == '"' || s[j + 1] == '\\')) {
                    out[o++] = s[j + 1];
                    j += 2;
                    continue;
                }
                return qlex_fail(lx, j,
                                 "invalid escape in quoted attribute name (only \\\" and \\\\)");
            }
            out[o++] = s[j++];
        }
        if (j >= n) {
            return qlex_fail(lx, i, "unterminated quoted attribute name");
        }
        if (o == 0) {
            return qlex_fail(lx, i, "empty attribute name");
        }
        out[o] = '\0';
        t->s = out;
        t->n = o;
        lx->pos = j + 1;
    } else {
        size_t j = i;
        while (j < n && !attr_stop((unsigned char)s[j])) {
            j++;
        }
        if (j == i) {
            return qlex_fail(lx, tok_start, "expected an attribute name after \"%.*s\"",
                             (int)(i - tok_start), s + tok_start);
        }
        t->s = s + i;
        t->n = j - i;
        lx->pos = j;
    }
    t->kind = QT_ATTR;
    t->pos = tok_start;
    t->end = lx->pos;
    return 0;
}

static const struct {
    const char *name;
    enum qlex_scope scope;
    bool dot;   /* may prefix an attribute */
    bool colon; /* may prefix an intrinsic */
} scopes[] = {
    {"span", QLEX_SCOPE_SPAN, true, true},
    {"resource", QLEX_SCOPE_RESOURCE, true, false},
    {"event", QLEX_SCOPE_EVENT, true, true},
    {"link", QLEX_SCOPE_LINK, true, true},
    {"instrumentation", QLEX_SCOPE_INSTRUMENTATION, true, true},
    {"trace", QLEX_SCOPE_TRACE, false, true},
};

/* ---- the tokenizer ----------------------------------------------------- */

static void tok1(struct qlex *lx, struct qlex_tok *t, enum qtok k, size_t len)
{
    t->kind = k;
    t->end = t->pos + len;
    lx->pos = t->end;
}

int qlex_next(struct qlex *lx, struct qlex_tok *t)
{
    const char *s = lx->src;
    size_t n = lx->len;
    memset(t, 0, sizeof(*t));
    if (lx->rc != 0) {
        t->pos = t->end = lx->pos;
        return lx->rc;
    }
    for (;;) {
        while (lx->pos < n && (s[lx->pos] == ' ' || s[lx->pos] == '\t' || s[lx->pos] == '\n' ||
                               s[lx->pos] == '\r')) {
            lx->pos++;
        }
        if (lx->lang == QLEX_LOGQL && lx->pos < n && s[lx->pos] == '#') {
            while (lx->pos < n && s[lx->pos] != '\n') {
                lx->pos++;
            }
            continue;
        }
        break;
    }
    size_t p = lx->pos;
    t->pos = p;
    t->end = p;
    if (p >= n) {
        t->kind = QT_EOF;
        return 0;
    }
    bool tq = lx->lang == QLEX_TRACEQL;
    char c = s[p];
    char c1 = p + 1 < n ? s[p + 1] : '\0';
    char c2 = p + 2 < n ? s[p + 2] : '\0';
    switch (c) {
    case '{':
        tok1(lx, t, QT_LBRACE, 1);
        return 0;
    case '}':
        tok1(lx, t, QT_RBRACE, 1);
        return 0;
    case '(':
        tok1(lx, t, QT_LPAREN, 1);
        return 0;
    case ')':
        tok1(lx, t, QT_RPAREN, 1);
        return 0;
    case '[':
        tok1(lx, t, QT_LBRACKET, 1);
        return 0;
    case ']':
        tok1(lx, t, QT_RBRACKET, 1);
        return 0;
    case ',':
        tok1(lx, t, QT_COMMA, 1);
        return 0;
    case '+':
        tok1(lx, t, QT_ADD, 1);
        return 0;
    case '*':
        tok1(lx, t, QT_MUL, 1);
        return 0;
    case '/':
        tok1(lx, t, QT_DIV, 1);
        return 0;
    case '%':
        tok1(lx, t, QT_MOD, 1);
        return 0;
    case '^':
        tok1(lx, t, QT_POW, 1);
        return 0;
    case '-':
        if (!tq && c1 == '-' && is_alpha(c2)) {
            size_t i = p + 2;
            while (i < n && (is_ident(s[i]) || s[i] == '-')) {
                i++;
            }
            t->kind = QT_FLAG;
            t->s = s + p + 2;
            t->n = i - p - 2;
            t->end = i;
            lx->pos = i;
            return 0;
        }
        tok1(lx, t, QT_SUB, 1);
        return 0;
    case '=':
        if (c1 == '=') {
            tok1(lx, t, QT_EQEQ, 2);
        } else if (c1 == '~') {
            tok1(lx, t, QT_RE, 2);
        } else {
            tok1(lx, t, QT_EQ, 1);
        }
        return 0;
    case '!':
        if (c1 == '=') {
            tok1(lx, t, QT_NEQ, 2);
        } else if (c1 == '~') {
            tok1(lx, t, QT_NRE, 2);
        } else if (tq && c1 == '>' && c2 == '>') {
            tok1(lx, t, QT_BANG_DESC, 3);
        } else if (c1 == '>') {
            tok1(lx, t, QT_BANG_GT, 2);
        } else if (tq && c1 == '<' && c2 == '<') {
            tok1(lx, t, QT_BANG_ANC, 3);
        } else if (tq && c1 == '<') {
            tok1(lx, t, QT_BANG_LT, 2);
        } else if (tq) {
            tok1(lx, t, QT_NOT, 1);
        } else {
            return qlex_fail(lx, p, "unexpected \"!\": expected \"!=\", \"!~\" or \"!>\"");
        }
        return 0;
    case '>':
        if (c1 == '=') {
            tok1(lx, t, QT_GE, 2);
        } else if (tq && c1 == '>') {
            tok1(lx, t, QT_DESC, 2);
        } else {
            tok1(lx, t, QT_GT, 1);
        }
        return 0;
    case '<':
        if (c1 == '=') {
            tok1(lx, t, QT_LE, 2);
        } else if (tq && c1 == '<') {
            tok1(lx, t, QT_ANC, 2);
        } else {
            tok1(lx, t, QT_LT, 1);
        }
        return 0;
    case '|':
        if (!tq && c1 == '=') {
            tok1(lx, t, QT_PIPE_EQ, 2);
        } else if (!tq && c1 == '~') {
            tok1(lx, t, QT_PIPE_RE, 2);
        } else if (!tq && c1 == '>') {
            tok1(lx, t, QT_PIPE_GT, 2);
        } else if (tq && c1 == '|') {
            tok1(lx, t, QT_OR, 2);
        } else {
            tok1(lx, t, QT_PIPE, 1);
        }
        return 0;
    case '&':
        if (tq) {
            if (c1 == '&') {
                tok1(lx, t, QT_AND, 2);
                return 0;
            } else if (c1 == '>' && c2 == '>') {
                tok1(lx, t, QT_AMP_DESC, 3);
                return 0;
            } else if (c1 == '>') {
                tok1(lx, t, QT_AMP_GT, 2);
                return 0;
            } else if (c1 == '<' && c2 == '<') {
                tok1(lx, t, QT_AMP_ANC, 3);
                return 0;
            } else if (c1 == '<') {
                tok1(lx, t, QT_AMP_LT, 2);
                return 0;
            } else if (c1 == '~') {
                tok1(lx, t, QT_AMP_TILDE, 2);
                return 0;
            }
        }
        return qlex_fail(lx, p, tq ? "unexpected \"&\": expected \"&&\"" : "unexpected \"&\"");
    case '~':
        if (tq) {
            tok1(lx, t, QT_TILDE, 1);
            return 0;
        }
        return qlex_fail(lx, p, "unexpected \"~\": expected \"=~\", \"!~\" or \"|~\"");
    case '"':
    case '`': {
        int rc = lex_string(lx, t);
        t->pos = p;
        t->end = lx->pos;
        return rc;
    }
    case '.':
        if (tq) {
            lx->pos = p + 1;
            t->scope = QLEX_SCOPE_NONE;
            return lex_attr_name(lx, t, p);
        }
        break;
    default:
        break;
    }
    if (is_digit(c)) {
        return lex_number(lx, t);
    }
    if (is_ident_start(c)) {
        size_t i = p;
        while (i < n && is_ident(s[i])) {
            i++;
        }
        if (tq && i < n && (s[i] == '.' || s[i] == ':')) {
            for (size_t k = 0; k < sizeof(scopes) / sizeof(scopes[0]); k++) {
                size_t l = strlen(scopes[k].name);
                if (l != i - p || memcmp(s + p, scopes[k].name, l) != 0) {
                    continue;
                }
                t->scope = scopes[k].scope;
                if (s[i] == '.' && scopes[k].dot) {
                    lx->pos = i + 1;
                    return lex_attr_name(lx, t, p);
                }
                if (s[i] == ':' && scopes[k].colon) {
                    size_t j = i + 1;
                    while (j < n && is_ident(s[j])) {
                        j++;
                    }
                    if (j == i + 1) {
                        return qlex_fail(lx, p, "expected an intrinsic name after \"%.*s:\"",
                                         (int)l, s + p);
                    }
                    t->kind = QT_SCOPED;
                    t->s = s + i + 1;
                    t->n = j - i - 1;
                    t->end = j;
                    lx->pos = j;
                    return 0;
                }
            }
        }
        t->kind = QT_IDENT;
        t->s = s + p;
        t->n = i - p;
        t->end = i;
        lx->pos = i;
        return 0;
    }
    unsigned char uc = (unsigned char)c;
    if (uc >= 0x20 && uc < 0x7f) {
        return qlex_fail(lx, p, "unexpected character \"%c\"", c);
    }
    return qlex_fail(lx, p, "unexpected byte 0x%02x", uc);
}

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
    put_escaped(shown, sizeof(shown), pat, n, 48);
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
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, t->cap_md, t->mc);
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
