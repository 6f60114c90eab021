/*
 * gc.h: the collection of what a worker leaves on its disk, under the state
 * directory (kiwi-worker --gc; the daemon runs it at start and every
 * 10 minutes):
 *
 *   work/<task>-<pid>          a task's workspace: removed when its pid is
 *                              dead or is no kiwi-worker (a task process
 *                              killed with -9 leaves it), and in any case
 *                              once older than a task can live
 *   mirrors/<hex>.git          a repository mirror: removed when unused for
 *                              KIWI_GC_MIRROR_IDLE. Its last use is the
 *                              newest of its lock file, its FETCH_HEAD
 *                              (every checkout fetches) and the mirror
 *                              itself. Never while its lock is held (a fetch)
 *                              or while a live workspace borrows its objects
 *                              (objects/info/alternates); the lock file stays
 *   mirrors/<hex>.incoming     a fetch not yet taken into its mirror: removed
 *                              when its mirror's lock is free (a worker died
 *                              mid-fetch)
 *   snapshots/<key>            an install snapshot: removed when its cache
 *                              entry expired and it was unused for 10 min
 *                              (when the cache can say), or unused for
 *                              KIWI_GC_SNAPSHOT_IDLE. Never while a task
 *                              holds it (kiwi_gc_snapshot_hold)
 *   snapshots/<key>.<pid>.partial  an interrupted install: its pid dead, or
 *                              older than a day
 *   results/<task>.diff        a whole diff too large for the results topic:
 *                              older than KIWI_DONE_TTL
 *
 * Then the watermark: while the state directory's filesystem is above
 * KIWI_GC_DISK_HIGH percent used, the least recently used mirrors and
 * snapshots go, one at a time, until it is below KIWI_GC_DISK_LOW; those in
 * use (as above) and those used in the last KIWI_GC_GRACE_S seconds (a
 * checkout between its fetch and its clone, a snapshot just made) stay.
 *
 * Removal is `rm -rf --one-file-system` of the entry itself, never through
 * a symlink.
 *
 * kiwi-worker --gc then collects the images Kiwi pulled for tasks, recorded
 * under images/ (kiwi_sandbox_gc_images, sandbox/docker/image-gc.h).
 */
#ifndef KIWI_WORKER_GC_H
#define KIWI_WORKER_GC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define KIWI_GC_GRACE_S 900
/* No task outlives the longest task timeout the schema allows. */
#define KIWI_GC_WORKSPACE_MAX_AGE_S (86400 + 3600)
#define KIWI_GC_PARTIAL_MAX_AGE_S 86400
#define KIWI_GC_EXPIRED_IDLE_S 600

/* How full the filesystem holding `path` is, in percent of what its users
 * can have (as df counts). Returns < 0 with *err when it cannot tell. */
typedef int (*kiwi_gc_usage_fn) (const char *path, double *used_pct, void *userdata, kiwi_error_t *err);

/* Whether the cache still has an install entry for snapshot `key`: 1 yes,
 * 0 expired, < 0 cannot tell. */
typedef int (*kiwi_gc_entry_fn) (const char *key, void *userdata);

typedef struct kiwi_gc_opts {
    const char *state_dir;
    int64_t now_s;              /* 0: the clock */
    int64_t mirror_idle_s;      /* KIWI_GC_MIRROR_IDLE */
    int64_t snapshot_idle_s;    /* KIWI_GC_SNAPSHOT_IDLE */
    int64_t results_max_age_s;  /* KIWI_DONE_TTL; 0: results kept */
    int disk_high, disk_low;    /* KIWI_GC_DISK_HIGH / _LOW percent; high 0: no watermark */
    kiwi_gc_usage_fn usage;     /* NULL: statvfs */
    void *usage_userdata;
    kiwi_gc_entry_fn entry_exists; /* NULL: the cache cannot tell */
    void *entry_userdata;
    const char *owner_exe;      /* basename of the executable owning workspaces; NULL: "kiwi-worker" */
} kiwi_gc_opts;

void kiwi_gc_opts_init (kiwi_gc_opts *o, const char *state_dir);

typedef struct kiwi_gc_stats {
    int workspaces, partials, mirrors, snapshots, results; /* removed by age or owner */
    int fetches;                                             /* interrupted fetches removed */
    int watermark_mirrors, watermark_snapshots;             /* removed by the watermark */
    int in_use;                                              /* kept because in use */
    double used_before, used_after;                          /* percent; -1 when unknown */
} kiwi_gc_stats;

/* One pass, as described above. Entries that cannot be removed are logged
 * and left; the pass goes on. Returns < 0 only when the state directory
 * cannot be read at all. */
int kiwi_gc_run (const kiwi_gc_opts *o, kiwi_gc_stats *st, kiwi_error_t *err);

/* Holds a snapshot for the task process's lifetime (a shared lock on
 * <snapshot>/lock, which the collection takes exclusively before removing
 * it). Returns the descriptor to close when done, or -1 when the snapshot
 * is gone (a miss). */
int kiwi_gc_snapshot_hold (const char *snapshot_dir);

#endif
