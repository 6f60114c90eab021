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
 * look like headers never read as such.
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

#include "sandbox/archive-internal.h"
#include "sandbox/archive.h"
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
    kiwi_buf b = { data, len, len };
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
        kiwi_buf t = { data, len, len };
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
    };
#undef T
    return kiwi_run_group ("archive", tests, NULL, NULL);
}
