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

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

/* Output cursor; with out == NULL it only counts. */
struct w {
    uint8_t *out;
    size_t cap;
    size_t len;
};

static void put(struct w *w, const void *p, size_t n)
{
    if (w->out != NULL && w->len + n <= w->cap) {
        memcpy(w->out + w->len, p, n);
    }
    w->len += n;
}

static void put_c(struct w *w, uint8_t c)
{
    put(w, &c, 1);
}

static void put_s(struct w *w, const char *s)
{
    put(w, s, strlen(s));
}

static void put_varint(struct w *w, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    put(w, t, n);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if s[0] starts none. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xc2 && c < 0xe0) {
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (c >= 0xe0 && c < 0xf0) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f)) {
            return 0;
        }
        return 3;
    }
    if (c >= 0xf0 && c < 0xf5) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) {
            return 0;
        }
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f)) {
            return 0;
        }
        return 4;
    }
    return 0;
}

static const char REPLACEMENT[] = "\xef\xbf\xbd"; /* U+FFFD */

/* |s| as valid UTF-8 (raw, for a protobuf string field). */
static void put_utf8(struct w *w, const char *s)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s);
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0) {
            put(w, REPLACEMENT, 3);
            i++;
        } else {
            put(w, p + i, k);
            i += k;
        }
    }
}

static size_t utf8_len(const char *s)
{
    struct w c = {0};
    put_utf8(&c, s);
    return c.len;
}

/* |s| as the body of a JSON string: escaped, valid UTF-8. */
static void put_json_str(struct w *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s);
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            put_c(w, c);
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(p + i, n - i);
            if (k == 0) {
                put(w, REPLACEMENT, 3);
                i++;
            } else {
                put(w, p + i, k);
                i += k;
            }
            continue;
        }
        switch (c) {
        case '"':
            put_s(w, "\\\"");
            break;
        case '\\':
            put_s(w, "\\\\");
            break;
        case '\n':
            put_s(w, "\\n");
            break;
        case '\r':
            put_s(w, "\\r");
            break;
        case '\t':
            put_s(w, "\\t");
            break;
        case '\b':
            put_s(w, "\\b");
            break;
        case '\f':
            put_s(w, "\\f");
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(w, u, 6);
            break;
        }
        }
        i++;
    }
}

static long finish(const struct w *w)
{
    if (w->len > w->cap) {
        return -E2BIG;
    }
    return (long)w->len;
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
    struct w w = {out, cap, 0};
    if (msg == NULL) {
        msg = "";
    }
    bool partial = rejected != 0 || msg[0] != '\0';

    if (f == OTLP_JSON) {
        if (!partial) {
            put_s(&w, "{}");
            return finish(&w);
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
        return finish(&w);
    }

    if (!partial) {
        return 0; /* the empty message */
    }
    size_t inner = 0;
    size_t mlen = utf8_len(msg);
    if (rejected != 0) {
        inner += 1 + varint_len((uint64_t)rejected); /* int64: negative is 10 bytes */
    }
    if (mlen != 0) {
        inner += 1 + varint_len(mlen) + mlen;
    }
    put_c(&w, 0x0a); /* 1: partial_success */
    put_varint(&w, inner);
    if (rejected != 0) {
        put_c(&w, 0x08); /* 1: rejected_*, varint */
        put_varint(&w, (uint64_t)rejected);
    }
    if (mlen != 0) {
        put_c(&w, 0x12); /* 2: error_message */
        put_varint(&w, mlen);
        put_utf8(&w, msg);
    }
    return finish(&w);
}

long resp_status(enum otlp_fmt f, enum grpc_code code, const char *msg, int retry_after_s,
                 uint8_t *out, size_t cap)
{
    struct w w = {out, cap, 0};
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
        return finish(&w);
    }

    size_t mlen = utf8_len(msg);
    size_t dur = 0, retry = 0, any = 0;
    if (retry_after_s > 0) {
        dur = 1 + varint_len((uint64_t)retry_after_s); /* Duration.seconds */
        retry = 1 + varint_len(dur) + dur;             /* RetryInfo.retry_delay */
        any = 1 + varint_len(sizeof(RETRY_INFO_URL) - 1) + sizeof(RETRY_INFO_URL) - 1 + 1 +
              varint_len(retry) + retry; /* Any.type_url, Any.value */
    }
    if (code != GRPC_OK) {
        put_c(&w, 0x08); /* 1: code, int32 varint (sign-extended if negative) */
        put_varint(&w, (uint64_t)(int64_t)code);
    }
    if (mlen != 0) {
        put_c(&w, 0x12); /* 2: message */
        put_varint(&w, mlen);
        put_utf8(&w, msg);
    }
    if (retry_after_s > 0) {
        put_c(&w, 0x1a); /* 3: details */
        put_varint(&w, any);
        put_c(&w, 0x0a); /* Any.type_url */
        put_varint(&w, sizeof(RETRY_INFO_URL) - 1);
        put_s(&w, RETRY_INFO_URL);
        put_c(&w, 0x12); /* Any.value */
        put_varint(&w, retry);
        put_c(&w, 0x0a); /* RetryInfo.retry_delay */
        put_varint(&w, dur);
        put_c(&w, 0x08); /* Duration.seconds */
        put_varint(&w, (uint64_t)retry_after_s);
    }
    return finish(&w);
}
