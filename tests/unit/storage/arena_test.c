#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "storage/arena.h"
#include "storage/batch.h"

Test(arena, allocations_are_aligned_distinct_and_survive_until_reset)
{
    arena *a = arena_new(4096);
    char *p[200];
    for (int i = 0; i < 200; i++) {
        p[i] = arena_alloc(a, (size_t)(i % 37) + 1);
        cr_assert_not_null(p[i]);
        cr_assert_eq((uintptr_t)p[i] % 16, 0);
        memset(p[i], i, (size_t)(i % 37) + 1);
    }
    char *big = arena_alloc(a, 100000); /* own chunk */
    cr_assert_not_null(big);
    memset(big, 0xab, 100000);
    for (int i = 0; i < 200; i++) {
        for (int j = 0; j < i % 37 + 1; j++) {
            cr_assert_eq((unsigned char)p[i][j], (unsigned char)i);
        }
    }
    size_t before = arena_footprint(a);
    cr_assert_gt(before, 100000);
    arena_reset(a);
    cr_assert_lt(arena_footprint(a), 8192, "reset keeps one regular chunk only");
    char *s = arena_strndup(a, "abc", 2);
    cr_assert_str_eq(s, "ab");
    arena_free(a);
}

Test(arena, limit_refuses_growth_past_it)
{
    arena *a = arena_new(4096);
    arena_set_limit(a, 3 * 4096);
    int got = 0;
    while (arena_alloc(a, 1000) != NULL) {
        got++;
        cr_assert_lt(got, 100);
    }
    cr_assert_leq(arena_footprint(a), 3 * 4096);
    cr_assert_geq(got, 6);
    arena_free(a);
}

Test(batch, rows_grow_and_reset_keeps_capacity)
{
    struct batch *b = batch_new(SIG_LOGS);
    for (int i = 0; i < 1000; i++) {
        struct log_row *r = batch_add_log(b);
        cr_assert_not_null(r);
        cr_assert_eq(r->time_ns, 0);
        r->time_ns = (uint64_t)i;
    }
    cr_assert_eq(b->n_rows, 1000);
    cr_assert_eq(b->logs[999].time_ns, 999);
    size_t fp = batch_footprint(b);
    batch_reset(b, SIG_LOGS);
    cr_assert_eq(b->n_rows, 0);
    cr_assert_eq(batch_footprint(b), fp, "capacity kept across a reset");
    batch_reset(b, SIG_TRACES);
    cr_assert_leq(batch_footprint(b), fp, "row capacity rescaled to the new row size");
    cr_assert_gt(batch_footprint(b) + sizeof(struct span_row), fp);
    for (int i = 0; i < 100; i++) {
        cr_assert_not_null(batch_add_span(b));
    }
    batch_reject(b, 2, "first");
    batch_reject(b, 3, "second");
    cr_assert_eq(b->rejected, 5);
    cr_assert_str_eq(b->reject_msg, "first");
    batch_free(b);
}
