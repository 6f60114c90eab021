/*
 * runtime.c: the runtime table (runtime.h): per runtime, its executables,
 * image names, marker files, version reader, environment, package
 * managers, install planner, install input and dependency locations.
 * docs/inspection.md documents every entry.
 */
#include "inspect/runtime.h"

#include <string.h>

/* The JIT's first tier only: Maven's and Gradle's JVMs live for one build,
 * and the optimising compiler's threads cost them more than they give back
 * (docs/inspection.md has the figures). */
#define JVM_QUICK "-XX:TieredStopAtLevel=1"

/* Phase A's Java settings: the trust store made from the CA bundle, a home
 * under /kiwi/home (Java takes user.home from /etc/passwd, not HOME), and
 * the first tier for every JVM of the install (Gradle's build daemon, the
 * warm-up's test JVMs). */
#define JAVA_TOOL_OPTIONS_A                                                                                  \
    "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=" KIWI__TRUSTSTORE " -Djavax.net.ssl.trustStorePassword=changeit " \
    "-Djavax.net.ssl.trustStoreType=PKCS12 -Duser.home=/kiwi/home " JVM_QUICK

#define A KIWI__PHASE_A
#define B KIWI__PHASE_B
#define AB KIWI__PHASE_AB

static const char *const none[] = { NULL };
static const kiwi__env_setting env_none[] = { { 0, NULL } };

/* ------------------------------------------------------------- Node.js */

static const char *const node_exe[] = {
    "node",     "nodejs", "npm",     "npx",  "pnpm",   "pnpx",     "yarn",       "yarnpkg", "corepack",
    "tsc",      "ts-node", "tsx",    "jest", "vitest", "mocha",    "ava",        "tap",     "next",
    "nuxt",     "vite",   "webpack", "eslint", "prettier", "playwright", "cypress", "karma", "jasmine",
    "lerna",    "nx",     "turbo",   "ng",   "bun",    "bunx",     NULL,
};
static const char *const node_images[] = { "node", NULL };
static const char *const node_markers[] = { "package.json", ".nvmrc", ".node-version", NULL };
static const kiwi__env_setting env_rt_node[] = {
    { AB, "npm_config_update_notifier=false" }, { B, "npm_config_offline=true" },
    /* dependencies' install scripts that download browsers and binaries
     * from hosts no registry list holds (the projects' own CI turns these
     * off too): a test that needs one says so in Phase B */
    { A, "PUPPETEER_SKIP_DOWNLOAD=true" }, { A, "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=true" },
    { A, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1" }, { A, "CYPRESS_INSTALL_BINARY=0" },
    { A, "ELECTRON_SKIP_BINARY_DOWNLOAD=1" }, { A, "CHROMEDRIVER_SKIP_DOWNLOAD=true" },
    { A, "GECKODRIVER_SKIP_DOWNLOAD=true" }, { 0, NULL },
};
static const kiwi__env_setting env_npm[] = {
    { A, "npm_config_cache=/kiwi/tmp/npm-cache" }, { A, "npm_config_fund=false" }, { A, "npm_config_audit=false" },
    /* npm waits 5 minutes (its default) on a stalled download, as long as
     * all of Phase A (KIWI_INSTALL_TIMEOUT's default): 2 minutes, then its
     * retries (pnpm's own default is 1 minute) */
    { A, "npm_config_fetch_timeout=120000" },
    { 0, NULL },
};
static const kiwi__env_setting env_pnpm[] = {
    { A, "npm_config_store_dir=/kiwi/tmp/pnpm-store" },
    /* the pnpm that runs is the one Kiwi chose: never a switch at run time */
    { AB, "npm_config_manage_package_manager_versions=false" },
    { 0, NULL },
};
static const kiwi__env_setting env_yarn[] = {
    { A, "YARN_CACHE_FOLDER=/kiwi/tmp/yarn-cache" }, { 0, NULL },
};
static const kiwi__env_setting env_berry[] = {
    { AB, "YARN_ENABLE_GLOBAL_CACHE=false" }, { AB, "YARN_ENABLE_TELEMETRY=0" },
    { AB, "COREPACK_ENABLE_DOWNLOAD_PROMPT=0" }, { B, "COREPACK_ENABLE_NETWORK=0" },
    /* Yarn 2+ from the npm registry (@yarnpkg/cli-dist), the one registry every
     * Node.js install reaches, rather than repo.yarnpkg.com */
    { A, "COREPACK_NPM_REGISTRY=https://registry.npmjs.org" },
    { B, "YARN_ENABLE_NETWORK=0" },           { 0, NULL },
};
/* bun's own cache and npm's (which installs bun) in Phase A's scratch */
static const kiwi__env_setting env_bun[] = {
    { A, "BUN_INSTALL_CACHE_DIR=/kiwi/tmp/bun-cache" }, { A, "npm_config_cache=/kiwi/tmp/npm-cache" },
    { A, "npm_config_fetch_timeout=120000" },           { AB, "DO_NOT_TRACK=1" },
    { 0, NULL },
};
static const kiwi__package_manager node_pms[] = {
    { KIWI_ECO_NPM, env_npm },   { KIWI_ECO_PNPM, env_pnpm },         { KIWI_ECO_YARN, env_yarn },
    { KIWI_ECO_YARN_BERRY, env_berry }, { KIWI_ECO_BUN, env_bun }, { KIWI_ECO_NPM, NULL },
};
static const char *const node_input[] = { "package.json",  "package-lock.json", "npm-shrinkwrap.json",
                                          "pnpm-lock.yaml", "pnpm-workspace.yaml", ".pnpmfile.cjs",
                                          "yarn.lock",     ".yarnrc",           ".yarnrc.yml",
                                          ".npmrc",        "patches/",          ".yarn/releases/",
                                          ".yarn/plugins/", ".yarn/patches/",   "bun.lock",
                                          "bun.lockb",     "bunfig.toml",       NULL };
static const char *const node_src[] = { "node_modules", ".yarn/cache", ".yarn/unplugged", ".yarn/install-state.gz",
                                        ".pnp.cjs", ".pnp.loader.mjs", ".pnp.js", ".pnp.data.json", NULL };
static const char *const node_home[] = { ".cache", ".npm", ".yarn", ".local/share/pnpm", NULL };

/* -------------------------------------------------------------- Python */

static const char *const python_exe[] = {
    "python", "python3", "pip",   "pip3",  "pytest", "py.test", "uv",       "uvx",    "poetry",       "pipenv",
    "tox",    "nox",     "hatch", "pdm",   "flake8", "ruff",    "mypy",     "black",  "coverage",     "behave",
    "django-admin",      NULL,
};
static const char *const python_images[] = { "python", NULL };
static const char *const python_markers[] = { "pyproject.toml", "requirements.txt", "setup.py", "setup.cfg",
                                              "Pipfile",        "uv.lock",          ".python-version", NULL };
static const kiwi__env_setting env_rt_python[] = {
    { AB, "PIP_DISABLE_PIP_VERSION_CHECK=1" }, { B, "PIP_NO_INDEX=1" }, { 0, NULL },
};
static const kiwi__env_setting env_uv[] = {
    { A, "UV_CACHE_DIR=/kiwi/tmp/uv-cache" }, { AB, "UV_PYTHON_DOWNLOADS=never" }, { A, "UV_LINK_MODE=copy" },
    { B, "UV_OFFLINE=1" },                    { B, "UV_FROZEN=1" },                { 0, NULL },
};
static const kiwi__env_setting env_poetry[] = {
    { AB, "POETRY_VIRTUALENVS_IN_PROJECT=true" }, { AB, "POETRY_NO_INTERACTION=1" },
    { A, "POETRY_CACHE_DIR=/kiwi/tmp/poetry-cache" }, { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" },
    { 0, NULL },
};
static const kiwi__env_setting env_pipenv[] = {
    { AB, "PIPENV_VENV_IN_PROJECT=1" }, { AB, "PIPENV_NOSPIN=1" }, { AB, "PIPENV_YES=1" },
    { A, "PIPENV_CACHE_DIR=/kiwi/tmp/pipenv-cache" }, { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" },
    { 0, NULL },
};
static const kiwi__env_setting env_pip[] = {
    { A, "PIP_CACHE_DIR=/kiwi/tmp/pip-cache" }, { 0, NULL },
};
static const kiwi__package_manager python_pms[] = {
    { KIWI_ECO_UV, env_uv }, { KIWI_ECO_POETRY, env_poetry }, { KIWI_ECO_PIPENV, env_pipenv },
    { KIWI_ECO_PIP, env_pip }, { KIWI_ECO_NPM, NULL },
};
static const char *const python_input[] = { "pyproject.toml", "uv.lock",     "poetry.lock",       "Pipfile",
                                            "Pipfile.lock",   "setup.py",    "setup.cfg",         "requirements*.txt",
                                            "*requirements.txt", "constraints*.txt", "requirements/", "poetry.toml",
                                            "uv.toml",        "pip.conf",    ".python-version",   "tox.ini", "README*",
                                            "LICENSE*",       NULL };
static const char *const python_src[] = { ".venv", NULL };
static const char *const python_home[] = { ".cache", ".local", NULL };

/* ------------------------------------------------------------------ Go */

static const char *const go_exe[] = { "go", "gofmt", "golangci-lint", "ginkgo", "gotestsum", NULL };
static const char *const go_images[] = { "golang", "=go", NULL };
static const char *const go_markers[] = { "go.mod", NULL };
static const kiwi__env_setting env_rt_go[] = {
    { AB, "GOPATH=/kiwi/home/go" }, { AB, "GOTOOLCHAIN=local" }, { AB, "GOFLAGS=-mod=mod" },
    { B, "GOPROXY=off" },           { 0, NULL },
};
static const kiwi__package_manager go_pms[] = { { KIWI_ECO_GO, env_none }, { KIWI_ECO_NPM, NULL } };
static const char *const go_input[] = { "go.mod", "go.sum", "go.work", "go.work.sum", NULL };
static const char *const go_home[] = { "go", ".cache/go-build", NULL };
/* Kiwi's Go images carry the standard library compiled (ops/images,
 * /usr/local/go-cache, read-only): Phase B's build cache starts as links
 * to it, so a `go test` compiles the repository and its modules, not fmt
 * and net/http again. The go command writes new entries beside the links
 * and only reads the linked ones. trim.txt is the cache's own, written
 * now: a copied one would date the last trim to the image's build, and the
 * go command would then drop every link older than its five days. An
 * image without that folder (an official golang image) is left as it is,
 * and so is a GOCACHE that is not an absolute path ("off", or a relative
 * one the go command refuses): no folder is made in the tree. */
#define GO_STD_CACHE "/usr/local/go-cache"
static const char go_verify_start[]
    = "s=" GO_STD_CACHE " c=${GOCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/go-build}; "
      "if [ -d \"$s\" ] && [ \"${c#/}\" != \"$c\" ] && [ ! -e \"$c/.kiwi-std\" ] && mkdir -p \"$c\"; then "
      "cp -rs \"$s/.\" \"$c/\" 2>/dev/null; rm -f \"$c/trim.txt\"; date +%s >\"$c/trim.txt\"; "
      ": >\"$c/.kiwi-std\"; fi; true";

/* ---------------------------------------------------------------- Rust */

static const char *const rust_exe[] = { "cargo", "rustc", "rustup", "cargo-nextest", NULL };
static const char *const rust_images[] = { "rust", NULL };
static const char *const rust_markers[] = { "Cargo.toml", NULL };
static const kiwi__env_setting env_rt_rust[] = {
    { AB, "CARGO_HOME=/kiwi/home/.cargo" }, { B, "CARGO_NET_OFFLINE=true" }, { 0, NULL },
};
static const kiwi__package_manager rust_pms[] = { { KIWI_ECO_CARGO, env_none }, { KIWI_ECO_NPM, NULL } };
static const char *const rust_input[] = { "Cargo.toml", "Cargo.lock", "rust-toolchain", "rust-toolchain.toml",
                                          ".cargo/",    NULL };
static const char *const rust_home[] = { ".cargo", NULL };

/* ---------------------------------------------------------------- Ruby */

static const char *const ruby_exe[] = { "ruby", "bundle", "bundler", "rake", "rspec", "gem", "rails", "rubocop", NULL };
static const char *const ruby_images[] = { "ruby", "rails", NULL };
static const char *const ruby_markers[] = { "Gemfile", ".ruby-version", NULL };
static const kiwi__env_setting env_rt_ruby[] = {
    { AB, "GEM_HOME=/kiwi/home/.gem" }, { AB, "BUNDLE_USER_HOME=/kiwi/home/.bundle" }, { 0, NULL },
};
static const kiwi__env_setting env_bundler[] = {
    { A, "BUNDLE_JOBS=4" }, { 0, NULL },
};
static const kiwi__package_manager ruby_pms[] = { { KIWI_ECO_BUNDLER, env_bundler }, { KIWI_ECO_NPM, NULL } };
static const char *const ruby_input[] = { "Gemfile", "Gemfile.lock", "*.gemspec", ".ruby-version", "version.rb",
                                          ".bundle/", NULL };
static const char *const ruby_src[] = { "vendor/bundle", ".bundle", NULL };
static const char *const ruby_home[] = { ".gem", ".bundle", NULL };

/* ----------------------------------------------------------------- PHP */

static const char *const php_exe[] = { "php", "composer", "phpunit", "pest", "phpstan", NULL };
static const char *const php_images[] = { "php", NULL };
static const char *const php_markers[] = { "composer.json", NULL };
static const kiwi__env_setting env_rt_php[] = {
    { AB, "COMPOSER_HOME=/kiwi/home/.composer" }, { AB, "COMPOSER_NO_INTERACTION=1" },
    { B, "COMPOSER_DISABLE_NETWORK=1" },          { 0, NULL },
};
static const kiwi__env_setting env_composer[] = {
    { A, "COMPOSER_CACHE_DIR=/kiwi/tmp/composer-cache" }, { 0, NULL },
};
static const kiwi__package_manager php_pms[] = { { KIWI_ECO_COMPOSER, env_composer }, { KIWI_ECO_NPM, NULL } };
static const char *const php_input[] = { "composer.json", "composer.lock", NULL };
static const char *const php_src[] = { "vendor", NULL };
static const char *const php_home[] = { ".composer", ".cache", NULL };

/* ---------------------------------------------- Java, Maven and Gradle */

static const char *const java_exe[] = { "java", "javac", "jar", "jshell", NULL };
static const char *const java_images[] = { "openjdk", "temurin", "corretto", "zulu", "jdk", "java", NULL };
static const kiwi__env_setting env_rt_jvm[] = {
    { AB, "MAVEN_OPTS=-Duser.home=/kiwi/home " JVM_QUICK }, { AB, "GRADLE_USER_HOME=/kiwi/home/.gradle" },
    { A, "GRADLE_OPTS=" JVM_QUICK }, { B, "GRADLE_OPTS=-Dorg.gradle.daemon=false " JVM_QUICK }, { 0, NULL },
};
static const kiwi__env_setting env_jvm_build[] = {
    { A, JAVA_TOOL_OPTIONS_A }, { 0, NULL },
};
static const char *const maven_exe[] = { "mvn", "mvnw", NULL };
static const char *const maven_images[] = { "maven", NULL };
static const char *const maven_markers[] = { "pom.xml", NULL };
static const kiwi__package_manager maven_pms[] = { { KIWI_ECO_MAVEN, env_jvm_build }, { KIWI_ECO_NPM, NULL } };
/* profile.*: the marker files a parent POM's profile activation looks for
 * (<file><exists>): Apache Commons' parent turns JaCoCo on in every build
 * when src/site/resources/profile.jacoco exists, so without it Phase A's
 * warm-up never resolves the plugin Phase B's tests run. */
static const char *const maven_input[] = { "pom.xml", "mvnw", ".mvn/", "profile.*", NULL };
static const char *const maven_home[] = { ".m2", NULL };
static const char *const gradle_exe[] = { "gradle", "gradlew", NULL };
static const char *const gradle_images[] = { "gradle", NULL };
static const char *const gradle_markers[] = { "build.gradle", "build.gradle.kts", "settings.gradle",
                                              "settings.gradle.kts", "gradlew", NULL };
static const kiwi__package_manager gradle_pms[] = { { KIWI_ECO_GRADLE, env_jvm_build }, { KIWI_ECO_NPM, NULL } };
static const char *const gradle_input[] = { "build.gradle", "build.gradle.kts", "settings.gradle",
                                            "settings.gradle.kts", "gradle.properties", "libs.versions.toml",
                                            "gradlew",      "gradle/",          "buildSrc/", NULL };
static const char *const gradle_home[] = { ".gradle", ".m2", NULL };
static const kiwi__package_manager no_pms[] = { { KIWI_ECO_NPM, NULL } };

const char *const kiwi__kiwi_home[] = { ".kiwi", NULL };

#define HIGH KIWI_PREFER_HIGHEST

const kiwi__runtime kiwi__runtimes[] = {
    { "go", go_exe, go_images, 3, go_markers, kiwi__version_go, HIGH, env_rt_go, go_pms, kiwi__detect_go, NULL,
      NULL, NULL, go_input, none, go_home, go_verify_start },
    { "rust", rust_exe, rust_images, 4, rust_markers, kiwi__version_rust, HIGH, env_rt_rust, rust_pms,
      kiwi__detect_rust, "Cargo.toml", "Cargo.lock", NULL, rust_input, none, rust_home, NULL },
    { "maven", maven_exe, maven_images, 7, maven_markers, kiwi__version_maven, HIGH, env_rt_jvm, maven_pms,
      kiwi__detect_maven, NULL, NULL, "jvm", maven_input, none, maven_home, NULL },
    { "gradle", gradle_exe, gradle_images, 8, gradle_markers, kiwi__version_gradle, HIGH, env_rt_jvm, gradle_pms,
      kiwi__detect_gradle, NULL, NULL, "jvm", gradle_input, none, gradle_home, NULL },
    { "ruby", ruby_exe, ruby_images, 5, ruby_markers, kiwi__version_ruby, HIGH, env_rt_ruby, ruby_pms,
      kiwi__detect_ruby, "Gemfile", "Gemfile.lock", NULL, ruby_input, ruby_src, ruby_home, NULL },
    { "php", php_exe, php_images, 6, php_markers, kiwi__version_php, HIGH, env_rt_php, php_pms, kiwi__detect_php,
      "composer.json", "composer.lock", NULL, php_input, php_src, php_home, NULL },
    { "python", python_exe, python_images, 2, python_markers, kiwi__version_python, HIGH, env_rt_python, python_pms,
      kiwi__detect_python, NULL, NULL, "python", python_input, python_src, python_home, NULL },
    { "node", node_exe, node_images, 1, node_markers, kiwi__version_node, HIGH, env_rt_node, node_pms,
      kiwi__detect_node, NULL, NULL, NULL, node_input, node_src, node_home, NULL },
    /* Java itself: no marker of its own (pom.xml and build.gradle name the
     * build tool), no install; its images also run Maven and Gradle */
    { "java", java_exe, java_images, 9, none, kiwi__version_java, KIWI_PREFER_LOWEST, env_rt_jvm, no_pms, NULL,
      NULL, NULL, NULL, none, none, none, NULL },
};

const size_t kiwi__n_runtimes = sizeof kiwi__runtimes / sizeof kiwi__runtimes[0];

const kiwi__runtime *
kiwi__runtime_get (const char *name)
{
    for (size_t i = 0; name && i < kiwi__n_runtimes; i++)
        if (strcmp (kiwi__runtimes[i].name, name) == 0)
            return &kiwi__runtimes[i];
    return NULL;
}

const kiwi__runtime *
kiwi__runtime_of_eco (kiwi_ecosystem e)
{
    for (size_t i = 0; i < kiwi__n_runtimes; i++)
        for (const kiwi__package_manager *p = kiwi__runtimes[i].pms; p->env; p++)
            if (p->eco == e)
                return &kiwi__runtimes[i];
    return NULL;
}

const kiwi__package_manager *
kiwi__package_manager_of (kiwi_ecosystem e)
{
    const kiwi__runtime *rt = kiwi__runtime_of_eco (e);
    for (const kiwi__package_manager *p = rt ? rt->pms : no_pms; p->env; p++)
        if (p->eco == e)
            return p;
    return NULL;
}
