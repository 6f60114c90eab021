/*
 * test_sandbox_driver.c: the Docker and gVisor drivers against the real
 * dockerd: exec with streamed and bounded output, exit codes, deadlines,
 * the disk ceiling, memory and pids limits, no network, labels, destroy and
 * reap, ::1 on the loopback and no IPv6 beyond it. Each test runs under
 * both runtimes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "sandbox/docker/docker-api.h"
#include "need.h"
#include "sandbox-env.h"
#include "sandbox/sandbox.h"

static const char *drivers[] = { "docker", "gvisor" };

static const char *
image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_IMAGE", "kiwi/base:bookworm");
}

static kiwi_sandbox *
make (kiwi_sandbox_env *env, kiwi_sandbox_limits limits)
{
    const char *e[] = { "HOME=/kiwi/home", "TMPDIR=/kiwi/tmp", "KIWI_TEST_VAR=present", NULL };
    kiwi_sandbox_spec spec = {
        .image = image (), .network = KIWI_NET_NONE, .env = e, .limits = limits, .task_id = "itest",
        .phase = "verify",
    };
    kiwi_sandbox *sb = NULL;
    kiwi_error_t err = NULL;
    int rc = kiwi_sandbox_create (env, &spec, &sb, &err);
    if (rc < 0)
        fail_msg ("create: %s", kiwi_error_msg (err));
    return sb;
}

static kiwi_exec_result
run (kiwi_sandbox *sb, const char *script, int64_t timeout_ms)
{
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = timeout_ms, .output_cap = 4096 };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_exec (sb, &x, &r, &err) < 0)
        fail_msg ("exec `%s`: %s", script, kiwi_error_msg (err));
    return r;
}

typedef struct {
    size_t chunks, bytes;
} streamed;

static void
on_output (int stream, const char *data, size_t len, void *ud)
{
    streamed *s = ud;
    s->chunks++;
    s->bytes += len;
}

static void
test_exec_output_and_status (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        kiwi_sandbox *sb = make (env, (kiwi_sandbox_limits) { 0 });
        kiwi_exec_result r = run (sb, "echo out; echo err >&2; id -u; echo $KIWI_TEST_VAR; pwd; exit 3", 60000);
        assert_int_equal (r.exit_code, 3);
        assert_false (r.timed_out);
        assert_non_null (strstr (r.output, "out\n"));
        assert_non_null (strstr (r.output, "err\n"));
        assert_non_null (strstr (r.output, "1000\n"));
        assert_non_null (strstr (r.output, "present\n"));
        assert_non_null (strstr (r.output, "/kiwi/src\n"));
        kiwi_exec_result_clear (&r);

        /* output is bounded: the tail is kept and the rest counted; the live
         * stream sees everything */
        const char *argv[] = { "/bin/sh", "-c", "seq 1 100000", NULL };
        streamed s = { 0 };
        kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000, .output_cap = 1000, .on_output = on_output,
                             .userdata = &s };
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_sandbox_exec (sb, &x, &r, &err), 0);
        assert_int_equal (strlen (r.output), 1000);
        assert_non_null (strstr (r.output, "99999\n100000\n"));
        assert_int_equal (r.output_dropped + 1000, s.bytes);
        assert_int_equal (s.bytes, 588895);
        kiwi_exec_result_clear (&r);

        /* no network: only lo */
        r = run (sb, "cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '", 60000);
        assert_string_equal (r.output, "lo\n");
        kiwi_exec_result_clear (&r);

        kiwi_sandbox_info info;
        assert_int_equal (kiwi_sandbox_inspect (sb, &info, &err), 0);
        assert_true (info.running);
        assert_string_equal (info.network_mode, "none");
        assert_string_equal (info.runtime, i == 0 ? "runc" : "runsc");
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
}

static void
test_deadline_kills_and_is_named (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        kiwi_sandbox *sb = make (env, (kiwi_sandbox_limits) { 0 });
        kiwi_exec_result r = run (sb, "echo started; sleep infinity", 2000);
        assert_true (r.timed_out);
        assert_int_equal (r.exit_code, -1);
        assert_non_null (strstr (r.output, "started"));
        kiwi_exec_result_clear (&r);
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
}

static void
test_disk_ceiling (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        kiwi_sandbox *sb = make (env, (kiwi_sandbox_limits) { .disk_mb = 64 });
        kiwi_exec_result r = run (sb, "dd if=/dev/zero of=/kiwi/src/fill bs=1M count=200 2>&1; echo rc=$?", 120000);
        assert_non_null (strstr (r.output, "No space left on device"));
        assert_non_null (strstr (r.output, "rc=1"));
        kiwi_exec_result_clear (&r);
        /* the root filesystem is read-only: no way around the ceiling */
        r = run (sb, "touch /usr/x /x 2>/dev/null; ls /usr/x /x 2>&1; grep ' / ' /proc/mounts | cut -d' ' -f4",
                 60000);
        assert_non_null (strstr (r.output, "ls: cannot access '/usr/x'"));
        assert_non_null (strstr (r.output, "ls: cannot access '/x'"));
        assert_non_null (strstr (r.output, "\nro,"));
        kiwi_exec_result_clear (&r);
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
}

static void
test_pids_and_memory_limits (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        kiwi_sandbox *sb = make (env, (kiwi_sandbox_limits) { .pids = 64, .memory_mb = 128 });
        /* a memory hog is killed by the ceiling, and that is named */
        kiwi_exec_result r = run (sb, "head -c 400m /dev/zero | tail > /dev/null", 120000);
        assert_true (r.oom_killed);
        assert_false (r.timed_out);
        if (r.sandbox_lost) {
            /* gVisor: the whole sandbox goes; the reason is named */
            assert_non_null (strstr (r.lost_reason, "memory ceiling"));
            kiwi_exec_result_clear (&r);
            kiwi_error_t err = NULL;
            kiwi_sandbox_destroy (sb, &err);
            sb = make (env, (kiwi_sandbox_limits) { .pids = 64, .memory_mb = 128 });
        } else {
            assert_int_equal (r.exit_code, 137);
            kiwi_exec_result_clear (&r);
        }
        /* processes stop at the limit; the sandbox survives and still runs
         * commands (counting with shell builtins: no fork needed) */
        r = run (sb,
                 "sh -c 'for i in $(seq 1 300); do sleep 30 & done' 2>/dev/null; "
                 "set -- /proc/[0-9]*; echo procs=$#",
                 60000);
        const char *p = strstr (r.output, "procs=");
        assert_non_null (p);
        int procs = atoi (p + 6);
        assert_true (procs > 10 && procs <= 64);
        kiwi_exec_result_clear (&r);
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
}

static void
test_destroy_removes_everything_and_reap (void **state)
{
    kiwi_sandbox_env *env = kiwi_test_sandbox_env ("docker", "itest");
    kiwi_sandbox *sb = make (env, (kiwi_sandbox_limits) { 0 });
    char name[256];
    snprintf (name, sizeof name, "%s", kiwi_sandbox_id (sb));
    char dir[512];
    snprintf (dir, sizeof dir, "%s/sandboxes/%s", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"), name);
    struct stat st;
    assert_int_equal (stat (dir, &st), 0);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
    assert_int_not_equal (stat (dir, &st), 0);

    /* a sandbox "left by a crashed worker": create, forget, reap */
    sb = make (env, (kiwi_sandbox_limits) { 0 });
    snprintf (dir, sizeof dir, "%s/sandboxes/%s", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
              kiwi_sandbox_id (sb));
    int removed = 0;
    assert_int_equal (kiwi_sandbox_reap (env, &removed, &err), 0);
    assert_true (removed >= 2); /* the container and its disk */
    assert_int_not_equal (stat (dir, &st), 0);
    /* the handle now points at nothing: destroy still frees it, quietly */
    kiwi_sandbox_destroy (sb, &err);
    kiwi_error_free (&err);
    kiwi_sandbox_env_close (env);
}

static void
test_run_once_output_timeout_and_files (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        const char *e[] = { "HOME=/kiwi/home", NULL };
        kiwi_sandbox_spec spec = { .image = image (), .network = KIWI_NET_NONE, .env = e, .task_id = "itest",
                                   .phase = "verify" };
        /* a file put before the command starts is there when it runs */
        static const char tar_hdr_name[] = "hello.txt";
        char tar[2048] = { 0 };
        memcpy (tar, tar_hdr_name, sizeof tar_hdr_name);
        memcpy (tar + 100, "0000644", 7);
        memcpy (tar + 108, "0001750", 7);
        memcpy (tar + 116, "0001750", 7);
        memcpy (tar + 124, "00000000006", 11);
        memcpy (tar + 136, "00000000000", 11);
        tar[156] = '0';
        memcpy (tar + 257, "ustar", 6);
        memcpy (tar + 263, "00", 2);
        memset (tar + 148, ' ', 8);
        unsigned sum = 0;
        for (int k = 0; k < 512; k++)
            sum += (unsigned char) tar[k];
        snprintf (tar + 148, 8, "%06o", sum);
        memcpy (tar + 512, "hello\n", 6);
        kiwi_sandbox_put put = { "/kiwi/src", tar, sizeof tar };
        const char *argv[] = { "/bin/sh", "-c", "cat hello.txt; echo err >&2; cut -d: -f1 /proc/net/dev | tail -n +3 "
                               "| tr -d ' '; exit 4", NULL };
        kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000 };
        kiwi_exec_result r;
        kiwi_error_t err = NULL;
        if (kiwi_sandbox_run_once (env, &spec, &put, 1, &x, &r, &err) < 0)
            fail_msg ("%s: run_once: %s", drivers[i], kiwi_error_msg (err));
        assert_int_equal (r.exit_code, 4);
        /* stdout and stderr are separate pipes: their relative order is not
         * kept, the content is */
        assert_int_equal (strlen (r.output), strlen ("hello\nerr\nlo\n"));
        assert_non_null (strstr (r.output, "hello\n"));
        assert_non_null (strstr (r.output, "err\n"));
        assert_non_null (strstr (r.output, "lo\n"));
        kiwi_exec_result_clear (&r);
        const char *slow[] = { "sleep", "infinity", NULL };
        x.argv = slow;
        x.timeout_ms = 2000;
        assert_int_equal (kiwi_sandbox_run_once (env, &spec, NULL, 0, &x, &r, &err), 0);
        assert_true (r.timed_out);
        assert_int_equal (r.exit_code, -1);
        kiwi_exec_result_clear (&r);
        kiwi_sandbox_env_close (env);
    }
}

/* Counts the bytes of a copy out. */
static int
count_sink (const char *data, size_t len, void *userdata)
{
    (void) data;
    *(size_t *) userdata += len;
    return 0;
}

/* A sandbox with sealed files (Phase B's verify): under gVisor it runs
 * under runsc-verify, which caches /kiwi. Docker's inspect names the
 * runtime; a tree put after the start, as into a verify sandbox made ahead,
 * is all there for the first command, files and directories; the disk
 * ceiling still holds; and once a command ran nothing is put in or copied
 * out, since the host's view and the sandbox's cached one may differ. */
static void
test_sealed_files (void **state)
{
    const char *runtimes[] = { "runc", "runsc-verify" };
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
        const char *e[] = { "HOME=/kiwi/home", "TMPDIR=/kiwi/tmp", NULL };
        kiwi_sandbox_spec spec = { .image = image (), .network = KIWI_NET_NONE, .env = e, .task_id = "itest",
                                   .phase = "verify", .limits = { .disk_mb = 64 }, .files_sealed = true };
        kiwi_sandbox *sb = NULL;
        kiwi_error_t err = NULL;
        if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0)
            fail_msg ("%s: create: %s", drivers[i], kiwi_error_msg (err));
        assert_true (kiwi_sandbox_seals_files (env) == (i == 1));
        kiwi_sandbox_info info;
        assert_int_equal (kiwi_sandbox_inspect (sb, &info, &err), 0);
        assert_string_equal (info.runtime, runtimes[i]);
        assert_string_equal (info.network_mode, "none");

        /* the tree after the start; a copy out before any command is fine */
        kiwi_buf tar = KIWI_BUF_INIT;
        kiwi_archive_opts o;
        kiwi_archive_opts_init (&o);
        assert_int_equal (kiwi_archive_add_file (&tar, "package.json", "{}\n", 3, 0644, &o, &err), 0);
        assert_int_equal (kiwi_archive_add_dir (&tar, "lib/deep", 0755, &o, &err), 0);
        assert_int_equal (kiwi_archive_add_file (&tar, "lib/deep/x.js", "42\n", 3, 0644, &o, &err), 0);
        assert_int_equal (kiwi_archive_finish (&tar, &err), 0);
        if (kiwi_sandbox_put_archive (sb, KIWI_SANDBOX_SRC, tar.data, tar.len, &err) < 0)
            fail_msg ("%s: put: %s", drivers[i], kiwi_error_msg (err));
        size_t got = 0;
        assert_int_equal (kiwi_sandbox_get_archive (sb, KIWI_SANDBOX_SRC "/package.json", count_sink, &got, &err), 0);
        assert_true (got > 0);

        kiwi_exec_result r = run (sb,
                                  "pwd; readlink /proc/1/cwd; ls -A; cat package.json lib/deep/x.js; "
                                  "find . | sort | tr '\\n' ' '; echo; "
                                  "dd if=/dev/zero of=/kiwi/src/fill bs=1M count=200 2>&1; echo rc=$?; sync",
                                  120000);
        /* PID 1 never looked in /kiwi: it started in / */
        assert_non_null (strstr (r.output, "/kiwi/src\n/\nlib\npackage.json\n{}\n42\n"));
        assert_non_null (strstr (r.output, ". ./lib ./lib/deep ./lib/deep/x.js ./package.json \n"));
        assert_non_null (strstr (r.output, "No space left on device"));
        assert_non_null (strstr (r.output, "rc=1"));
        kiwi_exec_result_clear (&r);

        /* after a command: nothing in, nothing out */
        assert_int_equal (kiwi_sandbox_put_archive (sb, KIWI_SANDBOX_SRC, tar.data, tar.len, &err), -1);
        assert_int_equal (kiwi_error_code (err), KIWI_SBE_INVALID);
        assert_non_null (strstr (kiwi_error_msg (err), "sealed files"));
        kiwi_error_free (&err);
        assert_int_equal (kiwi_sandbox_get_archive (sb, KIWI_SANDBOX_SRC, count_sink, &got, &err), -1);
        assert_int_equal (kiwi_error_code (err), KIWI_SBE_INVALID);
        kiwi_error_free (&err);
        kiwi_buf_free (&tar);
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);

        /* the Implementer's sandbox (not sealed) keeps the flavour's runtime */
        sb = make (env, (kiwi_sandbox_limits) { 0 });
        assert_int_equal (kiwi_sandbox_inspect (sb, &info, &err), 0);
        assert_string_equal (info.runtime, i == 0 ? "runc" : "runsc");
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
}

/* The probe the IPv6 test runs: a server on [::1] that writes what it got
 * to /kiwi/src/v6.txt, a client that sends it a line, then connects to a
 * documentation address (2001:db8::1) and to eth0's link-local neighbour
 * and writes how each failed. No route means no packet leaves. */
static const char v6_probe[] =
    "import socket, threading\n"
    "out = open('/kiwi/src/v6.txt', 'w')\n"
    "try:\n"
    "    srv = socket.socket(socket.AF_INET6)\n"
    "    srv.bind(('::1', 0)); srv.listen(1)\n"
    "    def serve():\n"
    "        c, _ = srv.accept(); out.write('got ' + c.recv(64).decode() + '\\n'); out.flush(); c.close()\n"
    "    t = threading.Thread(target=serve); t.start()\n"
    "    socket.create_connection(('::1', srv.getsockname()[1])).sendall(b'over-v6')\n"
    "    t.join()\n"
    "except OSError as e:\n"
    "    out.write('server ' + str(e.errno) + '\\n')\n"
    "for a in ('2001:db8::1', 'fe80::1%eth0'):\n"
    "    try:\n"
    "        c = socket.socket(socket.AF_INET6); c.settimeout(5); c.connect((a, 9)); out.write('reached ' + a + '\\n')\n"
    "    except OSError as e:\n"
    "        out.write('refused ' + a + '\\n')\n"
    "out.close()\n";

/* Reads the host's file `path` into buf (NUL-terminated); "" when absent. */
static void
read_host_file (const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return;
    size_t n = fread (buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose (f);
}

/* Every IPv6 address and route of the container's kernel namespace, read
 * from the host's /proc, is on lo. */
static void
assert_kernel_ipv6_on_lo_only (kiwi_docker *d, const char *id)
{
    char path[512];
    snprintf (path, sizeof path, "/containers/%s/json", id);
    json_t *doc = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_call (d, "GET", path, NULL, 30000, &doc, NULL, &err) < 0)
        fail_msg ("inspect %s: %s", id, kiwi_error_msg (err));
    json_int_t pid = json_integer_value (json_object_get (json_object_get (doc, "State"), "Pid"));
    json_decref (doc);
    assert_true (pid > 0);
    const char *files[] = { "if_inet6", "ipv6_route" };
    for (size_t f = 0; f < 2; f++) {
        snprintf (path, sizeof path, "/proc/%lld/net/%s", (long long) pid, files[f]);
        char text[8192];
        read_host_file (path, text, sizeof text);
        for (char *line = strtok (text, "\n"); line != NULL; line = strtok (NULL, "\n")) {
            size_t len = strlen (line);
            if (len < 3 || strcmp (line + len - 3, " lo") != 0)
                fail_msg ("%s has an IPv6 entry off the loopback: %s", path, line);
        }
    }
}

/* ::1 works on the loopback of every sandbox with no network (runc and
 * gVisor) and of Phase A's under runc: a server on [::1] gets a client's
 * line, as the sandbox's disk shows on the host. No IPv6 leaves: both
 * outside connects fail in every sandbox, the install network has no IPv6
 * (dockerd's record), and the kernel namespace of each container has IPv6
 * addresses and routes on lo only (the host's /proc). Under runsc-net
 * (Phase A under gVisor) netstack copies the namespace's addresses, where
 * Docker left lo no ::1: there only the "nothing leaves" half is asserted. */
static void
test_ipv6_loopback_only (void **state)
{
    kiwi_docker *d = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_docker_open (kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), &d, &err), 0);
    const char *e[] = { "HOME=/kiwi/home", NULL };
    for (size_t i = 0; i < 2; i++)
        for (int install = 0; install < 2; install++) {
            kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest");
            kiwi_sandbox_spec spec = {
                .image = "kiwi/python:3.13", .network = install ? KIWI_NET_INSTALL : KIWI_NET_NONE, .env = e,
                .task_id = "itest", .phase = install ? "install" : "verify",
            };
            kiwi_sandbox *sb = NULL;
            if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0)
                fail_msg ("%s: create: %s", drivers[i], kiwi_error_msg (err));
            const char *argv[] = { "python3", "-c", v6_probe, NULL };
            kiwi_exec_spec x = { .argv = argv, .timeout_ms = 120000, .output_cap = 4096 };
            kiwi_exec_result r;
            assert_int_equal (kiwi_sandbox_exec (sb, &x, &r, &err), 0);
            assert_int_equal (r.exit_code, 0);
            kiwi_exec_result_clear (&r);

            char path[512], got[1024];
            snprintf (path, sizeof path, "%s/sandboxes/%s/mnt/src/v6.txt",
                      kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"), kiwi_sandbox_id (sb));
            read_host_file (path, got, sizeof got);
            print_message ("%s %s: %s", drivers[i], spec.phase, got);
            bool runsc_net = i == 1 && install;
            if (!runsc_net)
                assert_non_null (strstr (got, "got over-v6\n"));
            assert_non_null (strstr (got, "refused 2001:db8::1\n"));
            assert_non_null (strstr (got, "refused fe80::1%eth0\n"));
            assert_null (strstr (got, "reached"));
            assert_kernel_ipv6_on_lo_only (d, kiwi_sandbox_id (sb));
            assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
            kiwi_sandbox_env_close (env);
        }
    json_t *net = NULL;
    assert_int_equal (kiwi_docker_call (d, "GET", "/networks/" KIWI_INSTALL_NETWORK, NULL, 30000, &net, NULL, &err), 0);
    assert_true (json_is_false (json_object_get (net, "EnableIPv6")));
    json_decref (net);
    kiwi_docker_close (d);
}

/* A sandbox made through one env is handed to another of the same driver
 * (the session's thread makes verify sandboxes through an env of its own):
 * it works through the new env after the first is closed, and is removed
 * through it; across drivers the hand-over is refused. */
static void
test_adopt (void **state)
{
    kiwi_sandbox_env *a = kiwi_test_sandbox_env ("docker", "itest");
    kiwi_sandbox_env *b = kiwi_test_sandbox_env ("docker", "itest");
    kiwi_sandbox_env *g = kiwi_test_sandbox_env ("gvisor", "itest");
    kiwi_sandbox *sb = make (a, (kiwi_sandbox_limits) { 0 });
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_sandbox_adopt (g, sb, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_INVALID);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_sandbox_adopt (b, sb, &err), 0);
    kiwi_sandbox_env_close (a); /* its connection is gone */
    kiwi_exec_result r = run (sb, "echo adopted", 60000);
    assert_string_equal (r.output, "adopted\n");
    kiwi_exec_result_clear (&r);
    char name[256];
    snprintf (name, sizeof name, "%s", kiwi_sandbox_id (sb));
    assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
    char dir[512];
    snprintf (dir, sizeof dir, "%s/sandboxes/%s", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"), name);
    struct stat st;
    assert_int_not_equal (stat (dir, &st), 0);
    kiwi_sandbox_env_close (b);
    kiwi_sandbox_env_close (g);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_exec_output_and_status),
        cmocka_unit_test (test_deadline_kills_and_is_named),
        cmocka_unit_test (test_disk_ceiling),
        cmocka_unit_test (test_pids_and_memory_limits),
        cmocka_unit_test (test_destroy_removes_everything_and_reap),
        cmocka_unit_test (test_run_once_output_timeout_and_files),
        cmocka_unit_test (test_sealed_files),
        cmocka_unit_test (test_adopt),
        cmocka_unit_test (test_ipv6_loopback_only),
    };
    return kiwi_run_group ("sandbox_driver", tests, NULL, NULL);
}
