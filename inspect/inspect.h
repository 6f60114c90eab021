/*
 * inspect.h: knowing a repository before anything runs in a sandbox: the
 * image both phases use (image.h), Phase A's command and the settings each
 * phase needs (lockfile.h), and the install cache key. This is step 2 of a
 * task (clone, inspect, install, step 0, rounds); step0.h does step 3 and 4.
 *
 *   kiwi_inspect_request rq = { .root = dir, .test_command = "npm test",
 *                               .catalog = cat, .driver = "docker" };
 *   kiwi_inspection in;
 *   if (kiwi_inspect (&rq, &in, &err) < 0) ...
 *   in.image.image              "kiwi/node:22"
 *   in.install.argv             {"npm", "ci", "--no-audit", "--no-fund"} (empty: Phase A skipped)
 *   in.install.install_env      Phase A's extra_env
 *   in.install.verify_env       Phase B's (and the session's) extra_env
 *   in.cache_key                what Phase A's snapshot is cached under
 *   in.input                    the files Phase A receives (and the key hashes)
 *
 * Everything read from the repository is untrusted: files are read with
 * size bounds and never through symlinks, and nothing in the tree is run.
 *
 * Ownership: a kiwi_inspection owns everything in it
 * (kiwi_inspection_clear); the request's pointers are borrowed.
 */
#ifndef KIWI_SANDBOX_INSPECT_H
#define KIWI_SANDBOX_INSPECT_H

#include "common/error.h"
#include "inspect/image/image.h"
#include "inspect/lockfile/lockfile.h"

typedef struct kiwi_inspect_request {
    const char *root;                /* the repository's working tree on the worker */
    const char *test_command;        /* the task's test command (may be NULL) */
    const kiwi_image_catalog *catalog;
    const char *driver;              /* the sandbox driver's name, part of the cache key */
    /* the image's Id (dockerd's /images/<name>/json), part of the cache key:
     * *id owned by the caller. NULL, or a failure: "" (the tag alone) */
    int (*image_id) (void *ud, const char *image, char **id, kiwi_error_t *err);
    void *image_id_ud;
    const char *const *kiwi_env;     /* kiwi_phase_install_key_env(), part of the cache key, or NULL */
} kiwi_inspect_request;

typedef struct kiwi_inspection {
    kiwi_image_resolution image;
    kiwi_install_plan install;
    char cache_key[65];              /* kiwi_install_cache_key(); "" when Phase A is skipped */
    char *image_id;                  /* the image by digest, "" when unknown */
    kiwi_strv input;                 /* the install's input (kiwi_install_hashed_files): Phase A gets these */
} kiwi_inspection;

/* Inspects the repository: image resolution in the spec's order, then the
 * install plan for that image's runtime, then the cache key. */
int kiwi_inspect (const kiwi_inspect_request *rq, kiwi_inspection *out, kiwi_error_t *err);

/* The same for an image already chosen (a swap): the install plan and key
 * follow `image` (its resolution is copied). */
int kiwi_inspect_with_image (const kiwi_inspect_request *rq, const kiwi_image_resolution *image,
                             kiwi_inspection *out, kiwi_error_t *err);

void kiwi_inspection_clear (kiwi_inspection *in);

/* One line for logs and reports: "kiwi/node:22 (command: ...); install: npm ci". Caller frees. */
char *kiwi_inspection_describe (const kiwi_inspection *in);

#endif
