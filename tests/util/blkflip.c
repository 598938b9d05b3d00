#include "tests/util/blkflip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

int blkflip_table(const char *path, enum blk_table_kind kind)
{
    blk *b;
    char err[256];
    int rc = blk_open(path, &b, err, sizeof(err));
    if (rc < 0) {
        return rc;
    }
    struct blk_table_info ti;
    bool found = false;
    for (uint32_t i = 0; i < blk_n_tables(b) && !found; i++) {
        found = blk_table_info(b, i, &ti) == 0 && ti.kind == kind;
    }
    blk_unref(b);
    if (!found) {
        return -ENOENT;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    uint8_t byte;
    off_t at = (off_t)(ti.offset + ti.length / 2);
    rc = 0;
    if (pread(fd, &byte, 1, at) != 1) {
        rc = -EIO;
    } else {
        byte ^= 0x5a;
        if (pwrite(fd, &byte, 1, at) != 1) {
            rc = -EIO;
        }
    }
    close(fd);
    return rc;
}
