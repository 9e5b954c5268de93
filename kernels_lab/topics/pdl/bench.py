"""PDL, graphs and the grouped kernel over G and tensor size: end-to-end, host time, gaps.

For each (G, size class, variant): check the outputs against the float64 reference, then
time repetitions of producer -> group -> consumer with CUDA events (device, end to end) and
the host clock (issue time); from the %globaltimer stamps of each repetition, the gap at
each boundary between consecutive group kernels (negative: they overlapped). One timeline
per variant is kept for the Gantt chart.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Sequence

import numpy as np

from . import workload as pdl
from ...backend import BACKEND
from ...runtime import cuda
from ...instrument.timing import TimingUnavailable
from ...profile.runs import Bench

SIZE_CLASSES = {"tiny": (256, 1024), "small": (4096, 16384), "large": (1 << 18, 1 << 20)}
# The (G, size class) points whose last run's timeline is kept: G = 8 in every class (lesson 06's
# Gantt charts), and G = 32 large, where host-launched pdl falls behind graph_pdl: how many members
# run at once there is what the timeline can tell.
TIMELINES_KEPT = {(8, c) for c in SIZE_CLASSES} | {(32, "large")}


def members_at_once(timeline: list[dict[str, Any]]) -> int:
    """The most group members running at one moment, from their stamps (the producer and the
    consumer, first and last, left out)."""
    group = timeline[1:-1]
    edges = sorted([(k["start_us"], 1) for k in group] + [(k["end_us"], -1) for k in group])
    running = most = 0
    for _, step in edges:  # at equal times an end (-1) sorts first: touching is not overlapping
        running += step
        most = max(most, running)
    return most


def _gaps_us(timeline: list[dict[str, Any]]) -> list[float]:
    group = timeline[1:-1]
    return [b["start_us"] - a["end_us"] for a, b in zip(group, group[1:])]


def measure_pdl(groups=(1, 8, 32, 64), classes=("tiny", "small", "large"), reps: int = 30,
                seed: int = 0, variants: Sequence[str] | None = None) -> list[dict[str, Any]]:
    if not BACKEND.can_time:
        raise TimingUnavailable("PDL timings need a GPU (compute capability >= 9.0)")
    rng = np.random.default_rng(seed)
    records = []
    start, end = cuda.event(), cuda.event()
    for g in groups:
        for cls in classes:
            group = pdl.Group(pdl.make_sizes(g, rng, *SIZE_CLASSES[cls]))
            for variant in pdl.VARIANTS + pdl.WRONG if variants is None else variants:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # on a GPU the PDL variants must really use PDL
                    launcher = pdl.GroupLauncher(group, variant)
                out = pdl.run_once(group, variant, seed=int(rng.integers(1 << 30)))
                problem = pdl.check(group, out)
                if problem and variant in pdl.VARIANTS:
                    raise RuntimeError(f"{variant} G={g} {cls}: {problem}")
                e2e, host, gaps, early = [], [], [], []
                for r in range(reps + 3):
                    group.reset(seed=r)
                    cuda.synchronize()
                    start.record()
                    t0 = time.perf_counter()
                    launcher()
                    t1 = time.perf_counter()
                    end.record()
                    end.synchronize()
                    if r < 3:
                        continue  # warm-up
                    e2e.append(start.elapsed_time(end) * 1e3)
                    host.append((t1 - t0) * 1e6)
                    tl = group.timeline(group.stamps.copy_to_host(), variant)
                    gaps += _gaps_us(tl)
                    early.append(tl[-1]["start_us"] - max(k["end_us"] for k in tl[1:-1]))
                records.append({
                    "kind": "pdl", "variant": variant, "correct_set": variant in pdl.VARIANTS, "G": g,
                    "size_class": cls, "elements": int(sum(group.sizes)),
                    "e2e_us": float(np.median(e2e)), "e2e_us_q1": float(np.percentile(e2e, 25)),
                    "e2e_us_q3": float(np.percentile(e2e, 75)), "host_us": float(np.median(host)),
                    "gap_us": float(np.median(gaps)) if gaps else None,
                    "consumer_start_minus_group_end_us": float(np.median(early)),
                    "wrong_output": problem, "switches": [list(s) for s in launcher.switches],
                    "timeline": tl if (g, cls) in TIMELINES_KEPT else None,
                })
    return records


BENCH = Bench("a group of small kernels: plain, PDL, graph, graph + PDL, grouped, over G", measure_pdl)  # `kernels-lab bench pdl`
