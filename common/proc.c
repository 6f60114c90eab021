/*
 * proc.c: spawn a program with a deadline and a bounded output tail.
 */
#include "common/proc.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void
kiwi_proc_spawnattr_child (posix_spawnattr_t *attr)
{
    posix_spawnattr_setflags (attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup (attr, 0);
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    posix_spawnattr_setsigmask (attr, &none);
    posix_spawnattr_setsigdefault (attr, &all);
}

int
kiwi_proc_run (const char *const *argv, const char *const *envp, const char *cwd, long timeout_ms, size_t cap,
               kiwi_proc_result *res, kiwi_error_t *err)
{
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (cap == 0)
        cap = 16384;
    int pipefd[2];
    if (pipe2 (pipefd, O_CLOEXEC) < 0)
        return kiwi_error_make (err, errno, "pipe for `%s`", argv[0]);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&fa);
    posix_spawnattr_init (&attr);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2 (&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2 (&fa, pipefd[1], 2);
    if (cwd != NULL)
        posix_spawn_file_actions_addchdir_np (&fa, cwd);
    kiwi_proc_spawnattr_child (&attr);
    pid_t pid;
    int rc = posix_spawnp (&pid, argv[0], &fa, &attr, (char *const *) argv,
                           envp ? (char *const *) envp : environ);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    close (pipefd[1]);
    if (rc != 0) {
        close (pipefd[0]);
        return kiwi_error_make (err, rc, "cannot run `%s`", argv[0]);
    }
    char *buf = malloc (cap + 1);
    size_t len = 0;
    long deadline = timeout_ms > 0 ? kiwi_mono_ms () + timeout_ms : 0;
    for (;;) {
        int wait_ms = -1;
        if (deadline) {
            long left = deadline - kiwi_mono_ms ();
            if (left <= 0) {
                kill (-pid, SIGKILL);
                res->timed_out = 1;
                break;
            }
            wait_ms = (int) left;
        }
        struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
        int n = poll (&p, 1, wait_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            continue;
        char chunk[4096];
        ssize_t r = read (pipefd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (buf != NULL) {
            if ((size_t) r >= cap) {
                memcpy (buf, chunk + r - cap, cap);
                len = cap;
            } else {
                if (len + (size_t) r > cap) {
                    size_t drop = len + (size_t) r - cap;
                    memmove (buf, buf + drop, len - drop);
                    len -= drop;
                }
                memcpy (buf + len, chunk, (size_t) r);
                len += (size_t) r;
            }
        }
    }
    close (pipefd[0]);
    int status = 0;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED (status))
        res->exit_code = WEXITSTATUS (status);
    else if (WIFSIGNALED (status))
        res->exit_code = 128 + WTERMSIG (status);
    if (buf != NULL)
        buf[len] = '\0';
    res->output = buf;
    return 0;
}

int
kiwi_proc_check (const char *const *argv, const char *const *envp, const char *cwd, long timeout_ms,
                 kiwi_error_t *err)
{
    kiwi_proc_result r;
    if (kiwi_proc_run (argv, envp, cwd, timeout_ms, 2048, &r, err) < 0)
        return -1;
    int ok = r.exit_code == 0 && !r.timed_out;
    if (!ok) {
        size_t l = r.output ? strlen (r.output) : 0;
        while (l > 0 && (r.output[l - 1] == '\n' || r.output[l - 1] == ' '))
            r.output[--l] = '\0';
        if (r.timed_out)
            kiwi_error_make (err, 0, "`%s` timed out after %ld ms: %s", argv[0], timeout_ms,
                             r.output ? r.output : "");
        else
            kiwi_error_make (err, 0, "`%s` exited with status %d: %s", argv[0], r.exit_code,
                             r.output ? r.output : "");
    }
    kiwi_proc_result_clear (&r);
    return ok ? 0 : -1;
}

void
kiwi_proc_result_clear (kiwi_proc_result *r)
{
    free (r->output);
    r->output = NULL;
}
