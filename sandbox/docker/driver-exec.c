/*
 * driver-exec.c: running commands in a Docker or gVisor sandbox and
 * copying files in and out (see docker-internal.h): the exec API
 * with its output demultiplexed into a bounded tail, deadlines, cancels
 * and the sandbox dying under a command; the one-shot container whose
 * first process is the command; tar archives through the archive API.
 */
#include "sandbox/docker/docker-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "sandbox/docker/disk.h"
#include "sandbox/docker/docker-api.h"
#include "common/tail.h"
#include "sandbox/docker/docker-stream.h"
#include "common/log.h"
#include "sandbox/docker/resolv.h"

static int
archive_path (kiwi__docker_sb *s, const char *verb_path, const char *inner, char *out, size_t outsz,
              kiwi_error_t *err)
{
    cleanup_free char *enc = kiwi_docker_urlencode (s->p->api, inner);
    if (enc == NULL)
        return kiwi_error_make (err, ENOMEM, "encoding %s", inner);
    int n = snprintf (out, outsz, "/containers/%s/%s?path=%s", s->id, verb_path, enc);
    if (n < 0 || (size_t) n >= outsz)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "path too long: %s", inner);
    return 0;
}

int
kiwi__docker_put_archive (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err)
{
    kiwi__docker_sb *s = sb;
    char path[8192];
    if (archive_path (s, "archive", dir, path, sizeof path, err) < 0)
        return -1;
    kiwi_docker_response r;
    if (kiwi_docker_request (s->p->api, "PUT", path, "application/x-tar", tar, len, 300000, &r, err) < 0)
        return kiwi_error_wrap (err, "copying files into sandbox %s", s->name);
    int ok = r.status >= 200 && r.status < 300;
    if (!ok) {
        json_error_t je;
        json_t *j = json_loadb (r.body, r.len, 0, &je);
        const char *m = j ? json_string_value (json_object_get (j, "message")) : NULL;
        kiwi_error_make_code (err, r.status == 404 ? KIWI_SBE_GONE : KIWI_SBE_INVALID,
                              "copying files into sandbox %s at %s: HTTP %ld: %s", s->name, dir, r.status,
                              m ? m : r.body);
        json_decref (j);
    }
    kiwi_docker_response_clear (&r);
    return ok ? 0 : -1;
}

int
kiwi__docker_get_archive (void *sb, const char *inner, kiwi_archive_sink sink, void *userdata,
                          kiwi_error_t *err)
{
    kiwi__docker_sb *s = sb;
    char path[8192];
    if (archive_path (s, "archive", inner, path, sizeof path, err) < 0)
        return -1;
    long status = 0;
    if (kiwi_docker_request_stream (s->p->api, "GET", path, NULL, NULL, 0, 300000, sink, userdata, &status, err)
        < 0) {
        if (kiwi_error_code (*err) == KIWI_DOCKER_ABORTED)
            (*err)->code = KIWI_SBE_STOPPED;
        else if (status == 404)
            (*err)->code = KIWI_SBE_GONE;
        return kiwi_error_wrap (err, "copying %s out of sandbox %s", inner, s->name);
    }
    return 0;
}

typedef struct {
    kiwi_demux demux;
    kiwi_tailbuf tail;
    const kiwi_exec_spec *spec;
    kiwi__docker_sb *s;
    bool lost;
    bool oom;
    bool cancelled;
    int exit_code;
} exec_ctx;

/* Reads the container's state over `api`. Returns < 0 if it cannot be read;
 * sets *running, *oom and *exit_code otherwise (a missing container is "not
 * running"). */
static int
container_state (kiwi_docker *api, const char *id, bool *running, bool *oom, int *exit_code)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/json", id);
    json_t *j = NULL;
    long status = 0;
    kiwi_error_t e = NULL;
    int rc = kiwi_docker_call (api, "GET", path, NULL, 10000, &j, &status, &e);
    kiwi_error_free (&e);
    if (rc < 0) {
        if (status == 404) {
            *running = false;
            *oom = false;
            *exit_code = -1;
            return 0;
        }
        return -1;
    }
    json_t *st = json_object_get (j, "State");
    *running = json_is_true (json_object_get (st, "Running"));
    *oom = json_is_true (json_object_get (st, "OOMKilled"));
    *exit_code = (int) json_integer_value (json_object_get (st, "ExitCode"));
    json_decref (j);
    return 0;
}

/* During a streamed exec: a sandbox that died under the command (gVisor
 * dies whole when its memory ceiling is hit) ends the exec at once instead
 * of at the deadline. */
static int
exec_tick (void *ud)
{
    exec_ctx *c = ud;
    kiwi__docker_priv *p = c->s->p;
    if (kiwi_sandbox_cancelled ()) {
        c->cancelled = true;
        return -1;
    }
    if (p->probe == NULL) {
        kiwi_error_t e = NULL;
        if (kiwi_docker_open (kiwi_docker_socket_path (p->api), &p->probe, &e) < 0) {
            kiwi_error_free (&e);
            return 0;
        }
    }
    bool running = true, oom = false;
    int code = 0;
    if (container_state (p->probe, c->s->id, &running, &oom, &code) < 0 || running)
        return 0;
    c->lost = true;
    c->oom = oom;
    c->exit_code = code;
    return -1;
}

static int
exec_emit (int stream, const char *data, size_t len, void *ud)
{
    exec_ctx *c = ud;
    kiwi_tailbuf_write (&c->tail, data, len);
    if (c->spec->on_output)
        c->spec->on_output (stream, data, len, c->spec->userdata);
    return 0;
}

static int
exec_sink (const char *data, size_t len, void *ud)
{
    exec_ctx *c = ud;
    return kiwi_demux_feed (&c->demux, data, len);
}

/* Kills the sandbox's processes (all of them: a deadline ends the sandbox). */
static void
kill_container (kiwi__docker_sb *s)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/kill?signal=KILL", s->id);
    kiwi_error_t e = NULL;
    if (kiwi_docker_call (s->p->api, "POST", path, NULL, 30000, NULL, NULL, &e) < 0)
        kiwi_warn ("sandbox %s: kill after deadline: %s", s->name, kiwi_error_msg (e));
    kiwi_error_free (&e);
}

/* Whether the memory ceiling was hit (cgroup v1 failcnt / v2 oom events). */
static bool
memory_limit_hit (kiwi__docker_sb *s)
{
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/stats?stream=false", s->id);
    json_t *st = NULL;
    kiwi_error_t e = NULL;
    bool hit = false;
    if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, &e) == 0) {
        json_t *ms = json_object_get (st, "memory_stats");
        json_int_t failcnt = json_integer_value (json_object_get (ms, "failcnt"));
        json_t *stats = json_object_get (ms, "stats");
        json_int_t oom = json_integer_value (json_object_get (stats, "oom_kill"));
        json_int_t usage = json_integer_value (json_object_get (ms, "max_usage"));
        json_int_t limit = json_integer_value (json_object_get (ms, "limit"));
        hit = failcnt > 0 || oom > 0 || (limit > 0 && usage >= limit - 4096);
    }
    kiwi_error_free (&e);
    json_decref (st);
    return hit;
}

int
kiwi__docker_exec (void *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err)
{
    kiwi__docker_sb *s = sb;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (spec->argv == NULL || spec->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "exec in sandbox %s: empty command", s->name);
    int64_t t0 = kiwi_mono_ms ();
    json_t *body = json_pack ("{s:b,s:b,s:b,s:o,s:o,s:s}", "AttachStdin", 0, "AttachStdout", 1, "AttachStderr", 1,
                              "Cmd", kiwi__docker_string_array (spec->argv), "Env",
                              kiwi__docker_string_array (spec->env), "WorkingDir", spec->workdir ? spec->workdir : KIWI_SANDBOX_SRC);
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/exec", s->id);
    json_t *created = NULL;
    long status = 0;
    int rc = kiwi_docker_call (s->p->api, "POST", path, body, 30000, &created, &status, err);
    json_decref (body);
    if (rc < 0) {
        if (status == 404 || status == 409)
            (*err)->code = KIWI_SBE_GONE;
        return kiwi_error_wrap (err, "exec in sandbox %s", s->name);
    }
    cleanup_free char *eid = strdup (json_string_value (json_object_get (created, "Id")) ?: "");
    json_decref (created);

    exec_ctx c = { .spec = spec, .s = s };
    kiwi_demux_init (&c.demux, exec_emit, &c);
    if (kiwi_tailbuf_init (&c.tail, spec->output_cap ? spec->output_cap : 65536) < 0)
        return kiwi_error_make (err, ENOMEM, "exec output buffer");
    snprintf (path, sizeof path, "/exec/%s/start", eid);
    const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    kiwi_error_t e = NULL;
    rc = kiwi_docker_request_stream_tick (s->p->api, "POST", path, "application/json", start_body,
                                          sizeof start_body - 1, spec->timeout_ms, exec_sink, &c, exec_tick, 2000,
                                          &status, &e);
    if (rc < 0 && kiwi_error_code (e) == 28 /* CURLE_OPERATION_TIMEDOUT */) {
        kill_container (s);
        res->timed_out = true;
        kiwi_error_free (&e);
        rc = 0;
    } else if (rc < 0 && c.cancelled) {
        kill_container (s);
        kiwi_error_free (&e);
        kiwi_tailbuf_clear (&c.tail);
        return kiwi_error_make_code (err, KIWI_SBE_CANCELLED, "`%s` in sandbox %s: cancelled", spec->argv[0],
                                     s->name);
    } else if (rc < 0 && c.lost) {
        kiwi_error_free (&e);
        rc = 0;
    }
    if (!res->timed_out && !c.lost) {
        /* the stream can also end because the sandbox died; dockerd may
         * need a moment to notice, so a command that did not exit normally
         * (killed, or no status) is given two seconds of checks */
        int code = -1;
        snprintf (path, sizeof path, "/exec/%s/json", eid);
        json_t *st = NULL;
        kiwi_error_t se = NULL;
        if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, &se) == 0) {
            json_t *jc = json_object_get (st, "ExitCode");
            code = json_is_integer (jc) ? (int) json_integer_value (jc) : -1;
        }
        kiwi_error_free (&se);
        json_decref (st);
        int checks = code >= 0 && code < 128 ? 1 : 20;
        for (int i = 0; i < checks && !c.lost; i++) {
            bool running = true, oom = false;
            int ccode = 0;
            if (container_state (s->p->api, s->id, &running, &oom, &ccode) == 0 && !running) {
                c.lost = true;
                c.oom = oom;
                c.exit_code = ccode;
            } else if (i + 1 < checks)
                usleep (100000);
        }
    }
    if (c.lost) {
        res->sandbox_lost = true;
        res->oom_killed = c.oom || memory_limit_hit (s);
        res->exit_code = -1;
        snprintf (res->lost_reason, sizeof res->lost_reason, "the sandbox died (exit %d%s)", c.exit_code,
                  res->oom_killed ? ", memory ceiling reached" : "");
    }
    res->output = kiwi_tailbuf_dup (&c.tail);
    res->output_dropped = c.tail.dropped;
    kiwi_tailbuf_clear (&c.tail);
    if (rc < 0) {
        *err = kiwi_error_steal (&e);
        return kiwi_error_wrap (err, "running `%s` in sandbox %s", spec->argv[0], s->name);
    }
    if (!res->timed_out && !res->sandbox_lost) {
        snprintf (path, sizeof path, "/exec/%s/json", eid);
        json_t *st = NULL;
        if (kiwi_docker_call (s->p->api, "GET", path, NULL, 30000, &st, NULL, err) < 0)
            return kiwi_error_wrap (err, "reading the exit status in sandbox %s", s->name);
        json_t *code = json_object_get (st, "ExitCode");
        res->exit_code = json_is_integer (code) ? (int) json_integer_value (code) : -1;
        json_decref (st);
        if (res->exit_code == 137)
            res->oom_killed = memory_limit_hit (s);
    }
    res->duration_ms = kiwi_mono_ms () - t0;
    return 0;
}

static int
oneshot_tick (void *ud)
{
    exec_ctx *c = ud;
    if (kiwi_sandbox_cancelled ()) {
        c->cancelled = true;
        return -1;
    }
    return 0;
}

/* One-shot: create, put, start, follow the output, wait, remove. The
 * command is the container's first process, as with `docker run`. */
int
kiwi__docker_run_once (void *priv, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts, size_t nputs,
                       const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    kiwi__docker_priv *p = priv;
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    if (x->argv == NULL || x->argv[0] == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "one-shot sandbox run: empty command");
    int64_t t0 = kiwi_mono_ms ();
    kiwi__docker_sb *s = NULL;
    if (kiwi__docker_create_container (p, spec, x, &s, err) < 0)
        return -1;
    int rc = -1;
    for (size_t i = 0; i < nputs; i++)
        if (kiwi__docker_put_archive (s, puts[i].dir, puts[i].tar, puts[i].len, err) < 0)
            goto out;
    if (kiwi__docker_start_container (s, spec, err) < 0)
        goto out;
    exec_ctx c = { .spec = x, .s = s };
    kiwi_demux_init (&c.demux, exec_emit, &c);
    if (kiwi_tailbuf_init (&c.tail, x->output_cap ? x->output_cap : 65536) < 0) {
        kiwi_error_make (err, ENOMEM, "output buffer");
        goto out;
    }
    char path[256];
    snprintf (path, sizeof path, "/containers/%s/logs?follow=1&stdout=1&stderr=1", s->id);
    kiwi_error_t e = NULL;
    int frc = kiwi_docker_request_stream_tick (p->api, "GET", path, NULL, NULL, 0, x->timeout_ms, exec_sink, &c,
                                               oneshot_tick, 1000, NULL, &e);
    if (frc < 0 && c.cancelled) {
        kill_container (s);
        kiwi_error_free (&e);
        kiwi_tailbuf_clear (&c.tail);
        kiwi_error_make_code (err, KIWI_SBE_CANCELLED, "`%s` in sandbox %s: cancelled", x->argv[0], s->name);
        goto out;
    }
    if (frc < 0 && kiwi_error_code (e) == 28 /* CURLE_OPERATION_TIMEDOUT */) {
        kill_container (s);
        res->timed_out = true;
        frc = 0;
    }
    res->output = kiwi_tailbuf_dup (&c.tail);
    res->output_dropped = c.tail.dropped;
    kiwi_tailbuf_clear (&c.tail);
    if (frc < 0) {
        *err = kiwi_error_steal (&e);
        kiwi_error_wrap (err, "following `%s` in sandbox %s", x->argv[0], s->name);
        goto out;
    }
    kiwi_error_free (&e);
    snprintf (path, sizeof path, "/containers/%s/wait", s->id);
    json_t *w = NULL;
    if (kiwi_docker_call (p->api, "POST", path, NULL, 60000, &w, NULL, err) < 0) {
        kiwi_error_wrap (err, "waiting for sandbox %s", s->name);
        goto out;
    }
    int code = (int) json_integer_value (json_object_get (w, "StatusCode"));
    json_decref (w);
    if (!res->timed_out) {
        res->exit_code = code;
        bool running = false, oom = false;
        int st_code = 0;
        if (container_state (p->api, s->id, &running, &oom, &st_code) == 0 && oom)
            res->oom_killed = true;
        else if (code == 137)
            res->oom_killed = memory_limit_hit (s);
    }
    rc = 0;
out:
    res->duration_ms = kiwi_mono_ms () - t0;
    {
        kiwi_error_t derr = NULL;
        if (kiwi__docker_remove_all (s, &derr) < 0) {
            if (rc == 0) {
                *err = kiwi_error_steal (&derr);
                kiwi_error_wrap (err, "removing sandbox %s", s->name);
                rc = -1;
            }
        }
        kiwi_error_free (&derr);
    }
    kiwi__docker_sb_free (s);
    return rc;
}
