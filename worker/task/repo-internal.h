/*
 * repo-internal.h: the one way repo.c runs git, as a pure function so that
 * its argv and environment can be checked without running anything.
 *
 * Every git the worker runs gets: an explicit GIT_DIR (and GIT_WORK_TREE
 * when there is a work tree), so git never discovers a repository from its
 * working directory; no system or global configuration (GIT_CONFIG_NOSYSTEM,
 * GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM, HOME and XDG_CONFIG_HOME at
 * an empty directory); hooks, fsmonitor, pagers, credential helpers and
 * replace refs off; safe.bareRepository=explicit; none of the worker's own
 * GIT_* variables (only GIT_SSL_CAINFO, the operator's CA bundle, passes);
 * and, when a protocol list is given, protocol.allow=never with
 * protocol.<p>.allow=always for each listed protocol.
 */
#ifndef KIWI_WORKER_REPO_INTERNAL_H
#define KIWI_WORKER_REPO_INTERNAL_H

#include "common/strv.h"

typedef struct kiwi__git_call {
    const char *git_dir;    /* GIT_DIR, or NULL (clone, init: they name their directory) */
    const char *work_tree;  /* GIT_WORK_TREE, or NULL */
    const char *index_file; /* GIT_INDEX_FILE, or NULL (git's default in git_dir) */
    const char *home;       /* an empty directory for HOME and XDG_CONFIG_HOME */
    const char *protocols;  /* colon-separated list ("https:ssh"), or NULL: git's defaults */
    const char *token;      /* the https token, or NULL */
    const char *url;        /* the URL the token is for (only https URLs get it), or NULL */
} kiwi__git_call;

/* Builds argv ("git", the safety options, then `args`) and the environment
 * (host_env filtered, then the settings above) for one git call. Returns < 0
 * on allocation failure or a protocol name that is not [a-z0-9+.-]. */
int kiwi__git_command (const kiwi__git_call *c, const char *const *args, const char *const *host_env, kiwi_strv *argv,
                       kiwi_strv *env);

#endif
