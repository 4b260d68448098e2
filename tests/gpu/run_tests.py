#!/usr/bin/env python3
"""The GPU kit's run script, tested without a GPU: its training stages with a fake trainer
(RunnerLogic), the cost file (CostFile), the whole script on the simulator (KitSim) and the
rehearsal of a GPU run with misbehaving stand-ins (Rehearsal: tests/gpu/rehearse.py).

Usage: run_tests.py CLASS [TEST ...]   (meson test --suite gpu runs each class)
The environment is sim_tests.py's (tests/gpu/meson.build sets it).
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import costfile  # noqa: E402
import sim_tests  # noqa: E402 - the environment, paths and helpers
from sim_tests import E, GPU_DIR, LIB, SANITIZER, SIMDIR, TIMEOUT, base_env, load  # noqa: E402

FAKE_TRAIN = r'''
import argparse, json, os, sys
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--allocator", default="caching")
ap.add_argument("--adapter"); ap.add_argument("--checkpoint", action="store_true")
ap.add_argument("--remat", action="store_true"); ap.add_argument("--stop-at")
ap.add_argument("--steps"); ap.add_argument("--batch"); ap.add_argument("--cache-dir")
a = ap.parse_args()
flags = os.environ.get("XLA_FLAGS", "")
if "xla_gpu_deterministic_ops" in flags:
    print("Unknown flags in XLA_FLAGS: " + flags); sys.exit(1)
budget = os.environ.get("HOSTOFF_BUDGET")
losses = [10.5, 10.25, 10.0, 9.75]
if budget and os.environ.get("FAKE_DIFFER"):
    losses[2] = 10.000001
r = {"ok": True, "losses": losses, "losses_hex": [x.hex() for x in losses],
     "step_s": [0.5, 0.1, 0.1, 0.1], "median_step_s": 0.2 if budget else 0.1,
     "app_peak_bytes": 10 << 30, "nvml_peak_bytes": 11 << 30, "env_budget": budget,
     "xla_flags": flags, "allocator": a.allocator,
     "backend_env": os.environ.get("HOSTOFF_BACKEND"), "cache_dir": a.cache_dir}
json.dump(r, open(a.out, "w"))
rep = os.environ.get("HOSTOFF_REPORT")
if rep:
    rep = rep.replace("%p", str(os.getpid()))
    peak = int(budget[:-1]) << 20 if budget else 12 << 30
    if budget and os.environ.get("FAKE_OVER"):
        peak += 64 << 20
    moved = budget and not os.environ.get("FAKE_NOMOVE")
    print("hostoff: backend vmm (host-located VMM handles supported)")
    json.dump({"counts": {"evictions": 5 if moved else 0, "restores": 4, "demand_restores": 1,
                          "prefetches": 0, "allocs": 9, "launches": 99},
               "bytes": {"to_host": 3 << 30, "to_device": 2 << 30, "peak_device": peak,
                         "peak_host": 1 << 30},
               "time_ns": {"stall": 1500000000}, "backend": "vmm", "mode": "offload",
               "buffers": [{"bytes": 4096}, {"bytes": 256 << 20}]},
              open(rep, "w"))
'''


def load_runner():
    loader = importlib.machinery.SourceFileLoader("gpu_kit_run", str(GPU_DIR / "run"))
    spec = importlib.util.spec_from_loader("gpu_kit_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class RunnerLogic(unittest.TestCase):
    """tests/gpu/run's training stages with a fake training script (no torch, no GPU): budgets
    sized from the no-budget run's peak, losses compared, budget runs that moved nothing or
    overran failed, XLA flags retried, results.json whole after every case."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = Path(self.tmp.name)
        self.fake = d / "fake_train.py"
        self.fake.write_text(FAKE_TRAIN)
        (d / "kit").mkdir()
        # An empty library stands in for libhostoff.so: the real one would write its own report.
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler")
        (d / "empty.c").write_text("int hostoff_kit_fake;\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "kit" / "libhostoff.so"),
                        str(d / "empty.c")], check=True)
        self.mod = load_runner()
        for k in ("FAKE_DIFFER", "FAKE_NOMOVE", "FAKE_OVER"):
            os.environ.pop(k, None)

    def tearDown(self):
        for k in ("FAKE_DIFFER", "FAKE_NOMOVE", "FAKE_OVER"):
            os.environ.pop(k, None)
        self.tmp.cleanup()

    def kit(self, *args, seconds=300):
        a = self.mod.parse_args([str(Path(self.tmp.name) / "out"), *args])
        k = self.mod.Kit(a)
        k.kit = Path(self.tmp.name) / "kit"
        k.trainer = {"torch": [sys.executable, self.fake], "jax": [sys.executable, self.fake]}
        k.stage_end = time.monotonic() + seconds
        self.addCleanup(shutil.rmtree, k.work, True)
        return k

    def rows(self, k, stage):
        return {r[1]: r for r in k.rows if r[0] == stage}

    def test_torch_cases_budgets_and_losses(self):
        k = self.kit()
        ok = k.train_runs("torch", k.torch_cases(), [])
        self.assertTrue(ok, k.rows)
        rows = self.rows(k, "torch")
        self.assertEqual(len(rows), 14, rows)
        for name, r in rows.items():
            self.assertEqual(r[2], "ok", r)
            if name.endswith("no library"):
                continue
            self.assertIn("losses identical (4 steps)", r[3])
        info = k.results["stages"]["torch"]
        # The -50% budget is half the library run's peak (12 GiB in the fake report).
        self.assertEqual(info["caching/budget -50%"]["env_budget"], f"{6 << 10}M")
        self.assertEqual(info["hostoff/budget -30%"]["budget"], int((12 << 30) * 0.7) >> 20 << 20)
        self.assertEqual(info["hostoff/library"]["allocator"], "hostoff")
        self.assertIn("2.00x", rows["caching/budget -50%"][3])
        self.assertIn("evictions 5", rows["caching/budget -50%"][3])
        self.assertIn("backend vmm (host-located VMM handles supported)",
                      rows["caching/budget -50%"][3])
        self.assertIn("backend vmm: host-located VMM handles supported", k.head())
        # Each case has its own timeout, its weight's share of what was left (the first, a cold
        # framework import, weighs 1.5; the 13 others 1).
        self.assertAlmostEqual(info["caching/no library"]["timeout_s"], 300 * 1.5 / 14.5, delta=1)
        self.assertLess(info["hostoff/checkpoint"]["timeout_s"], 300)

    def test_different_losses_fail(self):
        os.environ["FAKE_DIFFER"] = "1"
        k = self.kit()
        self.assertFalse(k.train_runs("torch", k.torch_cases()[:9], []))
        rows = self.rows(k, "torch")
        self.assertEqual(rows["caching/budget -50%"][2], "DIFFERS")
        self.assertIn("losses DIFFER from step 2", rows["caching/budget -50%"][3])
        self.assertEqual(rows["caching/library"][2], "ok")

    def test_budget_run_that_moved_nothing_fails(self):
        os.environ["FAKE_NOMOVE"] = "1"
        k = self.kit()
        self.assertFalse(k.train_runs("torch", k.torch_cases()[:9], []))
        rows = self.rows(k, "torch")
        self.assertEqual(rows["caching/library"][2], "ok")  # no budget: nothing need move
        self.assertEqual(rows["caching/budget -50%"][2], "FAILED")
        self.assertIn("NOTHING MOVED", rows["caching/budget -50%"][3])

    def test_budget_overrun_fails(self):
        """64 MiB over the budget; the report's 4 KiB pass-through buffer does not excuse it."""
        os.environ["FAKE_OVER"] = "1"
        k = self.kit()
        self.assertFalse(k.train_runs("torch", k.torch_cases()[:9], []))
        row = self.rows(k, "torch")["hostoff/budget -50%"]
        self.assertEqual(row[2], "FAILED")
        self.assertIn("PEAK OVER BUDGET", row[3])

    def test_backend_option_reaches_the_library(self):
        k = self.kit("--backend=uvm")
        k.train_runs("torch", k.torch_cases()[:2], [])
        info = k.results["stages"]["torch"]
        self.assertEqual(info["caching/library"]["backend_env"], "uvm")
        self.assertIsNone(info["caching/no library"]["backend_env"])

    def test_out_of_time_is_a_skip_that_fails(self):
        k = self.kit(seconds=10)
        self.assertFalse(k.train_runs("torch", k.torch_cases(), []))
        self.assertTrue(all(r[2] == "skipped" for r in k.rows), k.rows)

    def test_jax_retries_unknown_xla_flags(self):
        k = self.kit("--jax-steps=4")
        self.assertTrue(k.stage_jax(), k.rows)
        info = k.results["stages"]["jax"]
        self.assertEqual(info["XLA_FLAGS"], self.mod.kit_train.XLA_FLAG_SETS[1])
        self.assertEqual(info["jax/library"]["xla_flags"], self.mod.kit_train.XLA_FLAG_SETS[1])
        rows = self.rows(k, "jax")
        self.assertEqual(rows["XLA_FLAGS"][2], "note")
        self.assertEqual(rows["jax/remat"][2], "ok")
        # JAX's compilation cache lives in the run's own folder.
        self.assertEqual(info["jax/remat"]["cache_dir"], str(k.work / "jax-cache"))

    def test_results_whole_after_every_case_and_packed(self):
        k = self.kit("--only=torch", "--pack")
        k.train_runs("torch", k.torch_cases()[:2], [])
        out = Path(self.tmp.name) / "out"
        res = load(out / "results.json")  # before finish: already whole, with both rows
        self.assertEqual(len(res["rows"]), 2)
        self.assertIn("caching/library", (out / "summary.txt").read_text())
        rc = k.finish()
        self.assertEqual(rc, 0)
        self.assertEqual(sorted(p.name for p in out.iterdir()),
                         ["logs.tar.gz", "results.json", "summary.txt"])
        self.assertIs(load(out / "results.json")["ok"], True)


class CostFile(unittest.TestCase):
    """The SIMCUDA_COSTS file: rows from vmmfacts' figures, in the contract's format."""

    FIGURES = {"device": "NVIDIA H200", "host_location": "HOST",
               "us_create_DEVICE_2MiB": 30.0, "us_create_DEVICE_64MiB": 31.0,
               "us_create_HOST_2MiB": 330.0, "us_create_HOST_64MiB": 7460.0,
               "us_create_HOST_512MiB": 58980.0, "us_map_HOST_2MiB": 6.0,
               "us_set_access_HOST_2MiB": 116.0, "us_set_access_HOST_64MiB": 674.0,
               "us_remap_set_access_HOST_2MiB": 20.0, "us_remap_set_access_HOST_64MiB": 82.0,
               "us_unmap_DEVICE_2MiB": 30.0, "us_launch": 2.5, "us_event_query": 0.3,
               "us_hostalloc_2MiB": 300.0, "us_hostalloc_64MiB": 7400.0,
               "copy_gbps_h2d": 55.1, "copy_gbps_both_d2h": 35.0,
               "read_gbps_pinned_host": 40.0, "copy_gbps_dtod": 1800.0}

    def test_rows_and_format(self):
        text = costfile.render(self.FIGURES, ["measured on NVIDIA H200"])
        rows = costfile.parse(text)
        self.assertTrue(text.startswith("# measured on NVIDIA H200\n"))
        # 100 us + 115 us/MiB, fitted through 2, 64 and 512 MiB.
        fixed, per = rows["call.cuMemCreate.host"]
        self.assertAlmostEqual(per, 115000, delta=200)
        self.assertAlmostEqual(fixed, 100000, delta=1000)
        self.assertEqual(rows["call.cuMemMap.host"], [6000.0])  # one size: fixed only
        # Set-access on the host location: the eviction's remap onto a pinned slot (1 us/MiB
        # through 20 us at 2 MiB and 82 at 64), not a first mapping's (9 us/MiB), which the
        # row's comment keeps.
        fixed, per = rows["call.cuMemSetAccess.host"]
        self.assertAlmostEqual(per, 1000, delta=1)
        self.assertAlmostEqual(fixed, 18000, delta=1)
        line = next(l for l in text.splitlines() if l.startswith("call.cuMemSetAccess.host"))
        self.assertIn("remapped, as an eviction does (first mapping: 2 MiB 116.0 us", line)
        self.assertEqual(rows["call.cuLaunchKernel"], [2500.0])
        self.assertEqual(rows["link.h2d"], [55.1])
        self.assertEqual(rows["link.d2h_duplex"], [35.0])
        self.assertEqual(rows["link.zerocopy"], [40.0])  # no host VMM figure: pinned host's
        self.assertEqual(rows["link.hbm"], [1800.0])
        # Never measured: no row at all (the simulator keeps its cited default).
        for name in ("link.d2h", "call.cuMemRelease.device", "call.cuEventRecord"):
            self.assertNotIn(name, rows)

    def test_reader_refuses_what_the_contract_refuses(self):
        for bad in ("call.cuMemCreate.gpu 1", "link.pcie 5", "call.cuMemMap", "link.h2d 1 2",
                    "call.cuMemMap -1", "call.cuMemMap 1e3", "call.cuMemMap nan",
                    "call.cuMemMap 1 2 3"):
            with self.assertRaises(ValueError, msg=bad) as cm:
                costfile.parse("# header\n" + bad + "\n", "c.txt")
            self.assertIn("c.txt:2:", str(cm.exception))
        self.assertEqual(costfile.parse("call.default 2500 # x\n\n"), {"call.default": [2500.0]})


def kit_from_meson(d):
    """A kit folder of the meson-built programs (linked to the simulator), for --kit."""
    kit = Path(d) / "kit"
    kit.mkdir()
    names = {"libhostoff.so": LIB, "libhostoff_torch.so": E.get("GPU_ADAPTER_LIB", "")}
    for name in ("integrity", "vmmfacts", "tensormap"):
        names[name] = sim_tests.prog(name)
    for name, path in names.items():
        os.symlink(path, kit / name)
    (kit / "manifest.json").write_text(json.dumps({"source_hash": "meson", "cc": "meson"}))
    return kit


class KitSim(unittest.TestCase):
    """The whole run script in --sim mode: builds the kit with kitbuild.py (plain cc, warnings
    as errors), checks ldd, reads a tensor map, runs the integrity test (control, under the
    library, 100 buffers in one launch, a corrupted word), the VMM facts, the cost table and the
    launch queue on the simulator, skips torch and jax, packs the logs and writes the cost
    file."""

    def test_run_sim(self):
        if SANITIZER:
            raise unittest.SkipTest("builds its own kit: once, in the plain build, is enough")
        if not SIMDIR:
            raise unittest.SkipTest("GPU_SIMCUDA_DIR is not set")
        with tempfile.TemporaryDirectory(prefix="gpu-kit-") as d:
            p = subprocess.run([sys.executable, str(GPU_DIR / "run"), "--sim", "--rebuild",
                                f"--simcuda-dir={SIMDIR}", "--pack", d], env=base_env(),
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stdout[-4000:] + p.stderr[-4000:])
            self.assertEqual(sorted(os.listdir(d)),
                             ["costs-sim.txt", "logs.tar.gz", "results.json", "summary.txt"])
            res = load(os.path.join(d, "results.json"))
            costs = costfile.parse(Path(d, "costs-sim.txt").read_text(), "costs-sim.txt")
            with tarfile.open(os.path.join(d, "logs.tar.gz")) as t:
                names = t.getnames()
        self.assertIs(res["ok"], True)
        status = {(r["stage"], r["case"]): r["status"] for r in res["rows"]}
        self.assertEqual(status[("integrity", "budget 32 MiB")], "ok")
        self.assertEqual(status[("integrity", "100 buffers in one launch, budget 40 MiB")], "ok")
        self.assertEqual(status[("integrity", "corrupted word is caught")], "ok")
        self.assertEqual(status[("ldd", "libhostoff.so")], "ok")
        self.assertEqual(status[("ldd", "tensormap")], "ok")
        self.assertIn(status[("tmap", "CUtensorMap address")], ("ok", "note"))
        self.assertEqual(status[("costs", "cost file")], "ok")
        # The queue section, run on its own: the simulator's queue depth, said as its variable.
        self.assertEqual(status[("costs", "launch queue, us")], "ok")
        queue = next(r for r in res["rows"] if r["case"] == "launch queue, us")
        self.assertIn("depth 1024 (SIMCUDA_LAUNCH_QUEUE=1024)", queue["figures"])
        self.assertEqual(res["stages"]["costs"]["queue"]["launch_queue_depth"], 1024)
        self.assertEqual(status[("torch", "all cases")], "skipped")
        self.assertIn("built here", res["stages"]["build"]["how"])
        self.assertEqual(res["backend"]["runs"]["integrity-lib"]["backend"], "vmm")
        for row in ("call.cuMemCreate.device", "call.cuMemCreate.host", "call.cuMemHostAlloc",
                    "call.cuLaunchKernel", "call.cuEventQuery", "link.h2d", "link.d2h_duplex",
                    "link.zerocopy", "link.hbm"):
            self.assertIn(row, costs)
        self.assertTrue(any(re.match(r"logs/integrity-lib\.hostoff\.\d+\.json$", n) for n in names),
                        names)
        self.assertIn("logs/vmmfacts.log", names)
        # The table is the last thing printed.
        self.assertTrue(p.stdout.rstrip().endswith("-" * 20), p.stdout[-500:])


class Rehearsal(unittest.TestCase):
    """The GPU run rehearsed (tests/gpu/rehearse.py): a fake nvidia-smi whose plain call hangs,
    trainers that fail mid-run, hang, compile slowly or move nothing, an integrity control that
    hangs, a vmmfacts section that fails. The kit must still end in time, with whole
    results.json, every other case run and every figure measured kept."""

    DEADLINE = 40

    @classmethod
    def setUpClass(cls):
        if SANITIZER:
            raise unittest.SkipTest("the plain build's run is enough")
        if not SIMDIR:
            raise unittest.SkipTest("GPU_SIMCUDA_DIR is not set")
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpu-rehearsal-")
        kit = kit_from_meson(cls.tmp.name)
        out = Path(cls.tmp.name) / "out"
        t0 = time.monotonic()
        cls.p = subprocess.run([sys.executable, str(GPU_DIR / "run"), "--rehearse",
                                f"--simcuda-dir={SIMDIR}", f"--kit={kit}",
                                f"--deadline={cls.DEADLINE}", str(out)], env=base_env(),
                               capture_output=True, text=True, timeout=TIMEOUT)
        cls.wall = time.monotonic() - t0
        cls.res = load(out / "results.json")
        cls.summary = (out / "summary.txt").read_text()
        cls.costs = costfile.parse((out / "costs-sim.txt").read_text(), "costs-sim.txt")
        cls.status = {(r["stage"], r["case"]): r for r in cls.res["rows"]}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def row(self, stage, case):
        return self.status[(stage, case)]

    def why(self):
        return self.p.stdout[-6000:] + self.p.stderr[-2000:]

    def test_ends_in_time_with_whole_results(self):
        self.assertLess(self.wall, self.DEADLINE + 8, self.why())
        self.assertEqual(self.p.returncode, 1, self.why())  # the rehearsed failures
        self.assertIs(self.res["ok"], False)
        self.assertEqual(self.res["mode"], "rehearsal")
        self.assertIn("hostoff GPU kit (rehearsal)", self.summary)
        # The hanging plain nvidia-smi was killed; the query still found the GPU.
        self.assertEqual(self.row("env", "host")["status"], "ok", self.why())
        self.assertIn("NVIDIA H200 (rehearsal)", self.row("env", "host")["figures"])

    def test_a_failed_training_run_keeps_its_steps_and_the_stage_goes_on(self):  # defect 1
        r = self.row("torch", "caching/library")
        self.assertEqual(r["status"], "FAILED")
        self.assertIn("illegal memory access", r["figures"])
        self.assertIn("3 steps", r["figures"])
        self.assertEqual(len(self.res["stages"]["torch"]["caching/library"]["losses"]), 3)
        torch = [c for (s, c) in self.status if s == "torch"]
        self.assertEqual(len(torch), 14, torch)
        for case in ("caching/no library", "hostoff/library", "caching/budget -50%",
                     "caching/checkpoint", "hostoff/checkpoint"):
            self.assertEqual(self.row("torch", case)["status"], "ok", self.why())
        hung = self.row("torch", "hostoff/budget -30%")
        self.assertEqual(hung["status"], "TIMEOUT")
        self.assertIn("2 steps", hung["figures"])

    def test_jax_is_not_starved_and_reuses_its_cache(self):  # defect 2
        jax = self.res["stages"]["jax"]
        for case in ("jax/no library", "jax/library", "jax/budget -30%", "jax/remat"):
            self.assertEqual(self.row("jax", case)["status"], "ok", self.why())
            self.assertEqual(len(jax[case]["losses"]), 8, case)
        # The slow first step (compiling) did not stop the run, and the next runs of the same
        # program found it in this run's cache.
        self.assertGreater(jax["jax/no library"]["step_s"][0], 1.0)
        self.assertLess(jax["jax/library"]["step_s"][0], 0.5)
        self.assertEqual(self.row("jax", "jax/budget -50%")["status"], "TIMEOUT")

    def test_backend_and_budget_runs_that_moved_nothing(self):  # defect 3
        r = self.row("torch", "hostoff/budget -50%")
        self.assertEqual(r["status"], "FAILED")
        self.assertIn("NOTHING MOVED", r["figures"])
        self.assertIn("backend vmm: host-located VMM handles supported", self.summary)
        self.assertIn("evictions", self.row("integrity", "budget 8 MiB")["figures"])

    def test_a_failed_vmm_section_keeps_the_other_figures(self):  # defect 4
        self.assertEqual(self.row("vmm", "us per call, DEVICE 2/64/512 MiB")["status"], "ok")
        self.assertIn("n/a", self.row("vmm", "us per call, DEVICE 2/64/512 MiB")["figures"])
        self.assertEqual(self.row("vmm", "copy GB/s")["status"], "FAILED")
        self.assertNotIn("0.0", self.row("vmm", "copy GB/s")["figures"])
        self.assertIn("cuMemHostAlloc", self.row("vmm", "sections failed")["figures"])
        facts = self.res["stages"]["vmm"]["facts"]
        self.assertGreater(facts["us_create_HOST_2MiB"], 0)
        # The cost stage measured what the vmm stage lost: the file is whole.
        self.assertEqual(self.row("costs", "cost file")["status"], "ok")
        self.assertIn("link.h2d", self.costs)
        self.assertIn("call.cuMemCreate.host", self.costs)

    def test_a_hanging_control_does_not_starve_the_library_run(self):  # defect 5
        self.assertEqual(self.row("integrity", "no library")["status"], "TIMEOUT")
        for case in ("budget 8 MiB", "8 buffers in one launch, budget 8 MiB",
                     "corrupted word is caught"):
            self.assertEqual(self.row("integrity", case)["status"], "ok", self.why())
        for stage, info in self.res["stages"].items():
            if "allotted_s" in info and "seconds" in info:
                # A stage ends within its time (plus the kill's grace and a little slack).
                self.assertLess(info["seconds"], info["allotted_s"] + 2.5, stage)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cls = globals().get(sys.argv[1])
    if not (isinstance(cls, type) and issubclass(cls, unittest.TestCase)):
        print(f"run_tests.py: no test class {sys.argv[1]}", file=sys.stderr)
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
    if len(sys.argv) > 2:
        suite = unittest.TestSuite(t for t in suite if t.id().split(".")[-1] in sys.argv[2:])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    # Everything skipped (a class skipped in setUpClass runs no test at all): meson's "skipped".
    return 77 if result.skipped and len(result.skipped) >= result.testsRun else 0


if __name__ == "__main__":
    sys.exit(main())
