/*
 * bloom.c - bloom filters and the body tokenizer (bloom.h).
 */
#include "storage/bloom.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
    for (unsigned j = 0; j < BLOOM_HLL_M; j++) {
        sum += ldexp(1.0, -(int)a->reg[j]);
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

/* ---- gram set ---- */

#define GRAM_WORDS (BLOOM_GRAM_SPACE / 64)

/* Per byte, for the gram set and the body pass (one load a byte): its gram
 * code (bloom_gram_byte, low 7 bits), BODY_TOK for a token byte,
 * BODY_UPPER for an upper case letter. */
#define BODY_TOK 0x80u
#define BODY_UPPER 0x100u
static uint16_t body_code[256];
static pthread_once_t body_once = PTHREAD_ONCE_INIT;

static void body_code_init(void)
{
    for (unsigned c = 0; c < 256; c++) {
        body_code[c] =
            (uint16_t)(bloom_gram_byte((unsigned char)c) | (fold[c] != 0 ? BODY_TOK : 0) |
                       (fold[c] != 0 && fold[c] != c ? BODY_UPPER : 0));
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

int bloom_grams_add(struct bloom_grams *g, const char *p, size_t n)
{
    if (n < BLOOM_GRAM_N) {
        return 0;
    }
    if (bloom_grams_ready(g) < 0) {
        return -ENOMEM;
    }
    g->dirty = true;
    uint64_t *bits = g->bits;
    const unsigned char *u = (const unsigned char *)p;
    uint32_t x = (body_code[u[0]] & 0x7fu) << 7 | (body_code[u[1]] & 0x7fu);
    for (size_t i = 2; i < n; i++) {
        x = ((x << 7) | (body_code[u[i]] & 0x7fu)) & (BLOOM_GRAM_SPACE - 1);
        bits[x >> 6] |= 1ull << (x & 63);
    }
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

/* bloom_acc_body's token state at byte i, whose code is |t|: u[*start, i)
 * is the token so far, |*upper| has BODY_UPPER when it has an upper case
 * letter; a separator closes the token and hashes it. */
static inline __attribute__((always_inline)) int body_tok(struct bloom_acc *a,
                                                          const unsigned char *u, size_t i,
                                                          unsigned t, size_t *start,
                                                          unsigned *upper, uint64_t seed)
{
    if (t & BODY_TOK) {
        *upper |= t;
        return 0;
    }
    int rc = 0;
    if (i > *start) {
        rc = bloom_acc_add(a, body_token(u + *start, i - *start, *upper & BODY_UPPER, seed));
    }
    *start = i + 1;
    *upper = 0;
    return rc;
}

/* bloom_acc_body's pass: the first two bytes only start the first gram. */
static inline __attribute__((always_inline)) int body_pass(struct bloom_acc *a, uint64_t *bits,
                                                           const unsigned char *u, size_t n,
                                                           uint64_t seed, bool grams)
{
    size_t start = 0, i = 0;
    unsigned upper = 0;
    uint32_t x = 0;
    int rc = 0;
    if (grams) {
        for (; i < BLOOM_GRAM_N - 1 && rc == 0; i++) {
            unsigned t = body_code[u[i]];
            x = (x << 7) | (t & 0x7fu);
            rc = body_tok(a, u, i, t, &start, &upper, seed);
        }
    }
    for (; i < n && rc == 0; i++) {
        unsigned t = body_code[u[i]];
        if (grams) {
            x = ((x << 7) | (t & 0x7fu)) & (BLOOM_GRAM_SPACE - 1);
            bits[x >> 6] |= 1ull << (x & 63);
        }
        rc = body_tok(a, u, i, t, &start, &upper, seed);
    }
    if (rc == 0 && n > start) {
        rc = bloom_acc_add(a, body_token(u + start, n - start, upper & BODY_UPPER, seed));
    }
    return rc;
}

int bloom_acc_body(struct bloom_acc *a, struct bloom_grams *g, const char *p, size_t n,
                   uint64_t seed)
{
    const unsigned char *u = (const unsigned char *)p;
    pthread_once(&body_once, body_code_init);
    if (g == NULL || n < BLOOM_GRAM_N) {
        return body_pass(a, NULL, u, n, seed, false);
    }
    g->dirty = true;
    return body_pass(a, g->bits, u, n, seed, true);
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
                bloom_put(bits, nbits, bloom_hash_gram(gram, seed));
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

static inline uint8_t *block_of(const uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint64_t nblocks = nbits / BLOOM_BLOCK_BITS;
    return (uint8_t *)bits + (((h >> 32) * nblocks) >> 32) * (BLOOM_BLOCK_BITS / 8);
}

void bloom_put(uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint8_t *b = block_of(bits, nbits, h);
    uint32_t lo = (uint32_t)h;
    for (unsigned w = 0; w < BLOOM_K; w++) {
        uint64_t v;
        memcpy(&v, b + 8 * w, 8);
        v |= 1ull << ((uint32_t)(lo * salt[w]) >> 26);
        memcpy(b + 8 * w, &v, 8);
    }
}

bool bloom_test(const uint8_t *bits, uint64_t nbits, uint64_t h)
{
    const uint8_t *b = block_of(bits, nbits, h);
    uint32_t lo = (uint32_t)h;
    uint64_t miss = 0;
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
        bloom_put(bits, nbits, a->h[i]);
    }
}
