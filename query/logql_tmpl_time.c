/*
 * logql_tmpl_time.c - Go time layouts for the template functions (date,
 * toDate, toDateInZone and the printing of time values): Time.Format and
 * time.Parse in UTC for the layout elements Go defines (see
 * logql_tmpl_int.h).
 */
#include "query/logql_tmpl_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- Go time layouts (UTC) ----------------------------------------------- */

static const char *const MONTHS[12] = {"January",   "February", "March",    "April",
                                       "May",       "June",     "July",     "August",
                                       "September", "October",  "November", "December"};
static const char *const DAYS[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                    "Thursday", "Friday", "Saturday"};

/* The layout element at l[i..] and its length, or 0 for a literal byte. */
static size_t layout_elem(const char *l, size_t n, size_t i, int *kind)
{
    static const char *const elems[] = {
        "January", "Jan",    "Monday", "Mon",   "MST", "2006", "Z07:00:00", "-07:00:00",
        "Z07:00",  "-07:00", "Z0700",  "-0700", "Z07", "-07",  "002",       "__2",
        "_2",      "01",     "02",     "03",    "04",  "05",   "06",        "15",
        "PM",      "pm",     "1",      "2",     "3",   "4",    "5",
    };
    for (size_t k = 0; k < sizeof(elems) / sizeof(elems[0]); k++) {
        size_t el = strlen(elems[k]);
        if (i + el <= n && memcmp(l + i, elems[k], el) == 0) {
            if (elems[k][0] == 'J' && el == 3 && i + 3 < n && l[i + 3] >= 'a' && l[i + 3] <= 'z') {
                continue; /* "Jan" inside a word */
            }
            *kind = (int)k;
            return el;
        }
    }
    if ((l[i] == '.' || l[i] == ',') && i + 1 < n && (l[i + 1] == '0' || l[i + 1] == '9')) {
        size_t j = i + 1;
        while (j < n && l[j] == l[i + 1]) {
            j++;
        }
        if (j == n || !(l[j] >= '0' && l[j] <= '9')) {
            *kind = l[i + 1] == '0' ? 100 : 101; /* fixed / trimmed fraction */
            return j - i;
        }
    }
    return 0;
}

/* Go's Time.Format(layout) in UTC; returns the length written (cut at cap). */
size_t tmpl_go_format(const char *l, size_t n, const struct tv *t, char *out, size_t cap)
{
    time_t secs = (time_t)(t->i / 1000000000);
    int64_t frac = t->i % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        secs--;
    }
    if (t->b) {
        secs = (time_t)GO_ZERO_TIME;
        frac = 0;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t o = 0;
#define PUTF(...)                                                                                  \
    do {                                                                                           \
        if (o < cap) {                                                                             \
            int w_ = snprintf(out + o, cap - o, __VA_ARGS__);                                      \
            o += w_ > 0 ? (size_t)w_ : 0;                                                          \
            o = o > cap ? cap : o;                                                                 \
        }                                                                                          \
    } while (0)
    for (size_t i = 0; i < n;) {
        int k;
        size_t el = layout_elem(l, n, i, &k);
        if (el == 0) {
            if (o < cap) {
                out[o++] = l[i];
            }
            i++;
            continue;
        }
        int h12 = tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12;
        switch (k) {
        case 0:
            PUTF("%s", MONTHS[tm.tm_mon]);
            break;
        case 1:
            PUTF("%.3s", MONTHS[tm.tm_mon]);
            break;
        case 2:
            PUTF("%s", DAYS[tm.tm_wday]);
            break;
        case 3:
            PUTF("%.3s", DAYS[tm.tm_wday]);
            break;
        case 4:
            PUTF("UTC");
            break;
        case 5:
            PUTF("%04d", tm.tm_year + 1900);
            break;
        case 6:
        case 8:
        case 10:
        case 12:
            PUTF("Z");
            break;
        case 7:
            PUTF("+00:00:00");
            break;
        case 9:
            PUTF("+00:00");
            break;
        case 11:
            PUTF("+0000");
            break;
        case 13:
            PUTF("+00");
            break;
        case 14:
            PUTF("%03d", tm.tm_yday + 1);
            break;
        case 15:
            PUTF("%3d", tm.tm_yday + 1);
            break;
        case 16:
            PUTF("%2d", tm.tm_mday);
            break;
        case 17:
            PUTF("%02d", tm.tm_mon + 1);
            break;
        case 18:
            PUTF("%02d", tm.tm_mday);
            break;
        case 19:
            PUTF("%02d", h12);
            break;
        case 20:
            PUTF("%02d", tm.tm_min);
            break;
        case 21:
            PUTF("%02d", tm.tm_sec);
            break;
        case 22:
            PUTF("%02d", (tm.tm_year + 1900) % 100);
            break;
        case 23:
            PUTF("%02d", tm.tm_hour);
            break;
        case 24:
            PUTF("%s", tm.tm_hour >= 12 ? "PM" : "AM");
            break;
        case 25:
            PUTF("%s", tm.tm_hour >= 12 ? "pm" : "am");
            break;
        case 26:
            PUTF("%d", tm.tm_mon + 1);
            break;
        case 27:
            PUTF("%d", tm.tm_mday);
            break;
        case 28:
            PUTF("%d", h12);
            break;
        case 29:
            PUTF("%d", tm.tm_min);
            break;
        case 30:
            PUTF("%d", tm.tm_sec);
            break;
        case 100:
        case 101: {
            char fd[10];
            snprintf(fd, sizeof(fd), "%09" PRId64, frac);
            size_t digits = el - 1 > 9 ? 9 : el - 1;
            if (k == 101) {
                while (digits > 0 && fd[digits - 1] == '0') {
                    digits--;
                }
                if (digits == 0) {
                    break; /* .999 with no fraction prints nothing */
                }
            }
            PUTF("%c%.*s", l[i], (int)digits, fd);
            break;
        }
        default:
            break;
        }
        i += el;
    }
#undef PUTF
    return o;
}

/* Go's time.Time String(): "2006-01-02 15:04:05.999999999 -0700 MST". */
size_t tmpl_fmt_time(const struct tv *t, char *out, size_t cap)
{
    static const char L[] = "2006-01-02 15:04:05.999999999 -0700 MST";
    return tmpl_go_format(L, sizeof(L) - 1, t, out, cap);
}

static int digits_at(const char *s, size_t n, size_t *i, size_t min, size_t max, int *v)
{
    size_t k = 0;
    *v = 0;
    while (*i < n && k < max && s[*i] >= '0' && s[*i] <= '9') {
        *v = *v * 10 + (s[*i] - '0');
        (*i)++;
        k++;
    }
    return k >= min ? 0 : -1;
}

/* Go's time.Parse(layout, value) for the elements above, in UTC (a
 * numeric zone offset in the value is applied). 0 or -EINVAL. */
int tmpl_go_parse(const char *l, size_t ln, const char *s, size_t sn, int64_t *ns)
{
    int year = 1, mon = 1, day = 1, hour = 0, min = 0, sec = 0, off = 0, yday = 0;
    int64_t frac = 0;
    bool pm = false, have_pm = false;
    size_t j = 0;
    for (size_t i = 0; i < ln;) {
        int k;
        size_t el = layout_elem(l, ln, i, &k);
        if (el == 0) {
            if (j >= sn || s[j] != l[i]) {
                return -EINVAL;
            }
            i++;
            j++;
            continue;
        }
        int v = 0;
        switch (k) {
        case 0:
        case 1: {
            int m;
            for (m = 0; m < 12; m++) {
                size_t ml = k == 0 ? strlen(MONTHS[m]) : 3;
                if (j + ml <= sn && strncasecmp(s + j, MONTHS[m], ml) == 0) {
                    j += ml;
                    break;
                }
            }
            if (m == 12) {
                return -EINVAL;
            }
            mon = m + 1;
            break;
        }
        case 2:
        case 3: {
            int d;
            for (d = 0; d < 7; d++) {
                size_t dl = k == 2 ? strlen(DAYS[d]) : 3;
                if (j + dl <= sn && strncasecmp(s + j, DAYS[d], dl) == 0) {
                    j += dl;
                    break;
                }
            }
            if (d == 7) {
                return -EINVAL;
            }
            break;
        }
        case 4:
            while (j < sn && ((s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= 'a' && s[j] <= 'z'))) {
                j++;
            }
            break;
        case 5:
            if (digits_at(s, sn, &j, 4, 4, &year) != 0) {
                return -EINVAL;
            }
            break;
        case 6:
        case 7:
        case 8:
        case 9:
        case 10:
        case 11:
        case 12:
        case 13: {
            if (j < sn && s[j] == 'Z' && (k == 6 || k == 8 || k == 10 || k == 12)) {
                j++;
                break;
            }
            if (j >= sn || (s[j] != '+' && s[j] != '-')) {
                return -EINVAL;
            }
            int sign = s[j++] == '-' ? -1 : 1, hh = 0, mm = 0, ss = 0;
            if (digits_at(s, sn, &j, 2, 2, &hh) != 0) {
                return -EINVAL;
            }
            if (k != 12 && k != 13) {
                if (j < sn && s[j] == ':') {
                    j++;
                }
                if (digits_at(s, sn, &j, 2, 2, &mm) != 0) {
                    return -EINVAL;
                }
                if ((k == 6 || k == 7) && j < sn && s[j] == ':') {
                    j++;
                    if (digits_at(s, sn, &j, 2, 2, &ss) != 0) {
                        return -EINVAL;
                    }
                }
            }
            off = sign * (hh * 3600 + mm * 60 + ss);
            break;
        }
        case 14:
        case 15:
            while (k == 15 && j < sn && s[j] == ' ') {
                j++;
            }
            if (digits_at(s, sn, &j, 1, 3, &yday) != 0) {
                return -EINVAL;
            }
            break;
        case 16:
            if (j < sn && s[j] == ' ') {
                j++;
            }
            if (digits_at(s, sn, &j, 1, 2, &day) != 0) {
                return -EINVAL;
            }
            break;
        case 17:
        case 26:
            if (digits_at(s, sn, &j, k == 17 ? 2 : 1, 2, &mon) != 0) {
                return -EINVAL;
            }
            break;
        case 18:
        case 27:
            if (digits_at(s, sn, &j, k == 18 ? 2 : 1, 2, &day) != 0) {
                return -EINVAL;
            }
            break;
        case 19:
        case 28:
        case 23:
            if (digits_at(s, sn, &j, k == 28 ? 1 : 2, 2, &hour) != 0) {
                return -EINVAL;
            }
            break;
        case 20:
        case 29:
            if (digits_at(s, sn, &j, k == 20 ? 2 : 1, 2, &min) != 0) {
                return -EINVAL;
            }
            break;
        case 21:
        case 30:
            if (digits_at(s, sn, &j, k == 21 ? 2 : 1, 2, &sec) != 0) {
                return -EINVAL;
            }
            break;
        case 22:
            if (digits_at(s, sn, &j, 2, 2, &v) != 0) {
                return -EINVAL;
            }
            year = v >= 69 ? 1900 + v : 2000 + v;
            break;
        case 24:
        case 25:
            if (j + 2 > sn) {
                return -EINVAL;
            }
            have_pm = true;
            pm = s[j] == 'P' || s[j] == 'p';
            j += 2;
            break;
        case 100:
        case 101: {
            if (j >= sn || (s[j] != '.' && s[j] != ',')) {
                if (k == 101) {
                    break;
                }
                return -EINVAL;
            }
            j++;
            int64_t scale = 100000000;
            size_t nd = 0;
            while (j < sn && s[j] >= '0' && s[j] <= '9') {
                if (nd++ < 9) {
                    frac += (s[j] - '0') * scale;
                    scale /= 10;
                }
                j++;
            }
            break;
        }
        default:
            break;
        }
        i += el;
    }
    /* Go's Parse also takes a fraction after seconds the layout lacks */
    if (j < sn && s[j] == '.' && j > 0 && s[j - 1] >= '0' && s[j - 1] <= '9') {
        j++;
        int64_t scale = 100000000;
        while (j < sn && s[j] >= '0' && s[j] <= '9') {
            frac += (s[j] - '0') * scale;
            scale /= 10;
            j++;
        }
    }
    if (j != sn) {
        return -EINVAL;
    }
    if (have_pm) {
        hour = hour % 12 + (pm ? 12 : 0);
    }
    if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 59) {
        return -EINVAL;
    }
    struct tm tm = {.tm_year = year - 1900,
                    .tm_mon = mon - 1,
                    .tm_mday = day,
                    .tm_hour = hour,
                    .tm_min = min,
                    .tm_sec = sec};
    time_t t = timegm(&tm);
    if (yday > 0) {
        struct tm jan = {.tm_year = year - 1900, .tm_mday = 1};
        t = timegm(&jan) + (time_t)(yday - 1) * 86400 + hour * 3600 + min * 60 + sec;
    }
    *ns = ((int64_t)t - off) * 1000000000 + frac;
    return 0;
}
