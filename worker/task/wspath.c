/*
 * wspath.c: workspace file access confined to the workspace (wspath.h).
 */
#include "worker/task/wspath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

#define MAX_FILE KIWI_WS_FILE_MAX

/* A component git would take for its own directory: `.git` in any case,
 * also with trailing dots or spaces (what case- or dot-insensitive file
 * systems make of it). */
static bool
is_dotgit (const char *c, size_t l)
{
    while (l > 4 && (c[l - 1] == '.' || c[l - 1] == ' '))
        l--;
    return l == 4 && strncasecmp (c, ".git", 4) == 0;
}

int
kiwi_ws_normalise (const char *path, int allow_root, char *out, size_t cap, kiwi_error_t *err)
{
    if (path == NULL || *path == '\0') {
        if (allow_root && cap > 0) {
            out[0] = '\0';
            return 0;
        }
        return kiwi_error_make (err, 0, "empty path");
    }
    size_t pl = strlen (path);
    if (pl > KIWI_WS_PATH_MAX || pl >= cap)
        return kiwi_error_make (err, 0, "path too long");
    if (path[0] == '/')
        return kiwi_error_make (err, 0, "`%s`: absolute paths are not allowed; give a path relative to the "
                                        "repository", path);
    size_t o = 0;
    for (const char *p = path; *p;) {
        size_t l = strcspn (p, "/");
        if (l == 0 || (l == 1 && p[0] == '.')) {
            /* empty or `.`: collapsed */
        } else if (l == 2 && p[0] == '.' && p[1] == '.') {
            return kiwi_error_make (err, 0, "`%s`: `..` is not allowed: paths stay inside the repository", path);
        } else if (is_dotgit (p, l)) {
            return kiwi_error_make (err, 0, "`%s`: the .git directory is not part of the workspace", path);
        } else if (l > 255) {
            return kiwi_error_make (err, 0, "`%s`: a component is too long", path);
        } else {
            if (o > 0)
                out[o++] = '/';
            memcpy (out + o, p, l);
            o += l;
        }
        p += l;
        while (*p == '/')
            p++;
    }
    out[o] = '\0';
    if (o == 0 && !allow_root)
        return kiwi_error_make (err, 0, "`%s`: names no file (empty after removing `.` and `/`)", path);
    return 0;
}

int
kiwi_ws_check (const char *path, kiwi_error_t *err)
{
    char norm[KIWI_WS_PATH_MAX + 1];
    return kiwi_ws_normalise (path, 0, norm, sizeof norm, err);
}

/* Opens the directory that holds the last component of `path`, walking
 * without following symlinks; *leaf points into path. With `create`,
 * missing directories are made. Returns a descriptor or -1. */
static int
open_parent (const char *root, const char *path, int create, const char **leaf, kiwi_error_t *err)
{
    int fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening the workspace"), -1;
    const char *p = path;
    for (;;) {
        size_t l = strcspn (p, "/");
        const char *next = p + l;
        while (*next == '/')
            next++;
        if (*next == '\0') {
            *leaf = p;
            return fd;
        }
        char comp[256];
        if (l >= sizeof comp) {
            close (fd);
            return kiwi_error_make (err, 0, "`%s`: a component is too long", path), -1;
        }
        memcpy (comp, p, l);
        comp[l] = '\0';
        int nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat (fd, comp, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                close (fd);
                return kiwi_error_make (err, e, "`%s`: creating `%s`", path, comp), -1;
            }
            nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        close (fd);
        if (nfd < 0) {
            if (e == ELOOP || e == ENOTDIR)
                return kiwi_error_make (err, 0, "`%s`: `%s` is a symlink or not a directory; not followed", path,
                                        comp),
                       -1;
            return kiwi_error_make (err, e, "`%s`", path), -1;
        }
        fd = nfd;
        p = next;
    }
}

static int
open_file (const char *root, const char *path, int flags, mode_t mode, kiwi_error_t *err)
{
    char trimmed[KIWI_WS_PATH_MAX + 1];
    if (kiwi_ws_normalise (path, 0, trimmed, sizeof trimmed, err) < 0)
        return -1;
    const char *leaf = NULL;
    cleanup_close int dfd = open_parent (root, trimmed, (flags & O_CREAT) != 0, &leaf, err);
    if (dfd < 0)
        return -1;
    int fd = openat (dfd, leaf, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == ELOOP)
            return kiwi_error_make (err, 0, "`%s` is a symlink; not followed", path), -1;
        return kiwi_error_make (err, errno, "`%s`", path), -1;
    }
    return fd;
}

int
kiwi_ws_read (const char *root, const char *path, size_t offset, size_t max, char **out, size_t *len, int *truncated,
              kiwi_error_t *err)
{
    cleanup_close int fd = open_file (root, path, O_RDONLY, 0, err);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode))
        return kiwi_error_make (err, 0, "`%s` is not a regular file", path);
    size_t size = (size_t) st.st_size;
    if (offset > size)
        offset = size;
    size_t want = size - offset < max ? size - offset : max;
    char *buf = malloc (want + 1);
    if (buf == NULL)
        return kiwi_error_make (err, ENOMEM, "reading `%s`", path);
    ssize_t n = pread (fd, buf, want, (off_t) offset);
    if (n < 0) {
        free (buf);
        return kiwi_error_make (err, errno, "reading `%s`", path);
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t) n;
    *truncated = offset + (size_t) n < size;
    return 0;
}

int
kiwi_ws_write (const char *root, const char *path, const char *data, size_t len, kiwi_error_t *err)
{
    if (len > MAX_FILE)
        return kiwi_error_make (err, 0, "`%s`: %zu bytes is more than a file may hold here (%u)", path, len, MAX_FILE);
    /* keep the mode of a file that exists */
    mode_t mode = 0644;
    {
        kiwi_error_t e = NULL;
        int fd = open_file (root, path, O_RDONLY, 0, &e);
        struct stat st;
        if (fd >= 0 && fstat (fd, &st) == 0)
            mode = st.st_mode & 0777;
        if (fd >= 0)
            close (fd);
        kiwi_error_free (&e);
    }
    cleanup_close int fd = open_file (root, path, O_WRONLY | O_CREAT | O_TRUNC, mode, err);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write (fd, data + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return kiwi_error_make (err, errno, "writing `%s`", path);
        }
        done += (size_t) w;
    }
    return 0;
}

int
kiwi_ws_edit (const char *root, const char *path, const char *old, const char *new_text, kiwi_error_t *err)
{
    if (old == NULL || *old == '\0')
        return kiwi_error_make (err, 0, "edit of `%s`: the text to replace is empty", path);
    cleanup_free char *data = NULL;
    size_t len = 0;
    int truncated = 0;
    if (kiwi_ws_read (root, path, 0, MAX_FILE, &data, &len, &truncated, err) < 0)
        return -1;
    if (truncated)
        return kiwi_error_make (err, 0, "edit of `%s`: the file is too large", path);
    char *first = strstr (data, old);
    if (first == NULL)
        return kiwi_error_make (err, 0, "edit of `%s`: the text to replace was not found", path);
    if (strstr (first + 1, old) != NULL)
        return kiwi_error_make (err, 0, "edit of `%s`: the text to replace occurs more than once; include more "
                                        "context",
                                path);
    size_t ol = strlen (old), nl = strlen (new_text);
    size_t pre = (size_t) (first - data);
    char *out = malloc (len - ol + nl + 1);
    if (out == NULL)
        return kiwi_error_make (err, ENOMEM, "edit of `%s`", path);
    memcpy (out, data, pre);
    memcpy (out + pre, new_text, nl);
    memcpy (out + pre + nl, first + ol, len - pre - ol);
    int rc = kiwi_ws_write (root, path, out, len - ol + nl, err);
    free (out);
    return rc;
}

/* What a walk visits at most, whatever the repository holds: a listing,
 * search or find past it stops and says it was cut. */
#define WALK_VISITS 200000

typedef struct {
    kiwi_strv *out;
    size_t max;
    int depth;
    const kiwi_ws_search_opts *search; /* NULL: a listing or a find */
    const char *glob;                  /* a find: names that match */
    const regex_t *re;                 /* a regular-expression search */
    size_t hits;
    size_t visits;
    int cut;
} walk_ctx;

/* Whether `rel` (its last component `name`) passes a glob: on the name, or
 * on the path from the root when the glob holds a '/'. */
static bool
glob_ok (const char *glob, const char *rel, const char *name)
{
    if (glob == NULL || *glob == '\0')
        return true;
    return strchr (glob, '/') ? fnmatch (glob, rel, FNM_PATHNAME | FNM_PERIOD) == 0
                              : fnmatch (glob, name, FNM_PERIOD) == 0;
}

static bool
line_matches (const walk_ctx *w, const char *line)
{
    if (w->re != NULL)
        return regexec (w->re, line, 0, NULL, 0) == 0;
    return w->search->ignore_case ? strcasestr (line, w->search->pattern) != NULL
                                  : strstr (line, w->search->pattern) != NULL;
}

/* Searches one open regular file (fd is taken). */
static void
grep_fd (int fd, const char *rel, walk_ctx *w)
{
    FILE *f = fdopen (fd, "r");
    if (f == NULL) {
        close (fd);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t ln = 0;
    while ((n = getline (&line, &cap, f)) >= 0) {
        ln++;
        if (memchr (line, '\0', (size_t) n) != NULL)
            break; /* binary */
        line[strcspn (line, "\n")] = '\0';
        if (!line_matches (w, line))
            continue;
        if (w->hits >= w->max) {
            w->cut = 1;
            break;
        }
        kiwi_strv_addf (w->out, "%s:%zu:%.300s", rel, ln, line);
        w->hits++;
    }
    free (line);
    fclose (f);
}

/* qsort's comparator for a vector of names (it is given pointers to them). */
static int
by_name (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static int
walk (int dfd, const char *prefix, int level, walk_ctx *w)
{
    DIR *dir = fdopendir (dfd);
    if (dir == NULL) {
        close (dfd);
        return 0;
    }
    /* sorted, so listings are stable */
    kiwi_strv names = KIWI_STRV_INIT;
    struct dirent *e;
    while ((e = readdir (dir)) != NULL)
        if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0
            && !is_dotgit (e->d_name, strlen (e->d_name)))
            kiwi_strv_add (&names, e->d_name);
    if (names.n > 1)
        qsort (names.v, names.n, sizeof (char *), by_name);
    for (size_t i = 0; i < names.n && !w->cut; i++) {
        if (w->search == NULL && w->out->n >= w->max) {
            w->cut = 1; /* a search knows it is cut only when one more line matches (grep_fd) */
            break;
        }
        if (++w->visits > WALK_VISITS) {
            w->cut = 1;
            break;
        }
        const char *name = names.v[i];
        struct stat st;
        if (fstatat (dirfd (dir), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        char rel[4096];
        snprintf (rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", name);
        bool listing = w->search == NULL && w->glob == NULL;
        if (S_ISDIR (st.st_mode)) {
            if (listing)
                kiwi_strv_addf (w->out, "%s/", rel);
            if (level + 1 < w->depth && strcmp (name, "node_modules") != 0) {
                int sub = openat (dirfd (dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0)
                    walk (sub, rel, level + 1, w);
            }
        } else if (S_ISLNK (st.st_mode)) {
            if (listing || (w->glob && glob_ok (w->glob, rel, name)))
                kiwi_strv_addf (w->out, "%s -> (symlink)", rel);
        } else if (S_ISREG (st.st_mode)) {
            if (w->search == NULL) {
                if (listing || glob_ok (w->glob, rel, name))
                    kiwi_strv_add (w->out, rel);
                continue;
            }
            if (st.st_size > KIWI_WS_SEARCH_FILE_MAX || !glob_ok (w->search->glob, rel, name))
                continue;
            int fd = openat (dirfd (dir), name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                grep_fd (fd, rel, w);
        }
    }
    kiwi_strv_free (&names);
    closedir (dir);
    return 0;
}

/* Opens `dir` ("" or "." = the root); *norm receives its normalised form. */
static int
open_dir (const char *root, const char *dir, char *norm, size_t cap, kiwi_error_t *err)
{
    if (kiwi_ws_normalise (dir, 1, norm, cap, err) < 0)
        return -1;
    if (*norm == '\0') {
        int fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return kiwi_error_make (err, errno, "opening the workspace");
        return fd;
    }
    return open_file (root, norm, O_RDONLY | O_DIRECTORY, 0, err);
}

int
kiwi_ws_list (const char *root, const char *dir, int depth, size_t max, kiwi_strv *out, kiwi_error_t *err)
{
    char prefix[KIWI_WS_PATH_MAX + 1];
    int fd = open_dir (root, dir, prefix, sizeof prefix, err);
    if (fd < 0)
        return -1;
    walk_ctx w = { .out = out, .max = max, .depth = depth > 0 ? depth : 1 };
    return walk (fd, prefix, 0, &w);
}

int
kiwi_ws_find (const char *root, const char *dir, const char *glob, size_t max, kiwi_strv *out, int *cut,
              kiwi_error_t *err)
{
    if (glob == NULL || *glob == '\0')
        return kiwi_error_make (err, 0, "find_files: empty glob");
    if (strlen (glob) > KIWI_WS_PATTERN_MAX)
        return kiwi_error_make (err, 0, "find_files: the glob is longer than %d bytes", KIWI_WS_PATTERN_MAX);
    char prefix[KIWI_WS_PATH_MAX + 1];
    int fd = open_dir (root, dir, prefix, sizeof prefix, err);
    if (fd < 0)
        return -1;
    walk_ctx w = { .out = out, .max = max, .depth = 32, .glob = glob };
    walk (fd, prefix, 0, &w);
    *cut = w.cut;
    return 0;
}

int
kiwi_ws_search (const char *root, const char *path, const kiwi_ws_search_opts *o, kiwi_strv *out, int *cut,
                kiwi_error_t *err)
{
    *cut = 0;
    if (o->pattern == NULL || *o->pattern == '\0')
        return kiwi_error_make (err, 0, "search: empty pattern");
    if (strlen (o->pattern) > KIWI_WS_PATTERN_MAX)
        return kiwi_error_make (err, 0, "search: the pattern is longer than %d bytes", KIWI_WS_PATTERN_MAX);
    if (o->glob != NULL && strlen (o->glob) > KIWI_WS_PATTERN_MAX)
        return kiwi_error_make (err, 0, "search: the glob is longer than %d bytes", KIWI_WS_PATTERN_MAX);
    regex_t re;
    bool have_re = false;
    if (o->regex) {
        /* a back-reference makes matching exponential: refused */
        for (const char *p = o->pattern; *p; p++)
            if (p[0] == '\\' && p[1] >= '1' && p[1] <= '9')
                return kiwi_error_make (err, 0, "search: back-references (\\1..\\9) are not allowed");
        int rc = regcomp (&re, o->pattern, REG_EXTENDED | REG_NOSUB | (o->ignore_case ? REG_ICASE : 0));
        if (rc != 0) {
            char msg[200];
            regerror (rc, &re, msg, sizeof msg);
            return kiwi_error_make (err, 0, "search: bad regular expression: %s", msg);
        }
        have_re = true;
    }
    walk_ctx w = { .out = out, .max = o->max, .depth = 32, .search = o, .re = have_re ? &re : NULL };
    char norm[KIWI_WS_PATH_MAX + 1];
    int rc = 0;
    if (kiwi_ws_normalise (path ? path : "", 1, norm, sizeof norm, err) < 0)
        rc = -1;
    else {
        /* a file or a directory */
        int fd = *norm ? open_file (root, norm, O_RDONLY | O_NONBLOCK, 0, err)
                       : open_dir (root, "", norm, sizeof norm, err);
        struct stat st;
        if (fd < 0)
            rc = -1;
        else if (fstat (fd, &st) < 0) {
            rc = kiwi_error_make (err, errno, "search: `%s`", norm);
            close (fd);
        } else if (S_ISDIR (st.st_mode))
            walk (fd, norm, 0, &w);
        else if (S_ISREG (st.st_mode) && st.st_size <= KIWI_WS_SEARCH_FILE_MAX)
            grep_fd (fd, norm, &w);
        else {
            rc = kiwi_error_make (err, 0, "search: `%s` is not a directory or a text file of at most %d bytes", norm,
                                  KIWI_WS_SEARCH_FILE_MAX);
            close (fd);
        }
    }
    if (have_re)
        regfree (&re);
    *cut = w.cut;
    return rc;
}
