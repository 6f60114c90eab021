/*
 * lockfile-node.c: the Node.js install planner of the runtime table: npm,
 * pnpm (a packageManager pin installed as a package), Yarn 1 and Yarn 2+
 * (yarnPath or corepack), chosen by packageManager and lockfiles (see
 * lockfile.h, docs/inspection.md).
 *
 * The package's own lifecycle scripts (a root `postinstall` or `prepare`)
 * are the repository's code: npm, pnpm and Yarn 1 would run them in Phase
 * A, with the network on. Phase A deletes them from its copy of
 * package.json first (`npm pkg delete`; that copy is never kept, only the
 * dependency locations are), so the package manager runs the
 * dependencies' install scripts alone, and the step's prelude runs the
 * root's scripts offline at the start of Phase B, in the package manager's
 * order, where the tree they build from is.
 */
#include "sandbox/lockfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "sandbox/runtime.h"

/* `yarn` for Yarn 2+ through corepack, in both phases. A script, not
 * corepack enable's symlink: that points out of /kiwi, and Docker refuses to
 * restore such a link into Phase B. */
#define COREPACK_SHIM                                                                                        \
    "mkdir -p " KIWI__SHIM_DIR " && printf '#!/bin/sh\\nexec corepack yarn \"$@\"\\n' > " KIWI__SHIM_DIR    \
    "/yarn && chmod 755 " KIWI__SHIM_DIR "/yarn\n"

/* A version as packageManager gives it ("9", "9.15.0", "10.0.0-rc.1"):
 * digits, letters, dots and dashes only (it goes into a shell line). */
static bool
pnpm_version_ok (const char *v)
{
    return *v != '\0' && strlen (v) < 40 && strspn (v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-") == strlen (v)
           && isdigit ((unsigned char) v[0]);
}

/* The root lifecycle scripts each package manager runs on install, in its
 * order (npm's docs/cli/using-npm/scripts; pnpm's and Yarn 1's own), and
 * the command that runs one of them. */
static const struct {
    kiwi_ecosystem eco;
    const char *runner;
    const char *const *order;
} lifecycles[] = {
    { KIWI_ECO_NPM, "npm run",
      (const char *const[]) { "preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare",
                              "postprepare", NULL } },
    { KIWI_ECO_PNPM, "pnpm run",
      (const char *const[]) { "preinstall", "install", "postinstall", "preprepare", "prepare", "postprepare", NULL } },
    { KIWI_ECO_YARN, "yarn run",
      (const char *const[]) { "preinstall", "install", "postinstall", "prepublish", "prepare", NULL } },
};

/* The step for `cmd` (summary) run by `script`, with the root's lifecycle
 * scripts of package.json `doc` moved to Phase B's prelude: Phase A's
 * script starts by deleting them from its copy. Yarn 2+ (which runs the
 * root's postinstall too) is not in the table and is left as it is
 * (docs/inspection.md). */
static int
add_node_step (kiwi__steps *s, kiwi_ecosystem eco, const char *dir, bool locked, const char *summary,
               const char *script, const char *why, json_t *doc, kiwi_error_t *err)
{
    const char *const *order = NULL;
    const char *runner = NULL;
    for (size_t i = 0; i < sizeof lifecycles / sizeof lifecycles[0]; i++)
        if (lifecycles[i].eco == eco) {
            order = lifecycles[i].order;
            runner = lifecycles[i].runner;
        }
    json_t *scripts = doc ? json_object_get (doc, "scripts") : NULL;
    char del[256] = "", run[512] = "", names[160] = "";
    size_t dl = 0, rl = 0, nl = 0;
    for (size_t i = 0; order && json_is_object (scripts) && order[i]; i++) {
        json_t *v = json_object_get (scripts, order[i]);
        if (!json_is_string (v) || *json_string_value (v) == '\0')
            continue;
        dl += (size_t) snprintf (del + dl, sizeof del - dl, " scripts.%s", order[i]);
        rl += (size_t) snprintf (run + rl, sizeof run - rl, "%s%s %s", rl ? " && " : "", runner, order[i]);
        nl += (size_t) snprintf (names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", order[i]);
    }
    if (dl == 0)
        return kiwi__add_step (s, eco, dir, locked, summary, script, why, err);
    cleanup_free char *a_script = NULL, *a_why = NULL;
    if (asprintf (&a_script, "npm pkg delete%s\n%s", del, script) < 0)
        a_script = NULL; /* asprintf leaves it undefined on failure */
    if (asprintf (&a_why, "%s; the package's own %s run offline at the start of Phase B", why, names) < 0)
        a_why = NULL;
    if (a_script == NULL || a_why == NULL)
        return kiwi_error_make (err, ENOMEM, "install plan");
    if (kiwi__add_step (s, eco, dir, locked, summary, a_script, a_why, err) < 0)
        return -1;
    return kiwi__set_prelude (s, run, err);
}

static bool
json_nonempty_object (json_t *o)
{
    return json_is_object (o) && json_object_size (o) > 0;
}

int
kiwi__detect_node (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    const char *pj = kiwi__ctx_text (ctx, dir, "package.json", NULL);
    if (pj == NULL)
        return 0;
    bool pnpm = kiwi__has_in (root, dir, "pnpm-lock.yaml"), yarn = kiwi__has_in (root, dir, "yarn.lock"),
         shrink = kiwi__has_in (root, dir, "npm-shrinkwrap.json"), npm = kiwi__has_in (root, dir, "package-lock.json");
    bool any_lock = pnpm || yarn || shrink || npm;
    if (!is_root && !any_lock)
        return 0; /* a workspace member or an unmanaged directory */
    json_t *doc = kiwi__ctx_json (ctx, dir, "package.json");
    char pm[64] = "";
    bool deps = false;
    if (doc != NULL) {
        json_t *f = json_object_get (doc, "packageManager");
        if (json_is_string (f))
            snprintf (pm, sizeof pm, "%s", json_string_value (f));
        deps = json_nonempty_object (json_object_get (doc, "dependencies"))
               || json_nonempty_object (json_object_get (doc, "devDependencies"))
               || json_nonempty_object (json_object_get (doc, "optionalDependencies"));
    }
    char *plus = strchr (pm, '+'); /* "yarn@4.5.3+sha512.abc": the hash is not part of the name */
    if (plus)
        *plus = '\0';
    bool berry_lock = false;
    if (yarn) {
        const char *yl = kiwi__ctx_text (ctx, dir, "yarn.lock", NULL);
        berry_lock = yl != NULL && (strncmp (yl, "__metadata:", 11) == 0 || strstr (yl, "\n__metadata:") != NULL);
    }
    bool yarnrc_yml = kiwi__has_in (root, dir, ".yarnrc.yml");
    kiwi_ecosystem eco;
    char why[256];
    const char *others = NULL;
    if (strncmp (pm, "pnpm@", 5) == 0) {
        eco = KIWI_ECO_PNPM;
        others = yarn ? "yarn.lock" : npm ? "package-lock.json" : shrink ? "npm-shrinkwrap.json" : NULL;
    } else if (strncmp (pm, "yarn@", 5) == 0) {
        eco = atoi (pm + 5) >= 2 ? KIWI_ECO_YARN_BERRY : KIWI_ECO_YARN;
        others = pnpm ? "pnpm-lock.yaml" : npm ? "package-lock.json" : shrink ? "npm-shrinkwrap.json" : NULL;
    } else if (strncmp (pm, "npm@", 4) == 0) {
        eco = KIWI_ECO_NPM;
        others = pnpm ? "pnpm-lock.yaml" : yarn ? "yarn.lock" : NULL;
    } else if (pnpm) {
        eco = KIWI_ECO_PNPM;
        others = yarn ? "yarn.lock" : npm ? "package-lock.json" : NULL;
    } else if (yarn) {
        eco = berry_lock || yarnrc_yml ? KIWI_ECO_YARN_BERRY : KIWI_ECO_YARN;
        others = npm ? "package-lock.json" : NULL;
    } else if (shrink || npm) {
        eco = KIWI_ECO_NPM;
    } else if (deps) {
        eco = KIWI_ECO_NPM;
    } else
        return 0; /* no lockfile and no dependencies declared */
    bool locked = eco == KIWI_ECO_PNPM ? pnpm : (eco == KIWI_ECO_NPM ? (shrink || npm) : yarn);
    const char *lockname = eco == KIWI_ECO_PNPM ? "pnpm-lock.yaml"
                           : eco == KIWI_ECO_NPM ? (shrink ? "npm-shrinkwrap.json" : "package-lock.json")
                                                 : "yarn.lock";
    if (pm[0])
        snprintf (why, sizeof why, "packageManager %s%s%s%s", pm, others ? " (" : "", others ? others : "",
                  others ? " ignored)" : "");
    else if (locked)
        snprintf (why, sizeof why, "%s%s%s%s", lockname, others ? " (" : "", others ? others : "",
                  others ? " ignored)" : "");
    else
        snprintf (why, sizeof why, "package.json declares dependencies, no lockfile");
    switch (eco) {
    case KIWI_ECO_PNPM: {
        /* a packageManager pin: that pnpm, from the npm registry as a
         * package (corepack's switch checks a registry signature that
         * cannot be had here), under /kiwi/home (kept for Phase B, whose
         * PATH has it first) */
        const char *pin = strncmp (pm, "pnpm@", 5) == 0 && pnpm_version_ok (pm + 5) ? pm + 5 : NULL;
        const char *cmd = locked ? "pnpm install --frozen-lockfile" : "pnpm install";
        char script[640];
        if (pin)
            snprintf (script, sizeof script,
                      "case \"$(pnpm --version 2>/dev/null)\" in '%s'|'%s'.*) ;; *) npm install -g --prefix "
                      KIWI__PNPM_PIN_DIR " --no-audit --no-fund --loglevel=error 'pnpm@%s' ;; esac\n"
                      "PATH=" KIWI__PNPM_PIN_DIR "/bin:$PATH %s",
                      pin, pin, pin, cmd);
        else
            snprintf (script, sizeof script, "%s", cmd);
        return add_node_step (s, eco, dir, locked, cmd, script, why, doc, err);
    }
    case KIWI_ECO_YARN:
        return locked ? add_node_step (s, eco, dir, true, "yarn install --frozen-lockfile",
                                       "yarn install --frozen-lockfile --non-interactive", why, doc, err)
                      : add_node_step (s, eco, dir, false, "yarn install", "yarn install --non-interactive", why, doc,
                                       err);
    case KIWI_ECO_YARN_BERRY: {
        /* Yarn 2+ comes from the repository (yarnPath, which yarn 1 hands
         * over to) or from corepack; corepack's shims go on PATH for both
         * phases so that `yarn` in the test command is the same Yarn. */
        bool yarn_path = false;
        if (yarnrc_yml) {
            const char *rc = kiwi__ctx_text (ctx, dir, ".yarnrc.yml", NULL);
            yarn_path = rc != NULL && (strncmp (rc, "yarnPath:", 9) == 0 || strstr (rc, "\nyarnPath:") != NULL);
        }
        /* Yarn 2+ refuses settings it does not know, and YARN_CAFILE
         * (Yarn 1's, set by Phase A with a CA bundle) is one: it is
         * replaced by Yarn 2's own name for the bundle. */
        const char *flag = locked ? " --immutable" : "";
        char summary[96], script[512];
        snprintf (summary, sizeof summary, "yarn install%s%s", flag, yarn_path ? " (yarnPath)" : " (corepack)");
        snprintf (script, sizeof script,
                  "unset YARN_CAFILE; if [ -f /kiwi/ca/ca-certificates.crt ]; then "
                  "export YARN_HTTPS_CA_FILE_PATH=/kiwi/ca/ca-certificates.crt; fi\n%syarn install%s",
                  yarn_path ? "" : COREPACK_SHIM, flag);
        return kiwi__add_step (s, eco, dir, locked, summary, script, why, err);
    }
    default:
        return locked ? add_node_step (s, eco, dir, true, "npm ci", "npm ci --no-audit --no-fund", why, doc, err)
                      : add_node_step (s, eco, dir, false, "npm install", "npm install --no-audit --no-fund", why, doc,
                                       err);
    }
}

