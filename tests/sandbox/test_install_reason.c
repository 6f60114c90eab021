/*
 * test_install_reason.c: a failed install's reason says why, from the
 * output the real tools print (tests/fixtures/captured/) and from outputs
 * made to probe the edges: a full disk, colours and control characters, a
 * line too long, an output that only points to a log, none at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/install-reason.h"

#define CAPTURED KIWI_SOURCE_DIR "/tests/fixtures/captured"

static char *
captured (const char *name)
{
    char path[512];
    snprintf (path, sizeof path, CAPTURED "/%s", name);
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    char *buf = calloc (1, 1 << 20);
    assert_non_null (buf);
    size_t n = fread (buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

static void
reason_of (const char *output, char *dst, size_t cap)
{
    kiwi_install_failed_reason (dst, cap, "/bin/sh", 1, output, 4096);
}

/* The real installs that failed offline: each reason names what failed,
 * not only the status. */
static void
test_captured_installs (void **state)
{
    static const struct {
        const char *file, *has;
    } cases[] = {
        { "npm-install-offline.txt",
          ": \"npm error request to https://registry.npmjs.org/is-number failed, reason: getaddrinfo EAI_AGAIN "
          "registry.npmjs.org\"" },
        { "pip-install-offline.txt", ": \"ERROR: No matching distribution found for iniconfig==2.0.0\"" },
        { "pnpm-offline.txt", "ERR_PNPM_META_FETCH_FAIL" },
        { "composer-offline.txt", "curl error 6 while downloading https://repo.packagist.org/packages.json" },
        { "bundler-install-offline.txt", "Could not reach host index.rubygems.org" },
        { "uv-locked-offline.txt", "error: Failed to download `iniconfig==2.3.1`" },
        /* Maven ends with bare "[ERROR]" lines and "[Help 1] http://..." */
        { "mvn-offline-missing.txt", "maven-resources-plugin:2.6 or one of its dependencies could not be resolved" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = captured (cases[i].file);
        char r[512];
        reason_of (out, r, sizeof r);
        if (strncmp (r, "install `/bin/sh` exited with status 1: ", 40) != 0 || strstr (r, cases[i].has) == NULL)
            fail_msg ("%s: reason \"%s\", want it to hold \"%s\"", cases[i].file, r, cases[i].has);
        assert_null (strchr (r, '\n'));
        free (out);
    }
}

static void
test_disk_full (void **state)
{
    const char *out = "npm warn deprecated x@1\n"
                      "npm error code ENOSPC\n"
                      "npm error syscall write\n"
                      "npm error nospc ENOSPC: no space left on device, write\n"
                      "npm error A complete log of this run can be found in: /kiwi/home/.npm/_logs/x.log\n";
    char r[512], line[300];
    assert_true (kiwi_install_output_disk_full (out, line, sizeof line));
    assert_string_equal (line, "npm error code ENOSPC");
    reason_of (out, r, sizeof r);
    assert_non_null (strstr (r, "the sandbox's disk is full (4096 MB, KIWI_MAX_SANDBOX_DISK_MB raises it;"));
    assert_non_null (strstr (r, "\"npm error code ENOSPC\""));
    const char *tar = "tar: ./x.bin: Cannot write: No space left on device\n";
    assert_true (kiwi_install_output_disk_full (tar, NULL, 0));
    assert_false (kiwi_install_output_disk_full ("ERROR: No matching distribution\n", line, sizeof line));
    assert_string_equal (line, "");
}

/* A test run's output: the system's message in any case (node's, rustc's
 * through LLVM), not a bare ENOSPC that a failing test's name holds. */
static void
test_run_disk_full (void **state)
{
    char line[300];
    assert_true (kiwi_run_output_disk_full ("npm error code ENOSPC\nError: ENOSPC: no space left on device, write\n",
                                            line, sizeof line));
    assert_string_equal (line, "Error: ENOSPC: no space left on device, write");
    assert_true (kiwi_run_output_disk_full ("LLVM ERROR: IO failure on output stream: No space left on device\n", line,
                                            sizeof line));
    assert_false (kiwi_run_output_disk_full ("FAILED tests/test_io.py::test_write_reports_ENOSPC - assert 0\n", line,
                                             sizeof line));
    assert_string_equal (line, "");
}

static void
test_hostile_output (void **state)
{
    char r[512], line[400];
    /* colours go, other control characters are escaped, one line stays */
    kiwi_install_error_line ("ok\n\x1b[31mERR!\x1b[0m bad\x07 thing\x1b]0;title\n", line, sizeof line);
    assert_string_equal (line, "ERR! bad\\x07 thing\\x1b]0;title");
    /* a progress line: what the terminal shows after the last \r */
    kiwi_install_error_line ("downloading 10%\rdownloading 90%\rerror: checksum mismatch   \n", line, sizeof line);
    assert_string_equal (line, "error: checksum mismatch");
    /* a long line is cut */
    char *big = malloc (100000);
    assert_non_null (big);
    memcpy (big, "error: ", 7);
    memset (big + 7, 'A', 99990);
    big[99997] = '\n';
    big[99998] = '\0';
    kiwi_install_error_line (big, line, sizeof line);
    assert_int_equal (strlen (line), KIWI_INSTALL_QUOTE_MAX + 3);
    assert_string_equal (line + KIWI_INSTALL_QUOTE_MAX, "...");
    reason_of (big, r, sizeof r);
    assert_true (strlen (r) < sizeof r);
    assert_non_null (strstr (r, "...\""));
    free (big);
    /* a small buffer is never overrun */
    char tiny[8];
    kiwi_install_error_line ("error: something long happened\n", tiny, sizeof tiny);
    assert_true (strlen (tiny) < sizeof tiny);
}

static void
test_plain_and_empty (void **state)
{
    char r[512], line[300];
    /* no line reads as an error: the last non-empty one */
    kiwi_install_error_line ("step 1\nstep 2\n\n   \n", line, sizeof line);
    assert_string_equal (line, "step 2");
    /* a line that only points at a log is not the reason */
    kiwi_install_error_line ("ERROR: the build broke\nnpm error A complete log of this run can be found in: /x\n",
                             line, sizeof line);
    assert_string_equal (line, "ERROR: the build broke");
    /* a stack frame names a function (ResponseError), not the cause: Yarn
     * 1's error line above its trace is */
    kiwi_install_error_line ("[3/5] Fetching packages...\n"
                             "error Error: https://codeload.github.com/o/r/tar.gz/4c13: Request failed \"403 Forbidden\"\n"
                             "    at ResponseError.ExtendableBuiltin (/usr/local/lib/node_modules/yarn/lib/cli.js:696:66)\n"
                             "    at new ResponseError (/usr/local/lib/node_modules/yarn/lib/cli.js:802:124)\n"
                             "    at TLSSocket.emit (node:events:519:28)\n"
                             "info Visit https://yarnpkg.com/en/docs/cli/install for documentation about this command.\n",
                             line, sizeof line);
    assert_string_equal (line, "error Error: https://codeload.github.com/o/r/tar.gz/4c13: Request failed \"403 Forbidden\"");
    /* with nothing else, the last line, a frame or not */
    kiwi_install_error_line ("    at new ResponseError (x.js:1:2)\n", line, sizeof line);
    assert_string_equal (line, "at new ResponseError (x.js:1:2)");
    reason_of ("", r, sizeof r);
    assert_string_equal (r, "install `/bin/sh` exited with status 1 and printed nothing");
    reason_of (NULL, r, sizeof r);
    assert_string_equal (r, "install `/bin/sh` exited with status 1 and printed nothing");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_captured_installs),
        cmocka_unit_test (test_disk_full),
        cmocka_unit_test (test_run_disk_full),
        cmocka_unit_test (test_hostile_output),
        cmocka_unit_test (test_plain_and_empty),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
