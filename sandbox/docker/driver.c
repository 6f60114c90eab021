/*
 * driver.c: the Docker and gVisor drivers.
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
 *
 * This file is the sandbox's lifecycle: opening the driver (runtimes, the
 * install network), creating, committing, inspecting, destroying and
 * reaping sandboxes, and the two driver tables. The container body is in
 * driver-body.c, commands and file copies in driver-exec.c,
 * image pulls in driver-pull.c.
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

/* Whether the install network exists: 1, 0 (404), or -1 with *err. */
static int
install_network_exists (const kiwi__docker_priv *p, kiwi_error_t *err)
{
    long status = 0;
    kiwi_error_t e = NULL;
    char path[64];
    snprintf (path, sizeof path, "/networks/%s", p->install_network);
    if (kiwi_docker_call (p->api, "GET", path, NULL, 15000, NULL, &status, &e) == 0)
        return 1;
    kiwi_error_free (&e);
    if (status != 404)
        return kiwi_error_make (err, 0, "checking the %s network: HTTP %ld", p->install_network, status);
    return 0;
}

/* Creates the install network `p->install_network` on bridge
 * `p->install_bridge` if it is missing. Processes that open the driver at
 * once on a host that has no such network yet (workers starting together,
 * or tests side by side) race to create it: dockerd refuses the losers
 * (409 for the name, or 403 for the bridge name, whichever check the race
 * reaches), and a loser then finds the winner's network and uses it. The
 * bridge check can refuse a loser before the winner's network is listed
 * by name (dockerd holds the bridge first), and the winner can still fail
 * and roll back: a loser looks again, then tries the create again, for up
 * to INSTALL_NETWORK_RACE_TRIES rounds 100 ms apart. */
#define INSTALL_NETWORK_RACE_TRIES 50

static int
ensure_install_network (const kiwi__docker_priv *p, kiwi_error_t *err)
{
    for (int attempt = 0;; attempt++) {
        long status = 0;
        int have = install_network_exists (p, err);
        if (have != 0)
            return have < 0 ? -1 : 0;
        json_t *body = json_pack ("{s:s,s:s,s:b,s:b,s:{s:s,s:s,s:s},s:{s:s}}", "Name", p->install_network,
                                  "Driver", "bridge", "CheckDuplicate", 1, "EnableIPv6", 0, "Options",
                                  "com.docker.network.bridge.enable_icc", "false",
                                  "com.docker.network.bridge.name", p->install_bridge,
                                  "com.docker.network.bridge.enable_ip_masquerade", "true", "Labels",
                                  "org.kiwi.network", "install");
        int rc = kiwi_docker_call (p->api, "POST", "/networks/create", body, 30000, NULL, &status, err);
        json_decref (body);
        if (rc == 0)
            return 0;
        if ((status != 409 && status != 403) || attempt + 1 >= INSTALL_NETWORK_RACE_TRIES)
            return kiwi_error_wrap (err, "creating the %s network (bridge %s) for Phase A", p->install_network,
                                    p->install_bridge);
        kiwi_error_free (err);
        struct timespec pause = { 0, 100L * 1000 * 1000 };
        nanosleep (&pause, NULL);
    }
}

static void docker_close (void *priv);

/* <state>/gvisor-resolv.conf for Phase A (resolv.h). Without it Phase A
 * keeps Docker's file, whose resolver gVisor cannot reach: a warning, not
 * a failure (Phase B and sessions need no resolver). */
static void
write_install_resolv (kiwi__docker_priv *p)
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
    kiwi__docker_priv *p = calloc (1, sizeof *p);
    if (p == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox driver");
    p->fl = *flavour;
    const char *bridge = kiwi_install_bridge_or_default (cfg->install_bridge);
    if (kiwi_install_network_name (bridge, p->install_network, sizeof p->install_network, NULL, err) < 0) {
        free (p);
        return -1;
    }
    snprintf (p->install_bridge, sizeof p->install_bridge, "%s", bridge);
    p->state_dir = strdup (cfg->state_dir ? cfg->state_dir : "/var/lib/kiwi");
    p->worker_id = strdup (cfg->worker_id ? cfg->worker_id : "worker");
    if (kiwi__docker_pull_cfg_init (&p->pull, cfg, p->state_dir, err) < 0) {
        docker_close (p);
        return -1;
    }
    const char *sock = cfg->docker_socket ? cfg->docker_socket : "/var/run/docker.sock";
    if (kiwi_docker_open (sock, &p->api, err) < 0) {
        docker_close (p);
        (*err)->code = KIWI_SBE_UNAVAILABLE;
        return -1;
    }
    json_t *info = NULL;
    if (kiwi_docker_call (p->api, "GET", "/info", NULL, 15000, &info, NULL, err) == 0) {
        json_t *rts = json_object_get (info, "Runtimes");
        const char *need[] = { p->fl.runtime, p->fl.install_runtime };
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
        if (p->fl.sealed_runtime != NULL && json_object_get (rts, p->fl.sealed_runtime) == NULL) {
            kiwi_warn ("dockerd at %s has no `%s` runtime: Phase B's verify runs under `%s`, which reads the "
                       "dependencies slower (see ops/README.md: \"runtimes\" in daemon.json)",
                       sock, p->fl.sealed_runtime, p->fl.runtime);
            p->fl.sealed_runtime = NULL;
        }
        json_decref (info);
        if (ensure_install_network (p, err) < 0) {
            docker_close (p);
            return -1;
        }
        if (p->fl.install_resolv_conf)
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
    kiwi__docker_priv *p = priv;
    if (p == NULL)
        return;
    kiwi_docker_close (p->api);
    kiwi_docker_close (p->probe);
    free (p->state_dir);
    free (p->worker_id);
    kiwi__docker_pull_cfg_clear (&p->pull);
    free (p->resolv_path);
    free (p);
}

static int
docker_ensure_image (void *priv, const char *image, kiwi_pull_progress_cb progress, void *userdata, bool *pulled,
                     kiwi_error_t *err)
{
    kiwi__docker_priv *p = priv;
    return kiwi__docker_ensure_image (p->api, &p->pull, image, progress, userdata, pulled, err);
}

void
kiwi__docker_sb_free (kiwi__docker_sb *s)
{
    free (s->id);
    free (s->name);
    free (s);
}

/* Removes the container (if any) and the disk; frees nothing else. */
int
kiwi__docker_remove_all (kiwi__docker_sb *s, kiwi_error_t *err)
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

/* The image `name` as dockerd holds it: *id its Id (owned by the caller)
 * and *volumes its Config.Volumes (a new reference, NULL when it declares
 * none). An image the daemon lacks is KIWI_SBE_NO_IMAGE. */
static int
image_volumes (kiwi__docker_priv *p, const char *name, char **id, json_t **volumes, kiwi_error_t *err)
{
    *id = NULL;
    *volumes = NULL;
    json_t *doc = NULL;
    long status = 0;
    if (kiwi_docker_image_inspect (p->api, name, &doc, &status, err) < 0) {
        if (status == 404)
            (*err)->code = KIWI_SBE_NO_IMAGE;
        return -1;
    }
    const char *v = json_string_value (json_object_get (doc, "Id"));
    if (v == NULL || (*id = strdup (v)) == NULL) {
        json_decref (doc);
        return kiwi_error_make (err, v ? ENOMEM : 0, "image %s: no Id in the daemon's answer", name);
    }
    *volumes = json_incref (json_object_get (json_object_get (doc, "Config"), "Volumes"));
    json_decref (doc);
    return 0;
}

/* Refuses a created container that dockerd gave a volume of its own (a
 * path the masks missed): the container is never started with it. */
static int
check_no_volume (kiwi__docker_sb *s, kiwi_error_t *err)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/json", s->id);
    json_t *j = NULL;
    if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &j, NULL, err) < 0)
        return kiwi_error_wrap (err, "inspecting sandbox %s", s->name);
    size_t i;
    json_t *m;
    int rc = 0;
    json_array_foreach (json_object_get (j, "Mounts"), i, m)
    {
        const char *type = json_string_value (json_object_get (m, "Type"));
        if (type != NULL && strcmp (type, "bind") != 0 && strcmp (type, "tmpfs") != 0) {
            const char *dest = json_string_value (json_object_get (m, "Destination"));
            rc = kiwi_error_make_code (err, KIWI_SBE_INVALID,
                                       "dockerd gave sandbox %s a %s mount at %s outside its disk: refused", s->name,
                                       type, dest ? dest : "?");
            break;
        }
    }
    json_decref (j);
    return rc;
}

/* Creates the disk and the container; `oneshot` as in
 * kiwi__docker_create_body. The container is not started. It is made from
 * the image's Id, so the volumes masked are those of the image it runs. */
int
kiwi__docker_create_container (kiwi__docker_priv *p, const kiwi_sandbox_spec *spec, const kiwi_exec_spec *oneshot,
                               kiwi__docker_sb **out, kiwi_error_t *err)
{
    cleanup_free char *image_id = NULL;
    json_t *volumes = NULL;
    if (spec->image == NULL || *spec->image == '\0')
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "sandbox spec has no image");
    if (image_volumes (p, spec->image, &image_id, &volumes, err) < 0)
        return kiwi_error_wrap (err, "creating a sandbox from %s", spec->image);
    kiwi__docker_sb *s = calloc (1, sizeof *s);
    if (s == NULL) {
        json_decref (volumes);
        return kiwi_error_make (err, ENOMEM, "sandbox");
    }
    s->p = p;
    unsigned rnd = kiwi_sandbox_name_nonce ();
    if (asprintf (&s->name, "kiwi-%s-%08x", p->worker_id, rnd) < 0) {
        json_decref (volumes);
        free (s);
        return kiwi_error_make (err, ENOMEM, "sandbox");
    }
    int64_t disk_mb = spec->limits.disk_mb > 0 ? spec->limits.disk_mb : KIWI_SANDBOX_DEFAULT_DISK_MB;
    if (kiwi_disk_create (p->state_dir, s->name, disk_mb, KIWI_SANDBOX_UID, KIWI_SANDBOX_GID, spec->lower_dir,
                          &s->disk, err) < 0) {
        json_decref (volumes);
        kiwi__docker_sb_free (s);
        return -1;
    }
    json_t *body
        = kiwi__docker_create_body (&p->fl, spec, kiwi_disk_mountpoint (s->disk), p->resolv_path, p->worker_id,
                                    p->install_network, oneshot, err);
    if (body != NULL && kiwi__docker_mask_volumes (body, volumes, s->disk, err) < 0) {
        kiwi_error_wrap (err, "image %s", spec->image);
        json_decref (body);
        body = NULL;
    }
    json_decref (volumes);
    if (body == NULL)
        goto fail;
    json_object_set_new (body, "Image", json_string (image_id));
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
    if (check_no_volume (s, err) < 0)
        goto fail;
    *out = s;
    return 0;
fail:
    kiwi__docker_remove_all (s, NULL);
    kiwi__docker_sb_free (s);
    return -1;
}

int
kiwi__docker_start_container (kiwi__docker_sb *s, const kiwi_sandbox_spec *spec, kiwi_error_t *err)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/start", s->id);
    if (kiwi_docker_call (s->p->api, "POST", path, NULL, 60000, NULL, NULL, err) < 0)
        return kiwi_error_wrap (err, "starting sandbox %s (runtime %s)", s->name,
                                kiwi__docker_runtime (&s->p->fl, spec));
    return 0;
}

static int
docker_create (void *priv, const kiwi_sandbox_spec *spec, void **out, kiwi_error_t *err)
{
    kiwi__docker_priv *p = priv;
    kiwi__docker_sb *s = NULL;
    if (kiwi__docker_create_container (p, spec, NULL, &s, err) < 0)
        return -1;
    if (kiwi__docker_start_container (s, spec, err) < 0) {
        kiwi__docker_remove_all (s, NULL);
        kiwi__docker_sb_free (s);
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
    return ((kiwi__docker_sb *) sb)->name;
}

/* The image's content-addressed Id, as dockerd holds it. */
static int
docker_image_id (void *priv, const char *image, char **id, kiwi_error_t *err)
{
    kiwi__docker_priv *p = priv;
    return kiwi_docker_image_id (p->api, image, id, err);
}

static int
docker_inspect (void *sb, kiwi_sandbox_info *info, kiwi_error_t *err)
{
    kiwi__docker_sb *s = sb;
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
    const char *net_name;
    json_t *net;
    json_object_foreach (json_object_get (json_object_get (j, "NetworkSettings"), "Networks"), net_name, net) {
        const char *ip = json_string_value (json_object_get (net, "IPAddress"));
        if (ip != NULL && *ip != '\0') {
            snprintf (info->address, sizeof info->address, "%s", ip);
            break;
        }
    }
    json_decref (j);
    return 0;
}

static int
docker_destroy (void *sb, kiwi_error_t *err)
{
    kiwi__docker_sb *s = sb;
    int rc = kiwi__docker_remove_all (s, err);
    kiwi__docker_sb_free (s);
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
    kiwi__docker_priv *p = priv;
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

static bool
docker_seals_files (void *priv)
{
    const kiwi__docker_priv *p = priv;
    return p->fl.sealed_runtime != NULL && strcmp (p->fl.sealed_runtime, p->fl.runtime) != 0;
}

/* A sandbox is its container and its disk; the env only lends the
 * connection to dockerd, so another env of the same flavour and state
 * directory can take it over. */
static void
docker_adopt (void *priv, void *sb)
{
    ((kiwi__docker_sb *) sb)->p = priv;
}

/* What the two flavours share: every operation but open. */
#define DOCKER_DRIVER_OPS                                                                                              \
    .close = docker_close, .create = docker_create, .id = docker_id, .put_archive = kiwi__docker_put_archive,        \
    .get_archive = kiwi__docker_get_archive, .exec = kiwi__docker_exec, .image_id = docker_image_id,                      \
    .inspect = docker_inspect, .destroy = docker_destroy, .reap = docker_reap, .run_once = kiwi__docker_run_once,    \
    .ensure_image = docker_ensure_image, .gc_images = kiwi__docker_gc_images, .lays_lower = true, .seals_files = docker_seals_files,                      \
    .adopt = docker_adopt

const kiwi_sandbox_driver kiwi_sandbox_driver_docker = {
    .name = "docker",
    .description = "containers under runc through dockerd's Engine API",
    .open = open_runc,
    DOCKER_DRIVER_OPS,
};

const kiwi_sandbox_driver kiwi_sandbox_driver_gvisor = {
    .name = "gvisor",
    .description = "containers under gVisor (runsc) through dockerd's Engine API",
    .open = open_runsc,
    DOCKER_DRIVER_OPS,
};
