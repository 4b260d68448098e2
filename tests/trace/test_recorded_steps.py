#!/usr/bin/env python3
"""Tests of the recorded steps of a trace without step markers: the header's "recorder":
{"step_lines": [...]} (docs/trace-format.md), timed by `hostoff replay` without telling the
library, and the policy benchmark's steady columns built on them.

Usage: test_recorded_steps.py CLASS [unittest options]   (meson test --suite trace)

Builds nothing; the paths come from the environment tests/trace/meson.build sets (TR_HOSTOFF:
the hostoff command, in BUILD/tools, whose BUILD tools/bench_policy.py is given).
"""

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import pyharness  # noqa: E402
from pyharness import need  # noqa: E402
from test_trace import hostoff, replay_json  # noqa: E402

MS = 1000000
MIB = 1 << 20
DURATIONS = [1, 2, 3, 4, 5]  # each step's kernels, ms: the steps differ, so a shifted boundary shows


def step_events(k):
    """Step k: one kernel on each of two 16 MiB buffers (above the library's automatic
    HOSTOFF_MIN_BYTES, so a budget moves them), then a device synchronisation, so that the host
    reaches the next step's first event when the device has finished this one."""
    ns = DURATIONS[k] * MS
    return [{"e": "launch", "t": 0, "s": 0, "k": "a", "ns": ns // 2, "use": [1]},
            {"e": "launch", "t": 0, "s": 0, "k": "b", "ns": ns - ns // 2, "use": [2]},
            {"e": "sync", "t": 0}]


def recording(path, step_lines=None, marked=False, noise=True):
    """Writes a trace of len(DURATIONS) steps as the recorder does: no markers (unless
    `marked`), each step's first line in the header's step_lines. With `noise`, lines the reader
    skips (a blank line, an event it does not know) come first in steps 2 and 4, so that the line
    numbers and the events' indices differ; a step's line names the skipped line, as a recorder
    that wrote them would. Returns the step lines written."""
    body, starts = [], []
    for k in range(len(DURATIONS)):
        starts.append(len(body) + 2)  # line 1 is the header
        if marked:
            body.append(json.dumps({"e": "step", "t": 0}))
        if noise and k in (1, 3):
            body.append("")
            body.append(json.dumps({"e": "note", "t": 0, "what": "not an event replays know"}))
        if k == 0:
            body += [json.dumps({"e": "alloc", "t": 0, "id": i, "bytes": 16 * MIB})
                     for i in (1, 2)]
        body += [json.dumps(e) for e in step_events(k)]
    body += [json.dumps({"e": "free", "t": 0, "id": i}) for i in (1, 2)]
    rec = {"steps": len(DURATIONS), "step_lines": starts if step_lines is None else step_lines,
           "per_step": [{"device_ns": d * MS} for d in DURATIONS]}
    if marked:
        del rec["step_lines"]
    header = {"hostoff_trace": 1, "device": {"name": "test", "mem_bytes": 1 << 34},
              "recorder": rec}
    data = json.dumps(header) + "\n" + "\n".join(body) + "\n"
    if path.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(data)
    else:
        with open(path, "w") as f:
            f.write(data)
    return starts


class RecordedSteps(unittest.TestCase):
    """`hostoff replay --json`: recorded_step_ns and steady_recorded_step_ns."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "r.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def test_each_step_timed_and_they_add_up(self):
        recording(self.path)
        text, out = replay_json(self.path, "--budget", "none")
        steps = out["recorded_step_ns"]
        self.assertEqual(len(steps), len(DURATIONS))
        # The first step begins at the first event: the steps add up to the whole replay.
        self.assertEqual(sum(steps), out["replay_ns"])
        for got, ms in zip(steps, DURATIONS):
            # A step's kernels, and a few calls' host costs (SIMCUDA_LAUNCH_NS) around them.
            self.assertGreaterEqual(got, ms * MS)
            self.assertLess(got, ms * MS + 100000)
        # Five steps: the mean of the last three, rounded down.
        self.assertEqual(out["steady_recorded_step_ns"], sum(steps[2:]) // 3)
        # Not markers: the existing keys are as for any unmarked trace.
        self.assertEqual(out["steps"], 0)
        self.assertEqual(out["step_ns"], [])
        self.assertEqual(out["steady_step_ns"], out["replay_ns"])
        # The same trace gives the same bytes, with and without moves.
        self.assertEqual(text, replay_json(self.path, "--budget", "none")[0])
        moved, out = replay_json(self.path, "--budget", "70%")
        self.assertGreater(out["evictions"], 0)
        self.assertEqual(len(out["recorded_step_ns"]), len(DURATIONS))
        self.assertEqual(moved, replay_json(self.path, "--budget", "70%")[0])

    def test_fewer_than_four_steps(self):
        starts = recording(self.path, noise=False)
        # Three steps named: the last runs to the end (steps 3 to 5); the steady figure is the
        # mean of the steps after the first.
        _, out = replay_json(self.path, "--budget", "none")
        whole = out["recorded_step_ns"]
        recording(self.path, step_lines=starts[:3], noise=False)
        _, out = replay_json(self.path, "--budget", "none")
        steps = out["recorded_step_ns"]
        self.assertEqual(steps[:2], whole[:2])
        self.assertEqual(steps[2], sum(whole[2:]))
        self.assertEqual(out["steady_recorded_step_ns"], (steps[1] + steps[2]) // 2)
        recording(self.path, step_lines=starts[:1], noise=False)
        _, out = replay_json(self.path, "--budget", "none")
        self.assertEqual(out["recorded_step_ns"], [out["replay_ns"]])
        self.assertEqual(out["steady_recorded_step_ns"], out["replay_ns"])

    def test_none_or_malformed_lines_give_no_steps(self):
        for lines in (None, [5, 3], [1, 9], [2, "9"], [2, 2.5], "2"):
            with self.subTest(step_lines=lines):
                recording(self.path, step_lines=lines if lines is not None else [])
                _, out = replay_json(self.path, "--budget", "none")
                self.assertEqual(out["recorded_step_ns"], [])
                self.assertIsNone(out["steady_recorded_step_ns"])

    def test_a_line_past_the_end_began_no_step(self):
        starts = recording(self.path, noise=False)
        recording(self.path, step_lines=starts[:2] + [10 ** 6], noise=False)
        _, out = replay_json(self.path, "--budget", "none")
        self.assertEqual(len(out["recorded_step_ns"]), 2)
        self.assertEqual(sum(out["recorded_step_ns"]), out["replay_ns"])

    def test_the_library_is_not_told(self):
        """Under a budget the library traces what it sees (--record): a step marker would be a
        "step" line there. The recorded steps make none; the same steps marked in the trace do
        (the check can fail)."""
        def library_steps(marked):
            recording(self.path, marked=marked)
            rec = os.path.join(self.tmp.name, "seen.jsonl")
            _, out = replay_json(self.path, "--budget", "70%", "--record", rec)
            with open(rec) as f:
                seen = [json.loads(line) for line in f if line.strip()]
            os.unlink(rec)
            self.assertGreater(out["evictions"], 0)  # the library ran, and moved buffers
            return out, sum(1 for e in seen[1:] if e.get("e") == "step")

        out, seen = library_steps(marked=False)
        self.assertEqual(seen, 0)
        self.assertEqual(len(out["recorded_step_ns"]), len(DURATIONS))
        self.assertEqual(sum(out["recorded_step_ns"]), out["replay_ns"])
        out, seen = library_steps(marked=True)
        self.assertEqual(seen, len(DURATIONS))
        self.assertEqual(out["recorded_step_ns"], [])

    def test_summary_line(self):
        recording(self.path)
        r = hostoff("replay", self.path, "--budget", "none")
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [x for x in r.stdout.splitlines() if x.startswith("recorded ")]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertIn("5 steps (the recording's step_lines, not marked): 0.001 0.002 0.003 "
                      "0.004 0.005 s; steady 0.004", line[0])
        self.assertIn("(the last three)", line[0])


class BenchSteady(unittest.TestCase):
    """tools/bench_policy.py on two tiny recordings (one with the recorder's step_lines, one with
    markers): the steady columns beside the all-steps ones, their values from the replays' own
    figures, and a saved run without the new keys still printed."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        recording(os.path.join(d, "tinyrec.jsonl.gz"))
        recording(os.path.join(d, "tinymark.jsonl.gz"), marked=True)
        cls.saved = os.path.join(d, "run.json")
        cls.out = cls.bench("--dir", d, "--only", "tiny", "--budget", "70%", "--link", "pcie5",
                            "--targets", "--json", cls.saved)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def bench(cls, *args):
        build = os.path.dirname(os.path.dirname(need("TR_HOSTOFF")))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_policy.py"),
                            build, *args], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise AssertionError(f"bench_policy.py failed:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    @staticmethod
    def table(text):
        """The plain table: {workload: {column: cell}}. Each column is right-aligned under its
        name, two spaces apart (a cell may hold spaces: "1072 / 4229")."""
        lines = text.splitlines()
        head = re.split(r"\s{2,}", lines[0].strip())
        ends, at = [], 0
        for h in head:
            at = lines[0].index(h, at) + len(h)
            ends.append(at)
        rows = {}
        for line in lines[1:]:
            if not line.strip():
                break
            cells = [line[(ends[i - 1] + 2 if i else 0):end].strip() for i, end in enumerate(ends)]
            rows[cells[0]] = dict(zip(head, cells))
        return head, rows

    def replays(self, path=None):
        with open(path or self.saved) as f:
            return {(r["_job"][0], r["_job"][3], r["_job"][4]): r for r in json.load(f)}

    def test_columns_and_values(self):
        head, rows = self.table(self.out)
        for col in ("lookahead steady ms", "lookahead / limit (steady)",
                    "lookahead / lru (steady)", "warm-up s", "bound (steady)", "T steady ms"):
            self.assertIn(col, head)
        self.assertEqual(sorted(rows), ["tinymark", "tinyrec"], self.out)
        runs = self.replays()
        for name in ("tinyrec", "tinymark"):
            la = runs[(name, "lookahead", 0)]
            lru = runs[(name, "lru", 0)]
            if name == "tinyrec":  # the recorder's steps, as hostoff replay averages them
                steady = la["steady_recorded_step_ns"]
                lru_steady = lru["steady_recorded_step_ns"]
                self.assertEqual(la["step_ns"], [])
            else:  # marked: the last three marked steps
                steady = sum(la["step_ns"][-3:]) / 3
                lru_steady = sum(lru["step_ns"][-3:]) / 3
                self.assertEqual(la["recorded_step_ns"], [])
            row = rows[name]
            with self.subTest(workload=name):
                self.assertEqual(row["lookahead steady ms"], f"{steady / 1e6:.1f}")
                self.assertEqual(row["lookahead ms"], f"{la['replay_ns'] / 5 / 1e6:.1f}")
                self.assertAlmostEqual(float(row["warm-up s"]),
                                       (la["replay_ns"] - 5 * steady) / 1e9, delta=0.006)
                self.assertEqual(row["lookahead / lru (steady)"], f"{steady / lru_steady:.2f}x")
                self.assertIn(row["bound (steady)"], ("ok", "BROKEN"))
                # The steps' kernels alone: the last three are 4 ms on average.
                self.assertGreaterEqual(steady, 4 * MS)

    def test_targets_on_both(self):
        lines = self.out.splitlines()
        for label in ("of the limit (steady)", "of the limit (all steps)",
                      "no slower than lru (steady)", "no slower than lru (all steps)",
                      "no slower than both (steady)", "no slower than both (all steps)"):
            got = [x for x in lines if label in x]
            self.assertEqual(len(got), 1, label)
            self.assertIn("of 2 |", got[0])  # counted over both rows

    def test_older_json(self):
        with open(self.saved) as f:
            runs = json.load(f)
        for r in runs:
            r.pop("recorded_step_ns", None)
            r.pop("steady_recorded_step_ns", None)
        old = os.path.join(self.tmp.name, "old.json")
        with open(old, "w") as f:
            json.dump(runs, f)
        out = self.bench("--from-json", old, "--targets")
        _, rows = self.table(out)
        _, now = self.table(self.out)
        rec = rows["tinyrec"]
        for col in ("lookahead steady ms", "lookahead / limit (steady)", "warm-up s",
                    "bound (steady)"):
            self.assertEqual(rec[col], "-", col)
        self.assertEqual(rec["lookahead ms"], now["tinyrec"]["lookahead ms"])
        # The marked rows' steady figures come from step_ns, which older runs have.
        self.assertEqual(rows["tinymark"], now["tinymark"])


if __name__ == "__main__":
    sys.exit(pyharness.main(__doc__, sys.modules[__name__]))
