"""Rows staged through shared memory by asynchronous copies: the cluster kernels' slices without registers, the
next row's copy in flight while this row is reduced, exchanged and written (softmax's v20 here; layernorm's v6,
topics/layernorm/staged.py, uses the same pieces).

The cluster kernel (cluster.py) holds its slice in registers: every load in flight at once, then no reads while
the block reduces, waits at the cluster barrier and writes; only the other resident blocks' loads cover that
pause. Here a grid of as many clusters as the GPU holds at once strides over the rows, and each thread, before it
reduces row r, starts copying its vectors of row r + C (its cluster's next row) into the other half of a two-row
shared buffer (cp.async: a copy holds no register while in flight; intrinsics.copy16_async):

    copy row r into stage 0
    per row r:   copy row r + C into stage 1 - s        (one group; an empty one on the cluster's last row)
                 wait for all but the newest group       (row r is in stage s)
                 reduce stage s; swap the block's partial result through DSMEM; cluster barrier
                 write the row from stage s; s = 1 - s

A thread reads only the vectors it copied (vector k T + tid of a stage), so its own wait is enough: no block
barrier guards the buffer, and the copy into stage 1 - s overwrites what this thread read a row before, after it
read it.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import MAX_CLUSTER, cluster_index, cluster_rank, cluster_sync, resident_launcher
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...instrument.ptxas import SHARED_PER_SM
from ...intrinsics import async_commit, async_wait_group, copy16_async, load4
from ...reduce import LOWEST, block_md, exp_shifted_sum
from ...rows import pow2_at_least, row_jit
from ...runtime import cuda
from . import workload as sm  # first: it registers split.py's variants, which need it whole
from . import cluster as scl  # noqa: I001
from . import split as sp

STAGE_VECTORS = 2048  # 16-byte vectors a block stages per row (32 KB; two rows: 64 KB, three blocks an SM)


def staged_layout(cols: int) -> scl.ClusterShape | None:
    """Blocks of about STAGE_VECTORS vectors a row (8 a thread), up to 16 blocks a row, then larger blocks."""
    slices = min(MAX_CLUSTER, pow2_at_least(-(-sp._row_vectors(cols) // STAGE_VECTORS)))
    return scl.cluster_shape(cols, slices=slices)


def stage_bytes(shape: scl.ClusterShape, stages: int = 2) -> int:
    """The dynamic shared memory a block of this layout needs: `stages` rows of its slice."""
    return stages * 16 * shape.threads * shape.chunks


def resident_blocks(shape: scl.ClusterShape, stages: int) -> int:
    """The blocks an SM holds by their shared memory (the stages, a few KB of static arrays, the reserved KB): the
    launch bound v21 and v7 ask of the compiler, so that the registers holding a row do not cut it further (v20
    and v6, measured without one, need no more than 40)."""
    return max(1, SHARED_PER_SM // (stage_bytes(shape, stages) + 4 * 1024))


@cuda.jit(device=True, inline=True)
def staged4(staged, q, v, row_lo, row_hi, fill):
    """The staged vector q (elements 4v .. 4v + 3 of x), those outside [row_lo, row_hi) as `fill`."""
    a0, a1, a2, a3 = load4(staged, q)
    e = 4 * v
    if e >= row_lo and e + 3 < row_hi:
        return a0, a1, a2, a3
    return (a0 if row_lo <= e < row_hi else fill, a1 if row_lo <= e + 1 < row_hi else fill,
            a2 if row_lo <= e + 2 < row_hi else fill, a3 if row_lo <= e + 3 < row_hi else fill)


def slice_copier(shape: scl.ClusterShape):
    """copy_slice(x, staged, base, row, cols, slice_vectors, j, tid): start the copies of this thread's vectors of
    `row`'s slice j into the stage at vector `base`, and commit them as one group."""
    T, C = shape.threads, shape.chunks

    @cuda.jit(device=True, inline=True)
    def copy_slice(x, staged, base, row, cols, slice_vectors, j, tid):
        row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
        for k in range(C):
            v = first + tid + k * T
            if v < end:  # the last vector of x may hold fewer than 4 floats: copy those, zeros after
                copy16_async(staged, base + k * T + tid, x, v, min(4, x.size - 4 * v))
        async_commit()
    return copy_slice


def row_stager(shape: scl.ClusterShape, stages: int):
    """The pipeline of a cluster striding over rows with `stages` rows of its slice in shared memory, as two device
    functions (every thread of the cluster calls them, with the same rows):
      start(x, staged, row, rows, clusters, cols, slice_vectors, j, tid)     copy the first stages - 1 rows
      arrive(x, staged, it, row, rows, clusters, cols, slice_vectors, j, tid) -> the first vector of row `row`'s
          stage, once its copies are in; the row stages - 1 ahead is copied into the stage read a row before
    (it: how many rows the cluster did before this one). One group a row, empty past the last row, so that
    "every group but the newest stages - 1" is always this row's and those before it."""
    S, stage = stages, shape.threads * shape.chunks
    in_flight = stages - 1  # a constant (wait_group's operand is an immediate)
    copy_slice = slice_copier(shape)

    @cuda.jit(device=True, inline=True)
    def start(x, staged, row, rows, clusters, cols, slice_vectors, j, tid):
        for s in range(S - 1):
            if row + s * clusters < rows:
                copy_slice(x, staged, s * stage, row + s * clusters, cols, slice_vectors, j, tid)
            else:
                async_commit()

    @cuda.jit(device=True, inline=True)
    def arrive(x, staged, it, row, rows, clusters, cols, slice_vectors, j, tid):
        ahead = row + (S - 1) * clusters
        if ahead < rows:
            copy_slice(x, staged, ((it + S - 1) % S) * stage, ahead, cols, slice_vectors, j, tid)
        else:
            async_commit()
        async_wait_group(in_flight)
        return (it % S) * stage
    return start, arrive


def staged_launcher(kernel, shape: scl.ClusterShape, rows: int, args: tuple, stream=0, clusters: int | None = None,
                    stages: int = 2):
    """As many clusters as the GPU holds at once (at most one a row), striding over the rows; `clusters` another
    count (the simulator, which runs one cluster at a time, takes one a row)."""
    return resident_launcher(kernel, rows, shape.slices, shape.threads, args, stream, clusters,
                             stage_bytes(shape, stages))


@functools.lru_cache(maxsize=None)
def softmax_staged_kernel(shape: scl.ClusterShape, stages: int = 2, held: bool = False):
    """v20 for this layout (the module's docstring), or with `held` v21: the stage read once into registers, then
    the cluster kernel's steps (one shared read and one exp an element instead of three reads and two exps).
    Dynamic shared memory: stage_bytes(shape, stages)."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    slots, n_held = 2 * K, (sm.CHUNK * C if held else 1)
    start, arrive = row_stager(shape, stages)
    name = f"softmax_cluster{K}_{T}x{C}_staged" + ("_held" if held else "") + ("" if stages == 2 else f"_s{stages}")

    @row_jit(name, T, resident_blocks(shape, stages) if held else 0)
    def softmax_staged(x, out, rows, cols, slice_vectors):
        staged = cuda.shared.array(0, np.float32)  # [stages C T vectors]: this thread's vectors of `stages` rows
        vals = cuda.local.array(n_held, np.float32)  # v21: this row's vectors, read once from the stage
        scratch_m = cuda.shared.array(T, np.float32)
        scratch_d = cuda.shared.array(T, np.float32)
        peer_m = cuda.shared.array(slots, np.float32)  # [slot K + rank]: the pairs the cluster's blocks store here
        peer_d = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row, slot, it = cluster_index(), 0, 0
        start(x, staged, row, rows, clusters, cols, slice_vectors, j, tid)
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            base = arrive(x, staged, it, row, rows, clusters, cols, slice_vectors, j, tid)
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            row_hi = row_lo + cols
            m = LOWEST
            for k in range(C):
                v = first + tid + k * T
                if v < end:
                    a0, a1, a2, a3 = staged4(staged, base + k * T + tid, v, row_lo, row_hi, LOWEST)
                    m = max(m, max(max(a0, a1), max(a2, a3)))
                    if held:  # a compile-time constant: one of the two kernels is compiled
                        vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
                elif held:  # exp_shifted_sum adds every held float: these add exp(LOWEST - m) = 0
                    vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = LOWEST, LOWEST, LOWEST, LOWEST
            if held:
                d = exp_shifted_sum(vals, n_held, m)  # vals = exp(x - m)
            else:
                d = np.float32(0)
                for k in range(C):
                    v = first + tid + k * T
                    if v < end:  # a lane outside the row holds LOWEST: exp(LOWEST - m) is 0
                        a0, a1, a2, a3 = staged4(staged, base + k * T + tid, v, row_lo, row_hi, LOWEST)
                        d += (math.exp(a0 - m) + math.exp(a1 - m)) + (math.exp(a2 - m) + math.exp(a3 - m))
            bm, bd = block_md(m, d, scratch_m, scratch_d)
            rm, rd = scl.swap_pairs(bm, bd, peer_m, peer_d, slot, K, j, tid)
            inv = np.float32(1) / rd
            scale = math.exp(m - rm) * inv if held else inv  # v21: its exp(x - m) rescaled to the row's max, sum
            for k in range(C):
                v = first + tid + k * T
                if v < end:
                    if held:
                        sp.store_vector(out, v, row_lo, row_hi, vals[4 * k] * scale, vals[4 * k + 1] * scale,
                                        vals[4 * k + 2] * scale, vals[4 * k + 3] * scale)
                    else:  # lanes outside the row as LOWEST too: a neighbour's element could overflow exp
                        a0, a1, a2, a3 = staged4(staged, base + k * T + tid, v, row_lo, row_hi, LOWEST)
                        sp.store_vector(out, v, row_lo, row_hi, math.exp(a0 - rm) * inv, math.exp(a1 - rm) * inv,
                                        math.exp(a2 - rm) * inv, math.exp(a3 - rm) * inv)
            row += clusters
            slot = 1 - slot
            it += 1

    return softmax_staged


def staged_refusal(cols: int, cluster_refusal=scl.cluster_variant_refusal) -> str | None:
    """None when a staged kernel runs rows of `cols` floats here; else why not (first, why its topic's cluster
    kernel does not: `cluster_refusal`)."""
    if (why := cluster_refusal(cols)) is not None:
        return why
    if staged_layout(cols) is None:
        return f"a row of {cols} floats does not fit the staged layout ({MAX_CLUSTER} blocks); use `cluster`"
    return None


def plan_staged(size: Size, held: bool = False) -> Plan:
    """The cluster kernel's traffic: x once, out once."""
    shape = staged_layout(size.cols)
    if shape is None:
        raise ValueError(staged_refusal(size.cols))
    kernel = softmax_staged_kernel(shape, 2, held)
    return Plan((KernelLaunch(kernel_name(kernel), size.rows * shape.slices, shape.threads,
                              bytes_read=sm.F32 * size.elements, bytes_written=sm.F32 * size.elements,
                              read_bytes_in_flight=16 * shape.chunks),))


def bind_staged(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None,
                stages: int = 2, held: bool = False):
    """staged_launcher's grid; `shape` another layout than the width's; `stages` rows of the slice in shared
    memory (2: the next row in flight while this one is worked on); `held`: v21 (softmax_staged_kernel)."""
    x, out, rows, cols = sm._check(inputs, outputs, vectors=True)
    if shape is None and (why := staged_refusal(cols)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return sm._no_op
    shape = shape or staged_layout(cols)
    return staged_launcher(softmax_staged_kernel(shape, stages, held), shape, rows,
                           (sm._flat(x, rows, cols), sm._flat(out, rows, cols), rows, cols, shape.slice_vectors(cols)),
                           stream, clusters, stages)


STAGED = Variant("cluster_staged", "persistent",
                 "the cluster kernel with each slice staged in shared memory by asynchronous copies, the next row's "
                 "copy in flight during this row's exchange; unregistered: the study times it beside `cluster`",
                 plan_staged, bind_staged, lambda size: staged_refusal(size.cols))
STAGED_HELD = Variant("cluster_staged_held", "persistent",
                      "the staged kernel reading its stage once into registers (the cluster kernel's steps from there)",
                      functools.partial(plan_staged, held=True), functools.partial(bind_staged, held=True),
                      lambda size: staged_refusal(size.cols))
