"""Trace global-memory traffic on the simulator: every element each kernel reads and writes.

The simulator hands a kernel its global arrays wrapped in FakeWithinKernelCUDAArray and
routes every a[i] / a[i] = v through its __getitem__ / __setitem__; shared and local arrays
are plain NumPy arrays and never pass here, so what is counted is global traffic only.
This module is the one place that touches that class (numba-cuda 0.30; tests/test_trace.py
fails loudly if it moves).

Besides counting, the tracer can
  - remember which block and thread last wrote each element (for grading feedback), and
  - perturb the thread schedule: the seed splits each block's threads into a fast and a slow
    half, and slow threads sleep at a random fraction of their global accesses, so that a
    kernel that races (a missing syncthreads) reads data its slow partners have not written
    yet and fails, instead of passing by luck. Several seeds give several splits.
"""

from __future__ import annotations

import inspect
import random
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..backend import BACKEND
from . import launch_hook

@dataclass
class ArrayTraffic:
    itemsize: int
    reads: int = 0   # elements
    writes: int = 0

    @property
    def bytes_read(self) -> int:
        return self.reads * self.itemsize

    @property
    def bytes_written(self) -> int:
        return self.writes * self.itemsize


@dataclass
class LaunchTrace:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arrays: dict[str, ArrayTraffic] = field(default_factory=dict)

    @property
    def bytes_read(self) -> int:
        return sum(a.bytes_read for a in self.arrays.values())

    @property
    def bytes_written(self) -> int:
        return sum(a.bytes_written for a in self.arrays.values())

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass
class Trace:
    launches: list[LaunchTrace] = field(default_factory=list)
    # (array label, flat index) -> (blockIdx, threadIdx) of the last writer, when asked for
    last_writer: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    @property
    def bytes_read(self) -> int:
        return sum(t.bytes_read for t in self.launches)

    @property
    def bytes_written(self) -> int:
        return sum(t.bytes_written for t in self.launches)

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written


class _Tracer:
    def __init__(self, writers: bool, perturb_seed: int | None, yield_probability: float):
        self.trace = Trace()
        self.writers = writers
        self.rng = random.Random(perturb_seed) if perturb_seed is not None else None
        self.seed = perturb_seed
        self.slow: dict[tuple, bool] = {}
        self.p_yield = yield_probability
        self.lock = threading.Lock()
        self.current: LaunchTrace | None = None
        self.labels: dict[int, str] = {}

    # launch listener -------------------------------------------------------------
    def begin(self, rec: launch_hook.LaunchRecord, args: tuple, py_func) -> None:
        self.current = LaunchTrace(rec.kernel, rec.grid, rec.block)
        self.labels = {}
        names = _param_names(py_func, len(args))
        for name, arg in zip(names, args):
            ary = getattr(arg, "_ary", None)
            if isinstance(ary, np.ndarray):
                self.labels.setdefault(id(_root(ary)), name)  # an array passed twice: first name
        self.trace.launches.append(self.current)

    def end(self, rec: launch_hook.LaunchRecord) -> None:
        self.current = None

    # array access ---------------------------------------------------------------------
    def access(self, wrapper, idx, count: int, write: bool) -> None:
        cur = self.current
        if cur is None or count == 0:
            return
        ary = wrapper._item._ary
        label = self.labels.get(id(_root(ary)), "<array>")
        with self.lock:
            traffic = cur.arrays.get(label)
            if traffic is None:
                traffic = cur.arrays[label] = ArrayTraffic(ary.dtype.itemsize)
            if write:
                traffic.writes += count
            else:
                traffic.reads += count
            if write and self.writers:
                flat = _flat_index(ary, idx)
                if flat is not None:
                    th = threading.current_thread()
                    where = (tuple(getattr(th, "blockIdx", ())), tuple(getattr(th, "threadIdx", ())))
                    self.trace.last_writer[(label, flat)] = where
            yield_now = self.rng is not None and self._slow(threading.current_thread()) \
                and self.rng.random() < self.p_yield
        if yield_now:
            time.sleep(0.001)  # a slow thread: its partners run ahead of it

    def _slow(self, thread) -> bool:
        key = (getattr(thread, "blockIdx", None), getattr(thread, "threadIdx", None))
        key = (tuple(key[0]) if key[0] is not None else (), tuple(key[1]) if key[1] is not None else ())
        slow = self.slow.get(key)
        if slow is None:
            slow = self.slow[key] = random.Random(hash((self.seed, key))).random() < 0.5
        return slow


def _param_names(py_func, nargs: int) -> list[str]:
    try:
        names = list(inspect.signature(py_func).parameters)[:nargs]
    except (TypeError, ValueError):
        names = []
    return names + [f"arg{i}" for i in range(len(names), nargs)]


def _root(ary: np.ndarray) -> np.ndarray:
    while isinstance(ary.base, np.ndarray):
        ary = ary.base
    return ary


def _flat_index(ary: np.ndarray, idx) -> int | None:
    """Flat element offset into the root buffer (None for slices)."""
    try:
        if isinstance(idx, tuple):
            idx = tuple(int(i) for i in idx)
        else:
            idx = (int(idx),)
        idx = tuple(i + s if i < 0 else i for i, s in zip(idx, ary.shape))
        root = _root(ary)
        offset = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        offset += sum(i * st for i, st in zip(idx, ary.strides))
        return offset // ary.dtype.itemsize
    except (TypeError, ValueError):
        return None


def _is_scalar_index(idx) -> bool:
    if isinstance(idx, tuple):
        return all(isinstance(i, (int, np.integer)) for i in idx)
    return isinstance(idx, (int, np.integer))


_active: list[_Tracer] = []
_patched = False


def _patch() -> None:
    global _patched
    if _patched:
        return
    from numba.cuda.simulator.cudadrv import devicearray as simarray
    cls = simarray.FakeWithinKernelCUDAArray
    get_original, set_original = cls.__getitem__, cls.__setitem__

    def getitem(self, idx):
        value = get_original(self, idx)
        if _active and not isinstance(value, cls):  # a view is not an access: its elements are
            n = 1 if _is_scalar_index(idx) else int(np.size(value))
            for tracer in list(_active):
                tracer.access(self, idx, n, write=False)
        return value

    def setitem(self, idx, val):
        if _active:
            n = 1 if _is_scalar_index(idx) else int(np.size(self._item._ary[idx]))
            for tracer in list(_active):
                tracer.access(self, idx, n, write=True)
        set_original(self, idx, val)

    cls.__getitem__, cls.__setitem__ = getitem, setitem
    _patched = True


@contextmanager
def tracing(writers: bool = False, perturb_seed: int | None = None,
            yield_probability: float = 0.05) -> Iterator[Trace]:
    """with tracing() as trace: ...  -> per launch, per array, elements read and written.

    Only the simulator can trace; on a GPU use Nsight Compute (instrument.ncu).
    """
    if not BACKEND.can_trace:
        raise RuntimeError("memory tracing needs the CUDA simulator (KERNELS_LAB_BACKEND=sim); "
                           "on a GPU, measure DRAM bytes with Nsight Compute instead")
    _patch()
    tracer = _Tracer(writers, perturb_seed, yield_probability)
    _active.append(tracer)
    try:
        with launch_hook.listening(tracer.begin, tracer.end):
            yield tracer.trace
    finally:
        _active.remove(tracer)


class _Watcher:
    """A callback among the active tracers (see watching)."""

    def __init__(self, callback) -> None:
        self.callback = callback

    def access(self, wrapper, idx, count: int, write: bool) -> None:
        self.callback(wrapper._item._ary, idx, write)


@contextmanager
def watching(callback) -> Iterator[None]:
    """with watching(f): f(array, index, write) for every global access of a kernel, in the thread that
    makes it (simulator only): for checks of ORDER, such as a read before the PDL wait (pdl_rules)."""
    if not BACKEND.can_trace:
        raise RuntimeError("watching accesses needs the CUDA simulator (KERNELS_LAB_BACKEND=sim)")
    _patch()
    watcher = _Watcher(callback)
    _active.append(watcher)
    try:
        yield
    finally:
        _active.remove(watcher)


def per_array(trace: Trace) -> dict[str, ArrayTraffic]:
    """Traffic summed over launches, per array label."""
    total: dict[str, ArrayTraffic] = defaultdict(lambda: ArrayTraffic(0))
    for lt in trace.launches:
        for name, t in lt.arrays.items():
            acc = total[name]
            acc.itemsize = t.itemsize
            acc.reads += t.reads
            acc.writes += t.writes
    return dict(total)
