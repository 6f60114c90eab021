/*
 * node.c: the Node.js install planner of the runtime table: npm,
 * pnpm (a packageManager pin installed as a package), Yarn 1 and Yarn 2+
 * (yarnPath or corepack), bun (its binary's npm package), chosen by
 * packageManager and lockfiles (see
 * lockfile.h, docs/inspection.md).
 *
 * The package's own lifecycle scripts (a root `postinstall` or `prepare`,
 * a workspace member's) are the repository's code: every package manager
 * would run them in Phase A, with the network on. Phase A deletes them from
 * each package.json of its copy of the tree first (STRIP_LIFECYCLE; that
 * copy is never kept, only the dependency locations are), so the package
 * manager runs the dependencies' install scripts alone, and the step's
 * prelude runs the members' scripts (node-members.c) and the
 * root's offline at the start of Phase B, in the package manager's order,
 * where the tree they build from is.
 */
#include "inspect/lockfile/lockfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

/* `yarn` for Yarn 2+ through corepack, in both phases. A script, not
 * corepack enable's symlink: that points out of /kiwi, and Docker refuses to
 * restore such a link into Phase B. */
#define COREPACK_SHIM                                                                                        \
    "mkdir -p " KIWI__SHIM_DIR " && printf '#!/bin/sh\\nexec corepack yarn \"$@\"\\n' > " KIWI__SHIM_DIR    \
    "/yarn && chmod 755 " KIWI__SHIM_DIR "/yarn\n"

/* bun for both phases: the npm package of the platform's binary
 * (@oven/bun-linux-x64, -x64-baseline without AVX2, -aarch64; the `bun`
 * package only links one of them from its install script) into
 * KIWI__BUN_DIR, with `bun` and `bunx` scripts in KIWI__SHIM_DIR that run
 * it. %s: "@VERSION" or "". */
#define BUN_INSTALL                                                                                          \
    "case \"$(uname -m)\" in x86_64) a=x64; grep -qw avx2 /proc/cpuinfo || a=x64-baseline ;; "                 \
    "aarch64) a=aarch64 ;; *) echo \"bun: no build for $(uname -m)\" >&2; exit 1 ;; esac\n"                    \
    "npm install --prefix " KIWI__BUN_DIR " --no-save --no-package-lock --no-audit --no-fund --ignore-scripts " \
    "--loglevel=error \"@oven/bun-linux-$a%s\"\n"                                                              \
    "mkdir -p " KIWI__SHIM_DIR " && printf '#!/bin/sh\\nexec " KIWI__BUN_DIR                                    \
    "/node_modules/@oven/bun-linux-%%s/bin/bun \"$@\"\\n' \"$a\" > " KIWI__SHIM_DIR "/bun && printf "          \
    "'#!/bin/sh\\nexec " KIWI__SHIM_DIR "/bun x \"$@\"\\n' > " KIWI__SHIM_DIR "/bunx && chmod 755 "            \
    KIWI__SHIM_DIR "/bun " KIWI__SHIM_DIR "/bunx\n"

/* A version as packageManager gives it ("9", "9.15.0", "10.0.0-rc.1"):
 * digits, letters, dots and dashes only (it goes into a shell line). */
static bool
pnpm_version_ok (const char *v)
{
    return *v != '\0' && strlen (v) < 40 && strspn (v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-") == strlen (v)
           && isdigit ((unsigned char) v[0]);
}

/* Phase A's first line for every Node.js step: every lifecycle script a
 * package manager runs on install is deleted from each package.json of
 * Phase A's copy of the tree, which is the install's input alone (the
 * root's and the workspace members' manifests, whatever Kiwi makes of the
 * members). A local package another manifest depends on by `file:` (a
 * directory the install's input holds for that reason, input.c)
 * is a dependency: its scripts are left to run as any dependency's, unless
 * it is the project itself. Node.js does it: one process whatever the
 * number of manifests, and no path of the repository in a shell line. Its
 * text has no single quote. */
#define LIFECYCLE_NAMES "preinstall,install,postinstall,prepublish,preprepare,prepare,postprepare"
#define STRIP_LIFECYCLE                                                                                      \
    "node -e '"                                                                                              \
    "const fs=require(\"fs\"),path=require(\"path\"),names=process.argv[1].split(\",\");"                    \
    "const own=(o,k)=>Object.prototype.hasOwnProperty.call(o,k),found=[];"                                   \
    "const walk=d=>{for(const e of fs.readdirSync(d,{withFileTypes:true})){const f=path.join(d,e.name);"     \
    "if(e.isDirectory()){if(e.name!==\"node_modules\")walk(f);continue}"                                     \
    "if(!e.isFile()||e.name!==\"package.json\")continue;"                                                    \
    "try{found.push([path.resolve(d),f,JSON.parse(fs.readFileSync(f,\"utf8\"))])}catch(x){}}};"              \
    "walk(\".\");const top=path.resolve(\".\"),local=new Set();"                                              \
    "for(const [d,,j] of found)for(const k of [\"dependencies\",\"devDependencies\",\"optionalDependencies\"])" \
    "{const o=j&&j[k];if(o&&typeof o===\"object\")for(const v of Object.values(o))"                          \
    "if(typeof v===\"string\"&&v.startsWith(\"file:\")){const t=path.resolve(d,v.slice(5));"                 \
    "if(t!==top)local.add(t)}}"                                                                              \
    "for(const [d,f,j] of found){const s=j&&j.scripts;"                                                      \
    "if(local.has(d)||!s||typeof s!==\"object\"||!names.some(n=>own(s,n)))continue;"                        \
    "for(const n of names)delete s[n];fs.writeFileSync(f,JSON.stringify(j,null,2)+\"\\n\")}"                \
    "' -- " LIFECYCLE_NAMES "\n"

/* The lifecycle scripts each package manager runs on install, in its
 * order, for the root and for a workspace member (npm's
 * docs/cli/using-npm/scripts and Arborist's rebuild; pnpm's, Yarn 1's and
 * Yarn 2+'s own), and the command that runs one of them. */
static const struct {
    kiwi_ecosystem eco;
    const char *runner;
    const char *const *root, *const *member;
} lifecycles[] = {
    { KIWI_ECO_NPM, "npm run",
      (const char *const[]) { "preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare",
                              "postprepare", NULL },
      (const char *const[]) { "preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare",
                              "postprepare", NULL } },
    { KIWI_ECO_PNPM, "pnpm run",
      (const char *const[]) { "preinstall", "install", "postinstall", "preprepare", "prepare", "postprepare", NULL },
      (const char *const[]) { "preinstall", "install", "postinstall", "preprepare", "prepare", "postprepare",
                              NULL } },
    { KIWI_ECO_YARN, "yarn run",
      (const char *const[]) { "preinstall", "install", "postinstall", "prepublish", "prepare", NULL },
      (const char *const[]) { "preinstall", "install", "postinstall", NULL } },
    { KIWI_ECO_YARN_BERRY, "yarn run", (const char *const[]) { "preinstall", "install", "postinstall", NULL },
      (const char *const[]) { "preinstall", "install", "postinstall", NULL } },
    { KIWI_ECO_BUN, "bun run",
      (const char *const[]) { "preinstall", "install", "postinstall", "preprepare", "prepare", "postprepare", NULL },
      (const char *const[]) { "preinstall", "install", "postinstall", NULL } },
};

/* `s` as one shell word, single-quoted. */
static void
sh_quote (FILE *f, const char *s)
{
    fputc ('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs ("'\\''", f);
        else
            fputc (*s, f);
    fputc ('\'', f);
}

/* Writes `runner` for each script of `order` that `doc` has (an empty one
 * is none), joined by " && ", after `sep` before the first; returns how
 * many. With `names`, their names go there too; with `f` NULL, nothing is
 * written (a count). */
static size_t
write_runs (FILE *f, const char *sep, const char *runner, const char *const *order, json_t *doc, FILE *names)
{
    json_t *scripts = doc ? json_object_get (doc, "scripts") : NULL;
    size_t n = 0;
    for (size_t i = 0; json_is_object (scripts) && order[i]; i++) {
        json_t *v = json_object_get (scripts, order[i]);
        if (!json_is_string (v) || *json_string_value (v) == '\0')
            continue;
        if (f)
            fprintf (f, "%s%s %s", n ? " && " : sep, runner, order[i]);
        if (names)
            fprintf (names, "%s%s", n ? ", " : "", order[i]);
        n++;
    }
    return n;
}

/* The step for `cmd` (summary) run by `script` in the project at `dir`
 * (package.json `doc`): Phase A's script starts with STRIP_LIFECYCLE, and
 * the step's prelude runs the workspace members' lifecycle scripts (in
 * dependency order, each in its directory) and then the root's, with the
 * package manager's runner, offline at the start of Phase B. */
static int
add_node_step (kiwi__inspect_ctx *ctx, kiwi__steps *s, kiwi_ecosystem eco, const char *dir, bool locked,
               const char *summary, const char *script, const char *why, json_t *doc, kiwi_error_t *err)
{
    size_t t = 0;
    while (lifecycles[t].eco != eco && t + 1 < sizeof lifecycles / sizeof lifecycles[0])
        t++;
    cleanup_strv kiwi_strv members = KIWI_STRV_INIT;
    if (kiwi__node_members (ctx, dir, eco == KIWI_ECO_PNPM, &members, err) < 0)
        return -1;
    cleanup_free char *run = NULL, *names = NULL;
    size_t run_len = 0, names_len = 0, with_scripts = 0, root_runs = 0;
    FILE *f = open_memstream (&run, &run_len), *nf = open_memstream (&names, &names_len);
    bool ok = f != NULL && nf != NULL;
    for (size_t i = 0; ok && i < members.n; i++) {
        cleanup_free char *rel = kiwi__path_join (dir, members.v[i]);
        json_t *md = rel ? kiwi__ctx_json (ctx, rel, "package.json") : NULL;
        if (write_runs (NULL, "", lifecycles[t].runner, lifecycles[t].member, md, NULL) == 0)
            continue;
        fprintf (f, "%s(cd %s", with_scripts ? " && " : "", members.v[i][0] == '-' ? "./" : ""); /* not an option */
        sh_quote (f, members.v[i]);
        write_runs (f, " && ", lifecycles[t].runner, lifecycles[t].member, md, NULL);
        fputc (')', f);
        with_scripts++;
    }
    if (ok)
        root_runs = write_runs (f, with_scripts ? " && " : "", lifecycles[t].runner, lifecycles[t].root, doc, nf);
    if (f != NULL && fclose (f) != 0)
        ok = false;
    if (nf != NULL && fclose (nf) != 0)
        ok = false;
    cleanup_free char *a_script = NULL, *a_why = NULL;
    if (!ok || asprintf (&a_script, "%s%s", STRIP_LIFECYCLE, script) < 0)
        return kiwi_error_make (err, ENOMEM, "install plan");
    int w;
    if (root_runs > 0 && with_scripts > 0)
        w = asprintf (&a_why, "%s; the package's own %s and %zu workspace member%s lifecycle scripts run offline at the "
                      "start of Phase B", why, names, with_scripts, with_scripts == 1 ? "'s" : "s'");
    else if (with_scripts > 0)
        w = asprintf (&a_why, "%s; %zu workspace member%s lifecycle scripts run offline at the start of Phase B", why,
                      with_scripts, with_scripts == 1 ? "'s" : "s'");
    else if (root_runs > 0)
        w = asprintf (&a_why, "%s; the package's own %s run offline at the start of Phase B", why, names);
    else
        w = asprintf (&a_why, "%s", why);
    if (w < 0)
        return kiwi_error_make (err, ENOMEM, "install plan");
    if (kiwi__add_step (s, eco, dir, locked, summary, a_script, a_why, err) < 0)
        return -1;
    return root_runs + with_scripts > 0 ? kiwi__set_prelude (s, run, err) : 0;
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
    bool bun_text = kiwi__has_in (root, dir, "bun.lock"), bun = bun_text || kiwi__has_in (root, dir, "bun.lockb");
    bool any_lock = pnpm || yarn || shrink || npm || bun;
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
        others = pnpm ? "pnpm-lock.yaml" : yarn ? "yarn.lock" : bun_text ? "bun.lock" : bun ? "bun.lockb" : NULL;
    } else if (strncmp (pm, "bun@", 4) == 0) {
        eco = KIWI_ECO_BUN;
        others = pnpm ? "pnpm-lock.yaml" : yarn ? "yarn.lock" : npm ? "package-lock.json" : NULL;
    } else if (pnpm) {
        eco = KIWI_ECO_PNPM;
        others = yarn ? "yarn.lock" : npm ? "package-lock.json" : bun_text ? "bun.lock" : bun ? "bun.lockb" : NULL;
    } else if (yarn) {
        eco = berry_lock || yarnrc_yml ? KIWI_ECO_YARN_BERRY : KIWI_ECO_YARN;
        others = npm ? "package-lock.json" : bun_text ? "bun.lock" : bun ? "bun.lockb" : NULL;
    } else if (shrink || npm) {
        eco = KIWI_ECO_NPM;
        others = bun_text ? "bun.lock" : bun ? "bun.lockb" : NULL;
    } else if (bun) {
        eco = KIWI_ECO_BUN;
    } else if (deps) {
        eco = KIWI_ECO_NPM;
    } else
        return 0; /* no lockfile and no dependencies declared */
    bool locked = eco == KIWI_ECO_PNPM  ? pnpm
                  : eco == KIWI_ECO_NPM ? (shrink || npm)
                  : eco == KIWI_ECO_BUN ? bun
                                        : yarn;
    const char *lockname = eco == KIWI_ECO_PNPM  ? "pnpm-lock.yaml"
                           : eco == KIWI_ECO_NPM ? (shrink ? "npm-shrinkwrap.json" : "package-lock.json")
                           : eco == KIWI_ECO_BUN ? (bun_text ? "bun.lock" : "bun.lockb")
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
        return add_node_step (ctx, s, eco, dir, locked, cmd, script, why, doc, err);
    }
    case KIWI_ECO_YARN:
        return locked ? add_node_step (ctx, s, eco, dir, true, "yarn install --frozen-lockfile",
                                       "yarn install --frozen-lockfile --non-interactive", why, doc, err)
                      : add_node_step (ctx, s, eco, dir, false, "yarn install", "yarn install --non-interactive", why, doc,
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
        return add_node_step (ctx, s, eco, dir, locked, summary, script, why, doc, err);
    }
    case KIWI_ECO_BUN: {
        /* bun from the npm registry, the one registry every Node.js
         * install reaches: packageManager's version, else the newest */
        const char *pin = strncmp (pm, "bun@", 4) == 0 && pnpm_version_ok (pm + 4) ? pm + 4 : NULL;
        char at[48] = "", script[1280];
        if (pin)
            snprintf (at, sizeof at, "@%s", pin);
        const char *cmd = locked ? "bun install --frozen-lockfile" : "bun install";
        snprintf (script, sizeof script, BUN_INSTALL "%s", at, cmd);
        return add_node_step (ctx, s, eco, dir, locked, cmd, script, why, doc, err);
    }
    default:
        return locked ? add_node_step (ctx, s, eco, dir, true, "npm ci", "npm ci --no-audit --no-fund", why, doc, err)
                      : add_node_step (ctx, s, eco, dir, false, "npm install", "npm install --no-audit --no-fund", why, doc,
                                       err);
    }
}

