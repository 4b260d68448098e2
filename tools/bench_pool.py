#!/usr/bin/env python3
"""The host pool benchmark: pinning calls and step time of one build against another.

    python3 tools/bench_pool.py BASELINE_LIB [BUILD_DIR] [--only NAME ...] [--policy lru ...]
                                [--budget 70% ...] [--link pcie5] [--jobs N] [--json PATH]

Replays workloads through BASELINE_LIB (an older libhostoff.so) and through BUILD_DIR's library
(default build), both on BUILD_DIR's simulated driver under its honest per-call costs, exactly as
tools/bench_policy.py does (`hostoff replay TRACE --budget B --link L --json --policy P`), with
`--report` kept to read the library's own counts. Workloads: the generated presets of
`hostoff gen-trace` (deepseek and gpt at their defaults, 8 steps) and two recordings of
tests/workloads (llama-32k.tensor and moe-4k.tensor), or those whose name contains an --only.

Per row, before -> after:
- step s: the replay's whole virtual time over its steps;
- create+release /step: cuMemCreate + cuMemRelease calls of both locations per step, every step
  counted (bench_policy's calls column, without its cuMemHostAlloc);
- pins+unpins /step: the host slots the engine pinned and unpinned (the report's
  counts.host_pins + counts.host_unpins; 0 in a library that has no such count: "n/a");
- pinned/held: the report's bytes.peak_host over bytes.peak_host_held (the pool's hygiene target
  is at most 1.05);
- device c+r /step (ms): after, the device-located creates and releases per step and what the
  cost table charges for them (30 us and 23 us each), the bound of what pooling device memory by
  size class could save.
A benchmark prints figures; it asserts nothing.
"""
import argparse
import concurrent.futures
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = ("deepseek", "gpt")
RECORDINGS = ("llama-32k.tensor", "moe-4k.tensor")


def prepare(hostoff, only, tmp):
    """[(name, trace path, steps)]"""
    work = []
    for p in PRESETS:
        name = "synthetic-" + p
        if only and not any(o in name for o in only):
            continue
        path = os.path.join(tmp, name + ".jsonl")
        subprocess.run([hostoff, "gen-trace", p, "--steps", "8", "-o", path], check=True,
                       capture_output=True)
        work.append((name, path, 8))
    for name in RECORDINGS:
        if only and not any(o in name for o in only):
            continue
        path = os.path.join(tmp, name + ".jsonl")
        with gzip.open(os.path.join(ROOT, "tests", "workloads", name + ".jsonl.gz"), "rb") as a, \
                open(path, "wb") as b:
            shutil.copyfileobj(a, b)
        with open(path, encoding="utf-8") as h:
            steps = json.loads(h.readline())["recorder"]["steps"]
        work.append((name, path, steps))
    return work


def replay(hostoff, lib, trace, budget, policy, link, report):
    cmd = [hostoff, "replay", trace, "--budget", budget, "--link", link, "--json", "--policy",
           policy, "--report", report]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False,
                         env=dict(os.environ, HOSTOFF_LIB=lib))
    if out.returncode != 0:
        return {"error": " / ".join(out.stderr.strip().splitlines()[-2:]) or "failed"}
    r = json.loads(out.stdout)
    with open(report, encoding="utf-8") as f:
        rep = json.load(f)
    r["host_pins"] = rep["counts"].get("host_pins")
    r["host_unpins"] = rep["counts"].get("host_unpins")
    r["peak_host"] = rep["bytes"]["peak_host"]
    r["peak_host_held"] = rep["bytes"]["peak_host_held"]
    return r


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("baseline", help="the libhostoff.so to compare with")
    ap.add_argument("build", nargs="?", default="build", help="the build directory (default build)")
    ap.add_argument("--only", action="append", help="workloads whose name contains this")
    ap.add_argument("--policy", action="append", help="policies (default lru, lookahead)")
    ap.add_argument("--budget", action="append", help="budgets (default 70%%)")
    ap.add_argument("--link", default="pcie5", help="the link (default pcie5)")
    ap.add_argument("--jobs", type=int, default=2, help="replays run at once (default 2)")
    ap.add_argument("--json", help="also write every replay's figures to this file")
    args = ap.parse_args(argv)
    hostoff = os.path.join(args.build, "tools", "hostoff")
    libs = {"before": os.path.abspath(args.baseline),
            "after": os.path.abspath(os.path.join(args.build, "interpose", "libhostoff.so"))}
    for p in (hostoff, *libs.values()):
        if not os.path.exists(p):
            print(f"bench_pool: {p} not found", file=sys.stderr)
            return 2
    policies = args.policy or ["lru", "lookahead"]
    budgets = args.budget or ["70%"]
    with tempfile.TemporaryDirectory(prefix="hostoff-pool-") as tmp:
        work = prepare(hostoff, args.only, tmp)
        jobs = [(w, b, p, lib) for w, _, _ in work for b in budgets for p in policies
                for lib in libs]
        paths = {w: path for w, path, _ in work}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
            futs = {j: ex.submit(replay, hostoff, libs[j[3]], paths[j[0]], j[1], j[2], args.link,
                                 os.path.join(tmp, f"report-{i}.json"))
                    for i, j in enumerate(jobs)}
            res = {j: f.result() for j, f in futs.items()}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{**r, "_job": list(j)} for j, r in res.items()], f, indent=1)
    print("| workload | budget | policy | step s | create+release /step | pins+unpins /step "
          "| pinned/held | device c+r /step (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for w, _, steps in work:
        for b in budgets:
            for p in policies:
                rs = [res[(w, b, p, lib)] for lib in libs]
                errs = [r["error"] for r in rs if "error" in r]
                if errs:
                    print(f"| {w} | {b} | {p} | failed: {'; '.join(errs)} |")
                    continue
                step = [r["replay_ns"] / steps / 1e9 for r in rs]
                cr = [(r["driver_calls"]["cuMemCreate"] + r["driver_calls"]["cuMemRelease"])
                      / steps for r in rs]
                pins = [f"{(r['host_pins'] + r['host_unpins']) / steps:.0f}"
                        if r["host_pins"] is not None else "n/a" for r in rs]
                ratio = [r["peak_host"] / r["peak_host_held"] if r["peak_host_held"] else 0
                         for r in rs]
                a = rs[1]
                dc = (a["driver_calls"]["cuMemCreate"] - a["host_pins"]) / steps
                dr = (a["driver_calls"]["cuMemRelease"] - a["host_unpins"]) / steps
                print(f"| {w} | {b} | {p} | {step[0]:.2f} -> {step[1]:.2f} "
                      f"| {cr[0]:.0f} -> {cr[1]:.0f} | {pins[0]} -> {pins[1]} "
                      f"| {ratio[0]:.3f} -> {ratio[1]:.3f} "
                      f"| {dc + dr:.0f} ({(dc * 30 + dr * 23) / 1000:.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
