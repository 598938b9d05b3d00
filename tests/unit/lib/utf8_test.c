#include <criterion/criterion.h>
#include <string.h>

#include "lib/utf8.h"

static size_t check(const char *s)
{
    return utf8_check((const uint8_t *)s, strlen(s));
}

Test(utf8, accepts_every_sequence_length_past_the_ascii_fast_path)
{
    const char *s = "plain ascii, then \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 end";
    cr_assert_eq(check(s), strlen(s));
}

Test(utf8, gives_the_offset_of_the_first_bad_byte)
{
    cr_assert_eq(check("abcdefghij\xc0\xafz"), 10);                /* overlong '/' */
    cr_assert_eq(check("abc\xed\xa0\x80"), 3);                     /* surrogate U+D800 */
    cr_assert_eq(check("ab\xf4\x90\x80\x80"), 2);                  /* above U+10FFFF */
    cr_assert_eq(check("abcdefgh\xe2\x82"), 8);                    /* cut short */
    cr_assert_eq(check("\x80"), 0);                                /* lone continuation */
    cr_assert_eq(utf8_seq((const uint8_t *)"\xe0\x9f\x80", 3), 0); /* overlong 3-byte */
}

Test(utf8, encodes_code_points)
{
    char d[4];
    cr_assert_eq(utf8_put(d, 0x24), 1);
    cr_assert_eq(utf8_put(d, 0xe9), 2);
    cr_assert_eq(memcmp(d, "\xc3\xa9", 2), 0);
    cr_assert_eq(utf8_put(d, 0x20ac), 3);
    cr_assert_eq(memcmp(d, "\xe2\x82\xac", 3), 0);
    cr_assert_eq(utf8_put(d, 0x1f600), 4);
    cr_assert_eq(memcmp(d, "\xf0\x9f\x98\x80", 4), 0);
}
