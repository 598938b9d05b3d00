/*
 * notify.c - one datagram to $NOTIFY_SOCKET (see notify.h).
 *
 * A new socket per message: the daemon sends a handful in its life (ready,
 * stopping, a status line a second while replaying), so keeping one open
 * would only add a descriptor to leak into nothing.
 */
#include "server/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (path == NULL || path[0] == '\0') {
        return 0;
    }
    if (path[0] != '/' && path[0] != '@') {
        return -EAFNOSUPPORT;
    }
    size_t len = strlen(path);
    if (len > sizeof(sa.sun_path) || (path[0] == '/' && len == sizeof(sa.sun_path))) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0'; /* abstract: the name is the bytes after the NUL, no terminator */
    }
    socklen_t salen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/' ? 1 : 0));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    int rc = n < 0 ? -errno : 1;
    close(fd);
    return rc;
}
