/*
 * auth_test.c - token files and the check (server/auth.c): file format,
 * Bearer and Basic, refusal reasons and counts, reload keeping the old
 * set when the new file fails.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "server/auth.h"
#include "server/config.h"
#include "tests/util/tmpdir.h"

static char dir[256], ing[300], qry[300];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    cr_assert_eq(tmpdir_join(ing, sizeof(ing), dir, "ingest"), 0);
    cr_assert_eq(tmpdir_join(qry, sizeof(qry), dir, "query"), 0);
}

static void teardown(void)
{
    auth_fini();
}

TestSuite(auth, .init = setup, .fini = teardown);

static int init_with(const char *ingest_text, const char *query_text, char *err, size_t errlen)
{
    struct config c = {0};
    if (ingest_text != NULL) {
        put(ing, ingest_text);
        snprintf(c.ingest_token_file, sizeof(c.ingest_token_file), "%s", ing);
    }
    if (query_text != NULL) {
        put(qry, query_text);
        snprintf(c.query_token_file, sizeof(c.query_token_file), "%s", qry);
    }
    return auth_init(&c, err, errlen);
}

static enum auth_result check(enum auth_class k, const char *h)
{
    return auth_check(k, h, h ? strlen(h) : 0, NULL);
}

Test(auth, no_token_file_means_every_request_passes)
{
    char err[256];
    cr_assert_eq(init_with(NULL, NULL, err, sizeof(err)), 0);
    cr_expect(!auth_required(AUTH_INGEST));
    cr_expect_eq(check(AUTH_INGEST, NULL), AUTH_OK);
    cr_expect_eq(check(AUTH_QUERY, "Bearer whatever"), AUTH_OK);
}

Test(auth, file_format_comments_blanks_and_trimming)
{
    char err[256];
    cr_assert_eq(init_with("# ops team\n\n  alpha \r\n\tbeta\n#gamma\n", NULL, err, sizeof(err)), 0,
                 "%s", err);
    cr_expect_eq(check(AUTH_INGEST, "Bearer alpha"), AUTH_OK);
    cr_expect_eq(check(AUTH_INGEST, "Bearer beta"), AUTH_OK);
    cr_expect_eq(check(AUTH_INGEST, "Bearer gamma"), AUTH_INVALID);
    cr_expect_eq(check(AUTH_INGEST, "Bearer #gamma"), AUTH_INVALID);
    cr_expect_eq(check(AUTH_INGEST, "Bearer alph"), AUTH_INVALID);
    cr_expect_eq(check(AUTH_INGEST, "Bearer alphaa"), AUTH_INVALID);
    cr_expect_eq(check(AUTH_INGEST, "bearer   alpha  "), AUTH_OK);
    cr_expect_eq(check(AUTH_QUERY, NULL), AUTH_OK); /* the other class has no file */
}

Test(auth, schemes_and_refusal_reasons)
{
    char err[256];
    bool basic;
    cr_assert_eq(init_with(NULL, "tok-1\n", err, sizeof(err)), 0);
    cr_expect_eq(check(AUTH_QUERY, NULL), AUTH_MISSING);
    cr_expect_eq(check(AUTH_QUERY, "Bearer"), AUTH_MISSING);
    cr_expect_eq(check(AUTH_QUERY, "Bearer   "), AUTH_MISSING);
    cr_expect_eq(check(AUTH_QUERY, "Digest tok-1"), AUTH_MISSING);
    cr_expect_eq(check(AUTH_QUERY, "tok-1"), AUTH_MISSING);
    /* Basic: any user, the token as the password ("admin:tok-1", ":tok-1") */
    cr_expect_eq(auth_check(AUTH_QUERY, "Basic YWRtaW46dG9rLTE=", 22, &basic), AUTH_OK);
    cr_expect(basic);
    cr_expect_eq(check(AUTH_QUERY, "Basic OnRvay0x"), AUTH_OK);
    cr_expect_eq(check(AUTH_QUERY, "Basic dG9rLTE="), AUTH_INVALID);         /* "tok-1": no colon */
    cr_expect_eq(check(AUTH_QUERY, "Basic YWRtaW46"), AUTH_INVALID);         /* "admin:" */
    cr_expect_eq(check(AUTH_QUERY, "Basic !!!!"), AUTH_INVALID);             /* not base64 */
    cr_expect_eq(check(AUTH_QUERY, "Basic dG9rLTE6YWRtaW4="), AUTH_INVALID); /* "tok-1:admin" */
    cr_expect_eq(auth_check(AUTH_QUERY, "Bearer tok-1", 12, &basic), AUTH_OK);
    cr_expect(!basic);
    /* the length given is what counts, not a NUL */
    cr_expect_eq(auth_check(AUTH_QUERY, "Bearer tok-12", 12, NULL), AUTH_OK);

    struct evbuffer *b = evbuffer_new();
    auth_metrics_text(b);
    size_t n = evbuffer_get_length(b);
    char *text = (char *)evbuffer_pullup(b, -1);
    cr_assert_not_null(text);
    char *copy = strndup(text, n);
    cr_expect(strstr(copy, "miradb_auth_refusals_total{class=\"query\",reason=\"missing\"} 5\n"));
    cr_expect(strstr(copy, "miradb_auth_refusals_total{class=\"query\",reason=\"invalid\"} 4\n"));
    cr_expect(strstr(copy, "miradb_auth_refusals_total{class=\"ingest\",reason=\"missing\"} 0\n"));
    cr_expect(strstr(copy, "miradb_auth_tokens{class=\"query\"} 1\n"));
    cr_expect_null(strstr(copy, "miradb_auth_tokens{class=\"ingest\"}"));
    free(copy);
    evbuffer_free(b);
}

Test(auth, bad_files_are_refused_naming_the_file)
{
    char err[512], want[600];
    cr_expect_eq(init_with("# only a comment\n", NULL, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "token file %s holds no token", ing);
    cr_expect_str_eq(err, want);
    auth_fini();
    struct config c = {0};
    snprintf(c.query_token_file, sizeof(c.query_token_file), "%s/missing", dir);
    cr_expect_eq(auth_init(&c, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "cannot read token file %s/missing: No such file or directory",
             dir);
    cr_expect_str_eq(err, want);
}

Test(auth, reload_swaps_the_set_and_a_failed_reload_keeps_it)
{
    char err[512];
    cr_assert_eq(init_with("old\n", "q1\n", err, sizeof(err)), 0);
    put(ing, "new\n");
    cr_assert_eq(auth_reload(err, sizeof(err)), 0, "%s", err);
    cr_expect_eq(check(AUTH_INGEST, "Bearer old"), AUTH_INVALID);
    cr_expect_eq(check(AUTH_INGEST, "Bearer new"), AUTH_OK);
    put(ing, "\n");
    put(qry, "q2\n");
    cr_expect_eq(auth_reload(err, sizeof(err)), -EINVAL);
    cr_expect_eq(check(AUTH_INGEST, "Bearer new"), AUTH_OK); /* kept */
    cr_expect_eq(check(AUTH_QUERY, "Bearer q2"), AUTH_OK);   /* the other class reloaded */
    cr_expect_eq(check(AUTH_QUERY, "Bearer q1"), AUTH_INVALID);
}
