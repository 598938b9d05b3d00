/*
 * ui_test.c - the embedded web UI as the real daemon serves it: the bytes
 * of each file, its headers (type, caching, ETag, CSP, nosniff), 304 on a
 * matching If-None-Match, the redirects, 404 and 405, and the query token.
 * (tests/ui/ drives the pages themselves in a browser.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/ui.h"
#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

static const char *hdr(const struct http_resp *r, const char *name)
{
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    return http_resp_header(r, name, buf[i], sizeof(buf[i]));
}

static void get(const struct daemon *d, const char *path, const char *const *headers,
                struct http_resp *r)
{
    cr_assert_eq(httpc_request(d->http_port, "GET", path, headers, NULL, 0, 0, r), 0, "%s", path);
}

/* A 200 or 304 for file |f| with all its headers. */
static void expect_file_headers(const struct http_resp *r, const struct ui_file *f)
{
    cr_expect_str_eq(hdr(r, "Content-Type"), f->ctype);
    cr_expect_str_eq(hdr(r, "ETag"), f->etag);
    cr_expect_str_eq(hdr(r, "Cache-Control"), f->hashed ? UI_CACHE_ASSET : UI_CACHE_INDEX);
    cr_expect_str_eq(hdr(r, "Content-Security-Policy"), UI_CSP);
    cr_expect_str_eq(hdr(r, "X-Content-Type-Options"), "nosniff");
}

Test(ui_http, every_embedded_file_is_served_whole_with_its_headers, .timeout = 60)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    for (size_t i = 0; i < ui_nfiles; i++) {
        const struct ui_file *f = &ui_files[i];
        char path[256];
        if (f->hashed) {
            snprintf(path, sizeof(path), "/ui/a/%s/%s", ui_set_hash, f->name);
        } else {
            snprintf(path, sizeof(path), "/ui/");
        }
        struct http_resp r;
        get(&d, path, NULL, &r);
        cr_expect_eq(r.status, 200, "%s", path);
        cr_expect_eq(r.body_len, f->len, "%s", path);
        cr_expect(r.body_len == f->len && memcmp(r.body, f->data, f->len) == 0, "%s: bytes", path);
        expect_file_headers(&r, f);
        http_resp_free(&r);
    }
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(ui_http, a_matching_if_none_match_answers_304_with_no_body, .timeout = 60)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    const struct ui_file *js = ui_file_named("app.js");
    char path[128], inm[128];
    snprintf(path, sizeof(path), "/ui/a/%s/app.js", ui_set_hash);
    snprintf(inm, sizeof(inm), "If-None-Match: %s", js->etag);
    const char *h1[] = {inm, NULL};
    struct http_resp r;
    get(&d, path, h1, &r);
    cr_expect_eq(r.status, 304);
    cr_expect_eq(r.body_len, 0);
    cr_expect_null(hdr(&r, "Content-Length"), "a 304 carries no Content-Length (RFC 9110 8.6)");
    expect_file_headers(&r, js);
    http_resp_free(&r);
    const char *h2[] = {"If-None-Match: \"00\"", NULL};
    get(&d, path, h2, &r);
    cr_expect_eq(r.status, 200);
    cr_expect_eq(r.body_len, js->len);
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(ui_http, redirects_404_and_405, .timeout = 60)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    struct http_resp r;
    get(&d, "/", NULL, &r);
    cr_expect_eq(r.status, 302);
    cr_expect_str_eq(hdr(&r, "Location"), "/ui/");
    http_resp_free(&r);
    get(&d, "/ui", NULL, &r);
    cr_expect_eq(r.status, 301);
    cr_expect_str_eq(hdr(&r, "Location"), "/ui/");
    http_resp_free(&r);
    get(&d, "/ui/a/0000000000000000/app.js", NULL, &r);
    cr_expect_eq(r.status, 404);
    cr_expect_str_eq((const char *)r.body, "not found");
    cr_expect_str_eq(hdr(&r, "X-Content-Type-Options"), "nosniff");
    http_resp_free(&r);
    /* the query string is not part of the path: a view's URL serves the index */
    get(&d, "/ui/?view=logs&q=%7Bservice_name%3D%22a%22%7D", NULL, &r);
    cr_expect_eq(r.status, 200);
    cr_expect_eq(r.body_len, ui_file_named("index.html")->len);
    http_resp_free(&r);
    cr_assert_eq(httpc_request(d.http_port, "POST", "/ui/", NULL, "x", 1, 0, &r), 0);
    cr_expect_eq(r.status, 405);
    cr_expect_str_eq(hdr(&r, "Allow"), "GET, OPTIONS");
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
}

Test(ui_http, under_a_query_token_file_the_ui_loads_without_it_and_the_apis_ask_for_it,
     .timeout = 60)
{
    char dir[] = "/tmp/miradb-ui-tok.XXXXXX", file[64], arg[80];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/q.tokens", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("ui-token\n", f);
    fclose(f);
    snprintf(arg, sizeof(arg), "%s", file);
    const char *args[] = {"--query-token-file", arg, NULL};
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    struct http_resp r;
    /* The page and its files hold no data: no token asked, so a browser can
     * load the page that then asks for the token. */
    get(&d, "/ui/", NULL, &r);
    cr_expect_eq(r.status, 200);
    cr_expect_eq(r.body_len, ui_file_named("index.html")->len);
    http_resp_free(&r);
    get(&d, "/", NULL, &r);
    cr_expect_eq(r.status, 302);
    http_resp_free(&r);
    /* What the page calls still needs it. */
    get(&d, "/loki/api/v1/labels", NULL, &r);
    cr_expect_eq(r.status, 401);
    http_resp_free(&r);
    const char *auth[] = {"Authorization: Bearer ui-token", NULL};
    get(&d, "/loki/api/v1/labels", auth, &r);
    cr_expect_eq(r.status, 200);
    http_resp_free(&r);
    /* The Host check still applies to the open routes. */
    const char *evil[] = {"Host: evil.example", NULL};
    get(&d, "/ui/", evil, &r);
    cr_expect_eq(r.status, 403);
    http_resp_free(&r);
    cr_expect_eq(daemon_stop(&d), 0);
    unlink(file);
    rmdir(dir);
}
