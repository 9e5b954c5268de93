"""Warp- and block-wide reductions, shared by the kernels that need one.

    total = warp_sum(value)              every lane of a warp passes its value; every lane gets the total
    peak  = warp_max(value)
    m, d  = warp_md(m, d)                the online-softmax pair (running max, sum of exp(x - max))
    total = block_sum(value, scratch)    every thread of a block passes its value; every thread gets the total
    peak  = block_max(value, scratch)
    m, d  = block_md(m, d, scratch_m, scratch_d)

The online-softmax pair (Milakov & Gimelshein 2018): a partial result over some elements is
m = their max and d = sum of exp(x - m). Two partials combine as
    m' = max(m1, m2),   d' = d1 exp(m1 - m') + d2 exp(m2 - m')
which is the same rule as adding one element x (the partial m = x, d = 1). Start from
m = LOWEST, d = 0 (LOWEST is finite, so fastmath's no-infinity assumption holds).

On a GPU: a warp reduces its 32 values with register shuffles (shfl.sync.bfly, five steps,
no memory, no barrier); a block reduction does that, lane 0 of each warp writes its result to
`scratch`, one barrier, and every thread combines the blockDim/32 warp results. One barrier
instead of log2(blockDim): on the H200 the consumer's reduction of 256 values took about
0.7 us as a shared-memory tree.
The simulator has no warp shuffles. There both go through shared memory: each thread writes
its value, a barrier, each thread combines its warp's 32 (or the block's) values itself, a
barrier. The results are the same up to float rounding order, but on the simulator a warp
reduction is a BLOCK barrier: every thread of the block must call it, as often as the others.

The block size must be a multiple of 32, and `scratch` a shared float32 array of blockDim
elements (a GPU uses the first blockDim/32). Every thread of the block must call a block
reduction (it contains barriers), and every lane of a warp a warp reduction. `scratch` may be
reused only after another barrier: other threads may still be reading it.
"""

from __future__ import annotations

import math

import numpy as np

from .runtime import ON_SIMULATOR, cuda

LOWEST = np.float32(-np.finfo(np.float32).max)  # the identity of max, and m of an empty partial
_ALL_LANES = 0xFFFFFFFF
_SIM_THREADS = 1024  # the most threads a block can have: the simulator's warp scratch holds one value each


@cuda.jit(device=True, inline=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True, inline=True)
def _max(a, b):
    return max(a, b)


@cuda.jit(device=True, inline=True)
def md_combine(m1, d1, m2, d2):
    """Two online-softmax partials (max, sum of exp(x - max)) -> the partial of their union."""
    m = max(m1, m2)
    return m, d1 * math.exp(m1 - m) + d2 * math.exp(m2 - m)


# -- the simulator: every thread folds the values it needs after one barrier -------------------
# A barrier costs the simulator about 0.2 ms per thread of the block, so instead of a tree
# (log2(blockDim) + 1 barriers) each thread writes its value, one barrier, each thread combines
# the values of its warp (or block) itself, and one more barrier before the slots are reused.
# The combining calls the op's plain Python function: a simulated device call costs ~17 us.

def _sim_fold(op, block_wide: bool):
    op = op.py_func

    @cuda.jit(device=True, inline=True)
    def fold(value, scratch):
        tid = cuda.threadIdx.x
        scratch[tid] = value
        cuda.syncthreads()
        first, count = (0, cuda.blockDim.x) if block_wide else (tid - (tid & 31), 32)
        total = scratch[first]
        for j in range(first + 1, first + count):
            total = op(total, scratch[j])
        cuda.syncthreads()  # the slots may be written again as soon as this returns
        return total
    return fold


def _sim_fold_md(block_wide: bool):
    combine = md_combine.py_func

    @cuda.jit(device=True, inline=True)
    def fold(m, d, scratch_m, scratch_d):
        tid = cuda.threadIdx.x
        scratch_m[tid] = m
        scratch_d[tid] = d
        cuda.syncthreads()
        first, count = (0, cuda.blockDim.x) if block_wide else (tid - (tid & 31), 32)
        tm, td = scratch_m[first], scratch_d[first]
        for j in range(first + 1, first + count):
            tm, td = combine(tm, td, scratch_m[j], scratch_d[j])
        cuda.syncthreads()
        return tm, td
    return fold


# -- one value per thread ------------------------------------------------------------------

def warp_reduce(op):
    """A warp-wide reduction with the binary device function `op`."""

    if ON_SIMULATOR:
        fold = _sim_fold(op, block_wide=False)

        @cuda.jit(device=True, inline=True)
        def reduce(value):
            return fold(value, cuda.shared.array(_SIM_THREADS, np.float32))
        return reduce

    @cuda.jit(device=True, inline=True)
    def reduce(value):
        v = value
        lanes = 16
        while lanes > 0:  # butterfly: afterwards every lane holds its warp's result
            v = op(v, cuda.shfl_xor_sync(_ALL_LANES, v, lanes))
            lanes //= 2
        return v

    return reduce


def block_reduce(op):
    """A block-wide reduction with the binary device function `op`."""

    if ON_SIMULATOR:
        return _sim_fold(op, block_wide=True)

    in_warp = warp_reduce(op)

    @cuda.jit(device=True, inline=True)
    def reduce(value, scratch):
        tid = cuda.threadIdx.x
        v = in_warp(value)
        if (tid & 31) == 0:
            scratch[tid >> 5] = v
        cuda.syncthreads()
        total = scratch[0]
        for w in range(1, cuda.blockDim.x >> 5):
            total = op(total, scratch[w])
        return total

    return reduce


warp_sum = warp_reduce(_add)
warp_max = warp_reduce(_max)
block_sum = block_reduce(_add)
block_max = block_reduce(_max)


# -- the online-softmax pair (m, d) per thread -----------------------------------------------

if ON_SIMULATOR:
    _warp_fold_md = _sim_fold_md(block_wide=False)
    block_md = _sim_fold_md(block_wide=True)

    @cuda.jit(device=True, inline=True)
    def warp_md(m, d):
        lanes_m = cuda.shared.array(_SIM_THREADS, np.float32)  # one line each: the simulator tells
        lanes_d = cuda.shared.array(_SIM_THREADS, np.float32)  # shared arrays apart by source line
        return _warp_fold_md(m, d, lanes_m, lanes_d)

else:
    @cuda.jit(device=True, inline=True)
    def warp_md(m, d):
        lanes = 16
        while lanes > 0:
            m, d = md_combine(m, d, cuda.shfl_xor_sync(_ALL_LANES, m, lanes), cuda.shfl_xor_sync(_ALL_LANES, d, lanes))
            lanes //= 2
        return m, d

    @cuda.jit(device=True, inline=True)
    def block_md(m, d, scratch_m, scratch_d):
        tid = cuda.threadIdx.x
        wm, wd = warp_md(m, d)
        if (tid & 31) == 0:
            scratch_m[tid >> 5] = wm
            scratch_d[tid >> 5] = wd
        cuda.syncthreads()
        tm, td = scratch_m[0], scratch_d[0]
        for w in range(1, cuda.blockDim.x >> 5):
            tm, td = md_combine(tm, td, scratch_m[w], scratch_d[w])
        return tm, td
