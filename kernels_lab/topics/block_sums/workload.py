"""Lesson 03's warm-up: sum each block's 64 elements through shared memory.

    out[b] = x[64 b] + x[64 b + 1] + ... + x[64 b + 63]      (missing elements count as 0)

One block of 64 threads per output: each thread loads one element into a shared tile, and a
tree of halving steps adds the tile up, with a barrier after every step (without it a thread
reads a partial sum its neighbour has not written yet: the race the grader hunts for).
Through memory: x read once, one float per block written.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...arrays import device_vector
from ...core import (Axis, Case, Exercise, HardInput, KernelLaunch, Plan, Size, Tolerance, Variant, Workload,
                    kernel_name, register)
from ...runtime import cuda

TILE = 64
F32 = 4


def _blocks(n: int) -> int:
    return max(1, -(-n // TILE))


# -- the specification -------------------------------------------------------------------------

def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    padded = np.zeros(_blocks(x.size) * TILE)
    padded[:x.size] = x
    return {"out": padded.reshape(-1, TILE).sum(axis=1)}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # all positive-leaning and different: a sum that skips or repeats an element shows
    return {"x": rng.uniform(-1.0, 3.0, size.n).astype(np.float32)}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((_blocks(size.n),), np.float32)}


# -- the kernel: a shared tile and a barrier after every halving step ---------------------------

@cuda.jit
def block_sums_kernel(x, out):
    tile = cuda.shared.array(TILE, dtype=np.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    tile[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    step = TILE // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()  # the next step reads what this one wrote
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]


def plan(size: Size) -> Plan:
    g = _blocks(size.n)
    return Plan((KernelLaunch(kernel_name(block_sums_kernel), g, TILE, bytes_read=F32 * size.n,
                              bytes_written=F32 * g, read_bytes_in_flight=F32),))


def bind(inputs, outputs, stream=0):
    x = device_vector("x", inputs["x"], np.float32)
    out = device_vector("out", outputs["out"], np.float32, n=_blocks(x.size))
    configured = block_sums_kernel[_blocks(x.size), TILE, stream]
    return lambda: configured(x, out)


WORKLOAD = register(Workload(
    name="block_sums",
    about=f"out[b] = sum of x[{TILE} b : {TILE} (b + 1)]: a shared tile and a barrier per step",
    axes=(Axis("n", sim=3 * TILE + 5, gpu=1 << 26, sim_sweep=(7, 3 * TILE + 5), about="vector length"),),
    make_inputs=make_inputs, reference=reference, output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=1e-4),
    hard_inputs=(HardInput(f"a length that is not a multiple of {TILE}: the last block sums a partial tile",
                           sizes=lambda s: s.n % TILE != 0),),
))
WORKLOAD.add(Variant("fused", "fused", f"1 kernel, one {TILE}-thread block per sum, a shared-memory tree",
                     plan, bind))

WORKLOAD.add_exercise(Exercise(
    name="block_sums", workload="block_sums", variant="fused", lesson="03",
    title=f"Sum each block's {TILE} elements through shared memory", kind="kernel", entry="block_sums",
    signature=f"@cuda.jit\ndef block_sums(x, out):  # out[b] = sum of x[b*{TILE} : (b+1)*{TILE}]",
    cases=(Case(WORKLOAD.size(64), 31), Case(WORKLOAD.size(130), 32), Case(WORKLOAD.size(7), 33),
           Case(WORKLOAD.size(200), 41, hidden=True)),
    configs=(lambda s: (_blocks(s.n), TILE),), race_seeds=(1, 2, 3, 4, 5, 6),
    points={"correct (public)": 3, "correct (hidden)": 2, "no race under perturbed schedules": 3,
            "compiles for the course's GPUs": 1}))
