/*
 * driver-pull.c: the Docker driver's ensure_image (both flavours):
 * an image dockerd has is used as it is; a missing one is pulled through
 * POST /images/create, from an allowed registry only, with the registry's
 * credentials in X-Registry-Auth, bounded in time and size, reporting its
 * progress (see sandbox.h, kiwi_sandbox_ensure_image).
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

/* GET /images/<ref>/json: 1 with *size set when present, 0 when missing. */
static int
image_present (kiwi_docker *api, const char *ref, int64_t *size, kiwi_error_t *err)
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
    if (size)
        *size = json_integer_value (json_object_get (info, "Size"));
    json_decref (info);
    return 1;
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
    int here = image_present (api, image, NULL, err);
    if (here != 0)
        return here < 0 ? -1 : 0;
    const char *allow = cfg->registries ? cfg->registries : "";
    if (!kiwi_registry_allowed (allow, r.domain))
        return kiwi_error_make_code (err, KIWI_SBE_REFUSED,
                                     "its registry %s is not on the allow-list (KIWI_IMAGE_REGISTRIES: %s)",
                                     r.domain, *allow ? allow : "none");
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
        if (kiwi_registry_auth_header (cfg->auth_file, r.domain, &auth, err) < 0)
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
    int64_t size = 0;
    here = image_present (api, image, &size, err);
    if (here < 0)
        return -1;
    if (here == 0)
        return kiwi_error_make_code (err, KIWI_SBE_NO_IMAGE, "the pull of %s ended without the image", image);
    if ((uint64_t) size > (uint64_t) max_mb << 20) {
        char del[1024];
        snprintf (del, sizeof del, "/images/%s?force=1", image);
        kiwi_error_t e = NULL;
        kiwi_docker_call (api, "DELETE", del, NULL, 60000, NULL, NULL, &e);
        kiwi_error_free (&e);
        return kiwi_error_make_code (err, KIWI_SBE_REFUSED,
                                     "it is %" PRId64 " MB, over %" PRId64
                                     " MB (KIWI_IMAGE_PULL_MAX_MB); removed again",
                                     size >> 20, max_mb);
    }
    if (progress)
        progress (image, (uint64_t) size, (uint64_t) size, userdata);
    kiwi_info ("pulled image %s (%" PRId64 " MB)", image, size >> 20);
    *pulled = true;
    return 0;
}
