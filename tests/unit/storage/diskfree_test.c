/*
 * diskfree_test.c - storage/diskfree.c: the low-space flag and its hook
 * against the real filesystem of a temporary directory (a minimum above
 * any disk sets it at start, a minimum of 0 never does), the free bytes as
 * statvfs says, and a kick that makes the watch check at once.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "storage/diskfree.h"
#include "tests/util/tclock.h"
#include "tests/util/tmpdir.h"

static int calls;
static bool last_low;
static uint64_t last_free, last_min;

static void hook(bool low, uint64_t free_bytes, uint64_t min_free)
{
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    last_low = low;
    last_free = free_bytes;
    last_min = min_free;
}

static char dir[256];

static void fresh(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    calls = 0;
}

TestSuite(diskfree, .init = fresh);

static uint64_t statvfs_free(void)
{
    struct statvfs v;
    cr_assert_eq(statvfs(dir, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

Test(diskfree, a_minimum_above_the_disk_sets_the_flag_at_start_and_calls_the_hook_once)
{
    const uint64_t min = 1ull << 60; /* an exabyte: more than any test machine has */
    cr_assert_eq(diskfree_start(dir, min, hook), 0);
    cr_expect(diskfree_low());
    cr_expect_eq(calls, 1);
    cr_expect(last_low);
    cr_expect_eq(last_min, min);
    cr_expect_gt(last_free, 0);
    diskfree_refused();
    diskfree_refused();
    struct diskfree_stats st;
    diskfree_get_stats(&st);
    cr_expect(st.low);
    cr_expect_eq(st.min_free, min);
    cr_expect_eq(st.refusals, 2);
    /* Still low at the next checks: no second call. */
    uint64_t checks = st.checks;
    diskfree_kick();
    long long deadline = tclock_ms() + 10000;
    while (st.checks == checks && tclock_ms() < deadline) {
        tclock_nap_ms(5);
        diskfree_get_stats(&st);
    }
    cr_expect_gt(st.checks, checks, "a kick did not make a check within 10 s");
    cr_expect_eq(calls, 1);
    diskfree_stop();
}

Test(diskfree, a_minimum_of_zero_never_sets_the_flag_but_the_free_bytes_are_watched)
{
    cr_assert_eq(diskfree_start(dir, 0, hook), 0);
    cr_expect_not(diskfree_low());
    struct diskfree_stats st;
    diskfree_get_stats(&st);
    uint64_t f = statvfs_free();
    /* Other processes write to the same disk: within 1 GiB of statvfs. */
    cr_expect(st.free_bytes + (1ull << 30) > f && st.free_bytes < f + (1ull << 30),
              "free_bytes %llu, statvfs %llu", (unsigned long long)st.free_bytes,
              (unsigned long long)f);
    cr_expect_eq(st.min_free, 0);
    cr_expect_eq(st.checks, 1);
    cr_expect_eq(calls, 0);
    diskfree_stop();
}

Test(diskfree, a_directory_that_does_not_exist_keeps_the_flag_clear)
{
    char missing[300];
    snprintf(missing, sizeof(missing), "%s/none", dir);
    cr_assert_eq(diskfree_start(missing, 1ull << 60, hook), 0);
    cr_expect_not(diskfree_low(), "a failing statvfs is no news of space");
    cr_expect_eq(calls, 0);
    diskfree_stop();
}
