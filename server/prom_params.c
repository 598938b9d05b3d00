/*
 * prom_params.c - parameter values of the Prometheus HTTP API (see
 * prom_params.h). Each reader follows what Go does in Prometheus 2.42's
 * web/api/v1/api.go (parseTime, parseDuration) and the Go library calls
 * under it (strconv.ParseFloat, time.Parse with RFC3339Nano, math.Modf,
 * math.Round, time.Unix), so odd inputs land where Prometheus lands them.
 */
#include "server/prom_params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/promql.h"
#include "storage/promname.h"

/* ---- Go float syntax -------------------------------------------------------------- */

static bool ieq(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    if (n != l) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != lit[i]) {
            return false;
        }
    }
    return true;
}

/*
 * strconv.ParseFloat(s, 64) == nil: decimal or hex ('p' exponent required)
 * floats with an optional sign, "inf", "infinity", "nan" in any case.
 * strtod does the arithmetic (both round correctly); this only refuses what
 * Go refuses and strtod takes (spaces, "nan(...)", hex without 'p'), and
 * an overflow (Go: ErrRange; underflow to 0 is no error in either).
 */
static int go_parse_float(const char *s, size_t n, double *out)
{
    if (n == 0 || n > 512 || memchr(s, '\0', n) != NULL) {
        return -EINVAL;
    }
    char buf[520];
    memcpy(buf, s, n);
    buf[n] = '\0';
    const char *p = buf;
    size_t body = n;
    if (*p == '+' || *p == '-') {
        p++;
        body--;
    }
    if (ieq(p, body, "inf") || ieq(p, body, "infinity")) {
        *out = buf[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    if (ieq(p, body, "nan")) {
        if (p != buf) {
            return -EINVAL; /* Go takes no sign on NaN */
        }
        *out = NAN;
        return 0;
    }
    bool hex = body > 1 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    bool digit = false;
    for (const char *q = p; *q; q++) {
        char c = *q;
        if (c >= '0' && c <= '9') {
            digit = true;
        } else if (hex && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            digit = true;
        } else if (!(c == '.' || c == 'e' || c == 'E' || c == 'p' || c == 'P' || c == '+' ||
                     c == '-' || c == 'x' || c == 'X')) {
            return -EINVAL;
        }
    }
    if (!digit || (hex && strpbrk(p, "pP") == NULL)) {
        return -EINVAL;
    }
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end != '\0' || isinf(v)) {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* ---- times --------------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* |k| digits at s[*i] (exactly k when fixed, else 1 or 2). */
static int digits(const char *s, size_t n, size_t *i, int k, bool fixed, int *out)
{
    int v = 0, got = 0;
    while (got < k && *i < n && s[*i] >= '0' && s[*i] <= '9') {
        v = v * 10 + (s[*i] - '0');
        (*i)++;
        got++;
    }
    if (got == 0 || (fixed && got != k)) {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int lit(const char *s, size_t n, size_t *i, char c)
{
    if (*i >= n || s[*i] != c) {
        return -EINVAL;
    }
    (*i)++;
    return 0;
}

/* time.Parse(time.RFC3339Nano, s) as Go 1.19 does it. */
static int parse_rfc3339(const char *s, size_t n, struct prom_time *out)
{
    size_t i = 0;
    int y, mo, d, h, mi, sec;
    if (digits(s, n, &i, 4, true, &y) < 0 || lit(s, n, &i, '-') < 0 ||
        digits(s, n, &i, 2, true, &mo) < 0 || lit(s, n, &i, '-') < 0 ||
        digits(s, n, &i, 2, true, &d) < 0 || lit(s, n, &i, 'T') < 0 ||
        digits(s, n, &i, 2, false, &h) < 0 || lit(s, n, &i, ':') < 0 ||
        digits(s, n, &i, 2, true, &mi) < 0 || lit(s, n, &i, ':') < 0 ||
        digits(s, n, &i, 2, true, &sec) < 0) {
        return -EINVAL;
    }
    int64_t nsec = 0;
    if (i + 1 < n && (s[i] == '.' || s[i] == ',') && s[i + 1] >= '0' && s[i + 1] <= '9') {
        i++;
        int k = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (k < 9) {
                nsec = nsec * 10 + (s[i] - '0');
            }
            k++;
            i++;
        }
        for (; k < 9; k++) {
            nsec *= 10;
        }
    }
    int64_t off = 0;
    if (i < n && s[i] == 'Z') {
        i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1, oh, om;
        i++;
        if (digits(s, n, &i, 2, true, &oh) < 0 || lit(s, n, &i, ':') < 0 ||
            digits(s, n, &i, 2, true, &om) < 0 || oh > 24 || om > 59) {
            return -EINVAL;
        }
        off = sign * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    if (i != n || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        sec > 59) {
        return -EINVAL;
    }
    out->sec = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
    out->nsec = (int32_t)nsec;
    return 0;
}

/* Prometheus's minTime / maxTime as time.Format(RFC3339Nano) writes them. */
static const char MIN_TIME_TEXT[] = "-292273086-05-16T16:47:06Z";
static const char MAX_TIME_TEXT[] = "292277025-08-18T07:12:54.999999999Z";
#define MIN_TIME_SEC (-9223309901258974LL)
#define MAX_TIME_SEC 9223309901257974LL

/* time.Unix(sec, nsec) normalisation. */
static struct prom_time unix_time(int64_t sec, int64_t nsec)
{
    if (nsec < 0 || nsec >= 1000000000) {
        sec += nsec / 1000000000;
        nsec %= 1000000000;
        if (nsec < 0) {
            nsec += 1000000000;
            sec--;
        }
    }
    return (struct prom_time){sec, (int32_t)nsec};
}

int prom_parse_time(const char *s, size_t n, struct prom_time *out)
{
    double f;
    if (go_parse_float(s, n, &f) == 0) {
        double ip;
        double frac = modf(f, &ip);
        frac = round(frac * 1000) / 1000;
        /* int64(x) of a float out of range (or NaN) is 0x8000000000000000
         * on amd64, where Prometheus runs; C leaves it undefined */
        int64_t sec = isfinite(ip) && fabs(ip) < 9.2e18 ? (int64_t)ip : INT64_MIN;
        int64_t nsec = isfinite(frac) ? (int64_t)(frac * 1e9) : INT64_MIN;
        if (nsec == INT64_MIN) {
            nsec = 0;
        }
        *out = unix_time(sec, nsec);
        return 0;
    }
    if (parse_rfc3339(s, n, out) == 0) {
        return 0;
    }
    if (n == sizeof(MIN_TIME_TEXT) - 1 && memcmp(s, MIN_TIME_TEXT, n) == 0) {
        *out = (struct prom_time){MIN_TIME_SEC, 0};
        return 0;
    }
    if (n == sizeof(MAX_TIME_TEXT) - 1 && memcmp(s, MAX_TIME_TEXT, n) == 0) {
        *out = (struct prom_time){MAX_TIME_SEC, 999999999};
        return 0;
    }
    return -EINVAL;
}

int64_t prom_time_ms(const struct prom_time *t)
{
    int64_t ms;
    if (__builtin_mul_overflow(t->sec, 1000, &ms) ||
        __builtin_add_overflow(ms, t->nsec / 1000000, &ms)) {
        return t->sec < 0 ? INT64_MIN : INT64_MAX;
    }
    return ms;
}

int64_t prom_time_sub_ns(const struct prom_time *a, const struct prom_time *b)
{
    int64_t ds, d;
    if (__builtin_sub_overflow(a->sec, b->sec, &ds) ||
        __builtin_mul_overflow(ds, 1000000000LL, &d) ||
        __builtin_add_overflow(d, (int64_t)a->nsec - b->nsec, &d)) {
        return prom_time_before(a, b) ? INT64_MIN : INT64_MAX;
    }
    return d;
}

bool prom_time_before(const struct prom_time *a, const struct prom_time *b)
{
    return a->sec < b->sec || (a->sec == b->sec && a->nsec < b->nsec);
}

struct prom_time prom_time_of_ms(int64_t ms)
{
    int64_t sec = ms / 1000, rem = ms % 1000;
    if (rem < 0) {
        rem += 1000;
        sec--;
    }
    return (struct prom_time){sec, (int32_t)(rem * 1000000)};
}

/* ---- durations ----------------------------------------------------------------- */

int prom_parse_duration(const char *s, size_t n, int64_t *ns, char *err, size_t errlen)
{
    char q[300];
    double f;
    if (go_parse_float(s, n, &f) == 0) {
        double t = f * 1e9;
        /* float64(math.MaxInt64) is 2^63 */
        if (t > 9223372036854775808.0 || t < -9223372036854775808.0) {
            prom_go_quote(s, n, q, sizeof(q));
            snprintf(err, errlen, "cannot parse %s to a valid duration. It overflows int64", q);
            return -EINVAL;
        }
        /* time.Duration(t): NaN and 2^63 come out as MinInt64 on amd64 */
        *ns = isnan(t) || t >= 9223372036854775807.0 ? INT64_MIN : (int64_t)t;
        return 0;
    }
    int64_t ms;
    if (promql_parse_duration(s, n, &ms) == 0) {
        *ns = ms * 1000000;
        return 0;
    }
    prom_go_quote(s, n, q, sizeof(q));
    snprintf(err, errlen, "cannot parse %s to a valid duration", q);
    return -EINVAL;
}

/* ---- names, integers, quoting -------------------------------------------------- */

bool prom_label_name_valid(const char *s, size_t n)
{
    if (n == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return false;
        }
    }
    return true;
}

int prom_parse_int(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n) {
        return -EINVAL;
    }
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) {
            return -EINVAL;
        }
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    uint32_t cp;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < k) {
        return 0;
    }
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
        return 0;
    }
    return k;
}

size_t prom_go_quote(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < cap) {                                                                         \
            out[o] = (c);                                                                          \
        }                                                                                          \
        o++;                                                                                       \
    } while (0)
    PUT('"');
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\a':
            esc = "\\a";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\v':
            esc = "\\v";
            break;
        }
        if (esc != NULL) {
            for (const char *e = esc; *e; e++) {
                PUT(*e);
            }
            i++;
            continue;
        }
        size_t k = utf8_len(u + i, n - i);
        if (c < 0x20 || c == 0x7f || k == 0) {
            static const char hx[] = "0123456789abcdef";
            PUT('\\');
            PUT('x');
            PUT(hx[c >> 4]);
            PUT(hx[c & 15]);
            i++;
            continue;
        }
        for (size_t j = 0; j < k; j++) {
            PUT((char)u[i + j]);
        }
        i += k;
    }
    PUT('"');
#undef PUT
    if (cap > 0) {
        out[o < cap ? o : cap - 1] = '\0';
    }
    return o;
}

size_t prom_fmt_json_float(double v, char *out)
{
    size_t n = promname_fmt_value(v, out);
    /* encoding/json cleans "e-07" up to "e-7" */
    if (n >= 4 && out[n - 4] == 'e' && out[n - 3] == '-' && out[n - 2] == '0') {
        out[n - 2] = out[n - 1];
        out[--n] = '\0';
    }
    return n;
}
