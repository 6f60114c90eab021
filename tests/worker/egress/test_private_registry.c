/*
 * test_private_registry.c: KIWI_PRIVATE_REGISTRIES as the worker wires it
 * (worker/egress/private-registry.h): the setting checked, `proxy.sh
 * conf`'s argv, the CA bundle Phase A gets and the install cache key, each
 * with no registry declared exactly as before the setting existed. A
 * canary is the credential: it must appear in nothing the worker makes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "inspect/lockfile/lockfile.h"
#include "sandbox/phases.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/private-registry.h"
#include "worker/task/plan.h"

#define CANARY "Bearer kiwi-canary-7f3e9a1c"

static char root[64];
static char cred_a[128], cred_b[128], cred_a2[128], ca_dir[128], op_bundle[128];

static void
put (const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
    chmod (path, mode);
}

static char *
slurp (const char *path)
{
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return NULL;
    char *buf = calloc (1, 1 << 16);
    size_t n = fread (buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

static int
setup (void **state)
{
    (void) state;
    snprintf (root, sizeof root, "/tmp/kiwi-privreg-XXXXXX");
    assert_non_null (mkdtemp (root));
    snprintf (cred_a, sizeof cred_a, "%s/tenant-a.cred", root);
    snprintf (cred_a2, sizeof cred_a2, "%s/elsewhere-a.cred", root);
    snprintf (cred_b, sizeof cred_b, "%s/tenant-b.cred", root);
    snprintf (ca_dir, sizeof ca_dir, "%s/ca", root);
    snprintf (op_bundle, sizeof op_bundle, "%s/operator.pem", root);
    put (cred_a, CANARY "\n", 0600);
    put (cred_a2, CANARY "\n", 0600); /* the same credential at another path (another host of the fleet) */
    put (cred_b, "Bearer kiwi-canary-other-tenant\n", 0600);
    mkdir (ca_dir, 0755);
    char p[256];
    snprintf (p, sizeof p, "%s/ca.pem", ca_dir);
    put (p, "-----BEGIN CERTIFICATE-----\nKIWI-CA\n-----END CERTIFICATE-----\n", 0644);
    snprintf (p, sizeof p, "%s/ca.key", ca_dir);
    put (p, "-----BEGIN PRIVATE KEY-----\nKIWI-CA-KEY\n-----END PRIVATE KEY-----\n", 0600);
    put (op_bundle, "-----BEGIN CERTIFICATE-----\nOPERATOR\n-----END CERTIFICATE-----", 0644);
    return 0;
}

static int
teardown (void **state)
{
    (void) state;
    kiwi_fs_remove_tree (root, 10000, NULL);
    return 0;
}

/* The worker's settings from the assignments ("K=V"), the state dir and
 * the proxy script fixed. */
static void
load3 (kiwi_worker_config *cfg, const char *a, const char *b, const char *c)
{
    char state[128], script[160];
    snprintf (state, sizeof state, "KIWI_STATE_DIR=%s/state", root);
    snprintf (script, sizeof script, "KIWI_EGRESS_PROXY_SCRIPT=/x/proxy.sh");
    const char *env[] = { state, script, "KIWI_WORKER_ID=w1", a, a ? b : NULL, a && b ? c : NULL, NULL };
    kiwi_worker_config_init (cfg);
    kiwi_error_t err = NULL;
    int idx = 0;
    assert_int_equal (kiwi_worker_config_load (cfg, NULL, env, 0, NULL, 0, &idx, &err), 0);
}

static void
load (kiwi_worker_config *cfg, const char *a, const char *b)
{
    load3 (cfg, a, b, NULL);
}

static char *
joined (const kiwi_strv *v)
{
    size_t n = 1;
    for (size_t i = 0; i < v->n; i++)
        n += strlen (v->v[i]) + 1;
    char *s = calloc (1, n);
    for (size_t i = 0; i < v->n; i++) {
        strcat (s, v->v[i]);
        if (i + 1 < v->n)
            strcat (s, " ");
    }
    return s;
}

/* Bad specs are refused at start, naming the spec, never the file's content. */
static void
test_parse (void **state)
{
    (void) state;
    kiwi_private_registries r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_private_registries_parse (NULL, &r, &err), 0);
    assert_int_equal (r.n, 0);
    char spec[512];
    snprintf (spec, sizeof spec, "npm.Acme.test/npm/=@%s, pypi.acme.test=@%s", cred_a, cred_b);
    assert_int_equal (kiwi_private_registries_parse (spec, &r, &err), 0);
    assert_int_equal (r.n, 2);
    assert_string_equal (r.v[0].host, "npm.acme.test");
    assert_string_equal (r.v[0].prefix, "/npm");
    assert_string_equal (r.v[0].file, cred_a);
    assert_string_equal (r.v[1].prefix, "");
    kiwi_private_registries_clear (&r);
    const char *bad[][2] = {
        { "npm.acme.test", "want HOST[/PREFIX]=@FILE" },
        { "npm.acme.test=CRED", "want HOST[/PREFIX]=@FILE" },
        { "10.0.0.1=@CRED", "is not one host name" },
        { ".acme.test=@CRED", "is not one host name" },
        { "npm.acme.test/a/../b=@CRED", "is not segments" },
        { "npm.acme.test/a%2fb=@CRED", "is not segments" },
        { "npm.acme.test=@relative.cred", "absolute path" },
        { "npm.acme.test=@/nonexistent/kiwi.cred", "cannot read the credential file /nonexistent/kiwi.cred" },
        { "npm.acme.test/npm=@CRED npm.acme.test/npm/x=@CRED", "overlap" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spec[0] = '\0';
        for (const char *p = bad[i][0]; *p;) {
            if (strncmp (p, "CRED", 4) == 0) {
                strcat (spec, cred_a);
                p += 4;
            } else
                strncat (spec, p++, 1);
        }
        assert_int_equal (kiwi_private_registries_parse (spec, &r, &err), -1);
        const char *msg = kiwi_error_msg (err);
        if (strstr (msg, "KIWI_PRIVATE_REGISTRIES") == NULL || strstr (msg, bad[i][1]) == NULL)
            fail_msg ("%s: %s", spec, msg);
        assert_null (strstr (msg, "canary"));
        kiwi_error_free (&err);
    }
    /* declared with Phase A not behind the proxy: refused */
    kiwi_worker_config cfg;
    snprintf (spec, sizeof spec, "KIWI_PRIVATE_REGISTRIES=npm.acme.test=@%s", cred_a);
    load (&cfg, spec, "KIWI_INSTALL_EGRESS=open");
    assert_int_equal (kiwi_private_registries_check (&cfg, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "needs Phase A behind the egress proxy"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, spec, NULL);
    assert_int_equal (kiwi_private_registries_check (&cfg, &err), 0);
    kiwi_worker_config_clear (&cfg);
}

/* proxy.sh conf: Kiwi's CA in any case and the registries bumped when
 * they are allowed (the proxy is read-only); with the setting one
 * --private-registry per spec, the file's path and never its content. */
static void
test_conf_argv (void **state)
{
    (void) state;
    kiwi_worker_config cfg;
    kiwi_install_egress e;
    kiwi_error_t err = NULL;
    kiwi_strv argv = KIWI_STRV_INIT;
    char spec[512], dir[160], want[1024];
    snprintf (dir, sizeof dir, "%s/state/egress-ca", root);
    /* --digest: kiwi-fetch-digest beside the binary (the build's libexec) */
    char dbuf[PATH_MAX];
    const char *digest = kiwi_worker_libexec (NULL, "kiwi-fetch-digest", dbuf, sizeof dbuf);
    assert_non_null (digest);
    /* no private registry: Kiwi's CA and the registries bumped (read-only) */
    load (&cfg, NULL, NULL);
    assert_int_equal (kiwi_install_egress_parse (cfg.install_egress, &e, &err), 0);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &e, "/d", "172.30.0.1", &argv, &err), 0);
    char *s = joined (&argv);
    snprintf (want, sizeof want,
              "bash /x/proxy.sh conf --dir /d --listen 172.30.0.1 --ports 3128,3129,3130 --digest %s --ecosystem all --bump-ca %s "
              "--bump-registries",
              digest, dir);
    assert_string_equal (s, want);
    free (s);
    kiwi_strv_free (&argv);
    /* hosts of the operator's alone: Kiwi's CA (read-only), nothing bumped */
    kiwi_install_egress hosts;
    assert_int_equal (kiwi_install_egress_parse ("git.acme.test", &hosts, &err), 0);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &hosts, "/d", "172.30.0.1", &argv, &err), 0);
    s = joined (&argv);
    snprintf (want, sizeof want,
              "bash /x/proxy.sh conf --dir /d --listen 172.30.0.1 --ports 3128,3129,3130 --digest %s --allow git.acme.test "
              "--bump-ca %s",
              digest, dir);
    assert_string_equal (s, want);
    free (s);
    kiwi_strv_free (&argv);
    kiwi_install_egress_clear (&hosts);
    kiwi_worker_config_clear (&cfg);

    snprintf (spec, sizeof spec, "KIWI_PRIVATE_REGISTRIES=npm.acme.test/npm=@%s pypi.acme.test=@%s", cred_a, cred_b);
    load (&cfg, spec, NULL);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &e, "/d", "172.30.0.1", &argv, &err), 0);
    s = joined (&argv);
    snprintf (want, sizeof want,
              "bash /x/proxy.sh conf --dir /d --listen 172.30.0.1 --ports 3128,3129,3130 --digest %s --ecosystem all --bump-ca %s "
              "--bump-registries --private-registry npm.acme.test/npm=@%s --private-registry pypi.acme.test=@%s",
              digest, dir, cred_a, cred_b);
    assert_string_equal (s, want);
    assert_null (strstr (s, "canary"));
    free (s);
    kiwi_strv_free (&argv);
    kiwi_worker_config_clear (&cfg);

    /* KIWI_EGRESS_CA_DIR; a refused spec is an error, nothing built */
    char cadir[160];
    snprintf (cadir, sizeof cadir, "KIWI_EGRESS_CA_DIR=%s", ca_dir);
    snprintf (spec, sizeof spec, "KIWI_PRIVATE_REGISTRIES=npm.acme.test=@%s", cred_a);
    load (&cfg, spec, cadir);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &e, "/d", "172.30.0.1", &argv, &err), 0);
    s = joined (&argv);
    snprintf (want, sizeof want, "--bump-ca %s --bump-registries --private-registry", ca_dir);
    assert_non_null (strstr (s, want));
    free (s);
    kiwi_strv_free (&argv);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, "KIWI_PRIVATE_REGISTRIES=npm.acme.test=@/nonexistent/x", NULL);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &e, "/d", "172.30.0.1", &argv, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "cannot read the credential file /nonexistent/x"));
    kiwi_error_free (&err);
    kiwi_strv_free (&argv);
    kiwi_worker_config_clear (&cfg);

    /* a registry's own CA and pinned names: --upstream-ca, --hosts-file */
    char upstream[256];
    snprintf (upstream, sizeof upstream, "KIWI_PRIVATE_REGISTRY_CA=%s", cred_b);
    load (&cfg, upstream, "KIWI_EGRESS_HOSTS_FILE=/etc/hosts");
    assert_int_equal (kiwi_private_registries_check (&cfg, &err), 0);
    assert_int_equal (kiwi_proxy_conf_argv (&cfg, &e, "/d", "172.30.0.1", &argv, &err), 0);
    s = joined (&argv);
    snprintf (want, sizeof want, "--bump-registries --upstream-ca %s --hosts-file /etc/hosts", cred_b);
    assert_non_null (strstr (s, want));
    free (s);
    kiwi_strv_free (&argv);
    kiwi_worker_config_clear (&cfg);
    /* either one relative or unreadable: the worker does not start */
    static const char *const bad_files[][2] = {
        { "KIWI_PRIVATE_REGISTRY_CA=ca.pem", "KIWI_PRIVATE_REGISTRY_CA=ca.pem: an absolute path" },
        { "KIWI_PRIVATE_REGISTRY_CA=/nonexistent/ca.pem", "KIWI_PRIVATE_REGISTRY_CA=/nonexistent/ca.pem: cannot read" },
        { "KIWI_EGRESS_HOSTS_FILE=hosts", "KIWI_EGRESS_HOSTS_FILE=hosts: an absolute path" },
        { "KIWI_EGRESS_HOSTS_FILE=/nonexistent/hosts", "KIWI_EGRESS_HOSTS_FILE=/nonexistent/hosts: cannot read" },
    };
    for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++) {
        load (&cfg, bad_files[i][0], NULL);
        assert_int_equal (kiwi_private_registries_check (&cfg, &err), -1);
        if (strstr (kiwi_error_msg (err), bad_files[i][1]) == NULL)
            fail_msg ("%s: %s", bad_files[i][0], kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_worker_config_clear (&cfg);
    }
    kiwi_install_egress_clear (&e);
}

/* Phase A's CA bundle: behind the proxy (which bumps the registries) a
 * file of the worker's, the operator's bundle then Kiwi's ca.pem, never
 * ca.key, with or without the setting; not behind it KIWI_CA_BUNDLE as it
 * is, and with the setting an error. */
static void
test_ca_bundle (void **state)
{
    (void) state;
    kiwi_worker_config cfg;
    kiwi_error_t err = NULL;
    char buf[4096], opt[160], spec[300], cadir[160], want_path[256];
    const char *bundle = "unset";
    snprintf (opt, sizeof opt, "KIWI_CA_BUNDLE=%s", op_bundle);
    snprintf (cadir, sizeof cadir, "KIWI_EGRESS_CA_DIR=%s", ca_dir);
    snprintf (want_path, sizeof want_path, "%s/state/egress-ca-bundle/w1.pem", root);
    load (&cfg, opt, NULL);
    assert_int_equal (kiwi_egress_phase_ca_bundle (&cfg, false, buf, sizeof buf, &bundle, &err), 0);
    assert_ptr_equal (bundle, cfg.ca_bundle);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, NULL, NULL);
    assert_int_equal (kiwi_egress_phase_ca_bundle (&cfg, false, buf, sizeof buf, &bundle, &err), 0);
    assert_null (bundle);
    kiwi_worker_config_clear (&cfg);
    /* no private registry, behind the proxy: the bundle with Kiwi's CA */
    load (&cfg, opt, cadir);
    assert_int_equal (kiwi_egress_phase_ca_bundle (&cfg, true, buf, sizeof buf, &bundle, &err), 0);
    assert_string_equal (bundle, want_path);
    char *text = slurp (bundle);
    assert_non_null (text);
    assert_string_equal (text, "-----BEGIN CERTIFICATE-----\nOPERATOR\n-----END CERTIFICATE-----\n"
                               "-----BEGIN CERTIFICATE-----\nKIWI-CA\n-----END CERTIFICATE-----\n");
    free (text);
    unlink (bundle);
    kiwi_worker_config_clear (&cfg);

    snprintf (spec, sizeof spec, "KIWI_PRIVATE_REGISTRIES=npm.acme.test=@%s", cred_a);
    const char *env[] = { spec, cadir, opt, NULL };
    char state_s[128], id[] = "KIWI_WORKER_ID=w1";
    snprintf (state_s, sizeof state_s, "KIWI_STATE_DIR=%s/state", root);
    const char *env2[] = { env[0], env[1], env[2], state_s, id, NULL };
    kiwi_worker_config_init (&cfg);
    int idx = 0;
    assert_int_equal (kiwi_worker_config_load (&cfg, NULL, env2, 0, NULL, 0, &idx, &err), 0);
    assert_int_equal (kiwi_egress_phase_ca_bundle (&cfg, true, buf, sizeof buf, &bundle, &err), 0);
    assert_string_equal (bundle, want_path);
    text = slurp (bundle);
    assert_non_null (text);
    assert_string_equal (text, "-----BEGIN CERTIFICATE-----\nOPERATOR\n-----END CERTIFICATE-----\n"
                               "-----BEGIN CERTIFICATE-----\nKIWI-CA\n-----END CERTIFICATE-----\n");
    assert_null (strstr (text, "KEY"));
    assert_null (strstr (text, "canary"));
    free (text);
    /* not behind the proxy: an error, no bundle */
    assert_int_equal (kiwi_egress_phase_ca_bundle (&cfg, false, buf, sizeof buf, &bundle, &err), -1);
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&cfg);
    (void) env;
}

/* The install cache key of a repository with one npm lockfile, for the
 * key environment `env`. */
static void
key_of_env (const kiwi_strv *env, char out[65])
{
    char repo[128], f[160];
    snprintf (repo, sizeof repo, "%s/repo", root);
    mkdir (repo, 0755);
    snprintf (f, sizeof f, "%s/package-lock.json", repo);
    put (f, "{\"lockfileVersion\": 3}\n", 0644);
    snprintf (f, sizeof f, "%s/package.json", repo);
    put (f, "{\"name\": \"x\"}\n", 0644);
    kiwi_error_t err = NULL;
    kiwi_install_plan p;
    assert_int_equal (kiwi_install_plan_make (repo, "node", &p, &err), 0);
    kiwi_install_key_input k = { .image = "kiwi/node:22", .image_id = "sha256:1", .driver = "docker",
                                 .kiwi_env = kiwi_strv_list (env) };
    assert_int_equal (kiwi_install_cache_key (repo, &p, &k, NULL, out, &err), 0);
    kiwi_install_plan_clear (&p);
}

static const char *const host_env[] = { "PATH=/usr/bin", NULL };

/* The key for the worker's settings with KIWI_PRIVATE_REGISTRIES=`reg`
 * followed by `cred` (reg NULL: unset); *before receives the key main
 * computed for them (Phase A's key environment, then the egress setting). */
static void
key_for (const char *reg, const char *cred, char out[65], char before[65])
{
    char spec[300];
    snprintf (spec, sizeof spec, "KIWI_PRIVATE_REGISTRIES=%s%s", reg ? reg : "", cred ? cred : "");
    kiwi_worker_config cfg;
    load (&cfg, reg ? spec : NULL, NULL);
    kiwi_strv env = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    if (kiwi_plan_key_env (&cfg, host_env, &env, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    for (size_t i = 0; i < env.n; i++)
        assert_null (strstr (env.v[i], "canary"));
    key_of_env (&env, out);
    kiwi_strv_free (&env);
    if (before != NULL) {
        kiwi_phase_config pc = { .host_env = host_env, .ca_bundle = cfg.ca_bundle };
        assert_int_equal (kiwi_phase_install_key_env (&pc, &env, &err), 0);
        assert_int_equal (kiwi_strv_addf (&env, "kiwi-install-egress=%s", cfg.install_egress), 0);
        key_of_env (&env, before);
        kiwi_strv_free (&env);
    }
    kiwi_worker_config_clear (&cfg);
}

/* Tenancy: the registries and their scopes are in the key, the
 * credentials are not. */
static void
test_key (void **state)
{
    (void) state;
    char none[65], before[65], a[65], a2[65], b[65], a_other_host[65], a_prefix[65];
    char spec[300];
    key_for (NULL, NULL, none, before);
    assert_string_equal (none, before); /* no registry: main's key */
    key_for ("npm.acme.test/npm=@", cred_a, a, NULL);
    key_for ("npm.acme.test/npm=@", cred_a2, a2, NULL);
    key_for ("npm.acme.test/npm=@", cred_b, b, NULL);
    key_for ("npm.other.test/npm=@", cred_a, a_other_host, NULL);
    key_for ("npm.acme.test/js=@", cred_a, a_prefix, NULL);
    for (const char *k[] = { none, a, a2, b, a_other_host, a_prefix, NULL }, **i = k; *i; i++)
        assert_null (strstr (*i, "canary"));

    assert_string_not_equal (a, none);            /* a registry declared */
    assert_string_not_equal (a, b);               /* two tenants' credentials */
    assert_string_equal (a, a2);                  /* the same credential elsewhere on the fleet */
    assert_string_not_equal (a, a_other_host);    /* the registry's host */
    assert_string_not_equal (a, a_prefix);        /* and its prefix */

    /* the scope hash: SHA-256 of the label and the file's bytes */
    char hex[65];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_private_registry_scope (cred_a, hex, &err), 0);
    kiwi_strv env = KIWI_STRV_INIT;
    kiwi_private_registries r;
    snprintf (spec, sizeof spec, "npm.acme.test/npm=@%s", cred_a);
    assert_int_equal (kiwi_private_registries_parse (spec, &r, &err), 0);
    assert_int_equal (kiwi_private_registries_key_env (&r, &env, &err), 0);
    char want[200];
    snprintf (want, sizeof want, "kiwi-private-registry=npm.acme.test/npm scope-sha256=%s", hex);
    assert_int_equal (env.n, 1);
    assert_string_equal (env.v[0], want);
    kiwi_private_registries_clear (&r);
    kiwi_strv_free (&env);
}

/* Private Go modules: KIWI_GO_PROXY and KIWI_GO_NOSUMDB checked at start,
 * in Phase A's environment as GOPROXY and GONOSUMDB and in the install
 * key; nothing of either without them. */
static void
test_go (void **state)
{
    (void) state;
    kiwi_worker_config cfg;
    kiwi_error_t err = NULL;
    char decl[512];
    snprintf (decl, sizeof decl, "KIWI_PRIVATE_REGISTRIES=go.acme.test/mod=@%s", cred_a);
    const char *good[] = { "KIWI_GO_PROXY=https://go.acme.test/mod,https://proxy.golang.org",
                           "KIWI_GO_PROXY=https://go.acme.test:8443/mod|direct", "KIWI_GO_PROXY=off" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        load3 (&cfg, decl, good[i], "KIWI_GO_NOSUMDB=go.acme.test/*,go.acme.test/[a-z]?");
        if (kiwi_go_private_check (&cfg, &err) < 0)
            fail_msg ("%s: %s", good[i], kiwi_error_msg (err));
        kiwi_worker_config_clear (&cfg);
    }
    const char *bad[][2] = {
        { "KIWI_GO_PROXY=https://user:pw@go.acme.test/mod", "no credentials" },
        { "KIWI_GO_PROXY=http://go.acme.test/mod", "want `direct`" },
        { "KIWI_GO_PROXY=https://go.acme.test/mod?token=x", "want `direct`" },
        { "KIWI_GO_PROXY=https://go.acme.test/a/../b", "want `direct`" },
        { "KIWI_GO_PROXY=https://10.0.0.1/mod", "want `direct`" },
        { "KIWI_GO_PROXY=https://go.other.test/mod", "may not reach go.other.test" },
        { "KIWI_GO_PROXY=,", "names no proxy" },
        { "KIWI_GO_NOSUMDB=go.acme.test/$(x)", "KIWI_GO_NOSUMDB" },
        { "KIWI_GO_NOSUMDB=a,,b", "KIWI_GO_NOSUMDB" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        load (&cfg, decl, bad[i][0]);
        assert_int_equal (kiwi_go_private_check (&cfg, &err), -1);
        if (strstr (kiwi_error_msg (err), bad[i][1]) == NULL)
            fail_msg ("%s: %s", bad[i][0], kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_worker_config_clear (&cfg);
    }
    /* a host of KIWI_INSTALL_EGRESS is reachable; behind no proxy, refused */
    load (&cfg, "KIWI_GO_PROXY=https://go.other.test/mod", "KIWI_INSTALL_EGRESS=registries,.other.test");
    assert_int_equal (kiwi_go_private_check (&cfg, &err), 0);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, "KIWI_GO_PROXY=direct", "KIWI_INSTALL_EGRESS=open");
    assert_int_equal (kiwi_go_private_check (&cfg, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "not behind the egress proxy"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&cfg);

    /* placeholders: variable names, never KIWI_*; behind the proxy */
    const char *badph[] = { "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=NPM-TOKEN", "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=KIWI_X",
                            "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=1ABC" };
    for (size_t i = 0; i < sizeof badph / sizeof *badph; i++) {
        load (&cfg, decl, badph[i]);
        assert_int_equal (kiwi_go_private_check (&cfg, &err), -1);
        assert_non_null (strstr (kiwi_error_msg (err), "is not a variable name"));
        kiwi_error_free (&err);
        kiwi_worker_config_clear (&cfg);
    }
    load (&cfg, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=NPM_TOKEN", "KIWI_INSTALL_EGRESS=open");
    assert_int_equal (kiwi_go_private_check (&cfg, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "not behind the egress proxy"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, decl, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS=NPM_TOKEN, _gh_token");
    assert_int_equal (kiwi_go_private_check (&cfg, &err), 0);
    kiwi_strv ph = KIWI_STRV_INIT;
    assert_int_equal (kiwi_registry_placeholders_env (&cfg, &ph, &err), 0);
    char *phs = joined (&ph);
    assert_string_equal (phs, "NPM_TOKEN=" KIWI_REGISTRY_PLACEHOLDER " _gh_token=" KIWI_REGISTRY_PLACEHOLDER);
    free (phs);
    kiwi_strv_free (&ph);
    kiwi_strv phk = KIWI_STRV_INIT;
    assert_int_equal (kiwi_plan_key_env (&cfg, NULL, &phk, &err), 0);
    phs = joined (&phk);
    assert_non_null (strstr (phs, "kiwi-registry-placeholders=NPM_TOKEN, _gh_token"));
    free (phs);
    kiwi_strv_free (&phk);
    kiwi_worker_config_clear (&cfg);

    /* Phase A's environment and the key */
    load3 (&cfg, decl, "KIWI_GO_PROXY=https://go.acme.test/mod,https://proxy.golang.org",
           "KIWI_GO_NOSUMDB=go.acme.test/*");
    kiwi_strv env = KIWI_STRV_INIT, key = KIWI_STRV_INIT;
    assert_int_equal (kiwi_go_private_env (&cfg, &env, &err), 0);
    char *s = joined (&env);
    assert_string_equal (s, "GOPROXY=https://go.acme.test/mod,https://proxy.golang.org GONOSUMDB=go.acme.test/*");
    free (s);
    assert_int_equal (kiwi_plan_key_env (&cfg, NULL, &key, &err), 0);
    s = joined (&key);
    assert_non_null (strstr (s, "kiwi-go-proxy=https://go.acme.test/mod,https://proxy.golang.org"));
    assert_non_null (strstr (s, "kiwi-go-nosumdb=go.acme.test/*"));
    assert_null (strstr (s, "canary"));
    free (s);
    kiwi_strv_free (&env);
    kiwi_strv_free (&key);
    kiwi_worker_config_clear (&cfg);
    load (&cfg, NULL, NULL);
    assert_int_equal (kiwi_go_private_env (&cfg, &env, &err), 0);
    assert_int_equal (env.n, 0);
    assert_int_equal (kiwi_plan_key_env (&cfg, NULL, &key, &err), 0);
    s = joined (&key);
    assert_null (strstr (s, "kiwi-go-"));
    free (s);
    kiwi_strv_free (&key);
    kiwi_worker_config_clear (&cfg);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse),
        cmocka_unit_test (test_conf_argv),
        cmocka_unit_test (test_ca_bundle),
        cmocka_unit_test (test_key),
        cmocka_unit_test (test_go),
    };
    return cmocka_run_group_tests (tests, setup, teardown);
}
