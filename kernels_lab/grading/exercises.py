"""Exercises as declarative specs: what the student writes, how it is run, what it is worth.

An instructor adds an exercise by adding an Exercise to EXERCISES: a workload-like spec
(inputs, float64 reference, outputs), the name and kind of what the student writes, the
launch configurations to try, the public and hidden cases, and the checks with their
points. The grader never needs to change.

    kind "kernel": the student writes a @cuda.jit kernel `entry`; the grader launches it with
                   each configuration in `configs` (a callable n -> (grid, block)).
    kind "host":   the student writes a host function `entry(**arrays)` that launches kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..patterns import elementwise
from .speed import SpeedSpec

Config = Callable[[int], tuple[int, int]]


@dataclass(frozen=True)
class Case:
    n: int
    seed: int
    hidden: bool = False
    symmetric_probe: bool = False  # inputs arranged so a wrong index could pass (the grader's own probe)


@dataclass(frozen=True)
class Exercise:
    name: str
    lesson: str
    title: str
    pattern: str
    kind: str                    # "kernel" or "host"
    entry: str                   # the name the student defines
    signature: str               # shown to the student
    make_inputs: Callable[[int, np.random.Generator], dict[str, Any]]
    reference: Callable[[dict[str, Any]], dict[str, np.ndarray]]
    output_specs: Callable[[int], dict[str, tuple[tuple[int, ...], Any]]]
    argument_order: tuple[str, ...]
    cases: tuple[Case, ...]
    configs: tuple[Config, ...] = ()
    max_launches: int | None = None
    max_bytes: Callable[[int], int] | None = None  # global traffic budget (the reference plan)
    race_seeds: tuple[int, ...] = ()               # perturbed-schedule reruns (simulator)
    points: dict[str, float] = field(default_factory=dict)
    speed: SpeedSpec | None = None                 # the "speed" check's size and reference (GPU)
    rtol: float = 1e-4
    atol: float = 1e-5

    @property
    def max_score(self) -> float:
        return float(sum(self.points.values()))


def _grid_for(block: int) -> Config:
    return lambda n: (max(1, -(-n // block)), block)


def _fixed(grid: int, block: int) -> Config:
    return lambda n: (grid, block)


# -- block sums: shared memory and a barrier (lesson 03) -------------------------------------
SUM_BLOCK = 64


def _sum_inputs(n: int, rng: np.random.Generator) -> dict[str, Any]:
    return {"x": rng.uniform(-1.0, 3.0, n).astype(np.float32)}


def _sum_reference(inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    nb = max(1, math.ceil(x.size / SUM_BLOCK))
    padded = np.zeros(nb * SUM_BLOCK)
    padded[:x.size] = x
    return {"out": padded.reshape(nb, SUM_BLOCK).sum(axis=1)}


def _sum_outputs(n: int):
    return {"out": ((max(1, math.ceil(n / SUM_BLOCK)),), np.float32)}


CHAIN_POINTS = {"correct (public)": 3, "correct (hidden)": 3, "launch budget": 1, "traffic budget": 1,
                "compiles for sm_90": 1, "speed": 1}
_chain = dict(make_inputs=elementwise.make_inputs, reference=elementwise.reference,
              output_specs=elementwise.output_specs, argument_order=("x", "b", "alpha", "out"))
_chain_cases = (Case(1, 11), Case(255, 12), Case(257, 13), Case(1031, 14),
                Case(613, 21, hidden=True), Case(2 * 256 + 3, 22, hidden=True), Case(97, 23, hidden=True,
                                                                                      symmetric_probe=True))

EXERCISES: dict[str, Exercise] = {e.name: e for e in [
    Exercise(
        name="fuse_chain", lesson="01", title="Fuse bias add -> GELU -> scale into one kernel",
        pattern="fused", kind="kernel", entry="fused_chain",
        signature="@cuda.jit\ndef fused_chain(x, b, alpha, out):  # out[i] = alpha * gelu(x[i] + b[i])",
        cases=_chain_cases, configs=(_grid_for(256), _grid_for(128), _grid_for(32)),
        max_launches=1, max_bytes=lambda n: 12 * n, points=CHAIN_POINTS,
        # against the lesson's own answer: one thread per element (16-byte accesses come out faster)
        speed=SpeedSpec(1 << 24, "kernels_lab.patterns.elementwise:fused_naive_kernel", _grid_for(256), reps=80),
        **_chain),
    Exercise(
        name="two_launches", lesson="02", title="Launch the chain as two kernels: (bias add + GELU), then scale",
        pattern="unfused", kind="host", entry="run_two",
        signature="def run_two(x, b, alpha, out):  # two launches; one intermediate array",
        cases=_chain_cases, max_launches=2, max_bytes=lambda n: 20 * n,
        points={"correct (public)": 3, "correct (hidden)": 3, "launch budget": 2, "traffic budget": 2}, **_chain),
    Exercise(
        name="persistent_chain", lesson="03", title="Write the fused chain as a grid-stride (persistent) kernel",
        pattern="persistent", kind="kernel", entry="persistent_chain",
        signature="@cuda.jit\ndef persistent_chain(x, b, alpha, out):  # correct for ANY grid",
        cases=_chain_cases, configs=(_fixed(2, 64), _fixed(3, 32), _fixed(1, 128)),
        max_launches=1, max_bytes=lambda n: 12 * n,
        points={"correct (public)": 3, "correct (hidden)": 3, "grid independent of n": 2, "traffic budget": 1,
                "compiles for sm_90": 1}, **_chain),
    Exercise(
        name="block_sums", lesson="03", title="Sum each block's 64 elements through shared memory",
        pattern="fused", kind="kernel", entry="block_sums",
        signature=f"@cuda.jit\ndef block_sums(x, out):  # out[b] = sum of x[b*{SUM_BLOCK} : (b+1)*{SUM_BLOCK}]",
        make_inputs=_sum_inputs, reference=_sum_reference, output_specs=_sum_outputs, argument_order=("x", "out"),
        cases=(Case(64, 31), Case(130, 32), Case(7, 33), Case(200, 41, hidden=True)),
        configs=(lambda n: (max(1, math.ceil(n / SUM_BLOCK)), SUM_BLOCK),),
        max_launches=1, race_seeds=(1, 2, 3, 4, 5, 6),
        points={"correct (public)": 3, "correct (hidden)": 2, "no race under perturbed schedules": 3,
                "compiles for sm_90": 1}, rtol=1e-4, atol=1e-4),
]}


def get_exercise(name: str) -> Exercise:
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"unknown exercise {name!r}; exercises: {', '.join(EXERCISES)}") from None
