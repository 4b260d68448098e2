"""What both GPU-kit trainers (torch_gpt.py, jax_tfm.py) do with their step times: when to stop,
the median they report, and the result file written after every step. Standard library only: the
trainers import it before torch or JAX."""
import json
import os
import statistics
import time


def past_stop(a, step_s):
    """Whether the next step would likely end after --stop-at. Judged by the slowest step after
    the first: the first one compiles (and warms caches), so it never predicts the next. With only
    the first step done, the second one always starts (unless --stop-at has passed): if it then
    overruns, the steps before it are already written."""
    if not a.stop_at:
        return False
    later = step_s[1:]
    return time.time() + (1.5 * max(later) if later else 0.0) > a.stop_at


def median_step(a, step_s):
    """Median step time after --warmup steps (else after the first); None before that."""
    timed = step_s[a.warmup:] or step_s[1:]
    return statistics.median(timed) if timed else None


def write_result(a, result):
    """The result so far, replacing the file atomically: written after every step, so a run
    that fails or is killed later keeps the steps it made."""
    if not a.out:
        return
    result["median_step_s"] = median_step(a, result["step_s"])
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, a.out)
