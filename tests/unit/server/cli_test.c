/*
 * cli_test.c - `miradb inspect` and `miradb fsck` (server/cli.c) on real
 * block files: exit codes, the JSON document, and fsck listing exactly the
 * damaged blocks and tables.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "server/cli.h"
#include "storage/block.h"
#include "storage/compact.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(cli, .init = fresh_dir);

/* Runs |fn| with stdout captured into |out| (NUL-terminated). */
static int run(int (*fn)(int, char **), int argc, char **argv, char *out, size_t cap)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/stdout.txt", dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    int rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    return rc;
}

static void make_block(const char *sigdir, enum signal sig, uint64_t seed, uint32_t shard,
                       char *path, size_t cap)
{
    oblock *ob = gen_oblock(sig, seed, 200, 40);
    struct blk_meta m = {.shard = shard, .wal_seq = seed * 10, .seal_id = seed};
    cr_assert_eq(blk_write(sigdir, ob, 200, &m, path, cap), 0);
    oblock_free(ob);
}

static void flip_at(const char *path, uint64_t off)
{
    int fd = open(path, O_RDWR);
    uint8_t c;
    cr_assert(fd >= 0);
    cr_assert_eq(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x10;
    cr_assert_eq(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

Test(cli, inspect_describes_a_block_in_text_and_json)
{
    static char out[1 << 16];
    char path[512];
    make_block(dir, SIG_TRACES, 5, 2, path, sizeof(path));
    char *a1[] = {"inspect", path, NULL};
    cr_assert_eq(run(cli_inspect, 2, a1, out, sizeof(out)), 0);
    cr_assert(strstr(out, "signal      traces") != NULL, "%s", out);
    cr_assert(strstr(out, "rows        200") != NULL, "%s", out);
    cr_assert(strstr(out, "trace_ids") != NULL, "%s", out);
    cr_assert(strstr(out, "duration") != NULL, "%s", out);

    char *a2[] = {"inspect", path, "--json", NULL};
    cr_assert_eq(run(cli_inspect, 3, a2, out, sizeof(out)), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    cr_assert_not_null(o, "%s: %s", je.text, out);
    cr_assert_str_eq(json_string_value(json_object_get(o, "signal")), "traces");
    cr_assert_eq(json_integer_value(json_object_get(o, "rows")), 200);
    cr_assert_eq(json_integer_value(json_object_get(o, "shard")), 2);
    cr_assert_eq(json_integer_value(json_object_get(o, "wal_seq")), 50);
    cr_assert(json_is_true(json_object_get(o, "ok")));
    json_t *tables = json_object_get(o, "tables");
    cr_assert_eq(json_array_size(tables), 3);
    static const char *const kinds[] = {"root", "attrs", "detail"};
    for (size_t i = 0; i < 3; i++) {
        json_t *t = json_array_get(tables, i);
        cr_assert_str_eq(json_string_value(json_object_get(t, "kind")), kinds[i]);
        cr_assert_str_eq(json_string_value(json_object_get(t, "check")), "ok");
        cr_assert_gt(json_integer_value(json_object_get(t, "columns")), 0);
    }
    cr_assert_eq(json_array_size(json_object_get(o, "blooms")), 3); /* no token bloom */
    json_t *zone = json_object_get(json_object_get(o, "zones"), "time_ns");
    cr_assert_not_null(zone);
    json_decref(o);

    /* A damaged attribute table: described, reported, exit 1. */
    blk *b;
    cr_assert_eq(blk_open(path, &b, NULL, 0), 0);
    struct blk_table_info ti;
    blk_table_info(b, 1, &ti);
    blk_unref(b);
    flip_at(path, ti.offset + ti.length / 2);
    cr_assert_eq(run(cli_inspect, 3, a2, out, sizeof(out)), 1);
    o = json_loads(out, 0, &je);
    cr_assert_not_null(o);
    cr_assert(json_is_false(json_object_get(o, "ok")));
    cr_assert_str_eq(json_string_value(
                         json_object_get(json_array_get(json_object_get(o, "tables"), 1), "check")),
                     "crc mismatch");
    json_decref(o);

    char *a3[] = {"inspect", "/nonexistent-h9.blk", NULL};
    cr_assert_eq(run(cli_inspect, 2, a3, out, sizeof(out)), 2);
    char *a4[] = {"inspect", NULL};
    cr_assert_eq(run(cli_inspect, 1, a4, out, sizeof(out)), 2);
}

Test(cli, fsck_lists_every_damaged_block_and_table_and_fails)
{
    static char out[1 << 16];
    char logs[300], traces[300], p[6][512];
    snprintf(logs, sizeof(logs), "%s/logs", dir);
    snprintf(traces, sizeof(traces), "%s/traces", dir);
    cr_assert_eq(mkdir(logs, 0755), 0);
    cr_assert_eq(mkdir(traces, 0755), 0);
    for (int i = 0; i < 3; i++) {
        make_block(logs, SIG_LOGS, 10 + i, 0, p[i], sizeof(p[i]));
        make_block(traces, SIG_TRACES, 20 + i, 1, p[3 + i], sizeof(p[3 + i]));
    }
    /* An unfinished seal is not a block. */
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s/s0000-00000000000000ff.blk.tmp", logs);
    FILE *f = fopen(tmp, "w");
    fputs("partial", f);
    fclose(f);

    char *a[] = {"fsck", dir, NULL};
    cr_assert_eq(run(cli_fsck, 2, a, out, sizeof(out)), 0, "%s", out);
    cr_assert(strstr(out, "fsck: 6 blocks, 1200 rows") != NULL, "%s", out);
    cr_assert(strstr(out, " 0 failures") != NULL, "%s", out);

    /* Damage: a detail table, a truncated file, a footer. */
    blk *b;
    struct blk_table_info ti;
    struct blk_layout lay;
    cr_assert_eq(blk_open(p[1], &b, NULL, 0), 0);
    blk_table_info(b, 2, &ti);
    blk_unref(b);
    flip_at(p[1], ti.offset + 3);
    cr_assert_eq(truncate(p[4], 1000), 0);
    cr_assert_eq(blk_open(p[5], &b, NULL, 0), 0);
    blk_layout(b, &lay);
    blk_unref(b);
    flip_at(p[5], lay.footer_offset + lay.footer_bytes / 2);

    cr_assert_eq(run(cli_fsck, 2, a, out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, " 3 failures") != NULL, "%s", out);
    char want[800];
    snprintf(want, sizeof(want), "FAIL %s: detail table", p[1]);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof(want), "FAIL %s: truncated", p[4]);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof(want), "FAIL %s: footer checksum mismatch", p[5]);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    int lines = 0;
    for (const char *c = out; (c = strstr(c, "FAIL ")) != NULL; c++) {
        lines++;
    }
    cr_assert_eq(lines, 3, "%s", out);

    char *bad[] = {"fsck", "/nonexistent-h9", NULL};
    cr_assert_eq(run(cli_fsck, 2, bad, out, sizeof(out)), 2);
}

Test(cli, inspect_names_a_cold_blocks_inputs)
{
    static char out[1 << 16];
    char p1[512], p2[512], cold[512], err[256];
    make_block(dir, SIG_LOGS, 3, 0, p1, sizeof(p1));
    make_block(dir, SIG_LOGS, 4, 1, p2, sizeof(p2));
    blk *in[2];
    cr_assert_eq(blk_open(p1, &in[0], err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(blk_open(p2, &in[1], err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(compact_merge(dir, in, 2, 9, 3, NULL, NULL, cold, sizeof(cold)), 0);
    blk_unref(in[0]);
    blk_unref(in[1]);
    char *a1[] = {"inspect", cold, NULL};
    cr_assert_eq(run(cli_inspect, 2, a1, out, sizeof(out)), 0);
    cr_assert(strstr(out, "rows        400\n") != NULL, "%s", out);
    cr_assert(strstr(out, "tier        cold, compacted from shard 0 seal 3 (wal seq 30), shard 1 "
                          "seal 4 (wal seq 40)\n") != NULL,
              "%s", out);
    char *a2[] = {"inspect", "--json", cold, NULL};
    cr_assert_eq(run(cli_inspect, 3, a2, out, sizeof(out)), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    cr_assert_not_null(o, "%s", out);
    cr_assert_str_eq(json_string_value(json_object_get(o, "tier")), "cold");
    json_t *src = json_object_get(o, "sources");
    cr_assert_eq(json_array_size(src), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(src, 1), "seal_id")), 4);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(src, 1), "wal_seq")), 40);
    cr_assert_eq(json_integer_value(json_object_get(o, "shard")), 65535);
    json_decref(o);
    char *a3[] = {"inspect", p1, NULL};
    cr_assert_eq(run(cli_inspect, 2, a3, out, sizeof(out)), 0);
    cr_assert(strstr(out, "tier        hot\n") != NULL, "%s", out);
}
