/*
 * conffile.c - the `key = value` file syntax (format in conffile.h).
 *
 * A line is parsed into a fixed buffer: a value longer than
 * CONFFILE_MAX_VALUE is refused rather than cut, so no setting is ever
 * silently shortened.
 */
#include "server/conffile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

static bool is_key_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_';
}

/* The rest of a line after a value: blanks, then nothing or a comment. */
static bool only_comment(const char *p, const char *end)
{
    while (p < end && is_blank(*p)) {
        p++;
    }
    return p == end || *p == '#';
}

/*
 * Reads the value of one line, [p, end), into |out| (cap bytes). 0, or
 * -EINVAL with the reason in |err|.
 */
static int read_value(const char *p, const char *end, char *out, size_t cap, char *err,
                      size_t errlen)
{
    size_t n = 0;
    if (p < end && *p == '"') {
        p++;
        for (;;) {
            if (p == end) {
                snprintf(err, errlen, "unterminated quoted value");
                return -EINVAL;
            }
            char ch = *p++;
            if (ch == '"') {
                break;
            }
            if (ch == '\\') {
                if (p == end || (*p != '"' && *p != '\\')) {
                    snprintf(err, errlen, "only \\\" and \\\\ may follow a backslash in quotes");
                    return -EINVAL;
                }
                ch = *p++;
            }
            if (n + 1 >= cap) {
                snprintf(err, errlen, "value longer than %zu bytes", cap - 1);
                return -EINVAL;
            }
            out[n++] = ch;
        }
        if (!only_comment(p, end)) {
            snprintf(err, errlen, "unexpected text after the closing quote");
            return -EINVAL;
        }
        out[n] = '\0';
        return 0;
    }
    /* Unquoted: up to a '#' that follows a blank, trailing blanks removed
     * (p[-1] exists: the '=' or a blank after it). */
    const char *stop = p;
    while (stop < end && !(*stop == '#' && is_blank(stop[-1]))) {
        if (*stop == '"') {
            snprintf(err, errlen, "a '\"' in an unquoted value (quote the whole value)");
            return -EINVAL;
        }
        stop++;
    }
    while (stop > p && is_blank(stop[-1])) {
        stop--;
    }
    if (stop == p) {
        snprintf(err, errlen, "missing value (write \"\" for an empty one)");
        return -EINVAL;
    }
    n = (size_t)(stop - p);
    if (n >= cap) {
        snprintf(err, errlen, "value longer than %zu bytes", cap - 1);
        return -EINVAL;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

int conffile_parse(const char *text, size_t len, const char *name, conffile_fn fn, void *arg,
                   char *err, size_t errlen)
{
    char key[64];
    char *value = malloc(CONFFILE_MAX_VALUE + 1);
    char why[200];
    int rc = 0;
    if (value == NULL) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    if (memchr(text, '\0', len) != NULL) {
        snprintf(err, errlen, "%s: contains a NUL byte (not a text file)", name);
        rc = -EINVAL;
        goto out;
    }
    const char *p = text, *end = text + len;
    for (int line = 1; p < end; line++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol != NULL ? eol + 1 : end;
        if (eol == NULL) {
            eol = end;
        }
        if (eol > p && eol[-1] == '\r') {
            eol--;
        }
        while (p < eol && is_blank(*p)) {
            p++;
        }
        if (p == eol || *p == '#') {
            p = next;
            continue;
        }
        const char *k = p;
        while (p < eol && is_key_char(*p)) {
            p++;
        }
        size_t kl = (size_t)(p - k);
        while (p < eol && is_blank(*p)) {
            p++;
        }
        if (kl == 0 || p == eol || *p != '=') {
            snprintf(err, errlen, "%s:%d: expected KEY = VALUE", name, line);
            rc = -EINVAL;
            goto out;
        }
        if (kl >= sizeof(key)) {
            snprintf(err, errlen, "%s:%d: key longer than %zu bytes", name, line, sizeof(key) - 1);
            rc = -EINVAL;
            goto out;
        }
        memcpy(key, k, kl);
        key[kl] = '\0';
        p++;
        while (p < eol && is_blank(*p)) {
            p++;
        }
        why[0] = '\0';
        rc = read_value(p, eol, value, CONFFILE_MAX_VALUE + 1, why, sizeof(why));
        if (rc == 0) {
            rc = fn(arg, key, value, line, why, sizeof(why));
        }
        if (rc < 0) {
            snprintf(err, errlen, "%s:%d: %s: %s", name, line, key, why);
            goto out;
        }
        p = next;
    }
out:
    free(value);
    return rc;
}

int conffile_read(const char *path, conffile_fn fn, void *arg, char *err, size_t errlen)
{
    int rc;
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        return rc;
    }
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        snprintf(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > (off_t)CONFFILE_MAX_BYTES) {
        rc = -EFBIG;
        snprintf(err, errlen, "%s: larger than %u bytes", path, CONFFILE_MAX_BYTES);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        rc = -ENOMEM;
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: %s", path, strerror(-rc));
            goto out;
        }
        if (n == 0) {
            break; /* shrank while read: parse what is there */
        }
        got += (size_t)n;
    }
    rc = conffile_parse(buf, got, path, fn, arg, err, errlen);
out:
    free(buf);
    close(fd);
    return rc;
}

void conffile_write_quoted(FILE *f, const char *key, const char *value)
{
    fprintf(f, "%s = \"", key);
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
        }
        fputc(*p, f);
    }
    fputs("\"\n", f);
}
