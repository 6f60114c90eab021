/*
 * pipeline-main.c: the two ways a task process starts (see pipeline.h):
 * under the daemon, the task encoded on fd 0 and its frames on fd 3; and
 * `kiwi-worker --once FILE`, the task from a JSON file, its events and
 * result as JSON lines on stdout, with its own egress proxy.
 */
#include "worker/task/pipeline.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/fs.h"
#include "worker/task/policy.h"
#include "schemas/task-input.h"
#include "worker/shutdown.h"

extern char **environ;


int
kiwi_pipeline_child_main (const kiwi_worker_config *cfg)
{
    volatile int *stop_flag = kiwi_shutdown_catch ();
    /* the task process dies with the daemon: a worker killed with -9 must
     * not leave its tasks worked on while another worker takes them over */
    prctl (PR_SET_PDEATHSIG, SIGTERM);
    if (getppid () == 1)
        return 75;
    /* the task's message on stdin, at most 64 MiB */
    kiwi_buf in;
    kiwi_buf_init (&in, 64u * 1024 * 1024);
    for (;;) {
        if (kiwi_buf_reserve (&in, 65536, NULL) < 0) {
            kiwi_buf_free (&in);
            return 70;
        }
        ssize_t n = read (0, in.data + in.len, in.cap - in.len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        in.len += (size_t) n;
    }
    kiwi_task task;
    kiwi_error_t err = NULL;
    int decoded = kiwi_task_decode (in.data, in.len, &task, &err);
    kiwi_buf_free (&in);
    if (decoded < 0) {
        kiwi_errorf ("task process: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return 65;
    }
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, 3, task.id, cfg->worker_id);
    /* the daemon runs the egress proxy and publishes the denials */
    kiwi_pipeline p = { .cfg = cfg, .host_env = (const char *const *) environ, .events = &ev, .stop = stop_flag };
    kiwi_result r;
    kiwi_result_init (&r);
    int rc = kiwi_pipeline_run (&p, &task, &r);
    int status = 0;
    if (rc < 0)
        status = 75; /* stopped: no result, redelivered */
    else if (ev.result (&ev, &r) < 0)
        status = 74;
    kiwi_result_clear (&r);
    kiwi_task_clear (&task);
    return status;
}

int
kiwi_pipeline_once_main (const kiwi_worker_config *cfg, const char *path)
{
    volatile int *stop_flag = kiwi_shutdown_catch ();
    kiwi_task task;
    kiwi_task_init (&task);
    kiwi_error_t err = NULL;
    char *text = NULL;
    size_t len = 0;
    if (kiwi_read_file (path, 16u * 1024 * 1024, &text, &len, &err) < 0
        || kiwi_task_input_parse (text, len, &task, &err) < 0 || kiwi_task_input_finish (&task, "once", &err) < 0) {
        kiwi_errorf ("%s: %s", path, kiwi_error_msg (err));
        kiwi_error_free (&err);
        free (text);
        kiwi_task_clear (&task);
        return 2;
    }
    free (text);
    kiwi_events ev;
    kiwi_events_jsonl_init (&ev, stdout, task.id, cfg->worker_id);
    /* the accepted event with the effective limits (a refusal is the
     * pipeline's: its event and its error result) */
    kiwi_task_policy pol;
    if (kiwi_policy_apply (cfg, &task, &pol, &err) == 0)
        kiwi_events_emit (&ev, KIWI_STAGE_ACCEPTED, "accepted", 0,
                          json_pack ("{s:s,s:o}", "worker", cfg->worker_id, "limits", kiwi_policy_limits_json (&pol)));
    kiwi_error_free (&err);
    kiwi_pipeline p = { .cfg = cfg, .host_env = (const char *const *) environ, .events = &ev, .stop = stop_flag,
                        .own_proxy = true };
    kiwi_result r;
    kiwi_result_init (&r);
    int rc = kiwi_pipeline_run (&p, &task, &r);
    int status = 1;
    if (rc == 0) {
        ev.result (&ev, &r);
        status = r.status == KIWI_RESULT_FIXED ? 0 : 1;
    }
    kiwi_result_clear (&r);
    kiwi_task_clear (&task);
    return status;
}
