/*
 * test_inspect.c: repository inspection without a sandbox: version ranges,
 * the image catalogue, the test command's executable, devcontainers (JSON
 * with comments), version markers, image resolution in the spec's order,
 * install commands by lockfile (and packageManager), polyglot plans, the
 * install cache key, and the decisions step 0 takes on a classified
 * failure. Repositories are small trees written into a scratch directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "inspect/classify.h"
#include "inspect/image/image.h"
#include "inspect/inspect-internal.h"
#include "inspect/inspect.h"
#include "inspect/lockfile/lockfile.h"
#include "inspect/services.h"
#include "sandbox/step0.h"

#define LOCAL_CATALOG KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv"

static kiwi_image_catalog *local;

static int
setup (void **state)
{
    kiwi_error_t err = NULL;
    if (kiwi_image_catalog_load (LOCAL_CATALOG, &local, &err) < 0) {
        fprintf (stderr, "%s\n", kiwi_error_msg (err));
        return -1;
    }
    return 0;
}

static int
teardown (void **state)
{
    kiwi_image_catalog_free (local);
    return 0;
}

/* ----------------------------------------------------------- scratch repos */

static char *
repo_new (void)
{
    char tmpl[] = "/tmp/kiwi-inspect-XXXXXX";
    char *d = mkdtemp (tmpl);
    assert_non_null (d);
    return strdup (d);
}

static void
put (const char *root, const char *rel, const char *content)
{
    char path[4096];
    snprintf (path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen (root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (path, 0755) < 0 && errno != EEXIST)
                fail_msg ("mkdir %s", path);
            *p = '/';
        }
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (content, f);
    fclose (f);
}

static void
unlink_in (const char *root, const char *rel)
{
    char path[4096];
    snprintf (path, sizeof path, "%s/%s", root, rel);
    assert_int_equal (unlink (path), 0);
}

static void
repo_free (char *root)
{
    char cmd[4200];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal (system (cmd), 0);
    free (root);
}

/* ---------------------------------------------------------------- versions */

static void
test_version_ranges (void **state)
{
    static const struct {
        const char *req, *family;
        int want;
    } cases[] = {
        { ">=18", "20", 1 },           { "^20", "20", 1 },           { "^20", "22", 0 },
        { "20.x", "20", 1 },           { "20.*", "22", 0 },          { ">=18 <21", "20", 1 },
        { ">=18 <21", "22", 0 },       { "18 || 20", "20", 1 },      { "18 || 20", "22", 0 },
        { "~20.1", "20", 1 },          { "1.2 - 1.4", "1.3", 1 },    { "1.2 - 1.4", "1.5", 0 },
        { ">=3.9,<3.13", "3.11", 1 },  { ">=3.9,<3.13", "3.13", 0 }, { "~=3.10", "3.11", 1 },
        { "==3.11.*", "3.11", 1 },     { "==3.11.*", "3.12", 0 },    { "~> 3.1", "3.3", 1 },
        { "~> 3.1.2", "3.3", 0 },      { "~> 3.1.2", "3.1", 1 },     { "^8.1", "8.2", 1 },
        { "8.2.*", "8.2", 1 },         { "^7.4 | ^8.0", "8.2", 1 },  { "^7.4 || ^8.0", "9", 0 },
        { ">=1.21", "1.19", 0 },       { ">=1.21", "1.22", 1 },      { "v20.11.0", "20", 1 },
        { "22", "20", 0 },             { ">=0", "22", 1 },           { ">3.8", "3.8", 0 },
        { ">3.8", "3.9", 1 },          { "<=20", "20", 1 },          { "<20", "20", 0 },
        { ">= 18", "18", 1 },          { "!=3.10, >=3.8", "3.11", 1 }, { "*", "1.63", 1 },
        { "^0.2.3", "0.2", 1 },        { "^0.2.3", "0.3", 0 },       { ">=3.12", "3.11", 0 },
        { "^1.0@dev", "1", 1 },        { "3.11.4rc1", "3.11", 1 },   { "1.8", "1.8", 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = kiwi_version_req_allows (cases[i].req, cases[i].family);
        if (got != cases[i].want)
            fail_msg ("allows(\"%s\", \"%s\") = %d, want %d", cases[i].req, cases[i].family, got, cases[i].want);
    }
    assert_int_equal (kiwi_version_req_allows ("abc", "20"), -1);
    assert_int_equal (kiwi_version_req_allows (">=", "20"), -1);
    assert_false (kiwi_version_req_valid ("lts/iron"));
    assert_true (kiwi_version_req_valid (">=18 <21"));
}

/* --------------------------------------------------------------- catalogue */

static void
expect_catalog_error (const char *text, const char *needle)
{
    kiwi_image_catalog *c = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_catalog_parse (text, strlen (text), "c.tsv", &c, &err), -1);
    assert_null (c);
    if (strstr (kiwi_error_msg (err), needle) == NULL)
        fail_msg ("`%s` lacks `%s`", kiwi_error_msg (err), needle);
    kiwi_error_free (&err);
}

static const char *
choose (const kiwi_image_catalog *c, const char *rt, const char *req, kiwi_version_prefer p, bool *sat)
{
    const kiwi_image_entry *e = kiwi_image_catalog_choose (c, rt, req, p, sat);
    return e ? e->ref : "(none)";
}

static void
test_catalogue (void **state)
{
    expect_catalog_error ("# nothing\n", "no rows");
    expect_catalog_error ("node\t20\n", "c.tsv:1: expected runtime, version and image");
    expect_catalog_error ("# h\nNode\t20\tnode:20\n", "c.tsv:2: bad runtime name `Node`");
    expect_catalog_error ("node\ttwenty\tnode:20\n", "bad version `twenty`");
    expect_catalog_error ("node\t20\tnode 20\n", "bad image reference");
    expect_catalog_error ("node\t20\tnode:20\textra\n", "expected runtime, version and image");

    kiwi_image_catalog *def = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_catalog_default (&def, &err), 0);
    assert_true (kiwi_image_catalog_size (def) > 10);
    bool sat;
    assert_string_equal (choose (def, "node", "20", KIWI_PREFER_HIGHEST, &sat), "node:20-bookworm");
    assert_string_equal (choose (def, "python", "", KIWI_PREFER_HIGHEST, &sat), "python:3.12-bookworm");
    kiwi_image_catalog_free (def);
    assert_int_equal (kiwi_image_catalog_open (NULL, &def, &err), 0);
    assert_non_null (strstr (kiwi_image_catalog_origin (def), "built in"));
    kiwi_image_catalog_free (def);

    assert_string_equal (choose (local, "node", NULL, KIWI_PREFER_HIGHEST, &sat), "kiwi/node:22");
    assert_true (sat);
    assert_string_equal (choose (local, "node", "20", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:20");
    assert_string_equal (choose (local, "node", ">=18 <21", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:20");
    assert_string_equal (choose (local, "node", ">=18", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:22");
    assert_string_equal (choose (local, "node", "24", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:22");
    assert_false (sat);
    assert_string_equal (choose (local, "node", "19", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:20");
    assert_false (sat);
    assert_string_equal (choose (local, "node", "16", KIWI_PREFER_HIGHEST, &sat), "kiwi/node:18");
    assert_false (sat);
    assert_string_equal (choose (local, "go", ">=1.21", KIWI_PREFER_HIGHEST, &sat), "kiwi/go:1.27");
    assert_true (sat);
    assert_string_equal (choose (local, "go", ">=1.19", KIWI_PREFER_HIGHEST, &sat), "kiwi/go:1.27");
    assert_string_equal (choose (local, "go", "1.19", KIWI_PREFER_HIGHEST, &sat), "kiwi/go:1.19");
    assert_true (sat);
    assert_string_equal (choose (local, "go", ">=1.99", KIWI_PREFER_HIGHEST, &sat), "kiwi/go:1.27");
    assert_false (sat);
    assert_string_equal (choose (local, "java", ">=11", KIWI_PREFER_LOWEST, &sat), "kiwi/java:17");
    assert_true (sat);
    assert_string_equal (choose (local, "java", ">=21", KIWI_PREFER_LOWEST, &sat), "kiwi/java:21");
    assert_true (sat);
    assert_string_equal (choose (local, "python", "3.13", KIWI_PREFER_HIGHEST, &sat), "kiwi/python:3.13");
    assert_true (sat);
    assert_string_equal (choose (local, "python", NULL, KIWI_PREFER_HIGHEST, &sat), "kiwi/python:3.11");
    assert_string_equal (choose (local, "rust", NULL, KIWI_PREFER_HIGHEST, &sat), "kiwi/rust:1.96");
    assert_string_equal (choose (local, "rust", ">=1.70", KIWI_PREFER_HIGHEST, &sat), "kiwi/rust:1.96");
    assert_true (sat);
    assert_string_equal (choose (local, "deno", NULL, KIWI_PREFER_HIGHEST, &sat), "(none)");
    assert_string_equal (kiwi_image_catalog_by_ref (local, "kiwi/java:17")->runtime, "java");
    assert_null (kiwi_image_catalog_by_ref (local, "node:20"));
    assert_true (kiwi_image_catalog_has_runtime (local, "gradle"));
}

/* ---------------------------------------------------------- test command */

static void
expect_cmd (const char *cmd, const char *runtime, const char *exe, const char *dir, const char *version)
{
    kiwi_command_info ci;
    bool found = kiwi_command_runtime (cmd, &ci);
    if (runtime == NULL) {
        if (found)
            fail_msg ("`%s`: found %s (%s), want none", cmd, ci.runtime, ci.exe);
        return;
    }
    if (!found || strcmp (ci.runtime, runtime) != 0 || strcmp (ci.exe, exe) != 0 || strcmp (ci.dir, dir) != 0
        || strcmp (ci.version, version) != 0)
        fail_msg ("`%s`: got %s/%s dir `%s` version `%s`, want %s/%s `%s` `%s`", cmd, ci.runtime, ci.exe, ci.dir,
                  ci.version, runtime, exe, dir, version);
}

static void
test_command_executable (void **state)
{
    expect_cmd ("npm test", "node", "npm", "", "");
    expect_cmd ("FOO=1 BAR='a b' npx jest --ci", "node", "npx", "", "");
    expect_cmd ("pnpm exec vitest run", "node", "pnpm", "", "");
    expect_cmd ("yarn test", "node", "yarn", "", "");
    expect_cmd ("./gradlew test --no-daemon", "gradle", "gradlew", "", "");
    expect_cmd ("./mvnw -B verify", "maven", "mvnw", "", "");
    expect_cmd ("bash -c 'cd web && npm test'", "node", "npm", "web", "");
    expect_cmd ("sh -ec \"go test ./...\"", "go", "go", "", "");
    expect_cmd ("bash -euo pipefail -c 'cargo test'", "rust", "cargo", "", "");
    expect_cmd ("env -u CI NODE_ENV=test node --test", "node", "node", "", "");
    expect_cmd ("timeout -s KILL 300 pytest -q", "python", "pytest", "", "");
    expect_cmd ("timeout --preserve-status 5m python -m pytest", "python", "python", "", "");
    expect_cmd ("cd backend && go test ./... && cd ../web && npm test", "go", "go", "backend", "");
    expect_cmd ("(cd web; npm test)", "node", "npm", "web", "");
    expect_cmd ("cd web/ && CI=1 npm test", "node", "npm", "web", "");
    expect_cmd ("python3.12 -m pytest", "python", "python3.12", "", "3.12");
    expect_cmd ("./node_modules/.bin/jest", "node", "jest", "", "");
    expect_cmd ("vendor/bin/phpunit", "php", "phpunit", "", "");
    expect_cmd ("bundle exec rspec", "ruby", "bundle", "", "");
    expect_cmd ("poetry run pytest", "python", "poetry", "", "");
    expect_cmd ("nice -n 10 cargo test", "rust", "cargo", "", "");
    expect_cmd ("time mvn -B test", "maven", "mvn", "", "");
    expect_cmd ("xvfb-run -a npm test", "node", "npm", "", "");
    expect_cmd ("set -e; echo start; php artisan test", "php", "php", "", "");
    /* a server sent to the background is not the test (guzzle's CI) */
    expect_cmd ("node tests/server.js & ./vendor/bin/http_test_server & ./vendor/bin/phpunit", "php", "phpunit", "", "");
    expect_cmd ("python -m http.server 8000 &\nsleep 1; npm test", "node", "npm", "", "");
    expect_cmd ("npm test 2>&1 | tee log", "node", "npm", "", "");
    expect_cmd ("pytest &> log", "python", "pytest", "", "");
    expect_cmd ("redis-server & node tests/server.js & ./run-tests.sh", "node", "node", "", "");
    assert_true (kiwi_command_runs ("node tests/server.js & ./vendor/bin/phpunit", "node"));
    /* `sh SCRIPT` runs SCRIPT (it names no runtime: bash scripts/test.sh
     * below); an executable's words are its arguments, another's are not */
    assert_true (kiwi_command_runs ("sh ./mvnw -B test", "mvnw"));
    assert_true (kiwi_command_runs ("bash -e scripts/test.sh", "test.sh"));
    assert_false (kiwi_command_runs ("sh -c 'echo ./mvnw'", "mvnw"));
    static const char *const mvn[] = { "mvn", "mvnw", NULL }, *const verify[] = { "verify", NULL };
    assert_true (kiwi_command_runs_with ("env CI=1 bash -c './mvnw -B verify'", mvn, verify));
    assert_true (kiwi_command_runs_with ("time sh mvnw verify", mvn, verify));
    assert_false (kiwi_command_runs_with ("mvn test && echo verify", mvn, verify));
    assert_false (kiwi_command_runs_with ("mvn '-Dgoal=verify' test", mvn, verify));
    assert_true (kiwi_command_runs_with ("mvn test", mvn, NULL));
    assert_false (kiwi_command_runs_with ("mvn verify", NULL, verify));
    expect_cmd ("make test", NULL, NULL, NULL, NULL);
    expect_cmd ("docker compose run app npm test", NULL, NULL, NULL, NULL);
    expect_cmd ("echo hi | tee log; ./scripts/test.sh", NULL, NULL, NULL, NULL);
    expect_cmd ("bash scripts/test.sh", NULL, NULL, NULL, NULL);
    expect_cmd ("cd /opt/app && npm test", "node", "npm", "", "");
    expect_cmd ("cd ../other && npm test", "node", "npm", "", "");
    expect_cmd ("", NULL, NULL, NULL, NULL);
    expect_cmd (NULL, NULL, NULL, NULL, NULL);
    assert_string_equal (kiwi_runtime_of_executable ("/usr/bin/python3"), "python");
    assert_string_equal (kiwi_runtime_of_executable ("pip3.11"), "python");
    assert_null (kiwi_runtime_of_executable ("python3x"));
    assert_null (kiwi_runtime_of_executable ("deno"));
}

/* ---------------------------------------------------------- devcontainers */

static void
test_jsonc (void **state)
{
    const char *in = "// a comment\n{\n  /* block\n comment */ \"image\": \"a//b/*c*/\", // trailing\n"
                     "  \"x\": \"quote \\\" // not a comment\",\n  \"list\": [1, 2, /* c */ ],\n}\n";
    char *out = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_jsonc_to_json (in, strlen (in), &out, &len, &err), 0);
    assert_non_null (strstr (out, "\"a//b/*c*/\""));
    assert_non_null (strstr (out, "\"quote \\\" // not a comment\""));
    assert_null (strstr (out, "trailing"));
    assert_null (strstr (out, "block"));
    assert_null (strstr (out, ", ]"));
    free (out);
}

static void
test_devcontainer (void **state)
{
    char *r = repo_new ();
    char *image = NULL, *path = NULL, *note = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_devcontainer_image (r, &image, &path, &note, &err), 0);
    put (r, ".devcontainer.json", "{ \"image\": \"fallback:1\" }");
    assert_int_equal (kiwi_devcontainer_image (r, &image, &path, &note, &err), 1);
    assert_string_equal (image, "fallback:1");
    assert_string_equal (path, ".devcontainer.json");
    free (image);
    free (path);
    put (r, ".devcontainer/devcontainer.json",
         "{\n  // the team's image\n  \"name\": \"x\",\n  \"image\": \"mcr.microsoft.com/devcontainers/python:3.11\",\n"
         "  \"features\": {},\n}\n");
    assert_int_equal (kiwi_devcontainer_image (r, &image, &path, &note, &err), 1);
    assert_string_equal (image, "mcr.microsoft.com/devcontainers/python:3.11");
    assert_string_equal (path, ".devcontainer/devcontainer.json");
    free (image);
    free (path);
    put (r, ".devcontainer/devcontainer.json", "{ \"build\": { \"dockerfile\": \"Dockerfile\" } }");
    assert_int_equal (kiwi_devcontainer_image (r, &image, &path, &note, &err), 0);
    assert_non_null (strstr (note, "Dockerfile"));
    free (note);
    put (r, ".devcontainer/devcontainer.json", "{ \"image\": ");
    assert_int_equal (kiwi_devcontainer_image (r, &image, &path, &note, &err), 0);
    assert_non_null (strstr (note, "does not parse"));
    free (note);
    repo_free (r);
    assert_string_equal (kiwi_runtime_of_image_ref ("mcr.microsoft.com/devcontainers/typescript-node:1-20-bookworm"),
                         "node");
    assert_string_equal (kiwi_runtime_of_image_ref ("golang:1.22@sha256:abc"), "go");
    assert_string_equal (kiwi_runtime_of_image_ref ("eclipse-temurin:21"), "java");
    assert_null (kiwi_runtime_of_image_ref ("mcr.microsoft.com/devcontainers/universal:2"));
    assert_null (kiwi_runtime_of_image_ref ("debian:bookworm"));
}

/* ---------------------------------------------------------- version markers */

static void
expect_marker (const char *root, const char *dir, const char *rt, const char *req, const char *from)
{
    char *r = NULL, *f = NULL;
    kiwi_version_prefer p;
    kiwi_error_t err = NULL;
    int rc = kiwi_version_markers (root, dir, rt, &r, &f, &p, &err);
    if (req == NULL) {
        if (rc != 0)
            fail_msg ("%s: found %s in %s, want none", rt, r, f);
        return;
    }
    if (rc != 1 || strcmp (r, req) != 0 || strcmp (f, from) != 0)
        fail_msg ("%s: got %s from %s, want %s from %s", rt, r ? r : "-", f ? f : "-", req, from);
    free (r);
    free (f);
}

static void
test_version_markers (void **state)
{
    char *r = repo_new ();
    expect_marker (r, "", "node", NULL, NULL);
    put (r, "package.json", "{ \"engines\": { \"node\": \">=18 <21\" } }");
    expect_marker (r, "", "node", ">=18 <21", "package.json (engines.node)");
    put (r, "package.json", "{ \"volta\": { \"node\": \"20.11.1\" }, \"engines\": { \"node\": \">=18\" } }");
    expect_marker (r, "", "node", "20.11.1", "package.json (volta.node)");
    put (r, ".tool-versions", "python 3.11.4\nnodejs 18.19.0\n");
    expect_marker (r, "", "node", "18.19.0", ".tool-versions");
    put (r, ".nvmrc", "lts/iron\n");
    expect_marker (r, "", "node", "20", ".nvmrc");
    put (r, ".nvmrc", "\xef\xbb\xbfv22.3.0 # the team's\n");
    expect_marker (r, "", "node", "v22.3.0", ".nvmrc");
    put (r, "web/.nvmrc", "20\n");
    expect_marker (r, "web", "node", "20", "web/.nvmrc");
    expect_marker (r, "", "python", "3.11.4", ".tool-versions");
    put (r, "pyproject.toml", "[project]\nname = \"x\"\nrequires-python = \">=3.9\"\n");
    unlink (strcat (strcpy ((char[4096]) { 0 }, r), "/.tool-versions"));
    expect_marker (r, "", "python", ">=3.9", "pyproject.toml (requires-python)");
    put (r, ".python-version", "3.11\n");
    expect_marker (r, "", "python", "3.11", ".python-version");
    put (r, "go.mod", "module x\n\ngo 1.21\n\ntoolchain go1.22.3\n");
    expect_marker (r, "", "go", ">=1.22.3", "go.mod (toolchain)");
    put (r, "go.mod", "module x\n\ngo 1.19\n");
    expect_marker (r, "", "go", ">=1.19", "go.mod (go)");
    put (r, "Cargo.toml", "[package]\nname = \"x\"\nedition = \"2021\"\nrust-version = \"1.70\"\n");
    expect_marker (r, "", "rust", ">=1.70", "Cargo.toml (rust-version)");
    put (r, "rust-toolchain.toml", "[toolchain]\nchannel = \"1.72.0\"\ncomponents = [\"clippy\"]\n");
    expect_marker (r, "", "rust", ">=1.72.0", "rust-toolchain.toml");
    put (r, "Gemfile", "source \"https://rubygems.org\"\nruby '~> 3.3'\ngem 'rake'\n");
    expect_marker (r, "", "ruby", "~> 3.3", "Gemfile (ruby)");
    put (r, ".ruby-version", "ruby-3.1.2\n");
    expect_marker (r, "", "ruby", "3.1.2", ".ruby-version");
    put (r, "composer.json", "{ \"require\": { \"php\": \"^8.1\", \"psr/log\": \"^3\" } }");
    expect_marker (r, "", "php", "^8.1", "composer.json (require.php)");
    put (r, "pom.xml", "<project><properties><maven.compiler.release>21</maven.compiler.release></properties></project>");
    expect_marker (r, "", "java", ">=21", "pom.xml");
    put (r, "pom.xml", "<project><properties><java.version>1.8</java.version>"
                       "<maven.compiler.source>${java.version}</maven.compiler.source></properties></project>");
    expect_marker (r, "", "java", ">=8", "pom.xml");
    put (r, "gradle/wrapper/gradle-wrapper.properties",
         "distributionUrl=https\\://services.gradle.org/distributions/gradle-8.5-bin.zip\n");
    expect_marker (r, "", "gradle", "8", "gradle/wrapper/gradle-wrapper.properties");
    repo_free (r);
    r = repo_new ();
    put (r, "build.gradle.kts", "java { toolchain { languageVersion.set(JavaLanguageVersion.of(17)) } }\n");
    expect_marker (r, "", "java", ">=17", "build.gradle.kts");
    repo_free (r);
}

/* mise's files read like .tool-versions (after it); mise.local.toml is
 * ignored. A gemspec's required_ruby_version after the Gemfile's ruby. */
static void
test_version_markers_mise_and_gemspec (void **state)
{
    char *r = repo_new ();
    put (r, "mise.local.toml", "[tools]\nnode = \"18\"\npython = \"3.10\"\n");
    expect_marker (r, "", "node", NULL, NULL);
    expect_marker (r, "", "python", NULL, NULL);
    put (r, ".mise.toml", "[tools]\nnode = \"20\"\n");
    expect_marker (r, "", "node", "20", ".mise.toml");
    put (r, "mise.toml", "[env]\nnode = \"1\"\n\n[tools]\nnode = \"22\" # LTS\npython = \"3.12\"\n"
                         "ruby = [\"3.3.0\", \"3.2\"]\nnpm = { version = \"10.2\" }\n");
    expect_marker (r, "", "node", "22", "mise.toml");
    expect_marker (r, "", "python", "3.12", "mise.toml");
    expect_marker (r, "", "ruby", "3.3.0", "mise.toml");
    put (r, "mise.toml", "[tools]\nnodejs = { version = \"21.1\", postinstall = \"x\" }\npython = \"latest\"\n");
    expect_marker (r, "", "node", "21.1", "mise.toml");
    expect_marker (r, "", "python", NULL, NULL);
    put (r, ".tool-versions", "nodejs 18.19.0\n");
    expect_marker (r, "", "node", "18.19.0", ".tool-versions");
    put (r, "api/mise.toml", "[tools]\npython = \"3.11\"\n");
    expect_marker (r, "api", "python", "3.11", "api/mise.toml");
    repo_free (r);

    /* each file put in turn, then what ruby's markers say */
    static const struct {
        const char *file, *text, *req, *from;
    } ruby[] = {
        { "zeta.gemspec", "Gem::Specification.new do |s|\n  s.required_ruby_version = '>= 2.5'\nend\n", ">= 2.5",
          "zeta.gemspec (required_ruby_version)" },
        { "kiwi.gemspec", "spec.name = 'kiwi'\n  spec.required_ruby_version = \">= 3.2\"\n", ">= 3.2",
          "kiwi.gemspec (required_ruby_version)" },
        { "kiwi.gemspec", "  spec.required_ruby_version = Gem::Requirement.new(\"~> 3.1\")\n", "~> 3.1",
          "kiwi.gemspec (required_ruby_version)" },
        { "Gemfile", "source 'https://rubygems.org'\ngemspec\n", "~> 3.1", "kiwi.gemspec (required_ruby_version)" },
        { "Gemfile", "source 'https://rubygems.org'\nruby \"3.3.0\"\ngemspec\n", "3.3.0", "Gemfile (ruby)" },
    };
    r = repo_new ();
    for (size_t i = 0; i < sizeof ruby / sizeof *ruby; i++) {
        put (r, ruby[i].file, ruby[i].text);
        expect_marker (r, "", "ruby", ruby[i].req, ruby[i].from);
    }
    repo_free (r);
    r = repo_new ();
    put (r, "x.gemspec", "spec.required_ruby_version == '>= 1'\nspec.name = 'x'\n");
    expect_marker (r, "", "ruby", NULL, NULL);
    repo_free (r);
}

/* -------------------------------------------------------------- resolution */

static void
expect_resolve (const char *root, const char *cmd, const kiwi_image_catalog *cat, const char *image,
                kiwi_image_source src)
{
    kiwi_image_resolution res;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_resolve (root, cmd, cat, &res, &err), 0);
    if (strcmp (res.image, image) != 0 || res.source != src)
        fail_msg ("`%s`: got %s (%s: %s), want %s (%s)", cmd ? cmd : "(none)", res.image,
                  kiwi_image_source_str (res.source), res.reason, image, kiwi_image_source_str (src));
    assert_non_null (res.reason);
    kiwi_image_resolution_clear (&res);
}

static void
test_resolution_order (void **state)
{
    char *r = repo_new ();
    /* nothing at all: the base image */
    expect_resolve (r, "make test", local, "kiwi/base:bookworm", KIWI_IMAGE_FROM_DEFAULT);
    /* a Go service with a frontend: only the command decides */
    put (r, "go.mod", "module example.com/svc\n\ngo 1.19\n\nrequire github.com/google/go-cmp v0.5.9\n");
    put (r, "web/package.json", "{ \"scripts\": { \"test\": \"node --test\" }, \"dependencies\": { \"x\": \"1\" } }");
    put (r, "web/package-lock.json", "{}");
    put (r, "web/.nvmrc", "20\n");
    expect_resolve (r, "go test ./...", local, "kiwi/go:1.27", KIWI_IMAGE_FROM_COMMAND);
    expect_resolve (r, "cd web && npm test", local, "kiwi/node:20", KIWI_IMAGE_FROM_COMMAND);
    expect_resolve (r, "make test", local, "kiwi/go:1.27", KIWI_IMAGE_FROM_MARKERS);
    /* a command runtime the catalogue lacks falls through to the markers */
    expect_resolve (r, "deno test", local, "kiwi/go:1.27", KIWI_IMAGE_FROM_MARKERS);
    /* the devcontainer comes first */
    put (r, ".devcontainer/devcontainer.json", "{ // JSONC\n \"image\": \"kiwi/python:3.11\", }\n");
    expect_resolve (r, "go test ./...", local, "kiwi/python:3.11", KIWI_IMAGE_FROM_DEVCONTAINER);
    kiwi_image_resolution res;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_resolve (r, "go test ./...", local, &res, &err), 0);
    assert_string_equal (res.runtime, "python");
    kiwi_image_resolution_clear (&res);
    repo_free (r);

    /* markers: Python before Node.js, versions honoured */
    r = repo_new ();
    put (r, "package.json", "{ \"devDependencies\": { \"prettier\": \"3\" } }");
    put (r, "requirements.txt", "pytest\n");
    expect_resolve (r, "make test", local, "kiwi/python:3.11", KIWI_IMAGE_FROM_MARKERS);
    expect_resolve (r, "npx prettier --check .", local, "kiwi/node:22", KIWI_IMAGE_FROM_COMMAND);
    put (r, ".nvmrc", "18\n");
    expect_resolve (r, "npm test", local, "kiwi/node:18", KIWI_IMAGE_FROM_COMMAND);
    repo_free (r);

    /* markers one directory down */
    r = repo_new ();
    put (r, "service/Cargo.toml", "[package]\nname = \"s\"\nversion = \"0.1.0\"\n");
    expect_resolve (r, "./ci.sh", local, "kiwi/rust:1.96", KIWI_IMAGE_FROM_MARKERS);
    assert_int_equal (kiwi_image_resolve (r, "./ci.sh", local, &res, &err), 0);
    assert_string_equal (res.project_dir, "service");
    kiwi_image_resolution_clear (&res);
    /* a version no image has: the nearest, marked unsatisfied */
    put (r, "go.mod", "module x\n\ngo 1.99\n");
    assert_int_equal (kiwi_image_resolve (r, "go test ./...", local, &res, &err), 0);
    assert_string_equal (res.image, "kiwi/go:1.27");
    assert_false (res.satisfied);
    assert_non_null (strstr (res.reason, "no image in the catalogue has"));
    kiwi_image_resolution_clear (&res);
    repo_free (r);

    /* the default catalogue for the same command names public images */
    kiwi_image_catalog *def = NULL;
    assert_int_equal (kiwi_image_catalog_default (&def, &err), 0);
    r = repo_new ();
    put (r, "go.mod", "module x\n\ngo 1.22\n");
    expect_resolve (r, "go test ./...", def, "golang:1.27-bookworm", KIWI_IMAGE_FROM_COMMAND);
    repo_free (r);
    kiwi_image_catalog_free (def);
}

/* ----------------------------------------------------------- install plans */

static void
expect_plan (const char *root, const char *runtime, const char *display, const char *argv0)
{
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (root, runtime, &p, &err), 0);
    if (strcmp (p.display, display) != 0)
        fail_msg ("plan for %s: got `%s`, want `%s`", runtime, p.display, display);
    if (argv0 == NULL)
        assert_int_equal (p.argv.n, 0);
    else
        assert_string_equal (p.argv.v[0], argv0);
    kiwi_install_plan_clear (&p);
}

static void
test_node_lockfiles (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"name\": \"x\", \"scripts\": { \"test\": \"node --test\" } }");
    expect_plan (r, "node", "-", NULL); /* no dependencies: Phase A skipped */
    put (r, "package.json", "{ \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    /* a shell: each Node.js install starts by deleting lifecycle scripts */
    expect_plan (r, "node", "npm install", "/bin/sh");
    put (r, "package-lock.json", "{}");
    expect_plan (r, "node", "npm ci", "/bin/sh");
    put (r, "yarn.lock", "# yarn lockfile v1\n\n");
    expect_plan (r, "node", "yarn install --frozen-lockfile", "/bin/sh");
    put (r, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    expect_plan (r, "node", "pnpm install --frozen-lockfile", "/bin/sh");
    /* packageManager decides between lockfiles */
    put (r, "package.json", "{ \"packageManager\": \"yarn@1.22.22\", \"dependencies\": { \"a\": \"1\" } }");
    expect_plan (r, "node", "yarn install --frozen-lockfile", "/bin/sh");
    put (r, "package.json", "{ \"packageManager\": \"npm@10.8.2\", \"dependencies\": { \"a\": \"1\" } }");
    expect_plan (r, "node", "npm ci", "/bin/sh");
    kiwi_install_step *st = NULL;
    size_t n = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_detect (r, &st, &n, &err), 0);
    assert_int_equal (n, 1);
    assert_string_equal (st[0].why, "packageManager npm@10.8.2 (pnpm-lock.yaml ignored)");
    kiwi_install_step_clear (&st[0]);
    free (st);
    repo_free (r);

    /* Yarn 2+: from the lockfile's __metadata, through corepack */
    r = repo_new ();
    put (r, "package.json", "{ \"packageManager\": \"yarn@4.5.3+sha512.abc\", \"dependencies\": { \"a\": \"1\" } }");
    put (r, "yarn.lock", "# This file is generated\n__metadata:\n  version: 8\n");
    kiwi_install_plan p;
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "yarn install --immutable (corepack)");
    assert_string_equal (p.argv.v[0], "/bin/sh");
    assert_non_null (strstr (p.argv.v[2], "exec corepack yarn \"$@\""));
    assert_non_null (strstr (p.argv.v[2], "/yarn\nyarn install --immutable"));
    assert_non_null (strstr (p.argv.v[2], "unset YARN_CAFILE"));
    assert_non_null (strstr (kiwi_strv_env_get (&p.verify_env, "PATH"), "/kiwi/home/.kiwi/bin:"));
    assert_non_null (kiwi_strv_env_get (&p.verify_env, "COREPACK_ENABLE_NETWORK"));
    kiwi_install_plan_clear (&p);
    put (r, "package.json", "{ \"dependencies\": { \"a\": \"1\" } }");
    put (r, ".yarnrc.yml", "nodeLinker: node-modules\nyarnPath: .yarn/releases/yarn-4.5.3.cjs\n");
    expect_plan (r, "node", "yarn install --immutable (yarnPath)", "/bin/sh");
    repo_free (r);
}

static void
test_other_ecosystems (void **state)
{
    char *r = repo_new ();
    put (r, "go.mod", "module x\n\ngo 1.19\n");
    expect_plan (r, "go", "-", NULL);
    put (r, "go.mod", "module x\n\ngo 1.19\n\nrequire (\n\tgithub.com/google/go-cmp v0.5.9\n)\n");
    put (r, "go.sum", "github.com/google/go-cmp v0.5.9 h1:x\n");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "go", &p, &err), 0);
    assert_string_equal (p.display, "go mod download");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "GOPROXY"), "GOPROXY=off");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "GOFLAGS"), "GOFLAGS=-mod=mod");
    assert_string_equal (kiwi_strv_env_get (&p.install_env, "GOPATH"), "GOPATH=/kiwi/home/go");
    assert_null (kiwi_strv_env_get (&p.install_env, "GOPROXY"));
    /* Phase B starts the build cache as links to the image's compiled
     * standard library, first, and never fails on it */
    assert_non_null (p.verify_prelude);
    assert_true (strncmp (p.verify_prelude, "s=/usr/local/go-cache ", 22) == 0);
    assert_non_null (strstr (p.verify_prelude, "cp -rs \"$s/.\" \"$c/\""));
    assert_non_null (strstr (p.verify_prelude, "date +%s >\"$c/trim.txt\""));
    assert_non_null (strstr (p.verify_prelude, "[ \"${c#/}\" != \"$c\" ]")); /* never GOCACHE=off in the tree */
    assert_true (strstr (p.verify_prelude, "; true\n") != NULL);
    kiwi_install_plan_clear (&p);
    /* ... with no step too (a module with no dependencies) */
    put (r, "go.mod", "module x\n\ngo 1.19\n");
    put (r, "go.sum", "");
    assert_int_equal (kiwi_install_plan_make (r, "go", &p, &err), 0);
    assert_int_equal (p.n, 0);
    assert_non_null (p.verify_prelude);
    assert_true (strncmp (p.verify_prelude, "s=/usr/local/go-cache ", 22) == 0);
    kiwi_install_plan_clear (&p);
    put (r, "go.mod", "module x\n\ngo 1.19\n\nrequire (\n\tgithub.com/google/go-cmp v0.5.9\n)\n");
    put (r, "go.sum", "github.com/google/go-cmp v0.5.9 h1:x\n");
    /* a go.work above the module (here: a module in a subfolder of the
     * workspace) is workspace mode, where Go refuses -mod=mod */
    put (r, "go.work", "go 1.19\n\nuse ./svc\n");
    put (r, "svc/go.mod", "module y\n\ngo 1.19\n\nrequire github.com/google/go-cmp v0.5.9\n");
    assert_int_equal (kiwi_install_plan_make (r, "go", &p, &err), 0);
    assert_int_equal (p.n, 2); /* the root's module and svc's */
    for (size_t i = 0; i < p.n; i++)
        assert_true (p.steps[i].workspace);
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "GOFLAGS"), "GOFLAGS=-mod=readonly");
    assert_string_equal (kiwi_strv_env_get (&p.install_env, "GOFLAGS"), "GOFLAGS=-mod=readonly");
    kiwi_install_plan_clear (&p);
    repo_free (r);

    r = repo_new ();
    put (r, "pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-q\"\n");
    expect_plan (r, "python", "-", NULL); /* tool settings only */
    put (r, "pyproject.toml",
         "[project]\nname = \"x\"\ndependencies = [\n  # none yet\n]\n\n[project.optional-dependencies]\n"
         "test = [\"pytest\"]\ndocs = [\"sphinx\"]\n");
    expect_plan (r, "python", "pip install -e .[test] (.venv)", "/bin/sh");
    put (r, "requirements.txt", "# pinned\nrequests==2.32.3\n");
    put (r, "requirements-dev.txt", "pytest==8.3.3\n");
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    assert_string_equal (p.display, "pip install -r requirements.txt -r requirements-dev.txt (.venv)");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "PIP_NO_INDEX"), "PIP_NO_INDEX=1");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "VIRTUAL_ENV"), "VIRTUAL_ENV=/kiwi/src/.venv");
    assert_non_null (strstr (kiwi_strv_env_get (&p.verify_env, "PATH"), "PATH=/kiwi/src/.venv/bin:"));
    kiwi_install_plan_clear (&p);
    /* the project itself is never built in Phase A: pydeps reads the
     * lists, and Phase B installs it when it is named (-e .) */
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    assert_non_null (strstr (p.steps[0].script, "pydeps.py"));
    assert_null (strstr (p.steps[0].script, "pip install -e"));
    /* given a time to resolve as of, Phase A installs with a pip that can
     * (pip 26: --uploaded-prior-to), a wheel fetched as of now beside a
     * .venv made the usual way, whose own pip Phase B's tests get */
    assert_non_null (strstr (p.steps[0].script,
                             "{ { [ -z \"${PIP_UPLOADED_PRIOR_TO:-}\" ] || { mkdir -p /kiwi/tmp/kiwi/pip26 && "
                             "env -u PIP_UPLOADED_PRIOR_TO python3 -m pip download -q --disable-pip-version-check "
                             "--no-deps -d /kiwi/tmp/kiwi/pip26 'pip>=26' >/kiwi/tmp/kiwi/pip26.log 2>&1; } & } ; "
                             "python3 -m venv .venv && wait && KIWI_PIP=.venv/bin/pip && for w in "
                             "/kiwi/tmp/kiwi/pip26/pip-*.whl; do [ ! -e \"$w\" ] || "
                             "KIWI_PIP=\".venv/bin/python $w/pip\"; done; } && python3 "));
    assert_non_null (strstr (p.steps[0].script, "|| $KIWI_PIP install -r /kiwi/tmp/kiwi/requirements.txt; }"));
    assert_null (strstr (p.steps[0].script, ".venv/bin/pip install"));
    assert_string_equal (p.steps[0].prelude,
                         "if [ -e .venv/kiwi-project ]; then SETUPTOOLS_SCM_PRETEND_VERSION="
                         "\"${SETUPTOOLS_SCM_PRETEND_VERSION:-0.0.0}\" .venv/bin/pip install --no-deps --no-index "
                         "--no-build-isolation -e .; fi");
    kiwi_install_plan_clear (&p);
    /* a requirements/ folder: the test tier first, else development, else
     * the base */
    char *q = repo_new ();
    put (q, "requirements/base.txt", "attrs\n");
    expect_plan (q, "python", "pip install -r requirements/base.txt (.venv)", "/bin/sh");
    put (q, "requirements/dev.txt", "-r base.txt\nblack\n");
    expect_plan (q, "python", "pip install -r requirements/dev.txt (.venv)", "/bin/sh");
    put (q, "requirements/test.txt", "-r base.txt\npytest\n");
    put (q, "requirements/ci.txt", "-r test.txt\n");
    expect_plan (q, "python", "pip install -r requirements/test.txt -r requirements/ci.txt (.venv)", "/bin/sh");
    repo_free (q);
    /* PEP 735 dependency groups for tests, with no other list */
    q = repo_new ();
    put (q, "pyproject.toml", "[project]\nname = \"x\"\ndependencies = []\n\n[dependency-groups]\n"
                              "test = [\"pytest\"]\ndocs = [\"sphinx\"]\n");
    expect_plan (q, "python", "pip install -e . + dependency groups test (.venv)", "/bin/sh");
    repo_free (q);
    put (r, "Pipfile.lock", "{}");
    expect_plan (r, "python", "pipenv sync --dev", "pipenv");
    put (r, "poetry.lock", "# poetry\n");
    expect_plan (r, "python", "poetry install --no-root", "poetry");
    put (r, "uv.lock", "version = 1\n");
    expect_plan (r, "python", "uv sync --frozen --no-install-project --extra test", "/bin/sh");
    /* a stray uv.lock beside a Poetry project with no [project] table
     * (textual's): uv reads nothing of [tool.poetry], Poetry's lock decides */
    {
        char *t = repo_new ();
        put (t, "pyproject.toml", "[tool.poetry]\nname = \"t\"\n\n[tool.poetry.dependencies]\npython = \"^3.9\"\n"
                                  "rich = \">=14\"\n");
        put (t, "uv.lock", "version = 1\n");
        expect_plan (t, "python", "poetry install --no-root", "poetry");
        put (t, "poetry.lock", "# poetry\n");
        expect_plan (t, "python", "poetry install --no-root", "poetry");
        repo_free (t);
    }
    /* the extras a project's CI installs its tests with (fastapi's
     * `--extra all`) and the groups named for tests, as the lock resolved
     * them; other extras and groups are not installed */
    {
        char *u = repo_new ();
        put (u, "pyproject.toml",
             "[project]\nname = \"u\"\ndependencies = [\"anyio\"]\n\n[project.optional-dependencies]\n"
             "standard = [\"uvicorn\"]\nall = [\"orjson\"]\ntest = [\"pytest\"]\n\n[dependency-groups]\n"
             "docs = [\"mkdocs\"]\ntests = [\"pytest\"]\n");
        put (u, "uv.lock", "version = 1\n");
        expect_plan (u, "python", "uv sync --frozen --no-install-project --extra all --extra test --group tests",
                     "/bin/sh");
        assert_int_equal (kiwi_install_plan_make (u, "python", &p, &err), 0);
        assert_non_null (strstr (p.steps[0].script, "uv sync --frozen --no-install-project --extra all --extra test "
                                                     "--group tests && python3 "));
        kiwi_install_plan_clear (&p);
        repo_free (u);
    }
    /* a uv project that is a package is installed at the start of Phase B,
     * offline, with the build requirements Phase A put in the .venv */
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    assert_non_null (strstr (p.steps[0].script, "pydeps.py --build"));
    /* the sync and what follows it are one `&&` chain on one line: a failed
     * sync ends the step with uv's own error as its last words */
    {
        const char *sync = strstr (p.steps[0].script, "uv sync --frozen --no-install-project");
        assert_non_null (sync);
        const char *eol = strchr (sync, '\n');
        const char *build = strstr (sync, "&& python3 ");
        assert_non_null (build);
        assert_true (eol == NULL || build < eol);
        const char *prog = strstr (build, "pydeps.py --build");
        assert_true (prog != NULL && (eol == NULL || prog < eol));
    }
    assert_non_null (strstr (p.steps[0].prelude, "uv pip install --offline --no-deps --no-build-isolation"));
    kiwi_install_plan_clear (&p);
    repo_free (r);

    r = repo_new ();
    put (r, "Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[dependencies]\nlocal = { path = \"../l\" }\n");
    expect_plan (r, "rust", "-", NULL);
    /* nothing to install, but the runtime's settings still apply: the root
     * file system is read-only and Phase B is offline */
    assert_int_equal (kiwi_install_plan_make (r, "rust", &p, &err), 0);
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "CARGO_HOME"), "CARGO_HOME=/kiwi/home/.cargo");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "CARGO_NET_OFFLINE"), "CARGO_NET_OFFLINE=true");
    kiwi_install_plan_clear (&p);
    put (r, "Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[dependencies]\nitoa = \"1\"\n");
    expect_plan (r, "rust", "cargo fetch", "/bin/sh");
    put (r, "Cargo.lock", "version = 3\n\n[[package]]\nname = \"x\"\nversion = \"0.1.0\"\n");
    expect_plan (r, "rust", "-", NULL); /* a lock of the crate itself only */
    put (r, "Cargo.lock", "[[package]]\nname = \"itoa\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n");
    expect_plan (r, "rust", "cargo fetch --locked", "/bin/sh"); /* the target stubs first */
    repo_free (r);

    /* a virtual workspace without a lock (tokio's shape): the root declares
     * no dependency, its members do; each folder under crates/ is one with a pattern */
    r = repo_new ();
    put (r, "Cargo.toml", "[workspace]\nresolver = \"2\"\nmembers = [\n  \"core\",\n]\n");
    put (r, "core/Cargo.toml", "[package]\nname = \"core\"\nversion = \"0.1.0\"\n");
    expect_plan (r, "rust", "-", NULL); /* no member declares one */
    put (r, "Cargo.toml",
         "[workspace]\nresolver = \"2\"\nmembers = [\n  \"core\",\n  \"crates/*\",\n  \"../outside\",\n]\n");
    put (r, "crates/a/Cargo.toml", "[package]\nname = \"a\"\nversion = \"0.1.0\"\n\n[dependencies]\ncore = { path = \"../../core\" }\n");
    expect_plan (r, "rust", "-", NULL); /* a path dependency needs no network */
    put (r, "crates/b/Cargo.toml", "[package]\nname = \"b\"\nversion = \"0.1.0\"\n\n[dev-dependencies]\nitoa = \"1\"\n");
    expect_plan (r, "rust", "cargo fetch", "/bin/sh");
    repo_free (r);
    /* a member named directly, holding the dependency */
    r = repo_new ();
    put (r, "Cargo.toml", "[workspace]\nmembers = [\"tokio\"]\n");
    put (r, "tokio/Cargo.toml", "[package]\nname = \"tokio\"\nversion = \"1.0.0\"\n\n[dependencies]\nbytes = { version = \"1\", optional = true }\n");
    expect_plan (r, "rust", "cargo fetch", "/bin/sh");
    repo_free (r);

    r = repo_new ();
    put (r, "Gemfile", "source \"https://rubygems.org\"\n");
    expect_plan (r, "ruby", "-", NULL);
    put (r, "Gemfile", "source \"https://rubygems.org\"\ngem \"minitest\"\n");
    put (r, "Gemfile.lock", "GEM\n");
    assert_int_equal (kiwi_install_plan_make (r, "ruby", &p, &err), 0);
    assert_string_equal (p.display, "bundle install (deployment, frozen)");
    assert_string_equal (kiwi_strv_env_get (&p.verify_env, "BUNDLE_PATH"), "BUNDLE_PATH=/kiwi/src/vendor/bundle");
    assert_non_null (kiwi_strv_env_get (&p.install_env, "BUNDLE_DEPLOYMENT"));
    kiwi_install_plan_clear (&p);
    repo_free (r);

    r = repo_new ();
    put (r, "composer.json", "{ \"require\": { \"php\": \">=8.1\" } }");
    expect_plan (r, "php", "-", NULL);
    put (r, "composer.json", "{ \"require\": { \"php\": \">=8.1\" }, \"autoload\": { \"psr-4\": { \"A\\\\\": \"src/\" } } }");
    expect_plan (r, "php", "composer install", "composer");
    repo_free (r);

    r = repo_new ();
    put (r, "pom.xml", "<project/>");
    assert_int_equal (kiwi_install_plan_make (r, "java", &p, &err), 0);
    assert_string_equal (p.display, "mvn -B dependency:go-offline + test warm-up");
    assert_non_null (strstr (p.argv.v[2], "KiwiTrust.java"));
    assert_non_null (strstr (p.argv.v[2], "<offline>true</offline>"));
    assert_non_null (strstr (kiwi_strv_env_get (&p.install_env, "JAVA_TOOL_OPTIONS"), "trustStore="));
    assert_null (kiwi_strv_env_get (&p.verify_env, "JAVA_TOOL_OPTIONS"));
    kiwi_install_plan_clear (&p);
    put (r, "mvnw", "#!/bin/sh\n");
    expect_plan (r, "maven", "./mvnw -B dependency:go-offline + test warm-up", "/bin/sh");
    repo_free (r);

    r = repo_new ();
    put (r, "build.gradle", "apply plugin: 'java'\n");
    assert_int_equal (kiwi_install_plan_make (r, "gradle", &p, &err), 0);
    assert_string_equal (p.display, "gradle resolve all configurations");
    assert_non_null (strstr (p.argv.v[2], "kiwiResolveDependencies"));
    assert_non_null (strstr (p.argv.v[2], "init.d/kiwi-offline.gradle"));
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

static void
test_polyglot_plan (void **state)
{
    char *r = repo_new ();
    put (r, "go.mod", "module x\n\ngo 1.19\n\nrequire github.com/google/go-cmp v0.5.9\n");
    put (r, "go.sum", "x\n");
    put (r, "web/package.json", "{ \"dependencies\": { \"a\": \"1\" } }");
    put (r, "web/package-lock.json", "{}");
    put (r, "tools/package.json", "{ \"dependencies\": { \"a\": \"1\" } }"); /* no lockfile: not a project */
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "go", &p, &err), 0);
    assert_string_equal (p.display, "go mod download");
    assert_int_equal (p.left_out.n, 1);
    assert_string_equal (p.left_out.v[0], "npm (web): the image runs go");
    kiwi_install_plan_clear (&p);
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "npm ci (in web)");
    assert_string_equal (p.argv.v[0], "/bin/sh");
    assert_non_null (strstr (p.argv.v[2], "cd '/kiwi/src/web'\nnode -e '"));
    assert_non_null (strstr (p.argv.v[2], "postprepare\nnpm ci --no-audit --no-fund\n"));
    kiwi_install_plan_clear (&p);
    /* an unknown runtime (a devcontainer image the catalogue lacks): everything */
    assert_int_equal (kiwi_install_plan_make (r, "", &p, &err), 0);
    assert_string_equal (p.display, "go mod download; npm ci (in web)");
    assert_int_equal (p.left_out.n, 0);
    kiwi_install_plan_clear (&p);
    assert_int_equal (kiwi_install_plan_make (r, "base", &p, &err), 0);
    assert_string_equal (p.display, "-");
    kiwi_install_plan_clear (&p);
    repo_free (r);

    /* a website and a fuzz crate with lockfiles of their own, beside the
     * project: the tests at the root never run there */
    r = repo_new ();
    put (r, "package.json", "{ \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    put (r, "package-lock.json", "{}");
    put (r, "website/package.json", "{ \"dependencies\": { \"docusaurus\": \"3.0.0\" } }");
    put (r, "website/package-lock.json", "{}");
    put (r, "tools/package.json", "{ \"dependencies\": { \"is-odd\": \"3.0.1\" } }");
    put (r, "tools/package-lock.json", "{}");
    /* an aside folder's name as a word of a longer one (immer's
     * perf-testing/, a folder of benchmarks with a lockfile of its own) */
    put (r, "perf-testing/package.json", "{ \"dependencies\": { \"mitata\": \"1.0.34\" } }");
    put (r, "perf-testing/package-lock.json", "{}");
    put (r, "Docs_Site/package.json", "{ \"dependencies\": { \"docusaurus\": \"3.0.0\" } }");
    put (r, "Docs_Site/package-lock.json", "{}");
    /* ... but not a word's mere start or end */
    put (r, "perfume/package.json", "{ \"dependencies\": { \"is-even\": \"1.0.0\" } }");
    put (r, "perfume/package-lock.json", "{}");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "npm ci; npm ci (in perfume); npm ci (in tools)");
    /* browsers and drivers are never downloaded by install scripts */
    assert_string_equal (kiwi_strv_env_get (&p.install_env, "PUPPETEER_SKIP_DOWNLOAD"), "PUPPETEER_SKIP_DOWNLOAD=true");
    assert_string_equal (kiwi_strv_env_get (&p.install_env, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"),
                         "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1");
    assert_null (kiwi_strv_env_get (&p.verify_env, "PUPPETEER_SKIP_DOWNLOAD"));
    assert_int_equal (p.left_out.n, 3);
    assert_string_equal (p.left_out.v[0], "npm (Docs_Site): a folder of its own the test command does not run in");
    assert_string_equal (p.left_out.v[1], "npm (perf-testing): a folder of its own the test command does not run in");
    assert_string_equal (p.left_out.v[2], "npm (website): a folder of its own the test command does not run in");
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

/* A test command that runs in an aside folder (cd docs && npm test) has it
 * planned. */
static void
test_aside_folder_of_the_command (void **state)
{
    char *r = repo_new ();
    put (r, "docs/package.json", "{ \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    put (r, "docs/package-lock.json", "{}");
    put (r, "examples/package.json", "{ \"dependencies\": { \"is-odd\": \"3.0.1\" } }");
    put (r, "examples/package-lock.json", "{}");
    kiwi_inspect_request rq = {
        .root = r, .test_command = "cd docs && npm test", .catalog = local, .driver = "docker",
    };
    kiwi_inspection in;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    assert_string_equal (in.install.display, "npm ci (in docs)");
    kiwi_inspection_clear (&in);
    repo_free (r);
}

/* A Maven wrapper's version picks the first row of its major (the default
 * JDK): the wrapper runs the Maven it downloads, and the catalogue's
 * `maven 3.9` row (for a build that asks for Maven 3.9) is not it. */
static void
test_maven_wrapper_image (void **state)
{
    (void) state;
    char *r = repo_new ();
    put (r, "pom.xml", "<project/>");
    put (r, "mvnw", "#!/bin/sh\n");
    put (r, ".mvn/wrapper/maven-wrapper.properties",
         "distributionUrl=https://repo.maven.apache.org/maven2/org/apache/maven/apache-maven/3.9.6/"
         "apache-maven-3.9.6-bin.zip\n");
    kiwi_inspect_request rq = { .root = r, .test_command = "./mvnw -B test", .catalog = local, .driver = "docker" };
    kiwi_inspection in;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    assert_string_equal (in.image.image, "kiwi/java:17");
    kiwi_inspection_clear (&in);
    repo_free (r);
}

/* The warm-up runs to the phase the test command's Maven asks for (a
 * plugin bound to package or verify resolves its artifacts only when it
 * runs), never to install; a word of another program is not Maven's. */
static void
test_maven_warm_phase (void **state)
{
    (void) state;
    char *r = repo_new ();
    put (r, "pom.xml", "<project/>");
    static const struct {
        const char *command, *phase;
    } cases[] = {
        { "mvn -B test", "test" },
        { "mvn -B verify", "verify" },
        { "mvn -B -Pjdk17 install", "verify" },
        { "sh ./mvnw -B -ntp clean package", "package" },
        { "MAVEN_OPTS=-Xmx1g mvn integration-test", "verify" },
        { "mvn test && echo verify", "test" },
        { "make verify", "test" },
        { "mvn -q -pl core -am test;./mvnw deploy", "verify" },
        { "mvn -Dphase=verify test", "test" },
        { "bash -c 'cd core && ./mvnw -B verify'", "verify" },
        { "exec bash ./mvnw package", "package" },
        { "echo mvn verify", "test" },
        { NULL, "test" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiwi_inspect_request rq = { .root = r, .test_command = cases[i].command, .catalog = local, .driver = "docker" };
        kiwi_inspection in;
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
        char want[160];
        snprintf (want, sizeof want, "mvn -B dependency:go-offline + %s warm-up", cases[i].phase);
        assert_string_equal (in.install.display, want);
        snprintf (want, sizeof want, "-Dmaven.test.failure.ignore=true -Drat.skip=true -Dlicense.skip=true %s >", cases[i].phase);
        assert_non_null (strstr (in.install.argv.v[2], want));
        kiwi_inspection_clear (&in);
    }
    repo_free (r);
}

/* A test command that runs tox or nox: the pip step also installs it and
 * keeps a wheelhouse Phase B's pip finds (PIP_FIND_LINKS); another command,
 * or a plan without a pip step, is planned as before. */
/* Runs the pydeps program of a pip plan's script on the host's python3 in
 * root (as Phase A would, the project marked wanted), and returns what it
 * wrote for pip to install (owned by the caller). */
static char *
run_pydeps (const char *root, const char *script)
{
    const char *start = strstr (script, "<<'KIWI_PY_EOF'\n");
    assert_non_null (start);
    start += strlen ("<<'KIWI_PY_EOF'\n");
    const char *end = strstr (start, "KIWI_PY_EOF\n");
    assert_non_null (end);
    char *prog = strndup (start, (size_t) (end - start));
    put (root, "pydeps.py", prog);
    free (prog);
    char cmd[4300];
    snprintf (cmd, sizeof cmd, "cd '%s' && python3 pydeps.py out.txt 1 2>err.txt", root);
    assert_int_equal (system (cmd), 0);
    char path[4200], *text = NULL;
    snprintf (path, sizeof path, "%s/out.txt", root);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    return text;
}

/* The extras the project's own CI installs with (textual's `poetry install
 * --extras syntax`), read from its workflows: only names the project
 * declares reach the command. */
static void
test_python_ci_extras (void **state)
{
    (void) state;
    char *r = repo_new ();
    put (r, "pyproject.toml", "[tool.poetry]\nname = \"t\"\n\n[tool.poetry.dependencies]\npython = \"^3.9\"\n\n"
                              "[tool.poetry.extras]\nsyntax = [\"tree-sitter\"]\ndocs = [\"mkdocs\"]\n"
                              "\"a;b\" = [\"x\"]\nunused = [\"y\"]\n");
    put (r, "poetry.lock", "# poetry\n");
    expect_plan (r, "python", "poetry install --no-root", "poetry");
    put (r, ".github/workflows/ci.yml",
         "jobs:\n  test:\n    steps:\n      - run: poetry install --no-interaction --extras syntax\n"
         "      - run: poetry install -E \"docs other\" --extras=${{ matrix.extras }}\n"
         "      - run: poetry install --extras 'a;b'\n      - run: pip install --extras unused\n");
    expect_plan (r, "python", "poetry install --no-root --extras 'syntax docs'", "/bin/sh");
    /* a workflow over 1 MiB is not read (each is read alone, then let go) */
    {
        size_t big = ((size_t) 1 << 20) + 64;
        char *text = malloc (big + 1);
        assert_non_null (text);
        memset (text, '#', big);
        memcpy (text, "- run: poetry install --extras unused\n", 38);
        text[big] = '\0';
        put (r, ".github/workflows/big.yml", text);
        free (text);
        expect_plan (r, "python", "poetry install --no-root --extras 'syntax docs'", "/bin/sh");
    }
    put (r, ".github/workflows/all.yaml", "jobs:\n  x:\n    steps:\n      - run: poetry install --all-extras\n");
    expect_plan (r, "python", "poetry install --no-root --all-extras", "poetry");
    repo_free (r);

    r = repo_new ();
    put (r, "pyproject.toml", "[project]\nname = \"u\"\ndependencies = []\n\n[project.optional-dependencies]\n"
                              "test = [\"pytest\"]\npostgres = [\"psycopg\"]\nmysql = [\"pymysql\"]\n");
    put (r, "uv.lock", "version = 1\n");
    put (r, ".github/workflows/test.yml", "steps:\n  - run: uv sync --python=3.12 --extra=postgres --extra test --frozen\n"
                                          "  - run: uv sync ==  =\n  - run: uv sync --extra\n  - run: uv sync --extra=");
    expect_plan (r, "python", "uv sync --frozen --no-install-project --extra test --extra postgres", "/bin/sh");
    put (r, ".github/workflows/test.yml", "steps:\n  - run: uv sync --all-extras\n");
    expect_plan (r, "python", "uv sync --frozen --no-install-project --all-extras", "/bin/sh");
    repo_free (r);
}

/* Runs the Maven step's script after its trust store (from its proxy
 * settings on) in /bin/sh on the host, in root, with /kiwi/ under root
 * instead and HTTPS_PROXY=proxy; root/mvnw is the fake Maven. Returns the
 * exit status; what the script printed on stderr is in root/stderr.txt. */
static int
run_maven_step (const char *root, const char *script, const char *proxy)
{
    const char *start = strstr (script, "case \"${HTTPS_PROXY");
    assert_non_null (start);
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&body, &len);
    assert_non_null (f);
    for (const char *p = start; *p; p++)
        if (strncmp (p, "/kiwi/", 6) == 0 && strchr (" >'\"=", p[-1]) != NULL) { /* a path's start */
            fprintf (f, "%s/kiwi/", root);
            p += 5;
        } else
            fputc (*p, f);
    fclose (f);
    char mk[4300];
    snprintf (mk, sizeof mk, "mkdir -p '%s/kiwi/tmp/kiwi'", root);
    assert_int_equal (system (mk), 0);
    put (root, "step.sh", body);
    free (body);
    char cmd[8600];
    snprintf (cmd, sizeof cmd, "cd '%s' && HTTPS_PROXY='%s' /bin/sh -e step.sh >/dev/null 2>stderr.txt", root, proxy);
    int st = system (cmd);
    return WIFEXITED (st) ? WEXITSTATUS (st) : -1;
}

/* The Maven step: Phase A's proxy goes into Maven's user settings (the
 * wrapper's Maven 3.9 reads no JVM proxy property); what go-offline could
 * not resolve fails the install only when the test warm-up could not
 * resolve something either (commons-io: a groovy of a site plugin). */
static void
test_maven_step (void **state)
{
    (void) state;
    char *r = repo_new ();
    put (r, "pom.xml", "<project><build><plugins>\n  <plugin>\n    <artifactId>maven-surefire-plugin</artifactId>\n"
                       "    <dependencies>\n      <dependency>...</dependency>\n    </dependencies>\n  </plugin>\n"
                       "</plugins></build></project>\n");
    /* the fake Maven: go-offline fails on a plugin of another phase; the
     * warm-up resolves everything unless told otherwise */
    put (r, "mvnw", "case \"$*\" in\n"
                    "  *effective-pom*) for a; do case $a in -Doutput=*) cp effective.xml \"${a#-Doutput=}\";; esac; "
                    "done;;\n"
                    "  *plugin-deps/pom.xml*) for a; do case $a in */plugin-deps/pom.xml) cp \"$a\" resolved.xml;; "
                    "esac; done;;\n"
                    "  *go-offline*) cat \"$HOME_M2/settings.xml\" > go-offline-saw.xml\n"
                    "    echo '[ERROR] Failed to execute goal go-offline: The following artifacts could not be "
                    "resolved: org.apache.groovy:groovy-json:jar:5.1.3'; exit 1;;\n"
                    "  *' test') [ ! -e warm-fails ] || echo '[ERROR] Failed to execute goal on project x: Could "
                    "not resolve dependencies for project x'; exit 0;;\n"
                    "esac\n");
    /* the effective POM: a plugin's own dependency (junit4's Surefire
     * provider) and an artifact its configuration names (animal-sniffer's
     * signature) are resolved; one in pluginManagement, of a dependency
     * list elsewhere, or a report plugin the site plugin names, is not */
    put (r, "effective.xml",
         "<projects><project><dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId>"
         "<version>4.13.2</version></dependency></dependencies><build><pluginManagement><plugins><plugin>"
         "<artifactId>m</artifactId><dependencies><dependency><groupId>g</groupId><artifactId>managed</artifactId>"
         "<version>1</version></dependency></dependencies></plugin></plugins></pluginManagement><plugins><plugin>"
         "<artifactId>maven-surefire-plugin</artifactId><dependencies><dependency>"
         "<groupId>org.apache.maven.surefire</groupId><artifactId>surefire-junit47</artifactId>"
         "<version>2.19.1</version></dependency></dependencies></plugin>"
         "<plugin><artifactId>animal-sniffer-maven-plugin</artifactId><executions><execution><configuration>"
         "<signature><groupId>org.codehaus.mojo.signature</groupId><artifactId>java15</artifactId>"
         "<version>1.0</version></signature></configuration></execution></executions></plugin>"
         /* protobuf plugins' protoc and protoc plugins, executables for
          * this machine; a protoc from PATH is none */
         "<plugin><artifactId>protobuf-maven-plugin</artifactId><configuration><protoc>4.35.1</protoc>"
         "<binaryMavenPlugins><binaryMavenPlugin><groupId>io.grpc</groupId><artifactId>protoc-gen-grpc-java"
         "</artifactId><version>1.76.0</version></binaryMavenPlugin></binaryMavenPlugins></configuration></plugin>"
         "<plugin><artifactId>protobuf-maven-plugin</artifactId><configuration><protoc>PATH</protoc><protocArtifact>"
         "com.google.protobuf:protoc:3.25.5:exe:${os.detected.classifier}</protocArtifact></configuration></plugin>"
         "<plugin><artifactId>maven-site-plugin</artifactId><configuration><reportPlugins><plugin>"
         "<groupId>g</groupId><artifactId>report</artifactId><version>1</version></plugin></reportPlugins>"
         "</configuration></plugin></plugins></build></project></projects>\n");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "maven", &p, &err), 0);
    char *script = strdup (p.steps[0].script);
    kiwi_install_plan_clear (&p);
    char env[4200];
    snprintf (env, sizeof env, "HOME_M2=%s/kiwi/home/.m2", r);
    putenv (env);
    /* a plugin the tests never run: the install goes on, saying what it left out */
    assert_int_equal (run_maven_step (r, script, "http://10.9.8.7:3128"), 0);
    char path[4200], *text = NULL;
    snprintf (path, sizeof path, "%s/go-offline-saw.xml", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    assert_string_equal (text, "<settings><proxies><proxy><id>kiwi</id><active>true</active><protocol>http</protocol>"
                               "<host>10.9.8.7</host><port>3128</port></proxy></proxies></settings>\n");
    free (text);
    snprintf (path, sizeof path, "%s/stderr.txt", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    assert_non_null (strstr (text, "the test warm-up resolved what it runs; left out:"));
    assert_non_null (strstr (text, "groovy-json:jar:5.1.3"));
    free (text);
    snprintf (path, sizeof path, "%s/resolved.xml", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    /* the platform is the JVM's, which runs here: os.arch amd64 or aarch64 */
    struct utsname u;
    assert_int_equal (uname (&u), 0);
    const char *plat = strcmp (u.machine, "aarch64") == 0 ? "linux-aarch_64" : "linux-x86_64";
    char want[2048];
    snprintf (want, sizeof want, "<project><modelVersion>4.0.0</modelVersion><groupId>kiwi</groupId>"
                               "<artifactId>kiwi-plugin-dependencies</artifactId><version>0</version><packaging>pom"
                               "</packaging><dependencies>\n<dependency><groupId>org.apache.maven.surefire</groupId>"
                               "<artifactId>surefire-junit47</artifactId><version>2.19.1</version></dependency>\n"
                               "<dependency><groupId>org.codehaus.mojo.signature</groupId><artifactId>java15"
                               "</artifactId><version>1.0</version><type>signature</type></dependency>\n"
                               "<dependency><groupId>com.google.protobuf</groupId><artifactId>protoc</artifactId>"
                               "<version>4.35.1</version><type>exe</type><classifier>%s</classifier>"
                               "</dependency>\n"
                               "<dependency><groupId>io.grpc</groupId><artifactId>protoc-gen-grpc-java</artifactId>"
                               "<version>1.76.0</version><type>exe</type><classifier>%s</classifier>"
                               "</dependency>\n"
                               "<dependency><groupId>com.google.protobuf</groupId><artifactId>protoc</artifactId>"
                               "<version>3.25.5</version><type>exe</type><classifier>%s</classifier>"
                               "</dependency>\n"
                               "</dependencies></project>\n",
              plat, plat, plat);
    assert_string_equal (text, want);
    free (text);
    /* Phase B's settings: offline, no proxy */
    snprintf (path, sizeof path, "%s/kiwi/home/.m2/settings.xml", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    assert_string_equal (text, "<settings><offline>true</offline></settings>\n");
    free (text);
    /* the warm-up could not resolve either: the install fails with go-offline's words */
    put (r, "warm-fails", "");
    assert_int_equal (run_maven_step (r, script, "http://10.9.8.7:3128"), 1);
    snprintf (path, sizeof path, "%s/stderr.txt", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    assert_non_null (strstr (text, "The following artifacts could not be resolved: org.apache.groovy"));
    assert_null (strstr (text, "left out"));
    free (text);
    /* no proxy (Phase A open): no proxy settings; no pom.xml of the tree
     * declares a plugin's dependencies: no effective POM is asked for */
    unlink_in (r, "warm-fails");
    unlink_in (r, "resolved.xml");
    put (r, "pom.xml", "<project><build><plugins><plugin><artifactId>x</artifactId></plugin></plugins></build>\n"
                       "<dependencies>\n<dependency>...</dependency>\n</dependencies></project>\n");
    unlink_in (r, "kiwi/home/.m2/settings.xml");
    assert_int_equal (run_maven_step (r, script, ""), 0);
    snprintf (path, sizeof path, "%s/go-offline-saw.xml", r);
    assert_int_equal (kiwi__read_file (path, 1 << 20, &text, NULL, &err), 0);
    assert_string_equal (text, "");
    free (text);
    snprintf (path, sizeof path, "%s/resolved.xml", r);
    assert_int_equal (access (path, F_OK), -1);
    /* a protoc a plugin's configuration names by its version alone, on
     * the configuration's own line */
    put (r, "pom.xml", "<project><build><plugins><plugin><artifactId>protobuf-maven-plugin</artifactId>\n"
                       "  <configuration><protoc>${protobufVersion}</protoc></configuration></plugin>\n"
                       "</plugins></build></project>\n");
    assert_int_equal (run_maven_step (r, script, ""), 0);
    assert_int_equal (access (path, F_OK), 0);
    unsetenv ("HOME_M2");
    free (script);
    repo_free (r);
}

/* setuptools' declarative setup.cfg (httpie's shape): the version from the
 * package's code (attr:), which Phase A does not have, so the project is
 * never built there; pydeps reads install_requires, the extras for tests
 * and development, and Phase B installs the project itself. */
static void
test_python_setup_cfg (void **state)
{
    (void) state;
    char *r = repo_new ();
    put (r, "setup.py", "from setuptools import setup\n\nsetup()\n");
    put (r, "setup.cfg", "[metadata]\nname = ledger\nversion = attr: ledger.__version__\n\n[tool:pytest]\n"
                         "testpaths = tests\n");
    expect_plan (r, "python", "pip install -e . (.venv)", "/bin/sh"); /* no list declared: pip builds it */
    put (r, "setup.cfg",
         "[metadata]\nname = ledger\nversion = attr: ledger.__version__\n\n[options]\npackages = find:\n"
         "install_requires =\n    iniconfig>=2.0\n    # a comment\n    tomli; python_version<\"3.11\"\n"
         "    ledger[fast]\n\n[options.extras_require]\nfast = ujson\ndocs =\n    sphinx\nTest =\n"
         "    pytest==8.3.3\n    responses\ndev = flake8; black\n");
    expect_plan (r, "python", "pip install -e .[Test,dev] (.venv)", "/bin/sh");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    assert_string_equal (p.steps[0].why, "setup.cfg [options]");
    assert_non_null (strstr (p.steps[0].prelude, "pip install --no-deps --no-index --no-build-isolation -e ."));
    char *out = run_pydeps (r, p.steps[0].script);
    kiwi_install_plan_clear (&p);
    assert_string_equal (out, "iniconfig>=2.0\ntomli; python_version<\"3.11\"\nujson\nflake8\nblack\n"
                              "pytest==8.3.3\nresponses\nsetuptools>=40.8.0\n");
    free (out);
    /* file: names a requirements file (read beside the others) */
    put (r, "requirements/base.txt", "attrs\n");
    put (r, "setup.cfg", "[metadata]\nname = ledger\n\n[options]\ninstall_requires = file: requirements/base.txt\n");
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    out = run_pydeps (r, p.steps[0].script);
    kiwi_install_plan_clear (&p);
    char want[4200];
    char *real = realpath (r, NULL);
    snprintf (want, sizeof want, "-r %s/requirements/base.txt\nsetuptools>=40.8.0\n", real);
    free (real);
    assert_string_equal (out, want);
    free (out);
    repo_free (r);

    /* the extras tox installs the project with are installed beside the
     * test groups (psf/black's `pip install -e .[d]` in its commands),
     * those before its first test run (not the second run's .[jupyter]) */
    r = repo_new ();
    put (r, "pyproject.toml", "[project]\nname = \"b\"\ndependencies = [\"click\"]\n\n"
                              "[project.optional-dependencies]\nd = [\"aiohttp\"]\njupyter = [\"ipython\"]\n\n"
                              "[dependency-groups]\ntests = [\"pytest\"]\n\n[build-system]\nrequires = [\"hatchling\"]\n");
    put (r, "tox.ini", "[testenv]\ndeps = mypy\ncommands =\n    pip install -e .[d]\n    coverage erase\n    pytest tests\n"
                       "    pip install -e .[jupyter]\n    pytest tests -m jupyter\n");
    assert_int_equal (kiwi_install_plan_make (r, "python", &p, &err), 0);
    out = run_pydeps (r, p.steps[0].script);
    kiwi_install_plan_clear (&p);
    assert_string_equal (out, "click\npytest\naiohttp\nhatchling\n");
    free (out);
    repo_free (r);
}

static void
test_python_test_runner (void **state)
{
    char *r = repo_new ();
    put (r, "pyproject.toml", "[project]\nname = \"x\"\nversion = \"1\"\ndependencies = [\"iniconfig\"]\n");
    put (r, "tox.ini", "[testenv]\ndeps = pytest\ncommands = pytest\n");
    const char *commands[] = { "tox -e py313", "cd . && .venv/bin/nox -s tests", "pytest -q", "python -m tox" };
    const char *runner[] = { "tox", "nox", NULL, NULL };
    for (size_t i = 0; i < 4; i++) {
        kiwi_inspect_request rq = { .root = r, .test_command = commands[i], .catalog = local, .driver = "docker" };
        kiwi_inspection in;
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
        const kiwi_install_step *st = &in.install.steps[0];
        const char *links = kiwi_strv_env_get (&in.install.verify_env, "PIP_FIND_LINKS");
        if (runner[i] == NULL) {
            assert_string_equal (in.install.display, "pip install -e . (.venv)");
            assert_null (strstr (st->script, "kiwi-wheels"));
            assert_null (links);
            kiwi_inspection_clear (&in);
            continue;
        }
        char want[256];
        snprintf (want, sizeof want, "pip install -e . (.venv) + %s", runner[i]);
        assert_string_equal (in.install.display, want);
        snprintf (want, sizeof want,
                  " && $KIWI_PIP install '%s' && $KIWI_PIP download -q -d .venv/kiwi-wheels '%s' setuptools "
                  "wheel && { [ ! -s /kiwi/tmp/kiwi/requirements.txt ] || $KIWI_PIP download -q -d "
                  ".venv/kiwi-wheels -r /kiwi/tmp/kiwi/requirements.txt; }",
                  runner[i], runner[i]);
        size_t sl = strlen (st->script), wl = strlen (want);
        assert_true (sl > wl && strcmp (st->script + sl - wl, want) == 0);
        assert_non_null (strstr (st->why, "the test command runs"));
        assert_string_equal (links, "PIP_FIND_LINKS=/kiwi/src/.venv/kiwi-wheels");
        assert_true (kiwi_strv_contains (&in.install.verify_env, "PIP_NO_INDEX=1"));
        assert_null (kiwi_strv_env_get (&in.install.install_env, "PIP_FIND_LINKS"));
        kiwi_inspection_clear (&in);
    }
    repo_free (r);
    /* uv's plan is left as it is */
    r = repo_new ();
    put (r, "pyproject.toml", "[project]\nname = \"x\"\nversion = \"1\"\n");
    put (r, "uv.lock", "version = 1\n");
    kiwi_inspect_request rq = { .root = r, .test_command = "tox", .catalog = local, .driver = "docker" };
    kiwi_inspection in;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    assert_string_equal (in.install.display, "uv sync --frozen --no-install-project");
    kiwi_inspection_clear (&in);
    repo_free (r);
}

/* ----------------------------------------------------------- the cache key */

static void
key_of (const char *root, const char *runtime, const char *image, const char *driver, char out[65])
{
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (root, runtime, &p, &err), 0);
    kiwi_install_key_input k = { .image = image, .image_id = "sha256:1", .driver = driver };
    assert_int_equal (kiwi_install_cache_key (root, &p, &k, NULL, out, &err), 0);
    kiwi_install_plan_clear (&p);
}

static void
key_with (const char *root, const char *image_id, const char *const *kiwi_env, char out[65])
{
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (root, "node", &p, &err), 0);
    kiwi_install_key_input k = { .image = "kiwi/node:22", .image_id = image_id, .driver = "docker",
                                 .kiwi_env = kiwi_env };
    assert_int_equal (kiwi_install_cache_key (root, &p, &k, NULL, out, &err), 0);
    kiwi_install_plan_clear (&p);
}

/* The install's input of the tree at r for `runtime`, against want[n]. */
static void
expect_input (const char *r, const char *runtime, const char *const *want, size_t n)
{
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    kiwi_strv files = KIWI_STRV_INIT;
    assert_int_equal (kiwi_install_plan_make (r, runtime, &p, &err), 0);
    assert_int_equal (kiwi_install_hashed_files (r, &p, &files, &err), 0);
    for (size_t i = 0; i < files.n; i++)
        print_message ("input: %s\n", files.v[i]);
    assert_int_equal (files.n, n);
    for (size_t i = 0; i < files.n; i++)
        assert_string_equal (files.v[i], want[i]);
    kiwi_strv_free (&files);
    kiwi_install_plan_clear (&p);
}

/* The install's input: per ecosystem, the files an install reads, and
 * nothing else of the tree (the source, tests, secrets). */
static void
test_install_input_table (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"workspaces\": [\"packages/*\"], \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    put (r, "package-lock.json", "{ \"lockfileVersion\": 3 }");
    put (r, ".npmrc", "fund=false\n");
    put (r, "patches/is-number+7.0.0.patch", "--- a\n+++ b\n");
    put (r, "packages/a/package.json", "{ \"name\": \"a\" }");
    put (r, "packages/a/index.js", "module.exports = 1;\n");
    put (r, ".yarn/plugins/@yarnpkg/plugin-x.cjs", "x\n");
    put (r, "src/secret.txt", "the source is the secret\n");
    put (r, "index.test.js", "test\n");
    put (r, "node_modules/x/package.json", "{}");
    const char *want[] = { ".npmrc", ".yarn/plugins/@yarnpkg/plugin-x.cjs", "package-lock.json", "package.json",
                           "packages/a/package.json", "patches/is-number+7.0.0.patch" };
    expect_input (r, "node", want, sizeof want / sizeof want[0]);
    repo_free (r);

    /* npm: what a manifest or lockfile names with file: (a vendored tarball,
     * a local package's directory) is input too; nothing outside the tree,
     * nothing behind a symlink, nothing of .git */
    r = repo_new ();
    put (r, "package.json",
         "{ \"dependencies\": { \"dep\": \"file:vendor/dep-1.0.0.tgz\", \"loc\": \"file:./libs/loc\", "
         "\"out\": \"file:../outside.tgz\", \"via\": \"file:linked/x.tgz\", \"g\": \"file:.git/config\" } }");
    put (r, "package-lock.json",
         "{ \"lockfileVersion\": 3, \"packages\": { \"node_modules/dep\": "
         "{ \"resolved\": \"file:vendor/dep-1.0.0.tgz\" }, \"node_modules/old\": { \"version\": \"file:vendor/old.tgz\" } } }");
    put (r, "vendor/dep-1.0.0.tgz", "tgz");
    put (r, "vendor/old.tgz", "tgz");
    put (r, "vendor/unreferenced.tgz", "tgz");
    put (r, "libs/loc/package.json", "{ \"name\": \"loc\" }");
    put (r, "libs/loc/index.js", "module.exports = 2;\n");
    put (r, "elsewhere/x.tgz", "tgz");
    put (r, ".git/config", "[core]\n");
    {
        char *lnk = NULL, *tgt = NULL;
        assert_true (asprintf (&lnk, "%s/linked", r) > 0 && asprintf (&tgt, "%s/elsewhere", r) > 0);
        assert_int_equal (symlink (tgt, lnk), 0);
        free (lnk);
        free (tgt);
    }
    const char *want_refs[] = { "libs/loc/index.js", "libs/loc/package.json", "package-lock.json", "package.json",
                                "vendor/dep-1.0.0.tgz", "vendor/old.tgz" };
    expect_input (r, "node", want_refs, sizeof want_refs / sizeof want_refs[0]);
    repo_free (r);

    /* a workspace member deeper than the input's search (vite's, deep under
     * packages/, named by a pattern with two stars): its manifest and the
     * fixture package it names with file: are input; a folder the patterns
     * do not name is not */
    r = repo_new ();
    put (r, "package.json", "{ \"name\": \"root\", \"devDependencies\": { \"vitest\": \"1\" } }");
    put (r, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    put (r, "pnpm-workspace.yaml", "packages:\n  - 'packages/*'\n  - 'packages/**/__tests__/**'\n");
    put (r, "packages/vite/package.json", "{ \"name\": \"vite\" }");
    put (r, "packages/vite/src/node/ssr/runtime/__tests__/package.json",
         "{ \"name\": \"t\", \"dependencies\": { \"dep\": \"file:./fixtures/deps/dep\" } }");
    put (r, "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/dep/package.json",
         "{ \"name\": \"dep\", \"dependencies\": { \"nested\": \"file:../nested\" } }");
    put (r, "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/dep/index.js", "export default 1;\n");
    /* named by the fixture package, not by a member: followed too */
    put (r, "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/nested/package.json",
         "{ \"name\": \"nested\", \"dependencies\": { \"dep\": \"file:../dep\" } }");
    put (r, "packages/vite/src/node/ssr/runtime/impl/package.json", "{ \"name\": \"not-a-member\" }");
    const char *want_deep[] = { "package.json", "packages/vite/package.json",
                                "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/dep/index.js",
                                "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/dep/package.json",
                                "packages/vite/src/node/ssr/runtime/__tests__/fixtures/deps/nested/package.json",
                                "packages/vite/src/node/ssr/runtime/__tests__/package.json", "pnpm-lock.yaml",
                                "pnpm-workspace.yaml" };
    expect_input (r, "node", want_deep, sizeof want_deep / sizeof want_deep[0]);
    repo_free (r);

    /* Maven: the wrapper and its directory; Gradle: the wrapper, gradle/ */
    r = repo_new ();
    put (r, "pom.xml", "<project/>");
    put (r, "mvnw", "#!/bin/sh\n");
    put (r, ".mvn/wrapper/maven-wrapper.properties", "distributionUrl=x\n");
    put (r, "src/main/java/A.java", "class A {}\n");
    /* a parent POM's profile marker (Apache Commons' JaCoCo profile) */
    put (r, "src/site/resources/profile.jacoco", "");
    put (r, "src/site/resources/logo.png", "png");
    const char *want_maven[] = { ".mvn/wrapper/maven-wrapper.properties", "mvnw", "pom.xml",
                                 "src/site/resources/profile.jacoco" };
    expect_input (r, "java", want_maven, sizeof want_maven / sizeof want_maven[0]);
    repo_free (r);

    /* Python: the package manager's project config */
    r = repo_new ();
    put (r, "pyproject.toml", "[tool.poetry]\nname = \"x\"\n[tool.poetry.dependencies]\npython = \"^3.11\"\n");
    put (r, "poetry.lock", "# lock\n");
    put (r, "poetry.toml", "[virtualenvs]\nin-project = true\n");
    put (r, "src/x/__init__.py", "SECRET = 1\n");
    const char *want_python[] = { "poetry.lock", "poetry.toml", "pyproject.toml" };
    expect_input (r, "python", want_python, sizeof want_python / sizeof want_python[0]);
    repo_free (r);
}

/* The dependency locations: node_modules at any depth, Yarn's PnP files;
 * HOME's caches by ecosystem; never build output such as target/. */
static void
test_dep_locations (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    put (r, "package-lock.json", "{ \"lockfileVersion\": 3 }");
    put (r, "go.mod", "module x\n\ngo 1.19\n\nrequire golang.org/x/text v0.3.0\n");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    kiwi_strv src = KIWI_STRV_INIT, home = KIWI_STRV_INIT;
    assert_int_equal (kiwi_install_plan_make (r, "", &p, &err), 0);
    assert_int_equal (kiwi_install_dep_locations (&p, &src, &home, &err), 0);
    assert_true (kiwi_strv_contains (&src, "node_modules"));
    assert_true (kiwi_strv_contains (&src, ".pnp.cjs"));
    assert_false (kiwi_strv_contains (&src, "target"));
    assert_false (kiwi_strv_contains (&src, ".venv")); /* no Python install in this plan */
    assert_true (kiwi_strv_contains (&home, "go"));
    assert_true (kiwi_strv_contains (&home, ".kiwi"));
    assert_false (kiwi_strv_contains (&home, ".cargo"));
    kiwi_strv_free (&src);
    kiwi_strv_free (&home);
    kiwi_install_plan_clear (&p);
    /* every ecosystem's */
    assert_int_equal (kiwi_install_dep_locations (NULL, &src, &home, &err), 0);
    assert_true (kiwi_strv_contains (&src, ".venv"));
    assert_true (kiwi_strv_contains (&src, "vendor/bundle"));
    assert_true (kiwi_strv_contains (&home, ".cargo"));
    assert_true (kiwi_strv_contains (&home, ".m2"));
    kiwi_strv_free (&src);
    kiwi_strv_free (&home);
    repo_free (r);
}

/* `script` is Phase A's deletion of lifecycle scripts, then `cmd`. */
static void
assert_strip_then (const char *script, const char *cmd)
{
    const char *nl = strrchr (script, '\n');
    if (strncmp (script, "node -e '", 9) != 0 || nl == NULL || strcmp (nl + 1, cmd) != 0
        || strstr (script, "' -- preinstall,install,postinstall,prepublish,preprepare,prepare,postprepare\n") == NULL)
        fail_msg ("want the deletion of lifecycle scripts, then `%s`; got:\n%s", cmd, script);
}

/* The package's own lifecycle scripts leave Phase A for Phase B's prelude,
 * in the package manager's order; its other scripts and the dependencies'
 * install scripts are untouched. */
static void
test_node_root_scripts (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"scripts\": { \"test\": \"node --test\", \"prepare\": \"node gen.js\", "
                            "\"postinstall\": \"node setup.js\", \"build\": \"tsc\" }, "
                            "\"dependencies\": { \"a\": \"1\" } }");
    put (r, "package-lock.json", "{}");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "npm ci");
    assert_strip_then (p.steps[0].script, "npm ci --no-audit --no-fund");
    assert_string_equal (p.steps[0].prelude, "npm run postinstall && npm run prepare");
    assert_string_equal (p.verify_prelude, "(cd '/kiwi/src' && npm run postinstall && npm run prepare)\n");
    assert_non_null (strstr (p.steps[0].why, "the package's own postinstall, prepare run offline at the start of Phase B"));
    assert_string_equal (p.argv.v[0], "/bin/sh");
    /* a stalled download is retried long before Phase A's own timeout */
    assert_string_equal (kiwi_strv_env_get (&p.install_env, "npm_config_fetch_timeout"),
                         "npm_config_fetch_timeout=120000");
    assert_null (kiwi_strv_env_get (&p.verify_env, "npm_config_fetch_timeout"));
    kiwi_install_plan_clear (&p);
    /* pnpm and Yarn 1 run them with their own runner */
    put (r, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.steps[0].prelude, "pnpm run postinstall && pnpm run prepare");
    kiwi_install_plan_clear (&p);
    unlink_in (r, "pnpm-lock.yaml");
    put (r, "yarn.lock", "# yarn lockfile v1\n\n");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.steps[0].prelude, "yarn run postinstall && yarn run prepare");
    assert_strip_then (p.steps[0].script, "yarn install --frozen-lockfile --non-interactive");
    kiwi_install_plan_clear (&p);
    /* no lifecycle script (an empty one is none): nothing moves, and Phase
     * A still deletes them (whatever Kiwi made of the tree) */
    unlink_in (r, "yarn.lock");
    put (r, "package.json", "{ \"scripts\": { \"test\": \"node --test\", \"prepare\": \"\" }, "
                            "\"dependencies\": { \"a\": \"1\" } }");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_strip_then (p.steps[0].script, "npm ci --no-audit --no-fund");
    assert_null (p.steps[0].prelude);
    assert_null (p.verify_prelude);
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

/* The prelude of the Node.js project at r (one step). */
static char *
node_prelude (const char *r, char **why)
{
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    if (kiwi_install_plan_make (r, "node", &p, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_int_equal (p.n, 1);
    char *out = p.steps[0].prelude ? strdup (p.steps[0].prelude) : NULL;
    if (why)
        *why = strdup (p.steps[0].why);
    kiwi_install_plan_clear (&p);
    return out;
}

/* The prelude of the Node.js project at r is `want`. */
static void
expect_prelude (const char *r, const char *want)
{
    char *pre = node_prelude (r, NULL);
    if (pre == NULL || strcmp (pre, want) != 0)
        fail_msg ("prelude: got `%s`, want `%s`", pre ? pre : "(none)", want);
    free (pre);
}

/* Workspace members' own lifecycle scripts leave Phase A too (its
 * deletion covers every package.json) and run in Phase B's prelude: the
 * members the package manager declares (globs, `**`, `!`), a member after
 * those it depends on, each in its directory, before the root's; a hostile
 * directory name stays one shell word; what is not a member, hidden,
 * symlinked, in node_modules or outside the project is not run. */
static void
test_node_workspace_members (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"workspaces\": [\"packages/*\", \"!packages/skip\", \"../outside\", \"/abs\"], "
                            "\"scripts\": { \"postinstall\": \"node root.js\" }, \"dependencies\": { \"a\": \"1\" } }");
    put (r, "package-lock.json", "{}");
    put (r, "packages/a/package.json", "{ \"name\": \"@x/a\", \"dependencies\": { \"@x/b\": \"*\" }, "
                                       "\"scripts\": { \"postinstall\": \"node a.js\", \"test\": \"t\" } }");
    put (r, "packages/b/package.json", "{ \"name\": \"@x/b\", \"scripts\": { \"prepare\": \"tsc\" } }");
    put (r, "packages/c/package.json", "{ \"name\": \"c\", \"scripts\": { \"test\": \"t\" } }");
    put (r, "packages/it's $(x)/package.json", "{ \"name\": \"q\", \"scripts\": { \"install\": \"make\" } }");
    put (r, "packages/skip/package.json", "{ \"scripts\": { \"postinstall\": \"skip\" } }");
    put (r, "packages/.hidden/package.json", "{ \"scripts\": { \"postinstall\": \"hidden\" } }");
    put (r, "packages/node_modules/package.json", "{ \"scripts\": { \"postinstall\": \"nm\" } }");
    put (r, "tools/x/package.json", "{ \"scripts\": { \"postinstall\": \"not a member\" } }");
    put (r, "elsewhere/package.json", "{ \"scripts\": { \"postinstall\": \"through a symlink\" } }");
    char link[4200];
    snprintf (link, sizeof link, "%s/packages/link", r);
    assert_int_equal (symlink ("../elsewhere", link), 0);
    char *why = NULL;
    char *pre = node_prelude (r, &why);
    assert_non_null (pre);
    assert_string_equal (pre, "(cd 'packages/b' && npm run prepare) && (cd 'packages/a' && npm run postinstall) && "
                              "(cd 'packages/it'\\''s $(x)' && npm run install) && npm run postinstall");
    assert_non_null (strstr (why, "the package's own postinstall and 3 workspace members' lifecycle scripts run "
                                  "offline at the start of Phase B"));
    free (pre);
    free (why);

    /* Yarn 1: the object form, and a member's prepare is not Yarn's to run */
    put (r, "package.json", "{ \"workspaces\": { \"packages\": [\"packages/**\"] }, \"dependencies\": { \"a\": \"1\" } }");
    unlink_in (r, "package-lock.json");
    put (r, "yarn.lock", "# yarn lockfile v1\n\n");
    pre = node_prelude (r, &why);
    assert_string_equal (pre, "(cd 'packages/a' && yarn run postinstall) && (cd 'packages/it'\\''s $(x)' && yarn run "
                              "install) && (cd 'packages/skip' && yarn run postinstall)");
    assert_non_null (strstr (why, "; 3 workspace members' lifecycle scripts run offline at the start of Phase B"));
    free (pre);
    free (why);
    unlink_in (r, "yarn.lock");

    /* pnpm: pnpm-workspace.yaml's list (block or flow; quotes, comments);
     * package.json's `workspaces` is not pnpm's */
    put (r, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    put (r, "pnpm-workspace.yaml", "# the workspace\npackages:\n  # first\n  - 'packages/b'\n- \"tools/*\" # tools\n"
                                   "  - packages/c\n\ncatalog:\n  - packages/a\n");
    expect_prelude (r, "(cd 'packages/b' && pnpm run prepare) && (cd 'tools/x' && pnpm run postinstall)");
    put (r, "pnpm-workspace.yaml", "packages: [ 'packages/**', \"!**/skip\" ]\n");
    expect_prelude (r, "(cd 'packages/b' && pnpm run prepare) && (cd 'packages/a' && pnpm run postinstall) && "
                    "(cd 'packages/it'\\''s $(x)' && pnpm run install)");
    unlink_in (r, "pnpm-workspace.yaml");
    unlink_in (r, "pnpm-lock.yaml");

    /* a dependency cycle: path order; no members: the root's alone */
    put (r, "package-lock.json", "{}");
    put (r, "package.json", "{ \"workspaces\": [\"packages/a\", \"packages/b\"], \"dependencies\": { \"a\": \"1\" } }");
    put (r, "packages/b/package.json", "{ \"name\": \"@x/b\", \"dependencies\": { \"@x/a\": \"*\" }, "
                                       "\"scripts\": { \"prepare\": \"tsc\" } }");
    expect_prelude (r, "(cd 'packages/a' && npm run postinstall) && (cd 'packages/b' && npm run prepare)");
    put (r, "package.json", "{ \"scripts\": { \"prepare\": \"x\" }, \"dependencies\": { \"a\": \"1\" } }");
    expect_prelude (r, "npm run prepare");
    repo_free (r);
}

/* packageManager pnpm@V: that pnpm from the npm registry, first on both
 * phases' PATH; a version that is not plain never reaches the shell. */
static void
test_pnpm_pin (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"packageManager\": \"pnpm@9.15.9+sha512.abc\", \"dependencies\": { \"a\": \"1\" } }");
    put (r, "pnpm-lock.yaml", "lockfileVersion: '9.0'\n");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "pnpm install --frozen-lockfile");
    assert_non_null (strstr (p.steps[0].script, "'pnpm@9.15.9'"));
    assert_non_null (strstr (kiwi_strv_env_get (&p.verify_env, "PATH"), "/kiwi/home/.kiwi/pnpm/bin:"));
    assert_true (kiwi_strv_contains (&p.verify_env, "npm_config_manage_package_manager_versions=false"));
    kiwi_install_plan_clear (&p);
    put (r, "package.json", "{ \"packageManager\": \"pnpm@9';touch /x;'\", \"dependencies\": { \"a\": \"1\" } }");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_strip_then (p.steps[0].script, "pnpm install --frozen-lockfile");
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

/* bun.lock or bun.lockb (no other lockfile) or packageManager bun@V: bun
 * from the npm registry's binary package (V, else the newest) into
 * ~/.kiwi/bun with shims in ~/.kiwi/bin, first on both phases' PATH, then
 * bun install --frozen-lockfile; the lockfiles are the install's input. */
static void
test_bun (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"dependencies\": { \"ms\": \"2.1.3\" }, \"scripts\": { \"postinstall\": \"x\" } }");
    put (r, "bun.lock", "{\n  \"lockfileVersion\": 1,\n}\n");
    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "bun install --frozen-lockfile");
    assert_int_equal (p.n, 1);
    assert_int_equal (p.steps[0].eco, KIWI_ECO_BUN);
    assert_true (p.steps[0].locked);
    assert_non_null (strstr (p.steps[0].why, "bun.lock"));
    static const char *const in_script[] = { "npm install --prefix /kiwi/home/.kiwi/bun ", "--ignore-scripts",
                                             "\"@oven/bun-linux-$a\"\n", "a=x64-baseline",
                                             "> /kiwi/home/.kiwi/bin/bun ", "> /kiwi/home/.kiwi/bin/bunx " };
    for (size_t i = 0; i < sizeof in_script / sizeof *in_script; i++)
        if (strstr (p.steps[0].script, in_script[i]) == NULL)
            fail_msg ("no `%s` in:\n%s", in_script[i], p.steps[0].script);
    assert_strip_then (p.steps[0].script, "bun install --frozen-lockfile");
    assert_string_equal (p.steps[0].prelude, "bun run postinstall");
    const char *envs[] = { kiwi_strv_env_get (&p.verify_env, "PATH"), kiwi_strv_env_get (&p.install_env, "PATH") };
    for (size_t i = 0; i < 2; i++)
        assert_int_equal (strncmp (envs[i], "PATH=/kiwi/home/.kiwi/bin:", 26), 0); /* first */
    assert_true (kiwi_strv_contains (&p.install_env, "BUN_INSTALL_CACHE_DIR=/kiwi/tmp/bun-cache")
                 && kiwi_strv_contains (&p.install_env, "npm_config_cache=/kiwi/tmp/npm-cache")
                 && kiwi_strv_contains (&p.verify_env, "npm_config_offline=true"));
    kiwi_strv files = KIWI_STRV_INIT;
    assert_int_equal (kiwi_install_hashed_files (r, &p, &files, &err), 0);
    assert_true (kiwi_strv_contains (&files, "bun.lock"));
    kiwi_strv_free (&files);
    kiwi_install_plan_clear (&p);

    /* the binary lockfile; a pinned version; a version that is not plain */
    unlink (strcat (strcpy ((char[4096]) { 0 }, r), "/bun.lock"));
    put (r, "bun.lockb", "#!/usr/bin/env bun\nbun-lockfile-format-v0\n");
    put (r, "package.json", "{ \"packageManager\": \"bun@1.2.3\", \"dependencies\": { \"ms\": \"2.1.3\" } }");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "bun install --frozen-lockfile");
    assert_non_null (strstr (p.steps[0].script, "\"@oven/bun-linux-$a@1.2.3\"\n"));
    assert_non_null (strstr (p.steps[0].why, "packageManager bun@1.2.3"));
    kiwi_install_plan_clear (&p);
    put (r, "package.json", "{ \"packageManager\": \"bun@1';touch /x;'\", \"dependencies\": { \"ms\": \"2\" } }");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_non_null (strstr (p.steps[0].script, "\"@oven/bun-linux-$a\"\n"));
    assert_null (strstr (p.steps[0].script, "touch"));
    kiwi_install_plan_clear (&p);

    /* beside npm's lockfile, npm's wins and says bun's is ignored */
    put (r, "package.json", "{ \"dependencies\": { \"ms\": \"2.1.3\" } }");
    put (r, "package-lock.json", "{}");
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_string_equal (p.display, "npm ci");
    assert_string_equal (p.steps[0].why, "package-lock.json (bun.lockb ignored)");
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

/* The key: the image by digest and the environment Kiwi sets are in it;
 * two repositories with one input and different other files share it. */
static void
test_cache_key_input (void **state)
{
    char *a = repo_new (), *b = repo_new ();
    const char *pj = "{ \"scripts\": { \"postinstall\": \"touch planted-pass\" }, "
                     "\"dependencies\": { \"is-number\": \"7.0.0\" } }";
    put (a, "package.json", pj);
    put (b, "package.json", pj);
    put (a, "package-lock.json", "{ \"lockfileVersion\": 3 }");
    put (b, "package-lock.json", "{ \"lockfileVersion\": 3 }");
    put (a, "src/secret.txt", "a's source\n");
    put (b, "test.sh", "test -f planted-pass\n");
    char ka[65], kb[65], k[65];
    key_with (a, "sha256:1", NULL, ka);
    key_with (b, "sha256:1", NULL, kb);
    assert_string_equal (ka, kb);
    key_with (a, "sha256:2", NULL, k); /* the same tag, another image */
    assert_string_not_equal (ka, k);
    const char *proxy[] = { "HTTPS_PROXY=http://proxy.example:3128", NULL };
    key_with (a, "sha256:1", proxy, k);
    assert_string_not_equal (ka, k);
    const char *ca1[] = { "kiwi-ca-bundle-sha256=00", NULL }, *ca2[] = { "kiwi-ca-bundle-sha256=01", NULL };
    char kc[65];
    key_with (a, "sha256:1", ca1, k);
    key_with (a, "sha256:1", ca2, kc);
    assert_string_not_equal (k, kc);
    /* a patch file the install applies is input */
    put (a, "patches/is-number+7.0.0.patch", "--- a\n");
    key_with (a, "sha256:1", NULL, k);
    assert_string_not_equal (ka, k);
    repo_free (a);
    repo_free (b);
}

static void
test_cache_key (void **state)
{
    /* the SHA-256 underneath, against FIPS 180-4's examples */
    kiwi_sha256 h;
    unsigned char d[32];
    char hex[65];
    kiwi_sha256_init (&h);
    kiwi_sha256_update (&h, "abc", 3);
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, hex);
    assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    kiwi_sha256_init (&h);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t i = 0; i < strlen (two); i++) /* byte by byte: the streaming path */
        kiwi_sha256_update (&h, two + i, 1);
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, hex);
    assert_string_equal (hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    char *r = repo_new ();
    put (r, "package.json", "{ \"dependencies\": { \"is-number\": \"7.0.0\" } }");
    put (r, "package-lock.json", "{ \"lockfileVersion\": 3 }");
    put (r, "packages/a/package.json", "{ \"name\": \"a\" }");
    put (r, "node_modules/x/package.json", "{}");
    put (r, "README.md", "hello\n");
    char k1[65], k2[65];
    key_of (r, "node", "kiwi/node:22", "docker", k1);
    key_of (r, "node", "kiwi/node:22", "docker", k2);
    assert_string_equal (k1, k2);
    assert_int_equal (strlen (k1), 64);
    put (r, "README.md", "changed\n");
    key_of (r, "node", "kiwi/node:22", "docker", k2);
    assert_string_equal (k1, k2); /* not a dependency file */
    put (r, "node_modules/x/package.json", "{ \"v\": 2 }");
    key_of (r, "node", "kiwi/node:22", "docker", k2);
    assert_string_equal (k1, k2); /* installed output is not an input */
    key_of (r, "node", "kiwi/node:20", "docker", k2);
    assert_string_not_equal (k1, k2);
    key_of (r, "node", "kiwi/node:22", "gvisor", k2);
    assert_string_not_equal (k1, k2);
    put (r, "packages/a/package.json", "{ \"name\": \"a\", \"dependencies\": { \"b\": \"1\" } }");
    key_of (r, "node", "kiwi/node:22", "docker", k2);
    assert_string_not_equal (k1, k2); /* a workspace member's manifest is */
    put (r, "package-lock.json", "{ \"lockfileVersion\": 3 } ");
    char k3[65];
    key_of (r, "node", "kiwi/node:22", "docker", k3);
    assert_string_not_equal (k2, k3); /* one byte of the lockfile */

    kiwi_install_plan p;
    kiwi_error_t err = NULL;
    kiwi_strv files = KIWI_STRV_INIT;
    assert_int_equal (kiwi_install_plan_make (r, "node", &p, &err), 0);
    assert_int_equal (kiwi_install_hashed_files (r, &p, &files, &err), 0);
    assert_int_equal (files.n, 3);
    assert_string_equal (files.v[0], "package-lock.json");
    assert_string_equal (files.v[1], "package.json");
    assert_string_equal (files.v[2], "packages/a/package.json");
    kiwi_strv_free (&files);
    kiwi_install_plan_clear (&p);
    repo_free (r);
}

static void
test_java_trust_source_matches_capture_copy (void **state)
{
    char *text = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__read_file (KIWI_SOURCE_DIR "/tests/fixtures/captured/KiwiTrust.java", 1 << 20, &text,
                                       NULL, &err),
                      0);
    assert_string_equal (text, kiwi_java_trust_source ());
    free (text);
}

/* ---------------------------------------------------------------- inspect */

static void
test_inspect_whole (void **state)
{
    char *r = repo_new ();
    put (r, "go.mod", "module x\n\ngo 1.19\n\nrequire github.com/google/go-cmp v0.5.9\n");
    put (r, "go.sum", "x\n");
    put (r, "web/package.json", "{ \"dependencies\": { \"a\": \"1\" } }");
    put (r, "web/package-lock.json", "{}");
    kiwi_inspect_request rq = { .root = r, .test_command = "go test ./...", .catalog = local, .driver = "docker" };
    kiwi_inspection in;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    assert_string_equal (in.image.image, "kiwi/go:1.27");
    assert_string_equal (in.install.display, "go mod download");
    assert_int_equal (strlen (in.cache_key), 64);
    char *d = kiwi_inspection_describe (&in);
    assert_non_null (strstr (d, "left out: npm (web)"));
    free (d);
    kiwi_inspection_clear (&in);
    /* a repository without dependencies has no key: nothing to cache */
    char *r2 = repo_new ();
    put (r2, "test.js", "console.log(1)\n");
    rq.root = r2;
    rq.test_command = "node test.js";
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    assert_string_equal (in.install.display, "-");
    assert_string_equal (in.cache_key, "");
    kiwi_inspection_clear (&in);
    repo_free (r2);
    repo_free (r);
}

/* ------------------------------------------------- declared services */

static void
want_service (const char *yaml, bool workflow, int port, const char *service, const char *image)
{
    kiwi_service_port sp;
    memset (&sp, 0, sizeof sp);
    bool found = kiwi_service_for_port_in (yaml, "f.yml", workflow, port, &sp);
    if (service == NULL) {
        if (found)
            fail_msg ("port %d: found service %s, want none in:\n%s", port, sp.service, yaml);
        return;
    }
    if (!found || strcmp (sp.service, service) != 0 || strcmp (sp.image, image) != 0)
        fail_msg ("port %d: got %s (%s), want %s (%s) in:\n%s", port, found ? sp.service : "none", sp.image, service,
                  image, yaml);
    assert_string_equal (sp.file, "f.yml");
    assert_int_equal (sp.published, port);
}

static void
test_declared_services (void **state)
{
    const char *compose = "services:\n"
                          "  db:\n"
                          "    image: postgres:16\n"
                          "    ports:\n"
                          "      - \"5432:5432\"\n"
                          "  cache:\n"
                          "    image: redis:7\n"
                          "    ports: [ 6379:6379, \"127.0.0.1:9200:9200/tcp\" ]\n"
                          "  api:\n"
                          "    image: 'example/api'\n"
                          "    ports:\n"
                          "      - target: 80\n"
                          "        published: \"8080\"\n"
                          "      - target: 443\n"
                          "        published: 8443\n"
                          "  range:\n"
                          "    ports: [\"7000-7002:7000-7002\"]\n"
                          "  internal:\n"
                          "    image: mysql:8\n"
                          "    ports:\n"
                          "      - \"3306\"\n"
                          "      - 11211\n";
    want_service (compose, false, 5432, "db", "postgres:16");
    want_service (compose, false, 6379, "cache", "redis:7");
    want_service (compose, false, 9200, "cache", "redis:7");
    want_service (compose, false, 8080, "api", "example/api");
    want_service (compose, false, 8443, "api", "example/api");
    want_service (compose, false, 80, NULL, NULL); /* the container's, not the host's */
    want_service (compose, false, 7001, "range", "");
    want_service (compose, false, 3306, NULL, NULL); /* a container port alone: no known host port */
    want_service (compose, false, 11211, NULL, NULL);
    want_service (compose, false, 1234, NULL, NULL);
    /* a workflow's job services; a Compose file read as one declares none */
    const char *wf = "name: ci\non: push\njobs:\n  lint:\n    runs-on: x\n  test:\n    runs-on: ubuntu-latest\n"
                     "    services:\n      postgres:\n        image: postgres:16\n        ports:\n          - 5432:5432\n";
    want_service (wf, true, 5432, "postgres", "postgres:16");
    want_service (wf, false, 5432, NULL, NULL);
    want_service (compose, true, 5432, NULL, NULL);
    /* not YAML, not a mapping, aliases (kept as references, never expanded) */
    want_service ("services: [unclosed\n", false, 5432, NULL, NULL);
    want_service ("- 5432:5432\n", false, 5432, NULL, NULL);
    want_service ("", false, 5432, NULL, NULL);
    want_service ("x: &p [\"5432:5432\"]\nservices:\n  db:\n    ports: *p\n", false, 5432, "db", "");
    /* deep flow nesting is refused before libyaml sees it (its scanner's
     * time grows with the square of the depth: minutes for this one) */
    size_t deep = 200000;
    char *nest = malloc (2 * deep + 32);
    assert_non_null (nest);
    memcpy (nest, "services: ", 10);
    memset (nest + 10, '[', deep);
    memset (nest + 10 + deep, ']', deep);
    strcpy (nest + 10 + 2 * deep, "\n");
    want_service (nest, false, 5432, NULL, NULL);
    free (nest);
    /* a wide file: as many entries as 1 MiB holds, read in one pass */
    size_t wide = 200000;
    char *many = malloc (5 * wide + 64);
    assert_non_null (many);
    size_t at = (size_t) sprintf (many, "services:\n  db:\n    ports: [");
    for (size_t i = 0; i < wide; i++)
        at += (size_t) sprintf (many + at, "1:1, ");
    strcpy (many + at, "5432:5432]\n");
    want_service (many, false, 5432, "db", "");
    free (many);
    want_service ("services:\n  db:\n    ports: [[[[\"5432:5432\"]]]]\n", false, 5432, NULL, NULL); /* not a port entry */
    want_service ("services: {db: {image: pg, ports: [\"5432:5432\"]}}\n", false, 5432, "db", "pg");
    /* in a repository: the files named, no symlink followed */
    char *r = repo_new ();
    kiwi_service_port sp;
    assert_false (kiwi_service_for_port (r, 5432, &sp));
    put (r, ".github/workflows/ci.yml", wf);
    assert_true (kiwi_service_for_port (r, 5432, &sp));
    assert_string_equal (sp.file, ".github/workflows/ci.yml");
    put (r, "compose.yaml", compose);
    assert_true (kiwi_service_for_port (r, 5432, &sp));
    assert_string_equal (sp.file, "compose.yaml");
    assert_string_equal (sp.service, "db");
    char *outside = repo_new ();
    put (outside, "docker-compose.yml", compose);
    char *l = repo_new ();
    char target[PATH_MAX], link[PATH_MAX];
    snprintf (target, sizeof target, "%s/docker-compose.yml", outside);
    snprintf (link, sizeof link, "%s/docker-compose.yml", l);
    assert_int_equal (symlink (target, link), 0);
    assert_false (kiwi_service_for_port (l, 5432, &sp));
    repo_free (l);
    repo_free (outside);
    repo_free (r);
}

/* ----------------------------------------------------------- step 0 decides */

static void
decide (const char *root, const char *cmd, const kiwi_image_catalog *cat, const kiwi_classification *c,
        const char *phase, kiwi_step0_action want, const char *want_image, const char *reason_has)
{
    kiwi_inspect_request rq = { .root = root, .test_command = cmd, .catalog = cat, .driver = "docker" };
    kiwi_inspection in;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_inspect (&rq, &in, &err), 0);
    kiwi_step0_decision d;
    assert_int_equal (kiwi_step0_decide (c, phase, root, cmd, &in, cat, &d, &err), 0);
    if (d.action != want || (want_image && strcmp (d.swap_to.image, want_image) != 0)
        || (reason_has && strstr (d.reason, reason_has) == NULL))
        fail_msg ("%s/%s in %s: got %s %s (%s), want %s %s (%s)", kiwi_failure_class_str (c->cls), c->rule,
                  in.image.image, kiwi_step0_action_str (d.action), d.swap_to.image ? d.swap_to.image : "-", d.reason,
                  kiwi_step0_action_str (want), want_image ? want_image : "-", reason_has ? reason_has : "");
    kiwi_step0_decision_clear (&d);
    kiwi_inspection_clear (&in);
}

static kiwi_classification
cls (kiwi_failure_class k, const char *rule, const char *field, const char *value, const char *field2,
     const char *value2)
{
    kiwi_classification c;
    memset (&c, 0, sizeof c);
    c.cls = k;
    snprintf (c.rule, sizeof c.rule, "%s", rule);
    const char *f[2] = { field, field2 }, *v[2] = { value, value2 };
    for (int i = 0; i < 2; i++) {
        if (f[i] == NULL)
            continue;
        char *dst = strcmp (f[i], "host") == 0      ? c.host
                    : strcmp (f[i], "command") == 0 ? c.command
                    : strcmp (f[i], "runtime") == 0 ? c.runtime
                    : strcmp (f[i], "version") == 0 ? c.version
                    : strcmp (f[i], "port") == 0    ? c.port
                                                     : c.what;
        snprintf (dst, dst == c.port ? sizeof c.port : 32, "%s", v[i]);
    }
    return c;
}

static void
test_step0_decisions (void **state)
{
    char *r = repo_new ();
    put (r, "package.json", "{ \"scripts\": { \"test\": \"node --test\" } }");
    put (r, "requirements.txt", "pytest==8.3.3\n");
    put (r, "Makefile", "test:\n\tnode --test\n");
    kiwi_classification c;

    c = cls (KIWI_FAILURE_NONE, "", NULL, NULL, NULL, NULL);
    decide (r, "make test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");

    /* a missing runtime: the command's runtime, with its own markers */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "make-not-found", "command", "node", NULL, NULL);
    decide (r, "make test", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/node:22", "not in kiwi/python:3.11");
    /* the new runtime's project one level down brings its own version */
    char *w = repo_new ();
    put (w, "requirements.txt", "pytest==8.3.3\n");
    put (w, "Makefile", "test:\n\tcd web && node --test\n");
    put (w, "web/package.json", "{}");
    put (w, "web/.nvmrc", "18\n");
    decide (w, "make test", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/node:18", "web/.nvmrc asks for 18");
    repo_free (w);
    /* a missing dependency of the image's own runtime is honest */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "pytest", NULL, NULL);
    decide (r, "make test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "missing dependency");
    /* a command of no known runtime is honest */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "protoc", NULL, NULL);
    decide (r, "make test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");

    /* a developer tool the command Kiwi ran runs itself is a setup
     * failure: a named stop, no round (captured/tox-not-found.txt,
     * bun-not-found.txt, npm-script-missing-bin.txt) */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "tox", NULL, NULL);
    decide (r, "tox -e py", local, &c, "verify", KIWI_STEP0_STOP, NULL,
            "missing_tool: the test command runs `tox`, which kiwi/python:3.11 does not have");
    decide (r, "cd . && env CI=1 sh -c 'tox -e py'", local, &c, "verify", KIWI_STEP0_STOP, NULL, "missing_tool");
    decide (r, "tox -e py", local, &c, "install", KIWI_STEP0_HONEST, NULL, NULL);
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "bun", NULL, NULL);
    char *b = repo_new ();
    put (b, "package.json", "{ \"scripts\": { \"test\": \"bun test\" } }");
    decide (b, "bun test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "runs `bun`, which kiwi/node:22 does not have");
    decide (b, "npm test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "missing_tool");
    /* a tool package.json declares that the install did not provide */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "jest", NULL, NULL);
    put (b, "package.json",
         "{ \"scripts\": { \"test\": \"npm run unit\", \"unit\": \"jest --ci\" }, \"devDependencies\": { \"jest\": \"^29\" } }");
    decide (b, "npm test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "package.json declares but which is not there");
    /* ... but not one a test runs: the script runs node, the test jest */
    put (b, "package.json", "{ \"scripts\": { \"test\": \"node --test\" } }");
    decide (b, "npm test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "missing dependency");
    repo_free (b);
    /* a make recipe's command (make-not-found: make ran it) */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "make-not-found", "command", "nox", NULL, NULL);
    decide (r, "make test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "runs `nox` (a make recipe)");
    /* the test shelling out to protoc is the test's failure
     * (captured/pytest-runs-protoc.txt); a path is the repository's file */
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "protoc", NULL, NULL);
    decide (r, "pytest -q", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "./run-tests.sh", NULL, NULL);
    decide (r, "./run-tests.sh", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");

    /* a refused connection to a port the repository gives a service:
     * a named stop; to any other port, or not on the loopback: honest */
    char *sv = repo_new ();
    put (sv, "requirements.txt", "pytest==8.3.3\n");
    put (sv, "docker-compose.yml", "services:\n  db:\n    image: postgres:16\n    ports:\n      - \"5432:5432\"\n");
    c = cls (KIWI_FAILURE_NEEDS_SERVICE, "pytest-refused", "host", "127.0.0.1", "port", "5432");
    decide (sv, "pytest -q", local, &c, "verify", KIWI_STEP0_STOP, NULL,
            "needs_service: the tests connect to 127.0.0.1:5432, which docker-compose.yml gives to service `db` "
            "(postgres:16); Phase B starts no services");
    decide (sv, "pytest -q", local, &c, "install", KIWI_STEP0_HONEST, NULL, NULL);
    c = cls (KIWI_FAILURE_NEEDS_SERVICE, "pytest-refused", "host", "127.0.0.1", "port", "6379");
    decide (sv, "pytest -q", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "gives no service");
    c = cls (KIWI_FAILURE_NEEDS_SERVICE, "pytest-refused", "host", "10.1.2.3", "port", "5432");
    decide (sv, "pytest -q", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");
    c = cls (KIWI_FAILURE_NEEDS_SERVICE, "pytest-refused", "host", "127.0.0.1", NULL, NULL);
    decide (sv, "pytest -q", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "honest");
    repo_free (sv);

    /* the finding in words, for a failed install's reason */
    char words[700];
    c = cls (KIWI_FAILURE_NEEDS_NETWORK, "npm-resolve", "host", "registry.npmjs.org", "what", "is-number");
    kiwi_step0_finding (&c, "kiwi/node:22", words, sizeof words);
    assert_string_equal (words, "it could not reach registry.npmjs.org for is-number (npm-resolve)");
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "sh-not-found", "command", "pnpm", NULL, NULL);
    kiwi_step0_finding (&c, "kiwi/node:22", words, sizeof words);
    assert_string_equal (words, "it runs `pnpm`, which kiwi/node:22 does not have (sh-not-found)");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "uv-no-interpreter", "runtime", "python", "version", ">=3.12");
    kiwi_step0_finding (&c, NULL, words, sizeof words);
    assert_string_equal (words, "it needs python >=3.12 (uv-no-interpreter), which the image does not have");
    c = cls (KIWI_FAILURE_NONE, "", NULL, NULL, NULL, NULL);
    kiwi_step0_finding (&c, "kiwi/node:22", words, sizeof words);
    assert_string_equal (words, "");

    /* needs the network: stop, named; not during Phase A */
    c = cls (KIWI_FAILURE_NEEDS_NETWORK, "next-font-google", "host", "fonts.googleapis.com", "what", "Inter");
    decide (r, "npm run build", local, &c, "verify", KIWI_STEP0_STOP, NULL,
            "tried to reach fonts.googleapis.com for Inter while running `npm run build`");
    decide (r, "npm run build", local, &c, "install", KIWI_STEP0_HONEST, NULL, "Phase A has the network");

    /* a version the output does not state: the markers must ask for it */
    char *n = repo_new ();
    put (n, ".devcontainer/devcontainer.json", "{ \"image\": \"kiwi/node:20\" }");
    put (n, "package.json", "{}");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "node-unknown-builtin", "runtime", "node", "what", "node:sqlite");
    decide (n, "node --test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "nothing asks for another version");
    put (n, ".nvmrc", "20\n");
    decide (n, "node --test", local, &c, "verify", KIWI_STEP0_HONEST, NULL, "than kiwi/node:20");
    put (n, ".nvmrc", "22\n");
    decide (n, "node --test", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/node:22", ".nvmrc");
    repo_free (n);

    /* a version the output states: the newer Go swaps in; one no image
     * has: stop, named */
    n = repo_new ();
    put (n, "go.mod", "module x\n\ngo 1.22.1\n");
    put (n, ".devcontainer.json", "{ \"image\": \"kiwi/go:1.19\" }");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "go-invalid-version", "runtime", "go", "version", "1.22.1");
    decide (n, "go test ./...", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/go:1.27", "swap kiwi/go:1.19 -> kiwi/go:1.27");
    put (n, "go.mod", "module x\n\ngo 1.99.1\n");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "go-invalid-version", "runtime", "go", "version", "1.99.1");
    decide (n, "go test ./...", local, &c, "verify", KIWI_STEP0_STOP, NULL, "needs go >=1.99.1");
    kiwi_image_catalog *def = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_catalog_default (&def, &err), 0);
    /* the public catalogue has it: the same failure swaps there */
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "go-module-requires", "runtime", "go", "version", "1.21");
    put (n, "go.mod", "module x\n\ngo 1.21\n");
    put (n, ".devcontainer.json", "{ \"image\": \"golang:1.19\" }");
    decide (n, "go test ./...", def, &c, "verify", KIWI_STEP0_SWAP, "golang:1.27-bookworm", NULL);
    repo_free (n);
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "java-class-version", "runtime", "java", "version", "classfile:65");
    decide (r, "java -cp out Hello", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/java:21", "java >=21");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "java-class-version", "runtime", "java", "version", "classfile:69");
    decide (r, "java -cp out Hello", local, &c, "verify", KIWI_STEP0_STOP, NULL, "needs java >=25");
    /* Maven: the Enforcer's requireMavenVersion [3.9,) (Apache Commons'
     * parent) in the image with Maven 3.8: the one with Maven 3.9 */
    {
        char *m = repo_new ();
        put (m, "pom.xml", "<project/>");
        c = cls (KIWI_FAILURE_VERSION_MISMATCH, "maven-enforcer-version", "runtime", "maven", "version", "3.9");
        decide (m, "mvn -B test", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/java:21", "maven >=3.9");
        /* a plugin's prerequisite (gson's protobuf-maven-plugin): 3.9.6 */
        c = cls (KIWI_FAILURE_VERSION_MISMATCH, "maven-plugin-prerequisite", "runtime", "maven", "version", "3.9.6");
        decide (m, "mvn -B verify", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/java:21", "maven >=3.9.6");
        c = cls (KIWI_FAILURE_VERSION_MISMATCH, "maven-enforcer-version", "runtime", "maven", "version", "4.1");
        decide (m, "mvn -B test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "needs maven >=4.1");
        repo_free (m);
    }
    /* Rust: the devcontainer's 1.63 cannot build edition 2024, 1.96 can */
    n = repo_new ();
    put (n, "Cargo.toml", "[package]\nname = \"s\"\nversion = \"0.1.0\"\nedition = \"2024\"\n");
    put (n, ".devcontainer.json", "{ \"image\": \"kiwi/rust:1.63\" }");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "cargo-edition", "runtime", "rust", "version", "edition:2024");
    decide (n, "cargo test", local, &c, "verify", KIWI_STEP0_SWAP, "kiwi/rust:1.96", "rust >=1.85");
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "cargo-rust-version", "runtime", "rust", "version", "1.99");
    decide (n, "cargo test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "needs rust >=1.99");
    /* unstable features (captured/cargo-nightly-feature.txt): no image is
     * nightly, a stop whatever the image's version */
    c = cls (KIWI_FAILURE_VERSION_MISMATCH, "rust-nightly-feature", "runtime", "rust", "version", "nightly");
    decide (n, "cargo test", local, &c, "verify", KIWI_STEP0_STOP, NULL, "needs a nightly rust toolchain");
    repo_free (n);

    /* a runtime no image provides: stop, named */
    kiwi_image_catalog *small = NULL;
    const char *text = "base\t*\tkiwi/base:bookworm\npython\t3.11\tkiwi/python:3.11\n";
    assert_int_equal (kiwi_image_catalog_parse (text, strlen (text), "small", &small, &err), 0);
    c = cls (KIWI_FAILURE_MISSING_RUNTIME, "make-not-found", "command", "node", NULL, NULL);
    decide (r, "make test", small, &c, "verify", KIWI_STEP0_STOP, NULL, "no image in the catalogue");
    kiwi_image_catalog_free (small);
    kiwi_image_catalog_free (def);
    repo_free (r);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_version_ranges),
        cmocka_unit_test (test_catalogue),
        cmocka_unit_test (test_command_executable),
        cmocka_unit_test (test_jsonc),
        cmocka_unit_test (test_devcontainer),
        cmocka_unit_test (test_version_markers),
        cmocka_unit_test (test_version_markers_mise_and_gemspec),
        cmocka_unit_test (test_resolution_order),
        cmocka_unit_test (test_node_lockfiles),
        cmocka_unit_test (test_other_ecosystems), cmocka_unit_test (test_aside_folder_of_the_command),
        cmocka_unit_test (test_polyglot_plan),
        cmocka_unit_test (test_cache_key),
        cmocka_unit_test (test_install_input_table),
        cmocka_unit_test (test_dep_locations),
        cmocka_unit_test (test_cache_key_input),
        cmocka_unit_test (test_node_root_scripts),
        cmocka_unit_test (test_node_workspace_members),
        cmocka_unit_test (test_pnpm_pin),
        cmocka_unit_test (test_bun),
        cmocka_unit_test (test_python_test_runner),
        cmocka_unit_test (test_python_setup_cfg),
        cmocka_unit_test (test_maven_step),
        cmocka_unit_test (test_maven_wrapper_image),
        cmocka_unit_test (test_maven_warm_phase),
        cmocka_unit_test (test_python_ci_extras),
        cmocka_unit_test (test_java_trust_source_matches_capture_copy),
        cmocka_unit_test (test_inspect_whole),
        cmocka_unit_test (test_declared_services),
        cmocka_unit_test (test_step0_decisions),
    };
    return cmocka_run_group_tests_name ("inspect", tests, setup, teardown);
}
