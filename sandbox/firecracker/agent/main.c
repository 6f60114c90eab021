/*
 * main.c: kiwi-fc-agent, the guest side of Kiwi's firecracker driver.
 *
 * As PID 1 of a Firecracker guest (init=/sbin/kiwi-fc-agent) it mounts
 * what a sandbox needs on the read-only root filesystem (/proc, /sys,
 * /dev, /dev/pts, /dev/shm, a tmpfs /tmp and /run), mounts the workspace
 * drive at /kiwi, brings up the loopback interface, and then answers the
 * host over vsock, one forked process per connection (agent.h). Kernel
 * command line settings, all optional:
 *
 *   kiwi.workspace=/dev/vdb   the writable drive mounted at /kiwi
 *   kiwi.user=1000:1000       who runs commands and owns unpacked files
 *   kiwi.port=5252            the vsock port
 *
 * Run by hand it serves without init duties:
 *   kiwi-fc-agent --vsock PORT | --unix PATH  [--user U] [--workdir DIR]
 *
 * Started from an initrd (one that has /kiwi-initrd, built by
 * ops/firecracker/kernel.sh for kernels whose virtio and vsock drivers are
 * modules), it first loads the modules listed in /lib/kiwi/modules.order,
 * mounts the root drive read-only and continues as PID 1 from the root
 * filesystem's own /sbin/kiwi-fc-agent.
 *
 * Without a kernel that configures it (ip= needs CONFIG_IP_PNP), an ip=
 * argument (Phase A) is applied to eth0 here, with its resolver.
 *
 * As init it must never exit: a fatal error is printed on the console and
 * the guest powers off, which ends the Firecracker process the host
 * watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <net/route.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandbox/firecracker/agent/agent.h"
#include "sandbox/firecracker/agent/proto.h"

#define TMPFS_OPTS "size=256m,mode=1777"

typedef struct {
    char workspace[128];
    char user[64];
    char ip[256]; /* ip=client::gateway:netmask:host:dev:autoconf:dns */
    unsigned port;
} boot_settings;

static void
read_cmdline (boot_settings *s)
{
    FILE *f = fopen ("/proc/cmdline", "re");
    if (f == NULL)
        return;
    char line[4096];
    if (fgets (line, sizeof line, f)) {
        char *save = NULL;
        for (char *w = strtok_r (line, " \n", &save); w; w = strtok_r (NULL, " \n", &save)) {
            if (strncmp (w, "kiwi.workspace=", 15) == 0)
                snprintf (s->workspace, sizeof s->workspace, "%s", w + 15);
            else if (strncmp (w, "kiwi.user=", 10) == 0)
                snprintf (s->user, sizeof s->user, "%s", w + 10);
            else if (strncmp (w, "kiwi.port=", 10) == 0)
                s->port = (unsigned) strtoul (w + 10, NULL, 10);
            else if (strncmp (w, "ip=", 3) == 0)
                snprintf (s->ip, sizeof s->ip, "%s", w + 3);
        }
    }
    fclose (f);
}

static void
try_mount (const char *src, const char *dst, const char *type, unsigned long flags, const char *opts)
{
    mkdir (dst, 0755);
    if (mount (src, dst, type, flags, opts) < 0 && errno != EBUSY)
        fprintf (stderr, "kiwi-fc-agent: mounting %s on %s: %s\n", type, dst, strerror (errno));
}

static void
fatal_as_init (const char *what)
{
    fprintf (stderr, "kiwi-fc-agent: %s: %s; powering off\n", what, strerror (errno));
    sync ();
    reboot (RB_POWER_OFF);
    for (;;)
        pause ();
}

static void
loopback_up (void)
{
    int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct ifreq ifr = { 0 };
    snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (ioctl (s, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        ioctl (s, SIOCSIFFLAGS, &ifr);
    }
    close (s);
}

static int
set_addr (int sock, const char *dev, unsigned long req, const char *addr)
{
    struct ifreq ifr = { 0 };
    snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "%s", dev);
    struct sockaddr_in *sin = (struct sockaddr_in *) &ifr.ifr_addr;
    sin->sin_family = AF_INET;
    if (inet_pton (AF_INET, addr, &sin->sin_addr) != 1)
        return -1;
    return ioctl (sock, req, &ifr);
}

/* Applies ip=client::gateway:netmask:host:dev:off:dns to the interface
 * (the kernel's own ip= handling may be missing), default route and
 * resolver included. */
static void
configure_ip (const char *spec)
{
    char f[8][64] = { { 0 } };
    const char *p = spec;
    for (int i = 0; i < 8 && p; i++) {
        const char *c = strchr (p, ':');
        size_t n = c ? (size_t) (c - p) : strlen (p);
        snprintf (f[i], sizeof f[i], "%.*s", (int) (n < 63 ? n : 63), p);
        p = c ? c + 1 : NULL;
    }
    const char *client = f[0], *gw = f[2], *mask = f[3], *dev = *f[5] ? f[5] : "eth0", *dns = f[7];
    int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0 || !*client)
        return;
    struct ifreq ifr = { 0 };
    snprintf (ifr.ifr_name, sizeof ifr.ifr_name, "%s", dev);
    if (set_addr (s, dev, SIOCSIFADDR, client) < 0 || (*mask && set_addr (s, dev, SIOCSIFNETMASK, mask) < 0)
        || ioctl (s, SIOCGIFFLAGS, &ifr) < 0) {
        fprintf (stderr, "kiwi-fc-agent: configuring %s: %s\n", dev, strerror (errno));
        close (s);
        return;
    }
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    ioctl (s, SIOCSIFFLAGS, &ifr);
    if (*gw) {
        struct rtentry rt = { 0 };
        struct sockaddr_in *g = (struct sockaddr_in *) &rt.rt_gateway;
        g->sin_family = AF_INET;
        inet_pton (AF_INET, gw, &g->sin_addr);
        ((struct sockaddr_in *) &rt.rt_dst)->sin_family = AF_INET;
        ((struct sockaddr_in *) &rt.rt_genmask)->sin_family = AF_INET;
        rt.rt_flags = RTF_UP | RTF_GATEWAY;
        if (ioctl (s, SIOCADDRT, &rt) < 0 && errno != EEXIST)
            fprintf (stderr, "kiwi-fc-agent: default route via %s: %s\n", gw, strerror (errno));
    }
    close (s);
    /* the root filesystem is read-only: the resolver file lives in /run */
    const char *ns = *dns ? dns : gw;
    FILE *r = *ns ? fopen ("/run/resolv.conf", "we") : NULL;
    if (r != NULL) {
        fprintf (r, "nameserver %s\n", ns);
        fclose (r);
        mount ("/run/resolv.conf", "/etc/resolv.conf", NULL, MS_BIND, NULL);
    }
}

static int
init_duties (const boot_settings *s)
{
    try_mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    try_mount ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    try_mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
    try_mount ("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
    try_mount ("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    try_mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, TMPFS_OPTS);
    try_mount ("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
    if (mount (s->workspace, "/kiwi", "ext4", MS_NOSUID | MS_NODEV, NULL) < 0) {
        fprintf (stderr, "kiwi-fc-agent: mounting the workspace %s on /kiwi: %s\n", s->workspace, strerror (errno));
        return -1;
    }
    sethostname ("sandbox", 7);
    loopback_up ();
    if (*s->ip)
        configure_ip (s->ip);
    return 0;
}

/* The initrd stage: modules, then the root drive, then the real agent. */
static void
initrd_stage (char **argv)
{
    try_mount ("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    try_mount ("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
    FILE *order = fopen ("/lib/kiwi/modules.order", "re");
    char name[256];
    while (order && fgets (name, sizeof name, order)) {
        name[strcspn (name, "\n")] = '\0';
        if (*name == '\0' || *name == '#')
            continue;
        char path[300];
        snprintf (path, sizeof path, "/lib/kiwi/%s", name);
        int fd = open (path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || (syscall (SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST))
            fprintf (stderr, "kiwi-fc-agent: loading %s: %s\n", name, strerror (errno));
        if (fd >= 0)
            close (fd);
    }
    if (order)
        fclose (order);
    struct stat st;
    for (int i = 0; i < 1000 && stat ("/dev/vda", &st) < 0; i++)
        usleep (10000);
    mkdir ("/newroot", 0755);
    if (mount ("/dev/vda", "/newroot", "ext4", MS_RDONLY, NULL) < 0)
        fatal_as_init ("mounting the root drive /dev/vda");
    mount ("/dev", "/newroot/dev", NULL, MS_MOVE, NULL);
    umount2 ("/sys", MNT_DETACH);
    umount2 ("/proc", MNT_DETACH);
    if (chdir ("/newroot") < 0 || mount (".", "/", NULL, MS_MOVE, NULL) < 0 || chroot (".") < 0 || chdir ("/") < 0)
        fatal_as_init ("switching to the root drive");
    execv ("/sbin/kiwi-fc-agent", argv);
    fatal_as_init ("starting /sbin/kiwi-fc-agent from the root drive");
}

static int
listen_on (const char *unix_path, unsigned port)
{
    int fd;
    if (unix_path != NULL) {
        fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (fd < 0 || strlen (unix_path) >= sizeof a.sun_path)
            return -1;
        snprintf (a.sun_path, sizeof a.sun_path, "%s", unix_path);
        unlink (unix_path);
        if (bind (fd, (struct sockaddr *) &a, sizeof a) < 0)
            return -1;
    } else {
        fd = socket (AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
        if (fd < 0 || bind (fd, (struct sockaddr *) &a, sizeof a) < 0)
            return -1;
    }
    if (listen (fd, 64) < 0)
        return -1;
    return fd;
}

int
main (int argc, char **argv)
{
    boot_settings s = { .workspace = "/dev/vdb", .user = "1000:1000", .port = KIWI_FCP_PORT };
    const char *unix_path = NULL;
    const char *workdir = "/kiwi/src";
    bool as_init = getpid () == 1;
    bool user_set = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--unix") == 0 && i + 1 < argc)
            unix_path = argv[++i];
        else if (strcmp (argv[i], "--vsock") == 0 && i + 1 < argc)
            s.port = (unsigned) strtoul (argv[++i], NULL, 10);
        else if (strcmp (argv[i], "--user") == 0 && i + 1 < argc) {
            snprintf (s.user, sizeof s.user, "%s", argv[++i]);
            user_set = true;
        } else if (strcmp (argv[i], "--workdir") == 0 && i + 1 < argc)
            workdir = argv[++i];
        else if (!as_init) {
            fprintf (stderr, "usage: kiwi-fc-agent [--vsock PORT | --unix PATH] [--user U] [--workdir DIR]\n"
                             "As PID 1 it reads kiwi.workspace=, kiwi.user= and kiwi.port= from the kernel "
                             "command line.\n");
            return 2;
        }
    }
    if (as_init && access ("/kiwi-initrd", F_OK) == 0) {
        try_mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        initrd_stage (argv);
    }
    if (as_init) {
        /* /proc is needed to read the command line */
        try_mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        read_cmdline (&s);
        if (init_duties (&s) < 0)
            fatal_as_init ("setting up the sandbox");
        user_set = true;
    }
    kiwi_agent_config cfg = { .default_user = user_set ? s.user : NULL, .default_workdir = workdir };
    int lfd = listen_on (unix_path, s.port);
    if (lfd < 0) {
        if (as_init)
            fatal_as_init ("listening on vsock");
        fprintf (stderr, "kiwi-fc-agent: listening on %s: %s\n", unix_path ? unix_path : "vsock", strerror (errno));
        return 1;
    }
    /* connection handlers and (as init) orphans are reaped by the kernel */
    signal (SIGCHLD, SIG_IGN);
    signal (SIGPIPE, SIG_IGN);
    if (as_init)
        fprintf (stderr, "kiwi-fc-agent: ready on vsock port %u\n", s.port);
    for (;;) {
        int c = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE || errno == ENOMEM)
                continue;
            if (as_init)
                fatal_as_init ("accepting");
            return 1;
        }
        pid_t pid = fork ();
        if (pid == 0) {
            close (lfd);
            signal (SIGCHLD, SIG_DFL);
            int rc = kiwi_agent_serve (c, &cfg);
            close (c);
            _exit (rc < 0 ? 1 : 0);
        }
        close (c);
    }
}
