"""Layer normalization with each row split across a thread-block cluster: x read once and written once at any
width the cluster holds (issue 36), where `fused` stops at 16384 columns and `unfused` reads x three times.

The layout and the slices are softmax's cluster kernel's (topics/softmax/cluster.py: k blocks, each holding
its slice of the row in registers as 16-byte vectors; the layout measured for softmax, not for layernorm).
Two statistics, one after the other, each exchanged through distributed shared memory:

    per row:  slice -> block sum          -> thread p < k stores it into block p's peer_s[j]   (DSMEM)
              cluster barrier A; every thread adds the k sums: the mean
              slice -> block sum of (x - mean)^2 (elements of the row only) -> peer_q[j] of every block
              cluster barrier B; every thread adds the k: rstd = 1 / sqrt(var + eps)
              out = (x - mean) rstd gamma + beta   (gamma, beta read per element, from the caches)

One slot per statistic is enough: a block stores the next row's sum after barrier B, which no block passes
before every block has read this row's sums (they read them before arriving at B); likewise the next
squared sum after the next A. The barrier at the start makes sure every block of the cluster has shared
memory before the first store; after the last barrier a block reads only its own.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import MAX_CLUSTER, cluster_index, cluster_launcher, cluster_rank, cluster_sync, dsmem_store
from ...clusters import cluster_refusal as clusters_refusal
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...reduce import block_sum
from ...runtime import cuda
from ..softmax import cluster as scl
from ..softmax import split as sp
from ..softmax.workload import require_aligned
from . import workload as ln

_ZERO, _ONE = np.float32(0), np.float32(1)


@cuda.jit(device=True, inline=True)
def _inside(e, row_lo, row_hi):
    return row_lo <= e < row_hi


@functools.lru_cache(maxsize=None)
def layernorm_cluster_kernel(shape: scl.ClusterShape):
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    held = 4 * C

    @ln.row_jit(f"layernorm_cluster{K}_{T}x{C}", T)
    def layernorm_cluster(x, gamma, beta, out, rows, cols, slice_vectors, eps):
        vals = cuda.local.array(held, np.float32)
        ssum = cuda.shared.array(T, np.float32)
        ssq = cuda.shared.array(T, np.float32)
        peer_s = cuda.shared.array(K, np.float32)  # [rank]: the row's partial sums the cluster's blocks store here
        peer_q = cuda.shared.array(K, np.float32)  # [rank]: their sums of squared deviations
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        inv_cols = _ONE / np.float32(cols)
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row = cluster_index()
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            row_hi = row_lo + cols
            s = _ZERO
            for k in range(C):
                v = first + tid + k * T
                if v < end:
                    a0, a1, a2, a3 = sp.load_vector(x, v, row_lo, row_hi)
                else:
                    a0, a1, a2, a3 = _ZERO, _ZERO, _ZERO, _ZERO
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
                for i in range(4):
                    if v < end and _inside(4 * v + i, row_lo, row_hi):
                        s += vals[4 * k + i]
            bs = block_sum(s, ssum)
            if tid < K:
                dsmem_store(peer_s, j, tid, bs)
            cluster_sync()  # A: every block's sum is here
            total = _ZERO
            for p in range(K):
                total += peer_s[p]
            m = total * inv_cols
            q = _ZERO
            for k in range(C):
                v = first + tid + k * T
                for i in range(4):
                    if v < end and _inside(4 * v + i, row_lo, row_hi):
                        q += (vals[4 * k + i] - m) * (vals[4 * k + i] - m)
            bq = block_sum(q, ssq)
            if tid < K:
                dsmem_store(peer_q, j, tid, bq)
            cluster_sync()  # B: every block's squared sum is here
            total = _ZERO
            for p in range(K):
                total += peer_q[p]
            r = _ONE / math.sqrt(total * inv_cols + eps)
            for k in range(C):
                v = first + tid + k * T
                for i in range(4):
                    e = 4 * v + i
                    if v < end and _inside(e, row_lo, row_hi):
                        out[e] = (vals[4 * k + i] - m) * r * gamma[e - row_lo] + beta[e - row_lo]
            row += clusters

    return layernorm_cluster


def cluster_refusal(cols: int) -> str | None:
    """None when `cluster` runs rows of `cols` floats here; else why not, and what to use."""
    if (why := clusters_refusal()) is not None:
        return f"{why}; use the `fused` variant (rows up to {ln.MAX_COLS} floats) or `unfused`"
    if scl.cluster_shape(cols) is None:
        return (f"a row of {cols} floats does not fit in the registers of a cluster of {MAX_CLUSTER} blocks; use "
                f"the `unfused` variant, which streams it")
    return None


def plan_cluster(size: Size) -> Plan:
    """x once, out once, gamma and beta for every row (from the caches); the statistics through shared memory."""
    r, c = size.rows, size.cols
    shape = scl.cluster_shape(c)
    if shape is None:
        raise ValueError(cluster_refusal(c))
    return Plan((KernelLaunch(kernel_name(layernorm_cluster_kernel(shape)), r * shape.slices, shape.threads,
                              bytes_read=ln.F32 * 3 * r * c, bytes_written=ln.F32 * r * c,
                              read_bytes_in_flight=16 * shape.chunks),))


def bind_cluster(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None):
    """A cluster per row (or `clusters` clusters striding over the rows); shape: another layout than the width's."""
    x, gamma, beta, out, rows, cols = ln._check(inputs, outputs)
    require_aligned(x=x, out=out)  # 16-byte vectors at every width (split.py's: rows need not start aligned)
    if (why := cluster_refusal(cols)) is not None and shape is None:
        raise ArgumentError(why)
    if x.size == 0:
        return ln._no_op
    shape = shape or scl.cluster_shape(cols)
    grid = min(rows, clusters or rows) * shape.slices
    return cluster_launcher(layernorm_cluster_kernel(shape), grid, shape.threads, shape.slices,
                            (x.reshape(rows * cols), gamma, beta, out.reshape(rows * cols), rows, cols,
                             shape.slice_vectors(cols), np.float32(ln.EPS)), stream)


ln.WORKLOAD.add(Variant("cluster", "fused", "1 kernel, each row split across a thread-block cluster (softmax's "
                                            "layout); the blocks swap the row's sum, then its squared deviations, "
                                            "through distributed shared memory (cc >= 9.0)",
                        plan_cluster, bind_cluster,
                        lambda size: cluster_refusal(size.cols)))
