"""Warp- and block-wide reductions, shared by the kernels that need one.

    total = warp_sum(value)              every lane of a warp passes its value; every lane gets the total
    peak  = warp_max(value)
    m, d  = warp_md(m, d)                the online-softmax pair (running max, sum of exp(x - max))
    total = block_sum(value, scratch)    every thread of a block passes its value; every thread gets the total
    peak  = block_max(value, scratch)
    m, d  = block_md(m, d, scratch_m, scratch_d)
    d     = exp_shifted_sum(vals, n, m)  a thread's d for its max m: vals[:n] = exp(vals[:n] - m), summed

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
The simulator runs the same code: its warp shuffles come from sim_device.py.

The block size must be a multiple of 32, and `scratch` a shared float32 array of at least
blockDim/32 elements. Every thread of the block must call a block
reduction (it contains barriers), and every lane of a warp a warp reduction. `scratch` may be
reused only after another barrier: other threads may still be reading it.
"""

from __future__ import annotations

import math

import numpy as np

from .runtime import cuda

LOWEST = np.float32(-np.finfo(np.float32).max)  # the identity of max, and m of an empty partial
ALL_LANES = 0xFFFFFFFF  # every lane of a warp: the mask of a *_sync call


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


# -- one value per thread ------------------------------------------------------------------

def warp_reduce(op):
    """A warp-wide reduction with the binary device function `op`."""

    @cuda.jit(device=True, inline=True)
    def reduce(value):
        v = value
        lanes = 16
        while lanes > 0:  # butterfly: afterwards every lane holds its warp's result
            v = op(v, cuda.shfl_xor_sync(ALL_LANES, v, lanes))
            lanes //= 2
        return v

    return reduce


def block_reduce(op):
    """A block-wide reduction with the binary device function `op`."""

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

@cuda.jit(device=True, inline=True)
def warp_md(m, d):
    lanes = 16
    while lanes > 0:
        m, d = md_combine(m, d, cuda.shfl_xor_sync(ALL_LANES, m, lanes), cuda.shfl_xor_sync(ALL_LANES, d, lanes))
        lanes //= 2
    return m, d


@cuda.jit(device=True, inline=True)
def exp_shifted_sum(vals, n, m):
    """vals[:n] = exp(vals[:n] - m) and their sum: d of the thread's pair (m, d). A thread with no elements
    (m = LOWEST) keeps the empty pair's d = 0, its vals untouched."""
    d = np.float32(0)
    if m > LOWEST:
        for j in range(n):
            vals[j] = math.exp(vals[j] - m)
            d += vals[j]
    return d


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
