/*
 * sandbox.h: the sandbox driver interface.
 *
 * A driver is a const vtable (kiwi_sandbox_driver) selected by name with
 * kiwi_sandbox_driver_find(); unknown names are an error listing the known
 * ones. A driver instance (kiwi_sandbox_env) is opened once per process and
 * creates sandboxes (kiwi_sandbox). Every operation a phase or the
 * Implementer needs goes through the vtable:
 *
 *   create       from an image with a spec (network, env, limits, user, dir)
 *   put_archive  a tar stream unpacked at a directory inside the sandbox
 *   get_archive  a path inside the sandbox streamed out as tar
 *   exec         a command with streamed, bounded output and a deadline
 *   inspect      state, exit/oom flags
 *   destroy      remove everything the sandbox holds, on every path
 *   reap         remove sandboxes left by a crashed worker (optional)
 *
 * Files move by archive, never by bind-mounting the worker's directories, so
 * a microVM driver fits the same interface.
 *
 * Ownership: kiwi_sandbox_env_open() returns an env owned by the caller
 * (kiwi_sandbox_env_close). kiwi_sandbox_create() returns a sandbox owned by
 * the caller; kiwi_sandbox_destroy() removes it and frees the handle in all
 * cases (also when removal fails: the error says what was left behind, and
 * reap removes it later).
 */
#ifndef KIWI_SANDBOX_SANDBOX_H
#define KIWI_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/settings.h"

/* Error codes carried by kiwi_error_code() on sandbox failures. */
#define KIWI_SANDBOX_ERRORS(X)                                                                               \
    X (KIWI_SBE_OK, 0, "ok")                                                                                 \
    X (KIWI_SBE_UNAVAILABLE, 1, "sandbox backend unavailable")                                             \
    X (KIWI_SBE_NO_IMAGE, 2, "image not found")                                                            \
    X (KIWI_SBE_TIMEOUT, 3, "deadline exceeded")                                                           \
    X (KIWI_SBE_GONE, 4, "sandbox no longer exists")                                                       \
    X (KIWI_SBE_INVALID, 5, "invalid request")                                                             \
    X (KIWI_SBE_DISK, 6, "disk ceiling")                                                                   \
    X (KIWI_SBE_NOT_SUPPORTED, 7, "not supported by this driver")                                          \
    X (KIWI_SBE_CANCELLED, 8, "cancelled")                                                                 \
    X (KIWI_SBE_STOPPED, 9, "stopped by the receiver")                                                     \
    X (KIWI_SBE_REFUSED, 10, "refused by the operator's settings")

typedef enum {
#define KIWI__SBE_ENUM(name, val, str) name = KIWI_ERR_RANGE_SANDBOX + val,
    KIWI_SANDBOX_ERRORS (KIWI__SBE_ENUM)
#undef KIWI__SBE_ENUM
} kiwi_sandbox_errcode;

typedef enum {
    KIWI_NET_NONE = 0, /* no interface but loopback: Phase B and the Implementer */
    KIWI_NET_INSTALL,  /* egress for Phase A: a bridge away from the host's services */
} kiwi_net_mode;

const char *kiwi_net_mode_str (kiwi_net_mode m);

/* Phase A's network (KIWI_NET_INSTALL under Docker): a bridge of Kiwi's own
 * with inter-container traffic off, created by the driver when missing; the
 * egress rules (ops/egress) and the egress proxy are bound to its bridge.
 * A host has up to KIWI_INSTALL_BRIDGES of them, kiwi-install0 ..
 * kiwi-install15 (egress.sh's rules match them all as kiwi-install+), so
 * that each worker with an egress proxy has a gateway of its own for it
 * (worker/egress/install-bridge.h); kiwi-install0, the default, belongs to the
 * network "kiwi-install", the others to a network of their own name. */
#define KIWI_INSTALL_NETWORK "kiwi-install"
#define KIWI_INSTALL_BRIDGE "kiwi-install0"
#define KIWI_INSTALL_BRIDGE_PREFIX "kiwi-install"
#define KIWI_INSTALL_BRIDGES 16

/* The Docker network of install bridge `bridge` into buf ("kiwi-install"
 * for kiwi-install0, the bridge's own name for the others); its index into
 * *index when index is not NULL. -1 with *err naming the accepted values
 * when `bridge` is not kiwi-install0 .. kiwi-install15. */
/* `bridge`, or KIWI_INSTALL_BRIDGE when it is NULL or "". */
const char *kiwi_install_bridge_or_default (const char *bridge);

int kiwi_install_network_name (const char *bridge, char *buf, size_t cap, int *index, kiwi_error_t *err);

/* Limits applied to one sandbox. Zero means "the driver's default". */
typedef struct kiwi_sandbox_limits {
    int64_t memory_mb;   /* memory ceiling (also bounds tmpfs) */
    int64_t pids;        /* process/thread ceiling (fork bombs) */
    double cpus;         /* CPU quota in cores */
    int64_t disk_mb;     /* MaxSandboxDiskMB: ceiling on everything written */
} kiwi_sandbox_limits;

/* What to create. Strings are borrowed for the duration of the call. */
typedef struct kiwi_sandbox_spec {
    const char *image;
    kiwi_net_mode network;
    const char *const *env; /* NULL-terminated "KEY=VALUE" list; the whole environment */
    const char *user;       /* "uid:gid" or name; NULL = the image's default */
    kiwi_sandbox_limits limits;
    bool install_caps;      /* Phase A: keep the few capabilities package managers need */
    const char *task_id;    /* label, for reaping and inspection */
    const char *phase;      /* label: "install", "verify", "session" */
    /* A host directory (an extracted dependency snapshot, deps.h) laid
     * read-only under /kiwi: its src/ and home/ appear at /kiwi/src and
     * /kiwi/home without being copied, the sandbox's changes land on its own
     * disk. NULL = none. Only drivers with lays_lower take it. */
    const char *lower_dir;
    /* Nothing outside the sandbox writes into it or copies out of it once a
     * command has run in it: every put comes before the first exec (or, in
     * run_once, before the start), and the result is the command's output.
     * The driver may then let the sandbox cache its /kiwi (gVisor's
     * exclusive file access, the runtime runsc-verify: reads of the
     * dependencies stop going back to the host for each lookup). Phase B's
     * verify sets it; never the Implementer's sandbox, whose files are put
     * while it runs. kiwi_sandbox_put_archive and kiwi_sandbox_get_archive
     * refuse (KIWI_SBE_INVALID) once a command ran in such a sandbox. */
    bool files_sealed;
} kiwi_sandbox_spec;

/* The user every driver's sandbox runs as, who owns /kiwi's directories. */
#define KIWI_SANDBOX_UID 1000
#define KIWI_SANDBOX_GID 1000

/* Paths inside every sandbox. */
#define KIWI_SANDBOX_ROOT "/kiwi"            /* the size-bounded writable area */
#define KIWI_SANDBOX_SRC "/kiwi/src"         /* the repository's working tree */
#define KIWI_SANDBOX_HOME "/kiwi/home"       /* HOME: caches of package managers */
#define KIWI_SANDBOX_TMP "/kiwi/tmp"         /* TMPDIR */

/* Receives command output as it arrives. stream: 1 stdout, 2 stderr. */
typedef void (*kiwi_output_cb) (int stream, const char *data, size_t len, void *userdata);

/* Receives a tar stream copied out of a sandbox as it arrives. Returns 0 to
 * go on, < 0 to stop the copy (get_archive then fails with
 * KIWI_SBE_STOPPED and the receiver says why). */
typedef int (*kiwi_archive_sink) (const char *data, size_t len, void *userdata);

typedef struct kiwi_exec_spec {
    const char *const *argv;  /* NULL-terminated */
    const char *const *env;   /* extra "KEY=VALUE" for this command only, or NULL */
    const char *workdir;      /* NULL = KIWI_SANDBOX_SRC */
    int64_t timeout_ms;       /* wall clock; 0 = none. On expiry the sandbox is killed */
    size_t output_cap;        /* bytes of output tail kept; 0 = 64 KiB */
    kiwi_output_cb on_output; /* optional live stream */
    void *userdata;
} kiwi_exec_spec;

typedef struct kiwi_exec_result {
    int exit_code;            /* -1 when killed or unknown */
    bool timed_out;           /* the deadline killed it */
    bool oom_killed;          /* the memory ceiling killed it */
    bool sandbox_lost;        /* the whole sandbox died under it (the reason is in `lost_reason`) */
    char lost_reason[160];
    char *output;             /* tail of stdout+stderr interleaved, NUL-terminated; owned */
    uint64_t output_dropped;  /* bytes before the tail that were not kept */
    int64_t duration_ms;
} kiwi_exec_result;

void kiwi_exec_result_clear (kiwi_exec_result *r);

typedef struct kiwi_sandbox_info {
    bool running;
    bool oom_killed;
    int exit_code;
    char runtime[32];
    char network_mode[32];
    char address[46]; /* its IP address on its network (Phase A's bridge), or "" (none, or the driver cannot say) */
} kiwi_sandbox_info;

/* Driver-wide configuration, from the worker's settings. */
typedef struct kiwi_sandbox_config {
    const char *docker_socket;   /* unix socket path of dockerd */
    const char *state_dir;       /* where per-sandbox disk images live */
    const char *worker_id;       /* label value: whose sandboxes these are */
    /* Phase A's bridge, kiwi-install0 .. kiwi-install15 (NULL or "":
     * KIWI_INSTALL_BRIDGE); the Docker driver creates its network. */
    const char *install_bridge;
    /* Told of every sandbox started through the env (a create that
     * succeeded, a one-shot run whose command ran), with the driver's
     * name; NULL: nobody is told. */
    void (*on_start) (const char *driver, void *userdata);
    void *on_start_userdata;
    /* Pulling a missing image (ensure_image): the registries it may come
     * from (KIWI_IMAGE_REGISTRIES, whose default is
     * KIWI_PULL_DEFAULT_REGISTRIES; NULL or "" = none: never pull), the
     * Docker config.json-style file with their credentials
     * (KIWI_REGISTRY_AUTH_FILE; NULL = anonymous), the pull's time bound and
     * the image's size bound (0 = the defaults below). */
    const char *registries;
    const char *registry_auth_file;
    int64_t pull_timeout_ms;
    int64_t pull_max_mb;
    /* The image catalogue file (KIWI_IMAGE_CATALOG; NULL or "": the
     * default): its images are the operator's, used as dockerd has them
     * and given the registries' own credentials. */
    const char *image_catalog;
    /* The firecracker driver's settings (common/settings.h), borrowed;
     * NULL: the settings table's defaults. */
    const kiwi_fc_settings *firecracker;
} kiwi_sandbox_config;

#define KIWI_PULL_DEFAULT_REGISTRIES "docker.io"
#define KIWI_PULL_DEFAULT_TIMEOUT_MS 600000
#define KIWI_PULL_DEFAULT_MAX_MB 8192

/* One collection of the images the driver pulled for tasks
 * (kiwi_sandbox_gc_images): the settings in, what it did out. */
typedef struct kiwi_sandbox_image_gc {
    int64_t now_s;          /* 0: the clock */
    int64_t idle_s;         /* KIWI_GC_IMAGE_IDLE: unused this long, removed; 0: none by age */
    int64_t grace_s;        /* the watermark spares images used this recently */
    int disk_high, disk_low; /* KIWI_GC_DISK_HIGH / _LOW, of Docker's storage; high 0: no watermark */
    /* out */
    int removed, removed_watermark, in_use, failed;
    double used_before;     /* percent; -1 unknown */
} kiwi_sandbox_image_gc;

/* Called about once a second while an image is pulled, with the bytes of
 * its layers downloaded so far and their total as far as reported. */
typedef void (*kiwi_pull_progress_cb) (const char *image, uint64_t bytes_done, uint64_t bytes_total,
                                       void *userdata);

typedef struct kiwi_sandbox_env kiwi_sandbox_env;
typedef struct kiwi_sandbox kiwi_sandbox;

/* A tar stream to unpack at `dir` inside a sandbox before a one-shot run. */
typedef struct kiwi_sandbox_put {
    const char *dir;
    const void *tar;
    size_t len;
} kiwi_sandbox_put;

typedef struct kiwi_sandbox_driver {
    const char *name;
    const char *description;
    int (*open) (const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err);
    void (*close) (void *priv);
    int (*create) (void *priv, const kiwi_sandbox_spec *spec, void **sb, kiwi_error_t *err);
    const char *(*id) (void *sb);
    int (*put_archive) (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err);
    int (*get_archive) (void *sb, const char *path, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err);
    int (*exec) (void *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err);
    int (*inspect) (void *sb, kiwi_sandbox_info *info, kiwi_error_t *err);
    /* removes and frees sb; kiwi_sandbox_destroy names the sandbox in the error */
    int (*destroy) (void *sb, kiwi_error_t *err);
    int (*reap) (void *priv, int *removed, kiwi_error_t *err); /* may be NULL */
    /* One command in a fresh sandbox that is removed afterwards: the files
     * are put before the command starts, which runs as the sandbox's first
     * process. Cheaper than create + exec + destroy. May be NULL. */
    int (*run_once) (void *priv, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts, size_t nputs,
                     const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err);
    /* Makes `image` present, pulling it when missing (see
     * kiwi_sandbox_ensure_image). May be NULL: the driver cannot pull. */
    int (*ensure_image) (void *priv, const char *image, kiwi_pull_progress_cb progress, void *userdata, bool *pulled,
                         kiwi_error_t *err);
    /* The content-addressed Id of `image` as the driver holds it (a
     * digest, the same for the same content on any host), into *id
     * (owned by the caller). May be NULL: the driver has none. */
    int (*image_id) (void *priv, const char *image, char **id, kiwi_error_t *err);
    /* Removes images it pulled for tasks that went unused or hold the disk
     * (kiwi_sandbox_gc_images). May be NULL: it keeps none. */
    int (*gc_images) (void *priv, kiwi_sandbox_image_gc *gc, kiwi_error_t *err);
    /* The driver honours spec->lower_dir (the others get the snapshot's
     * archives put into each sandbox). */
    bool lays_lower;
    /* True when a spec's files_sealed changes how the driver runs the
     * sandbox (a runtime of its own; see kiwi_sandbox_seals_files). May be
     * NULL: it changes nothing. */
    bool (*seals_files) (void *priv);
    /* Makes sb, created through another env of this driver opened with the
     * same configuration, one of priv's (kiwi_sandbox_adopt). May be NULL:
     * a sandbox stays with the env that made it. */
    void (*adopt) (void *priv, void *sb);
} kiwi_sandbox_driver;

/* The drivers. */
extern const kiwi_sandbox_driver kiwi_sandbox_driver_docker;
extern const kiwi_sandbox_driver kiwi_sandbox_driver_gvisor;
extern const kiwi_sandbox_driver kiwi_sandbox_driver_firecracker;

/* Name → driver: "docker" (alias "runc"), "gvisor" (alias "runsc"). NULL and
 * an error listing the known names otherwise. */
const kiwi_sandbox_driver *kiwi_sandbox_driver_find (const char *name, kiwi_error_t *err);

/* Comma-separated list of the known names, for help texts. Static. */
const char *kiwi_sandbox_driver_names (void);


int kiwi_sandbox_env_open (const kiwi_sandbox_driver *drv, const kiwi_sandbox_config *cfg, kiwi_sandbox_env **out,
                           kiwi_error_t *err);
void kiwi_sandbox_env_close (kiwi_sandbox_env *env);
const kiwi_sandbox_driver *kiwi_sandbox_env_driver (const kiwi_sandbox_env *env);

/* True when a sandbox whose spec has files_sealed runs differently from one
 * without (under the gvisor driver, the runtime runsc-verify instead of
 * runsc): the egress check then looks at both. */
bool kiwi_sandbox_seals_files (const kiwi_sandbox_env *env);

/* Makes `image` present before a sandbox is created from it: an image of
 * the catalogue the daemon has is used as it is; any other (one a
 * repository named), and a missing one, is pulled from its registry, even
 * when the daemon has it, when the allow-list has its registry or
 * repository (else KIWI_SBE_REFUSED naming KIWI_IMAGE_REGISTRIES and
 * KIWI_IMAGE_CATALOG), with the credentials the operator scoped to it
 * (never given to a sandbox, never logged), its pinned digest held to
 * (else KIWI_SBE_REFUSED),
 * within the time bound (KIWI_SBE_TIMEOUT) and the size bound (the layers'
 * sizes the pull reports, then the image's size, an image over it removed
 * again: KIWI_SBE_REFUSED); an image the registry does not have is
 * KIWI_SBE_NO_IMAGE. The error's message says why in one line. *pulled
 * (optional) says whether it was pulled. A driver that cannot pull
 * returns 0 and leaves the image to create. */
int kiwi_sandbox_ensure_image (kiwi_sandbox_env *env, const char *image, kiwi_pull_progress_cb progress,
                               void *userdata, bool *pulled, kiwi_error_t *err);

/* One collection of the images the driver pulled for tasks (a record under
 * the state directory says which): those unused for gc->idle_s, then, while
 * Docker's storage is above gc->disk_high, the least recently used; never
 * one a container is of, never one of the catalogue, never one Kiwi did not
 * pull. Fills gc's counts. A driver without gc_images does nothing. */
int kiwi_sandbox_gc_images (kiwi_sandbox_env *env, kiwi_sandbox_image_gc *gc, kiwi_error_t *err);

/* The content-addressed Id of a present image (the driver's image_id),
 * into *id (owned by the caller): what an install key names the image by.
 * KIWI_SBE_NOT_SUPPORTED when the driver has none. */
int kiwi_sandbox_image_id (kiwi_sandbox_env *env, const char *image, char **id, kiwi_error_t *err);

int kiwi_sandbox_create (kiwi_sandbox_env *env, const kiwi_sandbox_spec *spec, kiwi_sandbox **out,
                         kiwi_error_t *err);

/* Hands `sb`, made through another env of the same driver and
 * configuration, over to `env`: its operations then go through env's
 * connection, so the env that made it is free for another thread (the
 * session's thread that makes verify sandboxes ahead). The caller must not
 * be using either env in another thread while it runs. Returns < 0
 * (KIWI_SBE_INVALID) when the driver cannot, or the drivers differ: sb
 * then stays with its env. */
int kiwi_sandbox_adopt (kiwi_sandbox_env *env, kiwi_sandbox *sb, kiwi_error_t *err);

const char *kiwi_sandbox_id (const kiwi_sandbox *sb);
int kiwi_sandbox_put_archive (kiwi_sandbox *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err);
int kiwi_sandbox_get_archive (kiwi_sandbox *sb, const char *path, kiwi_archive_sink sink, void *userdata,
                              kiwi_error_t *err);
int kiwi_sandbox_exec (kiwi_sandbox *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err);
int kiwi_sandbox_inspect (kiwi_sandbox *sb, kiwi_sandbox_info *info, kiwi_error_t *err);
/* Removes the sandbox and frees the handle (always; see above). NULL is a no-op. */
int kiwi_sandbox_destroy (kiwi_sandbox *sb, kiwi_error_t *err);
int kiwi_sandbox_reap (kiwi_sandbox_env *env, int *removed, kiwi_error_t *err);

/* Process-wide cancellation: when *flag becomes non-zero (a signal handler
 * sets it), a running exec or one-shot run kills its sandbox and returns
 * within a few seconds with an error of code KIWI_SBE_CANCELLED. NULL turns
 * it off. */
void kiwi_sandbox_set_cancel (volatile int *flag);
bool kiwi_sandbox_cancelled (void);

/* For drivers naming a sandbox: 32 random bits from /dev/urandom, or the
 * monotonic clock and the pid when it cannot be read. */
unsigned kiwi_sandbox_name_nonce (void);

/* Runs one command in a fresh sandbox with `puts` unpacked first, and
 * removes the sandbox on every path. Uses the driver's run_once when it has
 * one, else create + put + exec + destroy: the result is the same. */
int kiwi_sandbox_run_once (kiwi_sandbox_env *env, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts,
                           size_t nputs, const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err);

/* The same in a sandbox already created (and started): `puts` unpacked,
 * the command run, the sandbox removed and its handle freed on every path
 * (a failed removal is the error when the run itself succeeded). */
int kiwi_sandbox_run_in (kiwi_sandbox *sb, const kiwi_sandbox_put *puts, size_t nputs, const kiwi_exec_spec *x,
                         kiwi_exec_result *res, kiwi_error_t *err);

#endif
