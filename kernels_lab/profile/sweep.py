"""Size sweeps and the model drawn over them.

    time ~ launches x launch cost + bytes / bandwidth

made concrete, with the bandwidth measured (the copy ceiling of the same run) and two
launch costs fitted to the sweep (a grid search, reported beside the figure):
  a  the fixed device cost of one kernel (launch, ramp-up, drain);
  c  what each dependent launch after the first exposes of the host's dispatch time
     (numba dispatch takes ~30 us; part of it hides behind the GPU's previous work).
Kernel k costs the GPU t_k = a + bytes_k / bandwidth, and cannot start before the host
has issued it, so   time = t_1 + sum over k >= 2 of max(t_k, c).
Small n: c dominates (launch-bound); large n: the bytes do (bandwidth-bound); a chain
crosses over where bytes_k / bandwidth = c. A variant that cannot reach the copy ceiling
(4-byte accesses) runs slower than the model: for it the model is a bound, and the gap is
the lesson.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core import Workload
from ..runtime import device_facts
from . import results
from .measure import measure_workload, progress

DEFAULT_SIZES = tuple(1 << k for k in range(12, 28, 2)) + (1 << 27,)


def model_time_ms(kernel_bytes: Sequence[int], ceiling_GBs: float, fixed_ms: float, launch_ms: float) -> float:
    t = [fixed_ms + b / (ceiling_GBs * 1e6) for b in kernel_bytes]
    return t[0] + sum(max(tk, launch_ms) for tk in t[1:]) if t else 0.0


def fit_launch_costs(records: Sequence[dict[str, Any]], ceiling_GBs: float) -> tuple[float, float]:
    """(a, c) in ms minimising the mean |log(model / measured)| over the records."""
    best, best_err = (0.0, 0.0), math.inf
    for a in np.linspace(0, 0.010, 41):
        for c in np.linspace(0, 0.040, 81):
            err = float(np.mean([abs(math.log(model_time_ms(r["kernel_bytes"], ceiling_GBs, a, c) / r["time_ms"]))
                                   for r in records]))
            if err < best_err:
                best, best_err = (float(a), float(c)), err
    return best


def add_model(records: list[dict[str, Any]], ceiling_GBs: float | None) -> None:
    """Fill time_ms_model and model_error for every timed record (refitted over the whole set)."""
    timed = [r for r in records if r.get("time_ms") and r.get("kernel_bytes")]
    if not ceiling_GBs or not timed:
        return
    a, c = fit_launch_costs(timed, ceiling_GBs)
    for r in timed:
        r["time_ms_model"] = model_time_ms(r["kernel_bytes"], ceiling_GBs, a, c)
        r["model_error"] = r["time_ms_model"] / r["time_ms"] - 1
        r["model_fixed_kernel_us"], r["model_launch_us"] = a * 1e3, c * 1e3


def sweep(workload: Workload, sizes: Sequence[int], *, json_path: str | Path, ceiling_GBs: float | None,
          reps: int = 20, flush: bool = True, variants: Sequence[str] | None = None, command: str | None = None,
          extra_meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Measure every variant at every size; the results file is rewritten after each size,
    so an interrupted sweep keeps what it measured."""
    meta = results.make_meta(command, ceiling_GBs, l2_bytes=device_facts().l2_bytes, cold_l2=flush,
                             **(extra_meta or {}))
    records: list[dict[str, Any]] = []
    for n in progress(sizes, f"sweep {workload.name}", name=lambda n: f"n={n:,}"):
        records += measure_workload(workload, n, variants, reps=reps, flush=flush, show_progress=False)
        add_model(records, ceiling_GBs)
        results.dump(meta, records, json_path)
    return records
