/*
 * repo.h: a task's repository, fetched on the worker side.
 *
 * A mirror per repository under <state>/mirrors/<sha256(url)>.git is fetched
 * (not re-cloned) for every task on it, serialised by a lock file so that
 * concurrent tasks share it; the task's workspace is a clone of the mirror
 * at the task's ref, detached. https URLs get the git token from the
 * worker's environment as an HTTP header in git's environment (never in
 * argv, never in the workspace's config, never in a sandbox); ssh URLs use
 * the worker's ssh set-up with BatchMode; local paths and file:// work too.
 * Fetches are bounded in time and the mirror in size.
 */
#ifndef KIWI_WORKER_REPO_H
#define KIWI_WORKER_REPO_H

#include <stdint.h>

#include "error.h"

/* Error codes (kiwi_error_code) of repository failures. */
enum {
    KIWI_REPO_E_FETCH = 200,     /* the fetch failed (network, auth, no such repository) */
    KIWI_REPO_E_NO_REF = 201,    /* the ref does not exist in the repository */
    KIWI_REPO_E_TOO_LARGE = 202, /* the mirror exceeds its size ceiling */
    KIWI_REPO_E_TIMEOUT = 203,   /* the fetch took too long */
};

typedef struct kiwi_repo_opts {
    const char *state_dir;
    const char *token;        /* for https, or NULL */
    int64_t timeout_ms;
    int64_t max_mb;
} kiwi_repo_opts;

/* Fetches `url` into its mirror and checks `ref` out into `workspace` (which
 * must not exist). *commit receives the full commit id (caller frees). */
int kiwi_repo_checkout (const kiwi_repo_opts *o, const char *url, const char *ref, const char *workspace,
                        char **commit, kiwi_error_t *err);

/* The unified diff of the workspace's working tree against `commit`,
 * new files included, binary changes as git binary patches. Caller frees. */
int kiwi_repo_diff (const char *workspace, const char *commit, char **diff, kiwi_error_t *err);

/* The id of the workspace's current tree (staged or not), for the verify
 * cache. Caller frees. */
int kiwi_repo_tree_id (const char *workspace, char **tree, kiwi_error_t *err);

#endif
