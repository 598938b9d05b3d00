/*
 * version.c - build identity (see version.h). MIRADB_GIT and MIRADB_FLAGS
 * come from the Makefile, which rebuilds this file alone when the commit
 * changes.
 */
#include "server/version.h"

#ifndef MIRADB_GIT
#define MIRADB_GIT ""
#endif
#ifndef MIRADB_FLAGS
#define MIRADB_FLAGS ""
#endif

const char *version_commit(void)
{
    return MIRADB_GIT[0] != '\0' ? MIRADB_GIT : "unknown";
}

const char *version_flags(void)
{
    return MIRADB_FLAGS[0] != '\0' ? MIRADB_FLAGS : "unknown";
}

void version_print(FILE *f)
{
#if defined(__clang__)
    const char *cc = "clang " __clang_version__;
#elif defined(__GNUC__)
    const char *cc = "gcc " __VERSION__;
#else
    const char *cc = "unknown compiler";
#endif
    fprintf(f, "miradb %s\ncommit %s\nbuild %s, %s\n", MIRADB_VERSION, version_commit(),
            version_flags(), cc);
}
