/*
 * fetch-digest.c: the ICAP side of kiwi-fetch-digest (see fetch-digest.h).
 *
 * ICAP (RFC 3507) as Squid speaks it to a RESPMOD service without
 * previews (the OPTIONS answer offers none): a header block ended by an
 * empty line, an Encapsulated header giving the offsets of the HTTP
 * request's and response's headers that follow, then the response body in
 * HTTP chunks, the last one of size 0. The answer is 200 with the same
 * response headers and the same chunks, written as each chunk arrives.
 */
#include "worker/egress/fetch-digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sha256.h"

#define HEAD_MAX 65536              /* an ICAP header block */
#define HTTP_HEAD_MAX (1 << 20)     /* the encapsulated HTTP headers */
#define LINE_MAX_ 4096              /* a chunk's size line, a trailer line */
#define ISTAG "\"kiwi-digest-1\""

typedef struct reader {
    int fd;
    size_t pos, len;
    char buf[HEAD_MAX];
} reader;

typedef struct conn {
    reader r;
    int fd;
    const char *who;
    char why[256]; /* the error, when one ended the connection */
} conn;

__attribute__ ((format (printf, 2, 3))) static int
fail (conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (c->why, sizeof c->why, fmt, ap);
    va_end (ap);
    return -1;
}

/* More bytes into the buffer (what is unread moved to its start): >0 read,
 * 0 at the end of the stream, -1 on an error or a full buffer. */
static ssize_t
fill (reader *r)
{
    if (r->pos > 0) {
        memmove (r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len == sizeof r->buf) {
        errno = EMSGSIZE;
        return -1;
    }
    for (;;) {
        ssize_t n = read (r->fd, r->buf + r->len, sizeof r->buf - r->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            r->len += (size_t) n;
        return n;
    }
}

/* more: more of the answer follows at once (MSG_MORE: the kernel holds
 * this piece to send it with the next; the last piece of a chunk or of an
 * answer goes without it). */
static int
write_some (int fd, const void *p, size_t n, bool more)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = send (fd, s, n, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t) w;
    }
    return 0;
}

static int
write_all (int fd, const void *p, size_t n)
{
    return write_some (fd, p, n, false);
}

/* Up to and including the first "\r\n\r\n" (the block, NUL-terminated in
 * place of its last byte, stays in the buffer until the next read):
 * 1, 0 at a clean end of stream before any byte, -1 otherwise. */
static int
read_block (conn *c, char **block, size_t *n)
{
    reader *r = &c->r;
    size_t scanned = 0;
    for (;;) {
        char *avail = r->buf + r->pos;
        size_t have = r->len - r->pos;
        for (size_t i = scanned >= 3 ? scanned - 3 : 0; i + 3 < have; i++)
            if (memcmp (avail + i, "\r\n\r\n", 4) == 0) {
                *block = avail;
                *n = i + 4;
                r->pos += i + 4;
                avail[i + 3] = '\0';
                return 1;
            }
        scanned = have;
        ssize_t got = fill (r);
        if (got == 0)
            return have == 0 ? 0 : fail (c, "the connection ended inside a header block");
        if (got < 0)
            return fail (c, "%s", errno == EMSGSIZE ? "a header block over 64 KiB" : strerror (errno));
    }
}

/* Exactly n bytes: each piece to fn (which may be NULL). */
typedef int (*piece_fn) (void *ud, const char *p, size_t n);

static int
read_exact (conn *c, uint64_t n, piece_fn fn, void *ud)
{
    reader *r = &c->r;
    while (n > 0) {
        if (r->pos == r->len) {
            r->pos = r->len = 0;
            ssize_t got = fill (r);
            if (got <= 0)
                return fail (c, "the connection ended inside a message");
        }
        size_t take = r->len - r->pos;
        if (take > n)
            take = (size_t) n;
        if (fn && fn (ud, r->buf + r->pos, take) < 0)
            return -1;
        r->pos += take;
        n -= take;
    }
    return 0;
}

/* One line ended by "\r\n" (returned without it, NUL-terminated, valid
 * until the next read), at most LINE_MAX_ bytes. */
static char *
read_line (conn *c)
{
    reader *r = &c->r;
    size_t scanned = 0;
    for (;;) {
        char *avail = r->buf + r->pos;
        size_t have = r->len - r->pos;
        char *nl = memchr (avail + scanned, '\n', have - scanned);
        if (nl != NULL) {
            if (nl == avail || nl[-1] != '\r') {
                fail (c, "a line not ended by CRLF");
                return NULL;
            }
            nl[-1] = '\0';
            r->pos += (size_t) (nl - avail) + 1;
            return avail;
        }
        if (have > LINE_MAX_) {
            fail (c, "a line over 4 KiB");
            return NULL;
        }
        scanned = have;
        ssize_t got = fill (r);
        if (got <= 0) {
            fail (c, "the connection ended inside a line");
            return NULL;
        }
        /* fill moved what was unread to the buffer's start: the
         * bytes scanned are still the first `scanned` */
    }
}

/* The value of header `name` in an ICAP or HTTP header block (after the
 * first line), copied into dst; false when absent. */
static bool
header (const char *block, const char *name, char *dst, size_t cap)
{
    size_t nl = strlen (name);
    const char *p = strstr (block, "\r\n");
    while (p != NULL && p[2] != '\0' && p[2] != '\r') {
        const char *line = p + 2;
        const char *end = strstr (line, "\r\n");
        if (end == NULL)
            end = line + strlen (line);
        if ((size_t) (end - line) > nl && strncasecmp (line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = (size_t) (end - v);
            while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (vl >= cap)
                vl = cap - 1;
            memcpy (dst, v, vl);
            dst[vl] = '\0';
            return true;
        }
        p = *end ? end : NULL;
    }
    return false;
}

void
kiwi_digest_encode (const char *s, size_t len, char *dst, size_t max)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (len == 0 && max >= 2) {
        dst[0] = '-';
        dst[1] = '\0';
        return;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char) s[i];
        if (ch > ' ' && ch < 0x7f && ch != '%') {
            if (o + 1 >= max)
                break;
            dst[o++] = (char) ch;
        } else {
            if (o + 3 >= max)
                break;
            dst[o++] = '%';
            dst[o++] = hex[ch >> 4];
            dst[o++] = hex[ch & 15];
        }
    }
    dst[o] = '\0';
}

/* The Encapsulated header's offsets: the HTTP request's and response's
 * headers (-1 when absent) and where the body, or the null-body, starts. */
typedef struct encap {
    long req_hdr, res_hdr, body;
    bool has_body;
} encap;

static int
parse_encap (const char *v, encap *e)
{
    *e = (encap) { -1, -1, -1, false };
    long last = -1;
    char copy[512];
    snprintf (copy, sizeof copy, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r (copy, ",", &save); tok; tok = strtok_r (NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *eq = strchr (tok, '=');
        if (eq == NULL)
            return -1;
        *eq = '\0';
        char *end;
        errno = 0;
        long off = strtol (eq + 1, &end, 10);
        if (errno || end == eq + 1 || *end != '\0' || off < 0 || off < last || off > HTTP_HEAD_MAX)
            return -1;
        last = off;
        if (strcmp (tok, "req-hdr") == 0 && e->req_hdr < 0 && e->body < 0)
            e->req_hdr = off;
        else if (strcmp (tok, "res-hdr") == 0 && e->res_hdr < 0 && e->body < 0)
            e->res_hdr = off;
        else if ((strcmp (tok, "res-body") == 0 || strcmp (tok, "null-body") == 0) && e->body < 0) {
            e->body = off;
            e->has_body = strcmp (tok, "res-body") == 0;
        } else
            return -1; /* a request's body, an options body, twice one name */
    }
    return e->body < 0 ? -1 : 0;
}

static int
answer_options (conn *c)
{
    char out[512];
    int n = snprintf (out, sizeof out,
                      "ICAP/1.0 200 OK\r\nMethods: RESPMOD\r\nService: kiwi-fetch-digest\r\nISTag: " ISTAG
                      "\r\nMax-Connections: %d\r\nOptions-TTL: 86400\r\nEncapsulated: null-body=0\r\n\r\n",
                      KIWI_DIGEST_MAX_CONNECTIONS);
    return write_all (c->fd, out, (size_t) n) < 0 ? fail (c, "writing the OPTIONS answer: %s", strerror (errno)) : 0;
}

typedef struct body {
    conn *c;
    kiwi_sha256 sha;
    uint64_t size;
} body;

static int
echo_piece (void *ud, const char *p, size_t n)
{
    body *b = ud;
    kiwi_sha256_update (&b->sha, p, n);
    b->size += n;
    if (write_some (b->c->fd, p, n, true) < 0)
        return fail (b->c, "writing a body chunk: %s", strerror (errno));
    return 0;
}

/* The body's chunks, each written back as it comes; true in *ended when the
 * last chunk and its trailer came. */
static int
relay_body (conn *c, body *b, bool *ended)
{
    *ended = false;
    for (;;) {
        char *line = read_line (c);
        if (line == NULL)
            return -1;
        char *end;
        errno = 0;
        unsigned long long n = strtoull (line, &end, 16);
        if (end == line || errno || (*end != '\0' && *end != ';' && *end != ' ') || n > (1ULL << 40))
            return fail (c, "a bad chunk size line '%.64s'", line);
        if (strstr (end, "ieof"))
            return fail (c, "a preview's end (no preview was offered)");
        char head[32];
        int hl = snprintf (head, sizeof head, "%llx\r\n", n);
        if (write_some (c->fd, head, (size_t) hl, n > 0) < 0)
            return fail (c, "writing a chunk: %s", strerror (errno));
        if (n == 0) {
            /* trailer lines, then the empty line; none is passed on */
            for (;;) {
                char *t = read_line (c);
                if (t == NULL)
                    return -1;
                if (*t == '\0')
                    break;
            }
            if (write_all (c->fd, "\r\n", 2) < 0)
                return fail (c, "writing the last chunk: %s", strerror (errno));
            *ended = true;
            return 0;
        }
        if (read_exact (c, n, echo_piece, b) < 0)
            return -1;
        char *crlf = read_line (c);
        if (crlf == NULL)
            return -1;
        if (*crlf != '\0')
            return fail (c, "a chunk not ended by CRLF");
        if (write_all (c->fd, "\r\n", 2) < 0)
            return fail (c, "writing a chunk: %s", strerror (errno));
    }
}

/* The first line's n-th space-separated word (0-based), into dst. */
static void
word (const char *s, size_t len, int n, char *dst, size_t cap, size_t *wl)
{
    const char *end = s + len, *eol = memchr (s, '\r', len);
    if (eol)
        end = eol;
    const char *p = s;
    for (int i = 0; i < n && p < end; i++) {
        p = memchr (p, ' ', (size_t) (end - p));
        if (p == NULL) {
            p = end;
            break;
        }
        p++;
    }
    const char *q = p < end ? memchr (p, ' ', (size_t) (end - p)) : NULL;
    size_t l = (size_t) ((q ? q : end) - p);
    if (p >= end)
        l = 0;
    *wl = l;
    if (l >= cap)
        l = cap - 1;
    memcpy (dst, p, l);
    dst[l] = '\0';
}

static void
log_line (kiwi_digest_log *log, double t, const char *client, const char *http, size_t req_len, const char *res,
          size_t res_len, const body *b, bool has_body, bool ended)
{
    char method[64], url[2048], status[8], m_enc[KIWI_DIGEST_METHOD_MAX + 1], u_enc[KIWI_DIGEST_URL_MAX + 1];
    size_t ml = 0, ul = 0, sl = 0;
    word (http, req_len, 0, method, sizeof method, &ml);
    word (http, req_len, 1, url, sizeof url, &ul);
    word (res, res_len, 1, status, sizeof status, &sl);
    kiwi_digest_encode (method, strlen (method), m_enc, sizeof m_enc);
    kiwi_digest_encode (url, strlen (url), u_enc, sizeof u_enc);
    int st = atoi (status);
    if (sl != 3 || st < 100 || st > 999)
        st = 0;
    char hex[65] = "-";
    if (!ended)
        snprintf (hex, sizeof hex, "cut");
    else if (has_body) {
        kiwi_sha256 sha = b->sha;
        unsigned char d[32];
        kiwi_sha256_final (&sha, d);
        kiwi_sha256_digest_hex (d, hex);
    }
    char line[4096];
    int n = snprintf (line, sizeof line, "%.3f %s %s %d %llu %s %s\n", t, client, m_enc, st,
                      (unsigned long long) b->size, hex, u_enc);
    if (n > 0 && (size_t) n < sizeof line && log && log->fd >= 0) {
        ssize_t w = write (log->fd, line, (size_t) n);
        (void) w; /* a line the log could not take is lost, the transfer is not */
    }
}

/* "https://HOST[:443]/PATH" (up to the first space or control byte):
 * HOST lower-cased into host, a name (not an address), and *path (from its
 * first '/', "/" when none) with its length. */
static bool
https_target (const char *url, char *host, size_t hcap, const char **path, size_t *plen)
{
    if (strncasecmp (url, "https://", 8) != 0)
        return false;
    const char *h = url + 8;
    size_t hn = strcspn (h, ":/?# \t\r\n");
    if (hn == 0 || hn >= hcap)
        return false;
    bool digits_only_last = true;
    for (size_t i = 0; i < hn; i++) {
        char c = (char) tolower ((unsigned char) h[i]);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
        host[i] = c;
        if (c == '.')
            digits_only_last = true;
        else if (!(c >= '0' && c <= '9'))
            digits_only_last = false;
    }
    host[hn] = '\0';
    if (digits_only_last || host[0] == '.' || host[hn - 1] == '.')
        return false; /* an address, or not a name */
    const char *rest = h + hn;
    if (*rest == ':') {
        if (strncmp (rest, ":443", 4) != 0 || (rest[4] != '/' && rest[4] != '\0'))
            return false; /* the proxy takes TLS on 443 alone */
        rest += 4;
    }
    if (*rest != '/' && *rest != '\0')
        return false;
    *path = *rest ? rest : "/";
    *plen = *rest ? strcspn (rest, " \t\r\n") : 1;
    return true;
}

/* The live line of `lines` that lets `client` fetch `host` (with `path`,
 * or by a CONNECT, path NULL) on a connection whose SNI is `sni`: its hop
 * (1 for a registry's own redirect; a line without one is a registry's),
 * 0 when none does (kiwi_redirect_allowed). */
static int
redirect_hop (const char *lines, double now, const char *client, const char *host, const char *method,
              const char *path, const char *sni)
{
    bool connect = method && strcmp (method, "CONNECT") == 0;
    if (client == NULL || host == NULL || (!connect && (path == NULL || sni == NULL)))
        return 0;
    if (sni != NULL && strcasecmp (sni, host) != 0)
        return 0; /* a connection made for another name */
    char enc[KIWI_DIGEST_URL_MAX + 1] = "";
    if (!connect)
        kiwi_digest_encode (path, strlen (path), enc, sizeof enc);
    for (const char *l = lines; l && *l;) {
        const char *nl = strchr (l, '\n');
        size_t len = nl ? (size_t) (nl - l) : strlen (l);
        char buf[KIWI_DIGEST_URL_MAX + 512];
        if (len < sizeof buf) {
            memcpy (buf, l, len);
            buf[len] = '\0';
            char *save = NULL, *f[5];
            f[0] = strtok_r (buf, " ", &save);
            for (int i = 1; i < 5; i++)
                f[i] = f[i - 1] ? strtok_r (NULL, " ", &save) : NULL;
            if (f[0] && f[3]) {
                double t = strtod (f[0], NULL);
                int hop = f[4] ? atoi (f[4]) : 1;
                if (t > 0 && now - t <= KIWI_REDIRECT_TTL_S && t <= now + 5 && strcmp (f[1], client) == 0
                    && strcasecmp (f[2], host) == 0 && (connect || strcmp (f[3], enc) == 0) && hop >= 1
                    && hop <= KIWI_REDIRECT_HOPS_MAX)
                    return hop;
            }
        }
        l = nl ? nl + 1 : NULL;
    }
    return 0;
}

bool
kiwi_redirect_allowed (const char *lines, double now, const char *client, const char *host, const char *method,
                       const char *path, const char *sni)
{
    return redirect_hop (lines, now, client, host, method, path, sni) > 0;
}

char *
kiwi_redirects_read (const char *path)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return strdup ("");
    struct stat st;
    off_t from = fstat (fd, &st) == 0 && st.st_size > (4 << 20) ? st.st_size - (4 << 20) : 0;
    size_t cap = (size_t) (st.st_size - from) + 1;
    char *buf = malloc (cap);
    ssize_t n = buf ? pread (fd, buf, cap - 1, from) : -1;
    close (fd);
    if (n < 0) {
        free (buf);
        return strdup ("");
    }
    buf[n] = '\0';
    return buf;
}

/* The hop of a redirect whose request was itself a followed redirect's
 * target (the URL of `from` it named to `client`), read from the redirect
 * log: 0 when it was not. */
static int
followed_hop (const kiwi_digest_log *log, double t, const char *client, const char *from, const char *path, size_t pl)
{
    if (log->redirect_path == NULL || pl >= KIWI_DIGEST_URL_MAX)
        return 0;
    char p[KIWI_DIGEST_URL_MAX];
    memcpy (p, path, pl);
    p[pl] = '\0';
    char *text = kiwi_redirects_read (log->redirect_path);
    int hop = text ? redirect_hop (text, t, client, from, "GET", p, from) : 0;
    free (text);
    return hop;
}

/* A redirect of a registry's (or of a followed redirect's target, up to
 * KIWI_REDIRECT_HOPS_MAX): its target noted before the answer goes back
 * (fetch-digest.h). */
static void
note_redirect (kiwi_digest_log *log, double t, const char *client, const char *req, size_t req_len, const char *res,
               size_t res_len)
{
    if (log == NULL || log->redirect_fd < 0 || log->redirect_from == NULL || strcmp (client, "-") == 0)
        return;
    char status[8], url[2048], from[256], to[256], loc[4096];
    size_t sl, ul, pl;
    const char *path;
    word (res, res_len, 1, status, sizeof status, &sl);
    int st = atoi (status);
    if (sl != 3 || !(st == 301 || st == 302 || st == 303 || st == 307 || st == 308))
        return;
    word (req, req_len, 1, url, sizeof url, &ul);
    if (ul >= sizeof url || !https_target (url, from, sizeof from, &path, &pl))
        return;
    int hop = 0;
    for (size_t i = 0; hop == 0 && log->redirect_from[i]; i++)
        if (strcmp (from, log->redirect_from[i]) == 0)
            hop = 1;
    if (hop == 0) {
        int prev = followed_hop (log, t, client, from, path, pl);
        hop = prev > 0 && prev < KIWI_REDIRECT_HOPS_MAX ? prev + 1 : 0;
    }
    if (hop == 0 || !header (res, "Location", loc, sizeof loc) || !https_target (loc, to, sizeof to, &path, &pl))
        return;
    char enc[KIWI_DIGEST_URL_MAX + 1], line[KIWI_DIGEST_URL_MAX + 512];
    if (pl * 3 >= sizeof enc)
        return; /* too long to note whole: not followed */
    kiwi_digest_encode (path, pl, enc, sizeof enc);
    int n = hop == 1 ? snprintf (line, sizeof line, "%.3f %s %s %s\n", t, client, to, enc)
                     : snprintf (line, sizeof line, "%.3f %s %s %s %d\n", t, client, to, enc, hop);
    if (n > 0 && (size_t) n < sizeof line) {
        ssize_t w = write (log->redirect_fd, line, (size_t) n);
        (void) w; /* not noted: the client's fetch is refused, nothing worse */
    }
}

static bool
valid_client (const char *s)
{
    if (*s == '\0' || strlen (s) > 45)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F') || *s == '.'
              || *s == ':'))
            return false;
    return true;
}

static int
respmod (conn *c, const char *icap, kiwi_digest_log *log)
{
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    double t = (double) now.tv_sec + (double) now.tv_nsec / 1e9;
    char v[512], client[64] = "-";
    if (!header (icap, "Encapsulated", v, sizeof v))
        return fail (c, "a RESPMOD without Encapsulated");
    encap e;
    if (parse_encap (v, &e) < 0 || e.res_hdr < 0 || (e.req_hdr >= 0 && e.req_hdr != 0) || (e.req_hdr < 0 && e.res_hdr != 0))
        return fail (c, "an Encapsulated header this service does not take: '%.128s'", v);
    if (header (icap, "X-Client-IP", v, sizeof v) && valid_client (v))
        snprintf (client, sizeof client, "%s", v);
    if (header (icap, "Preview", v, sizeof v))
        return fail (c, "a preview (none was offered)");
    /* the HTTP request's and response's headers, whole */
    size_t hl = (size_t) e.body;
    char *http = malloc (hl + 1);
    if (http == NULL)
        return fail (c, "out of memory");
    size_t got = 0;
    int rc = 0;
    while (rc == 0 && got < hl) {
        reader *r = &c->r;
        if (r->pos == r->len) {
            r->pos = r->len = 0;
            if (fill (r) <= 0) {
                rc = fail (c, "the connection ended inside the HTTP headers");
                break;
            }
        }
        size_t take = r->len - r->pos < hl - got ? r->len - r->pos : hl - got;
        memcpy (http + got, r->buf + r->pos, take);
        r->pos += take;
        got += take;
    }
    if (rc < 0) {
        free (http);
        return -1;
    }
    http[hl] = '\0';
    const char *req = e.req_hdr >= 0 ? http : "";
    size_t req_len = e.req_hdr >= 0 ? (size_t) e.res_hdr : 0;
    const char *res = http + e.res_hdr;
    size_t res_len = hl - (size_t) e.res_hdr;
    char head[256];
    int n = snprintf (head, sizeof head, "ICAP/1.0 200 OK\r\nISTag: " ISTAG "\r\nEncapsulated: res-hdr=0, %s=%zu\r\n\r\n",
                      e.has_body ? "res-body" : "null-body", res_len);
    body b = { .c = c };
    kiwi_sha256_init (&b.sha);
    bool ended = !e.has_body;
    note_redirect (log, t, client, req, req_len, res, res_len);
    if (write_some (c->fd, head, (size_t) n, true) < 0 || write_some (c->fd, res, res_len, e.has_body) < 0)
        rc = fail (c, "writing the answer: %s", strerror (errno));
    else if (e.has_body)
        rc = relay_body (c, &b, &ended);
    log_line (log, t, client, req, req_len, res, res_len, &b, e.has_body, ended);
    free (http);
    return rc;
}

static int
refuse (conn *c, const char *status)
{
    char out[256];
    int n = snprintf (out, sizeof out, "ICAP/1.0 %s\r\nISTag: " ISTAG "\r\nEncapsulated: null-body=0\r\nConnection: close\r\n\r\n",
                      status);
    write_all (c->fd, out, (size_t) n);
    return -1;
}

int
kiwi_digest_serve (int fd, kiwi_digest_log *log, const char *who)
{
    conn *c = calloc (1, sizeof *c);
    if (c == NULL)
        return -1;
    c->fd = fd;
    c->r.fd = fd;
    c->who = who;
    int done = 0, rc = 0;
    for (;;) {
        char *icap = NULL;
        size_t n = 0;
        int got = read_block (c, &icap, &n);
        if (got <= 0) {
            rc = got;
            break;
        }
        char method[16], version[16];
        size_t ml, vl;
        word (icap, n, 0, method, sizeof method, &ml);
        word (icap, n, 2, version, sizeof version, &vl);
        if (strncmp (version, "ICAP/1.0", 8) != 0) {
            rc = refuse (c, "400 Bad Request");
            fail (c, "not an ICAP/1.0 request");
            break;
        }
        /* the block stays valid: copied, since the next reads reuse the buffer */
        char *copy = strndup (icap, n);
        if (copy == NULL) {
            rc = fail (c, "out of memory");
            break;
        }
        char conn_h[64] = "";
        header (copy, "Connection", conn_h, sizeof conn_h);
        if (strcmp (method, "OPTIONS") == 0)
            rc = answer_options (c);
        else if (strcmp (method, "RESPMOD") == 0) {
            rc = respmod (c, copy, log);
            if (rc == 0)
                done++;
        } else {
            rc = refuse (c, "405 Method Not Allowed");
            fail (c, "an ICAP method this service does not take: %s", method);
        }
        free (copy);
        if (rc < 0 || strcasecmp (conn_h, "close") == 0)
            break;
    }
    if (rc < 0)
        fprintf (stderr, "kiwi-fetch-digest: %s: %s\n", who ? who : "connection", c->why[0] ? c->why : "error");
    free (c);
    return rc < 0 ? -1 : done;
}

int
kiwi_digest_parse (char *line, kiwi_digest_entry *e)
{
    memset (e, 0, sizeof *e);
    char *f[7];
    char *save = NULL, *p = line;
    size_t len = strlen (line);
    if (len > 0 && line[len - 1] == '\n')
        line[len - 1] = '\0';
    for (int i = 0; i < 7; i++) {
        f[i] = strtok_r (p, " ", &save);
        p = NULL;
        if (f[i] == NULL)
            return -1;
    }
    if (strtok_r (NULL, " ", &save) != NULL)
        return -1;
    char *end;
    e->time = strtod (f[0], &end);
    if (*end != '\0' || e->time <= 0)
        return -1;
    e->client = f[1];
    e->method = f[2];
    long st = strtol (f[3], &end, 10);
    if (*end != '\0' || st < 0 || st > 999)
        return -1;
    e->status = (int) st;
    long long sz = strtoll (f[4], &end, 10);
    if (*end != '\0' || sz < 0)
        return -1;
    e->size = sz;
    if (strcmp (f[5], "cut") == 0)
        e->cut = true;
    else if (strcmp (f[5], "-") != 0) {
        if (strlen (f[5]) != 64 || strspn (f[5], "0123456789abcdef") != 64)
            return -1;
        e->sha256 = f[5];
    }
    e->url = f[6];
    return 0;
}
