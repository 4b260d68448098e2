#!/usr/bin/env python3
"""Issue 15's defects, each reproduced: output files (links, devices, FIFOs), a fork+exec child's
trace, dlclose then thread exit, and the readers' bounds (report rendering, plans, numbers).

Usage: test_hostile.py CLASS [unittest options]   (meson test --suite hostile runs each class)

Every path comes from the environment meson sets (tests/hostile/meson.build): HO_HOSTOFF,
HO_LIB, HO_SIMCUDA_DIR, HO_DLCLOSE, HO_FORKEXEC. Every test writes only inside its own temporary
directory; the device tests only open /dev/null and /dev/full for writing (harmless) and assert
they are still character devices afterwards. Nothing here removes anything outside its directory.
"""

import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

E = os.environ
TIMEOUT = 240
SCRUB = re.compile(r"^(HOSTOFF_|SIMCUDA_|LD_PRELOAD$|RANK$|OMPI_COMM_WORLD_RANK$|SLURM_PROCID$)")
VICTIM = "precious content that hostoff must never touch\n"


def need(name):
    v = E.get(name, "")
    if not v:
        raise unittest.SkipTest(f"{name} is not set (run through meson test)")
    return v


def clean_env(**extra):
    env = {k: v for k, v in E.items() if not SCRUB.match(k)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sanitizer_preload():
    """An ASan/TSan-built libhostoff.so can only be preloaded behind its runtime."""
    try:
        out = subprocess.run(["ldd", need("HO_LIB")], capture_output=True, text=True).stdout
    except OSError:
        return []
    return re.findall(r"lib[at]san\.so\S* => (\S+)", out)


def preloaded(prog, args=(), **extra):
    """Runs prog under LD_PRELOAD=libhostoff.so on the simulated driver."""
    preload = ":".join(sanitizer_preload() + [need("HO_LIB")])
    env = clean_env(LD_PRELOAD=preload, LD_LIBRARY_PATH=need("HO_SIMCUDA_DIR"),
                    HOSTOFF_MIN_BYTES="1M", **extra)
    return subprocess.run([prog, *args], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


def hostoff(*args, **extra):
    return subprocess.run([need("HO_HOSTOFF"), *args], env=clean_env(**extra),
                          capture_output=True, text=True, timeout=TIMEOUT)


def device_intact(test, path):
    st = os.lstat(path)
    test.assertTrue(stat.S_ISCHR(st.st_mode), f"{path} is no longer a character device")


class Scratch(unittest.TestCase):
    """A temporary directory per test, with a victim file that must keep its content."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="hostoff-hostile-")
        self.dir = self._tmp.name
        self.victim = os.path.join(self.dir, "victim.txt")
        with open(self.victim, "w") as f:
            f.write(VICTIM)

    def tearDown(self):
        self._tmp.cleanup()

    def p(self, name):
        return os.path.join(self.dir, name)

    def assert_victim(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), VICTIM, "the file a planted link points to was changed")

    def assert_no_temporaries(self):
        left = [n for n in os.listdir(self.dir) if ".hostoff-" in n or ".tmp." in n]
        self.assertEqual(left, [], "temporary files were left behind")

    def trace_prog(self):
        return need("HO_FORKEXEC")


# ------------------------------------------------------------------------------------ 2, 3
class LibraryOutputs(Scratch):
    """HOSTOFF_REPORT and HOSTOFF_TRACE: no link followed, no device replaced."""

    def run_prog(self, **extra):
        # "child": the program's plain mode (no fork), one process writing.
        return preloaded(self.trace_prog(), ["child"], HOSTOFF_MODE="track", **extra)

    def test_report_through_planted_link_refused(self):
        link = self.p("report.json")
        os.symlink(self.victim, link)
        r = self.run_prog(HOSTOFF_REPORT=link)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_victim()
        self.assertTrue(os.path.islink(link), "the planted link was replaced or removed")
        lines = [l for l in r.stderr.splitlines() if "HOSTOFF_REPORT" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("symbolic link", lines[0])
        self.assert_no_temporaries()

    def test_trace_through_planted_link_refused(self):
        link = self.p("trace.jsonl")
        os.symlink(self.victim, link)
        r = self.run_prog(HOSTOFF_TRACE=link)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_victim()
        self.assertTrue(os.path.islink(link))
        self.assertEqual(len([l for l in r.stderr.splitlines() if "HOSTOFF_TRACE" in l]), 1,
                         r.stderr)
        self.assert_no_temporaries()

    def test_hard_link_keeps_its_content(self):
        """A regular file at the path is replaced by name: another link to it keeps its data."""
        path = self.p("report.json")
        os.link(self.victim, path)
        r = self.run_prog(HOSTOFF_REPORT=path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_victim()
        with open(path) as f:
            self.assertEqual(json.load(f)["hostoff_report"], 1)
        self.assert_no_temporaries()

    def test_report_and_trace_replace_regular_files(self):
        rep, tr = self.p("r.json"), self.p("t.jsonl")
        for path in (rep, tr):
            with open(path, "w") as f:
                f.write("old\n" * 1000)
        r = self.run_prog(HOSTOFF_REPORT=rep, HOSTOFF_TRACE=tr)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(rep) as f:
            self.assertEqual(json.load(f)["hostoff_report"], 1)
        with open(tr) as f:
            lines = f.read().splitlines()
        self.assertEqual(json.loads(lines[0])["hostoff_trace"], 1)
        self.assertNotIn("old", lines)
        self.assert_no_temporaries()

    def test_dev_null_stays_a_device(self):
        for var in ("HOSTOFF_REPORT", "HOSTOFF_TRACE"):
            with self.subTest(var=var):
                r = self.run_prog(**{var: "/dev/null"})
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn(var, r.stderr)
                device_intact(self, "/dev/null")

    def test_dev_full_reports_the_failure_and_stays(self):
        r = self.run_prog(HOSTOFF_REPORT="/dev/full")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "HOSTOFF_REPORT" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        device_intact(self, "/dev/full")

    def test_fifo_written_in_place(self):
        """A FIFO (and a link to one, like /dev/stdout) receives the report; it stays a FIFO."""
        fifo = self.p("report.fifo")
        os.mkfifo(fifo)
        link = self.p("stdout-like")
        os.symlink(fifo, link)
        got = []

        def reader():
            with open(fifo) as f:
                got.append(f.read())

        t = threading.Thread(target=reader)
        t.start()
        r = self.run_prog(HOSTOFF_REPORT=link)
        t.join(TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        self.assertEqual(json.loads(got[0])["hostoff_report"], 1)

    def test_fifo_without_reader_refused(self):
        fifo = self.p("nobody.fifo")
        os.mkfifo(fifo)
        r = self.run_prog(HOSTOFF_REPORT=fifo)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("FIFO nobody reads", r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))


class CommandOutputs(Scratch):
    """hostoff report, replay --report and gen-trace -o: the same rules."""

    def small_trace(self):
        path = self.p("small.jsonl")
        r = hostoff("gen-trace", "gpt", "--layers", "1", "--hidden", "256", "--seq", "64",
                    "--batch", "1", "--steps", "2", "--vocab", "1024", "-o", path)
        if r.returncode != 0:
            r = hostoff("gen-trace", "gpt", "--steps", "2", "-o", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        return path

    def test_gen_trace_to_dev_full_removes_nothing(self):
        r = hostoff("gen-trace", "gpt", "--steps", "1", "-o", "/dev/full")
        self.assertNotEqual(r.returncode, 0)
        device_intact(self, "/dev/full")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_gen_trace_through_planted_link_refused(self):
        link = self.p("out.jsonl")
        os.symlink(self.victim, link)
        r = hostoff("gen-trace", "gpt", "--steps", "1", "-o", link)
        self.assertNotEqual(r.returncode, 0)
        self.assert_victim()
        self.assertIn("symbolic link", r.stderr)
        self.assert_no_temporaries()

    def test_replay_report_to_dev_null(self):
        trace = self.small_trace()
        r = hostoff("replay", trace, "--budget", "none", "--report", "/dev/null")
        self.assertEqual(r.returncode, 0, r.stderr)
        device_intact(self, "/dev/null")

    def test_replay_report_through_planted_link_refused(self):
        trace = self.small_trace()
        link = self.p("rep.json")
        os.symlink(self.victim, link)
        r = hostoff("replay", trace, "--budget", "none", "--report", link)
        self.assertNotEqual(r.returncode, 0)
        self.assert_victim()
        self.assert_no_temporaries()

    def test_report_page_through_planted_link_refused(self):
        trace = self.small_trace()
        out = self.p("out")
        os.mkdir(out)
        page = os.path.join(out, "small.html")
        os.symlink(self.victim, page)
        r = hostoff("report", trace, "-o", out)
        self.assertNotEqual(r.returncode, 0)
        self.assert_victim()
        self.assertTrue(os.path.islink(page))
        self.assertEqual([n for n in os.listdir(out) if ".hostoff-" in n], [])


# ------------------------------------------------------------------------------------ 5
class ForkExec(Scratch):
    def test_exec_child_does_not_truncate_parent_trace(self):
        trace = self.p("t.jsonl")
        r = preloaded(self.trace_prog(), HOSTOFF_MODE="track", HOSTOFF_TRACE=trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        pids = dict(l.split() for l in r.stdout.splitlines())
        parent, child = int(pids["parent"]), int(pids["child"])
        with open(trace) as f:
            lines = [json.loads(l) for l in f]  # every line whole: no holes, no NULs
        self.assertEqual(lines[0]["pid"], parent)
        allocs = [e for e in lines[1:] if e.get("e") == "alloc"]
        self.assertEqual(len(allocs), 5 + 7, "the parent's trace lost lines")
        with open(f"{trace}.{child}") as f:
            clines = [json.loads(l) for l in f]
        self.assertEqual(clines[0]["pid"], child)
        self.assertEqual(len([e for e in clines if e.get("e") == "alloc"]), 3)
        said = [l for l in r.stderr.splitlines() if "HOSTOFF_TRACE" in l]
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn(f"{trace}.{child}", said[0])

    def test_with_pid_in_path_each_has_its_own(self):
        r = preloaded(self.trace_prog(), HOSTOFF_MODE="track",
                      HOSTOFF_TRACE=self.p("t-%p.jsonl"))
        self.assertEqual(r.returncode, 0, r.stderr)
        pids = dict(l.split() for l in r.stdout.splitlines())
        for who in ("parent", "child"):
            with open(self.p(f"t-{pids[who]}.jsonl")) as f:
                self.assertEqual(json.loads(f.readline())["pid"], int(pids[who]))
        self.assertNotIn("HOSTOFF_TRACE", r.stderr)


# ------------------------------------------------------------------------------------ 4, 6, 8
HEADER = {"hostoff_trace": 1, "device": {"name": "x", "mem_bytes": 1 << 30, "ordinal": 0},
          "pid": 1, "rank": 0, "clock": "simcuda", "ns": "events"}


class BoundedReaders(Scratch):
    def write_lines(self, name, lines):
        path = self.p(name)
        with open(path, "w") as f:
            for l in lines:
                f.write((l if isinstance(l, str) else json.dumps(l)) + "\n")
        return path

    def report(self, path, timeout=60):
        r = subprocess.run([need("HO_HOSTOFF"), "report", path, "-o", self.p("out")],
                           env=clean_env(), capture_output=True, text=True, timeout=timeout)
        return r

    def test_large_duration_renders(self):
        """A valid two-line trace: an allocation whose call lasted nearly 2^64 ns."""
        path = self.write_lines("d.jsonl", [HEADER, {"e": "alloc", "t": 10, "id": 1,
                                                     "bytes": 4096, "d": 2**64 - 1000}])
        r = self.report(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(self.p("out/d.html")), 1000)

    def test_infinite_link_rate_refused_at_once(self):
        h = dict(HEADER)
        path = self.write_lines("inf.jsonl", [json.dumps(h)[:-1] +
                                              ',"link_gbps":{"h2d":1e999,"d2h":55,"duplex":88}}',
                                              {"e": "alloc", "t": 10, "id": 1, "bytes": 4096,
                                               "d": 5},
                                              {"e": "evict", "t": 20, "ns": 100, "id": 1,
                                               "bytes": 4096}])
        r = self.report(path, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("number out of range", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_huge_finite_rates_and_sizes_stay_bounded(self):
        h = dict(HEADER, link_gbps={"h2d": 1e300, "d2h": 1e-300, "duplex": 1e308})
        ev = [{"e": "alloc", "t": 10, "id": 1, "bytes": 2**63, "d": 5},
              {"e": "alloc", "t": 11, "id": 2, "bytes": 2**63, "d": 5},
              {"e": "alloc", "t": 12, "id": 3, "bytes": 2**64 - 1, "d": 5},
              {"e": "evict", "t": 20, "ns": 2**64 - 1, "id": 1, "bytes": 2**63},
              {"e": "stall", "t": 2**64 - 2, "ns": 2**64 - 1, "id": 2, "why": "demand"},
              {"e": "free", "t": 30, "id": 3, "d": 1}]
        path = self.write_lines("big.jsonl", [h] + ev)
        r = self.report(path, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(os.path.getsize(self.p("out/big.html")), 8 << 20)

    def test_long_numbers_keep_their_exponent(self):
        """A number longer than 63 characters: read whole (it used to lose its exponent)."""
        rate = "5" + "0" * 70 + "e-68"  # 5e70 * 1e-68 = 500, 75 characters
        self.assertEqual(float(rate), 500.0)
        h = json.dumps(HEADER)[:-1] + ',"link_gbps":{"h2d":%s,"d2h":%s,"duplex":800}}' % (
            rate, rate)
        path = self.write_lines("long.jsonl", [h, {"e": "alloc", "t": 10, "id": 1,
                                                   "bytes": 4096, "d": 5}])
        r = self.report(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.p("out/long.html")) as f:
            self.assertIn("peak 500 GB/s each way", f.read())
        too_long = "1" + "0" * 600
        path = self.write_lines("toolong.jsonl", [json.dumps(HEADER)[:-1] +
                                                  ',"x":%s}' % too_long])
        r = self.report(path)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("longer than 511", r.stderr)

    def test_tiny_oracle_plan_with_huge_counts(self):
        plan = self.p("plan")
        with open(plan, "w") as f:
            f.write("hostoff_oracle_plan 1\nlaunches 4294967296 buffers 4294967296\n")
        r = preloaded(need("HO_FORKEXEC"), ["child"], HOSTOFF_POLICY="oracle",
                      HOSTOFF_ORACLE_PLAN=plan, HOSTOFF_BUDGET="4M")
        self.assertEqual(r.returncode, 0, r.stderr)
        said = [l for l in r.stderr.splitlines() if "HOSTOFF_ORACLE_PLAN" in l]
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn("than the file holds", said[0])


class Budgets(unittest.TestCase):
    """One grammar (docs/units.md) in the command's options: refusals name the option and why."""

    def test_replay_budget_refusals(self):
        for text, why in (("0x32%", "hexadecimal"), (" 50%", "blanks"), ("+50%", "sign"),
                          ("1e-300%", "exponent"), ("200%", "at most 100"), ("0", "0 bytes")):
            with self.subTest(budget=text):
                r = hostoff("replay", "nonexistent.jsonl", "--budget", text)
                self.assertEqual(r.returncode, 2)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn("--budget", lines[0])
                self.assertIn(why, lines[0])

    def test_run_budget_refusals(self):
        r = hostoff("run", "--budget", "1e-300%", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--budget", r.stderr)
        self.assertIn("exponent", r.stderr)
        r = hostoff("run", "--host-limit", "50%", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no base", r.stderr)

    def test_demo_budget_refusal(self):
        r = hostoff("demo", "--budget", "0x32%")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("demo: --budget 0x32%: hexadecimal", r.stderr)

    def test_library_budget_refusal_keeps_running(self):
        r = preloaded(need("HO_FORKEXEC"), ["child"], HOSTOFF_BUDGET="1e-300%")
        self.assertEqual(r.returncode, 0, r.stderr)
        said = [l for l in r.stderr.splitlines() if "HOSTOFF_BUDGET" in l]
        self.assertEqual(len(said), 1, r.stderr)
        self.assertIn("exponent", said[0])


# ------------------------------------------------------------------------------------ 7
class Dlclose(unittest.TestCase):
    def test_thread_exit_after_dlclose(self):
        env = clean_env(LD_LIBRARY_PATH=need("HO_SIMCUDA_DIR"), HOSTOFF_MODE="track",
                        HOSTOFF_MIN_BYTES="1M")
        pre = sanitizer_preload()
        if pre:
            env["LD_PRELOAD"] = ":".join(pre)
        r = subprocess.run([need("HO_DLCLOSE"), need("HO_LIB")], env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
        self.assertEqual(r.returncode, 0, f"{r.returncode}\n{r.stdout}\n{r.stderr}")
        self.assertIn("stays loaded", r.stdout)

    def test_library_is_marked_nodelete(self):
        out = subprocess.run(["readelf", "-d", need("HO_LIB")], capture_output=True,
                             text=True).stdout
        self.assertRegex(out, r"FLAGS_1.*NODELETE")


if __name__ == "__main__":
    cls = sys.argv.pop(1)
    unittest.main(defaultTest=cls, verbosity=2)
