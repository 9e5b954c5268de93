"""The host's hot path of the persistent consumer's queue, in machine code without Python's GIL.

A host thread that polls mapped memory in a Python loop holds the GIL while it spins: other
producer threads (and, on the simulator, the consumer kernel itself, which is a Python
thread) wait for it. And every numpy call on the way costs a few hundred nanoseconds, which
is a good part of a round trip of a few microseconds. So the two things the host does per
request are compiled by numba for the CPU (`nogil=True`):

  publish_row(rows, start, data, seq_address, mark)   the "seq" protocol: copy the payload into
        its row, then store the slot's seq word (a release store: the payload is in place first)
  publish_marked(words, start, data, mark)            the "ll" protocol: every 8-byte word is
        mark << 32 | the float's bits, so the GPU can check each word on its own
  wait_for_mark(address, mark, spins)                 spin until the high 32 bits of an int64
        the GPU writes (mark and value in one store) equal `mark`
  ask_row(...), ask_marked(...)                       publish, then wait: one call per request
        (every call from Python into compiled code costs a few hundred nanoseconds)

Every read of the answer word is an atomic acquire load (LLVM `load atomic ... acquire`): the
compiler cannot hoist it out of the loop, and reads after it (the value) are ordered after it.
The wait is bounded: it gives up after `spins` reads and returns False, so the caller can
check its timeout and whether the GPU side is still alive.
On x86 every aligned 8-byte store is atomic and stores are seen in program order (TSO).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _require_address(address) -> None:
    if not isinstance(address, types.Integer):
        raise TypeError(f"an integer address is required, got {address}")


@intrinsic
def _load_acquire_i64(typingctx, address):
    _require_address(address)

    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(address), codegen


@intrinsic
def _store_release_i32(typingctx, address, value):
    _require_address(address)

    def codegen(context, builder, signature, args):
        ptr = builder.inttoptr(args[0], ir.IntType(32).as_pointer())
        builder.store_atomic(context.cast(builder, args[1], signature.args[1], types.int32), ptr, "release", 4)
        return context.get_dummy_value()
    return types.void(address, value), codegen


@intrinsic
def _memcpy(typingctx, dst, src, nbytes):
    """llvm.memcpy: the C library's copy (a loop over array elements in numba runs at a quarter of it)."""
    for a in (dst, src, nbytes):
        _require_address(a)

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], i8p), builder.inttoptr(args[1], i8p), args[2], 1)
        return context.get_dummy_value()
    return types.void(dst, src, nbytes), codegen


@njit(nogil=True)
def _spin(address: int, mark: int, spins: int) -> bool:
    for _ in range(spins):
        if (_load_acquire_i64(address) >> 32) == mark:
            return True
    return False


@njit(nogil=True)
def publish_row(rows, start, data, seq_address, mark):
    """rows[start:start + data.size] = data, then the seq word = mark (release: in that order)."""
    if start < 0 or start + data.size > rows.size:
        raise IndexError("publish_row: the payload does not fit the row")
    _memcpy(rows.ctypes.data + 4 * start, data.ctypes.data, 4 * data.size)
    _store_release_i32(seq_address, mark)


@njit(nogil=True)
def publish_marked(words, start, data, mark):
    """words[start + i] = mark << 32 | bits(data[i]); an odd-sized payload's padding word too."""
    if start < 0 or start + data.size + (data.size & 1) > words.size:
        raise IndexError("publish_marked: the payload does not fit the row")
    # unsigned words from index 0 of a view: a loop the compiler vectorizes (no negative-index
    # wraparound to check), three times faster than indexing words[start + i]
    row = words[start:start + data.size + (data.size & 1)].view(np.uint64)
    bits = data.view(np.uint32)
    high = np.uint64(mark) << np.uint64(32)
    for i in range(data.size):
        row[i] = high | np.uint64(bits[i])
    if data.size & 1:
        row[data.size] = high  # the 16-byte line's second word: value 0.0, marked


@njit(nogil=True)
def ask_row(rows, start, data, seq_address, mark, answer_address, spins):
    publish_row(rows, start, data, seq_address, mark)
    return _spin(answer_address, mark, spins)


@njit(nogil=True)
def ask_marked(words, start, data, mark, answer_address, spins):
    publish_marked(words, start, data, mark)
    return _spin(answer_address, mark, spins)


def word_address(words: np.ndarray, index: int) -> int:
    """The address of words[index] in an array that will not move (mapped memory)."""
    if words.dtype not in (np.int32, np.int64) or not words.flags.c_contiguous:
        raise ValueError(f"a C-contiguous int32 or int64 array is required, got {words.dtype}")
    if not 0 <= index < words.size:
        raise IndexError(f"index {index} outside 0..{words.size - 1}")
    return words.ctypes.data + words.itemsize * index


def wait_for_mark(address: int, mark: int, spins: int = 1 << 16) -> bool:
    """Spin (GIL released) until the high 32 bits of the int64 at `address` equal `mark`."""
    return _spin(address, mark, spins)


def warm_up() -> None:
    """Compile the hot path now (a few seconds), not inside the first timed request."""
    probe = np.zeros(4, np.int64)
    data = np.zeros(3, np.float32)
    answer = word_address(probe, 3)
    _spin(answer, 1, 1)
    publish_marked(probe, 0, data, 1)
    ask_marked(probe, 0, data, 1, answer, 1)
    rows = np.zeros(4, np.float32)
    seq = word_address(probe.view(np.int32), 0)
    publish_row(rows, 0, data, seq, 1)
    ask_row(rows, 0, data, seq, 1, answer, 1)
