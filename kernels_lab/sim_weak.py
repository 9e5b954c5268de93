"""A weak-memory mode for numba's CUDA simulator: ordering bugs that give wrong answers on a laptop.

The simulator's global memory is one coherent NumPy buffer and its fences are no-ops, so a protocol
without its fence, or a poll by a plain load, gives right answers there (and almost always on a GPU).
Inside `weak_memory(seed)` global memory behaves as the PTX memory model allows it to:

  store buffer   a block's plain global stores are seen by its own threads at once, by other blocks only
                 once the block drains them: cuda.threadfence() / threadfence_system() by any of its
                 threads drains the whole block's buffer (the stores of the others reach it through the
                 block barrier before it: cumulativity), as does a release (add_release_gpu) and the
                 kernel's end. threadfence_block() drains nothing. A store may also drain early (the seed
                 decides), but an early store is not *released*: nobody is told it is there.
  views          a plain load of a location another block wrote returns the value as of this block's view,
                 which moves only at an acquire: a load_acquire_* reading a released value, or a fence after
                 a strong read (relaxed poll, numba atomic) of one. Otherwise the load is served stale: the
                 newest value the view allows, or (an L1 miss, the seed decides) the newest value there is.
                 A thread never reads a location older than it read it before (coherence).
  strong reads   numba's atomics (relaxed), poll_relaxed_sys and the acquire loads act on the newest value
                 (L2). Atomics neither drain the buffer nor move the view; a later fence makes what they
                 read an acquire (fence-after-read). Views are times on one clock, so a release publishes
                 what its block has seen too (cumulativity), and an atomic add after a release keeps the
                 release's publication (a release sequence).

Only global memory (device and mapped arrays) is weak; shared and local memory stay coherent within a block.
Blocks are told apart by blockIdx, so kernels whose blocks run side by side (sim_coresident) are covered too.
Memory handed out by cuda.device_array(_like) inside the mode is poisoned (NaN, or all bits set), as a GPU's
is uninitialised, so a stale read of it shows.

Deterministic under a seed: every random choice is drawn from a generator per (seed, launch, block, thread),
in that thread's program order. Where blocks run one after another (the simulator's default) a run repeats
exactly; where they run side by side, which value a racing read gets can vary, never whether a correct
protocol is right (its reads are covered by its views). The model is stronger than PTX's in places (one clock
for every view, a block's threads share one view, a store is buffered per block, not per thread), so it can
miss a bug a GPU could show, never fail a correct program. Limits: an element is one location (aliasing
views of another dtype are not tracked); slices are accessed coherently; the host's writes to mapped memory
during a kernel are not seen where a block has written that element.

numba-cuda 0.30 internals touched here and nowhere else: cudadrv.devicearray.FakeCUDAArray.__getitem__ /
__setitem__ (what FakeWithinKernelCUDAArray, and the byte tracer's hook on it, call: both can be on),
kernelapi.FakeCUDAModule.threadfence / threadfence_system, kernelapi.FakeCUDAAtomic's methods, the
BlockThread's _manager / blockIdx / threadIdx, and numba.cuda.device_array(_like). tests/test_sim_weak.py
fails loudly when one moves.
"""

from __future__ import annotations

import inspect
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from . import sim_device
from .instrument import launch_hook
from .runtime import ON_SIMULATOR

PINNED = "0.30"          # the numba-cuda minor version whose simulator this module patches
FRESH = 0.25             # chance that a plain load the view would serve stale misses L1 and gets the newest value
EARLY_DRAIN = 0.25       # chance that a plain store leaves the block's buffer at once (unreleased)
T = TypeVar("T")


@dataclass
class WeakMemory:
    """The mode's settings and what it did (counted over every launch inside the context)."""

    seed: int
    fresh: float = FRESH
    early_drain: float = EARLY_DRAIN
    launches: int = 0
    buffered_stores: int = 0     # plain global stores that went to a block's buffer
    stale_reads: int = 0         # plain loads served an older value than the newest store (in memory or a buffer)
    fences: int = 0              # fences and releases that drained a block's buffer
    stale_by_array: dict[str, int] = field(default_factory=dict)  # kernel parameter -> stale reads

    def describe(self) -> str:
        return (f"weak memory (seed {self.seed}): {self.launches} launch(es), {self.buffered_stores} buffered "
                f"stores, {self.fences} drains by fence or release, {self.stale_reads} stale reads" +
                (" (" + ", ".join(f"{k}: {v}" for k, v in sorted(self.stale_by_array.items())) + ")"
                 if self.stale_by_array else ""))


@dataclass
class WeakRun:
    """What run_weak returns: the callable's result and the mode's account of the run."""

    result: Any
    memory: WeakMemory


# -- the state of one launch ------------------------------------------------------------------------------

class _Block:
    __slots__ = ("buffer", "view", "pending", "released", "own")

    def __init__(self) -> None:
        self.buffer: dict[int, tuple[np.ndarray, tuple, Any]] = {}  # address -> (array, index, value), in order
        self.view = 0        # the clock time this block's plain loads of others' writes are served at
        self.pending = 0     # the newest publication a strong read saw: a fence makes it the view
        self.released = 0    # the clock time of this block's last drain by fence or release
        self.own: dict[int, int] = {}  # address -> index in its history of this block's newest write


class _Thread:
    __slots__ = ("rng", "seen", "rmw_published")

    def __init__(self, seed: str) -> None:
        self.rng = np.random.default_rng(list(seed.encode()))
        self.seen: dict[int, int] = {}  # address -> index in its history of the newest value this thread read
        self.rmw_published = 0          # what the read half of a read-modify-write saw published


class _Launch:
    """Memory as the blocks of one launch see it. Every write that reached L2 is kept per address as
    (time, value, published): `published` is the clock time whose writes a block that acquires it may see."""

    def __init__(self, mode: WeakMemory, number: int, labels: dict[int, str]) -> None:
        self.mode, self.number, self.labels = mode, number, labels
        self.lock = threading.RLock()
        self.clock = 0
        self.history: dict[int, list[tuple[int, Any, int]]] = {}
        self.blocks: dict[tuple, _Block] = {}

    def block(self, t) -> _Block:
        key = tuple(t.blockIdx)
        b = self.blocks.get(key)
        if b is None:
            b = self.blocks[key] = _Block()
        return b

    def thread(self, t) -> _Thread:
        th = t.__dict__.get("_kl_weak")
        if th is None:  # numba makes new threads for every block of every launch
            th = t._kl_weak = _Thread(f"{self.mode.seed}/{self.number}/{tuple(t.blockIdx)}/{tuple(t.threadIdx)}")
        return th

    # -- L2 ----------------------------------------------------------------------------------------------
    def _write(self, b: _Block, key: int, ary: np.ndarray, idx: tuple, value: Any, time: int, published: int):
        hist = self.history.get(key)
        if hist is None:  # memory holds the value the kernel started with
            hist = self.history[key] = [(0, ary[idx], 0)]
        hist.append((time, value, published))
        ary[idx] = value
        b.own[key] = len(hist) - 1

    def _drain_one(self, b: _Block, key: int) -> None:
        entry = b.buffer.pop(key, None)
        if entry is not None:
            self.clock += 1
            self._write(b, key, *entry, self.clock, b.released)

    def release(self, b: _Block) -> None:
        """Drain the block's buffer: its stores reach L2, published at this time."""
        self.clock += 1
        now = self.clock
        for key, entry in b.buffer.items():
            self._write(b, key, *entry, now, now)
        b.buffer.clear()
        b.released = now
        self.mode.fences += 1

    def fence(self, t) -> None:
        with self.lock:
            b = self.block(t)
            self.release(b)
            b.view = max(b.view, b.pending)

    # -- loads and stores --------------------------------------------------------------------------------
    def load(self, t, ary: np.ndarray, idx: tuple, key: int, label: Callable[[], str]) -> Any:
        kind = sim_device.ORDER.kind
        with self.lock:
            b, th = self.block(t), self.thread(t)
            if kind == "plain":
                if key in b.buffer:
                    return b.buffer[key][2]
                hist = self.history.get(key)
                at = 0
                if hist is not None:
                    at = max(_visible(hist, b.view), th.seen.get(key, 0), b.own.get(key, 0))
                    if at < len(hist) - 1 and th.rng.random() < self.mode.fresh:
                        at = len(hist) - 1  # an L1 miss
                    th.seen[key] = at
                if (hist is not None and at < len(hist) - 1) or any(key in o.buffer for o in self.blocks.values()):
                    self._count_stale(label())
                return ary[idx] if hist is None else hist[at][1]  # unwritten in this launch: its first value
            if kind == "release":
                self.release(b)
            if kind in ("release", "atomic"):
                self._drain_one(b, key)  # its own earlier store to the word comes first (program order)
            if key in b.buffer:
                return b.buffer[key][2]
            hist = self.history.get(key)
            value, published = (hist[-1][1], hist[-1][2]) if hist else (ary[idx], 0)
            if hist:
                th.seen[key] = len(hist) - 1
            if kind == "acquire":
                b.view = max(b.view, published)
            else:
                b.pending = max(b.pending, published)
            th.rmw_published = published
            return value

    def _count_stale(self, name: str) -> None:
        """A plain load served an older value than the newest store to it (in memory or in a buffer)."""
        self.mode.stale_reads += 1
        self.mode.stale_by_array[name] = self.mode.stale_by_array.get(name, 0) + 1

    def store(self, t, ary: np.ndarray, idx: tuple, key: int, value: Any) -> None:
        kind = sim_device.ORDER.kind
        value = ary.dtype.type(value)
        with self.lock:
            b, th = self.block(t), self.thread(t)
            if kind == "plain":
                b.buffer.pop(key, None)  # a later store to the word goes behind the block's others
                b.buffer[key] = (ary, idx, value)
                self.mode.buffered_stores += 1
                if th.rng.random() < self.mode.early_drain:
                    self._drain_one(b, key)
                return
            # the write half of an atomic or a release add: at L2, keeping what the value it replaced published
            self.clock += 1
            self._write(b, key, ary, idx, value, self.clock, max(b.released, th.rmw_published))

    def end(self) -> None:
        with self.lock:
            for key in sorted(self.blocks):
                self.release(self.blocks[key])
                self.mode.fences -= 1  # the kernel's end is no fence of the kernel's


def _visible(hist: list[tuple[int, Any, int]], view: int) -> int:
    """The index of the newest write at or before `view`."""
    for i in range(len(hist) - 1, 0, -1):
        if hist[i][0] <= view:
            return i
    return 0


# -- hooks into the simulator ------------------------------------------------------------------------------

_MODE: WeakMemory | None = None
_LAUNCH: _Launch | None = None
_installed = False
_install_lock = threading.Lock()


def _element(ary: np.ndarray, idx) -> tuple[tuple, int] | None:
    """(normalised index, byte address) of one element of `ary`, or None when idx names more than one."""
    if ary.dtype.fields is not None:
        return None
    idx = idx if type(idx) is tuple else (idx,)
    if len(idx) != ary.ndim:
        return None
    address, norm = ary.__array_interface__["data"][0], []
    for i, n, stride in zip(idx, ary.shape, ary.strides):
        if not isinstance(i, (int, np.integer)) or isinstance(i, (bool, np.bool_)):
            return None
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis with size {n}")
        i += n if i < 0 else 0
        norm.append(i)
        address += i * stride
    return tuple(norm), address


def _kernel_thread():
    """The simulated GPU thread making this access, or None (the host, or no launch in weak mode)."""
    if _LAUNCH is None:
        return None
    t = threading.current_thread()
    return t if getattr(t, "_manager", None) is not None else None


def install() -> None:
    """Patch the simulator's global arrays, fences and atomics (idempotent; inert outside weak_memory)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        check_numba()
        from numba.cuda.simulator import kernelapi
        from numba.cuda.simulator.cudadrv import devicearray

        cls = devicearray.FakeCUDAArray
        get_original, set_original = cls.__getitem__, cls.__setitem__

        def getitem(self, idx):
            t = _kernel_thread()
            element = _element(self._ary, idx) if t is not None else None
            if element is None:
                return get_original(self, idx)
            launch = _LAUNCH
            return launch.load(t, self._ary, *element, lambda: _label(launch, self._ary))

        def setitem(self, idx, val):
            t = _kernel_thread()
            element = _element(self._ary, idx) if t is not None else None
            if element is None:
                return set_original(self, idx, val)
            _LAUNCH.store(t, self._ary, *element, val)

        cls.__getitem__, cls.__setitem__ = getitem, setitem

        def fence(original):
            def threadfence(self):
                t = _kernel_thread()
                if t is not None:
                    _LAUNCH.fence(t)
                return original(self)
            return threadfence

        module = kernelapi.FakeCUDAModule
        module.threadfence = fence(module.threadfence)
        module.threadfence_system = fence(module.threadfence_system)

        def atomic(original):
            def rmw(self, *args):
                if _kernel_thread() is None:
                    return original(self, *args)
                with sim_device.RMW_LOCK, _LAUNCH.lock:  # one read-modify-write at a time, as add_release_gpu
                    sim_device.ORDER.kind = "atomic"
                    try:
                        return original(self, *args)
                    finally:
                        sim_device.ORDER.kind = "plain"
            return rmw

        for name in _ATOMICS:
            setattr(kernelapi.FakeCUDAAtomic, name, atomic(getattr(kernelapi.FakeCUDAAtomic, name)))
        _installed = True


_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin",
            "compare_and_swap", "cas")


def _label(launch: _Launch, ary: np.ndarray) -> str:
    root = ary
    while isinstance(root.base, np.ndarray):
        root = root.base
    return launch.labels.get(id(root), "<array>")


def check_numba() -> None:
    """Fail loudly where numba-cuda's simulator is not the one this module was written for."""
    import numba_cuda
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray
    version = getattr(numba_cuda, "__version__", "?")
    problems = [] if version.startswith(PINNED + ".") else [f"numba-cuda {version}, not {PINNED}.x"]
    for owner, names in ((devicearray.FakeCUDAArray, ("__getitem__", "__setitem__")),
                         (kernelapi.FakeCUDAModule, ("threadfence", "threadfence_system", "threadfence_block")),
                         (kernelapi.FakeCUDAAtomic, _ATOMICS)):
        problems += [f"{owner.__name__}.{n} is gone" for n in names if not callable(getattr(owner, n, None))]
    source = inspect.getsource(kernel.BlockThread)  # the class as numba wrote it (sim_device wraps __init__)
    problems += [f"BlockThread no longer sets self.{n}" for n in ("_manager", "blockIdx", "threadIdx")
                 if f"self.{n} =" not in source]
    if problems:
        raise RuntimeError("kernels_lab.sim_weak patches numba-cuda " + PINNED + "'s simulator: " +
                           "; ".join(problems) + ": re-check the hooks, then the pin")


# -- turning it on -------------------------------------------------------------------------------------------

def _poison(ary: np.ndarray) -> None:
    if ary.dtype.kind in "fc":
        ary.fill(np.nan)
    elif ary.dtype.fields is None:
        ary.view(np.uint8).fill(0xFF)


def _poisoned(allocate):
    def poisoned(*args, **kwargs):
        made = allocate(*args, **kwargs)
        _poison(made._ary)
        return made
    poisoned.__wrapped__ = allocate
    return poisoned


@contextmanager
def weak_memory(seed: int = 0, *, fresh: float = FRESH, early_drain: float = EARLY_DRAIN) -> Iterator[WeakMemory]:
    """with weak_memory(seed) as mode: kernels launched inside run with weak global memory (module docstring);
    `mode` counts what it did (mode.describe()). Simulator only; one at a time."""
    global _MODE, _LAUNCH
    if not ON_SIMULATOR:
        raise RuntimeError("weak_memory() models a GPU's memory ordering on the CUDA simulator "
                           "(KERNELS_LAB_BACKEND=sim); a GPU's memory is weak already")
    for what, p in (("fresh", fresh), ("early_drain", early_drain)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"weak_memory({what}={p!r}): a probability between 0 and 1")
    if _MODE is not None:
        raise RuntimeError("weak_memory() is already on (one mode at a time)")
    install()
    from numba import cuda
    mode = _MODE = WeakMemory(int(seed), fresh, early_drain)

    def begin(rec, args, py_func) -> None:
        global _LAUNCH
        labels = {}
        for name, arg in zip(_params(py_func, len(args)), args):
            ary = getattr(arg, "_ary", arg)
            if isinstance(ary, np.ndarray):
                while isinstance(ary.base, np.ndarray):
                    ary = ary.base
                labels.setdefault(id(ary), name)
        _LAUNCH = _Launch(mode, mode.launches, labels)
        mode.launches += 1

    def end(rec) -> None:
        global _LAUNCH
        if _LAUNCH is not None:
            _LAUNCH.end()
            _LAUNCH = None

    allocators = {n: getattr(cuda, n) for n in ("device_array", "device_array_like")}
    try:
        for n, f in allocators.items():
            setattr(cuda, n, _poisoned(f))
        with launch_hook.listening(begin, end):
            yield mode
    finally:
        for n, f in allocators.items():
            setattr(cuda, n, f)
        _MODE = _LAUNCH = None


def _params(py_func, n: int) -> list[str]:
    code = getattr(py_func, "__code__", None)
    names = list(code.co_varnames[:code.co_argcount]) if code is not None else []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def run_weak(fn: Callable[[], T], seed: int = 0, **options: float) -> WeakRun:
    """fn() with weak memory on under `seed` (options: fresh, early_drain): its result and the mode's account.
    The grader's entry: run a student's kernel this way in its child, then check the result as usual."""
    with weak_memory(seed, **options) as mode:
        result = fn()
    return WeakRun(result, mode)


def active() -> WeakMemory | None:
    """The mode that is on, or None."""
    return _MODE
