"""Softmax with each row split across a thread-block cluster: the blocks of a row swap (max, sum) through DSMEM.

`split` (split.py) cuts a long row across k blocks that exchange their partial (max, sum) through global
memory: a store, a fence, a flag, and k polls per block and row; the wait is exposed once per row and the
grid must be persistent so that the blocks of a row are resident at once. A cluster (kernels_lab/clusters.py,
compute capability >= 9.0) removes both: the GPU starts the k blocks of a cluster together on one GPC, each
block writes its pair straight into the others' shared memory (st.shared::cluster), and one hardware barrier
(barrier.cluster arrive.release / wait.acquire) replaces the flags. One read and one write of x, as `fused`.

    cluster c = blocks c k .. c k + k - 1; block rank j holds slice j of rows c, c + C, c + 2C, ...
    per row:  the slice in registers (16-byte accesses at any width: split.py's vectors) -> block pair (m, d)
              thread p < k: peer_m/peer_d[slot, j] of block p = the pair         (DSMEM stores)
              cluster barrier: every block's pair is in every block's shared memory
              every thread combines the k pairs (local shared reads); out = e * exp(m_t - M) / D

Two slots (row parity) suffice: a block stores into slot s again two rows later, after the barrier of the
row between, which no block passes before every block has read slot s. The barrier at the start makes sure
every block of the cluster has started (has shared memory) before the first DSMEM store; after the last
barrier no block touches another's memory, so a block may leave.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...arrays import ArgumentError
from ...backend import BACKEND
from ...clusters import (MAX_CLUSTER, cluster_arrive, cluster_index, cluster_launcher, cluster_rank,
                         cluster_refusal, cluster_sync, cluster_wait, dsmem_store)
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...intrinsics import load4, store4
from ...reduce import ALL_LANES, LOWEST, block_md, exp_shifted_sum, md_combine
from ...rows import pow2_at_least, row_jit
from ...runtime import cuda
from . import workload as sm  # first: it registers the variants of split.py, which needs it whole
from . import split as sp  # noqa: I001

SLICE_FLOATS = BACKEND.size(gpu=8192, simulator=64)  # floats a block holds by default (a GPU: 256 threads x 32;
                                                     # the simulator: several blocks a row at its small widths)


@dataclass(frozen=True)
class ClusterShape:
    """k blocks per row (one cluster), each `threads` threads holding `chunks` 4-float chunks of its slice."""

    slices: int
    threads: int
    chunks: int

    def slice_vectors(self, cols: int) -> int:
        """16-byte vectors per slice (split.py's: at any width, rows need not start 16-byte aligned)."""
        return -(-sp._row_vectors(cols) // self.slices)


# The default layout per width: the best measured one (highest fraction of the copy ceiling) of every layout
# cluster_probe timed, from figures/data/softmax_cluster_h200.json (H200, 2026-12-05). (width, blocks, threads);
# every best layout holds 8 chunks (32 floats) a thread. tests/test_clusters.py reads the file and checks this table.
MEASURED_LAYOUTS = ((8192, 1, 256), (16384, 2, 256), (32768, 2, 512), (50257, 8, 256), (65536, 4, 512),
                    (131072, 16, 256), (262144, 16, 512))


def portable_slices(cols: int) -> int:
    """Slices of about SLICE_FLOATS, k a power of two, at most 8 (the portable cluster): the rule below the
    narrowest measured width (and the cluster cross-entropy's, whose layouts were not measured)."""
    return min(8, pow2_at_least(-(-cols // SLICE_FLOATS)))


def default_layout(cols: int) -> tuple[int, int | None]:
    """(blocks, threads) for rows of `cols` floats (threads None: the fewest that hold the slice).
    Between measured widths: the layout of the next measured width up (it holds this row; a narrower width's
    may not fit). Below the narrowest: portable_slices. Past the widest (unmeasured): its 16 blocks, threads
    growing as the row does."""
    for width, slices, threads in MEASURED_LAYOUTS:
        if cols <= width:
            return (portable_slices(cols), None) if width == MEASURED_LAYOUTS[0][0] and cols < width \
                else (slices, threads)
    return MEASURED_LAYOUTS[-1][1], None


def cluster_shape(cols: int, slices: int | None = None, threads: int | None = None) -> ClusterShape | None:
    """The layout for rows of `cols` floats (None: it does not fit). Default: default_layout (the measured best;
    a row just under a measured width that does not start 16-byte aligned needs one vector more than the measured
    block holds: then the fewest threads that hold it). `slices` / `threads` force a layout (the benchmark
    compares)."""
    if slices is None:
        slices, measured = default_layout(cols)
        if threads is None and measured is not None:
            return _fit(cols, slices, measured) or _fit(cols, slices, None)
    return _fit(cols, slices, threads)


def _fit(cols: int, slices: int, threads: int | None) -> ClusterShape | None:
    if not 1 <= slices <= MAX_CLUSTER:
        return None
    per_slice = -(-sp._row_vectors(cols) // slices)
    if threads is None:
        threads = min(sm.MAX_THREADS, max(sm.WARP, pow2_at_least(-(-per_slice // sp.SLICE_CHUNKS))))
    chunks = pow2_at_least(-(-per_slice // threads))
    if chunks > sp.SLICE_CHUNKS or threads > sm.MAX_THREADS:
        return None
    return ClusterShape(slices, threads, chunks)


def cluster_variant_refusal(cols: int) -> str | None:
    """None when `cluster` runs rows of `cols` floats here; else why not, and what to use."""
    if (why := cluster_refusal()) is not None:
        return f"{why}; use the `split` variant (blocks exchanging through global memory)"
    if cluster_shape(cols) is None:
        most = MAX_CLUSTER * sm.MAX_THREADS * sp.SLICE_CHUNKS * sm.CHUNK
        return (f"a row of {cols} floats does not fit in the registers of a cluster of {MAX_CLUSTER} blocks "
                f"(at most {most}); "
                f"use the `online` variant, which streams the row twice")
    return None


@cuda.jit(device=True, inline=True)
def swap_pairs(bm, bd, peer_m, peer_d, slot, k, j, tid):
    """The row's (max, sum) from the k blocks' pairs: thread p < k stores this block's pair into block p's
    peer_m/peer_d[slot k + j] (DSMEM), the cluster barrier, every thread combines the k pairs."""
    if tid < k:
        dsmem_store(peer_m, slot * k + j, tid, bm)
        dsmem_store(peer_d, slot * k + j, tid, bd)
    cluster_arrive()  # release: the stores above are visible to whoever passes the wait
    cluster_wait()
    rm, rd = peer_m[slot * k], peer_d[slot * k]
    for p in range(1, k):
        rm, rd = md_combine(rm, rd, peer_m[slot * k + p], peer_d[slot * k + p])
    return rm, rd


@functools.lru_cache(maxsize=None)
def cluster_kernel(shape: ClusterShape, whole: bool = False):
    """whole (the study's v22): a warp whose every lane's vectors lie inside the row (cols % 4 == 0, the slice's
    end not reached: all but each slice's last warps) loads and stores with no test (a warp vote decides, so no warp
    runs both paths); layernorm's v9, where the tests cost a memory-bound kernel issue slots."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    held, slots = sm.CHUNK * C, 2 * K  # array sizes must be constants, not expressions
    WHOLE = whole

    @row_jit(f"softmax_cluster{K}_{T}x{C}" + ("_whole" if whole else ""), T)
    def softmax_cluster(x, out, rows, cols, slice_vectors):
        vals = cuda.local.array(held, np.float32)
        scratch_m = cuda.shared.array(T, np.float32)
        scratch_d = cuda.shared.array(T, np.float32)
        peer_m = cuda.shared.array(slots, np.float32)  # [slot K + rank]: the pairs the cluster's blocks store here
        peer_d = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row, slot = cluster_index(), 0
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            inside = WHOLE and (cols & 3) == 0 and first + tid + (C - 1) * T < end
            if WHOLE:
                inside = cuda.all_sync(ALL_LANES, inside)
            m = LOWEST
            for k in range(C):  # all loads first, each independent: 16 C bytes in flight
                v = first + tid + k * T
                if inside:
                    a0, a1, a2, a3 = load4(x, v)
                elif v < end:
                    a0, a1, a2, a3 = sp.load_vector(x, v, row_lo, row_lo + cols, LOWEST)
                else:
                    a0, a1, a2, a3 = LOWEST, LOWEST, LOWEST, LOWEST
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
                m = max(m, max(max(a0, a1), max(a2, a3)))
            bm, bd = block_md(m, exp_shifted_sum(vals, held, m), scratch_m, scratch_d)
            rm, rd = swap_pairs(bm, bd, peer_m, peer_d, slot, K, j, tid)
            scale = math.exp(m - rm) / rd  # this thread's e = exp(x - m) rescaled to the row's max and sum
            for k in range(C):
                v = first + tid + k * T
                if inside:
                    store4(out, v, vals[4 * k] * scale, vals[4 * k + 1] * scale, vals[4 * k + 2] * scale,
                           vals[4 * k + 3] * scale)
                elif v < end:
                    sp.store_vector(out, v, row_lo, row_lo + cols, vals[4 * k] * scale, vals[4 * k + 1] * scale,
                                    vals[4 * k + 2] * scale, vals[4 * k + 3] * scale)
            row += clusters
            slot = 1 - slot

    return softmax_cluster


def plan_cluster_for(size: Size, shape: ClusterShape | None = None, whole: bool = False) -> Plan:
    """x once and out once; the pairs travel through shared memory (no global bytes)."""
    rows, cols = size.rows, size.cols
    shape = shape or cluster_shape(cols)
    if shape is None:
        raise ValueError(cluster_variant_refusal(cols))
    return Plan((KernelLaunch(kernel_name(cluster_kernel(shape, whole)), rows * shape.slices, shape.threads,
                              bytes_read=sm.F32 * rows * cols, bytes_written=sm.F32 * rows * cols,
                              read_bytes_in_flight=16 * shape.chunks),))


def bind_cluster(inputs, outputs, stream=0, *, shape: ClusterShape | None = None, clusters: int | None = None,
                 whole: bool = False):
    """The cluster kernel's launcher: a cluster per row (or `clusters` clusters striding over the rows).
    shape: another layout than the width's default (the benchmark and the tests compare several); whole: the
    study's v22 (cluster_kernel's docstring)."""
    x, out, rows, cols = sm._check(inputs, outputs, vectors=True)  # 16-byte accesses at every width
    if (why := cluster_variant_refusal(cols)) is not None and shape is None:
        raise ArgumentError(why)
    if x.size == 0:
        return sm._no_op
    shape = shape or cluster_shape(cols)
    grid = min(rows, clusters or rows) * shape.slices
    return cluster_launcher(cluster_kernel(shape, whole), grid, shape.threads, shape.slices,
                            (sm._flat(x, rows, cols), sm._flat(out, rows, cols), rows, cols,
                             shape.slice_vectors(cols)), stream)


sm.WORKLOAD.add(Variant("cluster", "fused", "1 kernel, each row split across a thread-block cluster of k blocks "
                                            "(k and the block from the width: the best layout measured on an H200), "
                                            "each slice in registers; the blocks swap (max, sum) through "
                                            "distributed shared memory and one cluster barrier (cc >= 9.0)",
                        plan_cluster_for, bind_cluster, lambda size: cluster_variant_refusal(size.cols)))

CLUSTER_WHOLE = Variant("cluster_whole", "fused", "the cluster kernel with a path that tests nothing for the warps "
                        "whose vectors all lie inside the row (a warp vote); unregistered: the study's v22",
                        functools.partial(plan_cluster_for, whole=True), functools.partial(bind_cluster, whole=True),
                        lambda size: cluster_variant_refusal(size.cols))

from . import cluster_exercise  # noqa: E402,F401  (lesson 04's exercise on the cluster's combine)
