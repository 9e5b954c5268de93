"""Layer normalization over the rows of a matrix: the second row reduction, with weights.

    out[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c]
    mean_r = sum_c x[r, c] / cols,   var_r = sum_c (x[r, c] - mean_r)^2 / cols   (biased, as torch)

Like softmax, a row needs its statistics before any element can be written; unlike softmax it
has two (the variance needs the mean first: two dependent reductions), and two weight vectors
shared by every row. The variants differ in where the row and the weights are between the steps:

    variant      launches  bytes per element            where the row is between the steps
    unfused      3         4 | 4 | 4+4+4 +4 = 24        DRAM: a mean kernel, a variance kernel, a normalize
                                                        kernel that reads x, gamma and beta for every row
    fused        1         4 + 4 (+ gamma, beta per     registers: each thread holds its slice of the row;
                           row, from the caches)        one block per row group
    persistent   1         4 + 4 (+ gamma, beta once    as fused, on a grid sized to the machine that strides
                           per warp of the grid)        over the rows: gamma and beta stay in registers across
                                                        rows, as the Persistent RNNs keep their weights

(plus 4 bytes a row per statistic in `unfused`, read by every thread of the next kernel.) The bytes are
the kernels' global accesses; gamma and beta re-read for every row by `unfused` come from the caches,
which is why the DRAM traffic Nsight Compute counts is smaller than the plan there.

The variance is computed from the row held in registers, in a second pass over them (sum of
(x - mean)^2), not as E[x^2] - mean^2, which cancels catastrophically in float32 for a row far from 0.
The rows walked by each thread, 16-byte accesses when cols % 4 == 0, and the layouts (a row per warp
or per block) are softmax's (`row_access`, `RowShape`), with a sum's padding (0) instead of a max's.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND
from ...core import Axis, KernelLaunch, Plan, Size, Tolerance, Variant, Workload, kernel_name, register
from ...reduce import block_sum, warp_sum
from ...runtime import cuda
from ...rows import access_tag, pow2_at_least, row_jit
from ..softmax.workload import CHUNK, WARP, RowShape, require_aligned, row_access, stream_shape

F32 = 4
EPS = 1e-5
MAX_CHUNKS = 4          # chunks a thread holds: 16 floats of x (and, held, 16 of gamma and 16 of beta)
MAX_THREADS = 1024
MAX_COLS = MAX_THREADS * MAX_CHUNKS * CHUNK  # 16384: the widest row the fused kernel keeps on chip
WARP_ROWS = 4           # rows per block when a warp takes a row
_ZERO, _ONE = np.float32(0), np.float32(1)


# -- the specification: float64 NumPy ------------------------------------------------------------

def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    out = (x - mean) / np.sqrt(var + EPS) * inputs["gamma"].astype(np.float64) + inputs["beta"].astype(np.float64)
    return {"out": out}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # every row its own centre (up to +-20: E[x^2] - mean^2 would lose digits there) and spread, so a kernel
    # that mixes rows or statistics up shows; gamma and beta all different, so a wrong column shows
    rows, cols = size.rows, size.cols
    centre = rng.uniform(-20.0, 20.0, (rows, 1)).astype(np.float32)
    spread = rng.uniform(0.5, 4.0, (rows, 1)).astype(np.float32)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    x *= spread
    x += centre
    return {"x": x, "gamma": rng.uniform(0.5, 1.5, cols).astype(np.float32),
            "beta": rng.uniform(-1.0, 1.0, cols).astype(np.float32)}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((size.rows, size.cols), np.float32)}


# -- how many of a chunk's 4 elements lie inside the row ----------------------------------------
# The loads pad with 0: right for a sum, but a padded element would add mean^2 to the sum of squared
# deviations, so the kernels count only the first `count` of a chunk's elements (they lie in order along
# the row). Subtracting (padded count) x mean^2 afterwards instead cancels catastrophically in float32
# when most of a warp is padding (a short row far from 0): seen on the H200 at cols = 3.

@functools.lru_cache(maxsize=None)
def chunk_count(threads: int, vector: bool):
    T = threads

    @cuda.jit(device=True, inline=True)
    def count(lane, k, cols):
        if vector:
            return CHUNK if lane + k * T < (cols >> 2) else 0
        i = lane + CHUNK * k * T
        return (i < cols) + (i + T < cols) + (i + 2 * T < cols) + (i + 3 * T < cols)

    return count


@cuda.jit(device=True, inline=True)
def deviations(a0, a1, a2, a3, m, count):
    """Sum of (a - m)^2 over the first `count` of a chunk's 4 elements."""
    q = (a0 - m) * (a0 - m) if count > 0 else _ZERO
    if count > 1:
        q += (a1 - m) * (a1 - m)
    if count > 2:
        q += (a2 - m) * (a2 - m)
    if count > 3:
        q += (a3 - m) * (a3 - m)
    return q


# -- unfused: a kernel per statistic, then one to normalize; a block per row --------------------

@functools.lru_cache(maxsize=None)
def unfused_kernels(shape: RowShape):
    has, load, store = row_access(shape.threads, shape.vector, 0.0)
    count = chunk_count(shape.threads, shape.vector)
    T, U = shape.threads, shape.chunks
    tag = f"{T}x{U}_{access_tag(shape.vector)}"

    @row_jit(f"layernorm_row_mean_{tag}", T)
    def row_mean(x, rmean, cols):
        scratch = cuda.shared.array(T, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        s = _ZERO
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                a0, a1, a2, a3 = load(x, row * cols, cols, lane, k + u)
                s += (a0 + a1) + (a2 + a3)
            k += U
        s = block_sum(s, scratch)
        if lane == 0:
            rmean[row] = s / np.float32(cols)  # a float32 quotient (int64 would promote to float64)

    @row_jit(f"layernorm_row_rstd_{tag}", T)
    def row_rstd(x, rmean, rrstd, cols, eps):
        scratch = cuda.shared.array(T, np.float32)
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        m = rmean[row]
        q = _ZERO
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                a0, a1, a2, a3 = load(x, row * cols, cols, lane, k + u)
                q += deviations(a0, a1, a2, a3, m, count(lane, k + u, cols))
            k += U
        q = block_sum(q, scratch)
        if lane == 0:
            rrstd[row] = _ONE / math.sqrt(q / np.float32(cols) + eps)

    @row_jit(f"layernorm_normalize_{tag}", T)
    def normalize(x, rmean, rrstd, gamma, beta, out, cols):
        lane, row = cuda.threadIdx.x, cuda.blockIdx.x
        m, r = rmean[row], rrstd[row]
        k = 0
        while has(lane, k, cols):
            for u in range(U):
                a0, a1, a2, a3 = load(x, row * cols, cols, lane, k + u)
                g0, g1, g2, g3 = load(gamma, 0, cols, lane, k + u)
                b0, b1, b2, b3 = load(beta, 0, cols, lane, k + u)
                store(out, row * cols, cols, lane, k + u, (a0 - m) * r * g0 + b0, (a1 - m) * r * g1 + b1,
                      (a2 - m) * r * g2 + b2, (a3 - m) * r * g3 + b3)
            k += U

    return row_mean, row_rstd, normalize


# -- fused: the row in registers ---------------------------------------------------------------------
# Per row, each thread loads its slice of x (all loads first), then the mean (a warp or block sum), the
# squared deviations from the values it holds (a second sum), and the store, with its slice of gamma and
# beta. Launched with a block per row group (`fused`) the loop over rows runs once, and the weights are
# loaded just before the store (cache hits: every row reads the same ones). `persistent` launches it
# on a grid sized to the machine with hold=True: each thread loads its slice of the weights ONCE, before
# the loop (its columns are the same in every row), and keeps them in registers across rows, at the
# price of 2 x 4 x chunks more registers a thread (which lowers occupancy at wide rows).

@functools.lru_cache(maxsize=None)
def fused_kernel(shape: RowShape, hold: bool = False):
    _has, load, store = row_access(shape.threads, shape.vector, 0.0)
    count = chunk_count(shape.threads, shape.vector)
    T, C, block = shape.threads, shape.chunks, shape.block
    held, per_warp, rows_per_block = CHUNK * C, T == WARP, shape.rows_per_block

    @row_jit(f"layernorm_{'hold' if hold else 'fused'}_{'warp' if per_warp else 'block'}{T}x{C}_b{block}_"
          f"{access_tag(shape.vector)}", block)
    def fused(x, gamma, beta, out, rows, cols, eps):
        vals = cuda.local.array(held, np.float32)
        g = cuda.local.array(held, np.float32)
        b = cuda.local.array(held, np.float32)
        ssum = cuda.shared.array(block, np.float32)  # two scratch arrays: the second sum's writes
        ssq = cuda.shared.array(block, np.float32)   # cannot race the first sum's readers
        lane = cuda.threadIdx.x & (T - 1)
        inv_cols = _ONE / np.float32(cols)  # float32 throughout: an int64 operand promotes to float64
        first = cuda.blockIdx.x * rows_per_block
        if hold:
            n = cols if first + cuda.threadIdx.x // T < rows else 0  # no row in this grid: load no weights
            for k in range(C):
                g[4 * k], g[4 * k + 1], g[4 * k + 2], g[4 * k + 3] = load(gamma, 0, n, lane, k)
                b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3] = load(beta, 0, n, lane, k)
        while first < rows:  # uniform across the block: every thread reaches every barrier
            row = first + cuda.threadIdx.x // T
            n = cols if row < rows else 0  # a warp past the last row loads and stores nothing
            start = row * cols
            s = _ZERO
            for k in range(C):  # all loads first, each independent: 16 C bytes in flight
                a0, a1, a2, a3 = load(x, start, n, lane, k)
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
                s += (a0 + a1) + (a2 + a3)
            m = (warp_sum(s) if per_warp else block_sum(s, ssum)) * inv_cols
            q = _ZERO
            for k in range(C):
                q += deviations(vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3], m, count(lane, k, cols))
            r = _ONE / math.sqrt((warp_sum(q) if per_warp else block_sum(q, ssq)) * inv_cols + eps)
            for k in range(C):
                if not hold:
                    g[4 * k], g[4 * k + 1], g[4 * k + 2], g[4 * k + 3] = load(gamma, 0, n, lane, k)
                    b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3] = load(beta, 0, n, lane, k)
                store(out, start, n, lane, k, (vals[4 * k] - m) * r * g[4 * k] + b[4 * k],
                      (vals[4 * k + 1] - m) * r * g[4 * k + 1] + b[4 * k + 1],
                      (vals[4 * k + 2] - m) * r * g[4 * k + 2] + b[4 * k + 2],
                      (vals[4 * k + 3] - m) * r * g[4 * k + 3] + b[4 * k + 3])
            first += cuda.gridDim.x * rows_per_block

    return fused


# -- layouts -------------------------------------------------------------------------------------

def fused_shape(cols: int) -> RowShape | None:
    """A row per warp while 4 chunks a lane cover it (cols <= 512), else a block per row
    (None: the row does not fit in registers)."""
    units = -(-cols // CHUNK)
    threads = WARP if units <= WARP * MAX_CHUNKS else min(MAX_THREADS, pow2_at_least(-(-units // MAX_CHUNKS)))
    chunks = pow2_at_least(-(-units // threads))
    if chunks > MAX_CHUNKS:
        return None
    return RowShape(threads, chunks, WARP_ROWS * WARP if threads == WARP else threads, cols % CHUNK == 0)


def fused_refusal(cols: int) -> str | None:
    if fused_shape(cols) is None:
        return (f"a row of {cols} floats does not fit in registers beside gamma and beta (at most {MAX_COLS}: "
                f"{MAX_THREADS} threads x {MAX_CHUNKS * CHUNK} floats); use the `unfused` variant, which streams it")
    return None


def persistent_blocks(shape: RowShape, rows: int) -> int:
    """Resident blocks x SMs for the fused kernel (no more than there are row groups)."""
    from numba import types
    arr = types.Array(types.float32, 1, "C")
    signature = (arr, arr, arr, arr, types.int64, types.int64, types.float32)
    return min(BACKEND.persistent_grid(fused_kernel(shape, hold=True), signature, shape.block), shape.blocks(rows))


# -- plans and launchers --------------------------------------------------------------------------

def plan_unfused(size: Size) -> Plan:
    r, c = size.rows, size.cols
    shape = stream_shape(c)
    k1, k2, k3 = (kernel_name(k) for k in unfused_kernels(shape))
    x, fly = F32 * r * c, 16 * shape.chunks
    return Plan((KernelLaunch(k1, r, shape.block, x, F32 * r, fly),
                 KernelLaunch(k2, r, shape.block, x + F32 * r * shape.threads, F32 * r, fly),
                 # x, gamma and beta for every row; the two statistics read by every thread
                 KernelLaunch(k3, r, shape.block, 3 * x + 2 * F32 * r * shape.threads, x, fly)))


def _plan_fused(persistent: bool):
    def plan(size: Size) -> Plan:
        shape = fused_shape(size.cols)
        if shape is None:
            raise ValueError(fused_refusal(size.cols))
        r, c = size.rows, size.cols
        grid = persistent_blocks(shape, r) if persistent else shape.blocks(r)
        # gamma and beta: loaded per row, or (held) once per row slot of the grid that gets a row
        loaders = min(grid * shape.rows_per_block, r) if persistent else r
        return Plan((KernelLaunch(kernel_name(fused_kernel(shape, hold=persistent)), grid, shape.block,
                                  bytes_read=F32 * (r * c + 2 * loaders * c), bytes_written=F32 * r * c,
                                  read_bytes_in_flight=16 * shape.chunks),))
    return plan


def _check(inputs, outputs) -> tuple[Any, Any, Any, Any, int, int]:
    x = device_array("x", inputs["x"], np.float32, (None, None))
    rows, cols = x.shape
    gamma = device_array("gamma", inputs["gamma"], np.float32, (cols,))
    beta = device_array("beta", inputs["beta"], np.float32, (cols,))
    out = device_array("out", outputs["out"], np.float32, (rows, cols))
    if cols % CHUNK == 0:
        require_aligned(x=x, gamma=gamma, beta=beta, out=out)
    return x, gamma, beta, out, rows, cols


def _no_op() -> None:
    pass


def bind_unfused(inputs, outputs, stream=0):
    x, gamma, beta, out, rows, cols = _check(inputs, outputs)
    if x.size == 0:
        return _no_op
    shape = stream_shape(cols)
    row_mean, row_rstd, normalize = (k[rows, shape.block, stream] for k in unfused_kernels(shape))
    rmean = cuda.device_array(rows, np.float32, stream=stream)  # the statistics: in DRAM
    rrstd = cuda.device_array(rows, np.float32, stream=stream)
    xf, outf, eps = x.reshape(rows * cols), out.reshape(rows * cols), np.float32(EPS)

    def launch():
        row_mean(xf, rmean, cols)
        row_rstd(xf, rmean, rrstd, cols, eps)
        normalize(xf, rmean, rrstd, gamma, beta, outf, cols)
    return launch


def bind_fused(inputs, outputs, stream=0, *, persistent: bool = False):
    x, gamma, beta, out, rows, cols = _check(inputs, outputs)
    if x.size == 0:
        return _no_op
    shape = fused_shape(cols)
    if shape is None:
        raise ArgumentError(fused_refusal(cols))
    grid = persistent_blocks(shape, rows) if persistent else shape.blocks(rows)
    configured = fused_kernel(shape, hold=persistent)[grid, shape.block, stream]
    xf, outf, eps = x.reshape(rows * cols), out.reshape(rows * cols), np.float32(EPS)
    return lambda: configured(xf, gamma, beta, outf, rows, cols, eps)


WORKLOAD = register(Workload(
    name="layernorm",
    about="out = (x - mean) / sqrt(var + eps) * gamma + beta over each row of a float32 rows x cols matrix",
    # simulator sizes: odd widths on both layouts (a row per warp; a block per row past 512 columns)
    axes=(Axis("rows", sim=5, gpu=65536, sim_sweep=(1,), about="independent rows", unit="rows"),
          Axis("cols", sim=67, gpu=1024, sweep=tuple(1 << k for k in range(8, 15)), sim_sweep=(3, 516),
               about="row length")),
    make_inputs=make_inputs, reference=reference, output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=1e-4),
))
WORKLOAD.add(Variant("unfused", "unfused", "3 kernels, a block per row: the mean; the variance; normalize "
                                           "(x, gamma and beta read again for every row)", plan_unfused, bind_unfused))
WORKLOAD.add(Variant("fused", "fused", "1 kernel, the row in registers: a row per warp (<= 512 columns) or per "
                                       "block, 16-byte accesses when cols % 4 == 0; gamma, beta read at the store",
                     _plan_fused(False), bind_fused, lambda size: fused_refusal(size.cols)))
WORKLOAD.add(Variant("persistent", "persistent", "the fused kernel on a grid of resident blocks x SMs, striding "
                                                 "over rows: gamma and beta loaded once per warp of the grid",
                     _plan_fused(True), functools.partial(bind_fused, persistent=True),
                     lambda size: fused_refusal(size.cols)))

from . import exercise  # noqa: E402,F401  (lesson 08's exercise: it merges partials with this workload's reference)
from . import cluster  # noqa: E402,F401  (the cluster variant: rows split across a thread-block cluster)
