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
    seq[S]       ticket + 1, written by the host after the payload: "slot holds ticket t"
    payload[S*R] request data, one row of R floats per slot (R = P rounded up to 4: 16-byte rows)
    answer[S]    int64: (ticket + 1) << 32 | the result's float32 bits, ONE 8-byte store by the
                 GPU, so the mark and the value arrive together and no fence sits between them
    ctrl[2]      [0] leave: 1 = the host's stop, 2 = a block's idle budget ran out (all leave)
    status[B,4]  per block: requests served, idle polls, exit code, next ticket (the kernel writes)
    stamps[S*2]  per slot, %globaltimer when the GPU saw the request and when it answered: the
                 GPU's share of the round trip (the rest is the host and the PCIe bus)
Tickets go to blocks round-robin (ticket t -> block t % B, slot t % S); a slot is reused
only after its previous ticket was collected, so every request is answered exactly once.

What a round trip costs, and what this code does about each part:
  - the GPU's poll is a read across PCIe (about a microsecond): thread 0 polls ONLY its
    slot's seq word; the stop word is read every 32nd poll, the idle clock is on chip;
  - the payload crosses PCIe as 16-byte ld.relaxed.sys loads, four in flight per thread
    before the first is used: one bus round trip brings 16 KiB into a block of 256 threads;
  - the answer is one posted 8-byte store, fenced after (the fence costs the GPU, not the
    host's wait);
  - the host waits in hostwait.py: machine code, GIL released, so other producers (and on the
    simulator the consumer thread itself) run while it spins.

The dangers this code guards against:
  - a plain flag read in a loop is hoisted by the compiler: the loop never sees the host's
    write. A plain load with cuda.threadfence_system() in the loop is not hoisted, but on the
    H200 a consumer started after an earlier one had been stopped never saw the host's
    writes with it (a stale cached line is the likely cause). Here every poll is an
    ld.acquire.sys (inline PTX, intrinsics.py) and every payload read an ld.relaxed.sys.
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
On x86 hosts, stores are seen in order, so writing the payload before seq is enough.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ..hostwait import wait_for_mark, warm_up, word_address
from ..intrinsics import (float_bits, globaltimer, load4, load4_relaxed_sys, load_acquire_sys, load_relaxed_sys,
                          poll_relaxed_sys)
from ..runtime import ON_GPU, ON_SIMULATOR, cuda, device_facts, host_view
from .reduce import block_sum

# Host-side handles, bound at import: while a simulated kernel of this module runs (and the
# consumer's always does), the simulator swaps this module's global `cuda` for its in-kernel API.
_mapped_array, _to_device, _stream, _event, _synchronize, _defer_cleanup = (
    cuda.mapped_array, cuda.to_device, cuda.stream, cuda.event, cuda.synchronize, cuda.defer_cleanup)

BLOCK = 256
EXIT_RUNNING, EXIT_STOPPED, EXIT_IDLE_BUDGET = 0, 2, 3
_WORK, _STOP, _IDLE = 1, 2, 3


def reference(payload: np.ndarray, weights: np.ndarray) -> float:
    return float(payload.astype(np.float64) @ weights.astype(np.float64))


_ZERO4 = (np.float32(0),) * 4


@cuda.jit(device=True, inline=True)
def _dot4(p, w):
    return p[0] * w[0] + p[1] * w[1] + p[2] * w[2] + p[3] * w[3]


@cuda.jit(device=True, inline=True)
def block_dot(payload, row, weights, partial):
    """All threads of the block: payload[row*R + i] . weights[i] (row R = weights rounded up to 4)."""
    tid, step = cuda.threadIdx.x, cuda.blockDim.x
    nvec = weights.size >> 2
    first = row * ((weights.size + 3) >> 2)  # the row's first 16-byte vector
    acc = np.float32(0)
    v = tid
    while v < nvec:
        # four 16-byte loads issued before any is used: four PCIe reads in flight per thread
        p0 = load4_relaxed_sys(payload, first + v)
        p1 = load4_relaxed_sys(payload, first + v + step) if v + step < nvec else _ZERO4
        p2 = load4_relaxed_sys(payload, first + v + 2 * step) if v + 2 * step < nvec else _ZERO4
        p3 = load4_relaxed_sys(payload, first + v + 3 * step) if v + 3 * step < nvec else _ZERO4
        acc += _dot4(p0, load4(weights, v))
        if v + step < nvec:
            acc += _dot4(p1, load4(weights, v + step))
        if v + 2 * step < nvec:
            acc += _dot4(p2, load4(weights, v + 2 * step))
        if v + 3 * step < nvec:
            acc += _dot4(p3, load4(weights, v + 3 * step))
        v += 4 * step
    i = 4 * nvec + tid  # the last size % 4 floats, one per thread
    if i < weights.size:
        acc += load_relaxed_sys(payload, 4 * first + i) * weights[i]
    return block_sum(acc, partial)


POLLS = ("acquire", "relaxed")


def make_consumer_kernel(poll: str):
    """The consumer, with its poll load chosen at compile time:
    'acquire'  every poll an ld.acquire.sys: it orders the payload reads after it by itself;
    'relaxed'  every poll an ld.relaxed.sys (no ordering), then one system fence once work is seen.
    """
    if poll not in POLLS:
        raise ValueError(f"poll {poll!r}: expected one of {POLLS}")
    relaxed = poll == "relaxed"

    @cuda.jit(device=True, inline=True)
    def poll_word(a, i):
        return poll_relaxed_sys(a, i) if relaxed else load_acquire_sys(a, i)

    def consumer_kernel(seq, answer, payload, ctrl, status, stamps, weights, idle_ns, echo):
        # On chip: the weights stay in device memory for the whole run; the block's partial sums
        # in shared memory. Through PCIe: each request's payload in, one 8-byte answer out.
        block, nblocks, tid = cuda.blockIdx.x, cuda.gridDim.x, cuda.threadIdx.x
        command = cuda.shared.array(1, dtype=np.int32)
        partial = cuda.shared.array(BLOCK, dtype=np.float32)
        slots = seq.size
        ticket = block
        served = 0
        polls = 0
        seen = np.int64(0)
        while True:
            slot = ticket % slots
            if tid == 0:
                cmd = 0
                start = globaltimer()
                while cmd == 0:  # bounded: ends on work, on the leave word, or when the idle budget is spent
                    # a .sys load is re-read every time: never hoisted, never a stale cached line
                    if poll_word(seq, slot) == ticket + 1:
                        cmd = _WORK
                    elif (polls & 31) == 31 and poll_word(ctrl, 0) != 0:
                        cmd = _STOP  # checked after the queue, so work already published drains first
                    elif globaltimer() - start > idle_ns:
                        cmd = _IDLE
                    polls += 1
                if relaxed:
                    cuda.threadfence_system()  # the payload reads below come after the poll that saw it
                seen = globaltimer()
                command[0] = cmd
            cuda.syncthreads()
            if command[0] != _WORK:
                break
            value = np.float32(0) if echo else block_dot(payload, slot, weights, partial)
            if tid == 0:
                mark = np.int64(ticket + 1) << 32
                answer[slot] = mark | (np.int64(float_bits(value)) & 0xFFFFFFFF)
                answered = globaltimer()
                cuda.threadfence_system()  # push the answer out now (posted writes may linger)
                stamps[2 * slot] = seen
                stamps[2 * slot + 1] = answered
                served += 1
                status[block, 0] = served
                status[block, 1] = polls
            cuda.syncthreads()  # command and partial are reused by the next request
            ticket += nblocks
        if tid == 0:
            if command[0] == _IDLE:
                ctrl[0] = 2  # one block gone means its tickets would never be served: all leave
            status[block, 0] = served
            status[block, 1] = polls
            status[block, 3] = ticket
            cuda.threadfence_system()
            status[block, 2] = EXIT_IDLE_BUDGET if command[0] == _IDLE else EXIT_STOPPED

    consumer_kernel.__name__ = consumer_kernel.__qualname__ = f"consumer_{poll}"
    return cuda.jit(consumer_kernel)


CONSUMER_KERNELS = {poll: make_consumer_kernel(poll) for poll in POLLS}


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


def _check_payload(payload: Any, size: int) -> np.ndarray:
    arr = np.asarray(payload)
    if arr.dtype != np.float32:
        raise ValueError(f"payload dtype {arr.dtype}: float32 is required")
    if arr.shape != (size,):
        raise ValueError(f"payload shape {arr.shape}: ({size},) is required")
    return arr


class PersistentConsumer:
    """A resident kernel serving dot-product requests from a queue in mapped host memory.

        with PersistentConsumer(weights) as c:
            t = c.submit(payload)          # -> Ticket; blocks while the queue is full (timeout)
            value = c.result(t, timeout=1) # -> float; raises if the consumer died or time ran out

    A full queue blocks submit() up to `timeout` seconds, then raises QueueFull (nothing is
    written). stop(drain=True) waits for every published request to be answered first; what
    is still unanswered after that is reported: its result() raises ConsumerStopped.
    """

    def __init__(self, weights: np.ndarray, slots: int = 64, blocks: int | None = None,
                 idle_timeout_s: float = 10.0, echo: bool = False, poll: str = "acquire"):
        weights = np.asarray(weights)
        if poll not in POLLS:
            raise ValueError(f"poll {poll!r}: expected one of {POLLS}")
        self._kernel = CONSUMER_KERNELS[poll]
        if weights.ndim != 1 or weights.size == 0:
            raise ValueError(f"weights: shape {weights.shape}; a non-empty 1-D vector is required")
        weights = _check_payload(weights, weights.size)
        if slots < 1:
            raise ValueError("slots must be >= 1")
        blocks = blocks or (1 if ON_SIMULATOR else min(4, slots))
        if ON_SIMULATOR and blocks != 1:
            raise ValueError("the simulator runs one consumer block (its blocks run one after another)")
        if ON_GPU and blocks > device_facts().sm_count:
            raise ValueError(f"{blocks} blocks: at most one per SM ({device_facts().sm_count}) keeps them all resident")
        if blocks > slots:
            raise ValueError(f"{blocks} blocks need at least as many slots (got {slots})")
        self.size, self.slots, self.blocks, self.echo = weights.size, slots, blocks, echo
        self.row = -(-weights.size // 4) * 4  # payload row stride: 16-byte aligned rows
        m = _mapped_array
        self._d = {"seq": m(slots, np.int32), "answer": m(slots, np.int64), "payload": m(slots * self.row, np.float32),
                   "ctrl": m(2, np.int32), "status": m((blocks, 4), np.int64), "stamps": m(2 * slots, np.int64)}
        self._h = {k: host_view(v) for k, v in self._d.items()}
        for v in self._h.values():
            v[...] = 0
        # hot-path handles: the answer words' address, the value halves (little-endian low words)
        self._seq, self._payload, self._answer, self._ctrl = (self._h[k] for k in ("seq", "payload", "answer", "ctrl"))
        self._answer_address = word_address(self._answer, 0)
        self._value = self._answer.view(np.float32)[0::2]
        self._weights = _to_device(weights)
        self._idle_ns = int(idle_timeout_s * 1e9)
        self._lock = threading.Lock()
        self._slot_free = threading.Condition(self._lock)
        self._next = itertools.count()
        self._collected = [-1] * slots  # last ticket collected per slot
        self._waiting = 0  # submitters waiting for a slot (notify only when someone waits)
        self._published: set[int] = set()
        self._abandoned: set[int] = set()
        self._state = "new"
        warm_up()

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> "PersistentConsumer":
        if self._state != "new":
            raise ConsumerError(f"consumer is {self._state}: start it once")
        self._no_frees = _defer_cleanup()
        self._no_frees.__enter__()
        d = self._d
        args = (d["seq"], d["answer"], d["payload"], d["ctrl"], d["status"], d["stamps"], self._weights,
                np.int64(self._idle_ns), np.int32(self.echo))
        if ON_SIMULATOR:
            self._thread = threading.Thread(target=lambda: self._kernel[1, BLOCK](*args), daemon=True)
            self._thread.start()
        else:
            self._stream = _stream()
            self._kernel[self.blocks, BLOCK, self._stream](*args)
            self._finished = _event(timing=False)
            self._finished.record(self._stream)
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
        with self._lock:
            self._state = "stopped"
            self._abandoned = set(self._unanswered_locked())
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
    def _unanswered_locked(self) -> list[int]:
        return [t for t in self._published if self._answer[t % self.slots] >> 32 != t + 1]

    def _unanswered(self) -> list[int]:
        with self._lock:
            return self._unanswered_locked()

    def submit(self, payload: Any, timeout: float = 1.0) -> Ticket:
        data = _check_payload(payload, self.size)
        with self._lock:
            if self._state != "running":
                raise ConsumerStopped(f"submit(): the consumer is {self._state}")
            if self._ctrl[0] == 2 or (ON_SIMULATOR and not self._thread.is_alive()):  # 2: a block ran out of budget
                raise ConsumerError("submit(): " + self._died_message())
            t = next(self._next)
            slot = t % self.slots
            if t >= self.slots and self._collected[slot] != t - self.slots:
                self._wait_for_slot(t, slot, timeout)
            self._payload[slot * self.row:slot * self.row + self.size] = data
            self._seq[slot] = t + 1  # publish last: the payload is in place before the ticket
            self._published.add(t)
        return Ticket(t, slot)

    def _wait_for_slot(self, t: int, slot: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._waiting += 1
        try:
            while self._collected[slot] != t - self.slots:
                if self._state != "running" or not self._slot_free.wait(max(0.0, deadline - time.monotonic())):
                    self._next = itertools.count(t)  # the ticket was never used: hand it out again
                    raise QueueFull(f"queue full: slot {slot} still holds ticket {t - self.slots}, "
                                    f"not collected within {timeout:g} s (collect results to free slots)")
        finally:
            self._waiting -= 1

    def result(self, ticket: Ticket, timeout: float = 1.0) -> float:
        slot, mark = ticket.slot, ticket.number + 1
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
        with self._lock:
            if ticket.number not in self._published:
                raise ConsumerError(f"ticket {ticket.number} was already collected")
            self._published.discard(ticket.number)
            self._collected[slot] = ticket.number
            if self._waiting:
                self._slot_free.notify_all()
        return value

    def gpu_span_ns(self, ticket: Ticket) -> int:
        """GPU ns from seeing the ticket to answering it (valid until its slot is reused)."""
        stamps = self._h["stamps"]
        return int(stamps[2 * ticket.slot + 1] - stamps[2 * ticket.slot])


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
        row = -(-weights.size // 4) * 4  # the same 16-byte rows as the queue's
        self._payloads = _mapped_array(batch * row, np.float32)
        self._results = _mapped_array(batch, np.float32)
        self._hp = host_view(self._payloads).reshape(batch, row)[:, :self.size]
        self._hr = host_view(self._results)
        self._weights = _to_device(_check_payload(weights, weights.size))
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
