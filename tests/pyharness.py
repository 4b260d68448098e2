"""What the Python test harnesses share: those that run programs under LD_PRELOAD=libhostoff.so
against the simulated driver (tests/integration/ip_harness.py, tests/engine/engine_harness.py)
and those that drive the hostoff command (tests/report/test_report.py, tests/trace/test_trace.py):
the environment a program runs in, the sanitizer runtime's options, reading the reports, the
lines a program prints, and the entry point that runs one unittest class (meson runs one per
test).

Python 3 stdlib only. A harness imports it with its own folder's parent on sys.path.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

# Variables a test program must not inherit from whoever runs the tests.
SCRUB = re.compile(r"^(HOSTOFF_|SIMCUDA_|LD_PRELOAD$|RANK$|OMPI_COMM_WORLD_RANK$|SLURM_PROCID$)")


def need(var):
    """The value meson gave `var`; skips the test when it is not set."""
    v = os.environ.get(var, "")
    if not v:
        raise unittest.SkipTest(f"{var} is not set (run through meson test)")
    return v


def clean_env(**extra):
    """This process's environment without SCRUB's variables, then `extra` (values as text)."""
    env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sanitizer_runtimes(path):
    """The ASan/TSan runtimes a sanitized build's binary links: what must come first in an
    LD_PRELOAD given to it (a sanitized libhostoff.so cannot be preloaded behind none)."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    except OSError:
        return []
    return re.findall(r"lib[at]san\.so\S* => (\S+)", out)


def prog(prefix, name):
    """The path meson gave the test program `name` in PREFIX_PROG_<NAME>; skips the test when
    it is not set (the harness was not started by meson test)."""
    var = f"{prefix}_PROG_{name.upper()}"
    path = os.environ.get(var, "")
    if not path:
        raise unittest.SkipTest(f"{var} is not set (run through meson test)")
    return path


class Sanitizer:
    """Options for the sanitizer runtime a sanitized libhostoff.so is preloaded behind.

    Under ASan, leaks of what the simulator allocates (its modules, events and queued operations
    that the programs do not release) are its own suite's business: they are suppressed, leaks in
    libhostoff.so and the test programs still fail the run; with `ubsan_halt`, UBSan (built with
    ASan here) stops at its first finding. Under TSan nothing is suppressed and the programs run
    with ASLR off (setarch -R): the runtime cannot map its shadow under some kernels' layouts."""

    def __init__(self, kind, tag, ubsan_halt=True):
        self.kind = kind  # "address", "thread" or ""
        self.env = {}
        self.supp = None
        if kind == "address":
            fd, self.supp = tempfile.mkstemp(prefix=tag + "-lsan-", suffix=".supp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("leak:libcuda.so.1\n")
            self.env["LSAN_OPTIONS"] = "suppressions=" + self.supp
            if ubsan_halt:
                self.env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
        elif kind == "thread":
            self.env["TSAN_OPTIONS"] = "halt_on_error=1:atexit_sleep_ms=0"

    def wrapper(self):
        """The command a program runs behind: setarch -R under TSan."""
        if self.kind == "thread" and shutil.which("setarch"):
            return ["setarch", platform.machine(), "-R"]
        return []

    def cleanup(self):
        if self.supp is not None:
            os.unlink(self.supp)
            self.supp = None


def child_env(extra, preload, simdir, preload_libs, sanitizer):
    """This process's environment without SCRUB's variables, with the sanitizer's options added
    to any already set, the simulated driver first on LD_LIBRARY_PATH, LD_PRELOAD set to
    `preload_libs` (empty entries dropped) when `preload`, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not SCRUB.match(k)}
    for k, v in sanitizer.env.items():
        env[k] = ":".join(x for x in (env.get(k), v) if x)
    env["LD_LIBRARY_PATH"] = simdir + (":" + env["LD_LIBRARY_PATH"]
                                       if env.get("LD_LIBRARY_PATH") else "")
    if preload:
        env["LD_PRELOAD"] = " ".join(p for p in preload_libs if p)
    env.update(extra or {})
    return env


def load_json(path):
    """The JSON file (a report), or None when the program wrote none."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Output:
    """What a program printed: stdout lines by prefix, and the library's stderr lines."""

    def lines(self, prefix):
        return [l for l in self.out.splitlines() if l.startswith(prefix)]

    def line(self, prefix):
        got = self.lines(prefix)
        assert len(got) == 1, f"expected one {prefix!r} line from {self.cmd}, got {got}\n{self.out}"
        return got[0]

    def hostoff_lines(self):
        return [l for l in self.err.splitlines() if l.startswith("hostoff:")]


def main(doc, module, cleanup=None):
    """Runs the unittest class named by argv[1] from `module`; prints `doc` when none is named.
    Exit status 77 (meson's "skipped") when every test of the class was skipped."""
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(doc, file=sys.stderr)
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromName(sys.argv[1], module)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if cleanup is not None:
        cleanup()
    if result.wasSuccessful() and result.testsRun > 0 and len(result.skipped) == result.testsRun:
        return 77
    return 0 if result.wasSuccessful() else 1
