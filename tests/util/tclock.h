/*
 * tclock.h - the monotonic clock and sleeps of the tests (deadlines and
 * polling, never a timing assertion of speed).
 */
#ifndef MIRADB_TEST_TCLOCK_H
#define MIRADB_TEST_TCLOCK_H

/* CLOCK_MONOTONIC in milliseconds. */
long long tclock_ms(void);
/* Sleeps |ms| milliseconds, through EINTR. */
void tclock_nap_ms(long ms);

#endif
