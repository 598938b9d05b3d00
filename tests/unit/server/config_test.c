#include <criterion/criterion.h>
#include <errno.h>

#include "server/config.h"

Test(config, defaults_then_flags)
{
    struct config c;
    char err[200];
    char *argv[] = {"serve", "--data",  "/tmp/x", "--ack",         "fsync",       "--memory-budget",
                    "64MiB", "--queue", "3",      "--grpc-listen", "127.0.0.1:0", NULL};
    cr_assert_eq(config_parse(&c, 11, argv, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.data_dir, "/tmp/x");
    cr_assert_eq(c.ack, SHARD_ACK_FSYNC);
    cr_assert_eq(c.memory_budget, 64ull << 20);
    cr_assert_eq(c.queue, 3);
    cr_assert_str_eq(c.grpc_listen, "127.0.0.1:0");
    cr_assert_str_eq(c.http_listen, "127.0.0.1:4318");
    cr_assert_eq(c.admit_wait_ms, 5000);
    cr_assert_eq(c.max_request_bytes, 64ull << 20);
    cr_assert_geq(c.io_threads, 1);
}

Test(config, query_memory_defaults_to_a_quarter_of_the_budget_unless_set)
{
    struct config c;
    char err[200];
    char *a0[] = {"serve", NULL};
    cr_assert_eq(config_parse(&c, 1, a0, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.query_memory, 64ull << 20); /* the 256 MiB default budget */
    char *a1[] = {"serve", "--memory-budget", "64MiB", NULL};
    cr_assert_eq(config_parse(&c, 3, a1, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.query_memory, 16ull << 20);
    char *a2[] = {"serve", "--query-memory", "10MiB", "--memory-budget", "1GiB", NULL};
    cr_assert_eq(config_parse(&c, 5, a2, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.query_memory, 10ull << 20);
    char *a3[] = {"serve", "--memory-budget", "1GiB", "--query-memory", "2GiB", NULL};
    cr_assert_eq(config_parse(&c, 5, a3, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.query_memory, 2ull << 30);
}

Test(config, bad_values_are_refused_with_a_message)
{
    struct config c;
    char err[200];
    char *a1[] = {"serve", "--ack", "sometimes", NULL};
    cr_assert_eq(config_parse(&c, 3, a1, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "wal|fsync") != NULL, "%s", err);
    char *a2[] = {"serve", "--queue", "12x", NULL};
    cr_assert_eq(config_parse(&c, 3, a2, err, sizeof(err)), -EINVAL);
    char *a3[] = {"serve", "--memory-budget", "1k", NULL};
    cr_assert_eq(config_parse(&c, 3, a3, err, sizeof(err)), -EINVAL, "below the minimum");
    char *a4[] = {"serve", "--no-such-flag", NULL};
    cr_assert_eq(config_parse(&c, 2, a4, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "--no-such-flag") != NULL, "%s", err);
}

/* ---- --config FILE and --print-config ---- */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/tmpdir.h"

/* Writes |text| to a fresh file and returns its path (static buffer). */
static const char *conf(const char *text)
{
    static char dir[256], path[320];
    if (dir[0] == '\0') {
        cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    }
    static int n;
    snprintf(path, sizeof(path), "%s/c%d.conf", dir, n++);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

Test(config, the_file_sets_every_value_type)
{
    struct config c;
    char err[512];
    const char *p = conf("# every type\n"
                         "data = \"/srv/mira db\"   # STR, quoted\n"
                         "http-listen = 0.0.0.0:9318\n"
                         "queue = 17                 # INT\n"
                         "memory-budget = 1.5GiB     # BYTES\n"
                         "ack = seal                 # ENUM\n"
                         "body-timeout = 90s         # DURATION\n"
                         "retention-age = 7d\n"
                         "query-max-rows = 2M        # COUNT\n");
    char *argv[] = {"serve", "--config", (char *)p, NULL};
    cr_assert_eq(config_parse(&c, 3, argv, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.config_file, p);
    cr_assert_str_eq(c.data_dir, "/srv/mira db");
    cr_assert_str_eq(c.http_listen, "0.0.0.0:9318");
    cr_assert_str_eq(c.grpc_listen, "127.0.0.1:4317");
    cr_assert_eq(c.queue, 17);
    cr_assert_eq(c.memory_budget, 3ull << 29);
    cr_assert_eq(c.ack, SHARD_ACK_SEAL);
    cr_assert_eq(c.body_timeout_ms, 90000);
    cr_assert_eq(c.retention_age_ms, 7ull * 86400000);
    cr_assert_eq(c.query_max_rows, 2000000);
    cr_assert_eq(c.admit_wait_ms, 5000, "an absent key keeps its default");
}

Test(config, flags_override_the_file_wherever_they_stand)
{
    struct config c;
    char err[512];
    const char *p = conf("queue = 17\nack = seal\nmemory-budget = 1GiB\n");
    char *argv[] = {"serve", "--queue", "5", "--config", (char *)p, "--ack=fsync", NULL};
    cr_assert_eq(config_parse(&c, 6, argv, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(c.queue, 5);
    cr_assert_eq(c.ack, SHARD_ACK_FSYNC);
    cr_assert_eq(c.memory_budget, 1ull << 30);
}

static void file_refused(const char *text, const char *want_after_path)
{
    struct config c;
    char err[512], want[700];
    const char *p = conf(text);
    char *argv[] = {"serve", "--config", (char *)p, NULL};
    cr_assert_eq(config_parse(&c, 3, argv, err, sizeof(err)), -EINVAL, "accepted: %s", text);
    snprintf(want, sizeof(want), "%s%s", p, want_after_path);
    cr_assert_str_eq(err, want);
}

Test(config, file_refusals_name_the_file_line_and_key)
{
    file_refused("queue = 3\n\nmemory-budgett = 1GiB\n",
                 ":3: memory-budgett: unknown key (did you mean memory-budget?)");
    file_refused("tls = on\n", ":1: tls: unknown key (miradb serve --help lists the keys)");
    file_refused("Data = /x\n", ":1: Data: unknown key (did you mean data?)");
    file_refused("# x\nack = sometimes\n", ":2: ack: 'sometimes' is not one of wal|fsync|seal");
    file_refused("queue = 12x\n", ":1: queue: '12x' is not an integer");
    file_refused("memory-budget = lots\n",
                 ":1: memory-budget: 'lots' is not a size (e.g. 256MiB, 1048576)");
    file_refused("memory-budget = 1k\n", ":1: memory-budget: '1k' is outside 16MiB..1048576GiB");
    file_refused("body-timeout = 0\n", ":1: body-timeout: '0' is outside 1ms..1h");
    file_refused("retention-bytes = 1e30\n",
                 ":1: retention-bytes: '1e30' is outside 0..1048576GiB");
    file_refused("query-timeout = inf\n", ":1: query-timeout: 'inf' is outside 1ms..1h");
    file_refused("memory-budget = nan\n",
                 ":1: memory-budget: 'nan' is not a size (e.g. 256MiB, 1048576)");
    file_refused("http-listen = localhost\n",
                 ":1: http-listen: 'localhost' is not ADDR:PORT (e.g. 127.0.0.1:4318, "
                 "0.0.0.0:4317, [::]:4318)");
    file_refused("grpc-listen = \"127.0.0.1:70000\"\n",
                 ":1: grpc-listen: '127.0.0.1:70000' is not ADDR:PORT (e.g. 127.0.0.1:4318, "
                 "0.0.0.0:4317, [::]:4318)");
    file_refused("body-timeout = 30 s\n",
                 ":1: body-timeout: '30 s' is not a duration (e.g. 500ms, 30s, 5m, 24h, 7d)");
    file_refused("config = /etc/other.conf\n", ":1: config: a flag only, not a key of the file");
    file_refused("print-config = 1\n", ":1: print-config: a flag only, not a key of the file");
    file_refused("--queue = 3\n", ":1: --queue: write the key without the dashes of its flag");
}

Test(config, a_key_set_twice_is_refused_naming_both_lines)
{
    file_refused("queue = 3\nack = wal\n\nqueue = 4\n", ":4: queue: set twice (first on line 1)");
}

Test(config, an_unreadable_file_and_a_second_config_are_refused)
{
    struct config c;
    char err[512];
    char *a1[] = {"serve", "--config", "/nonexistent/miradb.conf", NULL};
    cr_assert_eq(config_parse(&c, 3, a1, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "/nonexistent/miradb.conf: No such file or directory");
    const char *p = conf("queue = 3\n");
    char *a2[] = {"serve", "--config", (char *)p, "--config", (char *)p, NULL};
    cr_assert_eq(config_parse(&c, 5, a2, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "--config given twice");
    char *a3[] = {"serve", "--config", NULL};
    cr_assert_eq(config_parse(&c, 2, a3, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "missing value for: --config");
    char *a5[] = {"serve", "--data", "/srv/a\nb", NULL};
    cr_assert_eq(config_parse(&c, 3, a5, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "--data: contains a control character (byte 0x0a)");
    char *a4[] = {"serve", "--queue", "0", NULL};
    cr_assert_eq(config_parse(&c, 3, a4, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "--queue: '0' is outside 1..1048576");
}

/* config_print's text, malloc'd. Through a temporary file rather than
 * open_memstream, whose buffer gcc 12 takes for a dangling local. */
static char *print_of(const struct config *c)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    config_print(f, c);
    long len = ftell(f);
    char *buf = calloc(1, (size_t)len + 1);
    rewind(f);
    cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return buf;
}

Test(config, print_config_reads_back_to_the_same_settings)
{
    struct config a, b;
    char err[512];
    const char *p = conf("data = \"/srv/a \\\"q\\\" b\"\nmemory-budget = 1000000001\n"
                         "block-max-age = 1500ms\nretention-bytes = 3MiB\nlog-level = warn\n");
    char *argv[] = {"serve", "--config",        (char *)p, "--queue",
                    "9",     "--ack",           "fsync",   "--shards",
                    "3",     "--query-timeout", "90s",     "--admit-wait",
                    "250",   "--retention-age", "36h",     NULL};
    cr_assert_eq(config_parse(&a, 15, argv, err, sizeof(err)), 0, "%s", err);
    char *text = print_of(&a);
    cr_assert(strstr(text, "\ndata = \"/srv/a \\\"q\\\" b\"\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nmemory-budget = 1000000001\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nblock-max-age = 1500ms\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nretention-bytes = 3MiB\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nretention-age = 36h\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nquery-timeout = 90s\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nbody-timeout = 30s\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nmax-request-bytes = 64MiB\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nquery-max-rows = 1000000\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nack = fsync\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nlog-level = warn\n") != NULL, "%s", text);
    cr_assert(strstr(text, "\nretention-age = 0\n") == NULL, "%s", text);

    const char *p2 = conf(text);
    char *argv2[] = {"serve", "--config", (char *)p2, NULL};
    cr_assert_eq(config_parse(&b, 3, argv2, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(b.config_file, p2);
    memset(a.config_file, 0, sizeof(a.config_file));
    memset(b.config_file, 0, sizeof(b.config_file));
    cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0, "printed:\n%s", text);
    char *again = print_of(&b);
    cr_assert_str_eq(again, text);
    free(again);
    free(text);
}

Test(config, print_config_of_the_defaults_lists_every_key_once)
{
    struct config c;
    char err[512];
    char *argv[] = {"serve", NULL};
    cr_assert_eq(config_parse(&c, 1, argv, err, sizeof(err)), 0, "%s", err);
    char *text = print_of(&c);
    const char *want_start = "# miradb serve --print-config: the effective configuration "
                             "(defaults, then\n# --config FILE, then flags); readable back with "
                             "--config.\ndata = \"./data\"\ngrpc-listen = \"127.0.0.1:4317\"\n"
                             "http-listen = \"127.0.0.1:4318\"\n";
    cr_assert_eq(strncmp(text, want_start, strlen(want_start)), 0, "%s", text);
    cr_assert(strstr(text, "\nblock-max-age = 0\nretention-age = 0\nretention-bytes = 0\n") != NULL,
              "%s", text);
    cr_assert(strstr(text, "\nshutdown-timeout = 10s\nlog-level = info\n") != NULL, "%s", text);
    free(text);
}

/* deploy/miradb.conf, from the checkout ($MIRADB_VECTORS/../../ when set). */
static char *example_conf(void)
{
    char path[600];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s%sdeploy/miradb.conf", v != NULL ? v : "",
             v != NULL ? "/../../" : "");
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(config, the_example_file_lists_every_key_with_its_default)
{
    struct config def, ex;
    char err[512];
    char *text = example_conf();
    /* Uncomment every "# key = value" line: the result must parse ... */
    char *on = calloc(1, strlen(text) + 1);
    size_t o = 0;
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line + 1) : strlen(line);
        size_t k = 2;
        while (k < len && ((line[k] >= 'a' && line[k] <= 'z') || line[k] == '-')) {
            k++;
        }
        bool setting = len > 2 && line[0] == '#' && line[1] == ' ' && k > 2 &&
                       strncmp(line + k, " = ", 3) == 0;
        memcpy(on + o, line + (setting ? 2 : 0), len - (setting ? 2 : 0));
        o += len - (setting ? 2 : 0);
        line += len;
    }
    const char *p = conf(on);
    char *a1[] = {"serve", "--config", (char *)p, NULL};
    cr_assert_eq(config_parse(&ex, 3, a1, err, sizeof(err)), 0, "%s", err);
    /* ... to the defaults, but for the data directory and the per-core counts. */
    char *a0[] = {"serve", NULL};
    cr_assert_eq(config_parse(&def, 1, a0, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(ex.data_dir, "/var/lib/miradb");
    strcpy(ex.data_dir, def.data_dir);
    ex.io_threads = def.io_threads;
    ex.shards = def.shards;
    ex.query_workers = def.query_workers;
    memset(ex.config_file, 0, sizeof(ex.config_file));
    char *pd = print_of(&def), *pe = print_of(&ex);
    cr_expect_str_eq(pe, pd);

    /* Every key of the option table is there, once. */
    for (char *line = strchr(pd, '\n'); line != NULL; line = strchr(line + 1, '\n')) {
        char key[80], pat[100];
        if (sscanf(line + 1, "%79[a-z-] = ", key) != 1) {
            continue;
        }
        snprintf(pat, sizeof(pat), "\n%s = ", key);
        char *at = strstr(on, pat);
        cr_expect_not_null(at, "deploy/miradb.conf lacks the key %s", key);
        cr_expect(at == NULL || strstr(at + 1, pat) == NULL, "%s twice", key);
    }
    free(pd);
    free(pe);
    free(on);
    free(text);
}

Test(config, header_and_stream_limits_have_safe_defaults_and_ranges)
{
    struct config c;
    char err[200];
    char *a0[] = {"serve", NULL};
    cr_assert_eq(config_parse(&c, 1, a0, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.max_header_bytes, 64u << 10);
    cr_expect_eq(c.max_headers, 100);
    cr_expect_eq(c.grpc_max_streams, 128);
    cr_expect_eq(c.grpc_max_header_list, 16u << 10);
    char *a1[] = {"serve", "--max-header-bytes",
                  "8KiB",  "--max-headers",
                  "20",    "--grpc-max-streams",
                  "4",     "--grpc-max-header-list",
                  "2KiB",  NULL};
    cr_assert_eq(config_parse(&c, 9, a1, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(c.max_header_bytes, 8u << 10);
    cr_expect_eq(c.max_headers, 20);
    cr_expect_eq(c.grpc_max_streams, 4);
    cr_expect_eq(c.grpc_max_header_list, 2u << 10);
    char *a2[] = {"serve", "--max-headers", "7", NULL};
    cr_assert_eq(config_parse(&c, 3, a2, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "--max-headers: '7' is outside 8..10000");
    char *a3[] = {"serve", "--grpc-max-streams", "0", NULL};
    cr_assert_eq(config_parse(&c, 3, a3, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "--grpc-max-streams: '0' is outside 1..65536");
    char *a4[] = {"serve", "--max-header-bytes", "17MiB", NULL};
    cr_assert_eq(config_parse(&c, 3, a4, err, sizeof(err)), -EINVAL);
    cr_expect(strstr(err, "--max-header-bytes: ") == err, "%s", err);
}
