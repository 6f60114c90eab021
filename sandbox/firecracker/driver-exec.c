/*
 * driver-exec.c: the firecracker driver's exec, put_archive and
 * get_archive (see firecracker-internal.h): one fresh vsock
 * connection to the guest agent per request, the sandbox's environment
 * merged under the command's, and a deadline that ends the microVM.
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

static int
gone_error (kiwi__fc_sb *s, kiwi_error_t *err)
{
    char why[400];
    kiwi__fc_describe_exit (s, why, sizeof why);
    return kiwi_error_make_code (err, KIWI_SBE_GONE, "sandbox %s is gone: %s", s->name, why);
}

/* A fresh connection to the agent. */
static int
connect_agent (kiwi__fc_sb *s, int *fd, kiwi_error_t *err)
{
    if (!kiwi__fc_vm_alive (s))
        return gone_error (s, err);
    if (kiwi__fc_vsock_connect (s->vsock_uds, KIWI_FCP_PORT, kiwi_fcp_now_ms () + 10000, fd, err) < 0) {
        if (!kiwi__fc_vm_alive (s)) {
            kiwi_error_free (err);
            return gone_error (s, err);
        }
        return kiwi_error_wrap (err, "reaching the guest agent of sandbox %s", s->name);
    }
    return 0;
}

static size_t
key_len (const char *kv)
{
    const char *eq = strchr (kv, '=');
    return eq ? (size_t) (eq - kv) : strlen (kv);
}

/* The sandbox's environment with the command's own on top (same keys
 * replaced, as Docker's exec does). */
int
kiwi__fc_merge_env (const kiwi_strv *base, const char *const *extra, kiwi_strv *out)
{
    for (size_t i = 0; i < base->n; i++) {
        bool overridden = false;
        for (size_t j = 0; extra && extra[j] && !overridden; j++)
            overridden = key_len (extra[j]) == key_len (base->v[i])
                         && strncmp (extra[j], base->v[i], key_len (base->v[i])) == 0;
        if (!overridden && kiwi_strv_add (out, base->v[i]) < 0)
            return -1;
    }
    for (size_t j = 0; extra && extra[j]; j++)
        if (kiwi_strv_add (out, extra[j]) < 0)
            return -1;
    return 0;
}

int
kiwi__fc_op_exec (void *sb, const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    kiwi__fc_sb *s = sb;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (x->argv == NULL || x->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "exec in sandbox %s: empty command", s->name);
    cleanup_strv kiwi_strv env = KIWI_STRV_INIT;
    if (kiwi__fc_merge_env (&s->env, x->env, &env) < 0)
        return kiwi_error_make (err, ENOMEM, "exec environment");
    cleanup_close int fd = -1;
    if (connect_agent (s, &fd, err) < 0)
        return -1;
    kiwi__fc_exec_req req = {
        .argv = x->argv,
        .env = kiwi_strv_list (&env),
        .workdir = x->workdir ? x->workdir : KIWI_SANDBOX_SRC,
        .user = s->user,
        .timeout_ms = x->timeout_ms,
        .nproc = s->pids,
    };
    if (kiwi__fc_exec (fd, &req, x, kiwi__fc_alive, s, res, err) < 0)
        return kiwi_error_wrap (err, "running `%s` in sandbox %s", x->argv[0], s->name);
    if (res->timed_out) {
        /* a deadline ends the sandbox, as with the other drivers */
        s->killed = true;
        kiwi__fc_kill_vm (s);
    }
    return 0;
}

int
kiwi__fc_op_put_archive (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err)
{
    kiwi__fc_sb *s = sb;
    cleanup_close int fd = -1;
    if (connect_agent (s, &fd, err) < 0)
        return -1;
    if (kiwi__fc_put (fd, dir, s->user, tar, len, kiwi_fcp_now_ms () + 300000, err) < 0)
        return kiwi_error_wrap (err, "copying files into sandbox %s at %s", s->name, dir);
    return 0;
}

int
kiwi__fc_op_get_archive (void *sb, const char *path, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err)
{
    kiwi__fc_sb *s = sb;
    cleanup_close int fd = -1;
    if (connect_agent (s, &fd, err) < 0)
        return -1;
    if (kiwi__fc_get (fd, path, sink, userdata, kiwi_fcp_now_ms () + 300000, err) < 0)
        return kiwi_error_wrap (err, "copying %s out of sandbox %s", path, s->name);
    return 0;
}
