"""Lesson: a persistent consumer, its GPU side (the host side is topics/consumer/host.py). The host feeds a queue; a kernel that never exits drains it.

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

import numpy as np

from ...backend import BACKEND
from ...intrinsics import (float_bits, globaltimer, load4, load4_relaxed_sys, load_acquire_sys, load_marked2_sys,
                          poll_relaxed_sys)
from ...reduce import block_sum
from ...runtime import cuda

BLOCK = BACKEND.size(gpu=256, simulator=32)  # the simulator's barriers cost per thread: a warp there
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


# -- the baseline's kernel: one launch per request (or a batch per launch) --------------

@cuda.jit
def dot_kernel(payloads, weights, results):
    # One block per request; the payloads are in mapped host memory, like the queue's.
    partial = cuda.shared.array(BLOCK, dtype=np.float32)
    r = cuda.blockIdx.x
    value = block_dot(payloads, r, weights, partial)
    if cuda.threadIdx.x == 0:
        results[r] = value
