/*
 * egress.c: the egress checks of the worker (see egress.h).
 */
#include "egress.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "phases.h"
#include "proc.h"
#include "sandbox.h"
#include "term.h"

extern char **environ;

bool
kiwi_egress_is_isolation_check (const char *name)
{
    return strcmp (name, "phase_b_isolated") == 0 || strcmp (name, "metadata_blocked") == 0;
}

static void
report (const char *name, bool ok, const char *detail)
{
    json_t *j = json_pack ("{s:s,s:b,s:s,s:I}", "name", name, "ok", ok, "detail", detail ? detail : "",
                           "checked_at", (json_int_t) kiwi_now_ms ());
    char *s = json_dumps (j, JSON_COMPACT);
    printf ("%s\n", s);
    fflush (stdout);
    free (s);
    json_decref (j);
}

static const char *
probe_url (void)
{
    const char *u = getenv ("KIWI_EGRESS_PROBE_URL");
    return u && *u ? u : KIWI_EGRESS_PROBE_URL_DEFAULT;
}

static void
trim (char *s)
{
    size_t l = s ? strlen (s) : 0;
    while (l && (s[l - 1] == '\n' || s[l - 1] == ' '))
        s[--l] = '\0';
}

static bool
phase_b (kiwi_sandbox_env *env, const kiwi_worker_config *cfg, char *detail, size_t cap)
{
    char script[512];
    snprintf (script, sizeof script,
              "ifs=$(cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | tr '\\n' ' '); echo \"interfaces: $ifs\"; "
              "if command -v curl >/dev/null; then curl -sS -m 5 -o /dev/null %s 2>&1 && echo REACHED; fi; true",
              probe_url ());
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_sandbox_spec spec = { .image = getenv ("KIWI_EGRESS_IMAGE") ?: "kiwi/base:bookworm",
                               .network = KIWI_NET_NONE, .task_id = "egress-check", .phase = "verify",
                               .limits = { .disk_mb = 64 } };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000, .output_cap = 2048 };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_run_once (env, &spec, NULL, 0, &x, &r, &err) < 0) {
        snprintf (detail, cap, "could not run a Phase B sandbox: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return false;
    }
    trim (r.output);
    /* the first line is exactly "interfaces: lo" (trailing blank trimmed) */
    bool only_lo = r.output && strncmp (r.output, "interfaces: lo", 14) == 0
                   && (r.output[14] == '\0' || r.output[14] == '\n'
                       || (r.output[14] == ' ' && (r.output[15] == '\0' || r.output[15] == '\n')));
    bool reached = r.output && strstr (r.output, "REACHED") != NULL;
    bool ok = only_lo && !reached;
    snprintf (detail, cap, "%s%s", reached ? "a Phase B sandbox reached the network! " : "",
              r.output ? r.output : "");
    kiwi_exec_result_clear (&r);
    return ok;
}

static bool
metadata (char *detail, size_t cap)
{
    const char *script = getenv ("KIWI_EGRESS_SCRIPT");
    char path[1024];
    if (script == NULL || *script == '\0') {
        snprintf (path, sizeof path, "%s/ops/egress/egress.sh", KIWI_SOURCE_DIR);
        script = path;
    }
    const char *argv[] = { "bash", script, "check", NULL };
    kiwi_proc_result r;
    kiwi_error_t err = NULL;
    if (kiwi_proc_run (argv, NULL, NULL, 60000, 2048, &r, &err) < 0) {
        snprintf (detail, cap, "cannot run %s: %s", script, kiwi_error_msg (err));
        kiwi_error_free (&err);
        return false;
    }
    trim (r.output);
    bool ok = r.exit_code == 0;
    snprintf (detail, cap, "%s (egress.sh check exit %d)%s%s", ok ? "rules in place" : "rules missing or changed",
              r.exit_code, r.output && *r.output ? ": " : "", r.output ? r.output : "");
    kiwi_proc_result_clear (&r);
    return ok;
}

static bool
phase_a (kiwi_sandbox_env *env, const kiwi_worker_config *cfg, char *detail, size_t cap)
{
    kiwi_phase_config pc = { .host_env = (const char *const *) environ, .ca_bundle = cfg->ca_bundle };
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    if (kiwi_phase_install_env (&pc, NULL, &e, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_strv_free (&e);
        return false;
    }
    char script[512];
    snprintf (script, sizeof script, "curl -sS -m 20 -o /dev/null -w 'HTTP %%{http_code}' %s%s %s 2>&1",
              cfg->ca_bundle ? "--cacert " : "", cfg->ca_bundle ? KIWI_SANDBOX_CA_FILE : "", probe_url ());
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_sandbox_spec spec = { .image = getenv ("KIWI_EGRESS_IMAGE") ?: "kiwi/base:bookworm",
                               .network = KIWI_NET_INSTALL, .env = kiwi_strv_list (&e), .task_id = "egress-check",
                               .phase = "install", .limits = { .disk_mb = 64 } };
    kiwi_sandbox *sb = NULL;
    bool ok = false;
    if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0) {
        snprintf (detail, cap, "could not start a Phase A sandbox: %s", kiwi_error_msg (err));
        goto out;
    }
    if (cfg->ca_bundle && kiwi_phase_put_ca_bundle (sb, cfg->ca_bundle, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        goto out;
    }
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000, .output_cap = 2048 };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (sb, &x, &r, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        goto out;
    }
    trim (r.output);
    ok = r.exit_code == 0 && r.output && strncmp (r.output, "HTTP 2", 6) == 0;
    snprintf (detail, cap, "%s: %s", probe_url (), r.output ? r.output : "");
    kiwi_exec_result_clear (&r);
out:
    kiwi_error_free (&err);
    if (sb) {
        kiwi_sandbox_destroy (sb, &err);
        kiwi_error_free (&err);
    }
    kiwi_strv_free (&e);
    return ok;
}

static volatile int *stop_flag;

/* SIGTERM (the worker stopping, or gone: PR_SET_PDEATHSIG) cancels the
 * check in flight; its sandbox is still destroyed on the way out, and no
 * further check starts. A report to a worker that is gone fails quietly
 * (SIGPIPE ignored) rather than killing the process before the clean-up. */
static void
install_signals (void)
{
    stop_flag = kiwi_term_catch ();
    signal (SIGPIPE, SIG_IGN);
    prctl (PR_SET_PDEATHSIG, SIGTERM);
}

int
kiwi_egress_check_main (const kiwi_worker_config *cfg)
{
    install_signals ();
    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, &err);
    kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                               .worker_id = cfg->worker_id };
    kiwi_sandbox_env *env = NULL;
    char detail[2048];
    if (drv == NULL || kiwi_sandbox_env_open (drv, &sc, &env, &err) < 0) {
        snprintf (detail, sizeof detail, "sandbox driver: %s", kiwi_error_msg (err));
        report ("phase_b_isolated", false, detail);
        report ("phase_a_https", false, detail);
        bool m = metadata (detail, sizeof detail);
        report ("metadata_blocked", m, detail);
        kiwi_error_free (&err);
        return 1;
    }
    bool b = false, m = false, a = false;
    if (!*stop_flag) {
        b = phase_b (env, cfg, detail, sizeof detail);
        report ("phase_b_isolated", b, detail);
    }
    if (!*stop_flag) {
        m = metadata (detail, sizeof detail);
        report ("metadata_blocked", m, detail);
    }
    if (!*stop_flag) {
        a = phase_a (env, cfg, detail, sizeof detail);
        report ("phase_a_https", a, detail);
    }
    kiwi_sandbox_env_close (env);
    if (*stop_flag)
        return 75; /* cancelled: the sandbox in flight was destroyed */
    return b && m && a ? 0 : 1;
}
