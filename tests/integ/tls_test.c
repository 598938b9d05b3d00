/*
 * tls_test.c - TLS on both listeners, mutual TLS, SIGHUP reload of the
 * certificate and the token files, the handshake deadline and counters,
 * tokens on every endpoint class, CORS and the Host check, against the
 * real daemon. Certificates are made at test time with the openssl CLI in
 * a temporary directory; curl is the HTTPS client where a real one is
 * wanted, tests/util/tlsc where the test must control the handshake.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "server/auth.h"
#include "tests/util/daemon.h"
#include "tests/util/h2c.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"
#include "tests/util/tlsc.h"
#include "tests/util/tmpdir.h"

#define LOGS_PATH "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define CT_JSON "Content-Type: application/json"

static char dir[256];

/* Runs a shell command, its stdout into |out| (may be NULL); the exit status. */
static int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "popen %s", cmd);
    size_t n = 0;
    char sink[4096];
    for (;;) {
        char *dst = out != NULL ? out + n : sink;
        size_t room = out != NULL ? cap - 1 - n : sizeof(sink);
        if (room == 0) {
            dst = sink, room = sizeof(sink);
        }
        size_t k = fread(dst, 1, room, p);
        if (k == 0) {
            break;
        }
        if (out != NULL && dst != sink) {
            n += k;
        }
    }
    if (out != NULL) {
        out[n] = '\0';
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void path_of(char *buf, size_t cap, const char *name)
{
    cr_assert_eq(tmpdir_join(buf, cap, dir, name), 0);
}

/* A key and a certificate NAME.pem signed by CA (NULL: self-signed CA). */
static void make_cert(const char *name, const char *ca, int serial, const char *cn)
{
    char cmd_ext[64] = "";
    if (ca == NULL) {
        cr_assert_eq(sh(NULL, 0,
                        "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout %s.key "
                        "-out %s.pem -days 2 -subj /CN=%s -set_serial %d 2>/dev/null",
                        dir, name, name, cn, serial),
                     0);
        return;
    }
    snprintf(cmd_ext, sizeof(cmd_ext), "-extfile ext");
    cr_assert_eq(sh(NULL, 0,
                    "cd %s && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext && "
                    "openssl req -newkey rsa:2048 -nodes -keyout %s.key -out %s.csr -subj /CN=%s "
                    "2>/dev/null && openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key "
                    "-set_serial %d -days 2 %s -out %s.pem 2>/dev/null",
                    dir, name, name, cn, name, ca, ca, serial, cmd_ext, name),
                 0);
}

static void write_file(const char *name, const char *text)
{
    char p[400];
    path_of(p, sizeof(p), name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void certs(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    make_cert("ca", NULL, 1, "miradb-test-ca");
    make_cert("srv", "ca", 1001, "localhost");
    make_cert("srv2", "ca", 2002, "localhost");
    make_cert("cli", "ca", 3003, "client");
    make_cert("rogue", NULL, 4, "rogue-ca");
    make_cert("rcli", "rogue", 5005, "client");
}

TestSuite(tls, .init = certs);

/* Starts the daemon with TLS (srv) plus |extra| (NULL-terminated). */
static void start_tls(struct daemon *d, const char *const *extra)
{
    static char cert[400], key[400];
    const char *args[32];
    int n = 0;
    path_of(cert, sizeof(cert), "srv.pem");
    path_of(key, sizeof(key), "srv.key");
    args[n++] = "--io-threads";
    args[n++] = "1";
    args[n++] = "--tls-cert";
    args[n++] = cert;
    args[n++] = "--tls-key";
    args[n++] = key;
    for (const char *const *a = extra; a != NULL && *a != NULL; a++) {
        args[n++] = *a;
    }
    args[n] = NULL;
    cr_assert_eq(daemon_start(d, NULL, args), 0);
}

static struct tlsc_opts opts_ca(void)
{
    static char ca[400];
    path_of(ca, sizeof(ca), "ca.pem");
    return (struct tlsc_opts){.ca = ca};
}

/* A metric read over TLS (with |auth|, e.g. "Authorization: Bearer q"; NULL: none). */
static double tls_metric(const struct daemon *d, const struct tlsc_opts *o, const char *auth,
                         const char *series)
{
    struct tlsc *c;
    struct http_resp r;
    char err[256];
    const char *h[] = {auth, NULL};
    cr_assert_eq(tlsc_connect(d->http_port, o, &c, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(tlsc_request(c, "GET", "/metrics", auth ? h : NULL, NULL, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    double v = -1;
    size_t sl = strlen(series);
    for (const char *line = (const char *)r.body; line != NULL && *line != '\0';) {
        if (strncmp(line, series, sl) == 0 && line[sl] == ' ') {
            v = strtod(line + sl + 1, NULL);
            break;
        }
        const char *eol = strchr(line, '\n');
        line = eol ? eol + 1 : NULL;
    }
    http_resp_free(&r);
    tlsc_free(c);
    return v;
}

#define FAILS(reason) "miradb_tls_handshake_failures_total{reason=\"" reason "\"}"
#define HS_HTTP "miradb_tls_handshakes_total{listener=\"http\"}"
#define HS_GRPC "miradb_tls_handshakes_total{listener=\"grpc\"}"

Test(tls, curl_ingests_and_queries_over_https_with_alpn_http11)
{
    struct daemon d;
    char out[8192], ca[400], vec[600];
    start_tls(&d, NULL);
    path_of(ca, sizeof(ca), "ca.pem");
    snprintf(vec, sizeof(vec), "%s/http-json-logs.json", httpc_vectors_dir());

    /* ingest: curl offers h2 and http/1.1, the HTTP port picks http/1.1 */
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --cacert %s -H 'Content-Type: application/json' --data-binary @%s "
                    "-w ' %%{http_code} %%{http_version}' https://localhost:%d/v1/logs",
                    ca, vec, d.http_port),
                 0);
    cr_expect_str_eq(out, "{} 200 1.1");
    /* the record is there to query, over the same TLS */
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --cacert %s -G https://localhost:%d/loki/api/v1/query_range "
                    "--data-urlencode 'query={service_name=\"acceptance-svc\"} |= "
                    "\"tok000001x0b22\"' --data-urlencode start=1767225600000000000 "
                    "--data-urlencode end=1767225601000000000 -w ' %%{http_code}'",
                    ca, d.http_port),
                 0);
    cr_expect(strstr(out, "\"payment declined for card ****4472: insufficient funds "
                          "needle6681f1f8fb334435 tok000001x0b22\"") != NULL,
              "%s", out);
    cr_expect(strstr(out, " 200") == out + strlen(out) - 4, "%s", out);
    /* plain HTTP on the TLS port is not answered as HTTP */
    struct http_resp r;
    cr_expect_neq(httpc_request(d.http_port, "GET", "/health", NULL, NULL, 0, 0, &r), 0);
    http_resp_free(&r);

    struct tlsc_opts o = opts_ca();
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("not_tls")), 1);
    cr_expect_eq(tls_metric(&d, &o, NULL, HS_HTTP), 4); /* 2 curls + 2 metric reads */
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("version")), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tls, grpc_port_negotiates_h2_and_refuses_other_alpn)
{
    struct daemon d;
    char out[8192], ca[400], vec[600], err[256];
    start_tls(&d, NULL);
    path_of(ca, sizeof(ca), "ca.pem");
    snprintf(vec, sizeof(vec), "%s/grpc-logs.grpc-frame", httpc_vectors_dir());

    /* a gRPC export through curl --http2: ALPN h2, grpc-status 0 in the trailers */
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --http2 --cacert %s -H 'content-type: application/grpc' "
                    "-H 'te: trailers' --data-binary @%s -o /dev/null -D - "
                    "-w 'version=%%{http_version}' https://localhost:%d%s",
                    ca, vec, d.grpc_port, LOGS_PATH),
                 0);
    cr_expect(strncmp(out, "HTTP/2 200", 10) == 0, "%s", out);
    cr_expect(strstr(out, "grpc-status: 0") != NULL, "%s", out);
    cr_expect(strstr(out, "version=2") != NULL, "%s", out);

    struct tlsc_opts o = opts_ca();
    struct tlsc *c;
    o.alpn = "h2,http/1.1";
    cr_assert_eq(tlsc_connect(d.grpc_port, &o, &c, err, sizeof(err)), 0, "%s", err);
    cr_expect_str_eq(tlsc_alpn(c), "h2");
    tlsc_free(c);
    o.alpn = "http/1.1";
    cr_expect_neq(tlsc_connect(d.grpc_port, &o, &c, err, sizeof(err)), 0);
    cr_expect(strstr(err, "no application protocol") != NULL, "%s", err);
    /* and the HTTP port, offered only h2, refuses the same way */
    o.alpn = "h2";
    cr_expect_neq(tlsc_connect(d.http_port, &o, &c, err, sizeof(err)), 0);
    o.alpn = NULL;
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("alpn")), 2);
    cr_expect_eq(tls_metric(&d, &o, NULL, HS_GRPC), 2);
    cr_expect_eq(
        tls_metric(&d, &o, NULL, "miradb_otlp_requests_total{signal=\"logs\",transport=\"grpc\"}"),
        1);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tls, a_tls_1_1_client_is_refused_and_tls_1_2_accepted)
{
    struct daemon d;
    char err[256];
    struct tlsc *c;
    start_tls(&d, NULL);
    struct tlsc_opts o = opts_ca();
    o.max_version = TLS1_1_VERSION;
    cr_expect_neq(tlsc_connect(d.http_port, &o, &c, err, sizeof(err)), 0);
    cr_expect(strstr(err, "alert protocol version") != NULL, "%s", err);
    cr_expect_neq(tlsc_connect(d.grpc_port, &o, &c, err, sizeof(err)), 0);
    o.max_version = TLS1_2_VERSION;
    cr_assert_eq(tlsc_connect(d.http_port, &o, &c, err, sizeof(err)), 0, "%s", err);
    tlsc_free(c);
    o.max_version = 0;
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("version")), 2);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* One GET over a new connection; the status, or -1 when the connection or
 * the request failed (a TLS 1.3 server may refuse a client certificate
 * only after the client thinks the handshake is over). */
static int get_status(int port, const struct tlsc_opts *o, const char *path)
{
    struct tlsc *c;
    struct http_resp r;
    char err[256];
    if (tlsc_connect(port, o, &c, err, sizeof(err)) < 0) {
        return -1;
    }
    int st = tlsc_request(c, "GET", path, NULL, NULL, 0, &r) == 0 ? r.status : -1;
    http_resp_free(&r);
    tlsc_free(c);
    return st;
}

Test(tls, mutual_tls_requires_a_certificate_from_the_client_ca)
{
    struct daemon d;
    char ca[400], cert[400], key[400], rcert[400], rkey[400];
    path_of(ca, sizeof(ca), "ca.pem");
    path_of(cert, sizeof(cert), "cli.pem");
    path_of(key, sizeof(key), "cli.key");
    path_of(rcert, sizeof(rcert), "rcli.pem");
    path_of(rkey, sizeof(rkey), "rcli.key");
    const char *extra[] = {"--tls-client-ca", ca, NULL};
    start_tls(&d, extra);

    struct tlsc_opts o = opts_ca();
    cr_expect_eq(get_status(d.http_port, &o, "/health"), -1); /* no certificate */
    o.cert = rcert;
    o.key = rkey;
    cr_expect_eq(get_status(d.http_port, &o, "/health"), -1); /* another CA's */
    o.cert = cert;
    o.key = key;
    cr_expect_eq(get_status(d.http_port, &o, "/health"), 200);
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("no_client_cert")), 1);
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("bad_client_cert")), 1);
    /* and curl with the certificate */
    char out[256];
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --cacert %s --cert %s --key %s https://localhost:%d/health", ca, cert,
                    key, d.http_port),
                 0);
    cr_expect_str_eq(out, "ok");
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Waits (bounded) until the daemon's log holds |needle| |times| times. */
static void wait_log_count(const struct daemon *d, const char *needle, int times)
{
    long long deadline = tclock_ms() + 30000;
    for (;;) {
        size_t len;
        char *log = (char *)httpc_read_file(d->log_path, &len);
        int n = 0;
        for (const char *p = log; p != NULL && (p = strstr(p, needle)) != NULL; p++) {
            n++;
        }
        free(log);
        if (n >= times) {
            return;
        }
        cr_assert(tclock_ms() < deadline, "no '%s' x%d in the log", needle, times);
        tclock_nap_ms(10);
    }
}

static void copy_file(const char *from, const char *to)
{
    cr_assert_eq(sh(NULL, 0, "cd %s && cp %s %s.tmp && mv %s.tmp %s", dir, from, to, to, to), 0);
}

Test(tls, sighup_reloads_certificate_and_tokens_and_keeps_open_connections)
{
    struct daemon d;
    char err[256], tokens[400];
    struct http_resp r;
    write_file("ingest.tokens", "# ingest\nold-token\n");
    path_of(tokens, sizeof(tokens), "ingest.tokens");
    /* the daemon reads srv.pem: keep the original aside */
    copy_file("srv.pem", "srv1.pem");
    copy_file("srv.key", "srv1.key");
    const char *extra[] = {"--ingest-token-file", tokens, NULL};
    start_tls(&d, extra);
    struct tlsc_opts o = opts_ca();
    const char *h_old[] = {CT_JSON, "Authorization: Bearer old-token", NULL};
    const char *h_new[] = {CT_JSON, "Authorization: Bearer new-token", NULL};

    struct tlsc *kept;
    cr_assert_eq(tlsc_connect(d.http_port, &o, &kept, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(tlsc_peer_serial(kept), 1001);
    cr_assert_eq(tlsc_request(kept, "POST", "/v1/logs", h_old, "{}", 2, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);

    copy_file("srv2.pem", "srv.pem");
    copy_file("srv2.key", "srv.key");
    write_file("ingest.tokens", "new-token\n\n# comment\n");
    kill(d.pid, SIGHUP);
    wait_log_count(&d, "event=reloaded tls=ok tokens=ok", 1);

    struct tlsc *fresh;
    cr_assert_eq(tlsc_connect(d.http_port, &o, &fresh, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(tlsc_peer_serial(fresh), 2002);
    cr_assert_eq(tlsc_request(fresh, "POST", "/v1/logs", h_old, "{}", 2, &r), 0);
    cr_expect_eq(r.status, 401);
    http_resp_free(&r);
    tlsc_free(fresh); /* refused before its body was read: the server closed it */
    cr_assert_eq(tlsc_connect(d.http_port, &o, &fresh, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(tlsc_request(fresh, "POST", "/v1/logs", h_new, "{}", 2, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    tlsc_free(fresh);
    /* the connection from before the reload still works, with its old certificate */
    cr_assert_eq(tlsc_request(kept, "POST", "/v1/logs", h_new, "{}", 2, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    cr_expect_eq(tlsc_peer_serial(kept), 1001);

    /* a broken certificate file keeps the loaded one and says why */
    write_file("srv.pem", "not a certificate\n");
    kill(d.pid, SIGHUP);
    wait_log_count(&d, "event=reloaded tls=kept_old tokens=ok", 1);
    wait_log_count(&d, "event=reload_failed what=tls error=\"--tls-cert ", 1);
    cr_assert_eq(tlsc_connect(d.http_port, &o, &fresh, err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(tlsc_peer_serial(fresh), 2002);
    tlsc_free(fresh);
    cr_assert_eq(tlsc_request(kept, "GET", "/health", NULL, NULL, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    tlsc_free(kept);
    cr_expect_eq(daemon_stop(&d), 0);
    /* the log never shows a token */
    size_t ll;
    char *log = (char *)httpc_read_file(d.log_path, &ll);
    cr_assert_not_null(log);
    cr_expect_null(strstr(log, "old-token"));
    cr_expect_null(strstr(log, "new-token"));
    free(log);
    copy_file("srv1.pem", "srv.pem");
    copy_file("srv1.key", "srv.key");
}

Test(tls, a_client_that_never_starts_the_handshake_is_closed)
{
    struct daemon d;
    const char *extra[] = {"--tls-handshake-timeout", "200ms", NULL};
    start_tls(&d, extra);
    int fd = httpc_connect(d.http_port);
    int gfd = httpc_connect(d.grpc_port);
    cr_assert_geq(fd, 0);
    cr_assert_geq(gfd, 0);
    cr_expect(httpc_wait_closed(fd));
    cr_expect(httpc_wait_closed(gfd));
    close(fd);
    close(gfd);
    struct tlsc_opts o = opts_ca();
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("timeout")), 2);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- tokens (plain TCP: the checks do not depend on TLS) ---- */

static struct daemon tok_daemon(void)
{
    struct daemon d;
    static char ing[400], qry[400];
    write_file("ing.tokens", "ingest-one\n  ingest-two  \n");
    write_file("qry.tokens", "# Grafana\nquery-one\n");
    path_of(ing, sizeof(ing), "ing.tokens");
    path_of(qry, sizeof(qry), "qry.tokens");
    const char *args[] = {"--ingest-token-file", ing, "--query-token-file", qry, NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    return d;
}

static const char *hdr(const struct http_resp *r, const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    return http_resp_header(r, name, buf[i], sizeof(buf[i]));
}

/* "Basic base64(user:pass)" */
static void basic(char *out, size_t cap, const char *userpass)
{
    char b64[256];
    cr_assert_eq(sh(b64, sizeof(b64), "printf '%%s' '%s' | base64 -w0", userpass), 0);
    snprintf(out, cap, "Authorization: Basic %s", b64);
}

static int get(const struct daemon *d, const char *path, const char *auth, struct http_resp *r)
{
    const char *h[] = {auth, NULL};
    cr_assert_eq(httpc_request(d->http_port, "GET", path, auth ? h : NULL, NULL, 0, 0, r), 0);
    return r->status;
}

Test(tls, tokens_guard_ingest_query_and_metrics_but_not_health)
{
    struct daemon d = tok_daemon();
    struct http_resp r;
    char b_ok[300], b_bad[300];
    basic(b_ok, sizeof(b_ok), "grafana:query-one");
    basic(b_bad, sizeof(b_bad), "grafana:ingest-one");

    /* OTLP/HTTP */
    const char *none[] = {CT_JSON, NULL};
    const char *wrong[] = {CT_JSON, "Authorization: Bearer query-one", NULL};
    const char *right[] = {CT_JSON, "Authorization: Bearer ingest-two", NULL};
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/logs", none, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 401);
    cr_expect_str_eq(hdr(&r, "WWW-Authenticate"), "Bearer realm=\"miradb\"");
    cr_expect_str_eq((const char *)r.body,
                     "{\"code\":16,\"message\":\"missing credentials: send Authorization: "
                     "Bearer <token>\"}");
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/logs", wrong, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 401);
    cr_expect_str_eq((const char *)r.body, "{\"code\":16,\"message\":\"invalid token\"}");
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/logs", right, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);

    /* OTLP/gRPC */
    size_t len;
    uint8_t *body = httpc_vector("grpc-logs.grpc-frame", &len);
    struct h2c_call c = {0};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, NULL, body, len, &c), 0);
    cr_expect_eq(c.grpc_status, 16);
    cr_expect_str_eq(c.grpc_message, AUTH_MSG_MISSING);
    h2c_call_free(&c);
    const char *g_wrong[] = {"authorization: Bearer nope", NULL};
    c = (struct h2c_call){0};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, g_wrong, body, len, &c), 0);
    cr_expect_eq(c.grpc_status, 16);
    cr_expect_str_eq(c.grpc_message, "invalid token");
    h2c_call_free(&c);
    const char *g_right[] = {"authorization: Bearer ingest-one", NULL};
    c = (struct h2c_call){0};
    cr_assert_eq(h2c_unary(d.grpc_port, LOGS_PATH, g_right, body, len, &c), 0);
    cr_expect_eq(c.grpc_status, 0, "%s", c.grpc_message);
    h2c_call_free(&c);
    free(body);

    /* query routes and /metrics: the query tokens, Bearer or Basic password */
    cr_expect_eq(get(&d, "/loki/api/v1/labels", NULL, &r), 401);
    cr_expect_str_eq((const char *)r.body,
                     "missing credentials: send Authorization: Bearer <token>\n");
    cr_expect_str_eq(hdr(&r, "WWW-Authenticate"), "Bearer realm=\"miradb\"");
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", "Authorization: Bearer ingest-one", &r), 401);
    cr_expect_str_eq((const char *)r.body, "invalid token\n");
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", "Authorization: Bearer query-one", &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/api/v1/labels", b_ok, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/api/search/tags", b_bad, &r), 401);
    /* a Basic client is also offered Basic */
    cr_expect(strstr(r.headers, "WWW-Authenticate: Bearer realm=\"miradb\"\r\n"
                                "WWW-Authenticate: Basic realm=\"miradb\"\r\n") != NULL,
              "%s", r.headers);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/metrics", NULL, &r), 401);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/metrics", "Authorization: bearer   query-one", &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/health", NULL, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/ready", NULL, &r), 200);
    http_resp_free(&r);

    /* refusals by class and reason (the two /metrics reads above: 1 missing) */
    cr_expect_eq(get(&d, "/metrics", "Authorization: Bearer query-one", &r), 200);
    const char *m = (const char *)r.body;
    cr_expect(strstr(m, "miradb_auth_refusals_total{class=\"ingest\",reason=\"missing\"} 2\n") !=
              NULL);
    cr_expect(strstr(m, "miradb_auth_refusals_total{class=\"ingest\",reason=\"invalid\"} 2\n") !=
              NULL);
    cr_expect(strstr(m, "miradb_auth_refusals_total{class=\"query\",reason=\"missing\"} 2\n") !=
              NULL);
    cr_expect(strstr(m, "miradb_auth_refusals_total{class=\"query\",reason=\"invalid\"} 2\n") !=
              NULL);
    cr_expect(strstr(m, "miradb_auth_tokens{class=\"ingest\"} 2\n") != NULL);
    cr_expect(strstr(m, "miradb_auth_tokens{class=\"query\"} 1\n") != NULL);
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tls, a_token_file_without_tokens_is_refused_at_start)
{
    char p[400], out[1024];
    write_file("empty.tokens", "# nothing yet\n\n");
    path_of(p, sizeof(p), "empty.tokens");
    const char *bin = getenv("MIRADB_BIN") ? getenv("MIRADB_BIN") : "build/asan/miradb";
    int st = sh(out, sizeof(out),
                "%s serve --data %s/d --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 "
                "--query-token-file %s 2>&1",
                bin, dir, p);
    cr_expect_eq(st, 1);
    char want[600];
    snprintf(want, sizeof(want), "token file %s holds no token", p);
    cr_expect(strstr(out, want) != NULL, "%s", out);
}

/* ---- browsers ---- */

Test(tls, cors_answers_only_listed_origins)
{
    struct daemon d;
    struct http_resp r;
    const char *args[] = {"--cors-origins", "http://app.example, https://ui.example:8443", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    const char *pre_ok[] = {"Origin: https://ui.example:8443",
                            "Access-Control-Request-Method: POST", NULL};
    cr_assert_eq(httpc_request(d.http_port, "OPTIONS", "/v1/logs", pre_ok, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 204);
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Origin"), "https://ui.example:8443");
    cr_expect_str_eq(hdr(&r, "Vary"), "Origin");
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Methods"), "POST, OPTIONS");
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Headers"),
                     "Content-Type, Content-Encoding, Authorization");
    http_resp_free(&r);
    const char *pre_bad[] = {"Origin: http://evil.example", "Access-Control-Request-Method: POST",
                             NULL};
    cr_assert_eq(httpc_request(d.http_port, "OPTIONS", "/v1/logs", pre_bad, NULL, 0, 0, &r), 0);
    cr_expect_eq(r.status, 204);
    cr_expect_null(hdr(&r, "Access-Control-Allow-Origin"));
    cr_expect_null(hdr(&r, "Access-Control-Allow-Methods"));
    http_resp_free(&r);
    /* the actual requests */
    const char *ok[] = {CT_JSON, "Origin: http://app.example", NULL};
    const char *bad[] = {CT_JSON, "Origin: http://app.example.evil", NULL};
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/traces", ok, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Origin"), "http://app.example");
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/traces", bad, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    cr_expect_null(hdr(&r, "Access-Control-Allow-Origin"));
    cr_expect_str_eq(hdr(&r, "Vary"), "Origin"); /* the answer depended on it */
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", "Origin: http://app.example", &r), 200);
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Origin"), "http://app.example");
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);

    const char *star[] = {"--cors-origins", "*", NULL};
    cr_assert_eq(daemon_start(&d, NULL, star), 0);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/traces", bad, "{}", 2, 0, &r), 0);
    cr_expect_str_eq(hdr(&r, "Access-Control-Allow-Origin"), "*");
    cr_expect_null(hdr(&r, "Vary"));
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(tls, query_routes_refuse_a_host_not_allowed)
{
    struct daemon d;
    struct http_resp r;
    char host[64];
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    const char *evil = "Host: evil.example";
    cr_expect_eq(get(&d, "/loki/api/v1/labels", evil, &r), 403);
    cr_expect_str_eq((const char *)r.body, "forbidden: this Host is not in --allowed-hosts\n");
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/metrics", "Host: evil.example:80", &r), 403);
    http_resp_free(&r);
    snprintf(host, sizeof(host), "Host: localhost:%d", d.http_port);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", host, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/api/v1/labels", "Host: LOCALHOST", &r), 200);
    http_resp_free(&r);
    snprintf(host, sizeof(host), "Host: [::1]:%d", d.http_port);
    cr_expect_eq(get(&d, "/api/v1/labels", host, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/api/v1/labels", "Host: localhost:1", &r), 403); /* another port */
    http_resp_free(&r);
    /* ingest and the probes do not check Host */
    const char *otlp[] = {CT_JSON, evil, NULL};
    cr_assert_eq(httpc_request(d.http_port, "POST", "/v1/logs", otlp, "{}", 2, 0, &r), 0);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/health", evil, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(daemon_metric(&d, "miradb_http_host_refusals_total"), 3);
    cr_expect_eq(daemon_stop(&d), 0);

    const char *args[] = {"--allowed-hosts", "evil.example", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", evil, &r), 200);
    http_resp_free(&r);
    cr_expect_eq(get(&d, "/loki/api/v1/labels", "Host: localhost", &r), 403);
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* The end of a body and the next request in one TLS record: the body read
 * takes only the body's bytes, and the rest waits decrypted inside OpenSSL,
 * where the socket's read event cannot see it; it must still be answered
 * (without that, the second answer never comes and the read times out). */
Test(tls, a_request_after_a_body_in_the_same_record_is_answered)
{
    struct daemon d;
    struct http_resp r;
    struct tlsc *c;
    char err[256], head[256];
    start_tls(&d, NULL);
    struct tlsc_opts o = opts_ca();
    cr_assert_eq(tlsc_connect(d.http_port, &o, &c, err, sizeof(err)), 0, "%s", err);
    snprintf(head, sizeof(head),
             "POST /v1/logs HTTP/1.1\r\nHost: localhost:%d\r\n" CT_JSON "\r\n"
             "Content-Length: 2\r\n\r\n",
             d.http_port);
    static const char rest[] = "{}GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    cr_assert_eq(tlsc_send(c, head, strlen(head)), 0);     /* record 1: the head */
    cr_assert_eq(tlsc_send(c, rest, sizeof(rest) - 1), 0); /* record 2: body + next request */
    cr_assert_eq(tlsc_read_response(c, &r), 0);
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq((const char *)r.body, "{}");
    http_resp_free(&r);
    cr_assert_eq(tlsc_read_response(c, &r), 0, "the pipelined request was not answered");
    cr_expect_eq(r.status, 200);
    cr_expect_str_eq((const char *)r.body, "ok");
    http_resp_free(&r);
    tlsc_free(c);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Trickles the start of a TLS record (a 256-byte handshake record, one byte
 * per 50 ms) on a fresh connection to |port|; the bytes sent before the
 * server closed it, or -1 if it was still open after 100 bytes. */
static int trickle_until_closed(int port)
{
    static const unsigned char rec[5] = {0x16, 0x03, 0x01, 0x01, 0x00};
    int fd = httpc_connect(port);
    cr_assert_geq(fd, 0);
    for (int i = 0; i < 100; i++) {
        unsigned char b = i < 5 ? rec[i] : 0;
        char got;
        ssize_t n = recv(fd, &got, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
            send(fd, &b, 1, MSG_NOSIGNAL) != 1) {
            close(fd);
            return i;
        }
        tclock_nap_ms(50);
    }
    close(fd);
    return -1;
}

Test(tls, the_handshake_deadline_holds_against_a_trickling_client)
{
    struct daemon d;
    const char *extra[] = {"--tls-handshake-timeout", "300ms", NULL};
    start_tls(&d, extra);
    int h = trickle_until_closed(d.http_port);
    int g = trickle_until_closed(d.grpc_port);
    cr_expect(h >= 0, "the HTTP port kept a trickling handshake open");
    cr_expect(g >= 0, "the gRPC port kept a trickling handshake open");
    struct tlsc_opts o = opts_ca();
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("timeout")), 2);
    cr_expect_eq(tls_metric(&d, &o, NULL, FAILS("other")), 0);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* Bodies of megabytes over TLS, HTTP and gRPC: every record of them is
 * counted (the body path reads ahead and across TLS records). */
Test(tls, large_exports_over_tls_arrive_whole)
{
    struct daemon d;
    char out[4096], ca[400], big[400], bigg[400];
    start_tls(&d, NULL);
    path_of(ca, sizeof(ca), "ca.pem");
    path_of(big, sizeof(big), "big.pb");
    path_of(bigg, sizeof(bigg), "big.grpc");
    size_t len;
    uint8_t *one = httpc_vector("http-protobuf-logs.pb", &len);
    FILE *f = fopen(big, "w");
    cr_assert_not_null(f);
    /* concatenated messages of one type are one message: 300 times the records */
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(fwrite(one, 1, len, f), len);
    }
    fclose(f);
    size_t n = 300 * len;
    f = fopen(bigg, "w");
    cr_assert_not_null(f);
    uint8_t prefix[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    cr_assert_eq(fwrite(prefix, 1, 5, f), 5);
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(fwrite(one, 1, len, f), len);
    }
    fclose(f);
    free(one);

    const char *pb = "-H 'Content-Type: application/x-protobuf'";
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --cacert %s %s --data-binary @%s/http-protobuf-logs.pb -o /dev/null "
                    "-w '%%{http_code}' https://localhost:%d/v1/logs",
                    ca, pb, httpc_vectors_dir(), d.http_port),
                 0);
    cr_expect_str_eq(out, "200");
    struct tlsc_opts o = opts_ca();
    const char *rec_http = "miradb_otlp_records_total{signal=\"logs\",transport=\"http_protobuf\"}";
    double per = tls_metric(&d, &o, NULL, rec_http);
    cr_assert_gt(per, 0);
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --cacert %s %s --data-binary @%s -o /dev/null -w '%%{http_code}' "
                    "https://localhost:%d/v1/logs",
                    ca, pb, big, d.http_port),
                 0);
    cr_expect_str_eq(out, "200");
    cr_expect_eq(tls_metric(&d, &o, NULL, rec_http), 301 * per);
    cr_assert_eq(sh(out, sizeof(out),
                    "curl -sS --http2 --cacert %s -H 'content-type: application/grpc' "
                    "-H 'te: trailers' --data-binary @%s -o /dev/null -D - https://localhost:%d%s",
                    ca, bigg, d.grpc_port, LOGS_PATH),
                 0);
    cr_expect(strstr(out, "grpc-status: 0") != NULL, "%s", out);
    cr_expect_eq(
        tls_metric(&d, &o, NULL, "miradb_otlp_records_total{signal=\"logs\",transport=\"grpc\"}"),
        300 * per);
    cr_expect_eq(daemon_stop(&d), 0);
}

/* `miradb health` over TLS: --tls speaks it (and says ready); without it the
 * plain request gets no HTTP answer from a TLS listener. */
Test(tls, health_probe_speaks_tls)
{
    struct daemon d;
    start_tls(&d, NULL);
    const char *bin = getenv("MIRADB_BIN");
    cr_assert_not_null(bin);
    char out[512];
    int st = sh(out, sizeof(out), "%s health --tls --http 127.0.0.1:%d 2>&1", bin, d.http_port);
    cr_expect_eq(st, 0, "%s", out);
    char want[64];
    snprintf(want, sizeof(want), "ready (127.0.0.1:%d)\n", d.http_port);
    cr_expect_str_eq(out, want);
    st = sh(out, sizeof(out), "%s health --timeout 3 --http 127.0.0.1:%d 2>&1", bin, d.http_port);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect_eq(daemon_stop(&d), 0);
}
