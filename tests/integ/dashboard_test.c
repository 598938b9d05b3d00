/*
 * dashboard_test.c - deploy/grafana-dashboard.json against the daemon it
 * charts (issue 15, self-monitoring): the file parses as a Grafana
 * dashboard (schemaVersion 37+, the ${DS_PROMETHEUS} input), every metric
 * name its expressions use is one a running daemon's /metrics exposes, and
 * every metric family /metrics exposes is charted. The daemon runs with TLS
 * (a self-signed certificate made with the openssl CLI) and an ingest
 * token file so that the TLS and token families have samples on the page; a new metric, or a
 * renamed one, fails here until the dashboard follows.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/daemon.h"
#include "tests/util/tlsc.h"
#include "tests/util/tmpdir.h"

#define MAX_NAMES 512

struct names {
    char *v[MAX_NAMES];
    int n;
};

static bool has(const struct names *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->v[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static void add(struct names *s, const char *p, size_t len)
{
    char *name = strndup(p, len);
    cr_assert_not_null(name);
    if (has(s, name)) {
        free(name);
        return;
    }
    cr_assert_lt(s->n, MAX_NAMES);
    s->v[s->n++] = name;
}

static void names_free(struct names *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->v[i]);
    }
    s->n = 0;
}

static bool ident(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* The miradb_* identifiers of a PromQL expression (label names never start
 * with miradb_; strings in the expressions hold none). */
static void expr_names(const char *e, struct names *out)
{
    for (const char *p = e; *p != '\0';) {
        if (!ident(*p, true) || (p > e && ident(p[-1], false))) {
            p++;
            continue;
        }
        const char *q = p;
        while (ident(*q, false)) {
            q++;
        }
        if (strncmp(p, "miradb_", 7) == 0) {
            add(out, p, (size_t)(q - p));
        }
        p = q;
    }
}

/* Panels (rows' nested panels included): every target's expr. */
static void panel_names(json_t *panels, struct names *out, int *targets)
{
    size_t i;
    json_t *p;
    json_array_foreach(panels, i, p)
    {
        json_t *t, *inner = json_object_get(p, "panels");
        size_t k;
        if (inner != NULL) {
            panel_names(inner, out, targets);
        }
        json_array_foreach(json_object_get(p, "targets"), k, t)
        {
            const char *e = json_string_value(json_object_get(t, "expr"));
            cr_assert_not_null(e, "panel \"%s\": a target without expr",
                               json_string_value(json_object_get(p, "title")));
            cr_expect_str_eq(
                json_string_value(json_object_get(json_object_get(t, "datasource"), "uid")),
                "${DS_PROMETHEUS}");
            expr_names(e, out);
            (*targets)++;
        }
    }
}

/* Sample names and family names (# TYPE) of a /metrics page. */
static void scrape_names(const char *page, struct names *samples, struct names *families)
{
    for (const char *l = page; *l != '\0';) {
        const char *eol = strchr(l, '\n');
        size_t len = eol != NULL ? (size_t)(eol - l) : strlen(l);
        if (strncmp(l, "# TYPE ", 7) == 0) {
            const char *q = l + 7;
            add(families, q, strcspn(q, " "));
        } else if (l[0] != '#' && len > 0) {
            add(samples, l, strcspn(l, "{ "));
        }
        l += len + (eol != NULL);
    }
}

Test(dashboard, every_metric_the_dashboard_charts_is_on_metrics_and_every_family_is_charted)
{
    char path[600], dir[300], cert[400], key[400], tok[400], err[256];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s%sdeploy/grafana-dashboard.json", v != NULL ? v : "",
             v != NULL ? "/../../" : "");
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(root, "%s:%d: %s", path, je.line, je.text);
    cr_expect_geq(json_integer_value(json_object_get(root, "schemaVersion")), 37);
    json_t *in = json_array_get(json_object_get(root, "__inputs"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(in, "name")), "DS_PROMETHEUS");
    cr_expect_str_eq(json_string_value(json_object_get(in, "pluginId")), "prometheus");
    struct names used = {0}, samples = {0}, families = {0};
    int targets = 0;
    panel_names(json_object_get(root, "panels"), &used, &targets);
    cr_expect_geq(targets, 40, "only %d targets", targets);

    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout srv.key -out srv.pem "
             "-days 2 -subj /CN=localhost 2>/dev/null",
             dir);
    cr_assert_eq(system(cmd), 0, "openssl could not make a certificate");
    cr_assert_eq(tmpdir_join(cert, sizeof(cert), dir, "srv.pem"), 0);
    cr_assert_eq(tmpdir_join(key, sizeof(key), dir, "srv.key"), 0);
    cr_assert_eq(tmpdir_join(tok, sizeof(tok), dir, "tokens"), 0);
    FILE *f = fopen(tok, "w");
    cr_assert_not_null(f);
    fputs("dashboard-test-token-0123456789\n", f);
    fclose(f);
    const char *args[] = {"--io-threads",        "1", "--tls-cert", cert, "--tls-key", key,
                          "--ingest-token-file", tok, NULL};
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    struct tlsc *c;
    struct tlsc_opts o = {0};
    cr_assert_eq(tlsc_connect(d.http_port, &o, &c, err, sizeof(err)), 0, "%s", err);
    struct http_resp r;
    cr_assert_eq(tlsc_request(c, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    char *page = strndup((const char *)r.body, r.body_len);
    http_resp_free(&r);
    tlsc_free(c);
    cr_expect_eq(daemon_stop(&d), 0);
    scrape_names(page, &samples, &families);
    free(page);
    cr_assert_geq(families.n, 40, "only %d families on /metrics", families.n);

    for (int i = 0; i < used.n; i++) {
        cr_expect(has(&samples, used.v[i]), "the dashboard charts %s, which /metrics lacks",
                  used.v[i]);
    }
    for (int i = 0; i < families.n; i++) {
        char b[200], s[200], n[200];
        snprintf(b, sizeof(b), "%s_bucket", families.v[i]);
        snprintf(s, sizeof(s), "%s_sum", families.v[i]);
        snprintf(n, sizeof(n), "%s_count", families.v[i]);
        cr_expect(has(&used, families.v[i]) || has(&used, b) || has(&used, s) || has(&used, n),
                  "/metrics has %s, which the dashboard does not chart", families.v[i]);
    }
    names_free(&used);
    names_free(&samples);
    names_free(&families);
    json_decref(root);
}
