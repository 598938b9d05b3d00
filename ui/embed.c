/*
 * embed.c - the build step that turns ui/web/ into C (build/gen/ui_files.c).
 *
 *   ui-embed OUT.c DIR NAME...
 *
 * Writes one struct ui_file (server/ui.h) per NAME, read from DIR/NAME: its
 * bytes, size, Content-Type (from the extension; an unknown extension is an
 * error, so nothing is served as a guess) and a strong ETag, the XXH3-128
 * of its bytes. Every file but index.html is served under
 * /ui/a/<set>/NAME, <set> being a hash of all those files' names and
 * bytes: a new build changes the path, so those answers can be cached
 * forever. index.html names them through the placeholder @ASSETS@, which
 * is replaced here by "a/<set>" before its own ETag is taken.
 *
 * Runs on the build machine only; exits 0, or 1 with one line on stderr.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define PLACEHOLDER "@ASSETS@"

struct file {
    const char *name;
    unsigned char *data;
    size_t len;
};

static int die(const char *what, const char *name)
{
    fprintf(stderr, "ui-embed: %s: %s\n", name, what);
    return 1;
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b != NULL) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            break;
        }
        unsigned char *nb = realloc(b, cap * 2);
        if (nb == NULL) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    if (b != NULL && ferror(f)) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n;
    return b;
}

static const char *ctype_of(const char *name)
{
    static const struct {
        const char *ext, *ctype;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot != NULL && i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(dot, types[i].ext) == 0) {
            return types[i].ctype;
        }
    }
    return NULL;
}

/* |f|'s bytes with every PLACEHOLDER replaced by |with|; 0 or -ENOMEM. */
static int substitute(struct file *f, const char *with)
{
    size_t pl = strlen(PLACEHOLDER), wl = strlen(with), count = 0;
    for (size_t i = 0; i + pl <= f->len; i++) {
        if (memcmp(f->data + i, PLACEHOLDER, pl) == 0) {
            count++;
            i += pl - 1;
        }
    }
    unsigned char *out = malloc(f->len + count * wl + 1);
    if (out == NULL) {
        return -ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < f->len;) {
        if (i + pl <= f->len && memcmp(f->data + i, PLACEHOLDER, pl) == 0) {
            memcpy(out + o, with, wl);
            o += wl;
            i += pl;
        } else {
            out[o++] = f->data[i++];
        }
    }
    free(f->data);
    f->data = out;
    f->len = o;
    return 0;
}

static void hex128(const void *p, size_t n, char out[33])
{
    XXH128_hash_t h = XXH3_128bits(p, n);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

static void emit_bytes(FILE *o, const struct file *f)
{
    for (size_t i = 0; i < f->len; i++) {
        fprintf(o, "%s%u,", i % 20 == 0 ? "\n    " : "", f->data[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: ui-embed OUT.c DIR NAME...\n");
        return 64;
    }
    const char *out_path = argv[1], *dir = argv[2];
    int n = argc - 3;
    struct file *fs = calloc((size_t)n, sizeof(*fs));
    if (fs == NULL) {
        return die("out of memory", out_path);
    }
    int index = -1;
    XXH3_state_t *set = XXH3_createState();
    if (set == NULL || XXH3_64bits_reset(set) == XXH_ERROR) {
        return die("out of memory", out_path);
    }
    for (int i = 0; i < n; i++) {
        char path[4096];
        fs[i].name = argv[3 + i];
        if (strchr(fs[i].name, '"') != NULL || strchr(fs[i].name, '\\') != NULL ||
            ctype_of(fs[i].name) == NULL) {
            return die("a name with a quote or backslash, or an extension with no known type",
                       fs[i].name);
        }
        snprintf(path, sizeof(path), "%s/%s", dir, fs[i].name);
        fs[i].data = read_all(path, &fs[i].len);
        if (fs[i].data == NULL) {
            return die(strerror(errno ? errno : ENOMEM), path);
        }
        if (strcmp(fs[i].name, "index.html") == 0) {
            index = i;
            continue;
        }
        XXH3_64bits_update(set, fs[i].name, strlen(fs[i].name) + 1);
        XXH3_64bits_update(set, fs[i].data, fs[i].len);
    }
    if (index < 0) {
        return die("no index.html among the files", dir);
    }
    char set_hex[17], assets[24];
    snprintf(set_hex, sizeof(set_hex), "%016llx", (unsigned long long)XXH3_64bits_digest(set));
    XXH3_freeState(set);
    snprintf(assets, sizeof(assets), "a/%s", set_hex);
    if (substitute(&fs[index], assets) < 0) {
        return die("out of memory", "index.html");
    }

    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
    FILE *o = fopen(tmp, "w");
    if (o == NULL) {
        return die(strerror(errno), tmp);
    }
    fprintf(o, "/* Generated by ui/embed.c from %s: do not edit. */\n", dir);
    fprintf(o, "#include \"server/ui.h\"\n\n");
    fprintf(o, "const char ui_set_hash[] = \"%s\";\n", set_hex);
    for (int i = 0; i < n; i++) {
        fprintf(o, "\nstatic const unsigned char f%d[] = {", i);
        emit_bytes(o, &fs[i]);
        fprintf(o, "\n    0};\n");
    }
    fprintf(o, "\nconst struct ui_file ui_files[] = {\n");
    for (int i = 0; i < n; i++) {
        char h[33];
        hex128(fs[i].data, fs[i].len, h);
        fprintf(o, "    {\"%s\", \"%s\", \"\\\"%s\\\"\", f%d, %zu, %s},\n", fs[i].name,
                ctype_of(fs[i].name), h, i, fs[i].len, i == index ? "false" : "true");
    }
    fprintf(o, "};\nconst size_t ui_nfiles = %d;\n", n);
    if (fclose(o) != 0 || rename(tmp, out_path) != 0) {
        return die(strerror(errno), out_path);
    }
    for (int i = 0; i < n; i++) {
        free(fs[i].data);
    }
    free(fs);
    return 0;
}
