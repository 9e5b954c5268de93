"""The persistent consumer's host side: start, submit, wait, collect, stop (kernel.py holds the GPU side).

PersistentConsumer owns the queue in mapped host memory, launches the resident kernel once,
and serves requests through the compiled ticket book (hostpath.py); LaunchPerRequest is the
baseline that launches one kernel per request. kernel.py's docstring explains the protocol.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ...backend import BACKEND
from ...runtime import cuda
from .hostpath import (ANSWERED, CLOSED, FULL, HEADER, NEXT, PUBLISHED, close, collect, make_request, new_book,
                       reserve, wait_for_mark, warm_up, word_address)
from .kernel import BLOCK, CONSUMER_KERNELS, EXIT_IDLE_BUDGET, PROTOCOLS, default_protocol, dot_kernel

# Host-side handles, bound at import (cheaper on the hot path than attribute look-ups).
_mapped_array, _to_device, _synchronize, _defer_cleanup = (
    cuda.mapped_array, cuda.to_device, cuda.synchronize, cuda.defer_cleanup)

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
        resident = BACKEND.resident_blocks(1)  # one block per SM: every block polls, none may wait for a slot
        blocks = blocks or min(4, slots, resident)
        if blocks > resident:
            raise ValueError(f"{blocks} blocks: at most {resident} can all be resident here "
                             f"(one per SM; the simulator runs its blocks one after another)")
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
        self._h = {k: BACKEND.host_view(v) for k, v in self._d.items()}
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
        self._running = BACKEND.start(self._kernel, self.blocks, BLOCK, args)
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
            self._running.settle(5)
            return True
        return self._running.done()

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
        self._running.finish()
        self._no_frees.__exit__(None, None, None)  # the kernel is gone: frees may run again
        with self._slot_free:
            self._state = "stopped"
            close(self._book)  # from here every reservation fails; the ones before are in the book
            self._abandoned = set(self._unanswered())
            self._slot_free.notify_all()
        return sorted(self._abandoned)

    def _all_blocks_left(self) -> bool:
        return self._running.done()

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
            if self._ctrl[0] == 2 or self._running.known_ended():  # 2: a block ran out of budget
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

class LaunchPerRequest:
    """Baseline: the host writes the payload(s), launches dot_kernel, waits for it."""

    def __init__(self, weights: np.ndarray, batch: int = 1):
        self.size, self.batch = weights.size, batch
        padded = _padded(_check_payload(weights, weights.size), 4)  # the same 16-byte rows as the queue's
        self._payloads = _mapped_array(batch * padded.size, np.float32)
        self._results = _mapped_array(batch, np.float32)
        BACKEND.host_view(self._payloads)[...] = 0  # the rows' padding stays zero
        self._hp = BACKEND.host_view(self._payloads).reshape(batch, padded.size)[:, :self.size]
        self._hr = BACKEND.host_view(self._results)
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
