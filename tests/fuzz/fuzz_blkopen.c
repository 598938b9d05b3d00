/*
 * fuzz_blkopen.c - libFuzzer target for the block reader (storage/block_read.c).
 *
 * Every input is a block file. It is opened twice: as given (the checksums
 * must refuse nearly all mutations cleanly), and with every checksum
 * recomputed (header, trailer, footer, and each table the footer's table
 * directory names), so mutations reach the footer parsers and the table
 * structure checks behind the CRCs. Whatever opens is read in full: every
 * row of every table, blooms, zone maps, dictionaries, column access.
 * Nothing may crash, hang or read outside what it was given; a refusal
 * must be -EBADMSG with a reason, or -ENOMEM.
 *
 * The file goes through a memfd (blk_open takes a path: /proc/self/fd/N).
 * Seeds: tests/fuzz/corpus/blkopen/, small blocks of every signal, plain
 * and zstd, written by block_test.c (set MIRADB_BLK_CORPUS_DIR): format 2
 * (the release before) and format 3 (v3-*: delta columns, key-coded
 * attribute lists rebuilt at load).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <libdeflate.h>

#include "storage/block.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch(const void *p, size_t n)
{
    const uint8_t *c = p;
    uint64_t s = 0;
    if (p == NULL) {
        abort(); /* views never hold NULL */
    }
    for (size_t i = 0; i < n; i++) {
        s += c[i];
    }
    sink += s;
}

static void touch_scope(const struct scope_view *s)
{
    touch(s->name.p, s->name.len);
    touch(s->attrs.p, s->attrs.len);
    touch(s->resource->attrs.p, s->resource->attrs.len);
    touch(s->resource->schema_url.p, s->resource->schema_url.len);
}

static void read_all(blk *b)
{
    uint64_t mn, mx;
    int64_t a, z;
    blk_time_range(b, &mn, &mx);
    blk_severity_range(b, &a, &z);
    blk_duration_range(b, &a, &z);
    uint8_t id[16] = {1, 2, 3};
    sink += blk_may_have_trace(b, id) + blk_may_have_token(b, "error", 5) +
            blk_may_have_attr(b, "k", 1, "v", 1) + blk_may_have_resource_value(b, "k", 1, "v", 1) +
            blk_may_have_substr(b, "timeout", 7);
    for (uint32_t i = 0; i < blk_n_scopes(b); i++) {
        touch_scope(blk_scope(b, i));
    }
    for (uint32_t i = 0; i < blk_n_metrics(b); i++) {
        const struct metric_view *m = blk_metric(b, i);
        touch(m->description.p, m->description.len);
        touch_scope(m->scope);
    }
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        struct blk_bloom_info bi;
        blk_bloom_info(b, i, &bi);
        sink += bi.bits_set;
    }
    for (uint32_t i = 0; i < blk_n_tables(b); i++) {
        blk_verify_table(b, i);
    }
    const uint64_t *t = blk_col_time(b);
    if (t != NULL && blk_rows(b) > 0) {
        sink += t[blk_rows(b) - 1] + blk_lower_bound(b, t[0]);
    }
    for (uint32_t h = 0; h < blk_n_hot_attrs(b); h++) {
        struct mstr k = blk_hot_attr_key(b, h);
        touch(k.p, k.len);
        for (uint64_t i = 0; i < blk_rows(b) && i < 4096; i++) {
            struct val v;
            if (blk_hot_attr(b, h, i, &v) == 1 && (v.type == VAL_STR || v.type == VAL_BYTES)) {
                touch(v.s, v.n);
            }
        }
    }
    for (uint64_t i = 0; i < blk_rows(b); i++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        switch (blk_signal(b)) {
        case SIG_LOGS:
            /* the fields without the body first: bodies by template are
             * rebuilt by the first read that wants one */
            if (blk_log(b, i, BLK_ALL | BLK_NOBODY, &lv) == 0) {
                touch(lv.attrs.p, lv.attrs.len);
                if (blk_log_body(b, i, &lv) == 0) {
                    touch(lv.body_str.p, lv.body_str.len);
                    touch(lv.body_val.p, lv.body_val.len);
                }
            }
            if (blk_log(b, i, BLK_ALL, &lv) == 0) {
                touch(lv.body_str.p, lv.body_str.len);
                touch(lv.body_val.p, lv.body_val.len);
                touch(lv.attrs.p, lv.attrs.len);
                touch(lv.severity_text.p, lv.severity_text.len);
                touch(lv.event_name.p, lv.event_name.len);
                touch_scope(lv.scope);
            } else if (blk_log(b, i, BLK_ROOT, &lv) == 0) {
                touch(lv.body_str.p, lv.body_str.len);
            }
            break;
        case SIG_TRACES:
            if (blk_span(b, i, BLK_ALL, &sv) == 0) {
                touch(sv.name.p, sv.name.len);
                touch(sv.status_message.p, sv.status_message.len);
                touch(sv.trace_state.p, sv.trace_state.len);
                touch(sv.attrs.p, sv.attrs.len);
                touch(sv.events.p, sv.events.len);
                touch(sv.links.p, sv.links.len);
                touch_scope(sv.scope);
            }
            break;
        case SIG_METRICS:
            if (blk_point(b, i, BLK_ALL, &pv) == 0) {
                touch(pv.attrs.p, pv.attrs.len);
                touch(pv.detail.p, pv.detail.len);
                touch(pv.exemplars.p, pv.exemplars.len);
                touch(pv.metric->name.p, pv.metric->name.len);
                touch_scope(pv.scope);
            }
            break;
        }
        if (i >= 4096) {
            break; /* enough: bounded work per input */
        }
    }
}

static void try_open(const uint8_t *data, size_t size)
{
    int fd = memfd_create("blk", MFD_CLOEXEC);
    if (fd < 0) {
        abort();
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            abort();
        }
        off += (size_t)w;
    }
    char path[64], err[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    blk *b = NULL;
    int rc = blk_open(path, &b, err, sizeof(err));
    if (rc == 0) {
        read_all(b);
        blk_unref(b);
    } else if (rc == -EBADMSG) {
        if (err[0] == '\0') {
            abort(); /* a refusal says why */
        }
    } else if (rc != -ENOMEM) {
        abort();
    }
    close(fd);
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Recomputes every checksum the format has (block_int.h's layout), as far as
 * the (mutated) structure allows finding them. */
static void fix_crcs(uint8_t *f, size_t n)
{
    if (n < 104) {
        return;
    }
    put32(f + 56, libdeflate_crc32(0, f, 56));
    uint8_t *t = f + n - 40;
    uint64_t foff = get64(t), flen = get64(t + 8);
    if (foff < 64 || foff > n - 40 || flen != n - 40 - foff) {
        put32(t + 24, libdeflate_crc32(0, t, 24));
        return;
    }
    /* Table CRCs first: they are inside the footer. */
    uint8_t *p = f + foff, *end = p + flen;
    if (end - p >= 8) {
        uint32_t nsec;
        memcpy(&nsec, p, 4);
        p += 8;
        for (uint32_t i = 0; i < nsec && i < 64; i++) {
            p = f + ((size_t)(p - f) + 7) / 8 * 8;
            if (p > end || end - p < 16) {
                break;
            }
            uint32_t id;
            memcpy(&id, p, 4);
            uint64_t len = get64(p + 8);
            p += 16;
            if (len > (uint64_t)(end - p)) {
                break;
            }
            if (id == 2 && len >= 8) {
                uint32_t nt;
                memcpy(&nt, p, 4);
                for (uint32_t k = 0; k < nt && 8 + 32 * (uint64_t)(k + 1) <= len; k++) {
                    uint8_t *e = p + 8 + 32 * k;
                    uint64_t o = get64(e + 8), l = get64(e + 16);
                    if (o <= foff && l <= foff - o) {
                        put32(e + 4, libdeflate_crc32(0, f + o, l));
                    }
                }
            }
            p += len;
        }
    }
    put32(t + 16, libdeflate_crc32(0, f + foff, flen));
    put32(t + 24, libdeflate_crc32(0, t, 24));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (4u << 20)) {
        return 0;
    }
    try_open(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    fix_crcs(copy, size);
    try_open(copy, size);
    free(copy);
    return 0;
}
