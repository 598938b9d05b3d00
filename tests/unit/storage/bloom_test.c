/*
 * bloom_test.c - bloom filters and the body tokenizer (storage/bloom.c).
 */
#include <criterion/criterion.h>

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

Test(bloom, a_filter_has_no_false_negatives_and_about_one_percent_false_positives)
{
    struct bloom_set s;
    bloom_set_init(&s);
    const size_t n = 20000;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(bloom_set_add(&s, bloom_hash_bytes(&i, sizeof(i), 3)), 0);
        cr_assert_eq(bloom_set_add(&s, bloom_hash_bytes(&i, sizeof(i), 3)), 0); /* dup */
    }
    cr_assert_eq(bloom_set_add(&s, 0), 0);
    cr_assert_eq(bloom_set_count(&s), n + 1);
    uint64_t nbits = bloom_nbits_for(bloom_set_count(&s));
    cr_assert_eq(nbits % 64, 0);
    cr_assert_geq(nbits, (n + 1) * BLOOM_BITS_PER_ITEM);
    uint8_t *bits = calloc(nbits / 8, 1);
    cr_assert_not_null(bits);
    bloom_fill(bits, nbits, BLOOM_K, &s);
    for (size_t i = 0; i < n; i++) {
        cr_assert(bloom_test(bits, nbits, BLOOM_K, bloom_hash_bytes(&i, sizeof(i), 3)));
    }
    cr_assert(bloom_test(bits, nbits, BLOOM_K, 0));
    size_t fp = 0;
    for (size_t i = n; i < n + 100000; i++) {
        fp += bloom_test(bits, nbits, BLOOM_K, bloom_hash_bytes(&i, sizeof(i), 3));
    }
    cr_assert_lt(fp, 2000, "%zu false positives in 100000", fp); /* ~1% expected */
    cr_assert_gt(fp, 100);                                       /* and it is a bloom */
    free(bits);
    bloom_set_fini(&s);
    cr_assert_eq(bloom_nbits_for(0), 64);
    cr_assert_eq(bloom_nbits_for(SIZE_MAX / 16), BLOOM_MAX_BITS);
}
