/*
 * result-fit.c: results cut to fit the results topic (see result-fit.h).
 */
#include "worker/task/result-fit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/sha256.h"

/* The reason of a result kept short: a fitted result must leave room for
 * the diff, and the minimal one must not depend on what the task printed. */
#define FIT_REASON_MAX 2048

static char *
dup_cut (const char *s, size_t max)
{
    if (s == NULL)
        return NULL;
    size_t l = strlen (s);
    return strndup (s, l < max ? l : max);
}

/* Fills the diff fields of r from its whole diff, keeping it with `keep`. */
static void
describe_whole_diff (kiwi_result *r, const char *diff, size_t len, kiwi_diff_keep_fn keep, void *ud)
{
    unsigned char d[32];
    char hex[65], loc[KIWI_RESULT_LOCATION_MAX];
    kiwi_sha256 h;
    kiwi_sha256_init (&h);
    kiwi_sha256_update (&h, diff, len);
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, hex);
    loc[0] = '\0';
    if (keep)
        keep (r->task_id, diff, len, loc, sizeof loc, ud);
    r->diff_truncated = true;
    r->diff_bytes = len;
    free (r->diff_sha256);
    r->diff_sha256 = strdup (hex);
    free (r->diff_location);
    r->diff_location = loc[0] ? strdup (loc) : NULL;
}

int
kiwi_result_fit (const char *in, size_t in_len, size_t max, kiwi_diff_keep_fn keep, void *ud, char **out,
                 size_t *out_len, kiwi_error_t *err)
{
    *out = NULL;
    *out_len = 0;
    if (in_len <= max)
        return 0;
    kiwi_result r;
    if (kiwi_result_decode (in, in_len, &r, err) < 0)
        return -1;
    char *whole = r.diff;
    size_t whole_len = whole ? strlen (whole) : 0;
    char *old_reason = r.reason;
    r.reason = NULL;
    r.diff = whole ? strdup ("") : NULL;
    if (whole_len > 0 && !r.diff_truncated)
        describe_whole_diff (&r, whole, whole_len, keep, ud);
    /* what the result takes without its diff, with a reason of the longest
     * form it will have */
    char *reason = NULL;
    size_t keep_len = 0;
    int rc = -1;
    for (int pass = 0; pass < 2; pass++) {
        free (reason);
        reason = NULL;
        if (whole_len > 0) {
            char *cut = dup_cut (old_reason, FIT_REASON_MAX);
            if (asprintf (&reason, "%s%sdiff cut to its first %zu of %zu bytes to fit the results topic "
                                   "(KIWI_RESULT_MAX_BYTES %zu): whole diff at %s",
                          cut ? cut : "", cut && *cut ? "; " : "", pass ? keep_len : (size_t) 999999999999,
                          whole_len, max, r.diff_location ? r.diff_location : "nowhere (it could not be kept)")
                < 0)
                reason = NULL;
            free (cut);
        } else
            reason = dup_cut (old_reason, FIT_REASON_MAX);
        free (r.reason);
        r.reason = reason ? strdup (reason) : NULL;
        if (pass == 1) {
            free (r.diff);
            r.diff = whole ? strndup (whole, keep_len) : NULL;
            rc = kiwi_result_encode (&r, out, out_len, err);
            if (rc == 0 && *out_len > max) { /* cannot happen: the estimate was from above */
                free (*out);
                *out = NULL;
                free (r.diff);
                r.diff = whole ? strdup ("") : NULL;
                rc = kiwi_result_encode (&r, out, out_len, err);
            }
            break;
        }
        char *bare = NULL;
        size_t bare_len = 0;
        if (kiwi_result_encode (&r, &bare, &bare_len, err) < 0)
            goto done;
        free (bare);
        /* msgpack's string header grows by at most 4 bytes with the diff */
        size_t room = bare_len + 8 < max ? max - bare_len - 8 : 0;
        if (room >= whole_len)
            room = whole_len;
        /* whole lines only */
        size_t k = room;
        while (k > 0 && whole[k - 1] != '\n')
            k--;
        keep_len = k;
    }
    if (rc == 0)
        rc = 1;
done:
    free (reason);
    free (whole);
    free (old_reason);
    kiwi_result_clear (&r);
    return rc;
}

int
kiwi_result_minimal (const char *in, size_t in_len, size_t refused_len, kiwi_diff_keep_fn keep, void *ud,
                     char **out, size_t *out_len, kiwi_error_t *err)
{
    *out = NULL;
    kiwi_result r;
    if (kiwi_result_decode (in, in_len, &r, err) < 0)
        return -1;
    kiwi_result m;
    kiwi_result_init (&m);
    m.task_id = r.task_id;
    r.task_id = NULL;
    m.worker_id = r.worker_id;
    r.worker_id = NULL;
    m.task_sha256 = steal_pointer (&r.task_sha256);
    m.status = r.status;
    m.rounds = r.rounds;
    m.tokens_in = r.tokens_in;
    m.tokens_out = r.tokens_out;
    m.cost_usd_micros = r.cost_usd_micros;
    m.duration_ms = r.duration_ms;
    m.finished_at = r.finished_at;
    bool had_diff = r.diff != NULL && (r.diff[0] != '\0' || r.diff_truncated);
    if (r.diff != NULL) {
        m.diff = strdup ("");
        if (r.diff_truncated) { /* kept already, when the result was fitted */
            m.diff_truncated = true;
            m.diff_bytes = r.diff_bytes;
            m.diff_sha256 = steal_pointer (&r.diff_sha256);
            m.diff_location = steal_pointer (&r.diff_location);
        } else if (r.diff[0] != '\0')
            describe_whole_diff (&m, r.diff, strlen (r.diff), keep, ud);
    }
    bool had_reason = r.reason != NULL && r.reason[0] != '\0';
    const char *loc = m.diff_location ? m.diff_location : "nowhere (it could not be kept)";
    /* the location is bounded (at most KIWI_RESULT_LOCATION_MAX), so is this */
    int n;
    if (had_diff)
        n = asprintf (&m.reason, "result too large for the topic (%zu bytes): diff left out; whole diff at %s%s",
                      refused_len, loc, had_reason ? " (reason left out too)" : "");
    else
        n = asprintf (&m.reason, "result too large for the topic (%zu bytes)%s", refused_len,
                      had_reason ? ": reason left out" : "");
    if (n < 0)
        m.reason = NULL;
    int rc = kiwi_result_encode (&m, out, out_len, err);
    kiwi_result_clear (&m);
    kiwi_result_clear (&r);
    return rc;
}

int
kiwi_diff_keep_file (const char *state_dir, const char *task_id, const char *diff, size_t len, char *path,
                     size_t cap, kiwi_error_t *err)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 300];
    snprintf (dir, sizeof dir, "%s/results", state_dir);
    if (mkdir (dir, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", dir);
    snprintf (path, cap, "%s/%s.diff", dir, task_id);
    snprintf (tmp, sizeof tmp, "%s/%s.diff.partial", dir, task_id);
    int fd = open (tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return kiwi_error_make (err, errno, "creating %s", tmp);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write (fd, diff + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno;
            close (fd);
            unlink (tmp);
            return kiwi_error_make (err, e, "writing %s", tmp);
        }
        off += (size_t) w;
    }
    if (close (fd) < 0 || rename (tmp, path) < 0) {
        int e = errno;
        unlink (tmp);
        return kiwi_error_make (err, e, "writing %s", path);
    }
    return 0;
}

typedef struct file_keep {
    const char *state_dir;
    kiwi_error_t *err;
    int rc;
} file_keep;

static void
keep_to_file (const char *task_id, const char *diff, size_t len, char *loc, size_t cap, void *ud)
{
    file_keep *k = ud;
    char path[PATH_MAX + 300], host[256] = "localhost";
    k->rc = kiwi_diff_keep_file (k->state_dir, task_id, diff, len, path, sizeof path, k->err);
    if (k->rc < 0)
        return;
    gethostname (host, sizeof host - 1);
    snprintf (loc, cap, "file://%s%s", host, path);
}

int
kiwi_result_keep_oversized (kiwi_result *r, const char *state_dir, size_t max_diff, kiwi_error_t *err)
{
    size_t len = r->diff ? strlen (r->diff) : 0;
    if (len <= max_diff)
        return 0;
    file_keep k = { state_dir, err, 0 };
    describe_whole_diff (r, r->diff, len, keep_to_file, &k);
    if (k.rc < 0) {
        char *why = NULL;
        if (asprintf (&why, "the diff (%zu bytes) is larger than a result may carry (%zu) and could not be kept: %s",
                      len, max_diff, kiwi_error_msg (*err))
            < 0)
            why = NULL;
        free (r->diff);
        r->diff = NULL;
        r->diff_truncated = false;
        r->diff_bytes = 0;
        free (r->diff_sha256);
        r->diff_sha256 = NULL;
        free (r->diff_location);
        r->diff_location = NULL;
        free (r->reason);
        r->reason = why;
        r->status = KIWI_RESULT_ERROR;
        return -1;
    }
    size_t k_len = max_diff;
    while (k_len > 0 && r->diff[k_len - 1] != '\n')
        k_len--;
    r->diff[k_len] = '\0';
    char *reason = NULL;
    if (asprintf (&reason, "%.*s%sdiff cut to its first %zu of %zu bytes (the most a result carries): whole diff at %s",
                  FIT_REASON_MAX, r->reason ? r->reason : "", r->reason && *r->reason ? "; " : "", k_len, len,
                  r->diff_location)
        >= 0) {
        free (r->reason);
        r->reason = reason;
    }
    return 1;
}
