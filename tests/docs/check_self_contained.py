#!/usr/bin/env python3
"""Tests are self-contained: nothing under tests/ or in a meson.build reads a file outside the
repository (../shared, /work/shared, a facts folder beside the clone). A fresh clone with nothing
beside it must pass every test; data the tests need lives in tests/data/.

usage: check_self_contained.py REPO_ROOT"""
import os
import re
import sys

OUTSIDE = re.compile(r"""(\.\./shared|/work/shared|'\.\.'\s*/\s*'shared')""")
SKIP_DIRS = {".git", "build", "data"}


def scanned(root):
    for top in ("tests", "tools", "src", "interpose", "policy", "contrib"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            for f in files:
                if f.endswith((".c", ".h", ".py", ".build", ".sh")) or f in ("dev", "run"):
                    yield os.path.join(d, f)
    yield os.path.join(root, "meson.build")


def main():
    root = sys.argv[1]
    me = os.path.realpath(__file__)
    bad = []
    for path in scanned(root):
        if os.path.realpath(path) == me:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if OUTSIDE.search(line):
                    bad.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
    if bad:
        print("files outside the repository are read (copy the data into tests/data/):")
        print("\n".join(bad))
        return 1
    print(f"self-contained: no test reads outside {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
