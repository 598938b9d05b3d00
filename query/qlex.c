/*
 * qlex.c - shared lexer and literal decoders for the LogQL and TraceQL
 * parsers (see qlex.h); the RE2-on-PCRE2 regex wrapper is in qlex_re.c.
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
 *                { } ( ) = ~ ! < > & | ^ , with "quoted" parts (only \" and
 *                \\ escapes) glued in: .foo."bar baz" is `foo.bar baz`;
 *                span: trace: event: link: instrumentation: start a scoped
 *                intrinsic.
 */
#include "query/qlex.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/qlex_int.h"

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
void qlex_put_escaped(char *buf, size_t cap, const char *s, size_t n, size_t max)
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
    qlex_put_escaped(buf, n, lx->src + t->pos, len, 40);
    size_t o = strlen(buf);
    if (o + 1 < n) {
        buf[o] = '"';
        buf[o + 1] = '\0';
    }
    return buf;
}

/* ---- character classes ---------------------------------------------- */

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
    } else if (lx->lang == QLEX_TRACEQL && i < n && s[i] == '.' &&
               (i + 1 == n || !(is_ident(s[i + 1]) || s[i + 1] == '"' || s[i + 1] == '.'))) {
        is_int = false; /* TraceQL reads `1.` as the float 1 (Go's scanner does) */
        i++;
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

/* Attribute name at lx->pos (after the scope's dot): unquoted runs and
 * "quoted" parts (escapes \" and \\ only) glued together, as Tempo reads
 * them: .foo."bar baz".x is the name `foo.bar baz.x`. A name without quotes
 * points into the source; one with quotes is copied to the arena. */
static int lex_attr_name(struct qlex *lx, struct qlex_tok *t, size_t tok_start)
{
    const char *s = lx->src;
    size_t n = lx->len, i = lx->pos, j = i;
    char *out = NULL;
    size_t o = 0;
    while (j < n && !attr_stop((unsigned char)s[j])) {
        if (s[j] != '"') {
            if (out != NULL) {
                out[o++] = s[j];
            }
            j++;
            continue;
        }
        if (out == NULL) {
            out = arena_alloc(lx->a, n - i + 1);
            if (out == NULL) {
                return qlex_nomem(lx);
            }
            memcpy(out, s + i, j - i);
            o = j - i;
        }
        size_t q = j++;
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
            return qlex_fail(lx, q, "unterminated quoted attribute name");
        }
        j++; /* the closing quote */
    }
    if (j == i) {
        return qlex_fail(lx, tok_start, "expected an attribute name after \"%.*s\"",
                         (int)(i - tok_start), s + tok_start);
    }
    if (out != NULL) {
        if (o == 0) {
            return qlex_fail(lx, i, "empty attribute name");
        }
        out[o] = '\0';
        t->s = out;
        t->n = o;
    } else {
        t->s = s + i;
        t->n = j - i;
    }
    lx->pos = j;
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
        if (tq && is_digit(c1)) {
            return lex_number(lx, t); /* .5 is a number, as in Tempo */
        }
        if (tq) {
            lx->pos = p + 1;
            t->scope = QLEX_SCOPE_NONE;
            return lex_attr_name(lx, t, p);
        }
        if (lx->lang == QLEX_LOGQL && is_digit(c1)) {
            return lex_number(lx, t); /* .5 (Loki's scanner takes it) */
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
