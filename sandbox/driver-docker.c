/*
 * driver-docker.c: the Docker and gVisor drivers.
 *
 * Both talk to dockerd's Engine API over its unix socket (docker-api.h).
 * They differ only in the container runtime: runc for "docker", runsc for
 * "gvisor" (registered in dockerd with --network=none, see ops/README.md).
 * A sandbox is a container that sleeps while commands run in it through the
 * exec API; its writable area is a size-bounded disk mounted at /kiwi
 * (disk.h); its root filesystem is read-only.
 *
 * Every container carries the label org.kiwi.sandbox=1 and the worker's id,
 * so a worker that crashed leaves nothing that reap() cannot find.
 */
#include "driver-docker-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "disk.h"
#include "docker-api.h"
#include "docker-stream.h"
#include "log.h"
#include "resolv.h"

const kiwi__docker_flavour kiwi__docker_flavour_runc = {
    .runtime = "runc",
    .install_runtime = "runc",
    .install_network = KIWI_INSTALL_NETWORK,
};

/* Phase A runs under `runsc-net`: the runsc that ops/setup.sh builds from
 * the pinned gVisor module, with gVisor's own network stack (netstack) in
 * the container's namespace on the install bridge, which is not the host's.
 * Phase B and the session keep `runsc`, registered with --network=none.
 * (Where the build was impossible, ops/stack.sh registers Debian's runsc as
 * runsc-net with --network=host, since that one refuses netstack on this
 * kernel: docs/gvisor-phase-a.md.) */
const kiwi__docker_flavour kiwi__docker_flavour_runsc = {
    .runtime = "runsc",
    .install_runtime = "runsc-net",
    .install_network = KIWI_INSTALL_NETWORK,
    .pids_via_rlimit = true,
    .install_resolv_conf = true,
};

/* Creates the install network if it is missing (racing workers: a 409 from
 * the loser is fine). */
static int
ensure_install_network (kiwi_docker *api, kiwi_error_t *err)
{
    long status = 0;
    kiwi_error_t e = NULL;
    if (kiwi_docker_call (api, "GET", "/networks/" KIWI_INSTALL_NETWORK, NULL, 15000, NULL, &status, &e) == 0)
        return 0;
    kiwi_error_free (&e);
    if (status != 404)
        return kiwi_error_make (err, 0, "checking the %s network: HTTP %ld", KIWI_INSTALL_NETWORK, status);
    json_t *body = json_pack ("{s:s,s:s,s:b,s:{s:s,s:s,s:s},s:{s:s}}", "Name", KIWI_INSTALL_NETWORK, "Driver",
                              "bridge", "CheckDuplicate", 1, "Options", "com.docker.network.bridge.enable_icc",
                              "false", "com.docker.network.bridge.name", KIWI_INSTALL_BRIDGE,
                              "com.docker.network.bridge.enable_ip_masquerade", "true", "Labels",
                              "org.kiwi.network", "install");
    int rc = kiwi_docker_call (api, "POST", "/networks/create", body, 30000, NULL, &status, err);
    json_decref (body);
    if (rc < 0 && status == 409) {
        kiwi_error_free (err);
        return 0;
    }
    return rc < 0 ? kiwi_error_wrap (err, "creating the %s network for Phase A", KIWI_INSTALL_NETWORK) : 0;
}

typedef struct {
    const kiwi__docker_flavour *flavour;
    kiwi_docker *api;
    kiwi_docker *probe; /* second connection: liveness checks during a streamed exec */
    char *state_dir;
    char *worker_id;
    kiwi__docker_pull_cfg pull;
    char *resolv_path; /* <state>/gvisor-resolv.conf under a flavour with install_resolv_conf, else NULL */
} docker_priv;

typedef struct {
    docker_priv *p;
    char *id;   /* container id */
    char *name; /* container and disk name */
    kiwi_disk *disk;
} docker_sb;

static json_t *
string_array (const char *const *list)
{
    json_t *a = json_array ();
    for (size_t i = 0; list && list[i]; i++)
        json_array_append_new (a, json_string (list[i]));
    return a;
}

json_t *
kiwi__docker_create_body (const kiwi__docker_flavour *flavour, const kiwi_sandbox_spec *spec,
                          const char *disk_host_path, const char *resolv_host_path, const char *worker_id,
                          const kiwi_exec_spec *oneshot, kiwi_error_t *err)
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
    json_object_set_new (host, "NetworkMode", json_string (install ? flavour->install_network : "none"));
    json_object_set_new (host, "Runtime", json_string (install ? flavour->install_runtime : flavour->runtime));
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
        json_object_set_new (body, "Cmd", string_array (oneshot->argv));
        json_t *env = string_array (spec->env);
        json_t *extra = string_array (oneshot->env);
        json_array_extend (env, extra);
        json_decref (extra);
        json_object_set_new (body, "Env", env);
    } else {
        /* PID 1 waits so exec'd commands have a live container; it reaps
         * orphans and leaves on SIGTERM. */
        json_object_set_new (body, "Cmd",
                             json_pack ("[s,s,s]", "/bin/sh", "-c",
                                        "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"));
        json_object_set_new (body, "Env", string_array (spec->env));
    }
    json_object_set_new (body, "Entrypoint", json_pack ("[]"));
    json_object_set_new (body, "User", json_string (user));
    json_object_set_new (body, "WorkingDir",
                         json_string (oneshot && oneshot->workdir ? oneshot->workdir : KIWI_SANDBOX_SRC));
    json_object_set_new (body, "Hostname", json_string ("sandbox"));
    /* NetworkMode "none" is the lock; NetworkDisabled would also drop
     * /etc/hosts, and test suites that serve on localhost need it */
    json_object_set_new (body, "NetworkDisabled", json_false ());
    json_object_set_new (body, "StopTimeout", json_integer (1));
    json_object_set_new (body, "Labels", labels);
    json_object_set_new (body, "HostConfig", host);
    return body;
}

static void docker_close (void *priv);

/* <state>/gvisor-resolv.conf for Phase A (resolv.h). Without it Phase A
 * keeps Docker's file, whose resolver gVisor cannot reach: a warning, not
 * a failure (Phase B and sessions need no resolver). */
static void
write_install_resolv (docker_priv *p)
{
    kiwi_error_t e = NULL;
    char *path = NULL;
    if (asprintf (&path, "%s/%s", p->state_dir, KIWI_RESOLV_NAME) < 0)
        return;
    int n = kiwi_resolv_write_upstream (KIWI_RESOLV_HOST, path, &e);
    if (n < 0) {
        kiwi_warn ("gvisor: Phase A keeps Docker's resolver, which gVisor cannot reach: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        free (path);
        return;
    }
    if (n == 0)
        kiwi_warn ("gvisor: %s names no resolver but loopback ones: names will not resolve in Phase A",
                   KIWI_RESOLV_HOST);
    p->resolv_path = path;
}

static int
docker_open (const kiwi__docker_flavour *flavour, const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err)
{
    docker_priv *p = calloc (1, sizeof *p);
    if (p == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox driver");
    p->flavour = flavour;
    p->state_dir = strdup (cfg->state_dir ? cfg->state_dir : "/var/lib/kiwi");
    p->worker_id = strdup (cfg->worker_id ? cfg->worker_id : "worker");
    p->pull.registries = cfg->registries ? strdup (cfg->registries) : NULL;
    p->pull.auth_file = cfg->registry_auth_file && *cfg->registry_auth_file ? strdup (cfg->registry_auth_file) : NULL;
    p->pull.timeout_ms = cfg->pull_timeout_ms;
    p->pull.max_mb = cfg->pull_max_mb;
    const char *sock = cfg->docker_socket ? cfg->docker_socket : "/var/run/docker.sock";
    if (kiwi_docker_open (sock, &p->api, err) < 0) {
        docker_close (p);
        (*err)->code = KIWI_SBE_UNAVAILABLE;
        return -1;
    }
    json_t *info = NULL;
    if (kiwi_docker_call (p->api, "GET", "/info", NULL, 15000, &info, NULL, err) == 0) {
        json_t *rts = json_object_get (info, "Runtimes");
        const char *need[] = { flavour->runtime, flavour->install_runtime };
        for (size_t i = 0; i < 2; i++)
            if (strcmp (need[i], "runc") != 0 && json_object_get (rts, need[i]) == NULL) {
                kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE,
                                      "dockerd at %s has no `%s` runtime registered (see ops/README.md: "
                                      "\"runtimes\" in daemon.json)",
                                      sock, need[i]);
                json_decref (info);
                docker_close (p);
                return -1;
            }
        json_decref (info);
        if (ensure_install_network (p->api, err) < 0) {
            docker_close (p);
            return -1;
        }
        if (flavour->install_resolv_conf)
            write_install_resolv (p);
    } else {
        docker_close (p);
        return -1;
    }
    *priv = p;
    return 0;
}

static int
open_runc (const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err)
{
    return docker_open (&kiwi__docker_flavour_runc, cfg, priv, err);
}

static int
open_runsc (const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err)
{
    return docker_open (&kiwi__docker_flavour_runsc, cfg, priv, err);
}

static void
docker_close (void *priv)
{
    docker_priv *p = priv;
    if (p == NULL)
        return;
    kiwi_docker_close (p->api);
    kiwi_docker_close (p->probe);
    free (p->state_dir);
    free (p->worker_id);
    free (p->pull.registries);
    free (p->pull.auth_file);
    free (p->resolv_path);
    free (p);
}

static int
docker_ensure_image (void *priv, const char *image, kiwi_pull_progress_cb progress, void *userdata, bool *pulled,
                     kiwi_error_t *err)
{
    docker_priv *p = priv;
    return kiwi__docker_ensure_image (p->api, &p->pull, image, progress, userdata, pulled, err);
}

static void
sb_free (docker_sb *s)
{
    free (s->id);
    free (s->name);
    free (s);
}

/* Removes the container (if any) and the disk; frees nothing else. */
static int
remove_all (docker_sb *s, kiwi_error_t *err)
{
    int rc = 0;
    if (s->id != NULL) {
        char path[256];
        snprintf (path, sizeof path, "/containers/%s?force=1&v=1", s->id);
        long status = 0;
        kiwi_error_t e = NULL;
        if (kiwi_docker_call (s->p->api, "DELETE", path, NULL, 60000, NULL, &status, &e) < 0 && status != 404) {
            if (err && *err == NULL)
                *err = kiwi_error_steal (&e);
            rc = -1;
        }
        kiwi_error_free (&e);
    }
    kiwi_error_t e = NULL;
    if (kiwi_disk_destroy (s->disk, &e) < 0) {
        if (err && *err == NULL)
            *err = kiwi_error_steal (&e);
        rc = -1;
    }
    kiwi_error_free (&e);
    s->disk = NULL;
    return rc;
}

/* Creates the disk and the container; `oneshot` as in
 * kiwi__docker_create_body. The container is not started. */
static int
create_container (docker_priv *p, const kiwi_sandbox_spec *spec, const kiwi_exec_spec *oneshot, docker_sb **out,
                  kiwi_error_t *err)
{
    docker_sb *s = calloc (1, sizeof *s);
    if (s == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox");
    s->p = p;
    unsigned rnd = 0;
    FILE *ur = fopen ("/dev/urandom", "re");
    if (ur == NULL || fread (&rnd, sizeof rnd, 1, ur) != 1)
        rnd = (unsigned) kiwi_mono_ms () ^ (unsigned) getpid ();
    if (ur)
        fclose (ur);
    if (asprintf (&s->name, "kiwi-%s-%08x", p->worker_id, rnd) < 0) {
        free (s);
        return kiwi_error_make (err, ENOMEM, "sandbox");
    }
    int64_t disk_mb = spec->limits.disk_mb > 0 ? spec->limits.disk_mb : KIWI_SANDBOX_DEFAULT_DISK_MB;
    if (kiwi_disk_create (p->state_dir, s->name, disk_mb, KIWI_SANDBOX_UID, KIWI_SANDBOX_GID, spec->lower_dir,
                          &s->disk, err) < 0) {
        sb_free (s);
        return -1;
    }
    json_t *body
        = kiwi__docker_create_body (p->flavour, spec, kiwi_disk_mountpoint (s->disk), p->resolv_path, p->worker_id,
                                    oneshot, err);
    if (body == NULL)
        goto fail;
    char path[256];
    snprintf (path, sizeof path, "/containers/create?name=%s", s->name);
    json_t *created = NULL;
    long status = 0;
    int rc = kiwi_docker_call (p->api, "POST", path, body, 60000, &created, &status, err);
    json_decref (body);
    if (rc < 0) {
        if (status == 404)
            (*err)->code = KIWI_SBE_NO_IMAGE;
        kiwi_error_wrap (err, "creating a sandbox from %s", spec->image);
        goto fail;
    }
    s->id = strdup (json_string_value (json_object_get (created, "Id")) ?: "");
    json_decref (created);
    *out = s;
    return 0;
fail:
    remove_all (s, NULL);
    sb_free (s);
    return -1;
}

static int
start_container (docker_sb *s, const kiwi_sandbox_spec *spec, kiwi_error_t *err)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/start", s->id);
    if (kiwi_docker_call (s->p->api, "POST", path, NULL, 60000, NULL, NULL, err) < 0)
        return kiwi_error_wrap (err, "starting sandbox %s (runtime %s)", s->name,
                                spec->network == KIWI_NET_INSTALL ? s->p->flavour->install_runtime
                                                                  : s->p->flavour->runtime);
    return 0;
}

static int
docker_create (void *priv, const kiwi_sandbox_spec *spec, void **out, kiwi_error_t *err)
{
    docker_priv *p = priv;
    docker_sb *s = NULL;
    if (create_container (p, spec, NULL, &s, err) < 0)
        return -1;
    if (start_container (s, spec, err) < 0) {
        remove_all (s, NULL);
        sb_free (s);
        return -1;
    }
    kiwi_debug ("sandbox %s: created from %s (%s, network %s)", s->name, spec->image,
                spec->phase ? spec->phase : "-", kiwi_net_mode_str (spec->network));
    *out = s;
    return 0;
}

static const char *
docker_id (void *sb)
{
    return ((docker_sb *) sb)->name;
}

static int
archive_path (docker_sb *s, const char *verb_path, const char *inner, char *out, size_t outsz, kiwi_error_t *err)
{
    cleanup_free char *enc = kiwi_docker_urlencode (s->p->api, inner);
    if (enc == NULL)
        return kiwi_error_make (err, ENOMEM, "encoding %s", inner);
    int n = snprintf (out, outsz, "/containers/%s/%s?path=%s", s->id, verb_path, enc);
    if (n < 0 || (size_t) n >= outsz)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "path too long: %s", inner);
    return 0;
}

static int
docker_put_archive (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err)
{
    docker_sb *s = sb;
    char path[8192];
    if (archive_path (s, "archive", dir, path, sizeof path, err) < 0)
        return -1;
    kiwi_docker_response r;
    if (kiwi_docker_request (s->p->api, "PUT", path, "application/x-tar", tar, len, 300000, &r, err) < 0)
        return kiwi_error_wrap (err, "copying files into sandbox %s", s->name);
    int ok = r.status >= 200 && r.status < 300;
    if (!ok) {
        json_error_t je;
        json_t *j = json_loadb (r.body, r.len, 0, &je);
        const char *m = j ? json_string_value (json_object_get (j, "message")) : NULL;
        kiwi_error_make_code (err, r.status == 404 ? KIWI_SBE_GONE : KIWI_SBE_INVALID,
                              "copying files into sandbox %s at %s: HTTP %ld: %s", s->name, dir, r.status,
                              m ? m : r.body);
        json_decref (j);
    }
    kiwi_docker_response_clear (&r);
    return ok ? 0 : -1;
}

static int
docker_get_archive (void *sb, const char *inner, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err)
{
    docker_sb *s = sb;
    char path[8192];
    if (archive_path (s, "archive", inner, path, sizeof path, err) < 0)
        return -1;
    long status = 0;
    if (kiwi_docker_request_stream (s->p->api, "GET", path, NULL, NULL, 0, 300000, sink, userdata, &status, err)
        < 0) {
        if (kiwi_error_code (*err) == KIWI_DOCKER_ABORTED)
            (*err)->code = KIWI_SBE_STOPPED;
        else if (status == 404)
            (*err)->code = KIWI_SBE_GONE;
        return kiwi_error_wrap (err, "copying %s out of sandbox %s", inner, s->name);
    }
    return 0;
}

typedef struct {
    kiwi_demux demux;
    kiwi_tailbuf tail;
    const kiwi_exec_spec *spec;
    docker_sb *s;
    bool lost;
    bool oom;
    bool cancelled;
    int exit_code;
} exec_ctx;

/* Reads the container's state over `api`. Returns < 0 if it cannot be read;
 * sets *running, *oom and *exit_code otherwise (a missing container is "not
 * running"). */
static int
container_state (kiwi_docker *api, const char *id, bool *running, bool *oom, int *exit_code)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/json", id);
    json_t *j = NULL;
    long status = 0;
    kiwi_error_t e = NULL;
    int rc = kiwi_docker_call (api, "GET", path, NULL, 10000, &j, &status, &e);
    kiwi_error_free (&e);
    if (rc < 0) {
        if (status == 404) {
            *running = false;
            *oom = false;
            *exit_code = -1;
            return 0;
        }
        return -1;
    }
    json_t *st = json_object_get (j, "State");
    *running = json_is_true (json_object_get (st, "Running"));
    *oom = json_is_true (json_object_get (st, "OOMKilled"));
    *exit_code = (int) json_integer_value (json_object_get (st, "ExitCode"));
    json_decref (j);
    return 0;
}

/* During a streamed exec: a sandbox that died under the command (gVisor
 * dies whole when its memory ceiling is hit) ends the exec at once instead
 * of at the deadline. */
static int
exec_tick (void *ud)
{
    exec_ctx *c = ud;
    docker_priv *p = c->s->p;
    if (kiwi_sandbox_cancelled ()) {
        c->cancelled = true;
        return -1;
    }
    if (p->probe == NULL) {
        kiwi_error_t e = NULL;
        if (kiwi_docker_open (kiwi_docker_socket_path (p->api), &p->probe, &e) < 0) {
            kiwi_error_free (&e);
            return 0;
        }
    }
    bool running = true, oom = false;
    int code = 0;
    if (container_state (p->probe, c->s->id, &running, &oom, &code) < 0 || running)
        return 0;
    c->lost = true;
    c->oom = oom;
    c->exit_code = code;
    return -1;
}

static int
exec_emit (int stream, const char *data, size_t len, void *ud)
{
    exec_ctx *c = ud;
    kiwi_tailbuf_write (&c->tail, data, len);
    if (c->spec->on_output)
        c->spec->on_output (stream, data, len, c->spec->userdata);
    return 0;
}

static int
exec_sink (const char *data, size_t len, void *ud)
{
    exec_ctx *c = ud;
    return kiwi_demux_feed (&c->demux, data, len);
}

/* Kills the sandbox's processes (all of them: a deadline ends the sandbox). */
static void
kill_container (docker_sb *s)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/kill?signal=KILL", s->id);
    kiwi_error_t e = NULL;
    if (kiwi_docker_call (s->p->api, "POST", path, NULL, 30000, NULL, NULL, &e) < 0)
        kiwi_warn ("sandbox %s: kill after deadline: %s", s->name, kiwi_error_msg (e));
    kiwi_error_free (&e);
}

/* Whether the memory ceiling was hit (cgroup v1 failcnt / v2 oom events). */
static bool
memory_limit_hit (docker_sb *s)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/stats?stream=false", s->id);
    json_t *st = NULL;
    kiwi_error_t e = NULL;
    bool hit = false;
    if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, &e) == 0) {
        json_t *ms = json_object_get (st, "memory_stats");
        json_int_t failcnt = json_integer_value (json_object_get (ms, "failcnt"));
        json_t *stats = json_object_get (ms, "stats");
        json_int_t oom = json_integer_value (json_object_get (stats, "oom_kill"));
        json_int_t usage = json_integer_value (json_object_get (ms, "max_usage"));
        json_int_t limit = json_integer_value (json_object_get (ms, "limit"));
        hit = failcnt > 0 || oom > 0 || (limit > 0 && usage >= limit - 4096);
    }
    kiwi_error_free (&e);
    json_decref (st);
    return hit;
}

static int
docker_exec (void *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err)
{
    docker_sb *s = sb;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (spec->argv == NULL || spec->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "exec in sandbox %s: empty command", s->name);
    int64_t t0 = kiwi_mono_ms ();
    json_t *body = json_pack ("{s:b,s:b,s:b,s:o,s:o,s:s}", "AttachStdin", 0, "AttachStdout", 1, "AttachStderr", 1,
                              "Cmd", string_array (spec->argv), "Env", string_array (spec->env), "WorkingDir",
                              spec->workdir ? spec->workdir : KIWI_SANDBOX_SRC);
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/exec", s->id);
    json_t *created = NULL;
    long status = 0;
    int rc = kiwi_docker_call (s->p->api, "POST", path, body, 30000, &created, &status, err);
    json_decref (body);
    if (rc < 0) {
        if (status == 404 || status == 409)
            (*err)->code = KIWI_SBE_GONE;
        return kiwi_error_wrap (err, "exec in sandbox %s", s->name);
    }
    cleanup_free char *eid = strdup (json_string_value (json_object_get (created, "Id")) ?: "");
    json_decref (created);

    exec_ctx c = { .spec = spec, .s = s };
    kiwi_demux_init (&c.demux, exec_emit, &c);
    if (kiwi_tailbuf_init (&c.tail, spec->output_cap ? spec->output_cap : 65536) < 0)
        return kiwi_error_make (err, ENOMEM, "exec output buffer");
    snprintf (path, sizeof path, "/exec/%s/start", eid);
    const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    kiwi_error_t e = NULL;
    rc = kiwi_docker_request_stream_tick (s->p->api, "POST", path, "application/json", start_body,
                                          sizeof start_body - 1, spec->timeout_ms, exec_sink, &c, exec_tick, 2000,
                                          &status, &e);
    if (rc < 0 && kiwi_error_code (e) == 28 /* CURLE_OPERATION_TIMEDOUT */) {
        kill_container (s);
        res->timed_out = true;
        kiwi_error_free (&e);
        rc = 0;
    } else if (rc < 0 && c.cancelled) {
        kill_container (s);
        kiwi_error_free (&e);
        kiwi_tailbuf_clear (&c.tail);
        return kiwi_error_make_code (err, KIWI_SBE_CANCELLED, "`%s` in sandbox %s: cancelled", spec->argv[0],
                                     s->name);
    } else if (rc < 0 && c.lost) {
        kiwi_error_free (&e);
        rc = 0;
    }
    if (!res->timed_out && !c.lost) {
        /* the stream can also end because the sandbox died; dockerd may
         * need a moment to notice, so a command that did not exit normally
         * (killed, or no status) is given two seconds of checks */
        int code = -1;
        snprintf (path, sizeof path, "/exec/%s/json", eid);
        json_t *st = NULL;
        kiwi_error_t se = NULL;
        if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, &se) == 0) {
            json_t *jc = json_object_get (st, "ExitCode");
            code = json_is_integer (jc) ? (int) json_integer_value (jc) : -1;
        }
        kiwi_error_free (&se);
        json_decref (st);
        int checks = code >= 0 && code < 128 ? 1 : 20;
        for (int i = 0; i < checks && !c.lost; i++) {
            bool running = true, oom = false;
            int ccode = 0;
            if (container_state (s->p->api, s->id, &running, &oom, &ccode) == 0 && !running) {
                c.lost = true;
                c.oom = oom;
                c.exit_code = ccode;
            } else if (i + 1 < checks)
                usleep (100000);
        }
    }
    if (c.lost) {
        res->sandbox_lost = true;
        res->oom_killed = c.oom || memory_limit_hit (s);
        res->exit_code = -1;
        snprintf (res->lost_reason, sizeof res->lost_reason, "the sandbox died (exit %d%s)", c.exit_code,
                  res->oom_killed ? ", memory ceiling reached" : "");
    }
    res->output = kiwi_tailbuf_dup (&c.tail);
    res->output_dropped = c.tail.dropped;
    kiwi_tailbuf_clear (&c.tail);
    if (rc < 0) {
        *err = kiwi_error_steal (&e);
        return kiwi_error_wrap (err, "running `%s` in sandbox %s", spec->argv[0], s->name);
    }
    if (!res->timed_out && !res->sandbox_lost) {
        snprintf (path, sizeof path, "/exec/%s/json", eid);
        json_t *st = NULL;
        if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, err) < 0)
            return kiwi_error_wrap (err, "reading the exit status in sandbox %s", s->name);
        json_t *code = json_object_get (st, "ExitCode");
        res->exit_code = json_is_integer (code) ? (int) json_integer_value (code) : -1;
        json_decref (st);
        if (res->exit_code == 137)
            res->oom_killed = memory_limit_hit (s);
    }
    res->duration_ms = kiwi_mono_ms () - t0;
    return 0;
}

static int
docker_commit (void *sb, const char *ref, char **image_id, kiwi_error_t *err)
{
    docker_sb *s = sb;
    char repo[512], tag[128] = "latest";
    snprintf (repo, sizeof repo, "%s", ref);
    char *colon = strrchr (repo, ':');
    if (colon != NULL && strchr (colon, '/') == NULL) {
        *colon = '\0';
        snprintf (tag, sizeof tag, "%s", colon + 1);
    }
    cleanup_free char *er = kiwi_docker_urlencode (s->p->api, repo);
    cleanup_free char *et = kiwi_docker_urlencode (s->p->api, tag);
    char path[1024];
    snprintf (path, sizeof path, "/commit?container=%s&repo=%s&tag=%s&pause=1", s->id, er, et);
    json_t *out = NULL;
    if (kiwi_docker_call (s->p->api, "POST", path, NULL, 300000, &out, NULL, err) < 0)
        return kiwi_error_wrap (err, "committing sandbox %s as %s", s->name, ref);
    if (image_id)
        *image_id = strdup (json_string_value (json_object_get (out, "Id")) ?: "");
    json_decref (out);
    return 0;
}

static int
docker_inspect (void *sb, kiwi_sandbox_info *info, kiwi_error_t *err)
{
    docker_sb *s = sb;
    memset (info, 0, sizeof *info);
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/json", s->id);
    json_t *j = NULL;
    long status = 0;
    if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &j, &status, err) < 0) {
        if (status == 404)
            (*err)->code = KIWI_SBE_GONE;
        return kiwi_error_wrap (err, "inspecting sandbox %s", s->name);
    }
    json_t *st = json_object_get (j, "State");
    json_t *hc = json_object_get (j, "HostConfig");
    info->running = json_is_true (json_object_get (st, "Running"));
    info->oom_killed = json_is_true (json_object_get (st, "OOMKilled"));
    info->exit_code = (int) json_integer_value (json_object_get (st, "ExitCode"));
    snprintf (info->runtime, sizeof info->runtime, "%s", json_string_value (json_object_get (hc, "Runtime")) ?: "");
    snprintf (info->network_mode, sizeof info->network_mode, "%s",
              json_string_value (json_object_get (hc, "NetworkMode")) ?: "");
    json_decref (j);
    return 0;
}

static int
docker_destroy (void *sb, kiwi_error_t *err)
{
    docker_sb *s = sb;
    int rc = remove_all (s, err);
    if (rc < 0)
        kiwi_error_wrap (err, "removing sandbox %s (reap removes what is left)", s->name);
    else
        kiwi_debug ("sandbox %s: removed", s->name);
    sb_free (s);
    return rc;
}

typedef struct {
    json_t *live; /* names of containers still present */
    const char *prefix;
} reap_ctx;

static int
keep_disk (const char *name, void *ud)
{
    reap_ctx *r = ud;
    if (strncmp (name, r->prefix, strlen (r->prefix)) != 0)
        return 1; /* another worker's */
    return json_object_get (r->live, name) != NULL;
}

static int
docker_reap (void *priv, int *removed, kiwi_error_t *err)
{
    docker_priv *p = priv;
    *removed = 0;
    json_t *filters = json_pack ("{s:[s,s]}", "label", "org.kiwi.sandbox=1", "");
    char wl[256];
    snprintf (wl, sizeof wl, "org.kiwi.worker=%s", p->worker_id);
    json_array_set_new (json_object_get (filters, "label"), 1, json_string (wl));
    cleanup_free char *fj = json_dumps (filters, JSON_COMPACT);
    json_decref (filters);
    cleanup_free char *enc = kiwi_docker_urlencode (p->api, fj);
    char path[2048];
    snprintf (path, sizeof path, "/containers/json?all=1&filters=%s", enc);
    json_t *list = NULL;
    if (kiwi_docker_call (p->api, "GET", path, NULL, 30000, &list, NULL, err) < 0)
        return kiwi_error_wrap (err, "listing sandboxes left by worker %s", p->worker_id);
    size_t i;
    json_t *c;
    json_array_foreach (list, i, c)
    {
        const char *id = json_string_value (json_object_get (c, "Id"));
        char dpath[256];
        snprintf (dpath, sizeof dpath, "/containers/%s?force=1&v=1", id);
        kiwi_error_t e = NULL;
        if (kiwi_docker_call (p->api, "DELETE", dpath, NULL, 60000, NULL, NULL, &e) == 0)
            (*removed)++;
        else
            kiwi_warn ("reap: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
    }
    json_decref (list);
    char prefix[256];
    snprintf (prefix, sizeof prefix, "kiwi-%s-", p->worker_id);
    reap_ctx r = { .live = json_object (), .prefix = prefix };
    int disks = 0;
    int rc = kiwi_disk_reap (p->state_dir, keep_disk, &r, &disks, err);
    json_decref (r.live);
    *removed += disks;
    return rc;
}

static int
oneshot_tick (void *ud)
{
    exec_ctx *c = ud;
    if (kiwi_sandbox_cancelled ()) {
        c->cancelled = true;
        return -1;
    }
    return 0;
}

/* One-shot: create, put, start, follow the output, wait, remove. The
 * command is the container's first process, as with `docker run`. */
static int
docker_run_once (void *priv, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts, size_t nputs,
                 const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    docker_priv *p = priv;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (x->argv == NULL || x->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "one-shot sandbox run: empty command");
    int64_t t0 = kiwi_mono_ms ();
    docker_sb *s = NULL;
    if (create_container (p, spec, x, &s, err) < 0)
        return -1;
    int rc = -1;
    for (size_t i = 0; i < nputs; i++)
        if (docker_put_archive (s, puts[i].dir, puts[i].tar, puts[i].len, err) < 0)
            goto out;
    if (start_container (s, spec, err) < 0)
        goto out;
    exec_ctx c = { .spec = x, .s = s };
    kiwi_demux_init (&c.demux, exec_emit, &c);
    if (kiwi_tailbuf_init (&c.tail, x->output_cap ? x->output_cap : 65536) < 0) {
        kiwi_error_make (err, ENOMEM, "output buffer");
        goto out;
    }
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/logs?follow=1&stdout=1&stderr=1", s->id);
    kiwi_error_t e = NULL;
    int frc = kiwi_docker_request_stream_tick (p->api, "GET", path, NULL, NULL, 0, x->timeout_ms, exec_sink, &c,
                                               oneshot_tick, 1000, NULL, &e);
    if (frc < 0 && c.cancelled) {
        kill_container (s);
        kiwi_error_free (&e);
        kiwi_tailbuf_clear (&c.tail);
        kiwi_error_make_code (err, KIWI_SBE_CANCELLED, "`%s` in sandbox %s: cancelled", x->argv[0], s->name);
        goto out;
    }
    if (frc < 0 && kiwi_error_code (e) == 28 /* CURLE_OPERATION_TIMEDOUT */) {
        kill_container (s);
        res->timed_out = true;
        frc = 0;
    }
    res->output = kiwi_tailbuf_dup (&c.tail);
    res->output_dropped = c.tail.dropped;
    kiwi_tailbuf_clear (&c.tail);
    if (frc < 0) {
        *err = kiwi_error_steal (&e);
        kiwi_error_wrap (err, "following `%s` in sandbox %s", x->argv[0], s->name);
        goto out;
    }
    kiwi_error_free (&e);
    snprintf (path, sizeof path, "/containers/%s/wait", s->id);
    json_t *w = NULL;
    if (kiwi_docker_call (p->api, "POST", path, NULL, 60000, &w, NULL, err) < 0) {
        kiwi_error_wrap (err, "waiting for sandbox %s", s->name);
        goto out;
    }
    int code = (int) json_integer_value (json_object_get (w, "StatusCode"));
    json_decref (w);
    if (!res->timed_out) {
        res->exit_code = code;
        bool running = false, oom = false;
        int st_code = 0;
        if (container_state (p->api, s->id, &running, &oom, &st_code) == 0 && oom)
            res->oom_killed = true;
        else if (code == 137)
            res->oom_killed = memory_limit_hit (s);
    }
    rc = 0;
out:
    res->duration_ms = kiwi_mono_ms () - t0;
    {
        kiwi_error_t derr = NULL;
        if (remove_all (s, &derr) < 0) {
            if (rc == 0) {
                *err = kiwi_error_steal (&derr);
                kiwi_error_wrap (err, "removing sandbox %s", s->name);
                rc = -1;
            }
        }
        kiwi_error_free (&derr);
    }
    sb_free (s);
    return rc;
}

const kiwi_sandbox_driver kiwi_sandbox_driver_docker = {
    .name = "docker",
    .description = "containers under runc through dockerd's Engine API",
    .open = open_runc,
    .close = docker_close,
    .create = docker_create,
    .id = docker_id,
    .put_archive = docker_put_archive,
    .get_archive = docker_get_archive,
    .exec = docker_exec,
    .commit = docker_commit,
    .inspect = docker_inspect,
    .destroy = docker_destroy,
    .reap = docker_reap,
    .run_once = docker_run_once,
    .ensure_image = docker_ensure_image,
    .lays_lower = true,
};

const kiwi_sandbox_driver kiwi_sandbox_driver_gvisor = {
    .name = "gvisor",
    .description = "containers under gVisor (runsc) through dockerd's Engine API",
    .open = open_runsc,
    .close = docker_close,
    .create = docker_create,
    .id = docker_id,
    .put_archive = docker_put_archive,
    .get_archive = docker_get_archive,
    .exec = docker_exec,
    .commit = docker_commit,
    .inspect = docker_inspect,
    .destroy = docker_destroy,
    .reap = docker_reap,
    .run_once = docker_run_once,
    .ensure_image = docker_ensure_image,
    .lays_lower = true,
};
