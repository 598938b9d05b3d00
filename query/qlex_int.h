/*
 * qlex_int.h - what the files of the qlex module (query/qlex.c, the lexer
 * and literal decoders; query/qlex_re.c, the regular expressions) share;
 * nothing outside them includes it. qlex.h is the module's public surface.
 *
 * The character classes are static inline: the lexer and the regex
 * translation call them per byte, as they did inside the one file.
 */
#ifndef MIRADB_QLEX_INT_H
#define MIRADB_QLEX_INT_H

#include <stdbool.h>
#include <stddef.h>

/* Appends |s| (n bytes) to the NUL-terminated message in buf (capacity
 * cap), printable ASCII kept, others as \xNN, cut at |max| source bytes
 * with "...". */
void qlex_put_escaped(char *buf, size_t cap, const char *s, size_t n, size_t max);

/* ---- character classes ---- */

static inline bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static inline bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool is_ident_start(int c)
{
    return is_alpha(c) || c == '_';
}

static inline bool is_ident(int c)
{
    return is_alpha(c) || is_digit(c) || c == '_';
}

static inline int hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

#endif /* MIRADB_QLEX_INT_H */
