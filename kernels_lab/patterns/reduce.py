"""One block-wide reduction, shared by the kernels that need one.

    total = block_sum(value, scratch)     every thread passes its value; every thread gets the total
    peak  = block_max(value, scratch)

A tree in shared memory: log2(blockDim) steps, a barrier after each, so the block size must
be a power of two and `scratch` a shared float32 array of blockDim elements. Every thread of
the block must call it (it contains barriers). `scratch` may be reused only after another
barrier: thread 0 may still be reading scratch[0].
The simulator has no warp shuffles, which is why this is the shared-memory version.
"""

from __future__ import annotations

from ..runtime import cuda


def block_reduce(op):
    """A block-wide reduction with the binary device function `op`."""

    @cuda.jit(device=True, inline=True)
    def reduce(value, scratch):
        tid = cuda.threadIdx.x
        scratch[tid] = value
        cuda.syncthreads()
        step = cuda.blockDim.x // 2
        while step > 0:
            if tid < step:
                scratch[tid] = op(scratch[tid], scratch[tid + step])
            cuda.syncthreads()
            step //= 2
        return scratch[0]

    return reduce


@cuda.jit(device=True, inline=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True, inline=True)
def _max(a, b):
    return max(a, b)


block_sum = block_reduce(_add)
block_max = block_reduce(_max)
