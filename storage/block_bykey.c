/*
 * block_bykey.c - format 6's attribute lists by key (cold blocks; block_int.h "v6 ATTRS"):
 * the writer lays the D data out as one code stream and a stream of values per key
 * (akeys_by_key), and with META flag bit 4 stores each key's stream in the tag that
 * round-trips it exactly ("v6 TYPED VALUES", akeys_typed); a table load walks the code
 * stream and takes each value from its key's stream back into format 5's layout
 * (akeys_from_keys). The key-coded lists themselves are block_keys.c's.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hex.h"

/* The code at *p (1 to 3 bytes, as akeys_encode writes it: below 2^21),
 * advanced; false when it runs past |end| or a third byte continues. */
static bool code_take(const uint8_t **p, const uint8_t *end, uint64_t *code)
{
    const uint8_t *q = *p;
    uint64_t c = 0;
    for (unsigned k = 0; k < 3; k++) {
        if (q == end) {
            return false;
        }
        uint8_t b = *q++;
        c |= (uint64_t)(b & 0x7f) << (7 * k);
        if ((b & 0x80) == 0) {
            *p = q;
            *code = c;
            return true;
        }
    }
    return false;
}

/* Where the literal key-value at p (uv key length, key, value) ends, or
 * NULL past |end|. */
static const uint8_t *literal_end(const uint8_t *p, const uint8_t *end)
{
    struct val_rd r = {p, end};
    const char *k;
    size_t kn;
    if (val_rd_str(&r, &k, &kn) < 0) {
        return NULL;
    }
    return value_end(r.p, end);
}

/*
 * Both directions walk the same code stream. The writer's first pass
 * finds each value's key and length (sizes per key), its second copies;
 * keys are at most KC_MAX, so the per-key arrays are one allocation per
 * table, not per row.
 */
int akeys_by_key(const uint8_t *data, size_t len, uint64_t nkeys, uint64_t nvals, struct vbuf *out,
                 struct vbuf *dir)
{
    vbuf_reset(out);
    vbuf_reset(dir);
    if (nkeys == 0 || len == 0) {
        return vbuf_put(out, data, len);
    }
    uint64_t *at = calloc(nkeys + 1, sizeof(*at)); /* at[0] codes, at[k + 1] key k */
    if (at == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    const uint8_t *end = data + len;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (pass == 1) {
            uint64_t off = 0;
            for (uint64_t k = 0; k <= nkeys; k++) { /* lengths into starts */
                uint64_t n = at[k];
                at[k] = off;
                off += n;
                if (k > 0 && vbuf_put_u64(dir, n) < 0) {
                    rc = -ENOMEM;
                }
            }
            if (rc == 0 && vbuf_reserve(out, len) < 0) {
                rc = -ENOMEM;
            }
            if (rc < 0) {
                break;
            }
            out->len = len;
        }
        for (const uint8_t *p = data; p < end;) {
            const uint8_t *cs = p, *ve;
            uint64_t code, k = 0;
            if (!code_take(&p, end, &code)) {
                rc = -EINVAL;
                break;
            }
            if (code == 0) {
                ve = literal_end(p, end);
                p = cs; /* the literal stays behind its code */
            } else if (code <= nkeys) {
                ve = value_end(p, end);
                k = code;
            } else if (code - nkeys <= nvals) {
                ve = p;
            } else {
                ve = NULL;
            }
            if (ve == NULL) {
                rc = -EINVAL;
                break;
            }
            if (pass == 0) {
                at[0] += (uint64_t)(p - cs);
                at[k] += (uint64_t)(ve - p);
            } else {
                memcpy(out->p + at[0], cs, (size_t)(p - cs));
                at[0] += (uint64_t)(p - cs);
                memcpy(out->p + at[k], p, (size_t)(ve - p));
                at[k] += (uint64_t)(ve - p);
            }
            p = ve;
        }
    }
    free(at);
    return rc;
}

/* ---- format 6, META flag bit 4: typed value streams ("v6 TYPED VALUES") ---- */

/* A key stream's tag and its head's parameters, parsed once a load. */
struct tvs {
    uint8_t tag;
    uint8_t arg;        /* TV_ONE: the values' val.h type; TV_DBL: the exponent */
    uint8_t w, z;       /* TV_DBL: bytes a mantissa (its planes), 1 when zz */
    uint64_t n;         /* TV_HEXL / TV_HEXU: bytes a value; TV_DEC: the prefix's;
                         * TV_DBL: values */
    uint64_t i;         /* TV_DBL: values taken */
    const uint8_t *pre; /* TV_DEC: the prefix, in the stream's head; TV_DBL: plane 0 */
};

#define TV_BAD SIZE_MAX
static const double tv_p10[TV_E_MAX + 1] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

/* The head of a stream of tag |tag| at *p (advanced past it): false when
 * the tag is unknown or its head malformed or past |end|. */
static bool tv_head(struct tvs *s, uint8_t tag, const uint8_t **p, const uint8_t *end)
{
    bool bad = false;
    *s = (struct tvs){.tag = tag};
    switch (tag) {
    case TV_RAW:
        return true;
    case TV_ONE:
        if (*p == end) {
            return false;
        }
        s->arg = *(*p)++;
        return s->arg > VAL_EMPTY && s->arg <= VAL_BYTES;
    case TV_DBL: /* u8 e, u8 w, u8 z, then w planes of n bytes */
        if (end - *p < 3) {
            return false;
        }
        s->arg = (*p)[0];
        s->w = (*p)[1];
        s->z = (*p)[2];
        *p += 3;
        s->pre = *p;
        s->n = s->w > 0 ? (uint64_t)(end - *p) / s->w : 0;
        return s->arg <= TV_E_MAX && s->w >= 1 && s->w <= 8 && s->z <= 1 &&
               s->n * s->w == (uint64_t)(end - *p);
    case TV_HEXL:
    case TV_HEXU:
        s->n = uv_take(p, end, &bad);
        return !bad && s->n > 0 && s->n <= TV_HEX_MAX;
    case TV_DEC:
        s->n = uv_take(p, end, &bad);
        if (bad || s->n > TV_PRE_MAX || s->n > (uint64_t)(end - *p)) {
            return false;
        }
        s->pre = *p;
        *p += s->n;
        return true;
    default:
        return false;
    }
}

/* |v| in decimal, its digits ending at d + 20; returns how many. */
static size_t i64_dec(char d[20], int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    char *c = d + 20;
    do {
        *--c = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *--c = '-';
    }
    return (size_t)(d + 20 - c);
}

/*
 * One value of stream |s| (not TV_RAW) from *p (advanced, before |end|)
 * into q as val.h encodes it, at most |room| bytes (q has COPY_SLACK
 * more); returns its length, or TV_BAD (past |end| or |room|).
 */
static size_t tv_take(struct tvs *s, const uint8_t **p, const uint8_t *end, uint8_t *q, size_t room)
{
    const uint8_t *v = *p;
    bool bad = false;
    size_t n;
    switch (s->tag) {
    case TV_ONE: {
        const uint8_t *ve = value_end_t(s->arg, v, end);
        if (ve == NULL || (size_t)(ve - v) >= room) {
            return TV_BAD;
        }
        n = (size_t)(ve - v);
        q[0] = s->arg;
        copy16(q + 1, v, n);
        *p = ve;
        return n + 1;
    }
    case TV_HEXL:
    case TV_HEXU: {
        const char *dg = s->tag == TV_HEXL ? hex_lower : hex_upper;
        n = 2 + 2 * s->n; /* 2 n < 128: a one-byte length */
        if (s->n > (uint64_t)(end - v) || n > room) {
            return TV_BAD;
        }
        q[0] = VAL_STR;
        q[1] = (uint8_t)(2 * s->n);
        for (uint64_t i = 0; i < s->n; i++) {
            q[2 + 2 * i] = (uint8_t)dg[v[i] >> 4];
            q[3 + 2 * i] = (uint8_t)dg[v[i] & 15];
        }
        *p = v + s->n;
        return n;
    }
    case TV_DEC: {
        int64_t x = unzz(uv_take(p, end, &bad));
        char d[20];
        size_t nd = i64_dec(d, x), sn = (size_t)s->n + nd; /* < 128: a one-byte length */
        n = 2 + sn;
        if (bad || n > room) {
            return TV_BAD;
        }
        q[0] = VAL_STR;
        q[1] = (uint8_t)sn;
        memcpy(q + 2, s->pre, (size_t)s->n);
        memcpy(q + 2 + s->n, d + 20 - nd, nd);
        return n;
    }
    case TV_DBL: { /* value i: byte i of each plane, the low first */
        if (s->i >= s->n || room < 9) {
            return TV_BAD;
        }
        uint64_t u = 0;
        for (unsigned j = 0; j < s->w; j++) {
            u |= (uint64_t)s->pre[j * s->n + s->i] << (8 * j);
        }
        double x = (double)(s->z ? unzz(u) : (int64_t)u) / tv_p10[s->arg];
        q[0] = VAL_DOUBLE;
        memcpy(q + 1, &x, 8);
        if (++s->i == s->n) {
            *p = end; /* the planes used up */
        }
        return 9;
    }
    default:
        return TV_BAD;
    }
}

int akeys_from_keys(const uint8_t *data, size_t len, const uint8_t *dir, size_t dirlen,
                    uint64_t nkeys, uint64_t nvals, bool typed, uint64_t want, uint8_t **out)
{
    size_t es = typed ? 9 : 8; /* a T entry's bytes */
    if (dirlen != es * nkeys || nkeys == 0 || (!typed && want != len) ||
        want / AKEYS_GROWTH > len) {
        return -EBADMSG;
    }
    /* cur[k] / lim[k]: key k's stream (k = 0 the codes, k + 1 key k) */
    const uint8_t **cur = malloc(2 * (nkeys + 1) * sizeof(*cur));
    struct tvs *ts = typed ? malloc(nkeys * sizeof(*ts)) : NULL;
    uint8_t *o = malloc(want + COPY_SLACK);
    if (cur == NULL || o == NULL || (typed && ts == NULL)) {
        free(cur);
        free(ts);
        free(o);
        return -ENOMEM;
    }
    const uint8_t **lim = cur + nkeys + 1;
    uint64_t sum = 0;
    int rc = 0;
    for (uint64_t k = 0; k < nkeys && rc == 0; k++) {
        uint64_t n = rd64(dir + es * k);
        if (n > len - sum) {
            rc = -EBADMSG;
        }
        sum += n;
    }
    if (rc == 0) {
        cur[0] = data;
        lim[0] = data + (len - sum);
    }
    for (uint64_t k = 0; k < nkeys && rc == 0; k++) {
        cur[k + 1] = lim[k];
        lim[k + 1] = lim[k] + rd64(dir + es * k);
        if (typed && !tv_head(&ts[k], dir[es * k + 8], &cur[k + 1], lim[k + 1])) {
            rc = -EBADMSG;
        }
    }
    uint8_t *q = o, *qend = o + want;
    while (rc == 0 && cur[0] < lim[0]) {
        const uint8_t *cs = cur[0], *ve;
        uint64_t code;
        if (!code_take(&cur[0], lim[0], &code) || (size_t)(cur[0] - cs) > (size_t)(qend - q)) {
            rc = -EBADMSG;
            break;
        }
        copy16(q, cs, (size_t)(cur[0] - cs)); /* see COPY_SLACK: the data column's slack */
        q += cur[0] - cs;
        uint64_t k = 0;
        if (code == 0) {
            ve = literal_end(cur[0], lim[0]);
        } else if (code <= nkeys) {
            k = code;
            if (typed && ts[k - 1].tag != TV_RAW) {
                size_t n = tv_take(&ts[k - 1], &cur[k], lim[k], q, (size_t)(qend - q));
                if (n == TV_BAD) {
                    rc = -EBADMSG;
                    break;
                }
                q += n;
                continue;
            }
            ve = value_end(cur[k], lim[k]);
        } else if (code - nkeys <= nvals) {
            continue;
        } else {
            ve = NULL;
        }
        if (ve == NULL || (size_t)(ve - cur[k]) > (size_t)(qend - q)) {
            rc = -EBADMSG;
            break;
        }
        copy16(q, cur[k], (size_t)(ve - cur[k]));
        q += ve - cur[k];
        cur[k] = ve;
    }
    for (uint64_t k = 1; k <= nkeys && rc == 0; k++) {
        if (cur[k] != lim[k]) {
            rc = -EBADMSG;
        }
    }
    if (rc == 0 && q != qend) {
        rc = -EBADMSG; /* the lists rebuilt to other than their offsets' length */
    }
    free(cur);
    free(ts);
    if (rc < 0) {
        free(o);
        return rc;
    }
    memset(q, 0, COPY_SLACK);
    *out = o;
    return 0;
}

/* What the writer found of one key's values: its tag's parameters. */
struct tv_scan {
    uint8_t type;       /* every value's, or 0xff: types differ */
    bool hex, upper;    /* strings: all of one even length of hex digits; an A-F among them */
    bool dec;           /* strings: all the prefix, then '-'? and 1 to 19 digits */
    uint64_t slen;      /* strings: the one length, or UINT64_MAX */
    const uint8_t *pre; /* strings: the first's bytes before its trailing digits */
    size_t pn;
    unsigned e;  /* doubles: the exponent each takes, at most (TV_E_MAX + 1: none) */
    double vmax; /* doubles: the largest magnitude */
};

/* The least decimal exponent e at which v == m / 10^e for an integer |m|
 * < 2^53, or TV_E_MAX + 1 (a screen only: the round trip decides). */
static unsigned dbl_exp(double v)
{
    for (unsigned e = 0; e <= TV_E_MAX; e++) {
        double m = v * tv_p10[e];
        if (fabs(m) < 9007199254740992.0 && (double)llround(m) / tv_p10[e] == v) {
            return e;
        }
    }
    return TV_E_MAX + 1;
}

/* Whether s[0, n) is '-'? and 1 to 19 digits (the round trip refuses
 * leading zeros, "-0" and overflow). */
static bool dec_rest(const uint8_t *s, size_t n)
{
    size_t i = n > 0 && s[0] == '-';
    if (n - i < 1 || n - i > 19) {
        return false;
    }
    for (; i < n; i++) {
        if ((uint8_t)(s[i] - '0') >= 10) {
            return false;
        }
    }
    return true;
}

static int tv_scan(const uint8_t *s, const uint8_t *end, struct tv_scan *sc)
{
    *sc = (struct tv_scan){.type = *s, .hex = true, .dec = true, .e = 0};
    for (const uint8_t *p = s; p < end;) {
        const uint8_t *ve = value_end(p, end);
        if (ve == NULL) {
            return -EINVAL;
        }
        if (*p != sc->type) {
            sc->type = 0xff;
        } else if (*p == VAL_STR) {
            struct val_rd r = {p + 1, ve};
            const char *str;
            size_t n;
            if (val_rd_str(&r, &str, &n) < 0) {
                return -EINVAL;
            }
            const uint8_t *u = (const uint8_t *)str;
            if (p == s) {
                sc->slen = n;
                for (sc->pn = n; sc->pn > 0 && (uint8_t)(u[sc->pn - 1] - '0') < 10; sc->pn--) {
                }
                sc->pre = u;
            }
            sc->hex &= n == sc->slen && n % 2 == 0 && n > 0 && n <= 2 * TV_HEX_MAX;
            for (size_t i = 0; i < n && sc->hex; i++) {
                sc->hex = hex_digit(u[i]) >= 0;
                sc->upper |= u[i] >= 'A' && u[i] <= 'F';
            }
            sc->dec &= sc->pn <= TV_PRE_MAX && n >= sc->pn && memcmp(u, sc->pre, sc->pn) == 0 &&
                       dec_rest(u + sc->pn, n - sc->pn);
        } else if (*p == VAL_DOUBLE && sc->e <= TV_E_MAX) {
            double v;
            memcpy(&v, p + 1, 8);
            unsigned e = dbl_exp(v);
            sc->e = e > sc->e ? e : sc->e;
            sc->vmax = fabs(v) > sc->vmax ? fabs(v) : sc->vmax;
        }
        p = ve;
    }
    return 0;
}

/* The tag for values s[0, end - s) by the scan: the measured choice
 * (bench/STORAGE.md, h-vals): doubles only as TV_DBL (TV_ONE's are
 * larger under zstd), strings as hex, decimals or TV_ONE. */
static uint8_t tv_choose(const struct tv_scan *sc)
{
    switch (sc->type) {
    case VAL_STR:
        return sc->hex ? (sc->upper ? TV_HEXU : TV_HEXL) : sc->dec ? TV_DEC : TV_ONE;
    case VAL_DOUBLE:
        /* every m = v 10^e an integer below 2^53 (llround's range) */
        return sc->e <= TV_E_MAX && sc->vmax * tv_p10[sc->e] < 9007199254740992.0 ? TV_DBL : TV_RAW;
    case VAL_BOOL:
    case VAL_INT:
    case VAL_ARRAY:
    case VAL_KVLIST:
    case VAL_BYTES:
        return TV_ONE;
    default: /* VAL_EMPTY (no bytes to count values by), mixed types */
        return TV_RAW;
    }
}

/* The mantissa of double value v (type byte first) at exponent e. */
static int64_t dbl_m(const uint8_t *v, unsigned e)
{
    double x;
    memcpy(&x, v + 1, 8);
    return (int64_t)llround(x * tv_p10[e]);
}

/* Doubles s[0, end - s) as TV_DBL at exponent e at o: the head, then the
 * planes (3 + 7 x n bytes at most: m below 2^53); returns the end. */
static uint8_t *dbl_planes(unsigned e, const uint8_t *s, const uint8_t *end, uint8_t *o)
{
    uint64_t n = (uint64_t)(end - s) / 9, umax = 0;
    bool neg = false;
    for (const uint8_t *p = s; p < end; p += 9) {
        neg |= dbl_m(p, e) < 0;
    }
    for (const uint8_t *p = s; p < end; p += 9) {
        int64_t m = dbl_m(p, e);
        uint64_t u = neg ? zz(m) : (uint64_t)m;
        umax = u > umax ? u : umax;
    }
    unsigned w = 1;
    while (w < 8 && (umax >> (8 * w)) != 0) {
        w++;
    }
    *o++ = (uint8_t)e;
    *o++ = (uint8_t)w;
    *o++ = neg;
    for (unsigned j = 0; j < w; j++) {
        uint8_t *q = o + (uint64_t)j * n;
        for (const uint8_t *p = s; p < end; p += 9) {
            int64_t m = dbl_m(p, e);
            *q++ = (uint8_t)((neg ? zz(m) : (uint64_t)m) >> (8 * j));
        }
    }
    return o + (uint64_t)w * n;
}

/* Values s[0, end - s) (scanned into |sc|) as tag |tag| at o (room for
 * end - s + 16 + TV_PRE_MAX bytes); returns the end of what it wrote. */
static uint8_t *tv_put(uint8_t tag, const struct tv_scan *sc, const uint8_t *s, const uint8_t *end,
                       uint8_t *o)
{
    if (tag == TV_DBL) {
        return dbl_planes(sc->e, s, end, o);
    }
    if (tag == TV_ONE) {
        *o++ = sc->type;
    } else if (tag == TV_DEC) {
        o = uv_put(o, sc->pn);
        memcpy(o, sc->pre, sc->pn);
        o += sc->pn;
    } else {
        o = uv_put(o, sc->slen / 2);
    }
    for (const uint8_t *p = s; p < end;) {
        const uint8_t *ve = value_end(p, end), *v = p + 1;
        if (tag == TV_ONE) {
            memcpy(o, v, (size_t)(ve - v));
            o += ve - v;
        } else { /* strings of a one-byte length (below 128) */
            const uint8_t *u = v + 1;
            size_t n = (size_t)(ve - u);
            if (tag == TV_DEC) {
                bool neg = u[sc->pn] == '-';
                uint64_t x = 0;
                for (size_t i = sc->pn + neg; i < n; i++) {
                    x = x * 10 + (uint64_t)(u[i] - '0');
                }
                o = uv_put(o, zz((int64_t)(neg ? 0 - x : x)));
            } else {
                for (size_t i = 0; i < n; i += 2) {
                    *o++ = (uint8_t)(hex_digit(u[i]) << 4 | hex_digit(u[i + 1]));
                }
            }
        }
        p = ve;
    }
    return o;
}

/* Whether the stream t[0, tn) of tag |tag| rebuilds s[0, sn) exactly
 * (into |chk|). */
static int tv_round_trip(uint8_t tag, const uint8_t *t, size_t tn, const uint8_t *s, size_t sn,
                         struct vbuf *chk, bool *same)
{
    struct tvs ts;
    const uint8_t *p = t, *end = t + tn;
    vbuf_reset(chk);
    if (vbuf_reserve(chk, sn + COPY_SLACK) < 0) {
        return -ENOMEM;
    }
    *same = false;
    if (!tv_head(&ts, tag, &p, end)) {
        return 0;
    }
    uint8_t *q = chk->p;
    while (p < end) {
        size_t n = tv_take(&ts, &p, end, q, sn - (size_t)(q - chk->p));
        if (n == TV_BAD) {
            return 0;
        }
        q += n;
    }
    *same = (size_t)(q - chk->p) == sn && memcmp(chk->p, s, sn) == 0;
    return 0;
}

int akeys_typed(const uint8_t *data, size_t len, const uint8_t *dir, uint64_t nkeys,
                struct vbuf *out, struct vbuf *tdir, struct vbuf *scratch)
{
    vbuf_reset(out);
    vbuf_reset(tdir);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < nkeys; k++) {
        sum += rd64(dir + 8 * k);
    }
    if (sum > len || vbuf_put(out, data, len - sum) < 0) {
        return sum > len ? -EINVAL : -ENOMEM;
    }
    const uint8_t *s = data + (len - sum);
    for (uint64_t k = 0; k < nkeys; k++) {
        size_t sn = (size_t)rd64(dir + 8 * k), start = out->len;
        uint8_t tag = TV_RAW;
        struct tv_scan sc;
        if (sn > 0) {
            int rc = tv_scan(s, s + sn, &sc);
            if (rc < 0) {
                return rc;
            }
            tag = tv_choose(&sc);
        }
        if (tag != TV_RAW) {
            bool same;
            if (vbuf_reserve(out, sn + 16 + TV_PRE_MAX) < 0) {
                return -ENOMEM;
            }
            uint8_t *e = tv_put(tag, &sc, s, s + sn, out->p + start);
            int rc = tv_round_trip(tag, out->p + start, (size_t)(e - out->p - start), s, sn,
                                   scratch, &same);
            if (rc < 0) {
                return rc;
            }
            if (same) {
                out->len = (size_t)(e - out->p);
            } else {
                tag = TV_RAW; /* a value the tag does not rebuild exactly */
            }
        }
        if (tag == TV_RAW && vbuf_put(out, s, sn) < 0) {
            return -ENOMEM;
        }
        if (vbuf_put_u64(tdir, out->len - start) < 0 || vbuf_put_u8(tdir, tag) < 0) {
            return -ENOMEM;
        }
        s += sn;
    }
    return 0;
}
