/*
 * sandbox.c: driver selection and the calls that dispatch through a
 * driver's vtable (see sandbox.h).
 */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

struct kiwi_sandbox_env {
    const kiwi_sandbox_driver *drv;
    void *priv;
    void (*on_start) (const char *driver, void *userdata);
    void *on_start_userdata;
};

struct kiwi_sandbox {
    kiwi_sandbox_env *env;
    void *priv;
    bool sealed; /* spec.files_sealed */
    bool ran;    /* a command ran in it */
};

static const struct {
    const char *name;
    const kiwi_sandbox_driver *drv;
} drivers[] = {
    { "docker", &kiwi_sandbox_driver_docker },
    { "runc", &kiwi_sandbox_driver_docker },
    { "gvisor", &kiwi_sandbox_driver_gvisor },
    { "runsc", &kiwi_sandbox_driver_gvisor },
    { "firecracker", &kiwi_sandbox_driver_firecracker },
};

const char *
kiwi_net_mode_str (kiwi_net_mode m)
{
    return m == KIWI_NET_INSTALL ? "install" : "none";
}

const char *
kiwi_install_bridge_or_default (const char *bridge)
{
    return bridge && *bridge ? bridge : KIWI_INSTALL_BRIDGE;
}

int
kiwi_install_network_name (const char *bridge, char *buf, size_t cap, int *index, kiwi_error_t *err)
{
    const size_t pl = strlen (KIWI_INSTALL_BRIDGE_PREFIX);
    const char *d = bridge && strncmp (bridge, KIWI_INSTALL_BRIDGE_PREFIX, pl) == 0 ? bridge + pl : NULL;
    int n = -1;
    /* one digit, or two without a leading zero */
    if (d && d[0] >= '0' && d[0] <= '9'
        && (d[1] == '\0' || (d[0] != '0' && d[1] >= '0' && d[1] <= '9' && d[2] == '\0')))
        n = atoi (d);
    if (n < 0 || n >= KIWI_INSTALL_BRIDGES)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID,
                                     "install bridge `%s`: not one of " KIWI_INSTALL_BRIDGE_PREFIX
                                     "0 .. " KIWI_INSTALL_BRIDGE_PREFIX "%d",
                                     bridge ? bridge : "(none)", KIWI_INSTALL_BRIDGES - 1);
    int w = n == 0 ? snprintf (buf, cap, "%s", KIWI_INSTALL_NETWORK) : snprintf (buf, cap, "%s", bridge);
    if (w < 0 || (size_t) w >= cap)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "install bridge `%s`: name too long", bridge);
    if (index)
        *index = n;
    return 0;
}

const char *
kiwi_sandbox_driver_names (void)
{
    return "docker (alias runc), gvisor (alias runsc), firecracker";
}

const kiwi_sandbox_driver *
kiwi_sandbox_driver_find (const char *name, kiwi_error_t *err)
{
    for (size_t i = 0; name && i < sizeof drivers / sizeof drivers[0]; i++)
        if (strcmp (name, drivers[i].name) == 0)
            return drivers[i].drv;
    kiwi_error_make_code (err, KIWI_SBE_INVALID, "unknown sandbox driver `%s` (known: %s)", name ? name : "",
                          kiwi_sandbox_driver_names ());
    return NULL;
}

int
kiwi_sandbox_env_open (const kiwi_sandbox_driver *drv, const kiwi_sandbox_config *cfg, kiwi_sandbox_env **out,
                       kiwi_error_t *err)
{
    kiwi_sandbox_env *e = calloc (1, sizeof *e);
    if (e == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox driver %s", drv->name);
    e->drv = drv;
    e->on_start = cfg->on_start;
    e->on_start_userdata = cfg->on_start_userdata;
    if (drv->open (cfg, &e->priv, err) < 0) {
        free (e);
        return kiwi_error_wrap (err, "opening the %s sandbox driver", drv->name);
    }
    *out = e;
    return 0;
}

void
kiwi_sandbox_env_close (kiwi_sandbox_env *env)
{
    if (env == NULL)
        return;
    env->drv->close (env->priv);
    free (env);
}

const kiwi_sandbox_driver *
kiwi_sandbox_env_driver (const kiwi_sandbox_env *env)
{
    return env->drv;
}

bool
kiwi_sandbox_seals_files (const kiwi_sandbox_env *env)
{
    return env->drv->seals_files != NULL && env->drv->seals_files (env->priv);
}

int
kiwi_sandbox_image_id (kiwi_sandbox_env *env, const char *image, char **id, kiwi_error_t *err)
{
    *id = NULL;
    if (env->drv->image_id == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_NOT_SUPPORTED, "the %s driver has no image ids", env->drv->name);
    return env->drv->image_id (env->priv, image, id, err);
}

int
kiwi_sandbox_ensure_image (kiwi_sandbox_env *env, const char *image, kiwi_pull_progress_cb progress, void *userdata,
                           bool *pulled, kiwi_error_t *err)
{
    if (pulled)
        *pulled = false;
    if (env->drv->ensure_image == NULL)
        return 0;
    bool p = false;
    if (env->drv->ensure_image (env->priv, image, progress, userdata, &p, err) < 0)
        return -1;
    if (pulled)
        *pulled = p;
    return 0;
}

int
kiwi_sandbox_gc_images (kiwi_sandbox_env *env, kiwi_sandbox_image_gc *gc, kiwi_error_t *err)
{
    gc->removed = gc->removed_watermark = gc->in_use = gc->failed = 0;
    gc->used_before = -1;
    if (env->drv->gc_images == NULL)
        return 0;
    return env->drv->gc_images (env->priv, gc, err);
}

int
kiwi_sandbox_create (kiwi_sandbox_env *env, const kiwi_sandbox_spec *spec, kiwi_sandbox **out, kiwi_error_t *err)
{
    kiwi_sandbox *sb = calloc (1, sizeof *sb);
    if (sb == NULL)
        return kiwi_error_make (err, ENOMEM, "sandbox");
    sb->env = env;
    if (spec->lower_dir != NULL && !env->drv->lays_lower) {
        free (sb);
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "the %s driver lays no directory under /kiwi",
                                     env->drv->name);
    }
    if (env->drv->create (env->priv, spec, &sb->priv, err) < 0) {
        free (sb);
        return -1;
    }
    sb->sealed = spec->files_sealed;
    if (env->on_start)
        env->on_start (env->drv->name, env->on_start_userdata);
    *out = sb;
    return 0;
}

int
kiwi_sandbox_adopt (kiwi_sandbox_env *env, kiwi_sandbox *sb, kiwi_error_t *err)
{
    if (sb->env == env)
        return 0;
    if (sb->env->drv != env->drv || env->drv->adopt == NULL)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "the %s driver cannot hand sandbox %s to another env",
                                     sb->env->drv->name, sb->env->drv->id (sb->priv));
    env->drv->adopt (env->priv, sb->priv);
    sb->env = env;
    return 0;
}

const char *
kiwi_sandbox_id (const kiwi_sandbox *sb)
{
    return sb->env->drv->id (sb->priv);
}

/* A sandbox with sealed files may cache them inside: after a command ran,
 * the host's view and the sandbox's can differ, so nothing goes in or out. */
static int
sealed_refuses (const kiwi_sandbox *sb, const char *what, kiwi_error_t *err)
{
    if (!sb->sealed || !sb->ran)
        return 0;
    return kiwi_error_make_code (err, KIWI_SBE_INVALID,
                                 "sandbox %s has sealed files (its spec's files_sealed) and a command ran in it: "
                                 "nothing is %s it any more",
                                 sb->env->drv->id (sb->priv), what);
}

int
kiwi_sandbox_put_archive (kiwi_sandbox *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err)
{
    if (sealed_refuses (sb, "put into", err) < 0)
        return -1;
    return sb->env->drv->put_archive (sb->priv, dir, tar, len, err);
}

int
kiwi_sandbox_get_archive (kiwi_sandbox *sb, const char *path, kiwi_archive_sink sink, void *userdata,
                          kiwi_error_t *err)
{
    if (sealed_refuses (sb, "copied out of", err) < 0)
        return -1;
    return sb->env->drv->get_archive (sb->priv, path, sink, userdata, err);
}

int
kiwi_sandbox_exec (kiwi_sandbox *sb, const kiwi_exec_spec *spec, kiwi_exec_result *res, kiwi_error_t *err)
{
    sb->ran = true; /* even a failed exec may have started the command */
    return sb->env->drv->exec (sb->priv, spec, res, err);
}

int
kiwi_sandbox_inspect (kiwi_sandbox *sb, kiwi_sandbox_info *info, kiwi_error_t *err)
{
    return sb->env->drv->inspect (sb->priv, info, err);
}

int
kiwi_sandbox_destroy (kiwi_sandbox *sb, kiwi_error_t *err)
{
    if (sb == NULL)
        return 0;
    char name[256];
    snprintf (name, sizeof name, "%s", sb->env->drv->id (sb->priv));
    int rc = sb->env->drv->destroy (sb->priv, err);
    if (rc < 0)
        kiwi_error_wrap (err, "removing sandbox %s (reap removes what is left)", name);
    else
        kiwi_debug ("sandbox %s: removed", name);
    free (sb);
    return rc;
}

int
kiwi_sandbox_reap (kiwi_sandbox_env *env, int *removed, kiwi_error_t *err)
{
    *removed = 0;
    if (env->drv->reap == NULL)
        return 0;
    return env->drv->reap (env->priv, removed, err);
}

int
kiwi_sandbox_run_once (kiwi_sandbox_env *env, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts,
                       size_t nputs, const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    if (env->drv->run_once != NULL) {
        int rc = env->drv->run_once (env->priv, spec, puts, nputs, x, res, err);
        if (rc == 0 && env->on_start)
            env->on_start (env->drv->name, env->on_start_userdata);
        return rc;
    }
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    kiwi_sandbox *sb = NULL;
    if (kiwi_sandbox_create (env, spec, &sb, err) < 0)
        return -1;
    return kiwi_sandbox_run_in (sb, puts, nputs, x, res, err);
}

int
kiwi_sandbox_run_in (kiwi_sandbox *sb, const kiwi_sandbox_put *puts, size_t nputs, const kiwi_exec_spec *x,
                     kiwi_exec_result *res, kiwi_error_t *err)
{
    memset (res, 0, sizeof *res);
    res->exit_code = -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nputs; i++)
        rc = kiwi_sandbox_put_archive (sb, puts[i].dir, puts[i].tar, puts[i].len, err);
    if (rc == 0)
        rc = kiwi_sandbox_exec (sb, x, res, err);
    kiwi_error_t derr = NULL;
    if (kiwi_sandbox_destroy (sb, &derr) < 0 && rc == 0) {
        *err = kiwi_error_steal (&derr);
        kiwi_exec_result_clear (res);
        rc = -1;
    }
    kiwi_error_free (&derr);
    return rc;
}

static volatile int *cancel_flag;

void
kiwi_sandbox_set_cancel (volatile int *flag)
{
    cancel_flag = flag;
}

bool
kiwi_sandbox_cancelled (void)
{
    return cancel_flag != NULL && *cancel_flag != 0;
}

unsigned
kiwi_sandbox_name_nonce (void)
{
    unsigned rnd = 0;
    FILE *ur = fopen ("/dev/urandom", "re");
    if (ur == NULL || fread (&rnd, sizeof rnd, 1, ur) != 1)
        rnd = (unsigned) kiwi_mono_ms () ^ (unsigned) getpid ();
    if (ur)
        fclose (ur);
    return rnd;
}

void
kiwi_exec_result_clear (kiwi_exec_result *r)
{
    free (r->output);
    r->output = NULL;
}
