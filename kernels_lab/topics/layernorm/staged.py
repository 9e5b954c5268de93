"""v6 of the cluster layernorm: each block's slice staged through shared memory by asynchronous copies, the next
row's copy in flight while this row is reduced, exchanged and written (softmax's staged.py holds the pieces and
says how: a grid of resident clusters striding over rows, a two-row shared buffer per block, cp.async).

Why: v3 (cluster.py) holds its slice in registers, so every load is in flight at once and then the block stops
reading while it reduces, waits at the cluster barrier and writes; v4 and v5 showed that registers are not what
limits it (halving them did not help). The exchange is v3's: (count, mean, M2) merged by Chan's rule, two slots.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import cluster_index, cluster_rank, cluster_sync
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...intrinsics import load4
from ...runtime import cuda
from ..softmax import cluster as scl
from ..softmax import split as sp
from ..softmax.staged import resident_blocks, row_stager, staged4, staged_launcher, staged_layout
from ..softmax.staged import staged_refusal as softmax_staged_refusal
from ..softmax.workload import require_aligned
from . import cluster as lcl
from . import workload as ln

_ZERO, _ONE = np.float32(0), np.float32(1)


@functools.lru_cache(maxsize=None)
def layernorm_staged_kernel(shape: scl.ClusterShape, stages: int = 2, held: bool = False):
    """v6 for this layout (the module's docstring), or with `held` v7: the stage read once into registers, then
    v3's steps (one shared read an element instead of three). Dynamic shared memory: stage_bytes(shape, stages)."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    slots, warps, n_held = 2 * K, T // 32, (4 * C if held else 1)
    start, arrive = row_stager(shape, stages)
    name = f"layernorm_cluster{K}_{T}x{C}_" + ("v7" if held else "v6") + ("" if stages == 2 else f"_s{stages}")

    @cuda.jit(device=True, inline=True)
    def vector(vals, staged, q, k, v, row_lo, row_hi):
        """This thread's k-th vector of the row, staged vector q (lanes outside the row 0): from registers in v7,
        the stage in v6."""
        if held:
            return vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3]
        return staged4(staged, q, v, row_lo, row_hi, _ZERO)

    @ln.row_jit(name, T, resident_blocks(shape, stages) if held else 0)
    def layernorm_cluster_v6(x, gamma, beta, out, rows, cols, slice_vectors, eps):
        staged = cuda.shared.array(0, np.float32)  # [stages C T vectors]: this thread's vectors of `stages` rows
        vals = cuda.local.array(n_held, np.float32)  # v7: this row's vectors, read once from the stage
        scratch_n = cuda.shared.array(warps, np.float32)
        scratch_m = cuda.shared.array(warps, np.float32)
        scratch_q = cuda.shared.array(warps, np.float32)
        peer_n = cuda.shared.array(slots, np.float32)  # [slot K + rank]: the triples the cluster's blocks store here
        peer_m = cuda.shared.array(slots, np.float32)
        peer_q = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row, slot, it = cluster_index(), 0, 0
        start(x, staged, row, rows, clusters, cols, slice_vectors, j, tid)
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            base = arrive(x, staged, it, row, rows, clusters, cols, slice_vectors, j, tid)
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            row_hi = row_lo + cols
            s, n = _ZERO, 0
            for k in range(C):
                v = first + tid + k * T
                if v < end:
                    a0, a1, a2, a3 = staged4(staged, base + k * T + tid, v, row_lo, row_hi, _ZERO)
                    n += lcl._in_row(v, row_lo, row_hi)
                    s += (a0 + a1) + (a2 + a3)
                    if held:  # a compile-time constant: one of the two kernels is compiled
                        vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
            count = np.float32(n)
            mean = s / count if n > 0 else _ZERO
            q = _ZERO  # M2 about the thread's own mean (v3's)
            for k in range(C):
                v = first + tid + k * T
                if v < end:
                    a0, a1, a2, a3 = vector(vals, staged, base + k * T + tid, k, v, row_lo, row_hi)
                    e = 4 * v
                    d0 = lcl._deviation(a0, mean, e, row_lo, row_hi)
                    d1 = lcl._deviation(a1, mean, e + 1, row_lo, row_hi)
                    d2 = lcl._deviation(a2, mean, e + 2, row_lo, row_hi)
                    d3 = lcl._deviation(a3, mean, e + 3, row_lo, row_hi)
                    q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
            bn, bm, bq = lcl.block_welford(count, mean, q, scratch_n, scratch_m, scratch_q)
            rn, rm, rq = lcl.swap_triples(bn, bm, bq, peer_n, peer_m, peer_q, slot, K, j, tid)
            r = _ONE / math.sqrt(rq / rn + eps)
            for k in range(C):
                v = first + tid + k * T
                if v < end:  # lanes outside the row are not stored: v6 reads them unmasked
                    if held:
                        a0, a1, a2, a3 = vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3]
                    else:
                        a0, a1, a2, a3 = load4(staged, base + k * T + tid)
                    g0, g1, g2, g3 = lcl._weights4(gamma, v, row_lo, row_hi)
                    b0, b1, b2, b3 = lcl._weights4(beta, v, row_lo, row_hi)
                    sp.store_vector(out, v, row_lo, row_hi, (a0 - rm) * r * g0 + b0, (a1 - rm) * r * g1 + b1,
                                    (a2 - rm) * r * g2 + b2, (a3 - rm) * r * g3 + b3)
            row += clusters
            slot = 1 - slot
            it += 1

    return layernorm_cluster_v6


def staged_refusal(cols: int) -> str | None:
    """None when v6 and v7 run rows of `cols` floats here; else why not."""
    return softmax_staged_refusal(cols, lcl.cluster_refusal)


def plan_staged(size: Size, held: bool = False) -> Plan:
    """v3's traffic: x once, out once, gamma and beta for every row (from the caches)."""
    r, c = size.rows, size.cols
    shape = staged_layout(c)
    if shape is None:
        raise ValueError(staged_refusal(c))
    kernel = layernorm_staged_kernel(shape, 2, held)
    return Plan((KernelLaunch(kernel_name(kernel), r * shape.slices, shape.threads, bytes_read=ln.F32 * 3 * r * c,
                              bytes_written=ln.F32 * r * c, read_bytes_in_flight=16 * shape.chunks),))


def bind_staged(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None,
                stages: int = 2, held: bool = False):
    """staged_launcher's grid (softmax/staged.py); `shape` another layout than the width's; `stages` rows of the
    slice in shared memory; `held`: v7."""
    x, gamma, beta, out, rows, cols = ln._check(inputs, outputs)
    require_aligned(x=x, gamma=gamma, beta=beta, out=out)
    if shape is None and (why := staged_refusal(cols)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return ln._no_op
    shape = shape or staged_layout(cols)
    return staged_launcher(layernorm_staged_kernel(shape, stages, held), shape, rows,
                           (x.reshape(rows * cols), gamma, beta, out.reshape(rows * cols), rows, cols,
                            shape.slice_vectors(cols), np.float32(ln.EPS)), stream, clusters, stages)


CLUSTER_V6 = Variant("cluster_v6", "persistent",
                     "v3 with each block's slice staged in shared memory by asynchronous copies, the next row's "
                     "copy in flight during this row's exchange; unregistered: the study times it beside `cluster`",
                     plan_staged, bind_staged, lambda size: staged_refusal(size.cols))
CLUSTER_V7 = Variant("cluster_v7", "persistent",
                     "v6 reading its stage once into registers (v3's steps from there); unregistered",
                     functools.partial(plan_staged, held=True), functools.partial(bind_staged, held=True),
                     lambda size: staged_refusal(size.cols))
