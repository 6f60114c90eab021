/*
 * resolve.c: devcontainers (JSONC, the image they name) and image
 * resolution in the spec's order: devcontainer, the test command's
 * executable, marker files (the runtime table's, root then one directory
 * down), the base image; and the swap to another runtime's image (see
 * image.h and docs/inspection.md).
 */
#include "inspect/image/image.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/enum.h"
#include "common/cleanup.h"
#include "inspect/runtime.h"

int
kiwi_jsonc_to_json (const char *in, size_t len, char **out, size_t *out_len, kiwi_error_t *err)
{
    char *o = malloc (len + 1);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "devcontainer.json");
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        char c = in[i];
        if (c == '"') { /* a string, copied as is */
            o[n++] = in[i++];
            while (i < len && in[i] != '"') {
                if (in[i] == '\\' && i + 1 < len)
                    o[n++] = in[i++];
                o[n++] = in[i++];
            }
            if (i < len)
                o[n++] = in[i++];
            continue;
        }
        if (c == '/' && i + 1 < len && in[i + 1] == '/') {
            while (i < len && in[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < len && in[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(in[i] == '*' && in[i + 1] == '/')) {
                if (in[i] == '\n')
                    o[n++] = '\n'; /* keep line numbers for jansson's errors */
                i++;
            }
            i = i + 2 <= len ? i + 2 : len;
            o[n++] = ' ';
            continue;
        }
        if (c == ',') { /* a trailing comma: the next significant character closes */
            size_t j = i + 1;
            for (;;) {
                while (j < len && isspace ((unsigned char) in[j]))
                    j++;
                if (j + 1 < len && in[j] == '/' && in[j + 1] == '/') {
                    while (j < len && in[j] != '\n')
                        j++;
                    continue;
                }
                if (j + 1 < len && in[j] == '/' && in[j + 1] == '*') {
                    j += 2;
                    while (j + 1 < len && !(in[j] == '*' && in[j + 1] == '/'))
                        j++;
                    j += 2;
                    continue;
                }
                break;
            }
            if (j < len && (in[j] == '}' || in[j] == ']')) {
                i++;
                continue;
            }
        }
        o[n++] = in[i++];
    }
    o[n] = '\0';
    *out = o;
    if (out_len)
        *out_len = n;
    return 0;
}

int
kiwi_devcontainer_image (const char *root, char **image, char **path, char **note, kiwi_error_t *err)
{
    static const char *const paths[] = { ".devcontainer/devcontainer.json", ".devcontainer.json" };
    *image = *path = NULL;
    if (note)
        *note = NULL;
    for (size_t i = 0; i < 2; i++) {
        size_t len = 0;
        cleanup_free char *text = kiwi__read_rel (root, paths[i], &len);
        if (text == NULL)
            continue;
        cleanup_free char *json = NULL;
        size_t jl = 0;
        if (kiwi_jsonc_to_json (text, len, &json, &jl, err) < 0)
            return -1;
        json_error_t je;
        json_t *doc = json_loadb (json, jl, 0, &je);
        if (doc == NULL || !json_is_object (doc)) {
            if (note && asprintf (note, "%s does not parse (line %d: %s)", paths[i], je.line, je.text) < 0)
                *note = NULL;
            json_decref (doc);
            return 0;
        }
        json_t *img = json_object_get (doc, "image");
        if (json_is_string (img) && json_string_length (img) > 0 && json_string_length (img) < 256) {
            *image = strdup (json_string_value (img));
            *path = strdup (paths[i]);
            json_decref (doc);
            if (*image == NULL || *path == NULL) {
                free (*image);
                free (*path);
                *image = *path = NULL;
                return kiwi_error_make (err, ENOMEM, "devcontainer");
            }
            return 1;
        }
        const char *how = json_object_get (doc, "dockerComposeFile") ? "a compose file"
                          : (json_object_get (doc, "build") || json_object_get (doc, "dockerFile")
                             || json_object_get (doc, "dockerfile"))
                              ? "a Dockerfile"
                              : NULL;
        if (note && asprintf (note, "%s %s", paths[i],
                              how ? (strcmp (how, "a Dockerfile") == 0 ? "builds its image from a Dockerfile (not used)"
                                                                        : "uses a compose file (not used)")
                                  : "names no image")
                        < 0)
            *note = NULL;
        json_decref (doc);
        return 0;
    }
    return 0;
}

KIWI_ENUM_STR_FN (kiwi_image_source_str, kiwi_image_source, KIWI_IMAGE_SOURCES)

void
kiwi_image_resolution_clear (kiwi_image_resolution *r)
{
    free (r->image);
    free (r->runtime);
    free (r->requirement);
    free (r->requirement_from);
    free (r->project_dir);
    free (r->reason);
    memset (r, 0, sizeof *r);
}

static const char *
dir_runtime (const char *root, const char *dir, const char **which)
{
    for (size_t r = 0; r < kiwi__n_runtimes; r++)
        for (const char *const *f = kiwi__runtimes[r].markers; *f; f++)
            if (kiwi__has_in (root, dir, *f)) {
                if (which)
                    *which = *f;
                return kiwi__runtimes[r].name;
            }
    return NULL;
}

static int
set_str (char **dst, const char *s, kiwi_error_t *err)
{
    free (*dst);
    *dst = strdup (s ? s : "");
    if (*dst == NULL)
        return kiwi_error_make (err, ENOMEM, "image resolution");
    return 0;
}

/* Picks the catalogue row for a runtime with the repository's markers (or
 * `forced` as the requirement) and fills out. Returns 1, or 0 when the
 * catalogue has no row for the runtime. */
static int
choose_for_runtime (kiwi__inspect_ctx *ctx, const char *dir, const char *runtime, const char *forced,
                    const char *forced_from, const kiwi_image_catalog *cat, kiwi_image_resolution *out,
                    kiwi_error_t *err)
{
    if (!kiwi_image_catalog_has_runtime (cat, runtime))
        return 0;
    cleanup_free char *req = NULL, *from = NULL;
    const kiwi__runtime *rt = kiwi__runtime_get (runtime);
    kiwi_version_prefer prefer = rt ? rt->prefer : KIWI_PREFER_HIGHEST;
    if (forced != NULL && *forced != '\0') {
        req = strdup (forced);
        from = strdup (forced_from ? forced_from : "");
        if (req == NULL || from == NULL)
            return kiwi_error_make (err, ENOMEM, "image resolution");
    } else if (kiwi__version_markers_ctx (ctx, dir, runtime, &req, &from, &prefer, err) < 0)
        return -1;
    bool sat = true;
    const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, runtime, req, prefer, &sat);
    if (e == NULL)
        return 0;
    if (set_str (&out->image, e->ref, err) < 0 || set_str (&out->runtime, runtime, err) < 0
        || set_str (&out->requirement, req, err) < 0 || set_str (&out->requirement_from, from, err) < 0
        || set_str (&out->project_dir, dir, err) < 0)
        return -1;
    out->satisfied = sat;
    return 1;
}

static int
set_reason (kiwi_image_resolution *out, kiwi_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
set_reason (kiwi_image_resolution *out, kiwi_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    free (out->reason);
    int n = vasprintf (&out->reason, fmt, ap);
    va_end (ap);
    if (n < 0) {
        out->reason = NULL;
        return kiwi_error_make (err, ENOMEM, "image resolution");
    }
    return 0;
}

/* "; .nvmrc asks for 22" / "; no image satisfies go.mod (go) >=1.21, nearest" */
static void
version_note (const kiwi_image_resolution *r, char *buf, size_t cap)
{
    if (r->requirement == NULL || r->requirement[0] == '\0')
        snprintf (buf, cap, "no version declared, the runtime's default");
    else if (r->satisfied)
        snprintf (buf, cap, "%s asks for %s", r->requirement_from, r->requirement);
    else
        snprintf (buf, cap, "%s asks for %s, which no image in the catalogue has: the nearest", r->requirement_from,
                  r->requirement);
}

/* True if `dir` holds a marker file of `runtime`. */
static bool
has_runtime_marker (const char *root, const char *dir, const char *runtime)
{
    const kiwi__runtime *rt = kiwi__runtime_get (runtime);
    for (const char *const *f = rt ? rt->markers : NULL; f && *f; f++)
        if (kiwi__has_in (root, dir, *f))
            return true;
    return false;
}

int
kiwi_image_for_runtime (const char *root, const char *dir, const char *runtime, const char *requirement,
                        const kiwi_image_catalog *cat, kiwi_image_resolution *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    /* the runtime's own project: `dir`, the root, or the first directory
     * one level down with its markers (a frontend in web/) */
    cleanup_free char *found = NULL;
    if (dir == NULL || !has_runtime_marker (root, dir, runtime)) {
        if (!has_runtime_marker (root, "", runtime)) {
            char **subs = kiwi__subdirs (root);
            for (size_t i = 0; subs && subs[i] && found == NULL; i++)
                if (has_runtime_marker (root, subs[i], runtime))
                    found = strdup (subs[i]);
            kiwi__strv_free_raw (subs);
        }
        dir = found ? found : "";
    }
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    int rc = ctx ? choose_for_runtime (ctx, dir, runtime, requirement, "the failure", cat, out, err)
                 : kiwi_error_make (err, ENOMEM, "image resolution");
    kiwi__ctx_free (ctx);
    if (rc <= 0) {
        kiwi_image_resolution_clear (out);
        return rc;
    }
    out->source = KIWI_IMAGE_FROM_SWAP;
    char note[512];
    version_note (out, note, sizeof note);
    if (set_reason (out, err, "swap to %s: %s", runtime, note) < 0) {
        kiwi_image_resolution_clear (out);
        return -1;
    }
    return 1;
}

int
kiwi__image_resolve_ctx (kiwi__inspect_ctx *ctx, const char *test_command, const kiwi_image_catalog *cat,
                         const char *refused, kiwi_image_resolution *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    const char *root = kiwi__ctx_root (ctx);
    char note[512];
    cleanup_free char *dir = NULL;
    /* 1. the devcontainer */
    cleanup_free char *dc_image = NULL, *dc_path = NULL, *dc_note = NULL;
    int dc = refused ? 0 : kiwi_devcontainer_image (root, &dc_image, &dc_path, &dc_note, err);
    if (dc < 0)
        return -1;
    if (refused != NULL && (dc_note = strdup (refused)) == NULL)
        return kiwi_error_make (err, ENOMEM, "image resolution");
    if (dc == 1) {
        const kiwi_image_entry *e = kiwi_image_catalog_by_ref (cat, dc_image);
        const char *rt = e ? e->runtime : kiwi_runtime_of_image_ref (dc_image);
        if (set_str (&out->image, dc_image, err) < 0 || set_str (&out->runtime, rt, err) < 0
            || set_str (&out->requirement, "", err) < 0 || set_str (&out->requirement_from, "", err) < 0
            || set_str (&out->project_dir, "", err) < 0
            || set_reason (out, err, "%s names %s (runtime %s)", dc_path, dc_image, rt ? rt : "unknown") < 0)
            goto fail;
        out->source = KIWI_IMAGE_FROM_DEVCONTAINER;
        out->satisfied = true;
        return 0;
    }
    const char *skipped_dc = dc_note ? dc_note : NULL;
    /* 2. the test command's executable */
    kiwi_command_info ci;
    if (kiwi_command_runtime (test_command, &ci)) {
        const char *forced = ci.version[0] ? ci.version : NULL;
        int rc = choose_for_runtime (ctx, ci.dir, ci.runtime, forced, "the command", cat, out, err);
        if (rc < 0)
            goto fail;
        if (rc == 1) {
            out->source = KIWI_IMAGE_FROM_COMMAND;
            version_note (out, note, sizeof note);
            if (set_reason (out, err, "the test command runs `%s` (%s)%s%s; %s%s%s", ci.exe, ci.runtime,
                            ci.dir[0] ? " in " : "", ci.dir, note, skipped_dc ? "; " : "",
                            skipped_dc ? skipped_dc : "")
                < 0)
                goto fail;
            return 0;
        }
        /* a runtime the catalogue lacks (deno, bun): the markers decide */
    }
    /* 3. marker files: the root, then one directory down */
    const char *which = NULL;
    const char *rt = dir_runtime (root, "", &which);
    if (rt == NULL) {
        char **subs = kiwi__subdirs (root);
        for (size_t i = 0; subs && subs[i] && rt == NULL; i++) {
            rt = dir_runtime (root, subs[i], &which);
            if (rt != NULL)
                dir = strdup (subs[i]);
        }
        kiwi__strv_free_raw (subs);
    }
    if (rt != NULL) {
        int rc = choose_for_runtime (ctx, dir ? dir : "", rt, NULL, NULL, cat, out, err);
        if (rc < 0)
            goto fail;
        if (rc == 1) {
            out->source = KIWI_IMAGE_FROM_MARKERS;
            version_note (out, note, sizeof note);
            if (set_reason (out, err, "marker %s%s%s (%s); %s%s%s", dir ? dir : "", dir ? "/" : "", which, rt, note,
                            skipped_dc ? "; " : "", skipped_dc ? skipped_dc : "")
                < 0)
                goto fail;
            return 0;
        }
    }
    /* 4. the base image */
    {
        bool sat;
        const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, "base", NULL, KIWI_PREFER_HIGHEST, &sat);
        if (e == NULL)
            e = kiwi_image_catalog_get (cat, 0);
        if (set_str (&out->image, e->ref, err) < 0 || set_str (&out->runtime, e->runtime, err) < 0
            || set_str (&out->requirement, "", err) < 0 || set_str (&out->requirement_from, "", err) < 0
            || set_str (&out->project_dir, "", err) < 0
            || set_reason (out, err, "no devcontainer, command or marker names a runtime the catalogue has: %s%s%s",
                           e->ref, skipped_dc ? "; " : "", skipped_dc ? skipped_dc : "")
                   < 0)
            goto fail;
        out->source = KIWI_IMAGE_FROM_DEFAULT;
        out->satisfied = true;
    }
    return 0;
fail:
    kiwi_image_resolution_clear (out);
    return -1;
}

/* Resolution with a context of its own. */
static int
resolve (const char *root, const char *test_command, const kiwi_image_catalog *cat, const char *refused,
         kiwi_image_resolution *out, kiwi_error_t *err)
{
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (root);
    if (ctx == NULL) {
        memset (out, 0, sizeof *out);
        return kiwi_error_make (err, ENOMEM, "image resolution");
    }
    int rc = kiwi__image_resolve_ctx (ctx, test_command, cat, refused, out, err);
    if (rc == 0 && kiwi__ctx_check (ctx, err) < 0) {
        kiwi_image_resolution_clear (out);
        rc = -1;
    }
    kiwi__ctx_free (ctx);
    return rc;
}

int
kiwi_image_resolve (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                    kiwi_image_resolution *out, kiwi_error_t *err)
{
    return resolve (root, test_command, cat, NULL, out, err);
}

int
kiwi_image_resolve_past_devcontainer (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                                      const char *why, kiwi_image_resolution *out, kiwi_error_t *err)
{
    return resolve (root, test_command, cat, why ? why : "the devcontainer image cannot be used", out, err);
}

char *
kiwi_image_wish_note (const kiwi_image_resolution *r)
{
    if (r->requirement == NULL || r->requirement[0] == '\0' || r->satisfied || r->image == NULL)
        return NULL;
    char *s = NULL;
    if (asprintf (&s, "%s asks for %s %s, which no image in the catalogue has; %s ran instead",
                  r->requirement_from && r->requirement_from[0] ? r->requirement_from : "the repository",
                  r->runtime && r->runtime[0] ? r->runtime : "its runtime", r->requirement, r->image)
        < 0)
        return NULL;
    return s;
}