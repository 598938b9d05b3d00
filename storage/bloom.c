/*
 * bloom.c - bloom filters and the body tokenizer (bloom.h).
 */
#include "storage/bloom.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define XXH_INLINE_ALL /* short keys: the hash inlines to a few multiplies */
#include <xxhash.h>

static const uint32_t salt[BLOOM_K] = {0x9e3779b1u, 0x85ebca77u, 0xc2b2ae3du, 0x27d4eb2fu,
                                       0x165667b1u, 0xd3a2646du, 0xfd7046c5u, 0xb55a4f09u};

/* Token bytes folded to lower case; 0 for a byte that is not a token byte. */
static const uint8_t fold[256] = {
#define R10(c) c, c + 1, c + 2, c + 3, c + 4, c + 5, c + 6, c + 7, c + 8, c + 9
    ['0'] = R10('0'), ['A'] = R10('a'), ['K'] = R10('k'), ['U'] = 'u', 'v', 'w', 'x', 'y', 'z',
    ['_'] = '_',      ['a'] = R10('a'), ['k'] = R10('k'), ['u'] = 'u', 'v', 'w', 'x', 'y', 'z',
#undef R10
};

bool bloom_next_token(const char *p, size_t n, size_t *pos, size_t *start, size_t *len)
{
    size_t i = *pos;
    while (i < n && fold[(unsigned char)p[i]] == 0) {
        i++;
    }
    if (i >= n) {
        *pos = n;
        return false;
    }
    size_t s = i;
    while (i < n && fold[(unsigned char)p[i]] != 0) {
        i++;
    }
    *start = s;
    *len = i - s;
    *pos = i;
    return true;
}

uint64_t bloom_hash_token(const char *tok, size_t n, uint64_t seed)
{
    char buf[BLOOM_TOKEN_MAX];
    if (n > BLOOM_TOKEN_MAX) {
        n = BLOOM_TOKEN_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        char c = tok[i];
        buf[i] = (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
    }
    return XXH3_64bits_withSeed(buf, n, seed);
}

uint64_t bloom_hash_kv(const char *key, size_t kn, const char *val, size_t vn, uint64_t seed)
{
    return XXH3_64bits_withSeed(val, vn, XXH3_64bits_withSeed(key, kn, seed));
}

uint64_t bloom_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(p, n, seed);
}

/* ---- accumulator ---- */

void bloom_acc_init(struct bloom_acc *a)
{
    a->h = NULL;
    a->cap = 0;
    bloom_acc_reset(a);
}

void bloom_acc_reset(struct bloom_acc *a)
{
    a->n = 0;
    for (size_t i = 0; i < BLOOM_RECENT; i++) {
        a->recent[i] = i ^ 1; /* matches no hash that maps to slot i */
    }
    memset(a->reg, 0, sizeof(a->reg));
}

void bloom_acc_fini(struct bloom_acc *a)
{
    free(a->h);
    a->h = NULL;
    a->n = a->cap = 0;
}

int bloom_acc_grow(struct bloom_acc *a)
{
    size_t ncap = a->cap ? a->cap * 2 : 4096;
    uint64_t *nh = realloc(a->h, ncap * sizeof(*nh));
    if (nh == NULL) {
        return -ENOMEM;
    }
    a->h = nh;
    a->cap = ncap;
    return 0;
}

int bloom_acc_tokens(struct bloom_acc *a, const char *p, size_t n, uint64_t seed)
{
    return bloom_acc_body(a, NULL, NULL, p, n, seed);
}

uint64_t bloom_acc_count(const struct bloom_acc *a)
{
    if (a->n == 0) {
        return 0;
    }
    double m = BLOOM_HLL_M, sum = 0;
    unsigned zeros = 0;
    double inv[66]; /* 2^-r: exact, as ldexp(1, -r) is */
    inv[0] = 1;
    for (unsigned r = 1; r < 66; r++) {
        inv[r] = inv[r - 1] / 2;
    }
    for (unsigned j = 0; j < BLOOM_HLL_M; j++) {
        sum += inv[a->reg[j]];
        zeros += a->reg[j] == 0;
    }
    double e = (0.7213 / (1 + 1.079 / m)) * m * m / sum;
    if (e <= 2.5 * m && zeros > 0) {
        e = m * log(m / zeros); /* linear counting for small sets */
    }
    uint64_t est = (uint64_t)(e + 0.5);
    if (est < 1) {
        est = 1;
    }
    return est < a->n ? est : a->n;
}

/* ---- filter bits (bloom_put) ---- */

static inline uint8_t *block_of(const uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint64_t nblocks = nbits / BLOOM_BLOCK_BITS;
    return (uint8_t *)bits + (((h >> 32) * nblocks) >> 32) * (BLOOM_BLOCK_BITS / 8);
}

/* bloom_put, unrolled (the salts become immediates) and inlined into the
 * fill loops. */
static inline __attribute__((always_inline)) void put_one(uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint8_t *b = block_of(bits, nbits, h);
    uint32_t lo = (uint32_t)h;
#pragma GCC unroll 8
    for (unsigned w = 0; w < BLOOM_K; w++) {
        uint64_t v;
        memcpy(&v, b + 8 * w, 8);
        v |= 1ull << ((uint32_t)(lo * salt[w]) >> 26);
        memcpy(b + 8 * w, &v, 8);
    }
}

/* ---- gram set ---- */

#define GRAM_WORDS (BLOOM_GRAM_SPACE / 64)

/* Per byte, its gram code (bloom_gram_byte). */
static uint8_t gram_code[256];
static pthread_once_t body_once = PTHREAD_ONCE_INIT;

static void body_code_init(void)
{
    for (unsigned c = 0; c < 256; c++) {
        gram_code[c] = (uint8_t)bloom_gram_byte((unsigned char)c);
    }
}

void bloom_grams_init(struct bloom_grams *g)
{
    g->bits = NULL;
    g->dirty = false;
}

void bloom_grams_fini(struct bloom_grams *g)
{
    free(g->bits);
    bloom_grams_init(g);
}

int bloom_grams_ready(struct bloom_grams *g)
{
    pthread_once(&body_once, body_code_init);
    if (g->bits == NULL) {
        g->bits = calloc(GRAM_WORDS, sizeof(uint64_t));
        if (g->bits == NULL) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* The grams starting at u[from, n - 2) into |bits|, one byte at a time:
 * a load, a shift and one OR into the bitmap per byte. */
static inline void grams_scalar(uint64_t *bits, const unsigned char *u, size_t from, size_t n)
{
    if (n < from + BLOOM_GRAM_N) {
        return;
    }
    uint32_t x = (uint32_t)gram_code[u[from]] << 7 | gram_code[u[from + 1]];
#pragma GCC unroll 4
    for (size_t i = from + 2; i < n; i++) {
        x = x << 7 | gram_code[u[i]];
        uint32_t gr = x & (BLOOM_GRAM_SPACE - 1);
        bits[gr >> 6] |= 1ull << (gr & 63);
    }
}

#ifdef __SSE2__
/* The gram codes of 16 ASCII bytes (bloom_gram_byte below 0x80): upper
 * case letters folded, every other byte as it is. */
static inline __m128i gram_codes16(__m128i x)
{
    __m128i c = _mm_sub_epi8(x, _mm_set1_epi8('A'));
    __m128i capital = _mm_cmpeq_epi8(_mm_min_epu8(c, _mm_set1_epi8(25)), c);
    return _mm_add_epi8(x, _mm_and_si128(capital, _mm_set1_epi8('a' - 'A')));
}
#endif

/*
 * The grams of u[0, n), n >= 3, into |bits|. With SSE2, 16 grams at a
 * time where their 18 bytes are all ASCII: gram c0 << 14 | c1 << 7 | c2
 * sets bit c2 & 63 of word c0 << 8 | c1 << 1 | c2 >> 6, and both are
 * computed for the 16 at once (the word index fits 16 bits), leaving one
 * OR into the bitmap per gram; 16 grams with a byte >= 0x80 (its code
 * from the table) and the last < 16 go one byte at a time. The set is
 * the same whichever way a gram is reached.
 */
static inline void grams_pass(uint64_t *bits, const unsigned char *u, size_t n)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 + BLOOM_GRAM_N - 1 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(u + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(u + i + 1));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(u + i + 2));
        if (_mm_movemask_epi8(_mm_or_si128(a, c)) != 0) { /* a byte >= 0x80 */
            grams_scalar(bits, u, i, i + 16 + BLOOM_GRAM_N - 1);
            continue;
        }
        a = gram_codes16(a);
        b = gram_codes16(b);
        c = gram_codes16(c);
        /* c1 << 1 | c2 >> 6 in a byte (c2 < 0x80: c2 >> 6 is c2 > 63) */
        __m128i lo =
            _mm_or_si128(_mm_add_epi8(b, b),
                         _mm_and_si128(_mm_cmpgt_epi8(c, _mm_set1_epi8(63)), _mm_set1_epi8(1)));
        _Alignas(16) uint16_t w[16];
        _Alignas(16) uint8_t sh[16];
        _mm_store_si128((__m128i *)(void *)w, _mm_unpacklo_epi8(lo, a));
        _mm_store_si128((__m128i *)(void *)(w + 8), _mm_unpackhi_epi8(lo, a));
        _mm_store_si128((__m128i *)(void *)sh, _mm_and_si128(c, _mm_set1_epi8(63)));
#pragma GCC unroll 16
        for (unsigned k = 0; k < 16; k++) {
            bits[w[k]] |= 1ull << sh[k];
        }
    }
#endif
    grams_scalar(bits, u, i, n);
}

int bloom_grams_add(struct bloom_grams *g, const char *p, size_t n)
{
    if (n < BLOOM_GRAM_N) {
        return 0;
    }
    if (bloom_grams_ready(g) < 0) {
        return -ENOMEM;
    }
    g->dirty = true;
    grams_pass(g->bits, (const unsigned char *)p, n);
    return 0;
}

/* The token p[0, n) hashed as bloom_hash_token: straight from the body
 * when it has no upper case letter (!upper), else folded first. */
static inline uint64_t body_token(const unsigned char *p, size_t n, bool upper, uint64_t seed)
{
    if (n > BLOOM_TOKEN_MAX) {
        n = BLOOM_TOKEN_MAX;
    }
    if (!upper) {
        return XXH3_64bits_withSeed(p, n, seed);
    }
    char buf[BLOOM_TOKEN_MAX];
    for (size_t i = 0; i < n; i++) {
        buf[i] = (char)fold[p[i]];
    }
    return XXH3_64bits_withSeed(buf, n, seed);
}

/* Of the 16 bytes u[0, 16): bit k of |*tok| set when u[k] is a token byte
 * (fold[] non-zero), of |*up| when it is an upper case letter. */
static inline void class16(const unsigned char *u, unsigned *tok, unsigned *up)
{
#ifdef __SSE2__
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)u);
    /* v in [lo, lo + span] (unsigned): min(v - lo, span) == v - lo */
    __m128i l = _mm_sub_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
    __m128i letter = _mm_cmpeq_epi8(_mm_min_epu8(l, _mm_set1_epi8(25)), l);
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('0'));
    __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
    __m128i under = _mm_cmpeq_epi8(x, _mm_set1_epi8('_'));
    __m128i c = _mm_sub_epi8(x, _mm_set1_epi8('A'));
    __m128i capital = _mm_cmpeq_epi8(_mm_min_epu8(c, _mm_set1_epi8(25)), c);
    *tok = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, digit), under));
    *up = (unsigned)_mm_movemask_epi8(capital);
#else
    unsigned t = 0, v = 0;
    for (unsigned k = 0; k < 16; k++) {
        t |= (unsigned)(fold[u[k]] != 0) << k;
        v |= (unsigned)(fold[u[k]] != 0 && fold[u[k]] != u[k]) << k;
    }
    *tok = t;
    *up = v;
#endif
}

/* Bodies up to this long are tokenized from a zero-padded copy on the stack. */
#define BODY_COPY 1024

/* One body's pass: where its tokens go. */
struct body_pass {
    struct bloom_acc *a;
    struct bloom_tokc *c;
    uint64_t seed;
    const unsigned char *u;
    size_t n;
    size_t pad_at; /* u[pad_at, n) is at pad[0], then zeros: the last chunk */
                   /* and the short tokens near the end read 64 and 16 bytes */
    _Alignas(16) unsigned char pad[96];
};

#define TOKC_SHIFT (64 - BLOOM_TOKC_BITS)

/* A short token's cache key: its bytes ASCII case-folded, zero-padded to
 * 16 (no token byte is 0, so the padding gives the length), into k[0, 2)
 * as two little-endian words; |t| is readable for 16 bytes. */
static inline void tok_key(const unsigned char *t, size_t len, uint64_t k[2])
{
#ifdef __SSE2__
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)t);
    __m128i keep =
        _mm_cmpgt_epi8(_mm_set1_epi8((char)len),
                       _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    x = _mm_and_si128(x, keep);
    __m128i c = _mm_sub_epi8(x, _mm_set1_epi8('A'));
    __m128i capital = _mm_cmpeq_epi8(_mm_min_epu8(c, _mm_set1_epi8(25)), c);
    x = _mm_add_epi8(x, _mm_and_si128(capital, _mm_set1_epi8('a' - 'A')));
    _mm_storeu_si128((__m128i *)(void *)k, x);
#else
    unsigned char b[16] = {0};
    for (size_t i = 0; i < len; i++) {
        b[i] = fold[t[i]];
    }
    memcpy(k, b, 16);
#endif
}

/* The token u[s, e) (|upper| when it has an upper case letter)
 * into the accumulator, unless the cache holds it. A short token's 16
 * bytes are read from the body, or near its end from |bp->pad|; with
 * |padded| (a constant) u itself is readable 16 bytes past its end. */
static inline __attribute__((always_inline)) int body_token_add(struct body_pass *bp, size_t s,
                                                                size_t e, bool upper, bool padded)
{
    size_t len = e - s;
    const unsigned char *t = bp->u + s;
    if (bp->c == NULL || len > BLOOM_TOKC_LEN) {
        return bloom_acc_add(bp->a, body_token(t, len, upper, bp->seed));
    }
    /* chosen without a branch: which one it is depends on where the body
     * ends, which the CPU cannot predict */
    uintptr_t near_end = padded ? 0 : (uintptr_t)0 - (uintptr_t)(s + 16 > bp->n);
    uintptr_t from =
        ((uintptr_t)t & ~near_end) | (((uintptr_t)bp->pad + (s - bp->pad_at)) & near_end);
    uint64_t k[2];
    tok_key((const unsigned char *)from, len, k);
    struct bloom_tokc *c = bp->c;
    uint64_t m = k[0] * 0x9e3779b97f4a7c15ull ^ k[1] * 0xc2b2ae3d27d4eb4full;
    size_t i = (size_t)(m >> TOKC_SHIFT);
    if (c->w[i][0] == k[0] && c->w[i][1] == k[1]) {
        return 0; /* in the accumulator already */
    }
    /* the key holds the folded token */
    int rc = bloom_acc_add(bp->a, XXH3_64bits_withSeed(k, len, bp->seed));
    if (rc < 0) {
        return rc;
    }
    c->w[i][0] = k[0];
    c->w[i][1] = k[1];
    return 0;
}

/* class16 over the 64 bytes u[0, 64). */
static inline void class64(const unsigned char *u, uint64_t *tok, uint64_t *up)
{
    uint64_t t = 0, v = 0;
#pragma GCC unroll 4
    for (unsigned q = 0; q < 4; q++) {
        unsigned a, b;
        class16(u + 16 * q, &a, &b);
        t |= (uint64_t)a << (16 * q);
        v |= (uint64_t)b << (16 * q);
    }
    *tok = t;
    *up = v;
}

/* The bits of a 64-bit mask from bit |s| (< 64) up. */
static inline uint64_t bits_from(unsigned s)
{
    return ~0ull << s;
}

/*
 * The tokens of u[0, n), in order, hashed and added: 64 bytes classified
 * at a time (class16), tokens found from the masks' run starts (a token
 * byte after a non-token byte) and ends (the reverse), so the loop turns
 * once per token and the branch that leaves it once per 64 bytes. A token
 * open at a chunk's end continues into the next; the last chunk is read
 * from bp->pad (0 is no token byte), or with |padded| (a constant) from u,
 * readable to the next multiple of 64 past its end.
 */
static inline __attribute__((always_inline)) int tokens_pass(struct body_pass *bp, bool padded)
{
    const unsigned char *u = bp->u;
    size_t n = bp->n, start = 0;
    uint64_t in = 0; /* 1: a token is open, from |start| */
    uint64_t upper = 0;
    for (size_t base = 0; base < n; base += 64) {
        uint64_t tok, up;
        class64(padded || n - base >= 64 ? u + base : bp->pad + (base - bp->pad_at), &tok, &up);
        uint64_t prev = tok << 1 | in; /* bit i: byte i - 1 is a token byte */
        uint64_t st = tok & ~prev, en = ~tok & prev;
        if (in) {
            if (en == 0) {
                upper |= up;
                continue;
            }
            unsigned e = (unsigned)__builtin_ctzll(en);
            en &= en - 1;
            int rc =
                body_token_add(bp, start, base + e, (upper | (up & ~bits_from(e))) != 0, padded);
            if (rc < 0) {
                return rc;
            }
            in = 0;
        }
        while (st != 0) {
            unsigned s = (unsigned)__builtin_ctzll(st);
            st &= st - 1;
            if (en == 0) { /* open at the chunk's end */
                start = base + s;
                upper = up & bits_from(s);
                in = 1;
                break;
            }
            unsigned e = (unsigned)__builtin_ctzll(en);
            en &= en - 1;
            int rc = body_token_add(bp, base + s, base + e,
                                    (up & bits_from(s) & ~bits_from(e)) != 0, padded);
            if (rc < 0) {
                return rc;
            }
        }
    }
    return in ? body_token_add(bp, start, n, upper != 0, padded) : 0;
}

int bloom_acc_body(struct bloom_acc *a, struct bloom_grams *g, struct bloom_tokc *c, const char *p,
                   size_t n, uint64_t seed)
{
    struct body_pass bp; /* not zeroed whole: pad is written before it is read */
    bp.a = a;
    bp.c = c;
    bp.seed = seed;
    bp.u = (const unsigned char *)p;
    bp.n = n;
    if (g != NULL && n >= BLOOM_GRAM_N) {
        pthread_once(&body_once, body_code_init);
        g->dirty = true;
        grams_pass(g->bits, bp.u, n);
    }
    if (n <= BODY_COPY) {
        /* A short body (most) is copied whole with zeros to the 64 bytes
         * past its last chunk: every read of the pass is then in the copy,
         * and no token asks where its 16 bytes come from. */
        _Alignas(16) unsigned char copy[BODY_COPY + 64 + 16];
        size_t end = ((n + 63) & ~(size_t)63) + 16;
        memcpy(copy, p, n);
        memset(copy + n, 0, end - n);
        bp.u = copy;
        return tokens_pass(&bp, true);
    }
    size_t last = n / 64 * 64; /* the last chunk, when n is not a multiple of 64 */
    bp.pad_at = n >= 16 && n - 16 < last ? n - 16 : last;
    memset(bp.pad, 0, sizeof(bp.pad));
    memcpy(bp.pad, bp.u + bp.pad_at, n - bp.pad_at);
    return tokens_pass(&bp, false);
}

void bloom_tokc_reset(struct bloom_tokc *c)
{
    memset(c->w, 0, sizeof(c->w));
}

/* The set bits of |w| words: with the POPCNT instruction where the CPU has
 * it (the baseline build calls libgcc's __popcountdi2 for each word, 21
 * instructions: 690 k a seal for the gram set's 32 Ki words). */
#if defined(__x86_64__) && !defined(__POPCNT__)
__attribute__((target("popcnt"))) static uint64_t count_popcnt(const uint64_t *v, size_t w)
{
    uint64_t n = 0;
    for (size_t i = 0; i < w; i++) {
        n += (uint64_t)__builtin_popcountll(v[i]);
    }
    return n;
}

static bool have_popcnt(void)
{
    static _Atomic int have = -1; /* every thread that finds it unset stores the same */
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("popcnt") ? 1 : 0;
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h == 1;
}
#else
static uint64_t count_popcnt(const uint64_t *v, size_t w)
{
    (void)v;
    (void)w;
    return 0;
}

static bool have_popcnt(void)
{
    return false;
}
#endif

static uint64_t count_bits(const uint64_t *v, size_t w)
{
    if (have_popcnt()) {
        return count_popcnt(v, w);
    }
    uint64_t n = 0;
    for (size_t i = 0; i < w; i++) {
        n += (uint64_t)__builtin_popcountll(v[i]);
    }
    return n;
}

uint64_t bloom_grams_count(const struct bloom_grams *g)
{
    return g->bits != NULL && g->dirty ? count_bits(g->bits, GRAM_WORDS) : 0;
}

uint64_t bloom_hash_gram(uint32_t gram, uint64_t seed)
{
    uint8_t b[3] = {(uint8_t)(gram >> 14), (uint8_t)(gram >> 7 & 0x7f), (uint8_t)(gram & 0x7f)};
    return XXH3_64bits_withSeed(b, 3, seed);
}

void bloom_grams_drain(struct bloom_grams *g, uint8_t *bits, uint64_t nbits, uint64_t seed)
{
    if (g->bits == NULL || !g->dirty) {
        return;
    }
    if (bits != NULL) {
        for (size_t w = 0; w < GRAM_WORDS; w++) {
            for (uint64_t v = g->bits[w]; v != 0; v &= v - 1) {
                uint32_t gram = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(v));
                put_one(bits, nbits, bloom_hash_gram(gram, seed));
            }
        }
    }
    memset(g->bits, 0, GRAM_WORDS * sizeof(uint64_t));
    g->dirty = false;
}

/* ---- recent bodies ---- */

void bloom_seen_reset(struct bloom_seen *s)
{
    memset(s->n, 0, sizeof(s->n));
}

/* ---- filter ---- */

uint64_t bloom_nbits_for(uint64_t n)
{
    uint64_t bits = n > BLOOM_MAX_BITS ? BLOOM_MAX_BITS : n * BLOOM_BITS_PER_ITEM;
    bits = (bits + BLOOM_BLOCK_BITS - 1) / BLOOM_BLOCK_BITS * BLOOM_BLOCK_BITS;
    if (bits < BLOOM_BLOCK_BITS) {
        bits = BLOOM_BLOCK_BITS;
    }
    if (bits > BLOOM_MAX_BITS) {
        bits = BLOOM_MAX_BITS;
    }
    return bits;
}

void bloom_put(uint8_t *bits, uint64_t nbits, uint64_t h)
{
    put_one(bits, nbits, h);
}

bool bloom_test(const uint8_t *bits, uint64_t nbits, uint64_t h)
{
    const uint8_t *b = block_of(bits, nbits, h);
    uint32_t lo = (uint32_t)h;
    uint64_t miss = 0;
#pragma GCC unroll 8
    for (unsigned w = 0; w < BLOOM_K; w++) {
        uint64_t v;
        memcpy(&v, b + 8 * w, 8);
        miss |= ~v & (1ull << ((uint32_t)(lo * salt[w]) >> 26));
    }
    return miss == 0;
}

void bloom_fill(uint8_t *bits, uint64_t nbits, const struct bloom_acc *a)
{
    for (size_t i = 0; i < a->n; i++) {
        put_one(bits, nbits, a->h[i]);
    }
}
