"""Waiting on the host for a word the GPU writes, without holding Python's GIL.

A host thread that polls mapped memory in a Python loop holds the GIL while it spins: other
producer threads (and, on the simulator, the consumer kernel itself, which is a Python
thread) wait for it. `wait_for_mark` spins in machine code compiled by numba for the CPU
(`nogil=True`), so they all run while it waits.

The word is an int64 whose high 32 bits are a mark (the GPU writes mark and value in one
8-byte store). Each read is an atomic acquire load (LLVM `load atomic ... acquire`): the
compiler cannot hoist it out of the loop, and reads after it (the value) are ordered after it.
The wait is bounded: it gives up after `spins` reads and returns False, so the caller can
check its timeout and whether the GPU side is still alive.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _load_acquire_i64(typingctx, address):
    if not isinstance(address, types.Integer):
        raise TypeError(f"an integer address is required, got {address}")

    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(address), codegen


@njit(nogil=True)
def _spin(address: int, mark: int, spins: int) -> bool:
    for _ in range(spins):
        if (_load_acquire_i64(address) >> 32) == mark:
            return True
    return False


def word_address(words: np.ndarray, index: int) -> int:
    """The address of words[index] in an int64 array that will not move (mapped memory)."""
    if words.dtype != np.int64 or not words.flags.c_contiguous:
        raise ValueError(f"a C-contiguous int64 array is required, got {words.dtype}")
    if not 0 <= index < words.size:
        raise IndexError(f"index {index} outside 0..{words.size - 1}")
    return words.ctypes.data + 8 * index


def wait_for_mark(address: int, mark: int, spins: int = 1 << 16) -> bool:
    """Spin (GIL released) until the high 32 bits of the int64 at `address` equal `mark`."""
    return _spin(address, mark, spins)


def warm_up() -> None:
    """Compile the spin loop now (about a second), not inside the first timed wait."""
    probe = np.zeros(1, np.int64)
    _spin(word_address(probe, 0), 1, 1)
