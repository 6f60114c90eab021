#!/usr/bin/env python3
"""tests/lint/layers.py: no folder includes or links a layer above it.

The layers, lowest first: common; schemas; sandbox and models (side by
side, neither uses the other); worker and producer (side by side). A file
of a folder may include a header of its own folder or of a lower layer, and
a folder's CMakeLists may link its own libraries or a lower layer's; tests/
and bench/ may use anything. Three more rules make an include line say
where it reaches:

- includes are written from the source root ("sandbox/phases.h"): a bare
  name of a library header is refused everywhere (tests/ and bench/ may
  still name a header that sits beside the including file);
- a header named *-internal.h is private to its folder: only that folder's
  files (and tests/, which test modules from inside) include it;
- a folder's libraries are the add_library names in its CMake files.

Prints every violation as FILE:LINE: what; exits 1 when there is one.
Usage: layers.py [ROOT] (default: the checkout this file is in).
"""
import os
import re
import sys

RANK = {"common": 0, "schemas": 1, "sandbox": 2, "models": 2, "worker": 3, "producer": 3}


def allowed(src, dst):
    return src == dst or RANK[dst] < RANK[src]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    headers, headers_path, libs = {}, {}, {}
    for folder in RANK:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                path = os.path.join(dirpath, f)
                if f.endswith(".h"):
                    if f in headers and headers[f] != folder:
                        print(f"{path}: header name {f} is also in {headers[f]}/: an include of it says nothing of its layer")
                        return 1
                    headers[f] = folder
                    headers_path[f] = os.path.relpath(path, root)
                elif f == "CMakeLists.txt" or f.endswith(".cmake"):
                    for m in re.finditer(r"add_library\(\s*([A-Za-z0-9_]+)", open(path).read()):
                        libs[m.group(1)] = folder
    if "kiwi_common" not in libs or "error.h" not in headers:
        print(f"{root}: not a Kiwi checkout (no kiwi_common library or common/error.h)")
        return 1
    bad = 0

    def check_include(rel, n, folder, target, beside):
        """One #include "target" in file rel (line n) of folder (None: tests/ or bench/)."""
        nonlocal bad
        first = target.split("/", 1)[0]
        if "/" not in target:
            if target in headers and not beside:
                print(f"{rel}:{n}: includes \"{target}\" by its bare name: write \"{headers_path[target]}\"")
                bad += 1
            return
        if first not in RANK:
            return
        if not os.path.exists(os.path.join(root, target)):
            print(f"{rel}:{n}: includes \"{target}\", which is not in the source tree")
            bad += 1
            return
        if folder is not None and not allowed(folder, first):
            print(f"{rel}:{n}: {folder}/ includes {target}, a layer {'above' if RANK[first] > RANK[folder] else 'beside'} it")
            bad += 1
        if target.endswith("-internal.h") and folder is not None and os.path.dirname(target) != os.path.dirname(rel):
            print(f"{rel}:{n}: includes {target}, private to {os.path.dirname(target)}/")
            bad += 1

    def scan_includes(path, rel, folder):
        for n, line in enumerate(open(path, errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                target = m.group(1)
                beside = os.path.exists(os.path.join(os.path.dirname(path), target))
                check_include(rel, n, folder, target, beside and folder is None)

    for top in ("tests", "bench"):
        for dirpath, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [d for d in dirs if d != "fixtures"]
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    path = os.path.join(dirpath, f)
                    scan_includes(path, os.path.relpath(path, root), None)
    for folder in RANK:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if f.endswith((".c", ".h")):
                    scan_includes(path, rel, folder)
                elif f == "CMakeLists.txt" or f.endswith(".cmake"):
                    text = open(path).read()
                    for m in re.finditer(r"target_link_libraries\(([^)]*)\)", text):
                        n = text[: m.start()].count("\n") + 1
                        for word in m.group(1).split()[1:]:
                            dst = libs.get(word)
                            if dst is not None and not allowed(folder, dst):
                                print(f"{rel}:{n}: {folder}/ links {word} of {dst}/, a layer {'above' if RANK[dst] > RANK[folder] else 'beside'} it")
                                bad += 1
                    for m in re.finditer(r"\$\{(?:CMAKE|PROJECT)_SOURCE_DIR\}/(\w+)/", text):
                        dst = m.group(1)
                        if dst in RANK and not allowed(folder, dst):
                            n = text[: m.start()].count("\n") + 1
                            print(f"{rel}:{n}: {folder}/ builds or includes from {dst}/, a layer above or beside it")
                            bad += 1
    print(f"{len(headers)} headers, {len(libs)} libraries in {len(RANK)} folders: {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
