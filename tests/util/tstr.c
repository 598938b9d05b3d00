#include "tests/util/tstr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void tstr_add(struct tstr *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(s->p ? s->p + s->n : NULL, s->p ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            abort();
        }
        if (s->p != NULL && s->n + (size_t)k < s->cap) {
            s->n += (size_t)k;
            return;
        }
        s->cap = (s->cap + (size_t)k + 1) * 2;
        s->p = realloc(s->p, s->cap);
        if (s->p == NULL) {
            abort();
        }
    }
}
