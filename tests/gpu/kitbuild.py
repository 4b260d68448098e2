#!/usr/bin/env python3
"""Builds the GPU kit with a plain C compiler (no meson, no ninja): what tests/gpu/run needs.

    python3 tests/gpu/kitbuild.py DEST        # here, before a device run: DEST=build-gpu/kit

DEST receives:
  libhostoff.so        the library, from the source lists of src/, interpose/ and policy/'s
                       meson.build files, compiled with meson's flags (C11, -O2, hidden
                       visibility, the version script)
  integrity, vmmfacts, tensormap
                       the kit's driver-API programs (tests/gpu), linked -rdynamic to libcuda.so.1
                       (the toolkit's stub at build time; the real driver or the simulator at run
                       time)
  libhostoff_torch.so  the PyTorch pluggable-allocator adapter (contrib/pytorch)
  kernels.cubin        tests/gpu/kernels.cu for sm_90 (when nvcc is found)
  manifest.json        the source hash (see source_hash()), compilers, host, what was built
  build.log            every command and its output

The library links only libc, libdl and pthread today. If its meson.build gains another
dependency (libunwind, jemalloc), this script stops and says so: then the kit must be built on a
machine that has those static archives and carried (tests/gpu/README.md). Python stdlib only.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KIT_C = ["tests/gpu/kit.c", "tests/gpu/kit_sim.c"]
PROGRAMS = {"integrity": ["tests/gpu/integrity.c"],
            "vmmfacts": ["tests/gpu/vmmfacts.c", "tests/gpu/vmmqueue.c"],
            "tensormap": ["tests/gpu/tensormap.c"]}
ADAPTER = "contrib/pytorch/hostoff_torch_alloc.c"
KERNELS = "tests/gpu/kernels.cu"
LIB_DEPS_OK = {"threads", "dl"}
# Meson's flags for the library (meson.build: c_std=c11, warning_level=3, debugoptimized,
# -D_GNU_SOURCE -fno-strict-aliasing; gnu_symbol_visibility hidden; shared: -fPIC).
CFLAGS = ["-std=c11", "-O2", "-g", "-D_GNU_SOURCE", "-fno-strict-aliasing", "-fPIC"]
WARN = ["-Wall", "-Wextra", "-Wpedantic"]


class BuildError(Exception):
    pass


def hashed_files(root=REPO):
    """The files whose content decides whether a built kit is current."""
    root = Path(root)
    out = []
    for d in ("src", "interpose", "policy"):
        out += [p for p in (root / d).rglob("*") if p.is_file()]
    for pat in ("*.c", "*.h", "*.cu"):
        out += list((root / "tests" / "gpu").glob(pat))
    out += list((root / "contrib" / "pytorch").glob("*.c"))
    out.append(root / "tests" / "gpu" / "kitbuild.py")
    # What git ignores (and so a copy of the working tree lacks) stays out.
    return sorted(p for p in out if "__pycache__" not in p.parts and p.suffix != ".pyc")


def source_hash(root=REPO):
    h = hashlib.sha256()
    root = Path(root)
    for p in hashed_files(root):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def balanced_call(text, opening):
    """The arguments of the call that starts with `opening` (ending in "("), or None."""
    start = text.find(opening)
    if start < 0:
        return None
    depth, i = 1, start + len(opening)
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def meson_sources(root=REPO):
    """libhostoff.so's sources, read from the three meson.build files that list them."""
    root = Path(root)
    srcs = []
    for d, var in (("policy", "policy_sources"), ("src", "engine_sources"),
                   ("interpose", "interpose_sources")):
        text = (root / d / "meson.build").read_text(encoding="utf-8")
        m = re.search(var + r"\s*=\s*files\(([^)]*)\)", text)
        if not m:
            raise BuildError(f"{d}/meson.build: no '{var} = files(...)' to read the sources from")
        srcs += [root / d / n for n in re.findall(r"'([^']+)'", m.group(1))]
    text = (root / "interpose" / "meson.build").read_text(encoding="utf-8")
    call = balanced_call(text, "hostoff_lib = shared_library(")
    if call is None:
        raise BuildError("interpose/meson.build: no hostoff_lib = shared_library(...)")
    deps = re.search(r"dependencies\s*:\s*\[([^\]]*)\]", call)
    names = set(re.findall(r"\w+", deps.group(1))) if deps else set()
    extra = names - LIB_DEPS_OK
    if extra:
        raise BuildError("libhostoff.so now depends on " + ", ".join(sorted(extra)) +
                         ": kitbuild.py only knows threads and dl. Build the kit where those "
                         "static archives exist, link them in, and carry it (tests/gpu/README.md)")
    for s in srcs:
        if not s.is_file():
            raise BuildError(f"{s}: listed in meson.build but missing")
    return srcs


def find_libcuda_link(cuda_root):
    """Link arguments giving a NEEDED libcuda.so.1: the toolkit's stub, else the driver itself."""
    for d in (cuda_root / "lib64" / "stubs", cuda_root / "targets" / "x86_64-linux" / "lib" / "stubs",
              cuda_root / "targets" / "sbsa-linux" / "lib" / "stubs"):
        if (d / "libcuda.so").is_file():
            return ["-L" + str(d), "-lcuda"]
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith("libcuda.so.1 ") and "=>" in line:
                path = Path(line.split("=>")[1].strip())
                return ["-L" + str(path.parent), "-l:libcuda.so.1"]
    except OSError:
        pass
    for d in ("/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
        if (Path(d) / "libcuda.so.1").exists():
            return ["-L" + d, "-l:libcuda.so.1"]
    raise BuildError(f"no libcuda to link against (no stub under {cuda_root}, no libcuda.so.1)")


def find_nvcc(cuda_root, given=None):
    for c in (given, os.environ.get("NVCC"), str(cuda_root / "bin" / "nvcc"), shutil.which("nvcc")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def version_of(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        lines = (out.stdout or out.stderr).strip().splitlines()
        return lines[-1] if cmd[-1] == "--version" and "nvcc" in cmd[0] else lines[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def sh(cmd, log):
    log.write("$ " + " ".join(str(c) for c in cmd) + "\n")
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    log.write(p.stdout + p.stderr)
    if p.returncode != 0:
        raise BuildError(f"{Path(str(cmd[0])).name} failed ({p.returncode}): "
                         + (p.stderr or p.stdout).strip()[-2000:])


def build(dest, cuda_root="/usr/local/cuda", cc=None, nvcc=None, werror=False, jobs=None,
          log=sys.stderr, root=REPO):
    """Builds the kit into dest; returns the manifest (also written as dest/manifest.json)."""
    t0 = time.monotonic()
    root, dest, cuda_root = Path(root), Path(dest), Path(cuda_root)
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise BuildError("no C compiler (cc, gcc)")
    if not (cuda_root / "include" / "cuda.h").is_file():
        raise BuildError(f"{cuda_root}/include/cuda.h not found (--cuda-root)")
    dest.mkdir(parents=True, exist_ok=True)
    obj = dest / "obj"
    obj.mkdir(exist_ok=True)
    warn = WARN + (["-Werror"] if werror else [])
    inc = ["-I" + str(root / d) for d in ("interpose", "src", "policy")]
    inc.append("-I" + str(cuda_root / "include"))
    expected = source_hash(root)

    # libhostoff.so
    srcs = meson_sources(root)
    arch = platform.machine()
    vmap = (root / "interpose" / "version.map.in").read_text(encoding="utf-8")
    vmap = vmap.replace("@GLIBC_BASE@", "GLIBC_2.17" if arch == "aarch64" else "GLIBC_2.2.5")
    (obj / "version.map").write_text(vmap, encoding="utf-8")

    def compile_one(src):
        o = obj / (src.parent.name + "_" + src.name + ".o")
        cmd = [cc, *CFLAGS, *warn, "-fvisibility=hidden", *inc, "-c", str(src), "-o", str(o)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return src, o, cmd, p

    objs = []
    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 2) as ex:
        for src, o, cmd, p in ex.map(compile_one, srcs):
            log.write("$ " + " ".join(cmd) + "\n" + p.stdout + p.stderr)
            if p.returncode != 0:
                raise BuildError(f"compiling {src.relative_to(root)} failed: "
                                 + p.stderr.strip()[-2000:])
            objs.append(o)
    sh([cc, "-shared", "-o", dest / "libhostoff.so", *objs,
        "-Wl,--version-script=" + str(obj / "version.map"), "-Wl,--no-undefined", "-pthread",
        "-ldl"], log)

    # The kit's programs and the adapter.
    cuda_link = find_libcuda_link(cuda_root)
    kit_inc = ["-I" + str(root / "tests" / "gpu"), "-I" + str(cuda_root / "include")]
    for name, srcs in PROGRAMS.items():
        sh([cc, *CFLAGS, *warn, *kit_inc, "-rdynamic", "-o", dest / name, *(root / s for s in srcs),
            *(root / k for k in KIT_C), *cuda_link, "-pthread", "-lm"], log)
    sh([cc, *CFLAGS, *warn, "-shared", "-I" + str(cuda_root / "include"), "-o",
        dest / "libhostoff_torch.so", root / ADAPTER, *cuda_link], log)

    # The cubin.
    nv = find_nvcc(cuda_root, nvcc)
    cubin = None
    if nv:
        sh([nv, "-cubin", "-arch=sm_90", "-O3", "-I" + str(root / "tests" / "gpu"), "-o",
            dest / "kernels.cubin", root / KERNELS], log)
        cubin = "kernels.cubin"
    else:
        log.write("kitbuild: no nvcc: kernels.cubin not built\n")
        (dest / "kernels.cubin").unlink(missing_ok=True)

    manifest = {
        "source_hash": expected,
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "machine": arch,
        "cc": version_of([cc, "--version"]),
        "nvcc": version_of([nv, "--version"]) if nv else None,
        "libc": platform.libc_ver()[1],
        "cuda_link": cuda_link,
        "files": sorted(p.name for p in dest.iterdir()
                        if p.is_file() and p.name not in ("manifest.json", "build.log")),
        "cubin": cubin,
        "seconds": round(time.monotonic() - t0, 1),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(obj, ignore_errors=True)
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description="Build the GPU kit with a plain C compiler.")
    ap.add_argument("dest", nargs="?", help="output folder (e.g. build-gpu/kit)")
    ap.add_argument("--cuda-root", default=os.environ.get("CUDA_ROOT", "/usr/local/cuda"))
    ap.add_argument("--cc", default=None, help="C compiler (default $CC, cc, gcc)")
    ap.add_argument("--nvcc", default=None, help="nvcc (default $NVCC, CUDA_ROOT/bin/nvcc, PATH)")
    ap.add_argument("--werror", action="store_true", help="warnings are errors (as meson builds)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--hash", action="store_true", help="print the source hash and exit")
    a = ap.parse_args(argv)
    if a.hash:
        print(source_hash())
        return 0
    if not a.dest:
        ap.error("DEST is required")
    Path(a.dest).mkdir(parents=True, exist_ok=True)
    log_path = Path(a.dest) / "build.log"  # every command and its output
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            m = build(a.dest, a.cuda_root, a.cc, a.nvcc, a.werror, a.jobs, log=log)
    except (BuildError, OSError) as e:
        print(f"kitbuild: {e} (commands in {log_path})", file=sys.stderr)
        return 1
    print(f"kitbuild: {a.dest}: {', '.join(m['files'])} in {m['seconds']} s "
          f"(source {m['source_hash'][:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
