/*
 * wait.c - bounded waits for tests (see wait.h).
 */
#include "tests/util/wait.h"

#include <time.h>

#include "tests/util/tclock.h"

int wait_counter(pthread_mutex_t *mu, pthread_cond_t *cv, const int *counter, int want,
                 uint64_t timeout_ns)
{
    uint64_t deadline = tclock_ns() + timeout_ns;
    pthread_mutex_lock(mu);
    while (*counter < want && tclock_ns() < deadline) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 20000000; /* look again every 20 ms at most */
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(cv, mu, &dl);
    }
    int n = *counter;
    pthread_mutex_unlock(mu);
    return n;
}
