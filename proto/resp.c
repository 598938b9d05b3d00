/*
 * resp.c - OTLP response encoders (see resp.h), hand-encoded: they are a few
 * bytes each and the server writes them on every request.
 *
 * PROTOBUF (fields with default values are omitted, as proto3 encoders do)
 *   Export*ServiceResponse  1 partial_success { 1 rejected_* int64, 2 error_message }
 *   google.rpc.Status       1 code int32, 2 message, 3 details google.protobuf.Any {
 *                             1 type_url "type.googleapis.com/google.rpc.RetryInfo",
 *                             2 value RetryInfo { 1 retry_delay Duration { 1 seconds } } }
 * JSON (OTLP/JSON: lowerCamelCase, int64 as decimal strings, defaults omitted)
 *   {}   {"partialSuccess":{"rejectedSpans":"3","errorMessage":"..."}}
 *   {"code":14,"message":"...","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo",
 *    "retryDelay":"5s"}]}
 *
 * Messages may carry text that came from a client, so they are made valid
 * UTF-8 in both formats (each byte that does not start a valid sequence
 * becomes U+FFFD): proto3 parsers such as Go's reject a `string` field that
 * is not UTF-8, and a JSON text must be UTF-8 too.
 */
#include "proto/resp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/jsonw.h"
#include "lib/pbw.h"
#include "lib/utf8.h"

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

/* The output is a fixed buffer (pbw_init_buf), or counting (pbw_init NULL). */
static void put(void *w, const void *p, size_t n)
{
    pbw_raw(w, p, n);
}

static void put_c(struct pbw *w, uint8_t c)
{
    pbw_raw(w, &c, 1);
}

static void put_s(struct pbw *w, const char *s)
{
    pbw_raw(w, s, strlen(s));
}

/* |s| as valid UTF-8 (raw, for a protobuf string field). */
static void put_utf8(struct pbw *w, const char *s)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s);
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_check(p + i, n - i);
        pbw_raw(w, p + i, k);
        i += k;
        if (i < n) {
            pbw_raw(w, UTF8_REPLACEMENT, 3); /* for one bad byte */
            i++;
        }
    }
}

static size_t utf8_len(const char *s)
{
    struct pbw c;
    pbw_init(&c, NULL);
    put_utf8(&c, s);
    return c.n;
}

/* |s| as the body of a JSON string: escaped, valid UTF-8. */
static void put_json_str(struct pbw *w, const char *s)
{
    jsonw_escape_to(put, w, s, strlen(s), false);
}

static long finish(const struct pbw *w, size_t cap)
{
    if (w->n > cap) {
        return -E2BIG;
    }
    return (long)w->n;
}

static const char *rejected_key(enum signal s)
{
    switch (s) {
    case SIG_LOGS:
        return "rejectedLogRecords";
    case SIG_TRACES:
        return "rejectedSpans";
    case SIG_METRICS:
        return "rejectedDataPoints";
    }
    return "rejected";
}

long resp_export(enum otlp_fmt f, enum signal s, int64_t rejected, const char *msg, uint8_t *out,
                 size_t cap)
{
    struct pbw w;
    pbw_init_buf(&w, out, cap);
    if (msg == NULL) {
        msg = "";
    }
    bool partial = rejected != 0 || msg[0] != '\0';

    if (f == OTLP_JSON) {
        if (!partial) {
            put_s(&w, "{}");
            return finish(&w, cap);
        }
        put_s(&w, "{\"partialSuccess\":{");
        if (rejected != 0) {
            char num[32];
            snprintf(num, sizeof(num), "%lld", (long long)rejected);
            put_c(&w, '"');
            put_s(&w, rejected_key(s));
            put_s(&w, "\":\"");
            put_s(&w, num);
            put_c(&w, '"');
        }
        if (msg[0] != '\0') {
            if (rejected != 0) {
                put_c(&w, ',');
            }
            put_s(&w, "\"errorMessage\":\"");
            put_json_str(&w, msg);
            put_c(&w, '"');
        }
        put_s(&w, "}}");
        return finish(&w, cap);
    }

    if (!partial) {
        return 0; /* the empty message */
    }
    size_t inner = 0;
    size_t mlen = utf8_len(msg);
    if (rejected != 0) {
        inner += 1 + pbw_varint_size((uint64_t)rejected); /* int64: negative is 10 bytes */
    }
    if (mlen != 0) {
        inner += 1 + pbw_varint_size(mlen) + mlen;
    }
    put_c(&w, 0x0a); /* 1: partial_success */
    pbw_varint(&w, inner);
    if (rejected != 0) {
        put_c(&w, 0x08); /* 1: rejected_*, varint */
        pbw_varint(&w, (uint64_t)rejected);
    }
    if (mlen != 0) {
        put_c(&w, 0x12); /* 2: error_message */
        pbw_varint(&w, mlen);
        put_utf8(&w, msg);
    }
    return finish(&w, cap);
}

long resp_status(enum otlp_fmt f, enum grpc_code code, const char *msg, int retry_after_s,
                 uint8_t *out, size_t cap)
{
    struct pbw w;
    pbw_init_buf(&w, out, cap);
    if (msg == NULL) {
        msg = "";
    }

    if (f == OTLP_JSON) {
        bool comma = false;
        put_c(&w, '{');
        if (code != GRPC_OK) {
            char num[32];
            snprintf(num, sizeof(num), "\"code\":%d", (int)code);
            put_s(&w, num);
            comma = true;
        }
        if (msg[0] != '\0') {
            if (comma) {
                put_c(&w, ',');
            }
            put_s(&w, "\"message\":\"");
            put_json_str(&w, msg);
            put_c(&w, '"');
            comma = true;
        }
        if (retry_after_s > 0) {
            char d[32];
            snprintf(d, sizeof(d), "%ds", retry_after_s);
            if (comma) {
                put_c(&w, ',');
            }
            put_s(&w, "\"details\":[{\"@type\":\"" RETRY_INFO_URL "\",\"retryDelay\":\"");
            put_s(&w, d);
            put_s(&w, "\"}]");
        }
        put_c(&w, '}');
        return finish(&w, cap);
    }

    size_t mlen = utf8_len(msg);
    size_t dur = 0, retry = 0, any = 0;
    if (retry_after_s > 0) {
        dur = 1 + pbw_varint_size((uint64_t)retry_after_s); /* Duration.seconds */
        retry = 1 + pbw_varint_size(dur) + dur;             /* RetryInfo.retry_delay */
        any = 1 + pbw_varint_size(sizeof(RETRY_INFO_URL) - 1) + sizeof(RETRY_INFO_URL) - 1 + 1 +
              pbw_varint_size(retry) + retry; /* Any.type_url, Any.value */
    }
    if (code != GRPC_OK) {
        put_c(&w, 0x08); /* 1: code, int32 varint (sign-extended if negative) */
        pbw_varint(&w, (uint64_t)(int64_t)code);
    }
    if (mlen != 0) {
        put_c(&w, 0x12); /* 2: message */
        pbw_varint(&w, mlen);
        put_utf8(&w, msg);
    }
    if (retry_after_s > 0) {
        put_c(&w, 0x1a); /* 3: details */
        pbw_varint(&w, any);
        put_c(&w, 0x0a); /* Any.type_url */
        pbw_varint(&w, sizeof(RETRY_INFO_URL) - 1);
        put_s(&w, RETRY_INFO_URL);
        put_c(&w, 0x12); /* Any.value */
        pbw_varint(&w, retry);
        put_c(&w, 0x0a); /* RetryInfo.retry_delay */
        pbw_varint(&w, dur);
        put_c(&w, 0x08); /* Duration.seconds */
        pbw_varint(&w, (uint64_t)retry_after_s);
    }
    return finish(&w, cap);
}
