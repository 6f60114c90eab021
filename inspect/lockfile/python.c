/*
 * python.c: the Python install planner of the runtime table: uv,
 * Poetry, Pipenv, and pip into a project .venv (requirements files,
 * pyproject.toml [project], setup.py) (see lockfile.h,
 * docs/inspection.md).
 */
#include "inspect/lockfile/lockfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/runtime.h"

/* -------------------------------------------------------------- Python */

static bool
requirements_nonempty (const char *text)
{
    for (const char *p = text; p && *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p && *p != '#' && *p != '\n' && *p != '\r')
            return true;
        p = strchr (p, '\n');
        if (p)
            p++;
    }
    return false;
}

static const char *const requirement_files[] = {
    "requirements.txt",     "requirements-dev.txt", "requirements_dev.txt", "requirements-test.txt",
    "requirements_test.txt", "requirements-tests.txt", "dev-requirements.txt", "test-requirements.txt", NULL,
};

/* Poetry: the dependencies in Phase A (--no-root: the project's code is not
 * there), the project itself at the start of Phase B, offline, as Poetry
 * installs it (an editable .pth into the in-project .venv). A project that
 * is no package (package-mode = false) has nothing to install. */
static int
add_poetry (kiwi__steps *s, const char *dir, bool locked, const char *why, kiwi_error_t *err)
{
    if (kiwi__add_step (s, KIWI_ECO_POETRY, dir, locked, "poetry install --no-root", "poetry install --no-root", why,
                        err)
                        < 0)
                        return -1;
    return kiwi__set_prelude (s, "poetry install --only-root --no-interaction", err);
}

#define VENV_SCRIPT "python3 -m venv .venv && .venv/bin/pip install"

/* `pip install -e .`: Phase A installs the dependencies over the
 * manifests; the project itself is installed again at the start of Phase
 * B, offline and without its dependencies, now that its code is there. */
static int
add_editable (kiwi__steps *s, const char *dir, const char *summary, const char *script, const char *why,
              kiwi_error_t *err)
{
    if (kiwi__add_step (s, KIWI_ECO_PIP, dir, false, summary, script, why, err) < 0)
                        return -1;
    return kiwi__set_prelude (s, ".venv/bin/pip install --no-deps --no-index --no-build-isolation -e .", err);
}

int
kiwi__detect_python (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    if (kiwi__has_in (root, dir, "uv.lock"))
        /* the project itself is not in Phase A's input: installed in Phase B */
        return kiwi__add_step (s, KIWI_ECO_UV, dir, true, "uv sync --frozen --no-install-project",
                               "uv sync --frozen --no-install-project", "uv.lock", err);
    if (kiwi__has_in (root, dir, "poetry.lock"))
        return add_poetry (s, dir, true, "poetry.lock", err);
    if (kiwi__has_in (root, dir, "Pipfile.lock"))
        return kiwi__add_step (s, KIWI_ECO_PIPENV, dir, true, "pipenv sync --dev", "pipenv sync --dev", "Pipfile.lock",
                               err);
    char args[512] = "", names[512] = "";
    for (size_t i = 0; requirement_files[i]; i++) {
        const char *t = kiwi__ctx_text (ctx, dir, requirement_files[i], NULL);
        if (t == NULL || !requirements_nonempty (t))
            continue;
        size_t al = strlen (args), nl = strlen (names);
        snprintf (args + al, sizeof args - al, " -r %s", requirement_files[i]);
        snprintf (names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", requirement_files[i]);
    }
    if (args[0]) {
        char script[700], summary[600];
        snprintf (script, sizeof script, VENV_SCRIPT "%s", args);
        snprintf (summary, sizeof summary, "pip install%s (.venv)", args);
        /* pinned or not, requirements files are what the project installs with */
        return kiwi__add_step (s, KIWI_ECO_PIP, dir, false, summary, script, names, err);
    }
    const char *pp = kiwi__ctx_text (ctx, dir, "pyproject.toml", NULL);
    if (pp != NULL) {
        cleanup_free char *poetry_name = kiwi__toml_get (pp, "tool.poetry", "name");
        if (poetry_name != NULL || kiwi__toml_table_nonempty (pp, "tool.poetry.dependencies"))
            return add_poetry (s, dir, false, "pyproject.toml [tool.poetry], no poetry.lock", err);
        cleanup_free char *deps = kiwi__toml_get (pp, "project", "dependencies");
        char **extras = kiwi__toml_keys (pp, "project.optional-dependencies");
        static const char *const wanted[] = { "test", "tests", "testing", "dev", NULL };
        char ex[128] = "";
        for (size_t i = 0; extras && extras[i]; i++)
            for (size_t w = 0; wanted[w]; w++)
                if (strcmp (extras[i], wanted[w]) == 0) {
                    size_t l = strlen (ex);
                    snprintf (ex + l, sizeof ex - l, "%s%s", l ? "," : "", extras[i]);
                }
        kiwi__strv_free_raw (extras);
        if (kiwi__toml_array_nonempty (deps) || ex[0]) {
            char script[300], summary[200];
            snprintf (script, sizeof script, VENV_SCRIPT " -e '.%s%s%s'", ex[0] ? "[" : "", ex, ex[0] ? "]" : "");
            snprintf (summary, sizeof summary, "pip install -e .%s%s%s (.venv)", ex[0] ? "[" : "", ex,
                      ex[0] ? "]" : "");
            return add_editable (s, dir, summary, script, "pyproject.toml [project]", err);
        }
    }
    if (kiwi__has_in (root, dir, "Pipfile"))
        return kiwi__add_step (s, KIWI_ECO_PIPENV, dir, false, "pipenv install --dev", "pipenv install --dev",
                               "Pipfile, no Pipfile.lock", err);
    if (kiwi__has_in (root, dir, "setup.py"))
        return add_editable (s, dir, "pip install -e . (.venv)", VENV_SCRIPT " -e .", "setup.py", err);
    return 0;
}

