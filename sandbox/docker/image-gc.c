/*
 * image-gc.c: the record of pulled images and the collection's selection
 * (see image-gc.h). JSON is jansson's.
 */
#include "sandbox/docker/image-gc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/sha256.h"
#include "sandbox/docker/image-pull.h"

/* ------------------------------------------------------------- the record */

static json_t *
record_load (const char *path)
{
    json_error_t je;
    json_t *j = json_load_file (path, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_string (json_object_get (j, "ref")) || !json_is_array (json_object_get (j, "ids"))) {
        json_decref (j);
        return NULL;
    }
    return j;
}

int
kiwi_image_record_note (const char *dir, const char *ref, const char *id, bool pulled, kiwi_error_t *err)
{
    char hex[65], path[4096], tmp[4200];
    kiwi_sha256_hex (ref, hex);
    snprintf (path, sizeof path, "%s/%s", dir, hex);
    json_t *j = record_load (path);
    if (j == NULL && !pulled)
        return 0; /* not Kiwi's */
    if (j == NULL)
        j = json_pack ("{s:s,s:[]}", "ref", ref, "ids");
    if (j == NULL)
        return kiwi_error_make (err, ENOMEM, "image record");
    json_t *ids = json_object_get (j, "ids");
    bool known = false;
    size_t i;
    json_t *v;
    json_array_foreach (ids, i, v)
        known = known || (json_is_string (v) && strcmp (json_string_value (v), id) == 0);
    if (!known)
        json_array_append_new (ids, json_string (id));
    if (kiwi_fs_mkdir_p (dir, 0700) < 0) {
        json_decref (j);
        return kiwi_error_make (err, errno, "image record: mkdir %s", dir);
    }
    snprintf (tmp, sizeof tmp, "%s.%d.tmp", path, (int) getpid ());
    int rc = json_dump_file (j, tmp, JSON_COMPACT);
    json_decref (j);
    if (rc < 0 || rename (tmp, path) < 0) {
        int e = errno;
        unlink (tmp);
        return kiwi_error_make (err, e ? e : EIO, "image record %s", path);
    }
    return 0;
}

void
kiwi_image_records_free (kiwi_image_record *r, size_t n)
{
    for (size_t i = 0; r != NULL && i < n; i++) {
        free (r[i].ref);
        free (r[i].file);
        kiwi_strv_free (&r[i].ids);
    }
    free (r);
}

/* Whether a record's reference and Ids are what a pull writes: the
 * collection puts them in request paths. */
static bool
record_sane (json_t *j)
{
    kiwi_image_ref r;
    kiwi_error_t e = NULL;
    if (kiwi_image_ref_parse (json_string_value (json_object_get (j, "ref")), &r, &e) < 0) {
        kiwi_error_free (&e);
        return false;
    }
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get (j, "ids"), i, v) {
        const char *id = json_string_value (v);
        if (id == NULL || strncmp (id, "sha256:", 7) != 0 || strspn (id + 7, "0123456789abcdef") != strlen (id + 7))
            return false;
    }
    return true;
}

/* One record file into *out; 0 when it is not one. */
static int
record_read_one (const char *path, kiwi_image_record *out)
{
    memset (out, 0, sizeof *out);
    struct stat st;
    json_t *j = lstat (path, &st) == 0 && S_ISREG (st.st_mode) ? record_load (path) : NULL;
    if (j != NULL && !record_sane (j)) {
        json_decref (j);
        j = NULL;
    }
    if (j == NULL)
        return 0;
    out->ref = strdup (json_string_value (json_object_get (j, "ref")));
    out->file = strdup (path);
    out->last_used_s = (int64_t) st.st_mtime;
    size_t i;
    json_t *v;
    int rc = out->ref && out->file ? 1 : -1;
    json_array_foreach (json_object_get (j, "ids"), i, v)
        if (json_is_string (v) && kiwi_strv_add (&out->ids, json_string_value (v)) < 0)
            rc = -1;
    json_decref (j);
    return rc;
}

int
kiwi_image_records_read (const char *dir, kiwi_image_record **out, size_t *n, kiwi_error_t *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir (dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "image records %s", dir);
    size_t cap = 0;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir (d)) != NULL) {
        if (strlen (de->d_name) != 64) /* "." "..", a temporary file */
            continue;
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            kiwi_image_record *g = realloc (*out, nc * sizeof *g);
            if (g == NULL) {
                rc = kiwi_error_make (err, ENOMEM, "image records");
                break;
            }
            *out = g;
            cap = nc;
        }
        char path[4096];
        snprintf (path, sizeof path, "%s/%s", dir, de->d_name);
        int got = record_read_one (path, &(*out)[*n]);
        if (got < 0)
            rc = kiwi_error_make (err, ENOMEM, "image records");
        if (got != 0)
            (*n)++;
        else
            kiwi_warn ("image records: %s is not a record; left alone", path);
    }
    closedir (d);
    if (rc < 0) {
        kiwi_image_records_free (*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* ------------------------------------------------------------- selection */

static bool
keeps (const kiwi_image_gc_item *it)
{
    return it->in_use || it->catalogue;
}

size_t
kiwi_image_gc_select (kiwi_image_gc_item *items, size_t n, const kiwi_image_gc_policy *pol)
{
    size_t removed = 0;
    uint64_t freed = 0;
    for (size_t i = 0; i < n; i++) {
        kiwi_image_gc_item *it = &items[i];
        it->remove = it->by_watermark = false;
        if (keeps (it) || pol->idle_s <= 0 || pol->now_s - it->last_used_s <= pol->idle_s)
            continue;
        it->remove = true;
        freed += it->size;
        removed++;
    }
    if (pol->disk_high <= 0 || pol->used_pct < 0 || pol->total_bytes == 0)
        return removed;
    double pct = pol->used_pct - 100.0 * (double) freed / (double) pol->total_bytes;
    if (pol->used_pct <= pol->disk_high)
        return removed;
    while (pct > pol->disk_low) {
        kiwi_image_gc_item *oldest = NULL;
        for (size_t i = 0; i < n; i++) {
            kiwi_image_gc_item *it = &items[i];
            if (it->remove || keeps (it) || pol->now_s - it->last_used_s < pol->grace_s)
                continue;
            if (oldest == NULL || it->last_used_s < oldest->last_used_s)
                oldest = it;
        }
        if (oldest == NULL)
            break;
        oldest->remove = oldest->by_watermark = true;
        pct -= 100.0 * (double) oldest->size / (double) pol->total_bytes;
        removed++;
    }
    return removed;
}
