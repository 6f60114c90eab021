/*
 * test_gc.c: the clean-up of a state dir (worker/gc.h) against a temp
 * directory: workspaces whose task process is gone go and live ones stay;
 * mirrors and snapshots go by idle age (mtimes set with utimensat) unless
 * locked, held or borrowed by a live workspace; a snapshot whose cache
 * entry expired goes; the disk watermark, with a fake usage function,
 * removes the least recently used until below the low mark and never one
 * that is locked or just used; a fetch a dead worker left beside its
 * mirror goes unless the mirror's lock is held. Each check looks at what is
 * on the disk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "worker/gc.h"

#define DAY 86400

static char state[64];
static time_t now;

static int
setup (void **st)
{
    snprintf (state, sizeof state, "/tmp/kiwi-gc-XXXXXX");
    if (mkdtemp (state) == NULL)
        return -1;
    now = time (NULL);
    const char *subs[] = { "work", "mirrors", "snapshots", "results" };
    char p[256];
    for (size_t i = 0; i < 4; i++) {
        snprintf (p, sizeof p, "%s/%s", state, subs[i]);
        mkdir (p, 0700);
    }
    return 0;
}

static int
teardown (void **st)
{
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s", state);
    return system (cmd) == 0 ? 0 : -1;
}

static void
path_of (char *out, size_t cap, const char *rel)
{
    snprintf (out, cap, "%s/%s", state, rel);
}

static bool
exists (const char *rel)
{
    char p[512];
    path_of (p, sizeof p, rel);
    struct stat sb;
    return lstat (p, &sb) == 0;
}

static void
make_dir (const char *rel)
{
    char p[512];
    path_of (p, sizeof p, rel);
    assert_int_equal (mkdir (p, 0700), 0);
}

/* make_dir of <prefix><pid><suffix>, a name that says which process owns
 * it; the name goes to out (n bytes). */
static void
make_pid_dir (char *out, size_t n, const char *prefix, pid_t pid, const char *suffix)
{
    snprintf (out, n, "%s%d%s", prefix, (int) pid, suffix);
    make_dir (out);
}

static void
make_file (const char *rel, const char *text)
{
    char p[512];
    path_of (p, sizeof p, rel);
    FILE *f = fopen (p, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

/* Sets a path's mtime (and atime) to `age` seconds ago. */
static void
age (const char *rel, time_t seconds)
{
    char p[512];
    path_of (p, sizeof p, rel);
    struct timespec ts[2] = { { now - seconds, 0 }, { now - seconds, 0 } };
    assert_int_equal (utimensat (AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* A mirror <hex>.git with its lock file and FETCH_HEAD, last used `ago`. */
static void
make_mirror (const char *hex, time_t ago)
{
    char rel[256];
    snprintf (rel, sizeof rel, "mirrors/%s.git", hex);
    make_dir (rel);
    snprintf (rel, sizeof rel, "mirrors/%s.git/objects", hex);
    make_dir (rel);
    snprintf (rel, sizeof rel, "mirrors/%s.git/FETCH_HEAD", hex);
    make_file (rel, "0000\n");
    age (rel, ago);
    snprintf (rel, sizeof rel, "mirrors/%s.lock", hex);
    make_file (rel, "");
    age (rel, ago);
    snprintf (rel, sizeof rel, "mirrors/%s.git", hex);
    age (rel, ago);
}

static void
make_snapshot (const char *key, time_t ago)
{
    char rel[256];
    snprintf (rel, sizeof rel, "snapshots/%s", key);
    make_dir (rel);
    snprintf (rel, sizeof rel, "snapshots/%s/src.tar", key);
    make_file (rel, "");
    snprintf (rel, sizeof rel, "snapshots/%s/home.tar", key);
    make_file (rel, "");
    snprintf (rel, sizeof rel, "snapshots/%s", key);
    age (rel, ago);
}

static int
lock_file (const char *rel)
{
    char p[512];
    path_of (p, sizeof p, rel);
    int fd = open (p, O_RDWR);
    assert_true (fd >= 0);
    assert_int_equal (flock (fd, LOCK_EX), 0);
    return fd;
}

/* A pid that was a process and is no more. */
static pid_t
dead_pid (void)
{
    pid_t pid = fork ();
    if (pid == 0)
        _exit (0);
    assert_true (pid > 0);
    assert_int_equal (waitpid (pid, NULL, 0), pid);
    return pid;
}

/* Cache entries: "cached-*" exist, every other key expired. */
static int
fake_entry (const char *key, void *ud)
{
    (void) ud;
    return strncmp (key, "cached-", 7) == 0 ? 1 : 0;
}

static kiwi_gc_opts
opts (void)
{
    kiwi_gc_opts o;
    kiwi_gc_opts_init (&o, state);
    o.now_s = now;
    o.owner_exe = "test_gc"; /* this test process stands for a live task process */
    o.disk_high = 0;
    return o;
}

static void
test_workspaces_mirrors_snapshots_by_owner_and_age (void **st)
{
    char rel[256];
    pid_t dead = dead_pid (), me = getpid ();
    /* workspaces */
    char ws_dead[256], ws_live[256];
    make_pid_dir (ws_dead, sizeof ws_dead, "work/task-dead-", dead, "");
    make_pid_dir (ws_live, sizeof ws_live, "work/task-live-", me, "");
    make_dir ("work/task-init-1"); /* pid 1 is alive but no task process */
    /* mirrors: old, old but locked (a fetch), old but borrowed by the live
     * workspace, recent */
    make_mirror ("aa01", 8 * DAY);
    make_mirror ("bb02", 8 * DAY);
    make_mirror ("cc03", 8 * DAY);
    make_mirror ("dd04", 1 * DAY);
    int lk = lock_file ("mirrors/bb02.lock");
    char p[512], alt[512];
    /* a checkout's git directory is the workspace's sibling <ws>.git
     * (repo.c), where its alternates name the mirror it borrows from */
    snprintf (p, sizeof p, "%s/%s.git", state, ws_live);
    assert_int_equal (mkdir (p, 0700), 0);
    snprintf (p, sizeof p, "%s/%s.git/objects", state, ws_live);
    assert_int_equal (mkdir (p, 0700), 0);
    snprintf (p, sizeof p, "%s/%s.git/objects/info", state, ws_live);
    assert_int_equal (mkdir (p, 0700), 0);
    snprintf (rel, sizeof rel, "%s.git/objects/info/alternates", ws_live);
    snprintf (alt, sizeof alt, "%s/mirrors/cc03.git/objects\n", state);
    make_file (rel, alt);
    /* snapshots: old, old but held by a task, recent, expired entry, cached
     * entry, interrupted installs */
    make_snapshot ("old", 8 * DAY);
    make_snapshot ("held", 8 * DAY);
    make_snapshot ("cached-recent", 1 * DAY);
    make_snapshot ("expired", 3600);
    make_snapshot ("cached-1", 3600);
    snprintf (p, sizeof p, "%s/snapshots/held", state);
    int hold = kiwi_gc_snapshot_hold (p);
    assert_true (hold >= 0);
    age ("snapshots/held", 8 * DAY); /* the lock file made it look used */
    char part_dead[256], part_live[256];
    make_pid_dir (part_dead, sizeof part_dead, "snapshots/k1.", dead, ".partial");
    make_pid_dir (part_live, sizeof part_live, "snapshots/k2.", me, ".partial");
    /* whole diffs */
    make_file ("results/t-old.diff", "diff\n");
    age ("results/t-old.diff", 8 * DAY);
    make_file ("results/t-new.diff", "diff\n");

    kiwi_gc_opts o = opts ();
    o.entry_exists = fake_entry;
    o.results_max_age_s = 7 * DAY;
    kiwi_gc_stats s;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);

    assert_false (exists (ws_dead));
    assert_true (exists (ws_live));
    assert_false (exists ("work/task-init-1"));
    assert_int_equal (s.workspaces, 2);

    assert_false (exists ("mirrors/aa01.git"));
    assert_true (exists ("mirrors/aa01.lock")); /* the lock file stays */
    assert_true (exists ("mirrors/bb02.git"));   /* locked */
    assert_true (exists ("mirrors/cc03.git"));   /* borrowed */
    assert_true (exists ("mirrors/dd04.git"));   /* recent */
    assert_int_equal (s.mirrors, 1);

    assert_false (exists ("snapshots/old"));
    assert_true (exists ("snapshots/held"));
    assert_true (exists ("snapshots/cached-recent"));
    assert_false (exists ("snapshots/expired"));
    assert_true (exists ("snapshots/cached-1"));
    assert_int_equal (s.snapshots, 2);
    assert_false (exists (part_dead));
    assert_true (exists (part_live));
    assert_int_equal (s.partials, 1);
    assert_int_equal (s.in_use, 3); /* bb02, cc03, held */

    assert_false (exists ("results/t-old.diff"));
    assert_true (exists ("results/t-new.diff"));
    assert_int_equal (s.results, 1);

    /* released, the locked mirror and the held snapshot go on the next pass */
    close (lk);
    close (hold);
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);
    assert_false (exists ("mirrors/bb02.git"));
    assert_false (exists ("snapshots/held"));
    assert_true (exists ("mirrors/cc03.git"));
    /* a held snapshot removed meanwhile is a miss */
    snprintf (p, sizeof p, "%s/snapshots/held", state);
    assert_int_equal (kiwi_gc_snapshot_hold (p), -1);
}

/* Usage: 50% plus 10% for each mirror and snapshot left. */
static int
fake_usage (const char *path, double *used, void *ud, kiwi_error_t *err)
{
    int *calls = ud;
    (*calls)++;
    int n = 0;
    const char *subs[] = { "mirrors", "snapshots" };
    for (size_t i = 0; i < 2; i++) {
        char p[512];
        snprintf (p, sizeof p, "%s/%s", path, subs[i]);
        DIR *d = opendir (p);
        assert_non_null (d);
        struct dirent *e;
        while ((e = readdir (d)) != NULL) {
            size_t l = strlen (e->d_name);
            if (e->d_name[0] == '.' || (l > 5 && strcmp (e->d_name + l - 5, ".lock") == 0))
                continue;
            n++;
        }
        closedir (d);
    }
    *used = 50.0 + 10.0 * n;
    return 0;
}

static void
test_watermark_removes_least_recently_used (void **st)
{
    /* seven candidates, all younger than their idle limits; the oldest is
     * locked, the newest was just used */
    make_mirror ("a1", 5 * DAY);
    make_mirror ("a2", 4 * DAY);
    make_snapshot ("s1", 3 * DAY);
    make_mirror ("a3", 2 * DAY);
    make_snapshot ("s2", 1 * DAY);
    make_snapshot ("s3", 2 * 3600);
    make_mirror ("a4", 60);
    int lk = lock_file ("mirrors/a1.lock");

    kiwi_gc_opts o = opts ();
    int calls = 0;
    o.usage = fake_usage;
    o.usage_userdata = &calls;
    o.disk_high = 85;
    o.disk_low = 75;
    kiwi_gc_stats s;
    kiwi_error_t err = NULL;

    /* below the high mark: nothing goes */
    o.disk_high = 121;
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);
    assert_int_equal (s.watermark_mirrors + s.watermark_snapshots, 0);
    assert_true (s.used_before > 119.0 && s.used_before < 121.0);

    o.disk_high = 85;
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);
    /* 120% -> 70%: a2, s1, a3, s2, s3 in that order; a1 locked, a4 just used */
    assert_true (exists ("mirrors/a1.git"));
    assert_false (exists ("mirrors/a2.git"));
    assert_false (exists ("snapshots/s1"));
    assert_false (exists ("mirrors/a3.git"));
    assert_false (exists ("snapshots/s2"));
    assert_false (exists ("snapshots/s3"));
    assert_true (exists ("mirrors/a4.git"));
    assert_int_equal (s.watermark_mirrors, 2);
    assert_int_equal (s.watermark_snapshots, 3);
    assert_true (s.used_before > 119.0 && s.used_before < 121.0);
    assert_true (s.used_after > 69.0 && s.used_after < 71.0);
    close (lk);
}

static void
test_stops_at_the_low_mark (void **st)
{
    make_snapshot ("s1", 3 * DAY);
    make_snapshot ("s2", 2 * DAY);
    make_snapshot ("s3", 1 * DAY);
    kiwi_gc_opts o = opts ();
    int calls = 0;
    o.usage = fake_usage;
    o.usage_userdata = &calls;
    o.disk_high = 70; /* 80% used */
    o.disk_low = 65;
    kiwi_gc_stats s;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);
    /* 80 -> 70 -> 60: the two oldest go, the newest stays */
    assert_false (exists ("snapshots/s1"));
    assert_false (exists ("snapshots/s2"));
    assert_true (exists ("snapshots/s3"));
    assert_int_equal (s.watermark_snapshots, 2);
}

/* A fetch left in <hex>.incoming by a worker that died mid-fetch goes,
 * whatever its age; one whose mirror's lock is held (a fetch in progress)
 * stays, and so does the mirror beside it. */
static void
test_interrupted_fetch_removed (void **st)
{
    make_mirror ("ee05", 1 * DAY);
    make_dir ("mirrors/ee05.incoming");
    make_dir ("mirrors/ee05.incoming/objects");
    make_file ("mirrors/ee05.incoming/objects/tmp_pack_x", "partial\n");
    make_dir ("mirrors/ff06.incoming");
    make_file ("mirrors/ff06.lock", "");
    int lk = lock_file ("mirrors/ff06.lock");
    kiwi_gc_opts o = opts ();
    kiwi_gc_stats s;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_gc_run (&o, &s, &err), 0);
    assert_false (exists ("mirrors/ee05.incoming"));
    assert_true (exists ("mirrors/ee05.git"));
    assert_true (exists ("mirrors/ff06.incoming"));
    assert_int_equal (s.fetches, 1);
    assert_int_equal (s.mirrors, 0);
    close (lk);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_workspaces_mirrors_snapshots_by_owner_and_age, setup, teardown),
        cmocka_unit_test_setup_teardown (test_watermark_removes_least_recently_used, setup, teardown),
        cmocka_unit_test_setup_teardown (test_stops_at_the_low_mark, setup, teardown),
        cmocka_unit_test_setup_teardown (test_interrupted_fetch_removed, setup, teardown),
    };
    return cmocka_run_group_tests_name ("gc", tests, NULL, NULL);
}
