/*
 * promname.c - OTLP -> Prometheus series mapping (contract in promname.h).
 *
 * Every rule here mirrors a line of Prometheus' receiver (main) or of
 * otlptranslator v1.0.0; the comments name the Go function being matched
 * where the behaviour is surprising, so a reader can check it.
 */
#include "storage/promname.h"

#include <errno.h>
#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/dtoa.h"

/* ------------------------------------------------------------------ */
/* floats                                                              */

double promname_stale_nan(void)
{
    uint64_t bits = PROMNAME_STALE_NAN_BITS;
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

bool promname_is_stale_nan(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return bits == PROMNAME_STALE_NAN_BITS;
}

/* Shortest decimal digits of a finite v > 0: v ~= 0.d[0..nd) x 10^dp. */
struct dec {
    char d[24];
    int nd;
    int dp;
};

/* Go's shortest representation: the fewest digits that read back as v, and
 * of those the closest to v (lib/dtoa.c, Ryu; its test keeps the former
 * printf + strtod search as the reference). */
static void dec_shortest(double v, struct dec *o)
{
    o->nd = dtoa_shortest(v, o->d, &o->dp);
}

/* Writes NaN/Inf as Go does for every format; returns 0 for finite v. */
static size_t fmt_special(double v, char *out)
{
    const char *s = NULL;
    if (isnan(v)) {
        s = "NaN";
    } else if (isinf(v)) {
        s = v > 0 ? "+Inf" : "-Inf";
    }
    if (s == NULL) {
        return 0;
    }
    size_t n = strlen(s);
    memcpy(out, s, n + 1);
    return n;
}

/* Digits of a finite v; zero gives nd = 0 (Go's decimal for 0). */
static void dec_of(double v, struct dec *d)
{
    if (v == 0) {
        d->nd = 0;
        d->dp = 0;
        return;
    }
    dec_shortest(fabs(v), d);
}

/* Go fmtF with precision max(nd - dp, 0). */
static size_t layout_f(bool neg, const struct dec *d, char *out)
{
    size_t n = 0;
    if (neg) {
        out[n++] = '-';
    }
    if (d->dp > 0) {
        for (int i = 0; i < d->dp; i++) {
            out[n++] = i < d->nd ? d->d[i] : '0';
        }
    } else {
        out[n++] = '0';
    }
    int prec = d->nd - d->dp;
    if (prec > 0) {
        out[n++] = '.';
        for (int i = 0; i < prec; i++) {
            int j = d->dp + i;
            out[n++] = (j >= 0 && j < d->nd) ? d->d[j] : '0';
        }
    }
    out[n] = '\0';
    return n;
}

/* Go fmtE with precision nd - 1: exponent sign always, at least 2 digits. */
static size_t layout_e(bool neg, const struct dec *d, char *out)
{
    size_t n = 0;
    if (neg) {
        out[n++] = '-';
    }
    out[n++] = d->nd > 0 ? d->d[0] : '0';
    if (d->nd > 1) {
        out[n++] = '.';
        memcpy(out + n, d->d + 1, (size_t)d->nd - 1);
        n += (size_t)d->nd - 1;
    }
    int e = d->nd > 0 ? d->dp - 1 : 0;
    out[n++] = 'e';
    out[n++] = e < 0 ? '-' : '+';
    if (e < 0) {
        e = -e;
    }
    if (e >= 100) {
        out[n++] = (char)('0' + e / 100);
    }
    out[n++] = (char)('0' + e / 10 % 10);
    out[n++] = (char)('0' + e % 10);
    out[n] = '\0';
    return n;
}

size_t promname_fmt_le(double v, char out[PROMNAME_FMT_MAX])
{
    size_t n = fmt_special(v, out);
    if (n > 0) {
        return n;
    }
    struct dec d;
    dec_of(v, &d);
    return layout_f(signbit(v) != 0, &d, out);
}

size_t promname_fmt_e(double v, char out[PROMNAME_FMT_MAX])
{
    size_t n = fmt_special(v, out);
    if (n > 0) {
        return n;
    }
    struct dec d;
    dec_of(v, &d);
    return layout_e(signbit(v) != 0, &d, out);
}

/* encoding/json and jsonutil both switch to 'e' at these magnitudes. */
static bool wants_e(double v)
{
    double a = fabs(v);
    return a != 0 && (a < 1e-6 || a >= 1e21);
}

size_t promname_fmt_value(double v, char out[PROMNAME_FMT_MAX])
{
    return wants_e(v) ? promname_fmt_e(v, out) : promname_fmt_le(v, out);
}

/* encoding/json's float form (finite v only): 'e' loses the exponent's
 * leading zero ("1e-07" -> "1e-7"); "e+21" stays. */
static size_t fmt_es6(double v, char out[PROMNAME_FMT_MAX])
{
    if (!wants_e(v)) {
        return promname_fmt_le(v, out);
    }
    size_t n = promname_fmt_e(v, out);
    if (n >= 4 && out[n - 4] == 'e' && out[n - 3] == '-' && out[n - 2] == '0') {
        out[n - 2] = out[n - 1];
        out[--n] = '\0';
    }
    return n;
}

size_t promname_fmt_attr_double(double v, char out[PROMNAME_FMT_MAX])
{
    if (isnan(v) || isinf(v)) {
        /* pdata float64AsString: "json: unsupported value: " + FormatFloat(v, 'g', -1) */
        static const char pre[] = "json: unsupported value: ";
        memcpy(out, pre, sizeof(pre) - 1);
        return sizeof(pre) - 1 + fmt_special(v, out + sizeof(pre) - 1);
    }
    return fmt_es6(v, out);
}

/* ------------------------------------------------------------------ */
/* UTF-8 as Go's decoder sees it                                       */

/* Width of the valid UTF-8 rune at p (n > 0 bytes), storing it in *cp, or
 * 0 when the bytes there are not one (Go then yields RuneError, width 1). */
static size_t utf8_rune(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t w;
    uint8_t lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        w = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        w = 3;
        v = c & 0x0F;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        w = 4;
        v = c & 0x07;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;
        }
    } else {
        return 0;
    }
    if (n < w || p[1] < lo || p[1] > hi) {
        return 0;
    }
    v = v << 6 | (p[1] & 0x3F);
    for (size_t i = 2; i < w; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
        v = v << 6 | (p[i] & 0x3F);
    }
    *cp = v;
    return w;
}

/* unicode.IsSpace */
static bool is_space_rune(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* strings.TrimSpace on [*s, *s + *n). */
static void trim_space(const char **s, size_t *n)
{
    const uint8_t *p = (const uint8_t *)*s;
    size_t a = 0, b = *n;
    uint32_t cp;
    while (a < b) {
        size_t w = utf8_rune(p + a, b - a, &cp);
        if (w == 0 || !is_space_rune(cp)) {
            break;
        }
        a += w;
    }
    while (b > a) {
        size_t st = b - 1; /* DecodeLastRune: back to a non-continuation byte */
        while (st > a && b - st < 4 && (p[st] & 0xC0) == 0x80) {
            st--;
        }
        size_t w = utf8_rune(p + st, b - st, &cp);
        if (w == 0 || st + w != b || !is_space_rune(cp)) {
            break;
        }
        b = st;
    }
    *s += a;
    *n = b - a;
}

/* ------------------------------------------------------------------ */
/* metric names and units                                              */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool metric_char(char c)
{
    return is_alnum(c) || c == ':';
}

static bool mem_is(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(p, lit, l) == 0;
}

static bool has_brace(const char *p, size_t n)
{
    return memchr(p, '{', n) != NULL || memchr(p, '}', n) != NULL;
}

static const char *const unit_map[][2] = {
    {"d", "days"},
    {"h", "hours"},
    {"min", "minutes"},
    {"s", "seconds"},
    {"ms", "milliseconds"},
    {"us", "microseconds"},
    {"ns", "nanoseconds"},
    {"By", "bytes"},
    {"KiBy", "kibibytes"},
    {"MiBy", "mebibytes"},
    {"GiBy", "gibibytes"},
    {"TiBy", "tibibytes"},
    {"KBy", "kilobytes"},
    {"MBy", "megabytes"},
    {"GBy", "gigabytes"},
    {"TBy", "terabytes"},
    {"m", "meters"},
    {"V", "volts"},
    {"A", "amperes"},
    {"J", "joules"},
    {"W", "watts"},
    {"g", "grams"},
    {"Cel", "celsius"},
    {"Hz", "hertz"},
    {"1", ""},
    {"%", "percent"},
};

static const char *const per_unit_map[][2] = {
    {"s", "second"}, {"m", "minute"}, {"h", "hour"}, {"d", "day"},
    {"w", "week"},   {"mo", "month"}, {"y", "year"},
};

static void map_lookup(const char *const (*map)[2], size_t n, const char **s, size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        if (mem_is(*s, *len, map[i][0])) {
            *s = map[i][1];
            *len = strlen(map[i][1]);
            return;
        }
    }
}

/* buildUnitSuffixes before cleanUpUnit: the main part (NULL when skipped)
 * and the per part without its "per_" (NULL when there is none). */
struct unit_parts {
    const char *main, *per;
    size_t main_len, per_len;
};

static void unit_split(const char *unit, size_t ulen, struct unit_parts *u)
{
    if (ulen == 0) {
        unit = ""; /* a batch's empty unit may be a NULL pointer */
    }
    const char *slash = memchr(unit, '/', ulen);
    const char *m = unit;
    size_t ml = slash != NULL ? (size_t)(slash - unit) : ulen;
    u->main = u->per = NULL;
    u->main_len = u->per_len = 0;
    trim_space(&m, &ml);
    if (ml > 0 && !has_brace(m, ml)) {
        map_lookup(unit_map, sizeof(unit_map) / sizeof(unit_map[0]), &m, &ml);
        u->main = m;
        u->main_len = ml;
    }
    if (slash != NULL && slash + 1 < unit + ulen) {
        const char *q = slash + 1;
        size_t ql = (size_t)(unit + ulen - q);
        trim_space(&q, &ql);
        if (ql > 0 && !has_brace(q, ql)) {
            map_lookup(per_unit_map, sizeof(per_unit_map) / sizeof(per_unit_map[0]), &q, &ql);
            if (ql > 0) {
                u->per = q;
                u->per_len = ql;
            }
        }
    }
}

/* cleanUpUnit(prefix + s): invalid characters to '_', runs of '_' to one,
 * one leading '_' dropped. Writes at most plen + n bytes to dst. Since
 * every non-ASCII byte is invalid and runs collapse, bytes and runes give
 * the same result. */
static size_t clean_unit(const char *prefix, const char *s, size_t n, char *dst)
{
    size_t o = 0;
    bool prev_us = false;
    for (int part = 0; part < 2; part++) {
        const char *p = part == 0 ? prefix : s;
        size_t pl = part == 0 ? strlen(prefix) : n;
        for (size_t i = 0; i < pl; i++) {
            char c = metric_char(p[i]) ? p[i] : '_';
            if (c == '_') {
                if (prev_us) {
                    continue;
                }
                prev_us = true;
            } else {
                prev_us = false;
            }
            dst[o++] = c;
        }
    }
    if (o > 0 && dst[0] == '_') {
        memmove(dst, dst + 1, --o);
    }
    return o;
}

/* Whether the name has a token (maximal run of metric chars) equal to t. */
static bool name_has_token(const char *name, size_t len, const char *t, size_t tl)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && !metric_char(name[i])) {
            i++;
        }
        size_t st = i;
        while (i < len && metric_char(name[i])) {
            i++;
        }
        if (i > st && i - st == tl && memcmp(name + st, t, tl) == 0) {
            return true;
        }
    }
    return false;
}

int promname_metric(const char *name, size_t len, const char *unit, size_t ulen,
                    enum promname_type t, char *out, size_t cap)
{
    /* Layout while building: name tokens at out[0..f), the cleaned units
     * parked at out[len + 1 ...]; tokens never exceed len bytes, so the two
     * cannot meet, and cap >= len + ulen + 32 bounds everything written. */
    if (name == NULL) {
        name = ""; /* empty strings of a batch may be NULL pointers */
    }
    if (unit == NULL) {
        unit = "";
    }
    if (cap < len + ulen + 32) {
        return -ENOBUFS;
    }
    bool counter = t == PROMNAME_COUNTER;
    bool ratio = t == PROMNAME_GAUGE && mem_is(unit, ulen, "1");
    const char *drop = counter ? "total" : ratio ? "ratio" : NULL;
    size_t f = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && !metric_char(name[i])) {
            i++;
        }
        size_t st = i;
        while (i < len && metric_char(name[i])) {
            i++;
        }
        if (i == st || (drop != NULL && mem_is(name + st, i - st, drop))) {
            continue;
        }
        if (f > 0) {
            out[f++] = '_';
        }
        memcpy(out + f, name + st, i - st);
        f += i - st;
    }

    struct unit_parts u;
    unit_split(unit, ulen, &u);
    char *park = out + len + 1;
    size_t ml = u.main != NULL ? clean_unit("", u.main, u.main_len, park) : 0;
    char *per = park + ml;
    size_t pl = u.per != NULL ? clean_unit("per_", u.per, u.per_len, per) : 0;
    /* addUnitTokens */
    if (ml > 0 && name_has_token(name, len, park, ml)) {
        ml = 0;
    }
    if (pl == 4 && memcmp(per, "per_", 4) == 0) {
        pl = 0;
    } else {
        if (pl > 0 && per[pl - 1] == '_') {
            pl--;
        }
        if (pl > 0 && name_has_token(name, len, per, pl)) {
            pl = 0; /* cannot happen ("per_" holds a '_'), kept for fidelity */
        }
    }
    if (pl > 0 && ml > 0 && park[ml - 1] == '_') {
        ml--;
    }
    /* removeItem(total|ratio) also applies to the unit tokens. */
    if (drop != NULL && mem_is(park, ml, drop)) {
        ml = 0;
    }
    /* Move each part before writing its separator: the separator's byte
     * may be the part's first byte (per can move up by one). */
    if (ml > 0) {
        size_t sep = f > 0;
        memmove(out + f + sep, park, ml);
        if (sep) {
            out[f] = '_';
        }
        f += sep + ml;
    }
    if (pl > 0) {
        size_t sep = f > 0;
        memmove(out + f + sep, per, pl);
        if (sep) {
            out[f] = '_';
        }
        f += sep + pl;
    }
    if (drop != NULL) {
        if (f > 0) {
            out[f++] = '_';
        }
        memcpy(out + f, drop, 5);
        f += 5;
    }
    if (f > 0 && is_digit(out[0])) {
        memmove(out + 1, out, f++);
        out[0] = '_';
    }
    out[f] = '\0';
    if (f == 0) {
        return -EINVAL;
    }
    if (!(f == len && memcmp(out, name, len) == 0)) {
        size_t k = 0;
        while (k < f && out[k] == '_') {
            k++;
        }
        if (k == f) {
            return -EINVAL;
        }
    }
    return (int)f;
}

int promname_unit(const char *unit, size_t ulen, char *out, size_t cap)
{
    if (cap < ulen + 32) {
        return -ENOBUFS;
    }
    struct unit_parts u;
    unit_split(unit, ulen, &u);
    size_t n = u.main != NULL ? clean_unit("", u.main, u.main_len, out) : 0;
    if (u.per != NULL) {
        /* UnitNamer.Build joins main + "_" + per without addUnitTokens' trims */
        if (n > 0) {
            out[n++] = '_';
        }
        n += clean_unit("per_", u.per, u.per_len, out + n);
    }
    if (n > 0 && out[0] == '_') {
        memmove(out, out + 1, --n);
    }
    if (n > 0 && out[n - 1] == '_') {
        n--;
    }
    out[n] = '\0';
    return (int)n;
}

/* ------------------------------------------------------------------ */
/* label names                                                         */

int promname_label_name(const char *key, size_t len, char *out, size_t cap)
{
    if (len == 0) {
        return -EINVAL;
    }
    if (cap < len + 5) {
        return -ENOBUFS;
    }
    /* sanitizeLabelName(preserveMultipleUnderscores=true): one '_' per rune */
    size_t n = 4; /* room for a "key_" prefix */
    const uint8_t *p = (const uint8_t *)key;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t w = utf8_rune(p + i, len - i, &cp);
        if (w == 0) {
            w = 1;
        }
        out[n++] = (w == 1 && is_alnum(key[i])) ? key[i] : '_';
        i += w;
    }
    size_t st = 4;
    if (is_digit(out[4])) {
        memcpy(out, "key_", 4);
        st = 0;
    } else if (out[4] == '_' && !(n > 5 && out[5] == '_')) {
        memcpy(out + 1, "key", 3); /* UnderscoreLabelSanitization */
        st = 1;
    }
    n -= st;
    memmove(out, out + st, n);
    out[n] = '\0';
    size_t k = 0;
    while (k < n && out[k] == '_') {
        k++;
    }
    return k == n ? -EINVAL : (int)n;
}

/* ------------------------------------------------------------------ */
/* values                                                              */

/* A writer into [p, p + lim); map sort scratch is taken downward from lim. */
struct wr {
    char *p;
    size_t len, lim;
    bool over;
};

static void wr_put(struct wr *w, const void *s, size_t n)
{
    if (w->over || w->lim - w->len < n) {
        w->over = true;
        return;
    }
    memcpy(w->p + w->len, s, n);
    w->len += n;
}

static void wr_c(struct wr *w, char c)
{
    wr_put(w, &c, 1);
}

static void wr_i64(struct wr *w, int64_t v)
{
    char s[24];
    int n = snprintf(s, sizeof(s), "%" PRId64, v);
    wr_put(w, s, (size_t)n);
}

static void wr_base64(struct wr *w, const uint8_t *s, size_t n)
{
    static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)s[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= s[i + 2];
        }
        char q[4] = {tb[v >> 18 & 63], tb[v >> 12 & 63], i + 1 < n ? tb[v >> 6 & 63] : '=',
                     i + 2 < n ? tb[v & 63] : '='};
        wr_put(w, q, 4);
    }
}

/* encoding/json string with SetEscapeHTML(false). */
static void wr_json_str(struct wr *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = (const uint8_t *)s;
    wr_c(w, '"');
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\') {
                wr_c(w, (char)c);
            } else {
                char e[6] = {'\\', (char)c, 0, 0, 0, 0};
                size_t el = 2;
                switch (c) {
                case '"':
                case '\\':
                    break;
                case '\b':
                    e[1] = 'b';
                    break;
                case '\f':
                    e[1] = 'f';
                    break;
                case '\n':
                    e[1] = 'n';
                    break;
                case '\r':
                    e[1] = 'r';
                    break;
                case '\t':
                    e[1] = 't';
                    break;
                default:
                    memcpy(e + 1, "u00", 3);
                    e[4] = hex[c >> 4];
                    e[5] = hex[c & 15];
                    el = 6;
                }
                wr_put(w, e, el);
            }
            i++;
            continue;
        }
        uint32_t cp;
        size_t wd = utf8_rune(p + i, n - i, &cp);
        if (wd == 0) {
            wr_put(w, "\\ufffd", 6);
            i++;
        } else if (cp == 0x2028 || cp == 0x2029) {
            wr_put(w, cp == 0x2028 ? "\\u2028" : "\\u2029", 6);
            i += wd;
        } else {
            wr_put(w, p + i, wd);
            i += wd;
        }
    }
    wr_c(w, '"');
}

struct kvent {
    const char *k;
    size_t kn;
    struct val v;
};

static int cmp_kvent(const void *a, const void *b)
{
    const struct kvent *x = a, *y = b;
    size_t m = x->kn < y->kn ? x->kn : y->kn;
    int c = memcmp(x->k, y->k, m);
    if (c != 0) {
        return c;
    }
    if (x->kn != y->kn) {
        return x->kn < y->kn ? -1 : 1;
    }
    /* equal keys keep their order: keys lie in the blob in member order */
    return x->k < y->k ? -1 : x->k > y->k;
}

/* -ERANGE: a NaN or infinity, which encoding/json refuses (the whole
 * AsString becomes ""). */
static int wr_json(struct wr *w, const struct val *v, int depth)
{
    char num[PROMNAME_FMT_MAX];
    if (depth > VAL_MAX_DEPTH) {
        return -EBADMSG;
    }
    switch (v->type) {
    case VAL_EMPTY:
        wr_put(w, "null", 4);
        return 0;
    case VAL_STR:
        wr_json_str(w, v->s, v->n);
        return 0;
    case VAL_BYTES:
        wr_c(w, '"');
        wr_base64(w, (const uint8_t *)v->s, v->n);
        wr_c(w, '"');
        return 0;
    case VAL_BOOL:
        wr_put(w, v->b ? "true" : "false", v->b ? 4 : 5);
        return 0;
    case VAL_INT:
        wr_i64(w, v->i);
        return 0;
    case VAL_DOUBLE:
        if (isnan(v->d) || isinf(v->d)) {
            return -ERANGE;
        }
        wr_put(w, num, fmt_es6(v->d, num));
        return 0;
    case VAL_ARRAY: {
        struct val_rd r = v->inner;
        wr_c(w, '[');
        for (uint32_t i = 0; i < v->count; i++) {
            struct val m;
            if (val_rd_value(&r, &m) < 0) {
                return -EBADMSG;
            }
            if (i > 0) {
                wr_c(w, ',');
            }
            int rc = wr_json(w, &m, depth + 1);
            if (rc < 0) {
                return rc;
            }
        }
        wr_c(w, ']');
        return 0;
    }
    case VAL_KVLIST: {
        /* AsRaw builds a Go map (the last duplicate wins), json sorts keys. */
        size_t lim = w->lim;
        size_t room = (lim - w->len) / sizeof(struct kvent);
        if (v->count > room) {
            w->over = true;
            return 0;
        }
        uintptr_t top = (uintptr_t)(w->p + lim - (size_t)v->count * sizeof(struct kvent));
        top &= ~(uintptr_t)(_Alignof(struct kvent) - 1);
        if (top < (uintptr_t)(w->p + w->len)) {
            w->over = true;
            return 0;
        }
        struct kvent *e = (struct kvent *)top;
        w->lim = (size_t)((char *)e - w->p);
        struct val_rd r = v->inner;
        int rc = 0;
        for (uint32_t i = 0; i < v->count; i++) {
            if (val_rd_kv(&r, &e[i].k, &e[i].kn, &e[i].v) < 0) {
                rc = -EBADMSG;
                goto out;
            }
        }
        qsort(e, v->count, sizeof(*e), cmp_kvent);
        wr_c(w, '{');
        bool first = true;
        for (uint32_t i = 0; i < v->count; i++) {
            if (i + 1 < v->count && e[i + 1].kn == e[i].kn &&
                memcmp(e[i + 1].k, e[i].k, e[i].kn) == 0) {
                continue; /* a later duplicate wins */
            }
            if (!first) {
                wr_c(w, ',');
            }
            first = false;
            wr_json_str(w, e[i].k, e[i].kn);
            wr_c(w, ':');
            rc = wr_json(w, &e[i].v, depth + 1);
            if (rc < 0) {
                goto out;
            }
        }
        wr_c(w, '}');
    out:
        w->lim = lim;
        return rc;
    }
    default:
        return -EBADMSG;
    }
}

int promname_label_value(const struct val *v, char *out, size_t cap)
{
    struct wr w = {out, 0, cap, false};
    char num[PROMNAME_FMT_MAX];
    int rc = 0;
    switch (v->type) {
    case VAL_EMPTY:
        return 0;
    case VAL_STR:
        wr_put(&w, v->s, v->n);
        break;
    case VAL_BYTES:
        wr_base64(&w, (const uint8_t *)v->s, v->n);
        break;
    case VAL_BOOL:
        wr_put(&w, v->b ? "true" : "false", v->b ? 4 : 5);
        break;
    case VAL_INT:
        wr_i64(&w, v->i);
        break;
    case VAL_DOUBLE:
        wr_put(&w, num, promname_fmt_attr_double(v->d, num));
        break;
    case VAL_ARRAY:
    case VAL_KVLIST:
        rc = wr_json(&w, v, 1);
        if (rc == -ERANGE) {
            return 0; /* json.Marshal failed: pdata returns "" */
        }
        break;
    default:
        return -EBADMSG;
    }
    if (rc < 0) {
        return rc;
    }
    return w.over ? -ENOBUFS : (int)w.len;
}

/* ------------------------------------------------------------------ */
/* label sets                                                          */

void promname_lset_init(struct promname_lset *ls, struct promname_label *lab, uint32_t cap,
                        char *buf, size_t buf_cap)
{
    ls->lab = lab;
    ls->cap = cap;
    ls->buf = buf;
    ls->buf_cap = buf_cap;
    promname_lset_reset(ls);
}

void promname_lset_reset(struct promname_lset *ls)
{
    ls->n = 0;
    ls->len = 0;
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = memcmp(a, b, m);
    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn;
}

/* First index whose name is >= name. */
static uint32_t lset_lower(const struct promname_lset *ls, const char *name, size_t nlen)
{
    uint32_t lo = 0, hi = ls->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cmp_bytes(ls->lab[mid].name, ls->lab[mid].name_len, name, nlen) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

const struct promname_label *promname_lset_get(const struct promname_lset *ls, const char *name,
                                               size_t nlen)
{
    uint32_t i = lset_lower(ls, name, nlen);
    if (i < ls->n && cmp_bytes(ls->lab[i].name, ls->lab[i].name_len, name, nlen) == 0) {
        return &ls->lab[i];
    }
    return NULL;
}

/* Set; keep_empty keeps an empty value as an entry (the scope set's
 * "remove" marks) instead of removing the label. */
static int lset_set(struct promname_lset *ls, const char *name, size_t nlen, const char *value,
                    size_t vlen, bool keep_empty)
{
    uint32_t i = lset_lower(ls, name, nlen);
    bool found = i < ls->n && cmp_bytes(ls->lab[i].name, ls->lab[i].name_len, name, nlen) == 0;
    if (vlen == 0 && !keep_empty) {
        if (found) {
            memmove(&ls->lab[i], &ls->lab[i + 1], (ls->n - i - 1) * sizeof(ls->lab[0]));
            ls->n--;
        }
        return 0;
    }
    if (!found) {
        if (ls->n == ls->cap) {
            return -ENOBUFS;
        }
        memmove(&ls->lab[i + 1], &ls->lab[i], (ls->n - i) * sizeof(ls->lab[0]));
        ls->n++;
    }
    ls->lab[i] = (struct promname_label){name, value, (uint32_t)nlen, (uint32_t)vlen, NULL, 0};
    return 0;
}

int promname_lset_set(struct promname_lset *ls, const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
    return lset_set(ls, name, nlen, value, vlen, false);
}

int promname_lset_merge(struct promname_lset *ls, const struct promname_lset *from)
{
    for (uint32_t i = 0; i < from->n; i++) {
        const struct promname_label *l = &from->lab[i];
        int rc = promname_lset_set(ls, l->name, l->name_len, l->value, l->value_len);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static char *lset_room(struct promname_lset *ls, size_t *room)
{
    *room = ls->buf_cap - ls->len;
    return ls->buf + ls->len;
}

/* The label name of |key| into the set's buffer, or the key itself when it
 * is already a valid name that Build leaves alone. */
static int lset_name(struct promname_lset *ls, const char *key, size_t kn, const char **name,
                     size_t *nl)
{
    bool same = kn > 0 && !is_digit(key[0]) && !(key[0] == '_' && !(kn > 1 && key[1] == '_'));
    bool any = false;
    for (size_t i = 0; same && i < kn; i++) {
        if (key[i] != '_') {
            any = true;
            same = is_alnum(key[i]);
        }
    }
    if (same && any) {
        *name = key;
        *nl = kn;
        return 0;
    }
    size_t room;
    char *dst = lset_room(ls, &room);
    int rc = promname_label_name(key, kn, dst, room);
    if (rc < 0) {
        return rc;
    }
    ls->len += (size_t)rc;
    *name = dst;
    *nl = (size_t)rc;
    return 0;
}

/* The AsString of |v|: a string is borrowed, anything else rendered. */
static int lset_value(struct promname_lset *ls, const struct val *v, const char **value, size_t *vl)
{
    if (v->type == VAL_STR) {
        *value = v->s;
        *vl = v->n;
        return 0;
    }
    size_t room;
    char *dst = lset_room(ls, &room);
    int rc = promname_label_value(v, dst, room);
    if (rc < 0) {
        return rc;
    }
    ls->len += (size_t)rc;
    *value = dst;
    *vl = (size_t)rc;
    return 0;
}

static int cmp_label_key(const void *a, const void *b)
{
    const struct promname_label *x = a, *y = b;
    int c = cmp_bytes(x->name, x->name_len, y->name, y->name_len);
    if (c != 0) {
        return c;
    }
    c = cmp_bytes(x->key, x->key_len, y->key, y->key_len);
    if (c != 0) {
        return c;
    }
    return x->key < y->key ? -1 : x->key > y->key; /* duplicate keys: blob order */
}

/* Name, then position in the blob: the scope builder's "last one wins". */
static int cmp_label_pos(const void *a, const void *b)
{
    const struct promname_label *x = a, *y = b;
    int c = cmp_bytes(x->name, x->name_len, y->name, y->name_len);
    if (c != 0) {
        return c;
    }
    return x->key < y->key ? -1 : x->key > y->key;
}

static bool is_identifying(const char *k, size_t kn)
{
    return mem_is(k, kn, "service.name") || mem_is(k, kn, "service.namespace") ||
           mem_is(k, kn, "service.instance.id");
}

/* Appends one entry per attribute (unsorted) with its name and value. */
static int lset_collect(struct promname_lset *ls, const uint8_t *p, size_t n, uint32_t count,
                        unsigned skip, const char *name_prefix)
{
    static const uint8_t none[1];
    struct val_rd r = {p != NULL ? p : none, (p != NULL ? p : none) + (p != NULL ? n : 0)};
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            return -EBADMSG;
        }
        if (((skip & PROMNAME_SKIP_NAME) && mem_is(k, kn, "__name__")) ||
            ((skip & PROMNAME_SKIP_IDENTIFYING) && is_identifying(k, kn))) {
            continue;
        }
        if (ls->n == ls->cap) {
            return -ENOBUFS;
        }
        const char *name;
        size_t nl;
        int rc;
        if (name_prefix != NULL) {
            /* buildLabelName("otel_scope_" + k) */
            size_t pl = strlen(name_prefix), room;
            char *tmp = lset_room(ls, &room);
            if (room < pl + kn) {
                return -ENOBUFS;
            }
            memcpy(tmp, name_prefix, pl);
            memcpy(tmp + pl, k, kn);
            ls->len += pl + kn;
            rc = lset_name(ls, tmp, pl + kn, &name, &nl);
        } else {
            rc = lset_name(ls, k, kn, &name, &nl);
        }
        if (rc < 0) {
            return rc;
        }
        const char *value;
        size_t vl;
        rc = lset_value(ls, &v, &value, &vl);
        if (rc < 0) {
            return rc;
        }
        ls->lab[ls->n++] =
            (struct promname_label){name, value, (uint32_t)nl, (uint32_t)vl, k, (uint32_t)kn};
    }
    return 0;
}

int promname_lset_add_attrs(struct promname_lset *ls, const uint8_t *p, size_t n, uint32_t count,
                            unsigned skip)
{
    if (ls->n != 0) {
        return -EINVAL;
    }
    int rc = lset_collect(ls, p, n, count, skip, NULL);
    if (rc < 0) {
        return rc;
    }
    /* createAttributes: attributes in key order, each colliding value
     * appended to a non-empty one with ';' (labels.Builder.Set of "" is a
     * delete, so leading empty values vanish and later ones stay). Sorting
     * by (name, key) makes each name's values adjacent in key order. */
    qsort(ls->lab, ls->n, sizeof(ls->lab[0]), cmp_label_key);
    uint32_t j = 0;
    for (uint32_t a = 0; a < ls->n;) {
        uint32_t b = a + 1;
        while (b < ls->n && cmp_bytes(ls->lab[a].name, ls->lab[a].name_len, ls->lab[b].name,
                                      ls->lab[b].name_len) == 0) {
            b++;
        }
        uint32_t f = a;
        while (f < b && ls->lab[f].value_len == 0) {
            f++;
        }
        if (f < b) {
            struct promname_label l = ls->lab[f];
            if (b - f > 1) {
                size_t total = 0, room;
                for (uint32_t k = f; k < b; k++) {
                    total += ls->lab[k].value_len + (k > f);
                }
                char *dst = lset_room(ls, &room);
                if (room < total) {
                    return -ENOBUFS;
                }
                size_t o = 0;
                for (uint32_t k = f; k < b; k++) {
                    if (k > f) {
                        dst[o++] = ';';
                    }
                    memcpy(dst + o, ls->lab[k].value, ls->lab[k].value_len);
                    o += ls->lab[k].value_len;
                }
                ls->len += total;
                l.value = dst;
                l.value_len = (uint32_t)total;
            }
            ls->lab[j++] = l;
        }
        a = b;
    }
    ls->n = j;
    return 0;
}

/* AsString of a resource attribute into r's buffer (strings borrowed). */
static int res_str(const struct val *v, char **buf, size_t *cap, const char **s, size_t *n)
{
    if (v->type == VAL_STR) {
        *s = v->s;
        *n = v->n;
        return 0;
    }
    int rc = promname_label_value(v, *buf, *cap);
    if (rc < 0) {
        return rc;
    }
    *s = *buf;
    *n = (size_t)rc;
    *buf += rc;
    *cap -= (size_t)rc;
    return 0;
}

int promname_resource_init(struct promname_resource *r, const uint8_t *p, size_t n, uint32_t count,
                           char *buf, size_t cap)
{
    struct val ids[3];
    bool have[3] = {false, false, false};
    static const char *const names[3] = {"service.namespace", "service.name",
                                         "service.instance.id"};
    static const uint8_t none[1];
    struct val_rd rd = {p != NULL ? p : none, (p != NULL ? p : none) + (p != NULL ? n : 0)};
    memset(r, 0, sizeof(*r));
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&rd, &k, &kn, &v) < 0) {
            return -EBADMSG;
        }
        for (int j = 0; j < 3; j++) {
            if (!have[j] && mem_is(k, kn, names[j])) {
                have[j] = true; /* pcommon.Map.Get: the first one */
                ids[j] = v;
            }
        }
    }
    r->n_other = count - (uint32_t)have[0] - (uint32_t)have[1] - (uint32_t)have[2];
    const char *s;
    size_t sn;
    int rc;
    if (have[1]) {
        rc = res_str(&ids[1], &buf, &cap, &s, &sn);
        if (rc < 0) {
            return rc;
        }
        if (have[0]) {
            const char *ns;
            size_t nsn;
            rc = res_str(&ids[0], &buf, &cap, &ns, &nsn);
            if (rc < 0) {
                return rc;
            }
            if (cap < nsn + 1 + sn) {
                return -ENOBUFS;
            }
            memmove(buf, ns, nsn); /* ns may be the bytes just rendered here */
            buf[nsn] = '/';
            memcpy(buf + nsn + 1, s, sn);
            s = buf;
            sn += nsn + 1;
            buf += sn;
            cap -= sn;
        }
        if (sn > 0) {
            r->job = s;
            r->job_len = (uint32_t)sn;
        }
    }
    if (have[2]) {
        rc = res_str(&ids[2], &buf, &cap, &s, &sn);
        if (rc < 0) {
            return rc;
        }
        if (sn > 0) {
            r->instance = s;
            r->instance_len = (uint32_t)sn;
        }
    }
    return 0;
}

int promname_lset_add_resource(struct promname_lset *ls, const struct promname_resource *r)
{
    int rc = 0;
    if (r->job != NULL) {
        rc = promname_lset_set(ls, "job", 3, r->job, r->job_len);
    }
    if (rc == 0 && r->instance != NULL) {
        rc = promname_lset_set(ls, "instance", 8, r->instance, r->instance_len);
    }
    return rc;
}

int promname_target_info(struct promname_lset *ls, const uint8_t *p, size_t n, uint32_t count,
                         const struct promname_resource *r)
{
    if (r->n_other == 0) {
        return 0;
    }
    int rc = promname_lset_add_attrs(ls, p, n, count, PROMNAME_SKIP_IDENTIFYING);
    if (rc == 0) {
        rc = promname_lset_add_resource(ls, r);
    }
    if (rc < 0) {
        return rc;
    }
    /* haveIdentifier: a resource attribute literally named job or instance
     * counts too, as in the receiver. */
    if (promname_lset_get(ls, "job", 3) == NULL && promname_lset_get(ls, "instance", 8) == NULL) {
        return 0;
    }
    rc = promname_lset_set(ls, "__name__", 8, "target_info", 11);
    return rc < 0 ? rc : 1;
}

int promname_scope_labels(struct promname_lset *ls, const struct scope_row *s, const uint8_t *attrs,
                          size_t attrs_len)
{
    if (ls->n != 0) {
        return -EINVAL;
    }
    if (s->name.len == 0) {
        return 0; /* setScopeContext: no scope labels for an unnamed scope */
    }
    int rc = lset_collect(ls, attrs, attrs_len, s->attrs.count, 0, "otel_scope_");
    if (rc < 0) {
        return rc;
    }
    /* A separate labels.Builder per scope: the last value of a name wins,
     * an empty last value leaves the name out. */
    qsort(ls->lab, ls->n, sizeof(ls->lab[0]), cmp_label_pos);
    uint32_t j = 0;
    for (uint32_t a = 0; a < ls->n; a++) {
        bool last = a + 1 == ls->n || cmp_bytes(ls->lab[a].name, ls->lab[a].name_len,
                                                ls->lab[a + 1].name, ls->lab[a + 1].name_len) != 0;
        if (last && ls->lab[a].value_len > 0) {
            ls->lab[j++] = ls->lab[a];
        }
    }
    ls->n = j;
    rc = lset_set(ls, "otel_scope_name", 15, s->name.p, s->name.len, true);
    if (rc == 0) {
        rc = lset_set(ls, "otel_scope_version", 18, s->version.p, s->version.len, true);
    }
    if (rc == 0) {
        rc = lset_set(ls, "otel_scope_schema_url", 21, s->schema_url.p, s->schema_url.len, true);
    }
    return rc;
}

/* ------------------------------------------------------------------ */
/* kinds and points                                                    */

int promname_type_of(enum metric_kind kind, bool monotonic)
{
    switch (kind) {
    case MK_GAUGE:
        return PROMNAME_GAUGE;
    case MK_SUM:
        return monotonic ? PROMNAME_COUNTER : PROMNAME_NONMONOTONIC_SUM;
    case MK_HISTOGRAM:
        return PROMNAME_HISTOGRAM;
    case MK_EXP_HISTOGRAM:
        return PROMNAME_EXP_HISTOGRAM;
    case MK_SUMMARY:
        return PROMNAME_SUMMARY;
    default:
        return -EINVAL;
    }
}

enum promname_temporality promname_temporality(enum metric_kind kind, int32_t temporality)
{
    if (kind != MK_SUM && kind != MK_HISTOGRAM && kind != MK_EXP_HISTOGRAM) {
        return PROMNAME_T_NONE;
    }
    /* AggregationTemporality: 1 DELTA, 2 CUMULATIVE */
    return temporality == 2   ? PROMNAME_T_CUMULATIVE
           : temporality == 1 ? PROMNAME_T_DELTA
                              : PROMNAME_T_INVALID;
}

const char *promname_meta_type(enum promname_type t, enum promname_temporality tp)
{
    if (tp == PROMNAME_T_DELTA || tp == PROMNAME_T_INVALID) {
        return "unknown";
    }
    switch (t) {
    case PROMNAME_GAUGE:
    case PROMNAME_NONMONOTONIC_SUM:
        return "gauge";
    case PROMNAME_COUNTER:
        return "counter";
    case PROMNAME_HISTOGRAM:
    case PROMNAME_EXP_HISTOGRAM:
        return "histogram";
    case PROMNAME_SUMMARY:
        return "summary";
    }
    return "unknown";
}

int64_t promname_ts_ms(uint64_t time_ns)
{
    /* convertTimeStamp: int64(ts) / 1_000_000, Go's conversion wraps */
    int64_t s;
    memcpy(&s, &time_ns, sizeof(s));
    return s / 1000000;
}

enum {
    XS_NUMBER,
    XS_SUM,
    XS_COUNT,
    XS_BUCKETS,
    XS_INF,
    XS_QUANTILES,
    XS_DONE,
};

int promname_expand_init(struct promname_expand *x, enum metric_kind kind,
                         const struct point_row *pt, const uint8_t *detail, size_t len)
{
    static const uint8_t none[1];
    if (detail == NULL) {
        detail = none; /* NULL + 0 is undefined */
        len = 0;
    }
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->stale = (pt->flags & PROMNAME_FLAG_NO_RECORDED_VALUE) != 0;
    x->count = pt->count;
    x->sum = pt->sum;
    x->has_sum = pt->has_sum;
    struct val_rd r = {detail, detail + len};
    uint32_t nc, nb;
    switch (kind) {
    case MK_GAUGE:
    case MK_SUM:
        x->number = pt->value_type == PV_DOUBLE ? pt->value.d
                    : pt->value_type == PV_INT  ? (double)pt->value.i
                                                : 0.0;
        x->state = XS_NUMBER;
        return 0;
    case MK_HISTOGRAM:
        if (val_rd_u32(&r, &nc) < 0 || (size_t)(r.end - r.p) / 8 < nc) {
            return -EBADMSG;
        }
        x->counts = (struct val_rd){r.p, r.p + (size_t)nc * 8};
        r.p += (size_t)nc * 8;
        if (val_rd_u32(&r, &nb) < 0 || (size_t)(r.end - r.p) / 8 < nb) {
            return -EBADMSG;
        }
        x->bounds = (struct val_rd){r.p, r.p + (size_t)nb * 8};
        x->n = nc < nb ? nc : nb; /* the receiver stops at the shorter list */
        x->state = x->has_sum ? XS_SUM : XS_COUNT;
        return 0;
    case MK_SUMMARY:
        if (val_rd_u32(&r, &nc) < 0 || (size_t)(r.end - r.p) / 16 < nc) {
            return -EBADMSG;
        }
        x->quantiles = (struct val_rd){r.p, r.p + (size_t)nc * 16};
        x->n = nc;
        x->has_sum = true; /* a summary always writes _sum */
        x->state = XS_SUM;
        return 0;
    default:
        return -EINVAL;
    }
}

static void sample_set(struct promname_sample *o, enum promname_suffix sfx, double v)
{
    static const char *const sfx_str[] = {"", "_bucket", "_sum", "_count"};
    o->suffix = sfx;
    o->suffix_str = sfx_str[sfx];
    o->suffix_len = (uint32_t)strlen(sfx_str[sfx]);
    o->extra_name = NULL;
    o->extra_len = 0;
    o->extra[0] = '\0';
    o->value = v;
}

int promname_expand_next(struct promname_expand *x, struct promname_sample *out)
{
    double q, v;
    uint64_t c;
    switch (x->state) {
    case XS_NUMBER:
        sample_set(out, PROMNAME_SFX_NONE, x->number);
        x->state = XS_DONE;
        break;
    case XS_SUM:
        sample_set(out, PROMNAME_SFX_SUM, x->sum);
        x->state = XS_COUNT;
        break;
    case XS_COUNT:
        sample_set(out, PROMNAME_SFX_COUNT, (double)x->count);
        x->state = x->kind == MK_SUMMARY ? XS_QUANTILES : XS_BUCKETS;
        break;
    case XS_BUCKETS:
        if (x->i == x->n) {
            sample_set(out, PROMNAME_SFX_BUCKET, (double)x->count);
            out->extra_name = "le";
            memcpy(out->extra, "+Inf", 5);
            out->extra_len = 4;
            x->state = XS_DONE;
            break;
        }
        /* the lengths were checked at init, so these reads cannot fail */
        (void)val_rd_u64(&x->counts, &c);
        (void)val_rd_f64(&x->bounds, &q);
        x->cum += c; /* uint64, wrapping as Go's does */
        x->i++;
        sample_set(out, PROMNAME_SFX_BUCKET, (double)x->cum);
        out->extra_name = "le";
        out->extra_len = (uint32_t)promname_fmt_le(q, out->extra);
        break;
    case XS_QUANTILES:
        if (x->i == x->n) {
            x->state = XS_DONE;
            return 0;
        }
        (void)val_rd_f64(&x->quantiles, &q);
        (void)val_rd_f64(&x->quantiles, &v);
        x->i++;
        sample_set(out, PROMNAME_SFX_NONE, v);
        out->extra_name = "quantile";
        out->extra_len = (uint32_t)promname_fmt_le(q, out->extra);
        break;
    default:
        return 0;
    }
    if (x->stale) {
        out->value = promname_stale_nan();
    }
    return 1;
}
