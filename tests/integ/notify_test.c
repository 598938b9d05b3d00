/*
 * notify_test.c - systemd readiness without libsystemd (issue 15): with
 * NOTIFY_SOCKET naming a unix datagram socket this test owns (a path, or
 * an abstract "@name"), the daemon sends exactly "READY=1" once it serves
 * (/ready is 200) and "STOPPING=1" on SIGTERM; a socket nobody listens on
 * does not keep it from serving.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"
#include "tests/util/tmpdir.h"

/* Binds a datagram socket at |name| ("/path" or "@abstract") and points
 * NOTIFY_SOCKET at it, for the daemon this process starts next. */
static int listen_notify(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    cr_assert_lt(len, sizeof(sa.sun_path));
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@') {
        sa.sun_path[0] = '\0';
    }
    socklen_t sl =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '@' ? 0 : 1));
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sl), 0, "bind %s: %s", name, strerror(errno));
    cr_assert_eq(setenv("NOTIFY_SOCKET", name, 1), 0);
    return fd;
}

/* The next datagram within |ms|, into |buf|; false when none came. */
static bool next_msg(int fd, char *buf, size_t cap, int ms)
{
    long long deadline = tclock_ms() + ms;
    for (;;) {
        long long left = deadline - tclock_ms();
        if (left < 0) {
            return false;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) == 1) {
            ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);
            cr_assert_geq(n, 0, "recv: %s", strerror(errno));
            buf[n] = '\0';
            return true;
        }
    }
}

/* The datagrams of one daemon's life: any replay status lines, READY,
 * STOPPING, and nothing else. */
static void expect_ready_then_stopping(int fd)
{
    struct daemon d;
    char msg[512], want[256];
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    bool got = next_msg(fd, msg, sizeof(msg), 30000);
    /* A slow (sanitizer) start may report replay progress before READY. */
    for (int i = 0; got && i < 100 && strstr(msg, "STATUS=replaying the WAL") != NULL; i++) {
        got = next_msg(fd, msg, sizeof(msg), 30000);
    }
    cr_assert(got, "no READY datagram");
    snprintf(want, sizeof(want), "READY=1\nSTATUS=serving: grpc 127.0.0.1:%d, http 127.0.0.1:%d",
             d.grpc_port, d.http_port);
    cr_expect_str_eq(msg, want);
    /* Ready means serving: /ready already answers 200 (daemon_start saw it). */
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "GET", "/ready", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    cr_expect(!next_msg(fd, msg, sizeof(msg), 200), "a second datagram while serving: %s", msg);

    cr_assert_eq(daemon_stop(&d), 0);
    cr_assert(next_msg(fd, msg, sizeof(msg), 1000), "no STOPPING datagram");
    cr_expect_str_eq(msg, "STOPPING=1\nSTATUS=stopping: finishing requests in flight");
    cr_expect(!next_msg(fd, msg, sizeof(msg), 100), "a datagram after STOPPING: %s", msg);
}

Test(notify, ready_and_stopping_reach_a_socket_path)
{
    char dir[256], path[300];
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/notify.sock", dir);
    int fd = listen_notify(path);
    expect_ready_then_stopping(fd);
    close(fd);
}

Test(notify, ready_and_stopping_reach_an_abstract_socket)
{
    char name[64];
    snprintf(name, sizeof(name), "@miradb-notify-test-%d", (int)getpid());
    int fd = listen_notify(name);
    expect_ready_then_stopping(fd);
    close(fd);
}

Test(notify, a_socket_nobody_listens_on_is_logged_and_the_daemon_serves)
{
    char dir[256], path[300];
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/nobody.sock", dir);
    cr_assert_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    cr_expect_eq(daemon_stop(&d), 0);
    size_t len;
    char *log = (char *)httpc_read_file(d.log_path, &len);
    cr_assert_not_null(log);
    char want[400];
    snprintf(want, sizeof(want),
             "event=notify_failed socket=%s error=\"No such file or directory\"", path);
    const char *first = strstr(log, want);
    cr_assert_not_null(first, "%s", log);
    cr_expect_null(strstr(first + 1, "event=notify_failed"), "logged twice:\n%s", log);
    free(log);
}
