/*
 * phases.h: the two phases, exactly as the isolation spec says.
 *
 *   Phase A (install): network on (Kiwi's install bridge), an environment
 *   that is empty but for an allow-list of non-secret variables, an optional
 *   CA bundle, bounded by KIWI_INSTALL_TIMEOUT (default 300 s). /kiwi/src
 *   holds the install's input only (manifests, lockfiles, the package
 *   manager's config: lockfile.h), never the rest of the repository. Its
 *   result is a dependency snapshot: the dependency locations under
 *   /kiwi/src and /kiwi/home (node_modules, .venv, ~/.cargo, ...) and
 *   nothing else the install wrote, as two tar parts (src.tar, home.tar).
 *
 *   Phase B (verify): no network, the snapshot restored and the current tree
 *   put over it, only the credentials the task names as test credentials,
 *   every model key withheld even if a task names it.
 *
 *   The Implementer's session sandbox: like Phase B, but with no credentials
 *   at all unless KIWI_SESSION_ALLOW_TEST_CREDS=true.
 *
 * Both phases use the same image and driver; the dependencies land where
 * Phase B uses them because both work under /kiwi (src, home).
 *
 * The environment builders are pure functions over the worker's environment
 * so that what may enter a sandbox is decided, and tested, in one place.
 */
#ifndef KIWI_SANDBOX_PHASES_H
#define KIWI_SANDBOX_PHASES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "sandbox/sandbox.h"
#include "common/strv.h"

#define KIWI_INSTALL_TIMEOUT_DEFAULT_S 300
/* The disk ceiling a sandbox gets when its limits name none (the drivers'
 * default), which also bounds the snapshot Phase A saves. */
#define KIWI_PHASE_DEFAULT_DISK_MB 2048

/* Model keys withheld from every sandbox, always. */
#define KIWI_MODEL_KEYS(X)                                                                                   \
    X ("ANTHROPIC_API_KEY")                                                                                  \
    X ("OPENAI_API_KEY")                                                                                     \
    X ("GEMINI_API_KEY")                                                                                     \
    X ("GOOGLE_API_KEY")

/* Where Phase A finds the CA bundle when one is configured. */
#define KIWI_SANDBOX_CA_DIR "/kiwi/ca"
#define KIWI_SANDBOX_CA_FILE "/kiwi/ca/ca-certificates.crt"

typedef struct kiwi_phase_config {
    const char *const *host_env;        /* the worker's environment ("K=V" list, e.g. environ) */
    const char *ca_bundle;              /* host path of a CA bundle for Phase A, or NULL */
    int64_t install_timeout_ms;         /* 0 = KIWI_INSTALL_TIMEOUT_DEFAULT_S */
    const char *const *extra_model_keys; /* further variable names to withhold (configured keys), or NULL */
    bool session_allow_test_creds;      /* KIWI_SESSION_ALLOW_TEST_CREDS */
    bool copy_snapshot;                 /* KIWI_SNAPSHOT_COPY: put the snapshot's archives into every
                                           sandbox even where the driver could lay it under /kiwi */
    const char *const *proxy_env;       /* Kiwi's egress proxy for Phase A ("K=V"), or NULL: the worker's own */
    const char *const *placeholder_env; /* "NAME=VALUE" in Phase A, B and the session: the variables a
                                           repository's configuration reads a registry credential from,
                                           each a placeholder the egress proxy replaces; or NULL */
    const char *scm_version;            /* the version the repository's tags give its commit (digits and dots),
                                           SETUPTOOLS_SCM_PRETEND_VERSION in Phase B and the session, or NULL */
    const char *resolve_before;         /* the commit's time (ISO 8601: digits, -, :, T, +, Z): an unlocked
                                           Python install resolves as of it in Phase A (PIP_UPLOADED_PRIOR_TO,
                                           UV_EXCLUDE_NEWER), or NULL */
} kiwi_phase_config;

/* Phase A's environment: HOME, TMPDIR, CI, locale and proxy settings (Kiwi's
 * egress proxy when cfg->proxy_env is set, else the worker's, where a proxy
 * URL with credentials is an error naming the variable), the
 * CA-bundle variables package managers read when a bundle is configured,
 * PIP_UPLOADED_PRIOR_TO and UV_EXCLUDE_NEWER when cfg->resolve_before is a
 * time, and `extra` (non-secret settings from inspection, "K=V"). Nothing
 * else. */
int kiwi_phase_install_env (const kiwi_phase_config *cfg, const char *const *extra, kiwi_strv *out,
                            kiwi_error_t *err);

/* Whether an install's output says that resolving as of a time failed on
 * an index that gives no upload times (pip's "does not provide
 * upload-time metadata", uv's "is missing an upload date": a private
 * index, a mirror, a static page of wheels): the install is then run again
 * without cfg->resolve_before. NULL: false. */
bool kiwi_phase_resolve_before_refused (const char *output);

/* What of Phase A's environment Kiwi itself decides, for the install cache
 * key: kiwi_phase_install_env() without `extra` (HOME, locale, proxies, the
 * CA variables) and "kiwi-ca-bundle-sha256=HEX" of the bundle's bytes when
 * one is configured. */
int kiwi_phase_install_key_env (const kiwi_phase_config *cfg, kiwi_strv *out, kiwi_error_t *err);

/* Phase B's environment: HOME, TMPDIR, CI, locale, the project's version
 * from git (cfg->scm_version), `extra`, and the named
 * test credentials taken from the worker's environment. Model keys, Kiwi's
 * own settings (KIWI_*) and anything not named are never included; names
 * refused that way go to *withheld, names absent from the worker's
 * environment to *missing (either may be NULL). */
int kiwi_phase_verify_env (const kiwi_phase_config *cfg, const char *const *extra, const char *const *creds,
                           kiwi_strv *out, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err);

/* The session sandbox's environment: as Phase B, with credentials only when
 * cfg->session_allow_test_creds. */
int kiwi_phase_session_env (const kiwi_phase_config *cfg, const char *const *extra, const char *const *creds,
                            kiwi_strv *out, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err);

/* True for a variable name that must never enter any sandbox. */
bool kiwi_phase_is_secret_name (const kiwi_phase_config *cfg, const char *name);

/* ----- Phase A ----- */

typedef enum {
    KIWI_INSTALL_OK = 0,
    KIWI_INSTALL_SKIPPED,   /* no dependencies declared: nothing ran */
    KIWI_INSTALL_FAILED,    /* the command exited non-zero */
    KIWI_INSTALL_TIMED_OUT, /* KIWI_INSTALL_TIMEOUT or the task's deadline */
    KIWI_INSTALL_KILLED,    /* a resource bound ended it (memory, the sandbox died) */
} kiwi_install_status;

const char *kiwi_install_status_str (kiwi_install_status s);

typedef struct kiwi_install_request {
    const char *image;
    const char *workspace;         /* host directory with the repository's tree */
    const char *const *input;      /* the install's input (kiwi_install_hashed_files), relative to workspace:
                                      /kiwi/src gets these files only; NULL = the whole tree */
    const char *const *dep_src;    /* dependency locations kept in the snapshot (kiwi_install_dep_locations);
                                      NULL = every ecosystem's */
    const char *const *dep_home;
    const char *const *argv;       /* install command; NULL = no dependencies (skipped) */
    const char *display;           /* the command as the user reads it ("npm ci"; kiwi_install_plan.display),
                                      named in the reason (its first 120 bytes); NULL = argv[0] */
    const char *const *extra_env;  /* non-secret "K=V" for this phase, or NULL */
    kiwi_sandbox_limits limits;    /* disk_mb also bounds the snapshot: by apparent size, both parts */
    int64_t deadline_ms;           /* the task's remaining time; 0 = none */
    const char *task_id;
    const char *snapshot_dir;      /* where the dependency snapshot is written (created) */
    kiwi_output_cb on_output;      /* live output, optional */
    /* Told once the sandbox runs, before the command starts: its address on
     * the install network ("" when the driver cannot say), so that what
     * the egress proxy logs for that address can be put down to this
     * install. Optional; gets `userdata`. */
    void (*on_started) (const char *address, void *userdata);
    void *userdata;
} kiwi_install_request;

typedef struct kiwi_install_result {
    kiwi_install_status status;
    int exit_code;
    char *output;          /* tail, owned */
    uint64_t output_dropped;
    int64_t duration_ms;
    char reason[512];      /* one line: why it failed, with the exit status */
} kiwi_install_result;

void kiwi_install_result_clear (kiwi_install_result *r);

/* Runs Phase A. Returns 0 when the phase ran to a verdict (r->status says
 * which: a failed install is not an error of this function) and < 0 when it
 * could not run (no driver, no image, a proxy URL with credentials, ...).
 * The snapshot is counted as it streams out of the sandbox, by the bytes
 * and by the sizes its tar headers announce (so a sparse file counts by its
 * apparent size and is never expanded on the host); past the disk ceiling
 * the copy stops, what was written goes, and the verdict is
 * KIWI_INSTALL_KILLED, "snapshot larger than the sandbox's disk ceiling
 * (N MB, KIWI_MAX_SANDBOX_DISK_MB raises it)". */
int kiwi_phase_install (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_install_request *req,
                        kiwi_install_result *r, kiwi_error_t *err);

/* ----- Phase B ----- */

typedef struct kiwi_verify_request {
    const char *image;
    const char *workspace;           /* host directory with the current tree */
    const char *snapshot_dir;        /* from Phase A, or NULL */
    const char *command;             /* the test command, run with /bin/sh -c */
    const char *prelude;             /* the install's offline part (kiwi_install_plan.verify_prelude), run
                                        first, its output kept out of the command's unless it fails; or NULL */
    const char *const *extra_env;
    const char *const *credentials;  /* names of the task's test credentials, or NULL */
    kiwi_sandbox_limits limits;
    int64_t timeout_ms;              /* the task's remaining time */
    size_t output_cap;               /* 0 = 64 KiB */
    const char *task_id;
    kiwi_output_cb on_output;
    void *userdata;
    kiwi_sandbox *ready;             /* made ahead for this request (kiwi_phase_verify_ready), or NULL:
                                        taken by kiwi_phase_verify, removed on every path */
} kiwi_verify_request;

/* Runs Phase B once in a fresh sandbox. The result's flags say how the
 * command ended; withheld/missing (optional) list credentials not passed.
 * With req->ready, the sandbox is the one made ahead: the tree is put into
 * it and the command run by exec (no container start on the way), then it
 * is removed; the result is the same as without. */
int kiwi_phase_verify (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_verify_request *req,
                       kiwi_exec_result *r, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err);

/* Makes the sandbox of a verify of `req` ahead of it (while the model
 * works): created and started with Phase B's spec (no network, the
 * environment and credentials of `req`, its limits), the snapshot laid or
 * put, nothing of the tree and nothing run in it. *out (owned) goes to
 * kiwi_phase_verify as req->ready, for a request that differs from `req`
 * only in its workspace, command, timeout and output; or to
 * kiwi_sandbox_destroy. Safe to call from a thread of its own with an env
 * no other thread uses. */
int kiwi_phase_verify_ready (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_verify_request *req,
                             kiwi_sandbox **out, kiwi_error_t *err);

/* Puts a host tree into a sandbox at `dir` by archive (never following a
 * symlink out of the tree; .git left out). Used by both phases and the
 * session. *manifest (optional) receives the relative paths of the files and
 * links put, NUL-separated. */
int kiwi_phase_put_tree (kiwi_sandbox *sb, const char *host_dir, const char *dir, char **manifest,
                         size_t *manifest_len, kiwi_error_t *err);

/* Gives a sandbox the CA bundle at KIWI_SANDBOX_CA_FILE (Phase A only). */
int kiwi_phase_put_ca_bundle (kiwi_sandbox *sb, const char *host_path, kiwi_error_t *err);

/* How a Phase B or session sandbox gets the snapshot at `snapshot_dir`:
 * where the driver lays a directory under /kiwi (lays_lower) and
 * cfg->copy_snapshot is off, *lower receives the snapshot's tree, extracted
 * once per snapshot (deps.h; free() it), for spec.lower_dir; otherwise
 * *lower is NULL and the caller puts the archives
 * (kiwi_phase_restore_snapshot). `disk_mb` bounds the extraction. */
int kiwi_phase_snapshot_lower (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const char *snapshot_dir,
                               int64_t disk_mb, char **lower, kiwi_error_t *err);

/* Restores a dependency snapshot written by kiwi_phase_install(). */
int kiwi_phase_restore_snapshot (kiwi_sandbox *sb, const char *snapshot_dir, kiwi_error_t *err);

#endif
