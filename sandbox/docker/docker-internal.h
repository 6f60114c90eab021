/*
 * docker-internal.h: what the files of the Docker driver share
 * (driver.c: lifecycle; driver-body.c: the container body;
 * driver-exec.c: commands and files; driver-pull.c: image
 * pulls), and the pieces unit tests use (the network lock test builds the
 * create request without a daemon).
 */
#ifndef KIWI_SANDBOX_DRIVER_DOCKER_INTERNAL_H
#define KIWI_SANDBOX_DRIVER_DOCKER_INTERNAL_H

#include <jansson.h>

#include "sandbox/docker/disk.h"
#include "sandbox/docker/docker-api.h"
#include "inspect/image/image.h"
#include "sandbox/sandbox.h"

/* How one driver flavour runs containers. */
typedef struct kiwi__docker_flavour {
    const char *runtime;          /* HostConfig.Runtime for Phase B and the session */
    const char *install_runtime;  /* HostConfig.Runtime for Phase A */
    /* HostConfig.Runtime for a spec with files_sealed (Phase B's verify):
     * runsc-verify is runsc with --file-access-mounts=exclusive, so gVisor
     * caches /kiwi instead of revalidating every lookup against the host.
     * NULL: the same as runtime. Dropped at open (with a warning) when the
     * daemon has no such runtime: the verify is slower, not wrong. */
    const char *sealed_runtime;
    /* gVisor's own threads live in the container's host pids cgroup, so a
     * tight PidsLimit kills the whole sandbox; under runsc the process limit
     * is RLIMIT_NPROC, which gVisor enforces inside the sandbox, and the
     * cgroup limit is only a generous safety net. */
    bool pids_via_rlimit;
    /* Phase A gets the host's upstream resolvers read-only at
     * /etc/resolv.conf (resolv.h): gVisor's netstack cannot reach Docker's
     * embedded resolver on the install bridge. */
    bool install_resolv_conf;
} kiwi__docker_flavour;

extern const kiwi__docker_flavour kiwi__docker_flavour_runc;
extern const kiwi__docker_flavour kiwi__docker_flavour_runsc;

/* Defaults for limits left at zero in a spec. */
#define KIWI_SANDBOX_DEFAULT_MEMORY_MB 2048
#define KIWI_SANDBOX_DEFAULT_PIDS 512
#define KIWI_SANDBOX_GVISOR_PIDS_NET 4096 /* host-side safety net under runsc */
#define KIWI_SANDBOX_DEFAULT_CPUS 1.0
#define KIWI_SANDBOX_DEFAULT_DISK_MB 2048
#define KIWI_SANDBOX_TMPFS_MB 256

/* Bytes of a one-shot container's output dockerd keeps on its side while
 * Kiwi follows it (Kiwi keeps its own bounded tail). */
#define KIWI_SANDBOX_ONESHOT_LOG "16m"

/* The body of POST /containers/create for `spec` under `flavour`, with the
 * sandbox disk mounted from `disk_host_path` (NULL in tests). `oneshot`
 * (NULL for a persistent sandbox) makes the command the container's first
 * process. The one place a container's network, runtime, privileges and
 * limits are decided. Returns a new reference, or NULL with *err set. */
/* resolv_host_path: the file bound read-only at /etc/resolv.conf in Phase A
 * when the flavour has install_resolv_conf (NULL: none). install_network:
 * Phase A's HostConfig.NetworkMode (NULL: KIWI_INSTALL_NETWORK). */
json_t *kiwi__docker_create_body (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec,
                                  const char *disk_host_path, const char *resolv_host_path, const char *worker_id,
                                  const char *install_network, const kiwi_exec_spec *oneshot, kiwi_error_t *err);

/* Masks every volume the image declares (`image_volumes`: its
 * Config.Volumes, may be NULL) with a directory of `disk` mounted at the
 * volume's path in `body`, so dockerd makes no anonymous volume (volumes.h
 * says which paths get one and which images are refused, KIWI_SBE_INVALID
 * with the path and the reason). */
int kiwi__docker_mask_volumes (json_t *body, json_t *image_volumes, kiwi_disk *disk, kiwi_error_t *err);

/* The runtime a container for `spec` runs under (Phase A's, a sealed
 * verify's, or the flavour's own). Static. */
const char *kiwi__docker_runtime (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec);

/* Which images a sandbox may be of and how they are pulled (from
 * kiwi_sandbox_config; strings and the catalogue owned). */
typedef struct kiwi__docker_pull_cfg {
    char *registries;  /* NULL: none (never pull) */
    char *auth_file;   /* NULL: anonymous */
    int64_t timeout_ms;
    int64_t max_mb;
    kiwi_image_catalog *catalog; /* the operator's images (KIWI_IMAGE_CATALOG or the default) */
    char *record_dir;  /* <state>/images: what Kiwi pulled (image-gc.h) */
} kiwi__docker_pull_cfg;

/* Fills *pc from the driver's configuration (opening the catalogue);
 * kiwi__docker_pull_cfg_clear frees it, also after a failure. */
int kiwi__docker_pull_cfg_init (kiwi__docker_pull_cfg *pc, const kiwi_sandbox_config *cfg, const char *state_dir,
                                kiwi_error_t *err);
void kiwi__docker_pull_cfg_clear (kiwi__docker_pull_cfg *pc);

/* The driver's ensure_image over `api` (driver-pull.c). */
int kiwi__docker_ensure_image (kiwi_docker *api, const kiwi__docker_pull_cfg *cfg, const char *image,
                               kiwi_pull_progress_cb progress, void *userdata, bool *pulled, kiwi_error_t *err);

/* The driver's gc_images (driver-gc.c; kiwi_sandbox_gc_images). */
int kiwi__docker_gc_images (void *priv, kiwi_sandbox_image_gc *gc, kiwi_error_t *err);

/* The driver's state (one per open driver). Strings owned; api and probe
 * owned and closed by the driver's close. */
typedef struct kiwi__docker_priv {
    kiwi__docker_flavour fl; /* the driver's flavour, less what the daemon lacks */
    kiwi_docker *api;
    kiwi_docker *probe; /* second connection: liveness checks during a streamed exec */
    char *state_dir;
    char *worker_id;
    kiwi__docker_pull_cfg pull;
    char *resolv_path; /* <state>/gvisor-resolv.conf under a flavour with install_resolv_conf, else NULL */
    char install_network[32]; /* Phase A's network and its bridge (kiwi_sandbox_config.install_bridge) */
    char install_bridge[16];
} kiwi__docker_priv;

/* One sandbox: a container and its disk. id, name and disk owned;
 * p borrowed from the driver. */
typedef struct kiwi__docker_sb {
    kiwi__docker_priv *p;
    char *id;   /* container id */
    char *name; /* container and disk name */
    kiwi_disk *disk;
} kiwi__docker_sb;

/* A JSON array of the strings of a NULL-terminated list (NULL: empty). New
 * reference (driver-body.c). */
json_t *kiwi__docker_string_array (const char *const *list);

/* Lifecycle (driver.c). */

/* Frees s and its strings; the container and disk must be gone
 * (kiwi__docker_remove_all) or handed on. */
void kiwi__docker_sb_free (kiwi__docker_sb *s);

/* Removes the container (if any) and the disk; frees nothing else. err may
 * be NULL; the first failure is kept. */
int kiwi__docker_remove_all (kiwi__docker_sb *s, kiwi_error_t *err);

/* Creates the disk and the container for `spec`; `oneshot` as in
 * kiwi__docker_create_body. The container is not started. *out owned by
 * the caller (kiwi__docker_remove_all, kiwi__docker_sb_free). */
int kiwi__docker_create_container (kiwi__docker_priv *p, const kiwi_sandbox_spec *spec, const kiwi_exec_spec *oneshot,
                                   kiwi__docker_sb **out, kiwi_error_t *err);

/* Starts a created container. */
int kiwi__docker_start_container (kiwi__docker_sb *s, const kiwi_sandbox_spec *spec, kiwi_error_t *err);

/* Commands and files (driver-exec.c): the driver operations of the
 * same names in sandbox.h, over a kiwi__docker_sb or kiwi__docker_priv. */
int kiwi__docker_put_archive (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err);
int kiwi__docker_get_archive (void *sb, const char *inner, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err);
int kiwi__docker_exec (void *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err);
int kiwi__docker_run_once (void *priv, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts, size_t nputs,
                           const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err);

#endif
