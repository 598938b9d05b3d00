/*
 * clock.h - the two clocks the daemon reads, in nanoseconds, and absolute
 * deadlines for timed waits.
 *
 * clock_mono_ns() is CLOCK_MONOTONIC: durations, deadlines, ages (never
 * jumps). clock_wall_ns() is CLOCK_REALTIME: timestamps that leave the
 * process (Unix ns). Both are static inline: a query checks its deadline
 * per row batch. Callable from any thread.
 */
#ifndef MIRADB_LIB_CLOCK_H
#define MIRADB_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t clock_wall_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

/* Clock |c| now plus |ns|, as the absolute time pthread_cond_timedwait and
 * sigtimedwait-style deadlines take (a condition variable without
 * pthread_condattr_setclock waits on CLOCK_REALTIME). */
struct timespec clock_after(clockid_t c, uint64_t ns);

#endif
