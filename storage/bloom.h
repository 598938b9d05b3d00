/*
 * bloom.h - bloom filters for block footers, and the body tokenizer that
 * both the block writer and the query side use.
 *
 * Filter (algorithm 2, split block): nbits is a multiple of 512; the bits
 * form nbits / 512 blocks of 8 little-endian u64 words (bit i of the filter
 * is bit i % 8 of byte i / 8, so word w of block b holds filter bits
 * b * 512 + w * 64 + 0..63). One XXH3_64bits_withSeed hash h per item
 * selects block b = ((h >> 32) * (nbits / 512)) >> 32 and, in each word w
 * of it, the bit ((uint32_t)h * BLOOM_SALT[w] mod 2^32) >> 26: k = 8 bits,
 * all in one 64-byte cache line, so an insert or a test touches one line.
 * At BLOOM_BITS_PER_ITEM bits per distinct item the false positive rate is
 * about 1%. The algorithm id and seed are stored with each filter.
 *
 * Items:
 *   a body token   the token's bytes, ASCII case-folded, first
 *                  BLOOM_TOKEN_MAX bytes only (a longer token is hashed on
 *                  its prefix on both sides, so it is still never missed)
 *   a key = value  XXH3_64bits_withSeed(value, XXH3_64bits_withSeed(key, seed))
 *                  (the key's hash seeds the value's: no separator needed)
 *   a trace id     its 16 bytes
 *
 *   a body gram   3 consecutive bytes of a string body, each mapped to 7
 *                  bits by bloom_gram_byte (ASCII letters folded to lower
 *                  case, other ASCII bytes as they are, bytes 0x80..0xff
 *                  onto the 26 codes upper case letters left free), packed
 *                  as m0 << 14 | m1 << 7 | m2 and hashed by bloom_hash_gram.
 *                  Every substring of 3 or more bytes of a body has all its
 *                  grams in the block's gram bloom, so a needle with one
 *                  gram missing is in no body of the block. The map only
 *                  merges bytes, never splits them: one filter serves the
 *                  case-sensitive |= and the case-insensitive (?i) regex
 *                  (see the caller for the letters whose Unicode case
 *                  variants are not ASCII), and the set of all grams is a
 *                  2^21-bit (256 KiB) bitmap.
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
#include <string.h>

#define BLOOM_ALGO_XXH3_SPLIT 2 /* the only algorithm (above) */
#define BLOOM_TOKEN_MAX 128
#define BLOOM_K 8                    /* bits per item: one in each word of a block */
#define BLOOM_BLOCK_BITS 512         /* one cache line */
#define BLOOM_BITS_PER_ITEM 10       /* ~1% false positives */
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

/*
 * An accumulator: item hashes gathered before a filter is sized. It keeps
 * the hashes (most repeats dropped by a small direct-mapped table of recent
 * hashes) and a HyperLogLog sketch of how many are distinct, so adding is a
 * few cache-resident operations and no hash set is built. Owned by its
 * user, reusable after bloom_acc_reset; not thread-safe.
 */
#define BLOOM_RECENT 4096 /* direct-mapped recent hashes */
#define BLOOM_HLL_BITS 12
#define BLOOM_HLL_M (1u << BLOOM_HLL_BITS)
struct bloom_acc {
    uint64_t *h; /* hashes to insert (repeats possible) */
    size_t n, cap;
    uint64_t recent[BLOOM_RECENT]; /* slot i holds a hash whose low bits are i, or i ^ 1 */
    uint8_t reg[BLOOM_HLL_M];
};
/* Both leave |a| empty; init allocates nothing. */
void bloom_acc_init(struct bloom_acc *a);
void bloom_acc_reset(struct bloom_acc *a);
void bloom_acc_fini(struct bloom_acc *a);
/* Room for more hashes: 0 or -ENOMEM (bloom_acc_add's slow path). */
int bloom_acc_grow(struct bloom_acc *a);

/* 0 or -ENOMEM. Branch-free past the room check: whether |h| repeats the
 * recent hash in its slot is data, not a branch the CPU can predict (half
 * of a body's tokens repeat, half do not); the sketch update is idempotent
 * for a repeat and the slot past the kept hashes is scratch. */
static inline int bloom_acc_add(struct bloom_acc *a, uint64_t h)
{
    if (a->n == a->cap) {
        int rc = bloom_acc_grow(a);
        if (rc < 0) {
            return rc;
        }
    }
    uint64_t *r = &a->recent[h & (BLOOM_RECENT - 1)];
    size_t fresh = *r != h;
    *r = h;
    uint64_t w = h << BLOOM_HLL_BITS;
    uint8_t rank = w ? (uint8_t)(__builtin_clzll(w) + 1) : (uint8_t)(64 - BLOOM_HLL_BITS + 1);
    uint8_t *g = &a->reg[h >> (64 - BLOOM_HLL_BITS)];
    *g = rank > *g ? rank : *g;
    a->h[a->n] = h;
    a->n += fresh;
    return 0;
}

/* The tokens of p[0, n) (bloom_next_token), each hashed as bloom_hash_token
 * with |seed|, added. 0 or -ENOMEM. */
int bloom_acc_tokens(struct bloom_acc *a, const char *p, size_t n, uint64_t seed);

/* Estimated number of distinct hashes added (HyperLogLog, ~1.6% error;
 * exact-ish below a few thousand), never more than were kept. */
uint64_t bloom_acc_count(const struct bloom_acc *a);

/*
 * A gram set: the exact set of the distinct grams of the bodies added, as
 * a bitmap over all 2^21 grams (256 KiB, allocated at the first add), so
 * adding a gram is one OR into a bitmap that stays in L2. Owned by its user
 * (the block writer's scratch), reusable after bloom_grams_drain; not
 * thread-safe.
 */
#define BLOOM_GRAM_N 3
#define BLOOM_GRAM_SPACE (1u << 21)
struct bloom_grams {
    uint64_t *bits; /* BLOOM_GRAM_SPACE bits, or NULL before the first use */
    bool dirty;     /* bits may be non-zero */
};
void bloom_grams_init(struct bloom_grams *g);
void bloom_grams_fini(struct bloom_grams *g);
/* Adds the grams of p[0, n) (none when n < 3). 0 or -ENOMEM. */
int bloom_grams_add(struct bloom_grams *g, const char *p, size_t n);
/* Allocates the bitmap (once): 0 or -ENOMEM. */
int bloom_grams_ready(struct bloom_grams *g);
/*
 * A token cache: the short tokens (up to BLOOM_TOKC_LEN bytes, ASCII
 * case-folded) already added to one accumulator, so that a token met again
 * in the block is neither hashed nor added: the accumulator's set is the
 * same without it, its kept hashes fewer. Direct-mapped over BLOOM_TOKC
 * slots (32 KiB) that hold the folded token's bytes, so a hit is exact. It
 * belongs to one accumulator and is reset with it; not thread-safe.
 */
#define BLOOM_TOKC_BITS 11
#define BLOOM_TOKC (1u << BLOOM_TOKC_BITS)
#define BLOOM_TOKC_LEN 16
struct bloom_tokc {
    uint64_t w[BLOOM_TOKC][2]; /* the folded token zero-padded to 16 bytes; zeros: empty */
};
void bloom_tokc_reset(struct bloom_tokc *c);

/* bloom_acc_tokens(a, p, n, seed) and, when |g| is not NULL (made ready by
 * bloom_grams_ready), bloom_grams_add(g, p, n) in one pass over the bytes.
 * With a token cache |c| (not NULL; used with this |a| only, reset when |a|
 * is), the short tokens it holds are skipped and the others put in it.
 * 0 or -ENOMEM (from |a|). */
int bloom_acc_body(struct bloom_acc *a, struct bloom_grams *g, struct bloom_tokc *c, const char *p,
                   size_t n, uint64_t seed);
/* The number of distinct grams added. */
uint64_t bloom_grams_count(const struct bloom_grams *g);
/* Sets each gram in |bits| (nbits/8 bytes, zeroed by the caller; NULL:
 * only empty the set) as bloom_hash_gram(gram, seed), and empties |g|. */
void bloom_grams_drain(struct bloom_grams *g, uint8_t *bits, uint64_t nbits, uint64_t seed);

/* A byte's 7-bit gram code (see "a body gram" above). */
static inline uint32_t bloom_gram_byte(unsigned char c)
{
    if (c >= 0x80) {
        return 'A' + (uint32_t)(c - 0x80) % 26;
    }
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* The gram of p[0, 3). */
static inline uint32_t bloom_gram_of(const char *p)
{
    return bloom_gram_byte((unsigned char)p[0]) << 14 | bloom_gram_byte((unsigned char)p[1]) << 7 |
           bloom_gram_byte((unsigned char)p[2]);
}
uint64_t bloom_hash_gram(uint32_t gram, uint64_t seed);

/* The words bloom_quick_hash mixes: for n <= 16 they hold every byte of
 * p[0, n), so (the words, n) equal means the strings are equal. */
static inline void bloom_quick_words(const char *k, size_t kn, uint64_t *a, uint64_t *b)
{
    *a = *b = 0;
    if (kn >= 8) {
        memcpy(a, k, 8);
        memcpy(b, k + kn - 8, 8);
    } else if (kn >= 4) {
        uint32_t x, y;
        memcpy(&x, k, 4);
        memcpy(&y, k + kn - 4, 4);
        *a = x;
        *b = y;
    } else if (kn > 0) {
        *a = (uint64_t)(unsigned char)k[0] << 16 | (uint64_t)(unsigned char)k[kn / 2] << 8 |
             (unsigned char)k[kn - 1];
    }
}

static inline uint64_t bloom_quick_mix(uint64_t a, uint64_t b, size_t kn)
{
    uint64_t h = (a ^ (b << 29 | b >> 35) ^ kn) * 0x9e3779b97f4a7c15ull;
    return h ^ h >> 29;
}

/* A cheap hash of a short string, for in-memory tables only (never
 * stored): a few loads and one multiply. */
static inline uint64_t bloom_quick_hash(const char *k, size_t kn)
{
    uint64_t a, b;
    bloom_quick_words(k, kn, &a, &b);
    return bloom_quick_mix(a, b, kn);
}

/*
 * Recent bodies: a direct-mapped table of the strings seen last (pointers
 * into memory the caller keeps unchanged until the next reset), so that a
 * body equal to one already indexed in the block is not tokenized and
 * gram-split again: its tokens and grams are in the sets already, and the
 * sets (so the filters) are the same without them. Owned by its user; not
 * thread-safe.
 */
#define BLOOM_SEEN 1024
struct bloom_seen {
    const char *p[BLOOM_SEEN];
    uint32_t n[BLOOM_SEEN]; /* 0: an empty slot */
};
void bloom_seen_reset(struct bloom_seen *s);
/* True when p[0, n) equals a string the table holds; else false, and the
 * string takes its slot. An empty string is never held. */
static inline bool bloom_seen_check(struct bloom_seen *s, const char *p, size_t n)
{
    if (n == 0 || n > UINT32_MAX) {
        return false;
    }
    uint64_t h = bloom_quick_hash(p, n);
    if (n >= 24) {
        uint64_t m;
        memcpy(&m, p + n / 2 - 4, 8);
        h = (h ^ m) * 0xc2b2ae3d27d4eb4full;
        h ^= h >> 31;
    }
    size_t i = (size_t)(h >> 40) & (BLOOM_SEEN - 1);
    if (s->n[i] == n && memcmp(s->p[i], p, n) == 0) {
        return true;
    }
    s->p[i] = p;
    s->n[i] = (uint32_t)n;
    return false;
}

/* Bits for |n| items: BLOOM_BITS_PER_ITEM each, a multiple of
 * BLOOM_BLOCK_BITS, at least one block, at most BLOOM_MAX_BITS. */
uint64_t bloom_nbits_for(uint64_t n);
/* Sets every kept hash of |a| in |bits| (nbits/8 bytes, zeroed by the caller). */
void bloom_fill(uint8_t *bits, uint64_t nbits, const struct bloom_acc *a);
void bloom_put(uint8_t *bits, uint64_t nbits, uint64_t h);
bool bloom_test(const uint8_t *bits, uint64_t nbits, uint64_t h);

#endif
