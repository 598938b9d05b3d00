/*
 * fuzz_decomp.c - libFuzzer target for lib/decomp.c, the gzip / zstd body
 * decoder every compressed export and every compressed WAL frame goes
 * through.
 *
 * Byte 0 picks the coding (odd: gzip, even: zstd); the rest is the body,
 * decoded under a 1 MiB limit. The result must be 0, -E2BIG or -EBADMSG,
 * never more than the limit written. What decodes must decode again to the
 * same bytes under a limit of exactly its length, and be refused (-E2BIG)
 * under one byte less: the cap holds to the byte on any input. Seeds:
 * tests/fuzz/corpus/decomp/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/decomp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT (1u << 20)

static int grow(struct decomp_out *o, size_t cap, void *arg)
{
    (void)arg;
    if (cap > LIMIT) {
        abort(); /* decomp asked past its limit */
    }
    uint8_t *p = realloc(o->p, cap);
    if (p == NULL) {
        return -ENOMEM;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct decomp *d;
    if (d == NULL && (d = decomp_new()) == NULL) {
        abort();
    }
    if (size == 0) {
        return 0;
    }
    enum decomp_coding k = (data[0] & 1) ? DECOMP_GZIP : DECOMP_ZSTD;
    struct decomp_out o = {NULL, 0, 0, grow, NULL};
    int rc = decomp_all(d, k, data + 1, size - 1, LIMIT, &o);
    if (rc != 0 && rc != -E2BIG && rc != -EBADMSG) {
        abort();
    }
    if (o.len > LIMIT || o.len > o.cap) {
        abort();
    }
    if (rc == 0) {
        struct decomp_out again = {NULL, 0, 0, grow, NULL};
        if (decomp_all(d, k, data + 1, size - 1, o.len, &again) != 0 || again.len != o.len ||
            (o.len > 0 && memcmp(again.p, o.p, o.len) != 0)) {
            abort();
        }
        free(again.p);
        if (o.len > 0) {
            struct decomp_out less = {NULL, 0, 0, grow, NULL};
            if (decomp_all(d, k, data + 1, size - 1, o.len - 1, &less) != -E2BIG) {
                abort();
            }
            free(less.p);
        }
    }
    free(o.p);
    return 0;
}
