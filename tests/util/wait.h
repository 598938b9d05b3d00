/*
 * wait.h - bounded waits for tests that watch another thread: a wait for
 * a counter another thread raises under a mutex. Never a fixed sleep: the wait ends as soon as the
 * counter gets there.
 */
#ifndef MIRADB_WAIT_H
#define MIRADB_WAIT_H

#include <pthread.h>
#include <stdint.h>

/*
 * Waits until *counter >= want or |timeout_ns| passed, whichever comes
 * first. |counter| is written under |mu| by a thread that broadcasts |cv|
 * after each change. Returns the count seen last.
 */
int wait_counter(pthread_mutex_t *mu, pthread_cond_t *cv, const int *counter, int want,
                 uint64_t timeout_ns);

#endif
