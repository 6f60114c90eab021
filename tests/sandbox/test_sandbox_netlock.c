/*
 * test_sandbox_netlock.c: locks the network decision of the sandbox.
 *
 * The container create request the driver sends for Phase B (verify) and for
 * the Implementer's session has NetworkMode "none" and networking disabled,
 * under runc and under runsc, and the gVisor driver selects the runsc
 * runtime. If anyone changes that, this test fails. It also locks the
 * privileges every sandbox runs with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "sandbox/docker/docker-internal.h"

static json_t *
body_for (const kiwi__docker_flavour *f, kiwi_net_mode net, const char *phase)
{
    const char *env[] = { "PATH=/usr/bin:/bin", NULL };
    kiwi_sandbox_spec spec = {
        .image = "kiwi/base:bookworm", .network = net, .env = env, .task_id = "t1", .phase = phase,
    };
    kiwi_error_t err = NULL;
    json_t *b = kiwi__docker_create_body (f, &spec, "/var/lib/kiwi/sandboxes/x/mnt", "/var/lib/kiwi/gvisor-resolv.conf", "w1",
                                          NULL, NULL, &err);
    assert_non_null (b);
    /* a one-shot run of the same spec decides the network the same way */
    const char *argv[] = { "npm", "test", NULL };
    kiwi_exec_spec x = { .argv = argv };
    json_t *o = kiwi__docker_create_body (f, &spec, "/var/lib/kiwi/sandboxes/x/mnt", "/var/lib/kiwi/gvisor-resolv.conf", "w1",
                                          NULL, &x, &err);
    assert_non_null (o);
    json_t *bh = json_object_get (b, "HostConfig"), *oh = json_object_get (o, "HostConfig");
    const char *keys[] = { "NetworkMode", "Runtime", "Privileged", "CapDrop", "SecurityOpt", "ReadonlyRootfs",
                           "Memory", "PidsLimit", "Mounts", NULL };
    for (size_t i = 0; keys[i]; i++)
        assert_true (json_equal (json_object_get (bh, keys[i]), json_object_get (oh, keys[i])));
    assert_true (json_equal (json_object_get (b, "NetworkDisabled"), json_object_get (o, "NetworkDisabled")));
    assert_string_equal (json_string_value (json_array_get (json_object_get (o, "Cmd"), 0)), "npm");
    json_decref (o);
    return b;
}

static const char *
host_str (json_t *b, const char *key)
{
    return json_string_value (json_object_get (json_object_get (b, "HostConfig"), key));
}

static void
assert_no_network (json_t *b)
{
    assert_string_equal (host_str (b, "NetworkMode"), "none");
    /* nothing that could add an interface or a route next to it */
    json_t *h = json_object_get (b, "HostConfig");
    assert_null (json_object_get (h, "PortBindings"));
    assert_null (json_object_get (h, "ExtraHosts"));
    assert_null (json_object_get (h, "Links"));
    assert_null (json_object_get (b, "NetworkingConfig"));
    assert_null (json_object_get (b, "ExposedPorts"));
}

static void
test_phase_b_runc_has_no_network (void **state)
{
    json_t *b = body_for (&kiwi__docker_flavour_runc, KIWI_NET_NONE, "verify");
    assert_no_network (b);
    assert_string_equal (host_str (b, "Runtime"), "runc");
    json_decref (b);
}

static void
test_phase_b_gvisor_has_no_network_and_runsc (void **state)
{
    json_t *b = body_for (&kiwi__docker_flavour_runsc, KIWI_NET_NONE, "verify");
    assert_no_network (b);
    assert_string_equal (host_str (b, "Runtime"), "runsc");
    json_decref (b);
}

/* Phase B's verify sets files_sealed: under gVisor it runs under
 * runsc-verify (no network either, /kiwi cached), under runc nothing
 * changes; a sandbox made ahead starts outside /kiwi, a one-shot one in the
 * command's directory. Nothing else (the session, Phase A) gets it. */
static void
test_sealed_verify_runtime (void **state)
{
    const char *env[] = { "PATH=/usr/bin:/bin", NULL };
    const kiwi__docker_flavour *flavours[] = { &kiwi__docker_flavour_runc, &kiwi__docker_flavour_runsc };
    const char *want[] = { "runc", "runsc-verify" };
    const char *argv[] = { "npm", "test", NULL };
    kiwi_exec_spec x = { .argv = argv, .workdir = KIWI_SANDBOX_SRC };
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_spec spec = { .image = "kiwi/base:bookworm", .network = KIWI_NET_NONE, .env = env,
                                   .task_id = "t1", .phase = "verify", .files_sealed = true };
        kiwi_error_t err = NULL;
        json_t *b = kiwi__docker_create_body (flavours[i], &spec, "/d/mnt", NULL, "w1", NULL, NULL, &err);
        assert_non_null (b);
        assert_no_network (b);
        assert_string_equal (host_str (b, "Runtime"), want[i]);
        assert_string_equal (json_string_value (json_object_get (b, "WorkingDir")), "/");
        json_decref (b);
        b = kiwi__docker_create_body (flavours[i], &spec, "/d/mnt", NULL, "w1", NULL, &x, &err);
        assert_non_null (b);
        assert_string_equal (host_str (b, "Runtime"), want[i]);
        assert_string_equal (json_string_value (json_object_get (b, "WorkingDir")), KIWI_SANDBOX_SRC);
        json_decref (b);
        assert_string_equal (kiwi__docker_runtime (flavours[i], &spec), want[i]);
        /* the same spec unsealed: the flavour's own runtime, in /kiwi/src */
        spec.files_sealed = false;
        b = kiwi__docker_create_body (flavours[i], &spec, "/d/mnt", NULL, "w1", NULL, NULL, &err);
        assert_string_equal (host_str (b, "Runtime"), flavours[i]->runtime);
        assert_string_equal (json_string_value (json_object_get (b, "WorkingDir")), KIWI_SANDBOX_SRC);
        json_decref (b);
        /* Phase A sealed by mistake still runs under its own runtime */
        spec = (kiwi_sandbox_spec) { .image = "i", .network = KIWI_NET_INSTALL, .phase = "install",
                                     .files_sealed = true };
        assert_string_equal (kiwi__docker_runtime (flavours[i], &spec), flavours[i]->install_runtime);
    }
    /* a daemon without runsc-verify: open drops it, the verify keeps runsc */
    kiwi__docker_flavour f = kiwi__docker_flavour_runsc;
    f.sealed_runtime = NULL;
    kiwi_sandbox_spec spec = { .image = "i", .network = KIWI_NET_NONE, .phase = "verify", .files_sealed = true };
    assert_string_equal (kiwi__docker_runtime (&f, &spec), "runsc");
}

static void
test_session_sandbox_has_no_network (void **state)
{
    const kiwi__docker_flavour *flavours[] = { &kiwi__docker_flavour_runc, &kiwi__docker_flavour_runsc };
    for (size_t i = 0; i < 2; i++) {
        json_t *b = body_for (flavours[i], KIWI_NET_NONE, "session");
        assert_no_network (b);
        json_decref (b);
    }
}

static void
test_gvisor_driver_uses_runsc_everywhere (void **state)
{
    assert_string_equal (kiwi__docker_flavour_runsc.runtime, "runsc");
    assert_string_equal (kiwi__docker_flavour_runsc.install_runtime, "runsc-net");
    assert_string_equal (kiwi__docker_flavour_runsc.sealed_runtime, "runsc-verify");
    kiwi_error_t err = NULL;
    assert_ptr_equal (kiwi_sandbox_driver_find ("runsc", &err), &kiwi_sandbox_driver_gvisor);
    assert_ptr_equal (kiwi_sandbox_driver_find ("gvisor", &err), &kiwi_sandbox_driver_gvisor);
}

static void
test_install_network_is_never_the_hosts (void **state)
{
    /* Phase A has a network, but never the host's: NetworkMode "host" would
     * hand the sandbox the host's loopback services (under runsc-net as
     * registered with Debian's runsc, hostinet, it does; the current runsc's
     * netstack refuses the host's namespace on its own). */
    const kiwi__docker_flavour *flavours[] = { &kiwi__docker_flavour_runc, &kiwi__docker_flavour_runsc };
    for (size_t i = 0; i < 2; i++) {
        json_t *b = body_for (flavours[i], KIWI_NET_INSTALL, "install");
        const char *mode = host_str (b, "NetworkMode");
        assert_string_equal (mode, KIWI_INSTALL_NETWORK);
        assert_string_not_equal (mode, "host");
        assert_null (strstr (mode, "container:"));
        json_decref (b);
    }
    json_t *b = body_for (&kiwi__docker_flavour_runsc, KIWI_NET_INSTALL, "install");
    assert_string_equal (host_str (b, "Runtime"), "runsc-net");
    json_decref (b);
}

static void
test_install_bridges_and_their_networks (void **state)
{
    (void) state;
    char net[32];
    int idx = -1;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_network_name ("kiwi-install0", net, sizeof net, &idx, &err), 0);
    assert_string_equal (net, KIWI_INSTALL_NETWORK);
    assert_int_equal (idx, 0);
    assert_int_equal (kiwi_install_network_name ("kiwi-install15", net, sizeof net, &idx, &err), 0);
    assert_string_equal (net, "kiwi-install15");
    assert_int_equal (idx, 15);
    const char *bad[] = { NULL, "", "kiwi-install", "kiwi-install16", "kiwi-install01", "kiwi-install1x",
                          "docker0", "kiwi-install+", "kiwi-install-1", "kiwi-install100" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal (kiwi_install_network_name (bad[i], net, sizeof net, NULL, &err), -1);
        assert_non_null (strstr (kiwi_error_msg (err), "kiwi-install0 .. kiwi-install15"));
        kiwi_error_free (&err);
    }
    /* the network a driver was given is Phase A's, and only Phase A's */
    const char *env[] = { "PATH=/usr/bin:/bin", NULL };
    kiwi_sandbox_spec spec = {
        .image = "kiwi/base:bookworm", .network = KIWI_NET_INSTALL, .env = env, .task_id = "t1", .phase = "install",
    };
    json_t *b = kiwi__docker_create_body (&kiwi__docker_flavour_runc, &spec, NULL, NULL, "w1", "kiwi-install3",
                                          NULL, &err);
    assert_non_null (b);
    assert_string_equal (host_str (b, "NetworkMode"), "kiwi-install3");
    json_decref (b);
    spec.network = KIWI_NET_NONE;
    b = kiwi__docker_create_body (&kiwi__docker_flavour_runc, &spec, NULL, NULL, "w1", "kiwi-install3", NULL, &err);
    assert_non_null (b);
    assert_string_equal (host_str (b, "NetworkMode"), "none");
    json_decref (b);
}

/* The mount at `target` in a body's HostConfig.Mounts, or NULL. */
static json_t *
mount_at (json_t *b, const char *target)
{
    json_t *ms = json_object_get (json_object_get (b, "HostConfig"), "Mounts");
    for (size_t i = 0; i < json_array_size (ms); i++) {
        json_t *m = json_array_get (ms, i);
        if (strcmp (json_string_value (json_object_get (m, "Target")), target) == 0)
            return m;
    }
    return NULL;
}

static void
test_gvisor_phase_a_gets_the_upstream_resolvers_read_only (void **state)
{
    /* gVisor's netstack cannot reach Docker's embedded resolver: Phase A
     * under runsc-net gets the host's upstream resolvers, read-only; nothing
     * else does (runc keeps Docker's file; Phase B has no network). */
    json_t *b = body_for (&kiwi__docker_flavour_runsc, KIWI_NET_INSTALL, "install");
    json_t *m = mount_at (b, "/etc/resolv.conf");
    assert_non_null (m);
    assert_string_equal (json_string_value (json_object_get (m, "Source")), "/var/lib/kiwi/gvisor-resolv.conf");
    assert_true (json_is_true (json_object_get (m, "ReadOnly")));
    assert_string_equal (json_string_value (json_object_get (m, "Type")), "bind");
    assert_non_null (mount_at (b, KIWI_SANDBOX_ROOT));
    assert_int_equal (json_array_size (json_object_get (json_object_get (b, "HostConfig"), "Mounts")), 2);
    json_decref (b);
    json_t *others[] = { body_for (&kiwi__docker_flavour_runsc, KIWI_NET_NONE, "verify"),
                         body_for (&kiwi__docker_flavour_runc, KIWI_NET_INSTALL, "install"),
                         body_for (&kiwi__docker_flavour_runc, KIWI_NET_NONE, "verify") };
    for (size_t i = 0; i < 3; i++) {
        assert_null (mount_at (others[i], "/etc/resolv.conf"));
        assert_int_equal (json_array_size (json_object_get (json_object_get (others[i], "HostConfig"), "Mounts")), 1);
        json_decref (others[i]);
    }
}

/* IPv6 on the loopback only: every body, both flavours and both networks,
 * turns on lo's IPv6 and touches no other interface ("all", "default" or
 * eth0 would give Phase A's eth0 a link-local address and a route). */
static void
test_ipv6_on_the_loopback_only (void **state)
{
    const kiwi__docker_flavour *flavours[] = { &kiwi__docker_flavour_runc, &kiwi__docker_flavour_runsc };
    const kiwi_net_mode nets[] = { KIWI_NET_NONE, KIWI_NET_INSTALL };
    for (size_t i = 0; i < 2; i++)
        for (size_t n = 0; n < 2; n++) {
            json_t *b = body_for (flavours[i], nets[n], n == 1 ? "install" : "verify");
            json_t *sys = json_object_get (json_object_get (b, "HostConfig"), "Sysctls");
            assert_non_null (sys);
            assert_int_equal (json_object_size (sys), 1);
            assert_string_equal (json_string_value (json_object_get (sys, "net.ipv6.conf.lo.disable_ipv6")), "0");
            json_decref (b);
        }
}

static void
test_privileges_locked (void **state)
{
    const kiwi_net_mode nets[] = { KIWI_NET_NONE, KIWI_NET_INSTALL };
    for (size_t i = 0; i < 2; i++) {
        json_t *b = body_for (&kiwi__docker_flavour_runc, nets[i], "install");
        json_t *h = json_object_get (b, "HostConfig");
        assert_true (json_is_false (json_object_get (h, "Privileged")));
        assert_string_equal (json_string_value (json_array_get (json_object_get (h, "CapDrop"), 0)), "ALL");
        assert_null (json_object_get (h, "CapAdd"));
        assert_string_equal (json_string_value (json_array_get (json_object_get (h, "SecurityOpt"), 0)),
                             "no-new-privileges");
        assert_true (json_is_true (json_object_get (h, "ReadonlyRootfs")));
        assert_true (json_integer_value (json_object_get (h, "PidsLimit")) > 0);
        assert_true (json_integer_value (json_object_get (h, "Memory")) > 0);
        assert_null (json_object_get (h, "Binds"));
        /* the only mount is the sandbox's own disk; never the Docker socket */
        json_t *mounts = json_object_get (h, "Mounts");
        assert_int_equal (json_array_size (mounts), 1);
        const char *src = json_string_value (json_object_get (json_array_get (mounts, 0), "Source"));
        assert_null (strstr (src, "docker.sock"));
        assert_string_equal (json_string_value (json_object_get (json_array_get (mounts, 0), "Target")), "/kiwi");
        assert_string_equal (json_string_value (json_object_get (b, "User")), "1000:1000");
        json_decref (b);
    }
}

static void
test_unknown_driver_lists_known (void **state)
{
    kiwi_error_t err = NULL;
    assert_null (kiwi_sandbox_driver_find ("lxc", &err));
    assert_non_null (strstr (kiwi_error_msg (err), "unknown sandbox driver `lxc`"));
    assert_non_null (strstr (kiwi_error_msg (err), "docker"));
    assert_non_null (strstr (kiwi_error_msg (err), "gvisor"));
    kiwi_error_free (&err);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_phase_b_runc_has_no_network),
        cmocka_unit_test (test_phase_b_gvisor_has_no_network_and_runsc),
        cmocka_unit_test (test_sealed_verify_runtime),
        cmocka_unit_test (test_session_sandbox_has_no_network),
        cmocka_unit_test (test_gvisor_driver_uses_runsc_everywhere),
        cmocka_unit_test (test_gvisor_phase_a_gets_the_upstream_resolvers_read_only),
        cmocka_unit_test (test_install_network_is_never_the_hosts),
        cmocka_unit_test (test_install_bridges_and_their_networks),
        cmocka_unit_test (test_ipv6_on_the_loopback_only),
        cmocka_unit_test (test_privileges_locked),
        cmocka_unit_test (test_unknown_driver_lists_known),
    };
    return cmocka_run_group_tests_name ("sandbox_netlock", tests, NULL, NULL);
}
