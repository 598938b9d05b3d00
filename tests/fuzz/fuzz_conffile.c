/*
 * fuzz_conffile.c - libFuzzer target for `miradb serve --config FILE`
 * (server/conffile.c's syntax and config.c's values).
 *
 * Every input is a configuration file. It is read through config_parse as
 * the daemon reads it; a refusal must say why. What is accepted must print
 * (config_print) to a file that parses back to the very same settings and
 * prints the same text: the --print-config round trip, for any input.
 * The file goes through a memfd (/proc/self/fd/N). Seeds:
 * tests/fuzz/corpus/conffile/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses |len| bytes as a --config file into |c|; the config_parse result. */
static int parse_text(const void *text, size_t len, struct config *c, char *err, size_t errlen)
{
    int fd = memfd_create("conf", MFD_CLOEXEC);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
        abort();
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    char *argv[] = {"serve", "--config", path, NULL};
    err[0] = '\0';
    int rc = config_parse(c, 3, argv, err, errlen);
    close(fd);
    return rc;
}

static char *print_of(const struct config *c, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (f == NULL) {
        abort();
    }
    config_print(f, c);
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct config a, b;
    char err[1024];
    int rc = parse_text(data, size, &a, err, sizeof(err));
    if (rc != 0) {
        if (rc > 0 || err[0] == '\0') {
            abort(); /* only --help / --print-config return 1; a refusal says why */
        }
        return 0;
    }
    size_t la, lb;
    char *pa = print_of(&a, &la);
    if (parse_text(pa, la, &b, err, sizeof(err)) != 0) {
        fprintf(stderr, "printed configuration refused: %s\n%s", err, pa);
        abort();
    }
    memset(a.config_file, 0, sizeof(a.config_file));
    memset(b.config_file, 0, sizeof(b.config_file));
    char *pb = print_of(&b, &lb);
    if (memcmp(&a, &b, sizeof(a)) != 0 || la != lb || memcmp(pa, pb, la) != 0) {
        fprintf(stderr, "round trip differs:\n%s---\n%s", pa, pb);
        abort();
    }
    free(pa);
    free(pb);
    return 0;
}
