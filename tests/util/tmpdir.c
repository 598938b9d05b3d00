/*
 * tmpdir.c - per-test temporary directories (see tmpdir.h).
 */
#include "tests/util/tmpdir.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char made[TMPDIR_MAX][256];
static int n_made;
static pid_t made_by; /* a forked child must not remove its parent's directories */

static void remove_all(void)
{
    if (getpid() != made_by) {
        return;
    }
    for (int i = 0; i < n_made; i++) {
        tmpdir_remove(made[i]);
    }
    n_made = 0;
}

int tmpdir_make(char *buf, size_t cap)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') {
        base = "/tmp";
    }
    if (n_made == TMPDIR_MAX) {
        return -ENOSPC;
    }
    char tmpl[256];
    int k = snprintf(tmpl, sizeof(tmpl), "%s/miradb-test-XXXXXX", base);
    if (k < 0 || (size_t)k >= sizeof(tmpl) || (size_t)k >= cap) {
        return -ENAMETOOLONG;
    }
    if (mkdtemp(tmpl) == NULL) {
        return -errno;
    }
    if (n_made == 0 || made_by != getpid()) {
        if (made_by == 0) {
            atexit(remove_all);
        }
        n_made = 0;
        made_by = getpid();
    }
    memcpy(made[n_made++], tmpl, (size_t)k + 1);
    memcpy(buf, tmpl, (size_t)k + 1);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    int rc = (type == FTW_DP) ? rmdir(path) : unlink(path);
    return rc < 0 && errno != ENOENT ? -errno : 0;
}

int tmpdir_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (rc < 0) {
        return -errno;
    }
    return rc; /* rm_one's -errno, or 0 */
}

int tmpdir_join(char *buf, size_t cap, const char *dir, const char *name)
{
    int k = snprintf(buf, cap, "%s/%s", dir, name);
    return (k < 0 || (size_t)k >= cap) ? -ENAMETOOLONG : 0;
}

int64_t tmpdir_file_size(const char *dir, const char *name)
{
    char p[512];
    struct stat st;
    if (tmpdir_join(p, sizeof(p), dir, name) < 0) {
        return -ENAMETOOLONG;
    }
    if (stat(p, &st) < 0) {
        return -errno;
    }
    return (int64_t)st.st_size;
}

int tmpdir_truncate_by(const char *dir, const char *name, off_t n)
{
    char p[512];
    struct stat st;
    if (tmpdir_join(p, sizeof(p), dir, name) < 0) {
        return -ENAMETOOLONG;
    }
    if (stat(p, &st) < 0) {
        return -errno;
    }
    off_t to = st.st_size > n ? st.st_size - n : 0;
    return truncate(p, to) < 0 ? -errno : 0;
}

uint8_t *tmpdir_read_file(const char *dir, const char *name, size_t *len)
{
    char p[512];
    struct stat st;
    if (tmpdir_join(p, sizeof(p), dir, name) < 0) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    uint8_t *buf = NULL;
    if (fstat(fd, &st) < 0) {
        goto fail;
    }
    buf = malloc((size_t)st.st_size + 1); /* +1: never malloc(0) */
    if (buf == NULL) {
        goto fail;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            if (k == 0) {
                errno = EIO; /* the file shrank under us */
            }
            goto fail;
        }
        got += (size_t)k;
    }
    close(fd);
    *len = got;
    return buf;

fail:;
    int e = errno;
    free(buf);
    close(fd);
    errno = e;
    return NULL;
}

int tmpdir_write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    if (tmpdir_join(path, sizeof(path), dir, name) < 0) {
        return -ENAMETOOLONG;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, (const uint8_t *)p + done, n - done);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            int rc = -errno;
            close(fd);
            return rc;
        }
        done += (size_t)k;
    }
    return close(fd) < 0 ? -errno : 0;
}
