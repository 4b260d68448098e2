#!/usr/bin/env python3
"""Tests of the PyTorch recorder (contrib/pytorch/hostoff_record.py) and the recorded workloads.

    test_recorder.py Recorder     records small models on the meta device and checks the traces
                                  against the schema and against what PyTorch must do
    test_recorder.py Allocator    the caching-allocator emulation on hand-made requests
    test_recorder.py Stored       every recording under tests/workloads/ is a valid trace of
                                  8 unmarked steps whose header figures match its lines

Recorder needs a Python with torch (HOSTOFF_TORCH_PYTHON, this Python, /usr/bin/python3, in that
order); without one it is skipped (exit 77). Paths come from the environment meson sets
(RC_SOURCE_ROOT, RC_HOSTOFF); everything is written under a temporary directory.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # nothing written into the source tree
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # nor by the recorder's processes
ROOT = os.environ.get("RC_SOURCE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CONTRIB = os.path.join(ROOT, "contrib", "pytorch")
sys.path.insert(0, os.path.join(ROOT, "tests", "trace"))
sys.path.insert(0, CONTRIB)
import trace_schema  # noqa: E402
import hostoff_views  # noqa: E402  (standard library only)

SKIP = 77
MIB = 1 << 20


def torch_python():
    for py in (os.environ.get("HOSTOFF_TORCH_PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and shutil.which(py) and subprocess.run(
                [py, "-c", "import torch.utils._python_dispatch"], capture_output=True).returncode == 0:
            return py
    return None


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    return lines[0], lines[1:]


def uncompressed(path):
    """The path of a plain copy of a .gz trace beside it (hostoff replay reads plain JSON Lines)."""
    if not path.endswith(".gz"):
        return path
    plain = path[:-3]
    with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return plain


def validate(case, path):
    t = trace_schema.validate(uncompressed(path))
    case.assertEqual(t.problems, [], path)
    return t


# A recording script run by the torch Python: a fp32 two-layer MLP (so the first layer's weight
# is read by its own matrix multiplications, no casts in between), 3 steps, both views.
MLP_SCRIPT = r"""
import sys, torch, torch.nn as nn
sys.path.insert(0, sys.argv[1])
import hostoff_record as hr
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512)).to("meta")
opt = torch.optim.AdamW(model.parameters(), foreach=sys.argv[3] == "foreach")
with hr.Recorder() as rec:
    rec.adopt(model)
    for _ in range(3):
        x = torch.zeros(256, 512).to("meta")
        loss = model(x).pow(2).mean()
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        loss.item()
        rec.step()
for view in ("tensor", "segment"):
    rec.write(sys.argv[2] + "." + view + ".jsonl", view=view)
"""


class Recorder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = torch_python()
        cls.tmp = tempfile.mkdtemp(prefix="hostoff-record-")
        script = os.path.join(cls.tmp, "mlp.py")
        with open(script, "w") as f:
            f.write(MLP_SCRIPT)
        for opt in ("eager", "foreach"):
            subprocess.run([cls.py, script, CONTRIB, os.path.join(cls.tmp, "mlp-" + opt), opt],
                           check=True)
        for w in ("tiny-gpt", "tiny-moe"):
            subprocess.run([cls.py, os.path.join(CONTRIB, "hostoff_record.py"), w, "--steps", "3",
                            "-o", os.path.join(cls.tmp, w)], check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name, view):
        p = os.path.join(self.tmp, f"{name}.{view}.jsonl")
        return p if os.path.exists(p) else p + ".gz"

    def test_schema_and_no_markers(self):
        for name in ("mlp-eager", "mlp-foreach", "tiny-gpt", "tiny-moe"):
            for view in ("tensor", "segment"):
                p = self.path(name, view)
                validate(self, p)
                header, events = read(p)
                self.assertEqual(header["recorder"]["view"], view)
                self.assertEqual(header["recorder"]["steps"], 3)
                self.assertFalse([e for e in events if e["e"] == "step"], p)
                self.assertEqual(len(header["recorder"]["step_lines"]), 3)

    def test_weight_read_by_forward_and_backward(self):
        header, events = read(self.path("mlp-eager", "tensor"))
        ids = {e["site"]: e["id"] for e in events if e["e"] == "alloc"}
        w = ids["param:0.weight"]
        kernels = [e["k"] for e in events if e["e"] == "launch" and w in e["use"]]
        # step 1: forward addmm, backward mm (the weight's gradient does not read it; the input's
        # gradient of layer 0 is not needed), AdamW reads and writes it
        self.assertIn("aten::addmm", kernels)
        w2 = ids["param:2.weight"]
        k2 = [e["k"] for e in events if e["e"] == "launch" and w2 in e["use"]]
        self.assertIn("aten::addmm", k2)
        self.assertIn("aten::mm", k2)  # the backward: grad_input = grad_output @ W
        self.assertEqual(k2.count("aten::addmm"), 3)  # once per forward
        self.assertEqual(k2.count("aten::mm"), 3)  # once per backward

    def test_frees_once_and_steady(self):
        for name in ("mlp-eager", "mlp-foreach", "tiny-gpt", "tiny-moe"):
            header, events = read(self.path(name, "tensor"))
            freed = [e["id"] for e in events if e["e"] == "free"]
            self.assertEqual(len(freed), len(set(freed)), name)
            # the same buffers are live at the end of steps 2 and 3: nothing leaks
            live = set()
            at = {}
            starts = [n - 2 for n in header["recorder"]["step_lines"]] + [len(events)]
            for i, e in enumerate(events):
                if i in starts:
                    at[starts.index(i)] = len(live)
                if e["e"] == "alloc":
                    live.add(e["id"])
                elif e["e"] == "free":
                    live.discard(e["id"])
            at[len(starts) - 1] = len(live)
            self.assertEqual(at[2], at[3], name)
            # activations and temporaries die within their step
            allocated_in_step2 = {e["id"] for e in events[starts[1]:starts[2]] if e["e"] == "alloc"}
            freed_in_step2 = {e["id"] for e in events[starts[1]:starts[2]] if e["e"] == "free"}
            # all but the loss (alive until the next step replaces it) and its .item() source
            self.assertGreater(len(allocated_in_step2), 10, name)
            self.assertLessEqual(len(allocated_in_step2 - freed_in_step2), 2, name)

    def test_views_agree(self):
        for name in ("mlp-eager", "mlp-foreach", "tiny-gpt", "tiny-moe"):
            th, te = read(self.path(name, "tensor"))
            sh, se = read(self.path(name, "segment"))
            tk = [e["k"] for e in te if e["e"] == "launch"]
            sk = [e["k"] for e in se if e["e"] == "launch"]
            self.assertEqual(tk, sk, name)
            self.assertEqual([e["ns"] for e in te if e["e"] == "launch"],
                             [e["ns"] for e in se if e["e"] == "launch"])
            self.assertGreaterEqual(sh["recorder"]["peak_bytes"], th["recorder"]["peak_bytes"])
            for e in se:
                if e["e"] == "alloc":
                    self.assertEqual(e["bytes"] % (2 * MIB), 0)
                self.assertNotEqual(e["e"], "free")  # cached blocks never go back to the driver

    def test_foreach_launches(self):
        _, eager = read(self.path("mlp-eager", "tensor"))
        _, fe = read(self.path("mlp-foreach", "tensor"))
        ek = [e["k"] for e in eager if e["e"] == "launch"]
        fk = [e["k"] for e in fe if e["e"] == "launch"]
        self.assertFalse([k for k in ek if "_foreach_" in k])
        # 4 parameters, one launch per foreach operation; the first is
        # param.mul_(1 - lr * weight_decay) over the 4 parameters
        muls = [e for e in fe if e["e"] == "launch" and e["k"] == "aten::_foreach_mul_"]
        self.assertEqual(len(muls[0]["use"]), 4)
        self.assertLess(len(fk), len(ek))

    def test_roofline(self):
        _, events = read(self.path("mlp-eager", "tensor"))
        first = next(e for e in events if e["e"] == "launch" and e["k"] == "aten::addmm")
        flops = 2 * 256 * 512 * 2048  # fp32: 67 TFLOP/s, above the bytes' time at 4.3 TB/s
        self.assertEqual(first["ns"], int(3000 + flops / 67e12 * 1e9))

    def test_sync_each_step(self):
        _, events = read(self.path("tiny-gpt", "tensor"))
        self.assertEqual(len([e for e in events if e["e"] == "sync"]), 3)
        h2d = [e for e in events if e["e"] == "copy" and e["dir"] == "h2d"]
        self.assertEqual(len(h2d), 6)  # inputs and targets, each step

    def test_replay_accepts(self):
        hostoff = os.environ.get("RC_HOSTOFF")
        if not hostoff:
            self.skipTest("RC_HOSTOFF not set")
        for view in ("tensor", "segment"):
            trace = uncompressed(self.path("tiny-gpt", view))
            out = subprocess.run([hostoff, "replay", trace, "--budget",
                                  "none", "--json"], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            r = json.loads(out.stdout)
            self.assertEqual(r["illegal_accesses"], 0)
            self.assertEqual(r["hazards"], 0)
            self.assertEqual(r["steps"], 0)


class Allocator(unittest.TestCase):
    def test_small_requests_share_a_segment(self):
        a = hostoff_views.CachingAllocator()
        self.assertEqual(a.malloc(0, 100), 0)
        self.assertIsNone(a.malloc(1, 1000))  # rounded to 1024, split from the same 2 MiB
        self.assertEqual(a.segments, [2 * MIB])
        self.assertEqual(a.blocks[1].addr - a.blocks[0].addr, 512)

    def test_large_pool(self):
        a = hostoff_views.CachingAllocator()
        self.assertEqual(a.malloc(0, 5 * MIB), 0)  # under 10 MiB: a 20 MiB segment
        self.assertEqual(a.segments[0], 20 * MIB)
        self.assertIsNone(a.malloc(1, 5 * MIB))  # split from the rest of it
        self.assertEqual(a.malloc(2, 11 * MIB + 1), 1)  # rounded up to 2 MiB: 12 MiB
        self.assertEqual(a.segments[1], 12 * MIB)
        self.assertIsNone(a.malloc(3, 2 * MIB))  # best fit: split from segment 0's free 10 MiB
        self.assertEqual(a.blocks[3].seg, 0)
        # freed, it merges back into 10 MiB: a 9 MiB request takes all of it, as the 1 MiB that
        # would remain is not more than 1 MiB (the large pool does not split it off)
        a.free_block(3)
        self.assertIsNone(a.malloc(4, 9 * MIB))
        self.assertEqual(a.blocks[4].seg, 0)
        self.assertEqual(a.blocks[4].size, 10 * MIB)

    def test_free_merges_and_best_fit(self):
        a = hostoff_views.CachingAllocator()
        a.malloc(0, 12 * MIB)
        a.malloc(1, 30 * MIB)
        a.free_block(0)
        a.free_block(1)
        self.assertIsNone(a.malloc(2, 11 * MIB))  # best fit: the 12 MiB segment, not the 30
        self.assertEqual(a.blocks[2].seg, 0)
        self.assertIsNone(a.malloc(3, 3 * MIB))  # split from the 30 MiB one
        self.assertIsNone(a.malloc(4, 3 * MIB))
        a.free_block(3)
        a.free_block(4)  # merges with its free neighbours: 30 MiB whole again
        self.assertEqual(a.free[False][-1][0], 30 * MIB)
        self.assertEqual(len(a.free[False]), 1)


class Stored(unittest.TestCase):
    def test_recordings(self):
        here = os.path.join(ROOT, "tests", "workloads")
        files = sorted(f for f in os.listdir(here) if f.endswith(".jsonl.gz"))
        self.assertTrue(files)
        with tempfile.TemporaryDirectory(prefix="hostoff-workloads-") as tmp:
            for f in files:
                plain = os.path.join(tmp, f)
                shutil.copyfile(os.path.join(here, f), plain)
                t = validate(self, plain)
                plain = plain[:-3]
                rec = t.header["recorder"]
                self.assertEqual(rec["steps"], 8, f)
                self.assertEqual(rec["peak_bytes"], t.peak, f)
                self.assertFalse([e for _, e in t.events if e["e"] == "step"], f)
                launches = sum(1 for _, e in t.events if e["e"] == "launch")
                self.assertEqual(launches, sum(s["launches"] for s in rec["per_step"]), f)
                os.unlink(plain)

    def test_benchmark_breakdown(self):
        """tools/bench_policy.py --breakdown (the policy benchmark's account of where a step goes)
        on the smallest recording: a row per policy, each step's time split so that the link's
        busy time comes from the rates the replay itself ran at (a benchmark prints figures; this
        checks that it still runs against the replay's output, not what the figures are)."""
        hostoff = os.environ.get("RC_HOSTOFF")
        if not hostoff:
            self.skipTest("RC_HOSTOFF not set")
        build = os.path.dirname(os.path.dirname(hostoff))
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_policy.py"),
                              build, "--breakdown", "--only", "resnet50.tensor", "--budget",
                              "70%", "--link", "pcie5"], capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {l.split()[0]: l.split()[1:] for l in out.stdout.splitlines()
                if l.strip().split(" ")[0] in ("lru", "lookahead", "oracle")}
        self.assertEqual(sorted(rows), ["lookahead", "lru", "oracle"], out.stdout)
        for policy, cells in rows.items():
            step = float(cells[0].split("/")[0])
            link_d2h = float(cells[8].split("/")[0])
            evictions = float(cells[10].split("/")[0])
            self.assertGreater(step, 0, policy)
            self.assertGreater(evictions, 0, policy)  # 70% of the peak: something must leave
            self.assertGreater(link_d2h, 0, policy)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else None
    if which == "Recorder" and torch_python() is None:
        print("no Python with torch (HOSTOFF_TORCH_PYTHON, /usr/bin/python3): skipped; "
              "apt-get install python3-torch")
        sys.exit(SKIP)
    suite = unittest.TestSuite()
    loader = unittest.defaultTestLoader
    for cls in (Recorder, Allocator, Stored):
        if which in (None, cls.__name__):
            suite.addTests(loader.loadTestsFromTestCase(cls))
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    sys.exit(0 if ok else 1)
