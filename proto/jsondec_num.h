/*
 * jsondec_num.h - the OTLP/JSON decoder's fast paths for numbers (used by
 * proto/jsondec.c): a 64-bit integer written as plain digits, quoted or
 * bare, and a double written as a JSON number of at most 19 significant
 * digits, each read straight from the text with no copy and no strtod.
 *
 * Each returns false, consuming nothing, when the text is anything else
 * (an exponent on an integer, leading zeros, 20 or more digits, a quoted
 * double, an exponent beyond the exact range...): the caller then takes the
 * general path, which accepts and refuses exactly as before. A true return
 * is always the value the general path would give (for doubles: the
 * correctly rounded one, as strtod gives). Pure functions; any thread.
 */
#ifndef MIRADB_JSONDEC_NUM_H
#define MIRADB_JSONDEC_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

static inline bool jdnum_is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

/* The nonzero bytes of the result mark the bytes of |w| (eight text bytes,
 * little-endian) that are not digits. A byte is a digit when its high
 * nibble is 3 and adding 6 keeps it 3 (a carry out of a byte >= 0xfa only
 * reaches bytes after one that already failed, so the first non-digit is
 * always found). */
static inline uint64_t jdnum_nondigits(uint64_t w)
{
    const uint64_t hi = 0xf0f0f0f0f0f0f0f0ull;
    return ((w & hi) | (((w + 0x0606060606060606ull) & hi) >> 4)) ^ 0x3333333333333333ull;
}

/* Whether |c| is one of . e E + -, which would make the number go on:
 * one bit a byte from '+' (bits 0, 2, 3, 26 and 58). */
__attribute__((always_inline)) static inline bool jdnum_num_byte(char c)
{
    unsigned u = (unsigned)(unsigned char)c - '+';
    return u < 64 && (0x040000000400000Dull >> u & 1) != 0;
}

/* The value of eight digit bytes |w| (the first in the lowest byte): pairs
 * of digits joined (10 * d[k] + d[k+1] lands in the even bytes), then the
 * four pairs combined with two multiplies whose upper halves hold 10^6,
 * 10^4, 10^2 and 1 times them. */
__attribute__((always_inline)) static inline uint64_t jdnum_eight_value(uint64_t w)
{
    const uint64_t m = 0x000000ff000000ffull;
    w -= 0x3030303030303030ull;
    w = w * 10 + (w >> 8);
    return ((w & m) * (100 + (1000000ull << 32)) + ((w >> 16) & m) * (1 + (10000ull << 32))) >> 32;
}

/* Eight decimal digits at |p| as a number: false if any byte is not a digit. */
static inline bool jdnum_eight_digits(const char *p, uint64_t *out)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    if (jdnum_nondigits(w) != 0) {
        return false;
    }
    *out = jdnum_eight_value(w);
    return true;
#else
    (void)p;
    (void)out;
    return false;
#endif
}

/*
 * The run of digits that starts |p| (which has 8 readable bytes), up to
 * eight of them: their count, with |*val| their value. The bytes after the
 * run are shifted out and the room filled with '0' digits in front, so one
 * conversion serves every length.
 */
__attribute__((always_inline)) static inline unsigned jdnum_run8(const char *p, uint64_t *val)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t t = jdnum_nondigits(w);
    if (t == 0) {
        *val = jdnum_eight_value(w);
        return 8;
    }
    unsigned k = (unsigned)__builtin_ctzll(t) >> 3;
    if (k == 0) {
        *val = 0;
        return 0;
    }
    *val = jdnum_eight_value((w << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k)));
    return k;
#else
    unsigned k = 0;
    uint64_t v = 0;
    for (; k < 8 && jdnum_is_digit(p[k]); k++) {
        v = v * 10 + (uint64_t)(p[k] - '0');
    }
    *val = v;
    return k;
#endif
}

/* 10^k for k <= 19. */
extern const uint64_t jdnum_pow10[20];

/*
 * An integer at p[0..n): "-"? digits, 1..19 of them, no leading zero, bare
 * (followed by anything but a digit, '.', 'e' or 'E') or in quotes with
 * nothing else inside. Sets |*neg|, |*mag| and |*used| (bytes read, quotes
 * included). Inline: it runs once per number of a bucket list. Digits are
 * read eight at a time where eight bytes remain, one at a time after.
 */
__attribute__((always_inline)) static inline bool jdnum_int(const char *p, size_t n, bool *neg,
                                                            uint64_t *mag, size_t *used)
{
    size_t i = 0;
    bool quoted = n != 0 && p[0] == '"';
    i += quoted;
    bool minus = i < n && p[i] == '-';
    i += minus;
    size_t d0 = i;
    uint64_t v = 0, v8;
    unsigned k = 8;
    while (k == 8 && i - d0 <= 19 && n - i >= 8) {
        k = jdnum_run8(p + i, &v8);
        v = v * jdnum_pow10[k] + v8;
        i += k;
    }
    if (k == 8) {
        while (i < n && i - d0 <= 19 && jdnum_is_digit(p[i])) {
            v = v * 10 + (uint64_t)(p[i++] - '0');
        }
    }
    size_t nd = i - d0;
    if (nd == 0 || nd > 19 || (p[d0] == '0' && nd > 1) || i >= n) {
        return false;
    }
    if (quoted) {
        if (p[i] != '"') {
            return false;
        }
        i++;
    } else if (jdnum_is_digit(p[i]) || p[i] == '.' || p[i] == 'e' || p[i] == 'E') {
        return false;
    }
    *neg = minus;
    *mag = v;
    *used = i;
    return true;
}

/*
 * The short case of jdnum_int for a non-negative integer in quotes: '"',
 * 1-7 digits (no leading zero), '"' read with one 8-byte load (bucket
 * counts and most integer attributes are written so); false, nothing
 * decided, for anything else.
 */
__attribute__((always_inline)) static inline bool jdnum_uint_q7(const char *p, size_t n,
                                                                uint64_t *mag, size_t *used)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n >= 10 && p[0] == '"') {
        uint64_t w;
        memcpy(&w, p + 1, 8);
        uint64_t t = jdnum_nondigits(w);
        unsigned k = (unsigned)__builtin_ctzll(t | (1ull << 63)) >> 3;
        if (k != 0 && p[1 + k] == '"' && (p[1] != '0' || k == 1)) {
            *mag = jdnum_eight_value((w << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k)));
            *used = k + 2;
            return true;
        }
    }
#else
    (void)p, (void)n, (void)mag, (void)used;
#endif
    return false;
}

/* jdnum_int for a non-negative integer in quotes, the short case
 * (jdnum_uint_q7) inline. */
__attribute__((always_inline)) static inline bool jdnum_uint_q(const char *p, size_t n,
                                                               uint64_t *mag, size_t *used)
{
    if (jdnum_uint_q7(p, n, mag, used)) {
        return true;
    }
    bool neg;
    return jdnum_int(p, n, &neg, mag, used) && !neg;
}

/*
 * A bare JSON number at p[0..n) with at most 19 significant digits whose
 * value is m * 10^e with -19 <= e <= 19 (after folding in the exponent):
 * its nearest double (ties to even) in |*out|, |*used| its length.
 */
bool jdnum_f64(const char *p, size_t n, double *out, size_t *used);

/*
 * A decimal that ends within the eight bytes at |p| (which must be
 * readable): 1-7 integer digits (no leading zero), optionally '.' and
 * fraction digits, then a byte that is not a digit (the terminator, any
 * byte but '.', 'e', 'E', '+' and '-'). Its digits as one integer |*m|
 * (the '.' taken out of the word and the digits converted once) and
 * |*kf| the fraction digits: the value is m / 10^kf, m < 10^7. Returns
 * the text's length, 0 (nothing decided) for anything else.
 */
__attribute__((always_inline)) static inline unsigned jdnum_dec8(const char *p, uint64_t *m,
                                                                 unsigned *kf)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t t = jdnum_nondigits(w);
    if (t == 0) {
        return 0; /* eight digits or more */
    }
    unsigned a = (unsigned)__builtin_ctzll(t) >> 3, e = a, f = 0; /* a: the integer digits */
    if (a == 0 || (p[0] == '0' && a != 1)) {
        return 0;
    }
    if (p[a] == '.') {
        if (a == 7) {
            return 0; /* no fraction digit within the eight bytes */
        }
        uint64_t rest = t & (~0ull << (8 * a + 8)); /* the non-digits after the '.' */
        if (rest == 0) {
            return 0; /* the fraction runs past the eight bytes */
        }
        e = (unsigned)__builtin_ctzll(rest) >> 3;
        f = e - a - 1; /* 0 for "5.": its terminator is then the '.', declined below */
        uint64_t lo = (1ull << (8 * a)) - 1; /* a <= 6 here */
        w = (w & lo) | ((w >> 8) & ~lo);     /* the '.' taken out: e - 1 digits */
        e--;
    }
    char c = p[e + (f != 0)];
    if (jdnum_num_byte(c)) {
        return 0;
    }
    *m = jdnum_eight_value((w << (64 - 8 * e)) | (0x3030303030303030ull >> (8 * e)));
    *kf = f;
    return e + (f != 0);
#else
    (void)p, (void)m, (void)kf;
    return 0;
#endif
}

/*
 * jdnum_f64_fast's smaller sibling for attribute values: "-"? 1-7 integer digits
 * (no leading zero), optionally '.' and 1-7 fraction digits, no exponent.
 * Then m < 10^14 < 2^53 and 10^kf are exact doubles, so m / 10^kf is the
 * correctly rounded value, the one jdnum_dec_to_f64 gives too (its first
 * case). Anything else, and a text under 18 bytes, goes to jdnum_f64.
 */
__attribute__((always_inline)) static inline bool jdnum_f64_7(const char *p, size_t n, double *out,
                                                              size_t *used)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const double p10[8] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7};
    if (n >= 18) {
        size_t i = p[0] == '-';
        uint64_t m, f;
        unsigned kd, len = jdnum_dec8(p + i, &m, &kd);
        if (len != 0) { /* the usual short text: one conversion */
            double v = (double)m / p10[kd];
            *out = p[0] == '-' ? -v : v;
            *used = i + len;
            return true;
        }
        unsigned k = jdnum_run8(p + i, &m), kf = 0;
        bool dot = false;
        if (k != 0 && k != 8 && (p[i] != '0' || k == 1)) {
            i += k;
            if (p[i] == '.') {
                dot = true;
                kf = jdnum_run8(p + i + 1, &f);
                m = m * jdnum_pow10[kf] + f;
                i += 1 + kf;
            }
            char c = p[i];
            if (kf != 8 && (!dot || kf != 0) && !jdnum_num_byte(c)) {
                double v = (double)m / p10[kf];
                *out = p[0] == '-' ? -v : v;
                *used = i;
                return true;
            }
        }
    }
#endif
    return jdnum_f64(p, n, out, used);
}

/* The double nearest to m * 10^e (ties to even); -19 <= e <= 19. */
double jdnum_dec_to_f64(uint64_t m, int e);

/* 10^-k = (t + f) * 2^-b, 0 < f < 1, for k = 1..19 (entry 0 unused). */
struct jdnum_rcp {
    uint64_t t;
    int b;
};
extern const struct jdnum_rcp jdnum_rcp10[20];

/*
 * m * 10^-k for m > 2^53 and 1 <= k <= 19 by one 64 x 64-bit multiply with
 * jdnum_rcp10[k]: true, |*out| the correctly rounded value, unless a
 * midpoint between two doubles lies too near to tell (false: then
 * jdnum_dec_to_f64's exact division). jdnum_dec_to_f64's own first step,
 * inline here for the callers that already know m > 2^53 and e < 0.
 */
__attribute__((always_inline)) static inline bool jdnum_mul_rcp(uint64_t m, int k, double *out)
{
    int clz = __builtin_clzll(m);
    uint64_t mm = m << clz;
    unsigned __int128 x = (unsigned __int128)mm * jdnum_rcp10[k].t;
    uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    int sh = 9 + (int)(hi >> 63); /* hi >> sh: 53 bits and the round bit */
    uint64_t low = hi & ((2ull << sh) - 1), half = 1ull << sh;
    /* exact < x + mm: the round can differ only when a midpoint lies in
     * [x, x + mm], i.e. the bits from the round bit down are within mm of
     * it (carry out of lo) or on it */
    if ((low == half - 1 && lo + mm < lo) || (low == half && lo == 0)) {
        return false;
    }
    uint64_t mant = ((hi >> sh) + 1) >> 1;                                     /* <= 2^53: exact */
    uint64_t bits = (uint64_t)(1023 + 65 + sh - jdnum_rcp10[k].b - clz) << 52; /* a power of 2 */
    double p;
    memcpy(&p, &bits, 8);
    *out = (double)mant * p;
    return true;
}

#ifdef __SSE2__
/* Sixteen digit values (bytes 0-9, the first in lane 0) as one integer:
 * pairs by a 16-bit multiply-add (10 * first + second), then 4-digit and
 * 8-digit groups by pmaddwd, the two 8-digit halves joined in scalar. */
__attribute__((always_inline)) static inline uint64_t jdnum_join16(__m128i d)
{
    __m128i p2 =
        _mm_add_epi16(_mm_mullo_epi16(_mm_and_si128(d, _mm_set1_epi16(0xff)), _mm_set1_epi16(10)),
                      _mm_srli_epi16(d, 8));
    __m128i p4 = _mm_madd_epi16(p2, _mm_set1_epi32(100 | (1 << 16)));
    __m128i p8 = _mm_madd_epi16(_mm_packs_epi32(p4, p4), _mm_set1_epi32(10000 | (1 << 16)));
    uint64_t hl = (uint64_t)_mm_cvtsi128_si64(p8); /* lanes 0-7 low, 8-15 high */
    return (hl & 0xffffffffu) * 100000000u + (hl >> 32);
}
#endif

/* 16 bytes of 0xff then 16 of zero: the 16 bytes at jdnum_lanes + 16 - k
 * have their lanes below k set (0 <= k <= 16). */
extern const uint8_t jdnum_lanes[32];

/*
 * The decimal at |q| (which has 24 readable bytes) in the shape exporters
 * write doubles in: 1-7 integer digits (no leading zero), '.', fraction
 * digits, no exponent, at most 19 digits in all. SSE2, the digits of its
 * first 16 bytes at once: their digit mask gives the '.' and the end; the
 * integer digits move one lane up over the '.' (a '0' lane in front), the
 * lanes from the end on are cleared, and the 16 lanes are joined as one
 * 16-digit integer (as u64_19 joins a timestamp's), the fraction padded with
 * zeros to lane 15, which the exponent takes back; past lane 15, up to four
 * more digits by one 8-byte load. Then value = |*m| * 10^|*e| exactly, with
 * |*m| < 10^19, -19 <= |*e| <= -8 (|*m| < 10^15 when the text ends within
 * the 16 bytes). Returns the length read, 0 (nothing decided) for anything
 * else; the byte after must then be no '.', 'e', 'E', '+' or '-' (checked
 * here too).
 */
__attribute__((always_inline)) static inline unsigned jdnum_point16(const char *q, uint64_t *m,
                                                                    int *e)
{
#if defined(__SSE2__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __m128i d = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)q), _mm_set1_epi8('0'));
    /* a digit is a byte d <= 9 (unsigned); |non| has bits 16-31 set too */
    unsigned non =
        ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d));
    unsigned a = (unsigned)__builtin_ctz(non); /* the integer digits */
    if (a - 1 > 6 || q[a] != '.' || (q[0] == '0' && a != 1)) {
        return 0;
    }
    unsigned t = (unsigned)__builtin_ctz(non & (~0u << (a + 1))); /* the end, <= 16 */
    if (t == a + 1) {
        return 0; /* no fraction digit */
    }
    __m128i int_lanes = _mm_loadu_si128((const __m128i *)(const void *)(jdnum_lanes + 15 - a));
    __m128i live = _mm_loadu_si128((const __m128i *)(const void *)(jdnum_lanes + 16 - t));
    d = _mm_and_si128(_mm_or_si128(_mm_and_si128(int_lanes, _mm_slli_si128(d, 1)),
                                   _mm_andnot_si128(int_lanes, d)),
                      live);
    uint64_t v = jdnum_join16(d);
    int x = -(15 - (int)a);
    if (t == 16) {
        /* the usual 17-19-digit double: one or two more digits, by two
         * byte tests (what jdnum_run8 would find); else the run of them */
        unsigned d0 = (unsigned)(unsigned char)q[16] - '0',
                 d1 = (unsigned)(unsigned char)q[17] - '0';
        if (d0 < 10 && d1 >= 10) {
            v = v * 10 + d0;
            x -= 1;
            t = 17;
        } else if (d0 < 10 && (unsigned)(unsigned char)q[18] - '0' >= 10) {
            v = v * 100 + d0 * 10 + d1; /* d1 < 10 here */
            x -= 2;
            t = 18;
        } else {
            uint64_t r8;
            unsigned r = jdnum_run8(q + 16, &r8);
            if (r > 4) {
                return 0;
            }
            v = v * jdnum_pow10[r] + r8;
            x -= (int)r;
            t += r;
        }
    }
    char c = q[t];
    if (jdnum_num_byte(c)) {
        return 0;
    }
    *m = v;
    *e = x;
    return t;
#else
    (void)q, (void)m, (void)e;
    return 0;
#endif
}

/*
 * jdnum_f64 with its most common shape inline: "-"? 1-7 integer digits
 * (no leading zero), optionally '.' and fraction digits, at most 19 digits
 * in all, no exponent: the shape jdnum_f64 itself reads first (its
 * f64_short), read the same way, by 8-byte runs. Then m < 10^19 is exact:
 * m / 10^kf when m <= 2^53 (both exact doubles: the correctly rounded
 * quotient, jdnum_dec_to_f64's first case), else jdnum_dec_to_f64 (a
 * 64 x 64-bit multiply, exact 128-bit arithmetic near a midpoint). Anything
 * else goes to jdnum_f64.
 */
__attribute__((always_inline)) static inline bool jdnum_f64_fast(const char *p, size_t n,
                                                                 double *out, size_t *used)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static const double p10[20] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                   1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19};
    bool minus = n != 0 && p[0] == '-';
    size_t i = minus;
    uint64_t m, f;
    if (n - i >= 24) { /* the exporters' shape: one SSE2 pass */
        int x;
        unsigned len = jdnum_point16(p + i, &m, &x);
        if (len != 0) {
            double v;
            if (m <= 1ull << 53) {
                v = (double)m / p10[-x];
            } else if (!jdnum_mul_rcp(m, -x, &v)) {
                v = jdnum_dec_to_f64(m, x);
            }
            *out = minus ? -v : v;
            *used = i + len;
            return true;
        }
    }
    if (n - i >= 8) {
        unsigned k = jdnum_run8(p + i, &m), kf = 0, r = 0;
        bool int0 = p[i] == '0', ok = k != 0 && k != 8 && (!int0 || k == 1);
        if (ok) {
            i += k;
            if (p[i] == '.') {
                i++;
                do {
                    if (n - i < 8) {
                        ok = false;
                        break;
                    }
                    r = jdnum_run8(p + i, &f);
                    m = m * jdnum_pow10[r] + f;
                    i += r;
                    kf += r;
                } while (r == 8 && kf <= 19);
                ok = ok && r != 8 && kf != 0 && (int0 ? 0 : k) + kf <= 19;
            }
        }
        if (ok) {
            char c = p[i];
            if (c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
                double v = m <= 1ull << 53 ? (double)m / p10[kf] : jdnum_dec_to_f64(m, -(int)kf);
                *out = minus ? -v : v;
                *used = i;
                return true;
            }
        }
    }
#endif
    return jdnum_f64(p, n, out, used);
}

/* |nb| bytes from the 2 * |nb| hex digits (any case) at |p|; false, with
 * |dst| unspecified, when one is not a hex digit. */
bool jdnum_hex(uint8_t *dst, const char *p, size_t nb);

#endif
