/*
 * repo.h: a task's repository, fetched on the worker side.
 *
 * A mirror per repository under <state>/mirrors/<sha256(url)>.git is fetched
 * (not re-cloned) for every task on it, serialised by a lock file so that
 * concurrent tasks share it. Each fetch goes first into
 * <sha256(url)>.incoming (borrowing the mirror's objects), bounded while git
 * writes it; the mirror takes it only once it is complete and within the
 * mirror's ceiling, so a refused or failed fetch leaves the mirror as it was
 * (or absent) and nothing else behind. The task's checkout is a work tree that holds
 * no git metadata at all: its git directory is "<workspace>.git", beside it
 * (a bare repository borrowing the mirror's objects through alternates), so
 * nothing the model writes or the repository carries can become git
 * configuration, a hook or a repository git would discover. Every git call
 * goes through one wrapper (repo-internal.h): explicit GIT_DIR/GIT_WORK_TREE,
 * no system or global config, hooks and fsmonitor off, no external diff,
 * textconv or filter drivers, no attribute conversions (the checkout is
 * byte for byte the commit's blobs).
 *
 * https URLs get the git token from the worker's environment as an HTTP
 * header in git's environment (never in argv, never in a config file, never
 * in a sandbox); ssh URLs use the worker's ssh set-up with BatchMode; local
 * paths and file:// work too unless a protocol list leaves them out. Fetches
 * are bounded in time, the mirror in size while git writes it, and the
 * checkout in bytes and files before anything is written.
 */
#ifndef KIWI_WORKER_REPO_H
#define KIWI_WORKER_REPO_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/strv.h"

/* Error codes (kiwi_error_code) of repository failures. */
enum {
    KIWI_REPO_E_FETCH = KIWI_ERR_RANGE_REPO, /* the fetch failed (network, auth, no such repository) */
    KIWI_REPO_E_NO_REF,                      /* the ref does not exist in the repository */
    KIWI_REPO_E_TOO_LARGE,                   /* the mirror or the checkout exceeds its ceiling */
    KIWI_REPO_E_TIMEOUT,                     /* the fetch took too long */
    KIWI_REPO_E_UNSAFE,                      /* the tree carries git metadata (a `.git` entry) */
};

typedef struct kiwi_repo_opts {
    const char *state_dir;
    const char *token;          /* for https, or NULL */
    int64_t timeout_ms;
    int64_t max_mb;             /* the mirror's ceiling (KIWI_CLONE_MAX_MB), held as git writes; 0: none */
    int64_t max_checkout_mb;    /* the checkout's blob bytes, summed before writing; 0: none */
    int64_t max_checkout_files; /* the checkout's entries (files and links); 0: none */
    const char *protocols;      /* colon-separated protocols git may use ("https:ssh"); NULL: all */
} kiwi_repo_opts;

/* Fetches `url` into its mirror and checks `ref` out into `workspace` (which
 * must not exist), its git directory at "<workspace>.git" (which must not
 * exist either). A fetch that would take the mirror past max_mb is stopped
 * as git writes past it (no file git writes may pass what the ceiling
 * leaves, and the fetch's directory is measured every 100 ms):
 * KIWI_REPO_E_TOO_LARGE naming the ceiling and the setting, what git wrote
 * removed, the mirror as it was. One that takes longer than timeout_ms is
 * KIWI_REPO_E_TIMEOUT naming KIWI_CLONE_TIMEOUT, removed the same way.
 * The commit's tree is measured before it is checked out: over
 * max_checkout_mb or max_checkout_files, nothing is written and the error is
 * KIWI_REPO_E_TOO_LARGE naming the figures and the settings. A tree with a
 * `.git` entry (any case, at any depth) is KIWI_REPO_E_UNSAFE. *commit
 * receives the full commit id (caller frees). The caller removes both
 * directories (kiwi_repo_remove) whatever the outcome. */
int kiwi_repo_checkout (const kiwi_repo_opts *o, const char *url, const char *ref, const char *workspace,
                        char **commit, kiwi_error_t *err);


/* The version the repository's tags give `commit` (a full commit id that
 * kiwi_repo_checkout of `url` returned), as setuptools-scm's default
 * scheme writes it for a tree without .git: the nearest tag reachable from
 * the commit whose name holds a version (git describe --tags), its release
 * numbers N[.N...] after any prefix ("v", "release-"); "N.N.N" when the
 * commit is the tag's, else the last number plus one and ".devD", D the
 * commits since the tag ("2.5.0" three commits on: "2.5.1.dev3"). Only
 * digits and dots whatever a tag says; "" when no tag gives one (or git
 * could not tell). < 0 only when the mirror's lock cannot be taken. */
int kiwi_repo_version (const kiwi_repo_opts *o, const char *url, const char *commit, char *version, size_t cap,
                       kiwi_error_t *err);

/* The committer time of `commit` (as kiwi_repo_version's) in the mirror
 * of `url`, ISO 8601 ("2026-08-20T08:01:14-05:00"), into iso; "" when git
 * could not tell or it is not of that form. < 0 only when the mirror's
 * lock cannot be taken. */
int kiwi_repo_commit_time (const kiwi_repo_opts *o, const char *url, const char *commit, char *iso, size_t cap,
                           kiwi_error_t *err);

/* The version of kiwi_repo_version from `git describe --tags --long`'s
 * line (TAG-D-gHASH) into version ("" when the tag holds none). */
void kiwi_repo_version_from_describe (const char *describe, char *version, size_t cap);

/* Where the clean tree of a checkout goes: "<workspace>.clean". */
void kiwi_repo_clean_dir (const char *workspace, char *buf, size_t cap);

/* Removes a directory tree the worker made (rm -rf, one file system). */
void kiwi_repo_discard (const char *dir);

/* Removes a checkout: the work tree, its git directory and its clean tree. */
void kiwi_repo_remove (const char *workspace);

/* The diff of the checkout's work tree against `commit` (git diff --binary,
 * what `git apply --binary` on the commit reproduces): changed, deleted and
 * new files, modes and binary changes. Untracked files the repository's
 * .gitignore ignores are not carried. `workspace` is the checkout's top.
 * Caller frees. */
int kiwi_repo_diff (const char *workspace, const char *commit, char **diff, kiwi_error_t *err);

/* The untracked files of the work tree that the diff does not carry (those
 * .gitignore ignores), at most `max`, appended to *out. */
int kiwi_repo_not_carried (const char *workspace, size_t max, kiwi_strv *out, kiwi_error_t *err);

/* Writes `commit` of the checkout at `workspace`, checked out afresh, plus
 * `diff` applied (git apply --binary) into `dest` (which must not exist):
 * the tree a consumer of the result gets. */
int kiwi_repo_materialise (const char *workspace, const char *commit, const char *diff, const char *dest,
                           kiwi_error_t *err);

/* The id of the checkout's current tree (staged or not), for the verify
 * cache. `workspace` is the checkout's top. Caller frees. */
int kiwi_repo_tree_id (const char *workspace, char **tree, kiwi_error_t *err);

#endif
