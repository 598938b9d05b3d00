/*
 * cpu.h - what this CPU can run beyond the build's baseline (x86-64 with
 * SSE2): asked once, the answer kept. Code compiled for a wider target
 * with __attribute__((target(...))) is called only when this says so.
 * Callable from any thread.
 */
#ifndef MIRADB_LIB_CPU_H
#define MIRADB_LIB_CPU_H

#include <stdbool.h>

/* Whether AVX2 instructions may run here (false off x86-64 GCC builds). */
bool cpu_avx2(void);

#endif
