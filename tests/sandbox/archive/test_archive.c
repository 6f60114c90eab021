/*
 * test_archive.c: the tar writer and reader.
 *
 * Round trips through our own reader and through GNU tar (both directions),
 * the writer's refusal to follow symlinks, and extraction of hostile
 * archives: escapes by `..`, absolute names, symlinks made by the archive or
 * already in the destination, hardlinks, devices, truncation at every byte
 * offset, garbage and bit flips (seeded; the seed is printed and
 * KIWI_TEST_SEED replays it), a racing symlink swap, GNU sparse files, an
 * unknown type and a hostile GNU long link. Each hostile case
 * checks that nothing appeared outside the destination: a sentinel
 * directory next to it stays empty, a file next to it keeps its content, and
 * no new name appears next to it. The meter: a stream sized by its bytes
 * and by the sizes its headers announce, GNU tar's pax and gnu (base-256)
 * headers of an 8 GiB sparse file counted at the header, file contents that
 * look like headers never read as such. The rewrite: parts folded into one
 * stream that extracts to the tree the parts make one after the other
 * (each path once, owner and modes rewritten, hardlinks as copies, devices
 * left out), hostile parts rejected before a byte reaches the sink, the
 * ceilings, a failing sink, empty parts and a large file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/archive/archive-internal.h"
#include "sandbox/archive/archive.h"
#include "skip.h"

#define OUTSIDE_CONTENT "outside: must never change\n"
#define SECRET "TOPSECRET-8c1f4e0b-never-in-an-archive"

/* -------------------------------------------------------------------------
 * Helpers.
 */
typedef struct fixture {
    char top[256];       /* temporary directory holding everything */
    char dest[300];      /* extraction destination */
    char sentinel[300];  /* an empty directory next to dest */
    char outside[300];   /* a file next to dest */
    char src[300];       /* a source tree, for the writer tests */
} fixture;

static unsigned seed;

static void
path_join (char *out, size_t n, const char *a, const char *b)
{
    int r = snprintf (out, n, "%s/%s", a, b);
    assert_true (r > 0 && (size_t) r < n);
}

static void
write_file (const char *path, const char *content, mode_t mode)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fail_msg ("creating %s: %s", path, strerror (errno));
    size_t n = strlen (content);
    assert_int_equal (write (fd, content, n), (ssize_t) n);
    assert_int_equal (fchmod (fd, mode), 0);
    close (fd);
}

static char *
read_all (const char *path, size_t *len)
{
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    kiwi_buf b = KIWI_BUF_INIT;
    char tmp[8192];
    ssize_t n;
    while ((n = read (fd, tmp, sizeof tmp)) > 0)
        assert_int_equal (kiwi_buf_append (&b, tmp, (size_t) n, NULL), 0);
    close (fd);
    assert_int_equal (kiwi_buf_append (&b, "", 1, NULL), 0);
    b.len--;
    if (len)
        *len = b.len;
    return kiwi_buf_steal (&b, NULL);
}

static void
mkdir_p (const char *path, mode_t mode)
{
    char tmp[4096];
    snprintf (tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir (tmp, 0755);
        *p = '/';
    }
    if (mkdir (tmp, mode) < 0 && errno != EEXIST)
        fail_msg ("mkdir %s: %s", tmp, strerror (errno));
    chmod (tmp, mode);
}

/* rm -rf without following symlinks; directories are made accessible first,
 * since extraction may have given them any mode. */
static void
rm_rf (const char *path)
{
    struct stat st;
    if (lstat (path, &st) < 0)
        return;
    if (!S_ISDIR (st.st_mode)) {
        unlink (path);
        return;
    }
    chmod (path, 0700);
    DIR *d = opendir (path);
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir (d)) != NULL) {
            if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
                continue;
            char sub[4096];
            if (snprintf (sub, sizeof sub, "%s/%s", path, de->d_name) < (int) sizeof sub)
                rm_rf (sub);
        }
        closedir (d);
    }
    rmdir (path);
}

static size_t
count_entries (const char *dir)
{
    DIR *d = opendir (dir);
    if (d == NULL)
        fail_msg ("opendir %s: %s", dir, strerror (errno));
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir (d)) != NULL)
        if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
            n++;
    closedir (d);
    return n;
}

/* Nothing was written outside dest: the sentinel is empty, the outside file
 * intact, and top holds only what the fixture put there. */
static void
assert_nothing_outside (const fixture *f)
{
    assert_int_equal (count_entries (f->sentinel), 0);
    char *c = read_all (f->outside, NULL);
    assert_non_null (c);
    assert_string_equal (c, OUTSIDE_CONTENT);
    free (c);
    DIR *d = opendir (f->top);
    assert_non_null (d);
    struct dirent *de;
    while ((de = readdir (d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp (n, ".") && strcmp (n, "..") && strcmp (n, "dest") && strcmp (n, "sentinel")
            && strcmp (n, "outside.txt") && strcmp (n, "src") && strcmp (n, "gnu") && strcmp (n, "x.tar"))
            fail_msg ("unexpected `%s` appeared next to the destination", n);
    }
    closedir (d);
}

static int
setup (void **state)
{
    fixture *f = calloc (1, sizeof *f);
    const char *tmp = getenv ("TMPDIR");
    snprintf (f->top, sizeof f->top, "%s/kiwi-archive-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp (f->top) == NULL)
        return -1;
    path_join (f->dest, sizeof f->dest, f->top, "dest");
    path_join (f->sentinel, sizeof f->sentinel, f->top, "sentinel");
    path_join (f->outside, sizeof f->outside, f->top, "outside.txt");
    path_join (f->src, sizeof f->src, f->top, "src");
    mkdir (f->dest, 0755);
    mkdir (f->sentinel, 0755);
    mkdir (f->src, 0755);
    write_file (f->outside, OUTSIDE_CONTENT, 0644);
    *state = f;
    return 0;
}

static int
teardown (void **state)
{
    fixture *f = *state;
    rm_rf (f->top);
    free (f);
    return 0;
}

static void
reset_dest (const fixture *f)
{
    rm_rf (f->dest);
    assert_int_equal (mkdir (f->dest, 0755), 0);
}

/* One raw entry, no checks (hostile archives). */
static void
raw (kiwi_buf *b, char type, const char *name, const char *link, const char *data, uint32_t mode)
{
    kiwi__tar_raw e = { .typeflag = type, .name = name, .linkname = link, .mode = mode, .uid = 1000,
                        .gid = 1000, .mtime = 1700000000, .data = data, .len = data ? strlen (data) : 0 };
    kiwi_error_t err = NULL;
    if (kiwi__archive_write_raw (b, &e, 0, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
}

/* A directory entry when the name ends with '/', else a file. */
static void
raw_dir_or_file (kiwi_buf *b, const char *name)
{
    bool dir = name[strlen (name) - 1] == '/';
    raw (b, dir ? '5' : '0', name, NULL, dir ? NULL : "pwned", dir ? 0755 : 0644);
}

static void
finish (kiwi_buf *b)
{
    assert_int_equal (kiwi_archive_finish (b, NULL), 0);
}

/* Extraction must fail, with an error that contains `needle`, and write
 * nothing outside dest. */
static void
expect_reject (const fixture *f, const kiwi_buf *tar, const kiwi_extract_opts *opts, const char *needle)
{
    kiwi_error_t err = NULL;
    int rc = kiwi_archive_extract (tar->data, tar->len, f->dest, opts, NULL, &err);
    if (rc == 0)
        fail_msg ("extraction succeeded; expected an error naming `%s`", needle);
    assert_int_equal (rc, -1);
    if (strstr (kiwi_error_msg (err), needle) == NULL)
        fail_msg ("error `%s` does not name `%s`", kiwi_error_msg (err), needle);
    kiwi_error_free (&err);
    assert_nothing_outside (f);
}

static void
extract_ok (const fixture *f, const kiwi_buf *tar, const kiwi_extract_opts *opts, kiwi_archive_stats *st)
{
    kiwi_error_t err = NULL;
    if (kiwi_archive_extract (tar->data, tar->len, f->dest, opts, st, &err) < 0)
        fail_msg ("extract: %s", kiwi_error_msg (err));
    assert_nothing_outside (f);
}

static void
assert_file (const char *dir, const char *rel, const char *content, mode_t mode)
{
    char p[4096];
    path_join (p, sizeof p, dir, rel);
    struct stat st;
    if (lstat (p, &st) < 0)
        fail_msg ("%s: %s", p, strerror (errno));
    assert_true (S_ISREG (st.st_mode));
    if ((st.st_mode & 07777) != mode)
        fail_msg ("%s: mode %o, expected %o", rel, st.st_mode & 07777, mode);
    if ((mode & 0400) == 0)
        chmod (p, mode | 0400); /* readable without root */
    char *c = read_all (p, NULL);
    chmod (p, mode);
    if (c == NULL)
        fail_msg ("%s: %s", p, strerror (errno));
    assert_string_equal (c, content);
    free (c);
}

static void
assert_absent (const char *dir, const char *rel)
{
    char p[4096];
    path_join (p, sizeof p, dir, rel);
    struct stat st;
    if (lstat (p, &st) == 0)
        fail_msg ("%s exists", p);
}

static bool
have_gnu_tar (void)
{
    return system ("tar --version 2>/dev/null | grep -q 'GNU tar'") == 0;
}

#define NEED_GNU_TAR()                                                                                       \
    do {                                                                                                     \
        if (!have_gnu_tar ())                                                                                \
            KIWI_SKIP ("GNU tar is not installed");                                                          \
    } while (0)

static void
run (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
run (const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    int rc = system (cmd);
    if (rc != 0)
        fail_msg ("`%s` exited with %d", cmd, rc);
}

static void
save (const char *path, const kiwi_buf *b)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, b->data, b->len), (ssize_t) b->len);
    close (fd);
}

/* -------------------------------------------------------------------------
 * A source tree with everything the writer must handle.
 */
static char long_component[201];  /* one name of 200 bytes: beyond ustar's 100 */
static char deep_path[400];       /* a path beyond 255 bytes */
static char split_path[200];      /* 121 bytes: fits ustar's prefix + name */
static char long_target[151];     /* a symlink target beyond 100 bytes */

static void
init_names (void)
{
    memset (long_component, 'n', 200);
    long_component[200] = '\0';
    snprintf (deep_path, sizeof deep_path, "deep/%.60s/%.60s/%.60s/%.60s/%.60s", long_component, long_component,
              long_component, long_component, long_component);
    memset (split_path, 'p', 60);
    split_path[60] = '/';
    memset (split_path + 61, 'q', 60);
    split_path[121] = '\0';
    memset (long_target, 'x', 150);
    long_target[150] = '\0';
}

static void
make_tree (const char *root)
{
    char p[4096], q[4096];
    mkdir_p (root, 0755);
#define AT(rel) (path_join (p, sizeof p, root, rel), p)
    mkdir_p (AT ("a/b/c"), 0755);
    write_file (AT ("a/b/c/leaf.txt"), "leaf\n", 0644);
    write_file (AT ("a/empty"), "", 0644);
    write_file (AT ("run.sh"), "#!/bin/sh\necho hi\n", 0755);
    write_file (AT ("private"), "mine\n", 0600);
    write_file (AT ("a/b/tool"), "bin", 0700);
    mkdir_p (AT ("répertoire"), 0750);
    write_file (AT ("répertoire/héllo-世界.txt"), "unicode\n", 0644);
    write_file (AT ("emoji-\xf0\x9f\xa5\x9d"), "kiwi\n", 0644);
    mkdir_p (AT ("long"), 0755);
    snprintf (q, sizeof q, "long/%s", long_component);
    write_file (AT (q), "long component\n", 0644);
    path_join (q, sizeof q, root, deep_path);
    *strrchr (q, '/') = '\0';
    mkdir_p (q, 0755);
    write_file (AT (deep_path), "deep\n", 0644);
    *strchr (split_path, '/') = '\0';
    mkdir_p (AT (split_path), 0755);
    split_path[60] = '/';
    write_file (AT (split_path), "split\n", 0644);
    assert_int_equal (symlink ("a/b/c/leaf.txt", AT ("rel-link")), 0);
    assert_int_equal (symlink ("/etc/passwd", AT ("abs-link")), 0);
    assert_int_equal (symlink (long_target, AT ("long-link")), 0);
    assert_int_equal (symlink ("c", AT ("a/b/dir-link")), 0);
    mkdir_p (AT ("empty-dir"), 0755);
    mkdir_p (AT (".git/objects"), 0755);
    write_file (AT (".git/HEAD"), "ref: refs/heads/main\n", 0644);
    mkdir_p (AT ("sub/.git"), 0755);
    write_file (AT ("sub/.git/config"), "nested\n", 0644);
#undef AT
}

/* Compares two trees: names, types, permission bits, content, link text. */
static void
compare_trees (const char *a, const char *b, bool modes)
{
    DIR *d = opendir (a);
    if (d == NULL)
        fail_msg ("opendir %s: %s", a, strerror (errno));
    size_t na = 0;
    struct dirent *de;
    while ((de = readdir (d)) != NULL) {
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        na++;
        char pa[4096], pb[4096];
        path_join (pa, sizeof pa, a, de->d_name);
        path_join (pb, sizeof pb, b, de->d_name);
        struct stat sa, sb;
        assert_int_equal (lstat (pa, &sa), 0);
        if (lstat (pb, &sb) < 0)
            fail_msg ("%s is missing (from %s)", pb, pa);
        if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT))
            fail_msg ("%s: type differs", pb);
        if (S_ISLNK (sa.st_mode)) {
            char ta[4096], tb[4096];
            ssize_t la = readlink (pa, ta, sizeof ta), lb = readlink (pb, tb, sizeof tb);
            assert_true (la > 0 && la == lb);
            assert_memory_equal (ta, tb, (size_t) la);
            continue;
        }
        if (modes && (sa.st_mode & 07777) != (sb.st_mode & 07777))
            fail_msg ("%s: mode %o, expected %o", pb, sb.st_mode & 07777, sa.st_mode & 07777);
        if (S_ISDIR (sa.st_mode)) {
            compare_trees (pa, pb, modes);
        } else {
            size_t la, lb;
            char *ca = read_all (pa, &la), *cb = read_all (pb, &lb);
            assert_non_null (ca);
            assert_non_null (cb);
            assert_int_equal (la, lb);
            assert_memory_equal (ca, cb, la);
            free (ca);
            free (cb);
        }
    }
    closedir (d);
    assert_int_equal (na, count_entries (b));
}

static void
pack (const char *dir, const kiwi_archive_opts *opts, kiwi_buf *out, kiwi_archive_stats *st)
{
    kiwi_error_t err = NULL;
    if (kiwi_archive_from_dir (dir, opts, out, st, &err) < 0)
        fail_msg ("kiwi_archive_from_dir: %s", kiwi_error_msg (err));
}

/* -------------------------------------------------------------------------
 * The buffer, the builders, the reader.
 */
static void
test_buf (void **state)
{
    (void) state;
    kiwi_buf b = KIWI_BUF_INIT;
    for (int i = 0; i < 10000; i++)
        assert_int_equal (kiwi_buf_append (&b, "abc", 3, NULL), 0);
    assert_int_equal (b.len, 30000);
    assert_true (b.cap >= b.len);
    assert_memory_equal (b.data + 29997, "abc", 3);
    size_t len;
    char *d = kiwi_buf_steal (&b, &len);
    assert_int_equal (len, 30000);
    assert_null (b.data);
    assert_int_equal (b.len, 0);
    free (d);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_buf_append (&b, "x", 1, &err), 0);
    assert_int_equal (kiwi_buf_reserve (&b, SIZE_MAX, &err), -1);
    assert_non_null (err);
    kiwi_error_free (&err);
    kiwi_buf_free (&b);
    kiwi_buf_free (&b);
}

typedef struct seen {
    char names[16][512];
    kiwi_tar_type types[16];
    size_t sizes[16];
    char data[16][64];
    char links[16][200];
    uint64_t uid[16];
    uint32_t mode[16];
    int64_t mtime[16];
    size_t n;
} seen;

static int
collect (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    (void) err;
    seen *s = ud;
    assert_true (s->n < 16);
    snprintf (s->names[s->n], sizeof s->names[0], "%s", e->name);
    snprintf (s->links[s->n], sizeof s->links[0], "%s", e->linkname);
    s->types[s->n] = e->type;
    s->sizes[s->n] = e->size;
    s->uid[s->n] = e->uid;
    s->mode[s->n] = e->mode;
    s->mtime[s->n] = e->mtime;
    if (e->data)
        snprintf (s->data[s->n], sizeof s->data[0], "%.*s", (int) e->size, (const char *) e->data);
    s->n++;
    return 0;
}

static void
test_builders_and_list (void **state)
{
    (void) state;
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    assert_int_equal (o.uid, 1000);
    assert_int_equal (o.gid, 1000);
    o.mtime_mode = KIWI_ARCHIVE_MTIME_FIXED;
    o.mtime = 1234567890;
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t err = NULL;
    const char *pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    assert_int_equal (kiwi_archive_add_dir (&b, "etc/ssl", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&b, "./etc//ssl/ca.pem", pem, strlen (pem), 0104644, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_symlink (&b, "etc/ssl/cert.pem", "ca.pem", &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&b, split_path, "x", 1, 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&b, deep_path, "y", 1, 0755, NULL, &err), 0);
    /* rejected paths leave the buffer as it was */
    size_t before = b.len;
    assert_int_equal (kiwi_archive_add_file (&b, "../x", "", 0, 0644, &o, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "../x"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_archive_add_file (&b, "/abs", "", 0, 0644, &o, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "/abs"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_archive_add_file (&b, "./", "", 0, 0644, &o, &err), -1);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_archive_add_symlink (&b, "l", "", &o, &err), -1);
    kiwi_error_free (&err);
    assert_int_equal (b.len, before);
    assert_int_equal (kiwi_archive_finish (&b, &err), 0);
    assert_int_equal (b.len % 512, 0);

    seen s = { 0 };
    assert_int_equal (kiwi_archive_list (b.data, b.len, collect, &s, &err), 0);
    assert_int_equal (s.n, 5);
    assert_string_equal (s.names[0], "etc/ssl/");
    assert_int_equal (s.types[0], KIWI_TAR_DIR);
    assert_string_equal (s.names[1], "etc/ssl/ca.pem");
    assert_int_equal (s.types[1], KIWI_TAR_FILE);
    assert_int_equal (s.sizes[1], strlen (pem));
    assert_string_equal (s.data[1], pem);
    assert_int_equal (s.mode[1], 0644); /* setuid masked by the builder */
    assert_int_equal (s.uid[1], 1000);
    assert_int_equal (s.mtime[1], 1234567890);
    assert_string_equal (s.names[2], "etc/ssl/cert.pem");
    assert_int_equal (s.types[2], KIWI_TAR_SYMLINK);
    assert_string_equal (s.links[2], "ca.pem");
    assert_string_equal (s.names[3], split_path);
    assert_string_equal (s.names[4], deep_path);
    assert_string_equal (kiwi_tar_type_str (KIWI_TAR_FIFO), "fifo");

    /* the iterator: entries, then 0 for good */
    kiwi_tar_reader r;
    kiwi_tar_reader_init (&r, b.data, b.len);
    kiwi_tar_entry e;
    int n = 0, rc;
    while ((rc = kiwi_tar_reader_next (&r, &e, &err)) == 1)
        n++;
    assert_int_equal (rc, 0);
    assert_int_equal (n, 5);
    assert_int_equal (kiwi_tar_reader_next (&r, &e, &err), 0);
    kiwi_tar_reader_clear (&r);
    kiwi_buf_free (&b);
}

static void
test_empty_and_trailer_only (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    expect_reject (f, &b, NULL, "empty archive");
    finish (&b);
    kiwi_archive_stats st;
    extract_ok (f, &b, NULL, &st);
    assert_int_equal (count_entries (f->dest), 0);
    assert_int_equal (st.files + st.dirs + st.symlinks, 0);
    kiwi_buf_free (&b);
}

/* -------------------------------------------------------------------------
 * The writer.
 */
static void
test_roundtrip (void **state)
{
    fixture *f = *state;
    make_tree (f->src);
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_archive_stats st;
    pack (f->src, NULL, &b, &st);
    assert_int_equal (st.symlinks, 4);
    assert_int_equal (st.skipped, 0);
    assert_int_equal (st.files, 12);
    kiwi_archive_stats xs;
    extract_ok (f, &b, NULL, &xs);
    assert_int_equal (xs.files, st.files);
    assert_int_equal (xs.dirs, st.dirs);
    assert_int_equal (xs.symlinks, st.symlinks);
    assert_int_equal (xs.bytes, st.bytes);
    compare_trees (f->src, f->dest, true);
    assert_file (f->dest, "run.sh", "#!/bin/sh\necho hi\n", 0755);
    assert_file (f->dest, "private", "mine\n", 0600);
    kiwi_buf_free (&b);
}

static void
test_gnu_tar_reads_ours (void **state)
{
    NEED_GNU_TAR ();
    fixture *f = *state;
    make_tree (f->src);
    kiwi_buf b = KIWI_BUF_INIT;
    pack (f->src, NULL, &b, NULL);
    char tarpath[400], gnu[400];
    path_join (tarpath, sizeof tarpath, f->top, "x.tar");
    path_join (gnu, sizeof gnu, f->top, "gnu");
    save (tarpath, &b);
    run ("tar -tvf '%s' >/dev/null", tarpath);
    run ("tar -tf '%s' | grep -qx 'long/%s'", tarpath, long_component);
    run ("tar -tf '%s' | grep -qx '%s'", tarpath, deep_path);
    mkdir (gnu, 0755);
    run ("tar -xf '%s' -C '%s'", tarpath, gnu);
    compare_trees (f->src, gnu, true);
    kiwi_buf_free (&b);
}

static void
extract_gnu_format (fixture *f, const char *format)
{
    make_tree (f->src);
    char tarpath[400];
    path_join (tarpath, sizeof tarpath, f->top, "x.tar");
    run ("tar --format=%s -cf '%s' -C '%s' .", format, tarpath, f->src);
    size_t len;
    char *data = read_all (tarpath, &len);
    assert_non_null (data);
    kiwi_buf b = { data, len, len, 0 };
    kiwi_archive_stats st;
    extract_ok (f, &b, NULL, &st);
    compare_trees (f->src, f->dest, true);
    assert_int_equal (st.ignored, 1); /* "./" */
    assert_int_equal (st.symlinks, 4);
    kiwi_buf_free (&b);
}

static void
test_extract_gnu_tar_gnu_format (void **state)
{
    NEED_GNU_TAR ();
    extract_gnu_format (*state, "gnu");
}

static void
test_extract_gnu_tar_pax_format (void **state)
{
    NEED_GNU_TAR ();
    extract_gnu_format (*state, "pax");
}

static void
test_strip_components (void **state)
{
    /* Docker's GET archive of /kiwi/src: every entry under "src/" */
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '5', "src/", NULL, NULL, 0755);
    raw (&b, '0', "src/a", NULL, "A", 0644);
    raw (&b, '5', "src/b/", NULL, NULL, 0700);
    raw (&b, '0', "src/b/c", NULL, "C", 0755);
    raw (&b, '1', "src/b/hard", "src/a", NULL, 0644);
    finish (&b);
    kiwi_extract_opts o = { .strip_components = 1 };
    kiwi_archive_stats st;
    extract_ok (f, &b, &o, &st);
    assert_file (f->dest, "a", "A", 0644);
    assert_file (f->dest, "b/c", "C", 0755);
    assert_file (f->dest, "b/hard", "A", 0644);
    assert_absent (f->dest, "src");
    assert_int_equal (st.ignored, 1);
    assert_int_equal (st.hardlinks, 1);
    kiwi_buf_free (&b);
}

static void
test_deterministic_and_sorted (void **state)
{
    fixture *f = *state;
    make_tree (f->src);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.mtime_mode = KIWI_ARCHIVE_MTIME_FIXED;
    o.mtime = 42;
    kiwi_buf a = KIWI_BUF_INIT, b = KIWI_BUF_INIT;
    pack (f->src, &o, &a, NULL);
    char p[400];
    path_join (p, sizeof p, f->src, "run.sh");
    struct timespec ts[2] = { { .tv_sec = 5 }, { .tv_sec = 5 } };
    utimensat (AT_FDCWD, p, ts, 0); /* a real mtime change must not matter */
    pack (f->src, &o, &b, NULL);
    assert_int_equal (a.len, b.len);
    assert_memory_equal (a.data, b.data, a.len);

    /* names come out sorted at every level (readdir order is not) */
    kiwi_tar_reader r;
    kiwi_tar_reader_init (&r, a.data, a.len);
    kiwi_tar_entry e;
    char prev[4096] = "";
    kiwi_error_t err = NULL;
    int rc;
    while ((rc = kiwi_tar_reader_next (&r, &e, &err)) == 1) {
        assert_int_equal (e.mtime, 42);
        assert_int_equal (e.uid, 1000);
        assert_int_equal (e.gid, 1000);
        /* compared as the walk sorts: by components */
        char cur[4096];
        snprintf (cur, sizeof cur, "%s", e.name);
        for (char *c = cur; *c; c++)
            if (*c == '/')
                *c = '\001';
        assert_true (strcmp (prev, cur) < 0);
        snprintf (prev, sizeof prev, "%s", cur);
    }
    assert_int_equal (rc, 0);
    kiwi_tar_reader_clear (&r);

    /* real mtimes and another owner */
    kiwi_buf c = KIWI_BUF_INIT;
    kiwi_archive_opts_init (&o);
    o.uid = 0;
    o.gid = 5;
    pack (f->src, &o, &c, NULL);
    kiwi_tar_reader_init (&r, c.data, c.len);
    bool found = false;
    while ((rc = kiwi_tar_reader_next (&r, &e, &err)) == 1) {
        assert_int_equal (e.uid, 0);
        assert_int_equal (e.gid, 5);
        if (strcmp (e.name, "run.sh") == 0) {
            assert_int_equal (e.mtime, 5);
            found = true;
        }
    }
    assert_int_equal (rc, 0);
    assert_true (found);
    kiwi_tar_reader_clear (&r);
    kiwi_buf_free (&a);
    kiwi_buf_free (&b);
    kiwi_buf_free (&c);
}

static bool
exclude_objects (const char *rel, const struct stat *st, void *ud)
{
    (void) st;
    (*(int *) ud)++;
    size_t n = strlen (rel);
    return n > 2 && strcmp (rel + n - 2, ".o") == 0;
}

static void
test_exclude_and_prefix (void **state)
{
    fixture *f = *state;
    make_tree (f->src);
    char p[400];
    path_join (p, sizeof p, f->src, "a/b/obj.o");
    write_file (p, "obj", 0644);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    const char *const ex[] = { ".git", NULL };
    int calls = 0;
    o.exclude = ex;
    o.exclude_fn = exclude_objects;
    o.exclude_userdata = &calls;
    o.prefix = "src";
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_archive_stats st;
    pack (f->src, &o, &b, &st);
    assert_int_equal (st.excluded, 2);
    assert_true (calls > 10);
    kiwi_extract_opts xo = { .strip_components = 1 };
    extract_ok (f, &b, &xo, NULL);
    assert_absent (f->dest, ".git");
    assert_absent (f->dest, "a/b/obj.o");
    assert_file (f->dest, "sub/.git/config", "nested\n", 0644); /* only the top-level .git */
    assert_file (f->dest, "run.sh", "#!/bin/sh\necho hi\n", 0755);
    kiwi_buf_free (&b);
}

static void
test_byte_ceiling (void **state)
{
    fixture *f = *state;
    make_tree (f->src);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.max_bytes = 4096;
    kiwi_buf b = KIWI_BUF_INIT;
    assert_int_equal (kiwi_buf_append (&b, "keep", 4, NULL), 0);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_from_dir (f->src, &o, &b, NULL, &err), -1);
    if (strstr (kiwi_error_msg (err), "ceiling of 4096 bytes") == NULL)
        fail_msg ("error `%s` does not name the ceiling", kiwi_error_msg (err));
    kiwi_error_free (&err);
    assert_int_equal (b.len, 4); /* as it was */

    /* one big file crosses the ceiling while being read */
    char p[400];
    path_join (p, sizeof p, f->src, "big");
    char *big = malloc (20000);
    memset (big, 'b', 19999);
    big[19999] = '\0';
    write_file (p, big, 0644);
    free (big);
    o.max_bytes = 16384;
    b.len = 0;
    assert_int_equal (kiwi_archive_from_dir (f->src, &o, &b, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "ceiling of 16384 bytes"));
    kiwi_error_free (&err);
    assert_int_equal (b.len, 0);
    kiwi_buf_free (&b);
}

static void
test_writer_skips_specials (void **state)
{
    fixture *f = *state;
    char p[400];
    path_join (p, sizeof p, f->src, "fifo");
    assert_int_equal (mkfifo (p, 0644), 0);
    path_join (p, sizeof p, f->src, "file");
    write_file (p, "f", 0644);
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_archive_stats st;
    pack (f->src, NULL, &b, &st);
    assert_int_equal (st.skipped, 1);
    assert_int_equal (st.files, 1);
    seen s = { 0 };
    assert_int_equal (kiwi_archive_list (b.data, b.len, collect, &s, NULL), 0);
    assert_int_equal (s.n, 1);
    assert_string_equal (s.names[0], "file");
    kiwi_buf_free (&b);
}

static void
test_writer_never_follows_symlinks (void **state)
{
    fixture *f = *state;
    /* outside the tree: a secret file and a directory holding one */
    char secret[400], secret_dir[400], inner[400], p[400];
    path_join (secret, sizeof secret, f->top, "sentinel/secret.txt");
    write_file (secret, SECRET "\n", 0644);
    path_join (secret_dir, sizeof secret_dir, f->top, "sentinel/dir");
    mkdir (secret_dir, 0755);
    path_join (inner, sizeof inner, secret_dir, "inner-" SECRET);
    write_file (inner, SECRET "\n", 0644);
    path_join (p, sizeof p, f->src, "leak-file");
    assert_int_equal (symlink (secret, p), 0);
    path_join (p, sizeof p, f->src, "leak-dir");
    assert_int_equal (symlink (secret_dir, p), 0);
    path_join (p, sizeof p, f->src, "leak-rel");
    assert_int_equal (symlink ("../sentinel/secret.txt", p), 0);

    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_archive_stats st;
    pack (f->src, NULL, &b, &st);
    assert_int_equal (st.symlinks, 3);
    assert_int_equal (st.files, 0);
    assert_int_equal (st.bytes, 0);
    assert_null (memmem (b.data, b.len, SECRET, strlen (SECRET)));
    seen s = { 0 };
    assert_int_equal (kiwi_archive_list (b.data, b.len, collect, &s, NULL), 0);
    assert_int_equal (s.n, 3);
    for (size_t i = 0; i < s.n; i++)
        assert_int_equal (s.types[i], KIWI_TAR_SYMLINK);
    assert_string_equal (s.links[0], secret_dir);
    assert_string_equal (s.links[1], secret);
    assert_string_equal (s.links[2], "../sentinel/secret.txt");
    kiwi_buf_free (&b);
}

/* -------------------------------------------------------------------------
 * Hostile archives.
 */
static void
test_reject_dotdot (void **state)
{
    fixture *f = *state;
    const char *names[] = { "../escape", "a/../../escape", "a/b/../../../escape", "./../escape", "..", "a/..",
                            "dir/../../escape/", NULL };
    for (const char **n = names; *n; n++) {
        kiwi_buf b = KIWI_BUF_INIT;
        raw (&b, '0', "fine", NULL, "ok", 0644); /* a good entry first: nothing at all is written */
        raw_dir_or_file (&b, *n);
        finish (&b);
        expect_reject (f, &b, NULL, *n);
        assert_int_equal (count_entries (f->dest), 0);
        kiwi_buf_free (&b);
    }
    /* the same name carried by a pax record and by a GNU long-name record */
    char longname[300];
    snprintf (longname, sizeof longname, "%s/../../../escape", long_component);
    for (int gnu = 0; gnu < 2; gnu++) {
        kiwi_buf b = KIWI_BUF_INIT;
        kiwi__tar_raw e = { .typeflag = '0', .name = longname, .mode = 0644, .data = "x", .len = 1,
                            .gnu_long = gnu };
        assert_int_equal (kiwi__archive_write_raw (&b, &e, 0, NULL), 0);
        finish (&b);
        expect_reject (f, &b, NULL, "../escape");
        kiwi_buf_free (&b);
    }
}

static void
test_reject_absolute (void **state)
{
    fixture *f = *state;
    char abs[400];
    path_join (abs, sizeof abs, f->top, "escape-abs");
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '0', abs, NULL, "pwned", 0644);
    finish (&b);
    expect_reject (f, &b, NULL, abs);
    assert_absent (f->top, "escape-abs");
    kiwi_buf_free (&b);

    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '5', "/", NULL, NULL, 0777);
    finish (&c);
    expect_reject (f, &c, NULL, "absolute");
    kiwi_buf_free (&c);
}

static void
test_reject_through_archive_symlink (void **state)
{
    fixture *f = *state;
    /* link -> the sentinel (absolute), then link/owned */
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '2', "link", f->sentinel, NULL, 0777);
    raw (&b, '0', "link/owned", NULL, "pwned", 0644);
    finish (&b);
    expect_reject (f, &b, NULL, "link/owned");
    assert_int_equal (count_entries (f->dest), 0);
    kiwi_buf_free (&b);

    /* a relative symlink to a directory outside, then a deeper write and a directory through it */
    const char *through[] = { "d/x/y", "d/sub/", "./d//z", NULL };
    for (const char **t = through; *t; t++) {
        kiwi_buf c = KIWI_BUF_INIT;
        raw (&c, '5', "ok/", NULL, NULL, 0755);
        raw (&c, '2', "ok/d", "../../sentinel", NULL, 0777);
        raw (&c, '2', "d", "../sentinel", NULL, 0777);
        raw_dir_or_file (&c, *t);
        finish (&c);
        expect_reject (f, &c, NULL, *t);
        kiwi_buf_free (&c);
    }

    /* through a file made by an earlier entry */
    kiwi_buf d = KIWI_BUF_INIT;
    raw (&d, '0', "file", NULL, "x", 0644);
    raw (&d, '0', "file/x", NULL, "y", 0644);
    finish (&d);
    expect_reject (f, &d, NULL, "file/x");
    kiwi_buf_free (&d);

    /* a directory replaced by a symlink, then written through */
    kiwi_buf e = KIWI_BUF_INIT;
    raw (&e, '5', "dir/", NULL, NULL, 0755);
    raw (&e, '2', "dir", f->sentinel, NULL, 0777);
    raw (&e, '0', "dir/owned", NULL, "pwned", 0644);
    finish (&e);
    expect_reject (f, &e, NULL, "dir");
    kiwi_buf_free (&e);
    assert_int_equal (count_entries (f->dest), 0);
}

static void
test_reject_through_existing_symlink (void **state)
{
    fixture *f = *state;
    char p[400];
    path_join (p, sizeof p, f->dest, "pre");
    assert_int_equal (symlink (f->sentinel, p), 0);
    path_join (p, sizeof p, f->dest, "pre-rel");
    assert_int_equal (symlink ("../sentinel", p), 0);
    const char *names[] = { "pre/owned", "pre-rel/owned", "pre/deeper/owned", "pre/", NULL };
    for (const char **n = names; *n; n++) {
        kiwi_buf b = KIWI_BUF_INIT;
        raw_dir_or_file (&b, *n);
        finish (&b);
        expect_reject (f, &b, NULL, *n);
        kiwi_buf_free (&b);
    }

    /* a file entry named like an existing symlink replaces the link, and
     * never writes through it */
    path_join (p, sizeof p, f->dest, "to-outside");
    assert_int_equal (symlink (f->outside, p), 0);
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '0', "to-outside", NULL, "replaced", 0644);
    raw (&c, '0', "pre", NULL, "replaced too", 0644);
    finish (&c);
    extract_ok (f, &c, NULL, NULL);
    assert_file (f->dest, "to-outside", "replaced", 0644);
    assert_file (f->dest, "pre", "replaced too", 0644);
    kiwi_buf_free (&c);

    /* an existing file that is a hardlink to a file outside: replaced, the outside untouched */
    path_join (p, sizeof p, f->dest, "hard-outside");
    assert_int_equal (link (f->outside, p), 0);
    kiwi_buf d = KIWI_BUF_INIT;
    raw (&d, '0', "hard-outside", NULL, "replaced", 0644);
    finish (&d);
    extract_ok (f, &d, NULL, NULL);
    assert_file (f->dest, "hard-outside", "replaced", 0644);
    kiwi_buf_free (&d);
}

static void
test_hardlinks (void **state)
{
    fixture *f = *state;
    const char *bad[][2] = { { "h", "/etc/passwd" }, { "h", "../outside.txt" }, { "h", "missing" },
                             { "h", "dir" }, { "h", "sym" }, { "h", "dir/../../outside.txt" }, { NULL, NULL } };
    for (size_t i = 0; bad[i][0]; i++) {
        kiwi_buf b = KIWI_BUF_INIT;
        raw (&b, '5', "dir/", NULL, NULL, 0755);
        raw (&b, '2', "sym", "/etc/passwd", NULL, 0777);
        raw (&b, '1', bad[i][0], bad[i][1], NULL, 0644);
        finish (&b);
        expect_reject (f, &b, NULL, "`h`");
        assert_int_equal (count_entries (f->dest), 0);
        kiwi_buf_free (&b);
    }
    /* a file that is in dest but not from this archive is no target either */
    char p[400];
    path_join (p, sizeof p, f->dest, "preexisting");
    write_file (p, "pre", 0644);
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '1', "h", "preexisting", NULL, 0644);
    finish (&c);
    expect_reject (f, &c, NULL, "preexisting");
    kiwi_buf_free (&c);
    reset_dest (f);

    /* to an earlier file of the archive: an independent copy */
    kiwi_buf d = KIWI_BUF_INIT;
    raw (&d, '0', "orig", NULL, "shared content", 0755);
    raw (&d, '1', "sub/copy", "./orig", NULL, 0644);
    finish (&d);
    kiwi_archive_stats st;
    extract_ok (f, &d, NULL, &st);
    assert_int_equal (st.files, 1);
    assert_int_equal (st.hardlinks, 1);
    assert_file (f->dest, "orig", "shared content", 0755);
    assert_file (f->dest, "sub/copy", "shared content", 0755);
    struct stat a, b2;
    path_join (p, sizeof p, f->dest, "orig");
    assert_int_equal (lstat (p, &a), 0);
    path_join (p, sizeof p, f->dest, "sub/copy");
    assert_int_equal (lstat (p, &b2), 0);
    assert_true (a.st_ino != b2.st_ino);
    assert_int_equal (a.st_nlink, 1);
    kiwi_buf_free (&d);
}

static void
test_devices_skipped (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi__tar_raw dev = { .typeflag = '3', .name = "null0", .mode = 0666, .devmajor = 1, .devminor = 3 };
    assert_int_equal (kiwi__archive_write_raw (&b, &dev, 0, NULL), 0);
    kiwi__tar_raw blk = { .typeflag = '4', .name = "sda0", .mode = 0660, .devmajor = 8, .devminor = 0 };
    assert_int_equal (kiwi__archive_write_raw (&b, &blk, 0, NULL), 0);
    raw (&b, '6', "fifo", NULL, NULL, 0644);
    raw (&b, '0', "file", NULL, "f", 0644);
    finish (&b);
    kiwi_archive_stats st;
    extract_ok (f, &b, NULL, &st);
    assert_int_equal (st.skipped, 3);
    assert_int_equal (st.files, 1);
    assert_int_equal (count_entries (f->dest), 1);
    kiwi_buf_free (&b);

    /* a device's name is still checked */
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '3', "../null0", NULL, NULL, 0666);
    finish (&c);
    expect_reject (f, &c, NULL, "../null0");
    kiwi_buf_free (&c);
}

static void
test_modes_masked (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '0', "suid", NULL, "s", 04755);
    raw (&b, '0', "sgid", NULL, "g", 02711);
    raw (&b, '5', "sticky/", NULL, NULL, 01777);
    raw (&b, '5', "ro/", NULL, NULL, 0555);
    raw (&b, '0', "ro/inside", NULL, "i", 0444);
    raw (&b, '0', "none", NULL, "n", 0);
    raw (&b, '5', "late/sub/", NULL, NULL, 0755); /* a child's entry before its parent's */
    raw (&b, '5', "late/", NULL, NULL, 0600); /* no search permission */
    finish (&b);
    extract_ok (f, &b, NULL, NULL);
    assert_file (f->dest, "suid", "s", 0755);
    assert_file (f->dest, "sgid", "g", 0711);
    assert_file (f->dest, "ro/inside", "i", 0444);
    assert_file (f->dest, "none", "n", 0);
    struct stat st;
    char p[400];
    path_join (p, sizeof p, f->dest, "sticky");
    assert_int_equal (lstat (p, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0777);
    path_join (p, sizeof p, f->dest, "ro");
    assert_int_equal (lstat (p, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0555);
    path_join (p, sizeof p, f->dest, "late");
    assert_int_equal (lstat (p, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0600);
    chmod (p, 0700); /* to look inside without root */
    path_join (p, sizeof p, f->dest, "late/sub");
    assert_int_equal (lstat (p, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0755);
    kiwi_buf_free (&b);
}

static void
test_preserve_mtime (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '5', "d/", NULL, NULL, 0755);
    raw (&b, '0', "d/file", NULL, "x", 0644);
    raw (&b, '2', "d/link", "file", NULL, 0777);
    finish (&b);
    const char *names[] = { "d", "d/file", "d/link" };
    kiwi_extract_opts o = { .preserve_mtime = true };
    extract_ok (f, &b, &o, NULL);
    for (size_t i = 0; i < 3; i++) {
        char p[400];
        struct stat st;
        path_join (p, sizeof p, f->dest, names[i]);
        assert_int_equal (lstat (p, &st), 0);
        assert_int_equal (st.st_mtim.tv_sec, 1700000000); /* what raw() writes */
    }
    /* without the option: the time of extraction */
    reset_dest (f);
    extract_ok (f, &b, NULL, NULL);
    char p[400];
    struct stat st;
    path_join (p, sizeof p, f->dest, "d/file");
    assert_int_equal (lstat (p, &st), 0);
    assert_true (st.st_mtim.tv_sec > 1700000000 + 1000);
    kiwi_buf_free (&b);
}

static void
test_overwrite_rules (void **state)
{
    fixture *f = *state;
    char p[400];
    path_join (p, sizeof p, f->dest, "a");
    write_file (p, "old", 0644);
    path_join (p, sizeof p, f->dest, "d");
    mkdir (p, 0755);
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '0', "a", NULL, "new", 0600);
    raw (&b, '0', "dup", NULL, "first", 0644);
    raw (&b, '0', "dup", NULL, "second", 0644);
    raw (&b, '5', "d/", NULL, NULL, 0700);
    finish (&b);
    extract_ok (f, &b, NULL, NULL);
    assert_file (f->dest, "a", "new", 0600);
    assert_file (f->dest, "dup", "second", 0644);
    kiwi_buf_free (&b);

    /* an existing directory is never replaced by a file or a symlink */
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '0', "d", NULL, "file", 0644);
    finish (&c);
    expect_reject (f, &c, NULL, "`d`");
    kiwi_buf_free (&c);
    kiwi_buf d = KIWI_BUF_INIT;
    raw (&d, '2', "d", "/", NULL, 0777);
    finish (&d);
    expect_reject (f, &d, NULL, "`d`");
    kiwi_buf_free (&d);
    /* and inside one archive neither */
    kiwi_buf e = KIWI_BUF_INIT;
    raw (&e, '5', "x/", NULL, NULL, 0755);
    raw (&e, '0', "x", NULL, "file", 0644);
    finish (&e);
    expect_reject (f, &e, NULL, "`x`");
    kiwi_buf_free (&e);
}

static void
test_ceilings (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '0', "one", NULL, "1111", 0644);
    raw (&b, '0', "two", NULL, "2222", 0644);
    raw (&b, '0', "three", NULL, "3333", 0644);
    raw (&b, '1', "four", "one", NULL, 0644);
    finish (&b);
    kiwi_extract_opts o = { .max_entries = 2 };
    expect_reject (f, &b, &o, "three");
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_extract (b.data, b.len, f->dest, &o, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "more than 2 entries"));
    kiwi_error_free (&err);
    kiwi_extract_opts o2 = { .max_bytes = 10 };
    expect_reject (f, &b, &o2, "three");
    kiwi_extract_opts o3 = { .max_bytes = 13 }; /* a hardlink copy counts */
    expect_reject (f, &b, &o3, "four");
    assert_int_equal (kiwi_archive_extract (b.data, b.len, f->dest, &o3, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "ceiling of 13 bytes"));
    kiwi_error_free (&err);
    assert_int_equal (count_entries (f->dest), 0);
    kiwi_extract_opts o4 = { .max_bytes = 16, .max_entries = 4 };
    extract_ok (f, &b, &o4, NULL);
    kiwi_buf_free (&b);
}

static void
test_bad_checksum_and_structure (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '0', "first", NULL, "1", 0644);
    raw (&b, '0', "victim", NULL, "2", 0644);
    finish (&b);
    b.data[1024 + 100] ^= 1; /* the mode field of "victim" */
    expect_reject (f, &b, NULL, "checksum");
    expect_reject (f, &b, NULL, "victim");
    assert_int_equal (count_entries (f->dest), 0);
    kiwi_buf_free (&b);

    /* a size beyond the archive */
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '0', "huge", NULL, "x", 0644);
    finish (&c);
    memcpy (c.data + 124, "77777777777", 11);
    unsigned sum = 0;
    memset (c.data + 148, ' ', 8);
    for (int i = 0; i < 512; i++)
        sum += (unsigned char) c.data[i];
    snprintf (c.data + 148, 8, "%06o", sum);
    expect_reject (f, &c, NULL, "huge");
    kiwi_buf_free (&c);

    /* unsupported types */
    kiwi_buf d = KIWI_BUF_INIT;
    raw (&d, 'S', "sparse", NULL, "x", 0644);
    finish (&d);
    expect_reject (f, &d, NULL, "sparse");
    kiwi_buf_free (&d);

    /* a pax record that lies about its length */
    kiwi_buf e = KIWI_BUF_INIT;
    raw (&e, 'x', "././@PaxHeader", NULL, "99 path=x\n", 0644);
    raw (&e, '0', "y", NULL, "y", 0644);
    finish (&e);
    expect_reject (f, &e, NULL, "pax record");
    kiwi_buf_free (&e);

    /* a NUL inside a pax path */
    kiwi_buf g = KIWI_BUF_INIT;
    kiwi__tar_raw px = { .typeflag = 'x', .name = "././@PaxHeader", .mode = 0644, .data = "12 path=a\0b\n",
                         .len = 12 };
    assert_int_equal (kiwi__archive_write_raw (&g, &px, 0, NULL), 0);
    raw (&g, '0', "y", NULL, "y", 0644);
    finish (&g);
    expect_reject (f, &g, NULL, "NUL");
    kiwi_buf_free (&g);
}

/* Valid archive with every kind of record, for truncation and bit flips. */
static void
sample_archive (kiwi_buf *b)
{
    raw (b, '5', "dir/", NULL, NULL, 0755);
    raw (b, '0', "dir/file", NULL, "some content\n", 0644);
    raw (b, '0', "empty", NULL, NULL, 0600);
    raw (b, '2', "link", "dir/file", NULL, 0777);
    raw (b, '1', "hard", "dir/file", NULL, 0644);
    raw (b, '0', deep_path, NULL, "deep (pax)\n", 0755);
    kiwi__tar_raw g = { .typeflag = '0', .name = long_component, .mode = 0644, .data = "gnu\n", .len = 4,
                        .gnu_long = true };
    assert_int_equal (kiwi__archive_write_raw (b, &g, 0, NULL), 0);
    raw (b, '2', "long-link", long_target, NULL, 0777);
    finish (b);
}

static void
test_truncated_at_every_offset (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    sample_archive (&b);
    for (size_t n = 0; n < b.len; n++) {
        /* a private copy, so ASan sees any read past the cut */
        char *cut = malloc (n ? n : 1);
        memcpy (cut, b.data, n);
        kiwi_error_t err = NULL;
        int rc = kiwi_archive_extract (cut, n, f->dest, NULL, NULL, &err);
        if (rc != -1)
            fail_msg ("an archive cut at %zu of %zu bytes was accepted", n, b.len);
        assert_true (strlen (kiwi_error_msg (err)) > 0);
        kiwi_error_free (&err);
        /* checked before anything is written */
        if (count_entries (f->dest) != 0)
            fail_msg ("an archive cut at %zu wrote into dest", n);
        free (cut);
    }
    assert_nothing_outside (f);
    kiwi_archive_stats st;
    extract_ok (f, &b, NULL, &st);
    assert_int_equal (st.files, 4);
    assert_int_equal (st.hardlinks, 1);
    assert_int_equal (st.symlinks, 2);
    kiwi_buf_free (&b);
}

static uint32_t
rnd (uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t) (*s >> 11);
}

static void
fix_checksums (char *data, size_t len)
{
    for (size_t off = 0; off + 512 <= len; off += 512) {
        unsigned char *h = (unsigned char *) data + off;
        if (memcmp (h + 257, "ustar", 5) != 0)
            continue;
        memset (h + 148, ' ', 8);
        unsigned sum = 0;
        for (int i = 0; i < 512; i++)
            sum += h[i];
        char tmp[16];
        snprintf (tmp, sizeof tmp, "%06o", sum & 0777777);
        memcpy (h + 148, tmp, 7);
    }
}

static void
test_garbage_and_bit_flips (void **state)
{
    fixture *f = *state;
    fprintf (stderr, "test_archive: fuzz seed %u (replay with KIWI_TEST_SEED=%u)\n", seed, seed);
    uint64_t s = (uint64_t) seed * 2654435761u + 1;

    /* garbage: random bytes, sometimes with a plausible header around them */
    for (int i = 0; i < 1500; i++) {
        size_t n = rnd (&s) % 4096;
        char *g = malloc (n ? n : 1);
        for (size_t j = 0; j < n; j++)
            g[j] = (char) rnd (&s);
        if (n >= 512 && (i & 1)) {
            memcpy (g + 257, "ustar", 6);
            fix_checksums (g, n);
        }
        kiwi_error_t err = NULL;
        if (kiwi_archive_extract (g, n, f->dest, NULL, NULL, &err) < 0)
            kiwi_error_free (&err);
        free (g);
        assert_nothing_outside (f);
        reset_dest (f);
    }

    /* bit flips of a valid archive, with the checksums repaired half the time */
    kiwi_buf b = KIWI_BUF_INIT;
    sample_archive (&b);
    /* and escape attempts that a single flip would make */
    kiwi_buf base = KIWI_BUF_INIT;
    b.len -= 1024;
    raw (&b, '2', "sl", f->sentinel, NULL, 0777);
    raw (&b, '0', "sm/owned", NULL, "pwned", 0644);  /* one bit from "sl/owned" */
    raw (&b, '0', ".,/escape", NULL, "pwned", 0644); /* one bit from "../escape" */
    finish (&b);
    assert_int_equal (kiwi_buf_append (&base, b.data, b.len, NULL), 0);
    size_t accepted = 0;
    for (int i = 0; i < 2500; i++) {
        memcpy (b.data, base.data, base.len);
        int flips = 1 + (int) (rnd (&s) % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = rnd (&s) % b.len;
            b.data[at] ^= (char) (1u << (rnd (&s) % 8));
        }
        if (rnd (&s) & 1)
            fix_checksums (b.data, b.len);
        kiwi_error_t err = NULL;
        if (kiwi_archive_extract (b.data, b.len, f->dest, NULL, NULL, &err) < 0)
            kiwi_error_free (&err);
        else
            accepted++;
        assert_nothing_outside (f);
        reset_dest (f);
    }
    fprintf (stderr, "test_archive: %zu of 2500 flipped archives were still valid\n", accepted);
    kiwi_buf_free (&b);
    kiwi_buf_free (&base);
}

/* A racer swaps a directory of dest for a symlink to the sentinel while
 * files are extracted into it: nothing may land in the sentinel. */
typedef struct racer {
    const fixture *f;
    volatile int stop;
} racer;

static void *
race (void *arg)
{
    racer *r = arg;
    char d[400], tmp[400];
    path_join (d, sizeof d, r->f->dest, "d");
    path_join (tmp, sizeof tmp, r->f->dest, "d.real");
    while (!r->stop) {
        if (rename (d, tmp) == 0) {
            symlink (r->f->sentinel, d);
            for (volatile int i = 0; i < 200; i++)
                ;
            unlink (d);
            rename (tmp, d);
        }
    }
    return NULL;
}

static void
test_symlink_swap_race (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '5', "d/", NULL, NULL, 0755);
    char name[64];
    for (int i = 0; i < 300; i++) {
        snprintf (name, sizeof name, "d/sub%d/f%d", i % 7, i);
        raw (&b, '0', name, NULL, "racy", 0644);
    }
    finish (&b);
    int failures = 0;
    for (int round = 0; round < 40; round++) {
        reset_dest (f);
        char d[400];
        path_join (d, sizeof d, f->dest, "d");
        mkdir (d, 0755);
        racer r = { .f = f };
        pthread_t t;
        assert_int_equal (pthread_create (&t, NULL, race, &r), 0);
        kiwi_error_t err = NULL;
        if (kiwi_archive_extract (b.data, b.len, f->dest, NULL, NULL, &err) < 0) {
            failures++;
            kiwi_error_free (&err);
        }
        r.stop = 1;
        pthread_join (t, NULL);
        assert_nothing_outside (f);
    }
    fprintf (stderr, "test_archive: %d of 40 racing extractions stopped with an error\n", failures);
    kiwi_buf_free (&b);
}


/* Paths the format library could take: a real GNU sparse file (gnu 'S'
 * headers with a map, pax GNU.sparse 1.0 records), a type byte no reader
 * knows, a GNU long link ('K') naming a hardlink target outside. All are
 * refused, and nothing is written. */
static void
test_sparse_unknown_and_long_links (void **state)
{
    fixture *f = *state;
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, 'Z', "mystery", NULL, "x", 0644);
    finish (&b);
    expect_reject (f, &b, NULL, "unsupported type");
    kiwi_buf_free (&b);

    char target[300];
    snprintf (target, sizeof target, "%s/../../outside.txt", long_component);
    kiwi_buf c = KIWI_BUF_INIT;
    raw (&c, '0', "ok", NULL, "ok", 0644);
    kiwi__tar_raw h = { .typeflag = '1', .name = "h", .linkname = target, .mode = 0644, .gnu_long = true };
    assert_int_equal (kiwi__archive_write_raw (&c, &h, 0, NULL), 0);
    finish (&c);
    expect_reject (f, &c, NULL, "`h`");
    assert_int_equal (count_entries (f->dest), 0);
    kiwi_buf_free (&c);

    if (!have_gnu_tar ())
        return;
    char p[400], tarpath[400];
    path_join (p, sizeof p, f->src, "holes.bin");
    run ("truncate -s 4M '%s' && printf data | dd of='%s' bs=1 seek=2000000 conv=notrunc status=none", p, p);
    path_join (tarpath, sizeof tarpath, f->top, "x.tar");
    static const char *const formats[] = { "gnu", "pax" };
    for (size_t i = 0; i < 2; i++) {
        run ("tar --format=%s --sparse --sparse-version=1.0 -cf '%s' -C '%s' holes.bin 2>/dev/null || "
             "tar --format=%s --sparse -cf '%s' -C '%s' holes.bin",
             formats[i], tarpath, f->src, formats[i], tarpath, f->src);
        size_t len;
        char *data = read_all (tarpath, &len);
        assert_non_null (data);
        kiwi_buf t = { data, len, len, 0 };
        expect_reject (f, &t, NULL, "sparse");
        assert_int_equal (count_entries (f->dest), 0);
        kiwi_buf_free (&t);
    }
}

/* The meter, fed in one piece and a byte at a time: the same count. */
static uint64_t
meter_both (const void *data, size_t len, uint64_t *announced)
{
    kiwi_tar_meter a, b;
    kiwi_tar_meter_init (&a);
    kiwi_tar_meter_init (&b);
    kiwi_tar_meter_feed (&a, data, len);
    for (size_t i = 0; i < len; i++)
        kiwi_tar_meter_feed (&b, (const char *) data + i, 1);
    assert_int_equal (kiwi_tar_meter_size (&a), kiwi_tar_meter_size (&b));
    assert_int_equal (a.announced, b.announced);
    assert_int_equal (a.pos, len);
    if (announced)
        *announced = a.announced;
    return kiwi_tar_meter_size (&a);
}

static void
test_meter_counts_bytes_and_sizes (void **state)
{
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t err = NULL;
    char *data = calloc (1, 5000);
    assert_int_equal (kiwi_archive_add_file (&b, "a", data, 1000, 0644, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&b, "b", data, 3000, 0644, &o, &err), 0);
    /* a file whose content is a header announcing 8 GiB: content, not a header */
    char fake[512];
    memset (fake, 0, sizeof fake);
    memcpy (fake, "fake", 4);
    memcpy (fake + 124, "77777777777", 11);
    fake[156] = '0';
    memcpy (fake + 257, "ustar", 6);
    assert_int_equal (kiwi_archive_add_file (&b, "c", fake, sizeof fake, 0644, &o, &err), 0);
    assert_int_equal (kiwi_archive_finish (&b, &err), 0);
    uint64_t announced = 0;
    assert_int_equal (meter_both (b.data, b.len, &announced), b.len);
    assert_int_equal (announced, 1000 + 3000 + 512);
    /* only the header of a large entry: its size counts already */
    kiwi_buf h = KIWI_BUF_INIT;
    char *big = calloc (1, 1 << 20);
    assert_int_equal (kiwi_archive_add_file (&h, "big", big, 1 << 20, 0644, &o, &err), 0);
    assert_true (meter_both (h.data, 512, NULL) >= (1u << 20));
    free (big);
    free (data);
    kiwi_buf_free (&h);
    kiwi_buf_free (&b);
}

/* GNU tar's headers for an 8 GiB sparse file (pax size record; gnu
 * base-256 size): the first blocks of the stream are enough to see it. */
static void
test_meter_pax_and_base256 (void **state)
{
    NEED_GNU_TAR ();
    fixture *f = *state;
    char big[400], out[400];
    path_join (big, sizeof big, f->src, "sparse.bin");
    run ("truncate -s 8G '%s'", big);
    static const char *const formats[] = { "pax", "gnu" };
    for (size_t i = 0; i < 2; i++) {
        path_join (out, sizeof out, f->top, "head.tar");
        /* tar stops at the closed pipe: only the headers and a little data */
        run ("(tar --format=%s -C '%s' -cf - sparse.bin || true) | head -c 8192 >'%s'", formats[i], f->src, out);
        size_t len;
        char *data = read_all (out, &len);
        assert_non_null (data);
        assert_true (len > 1024 && len <= 8192);
        uint64_t announced = 0;
        uint64_t n = meter_both (data, len, &announced);
        if (n < UINT64_C (8) * 1024 * 1024 * 1024)
            fail_msg ("%s format: the meter saw %llu bytes for an 8 GiB file", formats[i], (unsigned long long) n);
        free (data);
    }
}

/* -------------------------------------------------------------------------
 * Rewriting archives into one stream (kiwi_archive_rewrite).
 */
#define RW_UID 1234
#define RW_GID 2345
#define SINK_MSG "sink: the pipe to the container broke"

/* A sink appending to a buffer; with fail_after set it takes that many bytes
 * and refuses the call that would pass them (like a pipe breaking midway). */
typedef struct sink_state {
    kiwi_buf out;
    size_t calls;
    size_t fail_after;          /* SIZE_MAX: never fails */
    bool set_error;             /* the refusal comes with an error (SINK_MSG) */
    bool failed;
    size_t calls_after_failure; /* must stay 0: the stream is broken */
} sink_state;

#define SINK_INIT { .out = KIWI_BUF_INIT, .fail_after = SIZE_MAX, .set_error = true }

static int
sink_append (const void *data, size_t len, void *ud, kiwi_error_t *err)
{
    sink_state *s = ud;
    if (s->failed) {
        s->calls_after_failure++;
        return kiwi_error_make (err, 0, "sink called again after it failed");
    }
    s->calls++;
    if (len > s->fail_after - s->out.len) {
        s->failed = true;
        assert_int_equal (kiwi_buf_append (&s->out, data, s->fail_after - s->out.len, NULL), 0);
        return s->set_error ? kiwi_error_make (err, EPIPE, SINK_MSG) : -1;
    }
    return kiwi_buf_append (&s->out, data, len, err);
}

static kiwi_rewrite_part
part_of (const kiwi_buf *b, const char *what)
{
    return (kiwi_rewrite_part){ .tar = b->data, .len = b->len, .what = what };
}

/* One raw entry with its own mtime (raw() with a time). */
static void
raw_t (kiwi_buf *b, char type, const char *name, const char *link, const char *data, uint32_t mode, int64_t mtime)
{
    kiwi__tar_raw e = { .typeflag = type, .name = name, .linkname = link, .mode = mode, .uid = 1000,
                        .gid = 1000, .mtime = mtime, .data = data, .len = data ? strlen (data) : 0 };
    kiwi_error_t err = NULL;
    if (kiwi__archive_write_raw (b, &e, 0, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
}

/* The rewrite of `parts` as uid:gid must succeed; *out gets the stream. */
static void
rewrite_as (const kiwi_rewrite_part *parts, size_t n, uint32_t uid, uint32_t gid, const kiwi_extract_opts *opts,
            kiwi_buf *out, kiwi_extract_stats *st)
{
    sink_state s = SINK_INIT;
    kiwi_error_t err = NULL;
    if (kiwi_archive_rewrite (parts, n, uid, gid, opts, sink_append, &s, st, &err) < 0)
        fail_msg ("kiwi_archive_rewrite: %s", kiwi_error_msg (err));
    assert_null (err);
    assert_int_equal (s.calls_after_failure, 0);
    *out = s.out;
}

static void
rewrite_ok (const kiwi_rewrite_part *parts, size_t n, const kiwi_extract_opts *opts, kiwi_buf *out,
            kiwi_extract_stats *st)
{
    rewrite_as (parts, n, RW_UID, RW_GID, opts, out, st);
}

/* The rewrite must fail with an error containing `needle` (and `needle2`
 * when given), and the sink must not have received a single byte. Returns
 * NULL when so, else what went wrong (free() it), having freed its own
 * buffers, so a caller can free its parts before failing. */
static char *
check_rewrite_reject (const kiwi_rewrite_part *parts, size_t n, const kiwi_extract_opts *opts, const char *needle,
                      const char *needle2)
{
    sink_state s = SINK_INIT;
    kiwi_error_t err = NULL;
    char *why = NULL;
    int rc = kiwi_archive_rewrite (parts, n, RW_UID, RW_GID, opts, sink_append, &s, NULL, &err);
    const char *msg = err ? kiwi_error_msg (err) : "";
    if (rc >= 0)
        assert_true (asprintf (&why, "rewrite succeeded (%zu bytes to the sink); expected an error naming `%s`",
                               s.out.len, needle) > 0);
    else if (err == NULL)
        assert_true (asprintf (&why, "rewrite failed without an error; expected one naming `%s`", needle) > 0);
    else if (strstr (msg, needle) == NULL || (needle2 && strstr (msg, needle2) == NULL))
        assert_true (asprintf (&why, "error `%s` does not name `%s`%s%s", msg, needle, needle2 ? " and " : "",
                               needle2 ? needle2 : "") > 0);
    else if (s.out.len != 0 || s.calls_after_failure != 0)
        assert_true (asprintf (&why, "rejected (`%s`), yet the sink received %zu bytes", msg, s.out.len) > 0);
    kiwi_error_free (&err);
    kiwi_buf_free (&s.out);
    return why;
}

static void
expect_rewrite_reject (const kiwi_rewrite_part *parts, size_t n, const kiwi_extract_opts *opts, const char *needle,
                       const char *needle2)
{
    char *why = check_rewrite_reject (parts, n, opts, needle, needle2);
    if (why) {
        char msg[1024];
        snprintf (msg, sizeof msg, "%s", why);
        free (why);
        fail_msg ("%s", msg);
    }
}

/* Every entry of an archive, copied out. */
typedef struct listed {
    char *name;
    char *link;
    kiwi_tar_type type;
    uint32_t mode;
    uint64_t uid, gid;
    int64_t mtime;
    char *data; /* size bytes, NUL-terminated; NULL unless a file */
    size_t size;
} listed;

typedef struct listing {
    listed *e;
    size_t n;
} listing;

static int
collect_all (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    (void) err;
    listing *l = ud;
    listed *grown = realloc (l->e, (l->n + 1) * sizeof *grown);
    assert_non_null (grown);
    l->e = grown;
    listed *x = &l->e[l->n++];
    memset (x, 0, sizeof *x);
    x->name = strdup (e->name);
    x->link = strdup (e->linkname ? e->linkname : "");
    assert_non_null (x->name);
    assert_non_null (x->link);
    x->type = e->type;
    x->mode = e->mode;
    x->uid = e->uid;
    x->gid = e->gid;
    x->mtime = e->mtime;
    x->size = e->size;
    if (e->type == KIWI_TAR_FILE) {
        x->data = malloc (e->size + 1);
        assert_non_null (x->data);
        if (e->size)
            memcpy (x->data, e->data, e->size);
        x->data[e->size] = '\0';
    }
    return 0;
}

static void
list_all (const kiwi_buf *b, listing *l)
{
    memset (l, 0, sizeof *l);
    kiwi_error_t err = NULL;
    if (kiwi_archive_list (b->data, b->len, collect_all, l, &err) != 0)
        fail_msg ("listing the rewritten stream: %s", kiwi_error_msg (err));
}

static void
listing_free (listing *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free (l->e[i].name);
        free (l->e[i].link);
        free (l->e[i].data);
    }
    free (l->e);
    memset (l, 0, sizeof *l);
}

/* name without a trailing '/' equals path[0..n) */
static bool
names_path (const char *name, const char *path, size_t n)
{
    size_t ln = strlen (name);
    if (ln > 0 && name[ln - 1] == '/')
        ln--;
    return ln == n && memcmp (name, path, n) == 0;
}

static const listed *
listing_find (const listing *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (names_path (l->e[i].name, path, strlen (path)))
            return &l->e[i];
    return NULL;
}

/* What a trusting consumer may rely on: every name relative, without `.`,
 * `..` or empty components, each path once, nothing under a non-directory
 * of the stream, only files, directories and symlinks, owner uid:gid,
 * permission bits only. */
static void
assert_clean_stream (const listing *l, uint64_t uid, uint64_t gid)
{
    for (size_t i = 0; i < l->n; i++) {
        const listed *x = &l->e[i];
        const char *nm = x->name;
        size_t ln = strlen (nm);
        if (ln == 0 || nm[0] == '/')
            fail_msg ("entry `%s`: empty or absolute", nm);
        if (x->type != KIWI_TAR_FILE && x->type != KIWI_TAR_DIR && x->type != KIWI_TAR_SYMLINK)
            fail_msg ("entry `%s`: type %s in the rewritten stream", nm, kiwi_tar_type_str (x->type));
        if (x->uid != uid || x->gid != gid)
            fail_msg ("entry `%s`: owner %llu:%llu, expected %llu:%llu", nm, (unsigned long long) x->uid,
                      (unsigned long long) x->gid, (unsigned long long) uid, (unsigned long long) gid);
        if ((x->mode & ~(uint32_t) 0777) != 0)
            fail_msg ("entry `%s`: mode %o has more than permission bits", nm, x->mode);
        if ((x->type == KIWI_TAR_DIR) != (nm[ln - 1] == '/'))
            fail_msg ("entry `%s`: a trailing slash must mark exactly the directories", nm);
        size_t plen = nm[ln - 1] == '/' ? ln - 1 : ln;
        /* components */
        for (size_t s = 0; s < plen;) {
            size_t e = s;
            while (e < plen && nm[e] != '/')
                e++;
            size_t cl = e - s;
            if (cl == 0 || (cl == 1 && nm[s] == '.') || (cl == 2 && nm[s] == '.' && nm[s + 1] == '.'))
                fail_msg ("entry `%s`: empty, `.` or `..` component", nm);
            /* a proper prefix that the stream also names must be a directory */
            if (e < plen) {
                for (size_t j = 0; j < l->n; j++)
                    if (names_path (l->e[j].name, nm, e) && l->e[j].type != KIWI_TAR_DIR)
                        fail_msg ("entry `%s` lies under `%s`, a %s of the stream", nm, l->e[j].name,
                                  kiwi_tar_type_str (l->e[j].type));
            }
            s = e + 1;
        }
        for (size_t j = 0; j < i; j++)
            if (names_path (l->e[j].name, nm, plen))
                fail_msg ("path `%s` appears twice (`%s` and `%s`)", nm, l->e[j].name, nm);
    }
}

static void
assert_listed (const listing *l, size_t idx, const char *name, kiwi_tar_type type, uint32_t mode, int64_t mtime,
               const char *data_or_link)
{
    if (idx >= l->n)
        fail_msg ("entry %zu (`%s`) missing: the stream has %zu entries", idx, name, l->n);
    const listed *x = &l->e[idx];
    if (strcmp (x->name, name) != 0)
        fail_msg ("entry %zu is `%s`, expected `%s`", idx, x->name, name);
    if (x->type != type)
        fail_msg ("`%s`: a %s, expected a %s", name, kiwi_tar_type_str (x->type), kiwi_tar_type_str (type));
    if (type != KIWI_TAR_SYMLINK && x->mode != mode)
        fail_msg ("`%s`: mode %o, expected %o", name, x->mode, mode);
    if (x->mtime != mtime)
        fail_msg ("`%s`: mtime %lld, expected %lld", name, (long long) x->mtime, (long long) mtime);
    if (type == KIWI_TAR_FILE) {
        assert_int_equal (x->size, strlen (data_or_link));
        if (strcmp (x->data, data_or_link) != 0)
            fail_msg ("`%s`: content `%s`, expected `%s`", name, x->data, data_or_link);
    } else if (type == KIWI_TAR_SYMLINK) {
        if (strcmp (x->link, data_or_link) != 0)
            fail_msg ("`%s`: target `%s`, expected `%s`", name, x->link, data_or_link);
    } else
        assert_int_equal (x->size, 0);
}

/* Part one of the equivalence test: "src/...", with everything the plan
 * must fold (hardlinks, repeated paths, odd spellings, long names). */
static void
rewrite_part_src (kiwi_buf *b, char *long_name, size_t long_name_size)
{
    snprintf (long_name, long_name_size, "src/long/%s", long_component);
    raw_t (b, '5', "src/", NULL, NULL, 0755, 100);
    raw_t (b, '0', "src/a.txt", NULL, "first\n", 0644, 101);
    raw_t (b, '5', "src/sub/", NULL, NULL, 0700, 102);
    raw_t (b, '0', "src/sub/b.txt", NULL, "bee\n", 0600, 103);
    raw_t (b, '2', "src/link", "a.txt", NULL, 0777, 104);
    raw_t (b, '2', "src/abs", "/etc/passwd", NULL, 0777, 105);
    raw_t (b, '1', "src/hard", "src/a.txt", NULL, 0600, 106);     /* a copy of "first\n", 0644 */
    raw_t (b, '0', "./src//dot.txt", NULL, "dot\n", 0640, 107);  /* spelled oddly */
    raw_t (b, '0', "src/a.txt", NULL, "second\n", 0664, 108);    /* the same path again */
    raw_t (b, '5', "src/sub", NULL, NULL, 0750, 109);            /* the same directory, another mode */
    raw_t (b, '0', long_name, NULL, "long name\n", 0644, 110);   /* under an implicit directory */
    raw_t (b, '2', "src/long-link", long_target, NULL, 0777, 111);
    raw_t (b, '0', "src/suid", NULL, "s\n", 06755, 112);
    raw_t (b, '2', "src/will-be-file", "a.txt", NULL, 0777, 113);
    raw_t (b, '0', "src/will-be-link", NULL, "x\n", 0644, 114);
    raw_t (b, '1', "src/sub/hard2", "./src/sub/b.txt", NULL, 0644, 115);
    raw_t (b, '0', "src/r\xc3\xa9pertoire-\xe4\xb8\x96.txt", NULL, "unicode\n", 0644, 116);
    finish (b);
}

/* Part two: "home/...", and later words on some of part one's paths. */
static void
rewrite_part_home (kiwi_buf *b)
{
    raw_t (b, '5', "home/", NULL, NULL, 0755, 200);
    raw_t (b, '5', "home/user/", NULL, NULL, 0711, 201);
    raw_t (b, '0', "home/user/.profile", NULL, "export X=1\n", 0644, 202);
    raw_t (b, '2', "home/user/src", "../../src", NULL, 0777, 203);
    raw_t (b, '0', "src/a.txt", NULL, "third\n", 0600, 204);           /* across parts: the last wins */
    raw_t (b, '0', "src/will-be-file", NULL, "now a file\n", 0644, 205); /* a symlink becomes a file */
    raw_t (b, '2', "src/will-be-link", "a.txt", NULL, 0777, 206);      /* a file becomes a symlink */
    raw_t (b, '5', "src/", NULL, NULL, 0711, 207);                     /* a directory of part one, new mode */
    raw_t (b, '1', "home/user/hard", "home/user/.profile", NULL, 0644, 208);
    raw_t (b, '0', "home/user/.profile", NULL, "export X=2\n", 0644, 209);
    finish (b);
}

static void
test_rewrite_equivalence (void **state)
{
    fixture *f = *state;
    char long_name[300];
    kiwi_buf p1 = KIWI_BUF_INIT, p2 = KIWI_BUF_INIT;
    rewrite_part_src (&p1, long_name, sizeof long_name);
    rewrite_part_home (&p2);
    kiwi_rewrite_part parts[] = { part_of (&p1, "src.tar"), part_of (&p2, "home.tar") };

    kiwi_buf out = KIWI_BUF_INIT;
    kiwi_extract_stats st;
    memset (&st, 0xa5, sizeof st); /* the call sets every counter */
    rewrite_ok (parts, 2, NULL, &out, &st);
    assert_true (out.len > 0);
    assert_int_equal (out.len % 512, 0);

    listing l;
    list_all (&out, &l);
    assert_clean_stream (&l, RW_UID, RW_GID);
    /* one entry per path, in the order each path first appears, as the parts last left it */
    size_t i = 0;
    assert_listed (&l, i++, "src/", KIWI_TAR_DIR, 0711, 207, NULL);
    assert_listed (&l, i++, "src/a.txt", KIWI_TAR_FILE, 0600, 204, "third\n");
    assert_listed (&l, i++, "src/sub/", KIWI_TAR_DIR, 0750, 109, NULL);
    assert_listed (&l, i++, "src/sub/b.txt", KIWI_TAR_FILE, 0600, 103, "bee\n");
    assert_listed (&l, i++, "src/link", KIWI_TAR_SYMLINK, 0, 104, "a.txt");
    assert_listed (&l, i++, "src/abs", KIWI_TAR_SYMLINK, 0, 105, "/etc/passwd");
    assert_listed (&l, i++, "src/hard", KIWI_TAR_FILE, 0644, 106, "first\n"); /* the content when it was linked */
    assert_listed (&l, i++, "src/dot.txt", KIWI_TAR_FILE, 0640, 107, "dot\n");
    assert_listed (&l, i++, long_name, KIWI_TAR_FILE, 0644, 110, "long name\n");
    assert_listed (&l, i++, "src/long-link", KIWI_TAR_SYMLINK, 0, 111, long_target);
    assert_listed (&l, i++, "src/suid", KIWI_TAR_FILE, 0755, 112, "s\n");
    assert_listed (&l, i++, "src/will-be-file", KIWI_TAR_FILE, 0644, 205, "now a file\n");
    assert_listed (&l, i++, "src/will-be-link", KIWI_TAR_SYMLINK, 0, 206, "a.txt");
    assert_listed (&l, i++, "src/sub/hard2", KIWI_TAR_FILE, 0600, 115, "bee\n");
    assert_listed (&l, i++, "src/r\xc3\xa9pertoire-\xe4\xb8\x96.txt", KIWI_TAR_FILE, 0644, 116, "unicode\n");
    assert_listed (&l, i++, "home/", KIWI_TAR_DIR, 0755, 200, NULL);
    assert_listed (&l, i++, "home/user/", KIWI_TAR_DIR, 0711, 201, NULL);
    assert_listed (&l, i++, "home/user/.profile", KIWI_TAR_FILE, 0644, 209, "export X=2\n");
    assert_listed (&l, i++, "home/user/src", KIWI_TAR_SYMLINK, 0, 203, "../../src");
    assert_listed (&l, i++, "home/user/hard", KIWI_TAR_FILE, 0644, 208, "export X=1\n");
    assert_int_equal (l.n, i);
    for (size_t k = 0; k < l.n; k++)
        assert_int_not_equal (l.e[k].type, KIWI_TAR_HARDLINK);

    /* the counters: one per entry of the stream */
    assert_int_equal (st.files + st.hardlinks, 11);
    assert_int_equal (st.dirs, 4);
    assert_int_equal (st.symlinks, 5);
    assert_int_equal (st.skipped, 0);
    uint64_t bytes = 0;
    for (size_t k = 0; k < l.n; k++)
        bytes += l.e[k].type == KIWI_TAR_FILE ? l.e[k].size : 0;
    assert_int_equal (st.bytes, bytes);
    listing_free (&l);

    /* the stream makes the tree the parts make, one after the other */
    kiwi_extract_stats xs;
    extract_ok (f, &out, NULL, &xs);
    assert_int_equal (xs.hardlinks, 0);
    assert_int_equal (xs.files, 11);
    kiwi_error_t err = NULL;
    for (size_t k = 0; k < 2; k++)
        if (kiwi_archive_extract (parts[k].tar, parts[k].len, f->src, NULL, NULL, &err) < 0)
            fail_msg ("extracting %s: %s", parts[k].what, kiwi_error_msg (err));
    compare_trees (f->src, f->dest, true);
    compare_trees (f->dest, f->src, true);
    assert_file (f->dest, "src/a.txt", "third\n", 0600);
    assert_file (f->dest, "src/hard", "first\n", 0644);
    assert_file (f->dest, "home/user/hard", "export X=1\n", 0644);
    assert_nothing_outside (f);

    /* reproducible: the same parts give the same bytes */
    kiwi_buf again = KIWI_BUF_INIT;
    rewrite_ok (parts, 2, NULL, &again, NULL);
    assert_int_equal (again.len, out.len);
    assert_memory_equal (again.data, out.data, out.len);
    kiwi_buf_free (&again);

    /* owners beyond ustar's octal fields (pax records) */
    kiwi_buf big_ids = KIWI_BUF_INIT;
    rewrite_as (parts, 2, 3000000000u, 2097152u, NULL, &big_ids, NULL);
    list_all (&big_ids, &l);
    assert_int_equal (l.n, i);
    assert_clean_stream (&l, 3000000000u, 2097152u);
    listing_free (&l);
    kiwi_buf_free (&big_ids);

    kiwi_buf_free (&out);
    kiwi_buf_free (&p1);
    kiwi_buf_free (&p2);
}

/* Rejections: each case is one or two parts (finished here, unless
 * `finished`); part one always starts with good entries, so a rewrite that
 * streamed as it read would show bytes. */
static void
reject_case_ex (kiwi_buf *p1, kiwi_buf *p2, bool finished, const char *needle, const char *needle2)
{
    if (!finished)
        finish (p1);
    kiwi_rewrite_part parts[] = { part_of (p1, "part-1.tar"), { 0 } };
    size_t n = 1;
    if (p2) {
        if (!finished)
            finish (p2);
        parts[1] = part_of (p2, "part-2.tar");
        n = 2;
    }
    expect_rewrite_reject (parts, n, NULL, needle, needle2);
    kiwi_buf_free (p1);
    if (p2)
        kiwi_buf_free (p2);
}

static void
reject_case (kiwi_buf *p1, kiwi_buf *p2, const char *needle, const char *needle2)
{
    reject_case_ex (p1, p2, false, needle, needle2);
}

static kiwi_buf
good_part (void)
{
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '5', "ok/", NULL, NULL, 0755);
    raw (&b, '0', "ok/fine", NULL, "fine content", 0644);
    return b;
}

static void
test_rewrite_rejects_hostile_parts (void **state)
{
    (void) state;
    kiwi_buf a, b;

    /* absolute names and `..`, in the first or the second part */
    const char *bad_names[] = { "/etc/evil", "/tmp/", "../escape", "a/../../escape", "ok/../../escape", "..",
                                "a/..", "./../escape", NULL };
    for (const char **n = bad_names; *n; n++) {
        a = good_part ();
        raw_dir_or_file (&a, *n);
        reject_case (&a, NULL, *n, "part-1.tar");
        a = good_part ();
        b = good_part ();
        raw_dir_or_file (&b, *n);
        reject_case (&a, &b, *n, "part-2.tar");
    }
    /* a device's name is checked too */
    a = good_part ();
    raw (&a, '3', "../null0", NULL, NULL, 0666);
    reject_case (&a, NULL, "../null0", NULL);

    /* through a symlink made by an earlier entry */
    a = good_part ();
    raw (&a, '2', "l", "/etc", NULL, 0777);
    raw (&a, '0', "l/passwd", NULL, "pwned", 0644);
    reject_case (&a, NULL, "l/passwd", NULL);
    a = good_part ();
    raw (&a, '2', "l", "ok", NULL, 0777); /* even to a directory of the archive */
    raw (&a, '0', "l/x", NULL, "x", 0644);
    reject_case (&a, NULL, "l/x", NULL);
    a = good_part ();
    raw (&a, '2', "ok/up", "..", NULL, 0777);
    raw (&a, '5', "ok/up/d/", NULL, NULL, 0755);
    reject_case (&a, NULL, "ok/up/d/", NULL);
    /* across parts: the symlink in part one, the name through it in part two */
    a = good_part ();
    raw (&a, '2', "src/l", "/etc", NULL, 0777);
    b = good_part ();
    raw (&b, '0', "src/l/passwd", NULL, "pwned", 0644);
    reject_case (&a, &b, "src/l/passwd", "part-2.tar");
    a = good_part ();
    raw (&a, '2', "x", "/", NULL, 0777);
    b = good_part ();
    raw (&b, '5', "x/etc/", NULL, NULL, 0755);
    reject_case (&a, &b, "x/etc/", "part-2.tar");
    /* through a file */
    a = good_part ();
    raw (&a, '0', "f", NULL, "f", 0644);
    raw (&a, '0', "f/x", NULL, "x", 0644);
    reject_case (&a, NULL, "f/x", NULL);
    a = good_part ();
    raw (&a, '0', "ok/f", NULL, "f", 0644);
    b = good_part ();
    raw (&b, '0', "ok/f/x", NULL, "x", 0644);
    reject_case (&a, &b, "ok/f/x", "part-2.tar");

    /* hardlinks to nothing good */
    const char *bad_targets[] = { "missing", "/etc/passwd", "../outside.txt", "ok/../../outside.txt", "dir", "sym",
                                  "later", NULL };
    for (const char **t = bad_targets; *t; t++) {
        a = good_part ();
        raw (&a, '5', "dir/", NULL, NULL, 0755);
        raw (&a, '2', "sym", "ok/fine", NULL, 0777);
        raw (&a, '1', "h", *t, NULL, 0644);
        raw (&a, '0', "later", NULL, "later", 0644);
        reject_case (&a, NULL, "`h`", NULL);
    }

    /* a directory replaced by a non-directory, and the other way round */
    a = good_part ();
    raw (&a, '5', "d/", NULL, NULL, 0755);
    raw (&a, '0', "d", NULL, "file", 0644);
    reject_case (&a, NULL, "`d`", NULL);
    a = good_part ();
    raw (&a, '0', "ok", NULL, "file", 0644); /* good_part made ok/ */
    reject_case (&a, NULL, "`ok`", NULL);
    a = good_part ();
    raw (&a, '5', "d/", NULL, NULL, 0755);
    raw (&a, '2', "d", "/etc", NULL, 0777);
    reject_case (&a, NULL, "`d`", NULL);
    a = good_part ();
    raw (&a, '0', "f", NULL, "file", 0644);
    raw (&a, '5', "f/", NULL, NULL, 0755);
    reject_case (&a, NULL, "`f/`", NULL);
    a = good_part ();
    b = good_part ();
    raw (&b, '0', "ok", NULL, "file", 0644); /* part one's directory */
    reject_case (&a, &b, "`ok`", "part-2.tar");
    a = good_part ();
    b = good_part ();
    raw (&b, '5', "ok/fine/", NULL, NULL, 0755); /* part one's file */
    reject_case (&a, &b, "ok/fine/", "part-2.tar");

    /* a malformed second part: nothing of the first goes out either */
    a = good_part ();
    finish (&a);
    b = good_part ();
    finish (&b);
    b.len -= 700; /* truncated */
    reject_case_ex (&a, &b, true, "part-2.tar", NULL);
    a = good_part ();
    finish (&a);
    b = good_part ();
    finish (&b);
    b.data[20] ^= 0x40; /* checksum */
    reject_case_ex (&a, &b, true, "part-2.tar", NULL);
    /* an empty buffer is not an archive */
    a = good_part ();
    finish (&a);
    kiwi_rewrite_part parts[] = { part_of (&a, "part-1.tar"), { .tar = "", .len = 0, .what = "part-2.tar" } };
    expect_rewrite_reject (parts, 2, NULL, "empty archive", "part-2.tar");
    kiwi_buf_free (&a);
}

/* A directory the archive makes only implicitly (as the parent of an entry)
 * is a directory all the same: a later file or symlink at its path would
 * put the earlier entries under a non-directory of the stream, and
 * extraction fails there. */
static void
test_rewrite_rejects_implicit_dir_replaced (void **state)
{
    fixture *f = *state;
    const char types[] = { '0', '2' };
    for (size_t i = 0; i < 2; i++) {
        for (int across = 0; across < 2; across++) {
            kiwi_buf a = good_part ();
            raw (&a, '0', "d/f", NULL, "under d", 0644);
            kiwi_buf b = KIWI_BUF_INIT;
            kiwi_buf *second = across ? &b : &a;
            if (across)
                b = good_part ();
            raw (second, types[i], "d", types[i] == '2' ? "/etc" : NULL, types[i] == '0' ? "file" : NULL, 0644);
            finish (&a);
            if (across)
                finish (&b);
            /* extraction, one part after the other, fails */
            kiwi_error_t err = NULL;
            reset_dest (f);
            int rc = kiwi_archive_extract (a.data, a.len, f->dest, NULL, NULL, &err);
            if (rc == 0 && across)
                rc = kiwi_archive_extract (b.data, b.len, f->dest, NULL, NULL, &err);
            assert_int_equal (rc, -1);
            kiwi_error_free (&err);
            /* so the rewrite must fail, before a byte goes out */
            kiwi_rewrite_part parts[] = { part_of (&a, "part-1.tar"), part_of (&b, "part-2.tar") };
            char *why = check_rewrite_reject (parts, across ? 2 : 1, NULL, "`d`", NULL);
            kiwi_buf_free (&a);
            kiwi_buf_free (&b);
            if (why) {
                char msg[1024];
                snprintf (msg, sizeof msg, "`d/f`, then a %s at `d`%s: %s", types[i] == '0' ? "file" : "symlink",
                          across ? " in part two" : "", why);
                free (why);
                fail_msg ("%s", msg);
            }
        }
    }
}

/* Extraction takes a hardlink only to a file of the same archive; the parts
 * are extracted one after the other, so a hardlink in part two to a file of
 * part one is rejected there, and by the rewrite. */
static void
test_rewrite_rejects_hardlink_across_parts (void **state)
{
    fixture *f = *state;
    kiwi_buf a = good_part ();
    finish (&a);
    kiwi_buf b = KIWI_BUF_INIT;
    raw (&b, '1', "h", "ok/fine", NULL, 0644);
    finish (&b);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_extract (a.data, a.len, f->dest, NULL, NULL, &err), 0);
    assert_int_equal (kiwi_archive_extract (b.data, b.len, f->dest, NULL, NULL, &err), -1);
    kiwi_error_free (&err);
    kiwi_rewrite_part parts[] = { part_of (&a, "part-1.tar"), part_of (&b, "part-2.tar") };
    char *why = check_rewrite_reject (parts, 2, NULL, "`h`", "part-2.tar");
    kiwi_buf_free (&a);
    kiwi_buf_free (&b);
    if (why) {
        char msg[1024];
        snprintf (msg, sizeof msg, "%s", why);
        free (why);
        fail_msg ("%s", msg);
    }
}

static void
test_rewrite_skips_devices_and_masks_modes (void **state)
{
    fixture *f = *state;
    kiwi_buf a = KIWI_BUF_INIT, b = KIWI_BUF_INIT;
    kiwi__tar_raw dev = { .typeflag = '3', .name = "dev/null0", .mode = 0666, .devmajor = 1, .devminor = 3 };
    assert_int_equal (kiwi__archive_write_raw (&a, &dev, 0, NULL), 0);
    kiwi__tar_raw blk = { .typeflag = '4', .name = "sda0", .mode = 0660, .devmajor = 8, .devminor = 0 };
    assert_int_equal (kiwi__archive_write_raw (&a, &blk, 0, NULL), 0);
    raw (&a, '6', "fifo", NULL, NULL, 0644);
    raw (&a, '0', "suid", NULL, "s", 06755);
    raw (&a, '0', "sgid", NULL, "g", 02711);
    raw (&a, '5', "sticky/", NULL, NULL, 01777);
    raw (&a, '5', "setgid-dir/", NULL, NULL, 02755);
    raw (&a, '0', "plain", NULL, "plain", 0644);
    raw (&a, '6', "plain", NULL, NULL, 0600); /* a fifo at a file's path: skipped, the file stays */
    raw (&a, '1', "suid-copy", "suid", NULL, 04777);
    finish (&a);
    kiwi__tar_raw chr2 = { .typeflag = '3', .name = "sticky/tty", .mode = 0620, .devmajor = 5, .devminor = 0 };
    assert_int_equal (kiwi__archive_write_raw (&b, &chr2, 0, NULL), 0);
    raw (&b, '6', "sticky/pipe", NULL, NULL, 0644);
    finish (&b);
    kiwi_rewrite_part parts[] = { part_of (&a, "a.tar"), part_of (&b, "b.tar") };

    kiwi_buf out = KIWI_BUF_INIT;
    kiwi_extract_stats st;
    rewrite_ok (parts, 2, NULL, &out, &st);
    assert_int_equal (st.skipped, 6);
    assert_int_equal (st.files + st.hardlinks, 4);
    assert_int_equal (st.dirs, 2);
    listing l;
    list_all (&out, &l);
    assert_clean_stream (&l, RW_UID, RW_GID);
    assert_int_equal (l.n, 6);
    size_t i = 0;
    assert_listed (&l, i++, "suid", KIWI_TAR_FILE, 0755, 1700000000, "s");
    assert_listed (&l, i++, "sgid", KIWI_TAR_FILE, 0711, 1700000000, "g");
    assert_listed (&l, i++, "sticky/", KIWI_TAR_DIR, 0777, 1700000000, NULL);
    assert_listed (&l, i++, "setgid-dir/", KIWI_TAR_DIR, 0755, 1700000000, NULL);
    assert_listed (&l, i++, "plain", KIWI_TAR_FILE, 0644, 1700000000, "plain");
    assert_listed (&l, i++, "suid-copy", KIWI_TAR_FILE, 0755, 1700000000, "s");
    assert_null (listing_find (&l, "dev"));
    assert_null (listing_find (&l, "dev/null0"));
    assert_null (listing_find (&l, "sticky/tty"));
    listing_free (&l);
    /* as extraction of the parts would have it */
    extract_ok (f, &out, NULL, NULL);
    kiwi_error_t err = NULL;
    for (size_t k = 0; k < 2; k++)
        if (kiwi_archive_extract (parts[k].tar, parts[k].len, f->src, NULL, NULL, &err) < 0)
            fail_msg ("extracting %s: %s", parts[k].what, kiwi_error_msg (err));
    compare_trees (f->src, f->dest, true);
    compare_trees (f->dest, f->src, true);
    kiwi_buf_free (&out);
    kiwi_buf_free (&a);
    kiwi_buf_free (&b);
}

static void
test_rewrite_ceilings (void **state)
{
    (void) state;
    char *content = malloc (1501);
    assert_non_null (content);
    memset (content, 'c', 1500);
    content[1500] = '\0';
    kiwi_buf a = KIWI_BUF_INIT, b = KIWI_BUF_INIT, c = KIWI_BUF_INIT;
    raw (&a, '0', "a1", NULL, content, 0644);
    raw (&a, '0', "a2", NULL, content, 0644); /* 3000 bytes of content */
    finish (&a);
    raw (&b, '0', "b1", NULL, content, 0644); /* 1500 */
    finish (&b);
    raw (&c, '0', "c1", NULL, content, 0644);
    raw (&c, '1', "c2", "c1", NULL, 0644); /* a hardlink's copy counts: 3000 */
    finish (&c);

    kiwi_extract_opts o = { .max_bytes = 2000 };
    kiwi_rewrite_part pa[] = { part_of (&a, "a.tar") };
    expect_rewrite_reject (pa, 1, &o, "ceiling of 2000 bytes", "a2");
    kiwi_rewrite_part pc[] = { part_of (&c, "c.tar") };
    expect_rewrite_reject (pc, 1, &o, "ceiling of 2000 bytes", "c2");
    /* over the ceiling in the second part: nothing of the first goes out */
    kiwi_rewrite_part pba[] = { part_of (&b, "b.tar"), part_of (&a, "a.tar") };
    expect_rewrite_reject (pba, 2, &o, "ceiling of 2000 bytes", "a.tar");
    /* the ceiling applies to each part: two parts of 1500 each pass */
    kiwi_rewrite_part pbb[] = { part_of (&b, "b.tar"), part_of (&b, "b-again.tar") };
    kiwi_buf out = KIWI_BUF_INIT;
    rewrite_ok (pbb, 2, &o, &out, NULL);
    listing l;
    list_all (&out, &l);
    assert_int_equal (l.n, 1);
    assert_int_equal (l.e[0].size, 1500);
    listing_free (&l);
    kiwi_buf_free (&out);
    o.max_bytes = 3000; /* exactly the content: fine */
    rewrite_ok (pa, 1, &o, &out, NULL);
    kiwi_buf_free (&out);

    /* the entry ceiling */
    kiwi_extract_opts e = { .max_entries = 1 };
    expect_rewrite_reject (pa, 1, &e, "more than 1 entries", "a2");
    rewrite_ok (pbb, 2, &e, &out, NULL); /* one entry per part */
    kiwi_buf_free (&out);
    e.max_entries = 2;
    rewrite_ok (pa, 1, &e, &out, NULL);
    kiwi_buf_free (&out);

    free (content);
    kiwi_buf_free (&a);
    kiwi_buf_free (&b);
    kiwi_buf_free (&c);
}

static void
test_rewrite_sink_failure (void **state)
{
    (void) state;
    size_t big_len = 100000;
    char *big = malloc (big_len + 1);
    assert_non_null (big);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char) ('a' + i % 26);
    big[big_len] = '\0';
    kiwi_buf a = KIWI_BUF_INIT;
    raw (&a, '5', "d/", NULL, NULL, 0755);
    raw (&a, '0', "d/small", NULL, "small", 0644);
    raw (&a, '0', "d/big", NULL, big, 0644);
    raw (&a, '2', "d/link", "big", NULL, 0777);
    raw (&a, '0', "d/last", NULL, "last", 0644);
    finish (&a);
    kiwi_rewrite_part parts[] = { part_of (&a, "a.tar") };

    kiwi_buf whole = KIWI_BUF_INIT;
    rewrite_ok (parts, 1, NULL, &whole, NULL);
    size_t total = whole.len;
    assert_true (total > big_len + 5 * 512);
    kiwi_buf_free (&whole);

    /* the sink breaks at a header, inside content, in the end marker, at the last byte */
    size_t breaks[] = { 0, 1, 511, 512, 1000, 1024, 1600, 50000, total - 1024, total - 600, total - 1 };
    for (size_t k = 0; k < sizeof breaks / sizeof *breaks; k++) {
        for (int with_error = 1; with_error >= 0; with_error--) {
            sink_state s = SINK_INIT;
            s.fail_after = breaks[k];
            s.set_error = with_error;
            kiwi_error_t err = NULL;
            int rc = kiwi_archive_rewrite (parts, 1, RW_UID, RW_GID, NULL, sink_append, &s, NULL, &err);
            if (rc >= 0)
                fail_msg ("the sink failed after %zu of %zu bytes, yet the rewrite succeeded", breaks[k], total);
            assert_true (s.failed);
            assert_non_null (err);
            if (with_error && strstr (kiwi_error_msg (err), SINK_MSG) == NULL)
                fail_msg ("sink failing after %zu bytes: error `%s` lacks the sink's `%s`", breaks[k],
                          kiwi_error_msg (err), SINK_MSG);
            assert_int_equal (s.calls_after_failure, 0); /* the stream is broken from there on */
            kiwi_error_free (&err);
            kiwi_buf_free (&s.out);
        }
    }
    /* exactly enough room: fine */
    sink_state s = SINK_INIT;
    s.fail_after = total;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_rewrite (parts, 1, RW_UID, RW_GID, NULL, sink_append, &s, NULL, &err), 0);
    assert_false (s.failed);
    assert_int_equal (s.out.len, total);
    kiwi_buf_free (&s.out);
    kiwi_buf_free (&a);
    free (big);
}

static void
test_rewrite_empty_parts (void **state)
{
    fixture *f = *state;
    char zeros[1024];
    memset (zeros, 0, sizeof zeros);
    kiwi_rewrite_part parts[] = { { .tar = zeros, .len = sizeof zeros, .what = "empty.tar" },
                                  { .tar = zeros, .len = sizeof zeros, .what = NULL },
                                  { .tar = zeros, .len = sizeof zeros, .what = "again.tar" } };
    for (size_t n = 0; n <= 3; n++) {
        kiwi_buf out = KIWI_BUF_INIT;
        kiwi_extract_stats st;
        memset (&st, 0xa5, sizeof st);
        rewrite_ok (n ? parts : NULL, n, NULL, &out, &st);
        assert_true (out.len >= 1024);
        assert_int_equal (out.len % 512, 0);
        for (size_t i = 0; i < out.len; i++)
            if (out.data[i] != 0)
                fail_msg ("%zu empty parts: byte %zu of the stream is %d", n, i, out.data[i]);
        listing l;
        list_all (&out, &l);
        assert_int_equal (l.n, 0);
        listing_free (&l);
        assert_int_equal (st.files + st.dirs + st.symlinks + st.hardlinks + st.skipped + st.ignored, 0);
        assert_int_equal (st.bytes, 0);
        extract_ok (f, &out, NULL, NULL);
        assert_int_equal (count_entries (f->dest), 0);
        kiwi_buf_free (&out);
    }
}

static void
test_rewrite_large_file (void **state)
{
    fixture *f = *state;
    size_t len = 3 * 1024 * 1024 + 77;
    char *big = malloc (len);
    assert_non_null (big);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < len; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        big[i] = (char) (x >> 56);
    }
    kiwi_buf a = KIWI_BUF_INIT;
    kiwi__tar_raw e = { .typeflag = '0', .name = "data/big.bin", .mode = 0644, .uid = 1000, .gid = 1000,
                        .mtime = 1700000000, .data = big, .len = len };
    kiwi_error_t err = NULL;
    if (kiwi__archive_write_raw (&a, &e, 0, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    raw (&a, '1', "data/copy.bin", "data/big.bin", NULL, 0644);
    raw (&a, '0', "data/after", NULL, "after", 0644);
    finish (&a);
    kiwi_rewrite_part parts[] = { part_of (&a, "big.tar") };

    kiwi_buf out = KIWI_BUF_INIT;
    kiwi_extract_stats st;
    rewrite_ok (parts, 1, NULL, &out, &st);
    assert_int_equal (st.bytes, 2 * (uint64_t) len + 5);
    listing l;
    list_all (&out, &l);
    assert_clean_stream (&l, RW_UID, RW_GID);
    assert_int_equal (l.n, 3);
    const listed *b1 = listing_find (&l, "data/big.bin"), *b2 = listing_find (&l, "data/copy.bin");
    assert_non_null (b1);
    assert_non_null (b2);
    assert_int_equal (b1->type, KIWI_TAR_FILE);
    assert_int_equal (b2->type, KIWI_TAR_FILE);
    assert_int_equal (b1->size, len);
    assert_int_equal (b2->size, len);
    assert_memory_equal (b1->data, big, len);
    assert_memory_equal (b2->data, big, len);
    assert_string_equal (listing_find (&l, "data/after")->data, "after");
    listing_free (&l);

    extract_ok (f, &out, NULL, NULL);
    char p[400];
    size_t got;
    path_join (p, sizeof p, f->dest, "data/big.bin");
    char *c = read_all (p, &got);
    assert_non_null (c);
    assert_int_equal (got, len);
    assert_memory_equal (c, big, len);
    free (c);
    kiwi_buf_free (&out);
    kiwi_buf_free (&a);
    free (big);
}

int
main (void)
{
    const char *env = getenv ("KIWI_TEST_SEED");
    seed = env && *env ? (unsigned) strtoul (env, NULL, 10) : (unsigned) time (NULL);
    init_names ();
#define T(fn) cmocka_unit_test_setup_teardown (fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T (test_buf),
        T (test_builders_and_list),
        T (test_empty_and_trailer_only),
        T (test_roundtrip),
        T (test_gnu_tar_reads_ours),
        T (test_extract_gnu_tar_gnu_format),
        T (test_extract_gnu_tar_pax_format),
        T (test_strip_components),
        T (test_deterministic_and_sorted),
        T (test_exclude_and_prefix),
        T (test_byte_ceiling),
        T (test_writer_skips_specials),
        T (test_writer_never_follows_symlinks),
        T (test_reject_dotdot),
        T (test_reject_absolute),
        T (test_reject_through_archive_symlink),
        T (test_reject_through_existing_symlink),
        T (test_hardlinks),
        T (test_devices_skipped),
        T (test_modes_masked),
        T (test_preserve_mtime),
        T (test_overwrite_rules),
        T (test_ceilings),
        T (test_bad_checksum_and_structure),
        T (test_truncated_at_every_offset),
        T (test_garbage_and_bit_flips),
        T (test_symlink_swap_race),
        T (test_sparse_unknown_and_long_links),
        T (test_meter_counts_bytes_and_sizes),
        T (test_meter_pax_and_base256),
        T (test_rewrite_equivalence),
        T (test_rewrite_rejects_hostile_parts),
        T (test_rewrite_rejects_implicit_dir_replaced),
        T (test_rewrite_rejects_hardlink_across_parts),
        T (test_rewrite_skips_devices_and_masks_modes),
        T (test_rewrite_ceilings),
        T (test_rewrite_sink_failure),
        T (test_rewrite_empty_parts),
        T (test_rewrite_large_file),
    };
#undef T
    return kiwi_run_group ("archive", tests, NULL, NULL);
}
