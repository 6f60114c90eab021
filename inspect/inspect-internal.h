/*
 * inspect-internal.h: helpers shared by the repository inspection modules
 * (inspect.c, image-*.c, lockfile*.c, runtime.c, classify.c, step0.c). Not
 * part of the public interface; tests may include it.
 *
 * Everything here reads a repository that is untrusted input: files are read
 * with a size bound, never through a symlink (a symlinked manifest is
 * treated as absent), and text is parsed without trusting its shape.
 */
#ifndef KIWI_SANDBOX_INSPECT_INTERNAL_H
#define KIWI_SANDBOX_INSPECT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"
#include "common/strv.h"
#include "inspect/image/image.h"
#include "inspect/lockfile/lockfile.h"
#include "common/sha256.h"

/* Largest manifest or lockfile read whole (lockfiles of big monorepos reach
 * tens of MB; they are hashed in a stream, see kiwi__sha256_file). */
#define KIWI__MANIFEST_MAX ((size_t) 4 << 20)

/* Reads a regular file (not a symlink) of at most `max` bytes into a
 * NUL-terminated buffer (*out, owned). Returns < 0 with *err on a missing,
 * unreadable, non-regular or too large file. */
int kiwi__read_file (const char *path, size_t max, char **out, size_t *len, kiwi_error_t *err);

/* The same for root/rel; returns NULL when absent or unreadable (no error:
 * inspection treats an unreadable manifest as an absent one). */
char *kiwi__read_rel (const char *root, const char *rel, size_t *len);

/* kiwi__read_rel with another bound than a manifest's (a workflow's). */
char *kiwi__read_rel_max (const char *root, const char *rel, size_t max, size_t *len);

/* True if root/rel is a regular file (symlinks are not followed). */
bool kiwi__has_file (const char *root, const char *rel);

/* True if root/rel is a directory (not a symlink). */
bool kiwi__has_dir (const char *root, const char *rel);

/* "a/b" from "a" and "b"; "b" when a is "" or ".". Caller frees. */
char *kiwi__path_join (const char *a, const char *b);

/* The repository's GitHub Actions workflows: the names of the .yml and
 * .yaml files of root/.github/workflows (neither folder a symlink; hidden
 * names left out), sorted, at most `max` into names (each the caller's to
 * free). Returns how many. */
#define KIWI__WORKFLOWS_MAX 64
#define KIWI__WORKFLOW_FILE_MAX ((size_t) 1 << 20)
size_t kiwi__workflow_names (const char *root, char **names, size_t max);

/* The first line of `s` with surrounding blanks removed, copied into dst. */
void kiwi__first_line (const char *s, char *dst, size_t cap);

/* Directories one level below root that inspection looks into, sorted
 * (hidden ones, dependency and build output skipped), as a NULL-terminated
 * vector (kiwi__strv_free_raw). NULL on allocation failure. */
char **kiwi__subdirs (const char *root);

/* ----- a minimal TOML reader: enough for pyproject.toml, Cargo.toml,
 * rust-toolchain.toml, Pipfile and uv.lock headers ----- */

/* The raw value of `key` in table `[section]` ("" = before any header).
 * Strings are returned without quotes; arrays and inline tables as their
 * text from the opening to the matching closing bracket (across lines).
 * Returns a malloc'd string, or NULL when absent. */
char *kiwi__toml_get (const char *text, const char *section, const char *key);

/* True if table `[section]` exists and has at least one key. */
bool kiwi__toml_table_nonempty (const char *text, const char *section);

/* The keys of table `[section]`, in order (malloc'd strings appended to a
 * NULL-terminated vector the caller frees with kiwi__strv_free_raw). */
char **kiwi__toml_keys (const char *text, const char *section);
void kiwi__strv_free_raw (char **v);

/* True if the TOML array text ("[ ... ]") has at least one element. */
bool kiwi__toml_array_nonempty (const char *array_text);

/* ----- SHA-256 (common/sha256.h) for the install cache key ----- */

/* Feeds a regular file (not a symlink) into `s` in chunks. Returns < 0
 * with *err when it cannot be read. */
int kiwi__sha256_file (kiwi_sha256 *s, const char *path, uint64_t *size, kiwi_error_t *err);

/* ----- the per-inspection context: every manifest read (and parsed) once
 * for the image choice, the install plan and the cache key ----- */

typedef struct kiwi__inspect_ctx kiwi__inspect_ctx;

/* A context for the repository at `root` (borrowed: it must outlive the
 * context). NULL on allocation failure. */
kiwi__inspect_ctx *kiwi__ctx_new (const char *root);
void kiwi__ctx_free (kiwi__inspect_ctx *ctx);

const char *kiwi__ctx_root (const kiwi__inspect_ctx *ctx);

/* The task's test command (borrowed: it must outlive the context), for the
 * plans that run part of it in Phase A (Maven's warm-up phase); NULL when
 * none was set. */
void kiwi__ctx_set_command (kiwi__inspect_ctx *ctx, const char *command);
const char *kiwi__ctx_command (const kiwi__inspect_ctx *ctx);

/* dir/file's text as kiwi__read_rel reads it, read on the first call and
 * kept: borrowed, valid until kiwi__ctx_free; NULL when absent or
 * unreadable. *len (optional) is its length. */
const char *kiwi__ctx_text (kiwi__inspect_ctx *ctx, const char *dir, const char *file, size_t *len);

/* The text of `rel` if the context has already read it (nothing is read
 * here), else NULL. */
const char *kiwi__ctx_cached (const kiwi__inspect_ctx *ctx, const char *rel, size_t *len);

/* An owned copy of the same (for readers that cut it up), or NULL. */
char *kiwi__ctx_copy (kiwi__inspect_ctx *ctx, const char *dir, const char *file);

/* dir/file parsed as JSON (once): borrowed, NULL when absent or not JSON. */
json_t *kiwi__ctx_json (kiwi__inspect_ctx *ctx, const char *dir, const char *file);

/* Fails with ENOMEM (in *err) when the context failed; 0 otherwise. */
int kiwi__ctx_check (const kiwi__inspect_ctx *ctx, kiwi_error_t *err);

/* Where Phase A keeps its scratch files: emptied before the snapshot, so
 * nothing here reaches Phase B. */
#define KIWI__SCRATCH "/kiwi/tmp/kiwi"
#define KIWI__TRUSTSTORE KIWI__SCRATCH "/truststore.p12"
/* Kiwi's shims (corepack's yarn), kept for Phase B. */
#define KIWI__SHIM_DIR "/kiwi/home/.kiwi/bin"
/* Where a pinned pnpm is installed (packageManager pnpm@V). */
#define KIWI__PNPM_PIN_DIR "/kiwi/home/.kiwi/pnpm"
/* A Python step's wheelhouse for tox's or nox's environments, in the
 * project's folder (inside .venv, a dependency location). */
#define KIWI__WHEELHOUSE ".venv/kiwi-wheels"
/* Where bun is installed (its npm package of the platform's binary). */
#define KIWI__BUN_DIR "/kiwi/home/.kiwi/bun"

/* ----- install steps as the planners (lockfile-*.c) add them ----- */

typedef struct kiwi__steps {
    kiwi_install_step *v;
    size_t n;
} kiwi__steps;

/* Appends a step (the strings copied). */
int kiwi__add_step (kiwi__steps *s, kiwi_ecosystem eco, const char *dir, bool locked, const char *summary,
                    const char *script, const char *why, kiwi_error_t *err);

/* Sets the last step's prelude (copied). */
int kiwi__set_prelude (kiwi__steps *s, const char *prelude, kiwi_error_t *err);

/* True if root/dir/file is a regular file. */
bool kiwi__has_in (const char *root, const char *dir, const char *file);

/* The workspace members of the Node.js project at `dir` (relative to the
 * context's root) as its package manager declares them: pnpm-workspace.yaml's
 * `packages` when `pnpm`, else package.json's `workspaces`. Their
 * directories, relative to `dir`, are appended to `out`, a member after the
 * members it depends on (inspect/lockfile/node-members.c). A project without
 * members appends nothing. Returns < 0 with *err on allocation failure. */
int kiwi__node_members (kiwi__inspect_ctx *ctx, const char *dir, bool pnpm, kiwi_strv *out, kiwi_error_t *err);

/* ----- what image resolution and install planning do with a context ----- */

/* kiwi_image_resolve (`refused` NULL) or kiwi_image_resolve_past_devcontainer
 * (`refused`: why the devcontainer is skipped) over the context. */
int kiwi__image_resolve_ctx (kiwi__inspect_ctx *ctx, const char *test_command, const kiwi_image_catalog *cat,
                             const char *refused, kiwi_image_resolution *out, kiwi_error_t *err);
/* kiwi_version_markers over the context. */
int kiwi__version_markers_ctx (kiwi__inspect_ctx *ctx, const char *dir, const char *runtime, char **requirement,
                               char **from, kiwi_version_prefer *prefer, kiwi_error_t *err);

/* kiwi_install_plan_make, kiwi_install_hashed_files and
 * kiwi_install_cache_key over the context (the key hashes the files the
 * context holds from memory, the others from the tree). The plan leaves out
 * a folder of its own for documentation, a website, benchmarks, fuzzing or
 * examples unless it is `project_dir` (the folder the test command runs
 * in; NULL: the root) or holds it. `test_exe` is the executable of the
 * test command that decided its runtime (kiwi_command_info's exe, or NULL):
 * tox or nox is installed for it (kiwi__python_test_runner). */
int kiwi__install_plan_make_ctx (kiwi__inspect_ctx *ctx, const char *runtime, const char *project_dir,
                                 const char *test_exe, kiwi_install_plan *plan, kiwi_error_t *err);
int kiwi__install_hashed_files_ctx (kiwi__inspect_ctx *ctx, const kiwi_install_plan *plan, kiwi_strv *files,
                                    kiwi_error_t *err);
int kiwi__install_cache_key_ctx (kiwi__inspect_ctx *ctx, const kiwi_install_plan *plan,
                                 const kiwi_install_key_input *k, const kiwi_strv *input, char out[65],
                                 kiwi_error_t *err);

/* Compares two version families ("1.21" < "1.22"); unparsable ones are 0. */
int kiwi__family_cmp (const char *a, const char *b);

#endif
