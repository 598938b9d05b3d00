/*
 * vcache_test.c - the verification cache (storage/vcache.c): keys match on
 * every part, the settle window decides what is stored and trusted, and a
 * full cache is cleared wholesale and counted.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <time.h>

#include "storage/vcache.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static struct vcache_stats vstats(void)
{
    struct vcache_stats s;
    vcache_get_stats(&s);
    return s;
}

Test(vcache, a_key_matches_only_on_device_inode_length_mtime_and_table)
{
    int64_t old = now_ns() - 60 * 1000000000ll;
    struct vcache_key k = {.dev = 1, .ino = 2, .size = 3, .mtime_ns = old, .table = 0};
    cr_assert_not(vcache_lookup(&k));
    vcache_insert(&k);
    vcache_insert(&k); /* twice: still one entry */
    cr_assert_eq(vcache_size(), 1);
    cr_assert(vcache_lookup(&k));
    struct vcache_key v[5] = {k, k, k, k, k};
    v[0].dev++;
    v[1].ino++;
    v[2].size++;
    v[3].mtime_ns++;
    v[4].table = UINT32_MAX;
    for (int i = 0; i < 5; i++) {
        cr_assert_not(vcache_lookup(&v[i]), "variant %d matched", i);
    }
    struct vcache_stats s = vstats();
    cr_assert_eq(s.hits, 1);
    cr_assert_eq(s.misses, 6);
    cr_assert_eq(s.clears, 0);
}

Test(vcache, a_file_younger_than_the_settle_window_is_neither_stored_nor_trusted)
{
    struct vcache_key k = {.dev = 1, .ino = 9, .size = 100, .mtime_ns = now_ns(), .table = 1};
    vcache_insert(&k);
    cr_assert_eq(vcache_size(), 0);
    cr_assert_not(vcache_lookup(&k));

    /* With no window the same key is stored and trusted at once. */
    vcache_set_settle_ns(0);
    vcache_insert(&k);
    cr_assert_eq(vcache_size(), 1);
    cr_assert(vcache_lookup(&k));
    /* Back to the default window: the entry is there but not trusted. */
    vcache_set_settle_ns(-1);
    cr_assert_not(vcache_lookup(&k));
    /* An mtime in the future never settles. */
    struct vcache_key f = k;
    f.mtime_ns = now_ns() + 3600 * 1000000000ll;
    vcache_insert(&f);
    cr_assert_not(vcache_lookup(&f));
    cr_assert_eq(vcache_size(), 1);
}

Test(vcache, a_full_cache_is_cleared_wholesale_and_counted)
{
    int64_t old = now_ns() - 60 * 1000000000ll;
    struct vcache_key k = {.dev = 7, .ino = 0, .size = 4096, .mtime_ns = old, .table = 0};
    for (uint32_t i = 0; i < VCACHE_CAP; i++) {
        k.ino = 1000 + i / 3;
        k.table = i % 3;
        vcache_insert(&k);
    }
    cr_assert_eq(vcache_size(), VCACHE_CAP);
    cr_assert_eq(vstats().clears, 0);
    struct vcache_key first = {.dev = 7, .ino = 1000, .size = 4096, .mtime_ns = old, .table = 0};
    cr_assert(vcache_lookup(&first));
    struct vcache_key last = k;
    cr_assert(vcache_lookup(&last));

    struct vcache_key more = k;
    more.ino = 1;
    vcache_insert(&more);
    cr_assert_eq(vstats().clears, 1);
    cr_assert_eq(vcache_size(), 1);
    cr_assert_not(vcache_lookup(&first));
    cr_assert_not(vcache_lookup(&last));
    cr_assert(vcache_lookup(&more));
}
