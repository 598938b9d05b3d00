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
