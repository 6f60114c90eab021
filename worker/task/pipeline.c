/*
 * pipeline.c: one task in the task process (see pipeline.h): the policy and
 * the task's secret mask around it, the checkout and the repository root in
 * it, the sandbox driver, the plan, step 0 (its Phase A is
 * pipeline-install.c), the model client and the session, and the result
 * with the finished event. Everything the task made is removed on the way
 * out.
 */
#include "worker/task/pipeline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/buf.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/private-registry.h"
#include "worker/task/cache.h"
#include "worker/task/pipeline-internal.h"
#include "worker/task/plan.h"
#include "worker/task/policy.h"
#include "worker/task/repo.h"
#include "worker/task/result-fit.h"
#include "worker/task/secrets.h"
#include "worker/task/session.h"
#include "worker/task/store.h"
#include "worker/worker-metrics.h"

static void
result_error (kiwi_result *out, kiwi_result_status st, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
result_error (kiwi_result *out, kiwi_result_status st, const char *fmt, ...)
{
    out->status = st;
    va_list ap;
    va_start (ap, fmt);
    kiwi_str_vset (&out->reason, fmt, ap);
    va_end (ap);
}

/* Whether the directory open at `fd` looks like git metadata: a `.git`
 * entry (any case) in it, or the layout of a git directory (HEAD, objects/
 * and refs/), which git would take for a bare repository. */
static bool
looks_like_git (int fd)
{
    struct stat st;
    bool head = fstatat (fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0;
    bool objects = fstatat (fd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0;
    bool refs = fstatat (fd, "refs", &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (head && objects && refs)
        return true;
    int dup_fd = dup (fd);
    if (dup_fd < 0)
        return true;
    DIR *d = fdopendir (dup_fd);
    if (d == NULL) {
        close (dup_fd);
        return true;
    }
    rewinddir (d);
    bool hit = false;
    struct dirent *e;
    while (!hit && (e = readdir (d)) != NULL)
        hit = strcasecmp (e->d_name, ".git") == 0;
    closedir (d);
    return hit;
}

/* The repository root inside the workspace: the task's subdirectory, walked
 * one component at a time from the workspace without following a symlink,
 * each a real directory that is neither git metadata nor shaped like it.
 * Caller frees. */
static char *
repo_root (const char *ws, const char *subdir, kiwi_error_t *err)
{
    if (subdir == NULL || *subdir == '\0')
        return strdup (ws);
    char norm[PATH_MAX];
    size_t o = 0;
    if (strlen (subdir) >= sizeof norm - strlen (ws) - 2) {
        kiwi_error_make (err, 0, "subdirectory `%s`: too long", subdir);
        return NULL;
    }
    cleanup_close int fd = open (ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        kiwi_error_make (err, errno, "opening the workspace");
        return NULL;
    }
    for (const char *p = subdir; *p;) {
        size_t l = strcspn (p, "/");
        char comp[256];
        if (l >= sizeof comp) {
            kiwi_error_make (err, 0, "subdirectory `%s`: a component is too long", subdir);
            return NULL;
        }
        memcpy (comp, p, l);
        comp[l] = '\0';
        p += l;
        while (*p == '/')
            p++;
        if (l == 0 || strcmp (comp, ".") == 0)
            continue;
        if (strcmp (comp, "..") == 0) {
            kiwi_error_make (err, 0, "subdirectory `%s`: `..` is not allowed", subdir);
            return NULL;
        }
        if (strncasecmp (comp, ".git", 4) == 0 && strspn (comp + 4, ". ") == l - 4) {
            kiwi_error_make (err, 0, "subdirectory `%s`: git metadata is not a repository root", subdir);
            return NULL;
        }
        int nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            int e = errno;
            kiwi_error_make (err, e == ELOOP || e == ENOTDIR ? 0 : e,
                             "subdirectory `%s`: `%s` is %s", subdir, comp,
                             e == ELOOP || e == ENOTDIR ? "a symlink or not a directory: not followed"
                                                        : "not a directory inside the repository");
            return NULL;
        }
        close (fd);
        fd = nfd;
        if (looks_like_git (fd)) {
            kiwi_error_make (err, 0,
                             "subdirectory `%s`: `%s` holds git metadata or is laid out as a git directory (HEAD, "
                             "objects/, refs/): refused",
                             subdir, comp);
            return NULL;
        }
        if (o > 0)
            norm[o++] = '/';
        memcpy (norm + o, comp, l);
        o += l;
    }
    norm[o] = '\0';
    char *out = NULL;
    if (asprintf (&out, "%s%s%s", ws, o ? "/" : "", norm) < 0)
        out = NULL;
    return out;
}

/* The model client: the task's provider and model, or the worker's; the
 * base URL is the one the policy decided (never the task's unless the
 * operator's allow-list holds it). */
static kiwi_model_client *
open_model (const kiwi_pipeline *p, const kiwi_task *task, const char *base_url, char **model_name,
            kiwi_error_t *err)
{
    const kiwi_worker_config *cfg = p->cfg;
    const char *provider_name = cfg->model_provider;
    const char *name = cfg->model_name;
    if (task->has_model) {
        provider_name = kiwi_provider_name (task->model.provider);
        name = task->model.name;
    }
    if (provider_name != NULL && strcmp (provider_name, "scripted") == 0)
        provider_name = "anthropic"; /* the scripted test server speaks the providers' formats */
    const kiwi_model_provider *prov = kiwi_model_provider_find (provider_name, err);
    if (prov == NULL)
        return NULL;
    kiwi_error_t kerr = NULL;
    const char *key = kiwi_model_key_from_env (prov, p->host_env, &kerr);
    if (key == NULL && base_url == NULL) {
        *err = kiwi_error_steal (&kerr);
        return NULL;
    }
    kiwi_error_free (&kerr);
    kiwi_model_config mc = { .base_url = base_url, .api_key = key, .price_input_per_mtok = cfg->price_input_mtok,
                             .price_output_per_mtok = cfg->price_output_mtok };
    mc.redact = p->events->mask; /* no secret leaves in a prompt */
    if (task->limits.has_session_budget_usd_micros && cfg->price_input_mtok <= 0 && cfg->price_output_mtok <= 0)
        kiwi_warn ("task %s has a money budget but no model prices are configured (KIWI_MODEL_PRICE_INPUT, "
                   "KIWI_MODEL_PRICE_OUTPUT): only its token budget, if any, can end it",
                   task->id);
    kiwi_model_client *c = kiwi_model_client_open (prov, &mc, err);
    if (c == NULL)
        return NULL;
    *model_name = strdup (name ? name : "");
    return c;
}

kiwi_sandbox_limits
kiwi__pipeline_sandbox_limits (const kiwi_worker_config *cfg, const kiwi_task *task)
{
    return (kiwi_sandbox_limits) { .memory_mb = cfg->memory_mb,
                                   .pids = cfg->pids,
                                   .cpus = (double) cfg->cpus,
                                   .disk_mb = task->limits.disk_mb };
}

/* The sandbox driver's report of each sandbox it started, for the metrics. */
static void
sandbox_started (const char *driver, void *ud)
{
    kiwi_events_observe (ud, KIWI_OBS_SANDBOX, driver, 1);
}

/* The task's mask, installed in its event sink and its logger for the
 * length of kiwi_pipeline_run, and what it replaced there. */
typedef struct installed_mask {
    kiwi_mask *mask;
    kiwi_events *events;
    const kiwi_mask *prev_events, *prev_log;
} installed_mask;

static void
installed_mask_clear (installed_mask *im)
{
    if (im->events != NULL) {
        im->events->mask = im->prev_events;
        kiwi_log_set_mask (im->prev_log);
    }
    kiwi_mask_free (im->mask);
}

/* Steps 1-5 of `task` (with its effective limits) as the policy `pol`
 * decided; the result in *out. Returns < 0 when stopped by SIGTERM. */
static int
run_task (const kiwi_pipeline *p, const kiwi_task *task, const kiwi_task_policy *pol, kiwi_result *out)
{
    const kiwi_worker_config *cfg = p->cfg;
    kiwi_error_t err = NULL;
    int rc = 0;
    int64_t deadline_ms = kiwi_mono_ms () + (int64_t) task->limits.timeout_seconds * 1000;
    char ws[PATH_MAX];
    snprintf (ws, sizeof ws, "%s/work/%s-%d", cfg->state_dir, task->id, (int) getpid ());
    char workdir[PATH_MAX];
    snprintf (workdir, sizeof workdir, "%s/work", cfg->state_dir);
    mkdir (cfg->state_dir, 0755);
    mkdir (workdir, 0700);
    kiwi_repo_remove (ws);
    cleanup_free char *commit = NULL, *root = NULL, *snapshot = NULL, *model_name = NULL;
    cleanup_free char *s0_note = NULL; /* kiwi_step0_result_note of step 0's result */
    kiwi_plan plan;
    kiwi_plan_init (&plan);
    kiwi_sandbox_env *sb = NULL;
    kiwi_sandbox_env *sb_ahead = NULL; /* the session's second env: verify sandboxes made ahead */
    kiwi_cache *cache = NULL;
    kiwi_store *store = NULL;
    kiwi_model_client *model = NULL;
    cleanup_strv kiwi_strv model_keys = KIWI_STRV_INIT;
    cleanup_strv kiwi_strv proxy_env = KIWI_STRV_INIT;
    cleanup_strv kiwi_strv placeholders = KIWI_STRV_INIT; /* KIWI_PRIVATE_REGISTRY_PLACEHOLDERS, every phase's */
    int snapshot_hold = -1;
    pid_t proxy_pid = 0; /* the egress proxy this run started (own_proxy), or 0 */
    kiwi_nflog *nflog = NULL; /* its rules' log (own_proxy), or NULL */

    /* 1. the repository */
    /* the token only where the operator sends it (KIWI_GIT_TOKEN_HOSTS, https) */
    const char *token = pol->git_token ? cfg->git_token : NULL; /* read when the settings were loaded */
    kiwi_repo_opts ro = { .state_dir = cfg->state_dir, .token = token, .timeout_ms = cfg->clone_timeout_s * 1000,
                          .max_mb = cfg->clone_max_mb, .max_checkout_mb = cfg->checkout_max_mb,
                          .max_checkout_files = cfg->checkout_max_files,
                          .protocols = pol->git_protocols[0] ? pol->git_protocols : NULL };
    int64_t c0 = kiwi_mono_ms ();
    int checkout_rc = kiwi_repo_checkout (&ro, task->repo.url, task->repo.ref, ws, &commit, &err);
    kiwi_events_observe (p->events, KIWI_OBS_PHASE, "checkout", (double) (kiwi_mono_ms () - c0) / 1000.0);
    if (checkout_rc < 0) {
        int code = kiwi_error_code (err);
        const char *what = code == KIWI_REPO_E_NO_REF      ? "ref not found"
                           : code == KIWI_REPO_E_TOO_LARGE ? "repository too large"
                           : code == KIWI_REPO_E_UNSAFE    ? "repository refused"
                                                           : "repository unavailable";
        kiwi_events_emit (p->events, KIWI_STAGE_ACCEPTED, "checkout", 0,
                          json_pack ("{s:s,s:s}", "status", what, "reason", kiwi_error_msg (err)));
        result_error (out, KIWI_RESULT_ERROR, "%s: %s", what, kiwi_error_msg (err));
        goto done;
    }
    kiwi_events_emit (p->events, KIWI_STAGE_ACCEPTED, "checkout", 0,
                      json_pack ("{s:s,s:s,s:I}", "status", "ok", "commit", commit, "duration_ms",
                                 (json_int_t) (kiwi_mono_ms () - c0)));
    root = repo_root (ws, task->repo.subdir, &err);
    if (root == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }

    /* 2. the sandbox driver */
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, &err);
    kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                               .worker_id = cfg->worker_id,
                               .install_bridge = cfg->install_bridge, .on_start = sandbox_started,
                               .on_start_userdata = p->events, .registries = cfg->image_registries,
                               .registry_auth_file = cfg->registry_auth_file, .image_catalog = cfg->image_catalog,
                               .pull_timeout_ms = cfg->pull_timeout_s * 1000, .pull_max_mb = cfg->pull_max_mb,
                               .firecracker = &cfg->fc };
    if (drv == NULL || kiwi_sandbox_env_open (drv, &sc, &sb, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "sandbox: %s", kiwi_error_msg (err));
        goto done;
    }
    /* 3. what the repository needs, and Phase A */
    if (kiwi_plan_make (cfg, sb, root, task->test_command, &plan, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "inspecting the repository: %s", kiwi_error_msg (err));
        goto done;
    }

    if (kiwi_strv_split_list (&model_keys, cfg->model_key_vars, NULL, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "KIWI_MODEL_KEY_VARS: %s", kiwi_error_msg (err));
        goto done;
    }
    bool proxied = false;
    if (kiwi_proxy_phase_env (cfg, &proxy_env, &proxied, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    if (proxied && p->own_proxy && kiwi_proxy_start_once (cfg, &proxy_pid, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    if (proxied && p->own_proxy)
        nflog = kiwi__pipeline_once_nflog (cfg);
    /* behind the proxy, Phase A also trusts Kiwi's CA (the proxy, started
     * above or by the daemon, made it) */
    char phase_ca[PATH_MAX];
    const char *phase_bundle = NULL;
    if (kiwi_egress_phase_ca_bundle (cfg, proxied, phase_ca, sizeof phase_ca, &phase_bundle, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    /* a version from git (setuptools-scm, hatch-vcs) for a tree without
     * .git: the one the repository's tags give the commit, where the plan
     * would otherwise stand 0.0.0 in */
    char scm_version[64] = "";
    if (plan.verify_prelude != NULL && strstr (plan.verify_prelude, "SETUPTOOLS_SCM_PRETEND_VERSION") != NULL) {
        kiwi_error_t verr = NULL;
        if (kiwi_repo_version (&ro, task->repo.url, commit, scm_version, sizeof scm_version, &verr) < 0)
            kiwi_warn ("the version from the repository's tags: %s (0.0.0 stands in)", kiwi_error_msg (verr));
        kiwi_error_free (&verr);
        kiwi_info ("the project's version from its tags: %s", scm_version[0] ? scm_version : "none (0.0.0 stands in)");
    }
    /* an unlocked Python install resolves as of the commit (what its CI
     * resolved then): a release since may break the tests of an older
     * commit (a newer pytest's deprecations as errors) */
    char commit_time[40] = "";
    for (size_t i = 0; i < plan.insp.install.n; i++)
        if (plan.insp.install.steps[i].eco == KIWI_ECO_PIP || plan.insp.install.steps[i].eco == KIWI_ECO_UV) {
            kiwi_error_t terr = NULL;
            if (kiwi_repo_commit_time (&ro, task->repo.url, commit, commit_time, sizeof commit_time, &terr) < 0)
                kiwi_warn ("the commit's time: %s (Python installs resolve as of now)", kiwi_error_msg (terr));
            kiwi_error_free (&terr);
            kiwi_info ("Python installs resolve as of the commit's time: %s", commit_time[0] ? commit_time : "unknown (now)");
            break;
        }
    if (proxied && kiwi_registry_placeholders_env (cfg, &placeholders, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    kiwi_phase_config pc = {
        .placeholder_env = placeholders.n ? kiwi_strv_list (&placeholders) : NULL,
        .scm_version = scm_version[0] ? scm_version : NULL,
        .resolve_before = commit_time[0] ? commit_time : NULL,
        .proxy_env = proxied ? kiwi_strv_list (&proxy_env) : NULL,
        .host_env = p->host_env,
        .ca_bundle = phase_bundle,
        .install_timeout_ms = cfg->install_timeout_s * 1000,
        .extra_model_keys = kiwi_strv_list (&model_keys),
        .session_allow_test_creds = cfg->session_allow_test_creds,
        .copy_snapshot = cfg->snapshot_copy,
    };
    cache = kiwi_cache_open (cfg->redis_host, (int) cfg->redis_port, cfg->redis_user, cfg->redis_password,
                             cfg->cache_ttl_s, cfg->cache_fail_ttl_s);
    kiwi_cache_set_mask (cache, p->events->mask); /* installed by kiwi_pipeline_run */
    if (!kiwi_cache_available (cache))
        kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "warning", 0,
                          json_pack ("{s:s,s:s}", "warning", "cache unavailable: running uncached", "reason",
                                     kiwi_cache_error (cache)));
    /* 4. Phase A (or its cached snapshot) and step 0, which may swap the
     *    image and install again */
    if (cfg->store_url != NULL && *cfg->store_url != '\0') {
        kiwi_error_t serr = NULL;
        if (kiwi_store_open (cfg->store_url, cfg->store_user, cfg->store_password, &store, &serr) < 0) {
            kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "warning", 0,
                              json_pack ("{s:s,s:s}", "warning", "snapshot store unusable: snapshots stay on this host",
                                         "reason", kiwi_error_msg (serr)));
            kiwi_error_free (&serr);
        }
    }
    char egress_log[PATH_MAX + 16], fetch_log[PATH_MAX + 16];
    if (proxied && (kiwi_proxy_log_path (cfg, egress_log, sizeof egress_log, &err) < 0
                    || kiwi_proxy_fetch_log_path (cfg, fetch_log, sizeof fetch_log, &err) < 0)) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    kiwi__pipeline_install_ctx ic = { .p = p, .task = task, .sb = sb, .pc = &pc, .root = root, .cache = cache,
                       .deadline_ms = deadline_ms, .hold = &snapshot_hold, .store = store,
                       .egress_log = proxied ? egress_log : NULL, .fetch_log = proxied ? fetch_log : NULL,
                       .nflog = nflog };
    kiwi_step0_result s0;
    int64_t s0_start = kiwi_mono_ms ();
    kiwi_sandbox_limits s0_limits = kiwi__pipeline_sandbox_limits (cfg, task);
    int s0_rc = kiwi_plan_step0 (sb, &pc, &plan, root, ws, task, &s0_limits, cfg->sandbox, cache, deadline_ms,
                                 kiwi__pipeline_install, &ic, p->events, &s0, &err);
    kiwi_events_observe (p->events, KIWI_OBS_PHASE, "step0",
                         (double) (kiwi_mono_ms () - s0_start - ic.install_ms) / 1000.0);
    if (s0_rc < 0) {
        if (p->stop && *p->stop) {
            rc = -1;
            goto done;
        }
        result_error (out, KIWI_RESULT_ERROR, "step 0: %s", kiwi_error_msg (err));
        goto done;
    }
    if (p->stop && *p->stop) {
        kiwi_step0_result_clear (&s0);
        rc = -1;
        goto done;
    }
    s0_note = kiwi_step0_result_note (&s0);
    if (s0.status == KIWI_STEP0_INSTALL_FAILED) {
        result_error (out, KIWI_RESULT_INSTALL_FAILED, "%s%s%s%s", s0.reason ? s0.reason : "install failed",
                      s0_note ? " (" : "", s0_note ? s0_note : "", s0_note ? ")" : "");
        kiwi_step0_result_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_STOPPED && s0.first.cls == KIWI_FAILURE_NEEDS_NETWORK) {
        result_error (out, KIWI_RESULT_NEEDS_NETWORK, "%s", s0.reason);
        kiwi_step0_result_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_STOPPED) {
        /* not the repository's bug: no round is spent on it */
        result_error (out, KIWI_RESULT_NOT_FIXED, "%s%s%s%s", s0.reason, s0_note ? " (" : "", s0_note ? s0_note : "",
                      s0_note ? ")" : "");
        kiwi_step0_result_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_PASSED) {
        result_error (out, KIWI_RESULT_NOT_FIXED, "the tests already pass at %s: nothing to fix%s%s%s", task->repo.ref,
                      s0_note ? " (" : "", s0_note ? s0_note : "", s0_note ? ")" : "");
        kiwi_step0_result_clear (&s0);
        goto done;
    }
    snapshot = steal_pointer (&s0.snapshot_dir);

    /* 5. the session */
    model = open_model (p, task, pol->model_base_url, &model_name, &err);
    if (model == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "model: %s", kiwi_error_msg (err));
        kiwi_step0_result_clear (&s0);
        goto done;
    }
    /* the same driver again, for the session's thread that makes each
     * round's verify sandbox while the models work; it counts its
     * sandboxes itself, on the session's side (on_start runs in the
     * thread that creates) */
    kiwi_sandbox_config sc_ahead = sc;
    sc_ahead.on_start = NULL;
    sc_ahead.on_start_userdata = NULL;
    if (kiwi_sandbox_env_open (drv, &sc_ahead, &sb_ahead, &err) < 0) {
        kiwi_warn ("task %s: no second sandbox env (%s): each verify makes its own sandbox", task->id,
                   kiwi_error_msg (err));
        kiwi_error_free (&err);
        sb_ahead = NULL;
    }
    char runtime_version[256] = "";
    if (plan.insp.image.requirement && *plan.insp.image.requirement)
        snprintf (runtime_version, sizeof runtime_version, "%s%s%s (the image's tag is the version it has)",
                  plan.insp.image.requirement,
                  plan.insp.image.requirement_from && *plan.insp.image.requirement_from ? ", from " : "",
                  plan.insp.image.requirement_from ? plan.insp.image.requirement_from : "");
    kiwi_session_env se = {
        .sandbox = sb,
        .sandbox_ahead = sb_ahead,
        .phase_cfg = &pc,
        .image = plan.image,
        .snapshot_dir = snapshot,
        .verify_env = kiwi_strv_list (&plan.verify_env),
        .verify_prelude = plan.verify_prelude,
        .limits = kiwi__pipeline_sandbox_limits (cfg, task),
        .workspace = root,
        .checkout = ws,
        .commit = commit,
        .step0_output = s0.run.output,
        .step0_exit = s0.run.exit_code,
        .runtime = plan.insp.image.runtime,
        .runtime_version = runtime_version[0] ? runtime_version : NULL,
        .install_command = plan.insp.install.display,
        .install_outcome = ic.install_outcome[0] ? ic.install_outcome : NULL,
        .install_status = ic.install_status[0] ? ic.install_status : NULL,
        .model = model,
        .model_name = model_name,
        .one_agent = cfg->session_agents != NULL && strcmp (cfg->session_agents, "one") == 0,
        .deadline_ms = deadline_ms,
        .events = p->events,
        .stop = p->stop,
    };
    if (kiwi_session_run (&se, task, out, &err) < 0)
        result_error (out, KIWI_RESULT_ERROR, "session: %s", kiwi_error_msg (err));
    if (out->status != KIWI_RESULT_FIXED && s0_note != NULL) {
        char *r = NULL;
        if (asprintf (&r, "%s (%s)", out->reason ? out->reason : "", s0_note) >= 0) {
            free (out->reason);
            out->reason = r;
        }
    }
    if (p->stop && *p->stop)
        rc = -1;
    kiwi_step0_result_clear (&s0);

done:
    kiwi_error_free (&err);
    if (model)
        kiwi_model_client_close (model);
    kiwi_cache_close (cache);
    kiwi_store_close (store);
    kiwi_sandbox_env_close (sb_ahead);
    kiwi_sandbox_env_close (sb);
    kiwi_proxy_stop (proxy_pid);
    kiwi_nflog_close (nflog);
    kiwi_plan_clear (&plan);
    if (snapshot_hold >= 0)
        close (snapshot_hold);
    kiwi_repo_remove (ws);
    return rc;
}

int
kiwi_pipeline_run (const kiwi_pipeline *p, const kiwi_task *asked, kiwi_result *out)
{
    const kiwi_worker_config *cfg = p->cfg;
    int64_t t0 = kiwi_mono_ms ();
    out->task_id = strdup (asked->id);
    out->worker_id = strdup (cfg->worker_id);
    out->status = KIWI_RESULT_ERROR;
    int rc = 0;
    kiwi_error_t err = NULL;
    /* the secrets (secrets.h): masked in every event, the result, the logs,
     * the verify cache and the model's prompts, from the first event on (a
     * failed checkout may quote the git token) */
    __attribute__ ((cleanup (installed_mask_clear))) installed_mask im = { 0 };
    im.mask = kiwi_worker_mask (cfg, p->host_env, asked, &err);
    if (im.mask == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return 0;
    }
    im.events = p->events;
    im.prev_events = p->events->mask;
    p->events->mask = im.mask;
    im.prev_log = kiwi_log_set_mask (im.mask);
    /* the operator's policy, before anything runs: a refusal is the result
     * (no fetch, no sandbox, no model request); otherwise the task runs with
     * the effective limits */
    kiwi_task_policy pol;
    if (kiwi_policy_apply (cfg, asked, &pol, &err) < 0) {
        kiwi_events_emit (p->events, KIWI_STAGE_ACCEPTED, "refused", 0,
                          json_pack ("{s:s}", "reason", kiwi_error_msg (err)));
        result_error (out, KIWI_RESULT_ERROR, "refused by the worker's policy: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
    } else {
        kiwi_task effective = kiwi_policy_task (asked, &pol);
        rc = run_task (p, &effective, &pol, out);
    }
    if (rc < 0)
        return rc; /* stopped: no result, no event; the task is redelivered */
    if (out->status == KIWI_RESULT_FIXED && out->diff == NULL)
        out->diff = strdup ("");
    if (out->status != KIWI_RESULT_FIXED) {
        free (out->diff);
        out->diff = NULL;
    }
    if (kiwi_result_keep_oversized (out, cfg->state_dir, KIWI_RESULT_DIFF_MAX, &err) < 0)
        kiwi_warn ("task %s: %s", asked->id, out->reason);
    kiwi_error_free (&err);
    out->duration_ms = (uint64_t) (kiwi_mono_ms () - t0);
    out->finished_at = kiwi_wall_ms ();
    kiwi_events_emit (p->events, KIWI_STAGE_FINISHED, "finished", out->rounds,
                      json_pack ("{s:s,s:s,s:I,s:I}", "status", kiwi_result_status_name (out->status), "reason",
                                 out->reason ? out->reason : "", "rounds", (json_int_t) out->rounds, "duration_ms",
                                 (json_int_t) out->duration_ms));
    kiwi_events_mask_result (im.mask, out);
    return rc;
}

