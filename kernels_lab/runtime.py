"""GPU or simulator: decided once, before numba is imported.

Everything in kernels_lab imports this module first. It picks the back-end, applies the
numpy shim numba-cuda 0.30 needs on numpy >= 2.5, and answers questions about the device
(name, compute capability, SMs, L2). What each back-end does differently (jit options, launches,
grids, sizes, timing) is the object backend.BACKEND built from this decision; what the simulator
lacks and can be given, warp operations among them, is added by sim_device.py, installed from here.

Back-end choice, in order:
  KERNELS_LAB_BACKEND=gpu  -> a real GPU, or a clear error if there is none;
  KERNELS_LAB_BACKEND=sim  -> numba's CUDA simulator;
  KERNELS_LAB_BACKEND=ptx  -> numba's real compiler without a GPU: kernels compile to PTX
                              (cuda.compile_ptx, needs NVVM: the [cu13] extra) but never launch;
  unset / "auto"           -> the GPU when the CUDA driver loads and sees a device,
                              else the simulator (NUMBA_ENABLE_CUDASIM=1 also forces it).

A request that cannot be met is a BackendError at import, naming the fix. The `kernels-lab`
command is the exception: there the import falls back to the simulator and keeps the message in
BACKEND_ERROR, which the CLI prints as one line (and `doctor` reports as a problem).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

BACKEND_ENV = "KERNELS_LAB_BACKEND"
_SIM_ENV = "NUMBA_ENABLE_CUDASIM"


class BackendError(RuntimeError):
    """The requested back-end cannot be used on this machine."""


def _gpu_visible() -> tuple[bool, str]:
    """Ask the CUDA driver directly (ctypes), so numba is not imported to find out."""
    from .capabilities import gpu
    ok, why = gpu()
    return ok, why


def _choose_backend() -> str:
    raw = os.environ.get(BACKEND_ENV, "auto")
    asked = raw.strip().lower() or "auto"
    if asked not in ("auto", "gpu", "sim", "simulator", "ptx"):
        raise BackendError(f"{BACKEND_ENV}={raw!r} is not a back-end: expected gpu, sim, ptx or auto "
                           f"(unset it to choose automatically)")
    forced_sim = os.environ.get(_SIM_ENV, "0") not in ("", "0")
    if asked in ("sim", "simulator"):
        return "simulator"
    if asked == "ptx":
        if forced_sim:
            raise BackendError(f"{BACKEND_ENV}=ptx but {_SIM_ENV}=1 is set: unset one of them")
        return "ptx"
    if asked == "gpu":
        if forced_sim:
            raise BackendError(f"{BACKEND_ENV}=gpu but {_SIM_ENV}=1 is set: unset one of them")
        ok, why = _gpu_visible()
        if not ok:
            raise BackendError(f"{BACKEND_ENV}=gpu was asked for, but {why}. "
                               f"Use {BACKEND_ENV}=sim to run on numba's CUDA simulator.")
        return "gpu"
    if forced_sim:
        return "simulator"
    return "gpu" if _gpu_visible()[0] else "simulator"


def apply_numpy_shim(np_module=None) -> bool:
    """numba-cuda 0.30.4 calls numpy.row_stack, removed in numpy 2.5: alias it to vstack.

    Guarded: it only fills a hole, never replaces an attribute that exists. Returns True
    when it patched something. Kept in this one place; tests/test_runtime.py covers it.
    """
    if np_module is None:
        import numpy as np_module
    if hasattr(np_module, "row_stack"):
        return False
    np_module.row_stack = np_module.vstack
    return True


def _numba_already_imported_with_other_backend(backend: str) -> bool:
    if "numba.cuda" not in sys.modules:
        return False
    from numba import config
    return bool(config.ENABLE_CUDASIM) != (backend == "simulator")


def _invoked_as_cli() -> bool:
    """Is this process the kernels-lab command (its console script, or python -m kernels_lab.cli)?
    Its package is imported before its main() runs, so it could not catch an import error."""
    if os.path.basename(sys.argv[0] if sys.argv else "") in ("kernels-lab", "kernels-lab.exe"):
        return True
    argv = list(getattr(sys, "orig_argv", ()))
    return any(a == "-m" and b in ("kernels_lab.cli", "kernels_lab") for a, b in zip(argv, argv[1:]))


BACKEND_ERROR: str | None = None  # set only in the CLI: the back-end request that could not be met
try:
    BACKEND_NAME: str = _choose_backend()
except BackendError as _e:
    if not _invoked_as_cli():
        raise
    BACKEND_ERROR, BACKEND_NAME = str(_e), "simulator"  # the CLI reports it; doctor still runs
if _numba_already_imported_with_other_backend(BACKEND_NAME):
    raise BackendError(f"numba.cuda was imported before kernels_lab with the other back-end; "
                       f"import kernels_lab first (or set {_SIM_ENV} consistently)")
if BACKEND_NAME == "simulator":
    os.environ[_SIM_ENV] = "1"
apply_numpy_shim()

from numba import cuda  # noqa: E402  (must follow the back-end decision)


def _fix_simulator_shared_arrays() -> None:
    """numba-cuda 0.30's simulator creates a block's shared array with an unlocked
    check-then-set, so two threads starting at once can get two different arrays: a rare,
    timing-dependent wrong answer in any kernel that uses shared memory (seen in this
    project's tests). The same lookup, under a lock. Tested in tests/test_runtime.py.
    `array.key(caller)` makes the lookup key from the kernel's source line (or the dynamic buffer's name):
    sim_coresident widens it with the block for kernels whose blocks run side by side, so that each block has
    its own dynamic shared memory too."""
    import sys as _sys
    import threading as _threading
    import traceback as _traceback

    import numpy as _np
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array
    lock = _threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None:
            return original(self, shape, dtype, alignment)  # the simulator's error
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        if shape == 0:  # dynamic shared memory: the launch's bytes, every dtype a view of them (numba's rule)
            key = array.key(("dynamic shared memory", 0))
            with lock:
                res = self._allocations.get(key)
                if res is None:
                    res = self._allocations[key] = _np.zeros(self._dynshared_size, _np.byte)
            return _np.frombuffer(res.data, dtype=dtype, count=self._dynshared_size // _np.dtype(dtype).itemsize)
        key = array.key(_traceback.extract_stack(_sys._getframe())[-2][0:2])  # the kernel's source line
        with lock:
            res = self._allocations.get(key)
            if res is None:
                res = self._allocations[key] = _np.empty(shape, dtype)
        return res

    array.key = lambda caller: caller
    array.kernels_lab_locked = True
    kernelapi.FakeCUDAShared.array = array


def _wake_the_block_manager() -> None:
    """numba-cuda 0.30's simulated block is run by a loop that polls its threads (syncthreads_blocked, exception,
    is_alive) without pause: on two cores it took a core from the kernel threads it waits for, and with blocks side
    by side (sim_coresident, clusters) several such loops starved every kernel thread. The same loop, woken
    instead of spinning: a thread tells its block's loop when it starts waiting at syncthreads and when it ends
    (however it ends), and the loop sleeps in between (at most WAKE_S, so a lost wake-up costs time, never a
    hang). What the loop decides is numba's: release a barrier once every live thread waits at it, raise the first
    error, end when every thread has. One more fix, in what it sees: numba's loop dropped a thread that raised and
    ended between two polls, and the rest of its block passed syncthreads without it (a later, secondary error,
    or a cluster barrier's timeout; seen on CI); a thread that raised counts as alive until the loop has seen its
    error. Tested in tests/test_runtime.py."""
    import threading as _threading

    import numpy as _np
    from numba.cuda.simulator import kernel

    class News:
        """What a block's threads tell its loop: something changed since it last looked."""
        def __init__(self):
            self.cond, self.fresh = _threading.Condition(), False

        def tell(self) -> None:
            with self.cond:
                self.fresh = True
                self.cond.notify()

        def wait(self) -> None:
            with self.cond:
                if not self.fresh:
                    self.cond.wait(WAKE_S)
                self.fresh = False

    class WaitingTells(_threading.Event):
        """A thread's syncthreads event: waiting on it tells the loop (syncthreads_blocked is set by then)."""
        def __init__(self, news: News):
            super().__init__()
            self.news = news

        def wait(self, timeout=None):
            self.news.tell()
            return super().wait(timeout)

    thread_run = kernel.BlockThread.run

    def run_then_tell(self):
        try:
            thread_run(self)  # numba's: sets self.exception if the kernel raised
        finally:
            self._kl_ran = True  # is_alive() stays True a moment longer: the loop would sleep on it
            news = getattr(self, "_kl_news", None)
            if news is not None:
                news.tell()

    def run_block(self, grid_point, *args):
        news, threads = News(), []
        for block_point in _np.ndindex(*self._block_dim):
            t = kernel.BlockThread(lambda: self._f(*args), self, grid_point, block_point, self._debug)
            t._kl_news, t._kl_ran, t.syncthreads_event = news, False, WaitingTells(news)
            threads.append(t)
            t.start()
        live, blocked = set(threads), set()
        while live:
            news.wait()
            for t in live:
                if t.syncthreads_blocked:
                    blocked.add(t)
                elif t.exception:  # abort the others (numba's: they are not joined, for debugging)
                    for other in threads:
                        other.abort, other.syncthreads_blocked = True, False
                        other.syncthreads_event.set()
                    raise t.exception[0].with_traceback(t.exception[1])
            live = {t for t in live if not t._kl_ran or t.exception is not None}  # an error is seen first
            if live and live == blocked:  # before the next wait: the news of the last thread to end is spent
                for t in blocked:
                    t.syncthreads_blocked = False
                    t.syncthreads_event.set()
                blocked = set()
        for t in threads:  # an error set before its thread ended, after the last look
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    kernel.BlockThread.run = run_then_tell
    kernel.BlockManager.run = run_block
    kernel.BlockManager.kernels_lab_woken = True


WAKE_S = 0.05  # the longest a simulated block's loop sleeps without news (a lost wake-up costs this, no more)


ON_GPU: bool = BACKEND_NAME == "gpu"
ON_SIMULATOR: bool = BACKEND_NAME == "simulator"  # "ptx" is neither: real compiler, no device
if ON_SIMULATOR:
    _fix_simulator_shared_arrays()
    _wake_the_block_manager()
    from .sim_device import install as _install_sim_device
    _install_sim_device()  # warp shuffles, votes and masks (kernels_lab/sim_device.py)


def kernel_class() -> type:
    """What @cuda.jit makes of a kernel here: numba's dispatcher, or the simulator's stand-in for it."""
    if ON_SIMULATOR:
        from numba.cuda.simulator.kernel import FakeCUDAKernel
        return FakeCUDAKernel
    from numba.cuda.dispatcher import CUDADispatcher
    return CUDADispatcher


@dataclass(frozen=True)
class DeviceFacts:
    backend: str
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    threads_per_sm: int = 2048  # resident threads per SM at most (bounds the bytes in flight)

    @property
    def cc(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    def describe(self) -> str:
        if self.backend == "simulator":
            return "numba CUDA simulator (no GPU: correctness, launches and bytes only; no timings)"
        return (f"{self.name} (cc {self.cc}, {self.sm_count} SMs, "
                f"{self.l2_bytes / 2**20:.0f} MiB L2, {self.memory_bytes / 2**30:.0f} GiB)")


@functools.lru_cache(maxsize=1)
def device_facts() -> DeviceFacts:
    if not ON_GPU:
        return DeviceFacts(BACKEND_NAME, "numba CUDA simulator" if ON_SIMULATOR else "no device (PTX only)", (9, 0), 1, 0, 0)
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    _free, total = cuda.current_context().get_memory_info()
    return DeviceFacts("gpu", name, tuple(dev.compute_capability), int(dev.MULTIPROCESSOR_COUNT),
                       int(dev.L2_CACHE_SIZE), int(total), int(dev.MAX_THREADS_PER_MULTIPROCESSOR))
