/*
 * proxied-install.c: see proxied-install.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxied-install.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"
#include "shell.h"
#include "sandbox/docker/docker-api.h"
#include "worker/config.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/install-bridge.h"
#include "worker/egress/private-registry.h"

#define NETWORK_LABEL "org.kiwi.network"
#define NETWORK_KIND "install-internal"

/* Removes the install network of `bridge`: 0 when it is gone (or was
 * never there), -1 with *err otherwise. */
static int
delete_network (kiwi_docker *api, const char *bridge, kiwi_error_t *err)
{
    char name[64], path[128];
    if (kiwi_install_network_name (bridge, name, sizeof name, NULL, err) < 0)
        return -1;
    snprintf (path, sizeof path, "/networks/%s", name);
    long status = 0;
    if (kiwi_docker_call (api, "DELETE", path, NULL, 30000, NULL, &status, err) < 0) {
        if (status != 404)
            return kiwi_error_wrap (err, "removing the %s network", name);
        kiwi_error_free (err);
    }
    return 0;
}

/* The install network of `bridge` made anew as an internal network: a
 * network left by a worker that ran on that bridge is removed first (no
 * worker runs on it now: the lease is ours). */
static void
internal_network (kiwi_docker *api, const char *bridge)
{
    char name[64];
    kiwi_error_t err = NULL;
    if (delete_network (api, bridge, &err) < 0)
        fail_msg ("the network left on %s: %s", bridge, kiwi_error_msg (err));
    if (kiwi_install_network_name (bridge, name, sizeof name, NULL, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    long status = 0;
    json_t *body = json_pack ("{s:s,s:s,s:b,s:b,s:{s:s,s:s,s:s},s:{s:s}}", "Name", name, "Driver", "bridge",
                              "CheckDuplicate", 1, "Internal", 1, "Options", "com.docker.network.bridge.enable_icc",
                              "false", "com.docker.network.bridge.name", bridge,
                              "com.docker.network.bridge.enable_ip_masquerade", "false", "Labels", NETWORK_LABEL,
                              NETWORK_KIND);
    int rc = kiwi_docker_call (api, "POST", "/networks/create", body, 30000, NULL, &status, &err);
    json_decref (body);
    if (rc < 0)
        fail_msg ("creating the internal network %s on %s: %s", name, bridge, kiwi_error_msg (err));
}

static kiwi_docker *
docker (void)
{
    kiwi_docker *api = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_open (kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), &api, &err) < 0)
        fail_msg ("dockerd: %s", kiwi_error_msg (err));
    return api;
}

void
kiwi_test_proxied_open (kiwi_test_proxied *p, const char *name, const char *worker_id)
{
    memset (p, 0, sizeof *p);
    p->lock = -1;
    p->proxy_env = (kiwi_strv) KIWI_STRV_INIT;
    KIWI_NEED (geteuid () == 0, "root (an install bridge and its proxy)");
    KIWI_NEED (access ("/usr/sbin/squid", X_OK) == 0, "squid (Debian: squid-openssl)");
    kiwi_error_t err = NULL;
    /* kiwi-install0 is the bridge of every driver opened without a lease
     * (the other tests): from kiwi-install1 up; test_install_network
     * leases from the top down */
    for (int n = 1; n < KIWI_INSTALL_BRIDGES && p->lock < 0; n++) {
        char want[32];
        snprintf (want, sizeof want, KIWI_INSTALL_BRIDGE_PREFIX "%d", n);
        if (kiwi_install_bridge_claim (KIWI_INSTALL_BRIDGE_LOCK_DIR, want, p->bridge, sizeof p->bridge, &p->lock,
                                       &err)
            < 0)
            kiwi_error_free (&err);
    }
    if (p->lock < 0)
        fail_msg ("no install bridge free to lease (kiwi-install1 .. kiwi-install%d all held)",
                  KIWI_INSTALL_BRIDGES - 1);
    kiwi_docker *api = docker ();
    internal_network (api, p->bridge);
    kiwi_docker_close (api);

    char id[128], state[600], bridge[64], wid[160], ca[600] = "";
    snprintf (id, sizeof id, "%s-%d", worker_id, (int) getpid ());
    snprintf (state, sizeof state, "KIWI_STATE_DIR=%s", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"));
    snprintf (bridge, sizeof bridge, "KIWI_INSTALL_BRIDGE=%s", p->bridge);
    snprintf (wid, sizeof wid, "KIWI_WORKER_ID=%s", id);
    if (getenv ("KIWI_CA_BUNDLE") && *getenv ("KIWI_CA_BUNDLE"))
        snprintf (ca, sizeof ca, "KIWI_CA_BUNDLE=%s", getenv ("KIWI_CA_BUNDLE"));
    const char *env[] = { state, bridge, wid, "KIWI_EGRESS_PROXY_SCRIPT=" KIWI_SOURCE_DIR "/ops/egress/proxy.sh",
                          "KIWI_INSTALL_EGRESS=registries", ca[0] ? ca : NULL, NULL };
    kiwi_worker_config cfg;
    kiwi_worker_config_init (&cfg);
    int idx = 0;
    if (kiwi_worker_config_load (&cfg, NULL, env, 0, NULL, 0, &idx, &err) < 0
        || kiwi_proxy_dir (&cfg, p->proxy_dir, sizeof p->proxy_dir, &err) < 0
        || kiwi_proxy_start_once (&cfg, &p->proxy, &err) < 0)
        fail_msg ("the egress proxy on %s: %s", p->bridge, kiwi_error_msg (err));
    bool on = false;
    if (kiwi_proxy_phase_env (&cfg, &p->proxy_env, &on, &err) < 0)
        fail_msg ("Phase A's proxy settings: %s", kiwi_error_msg (err));
    assert_true (on);
    const char *bundle = NULL;
    if (kiwi_egress_phase_ca_bundle (&cfg, on, p->ca_bundle, sizeof p->ca_bundle, &bundle, &err) < 0)
        fail_msg ("Phase A's CA bundle: %s", kiwi_error_msg (err));
    assert_ptr_equal (bundle, p->ca_bundle);
    kiwi_worker_config_clear (&cfg);

    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (name, &err);
    assert_non_null (drv);
    kiwi_sandbox_config sc = {
        .docker_socket = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"),
        .state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
        .worker_id = id,
        .image_catalog = kiwi_test_env_or ("KIWI_IMAGE_CATALOG", KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv"),
        .install_bridge = p->bridge,
    };
    int rc = kiwi_sandbox_env_open (drv, &sc, &p->env, &err);
    KIWI_NEED (rc == 0, "%s driver: %s", name, kiwi_error_msg (err));
}

void
kiwi_test_proxied_close (kiwi_test_proxied *p)
{
    if (p->env)
        kiwi_sandbox_env_close (p->env);
    p->env = NULL;
    kiwi_proxy_stop (p->proxy);
    p->proxy = 0;
    if (p->bridge[0]) {
        kiwi_docker *api = docker ();
        kiwi_error_t err = NULL;
        if (delete_network (api, p->bridge, &err) < 0) {
            fprintf (stderr, "proxied install: %s\n", kiwi_error_msg (err));
            kiwi_error_free (&err);
        }
        kiwi_docker_close (api);
    }
    if (p->proxy_dir[0])
        kiwi_test_shf ("rm -rf '%s'", p->proxy_dir);
    if (p->ca_bundle[0])
        unlink (p->ca_bundle);
    kiwi_strv_free (&p->proxy_env);
    if (p->lock >= 0)
        close (p->lock);
    p->lock = -1;
}

const char *
kiwi_test_proxied_log (const kiwi_test_proxied *p, char *buf, size_t cap)
{
    snprintf (buf, cap, "%s/access.log", p->proxy_dir);
    return buf;
}
