"""Measure variants of a workload the one way everything here measures them.

For each variant, at size n: check it against the float64 reference (fresh random inputs,
poisoned outputs), count its launches through the launch hook, trace its global bytes on
the simulator, time it on a GPU (cold L2, events, median), and re-check its output after
timing. Every record follows the results v1 schema.
"""

from __future__ import annotations

import itertools
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from ..arrays import poisoned, to_device
from ..backend import BACKEND
from ..core import Size, Variant, Workload
from ..runtime import device_facts
from ..instrument.launch_hook import count_launches
from ..instrument.timing import time_launchers
from .study import mismatch

T = TypeVar("T")


class MeasurementError(RuntimeError):
    """A variant gave a wrong answer, or the size does not fit the device."""


def progress(items: Sequence[T] | Iterable[T], label: str, total: int | None = None,
             stream=None, name=str) -> Iterator[T]:
    """tqdm's progress bar over `items` on stderr (stdout stays clean for tables and JSON); in Jupyter,
    tqdm.auto draws it as a widget. `name(item)` is shown beside the bar for the item in progress."""
    from tqdm.auto import tqdm
    items = list(items)
    bar = tqdm(items, desc=label, total=total or len(items), file=stream or sys.stderr, leave=True,
               dynamic_ncols=True, unit="step")
    for item in bar:
        bar.set_postfix_str(str(name(item))[:40], refresh=True)
        yield item


def bytes_needed(workload: Workload, variant: Variant, size: Size) -> int:
    """Device memory for inputs, outputs and the variant's intermediates (from its plan)."""
    plan = variant.plan(size)
    ideal = sum(np.prod(s) * np.dtype(d).itemsize for s, d in workload.output_specs(size).values())
    written = max(plan.bytes_written, int(ideal))
    return int(plan.launches[0].bytes_read + written) if plan.launches else 0


def rotation_copies(working_set: int, most: int = 8) -> int:
    """How many input copies keep a warm-cache repetition from re-reading the previous one's lines."""
    l2 = device_facts().l2_bytes
    if not l2 or working_set == 0 or working_set >= 2 * l2:
        return 1
    return min(most, -(-2 * l2 // working_set))


def rotating(launches: Sequence[Callable[[], None]]) -> Callable[[], None]:
    if len(launches) == 1:
        return launches[0]
    turn = itertools.cycle(launches)
    return lambda: next(turn)()


def check_fits(workload: Workload, variants: Sequence[Variant], size: Size) -> None:
    free = BACKEND.free_memory()
    if free is None:
        return
    need = max(bytes_needed(workload, v, size) for v in variants) + (512 << 20)  # L2 flush buffer etc.
    if need > free:
        raise MeasurementError(f"{size} needs about {need / 2**30:.1f} GiB of device memory; "
                               f"{free / 2**30:.1f} GiB are free. Choose a smaller size.")


def measure_workload(workload: Workload, size: Size, variants: Sequence[str] | None = None, *,
                     seed: int = 0, reps: int = 30, flush: bool = True,
                     show_progress: bool = True, verify: bool = True) -> list[dict[str, Any]]:
    """verify=False skips the float64 reference and the checks (for a size already checked smaller: at
    2^28 elements they take most of a minute, the timing a second). flush=False asks for a warm-cache
    figure; then, if the data fits in L2, each variant cycles through several copies of its inputs so a
    repetition does not find the last one's data still cached. A variant that cannot run this size (its
    limit says why) is left out when it was not asked for by name, and is an error when it was."""
    chosen = [workload.variant(v) for v in (variants or list(workload.variants))]
    for v in chosen:
        if (why := v.why_not(size)) is not None and variants:
            raise MeasurementError(f"{workload.name}/{v.name} at {size}: {why}")
    chosen = [v for v in chosen if v.why_not(size) is None]
    check_fits(workload, chosen, size)
    inputs = workload.make_inputs(size, np.random.default_rng(seed))
    ref = workload.reference(inputs) if verify else None
    dev_in = to_device(inputs)
    copies = 1 if flush else rotation_copies(max(bytes_needed(workload, v, size) for v in chosen))
    records, launchers, outs = [], [], []
    facts = device_facts()
    resident = facts.sm_count * facts.threads_per_sm  # threads that can have loads in flight at once
    steps = progress(chosen, f"{workload.name} {size}", name=lambda v: v.name) if show_progress else chosen
    for variant in steps:
        dev_out = poisoned(workload.output_specs(size))
        launch = variant.bind(dev_in, dev_out)
        with count_launches() as seen, trace_if_simulated() as trace:
            launch()
        if verify:
            _require_correct(workload, variant, dev_out, ref, "")
        plan = variant.plan(size)
        records.append({
            "workload": workload.name, "variant": variant.name, "pattern": variant.pattern, "n": size.elements,
            "size": dict(size),
            "launches": len(seen), "launches_planned": plan.n_launches,
            "bytes_model": plan.bytes_total, "bytes_model_read": plan.bytes_read,
            "bytes_model_write": plan.bytes_written,
            "bytes_traced": trace.bytes_total if trace is not None else None,
            "bytes_traced_read": trace.bytes_read if trace is not None else None,
            "bytes_traced_write": trace.bytes_written if trace is not None else None,
            "kernels": [k.kernel for k in plan.launches],
            "kernel_bytes": [k.bytes_read + k.bytes_written for k in plan.launches],
            "kernel_bytes_in_flight": [k.device_bytes_in_flight(resident) for k in plan.launches],
            "time_ms": None, "time_ms_q1": None, "time_ms_q3": None, "GBs": None,
            "host_us_per_launch": None,
        })
        spares = [variant.bind(to_device(inputs), poisoned(workload.output_specs(size))) for _ in range(copies - 1)]
        launchers.append(rotating([launch, *spares]))
        outs.append(dev_out)
    if BACKEND.can_time:
        timings = time_launchers(launchers, reps=reps, flush=flush)
        for rec, t, variant, dev_out in zip(records, timings, chosen, outs):
            if verify:
                _require_correct(workload, variant, dev_out, ref, " after timing")
            rec.update(time_ms=t.median_ms, time_ms_q1=t.q1_ms, time_ms_q3=t.q3_ms,
                       GBs=rec["bytes_model"] / (t.median_ms * 1e-3) / 1e9,
                       host_us_per_launch=t.host_us_per_call / max(rec["launches"], 1))
    return records


def trace_if_simulated() -> AbstractContextManager:
    """A context that traces every global-memory access on the simulator (it yields the trace) and
    yields None on a GPU, where nothing can trace them: one `with` serves both back-ends."""
    if BACKEND.can_trace:
        from ..instrument.trace import tracing
        return tracing()
    return nullcontext(None)


def _require_correct(workload: Workload, variant: Variant, dev_out, ref, when: str) -> None:
    wrong = mismatch(workload, {k: v.copy_to_host() for k, v in dev_out.items()}, ref)
    if isinstance(wrong, str):
        raise MeasurementError(f"{workload.name}/{variant.name} is wrong{when}: {wrong}")
