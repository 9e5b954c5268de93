"""Lesson 04: softmax over the rows of a matrix, five ways.

    out[r, c] = exp(x[r, c] - m_r) / sum_j exp(x[r, j] - m_r),    m_r = max_j x[r, j]

Subtracting the row max changes nothing mathematically and everything numerically: float32
overflows at exp(88.7), so a row around 100 gives inf / inf = NaN without it, while
exp(x - m_r) <= 1 never overflows. A row needs three steps in order: its max, the sum of the
exps, then every element scaled. The variants differ in where the row is between the steps:

    variant       launches  bytes per element   where the row is between the steps
    unfused       3         4 | 4+4 | 4+4 = 20  DRAM: a max kernel; an exp-and-sum kernel writes
                                                e = exp(x - m); a normalize kernel reads e back
    fused_shared  1         4 + 4 = 8           shared memory: a block of 64 threads per row,
                                                4-byte accesses (the exercise's answer; cols <= 4096)
    fused         1         4 + 4 = 8           registers: each thread holds its slice of the row,
                                                16-byte accesses; a row per warp up to 1024 columns,
                                                a row per block up to 32768
    online        1         4 + 4 + 4 = 12      nowhere: one pass computes max and sum together
                                                (the online rule in reduce.py); a second pass
                                                re-reads x (from L2 when it is still there) and writes
    persistent    1         4 + 4 = 8           as fused, on a grid sized to the machine that strides
                                                over the rows

(plus a few bytes per row: the unfused kernels' row max and sum, read by every thread.)
A row that does not fit in registers cannot be fused this way: `fused` refuses it and names
`online`, which holds nothing but pays one more read of x. A sixth variant, `split`
(softmax_split.py), holds a long row in several blocks that exchange their (max, sum) through
global memory: 8 bytes per element again, at any width up to 32 x 32768.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND
from ...core import (Axis, Case, Exercise, HardInput, KernelLaunch, Plan, Size, SpeedSpec, Tolerance, Variant,
                    Workload, kernel_name, register)
from ...intrinsics import load4, store4
from ...reduce import LOWEST, block_max, block_md, block_sum, md_combine, warp_max, warp_sum
from ...rows import access_tag, pow2_at_least, row_jit
from ...runtime import cuda

F32 = 4                 # bytes per float32
CHUNK = 4               # floats per chunk: one 16-byte access, or 4 strided scalar ones
WARP = 32
MAX_THREADS = 1024      # per block
MAX_CHUNKS = 8          # chunks one thread of `fused` holds: 32 floats, 32 registers
FUSED_MAX_COLS = MAX_THREADS * MAX_CHUNKS * CHUNK  # 32768: the widest row `fused` keeps on chip
STREAM_CHUNKS = 4       # chunks a streaming pass loads before it uses any: 64 bytes in flight
WARP_ROWS = BACKEND.size(gpu=4, simulator=2)  # rows per block when `fused` takes a row per warp (fewer on the
                                       # simulator, whose barriers cost per thread of the block)
SHARED_COLS = 4096      # fused_shared's row buffer (16 KiB of shared memory)
SHARED_BLOCK = 64       # fused_shared's threads per row, and the exercise's first launch configuration
_ONE, _ZERO = np.float32(1), np.float32(0)


# -- the specification: float64 NumPy, the meaning of every kernel below ---------------

def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # Every row its own centre and spread (a kernel that mixes rows up shows). Row 0 sits near +100 and
    # row 1 near -120 (at every size with 2 rows: HARD_INPUTS), then every third row, alternately, with a
    # spread small enough that exp(x) overflows float32 (past 88.7) or underflows it (below -104) at EVERY
    # element of the row: without the max subtracted, or with a max started at 0, not -inf, the row is NaN.
    rows, cols = size.rows, size.cols
    centre = rng.uniform(-5.0, 5.0, (rows, 1))
    big = (np.arange(rows) < 2) | (np.arange(rows) % 3 == 0)
    centre[big, 0] = np.where(np.arange(big.sum()) % 2 == 0, 100.0, -120.0) + rng.uniform(-4, 4, big.sum())
    spread = rng.uniform(0.5, 3.0, (rows, 1)).astype(np.float32)
    spread[big] = np.minimum(spread[big], 1)  # 6 sigma from the centre stays past the overflow or underflow
    x = rng.standard_normal((rows, cols), dtype=np.float32)  # float32 throughout: GPU sizes are GiBs
    x *= spread
    x += centre.astype(np.float32)
    return {"x": x}


HARD_INPUTS = (
    HardInput("row 0 near +100 and row 1 near -120: exp without the row max subtracted overflows on the first, "
              "and a max that starts at 0 instead of -inf underflows on the second (every element)",
              sizes=lambda s: s.rows >= 2,
              present=lambda s, inputs: inputs["x"][0].min() > 88.8 and inputs["x"][1].max() < -104),
    HardInput("a width that is a multiple of neither 32 nor 4: each row's tail past the last full warp and "
              "the last 16-byte chunk", sizes=lambda s: s.cols % 32 != 0 and s.cols % 4 != 0),
)


def symmetric_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # every row the same: a kernel that reads or writes the wrong row still passes. The row is the -120 one
    # (HARD_INPUTS), which both known numeric bugs fail: a probe easier than its twin would blame them on symmetry
    row = make_inputs(size.replace(rows=2), rng)["x"][1:]
    return {"x": np.repeat(row, size.rows, axis=0)}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((size.rows, size.cols), np.float32)}


# -- how a thread walks its row -----------------------------------------------------------
# The kernels below see x and out flattened: row r starts at element r * cols. A thread takes
# its row in chunks of 4 floats, T threads side by side (coalesced). When cols % 4 == 0 every row
# starts 16-byte aligned and chunk k of thread `lane` is ONE 16-byte access, the vector
# lane + k T; otherwise it is 4 scalar accesses, elements lane + T (4k + j), j = 0..3.
# A chunk past the end of the row loads as LOWEST (exp(LOWEST - m) = 0) and is not stored.

@functools.lru_cache(maxsize=None)
def row_access(threads: int, vector: bool, fill: float = LOWEST):
    """(has, load, store) device functions for rows walked by `threads` threads; a chunk past the
    end of the row loads as `fill` (LOWEST for a max; 0 for a sum, as layernorm's kernels use)."""
    T, F = threads, np.float32(fill)

    @cuda.jit(device=True, inline=True)
    def has(lane, k, cols):
        if vector:
            return lane + k * T < (cols >> 2)
        return lane + CHUNK * k * T < cols

    @cuda.jit(device=True, inline=True)
    def load(x, start, cols, lane, k):
        if vector:
            v = lane + k * T
            if v < (cols >> 2):
                return load4(x, (start >> 2) + v)
            return F, F, F, F
        i = lane + CHUNK * k * T
        return (x[start + i] if i < cols else F, x[start + i + T] if i + T < cols else F,
                x[start + i + 2 * T] if i + 2 * T < cols else F,
                x[start + i + 3 * T] if i + 3 * T < cols else F)

    @cuda.jit(device=True, inline=True)
    def store(out, start, cols, lane, k, a0, a1, a2, a3):
        if vector:
            v = lane + k * T
            if v < (cols >> 2):
                store4(out, (start >> 2) + v, a0, a1, a2, a3)
        else:
            i = lane + CHUNK * k * T
            if i < cols:
                out[start + i] = a0
            if i + T < cols:
                out[start + i + T] = a1
            if i + 2 * T < cols:
                out[start + i + 2 * T] = a2
            if i + 3 * T < cols:
                out[start + i + 3 * T] = a3

    return has, load, store


@dataclass(frozen=True)
class RowShape:
    """How one kernel lays threads over rows (compile-time constants of its kernels).

    threads: threads per row (32 = a row per warp, several rows per block; more = a row per block)
    chunks:  4-float chunks per thread: all held at once (fused), or loaded together (streaming)
    block:   threads per block (a multiple of `threads`)
    vector:  16-byte accesses (cols % 4 == 0), else 4-byte ones
    """

    threads: int
    chunks: int
    block: int
    vector: bool

    @property
    def rows_per_block(self) -> int:
        return self.block // self.threads

    def blocks(self, rows: int) -> int:
        return max(1, -(-rows // self.rows_per_block))


def _chunks_per_row(cols: int) -> int:
    return -(-cols // CHUNK)


# -- unfused: one kernel per step, a block per row --------------------------------------------
# On chip: nothing survives a kernel. Through memory: the row max and sum (4 bytes a row, read
# by every thread of the next kernel), and e = exp(x - max), written whole and read back.
# Each thread loads STREAM_CHUNKS chunks before it uses any: 64 bytes in flight.

@functools.lru_cache(maxsize=None)
def unfused_kernels(shape: RowShape):
    has, load, store = row_access(shape.threads, shape.vector)
    T, U, held = shape.threads, shape.chunks, CHUNK * shape.chunks  # plain ints: compile-time constants
    tag = f"{T}x{U}_{access_tag(shape.vector)}"

    @row_jit(f"softmax_row_max_{tag}", T)
    def row_max(x, rmax, cols):
        scratch = cuda.shared.array(T, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        start = row * cols
        m = LOWEST
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                a0, a1, a2, a3 = load(x, start, cols, lane, k + u)
                m = max(m, max(max(a0, a1), max(a2, a3)))
            k += U
        m = block_max(m, scratch)
        if lane == 0:
            rmax[row] = m

    @row_jit(f"softmax_exp_sum_{tag}", T)
    def exp_sum(x, rmax, e, rsum, cols):
        scratch = cuda.shared.array(T, np.float32)
        vals = cuda.local.array(held, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        start = row * cols
        m = rmax[row]
        s = _ZERO
        k = 0
        while has(lane, k, cols):
            for u in range(U):  # every load before any store: a store to e might alias x
                vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = load(x, start, cols, lane, k + u)
            for j in range(held):
                vals[j] = math.exp(vals[j] - m)
                s += vals[j]
            for u in range(U):
                store(e, start, cols, lane, k + u, vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3])
            k += U
        s = block_sum(s, scratch)
        if lane == 0:
            rsum[row] = s

    @row_jit(f"softmax_normalize_{tag}", T)
    def normalize(e, rsum, out, cols):
        vals = cuda.local.array(held, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        start = row * cols
        inv = _ONE / rsum[row]
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = load(e, start, cols, lane, k + u)
            for u in range(U):
                store(out, start, cols, lane, k + u, vals[4 * u] * inv, vals[4 * u + 1] * inv,
                      vals[4 * u + 2] * inv, vals[4 * u + 3] * inv)
            k += U

    return row_max, exp_sum, normalize


# -- fused_shared: the exercise's answer --------------------------------------------------------
# On chip: the row, staged in shared memory on its way in (each thread re-reads only the
# elements it staged, so no barrier is needed there). Through memory: x once, out once, 4 bytes
# at a time. Any block size (a power of two); cols <= SHARED_COLS.

@cuda.jit(fastmath=True)
def softmax_shared_kernel(x, out):
    row_sh = cuda.shared.array(SHARED_COLS, np.float32)
    smax = cuda.shared.array(MAX_THREADS, np.float32)
    ssum = cuda.shared.array(MAX_THREADS, np.float32)
    row, t, step = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
    cols = x.shape[1]
    m = LOWEST
    for j in range(t, cols, step):
        v = x[row, j]
        row_sh[j] = v
        m = max(m, v)
    m = block_max(m, smax)
    s = _ZERO
    for j in range(t, cols, step):
        e = math.exp(row_sh[j] - m)
        row_sh[j] = e
        s += e
    inv = _ONE / block_sum(s, ssum)
    for j in range(t, cols, step):
        out[row, j] = row_sh[j] * inv


# -- fused: the row in registers ---------------------------------------------------------------
# On chip: each thread's 4 * chunks floats of the row, in a local array of compile-time size
# indexed only by unrolled loops (so the compiler keeps it in registers), from the load to the
# store; max and sum are warp shuffles (a row per warp) or a block reduction (a row per block).
# Through memory: x once, out once, in 16-byte pieces where the rows are aligned.
# The loop over rows strides by the grid: launched with a block per row group it runs once;
# `persistent` launches the same kernel on a grid sized to the machine.

@functools.lru_cache(maxsize=None)
def fused_kernel(shape: RowShape):
    _has, load, store = row_access(shape.threads, shape.vector)
    T, C, block = shape.threads, shape.chunks, shape.block  # plain ints: compile-time constants
    held, per_warp, rows_per_block = CHUNK * C, T == WARP, shape.rows_per_block

    @row_jit(f"softmax_fused_{'warp' if per_warp else 'block'}{T}x{C}_b{block}_{access_tag(shape.vector)}", block)
    def fused(x, out, rows, cols):
        vals = cuda.local.array(held, np.float32)
        smax = cuda.shared.array(block, np.float32)  # two scratch arrays: the sum's writes
        ssum = cuda.shared.array(block, np.float32)  # cannot race the max's readers
        lane = cuda.threadIdx.x & (T - 1)
        first = cuda.blockIdx.x * rows_per_block
        while first < rows:  # uniform across the block: every thread reaches every barrier
            row = first + cuda.threadIdx.x // T
            n = cols if row < rows else 0  # a warp past the last row loads and stores nothing
            start = row * cols
            m = LOWEST
            for k in range(C):  # all loads first, each independent: 16 C bytes in flight
                a0, a1, a2, a3 = load(x, start, n, lane, k)
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
                m = max(m, max(max(a0, a1), max(a2, a3)))
            m = warp_max(m) if per_warp else block_max(m, smax)
            s = _ZERO
            for j in range(held):
                vals[j] = math.exp(vals[j] - m)
                s += vals[j]
            inv = _ONE / (warp_sum(s) if per_warp else block_sum(s, ssum))
            for k in range(C):
                store(out, start, n, lane, k, vals[4 * k] * inv, vals[4 * k + 1] * inv, vals[4 * k + 2] * inv,
                      vals[4 * k + 3] * inv)
            first += cuda.gridDim.x * rows_per_block

    return fused


# -- online: max and sum in one pass, then a normalizing pass -----------------------------------
# On chip: nothing but each thread's running (max, sum of exp(x - max)): every group of
# STREAM_CHUNKS chunks is a partial, folded in with the online rule, and the threads' partials
# are combined with the same rule. Through memory: x twice (the second read finds the row in
# L2 when enough of it is still there), out once. Any width.

@functools.lru_cache(maxsize=None)
def online_kernel(shape: RowShape):
    has, load, store = row_access(shape.threads, shape.vector)
    T, U, held = shape.threads, shape.chunks, CHUNK * shape.chunks  # plain ints: compile-time constants

    @row_jit(f"softmax_online_{T}x{U}_{access_tag(shape.vector)}", T)
    def online(x, out, cols):
        sm = cuda.shared.array(T, np.float32)
        sd = cuda.shared.array(T, np.float32)
        vals = cuda.local.array(held, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        start = row * cols
        m, d = LOWEST, _ZERO
        k = 0
        while has(lane, k, cols):
            cm = LOWEST
            for u in range(U):
                a0, a1, a2, a3 = load(x, start, cols, lane, k + u)
                vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = a0, a1, a2, a3
                cm = max(cm, max(max(a0, a1), max(a2, a3)))
            cd = _ZERO
            for j in range(held):
                cd += math.exp(vals[j] - cm)
            m, d = md_combine(m, d, cm, cd)
            k += U
        m, d = block_md(m, d, sm, sd)
        inv = _ONE / d
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = load(x, start, cols, lane, k + u)
            for u in range(U):
                store(out, start, cols, lane, k + u, math.exp(vals[4 * u] - m) * inv,
                      math.exp(vals[4 * u + 1] - m) * inv, math.exp(vals[4 * u + 2] - m) * inv,
                      math.exp(vals[4 * u + 3] - m) * inv)
            k += U

    return online


# -- shapes: which threads take which row, by width ------------------------------------------

def fused_shape(cols: int, threads: int | None = None, block: int | None = None) -> RowShape | None:
    """The row-in-registers layout for rows of `cols` floats (None: the row does not fit).

    Default: a row per warp (WARP_ROWS a block) while 8 chunks a lane cover it (cols <= 1024),
    else a block per row with 4 chunks a thread (8 beyond 16384 columns). threads/block pick
    another layout (the benchmark compares them); chunks then follow from the width.
    """
    units = _chunks_per_row(cols)
    if threads is None:
        if units <= WARP * MAX_CHUNKS:
            threads = WARP
        else:
            threads = min(MAX_THREADS, max(2 * WARP, pow2_at_least(-(-units // (MAX_CHUNKS // 2)))))
    chunks = pow2_at_least(-(-units // threads))
    if chunks > MAX_CHUNKS or threads > MAX_THREADS:
        return None
    block = block or (WARP_ROWS * WARP if threads == WARP else threads)
    return RowShape(threads, chunks, block, cols % CHUNK == 0)


def stream_shape(cols: int, threads: int | None = None, chunks: int = STREAM_CHUNKS) -> RowShape:
    """A block per row for the streaming kernels (unfused, online): by default enough threads
    that each loads its `chunks` chunks about once (32 to 1024; wider rows loop)."""
    threads = threads or min(MAX_THREADS, max(WARP, pow2_at_least(-(-_chunks_per_row(cols) // chunks))))
    return RowShape(threads, chunks, threads, cols % CHUNK == 0)


def fused_refusal(cols: int) -> str | None:
    """None when `fused` holds a row of `cols` floats in registers; else why not, and what to use."""
    if fused_shape(cols) is None:
        return (f"a row of {cols} floats does not fit in registers (fused holds at most {FUSED_MAX_COLS}: "
                f"{MAX_THREADS} threads x {MAX_CHUNKS * CHUNK} floats); use the `online` variant, which streams "
                f"the row twice")
    return None


def shared_refusal(cols: int) -> str | None:
    if cols > SHARED_COLS:
        return (f"fused_shared stages a row of at most {SHARED_COLS} floats in shared memory, not {cols}; "
                f"use `fused` (registers, up to {FUSED_MAX_COLS}) or `online` (any width)")
    return None


# -- host side: argument checks, plans and launchers --------------------------------------------

def _check(inputs, outputs, vectors: bool | None = None) -> tuple[Any, Any, int, int]:
    """The 2-D x and out, checked; and their shape. vectors: the kernel makes 16-byte accesses (by
    default: when cols % 4 == 0), so both must start on a 16-byte boundary."""
    x = device_array("x", inputs["x"], np.float32, (None, None))
    rows, cols = x.shape
    out = device_array("out", outputs["out"], np.float32, (rows, cols))
    if cols % CHUNK == 0 if vectors is None else vectors:
        require_aligned(x=x, out=out)
    return x, out, rows, cols


def require_aligned(**arrays) -> None:
    """Each device array starts on a 16-byte boundary (what 16-byte accesses need), or an error naming it."""
    for name, a in arrays.items():
        if BACKEND.address(a) % 16:
            raise ArgumentError(f"{name}: its device address is not 16-byte aligned (a view that starts "
                                f"inside a row?); the 16-byte accesses need a fresh array or a copy")


def _flat(a, rows: int, cols: int):
    return a.reshape(rows * cols)  # a view: the kernels index rows by hand


def persistent_blocks(shape: RowShape, rows: int) -> int:
    """Resident blocks x SMs for the fused kernel (no more than there are row groups)."""
    from numba import types
    arr = types.Array(types.float32, 1, "C")
    return min(BACKEND.persistent_grid(fused_kernel(shape), (arr, arr, types.int64, types.int64), shape.block),
               shape.blocks(rows))


def _rows_pass(name: str, rows: int, cols: int, shape: RowShape, reads: int, writes: int, per_row_reads: int = 0,
               per_row_writes: int = 0, grid: int | None = None) -> KernelLaunch:
    """A launch that reads x-sized arrays `reads` times and writes `writes`, plus per-row scalars."""
    return KernelLaunch(name, grid or shape.blocks(rows), shape.block,
                        bytes_read=F32 * (reads * rows * cols + per_row_reads * rows),
                        bytes_written=F32 * (writes * rows * cols + per_row_writes * rows),
                        read_bytes_in_flight=16 * shape.chunks)


def plan_unfused(size: Size) -> Plan:
    r, c = size.rows, size.cols
    shape = stream_shape(c)
    k1, k2, k3 = (kernel_name(k) for k in unfused_kernels(shape))
    return Plan((_rows_pass(k1, r, c, shape, 1, 0, per_row_writes=1),
                 _rows_pass(k2, r, c, shape, 1, 1, per_row_reads=shape.threads, per_row_writes=1),
                 _rows_pass(k3, r, c, shape, 1, 1, per_row_reads=shape.threads)))


def plan_shared(size: Size) -> Plan:
    r, c = size.rows, size.cols
    return Plan((KernelLaunch(kernel_name(softmax_shared_kernel), r, SHARED_BLOCK, F32 * r * c, F32 * r * c,
                              read_bytes_in_flight=F32),))


def _plan_fused(persistent: bool):
    def plan(size: Size) -> Plan:
        shape = fused_shape(size.cols)
        if shape is None:
            raise ValueError(fused_refusal(size.cols))
        grid = persistent_blocks(shape, size.rows) if persistent else None
        return Plan((_rows_pass(kernel_name(fused_kernel(shape)), size.rows, size.cols, shape, 1, 1, grid=grid),))
    return plan


def plan_online(size: Size) -> Plan:
    shape = stream_shape(size.cols)
    return Plan((_rows_pass(kernel_name(online_kernel(shape)), size.rows, size.cols, shape, 2, 1),))


def _no_op() -> None:
    pass


def bind_unfused(inputs, outputs, stream=0):
    x, out, rows, cols = _check(inputs, outputs)
    if x.size == 0:
        return _no_op
    shape = stream_shape(cols)
    row_max, exp_sum, normalize = (k[rows, shape.block, stream] for k in unfused_kernels(shape))
    rmax = cuda.device_array(rows, np.float32, stream=stream)  # the intermediates: in DRAM
    rsum = cuda.device_array(rows, np.float32, stream=stream)
    e = cuda.device_array(rows * cols, np.float32, stream=stream)
    xf, outf = _flat(x, rows, cols), _flat(out, rows, cols)

    def launch():
        row_max(xf, rmax, cols)
        exp_sum(xf, rmax, e, rsum, cols)
        normalize(e, rsum, outf, cols)
    return launch


def bind_shared(inputs, outputs, stream=0):
    x, out, rows, cols = _check(inputs, outputs)
    if (why := shared_refusal(cols)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return _no_op
    configured = softmax_shared_kernel[rows, SHARED_BLOCK, stream]
    return lambda: configured(x, out)


def bind_fused(inputs, outputs, stream=0, *, shape: RowShape | None = None, persistent: bool = False):
    """The fused kernel's launcher. shape: a layout other than the width's default (the benchmark
    compares several); persistent: a grid of resident blocks x SMs instead of one per row group."""
    x, out, rows, cols = _check(inputs, outputs)
    if x.size == 0:
        return _no_op
    shape = shape or fused_shape(cols)
    if shape is None:
        raise ArgumentError(fused_refusal(cols))
    grid = persistent_blocks(shape, rows) if persistent else shape.blocks(rows)
    configured = fused_kernel(shape)[grid, shape.block, stream]
    xf, outf = _flat(x, rows, cols), _flat(out, rows, cols)
    return lambda: configured(xf, outf, rows, cols)


def bind_online(inputs, outputs, stream=0, *, shape: RowShape | None = None):
    x, out, rows, cols = _check(inputs, outputs)
    if x.size == 0:
        return _no_op
    shape = shape or stream_shape(cols)
    configured = online_kernel(shape)[rows, shape.block, stream]
    xf, outf = _flat(x, rows, cols), _flat(out, rows, cols)
    return lambda: configured(xf, outf, cols)


# cols swept on a GPU (`kernels-lab profile softmax --sweep cols`); the benchmark sweeps at fixed bytes
GPU_COLS_SWEEP = tuple(1 << k for k in range(8, 17))

WORKLOAD = register(Workload(
    name="softmax",
    about="out = softmax(x) over each row of a float32 rows x cols matrix (the row max subtracted)",
    # simulator sizes: odd widths, a row per warp (scalar and 16-byte paths); 5 rows = 3 blocks of 2 rows,
    # more than the persistent grid of 2 blocks takes in one pass
    axes=(Axis("rows", sim=5, gpu=16384, sim_sweep=(1,), about="independent rows", unit="rows"),
          Axis("cols", sim=67, gpu=4096, sweep=GPU_COLS_SWEEP, sim_sweep=(3, 260), about="row length")),
    make_inputs=make_inputs,
    reference=reference,
    output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=1e-6),
    symmetric_inputs=symmetric_inputs,
    hard_inputs=HARD_INPUTS,
))
WORKLOAD.add(Variant("unfused", "unfused", "3 kernels, a block per row: row max; e = exp(x - max) and its sum "
                                           "(e to DRAM); e / sum", plan_unfused, bind_unfused))
WORKLOAD.add(Variant("fused_shared", "fused", f"1 kernel, a block of {SHARED_BLOCK} per row, the row in shared "
                                              f"memory, 4-byte accesses (the exercise's answer)",
                     plan_shared, bind_shared, lambda size: shared_refusal(size.cols)))
WORKLOAD.add(Variant("fused", "fused", "1 kernel, the row in registers: a row per warp (<= 1024 columns) or per "
                                       "block, 16-byte accesses when cols % 4 == 0", _plan_fused(False), bind_fused,
                     lambda size: fused_refusal(size.cols)))
WORKLOAD.add(Variant("online", "fused", "1 kernel, a block per row: max and sum in one pass (online rule), "
                                        "then a second read of x to normalize; any width", plan_online, bind_online))
WORKLOAD.add(Variant("persistent", "persistent", "the fused kernel on a grid of resident blocks x SMs, striding "
                                                 "over rows", _plan_fused(True),
                     functools.partial(bind_fused, persistent=True),
                     lambda size: fused_refusal(size.cols)))


# -- the exercise: lesson 04 ----------------------------------------------------------------------

def rows_of(block: int):
    """One block of `block` threads per row."""
    def config(size: Size) -> tuple[int, int]:
        return size.rows, block
    config.__qualname__ = f"rows_of({block})"
    return config


_s = WORKLOAD.size
WORKLOAD.add_exercise(Exercise(
    name="fused_softmax", workload="softmax", variant="fused", lesson="04",
    title="Softmax over rows in one kernel: read each row once, subtract its max", kind="kernel",
    entry="softmax_rows",
    signature=f"@cuda.jit\ndef softmax_rows(x, out):  # x, out: float32 (rows, cols), cols <= {SHARED_COLS}; "
              f"launched with one block per row, blockDim.x = {SHARED_BLOCK} or 32 threads",
    # few rows: on the simulator a barrier of a 64-thread block costs ~10 ms, and the tree has ~15 a row
    cases=(Case(_s(rows=2, cols=67), 41), Case(_s(rows=1, cols=300), 42),
           Case(_s(rows=3, cols=129), 51, hidden=True), Case(_s(rows=1, cols=31), 52, hidden=True),
           Case(_s(rows=2, cols=67), 53, hidden=True, probe=True)),
    configs=(rows_of(SHARED_BLOCK), rows_of(WARP)),
    points={"correct (public)": 3, "correct (hidden)": 3, "launch budget": 1, "traffic budget": 1,
            "compiles for the course's GPUs": 1, "speed": 1},
    speed=SpeedSpec(_s(rows=16384, cols=1024), "kernels_lab.topics.softmax.workload:softmax_shared_kernel",
                    rows_of(SHARED_BLOCK))))

from . import cluster, cross_entropy, split  # noqa: E402,F401  (they register the split and cluster variants)
