#!/usr/bin/env python3
"""Tests of the recorded steps of a trace without step markers: the header's "recorder":
{"step_lines": [...]} (docs/trace-format.md), timed by `hostoff replay` without telling the
library, or told to it as markers with --mark-steps, and the policy benchmark's steady and
marked columns and its --breakdown built on them.

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

sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_policy  # noqa: E402  (its --breakdown step boundaries, tested directly)

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


def long_first(path):
    """A recording whose first step has more launches than the others (six of 10 ms, then two
    each: 20, 30, 40 and 50 ms a step), as a real first step that also initialises does
    (gpt2-1k.tensor: 5988 launches, then 5212). Returns (its step lines, the launches before each
    step)."""
    steps = [[10] * 6, [10, 10], [15, 15], [20, 20], [25, 25]]
    body, starts, before, n = [], [], [], 0
    for k, durs in enumerate(steps):
        starts.append(len(body) + 2)
        before.append(n)
        if k == 0:
            body += [json.dumps({"e": "alloc", "t": 0, "id": i, "bytes": 16 * MIB})
                     for i in (1, 2)]
        for j, d in enumerate(durs):
            body.append(json.dumps({"e": "launch", "t": 0, "s": 0, "k": "a", "ns": d * MS,
                                    "use": [1 + j % 2]}))
            n += 1
        body.append(json.dumps({"e": "sync", "t": 0}))
    body += [json.dumps({"e": "free", "t": 0, "id": i}) for i in (1, 2)]
    header = {"hostoff_trace": 1, "device": {"name": "test", "mem_bytes": 1 << 34},
              "recorder": {"steps": len(steps), "step_lines": starts,
                           "per_step": [{"device_ns": sum(d) * MS} for d in steps]}}
    with open(path, "w") as f:
        f.write(json.dumps(header) + "\n" + "\n".join(body) + "\n")
    return starts, before


def library_trace(path):
    """The library's trace of a replay (--record): its lines after the header."""
    with open(path) as f:
        return [json.loads(line) for line in f.readlines()[1:] if line.strip()]


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


class MarkSteps(unittest.TestCase):
    """`hostoff replay --mark-steps`: the recorded steps told to the library as markers."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "r.jsonl")
        self.rec = os.path.join(self.tmp.name, "seen.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_library_sees_the_markers_where_the_steps_begin(self):
        recording(self.path)  # skipped lines in steps 2 and 4: lines and events differ
        marked, out = replay_json(self.path, "--budget", "70%", "--record", self.rec,
                                  "--mark-steps")
        self.assertGreater(out["evictions"], 0)
        self.assertIs(out["marked_steps"], True)
        seen = [e["e"] for e in library_trace(self.rec)
                if e["e"] in ("step",) + bench_policy.CALLS]
        # The same recording with its steps marked in the trace: a "step" line first in each.
        recording(os.path.join(self.tmp.name, "m.jsonl"), marked=True)
        with open(os.path.join(self.tmp.name, "m.jsonl")) as f:
            want = [json.loads(line)["e"] for line in f.readlines()[1:] if line.strip()]
        want = [e for e in want if e in ("step",) + bench_policy.CALLS]
        self.assertEqual(want.count("step"), len(DURATIONS))
        # The replayer's final cuCtxSynchronize comes last.
        self.assertEqual(seen, want + ["sync"])
        # Without the option the library is told nothing, and the JSON says so.
        _, out = replay_json(self.path, "--budget", "70%", "--record", self.rec)
        self.assertIs(out["marked_steps"], False)
        self.assertEqual(out["step_ns"], [])
        self.assertEqual(sum(1 for e in library_trace(self.rec) if e["e"] == "step"), 0)
        # The marked replay repeats byte for byte.
        self.assertEqual(marked, replay_json(self.path, "--budget", "70%", "--record", self.rec,
                                             "--mark-steps")[0])

    def test_marked_steps_are_the_recorded_steps(self):
        recording(self.path)
        for budget in ("none", "70%"):
            with self.subTest(budget=budget):
                _, out = replay_json(self.path, "--budget", budget, "--mark-steps")
                steps = out["step_ns"]
                self.assertEqual(len(steps), len(DURATIONS))
                self.assertEqual(steps, out["recorded_step_ns"])  # the same boundaries
                self.assertEqual(sum(steps), out["replay_ns"])
                # Each its own mean: after the first, and the last three.
                self.assertEqual(out["steady_step_ns"], sum(steps[1:]) // (len(steps) - 1))
                self.assertEqual(out["steady_recorded_step_ns"], sum(steps[-3:]) // 3)
                self.assertEqual(out["steps"], 0)  # the trace's own markers: still none
                for got, ms in zip(steps, DURATIONS):
                    self.assertGreaterEqual(got, ms * MS)

    def test_the_marker_costs_no_time_by_itself(self):
        """lru ignores markers, and without a budget nothing plans: the figures are those of
        the replay without --mark-steps, but for the marker keys."""
        recording(self.path)
        for args in (("--budget", "none"), ("--budget", "70%", "--policy", "lru")):
            with self.subTest(args=args):
                _, plain = replay_json(self.path, *args)
                _, marked = replay_json(self.path, *args, "--mark-steps")
                self.assertEqual(marked["step_ns"], plain["recorded_step_ns"])
                for key in ("step_ns", "steady_step_ns", "marked_steps"):
                    del plain[key], marked[key]
                self.assertEqual(marked, plain)

    def test_summary(self):
        recording(self.path)
        r = hostoff("replay", self.path, "--budget", "none", "--mark-steps")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(the trace marks no steps: --mark-steps marked the recording's own, "
                      "below)", r.stdout)
        self.assertIn("recorded  5 steps (the recording's step_lines, marked by --mark-steps): "
                      "0.001 0.002 0.003 0.004 0.005 s", r.stdout)
        r = hostoff("replay", self.path, "--budget", "none")
        self.assertIn("(the recording's step_lines, not marked)", r.stdout)
        self.assertNotIn("--mark-steps", r.stdout)

    def test_refused_without_steps_or_with_markers(self):
        """Nothing to mark, or markers already there: one line, exit 2, nothing replayed (a
        replayer that only leaves a file must not run)."""
        fake = os.path.join(self.tmp.name, "fake-replayer")
        ran = os.path.join(self.tmp.name, "ran")
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
        os.chmod(fake, 0o700)
        for what, kw, says in (("no step_lines", {"step_lines": []}, "names no recorded steps"),
                               ("markers", {"marked": True}, "marks its own steps (5 step")):
            with self.subTest(what):
                recording(self.path, **kw)
                r = hostoff("replay", self.path, "--budget", "none", "--mark-steps",
                            env_extra={"HOSTOFF_REPLAYER": fake})
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--mark-steps", r.stderr)
                self.assertIn(says, r.stderr)
                self.assertIn("nothing replayed", r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertFalse(os.path.exists(ran))

    def test_help(self):
        r = hostoff("replay", "--help")
        self.assertIn("  --mark-steps  tell the library of each step", r.stdout)
        man = hostoff("--man").stdout
        self.assertIn(r"[\-\-record PATH] [\-\-mark\-steps]", man)  # the synopsis
        self.assertIn(r"\-\-mark\-steps tells the library of those steps too", man)


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
                            "--targets", "--vmm-free", "--json", cls.saved)

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
                    "lookahead / lru (steady)", "warm-up s", "bound (steady)", "T steady ms",
                    "marked steady ms", "marked / unmarked (steady)"):
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

    def test_vmm_free_column(self):
        """--vmm-free: lookahead once more under a cost file that makes the VMM calls free, its
        steady step and its ratio to the steady limit."""
        head, rows = self.table(self.out)
        self.assertIn("VMM-free steady ms", head)
        self.assertIn("VMM-free / limit (steady)", head)
        runs = self.replays()
        for name in ("tinyrec", "tinymark"):
            free = runs[(name, "lookahead", 4)]
            self.assertTrue(free["costs"].endswith("vmm-free-costs.txt"), free["costs"])
            self.assertIsNone(runs[(name, "lookahead", 0)]["costs"])
            steady = (free["steady_recorded_step_ns"] if name == "tinyrec"
                      else sum(free["step_ns"][-3:]) / 3)
            with self.subTest(workload=name):
                self.assertEqual(rows[name]["VMM-free steady ms"], f"{steady / 1e6:.1f}")
                # The table divides by the unrounded limit, which its column shows to 0.1 ms: the
                # ratio here may differ by that rounding's share, and the ratio's own (0.005).
                limit = float(rows[name]["limit steady ms"])
                tol = 0.005 + steady / 1e6 * 0.05 / limit**2 + 1e-9
                self.assertAlmostEqual(float(rows[name]["VMM-free / limit (steady)"].rstrip("x")),
                                       steady / 1e6 / limit, delta=tol)
                # Free calls cost no more than paid ones: at most the step with them.
                self.assertLessEqual(steady / 1e6, float(rows[name]["lookahead steady ms"]))

    def test_marked_column(self):
        """tinyrec (step_lines) is replayed once more with --mark-steps; tinymark, marked
        already, is not."""
        _, rows = self.table(self.out)
        runs = self.replays()
        mk = runs[("tinyrec", "lookahead", bench_policy.MARKED)]
        self.assertIs(mk["marked_steps"], True)
        self.assertEqual(mk["step_ns"], mk["recorded_step_ns"])
        self.assertNotIn(("tinymark", "lookahead", bench_policy.MARKED), runs)
        la = runs[("tinyrec", "lookahead", 0)]
        self.assertIs(la["marked_steps"], False)
        marked, unmarked = sum(mk["step_ns"][-3:]) / 3, la["steady_recorded_step_ns"]
        row = rows["tinyrec"]
        self.assertEqual(row["marked steady ms"], f"{marked / 1e6:.1f}")
        self.assertEqual(row["marked / unmarked (steady)"], f"{marked / unmarked:.2f}x")
        self.assertEqual(rows["tinymark"]["marked steady ms"], "")
        self.assertEqual(rows["tinymark"]["marked / unmarked (steady)"], "")
        # The target: counted on tinyrec alone, without tolerance.
        got = [x for x in self.out.splitlines() if x.startswith("| markers never make it worse")]
        self.assertEqual(len(got), 1, self.out)
        met = 1 if marked <= unmarked else 0
        # all, tensor, segment, synthetic, tuning, held out: tinyrec is in "all" and "held out"
        # only; groups with no recording replayed marked are "-".
        self.assertEqual(got[0].split(" | ")[1:],
                         [f"{met} of 1", "-", "-", "-", "-", f"{met} of 1 |"])

    def test_targets_on_both(self):
        lines = self.out.splitlines()
        for label in ("of the limit (steady)", "of the limit (all steps)",
                      "no slower than lru (steady)", "no slower than lru (all steps)",
                      "no slower than both (steady)", "no slower than both (all steps)"):
            got = [x for x in lines if label in x]
            self.assertEqual(len(got), 1, label)
            self.assertIn("of 2 |", got[0])  # counted over both rows

    def from_saved(self, runs, name):
        """What --from-json --targets prints for `runs` (a saved run, edited): its table's rows,
        this run's, and the whole text."""
        old = os.path.join(self.tmp.name, name)
        with open(old, "w") as f:
            json.dump(runs, f)
        out = self.bench("--from-json", old, "--targets")
        return self.table(out)[1], self.table(self.out)[1], out

    def test_older_json(self):
        with open(self.saved) as f:
            runs = json.load(f)
        for r in runs:
            r.pop("recorded_step_ns", None)
            r.pop("steady_recorded_step_ns", None)
        rows, now, _ = self.from_saved(runs, "old.json")
        rec = rows["tinyrec"]
        for col in ("lookahead steady ms", "lookahead / limit (steady)", "warm-up s",
                    "bound (steady)"):
            self.assertEqual(rec[col], "-", col)
        self.assertEqual(rec["lookahead ms"], now["tinyrec"]["lookahead ms"])
        # The marked rows' steady figures come from step_ns, which older runs have.
        self.assertEqual(rows["tinymark"], now["tinymark"])

    def test_older_json_without_the_marked_replays(self):
        with open(self.saved) as f:
            runs = [r for r in json.load(f) if r["_job"][4] != bench_policy.MARKED]
        for r in runs:
            r.pop("marked_steps", None)
        rows, now, out = self.from_saved(runs, "old-marks.json")
        self.assertEqual(rows["tinyrec"]["marked steady ms"], "-")
        self.assertEqual(rows["tinyrec"]["marked / unmarked (steady)"], "-")
        self.assertEqual(rows["tinymark"], now["tinymark"])
        for col, cell in now["tinyrec"].items():
            if not col.startswith("marked"):
                self.assertEqual(rows["tinyrec"][col], cell, col)
        got = [x for x in out.splitlines() if x.startswith("| markers never make it worse")]
        self.assertEqual(got[0].split(" | ")[1:], ["-"] * 5 + ["- |"])


class BenchBreakdown(unittest.TestCase):
    """tools/bench_policy.py --breakdown: the steps begin where the recording's do, not at an
    even split of the launches, on a recording whose first step has more launches."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "tinylong.jsonl")
        self.lines, self.launches_before = long_first(self.path)

    def tearDown(self):
        self.tmp.cleanup()

    def recorded(self):
        """lookahead at 70%, with the library's trace: (--json, the trace's calls in CALLS in
        order, its launches, the end of its last call)."""
        rec = os.path.join(self.tmp.name, "seen.jsonl")
        _, out = replay_json(self.path, "--budget", "70%", "--policy", "lookahead", "--link",
                             "pcie5", "--record", rec)
        seen = library_trace(rec)
        ordered = [e for e in seen if e["e"] in bench_policy.CALLS and "d" in e]
        launches = [e for e in seen if e["e"] == "launch"]
        return out, ordered, launches, max(e["t"] + e["d"] for e in ordered)

    def test_input_steps(self):
        kinds, before = bench_policy.input_steps(self.path)
        self.assertEqual(len(kinds), 2 + 14 + 5 + 2)  # allocs, launches, syncs, frees
        # Step 0 begins at the first call; step k after the allocs, k - 1 steps' launches and
        # syncs.
        self.assertEqual(before, [0, 2 + 6 + 1, 2 + 8 + 2, 2 + 10 + 3, 2 + 12 + 4])
        self.assertEqual([kinds[:n].count("launch") for n in before], self.launches_before)
        self.assertEqual(self.launches_before, [0, 6, 8, 10, 12])
        recording(self.path, step_lines=[])
        self.assertIsNone(bench_policy.input_steps(self.path))

    def test_boundaries_are_the_recorded_steps(self):
        out, ordered, launches, end = self.recorded()
        marks = bench_policy.input_steps(self.path)
        starts, how = bench_policy.step_starts(ordered, launches, [], marks, 5, end)
        self.assertEqual(how, "the recording's steps (step_lines)")
        # Each step at the traced call of its first event: the first alloc, then launches.
        self.assertEqual(starts, [ordered[n]["t"] for n in marks[1]])
        self.assertEqual(starts[0], ordered[0]["t"])
        self.assertEqual(ordered[0]["e"], "alloc")
        self.assertEqual(starts[1:], [launches[n]["t"] for n in self.launches_before[1:]])
        # On the trace's clock (the virtual clock less the trace's own time), each step lasts
        # what the replay timed, to within 0.2 ms (20 to 70 ms steps).
        lasts = [b - a for a, b in zip(starts, starts[1:] + [end])]
        for got, want in zip(lasts, out["recorded_step_ns"]):
            self.assertLess(abs(got - want), 200000, (lasts, out["recorded_step_ns"]))
        # The even split the breakdown used before puts the third step 15 launches' worth off.
        even, how = bench_policy.step_starts(ordered, launches, [], None, 5, end)
        self.assertEqual(how, "launches split evenly")
        self.assertEqual(even, [launches[2 * k]["t"] for k in range(5)])
        self.assertGreater(abs(even[2] - starts[2]), 5 * MS)
        # Calls that do not correspond (one missing): each step from its first launch.
        starts2, how = bench_policy.step_starts(ordered[1:], launches, [], marks, 5, end)
        self.assertEqual(how, "the recording's steps (step_lines), each from its first launch")
        self.assertEqual(starts2, [launches[n]["t"] for n in self.launches_before])
        # The library's own step lines, where it has them, win.
        steps = [{"e": "step", "t": t} for t in (1, 2, 3)]
        self.assertEqual(bench_policy.step_starts(ordered, launches, steps, marks, 5, end),
                         ([1, 2, 3], "the library's step markers"))

    def test_printed_breakdown(self):
        build = os.path.dirname(os.path.dirname(need("TR_HOSTOFF")))
        gz = os.path.join(self.tmp.name, "tinylong.jsonl.gz")
        with open(self.path, "rb") as a, gzip.open(gz, "wb") as b:
            b.write(a.read())
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_policy.py"),
                            build, "--dir", self.tmp.name, "--only", "tinylong", "--budget",
                            "70%", "--link", "pcie5", "--breakdown"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(lines[0], "tinylong pcie5 70%: ms per step (moves: count per step); all "
                         "steps / the last three; steps: the recording's steps (step_lines)")
        row = [x.split() for x in lines if x.split()[:1] == ["lookahead"]]
        self.assertEqual(len(row), 1, r.stdout)
        every, last3 = (float(v) for v in row[0][1].split("/"))
        out, _, _, _ = self.recorded()
        steps = out["recorded_step_ns"]
        # The last three recorded steps: 30, 40 and 50 ms and what the moves cost, not the
        # even split's 53 ms.
        self.assertLessEqual(abs(last3 - sum(steps[-3:]) / 3 / MS), 1, r.stdout)
        self.assertLessEqual(abs(every - sum(steps) / 5 / MS), 1, r.stdout)


if __name__ == "__main__":
    sys.exit(pyharness.main(__doc__, sys.modules[__name__]))
