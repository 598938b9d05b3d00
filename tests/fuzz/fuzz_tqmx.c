/*
 * fuzz_tqmx.c - libFuzzer target for the TraceQL metrics parser: any input
 * must parse or fail with a message, never crash, leak or hang. Accepted
 * queries are walked (every node, stage and input pipeline).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "query/tqmx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const struct tqmx_node *n, int depth)
{
    if (n == NULL || depth > 100) {
        return 0;
    }
    size_t k = n->n_stages;
    if (n->kind == TQMX_N_QUERY) {
        if (n->q == NULL || n->q->input == NULL || n->q->input->root == NULL) {
            __builtin_trap(); /* every metrics query has its input */
        }
        k += n->q->n_by + n->q->n_qs;
    } else if (n->kind == TQMX_N_BINARY) {
        if (n->l == NULL || n->r == NULL) {
            __builtin_trap();
        }
        k += walk(n->l, depth + 1) + walk(n->r, depth + 1);
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    err[0] = '\0';
    struct tqmx_expr *e = NULL;
    int rc = tqmx_parse((const char *)data, size, &e, err, sizeof(err));
    if (rc == 0) {
        if (e == NULL || e->n_queries == 0) {
            __builtin_trap();
        }
        (void)walk(e->root, 0);
        tqmx_free(e);
    } else if (e != NULL || err[0] == '\0') {
        __builtin_trap(); /* a failure leaves nothing and says why */
    }
    return 0;
}
