"""What numba's CUDA simulator lacks, in one place: warp operations and the project's intrinsics.

install() (called by runtime.py when the simulator is the back-end) gives the simulator's
in-kernel `cuda` module (kernelapi.FakeCUDAModule) what a GPU kernel of the lessons calls:

  shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync   warp shuffles (PTX shfl.sync semantics)
  all_sync, any_sync, eq_sync, ballot_sync                 warp votes
  match_any_sync, match_all_sync, syncwarp                 warp matches, the warp barrier
  activemask, lanemask_lt                                  lane masks
  nanosleep                                                a short sleep (a bounded spin's back-off)
  popc                                                     fixed for negative values (a ballot with
                                                           lane 31 set is a negative int32)

Shared-memory atomics need nothing: the simulator's cuda.atomic.* work on any array under a lock
(tests/test_sim_device.py checks them). The Python versions of kernels_lab.intrinsics live here
too (intrinsics.py exports them on the simulator).

How a warp runs here. The simulator runs each thread of a block as a Python thread. A warp is
32 consecutive linear thread ids (x fastest, then y, then z), lane = linear id % 32, as on a GPU.
Every warp operation is a barrier of the lanes named in its mask, then an exchange:

  * the caller waits until every lane of the mask that exists and has not returned has made its
    matching call (PTX: shfl.sync and vote.sync wait for the non-exited threads of the mask);
    the k-th call with mask M of each lane meets the k-th call with M of the others;
  * a lane that is not in its own mask, or lanes that meet at different operations, are errors
    (undefined on a GPU);
  * a value read from a lane that took no part (not in the mask, returned, or past the end of a
    partial warp) is undefined on a GPU: here NaN for floats, UNDEFINED_INT for integers, so that
    using it shows; votes and ballots count the lanes that took part;
  * a lane waiting at a warp operation while a lane of its mask waits at syncthreads() can never
    go on (on a GPU: a hang, or undefined): an error naming both, instead of a hang. Lanes waiting
    at two different masks for each other are not detected: the grader's time limit ends those.
  * activemask() is the lanes of the warp that reach that same call (source line, as often) together:
    each lane is waited for until it arrives there, returns, or waits at another barrier or warp
    operation (it diverged): the lanes converged there, as activemask.b32 sees them on a GPU.

The functions reach into numba-cuda 0.30's simulator (kernel.BlockThread, kernel.BlockManager,
kernelapi.FakeCUDAModule): pinned to that version, and tests/test_sim_device.py fails loudly when
they move.
"""

from __future__ import annotations

import sys
import threading
import time as _time
from typing import Any

import numpy as np

WARP = 32
FULL_MASK = 0xFFFFFFFF
UNDEFINED_INT = 0x5EADBEEF  # what an integer read from a lane that took no part gives
PINNED = "0.30"             # the numba-cuda minor version whose simulator this module patches
_ABORT_POLL_S = 0.25        # how often a waiting lane looks for an abort of the block (another lane failed)


class WarpError(RuntimeError):
    """A warp operation a GPU would not run as written (undefined behaviour or a hang)."""


# -- the warps of one simulated block ----------------------------------------------------------

class _Meeting:
    """One warp operation: the lanes of `mask` meeting at their `count`-th call with that mask."""

    __slots__ = ("op", "mask", "values", "done")

    def __init__(self, op: str, mask: int):
        self.op, self.mask, self.values, self.done = op, mask, {}, False


class _Warp:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.open: dict[tuple[Any, int], _Meeting] = {}   # (mask or call site, count) -> a meeting not yet done
        self.calls: dict[tuple[int, Any], int] = {}       # (lane, mask or call site) -> calls made with it
        self.converging = 0                               # lanes waiting at an activemask()


class _Block:
    """Per BlockManager (numba makes one for each block it runs): its threads by linear id and its warps
    (made when its first thread is)."""

    def __init__(self, block_dim) -> None:
        self.size = int(np.prod(block_dim))
        self.threads: dict[int, Any] = {}
        self.warps = [_Warp() for _ in range(-(-self.size // WARP))]

    def lanes(self, warp: int) -> int:
        """How many lanes warp `warp` has (fewer in a partial last warp)."""
        return min(WARP, self.size - WARP * warp)


def _me():
    t = threading.current_thread()
    block = getattr(getattr(t, "_manager", None), "_kl_block", None)
    if block is None:
        raise WarpError("a warp operation outside a simulated kernel")
    return t, block


def _exited(t) -> bool:
    # The flag alone (set as the thread's run() ends, however it ends): is_alive() is also False while a
    # thread starts (its ident is set before it counts as started), and a lane taken for returned in that
    # window was left out of its warp's first shuffle, which the rest then finished without it; the lane
    # then waited alone at a meeting nobody else would reach (a full suite hung in softmax's online kernel).
    return t is not None and getattr(t, "_kl_exited", False)


def _name(t) -> str:
    return f"thread {tuple(t.threadIdx)} of block {tuple(t.blockIdx)}"


def _meet(op: str, mask: Any, value: Any) -> tuple[int, dict[int, Any]]:
    """The caller's side of a warp operation: post `value`, wait for the other lanes of `mask`.
    Returns (caller's lane, {lane: value} of the lanes that took part)."""
    t, block = _me()
    mask = int(mask) & FULL_MASK
    lane, w = t.thread_id % WARP, t.thread_id // WARP
    if not mask >> lane & 1:
        raise WarpError(f"{op}: lane {lane} ({_name(t)}) calls it with mask {mask:#010x}, which does not name "
                        f"that lane (undefined on a GPU: a lane must be in its own mask)")
    warp, base, n = block.warps[w], w * WARP, block.lanes(w)
    with warp.cond:
        count = warp.calls.get((lane, mask), 0)
        warp.calls[(lane, mask)] = count + 1
        meeting = warp.open.get((mask, count))
        if meeting is None:
            meeting = warp.open[(mask, count)] = _Meeting(op, mask)
        elif meeting.op != op:
            raise WarpError(f"lanes of warp {w} ({_name(t)}) meet at different warp operations with mask "
                            f"{mask:#010x}: {meeting.op} and {op} (undefined on a GPU)")
        meeting.values[lane] = value
        if warp.converging:  # lanes waiting at an activemask() look again: this one waits elsewhere now
            warp.cond.notify_all()
        expected = bin(mask & ((1 << n) - 1)).count("1")
        while not meeting.done:
            if len(meeting.values) < expected and _missing(op, t, block, meeting, base, n):
                _wait(t, warp, meeting)
                continue
            meeting.done = True
            del warp.open[(mask, count)]
            warp.cond.notify_all()
    return lane, meeting.values


def _at_later_syncthreads(other, me) -> bool:
    """Does `other` wait at a syncthreads() that `me` has not reached? (Its flag alone could be stale: a
    released lane clears it only when it runs again; one that `me` has passed is released.)"""
    return other is not None and getattr(other, "_kl_at_syncthreads", False) and \
        getattr(other, "_kl_syncs", 0) > getattr(me, "_kl_syncs", 0)


def _missing(op: str, t, block: _Block, meeting: _Meeting, base: int, n: int) -> bool:
    """Does the meeting still wait for a lane of its mask (one that has not returned)?"""
    for k in range(n):
        if meeting.mask >> k & 1 and k not in meeting.values:
            other = block.threads.get(base + k)
            if _exited(other):
                continue
            if _at_later_syncthreads(other, t):
                raise WarpError(f"{op}: {_name(t)} waits for lane {k} of its warp, which waits at syncthreads(): "
                                f"the lanes of a mask must reach the same warp operations (on a GPU this hangs)")
            return True
    return False


def _undefined(like: Any) -> Any:
    """What a read of a lane that took no part gives: visible when used."""
    if isinstance(like, (float, np.floating)):
        return type(like)("nan")
    if isinstance(like, (bool, np.bool_)):
        return like
    return type(like)(UNDEFINED_INT)


def _shuffle(op: str, mask: Any, value: Any, source) -> Any:
    lane, values = _meet(op, mask, value)
    src = source(lane)
    if src is None:  # outside the warp (PTX: the caller keeps its own value)
        return value
    return values[src] if src in values else _undefined(value)


# PTX shfl.sync uses the low 5 bits of b; up/down/xor sources outside 0..31 give the caller's value
def shfl_sync(self, mask, value, src_lane):
    return _shuffle("shfl_sync", mask, value, lambda lane: int(src_lane) & 31)


def shfl_up_sync(self, mask, value, delta):
    d = int(delta) & 31
    return _shuffle("shfl_up_sync", mask, value, lambda lane: lane - d if lane >= d else None)


def shfl_down_sync(self, mask, value, delta):
    d = int(delta) & 31
    return _shuffle("shfl_down_sync", mask, value, lambda lane: lane + d if lane + d < WARP else None)


def shfl_xor_sync(self, mask, value, lane_mask):
    b = int(lane_mask) & 31
    return _shuffle("shfl_xor_sync", mask, value, lambda lane: lane ^ b)


def _votes(op: str, mask, predicate) -> list[bool]:
    return list(_meet(op, mask, bool(predicate))[1].values())


def all_sync(self, mask, predicate):
    return all(_votes("all_sync", mask, predicate))


def any_sync(self, mask, predicate):
    return any(_votes("any_sync", mask, predicate))


def eq_sync(self, mask, predicate):
    return len(set(_votes("eq_sync", mask, predicate))) == 1


def _int32(bits: int) -> int:
    """A 32-bit pattern as the signed int32 numba returns."""
    return int(np.uint32(bits & FULL_MASK).view(np.int32))


def ballot_sync(self, mask, predicate):
    _, values = _meet("ballot_sync", mask, bool(predicate))
    return _int32(sum(1 << k for k, p in values.items() if p))


def match_any_sync(self, mask, value):
    lane, values = _meet("match_any_sync", mask, value)
    return _int32(sum(1 << k for k, v in values.items() if v == values[lane]))


def match_all_sync(self, mask, value):
    _, values = _meet("match_all_sync", mask, value)
    same = len({v for v in values.values()}) == 1
    return (_int32(sum(1 << k for k in values)) if same else 0), same


def syncwarp(self, mask=FULL_MASK):
    _meet("syncwarp", mask, None)


def activemask(self):
    """The lanes of the caller's warp that reach this call (this line, as often) together: each lane of the
    warp is waited for until it arrives here, returns, or waits elsewhere (syncthreads, another warp
    operation): the lanes converged here, as a GPU's activemask.b32 sees them."""
    t, block = _me()
    caller = sys._getframe(1)
    site = (caller.f_code, caller.f_lineno)
    lane, w = t.thread_id % WARP, t.thread_id // WARP
    warp, base, n = block.warps[w], w * WARP, block.lanes(w)
    with warp.cond:
        count = warp.calls.get((lane, site), 0)
        warp.calls[(lane, site)] = count + 1
        meeting = warp.open.setdefault((site, count), _Meeting("activemask", FULL_MASK))
        meeting.values[lane] = True
        warp.cond.notify_all()  # a lane that waits for this one at another activemask looks again
        warp.converging += 1
        try:
            while not meeting.done:
                if all(k in meeting.values or _elsewhere(block.threads.get(base + k), t) for k in range(n)):
                    meeting.done = True
                    del warp.open[(site, count)]
                    warp.cond.notify_all()
                    break
                _wait(t, warp, meeting)
        finally:
            warp.converging -= 1
    return np.uint32(sum(1 << k for k in meeting.values))


def _elsewhere(other, me) -> bool:
    """Has this lane returned, or does it wait at another barrier (it is not converged with the caller)?"""
    if _exited(other):
        return True
    waits_at = getattr(other, "_kl_waiting", None)  # a meeting: once it is done, the lane is on its way
    return _at_later_syncthreads(other, me) or waits_at is not None and not waits_at.done


def _wait(t, warp: _Warp, meeting: _Meeting) -> None:
    if t.abort:
        raise RuntimeError("abort flag set while waiting at a warp operation")
    t._kl_waiting = meeting
    try:
        warp.cond.wait(_ABORT_POLL_S)
    finally:
        t._kl_waiting = None


def lanemask_lt(self):
    t, _ = _me()
    return np.uint32((1 << (t.thread_id % WARP)) - 1)


def popc(self, val):
    v = int(val)
    if v < 0:  # the two's complement bits of its width (int32 unless it needs 64)
        v &= FULL_MASK if v >= -(1 << 31) else (1 << 64) - 1
    return bin(v).count("1")


DEVICE_OPERATIONS = {f.__name__: f for f in (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, all_sync,
                                             any_sync, eq_sync, ballot_sync, match_any_sync, match_all_sync,
                                             syncwarp, activemask, lanemask_lt, popc)}
DEVICE_OPERATIONS["nanosleep"] = lambda self, ns: nanosleep(ns)  # the same as kernels_lab.intrinsics.nanosleep


# -- installing: the simulator's threads know their block; its in-kernel cuda module gains the rest -----

def installed() -> bool:
    from numba.cuda.simulator import kernelapi
    return getattr(kernelapi.FakeCUDAModule, "kernels_lab_warps", False)


def install() -> None:
    """Patch numba-cuda's simulator (idempotent). Fails with a clear error on another numba-cuda."""
    import numba_cuda
    from numba.cuda.simulator import kernel, kernelapi
    version = getattr(numba_cuda, "__version__", "?")
    if not version.startswith(PINNED + "."):
        raise RuntimeError(f"kernels_lab.sim_device patches numba-cuda {PINNED}'s simulator, found {version}: "
                           f"re-check kernel.BlockThread / BlockManager and kernelapi.FakeCUDAModule, then the pin")
    if installed():
        return
    thread_init, thread_run, thread_sync = kernel.BlockThread.__init__, kernel.BlockThread.run, \
        kernel.BlockThread.syncthreads

    def __init__(self, f, manager, blockIdx, threadIdx, debug):
        thread_init(self, f, manager, blockIdx, threadIdx, debug)
        block = manager.__dict__.get("_kl_block")
        if block is None:  # the manager builds its threads one by one, on one thread: no race here
            block = manager._kl_block = _Block(manager._block_dim)
        block.threads[self.thread_id] = self

    def _wake(self) -> None:  # a lane waiting on this one looks again
        warp = self._manager._kl_block.warps[self.thread_id // WARP]
        with warp.cond:
            warp.cond.notify_all()

    def run(self):
        try:
            thread_run(self)
        finally:
            self._kl_exited = True
            _wake(self)

    def syncthreads(self):
        self._kl_syncs = getattr(self, "_kl_syncs", 0) + 1  # which barrier of the block this is
        self._kl_at_syncthreads = True
        _wake(self)
        try:
            thread_sync(self)
        finally:
            self._kl_at_syncthreads = False

    kernel.BlockThread.__init__, kernel.BlockThread.run, kernel.BlockThread.syncthreads = __init__, run, syncthreads
    for name, fn in DEVICE_OPERATIONS.items():
        setattr(kernelapi.FakeCUDAModule, name, fn)
    kernelapi.FakeCUDAModule.kernels_lab_warps = True


# -- the project's intrinsics (kernels_lab.intrinsics), in Python -------------------------------------
# Each indexes arrays element by element, so the tracer still sees (and bounds-checks) every access.

# The simulator runs one kernel at a time: every dependency is already met, so the two PDL
# instructions do nothing but count their calls (how the grader sees whether a student's kernel
# waits or triggers without PTX to read).
SIM_CALLS = {"wait": 0, "trigger": 0}


def globaltimer() -> int:
    return _time.perf_counter_ns()


def grid_dependency_wait() -> None:
    SIM_CALLS["wait"] += 1


def launch_dependents() -> None:
    SIM_CALLS["trigger"] += 1


class _Order(threading.local):
    """How the global accesses the calling thread makes now are ordered: "plain" (an ordinary load or store),
    "acquire", "relaxed" (a strong read), "release" (a release read-modify-write) or "atomic" (numba's relaxed
    atomics). The simulator's memory is coherent and ignores it; its weak-memory mode (sim_weak.py) reads it."""
    kind = "plain"


ORDER = _Order()


def _ordered(kind: str, access):
    def ordered(*args):
        ORDER.kind = kind
        try:
            return access(*args)
        finally:
            ORDER.kind = "plain"
    return ordered


def _element(a, i):
    return a[i]


load_acquire_sys = _ordered("acquire", _element)
poll_relaxed_sys = _ordered("relaxed", _element)


def load4(a, v):
    i = 4 * v
    return a[i], a[i + 1], a[i + 2], a[i + 3]


def store4(a, v, x, y, z, w) -> None:
    i = 4 * v
    a[i] = x
    a[i + 1] = y
    a[i + 2] = z
    a[i + 3] = w


load4_relaxed_sys = _ordered("relaxed", load4)


def float_bits(x):
    return np.float32(x).view(np.int32)


def _split(word):
    halves = np.asarray(word, np.int64).reshape(1).view(np.int32)  # little-endian: value, mark
    return halves[:1].view(np.float32)[0], halves[1]


def _load_marked2(a, v):
    d0, m0 = _split(a[2 * v])
    d1, m1 = _split(a[2 * v + 1])
    return d0, m0, d1, m1


load_marked2_sys = _ordered("relaxed", _load_marked2)


def nanosleep(ns) -> None:
    _time.sleep(min(int(ns), 1_000_000) * 1e-9)  # a GPU sleeps at most about 1 ms; 0 hands the GIL over


load_acquire_gpu = _ordered("acquire", _element)
RMW_LOCK = threading.Lock()  # sim_weak takes it around numba's atomics too: one lock for every read-modify-write


def _add(a, i, v) -> None:
    a[i] += v


_add_release = _ordered("release", _add)


def add_release_gpu(a, i, v) -> None:
    with RMW_LOCK:  # one instruction on a GPU: atomic; blocks run side by side here too (sim_coresident)
        _add_release(a, i, v)


def prefetch_l2(a, i) -> None:
    pass  # no cache to fill


class _Copies(threading.local):
    """This thread's asynchronous copies (intrinsics.copy16_async): those not yet committed, and the committed
    groups not yet waited for, oldest first. A copy's destination is NaN from its start to its wait, when the
    copy is made: a read before the wait, or a copy started over data not yet read, both show."""

    def __init__(self) -> None:
        self.open: list = []
        self.groups: list = []


_COPIES = _Copies()


def copy16_async(dst, d, src, s, n) -> None:
    for i in range(4):
        dst[4 * d + i] = np.nan  # undefined until the wait (a GPU may land the bytes at any moment before it)
    _COPIES.open.append((dst, 4 * d, src, 4 * s, int(n)))


def async_commit() -> None:
    _COPIES.groups.append(_COPIES.open)
    _COPIES.open = []


def _complete(groups: list) -> None:
    for group in groups:
        for dst, d, src, s, n in group:
            for i in range(4):
                dst[d + i] = src[s + i] if i < n else 0


def async_wait_group(n) -> None:
    finished = max(0, len(_COPIES.groups) - int(n))  # every group but the newest n
    done, _COPIES.groups = _COPIES.groups[:finished], _COPIES.groups[finished:]
    _complete(done)
