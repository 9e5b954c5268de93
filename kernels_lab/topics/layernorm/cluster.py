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
from ...intrinsics import load4
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


@cuda.jit(device=True, inline=True)
def _weights4(w, v, row_lo, row_hi):
    """w[c], .., w[c + 3] for the row's elements 4v .. 4v + 3 (c = 4v - row_lo): one 16-byte load where the row
    starts on a vector (cols % 4 == 0) and all four are in it; else one float each, 0 outside the row."""
    e = 4 * v
    c = e - row_lo
    if (row_lo & 3) == 0 and e >= row_lo and e + 3 < row_hi:
        return load4(w, c >> 2)
    return (w[c] if _inside(e, row_lo, row_hi) else _ZERO,
            w[c + 1] if _inside(e + 1, row_lo, row_hi) else _ZERO,
            w[c + 2] if _inside(e + 2, row_lo, row_hi) else _ZERO,
            w[c + 3] if _inside(e + 3, row_lo, row_hi) else _ZERO)


@cuda.jit(device=True, inline=True)
def _normalized(x, m, r, g, b, e, row_lo, row_hi):
    """(x - m) r g + b for an element of the row; 0 for a lane past its ends (x holds the load's padding there)."""
    return (x - m) * r * g + b if _inside(e, row_lo, row_hi) else _ZERO


@functools.lru_cache(maxsize=None)
def layernorm_cluster_kernel(shape: scl.ClusterShape, vector_out: bool = False):
    """vector_out (the study's v2): the last step in 16-byte stores with gamma and beta in 16-byte loads, as
    softmax's cluster kernel stores, instead of one float at a time. The price, before any run: the compiler
    hoists every chunk's weight loads, and ptxas counts 56-64 -> 64-96 registers a thread (96 at 32768 columns:
    half the resident blocks), so the study times it beside `cluster` before it could replace it."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    held = 4 * C

    @ln.row_jit(f"layernorm_cluster{K}_{T}x{C}" + ("_v2" if vector_out else ""), T)
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
                if vector_out:  # a compile-time constant: one of the two loops is compiled
                    if v < end:
                        g0, g1, g2, g3 = _weights4(gamma, v, row_lo, row_hi)
                        b0, b1, b2, b3 = _weights4(beta, v, row_lo, row_hi)
                        e = 4 * v
                        sp.store_vector(out, v, row_lo, row_hi,
                                        _normalized(vals[4 * k], m, r, g0, b0, e, row_lo, row_hi),
                                        _normalized(vals[4 * k + 1], m, r, g1, b1, e + 1, row_lo, row_hi),
                                        _normalized(vals[4 * k + 2], m, r, g2, b2, e + 2, row_lo, row_hi),
                                        _normalized(vals[4 * k + 3], m, r, g3, b3, e + 3, row_lo, row_hi))
                else:
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


def plan_cluster(size: Size, vector_out: bool = False) -> Plan:
    """x once, out once, gamma and beta for every row (from the caches); the statistics through shared memory."""
    r, c = size.rows, size.cols
    shape = scl.cluster_shape(c)
    if shape is None:
        raise ValueError(cluster_refusal(c))
    kernel = layernorm_cluster_kernel(shape, vector_out)
    return Plan((KernelLaunch(kernel_name(kernel), r * shape.slices, shape.threads, bytes_read=ln.F32 * 3 * r * c,
                              bytes_written=ln.F32 * r * c, read_bytes_in_flight=16 * shape.chunks),))


def bind_cluster(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None,
                 vector_out: bool = False):
    """A cluster per row (or `clusters` clusters striding over the rows); shape: another layout than the width's;
    vector_out: the study's v2 (16-byte stores and weight loads)."""
    x, gamma, beta, out, rows, cols = ln._check(inputs, outputs)
    require_aligned(x=x, out=out)  # 16-byte vectors at every width (split.py's: rows need not start aligned)
    if (why := cluster_refusal(cols)) is not None and shape is None:
        raise ArgumentError(why)
    if x.size == 0:
        return ln._no_op
    shape = shape or scl.cluster_shape(cols)
    grid = min(rows, clusters or rows) * shape.slices
    return cluster_launcher(layernorm_cluster_kernel(shape, vector_out), grid, shape.threads, shape.slices,
                            (x.reshape(rows * cols), gamma, beta, out.reshape(rows * cols), rows, cols,
                             shape.slice_vectors(cols), np.float32(ln.EPS)), stream)


CLUSTER_V2 = Variant("cluster_v2", "fused", "cluster with 16-byte stores and 16-byte gamma and beta loads in its last "
                     "step (softmax's cluster kernel stores so); unregistered: the study's v2, timed beside it",
                     functools.partial(plan_cluster, vector_out=True), functools.partial(bind_cluster, vector_out=True),
                     lambda size: cluster_refusal(size.cols))

ln.WORKLOAD.add(Variant("cluster", "fused", "1 kernel, each row split across a thread-block cluster (softmax's "
                                            "layout); the blocks swap the row's sum, then its squared deviations, "
                                            "through distributed shared memory (cc >= 9.0)",
                        plan_cluster, bind_cluster,
                        lambda size: cluster_refusal(size.cols)))
