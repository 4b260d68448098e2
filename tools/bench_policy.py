#!/usr/bin/env python3
"""The policy benchmark: one table of how close each policy gets to an unconstrained GPU.

    python3 tools/bench_policy.py [BUILD_DIR] [--steps N] [--markdown] [--preset NAME ...]

Four workloads of `hostoff gen-trace`, each with an unconstrained peak over 100 GB:
  gpt-128k       gpt, 8 layers of width 4096, one 131072-token sequence a step (long context)
  deepseek-128k  deepseek, 4 layers with 64 heads, one 131072-token sequence a step
  gpt            gpt at its defaults (24 layers of width 4096, 4 x 4096 tokens)
  deepseek       deepseek at its defaults (12 layers, 2 x 4096 tokens)
On the pcie5 and c2c links, at budgets of 70% and 50% of the unconstrained peak, each trace is
replayed through the real libhostoff.so on the sparse simulator (`hostoff replay --json`) under
lru, lookahead and oracle, and each row gives: the steady step time over the unconstrained one
(and lookahead's over oracle's), peak device bytes, bytes moved each way per step, the device
time lost per step (steady step minus the unconstrained step: what the stalls cost), the time
the host waited per step (hidden while the device has queued work), and beside them the step
time of full rematerialisation, estimated as the unconstrained step plus one more forward pass
(a forward pass is taken as a third of a training step: backward costs twice the forward), and
the driver calls the moves paid for per step (creates, releases and pinning allocations; maps,
unmaps and set-access). --baseline-lib OLD/libhostoff.so shows an older build's step ratio and
calls beside each row.
Everything is virtual time: the same inputs give the same table on any machine. A benchmark
prints figures; it is not a test and asserts nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = {
    "gpt-128k": ["gpt", "--layers", "8", "--hidden", "4096", "--heads", "32", "--seq", "131072",
                 "--micro-batch", "1"],
    "deepseek-128k": ["deepseek", "--layers", "4", "--heads", "64", "--seq", "131072",
                      "--micro-batch", "1"],
    "gpt": ["gpt"],
    "deepseek": ["deepseek"],
}
LINKS = ("pcie5", "c2c")
BUDGETS = ("70%", "50%")
POLICIES = ("lru", "lookahead", "oracle")


def replay(hostoff, trace, budget, policy, link, lib=None):
    cmd = [hostoff, "replay", trace, "--budget", budget, "--link", link, "--json"]
    if budget != "none":
        cmd += ["--policy", policy]
    env = dict(os.environ, HOSTOFF_LIB=lib) if lib else None
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout)


def gb(x):
    return x / 1e9


def calls_per_step(r, steps):
    """(creates + releases + pinning allocations, maps + unmaps + set-access) per step, every step
    counted; None when the replay did not report them."""
    c = r.get("driver_calls")
    if not c:
        return None
    return ((c["cuMemCreate"] + c["cuMemRelease"] + c["cuMemHostAlloc"]) / steps,
            (c["cuMemMap"] + c["cuMemUnmap"] + c["cuMemSetAccess"]) / steps)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="the build directory (default build)")
    ap.add_argument("--steps", type=int, default=8, help="training steps per trace (default 8)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--preset", action="append", choices=sorted(PRESETS),
                    help="only these workloads (default: all four)")
    ap.add_argument("--baseline-lib", metavar="LIBHOSTOFF",
                    help="also replay each row through this libhostoff.so (an older build) and "
                         "show its figures beside this build's, as 'baseline -> this'")
    args = ap.parse_args(argv)
    hostoff = os.path.join(args.build, "tools", "hostoff")
    if not os.access(hostoff, os.X_OK):
        print(f"bench_policy: {hostoff} not found: build first (ninja -C {args.build})",
              file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.preset or list(PRESETS):
            trace = os.path.join(tmp, preset + ".jsonl")
            subprocess.run([hostoff, "gen-trace", *PRESETS[preset], "--steps", str(args.steps),
                            "-o", trace], check=True, capture_output=True)
            for link in LINKS:
                base = replay(hostoff, trace, "none", None, link)
                if "error" in base:
                    print(f"bench_policy: {preset} unconstrained: {base['error']}", file=sys.stderr)
                    return 1
                step0 = base["steady_step_ns"]
                remat = step0 * 4 / 3
                for budget in BUDGETS:
                    ratios = {}
                    for policy in POLICIES:
                        r = replay(hostoff, trace, budget, policy, link)
                        steps = max(1, r.get("steps", args.steps))
                        ratio = r["steady_step_ns"] / step0 if "error" not in r else None
                        ratios[policy] = ratio
                        base_ratio, base_calls = None, None
                        if args.baseline_lib:
                            b = replay(hostoff, trace, budget, policy, link, args.baseline_lib)
                            if "error" not in b:
                                base_ratio = b["steady_step_ns"] / step0
                                base_calls = calls_per_step(b, steps)
                        rows.append({
                            "base_ratio": base_ratio, "base_calls": base_calls,
                            "calls": calls_per_step(r, steps),
                            "preset": preset, "link": link, "budget": budget, "policy": policy,
                            "unconstrained_ms": step0 / 1e6, "remat_ratio": remat / step0,
                            "error": r.get("error"), "ratio": ratio,
                            "vs_oracle": None,
                            "peak_gb": gb(r.get("peak_device_bytes", 0)),
                            "moved_gb": gb(r.get("bytes_to_host", 0)) / steps,
                            "lost_ms": (r.get("steady_step_ns", step0) - step0) / 1e6,
                            "wait_ms": r.get("stall_ns", 0) / 1e6 / steps,
                        })
                    la, orc = ratios.get("lookahead"), ratios.get("oracle")
                    if la is not None and orc:
                        for row in rows[-len(POLICIES):]:
                            if row["policy"] == "lookahead":
                                row["vs_oracle"] = la / orc
    head = ("workload", "link", "budget", "policy", "step / unconstrained", "lookahead / oracle",
            "peak GB", "moved GB/step each way", "device ms lost/step", "host waits ms/step",
            "create+release /step", "map+unmap+access /step", "remat (est.)", "unconstrained ms")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(f"{h:>10}" for h in head))
    for r in rows:
        ratio = f"{r['ratio']:.3f}x" if r["ratio"] is not None else "failed: " + r["error"]
        vs = f"{r['vs_oracle']:.3f}x" if r["vs_oracle"] is not None else ""
        calls = [f"{c:.0f}" for c in r["calls"]] if r["calls"] else ["", ""]
        if args.baseline_lib:
            old = f"{r['base_ratio']:.3f}x" if r["base_ratio"] is not None else "failed"
            ratio = f"{old} -> {ratio}"
            olds = [f"{c:.0f}" for c in r["base_calls"]] if r["base_calls"] else ["?", "?"]
            calls = [f"{o} -> {n}" for o, n in zip(olds, calls)]
        cells = (r["preset"], r["link"], r["budget"], r["policy"], ratio, vs, f"{r['peak_gb']:.1f}",
                 f"{r['moved_gb']:.1f}", f"{r['lost_ms']:.0f}", f"{r['wait_ms']:.0f}", *calls,
                 f"{r['remat_ratio']:.2f}x", f"{r['unconstrained_ms']:.0f}")
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(f"{c:>10}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
