/*
 * driver-conn.c: the host side of the agent protocol
 * (fc-agent/proto.h): reaching the guest through Firecracker's hybrid
 * vsock socket, and the exec, put, get and hello requests over a connected
 * descriptor. Nothing here knows about Firecracker processes, so the tests
 * drive it over a socketpair with the agent on the other end.
 */
#include "sandbox/firecracker/firecracker-internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/tail.h"
#include "sandbox/firecracker/agent/proto.h"

int
kiwi__fc_vsock_connect (const char *uds_path, unsigned port, int64_t deadline_ms, int *out, kiwi_error_t *err)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen (uds_path) >= sizeof a.sun_path)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "vsock socket path too long: %s", uds_path);
    snprintf (a.sun_path, sizeof a.sun_path, "%s", uds_path);
    cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return kiwi_error_make (err, errno, "vsock: socket");
    if (connect (fd, (struct sockaddr *) &a, sizeof a) < 0)
        return kiwi_error_make (err, errno, "connecting to %s", uds_path);
    char req[32];
    int n = snprintf (req, sizeof req, "CONNECT %u\n", port);
    if (send (fd, req, (size_t) n, MSG_NOSIGNAL) != n)
        return kiwi_error_make (err, errno, "vsock: sending CONNECT to %s", uds_path);
    /* the answer is one line, "OK <host port>\n"; read it byte by byte so
     * nothing of the agent's stream is consumed */
    char line[64];
    size_t len = 0;
    for (;;) {
        int64_t left = deadline_ms > 0 ? deadline_ms - kiwi_fcp_now_ms () : 1000;
        if (left <= 0)
            return kiwi_error_make_code (err, KIWI_FCP_ETIMEDOUT, "vsock: no answer to CONNECT %u", port);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int pr = poll (&p, 1, left > 1000 ? 1000 : (int) left);
        if (pr < 0 && errno != EINTR)
            return kiwi_error_make (err, errno, "vsock: waiting for CONNECT");
        if (pr <= 0)
            continue;
        char c;
        ssize_t r = read (fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return kiwi_error_make_code (err, KIWI_SBE_GONE,
                                         "vsock: port %u refused (the guest agent is not listening yet)", port);
        if (c == '\n')
            break;
        if (len + 1 >= sizeof line)
            return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "vsock: over-long answer to CONNECT");
        line[len++] = c;
    }
    line[len] = '\0';
    if (strncmp (line, "OK ", 3) != 0)
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "vsock: CONNECT %u answered `%s`", port, line);
    *out = get_and_reset (&fd);
    return 0;
}

/* Turns an ERROR frame into *err. */
static int
agent_error (const kiwi_fcp_frame *f, const char *what, kiwi_error_t *err)
{
    cleanup_free char *msg = kiwi_fcp_get_str (f, KIWI_FCF_MESSAGE);
    int en = (int) kiwi_fcp_get_int (f, KIWI_FCF_ERRNO, 0);
    int code = en == ENOSPC ? KIWI_SBE_DISK : KIWI_SBE_INVALID;
    return kiwi_error_make_code (err, code, "%s: the guest agent says: %s", what, msg ? msg : "(no message)");
}

int
kiwi__fc_hello (int fd, int64_t deadline_ms, kiwi_error_t *err)
{
    if (kiwi_fcp_send (fd, KIWI_FCP_HELLO, NULL, 0, err) < 0)
        return -1;
    kiwi_fcp_frame f = { 0 };
    int rc = kiwi_fcp_recv (fd, deadline_ms, &f, err);
    if (rc == 0)
        rc = kiwi_error_make_code (err, KIWI_SBE_GONE, "the guest agent closed the connection");
    else if (rc > 0 && f.type != KIWI_FCP_OK)
        rc = f.type == KIWI_FCP_ERROR ? agent_error (&f, "hello", err)
                                      : kiwi_error_make_code (err, KIWI_FCP_EPROTO, "hello answered with %s",
                                                              kiwi_fcp_type_str (f.type));
    else if (rc > 0) {
        cleanup_free char *v = kiwi_fcp_get_str (&f, KIWI_FCF_VERSION);
        rc = v && strcmp (v, KIWI_FCP_VERSION) == 0
                 ? 0
                 : kiwi_error_make_code (err, KIWI_FCP_EPROTO, "the guest agent speaks protocol %s, Kiwi speaks %s "
                                         "(rebuild the root filesystem with ops/firecracker/mkrootfs.sh)",
                                         v ? v : "?", KIWI_FCP_VERSION);
    }
    kiwi_fcp_frame_clear (&f);
    return rc;
}

static int
exec_request (const kiwi__fc_exec_req *req, kiwi_buf *b, kiwi_error_t *err)
{
    for (size_t i = 0; req->argv[i]; i++)
        if (kiwi_fcp_put_str (b, KIWI_FCF_ARG, req->argv[i], err) < 0)
            return -1;
    for (size_t i = 0; req->env && req->env[i]; i++)
        if (kiwi_fcp_put_str (b, KIWI_FCF_ENV, req->env[i], err) < 0)
            return -1;
    if (req->workdir && kiwi_fcp_put_str (b, KIWI_FCF_WORKDIR, req->workdir, err) < 0)
        return -1;
    if (req->user && kiwi_fcp_put_str (b, KIWI_FCF_USER, req->user, err) < 0)
        return -1;
    if (req->timeout_ms > 0 && kiwi_fcp_put_int (b, KIWI_FCF_TIMEOUT_MS, req->timeout_ms, err) < 0)
        return -1;
    if (req->nproc > 0 && kiwi_fcp_put_int (b, KIWI_FCF_NPROC, req->nproc, err) < 0)
        return -1;
    return 0;
}

int
kiwi__fc_exec (int fd, const kiwi__fc_exec_req *req, const kiwi_exec_spec *x, kiwi__fc_alive_fn alive,
               void *alive_ud, kiwi_exec_result *res, kiwi_error_t *err)
{
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (req->argv == NULL || req->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "exec: empty command");
    int64_t t0 = kiwi_fcp_now_ms ();
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    if (exec_request (req, &b, err) < 0)
        return -1;
    if (b.len > KIWI_FCP_MAX_PAYLOAD)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "exec: command and environment of %zu bytes are over "
                                     "the protocol's %zu", b.len, KIWI_FCP_MAX_PAYLOAD);
    if (kiwi_fcp_send (fd, KIWI_FCP_EXEC, b.data, b.len, err) < 0)
        return kiwi_error_wrap (err, "sending `%s` to the guest agent", req->argv[0]);
    kiwi_tailbuf tail;
    if (kiwi_tailbuf_init (&tail, x && x->output_cap ? x->output_cap : 65536) < 0)
        return kiwi_error_make (err, ENOMEM, "exec output buffer");
    int64_t deadline = req->timeout_ms > 0 ? t0 + req->timeout_ms + KIWI_FC_EXEC_GRACE_MS : 0;
    kiwi_fcp_frame f = { 0 };
    int rc = 0;
    bool done = false;
    while (!done) {
        int64_t now = kiwi_fcp_now_ms ();
        if (deadline && now >= deadline) {
            res->timed_out = true;
            break;
        }
        int64_t step = now + 1000;
        if (deadline && deadline < step)
            step = deadline;
        kiwi_error_t e = NULL;
        int r = kiwi_fcp_recv (fd, step, &f, &e);
        if (r < 0 && kiwi_error_code (e) == KIWI_FCP_ETIMEDOUT) {
            kiwi_error_free (&e);
            char why[160] = "";
            if (alive && !alive (alive_ud, why, sizeof why)) {
                res->sandbox_lost = true;
                snprintf (res->lost_reason, sizeof res->lost_reason, "%s", why);
                break;
            }
            continue;
        }
        if (r <= 0) {
            char why[160] = "";
            /* the stream ended without an exit status: a dead microVM is
             * the command's result, anything else is a failure */
            for (int i = 0; alive && i < 20; i++) {
                if (!alive (alive_ud, why, sizeof why)) {
                    res->sandbox_lost = true;
                    snprintf (res->lost_reason, sizeof res->lost_reason, "%s", why);
                    break;
                }
                usleep (100000);
            }
            if (!res->sandbox_lost) {
                if (r == 0)
                    kiwi_error_make_code (err, KIWI_SBE_GONE, "the guest agent closed the connection during `%s`",
                                          req->argv[0]);
                else
                    *err = kiwi_error_steal (&e);
                rc = -1;
            }
            kiwi_error_free (&e);
            break;
        }
        switch (f.type) {
        case KIWI_FCP_STDOUT:
        case KIWI_FCP_STDERR: {
            int stream = f.type == KIWI_FCP_STDOUT ? 1 : 2;
            kiwi_tailbuf_write (&tail, f.payload, f.len);
            if (x && x->on_output)
                x->on_output (stream, f.payload, f.len, x->userdata);
            break;
        }
        case KIWI_FCP_EXIT:
            res->timed_out = kiwi_fcp_get_int (&f, KIWI_FCF_TIMED_OUT, 0) != 0;
            res->oom_killed = kiwi_fcp_get_int (&f, KIWI_FCF_OOM, 0) != 0;
            res->exit_code = res->timed_out ? -1 : (int) kiwi_fcp_get_int (&f, KIWI_FCF_CODE, -1);
            done = true;
            break;
        case KIWI_FCP_ERROR:
            rc = agent_error (&f, req->argv[0], err);
            done = true;
            break;
        default:
            rc = kiwi_error_make_code (err, KIWI_FCP_EPROTO, "exec: unexpected %s frame from the guest agent",
                                       kiwi_fcp_type_str (f.type));
            done = true;
        }
    }
    kiwi_fcp_frame_clear (&f);
    res->output = kiwi_tailbuf_dup (&tail);
    res->output_dropped = tail.dropped;
    kiwi_tailbuf_clear (&tail);
    res->duration_ms = kiwi_fcp_now_ms () - t0;
    if (rc < 0)
        kiwi_exec_result_clear (res);
    return rc;
}

int
kiwi__fc_put (int fd, const char *dir, const char *user, const void *tar, size_t len, int64_t deadline_ms,
              kiwi_error_t *err)
{
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    if (kiwi_fcp_put_str (&b, KIWI_FCF_PATH, dir, err) < 0)
        return -1;
    if (user && kiwi_fcp_put_str (&b, KIWI_FCF_USER, user, err) < 0)
        return -1;
    if (kiwi_fcp_send (fd, KIWI_FCP_PUT, b.data, b.len, err) < 0)
        return -1;
    const char *p = tar;
    for (size_t off = 0; off < len; off += KIWI_FCP_CHUNK) {
        size_t n = len - off < KIWI_FCP_CHUNK ? len - off : KIWI_FCP_CHUNK;
        if (kiwi_fcp_send (fd, KIWI_FCP_DATA, p + off, n, err) < 0)
            return -1;
    }
    if (kiwi_fcp_send (fd, KIWI_FCP_DATA, NULL, 0, err) < 0)
        return -1;
    kiwi_fcp_frame f = { 0 };
    int rc = kiwi_fcp_recv (fd, deadline_ms, &f, err);
    if (rc == 0)
        rc = kiwi_error_make_code (err, KIWI_SBE_GONE, "the guest agent closed the connection");
    else if (rc > 0)
        rc = f.type == KIWI_FCP_OK      ? 0
             : f.type == KIWI_FCP_ERROR ? agent_error (&f, "copying files in", err)
                                        : kiwi_error_make_code (err, KIWI_FCP_EPROTO, "put answered with %s",
                                                                kiwi_fcp_type_str (f.type));
    kiwi_fcp_frame_clear (&f);
    return rc;
}

int
kiwi__fc_get (int fd, const char *path, kiwi_archive_sink sink, void *userdata, int64_t deadline_ms, kiwi_error_t *err)
{
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    if (kiwi_fcp_put_str (&b, KIWI_FCF_PATH, path, err) < 0)
        return -1;
    if (kiwi_fcp_send (fd, KIWI_FCP_GET, b.data, b.len, err) < 0)
        return -1;
    kiwi_fcp_frame f = { 0 };
    int rc;
    for (;;) {
        rc = kiwi_fcp_recv (fd, deadline_ms, &f, err);
        if (rc == 0) {
            rc = kiwi_error_make_code (err, KIWI_SBE_GONE, "the guest agent closed the connection");
            break;
        }
        if (rc < 0)
            break;
        if (f.type == KIWI_FCP_DATA && f.len == 0) {
            rc = 0;
            break;
        }
        if (f.type == KIWI_FCP_DATA) {
            if (sink (f.payload, f.len, userdata) < 0) {
                rc = kiwi_error_make_code (err, KIWI_SBE_STOPPED, "copying %s out: stopped by the receiver", path);
                break;
            }
            continue;
        }
        rc = f.type == KIWI_FCP_ERROR ? agent_error (&f, path, err)
                                      : kiwi_error_make_code (err, KIWI_FCP_EPROTO, "get answered with %s",
                                                              kiwi_fcp_type_str (f.type));
        break;
    }
    kiwi_fcp_frame_clear (&f);
    return rc;
}
