/*
 * test_repo.c: the task's checkout with real git (repo.h), checked from
 * outside: the work tree never holds a `.git`; configuration, hooks and
 * attributes a repository or the model plants never run (a canary file on
 * the host that they would create stays absent); a tree carrying a `.git`
 * entry is refused; a git bomb and a large zero blob are refused by name
 * before anything is written (the state directory does not grow); the diff
 * carries changes, new and deleted files, modes and binaries, and applied to
 * a fresh clone (and by kiwi_repo_materialise) gives the work tree back;
 * what .gitignore keeps out of the diff is named; a clone or a fetch of a
 * repository past KIWI_CLONE_MAX_MB (a large blob, or many refs) is
 * stopped while git writes it (the mirrors directory's size sampled from
 * here as it runs), removed, and an existing mirror left as it was, two
 * tasks at once included; a fetch that never ends names KIWI_CLONE_TIMEOUT.
 */
#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shell.h"
#include "common/cleanup.h"
#include "worker/task/repo.h"
#include "stack-env.h"
#include "worker/task/wspath.h"

static char tmp[64], canary[128];

static int
setup (void **state)
{
    snprintf (tmp, sizeof tmp, "/tmp/kiwi-repo-test-XXXXXX");
    if (mkdtemp (tmp) == NULL)
        return -1;
    snprintf (canary, sizeof canary, "/tmp/kiwi-canary-%d-%s", (int) getpid (), tmp + strlen ("/tmp/kiwi-repo-test-"));
    unlink (canary);
    return 0;
}

static int
teardown (void **state)
{
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s", tmp);
    unlink (canary);
    return system (cmd) == 0 ? 0 : -1;
}

static int
sh_out (char *out, size_t cap, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
sh_out (char *out, size_t cap, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    int rc = kiwi_test_sh (cmd, out, cap);
    out[strcspn (out, "\n")] = '\0';
    return rc;
}

#define GITC "git -c user.email=t@kiwi -c user.name=t -c init.defaultBranch=main"

/* A repository at <tmp>/<name> from the js-sum example plus `extra` (a
 * shell fragment run in it before the commit). */
static void
make_src (const char *name, const char *extra)
{
    kiwi_test_must ("mkdir -p %s/%s && cp -a %s/tests/fixtures/examples/js-sum/. %s/%s/ && cd %s/%s && " GITC " init "
                    "-q && { %s; } && " GITC " add -A && " GITC " commit -q -m init",
                    tmp, name, KIWI_SOURCE_DIR, tmp, name, tmp, name, extra ? extra : ":");
}

static long
du_kb (const char *dir)
{
    char out[64] = "";
    if (sh_out (out, sizeof out, "du -sk %s 2>/dev/null | cut -f1", dir) != 0)
        return -1;
    return atol (out);
}

/* the number of entries named .git (any case) under dir */
static int
dotgit_count (const char *dir)
{
    char out[64] = "";
    sh_out (out, sizeof out, "find %s -iname .git | wc -l", dir);
    return atoi (out);
}

static void
checkout (const char *src, const char *ws, const kiwi_repo_opts *opts, char **commit)
{
    char state[256];
    snprintf (state, sizeof state, "%s/state", tmp);
    kiwi_repo_opts o = { .state_dir = state, .timeout_ms = 120000, .max_checkout_mb = 2048,
                         .max_checkout_files = 200000 };
    if (opts != NULL)
        o = *opts;
    kiwi_error_t err = NULL;
    if (kiwi_repo_checkout (&o, src, "HEAD", ws, commit, &err) < 0)
        fail_msg ("checkout of %s: %s", src, kiwi_error_msg (err));
}

/* The version the tags give a commit, for setuptools-scm's stand-in: from
 * describe's line, whatever the tag's name holds (only digits and dots
 * come out); and from a real mirror, at the tag, three commits on, and
 * with no tag. */
static void
test_version_from_tags (void **state)
{
    static const char *const cases[][2] = {
        { "v2.5.0-0-g0123456789ab", "2.5.0" },
        { "v2.5.0-3-g0123456789ab", "2.5.1.dev3" },
        { "2.5-1-gabc", "2.6.dev1" },
        { "release-1.2.3-0-gabc", "1.2.3" },
        { "pkg/v10.0-2-gabc", "10.1.dev2" },
        { "v1.2.3rc1-0-gabc", "1.2.3" },
        { "1.2.3-4-5-gabc", "1.2.4.dev5" }, /* the tag "1.2.3-4": its release numbers end at the dash */
        { "foo2bar-7-gabc", "" },           /* no number starts a part of the name */
        { "v1.2.3;touch /tmp/x-0-gabc", "1.2.3" },
        { "$(touch x)9.1-0-gabc", "" },
        { "v1.2.3", "" },                   /* not describe's --long line */
        { "v1.2.3-x-gabc", "" },
        { "v12345678901.0-0-gabc", "" },    /* a number no version has */
        { "", "" },
    };
    char v[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiwi_repo_version_from_describe (cases[i][0], v, sizeof v);
        if (strcmp (v, cases[i][1]) != 0)
            fail_msg ("`%s`: got `%s`, want `%s`", cases[i][0], v, cases[i][1]);
    }
    kiwi_repo_version_from_describe ("v1.2.3-0-gabc", v, 4); /* cut would be another version */
    assert_string_equal (v, "");

    char src[256], state_dir[256], ws[256];
    snprintf (src, sizeof src, "%s/tagged", tmp);
    snprintf (state_dir, sizeof state_dir, "%s/state", tmp);
    make_src ("tagged", NULL);
    kiwi_repo_opts o = { .state_dir = state_dir, .timeout_ms = 120000, .max_checkout_mb = 2048,
                         .max_checkout_files = 200000 };
    kiwi_error_t err = NULL;
    char *commit = NULL;
    /* no tag yet */
    snprintf (ws, sizeof ws, "%s/ws-tag0", tmp);
    checkout (src, ws, &o, &commit);
    assert_int_equal (kiwi_repo_version (&o, src, commit, v, sizeof v, &err), 0);
    assert_string_equal (v, "");
    free (commit);
    /* at the tag, then three commits on (a tag without a number is passed over) */
    kiwi_test_must ("cd %s && " GITC " tag v2.5.0 && " GITC " tag docs-latest", src);
    snprintf (ws, sizeof ws, "%s/ws-tag1", tmp);
    checkout (src, ws, &o, &commit);
    assert_int_equal (kiwi_repo_version (&o, src, commit, v, sizeof v, &err), 0);
    assert_string_equal (v, "2.5.0");
    free (commit);
    kiwi_test_must ("cd %s && for i in 1 2 3; do echo $i >> n.txt && " GITC " add n.txt && " GITC
                    " commit -q -m $i; done && " GITC " tag notes", src);
    snprintf (ws, sizeof ws, "%s/ws-tag2", tmp);
    checkout (src, ws, &o, &commit);
    assert_int_equal (kiwi_repo_version (&o, src, commit, v, sizeof v, &err), 0);
    assert_string_equal (v, "2.5.1.dev3");
    /* the commit's time, as ISO 8601 */
    char t[40];
    assert_int_equal (kiwi_repo_commit_time (&o, src, commit, t, sizeof t, &err), 0);
    char want[64] = "";
    sh_out (want, sizeof want, "git -C %s show -s --format=%%cI %s", src, commit);
    want[strcspn (want, "\n")] = '\0';
    assert_true (strlen (t) >= 20 && t[10] == 'T');
    assert_string_equal (t, want);
    assert_true (kiwi_repo_commit_time (&o, src, "--output=/tmp/x", t, sizeof t, &err) < 0);
    kiwi_error_free (&err);
    assert_string_equal (t, "");
    /* not a commit id: refused before git runs */
    assert_true (kiwi_repo_version (&o, src, "--upload-pack=touch", v, sizeof v, &err) < 0);
    kiwi_error_free (&err);
    free (commit);
}

static void
test_layout_diff_and_clean_tree (void **state)
{
    make_src ("plain", "printf 'bin\\0ary\\1' > blob.bin && printf '#!/bin/sh\\n' > run.sh && echo gone > old.txt");
    char src[128], ws[128], cmd[512];
    snprintf (src, sizeof src, "%s/plain", tmp);
    snprintf (ws, sizeof ws, "%s/state/work/plain-1", tmp);
    kiwi_test_must ("mkdir -p %s/state/work", tmp);
    cleanup_free char *commit = NULL;
    checkout (src, ws, NULL, &commit);
    char head[64] = "";
    sh_out (head, sizeof head, "git -C %s rev-parse HEAD", src);
    assert_string_equal (commit, head);
    /* the work tree has the files and no git metadata; the git directory is beside it */
    snprintf (cmd, sizeof cmd, "%s/sum.js", ws);
    assert_int_equal (access (cmd, F_OK), 0);
    assert_int_equal (dotgit_count (ws), 0);
    char out[256] = "";
    sh_out (out, sizeof out, "git --git-dir=%s.git rev-parse HEAD", ws);
    assert_string_equal (out, head);

    /* the model's changes: an edit, a new file, a binary, a deletion, a mode */
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ws_edit (ws, "sum.js", "return a - b;", "return a + b;", &err), 0);
    assert_int_equal (kiwi_ws_write (ws, "lib/new.js", "module.exports = 1;\n", 20, &err), 0);
    assert_int_equal (kiwi_ws_write (ws, "blob.bin", "\0\1\2\3new", 7, &err), 0);
    kiwi_test_must ("rm %s/old.txt && chmod +x %s/run.sh", ws, ws);
    cleanup_free char *tree = NULL;
    if (kiwi_repo_tree_id (ws, &tree, &err) < 0)
        fail_msg ("tree id: %s", kiwi_error_msg (err));
    assert_int_equal (strlen (tree), 40);
    cleanup_free char *diff = NULL;
    if (kiwi_repo_diff (ws, commit, &diff, &err) < 0)
        fail_msg ("diff: %s", kiwi_error_msg (err));
    assert_non_null (strstr (diff, "+  return a + b;"));
    assert_non_null (strstr (diff, "new file mode 100644"));
    assert_non_null (strstr (diff, "deleted file mode"));
    assert_non_null (strstr (diff, "new mode 100755"));
    assert_non_null (strstr (diff, "GIT binary patch"));
    assert_null (strstr (diff, "warning:")); /* stdout only */

    /* the diff applies to a fresh clone and gives the work tree back */
    char patch[256];
    snprintf (patch, sizeof patch, "%s/plain.diff", tmp);
    FILE *f = fopen (patch, "w");
    fputs (diff, f);
    fclose (f);
    kiwi_test_must ("git clone -q %s %s/fresh && cd %s/fresh && git apply --check --binary %s && git apply --binary "
                    "%s && diff -r -x .git . %s",
                    src, tmp, tmp, patch, patch, ws);
    /* and so does the clean tree the deciding verify runs on */
    char clean[256];
    kiwi_repo_clean_dir (ws, clean, sizeof clean);
    if (kiwi_repo_materialise (ws, commit, diff, clean, &err) < 0)
        fail_msg ("materialise: %s", kiwi_error_msg (err));
    kiwi_test_must ("diff -r %s %s && test -x %s/run.sh", clean, ws, clean);
    assert_int_equal (dotgit_count (clean), 0);
    /* no change at all: an empty diff, a clean tree equal to the commit */
    kiwi_repo_discard (clean);
    kiwi_repo_remove (ws);
    snprintf (cmd, sizeof cmd, "%s.git", ws);
    assert_int_not_equal (access (ws, F_OK), 0);
    assert_int_not_equal (access (cmd, F_OK), 0);
}

static void
test_ignored_files_named (void **state)
{
    make_src ("ignored", "printf 'sum\\n*.log\\n' > .gitignore");
    char src[128], ws[128];
    snprintf (src, sizeof src, "%s/ignored", tmp);
    snprintf (ws, sizeof ws, "%s/state/work/ignored-1", tmp);
    kiwi_test_must ("mkdir -p %s/state/work", tmp);
    cleanup_free char *commit = NULL;
    checkout (src, ws, NULL, &commit);
    kiwi_error_t err = NULL;
    /* node loads ./sum before ./sum.js: a fix the diff does not carry */
    const char *fix = "module.exports = { sum: (a, b) => a + b };\n";
    assert_int_equal (kiwi_ws_write (ws, "sum", fix, strlen (fix), &err), 0);
    assert_int_equal (kiwi_ws_write (ws, "carried.txt", "x\n", 2, &err), 0);
    cleanup_free char *diff = NULL;
    assert_int_equal (kiwi_repo_diff (ws, commit, &diff, &err), 0);
    assert_non_null (strstr (diff, "carried.txt"));
    assert_null (strstr (diff, "a + b"));
    kiwi_strv nc = KIWI_STRV_INIT;
    assert_int_equal (kiwi_repo_not_carried (ws, 20, &nc, &err), 0);
    assert_int_equal (nc.n, 1);
    assert_string_equal (nc.v[0], "sum");
    kiwi_strv_free (&nc);
    char clean[256], p[300];
    kiwi_repo_clean_dir (ws, clean, sizeof clean);
    assert_int_equal (kiwi_repo_materialise (ws, commit, diff, clean, &err), 0);
    snprintf (p, sizeof p, "%s/sum", clean);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/carried.txt", clean);
    assert_int_equal (access (p, F_OK), 0);
    kiwi_repo_remove (ws);
}

/* A repository laid out to be taken for git metadata (a bare repository's
 * files at its top and in a subdirectory, each with a config that runs a
 * command through every hook git has for it), a .gitattributes that names
 * drivers, and the model writing a .git/config: nothing runs. */
static void
test_planted_config_never_runs (void **state)
{
    char cfg[2048];
    snprintf (cfg, sizeof cfg,
              "[core]\\n\\tfsmonitor = touch %s\\n\\thooksPath = hooks\\n\\tsshCommand = touch %s\\n"
              "\\tpager = touch %s\\n\\tbare = true\\n[diff]\\n\\texternal = touch %s\\n"
              "[filter \"canary\"]\\n\\tclean = touch %s\\n\\tsmudge = touch %s\\n\\tprocess = touch %s\\n"
              "[diff \"canary\"]\\n\\ttextconv = touch %s\\n",
              canary, canary, canary, canary, canary, canary, canary, canary);
    char extra[8192];
    snprintf (extra, sizeof extra,
              "printf '%s' > config && echo 'ref: refs/heads/main' > HEAD && mkdir -p objects/info refs/heads hooks "
              "bare/objects bare/refs/heads && touch objects/info/keep refs/heads/keep bare/objects/keep "
              "bare/refs/heads/keep && cp config HEAD bare/ && printf '#!/bin/sh\\ntouch %s\\n' > hooks/pre-commit && "
              "cp hooks/pre-commit hooks/post-checkout && cp hooks/pre-commit hooks/post-index-change && "
              "chmod +x hooks/* && printf '* filter=canary diff=canary\\n' > .gitattributes",
              cfg, canary);
    make_src ("planted", extra);
    char src[128], ws[128];
    snprintf (src, sizeof src, "%s/planted", tmp);
    snprintf (ws, sizeof ws, "%s/state/work/planted-1", tmp);
    kiwi_test_must ("mkdir -p %s/state/work", tmp);
    cleanup_free char *commit = NULL;
    checkout (src, ws, NULL, &commit);
    assert_int_equal (dotgit_count (ws), 0);
    /* the model's attempt through its tools is refused */
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ws_write (ws, "./.git/config", cfg, strlen (cfg), &err), -1);
    kiwi_error_free (&err);
    /* and were a .git to appear in the work tree anyway, it is just a file
     * to git: the git directory is explicit */
    kiwi_test_must ("mkdir -p %s/.git/hooks && cp %s/config %s/.git/config && cp %s/hooks/pre-commit %s/.git/hooks/",
                    ws, ws, ws, ws, ws);
    assert_int_equal (kiwi_ws_edit (ws, "sum.js", "return a - b;", "return a + b;", &err), 0);
    cleanup_free char *tree = NULL, *diff = NULL;
    assert_int_equal (kiwi_repo_tree_id (ws, &tree, &err), 0);
    assert_int_equal (kiwi_repo_diff (ws, commit, &diff, &err), 0);
    assert_non_null (strstr (diff, "+  return a + b;"));
    assert_null (strstr (diff, ".git/config"));
    kiwi_strv nc = KIWI_STRV_INIT;
    assert_int_equal (kiwi_repo_not_carried (ws, 20, &nc, &err), 0);
    kiwi_strv_free (&nc);
    char clean[256];
    kiwi_repo_clean_dir (ws, clean, sizeof clean);
    assert_int_equal (kiwi_repo_materialise (ws, commit, diff, clean, &err), 0);
    /* the attributes changed nothing: the checkout is the blobs, byte for byte */
    kiwi_test_must ("cmp %s/config %s/config && cmp %s/sum.js %s/sum.js", src, ws, clean, ws);
    if (access (canary, F_OK) == 0)
        fail_msg ("the canary %s was created: a planted configuration ran", canary);
    /* control: the same configuration where plain git does find it runs */
    kiwi_test_must ("git init -q %s/control && cp %s/.git/config %s/control/.git/config && cd %s/control && echo x > "
                    "f && { git -c core.bare=false add -A >/dev/null 2>&1; true; }",
                    tmp, ws, tmp, tmp);
    assert_int_equal (access (canary, F_OK), 0);
    unlink (canary);
    kiwi_repo_remove (ws);
}

/* A crafted tree (git refuses to commit these; git mktree does not) with a
 * `.git` file or directory below the top: refused, nothing of it on disk. */
static void
test_tree_with_dotgit_refused (void **state)
{
    static const struct {
        const char *top, *mid, *leaf, *name;
    } cases[] = { { "sub", "", ".git", "sub/.git" }, { "sub", "", ".GIT", "sub/.GIT" },
                  { "deep", "er", ".Git", "deep/er/.Git" } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bare[128], ws[160];
        snprintf (bare, sizeof bare, "%s/crafted-%zu.git", tmp, i);
        snprintf (ws, sizeof ws, "%s/state/work/crafted-%zu", tmp, i);
        /* the entry is a gitdir file pointing at a repository with a planted config */
        kiwi_test_must ("mkdir -p %s/state/work && git init -q --bare %s && mkdir -p %s/elsewhere && git init -q "
                        "%s/elsewhere && git -C %s/elsewhere config core.fsmonitor 'touch %s' && cd %s && "
                        "b=$(printf 'gitdir: %s/elsewhere/.git\\n' | git hash-object -w --stdin) && "
                        "o=$(echo ok | git hash-object -w --stdin) && "
                        "t=$(printf '100644 blob %%s\\t%s\\n100644 blob %%s\\tok\\n' $b $o | git mktree) && "
                        "if [ -n '%s' ]; then t=$(printf '040000 tree %%s\\t%s\\n' $t | git mktree); fi && "
                        "top=$(printf '040000 tree %%s\\t%s\\n100644 blob %%s\\tREADME\\n' $t $o | git mktree) && "
                        "c=$(" GITC " commit-tree -m crafted $top) && git update-ref refs/heads/main $c && "
                        "git symbolic-ref HEAD refs/heads/main",
                        tmp, bare, tmp, tmp, tmp, canary, bare, tmp, cases[i].leaf, cases[i].mid, cases[i].mid,
                        cases[i].top);
        char st[128];
        snprintf (st, sizeof st, "%s/state", tmp);
        kiwi_repo_opts o = { .state_dir = st, .timeout_ms = 60000, .max_checkout_files = 1000 };
        kiwi_error_t err = NULL;
        char *commit = NULL;
        int rc = kiwi_repo_checkout (&o, bare, "HEAD", ws, &commit, &err);
        if (rc == 0)
            fail_msg ("a tree with `%s` was checked out", cases[i].name);
        assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_UNSAFE);
        kiwi_error_free (&err);
        assert_int_equal (dotgit_count (ws), 0);
        kiwi_repo_remove (ws);
    }
    if (access (canary, F_OK) == 0)
        fail_msg ("the canary %s was created", canary);
}

/* A bare repository tmp/<name>.git whose main is one commit (message name)
 * of the tree that the shell commands tree_sh, run inside it, leave in $t;
 * the state directory tmp/state-<name> with its work directory, and the
 * workspace path tmp/state-<name>/work/<name>-1. Paths to bare, st, ws. */
static void
crafted_repo (const char *name, const char *tree_sh, char bare[160], char st[160], char ws[160])
{
    snprintf (bare, 160, "%s/%s.git", tmp, name);
    snprintf (st, 160, "%s/state-%s", tmp, name);
    snprintf (ws, 160, "%s/work/%s-1", st, name);
    kiwi_test_must ("mkdir -p %s/work && git init -q --bare %s && cd %s && %s && c=$(" GITC " commit-tree -m %s $t) && "
                    "git update-ref refs/heads/main $c && git symbolic-ref HEAD refs/heads/main",
                    st, bare, bare, tree_sh, name);
}

/* The checkout of bare into ws under o is refused as too large, with a
 * message naming want_a and want_b; ws is not written and the state
 * directory st grows by less than slack_kb (the mirror's fetch). what
 * names the case in the log. */
static void
expect_too_large (const kiwi_repo_opts *o, const char *bare, const char *ws, const char *st, const char *what,
                  const char *want_a, const char *want_b, long slack_kb)
{
    long before = du_kb (st);
    kiwi_error_t err = NULL;
    char *commit = NULL;
    assert_int_equal (kiwi_repo_checkout (o, bare, "HEAD", ws, &commit, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_TOO_LARGE);
    if (strstr (kiwi_error_msg (err), want_a) == NULL || strstr (kiwi_error_msg (err), want_b) == NULL)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    assert_int_not_equal (access (ws, F_OK), 0);
    long after = du_kb (st);
    fprintf (stderr, "%s: state dir %ld KB before, %ld KB after (mirror included)\n", what, before, after);
    assert_true (after - before < slack_kb);
    kiwi_repo_remove (ws);
}

/* 10 entries per level, each naming the level below, 8 levels deep: 10^8
 * paths from a few hundred bytes of objects. */
static void
test_git_bomb_refused (void **state)
{
    char bare[160], ws[160], st[160];
    crafted_repo ("bomb",
                  "t=$(echo boom | git hash-object -w --stdin) && kind=blob mode=100644 && "
                  "for level in 1 2 3 4 5 6 7 8 9; do "
                  "t=$(for i in 0 1 2 3 4 5 6 7 8 9; do printf '%s %s %s\\td%s\\n' $mode $kind $t $i; done | "
                  "git mktree); "
                  "kind=tree mode=040000; done",
                  bare, st, ws);
    kiwi_repo_opts o = { .state_dir = st, .timeout_ms = 120000, .max_checkout_mb = 2048,
                         .max_checkout_files = 200000 };
    expect_too_large (&o, bare, ws, st, "git bomb", "more than 200000 files", "KIWI_CHECKOUT_MAX_FILES", 1024);
}

/* A 300 MB file of zeros compresses to a few hundred KB of mirror; with a
 * 100 MB checkout ceiling it is refused before it is written. */
static void
test_big_blob_refused (void **state)
{
    char bare[160], ws[160], st[160];
    crafted_repo ("big",
                  "b=$(head -c 300M /dev/zero | git hash-object -w --stdin) && "
                  "o=$(echo ok | git hash-object -w --stdin) && "
                  "t=$(printf '100644 blob %s\\tzeros.bin\\n100644 blob %s\\tREADME\\n' $b $o | git mktree)",
                  bare, st, ws);
    kiwi_repo_opts o = { .state_dir = st, .timeout_ms = 120000, .max_checkout_mb = 100, .max_checkout_files = 200000 };
    expect_too_large (&o, bare, ws, st, "big blob", "KIWI_CHECKOUT_MAX_MB=100", "bytes", 5 * 1024);
    /* under the ceiling, the same repository checks out */
    kiwi_error_t err = NULL;
    char *commit = NULL;
    o.max_checkout_mb = 400;
    assert_int_equal (kiwi_repo_checkout (&o, bare, "HEAD", ws, &commit, &err), 0);
    free (commit);
    kiwi_repo_remove (ws);
}

/* A protocol list leaves out what it does not name: a local path is the
 * `file` protocol, refused under "https:ssh" before anything is fetched. */
static void
test_protocol_list_enforced (void **state)
{
    make_src ("proto", NULL);
    char src[128], ws[160], st[160];
    snprintf (src, sizeof src, "%s/proto", tmp);
    snprintf (st, sizeof st, "%s/state-proto", tmp);
    snprintf (ws, sizeof ws, "%s/work/proto-1", st);
    kiwi_test_must ("mkdir -p %s/work", st);
    kiwi_repo_opts o = { .state_dir = st, .timeout_ms = 60000, .protocols = "https:ssh" };
    kiwi_error_t err = NULL;
    char *commit = NULL;
    assert_int_equal (kiwi_repo_checkout (&o, src, "HEAD", ws, &commit, &err), -1);
    assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_FETCH);
    if (strstr (kiwi_error_msg (err), "not allowed") == NULL)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    kiwi_repo_remove (ws);
    o.protocols = "https:file";
    if (kiwi_repo_checkout (&o, src, "HEAD", ws, &commit, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    free (commit);
    kiwi_repo_remove (ws);
}

/* ---------- the mirror's ceiling, while git runs ---------- */

/* The peak size of a directory while something writes it: a thread walks
 * it (allocated blocks or size, whichever is larger, links not followed)
 * as fast as it can until told to stop. */
typedef struct sampler {
    char dir[200];
    pthread_t th;
    atomic_bool stop;
    int64_t peak, sum;
    long samples;
} sampler;

static _Thread_local sampler *walking;

static int
sample_entry (const char *path, const struct stat *st, int flag, struct FTW *f)
{
    if (flag == FTW_NS)
        return 0; /* gone while walked: st says nothing */
    int64_t b = (int64_t) st->st_blocks * 512;
    walking->sum += b > (int64_t) st->st_size ? b : (int64_t) st->st_size;
    return 0;
}

static void *
sample_loop (void *arg)
{
    sampler *s = arg;
    walking = s;
    do {
        s->sum = 0;
        nftw (s->dir, sample_entry, 32, FTW_PHYS | FTW_MOUNT);
        if (s->sum > s->peak)
            s->peak = s->sum;
        s->samples++;
        nanosleep (&(struct timespec){ 0, 1000000 }, NULL);
    } while (!atomic_load (&s->stop));
    return NULL;
}

static void
sampler_start (sampler *s, const char *dir)
{
    memset (s, 0, sizeof *s);
    snprintf (s->dir, sizeof s->dir, "%s", dir);
    assert_int_equal (pthread_create (&s->th, NULL, sample_loop, s), 0);
}

static int64_t
sampler_stop (sampler *s)
{
    atomic_store (&s->stop, true);
    pthread_join (s->th, NULL);
    return s->peak;
}

/* <tmp>/<name>.git, a bare repository whose main (and HEAD) is a commit of
 * `files_sh` (a shell fragment that leaves a tree in $t), on top of the
 * current main when there is one. */
static void
grow_repo (const char *bare, const char *files_sh)
{
    kiwi_test_must ("test -d %s || git init -q --bare %s; cd %s && %s && p=$(git rev-parse -q --verify main) ; "
                    "c=$(" GITC " commit-tree ${p:+-p $p} -m grow $t) && git update-ref refs/heads/main $c && "
                    "git symbolic-ref HEAD refs/heads/main",
                    bare, bare, bare, files_sh);
}

#define RANDOM_TREE(mb)                                                                                              \
    "b=$(head -c " #mb "M /dev/urandom | git hash-object -w --stdin) && "                                           \
    "t=$(printf '100644 blob %s\\trandom-" #mb ".bin\\n' $b | git mktree)"

/* the mirrors and fetches under <st>/mirrors: "<n> <names>" */
static int
mirror_dirs (const char *st, char *names, size_t cap)
{
    char out[512] = "";
    sh_out (out, sizeof out, "cd %s/mirrors && ls -d *.git *.incoming 2>/dev/null | tr '\\n' ' '", st);
    snprintf (names, cap, "%s", out);
    int n = 0;
    for (char *p = out; *p; p++)
        n += *p == ' ';
    return n;
}

/* what a mirror under <st>/mirrors is: its refs, its object files, its HEAD */
#define MIRROR_LOOK "{ cd %s/mirrors/*.git && git for-each-ref && ls -lR objects && git rev-parse HEAD; } | md5sum"

#define MARGIN_KB 1024 /* over the ceiling: git's own small files, a walk's slack */

/* A repository the test serves over file:// (git's pack protocol,
 * upload-pack on the far side), the state directory its tasks use and
 * their options (a 5 MB ceiling on the mirror). */
typedef struct served {
    char bare[160], url[200], st[160], mirrors[200], ws[3][200];
    kiwi_repo_opts o;
} served;

/* v for the repository <tmp>/<name>.git made of `files_sh` (grow_repo). */
static void
served_init (served *v, const char *name, const char *files_sh)
{
    snprintf (v->bare, sizeof v->bare, "%s/%s.git", tmp, name);
    snprintf (v->url, sizeof v->url, "file://%s", v->bare);
    snprintf (v->st, sizeof v->st, "%s/state-%s", tmp, name);
    snprintf (v->mirrors, sizeof v->mirrors, "%s/mirrors", v->st);
    for (int i = 0; i < 3; i++)
        snprintf (v->ws[i], sizeof v->ws[i], "%s/work/%s-%d", v->st, name, i + 1);
    kiwi_test_must ("mkdir -p %s/work", v->st);
    grow_repo (v->bare, files_sh);
    v->o = (kiwi_repo_opts){ .state_dir = v->st, .timeout_ms = 120000, .max_mb = 5, .max_checkout_mb = 2048,
                             .max_checkout_files = 200000 };
}

/* A second task on the same repository at the same time, in a thread of
 * its own: its outcome. */
typedef struct rival {
    const served *v;
    const char *ws;
    pthread_t th;
    int rc, code;
} rival;

static void *
rival_run (void *arg)
{
    rival *r = arg;
    kiwi_error_t err = NULL;
    char *commit = NULL;
    r->rc = kiwi_repo_checkout (&r->v->o, r->v->url, "HEAD", r->ws, &commit, &err);
    r->code = kiwi_error_code (err);
    kiwi_error_free (&err);
    free (commit);
    return NULL;
}

/* The checkout of v's repository into ws under v->o (and, with `r`, the
 * rival's beside it), the mirrors directory sampled while they run:
 * refused as too large, naming the 5 MB ceiling and its setting, the peak
 * within the ceiling and MARGIN_KB, no work tree written. `what` names the
 * case in the log. */
static void
expect_bounded (const served *v, const char *ws, rival *r, const char *what)
{
    sampler s;
    sampler_start (&s, v->mirrors);
    if (r != NULL)
        assert_int_equal (pthread_create (&r->th, NULL, rival_run, r), 0);
    kiwi_error_t err = NULL;
    char *commit = NULL;
    int rc = kiwi_repo_checkout (&v->o, v->url, "HEAD", ws, &commit, &err);
    if (r != NULL)
        pthread_join (r->th, NULL);
    int64_t peak = sampler_stop (&s);
    fprintf (stderr, "%s: %ld samples of %s, peak %lld KB (ceiling 5120 KB + %d KB margin): %s\n", what, s.samples,
             v->mirrors, (long long) (peak / 1024), MARGIN_KB, kiwi_error_msg (err));
    assert_int_equal (rc, -1);
    assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_TOO_LARGE);
    const char *msg = kiwi_error_msg (err);
    if (strstr (msg, "5 MB ceiling") == NULL || strstr (msg, "KIWI_CLONE_MAX_MB") == NULL)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    assert_true (peak <= (5 * 1024 + MARGIN_KB) * 1024LL);
    assert_int_not_equal (access (ws, F_OK), 0);
    kiwi_repo_remove (ws);
}

/* A 40 MB incompressible blob with a 5 MB ceiling: the mirrors directory
 * never holds more than 5 MB and the margin while git runs, the clone is
 * refused naming the ceiling and the setting, and no mirror stays. */
static void
test_clone_bounded_while_running (void **state)
{
    served v;
    char names[512];
    served_init (&v, "huge", RANDOM_TREE (40));
    expect_bounded (&v, v.ws[0], NULL, "clone");
    if (mirror_dirs (v.st, names, sizeof names) != 0)
        fail_msg ("left under %s: %s", v.mirrors, names);
    assert_true (du_kb (v.mirrors) < 1024);

    /* under a ceiling it fits, the same repository is cloned and checked out */
    v.o.max_mb = 100;
    kiwi_error_t err = NULL;
    char *commit = NULL;
    if (kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[0], &commit, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    free (commit);
    kiwi_repo_remove (v.ws[0]);
    assert_int_equal (mirror_dirs (v.st, names, sizeof names), 1);
}

/* A mirror within the ceiling, then the repository grows by a 40 MB blob:
 * two tasks fetch it at once; each fetch is stopped while git writes (peak
 * sampled as above), both are refused naming the ceiling, and the mirror
 * is exactly as it was (refs, object files, HEAD, fsck; an earlier
 * checkout still reads its objects). A higher ceiling takes the same
 * fetch: the new commit checks out. */
static void
test_fetch_bounded_while_running (void **state)
{
    served v;
    char names[512];
    served_init (&v, "grows", RANDOM_TREE (1));
    kiwi_error_t err = NULL;
    cleanup_free char *first = NULL;
    if (kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[0], &first, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_int_equal (mirror_dirs (v.st, names, sizeof names), 1);
    char before[1024] = "", after[1024] = "";
    sh_out (before, sizeof before, MIRROR_LOOK, v.st);

    grow_repo (v.bare, RANDOM_TREE (40));
    /* two tasks at once: the lock has them fetch one after the other */
    rival r = { .v = &v, .ws = v.ws[2] };
    expect_bounded (&v, v.ws[1], &r, "two fetches");
    assert_int_equal (r.rc, -1);
    assert_int_equal (r.code, KIWI_REPO_E_TOO_LARGE);
    assert_int_not_equal (access (v.ws[2], F_OK), 0);
    kiwi_repo_remove (v.ws[2]);
    /* the mirror as it was: same refs, same object files, whole */
    sh_out (after, sizeof after, MIRROR_LOOK, v.st);
    assert_string_equal (before, after);
    kiwi_test_must ("git --git-dir=$(echo %s/*.git) fsck --no-progress --strict", v.mirrors);
    if (mirror_dirs (v.st, names, sizeof names) != 1 || strstr (names, ".incoming") != NULL)
        fail_msg ("under %s: %s", v.mirrors, names);
    cleanup_free char *tree = NULL;
    if (kiwi_repo_tree_id (v.ws[0], &tree, &err) < 0)
        fail_msg ("the earlier checkout: %s", kiwi_error_msg (err));

    /* a ceiling the fetch fits under: the mirror takes it */
    v.o.max_mb = 100;
    char *commit = NULL;
    if (kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[1], &commit, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    char head[64] = "";
    sh_out (head, sizeof head, "git --git-dir=%s rev-parse main", v.bare);
    assert_string_equal (commit, head);
    free (commit);
    sh_out (after, sizeof after, "git --git-dir=$(echo %s/*.git) rev-parse HEAD", v.mirrors);
    assert_string_equal (after, head);
    kiwi_test_must ("git --git-dir=$(echo %s/*.git) fsck --no-progress --strict", v.mirrors);
    if (mirror_dirs (v.st, names, sizeof names) != 1 || strstr (names, ".incoming") != NULL)
        fail_msg ("under %s: %s", v.mirrors, names);
    kiwi_repo_remove (v.ws[1]);
    kiwi_repo_remove (v.ws[0]);
}

/* A mirror within the ceiling, then the repository grows by 3000 refs
 * and no object: the fetch writes a ref file (a block of disk) for each,
 * no file large, 12 MB in all, which only the measure of the whole
 * directory sees: refused naming the ceiling, the mirror as it was. Once
 * the mirror has them, a fetch with nothing new fits under the ceiling. */
static void
test_fetch_of_many_refs_bounded (void **state)
{
    served v;
    char names[512], before[1024] = "", after[1024] = "";
    served_init (&v, "refs", RANDOM_TREE (1));
    kiwi_error_t err = NULL;
    cleanup_free char *first = NULL;
    if (kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[0], &first, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    sh_out (before, sizeof before, MIRROR_LOOK, v.st);
    kiwi_test_must ("cd %s && c=$(git rev-parse main) && for i in $(seq 3000); do echo \"create refs/heads/b$i $c\"; "
                    "done | git update-ref --stdin && git pack-refs --all",
                    v.bare);
    sampler s;
    sampler_start (&s, v.mirrors);
    char *commit = NULL;
    int rc = kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[1], &commit, &err);
    int64_t peak = sampler_stop (&s);
    fprintf (stderr, "3000 refs: %ld samples, peak %lld KB: %s\n", s.samples, (long long) (peak / 1024),
             kiwi_error_msg (err));
    assert_int_equal (rc, -1);
    assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_TOO_LARGE);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_CLONE_MAX_MB"));
    kiwi_error_free (&err);
    sh_out (after, sizeof after, MIRROR_LOOK, v.st);
    assert_string_equal (before, after);
    if (mirror_dirs (v.st, names, sizeof names) != 1 || strstr (names, ".incoming") != NULL)
        fail_msg ("under %s: %s", v.mirrors, names);
    kiwi_repo_remove (v.ws[1]);

    /* a higher ceiling takes them; back under 5 MB, a fetch with nothing
     * new writes no ref file for the 3000 refs the mirror has */
    for (int64_t mb = 100; mb >= 5; mb -= 95) {
        v.o.max_mb = mb;
        if (kiwi_repo_checkout (&v.o, v.url, "HEAD", v.ws[1], &commit, &err) < 0)
            fail_msg ("under %lld MB: %s", (long long) mb, kiwi_error_msg (err));
        free (commit);
        kiwi_repo_remove (v.ws[1]);
    }
    kiwi_repo_remove (v.ws[0]);
}

/* A server that takes the connection and never answers (a socket of this
 * test on loopback, listening, never accepting): the fetch is stopped at
 * KIWI_CLONE_TIMEOUT, named, and nothing stays. */
static void
test_fetch_timeout_named (void **state)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    assert_int_equal (bind (fd, (struct sockaddr *) &a, sizeof a), 0);
    assert_int_equal (listen (fd, 8), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &a, &al), 0);
    char url[64], st[160], ws[200], names[512];
    snprintf (url, sizeof url, "git://127.0.0.1:%d/silent.git", ntohs (a.sin_port));
    snprintf (st, sizeof st, "%s/state-silent", tmp);
    snprintf (ws, sizeof ws, "%s/work/silent-1", st);
    kiwi_test_must ("mkdir -p %s/work", st);
    kiwi_repo_opts o = { .state_dir = st, .timeout_ms = 2000, .max_mb = 5 };
    kiwi_error_t err = NULL;
    char *commit = NULL;
    assert_int_equal (kiwi_repo_checkout (&o, url, "HEAD", ws, &commit, &err), -1);
    close (fd);
    fprintf (stderr, "silent server: %s\n", kiwi_error_msg (err));
    assert_int_equal (kiwi_error_code (err), KIWI_REPO_E_TIMEOUT);
    if (strstr (kiwi_error_msg (err), "KIWI_CLONE_TIMEOUT") == NULL)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    if (mirror_dirs (st, names, sizeof names) != 0)
        fail_msg ("left: %s", names);
    kiwi_repo_remove (ws);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_version_from_tags),
        cmocka_unit_test (test_layout_diff_and_clean_tree), cmocka_unit_test (test_ignored_files_named),
        cmocka_unit_test (test_planted_config_never_runs),  cmocka_unit_test (test_tree_with_dotgit_refused),
        cmocka_unit_test (test_git_bomb_refused),           cmocka_unit_test (test_big_blob_refused),
        cmocka_unit_test (test_protocol_list_enforced),
        cmocka_unit_test (test_clone_bounded_while_running), cmocka_unit_test (test_fetch_bounded_while_running),
        cmocka_unit_test (test_fetch_of_many_refs_bounded),  cmocka_unit_test (test_fetch_timeout_named),
    };
    return cmocka_run_group_tests_name ("repo", tests, setup, teardown);
}
