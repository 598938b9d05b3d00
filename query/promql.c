/*
 * promql.c - PromQL lexer, parser, type checker and printer (see promql.h).
 *
 * The lexer is a port of the state machine in Prometheus's
 * promql/parser/lex.go (v2.42.0): the token stream depends only on the
 * text (brace / bracket / parenthesis state is the lexer's own), which is
 * why `foo[5m x]` lexes `x` as a colon and `[]` complains about a missing
 * unit, as there. The parser replaces the yacc grammar
 * (generated_parser.y) by recursive descent per nesting level and an
 * operator-precedence loop along operator chains:
 *
 *   expr     := unary (binop modifiers unary)*        precedence, low to high:
 *               or < and unless < == != <= < >= > < + - < * / % atan2 < ^ (right)
 *   unary    := ('+' | '-')* postfix                  (binds like '*': -a^b = -(a^b))
 *   postfix  := primary ( '[' dur ']' | '[' dur ':' [dur] ']' | offset ['-'] dur
 *                       | '@' (['+'|'-'] number | start '(' ')' | end '(' ')') )*
 *   primary  := number | string | '(' expr ')' | ident '(' args ')'
 *             | aggop [grouping] '(' args ')' [grouping] | selector
 *   modifiers:= [bool] [(on | ignoring) labels [(group_left | group_right) [labels]]]
 *
 * Errors follow yacc's: the grammar's error productions become the
 * "unexpected X in <context>, expected Y" messages; any other syntax error
 * is a bare "unexpected X", which gains " in aggregation" inside an
 * aggregation's body (yacc's `aggregate_op error` catches those). Errors
 * Prometheus raises in grammar actions (offset twice, unknown function, bad
 * duration, ...) are raised at the same point of the parse; the type checks
 * of checkAST run after a successful parse, in checkAST's order. The
 * first error ends the parse.
 */
#include "query/promql.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/arena.h"

#define PROMQL_ROOT_MAGIC 0x70726f6du /* "prom" */
#define PROMQL_ARENA_CHUNK 8192
#define RUNE_ERROR 0xFFFD
#define RUNE_EOF (-1)

/* ====================================================================== */
/* Go-compatible quoting                                                  */
/* ====================================================================== */

/* A growable output buffer that counts what it could not hold. */
struct sbuf {
    char *buf;
    size_t cap;
    size_t len; /* full length so far */
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (n > 0 && b->len < b->cap) {
        size_t room = b->cap - b->len;
        memcpy(b->buf + b->len, s, n < room ? n : room);
    }
    b->len += n;
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_putc(struct sbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0) {
        sb_putn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
    }
}

/* NUL-terminates within cap and returns the full length. */
static size_t sb_end(struct sbuf *b)
{
    if (b->cap > 0) {
        b->buf[b->len < b->cap ? b->len : b->cap - 1] = '\0';
    }
    return b->len;
}

/* Go utf8.DecodeRune: a valid rune and its width, or RUNE_ERROR width 1
 * for an invalid sequence (overlong, surrogate, > U+10FFFF, truncated). */
static int32_t utf8_decode(const unsigned char *s, size_t n, size_t *w)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *w = 1;
        return c;
    }
    *w = 1;
    int need;
    int32_t r, min;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1, r = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2, r = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3, r = c & 0x07, min = 0x10000;
    } else {
        return RUNE_ERROR;
    }
    if ((size_t)need >= n) {
        return RUNE_ERROR;
    }
    for (int i = 1; i <= need; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return RUNE_ERROR;
        }
        r = (r << 6) | (s[i] & 0x3f);
    }
    if (r < min || r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff)) {
        return RUNE_ERROR;
    }
    *w = (size_t)need + 1;
    return r;
}

static size_t utf8_encode(int32_t r, char *out)
{
    if (r < 0x80) {
        out[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        out[0] = (char)(0xc0 | (r >> 6));
        out[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    if (r < 0x10000) {
        out[0] = (char)(0xe0 | (r >> 12));
        out[1] = (char)(0x80 | ((r >> 6) & 0x3f));
        out[2] = (char)(0x80 | (r & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (r >> 18));
    out[1] = (char)(0x80 | ((r >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((r >> 6) & 0x3f));
    out[3] = (char)(0x80 | (r & 0x3f));
    return 4;
}

/* Approximates Go's unicode.IsPrint: graphic characters and the ASCII space;
 * not controls, format characters, separators other than ' ', private use
 * or noncharacters. (Unassigned code points count as printable here.) */
static bool rune_printable(int32_t r)
{
    if (r < 0x20 || r == 0x7f) {
        return false;
    }
    if (r < 0x7f) {
        return true;
    }
    if (r < 0xa1 || r == 0xad) {
        return false;
    }
    if ((r >= 0x600 && r <= 0x605) || r == 0x61c || r == 0x6dd || r == 0x70f || r == 0x180e ||
        r == 0x1680 || (r >= 0x2000 && r <= 0x200f) || (r >= 0x2028 && r <= 0x202f) ||
        (r >= 0x205f && r <= 0x206f) || r == 0x3000 || r == 0xfeff ||
        (r >= 0xfff9 && r <= 0xfffb) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xf0000 ||
        (r & 0xfffe) == 0xfffe) {
        return false;
    }
    return true;
}

/* Go strconv.Quote (q = '"') / QuoteRune body (q = '\''). At most max_runes
 * runes are quoted when max_runes >= 0 (Go's %.Nq). escape_fffd: write
 * U+FFFD as \ufffd (the printer; see promql.h). */
static void quote_go(struct sbuf *b, const char *s, size_t n, char q, long max_runes,
                     bool escape_fffd)
{
    sb_putc(b, q);
    size_t i = 0;
    long runes = 0;
    while (i < n && (max_runes < 0 || runes < max_runes)) {
        size_t w;
        int32_t r = utf8_decode((const unsigned char *)s + i, n - i, &w);
        runes++;
        if (r == RUNE_ERROR && w == 1) {
            sb_printf(b, "\\x%02x", (unsigned char)s[i]);
            i += w;
            continue;
        }
        if (r == q || r == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)r);
        } else if (rune_printable(r) && !(escape_fffd && r == RUNE_ERROR)) {
            sb_putn(b, s + i, w);
        } else {
            switch (r) {
            case '\a':
                sb_puts(b, "\\a");
                break;
            case '\b':
                sb_puts(b, "\\b");
                break;
            case '\f':
                sb_puts(b, "\\f");
                break;
            case '\n':
                sb_puts(b, "\\n");
                break;
            case '\r':
                sb_puts(b, "\\r");
                break;
            case '\t':
                sb_puts(b, "\\t");
                break;
            case '\v':
                sb_puts(b, "\\v");
                break;
            default:
                if (r < ' ' || r == 0x7f) {
                    sb_printf(b, "\\x%02x", (unsigned)r);
                } else if (r < 0x10000) {
                    sb_printf(b, "\\u%04x", (unsigned)r);
                } else {
                    sb_printf(b, "\\U%08x", (unsigned)r);
                }
            }
        }
        i += w;
    }
    sb_putc(b, q);
}

/* Go's %q of a rune (invalid ones as U+FFFD, as Go does). */
static void quote_rune(struct sbuf *b, int32_t r)
{
    char u[4];
    if (r < 0 || r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff)) {
        r = RUNE_ERROR;
    }
    size_t n = utf8_encode(r, u);
    quote_go(b, u, n, '\'', -1, false);
}

/* Go's %#U: "U+0063 'c'" (the quoted rune only when printable). */
static void fmt_sharp_u(struct sbuf *b, int32_t r)
{
    sb_printf(b, "U+%04X", (unsigned)r);
    if (rune_printable(r)) {
        char u[4];
        size_t n = utf8_encode(r, u);
        sb_puts(b, " '");
        sb_putn(b, u, n);
        sb_putc(b, '\'');
    }
}

/* ====================================================================== */
/* Literal decoders and formatters                                        */
/* ====================================================================== */

int promql_parse_duration(const char *s, size_t n, int64_t *ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {
        {"y", 365LL * 24 * 3600 * 1000},
        {"w", 7LL * 24 * 3600 * 1000},
        {"d", 24LL * 3600 * 1000},
        {"h", 3600LL * 1000},
        {"m", 60LL * 1000},
        {"s", 1000},
        {"ms", 1},
    };
    if (n == 1 && s[0] == '0') {
        *ms = 0;
        return 0;
    }
    if (n == 0) {
        return -EINVAL;
    }
    size_t i = 0, next_unit = 0;
    uint64_t total_ns = 0;
    bool overflow = false;
    while (i < n) {
        size_t d0 = i;
        uint64_t v = 0;
        bool big = false;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (v > (UINT64_MAX - 9) / 10) {
                big = true;
            } else {
                v = v * 10 + (uint64_t)(s[i] - '0');
            }
            i++;
        }
        if (i == d0 || i == n) {
            return -EINVAL;
        }
        size_t u;
        if (s[i] == 'm' && i + 1 < n && s[i + 1] == 's') {
            u = 6;
            i += 2;
        } else {
            for (u = 0; u < 6; u++) {
                if (s[i] == units[u].unit[0]) {
                    break;
                }
            }
            if (u == 6) {
                return -EINVAL;
            }
            i++;
        }
        if (u < next_unit) {
            return -EINVAL; /* out of order or repeated */
        }
        next_unit = u + 1;
        /* model.ParseDuration: n > MaxInt64 / (mult ms in ns) overflows */
        uint64_t mult_ns = (uint64_t)units[u].ms * 1000000u;
        if (big || v > (uint64_t)INT64_MAX / mult_ns) {
            overflow = true;
            continue;
        }
        total_ns += v * mult_ns;
        if (total_ns > (uint64_t)INT64_MAX) {
            overflow = true;
        }
    }
    if (overflow) {
        return -ERANGE;
    }
    *ms = (int64_t)(total_ns / 1000000u);
    return 0;
}

size_t promql_format_duration(int64_t ms, char *buf, size_t cap)
{
    static const struct {
        const char *unit;
        int64_t mult;
        bool exact;
    } units[] = {
        {"y", 365LL * 24 * 3600 * 1000, true},
        {"w", 7LL * 24 * 3600 * 1000, true},
        {"d", 24LL * 3600 * 1000, false},
        {"h", 3600LL * 1000, false},
        {"m", 60LL * 1000, false},
        {"s", 1000, false},
        {"ms", 1, false},
    };
    struct sbuf b = {buf, cap, 0};
    if (ms <= 0) {
        sb_puts(&b, "0s");
        return sb_end(&b);
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (units[i].exact && ms % units[i].mult != 0) {
            continue;
        }
        int64_t v = ms / units[i].mult;
        if (v > 0) {
            sb_printf(&b, "%lld%s", (long long)v, units[i].unit);
            ms -= v * units[i].mult;
        }
    }
    return sb_end(&b);
}

static bool ascii_ieq(const char *a, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != lit[i]) {
            return false;
        }
    }
    return true;
}

int promql_parse_number(const char *s, size_t n, double *v)
{
    char tmp[64];
    if (n == 0) {
        return -EINVAL;
    }
    if (ascii_ieq(s, n, "inf") || ascii_ieq(s, n, "+inf") || ascii_ieq(s, n, "infinity")) {
        *v = INFINITY;
        return 0;
    }
    if (ascii_ieq(s, n, "-inf") || ascii_ieq(s, n, "-infinity")) {
        *v = -INFINITY;
        return 0;
    }
    if (ascii_ieq(s, n, "nan")) {
        *v = NAN;
        return 0;
    }
    /* Go ParseInt(s, 0, 64): 0x hex, leading-0 octal, decimal */
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (n == 2) {
            return -EINVAL;
        }
        uint64_t u = 0;
        for (size_t i = 2; i < n; i++) {
            int d;
            char c = s[i];
            if (c >= '0' && c <= '9') {
                d = c - '0';
            } else if (c >= 'a' && c <= 'f') {
                d = c - 'a' + 10;
            } else if (c >= 'A' && c <= 'F') {
                d = c - 'A' + 10;
            } else {
                return -EINVAL; /* ParseFloat of a hex mantissa needs a 'p' exponent */
            }
            if (u > (uint64_t)INT64_MAX >> 4) {
                return -EINVAL; /* ParseInt out of range; ParseFloat: no 'p' exponent */
            }
            u = (u << 4) | (uint64_t)d;
        }
        if (u > (uint64_t)INT64_MAX) {
            return -EINVAL;
        }
        *v = (double)(int64_t)u;
        return 0;
    }
    bool all_digits = true;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            all_digits = false;
            break;
        }
    }
    if (all_digits && n > 1 && s[0] == '0') {
        bool octal = true;
        uint64_t u = 0;
        for (size_t i = 1; i < n && octal; i++) {
            if (s[i] > '7' || u > (uint64_t)INT64_MAX >> 3) {
                octal = false; /* then ParseFloat reads it as decimal */
            } else {
                u = (u << 3) | (uint64_t)(s[i] - '0');
            }
        }
        if (octal && u <= (uint64_t)INT64_MAX) {
            *v = (double)(int64_t)u;
            return 0;
        }
    }
    /* Go ParseFloat, decimal form: digits [. digits] [e [+-] digits] */
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
        i++;
    }
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++, digits++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++, digits++;
        }
    }
    if (digits == 0) {
        return -EINVAL;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) {
            i++;
        }
        size_t e0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
        if (i == e0) {
            return -EINVAL;
        }
    }
    if (i != n) {
        return -EINVAL;
    }
    char *heap = NULL, *p = tmp;
    if (n >= sizeof(tmp)) {
        heap = malloc(n + 1);
        if (heap == NULL) {
            return -ENOMEM;
        }
        p = heap;
    }
    memcpy(p, s, n);
    p[n] = '\0';
    double d = strtod(p, NULL); /* the syntax above is strtod's too */
    free(heap);
    if (isinf(d)) {
        return -ERANGE; /* Go: more than 1/2 ULP past the largest float64 */
    }
    *v = d;
    return 0;
}

size_t promql_format_float(double v, char *buf, size_t cap)
{
    struct sbuf b = {buf, cap, 0};
    if (isnan(v)) {
        sb_puts(&b, "NaN");
        return sb_end(&b);
    }
    if (isinf(v)) {
        sb_puts(&b, v > 0 ? "+Inf" : "-Inf");
        return sb_end(&b);
    }
    if (v == 0) {
        sb_puts(&b, signbit(v) ? "-0" : "0");
        return sb_end(&b);
    }
    /* shortest digits that read back as v (Go's shortest formatting) */
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) {
            break;
        }
    }
    const char *p = e;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    char digs[24];
    size_t nd = 0;
    while (*p != 'e') {
        if (*p != '.') {
            digs[nd++] = *p;
        }
        p++;
    }
    while (nd > 1 && digs[nd - 1] == '0') {
        nd--;
    }
    int exp = atoi(p + 1);
    if (neg) {
        sb_putc(&b, '-');
    }
    if (exp < -4 || exp >= 6) { /* strconv 'g', shortest: precision 6 decides */
        /* %e with the shortest digits; exponent at least two digits */
        sb_putc(&b, digs[0]);
        if (nd > 1) {
            sb_putc(&b, '.');
            sb_putn(&b, digs + 1, nd - 1);
        }
        sb_printf(&b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp >= 0) {
        for (int i = 0; i <= exp; i++) {
            sb_putc(&b, (size_t)i < nd ? digs[i] : '0');
        }
        if ((size_t)exp + 1 < nd) {
            sb_putc(&b, '.');
            sb_putn(&b, digs + exp + 1, nd - (size_t)exp - 1);
        }
    } else {
        sb_puts(&b, "0.");
        for (int i = 0; i < -exp - 1; i++) {
            sb_putc(&b, '0');
        }
        sb_putn(&b, digs, nd);
    }
    return sb_end(&b);
}

static int unhex(char c)
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

long promql_unquote(const char *s, size_t n, char *out)
{
    if (n < 2 || s[0] != s[n - 1]) {
        return -EINVAL;
    }
    char q = s[0];
    const char *p = s + 1, *end = s + n - 1;
    size_t o = 0;
    if (q == '`') {
        if (memchr(p, '`', (size_t)(end - p)) != NULL) {
            return -EINVAL;
        }
        memcpy(out, p, (size_t)(end - p));
        return (long)(end - p);
    }
    if (q != '"' && q != '\'') {
        return -EINVAL;
    }
    while (p < end) {
        char c = *p;
        if (c == '\n' || c == q) {
            return -EINVAL;
        }
        if (c != '\\') {
            out[o++] = c;
            p++;
            continue;
        }
        if (end - p < 2) {
            return -EINVAL;
        }
        c = p[1];
        p += 2;
        int32_t v;
        switch (c) {
        case 'a':
            out[o++] = '\a';
            continue;
        case 'b':
            out[o++] = '\b';
            continue;
        case 'f':
            out[o++] = '\f';
            continue;
        case 'n':
            out[o++] = '\n';
            continue;
        case 'r':
            out[o++] = '\r';
            continue;
        case 't':
            out[o++] = '\t';
            continue;
        case 'v':
            out[o++] = '\v';
            continue;
        case '\\':
            out[o++] = '\\';
            continue;
        case '\'':
        case '"':
            if (c != q) {
                return -EINVAL;
            }
            out[o++] = c;
            continue;
        case 'x':
        case 'u':
        case 'U': {
            int k = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            if (end - p < k) {
                return -EINVAL;
            }
            v = 0;
            for (int j = 0; j < k; j++) {
                int x = unhex(p[j]);
                if (x < 0) {
                    return -EINVAL;
                }
                v = (int32_t)(((uint32_t)v << 4) | (uint32_t)x);
            }
            p += k;
            if (c == 'x') {
                out[o++] = (char)v; /* one byte, possibly not UTF-8 */
                continue;
            }
            if (v < 0 || v > 0x10ffff) {
                return -EINVAL;
            }
            if (v >= 0xd800 && v <= 0xdfff) {
                v = RUNE_ERROR; /* Go's EncodeRune writes U+FFFD for a surrogate */
            }
            o += utf8_encode(v, out + o);
            continue;
        }
        case '0':
        case '1':
        case '2':
        case '3':
        case '4':
        case '5':
        case '6':
        case '7':
            v = c - '0';
            if (end - p < 2) {
                return -EINVAL;
            }
            for (int j = 0; j < 2; j++) {
                if (p[j] < '0' || p[j] > '7') {
                    return -EINVAL;
                }
                v = (v << 3) | (p[j] - '0');
            }
            p += 2;
            if (v > 255) {
                return -EINVAL;
            }
            out[o++] = (char)v;
            continue;
        default:
            return -EINVAL;
        }
    }
    return (long)o;
}

/* ====================================================================== */
/* Lexer (lex.go)                                                         */
/* ====================================================================== */

enum tk {
    T_EOF,
    T_ERROR,
    T_IDENT,
    T_METRIC_IDENT,
    T_NUMBER,
    T_STRING,
    T_DURATION,
    T_LPAREN,
    T_RPAREN,
    T_LBRACE,
    T_RBRACE,
    T_LBRACKET,
    T_RBRACKET,
    T_COMMA,
    T_EQL, /* = */
    T_COLON,
    /* operators */
    T_ADD,
    T_SUB,
    T_MUL,
    T_DIV,
    T_MOD,
    T_POW,
    T_EQLC,
    T_NEQ,
    T_LTE,
    T_LSS,
    T_GTE,
    T_GTR,
    T_EQL_REGEX,
    T_NEQ_REGEX,
    T_LAND,
    T_LOR,
    T_LUNLESS,
    T_ATAN2,
    T_AT,
    /* aggregators */
    T_AVG,
    T_BOTTOMK,
    T_COUNT,
    T_COUNT_VALUES,
    T_GROUP,
    T_MAX,
    T_MIN,
    T_QUANTILE,
    T_STDDEV,
    T_STDVAR,
    T_SUM,
    T_TOPK,
    /* keywords */
    T_BOOL,
    T_BY,
    T_GROUP_LEFT,
    T_GROUP_RIGHT,
    T_IGNORING,
    T_OFFSET,
    T_ON,
    T_WITHOUT,
    /* preprocessors */
    T_START,
    T_END,
};

#define IS_OPERATOR(k) ((k) >= T_ADD && (k) <= T_AT)
#define IS_AGGREGATOR(k) ((k) >= T_AVG && (k) <= T_TOPK)
#define IS_KEYWORD(k) ((k) >= T_BOOL && (k) <= T_WITHOUT)

static const struct {
    const char *word;
    enum tk kind;
} keywords[] = {
    {"and", T_LAND},
    {"or", T_LOR},
    {"unless", T_LUNLESS},
    {"atan2", T_ATAN2},
    {"sum", T_SUM},
    {"avg", T_AVG},
    {"count", T_COUNT},
    {"min", T_MIN},
    {"max", T_MAX},
    {"group", T_GROUP},
    {"stddev", T_STDDEV},
    {"stdvar", T_STDVAR},
    {"topk", T_TOPK},
    {"bottomk", T_BOTTOMK},
    {"count_values", T_COUNT_VALUES},
    {"quantile", T_QUANTILE},
    {"offset", T_OFFSET},
    {"by", T_BY},
    {"without", T_WITHOUT},
    {"on", T_ON},
    {"ignoring", T_IGNORING},
    {"group_left", T_GROUP_LEFT},
    {"group_right", T_GROUP_RIGHT},
    {"bool", T_BOOL},
    {"start", T_START},
    {"end", T_END},
    {"inf", T_NUMBER},
    {"nan", T_NUMBER},
};

struct tok {
    enum tk kind;
    size_t pos; /* byte offset of the first byte */
    size_t end; /* just past the token */
};

enum lstate {
    LS_STATEMENTS,
    LS_DURATION, /* just after '[' */
    LS_DONE,     /* after EOF or an error: EOF forever */
};

struct lexer {
    const char *src;
    size_t len;
    size_t pos, start;
    size_t width; /* of the last rune read, for backup() */
    enum lstate state;
    long paren_depth;
    bool brace_open, bracket_open, got_colon;
    char errmsg[200];
};

static int32_t lx_next(struct lexer *l)
{
    if (l->pos >= l->len) {
        l->width = 0;
        return RUNE_EOF;
    }
    size_t w;
    int32_t r = utf8_decode((const unsigned char *)l->src + l->pos, l->len - l->pos, &w);
    l->width = w;
    l->pos += w;
    return r;
}

static void lx_backup(struct lexer *l)
{
    l->pos -= l->width;
}

static int32_t lx_peek(struct lexer *l)
{
    int32_t r = lx_next(l);
    lx_backup(l);
    return r;
}

static bool lx_accept(struct lexer *l, const char *valid)
{
    int32_t r = lx_next(l);
    if (r > 0 && r < 0x80 && strchr(valid, (int)r) != NULL) {
        return true;
    }
    lx_backup(l);
    return false;
}

static void lx_accept_run(struct lexer *l, const char *valid)
{
    while (lx_accept(l, valid)) {
    }
}

static bool is_space(int32_t r)
{
    return r == ' ' || r == '\t' || r == '\n' || r == '\r';
}

static bool is_alpha(int32_t r)
{
    return r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z');
}

static bool is_digit(int32_t r)
{
    return r >= '0' && r <= '9';
}

static bool is_alnum(int32_t r)
{
    return is_alpha(r) || is_digit(r);
}

static void emit(struct lexer *l, struct tok *t, enum tk k)
{
    t->kind = k;
    t->pos = l->start;
    t->end = l->pos;
    l->start = l->pos;
}

/* An error token at l->start; the lexer is done. */
static void lx_errorf(struct lexer *l, struct tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void lx_errorf(struct lexer *l, struct tok *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->errmsg, sizeof(l->errmsg), fmt, ap);
    va_end(ap);
    t->kind = T_ERROR;
    t->pos = l->start;
    t->end = l->start;
    l->state = LS_DONE;
}

/* An error message built in an sbuf. */
static void lx_error_sb(struct lexer *l, struct tok *t, struct sbuf *b)
{
    sb_end(b);
    t->kind = T_ERROR;
    t->pos = l->start;
    t->end = l->start;
    l->state = LS_DONE;
}

#define LX_SB(l)                                                                                   \
    {                                                                                              \
        (l)->errmsg, sizeof((l)->errmsg), 0                                                        \
    }

static bool scan_number(struct lexer *l)
{
    const char *digits = "0123456789";
    if (lx_accept(l, "0") && lx_accept(l, "xX")) {
        digits = "0123456789abcdefABCDEF";
    }
    lx_accept_run(l, digits);
    if (lx_accept(l, ".")) {
        lx_accept_run(l, digits);
    }
    if (lx_accept(l, "eE")) {
        lx_accept(l, "+-");
        lx_accept_run(l, "0123456789");
    }
    return !is_alnum(lx_peek(l));
}

static bool accept_remaining_duration(struct lexer *l)
{
    if (!lx_accept(l, "smhdwy")) {
        return false;
    }
    lx_accept(l, "s"); /* ms; bad pairs such as hs are the duration parser's */
    while (lx_accept(l, "0123456789")) {
        while (lx_accept(l, "0123456789")) {
        }
        if (!lx_accept(l, "smhdw")) { /* y only comes first */
            return false;
        }
        lx_accept(l, "s");
    }
    return !is_alnum(lx_next(l));
}

static void lex_text_error(struct lexer *l, struct tok *t, const char *what)
{
    struct sbuf b = LX_SB(l);
    sb_puts(&b, what);
    quote_go(&b, l->src + l->start, l->pos - l->start, '"', -1, false);
    lx_error_sb(l, t, &b);
}

static void lex_string(struct lexer *l, struct tok *t, int32_t quote)
{
    for (;;) {
        int32_t r = lx_next(l);
        if (r == '\\') {
            int32_t ch = lx_next(l);
            int n = 0;
            uint32_t base = 0, max = 0;
            switch (ch) {
            case 'a':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
            case 'v':
            case '\\':
                continue;
            case '0':
            case '1':
            case '2':
            case '3':
            case '4':
            case '5':
            case '6':
            case '7':
                n = 3, base = 8, max = 255;
                break;
            case 'x':
                ch = lx_next(l);
                n = 2, base = 16, max = 255;
                break;
            case 'u':
                ch = lx_next(l);
                n = 4, base = 16, max = 0x10ffff;
                break;
            case 'U':
                ch = lx_next(l);
                n = 8, base = 16, max = 0x10ffff;
                break;
            case RUNE_EOF:
                lx_errorf(l, t, "escape sequence not terminated");
                return;
            default:
                if (ch == quote) {
                    continue;
                }
                struct sbuf b = LX_SB(l);
                sb_puts(&b, "unknown escape sequence ");
                fmt_sharp_u(&b, ch);
                lx_error_sb(l, t, &b);
                return;
            }
            uint32_t x = 0;
            while (n > 0) {
                int d = ch >= 0 && ch < 0x80 ? unhex((char)ch) : -1;
                if (d < 0 || (uint32_t)d >= base) {
                    if (ch == RUNE_EOF) {
                        lx_errorf(l, t, "escape sequence not terminated");
                        return;
                    }
                    struct sbuf b = LX_SB(l);
                    sb_puts(&b, "illegal character ");
                    fmt_sharp_u(&b, ch);
                    sb_puts(&b, " in escape sequence");
                    lx_error_sb(l, t, &b);
                    return;
                }
                x = x * base + (uint32_t)d;
                n--;
                if (n > 0) {
                    ch = lx_next(l);
                }
            }
            if (x > max || (x >= 0xd800 && x < 0xe000)) {
                lx_errorf(l, t, "escape sequence is an invalid Unicode code point");
                return;
            }
            continue;
        }
        if (r == RUNE_ERROR) {
            /* Go's lexer also refuses a literal U+FFFD here */
            lx_errorf(l, t, "invalid UTF-8 rune");
            return;
        }
        if (r == RUNE_EOF || r == '\n') {
            lx_errorf(l, t, "unterminated quoted string");
            return;
        }
        if (r == quote) {
            break;
        }
    }
    emit(l, t, T_STRING);
}

static void lex_raw_string(struct lexer *l, struct tok *t)
{
    for (;;) {
        int32_t r = lx_next(l);
        if (r == RUNE_ERROR) {
            lx_errorf(l, t, "invalid UTF-8 rune");
            return;
        }
        if (r == RUNE_EOF) {
            lx_errorf(l, t, "unterminated raw string");
            return;
        }
        if (r == '`') {
            break;
        }
    }
    emit(l, t, T_STRING);
}

static void skip_comment(struct lexer *l)
{
    l->pos++; /* '#' */
    for (;;) {
        int32_t r = lx_next(l);
        if (r == '\r' || r == '\n' || r == RUNE_EOF) {
            break;
        }
    }
    lx_backup(l);
    l->start = l->pos; /* the parser skips comments: no token */
}

static void lex_inside_braces(struct lexer *l, struct tok *t)
{
    for (;;) {
        if (l->pos < l->len && l->src[l->pos] == '#') {
            skip_comment(l);
            continue;
        }
        int32_t r = lx_next(l);
        if (r == RUNE_EOF) {
            lx_errorf(l, t, "unexpected end of input inside braces");
            return;
        }
        if (is_space(r)) {
            l->start = l->pos;
            continue;
        }
        if (is_alpha(r)) {
            while (is_alnum(lx_next(l))) {
            }
            lx_backup(l);
            emit(l, t, T_IDENT);
            return;
        }
        switch (r) {
        case ',':
            emit(l, t, T_COMMA);
            return;
        case '"':
        case '\'':
            lex_string(l, t, r);
            return;
        case '`':
            lex_raw_string(l, t);
            return;
        case '=':
            if (lx_next(l) == '~') {
                emit(l, t, T_EQL_REGEX);
                return;
            }
            lx_backup(l);
            emit(l, t, T_EQL);
            return;
        case '!': {
            int32_t nr = lx_next(l);
            if (nr == '~') {
                emit(l, t, T_NEQ_REGEX);
                return;
            }
            if (nr == '=') {
                emit(l, t, T_NEQ);
                return;
            }
            struct sbuf b = LX_SB(l);
            sb_puts(&b, "unexpected character after '!' inside braces: ");
            quote_rune(&b, nr);
            lx_error_sb(l, t, &b);
            return;
        }
        case '{': {
            lx_errorf(l, t, "unexpected left brace '{'");
            return;
        }
        case '}':
            emit(l, t, T_RBRACE);
            l->brace_open = false;
            return;
        default: {
            struct sbuf b = LX_SB(l);
            sb_puts(&b, "unexpected character inside braces: ");
            quote_rune(&b, r);
            lx_error_sb(l, t, &b);
            return;
        }
        }
    }
}

static void lex_word(struct lexer *l, struct tok *t)
{
    bool colon = false;
    for (;;) {
        int32_t r = lx_next(l);
        if (is_alnum(r) || r == ':') {
            colon |= r == ':';
            continue;
        }
        lx_backup(l);
        break;
    }
    const char *w = l->src + l->start;
    size_t n = l->pos - l->start;
    for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++) {
        if (ascii_ieq(w, n, keywords[i].word)) {
            emit(l, t, keywords[i].kind);
            return;
        }
    }
    emit(l, t, colon ? T_METRIC_IDENT : T_IDENT);
}

/* One token (comments skipped). */
static void lex_next(struct lexer *l, struct tok *t)
{
    if (l->state == LS_DONE) {
        t->kind = T_EOF;
        t->pos = t->end = l->start;
        return;
    }
    if (l->state == LS_DURATION) {
        l->state = LS_STATEMENTS;
        if (scan_number(l)) {
            lx_errorf(l, t, "missing unit character in duration");
            return;
        }
        if (!accept_remaining_duration(l)) {
            lex_text_error(l, t, "bad duration syntax: ");
            return;
        }
        lx_backup(l);
        emit(l, t, T_DURATION);
        return;
    }
    if (l->brace_open) {
        lex_inside_braces(l, t);
        return;
    }
    for (;;) {
        if (l->pos < l->len && l->src[l->pos] == '#') {
            skip_comment(l);
            continue;
        }
        int32_t r = lx_next(l);
        if (r == RUNE_EOF) {
            if (l->paren_depth != 0) {
                lx_errorf(l, t, "unclosed left parenthesis");
            } else if (l->bracket_open) {
                lx_errorf(l, t, "unclosed left bracket");
            } else {
                emit(l, t, T_EOF);
                l->state = LS_DONE;
            }
            return;
        }
        if (is_space(r)) {
            l->start = l->pos;
            continue;
        }
        switch (r) {
        case ',':
            emit(l, t, T_COMMA);
            return;
        case '*':
            emit(l, t, T_MUL);
            return;
        case '/':
            emit(l, t, T_DIV);
            return;
        case '%':
            emit(l, t, T_MOD);
            return;
        case '+':
            emit(l, t, T_ADD);
            return;
        case '-':
            emit(l, t, T_SUB);
            return;
        case '^':
            emit(l, t, T_POW);
            return;
        case '=': {
            int32_t n = lx_peek(l);
            if (n == '=') {
                lx_next(l);
                emit(l, t, T_EQLC);
            } else if (n == '~') {
                lx_errorf(l, t, "unexpected character after '=': '~'");
            } else {
                emit(l, t, T_EQL);
            }
            return;
        }
        case '!': {
            int32_t n = lx_next(l);
            if (n == '=') {
                emit(l, t, T_NEQ);
                return;
            }
            struct sbuf b = LX_SB(l);
            sb_puts(&b, "unexpected character after '!': ");
            quote_rune(&b, n);
            lx_error_sb(l, t, &b);
            return;
        }
        case '<':
            if (lx_peek(l) == '=') {
                lx_next(l);
                emit(l, t, T_LTE);
            } else {
                emit(l, t, T_LSS);
            }
            return;
        case '>':
            if (lx_peek(l) == '=') {
                lx_next(l);
                emit(l, t, T_GTE);
            } else {
                emit(l, t, T_GTR);
            }
            return;
        case '"':
        case '\'':
            lex_string(l, t, r);
            return;
        case '`':
            lex_raw_string(l, t);
            return;
        case '(':
            emit(l, t, T_LPAREN);
            l->paren_depth++;
            return;
        case ')':
            emit(l, t, T_RPAREN);
            l->paren_depth--;
            if (l->paren_depth < 0) {
                lx_errorf(l, t, "unexpected right parenthesis ')'");
            }
            return;
        case '{':
            emit(l, t, T_LBRACE);
            l->brace_open = true;
            return;
        case '[':
            if (l->bracket_open) {
                lx_errorf(l, t, "unexpected left bracket '['");
                return;
            }
            l->got_colon = false;
            emit(l, t, T_LBRACKET);
            while (is_space(lx_peek(l))) {
                lx_next(l);
            }
            l->start = l->pos;
            l->bracket_open = true;
            l->state = LS_DURATION;
            return;
        case ']':
            if (!l->bracket_open) {
                lx_errorf(l, t, "unexpected right bracket ']'");
                return;
            }
            emit(l, t, T_RBRACKET);
            l->bracket_open = false;
            return;
        case '@':
            emit(l, t, T_AT);
            return;
        default:
            break;
        }
        if (is_digit(r) || (r == '.' && is_digit(lx_peek(l)))) {
            lx_backup(l);
            if (scan_number(l)) {
                emit(l, t, T_NUMBER);
                return;
            }
            if (accept_remaining_duration(l)) {
                lx_backup(l);
                emit(l, t, T_DURATION);
                return;
            }
            lex_text_error(l, t, "bad number or duration syntax: ");
            return;
        }
        if (is_alpha(r) || r == ':') {
            if (!l->bracket_open) {
                lx_backup(l);
                lex_word(l, t);
                return;
            }
            if (l->got_colon) {
                struct sbuf b = LX_SB(l);
                sb_puts(&b, "unexpected colon ");
                quote_rune(&b, r);
                lx_error_sb(l, t, &b);
                return;
            }
            emit(l, t, T_COLON); /* lex.go: any letter inside brackets is the colon */
            l->got_colon = true;
            return;
        }
        struct sbuf b = LX_SB(l);
        sb_puts(&b, "unexpected character: ");
        quote_rune(&b, r);
        lx_error_sb(l, t, &b);
        return;
    }
}

/* ====================================================================== */
/* Tables                                                                 */
/* ====================================================================== */

#define S PROMQL_TYPE_SCALAR
#define V PROMQL_TYPE_VECTOR
#define M PROMQL_TYPE_MATRIX
#define STR PROMQL_TYPE_STRING
static const struct promql_func funcs[PROMQL_FN_COUNT_] = {
    {"abs", PROMQL_FN_ABS, {V}, 1, 0, V},
    {"absent", PROMQL_FN_ABSENT, {V}, 1, 0, V},
    {"absent_over_time", PROMQL_FN_ABSENT_OVER_TIME, {M}, 1, 0, V},
    {"acos", PROMQL_FN_ACOS, {V}, 1, 0, V},
    {"acosh", PROMQL_FN_ACOSH, {V}, 1, 0, V},
    {"asin", PROMQL_FN_ASIN, {V}, 1, 0, V},
    {"asinh", PROMQL_FN_ASINH, {V}, 1, 0, V},
    {"atan", PROMQL_FN_ATAN, {V}, 1, 0, V},
    {"atanh", PROMQL_FN_ATANH, {V}, 1, 0, V},
    {"avg_over_time", PROMQL_FN_AVG_OVER_TIME, {M}, 1, 0, V},
    {"ceil", PROMQL_FN_CEIL, {V}, 1, 0, V},
    {"changes", PROMQL_FN_CHANGES, {M}, 1, 0, V},
    {"clamp", PROMQL_FN_CLAMP, {V, S, S}, 3, 0, V},
    {"clamp_max", PROMQL_FN_CLAMP_MAX, {V, S}, 2, 0, V},
    {"clamp_min", PROMQL_FN_CLAMP_MIN, {V, S}, 2, 0, V},
    {"cos", PROMQL_FN_COS, {V}, 1, 0, V},
    {"cosh", PROMQL_FN_COSH, {V}, 1, 0, V},
    {"count_over_time", PROMQL_FN_COUNT_OVER_TIME, {M}, 1, 0, V},
    {"day_of_month", PROMQL_FN_DAY_OF_MONTH, {V}, 1, 1, V},
    {"day_of_week", PROMQL_FN_DAY_OF_WEEK, {V}, 1, 1, V},
    {"day_of_year", PROMQL_FN_DAY_OF_YEAR, {V}, 1, 1, V},
    {"days_in_month", PROMQL_FN_DAYS_IN_MONTH, {V}, 1, 1, V},
    {"deg", PROMQL_FN_DEG, {V}, 1, 0, V},
    {"delta", PROMQL_FN_DELTA, {M}, 1, 0, V},
    {"deriv", PROMQL_FN_DERIV, {M}, 1, 0, V},
    {"exp", PROMQL_FN_EXP, {V}, 1, 0, V},
    {"floor", PROMQL_FN_FLOOR, {V}, 1, 0, V},
    {"histogram_count", PROMQL_FN_HISTOGRAM_COUNT, {V}, 1, 0, V},
    {"histogram_fraction", PROMQL_FN_HISTOGRAM_FRACTION, {S, S, V}, 3, 0, V},
    {"histogram_quantile", PROMQL_FN_HISTOGRAM_QUANTILE, {S, V}, 2, 0, V},
    {"histogram_sum", PROMQL_FN_HISTOGRAM_SUM, {V}, 1, 0, V},
    {"holt_winters", PROMQL_FN_HOLT_WINTERS, {M, S, S}, 3, 0, V},
    {"hour", PROMQL_FN_HOUR, {V}, 1, 1, V},
    {"idelta", PROMQL_FN_IDELTA, {M}, 1, 0, V},
    {"increase", PROMQL_FN_INCREASE, {M}, 1, 0, V},
    {"irate", PROMQL_FN_IRATE, {M}, 1, 0, V},
    {"label_join", PROMQL_FN_LABEL_JOIN, {V, STR, STR, STR}, 4, -1, V},
    {"label_replace", PROMQL_FN_LABEL_REPLACE, {V, STR, STR, STR, STR}, 5, 0, V},
    {"last_over_time", PROMQL_FN_LAST_OVER_TIME, {M}, 1, 0, V},
    {"ln", PROMQL_FN_LN, {V}, 1, 0, V},
    {"log10", PROMQL_FN_LOG10, {V}, 1, 0, V},
    {"log2", PROMQL_FN_LOG2, {V}, 1, 0, V},
    {"max_over_time", PROMQL_FN_MAX_OVER_TIME, {M}, 1, 0, V},
    {"min_over_time", PROMQL_FN_MIN_OVER_TIME, {M}, 1, 0, V},
    {"minute", PROMQL_FN_MINUTE, {V}, 1, 1, V},
    {"month", PROMQL_FN_MONTH, {V}, 1, 1, V},
    {"pi", PROMQL_FN_PI, {0}, 0, 0, S},
    {"predict_linear", PROMQL_FN_PREDICT_LINEAR, {M, S}, 2, 0, V},
    {"present_over_time", PROMQL_FN_PRESENT_OVER_TIME, {M}, 1, 0, V},
    {"quantile_over_time", PROMQL_FN_QUANTILE_OVER_TIME, {S, M}, 2, 0, V},
    {"rad", PROMQL_FN_RAD, {V}, 1, 0, V},
    {"rate", PROMQL_FN_RATE, {M}, 1, 0, V},
    {"resets", PROMQL_FN_RESETS, {M}, 1, 0, V},
    {"round", PROMQL_FN_ROUND, {V, S}, 2, 1, V},
    {"scalar", PROMQL_FN_SCALAR, {V}, 1, 0, S},
    {"sgn", PROMQL_FN_SGN, {V}, 1, 0, V},
    {"sin", PROMQL_FN_SIN, {V}, 1, 0, V},
    {"sinh", PROMQL_FN_SINH, {V}, 1, 0, V},
    {"sort", PROMQL_FN_SORT, {V}, 1, 0, V},
    {"sort_desc", PROMQL_FN_SORT_DESC, {V}, 1, 0, V},
    {"sqrt", PROMQL_FN_SQRT, {V}, 1, 0, V},
    {"stddev_over_time", PROMQL_FN_STDDEV_OVER_TIME, {M}, 1, 0, V},
    {"stdvar_over_time", PROMQL_FN_STDVAR_OVER_TIME, {M}, 1, 0, V},
    {"sum_over_time", PROMQL_FN_SUM_OVER_TIME, {M}, 1, 0, V},
    {"tan", PROMQL_FN_TAN, {V}, 1, 0, V},
    {"tanh", PROMQL_FN_TANH, {V}, 1, 0, V},
    {"time", PROMQL_FN_TIME, {0}, 0, 0, S},
    {"timestamp", PROMQL_FN_TIMESTAMP, {V}, 1, 0, V},
    {"vector", PROMQL_FN_VECTOR, {S}, 1, 0, V},
    {"year", PROMQL_FN_YEAR, {V}, 1, 1, V},
};
#undef S
#undef V
#undef M
#undef STR

const struct promql_func *promql_funcs(void)
{
    return funcs;
}

const struct promql_func *promql_func_lookup(const char *name, size_t n)
{
    size_t lo = 0, hi = PROMQL_FN_COUNT_;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *fn = funcs[mid].name;
        size_t fl = strlen(fn);
        int c = memcmp(name, fn, n < fl ? n : fl);
        if (c == 0) {
            c = n < fl ? -1 : n > fl ? 1 : 0;
        }
        if (c == 0) {
            return &funcs[mid];
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

const char *promql_type_name(enum promql_type t)
{
    switch (t) {
    case PROMQL_TYPE_SCALAR:
        return "scalar";
    case PROMQL_TYPE_VECTOR:
        return "instant vector";
    case PROMQL_TYPE_MATRIX:
        return "range vector";
    case PROMQL_TYPE_STRING:
        return "string";
    case PROMQL_TYPE_NONE:
        break;
    }
    return "none";
}

/* Prometheus's raw ValueType string (the subquery message uses it). */
static const char *type_raw(enum promql_type t)
{
    switch (t) {
    case PROMQL_TYPE_SCALAR:
        return "scalar";
    case PROMQL_TYPE_VECTOR:
        return "vector";
    case PROMQL_TYPE_MATRIX:
        return "matrix";
    case PROMQL_TYPE_STRING:
        return "string";
    case PROMQL_TYPE_NONE:
        break;
    }
    return "none";
}

static const char *const binop_names[] = {
    [PROMQL_OP_ADD] = "+",         [PROMQL_OP_SUB] = "-",   [PROMQL_OP_MUL] = "*",
    [PROMQL_OP_DIV] = "/",         [PROMQL_OP_MOD] = "%",   [PROMQL_OP_POW] = "^",
    [PROMQL_OP_ATAN2] = "atan2",   [PROMQL_OP_EQLC] = "==", [PROMQL_OP_NEQ] = "!=",
    [PROMQL_OP_LTE] = "<=",        [PROMQL_OP_LSS] = "<",   [PROMQL_OP_GTE] = ">=",
    [PROMQL_OP_GTR] = ">",         [PROMQL_OP_AND] = "and", [PROMQL_OP_OR] = "or",
    [PROMQL_OP_UNLESS] = "unless",
};

const char *promql_op_name(enum promql_binop op)
{
    return (unsigned)op < sizeof(binop_names) / sizeof(binop_names[0]) ? binop_names[op] : "?";
}

static const char *const agg_names[] = {
    [PROMQL_AGG_AVG] = "avg",       [PROMQL_AGG_BOTTOMK] = "bottomk",
    [PROMQL_AGG_COUNT] = "count",   [PROMQL_AGG_COUNT_VALUES] = "count_values",
    [PROMQL_AGG_GROUP] = "group",   [PROMQL_AGG_MAX] = "max",
    [PROMQL_AGG_MIN] = "min",       [PROMQL_AGG_QUANTILE] = "quantile",
    [PROMQL_AGG_STDDEV] = "stddev", [PROMQL_AGG_STDVAR] = "stdvar",
    [PROMQL_AGG_SUM] = "sum",       [PROMQL_AGG_TOPK] = "topk",
};

const char *promql_agg_name(enum promql_agg_op op)
{
    return (unsigned)op < sizeof(agg_names) / sizeof(agg_names[0]) ? agg_names[op] : "?";
}

bool promql_op_is_comparison(enum promql_binop op)
{
    return op >= PROMQL_OP_EQLC && op <= PROMQL_OP_GTR;
}

bool promql_op_is_set(enum promql_binop op)
{
    return op == PROMQL_OP_AND || op == PROMQL_OP_OR || op == PROMQL_OP_UNLESS;
}

bool promql_matcher_matches(const struct promql_matcher *m, const char *v, size_t n)
{
    if (v == NULL) {
        v = "";
        n = 0;
    }
    switch (m->op) {
    case PROMQL_MATCH_EQ:
        return n == m->value.n && memcmp(v, m->value.s, n) == 0;
    case PROMQL_MATCH_NEQ:
        return !(n == m->value.n && memcmp(v, m->value.s, n) == 0);
    case PROMQL_MATCH_RE:
        return qlex_re_match(m->re, v, n) == 1;
    case PROMQL_MATCH_NRE:
        return qlex_re_match(m->re, v, n) == 0;
    }
    return false;
}

/* ====================================================================== */
/* Parser                                                                 */
/* ====================================================================== */

enum prec {
    PREC_NONE = -1,
    PREC_OR = 1,
    PREC_AND = 2, /* and unless */
    PREC_CMP = 3,
    PREC_ADD = 4,
    PREC_MUL = 5, /* also unary + and - */
    PREC_POW = 6,
};

/* An operator waiting on the stack of the precedence loop. */
struct opent {
    struct promql_expr *bin; /* BINARY node with its modifiers; NULL: unary */
    size_t pos;              /* unary: position of the sign */
    bool neg;
    int prec;
};

struct parser {
    struct lexer lx;
    struct tok tok;  /* current token (yacc's lookahead) */
    struct tok peek; /* the one after, when has_peek */
    bool has_peek;
    arena *a;
    struct qlex rx; /* only for qlex_re_compile */
    char rxerr[256];
    char *err;
    size_t errlen;
    int rc;
    int depth;
    unsigned n_ops;
    int in_agg;
    struct opent *ops; /* PROMQL_MAX_OPS + 1 */
    size_t n_opstack;
    struct promql_expr **vals; /* PROMQL_MAX_OPS + PROMQL_MAX_DEPTH + 2 */
    size_t n_vals;
};

static void linecol(const char *src, size_t len, size_t pos, unsigned *line, unsigned *col)
{
    unsigned l = 1;
    size_t last_nl = (size_t)-1;
    if (pos > len) {
        pos = len;
    }
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            l++;
            last_nl = i;
        }
    }
    *line = l;
    *col = (unsigned)(pos - last_nl);
}

static int fail_rc(struct parser *p, int rc, size_t pos, const char *msg)
{
    if (p->rc != 0) {
        return p->rc;
    }
    p->rc = rc;
    if (p->err != NULL && p->errlen > 0) {
        unsigned line, col;
        linecol(p->lx.src, p->lx.len, pos, &line, &col);
        snprintf(p->err, p->errlen, "%u:%u: parse error: %s", line, col, msg);
    }
    return rc;
}

static int fail(struct parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct parser *p, size_t pos, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return fail_rc(p, -EINVAL, pos, msg);
}

static int nomem(struct parser *p)
{
    if (p->rc != 0) {
        return p->rc;
    }
    p->rc = -ENOMEM;
    if (p->err != NULL && p->errlen > 0) {
        snprintf(p->err, p->errlen, "query too large: out of parser memory");
    }
    return p->rc;
}

static void *palloc(struct parser *p, size_t n)
{
    void *m = arena_alloc(p->a, n);
    if (m == NULL) {
        nomem(p);
        return NULL;
    }
    memset(m, 0, n);
    return m;
}

/* Prometheus Item.desc(): how a token is named in "unexpected ..." */
static void tok_desc(const struct parser *p, const struct tok *t, struct sbuf *b)
{
    const char *s = p->lx.src + t->pos;
    size_t n = t->end - t->pos;
    switch (t->kind) {
    case T_EOF:
        sb_puts(b, "end of input");
        return;
    case T_ERROR:
        sb_puts(b, "error");
        return;
    case T_IDENT:
        sb_puts(b, "identifier ");
        quote_go(b, s, n, '"', -1, false);
        return;
    case T_METRIC_IDENT:
        sb_puts(b, "metric identifier ");
        quote_go(b, s, n, '"', -1, false);
        return;
    case T_STRING:
    case T_NUMBER:
    case T_DURATION:
        sb_puts(b, t->kind == T_STRING ? "string " : t->kind == T_NUMBER ? "number " : "duration ");
        break;
    default:
        if (IS_KEYWORD(t->kind)) {
            sb_printf(b, "<%.*s>", (int)n, s);
            return;
        }
        if (IS_OPERATOR(t->kind)) {
            sb_printf(b, "<op:%.*s>", (int)n, s);
            return;
        }
        if (IS_AGGREGATOR(t->kind)) {
            sb_printf(b, "<aggr:%.*s>", (int)n, s);
            return;
        }
        break;
    }
    /* Item.String(): values longer than 10 bytes as %.10q... */
    if (n > 10) {
        quote_go(b, s, n, '"', 10, false);
        sb_puts(b, "...");
    } else {
        quote_go(b, s, n, '"', -1, false);
    }
}

/* The current token as the lexer error it is, if it is one. */
static int lexer_error(struct parser *p)
{
    return fail(p, p->tok.pos, "%s", p->lx.errmsg);
}

static int advance(struct parser *p)
{
    if (p->has_peek) {
        p->tok = p->peek;
        p->has_peek = false;
    } else {
        lex_next(&p->lx, &p->tok);
    }
    if (p->tok.kind == T_ERROR) {
        return lexer_error(p);
    }
    return 0;
}

static const struct tok *peek(struct parser *p)
{
    if (!p->has_peek) {
        lex_next(&p->lx, &p->peek);
        p->has_peek = true;
    }
    return &p->peek;
}

/* "unexpected <tok>[ in <ctx>][, expected <exp>]" at the current token. A
 * bare one (ctx NULL) inside an aggregation body is yacc's
 * `aggregate_op error`: " in aggregation". */
static int unexpected(struct parser *p, const char *ctx, const char *expected)
{
    if (p->tok.kind == T_ERROR) {
        return lexer_error(p);
    }
    char msg[400];
    struct sbuf b = {msg, sizeof(msg), 0};
    sb_puts(&b, "unexpected ");
    tok_desc(p, &p->tok, &b);
    if (ctx == NULL && p->in_agg > 0) {
        ctx = "aggregation";
    }
    if (ctx != NULL) {
        sb_puts(&b, " in ");
        sb_puts(&b, ctx);
    }
    if (expected != NULL) {
        sb_puts(&b, ", expected ");
        sb_puts(&b, expected);
    }
    sb_end(&b);
    return fail_rc(p, -EINVAL, p->tok.pos, msg);
}

static int enter(struct parser *p)
{
    if (++p->depth > PROMQL_MAX_DEPTH) {
        char msg[96];
        snprintf(msg, sizeof(msg), "query nested too deeply (more than %d levels)",
                 PROMQL_MAX_DEPTH);
        return fail_rc(p, -E2BIG, p->tok.pos, msg);
    }
    return 0;
}

static void leave(struct parser *p)
{
    p->depth--;
}

static int count_op(struct parser *p, size_t pos)
{
    if (++p->n_ops > PROMQL_MAX_OPS) {
        char msg[96];
        snprintf(msg, sizeof(msg), "query too complex: more than %d operators", PROMQL_MAX_OPS);
        return fail_rc(p, -E2BIG, pos, msg);
    }
    return 0;
}

static struct promql_expr *new_node(struct parser *p, enum promql_kind k, size_t pos, size_t end)
{
    struct promql_expr *e = palloc(p, sizeof(*e));
    if (e != NULL) {
        e->kind = k;
        e->pos = pos;
        e->end = end;
    }
    return e;
}

/* Appends one element to an arena array that doubles when full. */
static int push(struct parser *p, void **arr, size_t *n, size_t *cap, size_t elem)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        void *na = arena_alloc(p->a, nc * elem);
        if (na == NULL) {
            return nomem(p);
        }
        if (*n > 0) {
            memcpy(na, *arr, *n * elem);
        }
        *arr = na;
        *cap = nc;
    }
    memset((char *)*arr + *n * elem, 0, elem);
    (*n)++;
    return 0;
}

#define PUSH(p, arr, n, cap) push((p), (void **)&(arr), &(n), &(cap), sizeof(*(arr)))

/* The current token's text (raw). */
static struct promql_str tok_raw(struct parser *p)
{
    struct promql_str s;
    size_t n = p->tok.end - p->tok.pos;
    s.s = arena_strndup(p->a, p->lx.src + p->tok.pos, n);
    s.n = n;
    if (s.s == NULL) {
        nomem(p);
    }
    return s;
}

/* Decodes the current STRING token. */
static int tok_string(struct parser *p, struct promql_str *out)
{
    size_t n = p->tok.end - p->tok.pos;
    char *buf = arena_alloc(p->a, n + 1);
    if (buf == NULL) {
        return nomem(p);
    }
    long r = promql_unquote(p->lx.src + p->tok.pos, n, buf);
    if (r < 0) {
        /* the lexer checked every escape already; kept for safety */
        char msg[160];
        struct sbuf b = {msg, sizeof(msg), 0};
        sb_puts(&b, "error unquoting string ");
        quote_go(&b, p->lx.src + p->tok.pos, n, '"', 40, false);
        sb_puts(&b, ": invalid syntax");
        sb_end(&b);
        return fail_rc(p, -EINVAL, p->tok.pos, msg);
    }
    buf[r] = '\0';
    out->s = buf;
    out->n = (size_t)r;
    return 0;
}

/* Parses the current DURATION token (parseDuration in parse.go). */
static int tok_duration(struct parser *p, int64_t *ms)
{
    const char *s = p->lx.src + p->tok.pos;
    size_t n = p->tok.end - p->tok.pos;
    int rc = promql_parse_duration(s, n, ms);
    if (rc == -ERANGE) {
        return fail(p, p->tok.pos, "duration out of range");
    }
    if (rc < 0) {
        char msg[160];
        struct sbuf b = {msg, sizeof(msg), 0};
        sb_puts(&b, "not a valid duration string: ");
        quote_go(&b, s, n, '"', -1, false);
        sb_end(&b);
        return fail_rc(p, -EINVAL, p->tok.pos, msg);
    }
    if (*ms == 0) {
        return fail(p, p->tok.pos, "duration must be greater than 0");
    }
    return 0;
}

static int tok_number(struct parser *p, double *v)
{
    const char *s = p->lx.src + p->tok.pos;
    size_t n = p->tok.end - p->tok.pos;
    int rc = promql_parse_number(s, n, v);
    if (rc == -ENOMEM) {
        return nomem(p);
    }
    if (rc < 0) {
        char msg[480];
        struct sbuf b = {msg, sizeof(msg), 0};
        sb_puts(&b, "error parsing number: strconv.ParseFloat: parsing ");
        quote_go(&b, s, n, '"', -1, false);
        sb_puts(&b, rc == -ERANGE ? ": value out of range" : ": invalid syntax");
        sb_end(&b);
        return fail_rc(p, -EINVAL, p->tok.pos, msg);
    }
    return 0;
}

static bool is_maybe_label(enum tk k)
{
    /* generated_parser.y maybe_label: identifiers and every keyword but
     * the numbers inf/nan */
    return k == T_IDENT || k == T_METRIC_IDENT || IS_AGGREGATOR(k) || IS_KEYWORD(k) ||
           k == T_LAND || k == T_LOR || k == T_LUNLESS || k == T_ATAN2 || k == T_START ||
           k == T_END;
}

static bool is_metric_identifier(enum tk k)
{
    /* generated_parser.y metric_identifier */
    return k == T_IDENT || k == T_METRIC_IDENT || IS_AGGREGATOR(k) || k == T_BY || k == T_LAND ||
           k == T_LOR || k == T_LUNLESS || k == T_OFFSET || k == T_WITHOUT || k == T_START ||
           k == T_END;
}

static bool is_label_name(const char *s, size_t n)
{
    if (n == 0 || !is_alpha((unsigned char)s[0])) {
        return false;
    }
    for (size_t i = 1; i < n; i++) {
        if (!is_alnum((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

/* grouping_labels: '(' [label (',' label)* [',']] ')'. Current token is
 * the '(' (or what stands in its place). */
static int parse_grouping(struct parser *p, struct promql_str **out, size_t *n_out, size_t *end)
{
    struct promql_str *labels = NULL;
    size_t n = 0, cap = 0;
    if (p->tok.kind != T_LPAREN) {
        return unexpected(p, "grouping opts", "\"(\"");
    }
    if (advance(p) < 0) {
        return p->rc;
    }
    for (;;) {
        if (p->tok.kind == T_RPAREN) {
            break;
        }
        if (!is_maybe_label(p->tok.kind)) {
            return unexpected(p, "grouping opts", "label");
        }
        if (!is_label_name(p->lx.src + p->tok.pos, p->tok.end - p->tok.pos)) {
            return unexpected(p, "grouping opts", "label");
        }
        if (PUSH(p, labels, n, cap) < 0) {
            return p->rc;
        }
        labels[n - 1] = tok_raw(p);
        if (p->rc != 0 || advance(p) < 0) {
            return p->rc;
        }
        if (p->tok.kind == T_COMMA) {
            if (advance(p) < 0) {
                return p->rc;
            }
            if (p->tok.kind == T_RPAREN) {
                break;
            }
            if (!is_maybe_label(p->tok.kind)) {
                return unexpected(p, "grouping opts", "label");
            }
            continue;
        }
        if (p->tok.kind != T_RPAREN) {
            return unexpected(p, "grouping opts", "\",\" or \")\"");
        }
    }
    *out = labels;
    *n_out = n;
    if (end != NULL) {
        *end = p->tok.end;
    }
    return advance(p); /* ')' */
}

static struct promql_expr *parse_expr(struct parser *p);

/* '(' [expr (',' expr)*] ')' into args; the current token is '('. */
static int parse_args(struct parser *p, struct promql_expr ***args, size_t *n_args)
{
    struct promql_expr **a = NULL;
    size_t n = 0, cap = 0;
    if (advance(p) < 0) {
        return p->rc;
    }
    if (p->tok.kind != T_RPAREN) {
        for (;;) {
            struct promql_expr *e = parse_expr(p);
            if (e == NULL) {
                return p->rc;
            }
            if (PUSH(p, a, n, cap) < 0) {
                return p->rc;
            }
            a[n - 1] = e;
            if (p->tok.kind == T_COMMA) {
                size_t comma = p->tok.pos;
                if (advance(p) < 0) {
                    return p->rc;
                }
                if (p->tok.kind == T_RPAREN) {
                    return fail(p, comma, "trailing commas not allowed in function call args");
                }
                continue;
            }
            if (p->tok.kind != T_RPAREN) {
                return unexpected(p, NULL, NULL);
            }
            break;
        }
    }
    *args = a;
    *n_args = n;
    return 0; /* current token: ')' */
}

/* Compiles a matcher's regex as 2.x does: ^(?:re)$, no dotall. */
static int compile_matcher(struct parser *p, struct promql_matcher *m, size_t pos)
{
    size_t n = m->value.n + 6;
    char *w = arena_alloc(p->a, n + 1);
    if (w == NULL) {
        return nomem(p);
    }
    memcpy(w, "^(?:", 4);
    memcpy(w + 4, m->value.s, m->value.n);
    memcpy(w + 4 + m->value.n, ")$", 3);
    qlex_re *re = NULL;
    p->rx.rc = 0;
    p->rxerr[0] = '\0';
    int rc = qlex_re_compile(&p->rx, pos, w, n, false, &re);
    if (rc == -ENOMEM) {
        return nomem(p);
    }
    if (rc < 0) {
        /* qlex words it "parse error at line L, col C: <msg>" */
        const char *msg = strstr(p->rxerr, "col ");
        msg = msg != NULL ? strstr(msg, ": ") : NULL;
        return fail(p, pos, "%s", msg != NULL ? msg + 2 : p->rxerr);
    }
    m->re = re;
    return 0;
}

/* '{' matchers '}' into sel; the current token is '{'. */
static int parse_matchers(struct parser *p, struct promql_sel *sel, size_t *end)
{
    size_t cap = 0;
    if (advance(p) < 0) {
        return p->rc;
    }
    for (;;) {
        if (p->tok.kind == T_RBRACE) {
            break;
        }
        if (p->tok.kind != T_IDENT) {
            return unexpected(p, "label matching", "identifier or \"}\"");
        }
        size_t lpos = p->tok.pos;
        struct promql_matcher m = {0};
        m.name = tok_raw(p);
        if (p->rc != 0 || advance(p) < 0) {
            return p->rc;
        }
        switch (p->tok.kind) {
        case T_EQL:
            m.op = PROMQL_MATCH_EQ;
            break;
        case T_NEQ:
            m.op = PROMQL_MATCH_NEQ;
            break;
        case T_EQL_REGEX:
            m.op = PROMQL_MATCH_RE;
            break;
        case T_NEQ_REGEX:
            m.op = PROMQL_MATCH_NRE;
            break;
        default:
            return unexpected(p, "label matching", "label matching operator");
        }
        if (advance(p) < 0) {
            return p->rc;
        }
        if (p->tok.kind != T_STRING) {
            return unexpected(p, "label matching", "string");
        }
        if (tok_string(p, &m.value) < 0) {
            return p->rc;
        }
        if ((m.op == PROMQL_MATCH_RE || m.op == PROMQL_MATCH_NRE) &&
            compile_matcher(p, &m, lpos) < 0) {
            return p->rc;
        }
        if (PUSH(p, sel->matchers, sel->n_matchers, cap) < 0) {
            return p->rc;
        }
        sel->matchers[sel->n_matchers - 1] = m;
        if (advance(p) < 0) {
            return p->rc;
        }
        if (p->tok.kind == T_COMMA) {
            if (advance(p) < 0) {
                return p->rc;
            }
            continue;
        }
        if (p->tok.kind != T_RBRACE) {
            return unexpected(p, "label matching", "\",\" or \"}\"");
        }
    }
    *end = p->tok.end;
    return advance(p); /* '}' */
}

/* name [matchers] | matchers; the current token is the name or '{'. */
static struct promql_expr *parse_selector(struct parser *p)
{
    struct promql_expr *e = new_node(p, PROMQL_VECTOR, p->tok.pos, p->tok.end);
    if (e == NULL) {
        return NULL;
    }
    if (p->tok.kind != T_LBRACE) {
        e->sel.name = tok_raw(p);
        if (p->rc != 0 || advance(p) < 0) {
            return NULL;
        }
    }
    if (p->tok.kind == T_LBRACE && parse_matchers(p, &e->sel, &e->end) < 0) {
        return NULL;
    }
    if (e->sel.name.n > 0) {
        /* assembleVectorSelector: the name becomes a last __name__ matcher */
        struct promql_matcher *nm = arena_alloc(p->a, (e->sel.n_matchers + 1) * sizeof(*nm));
        if (nm == NULL) {
            nomem(p);
            return NULL;
        }
        if (e->sel.n_matchers > 0) {
            memcpy(nm, e->sel.matchers, e->sel.n_matchers * sizeof(*nm));
        }
        struct promql_matcher *last = &nm[e->sel.n_matchers];
        memset(last, 0, sizeof(*last));
        last->name.s = "__name__";
        last->name.n = 8;
        last->op = PROMQL_MATCH_EQ;
        last->value = e->sel.name;
        e->sel.matchers = nm;
        e->sel.n_matchers++;
    }
    return e;
}

static struct promql_sel *sel_of(struct promql_expr *e)
{
    if (e->kind == PROMQL_VECTOR) {
        return &e->sel;
    }
    if (e->kind == PROMQL_MATRIX) {
        return &e->inner->sel;
    }
    return NULL;
}

/* The offset / @ slot of a node (addOffset, getAtModifierVars). */
static struct promql_mod *mod_of(struct promql_expr *e)
{
    struct promql_sel *s = sel_of(e);
    if (s != NULL) {
        return &s->mod;
    }
    return e->kind == PROMQL_SUBQUERY ? &e->mod : NULL;
}

/* Go's %f of the @ timestamp in the bounds message. */
static void fmt_go_f(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, "NaN");
    } else if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
    } else {
        snprintf(buf, n, "%f", v);
    }
}

/* The postfix modifiers of an operand: ranges, subqueries, offset, @. */
static struct promql_expr *parse_postfix(struct parser *p, struct promql_expr *e)
{
    for (;;) {
        if (p->tok.kind == T_LBRACKET) {
            size_t lb = p->tok.pos;
            if (count_op(p, lb) < 0 || advance(p) < 0) {
                return NULL;
            }
            if (p->tok.kind != T_DURATION) {
                unexpected(p, "subquery selector", "duration");
                return NULL;
            }
            int64_t range;
            if (tok_duration(p, &range) < 0 || advance(p) < 0) {
                return NULL;
            }
            if (p->tok.kind == T_RBRACKET) {
                const char *why = NULL;
                if (e->kind != PROMQL_VECTOR) {
                    why = "ranges only allowed for vector selectors";
                } else if (e->sel.mod.offset_ms != 0) {
                    why = "no offset modifiers allowed before range";
                } else if (e->sel.mod.at == PROMQL_AT_TIME) {
                    why = "no @ modifiers allowed before range";
                }
                if (why != NULL) {
                    fail(p, lb, "%s", why);
                    return NULL;
                }
                struct promql_expr *m = new_node(p, PROMQL_MATRIX, e->pos, p->tok.end);
                if (m == NULL) {
                    return NULL;
                }
                m->inner = e;
                m->range_ms = range;
                e = m;
                if (advance(p) < 0) {
                    return NULL;
                }
                continue;
            }
            if (p->tok.kind != T_COLON) {
                unexpected(p, "subquery or range", "\":\" or \"]\"");
                return NULL;
            }
            if (advance(p) < 0) {
                return NULL;
            }
            int64_t step = 0;
            if (p->tok.kind == T_DURATION) {
                if (tok_duration(p, &step) < 0 || advance(p) < 0) {
                    return NULL;
                }
                if (p->tok.kind != T_RBRACKET) {
                    unexpected(p, "subquery selector", "\"]\"");
                    return NULL;
                }
            } else if (p->tok.kind != T_RBRACKET) {
                unexpected(p, "subquery selector", "duration or \"]\"");
                return NULL;
            }
            struct promql_expr *s = new_node(p, PROMQL_SUBQUERY, e->pos, p->tok.end);
            if (s == NULL) {
                return NULL;
            }
            s->inner = e;
            s->range_ms = range;
            s->step_ms = step;
            e = s;
            if (advance(p) < 0) {
                return NULL;
            }
            continue;
        }
        if (p->tok.kind == T_OFFSET) {
            if (advance(p) < 0) {
                return NULL;
            }
            bool neg = false;
            if (p->tok.kind == T_SUB) {
                neg = true;
                if (advance(p) < 0) {
                    return NULL;
                }
            }
            if (p->tok.kind != T_DURATION) {
                unexpected(p, "offset", "duration");
                return NULL;
            }
            int64_t d;
            if (tok_duration(p, &d) < 0) {
                return NULL;
            }
            struct promql_mod *mod = mod_of(e);
            if (mod == NULL) {
                fail(p, e->pos,
                     "offset modifier must be preceded by an instant vector selector or range "
                     "vector selector or a subquery");
                return NULL;
            }
            if (mod->offset_ms != 0) {
                fail(p, e->pos, "offset may not be set multiple times");
                return NULL;
            }
            mod->offset_ms = neg ? -d : d;
            e->end = p->tok.end;
            if (advance(p) < 0) {
                return NULL;
            }
            continue;
        }
        if (p->tok.kind == T_AT) {
            if (advance(p) < 0) {
                return NULL;
            }
            enum promql_at at;
            double ts = 0;
            if (p->tok.kind == T_START || p->tok.kind == T_END) {
                at = p->tok.kind == T_START ? PROMQL_AT_START : PROMQL_AT_END;
                if (advance(p) < 0) {
                    return NULL;
                }
                if (p->tok.kind != T_LPAREN) {
                    unexpected(p, "@", "timestamp");
                    return NULL;
                }
                if (advance(p) < 0) {
                    return NULL;
                }
                if (p->tok.kind != T_RPAREN) {
                    unexpected(p, "@", "timestamp");
                    return NULL;
                }
            } else {
                bool neg = false;
                if (p->tok.kind == T_ADD || p->tok.kind == T_SUB) {
                    neg = p->tok.kind == T_SUB;
                    if (advance(p) < 0) {
                        return NULL;
                    }
                }
                if (p->tok.kind != T_NUMBER) {
                    unexpected(p, "@", "timestamp");
                    return NULL;
                }
                if (tok_number(p, &ts) < 0) {
                    return NULL;
                }
                if (neg) {
                    ts = -ts;
                }
                at = PROMQL_AT_TIME;
                if (isnan(ts) || isinf(ts) || ts >= 9223372036854775807.0 ||
                    ts <= -9223372036854775808.0) {
                    char f[400];
                    fmt_go_f(ts, f, sizeof(f));
                    fail(p, e->pos, "timestamp out of bounds for @ modifier: %s", f);
                    return NULL;
                }
            }
            struct promql_mod *mod = mod_of(e);
            if (mod == NULL) {
                fail(p, e->pos,
                     "@ modifier must be preceded by an instant vector selector or range vector "
                     "selector or a subquery");
                return NULL;
            }
            if (mod->at != PROMQL_AT_NONE) {
                fail(p, e->pos, "@ <timestamp> may not be set multiple times");
                return NULL;
            }
            mod->at = at;
            if (at == PROMQL_AT_TIME) {
                /* timestamp.FromFloatSeconds: int64(math.Round(ts * 1000)); a
                 * product past int64 becomes MinInt64 as on amd64 */
                double r = round(ts * 1000.0);
                mod->at_ms = (r >= 9223372036854775807.0 || r < -9223372036854775808.0)
                                 ? INT64_MIN
                                 : (int64_t)r;
            }
            e->end = p->tok.end;
            if (advance(p) < 0) {
                return NULL;
            }
            continue;
        }
        return e;
    }
}

static enum promql_agg_op agg_of(enum tk k)
{
    switch (k) {
    case T_AVG:
        return PROMQL_AGG_AVG;
    case T_BOTTOMK:
        return PROMQL_AGG_BOTTOMK;
    case T_COUNT:
        return PROMQL_AGG_COUNT;
    case T_COUNT_VALUES:
        return PROMQL_AGG_COUNT_VALUES;
    case T_GROUP:
        return PROMQL_AGG_GROUP;
    case T_MAX:
        return PROMQL_AGG_MAX;
    case T_MIN:
        return PROMQL_AGG_MIN;
    case T_QUANTILE:
        return PROMQL_AGG_QUANTILE;
    case T_STDDEV:
        return PROMQL_AGG_STDDEV;
    case T_STDVAR:
        return PROMQL_AGG_STDVAR;
    case T_SUM:
        return PROMQL_AGG_SUM;
    default:
        return PROMQL_AGG_TOPK;
    }
}

static bool agg_has_param(enum promql_agg_op op)
{
    return op == PROMQL_AGG_TOPK || op == PROMQL_AGG_BOTTOMK || op == PROMQL_AGG_COUNT_VALUES ||
           op == PROMQL_AGG_QUANTILE;
}

static struct promql_expr *parse_aggregate(struct parser *p)
{
    struct promql_expr *e = new_node(p, PROMQL_AGG, p->tok.pos, p->tok.end);
    if (e == NULL) {
        return NULL;
    }
    e->agg = agg_of(p->tok.kind);
    if (advance(p) < 0) {
        return NULL;
    }
    bool have_mod = false;
    if (p->tok.kind == T_BY || p->tok.kind == T_WITHOUT) {
        e->without = p->tok.kind == T_WITHOUT;
        if (advance(p) < 0 || parse_grouping(p, &e->grouping, &e->n_grouping, NULL) < 0) {
            return NULL;
        }
        have_mod = true;
    }
    if (p->tok.kind != T_LPAREN) {
        unexpected(p, "aggregation", NULL);
        return NULL;
    }
    struct promql_expr **args;
    size_t n_args;
    p->in_agg++;
    int rc = parse_args(p, &args, &n_args);
    p->in_agg--;
    if (rc < 0) {
        return NULL;
    }
    e->end = p->tok.end; /* ')' */
    if (advance(p) < 0) {
        return NULL;
    }
    if (!have_mod && (p->tok.kind == T_BY || p->tok.kind == T_WITHOUT)) {
        e->without = p->tok.kind == T_WITHOUT;
        if (advance(p) < 0) {
            return NULL;
        }
        if (parse_grouping(p, &e->grouping, &e->n_grouping, &e->end) < 0) {
            return NULL;
        }
    }
    if (n_args == 0) {
        fail(p, e->pos, "no arguments for aggregate expression provided");
        return NULL;
    }
    size_t want = agg_has_param(e->agg) ? 2 : 1;
    if (n_args != want) {
        fail(p, e->pos,
             "wrong number of arguments for aggregate expression provided, expected %zu, got %zu",
             want, n_args);
        return NULL;
    }
    if (want == 2) {
        e->param = args[0];
    }
    e->inner = args[want - 1];
    return e;
}

static struct promql_expr *parse_call(struct parser *p)
{
    struct promql_expr *e = new_node(p, PROMQL_CALL, p->tok.pos, p->tok.end);
    if (e == NULL) {
        return NULL;
    }
    struct promql_str name = tok_raw(p);
    if (p->rc != 0 || advance(p) < 0) { /* to '(' */
        return NULL;
    }
    if (parse_args(p, &e->args, &e->n_args) < 0) {
        return NULL;
    }
    e->end = p->tok.end;
    e->func = promql_func_lookup(name.s, name.n);
    if (e->func == NULL) {
        char msg[200];
        struct sbuf b = {msg, sizeof(msg), 0};
        sb_puts(&b, "unknown function with name ");
        quote_go(&b, name.s, name.n, '"', -1, false);
        sb_end(&b);
        fail_rc(p, -EINVAL, e->pos, msg);
        return NULL;
    }
    if (advance(p) < 0) {
        return NULL;
    }
    return e;
}

/* An operand: primary and its postfix modifiers. */
static struct promql_expr *parse_operand(struct parser *p)
{
    struct promql_expr *e = NULL;
    enum tk k = p->tok.kind;
    if (k == T_NUMBER) {
        e = new_node(p, PROMQL_NUMBER, p->tok.pos, p->tok.end);
        if (e == NULL || tok_number(p, &e->num) < 0 || advance(p) < 0) {
            return NULL;
        }
    } else if (k == T_STRING) {
        e = new_node(p, PROMQL_STRING, p->tok.pos, p->tok.end);
        if (e == NULL || tok_string(p, &e->str) < 0 || advance(p) < 0) {
            return NULL;
        }
    } else if (k == T_LPAREN) {
        e = new_node(p, PROMQL_PAREN, p->tok.pos, p->tok.end);
        if (e == NULL || enter(p) < 0 || advance(p) < 0) {
            return NULL;
        }
        e->inner = parse_expr(p);
        leave(p);
        if (e->inner == NULL) {
            return NULL;
        }
        if (p->tok.kind != T_RPAREN) {
            unexpected(p, NULL, NULL);
            return NULL;
        }
        e->end = p->tok.end;
        if (advance(p) < 0) {
            return NULL;
        }
    } else if (k == T_IDENT && peek(p)->kind == T_LPAREN) {
        if (enter(p) < 0) {
            return NULL;
        }
        e = parse_call(p);
        leave(p);
    } else if (IS_AGGREGATOR(k) &&
               (peek(p)->kind == T_LPAREN || peek(p)->kind == T_BY || peek(p)->kind == T_WITHOUT)) {
        if (enter(p) < 0) {
            return NULL;
        }
        e = parse_aggregate(p);
        leave(p);
    } else if (is_metric_identifier(k) || k == T_LBRACE) {
        e = parse_selector(p);
    } else {
        unexpected(p, NULL, NULL);
        return NULL;
    }
    if (e == NULL) {
        return NULL;
    }
    return parse_postfix(p, e);
}

static int binop_of(enum tk k, enum promql_binop *op)
{
    switch (k) {
    case T_LOR:
        *op = PROMQL_OP_OR;
        return PREC_OR;
    case T_LAND:
        *op = PROMQL_OP_AND;
        return PREC_AND;
    case T_LUNLESS:
        *op = PROMQL_OP_UNLESS;
        return PREC_AND;
    case T_EQLC:
        *op = PROMQL_OP_EQLC;
        return PREC_CMP;
    case T_NEQ:
        *op = PROMQL_OP_NEQ;
        return PREC_CMP;
    case T_LTE:
        *op = PROMQL_OP_LTE;
        return PREC_CMP;
    case T_LSS:
        *op = PROMQL_OP_LSS;
        return PREC_CMP;
    case T_GTE:
        *op = PROMQL_OP_GTE;
        return PREC_CMP;
    case T_GTR:
        *op = PROMQL_OP_GTR;
        return PREC_CMP;
    case T_ADD:
        *op = PROMQL_OP_ADD;
        return PREC_ADD;
    case T_SUB:
        *op = PROMQL_OP_SUB;
        return PREC_ADD;
    case T_MUL:
        *op = PROMQL_OP_MUL;
        return PREC_MUL;
    case T_DIV:
        *op = PROMQL_OP_DIV;
        return PREC_MUL;
    case T_MOD:
        *op = PROMQL_OP_MOD;
        return PREC_MUL;
    case T_ATAN2:
        *op = PROMQL_OP_ATAN2;
        return PREC_MUL;
    case T_POW:
        *op = PROMQL_OP_POW;
        return PREC_POW;
    default:
        return PREC_NONE;
    }
}

/* bin_modifier after a binary operator: [bool] [on|ignoring (...)
 * [group_left|group_right [(...)]]]. */
static int parse_bin_modifiers(struct parser *p, struct promql_expr *b)
{
    struct promql_vm *vm = palloc(p, sizeof(*vm));
    if (vm == NULL) {
        return p->rc;
    }
    vm->card = PROMQL_CARD_ONE_TO_ONE;
    b->vm = vm;
    if (p->tok.kind == T_BOOL) {
        b->return_bool = true;
        if (advance(p) < 0) {
            return p->rc;
        }
    }
    if (p->tok.kind != T_ON && p->tok.kind != T_IGNORING) {
        return 0;
    }
    vm->on = p->tok.kind == T_ON;
    if (advance(p) < 0 || parse_grouping(p, &vm->labels, &vm->n_labels, NULL) < 0) {
        return p->rc;
    }
    if (p->tok.kind == T_GROUP_LEFT || p->tok.kind == T_GROUP_RIGHT) {
        vm->card = p->tok.kind == T_GROUP_LEFT ? PROMQL_CARD_MANY_TO_ONE : PROMQL_CARD_ONE_TO_MANY;
        if (advance(p) < 0) {
            return p->rc;
        }
        if (p->tok.kind == T_LPAREN && parse_grouping(p, &vm->include, &vm->n_include, NULL) < 0) {
            return p->rc;
        }
    }
    return 0;
}

/* Pops and applies the top operator of the stack. */
static int apply_top(struct parser *p)
{
    struct opent o = p->ops[--p->n_opstack];
    if (o.bin != NULL) {
        struct promql_expr *rhs = p->vals[--p->n_vals];
        struct promql_expr *lhs = p->vals[p->n_vals - 1];
        o.bin->lhs = lhs;
        o.bin->rhs = rhs;
        o.bin->pos = lhs->pos;
        o.bin->end = rhs->end;
        p->vals[p->n_vals - 1] = o.bin;
        return 0;
    }
    struct promql_expr *x = p->vals[p->n_vals - 1];
    if (x->kind == PROMQL_NUMBER) {
        /* generated_parser.y folds a sign into a number literal */
        if (o.neg) {
            x->num = -x->num;
        }
        x->pos = o.pos;
        return 0;
    }
    struct promql_expr *u = new_node(p, PROMQL_UNARY, o.pos, x->end);
    if (u == NULL) {
        return p->rc;
    }
    u->neg = o.neg;
    u->inner = x;
    p->vals[p->n_vals - 1] = u;
    return 0;
}

/* Applies operators of the frame above |base| that bind at least as
 * tightly as an incoming operator of precedence |prec| (0: all). */
static int reduce(struct parser *p, size_t base, int prec)
{
    while (p->n_opstack > base) {
        int top = p->ops[p->n_opstack - 1].prec;
        /* ^ is right-associative: an incoming ^ does not reduce a ^ */
        if (!(top > prec || (top == prec && prec != PREC_POW))) {
            break;
        }
        if (apply_top(p) < 0) {
            return p->rc;
        }
    }
    return 0;
}

/* An expression: operands and operators of one nesting level, without
 * recursion along the chain. Leaves the token after it current. */
static struct promql_expr *parse_expr(struct parser *p)
{
    size_t obase = p->n_opstack, vbase = p->n_vals;
    for (;;) {
        while (p->tok.kind == T_ADD || p->tok.kind == T_SUB) {
            if (count_op(p, p->tok.pos) < 0) {
                return NULL;
            }
            struct opent *o = &p->ops[p->n_opstack++];
            o->bin = NULL;
            o->pos = p->tok.pos;
            o->neg = p->tok.kind == T_SUB;
            o->prec = PREC_MUL; /* unary_op expr %prec MUL */
            if (advance(p) < 0) {
                return NULL;
            }
        }
        struct promql_expr *x = parse_operand(p);
        if (x == NULL) {
            return NULL;
        }
        p->vals[p->n_vals++] = x;
        enum promql_binop op;
        int prec = binop_of(p->tok.kind, &op);
        if (prec == PREC_NONE) {
            break;
        }
        if (reduce(p, obase, prec) < 0 || count_op(p, p->tok.pos) < 0) {
            return NULL;
        }
        struct promql_expr *b = new_node(p, PROMQL_BINARY, p->tok.pos, p->tok.end);
        if (b == NULL || advance(p) < 0 || parse_bin_modifiers(p, b) < 0) {
            return NULL;
        }
        b->op = op;
        struct opent *o = &p->ops[p->n_opstack++];
        o->bin = b;
        o->pos = b->pos;
        o->neg = false;
        o->prec = prec;
    }
    if (reduce(p, obase, 0) < 0) {
        return NULL;
    }
    struct promql_expr *e = p->vals[vbase];
    p->n_vals = vbase;
    return e;
}

/* ---- type check (checkAST) -------------------------------------------- */

static enum promql_type type_of(const struct promql_expr *e)
{
    return e->type;
}

static int check(struct parser *p, struct promql_expr *e);

static int expect_type(struct parser *p, struct promql_expr *e, enum promql_type want,
                       const char *ctx)
{
    if (check(p, e) < 0) {
        return p->rc;
    }
    if (e->type != want) {
        return fail(p, e->pos, "expected type %s in %s, got %s", promql_type_name(want), ctx,
                    promql_type_name(e->type));
    }
    return 0;
}

/* The operator's position: the first non-space byte after the LHS. */
static size_t op_pos(struct parser *p, const struct promql_expr *b)
{
    size_t i = b->lhs->end;
    while (i < p->lx.len && is_space((unsigned char)p->lx.src[i])) {
        i++;
    }
    return i;
}

static int check_binary(struct parser *p, struct promql_expr *n)
{
    if (check(p, n->lhs) < 0 || check(p, n->rhs) < 0) {
        return p->rc;
    }
    enum promql_type lt = type_of(n->lhs), rt = type_of(n->rhs);
    n->type = lt == PROMQL_TYPE_SCALAR && rt == PROMQL_TYPE_SCALAR ? PROMQL_TYPE_SCALAR
                                                                   : PROMQL_TYPE_VECTOR;
    bool cmp = promql_op_is_comparison(n->op), set = promql_op_is_set(n->op);
    struct promql_vm *vm = (struct promql_vm *)n->vm;
    if (n->return_bool && !cmp) {
        return fail(p, op_pos(p, n), "bool modifier can only be used on comparison operators");
    }
    if (cmp && !n->return_bool && lt == PROMQL_TYPE_SCALAR && rt == PROMQL_TYPE_SCALAR) {
        return fail(p, op_pos(p, n), "comparisons between scalars must use BOOL modifier");
    }
    if (set && vm->card == PROMQL_CARD_ONE_TO_ONE) {
        vm->card = PROMQL_CARD_MANY_TO_MANY;
    }
    if (vm->on) {
        for (size_t i = 0; i < vm->n_labels; i++) {
            for (size_t j = 0; j < vm->n_include; j++) {
                if (vm->labels[i].n == vm->include[j].n &&
                    memcmp(vm->labels[i].s, vm->include[j].s, vm->labels[i].n) == 0) {
                    return fail(p, op_pos(p, n),
                                "label \"%s\" must not occur in ON and GROUP clause at once",
                                vm->labels[i].s);
                }
            }
        }
    }
    if (lt != PROMQL_TYPE_SCALAR && lt != PROMQL_TYPE_VECTOR) {
        return fail(p, n->lhs->pos,
                    "binary expression must contain only scalar and instant vector types");
    }
    if (rt != PROMQL_TYPE_SCALAR && rt != PROMQL_TYPE_VECTOR) {
        return fail(p, n->rhs->pos,
                    "binary expression must contain only scalar and instant vector types");
    }
    if (lt != PROMQL_TYPE_VECTOR || rt != PROMQL_TYPE_VECTOR) {
        if (vm->n_labels > 0) {
            return fail(p, n->pos, "vector matching only allowed between instant vectors");
        }
        n->vm = NULL;
    } else if (set) {
        if (vm->card == PROMQL_CARD_ONE_TO_MANY || vm->card == PROMQL_CARD_MANY_TO_ONE) {
            return fail(p, n->pos, "no grouping allowed for \"%s\" operation",
                        promql_op_name(n->op));
        }
    }
    if ((lt == PROMQL_TYPE_SCALAR || rt == PROMQL_TYPE_SCALAR) && set) {
        return fail(p, n->pos, "set operator \"%s\" not allowed in binary scalar expression",
                    promql_op_name(n->op));
    }
    return 0;
}

static int check_selector(struct parser *p, struct promql_expr *n)
{
    const struct promql_sel *s = &n->sel;
    if (s->name.n > 0) {
        for (size_t i = 0; i + 1 < s->n_matchers; i++) {
            const struct promql_matcher *m = &s->matchers[i];
            if (m->name.n == 8 && memcmp(m->name.s, "__name__", 8) == 0) {
                char msg[400];
                struct sbuf b = {msg, sizeof(msg), 0};
                sb_puts(&b, "metric name must not be set twice: ");
                quote_go(&b, s->name.s, s->name.n, '"', -1, false);
                sb_puts(&b, " or ");
                quote_go(&b, m->value.s, m->value.n, '"', -1, false);
                sb_end(&b);
                return fail_rc(p, -EINVAL, n->pos, msg);
            }
        }
        return 0;
    }
    for (size_t i = 0; i < s->n_matchers; i++) {
        if (!promql_matcher_matches(&s->matchers[i], "", 0)) {
            return 0;
        }
    }
    return fail(p, n->pos, "vector selector must contain at least one non-empty matcher");
}

static int check(struct parser *p, struct promql_expr *e)
{
    switch (e->kind) {
    case PROMQL_NUMBER:
        e->type = PROMQL_TYPE_SCALAR;
        return 0;
    case PROMQL_STRING:
        e->type = PROMQL_TYPE_STRING;
        return 0;
    case PROMQL_VECTOR:
        e->type = PROMQL_TYPE_VECTOR;
        return check_selector(p, e);
    case PROMQL_MATRIX:
        e->type = PROMQL_TYPE_MATRIX;
        return check(p, e->inner);
    case PROMQL_SUBQUERY:
        e->type = PROMQL_TYPE_MATRIX;
        if (check(p, e->inner) < 0) {
            return p->rc;
        }
        if (e->inner->type != PROMQL_TYPE_VECTOR) {
            return fail(p, e->pos, "subquery is only allowed on instant vector, got %s instead",
                        type_raw(e->inner->type));
        }
        return 0;
    case PROMQL_PAREN:
        if (check(p, e->inner) < 0) {
            return p->rc;
        }
        e->type = e->inner->type;
        return 0;
    case PROMQL_UNARY:
        if (check(p, e->inner) < 0) {
            return p->rc;
        }
        e->type = e->inner->type;
        if (e->type != PROMQL_TYPE_SCALAR && e->type != PROMQL_TYPE_VECTOR) {
            return fail(p, e->pos,
                        "unary expression only allowed on expressions of type scalar or instant "
                        "vector, got \"%s\"",
                        promql_type_name(e->type));
        }
        return 0;
    case PROMQL_AGG:
        e->type = PROMQL_TYPE_VECTOR;
        if (expect_type(p, e->inner, PROMQL_TYPE_VECTOR, "aggregation expression") < 0) {
            return p->rc;
        }
        if (e->agg == PROMQL_AGG_TOPK || e->agg == PROMQL_AGG_BOTTOMK ||
            e->agg == PROMQL_AGG_QUANTILE) {
            return expect_type(p, e->param, PROMQL_TYPE_SCALAR, "aggregation parameter");
        }
        if (e->agg == PROMQL_AGG_COUNT_VALUES) {
            return expect_type(p, e->param, PROMQL_TYPE_STRING, "aggregation parameter");
        }
        return 0;
    case PROMQL_CALL: {
        const struct promql_func *f = e->func;
        e->type = f->ret;
        if (f->variadic == 0) {
            if (f->n_args != e->n_args) {
                return fail(p, e->pos, "expected %u argument(s) in call to \"%s\", got %zu",
                            f->n_args, f->name, e->n_args);
            }
        } else {
            size_t na = f->n_args - 1;
            if (na > e->n_args) {
                return fail(p, e->pos,
                            "expected at least %zu argument(s) in call to \"%s\", got %zu", na,
                            f->name, e->n_args);
            }
            if (f->variadic > 0 && na + (size_t)f->variadic < e->n_args) {
                return fail(p, e->pos,
                            "expected at most %zu argument(s) in call to \"%s\", got %zu",
                            na + (size_t)f->variadic, f->name, e->n_args);
            }
        }
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "call to function \"%s\"", f->name);
        for (size_t i = 0; i < e->n_args; i++) {
            size_t ti = i < f->n_args ? i : f->n_args - 1;
            if (expect_type(p, e->args[i], f->args[ti], ctx) < 0) {
                return p->rc;
            }
        }
        return 0;
    }
    case PROMQL_BINARY:
        return check_binary(p, e);
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------ */

struct promql_root {
    uint32_t magic;
    arena *a;
    qlex_re *res;
    struct promql_expr e;
};

enum mode {
    MODE_EXPR,
    MODE_SELECTOR,
};

static int parse_with(const char *src, size_t len, enum mode mode, struct promql_expr **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (src == NULL) {
        src = "";
        len = 0;
    }
    arena *a = arena_new(PROMQL_ARENA_CHUNK);
    if (a == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "query too large: out of parser memory");
        }
        return -ENOMEM;
    }
    arena_set_limit(a, PROMQL_ARENA_LIMIT);
    struct parser *p = arena_alloc(a, sizeof(*p));
    if (p == NULL) {
        arena_free(a);
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "query too large: out of parser memory");
        }
        return -ENOMEM;
    }
    memset(p, 0, sizeof(*p));
    p->lx.src = src;
    p->lx.len = len;
    p->a = a;
    p->err = err;
    p->errlen = errlen;
    qlex_init(&p->rx, QLEX_LOGQL, src, len, a, p->rxerr, sizeof(p->rxerr));
    p->ops = palloc(p, (PROMQL_MAX_OPS + 1) * sizeof(*p->ops));
    p->vals = palloc(p, (PROMQL_MAX_OPS + PROMQL_MAX_DEPTH + 2) * sizeof(*p->vals));
    struct promql_root *r = palloc(p, sizeof(*r));
    struct promql_expr *e = NULL;
    if (r != NULL && p->ops != NULL && p->vals != NULL && advance(p) == 0) {
        if (mode == MODE_SELECTOR) {
            if (is_metric_identifier(p->tok.kind) || p->tok.kind == T_LBRACE) {
                e = parse_selector(p);
            } else {
                unexpected(p, NULL, NULL);
            }
            if (e != NULL && p->tok.kind != T_EOF) {
                unexpected(p, NULL, NULL);
                e = NULL;
            }
            if (e != NULL) {
                e->type = PROMQL_TYPE_VECTOR;
            }
        } else if (p->tok.kind == T_EOF) {
            fail(p, 0, "no expression found in input");
        } else {
            e = parse_expr(p);
            if (e != NULL && p->tok.kind != T_EOF) {
                unexpected(p, NULL, NULL);
                e = NULL;
            }
            if (e != NULL && check(p, e) < 0) {
                e = NULL;
            }
        }
    }
    if (e == NULL || p->rc != 0) {
        int rc = p->rc != 0 ? p->rc : -EINVAL;
        if (p->rc == 0 && err != NULL && errlen > 0) {
            snprintf(err, errlen, "1:1: parse error: unexpected error");
        }
        qlex_re_free_all(p->rx.res);
        arena_free(a);
        return rc;
    }
    r->magic = PROMQL_ROOT_MAGIC;
    r->a = a;
    r->res = p->rx.res;
    r->e = *e;
    *out = &r->e;
    return 0;
}

int promql_parse(const char *src, size_t len, struct promql_expr **out, char *err, size_t errlen)
{
    return parse_with(src, len, MODE_EXPR, out, err, errlen);
}

int promql_parse_selector(const char *src, size_t len, struct promql_expr **out, char *err,
                          size_t errlen)
{
    return parse_with(src, len, MODE_SELECTOR, out, err, errlen);
}

void promql_free(struct promql_expr *root)
{
    if (root == NULL) {
        return;
    }
    struct promql_root *r = (struct promql_root *)((char *)root - offsetof(struct promql_root, e));
    if (r->magic != PROMQL_ROOT_MAGIC) {
        abort(); /* not a root returned by promql_parse */
    }
    r->magic = 0;
    qlex_re_free_all(r->res);
    arena_free(r->a);
}

/* ====================================================================== */
/* Printer (printer.go String())                                          */
/* ====================================================================== */

static void put_str_q(struct sbuf *b, struct promql_str s)
{
    quote_go(b, s.s, s.n, '"', -1, true);
}

static void put_labels(struct sbuf *b, const struct promql_str *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_puts(b, ", ");
        }
        sb_putn(b, l[i].s, l[i].n);
    }
}

static void put_duration(struct sbuf *b, int64_t ms)
{
    char d[64];
    promql_format_duration(ms, d, sizeof(d));
    sb_puts(b, d);
}

static void put_mod(struct sbuf *b, const struct promql_mod *m)
{
    if (m->at == PROMQL_AT_TIME) {
        sb_printf(b, " @ %.3f", (double)m->at_ms / 1000.0);
    } else if (m->at == PROMQL_AT_START) {
        sb_puts(b, " @ start()");
    } else if (m->at == PROMQL_AT_END) {
        sb_puts(b, " @ end()");
    }
    if (m->offset_ms > 0) {
        sb_puts(b, " offset ");
        put_duration(b, m->offset_ms);
    } else if (m->offset_ms < 0) {
        sb_puts(b, " offset -");
        put_duration(b, m->offset_ms == INT64_MIN ? INT64_MAX : -m->offset_ms);
    }
}

static const char *const match_ops[] = {"=", "!=", "=~", "!~"};

struct mstr {
    char *s;
    size_t n;
};

static int cmp_mstr(const void *a, const void *b)
{
    const struct mstr *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c != 0) {
        return c;
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

static void put_selector(struct sbuf *b, const struct promql_sel *s, bool with_mod)
{
    /* matchers as strings, sorted; the name matcher folded into the name */
    struct mstr *ms = s->n_matchers > 0 ? calloc(s->n_matchers, sizeof(*ms)) : NULL;
    size_t k = 0;
    bool ok = s->n_matchers == 0 || ms != NULL;
    for (size_t i = 0; ok && i < s->n_matchers; i++) {
        const struct promql_matcher *m = &s->matchers[i];
        if (m->name.n == 8 && memcmp(m->name.s, "__name__", 8) == 0 && m->op == PROMQL_MATCH_EQ &&
            m->value.n == s->name.n &&
            (s->name.n == 0 || memcmp(m->value.s, s->name.s, s->name.n) == 0)) {
            continue;
        }
        struct sbuf t = {NULL, 0, 0};
        sb_putn(&t, m->name.s, m->name.n);
        sb_puts(&t, match_ops[m->op]);
        put_str_q(&t, m->value);
        size_t need = t.len;
        char *buf = malloc(need + 1);
        if (buf == NULL) {
            ok = false;
            break;
        }
        struct sbuf t2 = {buf, need + 1, 0};
        sb_putn(&t2, m->name.s, m->name.n);
        sb_puts(&t2, match_ops[m->op]);
        put_str_q(&t2, m->value);
        sb_end(&t2);
        ms[k].s = buf;
        ms[k].n = need;
        k++;
    }
    sb_putn(b, s->name.s, s->name.n);
    if (k > 0) {
        qsort(ms, k, sizeof(*ms), cmp_mstr);
        sb_putc(b, '{');
        for (size_t i = 0; i < k; i++) {
            if (i > 0) {
                sb_putc(b, ',');
            }
            sb_putn(b, ms[i].s, ms[i].n);
        }
        sb_putc(b, '}');
    }
    for (size_t i = 0; i < k; i++) {
        free(ms[i].s);
    }
    free(ms);
    if (with_mod) {
        put_mod(b, &s->mod);
    }
}

static void put_expr(struct sbuf *b, const struct promql_expr *e)
{
    char num[64];
    switch (e->kind) {
    case PROMQL_NUMBER:
        promql_format_float(e->num, num, sizeof(num));
        sb_puts(b, num);
        return;
    case PROMQL_STRING:
        put_str_q(b, e->str);
        return;
    case PROMQL_VECTOR:
        put_selector(b, &e->sel, true);
        return;
    case PROMQL_MATRIX:
        put_selector(b, &e->inner->sel, false);
        sb_putc(b, '[');
        put_duration(b, e->range_ms);
        sb_putc(b, ']');
        put_mod(b, &e->inner->sel.mod);
        return;
    case PROMQL_SUBQUERY:
        put_expr(b, e->inner);
        sb_putc(b, '[');
        put_duration(b, e->range_ms);
        sb_putc(b, ':');
        if (e->step_ms != 0) {
            put_duration(b, e->step_ms);
        }
        sb_putc(b, ']');
        put_mod(b, &e->mod);
        return;
    case PROMQL_CALL:
        sb_puts(b, e->func->name);
        sb_putc(b, '(');
        for (size_t i = 0; i < e->n_args; i++) {
            if (i > 0) {
                sb_puts(b, ", ");
            }
            put_expr(b, e->args[i]);
        }
        sb_putc(b, ')');
        return;
    case PROMQL_AGG:
        sb_puts(b, promql_agg_name(e->agg));
        if (e->without) {
            sb_puts(b, " without (");
            put_labels(b, e->grouping, e->n_grouping);
            sb_puts(b, ") ");
        } else if (e->n_grouping > 0) {
            sb_puts(b, " by (");
            put_labels(b, e->grouping, e->n_grouping);
            sb_puts(b, ") ");
        }
        sb_putc(b, '(');
        if (e->param != NULL) {
            put_expr(b, e->param);
            sb_puts(b, ", ");
        }
        put_expr(b, e->inner);
        sb_putc(b, ')');
        return;
    case PROMQL_BINARY: {
        put_expr(b, e->lhs);
        sb_putc(b, ' ');
        sb_puts(b, promql_op_name(e->op));
        if (e->return_bool) {
            sb_puts(b, " bool");
        }
        const struct promql_vm *vm = e->vm;
        if (vm != NULL && (vm->n_labels > 0 || vm->on)) {
            sb_puts(b, vm->on ? " on (" : " ignoring (");
            put_labels(b, vm->labels, vm->n_labels);
            sb_putc(b, ')');
            if (vm->card == PROMQL_CARD_MANY_TO_ONE || vm->card == PROMQL_CARD_ONE_TO_MANY) {
                sb_puts(b,
                        vm->card == PROMQL_CARD_MANY_TO_ONE ? " group_left (" : " group_right (");
                put_labels(b, vm->include, vm->n_include);
                sb_putc(b, ')');
            }
        }
        sb_putc(b, ' ');
        put_expr(b, e->rhs);
        return;
    }
    case PROMQL_UNARY:
        sb_putc(b, e->neg ? '-' : '+');
        put_expr(b, e->inner);
        return;
    case PROMQL_PAREN:
        sb_putc(b, '(');
        put_expr(b, e->inner);
        sb_putc(b, ')');
        return;
    }
}

size_t promql_format(const struct promql_expr *e, char *buf, size_t cap)
{
    struct sbuf b = {buf, cap, 0};
    put_expr(&b, e);
    return sb_end(&b);
}
