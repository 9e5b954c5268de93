"""Lesson: one elementwise chain, three ways to run it.

The chain, on float32 vectors x and b of length n and a float32 scalar alpha:

    h   = x + b             stage 1: bias add
    g   = gelu(h)           stage 2: GELU (tanh approximation)
    out = alpha * g         stage 3: scale

Every stage does a few flops per element, so the chain is limited by memory traffic:
what matters is how many bytes cross the DRAM bus, and how many launches it takes.

    variant       launches  bytes per element          what stays on chip
    unfused       3         (8+4) + (4+4) + (4+4) = 28  nothing: h and g go through DRAM
    fused_naive   1         8 + 4 = 12                  h, g in registers; 4-byte accesses
    fused         1         8 + 4 = 12                  h, g in registers; 16-byte accesses
    persistent    1         8 + 4 = 12                  as fused, grid sized to the machine

So fusion should make the chain 28/12 = 2.33x faster once it is bandwidth-bound.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_vector, same_length
from ...backend import BACKEND
from ...core import (Axis, Case, Exercise, HardInput, KernelLaunch, Plan, Size, SpeedSpec, Tolerance, Variant,
                    Workload, fixed, grid_for, kernel_name, register)
from ...intrinsics import load4, store4
from ...runtime import cuda

BLOCK = 256
F32 = 4  # bytes per float32
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_GELU_CUBIC = np.float32(0.044715)
_ONE = np.float32(1.0)
_MINUS_TWO = np.float32(-2.0)


# -- the specification: float64 NumPy, the meaning of every kernel below ---------------

def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    h = inputs["x"].astype(np.float64) + inputs["b"].astype(np.float64)
    u = math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)
    g = 0.5 * h * (1.0 + np.tanh(u))
    return {"out": float(inputs["alpha"]) * g}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # Different distributions for x and b (asymmetric): swapping them would show.
    n = size.n
    return {"x": rng.standard_normal(n, dtype=np.float32) * np.float32(2.0),
            "b": rng.uniform(-1.0, 0.5, n).astype(np.float32),
            "alpha": np.float32(rng.uniform(0.5, 1.5))}


def symmetric_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # x == b: a kernel that reads one where it should read the other still passes
    inputs = make_inputs(size, rng)
    inputs["b"] = inputs["x"].copy()
    return inputs


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((size.n,), np.float32)}


# -- the three stages as device functions (float32 throughout) --------------------------

@cuda.jit(device=True, inline=True)
def bias_add(x, b, alpha):
    return x + b


@cuda.jit(device=True, inline=True)
def gelu(h, unused, alpha):
    # 0.5 h (1 + tanh(u)) == h * sigmoid(2u): one exp instead of a tanh.
    u = _SQRT_2_OVER_PI * (h + _GELU_CUBIC * h * h * h)
    return h / (_ONE + math.exp(_MINUS_TWO * u))


@cuda.jit(device=True, inline=True)
def scale(g, unused, alpha):
    return alpha * g


@cuda.jit(device=True, inline=True)
def chain(x, b, alpha):
    return scale(gelu(bias_add(x, b, alpha), b, alpha), b, alpha)


# -- v1: the fused kernel you write first: one thread, one element ----------------------
# On chip: h and g in registers. Through memory: x, b read once, out written once.
# Each thread keeps only 2 x 4 bytes in flight, too few to cover DRAM latency.

@cuda.jit(fastmath=True)
def fused_naive_kernel(x, b, alpha, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = chain(x[i], b[i], alpha)


# -- the access pattern the other kernels share: 16-byte loads and stores ----------------
# A thread handles one vector of 4 floats (one load4 per input, one store4), so each
# thread has 4x the bytes in flight of v1. The last n % 4 elements go one by one.

def vector_map(op, arity: int, grid_stride: bool):
    """A kernel out[i] = op(a[i], b[i], alpha) over 16-byte vectors.

    arity 1 never touches b (pass any float32 array); it is a compile-time branch.
    grid_stride=False: one vector per thread, the grid covers the data.
    grid_stride=True:  any grid; each thread strides by the grid size (persistent).
    """

    @cuda.jit(device=True, inline=True)
    def vector_step(a, b, alpha, out, v):
        a0, a1, a2, a3 = load4(a, v)
        if arity == 2:
            b0, b1, b2, b3 = load4(b, v)
        else:
            b0 = b1 = b2 = b3 = a0
        store4(out, v, op(a0, b0, alpha), op(a1, b1, alpha), op(a2, b2, alpha), op(a3, b3, alpha))

    def kernel(a, b, alpha, out):
        n = out.size
        nvec = n >> 2  # a shift, not a signed 64-bit division
        t = cuda.grid(1)
        if grid_stride:
            stride = cuda.gridsize(1)
            v = t
            while v < nvec:  # a while loop: no trip-count division per thread
                vector_step(a, b, alpha, out, v)
                v += stride
            first, step = 4 * nvec + t, stride  # tail: the first threads take one each
        else:
            if t < nvec:
                vector_step(a, b, alpha, out, t)
            first, step = (4 * nvec if t == nvec else n), 1  # tail: one thread takes all
        i = first
        while i < n:
            ai = a[i]
            out[i] = op(ai, b[i] if arity == 2 else ai, alpha)
            i += step

    kernel.__name__ = kernel.__qualname__ = f"{kernel_name(op)}_{'gridstride' if grid_stride else 'vec4'}"
    kernel = cuda.jit(fastmath=True)(kernel)
    return kernel


# -- unfused: one kernel per stage ------------------------------------------------------
# On chip: nothing survives a kernel. Through memory: h and g are written, then read back.
add_kernel = vector_map(bias_add, 2, grid_stride=False)
gelu_kernel = vector_map(gelu, 1, grid_stride=False)
scale_kernel = vector_map(scale, 1, grid_stride=False)

# -- v2: fused, 16-byte accesses ----------------------------------------------------------
# On chip: h and g in registers. Through memory: x, b once, out once, in 16-byte pieces.
fused_kernel = vector_map(chain, 2, grid_stride=False)

# -- v3: persistent, grid sized to the machine, looping grid-stride ----------------------
# On chip: as v2. The grid is (resident blocks per SM) x SMs whatever n is: no tail wave,
# block start-up paid once per resident block instead of once per 1024 elements.
persistent_kernel = vector_map(chain, 2, grid_stride=True)


# -- host side: argument checks, plans and launchers --------------------------------------

def _vector_grid(n: int) -> int:
    return max(1, -(-(-(-n // 4)) // BLOCK))  # ceil(ceil(n / 4) / BLOCK)


def _scalar_grid(n: int) -> int:
    return max(1, -(-n // BLOCK))


def _persistent_blocks() -> int:
    from numba import types
    arr = types.Array(types.float32, 1, "C")
    return BACKEND.persistent_grid(persistent_kernel, (arr, arr, types.float32, arr), BLOCK)


def _check(x, b, alpha, out) -> tuple[int, np.float32]:
    for name, a in (("x", x), ("b", b), ("out", out)):
        device_vector(name, a, np.float32)
    n = same_length(x=x, b=b, out=out)
    try:
        alpha32 = np.float32(alpha)
    except (TypeError, ValueError):
        raise ArgumentError(f"alpha: expected a real scalar, got {type(alpha).__name__}") from None
    if np.ndim(alpha) != 0 or not np.isfinite(alpha32):
        raise ArgumentError(f"alpha: expected a finite scalar, got {alpha!r}")
    return n, alpha32


def _stage(name: str, n: int, grid: int, arrays_read: int, load_bytes: int = 4 * F32) -> KernelLaunch:
    # each thread issues one load of `load_bytes` per input array before it computes
    return KernelLaunch(name, grid, BLOCK, bytes_read=arrays_read * F32 * n, bytes_written=F32 * n,
                        read_bytes_in_flight=arrays_read * load_bytes)


def plan_unfused(size: Size) -> Plan:
    n = size.n
    g = _vector_grid(n)
    return Plan((_stage(kernel_name(add_kernel), n, g, 2), _stage(kernel_name(gelu_kernel), n, g, 1),
                 _stage(kernel_name(scale_kernel), n, g, 1)))


def plan_fused_naive(size: Size) -> Plan:
    return Plan((_stage(kernel_name(fused_naive_kernel), size.n, _scalar_grid(size.n), 2, load_bytes=F32),))


def plan_fused(size: Size) -> Plan:
    return Plan((_stage(kernel_name(fused_kernel), size.n, _vector_grid(size.n), 2),))


def plan_persistent(size: Size) -> Plan:
    return Plan((_stage(kernel_name(persistent_kernel), size.n, _persistent_blocks(), 2),))


def bind_unfused(inputs, outputs, stream=0):
    x, b, alpha, out = inputs["x"], inputs["b"], inputs["alpha"], outputs["out"]
    n, alpha = _check(x, b, alpha, out)
    if n == 0:
        return lambda: None
    h = cuda.device_array(n, np.float32, stream=stream)  # the intermediates: in DRAM
    g = cuda.device_array(n, np.float32, stream=stream)
    grid = _vector_grid(n)

    def launch():
        add_kernel[grid, BLOCK, stream](x, b, alpha, h)
        gelu_kernel[grid, BLOCK, stream](h, h, alpha, g)
        scale_kernel[grid, BLOCK, stream](g, g, alpha, out)
    return launch


def _bind_single(kernel, grid_of):
    def bind(inputs, outputs, stream=0):
        x, b, alpha, out = inputs["x"], inputs["b"], inputs["alpha"], outputs["out"]
        n, alpha = _check(x, b, alpha, out)
        if n == 0:
            return lambda: None
        configured = kernel[grid_of(n), BLOCK, stream]
        return lambda: configured(x, b, alpha, out)
    return bind


# sizes swept on a GPU: launch-bound 4K elements up to 2^27 (a GiB of traffic, bandwidth-bound)
GPU_SWEEP = tuple(1 << k for k in range(12, 28, 2)) + (1 << 27,)

WORKLOAD = register(Workload(
    name="elementwise",
    about="out = alpha * gelu(x + b) on float32 vectors: bias add -> GELU -> scale",
    axes=(Axis("n", sim=3 * BLOCK + 5, gpu=1 << 28, sweep=GPU_SWEEP, sim_sweep=(1, 257, 3 * BLOCK + 5),
               about="vector length"),),
    make_inputs=make_inputs,
    reference=reference,
    output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=1e-5),
    symmetric_inputs=symmetric_inputs,
    hard_inputs=(HardInput(f"a length that is a multiple of neither the block ({BLOCK}) nor 4: the last block's "
                           f"tail, and the 16-byte path's last partial vector",
                           sizes=lambda s: s.n % BLOCK != 0 and s.n % 4 != 0),),
))
WORKLOAD.add(Variant("unfused", "unfused", "3 kernels; h and g written to DRAM and read back",
                     plan_unfused, bind_unfused))
WORKLOAD.add(Variant("fused_naive", "fused", "1 kernel, 1 element per thread, 4-byte accesses",
                     plan_fused_naive, _bind_single(fused_naive_kernel, _scalar_grid)))
WORKLOAD.add(Variant("fused", "fused", "1 kernel, 4 elements per thread, 16-byte accesses",
                     plan_fused, _bind_single(fused_kernel, _vector_grid)))
WORKLOAD.add(Variant("persistent", "persistent", "1 kernel, grid = resident blocks x SMs, grid-stride loop",
                     plan_persistent, _bind_single(persistent_kernel, lambda n: _persistent_blocks())))


# -- exercises: what a student writes for this chain (lessons 01, 02, 03) --------------------

def _cases() -> tuple[Case, ...]:
    s = WORKLOAD.size
    return (Case(s(1), 11), Case(s(255), 12), Case(s(257), 13), Case(s(1031), 14),
            Case(s(613), 21, hidden=True), Case(s(2 * 256 + 3), 22, hidden=True), Case(s(97), 23, hidden=True, probe=True))


CHAIN_POINTS = {"correct (public)": 3, "correct (hidden)": 3, "launch budget": 1, "traffic budget": 1,
                "compiles for the course's GPUs": 1, "speed": 1}
WORKLOAD.add_exercise(Exercise(
    name="fuse_chain", workload="elementwise", variant="fused_naive", lesson="01",
    title="Fuse bias add -> GELU -> scale into one kernel", kind="kernel", entry="fused_chain",
    signature="@cuda.jit\ndef fused_chain(x, b, alpha, out):  # out[i] = alpha * gelu(x[i] + b[i])",
    cases=_cases(), configs=(grid_for(256), grid_for(128), grid_for(32)), points=CHAIN_POINTS,
    # against the lesson's own answer: one thread per element (16-byte accesses come out faster)
    speed=SpeedSpec(WORKLOAD.size(1 << 24), "kernels_lab.topics.elementwise.workload:fused_naive_kernel", grid_for(256),
                    reps=80)))
WORKLOAD.add_exercise(Exercise(
    name="two_launches", workload="elementwise", variant="unfused", lesson="02",
    title="Launch the chain as two kernels: (bias add + GELU), then scale", kind="host", entry="run_two",
    signature="def run_two(x, b, alpha, out):  # two launches; one intermediate array",
    cases=_cases(), max_launches=2, max_bytes=lambda s: 20 * s.n,
    budget_note="two kernels instead of the unfused variant's three: (x, b -> g) is 12 B per element, "
                "(g -> out) 8 B: 20 B per element",
    points={"correct (public)": 3, "correct (hidden)": 3, "launches as asked": 2,
            "one intermediate in global memory": 1, "traffic budget": 1}))
WORKLOAD.add_exercise(Exercise(
    name="persistent_chain", workload="elementwise", variant="persistent", lesson="03",
    title="Write the fused chain as a grid-stride (persistent) kernel", kind="kernel", entry="persistent_chain",
    signature="@cuda.jit\ndef persistent_chain(x, b, alpha, out):  # correct for ANY grid",
    cases=_cases(), configs=(fixed(2, 64), fixed(3, 32), fixed(1, 128)),
    points={"correct (public)": 3, "correct (hidden)": 3, "grid independent of n": 2, "traffic budget": 1,
            "compiles for the course's GPUs": 1}))
