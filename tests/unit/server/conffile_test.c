/*
 * conffile_test.c - the `key = value` syntax of --config files
 * (server/conffile.c): what each line yields, and each refusal's exact
 * message with the file and line.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/conffile.h"
#include "tests/util/tmpdir.h"

/* Every setting the parser reported, "LINE|KEY|VALUE;" in order. */
struct seen {
    char text[2048];
    size_t n;
};

static int collect(void *arg, const char *key, const char *value, int line, char *err,
                   size_t errlen)
{
    struct seen *s = arg;
    (void)err, (void)errlen;
    s->n += (size_t)snprintf(s->text + s->n, sizeof(s->text) - s->n, "%d|%s|%s;", line, key, value);
    return 0;
}

static int parse(const char *text, struct seen *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    err[0] = '\0';
    return conffile_parse(text, strlen(text), "t.conf", collect, s, err, errlen);
}

Test(conffile, lines_comments_blanks_and_quotes)
{
    struct seen s;
    char err[256];
    const char *text = "# a comment\n"
                       "\n"
                       "   \t\n"
                       "data = /var/lib/miradb\n"
                       "  queue=64   # trailing comment\n"
                       "ack\t=\tfsync\r\n"
                       "path = a#b\n"
                       "q = \"with # hash and \\\"quotes\\\" and \\\\\"  # c\n"
                       "e = \"\"\n"
                       "sp = two words  \n"
                       "last = 1";
    cr_assert_eq(parse(text, &s, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(s.text, "4|data|/var/lib/miradb;5|queue|64;6|ack|fsync;7|path|a#b;"
                             "8|q|with # hash and \"quotes\" and \\;9|e|;10|sp|two words;"
                             "11|last|1;");
}

Test(conffile, empty_file_and_only_comments_yield_nothing)
{
    struct seen s;
    char err[256];
    cr_assert_eq(parse("", &s, err, sizeof(err)), 0);
    cr_assert_str_eq(s.text, "");
    cr_assert_eq(parse("# x\n\n#y = z\n", &s, err, sizeof(err)), 0);
    cr_assert_str_eq(s.text, "");
}

static void refused(const char *text, const char *want)
{
    struct seen s;
    char err[256];
    cr_assert_eq(parse(text, &s, err, sizeof(err)), -EINVAL, "accepted: %s", text);
    cr_assert_str_eq(err, want);
}

Test(conffile, syntax_errors_name_the_file_line_and_key)
{
    refused("a = 1\njust words\n", "t.conf:2: expected KEY = VALUE");
    refused("= 1\n", "t.conf:1: expected KEY = VALUE");
    refused("a.b = 1\n", "t.conf:1: expected KEY = VALUE");
    refused("\n\nqueue =\n", "t.conf:3: queue: missing value (write \"\" for an empty one)");
    refused("queue = # nothing\n", "t.conf:1: queue: missing value (write \"\" for an empty one)");
    refused("data = \"/x\n", "t.conf:1: data: unterminated quoted value");
    refused("data = \"a\\nb\"\n", "t.conf:1: data: only \\\" and \\\\ may follow a backslash in "
                                  "quotes");
    refused("data = \"a\" b\n", "t.conf:1: data: unexpected text after the closing quote");
    refused("data = a\"b\n", "t.conf:1: data: a '\"' in an unquoted value (quote the whole value)");
    char longkey[100];
    memset(longkey, 'k', 70);
    strcpy(longkey + 70, " = 1\n");
    refused(longkey, "t.conf:1: key longer than 63 bytes");
}

Test(conffile, a_value_too_long_is_refused_not_cut)
{
    size_t n = CONFFILE_MAX_VALUE + 1;
    char *text = malloc(n + 16);
    memcpy(text, "data = ", 7);
    memset(text + 7, 'x', n);
    text[7 + n] = '\0';
    struct seen s;
    char err[256];
    cr_assert_eq(parse(text, &s, err, sizeof(err)), -EINVAL);
    cr_assert_str_eq(err, "t.conf:1: data: value longer than 4096 bytes");
    text[7 + n - 1] = '\0'; /* exactly the maximum */
    memset(&s, 0, sizeof(s));
    cr_assert_eq(parse(text, &s, err, sizeof(err)), 0, "%s", err);
    free(text);
}

Test(conffile, a_nul_byte_is_refused)
{
    struct seen s = {0};
    char err[256];
    cr_assert_eq(conffile_parse("a = 1\0b = 2\n", 12, "t.conf", collect, &s, err, sizeof(err)),
                 -EINVAL);
    cr_assert_str_eq(err, "t.conf: contains a NUL byte (not a text file)");
    cr_assert_str_eq(s.text, "");
}

static int refuse_b(void *arg, const char *key, const char *value, int line, char *err,
                    size_t errlen)
{
    (void)arg, (void)line;
    if (strcmp(key, "b") == 0) {
        snprintf(err, errlen, "'%s' is wrong", value);
        return -ERANGE;
    }
    return 0;
}

Test(conffile, the_callbacks_refusal_gets_file_line_and_key)
{
    char err[256];
    const char *t = "a = 1\n\nb = 7\nc = 1\n";
    cr_assert_eq(conffile_parse(t, strlen(t), "/etc/m.conf", refuse_b, NULL, err, sizeof(err)),
                 -ERANGE);
    cr_assert_str_eq(err, "/etc/m.conf:3: b: '7' is wrong");
}

Test(conffile, read_names_the_path_when_it_cannot)
{
    char dir[256], path[300], err[512];
    struct seen s = {0};
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/missing.conf", dir);
    cr_assert_eq(conffile_read(path, collect, &s, err, sizeof(err)), -ENOENT);
    char want[600];
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(conffile_read(dir, collect, &s, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want), "%s: not a regular file", dir);
    cr_assert_str_eq(err, want);

    snprintf(path, sizeof(path), "%s/ok.conf", dir);
    FILE *f = fopen(path, "w");
    fputs("queue = 3\n", f);
    fclose(f);
    cr_assert_eq(conffile_read(path, collect, &s, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(s.text, "1|queue|3;");
}

Test(conffile, write_quoted_reads_back_the_same_value)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    conffile_write_quoted(f, "data", "a \"b\" \\c # d");
    conffile_write_quoted(f, "e", "");
    fclose(f);
    cr_assert_str_eq(buf, "data = \"a \\\"b\\\" \\\\c # d\"\ne = \"\"\n");
    struct seen s;
    char err[256];
    cr_assert_eq(parse(buf, &s, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(s.text, "1|data|a \"b\" \\c # d;2|e|;");
    free(buf);
}
