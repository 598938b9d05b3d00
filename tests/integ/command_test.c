/*
 * command_test.c - the miradb command as an operator meets it (issue 15):
 * version, --help of every subcommand, exit codes, `serve --config` refusals
 * with file:line:key and exit 2, --print-config read back by the binary,
 * a running daemon taking its settings from the file, and `miradb health`.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(command, .init = fresh_dir);

static const char *bin(void)
{
    const char *b = getenv("MIRADB_BIN");
    return b != NULL && *b != '\0' ? b : "build/asan/miradb";
}

struct run {
    int status;
    char *out; /* stdout, NUL-terminated */
    char *err; /* stderr */
};

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/*
 * Runs `miradb ARGS...` (NULL-terminated) with stdout and stderr into
 * files and waits for it, 30 s at most (then it is SIGKILLed and the test
 * fails): none of these commands may keep running.
 */
static struct run run_cmd(const char *const *args)
{
    char outp[320], errp[320];
    static int n;
    snprintf(outp, sizeof(outp), "%s/out%d", dir, n);
    snprintf(errp, sizeof(errp), "%s/err%d", dir, n++);
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)bin();
    for (; args[argc - 1] != NULL && argc < 31; argc++) {
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(127);
        }
        int nfd = open("/dev/null", O_RDONLY);
        int ofd = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int efd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(nfd, 0);
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    struct run r = {.status = -1};
    long long deadline = tclock_ms() + 30000;
    int st;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (tclock_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            cr_assert_fail("miradb %s did not exit within 30 s", args[0]);
        }
        tclock_nap_ms(5);
    }
    size_t len;
    r.out = (char *)httpc_read_file(outp, &len);
    r.err = (char *)httpc_read_file(errp, &len);
    cr_assert(r.out != NULL && r.err != NULL);
    return r;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[8][320];
    static int n;
    char *p = path[n++ % 8];
    snprintf(p, 320, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* Every one of |want| occurs in |text|. */
static void expect_all(const char *text, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_expect(strstr(text, want[i]) != NULL, "no '%s' in:\n%s", want[i], text);
    }
}

Test(command, version_prints_release_commit_and_build)
{
    struct run r = run_cmd((const char *[]){"version", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.err, "");
    cr_assert_eq(strncmp(r.out, "miradb 0.1.0\ncommit ", 20), 0, "%s", r.out);
    const char *build = strstr(r.out, "\nbuild ");
    cr_assert_not_null(build, "%s", r.out);
    /* This suite runs the sanitizer build: its flags are the Makefile's $(SAN). */
    cr_assert_eq(strncmp(build, "\nbuild -O1 -g -fsanitize=address,undefined ", 43), 0, "%s",
                 r.out);
    cr_assert(strstr(r.out, "commit unknown\n") == NULL, "a build in a git checkout: %s", r.out);
    cr_assert_eq(r.out[strlen(r.out) - 1], '\n');

    struct run v = run_cmd((const char *[]){"--version", NULL});
    cr_assert_eq(v.status, 0);
    cr_assert_str_eq(v.out, r.out);
    run_free(&v);
    run_free(&r);

    r = run_cmd((const char *[]){"version", "--json", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.out, "");
    cr_assert_str_eq(r.err,
                     "miradb version: unexpected argument '--json'\nusage: miradb version\n");
    run_free(&r);
}

Test(command, every_subcommand_has_help_with_usage_and_exit_status)
{
    static const char *const cmds[] = {"serve", "health", "inspect", "fsck", "version"};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        struct run r = run_cmd((const char *[]){cmds[i], "--help", NULL});
        char want[64];
        snprintf(want, sizeof(want), "usage: miradb %s", cmds[i]);
        cr_expect_eq(r.status, 0, "%s --help: %d", cmds[i], r.status);
        cr_expect_str_eq(r.err, "", "%s --help", cmds[i]);
        cr_expect_eq(strncmp(r.out, want, strlen(want)), 0, "%s --help:\n%s", cmds[i], r.out);
        cr_expect(strstr(r.out, "\nexit status: 0 ") != NULL, "%s --help:\n%s", cmds[i], r.out);
        struct run h = run_cmd((const char *[]){"help", cmds[i], NULL});
        cr_expect_eq(h.status, 0);
        cr_expect_str_eq(h.out, r.out, "miradb help %s", cmds[i]);
        struct run s = run_cmd((const char *[]){cmds[i], "-h", NULL});
        cr_expect_str_eq(s.out, r.out, "miradb %s -h", cmds[i]);
        run_free(&s);
        run_free(&h);
        run_free(&r);
    }
    struct run r = run_cmd((const char *[]){"serve", "--help", NULL});
    cr_expect(strstr(r.out, "\n  --config FILE ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "\n  --print-config ") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "2 usage or configuration\nerror") != NULL, "%s", r.out);
    run_free(&r);
}

Test(command, top_level_usage_and_unknown_commands_exit_2_on_stderr)
{
    struct run top = run_cmd((const char *[]){"help", NULL});
    cr_assert_eq(top.status, 0);
    cr_assert_eq(strncmp(top.out, "usage: miradb <command> [options]", 33), 0, "%s", top.out);
    static const char *const cmds[] = {"\n  serve ",
                                       "\n  health ",
                                       "\n  inspect ",
                                       "\n  fsck ",
                                       "\n  version ",
                                       "\n  help ",
                                       "\nexit status: 0 success; 1 failure"};
    expect_all(top.out, cmds, sizeof(cmds) / sizeof(cmds[0]));
    struct run none = run_cmd((const char *[]){NULL});
    cr_expect_eq(none.status, 2);
    cr_expect_str_eq(none.out, "");
    cr_expect_str_eq(none.err, top.out);

    struct run bad = run_cmd((const char *[]){"serv", NULL});
    cr_expect_eq(bad.status, 2);
    cr_expect_str_eq(bad.out, "");
    char want[4096];
    snprintf(want, sizeof(want), "miradb: unknown command 'serv'\n%s", top.out);
    cr_expect_str_eq(bad.err, want);

    struct run hb = run_cmd((const char *[]){"help", "serv", NULL});
    cr_expect_eq(hb.status, 2);
    cr_expect_str_eq(hb.err, want);

    struct run flag = run_cmd((const char *[]){"serve", "--bogus", NULL});
    cr_expect_eq(flag.status, 2);
    cr_expect_str_eq(flag.err,
                     "miradb serve: unknown option: --bogus\n(see miradb serve --help)\n");
    run_free(&flag);
    run_free(&hb);
    run_free(&bad);
    run_free(&none);
    run_free(&top);
}

/* `miradb serve --config PATH` exits 2, nothing on stdout, and stderr is
 * "miradb serve: PATH" + |after| + the pointer to --help. */
static void serve_refuses(const char *path, const char *after)
{
    struct run r = run_cmd((const char *[]){"serve", "--config", path, NULL});
    char want[1200];
    snprintf(want, sizeof(want), "miradb serve: %s%s\n(see miradb serve --help)\n", path, after);
    cr_expect_eq(r.status, 2, "%s", path);
    cr_expect_str_eq(r.err, want);
    cr_expect_str_eq(r.out, "");
    run_free(&r);
}

Test(command, serve_refuses_a_bad_config_file_naming_file_line_and_key_exit_2)
{
    serve_refuses(write_file("bad.conf", "# production\nqueue = 8\nmemory-budgt = 1GiB\n"),
                  ":3: memory-budgt: unknown key (did you mean memory-budget?)");
    serve_refuses(write_file("bad2.conf", "ack = later\nmystery = 1\n"),
                  ":1: ack: 'later' is not one of wal|fsync|seal");
    serve_refuses(write_file("bad3.conf", "http-listen = 0.0.0.0\n"),
                  ":1: http-listen: '0.0.0.0' is not ADDR:PORT (e.g. 127.0.0.1:4318, "
                  "0.0.0.0:4317, [::]:4318)");
    char missing[320];
    snprintf(missing, sizeof(missing), "%s/none.conf", dir);
    serve_refuses(missing, ": No such file or directory");
}

Test(command, print_config_output_fed_back_gives_the_same_configuration)
{
    const char *p = write_file("a.conf", "data = \"/srv/mira db\"\nmemory-budget = 512MiB\n"
                                         "retention-age = 14d\nack = fsync\n");
    struct run a = run_cmd((const char *[]){"serve", "--config", p, "--queue", "9",
                                            "--block-max-age", "90s", "--print-config", NULL});
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_assert_str_eq(a.err, "");
    static const char *const lines[] = {"\ndata = \"/srv/mira db\"\n",
                                        "\nqueue = 9\n",
                                        "\nmemory-budget = 512MiB\n",
                                        "\nack = fsync\n",
                                        "\nblock-max-age = 90s\n",
                                        "\nretention-age = 14d\n",
                                        "\nhttp-listen = \"127.0.0.1:4318\"\n"};
    expect_all(a.out, lines, sizeof(lines) / sizeof(lines[0]));
    const char *p2 = write_file("b.conf", a.out);
    struct run b = run_cmd((const char *[]){"serve", "--config", p2, "--print-config", NULL});
    cr_assert_eq(b.status, 0, "%s", b.err);
    cr_expect_str_eq(b.out, a.out);
    run_free(&b);
    run_free(&a);
}

Test(command, a_running_daemon_takes_its_settings_from_the_file_and_health_sees_it_ready)
{
    struct daemon d;
    const char *p = write_file("d.conf", "memory-budget = 96MiB\nshards = 1\nio-threads = 1\n"
                                         "http-listen = \"127.0.0.1:1\"   # the flag wins\n");
    const char *args[] = {"--config", p, NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    cr_expect_eq(daemon_metric(&d, "miradb_memory_budget_bytes"), 96.0 * 1048576);

    char port[16], addr[64], want[128];
    snprintf(port, sizeof(port), "%d", d.http_port);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", d.http_port);
    struct run h = run_cmd((const char *[]){"health", "--http", addr, NULL});
    cr_expect_eq(h.status, 0, "%s", h.err);
    snprintf(want, sizeof(want), "ready (127.0.0.1:%d)\n", d.http_port);
    cr_expect_str_eq(h.out, want);
    cr_expect_str_eq(h.err, "");
    run_free(&h);

    /* A file whose listener is the wildcard address is asked on loopback. */
    char text[128];
    snprintf(text, sizeof(text), "http-listen = 0.0.0.0:%d\n", d.http_port);
    const char *hp = write_file("h.conf", text);
    h = run_cmd((const char *[]){"health", "--config", hp, "--timeout", "10", NULL});
    cr_expect_eq(h.status, 0, "%s", h.err);
    cr_expect_str_eq(h.out, want);
    run_free(&h);
    cr_expect_eq(daemon_stop(&d), 0);

    /* Gone: refused, exit 1, the reason on stderr. */
    h = run_cmd((const char *[]){"health", "--http", addr, NULL});
    cr_expect_eq(h.status, 1);
    cr_expect_str_eq(h.out, "");
    snprintf(want, sizeof(want),
             "miradb health: 127.0.0.1:%d: cannot connect: Connection refused\n", d.http_port);
    cr_expect_str_eq(h.err, want);
    run_free(&h);
}

/* A listener that accepts and answers 503, like a daemon still replaying. */
Test(command, health_exits_1_on_a_not_ready_answer_and_2_on_usage)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int c = accept(lfd, NULL, NULL);
        char buf[1024];
        ssize_t n = read(c, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
        const char *ans =
            strncmp(buf, "GET /ready HTTP/1.1\r\n", 21) == 0
                ? "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 9\r\n\r\nnot ready"
                : "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        (void)!write(c, ans, strlen(ans));
        close(c);
        _exit(0);
    }
    struct run r = run_cmd((const char *[]){"health", "--http", addr, NULL});
    cr_expect_eq(r.status, 1);
    char want[160];
    snprintf(want, sizeof(want), "miradb health: %s/ready answered 503: not ready\n", addr);
    cr_expect_str_eq(r.err, want);
    run_free(&r);
    waitpid(pid, NULL, 0);
    close(lfd);

    r = run_cmd((const char *[]){"health", "--http", "nowhere", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "miradb health: 'nowhere' is not ADDR:PORT\n");
    run_free(&r);
    r = run_cmd((const char *[]){"health", "--timeout", "0", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "miradb health: --timeout: '0' is not 1..3600 seconds\n");
    run_free(&r);
    r = run_cmd((const char *[]){"health", "--http", addr, "--config", "/x.conf", NULL});
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "miradb health: --http and --config exclude each other\n");
    run_free(&r);
}

Test(command, sighup_is_a_reload_not_an_exit)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    cr_assert_eq(kill(d.pid, SIGHUP), 0);
    /* Without TLS or token files there is nothing to fail: both "ok". */
    const char *want = "event=reloaded tls=ok tokens=ok";
    bool seen = false;
    for (long long deadline = tclock_ms() + 30000; !seen && tclock_ms() < deadline;) {
        size_t len;
        char *log = (char *)httpc_read_file(d.log_path, &len);
        seen = log != NULL && strstr(log, want) != NULL;
        free(log);
        if (!seen) {
            tclock_nap_ms(10);
        }
    }
    cr_expect(seen, "no reload line");
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "GET", "/ready", NULL, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0, "a SIGHUP ended the daemon");
}
