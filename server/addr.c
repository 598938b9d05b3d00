/*
 * addr.c - listener addresses (see addr.h).
 */
#include "server/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[128];
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s || (size_t)(colon - s) >= sizeof(host)) {
        return -EINVAL;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535) {
        return -EINVAL;
    }
    memset(ss, 0, sizeof(*ss));
    if (host[0] == '[') {
        size_t hl = strlen(host);
        if (hl < 3 || host[hl - 1] != ']') {
            return -EINVAL;
        }
        host[hl - 1] = '\0';
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1) {
            return -EINVAL;
        }
        *len = sizeof(*a6);
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &a4->sin_addr) != 1) {
        return -EINVAL;
    }
    *len = sizeof(*a4);
    return 0;
}

bool addr_is_any(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6) {
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    }
    return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
}

void addr_format(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, cap, "[%s]:%u", ip, ntohs(a6->sin6_port));
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof(ip));
        snprintf(buf, cap, "%s:%u", ip, ntohs(a4->sin_port));
    }
}
