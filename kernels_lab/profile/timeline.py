"""A kernel timeline without Nsight Systems, for any variant of any workload.

Two sources of spans, the same shape ({"kernel", "start_us", "end_us"}, us from the first start):
  stamps  kernels that stamp their own blocks with %globaltimer (the PDL lesson's kernels):
          the only way to see two kernels overlap (PDL), see workloads/quantize_group.spans;
  events  everything else: the launch hook records a CUDA event before and after every launch,
          in the launch's own stream, so no kernel needs to change. Events sit between kernels,
          so they hide any overlap (never use them to judge PDL) and add about a microsecond
          per boundary; a graph replay is one span ("graph replay").
On the simulator the host clock stands in (a simulated launch runs to completion before it
returns): the spans are well formed, their lengths say nothing about a GPU.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

from ..backend import BACKEND
from ..instrument.launch_hook import LaunchRecord, listening


def _timing_event(stream: Any):
    from cuda.core import EventOptions

    from ..launch_paths import core_stream
    target = core_stream(stream)
    if not hasattr(target, "record"):
        return None  # a graph being built: no events inside a capture
    return target.record(options=EventOptions(timing_enabled=True))


@contextmanager
def event_timeline() -> Iterator[list[dict[str, Any]]]:
    """with event_timeline() as spans: <launch work>  -> one span per launch, filled on exit."""
    marks: list[tuple[str, Any, Any]] = []
    open_: dict[int, tuple[str, Any]] = {}
    clock = None if BACKEND.can_time else time.perf_counter

    def begin(rec: LaunchRecord, args, fn) -> None:
        open_[id(rec)] = (rec.kernel, clock() if clock else _timing_event(rec.stream))

    def end(rec: LaunchRecord) -> None:
        name, start = open_.pop(id(rec))
        if start is not None:
            marks.append((name, start, clock() if clock else _timing_event(rec.stream)))

    spans: list[dict[str, Any]] = []
    with listening(begin, end):
        yield spans
    if not marks:
        return
    if clock:
        t0 = marks[0][1]
        spans += [{"kernel": k, "start_us": (s - t0) * 1e6, "end_us": (e - t0) * 1e6} for k, s, e in marks]
        return
    from ..runtime import cuda
    cuda.synchronize()
    first = marks[0][1]
    spans += [{"kernel": k, "start_us": (s - first) * 1e3, "end_us": (e - first) * 1e3} for k, s, e in marks]


def variant_timelines(workload, size, variants=None, seed: int = 0,
                      show_progress: bool = True) -> list[dict[str, Any]]:
    """One timeline record per variant: bind, run once to warm up (compile; not on the simulator,
    which has nothing to compile), then run once timed.
    A progress bar on stderr names the variant in progress (the first run of each compiles it)."""
    import numpy as np

    from ..arrays import poisoned, to_device
    from .measure import progress
    inputs = to_device(workload.make_inputs(size, np.random.default_rng(seed)))
    records = []
    names = list(variants or workload.variants)
    for name in progress(names, f"timeline {workload.name} {size}") if show_progress else names:
        launch = workload.variant(name).bind(inputs, poisoned(workload.output_specs(size)))
        if BACKEND.can_time:
            launch()  # compiles every kernel, so that the timed run shows launches, not the compiler
        with event_timeline() as spans:
            launch()
        records.append({"kind": "timeline", "workload": workload.name, "variant": name, "n": size.elements, "size": dict(size),
                        "pattern": workload.variant(name).pattern,
                        "source": "CUDA events" if BACKEND.can_time else "host clock (simulator)", "spans": spans})
    return records
