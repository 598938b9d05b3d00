/*
 * fuzz_promql.c - libFuzzer target for the PromQL parser: any input must
 * parse or fail with a "L:C: parse error: ..." message (or a limit / memory
 * refusal), never crash, leak or hang. An accepted query must print to a
 * canonical form that parses again and prints the same (the printer is
 * Prometheus's String(), so this checks the parser and printer agree; "+Inf"
 * is exempt, see below), and
 * every type the checker set must be one of the value types. Its matchers
 * also run against the input bytes (arbitrary, often invalid UTF-8).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "query/promql.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct promql_expr *e, const char *s, size_t n, int depth)
{
    if (e == NULL) {
        return;
    }
    if (depth > 4 * PROMQL_MAX_OPS || e->type == PROMQL_TYPE_NONE || e->pos > e->end) {
        __builtin_trap(); /* deeper than the limits allow, or unchecked */
    }
    if (e->kind == PROMQL_VECTOR) {
        for (size_t i = 0; i < e->sel.n_matchers; i++) {
            (void)promql_matcher_matches(&e->sel.matchers[i], s, n);
        }
    }
    walk(e->inner, s, n, depth + 1);
    walk(e->param, s, n, depth + 1);
    walk(e->lhs, s, n, depth + 1);
    walk(e->rhs, s, n, depth + 1);
    for (size_t i = 0; i < e->n_args; i++) {
        walk(e->args[i], s, n, depth + 1);
    }
}

static char *print(const struct promql_expr *e, size_t *len)
{
    size_t n = promql_format(e, NULL, 0);
    char *buf = malloc(n + 1);
    if (buf == NULL) {
        return NULL;
    }
    if (promql_format(e, buf, n + 1) != n) {
        __builtin_trap();
    }
    *len = n;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct promql_expr *e = NULL;
    if (promql_parse_selector((const char *)data, size, &e, err, sizeof(err)) == 0) {
        if (e->kind != PROMQL_VECTOR) {
            __builtin_trap();
        }
        promql_free(e);
    }
    int rc = promql_parse((const char *)data, size, &e, err, sizeof(err));
    if (rc != 0) {
        if (e != NULL || err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL ||
            (rc != -EINVAL && rc != -E2BIG && rc != -ENOMEM) ||
            (rc != -ENOMEM && strstr(err, ": parse error: ") == NULL)) {
            __builtin_trap(); /* a failure always leaves NULL and a message */
        }
        return 0;
    }
    walk(e, (const char *)data, size < 512 ? size : 512, 0);
    size_t n1, n2;
    char *p1 = print(e, &n1);
    promql_free(e);
    if (p1 == NULL) {
        return 0;
    }
    /* Go prints the literal Inf as "+Inf", which before `^` reads back as
     * unary plus over the power (+Inf ^ 2 is +(Inf ^ 2)), as it does with
     * Prometheus's own String(): same value, another tree; not compared */
    if (memmem(p1, n1, "+Inf", 4) != NULL) {
        free(p1);
        return 0;
    }
    struct promql_expr *e2 = NULL;
    rc = promql_parse(p1, n1, &e2, err, sizeof(err));
    if (rc == -E2BIG || rc == -ENOMEM) {
        free(p1); /* the canonical form can be longer than the input */
        return 0;
    }
    if (rc != 0) {
        __builtin_trap(); /* the canonical form must parse */
    }
    char *p2 = print(e2, &n2);
    promql_free(e2);
    if (p2 != NULL && (n1 != n2 || memcmp(p1, p2, n1) != 0)) {
        __builtin_trap(); /* and print the same */
    }
    free(p2);
    free(p1);
    return 0;
}
