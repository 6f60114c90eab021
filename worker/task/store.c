/*
 * store.c: install snapshots in an OCI registry (see store.h), with libcurl
 * for HTTP and jansson for the manifest. No OCI client library is packaged
 * in Debian 12 for C (the registry's Go client and ORAS are Go programs), so
 * the few calls of the distribution API Kiwi needs are written here:
 *   HEAD /v2/<repo>/blobs/<digest>                 does the store hold it
 *   POST /v2/<repo>/blobs/uploads/, PUT <location>&digest=<digest>
 *   PUT  /v2/<repo>/manifests/<key>                tag the snapshot
 *   GET  /v2/<repo>/manifests/<digest>, GET /v2/<repo>/blobs/<digest>
 */
#include "worker/task/store.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/buf.h"

#define MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define MANIFEST_MAX ((size_t) 1 << 20)
#define TITLE_ANNOTATION "org.opencontainers.image.title"

struct kiwi_store {
    CURL *curl;
    char *base;     /* http(s)://host[:port] */
    char *repo;     /* the repository's name */
    char *userpwd;  /* "user:password", or NULL */
};

static const char *const part_names[KIWI_STORE_PARTS] = { "src.tar", "home.tar", "fetched.json" };
static const char *const part_types[KIWI_STORE_PARTS] = { KIWI_STORE_LAYER_TYPE, KIWI_STORE_LAYER_TYPE,
                                                          KIWI_STORE_FETCHED_TYPE };

bool
kiwi_store_digest_valid (const char *d)
{
    if (d == NULL || strncmp (d, "sha256:", 7) != 0 || strlen (d) != 7 + 64)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

kiwi_snapshot_src
kiwi_snapshot_source (bool have_local, const char *digest, bool have_store)
{
    if (have_local)
        return KIWI_SNAPSHOT_LOCAL;
    if (have_store && kiwi_store_digest_valid (digest))
        return KIWI_SNAPSHOT_FETCH;
    return KIWI_SNAPSHOT_INSTALL;
}

void
kiwi_store_blob_check_init (kiwi_store_blob_check *c)
{
    kiwi_sha256_init (&c->sha);
    c->seen = 0;
}

void
kiwi_store_blob_check_feed (kiwi_store_blob_check *c, const void *data, size_t len)
{
    kiwi_sha256_update (&c->sha, data, len);
    c->seen += len;
}

static void
digest_of (kiwi_sha256 *sha, char out[KIWI_STORE_DIGEST_MAX])
{
    unsigned char d[32];
    char hex[65];
    kiwi_sha256_final (sha, d);
    kiwi_sha256_digest_hex (d, hex);
    snprintf (out, KIWI_STORE_DIGEST_MAX, "sha256:%s", hex);
}

int
kiwi_store_blob_check_end (kiwi_store_blob_check *c, const char *digest, uint64_t size, kiwi_error_t *err)
{
    char got[KIWI_STORE_DIGEST_MAX];
    digest_of (&c->sha, got);
    if (c->seen != size)
        return kiwi_error_make (err, 0, "blob %s: %llu bytes received where the manifest says %llu: refused", digest,
                                (unsigned long long) c->seen, (unsigned long long) size);
    if (strcmp (got, digest) != 0)
        return kiwi_error_make (err, 0, "blob %s: its bytes hash to %s: refused", digest, got);
    return 0;
}

int
kiwi_store_check_manifest (const char *body, size_t len, const char *digest, kiwi_store_part parts[KIWI_STORE_PARTS],
                           kiwi_error_t *err)
{
    if (!kiwi_store_digest_valid (digest))
        return kiwi_error_make (err, 0, "`%s` is not a sha256 digest", digest);
    kiwi_store_blob_check c;
    kiwi_store_blob_check_init (&c);
    kiwi_store_blob_check_feed (&c, body, len);
    if (kiwi_store_blob_check_end (&c, digest, len, err) < 0)
        return kiwi_error_wrap (err, "snapshot manifest");
    json_error_t je;
    json_t *m = json_loadb (body, len, 0, &je);
    if (m == NULL)
        return kiwi_error_make (err, 0, "snapshot manifest %s: %s", digest, je.text);
    int rc = -1;
    json_t *layers = json_object_get (m, "layers");
    const char *at = json_string_value (json_object_get (m, "artifactType"));
    const char *ct = json_string_value (json_object_get (json_object_get (m, "config"), "mediaType"));
    if ((at == NULL || strcmp (at, KIWI_STORE_ARTIFACT_TYPE) != 0) && (ct == NULL || strcmp (ct, KIWI_STORE_CONFIG_TYPE) != 0)) {
        kiwi_error_make (err, 0, "manifest %s is not a Kiwi snapshot", digest);
        goto out;
    }
    size_t nl = json_array_size (layers);
    if (!json_is_array (layers) || nl < 2 || nl > KIWI_STORE_PARTS) {
        kiwi_error_make (err, 0, "snapshot manifest %s: not two or three layers", digest);
        goto out;
    }
    memset (parts, 0, KIWI_STORE_PARTS * sizeof *parts);
    bool have[KIWI_STORE_PARTS] = { false, false, false };
    for (size_t i = 0; i < nl; i++) {
        json_t *l = json_array_get (layers, i);
        const char *d = json_string_value (json_object_get (l, "digest"));
        const char *t = json_string_value (json_object_get (json_object_get (l, "annotations"), TITLE_ANNOTATION));
        json_t *sz = json_object_get (l, "size");
        if (!kiwi_store_digest_valid (d) || t == NULL || !json_is_integer (sz) || json_integer_value (sz) < 0) {
            kiwi_error_make (err, 0, "snapshot manifest %s: layer %zu is malformed", digest, i);
            goto out;
        }
        size_t k = 0;
        while (k < KIWI_STORE_PARTS && strcmp (t, part_names[k]) != 0)
            k++;
        if (k == KIWI_STORE_PARTS || have[k]) {
            kiwi_error_make (err, 0, "snapshot manifest %s: unexpected layer `%s`", digest, t);
            goto out;
        }
        have[k] = true;
        snprintf (parts[k].name, sizeof parts[k].name, "%s", part_names[k]);
        snprintf (parts[k].digest, sizeof parts[k].digest, "%s", d);
        parts[k].size = (uint64_t) json_integer_value (sz);
    }
    if (!have[0] || !have[1]) {
        kiwi_error_make (err, 0, "snapshot manifest %s: no %s layer", digest, have[0] ? part_names[1] : part_names[0]);
        goto out;
    }
    rc = 0;
out:
    json_decref (m);
    return rc;
}

/* ----- HTTP ----- */

int
kiwi_store_open (const char *url, const char *user, const char *password, kiwi_store **out, kiwi_error_t *err)
{
    *out = NULL;
    const char *scheme = strstr (url, "://");
    const char *slash = scheme ? strchr (scheme + 3, '/') : NULL;
    if (scheme == NULL || (strncmp (url, "http://", 7) != 0 && strncmp (url, "https://", 8) != 0) || slash == NULL
        || slash[1] == '\0')
        return kiwi_error_make (err, 0, "KIWI_STORE_URL `%s` is not http(s)://host[:port]/repository", url);
    kiwi_store *s = calloc (1, sizeof *s);
    if (s == NULL)
        return kiwi_error_make (err, ENOMEM, "store");
    s->base = strndup (url, (size_t) (slash - url));
    s->repo = strdup (slash + 1);
    size_t rl = s->repo ? strlen (s->repo) : 0;
    while (rl > 0 && s->repo[rl - 1] == '/')
        s->repo[--rl] = '\0';
    if (user != NULL && *user != '\0' && asprintf (&s->userpwd, "%s:%s", user, password ? password : "") < 0)
        s->userpwd = NULL;
    s->curl = curl_easy_init ();
    if (s->base == NULL || s->repo == NULL || s->curl == NULL) {
        kiwi_store_close (s);
        return kiwi_error_make (err, ENOMEM, "store");
    }
    *out = s;
    return 0;
}

void
kiwi_store_close (kiwi_store *s)
{
    if (s == NULL)
        return;
    if (s->curl)
        curl_easy_cleanup (s->curl);
    free (s->base);
    free (s->repo);
    if (s->userpwd) {
        explicit_bzero (s->userpwd, strlen (s->userpwd));
        free (s->userpwd);
    }
    free (s);
}

/* One response: a bounded body in memory, or streamed to a sink. */
typedef struct response {
    kiwi_buf body;                /* the body in memory (fd < 0) */
    size_t len, max;              /* bytes received, and the most taken */
    int fd;                       /* >= 0: write the body here */
    kiwi_store_blob_check *check; /* hash what arrives, or NULL */
    bool over;
    char location[2048];
    char digest[KIWI_STORE_DIGEST_MAX];
} response;

static size_t
on_body (char *data, size_t size, size_t n, void *ud)
{
    response *r = ud;
    size_t len = size * n;
    if (r->max > 0 && r->len + len > r->max) {
        r->over = true;
        return 0;
    }
    if (r->check)
        kiwi_store_blob_check_feed (r->check, data, len);
    if (r->fd >= 0) {
        for (size_t off = 0; off < len;) {
            ssize_t w = write (r->fd, data + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return 0;
            off += (size_t) w;
        }
        r->len += len;
        return len;
    }
    if (kiwi_buf_append (&r->body, data, len, NULL) < 0)
        return 0;
    r->len += len;
    return len;
}

static void
header_value (const char *line, size_t len, const char *name, char *dst, size_t cap)
{
    size_t nl = strlen (name);
    if (len <= nl + 1 || strncasecmp (line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    size_t vl = len - nl - 1;
    while (vl > 0 && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
        vl--;
    snprintf (dst, cap, "%.*s", (int) vl, v);
}

static size_t
on_header (char *line, size_t size, size_t n, void *ud)
{
    response *r = ud;
    size_t len = size * n;
    header_value (line, len, "Location", r->location, sizeof r->location);
    header_value (line, len, "Docker-Content-Digest", r->digest, sizeof r->digest);
    return len;
}

typedef struct request {
    const char *method;
    const char *url;          /* absolute */
    const char *content_type; /* for a body */
    const char *accept;
    const char *body;         /* in memory, or */
    size_t body_len;
    FILE *upload;             /* streamed from a file of upload_len bytes */
    uint64_t upload_len;
} request;

/* Performs `q`; *status receives the HTTP status. */
static int
perform (kiwi_store *s, const request *q, response *r, long *status, kiwi_error_t *err)
{
    CURL *c = s->curl;
    curl_easy_reset (c);
    struct curl_slist *h = NULL;
    char line[256];
    if (q->content_type) {
        snprintf (line, sizeof line, "Content-Type: %s", q->content_type);
        h = curl_slist_append (h, line);
    }
    if (q->accept) {
        snprintf (line, sizeof line, "Accept: %s", q->accept);
        h = curl_slist_append (h, line);
    }
    curl_easy_setopt (c, CURLOPT_URL, q->url);
    curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt (c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt (c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt (c, CURLOPT_HEADERDATA, r);
    if (s->userpwd) {
        curl_easy_setopt (c, CURLOPT_USERPWD, s->userpwd);
        curl_easy_setopt (c, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
    }
    /* blobs may be served from elsewhere (a redirect to object storage):
     * followed, without the credentials */
    if (strcmp (q->method, "GET") == 0)
        curl_easy_setopt (c, CURLOPT_FOLLOWLOCATION, 1L);
    if (strcmp (q->method, "HEAD") == 0)
        curl_easy_setopt (c, CURLOPT_NOBODY, 1L);
    else if (q->upload != NULL) {
        curl_easy_setopt (c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt (c, CURLOPT_READDATA, q->upload);
        curl_easy_setopt (c, CURLOPT_INFILESIZE_LARGE, (curl_off_t) q->upload_len);
    } else if (q->body != NULL) {
        curl_easy_setopt (c, CURLOPT_CUSTOMREQUEST, q->method);
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) q->body_len);
    } else if (strcmp (q->method, "GET") != 0) {
        curl_easy_setopt (c, CURLOPT_CUSTOMREQUEST, q->method);
        curl_easy_setopt (c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE, 0L);
    }
    CURLcode cc = curl_easy_perform (c);
    curl_slist_free_all (h);
    *status = 0;
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, status);
    if (r->over)
        return kiwi_error_make (err, EFBIG, "%s %s: larger than the %zu bytes allowed", q->method, q->url, r->max);
    if (cc != CURLE_OK)
        return kiwi_error_make (err, 0, "%s %s: %s", q->method, q->url, curl_easy_strerror (cc));
    return 0;
}

static void
response_clear (response *r)
{
    kiwi_buf_free (&r->body);
}

static char *
repo_url (kiwi_store *s, const char *kind, const char *ref)
{
    char *u = NULL;
    if (asprintf (&u, "%s/v2/%s/%s/%s", s->base, s->repo, kind, ref) < 0)
        return NULL;
    return u;
}

/* The HTTP status as an error, with the registry's message. */
static int
status_error (const char *what, long status, const response *r, kiwi_error_t *err)
{
    return kiwi_error_make (err, 0, "%s: the store answered %ld%s%.300s", what, status, r->body.len ? ": " : "",
                            kiwi_buf_str (&r->body));
}

static int
file_digest (const char *path, char digest[KIWI_STORE_DIGEST_MAX], uint64_t *size, kiwi_error_t *err)
{
    cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening %s", path);
    kiwi_sha256 sha;
    kiwi_sha256_init (&sha);
    char buf[1 << 16];
    ssize_t n;
    *size = 0;
    while ((n = read (fd, buf, sizeof buf)) > 0) {
        kiwi_sha256_update (&sha, buf, (size_t) n);
        *size += (uint64_t) n;
    }
    if (n < 0)
        return kiwi_error_make (err, errno, "reading %s", path);
    digest_of (&sha, digest);
    return 0;
}

/* Uploads one blob (a file, or `mem` when path is NULL) unless the store
 * holds it already. */
static int
push_blob (kiwi_store *s, const char *path, const char *mem, size_t mem_len, const char *digest, uint64_t size,
           kiwi_error_t *err)
{
    long status = 0;
    cleanup_free char *head = repo_url (s, "blobs", digest);
    cleanup_free char *start = repo_url (s, "blobs", "uploads/");
    cleanup_free char *put = NULL;
    response r = { .fd = -1, .max = 65536 };
    if (head == NULL || start == NULL)
        return kiwi_error_make (err, ENOMEM, "store");
    request q = { .method = "HEAD", .url = head };
    if (perform (s, &q, &r, &status, err) < 0)
        goto fail;
    response_clear (&r);
    if (status == 200)
        return 0;
    r = (response) { .fd = -1, .max = 65536 };
    q = (request) { .method = "POST", .url = start };
    if (perform (s, &q, &r, &status, err) < 0)
        goto fail;
    if (status != 202 || r.location[0] == '\0') {
        status_error ("starting an upload", status, &r, err);
        goto fail;
    }
    bool absolute = strncmp (r.location, "http://", 7) == 0 || strncmp (r.location, "https://", 8) == 0;
    if (asprintf (&put, "%s%s%cdigest=%s", absolute ? "" : s->base, r.location, strchr (r.location, '?') ? '&' : '?',
                  digest)
        < 0) {
        kiwi_error_make (err, ENOMEM, "store");
        goto fail;
    }
    response_clear (&r);
    r = (response) { .fd = -1, .max = 65536 };
    FILE *f = NULL;
    if (path != NULL && (f = fopen (path, "rbe")) == NULL) {
        kiwi_error_make (err, errno, "opening %s", path);
        goto fail;
    }
    q = (request) { .method = "PUT", .url = put, .content_type = "application/octet-stream", .upload = f,
                    .upload_len = size, .body = mem, .body_len = mem_len };
    int rc = perform (s, &q, &r, &status, err);
    if (f)
        fclose (f);
    if (rc < 0)
        goto fail;
    if (status != 201) {
        status_error ("uploading a blob", status, &r, err);
        goto fail;
    }
    response_clear (&r);
    return 0;
fail:
    response_clear (&r);
    return kiwi_error_wrap (err, "pushing blob %s", digest);
}

int
kiwi_store_push (kiwi_store *s, const char *key, const char *snapshot_dir, char digest[KIWI_STORE_DIGEST_MAX],
                 kiwi_error_t *err)
{
    digest[0] = '\0';
    kiwi_store_part parts[KIWI_STORE_PARTS];
    size_t np = 0;
    for (size_t i = 0; i < KIWI_STORE_PARTS; i++) {
        char p[PATH_MAX];
        snprintf (p, sizeof p, "%s/%s", snapshot_dir, part_names[i]);
        if (i >= 2 && access (p, F_OK) < 0 && errno == ENOENT)
            break; /* the fetch manifest: a snapshot made without one */
        np = i + 1;
        snprintf (parts[i].name, sizeof parts[i].name, "%s", part_names[i]);
        if (file_digest (p, parts[i].digest, &parts[i].size, err) < 0
            || push_blob (s, p, NULL, 0, parts[i].digest, parts[i].size, err) < 0)
            return kiwi_error_wrap (err, "sharing the snapshot %s", key);
    }
    /* the config: what the snapshot is, for a person browsing the store */
    cleanup_free char *config = NULL;
    if (asprintf (&config, "{\"kiwi.install-key\":\"%s\"}", key) < 0)
        return kiwi_error_make (err, ENOMEM, "store");
    kiwi_sha256 sha;
    kiwi_sha256_init (&sha);
    kiwi_sha256_update (&sha, config, strlen (config));
    char config_digest[KIWI_STORE_DIGEST_MAX];
    digest_of (&sha, config_digest);
    if (push_blob (s, NULL, config, strlen (config), config_digest, strlen (config), err) < 0)
        return kiwi_error_wrap (err, "sharing the snapshot %s", key);
    json_t *layers = json_array ();
    for (size_t i = 0; i < np; i++)
        json_array_append_new (layers, json_pack ("{s:s,s:s,s:I,s:{s:s}}", "mediaType", part_types[i], "digest",
                                                  parts[i].digest, "size", (json_int_t) parts[i].size, "annotations",
                                                  TITLE_ANNOTATION, parts[i].name));
    json_t *m = json_pack ("{s:i,s:s,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2, "mediaType", MANIFEST_TYPE,
                           "artifactType", KIWI_STORE_ARTIFACT_TYPE, "config", "mediaType", KIWI_STORE_CONFIG_TYPE,
                           "digest", config_digest, "size", (json_int_t) strlen (config), "layers", layers);
    cleanup_free char *body = m ? json_dumps (m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref (m);
    if (body == NULL)
        return kiwi_error_make (err, ENOMEM, "store");
    kiwi_sha256_init (&sha);
    kiwi_sha256_update (&sha, body, strlen (body));
    digest_of (&sha, digest);
    cleanup_free char *url = repo_url (s, "manifests", key);
    response r = { .fd = -1, .max = 65536 };
    long status = 0;
    request q = { .method = "PUT", .url = url, .content_type = MANIFEST_TYPE, .body = body, .body_len = strlen (body) };
    int rc = perform (s, &q, &r, &status, err);
    if (rc == 0 && status != 201)
        rc = status_error ("storing the manifest", status, &r, err);
    if (rc == 0 && r.digest[0] != '\0' && strcmp (r.digest, digest) != 0)
        rc = kiwi_error_make (err, 0, "the store names the manifest %s, not %s", r.digest, digest);
    response_clear (&r);
    if (rc < 0) {
        digest[0] = '\0';
        return kiwi_error_wrap (err, "sharing the snapshot %s", key);
    }
    return 0;
}

/* Downloads one blob into dest_dir/name, checked; written to a .partial
 * file renamed when it matches. */
static int
pull_blob (kiwi_store *s, const kiwi_store_part *part, const char *dest_dir, uint64_t max_bytes, kiwi_error_t *err)
{
    if (max_bytes > 0 && part->size > max_bytes)
        return kiwi_error_make (err, EFBIG, "snapshot part %s is %llu bytes, over the %llu allowed", part->name,
                                (unsigned long long) part->size, (unsigned long long) max_bytes);
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    snprintf (path, sizeof path, "%s/%s", dest_dir, part->name);
    snprintf (tmp, sizeof tmp, "%s.partial", path);
    int fd = open (tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return kiwi_error_make (err, errno, "creating %s", tmp);
    kiwi_store_blob_check check;
    kiwi_store_blob_check_init (&check);
    /* one byte more than announced is enough to refuse a longer blob */
    response r = { .fd = fd, .check = &check, .max = (size_t) part->size + 1 };
    cleanup_free char *url = repo_url (s, "blobs", part->digest);
    long status = 0;
    request q = { .method = "GET", .url = url };
    int rc = url ? perform (s, &q, &r, &status, err) : kiwi_error_make (err, ENOMEM, "store");
    if (rc == 0 && status != 200)
        rc = kiwi_error_make (err, 0, "GET %s: the store answered %ld", url, status);
    if (rc == 0)
        rc = kiwi_store_blob_check_end (&check, part->digest, part->size, err);
    if (rc == 0 && fsync (fd) < 0)
        rc = kiwi_error_make (err, errno, "writing %s", tmp);
    close (fd);
    if (rc == 0 && rename (tmp, path) < 0)
        rc = kiwi_error_make (err, errno, "renaming %s", tmp);
    if (rc < 0)
        unlink (tmp);
    return rc < 0 ? kiwi_error_wrap (err, "fetching %s", part->name) : 0;
}

int
kiwi_store_pull (kiwi_store *s, const char *digest, const char *dest_dir, uint64_t max_bytes, kiwi_error_t *err)
{
    if (!kiwi_store_digest_valid (digest))
        return kiwi_error_make (err, 0, "`%s` is not a sha256 digest", digest);
    cleanup_free char *url = repo_url (s, "manifests", digest);
    response r = { .fd = -1, .max = MANIFEST_MAX };
    long status = 0;
    request q = { .method = "GET", .url = url, .accept = MANIFEST_TYPE };
    int rc = url ? perform (s, &q, &r, &status, err) : kiwi_error_make (err, ENOMEM, "store");
    if (rc == 0 && status != 200)
        rc = status_error ("fetching the manifest", status, &r, err);
    kiwi_store_part parts[KIWI_STORE_PARTS];
    if (rc == 0)
        rc = kiwi_store_check_manifest (kiwi_buf_str (&r.body), r.len, digest, parts, err);
    response_clear (&r);
    for (size_t i = 0; rc == 0 && i < KIWI_STORE_PARTS; i++)
        if (parts[i].name[0] != '\0')
            rc = pull_blob (s, &parts[i], dest_dir, max_bytes, err);
    return rc < 0 ? kiwi_error_wrap (err, "fetching the snapshot %s from the store", digest) : 0;
}
