/*
 * diskfree.c - the free-space watch (see diskfree.h).
 */
#include "storage/diskfree.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "lib/clock.h"

#define HYSTERESIS_MIN (1u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool started, stopping, kicked;
static char *dir;
static diskfree_fn hook;
static uint64_t min_free;
/* Read by other threads with atomics. */
static bool low;
static uint64_t free_bytes, refusals, checks;

/* One statvfs; sets the flag and calls the hook when it changes. */
static void check(void)
{
    struct statvfs v;
    __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
    if (statvfs(dir, &v) < 0) {
        return; /* keeps the last state: a failing statvfs is no news of space */
    }
    uint64_t f = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
    __atomic_store_n(&free_bytes, f, __ATOMIC_RELAXED);
    uint64_t margin = min_free / 16 > HYSTERESIS_MIN ? min_free / 16 : HYSTERESIS_MIN;
    bool was = __atomic_load_n(&low, __ATOMIC_RELAXED);
    bool now = min_free != 0 && (was ? f < min_free + margin : f < min_free);
    if (now != was) {
        __atomic_store_n(&low, now, __ATOMIC_RELEASE);
        if (hook != NULL) {
            hook(now, f, min_free);
        }
    }
}

static void *run(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        uint64_t until = clock_mono_ns() + (uint64_t)DISKFREE_EVERY_MS * 1000000u;
        while (!stopping && !kicked && clock_mono_ns() < until) {
            struct timespec dl = clock_after(CLOCK_REALTIME, until - clock_mono_ns());
            pthread_cond_timedwait(&wake, &lock, &dl);
        }
        if (stopping) {
            break;
        }
        kicked = false;
        pthread_mutex_unlock(&lock);
        check();
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int diskfree_start(const char *d, uint64_t min, diskfree_fn h)
{
    min_free = min;
    __atomic_store_n(&low, false, __ATOMIC_RELAXED);
    dir = strdup(d);
    if (dir == NULL) {
        return -ENOMEM;
    }
    hook = h;
    stopping = kicked = false;
    check();
    int rc = pthread_create(&thread, NULL, run, NULL);
    if (rc != 0) {
        free(dir);
        dir = NULL;
        return -rc;
    }
    started = true;
    return 0;
}

void diskfree_stop(void)
{
    if (started) {
        pthread_mutex_lock(&lock);
        stopping = true;
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&lock);
        pthread_join(thread, NULL);
        started = false;
    }
    free(dir);
    dir = NULL;
    hook = NULL;
}

bool diskfree_low(void)
{
    return __atomic_load_n(&low, __ATOMIC_ACQUIRE);
}

void diskfree_refused(void)
{
    __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
}

void diskfree_kick(void)
{
    pthread_mutex_lock(&lock);
    kicked = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
}

void diskfree_get_stats(struct diskfree_stats *out)
{
    out->free_bytes = __atomic_load_n(&free_bytes, __ATOMIC_RELAXED);
    out->min_free = min_free;
    out->refusals = __atomic_load_n(&refusals, __ATOMIC_RELAXED);
    out->checks = __atomic_load_n(&checks, __ATOMIC_RELAXED);
    out->low = diskfree_low();
}
