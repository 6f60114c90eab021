/*
 * markers.c: the version readers of the runtime table (runtime.h):
 * what version of its runtime a project asks for, from .nvmrc,
 * .node-version, .tool-versions, mise.toml, package.json's volta and engines,
 * .python-version, pyproject.toml, Pipfile, go.mod, rust-toolchain,
 * Cargo.toml, .ruby-version, Gemfile, a gemspec, composer.json, pom.xml, build.gradle,
 * .java-version and the Maven and Gradle wrappers (docs/inspection.md).
 * Every file comes through the inspection's context (read once).
 */
#include "inspect/image/image.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

static bool
marker_set (kiwi__marker *m, const char *dir, const char *file, const char *req, kiwi_version_prefer prefer)
{
    if (req == NULL || *req == '\0' || !kiwi_version_req_valid (req))
        return false;
    m->req = strdup (req);
    m->from = kiwi__path_join (dir, file);
    m->prefer = prefer;
    return true;
}

/* A version from a .tool-versions line for any of `names` ("nodejs 20.1.0"). */
static bool
tool_versions (kiwi__inspect_ctx *ctx, const char *dir, const char *const *names, char *out, size_t cap)
{
    cleanup_free char *t = kiwi__ctx_copy (ctx, dir, ".tool-versions");
    if (t == NULL)
        return false;
    for (char *line = t; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char tool[64], v[64];
        if (sscanf (line, " %63s %63s", tool, v) == 2)
            for (size_t i = 0; names[i]; i++)
                if (strcmp (tool, names[i]) == 0) {
                    /* "temurin-17.0.1+12" and the like: from the first digit */
                    const char *d = v;
                    while (*d && !isdigit ((unsigned char) *d))
                        d++;
                    if (*d) {
                        snprintf (out, cap, "%s", d);
                        return true;
                    }
                }
        line = nl ? nl + 1 : NULL;
    }
    return false;
}

/* The version in a mise [tools] value: "22", ["22", "20"] (the first), or
 * { version = "22" }; from its first digit, as in .tool-versions. */
static bool
mise_value (const char *value, char *out, size_t cap)
{
    const char *p = value;
    if (*p == '{') {
        p = strstr (p, "version");
        if (p == NULL)
            return false;
    }
    if (p != value || *p == '[') {
        p = strpbrk (p, "\"'");
        if (p == NULL)
            return false;
        p++;
    }
    while (*p && !isdigit ((unsigned char) *p) && *p != '"' && *p != '\'')
        p++;
    size_t n = strcspn (p, "\"' ,]}\t\r\n");
    if (!isdigit ((unsigned char) *p) || n == 0)
        return false;
    snprintf (out, cap, "%.*s", (int) n, p);
    return true;
}

/* A version from mise's [tools] table for any of `names`: mise.toml, then
 * .mise.toml (mise.local.toml is one developer's, not the project's).
 * *file names the file it came from. */
static bool
mise_tools (kiwi__inspect_ctx *ctx, const char *dir, const char *const *names, char *out, size_t cap,
            const char **file)
{
    static const char *const files[] = { "mise.toml", ".mise.toml" };
    for (size_t f = 0; f < 2; f++) {
        const char *t = kiwi__ctx_text (ctx, dir, files[f], NULL);
        if (t == NULL)
            continue;
        for (size_t i = 0; names[i]; i++) {
            cleanup_free char *v = kiwi__toml_get (t, "tools", names[i]);
            if (v != NULL && mise_value (v, out, cap)) {
                *file = files[f];
                return true;
            }
        }
    }
    return false;
}

/* .tool-versions, then mise's files, into `m`. */
static bool
tool_files (kiwi__inspect_ctx *ctx, const char *dir, const char *const *names, kiwi__marker *m)
{
    char v[64];
    const char *file = NULL;
    if (tool_versions (ctx, dir, names, v, sizeof v) && marker_set (m, dir, ".tool-versions", v, KIWI_PREFER_HIGHEST))
        return true;
    return mise_tools (ctx, dir, names, v, sizeof v, &file) && marker_set (m, dir, file, v, KIWI_PREFER_HIGHEST);
}

static const struct {
    const char *name;
    const char *major;
} node_lts[] = {
    { "argon", "4" },     { "boron", "6" },    { "carbon", "8" }, { "dubnium", "10" }, { "erbium", "12" },
    { "fermium", "14" },  { "gallium", "16" }, { "hydrogen", "18" }, { "iron", "20" }, { "jod", "22" },
    { "krypton", "24" },
};

/* .nvmrc / .node-version text -> a requirement ("" for "use the newest") */
static void
nvmrc_requirement (const char *line, char *out, size_t cap)
{
    char l[128];
    snprintf (l, sizeof l, "%s", line);
    char *hash = strchr (l, '#');
    if (hash)
        *hash = '\0';
    size_t n = strlen (l);
    while (n && isspace ((unsigned char) l[n - 1]))
        l[--n] = '\0';
    for (char *p = l; *p; p++)
        *p = (char) tolower ((unsigned char) *p);
    out[0] = '\0';
    if (strncmp (l, "lts/", 4) == 0) {
        for (size_t i = 0; i < sizeof node_lts / sizeof node_lts[0]; i++)
            if (strcmp (l + 4, node_lts[i].name) == 0) {
                snprintf (out, cap, "%s", node_lts[i].major);
                return;
            }
        snprintf (out, cap, ">=0"); /* "lts/" followed by a star: the newest */
        return;
    }
    if (strcmp (l, "node") == 0 || strcmp (l, "stable") == 0 || strcmp (l, "latest") == 0
        || strcmp (l, "current") == 0) {
        snprintf (out, cap, ">=0");
        return;
    }
    snprintf (out, cap, "%s", l);
}

bool
kiwi__version_node (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    static const char *const files[] = { ".nvmrc", ".node-version" };
    for (size_t i = 0; i < 2; i++) {
        cleanup_free char *t = kiwi__ctx_copy (ctx, dir, files[i]);
        if (t == NULL)
            continue;
        char line[128], req[128];
        kiwi__first_line (t, line, sizeof line);
        nvmrc_requirement (line, req, sizeof req);
        if (marker_set (m, dir, files[i], req, KIWI_PREFER_HIGHEST))
            return true;
    }
    static const char *const tv[] = { "nodejs", "node", NULL };
    if (tool_files (ctx, dir, tv, m))
        return true;
    json_t *doc = kiwi__ctx_json (ctx, dir, "package.json");
    if (doc == NULL)
        return false;
    bool found = false;
    json_t *volta = json_object_get (json_object_get (doc, "volta"), "node");
    json_t *engines = json_object_get (json_object_get (doc, "engines"), "node");
    if (json_is_string (volta))
        found = marker_set (m, dir, "package.json (volta.node)", json_string_value (volta), KIWI_PREFER_HIGHEST);
    if (!found && json_is_string (engines))
        found = marker_set (m, dir, "package.json (engines.node)", json_string_value (engines), KIWI_PREFER_HIGHEST);
    return found;
}

bool
kiwi__version_python (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    cleanup_free char *pv = kiwi__ctx_copy (ctx, dir, ".python-version");
    if (pv != NULL) {
        char line[128];
        kiwi__first_line (pv, line, sizeof line);
        if (isdigit ((unsigned char) line[0]) && marker_set (m, dir, ".python-version", line, KIWI_PREFER_HIGHEST))
            return true;
    }
    static const char *const tv[] = { "python", NULL };
    if (tool_files (ctx, dir, tv, m))
        return true;
    cleanup_free char *pp = kiwi__ctx_copy (ctx, dir, "pyproject.toml");
    if (pp != NULL) {
        cleanup_free char *rp = kiwi__toml_get (pp, "project", "requires-python");
        if (marker_set (m, dir, "pyproject.toml (requires-python)", rp, KIWI_PREFER_HIGHEST))
            return true;
        cleanup_free char *po = kiwi__toml_get (pp, "tool.poetry.dependencies", "python");
        if (marker_set (m, dir, "pyproject.toml (tool.poetry.dependencies.python)", po, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *pf = kiwi__ctx_copy (ctx, dir, "Pipfile");
    if (pf != NULL) {
        cleanup_free char *full = kiwi__toml_get (pf, "requires", "python_full_version");
        cleanup_free char *pyv = kiwi__toml_get (pf, "requires", "python_version");
        if (marker_set (m, dir, "Pipfile (requires)", full ? full : pyv, KIWI_PREFER_HIGHEST))
            return true;
    }
    return false;
}

bool
kiwi__version_go (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    cleanup_free char *gm = kiwi__ctx_copy (ctx, dir, "go.mod");
    if (gm == NULL)
        return false;
    char go[32] = "", tc[32] = "";
    for (char *line = gm; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char a[32], b[32];
        if (sscanf (line, " %31s %31s", a, b) == 2) {
            if (strcmp (a, "go") == 0 && isdigit ((unsigned char) b[0]))
                snprintf (go, sizeof go, "%s", b);
            else if (strcmp (a, "toolchain") == 0 && strncmp (b, "go", 2) == 0 && isdigit ((unsigned char) b[2]))
                snprintf (tc, sizeof tc, "%s", b + 2);
        }
        line = nl ? nl + 1 : NULL;
    }
    const char *pick = go;
    if (tc[0] && (!go[0] || kiwi__family_cmp (tc, go) > 0))
        pick = tc;
    if (!pick[0])
        return false;
    char req[48];
    snprintf (req, sizeof req, ">=%s", pick);
    return marker_set (m, dir, pick == tc ? "go.mod (toolchain)" : "go.mod (go)", req, KIWI_PREFER_HIGHEST);
}

bool
kiwi__version_rust (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    char req[64];
    cleanup_free char *tt = kiwi__ctx_copy (ctx, dir, "rust-toolchain.toml");
    cleanup_free char *tp = kiwi__ctx_copy (ctx, dir, "rust-toolchain");
    cleanup_free char *chan = NULL;
    const char *from = NULL;
    if (tt != NULL) {
        chan = kiwi__toml_get (tt, "toolchain", "channel");
        from = "rust-toolchain.toml";
    } else if (tp != NULL) {
        chan = kiwi__toml_get (tp, "toolchain", "channel"); /* the old file may be TOML too */
        if (chan == NULL) {
            char line[64];
            kiwi__first_line (tp, line, sizeof line);
            chan = strdup (line);
        }
        from = "rust-toolchain";
    }
    if (chan != NULL && isdigit ((unsigned char) chan[0])) {
        snprintf (req, sizeof req, ">=%s", chan);
        if (marker_set (m, dir, from, req, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *ct = kiwi__ctx_copy (ctx, dir, "Cargo.toml");
    if (ct == NULL)
        return false;
    cleanup_free char *rv = kiwi__toml_get (ct, "package", "rust-version");
    if (rv == NULL)
        rv = kiwi__toml_get (ct, "workspace.package", "rust-version");
    if (rv != NULL && isdigit ((unsigned char) rv[0])) {
        snprintf (req, sizeof req, ">=%s", rv);
        if (marker_set (m, dir, "Cargo.toml (rust-version)", req, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *ed = kiwi__toml_get (ct, "package", "edition");
    if (ed != NULL && strcmp (ed, "2024") == 0)
        return marker_set (m, dir, "Cargo.toml (edition 2024)", ">=1.85", KIWI_PREFER_HIGHEST);
    return false;
}

/* The first string after `required_ruby_version =` in `text` (also
 * Gem::Requirement.new(">= 3.2") and [">= 3.0", "< 4"], whose first bound
 * is taken), cut into out; false when there is none. */
static bool
gemspec_requirement (const char *text, char *out, size_t cap)
{
    for (const char *p = strstr (text, ".required_ruby_version"); p != NULL;
         p = strstr (p + 1, ".required_ruby_version")) {
        const char *q = p + strlen (".required_ruby_version");
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '=' || q[1] == '=')
            continue;
        const char *nl = strchr (q, '\n');
        const char *open = strpbrk (q, "\"'");
        if (open == NULL || (nl != NULL && open > nl))
            continue;
        const char *close = strchr (open + 1, *open);
        if (close == NULL || (nl != NULL && close > nl) || close == open + 1)
            continue;
        snprintf (out, cap, "%.*s", (int) (close - open - 1), open + 1);
        return true;
    }
    return false;
}

/* required_ruby_version of the first *.gemspec (by name) in dir. */
static bool
gemspec_ruby (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    cleanup_free char *path = kiwi__path_join (kiwi__ctx_root (ctx), dir);
    if (path == NULL)
        return false;
    DIR *d = opendir (path);
    if (d == NULL)
        return false;
    char first[256] = "";
    struct dirent *e;
    while ((e = readdir (d)) != NULL) {
        size_t n = strlen (e->d_name);
        if (n > 8 && n < sizeof first && strcmp (e->d_name + n - 8, ".gemspec") == 0
            && (first[0] == '\0' || strcmp (e->d_name, first) < 0))
            snprintf (first, sizeof first, "%s", e->d_name);
    }
    closedir (d);
    if (first[0] == '\0')
        return false;
    const char *t = kiwi__ctx_text (ctx, dir, first, NULL);
    char req[64], from[300];
    if (t == NULL || !gemspec_requirement (t, req, sizeof req))
        return false;
    snprintf (from, sizeof from, "%s (required_ruby_version)", first);
    return marker_set (m, dir, from, req, KIWI_PREFER_HIGHEST);
}

bool
kiwi__version_ruby (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    cleanup_free char *rv = kiwi__ctx_copy (ctx, dir, ".ruby-version");
    if (rv != NULL) {
        char line[64];
        kiwi__first_line (rv, line, sizeof line);
        const char *v = strncmp (line, "ruby-", 5) == 0 ? line + 5 : line;
        if (isdigit ((unsigned char) v[0]) && marker_set (m, dir, ".ruby-version", v, KIWI_PREFER_HIGHEST))
            return true;
    }
    static const char *const tv[] = { "ruby", NULL };
    if (tool_files (ctx, dir, tv, m))
        return true;
    cleanup_free char *gf = kiwi__ctx_copy (ctx, dir, "Gemfile");
    if (gf == NULL)
        return gemspec_ruby (ctx, dir, m);
    for (char *line = gf; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp (p, "ruby", 4) == 0 && (p[4] == ' ' || p[4] == '(')) {
            p += 5;
            while (*p == ' ' || *p == '(')
                p++;
            if (*p == '"' || *p == '\'') {
                char q = *p++;
                char *e = strchr (p, q);
                if (e) {
                    *e = '\0';
                    return marker_set (m, dir, "Gemfile (ruby)", p, KIWI_PREFER_HIGHEST);
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return gemspec_ruby (ctx, dir, m);
}

bool
kiwi__version_php (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    json_t *doc = kiwi__ctx_json (ctx, dir, "composer.json");
    if (doc == NULL)
        return false;
    bool found = false;
    json_t *plat = json_object_get (json_object_get (json_object_get (doc, "config"), "platform"), "php");
    json_t *req = json_object_get (json_object_get (doc, "require"), "php");
    if (json_is_string (plat))
        found = marker_set (m, dir, "composer.json (config.platform.php)", json_string_value (plat),
                            KIWI_PREFER_HIGHEST);
    if (!found && json_is_string (req))
        found = marker_set (m, dir, "composer.json (require.php)", json_string_value (req), KIWI_PREFER_HIGHEST);
    return found;
}

/* The text between <tag> and </tag> in an XML document, or "". */
static void
xml_text (const char *doc, const char *tag, char *out, size_t cap)
{
    char open[96], close[96];
    snprintf (open, sizeof open, "<%s>", tag);
    snprintf (close, sizeof close, "</%s>", tag);
    out[0] = '\0';
    const char *s = strstr (doc, open);
    if (s == NULL)
        return;
    s += strlen (open);
    const char *e = strstr (s, close);
    if (e == NULL)
        return;
    while (s < e && isspace ((unsigned char) *s))
        s++;
    size_t n = (size_t) (e - s);
    while (n > 0 && isspace ((unsigned char) s[n - 1]))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy (out, s, n);
    out[n] = '\0';
}

/* "1.8" -> "8", "17" -> "17". */
static void
java_major (const char *v, char *out, size_t cap)
{
    if (strncmp (v, "1.", 2) == 0 && isdigit ((unsigned char) v[2]))
        v += 2;
    size_t n = strspn (v, "0123456789");
    if (n >= cap)
        n = cap - 1;
    memcpy (out, v, n);
    out[n] = '\0';
}

bool
kiwi__version_java (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    char maj[16] = "", req[32];
    const char *from = NULL;
    cleanup_free char *pom = kiwi__ctx_copy (ctx, dir, "pom.xml");
    if (pom != NULL) {
        static const char *const tags[] = { "maven.compiler.release", "release", "maven.compiler.source",
                                            "maven.compiler.target", "java.version" };
        char javav[32];
        xml_text (pom, "java.version", javav, sizeof javav);
        for (size_t i = 0; i < sizeof tags / sizeof tags[0] && !maj[0]; i++) {
            char v[64];
            xml_text (pom, tags[i], v, sizeof v);
            if (strcmp (v, "${java.version}") == 0)
                snprintf (v, sizeof v, "%s", javav);
            java_major (v, maj, sizeof maj);
            from = "pom.xml";
        }
    }
    static const char *const gradle_files[] = { "build.gradle", "build.gradle.kts" };
    for (size_t g = 0; g < 2 && !maj[0]; g++) {
        cleanup_free char *gb = kiwi__ctx_copy (ctx, dir, gradle_files[g]);
        if (gb == NULL)
            continue;
        static const char *const needles[] = { "JavaLanguageVersion.of(", "jvmToolchain(", "JavaVersion.VERSION_",
                                               "sourceCompatibility" };
        for (size_t i = 0; i < sizeof needles / sizeof needles[0] && !maj[0]; i++) {
            const char *p = strstr (gb, needles[i]);
            if (p == NULL)
                continue;
            p += strlen (needles[i]);
            while (*p && !isdigit ((unsigned char) *p) && *p != '\n')
                p++;
            char v[32];
            size_t n = strspn (p, "0123456789._");
            snprintf (v, sizeof v, "%.*s", (int) (n < 31 ? n : 31), p);
            for (char *q = v; *q; q++)
                if (*q == '_')
                    *q = '.';
            java_major (v, maj, sizeof maj);
            from = gradle_files[g];
        }
    }
    if (!maj[0]) {
        cleanup_free char *jv = kiwi__ctx_copy (ctx, dir, ".java-version");
        if (jv != NULL) {
            char line[64];
            kiwi__first_line (jv, line, sizeof line);
            java_major (line, maj, sizeof maj);
            from = ".java-version";
        }
    }
    if (!maj[0]) {
        char v[64];
        static const char *const tv[] = { "java", NULL };
        if (tool_versions (ctx, dir, tv, v, sizeof v)) {
            java_major (v, maj, sizeof maj);
            from = ".tool-versions";
        }
    }
    if (!maj[0])
        return false;
    snprintf (req, sizeof req, ">=%s", maj);
    return marker_set (m, dir, from, req, KIWI_PREFER_LOWEST);
}

/* A wrapper's distribution version: "apache-maven-3.9.6-bin.zip" -> "3",
 * "gradle-8.5-bin.zip" -> "8", with the row preference `pref`. */
static bool
markers_wrapper (kiwi__inspect_ctx *ctx, const char *dir, const char *file, const char *stem, int pref,
                 kiwi__marker *m)
{
    cleanup_free char *t = kiwi__ctx_copy (ctx, dir, file);
    if (t == NULL)
        return false;
    const char *p = strstr (t, stem);
    if (p == NULL)
        return false;
    p += strlen (stem);
    char v[16];
    size_t n = strspn (p, "0123456789");
    if (n == 0 || n > 8)
        return false;
    snprintf (v, sizeof v, "%.*s", (int) n, p);
    return marker_set (m, dir, file, v, pref);
}

bool
kiwi__version_maven (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    /* the wrapper runs the Maven it downloads, whatever the image's: the
     * first row of its major (the default JDK), not the newest Maven */
    return markers_wrapper (ctx, dir, ".mvn/wrapper/maven-wrapper.properties", "apache-maven-", KIWI_PREFER_LOWEST,
                            m);
}

bool
kiwi__version_gradle (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m)
{
    return markers_wrapper (ctx, dir, "gradle/wrapper/gradle-wrapper.properties", "gradle-", KIWI_PREFER_HIGHEST, m);
}

int
kiwi__version_markers_ctx (kiwi__inspect_ctx *ctx, const char *dir, const char *runtime, char **requirement,
                           char **from, kiwi_version_prefer *prefer, kiwi_error_t *err)
{
    *requirement = *from = NULL;
    const kiwi__runtime *rt = kiwi__runtime_get (runtime);
    *prefer = rt ? rt->prefer : KIWI_PREFER_HIGHEST;
    kiwi__marker m = { NULL, NULL, KIWI_PREFER_HIGHEST };
    bool found = rt != NULL && rt->version != NULL
                 && ((dir != NULL && *dir != '\0' && rt->version (ctx, dir, &m)) || rt->version (ctx, "", &m));
    if (kiwi__ctx_check (ctx, err) < 0) {
        free (m.req);
        free (m.from);
        return -1;
    }
    if (!found)
        return 0;
    if (m.req == NULL || m.from == NULL) {
        free (m.req);
        free (m.from);
        return kiwi_error_make (err, ENOMEM, "version markers");
    }
    *requirement = m.req;
    *from = m.from;
    *prefer = m.prefer;
    return 1;
}

int
kiwi_version_markers (const char *root, const char *dir, const char *runtime, char **requirement, char **from,
                      kiwi_version_prefer *prefer, kiwi_error_t *err)
{
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL)
        return kiwi_error_make (err, ENOMEM, "version markers");
    int rc = kiwi__version_markers_ctx (ctx, dir, runtime, requirement, from, prefer, err);
    kiwi__ctx_free (ctx);
    return rc;
}
