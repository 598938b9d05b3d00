/*
 * tstr.h - a growable NUL-terminated string for tests that build long
 * queries and bodies. Out of memory aborts the test process.
 */
#ifndef MIRADB_TEST_TSTR_H
#define MIRADB_TEST_TSTR_H

#include <stddef.h>

struct tstr {
    char *p; /* owned; free() it; NULL until the first add */
    size_t n, cap;
};

/* Appends printf-style text to |s|. */
void tstr_add(struct tstr *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
