/*
 * fetch-manifest.c: what one install downloaded (see fetch-manifest.h).
 */
#include "worker/egress/fetch-manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/sha256.h"
#include "worker/egress/fetch-digest.h"

typedef struct read_ctx {
    const char *client;
    kiwi_egress_window window;
    kiwi_fetch_manifest *m;
} read_ctx;

/* "scheme://host[:port]/path?query" into host and path (the rest, from its
 * first '/'); a URL of another shape is all path, with no host. */
static void
split_url (const char *url, char *host, size_t hcap, const char **path)
{
    const char *p = strstr (url, "://");
    host[0] = '\0';
    *path = url;
    if (p == NULL)
        return;
    p += 3;
    const char *slash = strchr (p, '/');
    size_t n = slash ? (size_t) (slash - p) : strlen (p);
    if (n >= hcap)
        n = hcap - 1;
    memcpy (host, p, n);
    host[n] = '\0';
    *path = slash ? slash : "/";
}

static void
manifest_line (char *line, void *ud)
{
    read_ctx *x = ud;
    kiwi_fetch_manifest *m = x->m;
    kiwi_digest_entry e;
    if (kiwi_digest_parse (line, &e) < 0 || strcmp (e.client, x->client) != 0
        || !kiwi_egress_in_window ((int64_t) (e.time * 1000.0 + 0.5), x->window))
        return;
    m->requests++;
    m->bytes += e.size;
    if (e.cut)
        m->cut++;
    else if (e.sha256 && e.status >= 200 && e.status < 300)
        m->files++;
    if (json_array_size (m->fetched) >= KIWI_FETCH_MANIFEST_MAX) {
        m->left_out++;
        return;
    }
    char host[256];
    const char *path;
    split_url (e.url, host, sizeof host, &path);
    json_t *o = json_pack ("{s:s,s:s?,s:s,s:i,s:I}", "method", e.method, "host", host[0] ? host : NULL, "path", path,
                           "status", e.status, "size", (json_int_t) e.size);
    if (o == NULL)
        return;
    if (e.sha256)
        json_object_set_new (o, "sha256", json_string (e.sha256));
    if (e.cut)
        json_object_set_new (o, "cut", json_true ());
    json_array_append_new (m->fetched, o);
}

int
kiwi_fetch_manifest_read (const char *log_path, kiwi_egress_log_pos from, const char *client,
                          kiwi_egress_window window, kiwi_fetch_manifest *m, kiwi_error_t *err)
{
    memset (m, 0, sizeof *m);
    if ((m->fetched = json_array ()) == NULL)
        return kiwi_error_make (err, ENOMEM, "the fetch manifest");
    read_ctx x = { .client = client, .window = window, .m = m };
    if (kiwi_egress_log_each (log_path, from, manifest_line, &x, &m->incomplete, err) < 0) {
        kiwi_fetch_manifest_clear (m);
        return kiwi_error_wrap (err, "the fetch manifest");
    }
    return 0;
}

int
kiwi_fetch_manifest_write (const kiwi_fetch_manifest *m, const char *path, char hex[65], kiwi_error_t *err)
{
    json_t *doc = json_pack ("{s:i,s:I,s:I,s:I,s:I,s:I,s:b,s:O}", "version", 1, "requests", (json_int_t) m->requests,
                             "bytes", (json_int_t) m->bytes, "files", (json_int_t) m->files, "cut",
                             (json_int_t) m->cut, "left_out", (json_int_t) m->left_out, "incomplete", m->incomplete,
                             "fetched", m->fetched);
    char *text = doc ? json_dumps (doc, JSON_INDENT (1) | JSON_PRESERVE_ORDER) : NULL;
    json_decref (doc);
    if (text == NULL)
        return kiwi_error_make (err, ENOMEM, "the fetch manifest");
    size_t len = strlen (text);
    char tmp[PATH_MAX];
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int rc = 0;
    if (fd < 0)
        rc = kiwi_error_make (err, errno, "writing %s", tmp);
    for (size_t off = 0; rc == 0 && off < len;) {
        ssize_t w = write (fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = kiwi_error_make (err, errno, "writing %s", tmp);
        else
            off += (size_t) w;
    }
    if (fd >= 0 && close (fd) < 0 && rc == 0)
        rc = kiwi_error_make (err, errno, "writing %s", tmp);
    if (rc == 0 && rename (tmp, path) < 0)
        rc = kiwi_error_make (err, errno, "renaming %s", tmp);
    if (rc < 0)
        unlink (tmp);
    else {
        kiwi_sha256 sha;
        unsigned char d[32];
        kiwi_sha256_init (&sha);
        kiwi_sha256_update (&sha, text, len);
        kiwi_sha256_final (&sha, d);
        kiwi_sha256_digest_hex (d, hex);
    }
    free (text);
    return rc;
}

json_t *
kiwi_fetch_manifest_summary (const kiwi_fetch_manifest *m, const char *hex)
{
    json_t *o = json_pack ("{s:I,s:I,s:I,s:s?,s:s?}", "requests", (json_int_t) m->requests, "bytes",
                           (json_int_t) m->bytes, "files", (json_int_t) m->files, "manifest",
                           hex ? "fetched.json" : NULL, "sha256", hex);
    if (o == NULL)
        return NULL;
    if (m->cut)
        json_object_set_new (o, "cut", json_integer (m->cut));
    if (m->left_out)
        json_object_set_new (o, "left_out", json_integer (m->left_out));
    if (m->incomplete)
        json_object_set_new (o, "incomplete", json_true ());
    return o;
}

void
kiwi_fetch_manifest_clear (kiwi_fetch_manifest *m)
{
    json_decref (m->fetched);
    memset (m, 0, sizeof *m);
}
