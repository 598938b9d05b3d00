#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "lib/base64.h"
#include "lib/jsonw.h"
#include "proto/otlpenc.h"

/* A bytesValue longer than one 48-byte piece is encoded piece by piece
 * into a stack buffer: every piece (64 characters and the NUL) must fit. */
Test(otlpenc, renders_a_long_bytes_value_as_one_base64_string)
{
    uint8_t raw[100];
    for (size_t i = 0; i < sizeof(raw); i++) {
        raw[i] = (uint8_t)(i * 37 + 1);
    }
    struct val v = {.type = VAL_BYTES, .s = (const char *)raw, .n = sizeof(raw)};
    struct evbuffer *b = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, b);
    otlpenc_json_value(&w, &v);
    cr_assert_eq(w.err, 0);

    char b64[BASE64_ENCODED_LEN(sizeof(raw)) + 1];
    base64_encode(b64, raw, sizeof(raw), true);
    char want[256];
    snprintf(want, sizeof(want), "{\"bytesValue\":\"%s\"}", b64);
    size_t n = evbuffer_get_length(b);
    char *got = malloc(n + 1);
    evbuffer_remove(b, got, n);
    got[n] = '\0';
    cr_assert_str_eq(got, want);
    free(got);
    evbuffer_free(b);
}
