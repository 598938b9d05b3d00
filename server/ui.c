/*
 * ui.c - serves the embedded web UI (see ui.h).
 */
#include "server/ui.h"

#include <errno.h>
#include <string.h>

#include <event2/buffer.h>

#include "server/http1.h"

#define UI_PREFIX "/ui/"
#define UI_ASSETS "/ui/a/"

const struct ui_file *ui_file_named(const char *name)
{
    for (size_t i = 0; i < ui_nfiles; i++) {
        if (strcmp(ui_files[i].name, name) == 0) {
            return &ui_files[i];
        }
    }
    return NULL;
}

bool ui_etag_listed(const char *inm, const char *etag)
{
    size_t el = strlen(etag);
    const char *p = inm;
    while (p != NULL && *p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        if (*p == '*') {
            return true;
        }
        if (p[0] == 'W' && p[1] == '/') {
            p += 2;
        }
        const char *end = p;
        if (*p == '"') {
            const char *q = strchr(p + 1, '"');
            end = q != NULL ? q + 1 : p + strlen(p);
        } else {
            end = p + strcspn(p, ", \t");
        }
        if ((size_t)(end - p) == el && memcmp(p, etag, el) == 0) {
            return true;
        }
        p = end;
    }
    return false;
}

static void answer_file(struct ui_answer *a, const struct ui_file *f, const char *inm)
{
    a->file = f;
    a->cache = f->hashed ? UI_CACHE_ASSET : UI_CACHE_INDEX;
    a->status = inm != NULL && ui_etag_listed(inm, f->etag) ? 304 : 200;
}

void ui_resolve(const char *path, const char *inm, struct ui_answer *a)
{
    *a = (struct ui_answer){.status = 404};
    if (strcmp(path, "/") == 0) {
        a->status = 302;
        a->location = UI_PREFIX;
        return;
    }
    if (strcmp(path, "/ui") == 0) {
        a->status = 301;
        a->location = UI_PREFIX;
        return;
    }
    if (strcmp(path, UI_PREFIX) == 0 || strcmp(path, UI_PREFIX "index.html") == 0) {
        const struct ui_file *f = ui_file_named("index.html");
        if (f != NULL) {
            answer_file(a, f, inm);
        }
        return;
    }
    size_t al = strlen(UI_ASSETS), hl = strlen(ui_set_hash);
    if (strncmp(path, UI_ASSETS, al) != 0 || strncmp(path + al, ui_set_hash, hl) != 0 ||
        path[al + hl] != '/') {
        return;
    }
    const struct ui_file *f = ui_file_named(path + al + hl + 1);
    if (f != NULL && f->hashed) {
        answer_file(a, f, inm);
    }
}

static void h_ui(struct http1_req *r)
{
    struct ui_answer a;
    ui_resolve(http1_req_path(r), http1_req_header(r, "If-None-Match"), &a);
    if (a.status == 404) {
        http1_resp_start(r, 404, "text/plain; charset=utf-8");
        http1_resp_header(r, "X-Content-Type-Options", "nosniff");
        evbuffer_add(http1_resp_body(r), "not found", 9);
        http1_resp_end(r);
        return;
    }
    if (a.location != NULL) {
        http1_resp_start(r, a.status, "text/plain; charset=utf-8");
        http1_resp_header(r, "Location", a.location);
        http1_resp_end(r);
        return;
    }
    http1_resp_start(r, a.status, a.file->ctype);
    http1_resp_header(r, "ETag", a.file->etag);
    http1_resp_header(r, "Cache-Control", a.cache);
    http1_resp_header(r, "Content-Security-Policy", UI_CSP);
    http1_resp_header(r, "X-Content-Type-Options", "nosniff");
    http1_resp_header(r, "Referrer-Policy", "no-referrer");
    if (a.status == 200) {
        /* static bytes: referenced, not copied */
        evbuffer_add_reference(http1_resp_body(r), a.file->data, a.file->len, NULL, NULL);
    }
    http1_resp_end(r);
}

int ui_register(void)
{
    int rc = http1_route_add_open("/", false, h_ui);
    if (rc == 0) {
        rc = http1_route_add_open("/ui", false, h_ui);
    }
    if (rc == 0) {
        rc = http1_route_add_open(UI_PREFIX, true, h_ui);
    }
    return rc;
}
