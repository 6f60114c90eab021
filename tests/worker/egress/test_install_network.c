/*
 * test_install_network.c: workers that start together on a host where
 * their install network does not exist yet race to create it (the docker
 * driver's open); every one must come up, on the one network the winner
 * made. Against the real dockerd, on a bridge this test leases as a worker
 * does (install-bridge.h), so that no worker of a suite alongside uses it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "need.h"
#include "stack-env.h"
#include "sandbox/docker/docker-api.h"
#include "sandbox/sandbox.h"
#include "worker/egress/install-bridge.h"

/* How many networks of dockerd's use bridge `bridge`. */
static int
networks_on (kiwi_docker *api, const char *bridge)
{
    json_t *list = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_call (api, "GET", "/networks", NULL, 15000, &list, NULL, &err) < 0)
        fail_msg ("listing the networks: %s", kiwi_error_msg (err));
    int n = 0;
    size_t i;
    json_t *net;
    json_array_foreach (list, i, net)
    {
        const char *b = json_string_value (json_object_get (json_object_get (net, "Options"),
                                                            "com.docker.network.bridge.name"));
        n += b != NULL && strcmp (b, bridge) == 0;
    }
    json_decref (list);
    return n;
}

#define RACERS 6

/* dockerd refuses the race's losers with 409 or 403, depending on which of
 * its checks the race reaches; each loser must then use the winner's
 * network. The leased bridge's network is deleted first. */
static void
test_install_network_race (void **state)
{
    char bridge[32] = "";
    int lock = -1;
    kiwi_error_t err = NULL;
    for (int n = KIWI_INSTALL_BRIDGES - 1; n > 0 && lock < 0; n--) {
        char want[32];
        snprintf (want, sizeof want, KIWI_INSTALL_BRIDGE_PREFIX "%d", n);
        if (kiwi_install_bridge_claim (KIWI_INSTALL_BRIDGE_LOCK_DIR, want, bridge, sizeof bridge, &lock, &err) < 0)
            kiwi_error_free (&err);
    }
    if (lock < 0)
        fail_msg ("no install bridge but kiwi-install0 is free to lease");
    const char *sock = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock");
    kiwi_docker *api = NULL;
    if (kiwi_docker_open (sock, &api, &err) < 0)
        fail_msg ("dockerd: %s", kiwi_error_msg (err));
    char path[64];
    snprintf (path, sizeof path, "/networks/%s", bridge);
    long status = 0;
    if (kiwi_docker_call (api, "DELETE", path, NULL, 30000, NULL, &status, &err) < 0) {
        if (status != 404)
            fail_msg ("deleting the %s network: %s", bridge, kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
    assert_int_equal (networks_on (api, bridge), 0);

    int gate[2];
    assert_int_equal (pipe (gate), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork ();
        assert_true (pids[i] >= 0);
        if (pids[i] == 0) {
            close (gate[1]);
            char c;
            (void) !read (gate[0], &c, 1); /* until the parent closes its end: all at once */
            char id[32];
            snprintf (id, sizeof id, "race-%d", i);
            kiwi_sandbox_config cfg = { .docker_socket = sock,
                                        .state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
                                        .worker_id = id, .install_bridge = bridge };
            const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find ("docker", &err);
            kiwi_sandbox_env *env = NULL;
            if (drv == NULL || kiwi_sandbox_env_open (drv, &cfg, &env, &err) < 0) {
                fprintf (stderr, "racer %d: %s\n", i, kiwi_error_msg (err));
                _exit (1);
            }
            kiwi_sandbox_env_close (env);
            _exit (0);
        }
    }
    close (gate[0]);
    close (gate[1]);
    int failed = 0;
    for (int i = 0; i < RACERS; i++) {
        int st = 0;
        assert_int_equal (waitpid (pids[i], &st, 0), pids[i]);
        failed += !(WIFEXITED (st) && WEXITSTATUS (st) == 0);
    }
    assert_int_equal (failed, 0);
    assert_int_equal (networks_on (api, bridge), 1);
    kiwi_docker_close (api);
    close (lock);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_install_network_race),
    };
    return kiwi_run_group ("install_network", tests, NULL, NULL);
}
