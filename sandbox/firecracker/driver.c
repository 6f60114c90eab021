/*
 * driver.c: the firecracker driver, a microVM per sandbox.
 *
 * Each sandbox is one Firecracker process with its own API socket, in a
 * directory of its own under <state>/firecracker/<name>/:
 *
 *   api.sock         Firecracker's HTTP API (fc-api.h)
 *   vsock.sock       the guest's vsock device, host side (hybrid vsock)
 *   workspace.ext4   the writable drive, a sparse ext4 file of
 *                    MaxSandboxDiskMB, mounted by the guest at /kiwi
 *   firecracker.log  Firecracker's output and the guest console
 *   pid, tap, lease  what reap needs to clean up after a crashed worker
 *
 * The microVM is configured through the API (the boot sequence: machine-config,
 * boot-source, the read-only root drive built from the sandbox image by
 * ops/firecracker/mkrootfs.sh, the workspace drive, a network interface
 * only for Phase A on a host set up for it, vsock) and started; commands
 * and files then go through kiwi-fc-agent in the guest (agent/), one
 * vsock connection per request. Files move by archive, as with the other
 * drivers.
 *
 * A deadline kills the microVM (the Firecracker process); every exit path
 * removes the process, the sockets and the drive files.
 *
 * This file is the driver itself: its settings, the KVM check, the boot sequence,
 * and a sandbox's making and removal (directory, workspace drive, Phase A
 * tap and lease, the microVM configured and started, inspect, destroy).
 * The Firecracker process is handled in driver-vm.c, commands
 * and files in driver-exec.c, the agent protocol in
 * driver-conn.c.
 */
#include "sandbox/firecracker/firecracker-internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/kvm.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "common/fs.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/proc.h"
#include "sandbox/firecracker/agent/proto.h"
#include "common/strv.h"

#define FC_UID 1000
#define FC_GID 1000
#define FC_ROOTFS_AGENT "/sbin/kiwi-fc-agent"
#define FC_API_TIMEOUT_MS 10000

/* ----- settings: the firecracker.* rows of the settings table ----- */

/* Copies the driver's settings (common/settings.h), or the table's defaults
 * when none are given. */
int
kiwi__fc_settings_load (kiwi__fc_settings *s, const kiwi_fc_settings *given, kiwi_error_t *err)
{
    kiwi_settings dflt;
    if (given == NULL) {
        if (kiwi_settings_defaults (&dflt, KIWI_PROGRAM_WORKER, err) < 0)
            return -1;
        given = &dflt.fc;
    }
    *s = *given;
    char **strs[] = { &s->bin, &s->kernel, &s->initrd, &s->images, &s->boot_args,
                      &s->kvm_device, &s->install_bridge, &s->install_net, &s->install_dns };
    int rc = 0;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if ((*strs[i] = strdup (*strs[i] ? *strs[i] : "")) == NULL)
            rc = -1;
    if (given == &dflt.fc)
        kiwi_settings_clear (&dflt);
    if (rc < 0) {
        kiwi__fc_settings_clear (s);
        return kiwi_error_make (err, ENOMEM, "settings");
    }
    return 0;
}

void
kiwi__fc_settings_clear (kiwi__fc_settings *s)
{
    char **strs[] = { &s->bin, &s->kernel, &s->initrd, &s->images, &s->boot_args,
                      &s->kvm_device, &s->install_bridge, &s->install_net, &s->install_dns };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free (*strs[i]);
        *strs[i] = NULL;
    }
}

/* ----- KVM ----- */

int
kiwi__fc_check_kvm (const char *device, kiwi_error_t *err)
{
    cleanup_close int fd = open (device, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE, KIWI_FC_NO_KVM ": cannot open %s: %s (%s)", device,
                                     strerror (errno), KIWI_FC_KVM_HINT);
    int v = ioctl (fd, KVM_GET_API_VERSION, 0);
    if (v != KVM_API_VERSION)
        return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE,
                                     KIWI_FC_NO_KVM ": %s answers KVM API version %d, %d expected (%s)", device, v,
                                     KVM_API_VERSION, KIWI_FC_KVM_HINT);
    return 0;
}

/* Whether a Firecracker message blames KVM itself (opening /dev/kvm,
 * creating the VM): "Kvm error: ..." or a /dev/kvm path. A guest that a
 * working KVM could not run (KVM_EXIT_INTERNAL_ERROR) is not that. */
bool
kiwi__fc_blames_kvm (const char *s)
{
    return s != NULL && (strcasestr (s, "kvm error") != NULL || strstr (s, "/dev/kvm") != NULL);
}

/* Firecracker's fault messages can carry line continuations ("\\\n"):
 * one line for ours. */
static void
one_line (char *s)
{
    char *w = s;
    for (char *r = s; s && *r; r++) {
        char c = *r == '\n' || *r == '\r' || *r == '\t' ? ' ' : *r;
        if (c == '\\' && (r[1] == '\n' || r[1] == '\0'))
            continue;
        if (c == ' ' && w > s && w[-1] == ' ')
            continue;
        *w++ = c;
    }
    if (s)
        *w = '\0';
}

/* ----- the boot sequence ----- */

void
kiwi__fc_sizes (const kiwi_sandbox_limits *l, int *vcpus, int64_t *mem_mib)
{
    double cpus = l->cpus > 0 ? l->cpus : 1.0;
    int n = (int) cpus;
    if ((double) n < cpus)
        n++;
    *vcpus = n < 1 ? 1 : n > KIWI_FC_MAX_VCPUS ? KIWI_FC_MAX_VCPUS : n;
    *mem_mib = l->memory_mb > 0 ? l->memory_mb : KIWI_FC_DEFAULT_MEMORY_MB;
}

/* The guest kernel's command line for `vm`. Caller frees. */
static char *
kiwi__fc_boot_args (const kiwi__fc_vm_config *vm)
{
    char *s = NULL;
    char net[256] = "";
    if (vm->tap != NULL)
        snprintf (net, sizeof net, " ip=%s::%s:%s:sandbox:eth0:off:%s", vm->guest_ip, vm->gateway_ip, vm->netmask,
                  vm->dns ? vm->dns : vm->gateway_ip);
    /* pci=off: Firecracker's devices are virtio-mmio; root= and ro are
     * added by Firecracker for the root drive */
    if (asprintf (&s,
                  "console=ttyS0 reboot=k panic=1 pci=off quiet init=" FC_ROOTFS_AGENT
                  " kiwi.workspace=/dev/vdb kiwi.user=%s kiwi.port=%d%s%s%s",
                  vm->user ? vm->user : "1000:1000", KIWI_FCP_PORT, net, vm->extra_args && *vm->extra_args ? " " : "",
                  vm->extra_args ? vm->extra_args : "")
        < 0)
        return NULL;
    return s;
}

static int
add_step (kiwi__fc_boot *p, const char *method, const char *path, json_t *body, kiwi_error_t *err)
{
    if (body == NULL || p->n >= KIWI__FC_MAX_STEPS) {
        json_decref (body);
        return kiwi_error_make (err, ENOMEM, "firecracker boot sequence: %s", path);
    }
    kiwi__fc_step *s = &p->steps[p->n++];
    s->method = method;
    snprintf (s->path, sizeof s->path, "%s", path);
    s->body = body;
    return 0;
}

int
kiwi__fc_boot_build (const kiwi__fc_vm_config *vm, kiwi__fc_boot *p, kiwi_error_t *err)
{
    memset (p, 0, sizeof *p);
    cleanup_free char *args = kiwi__fc_boot_args (vm);
    if (args == NULL)
        return kiwi_error_make (err, ENOMEM, "boot arguments");
    if (add_step (p, "PUT", "/machine-config", kiwi_fc_body_machine_config (vm->vcpus, vm->mem_mib), err) < 0
        || add_step (p, "PUT", "/boot-source", kiwi_fc_body_boot_source (vm->kernel, vm->initrd, args), err) < 0
        || add_step (p, "PUT", "/drives/rootfs", kiwi_fc_body_drive ("rootfs", vm->rootfs, true, true), err) < 0
        || add_step (p, "PUT", "/drives/workspace", kiwi_fc_body_drive ("workspace", vm->workspace, false, false),
                     err)
               < 0)
        goto fail;
    /* The network decision. Without a tap (Phase B, the session) the guest
     * has no network device at all, only its loopback. */
    if (vm->tap != NULL
        && add_step (p, "PUT", "/network-interfaces/eth0",
                     kiwi_fc_body_network_interface ("eth0", vm->tap, vm->guest_mac), err)
               < 0)
        goto fail;
    if (add_step (p, "PUT", "/vsock", kiwi_fc_body_vsock (KIWI_FC_GUEST_CID, vm->vsock_uds), err) < 0
        || add_step (p, "PUT", "/actions", kiwi_fc_body_action ("InstanceStart"), err) < 0)
        goto fail;
    return 0;
fail:
    kiwi__fc_boot_clear (p);
    return -1;
}

void
kiwi__fc_boot_clear (kiwi__fc_boot *p)
{
    for (size_t i = 0; i < p->n; i++)
        json_decref (p->steps[i].body);
    p->n = 0;
}

/* Runs the boot sequence against the API in order; stops at the first failure. A
 * failed InstanceStart that Firecracker blames on KVM becomes an error
 * with code KIWI_SBE_UNAVAILABLE starting with KIWI_FC_NO_KVM. */
static int
kiwi__fc_boot_run (kiwi_fc_api *api, const kiwi__fc_boot *p, kiwi_error_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        const kiwi__fc_step *s = &p->steps[i];
        cleanup_free char *fault = NULL;
        if (kiwi_fc_api_call (api, s->method, s->path, s->body, FC_API_TIMEOUT_MS, NULL, NULL, &fault, err) == 0)
            continue;
        bool start = strcmp (s->path, "/actions") == 0;
        if (start && kiwi__fc_blames_kvm (fault)) {
            one_line (fault);
            kiwi_error_free (err);
            return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE,
                                         KIWI_FC_NO_KVM ": Firecracker could not start the microVM: %s (%s)", fault,
                                         KIWI_FC_KVM_HINT);
        }
        return kiwi_error_wrap (err, start ? "starting the microVM" : "configuring the microVM");
    }
    return 0;
}

char *
kiwi__fc_rootfs_path (const char *images_dir, const char *image)
{
    size_t n = strlen (image);
    char *name = malloc (n + 1);
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = image[i];
        name[i] = c == '/' ? '+' : c == ':' ? '@' : (isalnum ((unsigned char) c) || c == '.' || c == '-' || c == '_') ? c : '_';
    }
    name[n] = '\0';
    char *path = NULL;
    if (asprintf (&path, "%s/%s.ext4", images_dir, name) < 0)
        path = NULL;
    free (name);
    return path;
}

/* ----- the driver ----- */

/* The driver's state (firecracker-internal.h). */
typedef kiwi__fc_priv fc_priv;

static int
release_net (kiwi__fc_sb *s, kiwi_error_t *err)
{
    int rc = 0;
    if (s->tap != NULL) {
        const char *argv[] = { "ip", "link", "del", s->tap, NULL };
        kiwi_proc_result r = { 0 };
        if (kiwi_proc_run (argv, NULL, NULL, 10000, 4096, &r, err) == 0 && r.exit_code != 0
            && (r.output == NULL || strstr (r.output, "Cannot find device") == NULL))
            rc = kiwi_error_make (err, 0, "removing tap %s: %s", s->tap, r.output ? r.output : "");
        kiwi_proc_result_clear (&r);
    }
    if (s->lease != NULL)
        unlink (s->lease);
    return rc;
}

/* Kills the process and removes everything on the host; frees nothing. */
int
kiwi__fc_remove_all (kiwi__fc_sb *s, kiwi_error_t *err)
{
    kiwi__fc_kill_vm (s);
    kiwi_error_t e = NULL;
    int rc = release_net (s, &e);
    if (s->dir != NULL && kiwi__fc_remove_tree (s->dir, e ? NULL : &e) < 0)
        rc = -1;
    if (rc < 0 && err != NULL && *err == NULL)
        *err = kiwi_error_steal (&e);
    kiwi_error_free (&e);
    return rc;
}

static void
sb_free (kiwi__fc_sb *s)
{
    free (s->name);
    free (s->dir);
    free (s->api_sock);
    free (s->vsock_uds);
    free (s->workspace);
    free (s->log);
    free (s->tap);
    free (s->lease);
    free (s->user);
    kiwi_strv_free (&s->env);
    free (s);
}

static int
fc_open (const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err)
{
    fc_priv *p = calloc (1, sizeof *p);
    if (p == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox driver");
    if (kiwi__fc_settings_load (&p->set, cfg ? cfg->firecracker : NULL, err) < 0) {
        free (p);
        return -1;
    }
    const char *state = cfg && cfg->state_dir ? cfg->state_dir : "/var/lib/kiwi";
    if (asprintf (&p->base, "%s/firecracker", state) < 0)
        p->base = NULL;
    p->worker_id = strdup (cfg && cfg->worker_id ? cfg->worker_id : "worker");
    int rc = 0;
    if (p->base == NULL || p->worker_id == NULL)
        rc = kiwi_error_make (err, ENOMEM, "sandbox driver");
    else if (!p->set.skip_kvm_check && kiwi__fc_check_kvm (p->set.kvm_device, err) < 0)
        rc = -1;
    else if (access (p->set.kernel, R_OK) < 0)
        rc = kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE,
                                   "no guest kernel at %s (KIWI_FC_KERNEL; see ops/firecracker/README.md): %s",
                                   p->set.kernel, strerror (errno));
    else if (kiwi_fs_mkdir_p (p->base, 0700) < 0)
        rc = kiwi_error_make (err, errno, "creating %s", p->base);
    if (rc == 0 && strchr (p->set.bin, '/') != NULL && access (p->set.bin, X_OK) < 0)
        rc = kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE, "no firecracker executable at %s (KIWI_FC_BIN): %s",
                                   p->set.bin, strerror (errno));
    if (rc < 0) {
        kiwi__fc_settings_clear (&p->set);
        free (p->base);
        free (p->worker_id);
        free (p);
        return -1;
    }
    *priv = p;
    return 0;
}

static void
fc_close (void *priv)
{
    fc_priv *p = priv;
    if (p == NULL)
        return;
    kiwi__fc_settings_clear (&p->set);
    free (p->base);
    free (p->worker_id);
    free (p);
}

/* The workspace drive: a sparse file of disk_mb formatted as ext4 with
 * src/ home/ tmp/ owned by the sandbox user, without mounting anything on
 * the host (mkfs.ext4 -d copies a seed directory). */
static int
make_workspace (kiwi__fc_sb *s, int64_t disk_mb, kiwi_error_t *err)
{
    if (disk_mb < 16)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "disk ceiling of %lld MB is below the minimum of 16 MB",
                                     (long long) disk_mb);
    cleanup_free char *seed = kiwi__fc_path_in (s->dir, "seed");
    if (seed == NULL || mkdir (seed, 0755) < 0 || chown (seed, FC_UID, FC_GID) < 0)
        return kiwi_error_make (err, errno, "creating the workspace seed in %s", s->dir);
    static const char *const subdirs[] = { "src", "home", "tmp" };
    for (size_t i = 0; i < 3; i++) {
        cleanup_free char *d = kiwi__fc_path_in (seed, subdirs[i]);
        if (d == NULL || mkdir (d, i == 2 ? 01777 : 0755) < 0 || chown (d, FC_UID, FC_GID) < 0
            || (i == 2 && chmod (d, 01777) < 0))
            return kiwi_error_make (err, errno, "creating the workspace seed in %s", s->dir);
    }
    {
        cleanup_close int fd = open (s->workspace, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate (fd, (off_t) disk_mb * 1024 * 1024) < 0)
            return kiwi_error_make_code (err, KIWI_SBE_DISK, "creating the %lld MB workspace %s: %s",
                                         (long long) disk_mb, s->workspace, strerror (errno));
    }
    char opts[64];
    snprintf (opts, sizeof opts, "root_owner=%d:%d", FC_UID, FC_GID);
    const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", opts, "-d", seed,
                           "-L", "kiwi-work", s->workspace, NULL };
    int rc = kiwi_proc_check (mkfs, NULL, NULL, 120000, err);
    kiwi_error_t e = NULL;
    kiwi__fc_remove_tree (seed, &e);
    kiwi_error_free (&e);
    return rc < 0 ? kiwi_error_wrap (err, "formatting the workspace drive") : 0;
}

/* Whether Phase A can have a network here: only on a host set up for it. */
static int
phase_a_ready (const kiwi__fc_settings *set, kiwi_error_t *err)
{
    if (*set->install_bridge == '\0')
        return kiwi_error_make_code (
            err, KIWI_SBE_UNAVAILABLE,
            "Phase A (install, network on) under firecracker needs the host set up for it: no tap bridge is "
            "configured (set KIWI_FC_INSTALL_BRIDGE to a bridge that routes install traffic, see "
            "ops/firecracker/README.md); Phase B and sessions run without any network device");
    return 0;
}

/* Phase A: a tap on the configured bridge and an address from the pool. */
static int
make_net (kiwi__fc_sb *s, char *guest_ip, char *gateway, char *mac, kiwi_error_t *err)
{
    const kiwi__fc_settings *set = &s->p->set;
    unsigned a, b, c, d, bits;
    if (sscanf (set->install_net, "%u.%u.%u.%u/%u", &a, &b, &c, &d, &bits) != 5 || bits != 24 || a > 255 || b > 255
        || c > 255)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "KIWI_FC_INSTALL_NET=`%s`: a.b.c.0/24 expected",
                                     set->install_net);
    cleanup_free char *leases = kiwi__fc_path_in (s->p->base, "leases");
    if (leases == NULL || kiwi_fs_mkdir_p (leases, 0700) < 0)
        return kiwi_error_make (err, errno, "creating the lease directory");
    for (unsigned host = 2; host < 255 && s->lease == NULL; host++) {
        snprintf (guest_ip, 16, "%u.%u.%u.%u", a, b, c, host);
        char *lp = kiwi__fc_path_in (leases, guest_ip);
        if (lp == NULL)
            return kiwi_error_make (err, ENOMEM, "lease");
        int fd = open (lp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            free (lp);
            continue;
        }
        if (write (fd, s->name, strlen (s->name)) < 0)
            kiwi_warn ("lease %s: %s", lp, strerror (errno));
        close (fd);
        s->lease = lp;
        snprintf (mac, 18, "06:00:%02x:%02x:%02x:%02x", a, b, c, host);
    }
    if (s->lease == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE, "no free Phase A address left in %s",
                                     set->install_net);
    snprintf (gateway, 16, "%u.%u.%u.1", a, b, c);
    cleanup_free char *leasefile = kiwi__fc_path_in (s->dir, "lease");
    cleanup_free char *tapfile = kiwi__fc_path_in (s->dir, "tap");
    if (asprintf (&s->tap, "kfc%.8s", s->name + strlen (s->name) - 8) < 0) {
        s->tap = NULL;
        return kiwi_error_make (err, ENOMEM, "tap name");
    }
    kiwi__fc_write_file (leasefile, s->lease);
    kiwi__fc_write_file (tapfile, s->tap);
    const char *add[] = { "ip", "tuntap", "add", "dev", s->tap, "mode", "tap", NULL };
    const char *master[] = { "ip", "link", "set", "dev", s->tap, "master", set->install_bridge, "up", NULL };
    if (kiwi_proc_check (add, NULL, NULL, 10000, err) < 0 || kiwi_proc_check (master, NULL, NULL, 10000, err) < 0)
        return kiwi_error_wrap (err, "creating tap %s on bridge %s", s->tap, set->install_bridge);
    return 0;
}

static int
fc_create (void *priv, const kiwi_sandbox_spec *spec, void **out, kiwi_error_t *err)
{
    fc_priv *p = priv;
    if (spec->image == NULL || *spec->image == '\0')
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "sandbox spec has no image");
    if (spec->network == KIWI_NET_INSTALL && phase_a_ready (&p->set, err) < 0)
        return -1;
    cleanup_free char *rootfs = kiwi__fc_rootfs_path (p->set.images, spec->image);
    if (rootfs == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox");
    if (access (rootfs, R_OK) < 0)
        return kiwi_error_make_code (err, KIWI_SBE_NO_IMAGE,
                                     "no root filesystem for image %s at %s (build it with "
                                     "ops/firecracker/mkrootfs.sh %s)",
                                     spec->image, rootfs, spec->image);
    kiwi__fc_sb *s = calloc (1, sizeof *s);
    if (s == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox");
    s->p = p;
    unsigned rnd = kiwi_sandbox_name_nonce ();
    if (asprintf (&s->name, "kiwi-fc-%s-%08x", p->worker_id, rnd) < 0)
        s->name = NULL;
    if (s->name == NULL || (s->dir = kiwi__fc_path_in (p->base, s->name)) == NULL
        || (s->api_sock = kiwi__fc_path_in (s->dir, "api.sock")) == NULL
        || (s->vsock_uds = kiwi__fc_path_in (s->dir, "vsock.sock")) == NULL
        || (s->workspace = kiwi__fc_path_in (s->dir, "workspace.ext4")) == NULL
        || (s->log = kiwi__fc_path_in (s->dir, "firecracker.log")) == NULL
        || (s->user = strdup (spec->user ? spec->user : "1000:1000")) == NULL) {
        sb_free (s);
        return kiwi_error_make (err, ENOMEM, "sandbox");
    }
    for (size_t i = 0; spec->env && spec->env[i]; i++)
        if (kiwi_strv_add (&s->env, spec->env[i]) < 0) {
            sb_free (s);
            return kiwi_error_make (err, ENOMEM, "sandbox environment");
        }
    s->pids = spec->limits.pids > 0 ? spec->limits.pids : KIWI_FC_DEFAULT_PIDS;
    if (strlen (s->vsock_uds) + 8 >= 108) {
        int rc = kiwi_error_make_code (err, KIWI_SBE_INVALID, "socket paths under %s are too long for unix sockets",
                                       s->dir);
        sb_free (s);
        return rc;
    }
    char guest_ip[16] = "", gateway[16] = "", mac[18] = "";
    kiwi__fc_boot boot = { 0 };
    kiwi_fc_api *api = NULL;
    if (mkdir (s->dir, 0700) < 0) {
        kiwi_error_make (err, errno, "creating %s", s->dir);
        sb_free (s);
        return -1;
    }
    int64_t disk_mb = spec->limits.disk_mb > 0 ? spec->limits.disk_mb : KIWI_FC_DEFAULT_DISK_MB;
    if (make_workspace (s, disk_mb, err) < 0)
        goto fail;
    if (spec->network == KIWI_NET_INSTALL && make_net (s, guest_ip, gateway, mac, err) < 0)
        goto fail;
    kiwi__fc_vm_config vm = {
        .kernel = p->set.kernel,
        .initrd = *p->set.initrd ? p->set.initrd : NULL,
        .rootfs = rootfs,
        .workspace = s->workspace,
        .vsock_uds = s->vsock_uds,
        .tap = s->tap,
        .guest_mac = mac,
        .guest_ip = guest_ip,
        .gateway_ip = gateway,
        .netmask = "255.255.255.0",
        .dns = *p->set.install_dns ? p->set.install_dns : NULL,
        .user = s->user,
        .extra_args = p->set.boot_args,
    };
    kiwi__fc_sizes (&spec->limits, &vm.vcpus, &vm.mem_mib);
    if (kiwi__fc_boot_build (&vm, &boot, err) < 0)
        goto fail;
    if (kiwi__fc_spawn (s, err) < 0 || kiwi_fc_api_open (s->api_sock, &api, err) < 0
        || kiwi__fc_wait_api (s, api, err) < 0)
        goto fail;
    if (kiwi__fc_boot_run (api, &boot, err) < 0) {
        /* the process may have died under the sequence: say so */
        if (!kiwi__fc_vm_alive (s) && kiwi_error_code (*err) != KIWI_SBE_UNAVAILABLE) {
            kiwi_error_free (err);
            kiwi__fc_exited_error (s, "while being configured", err);
        }
        goto fail;
    }
    kiwi__fc_boot_clear (&boot);
    kiwi_fc_api_close (api);
    api = NULL;
    if (kiwi__fc_wait_agent (s, err) < 0)
        goto fail;
    kiwi_debug ("sandbox %s: microVM from %s (%s, %d vCPU, %lld MiB, network %s)", s->name, spec->image,
                spec->phase ? spec->phase : "-", vm.vcpus, (long long) vm.mem_mib,
                s->tap ? s->tap : "none");
    *out = s;
    return 0;
fail:
    kiwi__fc_boot_clear (&boot);
    kiwi_fc_api_close (api);
    kiwi__fc_remove_all (s, NULL);
    kiwi_error_wrap (err, "creating sandbox %s from %s", s->name, spec->image);
    sb_free (s);
    return -1;
}

static const char *
fc_id (void *sb)
{
    return ((kiwi__fc_sb *) sb)->name;
}

static int
fc_inspect (void *sb, kiwi_sandbox_info *info, kiwi_error_t *err)
{
    kiwi__fc_sb *s = sb;
    memset (info, 0, sizeof *info);
    info->running = kiwi__fc_vm_alive (s);
    info->exit_code = info->running ? 0 : WIFEXITED (s->status) ? WEXITSTATUS (s->status) : -1;
    snprintf (info->runtime, sizeof info->runtime, "firecracker");
    snprintf (info->network_mode, sizeof info->network_mode, "%s%s", s->tap ? "tap:" : "none",
              s->tap ? s->tap : "");
    return 0;
}

static int
fc_destroy (void *sb, kiwi_error_t *err)
{
    kiwi__fc_sb *s = sb;
    int rc = kiwi__fc_remove_all (s, err);
    sb_free (s);
    return rc;
}

const kiwi_sandbox_driver kiwi_sandbox_driver_firecracker = {
    .name = "firecracker",
    .description = "microVMs under Firecracker (KVM), a guest agent over vsock",
    .open = fc_open,
    .close = fc_close,
    .create = fc_create,
    .id = fc_id,
    .put_archive = kiwi__fc_op_put_archive,
    .get_archive = kiwi__fc_op_get_archive,
    .exec = kiwi__fc_op_exec,
    .inspect = fc_inspect,
    .destroy = fc_destroy,
    .reap = kiwi__fc_reap,
    .run_once = NULL,
};
