"""What the row kernels (softmax, layernorm, cross-entropy) share besides their walkers: naming a kernel
with its layout, and the power-of-two sizes their layouts are made of (rnn's padded tile too).

    @row_jit("layernorm_fused_warp32x4_b128_vec4", 128)   cuda.jit with fastmath and the block as launch bound
    @row_jit("layernorm_cluster2_512x8_v3", 512, 2)       ... and 2 blocks of it resident an SM (registers capped)
    pow2_at_least(5) == 8                                   threads and chunks come in powers of two
    access_tag(vector)                                      "vec4" (16-byte accesses) or "scalar", for names
"""

from __future__ import annotations

from typing import Callable

from .backend import BACKEND


def row_jit(name: str, block: int, min_blocks: int = 0) -> Callable:
    """cuda.jit with fastmath (exp -> ex2.approx), and the block size as a launch bound: at 1024
    threads the compiler must fit 64 registers a thread or the launch is refused. min_blocks: also ask
    that many blocks resident an SM (the compiler caps registers a thread to fit them)."""
    def wrap(fn):
        fn.__name__ = fn.__qualname__ = name
        return BACKEND.jit(fn, fastmath=True, launch_bounds=(block, min_blocks) if min_blocks else block)
    return wrap


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def access_tag(vector: bool) -> str:
    return "vec4" if vector else "scalar"
