/*
 * logs_render.c - rendering: Loki's JSON for streams, matrices, vectors
 * and stats, piece by piece, and the native API's whole records (see
 * logs.h, logs_int.h).
 */
#include "query/logs_int.h"

#include <event2/buffer.h>

#include "proto/otlpenc.h"

/* ---- rendering ------------------------------------------------------------ */

void logs_w_labels_obj(struct jsonw *w, const struct lbl *l, uint32_t n, int cat)
{
    jsonw_obj_begin(w);
    for (uint32_t i = 0; i < n; i++) {
        if (cat >= 0 && l[i].cat != cat) {
            continue;
        }
        jsonw_keyn(w, l[i].n, l[i].nn);
        jsonw_str(w, l[i].v, l[i].vn);
    }
    jsonw_obj_end(w);
}

/* Matrix/vector timestamps: seconds with ms precision as a JSON number. */
void logs_w_sec(struct jsonw *w, uint64_t ns)
{
    uint64_t ms = ns / 1000000;
    char buf[40];
    int n;
    if (ms % 1000 == 0) {
        n = snprintf(buf, sizeof(buf), "%" PRIu64, ms / 1000);
    } else {
        n = snprintf(buf, sizeof(buf), "%" PRIu64 ".%03u", ms / 1000, (unsigned)(ms % 1000));
        while (buf[n - 1] == '0') {
            buf[--n] = '\0';
        }
    }
    jsonw_raw(w, buf, (size_t)n);
}

static int series_key_cmp(const void *a, const void *b)
{
    const struct series *x = *(const struct series *const *)a,
                        *y = *(const struct series *const *)b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c != 0) {
        return c;
    }
    return x->keylen < y->keylen ? -1 : x->keylen > y->keylen;
}

static void w_stats(struct jsonw *w, const struct logs_result *r)
{
    double secs = (double)r->exec_ns / 1e9;
    uint64_t bytes = r->q.c.st.bytes_read, lines = r->q.c.st.rows_scanned;
    jsonw_key(w, "stats");
    jsonw_obj_begin(w);
    jsonw_key(w, "summary");
    jsonw_obj_begin(w);
    jsonw_key(w, "bytesProcessedPerSecond");
    jsonw_uint(w, secs > 0 ? (uint64_t)((double)bytes / secs) : bytes);
    jsonw_key(w, "linesProcessedPerSecond");
    jsonw_uint(w, secs > 0 ? (uint64_t)((double)lines / secs) : lines);
    jsonw_key(w, "totalBytesProcessed");
    jsonw_uint(w, bytes);
    jsonw_key(w, "totalLinesProcessed");
    jsonw_uint(w, lines);
    jsonw_key(w, "execTime");
    jsonw_double(w, secs);
    jsonw_key(w, "totalEntriesReturned");
    jsonw_uint(w, r->kind == RK_STREAMS ? r->n_e : r->n_ser);
    jsonw_obj_end(w);
    jsonw_key(w, "miradb");
    jsonw_obj_begin(w);
    jsonw_key(w, "blocksConsidered");
    jsonw_uint(w, r->q.c.st.blocks_considered);
    jsonw_key(w, "blocksSkippedZone");
    jsonw_uint(w, r->q.c.st.blocks_skipped_zone);
    jsonw_key(w, "blocksSkippedBloom");
    jsonw_uint(w, r->q.c.st.blocks_skipped_bloom);
    jsonw_key(w, "blocksSkippedDict");
    jsonw_uint(w, r->q.c.st.blocks_skipped_dict);
    jsonw_key(w, "blocksScanned");
    jsonw_uint(w, r->q.c.st.blocks_scanned);
    jsonw_obj_end(w);
    jsonw_obj_end(w);
}

static void w_warnings(struct jsonw *w, const struct logs_result *r)
{
    if (r->q.c.warnings == NULL) {
        return;
    }
    jsonw_key(w, "warnings");
    jsonw_arr_begin(w);
    for (const struct qctx_warning *x = r->q.c.warnings; x != NULL; x = x->next) {
        jsonw_cstr(w, x->msg);
    }
    jsonw_arr_end(w);
}

/* One stream (entries [*i, j) sharing a key) into w; *i moves past it. */
static void w_stream(const struct logs_result *r, struct jsonw *w, size_t *i)
{
    bool cat = r->q.rq.categorize;
    const struct entry *e0 = &r->e[*i];
    jsonw_obj_begin(w);
    jsonw_key(w, "stream");
    if (cat) {
        /* index labels, sorted */
        struct lbl tmp[128];
        uint32_t m = 0;
        for (uint32_t k = 0; k < e0->nl && m < 128; k++) {
            if (e0->l[k].cat == LC_INDEX) {
                tmp[m++] = e0->l[k];
            }
        }
        qsort(tmp, m, sizeof(tmp[0]), lbl_cmp);
        logs_w_labels_obj(w, tmp, m, -1);
    } else {
        struct lbl *tmp = malloc((e0->nl + 1) * sizeof(struct lbl));
        if (tmp != NULL) {
            memcpy(tmp, e0->l, e0->nl * sizeof(struct lbl));
            qsort(tmp, e0->nl, sizeof(tmp[0]), lbl_cmp);
            logs_w_labels_obj(w, tmp, e0->nl, -1);
            free(tmp);
        } else {
            logs_w_labels_obj(w, e0->l, e0->nl, -1);
        }
    }
    jsonw_key(w, "values");
    jsonw_arr_begin(w);
    size_t j = *i;
    for (; j < r->n_e && r->e[j].keylen == e0->keylen &&
           memcmp(r->e[j].key, e0->key, e0->keylen) == 0;
         j++) {
        const struct entry *e = &r->e[j];
        jsonw_arr_begin(w);
        jsonw_uint_str(w, e->ts);
        jsonw_str(w, e->line, e->line_n);
        if (cat) {
            jsonw_obj_begin(w);
            bool sm = false, parsed = false;
            for (uint32_t k = 0; k < e->nl; k++) {
                sm = sm || e->l[k].cat == LC_SM;
                parsed = parsed || e->l[k].cat == LC_PARSED;
            }
            if (sm) {
                jsonw_key(w, "structuredMetadata");
                logs_w_labels_obj(w, e->l, e->nl, LC_SM);
            }
            if (parsed) {
                jsonw_key(w, "parsed");
                logs_w_labels_obj(w, e->l, e->nl, LC_PARSED);
            }
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    jsonw_arr_end(w);
    jsonw_obj_end(w);
    *i = j;
}

static void w_series(const struct logs_result *r, struct jsonw *w, const struct series *s)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "metric");
    logs_w_labels_obj(w, s->l, s->nl, -1);
    if (r->kind == RK_VECTOR) {
        jsonw_key(w, "value");
        jsonw_arr_begin(w);
        logs_w_sec(w, r->start);
        jsonw_double_str(w, s->v[0]);
        jsonw_arr_end(w);
    } else {
        jsonw_key(w, "values");
        jsonw_arr_begin(w);
        for (size_t k = 0; k < r->K; k++) {
            if (s->cnt[k] == 0) {
                continue;
            }
            jsonw_arr_begin(w);
            logs_w_sec(w, r->start + k * r->step);
            jsonw_double_str(w, s->v[k]);
            jsonw_arr_end(w);
        }
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
}

static void w_record(struct jsonw *w, const struct log_view *v, uint64_t ts);
static int entry_time_fwd(const void *a, const void *b);
static int entry_time_bwd(const void *a, const void *b);

/* The head of the answer, up to the opening of the result list. */
static void render_head(struct logs_result *r, struct jsonw *w)
{
    static const char *const kinds[] = {"streams", "matrix", "vector", "scalar"};
    jsonw_obj_begin(w);
    jsonw_key(w, "status");
    jsonw_cstr(w, "success");
    w_warnings(w, r);
    jsonw_key(w, "data");
    jsonw_obj_begin(w);
    if (r->native) {
        jsonw_key(w, "records");
        jsonw_arr_begin(w);
        /* one list in query direction */
        qsort(r->e, r->n_e, sizeof(r->e[0]), r->q.rq.forward ? entry_time_fwd : entry_time_bwd);
        return;
    }
    jsonw_key(w, "resultType");
    jsonw_cstr(w, kinds[r->kind]);
    if (r->q.rq.categorize) {
        jsonw_key(w, "encodingFlags");
        jsonw_arr_begin(w);
        jsonw_cstr(w, "categorize-labels");
        jsonw_arr_end(w);
    }
    jsonw_key(w, "result");
    if (r->kind == RK_SCALAR) {
        jsonw_arr_begin(w);
        logs_w_sec(w, r->start);
        jsonw_double_str(w, r->n_ser > 0 ? r->ser[0]->v[0] : 0);
        return; /* the tail closes it */
    }
    jsonw_arr_begin(w);
    if (r->n_ser > 1) {
        qsort(r->ser, r->n_ser, sizeof(r->ser[0]), series_key_cmp);
    }
}

/* The next item of the result list; false when there is none left. */
static bool render_item(struct logs_result *r, struct jsonw *w)
{
    size_t *i = &r->rd_i;
    if (r->native) {
        if (*i >= r->n_e) {
            return false;
        }
        const struct entry *e = &r->e[(*i)++];
        const struct src *src = &r->scan.srcs[e->src];
        struct log_view v;
        int rc = qctx_read_log(src->qs, e->row, BLK_ALL, &v);
        if (rc == 0) {
            w_record(w, &v, e->ts);
        }
        return true;
    }
    switch (r->kind) {
    case RK_STREAMS:
        if (*i >= r->n_e) {
            return false;
        }
        w_stream(r, w, i);
        return true;
    case RK_MATRIX:
    case RK_VECTOR:
        if (*i >= r->n_ser) {
            return false;
        }
        w_series(r, w, r->ser[(*i)++]);
        return true;
    case RK_SCALAR:
        break;
    }
    return false;
}

static void render_tail(struct logs_result *r, struct jsonw *w)
{
    jsonw_arr_end(w);
    w_stats(w, r);
    jsonw_obj_end(w);
    jsonw_obj_end(w);
}

bool logs_render(struct logs_result *r, struct evbuffer *out, size_t budget)
{
    struct jsonw *w = &r->rd_w;
    if (r->rd_stage == 0) {
        jsonw_init(w, out);
        render_head(r, w);
        r->rd_stage = 1;
    }
    w->out = out;
    size_t start = evbuffer_get_length(out);
    while (r->rd_stage == 1) {
        if (!render_item(r, w)) {
            r->rd_stage = 2;
            break;
        }
        if (budget > 0 && evbuffer_get_length(out) - start >= budget) {
            break;
        }
    }
    if (r->rd_stage == 2) {
        render_tail(r, w);
        r->rd_stage = 3;
    }
    return r->rd_stage == 3;
}

int logs_render_error(const struct logs_result *r)
{
    return r->rd_w.err;
}

void logs_write_loki(struct logs_result *r, struct jsonw *w)
{
    (void)logs_render(r, w->out, 0);
    if (r->rd_w.err < 0) {
        w->err = r->rd_w.err;
    }
}

/* ---- native records ------------------------------------------------------- */

static void w_hex(struct jsonw *w, const uint8_t *p, size_t n)
{
    char buf[33];
    hex_encode(buf, p, n);
    jsonw_str(w, buf, 2 * n);
}

static void w_record(struct jsonw *w, const struct log_view *v, uint64_t ts)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "timestamp");
    jsonw_uint_str(w, ts);
    jsonw_key(w, "timeUnixNano");
    jsonw_uint_str(w, v->time_ns);
    jsonw_key(w, "observedTimeUnixNano");
    jsonw_uint_str(w, v->observed_ns);
    jsonw_key(w, "severityNumber");
    jsonw_int(w, v->severity_number);
    jsonw_key(w, "severityText");
    jsonw_str(w, v->severity_text.p, v->severity_text.len);
    jsonw_key(w, "body");
    if (v->body_type == VAL_STR) {
        jsonw_obj_begin(w);
        jsonw_key(w, "stringValue");
        jsonw_str(w, v->body_str.p, v->body_str.len);
        jsonw_obj_end(w);
    } else {
        struct val bv = {.type = VAL_EMPTY};
        struct val_rd r = {v->body_val.p, v->body_val.p + v->body_val.len};
        if (v->body_type != VAL_EMPTY && val_rd_value(&r, &bv) != 0) {
            bv.type = VAL_EMPTY;
        }
        otlpenc_json_value(w, &bv);
    }
    jsonw_key(w, "attributes");
    otlpenc_json_attrs(w, &v->attrs);
    jsonw_key(w, "droppedAttributesCount");
    jsonw_uint(w, v->dropped_attrs);
    jsonw_key(w, "flags");
    jsonw_uint(w, v->flags);
    jsonw_key(w, "traceId");
    if (v->has_trace_id) {
        w_hex(w, v->trace_id, 16);
    } else {
        jsonw_cstr(w, "");
    }
    jsonw_key(w, "spanId");
    if (v->has_span_id) {
        w_hex(w, v->span_id, 8);
    } else {
        jsonw_cstr(w, "");
    }
    jsonw_key(w, "eventName");
    jsonw_str(w, v->event_name.p, v->event_name.len);
    if (v->resource != NULL) {
        jsonw_key(w, "resource");
        jsonw_obj_begin(w);
        jsonw_key(w, "attributes");
        otlpenc_json_attrs(w, &v->resource->attrs);
        jsonw_key(w, "droppedAttributesCount");
        jsonw_uint(w, v->resource->dropped_attrs);
        jsonw_key(w, "schemaUrl");
        jsonw_str(w, v->resource->schema_url.p, v->resource->schema_url.len);
        jsonw_obj_end(w);
    }
    if (v->scope != NULL) {
        jsonw_key(w, "scope");
        jsonw_obj_begin(w);
        jsonw_key(w, "name");
        jsonw_str(w, v->scope->name.p, v->scope->name.len);
        jsonw_key(w, "version");
        jsonw_str(w, v->scope->version.p, v->scope->version.len);
        jsonw_key(w, "attributes");
        otlpenc_json_attrs(w, &v->scope->attrs);
        jsonw_key(w, "droppedAttributesCount");
        jsonw_uint(w, v->scope->dropped_attrs);
        jsonw_key(w, "schemaUrl");
        jsonw_str(w, v->scope->schema_url.p, v->scope->schema_url.len);
        jsonw_obj_end(w);
    }
    jsonw_obj_end(w);
}

static int entry_time_fwd(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    if (x->src != y->src) {
        return x->src < y->src ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

static int entry_time_bwd(const void *a, const void *b)
{
    return entry_time_fwd(b, a);
}

void logs_write_native(struct logs_result *r, struct jsonw *w)
{
    logs_write_loki(r, w);
}
