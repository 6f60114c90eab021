/*
 * driver-vm.c: the Firecracker processes on the host (see
 * firecracker-internal.h): a sandbox directory's files, starting
 * Firecracker and waiting for its API and the guest agent, telling whether
 * it still runs and why it stopped (from its log), killing it, and reaping
 * what a crashed worker left behind.
 */
#include "sandbox/firecracker/firecracker-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "sandbox/firecracker/agent/proto.h"

char *
kiwi__fc_path_in (const char *dir, const char *file)
{
    char *p = NULL;
    return asprintf (&p, "%s/%s", dir, file) < 0 ? NULL : p;
}

static int
rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    if (flag == FTW_DP)
        return rmdir (path) < 0 && errno != ENOENT ? -1 : 0;
    return unlink (path) < 0 && errno != ENOENT ? -1 : 0;
}

int
kiwi__fc_remove_tree (const char *dir, kiwi_error_t *err)
{
    if (nftw (dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", dir);
    return 0;
}

/* Last bytes of Firecracker's log, one line, for error messages. */
static void
log_tail_n (const char *log, char *out, size_t outsz)
{
    out[0] = '\0';
    cleanup_close int fd = open (log, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || outsz < 2)
        return;
    off_t end = lseek (fd, 0, SEEK_END);
    off_t want = (off_t) outsz - 1;
    off_t from = end > want ? end - want : 0;
    ssize_t n = pread (fd, out, (size_t) want, from);
    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    out[n] = '\0';
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t')
            *c = ' ';
    char *s = out;
    while (*s == ' ')
        s++;
    size_t len = strlen (s);
    while (len > 0 && s[len - 1] == ' ')
        s[--len] = '\0';
    memmove (out, s, len + 1);
}

static void
log_tail (const char *log, char *out, size_t outsz)
{
    log_tail_n (log, out, outsz);
}

/* The part of Firecracker's log that says why a microVM stopped: from a
 * KVM exit or a guest kernel panic when there is one, else the end. */
static void
telling_tail (const char *log, char *out, size_t outsz)
{
    char big[4096];
    log_tail_n (log, big, sizeof big);
    static const char *const marks[] = { "Kernel panic", "KVM_EXIT_", "kiwi-fc-agent:" };
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        char *m = strstr (big, marks[i]);
        if (m != NULL) {
            snprintf (out, outsz, "%s", m);
            return;
        }
    }
    size_t n = strlen (big);
    snprintf (out, outsz, "%s", n >= outsz ? big + n - (outsz - 1) : big);
}

/* Whether the Firecracker process still runs; reaps it when not. */
bool
kiwi__fc_vm_alive (kiwi__fc_sb *s)
{
    if (s->pid <= 0)
        return false;
    pid_t w = waitpid (s->pid, &s->status, WNOHANG);
    if (w == s->pid || (w < 0 && errno == ECHILD)) {
        s->pid = 0;
        return false;
    }
    return true;
}

void
kiwi__fc_describe_exit (kiwi__fc_sb *s, char *why, size_t len)
{
    char tail[160];
    telling_tail (s->log, tail, sizeof tail);
    if (s->killed)
        snprintf (why, len, "the microVM was killed at the deadline");
    else if (WIFEXITED (s->status))
        snprintf (why, len, "the microVM stopped (firecracker exited with %d)%s%s", WEXITSTATUS (s->status),
                  *tail ? ": " : "", tail);
    else
        snprintf (why, len, "the microVM stopped (firecracker killed by signal %d)", WTERMSIG (s->status));
}

bool
kiwi__fc_alive (void *ud, char *why, size_t len)
{
    kiwi__fc_sb *s = ud;
    if (kiwi__fc_vm_alive (s))
        return true;
    kiwi__fc_describe_exit (s, why, len);
    return false;
}

void
kiwi__fc_kill_vm (kiwi__fc_sb *s)
{
    if (s->pid > 0) {
        kill (s->pid, SIGKILL);
        while (waitpid (s->pid, &s->status, 0) < 0 && errno == EINTR)
            ;
        s->pid = 0;
    }
}

int
kiwi__fc_write_file (const char *path, const char *text)
{
    cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t n = strlen (text);
    return write (fd, text, n) == (ssize_t) n ? 0 : -1;
}

int
kiwi__fc_spawn (kiwi__fc_sb *s, kiwi_error_t *err)
{
    cleanup_close int logfd = open (s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0)
        return kiwi_error_make (err, errno, "creating %s", s->log);
    char id[64];
    snprintf (id, sizeof id, "kiwi-%s", s->name + strlen (s->name) - 8);
    const char *argv[] = { s->p->set.bin, "--api-sock", s->api_sock, "--id", id, NULL };
    pid_t pid = fork ();
    if (pid < 0)
        return kiwi_error_make (err, errno, "starting firecracker");
    if (pid == 0) {
        setsid ();
        int devnull = open ("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2 (devnull, 0);
        dup2 (logfd, 1);
        dup2 (logfd, 2);
        closefrom (3);
        execvp (argv[0], (char *const *) argv);
        dprintf (2, "kiwi: cannot run %s: %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    s->pid = pid;
    char pidtext[32];
    snprintf (pidtext, sizeof pidtext, "%d\n", (int) pid);
    cleanup_free char *pidfile = kiwi__fc_path_in (s->dir, "pid");
    if (pidfile == NULL || kiwi__fc_write_file (pidfile, pidtext) < 0)
        return kiwi_error_make (err, errno, "writing the pid file in %s", s->dir);
    return 0;
}

/* An error for a Firecracker process that exited, blaming KVM when its
 * output does. */
int
kiwi__fc_exited_error (kiwi__fc_sb *s, const char *when, kiwi_error_t *err)
{
    char why[400];
    kiwi__fc_describe_exit (s, why, sizeof why);
    char tail[400];
    log_tail (s->log, tail, sizeof tail);
    if (kiwi__fc_blames_kvm (tail))
        return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE, KIWI_FC_NO_KVM ": firecracker exited %s: %s (%s)",
                                     when, tail, KIWI_FC_KVM_HINT);
    return kiwi_error_make_code (err, KIWI_SBE_UNAVAILABLE, "%s %s", why, when);
}

int
kiwi__fc_wait_api (kiwi__fc_sb *s, kiwi_fc_api *api, kiwi_error_t *err)
{
    int64_t deadline = kiwi_fcp_now_ms () + 5000;
    for (;;) {
        if (!kiwi__fc_vm_alive (s))
            return kiwi__fc_exited_error (s, "during start-up", err);
        kiwi_error_t e = NULL;
        json_t *info = NULL;
        if (access (s->api_sock, F_OK) == 0 && kiwi_fc_api_call (api, "GET", "/", NULL, 2000, &info, NULL, NULL, &e) == 0) {
            json_decref (info);
            return 0;
        }
        if (kiwi_fcp_now_ms () > deadline) {
            *err = e ? kiwi_error_steal (&e) : NULL;
            return kiwi_error_wrap (err, "firecracker did not answer on %s within 5 s", s->api_sock);
        }
        kiwi_error_free (&e);
        usleep (20000);
    }
}

int
kiwi__fc_wait_agent (kiwi__fc_sb *s, kiwi_error_t *err)
{
    int64_t deadline = kiwi_fcp_now_ms () + s->p->set.boot_timeout_ms;
    kiwi_error_t last = NULL;
    for (;;) {
        if (!kiwi__fc_vm_alive (s)) {
            kiwi_error_free (&last);
            return kiwi__fc_exited_error (s, "while the guest was booting", err);
        }
        int fd = -1;
        kiwi_error_free (&last);
        int64_t step = kiwi_fcp_now_ms () + 2000;
        if (kiwi__fc_vsock_connect (s->vsock_uds, KIWI_FCP_PORT, step, &fd, &last) == 0) {
            int rc = kiwi__fc_hello (fd, step, &last);
            close (fd);
            if (rc == 0)
                return 0;
            if (kiwi_error_code (last) == KIWI_FCP_EPROTO) {
                *err = kiwi_error_steal (&last);
                return -1;
            }
        }
        if (kiwi_fcp_now_ms () > deadline) {
            char tail[400];
            log_tail (s->log, tail, sizeof tail);
            kiwi_error_make_code (err, KIWI_SBE_TIMEOUT,
                                  "the guest agent did not answer within %lld ms (%s); console: %s",
                                  (long long) s->p->set.boot_timeout_ms, kiwi_error_msg (last), tail);
            kiwi_error_free (&last);
            return -1;
        }
        usleep (50000);
    }
}

/* Kills a Firecracker process left by a crashed worker: only when its
 * command line names this sandbox's API socket (pids are reused). */
static void
kill_leftover (const char *dir)
{
    cleanup_free char *pidfile = kiwi__fc_path_in (dir, "pid");
    cleanup_fclose FILE *f = pidfile ? fopen (pidfile, "re") : NULL;
    int pid = 0;
    if (f == NULL || fscanf (f, "%d", &pid) != 1 || pid <= 1)
        return;
    char procf[64];
    snprintf (procf, sizeof procf, "/proc/%d/cmdline", pid);
    cleanup_close int fd = open (procf, O_RDONLY | O_CLOEXEC);
    char cmd[4096];
    ssize_t n = fd >= 0 ? read (fd, cmd, sizeof cmd - 1) : -1;
    if (n <= 0)
        return;
    cmd[n] = '\0';
    cleanup_free char *api = kiwi__fc_path_in (dir, "api.sock");
    bool ours = false;
    for (char *a = cmd; a < cmd + n; a += strlen (a) + 1)
        if (api && strcmp (a, api) == 0)
            ours = true;
    if (!ours)
        return;
    kill (pid, SIGKILL);
    for (int i = 0; i < 50 && kill (pid, 0) == 0; i++) {
        waitpid (pid, NULL, WNOHANG);
        usleep (20000);
    }
}

static char *
read_small (const char *dir, const char *file)
{
    cleanup_free char *p = kiwi__fc_path_in (dir, file);
    cleanup_fclose FILE *f = p ? fopen (p, "re") : NULL;
    char line[PATH_MAX];
    if (f == NULL || fgets (line, sizeof line, f) == NULL)
        return NULL;
    line[strcspn (line, "\n")] = '\0';
    return strdup (line);
}

int
kiwi__fc_reap (void *priv, int *removed, kiwi_error_t *err)
{
    kiwi__fc_priv *p = priv;
    *removed = 0;
    char prefix[256];
    snprintf (prefix, sizeof prefix, "kiwi-fc-%s-", p->worker_id);
    DIR *d = opendir (p->base);
    if (d == NULL)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "reading %s", p->base);
    struct dirent *e;
    int rc = 0;
    while ((e = readdir (d)) != NULL) {
        if (strncmp (e->d_name, prefix, strlen (prefix)) != 0)
            continue;
        kiwi__fc_sb s = { .p = p };
        s.dir = kiwi__fc_path_in (p->base, e->d_name);
        if (s.dir == NULL)
            continue;
        kill_leftover (s.dir);
        s.tap = read_small (s.dir, "tap");
        s.lease = read_small (s.dir, "lease");
        kiwi_error_t one = NULL;
        if (kiwi__fc_remove_all (&s, &one) < 0) {
            kiwi_warn ("reap: %s", kiwi_error_msg (one));
            if (rc == 0)
                *err = kiwi_error_steal (&one);
            rc = -1;
        } else
            (*removed)++;
        kiwi_error_free (&one);
        free (s.dir);
        free (s.tap);
        free (s.lease);
    }
    closedir (d);
    return rc;
}
