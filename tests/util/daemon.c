/*
 * daemon.c - the real daemon as a child process of an integration test
 * (see daemon.h).
 */
#include "tests/util/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

#define DAEMON_DEADLINE_MS 30000
#define DAEMON_MAX_ARGS 64
#define DAEMON_MAX_TRACKED 32

/* What this process made and must undo at exit. */
static pid_t live[DAEMON_MAX_TRACKED];
static char made[2 * DAEMON_MAX_TRACKED][320]; /* temp dirs and logs we created */
static int n_made;
static bool atexit_set;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void cleanup_at_exit(void)
{
    for (int i = 0; i < DAEMON_MAX_TRACKED; i++) {
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
    }
    if (getenv("MIRADB_KEEP_TEST_DIRS") != NULL) {
        return;
    }
    for (int i = 0; i < n_made; i++) {
        nftw(made[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    n_made = 0;
}

static void remember_made(const char *path)
{
    if (!atexit_set) {
        atexit(cleanup_at_exit);
        atexit_set = true;
    }
    if (n_made < (int)(sizeof(made) / sizeof(made[0]))) {
        snprintf(made[n_made++], sizeof(made[0]), "%s", path);
    }
}

static void track(pid_t pid, bool add)
{
    if (!atexit_set) {
        atexit(cleanup_at_exit);
        atexit_set = true;
    }
    for (int i = 0; i < DAEMON_MAX_TRACKED; i++) {
        if (add ? live[i] == 0 : live[i] == pid) {
            live[i] = add ? pid : 0;
            return;
        }
    }
}

static const char *tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    return t != NULL && *t != '\0' ? t : "/tmp";
}

/* The log so far, NUL-terminated, malloc'd; NULL if unreadable. */
static char *read_log(const struct daemon *d)
{
    size_t len;
    return (char *)httpc_read_file(d->log_path, &len);
}

void daemon_dump_log(const struct daemon *d)
{
    char *log = read_log(d);
    fprintf(stderr, "---- miradb log %s ----\n%s---- end of log ----\n", d->log_path,
            log != NULL ? log : "(unreadable)\n");
    free(log);
}

/* Parses the ports out of the listening line; true once it is there. */
static bool find_ports(struct daemon *d)
{
    char *log = read_log(d);
    bool ok = false;
    if (log == NULL) {
        return false;
    }
    char *ev = strstr(log, "event=listening");
    char *eol = ev != NULL ? strchr(ev, '\n') : NULL;
    if (eol != NULL) { /* only a whole line counts */
        *eol = '\0';
        char *g = strstr(ev, "grpc=127.0.0.1:");
        char *h = strstr(ev, "http=127.0.0.1:");
        if (g != NULL && h != NULL) {
            d->grpc_port = atoi(g + strlen("grpc=127.0.0.1:"));
            d->http_port = atoi(h + strlen("http=127.0.0.1:"));
            ok = d->grpc_port > 0 && d->http_port > 0;
        }
    }
    free(log);
    return ok;
}

/* True while the child runs; reaps it (and clears d->pid) once it has exited. */
static bool still_running(struct daemon *d, int *status)
{
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG);
    if (r == d->pid) {
        track(d->pid, false);
        d->pid = 0;
        if (status != NULL) {
            *status = st;
        }
        return false;
    }
    return r == 0;
}

static pid_t spawn(const char *bin, char *const *argv, const char *log_path)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) {
        return pid;
    }
    /* Child: die with the test process, stderr (and stdout) to the log. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127);
    }
    int lfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (lfd < 0 || nfd < 0 || dup2(nfd, 0) < 0 || dup2(lfd, 1) < 0 || dup2(lfd, 2) < 0) {
        _exit(127);
    }
    execvp(bin, argv);
    dprintf(2, "daemon_start: exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

int daemon_start(struct daemon *d, const char *data_dir, const char *const *extra_args)
{
    const char *bin = getenv("MIRADB_BIN");
    char *argv[DAEMON_MAX_ARGS];
    int argc = 0;

    memset(d, 0, sizeof(*d));
    if (bin == NULL || *bin == '\0') {
        bin = "build/asan/miradb";
    }
    if (data_dir != NULL) {
        snprintf(d->data_dir, sizeof(d->data_dir), "%s", data_dir);
    } else {
        snprintf(d->data_dir, sizeof(d->data_dir), "%s/miradb-integ-XXXXXX", tmp_base());
        if (mkdtemp(d->data_dir) == NULL) {
            fprintf(stderr, "daemon_start: mkdtemp: %s\n", strerror(errno));
            return -1;
        }
        remember_made(d->data_dir);
    }
    snprintf(d->log_path, sizeof(d->log_path), "%s/miradb-log-XXXXXX", tmp_base());
    int lfd = mkstemp(d->log_path);
    if (lfd < 0) {
        fprintf(stderr, "daemon_start: mkstemp: %s\n", strerror(errno));
        return -1;
    }
    close(lfd);
    remember_made(d->log_path);

    argv[argc++] = (char *)bin;
    argv[argc++] = "serve";
    argv[argc++] = "--data";
    argv[argc++] = d->data_dir;
    argv[argc++] = "--http-listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--grpc-listen";
    argv[argc++] = "127.0.0.1:0";
    for (const char *const *a = extra_args; a != NULL && *a != NULL; a++) {
        if (argc == DAEMON_MAX_ARGS - 1) {
            fprintf(stderr, "daemon_start: too many arguments\n");
            return -1;
        }
        argv[argc++] = (char *)*a;
    }
    argv[argc] = NULL;

    d->pid = spawn(bin, argv, d->log_path);
    if (d->pid < 0) {
        fprintf(stderr, "daemon_start: fork: %s\n", strerror(errno));
        d->pid = 0;
        return -1;
    }
    track(d->pid, true);

    long long deadline = tclock_ms() + DAEMON_DEADLINE_MS;
    int status = 0;
    while (!find_ports(d)) {
        if (!still_running(d, &status)) {
            fprintf(stderr, "daemon_start: %s exited (status 0x%x) before listening\n", bin,
                    status);
            daemon_dump_log(d);
            return -1;
        }
        if (tclock_ms() > deadline) {
            fprintf(stderr, "daemon_start: no listening line within 30 s\n");
            goto fail;
        }
        tclock_nap_ms(10);
    }
    /* Over TLS (or behind a client certificate) a plain GET cannot ask: the
     * daemon's ready line says the same, and makes no connection that the
     * test's handshake counters would see. */
    bool tls = false;
    for (const char *const *a = extra_args; a != NULL && *a != NULL; a++) {
        tls |= strcmp(*a, "--tls-cert") == 0;
    }
    for (;;) {
        struct http_resp r = {0};
        if (tls) {
            char *log = read_log(d);
            bool ready = log != NULL && strstr(log, " event=ready ") != NULL;
            free(log);
            if (ready) {
                return 0;
            }
        } else if (httpc_request(d->http_port, "GET", "/ready", NULL, NULL, 0, 0, &r) == 0 &&
                   r.status == 200) {
            http_resp_free(&r);
            return 0;
        }
        http_resp_free(&r);
        if (!still_running(d, &status)) {
            fprintf(stderr, "daemon_start: %s exited (status 0x%x) before ready\n", bin, status);
            daemon_dump_log(d);
            return -1;
        }
        if (tclock_ms() > deadline) {
            fprintf(stderr, "daemon_start: /ready not 200 within 30 s\n");
            goto fail;
        }
        tclock_nap_ms(10);
    }
fail:
    daemon_dump_log(d);
    daemon_kill(d);
    return -1;
}

int daemon_stop(struct daemon *d)
{
    int status = 0;
    if (d->pid <= 0) {
        return -1;
    }
    kill(d->pid, SIGTERM);
    long long deadline = tclock_ms() + DAEMON_DEADLINE_MS;
    while (still_running(d, &status)) {
        if (tclock_ms() > deadline) {
            fprintf(stderr, "daemon_stop: no exit within 30 s of SIGTERM\n");
            daemon_dump_log(d);
            daemon_kill(d);
            return -1;
        }
        tclock_nap_ms(10);
    }
    if (d->pid != 0) { /* waitpid failed outright */
        return -1;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

void daemon_kill(struct daemon *d)
{
    if (d->pid <= 0) {
        return;
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    track(d->pid, false);
    d->pid = 0;
}

double daemon_metric(const struct daemon *d, const char *series)
{
    struct http_resp r;
    double v = -1;
    size_t sl = strlen(series);

    if (httpc_request(d->http_port, "GET", "/metrics", NULL, NULL, 0, 0, &r) < 0) {
        return -1;
    }
    if (r.status == 200 && r.body != NULL) {
        const char *line = (const char *)r.body;
        while (*line != '\0') {
            const char *eol = strchr(line, '\n');
            if (line[0] != '#' && strncmp(line, series, sl) == 0 && line[sl] == ' ') {
                v = strtod(line + sl + 1, NULL);
                break;
            }
            if (eol == NULL) {
                break;
            }
            line = eol + 1;
        }
    }
    http_resp_free(&r);
    return v;
}
