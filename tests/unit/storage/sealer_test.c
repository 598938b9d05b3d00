/*
 * sealer_test.c - a seal that keeps failing (issue 9, findings 4 and 5):
 * every failed attempt reaches the failure hook with its step and errno,
 * and sealer_give_up_at ends the retries so a shutdown cannot wait on it.
 *
 * The block's directory does not exist, so blk_write fails with ENOENT on
 * every attempt, the way a full disk makes it fail with ENOSPC.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/sealer.h"
#include "tests/util/tmpdir.h"
#include "tests/util/tclock.h"
#include "tests/util/wait.h"

static char dir[256];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct seal_failure seen[32];
static int n_seen;
static int n_sealed;
static int sealed_rc[4];

static void on_failure(const struct seal_failure *f)
{
    pthread_mutex_lock(&mu);
    if (n_seen < 32) {
        seen[n_seen++] = *f;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void on_sealed(struct seal_job *j, int rc)
{
    pthread_mutex_lock(&mu);
    if (n_sealed < 4) {
        sealed_rc[n_sealed] = rc;
    }
    n_sealed++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    free(j);
}

/* Waits up to 10 s for *counter >= want; returns the count seen. */
static int wait_for(const int *counter, int want)
{
    return wait_counter(&mu, &cv, counter, want, 10000000000ull);
}

static struct seal_job *job_for(void *owner, uint64_t seal_id)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    struct cat_open *h = catalog_open_add(SIG_LOGS, ob);
    cr_assert_not_null(h);
    struct seal_job *j = calloc(1, sizeof(*j));
    cr_assert_not_null(j);
    j->h = h;
    j->meta.shard = 3;
    j->meta.seal_id = seal_id;
    snprintf(j->dir, sizeof(j->dir), "%s/missing/logs", dir);
    j->sealed = on_sealed;
    j->owner = owner;
    return j;
}

static void setup(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    sealer_set_failure_hook(on_failure);
    cr_assert_eq(sealer_start(0, 0), 0);
}

TestSuite(sealer, .init = setup);

Test(sealer, every_failed_attempt_is_reported_and_give_up_at_ends_the_retries)
{
    int owner;
    sealer_submit_take(job_for(&owner, 7));
    cr_assert_geq(wait_for(&n_seen, 1), 1, "no failure reported");
    pthread_mutex_lock(&mu);
    struct seal_failure f = seen[0];
    int sealed = n_sealed;
    pthread_mutex_unlock(&mu);
    cr_expect_eq(f.attempt, 1);
    cr_expect_str_eq(f.step, "write");
    cr_expect_eq(f.error, -ENOENT, "error %d", f.error);
    cr_expect_eq(f.signal, SIG_LOGS);
    cr_expect_eq(f.shard, 3);
    cr_expect_eq(f.seal_id, 7);
    cr_expect_eq(f.retry_in_s, 1, "first pause %d s", f.retry_in_s);
    cr_expect(strstr(f.path, "/missing/logs/s0003-") != NULL, "path %s", f.path);
    cr_expect_eq(sealed, 0, "a failing seal is retried, not ended");

    /* A later block of the same shard waits behind the failing one. */
    sealer_submit_take(job_for(&owner, 8));

    /* The shutdown deadline: the pause ends, one more attempt fails and is
     * the last; the block behind it is cancelled without an attempt. */
    sealer_give_up_at(tclock_ns());
    cr_assert_eq(wait_for(&n_sealed, 2), 2, "the failing seal was not given up");
    pthread_mutex_lock(&mu);
    cr_expect_eq(sealed_rc[0], -ENOENT, "given-up seal rc %d", sealed_rc[0]);
    cr_expect_eq(sealed_rc[1], -ECANCELED, "block behind it rc %d", sealed_rc[1]);
    int n = n_seen;
    struct seal_failure last = seen[n - 1];
    pthread_mutex_unlock(&mu);
    cr_expect_eq(last.retry_in_s, -1, "the last report says it was given up");
    cr_expect_eq(last.seal_id, 7, "only the failing block is reported");
    cr_expect_eq(last.attempt, (unsigned)n);

    struct sealer_stats st;
    sealer_get_stats(&st);
    cr_expect_eq(st.seal_failures, (uint64_t)n, "%llu failures counted, %d reported",
                 (unsigned long long)st.seal_failures, n);
    cr_expect_eq(st.seals_abandoned, 2);
    cr_expect_eq(st.seals, 0);
    sealer_stop();
    catalog_fini();
}
