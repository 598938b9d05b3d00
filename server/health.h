/*
 * health.h - `miradb health`: asks a running daemon's GET /ready, for
 * container health checks that have no curl.
 */
#ifndef MIRADB_HEALTH_H
#define MIRADB_HEALTH_H

/*
 * argv[0] = "health". `miradb health [--http ADDR:PORT | --config FILE]
 * [--timeout SECONDS]`: the address is --http, else the file's
 * http-listen, else 127.0.0.1:4318; a wildcard address (0.0.0.0, [::]) is
 * asked on loopback. Returns the exit status: 0 when /ready answered 200
 * ("ready" on stdout), 1 when it answered otherwise or could not be
 * reached within the timeout (default 5; the reason on stderr), 2 on a
 * usage or configuration error.
 */
int cli_health(int argc, char **argv);

#endif
