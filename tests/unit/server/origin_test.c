/*
 * origin_test.c - CORS origins and the Host check (server/origin.c).
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/config.h"
#include "server/origin.h"

static void init(const char *cors, const char *hosts, const char *addr, int port)
{
    struct config c = {0};
    char err[256];
    snprintf(c.cors_origins, sizeof(c.cors_origins), "%s", cors);
    snprintf(c.allowed_hosts, sizeof(c.allowed_hosts), "%s", hosts);
    cr_assert_eq(origin_init(&c, err, sizeof(err)), 0, "%s", err);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    cr_assert_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    origin_set_listener((struct sockaddr *)&sa);
}

static void done(void)
{
    origin_fini();
}

TestSuite(origin, .fini = done);

Test(origin, cors_is_off_by_default)
{
    init("", "", "127.0.0.1", 4318);
    cr_expect_null(origin_cors("http://app.example"));
    cr_expect_null(origin_cors(NULL));
}

Test(origin, cors_matches_exactly_and_star_only_when_given)
{
    init("http://app.example, https://ui.example:8443", "", "127.0.0.1", 4318);
    cr_expect_str_eq(origin_cors("http://app.example"), "http://app.example");
    cr_expect_str_eq(origin_cors("https://ui.example:8443"), "https://ui.example:8443");
    cr_expect_null(origin_cors("https://app.example"));
    cr_expect_null(origin_cors("http://app.example:80"));
    cr_expect_null(origin_cors("http://app.example.evil"));
    cr_expect_null(origin_cors("null"));
    done();
    init("*", "", "127.0.0.1", 4318);
    cr_expect_str_eq(origin_cors("http://anything.example"), "*");
}

Test(origin, default_hosts_are_loopback_names_and_the_host_name)
{
    char hn[256], h[300];
    init("", "", "127.0.0.1", 4318);
    cr_expect(origin_host_allowed(NULL));
    cr_expect(origin_host_allowed("localhost"));
    cr_expect(origin_host_allowed("LocalHost:4318"));
    cr_expect(origin_host_allowed("localhost."));
    cr_expect(origin_host_allowed("127.0.0.1:4318"));
    cr_expect(origin_host_allowed("[::1]:4318"));
    cr_expect(origin_host_allowed("[::1]"));
    cr_expect(!origin_host_allowed("localhost:4317"));
    cr_expect(!origin_host_allowed("evil.example"));
    cr_expect(!origin_host_allowed("evil.example:4318"));
    cr_expect(!origin_host_allowed("localhost:x"));
    cr_expect(!origin_host_allowed("[::1"));
    cr_expect(!origin_host_allowed(""));
    cr_assert_eq(gethostname(hn, sizeof(hn)), 0);
    snprintf(h, sizeof(h), "%s:4318", hn);
    cr_expect(origin_host_allowed(h));
}

Test(origin, a_wildcard_listener_allows_the_machine_addresses)
{
    init("", "", "0.0.0.0", 4318);
    cr_expect(origin_host_allowed("127.0.0.1:4318")); /* lo's address */
    cr_expect(!origin_host_allowed("0.0.0.0:4318"));
    cr_expect(!origin_host_allowed("203.0.113.9"));
}

Test(origin, explicit_hosts_replace_the_defaults)
{
    init("", "grafana.internal, db.example:9000", "127.0.0.1", 4318);
    cr_expect(origin_host_allowed("grafana.internal"));
    cr_expect(origin_host_allowed("grafana.internal:4318"));
    cr_expect(!origin_host_allowed("grafana.internal:80"));
    cr_expect(origin_host_allowed("db.example:9000"));
    cr_expect(!origin_host_allowed("db.example"));
    cr_expect(!origin_host_allowed("localhost"));
    done();
    init("", "*", "127.0.0.1", 4318);
    cr_expect(origin_host_allowed("anything.example:1"));
}

Test(origin, bad_lists_are_refused)
{
    struct config c = {0};
    char err[256];
    snprintf(c.cors_origins, sizeof(c.cors_origins), "http://a.example,,http://b.example");
    cr_expect_eq(origin_init(&c, err, sizeof(err)), -EINVAL);
    memset(&c, 0, sizeof(c));
    snprintf(c.allowed_hosts, sizeof(c.allowed_hosts), "host.example:http");
    cr_expect_eq(origin_init(&c, err, sizeof(err)), -EINVAL);
    cr_expect_str_eq(err, "--allowed-hosts: an empty entry, or a bad port in 'host.example:http'");
}
