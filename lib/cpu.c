/*
 * cpu.c - cpu_avx2 (cpu.h).
 */
#include "lib/cpu.h"

#include <stdatomic.h>

bool cpu_avx2(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* every thread that finds it unset stores the same answer */
    static _Atomic int have = -1;
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h == 1;
#else
    return false;
#endif
}
