/*
 * docker-api.c: the Docker Engine API over a unix socket with libcurl.
 * See docker-api.h for the contract.
 */
#include "sandbox/docker/docker-api.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/buf.h"

struct kiwi_docker {
    CURL *curl;
    char *socket_path;
    char api_version[16];
};

static int
version_cmp (const char *a, const char *b)
{
    int amaj = 0, amin = 0, bmaj = 0, bmin = 0;
    sscanf (a, "%d.%d", &amaj, &amin);
    sscanf (b, "%d.%d", &bmaj, &bmin);
    if (amaj != bmaj)
        return amaj < bmaj ? -1 : 1;
    if (amin != bmin)
        return amin < bmin ? -1 : 1;
    return 0;
}

static size_t
collect_cb (char *ptr, size_t size, size_t nmemb, void *userdata)
{
    size_t n = size * nmemb;
    return kiwi_buf_append (userdata, ptr, n, NULL) < 0 ? 0 : n;
}

typedef struct {
    CURL *curl;
    kiwi_docker_sink sink;
    void *userdata;
    kiwi_docker_tick tick;
    long tick_ms;
    struct timespec last_tick;
    int tick_aborted;
    kiwi_buf error_body; /* body of a non-2xx response */
    int checked;
    int failed_status;
} stream_ctx;

static size_t
stream_cb (char *ptr, size_t size, size_t nmemb, void *userdata)
{
    stream_ctx *s = userdata;
    size_t n = size * nmemb;
    if (!s->checked) {
        long code = 0;
        curl_easy_getinfo (s->curl, CURLINFO_RESPONSE_CODE, &code);
        s->failed_status = code < 200 || code >= 300;
        s->checked = 1;
    }
    if (s->failed_status)
        return kiwi_buf_append (&s->error_body, ptr, n, NULL) < 0 ? 0 : n;
    return s->sink (ptr, n, s->userdata) < 0 ? 0 : n;
}

static int
progress_cb (void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    stream_ctx *s = userdata;
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    long elapsed = (now.tv_sec - s->last_tick.tv_sec) * 1000L + (now.tv_nsec - s->last_tick.tv_nsec) / 1000000L;
    if (elapsed < s->tick_ms)
        return 0;
    s->last_tick = now;
    if (s->tick (s->userdata) < 0) {
        s->tick_aborted = 1;
        return 1;
    }
    return 0;
}

static int
build_url (kiwi_docker *d, const char *path, char *url, size_t urlsz)
{
    int n;
    if (strncmp (path, "//", 2) == 0)
        n = snprintf (url, urlsz, "http://docker%s", path + 1);
    else
        n = snprintf (url, urlsz, "http://docker/v%s%s", d->api_version, path);
    return n < 0 || (size_t) n >= urlsz ? -1 : 0;
}

/* Sets up the handle for one request; the caller installs the write callback. */
static int
prepare (kiwi_docker *d, const char *method, const char *path, const char *content_type, const void *body,
         size_t body_len, long timeout_ms, const char *extra_header, struct curl_slist **headers, kiwi_error_t *err)
{
    char url[8192];
    if (build_url (d, path, url, sizeof url) < 0)
        return kiwi_error_make (err, 0, "docker: request path too long");
    CURL *c = d->curl;
    curl_easy_reset (c);
    curl_easy_setopt (c, CURLOPT_UNIX_SOCKET_PATH, d->socket_path);
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 0L);
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    *headers = NULL;
    if (content_type != NULL) {
        char h[256];
        snprintf (h, sizeof h, "Content-Type: %s", content_type);
        *headers = curl_slist_append (*headers, h);
    }
    *headers = curl_slist_append (*headers, "Expect:");
    if (extra_header != NULL)
        *headers = curl_slist_append (*headers, extra_header);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, *headers);
    if (body != NULL) {
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) body_len);
    } else if (strcmp (method, "POST") == 0 || strcmp (method, "PUT") == 0) {
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) 0);
    }
    if (strcmp (method, "HEAD") == 0)
        curl_easy_setopt (c, CURLOPT_NOBODY, 1L);
    return 0;
}

static int
transport_error (kiwi_docker *d, CURLcode rc, const char *method, const char *path, kiwi_error_t *err)
{
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return kiwi_error_make_code (err, CURLE_OPERATION_TIMEDOUT, "docker %s %s: timed out", method, path);
    return kiwi_error_make_code (err, (int) rc, "docker %s %s via %s: %s", method, path, d->socket_path,
                                 curl_easy_strerror (rc));
}

int
kiwi_docker_request (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                     const void *body, size_t body_len, long timeout_ms, kiwi_docker_response *resp,
                     kiwi_error_t *err)
{
    struct curl_slist *headers = NULL;
    memset (resp, 0, sizeof *resp);
    if (prepare (d, method, path, content_type, body, body_len, timeout_ms, NULL, &headers, err) < 0)
        return -1;
    kiwi_buf g = KIWI_BUF_INIT;
    curl_easy_setopt (d->curl, CURLOPT_WRITEFUNCTION, collect_cb);
    curl_easy_setopt (d->curl, CURLOPT_WRITEDATA, &g);
    CURLcode rc = curl_easy_perform (d->curl);
    curl_slist_free_all (headers);
    if (rc != CURLE_OK) {
        kiwi_buf_free (&g);
        return transport_error (d, rc, method, path, err);
    }
    curl_easy_getinfo (d->curl, CURLINFO_RESPONSE_CODE, &resp->status);
    resp->body = g.data ? kiwi_buf_steal (&g, &resp->len) : strdup ("");
    return 0;
}

/* Builds the error for a non-2xx answer, quoting the daemon's "message". */
static int
status_error (long status, const char *method, const char *path, const char *body, size_t len, kiwi_error_t *err)
{
    json_error_t jerr;
    json_t *j = body && len ? json_loadb (body, len, 0, &jerr) : NULL;
    const char *msg = j ? json_string_value (json_object_get (j, "message")) : NULL;
    char snippet[512] = "";
    if (msg == NULL && body != NULL)
        snprintf (snippet, sizeof snippet, "%.*s", (int) (len < 400 ? len : 400), body);
    kiwi_error_make_code (err, (int) status, "docker %s %s: HTTP %ld: %s", method, path, status,
                          msg ? msg : snippet);
    json_decref (j);
    return -1;
}

int
kiwi_docker_request_stream (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                            const void *body, size_t body_len, long timeout_ms, kiwi_docker_sink sink,
                            void *userdata, long *status, kiwi_error_t *err)
{
    return kiwi_docker_request_stream_tick (d, method, path, content_type, body, body_len, timeout_ms, sink,
                                            userdata, NULL, 0, status, err);
}

int
kiwi_docker_request_stream_tick (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                                 const void *body, size_t body_len, long timeout_ms, kiwi_docker_sink sink,
                                 void *userdata, kiwi_docker_tick tick, long tick_ms, long *status,
                                 kiwi_error_t *err)
{
    return kiwi_docker_request_stream_header (d, method, path, NULL, content_type, body, body_len, timeout_ms, sink,
                                              userdata, tick, tick_ms, status, err);
}

int
kiwi_docker_request_stream_header (kiwi_docker *d, const char *method, const char *path, const char *header,
                                   const char *content_type, const void *body, size_t body_len, long timeout_ms,
                                   kiwi_docker_sink sink, void *userdata, kiwi_docker_tick tick, long tick_ms,
                                   long *status, kiwi_error_t *err)
{
    struct curl_slist *headers = NULL;
    if (prepare (d, method, path, content_type, body, body_len, timeout_ms, header, &headers, err) < 0)
        return -1;
    stream_ctx s = { .curl = d->curl, .sink = sink, .userdata = userdata, .tick = tick, .tick_ms = tick_ms };
    curl_easy_setopt (d->curl, CURLOPT_WRITEFUNCTION, stream_cb);
    curl_easy_setopt (d->curl, CURLOPT_WRITEDATA, &s);
    if (tick != NULL) {
        clock_gettime (CLOCK_MONOTONIC, &s.last_tick);
        curl_easy_setopt (d->curl, CURLOPT_XFERINFOFUNCTION, progress_cb);
        curl_easy_setopt (d->curl, CURLOPT_XFERINFODATA, &s);
        curl_easy_setopt (d->curl, CURLOPT_NOPROGRESS, 0L);
    }
    CURLcode rc = curl_easy_perform (d->curl);
    curl_slist_free_all (headers);
    long code = 0;
    curl_easy_getinfo (d->curl, CURLINFO_RESPONSE_CODE, &code);
    if (status)
        *status = code;
    if ((rc == CURLE_WRITE_ERROR && !s.failed_status) || (rc == CURLE_ABORTED_BY_CALLBACK && s.tick_aborted)) {
        kiwi_buf_free (&s.error_body);
        return kiwi_error_make_code (err, KIWI_DOCKER_ABORTED, "docker %s %s: aborted by the receiver", method,
                                     path);
    }
    if (rc != CURLE_OK) {
        kiwi_buf_free (&s.error_body);
        return transport_error (d, rc, method, path, err);
    }
    if (code < 200 || code >= 300) {
        status_error (code, method, path, s.error_body.data, s.error_body.len, err);
        kiwi_buf_free (&s.error_body);
        return -1;
    }
    kiwi_buf_free (&s.error_body);
    return 0;
}

int
kiwi_docker_call (kiwi_docker *d, const char *method, const char *path, json_t *body, long timeout_ms,
                  json_t **out, long *status, kiwi_error_t *err)
{
    cleanup_free char *payload = NULL;
    if (out)
        *out = NULL;
    if (body != NULL) {
        payload = json_dumps (body, JSON_COMPACT);
        if (payload == NULL)
            return kiwi_error_make (err, 0, "docker %s %s: cannot serialise the request", method, path);
    }
    kiwi_docker_response r;
    if (kiwi_docker_request (d, method, path, payload ? "application/json" : NULL, payload,
                             payload ? strlen (payload) : 0, timeout_ms, &r, err) < 0)
        return -1;
    if (status)
        *status = r.status;
    if (r.status < 200 || r.status >= 300) {
        status_error (r.status, method, path, r.body, r.len, err);
        kiwi_docker_response_clear (&r);
        return -1;
    }
    if (out != NULL && r.len > 0) {
        json_error_t jerr;
        *out = json_loadb (r.body, r.len, 0, &jerr);
        if (*out == NULL) {
            kiwi_error_make (err, 0, "docker %s %s: invalid JSON in response: %s", method, path, jerr.text);
            kiwi_docker_response_clear (&r);
            return -1;
        }
    }
    kiwi_docker_response_clear (&r);
    return 0;
}

void
kiwi_docker_response_clear (kiwi_docker_response *r)
{
    free (r->body);
    r->body = NULL;
    r->len = 0;
}

char *
kiwi_docker_urlencode (kiwi_docker *d, const char *s)
{
    char *e = curl_easy_escape (d->curl, s, 0);
    if (e == NULL)
        return NULL;
    char *copy = strdup (e);
    curl_free (e);
    return copy;
}

int
kiwi_docker_open (const char *socket_path, kiwi_docker **out, kiwi_error_t *err)
{
    if (socket_path == NULL || *socket_path == '\0')
        return kiwi_error_make (err, 0, "docker: no socket path given");
    if (strncmp (socket_path, "unix://", 7) == 0)
        socket_path += 7;
    curl_global_init (CURL_GLOBAL_DEFAULT);
    kiwi_docker *d = calloc (1, sizeof *d);
    if (d == NULL)
        return kiwi_error_make (err, 0, "docker: out of memory");
    d->socket_path = strdup (socket_path);
    d->curl = curl_easy_init ();
    if (d->socket_path == NULL || d->curl == NULL) {
        kiwi_docker_close (d);
        return kiwi_error_make (err, 0, "docker: cannot initialise libcurl");
    }
    json_t *v = NULL;
    if (kiwi_docker_call (d, "GET", "//version", NULL, 15000, &v, NULL, err) < 0) {
        kiwi_docker_close (d);
        return kiwi_error_wrap (err, "connecting to dockerd at %s", socket_path);
    }
    const char *api = json_string_value (json_object_get (v, "ApiVersion"));
    if (api == NULL) {
        json_decref (v);
        kiwi_docker_close (d);
        return kiwi_error_make (err, 0, "docker: /version at %s has no ApiVersion", socket_path);
    }
    if (version_cmp (api, KIWI_DOCKER_API_MIN) < 0) {
        kiwi_error_make (err, 0, "docker: daemon API %s at %s is older than the oldest supported (%s)", api,
                         socket_path, KIWI_DOCKER_API_MIN);
        json_decref (v);
        kiwi_docker_close (d);
        return -1;
    }
    snprintf (d->api_version, sizeof d->api_version, "%s",
              version_cmp (api, KIWI_DOCKER_API_MAX) > 0 ? KIWI_DOCKER_API_MAX : api);
    json_decref (v);
    *out = d;
    return 0;
}

void
kiwi_docker_close (kiwi_docker *d)
{
    if (d == NULL)
        return;
    if (d->curl)
        curl_easy_cleanup (d->curl);
    free (d->socket_path);
    free (d);
}

const char *
kiwi_docker_api_version (const kiwi_docker *d)
{
    return d->api_version;
}

const char *
kiwi_docker_socket_path (const kiwi_docker *d)
{
    return d->socket_path;
}

int
kiwi_docker_image_inspect (kiwi_docker *d, const char *name, json_t **doc, long *status, kiwi_error_t *err)
{
    *doc = NULL;
    if (status != NULL)
        *status = 0;
    if (name == NULL || *name == '\0' || strpbrk (name, "?#% ") != NULL)
        return kiwi_error_make (err, EINVAL, "image name `%s`", name ? name : "");
    char *path = NULL;
    if (asprintf (&path, "/images/%s/json", name) < 0)
        return kiwi_error_make (err, ENOMEM, "image %s", name);
    int rc = kiwi_docker_call (d, "GET", path, NULL, 10000, doc, status, err);
    free (path);
    if (rc < 0)
        return kiwi_error_wrap (err, "image %s", name);
    return 0;
}

int
kiwi_docker_image_id (kiwi_docker *d, const char *name, char **id, kiwi_error_t *err)
{
    *id = NULL;
    json_t *doc = NULL;
    if (kiwi_docker_image_inspect (d, name, &doc, NULL, err) < 0)
        return -1;
    const char *v = json_string_value (json_object_get (doc, "Id"));
    if (v != NULL)
        *id = strdup (v);
    json_decref (doc);
    if (*id == NULL)
        return kiwi_error_make (err, v ? ENOMEM : 0, "image %s: no Id in the daemon's answer", name);
    return 0;
}
