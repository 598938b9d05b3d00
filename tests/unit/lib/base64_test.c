#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "lib/base64.h"

Test(base64, encodes_padded_and_unpadded)
{
    char out[BASE64_ENCODED_LEN(5) + 1];
    const uint8_t *p = (const uint8_t *)"hello";
    cr_assert_eq(base64_encode(out, p, 5, true), 8);
    cr_assert_str_eq(out, "aGVsbG8=");
    cr_assert_eq(base64_encode(out, p, 4, true), 8);
    cr_assert_str_eq(out, "aGVsbA==");
    cr_assert_eq(base64_encode(out, p, 5, false), 7);
    cr_assert_str_eq(out, "aGVsbG8");
    cr_assert_eq(base64_encode(out, p, 0, true), 0);
    cr_assert_str_eq(out, "");
}

Test(base64, decodes_both_alphabets_padded_or_not)
{
    const char *in = "+/8-_w==";
    size_t n = base64_unpad(in, strlen(in));
    cr_assert_eq(n, 6);
    cr_assert_eq(base64_decoded_len(n), 4);
    uint8_t out[4];
    cr_assert_eq(base64_decode(out, in, n), 0);
    const uint8_t want[4] = {0xfb, 0xff, 0x3e, 0xff};
    cr_assert_eq(memcmp(out, want, 4), 0);
}

Test(base64, refuses_a_bad_length_and_a_non_digit)
{
    cr_assert_eq(base64_decoded_len(5), -1);
    uint8_t out[3];
    cr_assert_eq(base64_decode(out, "ab=c", 4), -EINVAL);
}
