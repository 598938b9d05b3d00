/*
 * fuzz_traceql.c - libFuzzer target for the TraceQL parser: any input must
 * parse or fail with a message, never crash, leak or hang. Accepted queries
 * also run their regex comparisons against the input bytes and list their
 * pruning facts.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "query/traceql.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void field_walk(const struct traceql_field *f, const char *s, size_t n, int depth)
{
    if (f == NULL || depth > 200) {
        return;
    }
    if (f->kind == TRACEQL_F_BINARY) {
        if (f->op == TRACEQL_OP_RE || f->op == TRACEQL_OP_NRE) {
            if (f->re == NULL) {
                __builtin_trap(); /* regex comparisons are compiled at parse time */
            }
            (void)traceql_regex_match(f, s, n);
        }
        field_walk(f->l, s, n, depth + 1);
        field_walk(f->r, s, n, depth + 1);
    } else if (f->kind == TRACEQL_F_UNARY) {
        field_walk(f->l, s, n, depth + 1);
    } else if (f->kind == TRACEQL_F_INTRINSIC) {
        (void)traceql_intrinsic_name(f->intrinsic);
    }
}

static void node_walk(const struct traceql_node *nd, const char *s, size_t n, int depth)
{
    if (nd == NULL || depth > 200) {
        return;
    }
    switch (nd->kind) {
    case TRACEQL_N_FILTER:
        field_walk(nd->filter, s, n, 0);
        break;
    case TRACEQL_N_SPANSET_OP:
        node_walk(nd->l, s, n, depth + 1);
        node_walk(nd->r, s, n, depth + 1);
        break;
    case TRACEQL_N_PIPELINE:
        node_walk(nd->input, s, n, depth + 1);
        for (size_t i = 0; i < nd->n_stages; i++) {
            const struct traceql_stage *st = &nd->stages[i];
            node_walk(st->node, s, n, depth + 1);
            for (size_t k = 0; k < st->n_fields; k++) {
                field_walk(st->fields[k], s, n, 0);
            }
        }
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct traceql_field id;
    char name[64];
    if (traceql_parse_identifier((const char *)data, size, &id, name, sizeof(name)) == 0 &&
        id.kind == TRACEQL_F_ATTR && (id.name != name || name[id.name_len] != '\0')) {
        __builtin_trap();
    }
    struct traceql_expr *q = NULL;
    int rc = traceql_parse((const char *)data, size, &q, err, sizeof(err));
    if (rc != 0) {
        if (q != NULL || err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL) {
            __builtin_trap();
        }
        return 0;
    }
    node_walk(q->root, (const char *)data, size < 512 ? size : 512, 0);
    size_t nf;
    const struct traceql_fact *f = traceql_facts(q, &nf);
    for (size_t i = 0; i < nf; i++) {
        if (f[i].kind == TRACEQL_FACT_ATTR_EQ && f[i].name == NULL) {
            __builtin_trap();
        }
    }
    traceql_free(q);
    return 0;
}
