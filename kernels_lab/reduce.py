"""One block-wide reduction, shared by the kernels that need one.

    total = block_sum(value, scratch)     every thread passes its value; every thread gets the total
    peak  = block_max(value, scratch)

On a GPU: each warp reduces its 32 values with register shuffles (shfl.sync.bfly, five steps,
no memory, no barrier), lane 0 of each warp writes its result to `scratch`, one barrier, and
every thread combines the blockDim/32 warp results. One barrier instead of log2(blockDim):
on the H200 the consumer's reduction of 256 values took about 0.7 us as a shared-memory tree.
The simulator has no warp shuffles: there it is the tree (log2(blockDim) steps, a barrier
after each), which gives the same total up to float rounding order.

The block size must be a power of two (at least 32 on a GPU) and `scratch` a shared float32
array of blockDim elements. Every thread of the block must call it (it contains barriers).
`scratch` may be reused only after another barrier: other threads may still be reading it.
"""

from __future__ import annotations

from .runtime import ON_SIMULATOR, cuda


def block_reduce(op):
    """A block-wide reduction with the binary device function `op`."""

    if ON_SIMULATOR:
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
    def reduce(value, scratch):
        tid = cuda.threadIdx.x
        v = value
        lanes = 16
        while lanes > 0:  # butterfly: afterwards every lane holds its warp's result
            v = op(v, cuda.shfl_xor_sync(0xFFFFFFFF, v, lanes))
            lanes //= 2
        if (tid & 31) == 0:
            scratch[tid >> 5] = v
        cuda.syncthreads()
        total = scratch[0]
        for w in range(1, cuda.blockDim.x >> 5):
            total = op(total, scratch[w])
        return total

    return reduce


@cuda.jit(device=True, inline=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True, inline=True)
def _max(a, b):
    return max(a, b)


block_sum = block_reduce(_add)
block_max = block_reduce(_max)
