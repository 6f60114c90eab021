/*
 * archive.h: tar archives in memory, for moving a task's repository into and
 * out of a sandbox through the Docker Engine API (PUT/GET
 * /containers/{id}/archive). libarchive reads and writes the format
 * (read.c, write.c); the walk, the checks and extraction
 * are Kiwi's.
 *
 * Writing: kiwi_archive_from_dir() packs a host directory into POSIX ustar,
 * with pax extended headers for what ustar cannot hold (long paths and link
 * targets, large sizes or ids). Symlinks are stored as symlinks and never
 * followed; devices, fifos and sockets are skipped and counted. The small
 * builders (kiwi_archive_add_file() and friends, then kiwi_archive_finish())
 * make archives programmatically, e.g. a single file or a CA bundle.
 *
 * Reading: kiwi_tar_reader walks the entries of an archive (ustar, GNU tar's
 * long names and links, pax headers) and checks its structure; nothing is
 * trusted. kiwi_archive_extract() unpacks into a directory and treats the
 * archive as hostile: every entry is validated before anything is written
 * (so a malformed or malicious archive writes nothing), then every file is
 * created with *at() calls relative to a directory descriptor that was
 * walked one component at a time with O_NOFOLLOW | O_DIRECTORY. Nothing
 * outside dest_dir is read or written, also when a symlink already exists in
 * dest_dir or is swapped in while extracting.
 *
 * Hardlinks: a hardlink entry whose target is a regular file extracted
 * earlier from the same archive is written as an independent copy of that
 * file's content (no link(2) is ever made, so no inode is shared with
 * anything). Any other hardlink (target absent, not a regular file, absolute
 * or with a `..` component, e.g. `/etc/passwd`) is rejected. The writer never
 * emits hardlinks: files with several links are stored once per name.
 *
 * Symlinks in an extracted tree may point anywhere (their text is the
 * archive's); extraction never follows them, and neither must readers of the
 * extracted tree that do not trust it.
 */
#ifndef KIWI_SANDBOX_ARCHIVE_H
#define KIWI_SANDBOX_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/buf.h"
#include "common/error.h"

/* -------------------------------------------------------------------------
 * Limits.
 */
#define KIWI_ARCHIVE_DEFAULT_MAX_BYTES ((size_t) 1 << 30) /* 1 GiB */
#define KIWI_ARCHIVE_DEFAULT_MAX_ENTRIES ((size_t) 250000)
#define KIWI_ARCHIVE_MAX_PATH 4095  /* bytes in an entry name or link target */
#define KIWI_ARCHIVE_MAX_DEPTH 256  /* directory levels, writing and extracting */
#define KIWI_ARCHIVE_MAX_META ((size_t) 1 << 20) /* bytes of one pax or GNU long-name record */

/* -------------------------------------------------------------------------
 * Writing.
 */
typedef enum {
    KIWI_ARCHIVE_MTIME_REAL = 0, /* each file's own modification time */
    KIWI_ARCHIVE_MTIME_FIXED,    /* opts->mtime for every entry: reproducible archives */
} kiwi_archive_mtime_mode;

/* Returns true to leave `relpath` out (a directory is then not descended).
 * `relpath` is relative to the packed directory ("a/b/c", no prefix); `st` is
 * its lstat. */
typedef bool (*kiwi_archive_exclude_fn) (const char *relpath, const struct stat *st, void *userdata);

/* Writer options. Start from kiwi_archive_opts_init() (a zeroed struct would
 * ask for owner 0:0); passing NULL anywhere means the defaults. Strings are
 * borrowed for the duration of the call. */
typedef struct kiwi_archive_opts {
    uint32_t uid, gid;                   /* owner written in every header; default 1000:1000 */
    const char *const *exclude;          /* NULL-terminated top-level names to leave out (".git"), or NULL */
    kiwi_archive_exclude_fn exclude_fn;  /* called for every entry not already excluded; may be NULL */
    void *exclude_userdata;
    size_t max_bytes;                    /* ceiling on out->len; default KIWI_ARCHIVE_DEFAULT_MAX_BYTES,
                                            0 = none */
    kiwi_archive_mtime_mode mtime_mode;  /* default REAL */
    int64_t mtime;                       /* seconds since the epoch, for FIXED (and the builders) */
    const char *prefix;                  /* kiwi_archive_from_dir: store entries under "prefix/", with a
                                            directory entry for it; NULL = at the top */
} kiwi_archive_opts;

void kiwi_archive_opts_init (kiwi_archive_opts *opts);

typedef struct kiwi_archive_stats {
    size_t files;        /* regular files */
    size_t dirs;
    size_t symlinks;
    size_t hardlinks;    /* extraction: hardlinks written as copies */
    size_t skipped;      /* devices, fifos, sockets: not stored / not extracted */
    size_t excluded;     /* writing: left out by the exclude list or function */
    size_t ignored;      /* extraction: entries that name dest_dir itself or vanish under
                            strip_components, pax global headers, volume labels */
    uint64_t bytes;      /* file content bytes stored / written */
} kiwi_archive_stats;

/* The same counters, named for the reading side. */
typedef kiwi_archive_stats kiwi_extract_stats;

/* Packs the tree at `dir` (the directory itself is not an entry, unless
 * opts->prefix is set) and appends the entries and the end-of-archive
 * marker to `out`. Names are sorted bytewise at every level. Regular files,
 * directories and symlinks are stored, with permission bits (mode & 0777);
 * symlinks are stored with their target text and never followed (a symlink
 * to a file outside the tree adds nothing of that file). Other types are
 * skipped and counted in stats->skipped. `stats` may be NULL.
 *
 * `dir` itself is opened as given (it may be a symlink); below it nothing is
 * followed. Files with several hardlinks are stored once per name.
 *
 * Returns 0, or < 0 with *err naming the path (an unreadable file, a tree
 * deeper than KIWI_ARCHIVE_MAX_DEPTH, a name longer than
 * KIWI_ARCHIVE_MAX_PATH, the byte ceiling); on error out->len is what it was
 * on entry. The caller owns `out` in both cases. */
int kiwi_archive_from_dir (const char *dir, const kiwi_archive_opts *opts, kiwi_buf *out, kiwi_archive_stats *stats,
                           kiwi_error_t *err);

/* Builders: append one entry to `out` (finish with kiwi_archive_finish()).
 * `path` is relative, without `..` components; a leading "./" and repeated
 * slashes are normalised away. `mode` is masked to 0777. uid/gid come from
 * opts; mtime is opts->mtime when FIXED, the current time otherwise.
 * Return < 0 on a bad path or the byte ceiling (out unchanged). */
int kiwi_archive_add_file (kiwi_buf *out, const char *path, const void *data, size_t len, int mode,
                           const kiwi_archive_opts *opts, kiwi_error_t *err);
int kiwi_archive_add_dir (kiwi_buf *out, const char *path, int mode, const kiwi_archive_opts *opts,
                          kiwi_error_t *err);
int kiwi_archive_add_symlink (kiwi_buf *out, const char *path, const char *target, const kiwi_archive_opts *opts,
                              kiwi_error_t *err);

/* Appends the end-of-archive marker (two zero blocks). */
int kiwi_archive_finish (kiwi_buf *out, kiwi_error_t *err);

/* -------------------------------------------------------------------------
 * Reading.
 */
#define KIWI_TAR_TYPES(X)                                                                                    \
    X (KIWI_TAR_FILE, "file")                                                                                \
    X (KIWI_TAR_DIR, "directory")                                                                            \
    X (KIWI_TAR_SYMLINK, "symlink")                                                                          \
    X (KIWI_TAR_HARDLINK, "hardlink")                                                                        \
    X (KIWI_TAR_CHAR, "character device")                                                                    \
    X (KIWI_TAR_BLOCK, "block device")                                                                       \
    X (KIWI_TAR_FIFO, "fifo")

typedef enum {
#define KIWI__TAR_ENUM(name, str) name,
    KIWI_TAR_TYPES (KIWI__TAR_ENUM)
#undef KIWI__TAR_ENUM
} kiwi_tar_type;

const char *kiwi_tar_type_str (kiwi_tar_type t);

/* One entry, as the archive states it. Everything points into the reader or
 * the archive: valid until the next kiwi_tar_reader_next() or
 * kiwi_tar_reader_clear(), and as long as the archive bytes live. `name` is
 * NOT sanitised (it may be absolute or contain `..`); `data` is non-NULL only
 * for files (size bytes, inside the archive). */
typedef struct kiwi_tar_entry {
    const char *name;
    const char *linkname;  /* symlink target or hardlink target; "" otherwise */
    kiwi_tar_type type;
    uint32_t mode;         /* permission bits as stored, & 07777 */
    uint64_t uid, gid;
    int64_t mtime;
    uint64_t devmajor, devminor;
    const void *data;
    size_t size;
    size_t offset;         /* of the entry's first header in the archive */
} kiwi_tar_entry;

/* Iterator over an archive in memory. Init never fails; clear frees what the
 * reader allocated (libarchive's reader, names). */
struct archive;
typedef struct kiwi_tar_reader {
    const unsigned char *tar;
    size_t len;
    size_t pos;          /* offset of the next header */
    bool done;
    bool failed;
    struct archive *a;   /* owned: libarchive's reader, made by the first kiwi_tar_reader_next() */
    char *name;          /* owned: the current entry's full name */
    char *linkname;      /* owned */
} kiwi_tar_reader;

void kiwi_tar_reader_init (kiwi_tar_reader *r, const void *tar, size_t len);
void kiwi_tar_reader_clear (kiwi_tar_reader *r);

/* Reads the next entry into *e. Returns 1 for an entry, 0 at the end-of-archive
 * marker (two zero blocks), < 0 with *err (naming the entry and its offset
 * where there is one) for: a bad header checksum, a truncated archive
 * (including a missing end marker), a size beyond the remaining bytes, a
 * malformed numeric field or pax record, an unsupported entry type (sparse,
 * multi-volume). Once it returned <= 0 it keeps returning that. An entry's
 * data stays valid as long as the archive bytes do. */
int kiwi_tar_reader_next (kiwi_tar_reader *r, kiwi_tar_entry *e, kiwi_error_t *err);

/* Called once per entry by kiwi_archive_list(). Return < 0 (with *err set)
 * to stop; the error is passed up. */
typedef int (*kiwi_archive_list_fn) (const kiwi_tar_entry *e, void *userdata, kiwi_error_t *err);

/* Walks every entry through `fn`. Returns 0 at the end marker, < 0 on a
 * malformed archive or when `fn` stopped. */
int kiwi_archive_list (const void *tar, size_t len, kiwi_archive_list_fn fn, void *userdata, kiwi_error_t *err);

/* Extraction options. A zeroed struct (or NULL) means the defaults. */
typedef struct kiwi_extract_opts {
    unsigned strip_components; /* leading path components removed ("src/a" -> "a" with 1); entries
                                  left with nothing are ignored, hardlink targets are stripped too */
    size_t max_bytes;          /* ceiling on file content written (hardlink copies included);
                                  0 = KIWI_ARCHIVE_DEFAULT_MAX_BYTES, SIZE_MAX = none */
    size_t max_entries;        /* ceiling on entries; 0 = KIWI_ARCHIVE_DEFAULT_MAX_ENTRIES */
    bool preserve_mtime;       /* set files', symlinks' and directories' mtime from the archive */
} kiwi_extract_opts;

/* Unpacks `tar` into the existing directory `dest_dir`.
 *
 * First every entry is read and checked, and nothing is written if any is
 * rejected: absolute names, `..` components, names passing through a symlink
 * made by an earlier entry, hardlinks not pointing at an earlier regular
 * file, the ceilings, and every structural error of kiwi_tar_reader_next().
 * Then the entries are written in order: files created O_EXCL | O_NOFOLLOW
 * (an existing non-directory at the name is unlinked first, an existing
 * directory is an error), directories made or reused, symlinks made with
 * their text; missing parent directories are made 0755 (less the umask).
 * `dest_dir` itself is opened as given (it may be a symlink: it is the
 * caller's path, not the archive's). Modes are & 0777 (no setuid, setgid or sticky); ownership is
 * the caller's (never chown). Directories are kept writable while
 * extracting and get their mode at the end. Devices and fifos are skipped
 * and counted. Errors met while writing (a name passing through a symlink
 * already in dest_dir, a file where a directory is needed) stop extraction
 * and leave what was already written; everything written is inside dest_dir.
 *
 * Every error names the entry. `opts` and `stats` may be NULL. */
int kiwi_archive_extract (const void *tar, size_t len, const char *dest_dir, const kiwi_extract_opts *opts,
                          kiwi_extract_stats *stats, kiwi_error_t *err);

/* Where a rewritten stream goes, piece by piece. Returns < 0 (with *err) to
 * stop. */
typedef int (*kiwi_tar_sink_fn) (const void *data, size_t len, void *userdata, kiwi_error_t *err);

/* One archive to rewrite (kiwi_archive_rewrite()). Borrowed. */
typedef struct kiwi_rewrite_part {
    const void *tar;
    size_t len;
    const char *what;    /* names it in errors (a path); NULL = "archive" */
} kiwi_rewrite_part;

/* Writes to `sink` one tar archive of the tree kiwi_archive_extract() would
 * make of the parts, extracted one after the other into one empty
 * directory, without making it: every part is read and checked first with
 * extraction's rules (nothing goes to the sink if any entry is rejected),
 * then one entry per path, in the order each path first appears, as the
 * parts last left it, then the end-of-archive marker. Devices and fifos are
 * left out, hardlinks become copies of their file, modes are & 0777, every
 * owner is uid:gid, mtimes are as stored. So a tool that trusts its input
 * can take the stream: no "..", nothing absolute, nothing through a symlink
 * or file, no path twice. File content is streamed, never gathered; opts'
 * ceilings apply to each part. Once the sink failed the stream is broken
 * and the call fails. `opts` and `stats` may be NULL. */
int kiwi_archive_rewrite (const kiwi_rewrite_part *parts, size_t nparts, uint32_t uid, uint32_t gid,
                          const kiwi_extract_opts *opts, kiwi_tar_sink_fn sink, void *userdata,
                          kiwi_extract_stats *stats, kiwi_error_t *err);

/*
 * Metering a tar stream as it arrives (a snapshot copied out of a sandbox):
 * the bytes themselves, and the sizes the entry headers announce (ustar
 * octal, base-256, or a pax `size=` record), so an entry too large for a
 * ceiling is seen at its header, before its bytes come. Only headers are
 * parsed, at the offsets the stream's own sizes give; file contents that
 * look like headers are never read as such. Nothing is validated: a
 * malformed stream still counts by its bytes.
 */
typedef struct kiwi_tar_meter {
    uint64_t pos;         /* bytes of the stream seen */
    uint64_t next_header; /* offset of the next header block */
    uint64_t body_end;    /* end of the current entry's data */
    unsigned char hdr[512];
    size_t hdr_fill;
    bool in_pax;          /* the current entry is a pax extended header */
    char pax[4096];       /* its first bytes (a size record comes early) */
    size_t pax_fill;
    bool pax_size_set;    /* a pax record gave the next entry's size */
    uint64_t pax_size;
    uint64_t announced;   /* sum of the sizes the headers announced */
} kiwi_tar_meter;

void kiwi_tar_meter_init (kiwi_tar_meter *m);
void kiwi_tar_meter_feed (kiwi_tar_meter *m, const void *data, size_t len);
/* The larger of the bytes seen and the sizes announced so far. */
uint64_t kiwi_tar_meter_size (const kiwi_tar_meter *m);

#endif
