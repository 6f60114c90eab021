/*
 * extract.c: kiwi_archive_extract(): a plan of checked operations
 * made from the whole archive first, then executed with descriptor-relative
 * calls only.
 */
#include "sandbox/archive/archive.h"
#include "sandbox/archive/archive-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

/* -------------------------------------------------------------------------
 * Extraction, part one: the plan. Every entry is read, its name cleaned,
 * hardlinks resolved to earlier files' content, and the archive's own view
 * of each path kept in a table, so that names passing through an earlier
 * symlink or file are rejected before anything is written.
 */
typedef enum { OP_FILE, OP_DIR, OP_SYMLINK } op_kind;

typedef struct op {
    op_kind kind;
    char *path;          /* cleaned, relative, owned */
    char *raw;           /* the name as the archive gives it, owned (for messages) */
    char *target;        /* symlink text, owned */
    const void *data;    /* file content, inside the archive */
    size_t len;
    uint32_t mode;
    int64_t mtime;
    bool hardlink;
    bool emitted;        /* kiwi_archive_rewrite: this path's entry is written */
    size_t part;         /* kiwi_archive_rewrite: which archive the entry came from */
} op;

typedef struct plan {
    op *ops;
    size_t n, cap;
    size_t *slots;       /* hash table: index + 1 into ops of the latest op per path; 0 = empty */
    size_t nslots;       /* power of two */
    size_t used;
} plan;

static void
plan_clear (plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free (p->ops[i].path);
        free (p->ops[i].raw);
        free (p->ops[i].target);
    }
    free (p->ops);
    free (p->slots);
    memset (p, 0, sizeof *p);
}

static uint64_t
hash_str (const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char) s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The slot for path[0..n): the one holding it, or the empty one where it goes. */
static size_t *
plan_slot (plan *p, const char *path, size_t n)
{
    size_t mask = p->nslots - 1;
    for (size_t i = (size_t) hash_str (path, n) & mask;; i = (i + 1) & mask) {
        size_t *s = &p->slots[i];
        if (*s == 0)
            return s;
        const char *k = p->ops[*s - 1].path;
        if (strncmp (k, path, n) == 0 && k[n] == '\0')
            return s;
    }
}

/* The latest op for path[0..n), or NULL. */
static op *
plan_find (plan *p, const char *path, size_t n)
{
    if (p->nslots == 0)
        return NULL;
    size_t *s = plan_slot (p, path, n);
    return *s ? &p->ops[*s - 1] : NULL;
}

static int
plan_index (plan *p, size_t idx, kiwi_error_t *err)
{
    if ((p->used + 1) * 2 > p->nslots) {
        size_t nn = p->nslots ? p->nslots * 2 : 256;
        size_t *old = p->slots;
        size_t on = p->nslots;
        p->slots = calloc (nn, sizeof *p->slots);
        if (p->slots == NULL) {
            p->slots = old;
            return kiwi_error_make (err, ENOMEM, "planning extraction");
        }
        p->nslots = nn;
        for (size_t i = 0; i < on; i++)
            if (old[i])
                *plan_slot (p, p->ops[old[i] - 1].path, strlen (p->ops[old[i] - 1].path)) = old[i];
        free (old);
    }
    const char *path = p->ops[idx].path;
    size_t *s = plan_slot (p, path, strlen (path));
    if (*s == 0)
        p->used++;
    *s = idx + 1;
    return 0;
}

static int
plan_push (plan *p, op *o, kiwi_error_t *err)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        op *n = realloc (p->ops, nc * sizeof *n);
        if (n == NULL)
            return kiwi_error_make (err, ENOMEM, "planning extraction");
        p->ops = n;
        p->cap = nc;
    }
    p->ops[p->n] = *o;
    memset (o, 0, sizeof *o); /* now owned by the plan */
    p->n++;
    return plan_index (p, p->n - 1, err);
}

static void
op_clear (op *o)
{
    free (o->path);
    free (o->raw);
    free (o->target);
    memset (o, 0, sizeof *o);
}

/* Checks the archive's own view of the directories above `path`. */
static int
check_parents (plan *p, const char *path, const char *raw, kiwi_error_t *err)
{
    size_t depth = 0;
    for (const char *s = strchr (path, '/'); s; s = strchr (s + 1, '/')) {
        if (++depth >= KIWI_ARCHIVE_MAX_DEPTH)
            return kiwi_error_make (err, 0, "archive entry `%s`: deeper than %d levels", kiwi__show (raw).s,
                                    KIWI_ARCHIVE_MAX_DEPTH);
        op *o = plan_find (p, path, (size_t) (s - path));
        if (o == NULL || o->kind == OP_DIR)
            continue;
        char *prefix = strndup (path, (size_t) (s - path));
        kiwi_error_make (err, 0, "archive entry `%s`: path passes through %s `%s` made by an earlier entry",
                         kiwi__show (raw).s, o->kind == OP_SYMLINK ? "the symlink" : "the file",
                         kiwi__show (prefix ? prefix : "?").s);
        free (prefix);
        return -1;
    }
    return 0;
}

typedef struct plan_ctx {
    plan *p;
    const kiwi_extract_opts *o;
    kiwi_archive_stats *st;
    size_t part;         /* the archive being read (kiwi_archive_rewrite's parts) */
    size_t entries;
    uint64_t bytes;
} plan_ctx;

static int
plan_entry (const kiwi_tar_entry *e, void *userdata, kiwi_error_t *err)
{
    plan_ctx *c = userdata;
    if (++c->entries > c->o->max_entries)
        return kiwi_error_make (err, 0, "archive has more than %zu entries (the ceiling), at `%s`", c->o->max_entries,
                                kiwi__show (e->name).s);
    op o;
    memset (&o, 0, sizeof o);
    if (kiwi__archive_clean_path (e->name, c->o->strip_components, &o.path, err) < 0)
        return -1;
    if (e->type == KIWI_TAR_CHAR || e->type == KIWI_TAR_BLOCK || e->type == KIWI_TAR_FIFO) {
        free (o.path);
        c->st->skipped++;
        return 0;
    }
    if (o.path == NULL) {
        /* the destination itself, or stripped away */
        c->st->ignored++;
        return 0;
    }
    int rc = -1;
    o.raw = strdup (e->name);
    if (o.raw == NULL) {
        kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (e->name).s);
        goto out;
    }
    if (check_parents (c->p, o.path, e->name, err) < 0)
        goto out;
    op *prev = plan_find (c->p, o.path, strlen (o.path));
    o.mode = e->mode & 0777;
    o.mtime = e->mtime;
    o.part = c->part;
    switch (e->type) {
    case KIWI_TAR_FILE:
        o.kind = OP_FILE;
        o.data = e->data;
        o.len = e->size;
        break;
    case KIWI_TAR_DIR:
        o.kind = OP_DIR;
        break;
    case KIWI_TAR_SYMLINK:
        o.kind = OP_SYMLINK;
        o.target = strdup (e->linkname);
        if (o.target == NULL) {
            kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (e->name).s);
            goto out;
        }
        break;
    case KIWI_TAR_HARDLINK: {
        cleanup_free char *target = NULL;
        if (kiwi__archive_clean_path (e->linkname, c->o->strip_components, &target, err) < 0) {
            kiwi_error_wrap (err, "hardlink `%s`", kiwi__show (e->name).s);
            goto out;
        }
        op *t = target ? plan_find (c->p, target, strlen (target)) : NULL;
        if (t == NULL || t->kind != OP_FILE || t->part != c->part) {
            kiwi_error_make (err, 0,
                             "archive entry `%s`: hardlink to `%s`, which is not a regular file extracted earlier "
                             "from this archive",
                             kiwi__show (e->name).s, kiwi__show (e->linkname).s);
            goto out;
        }
        o.kind = OP_FILE;
        o.hardlink = true;
        o.data = t->data;
        o.len = t->len;
        o.mode = t->mode;
        break;
    }
    default:
        kiwi_error_make (err, 0, "archive entry `%s`: unexpected type", kiwi__show (e->name).s);
        goto out;
    }
    if (prev && (prev->kind == OP_DIR) != (o.kind == OP_DIR)) {
        kiwi_error_make (err, 0, "archive entry `%s`: a %s replaces the %s an earlier entry made",
                         kiwi__show (e->name).s, o.kind == OP_DIR ? "directory" : "non-directory",
                         prev->kind == OP_DIR ? "directory" : "non-directory");
        goto out;
    }
    if (o.kind == OP_FILE) {
        if (o.len > c->o->max_bytes || c->bytes > c->o->max_bytes - o.len) {
            kiwi_error_make (err, 0, "archive content exceeds the ceiling of %zu bytes at `%s`", c->o->max_bytes,
                             kiwi__show (e->name).s);
            goto out;
        }
        c->bytes += o.len;
    }
    rc = plan_push (c->p, &o, err);
out:
    op_clear (&o);
    return rc;
}

/* Counts an op written (a file, its copy for a hardlink, a directory, a
 * symlink) in the stats. */
static void
tally (kiwi_archive_stats *st, const op *o)
{
    switch (o->kind) {
    case OP_FILE:
        if (o->hardlink)
            st->hardlinks++;
        else
            st->files++;
        st->bytes += o->len;
        break;
    case OP_DIR:
        st->dirs++;
        break;
    case OP_SYMLINK:
        st->symlinks++;
        break;
    }
}

/* -------------------------------------------------------------------------
 * Extraction, part two: executing the plan with descriptor-relative calls.
 */

/* Explains why component `comp` of `path` could not be opened as a directory. */
static int
not_a_dir_error (int dfd, const char *comp, const char *path, size_t plen, const char *raw, int e, kiwi_error_t *err)
{
    struct stat st;
    char *prefix = strndup (path, plen);
    const char *pp = prefix ? prefix : comp;
    if (fstatat (dfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
        kiwi_error_make (err, 0, "archive entry `%s`: path passes through the symlink `%s`", kiwi__show (raw).s,
                         kiwi__show (pp).s);
    else if (e == ENOTDIR || e == ELOOP)
        kiwi_error_make (err, 0, "archive entry `%s`: `%s` is not a directory", kiwi__show (raw).s, kiwi__show (pp).s);
    else
        kiwi_error_make (err, e, "archive entry `%s`: opening `%s`", kiwi__show (raw).s, kiwi__show (pp).s);
    free (prefix);
    return -1;
}

/* Opens the directory that will hold the last component of `path`, walking
 * from `root` one component at a time with O_NOFOLLOW | O_DIRECTORY and
 * making missing directories (0755). Returns the descriptor (which may be
 * `root` itself: compare before closing) and sets *leaf into `path`. With
 * `whole`, the last component is opened too (for directories). */
static int
open_walk (int root, const char *path, bool whole, const char *raw, const char **leaf, kiwi_error_t *err)
{
    int cur = root;
    const char *p = path;
    for (;;) {
        const char *slash = strchr (p, '/');
        if (slash == NULL && !whole) {
            *leaf = p;
            return cur;
        }
        size_t n = slash ? (size_t) (slash - p) : strlen (p);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            if (cur != root)
                close (cur);
            return kiwi_error_make (err, ENAMETOOLONG, "archive entry `%s`", kiwi__show (raw).s);
        }
        memcpy (comp, p, n);
        comp[n] = '\0';
        int next = -1;
        for (int attempt = 0; attempt < 2 && next < 0; attempt++) {
            next = openat (cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (next >= 0 || errno != ENOENT || attempt == 1)
                break;
            if (mkdirat (cur, comp, 0755) < 0 && errno != EEXIST)
                break;
        }
        if (next < 0) {
            int e = errno;
            not_a_dir_error (cur, comp, path, (size_t) (p - path) + n, raw, e, err);
            if (cur != root)
                close (cur);
            return -1;
        }
        if (cur != root)
            close (cur);
        cur = next;
        if (slash == NULL) {
            *leaf = p + n;
            return cur;
        }
        p = slash + 1;
    }
}

static void
close_walk (int fd, int root)
{
    if (fd >= 0 && fd != root)
        close (fd);
}

static int
write_all (int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t) n;
    }
    return 0;
}

/* Removes a non-directory at leaf so a new entry can take its name. */
static int
replace_leaf (int dfd, const char *leaf, const op *o, kiwi_error_t *err)
{
    struct stat st;
    if (fstatat (dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "archive entry `%s`", kiwi__show (o->raw).s);
    if (S_ISDIR (st.st_mode))
        return kiwi_error_make (err, 0, "archive entry `%s`: a directory already exists at this path",
                                kiwi__show (o->raw).s);
    if (unlinkat (dfd, leaf, 0) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "archive entry `%s`: removing the existing file", kiwi__show (o->raw).s);
    return 0;
}

static int
do_file (int dfd, const char *leaf, const op *o, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    cleanup_close int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        fd = openat (dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST || attempt == 1)
            break;
        if (replace_leaf (dfd, leaf, o, err) < 0)
            return -1;
    }
    if (fd < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: creating the file", kiwi__show (o->raw).s);
    if (write_all (fd, o->data, o->len) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: writing", kiwi__show (o->raw).s);
    if (fchmod (fd, o->mode & 0777) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: setting the mode", kiwi__show (o->raw).s);
    if (opts->preserve_mtime) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
        if (futimens (fd, ts) < 0)
            return kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", kiwi__show (o->raw).s);
    }
    if (close (get_and_reset (&fd)) < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: closing", kiwi__show (o->raw).s);
    return 0;
}

static int
do_symlink (int dfd, const char *leaf, const op *o, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    int rc = -1;
    for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
        rc = symlinkat (o->target, dfd, leaf);
        if (rc == 0 || errno != EEXIST || attempt == 1)
            break;
        if (replace_leaf (dfd, leaf, o, err) < 0)
            return -1;
    }
    if (rc < 0)
        return kiwi_error_make (err, errno, "archive entry `%s`: creating the symlink", kiwi__show (o->raw).s);
    if (opts->preserve_mtime) {
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
        if (utimensat (dfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0)
            return kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", kiwi__show (o->raw).s);
    }
    return 0;
}

static int
do_dir (int dfd, const char *leaf, const op *o, kiwi_error_t *err)
{
    if (mkdirat (dfd, leaf, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "archive entry `%s`: making the directory", kiwi__show (o->raw).s);
    int fd = openat (dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (fstatat (dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
            return kiwi_error_make (err, 0, "archive entry `%s`: a symlink already exists at this path",
                                    kiwi__show (o->raw).s);
        if (e == ENOTDIR || e == ELOOP)
            return kiwi_error_make (err, 0, "archive entry `%s`: a non-directory already exists at this path",
                                    kiwi__show (o->raw).s);
        return kiwi_error_make (err, e, "archive entry `%s`: opening the directory", kiwi__show (o->raw).s);
    }
    /* writable while extracting; the final mode comes at the end */
    struct stat st;
    int rc = 0;
    if (fstat (fd, &st) < 0 || ((st.st_mode & 0700) != 0700 && fchmod (fd, (st.st_mode & 0777) | 0700) < 0))
        rc = kiwi_error_make (err, errno, "archive entry `%s`: making the directory writable", kiwi__show (o->raw).s);
    close (fd);
    return rc;
}

typedef struct dir_fix {
    size_t depth;
    size_t idx;
} dir_fix;

static int
dir_fix_cmp (const void *a, const void *b)
{
    const dir_fix *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth > y->depth ? -1 : 1;
    return x->idx > y->idx ? -1 : x->idx < y->idx;
}

/* Gives each directory of the plan its final mode (and mtime), deepest
 * first so that a parent without search permission comes last, using only
 * the op that is the archive's last word on that path. */
static int
finish_dirs (plan *p, int root, const kiwi_extract_opts *opts, kiwi_error_t *err)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->ops[i].kind == OP_DIR;
    if (n == 0)
        return 0;
    cleanup_free dir_fix *fix = calloc (n, sizeof *fix);
    if (fix == NULL)
        return kiwi_error_make (err, ENOMEM, "setting directory modes");
    n = 0;
    for (size_t i = 0; i < p->n; i++) {
        op *o = &p->ops[i];
        if (o->kind != OP_DIR || plan_find (p, o->path, strlen (o->path)) != o)
            continue;
        size_t depth = 0;
        for (const char *c = o->path; *c; c++)
            depth += *c == '/';
        fix[n++] = (dir_fix){ depth, i };
    }
    qsort (fix, n, sizeof *fix, dir_fix_cmp);
    for (size_t k = 0; k < n; k++) {
        op *o = &p->ops[fix[k].idx];
        const char *leaf;
        int fd = open_walk (root, o->path, true, o->raw, &leaf, err);
        if (fd < 0)
            return -1;
        int rc = 0;
        if (fchmod (fd, o->mode & 0777) < 0)
            rc = kiwi_error_make (err, errno, "archive entry `%s`: setting the mode", kiwi__show (o->raw).s);
        if (rc == 0 && opts->preserve_mtime) {
            struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) o->mtime } };
            if (futimens (fd, ts) < 0)
                rc = kiwi_error_make (err, errno, "archive entry `%s`: setting the mtime", kiwi__show (o->raw).s);
        }
        close_walk (fd, root);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The options with their defaults filled in. */
static kiwi_extract_opts
opts_or_default (const kiwi_extract_opts *opts)
{
    kiwi_extract_opts o;
    memset (&o, 0, sizeof o);
    if (opts)
        o = *opts;
    if (o.max_bytes == 0)
        o.max_bytes = KIWI_ARCHIVE_DEFAULT_MAX_BYTES;
    if (o.max_entries == 0)
        o.max_entries = KIWI_ARCHIVE_DEFAULT_MAX_ENTRIES;
    return o;
}

/* Reads and checks the whole archive into *p, after what *p already holds
 * (as if extracted into the same directory after it). */
static int
add_to_plan (const void *tar, size_t len, size_t part, const kiwi_extract_opts *o, kiwi_archive_stats *st, plan *p,
             kiwi_error_t *err)
{
    plan_ctx c = { .p = p, .o = o, .st = st, .part = part };
    return kiwi_archive_list (tar, len, plan_entry, &c, err);
}

/* Reads and checks the whole archive into *p (empty on error). */
static int
make_plan (const void *tar, size_t len, const kiwi_extract_opts *o, kiwi_archive_stats *st, plan *p,
           kiwi_error_t *err)
{
    memset (st, 0, sizeof *st);
    memset (p, 0, sizeof *p);
    if (add_to_plan (tar, len, 0, o, st, p, err) < 0) {
        plan_clear (p);
        return -1;
    }
    return 0;
}

int
kiwi_archive_extract (const void *tar, size_t len, const char *dest_dir, const kiwi_extract_opts *opts,
                      kiwi_extract_stats *stats, kiwi_error_t *err)
{
    kiwi_extract_opts o = opts_or_default (opts);
    kiwi_archive_stats local;
    kiwi_archive_stats *st = stats ? stats : &local;
    plan p;
    if (make_plan (tar, len, &o, st, &p, err) < 0)
        return kiwi_error_wrap (err, "extracting into `%s`", dest_dir);

    int root = open (dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        plan_clear (&p);
        return kiwi_error_make (err, errno, "opening the extraction directory `%s`", dest_dir);
    }
    int rc = 0;
    /* The directory of the previous entry stays open for the next: entries
     * come directory by directory, so most share it, and walking every path
     * from the root again cost seven opens a file on a node_modules tree. A
     * directory, once at a path, stays there for the whole extraction
     * (replace_leaf never removes one), so the descriptor still names it. */
    cleanup_free char *dir_path = NULL;
    size_t dir_len = 0;
    int dir_fd = -1;
    for (size_t i = 0; i < p.n && rc == 0; i++) {
        op *op_ = &p.ops[i];
        const char *slash = strrchr (op_->path, '/');
        size_t plen = slash ? (size_t) (slash - op_->path) : 0;
        const char *leaf = slash ? slash + 1 : op_->path;
        int dfd = root;
        if (plen > 0 && dir_fd >= 0 && plen == dir_len && memcmp (dir_path, op_->path, plen) == 0)
            dfd = dir_fd;
        else if (plen > 0) {
            close_walk (dir_fd, root);
            dir_fd = -1;
            free (dir_path);
            dir_path = strndup (op_->path, plen);
            const char *end;
            if (dir_path == NULL) {
                rc = kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (op_->raw).s);
                break;
            }
            if ((dir_fd = open_walk (root, dir_path, true, op_->raw, &end, err)) < 0) {
                rc = -1;
                break;
            }
            dir_len = plen;
            dfd = dir_fd;
        }
        switch (op_->kind) {
        case OP_FILE:
            rc = do_file (dfd, leaf, op_, &o, err);
            break;
        case OP_DIR:
            rc = do_dir (dfd, leaf, op_, err);
            break;
        case OP_SYMLINK:
            rc = do_symlink (dfd, leaf, op_, &o, err);
            break;
        }
        if (rc == 0)
            tally (st, op_);
    }
    close_walk (dir_fd, root);
    if (rc == 0)
        rc = finish_dirs (&p, root, &o, err);
    close (root);
    plan_clear (&p);
    if (rc < 0)
        return kiwi_error_wrap (err, "extracting into `%s`", dest_dir);
    return 0;
}

/* -------------------------------------------------------------------------
 * Rewriting: the plans written out as one tar stream instead of a tree.
 */

/* One path's entry. */
static int
emit_op (kiwi__tar_stream *ts, const op *o, uint32_t uid, uint32_t gid, kiwi_error_t *err)
{
    cleanup_free char *name = NULL;
    if (asprintf (&name, "%s%s", o->path, o->kind == OP_DIR ? "/" : "") < 0)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (o->raw).s);
    kiwi_tar_type t = o->kind == OP_FILE ? KIWI_TAR_FILE : o->kind == OP_DIR ? KIWI_TAR_DIR : KIWI_TAR_SYMLINK;
    return kiwi__tar_stream_add (ts, t, name, o->target, o->mode & 0777, uid, gid, o->mtime, o->data,
                                 o->kind == OP_FILE ? o->len : 0, err);
}

/* Every entry's directories are still directories when the archives are
 * done: a directory made only as a parent (`d/f`, no entry for `d`) and
 * later given to a file or symlink (`d`) is rejected here, where
 * extraction would fail at `d` while writing. */
static int
check_final_parents (plan *p, kiwi_error_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        const char *path = p->ops[i].path;
        for (const char *s = strchr (path, '/'); s; s = strchr (s + 1, '/')) {
            op *o = plan_find (p, path, (size_t) (s - path));
            if (o == NULL || o->kind == OP_DIR)
                continue;
            return kiwi_error_make (err, 0, "archive entry `%s`: a %s replaces the directory `%s` needs",
                                    kiwi__show (o->raw).s, o->kind == OP_SYMLINK ? "symlink" : "file",
                                    kiwi__show (p->ops[i].raw).s);
        }
    }
    return 0;
}

/* Every path of the plan once, where it first appears, as the archives
 * last left it. */
static int
emit_plan (kiwi__tar_stream *ts, plan *p, uint32_t uid, uint32_t gid, kiwi_archive_stats *st, kiwi_error_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        op *last = plan_find (p, p->ops[i].path, strlen (p->ops[i].path));
        if (last->emitted)
            continue;
        last->emitted = true;
        if (emit_op (ts, last, uid, gid, err) < 0)
            return -1;
        tally (st, last);
    }
    return 0;
}

int
kiwi_archive_rewrite (const kiwi_rewrite_part *parts, size_t nparts, uint32_t uid, uint32_t gid,
                      const kiwi_extract_opts *opts, kiwi_tar_sink_fn sink, void *userdata,
                      kiwi_extract_stats *stats, kiwi_error_t *err)
{
    kiwi_extract_opts o = opts_or_default (opts);
    kiwi_archive_stats local;
    kiwi_archive_stats *st = stats ? stats : &local;
    memset (st, 0, sizeof *st);
    plan p;
    memset (&p, 0, sizeof p);
    int rc = 0;
    /* every part is read and checked before a byte goes to the sink */
    for (size_t i = 0; i < nparts && rc == 0; i++)
        if (add_to_plan (parts[i].tar, parts[i].len, i, &o, st, &p, err) < 0)
            rc = kiwi_error_wrap (err, "%s", parts[i].what ? parts[i].what : "archive");
    if (rc == 0)
        rc = check_final_parents (&p, err);
    kiwi__tar_stream *ts = NULL;
    if (rc == 0)
        rc = kiwi__tar_stream_open (&ts, sink, userdata, err);
    if (rc == 0)
        rc = emit_plan (ts, &p, uid, gid, st, err);
    if (ts != NULL && kiwi__tar_stream_close (ts, rc == 0, rc == 0 ? err : NULL) < 0)
        rc = -1;
    plan_clear (&p);
    return rc;
}
