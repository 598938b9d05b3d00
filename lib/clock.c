/*
 * clock.c - absolute deadlines (see clock.h).
 */
#include "lib/clock.h"

struct timespec clock_after(clockid_t c, uint64_t ns)
{
    struct timespec t;
    clock_gettime(c, &t);
    t.tv_sec += (time_t)(ns / 1000000000u);
    t.tv_nsec += (long)(ns % 1000000000u);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
