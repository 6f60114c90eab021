/*
 * runtime.h: the runtime table, one row per runtime (node, python, go,
 * rust, ruby, php, java, maven, gradle) holding everything image
 * resolution (image-*.c) and install planning (lockfile*.c) know about it:
 * the executables a test command may run, the image names that tell it,
 * its marker files, its version reader, the environment its tools need,
 * its package managers, the install's hashed input and where an install
 * leaves what it installed. Internal to the inspection modules; tests may
 * include it.
 *
 * The rows are in the order marker files and install planners are tried
 * (docs/inspection.md says why Node.js comes last). The table is constant
 * data: nothing in it is owned or freed.
 */
#ifndef KIWI_SANDBOX_RUNTIME_H
#define KIWI_SANDBOX_RUNTIME_H

#include <stdbool.h>

#include "inspect/image/image.h"
#include "inspect/inspect-internal.h"
#include "inspect/lockfile/lockfile.h"

/* Which phase a setting is for: A (install), B (verify) or both. */
enum { KIWI__PHASE_A = 1, KIWI__PHASE_B = 2, KIWI__PHASE_AB = 3 };

typedef struct kiwi__env_setting {
    int phases;
    const char *kv; /* "K=V"; NULL ends a list */
} kiwi__env_setting;

/* A package manager under its runtime: the settings of its install, on top
 * of the runtime's. */
typedef struct kiwi__package_manager {
    kiwi_ecosystem eco;
    const kiwi__env_setting *env;
} kiwi__package_manager;

/* A version requirement a reader found: owned by whoever holds it. */
typedef struct kiwi__marker {
    char *req;
    char *from;
    kiwi_version_prefer prefer;
} kiwi__marker;

/* Reads the version the project in `dir` asks for into *m. Returns true
 * when one was found (m->req and m->from set; NULL in either: out of
 * memory). */
typedef bool (*kiwi__version_reader) (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);

/* Adds the install steps the project in `dir` has (is_root: the
 * repository's root). Returns < 0 with *err on failure. */
typedef int (*kiwi__detector) (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s,
                               kiwi_error_t *err);

typedef struct kiwi__runtime {
    const char *name;                 /* the catalogue's runtime name */
    const char *const *executables;   /* base names a test command runs */
    /* substrings of an image's name that say it is this runtime's ("=go":
     * the whole name); image_rank orders rows for a name with several */
    const char *const *image_names;
    int image_rank;
    const char *const *markers;       /* files that say a directory is a project of it, in order */
    kiwi__version_reader version;
    kiwi_version_prefer prefer;       /* how to pick among satisfying catalogue rows */
    const kiwi__env_setting *env;     /* where its tools write, and that they stay offline in Phase B */
    const kiwi__package_manager *pms; /* its package managers (eco order), ended by a NULL env */
    kiwi__detector detect;
    /* one directory down, the detector is skipped when the root has
     * `root_manifest` and the directory lacks `sub_lock` (a member of the
     * root's workspace), or when the root has a step of a runtime with the
     * same `family` */
    const char *root_manifest, *sub_lock, *family;
    /* the install's input (a base name glob at any depth; "x/" a directory
     * whole) and where installs leave their output (src: under /kiwi/src,
     * a name at any depth or a path below a project; home: under
     * /kiwi/home) */
    const char *const *input, *const *src, *const *home;
    /* shell run first in every Phase B of the runtime's images, whatever
     * the steps (NULL: none); it must not fail */
    const char *verify_start;
} kiwi__runtime;

extern const kiwi__runtime kiwi__runtimes[];
extern const size_t kiwi__n_runtimes;

/* The row named `name`, or NULL. */
const kiwi__runtime *kiwi__runtime_get (const char *name);

/* The row of the runtime whose images run `e`'s tools. */
const kiwi__runtime *kiwi__runtime_of_eco (kiwi_ecosystem e);

/* The package manager row of `e`. */
const kiwi__package_manager *kiwi__package_manager_of (kiwi_ecosystem e);

/* Kiwi's own shims under /kiwi/home, kept whatever the ecosystem. */
extern const char *const kiwi__kiwi_home[];

/* The version readers and detectors the table names (inspect/image/markers.c,
 * the planners of inspect/lockfile/). */
bool kiwi__version_node (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_python (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_go (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_rust (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_ruby (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_php (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_java (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_maven (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);
bool kiwi__version_gradle (kiwi__inspect_ctx *ctx, const char *dir, kiwi__marker *m);

int kiwi__detect_node (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_python (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
/* When `exe`'s base name is tox or nox: the plan's pip step (pydeps) at
 * `project_dir` (NULL: the root) also installs it into the .venv and keeps
 * a wheelhouse of the step's requirements, the runner itself and the build
 * backend's basics in .venv/kiwi-wheels, for the environments the runner
 * makes offline in Phase B (the plan's PIP_FIND_LINKS). Nothing for another
 * executable, or a plan without such a step (0 either way). */
int kiwi__python_test_runner (kiwi_install_step *steps, size_t n, const char *project_dir, const char *exe,
                              kiwi_error_t *err);
int kiwi__detect_go (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_rust (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_ruby (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_php (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_maven (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);
int kiwi__detect_gradle (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err);

#endif
