/*
 * test_firecracker_api.c: the firecracker driver's configuration sequence
 * through its own process handling (spawn, API socket, boot sequence, clean-up),
 * against two API servers:
 *
 *  - Firecracker's published API contract: this test binary, started by
 *    the driver in place of `firecracker` (KIWI_FC_BIN), serves the API
 *    socket and checks every request against the definitions of
 *    Firecracker's swagger document (src/firecracker/swagger/firecracker.yaml,
 *    API 1.16: required fields, types, enums, bounds, no unknown fields,
 *    pre-boot order). Its InstanceStart answers with the fault the real
 *    binary gives without /dev/kvm. Always runs.
 *
 *  - The real Firecracker binary (KIWI_TEST_FIRECRACKER, else `firecracker`
 *    in PATH): the whole sequence up to InstanceStart in a mount namespace
 *    without /dev/kvm, which must end in Kiwi's "KVM is not available"
 *    error; with a working /dev/kvm, a kernel that cannot load must not be
 *    blamed on KVM. Skips visibly when no binary is installed (no package
 *    registry reachable from here carries one; KIWI_REQUIRE_FIRECRACKER=1
 *    fails instead): the program then exits 77 and ctest says Skipped.
 *
 * Every path must leave nothing behind: no process, no socket, no drive
 * file, no tap. Needs root (the workspace drive is made with mkfs.ext4 -d
 * and chown; the namespace and the tap need CAP_SYS_ADMIN/CAP_NET_ADMIN):
 * without it the whole program is skipped (exit 77), or fails under
 * KIWI_REQUIRE_SERVICES=1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shell.h"
#include "sandbox/firecracker/firecracker-internal.h"
#include "sandbox/sandbox.h"
#include "common/settings.h"
#include "skip.h"
#include "stack-env.h"

/* The fault the real Firecracker 1.16.1 answers InstanceStart with when
 * /dev/kvm is absent (recorded from the binary, line continuation kept). */
#define REAL_NO_KVM_FAULT                                                                                    \
    "Start microvm error: Kvm error: Error creating KVM object: No such file or directory (os error 2) Make sure " \
    "the user launching the firecracker process is \\\nconfigured on the /dev/kvm file's ACL."

/* ===================================================================== */
/* The contract server                                                    */
/* ===================================================================== */

typedef enum { T_STR, T_INT, T_BOOL, T_OBJ } jtype;

typedef struct {
    const char *name;
    jtype type;
    const char *const *enumv; /* NULL = any */
    long long min, max;       /* integers; min > max = unbounded */
} prop;

typedef struct {
    const char *name;
    const char *const *required;
    const prop *props;
} definition;

/* From firecracker.yaml (swagger 2.0), `definitions:`. */
static const char *const cpu_templates[] = { "C3", "T2", "T2S", "T2CL", "T2A", "V1N1", "None", NULL };
static const char *const huge_pages[] = { "None", "2M", NULL };
static const char *const cache_types[] = { "Unsafe", "Writeback", NULL };
static const char *const io_engines[] = { "Sync", "Async", NULL };
static const char *const action_types[] = { "FlushMetrics", "InstanceStart", "SendCtrlAltDel", NULL };

static const char *const mc_req[] = { "mem_size_mib", "vcpu_count", NULL };
static const prop mc_props[] = { { "cpu_template", T_STR, cpu_templates, 1, 0 },
                                 { "smt", T_BOOL, NULL, 1, 0 },
                                 { "mem_size_mib", T_INT, NULL, 1, 0 },
                                 { "track_dirty_pages", T_BOOL, NULL, 1, 0 },
                                 { "vcpu_count", T_INT, NULL, 1, 32 },
                                 { "huge_pages", T_STR, huge_pages, 1, 0 },
                                 { NULL, 0, NULL, 0, 0 } };
static const char *const bs_req[] = { "kernel_image_path", NULL };
static const prop bs_props[] = { { "boot_args", T_STR, NULL, 1, 0 },
                                 { "initrd_path", T_STR, NULL, 1, 0 },
                                 { "kernel_image_path", T_STR, NULL, 1, 0 },
                                 { NULL, 0, NULL, 0, 0 } };
static const char *const drive_req[] = { "drive_id", "is_root_device", NULL };
static const prop drive_props[] = { { "drive_id", T_STR, NULL, 1, 0 },
                                    { "partuuid", T_STR, NULL, 1, 0 },
                                    { "is_root_device", T_BOOL, NULL, 1, 0 },
                                    { "cache_type", T_STR, cache_types, 1, 0 },
                                    { "is_read_only", T_BOOL, NULL, 1, 0 },
                                    { "path_on_host", T_STR, NULL, 1, 0 },
                                    { "rate_limiter", T_OBJ, NULL, 1, 0 },
                                    { "io_engine", T_STR, io_engines, 1, 0 },
                                    { "socket", T_STR, NULL, 1, 0 },
                                    { NULL, 0, NULL, 0, 0 } };
static const char *const vsock_req[] = { "guest_cid", "uds_path", NULL };
static const prop vsock_props[] = { { "guest_cid", T_INT, NULL, 3, 0xffffffffLL },
                                    { "uds_path", T_STR, NULL, 1, 0 },
                                    { "vsock_id", T_STR, NULL, 1, 0 },
                                    { NULL, 0, NULL, 0, 0 } };
static const char *const net_req[] = { "host_dev_name", "iface_id", NULL };
static const prop net_props[] = { { "guest_mac", T_STR, NULL, 1, 0 },
                                  { "host_dev_name", T_STR, NULL, 1, 0 },
                                  { "iface_id", T_STR, NULL, 1, 0 },
                                  { "mtu", T_INT, NULL, 68, 65535 },
                                  { "rx_rate_limiter", T_OBJ, NULL, 1, 0 },
                                  { "tx_rate_limiter", T_OBJ, NULL, 1, 0 },
                                  { NULL, 0, NULL, 0, 0 } };
static const char *const action_req[] = { "action_type", NULL };
static const prop action_props[] = { { "action_type", T_STR, action_types, 1, 0 }, { NULL, 0, NULL, 0, 0 } };

static const definition d_machine = { "MachineConfiguration", mc_req, mc_props };
static const definition d_boot = { "BootSource", bs_req, bs_props };
static const definition d_drive = { "Drive", drive_req, drive_props };
static const definition d_vsock = { "Vsock", vsock_req, vsock_props };
static const definition d_net = { "NetworkInterface", net_req, net_props };
static const definition d_action = { "InstanceActionInfo", action_req, action_props };

/* Checks `body` against `d`. Returns NULL, or a static reason. */
static const char *
validate (const definition *d, json_t *body, char *why, size_t len)
{
    if (!json_is_object (body))
        return snprintf (why, len, "%s: body is not an object", d->name), why;
    for (size_t i = 0; d->required[i]; i++)
        if (json_object_get (body, d->required[i]) == NULL)
            return snprintf (why, len, "%s: required `%s` missing", d->name, d->required[i]), why;
    const char *key;
    json_t *v;
    json_object_foreach (body, key, v)
    {
        const prop *p = NULL;
        for (size_t i = 0; d->props[i].name; i++)
            if (strcmp (d->props[i].name, key) == 0)
                p = &d->props[i];
        if (p == NULL)
            return snprintf (why, len, "%s: unknown field `%s`", d->name, key), why;
        bool ok = (p->type == T_STR && json_is_string (v)) || (p->type == T_INT && json_is_integer (v))
                  || (p->type == T_BOOL && json_is_boolean (v)) || (p->type == T_OBJ && json_is_object (v));
        if (!ok)
            return snprintf (why, len, "%s: `%s` has the wrong type", d->name, key), why;
        if (p->enumv) {
            bool in = false;
            for (size_t i = 0; p->enumv[i]; i++)
                in = in || strcmp (p->enumv[i], json_string_value (v)) == 0;
            if (!in)
                return snprintf (why, len, "%s: `%s` not in its enum", d->name, key), why;
        }
        if (p->type == T_INT && p->min <= p->max
            && (json_integer_value (v) < p->min || json_integer_value (v) > p->max))
            return snprintf (why, len, "%s: `%s` out of bounds", d->name, key), why;
    }
    return NULL;
}

typedef struct {
    FILE *log;
    bool booted_source;
    bool started;
} server_state;

static void
respond (int c, int status, const char *reason, const char *json)
{
    char head[256];
    size_t n = json ? strlen (json) : 0;
    int h = snprintf (head, sizeof head, "HTTP/1.1 %d %s\r\nServer: Firecracker API\r\nConnection: keep-alive\r\n%s"
                      "Content-Length: %zu\r\n\r\n",
                      status, reason, json ? "Content-Type: application/json\r\n" : "", n);
    if (write (c, head, (size_t) h) < 0 || (n && write (c, json, n) < 0))
        _exit (3);
}

static void
fault (int c, server_state *st, const char *method, const char *path, const char *msg)
{
    fprintf (st->log, "INVALID %s %s: %s\n", method, path, msg);
    fflush (st->log);
    json_t *j = json_pack ("{s:s}", "fault_message", msg);
    char *t = json_dumps (j, JSON_COMPACT);
    respond (c, 400, "Bad Request", t);
    free (t);
    json_decref (j);
}

static bool
is_ext4 (const char *path, long long *size)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat sb;
    fstat (fd, &sb);
    *size = (long long) sb.st_size;
    unsigned char m[2] = { 0 };
    bool ok = pread (fd, m, 2, 1080) == 2 && m[0] == 0x53 && m[1] == 0xef;
    close (fd);
    return ok;
}

static void
handle (int c, server_state *st, const char *method, const char *path, const char *body)
{
    json_error_t je;
    json_t *j = body && *body ? json_loads (body, 0, &je) : NULL;
    char why[256];
    const char *bad = NULL;
    const definition *d = NULL;
    if (strcmp (method, "GET") == 0 && strcmp (path, "/") == 0) {
        fprintf (st->log, "OK GET /\n");
        respond (c, 200, "OK",
                 st->started ? "{\"id\":\"t\",\"state\":\"Running\",\"vmm_version\":\"1.16.1\",\"app_name\":\"Firecracker\"}"
                             : "{\"id\":\"t\",\"state\":\"Not started\",\"vmm_version\":\"1.16.1\",\"app_name\":\"Firecracker\"}");
        json_decref (j);
        fflush (st->log);
        return;
    }
    if (strcmp (method, "PUT") != 0)
        bad = "only PUT is used before boot";
    else if (strcmp (path, "/machine-config") == 0)
        d = &d_machine;
    else if (strcmp (path, "/boot-source") == 0)
        d = &d_boot;
    else if (strncmp (path, "/drives/", 8) == 0)
        d = &d_drive;
    else if (strcmp (path, "/vsock") == 0)
        d = &d_vsock;
    else if (strncmp (path, "/network-interfaces/", 20) == 0)
        d = &d_net;
    else if (strcmp (path, "/actions") == 0)
        d = &d_action;
    else
        bad = "no such path in the API";
    if (bad == NULL && st->started)
        bad = "the microVM is already running (pre-boot only)";
    if (bad == NULL)
        bad = validate (d, j, why, sizeof why);
    /* path parameters must name the body's id, as Firecracker checks */
    if (bad == NULL && d == &d_drive && strcmp (path + 8, json_string_value (json_object_get (j, "drive_id"))) != 0)
        bad = "The id from the path does not match the id from the body!";
    if (bad == NULL && d == &d_net
        && strcmp (path + 20, json_string_value (json_object_get (j, "iface_id"))) != 0)
        bad = "The id from the path does not match the id from the body!";
    if (bad != NULL) {
        fault (c, st, method, path, bad);
        json_decref (j);
        return;
    }
    char extra[256] = "";
    if (d == &d_drive) {
        long long size = 0;
        const char *p = json_string_value (json_object_get (j, "path_on_host"));
        bool ext4 = p && is_ext4 (p, &size);
        snprintf (extra, sizeof extra, " ro=%d root=%d size=%lld ext4=%d", json_is_true (json_object_get (j, "is_read_only")),
                  json_is_true (json_object_get (j, "is_root_device")), size, ext4);
    }
    if (d == &d_boot)
        st->booted_source = true;
    char *compact = json_dumps (j, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf (st->log, "OK %s %s %s%s\n", method, path, compact, extra);
    fflush (st->log);
    free (compact);
    if (d == &d_action && strcmp (json_string_value (json_object_get (j, "action_type")), "InstanceStart") == 0) {
        const char *how = getenv ("KIWI_TEST_CONTRACT_START");
        if (!st->booted_source) {
            fault (c, st, method, path, "Start microvm error: Missing kernel configuration.");
        } else if (how && strcmp (how, "dies") == 0) {
            /* started, then the guest cannot run: what nested KVM does
             * to some kernels */
            respond (c, 204, "No Content", NULL);
            printf ("[t:fc_vcpu 0] Received KVM_EXIT_INTERNAL_ERROR signal\n[t:main] Firecracker exiting with error. "
                    "exit_code=1\n");
            fflush (stdout);
            usleep (100000);
            _exit (1);
        } else if (how && strcmp (how, "silent") == 0) {
            respond (c, 204, "No Content", NULL); /* runs, but no agent ever answers */
            st->started = true;
        } else {
            json_t *f = json_pack ("{s:s}", "fault_message", REAL_NO_KVM_FAULT);
            char *t = json_dumps (f, JSON_COMPACT);
            respond (c, 400, "Bad Request", t);
            free (t);
            json_decref (f);
        }
    } else
        respond (c, 204, "No Content", NULL);
    json_decref (j);
}

/* HTTP/1.1 with keep-alive, just enough for libcurl's requests. */
static void
serve_connection (int c, server_state *st)
{
    char buf[65536];
    size_t have = 0;
    for (;;) {
        char *end = have ? memmem (buf, have, "\r\n\r\n", 4) : NULL;
        if (end == NULL) {
            ssize_t r = read (c, buf + have, sizeof buf - 1 - have);
            if (r <= 0)
                return;
            have += (size_t) r;
            continue;
        }
        size_t head_len = (size_t) (end - buf) + 4;
        char method[16] = "", path[512] = "";
        sscanf (buf, "%15s %511s", method, path);
        size_t clen = 0;
        for (char *h = buf; h < end; h = strstr (h, "\r\n") + 2) {
            if (strncasecmp (h, "Content-Length:", 15) == 0)
                clen = strtoul (h + 15, NULL, 10);
            if (strstr (h, "\r\n") == NULL)
                break;
        }
        while (have < head_len + clen) {
            ssize_t r = read (c, buf + have, sizeof buf - 1 - have);
            if (r <= 0)
                return;
            have += (size_t) r;
        }
        char body[32768];
        snprintf (body, sizeof body, "%.*s", (int) clen, buf + head_len);
        handle (c, st, method, path, body);
        memmove (buf, buf + head_len + clen, have - head_len - clen);
        have -= head_len + clen;
    }
}

/* main() of this binary started as `firecracker --api-sock PATH --id ID`. */
static int
contract_server (int argc, char **argv)
{
    const char *sock = NULL, *id = NULL;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp (argv[i], "--api-sock") == 0)
            sock = argv[i + 1];
        if (strcmp (argv[i], "--id") == 0)
            id = argv[i + 1];
    }
    const char *logp = getenv ("KIWI_TEST_CONTRACT_LOG");
    server_state st = { .log = logp ? fopen (logp, "a") : stderr };
    if (st.log == NULL || sock == NULL)
        return 2;
    fprintf (st.log, "PID %d ID %s\n", (int) getpid (), id ? id : "-");
    fflush (st.log);
    int l = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf (a.sun_path, sizeof a.sun_path, "%s", sock);
    if (bind (l, (struct sockaddr *) &a, sizeof a) < 0 || listen (l, 8) < 0)
        return 3;
    for (;;) {
        int c = accept (l, NULL, NULL);
        if (c < 0)
            continue;
        serve_connection (c, &st);
        close (c);
    }
}

/* ===================================================================== */
/* The tests                                                              */
/* ===================================================================== */

static int64_t
kiwi_fcp_now_ms_for_tests (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
    char root[64];
    char state[128];
    char log[128];
} fixture;

/* A kernel, an image directory with kiwi/base:bookworm's (empty) root
 * filesystem, a state directory, the settings pointing at them. */
static void
fixture_make (fixture *f, const char *bin)
{
    snprintf (f->root, sizeof f->root, "/tmp/kiwi-fcapi-XXXXXX");
    assert_non_null (mkdtemp (f->root));
    snprintf (f->state, sizeof f->state, "%s/state", f->root);
    snprintf (f->log, sizeof f->log, "%s/contract.log", f->root);
    kiwi_test_must ("mkdir -p %s/images %s && printf 'not a kernel' > %s/vmlinux && truncate -s 8M "
                    "%s/images/kiwi+base@bookworm.ext4",
                    f->root, f->state, f->root, f->root);
    char p[256];
    snprintf (p, sizeof p, "%s/vmlinux", f->root);
    setenv ("KIWI_FC_KERNEL", p, 1);
    snprintf (p, sizeof p, "%s/images", f->root);
    setenv ("KIWI_FC_IMAGES", p, 1);
    setenv ("KIWI_FC_BIN", bin, 1);
    setenv ("KIWI_FC_SKIP_KVM_CHECK", "1", 1);
    setenv ("KIWI_TEST_CONTRACT_LOG", f->log, 1);
    unsetenv ("KIWI_FC_INSTALL_BRIDGE");
}

static void
fixture_clear (fixture *f)
{
    kiwi_test_must ("rm -rf %s", f->root);
}

/* Nothing of any sandbox left in the state directory. */
static void
assert_no_leftovers (const fixture *f)
{
    char base[256];
    snprintf (base, sizeof base, "%s/firecracker", f->state);
    DIR *d = opendir (base);
    assert_non_null (d);
    struct dirent *e;
    while ((e = readdir (d)) != NULL)
        if (strncmp (e->d_name, "kiwi-fc-", 8) == 0)
            fail_msg ("left behind: %s/%s", base, e->d_name);
    closedir (d);
}

static char *
slurp (const char *path)
{
    FILE *fp = fopen (path, "r");
    if (fp == NULL)
        return strdup ("");
    char *buf = calloc (1, 1 << 20);
    size_t n = fread (buf, 1, (1 << 20) - 1, fp);
    buf[n] = '\0';
    fclose (fp);
    return buf;
}

/* Opens the driver as kiwi-worker does: its firecracker.* settings loaded
 * with the rest (here from the test's environment, which the fixtures set)
 * and handed over in the config. */
static int
open_driver (const char *state, kiwi_sandbox_env **env, kiwi_error_t *err)
{
    extern char **environ;
    kiwi_settings set;
    memset (&set, 0, sizeof set);
    if (kiwi_settings_load (&set, KIWI_PROGRAM_WORKER, NULL, (const char *const *) environ, 0, err) < 0)
        return -1;
    kiwi_sandbox_config cfg = { .state_dir = state, .worker_id = "w1", .firecracker = &set.fc };
    int rc = kiwi_sandbox_env_open (&kiwi_sandbox_driver_firecracker, &cfg, env, err);
    kiwi_settings_clear (&set); /* the driver keeps a copy */
    return rc;
}

static int
create_once (const fixture *f, kiwi_net_mode net, kiwi_error_t *err)
{
    kiwi_sandbox_env *env = NULL;
    if (open_driver (f->state, &env, err) < 0)
        return -1;
    const char *senv[] = { "PATH=/usr/bin:/bin", NULL };
    kiwi_sandbox_spec spec = {
        .image = "kiwi/base:bookworm",
        .network = net,
        .env = senv,
        .limits = { .memory_mb = 512, .cpus = 2, .disk_mb = 64, .pids = 128 },
        .phase = "verify",
    };
    kiwi_sandbox *sb = NULL;
    int rc = kiwi_sandbox_create (env, &spec, &sb, err);
    if (rc == 0)
        kiwi_sandbox_destroy (sb, NULL);
    kiwi_sandbox_env_close (env);
    return rc;
}

static void
test_contract_sequence (void **state)
{
    char self[512];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    assert_true (n > 0);
    self[n] = '\0';
    fixture f;
    fixture_make (&f, self);
    kiwi_error_t err = NULL;
    assert_int_equal (create_once (&f, KIWI_NET_NONE, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_UNAVAILABLE);
    const char *m = kiwi_error_msg (err);
    fprintf (stderr, "no-KVM error (contract): %s\n", m);
    assert_non_null (strstr (m, "creating sandbox kiwi-fc-w1-"));
    assert_non_null (strstr (m, "KVM is not available: Firecracker could not start the microVM: Start microvm error: "
                                "Kvm error: Error creating KVM object: No such file or directory (os error 2) Make sure "
                                "the user launching the firecracker process is configured on the /dev/kvm file's ACL. "
                                "(the firecracker driver needs a host with hardware virtualization and read-write "
                                "access to /dev/kvm)"));
    kiwi_error_free (&err);

    char *log = slurp (f.log);
    fprintf (stderr, "%s", log);
    assert_null (strstr (log, "INVALID"));
    /* the whole sequence, in order, each request valid */
    const char *want[] = {
        "OK GET /\n",
        "OK PUT /machine-config {\"mem_size_mib\":512,\"smt\":false,\"vcpu_count\":2}\n",
        "OK PUT /boot-source {\"boot_args\":\"console=ttyS0 reboot=k panic=1 pci=off quiet init=/sbin/kiwi-fc-agent "
        "kiwi.workspace=/dev/vdb kiwi.user=1000:1000 kiwi.port=5252\",\"kernel_image_path\":\"",
        "OK PUT /drives/rootfs {\"drive_id\":\"rootfs\",\"is_read_only\":true,\"is_root_device\":true,",
        "kiwi+base@bookworm.ext4\"} ro=1 root=1 size=8388608 ext4=0\n",
        "OK PUT /drives/workspace {\"drive_id\":\"workspace\",\"is_read_only\":false,\"is_root_device\":false,",
        "/workspace.ext4\"} ro=0 root=0 size=67108864 ext4=1\n",
        "OK PUT /vsock {\"guest_cid\":3,\"uds_path\":\"",
        "/vsock.sock\"}\n",
        "OK PUT /actions {\"action_type\":\"InstanceStart\"}\n",
        NULL,
    };
    const char *at = log;
    for (size_t i = 0; want[i]; i++) {
        const char *hit = strstr (at, want[i]);
        if (hit == NULL)
            fail_msg ("contract log lacks, in order: %s", want[i]);
        at = hit + strlen (want[i]);
    }
    assert_null (strstr (log, "network-interfaces")); /* Phase B: no network device at all */
    int pid = 0;
    assert_int_equal (sscanf (strstr (log, "PID "), "PID %d", &pid), 1);
    assert_int_equal (kill (pid, 0), -1); /* the process is gone */
    free (log);
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

/* A guest that starts and dies, and one that never answers: named, and
 * nothing left behind. */
static void
test_contract_guest_dies_or_stays_silent (void **state)
{
    char self[512];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    self[n] = '\0';
    fixture f;
    fixture_make (&f, self);
    kiwi_error_t err = NULL;
    setenv ("KIWI_TEST_CONTRACT_START", "dies", 1);
    assert_int_equal (create_once (&f, KIWI_NET_NONE, &err), -1);
    fprintf (stderr, "guest died: %s\n", kiwi_error_msg (err));
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_UNAVAILABLE);
    assert_non_null (strstr (kiwi_error_msg (err), "the microVM stopped (firecracker exited with 1): "));
    assert_non_null (strstr (kiwi_error_msg (err), "KVM_EXIT_INTERNAL_ERROR"));
    assert_non_null (strstr (kiwi_error_msg (err), "while the guest was booting"));
    assert_null (strstr (kiwi_error_msg (err), "KVM is not available"));
    kiwi_error_free (&err);
    assert_no_leftovers (&f);

    setenv ("KIWI_TEST_CONTRACT_START", "silent", 1);
    setenv ("KIWI_FC_BOOT_TIMEOUT_MS", "1500", 1);
    int64_t t0 = kiwi_fcp_now_ms_for_tests ();
    assert_int_equal (create_once (&f, KIWI_NET_NONE, &err), -1);
    fprintf (stderr, "guest silent: %s\n", kiwi_error_msg (err));
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_TIMEOUT);
    assert_non_null (strstr (kiwi_error_msg (err), "the guest agent did not answer within 1500 ms"));
    assert_true (kiwi_fcp_now_ms_for_tests () - t0 < 10000);
    kiwi_error_free (&err);
    unsetenv ("KIWI_TEST_CONTRACT_START");
    unsetenv ("KIWI_FC_BOOT_TIMEOUT_MS");
    char *log = slurp (f.log);
    int pid = 0;
    const char *last = log, *p;
    while ((p = strstr (last, "PID ")) != NULL) {
        sscanf (p, "PID %d", &pid);
        last = p + 4;
    }
    assert_int_equal (kill (pid, 0), -1); /* the silent one was killed */
    free (log);
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

static void
test_contract_phase_a_refused_without_bridge (void **state)
{
    char self[512];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    self[n] = '\0';
    fixture f;
    fixture_make (&f, self);
    kiwi_error_t err = NULL;
    assert_int_equal (create_once (&f, KIWI_NET_INSTALL, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_UNAVAILABLE);
    assert_non_null (strstr (kiwi_error_msg (err), "Phase A (install, network on) under firecracker needs the host "
                                                   "set up for it: no tap bridge is configured (set "
                                                   "KIWI_FC_INSTALL_BRIDGE"));
    kiwi_error_free (&err);
    char *log = slurp (f.log);
    assert_string_equal (log, ""); /* Firecracker was never started */
    free (log);
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

static void
test_contract_phase_a_tap_on_bridge (void **state)
{
    char self[512];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    self[n] = '\0';
    fixture f;
    fixture_make (&f, self);
    if (system ("ip link del kiwi-fct0 2>/dev/null; ip link add kiwi-fct0 type bridge 2>/dev/null") != 0) {
        fixture_clear (&f);
        KIWI_SKIP ("cannot create a bridge here (not root?)");
    }
    setenv ("KIWI_FC_INSTALL_BRIDGE", "kiwi-fct0", 1);
    setenv ("KIWI_FC_INSTALL_NET", "172.30.250.0/24", 1);
    kiwi_error_t err = NULL;
    assert_int_equal (create_once (&f, KIWI_NET_INSTALL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KVM is not available"));
    kiwi_error_free (&err);
    char *log = slurp (f.log);
    fprintf (stderr, "%s", log);
    assert_null (strstr (log, "INVALID"));
    const char *net = strstr (log, "OK PUT /network-interfaces/eth0 {\"guest_mac\":\"06:00:ac:1e:fa:02\","
                                   "\"host_dev_name\":\"kfc");
    assert_non_null (net);
    assert_true (net < strstr (log, "OK PUT /actions"));
    assert_non_null (strstr (log, " ip=172.30.250.2::172.30.250.1:255.255.255.0:sandbox:eth0:off:172.30.250.1"));
    char tap[16] = "";
    sscanf (strstr (net, "kfc"), "%11[a-z0-9]", tap);
    free (log);
    char cmd[128];
    snprintf (cmd, sizeof cmd, "ip link show %s >/dev/null 2>&1", tap);
    assert_int_not_equal (system (cmd), 0); /* the tap is gone */
    char lease[256];
    snprintf (lease, sizeof lease, "%s/firecracker/leases/172.30.250.2", f.state);
    assert_int_equal (access (lease, F_OK), -1); /* the address is free again */
    kiwi_test_must ("ip link del kiwi-fct0");
    unsetenv ("KIWI_FC_INSTALL_BRIDGE");
    unsetenv ("KIWI_FC_INSTALL_NET");
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

static void
test_reap_removes_leftovers (void **state)
{
    fixture f;
    fixture_make (&f, "/bin/false");
    char dir[256], other[256];
    snprintf (dir, sizeof dir, "%s/firecracker/kiwi-fc-w1-deadbeef", f.state);
    snprintf (other, sizeof other, "%s/firecracker/kiwi-fc-w2-cafecafe", f.state);
    kiwi_test_must ("mkdir -p %s %s && truncate -s 64M %s/workspace.ext4 && touch %s/vsock.sock && echo kfcnotthere > "
                    "%s/tap",
                    dir, other, dir, dir, dir);
    /* a leftover "firecracker": a process whose command line names the
     * sandbox's API socket */
    pid_t pid = fork ();
    if (pid == 0) {
        char api[300];
        snprintf (api, sizeof api, "%s/api.sock", dir);
        setsid ();
        int dn = open ("/dev/null", O_RDWR);
        dup2 (dn, 0);
        dup2 (dn, 1);
        dup2 (dn, 2);
        execl ("/bin/sh", "sh", "-c", "sleep 60", api, (char *) NULL);
        _exit (127);
    }
    char pidtext[32];
    snprintf (pidtext, sizeof pidtext, "%d", (int) pid);
    kiwi_test_must ("echo %s > %s/pid", pidtext, dir);
    usleep (100000);
    kiwi_sandbox_env *env = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (open_driver (f.state, &env, &err), 0);
    int removed = -1;
    assert_int_equal (kiwi_sandbox_reap (env, &removed, &err), 0);
    assert_int_equal (removed, 1);
    /* killed (and, being our child here, possibly reaped by the driver) */
    waitpid (pid, NULL, WNOHANG);
    assert_int_equal (kill (pid, 0), -1);
    assert_int_equal (errno, ESRCH);
    assert_int_equal (access (dir, F_OK), -1);
    assert_int_equal (access (other, F_OK), 0); /* another worker's */
    kill (-pid, SIGKILL); /* the sleep the shell started */
    kiwi_sandbox_env_close (env);
    fixture_clear (&f);
}

/* ----- the real binary ----- */

static const char *
real_binary (void)
{
    static char found[512];
    const char *e = getenv ("KIWI_TEST_FIRECRACKER");
    if (e && *e)
        return access (e, X_OK) == 0 ? e : NULL;
    const char *path = getenv ("PATH");
    char copy[4096];
    snprintf (copy, sizeof copy, "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r (copy, ":", &save); d; d = strtok_r (NULL, ":", &save)) {
        snprintf (found, sizeof found, "%s/firecracker", d);
        if (access (found, X_OK) == 0)
            return found;
    }
    return NULL;
}

#define NEED_FIRECRACKER(bin)                                                                                \
    do {                                                                                                     \
        if ((bin) == NULL) {                                                                                 \
            const char *req = getenv ("KIWI_REQUIRE_FIRECRACKER");                                           \
            if (req && strcmp (req, "1") == 0)                                                               \
                fail_msg ("no firecracker binary (KIWI_TEST_FIRECRACKER or PATH) and KIWI_REQUIRE_FIRECRACKER=1"); \
            KIWI_SKIP ("no firecracker binary (set KIWI_TEST_FIRECRACKER; no package registry reachable "    \
                       "here carries one, see ops/firecracker/README.md)");                                  \
        }                                                                                                    \
    } while (0)

/* In a child: a mount namespace whose /dev has no kvm, then `fn`; the
 * error message comes back through a pipe. */
static void
without_kvm (const fixture *f, bool skip_check, char *msg, size_t len)
{
    int p[2];
    assert_int_equal (pipe (p), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        close (p[0]);
        const char *fail = NULL;
        if (unshare (CLONE_NEWNS) < 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0
            || mount ("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=0755") < 0)
            fail = "namespace";
        struct {
            const char *n;
            int mi;
        } nodes[] = { { "/dev/null", 3 }, { "/dev/zero", 5 }, { "/dev/random", 8 }, { "/dev/urandom", 9 } };
        for (size_t i = 0; !fail && i < 4; i++)
            if (mknod (nodes[i].n, S_IFCHR | 0666, makedev (1, nodes[i].mi)) < 0)
                fail = "mknod";
        if (skip_check)
            setenv ("KIWI_FC_SKIP_KVM_CHECK", "1", 1);
        else
            unsetenv ("KIWI_FC_SKIP_KVM_CHECK");
        kiwi_error_t err = NULL;
        const char *out = fail ? fail : create_once (f, KIWI_NET_NONE, &err) == 0 ? "created?!" : kiwi_error_msg (err);
        if (write (p[1], out, strlen (out)) < 0)
            _exit (2);
        _exit (0);
    }
    close (p[1]);
    size_t have = 0;
    ssize_t r;
    while ((r = read (p[0], msg + have, len - 1 - have)) > 0)
        have += (size_t) r;
    msg[have] = '\0';
    close (p[0]);
    int st;
    waitpid (pid, &st, 0);
}

static void
test_real_binary_no_kvm (void **state)
{
    const char *bin = real_binary ();
    NEED_FIRECRACKER (bin);
    char ver[256] = "";
    char cmd[600];
    snprintf (cmd, sizeof cmd, "%s --version 2>&1 | head -1", bin);
    FILE *vp = popen (cmd, "r");
    if (vp && fgets (ver, sizeof ver, vp))
        ver[strcspn (ver, "\n")] = '\0';
    if (vp)
        pclose (vp);
    fprintf (stderr, "real binary: %s (%s)\n", bin, ver);
    fixture f;
    fixture_make (&f, bin);
    char msg[2048];
    /* the up-front check */
    without_kvm (&f, false, msg, sizeof msg);
    fprintf (stderr, "no-KVM error (up-front): %s\n", msg);
    assert_string_equal (msg, "opening the firecracker sandbox driver: KVM is not available: cannot open /dev/kvm: No "
                              "such file or directory (the firecracker driver needs a host with hardware "
                              "virtualization and read-write access to /dev/kvm)");
    /* past it: the real API server takes the whole sequence and refuses
     * to start */
    without_kvm (&f, true, msg, sizeof msg);
    fprintf (stderr, "no-KVM error (real binary): %s\n", msg);
    assert_non_null (strstr (msg, "creating sandbox kiwi-fc-w1-"));
    assert_non_null (strstr (msg, ": KVM is not available: Firecracker could not start the microVM: Start microvm "
                                  "error: Kvm error: "));
    assert_non_null (strstr (msg, "(the firecracker driver needs a host with hardware virtualization and read-write "
                                  "access to /dev/kvm)"));
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

static void
test_real_binary_kernel_not_blamed_on_kvm (void **state)
{
    const char *bin = real_binary ();
    NEED_FIRECRACKER (bin);
    kiwi_error_t err = NULL;
    if (kiwi__fc_check_kvm ("/dev/kvm", &err) < 0) {
        char why[1024];
        snprintf (why, sizeof why, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        KIWI_SKIP ("%s", why);
    }
    fixture f;
    fixture_make (&f, bin);
    unsetenv ("KIWI_FC_SKIP_KVM_CHECK");
    assert_int_equal (create_once (&f, KIWI_NET_NONE, &err), -1);
    fprintf (stderr, "bad kernel with KVM present: %s\n", kiwi_error_msg (err));
    assert_null (strstr (kiwi_error_msg (err), "KVM is not available"));
    assert_non_null (strstr (kiwi_error_msg (err), "starting the microVM: Firecracker PUT /actions: HTTP 400"));
    assert_non_null (strstr (kiwi_error_msg (err), "kernel"));
    kiwi_error_free (&err);
    assert_no_leftovers (&f);
    fixture_clear (&f);
}

int
main (int argc, char **argv)
{
    if (argc > 1 && strcmp (argv[1], "--api-sock") == 0)
        return contract_server (argc, argv);
    signal (SIGPIPE, SIG_IGN);
    if (geteuid () != 0) {
        /* root is something the full suite's machine has: required there */
        const char *why = "test_firecracker_api needs root (mkfs.ext4 -d with ownership, namespaces)";
        if (kiwi_test_services_required ()) {
            fprintf (stderr, "FAIL: %s (the full suite never skips)\n", why);
            return 1;
        }
        return kiwi_test_skip_all ("%s", why);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_contract_sequence),
        cmocka_unit_test (test_contract_guest_dies_or_stays_silent),
        cmocka_unit_test (test_contract_phase_a_refused_without_bridge),
        cmocka_unit_test (test_contract_phase_a_tap_on_bridge),
        cmocka_unit_test (test_reap_removes_leftovers),
        cmocka_unit_test (test_real_binary_no_kvm),
        cmocka_unit_test (test_real_binary_kernel_not_blamed_on_kvm),
    };
    return kiwi_run_group ("firecracker_api", tests, NULL, NULL);
}
