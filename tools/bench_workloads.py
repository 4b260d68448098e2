#!/usr/bin/env python3
"""The recorded workloads (tests/workloads/*.jsonl.gz): the figures their headers carry.

    python3 tools/bench_workloads.py [--dir DIR] [--only NAME] [--markdown]

For each recording (one PyTorch training job recorded by contrib/pytorch/hostoff_record.py, in
the per-tensor or the caching-allocator segment view, 8 steps, no step markers), prints the
figures its header carries for the steady steps (2 to 8): peak bytes live, launches, allocations
and buffers used per step (those of at least 4 MB apart), their size range, the kernels' device
time. It replays nothing: the replays of every recording under every policy, against the
physical limit, are the policy benchmark's (tools/bench_policy.py, docs/policy-benchmark.md),
the one benchmark of the policies.
"""
import argparse
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


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


def size(b):
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= div:
            return f"{b / div:.3g} {unit}"
    return f"{b} B"


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
    ap.add_argument("--dir", default=os.path.join(ROOT, "tests", "workloads"))
    ap.add_argument("--only", action="append", help="recordings whose name contains this")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".jsonl.gz"))
    if args.only:
        files = [f for f in files if any(o in f for o in args.only)]
    if not files:
        print(f"bench_workloads: no recordings (*.jsonl.gz) in {args.dir}", file=sys.stderr)
        return 2
    rows = []
    for f in files:
        rec = header_of(os.path.join(args.dir, f))["recorder"]
        s = steady(rec)
        rows.append((f[:-len(".jsonl.gz")], rec.get("optimizer", ""),
                     f"{rec['peak_bytes'] / 1e9:.1f}", f"{s['launches']:.0f}",
                     f"{s['allocs']:.0f}", f"{s['buffers']:.0f}", f"{s['buffers_4mb']:.0f}",
                     f"{size(s['min_bytes'])} - {size(s['max_bytes'])}", f"{s['device_ms']:.1f}"))
    table(rows, ("recording", "AdamW", "peak GB", "launches/step", "allocs/step", "buffers/step",
                 "of them >= 4 MB", "sizes", "device ms/step"), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
