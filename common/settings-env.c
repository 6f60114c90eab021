/*
 * settings-env.c: the environment's KIWI_ variables that are no setting.
 * kiwi and kiwi-worker share an environment, so a variable is known when it
 * is any program's row, the sandbox alias, or one of the non-setting
 * variables below (the one list of them); any other KIWI_ variable is most
 * likely a typo, and gets one warning naming it and, when one is close, the
 * setting it probably meant. A value is never printed: it may be a secret.
 */
#include "common/settings-internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* Known KIWI_ variables that are no row. A name ending in '_' is a prefix. */
static const char *const known_vars[] = {
    /* the sandbox driver's alias (KIWI_SANDBOX's row, settings-load.c), and
     * the git token, the variable git.token_var names by default */
    "KIWI_SANDBOX_RUNTIME",
    "KIWI_GIT_TOKEN",
    /* what ops/stack.sh writes into stack.env beside rows (scripts source
     * it with set -a, so kiwi and kiwi-worker inherit them) */
    "KIWI_KAFKA_CONTROLLER",
    "KIWI_REDIS_URL",
    "KIWI_SANDBOX_RUNTIMES",
    "KIWI_LOG_DIR",
    /* what the ops scripts read from their environment (ops/: stack.sh,
     * lib.sh, setup.sh, egress/, images/, firecracker/, gvisor/, demo.sh) */
    "KIWI_CA_MIN_DEBIAN",
    "KIWI_COMMON_CHECKS",
    "KIWI_CURRENT_STEP",
    "KIWI_DEBIAN_DEFAULT_SUITE",
    "KIWI_DEBIAN_MIRROR",
    "KIWI_DEBIAN_SECURITY_MIRROR",
    "KIWI_DEBIAN_SUITE",
    "KIWI_DEFAULT_PATH",
    "KIWI_DEMO_MODEL",
    "KIWI_DL",
    "KIWI_DOCKER",
    "KIWI_DOCKER_TIMEOUT",
    "KIWI_EGRESS_ALLOW",
    "KIWI_EGRESS_CONF",
    "KIWI_EGRESS_DENY",
    "KIWI_EGRESS_DIR",
    "KIWI_EGRESS_DNS",
    "KIWI_EGRESS_INSTALL_BRIDGE",
    "KIWI_EGRESS_IPV6",
    "KIWI_EGRESS_METADATA",
    "KIWI_EGRESS_PROXY",
    "KIWI_EGRESS_RESOLV_CONF",
    "KIWI_EGRESS_RFC1918",
    "KIWI_EGRESS_RUN_DIR",
    "KIWI_ENV_FILE",
    "KIWI_FC_SKIP_KVM_CHECK",
    "KIWI_HOST_CA_BUNDLE",
    "KIWI_IMAGES_DIR",
    "KIWI_IMAGES_LOG_NAME",
    "KIWI_IMAGES_STATE",
    "KIWI_IMAGE_NAMES",
    "KIWI_KAFKA_HEAP",
    "KIWI_KAFKA_LIB",
    "KIWI_KAFKA_PARTITIONS",
    "KIWI_KAFKA_TIMEOUT",
    "KIWI_LOG_NAME",
    "KIWI_MVN_ARGS",
    "KIWI_OPS_DIR",
    "KIWI_RECIPE_FORMAT",
    "KIWI_REDIS_TIMEOUT",
    "KIWI_REPO_DIR",
    "KIWI_ROOTFS",
    "KIWI_RUNSC_BUILT",
    "KIWI_RUNSC_DEBIAN",
    "KIWI_RUN_DIR",
    "KIWI_STACK_KAFKA_CONTROLLER_PORT",
    "KIWI_STACK_KAFKA_PORT",
    "KIWI_STACK_LOCK_TIMEOUT",
    "KIWI_STACK_REDIS_PORT",
    "KIWI_STACK_STORE_PORT",
    "KIWI_STOP_TIMEOUT",
    "KIWI_VERIFY_IMAGE",
    /* the test harness's (tests/, bench/): ctest's and run.sh's switches,
     * what the shell tests export to their helpers, a fault marker of
     * test tasks */
    "KIWI_REQUIRE_SERVICES",
    "KIWI_REQUIRE_FIRECRACKER",
    "KIWI_BUILD_DIR",
    "KIWI_CLI_BIN",
    "KIWI_FAULT",
    "KIWI_FUZZ_SCALE",
    "KIWI_FUZZ_SEED",
    "KIWI_HOSTILE_PART",
    "KIWI_PROXY_TEST_IMAGE",
    "KIWI_PYTHON3",
    "KIWI_SCRIPTED_PROVIDER_SCRIPTS",
    "KIWI_BENCH",
    "KIWI_BENCH_",
    "KIWI_TEST_",
    "KIWI_CORPUS_",
    "KIWI_SH_",
    "KIWI_KEEP_",
};

static bool
is_known (const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof known_vars / sizeof known_vars[0]; i++) {
        size_t k = strlen (known_vars[i]);
        if (known_vars[i][k - 1] == '_' ? n > k && strncmp (name, known_vars[i], k) == 0
                                        : n == k && strncmp (name, known_vars[i], k) == 0)
            return true;
    }
    for (int i = 0; i < KIWI_SETTING__COUNT; i++)
        if (strlen (kiwi__settings[i].env) == n && strncmp (name, kiwi__settings[i].env, n) == 0)
            return true;
    return false;
}

/* Edit distance with adjacent transpositions (optimal string alignment). */
static size_t
distance (const char *a, size_t na, const char *b, size_t nb)
{
    size_t *d = calloc ((na + 1) * (nb + 1), sizeof *d);
    if (d == NULL)
        return (size_t) -1;
#define D(i, j) d[(i) * (nb + 1) + (j)]
    for (size_t i = 0; i <= na; i++)
        D (i, 0) = i;
    for (size_t j = 0; j <= nb; j++)
        D (0, j) = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = D (i - 1, j) + 1;
            if (D (i, j - 1) + 1 < v)
                v = D (i, j - 1) + 1;
            if (D (i - 1, j - 1) + cost < v)
                v = D (i - 1, j - 1) + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && D (i - 2, j - 2) + 1 < v)
                v = D (i - 2, j - 2) + 1;
            D (i, j) = v;
        }
    size_t r = D (na, nb);
#undef D
    free (d);
    return r;
}

static int
cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The words of a name (split at '_'), sorted and joined with '_' into out
 * (cap bytes), so that names of the same words in any order compare
 * equal. Returns its length, or 0 when it does not fit. */
static size_t
sorted_words (const char *name, size_t n, char *out, size_t cap)
{
    char buf[256];
    char *words[64];
    size_t nw = 0;
    if (n >= sizeof buf || n >= cap)
        return 0;
    memcpy (buf, name, n);
    buf[n] = '\0';
    for (char *save = NULL, *w = strtok_r (buf, "_", &save); w != NULL && nw < 64; w = strtok_r (NULL, "_", &save))
        words[nw++] = w;
    qsort (words, nw, sizeof words[0], cmp_str);
    size_t len = 0;
    for (size_t i = 0; i < nw; i++) {
        size_t wl = strlen (words[i]);
        if (len + wl + 2 > cap)
            return 0;
        if (i > 0)
            out[len++] = '_';
        memcpy (out + len, words[i], wl);
        len += wl;
    }
    out[len] = '\0';
    return len;
}

/* How far `name` is from a row's variable: the smaller of the edit
 * distance of the names and that of their sorted words (a reordering costs
 * nothing; a typo inside reordered words still counts). */
static size_t
closeness (const char *name, size_t n, const char *env)
{
    size_t ne = strlen (env);
    size_t best = distance (name, n, env, ne);
    char sa[256], sb[256];
    size_t la = sorted_words (name, n, sa, sizeof sa), lb = sorted_words (env, ne, sb, sizeof sb);
    if (la > 0 && lb > 0) {
        size_t w = distance (sa, la, sb, lb);
        if (w < best)
            best = w;
    }
    return best;
}

const char *
kiwi__setting_env_closest (const char *name, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t) -1;
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const char *env = kiwi__settings[i].env;
        size_t d = closeness (name, n, env);
        if (d < best_d) {
            best_d = d;
            best = env;
        }
    }
    /* close: a slip or two, more in a longer name (past the KIWI_ prefix) */
    size_t len = n > 5 ? n - 5 : 0;
    size_t limit = len <= 4 ? 1 : len <= 12 ? 2 : 3;
    return best_d <= limit ? best : NULL;
}

void
kiwi__settings_env_warn (const char *const *envp, const char *token_var)
{
    for (const char *const *e = envp; e && *e; e++) {
        const char *eq = strchr (*e, '=');
        size_t n = eq ? (size_t) (eq - *e) : strlen (*e);
        if (strncmp (*e, "KIWI_", 5) != 0 || is_known (*e, n))
            continue;
        if (token_var != NULL && strlen (token_var) == n && strncmp (*e, token_var, n) == 0)
            continue;
        bool seen = false; /* once per variable */
        for (const char *const *p = envp; p < e && !seen; p++)
            seen = strncmp (*p, *e, n) == 0 && ((*p)[n] == '=' || (*p)[n] == '\0');
        if (seen)
            continue;
        const char *near = kiwi__setting_env_closest (*e, n);
        if (near != NULL)
            kiwi_warn ("environment: %.*s is no setting of kiwi or kiwi-worker; ignored (did you mean %s?)", (int) n,
                       *e, near);
        else
            kiwi_warn ("environment: %.*s is no setting of kiwi or kiwi-worker; ignored", (int) n, *e);
    }
}
