/*
 * image-pull.c: image references, the registry allow-list, registry
 * credentials and the pull's progress stream (see image-pull.h).
 *
 * The reference grammar is Docker's (distribution/reference), of which only
 * the split into registry, path, tag and digest is needed here; no Debian
 * library parses it for C, so it is written out. JSON is jansson's, base64
 * libcrypto's.
 */
#include "sandbox/docker/image-pull.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/cleanup.h"

/* ------------------------------------------------------------- references */

static const char *
canonical_domain (const char *d)
{
    if (strcasecmp (d, "index.docker.io") == 0 || strcasecmp (d, "registry-1.docker.io") == 0
        || strcasecmp (d, "docker.io") == 0)
        return "docker.io";
    return d;
}

static int
copy_part (char *dst, size_t cap, const char *src, size_t n, const char *what, const char *ref, kiwi_error_t *err)
{
    if (n >= cap)
        return kiwi_error_make (err, EINVAL, "image reference `%.200s`: %s too long", ref, what);
    memcpy (dst, src, n);
    dst[n] = '\0';
    return 0;
}

int
kiwi_image_ref_parse (const char *ref, kiwi_image_ref *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    if (ref == NULL || *ref == '\0')
        return kiwi_error_make (err, EINVAL, "empty image reference");
    for (const char *c = ref; *c; c++)
        if (!isgraph ((unsigned char) *c))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: a space or control character", ref);
    const char *at = strchr (ref, '@');
    size_t name_len = at ? (size_t) (at - ref) : strlen (ref);
    if (at != NULL && copy_part (out->digest, sizeof out->digest, at + 1, strlen (at + 1), "digest", ref, err) < 0)
        return -1;
    if (at != NULL && strchr (out->digest, ':') == NULL)
        return kiwi_error_make (err, EINVAL, "image reference `%.200s`: a digest is algorithm:hex", ref);
    /* the registry: a first component with '.', ':' or "localhost" */
    const char *rest = ref;
    const char *slash = memchr (ref, '/', name_len);
    if (slash != NULL) {
        size_t dl = (size_t) (slash - ref);
        bool is_domain
            = memchr (ref, '.', dl) || memchr (ref, ':', dl) || (dl == 9 && strncmp (ref, "localhost", 9) == 0);
        if (is_domain) {
            if (copy_part (out->domain, sizeof out->domain, ref, dl, "registry", ref, err) < 0)
                return -1;
            rest = slash + 1;
        }
    }
    if (out->domain[0] == '\0' || strcmp (canonical_domain (out->domain), "docker.io") == 0)
        snprintf (out->domain, sizeof out->domain, "docker.io");
    size_t rl = name_len - (size_t) (rest - ref);
    /* the tag: after the last ':' of the path's last component */
    const char *last = rest;
    for (const char *c = rest; c < rest + rl; c++)
        if (*c == '/')
            last = c + 1;
    const char *colon = memchr (last, ':', (size_t) (rest + rl - last));
    size_t pl = colon ? (size_t) (colon - rest) : rl;
    if (pl == 0)
        return kiwi_error_make (err, EINVAL, "image reference `%.200s`: no repository", ref);
    bool docker_io = strcmp (out->domain, "docker.io") == 0;
    bool single = memchr (rest, '/', pl) == NULL;
    if (docker_io && single) {
        if (pl + 8 >= sizeof out->path)
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: repository too long", ref);
        snprintf (out->path, sizeof out->path, "library/%.*s", (int) pl, rest);
    } else if (copy_part (out->path, sizeof out->path, rest, pl, "repository", ref, err) < 0)
        return -1;
    for (const char *c = out->path; *c; c++)
        if (!(islower ((unsigned char) *c) || isdigit ((unsigned char) *c) || strchr ("._-/", *c)))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: `%c` in the repository name", ref, *c);
    /* Docker's grammar: each component begins and ends with a letter or a
     * digit, so none is empty, `.` or `..` (the name goes into the Engine
     * API's paths) */
    for (const char *c = out->path; *c;) {
        size_t n = strcspn (c, "/");
        if (n == 0 || !isalnum ((unsigned char) c[0]) || !isalnum ((unsigned char) c[n - 1]))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: a repository component `%.*s`", ref,
                                    (int) n, c);
        c += n + (c[n] == '/');
        if (c[-1] == '/' && *c == '\0')
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: an empty repository component", ref);
    }
    /* a host name, an IPv4 or [IPv6] address, an optional port */
    for (const char *c = out->domain; *c; c++)
        if (!(isalnum ((unsigned char) *c) || strchr (".-:[]", *c)))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: `%c` in the registry", ref, *c);
    if (colon != NULL) {
        if (copy_part (out->tag, sizeof out->tag, colon + 1, (size_t) (rest + rl - colon - 1), "tag", ref, err) < 0)
            return -1;
        if (out->tag[0] == '\0')
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: empty tag", ref);
    } else if (at == NULL)
        snprintf (out->tag, sizeof out->tag, "latest");
    for (const char *c = out->tag; *c; c++)
        if (!(isalnum ((unsigned char) *c) || strchr ("._-", *c)))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: `%c` in the tag", ref, *c);
    for (const char *c = out->digest; *c; c++)
        if (!(isalnum ((unsigned char) *c) || strchr (":+._-", *c)))
            return kiwi_error_make (err, EINVAL, "image reference `%.200s`: `%c` in the digest", ref, *c);
    return 0;
}

const char *
kiwi_image_ref_name (const kiwi_image_ref *r, char *buf, size_t cap)
{
    snprintf (buf, cap, "%s/%s", r->domain, r->path);
    return buf;
}

/* Whether `entry` ("host" or "host/path-prefix") covers the reference: its
 * registry, and its repository path equal to the prefix or under it at a
 * `/`. *host_only says which form it was. */
static bool
entry_covers (const char *entry, size_t n, const kiwi_image_ref *r, bool *host_only)
{
    const char *slash = memchr (entry, '/', n);
    size_t hl = slash ? (size_t) (slash - entry) : n;
    *host_only = slash == NULL;
    char host[256];
    if (hl == 0 || hl >= sizeof host)
        return false;
    memcpy (host, entry, hl);
    host[hl] = '\0';
    if (strcasecmp (canonical_domain (host), canonical_domain (r->domain)) != 0)
        return false;
    if (slash == NULL)
        return true;
    const char *pre = slash + 1;
    size_t pl = n - hl - 1;
    while (pl > 0 && pre[pl - 1] == '/')
        pl--;
    if (pl == 0)
        return false;
    return strncmp (r->path, pre, pl) == 0 && (r->path[pl] == '\0' || r->path[pl] == '/');
}

/* Whether an entry of `list` covers the reference (`hosts_only`: entries
 * naming a whole registry only). */
static bool
list_covers (const char *list, const kiwi_image_ref *r, bool hosts_only)
{
    if (list == NULL || r->domain[0] == '\0')
        return false;
    const char *p = list;
    while (*p) {
        while (*p == ',' || isspace ((unsigned char) *p))
            p++;
        const char *e = p;
        while (*e && *e != ',' && !isspace ((unsigned char) *e))
            e++;
        bool host_only;
        if (e > p && entry_covers (p, (size_t) (e - p), r, &host_only) && (host_only || !hosts_only))
            return true;
        p = e;
    }
    return false;
}

bool
kiwi_registry_allowed (const char *allow_list, const char *domain)
{
    kiwi_image_ref r;
    memset (&r, 0, sizeof r);
    if (domain == NULL || strlen (domain) >= sizeof r.domain)
        return false;
    snprintf (r.domain, sizeof r.domain, "%s", domain);
    return list_covers (allow_list, &r, true);
}

bool
kiwi_image_allowed (const char *allow_list, const kiwi_image_ref *r)
{
    return list_covers (allow_list, r, false);
}

/* ------------------------------------------------------------- credentials */

void
kiwi_registry_auth_free (char *value)
{
    if (value == NULL)
        return;
    explicit_bzero (value, strlen (value));
    free (value);
}

/* The registry's own entry (Docker's keys: the host, https://host, and
 * docker.io's old names). */
static json_t *
host_entry (json_t *auths, const char *domain)
{
    json_t *e = json_object_get (auths, domain);
    if (e == NULL && strcmp (domain, "docker.io") == 0) {
        e = json_object_get (auths, "https://index.docker.io/v1/");
        if (e == NULL)
            e = json_object_get (auths, "index.docker.io");
    }
    if (e == NULL) {
        char url[300];
        snprintf (url, sizeof url, "https://%s", domain);
        e = json_object_get (auths, url);
    }
    return json_is_object (e) ? e : NULL;
}

/* The entry for the reference: the longest "host/path-prefix" key that
 * covers it; else, for an operator's image only, the registry's own
 * entry. *key_out names the key (borrowed from auths). */
static json_t *
auth_entry (json_t *auths, const kiwi_image_ref *r, bool operator_image, const char **key_out)
{
    const char *key, *best_key = NULL;
    json_t *v, *best = NULL;
    size_t best_len = 0;
    json_object_foreach (auths, key, v) {
        bool host_only = true;
        const char *k = strncmp (key, "https://", 8) == 0 ? key + 8 : key;
        size_t kl = strlen (k);
        if (!json_is_object (v) || !entry_covers (k, kl, r, &host_only) || host_only)
            continue;
        if (kl > best_len) {
            best = v;
            best_key = key;
            best_len = kl;
        }
    }
    if (best == NULL && operator_image) {
        best = host_entry (auths, canonical_domain (r->domain));
        best_key = r->domain;
    }
    *key_out = best_key;
    return best;
}

int
kiwi_registry_auth_header (const char *auth_file, const kiwi_image_ref *r, bool operator_image, char **value,
                           kiwi_error_t *err)
{
    *value = NULL;
    json_error_t je;
    json_t *cfg = json_load_file (auth_file, JSON_REJECT_DUPLICATES, &je);
    if (cfg == NULL)
        return kiwi_error_make (err, EINVAL, "registry credentials %s: not a JSON file (line %d)", auth_file,
                                je.line);
    int rc = 0;
    char *user = NULL, *pass = NULL, *decoded = NULL;
    const char *domain = r->domain, *key = NULL;
    json_t *e = auth_entry (json_object_get (cfg, "auths"), r, operator_image, &key);
    if (e == NULL)
        goto done;
    const char *token = json_string_value (json_object_get (e, "identitytoken"));
    const char *auth = json_string_value (json_object_get (e, "auth"));
    if (auth != NULL && *auth) {
        decoded = (char *) kiwi_base64_decode (auth, 65536, NULL);
        char *colon = decoded ? strchr (decoded, ':') : NULL;
        if (colon == NULL) {
            rc = kiwi_error_make (err, EINVAL, "registry credentials %s: the entry for %s has an `auth` that is not "
                                  "base64 of user:password", auth_file, key);
            goto done;
        }
        *colon = '\0';
        user = strdup (decoded);
        pass = strdup (colon + 1);
    } else {
        const char *u = json_string_value (json_object_get (e, "username"));
        const char *p = json_string_value (json_object_get (e, "password"));
        if (u != NULL && p != NULL) {
            user = strdup (u);
            pass = strdup (p);
        }
    }
    json_t *hdr = NULL;
    if (user != NULL && pass != NULL)
        hdr = json_pack ("{s:s,s:s,s:s}", "username", user, "password", pass, "serveraddress", domain);
    else if (token != NULL)
        hdr = json_pack ("{s:s,s:s}", "identitytoken", token, "serveraddress", domain);
    else {
        rc = kiwi_error_make (err, EINVAL, "registry credentials %s: the entry for %s has neither `auth`, "
                              "username/password nor `identitytoken`", auth_file, key);
        goto done;
    }
    char *text = hdr ? json_dumps (hdr, JSON_COMPACT) : NULL;
    json_decref (hdr);
    if (text != NULL) {
        /* base64url with padding (Go's base64.URLEncoding, as dockerd decodes it) */
        *value = kiwi_base64_form (text, strlen (text), true, true, NULL);
        kiwi_registry_auth_free (text);
    }
    rc = *value ? 1 : kiwi_error_make (err, ENOMEM, "registry credentials");
done:
    kiwi_registry_auth_free (user);
    kiwi_registry_auth_free (pass);
    kiwi_registry_auth_free (decoded);
    json_decref (cfg);
    return rc;
}

/* ------------------------------------------------------------- the stream */

#define PULL_LINE_MAX (64 * 1024)

void
kiwi_pull_stream_init (kiwi_pull_stream *s)
{
    memset (s, 0, sizeof *s);
}

void
kiwi_pull_stream_clear (kiwi_pull_stream *s)
{
    kiwi_buf_free (&s->line);
    free (s->layers);
    memset (s, 0, sizeof *s);
}

static kiwi_pull_layer *
layer (kiwi_pull_stream *s, const char *id)
{
    for (size_t i = 0; i < s->n_layers; i++)
        if (strcmp (s->layers[i].id, id) == 0)
            return &s->layers[i];
    if (s->n_layers >= KIWI_PULL_MAX_LAYERS)
        return NULL;
    if (s->layers == NULL) {
        s->layers = calloc (KIWI_PULL_MAX_LAYERS, sizeof *s->layers);
        if (s->layers == NULL)
            return NULL;
    }
    kiwi_pull_layer *l = &s->layers[s->n_layers++];
    snprintf (l->id, sizeof l->id, "%s", id);
    return l;
}

static void
sums (kiwi_pull_stream *s)
{
    s->bytes_total = s->bytes_done = 0;
    for (size_t i = 0; i < s->n_layers; i++) {
        s->bytes_total += s->layers[i].total;
        s->bytes_done += s->layers[i].current;
    }
}

static void
one_line (kiwi_pull_stream *s, const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\r' || isspace ((unsigned char) text[len - 1])))
        len--;
    if (len == 0)
        return;
    json_error_t je;
    json_t *j = json_loadb (text, len, 0, &je);
    if (!json_is_object (j)) {
        s->bad = true;
        json_decref (j);
        return;
    }
    const char *error = json_string_value (json_object_get (json_object_get (j, "errorDetail"), "message"));
    if (error == NULL)
        error = json_string_value (json_object_get (j, "error"));
    if (error != NULL && s->error[0] == '\0')
        snprintf (s->error, sizeof s->error, "%s", error);
    const char *status = json_string_value (json_object_get (j, "status"));
    const char *id = json_string_value (json_object_get (j, "id"));
    json_t *pd = json_object_get (j, "progressDetail");
    if (id != NULL && status != NULL) {
        kiwi_pull_layer *l = NULL;
        json_t *cur = json_object_get (pd, "current"), *tot = json_object_get (pd, "total");
        if (strcmp (status, "Downloading") == 0 && json_is_integer (tot) && json_integer_value (tot) > 0) {
            l = layer (s, id);
            if (l != NULL) {
                l->total = (uint64_t) json_integer_value (tot);
                if (json_is_integer (cur) && json_integer_value (cur) >= 0)
                    l->current = (uint64_t) json_integer_value (cur);
                if (l->current > l->total)
                    l->current = l->total;
            }
        } else if (strcmp (status, "Download complete") == 0 || strcmp (status, "Pull complete") == 0) {
            for (size_t i = 0; i < s->n_layers; i++)
                if (strcmp (s->layers[i].id, id) == 0)
                    s->layers[i].current = s->layers[i].total;
        }
        sums (s);
    } else if (status != NULL)
        snprintf (s->status, sizeof s->status, "%s", status);
    json_decref (j);
}

int
kiwi_pull_stream_feed (kiwi_pull_stream *s, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr (data, '\n', len);
        size_t n = nl != NULL ? (size_t) (nl - data) : len;
        if (!s->line_skip) {
            if (n > PULL_LINE_MAX - s->line.len) {
                s->bad = true;
                s->line_skip = true;
            } else if (kiwi_buf_append (&s->line, data, n, NULL) < 0)
                return -1;
        }
        if (nl == NULL)
            break;
        if (!s->line_skip)
            one_line (s, kiwi_buf_str (&s->line), s->line.len);
        kiwi_buf_reset (&s->line);
        s->line_skip = false;
        data += n + 1;
        len -= n + 1;
    }
    return 0;
}

int
kiwi_pull_stream_finish (kiwi_pull_stream *s)
{
    if (s->line.len > 0 && !s->line_skip)
        one_line (s, s->line.data, s->line.len);
    kiwi_buf_reset (&s->line);
    s->line_skip = false;
    return 0;
}
