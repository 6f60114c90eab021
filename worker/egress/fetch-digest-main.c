/*
 * fetch-digest-main.c: kiwi-fetch-digest, the egress proxy's ICAP service
 * that records the SHA-256 of every response Phase A downloads
 * (fetch-digest.h). ops/egress/proxy.sh run starts it beside Squid:
 *
 *   kiwi-fetch-digest --log FILE --port-file FILE [--listen ADDR] [--parent PID]
 *                     [--redirects FILE --redirect-from HOSTS]
 *   kiwi-fetch-digest --redirect-acl FILE
 *
 *   --log FILE        the lines (appended; reopened on SIGHUP, after
 *                     proxy.sh has renamed it for rotation)
 *   --port-file FILE  where the TCP port it listens on is written once it
 *                     listens (a port of the kernel's choice)
 *   --listen ADDR     the IPv4 address it listens on (default 127.0.0.1:
 *                     Squid is on this host; no sandbox reaches loopback)
 *   --parent PID      it ends when PID (proxy.sh run, which becomes Squid)
 *                     is no longer its parent
 *   --redirects FILE  where a redirect of a host listed in HOSTS (one per
 *                     line: the private registries, the public ones whose
 *                     downloads move elsewhere) to another host is noted,
 *                     and a redirect of a noted target (fetch-digest.h)
 *   --redirect-acl FILE
 *                     Squid's external ACL helper instead (stdin to
 *                     stdout): each line "client host method path sni",
 *                     each value %-encoded by Squid ("-" when empty), is
 *                     answered OK when FILE's redirects allow it
 *                     (kiwi_redirect_allowed), ERR otherwise
 *
 * One thread per connection, at most KIWI_DIGEST_MAX_CONNECTIONS at once.
 * Errors go to stderr, one line each.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker/egress/fetch-digest.h"

static kiwi_digest_log the_log = { .fd = -1 };
static const char *log_path;
static atomic_int active;

static int
open_log (void)
{
    return open (log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

/* SIGHUP: the log reopened after proxy.sh renamed it for rotation, in the
 * handler (open, dup2 and close are async-signal-safe): dup2 puts the new
 * file behind the same descriptor at once, so a connection's line goes
 * whole to one file or the other, never to a closed descriptor. */
static void
on_hup (int sig)
{
    (void) sig;
    int saved = errno;
    int fd = open_log ();
    if (fd >= 0) {
        dup2 (fd, the_log.fd);
        close (fd);
    }
    errno = saved;
}

static void *
serve (void *arg)
{
    int fd = (int) (intptr_t) arg;
    /* a connection idle this long is Squid's no longer */
    struct timeval tv = { .tv_sec = 900 };
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* every piece goes out when it is written whole (write_some): Nagle's
     * wait for an ACK would hold each small chunk header back */
    int one = 1;
    setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    kiwi_digest_serve (fd, &the_log, "squid");
    close (fd);
    atomic_fetch_sub (&active, 1);
    return NULL;
}

/* A value of Squid's external ACL line: %-decoded in place; NULL for "-". */
static char *
acl_value (char *v)
{
    if (v == NULL || strcmp (v, "-") == 0)
        return NULL;
    char *o = v;
    for (char *i = v; *i; i++) {
        if (i[0] == '%' && isxdigit ((unsigned char) i[1]) && isxdigit ((unsigned char) i[2])) {
            char hex[3] = { i[1], i[2], '\0' };
            *o++ = (char) strtol (hex, NULL, 16);
            i += 2;
        } else
            *o++ = *i;
    }
    *o = '\0';
    return v;
}

/* The redirect log's last 4 MiB (it only grows by redirects, each noted
 * once; what is older than the TTL no longer counts anyway), read again
 * only when the file changed: Squid asks on every CONNECT to a host off
 * the list, and redirects are rare. *text is the caller's, replaced when
 * the file is read again. */
typedef struct redirects_cache {
    char *text;
    dev_t dev;
    ino_t ino;
    off_t size;
} redirects_cache;

static const char *
cached_redirects (const char *path, redirects_cache *c)
{
    struct stat st;
    if (stat (path, &st) < 0)
        memset (&st, 0, sizeof st);
    if (c->text == NULL || st.st_dev != c->dev || st.st_ino != c->ino || st.st_size != c->size) {
        char *t = kiwi_redirects_read (path);
        if (t == NULL)
            return NULL;
        free (c->text);
        c->text = t;
        c->dev = st.st_dev;
        c->ino = st.st_ino;
        c->size = st.st_size;
    }
    return c->text;
}

static int
redirect_acl (const char *path)
{
    char *line = NULL;
    size_t cap = 0;
    redirects_cache cache = { 0 };
    setvbuf (stdout, NULL, _IOLBF, 0);
    while (getline (&line, &cap, stdin) > 0) {
        char *save = NULL, *f[5];
        f[0] = strtok_r (line, " \n", &save);
        for (int i = 1; i < 5; i++)
            f[i] = f[i - 1] ? strtok_r (NULL, " \n", &save) : NULL;
        bool ok = false;
        if (f[4] != NULL) {
            const char *text = cached_redirects (path, &cache);
            struct timespec now;
            clock_gettime (CLOCK_REALTIME, &now);
            ok = text && kiwi_redirect_allowed (text, (double) now.tv_sec + (double) now.tv_nsec / 1e9,
                                                acl_value (f[0]), acl_value (f[1]), acl_value (f[2]),
                                                acl_value (f[3]), acl_value (f[4]));
        }
        fputs (ok ? "OK\n" : "ERR\n", stdout);
    }
    free (cache.text);
    free (line);
    return 0;
}

/* HOSTS: one host per line, lower case; NULL-terminated. */
static const char **
read_hosts (const char *path)
{
    FILE *f = fopen (path, "re");
    if (f == NULL)
        return NULL;
    const char **v = calloc (65, sizeof *v);
    char line[300];
    size_t n = 0;
    while (v && n < 64 && fgets (line, sizeof line, f)) {
        line[strcspn (line, " \r\n")] = '\0';
        for (char *c = line; *c; c++)
            *c = (char) tolower ((unsigned char) *c);
        if (line[0])
            v[n++] = strdup (line);
    }
    fclose (f);
    return v;
}

static void
usage (FILE *to)
{
    fputs ("usage: kiwi-fetch-digest --log FILE --port-file FILE [--listen ADDR] [--parent PID]\n"
           "                         [--redirects FILE --redirect-from HOSTS]\n"
           "       kiwi-fetch-digest --redirect-acl FILE\n"
           "The egress proxy's ICAP service (RESPMOD): every response passes back unchanged and\n"
           "one line per response is appended to the log: time client method status size sha256 url.\n",
           to);
}

int
main (int argc, char **argv)
{
    const char *port_file = NULL, *listen_addr = "127.0.0.1", *redirects = NULL, *redirect_from = NULL;
    long parent = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp (a, "-h") == 0 || strcmp (a, "--help") == 0) {
            usage (stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf (stderr, "kiwi-fetch-digest: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp (a, "--log") == 0)
            log_path = v;
        else if (strcmp (a, "--port-file") == 0)
            port_file = v;
        else if (strcmp (a, "--listen") == 0)
            listen_addr = v;
        else if (strcmp (a, "--redirects") == 0)
            redirects = v;
        else if (strcmp (a, "--redirect-from") == 0)
            redirect_from = v;
        else if (strcmp (a, "--redirect-acl") == 0)
            return redirect_acl (v);
        else if (strcmp (a, "--parent") == 0) {
            char *end;
            parent = strtol (v, &end, 10);
            if (*end != '\0' || parent <= 1) {
                fprintf (stderr, "kiwi-fetch-digest: bad --parent '%s'\n", v);
                return 2;
            }
        } else {
            fprintf (stderr, "kiwi-fetch-digest: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    if (log_path == NULL || port_file == NULL) {
        usage (stderr);
        return 2;
    }
    if (parent > 0) {
        /* ends with its parent however the parent ends */
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (getppid () != (pid_t) parent)
            return 0;
    }
    signal (SIGPIPE, SIG_IGN);
    the_log.redirect_fd = -1;
    if ((redirects == NULL) != (redirect_from == NULL)) {
        fprintf (stderr, "kiwi-fetch-digest: --redirects and --redirect-from go together\n");
        return 2;
    }
    if (redirects) {
        the_log.redirect_from = read_hosts (redirect_from);
        the_log.redirect_fd = open (redirects, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        the_log.redirect_path = redirects;
        if (the_log.redirect_from == NULL || the_log.redirect_fd < 0) {
            fprintf (stderr, "kiwi-fetch-digest: opening %s or %s: %s\n", redirects, redirect_from, strerror (errno));
            return 1;
        }
    }
    the_log.fd = open_log ();
    if (the_log.fd < 0) {
        fprintf (stderr, "kiwi-fetch-digest: opening %s: %s\n", log_path, strerror (errno));
        return 1;
    }
    struct sigaction sa = { .sa_handler = on_hup, .sa_flags = SA_RESTART };
    sigemptyset (&sa.sa_mask);
    sigaction (SIGHUP, &sa, NULL);
    struct sockaddr_in sin = { .sin_family = AF_INET };
    if (inet_pton (AF_INET, listen_addr, &sin.sin_addr) != 1) {
        fprintf (stderr, "kiwi-fetch-digest: bad --listen '%s' (want an IPv4 address)\n", listen_addr);
        return 2;
    }
    int ls = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t sl = sizeof sin;
    if (ls < 0 || bind (ls, (struct sockaddr *) &sin, sizeof sin) < 0 || listen (ls, 128) < 0
        || getsockname (ls, (struct sockaddr *) &sin, &sl) < 0) {
        fprintf (stderr, "kiwi-fetch-digest: listening on %s: %s\n", listen_addr, strerror (errno));
        return 1;
    }
    /* the port, written whole before its name appears */
    char tmp[4096];
    snprintf (tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *pf = fopen (tmp, "we");
    if (pf == NULL || fprintf (pf, "%u\n", (unsigned) ntohs (sin.sin_port)) < 0 || fclose (pf) != 0
        || rename (tmp, port_file) < 0) {
        fprintf (stderr, "kiwi-fetch-digest: writing %s: %s\n", port_file, strerror (errno));
        return 1;
    }
    pthread_attr_t at;
    pthread_attr_init (&at);
    pthread_attr_setdetachstate (&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize (&at, 256 * 1024);
    for (;;) {
        int fd = accept4 (ls, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fprintf (stderr, "kiwi-fetch-digest: accept: %s\n", strerror (errno));
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                sleep (1);
                continue;
            }
            return 1;
        }
        if (atomic_fetch_add (&active, 1) >= KIWI_DIGEST_MAX_CONNECTIONS) {
            atomic_fetch_sub (&active, 1);
            fprintf (stderr, "kiwi-fetch-digest: over %d connections: one closed\n", KIWI_DIGEST_MAX_CONNECTIONS);
            close (fd);
            continue;
        }
        pthread_t t;
        if (pthread_create (&t, &at, serve, (void *) (intptr_t) fd) != 0) {
            atomic_fetch_sub (&active, 1);
            fprintf (stderr, "kiwi-fetch-digest: no thread for a connection: closed\n");
            close (fd);
        }
    }
}
