/*
 * inspect.c: image, install plan and cache key of a repository (inspect.h),
 * over one per-inspection context so that each manifest is read and parsed
 * once for all three.
 */
#include "inspect/inspect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/inspect-internal.h"

void
kiwi_inspection_clear (kiwi_inspection *in)
{
    kiwi_image_resolution_clear (&in->image);
    kiwi_install_plan_clear (&in->install);
    kiwi_strv_free (&in->input);
    free (in->image_id);
    memset (in, 0, sizeof *in);
}

static int
dup_resolution (const kiwi_image_resolution *src, kiwi_image_resolution *dst, kiwi_error_t *err)
{
    memset (dst, 0, sizeof *dst);
    dst->source = src->source;
    dst->satisfied = src->satisfied;
    const char *const from[] = { src->image, src->runtime, src->requirement, src->requirement_from,
                                 src->project_dir, src->reason };
    char **to[] = { &dst->image, &dst->runtime, &dst->requirement, &dst->requirement_from, &dst->project_dir,
                    &dst->reason };
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++) {
        *to[i] = strdup (from[i] ? from[i] : "");
        if (*to[i] == NULL) {
            kiwi_image_resolution_clear (dst);
            return kiwi_error_make (err, ENOMEM, "inspection");
        }
    }
    return 0;
}

static int
plan_and_key (kiwi__inspect_ctx *ctx, const kiwi_inspect_request *rq, kiwi_inspection *out, kiwi_error_t *err)
{
    kiwi_command_info cmd;
    const char *exe = rq->test_command != NULL && kiwi_command_runtime (rq->test_command, &cmd) ? cmd.exe : NULL;
    if (kiwi__install_plan_make_ctx (ctx, out->image.runtime, out->image.project_dir, exe, &out->install, err) < 0)
        return kiwi_error_wrap (err, "inspecting %s", rq->root);
    out->cache_key[0] = '\0';
    kiwi_error_t ierr = NULL;
    if (rq->image_id == NULL || rq->image_id (rq->image_id_ud, out->image.image, &out->image_id, &ierr) < 0) {
        kiwi_error_free (&ierr);
        free (out->image_id);
        out->image_id = strdup ("");
        if (out->image_id == NULL)
            return kiwi_error_make (err, ENOMEM, "inspection");
    }
    if (out->install.argv.n == 0)
        return 0;
    kiwi_install_key_input k = { .image = out->image.image, .image_id = out->image_id, .driver = rq->driver,
                                 .kiwi_env = rq->kiwi_env };
    if (kiwi__install_hashed_files_ctx (ctx, &out->install, &out->input, err) < 0
        || kiwi__install_cache_key_ctx (ctx, &out->install, &k, &out->input, out->cache_key, err) < 0)
        return kiwi_error_wrap (err, "inspecting %s", rq->root);
    return 0;
}

int
kiwi_inspect (const kiwi_inspect_request *rq, kiwi_inspection *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (rq->root);
    if (ctx == NULL)
        return kiwi_error_make (err, ENOMEM, "inspection");
    kiwi__ctx_set_command (ctx, rq->test_command);
    int rc = kiwi__image_resolve_ctx (ctx, rq->test_command, rq->catalog, NULL, &out->image, err);
    if (rc < 0)
        kiwi_error_wrap (err, "inspecting %s", rq->root);
    else if ((rc = plan_and_key (ctx, rq, out, err)) < 0)
        kiwi_inspection_clear (out);
    kiwi__ctx_free (ctx);
    return rc;
}

int
kiwi_inspect_with_image (const kiwi_inspect_request *rq, const kiwi_image_resolution *image, kiwi_inspection *out,
                         kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    if (dup_resolution (image, &out->image, err) < 0)
        return -1;
    kiwi__inspect_ctx *ctx = kiwi__ctx_new (rq->root);
    if (ctx != NULL)
        kiwi__ctx_set_command (ctx, rq->test_command);
    int rc = ctx ? plan_and_key (ctx, rq, out, err) : kiwi_error_make (err, ENOMEM, "inspection");
    if (rc < 0)
        kiwi_inspection_clear (out);
    kiwi__ctx_free (ctx);
    return rc;
}

char *
kiwi_inspection_describe (const kiwi_inspection *in)
{
    char *s = NULL;
    if (asprintf (&s, "image %s (%s: %s); install: %s%s%s", in->image.image, kiwi_image_source_str (in->image.source),
                  in->image.reason ? in->image.reason : "", in->install.display ? in->install.display : "-",
                  in->install.left_out.n ? "; left out: " : "", in->install.left_out.n ? in->install.left_out.v[0] : "")
        < 0)
        return NULL;
    return s;
}
