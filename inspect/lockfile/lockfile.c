/*
 * lockfile.c: install steps by lockfile (the runtime table's planners, at
 * the root and one directory down) and the install plan for an image's
 * runtime: its steps, Phase A's command, each phase's settings and the
 * Phase B prelude (see lockfile.h, docs/inspection.md). The planners are
 * the other files of inspect/lockfile/, the install's input and cache key
 * input.c.
 */
#include "inspect/lockfile/lockfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

#define STD_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *const eco_names[] = {
#define KIWI__ECO_NAME(name, str) [name] = str,
    KIWI_ECOSYSTEMS (KIWI__ECO_NAME)
#undef KIWI__ECO_NAME
};

static const char *
kiwi_ecosystem_str (kiwi_ecosystem e)
{
    return (size_t) e < sizeof eco_names / sizeof eco_names[0] ? eco_names[e] : "unknown";
}

/* The runtime whose images run the ecosystem's tools ("node", "python"...). */
static const char *
kiwi_ecosystem_runtime (kiwi_ecosystem e)
{
    const kiwi__runtime *rt = kiwi__runtime_of_eco (e);
    return rt ? rt->name : "unknown";
}

/* True if an image of `runtime` installs `e`: its own runtime, and "java"
 * images also run Maven and Gradle. "" (unknown) runs everything, "base"
 * nothing. */
static bool
kiwi_ecosystem_runs_in (kiwi_ecosystem e, const char *runtime)
{
    if (runtime == NULL || *runtime == '\0')
        return true;
    if (strcmp (runtime, kiwi_ecosystem_runtime (e)) == 0)
        return true;
    /* a Java image runs every runtime that shares its environment (Maven, Gradle) */
    const kiwi__runtime *img = kiwi__runtime_get (runtime), *own = kiwi__runtime_of_eco (e);
    return img != NULL && own != NULL && strcmp (runtime, "java") == 0 && own->env == img->env;
}

void
kiwi_install_step_clear (kiwi_install_step *s)
{
    free (s->dir);
    free (s->summary);
    free (s->script);
    free (s->why);
    free (s->prelude);
    memset (s, 0, sizeof *s);
}

static void
kiwi__steps_free (kiwi__steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        kiwi_install_step_clear (&s->v[i]);
    free (s->v);
    memset (s, 0, sizeof *s);
}

int
kiwi__add_step (kiwi__steps *s, kiwi_ecosystem eco, const char *dir, bool locked, const char *summary,
                const char *script, const char *why, kiwi_error_t *err)
{
    kiwi_install_step *nv = realloc (s->v, (s->n + 1) * sizeof *nv);
    if (nv == NULL)
        return kiwi_error_make (err, ENOMEM, "install plan");
    s->v = nv;
    kiwi_install_step *st = &s->v[s->n];
    *st = (kiwi_install_step) { .eco = eco, .locked = locked, .dir = strdup (dir), .summary = strdup (summary),
                                .script = strdup (script), .why = strdup (why) };
    s->n++;
    if (!st->dir || !st->summary || !st->script || !st->why)
        return kiwi_error_make (err, ENOMEM, "install plan");
    return 0;
}

int
kiwi__set_prelude (kiwi__steps *s, const char *prelude, kiwi_error_t *err)
{
    kiwi_install_step *st = &s->v[s->n - 1];
    free (st->prelude);
    st->prelude = strdup (prelude);
    return st->prelude ? 0 : kiwi_error_make (err, ENOMEM, "install plan");
}

/* ------------------------------------------------------------ detection */

/* True if the root has a step of a runtime of `family`. */
static bool
root_has_family (const kiwi__steps *s, const char *family)
{
    for (size_t i = 0; i < s->n; i++) {
        const kiwi__runtime *rt = kiwi__runtime_of_eco (s->v[i].eco);
        if (s->v[i].dir[0] == '\0' && rt && rt->family && strcmp (rt->family, family) == 0)
            return true;
    }
    return false;
}

/* True if the runtime's planner looks into `sub`, one directory down:
 * separate projects, not members of the root's. */
static bool
plans_sub (const char *root, const kiwi__runtime *rt, const char *sub, const bool *root_owned, const bool *root_fam)
{
    if (*root_owned && !(rt->sub_lock && kiwi__has_in (root, sub, rt->sub_lock)))
        return false;
    return !*root_fam;
}

static int
install_detect (kiwi__inspect_ctx *ctx, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    for (size_t r = 0; r < kiwi__n_runtimes; r++)
        if (kiwi__runtimes[r].detect && kiwi__runtimes[r].detect (ctx, "", true, s, err) < 0)
            return -1;
    bool owned[16] = { false }, fam[16] = { false };
    for (size_t r = 0; r < kiwi__n_runtimes && r < 16; r++) {
        const kiwi__runtime *rt = &kiwi__runtimes[r];
        owned[r] = rt->root_manifest && kiwi__has_in (root, "", rt->root_manifest);
        fam[r] = rt->family && root_has_family (s, rt->family);
    }
    char **subs = kiwi__subdirs (root);
    if (subs == NULL)
        return kiwi_error_make (err, ENOMEM, "install plan");
    int rc = 0;
    for (size_t i = 0; subs[i] && rc == 0; i++)
        for (size_t r = 0; r < kiwi__n_runtimes && r < 16 && rc == 0; r++)
            if (kiwi__runtimes[r].detect && plans_sub (root, &kiwi__runtimes[r], subs[i], &owned[r], &fam[r]))
                rc = kiwi__runtimes[r].detect (ctx, subs[i], false, s, err);
    kiwi__strv_free_raw (subs);
    return rc;
}

int
kiwi_install_detect (const char *root, kiwi_install_step **out, size_t *n, kiwi_error_t *err)
{
    *out = NULL;
    *n = 0;
    kiwi__steps s = { 0 };
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL)
        return kiwi_error_make (err, ENOMEM, "install plan");
    int rc = install_detect (ctx, &s, err);
    if (rc == 0)
        rc = kiwi__ctx_check (ctx, err);
    kiwi__ctx_free (ctx);
    if (rc < 0) {
        kiwi__steps_free (&s);
        return -1;
    }
    *out = s.v;
    *n = s.n;
    return 0;
}

/* ----------------------------------------------------------------- plan */

void
kiwi_install_plan_clear (kiwi_install_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        kiwi_install_step_clear (&p->steps[i]);
    free (p->steps);
    kiwi_strv_free (&p->argv);
    kiwi_strv_free (&p->install_env);
    kiwi_strv_free (&p->verify_env);
    kiwi_strv_free (&p->left_out);
    free (p->display);
    free (p->verify_prelude);
    memset (p, 0, sizeof *p);
}

/* Adds "K=V" unless K is already set (the first setting wins). */
static int
env_add (kiwi_strv *e, const char *kv)
{
    const char *eq = strchr (kv, '=');
    char key[128];
    snprintf (key, sizeof key, "%.*s", (int) (eq ? eq - kv : 0), kv);
    if (kiwi_strv_env_get (e, key) != NULL)
        return 0;
    return kiwi_strv_add (e, kv);
}

static int
env_addf (kiwi_strv *e, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static int
env_addf (kiwi_strv *e, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    char *s = NULL;
    int n = vasprintf (&s, fmt, ap);
    va_end (ap);
    if (n < 0)
        return -1;
    int rc = env_add (e, s);
    free (s);
    return rc;
}

static int
add_settings (kiwi_install_plan *p, const kiwi__env_setting *set, kiwi_error_t *err)
{
    for (const kiwi__env_setting *e = set; e && e->kv; e++)
        if (((e->phases & KIWI__PHASE_A) && env_add (&p->install_env, e->kv) < 0)
            || ((e->phases & KIWI__PHASE_B) && env_add (&p->verify_env, e->kv) < 0))
            return kiwi_error_make (err, ENOMEM, "install plan");
    return 0;
}

/* The ecosystems whose installs go into the project's .venv: Python's. */
static bool
uses_venv (kiwi_ecosystem e)
{
    const kiwi__runtime *rt = kiwi__runtime_of_eco (e);
    return rt != NULL && strcmp (rt->name, "python") == 0;
}

static int
plan_env (kiwi_install_plan *p, const char *runtime, kiwi_error_t *err)
{
    char path_dirs[1024] = "";
    bool venv = false;
    /* Go refuses the runtime's -mod=mod in a workspace: its default there
     * (readonly) takes the place (the first setting of a name stands) */
    for (size_t i = 0; i < p->n; i++)
        if (p->steps[i].eco == KIWI_ECO_GO && p->steps[i].workspace
            && (env_add (&p->install_env, "GOFLAGS=-mod=readonly") < 0
                || env_add (&p->verify_env, "GOFLAGS=-mod=readonly") < 0))
            return kiwi_error_make (err, ENOMEM, "install plan");
    const kiwi__runtime *image_rt = kiwi__runtime_get (runtime);
    if (image_rt != NULL && add_settings (p, image_rt->env, err) < 0)
        return -1;
    for (size_t i = 0; i < p->n; i++) {
        const kiwi_install_step *st = &p->steps[i];
        const kiwi__runtime *rt = kiwi__runtime_of_eco (st->eco);
        const kiwi__package_manager *pm = kiwi__package_manager_of (st->eco);
        if ((rt && add_settings (p, rt->env, err) < 0) || (pm && add_settings (p, pm->env, err) < 0))
            return -1;
        char src[512];
        snprintf (src, sizeof src, "/kiwi/src%s%s", st->dir[0] ? "/" : "", st->dir);
        if (uses_venv (st->eco) && !venv) {
            /* the project's virtual environment, for `pytest` as for `python -m pytest` */
            venv = true;
            size_t l = strlen (path_dirs);
            snprintf (path_dirs + l, sizeof path_dirs - l, "%s/.venv/bin:", src);
            if (env_addf (&p->verify_env, "VIRTUAL_ENV=%s/.venv", src) < 0)
                return kiwi_error_make (err, ENOMEM, "install plan");
        }
        if (st->eco == KIWI_ECO_PNPM && strstr (st->script, KIWI__PNPM_PIN_DIR) != NULL
            && strstr (path_dirs, KIWI__PNPM_PIN_DIR) == NULL) {
            size_t l = strlen (path_dirs);
            snprintf (path_dirs + l, sizeof path_dirs - l, "%s/bin:", KIWI__PNPM_PIN_DIR);
        }
        if ((st->eco == KIWI_ECO_YARN_BERRY || st->eco == KIWI_ECO_BUN) && strstr (path_dirs, KIWI__SHIM_DIR) == NULL) {
            size_t l = strlen (path_dirs);
            snprintf (path_dirs + l, sizeof path_dirs - l, "%s:", KIWI__SHIM_DIR);
        }
        if (st->eco == KIWI_ECO_PIP && strstr (st->script, KIWI__WHEELHOUSE) != NULL
            && env_addf (&p->verify_env, "PIP_FIND_LINKS=%s/" KIWI__WHEELHOUSE, src) < 0)
            return kiwi_error_make (err, ENOMEM, "install plan");
        if (st->eco == KIWI_ECO_BUNDLER) {
            if (env_addf (&p->install_env, "BUNDLE_PATH=%s/vendor/bundle", src) < 0
                || env_addf (&p->verify_env, "BUNDLE_PATH=%s/vendor/bundle", src) < 0)
                return kiwi_error_make (err, ENOMEM, "install plan");
            if (st->locked
                && (env_add (&p->install_env, "BUNDLE_DEPLOYMENT=true") < 0
                    || env_add (&p->verify_env, "BUNDLE_DEPLOYMENT=true") < 0
                    || env_add (&p->install_env, "BUNDLE_FROZEN=true") < 0
                    || env_add (&p->verify_env, "BUNDLE_FROZEN=true") < 0))
                return kiwi_error_make (err, ENOMEM, "install plan");
        }
    }
    if (path_dirs[0]
        && (env_addf (&p->install_env, "PATH=%s" STD_PATH, path_dirs) < 0
            || env_addf (&p->verify_env, "PATH=%s" STD_PATH, path_dirs) < 0))
        return kiwi_error_make (err, ENOMEM, "install plan");
    return 0;
}

/* True when the script is one command with plain words (no shell needed). */
static bool
plain_words (const char *script)
{
    return strpbrk (script, "&|;<>()$`'\"\\\n*?~#") == NULL;
}

static int
plan_argv (kiwi_install_plan *p, kiwi_error_t *err)
{
    if (p->n == 0)
        return 0;
    if (p->n == 1 && p->steps[0].dir[0] == '\0' && plain_words (p->steps[0].script)) {
        cleanup_free char *copy = strdup (p->steps[0].script);
        if (copy == NULL)
            return kiwi_error_make (err, ENOMEM, "install plan");
        char *save = NULL;
        for (char *w = strtok_r (copy, " ", &save); w; w = strtok_r (NULL, " ", &save))
            if (kiwi_strv_add (&p->argv, w) < 0)
                return kiwi_error_make (err, ENOMEM, "install plan");
        return 0;
    }
    size_t cap = 64;
    for (size_t i = 0; i < p->n; i++)
        cap += strlen (p->steps[i].script) + strlen (p->steps[i].dir) + 64;
    cleanup_free char *script = malloc (cap);
    if (script == NULL)
        return kiwi_error_make (err, ENOMEM, "install plan");
    size_t l = (size_t) snprintf (script, cap, "set -e\n");
    for (size_t i = 0; i < p->n; i++)
        l += (size_t) snprintf (script + l, cap - l, "cd '/kiwi/src%s%s'\n%s\n", p->steps[i].dir[0] ? "/" : "",
                                p->steps[i].dir, p->steps[i].script);
    if (kiwi_strv_add (&p->argv, "/bin/sh") < 0 || kiwi_strv_add (&p->argv, "-c") < 0
        || kiwi_strv_add (&p->argv, script) < 0)
        return kiwi_error_make (err, ENOMEM, "install plan");
    return 0;
}

/* The image runtime's start (kiwi__runtime.verify_start), then every
 * step's prelude in its directory, each in a subshell. */
static int
plan_prelude (kiwi_install_plan *p, const char *runtime, kiwi_error_t *err)
{
    const kiwi__runtime *rt = kiwi__runtime_get (runtime);
    const char *start = rt != NULL ? rt->verify_start : NULL;
    size_t cap = 1 + (start != NULL ? strlen (start) + 1 : 0);
    for (size_t i = 0; i < p->n; i++)
        if (p->steps[i].prelude != NULL)
            cap += strlen (p->steps[i].prelude) + strlen (p->steps[i].dir) + 32;
    if (cap == 1)
        return 0;
    p->verify_prelude = malloc (cap);
    if (p->verify_prelude == NULL) {
        kiwi_install_plan_clear (p);
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    size_t l = 0;
    p->verify_prelude[0] = '\0';
    if (start != NULL)
        l += (size_t) snprintf (p->verify_prelude, cap, "%s\n", start);
    for (size_t i = 0; i < p->n; i++)
        if (p->steps[i].prelude != NULL)
            l += (size_t) snprintf (p->verify_prelude + l, cap - l, "(cd '/kiwi/src%s%s' && %s)\n",
                                    p->steps[i].dir[0] ? "/" : "", p->steps[i].dir, p->steps[i].prelude);
    return 0;
}

/* Folders that hold a project of their own the tests do not run: their
 * installs fill the disk or trip on a lockfile nobody keeps up. A folder
 * is one when its name is one of these or holds one as a word of its own
 * (words split at "-", "_" and "."): perf-testing, docs_site,
 * benchmark.suite. */
static const char *const aside_dirs[] = {
    "docs",    "doc",       "website",   "site",    "www",  "fuzz",  "benches",    "benchmarks", "benchmark",
    "bench",   "perf",      "performance", "examples", "example", "demo", "demos", "playground", NULL,
};

/* True when step directory `dir` is under an aside folder that is not
 * project_dir and does not hold it. */
static bool
aside (const char *dir, const char *project_dir)
{
    size_t n = strcspn (dir, "/");
    if (n == 0)
        return false;
    const char *pd = project_dir ? project_dir : "";
    if (strncmp (pd, dir, n) == 0 && (pd[n] == '\0' || pd[n] == '/'))
        return false;
    for (size_t w = 0; w < n;) {
        size_t k = strcspn (dir + w, "-_./");
        if (k > n - w)
            k = n - w;
        for (size_t i = 0; aside_dirs[i]; i++)
            if (strlen (aside_dirs[i]) == k && strncasecmp (dir + w, aside_dirs[i], k) == 0)
                return true;
        w += k + 1;
    }
    return false;
}

int
kiwi__install_plan_make_ctx (kiwi__inspect_ctx *ctx, const char *runtime, const char *project_dir,
                             const char *test_exe, kiwi_install_plan *p, kiwi_error_t *err)
{
    memset (p, 0, sizeof *p);
    kiwi__steps found = { 0 };
    if (install_detect (ctx, &found, err) < 0 || kiwi__ctx_check (ctx, err) < 0) {
        kiwi__steps_free (&found);
        return -1;
    }
    kiwi_install_step *all = found.v;
    size_t n = found.n;
    p->steps = calloc (n ? n : 1, sizeof *p->steps);
    if (p->steps == NULL) {
        for (size_t i = 0; i < n; i++)
            kiwi_install_step_clear (&all[i]);
        free (all);
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        bool runs = kiwi_ecosystem_runs_in (all[i].eco, runtime), apart = aside (all[i].dir, project_dir);
        if (runs && !apart) {
            p->steps[p->n++] = all[i]; /* now owned by the plan */
            continue;
        }
        if (rc == 0
            && kiwi_strv_addf (&p->left_out, "%s (%s): %s%s", kiwi_ecosystem_str (all[i].eco),
                               all[i].dir[0] ? all[i].dir : ".",
                               apart ? "a folder of its own the test command does not run in" : "the image runs ",
                               apart ? "" : runtime)
                   < 0)
            rc = kiwi_error_make (err, ENOMEM, "install plan");
        kiwi_install_step_clear (&all[i]);
    }
    free (all);
    if (rc == 0)
        rc = kiwi__python_test_runner (p->steps, p->n, project_dir, test_exe, err);
    if (rc < 0 || plan_env (p, runtime, err) < 0 || plan_argv (p, err) < 0) {
        kiwi_install_plan_clear (p);
        return -1;
    }
    size_t cap = 8;
    for (size_t i = 0; i < p->n; i++)
        cap += strlen (p->steps[i].summary) + strlen (p->steps[i].dir) + 16;
    p->display = malloc (cap);
    if (p->display == NULL) {
        kiwi_install_plan_clear (p);
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    size_t l = 0;
    p->display[0] = '\0';
    for (size_t i = 0; i < p->n; i++)
        l += (size_t) snprintf (p->display + l, cap - l, "%s%s%s%s%s", i ? "; " : "", p->steps[i].summary,
                                p->steps[i].dir[0] ? " (in " : "", p->steps[i].dir, p->steps[i].dir[0] ? ")" : "");
    if (p->n == 0)
        snprintf (p->display, cap, "-");
    return plan_prelude (p, runtime, err);
}

int
kiwi_install_plan_make (const char *root, const char *runtime, kiwi_install_plan *p, kiwi_error_t *err)
{
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL) {
        memset (p, 0, sizeof *p);
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    int rc = kiwi__install_plan_make_ctx (ctx, runtime, NULL, NULL, p, err);
    kiwi__ctx_free (ctx);
    return rc;
}
