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

/* The byte-at-a-time definition the word-wise fast paths must agree with. */
static size_t check_ref(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq(s + i, n - i);
        if (k == 0) {
            return i;
        }
        i += k;
    }
    return n;
}

Test(utf8, ascii_runs_of_every_length_then_a_bad_or_good_byte_at_every_offset)
{
    /* Lengths 0..48 cover the 16-byte, 8-byte and overlapping-tail paths;
     * the odd byte goes at every offset, also right after 15, 16 and 17
     * ASCII bytes. */
    static const char *const odd[] = {"\x80", "\xff", "\xc3\xa9", "\xe2\x82", "\xf0\x9f\x98\x80"};
    uint8_t s[64];
    for (size_t n = 0; n <= 48; n++) {
        memset(s, 'a', n);
        cr_assert_eq(utf8_check(s, n), n, "all ascii, n=%zu", n);
        for (size_t at = 0; at < n; at++) {
            for (size_t k = 0; k < sizeof(odd) / sizeof(odd[0]); k++) {
                memset(s, 'a', n);
                size_t m = strlen(odd[k]);
                if (at + m > n) {
                    continue;
                }
                memcpy(s + at, odd[k], m);
                size_t want = check_ref(s, n);
                cr_assert_eq(utf8_check(s, n), want, "n=%zu at=%zu odd=%zu", n, at, k);
                cr_assert_eq(utf8_ascii_len(s, n), at, "n=%zu at=%zu odd=%zu", n, at, k);
            }
        }
    }
    memset(s, 'a', 17);
    s[15] = 0x80;
    cr_assert_eq(utf8_check(s, 17), 15);
    s[15] = 'a';
    s[16] = 0xc0;
    cr_assert_eq(utf8_check(s, 17), 16);
}
