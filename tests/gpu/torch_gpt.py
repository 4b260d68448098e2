#!/usr/bin/env python3
"""A GPT-2-sized training loop for the GPU kit (tests/gpu/run runs it several ways).

Synthetic tokens from a fixed seed, weights initialised on the CPU from the same seed,
deterministic algorithms (torch.use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG), explicit
attention (no fused kernels whose backward may be non-deterministic), AdamW. Every step's loss is
recorded exactly (float.hex), so runs with and without libhostoff.so can be compared bit for bit.

  --allocator caching   PyTorch's default caching allocator
  --allocator async     PyTorch's cudaMallocAsync backend (PYTORCH_CUDA_ALLOC_CONF=
                        backend:cudaMallocAsync, set here before torch is imported: what
                        libhostoff.so chooses for PyTorch when the user has not)
  --allocator hostoff   the per-tensor pluggable allocator of contrib/pytorch (--adapter PATH)
  --checkpoint          torch.utils.checkpoint around every block (rematerialisation)

Writes --out JSON after every step (so a run cut short keeps its steps): losses, per-step times,
the median step time after --warmup steps, the
allocator's peak (caching: max_memory_reserved/allocated; hostoff: requested bytes held),
NVML's largest device memory in use sampled after each forward and backward (when pynvml is
there), and any error. torch is imported only after the arguments are parsed.
"""

import argparse
import math
import os
import sys
import time
import traceback
from pathlib import Path

from trainer_steps import median_step, past_stop, write_result  # beside this script

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="first steps left out of the median step time (default 2)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    ap.add_argument("--seq", type=int, default=1024, help="tokens per sequence (default 1024)")
    ap.add_argument("--layers", type=int, default=12, help="transformer blocks (default 12)")
    ap.add_argument("--d-model", type=int, default=768, help="model width (default 768)")
    ap.add_argument("--heads", type=int, default=12, help="attention heads (default 12)")
    ap.add_argument("--vocab", type=int, default=50257, help="vocabulary (default 50257)")
    ap.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--checkpoint", action="store_true",
                    help="recompute each block in the backward pass (torch.utils.checkpoint)")
    ap.add_argument("--allocator", choices=("caching", "async", "hostoff"), default="caching")
    ap.add_argument("--adapter", help="libhostoff_torch.so for --allocator hostoff "
                    "(default: contrib/pytorch's lookup)")
    ap.add_argument("--tf32", choices=("on", "off"), default="on",
                    help="TF32 matrix products (deterministic either way; default on)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: check the script itself on a machine without a GPU (no memory "
                         "figures; --allocator caching only)")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help="stop after the step that passes this many seconds of training "
                         "(0: run every step)")
    ap.add_argument("--stop-at", type=float, default=0.0,
                    help="wall-clock time (seconds since the epoch) by which training must have "
                         "stopped: a step that would end later is not started (0: none)")
    ap.add_argument("--out", help="write the result JSON here")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1 or a.seq < 2 or a.layers < 1 or a.vocab < 2:
        ap.error("--steps, --batch, --layers must be >= 1; --seq, --vocab >= 2")
    if a.d_model < 1 or a.heads < 1 or a.d_model % a.heads:
        ap.error("--d-model must be a positive multiple of --heads")
    if a.warmup < 0 or a.time_limit < 0 or a.stop_at < 0:
        ap.error("--warmup, --time-limit and --stop-at must be >= 0")
    if a.device == "cpu" and a.allocator != "caching":
        ap.error("--device cpu works with --allocator caching only")
    return a


class Nvml:
    """Device memory in use, from NVML (pynvml), or nothing when it is not there."""

    def __init__(self):
        self.h = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - optional
            self.h = None

    def used(self):
        if self.h is None:
            return None
        try:
            return int(self.nv.nvmlDeviceGetMemoryInfo(self.h).used)
        except Exception:  # noqa: BLE001
            return None


def set_tf32(torch, on):
    """TF32 for float32 matrix products (the model has no convolutions): the fp32_precision API
    where this PyTorch has it (2.9+, where allow_tf32 is deprecated), else allow_tf32. Returns
    which one was used."""
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32" if on else "ieee"
        return "fp32_precision"
    except Exception:  # noqa: BLE001 - older PyTorch: AssertionError("Unknown attribute")
        torch.backends.cuda.matmul.allow_tf32 = on
        return "allow_tf32"


def build_model(a, torch):
    nn = torch.nn
    F = torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(a.d_model, 3 * a.d_model)
            self.proj = nn.Linear(a.d_model, a.d_model)
            mask = torch.tril(torch.ones(a.seq, a.seq, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, a.seq, a.seq), persistent=False)

        def forward(self, x):
            B, T, D = x.shape
            hd = D // a.heads
            q, k, v = self.qkv(x).split(D, dim=2)
            q = q.view(B, T, a.heads, hd).transpose(1, 2)
            k = k.view(B, T, a.heads, hd).transpose(1, 2)
            v = v.view(B, T, a.heads, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, D)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(a.d_model)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(a.d_model)
            self.fc = nn.Linear(a.d_model, 4 * a.d_model)
            self.out = nn.Linear(4 * a.d_model, a.d_model)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(a.vocab, a.d_model)
            self.pos = nn.Embedding(a.seq, a.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(a.layers))
            self.ln = nn.LayerNorm(a.d_model)
            self.head = nn.Linear(a.d_model, a.vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as GPT-2
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
            for b in self.blocks:
                if a.checkpoint:
                    x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
                else:
                    x = b(x)
            return self.head(self.ln(x))

    return GPT()


def train(a, result):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if a.allocator == "async":
        # Before torch is imported: it reads the variable when it sets up its CUDA allocator.
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    import torch
    import torch.nn.functional as F
    import torch.utils.checkpoint  # noqa: F401 - makes torch.utils.checkpoint available

    hostoff_torch = None
    if a.allocator == "hostoff":
        sys.path.insert(0, str(REPO / "contrib" / "pytorch"))
        import hostoff_torch

        hostoff_torch.install(a.adapter)
    result["torch"] = torch.__version__
    result["cuda"] = torch.version.cuda
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    result["tf32_api"] = set_tf32(torch, a.tf32 == "on")
    cuda = a.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    result["device"] = torch.cuda.get_device_name(dev) if cuda else "cpu"
    nvml = Nvml() if cuda else None
    torch.zeros(1, device=dev)  # the context, before the baseline
    sync()
    base = nvml.used() if nvml else None
    nvml_peak = 0

    def sample():
        nonlocal nvml_peak
        sync()
        u = nvml.used() if nvml else None
        if u is not None and base is not None:
            nvml_peak = max(nvml_peak, u - base)

    model = build_model(a, torch).to(dev)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            foreach=True)
    gen = torch.Generator().manual_seed(a.seed)
    t_train = time.perf_counter()
    for step in range(a.steps):
        if past_stop(a, result["step_s"]):
            print(f"--stop-at reached after {step} steps", flush=True)
            break
        tokens = torch.randint(a.vocab, (a.batch, a.seq + 1), generator=gen)
        x = tokens[:, :-1].to(dev)
        y = tokens[:, 1:].to(dev)
        sync()
        t0 = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, a.vocab), y.reshape(-1))
        sample()
        loss.backward()
        del logits
        sample()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        sync()
        dt = time.perf_counter() - t0
        result["losses"].append(value)
        result["losses_hex"].append(float(value).hex())
        result["step_s"].append(dt)
        write_result(a, result)
        print(f"step {step} loss {value:.6f} ({float(value).hex()}) {dt * 1e3:.1f} ms",
              flush=True)
        if a.time_limit and time.perf_counter() - t_train > a.time_limit:
            print(f"time limit reached after {step + 1} steps", flush=True)
            break
    result["nvml_peak_bytes"] = nvml_peak if base is not None else None
    if hostoff_torch is not None:
        s = hostoff_torch.stats()
        result["app_peak_bytes"] = s["bytes_peak"]
        result["adapter"] = s
    elif cuda:
        try:
            result["app_peak_bytes"] = torch.cuda.max_memory_reserved(dev)
            result["max_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        except RuntimeError as e:  # a backend without these statistics: NVML's figure stands
            result["app_peak_bytes"] = None
            result["peak_error"] = str(e)


def main(argv=None):
    a = parse_args(argv)
    result = {"ok": False, "config": vars(a), "losses": [], "losses_hex": [], "step_s": [],
              "median_step_s": None, "argv": sys.argv}
    t0 = time.perf_counter()
    try:
        train(a, result)
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 - the result says what failed
        result["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    result["wall_s"] = time.perf_counter() - t0
    write_result(a, result)
    print(("ok" if result["ok"] else "FAILED") + f" in {result['wall_s']:.1f} s", flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
