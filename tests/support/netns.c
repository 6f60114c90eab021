/*
 * netns.c: network namespaces with a veth to the host, routed addresses,
 * the route-safety check and fake HTTP/DNS services, for integration tests.
 * See netns.h.
 */
#include "netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ST_LOCK = 1, ST_NETNS = 2, ST_VETH = 4 };

static int lock_fd = -1;
static int lock_refs;
/* Copies of every live namespace, for the atexit handler: the caller's
 * struct may be gone by then (a stack frame a failed test jumped out of). */
static struct kiwi_netns live[16];
static bool atexit_done;

static void
seterr (struct kiwi_netns *ns, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (ns->err, sizeof ns->err, fmt, ap);
    va_end (ap);
}

/* ------------------------------------------------------------ processes --- */

/* Enters the namespace `name` (in a child). */
static int
enter (const char *name)
{
    char path[128];
    snprintf (path, sizeof path, "/run/netns/%s", name);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = setns (fd, CLONE_NEWNET);
    close (fd);
    return rc;
}

/* Runs argv (in netns `name` when not NULL), output into out; exit status. */
static int
run_argv (const char *name, char *const argv[], char *out, size_t cap)
{
    int p[2];
    if (pipe2 (p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork ();
    if (pid < 0) {
        close (p[0]);
        close (p[1]);
        return -1;
    }
    if (pid == 0) {
        if (name != NULL && enter (name) != 0)
            _exit (126);
        int devnull = open ("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2 (devnull, 0);
        dup2 (p[1], 1);
        dup2 (p[1], 2);
        execvp (argv[0], argv);
        _exit (127);
    }
    close (p[1]);
    size_t n = 0;
    char sink[4096];
    for (;;) {
        ssize_t r;
        if (out != NULL && n + 1 < cap)
            r = read (p[0], out + n, cap - 1 - n);
        else
            r = read (p[0], sink, sizeof sink);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out != NULL && n + 1 < cap)
            n += (size_t) r;
    }
    if (out != NULL && cap > 0)
        out[n] = '\0';
    close (p[0]);
    int st;
    while (waitpid (pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED (st))
        return WEXITSTATUS (st);
    return WIFSIGNALED (st) ? 128 + WTERMSIG (st) : -1;
}

/* ip ARGS... (NULL-terminated) on the host; output in out. */
static int
ip (char *out, size_t cap, ...)
{
    char *argv[24];
    int i = 0;
    argv[i++] = "ip";
    va_list ap;
    va_start (ap, cap);
    char *a;
    while (i < 23 && (a = va_arg (ap, char *)) != NULL)
        argv[i++] = a;
    va_end (ap);
    argv[i] = NULL;
    char sink[2048];
    if (out == NULL) {
        out = sink;
        cap = sizeof sink;
    }
    return run_argv (NULL, argv, out, cap);
}

static void
chomp (char *s)
{
    size_t n = strlen (s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
}

/* ----------------------------------------------------------------- lock --- */

static int
lock_take (struct kiwi_netns *ns)
{
    if (lock_refs > 0) {
        lock_refs++;
        return 0;
    }
    lock_fd = open (KIWI_NETNS_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) {
        seterr (ns, "open %s: %s", KIWI_NETNS_LOCK, strerror (errno));
        return -1;
    }
    for (int i = 0; i < 900 * 10; i++) {
        if (flock (lock_fd, LOCK_EX | LOCK_NB) == 0) {
            lock_refs = 1;
            return 0;
        }
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep (&ts, NULL);
    }
    seterr (ns, "could not take %s (another test routes shared addresses)", KIWI_NETNS_LOCK);
    close (lock_fd);
    lock_fd = -1;
    return -1;
}

static void
lock_drop (void)
{
    if (lock_refs > 0 && --lock_refs == 0) {
        flock (lock_fd, LOCK_UN);
        close (lock_fd);
        lock_fd = -1;
    }
}

/* -------------------------------------------------------------- lifetime --- */

static void
destroy_all (void)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i].name[0] != '\0') {
            struct kiwi_netns copy = live[i];
            kiwi_netns_destroy (&copy);
        }
}

/* Records (on) or forgets (off) the state of ns in `live`. */
static void
track (const struct kiwi_netns *ns, bool on)
{
    size_t free_slot = sizeof live / sizeof live[0];
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
        if (live[i].name[0] != '\0' && strcmp (live[i].name, ns->name) == 0) {
            if (on)
                live[i] = *ns;
            else
                memset (&live[i], 0, sizeof live[i]);
            return;
        }
        if (live[i].name[0] == '\0' && free_slot == sizeof live / sizeof live[0])
            free_slot = i;
    }
    if (on && free_slot < sizeof live / sizeof live[0])
        live[free_slot] = *ns;
    if (on && !atexit_done) {
        atexit (destroy_all);
        atexit_done = true;
    }
}

static bool
address_in_use (const char *a)
{
    char out[16384], needle[40];
    if (ip (out, sizeof out, "-4", "-o", "addr", "show", NULL) != 0)
        return true;
    snprintf (needle, sizeof needle, " inet %s/", a);
    return strstr (out, needle) != NULL;
}

static bool
route_exists (const char *prefix)
{
    char out[1024];
    if (ip (out, sizeof out, "route", "show", "exact", prefix, NULL) != 0)
        return true;
    chomp (out);
    return out[0] != '\0';
}

int
kiwi_netns_create (struct kiwi_netns *ns, const char *tag)
{
    static int counter;
    memset (ns, 0, sizeof *ns);
    int n = counter++;
    if (tag == NULL || strlen (tag) > 20 || strspn (tag, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen (tag)) {
        seterr (ns, "tag must be 1-20 characters [a-z0-9]");
        return -1;
    }
    snprintf (ns->name, sizeof ns->name, "kiwi-%s-%d-%d", tag, (int) getpid (), n);
    snprintf (ns->veth_host, sizeof ns->veth_host, "kn%x-%xh", (unsigned) getpid (), (unsigned) n & 0xff);
    snprintf (ns->veth_ns, sizeof ns->veth_ns, "kn%x-%xn", (unsigned) getpid (), (unsigned) n & 0xff);
    if (lock_take (ns) != 0)
        return -1;
    ns->state |= ST_LOCK;
    track (ns, true);

    ns->hits = mmap (NULL, sizeof (long), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ns->hits == MAP_FAILED) {
        ns->hits = NULL;
        seterr (ns, "mmap: %s", strerror (errno));
        goto fail;
    }
    *ns->hits = 0;

    /* A free /30 in 198.18.0.0/15. */
    bool found = false;
    for (unsigned attempt = 0; attempt < 64 && !found; attempt++) {
        uint32_t idx = ((uint32_t) getpid () * 4u + (uint32_t) n + attempt * 131u) % 32768u;
        uint32_t base = (198u << 24) | (18u << 16) | (idx * 4u);
        struct in_addr h = { htonl (base + 1) }, s = { htonl (base + 2) }, b = { htonl (base) };
        char bs[16], prefix[24];
        inet_ntop (AF_INET, &h, ns->host_addr, sizeof ns->host_addr);
        inet_ntop (AF_INET, &s, ns->ns_addr, sizeof ns->ns_addr);
        inet_ntop (AF_INET, &b, bs, sizeof bs);
        snprintf (prefix, sizeof prefix, "%s/30", bs);
        found = !address_in_use (ns->host_addr) && !address_in_use (ns->ns_addr) && !route_exists (prefix);
    }
    if (!found) {
        seterr (ns, "no free /30 in 198.18.0.0/15");
        goto fail;
    }

    char out[1024], ha[24], na[24];
    snprintf (ha, sizeof ha, "%s/30", ns->host_addr);
    snprintf (na, sizeof na, "%s/30", ns->ns_addr);
    if (ip (out, sizeof out, "netns", "add", ns->name, NULL) != 0) {
        seterr (ns, "ip netns add %s: %s", ns->name, out);
        goto fail;
    }
    ns->state |= ST_NETNS;
    track (ns, true);
    if (ip (out, sizeof out, "link", "add", ns->veth_host, "type", "veth", "peer", "name", ns->veth_ns, NULL) != 0) {
        seterr (ns, "ip link add %s: %s", ns->veth_host, out);
        goto fail;
    }
    ns->state |= ST_VETH;
    track (ns, true);
    if (ip (out, sizeof out, "link", "set", ns->veth_ns, "netns", ns->name, NULL) != 0
        || ip (out, sizeof out, "addr", "add", ha, "dev", ns->veth_host, NULL) != 0
        || ip (out, sizeof out, "link", "set", ns->veth_host, "up", NULL) != 0
        || ip (out, sizeof out, "-n", ns->name, "link", "set", "lo", "up", NULL) != 0
        || ip (out, sizeof out, "-n", ns->name, "addr", "add", na, "dev", ns->veth_ns, NULL) != 0
        || ip (out, sizeof out, "-n", ns->name, "link", "set", ns->veth_ns, "up", NULL) != 0) {
        seterr (ns, "setting up %s: %s", ns->name, out);
        goto fail;
    }
    return 0;
fail:;
    char keep[sizeof ns->err];
    memcpy (keep, ns->err, sizeof keep);
    kiwi_netns_destroy (ns);
    memcpy (ns->err, keep, sizeof keep);
    return -1;
}

int
kiwi_netns_add_address (struct kiwi_netns *ns, const char *addr)
{
    struct in_addr a;
    if (addr == NULL || inet_pton (AF_INET, addr, &a) != 1) {
        seterr (ns, "not an IPv4 address: %s", addr ? addr : "(null)");
        return -1;
    }
    if (ns->n_addrs >= KIWI_NETNS_MAX_ADDRS) {
        seterr (ns, "too many addresses");
        return -1;
    }
    char p32[24], out[1024];
    snprintf (p32, sizeof p32, "%s/32", addr);
    if (address_in_use (addr)) {
        seterr (ns, "%s is already an address on this host; not routing it", addr);
        return -1;
    }
    if (route_exists (p32)) {
        ip (out, sizeof out, "route", "show", "exact", p32, NULL);
        chomp (out);
        seterr (ns, "the host already has a route for %s (%s); not touching it", p32, out);
        return -1;
    }
    if (ip (out, sizeof out, "-n", ns->name, "addr", "add", p32, "dev", "lo", NULL) != 0) {
        seterr (ns, "adding %s in %s: %s", p32, ns->name, out);
        return -1;
    }
    snprintf (ns->addrs[ns->n_addrs++], sizeof ns->addrs[0], "%s", addr);
    track (ns, true);
    if (ip (out, sizeof out, "route", "add", p32, "via", ns->ns_addr, "dev", ns->veth_host, NULL) != 0) {
        seterr (ns, "ip route add %s: %s", p32, out);
        return -1;
    }
    ns->n_routes = ns->n_addrs;
    track (ns, true);
    return kiwi_netns_route_check (ns, addr, NULL, NULL);
}

/* The device in `ip route get` output (" dev X "); "" if none. */
static void
route_dev (const char *route, char *dev, size_t cap)
{
    dev[0] = '\0';
    const char *d = strstr (route, " dev ");
    if (d == NULL || strncmp (route, "local ", 6) == 0)
        return;
    d += 5;
    size_t n = strcspn (d, " \n");
    if (n >= cap)
        n = cap - 1;
    memcpy (dev, d, n);
    dev[n] = '\0';
}

int
kiwi_netns_route_check (struct kiwi_netns *ns, const char *addr, const char *from, const char *iif)
{
    char out[1024], dev[32];
    if (ns->veth_host[0] == '\0' || !(ns->state & ST_VETH)) {
        seterr (ns, "route safety: the namespace does not exist");
        return -1;
    }
    int rc = ip (out, sizeof out, "route", "get", addr, NULL);
    chomp (out);
    route_dev (out, dev, sizeof dev);
    if (rc != 0 || strcmp (dev, ns->veth_host) != 0) {
        seterr (ns, "route safety: from the host, %s goes \"%s\", not into %s", addr, out, ns->veth_host);
        return -1;
    }
    if (from != NULL && iif != NULL) {
        rc = ip (out, sizeof out, "route", "get", addr, "from", from, "iif", iif, NULL);
        chomp (out);
        route_dev (out, dev, sizeof dev);
        if (rc != 0 || strcmp (dev, ns->veth_host) != 0) {
            seterr (ns, "route safety: from %s on %s, %s goes \"%s\", not into %s", from, iif, addr, out,
                    ns->veth_host);
            return -1;
        }
    }
    return 0;
}

int
kiwi_netns_run (struct kiwi_netns *ns, char *const argv[], char *out, size_t cap)
{
    return run_argv (ns->name, argv, out, cap);
}

static int
remember (struct kiwi_netns *ns, pid_t pid)
{
    if (ns->n_pids >= KIWI_NETNS_MAX_PIDS) {
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
        seterr (ns, "too many children");
        return -1;
    }
    ns->pids[ns->n_pids++] = pid;
    track (ns, true);
    return 0;
}

pid_t
kiwi_netns_spawn (struct kiwi_netns *ns, char *const argv[])
{
    pid_t pid = fork ();
    if (pid < 0) {
        seterr (ns, "fork: %s", strerror (errno));
        return -1;
    }
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGTERM);
        if (enter (ns->name) != 0)
            _exit (126);
        int devnull = open ("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2 (devnull, 0);
            dup2 (devnull, 1);
        }
        execvp (argv[0], argv);
        _exit (127);
    }
    return remember (ns, pid) == 0 ? pid : -1;
}

/* ---------------------------------------------------------- fake services --- */

static void
bump (long *hits)
{
    __atomic_add_fetch (hits, 1, __ATOMIC_SEQ_CST);
}

static int
listen_on (int type, const char *addr, int port)
{
    int fd = socket (AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    if (inet_pton (AF_INET, addr, &sa.sin_addr) != 1 || bind (fd, (struct sockaddr *) &sa, sizeof sa) != 0
        || (type == SOCK_STREAM && listen (fd, 16) != 0)) {
        close (fd);
        return -1;
    }
    return fd;
}

static void
timeouts (int fd, int seconds)
{
    struct timeval tv = { seconds, 0 };
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void
write_all (int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write (fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t) w;
    }
}

/* Forks a service child: it enters the namespace, calls setup() (which
 * returns the listening fds or -1) and then loop(); the parent learns
 * through a pipe whether setup worked. */
typedef int (*setup_fn) (const char *addr, int port, int fds[2]);
typedef void (*loop_fn) (int fds[2], long *hits, const void *arg);

static int
service (struct kiwi_netns *ns, const char *addr, int port, setup_fn setup, loop_fn loop, const void *arg,
         const char *what)
{
    int p[2];
    if (pipe2 (p, O_CLOEXEC) != 0) {
        seterr (ns, "pipe: %s", strerror (errno));
        return -1;
    }
    pid_t pid = fork ();
    if (pid < 0) {
        close (p[0]);
        close (p[1]);
        seterr (ns, "fork: %s", strerror (errno));
        return -1;
    }
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        close (p[0]);
        int fds[2] = { -1, -1 };
        int e = 0;
        if (enter (ns->name) != 0 || setup (addr, port, fds) != 0)
            e = errno ? errno : EINVAL;
        write_all (p[1], &e, sizeof e);
        close (p[1]);
        if (e != 0)
            _exit (1);
        loop (fds, ns->hits, arg);
        _exit (0);
    }
    close (p[1]);
    int e = -1;
    ssize_t r;
    do
        r = read (p[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close (p[0]);
    if (r != (ssize_t) sizeof e || e != 0) {
        waitpid (pid, NULL, 0);
        seterr (ns, "%s on %s:%d in %s: %s", what, addr, port, ns->name, r == (ssize_t) sizeof e ? strerror (e) : "died");
        return -1;
    }
    return remember (ns, pid);
}

static int
http_setup (const char *addr, int port, int fds[2])
{
    fds[0] = listen_on (SOCK_STREAM, addr, port);
    return fds[0] < 0 ? -1 : 0;
}

static void
http_loop (int fds[2], long *hits, const void *arg)
{
    const char *body = arg;
    char head[256];
    int hl = snprintf (head, sizeof head,
                       "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                       strlen (body));
    for (;;) {
        int c = accept4 (fds[0], NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        bump (hits);
        timeouts (c, 5);
        char buf[8192];
        size_t n = 0;
        while (n < sizeof buf - 1) {
            ssize_t r = read (c, buf + n, sizeof buf - 1 - n);
            if (r <= 0)
                break;
            n += (size_t) r;
            buf[n] = '\0';
            /* A request's end, or not HTTP at all (a TLS ClientHello): answer now. */
            if (strstr (buf, "\r\n\r\n") != NULL || buf[0] < 'A' || buf[0] > 'Z')
                break;
        }
        write_all (c, head, (size_t) hl);
        write_all (c, body, strlen (body));
        close (c);
    }
}

int
kiwi_netns_serve_http (struct kiwi_netns *ns, const char *addr, int port, const char *body)
{
    return service (ns, addr, port, http_setup, http_loop, body ? body : "", "HTTP server");
}

/* A DNS answer to query q (n bytes) into r; its length, or 0. */
static size_t
dns_answer (const unsigned char *q, size_t n, const struct in_addr *answer, unsigned char *r, size_t cap)
{
    if (n < 17 || n > 512)
        return 0;
    size_t i = 12;
    while (i < n && q[i] != 0) {
        if (q[i] & 0xc0)
            return 0;
        i += 1u + q[i];
    }
    i++;
    if (i + 4 > n)
        return 0;
    unsigned qtype = (unsigned) q[i] << 8 | q[i + 1];
    size_t qend = i + 4;
    if (qend + 16 > cap)
        return 0;
    memcpy (r, q, qend);
    unsigned flags = 0x8480 | (q[2] << 8 & 0x0100);
    r[2] = (unsigned char) (flags >> 8);
    r[3] = (unsigned char) flags;
    r[4] = 0, r[5] = 1;                           /* qdcount */
    r[6] = 0, r[7] = qtype == 1 ? 1 : 0;          /* ancount */
    r[8] = r[9] = r[10] = r[11] = 0;              /* nscount, arcount */
    if (qtype != 1)
        return qend;
    unsigned char *a = r + qend;
    const unsigned char rr[] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4 };
    memcpy (a, rr, sizeof rr);
    memcpy (a + sizeof rr, &answer->s_addr, 4);
    return qend + sizeof rr + 4;
}

static int
dns_setup (const char *addr, int port, int fds[2])
{
    fds[0] = listen_on (SOCK_DGRAM, addr, port);
    fds[1] = listen_on (SOCK_STREAM, addr, port);
    return fds[0] < 0 || fds[1] < 0 ? -1 : 0;
}

static bool
read_full (int fd, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read (fd, buf + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t) r;
    }
    return true;
}

static void
dns_loop (int fds[2], long *hits, const void *arg)
{
    const struct in_addr *answer = arg;
    struct pollfd pf[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };
    unsigned char q[600], r[700];
    for (;;) {
        if (poll (pf, 2, -1) <= 0)
            continue;
        if (pf[0].revents & POLLIN) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom (fds[0], q, sizeof q, 0, (struct sockaddr *) &from, &fl);
            size_t rl = n > 0 ? dns_answer (q, (size_t) n, answer, r, sizeof r) : 0;
            if (rl > 0) {
                bump (hits);
                sendto (fds[0], r, rl, 0, (struct sockaddr *) &from, fl);
            }
        }
        if (pf[1].revents & POLLIN) {
            int c = accept4 (fds[1], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            bump (hits);
            timeouts (c, 5);
            unsigned char len[2];
            while (read_full (c, len, 2)) {
                size_t n = (size_t) len[0] << 8 | len[1];
                if (n > sizeof q || !read_full (c, q, n))
                    break;
                size_t rl = dns_answer (q, n, answer, r + 2, sizeof r - 2);
                if (rl == 0)
                    break;
                r[0] = (unsigned char) (rl >> 8);
                r[1] = (unsigned char) rl;
                write_all (c, r, rl + 2);
            }
            close (c);
        }
    }
}

int
kiwi_netns_serve_dns (struct kiwi_netns *ns, const char *addr, int port, const char *answer)
{
    static struct in_addr a; /* read by the forked child only */
    if (answer == NULL || inet_pton (AF_INET, answer, &a) != 1) {
        seterr (ns, "DNS answer must be an IPv4 address");
        return -1;
    }
    return service (ns, addr, port, dns_setup, dns_loop, &a, "DNS responder");
}

long
kiwi_netns_hits (const struct kiwi_netns *ns)
{
    return ns->hits ? __atomic_load_n (ns->hits, __ATOMIC_SEQ_CST) : 0;
}

/* -------------------------------------------------------------- destroy --- */

void
kiwi_netns_destroy (struct kiwi_netns *ns)
{
    for (int i = 0; i < ns->n_pids; i++)
        kill (ns->pids[i], SIGTERM);
    for (int i = 0; i < ns->n_pids; i++) {
        int st;
        bool gone = false;
        for (int t = 0; t < 20 && !gone; t++) {
            pid_t r = waitpid (ns->pids[i], &st, WNOHANG);
            gone = r == ns->pids[i] || (r < 0 && errno == ECHILD);
            if (!gone) {
                struct timespec ts = { 0, 50 * 1000 * 1000 };
                nanosleep (&ts, NULL);
            }
        }
        if (!gone) {
            kill (ns->pids[i], SIGKILL);
            waitpid (ns->pids[i], &st, 0);
        }
    }
    ns->n_pids = 0;
    for (int i = 0; i < ns->n_routes; i++) {
        char p32[24];
        snprintf (p32, sizeof p32, "%s/32", ns->addrs[i]);
        ip (NULL, 0, "route", "del", p32, "via", ns->ns_addr, "dev", ns->veth_host, NULL);
    }
    ns->n_routes = 0;
    if (ns->state & ST_VETH)
        ip (NULL, 0, "link", "del", ns->veth_host, NULL);
    if (ns->state & ST_NETNS)
        ip (NULL, 0, "netns", "del", ns->name, NULL);
    if (ns->hits != NULL)
        munmap (ns->hits, sizeof (long));
    ns->hits = NULL;
    if (ns->state & ST_LOCK) {
        track (ns, false);
        lock_drop ();
    }
    ns->state = 0;
}
