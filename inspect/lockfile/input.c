/*
 * input.c: the install's input (the files Phase A receives and
 * the key hashes: the runtime table's input patterns, and what npm
 * manifests name with `file:`), where installs leave what they installed
 * (the table's dependency locations), and the install cache key (see
 * lockfile.h, docs/inspection.md).
 *
 * Input patterns: a base name (glob) matches a file of that name at any
 * depth (HASH_MAX_DEPTH, outside the skipped directories); one ending in
 * "/" names a directory (by its relative path, or a path ending in it)
 * whose files are all input. Dependency locations: a name without "/" is a
 * file or directory of that name at any depth under /kiwi/src
 * (node_modules in every workspace member); with "/" a path relative to a
 * project directory at any depth; `home` entries are relative to
 * /kiwi/home.
 */
#include "inspect/lockfile/lockfile.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

#define HASH_MAX_DEPTH 4
#define HASH_MAX_FILES 4096

typedef struct {
    const char *const *sets[16];
    size_t nsets;
    kiwi_strv *out;
    kiwi_strv taken; /* the directories `file:` references took whole */
    bool failed;
} walk_ctx;

static bool
wanted (const walk_ctx *w, const char *name)
{
    for (size_t s = 0; s < w->nsets; s++)
        for (size_t i = 0; w->sets[s][i]; i++) {
            const char *pat = w->sets[s][i];
            if (pat[strlen (pat) - 1] != '/' && fnmatch (pat, name, 0) == 0)
                return true;
        }
    return false;
}

/* True when the directory `rel` is one whose files are all input. */
static bool
wanted_dir (const walk_ctx *w, const char *rel)
{
    size_t rl = strlen (rel);
    for (size_t s = 0; s < w->nsets; s++)
        for (size_t i = 0; w->sets[s][i]; i++) {
            const char *pat = w->sets[s][i];
            size_t pl = strlen (pat);
            if (pat[pl - 1] != '/' || rl < pl - 1)
                continue;
            const char *tail = rel + rl - (pl - 1);
            if (strncmp (tail, pat, pl - 1) == 0 && (tail == rel || tail[-1] == '/'))
                return true;
        }
    return false;
}

static bool
skipped_dir (const char *nm, bool inside)
{
    static const char *const skip[] = { ".git", "node_modules", "vendor", "target", "build", "dist", ".venv",
                                        "venv", "__pycache__", ".gradle", ".tox", ".pytest_cache", NULL };
    static const char *const hidden_ok[] = { ".mvn", ".cargo", ".yarn", ".bundle", NULL };
    if (strcasecmp (nm, ".git") == 0)
        return true;
    if (inside)
        return false; /* within an input directory (patches/, .mvn/) everything */
    for (size_t i = 0; skip[i]; i++)
        if (strcmp (nm, skip[i]) == 0)
            return true;
    if (nm[0] != '.')
        return false;
    for (size_t i = 0; hidden_ok[i]; i++)
        if (strcmp (nm, hidden_ok[i]) == 0)
            return false;
    return true;
}

static void
walk (walk_ctx *w, const char *root, const char *rel, int depth, bool inside)
{
    cleanup_free char *abs = kiwi__path_join (root, rel);
    DIR *d = abs ? opendir (abs) : NULL;
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir (d)) != NULL && !w->failed) {
        const char *nm = e->d_name;
        if (strcmp (nm, ".") == 0 || strcmp (nm, "..") == 0)
            continue;
        cleanup_free char *r = kiwi__path_join (rel, nm);
        if (r == NULL) {
            w->failed = true;
            break;
        }
        if (kiwi__has_file (root, r)) {
            if ((inside || wanted (w, nm)) && w->out->n < HASH_MAX_FILES && kiwi_strv_add (w->out, r) < 0)
                w->failed = true;
            continue;
        }
        if (!kiwi__has_dir (root, r) || skipped_dir (nm, inside))
            continue;
        bool in = inside || wanted_dir (w, r);
        /* an input directory is taken whole, a little deeper than the search */
        if (depth < HASH_MAX_DEPTH || (in && depth < HASH_MAX_DEPTH + 4))
            walk (w, root, r, depth + 1, in);
    }
    closedir (d);
}

static int
cmp_path (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* A manifest's `file:` reference (package.json's `"dep": "file:vendor/x.tgz"`,
 * a lockfile's `"resolved": "file:..."`): what the install reads from the
 * tree besides the manifests (a vendored tarball, a local package's
 * directory). `spec` is resolved against the manifest's directory; only a
 * path inside the tree whose every directory is a real one (no symlink on
 * the way) is added: a file as it is, a directory whole. */
static void
add_file_reference (walk_ctx *w, const char *root, const char *manifest, const char *spec)
{
    const char *slash = strrchr (manifest, '/');
    cleanup_free char *base = slash ? strndup (manifest, (size_t) (slash - manifest)) : strdup ("");
    if (base == NULL || spec[0] == '/' || spec[0] == '\0') {
        w->failed = base == NULL;
        return;
    }
    /* the components of base/spec, "." dropped, ".." popped; leaving the
     * tree refuses the reference */
    char path[PATH_MAX];
    int n = snprintf (path, sizeof path, "%s%s%s", base, base[0] ? "/" : "", spec);
    if (n < 0 || (size_t) n >= sizeof path)
        return;
    char out[PATH_MAX] = "";
    size_t ol = 0;
    char *save = NULL;
    for (char *c = strtok_r (path, "/", &save); c; c = strtok_r (NULL, "/", &save)) {
        if (strcmp (c, ".") == 0)
            continue;
        if (strcmp (c, "..") == 0) {
            if (ol == 0)
                return;
            char *cut = strrchr (out, '/');
            ol = cut ? (size_t) (cut - out) : 0;
            out[ol] = '\0';
            continue;
        }
        if (strcasecmp (c, ".git") == 0)
            return;
        if (ol > 0 && !kiwi__has_dir (root, out))
            return; /* a symlink (or nothing) on the way */
        int m = snprintf (out + ol, sizeof out - ol, "%s%s", ol ? "/" : "", c);
        if (m < 0 || (size_t) m >= sizeof out - ol)
            return;
        ol += (size_t) m;
    }
    if (ol == 0)
        return;
    if (kiwi__has_file (root, out)) {
        for (size_t i = 0; i < w->out->n; i++)
            if (strcmp (w->out->v[i], out) == 0)
                return;
        if (w->out->n < HASH_MAX_FILES && kiwi_strv_add (w->out, out) < 0)
            w->failed = true;
    } else if (kiwi__has_dir (root, out) && !kiwi_strv_contains (&w->taken, out)) {
        if (kiwi_strv_add (&w->taken, out) < 0)
            w->failed = true;
        else
            walk (w, root, out, HASH_MAX_DEPTH, true); /* once: two packages may name each other */
    }
}

/* Every string of a JSON document that is a `file:` reference. */
static void
scan_file_references (walk_ctx *w, const char *root, const char *manifest, const json_t *j, int depth)
{
    if (depth > 8 || w->failed)
        return;
    if (json_is_string (j)) {
        const char *v = json_string_value (j);
        if (strncmp (v, "file:", 5) == 0)
            add_file_reference (w, root, manifest, v + 5);
    } else if (json_is_object (j)) {
        const char *k;
        const json_t *x;
        json_object_foreach ((json_t *) j, k, x)
            scan_file_references (w, root, manifest, x, depth + 1);
    } else if (json_is_array (j)) {
        size_t i;
        const json_t *x;
        json_array_foreach (j, i, x)
            scan_file_references (w, root, manifest, x, depth + 1);
    }
}

/* The `file:` references of the npm manifests and lockfiles found so far,
 * and of those the references bring (a fixture package that names another
 * with file:), each file read once, within HASH_MAX_FILES. */
static void
add_node_file_references (walk_ctx *w, kiwi__inspect_ctx *ctx, size_t from)
{
    for (size_t i = from; i < w->out->n && !w->failed; i++) {
        const char *rel = w->out->v[i];
        const char *nm = strrchr (rel, '/');
        nm = nm ? nm + 1 : rel;
        if (strcmp (nm, "package.json") != 0 && strcmp (nm, "package-lock.json") != 0
            && strcmp (nm, "npm-shrinkwrap.json") != 0)
            continue;
        json_t *j = kiwi__ctx_json (ctx, "", rel);
        if (j == NULL)
            continue;
        cleanup_free char *manifest = strdup (rel); /* the list may move as it grows */
        if (manifest == NULL)
            w->failed = true;
        else
            scan_file_references (w, kiwi__ctx_root (ctx), manifest, j, 0);
    }
}

/* True for a step of a Node.js package manager. */
static bool
node_step (const kiwi_install_step *st)
{
    const kiwi__runtime *t = kiwi__runtime_of_eco (st->eco);
    return t != NULL && t->pms[0].eco == KIWI_ECO_NPM && t->pms[0].env != NULL;
}

/* Each workspace member's package.json, wherever the workspace's patterns
 * put the member (node-members.c's walk goes deeper than the input's: a
 * member under packages/x/src/y/__tests__ has its node_modules laid by the
 * install only if its manifest is there); its `file:` references follow. */
static void
add_node_members (walk_ctx *w, kiwi__inspect_ctx *ctx, const kiwi_install_plan *plan)
{
    for (size_t i = 0; i < plan->n && !w->failed; i++) {
        const kiwi_install_step *st = &plan->steps[i];
        if (!node_step (st))
            continue;
        cleanup_strv kiwi_strv members = KIWI_STRV_INIT;
        kiwi_error_t merr = NULL;
        if (kiwi__node_members (ctx, st->dir, st->eco == KIWI_ECO_PNPM, &members, &merr) < 0) {
            kiwi_error_free (&merr);
            w->failed = true;
            return;
        }
        for (size_t m = 0; m < members.n && !w->failed && w->out->n < HASH_MAX_FILES; m++) {
            cleanup_free char *dir = kiwi__path_join (st->dir, members.v[m]);
            cleanup_free char *rel = dir ? kiwi__path_join (dir, "package.json") : NULL;
            if (rel == NULL)
                w->failed = true;
            else if (kiwi__has_file (kiwi__ctx_root (ctx), rel) && kiwi_strv_add (w->out, rel) < 0)
                w->failed = true; /* a repeat of a manifest the walk found goes with the sort */
        }
    }
}

int
kiwi__install_hashed_files_ctx (kiwi__inspect_ctx *ctx, const kiwi_install_plan *plan, kiwi_strv *files,
                                kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    walk_ctx w = { .out = files, .taken = KIWI_STRV_INIT };
    bool node = false;
    for (size_t i = 0; i < plan->n && w.nsets < 16; i++) {
        const kiwi__runtime *t = kiwi__runtime_of_eco (plan->steps[i].eco);
        bool dup = t == NULL;
        for (size_t s = 0; s < w.nsets && !dup; s++)
            dup = w.sets[s] == t->input;
        if (!dup)
            w.sets[w.nsets++] = t->input;
        /* npm manifests and lockfiles name `file:` references */
        node = node || node_step (&plan->steps[i]);
    }
    if (w.nsets == 0)
        return 0;
    size_t before = files->n;
    walk (&w, root, "", 0, false);
    if (node) {
        add_node_members (&w, ctx, plan);
        add_node_file_references (&w, ctx, before);
    }
    kiwi_strv_free (&w.taken);
    if (w.failed)
        return kiwi_error_make (err, ENOMEM, "install input");
    if (files->n > before) {
        qsort (files->v + before, files->n - before, sizeof *files->v, cmp_path);
        /* a referenced directory may repeat a manifest the walk found */
        size_t k = before;
        for (size_t i = before; i < files->n; i++) {
            if (k > before && strcmp (files->v[k - 1], files->v[i]) == 0) {
                free (files->v[i]);
                continue;
            }
            files->v[k++] = files->v[i];
        }
        files->n = k;
        files->v[k] = NULL; /* kiwi_strv stays NULL-terminated */
    }
    return 0;
}

int
kiwi_install_hashed_files (const char *root, const kiwi_install_plan *plan, kiwi_strv *files, kiwi_error_t *err)
{
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL)
        return kiwi_error_make (err, ENOMEM, "install input");
    int rc = kiwi__install_hashed_files_ctx (ctx, plan, files, err);
    if (rc == 0)
        rc = kiwi__ctx_check (ctx, err);
    kiwi__ctx_free (ctx);
    return rc;
}

static int
add_locations (kiwi_strv *out, const char *const *set)
{
    for (size_t i = 0; set[i]; i++) {
        bool dup = false;
        for (size_t j = 0; j < out->n && !dup; j++)
            dup = strcmp (out->v[j], set[i]) == 0;
        if (!dup && kiwi_strv_add (out, set[i]) < 0)
            return -1;
    }
    return 0;
}

int
kiwi_install_dep_locations (const kiwi_install_plan *plan, kiwi_strv *src, kiwi_strv *home, kiwi_error_t *err)
{
    size_t n = plan ? plan->n : kiwi__n_runtimes;
    if (add_locations (home, kiwi__kiwi_home) < 0)
        return kiwi_error_make (err, ENOMEM, "dependency locations");
    for (size_t i = 0; i < n; i++) {
        const kiwi__runtime *t = plan ? kiwi__runtime_of_eco (plan->steps[i].eco) : &kiwi__runtimes[i];
        if (t != NULL && (add_locations (src, t->src) < 0 || add_locations (home, t->home) < 0))
            return kiwi_error_make (err, ENOMEM, "dependency locations");
    }
    return 0;
}

static void
hash_field (kiwi_sha256 *h, const char *name, const char *value)
{
    kiwi_sha256_update (h, name, strlen (name));
    kiwi_sha256_update (h, value ? value : "", value ? strlen (value) : 0);
    kiwi_sha256_update (h, "\n", 1);
}

static void
hash_list (kiwi_sha256 *h, const char *name, const kiwi_strv *v)
{
    kiwi_sha256_update (h, name, strlen (name));
    for (size_t i = 0; v && i < v->n; i++)
        kiwi_sha256_update (h, v->v[i], strlen (v->v[i]) + 1);
    kiwi_sha256_update (h, "\n", 1);
}

/* Hashes one input file: from the context when it already holds the
 * file's text (a manifest the plan read), from the tree in a stream
 * otherwise. */
static int
hash_file (kiwi__inspect_ctx *ctx, const char *rel, unsigned char digest[32], uint64_t *size, kiwi_error_t *err)
{
    kiwi_sha256 fh;
    kiwi_sha256_init (&fh);
    size_t len = 0;
    const char *text = kiwi__ctx_cached (ctx, rel, &len);
    if (text != NULL) {
        kiwi_sha256_update (&fh, text, len);
        *size = len;
    } else {
        cleanup_free char *abs = kiwi__path_join (kiwi__ctx_root (ctx), rel);
        if (abs == NULL)
            return kiwi_error_make (err, ENOMEM, "install cache key");
        if (kiwi__sha256_file (&fh, abs, size, err) < 0)
            return kiwi_error_wrap (err, "install cache key");
    }
    kiwi_sha256_final (&fh, digest);
    return 0;
}

int
kiwi__install_cache_key_ctx (kiwi__inspect_ctx *ctx, const kiwi_install_plan *plan, const kiwi_install_key_input *k,
                             const kiwi_strv *input, char out[65], kiwi_error_t *err)
{
    kiwi_sha256 h;
    kiwi_sha256_init (&h);
    static const char head[] = "kiwi-install-v2\n";
    kiwi_sha256_update (&h, head, sizeof head - 1);
    hash_field (&h, "driver=", k->driver);
    hash_field (&h, "image=", k->image);
    hash_field (&h, "image-id=", k->image_id);
    hash_list (&h, "argv=", &plan->argv);
    hash_list (&h, "env=", &plan->install_env);
    kiwi_strv kenv = KIWI_STRV_INIT;
    for (size_t i = 0; k->kiwi_env && k->kiwi_env[i]; i++)
        if (kiwi_strv_add (&kenv, k->kiwi_env[i]) < 0) {
            kiwi_strv_free (&kenv);
            return kiwi_error_make (err, ENOMEM, "install cache key");
        }
    hash_list (&h, "kiwi-env=", &kenv);
    kiwi_strv_free (&kenv);
    cleanup_strv kiwi_strv own = KIWI_STRV_INIT;
    if (input == NULL) {
        if (kiwi__install_hashed_files_ctx (ctx, plan, &own, err) < 0)
            return -1;
        input = &own;
    }
    for (size_t i = 0; i < input->n; i++) {
        hash_field (&h, "file=", input->v[i]);
        uint64_t size = 0;
        unsigned char fd[32];
        if (hash_file (ctx, input->v[i], fd, &size, err) < 0)
            return -1;
        char line[96];
        int ll = snprintf (line, sizeof line, "%llu\n", (unsigned long long) size);
        kiwi_sha256_update (&h, line, (size_t) ll);
        kiwi_sha256_update (&h, fd, sizeof fd);
        kiwi_sha256_update (&h, "\n", 1);
    }
    unsigned char d[32];
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, out);
    return kiwi__ctx_check (ctx, err);
}

int
kiwi_install_cache_key (const char *root, const kiwi_install_plan *plan, const kiwi_install_key_input *k,
                        const kiwi_strv *input, char out[65], kiwi_error_t *err)
{
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL)
        return kiwi_error_make (err, ENOMEM, "install cache key");
    int rc = kiwi__install_cache_key_ctx (ctx, plan, k, input, out, err);
    kiwi__ctx_free (ctx);
    return rc;
}
