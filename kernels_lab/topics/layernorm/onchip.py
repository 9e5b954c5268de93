"""v10 of the cluster layernorm: gamma and beta kept in shared memory across rows, as a persistent RNN keeps its
weights on chip across time steps (lesson 05), by a grid of as many clusters as the GPU holds at once striding
over the rows.

Why: v8 and v9 (cluster.py) read gamma and beta again for every row, two 16-byte loads from L2 for every vector
they store, in the last step of the row, when nothing else is in flight: each block waits for those loads chunk
after chunk before it stores. Softmax's cluster kernel, whose last step loads nothing, holds 0.77-0.86 of the copy
ceiling on the H200 at the long rows where layernorm v8 holds 0.65-0.69 (figures/data). Here each block copies its
slice of the weights into shared memory once, and the last step reads them from there.

A block's slice covers the same columns in every row when the width is a multiple of 4 (rows then start on a
16-byte boundary): thread tid copies the weights of its own vectors (slice vector tid + k T), and later reads only
those, so no barrier guards the copy. Other widths never take the path that reads them (v9's vote: a warp whose
lanes all hold whole vectors), and their edge threads read the weights from global memory as v3 does.
Layout: v4's (16 floats a thread, twice v3's blocks a row) with 1536 resident threads asked of the compiler, so
that three blocks an SM fit their weights (2 x 32 KB at the long rows' layouts) and the registers (40 a thread,
16 bytes spilled, in blocks of 128 threads or more; 64 and no spill in the 32-thread blocks of 1000-1024
columns); v11 asks 1024 (64 registers, no spill, two blocks an SM). So v10 differs from v9 in three ways (the
weights, the layout, the residency), and v4's layout alone measured below v3's on the H200: a difference from
v9 is not the weights' alone.
Measured (H100, figures/data/layernorm_{shapes,long}_h100.json; lesson 08): below v9 from 4096 columns on, level
where the layouts agree (1000-1024 columns). Half the floats a thread means half the bytes in flight at v9's
residency (v11), as v4 found; on v9's layout the weights take twice a block's slice of x in shared memory (one
block of 512 threads an SM at 32768 and 65536 columns).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import cluster_index, cluster_rank, cluster_sync, resident_launcher
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...intrinsics import load4, store4
from ...reduce import ALL_LANES
from ...runtime import cuda
from ..softmax import cluster as scl
from ..softmax import split as sp
from ..softmax.workload import require_aligned
from . import cluster as lcl
from . import workload as ln

RESIDENT_THREADS = 1536  # the launch bound: 40 registers a thread, three blocks of 512 an SM
_ONE = np.float32(1)


def onchip_layout(cols: int) -> scl.ClusterShape | None:
    """v4's layout: v3's with half the floats a thread (None: no cluster holds the row that way)."""
    return lcl.layout(cols, 4)


def weight_bytes(shape: scl.ClusterShape) -> int:
    """The dynamic shared memory a block needs: its slice of gamma and of beta."""
    return 2 * 16 * shape.threads * shape.chunks


@cuda.jit(device=True, inline=True)
def _copy_weights(gamma, beta, wts, j, tid, cols, slice_vectors, T, C):
    """This thread's vectors of the block's slice of gamma and beta into wts (gamma's at tid + k T, beta's C T
    after): only when the width is a multiple of 4, the only widths whose path reads them."""
    if (cols & 3) == 0:
        for k in range(C):
            i = tid + k * T
            w = j * slice_vectors + i  # the vector's place in the row
            if i < slice_vectors and w < (cols >> 2):
                g0, g1, g2, g3 = load4(gamma, w)
                store4(wts, i, g0, g1, g2, g3)
                b0, b1, b2, b3 = load4(beta, w)
                store4(wts, C * T + i, b0, b1, b2, b3)


@cuda.jit(device=True, inline=True)
def _onchip_out(out, wts, vals, v0, tid, m, r, T, C):
    """cluster._whole_out with the weights from shared memory."""
    for k in range(C):
        g0, g1, g2, g3 = load4(wts, tid + k * T)
        b0, b1, b2, b3 = load4(wts, C * T + tid + k * T)
        store4(out, v0 + k * T, (vals[4 * k] - m) * r * g0 + b0, (vals[4 * k + 1] - m) * r * g1 + b1,
               (vals[4 * k + 2] - m) * r * g2 + b2, (vals[4 * k + 3] - m) * r * g3 + b3)


@functools.lru_cache(maxsize=None)
def layernorm_onchip_kernel(shape: scl.ClusterShape, resident: int = RESIDENT_THREADS):
    """v10 for this layout (the module's docstring); resident: the threads an SM the launch bound asks for (v11:
    1024, two blocks an SM with 64 registers a thread). Dynamic shared memory: weight_bytes(shape)."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    held, slots, warps = 4 * C, 2 * K, T // 32

    @ln.row_jit(f"layernorm_cluster{K}_{T}x{C}_" + ("v10" if resident == RESIDENT_THREADS else f"v10_r{resident}"), T,
                max(1, resident // T))
    def layernorm_cluster_v10(x, gamma, beta, out, rows, cols, slice_vectors, eps):
        wts = cuda.shared.array(0, np.float32)  # [2 C T vectors]: gamma's, then beta's, of this block's slice
        vals = cuda.local.array(held, np.float32)
        scratch_n = cuda.shared.array(warps, np.float32)
        scratch_m = cuda.shared.array(warps, np.float32)
        scratch_q = cuda.shared.array(warps, np.float32)
        peer_n = cuda.shared.array(slots, np.float32)  # [slot K + rank]: the triples the cluster's blocks store here
        peer_m = cuda.shared.array(slots, np.float32)
        peer_q = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        _copy_weights(gamma, beta, wts, j, tid, cols, slice_vectors, T, C)  # once: every row's columns
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row, slot = cluster_index(), 0
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            row_hi = row_lo + cols
            inside = cuda.all_sync(ALL_LANES, (cols & 3) == 0 and first + tid + (C - 1) * T < end)  # v9's vote
            if inside:
                count, mean, q = lcl._whole_stats(x, vals, first + tid, T, C)
            else:
                count, mean, q = lcl._edge_stats(x, vals, first, end, row_lo, row_hi, tid, T, C)
            bn, bm, bq = lcl.block_welford(count, mean, q, scratch_n, scratch_m, scratch_q)
            rn, rm, rq = lcl.swap_triples(bn, bm, bq, peer_n, peer_m, peer_q, slot, K, j, tid)
            r = _ONE / math.sqrt(rq / rn + eps)
            if inside:
                _onchip_out(out, wts, vals, first + tid, tid, rm, r, T, C)
            else:
                lcl.edge_out(out, gamma, beta, vals, first, end, row_lo, row_hi, tid, rm, r, T, C)
            row += clusters
            slot = 1 - slot

    return layernorm_cluster_v10


def onchip_refusal(cols: int) -> str | None:
    """None when v10 runs rows of `cols` floats here; else why not."""
    return lcl.version_refusal(cols, 4)


def plan_onchip(size: Size, resident: int = RESIDENT_THREADS) -> Plan:
    """x once, out once; gamma and beta once for each resident cluster (counted once here: a few MB at most)."""
    r, c = size.rows, size.cols
    shape = onchip_layout(c)
    if shape is None:
        raise ValueError(onchip_refusal(c))
    kernel = layernorm_onchip_kernel(shape, resident)
    return Plan((KernelLaunch(kernel_name(kernel), r * shape.slices, shape.threads,
                              bytes_read=ln.F32 * (r * c + 2 * c), bytes_written=ln.F32 * r * c,
                              read_bytes_in_flight=16 * shape.chunks),))


def bind_onchip(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None,
                resident: int = RESIDENT_THREADS):
    """As many clusters as the GPU holds at once (at most one a row), striding over the rows; `shape` another
    layout than the width's, `clusters` another count; `resident` the launch bound's threads an SM (v11: 1024)."""
    x, gamma, beta, out, rows, cols = ln._check(inputs, outputs)
    require_aligned(x=x, gamma=gamma, beta=beta, out=out)
    if shape is None and (why := onchip_refusal(cols)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return ln._no_op
    shape = shape or onchip_layout(cols)
    return resident_launcher(layernorm_onchip_kernel(shape, resident), rows, shape.slices, shape.threads,
                             (x.reshape(rows * cols), gamma, beta, out.reshape(rows * cols), rows, cols,
                              shape.slice_vectors(cols), np.float32(ln.EPS)), stream, clusters, weight_bytes(shape))


CLUSTER_V10 = Variant("cluster_v10", "persistent",
                      "v9 keeping gamma and beta in shared memory across rows (a grid of resident clusters "
                      "striding over the rows, v4's layout); unregistered: the study times it beside `cluster`",
                      plan_onchip, bind_onchip, lambda size: onchip_refusal(size.cols))
CLUSTER_V11 = Variant("cluster_v11", "persistent",
                      "v10 asking 1024 resident threads an SM (64 registers, no spill; two blocks an SM); "
                      "unregistered", functools.partial(plan_onchip, resident=1024),
                      functools.partial(bind_onchip, resident=1024), lambda size: onchip_refusal(size.cols))
