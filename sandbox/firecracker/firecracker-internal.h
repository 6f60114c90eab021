/*
 * firecracker-internal.h: what the files of the firecracker driver
 * share, and the pieces tests reach directly: its settings, the
 * boot sequence (the API calls that make a microVM, as data), the KVM
 * check, the host side of the agent protocol over an already connected
 * descriptor (driver-conn.c), the Firecracker process
 * (driver-vm.c) and the exec and archive operations
 * (driver-exec.c).
 */
#ifndef KIWI_SANDBOX_DRIVER_FIRECRACKER_INTERNAL_H
#define KIWI_SANDBOX_DRIVER_FIRECRACKER_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/firecracker/fc-api.h"
#include "sandbox/sandbox.h"
#include "common/settings.h"
#include "common/strv.h"

/* Settings of the driver: the firecracker.* rows of the settings table
 * (common/settings.h), loaded by kiwi-worker with the rest and given in
 * kiwi_sandbox_config.firecracker. */
typedef kiwi_fc_settings kiwi__fc_settings;

/* A copy of `given`, or of the table's defaults when it is NULL. */
int kiwi__fc_settings_load (kiwi__fc_settings *s, const kiwi_fc_settings *given, kiwi_error_t *err);
void kiwi__fc_settings_clear (kiwi__fc_settings *s);

/* The words every error about a missing KVM starts with. */
#define KIWI_FC_NO_KVM "KVM is not available"
#define KIWI_FC_KVM_HINT                                                                                     \
    "the firecracker driver needs a host with hardware virtualization and read-write access to /dev/kvm"

/* Checks that `device` is a usable KVM device (opens it, asks its API
 * version). Returns < 0 with code KIWI_SBE_UNAVAILABLE and a message
 * starting with KIWI_FC_NO_KVM otherwise. */
int kiwi__fc_check_kvm (const char *device, kiwi_error_t *err);

/* Limits and defaults. */
#define KIWI_FC_DEFAULT_MEMORY_MB 2048
#define KIWI_FC_DEFAULT_DISK_MB 2048
#define KIWI_FC_DEFAULT_PIDS 512
#define KIWI_FC_MAX_VCPUS 32
#define KIWI_FC_EXEC_GRACE_MS 3000 /* host deadline beyond the agent's own */
#define KIWI_FC_GUEST_CID 3

/* What one microVM is made of, as the boot sequence needs it. Strings borrowed. */
typedef struct kiwi__fc_vm_config {
    const char *kernel;
    const char *initrd;       /* NULL = none */
    const char *rootfs;       /* read-only root drive */
    const char *workspace;    /* writable drive, mounted at /kiwi */
    const char *vsock_uds;
    const char *tap;          /* NULL = no network interface at all */
    const char *guest_mac;
    const char *guest_ip;     /* with tap: "a.b.c.d" */
    const char *gateway_ip;
    const char *netmask;
    const char *dns;
    const char *user;         /* "uid:gid" for the agent */
    const char *extra_args;   /* appended to the boot arguments, may be NULL */
    int vcpus;
    int64_t mem_mib;
} kiwi__fc_vm_config;

/* One API call of the boot sequence. */
typedef struct kiwi__fc_step {
    const char *method;
    char path[64];
    json_t *body; /* owned by the boot sequence */
} kiwi__fc_step;

#define KIWI__FC_MAX_STEPS 8
typedef struct kiwi__fc_boot {
    kiwi__fc_step steps[KIWI__FC_MAX_STEPS];
    size_t n;
} kiwi__fc_boot;

/* vCPUs and memory for `limits` (zero = defaults; cpus rounded up, 1-32). */
void kiwi__fc_sizes (const kiwi_sandbox_limits *limits, int *vcpus, int64_t *mem_mib);

/* Builds the whole configuration sequence, ending with InstanceStart:
 * machine-config, boot-source, drives/rootfs, drives/workspace,
 * network-interfaces/eth0 only with a tap, vsock, actions. The one place a
 * microVM's devices are decided. Returns < 0 on allocation failure. */
int kiwi__fc_boot_build (const kiwi__fc_vm_config *vm, kiwi__fc_boot *boot, kiwi_error_t *err);
void kiwi__fc_boot_clear (kiwi__fc_boot *boot);

/* The root filesystem image for an image reference: <images>/<ref> with
 * '/' as '+', ':' as '@' and anything outside [A-Za-z0-9._-] as '_', plus
 * ".ext4". Caller frees. ops/firecracker/mkrootfs.sh names files the same
 * way. */
char *kiwi__fc_rootfs_path (const char *images_dir, const char *image);

/* The sandbox's environment with a command's own on top: entries of
 * `extra` replace those of `base` with the same key (as Docker's exec
 * does). Appends to `out`; < 0 on allocation failure. */
int kiwi__fc_merge_env (const kiwi_strv *base, const char *const *extra, kiwi_strv *out);

/* ----- host side of the agent protocol (driver-conn.c) ----- */

/* Connects to Firecracker's vsock unix socket and asks for the guest's
 * `port` ("CONNECT <port>\n", answered "OK <n>\n"). */
int kiwi__fc_vsock_connect (const char *uds_path, unsigned port, int64_t deadline_ms, int *out, kiwi_error_t *err);

/* Asks the agent for its protocol version. */
int kiwi__fc_hello (int fd, int64_t deadline_ms, kiwi_error_t *err);

/* Called about every second while waiting for the agent: returns false when
 * the microVM is gone (the reason written to `why`). */
typedef bool (*kiwi__fc_alive_fn) (void *userdata, char *why, size_t whylen);

typedef struct kiwi__fc_exec_req {
    const char *const *argv;
    const char *const *env; /* the whole environment of the command */
    const char *workdir;
    const char *user;
    int64_t timeout_ms;
    int64_t nproc;
} kiwi__fc_exec_req;

/* Runs a command through the agent. Output goes to x->on_output and a tail
 * of x->output_cap bytes into res. On the deadline (the agent's, or the
 * host's KIWI_FC_EXEC_GRACE_MS later) res->timed_out is set: the caller
 * kills the microVM. A connection that ends without an exit status while
 * `alive` says the microVM is gone sets res->sandbox_lost. Returns < 0 for
 * failures that are not a command's result (the agent refused the request,
 * the connection broke while the microVM lives). */
int kiwi__fc_exec (int fd, const kiwi__fc_exec_req *req, const kiwi_exec_spec *x, kiwi__fc_alive_fn alive,
                   void *alive_ud, kiwi_exec_result *res, kiwi_error_t *err);

/* Sends a tar stream to unpack at `dir` as `user` (NULL = the agent's
 * default). */
int kiwi__fc_put (int fd, const char *dir, const char *user, const void *tar, size_t len, int64_t deadline_ms,
                  kiwi_error_t *err);

/* Streams `path` out as tar to sink(1, ...). */
int kiwi__fc_get (int fd, const char *path, kiwi_archive_sink sink, void *userdata, int64_t deadline_ms,
                  kiwi_error_t *err);

/* ----- the driver's state, shared by its files ----- */

/* One open driver (driver.c). Settings and strings owned. */
typedef struct kiwi__fc_priv {
    kiwi__fc_settings set;
    char *base;      /* <state>/firecracker */
    char *worker_id;
} kiwi__fc_priv;

/* One sandbox: a Firecracker process and its directory under p->base.
 * Strings and env owned; p borrowed from the driver. */
typedef struct kiwi__fc_sb {
    kiwi__fc_priv *p;
    char *name;
    char *dir;
    char *api_sock;
    char *vsock_uds;
    char *workspace;
    char *log;
    char *tap;       /* NULL without network */
    char *lease;     /* lease file of the guest's address, or NULL */
    char *user;
    kiwi_strv env;
    int64_t pids;
    pid_t pid;       /* the Firecracker process; 0 once reaped */
    int status;      /* its wait status once reaped */
    bool killed;     /* by Kiwi (deadline) */
} kiwi__fc_sb;

/* Whether a Firecracker message blames KVM itself (opening /dev/kvm,
 * creating the VM) rather than the guest (driver.c). */
bool kiwi__fc_blames_kvm (const char *s);

/* Kills the process and removes everything on the host: tap, lease, the
 * sandbox directory. Frees nothing; err may be NULL (driver.c). */
int kiwi__fc_remove_all (kiwi__fc_sb *s, kiwi_error_t *err);

/* ----- the Firecracker process on the host (driver-vm.c) ----- */

/* "<dir>/<file>", or NULL out of memory. Caller frees. */
char *kiwi__fc_path_in (const char *dir, const char *file);

/* Writes `text` to a new 0600 file at path. < 0 with errno on failure. */
int kiwi__fc_write_file (const char *path, const char *text);

/* Removes dir and everything below it; a missing dir is fine. */
int kiwi__fc_remove_tree (const char *dir, kiwi_error_t *err);

/* Whether the Firecracker process still runs; reaps it when not. */
bool kiwi__fc_vm_alive (kiwi__fc_sb *s);

/* Why the process stopped, for messages (the telling part of its log). */
void kiwi__fc_describe_exit (kiwi__fc_sb *s, char *why, size_t len);

/* A kiwi__fc_alive_fn over a kiwi__fc_sb. */
bool kiwi__fc_alive (void *sb, char *why, size_t len);

/* Kills the process (SIGKILL) and reaps it. */
void kiwi__fc_kill_vm (kiwi__fc_sb *s);

/* Starts Firecracker on s->api_sock with its output in s->log, and writes
 * the pid file that reap reads. */
int kiwi__fc_spawn (kiwi__fc_sb *s, kiwi_error_t *err);

/* An error for a process that exited `when` ("during start-up"), blaming
 * KVM (KIWI_SBE_UNAVAILABLE, KIWI_FC_NO_KVM) when its output does. */
int kiwi__fc_exited_error (kiwi__fc_sb *s, const char *when, kiwi_error_t *err);

/* Waits up to 5 s for the API socket to answer. */
int kiwi__fc_wait_api (kiwi__fc_sb *s, kiwi_fc_api *api, kiwi_error_t *err);

/* Waits up to the boot timeout for the guest agent's hello. */
int kiwi__fc_wait_agent (kiwi__fc_sb *s, kiwi_error_t *err);

/* The driver's reap: removes what sandboxes of this worker left under the
 * driver's directory, killing their Firecracker processes. */
int kiwi__fc_reap (void *priv, int *removed, kiwi_error_t *err);

/* ----- commands and files (driver-exec.c) ----- */

/* The driver operations of the same names in sandbox.h, over a kiwi__fc_sb. */
int kiwi__fc_op_exec (void *sb, const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err);
int kiwi__fc_op_put_archive (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err);
int kiwi__fc_op_get_archive (void *sb, const char *path, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err);

#endif
