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
#include <strings.h>

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

/* A requirements/ folder: the files for tests when there are any (they
 * include the base with -r), else those for development, else the base. */
static const char *const requirement_dir_tiers[][7] = {
    { "requirements/test.txt", "requirements/tests.txt", "requirements/testing.txt", "requirements/ci.txt", NULL },
    { "requirements/dev.txt", "requirements/development.txt", NULL },
    { "requirements/base.txt", "requirements/common.txt", "requirements/default.txt", "requirements/main.txt",
      "requirements/requirements.txt", "requirements/prod.txt", NULL },
};

/* The program Phase A runs for pip (kiwi__detect_python): the requirement
 * lines from the manifests alone, self-references (-e .) left to Phase B
 * (docs/inspection.md says what it reads). */
static const char *const pydeps_source =
    "# kiwi pydeps: what Phase A installs for a pip project, from its manifests.\n"
    "# Usage: python3 pydeps.py OUT SELF [REQUIREMENTS...]   (SELF: 1 when the\n"
    "# project itself is installed in Phase B; a self-reference in a requirement\n"
    "# file makes it so too, and leaves .venv/kiwi-project for Phase B).\n"
    "# Self-references in requirement files (-e ., .[extra]) are commented out in\n"
    "# place (Phase A has no code); OUT gets -r for each file, then, for the\n"
    "# project itself, its declared dependencies, the extras it is asked with (or\n"
    "# those named test/tests/testing/dev), those dependency groups (PEP 735) and\n"
    "# its build requirements.\n"
    "# .venv/bin/python pydeps.py --editable OUT: what the build backend asks\n"
    "# for an editable install (hatchling: editables), asked of the backend.\n"
    "# python3 pydeps.py --build OUT: a uv project's build requirements, when it\n"
    "# is a package (Phase B installs it without a network).\n"
    "import importlib, os, re, sys\n"
    "try:\n"
    "    import tomllib\n"
    "except ImportError:\n"
    "    tomllib = None\n"
    "pp = {}\n"
    "if os.path.isfile(\"pyproject.toml\"):\n"
    "    if tomllib is None:\n"
    "        print(\"kiwi: this Python has no tomllib; pyproject.toml's lists are not read\", file=sys.stderr)\n"
    "    else:\n"
    "        try:\n"
    "            with open(\"pyproject.toml\", \"rb\") as f:\n"
    "                pp = tomllib.load(f)\n"
    "        except Exception as e:\n"
    "            print(\"kiwi: pyproject.toml: %s\" % e, file=sys.stderr)\n"
    "def table(d, k):\n"
    "    v = d.get(k) if isinstance(d, dict) else None\n"
    "    return v if isinstance(v, dict) else {}\n"
    "def strings(v):\n"
    "    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []\n"
    "def norm(n):\n"
    "    return re.sub(r\"[-_.]+\", \"-\", n).lower()\n"
    "def write(path, lines):\n"
    "    with open(path, \"w\", encoding=\"utf-8\") as f:\n"
    "        f.write(\"\".join(l + \"\\n\" for l in lines))\n"
    "if sys.argv[1] == \"--build\":\n"
    "    # a uv project that is a package ([build-system], tool.uv.package not\n"
    "    # false): its build requirements, and .venv/kiwi-project for Phase B\n"
    "    uv = table(table(pp, \"tool\"), \"uv\")\n"
    "    bs = table(pp, \"build-system\")\n"
    "    package = uv.get(\"package\") if isinstance(uv.get(\"package\"), bool) else bool(bs)\n"
    "    write(sys.argv[2], (strings(bs.get(\"requires\")) or [\"setuptools>=40.8.0\"]) if package else [])\n"
    "    if package and os.path.isdir(\".venv\"):\n"
    "        open(os.path.join(\".venv\", \"kiwi-project\"), \"w\").close()\n"
    "    sys.exit(0)\n"
    "if sys.argv[1] == \"--editable\":\n"
    "    # the hook may rewrite sys.argv (setuptools does); no .git here\n"
    "    bs, reqs, out = table(pp, \"build-system\"), [], sys.argv[2]\n"
    "    os.environ.setdefault(\"SETUPTOOLS_SCM_PRETEND_VERSION\", \"0.0.0\")\n"
    "    try:\n"
    "        for p in strings(bs.get(\"backend-path\")):\n"
    "            sys.path.insert(0, os.path.abspath(p))\n"
    "        mod, _, attrs = (bs.get(\"build-backend\") or \"setuptools.build_meta:__legacy__\").partition(\":\")\n"
    "        backend = importlib.import_module(mod)\n"
    "        for a in filter(None, attrs.split(\".\")):\n"
    "            backend = getattr(backend, a)\n"
    "        hook = getattr(backend, \"get_requires_for_build_editable\", None)\n"
    "        reqs = strings(list(hook({}))) if hook else []\n"
    "    except BaseException as e:\n"
    "        print(\"kiwi: what the build backend needs for an editable install is unknown: %r\" % e,\n"
    "              file=sys.stderr)\n"
    "    write(out, reqs)\n"
    "    sys.exit(0)\n"
    "out, want_self, reqs = sys.argv[1], sys.argv[2] == \"1\", sys.argv[3:]\n"
    "top = os.path.realpath(\".\")\n"
    "proj = table(pp, \"project\")\n"
    "name = norm(proj[\"name\"]) if isinstance(proj.get(\"name\"), str) else None\n"
    "WANT = (\"test\", \"tests\", \"testing\", \"dev\")\n"
    "SELF = re.compile(r\"^\\s*(?:(?:-e|--editable)(?:=|\\s+))?(?:file:)?\\.\\/?(?:\\[([^\\]]*)\\])?\\s*(?:#.*)?$\")\n"
    "INCL = re.compile(r\"^\\s*(?:-r|--requirement|-c|--constraint)(?:=|\\s+)(\\S+)\")\n"
    "extras, seen = set(), set()\n"
    "def clean(path):\n"
    "    global want_self\n"
    "    rp = os.path.realpath(path)\n"
    "    if rp in seen or not rp.startswith(top + os.sep) or not os.path.isfile(rp):\n"
    "        return\n"
    "    seen.add(rp)\n"
    "    with open(rp, encoding=\"utf-8\", errors=\"replace\") as f:\n"
    "        lines = f.read().splitlines()\n"
    "    kept = []\n"
    "    for line in lines:\n"
    "        m = SELF.match(line)\n"
    "        if m:\n"
    "            want_self = True\n"
    "            extras.update(e.strip() for e in (m.group(1) or \"\").split(\",\") if e.strip())\n"
    "            kept.append(\"# kiwi: the project itself, installed at the start of Phase B: \" + line.strip())\n"
    "            continue\n"
    "        m = INCL.match(line)\n"
    "        if m:\n"
    "            clean(os.path.join(os.path.dirname(rp), m.group(1)))\n"
    "        kept.append(line)\n"
    "    with open(rp, \"w\", encoding=\"utf-8\") as f:\n"
    "        f.write(\"\\n\".join(kept) + \"\\n\")\n"
    "for r in reqs:\n"
    "    clean(r)\n"
    "REQ = re.compile(r\"^\\s*([A-Za-z0-9][A-Za-z0-9._-]*)\\s*(?:\\[([^\\]]*)\\])?\")\n"
    "def expand(deps, depth=0):\n"
    "    # a dependency on the project itself (name[extra]) is its extras' lists\n"
    "    res = []\n"
    "    for d in deps:\n"
    "        m = REQ.match(d)\n"
    "        if m and name and norm(m.group(1)) == name:\n"
    "            if depth < 8:  # opt: the project's extras (below)\n"
    "                for e in (m.group(2) or \"\").split(\",\"):\n"
    "                    res += expand(strings(opt.get(e.strip())), depth + 1)\n"
    "        else:\n"
    "            res.append(d)\n"
    "    return res\n"
    "def tox_deps(extras_only=False):\n"
    "    # tox's test environment (tox.ini [testenv] deps, or [tool.tox]\n"
    "    # env_run_base.deps): {[section]key} followed, lines for some factors\n"
    "    # only (\"py312: x\") and unresolved substitutions left out; with\n"
    "    # extras_only, the extras it installs the project with alone\n"
    "    import configparser\n"
    "    res = []\n"
    "    ini = configparser.ConfigParser(interpolation=None, strict=False)\n"
    "    try:\n"
    "        ini.read(\"tox.ini\", encoding=\"utf-8\")\n"
    "    except (configparser.Error, UnicodeError) as e:\n"
    "        print(\"kiwi: tox.ini: %s\" % e, file=sys.stderr)\n"
    "        return res\n"
    "    def lines_of(section, key, depth=0):\n"
    "        out = []\n"
    "        if depth > 8 or not ini.has_option(section, key):\n"
    "            return out\n"
    "        for line in ini.get(section, key).splitlines():\n"
    "            line = re.sub(r\"\\s+#.*$\", \"\", line).strip()\n"
    "            m = re.fullmatch(r\"\\{\\[([^\\]]+)\\]([\\w-]+)\\}\", line)\n"
    "            if m:\n"
    "                out += lines_of(m.group(1), m.group(2), depth + 1)\n"
    "            elif line and not re.match(r\"^[\\w.,!{}-]+:\\s\", line):\n"
    "                out.append(line.replace(\"{toxinidir}/\", \"\"))\n"
    "        return out\n"
    "    base = table(table(table(pp, \"tool\"), \"tox\"), \"env_run_base\")\n"
    "    for line in [] if extras_only else lines_of(\"testenv\", \"deps\") + strings(base.get(\"deps\")):\n"
    "        if \"{\" not in line and not SELF.match(line):\n"
    "            res.append(line)\n"
    "    # the extras tox installs the project with (opt: the project's):\n"
    "    # `extras`, and a command that installs it with some (.[d])\n"
    "    named = lines_of(\"testenv\", \"extras\") + strings(base.get(\"extras\"))\n"
    "    for line in lines_of(\"testenv\", \"commands\"):\n"
    "        if re.search(r\"\\bpytest\\b|-m unittest|\\bnose2?\\b\", line):\n"
    "            break  # those before the first test run (black installs .[jupyter] for a second)\n"
    "        m = re.match(r\"^(?:python3? -m )?pip install (?:-e |--editable )?[\\\"']?\\.\\[([^\\]]+)\\]\", line)\n"
    "        if m:\n"
    "            named.append(m.group(1))\n"
    "    for e in named:\n"
    "        for x in e.split(\",\"):\n"
    "            res += strings(opt.get(x.strip()))\n"
    "    return res\n"
    "def setup_cfg():\n"
    "    # setuptools' declarative setup.cfg: [options] install_requires,\n"
    "    # setup_requires, tests_require, [options.extras_require]; a value is\n"
    "    # lines (or ;-separated on one line) or file: FILES\n"
    "    import configparser\n"
    "    global name\n"
    "    cfg = configparser.ConfigParser(interpolation=None, strict=False)\n"
    "    try:\n"
    "        cfg.read(\"setup.cfg\", encoding=\"utf-8\")\n"
    "    except (configparser.Error, UnicodeError) as e:\n"
    "        print(\"kiwi: setup.cfg: %s\" % e, file=sys.stderr)\n"
    "        return [], [], {}\n"
    "    def listed(v):\n"
    "        v = v.strip()\n"
    "        if v.startswith(\"file:\"):\n"
    "            fs = [os.path.realpath(f.strip()) for f in v[5:].split(\",\")]\n"
    "            return [\"-r \" + f for f in fs if f.startswith(top + os.sep) and os.path.isfile(f)]\n"
    "        items = [x.strip() for x in (v.splitlines() if \"\\n\" in v else v.split(\";\"))]\n"
    "        return [x for x in items if x and not x.startswith(\"#\")]\n"
    "    if name is None and cfg.has_option(\"metadata\", \"name\"):\n"
    "        name = norm(cfg.get(\"metadata\", \"name\").strip())\n"
    "    opt = {}\n"
    "    if cfg.has_section(\"options.extras_require\"):\n"
    "        opt = {k: listed(v) for k, v in cfg.items(\"options.extras_require\")}\n"
    "    return (listed(cfg.get(\"options\", \"install_requires\", fallback=\"\"))\n"
    "            + listed(cfg.get(\"options\", \"setup_requires\", fallback=\"\")),\n"
    "            listed(cfg.get(\"options\", \"tests_require\", fallback=\"\")), opt)\n"
    "lines = [\"-r \" + os.path.realpath(r) for r in reqs if os.path.isfile(r)]\n"
    "if want_self:\n"
    "    deps = strings(proj.get(\"dependencies\"))\n"
    "    dyn = table(table(table(pp, \"tool\"), \"setuptools\"), \"dynamic\")\n"
    "    if \"dependencies\" in strings(proj.get(\"dynamic\")):\n"
    "        files = table(dyn, \"dependencies\").get(\"file\")\n"
    "        files = [files] if isinstance(files, str) else strings(files)\n"
    "        lines += [\"-r \" + os.path.realpath(f) for f in files if os.path.isfile(f)]\n"
    "    opt = table(proj, \"optional-dependencies\")\n"
    "    deps_for_tests = []\n"
    "    if os.path.isfile(\"setup.cfg\") and \"dependencies\" not in proj:\n"
    "        cfg_deps, deps_for_tests, cfg_opt = setup_cfg()\n"
    "        deps += cfg_deps\n"
    "        if \"optional-dependencies\" not in proj:\n"
    "            opt = cfg_opt\n"
    "    for e in sorted(extras or [e for e in opt if norm(e) in WANT]):\n"
    "        deps_for_tests += strings(opt.get(e))\n"
    "    groups = table(pp, \"dependency-groups\")\n"
    "    def group(g, depth=0):\n"
    "        res = []\n"
    "        for item in groups.get(g, []) if isinstance(groups.get(g), list) else []:\n"
    "            if isinstance(item, str):\n"
    "                res.append(item)\n"
    "            elif isinstance(item, dict) and isinstance(item.get(\"include-group\"), str) and depth < 8:\n"
    "                res += group(item[\"include-group\"], depth + 1)\n"
    "        return res\n"
    "    for g in groups:\n"
    "        if norm(g) in WANT:\n"
    "            deps_for_tests += group(g)\n"
    "    deps += deps_for_tests\n"
    "    deps += tox_deps(extras_only=bool(reqs or deps_for_tests))\n"
    "    bs = table(pp, \"build-system\")\n"
    "    deps += strings(bs.get(\"requires\")) if \"requires\" in bs else [\"setuptools>=40.8.0\"]\n"
    "    lines += expand(deps)\n"
    "write(out, lines)\n"
    "if want_self and os.path.isdir(\".venv\"):\n"
    "    open(os.path.join(\".venv\", \"kiwi-project\"), \"w\").close()  # the prelude installs it in Phase B\n"
    "later = \" (the project itself in Phase B)\" if want_self else \"\"\n"
    "print(\"kiwi: %d requirement line(s) for Phase A%s\" % (len(lines), later), file=sys.stderr)\n";


/* True when `name` is one of the NULL-terminated `keys` (NULL: none). */
static bool
declared_key (char *const *keys, const char *name, size_t n)
{
    for (size_t i = 0; keys && keys[i]; i++)
        if (strlen (keys[i]) == n && strncasecmp (keys[i], name, n) == 0)
            return true;
    return false;
}

/* True when out (" a b") holds the word name (n bytes). */
static bool
has_word (const char *out, const char *name, size_t n)
{
    for (const char *w = out; *w;) {
        w += strspn (w, " ");
        size_t l = strcspn (w, " ");
        if (l == n && strncmp (w, name, n) == 0)
            return true;
        w += l;
    }
    return false;
}

/* Appends to out (" a b") each extra of value v (words split at spaces and
 * commas, quotes dropped, n bytes) that `keys` or `more` declares and out
 * lacks. */
static void
add_extras (const char *v, size_t n, char *const *keys, char *const *more, char *out, size_t cap)
{
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        while (i + k < n && strchr (" \t,'\"", v[i + k]) == NULL)
            k++;
        size_t ol = strlen (out);
        /* a name as extras are spelt (PEP 685), whole or not at all */
        if (k > 0 && strspn (v + i, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") >= k
            && ol + 1 + k < cap && (declared_key (keys, v + i, k) || declared_key (more, v + i, k))
            && !has_word (out, v + i, k))
            snprintf (out + ol, cap - ol, " %.*s", (int) k, v + i);
        i += k ? k : 1;
    }
}

/* The extras the project's own CI installs with `run` ("poetry install",
 * "uv sync"), read from its GitHub Actions workflows: on a line that runs
 * it, `--extras X`, `--extras "X Y"`, `--extras=X`, `-E X`, `--extra X`;
 * each kept only when `keys` or `more` (may be NULL) declares it (a name
 * from a workflow never reaches a command otherwise), appended to out as
 * " NAME". Returns true when such a line asks for every extra
 * (`--all-extras`). */
static bool
ci_extras (kiwi__inspect_ctx *ctx, const char *run, char *const *keys, char *const *more, char *out, size_t cap)
{
    char *names[KIWI__WORKFLOWS_MAX];
    size_t n = kiwi__workflow_names (kiwi__ctx_root (ctx), names, KIWI__WORKFLOWS_MAX);
    bool all = false;
    for (size_t w = 0; w < n; w++) {
        /* read one at a time, at most 1 MiB each, as the services reader
         * does: the inspection's cache would hold 64 of up to 4 MiB */
        char rel[512];
        snprintf (rel, sizeof rel, ".github/workflows/%s", names[w]);
        free (names[w]);
        cleanup_free char *text = kiwi__read_rel_max (kiwi__ctx_root (ctx), rel, KIWI__WORKFLOW_FILE_MAX, NULL);
        for (const char *p = text; p && (p = strstr (p, run)) != NULL;) {
            p += strlen (run);
            const char *eol = p + strcspn (p, "\n");
            for (const char *q = p; q < eol;) {
                while (q < eol && (*q == ' ' || *q == '\t'))
                    q++;
                size_t t = strcspn (q, " \t\n=");
                if (q + t > eol)
                    t = (size_t) (eol - q);
                if (t == 0) { /* an "=" of another option's value */
                    q++;
                    continue;
                }
                bool flag = (t == 8 && strncmp (q, "--extras", 8) == 0) || (t == 2 && strncmp (q, "-E", 2) == 0)
                            || (t == 7 && strncmp (q, "--extra", 7) == 0);
                all |= t == 12 && strncmp (q, "--all-extras", 12) == 0;
                q += t;
                if (!flag || q >= eol)
                    continue;
                q++; /* the space or "=" */
                while (q < eol && (*q == ' ' || *q == '\t'))
                    q++;
                size_t vl;
                if (q < eol && (*q == '"' || *q == '\'')) {
                    const char *end = memchr (q + 1, *q, (size_t) (eol - q - 1));
                    vl = end ? (size_t) (end - q) + 1 : (size_t) (eol - q);
                } else
                    vl = strcspn (q, " \t\n");
                if (q + vl > eol)
                    vl = (size_t) (eol - q);
                add_extras (q, vl, keys, more, out, cap);
                q += vl;
            }
            p = eol;
        }
    }
    return all;
}

/* Poetry: the dependencies in Phase A (--no-root: the project's code is not
 * there), with the extras the project's CI installs with, the project
 * itself at the start of Phase B, offline, as Poetry installs it (an
 * editable .pth into the in-project .venv). A project that is no package
 * (package-mode = false) has nothing to install. */
static int
add_poetry (kiwi__inspect_ctx *ctx, kiwi__steps *s, const char *dir, bool locked, const char *why,
            kiwi_error_t *err)
{
    const char *pp = kiwi__ctx_text (ctx, dir, "pyproject.toml", NULL);
    char **keys = pp ? kiwi__toml_keys (pp, "tool.poetry.extras") : NULL;
    char **pkeys = pp ? kiwi__toml_keys (pp, "project.optional-dependencies") : NULL;
    char extras[400] = "";
    bool all = ci_extras (ctx, "poetry install", keys, pkeys, extras, sizeof extras);
    bool any = (keys && keys[0]) || (pkeys && pkeys[0]);
    kiwi__strv_free_raw (keys);
    kiwi__strv_free_raw (pkeys);
    char cmd[500];
    if (all && any)
        snprintf (cmd, sizeof cmd, "poetry install --no-root --all-extras");
    else if (extras[0])
        snprintf (cmd, sizeof cmd, "poetry install --no-root --extras '%s'", extras + 1);
    else
        snprintf (cmd, sizeof cmd, "poetry install --no-root");
    if (kiwi__add_step (s, KIWI_ECO_POETRY, dir, locked, cmd, cmd, why, err) < 0)
        return -1;
    return kiwi__set_prelude (s, "poetry install --only-root --no-interaction", err);
}

/* A new .venv with the image's usual pip (ensurepip's), and in $KIWI_PIP
 * the pip Phase A installs with. Given a time to resolve as of, that is
 * pip 26 (--uploaded-prior-to), fetched as of now (a time before its
 * release would refuse it) as a wheel beside the .venv, while the .venv is
 * made, and run by the .venv's python: it installs into the .venv, whose
 * own pip stays the one a developer's would have. Phase B's tests use that
 * one: pip 26 in the .venv built a test's local setup.py package in an
 * isolated environment whose setuptools comes from the index, which Phase B
 * does not have, where Python 3.11's pip builds it with the .venv's own.
 * Where the wheel cannot be had (no index, no pip in the image), Phase A
 * installs with the .venv's pip, which ignores the setting. */
#define PIP26_DIR KIWI__SCRATCH "/pip26"
#define VENV_NEW                                                                                             \
    "{ { [ -z \"${PIP_UPLOADED_PRIOR_TO:-}\" ] || { mkdir -p " PIP26_DIR " && env -u PIP_UPLOADED_PRIOR_TO "   \
    "python3 -m pip download -q --disable-pip-version-check --no-deps -d " PIP26_DIR " 'pip>=26' >"            \
    PIP26_DIR ".log 2>&1; } & } ; python3 -m venv .venv && wait && KIWI_PIP=.venv/bin/pip && for w in "        \
    PIP26_DIR "/pip-*.whl; do [ ! -e \"$w\" ] || KIWI_PIP=\".venv/bin/python $w/pip\"; done; }"

#define VENV_SCRIPT VENV_NEW " && $KIWI_PIP install"

/* A version from git (setuptools-scm, hatch-vcs) gets a stand-in when the
 * project is installed in Phase B: there is no .git in the tree. */
#define SCM_STANDIN "SETUPTOOLS_SCM_PRETEND_VERSION=\"${SETUPTOOLS_SCM_PRETEND_VERSION:-0.0.0}\" "

/* The project itself, installed at the start of Phase B, offline, without
 * its dependencies, with the build requirements Phase A put in the .venv. */
#define PIP_PROJECT ".venv/bin/pip install --no-deps --no-index --no-build-isolation -e ."
#define PROJECT_INSTALL SCM_STANDIN PIP_PROJECT

/* The same when Phase A marked the project (.venv/kiwi-project), with the
 * installer `install` ("... -e .") */
#define PROJECT_IF_MARKED(install) "if [ -e .venv/kiwi-project ]; then " SCM_STANDIN install "; fi"

/* Phase A's shell text: pydeps written into the scratch folder (its source
 * the printf argument), a list it wrote installed by `pip` when not empty,
 * and what the build backend of a marked project asks for an editable
 * install. */
#define PYDEPS_WRITE "mkdir -p " KIWI__SCRATCH " && cat > " KIWI__SCRATCH "/pydeps.py <<'KIWI_PY_EOF'\n%sKIWI_PY_EOF\n"
#define PYDEPS_LIST(list, pip) "{ [ ! -s " KIWI__SCRATCH "/" list " ] || " pip " -r " KIWI__SCRATCH "/" list "; }"
#define PYDEPS_EDITABLE(pip)                                                                                 \
    "{ [ ! -e .venv/kiwi-project ] || { .venv/bin/python " KIWI__SCRATCH "/pydeps.py --editable " KIWI__SCRATCH \
    "/editable.txt && " PYDEPS_LIST ("editable.txt", pip) "; }; }"

/* `pip install -e .` of a setup.py: Phase A installs over the manifests;
 * the project itself is installed again at the start of Phase B. */
static int
add_editable (kiwi__steps *s, const char *dir, const char *summary, const char *script, const char *why,
              kiwi_error_t *err)
{
    if (kiwi__add_step (s, KIWI_ECO_PIP, dir, false, summary, script, why, err) < 0)
                        return -1;
    return kiwi__set_prelude (s, PROJECT_INSTALL, err);
}

/* pip through the pydeps program: requirement files (`files`, " -r a -r
 * b", may be empty) and, when `self` (or a file names the project itself),
 * the project's declared lists, its build requirements and what its build
 * backend asks for an editable install in Phase A, the project in Phase B. */
static int
add_pydeps (kiwi__steps *s, const char *dir, const char *files, bool self, const char *summary, const char *why,
            kiwi_error_t *err)
{
    char args[600] = "";
    for (const char *p = files; p && *p;) {
        while (*p == ' ')
            p++;
        if (strncmp (p, "-r ", 3) == 0)
            p += 3;
        size_t n = strcspn (p, " ");
        size_t l = strlen (args);
        snprintf (args + l, sizeof args - l, " '%.*s'", (int) n, p);
        p += n;
    }
    cleanup_free char *script = NULL;
    if (asprintf (&script,
                  PYDEPS_WRITE VENV_NEW " && python3 " KIWI__SCRATCH "/pydeps.py " KIWI__SCRATCH
                  "/requirements.txt %d%s && " PYDEPS_LIST ("requirements.txt", "$KIWI_PIP install")
                  " && " PYDEPS_EDITABLE ("$KIWI_PIP install"),
                  pydeps_source, self ? 1 : 0, args)
        < 0) {
        script = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    if (kiwi__add_step (s, KIWI_ECO_PIP, dir, false, summary, script, why, err) < 0)
        return -1;
    return kiwi__set_prelude (s, PROJECT_IF_MARKED (PIP_PROJECT), err);
}

/* uv: the locked dependencies without the project (its code is not in
 * Phase A); for a project that is a package, also its build requirements
 * and what its backend asks for an editable install, into the .venv, so
 * that Phase B installs the project offline before the tests (`uv run`
 * finds it installed; a plain `pytest` imports it). */
#define UV_PIP_INSTALL "uv pip install --python .venv/bin/python"

static const char *const pip_wanted[] = { "test", "tests", "testing", "dev", NULL };

/* The keys of TOML table `section` that are in `wanted`, in the table's
 * order, into out ("" when none or when toml is NULL): each after `sep` when
 * `each` (" --extra NAME"), else joined by it ("a,b"). */
static void
wanted_keys (const char *toml, const char *section, const char *const *wanted, const char *sep, bool each,
             char *out, size_t cap)
{
    out[0] = '\0';
    if (toml == NULL)
        return;
    char **keys = kiwi__toml_keys (toml, section);
    for (size_t i = 0; keys && keys[i]; i++)
        for (size_t w = 0; wanted[w]; w++)
            if (strcmp (keys[i], wanted[w]) == 0) {
                size_t l = strlen (out);
                snprintf (out + l, cap - l, "%s%s", each || l ? sep : "", keys[i]);
            }
    kiwi__strv_free_raw (keys);
}

/* The extras `uv sync` installs with: those named for tests or development,
 * and `all` (what a project's CI installs with `--extra all`: its tests
 * import the optional integrations); the lock resolved each of them. */
static const char *const uv_extras[] = { "test", "tests", "testing", "dev", "all", NULL };
/* The groups beside uv's default (dev): those named for tests. */
static const char *const uv_groups[] = { "test", "tests", "testing", NULL };

static int
add_uv (kiwi__inspect_ctx *ctx, kiwi__steps *s, const char *dir, const char *pyproject, kiwi_error_t *err)
{
    char opts[400] = "", more[200] = "", extras[300] = "";
    /* the extras named for tests (and `all`), then those the project's CI
     * syncs with */
    wanted_keys (pyproject, "project.optional-dependencies", uv_extras, " ", true, extras, sizeof extras);
    char **keys = pyproject ? kiwi__toml_keys (pyproject, "project.optional-dependencies") : NULL;
    bool all = ci_extras (ctx, "uv sync", keys, NULL, extras, sizeof extras) && keys && keys[0];
    kiwi__strv_free_raw (keys);
    if (all)
        snprintf (opts, sizeof opts, " --all-extras");
    for (const char *w = extras; !all && *w;) {
        w += strspn (w, " ");
        size_t l = strcspn (w, " "), ol = strlen (opts);
        if (l > 0)
            snprintf (opts + ol, sizeof opts - ol, " --extra %.*s", (int) l, w);
        w += l;
    }
    wanted_keys (pyproject, "dependency-groups", uv_groups, " --group ", true, more, sizeof more);
    snprintf (opts + strlen (opts), sizeof opts - strlen (opts), "%s", more);
    char summary[500];
    snprintf (summary, sizeof summary, "uv sync --frozen --no-install-project%s", opts);
    cleanup_free char *script = NULL;
    if (asprintf (&script,
                  /* the program first: its here-document ends a line, so
                   * what follows it must not hang on the sync by `&&` across
                   * that line (a failed sync then ran it unwritten, and the
                   * install's reason quoted that instead of uv) */
                  PYDEPS_WRITE "%s && python3 " KIWI__SCRATCH "/pydeps.py --build " KIWI__SCRATCH
                  "/build.txt && " PYDEPS_LIST ("build.txt", UV_PIP_INSTALL) " && " PYDEPS_EDITABLE (UV_PIP_INSTALL),
                  pydeps_source, summary)
        < 0) {
        script = NULL;
        return kiwi_error_make (err, ENOMEM, "install plan");
    }
    if (kiwi__add_step (s, KIWI_ECO_UV, dir, true, summary, script, "uv.lock", err) < 0)
        return -1;
    return kiwi__set_prelude (
        s, PROJECT_IF_MARKED ("uv pip install --offline --no-deps --no-build-isolation --python .venv/bin/python -e ."),
        err);
}

/* tox or nox, and a wheelhouse for the environments it makes: its
 * requirement list (pydeps'), the runner itself (tox provisions itself
 * when tox.ini asks for another version) and the build backend's basics
 * (the runner builds the project in an isolated environment). %s: the
 * runner. */
#define TEST_RUNNER                                                                                          \
    " && $KIWI_PIP install '%s' && $KIWI_PIP download -q -d " KIWI__WHEELHOUSE " '%s' setuptools wheel"       \
    " && { [ ! -s " KIWI__SCRATCH "/requirements.txt ] || $KIWI_PIP download -q -d " KIWI__WHEELHOUSE         \
    " -r " KIWI__SCRATCH "/requirements.txt; }"

int
kiwi__python_test_runner (kiwi_install_step *steps, size_t n, const char *project_dir, const char *exe,
                          kiwi_error_t *err)
{
    const char *base = exe ? strrchr (exe, '/') : NULL;
    base = base ? base + 1 : exe;
    if (base == NULL || (strcmp (base, "tox") != 0 && strcmp (base, "nox") != 0))
        return 0;
    const char *dir = project_dir ? project_dir : "";
    for (size_t i = 0; i < n; i++) {
        kiwi_install_step *st = &steps[i];
        if (st->eco != KIWI_ECO_PIP || strcmp (st->dir, dir) != 0 || strstr (st->script, "/pydeps.py ") == NULL)
            continue;
        char *script = NULL, *summary = NULL, *why = NULL;
        if (asprintf (&script, "%s" TEST_RUNNER, st->script, base, base) < 0)
            script = NULL;
        if (asprintf (&summary, "%s + %s", st->summary, base) < 0)
            summary = NULL;
        if (asprintf (&why, "%s; the test command runs %s", st->why, base) < 0)
            why = NULL;
        if (script == NULL || summary == NULL || why == NULL) {
            free (script);
            free (summary);
            free (why);
            return kiwi_error_make (err, ENOMEM, "install plan");
        }
        free (st->script);
        free (st->summary);
        free (st->why);
        st->script = script; /* now owned by the step */
        st->summary = summary;
        st->why = why;
        return 0;
    }
    return 0;
}


/* Appends " -r file" to args and the file's name to names when the file
 * holds a requirement. */
static bool
add_requirements (kiwi__inspect_ctx *ctx, const char *dir, const char *file, char *args, size_t acap, char *names,
                  size_t ncap)
{
    const char *t = kiwi__ctx_text (ctx, dir, file, NULL);
    if (t == NULL || !requirements_nonempty (t))
        return false;
    size_t al = strlen (args), nl = strlen (names);
    snprintf (args + al, acap - al, " -r %s", file);
    snprintf (names + nl, ncap - nl, "%s%s", nl ? ", " : "", file);
    return true;
}

/* True when setup.cfg (text, may be NULL) declares requirements the
 * setuptools way: [options] install_requires, setup_requires or
 * tests_require, or an [options.extras_require] entry. Its extras named in
 * pip_wanted go into extras, joined by ",". */
static bool
setup_cfg_declares (const char *text, char *extras, size_t cap)
{
    extras[0] = '\0';
    bool declares = false;
    enum { OTHER, OPTIONS, EXTRAS } section = OTHER;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr (p, '\n');
        size_t n = eol ? (size_t) (eol - p) : strlen (p);
        if (*p == '[') {
            section = n >= 9 && strncmp (p, "[options]", 9) == 0                      ? OPTIONS
                      : n >= 24 && strncmp (p, "[options.extras_require]", 24) == 0 ? EXTRAS
                                                                                      : OTHER;
        } else if (section != OTHER && *p != ' ' && *p != '\t' && *p != '#' && *p != ';' && *p != '\r' && n > 0) {
            /* a key at the start of a line; continuation lines are indented */
            size_t k = strcspn (p, "=: \t\r\n");
            if (k > n)
                k = n;
            if (section == EXTRAS)
                declares = true;
            else
                for (size_t i = 0; !declares && i < 3; i++) {
                    static const char *const keys[] = { "install_requires", "setup_requires", "tests_require" };
                    declares = k == strlen (keys[i]) && strncmp (p, keys[i], k) == 0;
                }
            for (size_t w = 0; section == EXTRAS && pip_wanted[w]; w++)
                if (k == strlen (pip_wanted[w]) && strncasecmp (p, pip_wanted[w], k) == 0) {
                    size_t l = strlen (extras);
                    snprintf (extras + l, cap - l, "%s%.*s", l ? "," : "", (int) k, p);
                }
        }
        p = eol ? eol + 1 : NULL;
    }
    return declares;
}

int
kiwi__detect_python (kiwi__inspect_ctx *ctx, const char *dir, bool is_root, kiwi__steps *s, kiwi_error_t *err)
{
    const char *root = kiwi__ctx_root (ctx);
    const char *pp = kiwi__ctx_text (ctx, dir, "pyproject.toml", NULL);
    /* a uv.lock beside a Poetry project that declares no [project] (uv
     * reads nothing of [tool.poetry]: textual's stray uv.lock synced four
     * packages) is not its lock */
    bool poetry_only = pp != NULL && !kiwi__toml_table_nonempty (pp, "project")
                       && (kiwi__has_in (root, dir, "poetry.lock") || kiwi__toml_table_nonempty (pp, "tool.poetry"));
    if (kiwi__has_in (root, dir, "uv.lock") && !poetry_only)
        /* the project itself is not in Phase A's input: installed in Phase B */
        return add_uv (ctx, s, dir, pp, err);
    if (kiwi__has_in (root, dir, "poetry.lock"))
        return add_poetry (ctx, s, dir, true, "poetry.lock", err);
    if (kiwi__has_in (root, dir, "Pipfile.lock"))
        return kiwi__add_step (s, KIWI_ECO_PIPENV, dir, true, "pipenv sync --dev", "pipenv sync --dev", "Pipfile.lock",
                               err);
    char args[512] = "", names[512] = "";
    for (size_t i = 0; requirement_files[i]; i++)
        add_requirements (ctx, dir, requirement_files[i], args, sizeof args, names, sizeof names);
    bool tier_found = false;
    for (size_t k = 0; k < sizeof requirement_dir_tiers / sizeof *requirement_dir_tiers && !tier_found; k++)
        for (size_t i = 0; requirement_dir_tiers[k][i]; i++)
            tier_found |= add_requirements (ctx, dir, requirement_dir_tiers[k][i], args, sizeof args, names,
                                            sizeof names);
    if (args[0]) {
        char summary[600];
        snprintf (summary, sizeof summary, "pip install%s (.venv)", args);
        /* pinned or not, requirements files are what the project installs
         * with; one that names the project itself (-e .) installs it in
         * Phase B */
        return add_pydeps (s, dir, args, false, summary, names, err);
    }
    if (pp != NULL) {
        cleanup_free char *poetry_name = kiwi__toml_get (pp, "tool.poetry", "name");
        if (poetry_name != NULL || kiwi__toml_table_nonempty (pp, "tool.poetry.dependencies"))
            return add_poetry (ctx, s, dir, false, "pyproject.toml [tool.poetry], no poetry.lock", err);
        cleanup_free char *deps = kiwi__toml_get (pp, "project", "dependencies");
        char ex[128], gr[128];
        wanted_keys (pp, "project.optional-dependencies", pip_wanted, ",", false, ex, sizeof ex);
        wanted_keys (pp, "dependency-groups", pip_wanted, ", ", false, gr, sizeof gr);
        const char *tox = kiwi__ctx_text (ctx, dir, "tox.ini", NULL);
        bool tox_env = tox != NULL && strstr (tox, "[testenv") != NULL;
        if (kiwi__toml_array_nonempty (deps) || ex[0] || gr[0] || tox_env) {
            /* the declared lists, read in Phase A by pydeps: the project is
             * never built there (a src/ layout, a version from git) */
            char summary[300], why[200];
            snprintf (summary, sizeof summary, "pip install -e .%s%s%s%s%s (.venv)", ex[0] ? "[" : "", ex,
                      ex[0] ? "]" : "", gr[0] ? " + dependency groups " : "", gr);
            snprintf (why, sizeof why, "pyproject.toml [project]%s%s%s", gr[0] ? " [dependency-groups] " : "", gr,
                      tox_env ? ", tox.ini [testenv]" : "");
            return add_pydeps (s, dir, "", true, summary, why, err);
        }
    }
    char cfg_extras[128];
    if (setup_cfg_declares (kiwi__ctx_text (ctx, dir, "setup.cfg", NULL), cfg_extras, sizeof cfg_extras)
        && (pp != NULL || kiwi__has_in (root, dir, "setup.py"))) {
        /* setuptools' declarative lists, read in Phase A by pydeps: the
         * project is never built there (`version = attr: pkg.__version__`
         * imports its code) */
        char summary[300];
        snprintf (summary, sizeof summary, "pip install -e .%s%s%s (.venv)", cfg_extras[0] ? "[" : "", cfg_extras,
                  cfg_extras[0] ? "]" : "");
        return add_pydeps (s, dir, "", true, summary, "setup.cfg [options]", err);
    }
    if (kiwi__has_in (root, dir, "Pipfile"))
        return kiwi__add_step (s, KIWI_ECO_PIPENV, dir, false, "pipenv install --dev", "pipenv install --dev",
                               "Pipfile, no Pipfile.lock", err);
    if (kiwi__has_in (root, dir, "setup.py"))
        return add_editable (s, dir, "pip install -e . (.venv)", VENV_SCRIPT " -e .", "setup.py", err);
    return 0;
}

