/*
 * inspect-ctx.c: the per-inspection context (inspect-internal.h): each
 * manifest the image choice, the install plan and the cache key consult is
 * read from the tree once, and a JSON one parsed once. A short list, not a
 * hash table: an inspection reads a few dozen files.
 */
#include "inspect/inspect-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

typedef struct entry {
    struct entry *next;
    char *rel;
    char *text; /* NULL: absent or unreadable */
    size_t len;
    json_t *json;
    bool json_tried;
} entry;

struct kiwi__inspect_ctx {
    const char *root;
    const char *command; /* the task's test command, or NULL (borrowed) */
    entry *files;
    bool failed;
};

kiwi__inspect_ctx *
kiwi__ctx_new (const char *root)
{
    kiwi__inspect_ctx *c = calloc (1, sizeof *c);
    if (c != NULL)
        c->root = root;
    return c;
}

void
kiwi__ctx_free (kiwi__inspect_ctx *ctx)
{
    if (ctx == NULL)
        return;
    for (entry *e = ctx->files, *next; e; e = next) {
        next = e->next;
        free (e->rel);
        free (e->text);
        json_decref (e->json);
        free (e);
    }
    free (ctx);
}

const char *
kiwi__ctx_root (const kiwi__inspect_ctx *ctx)
{
    return ctx->root;
}

void
kiwi__ctx_set_command (kiwi__inspect_ctx *ctx, const char *command)
{
    ctx->command = command;
}

const char *
kiwi__ctx_command (const kiwi__inspect_ctx *ctx)
{
    return ctx->command;
}

int
kiwi__ctx_check (const kiwi__inspect_ctx *ctx, kiwi_error_t *err)
{
    return ctx->failed ? kiwi_error_make (err, ENOMEM, "inspection") : 0;
}

static entry *
lookup (kiwi__inspect_ctx *ctx, const char *dir, const char *file)
{
    cleanup_free char *rel = kiwi__path_join (dir, file);
    if (rel == NULL) {
        ctx->failed = true;
        return NULL;
    }
    for (entry *e = ctx->files; e; e = e->next)
        if (strcmp (e->rel, rel) == 0)
            return e;
    entry *e = calloc (1, sizeof *e);
    if (e == NULL) {
        ctx->failed = true;
        return NULL;
    }
    e->text = kiwi__read_rel (ctx->root, rel, &e->len);
    e->rel = steal_pointer (&rel);
    e->next = ctx->files;
    ctx->files = e;
    return e;
}

const char *
kiwi__ctx_cached (const kiwi__inspect_ctx *ctx, const char *rel, size_t *len)
{
    for (const entry *e = ctx->files; e; e = e->next)
        if (e->text != NULL && strcmp (e->rel, rel) == 0) {
            *len = e->len;
            return e->text;
        }
    return NULL;
}

const char *
kiwi__ctx_text (kiwi__inspect_ctx *ctx, const char *dir, const char *file, size_t *len)
{
    entry *e = lookup (ctx, dir, file);
    if (len)
        *len = e && e->text ? e->len : 0;
    return e ? e->text : NULL;
}

char *
kiwi__ctx_copy (kiwi__inspect_ctx *ctx, const char *dir, const char *file)
{
    size_t len = 0;
    const char *t = kiwi__ctx_text (ctx, dir, file, &len);
    if (t == NULL)
        return NULL;
    char *c = malloc (len + 1);
    if (c == NULL) {
        ctx->failed = true;
        return NULL;
    }
    memcpy (c, t, len + 1);
    return c;
}

json_t *
kiwi__ctx_json (kiwi__inspect_ctx *ctx, const char *dir, const char *file)
{
    entry *e = lookup (ctx, dir, file);
    if (e == NULL || e->text == NULL)
        return NULL;
    if (!e->json_tried) {
        e->json_tried = true;
        e->json = json_loads (e->text, 0, NULL);
    }
    return e->json;
}
