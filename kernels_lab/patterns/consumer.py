"""Lesson: a persistent consumer. The host feeds a queue; a kernel that never exits drains it.

The job, per request: a dot product of a payload (P float32, written by the host) with a
weight vector that lives on the GPU for the whole run: result = payload . w.

    one launch per request   the host writes the payload, launches, waits: ~30 us of launch
                             and synchronisation around a microsecond of work
    batched launch           k requests per launch: the launch cost is shared, the first
                             request waits for the last
    persistent consumer      one launch at start; each block polls the queue in mapped host
                             memory, serves a request in a few microseconds, and waits again

The queue (all cuda.mapped_array, so host and GPU see the same bytes):
    seq[S]       'seq' protocol: ticket + 1, written by the host after the payload: "slot holds ticket t"
    rows[S*R]    'seq': request data, one row of R floats per slot (R = P rounded up to 4: 16-byte rows)
    words[S*R]   'll': request data as int64 words (ticket + 1) << 32 | the float's bits, R = P
                 rounded up to 2 (16-byte lines); no seq word: each word says whose it is
    answer[S]    int64: (ticket + 1) << 32 | the result's float32 bits, ONE 8-byte store by the
                 GPU, so the mark and the value arrive together and no fence sits between them
    ctrl[2]      [0] leave: 1 = the host's stop, 2 = a block's idle budget ran out (all leave)
    status[B,4]  per block: requests served, polls, exit code, next ticket (the kernel writes)
    stamps[S*2]  per slot, %globaltimer when the GPU saw the request and when it answered (stored
                 before the answer): the GPU's share of the round trip (the rest is the host and the bus)
Tickets go to blocks round-robin (ticket t -> block t % B, slot t % S); a ticket is handed out
only once its slot's previous ticket was collected (hostpath.py's ticket book), so every
request is answered exactly once, and a full queue hands out nothing.

What a round trip costs, and what this code does about each part:
  - the GPU's poll is a read across PCIe (one to two microseconds there and back). 'seq':
    thread 0 polls ONLY its slot's seq word, then the block reads the payload: a second round
    trip. 'll' (NCCL's low-latency protocol): the block polls the payload words themselves and
    takes the request when every word carries its mark: one round trip, for twice the bytes.
    So 'll' wins while latency dominates (small payloads) and 'seq' when bytes do (large ones);
  - the stop word is read every 32nd poll, the idle clock is on chip (%globaltimer);
  - payloads cross PCIe as 16-byte ld.relaxed.sys loads, four in flight per thread before
    the first is used;
  - the answer is one posted 8-byte store, fenced after (the fence costs the GPU, not the
    host's wait);
  - the host's part runs in hostpath.py: machine code, GIL released, so other producers (and
    on the simulator the consumer thread itself) run meanwhile; request() is ONE compiled
    call (reserve a ticket with atomics, publish, wait, collect): no Python lock, no set.

The dangers this code guards against:
  - a plain flag read in a loop is hoisted by the compiler: the loop never sees the host's
    write. A plain load with cuda.threadfence_system() in the loop is not hoisted, but on the
    H200 a consumer started after an earlier one had been stopped never saw the host's
    writes with it (a stale cached line is the likely cause). Here every poll is a .sys load
    (inline PTX, intrinsics.py): ld.acquire.sys for seq words, ld.relaxed.sys for payloads.
  - an unbounded spin wedges the GPU: every wait here is bounded by an idle budget in
    nanoseconds (%globaltimer); when it runs out the kernel exits with EXIT_IDLE_BUDGET.
  - a grid that is not co-resident never serves the tickets of blocks that never start: the
    block count is checked against what the device can hold at once.
  - freeing device or pinned memory (cudaFree, cudaFreeHost) waits for the GPU to go idle,
    which a resident kernel never does: on the H200 a garbage-collected buffer stalled the
    host for the whole idle budget. The consumer holds numba's deferred cleanup
    (cuda.defer_cleanup) from start to stop, so no free runs while it lives.

On the simulator: a kernel launch blocks its caller, so the consumer runs on a Python
thread; mapped arrays are shared by reference; one block; timings are meaningless.
On x86 hosts, stores are seen in order, so writing the payload before seq is enough, and
every aligned 8-byte store ('ll''s words) is atomic.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ..hostpath import (ANSWERED, CLOSED, FULL, HEADER, NEXT, PUBLISHED, close, collect, make_request, new_book,
                        reserve, wait_for_mark, warm_up, word_address)
from ..intrinsics import (float_bits, globaltimer, load4, load4_relaxed_sys, load_acquire_sys, load_marked2_sys,
                          poll_relaxed_sys)
from ..runtime import ON_GPU, ON_SIMULATOR, cuda, device_facts, host_view
from .reduce import block_sum

# Host-side handles, bound at import: while a simulated kernel of this module runs (and the
# consumer's always does), the simulator swaps this module's global `cuda` for its in-kernel API.
_mapped_array, _to_device, _stream, _event, _synchronize, _defer_cleanup = (
    cuda.mapped_array, cuda.to_device, cuda.stream, cuda.event, cuda.synchronize, cuda.defer_cleanup)

BLOCK = 256
EXIT_RUNNING, EXIT_STOPPED, EXIT_IDLE_BUDGET = 0, 2, 3
_WORK, _STOP, _IDLE, _HOT, _COLD = 1, 2, 3, 4, 5
PROTOCOLS = ("ll", "seq", "seq-relaxed")
LL_MAX_BYTES = 4096  # payloads up to this size use "ll" by default (see default_protocol)


def reference(payload: np.ndarray, weights: np.ndarray) -> float:
    return float(payload.astype(np.float64) @ weights.astype(np.float64))


def default_protocol(payload_bytes: int) -> str:
    """'ll' (one PCIe round trip, twice the bytes) for small payloads, 'seq' for large ones."""
    return "ll" if payload_bytes <= LL_MAX_BYTES else "seq"


_ZERO4 = (np.float32(0),) * 4
_NO_WORDS = (np.float32(0), np.int32(0), np.float32(0), np.int32(0))


@cuda.jit(device=True, inline=True)
def _use_floats(p, weights, v, mark):
    """One 16-byte vector of a plain row: its share of the dot product (always valid)."""
    w = load4(weights, v)
    return p[0] * w[0] + p[1] * w[1] + p[2] * w[2] + p[3] * w[3], True


@cuda.jit(device=True, inline=True)
def _use_marked(x, weights, v, mark):
    """Two marked words (value, mark, value, mark): their share, and whether both carry `mark`."""
    return x[0] * weights[2 * v] + x[2] * weights[2 * v + 1], x[1] == mark and x[3] == mark


def strided_dot(load, use, empty):
    """This thread's part of a row's dot product, with four vector loads in flight.

    The row's vectors first..first+nvec-1 go to the threads in turn (vector v to thread v % blockDim);
    each thread issues up to four loads before it uses the first: over PCIe that is four bus round
    trips' worth of bytes in one. Returns (partial sum, every vector valid)."""

    @cuda.jit(device=True, inline=True)
    def dot(src, first, nvec, weights, mark):
        step = cuda.blockDim.x
        acc = np.float32(0)
        ok = True
        v = cuda.threadIdx.x
        while v < nvec:
            x0 = load(src, first + v)
            x1 = load(src, first + v + step) if v + step < nvec else empty
            x2 = load(src, first + v + 2 * step) if v + 2 * step < nvec else empty
            x3 = load(src, first + v + 3 * step) if v + 3 * step < nvec else empty
            a, good = use(x0, weights, v, mark)
            acc += a
            ok = ok and good
            if v + step < nvec:
                a, good = use(x1, weights, v + step, mark)
                acc += a
                ok = ok and good
            if v + 2 * step < nvec:
                a, good = use(x2, weights, v + 2 * step, mark)
                acc += a
                ok = ok and good
            if v + 3 * step < nvec:
                a, good = use(x3, weights, v + 3 * step, mark)
                acc += a
                ok = ok and good
            v += 4 * step
        return acc, ok

    return dot


_row_dot = strided_dot(load4_relaxed_sys, _use_floats, _ZERO4)
_marked_dot = strided_dot(load_marked2_sys, _use_marked, _NO_WORDS)


@cuda.jit(device=True, inline=True)
def block_dot(rows, row, weights, partial):
    """All threads of the block: rows[row] . weights, over 16-byte vectors (weights zero-padded to
    the row length, a multiple of 4)."""
    nvec = weights.size >> 2
    acc, _ = _row_dot(rows, row * nvec, nvec, weights, 0)
    return block_sum(acc, partial)


@cuda.jit(device=True, inline=True)
def _leave(ctrl, polls, now, since, idle_ns):
    """Thread 0, once per poll: _STOP when the host asked every block to leave (that word is read
    every 32nd poll only: each read is a PCIe round trip), _IDLE when the idle budget is spent."""
    if (polls & 31) == 31 and load_acquire_sys(ctrl, 0) != 0:
        return _STOP
    if now - since > idle_ns:
        return _IDLE
    return 0


def make_consumer_kernel(protocol: str):
    """The consumer for one queue protocol (chosen at compile time):
    'seq'          thread 0 polls the slot's seq word with ld.acquire.sys (it orders the payload
                   reads after it by itself); then the block reads the payload: two PCIe round trips
    'seq-relaxed'  the same with ld.relaxed.sys polls (no ordering) and one system fence once seen
    'll'           no seq word: every 8-byte payload word carries the ticket's mark (NCCL's LL
                   protocol). While hot (a request seen within hot_ns) every thread polls its words
                   and the block takes the request when all marks match: the poll IS the payload
                   read, one round trip. Cold, thread 0 probes the row's first line only, so an idle
                   queue costs the bus 16 bytes per poll, not the whole row.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    marked, relaxed = protocol == "ll", protocol == "seq-relaxed"

    @cuda.jit(device=True, inline=True)
    def wait_seq(seq, slot, mark, ctrl, polls, since, idle_ns):
        """Thread 0: bounded, ends on work, on the leave word, or when the idle budget is spent."""
        cmd = 0
        while cmd == 0:
            # a .sys load is re-read every time: never hoisted, never a stale cached line
            seen = poll_relaxed_sys(seq, slot) if relaxed else load_acquire_sys(seq, slot)
            cmd = _WORK if seen == mark else _leave(ctrl, polls, globaltimer(), since, idle_ns)
            polls += 1
        if relaxed:
            cuda.threadfence_system()  # the payload reads come after the poll that saw the ticket
        return cmd, polls

    @cuda.jit(device=True, inline=True)
    def wait_marked(words, slot, mark, weights, ctrl, command, polls, since, hot_ns, idle_ns):
        """All threads: bounded like wait_seq. Returns (command, this thread's partial sum, polls, since)."""
        nvec = weights.size >> 1
        first = slot * nvec
        arriving = False  # thread 0's cold probe saw the mark: poll hot until the whole row is in
        while True:
            if cuda.threadIdx.x == 0:
                now = globaltimer()
                cmd = _leave(ctrl, polls, now, since, idle_ns)
                command[0] = cmd if cmd != 0 else (_HOT if arriving or now - since < hot_ns else _COLD)
            polls += 1
            cuda.syncthreads()
            cmd = command[0]
            if cmd == _STOP or cmd == _IDLE:
                return cmd, np.float32(0), polls, since
            if cmd == _HOT:
                acc, ok = _marked_dot(words, first, nvec, weights, mark)
                if cuda.syncthreads_and(np.int32(ok)):  # every word of the row carries this ticket's mark
                    return _WORK, acc, polls, since
            else:
                if cuda.threadIdx.x == 0:
                    x = load_marked2_sys(words, first)
                    if x[1] == mark:
                        arriving = True
                        since = globaltimer()  # a sign of work: the idle budget starts again
                cuda.syncthreads()  # command[0] is rewritten next round

    def consumer_kernel(seq, answer, rows, words, ctrl, status, stamps, weights, idle_ns, hot_ns, echo):
        # On chip: the weights stay in device memory for the whole run; the block's partial sums
        # in shared memory. Through PCIe: each request's payload in, one 8-byte answer out.
        block, nblocks, tid = cuda.blockIdx.x, cuda.gridDim.x, cuda.threadIdx.x
        command = cuda.shared.array(1, dtype=np.int32)
        partial = cuda.shared.array(BLOCK, dtype=np.float32)
        slots = seq.size
        ticket = block
        served = 0
        polls = 0
        since = globaltimer()  # the last sign of work: the idle budget (and 'll''s hot window) count from it
        seen = np.int64(0)
        while True:
            slot = ticket % slots
            mark = ticket + 1
            cmd, acc = 0, np.float32(0)
            if marked:
                cmd, acc, polls, since = wait_marked(words, slot, mark, weights, ctrl, command, polls, since,
                                                     hot_ns, idle_ns)
                if tid == 0:
                    seen = globaltimer()
            else:
                if tid == 0:
                    cmd, polls = wait_seq(seq, slot, mark, ctrl, polls, since, idle_ns)
                    seen = globaltimer()
                    command[0] = cmd
                cuda.syncthreads()
                cmd = command[0]
            if cmd != _WORK:
                break
            if echo:
                value = np.float32(0)
            elif marked:
                value = block_sum(acc, partial)
            else:
                value = block_dot(rows, slot, weights, partial)
            if tid == 0:
                answered = globaltimer()
                # the stamps go out before the answer, so a host that has the answer finds them in
                # place (PCIe keeps one thread's posted writes in order; PTX alone does not promise
                # it, and a fence here would delay every answer: gpu_span_ns is a diagnostic)
                stamps[2 * slot] = seen
                stamps[2 * slot + 1] = answered
                answer[slot] = (np.int64(mark) << 32) | (np.int64(float_bits(value)) & 0xFFFFFFFF)
                cuda.threadfence_system()  # push the answer out now (posted writes may linger)
                since = answered
                served += 1
                status[block, 0] = served
                status[block, 1] = polls
            cuda.syncthreads()  # command and partial are reused by the next request
            ticket += nblocks
        if tid == 0:
            if cmd == _IDLE:
                ctrl[0] = 2  # one block gone means its tickets would never be served: all leave
            status[block, 0] = served
            status[block, 1] = polls
            status[block, 3] = ticket
            cuda.threadfence_system()
            status[block, 2] = EXIT_IDLE_BUDGET if cmd == _IDLE else EXIT_STOPPED

    consumer_kernel.__name__ = consumer_kernel.__qualname__ = f"consumer_{protocol.replace('-', '_')}"
    return cuda.jit(consumer_kernel)


CONSUMER_KERNELS = {protocol: make_consumer_kernel(protocol) for protocol in PROTOCOLS}


class ConsumerError(RuntimeError):
    """The persistent consumer cannot take or answer this request."""


class QueueFull(ConsumerError):
    pass


class ResultTimeout(ConsumerError):
    pass


class ConsumerStopped(ConsumerError):
    pass


class Ticket(NamedTuple):  # a NamedTuple: cheaper to make than a dataclass, on the hot path
    number: int
    slot: int


_F32 = np.dtype(np.float32)
_SPINS = 1 << 16  # answer-word reads per compiled wait (~0.1 ms) before the slow checks


def _check_payload(payload: Any, size: int) -> np.ndarray:
    """A C-contiguous float32 vector of `size` (a strided view is copied: the queue copies anyway)."""
    arr = np.asarray(payload)
    if arr.dtype != np.float32:
        raise ValueError(f"payload dtype {arr.dtype}: float32 is required")
    if arr.shape != (size,):
        raise ValueError(f"payload shape {arr.shape}: ({size},) is required")
    return np.ascontiguousarray(arr)


def _padded(weights: np.ndarray, multiple: int) -> np.ndarray:
    out = np.zeros(-(-weights.size // multiple) * multiple, np.float32)
    out[:weights.size] = weights
    return out


class PersistentConsumer:
    """A resident kernel serving dot-product requests from a queue in mapped host memory.

        with PersistentConsumer(weights) as c:
            t = c.submit(payload)          # -> Ticket; blocks while the queue is full (timeout)
            value = c.result(t, timeout=1) # -> float; raises if the consumer died or time ran out
            value = c.request(payload)     # the two in one call

    A full queue blocks submit() up to `timeout` seconds, then raises QueueFull (nothing is
    written). stop(drain=True) waits for every published request to be answered first; what
    is still unanswered after that is reported: its result() raises ConsumerStopped.
    protocol: 'll' or 'seq' (see make_consumer_kernel); by default by payload size
    (default_protocol). hot_us: how long an 'll' block keeps polling whole rows after its last
    request (the bus carries 2 x payload bytes per poll meanwhile), before it probes one line.
    """

    def __init__(self, weights: np.ndarray, slots: int = 64, blocks: int | None = None,
                 idle_timeout_s: float = 10.0, echo: bool = False, protocol: str | None = None,
                 hot_us: float = 100.0):
        weights = np.asarray(weights)
        if weights.ndim != 1 or weights.size == 0:
            raise ValueError(f"weights: shape {weights.shape}; a non-empty 1-D vector is required")
        weights = _check_payload(weights, weights.size)
        protocol = protocol or default_protocol(4 * weights.size)
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
        if slots < 1:
            raise ValueError("slots must be >= 1")
        blocks = blocks or (1 if ON_SIMULATOR else min(4, slots))
        if ON_SIMULATOR and blocks != 1:
            raise ValueError("the simulator runs one consumer block (its blocks run one after another)")
        if ON_GPU and blocks > device_facts().sm_count:
            raise ValueError(f"{blocks} blocks: at most one per SM ({device_facts().sm_count}) keeps them all resident")
        if blocks > slots:
            raise ValueError(f"{blocks} blocks need at least as many slots (got {slots})")
        self.size, self.slots, self.blocks, self.echo, self.protocol = weights.size, slots, blocks, echo, protocol
        self._kernel = CONSUMER_KERNELS[protocol]
        self._marked = protocol == "ll"
        # a row per slot: 'seq' 16-byte rows of floats; 'll' 16-byte lines of two marked words.
        # The weights are zero-padded to the row, so the padding adds nothing to the dot product.
        padded = _padded(weights, 2 if self._marked else 4)
        self.row = padded.size
        m = _mapped_array
        rows = (1, slots * self.row) if self._marked else (slots * self.row, 1)  # the unused one: a stub
        self._d = {"seq": m(slots, np.int32), "answer": m(slots, np.int64), "rows": m(rows[0], np.float32),
                   "words": m(rows[1], np.int64), "ctrl": m(2, np.int32), "status": m((blocks, 4), np.int64),
                   "stamps": m(2 * slots, np.int64)}
        self._h = {k: host_view(v) for k, v in self._d.items()}
        for v in self._h.values():
            v[...] = 0
        # hot-path handles: the answer words' address, the value halves (little-endian low words)
        self._seq, self._answer, self._ctrl = (self._h[k] for k in ("seq", "answer", "ctrl"))
        self._rows, self._words = self._h["rows"], self._h["words"]
        self._answer_address = word_address(self._answer, 0)
        self._value = self._answer.view(np.float32)[0::2]
        self._shape = (self.size,)
        self._weights = _to_device(padded)
        self._idle_ns, self._hot_ns = int(idle_timeout_s * 1e9), int(hot_us * 1e3)
        # the ticket book (hostpath.py): tickets handed out and collected, kept with atomic
        # instructions, so a request needs no Python lock; the condition only wakes submitters
        # waiting for a full queue's slot
        self._book = new_book(slots, self.size)
        self._book[CLOSED] = 1  # until start(): a request to a consumer not started reserves nothing
        self._slot_free = threading.Condition()
        self._waiting = 0  # submitters waiting for a slot (notify only when someone waits)
        self._abandoned: set[int] = set()
        self._state = "new"
        warm_up(protocol)
        self._request, self._put_and_wait = make_request(protocol)
        self._queue = (self._words if self._marked else self._rows, self._seq)  # what the publish step writes

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> "PersistentConsumer":
        if self._state != "new":
            raise ConsumerError(f"consumer is {self._state}: start it once")
        self._no_frees = _defer_cleanup()
        self._no_frees.__enter__()
        d = self._d
        args = (d["seq"], d["answer"], d["rows"], d["words"], d["ctrl"], d["status"], d["stamps"], self._weights,
                np.int64(self._idle_ns), np.int64(self._hot_ns), np.int32(self.echo))
        if ON_SIMULATOR:
            self._thread = threading.Thread(target=lambda: self._kernel[1, BLOCK](*args), daemon=True)
            self._thread.start()
        else:
            self._stream = _stream()
            self._kernel[self.blocks, BLOCK, self._stream](*args)
            self._finished = _event(timing=False)
            self._finished.record(self._stream)
        self._book[CLOSED] = 0
        self._state = "running"
        return self

    def _exit_codes_set(self) -> bool:
        return bool(self._h["status"][:, 2].any())  # a block writes its exit code as it leaves

    def kernel_exited(self) -> bool:
        """True once the kernel has ended, or any of its blocks has left (its tickets would hang)."""
        if self._state == "new":
            return False
        if self._exit_codes_set():
            if ON_SIMULATOR:
                self._thread.join(5)  # the simulator runs one kernel at a time: let this one finish
            return True
        return not self._thread.is_alive() if ON_SIMULATOR else self._finished.query()

    def status(self) -> dict[str, Any]:
        s = self._h["status"]
        return {"served": int(s[:, 0].sum()), "spins": int(s[:, 1].sum()),
                "exit_codes": [int(c) for c in s[:, 2]], "running": not self.kernel_exited()}

    def _died_message(self) -> str:
        codes = set(int(c) for c in self._h["status"][:, 2])
        if EXIT_IDLE_BUDGET in codes:
            return (f"the consumer kernel exited: its idle budget of {self._idle_ns / 1e9:g} s ran out with no "
                    f"work (status {self.status()}); start a new one")
        return f"the consumer kernel is not running (status {self.status()})"

    def stop(self, drain: bool = True, timeout: float = 10.0) -> list[int]:
        """Stop the kernel; returns the tickets that were published but never answered."""
        if self._state != "running":
            raise ConsumerStopped(f"stop(): the consumer is {self._state}")
        deadline = time.monotonic() + timeout
        if drain:
            while self._unanswered() and not self.kernel_exited() and time.monotonic() < deadline:
                time.sleep(1e-4)
        self._ctrl[0] = 1  # leave (after the queue drains: the kernel checks the queue first)
        while not self._all_blocks_left():
            if time.monotonic() > deadline + timeout:
                raise ConsumerError("the consumer kernel did not exit after the stop flag (GPU wedged?)")
            time.sleep(1e-4)
        if ON_GPU:
            _synchronize()
        self._no_frees.__exit__(None, None, None)  # the kernel is gone: frees may run again
        with self._slot_free:
            self._state = "stopped"
            close(self._book)  # from here every reservation fails; the ones before are in the book
            self._abandoned = set(self._unanswered())
            self._slot_free.notify_all()
        return sorted(self._abandoned)

    def _all_blocks_left(self) -> bool:
        return not self._thread.is_alive() if ON_SIMULATOR else self._finished.query()

    def __enter__(self) -> "PersistentConsumer":
        return self.start() if self._state == "new" else self

    def __exit__(self, *exc) -> None:
        if self._state == "running":
            self.stop(drain=exc[0] is None)

    # -- requests --------------------------------------------------------------------
    def _unanswered(self) -> list[int]:
        """Tickets handed out (in the book) but neither collected nor answered."""
        handed_out, collected = int(self._book[NEXT]), self._book[HEADER:]
        return [t for t in range(max(0, handed_out - self.slots), handed_out)
                if collected[t % self.slots] < t and self._answer[t % self.slots] >> 32 != t + 1]

    @property
    def last_ticket(self) -> int:
        """The number of the last ticket handed out (-1: none yet)."""
        return int(self._book[NEXT]) - 1

    def _checked(self, payload: Any) -> np.ndarray:
        # the common case in a few attribute reads; anything else gets the full check
        if type(payload) is np.ndarray and payload.dtype is _F32 and payload.shape == self._shape \
                and payload.flags.c_contiguous:
            return payload
        return _check_payload(payload, self.size)

    def _reserve(self, timeout: float, caller: str) -> int:
        """Take the next ticket; while its slot's last ticket is uncollected, wait (up to `timeout`)."""
        deadline = None
        while True:
            if self._state != "running":
                raise ConsumerStopped(f"{caller}(): the consumer is {self._state}")
            if self._ctrl[0] == 2 or (ON_SIMULATOR and not self._thread.is_alive()):  # 2: a block ran out of budget
                raise ConsumerError(f"{caller}(): " + self._died_message())
            t = reserve(self._book)
            if t >= 0:
                return t
            if t == FULL:
                deadline = deadline or time.monotonic() + timeout
                self._wait_for_slot(deadline, timeout)

    def _wait_for_slot(self, deadline: float, timeout: float) -> None:
        with self._slot_free:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                t = int(self._book[NEXT])
                raise QueueFull(f"queue full: slot {t % self.slots} still holds ticket {t - self.slots}, "
                                f"not collected within {timeout:g} s (collect results to free slots); "
                                "nothing was submitted")
            self._waiting += 1
            try:  # in short slices: a collection just before this wait would not be notified
                self._slot_free.wait(min(remaining, 1e-3))
            finally:
                self._waiting -= 1

    def _wake_slot_waiters(self) -> None:
        if self._waiting:
            with self._slot_free:
                self._slot_free.notify_all()

    def submit(self, payload: Any, timeout: float = 1.0) -> Ticket:
        """Publish a request; a full queue waits up to `timeout` for a slot, then raises QueueFull."""
        data = self._checked(payload)
        t = self._reserve(timeout, "submit")
        slot = t % self.slots
        # Published right after the reservation: the ticket is in the book, so stop() waits for
        # it (or reports it), and nothing that can fail or block comes between the two.
        self._put_and_wait(*self._queue, slot, data, t + 1, self._answer, 0)
        return Ticket(t, slot)

    def request(self, payload: Any, timeout: float = 1.0) -> float:
        """submit() and result() in one compiled call: reserve, publish, wait, collect (hostpath.py).
        The slow paths (a payload to check, a full queue, a late answer, a consumer that died or
        stopped) go through submit() and result()."""
        try:
            status, t, value = self._request(self._book, *self._queue, payload, self._answer, _SPINS)
        except TypeError:  # not a C-contiguous float32 vector: numba has no version for it
            status = None
        if status == ANSWERED:
            if self._waiting:
                self._wake_slot_waiters()
            return float(value)
        if status == PUBLISHED:
            return self.result(Ticket(t, t % self.slots), timeout)
        return self.result(self.submit(payload, timeout), timeout)  # they raise what is wrong

    def result(self, ticket: Ticket, timeout: float = 1.0) -> float:
        slot, mark = ticket.slot, ticket.number + 1
        if self._book[HEADER + slot] >= ticket.number:
            raise ConsumerError(f"ticket {ticket.number} was already collected")
        address = self._answer_address + 8 * slot
        deadline = time.perf_counter() + timeout
        # A bounded spin without the GIL; between spins, the slow checks: the timeout, and
        # a consumer that was stopped or died.
        while not wait_for_mark(address, mark):
            if ticket.number in self._abandoned:
                raise ConsumerStopped(f"ticket {ticket.number} was never answered: the consumer was stopped")
            if self.kernel_exited() and self._answer[slot] >> 32 != mark:
                raise ConsumerError(f"ticket {ticket.number}: " + self._died_message())
            if time.perf_counter() > deadline:
                raise ResultTimeout(f"ticket {ticket.number}: no answer within {timeout:g} s")
        value = float(self._value[slot])
        if not collect(self._book, ticket.number):
            raise ConsumerError(f"ticket {ticket.number} was already collected")
        self._wake_slot_waiters()
        return value

    def gpu_span_ns(self, ticket: Ticket | int) -> int:
        """GPU ns from seeing the ticket (or ticket number) to answering it, valid until its slot is
        reused. With 'seq' that includes reading the payload; with 'll' the payload came with the
        poll that saw the request."""
        slot = ticket.slot if isinstance(ticket, Ticket) else ticket % self.slots
        stamps = self._h["stamps"]
        return int(stamps[2 * slot + 1] - stamps[2 * slot])


# -- baselines: the same job, one launch per request, or a batch per launch ---------------

@cuda.jit
def dot_kernel(payloads, weights, results):
    # One block per request; the payloads are in mapped host memory, like the queue's.
    partial = cuda.shared.array(BLOCK, dtype=np.float32)
    r = cuda.blockIdx.x
    value = block_dot(payloads, r, weights, partial)
    if cuda.threadIdx.x == 0:
        results[r] = value


class LaunchPerRequest:
    """Baseline: the host writes the payload(s), launches dot_kernel, waits for it."""

    def __init__(self, weights: np.ndarray, batch: int = 1):
        self.size, self.batch = weights.size, batch
        padded = _padded(_check_payload(weights, weights.size), 4)  # the same 16-byte rows as the queue's
        self._payloads = _mapped_array(batch * padded.size, np.float32)
        self._results = _mapped_array(batch, np.float32)
        host_view(self._payloads)[...] = 0  # the rows' padding stays zero
        self._hp = host_view(self._payloads).reshape(batch, padded.size)[:, :self.size]
        self._hr = host_view(self._results)
        self._weights = _to_device(padded)
        self._lock = threading.Lock()  # one GPU queue: concurrent callers take turns
        self._launch = dot_kernel[batch, BLOCK]

    def __call__(self, payloads: np.ndarray) -> np.ndarray:
        payloads = np.asarray(payloads, dtype=np.float32).reshape(-1)
        if payloads.size != self.batch * self.size:
            raise ValueError(f"expected {self.batch} payload(s) of {self.size} float32")
        with self._lock:
            self._hp[...] = payloads.reshape(self.batch, self.size)
            self._launch(self._payloads, self._weights, self._results)
            _synchronize()
            return self._hr.copy()
