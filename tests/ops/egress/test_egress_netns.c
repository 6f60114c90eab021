/*
 * test_egress_netns.c: the namespace helper (tests/support/netns.h) and the
 * egress rules through it, in C, the way the sandbox hostile suite uses them:
 * a fake metadata server on 169.254.169.254 inside a namespace this test
 * creates, a container on the kiwi-install network, egress.sh apply/remove.
 *
 * Before any packet goes to 169.254.169.254 the route from the host and from
 * the container's address on kiwi-install0 must lead into the test's veth
 * (kiwi_netns_route_check); otherwise the test fails without sending.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"
#include "netns.h"

#define META "169.254.169.254"
#define NET "kiwi-install"
#define BRIDGE "kiwi-install0"
#define EGRESS KIWI_SOURCE_DIR "/ops/egress/egress.sh"

static struct kiwi_netns ns, other;
static char client[128];
static char client_ip[64];
static char preapplied[1024];
static int had_rules;
static int applied; /* this test's rules are on */
static int made_net;

static const char *
image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_IMAGE", "kiwi/base:bookworm");
}

static int
sh (char *out, size_t cap, const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    char sink[4096];
    return kiwi_test_sh (cmd, out ? out : sink, out ? cap : sizeof sink);
}

static void
chomp (char *s)
{
    s[strcspn (s, "\r\n")] = '\0';
}

/* Skips (or fails, in the full suite) without root, docker or the image. */
static void
need_everything (void)
{
    KIWI_NEED (geteuid () == 0, "root (network namespaces, iptables)");
    kiwi_test_env ("DOCKER_HOST"); /* loads the stack's env file into the environment */
    KIWI_NEED (sh (NULL, 0, "docker version >/dev/null 2>&1") == 0, "dockerd (DOCKER_HOST)");
    KIWI_NEED (sh (NULL, 0, "docker image inspect %s >/dev/null 2>&1", image ()) == 0, "image %s", image ());
    KIWI_NEED (access (EGRESS, X_OK) == 0, "%s", EGRESS);
}

static int
group_setup (void **state)
{
    /* The test decides the egress options, not the site's configuration. */
    setenv ("KIWI_EGRESS_CONF", "/nonexistent/kiwi-egress.env", 1);
    unsetenv ("KIWI_EGRESS_RFC1918");
    unsetenv ("KIWI_EGRESS_ALLOW");
    unsetenv ("KIWI_EGRESS_DNS");
    unsetenv ("KIWI_EGRESS_METADATA");
    unsetenv ("KIWI_EGRESS_INSTALL_BRIDGE");
    unsetenv ("KIWI_EGRESS_IPV6");
    return 0;
}

static int
group_teardown (void **state)
{
    if (client[0])
        sh (NULL, 0, "docker rm -f %s >/dev/null 2>&1", client);
    if (applied)
        sh (NULL, 0, "%s remove >/dev/null 2>&1", EGRESS);
    if (had_rules)
        sh (NULL, 0, "%s apply %s >/dev/null 2>&1", EGRESS, preapplied);
    if (made_net)
        sh (NULL, 0, "docker network rm " NET " >/dev/null 2>&1");
    return 0;
}

/* The client container on kiwi-install, started once. */
static void
start_client (void)
{
    if (client[0])
        return;
    if (sh (NULL, 0, "docker network inspect " NET " >/dev/null 2>&1") != 0) {
        assert_int_equal (sh (NULL, 0,
                              "docker network create -d bridge -o com.docker.network.bridge.enable_icc=false "
                              "-o com.docker.network.bridge.name=" BRIDGE " --label org.kiwi.network=install " NET
                              " >/dev/null"),
                          0);
        made_net = 1;
    }
    char *name = kiwi_test_unique ("kiwi-egress-c");
    assert_non_null (name);
    snprintf (client, sizeof client, "%s", name);
    free (name);
    assert_int_equal (sh (NULL, 0, "docker run -d --rm --name %s --network " NET " %s sleep 600 >/dev/null", client,
                          image ()),
                      0);
    assert_int_equal (sh (client_ip, sizeof client_ip,
                          "docker inspect -f '{{(index .NetworkSettings.Networks \"" NET "\").IPAddress}}' %s", client),
                      0);
    chomp (client_ip);
    assert_true (client_ip[0] != '\0');
}

/* Rules found applied at start are removed for the test and re-applied. */
static void
clear_rules (void)
{
    static int done;
    if (done)
        return;
    done = 1;
    if (sh (NULL, 0, "%s status >/dev/null 2>&1", EGRESS) == 0) {
        had_rules = 1;
        if (sh (preapplied, sizeof preapplied, "cat /run/kiwi-egress/applied.args 2>/dev/null") != 0)
            snprintf (preapplied, sizeof preapplied, "--metadata " META);
        chomp (preapplied);
        assert_int_equal (sh (NULL, 0, "%s remove >/dev/null 2>&1", EGRESS), 0);
    }
}

/* curl from the client; returns curl's exit status, body in out. */
static int
fetch (const char *url, char *out, size_t cap)
{
    if (kiwi_netns_route_check (&ns, META, client_ip, BRIDGE) != 0)
        fail_msg ("%s; nothing was sent", ns.err);
    return sh (out, cap, "docker exec %s curl -sS -k --connect-timeout 3 -m 6 %s 2>&1", client, url);
}

/* Each test's namespaces go, whatever happened in it. */
static int
destroy_namespaces (void **state)
{
    kiwi_netns_destroy (&other);
    kiwi_netns_destroy (&ns);
    return 0;
}

/* ------------------------------------------------------------------ tests --- */

static void
test_route_check_refuses_an_address_not_routed_into_the_namespace (void **state)
{
    need_everything ();
    if (kiwi_netns_create (&ns, "rc") != 0)
        fail_msg ("%s", ns.err);
    /* Nothing routes 169.254.169.254 into this namespace: the check must
     * refuse (and it sends nothing: `ip route get` is a lookup). */
    assert_int_equal (kiwi_netns_route_check (&ns, META, NULL, NULL), -1);
    assert_non_null (strstr (ns.err, "route safety"));
    /* After add_address, the same check holds. */
    assert_int_equal (kiwi_netns_add_address (&ns, META), 0);
    assert_int_equal (kiwi_netns_route_check (&ns, META, NULL, NULL), 0);
    /* A second namespace cannot take an address the first one routes. */
    if (kiwi_netns_create (&other, "rc") != 0)
        fail_msg ("%s", other.err);
    assert_int_equal (kiwi_netns_add_address (&other, META), -1);
    assert_non_null (strstr (other.err, "already has a route"));
    kiwi_netns_destroy (&other);
    kiwi_netns_destroy (&ns);
    /* Gone: the route with it. */
    char out[256];
    assert_int_equal (sh (out, sizeof out, "ip route show exact " META "/32"), 0);
    assert_string_equal (out, "");
}

static void
test_run_and_fakes_inside_the_namespace (void **state)
{
    need_everything ();
    if (kiwi_netns_create (&ns, "run") != 0)
        fail_msg ("%s", ns.err);
    assert_int_equal (kiwi_netns_add_address (&ns, META), 0);
    char out[2048];
    char *const ipaddr[] = { "ip", "-4", "-o", "addr", "show", "dev", "lo", NULL };
    assert_int_equal (kiwi_netns_run (&ns, ipaddr, out, sizeof out), 0);
    assert_non_null (strstr (out, META "/32"));
    /* The namespace has no default route: it reaches nothing but its peer. */
    char *const route[] = { "ip", "route", "show", "default", NULL };
    assert_int_equal (kiwi_netns_run (&ns, route, out, sizeof out), 0);
    assert_string_equal (out, "");
    assert_int_equal (kiwi_netns_serve_http (&ns, META, 80, "kiwi-fake-metadata token=FAKE\n"), 0);
    assert_int_equal (kiwi_netns_serve_dns (&ns, META, 53, META), 0);
    /* Busy port: a clear error, not a hang. */
    assert_int_equal (kiwi_netns_serve_http (&ns, META, 80, "x"), -1);
    assert_non_null (strstr (ns.err, "HTTP server on " META ":80"));
    /* From inside the namespace itself (its own loopback path). */
    char *const curl[] = { "curl", "-sS", "-m", "5", "http://" META "/", NULL };
    assert_int_equal (kiwi_netns_run (&ns, curl, out, sizeof out), 0);
    assert_non_null (strstr (out, "kiwi-fake-metadata"));
    assert_int_equal (kiwi_netns_hits (&ns), 1);
    kiwi_netns_destroy (&ns);
}

static void
test_metadata_blocked_by_rules_dns_answered (void **state)
{
    need_everything ();
    clear_rules ();
    start_client ();
    if (kiwi_netns_create (&ns, "meta") != 0)
        fail_msg ("%s", ns.err);
    assert_int_equal (kiwi_netns_add_address (&ns, META), 0);
    assert_int_equal (kiwi_netns_serve_http (&ns, META, 80, "kiwi-fake-metadata token=FAKE\n"), 0);
    assert_int_equal (kiwi_netns_serve_http (&ns, META, 443, "kiwi-fake-metadata token=FAKE\n"), 0);
    assert_int_equal (kiwi_netns_serve_dns (&ns, META, 53, META), 0);
    if (kiwi_netns_route_check (&ns, META, client_ip, BRIDGE) != 0)
        fail_msg ("%s; nothing was sent", ns.err);

    char out[4096];
    /* Without the rules the container reaches the fake: the namespace is
     * reachable, so what blocks it below is the rules. */
    assert_int_equal (fetch ("http://" META "/computeMetadata/v1/", out, sizeof out), 0);
    assert_non_null (strstr (out, "kiwi-fake-metadata"));
    long h = kiwi_netns_hits (&ns);
    assert_true (h >= 1);
    /* Plain TCP on 443: the TLS handshake fails (35) after connecting. */
    assert_int_equal (fetch ("https://" META "/", out, sizeof out), 35);
    assert_true (kiwi_netns_hits (&ns) == h + 1);

    applied = 1;
    assert_int_equal (sh (out, sizeof out, "%s apply 2>&1", EGRESS), 0);
    h = kiwi_netns_hits (&ns);
    assert_int_equal (fetch ("http://" META "/computeMetadata/v1/", out, sizeof out), 7);
    assert_int_equal (fetch ("https://" META "/", out, sizeof out), 7);
    assert_int_equal (kiwi_netns_hits (&ns), h); /* nothing arrived */

    /* DNS to the same address still answered: Docker's embedded DNS forwards
     * to it from the container's namespace, through the same FORWARD path. */
    if (kiwi_netns_route_check (&ns, META, client_ip, BRIDGE) != 0)
        fail_msg ("%s; nothing was sent", ns.err);
    assert_int_equal (sh (out, sizeof out,
                          "timeout 30 docker run --rm --network " NET " --dns " META
                          " %s getent hosts metadata.google.internal 2>&1",
                          image ()),
                      0);
    assert_non_null (strstr (out, META));
    assert_true (kiwi_netns_hits (&ns) > h);

    assert_int_equal (sh (out, sizeof out, "%s remove 2>&1", EGRESS), 0);
    applied = 0;
    assert_int_equal (fetch ("http://" META "/computeMetadata/v1/", out, sizeof out), 0);
    kiwi_netns_destroy (&ns);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_route_check_refuses_an_address_not_routed_into_the_namespace,
                                   destroy_namespaces),
        cmocka_unit_test_teardown (test_run_and_fakes_inside_the_namespace, destroy_namespaces),
        cmocka_unit_test_teardown (test_metadata_blocked_by_rules_dns_answered, destroy_namespaces),
    };
    return kiwi_run_group ("egress_netns", tests, group_setup, group_teardown);
}
