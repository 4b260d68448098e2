"""The GPU kit's stages that run its own programs: env, build, ldd, tmap, integrity, vmm, costs
(tests/gpu/run; README.md says what each figure means). A mixin of run's Kit: it uses
self.run, self.row, self.share, self.stage_result and self.save.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import costfile
import kitbuild

MiB = 1 << 20
GiB = 1 << 30
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# HOSTOFF_MIN_BYTES' default, auto (src/options.def, src/move_cost.h: 233 us of published remap
# time x 55 GB/s), for a report that does not say (newer ones carry "min_bytes").
MIN_BYTES_DEFAULT = 12815000

# Sizes. GPU: 12 GiB of buffers against a 4 GiB budget; the wide case 3 GiB and 128 buffers of
# 4 MiB in one launch against 1.5 GiB. Simulator: small enough for a CPU; a rehearsal: smaller
# still, so the whole rehearsal fits a CI test.
INTEGRITY = {
    "gpu": {"total_mib": 12288, "buffer_mib": 256, "small": 4, "threads": 4, "streams": 2,
            "ops": 400, "seed": 1, "budget_mib": 4096,
            "wide": {"total_mib": 3072, "buffer_mib": 128, "ops": 200, "wide": 128,
                     "wide_kib": 4096, "rounds": 8, "budget_mib": 1536}},
    # min_bytes: the sim and rehearsal buffers (8 and 4 MiB) are below the default (auto, 12.8 MB).
    "sim": {"total_mib": 96, "buffer_mib": 8, "small": 4, "threads": 4, "streams": 2,
            "ops": 300, "seed": 1, "budget_mib": 32, "min_bytes": "4M",
            "wide": {"total_mib": 64, "buffer_mib": 8, "ops": 150, "wide": 100, "wide_kib": 256,
                     "rounds": 8, "budget_mib": 40, "min_bytes": "256K"}},
    "rehearse": {"total_mib": 16, "buffer_mib": 4, "small": 1, "threads": 2, "streams": 1,
                 "ops": 24, "seed": 1, "budget_mib": 8, "min_bytes": "4M",
                 "wide": {"total_mib": 8, "buffer_mib": 4, "ops": 8, "wide": 8,
                          "wide_kib": 64, "rounds": 2, "budget_mib": 8, "min_bytes": "64K"}},
}
LDD_BASE = ("linux-vdso", "linux-gate", "libc.so", "libdl.so", "libpthread.so", "ld-linux",
            "libm.so", "librt.so")


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gib(n):
    if n is None:
        return "n/a"
    return f"{n / GiB:.2f} GiB" if n >= GiB or n == 0 else f"{n / MiB:.1f} MiB"


def num(v, spec=".1f", unit=""):
    """A figure, or n/a when it was not measured (never 0 for a missing value)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v:
        return "n/a"
    return f"{v:{spec}}{unit}"


def amount_bytes(text):
    """Bytes of a HOSTOFF_* size such as 256K or 4M."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", text or "")
    if not m:
        return None
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def summarize_report(r, min_bytes=MIN_BYTES_DEFAULT):
    if not r:
        return None
    if isinstance(r.get("min_bytes"), int):  # what was in force, as the library says
        min_bytes = r["min_bytes"]
    c, b = r.get("counts", {}), r.get("bytes", {})
    bufs = r.get("buffers") if isinstance(r.get("buffers"), list) else []
    stall = r.get("time_ns", {}).get("stall")
    return {"evictions": c.get("evictions"), "restores": c.get("restores"),
            "demand_restores": c.get("demand_restores"), "prefetches": c.get("prefetches"),
            "allocs": c.get("allocs"), "launches": c.get("launches"),
            "to_host": b.get("to_host"), "to_device": b.get("to_device"),
            "peak_device": b.get("peak_device"), "peak_host": b.get("peak_host"),
            # The report's peak counts every tracked buffer, the pass-through ones below
            # HOSTOFF_MIN_BYTES too; the budget binds only the others.
            "passthrough_bytes": sum(x.get("bytes", 0) for x in bufs
                                     if x.get("bytes", 0) < min_bytes),
            "stall_s": None if stall is None else stall / 1e9,
            "backend": r.get("backend"), "mode": r.get("mode")}


class CStages:
    # ------------------------------------------------------------ the library's runs

    def report_path(self, name):
        """HOSTOFF_REPORT for a run: %p keeps a child process (a compiler the framework
        starts, say) from overwriting the run's own report."""
        return self.logs / f"{name}.hostoff.%p.json"

    def find_report(self, name, pid):
        """The report of process pid, else the one with the most launches of that run."""
        own = self.logs / f"{name}.hostoff.{pid}.json"
        if own.is_file():
            return load_json(own)
        found = [r for r in (load_json(p) for p in self.logs.glob(f"{name}.hostoff.*.json")) if r]
        return max(found, key=lambda r: r.get("counts", {}).get("launches", 0), default=None)

    def note_backend(self, name, rep, out):
        """Which backend the library used in this run, and why (its HOSTOFF_LOG=info line)."""
        why = None
        for line in out.splitlines():
            m = re.match(r"hostoff: (?:backend \w+ \((.*)\)|(HOSTOFF_BACKEND=.*using \w+))", line)
            if m:
                why = m.group(1) or m.group(2)
        if why is None and self.a.backend:
            why = f"HOSTOFF_BACKEND={self.a.backend} (--backend)"
        b = self.results.setdefault("backend", {"runs": {}})
        b["runs"][name] = {"backend": rep.get("backend") if rep else None, "why": why}
        return why

    def backend_line(self):
        """The summary's statement of the backend the library actually used, and why."""
        runs = self.results.get("backend", {}).get("runs", {})
        used = {v["backend"] for v in runs.values() if v.get("backend")}
        if not used:
            return "backend: n/a (no library run reported)"
        whys = [v["why"] for v in runs.values() if v.get("why")]
        line = "backend " + "/".join(sorted(used)) + (" (RUNS DIFFER)" if len(used) > 1 else "")
        return line + (f": {whys[0]}" if whys else ": the library did not say why")

    def library_checks(self, name, p, rep, budget, min_bytes=MIN_BYTES_DEFAULT):
        """(good, notes, summary) of a run under the library: a report, and under a budget,
        bytes actually moved and the budget held."""
        s = summarize_report(rep, min_bytes)
        if s is None:
            return False, ["no HOSTOFF_REPORT"], None
        why = self.note_backend(name, rep, p.out)
        good, notes = True, []
        notes.append(f"evictions {num(s['evictions'], 'd')}, restores {num(s['restores'], 'd')} "
                     f"(demand {num(s['demand_restores'], 'd')}), {gib(s['to_host'])} to host, "
                     f"{gib(s['to_device'])} back, stall {num(s['stall_s'], '.1f', ' s')}, "
                     f"device peak {gib(s['peak_device'])}, backend {s['backend']}"
                     + (f" ({why})" if why else ""))
        if budget is not None:
            s["budget"] = budget
            if not s["evictions"]:
                good = False
                notes.append("NOTHING MOVED under a budget")
            if s["peak_device"] is None or s["peak_device"] > budget + s["passthrough_bytes"]:
                good = False
                notes.append(f"PEAK OVER BUDGET ({gib(s['peak_device'])} > {gib(budget)} + "
                             f"{s['passthrough_bytes'] / MiB:.1f} MiB pass-through)")
        return good, notes, s

    # ------------------------------------------------------------------------ env

    def stage_env(self):
        info = self.stage_result("env")
        info["uname"] = " ".join(platform.uname())
        info["python"] = sys.version.split()[0]
        info["glibc"] = platform.libc_ver()[1]
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
        for i, (key, cmd) in enumerate((("cc", [cc, "--version"]),
                                        ("nvcc", [self.nvcc() or "nvcc", "--version"]))):
            p = self.run(f"env-{key}", cmd, timeout=self.share(1, 6 - i))
            lines = p.out.strip().splitlines()
            info[key] = (lines[0] if key == "cc" else lines[-1]) if p.ok and lines else None
        figures = [f"Python {info['python']}", f"glibc {info['glibc']}",
                   f"cc: {info['cc'] or 'none'}", f"nvcc: {info['nvcc'] or 'none'}"]
        if self.a.sim:
            self.gpu = True  # the simulator stands in
            info["gpu"] = "simulator " + str(self.lib_path[0])
            self.row("env", "host (simulator)", "ok", "; ".join(figures))
            return True
        smi = shutil.which("nvidia-smi", path=self.env().get("PATH")) or next(
            (p for p in ("/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi")
             if os.access(p, os.X_OK)), None)
        if smi:
            p = self.run("env-nvidia-smi", [smi, "--query-gpu=name,driver_version,memory.total,"
                                            "memory.used,clocks.sm,clocks.mem,temperature.gpu",
                                            "--format=csv,noheader"], timeout=self.share(2, 4))
            info["gpu"] = p.out.strip() if p.ok else None
            self.gpu = p.ok and bool(p.out.strip())
            full = self.run("env-nvidia-smi-full", [smi], timeout=self.share(1, 2))
            if not full.ok:
                info["nvidia_smi_full"] = "timed out" if full.timed_out else f"exit {full.rc}"
        libcuda = self.find_libcuda()
        info["libcuda"] = libcuda
        if not self.gpu and libcuda:
            self.gpu = True  # a driver without nvidia-smi
        self.row("env", "host", "ok" if self.gpu else "FAILED",
                 (info.get("gpu") or "no GPU found") + "; " + "; ".join(figures))
        return self.gpu

    def nvcc(self):
        return kitbuild.find_nvcc(Path(self.a.cuda_root))

    def find_libcuda(self):
        """The directory of the real libcuda.so.1; added to LD_LIBRARY_PATH when the dynamic
        linker would not find it by itself."""
        if self.mode == "sim":
            return str(Path(self.lib_path[0]) / "libcuda.so.1")
        try:
            out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.strip().startswith("libcuda.so.1 ") and "=>" in line:
                    return line.split("=>")[1].strip()
        except OSError:
            pass
        for d in ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu",
                  "/usr/lib64", "/usr/lib/wsl/lib"):
            if (Path(d) / "libcuda.so.1").exists():
                if d not in self.lib_path:
                    self.lib_path.append(d)
                return str(Path(d) / "libcuda.so.1")
        return None

    # ---------------------------------------------------------------------- build

    def stage_build(self):
        info = self.stage_result("build")
        want = kitbuild.source_hash(REPO)
        info["source_hash"] = want
        carried = Path(self.a.kit).resolve() if self.a.kit else REPO / "build-gpu" / "kit"
        manifest = load_json(carried / "manifest.json")
        if self.a.kit and manifest is None:
            self.row("build", "kit", "FAILED", f"--kit {carried}: no manifest.json")
            return False
        if manifest and (self.a.kit or manifest.get("source_hash") == want) and not self.a.rebuild:
            self.kit = carried
            how = "given" if self.a.kit else "carried, sources match"
        else:
            dest = self.work / "kit"
            cmd = [sys.executable, HERE / "kitbuild.py", dest, "--cuda-root", self.a.cuda_root]
            if self.mode == "sim":
                cmd.append("--werror")
            p = self.run("build-kitbuild", cmd, timeout=self.share(3, 4))
            if p.ok:
                self.kit = dest
                manifest = load_json(dest / "manifest.json")
                how = f"built here in {p.secs:.0f} s" + (
                    " (the carried kit's sources differ)" if load_json(carried / "manifest.json")
                    else "")
            elif load_json(carried / "manifest.json"):
                self.kit = carried
                manifest = load_json(carried / "manifest.json")
                how = "carried, STALE (sources differ; building here failed: " + p.tail(1) + ")"
            else:
                self.row("build", "kit", self.status_of(p, False), p.tail(2))
                return False
        info.update({"kit": str(self.kit), "how": how, "manifest": manifest})
        if self.mode == "gpu" and not (self.kit / "kernels.cubin").is_file():
            nv = self.nvcc()
            if nv:
                cub = self.work / "kernels.cubin"
                p = self.run("build-cubin", [nv, "-cubin", "-arch=sm_90", "-O3", "-I", HERE, "-o",
                                             cub, HERE / "kernels.cu"], timeout=self.share(1, 1))
                if p.ok:
                    info["cubin"] = str(cub)
        cubin = info.get("cubin") or (str(self.kit / "kernels.cubin")
                                      if (self.kit / "kernels.cubin").is_file() else None)
        info["cubin"] = cubin
        ok = self.mode == "sim" or cubin is not None
        self.row("build", "kit", "ok" if ok else "FAILED",
                 f"{how}; cc {manifest.get('cc') if manifest else '?'}; cubin "
                 + ("yes" if cubin else "not used (simulator)" if self.mode == "sim"
                    else "MISSING (no nvcc)"))
        return ok

    # ------------------------------------------------------------------------ ldd

    def stage_ldd(self):
        info = self.stage_result("ldd")
        ok_all = True
        names = (("libhostoff.so", ()), ("libhostoff_torch.so", ("libcuda.so.1",)),
                 ("integrity", ("libcuda.so.1",)), ("vmmfacts", ("libcuda.so.1",)),
                 ("tensormap", ("libcuda.so.1",)))
        for i, (name, allowed) in enumerate(names):
            p = self.run(f"ldd-{name}", ["ldd", self.kit / name],
                         timeout=self.share(1, len(names) - i))
            libs, missing, extra = {}, [], []
            for line in p.out.splitlines():
                m = re.match(r"\s*(\S+)(?:\s+=>\s+(\S+))?", line)
                if not m or line.strip().startswith(("statically", "not a dynamic")):
                    continue
                lib, where = m.group(1), m.group(2)
                if "not found" in line:
                    missing.append(lib)
                    where = "not found"
                libs[lib] = where or ""
                if not lib.startswith(LDD_BASE + allowed) and not lib.startswith("/"):
                    extra.append(lib)
            info[name] = libs
            ok = p.ok and not missing and not extra
            ok_all &= ok
            shown = [f"{l} => {w}" if l.startswith("libcuda") else l
                     for l, w in libs.items() if not l.startswith(("linux-vdso", "/"))]
            note = ", ".join(shown) or p.tail(1)
            if missing:
                note += "; NOT FOUND: " + ", ".join(missing)
            if extra:
                note += "; UNEXPECTED: " + ", ".join(extra)
            self.row("ldd", name, self.status_of(p, ok), note)
        return ok_all

    # ----------------------------------------------------------------------- tmap

    def stage_tmap(self):
        out_json = self.logs / "tensormap.json"
        p = self.run("tensormap", [self.kit / "tensormap", f"--json={out_json}"],
                     timeout=self.share(1, 1))
        r = load_json(out_json)
        self.stage_result("tmap")["result"] = r
        if not r:
            self.row("tmap", "CUtensorMap address", self.status_of(p, False), p.tail(2))
            return False
        field = r.get("field")
        where = (f"plain u64 at byte {', '.join(map(str, r['plain_offsets']))}"
                 if r.get("plain_offsets") else
                 f"bits {field['bit']}.. as address >> {field['shift']} ({field['width']} bits)"
                 if field else "not found in the 128 bytes")
        encoded = r.get("encode") == "CUDA_SUCCESS"
        self.row("tmap", "CUtensorMap address", "ok" if encoded and p.ok else "note",
                 f"{r.get('finding')}: {where}; bytes that change with the address: "
                 f"{r.get('changed_bytes') or 'n/a'}" if encoded else
                 f"{r.get('finding')}: this driver cannot encode one")
        return p.ok

    # ------------------------------------------------------------------ integrity

    def integrity_cases(self):
        size = INTEGRITY["rehearse" if self.rehearsal else self.mode]
        cubin = self.stage_result("build").get("cubin")
        common = [f"--small={size['small']}", f"--threads={size['threads']}",
                  f"--streams={size['streams']}", f"--seed={size['seed']}"]
        if self.mode == "gpu":
            common.append(f"--cubin={cubin}")
        main = [f"--total-mib={size['total_mib']}", f"--buffer-mib={size['buffer_mib']}",
                f"--ops={size['ops']}"] + common
        w = size["wide"]
        wide = [f"--total-mib={w['total_mib']}", f"--buffer-mib={w['buffer_mib']}",
                f"--ops={w['ops']}", f"--wide={w['wide']}", f"--wide-kib={w['wide_kib']}",
                f"--wide-rounds={w['rounds']}"] + common
        wide_env = {"HOSTOFF_BUDGET": f"{w['budget_mib']}M"}
        if w.get("min_bytes"):
            wide_env["HOSTOFF_MIN_BYTES"] = w["min_bytes"]
        main_env = {"HOSTOFF_BUDGET": f"{size['budget_mib']}M"}
        if size.get("min_bytes"):
            main_env["HOSTOFF_MIN_BYTES"] = size["min_bytes"]
        # (case, tag, args, library, env, budget bytes, weight)
        cases = [("no library", "control", main, False, {}, None, 1.0),
                 (f"budget {size['budget_mib']} MiB", "lib", main, True,
                  main_env, size["budget_mib"] * MiB, 2.5),
                 (f"{w['wide']} buffers in one launch, budget {w['budget_mib']} MiB", "wide", wide,
                  True, wide_env, w["budget_mib"] * MiB, 1.5)]
        if self.mode == "sim":  # the check must catch a corrupted word
            cases.append(("corrupted word is caught", "corrupt", main[:2] + ["--ops=20",
                                                                             "--corrupt"] + common,
                          False, {}, None, 0.5))
        return cases

    def wide_attribution(self, rep, args):
        """How many wide buffers the engine saw in every wide launch (the report's use counts:
        the fill, one use per wide launch, the checks): a finding, not a pass/fail (the bytes
        decide that); the engine records at most 64 buffers a launch until issue 12 lands."""
        opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        size, rounds = int(opts["wide-kib"]) << 10, int(opts["wide-rounds"])
        uses = [b.get("uses", 0) for b in rep.get("buffers", []) if b.get("bytes") == size]
        seen = sum(u >= rounds + 1 for u in uses)
        self.stage_result("integrity")["wide_attributed"] = {"buffers": len(uses), "seen": seen}
        return f"engine saw {seen} of {len(uses)} wide buffers in every wide launch"

    def stage_integrity(self):
        info = self.stage_result("integrity")
        prog = self.kit / "integrity"
        cases = self.integrity_cases()
        ok_all, control = True, None
        for i, (case, tag, args, lib, extra, budget, weight) in enumerate(cases):
            left = sum(c[6] for c in cases[i:])
            out_json = self.logs / f"integrity-{tag}.json"
            report = self.report_path(f"integrity-{tag}")
            sim_report = self.logs / f"integrity-{tag}.simcuda.json"
            if self.mode == "sim":
                extra = dict(extra, SIMCUDA_REPORT=str(sim_report))
            cmd = [prog, *args] + ([] if tag == "corrupt" else [f"--json={out_json}"])
            p = self.run(f"integrity-{tag}", cmd, env=self.env(lib, report, extra),
                         timeout=self.share(weight, left))
            if tag == "corrupt":
                caught = p.rc == 1 and "FAILED" in p.out and "words wrong" in p.out
                ok_all &= caught
                info[tag] = {"caught": caught, "seconds": p.secs}
                self.row("integrity", case, "ok" if caught else self.status_of(p, False),
                         "exit 1, one word reported" if caught else p.tail(2))
                continue
            r = load_json(out_json) or {}
            sim = load_json(sim_report) if self.mode == "sim" else None
            good = p.ok and r.get("ok") is True
            notes = []
            if r:
                notes.append(f"{gib(r.get('total_bytes'))} in {r.get('buffers')} buffers"
                             + (f" ({r['wide_buffers']} wide, {r.get('wide_launches')} wide "
                                "launches)" if r.get("wide_buffers") else "")
                             + f", {r.get('ops')} ops on {r.get('threads')}x{r.get('streams')} "
                             f"streams, mismatches {r.get('device_mismatches')}+"
                             f"{r.get('host_mismatches')}, ops {num(r.get('ops_s'), '.1f', ' s')}"
                             f", verify {num(r.get('verify_s'), '.1f', ' s')}")
            else:
                notes.append(p.tail(2) or "no output")
            summary = None
            if lib:
                rep = self.find_report(f"integrity-{tag}", p.pid)
                min_bytes = (amount_bytes(extra.get("HOSTOFF_MIN_BYTES"))
                             or (rep or {}).get("min_bytes") or MIN_BYTES_DEFAULT)
                lgood, lnotes, summary = self.library_checks(f"integrity-{tag}", p, rep, budget,
                                                             min_bytes)
                good &= lgood
                notes += lnotes
                if tag == "wide" and rep:
                    notes.append(self.wide_attribution(rep, args))
                if control and r.get("ops_s") and control.get("ops_s"):
                    notes.append(f"{r['ops_s'] / control['ops_s']:.1f}x the control's ops time")
            elif tag == "control":
                control = r
            if sim is not None and (sim.get("illegal_accesses") or sim.get("hazards")):
                good = False
                notes.append(f"simulator: {sim.get('illegal_accesses')} illegal accesses, "
                             f"{sim.get('hazards')} hazards")
            info[tag] = {"result": r, "hostoff": summary, "simcuda": sim, "seconds": p.secs,
                         "timed_out": p.timed_out}
            ok_all &= good
            self.row("integrity", case, self.status_of(p, good), "; ".join(notes))
        return ok_all

    # ------------------------------------------------------------------------ vmm

    def vmmfacts(self, name, sections, weight=1, left=1):
        out_json = self.logs / f"{name}.json"
        cmd = [self.kit / "vmmfacts", f"--json={out_json}", f"--sections={sections}"]
        if self.mode == "sim":
            cmd.append("--quick")
        else:
            cmd.append(f"--cubin={self.stage_result('build').get('cubin')}")
        p = self.run(name, cmd, timeout=self.share(weight, left))
        return p, load_json(out_json) or {}

    def stage_vmm(self):
        p, f = self.vmmfacts("vmmfacts", "facts,calls,bw")
        self.stage_result("vmm")["facts"] = f
        self.vmm_table = p.out
        if not f.get("sections_done") and not f.get("sections_failed"):
            self.row("vmm", "facts", self.status_of(p, False), p.tail(2))
            return False
        measured_any = False

        def status(figures):
            nonlocal measured_any
            have = any(v is not None for v in figures)
            measured_any |= have
            return "ok" if have else self.status_of(p, False)

        def mib(key):
            v = f.get(key)
            return num(v / MiB if v is not None else None, "g")

        self.row("vmm", "host-located cuMemCreate",
                 status([f.get("create_HOST"), f.get("create_HOST_NUMA")]),
                 f"HOST {f.get('create_HOST', 'n/a')}, HOST_NUMA {f.get('create_HOST_NUMA', 'n/a')}"
                 f"; granularity min/rec: device {mib('granularity_min_DEVICE')}/"
                 f"{mib('granularity_rec_DEVICE')} MiB, host {mib('granularity_min_HOST')}/"
                 f"{mib('granularity_rec_HOST')} MiB; engine uses {f.get('host_location', 'n/a')}")
        for loc in ("DEVICE", f.get("host_location")):
            if not loc or loc == "none":
                continue
            parts, figs = [], []
            for call in ("create", "map", "set_access", "unmap", "release"):
                vals = [f.get(f"us_{call}_{loc}_{s}MiB") for s in (2, 64, 512)]
                figs += vals
                parts.append(call + " " + "/".join(num(v, ".0f") for v in vals))
            self.row("vmm", f"us per call, {loc} 2/64/512 MiB", status(figs), ", ".join(parts))
        # What the host pool relies on (src/pool_host.c): facts, whatever the driver answers;
        # a refused prefix or piece mapping makes the engine fall back to exact slots.
        for loc in ("DEVICE", f.get("host_location")):
            if not loc or loc == "none":
                continue
            got = [f.get(f"map_{k}_{loc}") for k in ("prefix", "prefix_data", "offset", "pieces")]
            self.row("vmm", f"cuMemMap of part of a handle, {loc}", status(got),
                     f"prefix {got[0] or 'n/a'} (bytes {got[1] or 'n/a'}), offset != 0 "
                     f"{got[2] or 'n/a'}, pieces in one range {got[3] or 'n/a'}")
        self.row("vmm", "kernel read GB/s",
                 status([f.get("read_gbps_device")]),
                 f"device {num(f.get('read_gbps_device'), '.0f')}, host VMM mapping "
                 f"{num(f.get('read_gbps_host_vmm'))}, pinned host "
                 f"{num(f.get('read_gbps_pinned_host'))}")
        self.row("vmm", "copy GB/s", status([f.get("copy_gbps_h2d")]),
                 f"H2D {num(f.get('copy_gbps_h2d'))}, D2H {num(f.get('copy_gbps_d2h'))}, both "
                 f"{num(f.get('copy_gbps_both_h2d'))}+{num(f.get('copy_gbps_both_d2h'))}="
                 f"{num(f.get('copy_gbps_both_sum'))}; engine evict "
                 f"{num(f.get('copy_gbps_evict'))}, restore {num(f.get('copy_gbps_restore'))},"
                 f" both {num(f.get('copy_gbps_evict_restore_sum'))}")
        if f.get("sections_failed") or not p.ok:
            errs = "; ".join(f"{k[6:]}: {v}" for k, v in f.items() if k.startswith("error_"))
            self.row("vmm", "sections failed", self.status_of(p, False),
                     (f.get("sections_failed") or "") + (f" ({errs})" if errs else "")
                     + ("; killed at its timeout: the figures above were kept"
                        if p.timed_out else ""))
        return p.ok and measured_any

    # ---------------------------------------------------------------------- costs

    def cost_file_name(self, f):
        if self.mode == "sim":
            return "costs-sim.txt"
        m = re.search(r"\b([A-Za-z]+\d+[A-Za-z]*)\b", f.get("device", "").replace("NVIDIA", ""))
        return f"costs-{m.group(1).lower() if m else 'gpu'}.txt"

    def stage_costs(self):
        info = self.stage_result("costs")
        have = dict(self.stage_result("vmm").get("facts") or {})
        sections = ["costs"]
        # With --only costs, or when the vmm stage lost them, measure the VMM calls and the
        # bandwidths here too: the cost file needs them.
        if not have.get("us_create_DEVICE_2MiB"):
            sections.insert(0, "calls")
        if not have.get("copy_gbps_h2d"):
            sections.append("bw")
        p, f = self.vmmfacts("vmmfacts-costs", ",".join(sections), weight=3, left=4)
        merged = {**have, **{k: v for k, v in f.items() if v is not None}}
        info["sections"] = sections
        info["facts"] = f
        rows = costfile.rows(merged)
        name = self.cost_file_name(merged)
        header = [f"measured on {merged.get('device', 'an unknown device')}, driver API "
                  f"{merged.get('driver_version', 'n/a')}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
                  "by tests/gpu/run (vmmfacts); fixed + per-MiB: least squares through the "
                  "medians at 2, 64 and 512 MiB",
                  "feed back: SIMCUDA_COSTS=" + name]
        if self.mode == "sim":
            header.insert(0, "SIMULATOR FIGURES (a rehearsal of the format, not hardware)")
        text = costfile.render(merged, header)
        (self.out / name).write_text(text, encoding="utf-8")
        info["file"] = name
        info["rows"] = {n: list(v) for n, v, _ in rows}
        try:
            costfile.parse(text, name)
            valid = True
        except ValueError as e:
            valid = False
            info["invalid"] = str(e)
        missing = [r for r in ("call.cuMemCreate.device", "call.cuMemCreate.host",
                               "call.cuLaunchKernel", "link.h2d", "link.d2h", "link.zerocopy",
                               "link.hbm") if r not in info["rows"]]
        self.row("costs", "host costs, us", "ok" if f.get("us_launch") is not None
                 else self.status_of(p, False),
                 f"launch {num(f.get('us_launch'), '.2f')}, event record "
                 f"{num(f.get('us_event_record'), '.2f')}, query "
                 f"{num(f.get('us_event_query'), '.2f')}, stream wait "
                 f"{num(f.get('us_stream_wait_event'), '.2f')}; cuMemHostAlloc 2/64 MiB "
                 f"{num(f.get('us_hostalloc_2MiB'), '.0f')}/"
                 f"{num(f.get('us_hostalloc_64MiB'), '.0f')}, cuMemFreeHost "
                 f"{num(f.get('us_freehost_2MiB'), '.0f')}/"
                 f"{num(f.get('us_freehost_64MiB'), '.0f')}; D2D copy "
                 f"{num(f.get('copy_gbps_dtod'), '.0f')} GB/s")
        good = valid and not missing and p.ok
        self.row("costs", "cost file", "ok" if good else self.status_of(p, False),
                 f"{name}: {len(rows)} rows" + ("" if valid else f", INVALID: {info['invalid']}")
                 + (f"; missing {', '.join(missing)}" if missing else ""))
        return self.launch_queue() and good

    def launch_queue(self):
        """vmmfacts' queue section on its own (a failure there leaves the cost file's run
        alone): the depth the simulator's SIMCUDA_LAUNCH_QUEUE models (not a cost file row: the
        format stays as it is), and launches while another thread remaps."""
        p, q = self.vmmfacts("vmmfacts-queue", "queue")
        self.stage_result("costs")["queue"] = q
        depth = q.get("launch_queue_depth")
        if depth is None:
            found = (f"never full in {q['queue_launches']} launches"
                     if q.get("launch_us_queued") is not None else "depth n/a")
        elif q.get("launch_queue_gated") == "yes":
            found = f"depth {depth} (SIMCUDA_LAUNCH_QUEUE={depth})"
        else:
            found = f"depth {depth} (at most: kernels ended while it filled)"
        self.row("costs", "launch queue, us",
                 "ok" if p.ok and q.get("launch_us_queued") is not None
                 else self.status_of(p, False),
                 f"{found}, kernel {num(q.get('queue_kernel_us_measured'))}; launch "
                 f"{num(q.get('launch_us_queued'), '.2f')} queued, "
                 f"{num(q.get('launch_us_full'), '.1f')} full; launch alone "
                 f"{num(q.get('launch_us_alone'), '.2f')} (p90 "
                 f"{num(q.get('launch_us_alone_p90'), '.2f')}), while remapping "
                 f"{num(q.get('launch_us_with_remaps'), '.2f')} (p90 "
                 f"{num(q.get('launch_us_with_remaps_p90'), '.2f')}); "
                 f"{num(q.get('remap_mib'), '.0f')} MiB remap alone "
                 f"{num(q.get('remap_us_alone'), '.0f')}, while launching "
                 f"{num(q.get('remap_us_with_launches'), '.0f')}"
                 + (f"; FAILED: {q['error_queue']}" if q.get("error_queue") else ""))
        return p.ok
