/*
 * bloom.c - bloom filters and the body tokenizer (bloom.h).
 */
#include "storage/bloom.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
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
    return bloom_acc_body(a, NULL, p, n, seed);
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

/* The grams of u[0, n), n >= 3, into |bits|: a load, a shift and one OR
 * into the bitmap per byte. */
static inline void grams_pass(uint64_t *bits, const unsigned char *u, size_t n)
{
    uint32_t x = (uint32_t)gram_code[u[0]] << 7 | gram_code[u[1]];
#pragma GCC unroll 4
    for (size_t i = 2; i < n; i++) {
        x = x << 7 | gram_code[u[i]];
        uint32_t gr = x & (BLOOM_GRAM_SPACE - 1);
        bits[gr >> 6] |= 1ull << (gr & 63);
    }
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
 * when it has no upper case letter (|upper| zero), else folded first. */
static inline uint64_t body_token(const unsigned char *p, size_t n, unsigned upper, uint64_t seed)
{
    if (n > BLOOM_TOKEN_MAX) {
        n = BLOOM_TOKEN_MAX;
    }
    if (upper == 0) {
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

/*
 * The tokens of u[0, n), in order, hashed and added: 16 bytes classified
 * at a time (class16), tokens found by their masks' bit runs, so the loop
 * runs per token, not per byte. A token open at a chunk's end continues
 * into the next; the last chunk is read from a zero-padded copy (0 is no
 * token byte).
 */
static inline int tokens_pass(struct bloom_acc *a, const unsigned char *u, size_t n, uint64_t seed)
{
    size_t start = 0;
    bool in = false;
    unsigned upper = 0;
    for (size_t base = 0; base < n; base += 16) {
        unsigned tok, up;
        if (n - base >= 16) {
            class16(u + base, &tok, &up);
        } else {
            unsigned char tail[16] = {0};
            memcpy(tail, u + base, n - base);
            class16(tail, &tok, &up);
        }
        unsigned from = 0xffffu; /* the chunk's bits at and past the scan position */
        for (;;) {
            if (in) {
                unsigned rest = ~tok & from;
                if (rest == 0) {
                    upper |= up & from;
                    break;
                }
                unsigned e = (unsigned)__builtin_ctz(rest);
                upper |= up & from & ((1u << e) - 1);
                int rc = bloom_acc_add(a, body_token(u + start, base + e - start, upper, seed));
                if (rc < 0) {
                    return rc;
                }
                in = false;
                from = 0xffffu << e & 0xffffu;
            } else {
                unsigned t = tok & from;
                if (t == 0) {
                    break;
                }
                unsigned s = (unsigned)__builtin_ctz(t);
                start = base + s;
                in = true;
                upper = 0;
                from = 0xffffu << s & 0xffffu;
            }
        }
    }
    return in ? bloom_acc_add(a, body_token(u + start, n - start, upper, seed)) : 0;
}

int bloom_acc_body(struct bloom_acc *a, struct bloom_grams *g, const char *p, size_t n,
                   uint64_t seed)
{
    const unsigned char *u = (const unsigned char *)p;
    if (g != NULL && n >= BLOOM_GRAM_N) {
        pthread_once(&body_once, body_code_init);
        g->dirty = true;
        grams_pass(g->bits, u, n);
    }
    return tokens_pass(a, u, n, seed);
}

uint64_t bloom_grams_count(const struct bloom_grams *g)
{
    uint64_t n = 0;
    if (g->bits != NULL && g->dirty) {
        for (size_t w = 0; w < GRAM_WORDS; w++) {
            n += (uint64_t)__builtin_popcountll(g->bits[w]);
        }
    }
    return n;
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
