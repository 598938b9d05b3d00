/*
 * instance_test.c - one daemon per port and per data directory (issue 9,
 * finding 9). The listeners use SO_REUSEPORT among their own I/O threads,
 * which the kernel would also grant a second miradb of the same user: it
 * then took part of the traffic into its own data directory. A second
 * `miradb serve` on a port in use, or on a data directory in use, must
 * refuse to start with one clear line and a non-zero exit, and the first
 * must go on taking every export.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storage/batch.h"
#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define LOGS_GRPC_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

static const char *bin(void)
{
    const char *b = getenv("MIRADB_BIN");
    return b != NULL && *b != '\0' ? b : "build/asan/miradb";
}

/*
 * Runs `miradb serve --data DATA --http-listen H --grpc-listen G` with
 * stderr into |out| and waits for it to exit (returns its exit status), or
 * to start serving (its listening line appears: it is SIGKILLed and -1
 * returned), 30 s at most.
 */
static int run_second(const char *data, const char *http, const char *grpc, char *out, size_t cap)
{
    char log[] = "/tmp/miradb-second-XXXXXX";
    int lfd = mkstemp(log);
    cr_assert_geq(lfd, 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127);
        }
        int nfd = open("/dev/null", O_RDWR);
        dup2(nfd, 0);
        dup2(lfd, 1);
        dup2(lfd, 2);
        execl(bin(), bin(), "serve", "--data", data, "--http-listen", http, "--grpc-listen", grpc,
              "--shards", "1", "--io-threads", "2", (char *)NULL);
        _exit(127);
    }
    close(lfd);
    int status = -1, st;
    long long deadline = tclock_ms() + 30000;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        size_t len;
        char *text = (char *)httpc_read_file(log, &len);
        bool serving = text != NULL && strstr(text, "event=listening") != NULL;
        free(text);
        if (serving || tclock_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            break;
        }
        tclock_nap_ms(10);
    }
    size_t len;
    char *text = (char *)httpc_read_file(log, &len);
    snprintf(out, cap, "%s", text != NULL ? text : "");
    free(text);
    unlink(log);
    return status;
}

/* 20 exports on fresh connections, half OTLP/HTTP and half gRPC: all must
 * be acknowledged by |d| (a second daemon on the port would take some). */
static void twenty_exports(const struct daemon *d, uint64_t id0)
{
    for (int i = 0; i < 20; i++) {
        size_t len;
        uint8_t *body = dump_request(SIG_LOGS, false, id0 + (uint64_t)i * 10, 10, &len);
        cr_assert_not_null(body);
        if (i % 2 == 0) {
            const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
            struct http_resp r;
            cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/logs", hdrs, body, len, 0, &r),
                         0);
            cr_expect_eq(r.status, 200, "HTTP export %d: %d", i, r.status);
            http_resp_free(&r);
        } else {
            size_t flen;
            uint8_t *framed = h2c_frame(body, len, false, &flen);
            struct h2c_call c = {0};
            cr_assert_eq(h2c_unary(d->grpc_port, LOGS_GRPC_PATH, NULL, framed, flen, &c), 0);
            cr_expect_eq(c.grpc_status, 0, "gRPC export %d: %d %s", i, c.grpc_status,
                         c.grpc_message);
            h2c_call_free(&c);
            free(framed);
        }
        free(body);
    }
}

static double logs_records(const struct daemon *d)
{
    return daemon_metric(d,
                         "miradb_otlp_records_total{signal=\"logs\",transport=\"http_protobuf\"}") +
           daemon_metric(d, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}");
}

Test(instance, a_second_daemon_on_a_port_in_use_refuses_to_start_and_the_first_serves_on)
{
    struct daemon d;
    char other[] = "/tmp/miradb-other-XXXXXX", addr[64], out[8192], want[128];
    const char *args[] = {"--io-threads", "2", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    cr_assert_not_null(mkdtemp(other));

    /* Its own data directory, the first one's HTTP port. */
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", d.http_port);
    int st = run_second(other, addr, "127.0.0.1:0", out, sizeof(out));
    cr_expect_eq(st, 1, "second daemon on the HTTP port: status %d, log:\n%s", st, out);
    snprintf(want, sizeof(want), "%s is already in use by another process", addr);
    cr_expect(strstr(out, want) != NULL, "no clear message for the HTTP port; log:\n%s", out);

    /* ... and on the gRPC port. */
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", d.grpc_port);
    st = run_second(other, "127.0.0.1:0", addr, out, sizeof(out));
    cr_expect_eq(st, 1, "second daemon on the gRPC port: status %d, log:\n%s", st, out);
    snprintf(want, sizeof(want), "%s is already in use by another process", addr);
    cr_expect(strstr(out, want) != NULL, "no clear message for the gRPC port; log:\n%s", out);

    /* The first still takes every export, on each of its I/O threads' sockets. */
    twenty_exports(&d, 1000);
    cr_expect_eq(logs_records(&d), 200);
    cr_expect_eq(daemon_stop(&d), 0);

    struct dump_stats ds;
    char err[256];
    cr_assert_eq(dump_data_dir(other, NULL, NULL, &ds, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(dump_rows(&ds, SIG_LOGS), 0, "the refused daemon stored rows");
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", other);
    cr_expect_eq(system(cmd), 0);
}

Test(instance, a_second_daemon_on_a_data_directory_in_use_refuses_to_start)
{
    struct daemon d;
    char out[8192], want[400];
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    twenty_exports(&d, 0);

    int st = run_second(d.data_dir, "127.0.0.1:0", "127.0.0.1:0", out, sizeof(out));
    cr_expect_eq(st, 1, "second daemon on the data directory: status %d, log:\n%s", st, out);
    snprintf(want, sizeof(want), "data directory %s is in use by another miradb (pid %d)",
             d.data_dir, (int)d.pid);
    cr_expect(strstr(out, want) != NULL, "no clear message naming the directory and pid; log:\n%s",
              out);

    /* The first is untouched: nothing replayed or cut its WAL under it. */
    twenty_exports(&d, 10000);
    cr_expect_eq(logs_records(&d), 400);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Once it is gone the directory is free again, and holds every record. */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", d.data_dir);
    cr_assert_eq(daemon_start(&d, dir, NULL), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_open_block_rows{signal=\"logs\"}"), 400);
    cr_expect_eq(daemon_stop(&d), 0);
}
