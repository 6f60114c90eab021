/*
 * write.c: the writer (archive.h): the builders and the directory
 * walk.
 *
 * libarchive makes the bytes: headers, checksums, numeric fields, the
 * "restricted pax" format (ustar, with a pax extended header only for what
 * ustar cannot hold: long or non-ASCII names and link targets, large sizes,
 * ids and times) and the end-of-archive marker. A non-ASCII name goes into
 * a pax `path` record as UTF-8, or, where the locale cannot say it is
 * UTF-8, as its bytes marked hdrcharset=BINARY.
 *
 * Kiwi keeps what decides the content: the walk with openat and O_NOFOLLOW
 * (a symlink is stored, never followed; a file that changes under the walk
 * is refused), names sorted bytewise at every level, the owner, mode and
 * mtime written in every header (so archives are reproducible), the
 * exclusions, and the byte ceiling, checked as the bytes arrive in the
 * output buffer.
 */
#include "sandbox/archive/archive.h"
#include "sandbox/archive/archive-internal.h"
#include "sandbox/archive/archive-la.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/strv.h"

/* -------------------------------------------------------------------------
 * A libarchive writer appending to a kiwi_buf under a ceiling.
 */
typedef struct tar_writer {
    struct archive *a;  /* owned */
    kiwi_buf *out;      /* borrowed; NULL when the bytes go to `sink` */
    size_t max_bytes;   /* 0 = none */
    bool over;          /* the ceiling refused bytes */
    bool nomem;
    bool discard;       /* closing without the end marker: bytes are dropped */
    kiwi_tar_sink_fn sink; /* instead of `out`: a stream (kiwi__tar_stream) */
    void *sink_ud;
    kiwi_error_t sink_err; /* owned: why the sink refused bytes */
} tar_writer;

/* Never fails towards libarchive: a failed write would leave its writer in
 * the fatal state, whose buffers libarchive 3.6 does not free. Bytes over
 * the ceiling (or without memory) are dropped and noted; the caller looks
 * at the notes after each call and rolls the buffer back. */
static la_ssize_t
sink_write (struct archive *a, void *userdata, const void *buf, size_t n)
{
    (void) a;
    tar_writer *w = userdata;
    if (w->discard || w->over || w->nomem || w->sink_err)
        return (la_ssize_t) n;
    if (w->sink) {
        if (w->sink (buf, n, w->sink_ud, &w->sink_err) < 0 && w->sink_err == NULL)
            kiwi_error_make (&w->sink_err, 0, "the stream refused bytes");
        return (la_ssize_t) n;
    }
    if (w->max_bytes && (w->out->len > w->max_bytes || n > w->max_bytes - w->out->len))
        w->over = true;
    else if (kiwi_buf_append (w->out, buf, n, NULL) < 0)
        w->nomem = true;
    return (la_ssize_t) n;
}

static int
writer_open_to (tar_writer *w, kiwi_buf *out, kiwi_tar_sink_fn sink, void *sink_ud, size_t max_bytes,
                kiwi_error_t *err)
{
    memset (w, 0, sizeof *w);
    w->out = out;
    w->sink = sink;
    w->sink_ud = sink_ud;
    w->max_bytes = max_bytes;
    w->a = archive_write_new ();
    if (w->a == NULL)
        return kiwi_error_make (err, ENOMEM, "making a tar writer");
    /* no blocking: the archive is exactly its entries and the end marker */
    if (archive_write_set_format_pax_restricted (w->a) != ARCHIVE_OK
        || archive_write_set_bytes_per_block (w->a, 0) != ARCHIVE_OK
        || archive_write_open2 (w->a, w, NULL, sink_write, NULL, NULL) != ARCHIVE_OK) {
        kiwi_error_make (err, archive_errno (w->a), "making a tar writer: %s", archive_error_string (w->a));
        archive_write_free (w->a);
        w->a = NULL;
        return -1;
    }
    return 0;
}

static int
writer_open (tar_writer *w, kiwi_buf *out, size_t max_bytes, kiwi_error_t *err)
{
    return writer_open_to (w, out, NULL, NULL, max_bytes, err);
}

/* Frees the writer; with `trailer`, after writing the end-of-archive marker
 * (under the ceiling), else dropping it. */
static int
writer_close (tar_writer *w, bool trailer, const char *what, kiwi_error_t *err)
{
    if (w->a == NULL)
        return 0;
    size_t start = w->out ? w->out->len : 0;
    w->discard = !trailer;
    int rc = archive_write_close (w->a);
    archive_write_free (w->a);
    w->a = NULL;
    if (!trailer) {
        kiwi_error_free (&w->sink_err);
        return 0;
    }
    if (rc == ARCHIVE_OK && !w->over && !w->nomem && !w->sink_err)
        return 0;
    if (w->sink_err) {
        if (err)
            *err = kiwi_error_steal (&w->sink_err);
        kiwi_error_free (&w->sink_err);
        return kiwi_error_wrap (err, "writing %s", what);
    }
    w->out->len = start;
    if (w->over)
        return kiwi_error_make (err, 0, "%s exceeds the ceiling of %zu bytes", what, w->max_bytes);
    return kiwi_error_make (err, ENOMEM, "%s: the end-of-archive marker", what);
}

/* One entry: AE_IFREG (data, len), AE_IFDIR or AE_IFLNK (link). On error
 * out->len is what it was. */
static int
writer_add (tar_writer *w, unsigned type, const char *name, const char *link, uint32_t mode, const kiwi_archive_opts *o,
            int64_t mtime, const void *data, size_t len, kiwi_error_t *err)
{
    size_t start = w->out ? w->out->len : 0;
    struct archive_entry *e = archive_entry_new ();
    if (e == NULL)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (name).s);
    archive_entry_copy_pathname (e, name);
    archive_entry_set_filetype (e, type);
    archive_entry_set_perm (e, mode & 0777);
    archive_entry_set_uid (e, o->uid);
    archive_entry_set_gid (e, o->gid);
    archive_entry_set_mtime (e, (time_t) mtime, 0);
    archive_entry_set_size (e, type == AE_IFREG ? (la_int64_t) len : 0);
    if (link)
        archive_entry_copy_symlink (e, link);
    /* ARCHIVE_WARN: a name not convertible to UTF-8 in this locale, stored
     * as its bytes with hdrcharset=BINARY */
    int rc = archive_write_header (w->a, e);
    if (rc == ARCHIVE_WARN)
        rc = ARCHIVE_OK;
    if (rc == ARCHIVE_OK && type == AE_IFREG && len > 0) {
        la_ssize_t n = archive_write_data (w->a, data, len);
        rc = n == (la_ssize_t) len ? ARCHIVE_OK : ARCHIVE_FATAL;
    }
    if (rc == ARCHIVE_OK)
        rc = archive_write_finish_entry (w->a);
    archive_entry_free (e);
    if (rc == ARCHIVE_OK && !w->over && !w->nomem && !w->sink_err)
        return 0;
    if (w->sink_err) {
        /* the stream is broken from here on: the error is the sink's, and
         * every later call fails with a copy of its message */
        kiwi_error_make (err, 0, "archive entry `%s`: %s", kiwi__show (name).s, kiwi_error_msg (w->sink_err));
        return -1;
    }
    w->out->len = start;
    if (w->over)
        return kiwi_error_make (err, 0, "archive would exceed the ceiling of %zu bytes at `%s`", w->max_bytes,
                                kiwi__show (name).s);
    return kiwi_error_make (err, w->nomem ? ENOMEM : archive_errno (w->a), "archive entry `%s`: %s",
                            kiwi__show (name).s, archive_error_string (w->a));
}

/* -------------------------------------------------------------------------
 * A stream of entries to a sink (archive-internal.h).
 */
struct kiwi__tar_stream {
    tar_writer w;
};

int
kiwi__tar_stream_open (kiwi__tar_stream **out, kiwi_tar_sink_fn sink, void *userdata, kiwi_error_t *err)
{
    kiwi__tar_stream *s = calloc (1, sizeof *s);
    if (s == NULL)
        return kiwi_error_make (err, ENOMEM, "making a tar stream");
    if (writer_open_to (&s->w, NULL, sink, userdata, 0, err) < 0) {
        free (s);
        return -1;
    }
    *out = s;
    return 0;
}

int
kiwi__tar_stream_add (kiwi__tar_stream *s, kiwi_tar_type type, const char *name, const char *link, uint32_t mode,
                      uint32_t uid, uint32_t gid, int64_t mtime, const void *data, size_t len, kiwi_error_t *err)
{
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.uid = uid;
    o.gid = gid;
    unsigned t = type == KIWI_TAR_FILE ? AE_IFREG : type == KIWI_TAR_DIR ? AE_IFDIR : AE_IFLNK;
    return writer_add (&s->w, t, name, t == AE_IFLNK ? link : NULL, mode, &o, mtime, data, len, err);
}

int
kiwi__tar_stream_close (kiwi__tar_stream *s, bool trailer, kiwi_error_t *err)
{
    if (s == NULL)
        return 0;
    int rc = writer_close (&s->w, trailer, "the end of the stream", err);
    free (s);
    return rc;
}

/* A builder's one entry, appended without an end marker. */
static int
builder_add (kiwi_buf *out, unsigned type, const char *name, const char *link, uint32_t mode,
             const kiwi_archive_opts *o, int64_t mtime, const void *data, size_t len, kiwi_error_t *err)
{
    tar_writer w;
    if (writer_open (&w, out, o->max_bytes, err) < 0)
        return -1;
    int rc = writer_add (&w, type, name, link, mode, o, mtime, data, len, err);
    writer_close (&w, false, NULL, NULL);
    return rc;
}

int
kiwi_archive_finish (kiwi_buf *out, kiwi_error_t *err)
{
    tar_writer w;
    if (writer_open (&w, out, 0, err) < 0)
        return -1;
    return writer_close (&w, true, "the end-of-archive marker", err);
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
    return builder_add (out, AE_IFREG, name, NULL, (uint32_t) mode, o, builder_mtime (o), data, len, err);
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
    return builder_add (out, AE_IFDIR, name, NULL, (uint32_t) mode, o, builder_mtime (o), NULL, 0, err);
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
    return builder_add (out, AE_IFLNK, name, target, 0777, o, builder_mtime (o), NULL, 0, err);
}

/* -------------------------------------------------------------------------
 * Writer: the directory walk.
 */
typedef struct walk {
    const kiwi_archive_opts *o;
    tar_writer tw;
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
add_walk_entry (walk *w, unsigned type, const char *link, const struct stat *st, const void *data, size_t len,
                kiwi_error_t *err)
{
    if (strlen (w->name.data) > KIWI_ARCHIVE_MAX_PATH)
        return kiwi_error_make (err, 0, "archiving `%s`: `%s` is longer than %d bytes", w->root,
                                kiwi__show (w->name.data).s, KIWI_ARCHIVE_MAX_PATH);
    uint32_t mode = type == AE_IFLNK ? 0777 : (uint32_t) st->st_mode & 0777;
    if (writer_add (&w->tw, type, w->name.data, link, mode, w->o, entry_mtime (w, st), data, len, err) < 0)
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
        if (add_walk_entry (w, AE_IFREG, NULL, &st, w->scratch.data, w->scratch.len, err) < 0)
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
        if (add_walk_entry (w, AE_IFLNK, target, &st, NULL, 0, err) < 0)
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
        if (kiwi_buf_append (&w->name, "/", 1, err) < 0) {
            close (sub);
            return -1;
        }
        int rc = add_walk_entry (w, AE_IFDIR, NULL, &st, NULL, 0, err);
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
    kiwi_strv names = KIWI_STRV_INIT;
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir (d)) != NULL) {
        if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
            continue;
        if (kiwi_strv_add (&names, de->d_name) < 0) {
            rc = kiwi_error_make (err, ENOMEM, "listing `%s`", kiwi__show (w->name.data + w->rel_off).s);
            goto out;
        }
        errno = 0;
    }
    if (errno != 0) {
        rc = kiwi_error_make (err, errno, "reading directory `%s` in `%s`", kiwi__show (w->name.data + w->rel_off).s,
                              w->root);
        goto out;
    }
    if (names.n > 1)
        qsort (names.v, names.n, sizeof *names.v, name_cmp);
    size_t base = w->name.len;
    for (size_t i = 0; i < names.n && rc == 0; i++) {
        w->name.len = base;
        if (kiwi_buf_append_str (&w->name, names.v[i], err) < 0) {
            rc = -1;
            break;
        }
        rc = walk_entry (w, dirfd (d), names.v[i], depth, err);
    }
    w->name.len = base;
    if (w->name.data)
        w->name.data[base] = '\0';
out:
    kiwi_strv_free (&names);
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
    if (writer_open (&w.tw, out, w.o->max_bytes, err) < 0) {
        close (fd);
        return -1;
    }
    int rc = kiwi_buf_reserve (&w.name, 0, err); /* an empty name is "" */
    if (rc == 0 && w.o->prefix && w.o->prefix[0]) {
        cleanup_free char *prefix = NULL;
        struct stat st;
        if (builder_path (w.o->prefix, &prefix, err) < 0 || fstat (fd, &st) < 0
            || kiwi_buf_append_str (&w.name, prefix, err) < 0 || kiwi_buf_append (&w.name, "/", 1, err) < 0)
            rc = kiwi_error_wrap (err, "archive prefix `%s`", kiwi__show (w.o->prefix).s);
        w.rel_off = w.name.len;
        if (rc == 0)
            rc = add_walk_entry (&w, AE_IFDIR, NULL, &st, NULL, 0, err);
    }
    if (rc == 0)
        rc = walk_dir (&w, fd, 0, err); /* fd owned by walk_dir */
    else
        close (fd);
    cleanup_free char *what = NULL;
    if (rc == 0 && asprintf (&what, "archive of `%s`", dir) < 0)
        rc = kiwi_error_make (err, ENOMEM, "archiving `%s`", dir);
    int closed = writer_close (&w.tw, rc == 0, what, err); /* the end marker, under the ceiling */
    if (rc == 0)
        rc = closed;
    kiwi_buf_free (&w.name);
    kiwi_buf_free (&w.scratch);
    if (rc < 0)
        out->len = start;
    return rc;
}
