"""Count kernel launches through one hook on numba's launch path, on both back-ends.

numba internals touched here and nowhere else (pinned to numba-cuda 0.30):
  GPU:       numba.cuda.dispatcher._Kernel.launch(self, args, griddim, blockdim, stream, sharedmem)
  simulator: numba.cuda.simulator.kernel.FakeCUDAKernel.__call__(self, *args)
tests/test_launch_hook.py fails loudly if either moves. Launches that bypass numba (a pre-bound
cuda.core launch, a graph replay) are reported by their launcher through `external_launch`.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..runtime import ON_SIMULATOR

SUPPORTED_NUMBA_CUDA = "0.30."


@dataclass(frozen=True)
class LaunchRecord:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    via: str = "numba"  # or "cuda.core", "graph"
    stream: Any = field(default=0, compare=False, repr=False)  # where it was enqueued (for event timelines)


# Listeners see every launch: begin(record, args, py_func) before it runs, end(record)
# after (on the simulator "after" means finished; on a GPU it means enqueued).
Begin = Callable[[LaunchRecord, tuple, Any], None]
Listener = tuple[Begin, Callable[[LaunchRecord], None]]
_listeners: list[Listener] = []
_lock = threading.Lock()
_installed = False
_dry = threading.local()  # .on: the simulator records launches without running them (see `dry_run`)


def _dim3(d: Any) -> tuple[int, int, int]:
    if isinstance(d, int):
        return (d, 1, 1)
    t = tuple(int(x) for x in (d.x, d.y, d.z)) if hasattr(d, "x") else tuple(int(x) for x in d)
    return (t + (1, 1, 1))[:3]


def _notify_begin(rec: LaunchRecord, args: tuple, py_func: Any = None) -> None:
    for begin, _ in list(_listeners):
        begin(rec, args, py_func)


def _notify_end(rec: LaunchRecord) -> None:
    for _, end in list(_listeners):
        end(rec)


_UNHEARD = nullcontext()  # one shared no-op: the common case costs no generator per launch


def external_launch(kernel: str, grid: Any, block: Any, via: str, stream: Any = 0):
    """with external_launch(...): <enqueue>  -- for launch paths that bypass numba's dispatcher."""
    if not _listeners:
        return _UNHEARD
    return _heard(LaunchRecord(kernel, _dim3(grid), _dim3(block), via, stream))


@contextmanager
def _heard(rec: LaunchRecord) -> Iterator[None]:
    _notify_begin(rec, ())
    try:
        yield
    finally:
        _notify_end(rec)


def check_numba_cuda_version(module: str = "kernels_lab/profile/launches.py") -> None:
    """The modules that touch numba internals are written for one numba-cuda series."""
    from importlib.metadata import version
    v = version("numba-cuda")
    if not v.startswith(SUPPORTED_NUMBA_CUDA):
        raise RuntimeError(f"{module} touches numba internals written for numba-cuda {SUPPORTED_NUMBA_CUDA}*, "
                           f"found {v}: re-check it")


def install() -> None:
    """Patch the launch path once. Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        check_numba_cuda_version()
        if ON_SIMULATOR:
            from numba.cuda.simulator import kernel as simkernel
            original = simkernel.FakeCUDAKernel.__call__

            def call(self, *args):
                if self._device or simkernel._get_kernel_context() is not None:
                    return original(self, *args)  # a device function, not a launch
                rec = LaunchRecord(self.fn.__name__, _dim3(self.grid_dim), _dim3(self.block_dim))
                _notify_begin(rec, args, self.fn)
                try:
                    return None if getattr(_dry, "on", False) else original(self, *args)
                finally:
                    _notify_end(rec)

            simkernel.FakeCUDAKernel.__call__ = call
        else:
            from numba.cuda import dispatcher
            original = dispatcher._Kernel.launch

            def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
                rec = LaunchRecord(self.py_func.__name__, _dim3(griddim), _dim3(blockdim), stream=stream)
                _notify_begin(rec, tuple(args), self.py_func)
                try:
                    return original(self, args, griddim, blockdim, stream, sharedmem)
                finally:
                    _notify_end(rec)

            dispatcher._Kernel.launch = launch
        _installed = True


@contextmanager
def listening(begin: Begin,
              end: Callable[[LaunchRecord], None] = lambda rec: None) -> Iterator[None]:
    install()
    entry = (begin, end)
    _listeners.append(entry)
    try:
        yield
    finally:
        _listeners.remove(entry)


@contextmanager
def dry_run() -> Iterator[None]:
    """Simulator only: launches made inside (on this thread) reach the listeners but do not run, so a
    variant's kernels and argument types can be collected without simulating every thread. Outputs are
    left as they were: only for code that does not read them back."""
    if not ON_SIMULATOR:
        raise RuntimeError("dry_run() skips kernels on the simulator only; a GPU launch is already asynchronous")
    install()
    _dry.on = True
    try:
        yield
    finally:
        _dry.on = False


@contextmanager
def count_launches() -> Iterator[list[LaunchRecord]]:
    """with count_launches() as launches: ...  -> every launch made inside, in order."""
    seen: list[LaunchRecord] = []
    with listening(lambda rec, args, fn: seen.append(rec)):
        yield seen
