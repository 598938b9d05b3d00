/*
 * ui_test.c - server/ui.c: which embedded file a path gets, with which
 * caching, and when If-None-Match answers 304. Runs against the table the
 * build generated from ui/web/ (build/gen/ui_files.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "server/ui.h"

static struct ui_answer get(const char *path, const char *inm)
{
    struct ui_answer a;
    ui_resolve(path, inm, &a);
    return a;
}

static void asset_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/ui/a/%s/%s", ui_set_hash, name);
}

Test(ui, the_table_holds_index_app_and_styles_with_their_types)
{
    const struct ui_file *i = ui_file_named("index.html");
    const struct ui_file *js = ui_file_named("app.js");
    const struct ui_file *css = ui_file_named("app.css");
    cr_assert_not_null(i);
    cr_assert_not_null(js);
    cr_assert_not_null(css);
    cr_expect_str_eq(i->ctype, "text/html; charset=utf-8");
    cr_expect_str_eq(js->ctype, "text/javascript; charset=utf-8");
    cr_expect_str_eq(css->ctype, "text/css; charset=utf-8");
    cr_expect(!i->hashed);
    cr_expect(js->hashed && css->hashed);
    cr_expect_eq(strlen(ui_set_hash), 16);
    cr_expect_null(ui_file_named("missing.js"));
    for (size_t k = 0; k < ui_nfiles; k++) {
        const struct ui_file *f = &ui_files[k];
        /* a strong ETag: a quoted 32-hex-digit hash, no W/ */
        cr_expect_eq(strlen(f->etag), 34, "%s: %s", f->name, f->etag);
        cr_expect(f->etag[0] == '"' && f->etag[33] == '"', "%s", f->name);
        cr_expect_eq(strspn(f->etag + 1, "0123456789abcdef"), 32, "%s", f->name);
        cr_expect_gt(f->len, 0, "%s", f->name);
        cr_expect_eq(f->data[f->len], 0, "%s: NUL after the bytes", f->name);
    }
}

Test(ui, index_names_this_builds_asset_path_and_no_placeholder_is_left)
{
    const struct ui_file *i = ui_file_named("index.html");
    char want[64];
    snprintf(want, sizeof(want), "src=\"a/%s/app.js\"", ui_set_hash);
    cr_expect_not_null(strstr((const char *)i->data, want), "%s", want);
    snprintf(want, sizeof(want), "href=\"a/%s/app.css\"", ui_set_hash);
    cr_expect_not_null(strstr((const char *)i->data, want), "%s", want);
    cr_expect_null(strstr((const char *)i->data, "@ASSETS@"));
    /* no inline script: the CSP forbids it, so the page would break */
    cr_expect_null(strstr((const char *)i->data, "<script>"));
}

Test(ui, index_is_served_at_ui_slash_and_index_html_never_cached_blindly)
{
    struct ui_answer a = get("/ui/", NULL);
    cr_expect_eq(a.status, 200);
    cr_expect_eq(a.file, ui_file_named("index.html"));
    cr_expect_str_eq(a.cache, "no-cache");
    a = get("/ui/index.html", NULL);
    cr_expect_eq(a.status, 200);
    cr_expect_eq(a.file, ui_file_named("index.html"));
}

Test(ui, hashed_assets_are_immutable_and_found_only_under_this_builds_set)
{
    char p[128];
    asset_path(p, sizeof(p), "app.js");
    struct ui_answer a = get(p, NULL);
    cr_expect_eq(a.status, 200);
    cr_expect_eq(a.file, ui_file_named("app.js"));
    cr_expect_str_eq(a.cache, "public, max-age=31536000, immutable");
    cr_expect_eq(get("/ui/a/0000000000000000/app.js", NULL).status, 404);
    cr_expect_eq(get("/ui/app.js", NULL).status, 404);
    asset_path(p, sizeof(p), "index.html"); /* the index is not an asset */
    cr_expect_eq(get(p, NULL).status, 404);
    asset_path(p, sizeof(p), "nope.js");
    cr_expect_eq(get(p, NULL).status, 404);
    snprintf(p, sizeof(p), "/ui/a/%s", ui_set_hash);
    cr_expect_eq(get(p, NULL).status, 404);
    snprintf(p, sizeof(p), "/ui/a/%sX/app.js", ui_set_hash);
    cr_expect_eq(get(p, NULL).status, 404);
    asset_path(p, sizeof(p), "../index.html");
    cr_expect_eq(get(p, NULL).status, 404);
    cr_expect_eq(get("/ui/logs", NULL).status, 404);
}

Test(ui, root_and_bare_ui_redirect_to_ui_slash)
{
    struct ui_answer a = get("/", NULL);
    cr_expect_eq(a.status, 302);
    cr_expect_str_eq(a.location, "/ui/");
    a = get("/ui", NULL);
    cr_expect_eq(a.status, 301);
    cr_expect_str_eq(a.location, "/ui/");
    cr_expect_null(a.file);
}

Test(ui, if_none_match_with_the_etag_answers_304_and_another_tag_200)
{
    const struct ui_file *js = ui_file_named("app.js");
    char p[128], inm[128];
    asset_path(p, sizeof(p), "app.js");
    struct ui_answer a = get(p, js->etag);
    cr_expect_eq(a.status, 304);
    cr_expect_eq(a.file, js);
    cr_expect_str_eq(a.cache, "public, max-age=31536000, immutable");
    snprintf(inm, sizeof(inm), "\"abc\", W/%s", js->etag);
    cr_expect_eq(get(p, inm).status, 304);
    cr_expect_eq(get(p, "*").status, 304);
    cr_expect_eq(get(p, "\"0123\"").status, 200);
    cr_expect_eq(get(p, "").status, 200);
    /* another file's tag does not match */
    cr_expect_eq(get(p, ui_file_named("index.html")->etag).status, 200);
    cr_expect_eq(get("/ui/", ui_file_named("index.html")->etag).status, 304);
}

Test(ui, etag_lists_parse_as_rfc_9110_says)
{
    cr_expect(ui_etag_listed("\"a\"", "\"a\""));
    cr_expect(ui_etag_listed(" \"b\" ,\"a\"", "\"a\""));
    cr_expect(ui_etag_listed("W/\"a\"", "\"a\""));
    cr_expect(!ui_etag_listed("\"ab\"", "\"a\""));
    cr_expect(!ui_etag_listed("\"a", "\"a\""));
    cr_expect(!ui_etag_listed("a", "\"a\""));
    cr_expect(!ui_etag_listed(",,,", "\"a\""));
    cr_expect(ui_etag_listed("\"x\", *", "\"a\""));
}

Test(ui, the_csp_allows_only_this_origin_and_no_inline_code)
{
    cr_expect_not_null(strstr(UI_CSP, "default-src 'self'"));
    cr_expect_not_null(strstr(UI_CSP, "script-src 'self';"));
    cr_expect_null(strstr(UI_CSP, "unsafe-inline"));
    cr_expect_null(strstr(UI_CSP, "unsafe-eval"));
    cr_expect_not_null(strstr(UI_CSP, "frame-ancestors 'none'"));
}

/* The whole of ui/web/NAME (tests run from the repository root); malloc'd. */
static char *read_source(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof(path), "ui/web/%s", name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *b = malloc(1 << 20);
    cr_assert_not_null(b);
    *len = fread(b, 1, 1 << 20, f);
    cr_assert(*len < (1 << 20) && !ferror(f), "%s", path);
    b[*len] = '\0';
    fclose(f);
    return b;
}

Test(ui, each_file_is_its_source_and_its_etag_the_xxh3_128_of_what_is_served)
{
    for (size_t k = 0; k < ui_nfiles; k++) {
        const struct ui_file *f = &ui_files[k];
        size_t n;
        char *src = read_source(f->name, &n);
        if (f->hashed) {
            cr_expect(n == f->len && memcmp(src, f->data, n) == 0, "%s: bytes differ", f->name);
        } else {
            /* the index: the source with every @ASSETS@ as a/<set> (same length: 8 -> 18) */
            char *p = strstr(src, "@ASSETS@");
            size_t count = 0;
            for (; p != NULL && (size_t)(p - src) < n; p = strstr(p + 1, "@ASSETS@")) {
                count++;
            }
            cr_expect_eq(count, 3, "index.html names app.css, icon.svg and app.js");
            cr_expect_eq(f->len, n + count * (2 + 16 - 8), "%s", f->name);
        }
        XXH128_hash_t h = XXH3_128bits(f->data, f->len);
        char want[40];
        snprintf(want, sizeof(want), "\"%016llx%016llx\"", (unsigned long long)h.high64,
                 (unsigned long long)h.low64);
        cr_expect_str_eq(f->etag, want, "%s", f->name);
        free(src);
    }
}
