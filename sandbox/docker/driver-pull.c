/*
 * driver-pull.c: the Docker driver's ensure_image (both flavours): an
 * image of the catalogue that dockerd has is used as it is; any other, and
 * a missing one, is pulled through POST /images/create, from an allowed
 * registry or repository only, with the credentials the operator scoped to
 * it in X-Registry-Auth, bounded in time and size, a pinned digest held to,
 * reporting its progress (see sandbox.h, kiwi_sandbox_ensure_image); what
 * a pull brought is recorded for the clean-up (image-gc.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "sandbox/docker/docker-api.h"
#include "sandbox/docker/docker-internal.h"
#include "sandbox/docker/image-gc.h"
#include "sandbox/docker/image-pull.h"
#include "common/log.h"

typedef struct {
    kiwi_pull_stream st;
    uint64_t max_bytes;
    int64_t deadline;     /* kiwi_mono_ms */
    bool too_big, timed_out;
    const char *image;
    kiwi_pull_progress_cb progress;
    void *userdata;
} pull_ctx;

static int
pull_sink (const char *data, size_t len, void *userdata)
{
    pull_ctx *c = userdata;
    if (kiwi_pull_stream_feed (&c->st, data, len) < 0)
        return -1;
    if (c->st.bytes_total > c->max_bytes) {
        c->too_big = true;
        return -1;
    }
    return 0;
}

static int
pull_tick (void *userdata)
{
    pull_ctx *c = userdata;
    if (kiwi_mono_ms () >= c->deadline) {
        c->timed_out = true;
        return -1;
    }
    if (kiwi_sandbox_cancelled ())
        return -1;
    if (c->progress)
        c->progress (c->image, c->st.bytes_done, c->st.bytes_total, c->userdata);
    return 0;
}

/* GET /images/<ref>/json: 1 with *out (optional, the caller's) set when
 * present, 0 when missing. */
static int
image_present (kiwi_docker *api, const char *ref, json_t **out, kiwi_error_t *err)
{
    char path[1024];
    snprintf (path, sizeof path, "/images/%s/json", ref);
    json_t *info = NULL;
    long status = 0;
    if (kiwi_docker_call (api, "GET", path, NULL, 30000, &info, &status, err) < 0) {
        if (status == 404) {
            kiwi_error_free (err);
            return 0;
        }
        return kiwi_error_wrap (err, "looking for image %s", ref);
    }
    if (out)
        *out = info;
    else
        json_decref (info);
    return 1;
}

/* Whether the image `info` holds the content the reference pins: one of
 * its RepoDigests is the reference's repository at its digest. */
static bool
digest_matches (json_t *info, const kiwi_image_ref *r)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get (info, "RepoDigests"), i, v) {
        kiwi_image_ref d;
        kiwi_error_t e = NULL;
        if (!json_is_string (v) || kiwi_image_ref_parse (json_string_value (v), &d, &e) < 0) {
            kiwi_error_free (&e);
            continue;
        }
        if (strcmp (d.domain, r->domain) == 0 && strcmp (d.path, r->path) == 0 && strcmp (d.digest, r->digest) == 0)
            return true;
    }
    return false;
}

/* The record of what Kiwi pulled (image-gc.h); a failure to write it is
 * logged: the image is there for the task all the same. */
static void
note_pull (const kiwi__docker_pull_cfg *cfg, const char *image, json_t *info, bool was_here)
{
    const char *id = json_string_value (json_object_get (info, "Id"));
    if (cfg->record_dir == NULL || id == NULL)
        return;
    kiwi_error_t e = NULL;
    if (kiwi_image_record_note (cfg->record_dir, image, id, !was_here, &e) < 0)
        kiwi_warn ("pulled image %s is not recorded for the clean-up: %s", image, kiwi_error_msg (e));
    kiwi_error_free (&e);
}

int
kiwi__docker_ensure_image (kiwi_docker *api, const kiwi__docker_pull_cfg *cfg, const char *image,
                           kiwi_pull_progress_cb progress, void *userdata, bool *pulled, kiwi_error_t *err)
{
    *pulled = false;
    kiwi_image_ref r;
    if (kiwi_image_ref_parse (image, &r, err) < 0)
        return (*err)->code = KIWI_SBE_INVALID, -1;
    /* the name as written is what create and the catalogue use; a reference
     * that parsed has only the characters a path may carry */
    bool operator_image = cfg->catalog != NULL && kiwi_image_catalog_by_ref (cfg->catalog, image) != NULL;
    json_t *before = NULL;
    int here = image_present (api, image, &before, err);
    if (here < 0)
        return -1;
    /* the catalogue's images are the operator's: one dockerd has is used as
     * it is. Any other is pulled again even when present (a manifest
     * request when nothing changed): what the registry and its credentials
     * give for the reference is what runs, never an image that is here
     * because another task, tenant or the operator put it there */
    if (here == 1 && operator_image) {
        json_decref (before);
        return 0;
    }
    cleanup_free char *before_id = here == 1 ? strdup (json_string_value (json_object_get (before, "Id")) ?: "") : NULL;
    json_decref (before);
    if (here == 1 && before_id == NULL)
        return kiwi_error_make (err, ENOMEM, "image %s", image);
    const char *allow = cfg->registries ? cfg->registries : "";
    if (!kiwi_image_allowed (allow, &r))
        return kiwi_error_make_code (err, KIWI_SBE_REFUSED,
                                     "its registry %s is not on the allow-list, nor is its repository %s/%s "
                                     "(KIWI_IMAGE_REGISTRIES: %s)%s",
                                     r.domain, r.domain, r.path, *allow ? allow : "none",
                                     operator_image ? "" : " and the image catalogue (KIWI_IMAGE_CATALOG) does not name it");
    char name[800];
    kiwi_image_ref_name (&r, name, sizeof name);
    cleanup_free char *qname = kiwi_docker_urlencode (api, name);
    cleanup_free char *qtag = kiwi_docker_urlencode (api, r.digest[0] ? r.digest : r.tag);
    if (qname == NULL || qtag == NULL)
        return kiwi_error_make (err, ENOMEM, "pulling %s", image);
    char path[2048];
    snprintf (path, sizeof path, "/images/create?fromImage=%s&tag=%s", qname, qtag);
    char *auth = NULL, *header = NULL;
    if (cfg->auth_file != NULL && *cfg->auth_file) {
        if (kiwi_registry_auth_header (cfg->auth_file, &r, operator_image, &auth, err) < 0)
            return kiwi_error_wrap (err, "pulling %s", image);
        if (auth != NULL && asprintf (&header, "X-Registry-Auth: %s", auth) < 0)
            header = NULL;
        kiwi_registry_auth_free (auth);
        if (header == NULL && auth != NULL)
            return kiwi_error_make (err, ENOMEM, "pulling %s", image);
    }
    int64_t timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : KIWI_PULL_DEFAULT_TIMEOUT_MS;
    int64_t max_mb = cfg->max_mb > 0 ? cfg->max_mb : KIWI_PULL_DEFAULT_MAX_MB;
    pull_ctx c = { .max_bytes = (uint64_t) max_mb << 20, .deadline = kiwi_mono_ms () + timeout, .image = image,
                   .progress = progress, .userdata = userdata };
    kiwi_pull_stream_init (&c.st);
    kiwi_info ("pulling image %s from %s", image, r.domain);
    long status = 0;
    int rc = kiwi_docker_request_stream_header (api, "POST", path, header, NULL, NULL, 0, (long) timeout + 5000,
                                                pull_sink, &c, pull_tick, 1000, &status, err);
    kiwi_registry_auth_free (header);
    kiwi_pull_stream_finish (&c.st);
    uint64_t seen = c.st.bytes_total;
    char why[600] = "";
    int code = KIWI_SBE_NO_IMAGE;
    if (c.too_big) {
        code = KIWI_SBE_REFUSED;
        snprintf (why, sizeof why, "its layers are over %" PRId64 " MB (KIWI_IMAGE_PULL_MAX_MB; %" PRIu64 " MB seen)",
                  max_mb, seen >> 20);
    } else if (c.timed_out || (rc < 0 && kiwi_error_code (*err) == 28 /* CURLE_OPERATION_TIMEDOUT */)) {
        code = KIWI_SBE_TIMEOUT;
        snprintf (why, sizeof why, "the pull took longer than %" PRId64 " s (KIWI_IMAGE_PULL_TIMEOUT)",
                  timeout / 1000);
    } else if (kiwi_sandbox_cancelled ()) {
        code = KIWI_SBE_CANCELLED;
        snprintf (why, sizeof why, "cancelled");
    } else if (rc < 0) {
        /* the daemon's own words, without the request line ("docker POST
         * /images/create?...: HTTP 404: manifest ... not found") */
        const char *m = kiwi_error_msg (*err);
        const char *h = status >= 400 ? strstr (m, ": HTTP ") : NULL;
        h = h ? strstr (h + 7, ": ") : NULL;
        snprintf (why, sizeof why, "%s%s", h ? h + 2 : m, status == 404 ? " (not found)" : "");
    }
    else if (c.st.error[0])
        snprintf (why, sizeof why, "%s", c.st.error);
    kiwi_pull_stream_clear (&c.st);
    if (why[0]) {
        kiwi_error_free (err);
        /* a partial pull leaves nothing tagged: there is nothing to remove */
        return kiwi_error_make_code (err, code, "%s", why);
    }
    json_t *info = NULL;
    here = image_present (api, image, &info, err);
    if (here < 0)
        return -1;
    if (here == 0)
        return kiwi_error_make_code (err, KIWI_SBE_NO_IMAGE, "the pull of %s ended without the image", image);
    int64_t size = json_integer_value (json_object_get (info, "Size"));
    const char *id = json_string_value (json_object_get (info, "Id"));
    bool changed = before_id == NULL || id == NULL || strcmp (before_id, id) != 0;
    if ((uint64_t) size > (uint64_t) max_mb << 20 || (r.digest[0] && !digest_matches (info, &r))) {
        bool big = (uint64_t) size > (uint64_t) max_mb << 20;
        json_decref (info);
        /* only what this pull brought is removed again: an image that was
         * here before is someone else's */
        if (before_id == NULL) {
            char del[1024];
            snprintf (del, sizeof del, "/images/%s?force=1", image);
            kiwi_error_t e = NULL;
            kiwi_docker_call (api, "DELETE", del, NULL, 60000, NULL, NULL, &e);
            kiwi_error_free (&e);
        }
        if (!big)
            return kiwi_error_make_code (err, KIWI_SBE_REFUSED, "the image pulled is not the one its digest %s pins",
                                         r.digest);
        return kiwi_error_make_code (err, KIWI_SBE_REFUSED,
                                     "it is %" PRId64 " MB, over %" PRId64 " MB (KIWI_IMAGE_PULL_MAX_MB)%s",
                                     size >> 20, max_mb, before_id == NULL ? "; removed again" : "");
    }
    note_pull (cfg, image, info, before_id != NULL);
    json_decref (info);
    if (progress)
        progress (image, (uint64_t) size, (uint64_t) size, userdata);
    kiwi_info ("%s image %s (%" PRId64 " MB)", changed ? "pulled" : "checked", image, size >> 20);
    *pulled = changed;
    return 0;
}

int
kiwi__docker_pull_cfg_init (kiwi__docker_pull_cfg *pc, const kiwi_sandbox_config *cfg, const char *state_dir,
                            kiwi_error_t *err)
{
    memset (pc, 0, sizeof *pc);
    pc->registries = cfg->registries ? strdup (cfg->registries) : NULL;
    pc->auth_file = cfg->registry_auth_file && *cfg->registry_auth_file ? strdup (cfg->registry_auth_file) : NULL;
    pc->timeout_ms = cfg->pull_timeout_ms;
    pc->max_mb = cfg->pull_max_mb;
    if ((cfg->registries && pc->registries == NULL) || (pc->auth_file == NULL && cfg->registry_auth_file
                                                        && *cfg->registry_auth_file)
        || asprintf (&pc->record_dir, "%s/images", state_dir) < 0) {
        pc->record_dir = NULL;
        return kiwi_error_make (err, ENOMEM, "sandbox driver");
    }
    const char *cat = cfg->image_catalog && *cfg->image_catalog ? cfg->image_catalog : NULL;
    if (kiwi_image_catalog_open (cat, &pc->catalog, err) < 0)
        return kiwi_error_wrap (err, "the image catalogue (KIWI_IMAGE_CATALOG)");
    return 0;
}

void
kiwi__docker_pull_cfg_clear (kiwi__docker_pull_cfg *pc)
{
    free (pc->registries);
    free (pc->auth_file);
    free (pc->record_dir);
    kiwi_image_catalog_free (pc->catalog);
    memset (pc, 0, sizeof *pc);
}
