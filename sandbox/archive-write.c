/*
 * archive-write.c: the writer (archive.h): the builders and the directory
 * walk.
 */
#include "archive.h"
#include "archive-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

#define BLOCK KIWI__TAR_BLOCK

int
kiwi_archive_finish (kiwi_buf *out, kiwi_error_t *err)
{
    if (kiwi_buf_reserve (out, 2 * BLOCK, err) < 0)
        return -1;
    memset (out->data + out->len, 0, 2 * BLOCK);
    out->len += 2 * BLOCK;
    return 0;
}

static int
builder_path (const char *path, char **out, kiwi_error_t *err)
{
    if (kiwi__archive_clean_path (path, 0, out, err) < 0)
        return -1;
    if (*out == NULL)
        return kiwi_error_make (err, 0, "archive entry `%s`: names no file", kiwi__show (path).s);
    if (strlen (*out) > KIWI_ARCHIVE_MAX_PATH) {
        free (*out);
        *out = NULL;
        return kiwi_error_make (err, 0, "archive entry `%s`: longer than %d bytes", kiwi__show (path).s,
                                KIWI_ARCHIVE_MAX_PATH);
    }
    return 0;
}

static int64_t
builder_mtime (const kiwi_archive_opts *o)
{
    return o->mtime_mode == KIWI_ARCHIVE_MTIME_FIXED ? o->mtime : (int64_t) time (NULL);
}

int
kiwi_archive_add_file (kiwi_buf *out, const char *path, const void *data, size_t len, int mode,
                       const kiwi_archive_opts *opts, kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = kiwi__archive_opts_or_default (opts, &def);
    cleanup_free char *name = NULL;
    if (builder_path (path, &name, err) < 0)
        return -1;
    kiwi__tar_raw e = { .typeflag = '0', .name = name, .mode = (uint32_t) mode & 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o), .data = data, .len = len };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

int
kiwi_archive_add_dir (kiwi_buf *out, const char *path, int mode, const kiwi_archive_opts *opts, kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = kiwi__archive_opts_or_default (opts, &def);
    cleanup_free char *clean = NULL;
    if (builder_path (path, &clean, err) < 0)
        return -1;
    cleanup_free char *name = NULL;
    if (asprintf (&name, "%s/", clean) < 0)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (path).s);
    kiwi__tar_raw e = { .typeflag = '5', .name = name, .mode = (uint32_t) mode & 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o) };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

int
kiwi_archive_add_symlink (kiwi_buf *out, const char *path, const char *target, const kiwi_archive_opts *opts,
                          kiwi_error_t *err)
{
    kiwi_archive_opts def;
    const kiwi_archive_opts *o = kiwi__archive_opts_or_default (opts, &def);
    cleanup_free char *name = NULL;
    if (builder_path (path, &name, err) < 0)
        return -1;
    if (target == NULL || target[0] == '\0' || strlen (target) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archive entry `%s`: symlink target empty or longer than %d bytes",
                                kiwi__show (path).s, KIWI_ARCHIVE_MAX_PATH);
    kiwi__tar_raw e = { .typeflag = '2', .name = name, .linkname = target, .mode = 0777, .uid = o->uid,
                        .gid = o->gid, .mtime = builder_mtime (o) };
    return kiwi__archive_write_raw (out, &e, o->max_bytes, err);
}

/* -------------------------------------------------------------------------
 * Writer: the directory walk.
 */
typedef struct walk {
    const kiwi_archive_opts *o;
    kiwi_buf *out;
    kiwi_archive_stats *st;
    const char *root;     /* for messages */
    kiwi_buf name;        /* "prefix/" + relative path, NUL-terminated */
    size_t rel_off;       /* where the relative path starts in name */
    kiwi_buf scratch;     /* file content */
} walk;

static int
name_cmp (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static int64_t
entry_mtime (const walk *w, const struct stat *st)
{
    return w->o->mtime_mode == KIWI_ARCHIVE_MTIME_FIXED ? w->o->mtime : (int64_t) st->st_mtim.tv_sec;
}

static size_t
allowance (const walk *w)
{
    if (w->o->max_bytes == 0)
        return SIZE_MAX;
    return w->out->len < w->o->max_bytes ? w->o->max_bytes - w->out->len : 0;
}

/* Reads the regular file `name` (in dfd) into w->scratch, refusing anything
 * that is not (any more) the regular file lstat saw. */
static int
read_file (walk *w, int dfd, const char *name, const struct stat *lst, kiwi_error_t *err)
{
    const char *rel = w->name.data + w->rel_off;
    cleanup_close int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening `%s` in `%s`", kiwi__show (rel).s, w->root);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "stat `%s` in `%s`", kiwi__show (rel).s, w->root);
    if (!S_ISREG (st.st_mode) || st.st_ino != lst->st_ino || st.st_dev != lst->st_dev)
        return kiwi_error_make (err, 0, "`%s` in `%s` changed while archiving", kiwi__show (rel).s, w->root);
    w->scratch.len = 0;
    size_t limit = allowance (w);
    if ((uint64_t) st.st_size > limit)
        return kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes at `%s`", w->root,
                                w->o->max_bytes, kiwi__show (rel).s);
    size_t expect = (size_t) st.st_size;
    for (;;) {
        /* room for the whole file and one byte more, to see EOF (or growth) */
        size_t want = expect >= w->scratch.len ? expect - w->scratch.len + 1 : 65536;
        if (want < 4096)
            want = 4096;
        if (kiwi_buf_reserve (&w->scratch, want, err) < 0)
            return kiwi_error_wrap (err, "reading `%s`", kiwi__show (rel).s);
        ssize_t n = read (fd, w->scratch.data + w->scratch.len, w->scratch.cap - w->scratch.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return kiwi_error_make (err, errno, "reading `%s` in `%s`", kiwi__show (rel).s, w->root);
        if (n == 0)
            break;
        w->scratch.len += (size_t) n;
        if (w->scratch.len > limit)
            return kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes at `%s`", w->root,
                                    w->o->max_bytes, kiwi__show (rel).s);
    }
    return 0;
}

static int
add_walk_entry (walk *w, char type, const char *link, const struct stat *st, const void *data, size_t len,
                kiwi_error_t *err)
{
    if (strlen (w->name.data) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archiving `%s`: `%s` is longer than %d bytes", w->root,
                                kiwi__show (w->name.data).s, KIWI_ARCHIVE_MAX_PATH);
    kiwi__tar_raw e = { .typeflag = type, .name = w->name.data, .linkname = link,
                        .mode = type == '2' ? 0777 : (uint32_t) st->st_mode & 0777, .uid = w->o->uid,
                        .gid = w->o->gid, .mtime = entry_mtime (w, st), .data = data, .len = len };
    if (kiwi__archive_write_raw (w->out, &e, w->o->max_bytes, err) < 0)
        return kiwi_error_wrap (err, "archiving `%s`", w->root);
    return 0;
}

static bool
excluded (walk *w, size_t depth, const char *name, const struct stat *st)
{
    if (depth == 0 && w->o->exclude) {
        for (const char *const *x = w->o->exclude; *x; x++)
            if (strcmp (*x, name) == 0)
                return true;
    }
    return w->o->exclude_fn && w->o->exclude_fn (w->name.data + w->rel_off, st, w->o->exclude_userdata);
}

static int walk_dir (walk *w, int fd, size_t depth, kiwi_error_t *err);

/* One directory entry `name` of dfd, whose relative path is in w->name. */
static int
walk_entry (walk *w, int dfd, const char *name, size_t depth, kiwi_error_t *err)
{
    const char *rel = w->name.data + w->rel_off;
    struct stat st;
    if (fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0; /* removed while we walk: it is not part of the tree */
        return kiwi_error_make (err, errno, "stat `%s` in `%s`", kiwi__show (rel).s, w->root);
    }
    if (excluded (w, depth, name, &st)) {
        w->st->excluded++;
        return 0;
    }
    if (S_ISREG (st.st_mode)) {
        if (read_file (w, dfd, name, &st, err) < 0)
            return -1;
        if (add_walk_entry (w, '0', NULL, &st, w->scratch.data, w->scratch.len, err) < 0)
            return -1;
        w->st->files++;
        w->st->bytes += w->scratch.len;
        return 0;
    }
    if (S_ISLNK (st.st_mode)) {
        char target[KIWI_ARCHIVE_MAX_PATH + 2];
        ssize_t n = readlinkat (dfd, name, target, sizeof target);
        if (n < 0)
            return kiwi_error_make (err, errno, "reading symlink `%s` in `%s`", kiwi__show (rel).s, w->root);
        if ((size_t) n > KIWI_ARCHIVE_MAX_PATH)
            return kiwi_error_make (err, 0, "symlink `%s` in `%s`: target longer than %d bytes", kiwi__show (rel).s,
                                    w->root, KIWI_ARCHIVE_MAX_PATH);
        if (n == 0)
            return kiwi_error_make (err, 0, "symlink `%s` in `%s`: empty target", kiwi__show (rel).s, w->root);
        target[n] = '\0';
        if (add_walk_entry (w, '2', target, &st, NULL, 0, err) < 0)
            return -1;
        w->st->symlinks++;
        return 0;
    }
    if (S_ISDIR (st.st_mode)) {
        if (depth + 1 >= KIWI_ARCHIVE_MAX_DEPTH)
            return kiwi_error_make (err, 0, "`%s` in `%s`: deeper than %d levels", kiwi__show (rel).s, w->root,
                                    KIWI_ARCHIVE_MAX_DEPTH);
        int sub = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            return kiwi_error_make (err, errno, "opening directory `%s` in `%s`", kiwi__show (rel).s, w->root);
        struct stat sst;
        if (fstat (sub, &sst) < 0 || sst.st_ino != st.st_ino || sst.st_dev != st.st_dev) {
            close (sub);
            return kiwi_error_make (err, 0, "`%s` in `%s` changed while archiving", kiwi__show (rel).s, w->root);
        }
        /* the entry name of a directory ends with '/' */
        if (kiwi_buf_append (&w->name, "/", 1, err) < 0 || kiwi__buf_terminate (&w->name, err) < 0) {
            close (sub);
            return -1;
        }
        int rc = add_walk_entry (w, '5', NULL, &st, NULL, 0, err);
        if (rc == 0)
            w->st->dirs++;
        if (rc == 0)
            rc = walk_dir (w, sub, depth + 1, err); /* sub now owned by walk_dir */
        else
            close (sub);
        return rc;
    }
    w->st->skipped++;
    return 0;
}

/* Walks the directory open at `fd` (owned: closed here), whose relative path
 * with a trailing '/' (or nothing, at the top) is in w->name. */
static int
walk_dir (walk *w, int fd, size_t depth, kiwi_error_t *err)
{
    DIR *d = fdopendir (fd);
    if (d == NULL) {
        int e = errno;
        close (fd);
        return kiwi_error_make (err, e, "reading directory `%s` in `%s`", kiwi__show (w->name.data + w->rel_off).s,
                                w->root);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir (d)) != NULL) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 32;
            char **p = realloc (names, ncap * sizeof *p);
            if (p == NULL) {
                rc = kiwi_error_make (err, ENOMEM, "listing `%s`", kiwi__show (w->name.data + w->rel_off).s);
                goto out;
            }
            names = p;
            cap = ncap;
        }
        names[n] = strdup (de->d_name);
        if (names[n] == NULL) {
            rc = kiwi_error_make (err, ENOMEM, "listing `%s`", kiwi__show (w->name.data + w->rel_off).s);
            goto out;
        }
        n++;
        errno = 0;
    }
    if (errno != 0) {
        rc = kiwi_error_make (err, errno, "reading directory `%s` in `%s`", kiwi__show (w->name.data + w->rel_off).s,
                              w->root);
        goto out;
    }
    if (n > 1)
        qsort (names, n, sizeof *names, name_cmp);
    size_t base = w->name.len;
    for (size_t i = 0; i < n && rc == 0; i++) {
        w->name.len = base;
        if (kiwi__buf_append_str (&w->name, names[i], err) < 0 || kiwi__buf_terminate (&w->name, err) < 0) {
            rc = -1;
            break;
        }
        rc = walk_entry (w, dirfd (d), names[i], depth, err);
    }
    w->name.len = base;
    if (w->name.data)
        w->name.data[base] = '\0';
out:
    for (size_t i = 0; i < n; i++)
        free (names[i]);
    free (names);
    closedir (d);
    return rc;
}

int
kiwi_archive_from_dir (const char *dir, const kiwi_archive_opts *opts, kiwi_buf *out, kiwi_archive_stats *stats,
                       kiwi_error_t *err)
{
    kiwi_archive_opts def;
    kiwi_archive_stats local;
    memset (&local, 0, sizeof local);
    walk w = { .o = kiwi__archive_opts_or_default (opts, &def), .out = out, .st = stats ? stats : &local, .root = dir };
    memset (w.st, 0, sizeof *w.st);
    size_t start = out->len;

    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening directory `%s` to archive", dir);
    int rc = kiwi__buf_terminate (&w.name, err);
    if (rc == 0 && w.o->prefix && w.o->prefix[0]) {
        cleanup_free char *prefix = NULL;
        struct stat st;
        if (builder_path (w.o->prefix, &prefix, err) < 0 || fstat (fd, &st) < 0
            || kiwi__buf_append_str (&w.name, prefix, err) < 0 || kiwi_buf_append (&w.name, "/", 1, err) < 0
            || kiwi__buf_terminate (&w.name, err) < 0)
            rc = kiwi_error_wrap (err, "archive prefix `%s`", kiwi__show (w.o->prefix).s);
        w.rel_off = w.name.len;
        if (rc == 0)
            rc = add_walk_entry (&w, '5', NULL, &st, NULL, 0, err);
    }
    if (rc == 0)
        rc = walk_dir (&w, fd, 0, err); /* fd owned by walk_dir */
    else
        close (fd);
    if (rc == 0 && w.o->max_bytes && (out->len > w.o->max_bytes || 2 * BLOCK > w.o->max_bytes - out->len))
        rc = kiwi_error_make (err, 0, "archive of `%s` exceeds the ceiling of %zu bytes", dir, w.o->max_bytes);
    if (rc == 0)
        rc = kiwi_archive_finish (out, err);
    kiwi_buf_free (&w.name);
    kiwi_buf_free (&w.scratch);
    if (rc < 0)
        out->len = start;
    return rc;
}
