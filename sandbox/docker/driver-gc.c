/*
 * driver-gc.c: the Docker driver's gc_images (both flavours): the images
 * Kiwi pulled for tasks (image-gc.h's record under <state>/images), those
 * unused for too long and, above the watermark of Docker's storage
 * (DockerRootDir from /info, statvfs), the least recently used; never an
 * image a container is of (any container: a running sandbox, one being
 * made), never the catalogue's, never one Kiwi did not pull (see sandbox.h,
 * kiwi_sandbox_gc_images).
 *
 * Removal is DELETE /images/<reference> without force: the reference Kiwi
 * pulled is untagged, the image itself goes only when nothing else names
 * it; then the older Ids the reference stood for (a tag that moved), again
 * without force (dockerd refuses one another name or a container holds).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strv.h"
#include "sandbox/docker/docker-api.h"
#include "sandbox/docker/docker-internal.h"
#include "sandbox/docker/image-gc.h"

/* Docker's storage: percent used as df counts, and its size. */
static double
storage_usage (kiwi_docker *api, uint64_t *total)
{
    *total = 0;
    json_t *info = NULL;
    kiwi_error_t e = NULL;
    if (kiwi_docker_call (api, "GET", "/info", NULL, 15000, &info, NULL, &e) < 0) {
        kiwi_warn ("image clean-up: no watermark: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        return -1;
    }
    const char *root = json_string_value (json_object_get (info, "DockerRootDir"));
    struct statvfs sv;
    double pct = -1;
    if (root != NULL && statvfs (root, &sv) == 0 && sv.f_blocks > 0) {
        uint64_t used = (uint64_t) (sv.f_blocks - sv.f_bfree);
        uint64_t avail = used + (uint64_t) sv.f_bavail;
        *total = (uint64_t) sv.f_blocks * sv.f_frsize;
        pct = avail ? 100.0 * (double) used / (double) avail : -1;
    } else
        kiwi_warn ("image clean-up: no watermark: Docker's storage %s cannot be measured from here: %s",
                   root ? root : "(unnamed)", root ? strerror (errno) : "no DockerRootDir");
    json_decref (info);
    return pct;
}

/* The image Ids every container (running or not) is of. */
static int
container_images (kiwi_docker *api, kiwi_strv *ids, kiwi_error_t *err)
{
    json_t *list = NULL;
    if (kiwi_docker_call (api, "GET", "/containers/json?all=1", NULL, 30000, &list, NULL, err) < 0)
        return kiwi_error_wrap (err, "image clean-up: listing containers");
    size_t i;
    json_t *c;
    int rc = 0;
    json_array_foreach (list, i, c) {
        const char *id = json_string_value (json_object_get (c, "ImageID"));
        if (id != NULL && !kiwi_strv_contains (ids, id) && kiwi_strv_add (ids, id) < 0)
            rc = kiwi_error_make (err, ENOMEM, "image clean-up");
    }
    json_decref (list);
    return rc;
}

/* DELETE /images/<name> without force: 0 removed or already gone, < 0 kept
 * (in use, another name holds it, the daemon failed), the reason logged. */
static int
remove_image (kiwi_docker *api, const char *name)
{
    char path[1200];
    snprintf (path, sizeof path, "/images/%s", name);
    long status = 0;
    kiwi_error_t e = NULL;
    if (kiwi_docker_call (api, "DELETE", path, NULL, 120000, NULL, &status, &e) == 0 || status == 404) {
        kiwi_error_free (&e);
        return 0;
    }
    kiwi_info ("image clean-up: %s kept: %s", name, kiwi_error_msg (e));
    kiwi_error_free (&e);
    return -1;
}

/* Removes a record's image: its reference, then its older Ids; the record
 * goes when the reference is gone. */
static int
remove_record (kiwi_docker *api, const kiwi_image_record *r)
{
    if (remove_image (api, r->ref) < 0)
        return -1;
    for (size_t i = 0; i < r->ids.n; i++) {
        char path[200];
        snprintf (path, sizeof path, "/images/%s/json", r->ids.v[i]);
        long status = 0;
        kiwi_error_t e = NULL;
        if (kiwi_docker_call (api, "GET", path, NULL, 30000, NULL, &status, &e) == 0)
            remove_image (api, r->ids.v[i]);
        kiwi_error_free (&e);
    }
    if (unlink (r->file) < 0 && errno != ENOENT)
        kiwi_warn ("image clean-up: %s: %s", r->file, strerror (errno));
    return 0;
}

int
kiwi__docker_gc_images (void *priv, kiwi_sandbox_image_gc *gc, kiwi_error_t *err)
{
    kiwi__docker_priv *p = priv;
    kiwi_image_record *recs = NULL;
    size_t n = 0;
    if (kiwi_image_records_read (p->pull.record_dir, &recs, &n, err) < 0)
        return -1;
    cleanup_strv kiwi_strv used = KIWI_STRV_INIT;
    kiwi_image_gc_item *items = calloc (n ? n : 1, sizeof *items);
    if (items == NULL) {
        kiwi_image_records_free (recs, n);
        return kiwi_error_make (err, ENOMEM, "image clean-up");
    }
    if (container_images (p->api, &used, err) < 0) {
        free (items);
        kiwi_image_records_free (recs, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        kiwi_image_gc_item *it = &items[i];
        it->ref = recs[i].ref;
        it->last_used_s = recs[i].last_used_s;
        it->catalogue = kiwi_image_catalog_by_ref (p->pull.catalog, recs[i].ref) != NULL;
        char path[1200];
        snprintf (path, sizeof path, "/images/%s/json", recs[i].ref);
        json_t *info = NULL;
        long status = 0;
        kiwi_error_t e = NULL;
        if (kiwi_docker_call (p->api, "GET", path, NULL, 30000, &info, &status, &e) == 0) {
            it->size = (uint64_t) json_integer_value (json_object_get (info, "Size"));
            const char *id = json_string_value (json_object_get (info, "Id"));
            it->in_use = id != NULL && kiwi_strv_contains (&used, id);
            json_decref (info);
        } else if (status != 404)
            it->in_use = true; /* cannot tell: kept */
        kiwi_error_free (&e);
        for (size_t k = 0; k < recs[i].ids.n; k++)
            it->in_use = it->in_use || kiwi_strv_contains (&used, recs[i].ids.v[k]);
        gc->in_use += it->in_use;
    }
    uint64_t total = 0;
    kiwi_image_gc_policy pol = { .now_s = gc->now_s ? gc->now_s : kiwi_wall_ms () / 1000,
                                 .idle_s = gc->idle_s,
                                 .grace_s = gc->grace_s,
                                 .disk_high = gc->disk_high,
                                 .disk_low = gc->disk_low };
    pol.used_pct = gc->disk_high > 0 ? storage_usage (p->api, &total) : -1;
    pol.total_bytes = total;
    gc->used_before = pol.used_pct;
    kiwi_image_gc_select (items, n, &pol);
    for (size_t i = 0; i < n; i++) {
        if (!items[i].remove)
            continue;
        if (remove_record (p->api, &recs[i]) < 0) {
            gc->failed++;
            continue;
        }
        kiwi_info ("image clean-up: removed %s (%s, %" PRIu64 " MB)", recs[i].ref,
                   items[i].by_watermark ? "the disk watermark" : "unused", items[i].size >> 20);
        gc->removed++;
        gc->removed_watermark += items[i].by_watermark;
    }
    free (items);
    kiwi_image_records_free (recs, n);
    return 0;
}
