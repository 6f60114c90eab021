/*
 * egress-record.c: what the egress proxy's access log says about one
 * sandbox (see egress-record.h).
 */
#include "worker/egress/egress-record.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#define RECORD_MAX_HOSTS 256
#define RECORD_MAX_DENIED 64

kiwi_egress_line
kiwi_egress_line_sort (char *line, kiwi_proxy_log_entry *e, const char **rule)
{
    *rule = NULL;
    if (kiwi_proxy_log_parse (line, e) < 0 || e->method == NULL)
        return KIWI_EGRESS_LINE_NONE;
    if (kiwi_proxy_log_denied (e, rule))
        return KIWI_EGRESS_LINE_DENIED;
    if (e->http_status == 0 && e->bump && strcmp (e->bump, "splice") == 0)
        return KIWI_EGRESS_LINE_NONE; /* the peek before a splice: its tunnel is the next line */
    if (e->bump && strcmp (e->bump, "bump") == 0 && strcmp (e->method, "CONNECT") == 0)
        return KIWI_EGRESS_LINE_NONE; /* a bumped connection: its requests are the lines that count */
    if (e->http_status == 403 && e->server == NULL && e->squid_status && strcmp (e->squid_status, "NONE_NONE") == 0)
        /* Squid's own 403 inside a CONNECT it denied (a bumping port
         * answers a denied CONNECT 200 and the error over TLS): the
         * CONNECT's line is the denial, nothing went out */
        return KIWI_EGRESS_LINE_NONE;
    return KIWI_EGRESS_LINE_REQUEST;
}

static bool
is_address (const char *h)
{
    unsigned char buf[16];
    char v6[256];
    size_t n = strlen (h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']' && n - 2 < sizeof v6) {
        memcpy (v6, h + 1, n - 2);
        v6[n - 2] = '\0';
        h = v6;
    }
    return inet_pton (AF_INET, h, buf) == 1 || inet_pton (AF_INET6, h, buf) == 1;
}

void
kiwi_egress_allow_with (const kiwi_proxy_log_entry *e, const char *rule, const char *setting, char *buf, size_t cap)
{
    /* a name off the list is let in by listing it; an address, a TLS
     * connection without a name, or a Host that lies about its address is
     * let through by no list: only by turning the proxy off */
    if (rule != NULL && strcmp (rule, KIWI_PROXY_RULE_METHOD) == 0)
        snprintf (buf, cap, "nothing"); /* a write is never let through */
    else if (e->host[0] != '\0' && !is_address (e->host) && rule != NULL && strcmp (rule, "Host does not match the address") != 0)
        snprintf (buf, cap, "KIWI_INSTALL_EGRESS=%s,%s", setting && *setting ? setting : "registries", e->host);
    else
        snprintf (buf, cap, "KIWI_INSTALL_EGRESS=open");
}

const char *
kiwi_egress_via (const kiwi_proxy_log_entry *e)
{
    return e->redirected || e->local_port == 80 || e->local_port == 443 ? "redirected" : "proxy";
}

json_t *
kiwi_egress_denial_json (const kiwi_proxy_log_entry *e, const char *rule, const char *setting)
{
    const char *via = kiwi_egress_via (e);
    bool connect = e->method && strcmp (e->method, "CONNECT") == 0;
    const char *protocol = !connect ? "http" : strcmp (via, "redirected") == 0 ? "tls" : "connect";
    char allow[600];
    kiwi_egress_allow_with (e, rule, setting, allow, sizeof allow);
    json_t *d = json_pack ("{s:s,s:i,s:s?,s:s,s:s,s:s,s:s,s:I}", "host", e->host, "port", e->port, "sni", e->sni,
                           "protocol", protocol, "via", via, "rule", rule ? rule : "denied", "allow_with", allow,
                           "attempted_at", (json_int_t) kiwi_egress_entry_ms (e));
    /* a refused write names its method; a refused host stays as it was */
    if (d != NULL && rule != NULL && strcmp (rule, KIWI_PROXY_RULE_METHOD) == 0
        && json_object_set_new (d, "method", json_string (e->method)) < 0) {
        json_decref (d);
        return NULL;
    }
    return d;
}

void
kiwi_egress_count_host (json_t *hosts, const kiwi_proxy_log_entry *e, size_t max)
{
    if (e->host[0] == '\0')
        return;
    json_t *h = json_object_get (hosts, e->host);
    if (h == NULL) {
        if (json_object_size (hosts) >= max)
            return;
        h = json_pack ("{s:I,s:I}", "requests", (json_int_t) 0, "bytes", (json_int_t) 0);
        if (h == NULL || json_object_set_new (hosts, e->host, h) < 0)
            return;
    }
    json_object_set_new (h, "requests", json_integer (json_integer_value (json_object_get (h, "requests")) + 1));
    json_object_set_new (h, "bytes", json_integer (json_integer_value (json_object_get (h, "bytes")) + e->bytes_out));
}

/* The identity of the file fd or path (fd < 0) refers to: device, inode
 * and, where the file system keeps it, its birth time (an inode number is
 * soon reused after a rotation deletes a file) and its size (offset). */
static bool
identify (int fd, const char *path, kiwi_egress_log_pos *pos)
{
    struct statx stx;
    if (statx (fd < 0 ? AT_FDCWD : fd, fd < 0 ? path : "", fd < 0 ? 0 : AT_EMPTY_PATH,
               STATX_INO | STATX_SIZE | STATX_BTIME, &stx)
        < 0)
        return false;
    pos->dev = ((uint64_t) stx.stx_dev_major << 32) | stx.stx_dev_minor;
    pos->ino = stx.stx_ino;
    pos->born_ns = stx.stx_mask & STATX_BTIME ? stx.stx_btime.tv_sec * 1000000000LL + stx.stx_btime.tv_nsec : 0;
    pos->offset = (int64_t) stx.stx_size;
    return true;
}

kiwi_egress_log_pos
kiwi_egress_log_mark (const char *log_path)
{
    kiwi_egress_log_pos pos = { 0 };
    if (!identify (-1, log_path, &pos))
        return (kiwi_egress_log_pos) { 0 };
    return pos;
}

bool
kiwi_egress_in_window (int64_t at_ms, kiwi_egress_window w)
{
    return (w.since_ms <= 0 || at_ms >= w.since_ms - KIWI_EGRESS_CLOCK_SLACK_MS) && (w.until_ms <= 0 || at_ms <= w.until_ms);
}

int64_t
kiwi_egress_entry_ms (const kiwi_proxy_log_entry *e)
{
    return (int64_t) (e->time * 1000.0 + 0.5);
}

/* Until the log has kept its length for 100 ms, at most 1 s. */
static void
wait_quiet (const char *log_path)
{
    int64_t last = kiwi_egress_log_mark (log_path).offset;
    for (int i = 0; i < 10; i++) {
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep (&ts, NULL);
        int64_t now = kiwi_egress_log_mark (log_path).offset;
        if (now == last)
            return;
        last = now;
    }
}

/* `path` opened for reading, and whether it is the file `pos` marked
 * (*same); NULL when it does not exist (errno ENOENT) or cannot be read. */
static FILE *
open_log (const char *path, kiwi_egress_log_pos pos, bool *same)
{
    FILE *f = fopen (path, "r");
    kiwi_egress_log_pos now;
    /* the same file: same identity, and not shorter than it was */
    *same = f != NULL && pos.ino != 0 && identify (fileno (f), NULL, &now) && now.dev == pos.dev
            && now.ino == pos.ino && now.born_ns == pos.born_ns && now.offset >= pos.offset;
    return f;
}

/* Each whole line of f from its position on, to fn. */
static void
each_line (FILE *f, kiwi_egress_line_fn fn, void *ud)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline (&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* being written: not this install's (it has ended) */
        fn (line, ud);
    }
    free (line);
}

int
kiwi_egress_log_each (const char *log_path, kiwi_egress_log_pos from, kiwi_egress_line_fn fn, void *ud,
                      bool *incomplete, kiwi_error_t *err)
{
    *incomplete = false;
    wait_quiet (log_path);
    bool same;
    FILE *f = open_log (log_path, from, &same);
    if (f == NULL && errno != ENOENT)
        return kiwi_error_make (err, errno, "reading the egress proxy's log %s", log_path);
    if (!same && from.ino != 0) {
        /* rotated since the mark (proxy.sh run keeps one old generation,
         * <log>.0): the rest of the marked file first, then the new one
         * whole; a file rotated away twice is gone (*incomplete) */
        char old[PATH_MAX];
        bool old_same = false;
        FILE *o = snprintf (old, sizeof old, "%s.0", log_path) < (int) sizeof old ? open_log (old, from, &old_same)
                                                                                 : NULL;
        if (o != NULL && old_same && fseeko (o, (off_t) from.offset, SEEK_SET) == 0)
            each_line (o, fn, ud);
        else
            *incomplete = true;
        if (o != NULL)
            fclose (o);
    }
    if (f == NULL)
        return 0;
    if (same && from.offset > 0 && fseeko (f, (off_t) from.offset, SEEK_SET) < 0) {
        int e = errno;
        fclose (f);
        return kiwi_error_make (err, e, "reading the egress proxy's log %s", log_path);
    }
    each_line (f, fn, ud);
    fclose (f);
    return 0;
}

typedef struct record_ctx {
    const char *client, *setting;
    kiwi_egress_window window;
    kiwi_egress_record *rec;
} record_ctx;

/* One line into the record when its client is the sandbox's and its time
 * in the sandbox's window. */
static void
record_line (char *line, void *ud)
{
    record_ctx *x = ud;
    kiwi_egress_record *rec = x->rec;
    kiwi_proxy_log_entry e;
    const char *rule;
    kiwi_egress_line kind = kiwi_egress_line_sort (line, &e, &rule);
    if (kind == KIWI_EGRESS_LINE_NONE || e.client == NULL || strcmp (e.client, x->client) != 0
        || !kiwi_egress_in_window (kiwi_egress_entry_ms (&e), x->window))
        return;
    if (kind == KIWI_EGRESS_LINE_DENIED) {
        rec->denials++;
        if (json_array_size (rec->denied) < RECORD_MAX_DENIED)
            json_array_append_new (rec->denied, kiwi_egress_denial_json (&e, rule, x->setting));
    } else {
        rec->requests++;
        rec->bytes += e.bytes_out;
        if (strcmp (e.method, "CONNECT") == 0)
            rec->tunnels++;
        kiwi_egress_count_host (rec->hosts, &e, RECORD_MAX_HOSTS);
    }
}

int
kiwi_egress_record_read (const char *log_path, kiwi_egress_log_pos from, const char *client,
                         kiwi_egress_window window, const char *setting, kiwi_egress_record *rec,
                         kiwi_error_t *err)
{
    memset (rec, 0, sizeof *rec);
    rec->hosts = json_object ();
    rec->denied = json_array ();
    if (rec->hosts == NULL || rec->denied == NULL) {
        kiwi_egress_record_clear (rec);
        return kiwi_error_make (err, ENOMEM, "the egress record");
    }
    record_ctx x = { .client = client, .setting = setting, .window = window, .rec = rec };
    if (kiwi_egress_log_each (log_path, from, record_line, &x, &rec->incomplete, err) < 0) {
        kiwi_egress_record_clear (rec);
        return -1;
    }
    return 0;
}

void
kiwi_egress_record_clear (kiwi_egress_record *rec)
{
    json_decref (rec->hosts);
    json_decref (rec->denied);
    memset (rec, 0, sizeof *rec);
}
