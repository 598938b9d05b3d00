/*
 * bloom.c - bloom filters and the body tokenizer (bloom.h).
 */
#include "storage/bloom.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

bool bloom_next_token(const char *p, size_t n, size_t *pos, size_t *start, size_t *len)
{
    size_t i = *pos;
    while (i < n && !bloom_is_token_char((unsigned char)p[i])) {
        i++;
    }
    if (i >= n) {
        *pos = n;
        return false;
    }
    size_t s = i;
    while (i < n && bloom_is_token_char((unsigned char)p[i])) {
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

void bloom_set_init(struct bloom_set *s)
{
    memset(s, 0, sizeof(*s));
}

void bloom_set_fini(struct bloom_set *s)
{
    free(s->slots);
    memset(s, 0, sizeof(*s));
}

static void set_place(uint64_t *slots, size_t cap, uint64_t h)
{
    size_t i = (size_t)(h ^ (h >> 29)) & (cap - 1);
    while (slots[i] != 0 && slots[i] != h) {
        i = (i + 1) & (cap - 1);
    }
    slots[i] = h;
}

int bloom_set_add(struct bloom_set *s, uint64_t h)
{
    if (h == 0) {
        s->has_zero = true;
        return 0;
    }
    if ((s->n + 1) * 4 > s->cap * 3) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        uint64_t *ns = calloc(ncap, sizeof(*ns));
        if (ns == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (s->slots[i] != 0) {
                set_place(ns, ncap, s->slots[i]);
            }
        }
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    size_t i = (size_t)(h ^ (h >> 29)) & (s->cap - 1);
    while (s->slots[i] != 0) {
        if (s->slots[i] == h) {
            return 0;
        }
        i = (i + 1) & (s->cap - 1);
    }
    s->slots[i] = h;
    s->n++;
    return 0;
}

size_t bloom_set_count(const struct bloom_set *s)
{
    return s->n + (s->has_zero ? 1 : 0);
}

uint64_t bloom_nbits_for(size_t n)
{
    uint64_t bits = (uint64_t)n * BLOOM_BITS_PER_ITEM;
    bits = (bits + 63) & ~63ull;
    if (bits < 64) {
        bits = 64;
    }
    if (bits > BLOOM_MAX_BITS) {
        bits = BLOOM_MAX_BITS;
    }
    return bits;
}

void bloom_put(uint8_t *bits, uint64_t nbits, unsigned k, uint64_t h)
{
    uint64_t h1 = h & 0xffffffffu, h2 = h >> 32;
    for (unsigned j = 0; j < k; j++) {
        uint64_t bit = (h1 + j * h2) % nbits;
        bits[bit >> 3] |= (uint8_t)(1u << (bit & 7));
    }
}

bool bloom_test(const uint8_t *bits, uint64_t nbits, unsigned k, uint64_t h)
{
    uint64_t h1 = h & 0xffffffffu, h2 = h >> 32;
    for (unsigned j = 0; j < k; j++) {
        uint64_t bit = (h1 + j * h2) % nbits;
        if ((bits[bit >> 3] & (1u << (bit & 7))) == 0) {
            return false;
        }
    }
    return true;
}

void bloom_fill(uint8_t *bits, uint64_t nbits, unsigned k, const struct bloom_set *s)
{
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slots[i] != 0) {
            bloom_put(bits, nbits, k, s->slots[i]);
        }
    }
    if (s->has_zero) {
        bloom_put(bits, nbits, k, 0);
    }
}
