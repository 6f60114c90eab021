/*
 * test_firecracker_proto.c: the agent protocol of the firecracker driver,
 * both ends talking.
 *
 * The host side (sandbox/firecracker/driver-conn.c) and the guest agent
 * (fc-agent/agent.c, compiled into this test) run on the two ends of a
 * socketpair, the agent in a forked process as in the guest: hello, exec
 * with streamed stdout/stderr, exit codes and signals, the whole
 * environment, the working directory, the deadline, the output tail, a
 * command that cannot run, the host hanging up, a guest that dies under a
 * command, put and get archives (and their errors), Firecracker's hybrid
 * vsock handshake, and the framing itself (split writes, bad headers,
 * oversized frames, truncated fields).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/firecracker/agent/agent.h"
#include "sandbox/archive/archive.h"
#include "sandbox/firecracker/firecracker-internal.h"
#include "sandbox/firecracker/agent/proto.h"
#include "skip.h"

static const kiwi_agent_config agent_cfg = { .default_user = NULL, .default_workdir = "/" };

/* An agent serving one request on the other end of *host. */
static pid_t
agent_on_pair (int *host)
{
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        close (sv[0]);
        int rc = kiwi_agent_serve (sv[1], &agent_cfg);
        close (sv[1]);
        _exit (rc < 0 ? 1 : 0);
    }
    close (sv[1]);
    *host = sv[0];
    return pid;
}

static void
finish (pid_t pid, int host)
{
    close (host);
    int st;
    assert_int_equal (waitpid (pid, &st, 0), pid);
}

typedef struct {
    kiwi_buf out, err;
} streams;

static void
collect (int stream, const char *data, size_t len, void *ud)
{
    streams *s = ud;
    kiwi_error_t e = NULL;
    assert_int_equal (kiwi_buf_append (stream == 1 ? &s->out : &s->err, data, len, &e), 0);
}

static void
clear_streams (streams *s)
{
    kiwi_buf_free (&s->out);
    kiwi_buf_free (&s->err);
}

/* Runs argv through a fresh agent. */
static int
run (const char *const *argv, const char *const *env, const char *workdir, int64_t timeout_ms, size_t cap,
     streams *s, kiwi_exec_result *res, kiwi_error_t *err)
{
    int host;
    pid_t pid = agent_on_pair (&host);
    kiwi__fc_exec_req req = { .argv = argv, .env = env, .workdir = workdir, .timeout_ms = timeout_ms };
    kiwi_exec_spec x = { .argv = argv, .output_cap = cap, .on_output = s ? collect : NULL, .userdata = s };
    int rc = kiwi__fc_exec (host, &req, &x, NULL, NULL, res, err);
    finish (pid, host);
    return rc;
}

/* Runs argv through a fresh agent (env and workdir as run() takes them,
 * 10 s, the whole output kept) and asserts its exit code and its output:
 * exactly output, or, with part, holding output. */
static void
expect_run (const char *const *argv, const char *const *env, const char *workdir, int exit_code, const char *output,
            bool part)
{
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (run (argv, env, workdir, 10000, 0, NULL, &r, &err), 0);
    assert_int_equal (r.exit_code, exit_code);
    if (part)
        assert_non_null (strstr (r.output, output));
    else
        assert_string_equal (r.output, output);
    kiwi_exec_result_clear (&r);
}

static void
test_hello (void **state)
{
    int host;
    pid_t pid = agent_on_pair (&host);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_hello (host, kiwi_fcp_now_ms () + 5000, &err), 0);
    finish (pid, host);
}

static void
test_exec_streams_and_exit_code (void **state)
{
    const char *argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; echo more; exit 3", NULL };
    streams s = { KIWI_BUF_INIT, KIWI_BUF_INIT };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (run (argv, NULL, NULL, 10000, 0, &s, &r, &err), 0);
    assert_int_equal (r.exit_code, 3);
    assert_false (r.timed_out);
    assert_false (r.sandbox_lost);
    assert_int_equal (s.out.len, 9);
    assert_memory_equal (s.out.data, "out\nmore\n", 9);
    assert_int_equal (s.err.len, 4);
    assert_memory_equal (s.err.data, "err\n", 4);
    assert_non_null (strstr (r.output, "out\n"));
    assert_non_null (strstr (r.output, "err\n"));
    assert_int_equal (r.output_dropped, 0);
    kiwi_exec_result_clear (&r);
    clear_streams (&s);
}

static void
test_exec_environment_is_whole (void **state)
{
    const char *argv[] = { "/usr/bin/env", NULL };
    const char *env[] = { "FOO=bar baz", NULL };
    expect_run (argv, env, NULL, 0, "FOO=bar baz\n", false);
}

static void
test_exec_workdir (void **state)
{
    char dir[] = "/tmp/kiwi-fcp-XXXXXX";
    assert_non_null (mkdtemp (dir));
    const char *argv[] = { "/bin/pwd", NULL };
    char want[64];
    snprintf (want, sizeof want, "%s\n", dir);
    expect_run (argv, NULL, dir, 0, want, false);
    /* a missing working directory is the command's failure, named */
    expect_run (argv, NULL, "/nonexistent/dir", 126, "cannot enter the working directory /nonexistent/dir", true);
    rmdir (dir);
}

static void
test_exec_timeout_kills (void **state)
{
    const char *argv[] = { "/bin/sh", "-c", "echo started; sleep 30; echo never", NULL };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    int64_t t0 = kiwi_fcp_now_ms ();
    assert_int_equal (run (argv, NULL, NULL, 300, 0, NULL, &r, &err), 0);
    assert_true (r.timed_out);
    assert_int_equal (r.exit_code, -1);
    assert_true (kiwi_fcp_now_ms () - t0 < 5000);
    assert_string_equal (r.output, "started\n");
    kiwi_exec_result_clear (&r);
}

static void
test_exec_command_not_found (void **state)
{
    const char *argv[] = { "kiwi-no-such-command", NULL };
    const char *env[] = { "PATH=/usr/bin:/bin", NULL };
    expect_run (argv, env, NULL, 127, "cannot run `kiwi-no-such-command`", true);
}

static void
test_exec_signal_and_tail (void **state)
{
    const char *argv[] = { "/bin/sh", "-c", "kill -9 $$", NULL };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (run (argv, NULL, NULL, 10000, 0, NULL, &r, &err), 0);
    assert_int_equal (r.exit_code, 137);
    kiwi_exec_result_clear (&r);

    const char *big[] = { "/bin/sh", "-c", "i=0; while [ $i -lt 10 ]; do printf 0123456789; i=$((i+1)); done; echo", NULL };
    assert_int_equal (run (big, NULL, NULL, 10000, 16, NULL, &r, &err), 0);
    assert_int_equal (r.exit_code, 0);
    assert_int_equal (strlen (r.output), 16);
    assert_string_equal (r.output, "567890123456789\n");
    assert_int_equal (r.output_dropped, 101 - 16);
    kiwi_exec_result_clear (&r);
}

static void
test_exec_empty_command_refused (void **state)
{
    int host;
    pid_t pid = agent_on_pair (&host);
    /* send an EXEC without arguments by hand: the agent answers ERROR */
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_fcp_send (host, KIWI_FCP_EXEC, NULL, 0, &err), 0);
    kiwi_fcp_frame f = { 0 };
    assert_int_equal (kiwi_fcp_recv (host, kiwi_fcp_now_ms () + 5000, &f, &err), 1);
    assert_int_equal (f.type, KIWI_FCP_ERROR);
    char *m = kiwi_fcp_get_str (&f, KIWI_FCF_MESSAGE);
    assert_string_equal (m, "exec: empty command");
    free (m);
    kiwi_fcp_frame_clear (&f);
    finish (pid, host);
}

static void
test_host_hangup_kills_command (void **state)
{
    char marker[] = "/tmp/kiwi-fcp-hangup-XXXXXX";
    int mfd = mkstemp (marker);
    assert_true (mfd >= 0);
    close (mfd);
    unlink (marker);
    char script[256];
    snprintf (script, sizeof script, "sleep 2; touch %s", marker);
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    int host;
    pid_t pid = agent_on_pair (&host);
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t err = NULL;
    for (size_t i = 0; argv[i]; i++)
        assert_int_equal (kiwi_fcp_put_str (&b, KIWI_FCF_ARG, argv[i], &err), 0);
    assert_int_equal (kiwi_fcp_send (host, KIWI_FCP_EXEC, b.data, b.len, &err), 0);
    kiwi_buf_free (&b);
    usleep (200000);
    close (host);
    int st;
    int64_t t0 = kiwi_fcp_now_ms ();
    assert_int_equal (waitpid (pid, &st, 0), pid);
    assert_true (kiwi_fcp_now_ms () - t0 < 1500);
    sleep (3);
    struct stat sb;
    assert_int_equal (stat (marker, &sb), -1); /* the command never got to touch it */
}

static bool
vm_gone (void *ud, char *why, size_t len)
{
    snprintf (why, len, "the microVM stopped (test)");
    return false;
}

static void
test_guest_dies_under_command (void **state)
{
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        /* a "guest" that takes the request, says a word and dies */
        kiwi_fcp_frame f = { 0 };
        kiwi_error_t e = NULL;
        kiwi_fcp_recv (sv[1], 0, &f, &e);
        kiwi_fcp_send (sv[1], KIWI_FCP_STDOUT, "partial\n", 8, &e);
        _exit (0);
    }
    close (sv[1]);
    const char *argv[] = { "true", NULL };
    kiwi__fc_exec_req req = { .argv = argv };
    kiwi_exec_spec x = { .argv = argv };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_exec (sv[0], &req, &x, vm_gone, NULL, &r, &err), 0);
    assert_true (r.sandbox_lost);
    assert_string_equal (r.lost_reason, "the microVM stopped (test)");
    assert_int_equal (r.exit_code, -1);
    assert_string_equal (r.output, "partial\n");
    kiwi_exec_result_clear (&r);
    finish (pid, sv[0]);
}

static void
test_connection_lost_while_vm_lives_is_error (void **state)
{
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        kiwi_fcp_frame f = { 0 };
        kiwi_error_t e = NULL;
        kiwi_fcp_recv (sv[1], 0, &f, &e);
        _exit (0);
    }
    close (sv[1]);
    const char *argv[] = { "true", NULL };
    kiwi__fc_exec_req req = { .argv = argv };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_exec (sv[0], &req, NULL, NULL, NULL, &r, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_GONE);
    assert_non_null (strstr (kiwi_error_msg (err), "closed the connection during `true`"));
    kiwi_error_free (&err);
    finish (pid, sv[0]);
}

typedef struct {
    kiwi_buf tar;
} tar_sink;

static int
tar_collect (const char *data, size_t len, void *ud)
{
    tar_sink *t = ud;
    kiwi_error_t e = NULL;
    assert_int_equal (kiwi_buf_append (&t->tar, data, len, &e), 0);
    return 0;
}

typedef struct {
    int files;
    bool seen;
} list_ctx;

static int
find_entry (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    list_ctx *c = ud;
    if (e->type == KIWI_TAR_FILE) {
        c->files++;
        if (strcmp (e->name, "a/sub/b.txt") == 0 && e->size == 5 && memcmp (e->data, "hello", 5) == 0)
            c->seen = true;
    }
    return 0;
}

static void
test_put_get_round_trip (void **state)
{
    char dir[] = "/tmp/kiwi-fcp-XXXXXX";
    assert_non_null (mkdtemp (dir));
    kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_add_dir (&tar, "a", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&tar, "a/sub/b.txt", "hello", 5, 0644, &o, &err), 0);
    /* bigger than one DATA chunk */
    size_t big = 3 * KIWI_FCP_CHUNK + 17;
    char *blob = malloc (big);
    for (size_t i = 0; i < big; i++)
        blob[i] = (char) (i * 7);
    assert_int_equal (kiwi_archive_add_file (&tar, "a/big.bin", blob, big, 0600, &o, &err), 0);
    assert_int_equal (kiwi_archive_finish (&tar, &err), 0);

    int host;
    pid_t pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_put (host, dir, NULL, tar.data, tar.len, kiwi_fcp_now_ms () + 10000, &err), 0);
    finish (pid, host);
    kiwi_buf_free (&tar);

    char path[256];
    snprintf (path, sizeof path, "%s/a/big.bin", dir);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, (off_t) big);

    snprintf (path, sizeof path, "%s/a", dir);
    tar_sink t = { KIWI_BUF_INIT };
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_get (host, path, tar_collect, &t, kiwi_fcp_now_ms () + 10000, &err), 0);
    finish (pid, host);
    list_ctx c = { 0 };
    assert_int_equal (kiwi_archive_list (t.tar.data, t.tar.len, find_entry, &c, &err), 0);
    assert_int_equal (c.files, 2);
    assert_true (c.seen);
    kiwi_buf_free (&t.tar);

    /* a single file comes out under its own name */
    snprintf (path, sizeof path, "%s/a/sub/b.txt", dir);
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_get (host, path, tar_collect, &t, kiwi_fcp_now_ms () + 10000, &err), 0);
    finish (pid, host);
    kiwi_tar_reader rd;
    kiwi_tar_entry e;
    kiwi_tar_reader_init (&rd, t.tar.data, t.tar.len);
    assert_int_equal (kiwi_tar_reader_next (&rd, &e, &err), 1);
    assert_string_equal (e.name, "b.txt");
    kiwi_tar_reader_clear (&rd);
    kiwi_buf_free (&t.tar);
    free (blob);

    char cmd[300];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal (system (cmd), 0);
}

static void
test_put_and_get_errors (void **state)
{
    kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_add_file (&tar, "x", "1", 1, 0644, &o, &err), 0);
    assert_int_equal (kiwi_archive_finish (&tar, &err), 0);
    int host;
    pid_t pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_put (host, "/nonexistent/dir", NULL, tar.data, tar.len, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "the guest agent says: put: no directory /nonexistent/dir"));
    kiwi_error_free (&err);
    finish (pid, host);

    /* a truncated archive writes nothing and is named */
    char dir[] = "/tmp/kiwi-fcp-XXXXXX";
    assert_non_null (mkdtemp (dir));
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_put (host, dir, NULL, tar.data, 700, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "put: unpacking into"));
    kiwi_error_free (&err);
    finish (pid, host);
    char x[300];
    snprintf (x, sizeof x, "%s/x", dir);
    assert_int_equal (access (x, F_OK), -1);
    rmdir (dir);
    kiwi_buf_free (&tar);

    tar_sink t = { KIWI_BUF_INIT };
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_get (host, "/nonexistent/path", tar_collect, &t, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "/nonexistent/path"));
    kiwi_error_free (&err);
    finish (pid, host);
    assert_int_equal (t.tar.len, 0);
}

/* The sandbox user: commands run as it, unpacked files belong to it and
 * go nowhere it could not write. Needs root to switch users. */
static void
test_user_switch (void **state)
{
    if (geteuid () != 0)
        KIWI_SKIP ("switching users needs root");
    const char *argv[] = { "/bin/sh", "-c", "echo $(id -u):$(id -g)", NULL };
    int host;
    pid_t pid = agent_on_pair (&host);
    kiwi__fc_exec_req req = { .argv = argv, .user = "65534:65534", .timeout_ms = 10000 };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_exec (host, &req, NULL, NULL, NULL, &r, &err), 0);
    assert_string_equal (r.output, "65534:65534\n");
    kiwi_exec_result_clear (&r);
    finish (pid, host);

    char dir[] = "/tmp/kiwi-fcp-user-XXXXXX";
    assert_non_null (mkdtemp (dir));
    chmod (dir, 0755);
    kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    assert_int_equal (kiwi_archive_add_file (&tar, "f", "x", 1, 0644, &o, &err), 0);
    assert_int_equal (kiwi_archive_finish (&tar, &err), 0);
    /* root's directory: the user cannot write there */
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_put (host, dir, "65534:65534", tar.data, tar.len, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "Permission denied"));
    kiwi_error_free (&err);
    finish (pid, host);
    /* the user's own directory: the file is the user's */
    assert_int_equal (chown (dir, 65534, 65534), 0);
    pid = agent_on_pair (&host);
    assert_int_equal (kiwi__fc_put (host, dir, "65534:65534", tar.data, tar.len, 0, &err), 0);
    finish (pid, host);
    char f[300];
    snprintf (f, sizeof f, "%s/f", dir);
    struct stat st;
    assert_int_equal (stat (f, &st), 0);
    assert_int_equal (st.st_uid, 65534);
    assert_int_equal (st.st_gid, 65534);
    kiwi_buf_free (&tar);
    unlink (f);
    rmdir (dir);
}

/* A stand-in for Firecracker's host side of a hybrid vsock device: reads
 * "CONNECT <port>\n", answers "OK <n>\n" and hands the stream to the
 * agent. */
static void
test_hybrid_vsock_handshake (void **state)
{
    char dir[] = "/tmp/kiwi-fcp-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char uds[100];
    snprintf (uds, sizeof uds, "%s/vsock.sock", dir);
    int l = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf (a.sun_path, sizeof a.sun_path, "%s", uds);
    assert_int_equal (bind (l, (struct sockaddr *) &a, sizeof a), 0);
    assert_int_equal (listen (l, 4), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        for (int round = 0; round < 2; round++) {
            int c = accept (l, NULL, NULL);
            char line[64];
            size_t n = 0;
            while (n < sizeof line - 1 && read (c, line + n, 1) == 1 && line[n] != '\n')
                n++;
            line[n] = '\0';
            if (round == 0) {
                /* nothing listens on that port yet: Firecracker closes */
                close (c);
                continue;
            }
            if (strcmp (line, "CONNECT 5252") != 0)
                _exit (3);
            if (write (c, "OK 1073741824\n", 14) != 14)
                _exit (4);
            kiwi_agent_serve (c, &agent_cfg);
            close (c);
        }
        _exit (0);
    }
    close (l);
    int fd = -1;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__fc_vsock_connect (uds, KIWI_FCP_PORT, kiwi_fcp_now_ms () + 5000, &fd, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_GONE);
    assert_non_null (strstr (kiwi_error_msg (err), "not listening yet"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi__fc_vsock_connect (uds, KIWI_FCP_PORT, kiwi_fcp_now_ms () + 5000, &fd, &err), 0);
    assert_int_equal (kiwi__fc_hello (fd, kiwi_fcp_now_ms () + 5000, &err), 0);
    close (fd);
    int st;
    assert_int_equal (waitpid (pid, &st, 0), pid);
    assert_true (WIFEXITED (st) && WEXITSTATUS (st) == 0);
    unlink (uds);
    rmdir (dir);
}

static void
test_framing (void **state)
{
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    kiwi_error_t err = NULL;
    kiwi_fcp_frame f = { 0 };
    /* a frame written a byte at a time arrives whole */
    unsigned char raw[] = { 'k', 0, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c' };
    for (size_t i = 0; i < sizeof raw; i++)
        assert_int_equal (write (sv[1], raw + i, 1), 1);
    assert_int_equal (kiwi_fcp_recv (sv[0], kiwi_fcp_now_ms () + 1000, &f, &err), 1);
    assert_int_equal (f.type, KIWI_FCP_OK);
    assert_int_equal (f.len, 3);
    assert_string_equal (f.payload, "abc");
    /* nothing more: the deadline */
    assert_int_equal (kiwi_fcp_recv (sv[0], kiwi_fcp_now_ms () + 100, &f, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_FCP_ETIMEDOUT);
    kiwi_error_free (&err);
    /* an unknown type */
    unsigned char bad[] = { 'Z', 0, 0, 0, 0, 0, 0, 0 };
    assert_int_equal (write (sv[1], bad, sizeof bad), (ssize_t) sizeof bad);
    assert_int_equal (kiwi_fcp_recv (sv[0], 0, &f, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_FCP_EPROTO);
    assert_non_null (strstr (kiwi_error_msg (err), "not a Kiwi agent?"));
    kiwi_error_free (&err);
    /* an oversized length */
    unsigned char huge[] = { 'd', 0, 0, 0, 0x7f, 0xff, 0xff, 0xff };
    assert_int_equal (write (sv[1], huge, sizeof huge), (ssize_t) sizeof huge);
    assert_int_equal (kiwi_fcp_recv (sv[0], 0, &f, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "over the maximum"));
    kiwi_error_free (&err);
    /* the sender refuses one too */
    assert_int_equal (kiwi_fcp_send (sv[1], KIWI_FCP_DATA, "", KIWI_FCP_MAX_PAYLOAD + 1, &err), -1);
    kiwi_error_free (&err);
    /* a stream cut inside a frame */
    unsigned char cut[] = { 'd', 0, 0, 0, 0, 0, 0, 10, 'x' };
    assert_int_equal (write (sv[1], cut, sizeof cut), (ssize_t) sizeof cut);
    close (sv[1]);
    assert_int_equal (kiwi_fcp_recv (sv[0], 0, &f, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "ended inside a frame"));
    kiwi_error_free (&err);
    /* and a clean end */
    assert_int_equal (kiwi_fcp_recv (sv[0], 0, &f, &err), 0);
    close (sv[0]);
    kiwi_fcp_frame_clear (&f);
}

static void
test_fields (void **state)
{
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_fcp_put_str (&b, KIWI_FCF_ARG, "ls", &err), 0);
    assert_int_equal (kiwi_fcp_put_str (&b, KIWI_FCF_ARG, "-l", &err), 0);
    assert_int_equal (kiwi_fcp_put_int (&b, KIWI_FCF_TIMEOUT_MS, 1500, &err), 0);
    assert_int_equal (kiwi_fcp_put_field (&b, 'Q', "future", 6, &err), 0); /* unknown tags are skipped */
    kiwi_fcp_frame f = { .type = KIWI_FCP_EXEC, .payload = b.data, .len = b.len };
    assert_int_equal (kiwi_fcp_get_int (&f, KIWI_FCF_TIMEOUT_MS, -1), 1500);
    assert_int_equal (kiwi_fcp_get_int (&f, KIWI_FCF_NPROC, -1), -1);
    char *first = kiwi_fcp_get_str (&f, KIWI_FCF_ARG);
    assert_string_equal (first, "ls");
    free (first);
    size_t pos = 0;
    int tag, n = 0;
    const char *v;
    size_t vl;
    while (kiwi_fcp_next_field (b.data, b.len, &pos, &tag, &v, &vl, &err) == 1)
        n++;
    assert_int_equal (n, 4);
    /* a field that claims more bytes than its frame has */
    pos = 0;
    assert_int_equal (kiwi_fcp_next_field (b.data, 6, &pos, &tag, &v, &vl, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "field arg of 2 bytes runs past its frame"));
    kiwi_error_free (&err);
    kiwi_buf_free (&b);
    assert_string_equal (kiwi_fcp_type_str (KIWI_FCP_EXIT), "exit");
    assert_string_equal (kiwi_fcp_field_str (KIWI_FCF_OOM), "oom");
}

static void
test_resolve_user (void **state)
{
    char root[] = "/tmp/kiwi-fcp-root-XXXXXX";
    assert_non_null (mkdtemp (root));
    char p[300];
    snprintf (p, sizeof p, "%s/etc", root);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/etc/passwd", root);
    FILE *f = fopen (p, "w");
    fputs ("root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n", f);
    fclose (f);
    snprintf (p, sizeof p, "%s/etc/group", root);
    f = fopen (p, "w");
    fputs ("root:x:0:\nstaff:x:50:\n", f);
    fclose (f);
    uid_t u;
    gid_t g;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_agent_resolve_user (root, "1000:1000", &u, &g, &err), 0);
    assert_true (u == 1000 && g == 1000);
    assert_int_equal (kiwi_agent_resolve_user (root, "1234", &u, &g, &err), 0);
    assert_true (u == 1234 && g == 1234);
    assert_int_equal (kiwi_agent_resolve_user (root, "node", &u, &g, &err), 0);
    assert_true (u == 1000 && g == 1000);
    assert_int_equal (kiwi_agent_resolve_user (root, "node:staff", &u, &g, &err), 0);
    assert_true (u == 1000 && g == 50);
    assert_int_equal (kiwi_agent_resolve_user (root, "nobody-here", &u, &g, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "unknown user `nobody-here`"));
    kiwi_error_free (&err);
    char cmd[300];
    snprintf (cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal (system (cmd), 0);
}

/* The real agent executable, serving a unix socket (--unix) instead of
 * vsock: its accept loop, one forked process per connection. */
static void
test_agent_binary_serves (void **state)
{
    char dir[] = "/tmp/kiwi-fcp-bin-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char sock[100];
    snprintf (sock, sizeof sock, "%s/agent.sock", dir);
    pid_t pid = fork ();
    if (pid == 0) {
        execl (KIWI_FC_AGENT_BIN, "kiwi-fc-agent", "--unix", sock, "--workdir", "/", (char *) NULL);
        _exit (127);
    }
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf (a.sun_path, sizeof a.sun_path, "%s", sock);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = -1;
        for (int tries = 0; tries < 200 && fds[i] < 0; tries++) {
            int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (connect (fd, (struct sockaddr *) &a, sizeof a) == 0)
                fds[i] = fd;
            else {
                close (fd);
                usleep (10000);
            }
        }
        assert_true (fds[i] >= 0);
    }
    kiwi_error_t err = NULL;
    /* three connections at once: each has its own process */
    const char *argv[] = { "/bin/sh", "-c", "sleep 0.3; echo from-$0", "agent", NULL };
    kiwi__fc_exec_req req = { .argv = argv, .timeout_ms = 10000 };
    kiwi_exec_result r1, r2;
    assert_int_equal (kiwi__fc_hello (fds[0], kiwi_fcp_now_ms () + 5000, &err), 0);
    assert_int_equal (kiwi__fc_exec (fds[1], &req, NULL, NULL, NULL, &r1, &err), 0);
    assert_int_equal (kiwi__fc_exec (fds[2], &req, NULL, NULL, NULL, &r2, &err), 0);
    assert_string_equal (r1.output, "from-agent\n");
    assert_int_equal (r2.exit_code, 0);
    kiwi_exec_result_clear (&r1);
    kiwi_exec_result_clear (&r2);
    for (int i = 0; i < 3; i++)
        close (fds[i]);
    kill (pid, SIGKILL);
    waitpid (pid, NULL, 0);
    unlink (sock);
    rmdir (dir);
}

int
main (void)
{
    signal (SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hello),
        cmocka_unit_test (test_exec_streams_and_exit_code),
        cmocka_unit_test (test_exec_environment_is_whole),
        cmocka_unit_test (test_exec_workdir),
        cmocka_unit_test (test_exec_timeout_kills),
        cmocka_unit_test (test_exec_command_not_found),
        cmocka_unit_test (test_exec_signal_and_tail),
        cmocka_unit_test (test_exec_empty_command_refused),
        cmocka_unit_test (test_host_hangup_kills_command),
        cmocka_unit_test (test_guest_dies_under_command),
        cmocka_unit_test (test_connection_lost_while_vm_lives_is_error),
        cmocka_unit_test (test_put_get_round_trip),
        cmocka_unit_test (test_put_and_get_errors),
        cmocka_unit_test (test_user_switch),
        cmocka_unit_test (test_hybrid_vsock_handshake),
        cmocka_unit_test (test_framing),
        cmocka_unit_test (test_fields),
        cmocka_unit_test (test_resolve_user),
        cmocka_unit_test (test_agent_binary_serves),
    };
    return kiwi_run_group ("firecracker_proto", tests, NULL, NULL);
}
