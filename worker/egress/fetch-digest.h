/*
 * fetch-digest.h: the egress proxy's record of what Phase A downloaded,
 * with the SHA-256 of every response body.
 *
 * Squid cannot hash what it passes on, so it hands every response it sees
 * in the clear (plain HTTP and the bumped registries' HTTPS, which in
 * read-only mode is every registry) to an ICAP service of Kiwi's
 * (RFC 3507, RESPMOD), kiwi-fetch-digest, on the host's loopback. The
 * service sends each response back unchanged as it arrives, hashing the
 * body on the way, and appends one line per response to its log when the
 * body has ended:
 *
 *   time client method status size sha256 url
 *
 * time: when the response reached the service (seconds since the epoch,
 * three decimals, as Squid's %tS); client: the sandbox's address (Squid's
 * X-Client-IP); status: the origin's HTTP status; size: the body's bytes;
 * sha256: the body's digest in hex, "-" without a body, "cut" for a body
 * that did not end (the client went away, the origin broke off: size is
 * what passed; no digest of a part is ever written); method and url
 * %-encoded (no space or control byte survives) and cut to 32 and 1024
 * bytes.
 *
 * The worker reads the lines of one sandbox's window as the install's fetch
 * manifest (fetch-manifest.h).
 *
 * Ownership: the caller owns the connection's descriptor and the log's.
 */
#ifndef KIWI_WORKER_FETCH_DIGEST_H
#define KIWI_WORKER_FETCH_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KIWI_DIGEST_URL_MAX 1024
#define KIWI_DIGEST_METHOD_MAX 32
/* How many connections the service takes at once (told to Squid as the
 * OPTIONS answer's Max-Connections; one past it is closed). */
#define KIWI_DIGEST_MAX_CONNECTIONS 64

/* Where the lines go: written whole with one write(2) on an O_APPEND
 * descriptor, so lines of concurrent connections never mix.
 *
 * Redirects: a registry may answer a download with a redirect to another
 * host (its storage). When `redirect_fd` is open, a 301, 302, 303, 307 or
 * 308 from one of `redirect_from` (the private registries' hosts and the
 * public registries whose downloads move elsewhere, lower case,
 * NULL-terminated) whose Location is https on port 443 is appended there
 * before the answer goes back to Squid, as
 *
 *   time client host path [hop]
 *
 * (path with its query, %-encoded); the redirect helper
 * (kiwi_redirect_allowed) lets that client fetch exactly that URL, and
 * nothing else of that host, for KIWI_REDIRECT_TTL_S. The answer to that
 * fetch may itself be a redirect (services.gradle.org to GitHub's release
 * page, that to its storage): it is noted the same way, with its hop (2,
 * 3; none is the registry's own, 1), when `redirect_path` (the file of
 * redirect_fd) names the fetch as a live redirect's, up to
 * KIWI_REDIRECT_HOPS_MAX. */
typedef struct kiwi_digest_log {
    int fd;
    int redirect_fd;                   /* -1: redirects are not followed */
    const char *const *redirect_from;
    const char *redirect_path;         /* NULL: a redirect's redirect is not followed */
} kiwi_digest_log;

#define KIWI_REDIRECT_TTL_S 300
#define KIWI_REDIRECT_HOPS_MAX 3

/* The redirect log's last 4 MiB (what is older than the TTL no longer
 * counts), "" when there is none: the caller frees it. */
char *kiwi_redirects_read (const char *path);

/* The redirect helper's answer for one request (Squid's external ACL):
 * `lines` is the redirect log's text, `now` seconds since the epoch. A
 * CONNECT (path NULL) to `host` is allowed when a live redirect of
 * `client` names that host and the connection's SNI is the host or not
 * yet known (NULL); any other request only with the SNI the host's and
 * the path exactly a live redirect's. */
bool kiwi_redirect_allowed (const char *lines, double now, const char *client, const char *host, const char *method,
                            const char *path, const char *sni);

/* Serves one ICAP connection (OPTIONS and RESPMOD, persistent) until the
 * peer closes it or breaks the protocol. Returns the number of RESPMOD
 * transactions completed, -1 when the connection ended in an error
 * (written to stderr, one line, prefixed with `who`). */
int kiwi_digest_serve (int fd, kiwi_digest_log *log, const char *who);

/* One log line parsed in place (fields point into `line`, which loses its
 * separators): 0, or -1 for a line that is not one of the log's. */
typedef struct kiwi_digest_entry {
    double time;
    const char *client, *method, *url;
    const char *sha256; /* 64 hex digits; NULL without a body */
    bool cut;           /* the body did not end: no digest */
    int status;
    int64_t size;
} kiwi_digest_entry;

int kiwi_digest_parse (char *line, kiwi_digest_entry *e);

/* s %-encoded into dst (every byte outside '!'..'~' and '%' itself), cut
 * to max bytes of output without splitting an escape; "-" for an empty s. */
void kiwi_digest_encode (const char *s, size_t len, char *dst, size_t max);

#endif
