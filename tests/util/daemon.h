/*
 * daemon.h - starts and stops the real miradb daemon for integration tests.
 *
 * The daemon runs as a child of the test process and is killed (SIGKILL)
 * if the test process dies first (PR_SET_PDEATHSIG, which follows the
 * thread that called daemon_start: call it from the test's own thread,
 * not from a helper thread that exits), so a failed assertion never
 * leaves one running. Temporary data directories and logs this
 * module made are removed when the test process exits, unless
 * MIRADB_KEEP_TEST_DIRS is set.
 */
#ifndef MIRADB_TEST_DAEMON_H
#define MIRADB_TEST_DAEMON_H

#include <sys/types.h>

struct daemon {
    pid_t pid;
    int http_port;
    int grpc_port;
    char data_dir[256];
    char log_path[320];
};

/*
 * Starts $MIRADB_BIN (default "build/asan/miradb") `serve --data DIR
 * --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 [extra_args...]`
 * (extra_args NULL-terminated, may be NULL; DIR = data_dir if non-NULL,
 * else a fresh temp dir), stderr to log_path; waits (deadline 30 s,
 * polling, never a fixed sleep) for the stderr line containing
 * `event=listening grpc=127.0.0.1:PORT http=127.0.0.1:PORT` and for
 * GET /ready = 200 (with --tls-cert among extra_args: for the log's
 * "event=ready" line instead, as a plain GET cannot ask). Returns 0, or -1
 * (and prints the daemon's log to stderr; the daemon is then killed).
 */
int daemon_start(struct daemon *d, const char *data_dir, const char *const *extra_args);
/* SIGTERM, wait up to 30 s; returns the exit status (0 expected), 128+N
 * when a signal N ended it, -1 on timeout (then SIGKILLs). */
int daemon_stop(struct daemon *d);
/* SIGKILL and reap. */
void daemon_kill(struct daemon *d);
/* GET /metrics and return the value of the series whose text before the
 * value is exactly |series|, e.g.
 * `miradb_otlp_records_total{signal="logs",transport="grpc"}`; -1 when
 * absent (or when /metrics cannot be read). */
double daemon_metric(const struct daemon *d, const char *series);
/* Prints the daemon's log so far to stderr (for a failing test). */
void daemon_dump_log(const struct daemon *d);

#endif
