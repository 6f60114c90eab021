#!/usr/bin/env python3
"""tests/lint/cleanup_jumps.py: no `goto` jumps over the declaration of a
variable with a clean-up attribute (cleanup_free, cleanup_close, cleanup_buf,
...; common/cleanup.h) to a label in its scope.

Such a jump compiles without a word under -Wall -Wextra, and the clean-up then
runs on a variable that was never initialised: free() of a stack garbage
pointer, close() of a random descriptor. It happened once (kiwi_phase_verify
freed garbage whenever the snapshot could not be laid). GCC's
-Wjump-misses-init finds every jump over an initialisation, mostly harmless
ones over plain values, so this check compiles every C file of the build
(compile_commands.json, -fsyntax-only) with it and fails only where the
variable jumped over is declared with `cleanup_`.

Usage: cleanup_jumps.py BUILD_DIR SOURCE_DIR
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

NOTE = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):\d+: note: .(?P<var>\w+). declared here")


def check(entry):
    argv = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a in ("-c", "-Werror") or a.startswith("-fsanitize"):
            continue
        out.append(a)
    out += ["-fsyntax-only", "-Wjump-misses-init", "-Wno-error"]
    res = subprocess.run(out, cwd=entry["directory"], capture_output=True, text=True)
    found = set()
    for line in res.stderr.splitlines():
        m = NOTE.match(line)
        if not m:
            continue
        path = os.path.join(entry["directory"], m["file"])
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.readlines()[int(m["line"]) - 1]
        except (OSError, IndexError):
            continue
        if "cleanup_" in text:
            found.add(f"{os.path.relpath(path)}:{m['line']}: a goto jumps over `{m['var']}`: {text.strip()}")
    return found


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build, source = sys.argv[1], os.path.realpath(sys.argv[2])
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = [e for e in json.load(f) if os.path.realpath(e["file"]).startswith(source + os.sep)]
    if not entries:
        print(f"no C files of {source} in {build}/compile_commands.json", file=sys.stderr)
        return 1
    os.chdir(source)
    found = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for f in pool.map(check, entries):
            found |= f
    for f in sorted(found):
        print(f)
    print(f"{len(entries)} files compiled, {len(found)} jump(s) over a clean-up variable")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
