/*
 * egress-record.h: what the egress proxy's access log says about one
 * sandbox, and how a denial is told.
 *
 * Squid's access log (egress-proxy.h) is the one record of what Phase A
 * reached: each line names the client, the sandbox's address on the
 * install bridge. The daemon reads it as it grows (proxy-runner.h) and
 * publishes each denial from a running install's address as that task's
 * `egress_denied` progress event; the task process reads the part written
 * while its install ran (from the offset it noted before the sandbox
 * started) for the install event's host list and, when the install failed,
 * the hosts to name in its reason.
 *
 * Ownership: a kiwi_egress_record owns its JSON (kiwi_egress_record_clear).
 */
#ifndef KIWI_WORKER_EGRESS_RECORD_H
#define KIWI_WORKER_EGRESS_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "worker/egress/egress-proxy.h"

/* One access-log line, parsed in place (e) and sorted (the rule named by
 * kiwi_proxy_log_denied): */
typedef enum {
    KIWI_EGRESS_LINE_NONE = 0, /* not a line of the log, or one that counts nothing (a TLS peek before its
                                  splice, a bumped connection's CONNECT: its requests have lines of their own) */
    KIWI_EGRESS_LINE_REQUEST,  /* a request or tunnel let through */
    KIWI_EGRESS_LINE_DENIED,   /* a denied attempt; *rule names the rule */
} kiwi_egress_line;

kiwi_egress_line kiwi_egress_line_sort (char *line, kiwi_proxy_log_entry *e, const char **rule);

/* A denied attempt as the `egress_denied` event and the install event carry
 * it: {host, port, sni, protocol ("http", "connect" or "tls"), via ("proxy"
 * for the explicit proxy, "redirected" for a connection that ignored the
 * proxy settings), rule, allow_with (the setting that would let it through,
 * given the current one `setting`), attempted_at (ms since the epoch, as
 * Squid logged it)}, and for a write a read-only proxy refused
 * (KIWI_PROXY_RULE_METHOD) its method. New reference, NULL without memory. */
json_t *kiwi_egress_denial_json (const kiwi_proxy_log_entry *e, const char *rule, const char *setting);

/* The denial's `allow_with` into buf: KIWI_INSTALL_EGRESS=<setting>,<host>
 * for a name off the list; KIWI_INSTALL_EGRESS=open for an address, TLS
 * without SNI or a Host that lies about its address (no list allows
 * those). */
void kiwi_egress_allow_with (const kiwi_proxy_log_entry *e, const char *rule, const char *setting, char *buf,
                             size_t cap);

/* "redirected" (a connection that ignored the proxy settings, caught on
 * 80/443) or "proxy" (to the explicit proxy). */
const char *kiwi_egress_via (const kiwi_proxy_log_entry *e);

/* Adds one request to `hosts` (host -> {requests, bytes}), at most `max`
 * hosts (past that, a new host is not added). */
void kiwi_egress_count_host (json_t *hosts, const kiwi_proxy_log_entry *e, size_t max);

/* Where the part of the log written from now on starts: the file (its
 * device, inode and birth time, all 0 when it does not exist yet) and its
 * length.
 * proxy.sh run rotates the log past its bound (the file becomes <log>.0,
 * a new one is started): the inode tells a reader where its part went. */
typedef struct kiwi_egress_log_pos {
    uint64_t dev, ino;
    int64_t born_ns; /* the file's birth time, 0 where the file system keeps none */
    int64_t offset;
} kiwi_egress_log_pos;

kiwi_egress_log_pos kiwi_egress_log_mark (const char *log_path);

typedef struct kiwi_egress_record {
    json_t *hosts;     /* host -> {requests, bytes}, at most 256 hosts */
    json_t *denied;    /* kiwi_egress_denial_json objects, at most 64 */
    int64_t requests, bytes, denials; /* denials counts them all, listed or not */
    int64_t tunnels;   /* of the requests, TLS passed through untouched (a host not bumped): not in the fetch manifest */
    bool incomplete;   /* the log was rotated twice since the mark: its start is gone */
} kiwi_egress_record;

/* When one sandbox had its address. Docker gives a stopped container's
 * address to the next one it starts on the bridge (the worker's own
 * egress probe, another task's install), so a line is a sandbox's only
 * when its client is the sandbox's address and its request began (Squid's
 * %tS, the log's first field) at or after since_ms, less
 * KIWI_EGRESS_CLOCK_SLACK_MS, and at or before until_ms. since_ms is
 * taken once the sandbox runs and before its command starts (any earlier
 * line from that address was another container's); until_ms once it is
 * gone. 0 leaves that end open. */
typedef struct kiwi_egress_window {
    int64_t since_ms, until_ms;
} kiwi_egress_window;

/* Squid stamps a request with the time of its event loop's last turn, a
 * little before the request arrived: this much earlier still counts. A
 * stopped container's address goes to a new one only after that one is
 * created, started and given its files, seconds later. */
#define KIWI_EGRESS_CLOCK_SLACK_MS 100

/* Whether a line or packet of time at_ms (ms since the epoch) falls in w. */
bool kiwi_egress_in_window (int64_t at_ms, kiwi_egress_window w);

/* An entry's time (its request's start) in ms since the epoch. */
int64_t kiwi_egress_entry_ms (const kiwi_proxy_log_entry *e);

/* Each whole line written to the log at log_path from `from` on, to fn (the
 * line is fn's to change, for the call only): the rest of the marked file
 * (in <log>.0 when the log was rotated since) and the log written after
 * it. Waits (up to 1 s) for the log to stop growing first. *incomplete
 * when the log was rotated twice since the mark (its start is gone). An
 * error when the log cannot be read (a missing log has no lines). The
 * access log's and the fetch digest's (fetch-manifest.h) alike. */
typedef void (*kiwi_egress_line_fn) (char *line, void *ud);
int kiwi_egress_log_each (const char *log_path, kiwi_egress_log_pos from, kiwi_egress_line_fn fn, void *ud,
                          bool *incomplete, kiwi_error_t *err);

/* The lines from `from` on whose client is `client` and whose time is in
 * `window`: the rest of the marked file (in <log>.0 when the log was
 * rotated since) and the log written after it. Waits (up to 1 s) for the log to stop growing first:
 * Squid writes a tunnel's line when it closes, a moment after the
 * install's process ended. An error when the log cannot be read (a
 * missing log is an empty record). */
int kiwi_egress_record_read (const char *log_path, kiwi_egress_log_pos from, const char *client,
                             kiwi_egress_window window, const char *setting, kiwi_egress_record *rec,
                             kiwi_error_t *err);
void kiwi_egress_record_clear (kiwi_egress_record *rec);

#endif
