#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ascii.h"
#include "lib/cpu.h"

/* The byte-at-a-time definition both paths must agree with. */
static size_t span_ref(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] < 0x80) {
        i++;
    }
    return i;
}

/* |n| bytes of ASCII in a buffer of exactly |n| bytes (so that ASan sees
 * any read past the end), with |hi| at |at| when at < n. */
static uint8_t *text(size_t n, size_t at, uint8_t hi)
{
    uint8_t *s = malloc(n ? n : 1);
    cr_assert_not_null(s);
    for (size_t i = 0; i < n; i++) {
        s[i] = (uint8_t)(' ' + (i * 7) % 95); /* every printable byte, 0x7f excluded */
    }
    if (at < n) {
        s[at] = hi;
    }
    return s;
}

Test(ascii, a_high_byte_at_every_offset_of_every_length_is_found_exactly)
{
    /* Lengths to 300 cover the 128-byte loop, its break, the 32- or 16-byte
     * loop, the words and the bytes; the high byte goes at every offset and
     * also nowhere (at == n). */
    static const uint8_t highs[] = {0x80, 0xc3, 0xff};
    for (size_t n = 0; n <= 300; n++) {
        for (size_t at = 0; at <= n; at++) {
            uint8_t *s = text(n, at, highs[(n + at) % 3]);
            size_t want = span_ref(s, n);
            cr_assert_eq(want, at);
            cr_assert_eq(ascii_span(s, n), want, "n %zu at %zu", n, at);
            cr_assert_eq(ascii_span_base(s, n), want, "n %zu at %zu", n, at);
            free(s);
        }
    }
}

Test(ascii, the_first_of_several_high_bytes_counts)
{
    /* high bytes at |a| and every later offset |b| of a 260-byte text: the
     * answer is |a| whatever follows, in the same vector or a later one */
    for (size_t a = 0; a < 260; a += 3) {
        for (size_t b = a + 1; b < 260; b += 5) {
            uint8_t *s = text(260, a, 0x80);
            s[b] = 0xfe;
            cr_assert_eq(ascii_span(s, 260), a, "a %zu b %zu", a, b);
            cr_assert_eq(ascii_span_base(s, 260), a, "a %zu b %zu", a, b);
            free(s);
        }
    }
}

Test(ascii, this_machine_takes_the_avx2_path)
{
    /* The bench machine has AVX2: the tests above then ran both paths.
     * Elsewhere this says so rather than failing. */
    if (!__builtin_cpu_supports("avx2")) {
        cr_skip_test("no AVX2 here: only the SSE2 path was tested");
    }
    cr_expect(cpu_avx2());
}
