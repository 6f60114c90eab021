/*
 * wspath.h: files of the task's workspace, as the model names them.
 *
 * Every path the model gives is confined to the workspace: it is
 * normalised first (empty and "." components collapsed, trailing slashes
 * dropped), then refused when absolute, with a ".." component, with a
 * component git takes for its own directory (".git" in any case, also with
 * trailing dots or spaces, at any depth), or naming nothing; it is opened by
 * walking one component at a time from the workspace's directory descriptor
 * with O_NOFOLLOW, so a symlink (planted by the repository or by a command)
 * never leads outside. Listings and searches skip ".git" entries too.
 */
#ifndef KIWI_WORKER_WSPATH_H
#define KIWI_WORKER_WSPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/strv.h"

#define KIWI_WS_PATH_MAX 4096
#define KIWI_WS_FILE_MAX (8u * 1024 * 1024) /* the largest file read whole, written or edited */

/* Normalises a model-given path into out (cap bytes) as described above.
 * With allow_root, "" and paths that collapse to nothing ("." or "./")
 * give "" (the workspace's root); without, they are refused. */
int kiwi_ws_normalise (const char *path, int allow_root, char *out, size_t cap, kiwi_error_t *err);

/* Checks a model-given path that names a file or directory (not the
 * root); the error says what is wrong with it. */
int kiwi_ws_check (const char *path, kiwi_error_t *err);

/* Reads at most `max` bytes from `offset` of a regular file. *truncated
 * tells whether more followed. Caller frees *out. */
int kiwi_ws_read (const char *root, const char *path, size_t offset, size_t max, char **out, size_t *len,
                  int *truncated, kiwi_error_t *err);

/* Writes a whole file (creating parent directories), replacing it. */
int kiwi_ws_write (const char *root, const char *path, const char *data, size_t len, kiwi_error_t *err);

/* Replaces exactly one occurrence of `old` by `new` (an error if there are
 * none or several). */
int kiwi_ws_edit (const char *root, const char *path, const char *old, const char *new_text, kiwi_error_t *err);

/* Lists files under `dir` ("" = the root), recursively to `depth`, at most
 * `max` entries, directories with a trailing '/'; symlinks are listed as
 * such and never followed. */
int kiwi_ws_list (const char *root, const char *dir, int depth, size_t max, kiwi_strv *out, kiwi_error_t *err);

#define KIWI_WS_PATTERN_MAX 1000           /* bytes of a search pattern or a glob */
#define KIWI_WS_SEARCH_FILE_MAX (1024 * 1024) /* larger files are not searched */

/* What a search looks for: `pattern` as plain text, or with `regex` as a
 * POSIX extended regular expression (back-references refused); in files
 * whose name matches `glob` (fnmatch; against the path from the root when
 * it holds a '/'; NULL: every file); at most `max` hits. */
typedef struct kiwi_ws_search_opts {
    const char *pattern;
    bool regex;
    bool ignore_case;
    const char *glob;
    size_t max;
} kiwi_ws_search_opts;

/* Lines matching under `path` (a file or a directory; "" = the root):
 * "path:line:text" (text cut at 300 bytes), binary files, files larger
 * than KIWI_WS_SEARCH_FILE_MAX and node_modules skipped in a directory.
 * *cut tells whether hits were left out (the cap, or the walk's bound). */
int kiwi_ws_search (const char *root, const char *path, const kiwi_ws_search_opts *o, kiwi_strv *out, int *cut,
                    kiwi_error_t *err);

/* Files (and symlinks, "name -> (symlink)") under `dir` whose name matches
 * `glob` (as in a search), at most `max`; *cut tells whether some were
 * left out. */
int kiwi_ws_find (const char *root, const char *dir, const char *glob, size_t max, kiwi_strv *out, int *cut,
                  kiwi_error_t *err);

#endif
