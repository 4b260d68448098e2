#!/usr/bin/env python3
"""Record a PyTorch training step as a hostoff trace, without a GPU.

The model runs on PyTorch's meta device (tensors with shapes and dtypes, no data) under a
TorchDispatchMode that sees every ATen operation below autograd, the backward pass and the
optimizer included. Each operation that would launch a kernel on a GPU becomes a launch naming
the storages it reads and writes; each storage is allocated when an operation creates it and
freed when PyTorch drops its last reference; kernel durations come from a roofline at the
device's rates (Roofline). The recording is written in two views (hostoff_views.py): one buffer
per tensor storage, as the cudaMallocAsync backend or the contrib/pytorch adapter shows them to
a preloaded library, and the segments of PyTorch's default caching allocator.

    import hostoff_record as hr
    model = build_model().to("meta")              # or built under torch.device("meta")
    opt = torch.optim.AdamW(model.parameters())
    with hr.Recorder() as rec:
        rec.adopt(model)                          # parameters and buffers exist before step 1
        for _ in range(8):
            loss = model(batch()).float().mean()  # batch(): CPU tensors .to("meta")
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            loss.item()                           # a copy to the host and a sync, as on a GPU
            rec.step()                            # a step boundary (kept in the header only)
    rec.write("job.tensor.jsonl", view="tensor")
    rec.write("job.segment.jsonl", view="segment")

docs/recorder.md says what is modelled and what is not. Needs torch (1.13 or later); the trace
format is docs/trace-format.md (schema version 1).
"""

import math
import os
import sys

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostoff_views  # noqa: E402  (beside this file)

aten = torch.ops.aten


class Roofline:
    """Kernel durations: the larger of the FLOPs at the matrix rate of the operands' dtype and the
    bytes read and written at the memory rate, plus a fixed floor per kernel (launch, ramp-up and
    tail of a small kernel on the device). Defaults: H200, 790 TFLOP/s bf16/fp16 matrix rate and
    4.3 TB/s HBM copy rate as measured (DESIGN.md, facts); fp32 matmuls at the 67 TFLOP/s of the
    SIMT units (PyTorch keeps TF32 off for matmuls by default), 395 with TF32 allowed."""

    def __init__(self, matrix_flops=790e12, fp32_flops=67e12, tf32_flops=395e12, hbm_bps=4.3e12,
                 floor_ns=3000):
        self.matrix_flops = matrix_flops
        self.fp32_flops = fp32_flops
        self.tf32_flops = tf32_flops
        self.hbm_bps = hbm_bps
        self.floor_ns = floor_ns

    def rate(self, dtype):
        if dtype in (torch.float32,):
            tf32 = getattr(torch.backends.cuda.matmul, "allow_tf32", False)
            return self.tf32_flops if tf32 else self.fp32_flops
        if dtype in (torch.float64,):
            return self.fp32_flops / 2
        return self.matrix_flops

    def ns(self, flops, nbytes, dtype=torch.bfloat16):
        t = max(flops / self.rate(dtype) if flops else 0.0, nbytes / self.hbm_bps)
        return int(self.floor_ns + t * 1e9)

    def describe(self):
        return {"matrix_tflops": self.matrix_flops / 1e12, "fp32_tflops": self.fp32_flops / 1e12,
                "tf32_tflops": self.tf32_flops / 1e12, "hbm_tbps": self.hbm_bps / 1e12,
                "floor_ns": self.floor_ns}


# Host time the recorded process spends per operation (PyTorch eager: Python, the dispatcher and
# the launch call), per operation that launches nothing (views, allocations), and per copy or sync.
HOST_LAUNCH_NS = 5000
HOST_OTHER_NS = 1000

# Operations that allocate without a kernel: their new storages are allocations, nothing runs.
ALLOC_ONLY = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
              "aten::new_empty_strided", "aten::_empty_affine_quantized"}
# Operations that only read metadata or make no kernel whatever their schema says.
NO_KERNEL = {"aten::detach", "aten::alias", "aten::lift_fresh", "aten::_has_compatible_shallow_copy_type",
             "aten::is_same_size", "aten::sym_size", "aten::sym_stride", "aten::sym_numel",
             "aten::record_stream", "aten::set_", "aten::resize_"}

# PyTorch's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh): one launch carries at most
# this many tensors for a depth (number of tensor lists), at most 320 blocks of 65536 elements.
MTA_MAX_TENSORS = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
MTA_MAX_BLOCKS = 320
MTA_CHUNK = 65536

_current = None  # the active Recorder (flash_attention and launch() find it here)


def _storage(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    return t.storage()._storage  # torch 1.13: TypedStorage wraps the UntypedStorage


def _is_meta(x):
    return isinstance(x, torch.Tensor) and x.device.type == "meta"


def _tensors(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


def _tbytes(t):
    return t.numel() * t.element_size()


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


def matmul_flops(name, args, out):
    """FLOPs of the matrix operations (2 per multiply-add); 0 for everything else."""
    if name == "aten::mm":
        a, b = args[0], args[1]
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if name == "aten::addmm":
        a, b = args[1], args[2]
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if name == "aten::bmm":
        a, b = args[0], args[1]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name == "aten::baddbmm":
        a, b = args[1], args[2]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name == "aten::convolution":
        w = args[1]
        return 2 * out[0].numel() * _prod(w.shape[1:])
    if name == "aten::convolution_backward":
        grad_out, w, mask = args[0], args[2], args[-1]
        fwd = 2 * grad_out.numel() * _prod(w.shape[1:])
        return fwd * (int(bool(mask[0])) + int(bool(mask[1])))
    return 0


def attention_flops(q, k, causal):
    """Fused attention forward: QK^T and PV, 4 * B * H * Sq * Sk * D; half of it when causal."""
    b, h, sq, d = q.shape
    f = 4 * b * h * sq * k.shape[-2] * d
    return f // 2 if causal else f


class _Live:
    __slots__ = ("sid", "nbytes", "ref")

    def __init__(self, sid, nbytes, ref):
        self.sid, self.nbytes, self.ref = sid, nbytes, ref


class Recorder(TorchDispatchMode):
    """Records every ATen operation on meta tensors. Events are kept in memory as tuples:
    ("alloc", sid, nbytes, site, t), ("free", sid, t), ("launch", name, ns, [(sid, written)], t),
    ("copy", dir, nbytes, [sid], t), ("sync", t); sid numbers storages in allocation order."""

    def __init__(self, roofline=None, host_launch_ns=HOST_LAUNCH_NS, host_other_ns=HOST_OTHER_NS):
        super().__init__()
        self.roofline = roofline or Roofline()
        self.host_launch_ns = host_launch_ns
        self.host_other_ns = host_other_ns
        self.events = []
        self.live = {}  # StorageImpl address -> _Live
        self.next_sid = 0
        self.t = 0
        self.steps = []  # index into events where each step begins
        self.op_counts = {}

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self):
        global _current
        _current = self
        self.steps.append(len(self.events))
        return super().__enter__()

    def __exit__(self, *exc):
        global _current
        self._poll()
        _current = None
        if self.steps and self.steps[-1] == len(self.events):
            self.steps.pop()
        return super().__exit__(*exc)

    def step(self):
        """Notes a step boundary: frees so far belong to the step that ends."""
        self._poll()
        self.steps.append(len(self.events))

    def adopt(self, *objs):
        """Allocates the storages of tensors that exist before recording (a module's parameters
        and buffers, an optimizer's state), in order, named by their parameter names."""
        for obj in objs:
            if isinstance(obj, torch.nn.Module):
                for name, p in list(obj.named_parameters()) + list(obj.named_buffers()):
                    self._storage_id(p, "param:" + name)
            else:
                for t in _tensors(obj, []):
                    self._storage_id(t, "adopted")

    # --- storages ----------------------------------------------------------------------------

    def _poll(self):
        """Frees every storage PyTorch no longer references (a weak reference that expired)."""
        dead = [k for k, rec in self.live.items() if rec.ref.expired()]
        for k in dead:
            rec = self.live.pop(k)
            self.events.append(("free", rec.sid, self.t))

    def _storage_id(self, t, site):
        """The id of t's storage; a storage not seen before is allocated now. Returns None for
        tensors that are not on the meta device or hold no bytes."""
        if not _is_meta(t):
            return None
        s = _storage(t)
        key = s._cdata
        rec = self.live.get(key)
        if rec is not None and rec.ref.expired():
            # The address was freed and reused within one operation.
            self.live.pop(key)
            self.events.append(("free", rec.sid, self.t))
            rec = None
        if rec is None:
            nbytes = s.nbytes()
            if nbytes == 0:
                return None
            rec = _Live(self.next_sid, nbytes, StorageWeakRef(s))
            self.next_sid += 1
            self.live[key] = rec
            self.events.append(("alloc", rec.sid, nbytes, site, self.t))
        return rec.sid

    # --- recording -----------------------------------------------------------------------------

    def launch(self, name, reads, writes, flops=0, dtype=None):
        """Records one kernel reading and writing the given meta tensors (used by operations the
        recorder composes itself, e.g. flash_attention)."""
        uses = []
        nbytes = 0
        for t, w in [(t, False) for t in reads] + [(t, True) for t in writes]:
            sid = self._storage_id(t, name)
            if sid is not None:
                uses.append((sid, w))
                nbytes += _tbytes(t)
        if dtype is None:
            dtype = reads[0].dtype if reads else torch.bfloat16
        ns = self.roofline.ns(flops, nbytes, dtype)
        self.t += self.host_launch_ns
        self.events.append(("launch", name, ns, uses, self.t))
        self.op_counts[name] = self.op_counts.get(name, 0) + 1

    def _copy(self, direction, nbytes, sids, sync):
        self.t += self.host_other_ns
        if sids:
            self.events.append(("copy", direction, max(1, nbytes), sids, self.t))
        if sync:
            self.events.append(("sync", self.t))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        inputs = _tensors((args, kwargs), [])
        meta_in = [t for t in inputs if _is_meta(t)]
        if name.startswith("aten::_foreach_") or name.startswith("aten::_fused_adam"):
            if meta_in:
                return self._multi_tensor(func, name, args, kwargs)
            return func(*args, **kwargs)
        if name == "aten::_local_scalar_dense" and meta_in:
            return self._to_host_scalar(meta_in[0])
        to_host = self._to_host(name, args, kwargs, meta_in)
        if to_host is not None:
            return to_host
        returns = func._schema.returns
        is_view = bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                        for r in returns)
        if not is_view:
            self._poll()
        out = self._run(func, name, args, kwargs)
        outs = [t for t in _tensors(out, []) if _is_meta(t)]
        if not meta_in and not outs:
            return out  # host-only work (CPU tensors, scalars)
        if not is_view and outs and meta_in and not any(
                a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments):
            # An operation that writes nothing and returns only storages it was given is a view
            # whatever its schema says (aten::_unsafe_view has no alias annotation).
            given = {_storage(t)._cdata for t in meta_in}
            is_view = all(_storage(t)._cdata in given for t in outs)
        if is_view or name in NO_KERNEL:
            self.t += self.host_other_ns
            for t in meta_in:
                self._storage_id(t, "adopted")
            return out
        cpu_in = [t for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "cpu"]
        if name in ("aten::copy_", "aten::_to_copy", "aten::_copy_from") and cpu_in and outs:
            sids = [self._storage_id(t, name) for t in outs[:1]]
            self._copy("h2d", _tbytes(outs[0]), [s for s in sids if s is not None], sync=False)
            return out
        in_sids = [(self._storage_id(t, "adopted"), False) for t in meta_in]
        out_sids = [(self._storage_id(t, name), True) for t in outs]
        if name in ALLOC_ONLY:
            self.t += self.host_other_ns
            return out
        uses = []
        seen = {}
        for sid, w in in_sids + out_sids:
            if sid is None:
                continue
            if sid in seen:
                uses[seen[sid]] = (sid, uses[seen[sid]][1] or w)
            else:
                seen[sid] = len(uses)
                uses.append((sid, w))
        nbytes = sum(_tbytes(t) for t in meta_in) + sum(_tbytes(t) for t in outs)
        flops = matmul_flops(name, args, outs)
        dtype = meta_in[0].dtype if meta_in else outs[0].dtype
        ns = self.roofline.ns(flops, nbytes, dtype)
        self.t += self.host_launch_ns
        self.events.append(("launch", name, ns, uses, self.t))
        self.op_counts[name] = self.op_counts.get(name, 0) + 1
        return out

    def _run(self, func, name, args, kwargs):
        try:
            return func(*args, **kwargs)
        except NotImplementedError:
            fallback = META_FALLBACKS.get(name)
            if fallback is None:
                raise
            return fallback(*args, **kwargs)

    def _to_host_scalar(self, t):
        """Tensor.item(): a copy of one element to the host and a wait for it. The value is 0: the
        recorded program cannot branch on data (there is none)."""
        sid = self._storage_id(t, "adopted")
        self._copy("d2h", t.element_size(), [sid] if sid is not None else [], sync=True)
        if t.dtype.is_floating_point:
            return 0.0
        if t.dtype == torch.bool:
            return False
        return 0

    def _to_host(self, name, args, kwargs, meta_in):
        """A copy from a meta tensor to the host (.cpu(), .to("cpu")): a d2h copy and a sync; the
        host tensor is uninitialised."""
        if name != "aten::_to_copy" or not meta_in:
            return None
        device = kwargs.get("device")
        if device is None or torch.device(device).type != "cpu":
            return None
        src = meta_in[0]
        sid = self._storage_id(src, "adopted")
        self._copy("d2h", _tbytes(src), [sid] if sid is not None else [],
                   sync=not kwargs.get("non_blocking", False))
        dtype = kwargs.get("dtype") or src.dtype
        return torch.empty(src.shape, dtype=dtype, device="cpu")

    def _multi_tensor(self, func, name, args, kwargs):
        """A foreach or fused optimizer operation: PyTorch's multi_tensor_apply launches one kernel
        per group of tensors and chunks (MTA_* above). Computed here tensor by tensor (meta has
        no foreach kernels before torch 2), recorded as those launches."""
        self._poll()
        lists = [a for a in args if isinstance(a, (list, tuple)) and a and
                 isinstance(a[0], torch.Tensor)]
        n = len(lists[0])
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:
            out = _foreach_by_tensor(name, func, args, kwargs, n)
        out_lists = [out] if isinstance(out, (list, tuple)) and out and \
            isinstance(out[0], torch.Tensor) else []
        tensor_lists = [list(x) for x in lists] + [list(x) for x in out_lists]
        depth = max(1, min(5, len(tensor_lists)))
        max_tensors = MTA_MAX_TENSORS[depth]
        for i in range(n):  # allocate outputs first (they exist before the first launch)
            for lst in out_lists:
                self._storage_id(lst[i], name)
        group, blocks, nbytes = [], 0, 0
        fused = name.startswith("aten::_fused_adam")

        def written(li):
            # fused Adam writes every list but the gradients (the second); an in-place foreach
            # operation writes its first list; out-of-place ones their output lists
            if fused:
                return li != 1
            return (li == 0 and name.endswith("_")) or li >= len(lists)

        def flush():
            uses = []
            for i in group:
                for li, lst in enumerate(tensor_lists):
                    sid = self._storage_id(lst[i], "adopted")
                    if sid is not None and sid not in [u[0] for u in uses]:
                        uses.append((sid, written(li)))
            dtype = tensor_lists[0][group[0]].dtype
            ns = self.roofline.ns(0, nbytes, dtype)
            self.t += self.host_launch_ns
            self.events.append(("launch", name, ns, uses, self.t))
            self.op_counts[name] = self.op_counts.get(name, 0) + 1

        for i in range(n):
            numel = tensor_lists[0][i].numel()
            chunks = max(1, math.ceil(numel / MTA_CHUNK))
            for c in range(chunks):
                if not group or group[-1] != i:
                    group.append(i)
                blocks += 1
                elems = min(MTA_CHUNK, numel - c * MTA_CHUNK)
                nbytes += sum(max(0, elems) * lst[i].element_size() for lst in tensor_lists)
                last_chunk = c == chunks - 1
                full = (len(group) == max_tensors and last_chunk) or blocks == MTA_MAX_BLOCKS
                if full or (i == n - 1 and last_chunk):
                    flush()
                    blocks, nbytes = 0, 0
                    group = [] if last_chunk else [i]
        return out

    # --- output --------------------------------------------------------------------------------

    def summary(self, view="tensor"):
        """Peak bytes and per-step figures of one view (hostoff_views.summarise)."""
        return hostoff_views.summarise(self, view)

    def write(self, path, view="tensor", meta=None, device_name="NVIDIA H200",
              device_mem=hostoff_views.H200_MEM_BYTES):
        """Writes the recording as a hostoff trace (schema v1) in one view: "tensor" (one buffer
        per storage) or "segment" (the caching allocator's segments). Returns the header."""
        header_extra = {"recorder": {"view": view, "torch": torch.__version__,
                                     "roofline": self.roofline.describe(),
                                     "host_launch_ns": self.host_launch_ns, **(meta or {})}}
        return hostoff_views.write_trace(self, path, view, device_name, device_mem, header_extra)


def _foreach_by_tensor(name, func, args, kwargs, n):
    """The result of a foreach operation on meta tensors (torch 1.13 has no meta foreach kernels):
    every one is elementwise over its first list, so an in-place one returns nothing and an
    out-of-place one a new tensor shaped like each of the first list's (a norm: one scalar each).
    Meta tensors hold no values, so nothing else needs computing."""
    first = args[0]
    if name.endswith("_"):
        return None
    if name.startswith("aten::_foreach_norm"):
        return [torch.empty((), dtype=t.dtype, device=t.device) for t in first]
    return [torch.empty_like(t) for t in first]


def _conv_backward_meta(grad_out, inp, weight, bias_sizes, stride, padding, dilation, transposed,
                        output_padding, groups, mask):
    """torch 1.13 has no meta kernel for convolution_backward: the gradients have the shapes of
    the input, the weight and the bias."""
    gi = torch.empty_like(inp) if mask[0] else None
    gw = torch.empty_like(weight) if mask[1] else None
    gb = torch.empty(weight.shape[0], dtype=weight.dtype, device=weight.device) if mask[2] else None
    return gi, gw, gb


META_FALLBACKS = {"aten::convolution_backward": _conv_backward_meta}


class _FlashAttention(torch.autograd.Function):
    """Fused causal attention as FlashAttention-2 runs it: the S x S scores are never stored. The
    forward writes the output and the row log-sum-exp; the backward is three kernels (the rows'
    dO.O, the main pass at 2.5x the forward's FLOPs with an fp32 dQ accumulator, the dQ
    conversion)."""

    @staticmethod
    def forward(ctx, q, k, v, causal):
        rec = _current
        b, h, s, _ = q.shape
        out = torch.empty_like(q)
        lse = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        rec.launch("flash_attn_fwd", [q, k, v], [out, lse], attention_flops(q, k, causal))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, dout):
        rec = _current
        q, k, v, out, lse = ctx.saved_tensors
        b, h, s, _ = q.shape
        delta = torch.empty((b, h, s), dtype=torch.float32, device=q.device)
        rec.launch("flash_attn_bwd_dot_do_o", [out, dout], [delta])
        dq_accum = torch.empty(q.shape, dtype=torch.float32, device=q.device)
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        rec.launch("flash_attn_bwd", [q, k, v, out, dout, lse, delta], [dq_accum, dk, dv],
                   int(2.5 * attention_flops(q, k, ctx.causal)), q.dtype)
        del delta
        dq = torch.empty_like(q)
        rec.launch("flash_attn_bwd_convert_dq", [dq_accum], [dq])
        return dq, dk, dv, None


def flash_attention(q, k, v, causal=True):
    """Attention over (batch, heads, seq, head_dim) tensors; k and v may have fewer heads (grouped
    queries, as FlashAttention-2 takes them). Under a Recorder: the fused kernels above. Without
    one: PyTorch's scaled_dot_product_attention where it exists, else the plain computation."""
    if _current is not None and _is_meta(q):
        return _FlashAttention.apply(q, k, v, causal)
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa is not None:
        return sdpa(q, k, v, is_causal=causal)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[-2]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ v


def launch(name, reads, writes, flops=0):
    """Records one kernel of the program's own (a custom CUDA extension, a Triton kernel) under
    the active Recorder: the tensors it reads and writes, and its FLOPs for the roofline."""
    if _current is None:
        raise RuntimeError("hostoff_record.launch: no Recorder is active")
    _current.launch(name, reads, writes, flops)


if __name__ == "__main__":
    import hostoff_workloads

    sys.exit(hostoff_workloads.main(sys.argv[1:]))
