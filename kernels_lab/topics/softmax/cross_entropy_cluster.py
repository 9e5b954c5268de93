"""Cross-entropy with each row split across a thread-block cluster: the k pairs meet in block 0's shared memory.

cross_entropy.py's `split` publishes each block's (max, sum) pair in global memory with a fence and an atomic
count, and the row's last block to arrive combines them. In a cluster (kernels_lab/clusters.py, compute
capability >= 9.0) each block stores its pair straight into the shared memory of the cluster's block 0
(st.shared::cluster) and one cluster barrier replaces the fence, the count and its reset: block 0 then holds
all k pairs and writes the loss. x is read once; nothing else touches global memory but the label's logit and
the loss.

    cluster c = blocks c k .. c k + k - 1, rows c, c + C, ...; block rank j streams slice j (split.py's vectors)
    per row: the slice folded into (m, d) (cross_entropy.slice_fold) -> block pair -> block 0's peer[slot, j]
             cluster barrier; block 0, thread 0: loss = M + log D - x[label]

Two slots (row parity), as in softmax's cluster kernel: a block stores into a slot again two rows later,
after the barrier of the row between, which block 0 reaches only after it has read that slot.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...arrays import ArgumentError
from ...clusters import cluster_arrive, cluster_index, cluster_launcher, cluster_rank, cluster_sync, cluster_wait, \
    dsmem_store
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...reduce import block_md, md_combine
from ...rows import row_jit
from ...runtime import cuda
from . import workload as sm  # first: it registers the variants of split.py, which needs it whole
from . import cluster as cl  # noqa: I001
from . import cross_entropy as ce
from . import split as sp


def ce_cluster_shape(cols: int) -> sp.SplitShape:
    """k blocks per row by softmax's portable rule (at most 8: its layouts were not measured apart), each streaming
    its slice as cross_entropy's blocks."""
    return sp.SplitShape(cl.portable_slices(cols), sp.SLICE_THREADS, ce.STREAM)


def ce_cluster_refusal(cols: int) -> str | None:
    """Why the cluster cross-entropy cannot run here (a GPU below compute capability 9.0), or None."""
    if (why := cl.cluster_refusal()) is not None:
        return f"{why}; use the `split` variant"
    return None


@functools.lru_cache(maxsize=None)
def ce_cluster_kernel(shape: sp.SplitShape):
    K, T, U = shape.slices, shape.threads, shape.chunks  # compile-time constants
    slots = 2 * K  # array sizes must be constants, not expressions
    fold = ce.slice_fold(shape)

    @row_jit(f"cross_entropy_cluster{K}_{T}x{U}", T)
    def ce_cluster(x, labels, loss, rows, cols, slice_vectors):
        scratch_m = cuda.shared.array(T, np.float32)
        scratch_d = cuda.shared.array(T, np.float32)
        peer_m = cuda.shared.array(slots, np.float32)  # block 0's: [slot K + rank], stored by the cluster's blocks
        peer_d = cuda.shared.array(slots, np.float32)
        tid, j = cuda.threadIdx.x, cluster_rank()
        clusters = cuda.gridDim.x // K
        cluster_sync()  # block 0 has started before anyone stores into its shared memory
        row, slot = cluster_index(), 0
        while row < rows:  # uniform across the cluster: every thread reaches every barrier
            row_lo, first, end = sp.slice_bounds(row, cols, slice_vectors, j)
            m, d = fold(x, row_lo, first, end, cols)
            bm, bd = block_md(m, d, scratch_m, scratch_d)
            if tid == 0:
                dsmem_store(peer_m, slot * K + j, 0, bm)
                dsmem_store(peer_d, slot * K + j, 0, bd)
            cluster_arrive()  # release: the stores above are visible to block 0 once it passes the wait
            cluster_wait()
            if j == 0 and tid == 0:
                rm, rd = peer_m[slot * K], peer_d[slot * K]
                for p in range(1, K):
                    rm, rd = md_combine(rm, rd, peer_m[slot * K + p], peer_d[slot * K + p])
                loss[row] = rm + math.log(rd) - x[row_lo + labels[row]]
            row += clusters
            slot = 1 - slot

    return ce_cluster


def plan_ce_cluster(size: Size) -> Plan:
    """x once; per row its label and x[label] read, the loss written; the pairs travel through shared memory."""
    r, c = size.rows, size.cols
    shape = ce_cluster_shape(c)
    return Plan((KernelLaunch(kernel_name(ce_cluster_kernel(shape)), r * shape.slices, shape.threads,
                              bytes_read=sm.F32 * (r * c + 2 * r), bytes_written=sm.F32 * r,
                              read_bytes_in_flight=16 * shape.chunks),))


def bind_ce_cluster(inputs, outputs, stream=0):
    x, labels, loss, rows, cols = ce.checked(inputs, outputs)
    if (why := ce_cluster_refusal(cols)) is not None:
        raise ArgumentError(why)
    if x.size == 0:
        return sm._no_op
    shape = ce_cluster_shape(cols)
    return cluster_launcher(ce_cluster_kernel(shape), rows * shape.slices, shape.threads, shape.slices,
                            (sm._flat(x, rows, cols), labels, loss, rows, cols, shape.slice_vectors(cols)), stream)


ce.WORKLOAD.add(Variant("cluster", "fused", "1 kernel, each row streamed by a thread-block cluster of k blocks "
                                            "(k by softmax's portable rule); the pairs meet in block 0's shared memory "
                                            "(DSMEM) at one cluster barrier: no atomics, no counters (cc >= 9.0)",
                        plan_ce_cluster, bind_ce_cluster, lambda size: ce_cluster_refusal(size.cols)))
