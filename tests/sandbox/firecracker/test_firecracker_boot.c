/*
 * test_firecracker_boot.c: the firecracker driver's configuration sequence
 * as data, against golden JSON.
 *
 * Locks the API calls that make a microVM (paths, order, bodies), the
 * network decision (Phase B and sessions have no network device at all:
 * no /network-interfaces call), vCPU and memory from the limits, the boot
 * arguments, the image → root filesystem naming shared with
 * ops/firecracker/mkrootfs.sh, the settings table, and the words of the
 * no-KVM error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/firecracker/firecracker-internal.h"

static const char golden_phase_b[] =
    "["
    "[\"PUT\",\"/machine-config\",{\"vcpu_count\":2,\"mem_size_mib\":1024,\"smt\":false}],"
    "[\"PUT\",\"/boot-source\",{\"kernel_image_path\":\"/fc/vmlinux\",\"boot_args\":"
    "\"console=ttyS0 reboot=k panic=1 pci=off quiet init=/sbin/kiwi-fc-agent kiwi.workspace=/dev/vdb "
    "kiwi.user=1000:1000 kiwi.port=5252\"}],"
    "[\"PUT\",\"/drives/rootfs\",{\"drive_id\":\"rootfs\",\"path_on_host\":\"/fc/images/kiwi+base@bookworm.ext4\","
    "\"is_root_device\":true,\"is_read_only\":true}],"
    "[\"PUT\",\"/drives/workspace\",{\"drive_id\":\"workspace\",\"path_on_host\":\"/s/w.ext4\","
    "\"is_root_device\":false,\"is_read_only\":false}],"
    "[\"PUT\",\"/vsock\",{\"guest_cid\":3,\"uds_path\":\"/s/vsock.sock\"}],"
    "[\"PUT\",\"/actions\",{\"action_type\":\"InstanceStart\"}]"
    "]";

static json_t *
boot_json (const kiwi__fc_boot *p)
{
    json_t *a = json_array ();
    for (size_t i = 0; i < p->n; i++)
        json_array_append_new (a, json_pack ("[s,s,O]", p->steps[i].method, p->steps[i].path, p->steps[i].body));
    return a;
}

static kiwi__fc_vm_config
base_vm (void)
{
    kiwi__fc_vm_config vm = {
        .kernel = "/fc/vmlinux",
        .rootfs = "/fc/images/kiwi+base@bookworm.ext4",
        .workspace = "/s/w.ext4",
        .vsock_uds = "/s/vsock.sock",
        .user = "1000:1000",
    };
    kiwi_sandbox_limits l = { .memory_mb = 1024, .cpus = 1.5 };
    kiwi__fc_sizes (&l, &vm.vcpus, &vm.mem_mib);
    return vm;
}

static void
assert_json_equal (json_t *got, const char *want_text)
{
    json_error_t je;
    json_t *want = json_loads (want_text, 0, &je);
    assert_non_null (want);
    if (!json_equal (got, want)) {
        char *g = json_dumps (got, JSON_COMPACT);
        fail_msg ("boot sequence differs from golden:\n got: %s\nwant: %s", g, want_text);
    }
    json_decref (want);
}

static void
test_phase_b_boot_is_golden (void **state)
{
    kiwi__fc_vm_config vm = base_vm ();
    kiwi__fc_boot p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_boot_build (&vm, &p, &err), 0);
    json_t *got = boot_json (&p);
    assert_json_equal (got, golden_phase_b);
    json_decref (got);
    kiwi__fc_boot_clear (&p);
}

static void
test_no_network_device_without_tap (void **state)
{
    kiwi__fc_vm_config vm = base_vm ();
    kiwi__fc_boot p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_boot_build (&vm, &p, &err), 0);
    for (size_t i = 0; i < p.n; i++)
        assert_null (strstr (p.steps[i].path, "network"));
    const char *args = json_string_value (json_object_get (p.steps[1].body, "boot_args"));
    assert_null (strstr (args, " ip="));
    kiwi__fc_boot_clear (&p);
}

static void
test_install_boot_has_tap_before_start (void **state)
{
    kiwi__fc_vm_config vm = base_vm ();
    vm.tap = "kfc0badc0de";
    vm.guest_mac = "06:00:ac:1e:00:02";
    vm.guest_ip = "172.30.0.2";
    vm.gateway_ip = "172.30.0.1";
    vm.netmask = "255.255.255.0";
    kiwi__fc_boot p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_boot_build (&vm, &p, &err), 0);
    assert_int_equal (p.n, 7);
    assert_string_equal (p.steps[4].path, "/network-interfaces/eth0");
    json_t *want = json_pack ("{s:s,s:s,s:s}", "iface_id", "eth0", "host_dev_name", "kfc0badc0de", "guest_mac",
                              "06:00:ac:1e:00:02");
    assert_true (json_equal (p.steps[4].body, want));
    json_decref (want);
    assert_string_equal (p.steps[6].path, "/actions");
    const char *args = json_string_value (json_object_get (p.steps[1].body, "boot_args"));
    assert_non_null (strstr (args, " ip=172.30.0.2::172.30.0.1:255.255.255.0:sandbox:eth0:off:172.30.0.1"));
    kiwi__fc_boot_clear (&p);
}

static void
test_sizes_from_limits (void **state)
{
    int v;
    int64_t m;
    kiwi_sandbox_limits zero = { 0 };
    kiwi__fc_sizes (&zero, &v, &m);
    assert_int_equal (v, 1);
    assert_int_equal (m, KIWI_FC_DEFAULT_MEMORY_MB);
    kiwi_sandbox_limits l = { .cpus = 2.0, .memory_mb = 512 };
    kiwi__fc_sizes (&l, &v, &m);
    assert_int_equal (v, 2);
    assert_int_equal (m, 512);
    l.cpus = 0.25;
    kiwi__fc_sizes (&l, &v, &m);
    assert_int_equal (v, 1);
    l.cpus = 100;
    kiwi__fc_sizes (&l, &v, &m);
    assert_int_equal (v, KIWI_FC_MAX_VCPUS);
}

static void
test_initrd_and_extra_args (void **state)
{
    kiwi__fc_vm_config vm = base_vm ();
    vm.initrd = "/fc/initrd.img";
    vm.extra_args = "loglevel=3";
    kiwi__fc_boot p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_boot_build (&vm, &p, &err), 0);
    assert_string_equal (json_string_value (json_object_get (p.steps[1].body, "initrd_path")), "/fc/initrd.img");
    const char *args = json_string_value (json_object_get (p.steps[1].body, "boot_args"));
    size_t n = strlen (args);
    assert_string_equal (args + n - strlen (" loglevel=3"), " loglevel=3");
    kiwi__fc_boot_clear (&p);
}

static void
test_rootfs_naming (void **state)
{
    char *p = kiwi__fc_rootfs_path ("/img", "kiwi/base:bookworm");
    assert_string_equal (p, "/img/kiwi+base@bookworm.ext4");
    free (p);
    p = kiwi__fc_rootfs_path ("/img", "registry.local:5000/a b/c:1.0");
    assert_string_equal (p, "/img/registry.local@5000+a_b+c@1.0.ext4");
    free (p);
    /* never a path outside the directory */
    p = kiwi__fc_rootfs_path ("/img", "../../etc/passwd");
    assert_string_equal (p, "/img/..+..+etc+passwd.ext4");
    assert_null (strchr (p + 5, '/'));
    free (p);
}

/* The driver's settings are the firecracker.* rows of the settings table:
 * the driver copies what it is given, or takes the table's defaults; the
 * table refuses a bad value naming the key and its variable. */
static void
test_settings_table (void **state)
{
    kiwi__fc_settings s;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_settings_load (&s, NULL, &err), 0);
    assert_string_equal (s.kernel, "/var/lib/kiwi/firecracker/vmlinux");
    assert_string_equal (s.kvm_device, "/dev/kvm");
    assert_int_equal (s.boot_timeout_ms, 30000);
    assert_false (s.skip_kvm_check);
    assert_string_equal (s.install_bridge, "");
    kiwi__fc_settings_clear (&s);

    kiwi_settings all;
    const char *envp[] = { "KIWI_FC_KERNEL=/k/vmlinux", NULL };
    memset (&all, 0, sizeof all);
    assert_int_equal (kiwi_settings_load (&all, KIWI_PROGRAM_WORKER, NULL, envp, 0, &err), 0);
    assert_int_equal (kiwi__fc_settings_load (&s, &all.fc, &err), 0);
    assert_string_equal (s.kernel, "/k/vmlinux");
    assert_ptr_not_equal (s.kernel, all.fc.kernel); /* a copy */
    kiwi__fc_settings_clear (&s);

    const char *bad1[] = { "KIWI_FC_BOOT_TIMEOUT_MS=soon", NULL };
    assert_int_equal (kiwi_settings_load (&all, KIWI_PROGRAM_WORKER, NULL, bad1, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "firecracker.boot_timeout_ms: invalid value `soon` "
                                                   "(from environment KIWI_FC_BOOT_TIMEOUT_MS)"));
    kiwi_error_free (&err);
    const char *bad2[] = { "KIWI_FC_SKIP_KVM_CHECK=maybe", NULL };
    assert_int_equal (kiwi_settings_load (&all, KIWI_PROGRAM_WORKER, NULL, bad2, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_FC_SKIP_KVM_CHECK"));
    kiwi_error_free (&err);
    const char *bad3[] = { "KIWI_FC_KERNEL=", NULL };
    assert_int_equal (kiwi_settings_load (&all, KIWI_PROGRAM_WORKER, NULL, bad3, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "firecracker.kernel: invalid value ``"));
    kiwi_error_free (&err);
    kiwi_settings_clear (&all);
}

static void
test_no_kvm_error_is_clear (void **state)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_check_kvm ("/nonexistent/kvm", &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_UNAVAILABLE);
    assert_string_equal (kiwi_error_msg (err),
                         "KVM is not available: cannot open /nonexistent/kvm: No such file or directory (the "
                         "firecracker driver needs a host with hardware virtualization and read-write access to "
                         "/dev/kvm)");
    kiwi_error_free (&err);
    /* a device that is not KVM */
    assert_int_equal (kiwi__fc_check_kvm ("/dev/null", &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KVM is not available: /dev/null answers KVM API version -1"));
    kiwi_error_free (&err);
}

static void
test_driver_is_selectable (void **state)
{
    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *d = kiwi_sandbox_driver_find ("firecracker", &err);
    assert_non_null (d);
    assert_ptr_equal (d, &kiwi_sandbox_driver_firecracker);
    assert_string_equal (d->name, "firecracker");
    assert_non_null (strstr (kiwi_sandbox_driver_names (), "firecracker"));
}

static void
test_open_refuses_without_kvm (void **state)
{
    kiwi_settings all;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_settings_defaults (&all, KIWI_PROGRAM_WORKER, &err), 0);
    free (all.fc.kvm_device);
    all.fc.kvm_device = strdup ("/nonexistent/kvm");
    kiwi_sandbox_config cfg = { .state_dir = "/tmp", .worker_id = "t", .firecracker = &all.fc };
    kiwi_sandbox_env *env = NULL;
    assert_int_equal (kiwi_sandbox_env_open (&kiwi_sandbox_driver_firecracker, &cfg, &env, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "opening the firecracker sandbox driver: KVM is not available"));
    kiwi_error_free (&err);
    kiwi_settings_clear (&all);
}

static void
test_exec_environment_merge (void **state)
{
    kiwi_strv base = KIWI_STRV_INIT;
    kiwi_strv_add (&base, "PATH=/usr/bin:/bin");
    kiwi_strv_add (&base, "HOME=/kiwi/home");
    kiwi_strv_add (&base, "PATHX=keep");
    const char *extra[] = { "PATH=/opt/bin", "CI=1", NULL };
    kiwi_strv out = KIWI_STRV_INIT;
    assert_int_equal (kiwi__fc_merge_env (&base, extra, &out), 0);
    assert_int_equal (out.n, 4);
    assert_string_equal (out.v[0], "HOME=/kiwi/home");
    assert_string_equal (out.v[1], "PATHX=keep");
    assert_string_equal (out.v[2], "PATH=/opt/bin");
    assert_string_equal (out.v[3], "CI=1");
    kiwi_strv_free (&out);
    assert_int_equal (kiwi__fc_merge_env (&base, NULL, &out), 0);
    assert_int_equal (out.n, 3);
    kiwi_strv_free (&out);
    kiwi_strv_free (&base);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_phase_b_boot_is_golden),
        cmocka_unit_test (test_no_network_device_without_tap),
        cmocka_unit_test (test_install_boot_has_tap_before_start),
        cmocka_unit_test (test_sizes_from_limits),
        cmocka_unit_test (test_initrd_and_extra_args),
        cmocka_unit_test (test_rootfs_naming),
        cmocka_unit_test (test_settings_table),
        cmocka_unit_test (test_no_kvm_error_is_clear),
        cmocka_unit_test (test_driver_is_selectable),
        cmocka_unit_test (test_open_refuses_without_kvm),
        cmocka_unit_test (test_exec_environment_merge),
    };
    return cmocka_run_group_tests_name ("firecracker_plan", tests, NULL, NULL);
}
