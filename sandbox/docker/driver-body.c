/*
 * driver-body.c: what a Docker or gVisor container is made of, as
 * data: the two flavours (runc, runsc) and the body of POST
 * /containers/create, the one place a container's network, runtime,
 * privileges, mounts and limits are decided (see docker-internal.h).
 */
#include "sandbox/docker/docker-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "sandbox/docker/disk.h"
#include "sandbox/docker/docker-api.h"
#include "sandbox/docker/docker-stream.h"
#include "common/log.h"
#include "sandbox/docker/resolv.h"
#include "sandbox/docker/volumes.h"

const kiwi__docker_flavour kiwi__docker_flavour_runc = {
    .runtime = "runc",
    .install_runtime = "runc",
};

/* Phase A runs under `runsc-net`: the runsc that ops/setup.sh builds from
 * the pinned gVisor module, with gVisor's own network stack (netstack) in
 * the container's namespace on the install bridge, which is not the host's.
 * The session keeps `runsc`, registered with --network=none; Phase B's
 * verify (a spec with files_sealed) runs under `runsc-verify`, the same with
 * --file-access-mounts=exclusive: every file of the verify is in place
 * before anything in the sandbox looks, so gVisor may cache /kiwi (the
 * dependencies' reads then cost what the image's own files cost).
 * (Where the build was impossible, ops/stack.sh registers Debian's runsc as
 * runsc-net with --network=host, since that one refuses netstack on this
 * kernel: docs/gvisor-phase-a.md.) */
const kiwi__docker_flavour kiwi__docker_flavour_runsc = {
    .runtime = "runsc",
    .install_runtime = "runsc-net",
    .sealed_runtime = "runsc-verify",
    .pids_via_rlimit = true,
    .install_resolv_conf = true,
};

json_t *
kiwi__docker_string_array (const char *const *list)
{
    json_t *a = json_array ();
    for (size_t i = 0; list && list[i]; i++)
        json_array_append_new (a, json_string (list[i]));
    return a;
}

const char *
kiwi__docker_runtime (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec)
{
    if (spec->network == KIWI_NET_INSTALL)
        return flavour->install_runtime;
    if (spec->files_sealed && flavour->sealed_runtime != NULL)
        return flavour->sealed_runtime;
    return flavour->runtime;
}

json_t *
kiwi__docker_create_body (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec,
                          const char *disk_host_path, const char *resolv_host_path, const char *worker_id,
                          const char *install_network, const kiwi_exec_spec *oneshot, kiwi_error_t *err)
{
    if (spec->image == NULL || *spec->image == '\0') {
        kiwi_error_make_code (err, KIWI_SBE_INVALID, "sandbox spec has no image");
        return NULL;
    }
    const kiwi_sandbox_limits *l = &spec->limits;
    int64_t mem = (l->memory_mb > 0 ? l->memory_mb : KIWI_SANDBOX_DEFAULT_MEMORY_MB) * 1024 * 1024;
    int64_t pids = l->pids > 0 ? l->pids : KIWI_SANDBOX_DEFAULT_PIDS;
    double cpus = l->cpus > 0 ? l->cpus : KIWI_SANDBOX_DEFAULT_CPUS;
    bool install = spec->network == KIWI_NET_INSTALL;

    json_t *host = json_object ();
    /* The network decision. Everything but Phase A has no network at all. */
    const char *net = install ? (install_network ? install_network : KIWI_INSTALL_NETWORK) : "none";
    json_object_set_new (host, "NetworkMode", json_string (net));
    json_object_set_new (host, "Runtime", json_string (kiwi__docker_runtime (flavour, spec)));
    /* ::1 on the loopback: Docker turns IPv6 off in every interface of a
     * container whose network has no IPv6 (none, the install bridge), and
     * servers that bind [::1] fail. Only lo is turned back on: eth0 (Phase
     * A's) keeps IPv6 off, so it has no link-local address and no IPv6
     * route; the install network is made without IPv6. runc applies the
     * sysctl in the container's namespace; gVisor's netstack has ::1 of its
     * own with no network, and copies the namespace's (none) under runsc-net. */
    json_object_set_new (host, "Sysctls", json_pack ("{s:s}", "net.ipv6.conf.lo.disable_ipv6", "0"));
    json_object_set_new (host, "Privileged", json_false ());
    json_object_set_new (host, "CapDrop", json_pack ("[s]", "ALL"));
    json_object_set_new (host, "SecurityOpt", json_pack ("[s]", "no-new-privileges"));
    json_object_set_new (host, "ReadonlyRootfs", json_true ());
    json_object_set_new (host, "Memory", json_integer (mem));
    json_object_set_new (host, "MemorySwap", json_integer (mem));
    json_object_set_new (host, "NanoCpus", json_integer ((json_int_t) (cpus * 1e9)));
    json_t *ulimits = json_pack ("[{s:s,s:i,s:i},{s:s,s:i,s:i}]", "Name", "core", "Soft", 0, "Hard", 0, "Name",
                                 "nofile", "Soft", 4096, "Hard", 4096);
    if (flavour->pids_via_rlimit) {
        json_array_append_new (ulimits, json_pack ("{s:s,s:I,s:I}", "Name", "nproc", "Soft", (json_int_t) pids,
                                                   "Hard", (json_int_t) pids));
        json_object_set_new (host, "PidsLimit", json_integer (pids > KIWI_SANDBOX_GVISOR_PIDS_NET
                                                                  ? pids * 2
                                                                  : KIWI_SANDBOX_GVISOR_PIDS_NET));
    } else
        json_object_set_new (host, "PidsLimit", json_integer (pids));
    json_object_set_new (host, "Ulimits", ulimits);
    char tmpfs[96];
    snprintf (tmpfs, sizeof tmpfs, "rw,nosuid,nodev,size=%dm,mode=1777", KIWI_SANDBOX_TMPFS_MB);
    json_object_set_new (host, "Tmpfs", json_pack ("{s:s}", "/tmp", tmpfs));
    if (oneshot != NULL)
        json_object_set_new (host, "LogConfig",
                             json_pack ("{s:s,s:{s:s,s:s}}", "Type", "json-file", "Config", "max-size",
                                        KIWI_SANDBOX_ONESHOT_LOG, "max-file", "1"));
    else
        json_object_set_new (host, "LogConfig", json_pack ("{s:s}", "Type", "none"));
    json_object_set_new (host, "AutoRemove", json_false ());
    json_t *mounts = json_array ();
    if (disk_host_path != NULL)
        json_array_append_new (mounts, json_pack ("{s:s,s:s,s:s,s:b}", "Type", "bind", "Source", disk_host_path,
                                                  "Target", KIWI_SANDBOX_ROOT, "ReadOnly", 0));
    if (install && flavour->install_resolv_conf && resolv_host_path != NULL)
        json_array_append_new (mounts, json_pack ("{s:s,s:s,s:s,s:b}", "Type", "bind", "Source", resolv_host_path,
                                                  "Target", "/etc/resolv.conf", "ReadOnly", 1));
    if (json_array_size (mounts) > 0)
        json_object_set_new (host, "Mounts", mounts);
    else
        json_decref (mounts);

    json_t *labels = json_pack ("{s:s,s:s,s:s,s:s,s:s}", "org.kiwi.sandbox", "1", "org.kiwi.worker",
                                worker_id ? worker_id : "", "org.kiwi.task", spec->task_id ? spec->task_id : "",
                                "org.kiwi.phase", spec->phase ? spec->phase : "", "org.kiwi.network",
                                kiwi_net_mode_str (spec->network));
    char user[64];
    if (spec->user != NULL)
        snprintf (user, sizeof user, "%s", spec->user);
    else
        snprintf (user, sizeof user, "%d:%d", KIWI_SANDBOX_UID, KIWI_SANDBOX_GID);

    json_t *body = json_object ();
    json_object_set_new (body, "Image", json_string (spec->image));
    if (oneshot != NULL) {
        json_object_set_new (body, "Cmd", kiwi__docker_string_array (oneshot->argv));
        json_t *env = kiwi__docker_string_array (spec->env);
        json_t *extra = kiwi__docker_string_array (oneshot->env);
        json_array_extend (env, extra);
        json_decref (extra);
        json_object_set_new (body, "Env", env);
    } else {
        /* PID 1 waits so exec'd commands have a live container; it reaps
         * orphans and leaves on SIGTERM. */
        json_object_set_new (body, "Cmd",
                             json_pack ("[s,s,s]", "/bin/sh", "-c",
                                        "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"));
        json_object_set_new (body, "Env", kiwi__docker_string_array (spec->env));
    }
    json_object_set_new (body, "Entrypoint", json_pack ("[]"));
    json_object_set_new (body, "User", json_string (user));
    /* A sealed sandbox made ahead gets its tree after the start: its first
     * process stays out of /kiwi, so gVisor has looked at nothing there
     * before the put (each exec names its own directory). */
    const char *wd = oneshot && oneshot->workdir ? oneshot->workdir
                     : oneshot == NULL && spec->files_sealed ? "/"
                                                              : KIWI_SANDBOX_SRC;
    json_object_set_new (body, "WorkingDir", json_string (wd));
    json_object_set_new (body, "Hostname", json_string ("sandbox"));
    /* NetworkMode "none" is the lock; NetworkDisabled would also drop
     * /etc/hosts, and test suites that serve on localhost need it */
    json_object_set_new (body, "NetworkDisabled", json_false ());
    json_object_set_new (body, "StopTimeout", json_integer (1));
    json_object_set_new (body, "Labels", labels);
    json_object_set_new (body, "HostConfig", host);
    return body;
}

/* The targets `body` mounts anyway (HostConfig.Mounts and Tmpfs): a volume
 * at one of them is masked already. NULL-terminated; the strings are
 * borrowed from body. */
static const char **
covered_targets (json_t *body)
{
    json_t *host = json_object_get (body, "HostConfig");
    json_t *mounts = json_object_get (host, "Mounts");
    json_t *tmpfs = json_object_get (host, "Tmpfs");
    const char **out = calloc (json_array_size (mounts) + json_object_size (tmpfs) + 1, sizeof *out);
    if (out == NULL)
        return NULL;
    size_t n = 0, i;
    json_t *m;
    json_array_foreach (mounts, i, m)
    {
        const char *t = json_string_value (json_object_get (m, "Target"));
        if (t != NULL)
            out[n++] = t;
    }
    const char *key;
    json_t *v;
    json_object_foreach (tmpfs, key, v) {
        (void) v;
        out[n++] = key;
    }
    return out;
}

int
kiwi__docker_mask_volumes (json_t *body, json_t *image_volumes, kiwi_disk *disk, kiwi_error_t *err)
{
    cleanup_free const char **covered = covered_targets (body);
    if (covered == NULL)
        return kiwi_error_make (err, ENOMEM, "image volumes");
    char **masks = NULL;
    if (kiwi_volumes_plan (image_volumes, KIWI_SANDBOX_ROOT, covered, &masks, err) < 0)
        return -1;
    json_t *host = json_object_get (body, "HostConfig");
    json_t *mounts = json_object_get (host, "Mounts");
    if (mounts == NULL && masks[0] != NULL) {
        mounts = json_array ();
        json_object_set_new (host, "Mounts", mounts);
    }
    int rc = 0;
    for (size_t i = 0; masks[i] != NULL && rc == 0; i++) {
        cleanup_free char *dir = NULL;
        rc = kiwi_disk_volume_dir (disk, i, KIWI_SANDBOX_UID, KIWI_SANDBOX_GID, &dir, err);
        if (rc == 0)
            json_array_append_new (mounts, json_pack ("{s:s,s:s,s:s,s:b}", "Type", "bind", "Source", dir, "Target",
                                                      masks[i], "ReadOnly", 0));
        else
            kiwi_error_wrap (err, "masking the image's volume %s", masks[i]);
    }
    kiwi_volumes_free (masks);
    return rc;
}
