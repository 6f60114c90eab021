/*
 * plan.c: the task process's view of a repository (see plan.h).
 *
 * Image: from the catalogue (KIWI_IMAGE_CATALOG, default: the public
 * official images), chosen by the test command's executable, then by marker
 * files. Install command: by lockfile. The cache key hashes the lockfiles'
 * contents with the image, the install command and the driver.
 */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "repo.h"
#include "sha256.h"

void
kiwi_plan_init (kiwi_plan *p)
{
    memset (p, 0, sizeof *p);
}

void
kiwi_plan_clear (kiwi_plan *p)
{
    free (p->image);
    free (p->image_reason);
    kiwi_strv_free (&p->install_argv);
    kiwi_strv_free (&p->install_env);
    kiwi_strv_free (&p->verify_env);
    free (p->cache_key);
    memset (p, 0, sizeof *p);
}

void
kiwi_step0_outcome_clear (kiwi_step0_outcome *o)
{
    free (o->output);
    free (o->reason);
    free (o->swapped_snapshot);
    memset (o, 0, sizeof *o);
}

static bool
has (const char *root, const char *name)
{
    char p[4096];
    snprintf (p, sizeof p, "%s/%s", root, name);
    struct stat st;
    return lstat (p, &st) == 0 && S_ISREG (st.st_mode);
}

/* The runtime the test command names: its first word after assignments
 * and wrappers. */
static const char *
runtime_of_command (const char *cmd)
{
    static const struct {
        const char *exe;
        const char *runtime;
    } table[] = {
        { "npm", "node" },       { "npx", "node" },       { "node", "node" },     { "yarn", "node" },
        { "pnpm", "node" },      { "python", "python" },  { "python3", "python" }, { "pytest", "python" },
        { "pip", "python" },     { "uv", "python" },      { "poetry", "python" },  { "go", "go" },
        { "cargo", "rust" },     { "ruby", "ruby" },      { "bundle", "ruby" },    { "rake", "ruby" },
        { "rspec", "ruby" },     { "php", "php" },        { "composer", "php" },   { "vendor/bin/phpunit", "php" },
        { "mvn", "maven" },      { "./mvnw", "maven" },   { "gradle", "gradle" },  { "./gradlew", "gradle" },
        { "java", "java" },
    };
    const char *p = cmd;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t l = strcspn (p, " \t;&|");
        char word[256];
        snprintf (word, sizeof word, "%.*s", (int) (l < 255 ? l : 255), p);
        if (word[0] == '\0')
            return NULL;
        if (strchr (word, '=') != NULL || strcmp (word, "env") == 0 || strcmp (word, "exec") == 0
            || strcmp (word, "timeout") == 0 || strcmp (word, "xvfb-run") == 0) {
            p += l;
            continue;
        }
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (strcmp (word, table[i].exe) == 0)
                return table[i].runtime;
        return NULL;
    }
}

static const char *
runtime_of_markers (const char *root)
{
    if (has (root, "package.json"))
        return "node";
    if (has (root, "go.mod"))
        return "go";
    if (has (root, "Cargo.toml"))
        return "rust";
    if (has (root, "pyproject.toml") || has (root, "requirements.txt") || has (root, "setup.py"))
        return "python";
    if (has (root, "Gemfile"))
        return "ruby";
    if (has (root, "composer.json"))
        return "php";
    if (has (root, "pom.xml"))
        return "maven";
    if (has (root, "build.gradle") || has (root, "build.gradle.kts"))
        return "gradle";
    return "base";
}

/* The image for `runtime` in the catalogue ("runtime<TAB>version<TAB>image",
 * '#' comments): the '*' row. */
static char *
catalogue_image (const char *catalog, const char *runtime, kiwi_error_t *err)
{
    FILE *f = fopen (catalog, "re");
    if (f == NULL) {
        kiwi_error_make (err, errno, "image catalogue %s", catalog);
        return NULL;
    }
    char line[1024];
    char *found = NULL;
    while (fgets (line, sizeof line, f) && found == NULL) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char rt[128], ver[128], img[512];
        if (sscanf (line, "%127[^\t]\t%127[^\t]\t%511[^\t\n]", rt, ver, img) == 3 && strcmp (rt, runtime) == 0
            && strcmp (ver, "*") == 0)
            found = strdup (img);
    }
    fclose (f);
    if (found == NULL)
        kiwi_error_make (err, 0, "image catalogue %s has no default (*) row for runtime `%s`", catalog, runtime);
    return found;
}

static void
sha256_file_into (const char *root, const char *name, char *acc, size_t cap)
{
    char p[4096];
    snprintf (p, sizeof p, "%s/%s", root, name);
    FILE *f = fopen (p, "rb");
    if (f == NULL)
        return;
    size_t l = strlen (acc);
    snprintf (acc + l, cap - l, "%s:", name);
    l = strlen (acc);
    size_t n = fread (acc + l, 1, cap - l - 1, f);
    acc[l + n] = '\0';
    fclose (f);
}

int
kiwi_plan_make (const kiwi_worker_config *cfg, const char *root, const char *test_command, kiwi_plan *p,
                kiwi_error_t *err)
{
    const char *runtime = runtime_of_command (test_command);
    const char *why = "the test command's executable";
    if (runtime == NULL) {
        runtime = runtime_of_markers (root);
        why = "marker files";
    }
    const char *catalog = cfg->image_catalog;
    char def[4096];
    if (catalog == NULL) {
        snprintf (def, sizeof def, "%s/ops/images/catalog.default.tsv", KIWI_SOURCE_DIR);
        catalog = def;
    }
    p->image = catalogue_image (catalog, runtime, err);
    if (p->image == NULL)
        return -1;
    if (asprintf (&p->image_reason, "%s (%s)", why, runtime) < 0)
        p->image_reason = NULL;
    /* install command by lockfile */
    const char *lock = NULL;
    if (has (root, "pnpm-lock.yaml")) {
        kiwi_strv_add (&p->install_argv, "pnpm");
        kiwi_strv_add (&p->install_argv, "install");
        kiwi_strv_add (&p->install_argv, "--frozen-lockfile");
        lock = "pnpm-lock.yaml";
    } else if (has (root, "yarn.lock")) {
        kiwi_strv_add (&p->install_argv, "yarn");
        kiwi_strv_add (&p->install_argv, "install");
        kiwi_strv_add (&p->install_argv, "--frozen-lockfile");
        lock = "yarn.lock";
    } else if (has (root, "package-lock.json") || has (root, "npm-shrinkwrap.json")) {
        kiwi_strv_add (&p->install_argv, "npm");
        kiwi_strv_add (&p->install_argv, "ci");
        kiwi_strv_add (&p->install_argv, "--no-audit");
        kiwi_strv_add (&p->install_argv, "--no-fund");
        lock = has (root, "package-lock.json") ? "package-lock.json" : "npm-shrinkwrap.json";
    } else if (has (root, "requirements.txt")) {
        kiwi_strv_add (&p->install_argv, "/bin/sh");
        kiwi_strv_add (&p->install_argv, "-c");
        kiwi_strv_add (&p->install_argv, "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt");
        kiwi_strv_add (&p->verify_env, "PATH=/kiwi/src/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        lock = "requirements.txt";
    } else if (has (root, "go.sum")) {
        kiwi_strv_add (&p->install_argv, "go");
        kiwi_strv_add (&p->install_argv, "mod");
        kiwi_strv_add (&p->install_argv, "download");
        kiwi_strv_add (&p->verify_env, "GOPROXY=off");
        kiwi_strv_add (&p->verify_env, "GOFLAGS=-mod=mod");
        lock = "go.sum";
    }
    /* the cache key: lockfile contents, image, install command, driver */
    char *acc = calloc (1, 1 << 20);
    if (acc == NULL)
        return kiwi_error_make (err, ENOMEM, "cache key");
    snprintf (acc, 1 << 20, "image=%s\ndriver=%s\n", p->image, cfg->sandbox);
    for (size_t i = 0; i < p->install_argv.n; i++) {
        size_t l = strlen (acc);
        snprintf (acc + l, (1 << 20) - l, "arg=%s\n", p->install_argv.v[i]);
    }
    if (lock)
        sha256_file_into (root, lock, acc, 1 << 20);
    if (has (root, "package.json"))
        sha256_file_into (root, "package.json", acc, 1 << 20);
    char hex[65];
    kiwi_sha256_hex (acc, hex);
    free (acc);
    p->cache_key = strdup (hex);
    return 0;
}

int
kiwi_plan_step0 (kiwi_sandbox_env *sb, const kiwi_phase_config *pc, kiwi_plan *plan, const char *root,
                 const char *commit, const kiwi_task *task, const char *snapshot, kiwi_cache *cache,
                 int64_t deadline_ms, kiwi_events *events, kiwi_step0_outcome *o, kiwi_error_t *err)
{
    memset (o, 0, sizeof *o);
    /* the verify cache: the same tree, command and snapshot ran before */
    cleanup_free char *tree = NULL;
    char key[65] = "";
    if (kiwi_repo_tree_id (root, &tree, NULL) == 0) {
        char *in = NULL;
        if (asprintf (&in, "%s\n%s\n%s\n%s", tree, task->test_command, plan->cache_key, plan->image) >= 0) {
            kiwi_sha256_hex (in, key);
            free (in);
        }
    }
    kiwi_verify_entry ve;
    if (key[0] && kiwi_cache_get_verify (cache, key, &ve) == 1) {
        o->exit_code = ve.exit_code;
        o->output = steal_pointer (&ve.output);
        kiwi_verify_entry_clear (&ve);
        o->verdict = o->exit_code == 0 ? KIWI_STEP0_PASSES : KIWI_STEP0_FAILS;
        kiwi_events_emit (events, KIWI_PHASE_STEP0, "step0", 0,
                          json_pack ("{s:b,s:i,s:s,s:s}", "cached", 1, "exit_code", o->exit_code, "classification",
                                     o->verdict == KIWI_STEP0_PASSES ? "passes" : "test_failure", "image",
                                     plan->image));
        return 0;
    }
    cleanup_strv kiwi_strv creds = KIWI_STRV_INIT;
    for (size_t i = 0; i < task->n_test_credentials; i++)
        kiwi_strv_add (&creds, task->test_credentials[i]);
    kiwi_verify_request req = {
        .image = plan->image,
        .workspace = root,
        .snapshot_dir = snapshot,
        .command = task->test_command,
        .extra_env = kiwi_strv_list (&plan->verify_env),
        .credentials = kiwi_strv_list (&creds),
        .limits = { .disk_mb = task->limits.disk_mb },
        .timeout_ms = deadline_ms - kiwi_now_ms () > 1 ? deadline_ms - kiwi_now_ms () : 1,
        .output_cap = 16384,
        .task_id = task->id,
    };
    kiwi_exec_result r;
    if (kiwi_phase_verify (sb, pc, &req, &r, NULL, NULL, err) < 0)
        return -1;
    o->exit_code = r.exit_code;
    o->output = steal_pointer (&r.output);
    o->verdict = r.exit_code == 0 && !r.timed_out ? KIWI_STEP0_PASSES : KIWI_STEP0_FAILS;
    size_t ol = o->output ? strlen (o->output) : 0;
    kiwi_events_emit (events, KIWI_PHASE_STEP0, "step0", 0,
                      json_pack ("{s:b,s:i,s:s,s:s,s:I,s:s}", "cached", 0, "exit_code", r.exit_code, "classification",
                                 o->verdict == KIWI_STEP0_PASSES ? "passes" : "test_failure", "image", plan->image,
                                 "duration_ms", (json_int_t) r.duration_ms, "output_tail",
                                 o->output ? o->output + (ol > 2000 ? ol - 2000 : 0) : ""));
    if (key[0] && !r.timed_out)
        kiwi_cache_put_verify (cache, key, r.exit_code, o->output);
    kiwi_exec_result_clear (&r);
    (void) commit;
    return 0;
}
