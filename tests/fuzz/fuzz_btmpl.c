/*
 * fuzz_btmpl.c - libFuzzer target for format 6's log bodies by template
 * (storage/block_body.c), both ways.
 *
 * Input byte 0 picks the direction and, its bit 1, the layout (META flag
 * bit 8's codes by use and variables by slot, or bit 2's alone). Even: the
 * rest is bodies, cut at each
 * 0xff byte (the byte after a cut gives the body's type: string, or not),
 * coded by btmpl_build and rebuilt by btmpl_rebuild: every body must come
 * back byte for byte. Odd: byte 1 is the row count (0..255), the rest an
 * encoded column as a block would hold it; btmpl_rebuild must refuse it
 * with -EBADMSG (or -ENOMEM) or give offsets that rise to its data's end,
 * and never read outside the input.
 *
 * Seeds: tests/fuzz/corpus/btmpl/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block_wint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODIES 4096

static void both_ways(const uint8_t *p, size_t n, bool slots)
{
    static uint64_t offs[MAX_BODIES + 1], bt[MAX_BODIES];
    uint64_t rows = 0;
    size_t at = 0, out = 0;
    /* the bodies are cut in place: offsets into a copy without the cuts */
    uint8_t *flat = malloc(n + 1);
    if (flat == NULL) {
        return;
    }
    offs[0] = 0;
    while (at <= n && rows < MAX_BODIES) {
        const uint8_t *e = memchr(p + at, 0xff, n - at);
        size_t end = e != NULL ? (size_t)(e - p) : n;
        bt[rows] = VAL_STR;
        if (at < end && p[at] == 0xfe) { /* a body that is not a string */
            bt[rows] = VAL_BYTES;
            at++;
        }
        memcpy(flat + out, p + at, end - at);
        out += end - at;
        offs[++rows] = out;
        at = end + 1;
    }
    struct strb s = {offs, MAX_BODIES + 1, {flat, out, n + 1}};
    struct btmpl t;
    struct strb x;
    memset(&t, 0, sizeof(t));
    memset(&x, 0, sizeof(x));
    bool coded = false;
    if (btmpl_build(&t, &s, bt, rows, slots, &x, &coded) == 0) {
        uint8_t *buf;
        uint64_t *o;
        struct scol sc = {{(const uint8_t *)"", 0, 0}, x.data.p ? x.data.p : (const uint8_t *)""};
        int rc = btmpl_rebuild(&sc, x.data.len, rows, slots, &buf, &o);
        if (coded && rc != 0) {
            abort(); /* the writer's encoding must rebuild */
        }
        if (rc == 0) {
            for (uint64_t i = 0; i <= rows; i++) {
                if (o[i] != offs[i]) {
                    abort();
                }
            }
            if (out > 0 && memcmp(buf, flat, out) != 0) {
                abort();
            }
            free(buf);
            free(o);
        }
    }
    btmpl_free(&t);
    free(x.offs);
    vbuf_fini(&x.data);
    free(flat);
}

static void rebuild_only(const uint8_t *p, size_t n, bool slots)
{
    if (n < 1) {
        return;
    }
    uint64_t rows = p[0];
    uint8_t *copy = malloc(n > 1 ? n - 1 : 1); /* exactly the input: ASan sees a read past it */
    if (copy == NULL) {
        return;
    }
    memcpy(copy, p + 1, n - 1);
    struct scol sc = {{(const uint8_t *)"", 0, 0}, copy};
    uint8_t *buf;
    uint64_t *o;
    int rc = btmpl_rebuild(&sc, n - 1, rows, slots, &buf, &o);
    if (rc == 0) {
        for (uint64_t i = 0; i < rows; i++) {
            if (o[i + 1] < o[i]) {
                abort();
            }
        }
        free(buf);
        free(o);
    } else if (rc != -EBADMSG && rc != -ENOMEM) {
        abort();
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] & 1) {
        rebuild_only(data + 1, size - 1, (data[0] & 2) != 0);
    } else {
        both_ways(data + 1, size - 1, (data[0] & 2) != 0);
    }
    return 0;
}
