"""Per-tensor allocations for PyTorch under libhostoff.so.

PyTorch's caching allocator hands the driver large segments and keeps freed blocks, so the
library sees segments, not tensors. This module swaps in hostoff_torch_alloc.c through
torch.cuda.memory.CUDAPluggableAllocator: every tensor is then its own cuMemAllocAsync
allocation, freed with cuMemFreeAsync, and (under LD_PRELOAD=libhostoff.so) its own engine
buffer with its own lifetime.

    import hostoff_torch
    hostoff_torch.install()          # before CUDA initialises in the process (PyTorch >= 2.0)
    ...
    print(hostoff_torch.stats())     # bytes PyTorch holds now and at peak, call counts

The shared library is found at: the path given, else $HOSTOFF_TORCH_ALLOCATOR, else
libhostoff_torch.so beside this file; build() compiles it there: it needs cc, cuda.h (a CUDA
toolkit, or the copy pip-installed PyTorch brings with Triton) and a libcuda to link (the
toolkit's stub, or the installed driver's libcuda.so.1).
Python standard library only, plus torch when install() is called.
"""

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "hostoff_torch_alloc.c"
MALLOC = "hostoff_torch_malloc"
FREE = "hostoff_torch_free"
DEFAULT_LIB = HERE / "libhostoff_torch.so"

_installed = None  # (allocator, library path)

# CUDAPluggableAllocator and change_current_allocator came with PyTorch 2.0.
MIN_TORCH = (2, 0)


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _include_dirs(cuda_root):
    """Where cuda.h may be: the toolkit, else the copies pip wheels install (Triton's, which
    PyTorch's wheels depend on; NVIDIA's runtime wheel)."""
    dirs = [cuda_root / "include"]
    triton = _package_dir("triton")
    if triton is not None:
        dirs.append(triton / "backends" / "nvidia" / "include")
    nvidia = _package_dir("nvidia")
    if nvidia is not None:
        dirs += [nvidia / "cuda_runtime" / "include", nvidia / "cuda_nvcc" / "include"]
    return dirs


def _driver_library():
    """The installed driver's libcuda.so.1 (ldconfig's cache), or None."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"libcuda\.so\.1 \(([^)]*)\) => (\S+)", out)
    return m.group(2) if m else None


def build(out=None, cuda_root=None, cc=None):
    """Compiles the adapter; returns its path. Links the toolkit's libcuda stub (soname
    libcuda.so.1): at run time the real driver, or libhostoff.so's hooks, answer."""
    out = Path(out or DEFAULT_LIB)
    cuda_root = Path(cuda_root or os.environ.get("CUDA_ROOT") or "/usr/local/cuda")
    cc = cc or os.environ.get("CC") or shutil.which("cc") or "gcc"
    tried = _include_dirs(cuda_root)
    inc = next((d for d in tried if (d / "cuda.h").is_file()), None)
    if inc is None:
        raise FileNotFoundError("hostoff_torch.build(): no cuda.h in " +
                                ", ".join(map(str, tried)) +
                                " (set CUDA_ROOT to a CUDA toolkit)")
    stubs = cuda_root / "lib64" / "stubs"
    if (stubs / "libcuda.so").is_file():
        link = ["-L" + str(stubs), "-lcuda"]
    else:
        driver = _driver_library()
        if driver is None:
            raise FileNotFoundError(f"hostoff_torch.build(): no {stubs}/libcuda.so and no "
                                    "libcuda.so.1 in ldconfig's cache (set CUDA_ROOT to a "
                                    "CUDA toolkit)")
        link = [driver]  # linked by its soname, libcuda.so.1, as the stub would be
    cmd = [cc, "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
           "-I" + str(inc), str(SOURCE), *link, "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def find_library(path=None):
    """The adapter's path (see the module's doc); raises FileNotFoundError when it is missing."""
    lib = Path(path or os.environ.get("HOSTOFF_TORCH_ALLOCATOR") or DEFAULT_LIB).resolve()
    if not lib.is_file():
        raise FileNotFoundError(f"{lib}: no hostoff PyTorch adapter (hostoff_torch.build() "
                                "compiles it)")
    return lib


def install(path=None):
    """Makes the adapter PyTorch's CUDA allocator; call before CUDA initialises in the process
    (before any torch.cuda call or CUDA tensor: PyTorch refuses to change the allocator once its
    caching allocator is set up). Needs PyTorch 2.0 or later. Returns the torch allocator
    object."""
    global _installed
    import torch  # only here: the module itself needs no torch

    lib = find_library(path)
    if _installed is not None:
        return _installed[0]
    version = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])
    if version < MIN_TORCH:
        raise RuntimeError(f"hostoff_torch needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or later "
                           f"(CUDAPluggableAllocator); this is {torch.__version__}")
    if torch.cuda.is_initialized():
        raise RuntimeError("hostoff_torch.install() must run before CUDA initialises: call it "
                           "before any torch.cuda call or CUDA tensor")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(str(lib), MALLOC, FREE)
    torch.cuda.memory.change_current_allocator(alloc)
    _installed = (alloc, lib)
    return alloc


def _lib():
    if _installed is None:
        raise RuntimeError("hostoff_torch.install() was not called")
    # The same path dlopen()s the same object torch loaded: one set of counters.
    return ctypes.CDLL(str(_installed[1]))


def stats():
    """Bytes PyTorch holds through the adapter now and at peak (requested sizes), and the
    allocation, free and failure counts."""
    out = (ctypes.c_uint64 * 5)()
    _lib().hostoff_torch_stats(out)
    keys = ("bytes_now", "bytes_peak", "allocs", "frees", "failures")
    return dict(zip(keys, (int(v) for v in out)))


def reset_peak():
    """Restarts the peak from what is held now."""
    _lib().hostoff_torch_reset_peak()


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Build the hostoff PyTorch adapter.")
    ap.add_argument("--out", default=str(DEFAULT_LIB), help="where to write the .so")
    ap.add_argument("--cuda-root", default=None, help="CUDA toolkit root (default /usr/local/cuda)")
    a = ap.parse_args()
    print(build(a.out, a.cuda_root))
