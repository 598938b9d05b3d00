/*
 * version.h - what `miradb version` says: the release, the commit the
 * binary was built from (the Makefile passes it, with the optimisation and
 * sanitizer flags, to version.c only) and the compiler.
 */
#ifndef MIRADB_VERSION_H
#define MIRADB_VERSION_H

#include <stdio.h>

#define MIRADB_VERSION "0.1.0"

/* `git describe --always --dirty` at build time, or "unknown" (a build
 * outside a git checkout). A static string. */
const char *version_commit(void);
/* The build's compiler flags in short form ("-O2 -g"), or "unknown". */
const char *version_flags(void);
/* Three lines: "miradb 0.1.0", "commit ...", "build FLAGS, COMPILER". */
void version_print(FILE *f);

#endif
