#include <criterion/criterion.h>
#include <string.h>

#include "query/logs.h"

/* FACTS.md B.2: OTLP attribute names as Loki turns them into label names. */
Test(logs_labels, attribute_names_become_loki_label_names)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"service.name", "service_name"},
        {"k8s.pod.name", "k8s_pod_name"},
        {"http.request.method", "http_request_method"},
        {"a..b", "a_b"},
        {"a__b", "a_b"},
        {"2xx", "key_2xx"},
        {"__name__", "__name__"},
        {"__a.b__", "__a_b__"},
        {"Übung", "_bung"},
        {"x-y z", "x_y_z"},
        {"plain", "plain"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = logs_label_name(cases[i].in, strlen(cases[i].in), buf, sizeof(buf));
        cr_expect_str_eq(buf, cases[i].out, "%s", cases[i].in);
        cr_expect_eq(n, strlen(cases[i].out));
    }
    /* truncated to the buffer, always terminated */
    size_t n = logs_label_name("service.name", 12, buf, 5);
    cr_expect_eq(n, 4);
    cr_expect_str_eq(buf, "serv");
}
