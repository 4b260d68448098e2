"""Per-tensor allocations for PyTorch under libhostoff.so.

PyTorch's caching allocator hands the driver large segments and keeps freed blocks, so the
library sees segments, not tensors. This module swaps in hostoff_torch_alloc.c through
torch.cuda.memory.CUDAPluggableAllocator: every tensor is then its own cuMemAllocAsync
allocation, freed with cuMemFreeAsync, and (under LD_PRELOAD=libhostoff.so) its own engine
buffer with its own lifetime.

    import hostoff_torch
    hostoff_torch.install()          # before the first CUDA allocation of the process
    ...
    print(hostoff_torch.stats())     # bytes PyTorch holds now and at peak, call counts

The shared library is found at: the path given, else $HOSTOFF_TORCH_ALLOCATOR, else
libhostoff_torch.so beside this file; build() compiles it there (needs cc and the CUDA headers).
Python standard library only, plus torch when install() is called.
"""

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "hostoff_torch_alloc.c"
MALLOC = "hostoff_torch_malloc"
FREE = "hostoff_torch_free"
DEFAULT_LIB = HERE / "libhostoff_torch.so"

_installed = None  # (allocator, library path)


def build(out=None, cuda_root=None, cc=None):
    """Compiles the adapter; returns its path. Links the toolkit's libcuda stub (soname
    libcuda.so.1): at run time the real driver, or libhostoff.so's hooks, answer."""
    out = Path(out or DEFAULT_LIB)
    cuda_root = Path(cuda_root or os.environ.get("CUDA_ROOT") or "/usr/local/cuda")
    cc = cc or os.environ.get("CC") or shutil.which("cc") or "gcc"
    stubs = cuda_root / "lib64" / "stubs"
    cmd = [cc, "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
           "-I" + str(cuda_root / "include"), str(SOURCE), "-L" + str(stubs), "-lcuda",
           "-o", str(out)]
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
    """Makes the adapter PyTorch's CUDA allocator; call before any CUDA allocation. Returns the
    torch allocator object."""
    global _installed
    import torch  # only here: the module itself needs no torch

    lib = find_library(path)
    if _installed is not None:
        return _installed[0]
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
