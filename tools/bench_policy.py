#!/usr/bin/env python3
"""The policy benchmark: one table of how close each policy gets to an unconstrained GPU.

    python3 tools/bench_policy.py [BUILD_DIR] [--steps N] [--markdown]

For the gpt and deepseek presets of `hostoff gen-trace` at their defaults (unconstrained peaks
over 100 GB), on the pcie5 and c2c links, at budgets of 70% and 50% of the unconstrained peak, it
replays each trace through the real libhostoff.so on the sparse simulator (`hostoff replay
--json`) under every available policy and prints, per row: the steady step time over the
unconstrained one, peak device bytes, bytes moved each way per step, stall time per step, and
beside them the step time of full rematerialisation, estimated as the unconstrained step plus one
more forward pass (a forward pass is taken as a third of a training step: backward costs twice
the forward). Everything is virtual time: the same inputs give the same table on any machine.

The `oracle` policy (the bound) is not available yet; its column is absent. A benchmark prints
figures; it is not a test and asserts nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = ("gpt", "deepseek")
LINKS = ("pcie5", "c2c")
BUDGETS = ("70%", "50%")
POLICIES = ("lru", "lookahead")


def replay(hostoff, trace, budget, policy, link):
    cmd = [hostoff, "replay", trace, "--budget", budget, "--link", link, "--json"]
    if budget != "none":
        cmd += ["--policy", policy]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout)


def gb(x):
    return x / 1e9


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="the build directory (default build)")
    ap.add_argument("--steps", type=int, default=8, help="training steps per trace (default 8)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args(argv)
    hostoff = os.path.join(args.build, "tools", "hostoff")
    if not os.access(hostoff, os.X_OK):
        print(f"bench_policy: {hostoff} not found: build first (ninja -C {args.build})",
              file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in PRESETS:
            trace = os.path.join(tmp, preset + ".jsonl")
            subprocess.run([hostoff, "gen-trace", preset, "--steps", str(args.steps), "-o", trace],
                           check=True, capture_output=True)
            for link in LINKS:
                base = replay(hostoff, trace, "none", None, link)
                if "error" in base:
                    print(f"bench_policy: {preset} unconstrained: {base['error']}", file=sys.stderr)
                    return 1
                step0 = base["steady_step_ns"]
                remat = step0 * 4 / 3
                for budget in BUDGETS:
                    for policy in POLICIES:
                        r = replay(hostoff, trace, budget, policy, link)
                        steps = max(1, r.get("steps", args.steps))
                        rows.append({
                            "preset": preset, "link": link, "budget": budget, "policy": policy,
                            "unconstrained_ms": step0 / 1e6, "remat_ratio": remat / step0,
                            "error": r.get("error"),
                            "ratio": r["steady_step_ns"] / step0 if "error" not in r else None,
                            "peak_gb": gb(r.get("peak_device_bytes", 0)),
                            "moved_gb": gb(r.get("bytes_to_host", 0)) / steps,
                            "stall_ms": r.get("stall_ns", 0) / 1e6 / steps,
                        })
    head = ("preset", "link", "budget", "policy", "step / unconstrained", "peak GB",
            "moved GB/step each way", "stall ms/step", "remat (est.)", "unconstrained ms")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(f"{h:>10}" for h in head))
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "failed: " + r["error"]
        cells = (r["preset"], r["link"], r["budget"], r["policy"], ratio, f"{r['peak_gb']:.1f}",
                 f"{r['moved_gb']:.1f}", f"{r['stall_ms']:.0f}", f"{r['remat_ratio']:.2f}x",
                 f"{r['unconstrained_ms']:.0f}")
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(f"{c:>10}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
