#!/usr/bin/env python3
"""The recorded workloads (tests/workloads/*.jsonl.gz): their figures, and a baseline replay.

    python3 tools/bench_workloads.py [BUILD_DIR] [--dir DIR] [--budget 70%] [--link pcie5]
                                     [--policy lookahead --policy lru] [--only NAME]
                                     [--no-replay] [--check-determinism] [--markdown]

For each recording (one PyTorch training job recorded by contrib/pytorch/hostoff_record.py, in
the per-tensor or the caching-allocator segment view, 8 steps, no step markers), prints the
figures its header carries for the steady steps (2 to 8): peak bytes live, launches, allocations
and buffers used per step (those of at least 4 MB apart), their size range, the kernels' device
time. Then it replays the trace (`hostoff replay --json`, decompressed into a temporary
directory) without a budget and at the budget under each policy, and prints the mean step (the
replay's time over the 8 steps: the traces carry no markers), that step over the unconstrained
one, the bytes moved each way per step, on-demand restores per step, and the physical limit of a
step under the budget, max(T, E/d2h, E/h2d, 2E/duplex) with E = peak - budget and T the
unconstrained step (docs/policy-benchmark.md). --check-determinism replays each budgeted run a
second time and says whether the figures repeat exactly. Virtual time: the same inputs give the
same table anywhere. A benchmark prints figures; it asserts nothing.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LINK_GBPS = {"pcie5": (55, 55, 88), "c2c": (345, 345, 690)}  # as hostoff replay --link sets


def header_of(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.loads(f.readline())


def steady(rec):
    per = rec["per_step"][1:] or rec["per_step"]
    n = len(per)
    return {
        "launches": sum(s["launches"] for s in per) / n,
        "allocs": sum(s["allocs"] for s in per) / n,
        "buffers": sum(s["buffers_used"] for s in per) / n,
        "buffers_4mb": sum(s["buffers_4mb"] for s in per) / n,
        "min_bytes": min(s["min_bytes"] for s in per),
        "max_bytes": max(s["max_bytes"] for s in per),
        "device_ms": sum(s["device_ns"] for s in per) / n / 1e6,
    }


def replay(hostoff, trace, budget, policy, link):
    cmd = [hostoff, "replay", trace, "--budget", budget, "--link", link, "--json"]
    if policy:
        cmd += ["--policy", policy]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": " / ".join(out.stderr.strip().splitlines()[-2:]) or "failed"}
    return json.loads(out.stdout)


def size(b):
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= div:
            return f"{b / div:.3g} {unit}"
    return f"{b} B"


def limit_ns(t_ns, peak, budget, link):
    h2d, d2h, duplex = (g * 1e9 for g in LINK_GBPS[link])
    e = max(0, peak - budget)
    return max(t_ns, e / d2h * 1e9, e / h2d * 1e9, 2 * e / duplex * 1e9)


def table(rows, head, markdown):
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)] if rows else []
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--dir", default=os.path.join(ROOT, "tests", "workloads"))
    ap.add_argument("--budget", default="70%")
    ap.add_argument("--link", default="pcie5", choices=sorted(LINK_GBPS))
    ap.add_argument("--policy", action="append", choices=("lookahead", "lru", "oracle"))
    ap.add_argument("--only", action="append", help="recordings whose name contains this")
    ap.add_argument("--no-replay", action="store_true", help="the recordings' figures only")
    ap.add_argument("--check-determinism", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    policies = args.policy or ["lookahead", "lru"]
    hostoff = os.path.join(args.build, "tools", "hostoff")
    if not args.no_replay and not os.access(hostoff, os.X_OK):
        print(f"bench_workloads: {hostoff} not found: build first (ninja -C {args.build})",
              file=sys.stderr)
        return 2
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".jsonl.gz"))
    if args.only:
        files = [f for f in files if any(o in f for o in args.only)]
    if not files:
        print(f"bench_workloads: no recordings (*.jsonl.gz) in {args.dir}", file=sys.stderr)
        return 2

    fig_rows, rep_rows, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="hostoff-workloads-") as tmp:
        for f in files:
            src = os.path.join(args.dir, f)
            h = header_of(src)
            rec = h["recorder"]
            s = steady(rec)
            name = f[:-len(".jsonl.gz")]
            fig_rows.append((name, rec.get("optimizer", ""), f"{rec['peak_bytes'] / 1e9:.1f}",
                             f"{s['launches']:.0f}", f"{s['allocs']:.0f}", f"{s['buffers']:.0f}",
                             f"{s['buffers_4mb']:.0f}",
                             f"{size(s['min_bytes'])} - {size(s['max_bytes'])}",
                             f"{s['device_ms']:.1f}"))
            if args.no_replay:
                continue
            trace = os.path.join(tmp, f[:-3])
            with gzip.open(src, "rb") as a, open(trace, "wb") as b:
                shutil.copyfileobj(a, b)
            steps = rec["steps"]
            base = replay(hostoff, trace, "none", None, args.link)
            if "error" in base:
                # The simulator returns a stream-ordered free's memory only when the device
                # reaches the free, so a per-tensor trace whose host runs far ahead can exhaust
                # the simulated device unconstrained. The step is then taken as the kernels'
                # time (the host runs ahead of the device in every recording).
                notes.append(f"{name}: unconstrained replay failed ({base['error']}); "
                             "unconstrained step = the kernels' device time per step")
                t0 = s["device_ms"] * 1e6
                rep_rows.append((name, "unconstrained*", f"{t0 / 1e6:.1f}", "1.00x", "", "", "",
                                 "", "", "", ""))
            else:
                t0 = base["replay_ns"] / steps
                rep_rows.append((name, "unconstrained", f"{t0 / 1e6:.1f}", "1.00x", "", "", "",
                                 "", "", f"{base['illegal_accesses']}/{base['hazards']}", ""))
            for policy in policies:
                r = replay(hostoff, trace, args.budget, policy, args.link)
                if "error" in r:
                    rep_rows.append((name, policy, "failed") + ("",) * 8)
                    notes.append(f"{name} {policy}: {r['error']}")
                    continue
                t = r["replay_ns"] / steps
                lim = limit_ns(t0, r["trace_peak_bytes"], r["budget_bytes"], args.link)
                same = ""
                if args.check_determinism:
                    again = replay(hostoff, trace, args.budget, policy, args.link)
                    same = "yes" if again == r else (
                        f"no ({again.get('replay_ns', 0) / steps / 1e6:.1f} ms)")
                rep_rows.append((name, policy, f"{t / 1e6:.1f}", f"{t / t0:.2f}x",
                                 f"{lim / 1e6:.1f}", f"{t / lim:.2f}x",
                                 f"{r['bytes_to_host'] / steps / 1e9:.1f}",
                                 f"{r['bytes_to_device'] / steps / 1e9:.1f}",
                                 f"{r['demand_restores'] / steps:.0f}",
                                 f"{r['illegal_accesses']}/{r['hazards']}", same))
            os.unlink(trace)
    table(fig_rows, ("recording", "AdamW", "peak GB", "launches/step", "allocs/step",
                     "buffers/step", "of them >= 4 MB", "sizes", "device ms/step"), args.markdown)
    if rep_rows:
        print()
        print(f"replays at {args.budget} of the peak on {args.link} (mean step over the 8 steps)")
        table(rep_rows, ("recording", "policy", "ms/step", "/ unconstrained", "limit ms",
                         "/ limit", "GB to host/step", "GB to device/step", "demand restores/step",
                         "illegal/hazards", "repeats"), args.markdown)
    for n in notes:
        print("* " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
