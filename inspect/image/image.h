/*
 * image.h: which image a repository's sandbox uses. Nobody passes an image;
 * it is worked out from what the repository already declares, in order:
 *
 *   1. a devcontainer image (.devcontainer/devcontainer.json, then
 *      .devcontainer.json; JSON with comments and trailing commas);
 *   2. the test command's executable, after environment assignments and
 *      wrappers (env, timeout, nice, npx, pnpm exec, yarn, bash -c '...',
 *      cd dir && ...). It settles a polyglot repository: a Go service with a
 *      frontend has go.mod and package.json, only the command says which one
 *      is tested;
 *   3. marker files (go.mod, Cargo.toml, pom.xml, build.gradle, Gemfile,
 *      composer.json, Python's files, package.json, in that order, at the
 *      root first and then one directory down);
 *   4. the catalogue's base image.
 *
 * For 2 and 3 the runtime's version comes from the repository's version
 * markers (go.mod's go and toolchain, .nvmrc, .node-version, volta,
 * engines.node, .python-version, requires-python, Pipfile's python_version,
 * rust-toolchain(.toml), rust-version, .ruby-version, the Gemfile's ruby,
 * composer's php, the Java release in pom.xml or build.gradle,
 * .tool-versions) and picks a catalogue row; see docs/inspection.md.
 * Resolution always returns an image.
 *
 * The catalogue is a TAB-separated file (runtime, version, image; "*" is the
 * runtime's default; see ops/images/README.md). The default catalogue names
 * the public official images and is compiled in from
 * ops/images/catalog.default.tsv; tests use ops/images/catalog.local.tsv
 * (the images ops/images/build.sh builds) through a path.
 *
 * Ownership: a catalogue is owned by the caller (kiwi_image_catalog_free)
 * and immutable; entries it returns are borrowed from it. A resolution owns
 * its strings (kiwi_image_resolution_clear).
 */
#ifndef KIWI_SANDBOX_IMAGE_H
#define KIWI_SANDBOX_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* ----- the catalogue ----- */

typedef struct kiwi_image_entry {
    const char *runtime; /* base node python go rust ruby php java maven gradle ... */
    const char *version; /* "20", "3.11", "1.19", or "*" (the runtime's default) */
    const char *ref;     /* the image reference */
} kiwi_image_entry;

typedef struct kiwi_image_catalog kiwi_image_catalog;

/* The compiled-in default catalogue (the public official images). */
int kiwi_image_catalog_default (kiwi_image_catalog **out, kiwi_error_t *err);

/* A catalogue file. Errors name the file and line. An empty catalogue is an
 * error: resolution must always be able to return an image. */
int kiwi_image_catalog_load (const char *path, kiwi_image_catalog **out, kiwi_error_t *err);

/* Same from memory; `origin` names it in errors. */
int kiwi_image_catalog_parse (const char *text, size_t len, const char *origin, kiwi_image_catalog **out,
                              kiwi_error_t *err);

/* The worker's setting: `path` (KIWI_IMAGE_CATALOG) when set, else the
 * default catalogue. */
int kiwi_image_catalog_open (const char *path, kiwi_image_catalog **out, kiwi_error_t *err);

void kiwi_image_catalog_free (kiwi_image_catalog *c);

const char *kiwi_image_catalog_origin (const kiwi_image_catalog *c);
size_t kiwi_image_catalog_size (const kiwi_image_catalog *c);
const kiwi_image_entry *kiwi_image_catalog_get (const kiwi_image_catalog *c, size_t i);

/* The first row whose image is `ref`, or NULL. */
const kiwi_image_entry *kiwi_image_catalog_by_ref (const kiwi_image_catalog *c, const char *ref);

/* True if the catalogue has any row for `runtime`. */
bool kiwi_image_catalog_has_runtime (const kiwi_image_catalog *c, const char *runtime);

typedef enum {
    KIWI_PREFER_HIGHEST = 0, /* the newest version that satisfies (most runtimes) */
    KIWI_PREFER_LOWEST,      /* the oldest that satisfies (Java: a newer JDK breaks old builds) */
} kiwi_version_prefer;

/* The row for `runtime` that satisfies `requirement` (a version range, see
 * kiwi_version_req_allows; NULL or "" = the runtime's "*" row, else its
 * newest). When no row satisfies, the nearest one: the oldest above the
 * requirement, else the newest below; *satisfied (optional) says which.
 * NULL when the catalogue has no row for the runtime. */
const kiwi_image_entry *kiwi_image_catalog_choose (const kiwi_image_catalog *c, const char *runtime,
                                                   const char *requirement, kiwi_version_prefer prefer,
                                                   bool *satisfied);

/* ----- versions ----- */

/* Whether some version of the family `family` ("20", "3.11", "1.19.2")
 * satisfies `requirement`. Requirements are the union of npm ranges
 * (">=18", "^20", "~20.1", "20.x", ">=18 <21", "18 || 20", "1.2 - 1.4"),
 * Python specifiers (">=3.9,<3.13", "~=3.10", "==3.11.*"), RubyGems ("~> 3.1"),
 * Composer ("^8.1", "8.2.*", "^7.4 | ^8.0") and a bare version ("20",
 * "v20.11.0", "3.11"). Returns 1 or 0, and < 0 for a requirement that does
 * not parse. "!=" clauses are ignored. */
int kiwi_version_req_allows (const char *requirement, const char *family);

/* True if `requirement` parses. */
bool kiwi_version_req_valid (const char *requirement);

/* ----- executables and the test command ----- */

/* The runtime an executable belongs to ("pytest" -> "python", "npx" ->
 * "node", "./gradlew" -> "gradle", "python3.12" -> "python"), by its base
 * name; NULL for one that belongs to none (make, sh, ./run-tests.sh). */
const char *kiwi_runtime_of_executable (const char *exe);

typedef struct kiwi_command_info {
    char runtime[32]; /* "" when no simple command names a known runtime */
    char exe[128];    /* the executable that decided, e.g. "npm" */
    char version[32]; /* a version the executable names itself ("python3.12" -> "3.12"), or "" */
    char dir[256];    /* a directory the command cd's into before it ("web"), or "" */
} kiwi_command_info;

/* Reads a shell command the way the spec describes: each simple command of
 * a && || ; | list in turn, after NAME=value assignments and wrappers (env,
 * timeout, nice, nohup, time, exec, command, xvfb-run, stdbuf), into
 * bash/sh -c strings, skipping cd (whose directory is remembered) and
 * executables of no runtime; the first executable of a known runtime
 * decides. Fills *info; returns true when a runtime was found. */
bool kiwi_command_runtime (const char *command, kiwi_command_info *info);

/* Whether `exe` (by base name) is the executable of one of `command`'s
 * simple commands, read the same way (through assignments, wrappers and
 * sh -c strings; `sh SCRIPT` runs SCRIPT): the command itself runs it. */
bool kiwi_command_runs (const char *command, const char *exe);

/* The same for any of `exes` (base names, NULL-ended), and, when `args`
 * is not NULL, only where that simple command has one of `args`
 * (NULL-ended) as a whole word after its executable: whether
 * "./mvnw -B verify" runs mvnw with "verify" (true) and
 * "mvn -Dphase=verify test" (false). */
bool kiwi_command_runs_with (const char *command, const char *const *exes, const char *const *args);

/* ----- devcontainers ----- */

/* Removes // and block comments (outside strings) and trailing commas before
 * } or ], so that JSON with comments parses as JSON. *out is malloc'd. */
int kiwi_jsonc_to_json (const char *in, size_t len, char **out, size_t *out_len, kiwi_error_t *err);

/* The devcontainer image of the repository at `root`: the "image" of
 * .devcontainer/devcontainer.json, else of .devcontainer.json. Returns 1
 * with *image and *path (relative) set (owned), 0 when there is none (a
 * devcontainer that builds its image or does not parse has none; *note, if
 * non-NULL, then says why, owned), < 0 on allocation failure. */
int kiwi_devcontainer_image (const char *root, char **image, char **path, char **note, kiwi_error_t *err);

/* The runtime an image reference suggests when the catalogue does not know
 * it ("mcr.microsoft.com/devcontainers/typescript-node:20" -> "node");
 * NULL when it suggests none (a base OS, a "universal" image). */
const char *kiwi_runtime_of_image_ref (const char *ref);

/* ----- version markers ----- */

/* The version requirement the repository declares for `runtime`, read in
 * `dir` (relative to root; "" = the root) and then at the root. Returns 1
 * with *requirement ("22", ">=18 <21", ">=1.21") and *from (the file, e.g.
 * "web/.nvmrc") set and owned, 0 when none is declared, < 0 on allocation
 * failure. *prefer says how to pick among satisfying rows. */
int kiwi_version_markers (const char *root, const char *dir, const char *runtime, char **requirement, char **from,
                          kiwi_version_prefer *prefer, kiwi_error_t *err);

/* ----- resolution ----- */

#define KIWI_IMAGE_SOURCES(X)                                                                                \
    X (KIWI_IMAGE_FROM_DEVCONTAINER, "devcontainer")                                                         \
    X (KIWI_IMAGE_FROM_COMMAND, "command")                                                                   \
    X (KIWI_IMAGE_FROM_MARKERS, "markers")                                                                   \
    X (KIWI_IMAGE_FROM_DEFAULT, "default")                                                                   \
    X (KIWI_IMAGE_FROM_SWAP, "swap")

typedef enum {
#define KIWI__IS_ENUM(name, str) name,
    KIWI_IMAGE_SOURCES (KIWI__IS_ENUM)
#undef KIWI__IS_ENUM
} kiwi_image_source;

const char *kiwi_image_source_str (kiwi_image_source s);

typedef struct kiwi_image_resolution {
    char *image;       /* the image reference (never NULL after success) */
    char *runtime;     /* its runtime per the catalogue (or the reference); "" when unknown */
    char *requirement; /* the version requirement used, or "" */
    char *requirement_from; /* where it came from ("go.mod", "command"), or "" */
    char *project_dir; /* the directory the runtime was found in ("" = root) */
    kiwi_image_source source;
    bool satisfied;    /* false: no catalogue row satisfies the requirement (nearest taken) */
    char *reason;      /* one line for people: why this image */
} kiwi_image_resolution;

/* Resolves the image for the repository at `root` and `test_command` (may
 * be NULL). Fails only on allocation failure or an empty catalogue. */
int kiwi_image_resolve (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                        kiwi_image_resolution *out, kiwi_error_t *err);

/* The same without the devcontainer step, for a devcontainer image that
 * cannot be had (not pulled: `why` says so, and the reason carries it): the
 * test command, then the markers, then the base image decide. */
int kiwi_image_resolve_past_devcontainer (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                                          const char *why, kiwi_image_resolution *out, kiwi_error_t *err);

/* An image for `runtime` with the repository's own version markers, as a
 * swap would pick it (source KIWI_IMAGE_FROM_SWAP). `requirement` (may be
 * NULL) overrides the markers. Returns 1 and fills *out, 0 when the
 * catalogue has no row for the runtime. */
int kiwi_image_for_runtime (const char *root, const char *dir, const char *runtime, const char *requirement,
                            const kiwi_image_catalog *cat, kiwi_image_resolution *out, kiwi_error_t *err);

void kiwi_image_resolution_clear (kiwi_image_resolution *r);

/* A version wish the catalogue could not answer, in one line for events
 * and results: "`.python-version` asks for python 3.13, which no image in
 * the catalogue has; kiwi/python:3.11 ran instead". NULL when nothing asked
 * for a version or the image has it (or on allocation failure). Caller
 * frees. */
char *kiwi_image_wish_note (const kiwi_image_resolution *r);

#endif
