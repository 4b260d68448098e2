#!/usr/bin/env python3
"""Includes run one way: tools -> interpose -> src -> policy.

Every quoted #include in policy/, src/, interpose/ and tools/ is resolved the way the compiler
resolves it for that folder's target (the including file's folder first, then the folders on the
target's include path) and the file it lands on must belong to the same layer or one below. policy/
is also pure C: no CUDA header at all. Exit status 1 and one line per violation otherwise.
"""
import os
import re
import sys

LAYERS = ["policy", "src", "interpose", "tools"]  # lowest first
# What each layer's target has on its include path, besides the including file's own folder.
SEARCH = {
    "policy": ["policy"],
    "src": ["src", "policy"],
    "interpose": ["interpose", "src", "policy"],
    "tools": ["tools", "src", "policy"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CUDA = ("cuda.h", "cudaTypedefs.h", "cuda_runtime.h", "cuda_runtime_api.h")


def layer_of(root, path):
    rel = os.path.relpath(path, root).split(os.sep)
    return rel[0] if rel[0] in LAYERS else None


def check(root):
    problems = []
    for layer in LAYERS:
        top = os.path.join(root, layer)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".c", ".h", ".def", ".S")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, target = m.group(1), m.group(2)
                        where = f"{os.path.relpath(path, root)}:{lineno}"
                        if layer == "policy" and os.path.basename(target) in CUDA:
                            problems.append(f"{where}: policy/ includes CUDA ({target})")
                        if kind == "<":
                            continue
                        found = None
                        for d in [dirpath] + [os.path.join(root, s) for s in SEARCH[layer]]:
                            cand = os.path.normpath(os.path.join(d, target))
                            if os.path.isfile(cand):
                                found = cand
                                break
                        if found is None:
                            problems.append(f"{where}: \"{target}\" is not on {layer}/'s include "
                                            f"path ({', '.join(SEARCH[layer])})")
                            continue
                        to = layer_of(root, found)
                        if to is not None and LAYERS.index(to) > LAYERS.index(layer):
                            problems.append(f"{where}: {layer}/ includes {os.path.relpath(found, root)}"
                                            f" from {to}/, a layer above it")
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    problems = check(root)
    for p in problems:
        print(p)
    nfiles = sum(len(fs) for layer in LAYERS for _, _, fs in os.walk(os.path.join(root, layer)))
    print(f"layers: {nfiles} files checked, {len(problems)} upward or unresolved includes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
