#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "lib/hex.h"

Test(hex, encodes_lower_case_and_decodes_either_case)
{
    const uint8_t id[4] = {0x00, 0xab, 0x7f, 0xf0};
    char h[9];
    hex_encode(h, id, 4);
    cr_assert_str_eq(h, "00ab7ff0");
    uint8_t back[4];
    cr_assert_eq(hex_decode(back, "00AB7fF0", 4), 0);
    cr_assert_eq(memcmp(back, id, 4), 0);
}

Test(hex, refuses_a_byte_that_is_not_a_digit)
{
    uint8_t b[2];
    cr_assert_eq(hex_decode(b, "0g12", 2), -EINVAL);
    cr_assert_eq(hex_digit('G'), -1);
    cr_assert_eq(hex_digit('/'), -1);
    cr_assert_eq(hex_digit(0xc1), -1); /* 'A' | 0x80 */
    cr_assert_eq(hex_digit('F'), 15);
}
