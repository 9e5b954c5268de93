"""Size sweeps and the model drawn over them.

    time ~ launches x launch cost + bytes / bandwidth

made concrete. Kernel k costs the GPU

    t_k = a + L + max(bytes_k / ceiling, L x (bytes_k / in_flight_k - 1))

  ceiling      the copy ceiling measured in the same run (GB/s);
  a            the fixed device cost of one kernel (launch, ramp-up, drain): fitted;
  L            the loaded DRAM latency: every kernel waits one round trip, then streams its
               bytes at the ceiling, or, when its threads keep too few bytes in flight, at
               one round trip per in_flight_k bytes (Little's law). in_flight_k comes from
               the plan: bytes each thread loads before it needs them x the threads resident
               at once. Fitted; a physical number to check (H200 DRAM: several hundred ns);
  c            what each dependent launch after the first exposes of the host's dispatch
               time (numba dispatch takes ~20-30 us; part of it hides behind the GPU's
               previous work): fitted.
A kernel cannot start before the host has issued it, so time = t_1 + sum over k >= 2 of
max(t_k, c). Small n: c dominates (launch-bound); large n: the bytes do (bandwidth-bound);
a chain crosses over where bytes_k / bandwidth = c. A kernel with few bytes in flight per
thread (4-byte loads) meets the Little's-law bound before the copy ceiling: that is the
gap between fused_naive and fused, and the lesson.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core import Size, Workload
from ..runtime import device_facts
from . import results
from .measure import measure_workload, progress


def model_time_ms(kernel_bytes: Sequence[int], ceiling_GBs: float, fixed_ms: float, launch_ms: float,
                  latency_ms: float = 0.0, in_flight: Sequence[int] | None = None) -> float:
    """The model's time for one chain of kernels (in_flight: device-wide bytes per kernel, 0 = unknown)."""
    return float(_model(kernel_bytes, in_flight, ceiling_GBs, np.float64(fixed_ms), np.float64(launch_ms),
                        np.float64(latency_ms)))


def _model(kernel_bytes, in_flight, ceiling_GBs, a, c, latency):
    """Vectorised over numpy grids of a, c and latency (all in ms)."""
    in_flight = in_flight or [0] * len(kernel_bytes)
    total = None
    for b, f in zip(kernel_bytes, in_flight):
        stream = b / (ceiling_GBs * 1e6)  # ms at the ceiling (GB/s = 1e6 bytes per ms)
        if f:  # too few bytes in flight: one round trip per f bytes
            stream = np.maximum(stream, latency * (b / f - 1))
        t = a + latency + stream
        total = t if total is None else total + np.maximum(t, c)
    return total if total is not None else 0.0 * a


FIXED_GRID_MS = np.linspace(0, 0.008, 33)    # a: 0 .. 8 us
LAUNCH_GRID_MS = np.linspace(0, 0.040, 81)   # c: 0 .. 40 us
LATENCY_GRID_MS = np.linspace(0, 0.0015, 31)  # L: 0 .. 1.5 us (0 first: preferred on ties)


def fit_model(records: Sequence[dict[str, Any]], ceiling_GBs: float) -> tuple[float, float, float]:
    """(a, c, L) in ms minimising the mean |log(model / measured)| over the records (grid search)."""
    # without declared bytes in flight, L would only add to a: leave it out
    declared = any(any(r.get("kernel_bytes_in_flight") or ()) for r in records)
    a, c, lat = np.meshgrid(FIXED_GRID_MS, LAUNCH_GRID_MS, LATENCY_GRID_MS if declared else [0.0], indexing="ij")
    err = np.zeros_like(a)
    for r in records:
        err += np.abs(np.log(_model(r["kernel_bytes"], r.get("kernel_bytes_in_flight"), ceiling_GBs, a, c, lat)
                             / r["time_ms"]))
    i = np.unravel_index(np.argmin(err), err.shape)
    return float(a[i]), float(c[i]), float(lat[i])


def add_model(records: list[dict[str, Any]], ceiling_GBs: float | None) -> None:
    """Fill time_ms_model and model_error for every timed record (refitted over the whole set)."""
    timed = [r for r in records if r.get("time_ms") and r.get("kernel_bytes")]
    if not ceiling_GBs or not timed:
        return
    a, c, lat = fit_model(timed, ceiling_GBs)
    for r in timed:
        r["time_ms_model"] = model_time_ms(r["kernel_bytes"], ceiling_GBs, a, c, lat, r.get("kernel_bytes_in_flight"))
        r["model_error"] = r["time_ms_model"] / r["time_ms"] - 1
        r["model_fixed_kernel_us"], r["model_launch_us"], r["model_latency_ns"] = a * 1e3, c * 1e3, lat * 1e6


def sweep(workload: Workload, sizes: Sequence[Size], *, json_path: str | Path, ceiling_GBs: float | None,
          reps: int = 20, flush: bool = True, variants: Sequence[str] | None = None, command: str | None = None,
          extra_meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Measure every variant at every size; the results file is rewritten after each size,
    so an interrupted sweep keeps what it measured. The meta names the swept axis (the one
    whose value changes), which the plots put on their x-axis."""
    axis = swept_axis(workload, sizes)
    meta = results.make_meta(command, ceiling_GBs, l2_bytes=device_facts().l2_bytes, cold_l2=flush,
                             sweep_axis=axis, sweep_unit=workload.axis(axis).unit, **(extra_meta or {}))
    records: list[dict[str, Any]] = []
    for size in progress(sizes, f"sweep {workload.name}", name=str):
        # a bar of its own per size, variant by variant: one large size may take most of the sweep
        records += measure_workload(workload, size, variants, reps=reps, flush=flush)
        add_model(records, ceiling_GBs)
        results.dump(meta, records, json_path)
    return records


def swept_axis(workload: Workload, sizes: Sequence[Size]) -> str:
    """The axis whose value changes across `sizes` (the first axis when none or several do)."""
    changing = [a for a in workload.axis_names if len({s[a] for s in sizes}) > 1]
    return changing[0] if len(changing) == 1 else workload.axis_names[0]
