#!/usr/bin/env python3
"""Checks that the README's table of HOSTOFF_* variables agrees with src/options.def.

The option table is the single source; the README must list every option with the same default,
and nothing else. Exit 0 when they agree; otherwise one line per difference and exit 1."""
import re
import sys


def options(path):
    text = open(path).read()
    out = {}
    for m in re.finditer(r'HO_OPTION\(\s*(\w+),\s*"(HOSTOFF_\w+)",\s*\w+,\s*"([^"]*)"', text):
        out[m.group(2)] = m.group(3)
    return out


def readme_rows(path):
    rows = {}
    for line in open(path):
        m = re.match(r'\|\s*`(HOSTOFF_\w+)`\s*\|\s*([^|]*)\|', line)
        if m:
            default = m.group(2).strip().strip('`')
            rows[m.group(1)] = "" if default in ("unset", "") else default
    return rows


def main(argv):
    opts = options(argv[1])
    rows = readme_rows(argv[2])
    problems = []
    for name, default in sorted(opts.items()):
        if name not in rows:
            problems.append(f"{name} is in src/options.def but not in the README's table")
        elif rows[name] != default:
            problems.append(f"{name}: README says default {rows[name]!r}, options.def {default!r}")
    for name in sorted(set(rows) - set(opts)):
        problems.append(f"{name} is in the README's table but not in src/options.def")
    for p in problems:
        print(p)
    bad = {p.split()[0].rstrip(':') for p in problems}
    print(f"{len(set(opts) - bad)} passed, {len(bad)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
