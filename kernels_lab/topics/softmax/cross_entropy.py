"""Cross-entropy over the rows of a matrix of logits: the second row reduction at vocabulary widths.

    loss[r] = log sum_j exp(x[r, j]) - x[r, label[r]] = m_r + log d_r - x[r, label[r]]

with (m_r, d_r) the online pair of row r (reduce.py): its max and the sum of exp(x - max). Unlike
softmax, nothing is written per element: one pass over x gives the pair, and the loss needs only the
pair and one element of the row. So a row split across k blocks needs no block to WAIT: each block
folds its slice into a pair and publishes it (pair, fence, then an atomic count of the row's arrivals),
and the block that arrives last combines the k pairs and writes the loss (the threadfence reduction
of the CUDA programming guide). Softmax's split (softmax_split.py) must hand the row's pair back to
every block, which must therefore all be resident at once; here any grid works, on the simulator's
one-block-at-a-time schedule too.

    variant  launches  bytes                                   grid
    fused    1         x once, 16 bytes a row (label, x[label],  a block per row (k = 1)
                       loss, the count's reset) + 20 per block
    split    1         as fused, + 8 per slice pair read        k blocks per row, k from the width as
                                                                softmax's split

Each block streams its slice in 16-byte vectors (softmax_split's walker: odd widths too), STREAM
vectors a thread loaded before any is used. Labels are int32, checked against the width at bind time.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND
from ...core import Axis, KernelLaunch, Plan, Size, Tolerance, Variant, Workload, kernel_name, register
from ...reduce import LOWEST, block_md, md_combine
from ...rows import row_jit
from ...runtime import cuda
from . import workload as sm
from . import split as sp
from .split import load_vector, slice_bounds

STREAM = 4  # vectors a thread loads before it folds them: 64 bytes in flight
_ZERO = np.float32(0)


def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float64)
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    return {"loss": lse - x[np.arange(x.shape[0]), inputs["labels"]]}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # softmax's logits (rows near +-100 among them) and a label per row anywhere in the row, the
    # first and last columns included
    x = sm.make_inputs(size, rng)["x"]
    labels = rng.integers(0, size.cols, size.rows).astype(np.int32)
    labels[: min(2, size.rows)] = (0, size.cols - 1)[: min(2, size.rows)]
    return {"x": x, "labels": labels}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"loss": ((size.rows,), np.float32)}


def shape_for(cols: int, split: bool) -> sp.SplitShape:
    """k blocks per row (split: as many as softmax's split takes, at most MAX_SLICES; fused: one), each
    streaming its slice STREAM vectors a thread at a time (nothing is held: any slice length works)."""
    slices = 1
    if split:
        found = sp.split_shape(cols)
        slices = found.slices if found is not None else sp.MAX_SLICES
    return sp.SplitShape(slices, sp.SLICE_THREADS, STREAM, prefetch=False)


@functools.lru_cache(maxsize=None)
def slice_fold(shape: sp.SplitShape):
    """A device function: the online pair (m, d) of the vectors [first, end) of a row starting at row_lo,
    walked by this block's threads, U vectors a thread loaded before any is used (nothing is held)."""
    T, U = shape.threads, shape.chunks  # compile-time constants
    held = sm.CHUNK * U

    @cuda.jit(device=True, inline=True)
    def fold(x, row_lo, first, end, cols):
        vals = cuda.local.array(held, np.float32)
        m, d = LOWEST, _ZERO
        v0 = first + cuda.threadIdx.x
        while v0 < end:
            for u in range(U):  # every load before any use
                v = v0 + u * T
                if v < end:
                    vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = load_vector(x, v, row_lo,
                                                                                          row_lo + cols, LOWEST)
                else:
                    vals[4 * u], vals[4 * u + 1], vals[4 * u + 2], vals[4 * u + 3] = LOWEST, LOWEST, LOWEST, LOWEST
            cm = LOWEST
            for j in range(held):
                cm = max(cm, vals[j])
            if cm > LOWEST:  # a group of padding only is the empty pair
                cd = _ZERO
                for j in range(held):
                    cd += math.exp(vals[j] - cm)
                m, d = md_combine(m, d, cm, cd)
            v0 += U * T
        return m, d

    return fold


@functools.lru_cache(maxsize=None)
def ce_kernel(shape: sp.SplitShape):
    K, T, U = shape.slices, shape.threads, shape.chunks  # compile-time constants
    fold = slice_fold(shape)

    @row_jit(f"cross_entropy{K}_{T}x{U}", T)
    def ce(x, labels, loss, part, count, cols, slice_vectors):
        scratch_m = cuda.shared.array(T, np.float32)
        scratch_d = cuda.shared.array(T, np.float32)
        tid, b = cuda.threadIdx.x, cuda.blockIdx.x
        row = b // K
        row_lo, first, end = slice_bounds(row, cols, slice_vectors, b % K)
        m, d = fold(x, row_lo, first, end, cols)
        bm, bd = block_md(m, d, scratch_m, scratch_d)
        if tid == 0:
            part[2 * b] = bm
            part[2 * b + 1] = bd
            cuda.threadfence()  # the pair is visible GPU-wide before the count says it is there
            if cuda.atomic.add(count, row, 1) == K - 1:  # the row's last block: every pair is in
                cuda.threadfence()
                rm, rd = part[2 * row * K], part[2 * row * K + 1]
                for p in range(1, K):
                    rm, rd = md_combine(rm, rd, part[2 * (row * K + p)], part[2 * (row * K + p) + 1])
                loss[row] = rm + math.log(rd) - x[row_lo + labels[row]]
                count[row] = 0  # ready for the next launch

    return ce


def _plan(split: bool):
    def plan(size: Size) -> Plan:
        r, c = size.rows, size.cols
        shape = shape_for(c, split)
        blocks = r * shape.slices
        # x once; per block: its pair (8 written), the count's atomic add (4 read, 4 written); per row: the
        # k pairs (8 k), its label and x[label] read, the loss and the count's reset written
        return Plan((KernelLaunch(kernel_name(ce_kernel(shape)), blocks, shape.threads,
                                  bytes_read=sm.F32 * (r * c + BACKEND.atomic_add_reads * blocks) + r * (8 * shape.slices + 8),
                                  bytes_written=12 * blocks + 8 * r, read_bytes_in_flight=16 * STREAM),))
    return plan


def checked(inputs, outputs) -> tuple[Any, Any, Any, int, int]:
    """x, labels and loss as device arrays, checked (every label a column of x), and x's shape."""
    x = device_array("x", inputs["x"], np.float32, (None, None))
    rows, cols = x.shape
    labels = device_array("labels", inputs["labels"], np.int32, (rows,))
    loss = device_array("loss", outputs["loss"], np.float32, (rows,))
    sm.require_aligned(x=x)  # the vector walker's 16-byte accesses
    if x.size:
        host = labels.copy_to_host()
        if host.min() < 0 or host.max() >= cols:
            bad = int(np.flatnonzero((host < 0) | (host >= cols))[0])
            raise ArgumentError(f"labels: labels[{bad}] = {host[bad]} is not a column of x (0 .. {cols - 1})")
    return x, labels, loss, rows, cols


def _bind(split: bool):
    def bind(inputs, outputs, stream=0):
        x, labels, loss, rows, cols = checked(inputs, outputs)
        if x.size == 0:
            return sm._no_op
        shape = shape_for(cols, split)
        blocks = rows * shape.slices
        part = cuda.device_array(2 * blocks, np.float32, stream=stream)
        count = cuda.to_device(np.zeros(rows, np.int32), stream=stream)
        configured = ce_kernel(shape)[blocks, shape.threads, stream]
        xf = sm._flat(x, rows, cols)
        return lambda: configured(xf, labels, loss, part, count, cols, shape.slice_vectors(cols))
    return bind


WORKLOAD = register(Workload(
    name="cross_entropy",
    about="loss[r] = logsumexp(x[r]) - x[r, label[r]] over the rows of float32 logits (int32 labels)",
    axes=(Axis("rows", sim=5, gpu=4096, sim_sweep=(1,), about="independent rows", unit="rows"),
          Axis("cols", sim=67, gpu=50257, sweep=(1024, 8192, 32768, 50257, 131072), sim_sweep=(3, 1500),
               about="row length (the vocabulary)")),
    make_inputs=make_inputs,
    reference=reference,
    output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-5, atol=1e-4),
))
WORKLOAD.add(Variant("fused", "fused", "1 kernel, a block per row: the online (max, sum) pair in one pass over x, "
                                       "16-byte accesses", _plan(False), _bind(False)))
WORKLOAD.add(Variant("split", "fused", "1 kernel, k blocks per row (k as softmax's split): each publishes its "
                                       "pair, the row's last block to arrive combines them (no block waits)",
                     _plan(True), _bind(True)))

from . import cross_entropy_cluster  # noqa: E402,F401  (registers the cluster variant)
