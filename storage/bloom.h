/*
 * bloom.h - bloom filters for block footers, and the body tokenizer that
 * both the block writer and the query side use.
 *
 * Hashing: one XXH3_64bits_withSeed hash h per item; probe j (0 <= j < k)
 * sets bit (h1 + j * h2) mod nbits with h1 = low 32 bits of h and h2 = high
 * 32 bits (Kirsch-Mitzenmacher). Bits are numbered LSB first within each
 * byte. The algorithm id and seed are stored with each filter.
 *
 * Items:
 *   a body token   the token's bytes, ASCII case-folded, first
 *                  BLOOM_TOKEN_MAX bytes only (a longer token is hashed on
 *                  its prefix on both sides, so it is still never missed)
 *   a key = value  XXH3_64bits_withSeed(value, XXH3_64bits_withSeed(key, seed))
 *                  (the key's hash seeds the value's: no separator needed)
 *   a trace id     its 16 bytes
 *
 * A token is a maximal run of [A-Za-z0-9_]. A query's line filter may use
 * the bloom only for the tokens that are whole inside it: in the filter
 * "rror: time out" the token "time" is whole, but "rror" and "out" touch
 * the filter's ends and may be parts of longer tokens ("error", "outage"),
 * so they must not rule a block out.
 */
#ifndef MIRADB_BLOOM_H
#define MIRADB_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLOOM_ALGO_XXH3_KM 1 /* the only algorithm so far (above) */
#define BLOOM_TOKEN_MAX 128
#define BLOOM_K 7
#define BLOOM_BITS_PER_ITEM 10       /* ~1% false positives at k = 7 */
#define BLOOM_MAX_BITS (64ull << 20) /* 8 MiB per filter: more items only raise the FP rate */

static inline bool bloom_is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Finds the next token at or after |*pos| in p[0, n): true with its start
 * and length, |*pos| moved past it; false when there is none left. */
bool bloom_next_token(const char *p, size_t n, size_t *pos, size_t *start, size_t *len);

uint64_t bloom_hash_token(const char *tok, size_t n, uint64_t seed);
uint64_t bloom_hash_kv(const char *key, size_t kn, const char *val, size_t vn, uint64_t seed);
uint64_t bloom_hash_bytes(const void *p, size_t n, uint64_t seed);

/* A set of distinct 64-bit item hashes, gathered before a filter is sized.
 * Owned by its user; not thread-safe. */
struct bloom_set {
    uint64_t *slots; /* 0 marks an empty slot; the hash 0 is kept in has_zero */
    size_t cap;      /* power of two, or 0 */
    size_t n;
    bool has_zero;
};
void bloom_set_init(struct bloom_set *s);
void bloom_set_fini(struct bloom_set *s);
/* 0 or -ENOMEM. */
int bloom_set_add(struct bloom_set *s, uint64_t h);
/* Distinct hashes held. */
size_t bloom_set_count(const struct bloom_set *s);

/* Bits for |n| items: BLOOM_BITS_PER_ITEM each, a multiple of 64, at
 * least 64, at most BLOOM_MAX_BITS. */
uint64_t bloom_nbits_for(size_t n);
/* Sets the k probe bits of every hash in |s| in |bits| (nbits/8 bytes,
 * zeroed by the caller). */
void bloom_fill(uint8_t *bits, uint64_t nbits, unsigned k, const struct bloom_set *s);
void bloom_put(uint8_t *bits, uint64_t nbits, unsigned k, uint64_t h);
bool bloom_test(const uint8_t *bits, uint64_t nbits, unsigned k, uint64_t h);

#endif
