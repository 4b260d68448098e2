#!/usr/bin/env python3
"""Tests of the hostoff command as a person uses it: run, report, demo, their help and manual page.

Usage: test_report.py CLASS [unittest options]   (meson test --suite report runs each class)
Exit status 77 (meson's "skipped") when every test of the class was skipped.

Builds nothing. Every path comes from the environment meson sets (tests/report/meson.build):
  RP_HOSTOFF   the hostoff command         RP_REPLAYER     hostoff-replayer
  RP_LIB       libhostoff.so               RP_SIMCUDA_DIR  the directory of the simulated libcuda.so.1
  RP_SCHEMA    tests/trace/trace_schema.py RP_SOURCE       the source tree (docs/, src/options.def)
  RP_CHROMIUM  a Chromium to use (optional; else chromium or chromium-browser on PATH)
"""

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pngread  # noqa: E402
import pyharness  # noqa: E402  (tests/pyharness.py: what the harnesses share)
from pyharness import clean_env, need, sanitizer_runtimes  # noqa: E402

E = os.environ
TIMEOUT = 240


def hostoff(*args, env=None, cwd=None, check=True):
    r = subprocess.run([need("RP_HOSTOFF"), *map(str, args)], env=env or clean_env(), cwd=cwd,
                       capture_output=True, text=True, timeout=TIMEOUT)
    if check and r.returncode != 0:
        raise AssertionError(f"hostoff {' '.join(map(str, args))}: exit {r.returncode}\n"
                             f"{r.stdout}\n{r.stderr}")
    return r


def load_schema():
    spec = importlib.util.spec_from_file_location("trace_schema", need("RP_SCHEMA"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def small_gpt(path, steps=3):
    """A small GPT training trace (replays in well under a second); returns its peak bytes."""
    hostoff("gen-trace", "gpt", "--layers", 2, "--hidden", 512, "--heads", 8, "--seq", 1024,
            "--micro-batch", 4, "--vocab", 8000, "--steps", steps, "-o", path)
    with open(path) as f:
        return json.loads(f.readline())["generator"]["peak_bytes"]


def sim_env(**extra):
    """What a CUDA program needs to run on the simulated driver in sparse mode."""
    return clean_env(LD_LIBRARY_PATH=need("RP_SIMCUDA_DIR"), SIMCUDA_DATA="sparse", **extra)


# --------------------------------------------------------------------------- hostoff run

class Run(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_cmd(self, *cmd, opts=(), env=None):
        return subprocess.run([need("RP_HOSTOFF"), "run", *map(str, opts), "--", *cmd],
                              env=env or clean_env(), cwd=self.dir, capture_output=True,
                              text=True, timeout=TIMEOUT)

    def test_exit_status_passes_through(self):
        for code in (0, 1, 3, 42):
            r = self.run_cmd("sh", "-c", f"exit {code}")
            self.assertEqual(r.returncode, code, r.stderr)
            self.assertIn(f"exited with status {code}", r.stderr)

    def test_signal_is_128_plus_n(self):
        r = self.run_cmd("sh", "-c", "kill -9 $$")
        self.assertEqual(r.returncode, 137, r.stderr)
        r = self.run_cmd("sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 143, r.stderr)
        self.assertIn("signal 15", r.stderr)

    def test_missing_command(self):
        r = self.run_cmd("/nonexistent/program")
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run /nonexistent/program", r.stderr)

    def env_of_child(self, opts=(), **env_extra):
        r = self.run_cmd("env", opts=opts, env=clean_env(**env_extra))
        self.assertEqual(r.returncode, 0, r.stderr)
        env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        return env, r.stderr

    def test_environment_passes_through(self):
        # (a sanitized hostoff needs its runtime ahead of anything preloaded into it)
        preload = ":".join(sanitizer_runtimes(need("RP_HOSTOFF")) + ["libm.so.6"])
        env, err = self.env_of_child(
            opts=("--budget", "2G", "--policy=lookahead", "--min-bytes", "8M", "--log", "info"),
            HOSTOFF_TEST_MARK="kept", SOME_VAR="a b=c", LD_PRELOAD=preload)
        self.assertEqual(env["SOME_VAR"], "a b=c")
        self.assertEqual(env["HOSTOFF_TEST_MARK"], "kept")
        self.assertEqual(env["HOSTOFF_BUDGET"], "2G")
        self.assertEqual(env["HOSTOFF_POLICY"], "lookahead")
        self.assertEqual(env["HOSTOFF_MIN_BYTES"], "8M")
        self.assertEqual(env["HOSTOFF_LOG"], "info")
        self.assertEqual(env["HOSTOFF_REPORT"], "hostoff-%p.json")  # the default
        self.assertNotIn("HOSTOFF_TRACE", env)
        preload = re.split(r"[: ]", env["LD_PRELOAD"])
        lib = os.path.realpath(need("RP_LIB"))
        self.assertIn(lib, [os.path.realpath(p) for p in preload if p.startswith("/")])
        self.assertEqual(preload[-1], "libm.so.6", "what was preloaded stays, after the library")
        self.assertNotIn("is set in the environment", err)

    def test_conflict_is_reported_and_the_option_wins(self):
        env, err = self.env_of_child(opts=("--budget", "2G", "--policy", "lru"),
                                     HOSTOFF_BUDGET="1G", HOSTOFF_POLICY="lru",
                                     HOSTOFF_REPORT="mine.json")
        self.assertEqual(env["HOSTOFF_BUDGET"], "2G")
        self.assertEqual(env["HOSTOFF_REPORT"], "mine.json", "an inherited variable is kept")
        lines = [l for l in err.splitlines() if "is set in the environment" in l]
        self.assertEqual(lines, ["hostoff: HOSTOFF_BUDGET=1G is set in the environment; "
                                 "--budget 2G wins"], err)

    def test_bad_values_run_nothing(self):
        marker = os.path.join(self.dir, "ran")
        for opts in (("--budget", "12X"), ("--policy", "fifo"), ("--min-bytes", "lots"),
                     ("--nope", "1"), ("--budget",)):
            r = self.run_cmd("touch", marker, opts=opts)
            self.assertEqual(r.returncode, 2, (opts, r.stderr))
            self.assertFalse(os.path.exists(marker), opts)
        r = subprocess.run([need("RP_HOSTOFF"), "run", "--budget", "1G"], capture_output=True,
                           text=True, env=clean_env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("no command given", r.stderr)

    def test_offload_summary_report_and_trace(self):
        trace = os.path.join(self.dir, "gpt.jsonl")
        peak = small_gpt(trace)
        budget = peak * 6 // 10
        r = self.run_cmd(need("RP_REPLAYER"), trace,
                         opts=("--budget", budget, "--min-bytes", "1", "--report", "r.json",
                               "--trace", "t.jsonl"),
                         env=sim_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("exited with status 0", r.stderr)
        self.assertRegex(r.stderr, r"memory +the device held at most [\d.]+ [kMG]?B instead of "
                                   r"[\d.]+ [kMG]?B: [\d.]+ [kMG]?B saved")
        self.assertRegex(r.stderr, r"slowdown +[\d.]+x")
        self.assertRegex(r.stderr, r"moved [\d.]+ [kMG]?B to host")
        self.assertIn("hostoff: report r.json", r.stderr)
        self.assertIn("hostoff report r.json t.jsonl", r.stderr)
        rep = json.load(open(os.path.join(self.dir, "r.json")))
        self.assertGreater(rep["counts"]["evictions"], 0)
        # The recorded trace follows the schema, engine lines included, and its stalls add up
        # to the report's.
        schema = load_schema()
        t = schema.validate(os.path.join(self.dir, "t.jsonl"))
        self.assertEqual(t.problems, [])
        self.assertTrue(any(o["e"] == "stall" for _, o in t.engine))
        kinds = [o["e"] for o in map(json.loads, open(os.path.join(self.dir, "t.jsonl")))
                 if "e" in o]
        self.assertEqual(kinds.count("evict"), rep["counts"]["evictions"] +
                         sum(1 for o in map(json.loads, open(os.path.join(self.dir, "t.jsonl")))
                             if o.get("e") == "evict" and o.get("cancelled")))
        stalls = sum(o["ns"] for o in map(json.loads, open(os.path.join(self.dir, "t.jsonl")))
                     if o.get("e") == "stall")
        self.assertEqual(stalls, rep["time_ns"]["stall"])
        restores = sum(1 for o in map(json.loads, open(os.path.join(self.dir, "t.jsonl")))
                       if o.get("e") == "restore" and not o.get("cancelled"))
        self.assertEqual(restores, rep["counts"]["demand_restores"])
        # A trace with the engine's lines still replays (the replayer ignores them).
        hostoff("replay", os.path.join(self.dir, "t.jsonl"), "--budget", "none")

    def test_default_report_path(self):
        trace = os.path.join(self.dir, "gpt.jsonl")
        small_gpt(trace)
        r = self.run_cmd(need("RP_REPLAYER"), trace, env=sim_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        found = glob.glob(os.path.join(self.dir, "hostoff-*.json"))
        self.assertEqual(len(found), 1, (found, r.stderr))
        self.assertIn("report " + os.path.basename(found[0]), r.stderr)
        self.assertIn("memory saved: up to", r.stderr)  # no trace: the bound, said as one


# ------------------------------------------------------------------ help and manual page

def help_options(text):
    """{name: (arg, text)} from a --help listing: '  --name ARG' then indented text."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^  (-{1,2})([a-z][a-z0-9-]*)(?: (\S+))?$", line)
        if m:
            cur = m.group(2)
            out[cur] = [m.group(3) or "", ""]
        elif cur and line.startswith("        "):
            out[cur][1] += " " + line.strip()
        else:
            cur = None
    return {k: (a, " ".join(t.split())) for k, (a, t) in out.items()}


def unroff(s):
    s = re.sub(r"\\f[BIR]", "", s)
    return s.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")


def man_options(man, section):
    """{name: (arg, text)} of the .TP entries of the man page's .SS "hostoff SECTION"."""
    m = re.search(r'^\.SS "hostoff %s"\n(.*?)(?=^\.SS |^\.SH )' % re.escape(section), man,
                  re.S | re.M)
    assert m, f"no section for hostoff {section} in the man page"
    out = {}
    for tp in re.findall(r"^\.TP\n(.*?)(?=^\.TP|\Z)", m.group(1) + "\n", re.S | re.M):
        head, *body = tp.strip("\n").split("\n")
        hm = re.match(r'^\.BI? "(\S+?)(?: " "(.*))?"$', unroff(head))
        assert hm, head
        name = hm.group(1).lstrip("-")
        arg = hm.group(2) or ""
        out[name] = (arg, " ".join(unroff(" ".join(body)).split()))
    return out


class Docs(unittest.TestCase):
    def test_man_page_is_the_generated_one(self):
        man = open(os.path.join(need("RP_SOURCE"), "docs", "hostoff.1")).read()
        self.assertEqual(hostoff("--man").stdout, man,
                         "docs/hostoff.1 is out of date: regenerate it with "
                         "build/tools/hostoff --man > docs/hostoff.1")

    def test_help_agrees_with_man_page(self):
        man = hostoff("--man").stdout
        for sub in ("run", "report", "demo"):
            h = help_options(hostoff(sub, "--help").stdout)
            self.assertTrue(h, sub)
            self.assertEqual(h, man_options(man, sub), sub)

    def test_run_options_are_options_def(self):
        text = open(os.path.join(need("RP_SOURCE"), "src", "options.def")).read()
        rows = re.findall(r'HO_OPTION\(\s*\w+,\s*"(HOSTOFF_\w+)",\s*\w+,\s*"([^"]*)"', text)
        self.assertTrue(rows)
        h = help_options(hostoff("run", "--help").stdout)
        names = [v[len("HOSTOFF_"):].lower().replace("_", "-") for v, _ in rows]
        # One per row, --costs, which sets the simulator's SIMCUDA_COSTS, and --no-baseline,
        # which sets nothing: it is hostoff run's own (tools/cmd_run.c).
        self.assertEqual(sorted(h), sorted(names + ["costs", "no-baseline"]))
        self.assertIn("[SIMCUDA_COSTS, default unset]", h["costs"][1])
        self.assertNotIn("HOSTOFF_", h["no-baseline"][1])
        for (var, default), name in zip(rows, names):
            self.assertIn(f"[{var}, default {default or 'unset'}]", h[name][1], name)

    def test_every_command_has_help(self):
        top = hostoff("--help").stdout
        for sub in ("run", "report", "demo", "gen-trace", "replay"):
            self.assertIn(sub, top)
            r = hostoff(sub, "--help")
            self.assertTrue(r.stdout.startswith("usage: hostoff " + sub), sub)


# ------------------------------------------------------------------- report and demo

def validate_perfetto(path):
    """The Trace Event Format's rules as ui.perfetto.dev's JSON importer applies them; returns
    the list of problems (empty: valid) and the events."""
    problems = []
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return ["no traceEvents array"], []
    num = (int, float)
    open_async = {}
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or len(ph) != 1:
            problems.append(f"{where}: ph must be a one-letter string")
            continue
        for k in ("pid", "tid"):
            if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
                problems.append(f"{where}: {k} must be an integer")
        if not isinstance(e.get("ts"), num) or isinstance(e.get("ts"), bool) or e["ts"] < 0:
            problems.append(f"{where}: ts must be a number >= 0")
        if not isinstance(e.get("name"), str):
            problems.append(f"{where}: name must be a string")
        args = e.get("args", {})
        if not isinstance(args, dict):
            problems.append(f"{where}: args must be an object")
            args = {}
        if ph == "C":
            if not args or not all(isinstance(v, num) and not isinstance(v, bool)
                                   for v in args.values()):
                problems.append(f"{where}: a counter's args must be numbers")
        elif ph == "X":
            if not isinstance(e.get("dur"), num) or e["dur"] < 0:
                problems.append(f"{where}: a complete event needs dur >= 0")
        elif ph in ("b", "e"):
            if not isinstance(e.get("cat"), str) or "id" not in e:
                problems.append(f"{where}: an async event needs cat and id")
                continue
            key = (e["pid"], e["cat"], str(e["id"]), e.get("name"))
            if ph == "b":
                if key in open_async:
                    problems.append(f"{where}: async {key} begun twice")
                open_async[key] = e["ts"]
            else:
                if key not in open_async:
                    problems.append(f"{where}: async end {key} without a begin")
                elif e["ts"] < open_async.pop(key):
                    problems.append(f"{where}: async {key} ends before it begins")
        elif ph == "M":
            if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index", "process_labels"):
                problems.append(f"{where}: unknown metadata {e.get('name')}")
        elif ph == "i":
            if e.get("s", "t") not in ("g", "p", "t"):
                problems.append(f"{where}: instant scope must be g, p or t")
        else:
            problems.append(f"{where}: unexpected phase {ph}")
    for key in open_async:
        problems.append(f"async {key} never ends")
    return problems, events


class Demo(unittest.TestCase):
    """hostoff demo end to end, and what it leaves: the HTML page, the Perfetto trace."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "demo")
        cls.result = hostoff("demo", "-o", cls.dir)
        cls.html = os.path.join(cls.dir, "hostoff-demo.html")
        cls.perfetto = os.path.join(cls.dir, "hostoff-demo.perfetto.json")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_summary(self):
        out = self.result.stdout
        for what in ("memory", "moved", "slowdown", "loss", "report", "perfetto"):
            self.assertRegex(out, rf"(?m)^  {what} ", what)
        self.assertIn(self.html, out)
        m = re.search(r"slowdown +([\d.]+)x", out)
        self.assertIsNotNone(m, out)
        m = re.search(r"the device held at most ([\d.]+) GB instead of ([\d.]+) GB", out)
        self.assertIsNotNone(m, out)
        self.assertLess(float(m.group(1)), float(m.group(2)), "the budget forces offload")
        self.assertNotIn("WARNING", out)

    # The default job is meant to be one offload hides: lookahead's step within 5% of the
    # unconstrained one (virtual time: the same figure on every machine). Known to fail since
    # the simulator charges the driver's published per-call costs (issue 13): the demo runs at
    # 1.23x: 587 ms a step with offload against 476 without (1.53x, 728 ms, until evictions went
    # to the link in chunks a free can stop: src/engine_send.c). Until the trace timed kernels by
    # an end event recorded before the engine's after-launch work (trace.h,
    # ho_trace_launch_issued), the step without offload read 558 to 593 ms and the demo showed
    # 1.17x to 1.23x: the host's stalls counted as kernel time. Issue 14 is open for it; when
    # it passes unexpectedly, the suite fails: drop the decorator then.
    @unittest.expectedFailure
    def test_demo_offload_hides(self):
        m = re.search(r"slowdown +([\d.]+)x", self.result.stdout)
        self.assertIsNotNone(m, self.result.stdout)
        self.assertLessEqual(float(m.group(1)), 1.05)

    def test_quiet_off_a_terminal(self):
        self.assertEqual(self.result.stderr, "")

    def test_progress_on_a_terminal(self):
        import pty
        master, slave = pty.openpty()
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.Popen([need("RP_HOSTOFF"), "demo", "-o", d], stdout=subprocess.DEVNULL,
                                 stderr=slave, env=clean_env())
            os.close(slave)
            seen = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            p.wait(timeout=TIMEOUT)
            os.close(master)
        self.assertEqual(p.returncode, 0)
        text = seen.decode(errors="replace")
        for k in range(1, 6):
            self.assertIn(f"demo [{k}/5]", text)
        self.assertRegex(text, r"replay +\d+%")

    def test_html_is_self_contained(self):
        page = open(self.html).read()
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        without_ns = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
        for bad in ("http://", "https://", "<script", "<link", " src=", "@import", "url("):
            self.assertNotIn(bad, without_ns.replace("https://ui.perfetto.dev", ""), bad)
        self.assertEqual(page.count('<figure class="fig"'), 3)
        for fig in ("memory", "link", "stalls"):
            self.assertIn(f'data-fig="{fig}"', page)
        self.assertIn('class="verdict"', page)
        self.assertIn("What to tune next", page)
        # the replayed trace's kernel names, not the replayer's
        self.assertIn("<code>adam</code>", page)

    def test_perfetto_is_valid(self):
        problems, events = validate_perfetto(self.perfetto)
        self.assertEqual(problems, [])
        counters = {e["name"] for e in events if e["ph"] == "C"}
        self.assertTrue({"device resident", "in flight", "host resident", "budget"} <= counters)
        self.assertGreater(sum(1 for e in events if e["ph"] == "b"), 10)
        stalls = [e for e in events if e["ph"] == "X" and e.get("cat") == "stall"]
        self.assertTrue(stalls)
        threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                   if e["ph"] == "M" and e["name"] == "thread_name"}
        for s in stalls:
            self.assertTrue(threads.get((s["pid"], s["tid"]), "").startswith("stream "), s)

    def test_report_replays_itself(self):
        """The demo's report renders again from its inputs, to the same page."""
        with tempfile.TemporaryDirectory() as d:
            hostoff("report", os.path.join(self.dir, "replay-report.json"),
                    os.path.join(self.dir, "replay-trace.jsonl"), "--kernel-names",
                    os.path.join(self.dir, "gpt.jsonl"), "-o", d, "--name", "hostoff-demo")
            again = open(os.path.join(d, "hostoff-demo.html")).read()
        self.assertEqual(again, open(self.html).read())


def chromium():
    for c in (E.get("RP_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


PROBE = """<script>document.body.setAttribute("data-boxes", JSON.stringify(
Array.from(document.querySelectorAll("figure.fig svg.chart rect.plot")).map(function (r) {
  var b = r.getBoundingClientRect();
  return {fig: r.closest("figure").getAttribute("data-fig"),
          x: b.left + window.scrollX, y: b.top + window.scrollY, w: b.width, h: b.height};
})));</script></body>"""

COLORS = {  # render_html.c's palette
    "resident": (0x2f, 0x6d, 0xb5), "inflight": (0xf3, 0x9c, 0x33), "host": (0x3a, 0xa3, 0x7a),
    "d2h": (0x8e, 0x44, 0xad), "h2d": (0x16, 0xa0, 0x85),
    "demand": (0xc0, 0x39, 0x2b), "late": (0xe6, 0x7e, 0x22), "room": (0x6c, 0x5c, 0xe7),
}


class Render(unittest.TestCase):
    """The page in headless Chromium: screenshot it and check each figure's plot is drawn."""

    W, H = 1600, 1400

    def chrome(self, *args):
        exe = chromium()
        if exe is None:
            raise unittest.SkipTest("no chromium (Debian: apt-get install chromium)")
        with tempfile.TemporaryDirectory() as profile:
            return subprocess.run(
                [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--force-device-scale-factor=1", f"--window-size={self.W},{self.height}",
                 f"--user-data-dir={profile}", "--no-first-run", *args],
                capture_output=True, text=True, timeout=TIMEOUT)

    def check_page(self, html, expect_figs, colors_of, height=H):
        self.height = height
        d = os.path.dirname(html)
        probe = os.path.join(d, "probe.html")
        with open(html) as f, open(probe, "w") as g:
            g.write(f.read().replace("</body>", PROBE))
        dom = self.chrome("--dump-dom", "file://" + probe).stdout
        m = re.search(r'data-boxes="([^"]*)"', dom)
        self.assertIsNotNone(m, "the page did not load in Chromium")
        boxes = json.loads(m.group(1).replace("&quot;", '"'))
        self.assertEqual([b["fig"] for b in boxes], expect_figs)
        shot = os.path.join(d, "shot.png")
        r = self.chrome(f"--screenshot={shot}", "file://" + html)
        self.assertTrue(os.path.exists(shot), r.stderr)
        img = pngread.read(shot)
        self.assertEqual((img.width, img.height), (self.W, height))
        for b in boxes:
            x0, y0 = int(b["x"]) + 2, int(b["y"]) + 2
            x1, y1 = int(b["x"] + b["w"]) - 2, int(b["y"] + b["h"]) - 2
            self.assertLess(y1, img.height, f"{b['fig']} is below the screenshot")
            area = max(1, (x1 - x0) * (y1 - y0))
            drawn, near = 0, {k: 0 for k in COLORS}
            for y in range(y0, y1):
                for x in range(x0, x1):
                    p = img.pixel(x, y)
                    if max(p) - min(p) > 60:
                        drawn += 1
                        for k, c in COLORS.items():
                            if sum(abs(p[i] - c[i]) for i in range(3)) < 30:
                                near[k] += 1
            need_share = {"memory": 0.05, "link": 0.005, "stalls": 0.02}[b["fig"]]
            self.assertGreater(drawn / area, need_share, f"{b['fig']}: the plot looks empty")
            for k in colors_of[b["fig"]]:
                self.assertGreater(near[k], 40, f"{b['fig']}: no {k} drawn")
        return img

    def test_demo_page(self):
        with tempfile.TemporaryDirectory() as d:
            hostoff("demo", "-o", d)
            self.check_page(os.path.join(d, "hostoff-demo.html"),
                            ["memory", "link", "stalls"],
                            {"memory": ["resident", "host"], "link": ["d2h", "h2d"],
                             "stalls": []})
            # Keep the screenshot where a person can look at it.
            keep = E.get("RP_KEEP_SCREENSHOT")
            if keep:
                shutil.copy(os.path.join(d, "shot.png"), keep)

    def test_two_ranks_page(self):
        with tempfile.TemporaryDirectory() as d:
            files = two_ranks(d)
            hostoff("report", *files, "-o", d)
            self.check_page(os.path.join(d, "hostoff-ranks.html"),
                            ["memory", "link", "stalls"] * 2,
                            {"memory": ["resident"], "link": [], "stalls": []}, height=2600)
            keep = E.get("RP_KEEP_SCREENSHOT")
            if keep:
                shutil.copy(os.path.join(d, "shot.png"), keep + ".ranks.png")


def two_ranks(d):
    """Rank 0 and rank 1 of a job under hostoff run, each with its report and trace."""
    trace = os.path.join(d, "gpt.jsonl")
    peak = small_gpt(trace)
    files = []
    for rank, share in ((0, 6), (1, 8)):
        r = subprocess.run([need("RP_HOSTOFF"), "run", "--budget", str(peak * share // 10),
                            "--min-bytes", "1", "--report", "r%r.json", "--trace", "t%r.jsonl",
                            "--", need("RP_REPLAYER"), trace],
                           env=sim_env(RANK=rank), cwd=d, capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        files += [os.path.join(d, f"r{rank}.json"), os.path.join(d, f"t{rank}.jsonl")]
    return files


class Report(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_two_ranks_merge_into_one_page(self):
        files = two_ranks(self.dir)
        out = os.path.join(self.dir, "out")
        r = hostoff("report", *files, "-o", out)
        html = os.path.join(out, "hostoff-ranks.html")
        self.assertIn(html, r.stdout)
        page = open(html).read()
        self.assertEqual(page.count('<section class="rank-row"'), 2)
        self.assertEqual(page.count('<tr class="rank-summary">'), 2)
        self.assertLess(page.index(">rank 0<"), page.index(">rank 1<"))
        problems, events = validate_perfetto(os.path.join(out, "hostoff-ranks.perfetto.json"))
        self.assertEqual(problems, [])
        names = sorted(e["args"]["name"] for e in events
                       if e["ph"] == "M" and e["name"] == "process_name")
        self.assertEqual(len(names), 2)
        self.assertTrue(names[0].startswith("rank 0") and names[1].startswith("rank 1"), names)
        # Reports alone (no traces): still one page, a row per rank, no figures.
        r = hostoff("report", files[0], files[2], "-o", out, "--name", "reports")
        page = open(os.path.join(out, "reports.html")).read()
        self.assertEqual(page.count('<tr class="rank-summary">'), 2)
        self.assertNotIn('<figure class="fig"', page)
        self.assertIn("no trace given", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(out, "reports.perfetto.json")))

    def test_generated_trace_and_default_output_place(self):
        trace = os.path.join(self.dir, "job.jsonl")
        small_gpt(trace)
        r = hostoff("report", trace)
        self.assertIn(os.path.join(self.dir, "job.html"), r.stdout)
        page = open(os.path.join(self.dir, "job.html")).read()
        self.assertEqual(page.count('<figure class="fig"'), 3)
        self.assertIn("Nothing moved", page)

    def test_bad_inputs(self):
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "w") as f:
            f.write('{"something": 1}\n')
        r = hostoff("report", bad, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("neither a hostoff report", r.stderr)
        r = hostoff("report", os.path.join(self.dir, "missing.json"), check=False)
        self.assertEqual(r.returncode, 2)
        r = hostoff("report", check=False)
        self.assertEqual(r.returncode, 2)


class Packaging(unittest.TestCase):
    """meson install --destdir: the layout packagers get, and the installed command working from
    it (finding its library, replayer and simulated driver relative to itself)."""

    def test_destdir_install(self):
        meson = shutil.which("meson")
        build = E.get("RP_BUILD", "")
        if meson is None or not build:
            raise unittest.SkipTest("meson or RP_BUILD missing")
        with tempfile.TemporaryDirectory() as dest:
            r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet",
                                "--destdir", dest], capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            info = json.loads(subprocess.run([meson, "introspect", build, "--buildoptions"],
                                             capture_output=True, text=True).stdout)
            opt = {o["name"]: o["value"] for o in info}
            root = dest + opt["prefix"]
            libdir = os.path.join(root, opt["libdir"])
            want = [os.path.join(root, opt["bindir"], "hostoff"),
                    os.path.join(libdir, "libhostoff.so"),
                    os.path.join(libdir, "pkgconfig", "hostoff.pc"),
                    os.path.join(root, opt["includedir"], "hostoff.h"),
                    os.path.join(root, opt["libexecdir"], "hostoff", "hostoff-replayer"),
                    os.path.join(root, opt["libexecdir"], "hostoff", "simcuda", "libcuda.so.1"),
                    os.path.join(root, opt["mandir"], "man1", "hostoff.1"),
                    os.path.join(root, opt["datadir"], "doc", "hostoff", "contrib", "launch",
                                 "README.md")]
            for w in want:
                self.assertTrue(os.path.exists(w), w)
            pc = open(os.path.join(libdir, "pkgconfig", "hostoff.pc")).read()
            self.assertIn(f"preload=${{libdir}}/libhostoff.so", pc)
            self.assertIn(f"libdir={opt['prefix']}/{opt['libdir']}", pc)
            if shutil.which("pkg-config"):
                v = subprocess.run(["pkg-config", "--variable=preload", "hostoff"],
                                   env=clean_env(PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig")),
                                   capture_output=True, text=True)
                self.assertEqual(v.stdout.strip(),
                                 os.path.join(opt["prefix"], opt["libdir"], "libhostoff.so"))
            # The installed command, from the staging directory, with nothing pointing it at the
            # build: the demo runs end to end, and hostoff run preloads the installed library.
            exe = os.path.join(root, opt["bindir"], "hostoff")
            env = clean_env()
            env.pop("LD_LIBRARY_PATH", None)
            out = os.path.join(dest, "demo")
            r = subprocess.run([exe, "demo", "-o", out], env=env, capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "hostoff-demo.html")))
            r = subprocess.run([exe, "run", "--", "sh", "-c", "echo $LD_PRELOAD"], env=env,
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.assertIn(os.path.join(libdir, "libhostoff.so"), r.stdout)


if __name__ == "__main__":
    sys.exit(pyharness.main(__doc__, sys.modules[__name__]))
