#!/usr/bin/env python3
"""What of the GPU kit runs without a GPU: the simulator halves, the nvcc build of the kernels,
the Python scripts' syntax and arguments, the run script's own logic and the whole run script in
--sim mode.

Usage: sim_tests.py CLASS [unittest options]   (meson test --suite gpu runs each class)

Builds nothing but what a class says (KernelsNvcc: a cubin; KitSim: the kit with kitbuild.py, in
a temporary folder). Every path comes from the environment meson sets (tests/gpu/meson.build):
  GPU_HOSTOFF_LIB       libhostoff.so              GPU_SIMCUDA_DIR  the simulator's libcuda.so.1
  GPU_PROG_<NAME>       integrity, vmmfacts, adapter_smoke (linked to the simulator)
  GPU_ADAPTER_LIB       the PyTorch adapter        GPU_SOURCE_ROOT  the source tree
  GPU_CUDA_ROOT         the CUDA toolkit
  GPU_SANITIZER, GPU_SANITIZER_RUNTIME, GPU_SCALE  in sanitizer builds: the runtime goes first in
                        LD_PRELOAD and the operation counts are divided by GPU_SCALE
Exit status 77 (meson's "skipped") when every test of the class was skipped.
"""

import importlib.machinery
import importlib.util
import json
import os
import platform
import py_compile
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
from pathlib import Path

E = os.environ
LIB = E.get("GPU_HOSTOFF_LIB", "")
SIMDIR = E.get("GPU_SIMCUDA_DIR", "")
SRC = Path(E.get("GPU_SOURCE_ROOT") or Path(__file__).resolve().parents[2])
GPU_DIR = SRC / "tests" / "gpu"
CUDA_ROOT = Path(E.get("GPU_CUDA_ROOT", "/usr/local/cuda"))
SANITIZER = E.get("GPU_SANITIZER", "")
SANITIZER_RT = E.get("GPU_SANITIZER_RUNTIME", "")
SCALE = max(1, int(E.get("GPU_SCALE", "1") or 1))
TIMEOUT = 300
MiB = 1 << 20
SCRUB = re.compile(r"^(HOSTOFF_|SIMCUDA_|LD_PRELOAD$|XLA_|CUBLAS_WORKSPACE_CONFIG$)")


def prog(name):
    path = E.get("GPU_PROG_" + name.upper(), "")
    if not path:
        raise unittest.SkipTest(f"GPU_PROG_{name.upper()} is not set (run through meson test)")
    return path


def sanitizer_env():
    """What the simulator itself leaks or races on is its own suite's business; findings in
    libhostoff.so and the kit's programs still fail."""
    if not SANITIZER:
        return {}
    fd, supp = tempfile.mkstemp(prefix="gpu-san-", suffix=".supp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("leak:libcuda.so.1\n" if SANITIZER == "address"
                else "race:libcuda.so.1\nthread:libcuda.so.1\n")
    if SANITIZER == "address":
        return {"LSAN_OPTIONS": "suppressions=" + supp}
    return {"TSAN_OPTIONS": f"halt_on_error=1:atexit_sleep_ms=0:suppressions={supp}"}


SAN_ENV = sanitizer_env()


def base_env(extra=None, preload=False):
    env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
    for k, v in SAN_ENV.items():
        env[k] = ":".join(x for x in (env.get(k), v) if x)
    if SIMDIR:
        env["LD_LIBRARY_PATH"] = SIMDIR + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
    if preload:
        env["LD_PRELOAD"] = " ".join(p for p in (SANITIZER_RT, LIB) if p)
    env.update(extra or {})
    return env


def wrapper():
    """ThreadSanitizer wants a fixed address-space layout."""
    if SANITIZER == "thread" and shutil.which("setarch"):
        return ["setarch", platform.machine(), "-R"]
    return []


class Run:
    def __init__(self, cmd, proc, report=None, sim=None):
        self.cmd = " ".join(cmd)
        self.rc, self.out, self.err = proc.returncode, proc.stdout, proc.stderr
        self.report, self.sim = report, sim

    def why(self):
        return f"{self.cmd}: exit {self.rc}\nstdout:\n{self.out[-3000:]}\nstderr:\n{self.err[-3000:]}"


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run(cmd, preload=False, env=None, reports=False, timeout=TIMEOUT):
    with tempfile.TemporaryDirectory(prefix="gpu-") as d:
        extra = dict(env or {})
        rep, sim = os.path.join(d, "hostoff.json"), os.path.join(d, "simcuda.json")
        if reports:
            extra.setdefault("SIMCUDA_REPORT", sim)
            if preload:
                extra.setdefault("HOSTOFF_REPORT", rep)
        cmd = [str(c) for c in cmd]
        p = subprocess.run(wrapper() + cmd, env=base_env(extra, preload), capture_output=True,
                           text=True, timeout=timeout)
        return Run(cmd, p, load(rep) if os.path.exists(rep) else None,
                   load(sim) if os.path.exists(sim) else None)


def kit_image_kernels():
    """KIT_SIM_IMAGE's kernels and parameter counts, read from kit.h."""
    text = (GPU_DIR / "kit.h").read_text(encoding="utf-8")
    image = text[text.index("#define KIT_SIM_IMAGE"):]
    image = image[:image.index("\n\n")]
    kernels = {}
    for m in re.finditer(r'"kernel (\w+)((?: \w+)*)\\n"', image):
        kernels[m.group(1)] = m.group(2).split()
    table = text[text.index("#define KIT_KERNELS(X)"):]
    table = table[:table.index("\n\n")]
    counts = {m.group(1): eval(m.group(2).replace("KIT_SLOTS", "3"))  # noqa: S307 - a constant
              for m in re.finditer(r"X\((\w+),\s*([^)]+)\)", table)}
    return kernels, counts


# --------------------------------------------------------------------------- integrity


class IntegritySim(unittest.TestCase):
    """The integrity test's simulator half: the text image, under LD_PRELOAD=libhostoff.so."""

    ARGS = ["--total-mib=96", "--buffer-mib=8", "--small=4", "--threads=4", "--streams=2"]

    def ops(self, n):
        return f"--ops={max(20, n // SCALE)}"

    def check_sim(self, r):
        self.assertIsNotNone(r.sim, "no SIMCUDA_REPORT\n" + r.why())
        self.assertEqual(r.sim["illegal_accesses"], 0, r.why())
        self.assertEqual(r.sim["hazards"], 0, r.why())

    def test_control_without_library(self):
        r = run([prog("integrity"), *self.ARGS, self.ops(200), "--seed=3"], reports=True)
        self.assertEqual(r.rc, 0, r.why())
        self.assertIn("integrity: ok", r.out)
        self.check_sim(r)

    def test_three_times_the_budget(self):
        """96 MiB of buffers (and 4 pass-through ones of 1 MiB) against a 32 MiB budget: buffers
        keep moving while other threads' streams use their neighbours; every byte must hold."""
        r = run([prog("integrity"), *self.ARGS, self.ops(300), "--seed=1"], preload=True,
                env={"HOSTOFF_BUDGET": "32M"}, reports=True)
        self.assertEqual(r.rc, 0, r.why())
        self.assertIn("integrity: ok", r.out)
        self.check_sim(r)
        self.assertIsNotNone(r.report, "no HOSTOFF_REPORT\n" + r.why())
        c, b = r.report["counts"], r.report["bytes"]
        self.assertGreater(c["evictions"], 10, c)
        self.assertGreater(c["restores"], 10, c)
        # Managed bytes stay under the budget; the small buffers and the error counter pass
        # through beside it.
        self.assertLessEqual(b["peak_device"], 32 * MiB + 4 * MiB + MiB, b)

    def test_more_threads_copies_and_churn(self):
        r = run([prog("integrity"), "--total-mib=64", "--buffer-mib=4", "--small=2",
                 "--threads=8", "--streams=4", self.ops(400), "--copy-pct=25",
                 "--upload-pct=5", "--churn-pct=10", "--seed=7"], preload=True,
                env={"HOSTOFF_BUDGET": "16M"}, reports=True)
        self.assertEqual(r.rc, 0, r.why())
        self.check_sim(r)
        self.assertGreater(r.report["counts"]["evictions"], 0)
        m = re.search(r"copies=(\d+) uploads=(\d+) churns=(\d+)", r.out)
        self.assertTrue(m and all(int(x) > 0 for x in m.groups()), r.out)

    def test_corrupted_word_is_caught(self):
        r = run([prog("integrity"), *self.ARGS, "--ops=20", "--corrupt"], preload=True,
                env={"HOSTOFF_BUDGET": "32M"})
        self.assertEqual(r.rc, 1, r.why())
        self.assertIn("integrity: FAILED", r.out)
        self.assertIn("1 words wrong", r.err)

    def test_json_output(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "i.json")
            r = run([prog("integrity"), *self.ARGS, "--ops=20", f"--json={out}"])
            self.assertEqual(r.rc, 0, r.why())
            j = load(out)
        self.assertIs(j["ok"], True)
        self.assertEqual(j["image"], "simulator")
        self.assertEqual(j["total_bytes"], 100 * MiB)
        self.assertEqual(j["host_mismatches"] + j["device_mismatches"], 0)

    def test_bad_arguments(self):
        for args in (["--buffer-mib=6"], ["--threads=0"], ["--copy-pct=80", "--churn-pct=30"],
                     ["extra"], ["--no-such-option"]):
            r = run([prog("integrity"), *args])
            self.assertEqual(r.rc, 2, r.why())

    def test_cubin_on_the_simulator_is_refused(self):
        """A real cubin is CUDA_ERROR_INVALID_IMAGE on the simulator: a clean failure."""
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(b"\x7fELF" + bytes(60))
            f.flush()
            r = run([prog("integrity"), f"--cubin={f.name}", "--ops=1"])
        self.assertEqual(r.rc, 1, r.why())
        self.assertIn("cuModuleLoadData", r.err)


class VmmFactsSim(unittest.TestCase):
    """vmmfacts on the simulator: a smoke test of every measurement and its table."""

    def test_quick_table_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "v.json")
            r = run([prog("vmmfacts"), "--quick", f"--json={out}"], reports=True)
            self.assertEqual(r.rc, 0, r.why())
            f = load(out)
        self.assertIn("vmmfacts: ok", r.out)
        for head in ("device attribute", "cuMemCreate 2 MiB", "per-call cost, us",
                     "kernel read bandwidth", "copy bandwidth"):
            self.assertIn(head, r.out)
        self.assertEqual(f["create_HOST"], "CUDA_SUCCESS")
        self.assertEqual(f["host_location"], "HOST")
        self.assertEqual(f["granularity_min_DEVICE"], 2 * MiB)
        for k in ("us_create_DEVICE_2MiB", "us_unmap_HOST_64MiB", "read_gbps_host_vmm",
                  "copy_gbps_h2d", "copy_gbps_d2h", "copy_gbps_both_sum", "copy_gbps_evict",
                  "copy_gbps_evict_restore_sum"):
            self.assertGreater(f[k], 0, k)
        # The simulator's duplex model (55 + 33 GB/s): both directions beat one.
        self.assertGreater(f["copy_gbps_both_sum"], f["copy_gbps_h2d"])
        self.assertEqual(r.sim["illegal_accesses"], 0)

    def test_bad_arguments(self):
        for args in (["--reps=0"], ["--bw-mib=1"], ["x"]):
            self.assertEqual(run([prog("vmmfacts"), *args]).rc, 2)


class AdapterSim(unittest.TestCase):
    """The PyTorch adapter's two functions, called as PyTorch calls them, on the simulator."""

    def test_without_library(self):
        r = run([prog("adapter_smoke"), E["GPU_ADAPTER_LIB"]])
        self.assertEqual(r.rc, 0, r.why())
        self.assertIn("adapter: ok", r.out)

    def test_each_tensor_is_an_engine_buffer(self):
        r = run([prog("adapter_smoke"), E["GPU_ADAPTER_LIB"], "6", "16"], preload=True,
                env={"HOSTOFF_BUDGET": "32M"}, reports=True)
        self.assertEqual(r.rc, 0, r.why())
        c = r.report["counts"]
        self.assertGreater(c["evictions"], 0, c)
        big = [b for b in r.report["buffers"] if b["bytes"] >= 16 * MiB]
        self.assertEqual(len(big), 6, r.report["buffers"])
        self.assertTrue(all(b["kind"] == "async" and not b["live"] for b in big), big)
        self.assertEqual(r.sim["illegal_accesses"], 0)
        self.assertEqual(r.sim["hazards"], 0)


# --------------------------------------------------------------------------- nvcc


def elf_sections(data):
    """{name: bytes} of an ELF64 little-endian file."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = heads[shstrndx][4]

    def name(o):
        end = data.index(b"\0", stroff + o)
        return data[stroff + o:end].decode()

    return {name(h[0]): data[h[4]:h[4] + h[5]] for h in heads}


def kparams(info):
    """(ordinal, offset, size) of each EIATTR_KPARAM_INFO record in an .nv.info.<kernel> section."""
    out, p = [], 0
    while p + 2 <= len(info):
        fmt, attr = info[p], info[p + 1]
        p += 2
        if fmt == 0x04:  # EIFMT_SVAL: u16 size, then the value
            size = struct.unpack_from("<H", info, p)[0]
            val = info[p + 2:p + 2 + size]
            p += 2 + size
            if attr == 0x17 and size >= 12:  # EIATTR_KPARAM_INFO
                _, ordinal, offset, flags = struct.unpack_from("<IHHI", val)
                out.append((ordinal, offset, (flags >> 18) & 0x3FFF))
        elif fmt in (0x02, 0x03):  # EIFMT_BVAL / EIFMT_HVAL: a 2-byte value
            p += 2
        # EIFMT_NVAL (0x01): no value
    return sorted(out)


class KernelsNvcc(unittest.TestCase):
    """kernels.cu compiles for sm_90 and declares the simulator image's kernels with the same
    parameter layout (every parameter 8 bytes at 8 * i)."""

    def nvcc(self):
        for c in (E.get("NVCC"), CUDA_ROOT / "bin" / "nvcc", shutil.which("nvcc")):
            if c and Path(c).is_file():
                return str(c)
        raise unittest.SkipTest("no nvcc")

    def test_cubin_matches_the_simulator_image(self):
        nvcc = self.nvcc()
        kernels, counts = kit_image_kernels()
        self.assertEqual({k: len(v) for k, v in kernels.items()}, counts,
                         "KIT_SIM_IMAGE and KIT_KERNELS disagree")
        with tempfile.TemporaryDirectory() as d:
            cubin = Path(d) / "kernels.cubin"
            p = subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O3", "-Xptxas", "-v",
                                "-I", str(GPU_DIR), "-o", str(cubin), str(GPU_DIR / "kernels.cu")],
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr)
            data = cubin.read_bytes()
        self.assertEqual(data[:4], b"\x7fELF")
        spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", p.stderr)]
        self.assertTrue(spills and not any(spills), p.stderr)
        secs = elf_sections(data)
        for name, types in kernels.items():
            info = secs.get(".nv.info." + name)
            self.assertIsNotNone(info, f"{name}: not in the cubin")
            self.assertTrue(all(t in ("ptr", "u64", "i64", "f64") for t in types), types)
            want = [(i, 8 * i, 8) for i in range(len(types))]
            self.assertEqual(kparams(info), want, f"{name}: parameter layout")
            self.assertIn(".text." + name, secs)


# --------------------------------------------------------------------------- Python


POISON = {"torch": "raise ImportError('torch imported before the arguments were parsed')",
          "jax": "raise ImportError('jax imported before the arguments were parsed')",
          "pynvml": "raise ImportError('no pynvml here')"}


class PythonScripts(unittest.TestCase):
    """Syntax and argument parsing; torch and jax must be imported only after parsing."""

    SCRIPTS = ["tests/gpu/torch_gpt.py", "tests/gpu/jax_tfm.py", "tests/gpu/run",
               "tests/gpu/kitbuild.py", "tests/gpu/sim_tests.py", "contrib/pytorch/hostoff_torch.py"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        for mod, body in POISON.items():
            (Path(cls.tmp.name) / mod).mkdir()
            (Path(cls.tmp.name) / mod / "__init__.py").write_text(body + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def py(self, *args, timeout=60):
        env = base_env({"PYTHONPATH": self.tmp.name, "PYTHONDONTWRITEBYTECODE": "1"})
        return subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=SRC)

    def test_compile(self):
        with tempfile.TemporaryDirectory() as d:
            for s in self.SCRIPTS:
                py_compile.compile(str(SRC / s), cfile=os.path.join(d, "x.pyc"), doraise=True)

    def test_help_without_torch_or_jax(self):
        for s in ("tests/gpu/torch_gpt.py", "tests/gpu/jax_tfm.py", "tests/gpu/run",
                  "tests/gpu/kitbuild.py", "contrib/pytorch/hostoff_torch.py"):
            p = self.py(SRC / s, "--help")
            self.assertEqual(p.returncode, 0, f"{s}: {p.stderr}")
            self.assertIn("usage:", p.stdout)

    def test_bad_arguments_exit_2(self):
        for s, args in (("tests/gpu/torch_gpt.py", ["--d-model=100", "--heads=12"]),
                        ("tests/gpu/torch_gpt.py", ["--allocator=bfc"]),
                        ("tests/gpu/torch_gpt.py", ["--steps=0"]),
                        ("tests/gpu/jax_tfm.py", ["--layers=0"]),
                        ("tests/gpu/jax_tfm.py", ["--time-limit=-1"]),
                        ("tests/gpu/run", ["--sim", "/tmp/x"]),
                        ("tests/gpu/run", ["--only=env,gpu", "/tmp/x"]),
                        ("tests/gpu/run", ["--deadline=5", "/tmp/x"]),
                        ("tests/gpu/run", [])):
            p = self.py(SRC / s, *args)
            self.assertEqual(p.returncode, 2, f"{s} {args}: {p.stdout}{p.stderr}")

    def test_failure_is_written_to_the_result(self):
        """With torch/jax missing, the scripts still write their JSON (ok false, the error)."""
        with tempfile.TemporaryDirectory() as d:
            for s in ("torch_gpt.py", "jax_tfm.py"):
                out = os.path.join(d, s + ".json")
                p = self.py(GPU_DIR / s, "--steps=1", f"--out={out}")
                self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                r = load(out)
                self.assertIs(r["ok"], False)
                self.assertIn("imported before the arguments were parsed", r["error"])
                self.assertEqual(r["losses"], [])

    def test_adapter_helper_without_torch(self):
        code = textwrap.dedent(f"""
            import sys; sys.path.insert(0, {str(SRC / 'contrib' / 'pytorch')!r})
            import hostoff_torch
            print(hostoff_torch.find_library({E.get('GPU_ADAPTER_LIB', '')!r}))
            try:
                hostoff_torch.find_library('/nonexistent/libhostoff_torch.so')
            except FileNotFoundError:
                print('missing ok')
            try:
                hostoff_torch.install({E.get('GPU_ADAPTER_LIB', '')!r})
            except ImportError as e:
                print('install needs torch:', e)
        """)
        p = self.py("-c", code)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("missing ok", p.stdout)
        self.assertIn("install needs torch: torch imported", p.stdout)


# --------------------------------------------------------------------------- the run script


FAKE_TRAIN = r'''
import argparse, json, os, sys
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--allocator", default="caching")
ap.add_argument("--adapter"); ap.add_argument("--checkpoint", action="store_true")
ap.add_argument("--remat", action="store_true"); ap.add_argument("--stop-at")
ap.add_argument("--steps"); ap.add_argument("--batch")
a = ap.parse_args()
flags = os.environ.get("XLA_FLAGS", "")
if "xla_gpu_deterministic_ops" in flags:
    print("Unknown flags in XLA_FLAGS: " + flags); sys.exit(1)
budget = os.environ.get("HOSTOFF_BUDGET")
losses = [10.5, 10.25, 10.0, 9.75]
if budget and os.environ.get("FAKE_DIFFER"):
    losses[2] = 10.000001
lib = bool(os.environ.get("LD_PRELOAD"))
r = {"ok": True, "losses": losses, "losses_hex": [x.hex() for x in losses],
     "step_s": [0.5, 0.1, 0.1, 0.1], "median_step_s": 0.2 if budget else 0.1,
     "app_peak_bytes": 10 << 30, "nvml_peak_bytes": 11 << 30, "env_budget": budget,
     "xla_flags": flags, "allocator": a.allocator}
json.dump(r, open(a.out, "w"))
rep = os.environ.get("HOSTOFF_REPORT")
if rep:
    rep = rep.replace("%p", str(os.getpid()))
    peak = int(budget[:-1]) << 20 if budget else 12 << 30
    json.dump({"counts": {"evictions": 5 if budget else 0, "restores": 4, "demand_restores": 1,
                          "prefetches": 0, "allocs": 9, "launches": 99},
               "bytes": {"to_host": 3 << 30, "to_device": 2 << 30, "peak_device": peak,
                         "peak_host": 1 << 30},
               "time_ns": {"stall": 1500000000}, "backend": "vmm", "mode": "offload"},
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
    sized from the no-budget run's peak, losses compared, failures marked, XLA flags retried."""

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
        os.environ.pop("FAKE_DIFFER", None)

    def tearDown(self):
        os.environ.pop("FAKE_DIFFER", None)
        self.tmp.cleanup()

    def kit(self, *args):
        a = self.mod.parse_args([str(Path(self.tmp.name) / "out"), *args])
        k = self.mod.Kit(a)
        k.kit = Path(self.tmp.name) / "kit"
        k.scripts = {"torch": self.fake, "jax": self.fake}
        self.addCleanup(shutil.rmtree, k.work, True)
        return k

    def rows(self, k, stage):
        return {r[1]: r for r in k.rows if r[0] == stage}

    def test_torch_cases_budgets_and_losses(self):
        k = self.kit()
        ok = k.train_runs("torch", k.torch_cases(), 300, [])
        self.assertTrue(ok, k.rows)
        rows = self.rows(k, "torch")
        self.assertEqual(len(rows), 10, rows)
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

    def test_different_losses_fail(self):
        os.environ["FAKE_DIFFER"] = "1"
        k = self.kit()
        self.assertFalse(k.train_runs("torch", k.torch_cases()[:6], 300, []))
        rows = self.rows(k, "torch")
        self.assertEqual(rows["caching/budget -50%"][2], "DIFFERS")
        self.assertIn("losses DIFFER from step 2", rows["caching/budget -50%"][3])
        self.assertEqual(rows["caching/library"][2], "ok")

    def test_out_of_time_is_a_skip_that_fails(self):
        k = self.kit()
        self.assertFalse(k.train_runs("torch", k.torch_cases(), 10, []))
        self.assertTrue(all(r[2] == "skipped" for r in k.rows), k.rows)

    def test_jax_retries_unknown_xla_flags(self):
        k = self.kit("--jax-steps=4")
        k.mode = "gpu"
        self.assertTrue(k.stage_jax(300), k.rows)
        info = k.results["stages"]["jax"]
        self.assertEqual(info["XLA_FLAGS"], self.mod.XLA_FLAG_SETS[1])
        self.assertEqual(info["jax/library"]["xla_flags"], self.mod.XLA_FLAG_SETS[1])
        rows = self.rows(k, "jax")
        self.assertEqual(rows["XLA_FLAGS"][2], "note")
        self.assertEqual(rows["jax/remat"][2], "ok")

    def test_table_and_results(self):
        k = self.kit("--only=torch", "--pack")
        k.train_runs("torch", k.torch_cases()[:2], 300, [])
        rc = k.finish()
        self.assertEqual(rc, 0)
        out = Path(self.tmp.name) / "out"
        self.assertEqual(sorted(p.name for p in out.iterdir()),
                         ["logs.tar.gz", "results.json", "summary.txt"])
        res = load(out / "results.json")
        self.assertIs(res["ok"], True)
        self.assertIn("caching/library", (out / "summary.txt").read_text())


class KitSim(unittest.TestCase):
    """The whole run script in --sim mode: builds the kit with kitbuild.py (plain cc, warnings
    as errors), checks ldd, runs the integrity test (control, under the library, a corrupted
    word) and the VMM facts on the simulator, skips torch and jax, packs three files."""

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
            self.assertEqual(sorted(os.listdir(d)), ["logs.tar.gz", "results.json", "summary.txt"])
            res = load(os.path.join(d, "results.json"))
            with tarfile.open(os.path.join(d, "logs.tar.gz")) as t:
                names = t.getnames()
        self.assertIs(res["ok"], True)
        status = {(r["stage"], r["case"]): r["status"] for r in res["rows"]}
        self.assertEqual(status[("integrity", "budget 32 MiB")], "ok")
        self.assertEqual(status[("integrity", "corrupted word is caught")], "ok")
        self.assertEqual(status[("ldd", "libhostoff.so")], "ok")
        self.assertEqual(status[("torch", "all cases")], "skipped")
        self.assertIn("built here", res["stages"]["build"]["how"])
        self.assertTrue(any(re.match(r"logs/integrity-lib\.hostoff\.\d+\.json$", n) for n in names),
                        names)
        self.assertIn("logs/vmmfacts.log", names)
        # The table is the last thing printed.
        self.assertTrue(p.stdout.rstrip().endswith("-" * 20), p.stdout[-500:])


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cls = globals().get(sys.argv[1])
    if not (isinstance(cls, type) and issubclass(cls, unittest.TestCase)):
        print(f"sim_tests.py: no test class {sys.argv[1]}", file=sys.stderr)
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
    if len(sys.argv) > 2:
        suite = unittest.TestSuite(t for t in suite if t.id().split(".")[-1] in sys.argv[2:])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    return 77 if result.testsRun and len(result.skipped) == result.testsRun else 0


if __name__ == "__main__":
    sys.exit(main())
