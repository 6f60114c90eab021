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
 * As init it must never exit: a fatal error is printed on the console and
 * the guest powers off, which ends the Firecracker process the host
 * watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
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
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"

#define TMPFS_OPTS "size=256m,mode=1777"

typedef struct {
    char workspace[128];
    char user[64];
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
    /* a kernel-configured interface (ip= on the command line, Phase A)
     * reports its resolver in /proc/net/pnp */
    struct stat st;
    if (stat ("/proc/net/pnp", &st) == 0 && stat ("/etc/resolv.conf", &st) == 0)
        mount ("/proc/net/pnp", "/etc/resolv.conf", NULL, MS_BIND, NULL);
    sethostname ("sandbox", 7);
    loopback_up ();
    return 0;
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

static void
fatal_as_init (const char *what)
{
    fprintf (stderr, "kiwi-fc-agent: %s: %s; powering off\n", what, strerror (errno));
    sync ();
    reboot (RB_POWER_OFF);
    for (;;)
        pause ();
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
