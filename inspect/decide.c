/*
 * decide.c: the step-0 decision on a classified failure (see decide.h,
 * docs/inspection.md).
 */
#include "inspect/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/enum.h"
#include "common/cleanup.h"
#include "inspect/inspect-internal.h"
#include "inspect/services.h"

KIWI_ENUM_STR_FN (kiwi_step0_action_str, kiwi_step0_action, KIWI_STEP0_ACTIONS)

void
kiwi_step0_decision_clear (kiwi_step0_decision *d)
{
    kiwi_image_resolution_clear (&d->swap_to);
    memset (d, 0, sizeof *d);
}

void
kiwi_step0_finding (const kiwi_classification *c, const char *image, char *dst, size_t cap)
{
    const char *img = image && *image ? image : "the image";
    switch (c->cls) {
    case KIWI_FAILURE_NONE:
        snprintf (dst, cap, "%s", "");
        return;
    case KIWI_FAILURE_NEEDS_NETWORK:
        snprintf (dst, cap, "it could not reach %s%s%s (%s)", c->host[0] ? c->host : "the network",
                  c->what[0] ? " for " : "", c->what, c->rule);
        return;
    case KIWI_FAILURE_MISSING_RUNTIME:
        snprintf (dst, cap, "it runs `%s`, which %s does not have (%s)", c->command, img, c->rule);
        return;
    case KIWI_FAILURE_NEEDS_SERVICE:
        snprintf (dst, cap, "a connection to %s:%s was refused (%s)", c->host, c->port, c->rule);
        return;
    case KIWI_FAILURE_VERSION_MISMATCH:
        snprintf (dst, cap, "it needs %s %s%s%s (%s), which %s does not have", c->runtime[0] ? c->runtime : "another",
                  c->version[0] ? c->version : "version", c->what[0] ? " for " : "", c->what, c->rule, img);
        return;
    }
    snprintf (dst, cap, "%s", "");
}

/* ------------------------------------------------------------- deciding */

/* The requirement a version the output states stands for: "classfile:65"
 * is Java 21, "edition:2024" Rust 1.85; a bare version of a runtime that
 * stays compatible upwards (Go, Rust, Java, Maven) is a minimum. */
static void
stated_requirement (const char *runtime, const char *version, char *out, size_t cap)
{
    out[0] = '\0';
    if (version == NULL || *version == '\0')
        return;
    if (strncmp (version, "classfile:", 10) == 0) {
        int cf = atoi (version + 10);
        if (cf > 44)
            snprintf (out, cap, ">=%d", cf - 44);
        return;
    }
    if (strncmp (version, "edition:", 8) == 0) {
        static const struct {
            const char *edition, *rust;
        } eds[] = { { "2018", ">=1.31" }, { "2021", ">=1.56" }, { "2024", ">=1.85" } };
        for (size_t i = 0; i < sizeof eds / sizeof eds[0]; i++)
            if (strcmp (version + 8, eds[i].edition) == 0)
                snprintf (out, cap, "%s", eds[i].rust);
        return;
    }
    bool bare = version[0] >= '0' && version[0] <= '9';
    bool minimum = strcmp (runtime, "go") == 0 || strcmp (runtime, "rust") == 0 || strcmp (runtime, "java") == 0
                   || strcmp (runtime, "maven") == 0;
    snprintf (out, cap, "%s%s", bare && minimum ? ">=" : "", version);
}

static int
set_swap (kiwi_step0_decision *d, const char *root, const char *dir, const char *runtime, const char *req,
          const kiwi_image_catalog *cat, kiwi_error_t *err)
{
    return kiwi_image_for_runtime (root, dir, runtime, req, cat, &d->swap_to, err);
}


/* ------------------------------------------------ a declared service */

/* The host's own addresses, where a service the repository declares
 * publishes its ports. */
static bool
loopback (const char *h)
{
    return strcmp (h, "localhost") == 0 || strncmp (h, "127.", 4) == 0 || strcmp (h, "::1") == 0
           || strcmp (h, "0.0.0.0") == 0 || strcmp (h, "::") == 0 || strcmp (h, "::ffff:127.0.0.1") == 0;
}

/* ------------------------------------------------- a missing test tool */

/* The package.json script a word list names after npm, yarn, pnpm or bun
 * ("npm test", "npm run test:unit", "yarn test", "pnpm -r test"): copied
 * into `out`; false when the command names none. Whitespace words: the
 * script's name never needs quoting. */
static bool
script_named (const char *command, char *out, size_t cap)
{
    char buf[1024];
    snprintf (buf, sizeof buf, "%s", command);
    bool after_pm = false, after_run = false;
    char *save = NULL;
    for (char *w = strtok_r (buf, " \t", &save); w; w = strtok_r (NULL, " \t", &save)) {
        if (strcmp (w, "&&") == 0 || strcmp (w, "||") == 0 || strcmp (w, ";") == 0) {
            after_pm = after_run = false;
            continue;
        }
        if (!after_pm) {
            const char *b = strrchr (w, '/') ? strrchr (w, '/') + 1 : w;
            after_pm = strcmp (b, "npm") == 0 || strcmp (b, "yarn") == 0 || strcmp (b, "pnpm") == 0
                       || strcmp (b, "bun") == 0;
            continue;
        }
        if (w[0] == '-')
            continue;
        if (!after_run && (strcmp (w, "run") == 0 || strcmp (w, "run-script") == 0)) {
            after_run = true;
            continue;
        }
        snprintf (out, cap, "%s", strcmp (w, "t") == 0 && !after_run ? "test" : w);
        return true;
    }
    return false;
}

/* Whether the command Kiwi ran runs `exe` itself: one of its simple
 * commands, or of the package.json script it names (the project's, at
 * `dir`; a script naming another is followed, twice at most). *pkg gets
 * package.json (owned) when it was read. */
static bool
runs_tool (const char *root, const char *dir, const char *command, const char *exe, json_t **pkg, int depth)
{
    if (kiwi_command_runs (command, exe))
        return true;
    char name[256];
    if (depth > 2 || !script_named (command, name, sizeof name))
        return false;
    if (*pkg == NULL) {
        cleanup_free char *rel = NULL;
        if (asprintf (&rel, "%s%spackage.json", dir, dir[0] ? "/" : "") < 0)
            return false;
        cleanup_free char *text = kiwi__read_rel (root, rel, NULL);
        *pkg = text ? json_loads (text, 0, NULL) : NULL;
    }
    const char *script = json_string_value (json_object_get (json_object_get (*pkg, "scripts"), name));
    return script != NULL && runs_tool (root, dir, script, exe, pkg, depth + 1);
}

/* Whether package.json declares `exe` as a package of the same name (jest,
 * vitest, mocha: their executable's package). */
static bool
declares (json_t *pkg, const char *exe)
{
    static const char *const sections[] = { "devDependencies", "dependencies", "optionalDependencies" };
    for (size_t i = 0; pkg != NULL && i < sizeof sections / sizeof sections[0]; i++)
        if (json_object_get (json_object_get (pkg, sections[i]), exe) != NULL)
            return true;
    return false;
}

/* A command the shell (or make) could not find. It is a setup failure,
 * not the code's, when the command Kiwi ran runs it itself: the test
 * command's own executable, or its package.json script's, or a recipe
 * make ran. A command a test runs (a test shelling out to protoc) is the
 * test's own failure, and a path (./run-tests.sh) the repository's file.
 * Returns true and fills the decision when it stops. */
static bool
missing_tool (const kiwi_classification *c, const char *root, const char *dir, const char *cmd, const char *cur_img,
              kiwi_step0_decision *d)
{
    if (strchr (c->command, '/') != NULL)
        return false;
    json_t *pkg = NULL;
    bool make_recipe = strcmp (c->rule, "make-not-found") == 0;
    bool ran = make_recipe || runs_tool (root, dir, cmd, c->command, &pkg, 0);
    bool declared = ran && declares (pkg, c->command);
    json_decref (pkg);
    if (!ran)
        return false;
    d->action = KIWI_STEP0_STOP;
    snprintf (d->stop, sizeof d->stop, "missing_tool");
    if (declared)
        snprintf (d->reason, sizeof d->reason,
                  "missing_tool: the test command runs `%s`, which package.json declares but which is not there "
                  "after the install in %s: the install did not provide it (a setup failure, not the code's); "
                  "no round is spent on it",
                  c->command, cur_img);
    else
        snprintf (d->reason, sizeof d->reason,
                  "missing_tool: the test command runs `%s`%s, which %s does not have and the install did not "
                  "provide: add it to the project's test dependencies, or set the test command to one that runs "
                  "with what the project installs (%s)",
                  c->command, make_recipe ? " (a make recipe)" : "", cur_img, c->rule);
    return true;
}

int
kiwi_step0_decide (const kiwi_classification *c, const char *phase, const char *root, const char *test_command,
                   const kiwi_inspection *in, const kiwi_image_catalog *cat, kiwi_step0_decision *d,
                   kiwi_error_t *err)
{
    memset (d, 0, sizeof *d);
    d->action = KIWI_STEP0_HONEST;
    const char *cur_rt = in->image.runtime ? in->image.runtime : "";
    const char *cur_img = in->image.image ? in->image.image : "";
    const char *dir = in->image.project_dir ? in->image.project_dir : "";
    const char *cmd = test_command ? test_command : "";
    switch (c->cls) {
    case KIWI_FAILURE_NONE:
        snprintf (d->reason, sizeof d->reason, "no rule of the classifier matched: an honest result");
        return 0;
    case KIWI_FAILURE_NEEDS_NETWORK:
        if (strcmp (phase, "verify") != 0) {
            snprintf (d->reason, sizeof d->reason, "%s: Phase A has the network; the install failure stands",
                      c->rule);
            return 0;
        }
        d->action = KIWI_STEP0_STOP;
        snprintf (d->stop, sizeof d->stop, "needs_network");
        char tried[600];
        if (c->host[0] && c->what[0])
            snprintf (tried, sizeof tried, "tried to reach %s for %s", c->host, c->what);
        else if (c->host[0])
            snprintf (tried, sizeof tried, "tried to reach %s", c->host);
        else
            snprintf (tried, sizeof tried, "needed %s from the network", c->what[0] ? c->what : "something");
        snprintf (d->reason, sizeof d->reason,
                  "needs the network (%s): %s while running `%s`; Phase B has no network, so no change to the code "
                  "can make it pass here",
                  c->rule, tried, cmd);
        return 0;
    case KIWI_FAILURE_NEEDS_SERVICE: {
        kiwi_service_port sp;
        if (strcmp (phase, "verify") != 0 || !loopback (c->host) || !kiwi_service_for_port (root, atoi (c->port), &sp)) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: a connection to %s:%s was refused, a port the repository gives no service: an honest "
                      "result",
                      c->rule, c->host, c->port);
            return 0;
        }
        d->action = KIWI_STEP0_STOP;
        snprintf (d->stop, sizeof d->stop, "needs_service");
        snprintf (d->reason, sizeof d->reason,
                  "needs_service: the tests connect to %s:%s, which %s gives to service `%s`%s%s%s; Phase B starts "
                  "no services, so no change to the code can make them pass here (%s)",
                  c->host, c->port, sp.file, sp.service, sp.image[0] ? " (" : "", sp.image, sp.image[0] ? ")" : "",
                  c->rule);
        return 0;
    }
    case KIWI_FAILURE_MISSING_RUNTIME: {
        const char *rt = kiwi_runtime_of_executable (c->command);
        if (strcmp (phase, "verify") == 0 && (rt == NULL || strcmp (rt, cur_rt) == 0)
            && missing_tool (c, root, dir, cmd, cur_img, d))
            return 0;
        if (rt == NULL) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: `%s` is not found, but it belongs to no runtime the classifier knows: an honest result",
                      c->rule, c->command);
            return 0;
        }
        if (strcmp (rt, cur_rt) == 0) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: `%s` is %s's and the image runs %s: a missing dependency or script, an honest result",
                      c->rule, c->command, rt, cur_rt);
            return 0;
        }
        if (!kiwi_image_catalog_has_runtime (cat, rt)) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->stop, sizeof d->stop, "no_image");
            snprintf (d->reason, sizeof d->reason,
                      "the test command needs `%s` (%s), which is not in %s and no image in the catalogue (%s) "
                      "provides",
                      c->command, rt, cur_img, kiwi_image_catalog_origin (cat));
            return 0;
        }
        int rc = set_swap (d, root, dir, rt, NULL, cat, err);
        if (rc < 0)
            return -1;
        d->action = KIWI_STEP0_SWAP;
        snprintf (d->reason, sizeof d->reason, "%s: `%s` is not in %s; it is %s's: %s", c->rule, c->command, cur_img,
                  rt, d->swap_to.reason);
        return 0;
    }
    case KIWI_FAILURE_VERSION_MISMATCH: {
        const char *rt = c->runtime[0] ? c->runtime : cur_rt;
        if (strcmp (c->version, "nightly") == 0) {
            /* a compiler's own channel, not a version: the catalogue's images
             * are releases of the stable channel */
            d->action = KIWI_STEP0_STOP;
            snprintf (d->stop, sizeof d->stop, "no_version");
            snprintf (d->reason, sizeof d->reason,
                      "%s: needs a nightly %s toolchain (the build uses unstable features), and every %s image in "
                      "the catalogue (%s) is a stable release; no change to the code is attempted for it",
                      c->rule, rt, rt, kiwi_image_catalog_origin (cat));
            return 0;
        }
        char req[96];
        const char *req_from = "the failure";
        stated_requirement (rt, c->version, req, sizeof req);
        cleanup_free char *mreq = NULL, *mfrom = NULL;
        if (!req[0]) {
            /* the output names no version: the repository's own markers must
             * ask for one the current image does not have */
            kiwi_version_prefer prefer;
            if (kiwi_version_markers (root, dir, rt, &mreq, &mfrom, &prefer, err) < 0)
                return -1;
            const kiwi_image_entry *cur = kiwi_image_catalog_by_ref (cat, cur_img);
            bool cur_ok = mreq != NULL && cur != NULL && strcmp (cur->runtime, rt) == 0
                          && strcmp (cur->version, "*") != 0 && kiwi_version_req_allows (mreq, cur->version) == 1;
            if (mreq == NULL || cur_ok) {
                snprintf (d->reason, sizeof d->reason,
                          "%s: looks like an older %s%s%s%s, but nothing asks for another version%s%s: an "
                          "honest result",
                          c->rule, rt, c->what[0] ? " (" : "", c->what, c->what[0] ? ")" : "",
                          cur_ok ? " than " : "", cur_ok ? cur_img : "");
                return 0;
            }
            snprintf (req, sizeof req, "%s", mreq);
            req_from = mfrom;
        }
        if (!kiwi_image_catalog_has_runtime (cat, rt)) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->stop, sizeof d->stop, "no_image");
            snprintf (d->reason, sizeof d->reason, "%s: needs %s %s (%s), and no image in the catalogue runs %s",
                      c->rule, rt, req, req_from, rt);
            return 0;
        }
        bool sat = false;
        kiwi_version_prefer prefer = strcmp (rt, "java") == 0 ? KIWI_PREFER_LOWEST : KIWI_PREFER_HIGHEST;
        const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, rt, req, prefer, &sat);
        if (e == NULL || !sat) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->stop, sizeof d->stop, "no_version");
            snprintf (d->reason, sizeof d->reason,
                      "%s: needs %s %s (%s), which no image in the catalogue (%s) has%s%s; no change to the code "
                      "is attempted for it",
                      c->rule, rt, req, req_from, kiwi_image_catalog_origin (cat), e ? ": the nearest is " : "",
                      e ? e->ref : "");
            return 0;
        }
        if (strcmp (e->ref, cur_img) == 0) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: %s asks for %s %s and %s already has it: an honest result", c->rule, req_from, rt, req,
                      cur_img);
            return 0;
        }
        if (set_swap (d, root, dir, rt, req, cat, err) < 0)
            return -1;
        if (d->swap_to.image == NULL) {
            snprintf (d->reason, sizeof d->reason, "%s: no image for %s %s: an honest result", c->rule, rt, req);
            return 0;
        }
        free (d->swap_to.requirement_from);
        d->swap_to.requirement_from = strdup (req_from);
        d->action = KIWI_STEP0_SWAP;
        snprintf (d->reason, sizeof d->reason, "%s%s%s%s: %s asks for %s %s, which %s lacks: swap %s -> %s", c->rule,
                  c->what[0] ? " (" : "", c->what, c->what[0] ? ")" : "", req_from, rt, req, cur_img, cur_img,
                  d->swap_to.image);
        return 0;
    }
    }
    return 0;
}

