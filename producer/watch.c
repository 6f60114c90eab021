/*
 * watch.c: the bookkeeping of a watched batch (see watch.h): batch ids and
 * the times in kiwi's ids, the task id set, the rate window, the results
 * file and the progress line and outcome table.
 */
#include "producer/watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "schemas/task-input.h"
#include "schemas/wire.h"

/* ---------------------------------------------------------------- ids and times */

static bool
id_char (unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_'
           || c == ':' || c == '-';
}

int
kiwi_batch_id_check (const char *id, kiwi_error_t *err)
{
    size_t n = id ? strlen (id) : 0;
    if (n == 0)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "batch id: empty");
    if (n > KIWI_BATCH_ID_MAX)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "batch id: longer than %d bytes", KIWI_BATCH_ID_MAX);
    for (size_t i = 0; i < n; i++)
        if (!id_char ((unsigned char) id[i]))
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                         "batch id: character %zu is not one of A-Z a-z 0-9 . _ : -", i + 1);
    return 0;
}

int
kiwi_batch_id_new (char *buf, size_t cap, kiwi_error_t *err)
{
    return kiwi_timed_id_new ("batch", 4, buf, cap, err);
}

/* Reads n digits at s into *v. */
static bool
digits (const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

static int64_t
utc_ms (int Y, int M, int D, int h, int m, int s, int ms)
{
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || s > 60)
        return -1;
    struct tm tm = { .tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = s };
    time_t t = timegm (&tm);
    if (t == (time_t) -1)
        return -1;
    return (int64_t) t * 1000 + ms;
}

/* "20261201T195000" at s (15 characters), then optional ".mmm", then 'Z'.
 * Returns the ms, or -1; *end is the character after 'Z'. */
static int64_t
parse_compact (const char *s, const char **end)
{
    int Y, M, D, h, m, sec, ms = 0;
    if (!digits (s, 4, &Y) || !digits (s + 4, 2, &M) || !digits (s + 6, 2, &D) || s[8] != 'T'
        || !digits (s + 9, 2, &h) || !digits (s + 11, 2, &m) || !digits (s + 13, 2, &sec))
        return -1;
    const char *p = s + 15;
    if (*p == '.') {
        if (!digits (p + 1, 3, &ms))
            return -1;
        p += 4;
    }
    if (*p != 'Z')
        return -1;
    *end = p + 1;
    return utc_ms (Y, M, D, h, m, sec, ms);
}

int64_t
kiwi_id_time_ms (const char *id)
{
    const char *p = NULL;
    if (strncmp (id, "kiwi-", 5) == 0)
        p = id + 5;
    else if (strncmp (id, "batch-", 6) == 0)
        p = id + 6;
    else
        return -1;
    const char *end = NULL;
    int64_t t = parse_compact (p, &end);
    if (t < 0 || *end != '-')
        return -1;
    return t;
}

int
kiwi_time_parse (const char *s, int64_t *out)
{
    size_t n = strlen (s);
    if (n > 0 && n <= 15 && strspn (s, "0123456789") == n) {
        *out = strtoll (s, NULL, 10);
        return 0;
    }
    const char *end = NULL;
    int64_t t = parse_compact (s, &end);
    if (t < 0) {
        int Y, M, D, h, m, sec, ms = 0;
        if (!digits (s, 4, &Y) || s[4] != '-' || !digits (s + 5, 2, &M) || s[7] != '-' || !digits (s + 8, 2, &D)
            || (s[10] != 'T' && s[10] != ' ') || !digits (s + 11, 2, &h) || s[13] != ':' || !digits (s + 14, 2, &m)
            || s[16] != ':' || !digits (s + 17, 2, &sec))
            return -1;
        const char *p = s + 19;
        if (*p == '.') {
            if (!digits (p + 1, 3, &ms))
                return -1;
            p += 4;
        }
        if (*p != 'Z')
            return -1;
        end = p + 1;
        t = utc_ms (Y, M, D, h, m, sec, ms);
    }
    if (t < 0 || *end != '\0')
        return -1;
    *out = t;
    return 0;
}

char *
kiwi_time_format (int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r (&t, &tm);
    char when[32];
    strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf (buf, cap, "%s.%03dZ", when, (int) (ms % 1000));
    return buf;
}

/* ---------------------------------------------------------------- rate, ETA */

void
kiwi_rate_add (kiwi_rate *r, int64_t finished_at_ms)
{
    int64_t slot = finished_at_ms / KIWI_RATE_BUCKET_MS;
    size_t i = (size_t) (slot % KIWI_RATE_BUCKETS);
    if (r->bucket_at[i] != slot) {
        if (r->bucket_at[i] > slot && r->count[i] > 0)
            return; /* older than the window this bucket holds now */
        r->bucket_at[i] = slot;
        r->count[i] = 0;
    }
    r->count[i]++;
}

double
kiwi_rate_per_min (const kiwi_rate *r, int64_t now_ms, int64_t since_ms)
{
    int64_t window = (int64_t) KIWI_RATE_BUCKETS * KIWI_RATE_BUCKET_MS;
    int64_t from = now_ms - window;
    if (since_ms >= 0 && since_ms > from)
        from = since_ms;
    int64_t span = now_ms - from;
    if (span < 1000)
        span = 1000;
    uint64_t n = 0;
    int64_t first_slot = from / KIWI_RATE_BUCKET_MS, last_slot = now_ms / KIWI_RATE_BUCKET_MS;
    for (size_t i = 0; i < KIWI_RATE_BUCKETS; i++)
        if (r->count[i] > 0 && r->bucket_at[i] >= first_slot && r->bucket_at[i] <= last_slot)
            n += r->count[i];
    return (double) n * 60000.0 / (double) span;
}

int64_t
kiwi_eta_seconds (uint64_t remaining, double per_min)
{
    if (remaining == 0)
        return 0;
    if (!(per_min > 0))
        return -1;
    double s = (double) remaining * 60.0 / per_min;
    if (s > 1e12)
        return -1;
    int64_t whole = (int64_t) s;
    return (double) whole < s ? whole + 1 : whole;
}

char *
kiwi_duration_format (int64_t s, char *buf, size_t cap)
{
    if (s < 0)
        snprintf (buf, cap, "--");
    else if (s < 60)
        snprintf (buf, cap, "%llds", (long long) s);
    else if (s < 3600)
        snprintf (buf, cap, "%lldm%02llds", (long long) (s / 60), (long long) (s % 60));
    else if (s < 86400)
        snprintf (buf, cap, "%lldh%02lldm", (long long) (s / 3600), (long long) (s % 3600 / 60));
    else
        snprintf (buf, cap, "%lldd%02lldh", (long long) (s / 86400), (long long) (s % 86400 / 3600));
    return buf;
}

/* ---------------------------------------------------------------- the id set */

struct kiwi__watch_task {
    char *id; /* NULL: empty slot */
    size_t len;
    uint8_t state;
};

static uint64_t
hash (const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char) s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static kiwi__watch_task *
find (const kiwi_watch *w, const char *id, size_t len)
{
    if (w->cap == 0)
        return NULL;
    size_t mask = w->cap - 1;
    for (size_t i = (size_t) hash (id, len) & mask;; i = (i + 1) & mask) {
        kiwi__watch_task *t = &w->tasks[i];
        if (t->id == NULL)
            return t;
        if (t->len == len && memcmp (t->id, id, len) == 0)
            return t;
    }
}

static int
grow (kiwi_watch *w, kiwi_error_t *err)
{
    size_t ncap = w->cap ? w->cap * 2 : 1024;
    kiwi__watch_task *nt = calloc (ncap, sizeof *nt);
    if (nt == NULL)
        return kiwi_error_make (err, ENOMEM, "batch %s: the task id set", w->batch_id);
    kiwi__watch_task *old = w->tasks;
    size_t ocap = w->cap;
    w->tasks = nt;
    w->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].id != NULL)
            *find (w, old[i].id, old[i].len) = old[i];
    free (old);
    return 0;
}

int
kiwi_watch_init (kiwi_watch *w, const char *batch_id, int64_t submitted_at, kiwi_error_t *err)
{
    memset (w, 0, sizeof *w);
    w->submitted_at = submitted_at;
    w->batch_id = strdup (batch_id);
    if (w->batch_id == NULL)
        return kiwi_error_make (err, ENOMEM, "watching a batch");
    return 0;
}

void
kiwi_watch_clear (kiwi_watch *w)
{
    for (size_t i = 0; i < w->cap; i++)
        free (w->tasks[i].id);
    free (w->tasks);
    if (w->results != NULL)
        fclose (w->results);
    free (w->results_path);
    free (w->batch_id);
    memset (w, 0, sizeof *w);
}

int
kiwi_watch_add (kiwi_watch *w, const char *id, size_t len, kiwi_error_t *err)
{
    if ((w->n_tasks + 1) * 10 > w->cap * 7 && grow (w, err) < 0)
        return -1;
    kiwi__watch_task *t = find (w, id, len);
    if (t->id != NULL)
        return 0;
    t->id = strndup (id, len);
    if (t->id == NULL)
        return kiwi_error_make (err, ENOMEM, "batch %s: the task id set", w->batch_id);
    t->len = len;
    t->state = KIWI_WATCH_SUBMITTED;
    w->n_tasks++;
    return 1;
}

int
kiwi_watch_state_of (const kiwi_watch *w, const char *id, size_t len)
{
    kiwi__watch_task *t = find (w, id, len);
    return t == NULL || t->id == NULL ? -1 : t->state;
}

bool
kiwi_watch_progress (kiwi_watch *w, const char *id, size_t len)
{
    kiwi__watch_task *t = find (w, id, len);
    if (t == NULL || t->id == NULL || t->state != KIWI_WATCH_SUBMITTED)
        return false;
    t->state = KIWI_WATCH_RUNNING;
    w->running++;
    return true;
}

/* Marks a task done with status s; false when it is not of the batch or
 * already done. */
static bool
mark_done (kiwi_watch *w, kiwi__watch_task *t, kiwi_result_status s, int64_t finished_at)
{
    if (t == NULL || t->id == NULL || t->state == KIWI_WATCH_DONE)
        return false;
    if (t->state == KIWI_WATCH_RUNNING)
        w->running--;
    t->state = KIWI_WATCH_DONE;
    w->done++;
    if ((int) s > KIWI_RESULT_UNSET && s < KIWI_RESULT__END)
        w->by_status[s]++;
    if (finished_at > 0)
        kiwi_rate_add (&w->rate, finished_at);
    return true;
}

int
kiwi_watch_result (kiwi_watch *w, const kiwi_result *r, const char *json, kiwi_error_t *err)
{
    kiwi__watch_task *t = find (w, r->task_id, strlen (r->task_id));
    if (!mark_done (w, t, r->status, r->finished_at))
        return 0;
    if (w->results != NULL) {
        /* One write per line, flushed: a kill leaves at most one cut line. */
        if (fprintf (w->results, "%s\n", json) < 0 || fflush (w->results) != 0)
            return kiwi_error_make (err, errno, "writing the results file `%s`", w->results_path);
    }
    return 1;
}

/* ---------------------------------------------------------------- the results file */

long
kiwi_watch_open_results (kiwi_watch *w, const char *path, kiwi_error_t *err)
{
    FILE *f = fopen (path, "a+");
    if (f == NULL)
        return kiwi_error_make (err, errno, "opening the results file `%s`", path);
    rewind (f);
    cleanup_free char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long read = 0, lineno = 0;
    off_t good_end = 0; /* the end of the last complete line */
    while ((n = getline (&line, &cap, f)) >= 0) {
        lineno++;
        if (n == 0 || line[n - 1] != '\n')
            break; /* cut short: dropped below */
        good_end = ftello (f);
        json_error_t je;
        json_t *o = json_loadb (line, (size_t) n, 0, &je);
        const char *id = o ? json_string_value (json_object_get (o, "task_id")) : NULL;
        const char *st = o ? json_string_value (json_object_get (o, "status")) : NULL;
        kiwi_result_status s;
        if (id == NULL || st == NULL || kiwi_result_status_parse (st, &s) < 0) {
            kiwi_warn ("results file %s:%ld: not a result; skipped", path, lineno);
            json_decref (o);
            continue;
        }
        json_t *fa = json_object_get (o, "finished_at");
        int64_t finished_at = json_is_integer (fa) ? (int64_t) json_integer_value (fa) : 0;
        size_t len = strlen (id);
        if (kiwi_watch_add (w, id, len, err) < 0) {
            json_decref (o);
            fclose (f);
            return -1;
        }
        if (mark_done (w, find (w, id, len), s, finished_at)) {
            read++;
            w->from_file++;
        }
        json_decref (o);
    }
    if (ferror (f)) {
        int e = errno;
        fclose (f);
        return kiwi_error_make (err, e, "reading the results file `%s`", path);
    }
    fseeko (f, 0, SEEK_END);
    if (ftello (f) != good_end) {
        kiwi_warn ("results file %s: its last line was cut short; dropped (the result is read again)", path);
        if (ftruncate (fileno (f), good_end) < 0) {
            int e = errno;
            fclose (f);
            return kiwi_error_make (err, e, "truncating the results file `%s`", path);
        }
        fseeko (f, 0, SEEK_END);
    }
    if (w->results != NULL)
        fclose (w->results);
    free (w->results_path);
    w->results = f;
    w->results_path = strdup (path);
    if (w->results_path == NULL)
        return kiwi_error_make (err, ENOMEM, "opening the results file");
    return read;
}

/* ---------------------------------------------------------------- rendering */

uint64_t
kiwi_watch_total (const kiwi_watch *w)
{
    if (w->total_final)
        return w->total > w->n_tasks ? w->total : w->n_tasks;
    return w->n_tasks;
}

bool
kiwi_watch_complete (const kiwi_watch *w)
{
    return w->total_final && w->done >= kiwi_watch_total (w);
}

char *
kiwi_watch_line (const kiwi_watch *w, int64_t now_ms, bool tty, unsigned width)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    if (f == NULL)
        return NULL;
    uint64_t total = kiwi_watch_total (w);
    if (tty)
        fputs ("\r\033[K", f);
    else {
        char when[32];
        fprintf (f, "%s ", kiwi_time_format (now_ms, when, sizeof when));
    }
    long start = ftell (f);
    fprintf (f, "%s: %llu/%llu%s done", w->batch_id, (unsigned long long) w->done, (unsigned long long) total,
             w->total_final ? "" : "+");
    if (total > 0)
        fprintf (f, " (%.1f%%)", 100.0 * (double) w->done / (double) total);
    double rate = kiwi_rate_per_min (&w->rate, now_ms, w->submitted_at);
    uint64_t left = total > w->done ? total - w->done : 0;
    char eta[32];
    kiwi_duration_format (kiwi_eta_seconds (left, rate), eta, sizeof eta);
    fprintf (f, " | running %llu | %.1f/min | ETA %s", (unsigned long long) w->running, rate,
             w->total_final || left > 0 ? eta : "--");
    /* the counts last: a narrow terminal cuts them, not the estimate */
    bool any = false;
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++)
        if (w->by_status[s] > 0) {
            fprintf (f, "%s%s %llu", any ? ", " : " | ", kiwi_result_status_name ((kiwi_result_status) s),
                     (unsigned long long) w->by_status[s]);
            any = true;
        }
    if (!tty)
        fputc ('\n', f);
    if (fclose (f) != 0) {
        free (out);
        return NULL;
    }
    /* Cut to the terminal: the line is ASCII but for the batch id's
     * characters, which are ASCII too. */
    if (tty && width > 1 && len - (size_t) start > width - 1)
        out[(size_t) start + width - 1] = '\0';
    return out;
}

void
kiwi_watch_table (const kiwi_watch *w, FILE *out)
{
    uint64_t total = kiwi_watch_total (w);
    fprintf (out, "%-18s %8s %7s\n", "outcome", "tasks", "share");
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++) {
        uint64_t n = w->by_status[s];
        fprintf (out, "%-18s %8llu %6.1f%%\n", kiwi_result_status_name ((kiwi_result_status) s),
                 (unsigned long long) n, w->done ? 100.0 * (double) n / (double) w->done : 0.0);
    }
    uint64_t waiting = total > w->done + w->running ? total - w->done - w->running : 0;
    fprintf (out, "%-18s %8llu\n", "done", (unsigned long long) w->done);
    fprintf (out, "%-18s %8llu\n", "running", (unsigned long long) w->running);
    fprintf (out, "%-18s %8llu\n", "waiting", (unsigned long long) waiting);
    fprintf (out, "%-18s %8llu%s\n", "total", (unsigned long long) total, w->total_final ? "" : " (so far)");
    fflush (out);
}
