/*
 * tls_test.c - building the TLS contexts (server/tls.c): which flag
 * combinations start, which files are refused and with what message, and
 * a reload that fails keeping the contexts it had.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"
#include "server/tls.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void certs(void)
{
    char cmd[2048];
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout a.key -out a.pem -days 2 "
             "-subj /CN=a 2>/dev/null && openssl req -x509 -newkey rsa:2048 -nodes -keyout b.key "
             "-out b.pem -days 2 -subj /CN=b 2>/dev/null && echo junk > junk.pem",
             dir);
    cr_assert_eq(system(cmd), 0);
}

static void done(void)
{
    tls_fini();
}

TestSuite(tls_ctx, .init = certs, .fini = done);

static int init(const char *cert, const char *key, const char *ca, char *err, size_t errlen)
{
    struct config c = {0};
    c.tls_handshake_timeout_ms = 10000;
    if (cert != NULL) {
        snprintf(c.tls_cert, sizeof(c.tls_cert), "%s/%s", dir, cert);
    }
    if (key != NULL) {
        snprintf(c.tls_key, sizeof(c.tls_key), "%s/%s", dir, key);
    }
    if (ca != NULL) {
        snprintf(c.tls_client_ca, sizeof(c.tls_client_ca), "%s/%s", dir, ca);
    }
    return tls_init(&c, err, errlen);
}

Test(tls_ctx, no_flags_means_plain_tcp)
{
    char err[512];
    cr_expect_eq(init(NULL, NULL, NULL, err, sizeof(err)), 0);
    cr_expect(!tls_enabled());
    cr_expect_eq(tls_reload(err, sizeof(err)), 0);
}

Test(tls_ctx, cert_and_key_go_together)
{
    char err[512];
    cr_expect_eq(init("a.pem", NULL, NULL, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "--tls-cert and --tls-key go together");
    cr_expect_eq(init(NULL, NULL, "a.pem", err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "--tls-client-ca needs --tls-cert and --tls-key");
    cr_expect(!tls_enabled());
}

Test(tls_ctx, bad_files_are_refused_naming_them)
{
    char err[512], want[600];
    cr_expect_eq(init("junk.pem", "a.key", NULL, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "--tls-cert %s/junk.pem: ", dir);
    cr_expect(strncmp(err, want, strlen(want)) == 0, "%s", err);
    cr_expect_eq(init("a.pem", "b.key", NULL, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "--tls-key %s/b.key: ", dir);
    cr_expect(strncmp(err, want, strlen(want)) == 0, "%s", err);
    cr_expect(strstr(err, "key values mismatch") != NULL, "%s", err);
    cr_expect_eq(init("a.pem", "a.key", "junk.pem", err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "--tls-client-ca %s/junk.pem: ", dir);
    cr_expect(strncmp(err, want, strlen(want)) == 0, "%s", err);
    cr_expect(!tls_enabled());
}

Test(tls_ctx, a_failed_reload_keeps_the_loaded_contexts)
{
    char err[512], cmd[1024];
    cr_assert_eq(init("a.pem", "a.key", "b.pem", err, sizeof(err)), 0, "%s", err);
    cr_expect(tls_enabled());
    cr_expect_eq(tls_reload(err, sizeof(err)), 0, "%s", err);
    snprintf(cmd, sizeof(cmd), "cp %s/junk.pem %s/a.pem", dir, dir);
    cr_assert_eq(system(cmd), 0);
    cr_expect_eq(tls_reload(err, sizeof(err)), -EINVAL);
    cr_expect(strstr(err, "--tls-cert ") == err, "%s", err);
    cr_expect(tls_enabled());
    struct ssl_st *s = tls_new(TLS_HTTP, 0); /* a context is still there to make one */
    cr_expect_not_null(s);
    tls_free(s);
}
