/*
 * inspect-internal.h: helpers shared by the repository inspection modules
 * (inspect.c, image.c, lockfile.c, classify.c, step0.c). Not part of the
 * public interface; tests may include it.
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

#include "error.h"
#include "sha256.h"

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

/* True if root/rel is a regular file (symlinks are not followed). */
bool kiwi__has_file (const char *root, const char *rel);

/* True if root/rel is a directory (not a symlink). */
bool kiwi__has_dir (const char *root, const char *rel);

/* "a/b" from "a" and "b"; "b" when a is "" or ".". Caller frees. */
char *kiwi__path_join (const char *a, const char *b);

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

#endif
