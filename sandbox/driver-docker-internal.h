/*
 * driver-docker-internal.h: pieces of the Docker driver exposed to unit
 * tests (the network lock test builds the create request without a daemon).
 */
#ifndef KIWI_SANDBOX_DRIVER_DOCKER_INTERNAL_H
#define KIWI_SANDBOX_DRIVER_DOCKER_INTERNAL_H

#include <jansson.h>

#include "docker-api.h"
#include "sandbox.h"

/* How one driver flavour runs containers. */
typedef struct kiwi__docker_flavour {
    const char *runtime;          /* HostConfig.Runtime for Phase B and the session */
    const char *install_runtime;  /* HostConfig.Runtime for Phase A */
    const char *install_network;  /* HostConfig.NetworkMode for Phase A */
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
 * when the flavour has install_resolv_conf (NULL: none). */
json_t *kiwi__docker_create_body (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec,
                                  const char *disk_host_path, const char *resolv_host_path, const char *worker_id,
                                  const kiwi_exec_spec *oneshot, kiwi_error_t *err);

/* How missing images are pulled (from kiwi_sandbox_config; strings owned). */
typedef struct kiwi__docker_pull_cfg {
    char *registries;  /* NULL: none (never pull) */
    char *auth_file;   /* NULL: anonymous */
    int64_t timeout_ms;
    int64_t max_mb;
} kiwi__docker_pull_cfg;

/* The driver's ensure_image over `api` (driver-docker-pull.c). */
int kiwi__docker_ensure_image (kiwi_docker *api, const kiwi__docker_pull_cfg *cfg, const char *image,
                               kiwi_pull_progress_cb progress, void *userdata, bool *pulled, kiwi_error_t *err);

#endif
