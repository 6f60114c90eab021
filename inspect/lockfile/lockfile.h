/*
 * lockfile.h: Phase A's command, chosen by lockfile, and the install cache
 * key.
 *
 * Detection looks at the repository root and one directory down. Each
 * project found is an install step of one ecosystem:
 *
 *   npm         package-lock.json / npm-shrinkwrap.json  npm ci
 *   pnpm        pnpm-lock.yaml                           pnpm install --frozen-lockfile
 *   yarn        yarn.lock (v1)                           yarn install --frozen-lockfile
 *   yarn-berry  yarn.lock with __metadata, .yarnrc.yml   yarn install --immutable (through corepack)
 *   bun         bun.lock / bun.lockb                     bun install --frozen-lockfile (bun from the npm registry)
 *   go          go.mod with requirements                 go mod download
 *   uv          uv.lock                                  uv sync --frozen --no-install-project
 *   poetry      poetry.lock (or [tool.poetry])           poetry install --no-root
 *   pipenv      Pipfile.lock (or Pipfile)                pipenv sync --dev
 *   pip         requirements*.txt, pyproject, setup.py   a .venv and pip install -r ... / -e .
 *   cargo       Cargo.lock with registry/git packages    cargo fetch --locked
 *   bundler     Gemfile(.lock)                           bundle install (deployment, frozen)
 *   composer    composer.json(.lock)                     composer install
 *   maven       pom.xml (./mvnw when present)            mvn dependency:go-offline + warm-up
 *   gradle      build.gradle(.kts) (./gradlew)           resolve every configuration + warm-up
 *
 * Where several Node.js lockfiles exist, package.json's packageManager
 * decides, else pnpm-lock.yaml, yarn.lock, npm-shrinkwrap.json,
 * package-lock.json, bun.lock, bun.lockb in that order: running the wrong one fails outright.
 * A repository whose manifests declare no dependencies has no steps, and
 * Phase A is skipped.
 *
 * Polyglot repositories: only the ecosystems of the image's runtime are
 * installed (a Node.js image cannot run `go mod download`); the others are
 * listed in `left_out`. When the image's runtime is unknown (a devcontainer
 * image the catalogue does not know) every ecosystem is installed.
 *
 * Each plan also carries the environment both phases need so that what
 * Phase A installs is found offline by Phase B (GOPATH under /kiwi/home,
 * GOPROXY=off, CARGO_NET_OFFLINE, npm_config_offline, PIP_NO_INDEX, the
 * project's .venv on PATH, Maven's offline settings, ...). See
 * docs/inspection.md for every setting and why.
 *
 * Ownership: a plan owns everything in it (kiwi_install_plan_clear).
 */
#ifndef KIWI_SANDBOX_LOCKFILE_H
#define KIWI_SANDBOX_LOCKFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "common/strv.h"

/* name (the runtime whose images run each is in the runtime table,
 * inspect/runtime.c) */
#define KIWI_ECOSYSTEMS(X)                                                                                \
    X (KIWI_ECO_NPM, "npm")                                                                               \
    X (KIWI_ECO_PNPM, "pnpm")                                                                             \
    X (KIWI_ECO_YARN, "yarn")                                                                             \
    X (KIWI_ECO_YARN_BERRY, "yarn-berry")                                                                 \
    X (KIWI_ECO_BUN, "bun")                                                                               \
    X (KIWI_ECO_GO, "go")                                                                                 \
    X (KIWI_ECO_UV, "uv")                                                                                 \
    X (KIWI_ECO_POETRY, "poetry")                                                                         \
    X (KIWI_ECO_PIPENV, "pipenv")                                                                         \
    X (KIWI_ECO_PIP, "pip")                                                                               \
    X (KIWI_ECO_CARGO, "cargo")                                                                           \
    X (KIWI_ECO_BUNDLER, "bundler")                                                                       \
    X (KIWI_ECO_COMPOSER, "composer")                                                                     \
    X (KIWI_ECO_MAVEN, "maven")                                                                           \
    X (KIWI_ECO_GRADLE, "gradle")

typedef enum {
#define KIWI__ECO_ENUM(name, str) name,
    KIWI_ECOSYSTEMS (KIWI__ECO_ENUM)
#undef KIWI__ECO_ENUM
} kiwi_ecosystem;

typedef struct kiwi_install_step {
    kiwi_ecosystem eco;
    char *dir;      /* relative to the root; "" for the root */
    char *summary;  /* the command as people read it: "npm ci", "uv sync --frozen" */
    char *script;   /* the shell text that runs it, in dir */
    char *why;      /* which files decided: "package-lock.json", "packageManager pnpm@10 (yarn.lock ignored)" */
    bool locked;    /* a lockfile pins the versions (frozen/locked mode) */
    bool workspace; /* Go: the module is in a go.work workspace (go.work in its folder or above), where
                       Go refuses -mod=mod */
    char *prelude;  /* shell text run offline at the start of Phase B, in dir: the part of the install that
                       needs the repository's own code (Poetry's root package, npm's root
                       postinstall); NULL: none */
} kiwi_install_step;

typedef struct kiwi_install_plan {
    kiwi_install_step *steps;
    size_t n;
    kiwi_strv argv;        /* Phase A's command; empty: no dependencies, Phase A skipped */
    kiwi_strv install_env; /* "K=V" for Phase A (non-secret) */
    kiwi_strv verify_env;  /* "K=V" for Phase B and the session sandbox */
    kiwi_strv left_out;    /* polyglot: "go (.): the image runs node" */
    char *display;         /* one line: "npm ci", "go mod download; npm ci (web)", or "-" when skipped */
    char *verify_prelude;  /* every step's prelude, each in its directory, for the start of every Phase B
                              run (kiwi_verify_request.prelude); NULL: none */
} kiwi_install_plan;

/* Every install step the repository at `root` has, for every ecosystem
 * (steps[] owned by the caller; free each with kiwi_install_step_clear). */
int kiwi_install_detect (const char *root, kiwi_install_step **steps, size_t *n, kiwi_error_t *err);

void kiwi_install_step_clear (kiwi_install_step *s);

/* The plan for an image of `runtime` ("" unknown: everything), for a test
 * command run at the root: a folder of its own for documentation, a
 * website, benchmarks, fuzzing or examples is left out (left_out says so). */
int kiwi_install_plan_make (const char *root, const char *runtime, kiwi_install_plan *plan, kiwi_error_t *err);

void kiwi_install_plan_clear (kiwi_install_plan *plan);

/* The install's input: the files whose contents decide what Phase A
 * installs (manifests, lockfiles, workspace members' manifests, the package
 * manager's project config, patch directories, wrapper scripts; the
 * runtime table in runtime.c, docs/inspection.md), as paths relative to
 * root in the order they are hashed (bytewise sorted), appended to *files. Phase A's
 * /kiwi/src holds exactly these and nothing else of the tree. */
int kiwi_install_hashed_files (const char *root, const kiwi_install_plan *plan, kiwi_strv *files,
                               kiwi_error_t *err);

/* Where the plan's installs leave what they installed, appended to *src
 * (under /kiwi/src: a name without "/" at any depth, "node_modules"; one
 * with "/" below any project directory, "vendor/bundle") and *home (under
 * /kiwi/home: ".cargo", ".m2", "go"). The snapshot keeps these only. A NULL
 * plan gives every ecosystem's. */
int kiwi_install_dep_locations (const kiwi_install_plan *plan, kiwi_strv *src, kiwi_strv *home, kiwi_error_t *err);

/* What besides the input decides an install. */
typedef struct kiwi_install_key_input {
    const char *image;               /* the image reference */
    const char *image_id;            /* dockerd's image Id (sha256:...), "" when it could not be asked */
    const char *driver;              /* the sandbox driver (docker, gvisor) */
    const char *const *kiwi_env;     /* the environment Kiwi sets in Phase A (kiwi_phase_install_key_env:
                                        proxies, CA variables, the CA bundle's hash; and the worker's
                                        kiwi_plan_key_env: the egress setting, each private registry's
                                        host, prefix and credential scope hash), or NULL */
} kiwi_install_key_input;

/* The install cache key, defined here and only here (docs/inspection.md):
 * SHA-256, as 64 hex digits, of
 *
 *   "kiwi-install-v2\n"
 *   "driver=" driver "\n"              the sandbox driver (docker, gvisor)
 *   "image=" image "\n"                the image reference
 *   "image-id=" id "\n"                the image by digest
 *   "argv=" arg "\0" ... "\n"          Phase A's command, every argument
 *   "env=" K=V "\0" ... "\n"           Phase A's inspection settings
 *   "kiwi-env=" K=V "\0" ... "\n"      the environment Kiwi sets (proxy, CA, private
 *                                      registries' scopes: never a credential)
 *   then per input file (`input`, or kiwi_install_hashed_files when NULL):
 *   "file=" path "\n" size "\n" SHA-256(bytes) "\n"    (32 raw bytes)
 *
 * so a different image, command, runtime, proxy, CA bundle or any input
 * byte is a different key, the same input on any worker is the same key,
 * and no file outside the input is part of it (Phase A never sees one). */
int kiwi_install_cache_key (const char *root, const kiwi_install_plan *plan, const kiwi_install_key_input *k,
                            const kiwi_strv *input, char out[65], kiwi_error_t *err);

/* The Java program Phase A runs to make a trust store (PKCS12) of the JDK's
 * own certificates and the CA bundle at /kiwi/ca, for Maven and Gradle
 * (tests/fixtures/captured/KiwiTrust.java is the same text). */
const char *kiwi_java_trust_source (void);

#endif
