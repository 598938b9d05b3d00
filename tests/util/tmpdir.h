/*
 * tmpdir.h - per-test temporary directories for unit and integration tests.
 *
 * Criterion runs every test in its own process, so a directory made in a
 * test (or its .init fixture) belongs to that process: it is removed, with
 * everything in it, when the process exits normally (atexit). A test killed
 * by a signal leaves it behind under $TMPDIR (default /tmp), named
 * miradb-test-XXXXXX.
 */
#ifndef MIRADB_TMPDIR_H
#define MIRADB_TMPDIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Creates a fresh empty directory and writes its NUL-terminated path into
 * |buf|. Returns 0, -ENAMETOOLONG if |cap| is too small, -ENOSPC after
 * TMPDIR_MAX directories in one process, or -errno. */
int tmpdir_make(char *buf, size_t cap);
#define TMPDIR_MAX 32

/* Removes |path| and everything under it (rm -rf). 0 or -errno; a missing
 * path is not an error. */
int tmpdir_remove(const char *path);

/* Writes "<dir>/<name>" into |buf|. 0 or -ENAMETOOLONG. */
int tmpdir_join(char *buf, size_t cap, const char *dir, const char *name);

/* Size in bytes of <dir>/<name>, or -errno. */
int64_t tmpdir_file_size(const char *dir, const char *name);

/* Shortens <dir>/<name> by |n| bytes (to 0 if it is shorter). 0 or -errno. */
int tmpdir_truncate_by(const char *dir, const char *name, off_t n);

/* Reads all of <dir>/<name> into a malloc'd buffer (returned owned: free()
 * it); its size goes to |*len|. NULL with errno set on failure. */
uint8_t *tmpdir_read_file(const char *dir, const char *name, size_t *len);

/* Creates or replaces <dir>/<name> with |n| bytes of |p|. 0 or -errno. */
int tmpdir_write_file(const char *dir, const char *name, const void *p, size_t n);

#endif
