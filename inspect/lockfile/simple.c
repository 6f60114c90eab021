/*
 * simple.c: the install planners of the runtime table that run
 * one command: Go (go mod download), Rust (cargo fetch), Ruby (bundle
 * install) and PHP (composer install) (see lockfile.h,
 * docs/inspection.md).
 */
#include "inspect/lockfile/lockfile.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

/* ------------------------------------------------------------------ Go */

int
kiwi__detect_go (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    const char *gm = kiwi__ctx_text (ctx, dir, "go.mod", NULL);
    if (gm == NULL)
        return 0;
    bool requires = false;
    for (const char *p = gm; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp (p, "require", 7) == 0 && (p[7] == ' ' || p[7] == '\t' || p[7] == '('))
            requires = true;
    }
    if (!requires)
        return 0; /* the standard library only */
    bool sum = kiwi__has_in (root, dir, "go.sum");
    /* a go.work in the module's folder or any folder above it, up to the
     * root, puts the module in workspace mode */
    bool work = false;
    char up[1024];
    snprintf (up, sizeof up, "%s", dir);
    for (;;) {
        work = work || kiwi__has_in (root, up, "go.work");
        char *slash = strrchr (up, '/');
        if (work || up[0] == '\0')
            break;
        if (slash != NULL)
            *slash = '\0';
        else
            up[0] = '\0';
    }
    char why[64];
    snprintf (why, sizeof why, "%s%s", work ? "go.work, " : "", sum ? "go.mod, go.sum" : "go.mod (no go.sum)");
    if (kiwi__add_step (s, KIWI_ECO_GO, dir, sum, "go mod download", "go mod download", why, err) < 0)
        return -1;
    s->v[s->n - 1].workspace = work;
    return 0;
}


/* ---------------------------------------------------------------- Rust */

static bool
cargo_table_has_remote (const char *toml, const char *section)
{
    char **keys = kiwi__toml_keys (toml, section);
    bool remote = false;
    for (size_t i = 0; keys && keys[i] && !remote; i++) {
        cleanup_free char *v = kiwi__toml_get (toml, section, keys[i]);
        /* { path = "../x" } needs no network; a version or git does */
        remote = v == NULL || strstr (v, "path") == NULL || strstr (v, "git") != NULL
                 || strstr (v, "version") != NULL;
    }
    kiwi__strv_free_raw (keys);
    return remote;
}

/* The files a manifest's declared targets need: each [[bench]], [[test]],
 * [[example]] and [[bin]] at its `path`, or where Cargo looks for its `name`
 * (benches/NAME.rs, tests/NAME.rs, examples/NAME.rs, src/bin/NAME.rs), and
 * a [lib] with a `path`; one per line. An awk program (every image has
 * awk), in single quotes. */
#define CARGO_TARGETS_AWK                                                                                    \
    "'function flush() { p = path; if (p == \"\" && name != \"\" && kind != \"lib\") "                   \
    "p = (kind == \"bench\" ? \"benches/\" : kind == \"test\" ? \"tests/\" : kind == \"example\" ? "       \
    "\"examples/\" : \"src/bin/\") name \".rs\"; if (p != \"\") print p; kind = \"\"; name = \"\"; "      \
    "path = \"\" } "                                                                                        \
    "/^[ \\t]*\\[/ { flush(); if ($0 ~ /^[ \\t]*\\[\\[(bench|test|example|bin)\\]\\]/) { k = $0; "        \
    "gsub(/[^a-z]/, \"\", k); kind = k } else if ($0 ~ /^[ \\t]*\\[lib\\]/) kind = \"lib\"; next } "      \
    "kind != \"\" && /^[ \\t]*name[ \\t]*=[ \\t]*\"/ { v = $0; sub(/^[^\"]*\"/, \"\", v); "              \
    "sub(/\".*/, \"\", v); name = v } "                                                                      \
    "kind != \"\" && /^[ \\t]*path[ \\t]*=[ \\t]*\"/ { v = $0; sub(/^[^\"]*\"/, \"\", v); "              \
    "sub(/\".*/, \"\", v); path = v } "                                                                      \
    "END { flush() }'"

/* Phase A holds the manifests only, and Cargo refuses a package with no
 * target, or with a declared target whose file is missing: an empty
 * src/lib.rs where a package has neither src/lib.rs nor src/main.rs, and an
 * empty file for each declared target (CARGO_TARGETS_AWK; a path that is
 * absolute or climbs out with .. is left alone). None of them is in a
 * dependency location, so none reaches the snapshot. */
#define CARGO_STUBS                                                                                          \
    "find . -name Cargo.toml -not -path '*/target/*' | while read -r m; do d=${m%/Cargo.toml}; "            \
    "[ -e \"$d/src/lib.rs\" ] || [ -e \"$d/src/main.rs\" ] || { mkdir -p \"$d/src\" && : > \"$d/src/lib.rs\"; }; "  \
    "awk " CARGO_TARGETS_AWK " \"$m\" | while read -r f; do case \"$f\" in /*|*..*) continue;; esac; "         \
    "[ -e \"$d/$f\" ] || { mkdir -p \"$(dirname \"$d/$f\")\" && : > \"$d/$f\"; }; done; "                   \
    "done && "

static const char *const cargo_dep_tables[] = { "dependencies", "dev-dependencies", "build-dependencies",
                                                 "workspace.dependencies", NULL };

static bool
cargo_manifest_has_remote (const char *ct)
{
    for (size_t i = 0; cargo_dep_tables[i]; i++)
        if (cargo_table_has_remote (ct, cargo_dep_tables[i]))
            return true;
    return false;
}

/* True when every component of `rel` (under the context's root) is a
 * directory itself, not a symlink: a member's folder is looked into only
 * inside the tree. */
static bool
real_dirs (const char *root, const char *rel)
{
    char path[1024];
    if (snprintf (path, sizeof path, "%s", rel) >= (int) sizeof path)
        return false;
    for (char *slash = path;; slash++) {
        slash = strchr (slash, '/');
        if (slash)
            *slash = '\0';
        if (path[0] && !kiwi__has_dir (root, path))
            return false;
        if (slash == NULL)
            return true;
        *slash = '/';
    }
}

/* True when a member of the Cargo workspace whose manifest is `ct` (in
 * `dir`) declares a dependency from a registry or git: `[workspace]
 * members` as written ("tokio", "crates/core"), or a last component that is
 * a shell pattern (a star, "crates/tokio-?") matched against the folders
 * there. An entry that is absolute or climbs out with .. is skipped; at most
 * 256 folders are read. */
static bool
cargo_members_remote (kiwi__inspect_ctx *ctx, const char *dir, const char *ct)
{
    const char *root = kiwi__ctx_root (ctx);
    cleanup_free char *members = kiwi__toml_get (ct, "workspace", "members");
    size_t looked = 0;
    for (const char *p = members ? strchr (members, '"') : NULL; p != NULL && looked < 256;) {
        const char *end = strchr (p + 1, '"');
        if (end == NULL)
            break;
        char m[512];
        snprintf (m, sizeof m, "%.*s", (int) (end - p - 1), p + 1);
        p = strchr (end + 1, '"');
        if (m[0] == '\0' || m[0] == '/' || strstr (m, "..") != NULL)
            continue;
        char base[1024];
        snprintf (base, sizeof base, "%s%s%s", dir, dir[0] ? "/" : "", m);
        char *last = strrchr (base, '/');
        const char *pat = last ? last + 1 : base;
        if (strpbrk (pat, "*?[") == NULL) {
            looked++;
            const char *mt = real_dirs (root, base) ? kiwi__ctx_text (ctx, base, "Cargo.toml", NULL) : NULL;
            if (mt != NULL && cargo_manifest_has_remote (mt))
                return true;
            continue;
        }
        char parent[1024], glob[512];
        snprintf (glob, sizeof glob, "%s", pat);
        snprintf (parent, sizeof parent, "%.*s", last ? (int) (last - base) : 0, base);
        if (strpbrk (parent, "*?[") != NULL || !real_dirs (root, parent))
            continue;
        cleanup_free char *abs = kiwi__path_join (root, parent);
        char **subs = abs ? kiwi__subdirs (abs) : NULL;
        bool remote = false;
        for (size_t i = 0; subs && subs[i] && !remote && looked < 256; i++) {
            if (fnmatch (glob, subs[i], FNM_PERIOD) != 0)
                continue;
            looked++;
            char sub[1024];
            snprintf (sub, sizeof sub, "%s%s%s", parent, parent[0] ? "/" : "", subs[i]);
            const char *mt = kiwi__ctx_text (ctx, sub, "Cargo.toml", NULL);
            remote = mt != NULL && cargo_manifest_has_remote (mt);
        }
        kiwi__strv_free_raw (subs);
        if (remote)
            return true;
    }
    return false;
}

int
kiwi__detect_rust (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *ct = kiwi__ctx_text (ctx, dir, "Cargo.toml", NULL);
    if (ct == NULL)
        return 0;
    const char *lock = kiwi__ctx_text (ctx, dir, "Cargo.lock", NULL);
    if (lock != NULL) {
        if (strstr (lock, "source = \"registry+") == NULL && strstr (lock, "source = \"git+") == NULL
            && strstr (lock, "source = \"sparse+") == NULL)
            return 0; /* only the workspace's own packages */
        return kiwi__add_step (s, KIWI_ECO_CARGO, dir, true, "cargo fetch --locked", CARGO_STUBS "cargo fetch --locked",
                               "Cargo.lock", err);
    }
    /* no lock: a dependency declared by the manifest itself, or by a member
     * of the workspace it heads (a virtual manifest declares none) */
    const char *why = cargo_manifest_has_remote (ct)         ? "Cargo.toml, no Cargo.lock"
                      : cargo_members_remote (ctx, dir, ct) ? "Cargo.toml (workspace members), no Cargo.lock"
                                                            : NULL;
    if (why == NULL)
        return 0;
    return kiwi__add_step (s, KIWI_ECO_CARGO, dir, false, "cargo fetch", CARGO_STUBS "cargo fetch", why, err);
}

/* ---------------------------------------------------------------- Ruby */

int
kiwi__detect_ruby (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    const char *gf = kiwi__ctx_text (ctx, dir, "Gemfile", NULL);
    if (gf == NULL)
        return 0;
    bool gems = false;
    for (const char *p = gf; p && *p && !gems; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        while (*p == ' ' || *p == '\t')
            p++;
        gems = (strncmp (p, "gem", 3) == 0 && (p[3] == ' ' || p[3] == '(')) || strncmp (p, "gemspec", 7) == 0;
    }
    if (!gems)
        return 0;
    bool lock = kiwi__has_in (root, dir, "Gemfile.lock");
    return kiwi__add_step (s, KIWI_ECO_BUNDLER, dir, lock,
                           lock ? "bundle install (deployment, frozen)" : "bundle install", "bundle install",
                           lock ? "Gemfile.lock" : "Gemfile, no Gemfile.lock", err);
}

/* ----------------------------------------------------------------- PHP */

int
kiwi__detect_php (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    const char *cj = kiwi__ctx_text (ctx, dir, "composer.json", NULL);
    if (cj == NULL)
        return 0;
    json_t *doc = kiwi__ctx_json (ctx, dir, "composer.json");
    bool needed = doc == NULL; /* let composer say what is wrong with it */
    if (doc != NULL) {
        static const char *const req[] = { "require", "require-dev" };
        for (size_t r = 0; r < 2; r++) {
            const char *k;
            json_t *v;
            json_object_foreach (json_object_get (doc, req[r]), k, v)
            {
                if (strchr (k, '/') != NULL) /* a package, not php or ext-* */
                    needed = true;
            }
        }
        /* an autoloader is generated by the install even without packages */
        needed = needed || json_object_get (doc, "autoload") || json_object_get (doc, "autoload-dev");
    }
    if (!needed)
        return 0;
    bool lock = kiwi__has_in (root, dir, "composer.lock");
    return kiwi__add_step (s, KIWI_ECO_COMPOSER, dir, lock, "composer install",
                           "composer install --no-interaction --no-progress",
                           lock ? "composer.lock" : "composer.json", err);
}

