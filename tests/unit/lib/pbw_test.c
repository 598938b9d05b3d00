#include <criterion/criterion.h>
#include <string.h>

#include <event2/buffer.h>

#include "lib/pbw.h"

Test(pbw, a_fixed_buffer_counts_past_its_end_and_keeps_what_fitted)
{
    uint8_t out[4];
    struct pbw w;
    pbw_init_buf(&w, out, sizeof(out));
    pbw_bytes(&w, 1, "ab", 2); /* 0a 02 'a' 'b' */
    cr_assert_eq(w.n, 4);
    cr_assert_eq(memcmp(out,
                        "\x0a\x02"
                        "ab",
                        4),
                 0);
    pbw_varint(&w, 300); /* ac 02: does not fit */
    pbw_raw(&w, "", 0);
    cr_assert_eq(w.n, 6);
}

static void msg(struct pbw *w, const void *arg)
{
    (void)arg;
    pbw_uint_field(w, 1, 150);  /* 08 96 01 */
    pbw_uint_field(w, 2, 0);    /* omitted */
    pbw_str_field(w, 3, "", 0); /* omitted */
    pbw_fixed32(w, 4, 1);       /* 25 01 00 00 00 */
}

Test(pbw, an_evbuffer_sink_stages_and_a_nested_message_is_length_prefixed)
{
    struct evbuffer *b = evbuffer_new();
    struct pbw w;
    pbw_init(&w, b);
    pbw_sub(&w, 5, msg, NULL);
    static uint8_t big[3000];
    memset(big, 'x', sizeof(big));
    pbw_raw(&w, big, sizeof(big)); /* past half the stage: straight to |b| */
    pbw_flush(&w);
    const uint8_t want[] = {0x2a, 0x08, 0x08, 0x96, 0x01, 0x25, 0x01, 0x00, 0x00, 0x00};
    cr_assert_eq(w.n, sizeof(want) + sizeof(big));
    cr_assert_eq(evbuffer_get_length(b), w.n);
    const uint8_t *p = evbuffer_pullup(b, -1);
    cr_assert_eq(memcmp(p, want, sizeof(want)), 0);
    cr_assert_eq(memcmp(p + sizeof(want), big, sizeof(big)), 0);

    struct pbw c;
    pbw_init(&c, NULL);
    pbw_sub(&c, 5, msg, NULL);
    cr_assert_eq(c.n, sizeof(want));
    evbuffer_free(b);
}
