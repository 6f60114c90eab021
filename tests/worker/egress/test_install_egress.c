/*
 * test_install_egress.c: Phase A's egress proxy as the worker sets it up:
 * KIWI_INSTALL_EGRESS and KIWI_INSTALL_PROXY_PORTS parsed, the proxy
 * settings Phase A gets (replacing the worker's own), and Squid's access
 * log parsed and classified, on lines Squid wrote in
 * tests/ops/egress/test_egress_proxy.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "worker/egress/egress-proxy.h"
#include "sandbox/phases.h"

static void
test_setting (void **state)
{
    kiwi_install_egress e;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_egress_parse (NULL, &e, &err), 0);
    assert_true (e.registries);
    assert_false (e.open);
    kiwi_install_egress_clear (&e);
    assert_int_equal (kiwi_install_egress_parse ("open", &e, &err), 0);
    assert_true (e.open);
    assert_false (e.registries);
    kiwi_install_egress_clear (&e);
    assert_int_equal (kiwi_install_egress_parse ("registries, npm.mirror.example.org .corp.example", &e, &err), 0);
    assert_true (e.registries);
    assert_int_equal (e.hosts.n, 2);
    assert_string_equal (e.hosts.v[0], "npm.mirror.example.org");
    assert_string_equal (e.hosts.v[1], ".corp.example");
    kiwi_install_egress_clear (&e);
    assert_int_equal (kiwi_install_egress_parse ("pypi.org", &e, &err), 0);
    assert_false (e.registries);
    assert_int_equal (e.hosts.n, 1);
    kiwi_install_egress_clear (&e);
    assert_int_equal (kiwi_install_egress_parse ("open,pypi.org", &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "stands alone"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_install_egress_parse ("registries evil/host", &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "`evil/host` is not a host name"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_install_egress_parse ("a..b", &e, &err), -1);
    kiwi_error_free (&err);
    /* an address is not a name: the proxy matches names only */
    assert_int_equal (kiwi_install_egress_parse ("registries 10.0.0.1", &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "`10.0.0.1` is not a host name"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_install_egress_parse ("10.example.org", &e, &err), 0);
    kiwi_install_egress_clear (&e);
}

/* Whether the worker's settings loaded from `assignment` ("K=V", or NULL
 * for none) put Phase A behind the proxy; *egress receives the setting. */
static bool
proxied_with (const char *assignment, char egress[64])
{
    kiwi_worker_config cfg;
    kiwi_worker_config_init (&cfg);
    kiwi_error_t err = NULL;
    int idx = 0;
    const char *env[] = { assignment, NULL };
    assert_int_equal (kiwi_worker_config_load (&cfg, NULL, env, 0, NULL, 0, &idx, &err), 0);
    snprintf (egress, 64, "%s", cfg.install_egress);
    bool proxied = false;
    assert_int_equal (kiwi_install_egress_proxied (&cfg, &proxied, &err), 0);
    kiwi_worker_config_clear (&cfg);
    return proxied;
}

/* The worker's own settings: the default puts Phase A behind the proxy,
 * open does not, nor does the Firecracker driver (a bridge of its own). */
static void
test_default_proxied (void **state)
{
    (void) state;
    char egress[64];
    assert_true (proxied_with (NULL, egress));
    assert_string_equal (egress, "registries");
    assert_false (proxied_with ("KIWI_INSTALL_EGRESS=open", egress));
    assert_false (proxied_with ("KIWI_SANDBOX=firecracker", egress));
    assert_string_equal (egress, "registries");
}

static void
test_ports (void **state)
{
    int p[3];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_proxy_ports_parse ("3128,3129,3130", p, &err), 0);
    assert_int_equal (p[0], 3128);
    assert_int_equal (p[2], 3130);
    const char *bad[] = { "3128,3129", "3128,3129,3129", "0,1,2", "1,2,3,4", "a,b,c", "", NULL };
    for (size_t i = 0; bad[i]; i++) {
        assert_int_equal (kiwi_proxy_ports_parse (bad[i], p, &err), -1);
        kiwi_error_free (&err);
    }
}

/* The value of KEY in a "K=V" vector, or NULL. */
static const char *
val (const kiwi_strv *env, const char *key)
{
    const char *kv = kiwi_strv_env_get (env, key);
    return kv ? strchr (kv, '=') + 1 : NULL;
}

/* Kiwi's proxy replaces the worker's own proxy settings in Phase A. */
static void
test_phase_env (void **state)
{
    kiwi_strv proxy = KIWI_STRV_INIT, env = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_proxy_env ("172.30.0.1", 3128, &proxy, &err), 0);
    const char *host_env[] = { "PATH=/usr/bin", "HTTPS_PROXY=http://corp.example:8080", "ALL_PROXY=socks5://x:1",
                               NULL };
    kiwi_phase_config pc = { .host_env = host_env, .proxy_env = kiwi_strv_list (&proxy) };
    assert_int_equal (kiwi_phase_install_env (&pc, NULL, &env, &err), 0);
    assert_string_equal (val (&env, "HTTPS_PROXY"), "http://172.30.0.1:3128");
    assert_string_equal (val (&env, "HTTP_PROXY"), "http://172.30.0.1:3128");
    assert_string_equal (val (&env, "https_proxy"), "http://172.30.0.1:3128");
    assert_string_equal (val (&env, "npm_config_https_proxy"), "http://172.30.0.1:3128");
    assert_string_equal (val (&env, "NO_PROXY"), "");
    assert_non_null (strstr (val (&env, "JAVA_TOOL_OPTIONS"), "-Dhttps.proxyHost=172.30.0.1"));
    assert_string_equal (val (&env, "NODE_USE_ENV_PROXY"), "1");
    assert_null (val (&env, "ALL_PROXY"));
    size_t n = 0;
    for (size_t i = 0; i < env.n; i++)
        n += strncmp (env.v[i], "HTTPS_PROXY=", 12) == 0;
    assert_int_equal (n, 1);
    kiwi_strv_free (&env);
    /* a Maven or Gradle plan's trust store is added to the JVM's proxy
     * options, not put in their place; any other name the plan sets
     * replaces the earlier entry: one entry per name */
    const char *plan[] = { "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=/kiwi/ts.jks", "NO_PROXY=localhost",
                           "MAVEN_OPTS=-Duser.home=/kiwi/home", NULL };
    assert_int_equal (kiwi_phase_install_env (&pc, plan, &env, &err), 0);
    assert_string_equal (val (&env, "JAVA_TOOL_OPTIONS"),
                         "-Dhttp.proxyHost=172.30.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=172.30.0.1 "
                         "-Dhttps.proxyPort=3128 -Djavax.net.ssl.trustStore=/kiwi/ts.jks");
    assert_string_equal (val (&env, "NO_PROXY"), "localhost");
    assert_string_equal (val (&env, "MAVEN_OPTS"), "-Duser.home=/kiwi/home");
    for (size_t i = 0; i < env.n; i++)
        for (size_t j = i + 1; j < env.n; j++) {
            size_t k = strcspn (env.v[i], "=");
            if (strncmp (env.v[i], env.v[j], k + 1) == 0)
                fail_msg ("two entries for one name: %s and %s", env.v[i], env.v[j]);
        }
    kiwi_strv_free (&env);
    /* without the proxy: the worker's own, as before */
    pc.proxy_env = NULL;
    assert_int_equal (kiwi_phase_install_env (&pc, NULL, &env, &err), 0);
    assert_string_equal (val (&env, "HTTPS_PROXY"), "http://corp.example:8080");
    kiwi_strv_free (&env);
    kiwi_strv_free (&proxy);
}

static void
test_log (void **state)
{
    kiwi_proxy_log_entry e;
    const char *rule = NULL;
    char l1[] = "1796168014.426 198.18.139.66 23128 TCP_MISS 200 GET - http://allowed.kiwi.test/ 91 1690 "
                "198.18.139.200 -\n";
    assert_int_equal (kiwi_proxy_log_parse (l1, &e), 0);
    assert_string_equal (e.client, "198.18.139.66");
    assert_int_equal (e.local_port, 23128);
    assert_string_equal (e.host, "allowed.kiwi.test");
    assert_int_equal (e.port, 80);
    assert_int_equal (e.bytes_out, 1690);
    assert_null (e.sni);
    assert_false (kiwi_proxy_log_denied (&e, &rule));

    char l2[] = "1796168016.685 198.18.139.66 443 TCP_TUNNEL 500 CONNECT allowed.kiwi.test allowed.kiwi.test:443 "
                "1739 3473 198.18.139.200 splice";
    assert_int_equal (kiwi_proxy_log_parse (l2, &e), 0);
    assert_string_equal (e.sni, "allowed.kiwi.test");
    assert_string_equal (e.bump, "splice");
    assert_int_equal (e.port, 443);
    assert_false (kiwi_proxy_log_denied (&e, NULL));

    char l3[] = "1796168018.335 198.18.139.66 23128 TCP_DENIED 403 CONNECT - other.kiwi.test:443 91 3407 - -";
    assert_int_equal (kiwi_proxy_log_parse (l3, &e), 0);
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    assert_string_equal (rule, "host not allowed");
    assert_string_equal (e.host, "other.kiwi.test");
    assert_int_equal (e.port, 443);

    char l4[] = "1796168020.105 198.18.139.66 80 TCP_DENIED 403 GET - http://198.18.139.201/ 64 3401 - -";
    assert_int_equal (kiwi_proxy_log_parse (l4, &e), 0);
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    assert_string_equal (e.host, "198.18.139.201");

    char l5[] = "1796168020.878 198.18.139.66 80 NONE_NONE 409 GET - http://allowed.kiwi.test/ 67 3640 - -";
    assert_int_equal (kiwi_proxy_log_parse (l5, &e), 0);
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    assert_string_equal (rule, "Host does not match the address");

    char l6[] = "1796168021.773 198.18.139.66 443 NONE_NONE 0 CONNECT other.kiwi.test 198.18.139.201:443 0 0 - "
                "terminate";
    assert_int_equal (kiwi_proxy_log_parse (l6, &e), 0);
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    assert_string_equal (rule, "TLS SNI not allowed");
    assert_string_equal (e.host, "other.kiwi.test");

    char l7[] = "1796168022.586 198.18.139.66 443 NONE_NONE 0 CONNECT - 198.18.139.201:443 0 0 - terminate";
    assert_int_equal (kiwi_proxy_log_parse (l7, &e), 0);
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    assert_string_equal (rule, "TLS without SNI");
    assert_string_equal (e.host, "198.18.139.201");

    /* the format proxy.sh writes now: %-encoded fields and a thirteenth,
     * "redirected" for what the nat rules caught (HTTP on Squid's own
     * port, not 80) */
    char l8[] = "1796481899.369 198.18.139.66 3129 TCP_DENIED 403 GET - http://leak.kiwi.test/a%20b%25c 78 3424 - - "
                "redirected";
    assert_int_equal (kiwi_proxy_log_parse (l8, &e), 0);
    assert_true (e.redirected);
    assert_int_equal (e.local_port, 3129);
    assert_string_equal (e.url, "http://leak.kiwi.test/a%20b%c");
    assert_string_equal (e.host, "leak.kiwi.test");
    assert_true (kiwi_proxy_log_denied (&e, &rule));
    char l9[] = "1796481899.377 198.18.139.66 3128 TCP_DENIED 403 GET - http://leak.kiwi.test/ 129 3424 - - -";
    assert_int_equal (kiwi_proxy_log_parse (l9, &e), 0);
    assert_false (e.redirected);

    /* an SNI with a newline and an escape sequence: one line, its fields
     * escaped; decoded only where the byte is printable */
    char l10[] = "1796481768.089 198.18.139.66 443 NONE_NONE 0 CONNECT x%0Ay%1B%5B31m%20z 198.18.139.201:443 0 0 - "
                 "terminate redirected";
    assert_int_equal (kiwi_proxy_log_parse (l10, &e), 0);
    assert_string_equal (e.sni, "x%0Ay%1B[31m%20z");
    assert_string_equal (e.host, "x%0Ay%1B[31m%20z");
    assert_string_equal (e.bump, "terminate");
    /* a raw control byte (a log of the format before): never passed on */
    char l11[] = "1796168021.773 198.18.139.66 443 NONE_NONE 0 CONNECT a\x1b[2Jb\rc 198.18.139.201:443 0 0 - terminate";
    assert_int_equal (kiwi_proxy_log_parse (l11, &e), 0);
    assert_string_equal (e.sni, "a?[2Jb?c");
    assert_false (e.redirected);

    char bad[] = "not a log line";
    assert_int_equal (kiwi_proxy_log_parse (bad, &e), -1);
    char empty[] = "";
    assert_int_equal (kiwi_proxy_log_parse (empty, &e), -1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_setting),
        cmocka_unit_test (test_default_proxied),
        cmocka_unit_test (test_ports),
        cmocka_unit_test (test_phase_env),
        cmocka_unit_test (test_log),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
