/*
 * scripted-provider.c: the scripted provider server as a child process of a
 * test (see scripted-provider.h).
 */
#include "scripted-provider.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

#define SERVER_PY KIWI_SOURCE_DIR "/tests/scripted_provider/server.py"

static long
now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static const char *
python3 (void)
{
    const char *p = getenv ("KIWI_PYTHON3");
    if (p != NULL && p[0] != '\0')
        return p;
    if (access ("/usr/bin/python3", X_OK) == 0)
        return "/usr/bin/python3";
    return "python3";
}

static char *
read_file_tail (const char *path, size_t max)
{
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return strdup ("");
    fseek (f, 0, SEEK_END);
    long size = ftell (f);
    if (size > (long) max)
        fseek (f, size - (long) max, SEEK_SET);
    else
        fseek (f, 0, SEEK_SET);
    char *buf = calloc (1, max + 1);
    if (buf != NULL)
        buf[fread (buf, 1, max, f)] = '\0';
    fclose (f);
    return buf;
}

static int
start (kiwi_scripted_provider *sp, const char *const *script_dirs, const char *seat, kiwi_error_t *err)
{
    memset (sp, 0, sizeof *sp);
    char tmpl[] = "/tmp/kiwi-scripted-XXXXXX";
    if (mkdtemp (tmpl) == NULL)
        return kiwi_error_make (err, errno, "scripted provider: mkdtemp");
    sp->dir = strdup (tmpl);
    if (sp->dir == NULL || asprintf (&sp->log_path, "%s/requests.jsonl", tmpl) < 0) {
        sp->log_path = NULL;
        kiwi_scripted_provider_stop (sp);
        return kiwi_error_make (err, ENOMEM, "scripted provider");
    }
    cleanup_free char *errlog = NULL;
    if (asprintf (&errlog, "%s/stderr.log", tmpl) < 0)
        errlog = NULL;

    static const char *const default_dirs[] = { KIWI_SCRIPTED_PROVIDER_SCRIPTS, NULL };
    static const char *const no_dirs[] = { NULL };
    if (script_dirs == NULL)
        script_dirs = seat != NULL ? no_dirs : default_dirs;
    const char *argv[64];
    size_t n = 0;
    char parent[32];
    snprintf (parent, sizeof parent, "%d", (int) getpid ());
    argv[n++] = python3 ();
    argv[n++] = SERVER_PY;
    for (size_t i = 0; script_dirs[i] != NULL && n < 50; i++) {
        argv[n++] = "--scripts";
        argv[n++] = script_dirs[i];
    }
    if (seat != NULL) {
        argv[n++] = "--seat";
        argv[n++] = seat;
    }
    argv[n++] = "--log";
    argv[n++] = sp->log_path;
    argv[n++] = "--parent-pid";
    argv[n++] = parent;
    argv[n] = NULL;

    int pipefd[2];
    if (pipe2 (pipefd, O_CLOEXEC) < 0) {
        int e = errno;
        kiwi_scripted_provider_stop (sp);
        return kiwi_error_make (err, e, "scripted provider: pipe");
    }
    pid_t pid = fork ();
    if (pid < 0) {
        int e = errno;
        close (pipefd[0]);
        close (pipefd[1]);
        kiwi_scripted_provider_stop (sp);
        return kiwi_error_make (err, e, "scripted provider: fork");
    }
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        dup2 (pipefd[1], STDOUT_FILENO);
        int fd = errlog != NULL ? open (errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
        if (fd >= 0)
            dup2 (fd, STDERR_FILENO);
        int nul = open ("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2 (nul, STDIN_FILENO);
        execvp (argv[0], (char *const *) argv);
        fprintf (stderr, "exec %s: %s\n", argv[0], strerror (errno));
        _exit (127);
    }
    close (pipefd[1]);
    sp->pid = pid;

    char line[64] = "";
    size_t len = 0;
    long deadline = now_ms () + 15000;
    while (len < sizeof line - 1 && memchr (line, '\n', len) == NULL) {
        long left = deadline - now_ms ();
        if (left <= 0)
            break;
        struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
        int r = poll (&pfd, 1, (int) left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t got = read (pipefd[0], line + len, sizeof line - 1 - len);
        if (got <= 0)
            break;
        len += (size_t) got;
        line[len] = '\0';
    }
    close (pipefd[0]);
    int port = atoi (line);
    if (port <= 0 || port > 65535 || memchr (line, '\n', len) == NULL) {
        cleanup_free char *tail = errlog != NULL ? read_file_tail (errlog, 2000) : NULL;
        kiwi_scripted_provider_stop (sp);
        return kiwi_error_make (err, 0, "scripted provider: %s %s printed no port within 15 s; its stderr: %s",
                                python3 (), SERVER_PY, tail != NULL ? tail : "");
    }
    sp->port = port;
    return 0;
}

static void
rm_dir (const char *dir)
{
    const char *keep = getenv ("KIWI_KEEP_TEST_FILES");
    if (keep != NULL && strcmp (keep, "1") == 0) {
        fprintf (stderr, "scripted provider: kept %s\n", dir);
        return;
    }
    const char *files[] = { "requests.jsonl", "stderr.log" };
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf (path, sizeof path, "%s/%s", dir, files[i]);
        unlink (path);
    }
    rmdir (dir);
}

int
kiwi_scripted_provider_start (kiwi_scripted_provider *sp, const char *const *script_dirs, kiwi_error_t *err)
{
    return start (sp, script_dirs, NULL, err);
}

int
kiwi_scripted_provider_start_seat (kiwi_scripted_provider *sp, const char *seat_dir, kiwi_error_t *err)
{
    return start (sp, NULL, seat_dir, err);
}

void
kiwi_scripted_provider_stop (kiwi_scripted_provider *sp)
{
    if (sp->pid > 0) {
        kill (sp->pid, SIGTERM);
        long deadline = now_ms () + 3000;
        int status;
        pid_t r;
        while ((r = waitpid (sp->pid, &status, WNOHANG)) == 0 && now_ms () < deadline) {
            struct timespec ts = { 0, 20 * 1000000L };
            nanosleep (&ts, NULL);
        }
        if (r == 0) {
            kill (sp->pid, SIGKILL);
            waitpid (sp->pid, &status, 0);
        }
        sp->pid = 0;
    }
    if (sp->dir != NULL)
        rm_dir (sp->dir);
    free (sp->dir);
    free (sp->log_path);
    sp->dir = sp->log_path = NULL;
    sp->port = 0;
}

char *
kiwi_scripted_provider_base_url (const kiwi_scripted_provider *sp, const char *provider, const char *script)
{
    const char *suffix = strcmp (provider, "openai") == 0 ? "/v1" : strcmp (provider, "gemini") == 0 ? "/v1beta" : "";
    char *url = NULL;
    if (asprintf (&url, "http://127.0.0.1:%d/script/%s%s", sp->port, script, suffix) < 0)
        return NULL;
    return url;
}

const char *
kiwi_scripted_provider_key (const char *provider)
{
    if (strcmp (provider, "anthropic") == 0)
        return "kiwi-test-anthropic-key-7f3a9c";
    if (strcmp (provider, "openai") == 0)
        return "kiwi-test-openai-key-51d2e8";
    if (strcmp (provider, "gemini") == 0)
        return "kiwi-test-gemini-key-c04b66";
    return "";
}

static size_t
discard (char *data, size_t size, size_t nmemb, void *userdata)
{
    return size * nmemb;
}

int
kiwi_scripted_provider_reset (const kiwi_scripted_provider *sp, const char *script, kiwi_error_t *err)
{
    char url[512];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/_control/reset%s%s", sp->port, script != NULL ? "?script=" : "",
              script != NULL ? script : "");
    CURL *h = curl_easy_init ();
    if (h == NULL)
        return kiwi_error_make (err, ENOMEM, "scripted provider: curl_easy_init");
    curl_easy_setopt (h, CURLOPT_URL, url);
    curl_easy_setopt (h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt (h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform (h);
    long status = 0;
    curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup (h);
    if (rc != CURLE_OK || status != 200)
        return kiwi_error_make (err, 0, "scripted provider: reset: %s (HTTP %ld)", curl_easy_strerror (rc), status);
    return 0;
}

json_t *
kiwi_scripted_provider_log (const kiwi_scripted_provider *sp, const char *script, kiwi_error_t *err)
{
    json_t *out = json_array ();
    FILE *f = fopen (sp->log_path, "r");
    if (f == NULL) {
        if (errno == ENOENT)
            return out; /* no request yet */
        json_decref (out);
        kiwi_error_make (err, errno, "scripted provider: open %s", sp->log_path);
        return NULL;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline (&line, &cap, f) > 0) {
        json_t *e = json_loads (line, 0, NULL);
        if (e == NULL)
            continue; /* a line being written right now */
        const char *s = json_string_value (json_object_get (e, "script"));
        if (script == NULL || (s != NULL && strcmp (s, script) == 0))
            json_array_append (out, e);
        json_decref (e);
    }
    free (line);
    fclose (f);
    return out;
}

size_t
kiwi_scripted_provider_requests (const kiwi_scripted_provider *sp, const char *script)
{
    json_t *log = kiwi_scripted_provider_log (sp, script, NULL);
    size_t n = json_array_size (log);
    if (log != NULL)
        json_decref (log);
    return n;
}

size_t
kiwi_scripted_provider_violations (const kiwi_scripted_provider *sp, const char *script, char **first)
{
    json_t *log = kiwi_scripted_provider_log (sp, script, NULL);
    size_t n = 0, i, j;
    json_t *e, *v;
    if (first != NULL)
        *first = NULL;
    json_array_foreach (log, i, e)
    {
        json_array_foreach (json_object_get (e, "violations"), j, v)
        {
            if (n++ == 0 && first != NULL
                && asprintf (first, "%s: %s", json_string_value (json_object_get (v, "kind")),
                             json_string_value (json_object_get (v, "message")))
                       < 0)
                *first = NULL;
        }
    }
    if (log != NULL)
        json_decref (log);
    return n;
}
