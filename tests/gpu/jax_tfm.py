#!/usr/bin/env python3
"""A small transformer training loop in JAX for the GPU kit (tests/gpu/run runs it).

Run with XLA_PYTHON_CLIENT_ALLOCATOR=platform (set here unless the caller set it) so that XLA
allocates each buffer from the driver instead of preallocating 75% of the GPU: under
LD_PRELOAD=libhostoff.so the library then sees the parameters, optimizer state and each step's
temporary buffer as separate allocations. Synthetic tokens and initial weights from a fixed seed;
a jitted step (layers under lax.scan, Adam written out, parameters donated, no gathers or
scatters: token lookups are one-hot products); every step's loss is
recorded exactly (float.hex) so runs can be compared bit for bit. --remat wraps each layer in
jax.checkpoint (rematerialisation) for comparison.

Writes --out JSON after every step (so a run cut short keeps its steps): losses, per-step times
(the first includes compilation), the median step time after --warmup steps, NVML's largest
device memory in use sampled after each step (when pynvml is there), XLA_FLAGS, and any error.
--cache-dir keeps XLA's compiled programs there. jax is imported only after the arguments are
parsed.
"""

import argparse
import os
import sys
import time
import traceback

from trainer_steps import median_step, past_stop, write_result  # beside this script


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="first steps left out of the median (default 2; step 1 compiles)")
    ap.add_argument("--batch", type=int, default=16, help="sequences per step (default 16)")
    ap.add_argument("--seq", type=int, default=512, help="tokens per sequence (default 512)")
    ap.add_argument("--layers", type=int, default=8, help="transformer blocks (default 8)")
    ap.add_argument("--d-model", type=int, default=1024, help="model width (default 1024)")
    ap.add_argument("--heads", type=int, default=16, help="attention heads (default 16)")
    ap.add_argument("--vocab", type=int, default=16384, help="vocabulary (default 16384)")
    ap.add_argument("--lr", type=float, default=3e-4, help="Adam learning rate")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--remat", action="store_true",
                    help="recompute each layer in the backward pass (jax.checkpoint)")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help="stop after the step that passes this many seconds of training "
                         "(0: run every step)")
    ap.add_argument("--stop-at", type=float, default=0.0,
                    help="wall-clock time (seconds since the epoch) by which training must have "
                         "stopped: a step that would end later is not started (0: none)")
    ap.add_argument("--cache-dir", help="JAX's persistent compilation cache (tests/gpu/run gives "
                    "each run's own folder: the cases after the first compile nothing)")
    ap.add_argument("--out", help="write the result JSON here")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1 or a.seq < 2 or a.layers < 1 or a.vocab < 2:
        ap.error("--steps, --batch, --layers must be >= 1; --seq, --vocab >= 2")
    if a.d_model < 1 or a.heads < 1 or a.d_model % a.heads:
        ap.error("--d-model must be a positive multiple of --heads")
    if a.warmup < 0 or a.time_limit < 0 or a.stop_at < 0:
        ap.error("--warmup, --time-limit and --stop-at must be >= 0")
    return a


def nvml_used():
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used)
    except Exception:  # noqa: BLE001 - optional
        return None


def train(a, result):
    os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    result["env"] = {k: os.environ.get(k) for k in
                     ("XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_FLAGS")}
    import jax
    import jax.numpy as jnp
    import numpy as np

    result["jax"] = jax.__version__
    if a.cache_dir:
        result["cache_dir"] = a.cache_dir
        jax.config.update("jax_compilation_cache_dir", a.cache_dir)
        for opt, value in (("jax_persistent_cache_min_compile_time_secs", 0),
                           ("jax_persistent_cache_min_entry_size_bytes", 0)):
            try:
                jax.config.update(opt, value)
            except (AttributeError, KeyError, ValueError) as e:  # an older or newer JAX
                result.setdefault("cache_notes", []).append(f"{opt}: {e}")
    dev = jax.devices()[0]
    result["device"] = getattr(dev, "device_kind", str(dev))
    D, H, V, T, L = a.d_model, a.heads, a.vocab, a.seq, a.layers
    F = 4 * D
    hd = D // H

    def init(key):
        ks = jax.random.split(key, 6)

        def normal(k, shape):
            return 0.02 * jax.random.normal(k, shape, jnp.float32)

        return {
            "tok": normal(ks[0], (V, D)),
            "pos": normal(ks[1], (T, D)),
            "ln_f": jnp.ones((D,), jnp.float32),
            "layers": {  # stacked over layers for lax.scan
                "ln1": jnp.ones((L, D), jnp.float32),
                "ln2": jnp.ones((L, D), jnp.float32),
                "qkv": normal(ks[2], (L, D, 3 * D)),
                "proj": normal(ks[3], (L, D, D)),
                "fc": normal(ks[4], (L, D, F)),
                "out": normal(ks[5], (L, F, D)),
            },
        }

    def layer_norm(x, g):
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g

    mask = jnp.tril(jnp.ones((T, T), dtype=bool))

    def block(x, p):
        B = x.shape[0]
        h = layer_norm(x, p["ln1"])
        q, k, v = jnp.split(h @ p["qkv"], 3, axis=-1)
        q = q.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
        k = k.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
        v = v.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
        att = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.float32(hd))
        att = jnp.where(mask, att, -jnp.inf)
        att = jax.nn.softmax(att, axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + y @ p["proj"]
        h = layer_norm(x, p["ln2"])
        return x + jax.nn.gelu(h @ p["fc"], approximate=True) @ p["out"], None

    body = jax.checkpoint(block) if a.remat else block

    # Token lookups and the loss go through one-hot products, not gathers: a gather's gradient
    # is a scatter-add, which XLA runs with atomics (non-deterministic) unless told otherwise.
    def loss_fn(params, x, y):
        h = jax.nn.one_hot(x, V, dtype=jnp.float32) @ params["tok"] + params["pos"][None, :, :]
        h, _ = jax.lax.scan(body, h, params["layers"])
        logits = layer_norm(h, params["ln_f"]) @ params["tok"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(y, V, dtype=jnp.float32), axis=-1))

    b1, b2, eps = 0.9, 0.95, 1e-8

    def step(params, m, v, x, y, t):
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        m = jax.tree_util.tree_map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree_util.tree_map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        c1 = 1 - b1 ** t
        c2 = 1 - b2 ** t
        params = jax.tree_util.tree_map(
            lambda p_, m_, v_: p_ - a.lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), params, m, v)
        return params, m, v, loss

    step = jax.jit(step, donate_argnums=(0, 1, 2))
    params = init(getattr(jax.random, "key", jax.random.PRNGKey)(a.seed))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    result["parameters"] = int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
    jax.block_until_ready((params, m, v))
    base = nvml_used()
    nvml_peak = 0
    rng = np.random.default_rng(a.seed)
    t_train = time.perf_counter()
    for i in range(a.steps):
        if past_stop(a, result["step_s"]):
            print(f"--stop-at reached after {i} steps", flush=True)
            break
        tok = rng.integers(0, V, size=(a.batch, T + 1), dtype=np.int32)
        x = jnp.asarray(tok[:, :-1])
        y = jnp.asarray(tok[:, 1:])
        jax.block_until_ready((x, y))
        t0 = time.perf_counter()
        params, m, v, loss = step(params, m, v, x, y, jnp.float32(i + 1))
        value = float(jax.block_until_ready(loss))
        dt = time.perf_counter() - t0
        u = nvml_used()
        if u is not None and base is not None:
            nvml_peak = max(nvml_peak, u - base)
            result["nvml_peak_bytes"] = nvml_peak
        result["losses"].append(value)
        result["losses_hex"].append(value.hex())
        result["step_s"].append(dt)
        write_result(a, result)
        print(f"step {i} loss {value:.6f} ({value.hex()}) {dt * 1e3:.1f} ms", flush=True)
        if a.time_limit and time.perf_counter() - t_train > a.time_limit:
            print(f"time limit reached after {i + 1} steps", flush=True)
            break
    result["nvml_peak_bytes"] = nvml_peak if base is not None else None
    try:
        stats = dev.memory_stats() or {}
        result["app_peak_bytes"] = stats.get("peak_bytes_in_use")
    except Exception:  # noqa: BLE001 - the platform allocator may keep no statistics
        result["app_peak_bytes"] = None


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
