#!/usr/bin/env python3
"""Issue 16: the tool tells the user the truth, at once and in one place.

Usage: test_truth.py CLASS [unittest options]   (meson test --suite report runs each class)

Each test reproduces one of the issue's numbered points on its own program (truth_prog.c: NBUF
buffers of MIB MiB, a kernel over each forwards and backwards per step) or a generated trace:
  Verdict   (3) the slowdown, the memory saved and what dominated the loss, the same in the
            terminal summary, hostoff report --json and the HTML page (also in headless Chromium)
  Survive   (1) a job ended by SIGKILL, SIGTERM or SIGINT leaves a trace that renders, and a
            report on SIGTERM/SIGINT
  Advise    hostoff advise on the demo's job and on a generated GPT job: the curve, the table,
            the page (in headless Chromium)
  Mistakes  (2) a misspelt variable, (4) a loop over budgets, (5) a budget below one allocation,
            (9) the smaller things
  Readme    (6) the README's replay example prints what it says
  Budgets   (7) one budget grammar: --name=VALUE everywhere, the base of a percentage named in
            each subcommand's help, units printed as given, each refusal saying what was wrong
  Recipes   (10) contrib/pytorch: the PyTorch version and when install() may run are checked;
            build() works without a toolkit's stub (the driver's libcuda.so.1); the README
            names the memory fraction the garbage-collection threshold needs
  Figures   (8) the Perfetto trace's kernel slices, copies and steps; the page's step marks and
            hover details; allocation sites by function and file:line
Paths come from the environment tests/report/meson.build sets (RP_*, RP_TRUTH_PROG).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pyharness  # noqa: E402
from pyharness import clean_env, need  # noqa: E402
from test_report import chromium, hostoff, small_gpt  # noqa: E402

TIMEOUT = 240


def sim_env(**extra):
    return clean_env(LD_LIBRARY_PATH=need("RP_SIMCUDA_DIR"), SIMCUDA_DATA="sparse", **extra)


def run(d, *cmd, opts=(), env=None):
    return subprocess.run([need("RP_HOSTOFF"), "run", *map(str, opts), "--", *map(str, cmd)],
                          env=env or sim_env(), cwd=d, capture_output=True, text=True,
                          timeout=TIMEOUT)


def prog(*args):
    return [need("RP_TRUTH_PROG"), *map(str, args)]


def slowdown_of(text):
    m = re.search(r"slowdown +([\d.]+)x", text)
    return float(m.group(1)) if m else None


def saved_of(text):
    m = re.search(r"the device held at most ([\d.]+ [kMG]?B) instead of ([\d.]+ [kMG]?B): "
                  r"([\d.]+ [kMG]?B) saved \((\d+)%\)", text)
    return m.groups() if m else None


def page_verdict(html_path):
    page = open(html_path).read()
    m = re.search(r'<div class="headline" data-verdict="([^"]*)">(.*?)</div>', page)
    assert m, "no headline on the page"
    verdict = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<")
                         .replace("&gt;", ">").replace("&amp;", "&"))
    text = re.sub(r"<[^>]+>", "\n", m.group(2)).replace("&amp;", "&")
    return verdict, text


def chrome_text(html_path):
    """The page's text as headless Chromium lays it out (None: no Chromium)."""
    exe = chromium()
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu",
                            f"--user-data-dir={profile}", "--no-first-run", "--dump-dom",
                            "file://" + os.path.abspath(html_path)],
                           capture_output=True, text=True, timeout=TIMEOUT)
    return r.stdout


# ------------------------------------------------------------------------------- (3)

class Verdict(unittest.TestCase):
    """A program slowed about 3x by offload: every output says so, with the same figures."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        # 8 x 256 MiB under 1 GiB with lru: each step evicts and restores every buffer.
        cls.r = run(cls.dir, *prog(8, 256, 6),
                    opts=("--budget", "1G", "--policy", "lru", "--report", "r.json",
                          "--trace", "t.jsonl"))
        cls.rep = hostoff("report", "--json", os.path.join(cls.dir, "r.json"),
                          os.path.join(cls.dir, "t.jsonl"), "-o", cls.dir, "--name", "page")
        cls.html = os.path.join(cls.dir, "page.html")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_terminal_states_the_slowdown(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr)
        s = slowdown_of(self.r.stderr)
        self.assertIsNotNone(s, self.r.stderr)
        # Without offload a step is 16 kernels of 2 ms; with it, 1 GiB each way over 55 GB/s
        # at least, and lru restores on demand: well over twice as long.
        self.assertGreater(s, 2.0, self.r.stderr)
        self.assertIn("a step took", self.r.stderr)
        self.assertIn("32.0 ms without", self.r.stderr)
        self.assertRegex(self.r.stderr, r"loss +mostly ")

    def test_no_baseline_skips_the_replay_and_says_so(self):
        """--no-baseline: the same run, no replay with no budget; the terminal says the slowdown
        was not measured rather than printing one, and everything else is as before."""
        with tempfile.TemporaryDirectory() as d:
            r = run(d, *prog(8, 256, 6),
                    opts=("--budget", "1G", "--policy", "lru", "--trace", "t.jsonl",
                          "--no-baseline"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(slowdown_of(r.stderr), r.stderr)
        self.assertRegex(r.stderr, r"slowdown +not measured")
        self.assertNotIn("without (a replay", r.stderr)
        # The same moves as the run with the replay (virtual time: the same on any machine).
        moved = [l for l in self.r.stderr.splitlines() if "moved " in l and " back (" in l]
        self.assertEqual(len(moved), 1, self.r.stderr)
        self.assertIn(moved[0], r.stderr)

    def test_json_page_and_terminal_agree(self):
        v = json.loads(self.rep.stdout.splitlines()[0])["verdict"]
        page, text = page_verdict(self.html)
        self.assertEqual(page, v, "the page and hostoff report --json")
        # The run's own summary replayed the same trace: the same figures.
        s = slowdown_of(self.r.stderr)
        self.assertAlmostEqual(v["slowdown"], s, delta=0.006)
        self.assertEqual(saved_of(text), saved_of(self.r.stderr))
        # 16 kernels of 2 ms, and the replayed calls' own host time (2.5 us each).
        self.assertAlmostEqual(v["step_without_ns"], 32000000, delta=100000)
        self.assertGreaterEqual(v["saved_bytes"], 1 << 30)

    def test_advice_fits_the_facts(self):
        v = json.loads(self.rep.stdout.splitlines()[0])["verdict"]
        advice = " ".join(v["advice"])
        self.assertNotIn("micro-batch", advice)
        # The budget holds four buffers: one kernel uses one, so no "tight for one kernel".
        self.assertNotIn("One kernel uses", advice)
        self.assertTrue(v["advice"], "a 3x slowdown gets advice")

    def test_page_in_chromium_shows_the_same(self):
        dom = chrome_text(self.html)
        if dom is None:
            self.skipTest("no chromium (Debian: apt-get install chromium)")
        s = slowdown_of(self.r.stderr)
        self.assertIn(f"{s:.2f}x", dom)
        self.assertEqual(saved_of(dom), saved_of(self.r.stderr))

    def test_demo_terminal_and_page_agree(self):
        with tempfile.TemporaryDirectory() as d:
            out = hostoff("demo", "-o", d).stdout
            page, text = page_verdict(os.path.join(d, "hostoff-demo.html"))
            self.assertAlmostEqual(page["slowdown"], slowdown_of(out), delta=0.006)
            self.assertEqual(saved_of(text), saved_of(out))
            # The terminal's words follow its figure (the demo's slowdown itself is
            # test_report.Demo.test_demo_offload_hides).
            if page["slowdown"] < 1.05:
                self.assertIn("under 5%: the moves hid behind the kernels", out)
            else:
                self.assertNotIn("the moves hid behind the kernels", out)
            # The page does not contradict it: no "budget is tight", no micro-batch.
            html = open(os.path.join(d, "hostoff-demo.html")).read()
            self.assertNotIn("micro-batch", html)
            self.assertNotIn("tight", html)


# ------------------------------------------------------------------------------- (1)

class Survive(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def killed(self, sig):
        env = sim_env(LD_PRELOAD=need("RP_LIB"), HOSTOFF_BUDGET="1G", HOSTOFF_TRACE="k.jsonl",
                      HOSTOFF_REPORT="k.json")
        pre = pyharness.sanitizer_runtimes(need("RP_LIB"))
        if pre:
            env["LD_PRELOAD"] = ":".join(pre + [need("RP_LIB")])
        p = subprocess.Popen(prog(8, 256, 4, "hang"), cwd=self.dir, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline(), "ready\n")
        p.send_signal(sig)
        p.wait(timeout=TIMEOUT)
        self.assertEqual(p.returncode, -sig, "the signal still ends the process")
        return os.path.join(self.dir, "k.jsonl"), os.path.join(self.dir, "k.json")

    def test_sigkill_trace_renders(self):
        trace, report = self.killed(signal.SIGKILL)
        self.assertGreater(os.path.getsize(trace), 0)
        self.assertTrue(open(trace).read().endswith("\n"), "ends with a whole line")
        r = hostoff("report", trace, "-o", self.dir)
        self.assertIn("slowdown", r.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "k.html")))
        kinds = [json.loads(l).get("e") for l in open(trace)]
        self.assertGreaterEqual(kinds.count("alloc"), 8)
        self.assertGreater(kinds.count("launch"), 16, "the steps before the kill are there")

    def test_sigterm_and_sigint_write_the_report(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            trace, report = self.killed(sig)
            rep = json.load(open(report))
            self.assertGreater(rep["counts"]["launches"], 16, sig)
            self.assertGreater(rep["counts"]["evictions"], 0, sig)
            r = hostoff("report", report, trace, "-o", self.dir)
            self.assertIn("slowdown", r.stdout)
            os.remove(report)
            os.remove(trace)

    def test_a_trace_cut_mid_line_renders_to_its_last_whole_line(self):
        trace, _ = self.killed(signal.SIGTERM)
        data = open(trace, "rb").read()
        lines = data.split(b"\n")
        for cut in (len(lines[0]) + 20, len(data) // 2, len(data) - 3):
            path = os.path.join(self.dir, "cut.jsonl")
            open(path, "wb").write(data[:cut])
            r = hostoff("report", path, "-o", self.dir, "--no-baseline")
            self.assertIn("was cut short", r.stderr)
            self.assertTrue(os.path.exists(os.path.join(self.dir, "cut.html")))

    def test_empty_and_missing_files_say_why(self):
        empty = os.path.join(self.dir, "e.jsonl")
        open(empty, "w").close()
        r = hostoff("report", empty, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("is empty", r.stderr)
        r = hostoff("report", os.path.join(self.dir, "nope.json"), check=False)
        self.assertIn("No such file or directory", r.stderr)


# --------------------------------------------------------------------------- advise

def advise_table(text):
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)% +([\d.]+ [kMG]?B) +(\S+ \S+) +([\d.]+) +(\S+ \S+) +([\d.]+)",
                     line)
        if m:
            rows[float(m.group(1))] = (float(m.group(4)), float(m.group(6)))
    return rows


class Advise(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, trace, *opts):
        r = hostoff("advise", trace, "-o", self.dir, *opts)
        rows = advise_table(r.stdout)
        self.assertGreaterEqual(len(rows), 8, r.stdout)
        for pct, (step, limit) in rows.items():
            self.assertGreaterEqual(step + 0.011, limit, f"{pct}%: a replay beats the limit")
            self.assertGreaterEqual(limit, 1.0)
        self.assertRegex(r.stdout, r"within 5%: ")
        self.assertRegex(r.stdout, r"within 20%: ")
        j = json.loads(hostoff("advise", trace, "--json", "--budgets=90,50", "-o",
                               self.dir, *opts).stdout)
        self.assertEqual([row["pct"] for row in j["rows"]], [90, 50])
        self.assertGreater(j["unconstrained_step_ns"], 0)
        stem = os.path.splitext(os.path.basename(trace))[0]
        html = os.path.join(self.dir, stem + ".advice.html")
        page = open(html).read()
        self.assertIn('data-fig="advice"', page)
        self.assertEqual(page.count("<circle"), 2 * 2 + sum(1 for r in j["rows"]
                                                            if r["remat_ns"] is not None))
        return html

    def test_demo_job(self):
        trace = os.path.join(self.dir, "demo.jsonl")
        hostoff("gen-trace", "gpt", "--layers", 6, "--hidden", 1536, "--heads", 12, "--seq",
                65536, "--micro-batch", 1, "--vocab", 32000, "--steps", 6, "-o", trace)
        self.check(trace)

    def test_generated_gpt_job_in_chromium(self):
        trace = os.path.join(self.dir, "gpt.jsonl")
        small_gpt(trace, steps=4)
        # Its buffers are a few MiB: under the default (auto, 12.8 MB) the low budgets of the
        # sweep would leave the engine less than its largest buffer.
        html = self.check(trace, "--min-bytes=4M")
        dom = chrome_text(html)
        if dom is None:
            self.skipTest("no chromium (Debian: apt-get install chromium)")
        # Laid out: the curve's points are there with their tooltips.
        self.assertIn("the unconstrained step</title>", dom)
        self.assertIn('class="series-replay"', dom)

    def test_a_recording_is_advised_on_its_steady_step(self):
        """A recording without markers names its steps (step_lines): advise takes its steady
        step (the mean of the last three) as the replay reports it, not the whole replay's mean,
        which counts the one-time warm-up."""
        trace = os.path.join(self.dir, "rec.jsonl")
        body, lines = [], []
        for k, ms in enumerate([9, 1, 1, 1, 1]):  # a slow first step: warm-up
            lines.append(len(body) + 2)
            if k == 0:
                body += [{"e": "alloc", "t": 0, "id": i, "bytes": 16 << 20} for i in (1, 2)]
            body += [{"e": "launch", "t": 0, "s": 0, "k": "a", "ns": ms * 1000000, "use": [1]},
                     {"e": "launch", "t": 0, "s": 0, "k": "b", "ns": 1000000, "use": [2]},
                     {"e": "sync", "t": 0}]
        body += [{"e": "free", "t": 0, "id": i} for i in (1, 2)]
        header = {"hostoff_trace": 1, "device": {"name": "test", "mem_bytes": 1 << 34},
                  "recorder": {"steps": 5, "step_lines": lines}}
        with open(trace, "w") as f:
            f.write("\n".join(json.dumps(o) for o in [header, *body]) + "\n")
        none = json.loads(hostoff("replay", trace, "--budget", "none", "--json").stdout)
        steady = none["steady_recorded_step_ns"]
        self.assertLess(steady * 5, none["replay_ns"])  # the first step weighs on the mean
        j = json.loads(hostoff("advise", trace, "--json", "--budgets=90", "-o", self.dir).stdout)
        self.assertEqual(j["unconstrained_step_ns"], steady)

    def test_bad_budgets_say_what_is_wrong(self):
        trace = os.path.join(self.dir, "gpt.jsonl")
        small_gpt(trace)
        r = hostoff("advise", trace, "--budgets", "90,150", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("150: a percentage must be at most 100%", r.stderr)


# ---------------------------------------------------------------------- (2) (4) (5) (9)

class Mistakes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_misspelt_variable_is_named(self):
        r = run(self.dir, *prog(2, 64, 1), env=sim_env(HOSTOFF_BUDGTE="128M"))
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "HOSTOFF_BUDGTE" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("did you mean HOSTOFF_BUDGET?", lines[0])
        self.assertIn("HOSTOFF_BUDGET is none", lines[0])

    def test_a_loop_over_budgets_counts_each_run_alone(self):
        os.mkdir(os.path.join(self.dir, "sweep"))
        for budget in ("1G", "512M"):
            r = run(self.dir, *prog(4, 256, 2),
                    opts=("--budget", budget, "--report", "sweep/r-%p.json"))
            self.assertEqual(r.returncode, 0, r.stderr)
            reports = [l for l in r.stderr.splitlines() if l.startswith("hostoff: report ")]
            self.assertEqual(len(reports), 1, r.stderr)
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "sweep"))), 2)

    def test_budget_below_one_allocation_says_so(self):
        r = run(self.dir, *prog(2, 256, 1), opts=("--budget", "128M"))
        self.assertEqual(r.returncode, 3, r.stderr)
        lines = [l for l in r.stderr.splitlines() if "larger than HOSTOFF_BUDGET" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("268435456 bytes", lines[0])

    def test_run_without_a_command_is_short(self):
        r = subprocess.run([need("RP_HOSTOFF"), "run", "--budget", "1G"], capture_output=True,
                           text=True, env=clean_env())
        self.assertEqual(r.returncode, 2)
        self.assertLessEqual(len(r.stderr.splitlines()), 3, r.stderr)
        self.assertIn("no command given", r.stderr)

    def test_missing_program_is_not_blamed_on_cuda(self):
        r = run(self.dir, "/nonexistent/prog")
        self.assertEqual(r.returncode, 127)
        self.assertNotIn("made no CUDA call", r.stderr)
        self.assertIn("cannot run /nonexistent/prog", r.stderr)

    def test_replay_of_a_trace_without_steps_reports_no_steady_step(self):
        trace = os.path.join(self.dir, "nosteps.jsonl")
        small_gpt(trace)
        with open(trace) as f, open(os.path.join(self.dir, "n.jsonl"), "w") as g:
            for line in f:
                if '"e":"step"' not in line.replace(" ", ""):
                    g.write(line)
        r = hostoff("replay", os.path.join(self.dir, "n.jsonl"), "--budget", "none")
        self.assertNotIn("steady step", r.stdout)
        self.assertIn("no steps marked", r.stdout)


# ------------------------------------------------------------------------------- (6)

class Readme(unittest.TestCase):
    def test_replay_prints_the_ratio_and_sane_peaks(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "gpt.jsonl")
            peak = small_gpt(trace, steps=4)
            r = hostoff("replay", trace, "--budget", "70%", "--policy", "lru")
            m = re.search(r"([\d.]+)x the step without offload", r.stdout)
            self.assertIsNotNone(m, r.stdout)
            self.assertGreaterEqual(float(m.group(1)), 1.0)
            out = hostoff("replay", trace, "--budget", "none").stdout
            m = re.search(r"device +peak ([\d.]+) MB", out)
            self.assertIsNotNone(m, out)
            self.assertLessEqual(float(m.group(1)) * 1e6, peak * 1.001,
                                 "--budget none: the peak printed is the trace's buffers'")

    def test_readme_quotes_what_the_replay_prints(self):
        readme = open(os.path.join(need("RP_SOURCE"), "README.md")).read()
        m = re.search(r"hostoff replay gpt.jsonl --budget 70%[^\n]*# ([\d.]+)x", readme)
        self.assertIsNotNone(m, "the README's replay example quotes its ratio")
        self.assertIn("hostoff advise gpt.jsonl", readme)


# ------------------------------------------------------------------------------- (7)

class Budgets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.trace = os.path.join(cls.dir, "gpt.jsonl")
        cls.peak = small_gpt(cls.trace)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_equals_form_everywhere(self):
        a = json.loads(hostoff("replay", self.trace, "--budget=70%", "--policy=lru",
                               "--link=pcie5", "--json").stdout)
        b = json.loads(hostoff("replay", self.trace, "--budget", "70%", "--policy", "lru",
                               "--json").stdout)
        self.assertEqual(a, b)
        out = os.path.join(self.dir, "eq.jsonl")
        hostoff("gen-trace", "gpt", "--layers=2", "--hidden=512", "--heads=8", "--seq=1024",
                "--steps=2", "-o", out)
        hostoff("report", "--no-baseline", f"--name=eq", f"--link=c2c", out)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "eq.html")))
        r = hostoff("advise", self.trace, "--budgets=90,60", "--link=pcie5", "--min-bytes=4M",
                    "--json")
        self.assertEqual(len(json.loads(r.stdout)["rows"]), 2)

    def test_sizes_of_the_grammar_are_taken(self):
        for text, gib in (("1.5G", 1.5), ("1GiB", 1.0), ("0.25G", 0.25)):
            j = json.loads(hostoff("replay", self.trace, "--budget", text, "--json").stdout)
            self.assertEqual(j["budget_bytes"], int(gib * (1 << 30)), text)

    def test_refusals_say_what_was_wrong(self):
        for text, said in (("70", "a bare number is bytes"), ("200%", "at most 100%"),
                           ("12X", "--budget 12X: "), ("-1G", "--budget -1G: ")):
            r = hostoff("replay", self.trace, "--budget", text, check=False)
            self.assertEqual(r.returncode, 2, text)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(said, lines[0])
            self.assertIn("of the trace's peak", lines[0], "the refusal names the base")
        r = run(self.dir, "true", opts=("--budget=70",))
        self.assertEqual(r.returncode, 2)
        self.assertIn("70% for a percentage of the device's memory", r.stderr)

    def test_help_names_the_base_of_a_percentage(self):
        bases = {"run": "of the device's memory", "replay": "of the trace's peak",
                 "demo": "of the job's peak", "advise": "of the trace's peak"}
        for cmd, base in bases.items():
            text = re.sub(r"\s+", " ", hostoff(cmd, "--help").stdout)
            self.assertIn(base, text, cmd)
            self.assertIn("--name=VALUE", text, cmd)

    def test_units_printed_as_given(self):
        # The small job's buffers are a few MiB: 4M keeps them the engine's (under auto, 12.8 MB,
        # 200M would leave the engine less than its largest buffer).
        out = hostoff("replay", self.trace, "--budget", "200M", "--min-bytes", "4M").stdout
        self.assertIn("budget 200M = 209.72 MB", out)
        out = hostoff("replay", self.trace, "--budget", "70%").stdout
        self.assertRegex(out, r"budget [\d.]+ MB \(70% of the peak\)")


# ------------------------------------------------------------------------------- (8)

class Figures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        r = run(cls.dir, *prog(4, 256, 3),
                opts=("--budget", "600M", "--report", "f.json", "--trace", "f.jsonl"))
        assert r.returncode == 0, r.stderr
        hostoff("report", os.path.join(cls.dir, "f.json"), os.path.join(cls.dir, "f.jsonl"),
                "-o", cls.dir, "--no-baseline")
        cls.page = open(os.path.join(cls.dir, "f.html")).read()
        with open(os.path.join(cls.dir, "f.perfetto.json")) as f:
            cls.events = json.load(f)["traceEvents"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_perfetto_reads_like_a_timeline(self):
        from test_report import validate_perfetto
        problems, _ = validate_perfetto(os.path.join(self.dir, "f.perfetto.json"))
        self.assertEqual(problems, [])
        kernels = [e for e in self.events if e.get("cat") == "kernel"]
        self.assertEqual(len(kernels), 3 * 2 * 4, "every launch is a slice")
        self.assertTrue(all(e["name"] == "touch" and e["args"]["nbuffers"] == 1 and
                            len(e["args"]["buffers"]) == 1 for e in kernels))
        # A stream runs one kernel at a time.
        ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels)
        for (s0, e0), (s1, _) in zip(ends, ends[1:]):
            self.assertLessEqual(e0, s1 + 1e-3)
        steps = [e for e in self.events if e.get("cat") == "step"]
        self.assertEqual([e["name"] for e in steps], ["step 0", "step 1", "step 2"])
        names = {e["args"]["name"] for e in self.events if e["ph"] == "M"}
        self.assertTrue({"copies to host", "copies to device", "steps",
                         "stream 0: kernels"} <= names, names)
        copies = {e["tid"] for e in self.events if e.get("cat") == "copy"}
        self.assertEqual(len(copies), 2, "both directions")
        counters = {e["name"] for e in self.events if e["ph"] == "C"}
        self.assertTrue({"device resident", "host resident", "budget"} <= counters)

    def test_page_marks_steps_and_has_hover_details(self):
        self.assertEqual(self.page.count('class="step-mark"'), 3 * 3, "3 steps in 3 figures")
        self.assertIn("<title>step 1: ", self.page)
        self.assertIn('class="hover"', self.page)
        self.assertRegex(self.page, r"<title>from [\d.]+ \w+: on the device [\d.]+ [kMG]?B")

    def test_sites_by_function_and_line(self):
        if shutil.which("addr2line") is None:
            self.skipTest("no addr2line (Debian: binutils)")
        self.assertRegex(self.page, r"main \(truth_prog\.c:\d+\)")


# ------------------------------------------------------------------------------ (10)

class Recipes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        sys.path.insert(0, os.path.join(need("RP_SOURCE"), "contrib", "pytorch"))
        import importlib
        import hostoff_torch
        self.ht = importlib.reload(hostoff_torch)

    def tearDown(self):
        sys.modules.pop("torch", None)
        self.tmp.cleanup()

    def fake_torch(self, version, initialised):
        import types
        torch = types.ModuleType("torch")
        torch.__version__ = version
        torch.cuda = types.SimpleNamespace(is_initialized=lambda: initialised,
                                           memory=types.SimpleNamespace())
        sys.modules["torch"] = torch

    def test_install_checks_version_and_timing(self):
        lib = os.path.join(self.dir, "libfake.so")
        open(lib, "w").close()
        self.fake_torch("1.13.1+cu117", False)
        with self.assertRaisesRegex(RuntimeError, r"PyTorch 2\.0 or later"):
            self.ht.install(lib)
        self.fake_torch("2.3.0", True)
        with self.assertRaisesRegex(RuntimeError, "before CUDA initialises"):
            self.ht.install(lib)

    def test_build_without_a_toolkit_stub(self):
        # A pip user: cuda.h somewhere, no lib64/stubs; the driver's libcuda.so.1 in ldconfig.
        root = os.path.join(self.dir, "cuda")
        os.mkdir(root)
        os.symlink(need("RP_CUDA_INCLUDE"), os.path.join(root, "include"))
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        driver = os.path.join(need("RP_SIMCUDA_DIR"), "libcuda.so.1")
        with open(os.path.join(bindir, "ldconfig"), "w") as f:
            f.write(f"#!/bin/sh\necho '\tlibcuda.so.1 (libc6,x86-64) => {driver}'\n")
        os.chmod(os.path.join(bindir, "ldconfig"), 0o755)
        old = os.environ.get("PATH", "")
        os.environ["PATH"] = bindir + ":" + old
        try:
            out = self.ht.build(out=os.path.join(self.dir, "libhostoff_torch.so"), cuda_root=root)
        finally:
            os.environ["PATH"] = old
        r = subprocess.run(["readelf", "-d", str(out)], capture_output=True, text=True)
        if r.returncode == 0:
            self.assertIn("libcuda.so.1", r.stdout)
        self.assertTrue(os.path.getsize(out) > 0)

    def test_readme_says_what_the_settings_need(self):
        text = open(os.path.join(need("RP_SOURCE"), "contrib", "pytorch", "README.md")).read()
        self.assertIn("PyTorch 2.0 or later", text)
        self.assertIn("before CUDA initialises", text)
        self.assertNotRegex(text, r"before the first CUDA\s+allocation")
        self.assertIn("set_per_process_memory_fraction(1.0)", text)
        self.assertIn("ldconfig -p", text)


if __name__ == "__main__":
    sys.exit(pyharness.main(__doc__, sys.modules[__name__]))
