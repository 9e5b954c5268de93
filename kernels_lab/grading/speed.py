"""Speed on a GPU: the student's kernel against the reference solution, interleaved, classed conservatively.

In the child (on a GPU only): both kernels run on the same inputs, rep by rep in turn, each
after an L2 flush, timed with CUDA events (instrument.timing), so clock drift and a noisy
neighbour hit both alike. Each repetition gives one ratio student / reference.

In the parent: the ratios' median is the leaderboard value (lower is faster); the class
comes from their quartiles, so a claim needs the spread to back it:
    faster   q3 < 1 - margin     slower   q1 > 1 + margin
    same     q1 >= 1 - margin and q3 <= 1 + margin          unclear  anything else
Only a correct kernel at the speed size is classed; a wrong one gets no speed credit.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

MARGIN = 0.05


@dataclass(frozen=True)
class SpeedSpec:
    n: int                               # elements: large enough that launch noise does not matter
    reference: str                       # "module:attribute" of the reference solution's kernel
    reference_config: Callable[[int], tuple[int, int]]
    reps: int = 40


def load_reference(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def measure(entry, reference, student_args: list, reference_args: list, config: tuple[int, int],
            reference_config: tuple[int, int], reps: int) -> dict[str, list[float]]:
    """Child side: interleaved event times (ms) of the student's launch and the reference's,
    each writing its own output array (the student's is checked by the parent afterwards)."""
    from ..instrument.timing import time_launchers
    student = entry[config[0], config[1]]
    ref = reference[reference_config[0], reference_config[1]]
    ts, tr = time_launchers([lambda: student(*student_args), lambda: ref(*reference_args)], reps=reps)
    return {"student_ms": list(ts.samples_ms), "reference_ms": list(tr.samples_ms)}


@dataclass(frozen=True)
class SpeedVerdict:
    ratio: float   # median of student / reference over the repetitions (lower is faster)
    q1: float
    q3: float
    label: str     # faster / same / slower / unclear

    def describe(self) -> str:
        return (f"{self.label}: your kernel takes {self.ratio:.2f}x the reference's time "
                f"(quartiles {self.q1:.2f}-{self.q3:.2f} over interleaved runs)")


def classify(student_ms: list[float], reference_ms: list[float], margin: float = MARGIN) -> SpeedVerdict:
    ratios = np.asarray(student_ms) / np.asarray(reference_ms)
    q1, med, q3 = (float(v) for v in np.percentile(ratios, [25, 50, 75]))
    if q3 < 1 - margin:
        label = "faster"
    elif q1 > 1 + margin:
        label = "slower"
    elif q1 >= 1 - margin and q3 <= 1 + margin:
        label = "same"
    else:
        label = "unclear"
    return SpeedVerdict(med, q1, q3, label)


def points_for(verdict: SpeedVerdict, points: float) -> float:
    """Full points unless clearly slower: the class is conservative, the points are too."""
    return 0.0 if verdict.label == "slower" else points
