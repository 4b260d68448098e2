#!/usr/bin/env python3
"""The GPU kit's rehearsal: tests/gpu/run --rehearse runs the GPU run's own logic here, with
stand-ins that misbehave the way a first run on new hardware can, so the kit is known to end in
time with every other figure kept:

  nvidia-smi      answers the query (an H200, driver 580); plain `nvidia-smi` hangs
  trainers        the torch and jax cases, fast; each writes its result after every step with the
                  real trainers' own code (torch_gpt.write_result, past_stop), and a
                  HOSTOFF_REPORT as the library would at exit. Misbehaving on purpose:
                    torch caching/library     fails at its 4th step (defect 1: the stage goes on)
                    torch hostoff/budget -50% moves nothing (defect 3: must FAIL, not pass)
                    torch hostoff/budget -30% hangs after 2 steps, deaf to SIGTERM
                    jax (every case)          the first step compiles slowly unless the run's
                                              compilation cache holds the program (defect 2)
                    jax/budget -50%           hangs while compiling
                    XLA_FLAGS                 the first flag set is unknown (the retry)
  integrity       the control run hangs, deaf to SIGTERM (defect 5: the library run still gets
                  its share)
  vmmfacts        its first cuMemHostAlloc fails (SIMCUDA_FAIL), so the bw section dies mid-way
                  (defect 4: the figures before and after are kept)
The C programs run on the simulator at the rehearsal's sizes. sim_tests.py (Rehearsal) runs it
and checks the outcome. Run by hand:

    python3 tests/gpu/run --rehearse --simcuda-dir BUILD/tests/simcuda --deadline 40 OUTDIR
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEP_S = 0.03  # a fake training step
COMPILE_S = 1.5  # a fake first step without the compilation cache
CACHED_S = 0.1  # a fake first step with it


class Rehearsal:
    """The runner's hooks (run's Kit calls install, env and command)."""

    def __init__(self, kit):
        self.kit = kit
        self.bin = None

    def install(self):
        self.bin = self.kit.work / "fakebin"
        self.bin.mkdir(exist_ok=True)
        smi = self.bin / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'rehearse.py'} smi \"$@\"\n")
        smi.chmod(0o755)
        fake = [sys.executable, HERE / "rehearse.py", "train"]
        self.kit.trainer = {"torch": fake, "jax": fake}

    def env(self, env):
        env["PATH"] = f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}"

    def command(self, name, cmd, env):
        """The command a rehearsal runs instead of cmd (and its environment)."""
        if name == "integrity-control":
            return [sys.executable, str(HERE / "rehearse.py"), "hang"], env
        if name == "vmmfacts":
            env = dict(env, SIMCUDA_FAIL="cuMemHostAlloc:1")
        if name.startswith(("torch-", "jax-")) and env.pop("LD_PRELOAD", None):
            # The fake trainer plays the library too: the real one preloaded into it would
            # write an empty report over the fake's at exit.
            env = dict(env, KIT_FAKE_LIBRARY="1")
        return cmd, env


# --------------------------------------------------------------------------- stand-ins


def deaf_sleep():
    """Hangs and ignores SIGTERM: only the runner's SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


def smi(args):
    if any(a.startswith("--query-gpu") for a in args):
        print("NVIDIA H200 (rehearsal), 580.95.05, 143771 MiB, 0 MiB, 1980 MHz, 3201 MHz, 31")
        return 0
    time.sleep(3600)  # plain nvidia-smi hanging in a sandbox: killed at its share
    return 0


def fake_report(out, budget, moved):
    path = os.environ.get("HOSTOFF_REPORT")
    if not path or not os.environ.get("KIT_FAKE_LIBRARY"):
        return
    backend = os.environ.get("HOSTOFF_BACKEND", "auto")
    if backend == "auto":
        backend = "vmm"
        print("hostoff: backend vmm (host-located VMM handles supported)", flush=True)
    peak = budget if budget else 12 << 30
    rep = {"hostoff_report": 1, "mode": "offload", "backend": backend,
           "counts": {"evictions": 5 if moved else 0, "restores": 4 if moved else 0,
                      "demand_restores": 1 if moved else 0, "prefetches": 0, "allocs": 9,
                      "launches": 99},
           "bytes": {"to_host": (3 << 30) if moved else 0, "to_device": (2 << 30) if moved else 0,
                     "peak_device": peak, "peak_host": 1 << 30},
           "time_ns": {"stall": 150000000}, "buffers": [{"bytes": 4096}]}
    with open(path.replace("%p", str(os.getpid())), "w", encoding="utf-8") as f:
        json.dump(rep, f)


def train(args):
    import argparse

    sys.path.insert(0, str(HERE))
    from torch_gpt import past_stop, write_result  # the real trainers' rule and writer

    ap = argparse.ArgumentParser()
    for opt in ("--out", "--allocator", "--adapter", "--stop-at", "--steps", "--batch",
                "--cache-dir"):
        ap.add_argument(opt)
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--remat", action="store_true")
    a = ap.parse_args(args)
    a.stop_at = float(a.stop_at or 0)
    a.warmup = 2
    steps = int(a.steps or 8)
    tag = Path(a.out).stem.replace("jax-jax-", "jax-")  # torch-caching-library, jax-budget-50
    jax = tag.startswith("jax-")
    flags = os.environ.get("XLA_FLAGS", "")
    if jax and "xla_gpu_deterministic_ops" in flags:
        print("Unknown flags in XLA_FLAGS: " + flags)
        return 1
    budget_env = os.environ.get("HOSTOFF_BUDGET")
    budget = int(budget_env[:-1]) << 20 if budget_env else None
    result = {"ok": False, "config": vars(a), "losses": [], "losses_hex": [], "step_s": [],
              "median_step_s": None, "app_peak_bytes": 10 << 30, "nvml_peak_bytes": 11 << 30,
              "xla_flags": flags, "allocator": a.allocator, "fake": tag}
    first = 0.0
    if jax:
        marker = Path(a.cache_dir or ".") / ("remat" if a.remat else "plain")
        first = CACHED_S if marker.exists() else COMPILE_S
        if tag == "jax-budget-50":
            time.sleep(3600)  # a compilation that never ends
        marker.touch()
    try:
        for i in range(steps):
            if past_stop(a, result["step_s"]):
                break
            if tag == "torch-caching-library" and i == 3:
                raise RuntimeError("CUDA error: an illegal memory access was encountered "
                                   "(rehearsed)")
            if tag == "torch-hostoff-budget-30" and i == 2:
                deaf_sleep()
            dt = first if i == 0 and jax else STEP_S
            time.sleep(dt)
            loss = 10.5 - 0.25 * i
            result["losses"].append(loss)
            result["losses_hex"].append(loss.hex())
            result["step_s"].append(dt)
            write_result(a, result)
        result["ok"] = True
    except RuntimeError as e:
        result["error"] = f"RuntimeError: {e}"
    write_result(a, result)
    fake_report(a.out, budget, moved=tag != "torch-hostoff-budget-50")
    return 0 if result["ok"] else 1


def main(argv):
    what, rest = (argv[0], argv[1:]) if argv else ("", [])
    if what == "smi":
        return smi(rest)
    if what == "train":
        return train(rest)
    if what == "hang":
        deaf_sleep()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
