/*
 * cli.c - `miradb inspect` and `miradb fsck` (see cli.h).
 *
 * Both open blocks with BLK_OPEN_NO_CACHE | BLK_OPEN_LENIENT_ROOT: a tool
 * hashes every byte it vouches for (the verification cache is for the
 * daemon's queries), and a block whose root table is damaged is still
 * described table by table instead of only "cannot open".
 */
#include "server/cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "storage/block.h"

static const unsigned table_bit[] = {0, BLK_ROOT, BLK_ATTRS, BLK_DETAIL};

/* "ok", or why table |i| fails: its CRC, or its structure after the CRC. */
static const char *check_table(blk *b, uint32_t i, struct blk_table_info *ti)
{
    blk_table_info(b, i, ti);
    if (blk_verify_table(b, i) < 0) {
        return "crc mismatch";
    }
    unsigned bit = ti->kind <= BLK_T_DETAIL ? table_bit[ti->kind] : 0;
    if (bit != 0 && blk_load(b, bit) < 0) {
        return "structure check failed";
    }
    blk_table_info(b, i, ti);
    return "ok";
}

static void fmt_time(uint64_t ns, char *buf, size_t cap)
{
    time_t s = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (ns == 0 || ns == UINT64_MAX || gmtime_r(&s, &tm) == NULL ||
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, cap, "-");
        return;
    }
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, ".%09lluZ", (unsigned long long)(ns % 1000000000u));
}

static double fill_ratio(const struct blk_bloom_info *bi)
{
    return bi->nbits ? (double)bi->bits_set / (double)bi->nbits : 0;
}

static int inspect_text(blk *b, const char *path)
{
    const struct blk_meta *m = blk_meta(b);
    struct blk_layout lay;
    blk_layout(b, &lay);
    int bad = 0;
    char t0[64], t1[64];
    uint64_t mn, mx;
    int64_t a, z;

    printf("file        %s (%llu bytes)\n", path, (unsigned long long)blk_file_bytes(b));
    printf("format      version %u, header %llu bytes\n", lay.version,
           (unsigned long long)lay.header_bytes);
    printf("signal      %s\n", signal_name(blk_signal(b)));
    printf("meta        shard %u, seal %llu, wal seq %llu\n", m->shard,
           (unsigned long long)m->seal_id, (unsigned long long)m->wal_seq);
    printf("rows        %llu\n", (unsigned long long)blk_rows(b));
    printf("tier        %s", blk_n_sources(b) > 0 ? "cold, compacted from" : "hot");
    struct blk_source src;
    for (uint32_t i = 0; blk_source(b, i, &src) == 0; i++) {
        printf("%s shard %u seal %llu (wal seq %llu)", i > 0 ? "," : "", src.shard,
               (unsigned long long)src.seal_id, (unsigned long long)src.wal_seq);
    }
    printf("\n");
    blk_time_range(b, &mn, &mx);
    fmt_time(mn, t0, sizeof(t0));
    fmt_time(mx, t1, sizeof(t1));
    if (blk_rows(b) > 0) {
        printf("time        %s .. %s (%llu .. %llu ns)\n", t0, t1, (unsigned long long)mn,
               (unsigned long long)mx);
    }
    if (blk_severity_range(b, &a, &z)) {
        printf("severity    %lld .. %lld\n", (long long)a, (long long)z);
    }
    if (blk_duration_range(b, &a, &z)) {
        printf("duration    %lld .. %lld ns\n", (long long)a, (long long)z);
    }
    printf("\ntables\n  #  kind    offset       stored       raw          codec  crc32     "
           "cols  check\n");
    for (uint32_t i = 0; i < blk_n_tables(b); i++) {
        struct blk_table_info ti;
        const char *st = check_table(b, i, &ti);
        bad += strcmp(st, "ok") != 0;
        printf("  %u  %-6s  %-11llu  %-11llu  %-11llu  %-5s  %08x  %-4u  %s\n", i,
               blk_table_kind_name(ti.kind), (unsigned long long)ti.offset,
               (unsigned long long)ti.length, (unsigned long long)ti.raw_length,
               blk_codec_name(ti.codec), ti.crc32, ti.n_columns, st);
    }
    printf("\nfooter      offset %llu, %llu bytes (crc ok)\n",
           (unsigned long long)lay.footer_offset, (unsigned long long)lay.footer_bytes);
    printf("dictionaries resources %u (%llu bytes), scopes %u (%llu bytes), metrics %u (%llu "
           "bytes)\n",
           blk_n_resources(b), (unsigned long long)lay.dict_bytes[0], blk_n_scopes(b),
           (unsigned long long)lay.dict_bytes[1], blk_n_metrics(b),
           (unsigned long long)lay.dict_bytes[2]);
    printf("hot attrs   %u", blk_n_hot_attrs(b));
    for (uint32_t h = 0; h < blk_n_hot_attrs(b); h++) {
        struct mstr k = blk_hot_attr_key(b, h);
        printf("%s%.*s", h ? ", " : ": ", (int)k.len, k.p);
    }
    printf("\n");
    if (blk_signal(b) == SIG_METRICS) {
        printf("streams     %u%s\n", blk_n_streams(b),
               blk_n_streams(b) == 0 && blk_rows(b) > 0 ? " (sealed before the stream index)" : "");
    }
    printf("\nblooms (%llu bytes)\n  kind             bits         items        k  fill    "
           "seed\n",
           (unsigned long long)lay.bloom_bytes);
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        struct blk_bloom_info bi;
        blk_bloom_info(b, i, &bi);
        printf("  %-15s  %-11llu  %-11llu  %-2u %5.1f%%  %016llx%s\n", blk_bloom_kind_name(bi.kind),
               (unsigned long long)bi.nbits, (unsigned long long)bi.n_items, bi.k,
               100.0 * fill_ratio(&bi), (unsigned long long)bi.seed,
               bi.complete ? "" : "  (incomplete: not used)");
    }
    return bad ? 1 : 0;
}

static int inspect_json(blk *b, const char *path)
{
    const struct blk_meta *m = blk_meta(b);
    struct blk_layout lay;
    blk_layout(b, &lay);
    int bad = 0;
    uint64_t mn, mx;
    int64_t a, z;
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "bytes", json_integer((json_int_t)blk_file_bytes(b)));
    json_object_set_new(o, "version", json_integer(lay.version));
    json_object_set_new(o, "signal", json_string(signal_name(blk_signal(b))));
    json_object_set_new(o, "shard", json_integer(m->shard));
    json_object_set_new(o, "seal_id", json_integer((json_int_t)m->seal_id));
    json_object_set_new(o, "wal_seq", json_integer((json_int_t)m->wal_seq));
    json_object_set_new(o, "rows", json_integer((json_int_t)blk_rows(b)));
    json_object_set_new(o, "tier", json_string(blk_n_sources(b) > 0 ? "cold" : "hot"));
    json_t *srcs = json_array();
    struct blk_source src;
    for (uint32_t i = 0; blk_source(b, i, &src) == 0; i++) {
        json_array_append_new(srcs, json_pack("{s:i,s:I,s:I}", "shard", (int)src.shard, "seal_id",
                                              (json_int_t)src.seal_id, "wal_seq",
                                              (json_int_t)src.wal_seq));
    }
    json_object_set_new(o, "sources", srcs);
    json_t *zones = json_object();
    blk_time_range(b, &mn, &mx);
    if (blk_rows(b) > 0) {
        /* Nanosecond times pass 2^53: strings keep them exact for any reader. */
        char s0[32], s1[32];
        snprintf(s0, sizeof(s0), "%llu", (unsigned long long)mn);
        snprintf(s1, sizeof(s1), "%llu", (unsigned long long)mx);
        json_object_set_new(zones, "time_ns", json_pack("{s:s,s:s}", "min", s0, "max", s1));
    }
    if (blk_severity_range(b, &a, &z)) {
        json_object_set_new(zones, "severity",
                            json_pack("{s:I,s:I}", "min", (json_int_t)a, "max", (json_int_t)z));
    }
    if (blk_duration_range(b, &a, &z)) {
        json_object_set_new(zones, "duration_ns",
                            json_pack("{s:I,s:I}", "min", (json_int_t)a, "max", (json_int_t)z));
    }
    json_object_set_new(o, "zones", zones);
    json_t *tables = json_array();
    for (uint32_t i = 0; i < blk_n_tables(b); i++) {
        struct blk_table_info ti;
        const char *st = check_table(b, i, &ti);
        bad += strcmp(st, "ok") != 0;
        char crc[16];
        snprintf(crc, sizeof(crc), "%08x", ti.crc32);
        json_array_append_new(
            tables,
            json_pack("{s:s,s:I,s:I,s:I,s:s,s:s,s:i,s:s}", "kind", blk_table_kind_name(ti.kind),
                      "offset", (json_int_t)ti.offset, "length", (json_int_t)ti.length,
                      "raw_length", (json_int_t)ti.raw_length, "codec", blk_codec_name(ti.codec),
                      "crc32", crc, "columns", (int)ti.n_columns, "check", st));
    }
    json_object_set_new(o, "tables", tables);
    json_object_set_new(o, "footer",
                        json_pack("{s:I,s:I}", "offset", (json_int_t)lay.footer_offset, "length",
                                  (json_int_t)lay.footer_bytes));
    json_object_set_new(o, "dictionaries",
                        json_pack("{s:{s:i,s:I},s:{s:i,s:I},s:{s:i,s:I}}", "resources", "count",
                                  (int)blk_n_resources(b), "bytes", (json_int_t)lay.dict_bytes[0],
                                  "scopes", "count", (int)blk_n_scopes(b), "bytes",
                                  (json_int_t)lay.dict_bytes[1], "metrics", "count",
                                  (int)blk_n_metrics(b), "bytes", (json_int_t)lay.dict_bytes[2]));
    json_t *blooms = json_array();
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        struct blk_bloom_info bi;
        blk_bloom_info(b, i, &bi);
        char seed[24];
        snprintf(seed, sizeof(seed), "%016llx", (unsigned long long)bi.seed);
        json_array_append_new(blooms,
                              json_pack("{s:s,s:I,s:I,s:i,s:I,s:f,s:s,s:s,s:b}", "kind",
                                        blk_bloom_kind_name(bi.kind), "bits", (json_int_t)bi.nbits,
                                        "items", (json_int_t)bi.n_items, "k", (int)bi.k, "bits_set",
                                        (json_int_t)bi.bits_set, "fill", fill_ratio(&bi), "hash",
                                        "xxh3_64", "seed", seed, "complete", bi.complete));
    }
    json_object_set_new(o, "blooms", blooms);
    json_t *hot = json_array();
    for (uint32_t h = 0; h < blk_n_hot_attrs(b); h++) {
        struct mstr k = blk_hot_attr_key(b, h);
        json_array_append_new(hot, json_stringn(k.p, k.len)); /* NULL (dropped) if not UTF-8 */
    }
    json_object_set_new(o, "hot_attrs", hot);
    json_object_set_new(o, "ok", json_boolean(bad == 0));
    char *s = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (s == NULL) {
        fprintf(stderr, "miradb inspect: out of memory\n");
        return 2;
    }
    printf("%s\n", s);
    free(s);
    return bad ? 1 : 0;
}

int cli_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: miradb inspect FILE [--json]\n"
                   "Prints a block file's header, tables (verified), zone maps, blooms and\n"
                   "dictionaries; --json as one JSON document.\n"
                   "exit status: 0 every table verifies, 1 one does not, 2 usage error or the\n"
                   "file cannot be opened.\n");
            return 0;
        } else if (path == NULL && argv[i][0] != '-') {
            path = argv[i];
        } else {
            fprintf(stderr, "miradb inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "usage: miradb inspect FILE [--json]\n");
        return 2;
    }
    blk *b;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE | BLK_OPEN_LENIENT_ROOT, &b, err, sizeof(err));
    if (rc < 0) {
        if (json) {
            json_t *o = json_pack("{s:s,s:b,s:s}", "file", path, "ok", 0, "error",
                                  err[0] ? err : strerror(-rc));
            char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
            if (s != NULL) {
                printf("%s\n", s);
            }
            free(s);
            json_decref(o);
        }
        fprintf(stderr, "miradb inspect: %s: %s\n", path, err[0] ? err : strerror(-rc));
        return rc == -EBADMSG ? 1 : 2;
    }
    rc = json ? inspect_json(b, path) : inspect_text(b, path);
    blk_unref(b);
    return rc;
}

/* ---- fsck ---- */

struct flist {
    char **v;
    size_t n, cap;
};

static int flist_add(struct flist *l, const char *s)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof(*nv));
        if (nv == NULL) {
            return -ENOMEM;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n] = strdup(s);
    if (l->v[l->n] == NULL) {
        return -ENOMEM;
    }
    l->n++;
    return 0;
}

static void flist_free(struct flist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i]);
    }
    free(l->v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every DATA/<signal>/NAME.blk, sorted; unfinished seals (.tmp) are not blocks. */
static int list_blocks(const char *data, struct flist *out)
{
    static const char *const sigs[] = {"logs", "traces", "metrics"};
    for (int s = 0; s < 3; s++) {
        char d[4096];
        snprintf(d, sizeof(d), "%s/%s", data, sigs[s]);
        DIR *dp = opendir(d);
        if (dp == NULL) {
            if (errno == ENOENT) {
                continue;
            }
            return -errno;
        }
        struct dirent *e;
        while ((e = readdir(dp)) != NULL) {
            size_t nl = strlen(e->d_name);
            if (nl < 5 || strcmp(e->d_name + nl - 4, ".blk") != 0) {
                continue;
            }
            char p[8192];
            snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
            if (flist_add(out, p) < 0) {
                closedir(dp);
                return -ENOMEM;
            }
        }
        closedir(dp);
    }
    qsort(out->v, out->n, sizeof(*out->v), cmp_str);
    return 0;
}

static void progress(size_t done, size_t total, uint64_t bytes)
{
    char bar[41];
    size_t fill = total ? done * 40 / total : 40;
    for (size_t i = 0; i < 40; i++) {
        bar[i] = i < fill ? '#' : '.';
    }
    bar[40] = '\0';
    fprintf(stderr, "\rfsck [%s] %zu/%zu blocks, %.1f MiB", bar, done, total,
            (double)bytes / (1024.0 * 1024.0));
    fflush(stderr);
}

int cli_fsck(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        bool help = argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0);
        fprintf(help ? stdout : stderr,
                "usage: miradb fsck DATA\n"
                "Verifies every table of every block under DATA/<signal>/*.blk and lists\n"
                "every failure.\n"
                "exit status: 0 all verify, 1 damage found, 2 usage error or DATA cannot be\n"
                "read.\n");
        return help ? 0 : 2;
    }
    const char *data = argv[1];
    struct stat st;
    if (stat(data, &st) < 0) {
        fprintf(stderr, "miradb fsck: %s: %s\n", data, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "miradb fsck: %s: not a directory\n", data);
        return 2;
    }
    struct flist files = {0}, failures = {0};
    int rc = list_blocks(data, &files);
    if (rc < 0) {
        fprintf(stderr, "miradb fsck: %s: %s\n", data, strerror(-rc));
        flist_free(&files);
        return 2;
    }
    bool tty = isatty(STDERR_FILENO);
    uint64_t bytes = 0, rows = 0;
    for (size_t i = 0; i < files.n; i++) {
        if (tty) {
            progress(i, files.n, bytes);
        }
        char line[8192 + 300], err[256];
        blk *b;
        rc = blk_open_ex(files.v[i], BLK_OPEN_NO_CACHE | BLK_OPEN_LENIENT_ROOT, &b, err,
                         sizeof(err));
        if (rc < 0) {
            snprintf(line, sizeof(line), "%s: %s", files.v[i], err[0] ? err : strerror(-rc));
            flist_add(&failures, line);
            continue;
        }
        for (uint32_t t = 0; t < blk_n_tables(b); t++) {
            struct blk_table_info ti;
            const char *why = check_table(b, t, &ti);
            if (strcmp(why, "ok") != 0) {
                snprintf(line, sizeof(line), "%s: %s table (offset %llu, %llu bytes): %s",
                         files.v[i], blk_table_kind_name(ti.kind), (unsigned long long)ti.offset,
                         (unsigned long long)ti.length, why);
                flist_add(&failures, line);
            }
        }
        bytes += blk_file_bytes(b);
        rows += blk_rows(b);
        blk_unref(b);
    }
    if (tty) {
        progress(files.n, files.n, bytes);
        fputc('\n', stderr);
    }
    for (size_t i = 0; i < failures.n; i++) {
        printf("FAIL %s\n", failures.v[i]);
    }
    printf("fsck: %zu blocks, %llu rows, %llu bytes verified, %zu failure%s\n", files.n,
           (unsigned long long)rows, (unsigned long long)bytes, failures.n,
           failures.n == 1 ? "" : "s");
    rc = failures.n ? 1 : 0;
    flist_free(&files);
    flist_free(&failures);
    return rc;
}
