/*
 * batch.c - the row model's containers (see batch.h).
 */
#include "storage/batch.h"

#include <stdlib.h>
#include <string.h>

const char *signal_name(enum signal s)
{
    switch (s) {
    case SIG_LOGS:
        return "logs";
    case SIG_TRACES:
        return "traces";
    case SIG_METRICS:
        return "metrics";
    }
    return "?";
}

struct batch *batch_new(enum signal s)
{
    struct batch *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    b->signal = s;
    vbuf_init(&b->heap);
    return b;
}

void batch_free(struct batch *b)
{
    if (b == NULL) {
        return;
    }
    free(b->resources);
    free(b->scopes);
    free(b->metrics);
    free(b->rows);
    vbuf_fini(&b->heap);
    free(b);
}

static size_t row_size(enum signal s)
{
    switch (s) {
    case SIG_LOGS:
        return sizeof(struct log_row);
    case SIG_TRACES:
        return sizeof(struct span_row);
    case SIG_METRICS:
        return sizeof(struct point_row);
    }
    return sizeof(struct point_row);
}

void batch_reset(struct batch *b, enum signal s)
{
    if (s != b->signal && b->rows != NULL) {
        /* Capacity is counted in rows of the old size: rescale it. */
        b->cap_rows = (uint32_t)((size_t)b->cap_rows * row_size(b->signal) / row_size(s));
    }
    b->signal = s;
    b->n_resources = b->n_scopes = b->n_metrics = b->n_rows = 0;
    b->rejected = 0;
    b->reject_msg[0] = '\0';
    vbuf_reset(&b->heap);
}

static void *grow(void **arr, uint32_t *n, uint32_t *cap, size_t elem)
{
    if (*n == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 16;
        void *p = realloc(*arr, (size_t)ncap * elem);
        if (p == NULL) {
            return NULL;
        }
        *arr = p;
        *cap = ncap;
    }
    void *e = (char *)*arr + (size_t)(*n)++ * elem;
    memset(e, 0, elem);
    return e;
}

struct res_row *batch_add_resource(struct batch *b)
{
    return grow((void **)&b->resources, &b->n_resources, &b->cap_resources, sizeof(struct res_row));
}

struct scope_row *batch_add_scope(struct batch *b)
{
    return grow((void **)&b->scopes, &b->n_scopes, &b->cap_scopes, sizeof(struct scope_row));
}

struct metric_row *batch_add_metric(struct batch *b)
{
    return grow((void **)&b->metrics, &b->n_metrics, &b->cap_metrics, sizeof(struct metric_row));
}

struct log_row *batch_add_log(struct batch *b)
{
    return grow(&b->rows, &b->n_rows, &b->cap_rows, sizeof(struct log_row));
}

struct span_row *batch_add_span(struct batch *b)
{
    return grow(&b->rows, &b->n_rows, &b->cap_rows, sizeof(struct span_row));
}

struct point_row *batch_add_point(struct batch *b)
{
    return grow(&b->rows, &b->n_rows, &b->cap_rows, sizeof(struct point_row));
}

size_t batch_footprint(const struct batch *b)
{
    return sizeof(*b) + (size_t)b->cap_resources * sizeof(struct res_row) +
           (size_t)b->cap_scopes * sizeof(struct scope_row) +
           (size_t)b->cap_metrics * sizeof(struct metric_row) +
           (size_t)b->cap_rows * row_size(b->signal) + b->heap.cap;
}

void batch_reject(struct batch *b, uint32_t n, const char *msg)
{
    if (b->rejected == 0 && msg != NULL) {
        strncpy(b->reject_msg, msg, sizeof(b->reject_msg) - 1);
        b->reject_msg[sizeof(b->reject_msg) - 1] = '\0';
    }
    b->rejected += n;
}
