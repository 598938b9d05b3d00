/*
 * conffile.h - the syntax of `miradb serve --config FILE`: lines of
 * `key = value`, nothing else. What the keys mean and how a value is read
 * (sizes, durations, choices) is the option table's job (config.c); this
 * module only splits a file into (line, key, value) and writes values back.
 *
 * FORMAT
 *   - One setting a line: KEY = VALUE. KEY is a flag's name without the
 *     dashes, written [A-Za-z0-9_-]+ (only the flag names are known). Blanks around KEY, '=' and
 * VALUE are ignored.
 *   - '#' starts a comment when it begins a line or follows a blank;
 *     empty lines and comment lines are skipped. A line ending "\r\n" is
 *     read as ending "\n".
 *   - VALUE unquoted: the text up to the end of the line or a comment,
 *     trailing blanks removed; it may not contain '"' and may not be empty.
 *   - VALUE quoted: "..." where \" is a quote and \\ a backslash (no other
 *     escapes); "" is the empty value. After the closing quote only blanks
 *     and a comment may follow.
 *   - At most CONFFILE_MAX_BYTES a file; no NUL bytes; the file ends with
 *     or without a final newline.
 * Why this format rather than TOML or YAML: every key is a flag and every
 * value is the flag's string, so one value syntax (256MiB, 30s) serves
 * both, the file needs no types, tables or lists, and no library is added.
 */
#ifndef MIRADB_CONFFILE_H
#define MIRADB_CONFFILE_H

#include <stddef.h>
#include <stdio.h>

#define CONFFILE_MAX_BYTES (1u << 20)
#define CONFFILE_MAX_VALUE 4096 /* bytes of one value, after unquoting */

/*
 * Called once per setting in file order. |key| and |value| are borrowed
 * (valid during the call; value NUL-terminated, quotes removed), |line| is
 * 1-based. Returns 0 to go on, or -errno with a reason in |err| (without
 * the file, line or key: conffile_parse adds them).
 */
typedef int (*conffile_fn)(void *arg, const char *key, const char *value, int line, char *err,
                           size_t errlen);

/*
 * Parses |len| bytes of |text| (need not be NUL-terminated) named |name| in
 * messages. 0, or -EINVAL with "NAME:LINE: KEY: reason" in |err| (a syntax
 * error names the line and what was expected: "NAME:LINE: expected KEY =
 * VALUE"), or the callback's negative return with its reason prefixed the
 * same way.
 */
int conffile_parse(const char *text, size_t len, const char *name, conffile_fn fn, void *arg,
                   char *err, size_t errlen);

/* Reads |path| and parses it as conffile_parse. Also -errno with
 * "PATH: reason" when the file cannot be read, -EFBIG above
 * CONFFILE_MAX_BYTES. */
int conffile_read(const char *path, conffile_fn fn, void *arg, char *err, size_t errlen);

/* Writes `key = "value"` and a newline, escaping '"' and '\'; the parser
 * reads it back as |value|. */
void conffile_write_quoted(FILE *f, const char *key, const char *value);

#endif
