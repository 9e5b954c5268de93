"""Layer normalization with each row split across a thread-block cluster: x read once and written once at any
width the cluster holds (issue 36), where `fused` stops at 16384 columns and `unfused` reads x three times.

The layout and the slices are softmax's cluster kernel's (topics/softmax/cluster.py: k blocks, each holding
its slice of the row in registers as 16-byte vectors; the layout measured for softmax, not for layernorm).
Seven versions, numbered as they were written, each changing one thing the profile blamed (lesson 08); the
registered `cluster` runs v9 (v3 until 2026-12-08, when v9 had been measured at or above it at every shape on the
H100 and at every shape the H200 ran):

  v1  two statistics one after the other, each exchanged through distributed shared memory:
          slice -> block sum -> thread p < k stores it into block p's peer_s[j] (DSMEM); cluster barrier A;
          every thread adds the k sums: the mean; slice -> block sum of (x - mean)^2 -> peer_q; barrier B;
          out = (x - mean) rstd gamma + beta, one float at a time (a warp's stores 16 bytes apart: every
          32-byte sector written in four pieces)
  v2  v1 with the last step in 16-byte stores and 16-byte gamma and beta loads; ptxas then counts 78-96
      registers a thread (the compiler hoists every chunk's weight loads): fewer resident warps
  v3  (`cluster` until v9) one exchange per row instead of two: each thread folds its elements into
      (count, mean, M2), the block merges them with Chan's rule (lesson 08's exercise, welford.py), thread
      p < k stores the block's triple into block p's shared memory, one cluster barrier, every thread merges
      the k triples; 16-byte stores as v2, with the launch bound asking for 1024 resident threads an SM
      (ptxas fits 64 registers a thread, spilling 20 bytes) so that the weights' loads cost no residency
  v4  v3 holding 16 floats a thread instead of 32 (twice the blocks a row, or twice the threads): no spill
  v5  v4 asking 1536 resident threads an SM (40 registers at the long rows' layouts, 12 bytes spilled): more
      warps, more bytes in flight
  v8  v3 with a second path for a thread whose vectors all lie inside the row (every thread but the last few
      of each block's slice, when the width is a multiple of 4): no test per element or vector, 16-byte weight
      loads and stores.
      Nsight Compute on the H200 found v3 issuing an instruction on 62% of the scheduler's cycles with DRAM at
      49%: the tests (is this element in the row?) cost issue slots a memory-bound kernel should not spend
      (v6 and v7, staged.py, came between)
  v9  (the registered `cluster`) v8 deciding a warp at a time (cuda.all_sync): at 1000 columns a warp's lanes
      split between the two paths and the warp ran both, one after the other (v8 slower than v3 there on the H100)

v1's single slot per statistic is enough: a block stores the next row's sum after barrier B, which no block
passes before every block has read this row's sums; likewise the next squared sum after the next A. v3 has
one barrier a row, so two slots (row parity), as softmax's cluster kernel. The barrier at the start makes sure
every block of the cluster has shared memory before the first store; after the last barrier a block reads
only its own.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import (MAX_CLUSTER, cluster_arrive, cluster_index, cluster_launcher, cluster_rank, cluster_sync,
                         cluster_wait, dsmem_store)
from ...clusters import cluster_refusal as clusters_refusal
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...intrinsics import load4, store4
from ...reduce import ALL_LANES, LOWEST, block_sum
from ...runtime import cuda
from ..softmax import cluster as scl
from ..softmax import split as sp
from ..softmax.workload import MAX_THREADS, require_aligned
from . import workload as ln
from .welford import welford_combine

RESIDENT_THREADS = 1024  # v3's launch bound: this many threads an SM, so ptxas fits 64 registers a thread
REGISTERED = 9  # the version `cluster` runs (the docstring)

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
    """v1, or with vector_out v2: the last step in 16-byte stores with gamma and beta in 16-byte loads, as
    softmax's cluster kernel stores, instead of one float at a time. The price: the compiler hoists every
    chunk's weight loads, and ptxas counts 56-64 -> 64-96 registers a thread (96 at 32768 columns: half the
    resident blocks)."""
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
                    a0, a1, a2, a3 = sp.load_vector(x, v, row_lo, row_hi, LOWEST)
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


@cuda.jit(device=True, inline=True)
def _in_row(v, row_lo, row_hi):
    """How many of elements 4v .. 4v + 3 are in [row_lo, row_hi) (0 to 4)."""
    return max(0, min(4 * v + 4, row_hi) - max(4 * v, row_lo))


@cuda.jit(device=True, inline=True)
def _deviation(a, mean, e, row_lo, row_hi):
    return a - mean if _inside(e, row_lo, row_hi) else _ZERO


@cuda.jit(device=True, inline=True)
def _edge_stats(x, vals, first, end, row_lo, row_hi, tid, T, C):
    """The thread's (count, mean, M2) over its vectors first + tid + k T (k < C) that start before `end`,
    testing every element against the row's ends (v3's only path; v8's for a row's last threads)."""
    s, n = _ZERO, 0
    for k in range(C):  # all loads first, each independent: 16 C bytes in flight
        v = first + tid + k * T
        if v < end:
            a0, a1, a2, a3 = sp.load_vector(x, v, row_lo, row_hi, _ZERO)
            n += _in_row(v, row_lo, row_hi)
        else:
            a0, a1, a2, a3 = _ZERO, _ZERO, _ZERO, _ZERO
        vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
        s += (a0 + a1) + (a2 + a3)
    count = np.float32(n)
    mean = s / count if n > 0 else _ZERO
    q = _ZERO  # M2 from deviations about the thread's own mean: no sum of squares to cancel
    for k in range(C):
        v = first + tid + k * T
        e = 4 * v
        if v < end:
            d0 = _deviation(vals[4 * k], mean, e, row_lo, row_hi)
            d1 = _deviation(vals[4 * k + 1], mean, e + 1, row_lo, row_hi)
            d2 = _deviation(vals[4 * k + 2], mean, e + 2, row_lo, row_hi)
            d3 = _deviation(vals[4 * k + 3], mean, e + 3, row_lo, row_hi)
            q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
    return count, mean, q


@cuda.jit(device=True, inline=True)
def _whole_stats(x, vals, v0, T, C):
    """_edge_stats for a thread whose C vectors v0 + k T all lie inside the row: no test at all."""
    s = _ZERO
    for k in range(C):
        a0, a1, a2, a3 = load4(x, v0 + k * T)
        vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = a0, a1, a2, a3
        s += (a0 + a1) + (a2 + a3)
    count = np.float32(4 * C)
    mean = s / count
    q = _ZERO
    for k in range(C):
        d0, d1, d2, d3 = vals[4 * k] - mean, vals[4 * k + 1] - mean, vals[4 * k + 2] - mean, vals[4 * k + 3] - mean
        q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3)
    return count, mean, q


@cuda.jit(device=True, inline=True)
def _whole_out(out, gamma, beta, vals, v0, row_v, m, r, T, C):
    """The row's output for such a thread: 16-byte weight loads and stores, no test (row_v: the row's first
    vector, so that vector v's weights are vector v - row_v of gamma and beta)."""
    for k in range(C):
        v = v0 + k * T
        g0, g1, g2, g3 = load4(gamma, v - row_v)
        b0, b1, b2, b3 = load4(beta, v - row_v)
        store4(out, v, (vals[4 * k] - m) * r * g0 + b0, (vals[4 * k + 1] - m) * r * g1 + b1,
               (vals[4 * k + 2] - m) * r * g2 + b2, (vals[4 * k + 3] - m) * r * g3 + b3)


@cuda.jit(device=True, inline=True)
def edge_out(out, gamma, beta, vals, first, end, row_lo, row_hi, tid, m, r, T, C):
    """The row's output for the thread's vectors that start before `end`, testing every element against the
    row's ends (v3's only path; v8's for a row's last threads)."""
    for k in range(C):
        v = first + tid + k * T
        if v < end:
            g0, g1, g2, g3 = _weights4(gamma, v, row_lo, row_hi)
            b0, b1, b2, b3 = _weights4(beta, v, row_lo, row_hi)
            sp.store_vector(out, v, row_lo, row_hi, (vals[4 * k] - m) * r * g0 + b0,
                            (vals[4 * k + 1] - m) * r * g1 + b1, (vals[4 * k + 2] - m) * r * g2 + b2,
                            (vals[4 * k + 3] - m) * r * g3 + b3)


@cuda.jit(device=True, inline=True)
def block_welford(n, mean, m2, scratch_n, scratch_m, scratch_q):
    """Every thread's (count, mean, M2) -> the block's, to every thread: a butterfly of Chan merges in each warp,
    lane 0 of each warp to `scratch_*`, one barrier, every thread merges the warps' (reduce.py's block_md, for
    this triple)."""
    lanes = 16
    while lanes > 0:
        n, mean, m2 = welford_combine(n, mean, m2, cuda.shfl_xor_sync(ALL_LANES, n, lanes),
                                      cuda.shfl_xor_sync(ALL_LANES, mean, lanes),
                                      cuda.shfl_xor_sync(ALL_LANES, m2, lanes))
        lanes //= 2
    tid = cuda.threadIdx.x
    if (tid & 31) == 0:
        scratch_n[tid >> 5], scratch_m[tid >> 5], scratch_q[tid >> 5] = n, mean, m2
    cuda.syncthreads()
    n, mean, m2 = scratch_n[0], scratch_m[0], scratch_q[0]
    for w in range(1, cuda.blockDim.x >> 5):
        n, mean, m2 = welford_combine(n, mean, m2, scratch_n[w], scratch_m[w], scratch_q[w])
    return n, mean, m2


@cuda.jit(device=True, inline=True)
def swap_triples(bn, bm, bq, peer_n, peer_m, peer_q, slot, k, j, tid):
    """The row's (count, mean, M2) from the k blocks' triples: thread p < k stores this block's triple into block
    p's peer arrays at [slot k + j] (DSMEM), the cluster barrier, every thread merges the k triples (Chan)."""
    if tid < k:
        dsmem_store(peer_n, slot * k + j, tid, bn)
        dsmem_store(peer_m, slot * k + j, tid, bm)
        dsmem_store(peer_q, slot * k + j, tid, bq)
    cluster_arrive()  # release: the stores above are visible to whoever passes the wait
    cluster_wait()
    rn, rm, rq = peer_n[slot * k], peer_m[slot * k], peer_q[slot * k]
    for p in range(1, k):
        rn, rm, rq = welford_combine(rn, rm, rq, peer_n[slot * k + p], peer_m[slot * k + p], peer_q[slot * k + p])
    return rn, rm, rq


@functools.lru_cache(maxsize=None)
def layernorm_chan_kernel(shape: scl.ClusterShape, resident: int = RESIDENT_THREADS, whole: str = ""):
    """v3: one exchange a row, of (count, mean, M2) merged by Chan's rule; 16-byte loads and stores.
    resident: the threads an SM the launch bound asks for (the compiler caps registers to fit them).
    whole: "thread" (v8): a thread whose every vector lies inside the row (cols % 4 == 0, not past its slice's
    end) takes a path with no per-element test, all but each slice's last threads when the width is a multiple
    of 4;
    "warp" (v9): a warp takes it only if all its threads can (a warp vote), so no warp runs both paths."""
    K, T, C = shape.slices, shape.threads, shape.chunks  # compile-time constants
    held, slots, warps = 4 * C, 2 * K, T // 32
    WHOLE, VOTE = whole != "", whole == "warp"

    tag = {"thread": "_v8", "warp": "_v9"}.get(whole, "_v3" + ("" if resident == RESIDENT_THREADS else f"_r{resident}"))
    @ln.row_jit(f"layernorm_cluster{K}_{T}x{C}{tag}", T, max(1, resident // T))
    def layernorm_cluster_v3(x, gamma, beta, out, rows, cols, slice_vectors, eps):
        vals = cuda.local.array(held, np.float32)
        scratch_n = cuda.shared.array(warps, np.float32)
        scratch_m = cuda.shared.array(warps, np.float32)
        scratch_q = cuda.shared.array(warps, np.float32)
        peer_n = cuda.shared.array(slots, np.float32)  # [slot K + rank]: the triples the cluster's blocks store here
        peer_m = cuda.shared.array(slots, np.float32)
        peer_q = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        cluster_sync()  # every block of the cluster has started before anyone stores into its shared memory
        row, slot = cluster_index(), 0
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            row_hi = row_lo + cols
            # whether this thread's (v9: every lane's) vectors all lie inside the row, written out at both uses
            # rather than kept in a variable: kept, v8 spills 8 bytes (ptxas), and v8's measured PTX is this one
            if VOTE:  # v9: the whole warp or none of it (every lane votes)
                warp_inside = cuda.all_sync(ALL_LANES, (cols & 3) == 0 and first + tid + (C - 1) * T < end)
            if (warp_inside if VOTE else WHOLE and (cols & 3) == 0 and first + tid + (C - 1) * T < end):
                count, mean, q = _whole_stats(x, vals, first + tid, T, C)
            else:
                count, mean, q = _edge_stats(x, vals, first, end, row_lo, row_hi, tid, T, C)
            bn, bm, bq = block_welford(count, mean, q, scratch_n, scratch_m, scratch_q)
            rn, rm, rq = swap_triples(bn, bm, bq, peer_n, peer_m, peer_q, slot, K, j, tid)
            r = _ONE / math.sqrt(rq / rn + eps)
            if (warp_inside if VOTE else WHOLE and (cols & 3) == 0 and first + tid + (C - 1) * T < end):
                _whole_out(out, gamma, beta, vals, first + tid, row_lo >> 2, rm, r, T, C)
            else:
                edge_out(out, gamma, beta, vals, first, end, row_lo, row_hi, tid, rm, r, T, C)
            row += clusters
            slot = 1 - slot

    return layernorm_cluster_v3


def cluster_refusal(cols: int) -> str | None:
    """None when `cluster` runs rows of `cols` floats here; else why not, and what to use."""
    if (why := clusters_refusal()) is not None:
        return f"{why}; use the `fused` variant (rows up to {ln.MAX_COLS} floats) or `unfused`"
    if scl.cluster_shape(cols) is None:
        return (f"a row of {cols} floats does not fit in the registers of a cluster of {MAX_CLUSTER} blocks; use "
                f"the `unfused` variant, which streams it")
    return None


def half_held(shape: scl.ClusterShape) -> scl.ClusterShape | None:
    """The layout holding half the floats a thread (v4, v5): twice the blocks a row (to 16), else twice the threads
    (to 1024; None past that)."""
    if 2 * shape.slices <= MAX_CLUSTER:
        return scl.ClusterShape(2 * shape.slices, shape.threads, shape.chunks // 2)
    if 2 * shape.threads <= MAX_THREADS:
        return scl.ClusterShape(shape.slices, 2 * shape.threads, shape.chunks // 2)
    return None


def layout(cols: int, version: int = REGISTERED) -> scl.ClusterShape | None:
    """The layout a version runs rows of `cols` floats with (None: no cluster holds them)."""
    shape = scl.cluster_shape(cols)
    if shape is None or version not in (4, 5) or shape.chunks < 2:
        return shape
    return half_held(shape)


def cluster_kernel(shape: scl.ClusterShape, version: int = REGISTERED):
    """The kernel of version 1 to 5, 8 or 9 (the module's docstring) for this layout."""
    if version >= 3:
        return layernorm_chan_kernel(shape, 1536 if version == 5 else RESIDENT_THREADS,
                                     {8: "thread", 9: "warp"}.get(version, ""))
    return layernorm_cluster_kernel(shape, vector_out=version == 2)


def plan_cluster(size: Size, version: int = REGISTERED) -> Plan:
    """x once, out once, gamma and beta for every row (from the caches); the statistics through shared memory."""
    r, c = size.rows, size.cols
    shape = layout(c, version)
    if shape is None:
        raise ValueError(version_refusal(c, version))
    kernel = cluster_kernel(shape, version)
    return Plan((KernelLaunch(kernel_name(kernel), r * shape.slices, shape.threads, bytes_read=ln.F32 * 3 * r * c,
                              bytes_written=ln.F32 * r * c, read_bytes_in_flight=16 * shape.chunks),))


def bind_cluster(inputs, outputs, stream=0, *, shape: scl.ClusterShape | None = None, clusters: int | None = None,
                 version: int = REGISTERED):
    """A cluster per row (or `clusters` clusters striding over the rows); shape: another layout than the width's;
    version: 1 to 5 or 8, the study's other kernels (the module's docstring)."""
    x, gamma, beta, out, rows, cols = ln._check(inputs, outputs)
    require_aligned(x=x, gamma=gamma, beta=beta, out=out)  # 16-byte vectors (rows need not start aligned)
    if shape is None and (why := version_refusal(cols, version)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return ln._no_op
    shape = shape or layout(cols, version)
    grid = min(rows, clusters or rows) * shape.slices
    return cluster_launcher(cluster_kernel(shape, version), grid, shape.threads, shape.slices,
                            (x.reshape(rows * cols), gamma, beta, out.reshape(rows * cols), rows, cols,
                             shape.slice_vectors(cols), np.float32(ln.EPS)), stream)


def _version(number: int, what: str) -> Variant:
    return Variant(f"cluster_v{number}", "fused", f"{what}; unregistered: the study times it beside `cluster` (v9)",
                   functools.partial(plan_cluster, version=number), functools.partial(bind_cluster, version=number),
                   lambda size: version_refusal(size.cols, number))


def version_refusal(cols: int, version: int = REGISTERED) -> str | None:
    """None when the version runs rows of `cols` floats here; else why not."""
    if (why := cluster_refusal(cols)) is not None:
        return why
    if layout(cols, version) is None:
        return (f"v{version} halves what a thread holds, and a row of {cols} floats then needs more than "
                f"{MAX_CLUSTER} blocks of {MAX_THREADS} threads; use `cluster`")
    return None


CLUSTER_V1 = _version(1, "cluster's first kernel: two exchanges a row (sum, then squared deviations), stores one "
                         "float at a time")
CLUSTER_V2 = _version(2, "v1 with 16-byte stores and 16-byte gamma and beta loads in its last step")
CLUSTER_V3 = _version(3, "`cluster` before v8 and v9: every element tested against the row's ends")
CLUSTER_V4 = _version(4, "v3 holding half the floats a thread (twice the blocks a row, or the threads): 63 "
                         "registers and no spill where v3 spills 20 bytes")
CLUSTER_V5 = _version(5, "v4 asking 1536 resident threads an SM: 40 registers, 12 bytes spilled")
CLUSTER_V8 = _version(8, "v3 with a path that tests nothing for the threads whose vectors all lie inside the row "
                         "(a width that is a multiple of 4): 16-byte loads and stores, no per-element test")

ln.WORKLOAD.add(Variant("cluster", "fused", "1 kernel, each row split across a thread-block cluster (softmax's "
                                            "layout); each block merges its slice into (count, mean, M2), the "
                                            "blocks swap them through distributed shared memory and merge them "
                                            "with Chan's rule: one cluster barrier a row; a warp whose vectors all "
                                            "lie inside the row tests none of them (v9; cc >= 9.0)",
                        plan_cluster, bind_cluster,
                        lambda size: cluster_refusal(size.cols)))
