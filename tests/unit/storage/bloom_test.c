/*
 * bloom_test.c - bloom filters and the body tokenizer (storage/bloom.c).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/bloom.h"

Test(bloom, tokens_are_maximal_runs_of_letters_digits_and_underscore)
{
    const char *s = "  GET /api/v2/users?id=42 -> 500_err: timeout...Ünïcode x";
    const char *want[] = {"GET",     "api",     "v2", "users", "id", "42",
                          "500_err", "timeout", "n",  "code",  "x"};
    size_t pos = 0, st, n, k = 0;
    while (bloom_next_token(s, strlen(s), &pos, &st, &n)) {
        cr_assert_lt(k, sizeof(want) / sizeof(want[0]));
        cr_assert_eq(n, strlen(want[k]), "token %zu", k);
        cr_assert(memcmp(s + st, want[k], n) == 0, "token %zu: %.*s", k, (int)n, s + st);
        k++;
    }
    cr_assert_eq(k, sizeof(want) / sizeof(want[0]));
    pos = 0;
    cr_assert_not(bloom_next_token("...", 3, &pos, &st, &n));
    cr_assert_not(bloom_next_token("", 0, &pos, &st, &n));
}

Test(bloom, token_hashes_fold_ascii_case_and_look_at_a_bounded_prefix)
{
    cr_assert_eq(bloom_hash_token("TimeOut_42", 10, 5), bloom_hash_token("timeout_42", 10, 5));
    cr_assert_neq(bloom_hash_token("timeout", 7, 5), bloom_hash_token("timeout", 7, 6));
    cr_assert_neq(bloom_hash_token("timeout", 7, 5), bloom_hash_token("timeou", 6, 5));
    char a[300], b[300];
    memset(a, 'a', sizeof(a));
    memset(b, 'A', sizeof(b));
    b[299] = 'z'; /* differs only past BLOOM_TOKEN_MAX */
    cr_assert_eq(bloom_hash_token(a, 300, 1), bloom_hash_token(b, 300, 1));
    /* key=value hashing has no separator ambiguity */
    cr_assert_neq(bloom_hash_kv("ab", 2, "c", 1, 0), bloom_hash_kv("a", 1, "bc", 2, 0));
}

/* Hashes of distinct items, each added twice (the repeat must not count). */
static void acc_fill(struct bloom_acc *a, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++) {
        cr_assert_eq(bloom_acc_add(a, bloom_hash_bytes(&i, sizeof(i), 3)), 0);
        cr_assert_eq(bloom_acc_add(a, bloom_hash_bytes(&i, sizeof(i), 3)), 0); /* repeat */
    }
}

Test(bloom, a_filter_has_no_false_negatives_and_about_one_percent_false_positives)
{
    struct bloom_acc *a = malloc(sizeof(*a));
    cr_assert_not_null(a);
    bloom_acc_init(a);
    const size_t n = 20000;
    acc_fill(a, 0, n);
    cr_assert_eq(bloom_acc_add(a, 0), 0); /* the hash 0 is an item like any other */
    cr_assert_eq(a->n, n + 1, "immediate repeats are dropped: %zu kept", a->n);
    uint64_t est = bloom_acc_count(a);
    cr_assert(est > (n + 1) * 96 / 100 && est < (n + 1) * 104 / 100, "estimate %llu",
              (unsigned long long)est);
    uint64_t nbits = bloom_nbits_for(n + 1);
    cr_assert_eq(nbits % BLOOM_BLOCK_BITS, 0);
    cr_assert_geq(nbits, (n + 1) * BLOOM_BITS_PER_ITEM);
    cr_assert_lt(nbits, (n + 1) * BLOOM_BITS_PER_ITEM + BLOOM_BLOCK_BITS);
    uint8_t *bits = calloc(nbits / 8, 1);
    cr_assert_not_null(bits);
    bloom_fill(bits, nbits, a);
    for (size_t i = 0; i < n; i++) {
        cr_assert(bloom_test(bits, nbits, bloom_hash_bytes(&i, sizeof(i), 3)));
    }
    cr_assert(bloom_test(bits, nbits, 0));
    size_t fp = 0;
    for (size_t i = n; i < n + 100000; i++) {
        fp += bloom_test(bits, nbits, bloom_hash_bytes(&i, sizeof(i), 3));
    }
    cr_assert_lt(fp, 1500, "%zu false positives in 100000", fp); /* ~1% expected */
    cr_assert_gt(fp, 500);                                       /* and it is a bloom */
    /* Each item sets one bit in each of the 8 words of one 64-byte block. */
    memset(bits, 0, nbits / 8);
    bloom_put(bits, nbits, 0x123456789abcdefull);
    size_t set = 0, first = SIZE_MAX, last = 0;
    for (size_t i = 0; i < nbits; i++) {
        if (bits[i / 8] & (1u << (i % 8))) {
            set++;
            first = i < first ? i : first;
            last = i;
        }
    }
    cr_assert_leq(set, BLOOM_K);
    cr_assert_geq(set, 1);
    cr_assert_eq(first / BLOOM_BLOCK_BITS, last / BLOOM_BLOCK_BITS);
    free(bits);

    /* Reset empties it; the count is exact for a handful and bounded by what was kept. */
    bloom_acc_reset(a);
    cr_assert_eq(bloom_acc_count(a), 0);
    acc_fill(a, 7, 5);
    cr_assert_eq(bloom_acc_count(a), 5);
    bloom_acc_reset(a);
    acc_fill(a, 0, 300000);
    est = bloom_acc_count(a);
    cr_assert(est > 300000 * 95 / 100 && est < 300000 * 105 / 100, "estimate %llu",
              (unsigned long long)est);
    bloom_acc_fini(a);
    free(a);
    cr_assert_eq(bloom_nbits_for(0), BLOOM_BLOCK_BITS);
    cr_assert_eq(bloom_nbits_for(SIZE_MAX / 16), BLOOM_MAX_BITS);
}

Test(bloom, tokens_added_in_one_pass_hash_as_the_query_side_hashes_them)
{
    const char *s = "  GET /api/v2/Users?id=42 -> 500_err: timeout...\xc3\x9cn x";
    struct bloom_acc *a = malloc(sizeof(*a));
    cr_assert_not_null(a);
    bloom_acc_init(a);
    cr_assert_eq(bloom_acc_tokens(a, s, strlen(s), 9), 0);
    size_t pos = 0, st, n, k = 0;
    while (bloom_next_token(s, strlen(s), &pos, &st, &n)) {
        cr_assert_lt(k, a->n);
        cr_assert_eq(a->h[k], bloom_hash_token(s + st, n, 9), "token %zu", k);
        k++;
    }
    cr_assert_eq(k, a->n);
    cr_assert_eq(a->h[3], bloom_hash_token("users", 5, 9));
    /* a long token is hashed on its first BLOOM_TOKEN_MAX bytes */
    char lng[300];
    memset(lng, 'Q', sizeof(lng));
    bloom_acc_reset(a);
    cr_assert_eq(bloom_acc_tokens(a, lng, sizeof(lng), 9), 0);
    cr_assert_eq(a->n, 1);
    cr_assert_eq(a->h[0], bloom_hash_token(lng, 200, 9));
    bloom_acc_fini(a);
    free(a);
}

/* One pass over a body gives what the token pass and the gram pass give. */
Test(bloom, a_bodys_tokens_and_grams_in_one_pass_equal_the_two_passes)
{
    char lng[300];
    memset(lng, 'Q', sizeof(lng));
    lng[7] = 'a';
    lng[250] = ' ';
    const struct {
        const char *p;
        size_t n;
    } in[] = {
        {"", 0},
        {"a", 1},
        {"Ab", 2},
        {" x ", 3},
        {"  GET /api/v2/Users?id=42 -> 500_err: timeout...\xc3\x9cn x", 53},
        {"order ord-00ab12cd placed by USER_17 total 3.50 USD", 51},
        {"\0\xff tail", 7},
        {lng, sizeof(lng)},
    };
    struct bloom_acc *one = malloc(sizeof(*one)), *two = malloc(sizeof(*two));
    cr_assert(one != NULL && two != NULL);
    bloom_acc_init(one);
    bloom_acc_init(two);
    struct bloom_grams g1, g2;
    bloom_grams_init(&g1);
    bloom_grams_init(&g2);
    cr_assert_eq(bloom_grams_ready(&g1), 0);
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        cr_assert_eq(bloom_acc_body(one, &g1, NULL, in[i].p, in[i].n, 5), 0);
        cr_assert_eq(bloom_acc_tokens(two, in[i].p, in[i].n, 5), 0);
        cr_assert_eq(bloom_grams_add(&g2, in[i].p, in[i].n), 0);
        cr_assert_eq(one->n, two->n, "body %zu: %zu tokens kept, not %zu", i, one->n, two->n);
        cr_assert_eq(bloom_grams_count(&g1), bloom_grams_count(&g2), "body %zu", i);
    }
    for (size_t k = 0; k < one->n; k++) {
        cr_assert_eq(one->h[k], two->h[k], "hash %zu", k);
    }
    /* the tokens hash as the query side hashes them, folded, long ones cut */
    cr_assert_eq(one->h[2], bloom_hash_token("X", 1, 5));
    cr_assert_eq(one->h[6], bloom_hash_token("users", 5, 5));
    cr_assert_eq(one->h[one->n - 2], bloom_hash_token(lng, BLOOM_TOKEN_MAX, 5));
    cr_assert_eq(one->h[one->n - 1], bloom_hash_token(lng + 251, 49, 5));
    /* without a gram set only the tokens are added */
    size_t before = one->n;
    uint64_t grams = bloom_grams_count(&g1);
    cr_assert_eq(bloom_acc_body(one, NULL, NULL, "Zz9 q", 5, 5), 0);
    cr_assert_eq(one->n, before + 2);
    cr_assert_eq(one->h[before], bloom_hash_token("zz9", 3, 5));
    cr_assert_eq(bloom_grams_count(&g1), grams);
    /* the two gram sets drain to the same bloom */
    uint64_t nbits = bloom_nbits_for(grams);
    uint8_t *b1 = calloc(nbits / 8, 1), *b2 = calloc(nbits / 8, 1);
    cr_assert(b1 != NULL && b2 != NULL);
    bloom_grams_drain(&g1, b1, nbits, 3);
    bloom_grams_drain(&g2, b2, nbits, 3);
    cr_assert_eq(memcmp(b1, b2, nbits / 8), 0);
    free(b1);
    free(b2);
    bloom_grams_fini(&g1);
    bloom_grams_fini(&g2);
    bloom_acc_fini(one);
    bloom_acc_fini(two);
    free(one);
    free(two);
}

/* The body pass finds tokens 16 bytes at a time: every byte value, tokens
 * across chunk edges, at the body's ends and runs of every length must give
 * what bloom_next_token and bloom_hash_token give, in the same order. */
Test(bloom, the_chunked_token_pass_equals_the_byte_tokenizer)
{
    struct bloom_acc *got = malloc(sizeof(*got)), *want = malloc(sizeof(*want));
    cr_assert(got != NULL && want != NULL);
    bloom_acc_init(got);
    bloom_acc_init(want);
    char body[200];
    uint64_t s = 12345, tokens = 0;
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(round % 97) + (round % 5 == 0 ? 100 : 0);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(s >> 33);
            /* mostly letters of both cases and digits, every byte value */
            body[i] = r % 4 == 0 ? (char)(r >> 8) : "aZ_9 .Qx-M0"[(r >> 8) % 11];
        }
        if (round < 256) {
            body[round % (n ? n : 1)] = (char)round; /* each byte value once at least */
        }
        bloom_acc_reset(got);
        bloom_acc_reset(want);
        cr_assert_eq(bloom_acc_tokens(got, body, n, 7), 0);
        size_t pos = 0, st, len;
        while (bloom_next_token(body, n, &pos, &st, &len)) {
            cr_assert_eq(bloom_acc_add(want, bloom_hash_token(body + st, len, 7)), 0);
            tokens++;
        }
        cr_assert_eq(got->n, want->n, "round %d: %zu tokens, not %zu", round, got->n, want->n);
        for (size_t k = 0; k < got->n; k++) {
            cr_assert_eq(got->h[k], want->h[k], "round %d token %zu", round, k);
        }
    }
    cr_assert_gt(tokens, 30000);
    /* each of the 256 byte values alone between two tokens */
    for (unsigned c = 0; c < 256; c++) {
        char b[40];
        memset(b, 'k', sizeof(b));
        b[15] = (char)c; /* at a chunk's last byte */
        b[16] = ' ';
        b[31] = (char)c;
        bloom_acc_reset(got);
        bloom_acc_reset(want);
        cr_assert_eq(bloom_acc_tokens(got, b, sizeof(b), 7), 0);
        size_t pos = 0, st, len;
        while (bloom_next_token(b, sizeof(b), &pos, &st, &len)) {
            cr_assert_eq(bloom_acc_add(want, bloom_hash_token(b + st, len, 7)), 0);
        }
        cr_assert_eq(got->n, want->n, "byte %u", c);
        for (size_t k = 0; k < got->n; k++) {
            cr_assert_eq(got->h[k], want->h[k], "byte %u token %zu", c, k);
        }
    }
    bloom_acc_fini(got);
    bloom_acc_fini(want);
    free(got);
    free(want);
}

/* The gram set of bodies of every length 0-100 (each in a buffer of its
 * exact size, so ASan sees a read past it), ASCII with a byte >= 0x80 at
 * some places or none: exactly the reference's set of bloom_gram_of. */
Test(bloom, a_gram_set_is_exactly_the_grams_of_every_offset)
{
    static const char alpha[] = "aZ09_ -./:=x\x7f\x00QqMm@[`{";
    uint64_t *ref = calloc(BLOOM_GRAM_SPACE / 64, sizeof(uint64_t));
    cr_assert(ref != NULL);
    struct bloom_grams g;
    bloom_grams_init(&g);
    cr_assert_eq(bloom_grams_ready(&g), 0);
    uint32_t rnd = 12345;
    for (size_t n = 0; n <= 100; n++) {
        int step = n > 40 ? 7 : 1;
        for (int high = -1; high < (int)n; high += step) {
            char *p = malloc(n ? n : 1);
            cr_assert(p != NULL);
            for (size_t i = 0; i < n; i++) {
                rnd = rnd * 1103515245u + 12345u;
                p[i] = alpha[(rnd >> 16) % (sizeof(alpha) - 1)];
            }
            if (high >= 0) {
                p[high] = (char)(0x80 + (rnd >> 8) % 128);
            }
            uint64_t want = 0;
            for (size_t i = 0; i + 3 <= n; i++) {
                uint32_t gr = bloom_gram_of(p + i);
                want += !(ref[gr >> 6] >> (gr & 63) & 1);
                ref[gr >> 6] |= 1ull << (gr & 63);
            }
            cr_assert_eq(bloom_grams_add(&g, p, n), 0);
            /* as many, and each of the reference's in it: the same set */
            cr_assert_eq(bloom_grams_count(&g), want, "n %zu high %d", n, high);
            for (size_t i = 0; i + 3 <= n; i++) {
                uint32_t gr = bloom_gram_of(p + i);
                cr_assert(g.bits[gr >> 6] >> (gr & 63) & 1, "n %zu high %d at %zu", n, high, i);
                ref[gr >> 6] = 0;
            }
            bloom_grams_drain(&g, NULL, 0, 0);
            free(p);
        }
    }
    bloom_grams_fini(&g);
    free(ref);
}

Test(bloom, a_gram_set_counts_distinct_folded_grams_and_drains_empty)
{
    struct bloom_grams g;
    bloom_grams_init(&g);
    cr_assert_eq(bloom_grams_count(&g), 0);
    cr_assert_eq(bloom_grams_add(&g, "ab", 2), 0); /* no gram */
    cr_assert_eq(bloom_grams_count(&g), 0);
    /* "ABCabc": abc bca cab abc (folded) */
    cr_assert_eq(bloom_grams_add(&g, "ABCabc", 6), 0);
    cr_assert_eq(bloom_grams_count(&g), 3);
    /* bytes past ASCII are not folded: \xc3\x85 (Å) and \xc3\xa5 (å) differ */
    cr_assert_eq(bloom_grams_add(&g, "\xc3\x85x", 3), 0);
    cr_assert_eq(bloom_grams_add(&g, "\xc3\xa5x", 3), 0);
    cr_assert_eq(bloom_grams_add(&g, "\xc3\xa5X", 3), 0); /* same as the last */
    cr_assert_eq(bloom_grams_count(&g), 5);
    /* NUL and 0xff are bytes like any other; the gram space has no hole */
    cr_assert_eq(bloom_grams_add(&g, "\0\0\0\xff\xff\xff", 6), 0);
    cr_assert_eq(bloom_grams_count(&g), 9); /* 000 00X 0XX XXX */

    uint64_t nbits = bloom_nbits_for(9);
    uint8_t *bits = calloc(nbits / 8, 1);
    cr_assert_not_null(bits);
    bloom_grams_drain(&g, bits, nbits, 11);
    cr_assert_eq(bloom_grams_count(&g), 0, "drained");
    const char *in[] = {"abc", "BCA", "cAb", "\xc3\x85x", "\xc3\xa5x", "\xff\xff\xff", "\0\0\xff"};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        cr_assert(bloom_test(bits, nbits, bloom_hash_gram(bloom_gram_of(in[i]), 11)), "gram %zu",
                  i);
    }
    cr_assert_eq(bloom_gram_of("AbC"), bloom_gram_of("aBc"));
    cr_assert_eq(bloom_gram_of("aBc"), ('a' << 14) | ('b' << 7) | 'c');
    /* bytes past ASCII take the codes upper case letters left free */
    cr_assert_eq(bloom_gram_byte(0x80), 'A');
    cr_assert_eq(bloom_gram_byte(0xff), 'A' + 127 % 26);
    cr_assert_eq(bloom_gram_byte('Z'), 'z');
    cr_assert_eq(bloom_gram_byte('~'), '~');
    cr_assert_neq(bloom_hash_gram(bloom_gram_of("abc"), 11),
                  bloom_hash_gram(bloom_gram_of("abc"), 12));
    /* refilled after the drain: only the new grams */
    cr_assert_eq(bloom_grams_add(&g, "xyzxyz", 6), 0);
    cr_assert_eq(bloom_grams_count(&g), 3);
    bloom_grams_drain(&g, NULL, 0, 0);
    cr_assert_eq(bloom_grams_count(&g), 0);
    free(bits);
    bloom_grams_fini(&g);
    bloom_grams_fini(&g); /* twice is fine */
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct kept hashes of |a|, sorted, into |out| (room for a->n). */
static size_t distinct_hashes(const struct bloom_acc *a, uint64_t *out)
{
    memcpy(out, a->h, a->n * sizeof(*out));
    qsort(out, a->n, sizeof(*out), cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < a->n; i++) {
        if (m == 0 || out[m - 1] != out[i]) {
            out[m++] = out[i];
        }
    }
    return m;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Appends to b[*n] (room for 400) one adversarial body: vocabulary words
 * in random case (repeats), numbers, tokens around the cache's 16-byte cap
 * and over BLOOM_TOKEN_MAX, UTF-8 and other bytes, random separators; or
 * an empty body; lengths near the 64-byte chunks. */
static size_t adversarial_body(uint64_t *s, char *b, int round)
{
    static const char *const words[] = {
        "timeout",          "error", "GET",    "user_id", "a",   "x9",
        "Connection",       "pool",  "SELECT", "ab",      "req", "sixteen_bytes_16",
        "seventeen_bytes17"};
    size_t cap = (size_t)(round % 7 == 0 ? 0 : round % 5 == 0 ? 60 + lcg(s) % 10 : lcg(s) % 390);
    size_t n = 0;
    while (n < cap) {
        unsigned r = (unsigned)lcg(s);
        char tok[220];
        size_t tn = 0;
        switch (r % 8) {
        case 0:
        case 1:
        case 2: { /* a vocabulary word, each letter's case random */
            const char *w = words[(r >> 3) % (sizeof(words) / sizeof(words[0]))];
            for (tn = 0; w[tn] != '\0'; tn++) {
                char c = w[tn];
                tok[tn] = (lcg(s) & 1) && c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
            }
            break;
        }
        case 3: /* a number, often repeated */
            tn = (size_t)snprintf(tok, sizeof(tok), "%u", (r >> 3) % 300);
            break;
        case 4: /* 14 to 18 bytes: around the cache's cap */
            tn = 14 + (r >> 3) % 5;
            for (size_t i = 0; i < tn; i++) {
                tok[i] = "aB_7qZ"[(r >> (i % 20)) % 6];
            }
            break;
        case 5: /* over BLOOM_TOKEN_MAX now and then, else a fresh token */
            tn = (r >> 3) % 16 == 0 ? 129 + (r >> 7) % 80 : 1 + (r >> 3) % 12;
            for (size_t i = 0; i < tn; i++) {
                tok[i] = "abcXYZ019_"[lcg(s) % 10];
            }
            break;
        case 6: /* UTF-8 and other non-token bytes */
            tn = 1 + (r >> 3) % 4;
            for (size_t i = 0; i < tn; i++) {
                tok[i] = "\xc3\xa9\xe2\x82\xac\x01\x7f\xff"[lcg(s) % 8];
            }
            break;
        default: /* separators */
            tn = 1 + (r >> 3) % 3;
            for (size_t i = 0; i < tn; i++) {
                tok[i] = " .=:-/\t,"[lcg(s) % 8];
            }
        }
        if (n + tn > 390) {
            break;
        }
        memcpy(b + n, tok, tn);
        n += tn;
        if (r % 3 != 0 && n < 390) {
            b[n++] = ' ';
        }
    }
    return n;
}

/*
 * The token cache drops repeats only: over adversarial bodies (each in a
 * buffer of its exact size, so a read past a body's end is a sanitizer
 * failure), the distinct token hashes and the gram set equal the plain
 * tokenizer's and the plain gram pass's, block after block (both reset),
 * while fewer hashes are kept (the plain pass drops only the repeats of
 * the accumulator's recent table). More distinct short tokens than the cache
 * has slots evict one another.
 */
Test(bloom, the_token_cache_keeps_every_distinct_token_and_drops_only_repeats)
{
    struct bloom_acc *got = malloc(sizeof(*got)), *want = malloc(sizeof(*want));
    struct bloom_tokc *c = malloc(sizeof(*c));
    cr_assert(got != NULL && want != NULL && c != NULL);
    bloom_acc_init(got);
    bloom_acc_init(want);
    struct bloom_grams g1, g2;
    bloom_grams_init(&g1);
    bloom_grams_init(&g2);
    cr_assert_eq(bloom_grams_ready(&g1), 0);
    uint64_t s = 99;
    for (int blkn = 0; blkn < 3; blkn++) {
        bloom_acc_reset(got);
        bloom_acc_reset(want);
        bloom_tokc_reset(c);
        for (int round = 0; round < 1500; round++) {
            char tmp[400];
            size_t n = adversarial_body(&s, tmp, round);
            if (round < 256 && n > 0) {
                tmp[(size_t)round % n] = (char)round; /* every byte value */
            }
            if (round % 3 == 1) { /* 3,000 distinct short tokens: evictions */
                n = (size_t)snprintf(tmp, sizeof(tmp), "k%dq%d Z%d", blkn, round, round);
            }
            char *body = malloc(n ? n : 1);
            cr_assert_not_null(body);
            memcpy(body, tmp, n);
            cr_assert_eq(bloom_acc_body(got, &g1, c, body, n, 7), 0);
            size_t pos = 0, st, len;
            while (bloom_next_token(body, n, &pos, &st, &len)) {
                cr_assert_eq(bloom_acc_add(want, bloom_hash_token(body + st, len, 7)), 0);
            }
            cr_assert_eq(bloom_grams_add(&g2, body, n), 0);
            free(body);
        }
        uint64_t *hg = malloc(got->n * sizeof(*hg) + 8), *hw = malloc(want->n * sizeof(*hw) + 8);
        cr_assert(hg != NULL && hw != NULL);
        size_t ng = distinct_hashes(got, hg), nw = distinct_hashes(want, hw);
        cr_assert_eq(ng, nw, "block %d: %zu distinct tokens, not %zu", blkn, ng, nw);
        cr_assert_eq(memcmp(hg, hw, ng * sizeof(*hg)), 0, "block %d", blkn);
        cr_assert_gt(nw, 5000, "block %d: %zu distinct", blkn, nw);
        cr_assert_lt(got->n, want->n, "block %d: kept %zu of %zu", blkn, got->n, want->n);
        free(hg);
        free(hw);
        uint64_t grams = bloom_grams_count(&g2);
        cr_assert_eq(bloom_grams_count(&g1), grams, "block %d", blkn);
        uint64_t nbits = bloom_nbits_for(grams);
        uint8_t *b1 = calloc(nbits / 8, 1), *b2 = calloc(nbits / 8, 1);
        cr_assert(b1 != NULL && b2 != NULL);
        bloom_grams_drain(&g1, b1, nbits, 3);
        bloom_grams_drain(&g2, b2, nbits, 3);
        cr_assert_eq(memcmp(b1, b2, nbits / 8), 0, "block %d", blkn);
        free(b1);
        free(b2);
    }
    bloom_grams_fini(&g1);
    bloom_grams_fini(&g2);
    bloom_acc_fini(got);
    bloom_acc_fini(want);
    free(got);
    free(want);
    free(c);
}

/* Tokens across the 64-byte chunks of the token pass: a token of every
 * length from 1 to 80 at every offset from 0 to 70 of a body of every
 * length up to 140, with and without the cache, gives the plain
 * tokenizer's hashes in order (without) and its set (with). Offsets 960 to
 * 1040 too: bodies on both sides of the length the pass copies (1,024). */
Test(bloom, tokens_across_64_byte_chunks_and_body_ends)
{
    struct bloom_acc *got = malloc(sizeof(*got)), *want = malloc(sizeof(*want));
    struct bloom_acc *cached = malloc(sizeof(*cached));
    struct bloom_tokc *c = malloc(sizeof(*c));
    cr_assert(got != NULL && want != NULL && cached != NULL && c != NULL);
    bloom_acc_init(got);
    bloom_acc_init(want);
    bloom_acc_init(cached);
    uint64_t checked = 0;
    for (size_t len = 1; len <= 80; len += (len < 20 ? 1 : 7)) {
        for (size_t at = 0; at <= 1040; at = at == 70 ? 960 : at + 1) {
            size_t n = at + len + (at + len) % 3; /* ends at, 1 or 2 past the token */
            char *b = malloc(n + 1);
            cr_assert_not_null(b);
            for (size_t i = 0; i < n; i++) {
                b[i] =
                    i < at || i >= at + len ? (i % 5 == 0 ? 'w' : '-') : "Tq_8x"[(i * 7 + len) % 5];
            }
            bloom_acc_reset(got);
            bloom_acc_reset(want);
            bloom_acc_reset(cached);
            bloom_tokc_reset(c);
            cr_assert_eq(bloom_acc_tokens(got, b, n, 11), 0);
            cr_assert_eq(bloom_acc_body(cached, NULL, c, b, n, 11), 0);
            /* again: adds nothing (the short tokens are cache hits, the long
             * ones the accumulator's recent repeats) */
            size_t first = cached->n;
            cr_assert_eq(bloom_acc_body(cached, NULL, c, b, n, 11), 0);
            size_t pos = 0, st, tl;
            while (bloom_next_token(b, n, &pos, &st, &tl)) {
                cr_assert_eq(bloom_acc_add(want, bloom_hash_token(b + st, tl, 11)), 0);
            }
            cr_assert_eq(got->n, want->n, "len %zu at %zu", len, at);
            for (size_t k = 0; k < got->n; k++) {
                cr_assert_eq(got->h[k], want->h[k], "len %zu at %zu token %zu", len, at, k);
            }
            uint64_t hc[64], hw[64];
            cr_assert_leq(want->n, 64);
            cr_assert_eq(cached->n, first, "len %zu at %zu: repeats kept", len, at);
            size_t nc = distinct_hashes(cached, hc), nw = distinct_hashes(want, hw);
            cr_assert_eq(nc, nw, "len %zu at %zu", len, at);
            cr_assert_eq(memcmp(hc, hw, nc * sizeof(hc[0])), 0, "len %zu at %zu", len, at);
            free(b);
            checked++;
        }
    }
    cr_assert_gt(checked, 3000);
    bloom_acc_fini(got);
    bloom_acc_fini(want);
    bloom_acc_fini(cached);
    free(got);
    free(want);
    free(cached);
    free(c);
}
