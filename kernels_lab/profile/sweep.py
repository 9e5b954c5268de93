"""Size sweeps and the model drawn over them.

    time_model = launches x launch_cost + bytes / bandwidth

computed, not fitted: bandwidth is the copy ceiling measured in the same run, launch_cost
is the host time per launch measured for that very launcher. Small n: the launches
dominate (launch-bound); large n: the bytes do (bandwidth-bound); the crossover is where
launches x launch_cost = bytes / bandwidth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..core import Workload
from ..runtime import device_facts
from . import results
from .measure import measure_workload, progress

DEFAULT_SIZES = tuple(1 << k for k in range(12, 28, 2)) + (1 << 27,)


def model_time_ms(launches: int, launch_us: float, bytes_moved: int, ceiling_GBs: float) -> float:
    return launches * launch_us * 1e-3 + bytes_moved / (ceiling_GBs * 1e9) * 1e3


def add_model(records: list[dict[str, Any]], ceiling_GBs: float | None) -> None:
    for r in records:
        if ceiling_GBs and r.get("time_ms") is not None and r.get("host_us_per_launch") is not None:
            r["time_ms_model"] = model_time_ms(r["launches"], r["host_us_per_launch"], r["bytes_model"], ceiling_GBs)
            r["model_error"] = r["time_ms_model"] / r["time_ms"] - 1


def crossover_n(bytes_per_element: float, launches: int, launch_us: float, ceiling_GBs: float) -> float:
    """The n at which launch cost equals transfer time."""
    return launches * launch_us * 1e-6 * ceiling_GBs * 1e9 / bytes_per_element


def sweep(workload: Workload, sizes: Sequence[int], *, json_path: str | Path, ceiling_GBs: float | None,
          reps: int = 20, variants: Sequence[str] | None = None, command: str | None = None,
          extra_meta: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Measure every variant at every size; the results file is rewritten after each size,
    so an interrupted sweep keeps what it measured."""
    meta = results.make_meta(command, ceiling_GBs, l2_bytes=device_facts().l2_bytes, **(extra_meta or {}))
    records: list[dict[str, Any]] = []
    for n in progress(sizes, f"sweep {workload.name}", name=lambda n: f"n={n:,}"):
        got = measure_workload(workload, n, variants, reps=reps, show_progress=False)
        add_model(got, ceiling_GBs)
        records += got
        results.dump(meta, records, json_path)
    return records
