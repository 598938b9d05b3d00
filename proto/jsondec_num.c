/*
 * jsondec_num.c - number fast paths for the OTLP/JSON decoder (see
 * jsondec_num.h).
 *
 * DOUBLES
 *   A decimal m * 10^e with m < 10^19 (so m fits 64 bits) and |e| <= 19
 *   (so 10^|e| fits 64 bits) is converted exactly with 128-bit integers:
 *   for e >= 0 the product m * 10^e is exact; for e < 0, m is shifted up so
 *   that the quotient by 10^-e keeps at least 64 bits, and a nonzero
 *   remainder is remembered ("sticky"). The quotient is cut to 64 bits
 *   with the cut-off bits folded into the sticky bit, which goes into the
 *   lowest bit. With at least 55 significant bits the lowest bit lies below
 *   the rounding position, so the hardware's correctly rounded
 *   integer-to-double conversion rounds that 64-bit number as it would the
 *   exact value; scaling by a power of two is then exact (the range keeps
 *   the result a normal double). Clinger's one-operation case (m <= 2^53,
 *   |e| <= 22) goes first: both operands exact, one rounding.
 *
 *   Between the two, for e < 0, a multiply in the manner of Eisel and
 *   Lemire: m, shifted up to 64 significant bits, times the top 64 bits of
 *   10^e (truncated, so the 128-bit product x lies below the exact one by
 *   less than m << clz). Its top 54 bits and the round bit give the
 *   correctly rounded mantissa unless a rounding midpoint could lie between
 *   x and the exact product; then (about 1 input in 500) the division
 *   above decides.
 */
#include "proto/jsondec_num.h"

#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

const uint64_t jdnum_pow10[20] = {
    1ull,
    10ull,
    100ull,
    1000ull,
    10000ull,
    100000ull,
    1000000ull,
    10000000ull,
    100000000ull,
    1000000000ull,
    10000000000ull,
    100000000000ull,
    1000000000000ull,
    10000000000000ull,
    100000000000000ull,
    1000000000000000ull,
    10000000000000000ull,
    100000000000000000ull,
    1000000000000000000ull,
    10000000000000000000ull,
};

const uint8_t jdnum_lanes[32] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/* 10^-k = (t + f) * 2^-b, 0 < f < 1 (10^-k is no dyadic fraction), k = 1..19 */
const struct jdnum_rcp jdnum_rcp10[20] = {
    {0, 0},
    {0xccccccccccccccccull, 67},  /* 10^-1 */
    {0xa3d70a3d70a3d70aull, 70},  /* 10^-2 */
    {0x83126e978d4fdf3bull, 73},  /* 10^-3 */
    {0xd1b71758e219652bull, 77},  /* 10^-4 */
    {0xa7c5ac471b478423ull, 80},  /* 10^-5 */
    {0x8637bd05af6c69b5ull, 83},  /* 10^-6 */
    {0xd6bf94d5e57a42bcull, 87},  /* 10^-7 */
    {0xabcc77118461cefcull, 90},  /* 10^-8 */
    {0x89705f4136b4a597ull, 93},  /* 10^-9 */
    {0xdbe6fecebdedd5beull, 97},  /* 10^-10 */
    {0xafebff0bcb24aafeull, 100}, /* 10^-11 */
    {0x8cbccc096f5088cbull, 103}, /* 10^-12 */
    {0xe12e13424bb40e13ull, 107}, /* 10^-13 */
    {0xb424dc35095cd80full, 110}, /* 10^-14 */
    {0x901d7cf73ab0acd9ull, 113}, /* 10^-15 */
    {0xe69594bec44de15bull, 117}, /* 10^-16 */
    {0xb877aa3236a4b449ull, 120}, /* 10^-17 */
    {0x9392ee8e921d5d07ull, 123}, /* 10^-18 */
    {0xec1e4a7db69561a5ull, 127}, /* 10^-19 */
};

static inline bool is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

static inline double pow2(int k) /* 2^k, -1022 <= k <= 1023 */
{
    uint64_t bits = (uint64_t)(1023 + k) << 52;
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

double jdnum_dec_to_f64(uint64_t m, int e)
{
    static const double pow10_f64[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                         1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                         1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (m == 0) {
        return 0.0;
    }
    if (m <= 1ull << 53) {
        return e >= 0 ? (double)m * pow10_f64[e] : (double)m / pow10_f64[-e];
    }
    if (e < 0) {
        double v;
        if (jdnum_mul_rcp(m, -e, &v)) {
            return v;
        }
    }
    unsigned __int128 q;
    int scale = 0; /* the value is q * 2^scale (plus the sticky part) */
    bool sticky = false;
    if (e >= 0) {
        q = (unsigned __int128)m * jdnum_pow10[e];
    } else {
        int s = 64 + __builtin_clzll(m); /* m << s has bit 127 set */
        unsigned __int128 num = (unsigned __int128)m << s;
        uint64_t d = jdnum_pow10[-e];
        q = num / d;
        sticky = num % d != 0;
        scale = -s;
    }
    uint64_t hi = (uint64_t)(q >> 64), lo = (uint64_t)q, top = lo;
    if (hi != 0) {
        int sh = 64 - __builtin_clzll(hi); /* 1..64 */
        top = (uint64_t)(q >> sh);
        sticky |= (sh == 64 ? lo : lo & ((1ull << sh) - 1)) != 0;
        scale += sh;
    }
    return (double)(top | (uint64_t)sticky) * pow2(scale);
}

/* Digits at p[*i..n) appended to |*m|, eight at a time while eight bytes
 * remain; |*nd| counts them. Stops early (|*nd| > 19, |*m| then
 * meaningless) once there are more than 19. */
__attribute__((always_inline)) static inline void digits(const char *p, size_t n, size_t *ip,
                                                         uint64_t *mp, int *ndp)
{
    size_t i = *ip;
    uint64_t m = *mp;
    int nd = *ndp;
    unsigned k = 8;
    while (k == 8 && nd <= 19 && n - i >= 8) {
        uint64_t v;
        k = jdnum_run8(p + i, &v);
        m = m * jdnum_pow10[k] + v;
        i += k;
        nd += (int)k;
    }
    if (k == 8) {
        for (; i < n && nd <= 19 && is_digit(p[i]); ++i) {
            m = m * 10 + (uint64_t)(p[i] - '0');
            ++nd;
        }
    }
    *ip = i;
    *mp = m;
    *ndp = nd;
}

/*
 * The usual shape, 8 bytes at a time: an integer part of 1..7 digits, then
 * optionally '.' and a fraction, and no exponent, with at most 19 digits in
 * all (an upper bound on the significant ones) and room to load 8 bytes at
 * each step. m and e come out as the general loop computes them (leading
 * zeros add nothing to m either way). False, nothing decided, otherwise.
 */
static inline bool f64_short(const char *p, size_t n, size_t i, double *v, size_t *used)
{
    uint64_t m, f;
    if (n - i < 8) {
        return false;
    }
    unsigned k = jdnum_run8(p + i, &m), kf = 0, r;
    bool int0 = p[i] == '0';
    if (k == 0 || k == 8 || (int0 && k > 1)) {
        return false;
    }
    i += k;
    if (p[i] == '.') {
        i++;
        do {
            if (n - i < 8) {
                return false;
            }
            r = jdnum_run8(p + i, &f);
            m = m * jdnum_pow10[r] + f;
            i += r;
            kf += r;
        } while (r == 8 && kf <= 19);
        if (r == 8 || kf == 0 || (int0 ? 0 : k) + kf > 19) {
            return false;
        }
    }
    char c = p[i];
    if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        return false;
    }
    *v = jdnum_dec_to_f64(m, -(int)kf);
    *used = i;
    return true;
}

bool jdnum_f64(const char *p, size_t n, double *out, size_t *used)
{
    size_t i = 0;
    bool minus = n != 0 && p[0] == '-';
    i += minus;
    double v;
    if (f64_short(p, n, i, &v, used)) {
        *out = minus ? -v : v;
        return true;
    }
    if (i >= n || !is_digit(p[i])) {
        return false;
    }
    uint64_t m = 0;
    int nd = 0, e = 0; /* significant digits taken; power of ten */
    if (p[i] == '0') {
        i++;
    } else {
        digits(p, n, &i, &m, &nd);
    }
    if (i < n && p[i] == '.') {
        size_t f0 = ++i;
        if (m == 0) { /* leading zeros of the fraction */
            for (; i < n && p[i] == '0'; i++) {
                e--;
            }
        }
        int nd0 = nd;
        digits(p, n, &i, &m, &nd);
        e -= nd - nd0;
        if (i == f0) {
            return false;
        }
    }
    if (nd > 19) {
        return false;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        bool eneg = i < n && p[i] == '-';
        i += i < n && (p[i] == '-' || p[i] == '+');
        size_t x0 = i;
        int x = 0;
        for (; i < n && is_digit(p[i]); i++) {
            if (x > 1000) {
                return false;
            }
            x = x * 10 + (p[i] - '0');
        }
        if (i == x0) {
            return false;
        }
        e += eneg ? -x : x;
    }
    if (i < n && (is_digit(p[i]) || p[i] == '.' || p[i] == 'e' || p[i] == 'E' || p[i] == '+' ||
                  p[i] == '-')) {
        return false;
    }
    if (m != 0 && (e < -19 || e > 19)) {
        return false;
    }
    v = jdnum_dec_to_f64(m, e);
    *out = minus ? -v : v;
    *used = i;
    return true;
}

/* Hex digit values plus one; 0 for every other byte. */
static const uint8_t hex_val1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['A'] = 11, ['b'] = 12, ['B'] = 12, ['c'] = 13, ['C'] = 13,
    ['d'] = 14, ['D'] = 14, ['e'] = 15, ['E'] = 15, ['f'] = 16, ['F'] = 16,
};

bool jdnum_hex(uint8_t *dst, const char *p, size_t nb)
{
    const unsigned char *u = (const unsigned char *)p;
    int bad = 0;
    size_t i = 0;
#ifdef __SSE2__
    /* 16 digits at a time: a byte is a digit when it lies in '0'..'9', a
     * letter when it lies in 'a'..'f' after setting the case bit (only
     * 'A'..'F' and 'a'..'f' land there; bytes >= 0x80 compare negative
     * and fail both); its value is its low nibble, plus 9 for a letter.
     * The pairs of nibbles are joined in 16-bit lanes and packed to bytes. */
    const __m128i d_lo = _mm_set1_epi8('0' - 1), d_hi = _mm_set1_epi8('9' + 1),
                  a_lo = _mm_set1_epi8('a' - 1), a_hi = _mm_set1_epi8('f' + 1),
                  nib = _mm_set1_epi8(0x0f), nine = _mm_set1_epi8(9),
                  case_bit = _mm_set1_epi8(0x20), low8 = _mm_set1_epi16(0x00ff);
    for (; i + 8 <= nb; i += 8) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + 2 * i));
        __m128i lc = _mm_or_si128(v, case_bit);
        __m128i dig = _mm_and_si128(_mm_cmpgt_epi8(v, d_lo), _mm_cmplt_epi8(v, d_hi));
        __m128i alp = _mm_and_si128(_mm_cmpgt_epi8(lc, a_lo), _mm_cmplt_epi8(lc, a_hi));
        if (_mm_movemask_epi8(_mm_or_si128(dig, alp)) != 0xffff) {
            return false;
        }
        __m128i n = _mm_add_epi8(_mm_and_si128(v, nib), _mm_and_si128(alp, nine));
        __m128i w = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(n, low8), 4), _mm_srli_epi16(n, 8));
        _mm_storel_epi64((__m128i *)(void *)(dst + i), _mm_packus_epi16(w, w));
    }
#endif
    for (; i < nb; i++) {
        int h = hex_val1[u[2 * i]] - 1, l = hex_val1[u[2 * i + 1]] - 1;
        bad |= h | l;
        dst[i] = (uint8_t)((unsigned)h << 4 | (unsigned)l);
    }
    return bad >= 0;
}
