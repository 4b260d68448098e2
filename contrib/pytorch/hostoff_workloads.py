"""The recorded benchmark set: real training steps of plain torch.nn models, recorded without a
GPU by hostoff_record.py, in both views (one buffer per tensor storage; caching-allocator
segments).

    python3 contrib/pytorch/hostoff_record.py --list
    python3 contrib/pytorch/hostoff_record.py WORKLOAD [--steps 8] [--optimizer eager|foreach]
                                              -o PREFIX          (PREFIX.tensor.jsonl.gz, PREFIX.segment.jsonl.gz)

Each step: the batch copied in (host to device), forward, loss, backward, AdamW, the gradients
dropped (zero_grad(set_to_none=True)), the loss read back (.item(): a copy and a sync). No step
markers are written; the header's "recorder" object carries "step_lines" and per-step figures.
"""

import argparse
import json
import os
import sys
import time

import torch

import hostoff_models as hm
import hostoff_record as hr

# name: (what, model factory, input factory, default optimizer form)
WORKLOADS = {
    "gpt2-1k": ("GPT-2 class (GPT-2 XL width): 32 layers, d 1600, 25 heads, vocab 50304; "
                "16 x 1024 tokens",
                lambda: hm.GPT(32, 1600, 25, 50304, 1024), ("tokens", 16, 1024, 50304), "eager"),
    "llama-4k": ("Llama class (3B): 28 layers, d 3072, 24 heads / 8 kv, SwiGLU 8192, vocab 128256; "
                 "2 x 4096 tokens",
                 lambda: hm.Llama(28, 3072, 24, 8, 8192, 128256), ("tokens", 2, 4096, 128256),
                 "foreach"),
    "llama-32k": ("Llama class (1.5B), long context: 16 layers, d 2048, 16 heads / 8 kv, SwiGLU "
                  "8192, vocab 128256, activation checkpointing per layer; 1 x 32768 tokens",
                  lambda: hm.Llama(16, 2048, 16, 8, 8192, 128256, ckpt=True),
                  ("tokens", 1, 32768, 128256), "eager"),
    "moe-4k": ("Mixtral-class MoE: 10 layers, d 2048, 16 heads / 8 kv, 8 SwiGLU experts of 5632, "
               "top 2, vocab 32000; 4 x 4096 tokens",
               lambda: hm.Llama(10, 2048, 16, 8, 5632, 32000, experts=8, topk=2),
               ("tokens", 4, 4096, 32000), "foreach"),
    "resnet50": ("ResNet-50: bottlenecks (3, 4, 6, 3), BatchNorm; 512 images of 224 x 224",
                 lambda: hm.ResNet(), ("images", 512, 224, 1000), "eager"),
    # Small ones for tests and quick looks.
    "tiny-gpt": ("GPT class, 2 layers, d 64, 4 heads, vocab 256; 2 x 32 tokens",
                 lambda: hm.GPT(2, 64, 4, 256, 32), ("tokens", 2, 32, 256), "eager"),
    "tiny-moe": ("MoE, 2 layers, d 64, 4 heads / 2 kv, 4 experts of 96, top 2; 2 x 32 tokens",
                 lambda: hm.Llama(2, 64, 4, 2, 96, 256, experts=4, topk=2),
                 ("tokens", 2, 32, 256), "foreach"),
}


def make_batch(spec):
    """A batch built on the host and copied to the device, as a data loader's would be."""
    kind, a, b, c = spec
    if kind == "tokens":
        x = torch.zeros(a, b, dtype=torch.long)
        y = torch.zeros(a, b, dtype=torch.long)
    else:
        x = torch.empty(a, 3, b, b)
        y = torch.zeros(a, dtype=torch.long)
    return x.to("meta", non_blocking=True), y.to("meta", non_blocking=True)


def record(name, steps=8, optimizer=None, recorder=None):
    """Runs `steps` training steps of a workload under a Recorder; returns it."""
    what, make_model, spec, default_opt = WORKLOADS[name]
    optimizer = optimizer or default_opt
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            foreach=(optimizer == "foreach"))
    rec = recorder or hr.Recorder()
    with rec:
        rec.adopt(model)
        for _ in range(steps):
            x, y = make_batch(spec)
            loss = model(x, y)
            loss.backward()
            del x, y
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            del loss
            rec.step()
    rec.workload = {"workload": name, "what": what, "optimizer": optimizer, "steps": steps,
                    "params": sum(p.numel() for p in model.parameters())}
    return rec


def table_row(summary):
    """Figures of the steady state (the steps after the first): peak, launches, allocations,
    buffers used and their sizes, per step."""
    steady = summary["per_step"][1:] or summary["per_step"]
    n = len(steady)
    mean = {k: sum(s[k] for s in steady) / n for k in steady[0]}
    return {"peak_gb": summary["peak_bytes"] / 1e9, "launches": mean["launches"],
            "allocs": mean["allocs"], "buffers": mean["buffers_used"],
            "buffers_4mb": mean["buffers_4mb"],
            "min_bytes": min(s["min_bytes"] for s in steady),
            "max_bytes": max(s["max_bytes"] for s in steady),
            "device_ms": mean["device_ns"] / 1e6}


def main(argv):
    ap = argparse.ArgumentParser(description="Record a benchmark workload as hostoff traces.")
    ap.add_argument("workload", nargs="?", choices=sorted(WORKLOADS))
    ap.add_argument("--list", action="store_true", help="list the workloads")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--optimizer", choices=("eager", "foreach"),
                    help="AdamW one parameter at a time (eager) or multi-tensor (foreach); "
                         "default: the workload's")
    ap.add_argument("--view", choices=("tensor", "segment", "both"), default="both")
    ap.add_argument("-o", "--out", help="output prefix: PREFIX.VIEW.jsonl.gz (.jsonl with --plain)")
    ap.add_argument("--plain", action="store_true", help="write uncompressed .jsonl")
    args = ap.parse_args(argv)
    if args.list or not args.workload:
        for k, (what, _, _, opt) in WORKLOADS.items():
            print(f"{k:12} {what} (AdamW {opt})")
        return 0
    if not args.out:
        ap.error("-o PREFIX is required")
    t0 = time.monotonic()
    rec = record(args.workload, args.steps, args.optimizer)
    elapsed = time.monotonic() - t0
    views = ("tensor", "segment") if args.view == "both" else (args.view,)
    for view in views:
        path = f"{args.out}.{view}.jsonl" + ("" if args.plain else ".gz")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        header = rec.write(path, view=view, meta=rec.workload)
        row = table_row({"per_step": header["recorder"]["per_step"],
                         "peak_bytes": header["recorder"]["peak_bytes"]})
        print(json.dumps({"file": path, "view": view, **rec.workload,
                          "record_s": round(elapsed, 1), **{k: round(v, 3) if isinstance(v, float)
                                                            else v for k, v in row.items()}}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
