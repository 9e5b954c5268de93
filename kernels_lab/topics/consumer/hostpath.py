"""The host's hot path of the persistent consumer's queue, in machine code without Python's GIL.

A host thread that polls mapped memory in a Python loop holds the GIL while it spins: other
producer threads (and, on the simulator, the consumer kernel itself, which is a Python
thread) wait for it. And every Python step on the way costs tens to hundreds of nanoseconds,
a good part of a round trip of a few microseconds. So what the host does per request is
compiled by numba for the CPU (`nogil=True`):

  publish_row(rows, start, data, seq_address, mark)   the "seq" protocol: copy the payload into
        its row, then store the slot's seq word (a release store: the payload is in place first)
  publish_marked(words, start, data, mark)            the "ll" protocol: every 8-byte word is
        mark << 32 | the float's bits, so the GPU can check each word on its own
  wait_for_mark(address, mark, spins)                 spin until the high 32 bits of an int64
        the GPU writes (mark and value in one store) equal `mark`
  the ticket book (reserve, collect, close)           which tickets are handed out and collected,
        shared by every producer thread, kept with atomic instructions instead of a Python lock
  make_request(protocol)                              reserve, publish, wait, collect: one call
        per request (a call from Python into compiled code costs about 200 ns)

The ticket book is one int64 array in ordinary memory: [next ticket, closed, payload size,
then per slot the last ticket collected there]. Ticket t uses slot t % S, and only once the
slot's previous ticket (t - S) was collected, so a ticket is never taken while its slot is
busy: a full queue reserves nothing. reserve() and close() follow Dekker's pattern (each
writes with a locked instruction, a full fence on x86, then reads the other's word): either
the producer sees the book closed, or the closer sees the producer's ticket.

Every read of the answer word is an atomic acquire load (LLVM `load atomic ... acquire`): the
compiler cannot hoist it out of the loop, and reads after it are ordered after it. Every wait
is bounded: it gives up after `spins` reads, so the caller can check its timeout and whether
the GPU side is still alive. On x86 every aligned 8-byte store is atomic and stores are seen in
program order (TSO).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# the ticket book's layout, and what a request call reports
NEXT, CLOSED, SIZE, HEADER = 0, 1, 2, 3
ANSWERED, PUBLISHED, FULL, STOPPED, WRONG_SIZE = 0, 1, -1, -2, -3


def _require_address(address) -> None:
    if not isinstance(address, types.Integer):
        raise TypeError(f"an integer address is required, got {address}")


def _pointer(builder, address, bits):
    return builder.inttoptr(address, ir.IntType(bits).as_pointer())


@intrinsic
def _load_acquire_i64(typingctx, address):
    _require_address(address)

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_pointer(builder, args[0], 64), "acquire", 8)
    return types.int64(address), codegen


@intrinsic
def _store_release_i32(typingctx, address, value):
    _require_address(address)

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[1], signature.args[1], types.int32)
        builder.store_atomic(value, _pointer(builder, args[0], 32), "release", 4)
        return context.get_dummy_value()
    return types.void(address, value), codegen


@intrinsic
def _compare_exchange_i64(typingctx, address, expected, new):
    """*address == expected ? (*address = new, True) : False, atomically (lock cmpxchg)."""
    _require_address(address)

    def codegen(context, builder, signature, args):
        old_new = builder.cmpxchg(_pointer(builder, args[0], 64), args[1], args[2], "seq_cst", "seq_cst")
        return builder.extract_value(old_new, 1)
    return types.boolean(address, types.int64, types.int64), codegen


@intrinsic
def _exchange_i64(typingctx, address, value):
    _require_address(address)

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("xchg", _pointer(builder, args[0], 64), args[1], "seq_cst")
    return types.int64(address, types.int64), codegen


@intrinsic
def _float_from_low_bits(typingctx, word):
    """The float32 whose bits are the low 32 bits of an int64 (the answer word's value half)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.trunc(args[0], ir.IntType(32)), ir.FloatType())
    return types.float32(types.int64), codegen


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
def _await(address, mark, spins):
    """The answer word once its high 32 bits are `mark`, or 0 after `spins` reads (mark >= 1)."""
    for _ in range(spins):
        word = _load_acquire_i64(address)
        if (word >> 32) == mark:
            return word
    return 0


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


# -- one slot's publish step per protocol, with one signature: (rows, seq, slot, data, mark) --------

@njit(nogil=True)
def _put_marked(words, seq, slot, data, mark):
    publish_marked(words, slot * (words.size // seq.size), data, mark)


@njit(nogil=True)
def _put_row(rows, seq, slot, data, mark):
    publish_row(rows, slot * (rows.size // seq.size), data, seq.ctypes.data + 4 * slot, mark)


# -- the ticket book ---------------------------------------------------------------------------

def new_book(slots: int, size: int) -> np.ndarray:
    book = np.zeros(HEADER + slots, np.int64)
    book[SIZE] = size
    book[HEADER:] = np.arange(slots) - slots  # "collected ticket slot - S": ticket `slot` may use it
    return book


@njit(nogil=True)
def reserve(book):
    """The next ticket, or FULL (its slot's previous ticket is not collected: nothing reserved),
    or STOPPED (the book is closed)."""
    base, slots = book.ctypes.data, book.size - HEADER
    while True:
        if _load_acquire_i64(base + 8 * CLOSED) != 0:
            return STOPPED
        t = _load_acquire_i64(base + 8 * NEXT)
        if _load_acquire_i64(base + 8 * (HEADER + t % slots)) != t - slots:
            return FULL
        if _compare_exchange_i64(base + 8 * NEXT, t, t + 1):  # another producer took t: try again
            # closed meanwhile? Then close() may have read NEXT before this ticket existed: give up
            # the ticket (nothing was published) rather than publish what nobody will serve
            return STOPPED if _load_acquire_i64(base + 8 * CLOSED) != 0 else t


@njit(nogil=True)
def collect(book, t):
    """Mark ticket t collected (its slot may take ticket t + S); False if it already was."""
    slots = book.size - HEADER
    return _compare_exchange_i64(book.ctypes.data + 8 * (HEADER + t % slots), t - slots, t)


@njit(nogil=True)
def close(book):
    """No ticket after this one: returns the number of tickets handed out."""
    _exchange_i64(book.ctypes.data + 8 * CLOSED, 1)
    return _load_acquire_i64(book.ctypes.data + 8 * NEXT)


_REQUEST_SIGNATURES = {  # rows: int64 marked words ('ll') or float32 ('seq')
    kind: (types.int64[::1], rows, types.int32[::1], types.float32[::1], types.int64[::1], types.int64)
    for kind, rows in (("ll", types.int64[::1]), ("seq", types.float32[::1]))}


def _make_request(put):
    @njit(nogil=True)
    def put_and_wait(rows, seq, slot, data, mark, answers, spins):
        """Publish in the slot, then wait for its answer word (0 if not there within `spins`)."""
        put(rows, seq, slot, data, mark)
        return _await(answers.ctypes.data + 8 * slot, mark, spins)

    @njit(nogil=True)
    def request(book, rows, seq, data, answers, spins):
        """(status, ticket, value): ANSWERED (collected), PUBLISHED (not answered within `spins`),
        FULL / STOPPED / WRONG_SIZE (nothing reserved, ticket -1)."""
        if data.size != book[SIZE]:
            return WRONG_SIZE, -1, np.float32(0)
        t = reserve(book)
        if t < 0:
            return t, -1, np.float32(0)
        slot = t % seq.size
        word = put_and_wait(rows, seq, slot, data, t + 1, answers, spins)
        if word == 0:
            return PUBLISHED, t, np.float32(0)
        collect(book, t)  # only this call holds ticket t
        return ANSWERED, t, _float_from_low_bits(word)

    return request, put_and_wait


_REQUESTS = {"ll": _make_request(_put_marked), "seq": _make_request(_put_row)}


def make_request(protocol: str):
    """(request, put_and_wait) for a protocol, compiled for exactly one signature: a payload that
    is not a C-contiguous float32 vector raises TypeError at the call (the caller checks it and
    copies) instead of compiling another version on the hot path."""
    kind = "ll" if protocol == "ll" else "seq"
    request, put_and_wait = _REQUESTS[kind]
    if not request.signatures:
        request.compile(_REQUEST_SIGNATURES[kind])
        request.disable_compile()
    return request, put_and_wait


def word_address(words: np.ndarray, index: int) -> int:
    """The address of words[index] in an array that will not move (mapped memory)."""
    if words.dtype not in (np.int32, np.int64) or not words.flags.c_contiguous:
        raise ValueError(f"a C-contiguous int32 or int64 array is required, got {words.dtype}")
    if not 0 <= index < words.size:
        raise IndexError(f"index {index} outside 0..{words.size - 1}")
    return words.ctypes.data + words.itemsize * index


def wait_for_mark(address: int, mark: int, spins: int = 1 << 16) -> bool:
    """Spin (GIL released) until the high 32 bits of the int64 at `address` equal `mark`."""
    return _await(address, mark, spins) != 0


def warm_up(protocol: str) -> None:
    """Compile the hot path now (a few seconds), not inside the first timed request."""
    _, put_and_wait = make_request(protocol)
    rows = np.zeros(4, np.int64 if protocol == "ll" else np.float32)
    answers = np.zeros(2, np.int64)
    put_and_wait(rows, np.zeros(2, np.int32), 0, np.zeros(1, np.float32), 1, answers, 1)
    wait_for_mark(word_address(answers, 0), 1, 1)
    book = new_book(2, 1)
    reserve(book)
    collect(book, 0)
    close(book)
