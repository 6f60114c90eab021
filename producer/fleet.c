/*
 * fleet.c: the fleet from heartbeats (see fleet.h): one record per worker,
 * its state at a given time, and the table and JSON renderings.
 */
#include "producer/fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/cleanup.h"

void
kiwi_fleet_init (kiwi_fleet *f, int64_t gone_after_ms)
{
    memset (f, 0, sizeof *f);
    f->gone_after_ms = gone_after_ms;
}

void
kiwi_fleet_clear (kiwi_fleet *f)
{
    for (size_t i = 0; i < f->n; i++)
        kiwi_heartbeat_clear (&f->workers[i].hb);
    free (f->workers);
    kiwi_fleet_init (f, f->gone_after_ms);
}

int
kiwi_fleet_update (kiwi_fleet *f, kiwi_heartbeat *hb, kiwi_error_t *err)
{
    /* Binary search by worker id: the table stays sorted. */
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp (f->workers[mid].hb.worker_id, hb->worker_id);
        if (c == 0) {
            kiwi_fleet_worker *w = &f->workers[mid];
            if (hb->ts <= w->hb.ts) {
                kiwi_heartbeat_clear (hb); /* older or the same: the newer one stays */
                return 0;
            }
            w->interval_ms = hb->ts - w->hb.ts;
            kiwi_heartbeat_clear (&w->hb);
            w->hb = *hb;
            kiwi_heartbeat_init (hb);
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 16;
        kiwi_fleet_worker *nw = realloc (f->workers, ncap * sizeof *nw);
        if (nw == NULL)
            return kiwi_error_make (err, ENOMEM, "the fleet table");
        f->workers = nw;
        f->cap = ncap;
    }
    memmove (&f->workers[lo + 1], &f->workers[lo], (f->n - lo) * sizeof *f->workers);
    kiwi_fleet_worker *w = &f->workers[lo];
    memset (w, 0, sizeof *w);
    w->hb = *hb;
    w->first_ts = hb->ts;
    w->first_done = hb->tasks_done;
    kiwi_heartbeat_init (hb);
    f->n++;
    return 0;
}

int64_t
kiwi_fleet_gone_after (const kiwi_fleet *f, const kiwi_fleet_worker *w)
{
    if (f->gone_after_ms > 0)
        return f->gone_after_ms;
    if (w->interval_ms > 0)
        return 3 * w->interval_ms;
    return KIWI_FLEET_GONE_DEFAULT_MS;
}

const char *
kiwi_fleet_state (const kiwi_fleet *f, const kiwi_fleet_worker *w, int64_t now_ms)
{
    if (now_ms - w->hb.ts > kiwi_fleet_gone_after (f, w))
        return "gone";
    return w->hb.degraded ? "degraded" : "up";
}

double
kiwi_fleet_tasks_per_min (const kiwi_fleet_worker *w)
{
    int64_t span = w->hb.ts - w->first_ts;
    if (span <= 0 || w->hb.tasks_done < w->first_done)
        return 0.0;
    return (double) (w->hb.tasks_done - w->first_done) * 60000.0 / (double) span;
}

/* "80%" or "-" when no lookup happened. */
static char *
hit_rate (const kiwi_heartbeat *h, char *buf, size_t cap)
{
    uint64_t n = h->cache_hits + h->cache_misses;
    if (n == 0)
        snprintf (buf, cap, "-");
    else
        snprintf (buf, cap, "%.0f%%", 100.0 * (double) h->cache_hits / (double) n);
    return buf;
}

static char *
age (int64_t ms, char *buf, size_t cap)
{
    int64_t s = ms < 0 ? 0 : ms / 1000;
    if (s < 120)
        snprintf (buf, cap, "%llds", (long long) s);
    else if (s < 7200)
        snprintf (buf, cap, "%lldm", (long long) (s / 60));
    else
        snprintf (buf, cap, "%lldh", (long long) (s / 3600));
    return buf;
}

char *
kiwi_fleet_oneline (const char *text)
{
    size_t n = strlen (text);
    char *out = malloc (4 * n + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) text[i];
        if (c == '\n' || c == '\r') {
            while (i + 1 < n && (text[i + 1] == '\n' || text[i + 1] == '\r'))
                i++;
            if (i + 1 < n && o > out) { /* a break between lines, not at an end */
                *o++ = ';';
                *o++ = ' ';
            }
        } else if (c == '\t')
            *o++ = ' ';
        else if (c < 0x20 || c == 0x7f)
            o += sprintf (o, "\\x%02x", c);
        else
            *o++ = (char) c;
    }
    *o = '\0';
    return out;
}

/* Appends one line to f as kiwi_fleet_oneline renders it (a worker's reason
 * or detail may hold line breaks and control characters), cut to width (0:
 * no cut), then '\n'. */
static void
put_line (FILE *f, const char *line, unsigned width)
{
    cleanup_free char *r = kiwi_fleet_oneline (line);
    if (r == NULL)
        return;
    size_t n = strlen (r);
    if (width > 0 && n > width)
        n = width;
    fwrite (r, 1, n, f);
    fputc ('\n', f);
}

/* The fleet's totals over the workers not gone. */
typedef struct fleet_sum {
    unsigned up, degraded, gone;
    uint64_t busy, total, hits, lookups;
    double tpm;
} fleet_sum;

static void
fleet_sum_of (const kiwi_fleet *f, int64_t now_ms, fleet_sum *s)
{
    memset (s, 0, sizeof *s);
    for (size_t i = 0; i < f->n; i++) {
        const kiwi_fleet_worker *w = &f->workers[i];
        const char *st = kiwi_fleet_state (f, w, now_ms);
        if (strcmp (st, "gone") == 0) {
            s->gone++;
            continue;
        }
        if (strcmp (st, "degraded") == 0)
            s->degraded++;
        else
            s->up++;
        s->busy += w->hb.slots_busy;
        s->total += w->hb.slots_total;
        s->hits += w->hb.cache_hits;
        s->lookups += w->hb.cache_hits + w->hb.cache_misses;
        s->tpm += kiwi_fleet_tasks_per_min (w);
    }
}

char *
kiwi_fleet_table (const kiwi_fleet *f, int64_t now_ms, unsigned width)
{
    char *out = NULL;
    size_t len = 0;
    FILE *o = open_memstream (&out, &len);
    if (o == NULL)
        return NULL;
    fleet_sum t;
    fleet_sum_of (f, now_ms, &t);
    char line[8192], hr[16];
    if (t.lookups > 0)
        snprintf (hr, sizeof hr, "%.0f%%", 100.0 * (double) t.hits / (double) t.lookups);
    else
        snprintf (hr, sizeof hr, "-");
    snprintf (line, sizeof line,
              "workers: %u up, %u degraded, %u gone | slots %llu/%llu busy | %.1f tasks/min | cache hits %s", t.up,
              t.degraded, t.gone, (unsigned long long) t.busy, (unsigned long long) t.total, t.tpm, hr);
    put_line (o, line, width);
    snprintf (line, sizeof line, "%-24s %-8s %9s %7s %7s %9s %5s %5s %6s  %s", "WORKER", "STATE", "SLOTS", "DONE",
              "FAILED", "TASKS/MIN", "CACHE", "REDIS", "SEEN", "EGRESS");
    put_line (o, line, width);
    for (size_t i = 0; i < f->n; i++) {
        const kiwi_fleet_worker *w = &f->workers[i];
        const kiwi_heartbeat *h = &w->hb;
        char slots[32], ago[16], cache[16];
        snprintf (slots, sizeof slots, "%u/%u", h->slots_busy, h->slots_total);
        int n = snprintf (line, sizeof line, "%-24s %-8s %9s %7llu %7llu %9.1f %5s %5s %6s ", h->worker_id,
                          kiwi_fleet_state (f, w, now_ms), slots, (unsigned long long) h->tasks_done,
                          (unsigned long long) h->tasks_failed, kiwi_fleet_tasks_per_min (w),
                          hit_rate (h, cache, sizeof cache), h->redis_ok ? "ok" : "DOWN",
                          age (now_ms - h->ts, ago, sizeof ago));
        for (size_t e = 0; e < h->n_egress && n > 0 && (size_t) n < sizeof line; e++)
            n += snprintf (line + n, sizeof line - (size_t) n, " %s %s", h->egress[e].name,
                           h->egress[e].ok ? "ok" : "FAIL");
        if (h->n_egress == 0 && n > 0 && (size_t) n < sizeof line)
            snprintf (line + n, sizeof line - (size_t) n, " (no checks)");
        put_line (o, line, width);
        if (h->degraded) {
            snprintf (line, sizeof line, "    degraded: %s",
                      h->degraded_reason && *h->degraded_reason ? h->degraded_reason : "(no reason given)");
            put_line (o, line, width);
        }
        for (size_t e = 0; e < h->n_egress; e++)
            if (!h->egress[e].ok) {
                snprintf (line, sizeof line, "    egress %s failed: %s", h->egress[e].name,
                          h->egress[e].detail ? h->egress[e].detail : "(no detail)");
                put_line (o, line, width);
            }
    }
    if (f->n == 0)
        put_line (o, "(no heartbeats yet)", width);
    if (fclose (o) != 0) {
        free (out);
        return NULL;
    }
    return out;
}

char *
kiwi_fleet_json (const kiwi_fleet *f, int64_t now_ms, kiwi_error_t *err)
{
    json_t *doc = json_object ();
    json_t *arr = json_array ();
    for (size_t i = 0; i < f->n; i++) {
        const kiwi_fleet_worker *w = &f->workers[i];
        const char *st = kiwi_fleet_state (f, w, now_ms);
        cleanup_free char *hbj = NULL;
        if (kiwi_heartbeat_to_json (&w->hb, &hbj, err) < 0) {
            json_decref (arr);
            json_decref (doc);
            return NULL;
        }
        json_t *hb = json_loads (hbj, 0, NULL);
        uint64_t lookups = w->hb.cache_hits + w->hb.cache_misses;
        json_t *o = json_pack ("{s:s, s:s, s:I, s:I, s:f, s:o, s:o}", "worker_id", w->hb.worker_id, "state", st,
                               "age_ms", (json_int_t) (now_ms - w->hb.ts), "gone_after_ms",
                               (json_int_t) kiwi_fleet_gone_after (f, w), "tasks_per_min",
                               kiwi_fleet_tasks_per_min (w), "cache_hit_rate",
                               lookups ? json_real ((double) w->hb.cache_hits / (double) lookups) : json_null (),
                               "heartbeat", hb ? hb : json_null ());
        json_array_append_new (arr, o);
    }
    fleet_sum t;
    fleet_sum_of (f, now_ms, &t);
    json_object_set_new (doc, "ts", json_integer (now_ms));
    json_object_set_new (doc, "workers", arr);
    json_object_set_new (doc, "summary",
                         json_pack ("{s:i, s:i, s:i, s:I, s:I, s:f}", "up", (int) t.up, "degraded", (int) t.degraded,
                                    "gone", (int) t.gone, "slots_busy", (json_int_t) t.busy, "slots_total",
                                    (json_int_t) t.total, "tasks_per_min", t.tpm));
    char *s = json_dumps (doc, JSON_COMPACT);
    json_decref (doc);
    if (s == NULL)
        kiwi_error_make (err, ENOMEM, "printing the fleet");
    return s;
}

/* Appends up to KIWI__DIAG_NAMED workers' ids to o (", " between), with
 * each one's reason when `reasons`, then how many more there are. */
#define KIWI__DIAG_NAMED 5
static void
diag_workers (FILE *o, const kiwi_fleet *f, int64_t now_ms, const char *state, bool reasons)
{
    size_t named = 0, more = 0;
    for (size_t i = 0; i < f->n; i++) {
        const kiwi_fleet_worker *w = &f->workers[i];
        if (strcmp (kiwi_fleet_state (f, w, now_ms), state) != 0)
            continue;
        if (named == KIWI__DIAG_NAMED) {
            more++;
            continue;
        }
        fprintf (o, "%s%s", named++ ? ", " : "", w->hb.worker_id);
        if (reasons) {
            const char *r = w->hb.degraded_reason;
            cleanup_free char *line = kiwi_fleet_oneline (r && *r ? r : "no reason given");
            fprintf (o, " (%s)", line ? line : "?");
        }
    }
    if (more > 0)
        fprintf (o, " and %zu more", more);
}

/* A diagnosis is written to a memory stream: diag_open, then diag_close
 * into *out (malloc'd), or < 0 with *err. */
typedef struct diag_line {
    FILE *o;
    char *s;
    size_t len;
} diag_line;

static FILE *
diag_open (diag_line *l)
{
    l->s = NULL;
    l->len = 0;
    return l->o = open_memstream (&l->s, &l->len);
}

static int
diag_close (diag_line *l, char **out, kiwi_error_t *err)
{
    if (fclose (l->o) != 0) {
        free (l->s);
        return kiwi_error_make (err, ENOMEM, "the fleet's diagnosis");
    }
    *out = l->s;
    return 0;
}

int
kiwi_fleet_diagnose (const kiwi_fleet *f, int64_t now_ms, const char *topic, int64_t window_ms, char **out,
                     kiwi_error_t *err)
{
    *out = NULL;
    fleet_sum t;
    fleet_sum_of (f, now_ms, &t);
    if (t.up > 0)
        return 0;
    diag_line l;
    FILE *o = diag_open (&l);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "the fleet's diagnosis");
    if (f->n == 0)
        fprintf (o, "no worker heartbeat on %s in the last %llds: no kiwi-worker seems to be running for these topics",
                 topic, (long long) (window_ms / 1000));
    else if (t.degraded == 0) {
        fprintf (o, "no worker is up: the worker%s seen on %s (", f->n > 1 ? "s" : "", topic);
        diag_workers (o, f, now_ms, "gone", false);
        fprintf (o, ") stopped sending heartbeats");
    } else {
        fprintf (o, "every worker is degraded: ");
        diag_workers (o, f, now_ms, "degraded", true);
    }
    return diag_close (&l, out, err);
}

/* Up to KIWI__DIAG_NAMED names of list, then how many more. */
static void
diag_names (FILE *o, const kiwi_strv *list)
{
    for (size_t i = 0; i < list->n && i < KIWI__DIAG_NAMED; i++)
        fprintf (o, "%s%s", i ? ", " : "", list->v[i]);
    if (list->n > KIWI__DIAG_NAMED)
        fprintf (o, " and %zu more", list->n - KIWI__DIAG_NAMED);
}

int
kiwi_fleet_diagnose_readers (const kiwi_fleet *f, int64_t now_ms, const char *hb_topic, const char *tasks_topic,
                             const kiwi_topic_readers *r, char **out, kiwi_error_t *err)
{
    *out = NULL;
    fleet_sum t;
    fleet_sum_of (f, now_ms, &t);
    if (t.up == 0 || r->members > 0)
        return 0;
    diag_line l;
    FILE *o = diag_open (&l);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "the fleet's diagnosis");
    if (r->rebalancing.n > 0) {
        fprintf (o, "no consumer group has settled on %s yet: ", tasks_topic);
        diag_names (o, &r->rebalancing);
        fprintf (o, " %s rebalancing (worker%s up on %s: ", r->rebalancing.n > 1 ? "are" : "is", t.up > 1 ? "s" : "",
                 hb_topic);
        diag_workers (o, f, now_ms, "up", false);
        fprintf (o, ")");
    } else {
        fprintf (o, "no worker reads %s: no consumer group has a member on it, though %u worker%s %s up on %s (",
                 tasks_topic, t.up, t.up > 1 ? "s" : "", t.up > 1 ? "are" : "is", hb_topic);
        diag_workers (o, f, now_ms, "up", false);
        fprintf (o, "): they take their tasks from another topic (kiwi-worker's KIWI_TOPIC_TASKS against this "
                    "command's --tasks-topic)");
    }
    return diag_close (&l, out, err);
}
