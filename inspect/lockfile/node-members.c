/*
 * node-members.c: the workspace members of a Node.js project as
 * its package manager declares them (package.json `workspaces`, an array or
 * { "packages": [...] }, for npm and Yarn; pnpm-workspace.yaml's `packages`
 * list for pnpm), in the order their lifecycle scripts run: a member after
 * the members it depends on (see inspect-internal.h, docs/inspection.md).
 *
 * Hand-written: the patterns are npm's and pnpm's globs (fnmatch wildcards
 * per path segment, `**` for any number of directories, a leading `!` to
 * exclude), which glob(3) does not match (no `**`, and it follows
 * symlinks); the YAML read is of one top-level list of strings, which does
 * not warrant a YAML library.
 *
 * The tree is hostile: symlinked directories are not followed, hidden
 * directories and node_modules are not entered (npm's and pnpm's globs skip
 * them too), the walk goes at most MEMBERS_MAX_DEPTH directories below the
 * project (deeper than the install input's search: every member found has
 * its manifest added to Phase A's input, input.c) and through at most
 * MEMBERS_MAX_DIRS directories,
 * and at most MEMBERS_MAX members are returned. A pattern that leaves the
 * project (absolute, `..`) names nothing.
 */
#include "inspect/inspect-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/strv.h"

#define MEMBERS_MAX 512
#define MEMBERS_MAX_DEPTH 12
#define MEMBERS_MAX_DIRS 8192
#define PATTERNS_MAX 64
#define PATTERN_LEN_MAX 256

typedef struct {
    kiwi_strv pos, neg;
    bool failed;
} patterns;

/* Adds one pattern as written (quotes, "./", a trailing "/" and a leading
 * "!" understood); one that leaves the project, or past the limits, is
 * ignored. */
static void
add_pattern (patterns *p, const char *raw, size_t len)
{
    while (len > 0 && (*raw == ' ' || *raw == '\t')) {
        raw++;
        len--;
    }
    while (len > 0 && (raw[len - 1] == ' ' || raw[len - 1] == '\t' || raw[len - 1] == '\r'))
        len--;
    if (len >= 2 && (raw[0] == '\'' || raw[0] == '"') && raw[len - 1] == raw[0]) {
        raw++;
        len -= 2;
    }
    char buf[PATTERN_LEN_MAX];
    if (len == 0 || len >= sizeof buf || p->pos.n + p->neg.n >= PATTERNS_MAX)
        return;
    memcpy (buf, raw, len);
    buf[len] = '\0';
    char *s = buf;
    bool neg = *s == '!';
    if (neg)
        s++;
    while (strncmp (s, "./", 2) == 0)
        s += 2;
    size_t l = strlen (s);
    while (l > 0 && s[l - 1] == '/')
        s[--l] = '\0';
    if (l == 0 || s[0] == '/' || strcmp (s, "..") == 0 || strncmp (s, "../", 3) == 0 || strstr (s, "/../") != NULL
        || (l >= 3 && strcmp (s + l - 3, "/..") == 0))
        return;
    if (kiwi_strv_add (neg ? &p->neg : &p->pos, s) < 0)
        p->failed = true;
}

/* package.json's `workspaces`: an array of strings, or an object whose
 * `packages` is one (Yarn 1's form). */
static void
json_patterns (json_t *doc, patterns *p)
{
    json_t *ws = doc ? json_object_get (doc, "workspaces") : NULL;
    if (json_is_object (ws))
        ws = json_object_get (ws, "packages");
    if (!json_is_array (ws))
        return;
    size_t i;
    json_t *v;
    json_array_foreach (ws, i, v)
    {
        if (json_is_string (v))
            add_pattern (p, json_string_value (v), strlen (json_string_value (v)));
    }
}

/* One item of a YAML list as written: a quoted string up to its closing
 * quote, else up to a comment. */
static void
yaml_item (patterns *p, const char *s, size_t len)
{
    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    if (len > 0 && (*s == '\'' || *s == '"')) {
        const char *close = memchr (s + 1, *s, len - 1);
        if (close != NULL)
            add_pattern (p, s, (size_t) (close - s) + 1);
        return;
    }
    for (size_t i = 0; i < len; i++)
        if (s[i] == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
            len = i;
            break;
        }
    add_pattern (p, s, len);
}

/* pnpm-workspace.yaml's top-level `packages`: a block list ("- a" lines,
 * indented or not) or a flow list on the key's line ("[a, b]"). */
static void
pnpm_patterns (const char *text, patterns *p)
{
    const char *l = text;
    while (l != NULL && *l != '\0') {
        const char *eol = strchr (l, '\n');
        size_t len = eol ? (size_t) (eol - l) : strlen (l);
        const char *next = eol ? eol + 1 : NULL;
        if (strncmp (l, "packages", 8) != 0) {
            l = next;
            continue;
        }
        const char *c = l + 8;
        while (c < l + len && (*c == ' ' || *c == '\t'))
            c++;
        if (c >= l + len || *c != ':') {
            l = next;
            continue;
        }
        c++;
        while (c < l + len && (*c == ' ' || *c == '\t'))
            c++;
        if (c < l + len && *c == '[') {
            const char *end = memchr (c, ']', (size_t) (l + len - c));
            const char *item = c + 1;
            while (end != NULL && item < end) {
                const char *comma = memchr (item, ',', (size_t) (end - item));
                const char *stop = comma ? comma : end;
                add_pattern (p, item, (size_t) (stop - item));
                item = stop + 1;
            }
            return;
        }
        if (c < l + len && *c != '#')
            return; /* a scalar, not a list */
        for (l = next; l != NULL && *l != '\0'; l = next) {
            eol = strchr (l, '\n');
            len = eol ? (size_t) (eol - l) : strlen (l);
            next = eol ? eol + 1 : NULL;
            size_t b = strspn (l, " \t");
            if (b >= len || l[b] == '#' || l[b] == '\r')
                continue; /* blank or a comment */
            if (l[b] != '-' || (b + 1 < len && l[b + 1] != ' ' && l[b + 1] != '\t'))
                return; /* the list is over */
            yaml_item (p, l + b + 1, len - b - 1);
        }
        return;
    }
}

/* Whether the path `s` matches the pattern `pat` segment by segment (`**`
 * any number of segments); with `prefix`, whether some path below `s` could
 * still match. */
static bool
match (const char *pat, const char *s, bool prefix)
{
    if (*pat == '\0')
        return *s == '\0';
    const char *pe = strchr (pat, '/');
    size_t pl = pe ? (size_t) (pe - pat) : strlen (pat);
    const char *pnext = pe ? pe + 1 : pat + pl;
    if (pl == 2 && pat[0] == '*' && pat[1] == '*') {
        if (prefix || match (pnext, s, false))
            return true;
        if (*s == '\0')
            return false;
        const char *se = strchr (s, '/');
        return match (pat, se ? se + 1 : s + strlen (s), false);
    }
    if (*s == '\0')
        return prefix;
    const char *se = strchr (s, '/');
    size_t sl = se ? (size_t) (se - s) : strlen (s);
    char pb[PATTERN_LEN_MAX], sb[PATTERN_LEN_MAX];
    if (pl >= sizeof pb || sl >= sizeof sb)
        return false;
    memcpy (pb, pat, pl);
    pb[pl] = '\0';
    memcpy (sb, s, sl);
    sb[sl] = '\0';
    if (fnmatch (pb, sb, FNM_PERIOD) != 0)
        return false;
    return match (pnext, se ? se + 1 : s + sl, prefix);
}

static bool
any_match (const kiwi_strv *v, const char *s, bool prefix)
{
    for (size_t i = 0; i < v->n; i++)
        if (match (v->v[i], s, prefix))
            return true;
    return false;
}

typedef struct {
    const char *root, *dir;
    const patterns *pat;
    kiwi_strv *found;
    size_t dirs;
    bool failed;
} walk_ctx;

static int
cmp_name (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Visits `sub` (relative to the project, "" for the project itself) and
 * what is below it, in name order. */
static void
walk (walk_ctx *w, const char *sub, int depth)
{
    cleanup_free char *rel = kiwi__path_join (w->dir, sub);
    if (rel == NULL) {
        w->failed = true;
        return;
    }
    if (*sub != '\0' && w->found->n < MEMBERS_MAX && kiwi__has_in (w->root, rel, "package.json")
        && any_match (&w->pat->pos, sub, false) && !any_match (&w->pat->neg, sub, false)
        && kiwi_strv_add (w->found, sub) < 0) {
        w->failed = true;
        return;
    }
    if (depth >= MEMBERS_MAX_DEPTH)
        return;
    cleanup_free char *abs = kiwi__path_join (w->root, rel);
    DIR *d = abs ? opendir (abs) : NULL;
    if (d == NULL)
        return;
    kiwi_strv children = KIWI_STRV_INIT; /* paths relative to the project */
    struct dirent *e;
    while ((e = readdir (d)) != NULL && w->dirs + children.n < MEMBERS_MAX_DIRS) {
        if (e->d_name[0] == '.' || strcmp (e->d_name, "node_modules") == 0)
            continue;
        if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
            continue;
        cleanup_free char *child = kiwi__path_join (sub, e->d_name);
        cleanup_free char *child_rel = kiwi__path_join (w->dir, child ? child : "");
        if (child == NULL || child_rel == NULL) {
            w->failed = true;
            break;
        }
        if (!any_match (&w->pat->pos, child, true) || !kiwi__has_dir (w->root, child_rel))
            continue; /* a symlink, or nothing below it can match */
        if (kiwi_strv_take (&children, steal_pointer (&child)) < 0) { /* freed there on failure */
            w->failed = true;
            break;
        }
    }
    closedir (d);
    if (children.n > 1)
        qsort (children.v, children.n, sizeof *children.v, cmp_name);
    w->dirs += children.n;
    for (size_t i = 0; i < children.n && !w->failed; i++)
        walk (w, children.v[i], depth + 1);
    kiwi_strv_free (&children);
}

/* True if the manifest `doc` depends on the package `name` (any kind). */
static bool
depends_on (json_t *doc, const char *name)
{
    static const char *const kinds[] = { "dependencies", "devDependencies", "optionalDependencies",
                                         "peerDependencies", NULL };
    for (size_t k = 0; kinds[k]; k++) {
        json_t *o = json_object_get (doc, kinds[k]);
        if (json_is_object (o) && json_object_get (o, name) != NULL)
            return true;
    }
    return false;
}

/* `found` in dependency order into `out`: each time the first (by path)
 * member whose member dependencies are all placed; in a cycle, the first
 * left. */
static int
order (kiwi__inspect_ctx *ctx, const char *dir, const kiwi_strv *found, kiwi_strv *out)
{
    size_t n = found->n;
    cleanup_free json_t **docs = calloc (n ? n : 1, sizeof *docs);
    cleanup_free bool *adj = calloc (n > 0 ? n * n : 1, sizeof *adj); /* adj[i*n+j]: i depends on j */
    cleanup_free size_t *indeg = calloc (n ? n : 1, sizeof *indeg);
    cleanup_free bool *placed = calloc (n ? n : 1, sizeof *placed);
    if (docs == NULL || adj == NULL || indeg == NULL || placed == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        cleanup_free char *rel = kiwi__path_join (dir, found->v[i]);
        docs[i] = rel ? kiwi__ctx_json (ctx, rel, "package.json") : NULL;
    }
    for (size_t j = 0; j < n; j++) {
        json_t *nm = docs[j] ? json_object_get (docs[j], "name") : NULL;
        if (!json_is_string (nm))
            continue;
        for (size_t i = 0; i < n; i++)
            if (i != j && json_is_object (docs[i]) && depends_on (docs[i], json_string_value (nm))) {
                adj[i * n + j] = true;
                indeg[i]++;
            }
    }
    for (size_t k = 0; k < n; k++) {
        size_t pick = n;
        for (size_t i = 0; i < n && pick == n; i++)
            if (!placed[i] && indeg[i] == 0)
                pick = i;
        for (size_t i = 0; i < n && pick == n; i++)
            if (!placed[i])
                pick = i;
        placed[pick] = true;
        for (size_t i = 0; i < n; i++)
            if (adj[i * n + pick] && indeg[i] > 0)
                indeg[i]--;
        if (kiwi_strv_add (out, found->v[pick]) < 0)
            return -1;
    }
    return 0;
}

int
kiwi__node_members (kiwi__inspect_ctx *ctx, const char *dir, bool pnpm, kiwi_strv *out, kiwi_error_t *err)
{
    patterns p = { KIWI_STRV_INIT, KIWI_STRV_INIT, false };
    if (pnpm) {
        const char *y = kiwi__ctx_text (ctx, dir, "pnpm-workspace.yaml", NULL);
        if (y != NULL)
            pnpm_patterns (y, &p);
    } else
        json_patterns (kiwi__ctx_json (ctx, dir, "package.json"), &p);
    kiwi_strv found = KIWI_STRV_INIT;
    walk_ctx w = { .root = kiwi__ctx_root (ctx), .dir = dir, .pat = &p, .found = &found };
    if (!p.failed && p.pos.n > 0)
        walk (&w, "", 0);
    int rc = p.failed || w.failed || order (ctx, dir, &found, out) < 0 ? kiwi_error_make (err, ENOMEM, "install plan")
                                                                      : 0;
    kiwi_strv_free (&found);
    kiwi_strv_free (&p.pos);
    kiwi_strv_free (&p.neg);
    return rc;
}
