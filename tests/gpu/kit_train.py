"""The GPU kit's training stages, torch and jax (tests/gpu/run; README.md says what each figure
means). A mixin of run's Kit. Each run has its own timeout, a share of what is left of the stage;
a run that fails, hangs or is cut short keeps every step it recorded (the trainers write their
result after each step), and the next case runs.
"""

import re
import sys
import time

from kit_cstages import MiB, gib, load_json, num

# A training run stops starting steps this long before its timeout (times --deadline / 450).
STOP_MARGIN_S = 12
# A training run gets at least this long (times --deadline / 450), else it is not started.
MIN_RUN_S = 20
XLA_FLAG_SETS = ("--xla_gpu_deterministic_ops=true",
                 "--xla_gpu_exclude_nondeterministic_ops=true --xla_gpu_autotune_level=0",
                 "")


def compare_losses(base, r):
    a, b = base["losses_hex"], r["losses_hex"]
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            worst = max(abs(x - y) for x, y in zip(base["losses"][:n], r["losses"][:n]))
            return False, f"losses DIFFER from step {i} (max |d| {worst:.3g})"
    return True, f"losses identical ({n} steps)"


def ms(v):
    return num(None if v is None else v * 1e3, ".0f", " ms")


class TrainStages:
    def train_runs(self, stage, cases, base_args, flags_for=None):
        """Runs each case (name, group, lib, budget fraction, extra args); a budget comes from
        the peak device bytes of the group's no-budget run under the library."""
        info = self.stage_result(stage)
        ok_all = True
        results = {}
        min_run = max(2.0, MIN_RUN_S * self.scale)
        weights = [case_weight(stage, c[0]) for c in cases]
        for i, (name, group, lib, frac, extra) in enumerate(cases):
            left = self.stage_left()
            # Its weight's share of what is left, but never fewer seconds than a run needs: then
            # the last cases (the least important) are the ones the clock cuts.
            timeout = max(left * weights[i] / sum(weights[i:]), min(left, min_run))
            if timeout < min_run:
                self.row(stage, name, "skipped", f"out of time ({left:.0f} s left)")
                info[name] = {"skipped": "time"}
                ok_all = False
                continue
            base = results.get(f"{group}/no library")
            if (base is None or not base.get("losses")) and name != f"{group}/no library":
                self.row(stage, name, "skipped", "the baseline run failed")
                info[name] = {"skipped": "baseline failed"}
                ok_all = False
                continue
            env_extra, budget = {}, None
            if frac:
                ref = results.get(f"{group}/library")
                peak = (ref or {}).get("device_peak") or (base or {}).get("app_peak_bytes")
                if not peak:
                    self.row(stage, name, "skipped", "no peak to size the budget from (the "
                             "no-budget run failed)")
                    info[name] = {"skipped": "no peak"}
                    ok_all = False
                    continue
                budget = int(peak * (1 - frac)) // MiB * MiB
                env_extra["HOSTOFF_BUDGET"] = f"{budget // MiB}M"
            if flags_for:
                env_extra.update(flags_for())
            if group in ("caching", "hostoff"):
                env_extra["HOSTOFF_FRAMEWORK_ALLOC"] = "keep"  # the allocator the case names
            tag = name_tag(name)
            out_json = self.logs / f"{stage}-{tag}.json"
            report = self.report_path(f"{stage}-{tag}")
            margin = max(1.0, STOP_MARGIN_S * self.scale)
            # The script stops starting steps in time to write its result before the timeout,
            # however long its imports took.
            args = [*self.trainer[stage], *base_args, *extra, f"--out={out_json}",
                    f"--stop-at={time.time() + timeout - margin:.1f}"]
            p = self.run(f"{stage}-{tag}", args, env=self.env(lib, report, env_extra),
                         timeout=timeout)
            if stage == "jax" and not p.ok and "XLA_FLAGS" in env_extra and "Unknown flag" in p.out:
                return "retry-flags"
            r = load_json(out_json) or {"ok": False, "losses": [], "losses_hex": []}
            r.setdefault("losses", [])
            r.setdefault("losses_hex", [])
            if not r.get("ok") and not r.get("error"):
                r["error"] = p.tail(2) or "no result"
            r["budget"] = budget
            r["seconds"] = round(p.secs, 1)
            r["timed_out"] = p.timed_out
            r["timeout_s"] = round(timeout, 1)
            notes, good = self.train_figures(stage, name, r, base, p, lib, budget)
            results[name] = r
            info[name] = r
            status = self.status_of(p, good)
            if r.get("losses_identical") is False and "checkpoint" not in name \
                    and "remat" not in name and not p.timed_out:
                status = "DIFFERS"
            ok_all &= status == "ok"
            self.row(stage, name, status, "; ".join(notes))
        return ok_all

    def train_figures(self, stage, name, r, base, p, lib, budget):
        """The row's figures and whether the run passed. Whatever was measured is shown, also
        for a run that failed or timed out; what was not is n/a."""
        good = p.ok and r.get("ok") is True and bool(r["losses"])
        notes = []
        steps = len(r["losses"])
        if p.timed_out:
            notes.append(f"TIMED OUT: killed at its {r['timeout_s']:.0f} s timeout")
        elif not r.get("ok") or not steps:
            notes.append("FAILED: " + str(r.get("error") or p.tail(2))[:160])
        first = r.get("step_s", [None])[0] if r.get("step_s") else None
        fig = f"{steps} steps, {ms(r.get('median_step_s'))}/step"
        if stage == "jax":
            fig += f" (first step, compiling: {num(first, '.1f', ' s')})"
        if base and base is not r and base.get("median_step_s") and r.get("median_step_s"):
            fig += f" ({r['median_step_s'] / base['median_step_s']:.2f}x)"
        notes.append(fig)
        if base and base is not r and base.get("losses") and steps:
            same, note = compare_losses(base, r)
            r["losses_identical"] = same
            notes.append(note)
            if not same and "checkpoint" not in name and "remat" not in name:
                good = False
        if lib:
            rep = self.find_report(f"{stage}-{name_tag(name)}", p.pid)
            lgood, lnotes, summary = self.library_checks(f"{stage}-{name_tag(name)}", p, rep,
                                                         budget)
            r["hostoff"] = summary
            good &= lgood
            r["device_peak"] = summary["peak_device"] if summary else None
        else:
            r["hostoff"] = None
            r["device_peak"] = r.get("app_peak_bytes")
        notes.append(f"device peak {gib(r['device_peak'])}"
                     + (f" (app {gib(r.get('app_peak_bytes'))})" if lib else ""))
        notes.append(f"nvml {gib(r.get('nvml_peak_bytes'))}")
        if budget:
            notes.append(f"budget {gib(budget)}")
        if lib:
            notes += lnotes
        return notes, good

    def torch_cases(self):
        """Baselines first, then the budgets, then rematerialisation: what the clock cuts last
        matters least."""
        adapter = self.kit / "libhostoff_torch.so"
        # async: PyTorch's cudaMallocAsync backend, what the library chooses for PyTorch when the
        # user has not (interpose/framework_env.c); caching and hostoff keep their own allocator
        # under the library (HOSTOFF_FRAMEWORK_ALLOC=keep, train_runs).
        groups = (("caching", ["--allocator=caching"]),
                  ("async", ["--allocator=async"]),
                  ("hostoff", ["--allocator=hostoff", f"--adapter={adapter}"]))
        cases = []
        for group, extra in groups:
            cases.append((f"{group}/no library", group, False, None, extra))
            cases.append((f"{group}/library", group, True, None, extra))
        for frac in (0.5, 0.3):
            for group, extra in groups:
                cases.append((f"{group}/budget -{frac:.0%}", group, True, frac, extra))
        for group, extra in groups:
            if group != "async":  # rematerialisation does not depend on the allocator's view
                cases.append((f"{group}/checkpoint", group, False, None, extra + ["--checkpoint"]))
        return cases

    def stage_torch(self):
        if self.a.sim:
            self.row("torch", "all cases", "skipped", "simulator: no PyTorch on it")
            return True
        base = [f"--steps={self.a.torch_steps}", f"--batch={self.a.torch_batch}"]
        return self.train_runs("torch", self.torch_cases(), base)

    def jax_cases(self):
        return [("jax/no library", "jax", False, None, []),
                ("jax/library", "jax", True, None, []),
                ("jax/budget -50%", "jax", True, 0.5, []),
                ("jax/budget -30%", "jax", True, 0.3, []),
                ("jax/remat", "jax", False, None, ["--remat"])]

    def stage_jax(self):
        if self.a.sim:
            self.row("jax", "all cases", "skipped", "simulator: no JAX on it")
            return True
        # This run's own compilation cache, in its work folder (removed at the end, never
        # brought back): the cases after the first find their program there.
        cache = self.work / "jax-cache"
        cache.mkdir(exist_ok=True)
        base = [f"--steps={self.a.jax_steps}", f"--cache-dir={cache}"]
        info = self.stage_result("jax")
        env_base = {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
                    "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        for flags in XLA_FLAG_SETS:
            info["XLA_FLAGS"] = flags

            def flags_for(flags=flags):
                e = dict(env_base)
                if flags:
                    e["XLA_FLAGS"] = flags
                return e

            r = self.train_runs("jax", self.jax_cases(), base, flags_for)
            if r != "retry-flags":
                return r
            self.row("jax", "XLA_FLAGS", "note", f"'{flags}' unknown to this XLA: trying the next")
        return False


def case_weight(stage, name):
    """A run's share of its stage: a run that compiles what the others find in the cache (JAX's
    first case, and remat's different program) or imports a cold framework (torch's first) gets
    more."""
    if stage == "jax":
        return 2.5 if name.endswith("no library") else 2.0 if "remat" in name else 1.0
    return 1.5 if name == "caching/no library" else 1.0


def name_tag(name):
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


assert sys.version_info >= (3, 8), "the kit needs Python 3.8 or later"
