/*
 * tclock.h - the monotonic clock and sleeps of the tests (deadlines and
 * polling, never a timing assertion of speed).
 */
#ifndef MIRADB_TEST_TCLOCK_H
#define MIRADB_TEST_TCLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds, and in nanoseconds. */
long long tclock_ms(void);
uint64_t tclock_ns(void);
/* Sleeps |ms| milliseconds, through EINTR. */
void tclock_nap_ms(long ms);

#endif
