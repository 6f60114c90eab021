/*
 * test_hostile.c: hostile repositories against the real sandbox.
 *
 * Every repository under tests/fixtures/hostile attacks one guarantee of
 * docs/isolation.md ("code the model wrote never has a network, and the
 * phase that has a network never holds a secret") or one resource
 * bound. Each runs through the real driver under runc ("docker") and runsc
 * ("gvisor"), and each test fails if its guarantee breaks. Where possible a
 * positive control runs next to the attack (the same client reaching what
 * it may reach, the test's own listener recording the test's own
 * connection), so that a broken probe cannot pass for a closed door:
 *
 *   exfil             the install hooks of a dependency and of the
 *                     repository dump everything they can read and send it
 *                     out over a channel that works: no secret of the
 *                     worker's environment is in it. Phase B gets the one
 *                     named test credential, no model key, no Kiwi token.
 *   phase_a_host      Phase A reaches none of the worker's services (a
 *                     listener on its 127.0.0.1, Redis, Kafka), at any of
 *                     the host's addresses; no Docker socket inside.
 *   phase_a_metadata  Phase A reaches neither the token ports of a fake
 *                     metadata server at 169.254.169.254 (in a namespace of
 *                     the test) nor listeners on the bridge gateways; the
 *                     metadata address's DNS port stays open. Needs the
 *                     egress layer (ops/egress/egress.sh).
 *   phase_b_network   Phase B reaches nothing: DNS, the host's listeners,
 *                     the Docker bridge gateway, the test's namespace.
 *   fork_bomb, disk_filler, memory_hog, sleep_forever
 *                     each stopped by its bound, the reason named, the
 *                     worker unharmed. The bomb and the hog are also
 *                     measured from the host while they run: their
 *                     containers' pids and memory cgroups, sampled as output
 *                     arrives, hold the limits asked for and never pass
 *                     them, and after the attack no process of the noted
 *                     containers is left on the host.
 *   symlinks          symlinks out of the repository arrive as symlinks;
 *                     what they point at on the worker never enters.
 *   readback          files read back out of a sandbox: `..`, absolute
 *                     names, paths through symlinks, hardlinks out are
 *                     rejected and nothing appears outside the destination;
 *                     archives put in with `..` land nowhere outside.
 *
 * Traffic stays on this machine. Every non-loopback address a hostile
 * repository is pointed at is checked before and after each run
 * (`ip route get`, as sent by the host and as forwarded from Phase A's
 * bridge): it must be one of the host's own addresses or routed into this
 * test's namespace, else the test stops. Namespaces, veths, routes and
 * listeners are removed in teardown, on every path; ones left by a killed
 * run are swept at start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "sandbox/docker/docker-api.h"
#include "sandbox/docker/docker-internal.h"
#include "need.h"
#include "sandbox/phases.h"
#include "sandbox/sandbox.h"

extern char **environ;

#define HX_FIXTURES KIWI_SOURCE_DIR "/tests/fixtures/hostile"
#define HX_EGRESS KIWI_SOURCE_DIR "/ops/egress/egress.sh"
#define HX_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define HX_METADATA "169.254.169.254"
#define HX_INSTALL_BRIDGE "kiwi-install0"
#define HX_DOCKER_BRIDGE "docker0"
#define HX_OUTPUT_CAP ((size_t) 16 << 20)
#define HX_DATA_CAP ((size_t) 8 << 20)

static const char *
hx_image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_NODE_IMAGE", "kiwi/node:20");
}

/* ------------------------------------------------------------------------
 * Shell helpers.
 */

/* Runs a formatted shell command with stderr folded into `out`; returns its
 * exit status. */
static int __attribute__ ((format (printf, 3, 4)))
hx_sh (char *out, size_t cap, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    char full[4200];
    snprintf (full, sizeof full, "{ %s ; } 2>&1", cmd);
    char scratch[256];
    return kiwi_test_sh (full, out ? out : scratch, out ? cap : sizeof scratch);
}

#define HX_MUST(...)                                                                                        \
    do {                                                                                                     \
        char hx__out[2048];                                                                                  \
        if (hx_sh (hx__out, sizeof hx__out, __VA_ARGS__) != 0)                                               \
            fail_msg ("`%s` failed: %s", #__VA_ARGS__, hx__out);                                             \
    } while (0)

static void
hx_hex (char *dst, size_t nbytes)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char raw[64];
    FILE *f = fopen ("/dev/urandom", "re");
    assert_non_null (f);
    assert_int_equal (fread (raw, 1, nbytes, f), nbytes);
    fclose (f);
    for (size_t i = 0; i < nbytes; i++) {
        dst[2 * i] = digits[raw[i] >> 4];
        dst[2 * i + 1] = digits[raw[i] & 15];
    }
    dst[2 * nbytes] = '\0';
}

static char *
hx_read_file (const char *path, size_t *len)
{
    FILE *f = fopen (path, "rb");
    if (f == NULL)
        return NULL;
    kiwi_buf b = KIWI_BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread (chunk, 1, sizeof chunk, f)) > 0)
        if (kiwi_buf_append (&b, chunk, n, NULL) < 0)
            break;
    fclose (f);
    kiwi_buf_append (&b, "", 1, NULL);
    if (len)
        *len = b.len - 1;
    return kiwi_buf_steal (&b, NULL);
}

static void
hx_write_file (const char *path, const char *data)
{
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (data, f);
    assert_int_equal (fclose (f), 0);
}

/* A listing of a tree (names, types, sizes, link targets), to compare
 * before and after: "nothing appeared" is a statement about all of it. */
static char *
hx_tree (const char *dir, const char *prune)
{
    char *out = malloc (1 << 20);
    assert_non_null (out);
    if (prune)
        hx_sh (out, 1 << 20, "cd '%s' && find . -path './%s' -prune -o -printf '%%P %%y %%s %%l\\n' | sort", dir,
               prune);
    else
        hx_sh (out, 1 << 20, "cd '%s' && find . -printf '%%P %%y %%s %%l\\n' | sort", dir);
    return out;
}

/* ------------------------------------------------------------------------
 * The recorder: listeners the test opens (on the host and in its
 * namespace) that count every connection or datagram and keep every byte
 * received, from a thread of their own. A TCP peer that half-closes gets
 * "ACK\n" back, so a client can tell a listener that worked.
 */
#define HX_MAX_LISTENERS 24
#define HX_MAX_CONNS 64

typedef struct {
    char label[48];
    char addr[INET_ADDRSTRLEN];
    int port;
    int type; /* SOCK_STREAM or SOCK_DGRAM */
    int fd;
    int hits;
    kiwi_buf data;
} hx_listener;

typedef struct {
    hx_listener l[HX_MAX_LISTENERS];
    size_t n;
    struct {
        int fd;
        size_t li;
    } c[HX_MAX_CONNS];
    size_t nc;
    pthread_mutex_t mu;
    pthread_t thread;
    int wake[2];
    bool running;
} hx_recorder;

static void
hx_record (hx_recorder *r, size_t li, const char *data, size_t len)
{
    hx_listener *l = &r->l[li];
    if (l->data.len + len <= HX_DATA_CAP)
        kiwi_buf_append (&l->data, data, len, NULL);
}

static void *
hx_recorder_main (void *arg)
{
    hx_recorder *r = arg;
    for (;;) {
        struct pollfd p[1 + HX_MAX_LISTENERS + HX_MAX_CONNS];
        size_t n = 0;
        p[n++] = (struct pollfd) { .fd = r->wake[0], .events = POLLIN };
        pthread_mutex_lock (&r->mu);
        size_t nl = r->n, nc = r->nc;
        for (size_t i = 0; i < nl; i++)
            p[n++] = (struct pollfd) { .fd = r->l[i].fd, .events = POLLIN };
        for (size_t j = 0; j < nc; j++)
            p[n++] = (struct pollfd) { .fd = r->c[j].fd, .events = POLLIN };
        pthread_mutex_unlock (&r->mu);
        if (poll (p, n, 500) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        char buf[16384];
        pthread_mutex_lock (&r->mu);
        /* connections first, last to first: removal keeps lower indices */
        for (size_t j = nc; j-- > 0;) {
            if (p[1 + nl + j].revents == 0)
                continue;
            ssize_t k = read (r->c[j].fd, buf, sizeof buf);
            if (k > 0) {
                hx_record (r, r->c[j].li, buf, (size_t) k);
                continue;
            }
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (k == 0 && write (r->c[j].fd, "ACK\n", 4) < 0) {
                /* the peer is gone: nothing to tell it */
            }
            close (r->c[j].fd);
            r->c[j] = r->c[--r->nc];
        }
        for (size_t i = 0; i < nl; i++) {
            if (p[1 + i].revents == 0)
                continue;
            hx_listener *l = &r->l[i];
            if (l->type == SOCK_STREAM) {
                int fd = accept4 (l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                    continue;
                l->hits++;
                if (r->nc < HX_MAX_CONNS)
                    r->c[r->nc++] = (typeof (r->c[0])) { .fd = fd, .li = i };
                else
                    close (fd);
            } else {
                ssize_t k = recv (l->fd, buf, sizeof buf, 0);
                if (k >= 0) {
                    l->hits++;
                    hx_record (r, i, buf, (size_t) k);
                }
            }
        }
        pthread_mutex_unlock (&r->mu);
    }
    return NULL;
}

static void
hx_recorder_init (hx_recorder *r)
{
    memset (r, 0, sizeof *r);
    pthread_mutex_init (&r->mu, NULL);
    r->wake[0] = r->wake[1] = -1;
}

/* Opens a listener at addr:port (0: any port) in the network namespace
 * `nsfd` (-1: the host's). Returns its index; the port is in l[i].port.
 * Must be called before hx_recorder_start(). */
static size_t
hx_listen (hx_recorder *r, const char *label, const char *addr, int port, int type, int nsfd)
{
    assert_false (r->running);
    assert_true (r->n < HX_MAX_LISTENERS);
    int self = -1;
    if (nsfd >= 0) {
        self = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        assert_true (self >= 0);
        if (setns (nsfd, CLONE_NEWNET) < 0)
            fail_msg ("setns into the test namespace: %s", strerror (errno));
    }
    int fd = socket (AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int saved_errno = errno;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    int one = 1;
    int rc = -1;
    if (fd >= 0 && inet_pton (AF_INET, addr, &sa.sin_addr) == 1) {
        setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        rc = bind (fd, (struct sockaddr *) &sa, sizeof sa);
        if (rc == 0 && type == SOCK_STREAM)
            rc = listen (fd, 64);
        saved_errno = errno;
    }
    if (self >= 0) {
        if (setns (self, CLONE_NEWNET) < 0) {
            /* every later test would run in the wrong namespace */
            fprintf (stderr, "FATAL: cannot return to the host's network namespace: %s\n", strerror (errno));
            abort ();
        }
        close (self);
    }
    if (rc < 0)
        fail_msg ("listening on %s:%d (%s): %s", addr, port, label, strerror (saved_errno));
    socklen_t sl = sizeof sa;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &sa, &sl), 0);
    hx_listener *l = &r->l[r->n];
    memset (l, 0, sizeof *l);
    snprintf (l->label, sizeof l->label, "%s", label);
    snprintf (l->addr, sizeof l->addr, "%s", addr);
    l->port = ntohs (sa.sin_port);
    l->type = type;
    l->fd = fd;
    return r->n++;
}

static void
hx_recorder_start (hx_recorder *r)
{
    assert_int_equal (pipe2 (r->wake, O_CLOEXEC), 0);
    assert_int_equal (pthread_create (&r->thread, NULL, hx_recorder_main, r), 0);
    r->running = true;
}

static void
hx_recorder_stop (hx_recorder *r)
{
    if (r->running) {
        if (write (r->wake[1], "x", 1) < 0) {
            /* the thread also polls with a timeout; it will not see this */
        }
        pthread_join (r->thread, NULL);
        r->running = false;
    }
    for (size_t j = 0; j < r->nc; j++)
        close (r->c[j].fd);
    r->nc = 0;
    for (size_t i = 0; i < r->n; i++) {
        close (r->l[i].fd);
        kiwi_buf_free (&r->l[i].data);
    }
    r->n = 0;
    for (int k = 0; k < 2; k++)
        if (r->wake[k] >= 0)
            close (r->wake[k]);
    r->wake[0] = r->wake[1] = -1;
    pthread_mutex_destroy (&r->mu);
}

static int
hx_hits (hx_recorder *r, size_t li)
{
    pthread_mutex_lock (&r->mu);
    int h = r->l[li].hits;
    pthread_mutex_unlock (&r->mu);
    return h;
}

static bool
hx_received (hx_recorder *r, size_t li, const char *needle)
{
    pthread_mutex_lock (&r->mu);
    bool found = r->l[li].data.len > 0 && memmem (r->l[li].data.data, r->l[li].data.len, needle, strlen (needle));
    pthread_mutex_unlock (&r->mu);
    return found;
}

static void
hx_recorder_reset (hx_recorder *r)
{
    pthread_mutex_lock (&r->mu);
    for (size_t i = 0; i < r->n; i++) {
        r->l[i].hits = 0;
        r->l[i].data.len = 0;
    }
    pthread_mutex_unlock (&r->mu);
}

/* Waits up to `ms` for the recorder to have drained what was sent. */
static void
hx_settle (int ms)
{
    struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
    nanosleep (&ts, NULL);
}

/* Connects from the host's namespace, sends a line, half-closes and waits
 * for the ACK: the listener's own positive control. */
static bool
hx_connect_once (const char *addr, int port)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct timeval tv = { 3, 0 };
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    inet_pton (AF_INET, addr, &sa.sin_addr);
    bool ok = false;
    if (connect (fd, (struct sockaddr *) &sa, sizeof sa) == 0 && write (fd, "selfcheck\n", 10) == 10
        && shutdown (fd, SHUT_WR) == 0) {
        char buf[8] = { 0 };
        ok = read (fd, buf, sizeof buf - 1) >= 3 && strncmp (buf, "ACK", 3) == 0;
    }
    close (fd);
    return ok;
}

/* ------------------------------------------------------------------------
 * The test's network namespace: a veth pair from the host into it, the
 * fake metadata address 169.254.169.254 and an address of its own on the
 * far end, and a host route for 169.254.169.254 into it. Addresses come
 * from 198.18.0.0/15 (reserved for benchmarks), one /30 per test run.
 *
 * While it exists the test holds flock(HX_NETNS_LOCK), the lock
 * tests/support/netns.c and tests/ops/egress/test_egress.sh take for the
 * same reason: one owner of the metadata route (and of the egress rules'
 * state) at a time.
 */
#define HX_NETNS_LOCK "/run/kiwi-netns.lock"

typedef struct {
    char name[40];
    char vh[16]; /* host end */
    char vn[16]; /* namespace end */
    char host_ip[INET_ADDRSTRLEN];
    char ns_ip[INET_ADDRSTRLEN];
    int fd;
    int lock_fd;
    bool made, linked, routed;
} hx_ns;

#define HX_NS_PREFIX "kiwih-"

/* Removes what a killed run of this test left: its namespaces (named after
 * its pid), their veths and with them the metadata route. */
static void
hx_ns_sweep (void)
{
    DIR *d = opendir ("/var/run/netns");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir (d)) != NULL) {
        unsigned pid = 0, seq = 0;
        if (sscanf (e->d_name, HX_NS_PREFIX "%u-%u", &pid, &seq) != 2)
            continue;
        if (kill ((pid_t) pid, 0) == 0 || errno != ESRCH)
            continue;
        fprintf (stderr, "# sweeping namespace %s left by a killed run\n", e->d_name);
        hx_sh (NULL, 0, "ip link del kh%ux%uh; ip netns del %s", pid, seq, e->d_name);
    }
    closedir (d);
}

static void
hx_ns_destroy (hx_ns *ns)
{
    if (ns->fd >= 0)
        close (ns->fd);
    ns->fd = -1;
    if (ns->routed)
        hx_sh (NULL, 0, "ip route del " HX_METADATA "/32 via %s dev %s", ns->ns_ip, ns->vh);
    if (ns->linked)
        hx_sh (NULL, 0, "ip link del %s", ns->vh);
    if (ns->made)
        hx_sh (NULL, 0, "ip netns del %s", ns->name);
    ns->routed = ns->linked = ns->made = false;
    if (ns->lock_fd >= 0)
        close (ns->lock_fd); /* releases the lock */
    ns->lock_fd = -1;
}

/* Takes HX_NETNS_LOCK, waiting up to 15 minutes for another test. */
static void
hx_ns_lock (hx_ns *ns)
{
    ns->lock_fd = open (HX_NETNS_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (ns->lock_fd < 0)
        fail_msg ("opening %s: %s", HX_NETNS_LOCK, strerror (errno));
    for (int i = 0; flock (ns->lock_fd, LOCK_EX | LOCK_NB) < 0; i++) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            fail_msg ("locking %s: %s", HX_NETNS_LOCK, strerror (errno));
        if (i == 0)
            fprintf (stderr, "# waiting for %s (another test routes " HX_METADATA ")\n", HX_NETNS_LOCK);
        if (i == 900)
            fail_msg ("%s held by another test for 15 minutes", HX_NETNS_LOCK);
        hx_settle (1000);
    }
}

static void
hx_ns_create (hx_ns *ns, unsigned seq)
{
    memset (ns, 0, sizeof *ns);
    ns->fd = -1;
    ns->lock_fd = -1;
    hx_ns_lock (ns);
    unsigned pid = (unsigned) getpid ();
    snprintf (ns->name, sizeof ns->name, HX_NS_PREFIX "%u-%u", pid, seq);
    snprintf (ns->vh, sizeof ns->vh, "kh%ux%uh", pid, seq);
    snprintf (ns->vn, sizeof ns->vn, "kh%ux%un", pid, seq);
    unsigned idx = (pid * 16u + seq) % 32768u;
    unsigned o2 = 18 + idx / 16384, o3 = (idx / 64) % 256, o4 = (idx % 64) * 4;
    snprintf (ns->host_ip, sizeof ns->host_ip, "198.%u.%u.%u", o2, o3, o4 + 1);
    snprintf (ns->ns_ip, sizeof ns->ns_ip, "198.%u.%u.%u", o2, o3, o4 + 2);

    char out[2048];
    hx_sh (out, sizeof out, "ip -o route show 198.%u.%u.%u/30; ip -o -4 addr | grep -F ' %s/'", o2, o3, o4,
           ns->host_ip);
    if (out[0] != '\0')
        fail_msg ("198.%u.%u.%u/30 is in use on this host: %s", o2, o3, o4, out);

    HX_MUST ("ip netns add %s", ns->name);
    ns->made = true;
    HX_MUST ("ip link add %s type veth peer name %s netns %s", ns->vh, ns->vn, ns->name);
    ns->linked = true;
    HX_MUST ("ip addr add %s/30 dev %s && ip link set %s up", ns->host_ip, ns->vh, ns->vh);
    HX_MUST ("ip -n %s link set lo up && ip -n %s addr add %s/30 dev %s && ip -n %s addr add " HX_METADATA
             "/32 dev %s && ip -n %s link set %s up && ip -n %s route add default via %s",
             ns->name, ns->name, ns->ns_ip, ns->vn, ns->name, ns->vn, ns->name, ns->vn, ns->name, ns->host_ip);
    /* One metadata route per host: another run (or another suite) may hold
     * it for a while; wait for it rather than take it. */
    for (int i = 0;; i++) {
        if (hx_sh (out, sizeof out, "ip route add " HX_METADATA "/32 via %s dev %s", ns->ns_ip, ns->vh) == 0)
            break;
        if (i == 120) {
            hx_sh (out, sizeof out, "ip -o route show " HX_METADATA "/32");
            fail_msg ("the route for " HX_METADATA " is held by someone else for 2 minutes: %s", out);
        }
        hx_settle (1000);
    }
    ns->routed = true;
    char path[128];
    snprintf (path, sizeof path, "/var/run/netns/%s", ns->name);
    ns->fd = open (path, O_RDONLY | O_CLOEXEC);
    assert_true (ns->fd >= 0);
}

/* ------------------------------------------------------------------------
 * Per-test state.
 */
typedef struct {
    const char *driver;  /* kiwi_sandbox_driver_find name */
    const char *runtime; /* for messages */
} hx_case;

static const hx_case hx_runc = { "docker", "runc" };
static const hx_case hx_runsc = { "gvisor", "runsc" };

typedef struct {
    const char *name;
    const char *prefix;
    char value[96];
    char tag[40]; /* the random part alone: a partial leak shows too */
} hx_secret;

typedef struct {
    const hx_case *c;
    kiwi_sandbox_env *env;
    char worker_id[48];
    char task[64];
    char base[128];    /* scratch directory of this test */
    char ws[192];      /* the hostile repository's copy */
    char outside[192]; /* worker-side files outside the workspace */
    char snap[192];
    bool have_ns;
    hx_ns ns;
    hx_recorder rec;
    kiwi_buf out;      /* everything a phase printed */
    kiwi_sandbox *sb;  /* a session sandbox, when the test made one */
    kiwi_strv host_env;
    hx_secret secrets[8];
    size_t nsecrets;
    char test_cred[64];
    char install_gw[INET_ADDRSTRLEN];
    char docker_gw[INET_ADDRSTRLEN];
    char host_addrs[8][INET_ADDRSTRLEN]; /* every global IPv4 address of the host */
    size_t nhost_addrs;
    bool egress_applied_here;
    bool sample_disks;       /* hx_collect measures the sandbox disks as output arrives */
    uint64_t disk_allocated; /* the most any of this worker's disk images held */
    bool track_containers;   /* hx_collect notes the ids of this worker's containers, once per run */
    bool tracked;
    char container_ids[8][72];
    size_t ncontainers;
    /* hx_collect samples the cgroups of the noted containers as output
     * arrives: the attack measured from the host, not by its own report */
    bool sample_cgroups;
    long cg_samples;
    int64_t cg_pids_peak, cg_pids_max, cg_mem_peak, cg_mem_limit;
} hx;

static unsigned hx_seq;

/* Bytes allocated on the worker by this worker id's sandbox disk images,
 * now (sparse files: what was really written). */
static uint64_t
hx_disk_allocated (hx *h)
{
    char dir[256], prefix[96];
    snprintf (dir, sizeof dir, "%s/sandboxes", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"));
    snprintf (prefix, sizeof prefix, "kiwi-%s-", h->worker_id);
    uint64_t total = 0;
    DIR *d = opendir (dir);
    struct dirent *e;
    while (d && (e = readdir (d)) != NULL) {
        if (strncmp (e->d_name, prefix, strlen (prefix)) != 0)
            continue;
        char p[600];
        struct stat st;
        snprintf (p, sizeof p, "%s/%s/disk.img", dir, e->d_name);
        if (stat (p, &st) == 0)
            total += (uint64_t) st.st_blocks * 512;
    }
    if (d)
        closedir (d);
    return total;
}

/* Notes the ids of this worker's live containers (for "nothing of them is
 * left on the host" afterwards). */
static void
hx_note_containers (hx *h)
{
    kiwi_docker *api = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_open (kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), &api, &err) < 0) {
        kiwi_error_free (&err);
        return;
    }
    char filters[160], path[512];
    snprintf (filters, sizeof filters, "{\"label\":[\"org.kiwi.worker=%s\"]}", h->worker_id);
    char *enc = kiwi_docker_urlencode (api, filters);
    snprintf (path, sizeof path, "/containers/json?all=1&filters=%s", enc);
    free (enc);
    json_t *list = NULL;
    if (kiwi_docker_call (api, "GET", path, NULL, 30000, &list, NULL, &err) == 0) {
        size_t i;
        json_t *c;
        json_array_foreach (list, i, c)
        {
            const char *id = json_string_value (json_object_get (c, "Id"));
            bool known = false;
            for (size_t k = 0; k < h->ncontainers; k++)
                known = known || strcmp (h->container_ids[k], id ? id : "") == 0;
            if (id && !known && h->ncontainers < 8)
                snprintf (h->container_ids[h->ncontainers++], sizeof h->container_ids[0], "%s", id);
        }
    }
    kiwi_error_free (&err);
    json_decref (list);
    kiwi_docker_close (api);
}

/* One number from a cgroup (v1, cgroupfs driver) file of container `id`,
 * or -1 (gone, or "max"). */
static int64_t
hx_cgroup_value (const char *ctrl, const char *id, const char *file)
{
    char p[400];
    snprintf (p, sizeof p, "/sys/fs/cgroup/%s/docker/%s/%s", ctrl, id, file);
    FILE *f = fopen (p, "re");
    if (f == NULL)
        return -1;
    long long v = -1;
    if (fscanf (f, "%lld", &v) != 1)
        v = -1;
    fclose (f);
    return v;
}

/* Samples the noted containers' cgroups: peak processes and memory, and the
 * limits the host enforces. */
/* How far past its limit a cgroup's recorded memory peak may be (one
 * charge batch of 64 pages, rounded up) */
#define HX_MEM_FORCED_SLACK (1 << 20)

static void
hx_cgroup_sample (hx *h)
{
    for (size_t k = 0; k < h->ncontainers; k++) {
        const char *id = h->container_ids[k];
        int64_t pids = hx_cgroup_value ("pids", id, "pids.current");
        if (pids < 0)
            continue;
        h->cg_samples++;
        if (pids > h->cg_pids_peak)
            h->cg_pids_peak = pids;
        int64_t v = hx_cgroup_value ("pids", id, "pids.max");
        if (v > h->cg_pids_max)
            h->cg_pids_max = v;
        v = hx_cgroup_value ("memory", id, "memory.max_usage_in_bytes");
        if (v > h->cg_mem_peak)
            h->cg_mem_peak = v;
        v = hx_cgroup_value ("memory", id, "memory.limit_in_bytes");
        if (v > h->cg_mem_limit)
            h->cg_mem_limit = v;
    }
}

static void
hx_cgroup_reset (hx *h)
{
    h->sample_cgroups = true;
    h->track_containers = true;
    h->tracked = false;
    h->ncontainers = 0;
    h->cg_samples = 0;
    h->cg_pids_peak = h->cg_pids_max = h->cg_mem_peak = h->cg_mem_limit = -1;
}

static void
hx_collect (int stream, const char *data, size_t len, void *ud)
{
    (void) stream;
    hx *h = ud;
    if (h->track_containers && !h->tracked) {
        h->tracked = true;
        hx_note_containers (h);
    }
    if (h->sample_cgroups)
        hx_cgroup_sample (h);
    if (h->sample_disks) {
        uint64_t a = hx_disk_allocated (h);
        if (a > h->disk_allocated)
            h->disk_allocated = a;
    }
    if (h->out.len + len < HX_OUTPUT_CAP)
        kiwi_buf_append (&h->out, data, len, NULL);
}

/* The collected output as a string (NUL-terminated in place). */
static const char *
hx_output (hx *h)
{
    kiwi_buf_reserve (&h->out, 1, NULL);
    h->out.data[h->out.len] = '\0';
    return h->out.data;
}

static void
hx_output_reset (hx *h)
{
    h->out.len = 0;
}

/* The IPv4 address of a host interface, or "" */
static void
hx_dev_addr (const char *dev, char *dst, size_t cap)
{
    char out[256];
    dst[0] = '\0';
    if (hx_sh (out, sizeof out, "ip -4 -o addr show dev %s | awk '{print $4}' | cut -d/ -f1 | head -n1", dev) == 0) {
        size_t n = strcspn (out, "\n");
        if (n < cap) {
            memcpy (dst, out, n);
            dst[n] = '\0';
        }
    }
}

/* The host's own addresses a sandbox could aim at: those of the interface
 * of the default route and of the two bridges (not other tests' veths,
 * which come and go). */
static void
hx_host_addrs (hx *h)
{
    char dev[64] = "";
    if (hx_sh (dev, sizeof dev, "ip -4 -o route show default | awk '{for (i = 1; i < NF; i++) if ($i == \"dev\") "
                                "print $(i + 1)}' | head -n1")
        == 0)
        dev[strcspn (dev, "\n")] = '\0';
    const char *devs[] = { dev, HX_DOCKER_BRIDGE, HX_INSTALL_BRIDGE };
    h->nhost_addrs = 0;
    for (size_t i = 0; i < 3; i++)
        if (devs[i][0] != '\0') {
            hx_dev_addr (devs[i], h->host_addrs[h->nhost_addrs], INET_ADDRSTRLEN);
            if (h->host_addrs[h->nhost_addrs][0] != '\0')
                h->nhost_addrs++;
        }
    assert_true (h->nhost_addrs > 0);
}

static int
hx_setup (void **state)
{
    static bool swept;
    if (!swept) {
        hx_ns_sweep ();
        swept = true;
    }
    const hx_case *c = *state;
    KIWI_NEED (geteuid () == 0, "root (network namespaces, loop-mounted sandbox disks)");
    hx *h = calloc (1, sizeof *h);
    assert_non_null (h);
    h->c = c;
    h->ns.fd = -1;
    h->ns.lock_fd = -1;
    hx_recorder_init (&h->rec);
    *state = h;

    unsigned seq = ++hx_seq;
    snprintf (h->worker_id, sizeof h->worker_id, "hostile-%d", (int) getpid ());
    snprintf (h->task, sizeof h->task, "hostile-%d-%u", (int) getpid (), seq);
    snprintf (h->base, sizeof h->base, "/tmp/kiwi-hostile-%d-%u", (int) getpid (), seq);
    snprintf (h->ws, sizeof h->ws, "%s/ws", h->base);
    snprintf (h->outside, sizeof h->outside, "%s/outside", h->base);
    snprintf (h->snap, sizeof h->snap, "%s/snapshot", h->base);

    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (c->driver, &err);
    assert_non_null (drv);
    kiwi_sandbox_config cfg = {
        .docker_socket = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"),
        .state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
        .worker_id = h->worker_id,
    };
    int rc = kiwi_sandbox_env_open (drv, &cfg, &h->env, &err);
    KIWI_NEED (rc == 0, "%s driver: %s", c->driver, kiwi_error_msg (err));
    HX_MUST ("rm -rf %s && mkdir -p %s && chmod 755 %s", h->base, h->outside, h->base);

    /* the worker's environment: what it really has, plus fake secrets */
    static const struct {
        const char *name, *prefix;
    } fakes[] = {
        { "ANTHROPIC_API_KEY", "sk-ant-FAKE-" }, { "OPENAI_API_KEY", "sk-FAKE-" },
        { "GEMINI_API_KEY", "AIzaFAKE" },        { "GOOGLE_API_KEY", "AIzaFAKEgoogle" },
        { "KIWI_GIT_TOKEN", "ghp_FAKE" },        { "GITHUB_TOKEN", "ghp_FAKEgh" },
        { "NPM_TOKEN", "npm_FAKE" },             { "AWS_SECRET_ACCESS_KEY", "FAKEaws" },
    };
    for (size_t i = 0; environ[i]; i++) {
        bool faked = false;
        for (size_t k = 0; k < sizeof fakes / sizeof fakes[0]; k++)
            if (strncmp (environ[i], fakes[k].name, strlen (fakes[k].name)) == 0
                && environ[i][strlen (fakes[k].name)] == '=')
                faked = true;
        if (!faked)
            assert_int_equal (kiwi_strv_add (&h->host_env, environ[i]), 0);
    }
    for (size_t k = 0; k < sizeof fakes / sizeof fakes[0]; k++) {
        hx_secret *s = &h->secrets[h->nsecrets++];
        s->name = fakes[k].name;
        s->prefix = fakes[k].prefix;
        hx_hex (s->tag, 16);
        size_t pl = strlen (s->prefix);
        memcpy (s->value, s->prefix, pl);
        memcpy (s->value + pl, s->tag, strlen (s->tag) + 1);
        assert_int_equal (kiwi_strv_addf (&h->host_env, "%s=%s", s->name, s->value), 0);
    }
    char t[40];
    hx_hex (t, 12);
    snprintf (h->test_cred, sizeof h->test_cred, "test-cred-%s", t);
    assert_int_equal (kiwi_strv_addf (&h->host_env, "HOSTILE_TEST_CRED=%s", h->test_cred), 0);

    hx_dev_addr (HX_INSTALL_BRIDGE, h->install_gw, sizeof h->install_gw);
    hx_dev_addr (HX_DOCKER_BRIDGE, h->docker_gw, sizeof h->docker_gw);
    hx_host_addrs (h);
    return 0;
}

/* Containers and disks of this worker id still present: a sandbox was not
 * removed on some path. */
static void
hx_assert_nothing_left (hx *h)
{
    kiwi_docker *api = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_open (kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), &api, &err) < 0)
        fail_msg ("dockerd: %s", kiwi_error_msg (err));
    char filters[160], path[512];
    snprintf (filters, sizeof filters, "{\"label\":[\"org.kiwi.worker=%s\"]}", h->worker_id);
    char *enc = kiwi_docker_urlencode (api, filters);
    snprintf (path, sizeof path, "/containers/json?all=1&filters=%s", enc);
    free (enc);
    json_t *list = NULL;
    int rc = kiwi_docker_call (api, "GET", path, NULL, 30000, &list, NULL, &err);
    kiwi_docker_close (api);
    if (rc < 0)
        fail_msg ("listing containers: %s", kiwi_error_msg (err));
    size_t left = json_array_size (list);
    json_decref (list);
    char out[1024];
    hx_sh (out, sizeof out, "ls -d %s/sandboxes/kiwi-%s-* 2>/dev/null",
           kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"), h->worker_id);
    if (left > 0 || out[0] != '\0')
        fail_msg ("%zu container(s) of %s left behind; disks: %s", left, h->worker_id, out);
}

static int
hx_teardown (void **state)
{
    hx *h = *state;
    kiwi_error_t err = NULL;
    if (h->sb != NULL && kiwi_sandbox_destroy (h->sb, &err) < 0)
        fprintf (stderr, "# destroying the session sandbox: %s\n", kiwi_error_msg (err));
    kiwi_error_free (&err);
    h->sb = NULL;
    hx_recorder_stop (&h->rec);
    if (h->egress_applied_here)
        hx_sh (NULL, 0, "%s remove", HX_EGRESS);
    if (h->have_ns)
        hx_ns_destroy (&h->ns);
    bool opened = h->env != NULL;
    kiwi_sandbox_env_close (h->env);
    hx_sh (NULL, 0, "rm -rf %s", h->base);
    kiwi_strv_free (&h->host_env);
    kiwi_buf_free (&h->out);
    if (opened)
        hx_assert_nothing_left (h);
    free (h);
    return 0;
}

/* The hostile repository `name`, copied (symlinks as symlinks) to h->ws. */
static void
hx_repo (hx *h, const char *name)
{
    HX_MUST ("cp -a %s/%s %s", HX_FIXTURES, name, h->ws);
}

static void
hx_write_targets (hx *h, json_t *targets)
{
    char p[256];
    snprintf (p, sizeof p, "%s/targets.json", h->ws);
    assert_int_equal (json_dump_file (targets, p, JSON_INDENT (1)), 0);
}

/* A namespace with the fake metadata server (TCP 80, 443, 53; UDP 53) and
 * a DNS-port listener on its own address; the host routes both into it. */
typedef struct {
    size_t md80, md443, md53, md53u, ns53, ns53u;
} hx_metadata;

static hx_metadata
hx_metadata_up (hx *h)
{
    hx_ns_create (&h->ns, hx_seq);
    h->have_ns = true;
    hx_metadata m;
    m.md80 = hx_listen (&h->rec, "metadata:80", HX_METADATA, 80, SOCK_STREAM, h->ns.fd);
    m.md443 = hx_listen (&h->rec, "metadata:443", HX_METADATA, 443, SOCK_STREAM, h->ns.fd);
    m.md53 = hx_listen (&h->rec, "metadata:53/tcp", HX_METADATA, 53, SOCK_STREAM, h->ns.fd);
    m.md53u = hx_listen (&h->rec, "metadata:53/udp", HX_METADATA, 53, SOCK_DGRAM, h->ns.fd);
    m.ns53 = hx_listen (&h->rec, "ns:53/tcp", h->ns.ns_ip, 53, SOCK_STREAM, h->ns.fd);
    m.ns53u = hx_listen (&h->rec, "ns:53/udp", h->ns.ns_ip, 53, SOCK_DGRAM, h->ns.fd);
    return m;
}

/* The route check: `addr` as sent from the host and as forwarded from
 * Phase A's bridge must be the host's own or lead into the test's
 * namespace. Fails the test (before anything is sent) otherwise. */
static void
hx_assert_contained (hx *h, const char *addr)
{
    if (strncmp (addr, "127.", 4) == 0)
        return;
    char from[INET_ADDRSTRLEN] = "";
    if (h->install_gw[0] != '\0') {
        snprintf (from, sizeof from, "%s", h->install_gw);
        char *dot = strrchr (from, '.');
        snprintf (dot + 1, sizeof from - (size_t) (dot + 1 - from), "%d", atoi (dot + 1) + 1);
    }
    for (int pass = 0; pass < 2; pass++) {
        char out[512];
        int rc;
        if (pass == 0)
            rc = hx_sh (out, sizeof out, "ip -o route get %s", addr);
        else if (from[0] != '\0')
            rc = hx_sh (out, sizeof out, "ip -o route get %s from %s iif " HX_INSTALL_BRIDGE, addr, from);
        else
            break;
        char dev[40] = "";
        if (h->have_ns)
            snprintf (dev, sizeof dev, " dev %s ", h->ns.vh);
        bool local = strncmp (out, "local ", 6) == 0;
        bool ours = dev[0] != '\0' && strstr (out, dev) != NULL;
        if (rc != 0 || !(local || ours))
            fail_msg ("traffic rule: %s would not stay on this machine (%s): %s — stopping before anything is sent",
                      addr, pass == 0 ? "from the host" : "forwarded from Phase A's bridge", out);
    }
}

/* Every address in targets.json ("host" of tcp/send entries, "server" of
 * dns entries). */
static void
hx_assert_targets_contained (hx *h, json_t *targets)
{
    static const char *lists[] = { "tcp", "send", "dns" };
    for (size_t k = 0; k < 3; k++) {
        size_t i;
        json_t *t;
        json_array_foreach (json_object_get (targets, lists[k]), i, t)
        {
            const char *a = json_string_value (json_object_get (t, "host"));
            if (a == NULL)
                a = json_string_value (json_object_get (t, "server"));
            assert_non_null (a);
            hx_assert_contained (h, a);
        }
    }
}

static void
hx_target (json_t *list, const char *name, const char *host, int port)
{
    json_array_append_new (list, json_pack ("{s:s,s:s,s:i}", "name", name, "host", host, "port", port));
}

static kiwi_phase_config
hx_config (hx *h)
{
    return (kiwi_phase_config) {
        .host_env = kiwi_strv_list (&h->host_env),
        .ca_bundle = HX_CA_BUNDLE,
    };
}

/* Phase A of the repository in h->ws with `argv`; output collected. */
static kiwi_install_result
hx_install (hx *h, const char *const *argv, int64_t install_timeout_ms, int64_t deadline_ms)
{
    kiwi_phase_config cfg = hx_config (h);
    cfg.install_timeout_ms = install_timeout_ms;
    kiwi_install_request req = {
        .image = hx_image (),
        .workspace = h->ws,
        .argv = argv,
        .deadline_ms = deadline_ms,
        .task_id = h->task,
        .snapshot_dir = h->snap,
        .on_output = hx_collect,
        .userdata = h,
    };
    kiwi_install_result r;
    kiwi_error_t err = NULL;
    hx_output_reset (h);
    if (kiwi_phase_install (h->env, &cfg, &req, &r, &err) < 0)
        fail_msg ("%s: Phase A could not run: %s", h->c->runtime, kiwi_error_msg (err));
    return r;
}

/* Phase B of the repository in h->ws; output collected. */
static kiwi_exec_result
hx_verify (hx *h, const char *command, const char *const *creds, kiwi_sandbox_limits limits, int64_t timeout_ms,
           bool snapshot, kiwi_strv *withheld)
{
    kiwi_phase_config cfg = hx_config (h);
    kiwi_verify_request req = {
        .image = hx_image (),
        .workspace = h->ws,
        .snapshot_dir = snapshot ? h->snap : NULL,
        .command = command,
        .credentials = creds,
        .limits = limits,
        .timeout_ms = timeout_ms,
        .task_id = h->task,
        .on_output = hx_collect,
        .userdata = h,
    };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    hx_output_reset (h);
    if (kiwi_phase_verify (h->env, &cfg, &req, &r, withheld, NULL, &err) < 0)
        fail_msg ("%s: Phase B could not run: %s", h->c->runtime, kiwi_error_msg (err));
    return r;
}

/* The outcome word of "PROBE <name> <outcome> ..." in `out`, or "" when the
 * probe never reported `name`. */
static const char *
hx_probe (const char *out, const char *name, char *dst, size_t cap)
{
    char key[160];
    snprintf (key, sizeof key, "PROBE %s ", name);
    dst[0] = '\0';
    for (const char *p = out; (p = strstr (p, key)) != NULL; p += strlen (key))
        if (p == out || p[-1] == '\n') {
            p += strlen (key);
            size_t n = strcspn (p, " \n");
            snprintf (dst, cap, "%.*s", (int) (n < cap ? n : cap - 1), p);
            return dst;
        }
    return dst;
}

#define HX_EXPECT_PROBE(out, name, want)                                                                     \
    do {                                                                                                     \
        char hx__o[64];                                                                                      \
        hx_probe ((out), (name), hx__o, sizeof hx__o);                                                       \
        if (strcmp (hx__o, (want)) != 0)                                                                     \
            fail_msg ("%s: probe %s: expected %s, got \"%s\"\n--- output ---\n%s", h->c->runtime, (name), (want), \
                      hx__o, (out));                                                                         \
    } while (0)

/* The attempt was made and did not get through. */
#define HX_EXPECT_BLOCKED(out, name)                                                                         \
    do {                                                                                                     \
        char hx__o[64];                                                                                      \
        hx_probe ((out), (name), hx__o, sizeof hx__o);                                                       \
        if (hx__o[0] == '\0' || strcmp (hx__o, "open") == 0 || strcmp (hx__o, "resolved") == 0             \
            || strcmp (hx__o, "skipped") == 0)                                                               \
            fail_msg ("%s: %s was reachable or not tried: \"%s\"\n--- output ---\n%s", h->c->runtime, (name),   \
                      hx__o, (out));                                                                         \
    } while (0)

/* No fake secret (whole value or its random part) in `text`. */
static void
hx_assert_no_secret (hx *h, const char *what, const char *text, size_t len)
{
    for (size_t i = 0; i < h->nsecrets; i++) {
        const hx_secret *s = &h->secrets[i];
        if (len > 0 && memmem (text, len, s->tag, strlen (s->tag)) != NULL)
            fail_msg ("%s: %s holds the worker's %s (%s)", h->c->runtime, what, s->name, s->value);
    }
}

static void
hx_assert_no_secret_received (hx *h)
{
    pthread_mutex_lock (&h->rec.mu);
    for (size_t i = 0; i < h->rec.n; i++) {
        for (size_t k = 0; k < h->nsecrets; k++)
            if (h->rec.l[i].data.len > 0
                && memmem (h->rec.l[i].data.data, h->rec.l[i].data.len, h->secrets[k].tag,
                           strlen (h->secrets[k].tag)))
            {
                pthread_mutex_unlock (&h->rec.mu);
                fail_msg ("%s: listener %s received the worker's %s", h->c->runtime, h->rec.l[i].label,
                          h->secrets[k].name);
            }
    }
    pthread_mutex_unlock (&h->rec.mu);
}

/* Every listener was reachable from the host before the run (so zero hits
 * afterwards means something), then the counts are reset. */
static void
hx_selfcheck_listeners (hx *h)
{
    for (size_t i = 0; i < h->rec.n; i++) {
        hx_listener *l = &h->rec.l[i];
        if (l->type != SOCK_STREAM)
            continue;
        hx_assert_contained (h, l->addr);
        if (!hx_connect_once (l->addr, l->port))
            fail_msg ("listener %s at %s:%d does not answer the test itself", l->label, l->addr, l->port);
    }
    hx_settle (300);
    for (size_t i = 0; i < h->rec.n; i++)
        if (h->rec.l[i].type == SOCK_STREAM && hx_hits (&h->rec, i) != 1)
            fail_msg ("listener %s did not record the test's own connection", h->rec.l[i].label);
    hx_recorder_reset (&h->rec);
}

/* Echoes the lines of `out` that start with one of `prefixes` (NULL-ended)
 * as "# <runtime> <what>: <line>", the evidence in the test's log. */
static void
hx_echo (hx *h, const char *what, const char *out, const char *const *prefixes)
{
    for (const char *l = out; l && *l;) {
        size_t n = strcspn (l, "\n");
        for (size_t i = 0; prefixes[i]; i++)
            if (strncmp (l, prefixes[i], strlen (prefixes[i])) == 0) {
                fprintf (stderr, "# %s %s: %.*s\n", h->c->runtime, what, (int) n, l);
                break;
            }
        l += n + (l[n] == '\n');
    }
}

static const char *const hx_probe_lines[] = { "PROBE ", "SENT ", NULL };

static int
hx_port_of (const char *hostport)
{
    const char *c = hostport ? strrchr (hostport, ':') : NULL;
    return c ? atoi (c + 1) : 0;
}

/* ------------------------------------------------------------------------
 * exfil: the install hooks steal what they can.
 */

/* The environment a hook dumped ("STEAL-BEGIN <who>" then one JSON line):
 * its variable names are echoed to the log, and none may be the name of a
 * worker secret (whatever its value). */
static void
hx_check_dump (hx *h, const char *what, const char *out, const char *who)
{
    char k[64];
    snprintf (k, sizeof k, "STEAL-BEGIN %s\n", who);
    const char *p = strstr (out, k);
    if (p == NULL)
        fail_msg ("%s: %s: no dump from the %s hook:\n%s", h->c->runtime, what, who, out);
    p += strlen (k);
    json_error_t je;
    json_t *loot = json_loadb (p, strcspn (p, "\n"), 0, &je);
    if (loot == NULL)
        fail_msg ("%s: %s: the %s hook's dump is not JSON: %s", h->c->runtime, what, who, je.text);
    json_t *env = json_object_get (loot, "env");
    assert_true (json_is_object (env));
    char names[4096] = "";
    size_t used = 0;
    const char *key;
    json_t *v;
    json_object_foreach (env, key, v)
    {
        for (size_t i = 0; i < h->nsecrets; i++)
            if (strcmp (key, h->secrets[i].name) == 0)
                fail_msg ("%s: %s: the %s hook sees %s", h->c->runtime, what, who, key);
        if (strncmp (key, "npm_", 4) != 0 && used + strlen (key) + 2 < sizeof names)
            used += (size_t) snprintf (names + used, sizeof names - used, "%s%s", used ? " " : "", key);
    }
    fprintf (stderr, "# %s %s: the %s hook's environment (npm_* left out): %s\n", h->c->runtime, what, who, names);
    json_decref (loot);
}
/* No listener of h->rec recorded a connection during `what`. */
static void
hx_assert_no_listener_reached (hx *h, const char *what)
{
    for (size_t i = 0; i < h->rec.n; i++)
        if (hx_hits (&h->rec, i) != 0)
            fail_msg ("%s: %s reached listener %s (%d)", h->c->runtime, what, h->rec.l[i].label,
                      hx_hits (&h->rec, i));
}

/* The stack's Redis port and Kafka brokers, from its env file: what the
 * tests of the worker's own services aim at. */
static void
hx_need_stack (const char **redis, const char **kafka)
{
    *redis = kiwi_test_env ("KIWI_REDIS_PORT");
    *kafka = kiwi_test_env ("KIWI_KAFKA_BROKERS");
    KIWI_NEED (*redis && *kafka, "the stack's env file (KIWI_REDIS_PORT, KIWI_KAFKA_BROKERS)");
}

/* The repository `repo` in h->ws, the metadata namespace up and a listener
 * on the host's loopback, whose index in h->rec goes to *lo. The caller
 * adds any other listener and starts the recorder. */
static hx_metadata
hx_probe_up (hx *h, const char *repo, size_t *lo)
{
    hx_repo (h, repo);
    hx_metadata m = hx_metadata_up (h);
    *lo = hx_listen (&h->rec, "host-lo", "127.0.0.1", 0, SOCK_STREAM, -1);
    return m;
}

/* `npm ci` (scripts in the foreground) as Phase A of the probe repository
 * in h->ws, with targets still contained after it and the output echoed;
 * fails unless the install succeeded and, with done non-NULL, the output
 * holds done. Returns the output (h's, valid until the next run). */
static const char *
hx_probe_install (hx *h, json_t *targets, const char *done)
{
    static const char *const argv[] = { "npm", "ci", "--no-audit", "--no-fund", "--foreground-scripts", NULL };
    kiwi_install_result ir = hx_install (h, argv, 0, 0);
    hx_assert_targets_contained (h, targets);
    const char *out = hx_output (h);
    hx_echo (h, "Phase A", out, hx_probe_lines);
    if (ir.status != KIWI_INSTALL_OK || (done != NULL && strstr (out, done) == NULL))
        fail_msg ("%s: install: %s\n%s", h->c->runtime, ir.reason, out);
    kiwi_install_result_clear (&ir);
    hx_settle (500);
    return out;
}

/* `command` as Phase B (see hx_verify), with targets still contained after
 * it and the output echoed; fails unless it exited 0 with done in its
 * output. Returns the output (h's, valid until the next run). */
static const char *
hx_probe_verify (hx *h, json_t *targets, const char *command, const char *const *creds, int64_t timeout_ms,
                 bool snapshot, kiwi_strv *withheld, const char *done)
{
    kiwi_exec_result vr = hx_verify (h, command, creds, (kiwi_sandbox_limits) { 0 }, timeout_ms, snapshot, withheld);
    hx_assert_targets_contained (h, targets);
    const char *out = hx_output (h);
    hx_echo (h, "Phase B", out, hx_probe_lines);
    if (vr.exit_code != 0 || strstr (out, done) == NULL)
        fail_msg ("%s: Phase B `%s`: exit %d\n%s", h->c->runtime, command, vr.exit_code, out);
    kiwi_exec_result_clear (&vr);
    hx_settle (500);
    return out;
}

/* Listeners on the host's install and docker bridge gateways (those it
 * has): their indexes in h->rec go to gw; returns how many. */
static size_t
hx_listen_gateways (hx *h, size_t gw[2])
{
    size_t ngw = 0;
    if (h->install_gw[0])
        gw[ngw++] = hx_listen (&h->rec, "install-gateway", h->install_gw, 0, SOCK_STREAM, -1);
    if (h->docker_gw[0])
        gw[ngw++] = hx_listen (&h->rec, "docker-gateway", h->docker_gw, 0, SOCK_STREAM, -1);
    return ngw;
}

static void
test_exfil (void **state)
{
    hx *h = *state;
    size_t lo;
    hx_metadata m = hx_probe_up (h, "exfil", &lo);
    hx_recorder_start (&h->rec);
    hx_selfcheck_listeners (h);

    json_t *send = json_array ();
    int lp = h->rec.l[lo].port;
    hx_target (send, "host-lo@127.0.0.1", "127.0.0.1", lp);
    for (size_t i = 0; i < h->nhost_addrs; i++) {
        char n[64];
        snprintf (n, sizeof n, "host-lo@%s", h->host_addrs[i]);
        hx_target (send, n, h->host_addrs[i], lp);
    }
    hx_target (send, "metadata:80", HX_METADATA, 80);
    hx_target (send, "metadata:443", HX_METADATA, 443);
    hx_target (send, "metadata:53", HX_METADATA, 53);
    json_t *targets = json_pack ("{s:o}", "send", send);
    hx_assert_targets_contained (h, targets);
    hx_write_targets (h, targets);

    /* Phase A: npm ci runs evil-dep's postinstall and the repository's */
    const char *out = hx_probe_install (h, targets, NULL);

    /* the hooks ran and their dumps are real dumps */
    static const char *const who[] = { "dep", "root" };
    for (size_t i = 0; i < 2; i++) {
        char k[64];
        snprintf (k, sizeof k, "STEAL-DONE %s", who[i]);
        if (strstr (out, k) == NULL)
            fail_msg ("%s: the %s hook did not finish\n%s", h->c->runtime, who[i], out);
        snprintf (k, sizeof k, "STEAL-BEGIN %s\n{", who[i]);
        const char *dump = strstr (out, k);
        assert_non_null (dump);
        const char *end = strstr (dump, "\nSTEAL-END");
        assert_non_null (end);
        if (memmem (dump, (size_t) (end - dump), "\"HOME\":\"/kiwi/home\"", 19) == NULL
            || memmem (dump, (size_t) (end - dump), "\"npm_lifecycle_event\":\"postinstall\"", 35) == NULL)
            fail_msg ("%s: the %s hook's dump is not its environment:\n%.*s", h->c->runtime, who[i],
                      (int) (end - dump), dump);
        /* positive control: the channel out works and carried the dump */
        snprintf (k, sizeof k, "SENT %s metadata:53 open", who[i]);
        if (strstr (out, k) == NULL)
            fail_msg ("%s: control: the %s hook could not reach the test's namespace:\n%s", h->c->runtime, who[i],
                      out);
        snprintf (k, sizeof k, "STEAL %s\n{", who[i]);
        if (!hx_received (&h->rec, m.md53, k))
            fail_msg ("%s: control: the namespace did not receive the %s hook's dump", h->c->runtime, who[i]);
    }
    assert_true (hx_received (&h->rec, m.md53, "\"HOME\":\"/kiwi/home\""));
    hx_check_dump (h, "Phase A", out, "dep");
    hx_check_dump (h, "Phase A", out, "root");

    /* the guarantee: nothing it could read held a secret */
    hx_assert_no_secret (h, "Phase A's output", out, h->out.len);
    hx_assert_no_secret_received (h);
    if (hx_hits (&h->rec, lo) != 0)
        fail_msg ("%s: Phase A reached the host's loopback listener", h->c->runtime);

    /* Phase B: the task names a model key and Kiwi's token as "test
     * credentials" next to a real one: only the real one passes */
    hx_recorder_reset (&h->rec);
    const char *creds[] = { "ANTHROPIC_API_KEY", "KIWI_GIT_TOKEN", "HOSTILE_TEST_CRED", NULL };
    kiwi_strv withheld = KIWI_STRV_INIT;
    out = hx_probe_verify (h, targets, "npm test", creds, 120000, true, &withheld, "STEAL-DONE verify");
    if (strstr (out, h->test_cred) == NULL)
        fail_msg ("%s: control: the named test credential did not reach Phase B\n%s", h->c->runtime, out);
    hx_check_dump (h, "Phase B", out, "verify");
    assert_true (kiwi_strv_contains (&withheld, "ANTHROPIC_API_KEY"));
    assert_true (kiwi_strv_contains (&withheld, "KIWI_GIT_TOKEN"));
    kiwi_strv_free (&withheld);
    hx_assert_no_secret (h, "Phase B's output", out, h->out.len);
    assert_null (strstr (out, "SENT verify host-lo@127.0.0.1 open"));
    assert_null (strstr (out, "SENT verify metadata:53 open"));
    hx_assert_no_listener_reached (h, "Phase B");
    json_decref (targets);
}

/* ------------------------------------------------------------------------
 * phase_a_host: the worker's own services from Phase A.
 */
static void
test_phase_a_host (void **state)
{
    hx *h = *state;
    const char *redis, *kafka;
    hx_need_stack (&redis, &kafka);
    const char *ctrl = kiwi_test_env ("KIWI_KAFKA_CONTROLLER");
    size_t lo;
    hx_metadata m = hx_probe_up (h, "net-probe", &lo);
    hx_recorder_start (&h->rec);
    hx_selfcheck_listeners (h);

    struct {
        const char *svc;
        int port;
    } svcs[] = { { "listener", h->rec.l[lo].port }, { "redis", atoi (redis) }, { "kafka", hx_port_of (kafka) },
                 { "kafka-controller", hx_port_of (ctrl) } };
    json_t *tcp = json_array ();
    char addrs[9][INET_ADDRSTRLEN];
    size_t na = 0;
    snprintf (addrs[na++], INET_ADDRSTRLEN, "127.0.0.1");
    for (size_t i = 0; i < h->nhost_addrs; i++)
        snprintf (addrs[na++], INET_ADDRSTRLEN, "%s", h->host_addrs[i]);
    for (size_t s = 0; s < sizeof svcs / sizeof svcs[0]; s++)
        for (size_t a = 0; a < na; a++) {
            if (svcs[s].port <= 0)
                continue;
            char n[96];
            snprintf (n, sizeof n, "%s@%s", svcs[s].svc, addrs[a]);
            hx_target (tcp, n, addrs[a], svcs[s].port);
        }
    hx_target (tcp, "control/metadata:53", HX_METADATA, 53);
    json_t *files = json_pack ("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "name", "docker.sock@/var/run", "path",
                               "/var/run/docker.sock", "name", "docker.sock@/run", "path", "/run/docker.sock",
                               "name", "docker.sock@kiwi", "path",
                               kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/lib/kiwi/run/docker.sock"), "name",
                               "docker.sock@/kiwi", "path", "/kiwi/docker.sock");
    json_t *targets = json_pack ("{s:b,s:o,s:o}", "no_network_guard", 0, "tcp", tcp, "files", files);
    hx_assert_targets_contained (h, targets);
    hx_write_targets (h, targets);

    const char *out = hx_probe_install (h, targets, "PROBE-DONE");

    /* controls: the client works, and Phase A does have a network */
    HX_EXPECT_PROBE (out, "control/sandbox-lo", "open");
    HX_EXPECT_PROBE (out, "control/lookup-localhost", "resolved");
    HX_EXPECT_PROBE (out, "control/metadata:53", "open");
    assert_true (hx_received (&h->rec, m.md53, "PROBE install control/metadata:53"));

    size_t i;
    json_t *t;
    json_array_foreach (tcp, i, t)
    {
        const char *n = json_string_value (json_object_get (t, "name"));
        if (strncmp (n, "control/", 8) != 0)
            HX_EXPECT_BLOCKED (out, n);
    }
    json_array_foreach (files, i, t)
        HX_EXPECT_PROBE (out, json_string_value (json_object_get (t, "name")), "absent");
    if (hx_hits (&h->rec, lo) != 0)
        fail_msg ("%s: Phase A reached the host's loopback listener (%d connections)", h->c->runtime,
                  hx_hits (&h->rec, lo));
    json_decref (targets);
}

/* ------------------------------------------------------------------------
 * phase_a_metadata: the metadata endpoint's token ports and the bridge
 * gateways, behind the egress layer.
 */
static bool
hx_egress_in_place (void)
{
    return hx_sh (NULL, 0, "%s status", HX_EGRESS) == 0;
}

/* The egress layer applied (by the test when it was not, removed again in
 * teardown). Call with the namespace lock held. */
static void
hx_apply_egress (hx *h)
{
    if (!hx_egress_in_place ()) {
        char out[2048];
        if (hx_sh (out, sizeof out, "%s apply", HX_EGRESS) != 0)
            fail_msg ("%s apply: %s", HX_EGRESS, out);
        h->egress_applied_here = true;
        assert_true (hx_egress_in_place ());
    }
}

static void
test_phase_a_metadata (void **state)
{
    hx *h = *state;
    KIWI_NEED (access (HX_EGRESS, X_OK) == 0,
               "the egress layer, ops/egress/egress.sh, is not in the tree: without it Phase A reaches the "
               "metadata endpoint and the host's bridge addresses");
    hx_repo (h, "net-probe");
    hx_metadata m = hx_metadata_up (h);
    hx_apply_egress (h);
    size_t gw[2];
    size_t ngw = hx_listen_gateways (h, gw);
    assert_true (ngw > 0);
    hx_recorder_start (&h->rec);
    hx_selfcheck_listeners (h);

    json_t *tcp = json_array ();
    hx_target (tcp, "metadata:80", HX_METADATA, 80);
    hx_target (tcp, "metadata:443", HX_METADATA, 443);
    hx_target (tcp, "control/metadata:53", HX_METADATA, 53);
    for (size_t i = 0; i < ngw; i++)
        hx_target (tcp, h->rec.l[gw[i]].label, h->rec.l[gw[i]].addr, h->rec.l[gw[i]].port);
    json_t *targets = json_pack ("{s:b,s:o}", "no_network_guard", 0, "tcp", tcp);
    hx_assert_targets_contained (h, targets);
    hx_write_targets (h, targets);

    const char *out = hx_probe_install (h, targets, "PROBE-DONE");

    HX_EXPECT_PROBE (out, "control/sandbox-lo", "open");
    /* the same address is reachable on its DNS port: the route works, and
     * the layer leaves :53 open as the spec says */
    HX_EXPECT_PROBE (out, "control/metadata:53", "open");
    HX_EXPECT_BLOCKED (out, "metadata:80");
    HX_EXPECT_BLOCKED (out, "metadata:443");
    assert_int_equal (hx_hits (&h->rec, m.md80), 0);
    assert_int_equal (hx_hits (&h->rec, m.md443), 0);
    for (size_t i = 0; i < ngw; i++) {
        HX_EXPECT_BLOCKED (out, h->rec.l[gw[i]].label);
        if (hx_hits (&h->rec, gw[i]) != 0)
            fail_msg ("%s: Phase A reached the host's %s listener", h->c->runtime, h->rec.l[gw[i]].label);
    }
    json_decref (targets);
}

/* ------------------------------------------------------------------------
 * phase_b_network: nothing at all from Phase B.
 */
static void
test_phase_b_network (void **state)
{
    hx *h = *state;
    const char *redis, *kafka;
    hx_need_stack (&redis, &kafka);
    size_t lo;
    hx_metadata m = hx_probe_up (h, "net-probe", &lo);
    size_t gw[2];
    size_t ngw = hx_listen_gateways (h, gw);
    hx_recorder_start (&h->rec);
    hx_selfcheck_listeners (h);
    (void) m;

    json_t *tcp = json_array ();
    int lp = h->rec.l[lo].port;
    hx_target (tcp, "host-lo@127.0.0.1", "127.0.0.1", lp);
    for (size_t i = 0; i < h->nhost_addrs; i++) {
        char n[64];
        snprintf (n, sizeof n, "host-lo@%s", h->host_addrs[i]);
        hx_target (tcp, n, h->host_addrs[i], lp);
        snprintf (n, sizeof n, "redis@%s", h->host_addrs[i]);
        hx_target (tcp, n, h->host_addrs[i], atoi (redis));
        snprintf (n, sizeof n, "kafka@%s", h->host_addrs[i]);
        hx_target (tcp, n, h->host_addrs[i], hx_port_of (kafka));
    }
    for (size_t i = 0; i < ngw; i++)
        hx_target (tcp, h->rec.l[gw[i]].label, h->rec.l[gw[i]].addr, h->rec.l[gw[i]].port);
    hx_target (tcp, "metadata:53", HX_METADATA, 53); /* Phase A reaches this one */
    hx_target (tcp, "metadata:80", HX_METADATA, 80);
    hx_target (tcp, "ns:53", h->ns.ns_ip, 53);
    json_t *dns = json_pack ("[{s:s,s:s,s:i,s:s},{s:s,s:s,s:i,s:s}]", "name", "dns@metadata", "server",
                             HX_METADATA, "port", 53, "query", "registry.npmjs.org", "name", "dns@ns", "server",
                             h->ns.ns_ip, "port", 53, "query", "registry.npmjs.org");
    json_t *lookup = json_pack ("[{s:s,s:s}]", "name", "dns@system", "host", "registry.npmjs.org");
    json_t *targets = json_pack ("{s:b,s:o,s:o,s:o}", "no_network_guard", 1, "tcp", tcp, "dns", dns, "lookup",
                                 lookup);
    hx_assert_targets_contained (h, targets);
    hx_write_targets (h, targets);

    const char *out = hx_probe_verify (h, targets, "node probe.js verify", NULL, 180000, false, NULL, "PROBE-DONE");

    HX_EXPECT_PROBE (out, "interfaces", "lo");
    assert_null (strstr (out, "PROBE guard tripped"));
    HX_EXPECT_PROBE (out, "control/sandbox-lo", "open");
    HX_EXPECT_PROBE (out, "control/dns-sandbox-lo", "resolved");
    /* (control/lookup-localhost: see phase_b_localhost) */
    size_t i;
    json_t *t;
    json_array_foreach (tcp, i, t)
        HX_EXPECT_BLOCKED (out, json_string_value (json_object_get (t, "name")));
    HX_EXPECT_BLOCKED (out, "dns@metadata");
    HX_EXPECT_BLOCKED (out, "dns@ns");
    HX_EXPECT_BLOCKED (out, "dns@system");
    hx_assert_no_listener_reached (h, "Phase B");
    json_decref (targets);
}

/* ------------------------------------------------------------------------
 * phase_b_localhost: no network is not no loopback. A test suite that
 * starts a server on "localhost" and connects to it must work in Phase B.
 */
static void
test_phase_b_localhost (void **state)
{
    hx *h = *state;
    HX_MUST ("mkdir -p %s", h->ws);
    kiwi_exec_result r = hx_verify (
        h,
        "echo \"HOSTS $(wc -c </etc/hosts) bytes\"; "
        "node -e \"const net = require('net');"
        " const fail = (e) => { console.log('LOCALHOST failed ' + e.code); process.exit(1); };"
        " const s = net.createServer((c) => c.end('hi')).on('error', fail).listen(0, 'localhost', () =>"
        "   net.connect(s.address().port, 'localhost').on('error', fail).on('data', () => {"
        "     console.log('LOCALHOST ok ' + s.address().address); process.exit(0); }));\"",
        NULL, (kiwi_sandbox_limits) { 0 }, 60000, false, NULL);
    const char *out = hx_output (h);
    fprintf (stderr, "# %s: %s", h->c->runtime, out);
    if (strstr (out, "LOCALHOST ok") == NULL)
        fail_msg ("%s: Phase B cannot use localhost (exit %d): a test suite that serves on localhost fails for a "
                  "reason that is not its own:\n%s",
                  h->c->runtime, r.exit_code, out);
    kiwi_exec_result_clear (&r);
}

/* ------------------------------------------------------------------------
 * Resource bounds.
 */
/* The worker can still fork, run and allocate, and nothing of the noted
 * containers runs on the host any more: each one's cgroup is gone or
 * empty (within 60 s: gVisor tears a full sandbox down slowly). */
static void
hx_assert_worker_unharmed (hx *h)
{
    for (size_t k = 0; k < h->ncontainers; k++) {
        int64_t left = -1;
        for (int tries = 0; tries < 120; tries++) {
            left = hx_cgroup_value ("pids", h->container_ids[k], "pids.current");
            if (left <= 0)
                break;
            usleep (500000);
        }
        if (left > 0)
            fail_msg ("%s: container %.12s still has %lld process(es) on the host after the attack", h->c->runtime,
                      h->container_ids[k], (long long) left);
    }
    pid_t p = fork ();
    assert_true (p >= 0);
    if (p == 0)
        _exit (7);
    int st = 0;
    assert_int_equal (waitpid (p, &st, 0), p);
    assert_true (WIFEXITED (st) && WEXITSTATUS (st) == 7);
    char *m = malloc (64 << 20);
    assert_non_null (m);
    memset (m, 1, 64 << 20);
    free (m);
}

/* The largest N in lines "<key>N" of `out`, or -1. */
static long
hx_max_value (const char *out, const char *key)
{
    long max = -1;
    for (const char *p = out; (p = strstr (p, key)) != NULL; p += strlen (key)) {
        long v = strtol (p + strlen (key), NULL, 10);
        if (v > max)
            max = v;
    }
    return max;
}

/* pids.max bounds forks inside the cgroup; a process that joins it from
 * outside (the runtime's exec helper, runc init) is counted without being
 * refused, so a count, the host's or the bomb's own look at /proc, may
 * pass the ceiling by those few */
#define HX_JOINED 4

/* The bomb seen from the host: its container's pids cgroup was sampled
 * while it ran, the host enforced a ceiling (under runc exactly the
 * sandbox's; under runsc, where processes live inside gVisor, the host-side
 * safety net on gVisor's own threads), and the cgroup never went past it
 * by more than the processes that join it from outside.
 * Under runc the host saw the bomb reach at least half its ceiling. */
static void
hx_assert_bomb_cgroup (hx *h, const char *how, int64_t pids)
{
    bool runsc = strcmp (h->c->runtime, "runsc") == 0;
    int64_t want = runsc ? (pids > KIWI_SANDBOX_GVISOR_PIDS_NET ? pids * 2 : KIWI_SANDBOX_GVISOR_PIDS_NET) : pids;
    fprintf (stderr, "# %s: fork bomb in %s, from the host: %ld cgroup sample(s), peak %lld process(es), pids.max %lld\n",
             h->c->runtime, how, h->cg_samples, (long long) h->cg_pids_peak, (long long) h->cg_pids_max);
    if (h->cg_samples == 0)
        fail_msg ("%s: %s: the container's cgroup was never seen while the bomb ran", h->c->runtime, how);
    if (h->cg_pids_max != want)
        fail_msg ("%s: %s: the host enforced pids.max %lld, not %lld", h->c->runtime, how,
                  (long long) h->cg_pids_max, (long long) want);
    const int64_t joined = HX_JOINED;
    if (h->cg_pids_peak > h->cg_pids_max + joined)
        fail_msg ("%s: %s: %lld processes past the ceiling %lld (and the %lld that may join from outside)",
                  h->c->runtime, how, (long long) h->cg_pids_peak, (long long) h->cg_pids_max, (long long) joined);
    if (!runsc && h->cg_pids_peak < pids / 2)
        fail_msg ("%s: %s: the host saw at most %lld processes: the bomb was not measured", h->c->runtime, how,
                  (long long) h->cg_pids_peak);
}

/* The bomb ran into its ceiling (and no further than what joins from
 * outside), the fork failure is in its output, and the wall clock ended
 * the run. */
static void
hx_assert_bomb (hx *h, const char *how, const kiwi_exec_result *r, int64_t pids, int64_t timeout_ms)
{
    const char *out = hx_output (h);
    long procs = hx_max_value (out, "BOMB procs=");
    fprintf (stderr, "# %s: fork bomb in %s: exit %d, timed_out %d, lost %d, max procs %ld (limit %lld), %.1f s\n",
             h->c->runtime, how, r->exit_code, r->timed_out, r->sandbox_lost, procs, (long long) pids,
             r->duration_ms / 1000.0);
    if (strstr (out, "BOMB started") == NULL || strstr (out, "BOMB counted") == NULL || procs < 0)
        fail_msg ("%s: %s: the bomb did not run its course:\n%.4000s", h->c->runtime, how, out);
    if (procs > pids + HX_JOINED || procs < pids / 2)
        fail_msg ("%s: %s: %ld processes under a ceiling of %lld (and the %d that may join from outside)",
                  h->c->runtime, how, procs, (long long) pids, HX_JOINED);
    if (strstr (out, "fork: retry: Resource temporarily unavailable") == NULL
        && strstr (out, "fork: Resource temporarily unavailable") == NULL)
        fail_msg ("%s: %s: no fork failure in the output:\n%.4000s", h->c->runtime, how, out);
    /* gVisor tears a sandbox full of processes down slowly on a loaded
     * machine: the deadline must have ended it, within a generous margin */
    if (!r->timed_out || r->exit_code != -1 || r->duration_ms > timeout_ms + 90000)
        fail_msg ("%s: %s: not ended by the deadline: timed_out %d, exit %d, %lld ms", h->c->runtime, how,
                  r->timed_out, r->exit_code, (long long) r->duration_ms);
}

static kiwi_sandbox *hx_session (hx *h, kiwi_sandbox_limits limits);

static void
test_fork_bomb (void **state)
{
    hx *h = *state;
    hx_repo (h, "fork-bomb");
    const int64_t pids = 64, timeout_ms = 15000;
    const kiwi_sandbox_limits limits = { .pids = pids };
    h->track_containers = true;

    /* Phase B: the bomb is the test command */
    hx_cgroup_reset (h);
    kiwi_exec_result r = hx_verify (h, "bash bomb.sh", NULL, limits, timeout_ms, false, NULL);
    hx_assert_bomb (h, "Phase B", &r, pids, timeout_ms);
    hx_assert_bomb_cgroup (h, "Phase B", pids);
    kiwi_exec_result_clear (&r);

    /* the Implementer's persistent sandbox: the bomb through exec; the
     * deadline takes the whole sandbox down */
    hx_session (h, limits);
    kiwi_error_t err = NULL;
    if (kiwi_phase_put_tree (h->sb, h->ws, KIWI_SANDBOX_SRC, NULL, NULL, &err) < 0)
        fail_msg ("%s: put_tree: %s", h->c->runtime, kiwi_error_msg (err));
    const char *argv[] = { "bash", "bomb.sh", NULL };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = timeout_ms, .on_output = hx_collect, .userdata = h };
    hx_output_reset (h);
    char phase_b_id[72];
    snprintf (phase_b_id, sizeof phase_b_id, "%s", h->ncontainers ? h->container_ids[0] : "");
    hx_cgroup_reset (h);
    if (kiwi_sandbox_exec (h->sb, &x, &r, &err) < 0)
        fail_msg ("%s: exec: %s", h->c->runtime, kiwi_error_msg (err));
    hx_assert_bomb (h, "the session sandbox", &r, pids, timeout_ms);
    hx_assert_bomb_cgroup (h, "the session sandbox", pids);
    /* the Phase B container is checked by hx_assert_worker_unharmed too */
    if (phase_b_id[0] && h->ncontainers < 8)
        snprintf (h->container_ids[h->ncontainers++], sizeof h->container_ids[0], "%s", phase_b_id);
    kiwi_exec_result_clear (&r);
    kiwi_sandbox *sb = h->sb;
    h->sb = NULL;
    if (kiwi_sandbox_destroy (sb, &err) < 0)
        fail_msg ("%s: destroying the bombed sandbox: %s", h->c->runtime, kiwi_error_msg (err));

    hx_assert_worker_unharmed (h);
    /* nothing of the two sandboxes is left on the host: no bomb process
     * (runc), no runsc-sandbox, gofer or shim of their containers (runsc) */
    assert_true (h->ncontainers >= 2);
    char left[700] = "";
    for (int tries = 0; tries < 30; tries++) {
        left[0] = '\0';
        DIR *d = opendir ("/proc");
        struct dirent *e;
        while (d && (e = readdir (d)) != NULL) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            char p[300];
            snprintf (p, sizeof p, "/proc/%s/cmdline", e->d_name);
            size_t n = 0;
            char *cl = hx_read_file (p, &n);
            if (cl == NULL)
                continue;
            for (size_t i = 0; i < n; i++)
                if (cl[i] == '\0')
                    cl[i] = ' ';
            bool ours = strstr (cl, "bomb.sh") != NULL;
            for (size_t k = 0; k < h->ncontainers && !ours; k++)
                ours = strstr (cl, h->container_ids[k]) != NULL;
            if (ours)
                snprintf (left, sizeof left, "pid %s: %.400s", e->d_name, cl);
            free (cl);
        }
        if (d)
            closedir (d);
        if (left[0] == '\0')
            break;
        hx_settle (500);
    }
    if (left[0] != '\0')
        fail_msg ("%s: the bomb's sandbox left a process on the host: %s", h->c->runtime, left);
}

static void
test_disk_filler (void **state)
{
    hx *h = *state;
    hx_repo (h, "disk-filler");
    const int64_t disk_mb = 64;
    h->sample_disks = true;
    kiwi_exec_result r = hx_verify (h, "sh fill.sh", NULL, (kiwi_sandbox_limits) { .disk_mb = disk_mb }, 180000,
                                    false, NULL);
    h->sample_disks = false;
    const char *out = hx_output (h);
    fprintf (stderr, "# %s: disk filler: exit %d, %.1f s, the sandbox's disk image held at most %llu KB\n",
             h->c->runtime, r.exit_code, r.duration_ms / 1000.0, (unsigned long long) (h->disk_allocated >> 10));
    hx_echo (h, "disk filler", out, (const char *const[]) { "FILL ", "dd: ", "head: ", NULL });
    assert_false (r.timed_out);
    assert_false (r.sandbox_lost);
    /* the ceiling stopped the writer, and said why */
    const char *disk = strstr (out, "FILL disk exit=");
    if (disk == NULL || atoi (disk + 15) == 0)
        fail_msg ("%s: the disk writer was not stopped:\n%s", h->c->runtime, out);
    assert_non_null (strstr (out, "No space left on device"));
    long bytes = hx_max_value (out, "FILL disk exit=1 bytes=");
    if (bytes < (disk_mb / 2) * 1024 * 1024 || bytes > disk_mb * 1024 * 1024)
        fail_msg ("%s: %ld bytes written under a ceiling of %lld MB", h->c->runtime, bytes, (long long) disk_mb);
    /* on the worker the bytes went into the bounded image, and no further */
    if (h->disk_allocated < (uint64_t) (disk_mb / 2) << 20 || h->disk_allocated > (uint64_t) disk_mb << 20)
        fail_msg ("%s: the sandbox's disk image held %llu bytes (ceiling %lld MB)", h->c->runtime,
                  (unsigned long long) h->disk_allocated, (long long) disk_mb);
    /* the scratch tmpfs is bounded too, and the root is read-only */
    const char *tmp = strstr (out, "FILL tmp exit=");
    assert_non_null (tmp);
    long tmp_bytes = hx_max_value (tmp, "bytes=");
    if (atoi (tmp + 14) == 0 || tmp_bytes > 256L * 1024 * 1024)
        fail_msg ("%s: /tmp took %ld bytes without being stopped", h->c->runtime, tmp_bytes);
    const char *root = strstr (out, "FILL root exit=");
    assert_true (root != NULL && atoi (root + 15) != 0);
    const char *usr = strstr (out, "FILL usr exit=");
    assert_true (usr != NULL && atoi (usr + 14) != 0);
    kiwi_exec_result_clear (&r);
    hx_assert_worker_unharmed (h);
}

static void
test_memory_hog (void **state)
{
    hx *h = *state;
    hx_repo (h, "memory-hog");
    const int64_t mem_mb = 256;
    hx_cgroup_reset (h);
    kiwi_exec_result r = hx_verify (h, "node hog.js", NULL, (kiwi_sandbox_limits) { .memory_mb = mem_mb }, 180000,
                                    false, NULL);
    /* from the host: the container's memory cgroup, sampled while it ran */
    fprintf (stderr, "# %s: memory hog, from the host: %ld cgroup sample(s), peak %lld MB, limit %lld MB\n",
             h->c->runtime, h->cg_samples, (long long) (h->cg_mem_peak >> 20), (long long) (h->cg_mem_limit >> 20));
    if (h->cg_samples == 0)
        fail_msg ("%s: the hog's cgroup was never seen while it ran", h->c->runtime);
    if (h->cg_mem_limit != mem_mb << 20)
        fail_msg ("%s: the host enforced a memory limit of %lld bytes, not %lld MB", h->c->runtime,
                  (long long) h->cg_mem_limit, (long long) mem_mb);
    /* The kernel charges a few allocations past the limit (forced charges
     * while the cgroup's OOM kill runs), so the recorded peak may pass it by
     * some pages; a limit not enforced shows the hog's whole allocation,
     * far beyond. */
    if (h->cg_mem_peak > h->cg_mem_limit + HX_MEM_FORCED_SLACK)
        fail_msg ("%s: the hog's cgroup peaked at %lld bytes, past its limit of %lld by more than %d KiB",
                  h->c->runtime, (long long) h->cg_mem_peak, (long long) h->cg_mem_limit, HX_MEM_FORCED_SLACK >> 10);
    if (h->cg_mem_peak < (64 << 20))
        fail_msg ("%s: the host saw a peak of only %lld bytes: the hog was not measured", h->c->runtime,
                  (long long) h->cg_mem_peak);
    const char *out = hx_output (h);
    long mb = hx_max_value (out, "HOG allocated=");
    fprintf (stderr, "# %s: memory hog: exit %d, oom %d, lost %d (%s), allocated %ld MB, %.1f s\n", h->c->runtime,
             r.exit_code, r.oom_killed, r.sandbox_lost, r.lost_reason, mb, r.duration_ms / 1000.0);
    assert_false (r.timed_out);
    /* stopped by the ceiling, and named so */
    if (!r.oom_killed)
        fail_msg ("%s: the hog ended without the memory ceiling named: exit %d\n%.4000s", h->c->runtime, r.exit_code,
                  out);
    if (r.sandbox_lost)
        assert_non_null (strstr (r.lost_reason, "memory ceiling"));
    else
        assert_int_equal (r.exit_code, 137);
    if (mb < 64 || mb > mem_mb)
        fail_msg ("%s: %ld MB allocated under a ceiling of %lld MB", h->c->runtime, mb, (long long) mem_mb);
    kiwi_exec_result_clear (&r);
    hx_assert_worker_unharmed (h);
}

static void
test_sleep_forever (void **state)
{
    hx *h = *state;
    hx_repo (h, "sleep-forever");
    /* Phase B: the task's wall clock (long enough for npm to start the
     * sleeping test script under gVisor on a loaded machine) */
    const int64_t verify_timeout_ms = 8000;
    kiwi_exec_result r = hx_verify (h, "npm test", NULL, (kiwi_sandbox_limits) { 0 }, verify_timeout_ms, false, NULL);
    const char *out = hx_output (h);
    fprintf (stderr, "# %s: sleep in Phase B: timed_out %d, exit %d, %.1f s\n", h->c->runtime, r.timed_out,
             r.exit_code, r.duration_ms / 1000.0);
    if (strstr (out, "SLEEP verify") == NULL)
        fail_msg ("%s: the test script was not running when the deadline (%lld ms) ended it; output:\n%s",
                  h->c->runtime, (long long) verify_timeout_ms, out);
    assert_true (r.timed_out);
    assert_int_equal (r.exit_code, -1);
    assert_true (r.duration_ms >= verify_timeout_ms && r.duration_ms < verify_timeout_ms + 20000);
    kiwi_exec_result_clear (&r);

    /* Phase A: KIWI_INSTALL_TIMEOUT, then the task's deadline. The timeout
     * leaves npm time to start and reach the sleeping install script: under
     * gVisor on a loaded machine (the sanitizer build) 4 s were not enough
     * for npm to print anything. */
    const char *argv[] = { "npm", "ci", "--no-audit", "--no-fund", "--foreground-scripts", NULL };
    const int64_t install_timeout_ms = 15000;
    kiwi_install_result ir = hx_install (h, argv, install_timeout_ms, 0);
    fprintf (stderr, "# %s: sleep in Phase A: %s (%.1f s)\n", h->c->runtime, ir.reason, ir.duration_ms / 1000.0);
    assert_int_equal (ir.status, KIWI_INSTALL_TIMED_OUT);
    assert_non_null (strstr (ir.reason, "KIWI_INSTALL_TIMEOUT"));
    if (strstr (hx_output (h), "SLEEP install") == NULL)
        fail_msg ("%s: the install script was not running when KIWI_INSTALL_TIMEOUT (%lld ms) ended the install; "
                  "output:\n%s",
                  h->c->runtime, (long long) install_timeout_ms, hx_output (h));
    assert_true (ir.duration_ms >= install_timeout_ms && ir.duration_ms < install_timeout_ms + 60000);
    kiwi_install_result_clear (&ir);
    ir = hx_install (h, argv, 0, 3000);
    assert_int_equal (ir.status, KIWI_INSTALL_TIMED_OUT);
    assert_non_null (strstr (ir.reason, "the task's deadline"));
    kiwi_install_result_clear (&ir);
    hx_assert_worker_unharmed (h);
}

/* ------------------------------------------------------------------------
 * Files: symlinks in, archives out.
 */

/* A session sandbox (the Implementer's: no network, no credentials). */
static kiwi_sandbox *
hx_session (hx *h, kiwi_sandbox_limits limits)
{
    kiwi_phase_config cfg = hx_config (h);
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_session_env (&cfg, NULL, NULL, &e, NULL, NULL, &err), 0);
    kiwi_sandbox_spec spec = {
        .image = hx_image (), .network = KIWI_NET_NONE, .env = kiwi_strv_list (&e), .limits = limits,
        .task_id = h->task, .phase = "session",
    };
    if (kiwi_sandbox_create (h->env, &spec, &h->sb, &err) < 0)
        fail_msg ("%s: session sandbox: %s", h->c->runtime, kiwi_error_msg (err));
    kiwi_strv_free (&e);
    return h->sb;
}

static const char *
hx_exec (hx *h, const char *script)
{
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 120000, .on_output = hx_collect, .userdata = h };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    hx_output_reset (h);
    if (kiwi_sandbox_exec (h->sb, &x, &r, &err) < 0)
        fail_msg ("%s: exec `%s`: %s", h->c->runtime, script, kiwi_error_msg (err));
    if (r.exit_code != 0)
        fail_msg ("%s: `%s` exited %d:\n%s", h->c->runtime, script, r.exit_code, hx_output (h));
    kiwi_exec_result_clear (&r);
    return hx_output (h);
}

static int
hx_buf_sink (const char *data, size_t len, void *ud)
{
    return kiwi_buf_append (ud, data, len, NULL);
}

/* get_archive of `path` into a buffer (owned by the caller). */
static kiwi_buf
hx_get (hx *h, const char *path)
{
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_get_archive (h->sb, path, hx_buf_sink, &b, &err) < 0)
        fail_msg ("%s: get_archive %s: %s", h->c->runtime, path, kiwi_error_msg (err));
    return b;
}

static void
test_symlinks (void **state)
{
    hx *h = *state;
    hx_repo (h, "symlink-escape");
    /* a secret on the worker, outside the workspace, and links to it */
    char secret[80], hexv[40], p[512];
    hx_hex (hexv, 16);
    snprintf (secret, sizeof secret, "KIWI-HOSTILE-SECRET-%s", hexv);
    snprintf (p, sizeof p, "%s/secret.txt", h->outside);
    hx_write_file (p, secret);
    HX_MUST ("ln -s %s/secret.txt %s/secret-file && ln -s %s %s/secret-dir && ln -s ../outside/secret.txt "
             "%s/secret-rel",
             h->outside, h->ws, h->outside, h->ws, h->ws);
    char *outside_before = hx_tree (h->outside, NULL);
    char *base_before = hx_tree (h->base, "ws");
    size_t pw_len = 0;
    char *passwd_before = hx_read_file ("/etc/passwd", &pw_len);

    /* what the repository becomes on its way in holds no secret */
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_archive_stats st;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_from_dir (h->ws, &o, &tar, &st, &err), 0);
    assert_int_equal (st.symlinks, 6);
    assert_null (memmem (tar.data, tar.len, secret, strlen (secret)));
    assert_null (memmem (tar.data, tar.len, hexv, strlen (hexv)));
    kiwi_buf_free (&tar);

    hx_session (h, (kiwi_sandbox_limits) { 0 });
    bool relative_refused = false;
    if (kiwi_phase_put_tree (h->sb, h->ws, KIWI_SANDBOX_SRC, NULL, NULL, &err) < 0) {
        /* dockerd refuses the whole archive when a relative link leads out
         * of the directory it unpacks into (fail-closed). Then the
         * repository without those links goes in, absolute links and all. */
        const char *m = kiwi_error_msg (err);
        fprintf (stderr, "# %s: put_tree refused: %s\n", h->c->runtime, m);
        if (strstr (m, "invalid symlink") == NULL || (strstr (m, "escape-rel") == NULL && strstr (m, "secret-rel") == NULL))
            fail_msg ("%s: put_tree: %s", h->c->runtime, m);
        kiwi_error_free (&err);
        relative_refused = true;
        HX_MUST ("rm %s/escape-rel %s/secret-rel", h->ws, h->ws);
        kiwi_sandbox *sb = h->sb;
        h->sb = NULL;
        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        hx_session (h, (kiwi_sandbox_limits) { 0 });
        if (kiwi_phase_put_tree (h->sb, h->ws, KIWI_SANDBOX_SRC, NULL, NULL, &err) < 0)
            fail_msg ("%s: put_tree without the relative links: %s", h->c->runtime, kiwi_error_msg (err));
    }
    const char *out = hx_exec (h, "sh attack.sh");
    hx_echo (h, "attack.sh", out, (const char *const[]) { "LINK ", "WROTE ", "PLANTED ", NULL });
    assert_non_null (strstr (out, "ATTACK-DONE"));
    /* control: reading an ordinary file works */
    assert_non_null (strstr (out, "CONTROL an ordinary file: reading it must work"));
    /* every link arrived as a link, with its text */
    static const char *const fixed[][2] = { { "evil", "/etc/passwd" },
                                            { "evildir", "/root" },
                                            { "escape-rel", "../../../../../../../../etc/passwd" },
                                            { "secret-rel", "../outside/secret.txt" } };
    /* relative links that climb out of the repository are left out by
     * kiwi_phase_put_tree (dockerd would refuse the whole archive): never
     * present, the absolute ones always */
    (void) relative_refused;
    for (size_t i = 0; i < 4; i++) {
        char l[256];
        snprintf (l, sizeof l, "LINK %s %s\n", fixed[i][0], fixed[i][1]);
        if (i < 2 && strstr (out, l) == NULL)
            fail_msg ("%s: missing `%s`", h->c->runtime, l);
        if (i >= 2 && strstr (out, l) != NULL)
            fail_msg ("%s: `%s` climbs out of the repository and should have been left out", h->c->runtime, l);
    }
    char l[600];
    snprintf (l, sizeof l, "LINK secret-file %s/secret.txt\n", h->outside);
    assert_non_null (strstr (out, l));
    snprintf (l, sizeof l, "LINK secret-dir %s\n", h->outside);
    assert_non_null (strstr (out, l));
    /* the guarantee: what they point at on the worker never entered */
    assert_null (strstr (out, hexv));
    hx_output_reset (h);
    kiwi_buf all = hx_get (h, KIWI_SANDBOX_ROOT);
    assert_non_null (memmem (all.data, all.len, "kiwi/src/attack.sh", 18)); /* control: a real read */
    assert_null (memmem (all.data, all.len, hexv, strlen (hexv)));
    kiwi_buf_free (&all);
    /* /tmp is a tmpfs, which dockerd's archive cannot see: the sandbox
     * streams it out itself. Control: what the attack planted at the links'
     * targets is there, in the sandbox's own /tmp. */
    out = hx_exec (h, "tar -cf - -C / tmp 2>/dev/null; true");
    assert_non_null (memmem (out, h->out.len, "pwned-at-target.txt", 19));
    assert_null (memmem (out, h->out.len, hexv, strlen (hexv)));
    /* and nothing written through them reached the worker */
    char *outside_after = hx_tree (h->outside, NULL);
    assert_string_equal (outside_before, outside_after);
    char *base_after = hx_tree (h->base, "ws");
    assert_string_equal (base_before, base_after);
    size_t pw_len2 = 0;
    char *passwd_after = hx_read_file ("/etc/passwd", &pw_len2);
    assert_true (pw_len == pw_len2 && memcmp (passwd_before, passwd_after, pw_len) == 0);
    char *secret_now = hx_read_file (p, NULL);
    assert_string_equal (secret_now, secret);
    free (secret_now);
    free (outside_before);
    free (outside_after);
    free (base_before);
    free (base_after);
    free (passwd_before);
    free (passwd_after);
}

/* One ustar header block for a crafted entry (the archive builders refuse
 * `..`, as they should; an attacker's archive is not made by them). */
static void
hx_raw_entry (kiwi_buf *b, const char *name, char type, const char *link, const char *data)
{
    unsigned char hd[512] = { 0 };
    size_t len = data ? strlen (data) : 0;
    snprintf ((char *) hd, 100, "%s", name);
    snprintf ((char *) hd + 100, 8, "%07o", type == '5' ? 0755 : 0644);
    snprintf ((char *) hd + 108, 8, "%07o", 1000);
    snprintf ((char *) hd + 116, 8, "%07o", 1000);
    char num[32];
    snprintf (num, sizeof num, "%011lo", type == '0' ? (unsigned long) len : 0UL);
    memcpy (hd + 124, num, 11);
    snprintf ((char *) hd + 136, 12, "%011o", 1700000000);
    memset (hd + 148, ' ', 8);
    hd[156] = (unsigned char) type;
    if (link)
        snprintf ((char *) hd + 157, 100, "%s", link);
    memcpy (hd + 257, "ustar", 6);
    memcpy (hd + 263, "00", 2);
    unsigned sum = 0;
    for (size_t i = 0; i < 512; i++)
        sum += hd[i];
    snprintf ((char *) hd + 148, 8, "%06o", sum);
    kiwi_buf_append (b, hd, 512, NULL);
    if (type == '0' && len > 0) {
        kiwi_buf_append (b, data, len, NULL);
        static const char zero[512];
        kiwi_buf_append (b, zero, (512 - len % 512) % 512, NULL);
    }
}

static void
test_readback (void **state)
{
    hx *h = *state;
    hx_repo (h, "archive-escape");
    char secret[80], hexv[40], p[512];
    hx_hex (hexv, 16);
    snprintf (secret, sizeof secret, "KIWI-HOSTILE-SECRET-%s", hexv);
    snprintf (p, sizeof p, "%s/secret.txt", h->outside);
    hx_write_file (p, secret);
    char dest[320], readback[256];
    snprintf (readback, sizeof readback, "%s/readback", h->base);
    snprintf (dest, sizeof dest, "%s/dest", readback);
    HX_MUST ("mkdir -p %s", dest);

    hx_session (h, (kiwi_sandbox_limits) { 0 });
    kiwi_error_t err = NULL;
    if (kiwi_phase_put_tree (h->sb, h->ws, KIWI_SANDBOX_SRC, NULL, NULL, &err) < 0)
        fail_msg ("%s: put_tree: %s", h->c->runtime, kiwi_error_msg (err));
    char cmd[600];
    snprintf (cmd, sizeof cmd, "node make-tars.js %s && sh plant.sh round1 %s", h->outside, h->outside);
    const char *out = hx_exec (h, cmd);
    assert_non_null (strstr (out, "TARS "));
    char *base_before = hx_tree (h->base, "readback/dest");

    /* 1. an ordinary read-back: links come out as links, unfollowed */
    kiwi_buf a = hx_get (h, KIWI_SANDBOX_SRC "/out");
    kiwi_extract_stats xs;
    if (kiwi_archive_extract (a.data, a.len, dest, NULL, &xs, &err) < 0)
        fail_msg ("%s: extracting round 1: %s", h->c->runtime, kiwi_error_msg (err));
    kiwi_buf_free (&a);
    struct stat st;
    snprintf (p, sizeof p, "%s/out/file.txt", dest);
    assert_int_equal (lstat (p, &st), 0);
    assert_true (S_ISREG (st.st_mode));
    snprintf (p, sizeof p, "%s/out/abs", dest);
    assert_int_equal (lstat (p, &st), 0);
    assert_true (S_ISLNK (st.st_mode));
    snprintf (p, sizeof p, "%s/out/rel", dest);
    assert_int_equal (lstat (p, &st), 0);
    assert_true (S_ISLNK (st.st_mode));
    char *t = hx_tree (h->base, "readback/dest");
    assert_string_equal (base_before, t);
    free (t);

    /* 2. round 2 over round 1: `abs` is now a real directory in the
     * sandbox and a link to the worker's directory in dest. Extracting must
     * not write through the link: it either refuses, or replaces the link
     * by the directory inside dest. */
    hx_exec (h, "sh plant.sh round2");
    a = hx_get (h, KIWI_SANDBOX_SRC "/out");
    int rc = kiwi_archive_extract (a.data, a.len, dest, NULL, &xs, &err);
    kiwi_buf_free (&a);
    fprintf (stderr, "# %s: round 2 over round 1: rc %d: %s\n", h->c->runtime, rc, kiwi_error_msg (err));
    kiwi_error_free (&err);
    snprintf (p, sizeof p, "%s/pwned-round2.txt", h->outside);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/out/abs", dest);
    assert_int_equal (lstat (p, &st), 0);
    if (rc == 0) {
        assert_true (S_ISDIR (st.st_mode));
        snprintf (p, sizeof p, "%s/out/abs/pwned-round2.txt", dest);
        assert_int_equal (lstat (p, &st), 0);
        assert_true (S_ISREG (st.st_mode));
    } else
        assert_true (S_ISLNK (st.st_mode));
    t = hx_tree (h->base, "readback/dest");
    assert_string_equal (base_before, t);
    free (t);

    /* 3. archives the sandbox crafted: each rejected as a whole */
    static const char *const evil[] = { "dotdot.tar",   "mid-dotdot.tar", "absolute.tar",    "through-link.tar",
                                        "through-rel.tar", "hardlink.tar", "hardlink-rel.tar" };
    for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
        char inner[256], x[320], fresh[320];
        snprintf (inner, sizeof inner, KIWI_SANDBOX_SRC "/evil/%s", evil[i]);
        a = hx_get (h, inner);
        /* the outer archive is Docker's, holding the crafted one as a file */
        snprintf (x, sizeof x, "%s/x-%zu", readback, i);
        HX_MUST ("mkdir -p %s", x);
        if (kiwi_archive_extract (a.data, a.len, x, NULL, NULL, &err) < 0)
            fail_msg ("%s: outer archive of %s: %s", h->c->runtime, evil[i], kiwi_error_msg (err));
        kiwi_buf_free (&a);
        snprintf (p, sizeof p, "%s/%s", x, evil[i]);
        size_t len = 0;
        char *crafted = hx_read_file (p, &len);
        assert_non_null (crafted);
        HX_MUST ("rm -rf %s", x);
        snprintf (fresh, sizeof fresh, "%s/dest-%zu", readback, i);
        HX_MUST ("mkdir -p %s", fresh);
        char *before = hx_tree (h->base, NULL);
        rc = kiwi_archive_extract (crafted, len, fresh, NULL, NULL, &err);
        free (crafted);
        fprintf (stderr, "# %s: %s: rc %d: %s\n", h->c->runtime, evil[i], rc, kiwi_error_msg (err));
        if (rc >= 0)
            fail_msg ("%s: the crafted %s was extracted", h->c->runtime, evil[i]);
        kiwi_error_free (&err);
        char *after = hx_tree (h->base, NULL);
        if (strcmp (before, after) != 0)
            fail_msg ("%s: extracting %s changed the worker's files:\nbefore:\n%s\nafter:\n%s", h->c->runtime,
                      evil[i], before, after);
        free (before);
        free (after);
        HX_MUST ("rmdir %s", fresh);
    }
    snprintf (p, sizeof p, "%s/secret.txt", h->outside);
    char *secret_now = hx_read_file (p, NULL);
    assert_string_equal (secret_now, secret);
    free (secret_now);

    /* 4. the other way: an archive with `..` put into the sandbox lands
     * nowhere outside its directory (or is refused) */
    hx_exec (h, "mkdir -p " KIWI_SANDBOX_SRC "/in");
    kiwi_buf in = KIWI_BUF_INIT;
    hx_raw_entry (&in, "in-ok.txt", '0', NULL, "harmless\n");
    hx_raw_entry (&in, "../escape-in-dotdot.txt", '0', NULL, "pwned\n");
    hx_raw_entry (&in, "../../escape-in-dotdot2.txt", '0', NULL, "pwned\n");
    hx_raw_entry (&in, "../../../../../../../../escape-in-root.txt", '0', NULL, "pwned\n");
    static const char zero[1024];
    kiwi_buf_append (&in, zero, sizeof zero, NULL);
    rc = kiwi_sandbox_put_archive (h->sb, KIWI_SANDBOX_SRC "/in", in.data, in.len, &err);
    kiwi_buf_free (&in);
    fprintf (stderr, "# %s: put of `..` entries: rc %d %s\n", h->c->runtime, rc, kiwi_error_msg (err));
    kiwi_error_free (&err);
    out = hx_exec (h, "find / /kiwi /tmp -xdev -name 'escape-in-*' 2>/dev/null | sort; echo FIND-DONE");
    fprintf (stderr, "# %s: escape-in-* found in the sandbox:\n%s", h->c->runtime, out);
    for (const char *q = out; (q = strstr (q, "escape-in-")) != NULL; q++) {
        const char *ls = q;
        while (ls > out && ls[-1] != '\n')
            ls--;
        if (strncmp (ls, KIWI_SANDBOX_SRC "/in/", strlen (KIWI_SANDBOX_SRC "/in/")) != 0)
            fail_msg ("%s: a `..` entry landed outside its directory: %.*s", h->c->runtime,
                      (int) strcspn (ls, "\n"), ls);
    }
    char found[1024];
    hx_sh (found, sizeof found, "find %s/sandboxes /tmp / -xdev -maxdepth 3 -name 'escape-in-*' 2>/dev/null",
           kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"));
    for (char *q = found; (q = strstr (q, "escape-in-")) != NULL; q++) {
        char *ls = q;
        while (ls > found && ls[-1] != '\n')
            ls--;
        if (strstr (ls, "/mnt/src/in/") == NULL || strstr (ls, h->worker_id) == NULL)
            fail_msg ("%s: a `..` entry reached the worker: %s", h->c->runtime, found);
    }
    free (base_before);
}

/* ------------------------------------------------------------------------ */

#define HX_TEST(fn, name, c) { name, fn, hx_setup, hx_teardown, (void *) &c }

int
main (void)
{
    const struct CMUnitTest tests[] = {
        HX_TEST (test_exfil, "exfil/runc", hx_runc),
        HX_TEST (test_exfil, "exfil/runsc", hx_runsc),
        HX_TEST (test_phase_a_host, "phase_a_host/runc", hx_runc),
        HX_TEST (test_phase_a_host, "phase_a_host/runsc", hx_runsc),
        HX_TEST (test_phase_a_metadata, "phase_a_metadata/runc", hx_runc),
        HX_TEST (test_phase_a_metadata, "phase_a_metadata/runsc", hx_runsc),
        HX_TEST (test_phase_b_network, "phase_b_network/runc", hx_runc),
        HX_TEST (test_phase_b_network, "phase_b_network/runsc", hx_runsc),
        HX_TEST (test_phase_b_localhost, "phase_b_localhost/runc", hx_runc),
        HX_TEST (test_phase_b_localhost, "phase_b_localhost/runsc", hx_runsc),
        HX_TEST (test_fork_bomb, "fork_bomb/runc", hx_runc),
        HX_TEST (test_fork_bomb, "fork_bomb/runsc", hx_runsc),
        HX_TEST (test_disk_filler, "disk_filler/runc", hx_runc),
        HX_TEST (test_disk_filler, "disk_filler/runsc", hx_runsc),
        HX_TEST (test_memory_hog, "memory_hog/runc", hx_runc),
        HX_TEST (test_memory_hog, "memory_hog/runsc", hx_runsc),
        HX_TEST (test_sleep_forever, "sleep_forever/runc", hx_runc),
        HX_TEST (test_sleep_forever, "sleep_forever/runsc", hx_runsc),
        HX_TEST (test_symlinks, "symlinks/runc", hx_runc),
        HX_TEST (test_symlinks, "symlinks/runsc", hx_runsc),
        HX_TEST (test_readback, "readback/runc", hx_runc),
        HX_TEST (test_readback, "readback/runsc", hx_runsc),
    };
    /* KIWI_HOSTILE_PART: "rules" runs the cases that apply the host's egress
     * rules (phase_a_metadata), which run alone (tests/CMakeLists.txt);
     * "sandbox" every other case, side by side with other tests; unset,
     * all. KIWI_TEST_FILTER, a shell pattern over the cases' names
     * ("exfil*"; tests/CMakeLists.txt gives one runtime's suffix), runs a
     * subset of those; one that matches none is an error. */
    const char *part = getenv ("KIWI_HOSTILE_PART");
    if (part != NULL && strcmp (part, "rules") != 0 && strcmp (part, "sandbox") != 0) {
        fprintf (stderr, "KIWI_HOSTILE_PART=%s: expected rules or sandbox\n", part);
        return 2;
    }
    const char *filter = getenv ("KIWI_TEST_FILTER");
    struct CMUnitTest chosen[sizeof tests / sizeof tests[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        bool rules = tests[i].test_func == test_phase_a_metadata;
        if ((part == NULL || rules == (strcmp (part, "rules") == 0))
            && (filter == NULL || fnmatch (filter, tests[i].name, 0) == 0))
            chosen[n++] = tests[i];
    }
    /* a filter that matches nothing would pass with nothing run */
    if (n == 0) {
        fprintf (stderr, "KIWI_TEST_FILTER=%s, KIWI_HOSTILE_PART=%s: no case matches\n", filter ? filter : "",
                 part ? part : "");
        return 2;
    }
    return kiwi_test_status (_cmocka_run_group_tests ("hostile", chosen, n, NULL, NULL));
}
