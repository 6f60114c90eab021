#!/usr/bin/env python3
"""tests/lint/layers.py: no module includes or links one it may not use.

The folders are the module map. Each module below is a folder (or, for
worker/main.c, the one file that is the program), and a file belongs to
the module of the longest folder that holds it. USES says, for each
module, which other modules its files may include and its CMake files may
link; nothing else is allowed, so a layer never reaches up or sideways:

  common                  nothing
  schemas                 common
  inspect                 common (pure: reads repository files, runs nothing)
  sandbox/archive         common
  sandbox                 common, inspect, sandbox/archive
  sandbox/docker          common, inspect, sandbox, sandbox/archive
  sandbox/firecracker     common, sandbox, sandbox/archive
  models                  common, schemas
  worker                  common, schemas, inspect, sandbox, models
  worker/egress           ... and worker
  worker/task             ... and worker/egress
  worker/daemon           ... and worker/task
  worker/main.c           ... and worker/daemon
  producer                common, schemas

So the drivers (sandbox/docker, sandbox/firecracker) are reached only
through sandbox/sandbox.h, and the tar code only from the sandbox family.
Three more rules make an include line say where it reaches:

- includes are written from the source root ("sandbox/phases.h"): a bare
  name of a library header is refused everywhere (tests/ and bench/ may
  still name a header that sits beside the including file);
- a header named *-internal.h is private to its folder and the folders
  below it: only their files (and tests/, which test modules from inside)
  include it;
- a module's libraries are the add_library names in its CMake files.

tests/ and bench/ may include anything, but a test of a module (its source
under tests/MODULE/) links only libraries of the modules that module may
use: the inspection tests link no driver and no libcurl. Prints every violation as FILE:LINE:
what; exits 1 when there is one.
Usage: layers.py [ROOT] (default: the checkout this file is in).
"""
import os
import re
import sys

BASE_WORKER = {"common", "schemas", "inspect", "sandbox", "models"}
USES = {
    "common": set(),
    "schemas": {"common"},
    "inspect": {"common"},
    "sandbox/archive": {"common"},
    "sandbox": {"common", "inspect", "sandbox/archive"},
    "sandbox/docker": {"common", "inspect", "sandbox", "sandbox/archive"},
    "sandbox/firecracker": {"common", "sandbox", "sandbox/archive"},
    "models": {"common", "schemas"},
    "worker": BASE_WORKER,
    "worker/egress": BASE_WORKER | {"worker"},
    "worker/task": BASE_WORKER | {"worker", "worker/egress"},
    "worker/daemon": BASE_WORKER | {"worker", "worker/egress", "worker/task"},
    "worker/main.c": BASE_WORKER | {"worker", "worker/egress", "worker/task", "worker/daemon"},
    "producer": {"common", "schemas"},
}
TOPS = sorted({m.split("/")[0] for m in USES})


def module_of(rel):
    """The module a path (relative to the root) belongs to, or None."""
    best = None
    for m in USES:
        if rel == m or rel.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def allowed(src, dst):
    return src == dst or dst in USES[src]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    headers, headers_path, libs = {}, {}, {}
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if f.endswith(".h"):
                    if f in headers and headers_path[f] != rel:
                        print(f"{rel}: header name {f} is also {headers_path[f]}: an include of it by name says nothing of its module")
                        return 1
                    headers[f] = module_of(rel)
                    headers_path[f] = rel
                elif f == "CMakeLists.txt" or f.endswith(".cmake"):
                    for m in re.finditer(r"add_library\(\s*([A-Za-z0-9_]+)", open(path).read()):
                        libs[m.group(1)] = module_of(rel)
    if "kiwi_common" not in libs or "error.h" not in headers:
        print(f"{root}: not a Kiwi checkout (no kiwi_common library or common/error.h)")
        return 1
    bad = 0

    def say(what):
        nonlocal bad
        print(what)
        bad += 1

    def check_include(rel, n, mod, target, beside):
        """One #include "target" in file rel (line n) of module mod (None: tests/ or bench/)."""
        if "/" not in target:
            if target in headers and not beside:
                say(f"{rel}:{n}: includes \"{target}\" by its bare name: write \"{headers_path[target]}\"")
            return
        dst = module_of(target)
        if dst is None:
            return
        if not os.path.exists(os.path.join(root, target)):
            say(f"{rel}:{n}: includes \"{target}\", which is not in the source tree")
            return
        if mod is not None and not allowed(mod, dst):
            say(f"{rel}:{n}: {mod} includes {target} of {dst}, which {mod} may not use")
        if target.endswith("-internal.h") and mod is not None:
            home = os.path.dirname(target)
            if not (os.path.dirname(rel) == home or rel.startswith(home + "/")):
                say(f"{rel}:{n}: includes {target}, private to {home}/")

    def scan_includes(path, rel, mod):
        for n, line in enumerate(open(path, errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                target = m.group(1)
                beside = os.path.exists(os.path.join(os.path.dirname(path), target))
                check_include(rel, n, mod, target, beside and mod is None)

    for top in ("tests", "bench"):
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "fixtures"]
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(dirpath, f)
                    scan_includes(path, os.path.relpath(path, root), None)
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                mod = module_of(rel)
                if f.endswith((".c", ".h")):
                    scan_includes(path, rel, mod)
                elif f == "CMakeLists.txt" or f.endswith(".cmake"):
                    text = open(path).read()
                    for m in re.finditer(r"target_link_libraries\(([^)]*)\)", text):
                        n = text[: m.start()].count("\n") + 1
                        for word in m.group(1).split()[1:]:
                            dst = libs.get(word)
                            if dst is not None and not allowed(mod, dst):
                                say(f"{rel}:{n}: {mod} links {word} of {dst}, which {mod} may not use")
                    for m in re.finditer(r"\$\{(?:CMAKE|PROJECT)_SOURCE_DIR\}/([\w/.-]+)", text):
                        dst = module_of(m.group(1))
                        if dst is not None and not allowed(mod, dst):
                            n = text[: m.start()].count("\n") + 1
                            say(f"{rel}:{n}: {mod} builds or includes from {m.group(1)} of {dst}, which {mod} may not use")
    # the tests of a module link only what the module may use: the
    # inspection tests prove inspect/ builds without a driver or libcurl
    lists = os.path.join(root, "tests", "CMakeLists.txt")
    if os.path.exists(lists):
        text = open(lists).read()
        for m in re.finditer(r"kiwi_add_test\(\s*(\w+)(.*?)\)\n", text, re.S):
            src = re.search(r"SOURCES\s+\$\{T\}/([\w/]+)/test_\w+\.c", m.group(2))
            words = re.search(r"LIBS\s+([^)]*?)(?:\s+TIMEOUT\b|$)", m.group(2), re.S)
            mod = module_of(src.group(1)) if src else None
            if mod is None or words is None:
                continue
            n = text[: m.start()].count("\n") + 1
            for word in words.group(1).split():
                dst = libs.get(word)
                if dst is not None and not allowed(mod, dst):
                    say(f"tests/CMakeLists.txt:{n}: {m.group(1)} tests {mod} but links {word} of {dst}")
                if mod == "inspect" and word == "PkgConfig::CURL":
                    say(f"tests/CMakeLists.txt:{n}: {m.group(1)} tests inspect but links libcurl")
    print(f"{len(headers)} headers, {len(libs)} libraries in {len(USES)} modules: {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
