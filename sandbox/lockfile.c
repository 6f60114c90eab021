/*
 * lockfile.c: install steps by lockfile, the install plan for an image's
 * runtime, and the install cache key (see lockfile.h, docs/inspection.md).
 */
#include "lockfile.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "inspect-internal.h"

static const char *const java_trust_source =
    "// KiwiTrust.java: a Java trust store (PKCS12, password changeit) of the JDK's own certificates and every\n"
    "// certificate of a PEM bundle (when the bundle exists). Usage: java KiwiTrust.java BUNDLE.pem OUT.p12\n"
    "// The same program Kiwi's install step runs for Maven and Gradle (sandbox/lockfile.c, kiwi_java_trust_source).\n"
    "import java.io.*; import java.nio.file.*; import java.security.KeyStore; import java.security.cert.*;\n"
    "public class KiwiTrust { public static void main(String[] a) throws Exception {\n"
    "  KeyStore ks = KeyStore.getInstance(\"PKCS12\"); ks.load(null, null);\n"
    "  Path def = Paths.get(System.getProperty(\"java.home\"), \"lib\", \"security\", \"cacerts\");\n"
    "  if (Files.exists(def)) { KeyStore d = KeyStore.getInstance(KeyStore.getDefaultType());\n"
    "    try (InputStream in = Files.newInputStream(def)) { d.load(in, \"changeit\".toCharArray()); }\n"
    "    for (String al : java.util.Collections.list(d.aliases())) if (d.isCertificateEntry(al)) ks.setCertificateEntry(al, d.getCertificate(al)); }\n"
    "  int i = 0; Path bundle = Paths.get(a[0]);\n"
    "  if (Files.isRegularFile(bundle)) try (InputStream in = Files.newInputStream(bundle)) {\n"
    "    for (Certificate c : CertificateFactory.getInstance(\"X.509\").generateCertificates(in)) ks.setCertificateEntry(\"kiwi-ca-\" + (i++), c); }\n"
    "  Files.createDirectories(Paths.get(a[1]).toAbsolutePath().getParent());\n"
    "  try (OutputStream out = new FileOutputStream(a[1])) { ks.store(out, \"changeit\".toCharArray()); } } }\n"
    ;

const char *
kiwi_java_trust_source (void)
{
    return java_trust_source;
}

/* Where Phase A keeps its scratch files: emptied before the snapshot, so
 * nothing here reaches Phase B. */
#define SCRATCH "/kiwi/tmp/kiwi"
#define TRUSTSTORE "/kiwi/tmp/kiwi/truststore.p12"
#define SHIM_DIR "/kiwi/home/.kiwi/bin"
#define STD_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* `yarn` for Yarn 2+ through corepack, in both phases. A script, not
 * corepack enable's symlink: that points out of /kiwi, and Docker refuses to
 * restore such a link into Phase B. */
#define COREPACK_SHIM                                                                                        \
    "mkdir -p " SHIM_DIR " && printf '#!/bin/sh\\nexec corepack yarn \"$@\"\\n' > " SHIM_DIR "/yarn"          \
    " && chmod 755 " SHIM_DIR "/yarn\n"

/* Phase A's Java settings: the trust store made from the CA bundle, and a
 * home under /kiwi/home (Java takes user.home from /etc/passwd, not HOME). */
#define JAVA_TOOL_OPTIONS_A                                                                                  \
    "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=" TRUSTSTORE " -Djavax.net.ssl.trustStorePassword=changeit " \
    "-Djavax.net.ssl.trustStoreType=PKCS12 -Duser.home=/kiwi/home"

const char *
kiwi_ecosystem_str (kiwi_ecosystem e)
{
    switch (e) {
#define KIWI__ECO_STR(name, str, runtime)                                                                    \
    case name:                                                                                               \
        return str;
        KIWI_ECOSYSTEMS (KIWI__ECO_STR)
#undef KIWI__ECO_STR
    }
    return "unknown";
}

const char *
kiwi_ecosystem_runtime (kiwi_ecosystem e)
{
    switch (e) {
#define KIWI__ECO_RT(name, str, runtime)                                                                     \
    case name:                                                                                               \
        return runtime;
        KIWI_ECOSYSTEMS (KIWI__ECO_RT)
#undef KIWI__ECO_RT
    }
    return "unknown";
}

bool
kiwi_ecosystem_runs_in (kiwi_ecosystem e, const char *runtime)
{
    if (runtime == NULL || *runtime == '\0')
        return true;
    if (strcmp (runtime, kiwi_ecosystem_runtime (e)) == 0)
        return true;
    return strcmp (runtime, "java") == 0 && (e == KIWI_ECO_MAVEN || e == KIWI_ECO_GRADLE);
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

typedef struct {
    kiwi_install_step *v;
    size_t n;
} steps;

static void
steps_free (steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        kiwi_install_step_clear (&s->v[i]);
    free (s->v);
    memset (s, 0, sizeof *s);
}

static int
add_step (steps *s, kiwi_ecosystem eco, const char *dir, bool locked, const char *summary, const char *script,
          const char *why, kiwi_error_t *err)
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

static char *
read_in (const char *root, const char *dir, const char *file, size_t *len)
{
    cleanup_free char *rel = kiwi__path_join (dir, file);
    return rel ? kiwi__read_rel (root, rel, len) : NULL;
}

static bool
has_in (const char *root, const char *dir, const char *file)
{
    cleanup_free char *rel = kiwi__path_join (dir, file);
    return rel && kiwi__has_file (root, rel);
}

/* ------------------------------------------------------------- Node.js */

/* Where a pinned pnpm is installed (packageManager pnpm@V). */
#define PNPM_PIN_DIR "/kiwi/home/.kiwi/pnpm"

/* A version as packageManager gives it ("9", "9.15.0", "10.0.0-rc.1"):
 * digits, letters, dots and dashes only (it goes into a shell line). */
static bool
pnpm_version_ok (const char *v)
{
    return *v != '\0' && strlen (v) < 40 && strspn (v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-") == strlen (v)
           && isdigit ((unsigned char) v[0]);
}

static bool
json_nonempty_object (json_t *o)
{
    return json_is_object (o) && json_object_size (o) > 0;
}

static int
detect_node (const char *root, const char *dir, bool is_root, steps *s, kiwi_error_t *err)
{
    cleanup_free char *pj = read_in (root, dir, "package.json", NULL);
    if (pj == NULL)
        return 0;
    bool pnpm = has_in (root, dir, "pnpm-lock.yaml"), yarn = has_in (root, dir, "yarn.lock"),
         shrink = has_in (root, dir, "npm-shrinkwrap.json"), npm = has_in (root, dir, "package-lock.json");
    bool any_lock = pnpm || yarn || shrink || npm;
    if (!is_root && !any_lock)
        return 0; /* a workspace member or an unmanaged directory */
    json_t *doc = json_loads (pj, 0, NULL);
    char pm[64] = "";
    bool deps = false;
    if (doc != NULL) {
        json_t *f = json_object_get (doc, "packageManager");
        if (json_is_string (f))
            snprintf (pm, sizeof pm, "%s", json_string_value (f));
        deps = json_nonempty_object (json_object_get (doc, "dependencies"))
               || json_nonempty_object (json_object_get (doc, "devDependencies"))
               || json_nonempty_object (json_object_get (doc, "optionalDependencies"));
        json_decref (doc);
    }
    char *plus = strchr (pm, '+'); /* "yarn@4.5.3+sha512.abc": the hash is not part of the name */
    if (plus)
        *plus = '\0';
    bool berry_lock = false;
    if (yarn) {
        cleanup_free char *yl = read_in (root, dir, "yarn.lock", NULL);
        berry_lock = yl != NULL && (strncmp (yl, "__metadata:", 11) == 0 || strstr (yl, "\n__metadata:") != NULL);
    }
    bool yarnrc_yml = has_in (root, dir, ".yarnrc.yml");
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
                      PNPM_PIN_DIR " --no-audit --no-fund --loglevel=error 'pnpm@%s' ;; esac\n"
                      "PATH=" PNPM_PIN_DIR "/bin:$PATH %s",
                      pin, pin, pin, cmd);
        else
            snprintf (script, sizeof script, "%s", cmd);
        return add_step (s, eco, dir, locked, cmd, script, why, err);
    }
    case KIWI_ECO_YARN:
        return locked ? add_step (s, eco, dir, true, "yarn install --frozen-lockfile",
                                  "yarn install --frozen-lockfile --non-interactive", why, err)
                      : add_step (s, eco, dir, false, "yarn install", "yarn install --non-interactive", why, err);
    case KIWI_ECO_YARN_BERRY: {
        /* Yarn 2+ comes from the repository (yarnPath, which yarn 1 hands
         * over to) or from corepack; corepack's shims go on PATH for both
         * phases so that `yarn` in the test command is the same Yarn. */
        bool yarn_path = false;
        if (yarnrc_yml) {
            cleanup_free char *rc = read_in (root, dir, ".yarnrc.yml", NULL);
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
        return add_step (s, eco, dir, locked, summary, script, why, err);
    }
    default:
        return locked ? add_step (s, eco, dir, true, "npm ci", "npm ci --no-audit --no-fund", why, err)
                      : add_step (s, eco, dir, false, "npm install", "npm install --no-audit --no-fund", why, err);
    }
}

/* ------------------------------------------------------------------ Go */

static int
detect_go (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    cleanup_free char *gm = read_in (root, dir, "go.mod", NULL);
    if (gm == NULL)
        return 0;
    bool requires = false;
    for (char *p = gm; p && *p; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp (p, "require", 7) == 0 && (p[7] == ' ' || p[7] == '\t' || p[7] == '('))
            requires = true;
    }
    if (!requires)
        return 0; /* the standard library only */
    bool sum = has_in (root, dir, "go.sum");
    return add_step (s, KIWI_ECO_GO, dir, sum, "go mod download", "go mod download",
                     sum ? "go.mod, go.sum" : "go.mod (no go.sum)", err);
}

/* -------------------------------------------------------------- Python */

static bool
requirements_nonempty (const char *text)
{
    for (const char *p = text; p && *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != '#' && *p != '\n' && *p != '\r')
            return true;
        p = strchr (p, '\n');
        if (p)
            p++;
    }
    return false;
}

static const char *const requirement_files[] = {
    "requirements.txt",     "requirements-dev.txt", "requirements_dev.txt", "requirements-test.txt",
    "requirements_test.txt", "requirements-tests.txt", "dev-requirements.txt", "test-requirements.txt", NULL,
};

/* Poetry: the dependencies in Phase A (--no-root: the project's code is not
 * there), the project itself at the start of Phase B, offline, as Poetry
 * installs it (an editable .pth into the in-project .venv). A project that
 * is no package (package-mode = false) has nothing to install. */
static int
add_poetry (steps *s, const char *dir, bool locked, const char *why, kiwi_error_t *err)
{
    if (add_step (s, KIWI_ECO_POETRY, dir, locked, "poetry install --no-root", "poetry install --no-root", why, err)
        < 0)
        return -1;
    s->v[s->n - 1].prelude = strdup ("poetry install --only-root --no-interaction");
    return s->v[s->n - 1].prelude ? 0 : kiwi_error_make (err, ENOMEM, "install plan");
}

#define VENV_SCRIPT "python3 -m venv .venv && .venv/bin/pip install"

/* `pip install -e .`: Phase A installs the dependencies over the
 * manifests; the project itself is installed again at the start of Phase
 * B, offline and without its dependencies, now that its code is there. */
static int
add_editable (steps *s, const char *dir, const char *summary, const char *script, const char *why, kiwi_error_t *err)
{
    if (add_step (s, KIWI_ECO_PIP, dir, false, summary, script, why, err) < 0)
        return -1;
    s->v[s->n - 1].prelude = strdup (".venv/bin/pip install --no-deps --no-index --no-build-isolation -e .");
    return s->v[s->n - 1].prelude ? 0 : kiwi_error_make (err, ENOMEM, "install plan");
}

static int
detect_python (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    if (has_in (root, dir, "uv.lock"))
        /* the project itself is not in Phase A's input: installed in Phase B */
        return add_step (s, KIWI_ECO_UV, dir, true, "uv sync --frozen --no-install-project",
                         "uv sync --frozen --no-install-project", "uv.lock", err);
    if (has_in (root, dir, "poetry.lock"))
        return add_poetry (s, dir, true, "poetry.lock", err);
    if (has_in (root, dir, "Pipfile.lock"))
        return add_step (s, KIWI_ECO_PIPENV, dir, true, "pipenv sync --dev", "pipenv sync --dev", "Pipfile.lock",
                         err);
    char args[512] = "", names[512] = "";
    for (size_t i = 0; requirement_files[i]; i++) {
        cleanup_free char *t = read_in (root, dir, requirement_files[i], NULL);
        if (t == NULL || !requirements_nonempty (t))
            continue;
        size_t al = strlen (args), nl = strlen (names);
        snprintf (args + al, sizeof args - al, " -r %s", requirement_files[i]);
        snprintf (names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", requirement_files[i]);
    }
    if (args[0]) {
        char script[700], summary[600];
        snprintf (script, sizeof script, VENV_SCRIPT "%s", args);
        snprintf (summary, sizeof summary, "pip install%s (.venv)", args);
        /* pinned or not, requirements files are what the project installs with */
        return add_step (s, KIWI_ECO_PIP, dir, false, summary, script, names, err);
    }
    cleanup_free char *pp = read_in (root, dir, "pyproject.toml", NULL);
    if (pp != NULL) {
        cleanup_free char *poetry_name = kiwi__toml_get (pp, "tool.poetry", "name");
        if (poetry_name != NULL || kiwi__toml_table_nonempty (pp, "tool.poetry.dependencies"))
            return add_poetry (s, dir, false, "pyproject.toml [tool.poetry], no poetry.lock", err);
        cleanup_free char *deps = kiwi__toml_get (pp, "project", "dependencies");
        char **extras = kiwi__toml_keys (pp, "project.optional-dependencies");
        static const char *const wanted[] = { "test", "tests", "testing", "dev", NULL };
        char ex[128] = "";
        for (size_t i = 0; extras && extras[i]; i++)
            for (size_t w = 0; wanted[w]; w++)
                if (strcmp (extras[i], wanted[w]) == 0) {
                    size_t l = strlen (ex);
                    snprintf (ex + l, sizeof ex - l, "%s%s", l ? "," : "", extras[i]);
                }
        kiwi__strv_free_raw (extras);
        if (kiwi__toml_array_nonempty (deps) || ex[0]) {
            char script[300], summary[200];
            snprintf (script, sizeof script, VENV_SCRIPT " -e '.%s%s%s'", ex[0] ? "[" : "", ex, ex[0] ? "]" : "");
            snprintf (summary, sizeof summary, "pip install -e .%s%s%s (.venv)", ex[0] ? "[" : "", ex,
                      ex[0] ? "]" : "");
            return add_editable (s, dir, summary, script, "pyproject.toml [project]", err);
        }
    }
    if (has_in (root, dir, "Pipfile"))
        return add_step (s, KIWI_ECO_PIPENV, dir, false, "pipenv install --dev", "pipenv install --dev",
                         "Pipfile, no Pipfile.lock", err);
    if (has_in (root, dir, "setup.py"))
        return add_editable (s, dir, "pip install -e . (.venv)", VENV_SCRIPT " -e .", "setup.py", err);
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

/* Phase A holds the manifests only, and Cargo refuses a package with no
 * target: an empty src/lib.rs where a package has neither src/lib.rs nor
 * src/main.rs (outside the dependency locations: not in the snapshot). */
#define CARGO_STUBS                                                                                          \
    "find . -name Cargo.toml -not -path '*/target/*' | while read -r m; do d=${m%/Cargo.toml}; "            \
    "[ -e \"$d/src/lib.rs\" ] || [ -e \"$d/src/main.rs\" ] || { mkdir -p \"$d/src\" && : > \"$d/src/lib.rs\"; }; "  \
    "done && "

static int
detect_rust (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    cleanup_free char *ct = read_in (root, dir, "Cargo.toml", NULL);
    if (ct == NULL)
        return 0;
    cleanup_free char *lock = read_in (root, dir, "Cargo.lock", NULL);
    if (lock != NULL) {
        if (strstr (lock, "source = \"registry+") == NULL && strstr (lock, "source = \"git+") == NULL
            && strstr (lock, "source = \"sparse+") == NULL)
            return 0; /* only the workspace's own packages */
        return add_step (s, KIWI_ECO_CARGO, dir, true, "cargo fetch --locked", CARGO_STUBS "cargo fetch --locked",
                         "Cargo.lock", err);
    }
    static const char *const tables[] = { "dependencies", "dev-dependencies", "build-dependencies",
                                          "workspace.dependencies", NULL };
    for (size_t i = 0; tables[i]; i++)
        if (cargo_table_has_remote (ct, tables[i]))
            return add_step (s, KIWI_ECO_CARGO, dir, false, "cargo fetch", CARGO_STUBS "cargo fetch",
                             "Cargo.toml, no Cargo.lock", err);
    return 0;
}

/* ---------------------------------------------------------------- Ruby */

static int
detect_ruby (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    cleanup_free char *gf = read_in (root, dir, "Gemfile", NULL);
    if (gf == NULL)
        return 0;
    bool gems = false;
    for (char *p = gf; p && *p && !gems; p = strchr (p, '\n') ? strchr (p, '\n') + 1 : NULL) {
        while (*p == ' ' || *p == '\t')
            p++;
        gems = (strncmp (p, "gem", 3) == 0 && (p[3] == ' ' || p[3] == '(')) || strncmp (p, "gemspec", 7) == 0;
    }
    if (!gems)
        return 0;
    bool lock = has_in (root, dir, "Gemfile.lock");
    return add_step (s, KIWI_ECO_BUNDLER, dir, lock, lock ? "bundle install (deployment, frozen)" : "bundle install",
                     "bundle install", lock ? "Gemfile.lock" : "Gemfile, no Gemfile.lock", err);
}

/* ----------------------------------------------------------------- PHP */

static int
detect_php (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    cleanup_free char *cj = read_in (root, dir, "composer.json", NULL);
    if (cj == NULL)
        return 0;
    json_t *doc = json_loads (cj, 0, NULL);
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
        json_decref (doc);
    }
    if (!needed)
        return 0;
    bool lock = has_in (root, dir, "composer.lock");
    return add_step (s, KIWI_ECO_COMPOSER, dir, lock, "composer install",
                     "composer install --no-interaction --no-progress", lock ? "composer.lock" : "composer.json", err);
}

/* ------------------------------------------------------- Maven, Gradle */

static char *
java_trust_script (void)
{
    char *s = NULL;
    if (asprintf (&s,
                  "mkdir -p " SCRATCH " && cat > " SCRATCH "/KiwiTrust.java <<'KIWI_JAVA_EOF'\n%sKIWI_JAVA_EOF\n"
                  "java " SCRATCH "/KiwiTrust.java /kiwi/ca/ca-certificates.crt " TRUSTSTORE "\n",
                  java_trust_source)
        < 0)
        return NULL;
    return s;
}

/* Phase A has the poms only, and Surefire resolves its test provider only
 * when there are tests: an empty test class per module for the warm-up
 * (outside the dependency locations: not in the snapshot). A printf format
 * (detect_maven's asprintf): "%%" is the shell's "%". */
#define MAVEN_TEST_STUBS                                                                                     \
    "find . -name pom.xml -not -path '*/target/*' | while read -r m; do d=${m%%/pom.xml}; "                   \
    "mkdir -p \"$d/src/test/java\" && echo 'public class KiwiWarmUpTest {}' > \"$d/src/test/java/KiwiWarmUpTest.java\"; " \
    "done\n"

static int
detect_maven (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    if (!has_in (root, dir, "pom.xml"))
        return 0;
    bool wrapper = has_in (root, dir, "mvnw");
    const char *mvn = wrapper ? "sh ./mvnw" : "mvn";
    cleanup_free char *trust = java_trust_script ();
    cleanup_free char *script = NULL;
    /* dependency:go-offline resolves the declared dependencies and plugins;
     * Maven resolves plugins' own dependencies and the test provider only
     * when they run, so the lifecycle runs once up to `test` (its failures
     * do not fail the install: the code may be what the task fixes), then
     * the build output is removed and Maven is told to stay offline. */
    if (trust == NULL
        || asprintf (&script,
                     "%s%s -B -q dependency:go-offline\n" MAVEN_TEST_STUBS
                     "%s -B -q -fn -Dmaven.test.failure.ignore=true test >" SCRATCH "/warm-up.log 2>&1 || true\n"
                     "%s -B -q -fn clean >>" SCRATCH "/warm-up.log 2>&1 || true\n"
                     "mkdir -p /kiwi/home/.m2 && printf '<settings><offline>true</offline></settings>\\n' "
                     "> /kiwi/home/.m2/settings.xml\n",
                     trust, mvn, mvn, mvn)
               < 0) {
        script = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    char summary[96];
    snprintf (summary, sizeof summary, "%s -B dependency:go-offline + test warm-up", wrapper ? "./mvnw" : "mvn");
    return add_step (s, KIWI_ECO_MAVEN, dir, false, summary, script, wrapper ? "pom.xml, mvnw" : "pom.xml", err);
}

static const char gradle_resolve[] =
    "allprojects {\n"
    "  task kiwiResolveDependencies {\n"
    "    doLast {\n"
    "      configurations.findAll { it.canBeResolved }.each { c ->\n"
    "        try { c.resolve() }\n"
    "        catch (org.gradle.api.artifacts.ResolveException e) { throw e }\n"
    "        catch (Exception e) { logger.warn(\"kiwi: ${project.path} ${c.name}: ${e.message}\") }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static int
detect_gradle (const char *root, const char *dir, steps *s, kiwi_error_t *err)
{
    static const char *const files[] = { "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts",
                                         NULL };
    const char *found = NULL;
    for (size_t i = 0; files[i] && !found; i++)
        if (has_in (root, dir, files[i]))
            found = files[i];
    if (found == NULL)
        return 0;
    bool wrapper = has_in (root, dir, "gradlew");
    const char *g = wrapper ? "sh ./gradlew" : "gradle";
    cleanup_free char *trust = java_trust_script ();
    cleanup_free char *script = NULL;
    /* every resolvable configuration of every project is resolved (the
     * dependencies task only reads metadata), then the build output and the
     * project's cache are removed; Gradle is told to stay offline by an init
     * script in GRADLE_USER_HOME. */
    if (trust == NULL
        || asprintf (&script,
                     "%scat > " SCRATCH "/resolve.gradle <<'KIWI_GRADLE_EOF'\n%sKIWI_GRADLE_EOF\n"
                     "%s --no-daemon -q -I " SCRATCH "/resolve.gradle kiwiResolveDependencies\n"
                     "%s --no-daemon -q clean >" SCRATCH "/clean.log 2>&1 || true\n"
                     "rm -rf .gradle\n"
                     "mkdir -p /kiwi/home/.gradle/init.d && printf 'gradle.startParameter.offline = true\\n' "
                     "> /kiwi/home/.gradle/init.d/kiwi-offline.gradle\n",
                     trust, gradle_resolve, g, g)
               < 0) {
        script = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    char summary[96];
    snprintf (summary, sizeof summary, "%s resolve all configurations", wrapper ? "./gradlew" : "gradle");
    char why[96];
    snprintf (why, sizeof why, "%s%s", found, wrapper ? ", gradlew" : "");
    return add_step (s, KIWI_ECO_GRADLE, dir, false, summary, script, why, err);
}

/* ------------------------------------------------------------ detection */

static bool
has_eco (const steps *s, size_t from, kiwi_ecosystem a, kiwi_ecosystem b)
{
    for (size_t i = from; i < s->n; i++)
        if (s->v[i].dir[0] == '\0' && (s->v[i].eco == a || s->v[i].eco == b))
            return true;
    return false;
}

static bool
root_has_python (const steps *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].dir[0] == '\0' && strcmp (kiwi_ecosystem_runtime (s->v[i].eco), "python") == 0)
            return true;
    return false;
}

int
kiwi_install_detect (const char *root, kiwi_install_step **out, size_t *n, kiwi_error_t *err)
{
    *out = NULL;
    *n = 0;
    steps s = { 0 };
    if (detect_go (root, "", &s, err) < 0 || detect_rust (root, "", &s, err) < 0
        || detect_maven (root, "", &s, err) < 0 || detect_gradle (root, "", &s, err) < 0
        || detect_ruby (root, "", &s, err) < 0 || detect_php (root, "", &s, err) < 0
        || detect_python (root, "", &s, err) < 0 || detect_node (root, "", true, &s, err) < 0)
        goto fail;
    /* one directory down: separate projects, not members of the root's */
    bool root_rust = has_in (root, "", "Cargo.toml"), root_jvm = has_eco (&s, 0, KIWI_ECO_MAVEN, KIWI_ECO_GRADLE),
         root_ruby = has_in (root, "", "Gemfile"), root_php = has_in (root, "", "composer.json"),
         root_py = root_has_python (&s);
    char **subs = kiwi__subdirs (root);
    if (subs == NULL) {
        kiwi_error_make (err, ENOMEM, "install plan");
        goto fail;
    }
    int rc = 0;
    for (size_t i = 0; subs[i] && rc == 0; i++) {
        const char *d = subs[i];
        rc = detect_go (root, d, &s, err);
        if (rc == 0 && (!root_rust || has_in (root, d, "Cargo.lock")))
            rc = detect_rust (root, d, &s, err);
        if (rc == 0 && !root_jvm)
            rc = detect_maven (root, d, &s, err);
        if (rc == 0 && !root_jvm)
            rc = detect_gradle (root, d, &s, err);
        if (rc == 0 && (!root_ruby || has_in (root, d, "Gemfile.lock")))
            rc = detect_ruby (root, d, &s, err);
        if (rc == 0 && (!root_php || has_in (root, d, "composer.lock")))
            rc = detect_php (root, d, &s, err);
        if (rc == 0 && !root_py)
            rc = detect_python (root, d, &s, err);
        if (rc == 0)
            rc = detect_node (root, d, false, &s, err);
    }
    kiwi__strv_free_raw (subs);
    if (rc < 0)
        goto fail;
    *out = s.v;
    *n = s.n;
    return 0;
fail:
    steps_free (&s);
    return -1;
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

/* A = Phase A only, B = Phase B only, AB = both. */
enum { A = 1, B = 2, AB = 3 };

typedef struct {
    int phases;
    const char *kv;
} env_setting;

/* Settings of the image's runtime, whether or not anything is installed:
 * where its tools write (the root file system is read-only; /kiwi/home is
 * kept by Phase A's snapshot) and, for Phase B, that they stay offline. */
static const env_setting env_rt_node[] = {
    { AB, "npm_config_update_notifier=false" }, { B, "npm_config_offline=true" }, { 0, NULL },
};
static const env_setting env_rt_python[] = {
    { AB, "PIP_DISABLE_PIP_VERSION_CHECK=1" }, { B, "PIP_NO_INDEX=1" }, { 0, NULL },
};
static const env_setting env_rt_go[] = {
    { AB, "GOPATH=/kiwi/home/go" }, { AB, "GOTOOLCHAIN=local" }, { AB, "GOFLAGS=-mod=mod" },
    { B, "GOPROXY=off" },           { 0, NULL },
};
static const env_setting env_rt_rust[] = {
    { AB, "CARGO_HOME=/kiwi/home/.cargo" }, { B, "CARGO_NET_OFFLINE=true" }, { 0, NULL },
};
static const env_setting env_rt_ruby[] = {
    { AB, "GEM_HOME=/kiwi/home/.gem" }, { AB, "BUNDLE_USER_HOME=/kiwi/home/.bundle" }, { 0, NULL },
};
static const env_setting env_rt_php[] = {
    { AB, "COMPOSER_HOME=/kiwi/home/.composer" }, { AB, "COMPOSER_NO_INTERACTION=1" },
    { B, "COMPOSER_DISABLE_NETWORK=1" },          { 0, NULL },
};
static const env_setting env_rt_jvm[] = {
    { AB, "MAVEN_OPTS=-Duser.home=/kiwi/home" }, { AB, "GRADLE_USER_HOME=/kiwi/home/.gradle" },
    { B, "GRADLE_OPTS=-Dorg.gradle.daemon=false" }, { 0, NULL },
};

static const env_setting *
runtime_env (const char *rt)
{
    if (strcmp (rt, "node") == 0)
        return env_rt_node;
    if (strcmp (rt, "python") == 0)
        return env_rt_python;
    if (strcmp (rt, "go") == 0)
        return env_rt_go;
    if (strcmp (rt, "rust") == 0)
        return env_rt_rust;
    if (strcmp (rt, "ruby") == 0)
        return env_rt_ruby;
    if (strcmp (rt, "php") == 0)
        return env_rt_php;
    if (strcmp (rt, "java") == 0 || strcmp (rt, "maven") == 0 || strcmp (rt, "gradle") == 0)
        return env_rt_jvm;
    return NULL;
}

/* Settings of each ecosystem's install, on top of its runtime's. */
static const env_setting env_npm[] = {
    { A, "npm_config_cache=/kiwi/tmp/npm-cache" }, { A, "npm_config_fund=false" }, { A, "npm_config_audit=false" },
    { 0, NULL },
};
static const env_setting env_pnpm[] = {
    { A, "npm_config_store_dir=/kiwi/tmp/pnpm-store" },
    /* the pnpm that runs is the one Kiwi chose: never a switch at run time */
    { AB, "npm_config_manage_package_manager_versions=false" },
    { 0, NULL },
};
static const env_setting env_yarn[] = {
    { A, "YARN_CACHE_FOLDER=/kiwi/tmp/yarn-cache" }, { 0, NULL },
};
static const env_setting env_berry[] = {
    { AB, "YARN_ENABLE_GLOBAL_CACHE=false" }, { AB, "YARN_ENABLE_TELEMETRY=0" },
    { AB, "COREPACK_ENABLE_DOWNLOAD_PROMPT=0" }, { B, "COREPACK_ENABLE_NETWORK=0" },
    /* Yarn 2+ from the npm registry (@yarnpkg/cli-dist), the one registry every
     * Node.js install reaches, rather than repo.yarnpkg.com */
    { A, "COREPACK_NPM_REGISTRY=https://registry.npmjs.org" },
    { B, "YARN_ENABLE_NETWORK=0" },           { 0, NULL },
};
static const env_setting env_go[] = {
    { 0, NULL },
};
static const env_setting env_uv[] = {
    { A, "UV_CACHE_DIR=/kiwi/tmp/uv-cache" }, { AB, "UV_PYTHON_DOWNLOADS=never" }, { A, "UV_LINK_MODE=copy" },
    { B, "UV_OFFLINE=1" },                    { B, "UV_FROZEN=1" },                { 0, NULL },
};
static const env_setting env_poetry[] = {
    { AB, "POETRY_VIRTUALENVS_IN_PROJECT=true" }, { AB, "POETRY_NO_INTERACTION=1" },
    { A, "POETRY_CACHE_DIR=/kiwi/tmp/poetry-cache" }, { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" },
    { 0, NULL },
};
static const env_setting env_pipenv[] = {
    { AB, "PIPENV_VENV_IN_PROJECT=1" }, { AB, "PIPENV_NOSPIN=1" }, { AB, "PIPENV_YES=1" },
    { A, "PIPENV_CACHE_DIR=/kiwi/tmp/pipenv-cache" }, { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" },
    { 0, NULL },
};
static const env_setting env_pip[] = {
    { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" }, { 0, NULL },
};
static const env_setting env_cargo[] = {
    { 0, NULL },
};
static const env_setting env_bundler[] = {
    { A, "BUNDLE_JOBS=4" }, { 0, NULL },
};
static const env_setting env_composer[] = {
    { A, "COMPOSER_CACHE_DIR=/kiwi/tmp/composer-cache" }, { 0, NULL },
};
static const env_setting env_maven[] = {
    { A, JAVA_TOOL_OPTIONS_A }, { 0, NULL },
};
static const env_setting env_gradle[] = {
    { A, JAVA_TOOL_OPTIONS_A }, { 0, NULL },
};

static const env_setting *
eco_env (kiwi_ecosystem e)
{
    switch (e) {
    case KIWI_ECO_NPM:
        return env_npm;
    case KIWI_ECO_PNPM:
        return env_pnpm;
    case KIWI_ECO_YARN:
        return env_yarn;
    case KIWI_ECO_YARN_BERRY:
        return env_berry;
    case KIWI_ECO_GO:
        return env_go;
    case KIWI_ECO_UV:
        return env_uv;
    case KIWI_ECO_POETRY:
        return env_poetry;
    case KIWI_ECO_PIPENV:
        return env_pipenv;
    case KIWI_ECO_PIP:
        return env_pip;
    case KIWI_ECO_CARGO:
        return env_cargo;
    case KIWI_ECO_BUNDLER:
        return env_bundler;
    case KIWI_ECO_COMPOSER:
        return env_composer;
    case KIWI_ECO_MAVEN:
        return env_maven;
    case KIWI_ECO_GRADLE:
        return env_gradle;
    }
    return NULL;
}

static int
add_settings (kiwi_install_plan *p, const env_setting *set, kiwi_error_t *err)
{
    for (const env_setting *e = set; e && e->kv; e++)
        if (((e->phases & A) && env_add (&p->install_env, e->kv) < 0)
            || ((e->phases & B) && env_add (&p->verify_env, e->kv) < 0))
            return kiwi_error_make (err, ENOMEM, "install plan");
    return 0;
}

static bool
uses_venv (kiwi_ecosystem e)
{
    return e == KIWI_ECO_UV || e == KIWI_ECO_POETRY || e == KIWI_ECO_PIPENV || e == KIWI_ECO_PIP;
}

static int
plan_env (kiwi_install_plan *p, const char *runtime, kiwi_error_t *err)
{
    char path_dirs[1024] = "";
    bool venv = false;
    if (runtime != NULL && add_settings (p, runtime_env (runtime), err) < 0)
        return -1;
    for (size_t i = 0; i < p->n; i++) {
        const kiwi_install_step *st = &p->steps[i];
        if (add_settings (p, runtime_env (kiwi_ecosystem_runtime (st->eco)), err) < 0
            || add_settings (p, eco_env (st->eco), err) < 0)
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
        if (st->eco == KIWI_ECO_PNPM && strstr (st->script, PNPM_PIN_DIR) != NULL
            && strstr (path_dirs, PNPM_PIN_DIR) == NULL) {
            size_t l = strlen (path_dirs);
            snprintf (path_dirs + l, sizeof path_dirs - l, "%s/bin:", PNPM_PIN_DIR);
        }
        if (st->eco == KIWI_ECO_YARN_BERRY && strstr (path_dirs, SHIM_DIR) == NULL) {
            size_t l = strlen (path_dirs);
            snprintf (path_dirs + l, sizeof path_dirs - l, "%s:", SHIM_DIR);
        }
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

/* Every step's prelude in its directory, each in a subshell. */
static int
plan_prelude (kiwi_install_plan *p, kiwi_error_t *err)
{
    size_t cap = 1;
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
    for (size_t i = 0; i < p->n; i++)
        if (p->steps[i].prelude != NULL)
            l += (size_t) snprintf (p->verify_prelude + l, cap - l, "(cd '/kiwi/src%s%s' && %s)\n",
                                    p->steps[i].dir[0] ? "/" : "", p->steps[i].dir, p->steps[i].prelude);
    return 0;
}

int
kiwi_install_plan_make (const char *root, const char *runtime, kiwi_install_plan *p, kiwi_error_t *err)
{
    memset (p, 0, sizeof *p);
    kiwi_install_step *all = NULL;
    size_t n = 0;
    if (kiwi_install_detect (root, &all, &n, err) < 0)
        return -1;
    p->steps = calloc (n ? n : 1, sizeof *p->steps);
    if (p->steps == NULL) {
        for (size_t i = 0; i < n; i++)
            kiwi_install_step_clear (&all[i]);
        free (all);
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (kiwi_ecosystem_runs_in (all[i].eco, runtime)) {
            p->steps[p->n++] = all[i]; /* now owned by the plan */
            continue;
        }
        if (rc == 0
            && kiwi_strv_addf (&p->left_out, "%s (%s): the image runs %s", kiwi_ecosystem_str (all[i].eco),
                               all[i].dir[0] ? all[i].dir : ".", runtime)
                   < 0)
            rc = kiwi_error_make (err, ENOMEM, "install plan");
        kiwi_install_step_clear (&all[i]);
    }
    free (all);
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
    return plan_prelude (p, err);
}

/* ------------------------------------------- install input, dependencies */

/* Per runtime family, in one place: the files an install reads (its input:
 * Phase A receives exactly these, the key hashes exactly these) and where
 * the install leaves what it installed (the snapshot keeps only those).
 *
 * Input patterns: a base name (glob) matches a file of that name at any
 * depth (HASH_MAX_DEPTH, outside the skipped directories); one ending in
 * "/" names a directory (by its relative path, or a path ending in it)
 * whose files are all input. Dependency locations: a name without "/" is a
 * file or directory of that name at any depth under /kiwi/src
 * (node_modules in every workspace member); with "/" a path relative to a
 * project directory at any depth; `home` entries are relative to
 * /kiwi/home. */
typedef struct {
    const char *runtime;
    const char *const *input;
    const char *const *src;
    const char *const *home;
} eco_table;

static const char *const node_input[] = { "package.json",  "package-lock.json", "npm-shrinkwrap.json",
                                          "pnpm-lock.yaml", "pnpm-workspace.yaml", ".pnpmfile.cjs",
                                          "yarn.lock",     ".yarnrc",           ".yarnrc.yml",
                                          ".npmrc",        "patches/",          ".yarn/releases/",
                                          ".yarn/plugins/", ".yarn/patches/",   NULL };
static const char *const node_src[] = { "node_modules", ".yarn/cache", ".yarn/unplugged", ".yarn/install-state.gz",
                                        ".pnp.cjs", ".pnp.loader.mjs", ".pnp.js", ".pnp.data.json", NULL };
static const char *const node_home[] = { ".cache", ".npm", ".yarn", ".local/share/pnpm", NULL };
static const char *const go_input[] = { "go.mod", "go.sum", "go.work", "go.work.sum", NULL };
static const char *const go_home[] = { "go", ".cache/go-build", NULL };
static const char *const python_input[] = { "pyproject.toml", "uv.lock",     "poetry.lock",       "Pipfile",
                                            "Pipfile.lock",   "setup.py",    "setup.cfg",         "requirements*.txt",
                                            "*requirements.txt", "constraints*.txt", "requirements/", "poetry.toml",
                                            "uv.toml",        "pip.conf",    ".python-version",   "README*",
                                            "LICENSE*",       NULL };
static const char *const python_src[] = { ".venv", NULL };
static const char *const python_home[] = { ".cache", ".local", NULL };
static const char *const rust_input[] = { "Cargo.toml", "Cargo.lock", "rust-toolchain", "rust-toolchain.toml",
                                          ".cargo/",    NULL };
static const char *const rust_home[] = { ".cargo", NULL };
static const char *const ruby_input[] = { "Gemfile", "Gemfile.lock", "*.gemspec", ".ruby-version", "version.rb",
                                          ".bundle/", NULL };
static const char *const ruby_src[] = { "vendor/bundle", ".bundle", NULL };
static const char *const ruby_home[] = { ".gem", ".bundle", NULL };
static const char *const php_input[] = { "composer.json", "composer.lock", NULL };
static const char *const php_src[] = { "vendor", NULL };
static const char *const php_home[] = { ".composer", ".cache", NULL };
static const char *const maven_input[] = { "pom.xml", "mvnw", ".mvn/", NULL };
static const char *const maven_home[] = { ".m2", NULL };
static const char *const gradle_input[] = { "build.gradle", "build.gradle.kts", "settings.gradle",
                                            "settings.gradle.kts", "gradle.properties", "libs.versions.toml",
                                            "gradlew",      "gradle/",          "buildSrc/", NULL };
static const char *const gradle_home[] = { ".gradle", ".m2", NULL };
static const char *const none[] = { NULL };

static const eco_table eco_tables[] = {
    { "node", node_input, node_src, node_home },       { "go", go_input, none, go_home },
    { "python", python_input, python_src, python_home }, { "rust", rust_input, none, rust_home },
    { "ruby", ruby_input, ruby_src, ruby_home },       { "php", php_input, php_src, php_home },
    { "maven", maven_input, none, maven_home },        { "gradle", gradle_input, none, gradle_home },
};

/* Kiwi's own shims (SHIM_DIR) are kept whatever the ecosystem. */
static const char *const kiwi_home[] = { ".kiwi", NULL };

static const eco_table *
eco_table_of (kiwi_ecosystem e)
{
    const char *rt = kiwi_ecosystem_runtime (e);
    for (size_t i = 0; i < sizeof eco_tables / sizeof eco_tables[0]; i++)
        if (strcmp (eco_tables[i].runtime, rt) == 0)
            return &eco_tables[i];
    return NULL;
}

#define HASH_MAX_DEPTH 4
#define HASH_MAX_FILES 4096

typedef struct {
    const char *const *sets[16];
    size_t nsets;
    kiwi_strv *out;
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
    } else if (kiwi__has_dir (root, out))
        walk (w, root, out, HASH_MAX_DEPTH, true);
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

/* The `file:` references of the npm manifests and lockfiles found so far. */
static void
add_node_file_references (walk_ctx *w, const char *root, size_t from)
{
    size_t end = w->out->n;
    for (size_t i = from; i < end && !w->failed; i++) {
        const char *rel = w->out->v[i];
        const char *nm = strrchr (rel, '/');
        nm = nm ? nm + 1 : rel;
        if (strcmp (nm, "package.json") != 0 && strcmp (nm, "package-lock.json") != 0
            && strcmp (nm, "npm-shrinkwrap.json") != 0)
            continue;
        size_t len = 0;
        cleanup_free char *text = kiwi__read_rel (root, rel, &len);
        json_t *j = text ? json_loadb (text, len, 0, NULL) : NULL;
        if (j == NULL)
            continue;
        cleanup_free char *manifest = strdup (rel); /* the list may move as it grows */
        if (manifest == NULL)
            w->failed = true;
        else
            scan_file_references (w, root, manifest, j, 0);
        json_decref (j);
    }
}

int
kiwi_install_hashed_files (const char *root, const kiwi_install_plan *plan, kiwi_strv *files, kiwi_error_t *err)
{
    walk_ctx w = { .out = files };
    for (size_t i = 0; i < plan->n && w.nsets < 16; i++) {
        const eco_table *t = eco_table_of (plan->steps[i].eco);
        bool dup = t == NULL;
        for (size_t s = 0; s < w.nsets && !dup; s++)
            dup = w.sets[s] == t->input;
        if (!dup)
            w.sets[w.nsets++] = t->input;
    }
    if (w.nsets == 0)
        return 0;
    size_t before = files->n;
    walk (&w, root, "", 0, false);
    for (size_t s = 0; s < w.nsets; s++)
        if (w.sets[s] == node_input)
            add_node_file_references (&w, root, before);
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
    size_t n = plan ? plan->n : sizeof eco_tables / sizeof eco_tables[0];
    if (add_locations (home, kiwi_home) < 0)
        return kiwi_error_make (err, ENOMEM, "dependency locations");
    for (size_t i = 0; i < n; i++) {
        const eco_table *t = plan ? eco_table_of (plan->steps[i].eco) : &eco_tables[i];
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

int
kiwi_install_cache_key (const char *root, const kiwi_install_plan *plan, const kiwi_install_key_input *k,
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
        if (kiwi_install_hashed_files (root, plan, &own, err) < 0)
            return -1;
        input = &own;
    }
    for (size_t i = 0; i < input->n; i++) {
        hash_field (&h, "file=", input->v[i]);
        cleanup_free char *abs = kiwi__path_join (root, input->v[i]);
        uint64_t size = 0;
        if (abs == NULL)
            return kiwi_error_make (err, ENOMEM, "install cache key");
        kiwi_sha256 fh;
        kiwi_sha256_init (&fh);
        if (kiwi__sha256_file (&fh, abs, &size, err) < 0)
            return kiwi_error_wrap (err, "install cache key");
        unsigned char fd[32];
        kiwi_sha256_final (&fh, fd);
        char line[96];
        int ll = snprintf (line, sizeof line, "%llu\n", (unsigned long long) size);
        kiwi_sha256_update (&h, line, (size_t) ll);
        kiwi_sha256_update (&h, fd, sizeof fd);
        kiwi_sha256_update (&h, "\n", 1);
    }
    unsigned char d[32];
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, out);
    return 0;
}
