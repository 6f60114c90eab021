/*
 * phases-env.c: the environments each phase may see (phases.h): Phase A's
 * (locale, proxy settings without credentials, the CA bundle's variables,
 * never a secret), the install key's share of it, and Phase B's and the
 * session's (the task's test credentials when the operator allows them,
 * never a model key). See docs/isolation.md.
 */
#include "sandbox/phases.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/sha256.h"
#include "common/strv.h"

static const char *const model_keys[] = {
#define KIWI__KEY(k) k,
    KIWI_MODEL_KEYS (KIWI__KEY)
#undef KIWI__KEY
        NULL,
};

/* Worker variables that Phase A may see, copied as they are. */
static const char *const install_passthrough[] = {
    "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", NULL,
};

/* Proxy settings: passed to Phase A, refused when they carry credentials. */
static const char *const proxy_vars[] = {
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy", NULL,
};

/* Variables package managers read for a CA bundle (Phase A only). */
static const char *const ca_vars[] = {
    "SSL_CERT_FILE",      "NODE_EXTRA_CA_CERTS", "NPM_CONFIG_CAFILE", "REQUESTS_CA_BUNDLE", "PIP_CERT",
    "CURL_CA_BUNDLE",     "GIT_SSL_CAINFO",      "CARGO_HTTP_CAINFO", "COMPOSER_CAFILE",    "BUNDLE_SSL_CA_CERT",
    "YARN_CAFILE",        NULL,
};

static const char *
host_get (const kiwi_phase_config *cfg, const char *name)
{
    size_t nl = strlen (name);
    for (size_t i = 0; cfg->host_env && cfg->host_env[i]; i++)
        if (strncmp (cfg->host_env[i], name, nl) == 0 && cfg->host_env[i][nl] == '=')
            return cfg->host_env[i] + nl + 1;
    return NULL;
}

bool
kiwi_phase_is_secret_name (const kiwi_phase_config *cfg, const char *name)
{
    if (kiwi_str_listed (model_keys, name) || kiwi_str_listed (cfg->extra_model_keys, name))
        return true;
    /* Kiwi's own settings and secrets (the git token, webhook secrets, the
     * Redis password), and the Redis password as redis-cli reads it
     * (ops/stack.sh writes both to stack.env) */
    if (strncmp (name, "KIWI_", 5) == 0 || strcmp (name, "REDISCLI_AUTH") == 0)
        return true;
    return false;
}

/* True when a proxy URL carries user information ("user:pass@"). */
static bool
proxy_has_credentials (const char *url)
{
    const char *p = strstr (url, "://");
    p = p ? p + 3 : url;
    size_t auth_len = strcspn (p, "/?#");
    const char *at = memchr (p, '@', auth_len);
    return at != NULL;
}

static int
base_env (kiwi_strv *out)
{
    if (kiwi_strv_add (out, "HOME=" KIWI_SANDBOX_HOME) < 0 || kiwi_strv_add (out, "TMPDIR=" KIWI_SANDBOX_TMP) < 0
        || kiwi_strv_add (out, "CI=true") < 0)
        return -1;
    return 0;
}

/* Variables that hold a list of options, which a plan's entry adds to
 * rather than replaces: the JVM's proxy options (kiwi_proxy_env) and a
 * Maven or Gradle step's trust store must both reach Java. */
static const char *const option_lists[] = {
    "JAVA_TOOL_OPTIONS", "MAVEN_OPTS", "GRADLE_OPTS", "NODE_OPTIONS", NULL,
};

/* Adds `entry` (KEY=VALUE, its name `name`) to out, which holds at most one
 * entry per name: an option list already there gets the value appended
 * after a space, any other name already there takes the new value. */
static int
put_entry (kiwi_strv *out, const char *name, const char *entry)
{
    size_t nl = strlen (name);
    for (size_t i = 0; i < out->n; i++) {
        if (strncmp (out->v[i], name, nl) != 0 || out->v[i][nl] != '=')
            continue;
        bool list = false;
        for (size_t k = 0; option_lists[k] && !list; k++)
            list = strcmp (option_lists[k], name) == 0;
        char *joined = NULL;
        if (list ? asprintf (&joined, "%s %s", out->v[i], entry + nl + 1) < 0 : (joined = strdup (entry)) == NULL)
            return -1;
        free (out->v[i]);
        out->v[i] = joined;
        return 0;
    }
    return kiwi_strv_add (out, entry);
}

static int
add_extra (kiwi_strv *out, const kiwi_phase_config *cfg, const char *const *extra, kiwi_error_t *err)
{
    for (size_t i = 0; extra && extra[i]; i++) {
        const char *eq = strchr (extra[i], '=');
        if (eq == NULL || eq == extra[i])
            return kiwi_error_make (err, 0, "sandbox environment entry `%s` is not KEY=VALUE", extra[i]);
        char name[256];
        snprintf (name, sizeof name, "%.*s", (int) (eq - extra[i]), extra[i]);
        if (kiwi_phase_is_secret_name (cfg, name))
            return kiwi_error_make (err, 0, "refusing to put `%s` into a sandbox environment", name);
        if (put_entry (out, name, extra[i]) < 0)
            return kiwi_error_make (err, ENOMEM, "sandbox environment");
    }
    return 0;
}

/* The placeholders (kiwi_phase_config.placeholder_env): never a secret's
 * value, so they go where a repository's configuration expects its
 * registry token, in every phase. */
static int
add_placeholders (kiwi_strv *out, const kiwi_phase_config *cfg, kiwi_error_t *err)
{
    for (size_t i = 0; cfg->placeholder_env && cfg->placeholder_env[i]; i++) {
        const char *e = cfg->placeholder_env[i];
        const char *eq = strchr (e, '=');
        char name[128];
        if (eq == NULL || (size_t) (eq - e) >= sizeof name)
            return kiwi_error_make (err, EINVAL, "a placeholder `%.40s` is not NAME=VALUE", e);
        memcpy (name, e, (size_t) (eq - e));
        name[eq - e] = '\0';
        if (put_entry (out, name, e) < 0)
            return kiwi_error_make (err, ENOMEM, "sandbox environment");
    }
    return 0;
}

int
kiwi_phase_install_env (const kiwi_phase_config *cfg, const char *const *extra, kiwi_strv *out, kiwi_error_t *err)
{
    if (base_env (out) < 0)
        return kiwi_error_make (err, ENOMEM, "install environment");
    for (size_t i = 0; install_passthrough[i]; i++) {
        const char *v = host_get (cfg, install_passthrough[i]);
        if (v != NULL && kiwi_strv_addf (out, "%s=%s", install_passthrough[i], v) < 0)
            return kiwi_error_make (err, ENOMEM, "install environment");
    }
    for (size_t i = 0; cfg->proxy_env && cfg->proxy_env[i]; i++)
        if (kiwi_strv_add (out, cfg->proxy_env[i]) < 0)
            return kiwi_error_make (err, ENOMEM, "install environment");
    for (size_t i = 0; !cfg->proxy_env && proxy_vars[i]; i++) {
        const char *v = host_get (cfg, proxy_vars[i]);
        if (v == NULL)
            continue;
        if (proxy_has_credentials (v))
            return kiwi_error_make (err, 0,
                                    "%s carries credentials; Phase A never holds a secret, so it is refused "
                                    "(use a proxy that needs none, or an allow-listing proxy)",
                                    proxy_vars[i]);
        if (kiwi_strv_addf (out, "%s=%s", proxy_vars[i], v) < 0)
            return kiwi_error_make (err, ENOMEM, "install environment");
    }
    if (cfg->ca_bundle != NULL)
        for (size_t i = 0; ca_vars[i]; i++)
            if (kiwi_strv_addf (out, "%s=%s", ca_vars[i], KIWI_SANDBOX_CA_FILE) < 0)
                return kiwi_error_make (err, ENOMEM, "install environment");
    const char *t = cfg->resolve_before;
    if (t != NULL && t[0] >= '0' && t[0] <= '9' && strlen (t) < 40 && strspn (t, "0123456789-:T+Z") == strlen (t)
        && (kiwi_strv_addf (out, "PIP_UPLOADED_PRIOR_TO=%s", t) < 0 || kiwi_strv_addf (out, "UV_EXCLUDE_NEWER=%s", t) < 0))
        return kiwi_error_make (err, ENOMEM, "install environment");
    if (add_placeholders (out, cfg, err) < 0)
        return -1;
    return add_extra (out, cfg, extra, err);
}

bool
kiwi_phase_resolve_before_refused (const char *output)
{
    return output != NULL
           && (strstr (output, "does not provide upload-time metadata") != NULL
               || strstr (output, "is missing an upload date, but user provided") != NULL);
}

int
kiwi_phase_install_key_env (const kiwi_phase_config *cfg, kiwi_strv *out, kiwi_error_t *err)
{
    if (kiwi_phase_install_env (cfg, NULL, out, err) < 0)
        return -1;
    if (cfg->ca_bundle == NULL)
        return 0;
    kiwi_sha256 h;
    kiwi_sha256_init (&h);
    cleanup_close int fd = open (cfg->ca_bundle, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "reading the CA bundle %s (KIWI_CA_BUNDLE)", cfg->ca_bundle);
    char chunk[65536];
    ssize_t n;
    while ((n = read (fd, chunk, sizeof chunk)) > 0)
        kiwi_sha256_update (&h, chunk, (size_t) n);
    if (n < 0)
        return kiwi_error_make (err, errno, "reading the CA bundle %s", cfg->ca_bundle);
    unsigned char d[32];
    char hex[65];
    kiwi_sha256_final (&h, d);
    kiwi_sha256_digest_hex (d, hex);
    if (kiwi_strv_addf (out, "kiwi-ca-bundle-sha256=%s", hex) < 0)
        return kiwi_error_make (err, ENOMEM, "install environment");
    return 0;
}

/* Phase B and the session's commands get no colour variable (NO_COLOR,
 * FORCE_COLOR, CLICOLOR, PY_COLORS, CARGO_TERM_COLOR): a CI runner sets
 * none, and the tests of a library that reads them count on that (one
 * that sets FORCE_COLOR=1 and expects colour fails beside NO_COLOR=1). Their
 * output is no terminal, so tools print little colour anyway, and what
 * reaches a model is cleaned of escape sequences (worker/task/failout.c). */

static int
creds_env (const kiwi_phase_config *cfg, const char *const *extra, const char *const *creds, bool pass_creds,
           kiwi_strv *out, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err)
{
    if (base_env (out) < 0)
        return kiwi_error_make (err, ENOMEM, "verify environment");
    for (size_t i = 0; install_passthrough[i]; i++) {
        const char *v = host_get (cfg, install_passthrough[i]);
        if (v != NULL && kiwi_strv_addf (out, "%s=%s", install_passthrough[i], v) < 0)
            return kiwi_error_make (err, ENOMEM, "verify environment");
    }
    if (cfg->scm_version != NULL && strspn (cfg->scm_version, "0123456789.dev") == strlen (cfg->scm_version)
        && kiwi_strv_addf (out, "SETUPTOOLS_SCM_PRETEND_VERSION=%s", cfg->scm_version) < 0)
        return kiwi_error_make (err, ENOMEM, "verify environment");
    if (add_extra (out, cfg, extra, err) < 0 || add_placeholders (out, cfg, err) < 0)
        return -1;
    for (size_t i = 0; creds && creds[i]; i++) {
        const char *name = creds[i];
        if (!pass_creds || kiwi_phase_is_secret_name (cfg, name)) {
            if (withheld && kiwi_strv_add (withheld, name) < 0)
                return kiwi_error_make (err, ENOMEM, "verify environment");
            continue;
        }
        const char *v = host_get (cfg, name);
        if (v == NULL) {
            if (missing && kiwi_strv_add (missing, name) < 0)
                return kiwi_error_make (err, ENOMEM, "verify environment");
            continue;
        }
        if (kiwi_strv_addf (out, "%s=%s", name, v) < 0)
            return kiwi_error_make (err, ENOMEM, "verify environment");
    }
    return 0;
}

int
kiwi_phase_verify_env (const kiwi_phase_config *cfg, const char *const *extra, const char *const *creds,
                       kiwi_strv *out, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err)
{
    return creds_env (cfg, extra, creds, true, out, withheld, missing, err);
}

int
kiwi_phase_session_env (const kiwi_phase_config *cfg, const char *const *extra, const char *const *creds,
                        kiwi_strv *out, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err)
{
    return creds_env (cfg, extra, creds, cfg->session_allow_test_creds, out, withheld, missing, err);
}
