/*
 * main.c: kiwi-worker.
 *
 *   kiwi-worker [options]            the daemon: tasks from Kafka, in slots
 *   kiwi-worker --once TASK.json     one task on this machine, no broker;
 *                                    events and the result as JSON lines
 *   kiwi-worker --gc                 one clean-up pass of the state dir (gc.h)
 *   kiwi-worker --help | --help-config | --print-config | --version
 *
 * Settings: see --help-config (flags, environment, a config file).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/config.h"
#include "worker/daemon/daemon.h"
#include "worker/task/cache.h"
#include "worker/egress/egress.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/install-bridge.h"
#include "worker/egress/private-registry.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/pidlock.h"
#include "worker/task/pipeline.h"
#include "worker/task/secrets.h"
#include "worker/task/policy.h"

extern char **environ;

/* The mode flags, picked out of argv before the settings flags are read;
 * usage() below is their --help. */
enum { MODE_HELP = 1, MODE_HELP_CONFIG, MODE_VERSION, MODE_TASK_CHILD, MODE_EGRESS_CHECK, MODE_GC,
       MODE_PRINT_CONFIG, MODE_ONCE };

static const kiwi_opt mode_opts[] = {
    { MODE_HELP, "help", 'h', NULL, NULL },
    { MODE_HELP_CONFIG, "help-config", 0, NULL, NULL },
    { MODE_VERSION, "version", 0, NULL, NULL },
    { MODE_TASK_CHILD, "task-child", 0, NULL, NULL },
    { MODE_EGRESS_CHECK, "egress-check", 0, NULL, NULL },
    { MODE_GC, "gc", 0, NULL, NULL },
    { MODE_GC, "gc-snapshots", 0, NULL, NULL },
    { MODE_PRINT_CONFIG, "print-config", 0, NULL, NULL },
    { MODE_ONCE, "once", 0, "FILE", NULL },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_opts_spec mode_spec = { .opts = mode_opts, .help_hint = "--help", .flags = KIWI_OPTS_KEEP };

static void
usage (FILE *out)
{
    fprintf (out,
             "usage: kiwi-worker [options]\n"
             "       kiwi-worker --once TASK.json [options]\n"
             "\n"
             "Runs Kiwi's worker: takes fix tasks from Kafka (a consumer group), runs each in a task\n"
             "process (Phase A install, step 0, the Architect/Implementer session in sandboxes), and\n"
             "publishes progress events, results and heartbeats.\n"
             "\n"
             "  --once FILE        run one task from a JSON file on this machine, without a broker;\n"
             "                     print its events and result as JSON lines (exit 0 when fixed);\n"
             "                     Phase A's egress proxy (KIWI_INSTALL_EGRESS) runs for that task\n"
             "  --config FILE      settings file (key = value lines); also KIWI_CONFIG\n"
             "  --help-config      every setting: flag, environment variable, default, accepted values\n"
             "  --print-config     the effective settings, then exit\n"
             "  --egress-check     run the egress checks once, one JSON line each (exit 0 when all hold)\n"
             "  --gc               one clean-up pass of the state dir, then exit: workspaces of dead task\n"
             "                     processes, fetches a dead worker left, idle mirrors and snapshots, old\n"
             "                     whole diffs, and the least recently used above KIWI_GC_DISK_HIGH\n"
             "                     (--gc-snapshots: the same); then the images Kiwi pulled for tasks,\n"
             "                     unused for KIWI_GC_IMAGE_IDLE or above the watermark of Docker's storage\n"
             "  --version          print the version\n"
             "\n"
             "Settings come from defaults, the config file, the environment, then flags.\n"
             "Signals: SIGTERM/SIGINT drain (no new tasks, in-flight ones get --drain-timeout).\n");
}

/* With an egress proxy, the daemon's own install bridge (install-bridge.h),
 * into cfg and the environment its task and egress-check processes
 * inherit; *fd holds it. In open mode nothing is claimed. */
static int
claim_bridge (kiwi_worker_config *cfg, int *fd, kiwi_error_t *err)
{
    bool proxied;
    if (kiwi_install_egress_proxied (cfg, &proxied, err) < 0)
        return -1;
    if (!proxied) {
        /* not open, yet not proxied: the driver has no install bridge */
        kiwi_install_egress e;
        if (kiwi_install_egress_parse (cfg->install_egress, &e, NULL) == 0 && !e.open)
            kiwi_warn ("KIWI_INSTALL_EGRESS=%s is not enforced under the %s driver: its Phase A leaves by its own "
                       "tap bridge, not through the egress proxy (ops/firecracker/README.md)",
                       cfg->install_egress, cfg->sandbox);
        kiwi_install_egress_clear (&e);
        return 0;
    }
    char name[16];
    if (kiwi_install_bridge_claim (KIWI_INSTALL_BRIDGE_LOCK_DIR, cfg->install_bridge, name, sizeof name, fd, err) < 0)
        return -1;
    char *copy = strdup (name);
    if (copy == NULL || setenv ("KIWI_INSTALL_BRIDGE", name, 1) < 0) {
        free (copy);
        close (*fd);
        *fd = -1;
        return kiwi_error_make (err, ENOMEM, "KIWI_INSTALL_BRIDGE");
    }
    free (cfg->install_bridge);
    cfg->install_bridge = copy;
    kiwi_info ("install bridge: %s (held while this worker runs; lock in %s)", name, KIWI_INSTALL_BRIDGE_LOCK_DIR);
    return 0;
}

/* Where each running worker (the daemon, --once) holds the lock of its id. */
#define KIWI_WORKER_ID_LOCK_DIR "/run/kiwi/workers"

/* This worker's id, for as long as it runs: an exclusive lock on
 * <KIWI_WORKER_ID_LOCK_DIR>/<id>.lock (pidlock.h), *fd holding it. Two
 * workers with one id on a host would share the egress proxy's files
 * (<state>/egress-proxy/<id>: the second one's proxy.sh run stops the
 * first one's Squid) and the sandboxes' names and labels (each one's start
 * removes the other's as left over): the second refuses to start, naming
 * the id and the holder. */
static int
claim_worker_id (const kiwi_worker_config *cfg, int *fd, kiwi_error_t *err)
{
    const char *id = cfg->worker_id;
    if (id == NULL || *id == '\0' || strchr (id, '/') != NULL || id[0] == '.')
        return kiwi_error_make (err, EINVAL, "KIWI_WORKER_ID=%s: an id is a file name (no '/', not empty, no "
                                             "leading '.')", id ? id : "");
    if (kiwi_fs_mkdir_p (KIWI_WORKER_ID_LOCK_DIR, 0755) < 0)
        return kiwi_error_make (err, errno, "worker id locks: creating %s", KIWI_WORKER_ID_LOCK_DIR);
    char path[PATH_MAX], who[64];
    int n = snprintf (path, sizeof path, "%s/%s.lock", KIWI_WORKER_ID_LOCK_DIR, id);
    if (n < 0 || (size_t) n >= sizeof path)
        return kiwi_error_make (err, ENAMETOOLONG, "KIWI_WORKER_ID=%s: too long", id);
    int rc = kiwi_pidlock_take (path, fd, who, sizeof who, err);
    if (rc < 0)
        return kiwi_error_wrap (err, "KIWI_WORKER_ID=%s", id);
    if (rc == 0)
        return kiwi_error_make (err, EBUSY,
                                "KIWI_WORKER_ID=%s is held by another kiwi-worker on this host (%s, lock %s): two "
                                "workers with one id would stop each other's egress proxy and remove each other's "
                                "sandboxes; give this one an id of its own",
                                id, who, path);
    return 0;
}

int
main (int argc, char **argv)
{
    /* the mode flags first (wherever they are); the rest are settings */
    kiwi_args modes = { 0 };
    kiwi_error_t err = NULL;
    if (kiwi_opts_parse (&mode_spec, argc, argv, 1, &modes, &err) < 0) {
        fprintf (stderr, "kiwi-worker: %s\n", kiwi_error_msg (err));
        return 2;
    }
    const char *once = NULL;
    int task_child = 0, print_config = 0, egress_check = 0, gc = 0;
    for (size_t k = 0; k < modes.n_opts; k++) {
        switch (modes.opts[k].id) {
        case MODE_HELP:
            usage (stdout);
            return 0;
        case MODE_HELP_CONFIG:
            kiwi_worker_config_help (stdout);
            return 0;
        case MODE_VERSION:
            printf ("kiwi-worker %s\n", KIWI_VERSION);
            return 0;
        case MODE_TASK_CHILD:
            task_child = 1;
            break;
        case MODE_EGRESS_CHECK:
            egress_check = 1;
            break;
        case MODE_GC:
            gc = 1;
            break;
        case MODE_PRINT_CONFIG:
            print_config = 1;
            break;
        case MODE_ONCE:
            once = modes.opts[k].value;
            break;
        }
    }
    char **rest = calloc (modes.n_pos + 2, sizeof *rest);
    if (rest == NULL) {
        fprintf (stderr, "kiwi-worker: out of memory\n");
        return 1;
    }
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (size_t k = 0; k < modes.n_pos; k++)
        rest[nrest++] = modes.pos[k];
    kiwi_args_clear (&modes);
    kiwi_worker_config cfg;
    kiwi_worker_config_init (&cfg);
    int idx = 0;
    if (kiwi_worker_config_load (&cfg, NULL, (const char *const *) environ, nrest, rest, 1, &idx, &err) < 0) {
        fprintf (stderr, "kiwi-worker: %s\n", kiwi_error_msg (err));
        return 2;
    }
    if (idx < nrest) {
        fprintf (stderr, "kiwi-worker: unexpected argument `%s` (see --help)\n", rest[idx]);
        return 2;
    }
    if (kiwi_policy_check_config (&cfg, &err) < 0) {
        fprintf (stderr, "kiwi-worker: %s\n", kiwi_error_msg (err));
        return 2;
    }
    if (kiwi_private_registries_check (&cfg, &err) < 0 || kiwi_go_private_check (&cfg, &err) < 0) {
        fprintf (stderr, "kiwi-worker: %s\n", kiwi_error_msg (err));
        return 2;
    }
    free (rest);
    kiwi_log_level lv = KIWI_LOG_INFO;
    kiwi_log_level_parse (cfg.log_level, &lv);
    kiwi_log_init (task_child ? "kiwi-task" : "kiwi-worker");
    kiwi_log_set_level (lv);
    /* the worker's own keys and token never appear in a log line (a task
     * process masks its task's secrets on top, pipeline.c) */
    kiwi_mask *mask = kiwi_worker_mask (&cfg, (const char *const *) environ, NULL, &err);
    if (mask == NULL) {
        kiwi_errorf ("%s", kiwi_error_msg (err));
        return 1;
    }
    kiwi_log_set_mask (mask);
    if (print_config) {
        kiwi_worker_config_dump (&cfg, stdout);
        kiwi_worker_config_clear (&cfg);
        return 0;
    }
    int status;
    int bridge_fd = -1, id_fd = -1;
    if (task_child)
        status = kiwi_pipeline_child_main (&cfg);
    else if (egress_check)
        status = kiwi_egress_check_main (&cfg);
    else if (gc)
        status = kiwi_cache_gc_main (&cfg) < 0 ? 1 : 0;
    else if (claim_worker_id (&cfg, &id_fd, &err) < 0) {
        /* the daemon and --once, one per id on a host */
        kiwi_errorf ("%s", kiwi_error_msg (err));
        status = 2;
    } else if (claim_bridge (&cfg, &bridge_fd, &err) < 0) {
        /* the daemon and --once run an egress proxy on a bridge of their own */
        kiwi_errorf ("%s", kiwi_error_msg (err));
        status = 2;
    } else if (once)
        status = kiwi_pipeline_once_main (&cfg, once);
    else {
        char self[PATH_MAX];
        ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
            kiwi_errorf ("cannot find its own executable");
            status = 1;
        } else {
            self[n] = '\0';
            status = kiwi_daemon_run (&cfg, self, &err) < 0 ? 1 : 0;
            if (status)
                kiwi_errorf ("%s", kiwi_error_msg (err));
        }
    }
    if (bridge_fd >= 0)
        close (bridge_fd);
    if (id_fd >= 0)
        close (id_fd);
    kiwi_error_free (&err);
    kiwi_log_set_mask (NULL);
    kiwi_mask_free (mask);
    kiwi_worker_config_clear (&cfg);
    return status;
}
