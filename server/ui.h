/*
 * ui.h - the built-in web UI: the files of ui/web/, embedded in the binary
 * at build time (ui/embed.c writes build/gen/ui_files.c), served on the
 * HTTP listener.
 *
 *   GET /              302 to /ui/ (nothing else is served at /)
 *   GET /ui            301 to /ui/
 *   GET /ui/           index.html; Cache-Control: no-cache
 *   GET /ui/a/<set>/F  file F of this build (<set> = ui_set_hash); cached
 *                      for a year, immutable: a new build has a new <set>
 *   anything else under /ui/ (an old build's <set> too): 404
 *
 * Every file carries its Content-Type, a strong ETag (a hash of its bytes;
 * If-None-Match with it answers 304), X-Content-Type-Options: nosniff and
 * a Content-Security-Policy that allows only this origin's scripts, styles
 * and connections (no inline script or style, no frames, no plugins).
 *
 * The pages call the query APIs (Loki, Tempo, Prometheus) and /metrics
 * with fetch; under --query-token-file each call carries the token the
 * person typed (kept in sessionStorage).
 *
 * Threads: ui_register from main before the I/O threads start; the rest on
 * any thread (read-only tables).
 */
#ifndef MIRADB_UI_H
#define MIRADB_UI_H

#include <stdbool.h>
#include <stddef.h>

/* One embedded file (the generated table). */
struct ui_file {
    const char *name;  /* "index.html", "app.js" */
    const char *ctype; /* Content-Type */
    const char *etag;  /* "\"<32 hex>\"", quotes included */
    const unsigned char *data;
    size_t len;
    bool hashed; /* served under /ui/a/<set>/ (everything but index.html) */
};

extern const struct ui_file ui_files[];
extern const size_t ui_nfiles;
extern const char ui_set_hash[]; /* 16 hex digits */

#define UI_CSP                                                                                     \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "                 \
    "frame-ancestors 'none'"
#define UI_CACHE_INDEX "no-cache"
#define UI_CACHE_ASSET "public, max-age=31536000, immutable"

/* What to answer a GET of |path|. */
struct ui_answer {
    int status;                 /* 200, 301, 302, 304 or 404 */
    const struct ui_file *file; /* 200 and 304: the file (borrowed, static) */
    const char *location;       /* 301 and 302: a literal */
    const char *cache;          /* 200 and 304: Cache-Control, a literal */
};

/* Decides the answer for |path| (no query string) and the request's
 * If-None-Match header |inm| (NULL: absent). Never fails. */
void ui_resolve(const char *path, const char *inm, struct ui_answer *a);
/* The file named |name|, or NULL. */
const struct ui_file *ui_file_named(const char *name);
/* Whether If-None-Match value |inm| lists |etag| ("*" lists any; W/ prefixes
 * are ignored, as the weak comparison RFC 9110 13.1.2 asks). */
bool ui_etag_listed(const char *inm, const char *etag);

/* Adds the routes. 0, or -ENOSPC (the route table is full). */
int ui_register(void);

#endif
