/*
 * jsdiff.c - the OTLP/JSON decoder's output, printed whole, to compare two
 * builds of proto/jsondec*.c (issue 13: a faster decoder must answer the
 * same), and its instructions per record against protobuf's.
 *
 *   jsdiff all FILE...   decodes, as each of the three signals: every FILE;
 *                        otlp-load's generator (seeds 1-6, 1, 3, 40 and
 *                        1,000 records); 6,000 mutants of those (bytes
 *                        replaced, deleted, duplicated, a third of them next
 *                        to a '[' or '{'); prints the return code, the error
 *                        text and every field of every row and the heap.
 *                        Inputs are made in-process with a fixed PRNG, so two
 *                        builds see the same bytes: `cmp` their outputs.
 *   jsdiff ir SIGNAL     the generator's pool (seed 42, 16 requests of 1,000
 *                        records) as JSON and as protobuf, decoded once to
 *                        warm up (batches and arena grown), then once each
 *                        inside do_json / do_pb (callgrind --toggle-collect;
 *                        instructions / 16,000 = per record).
 *
 * Built by tests/jsdiff/run.sh against two libmiradb.a archives.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/otlp-load/gen.h"
#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/batch.h"

static FILE *o;
static struct batch *bt;
static arena *ar;

static void pm(const char *tag, struct mstr m)
{
    fprintf(o, " %s=%u:", tag, m.len);
    if (m.len != 0) {
        fwrite(m.p, 1, m.len, o);
    }
}

static void pb_(const char *tag, struct blob b)
{
    fprintf(o, " %s=%u+%u", tag, b.off, b.len);
}

static void pa(const char *tag, struct attrs a)
{
    fprintf(o, " %s=%u+%u#%u", tag, a.blob.off, a.blob.len, a.count);
}

static void px(const char *tag, const uint8_t *p, size_t n)
{
    fprintf(o, " %s=", tag);
    for (size_t i = 0; i < n; i++) {
        fprintf(o, "%02x", p[i]);
    }
}

static void print_batch(const struct batch *b)
{
    fprintf(o, "res %u scopes %u metrics %u rows %u heap %zu rej %u\n", b->n_resources, b->n_scopes,
            b->n_metrics, b->n_rows, b->heap.len, b->rejected);
    for (uint32_t i = 0; i < b->n_resources; i++) {
        const struct res_row *r = &b->resources[i];
        fprintf(o, "R");
        pa("a", r->attrs);
        fprintf(o, " d=%u", r->dropped_attrs);
        pm("su", r->schema_url);
        fprintf(o, "\n");
    }
    for (uint32_t i = 0; i < b->n_scopes; i++) {
        const struct scope_row *s = &b->scopes[i];
        fprintf(o, "S r=%u", s->resource);
        pm("n", s->name);
        pm("v", s->version);
        pa("a", s->attrs);
        fprintf(o, " d=%u", s->dropped_attrs);
        pm("su", s->schema_url);
        fprintf(o, "\n");
    }
    for (uint32_t i = 0; i < b->n_metrics; i++) {
        const struct metric_row *m = &b->metrics[i];
        fprintf(o, "M s=%u", m->scope);
        pm("n", m->name);
        pm("d", m->description);
        pm("u", m->unit);
        fprintf(o, " k=%d t=%d mo=%d", (int)m->kind, m->temporality, (int)m->monotonic);
        pa("md", m->metadata);
        fprintf(o, "\n");
    }
    for (uint32_t i = 0; i < b->n_rows; i++) {
        if (b->signal == SIG_LOGS) {
            const struct log_row *l = &b->logs[i];
            fprintf(o, "L t=%llu ob=%llu s=%u sev=%d", (unsigned long long)l->time_ns,
                    (unsigned long long)l->observed_ns, l->scope, l->severity_number);
            pm("st", l->severity_text);
            fprintf(o, " bt=%d", (int)l->body_type);
            pm("bs", l->body_str);
            pb_("bv", l->body_val);
            pa("a", l->attrs);
            fprintf(o, " d=%u f=%u ht=%d hs=%d", l->dropped_attrs, l->flags, (int)l->has_trace_id,
                    (int)l->has_span_id);
            px("ti", l->trace_id, 16);
            px("si", l->span_id, 8);
            pm("en", l->event_name);
        } else if (b->signal == SIG_TRACES) {
            const struct span_row *p = &b->spans[i];
            fprintf(o, "T st=%llu en=%llu s=%u", (unsigned long long)p->start_ns,
                    (unsigned long long)p->end_ns, p->scope);
            px("ti", p->trace_id, 16);
            px("si", p->span_id, 8);
            px("pi", p->parent_span_id, 8);
            fprintf(o, " hp=%d", (int)p->has_parent);
            pm("ts", p->trace_state);
            pm("n", p->name);
            fprintf(o, " k=%d f=%u sc=%d", p->kind, p->flags, p->status_code);
            pm("sm", p->status_message);
            pa("a", p->attrs);
            fprintf(o, " d=%u", p->dropped_attrs);
            pb_("ev", p->events);
            fprintf(o, " ne=%u de=%u", p->n_events, p->dropped_events);
            pb_("li", p->links);
            fprintf(o, " nl=%u dl=%u", p->n_links, p->dropped_links);
        } else {
            const struct point_row *p = &b->points[i];
            uint64_t v, sum, mn, mx;
            memcpy(&v, &p->value, 8);
            memcpy(&sum, &p->sum, 8);
            memcpy(&mn, &p->min, 8);
            memcpy(&mx, &p->max, 8);
            fprintf(o, "P st=%llu t=%llu m=%u", (unsigned long long)p->start_ns,
                    (unsigned long long)p->time_ns, p->metric);
            pa("a", p->attrs);
            fprintf(o, " f=%u vt=%d v=%llx c=%llu sum=%llx min=%llx max=%llx hs=%d hmi=%d hma=%d",
                    p->flags, (int)p->value_type, (unsigned long long)v,
                    (unsigned long long)p->count, (unsigned long long)sum, (unsigned long long)mn,
                    (unsigned long long)mx, (int)p->has_sum, (int)p->has_min, (int)p->has_max);
            pb_("de", p->detail);
            pb_("ex", p->exemplars);
            fprintf(o, " ne=%u", p->n_exemplars);
        }
        fprintf(o, "\n");
    }
    px("heap", b->heap.p, b->heap.len);
    fprintf(o, "\n");
}

static unsigned long n_dec, n_ok;

static void decode3(const char *name, const uint8_t *p, size_t n)
{
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        char err[256];
        batch_reset(bt, (enum signal)s);
        arena_reset(ar);
        err[0] = '\0';
        int rc = jsondec_decode((enum signal)s, (const char *)p, n, ar, bt, err, sizeof err);
        fprintf(o, "== %s %s rc=%d err=%s\n", name, signal_name((enum signal)s), rc, err);
        n_dec++;
        if (rc == 0) {
            n_ok++;
            print_batch(bt);
        } else if (bt->n_rows != 0 || bt->heap.len != 0) {
            fprintf(o, "LEFT ROWS\n");
        }
    }
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static const char ins_bytes[] = "\"{}[],:0 1-.eE\\u\xc3\xa9\x80nulltrue\t";

/* One mutant of |src| into |dst| (capacity |src| + 64). */
static size_t mutate(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t at = n ? rnd() % n : 0;
    if (n && rnd() % 3 == 0) { /* next to a bracket */
        for (size_t k = 0; k < n; k++) {
            size_t q = (at + k) % n;
            if (src[q] == '[' || src[q] == '{') {
                at = q + (rnd() & 1);
                break;
            }
        }
    }
    if (at > n) {
        at = n;
    }
    memcpy(dst, src, at);
    size_t d = at;
    size_t rest = at;
    switch (rnd() % 5) {
    case 0: /* replace one byte */
        dst[d++] = (uint8_t)ins_bytes[rnd() % (sizeof ins_bytes - 1)];
        rest = at < n ? at + 1 : n;
        break;
    case 1: /* delete 1-8 bytes */
        rest = at + 1 + rnd() % 8;
        if (rest > n) {
            rest = n;
        }
        break;
    case 2: /* insert a byte */
        dst[d++] = (uint8_t)ins_bytes[rnd() % (sizeof ins_bytes - 1)];
        break;
    case 3: { /* duplicate up to 40 bytes */
        size_t k = 1 + rnd() % 40;
        if (at + k > n) {
            k = n - at;
        }
        memcpy(dst + d, src + at, k);
        d += k;
        break;
    }
    default: /* flip a bit */
        if (at < n) {
            dst[d++] = src[at] ^ (uint8_t)(1u << (rnd() % 8));
            rest = at + 1;
        }
        break;
    }
    memcpy(dst + d, src + rest, n - rest);
    return d + n - rest;
}

struct input {
    char name[96];
    uint8_t *p;
    size_t n;
};

static int mode_all(int argc, char **argv)
{
    struct input in[160];
    int ni = 0;
    for (int i = 2; i < argc && ni < 160; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            perror(argv[i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        in[ni].p = malloc((size_t)sz + 1);
        if (in[ni].p == NULL || fread(in[ni].p, 1, (size_t)sz, f) != (size_t)sz) {
            return 1;
        }
        fclose(f);
        in[ni].n = (size_t)sz;
        snprintf(in[ni].name, sizeof in[ni].name, "%s", argv[i]);
        ni++;
    }
    static const uint32_t sizes[] = {1, 3, 40, 1000};
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        for (uint64_t seed = 1; seed <= 6; seed++) {
            for (int z = 0; z < 4 && ni < 160; z++) {
                if (seed > 2 && sizes[z] == 1000) {
                    continue;
                }
                struct gen_config gc = {.signal = (enum signal)s,
                                        .seed = seed,
                                        .time_base_ns = 1767225600000000000ull + seed * 77,
                                        .records = sizes[z]};
                struct vbuf v;
                vbuf_init(&v);
                if (gen_request(&gc, seed * 7 + (uint64_t)z, GEN_JSON, &v, NULL) < 0) {
                    return 1;
                }
                in[ni].p = v.p;
                in[ni].n = v.len;
                snprintf(in[ni].name, sizeof in[ni].name, "gen-%s-%llu-%u",
                         signal_name((enum signal)s), (unsigned long long)seed, sizes[z]);
                ni++;
            }
        }
    }
    /* every input up to 64 KiB also with blanks after each structural byte
     * outside strings (pretty-printed text takes the general paths) */
    for (int i = 0, n0 = ni; i < n0 && ni < 160; i++) {
        if (in[i].n > 65536) {
            continue;
        }
        uint8_t *d = malloc(in[i].n * 3 + 1);
        size_t k = 0;
        bool str = false, esc = false;
        for (size_t q = 0; q < in[i].n; q++) {
            uint8_t c = in[i].p[q];
            d[k++] = c;
            if (str) {
                str = esc || c != '"';
                esc = !esc && c == '\\';
            } else if (c == '"') {
                str = true;
            } else if (c == ':' || c == ',' || c == '{' || c == '[') {
                d[k++] = (q & 1) ? ' ' : '\n';
                d[k++] = '\t';
            }
        }
        in[ni].p = d;
        in[ni].n = k;
        snprintf(in[ni].name, sizeof in[ni].name, "spaced-%s", in[i].name);
        ni++;
    }
    for (int i = 0; i < ni; i++) {
        decode3(in[i].name, in[i].p, in[i].n);
    }
    size_t maxn = 0;
    for (int i = 0; i < ni; i++) {
        maxn = in[i].n > maxn ? in[i].n : maxn;
    }
    uint8_t *m = malloc(maxn + 64);
    int n_mut = getenv("JSDIFF_MUTANTS") ? atoi(getenv("JSDIFF_MUTANTS")) : 6000;
    for (int k = 0; k < n_mut; k++) {
        int i = (int)(rnd() % (uint64_t)ni);
        if (in[i].n > 200000 && rnd() % 8 != 0) { /* fewer of the big ones */
            i = (int)(rnd() % (uint64_t)ni);
        }
        size_t n = mutate(in[i].p, in[i].n, m);
        char name[128];
        snprintf(name, sizeof name, "mut%d-%s", k, in[i].name);
        decode3(name, m, n);
    }
    fprintf(stderr, "jsdiff: %lu decodes, %lu accepted, %d inputs + %d mutants\n", n_dec, n_ok, ni,
            n_mut);
    return 0;
}

#define N 16
static struct vbuf jreq[N], preq[N];
static struct batch *jb[N], *pbt[N];

static void json_pass(enum signal s)
{
    char err[200];
    for (int i = 0; i < N; i++) {
        batch_reset(jb[i], s);
        if (jsondec_decode(s, (const char *)jreq[i].p, jreq[i].len, ar, jb[i], err, sizeof err) <
            0) {
            fprintf(stderr, "json: %s\n", err);
            exit(1);
        }
    }
}

static void pb_pass(enum signal s)
{
    char err[200];
    for (int i = 0; i < N; i++) {
        batch_reset(pbt[i], s);
        if (pbdec_decode(s, preq[i].p, preq[i].len, pbt[i], err, sizeof err) < 0) {
            fprintf(stderr, "pb: %s\n", err);
            exit(1);
        }
    }
}

/* The measured passes (callgrind --toggle-collect=do_json / do_pb); the
 * warm-up pass calls the loops directly, so it is not counted. */
static __attribute__((noinline)) void do_json(enum signal s)
{
    json_pass(s);
}

static __attribute__((noinline)) void do_pb(enum signal s)
{
    pb_pass(s);
}

static int mode_ir(const char *sig)
{
    enum signal s = !strcmp(sig, "logs")     ? SIG_LOGS
                    : !strcmp(sig, "traces") ? SIG_TRACES
                                             : SIG_METRICS;
    struct gen_config gc = {
        .signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull, .records = 1000};
    for (int i = 0; i < N; i++) {
        vbuf_init(&jreq[i]);
        vbuf_init(&preq[i]);
        if (gen_request(&gc, (uint64_t)i, GEN_JSON, &jreq[i], NULL) < 0 ||
            gen_request(&gc, (uint64_t)i, GEN_PROTOBUF, &preq[i], NULL) < 0) {
            return 1;
        }
        jb[i] = batch_new(s);
        pbt[i] = batch_new(s);
    }
    int reps = getenv("JSDIFF_REPS") ? atoi(getenv("JSDIFF_REPS")) : 1;
    /* warm: arrays and heaps grown, the arena's chunks allocated */
    arena_reset(ar);
    json_pass(s);
    pb_pass(s);
    uint64_t rows = 0;
    for (int i = 0; i < N; i++) {
        rows += jb[i]->n_rows;
    }
    for (int r = 0; r < reps; r++) {
        arena_reset(ar);
        do_json(s);
        do_pb(s);
    }
    printf("records per pass %llu\n", (unsigned long long)rows);
    return 0;
}

int main(int argc, char **argv)
{
    o = stdout;
    bt = batch_new(SIG_LOGS);
    ar = arena_new(0);
    if (bt == NULL || ar == NULL) {
        return 1;
    }
    arena_set_limit(ar, 256u << 20);
    if (argc >= 2 && !strcmp(argv[1], "all")) {
        return mode_all(argc, argv);
    }
    if (argc >= 3 && !strcmp(argv[1], "ir")) {
        return mode_ir(argv[2]);
    }
    fprintf(stderr, "jsdiff all FILE... | jsdiff ir logs|traces|metrics\n");
    return 2;
}
