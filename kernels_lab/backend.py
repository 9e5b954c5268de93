"""The back-end as one object: what differs between a GPU, the simulator and PTX-only, in one place.

runtime.py decides which back-end this process has (before numba loads); this module turns that
decision into BACKEND, which workloads, demos and the consumer ask instead of asking which machine
this is:

    BACKEND.jit(...)                   @cuda.jit with the options this back-end takes
    BACKEND.launcher(k, grid, block, args, stream, pdl=)   a launch bound once
    BACKEND.graph(launches, stream, what)                  launches replayed as one CUDA graph
    BACKEND.start(k, grid, block, args)                    a resident kernel running while the host works
    BACKEND.persistent_grid / resident_limit / require_coresident / coresident   grids sized to the machine
    BACKEND.size(gpu=, simulator=)     a size: where the simulator must run smaller, never another code path
    BACKEND.sizes                      the generic ones (grids, the largest problem)
    BACKEND.can_launch / can_time / can_trace / has_graphs / on_device / python_threads / pdl() / ...   capabilities
    BACKEND.weak_memory(seed)          ordering bugs made visible (the simulator's, sim_weak.py; models_weak_memory)
    BACKEND.host_view(mapped), BACKEND.facts(), BACKEND.describe(), BACKEND.free_memory()

The simulator runs every kernel the GPU runs: where it cannot model something (timing, graphs, PDL's
overlap, blocks resident together) the object says so, and where it must be smaller it is a size.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .runtime import BACKEND_NAME, BackendError, DeviceFacts, cuda, device_facts

Launch = Callable[..., None]  # called with nothing, or with a stream / graph builder to enqueue there


@dataclass(frozen=True)
class Sizes:
    """The generic sizes of a back-end (a topic's own come from Backend.size)."""

    persistent_blocks: int | None   # a grid-stride persistent grid; None: from occupancy x SMs
    max_elements: int | None        # the largest problem that runs in reasonable time; None: no limit


class Running:
    """A kernel launched to keep running while the host works (the consumer): done() polls, finish() waits."""

    def done(self) -> bool:
        raise NotImplementedError

    def known_ended(self) -> bool:
        """done(), where knowing costs nothing (the simulator's thread); False on a GPU, whose event
        query is a driver call: too dear for a request's hot path."""
        return False

    def settle(self, timeout: float) -> None:
        """Its blocks said they are leaving: let the launch end where another kernel could not run
        beside it (the simulator runs one kernel at a time). A GPU needs nothing."""

    def finish(self) -> None:
        """Wait for the launch to end (every block has left)."""
        raise NotImplementedError


class _StreamRunning(Running):
    def __init__(self, kernel, grid: int, block: int, args: tuple):
        self.stream = cuda.stream()
        kernel[grid, block, self.stream](*args)
        self._finished = cuda.event(timing=False)
        self._finished.record(self.stream)

    def done(self) -> bool:
        return self._finished.query()

    def finish(self) -> None:
        cuda.synchronize()


class _ThreadRunning(Running):
    # a simulated launch returns when the kernel ends: it runs in a thread of its own instead
    def __init__(self, kernel, grid: int, block: int, args: tuple):
        self._thread = threading.Thread(target=lambda: kernel[grid, block](*args), daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    known_ended = done

    def settle(self, timeout: float) -> None:
        self._thread.join(timeout)

    def finish(self) -> None:
        self._thread.join()


def in_order(launches: Sequence[Launch]) -> Callable[[], None]:
    """One call that runs the launches one after another."""
    def run() -> None:
        for launch in launches:
            launch()
    run.launches = launches  # a graph's nodes point into these launches' arrays: keep them alive
    return run


class Backend:
    """What every back-end answers. Subclasses: GpuBackend, SimulatorBackend, PtxBackend."""

    name: str                    # "gpu", "simulator" or "ptx"
    where: str                   # the back-end in words, for messages
    can_launch = True            # kernels run here (PTX-only compiles them, never launches)
    can_time = False             # CUDA events time device work
    can_trace = False            # every global access of every thread is seen (the byte trace)
    has_graphs = False           # CUDA graph capture and replay
    blocks_run_together = True   # a launch's blocks are resident at once, up to resident_limit
    synchronous_launches = False  # a launch returns only after the kernel has ended
    atomic_add_reads = 1         # reads one atomic add shows in the byte trace
    models_weak_memory = False   # weak_memory() makes ordering bugs give wrong answers here (sim_weak.py)
    on_device = False            # a CUDA device and its driver: device pointers, compute-sanitizer, the driver's files
    python_threads = False       # every GPU thread a Python thread: clusters and barriers are modelled in Python,
                                 # the GIL's switch interval paces them, and a grid's blocks run one after another
    untimed: str | None = "timings need a GPU"  # why this back-end cannot time; None where it can
    sizes: Sizes
    _dropped_options: tuple[str, ...] = ()

    # -- sizes -----------------------------------------------------------------------------------
    def size(self, *, gpu: int, simulator: int) -> int:
        """One of two sizes (threads, rows, a limit...): the simulator's when it must run smaller.
        Only numbers: a kernel or a code path per back-end does not belong in a topic."""
        for what, v in (("gpu", gpu), ("simulator", simulator)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"BACKEND.size({what}={v!r}): a size is an int; what differs by back-end "
                                f"beyond a size belongs in kernels_lab/backend.py")
        return int(simulator if self.name == "simulator" else gpu)

    def size_problem(self, elements: int, size: Any) -> str | None:
        """Why a problem of `elements` (shown as `size`) is too large to run here in reasonable time, or None."""
        limit = self.sizes.max_elements
        if limit is None or elements <= limit:
            return None
        return (f"size {size} is {elements:,} elements: on the CUDA simulator every GPU thread is a Python "
                f"thread, so this would run for a very long time; use at most {limit:,} elements here "
                f"(or run on a GPU)")

    # -- compiling and launching -------------------------------------------------------------------
    def jit(self, fn: Callable | None = None, **options: Any) -> Any:
        """cuda.jit(fn, **options), without the options this back-end's compiler does not take
        (the simulator takes no performance hints: launch_bounds, forceinline, lineinfo...)."""
        kept = {k: v for k, v in options.items() if k not in self._dropped_options}
        return cuda.jit(**kept) if fn is None else cuda.jit(**kept)(fn)

    def launcher(self, kernel, grid: int, block: int, args: tuple, stream: Any = 0, *, pdl: bool = False) -> Launch:
        """kernel[grid, block, stream](*args), bound once; `pdl`: with PDL's launch attribute where it exists.
        Called with a stream (or graph builder), it enqueues there instead."""
        configured = kernel[grid, block, stream]
        return lambda target=None: configured(*args)

    def graph(self, launches: Sequence[Launch], stream: Any, what: str) -> Callable[[], None]:
        """The launches captured once as a CUDA graph, replayed on `stream` per call; in order where
        there are no graphs (saying so once)."""
        warnings.warn(f"{what}: {self.where} has no CUDA graphs; running the launches one by one", stacklevel=3)
        return in_order(launches)

    def start(self, kernel, grid: int, block: int, args: tuple) -> Running:
        """Launch a kernel that keeps running while the host goes on (a resident server)."""
        raise BackendError(f"{self.where} runs no kernels (KERNELS_LAB_BACKEND=ptx compiles them only)")

    def pdl(self) -> tuple[bool, str]:
        """(True, "") when launches here can overlap through PDL, else (False, why not)."""
        return False, f"{self.where} has no Programmatic Dependent Launch"

    runs_griddepcontrol = True   # a kernel with griddepcontrol instructions compiles and runs here

    # -- grids sized to the machine ----------------------------------------------------------------
    def persistent_grid(self, kernel, signature: Sequence[Any] | None, block: int, dynamic_smem: int = 0) -> int:
        """Blocks for a grid-stride grid sized to the machine: resident blocks per SM x SMs.
        `signature`: the kernel's argument types, or example arguments (their types are taken)."""
        return self.sizes.persistent_blocks

    def resident_limit(self, kernel, signature: Sequence[Any] | None, block: int, dynamic_smem: int = 0) -> int:
        """The largest grid whose blocks are all resident at once (grid sync, blocks that wait on each other)."""
        return 1

    def resident_blocks(self, per_sm: int) -> int:
        """The most blocks resident at once when `per_sm` fit on an SM (before there is a kernel to ask)."""
        return 1

    def require_coresident(self, kernel, signature: Sequence[Any] | None, grid: int, block: int,
                           dynamic_smem: int = 0) -> None:
        """A grid-synchronising kernel deadlocks (or is refused) unless every block is resident at once."""
        limit = self.resident_limit(kernel, signature, block, dynamic_smem)
        if grid > limit:
            raise BackendError(f"a grid of {grid} blocks cannot be co-resident: at most {limit} "
                               f"({self._resident_words(kernel, block)}); use a smaller grid and loop inside the kernel")

    def _resident_words(self, kernel, block: int) -> str:
        return "no device here: plans only"

    def coresident(self, kernel) -> Any:
        """Mark a kernel whose blocks wait for each other (its launcher keeps the grid resident); returns it."""
        return kernel

    def weak_memory(self, seed: int = 0) -> Any:
        """with BACKEND.weak_memory(seed) as mode: global memory as weak as a GPU's may be, so that a missing
        fence or acquire gives wrong answers, the same ones for a seed (kernels_lab/sim_weak.py)."""
        raise BackendError(f"{self.where} has no weak-memory mode: the simulator models one "
                           f"(a GPU's memory is weak already, but shows it only sometimes)")

    # -- the machine -------------------------------------------------------------------------------
    def facts(self) -> DeviceFacts:
        return device_facts()

    def describe(self) -> str:
        return device_facts().describe()

    def free_memory(self) -> int | None:
        """Bytes free on the device, or None where host memory backs it."""
        return None

    def host_view(self, mapped) -> np.ndarray:
        """The host's NumPy view of a cuda.mapped_array."""
        return np.asarray(mapped).view(np.ndarray)

    def address(self, array) -> int:
        """Where a device array starts (16-byte accesses need a multiple of 16)."""
        return int(array.__cuda_array_interface__["data"][0])


def _types(kernel, signature: Sequence[Any]) -> tuple:
    from numba.core import types
    if all(isinstance(t, types.Type) for t in signature):
        return tuple(signature)
    return tuple(kernel.typeof_pyval(a) for a in signature)


class GpuBackend(Backend):
    name, where = "gpu", "this GPU"
    can_time = True
    untimed = None
    on_device = True
    has_graphs = True
    sizes = Sizes(persistent_blocks=None, max_elements=None)

    def launcher(self, kernel, grid: int, block: int, args: tuple, stream: Any = 0, *, pdl: bool = False) -> Launch:
        # a pre-bound driver launch: numba's dispatch re-types every argument per call (launch_paths.py)
        from .launch_paths import PreboundLaunch
        return PreboundLaunch(kernel, grid, block, args, stream, programmatic_stream_serialization=pdl)

    def graph(self, launches: Sequence[Launch], stream: Any, what: str) -> Callable[[], None]:
        from .launch_paths import CapturedGraph
        graph = CapturedGraph(lambda builder: [launch(builder) for launch in launches])

        def replay() -> None:
            graph(stream)
        replay.launches = launches  # the graph's nodes point into these launches' arrays: keep them alive
        return replay

    def start(self, kernel, grid: int, block: int, args: tuple) -> Running:
        return _StreamRunning(kernel, grid, block, args)

    def pdl(self) -> tuple[bool, str]:
        cc = device_facts().compute_capability
        if tuple(cc) < (9, 0):
            return False, f"PDL needs compute capability >= 9.0; this device is {cc[0]}.{cc[1]}"
        return True, ""

    @property
    def runs_griddepcontrol(self) -> bool:
        return self.pdl()[0]

    def persistent_grid(self, kernel, signature: Sequence[Any] | None, block: int, dynamic_smem: int = 0) -> int:
        return int(kernel.compile(_types(kernel, signature)).max_cooperative_grid_blocks(block, dynamic_smem))

    def resident_limit(self, kernel, signature: Sequence[Any] | None, block: int, dynamic_smem: int = 0) -> int:
        return self.persistent_grid(kernel, signature, block, dynamic_smem)

    def resident_blocks(self, per_sm: int) -> int:
        return per_sm * device_facts().sm_count

    def _resident_words(self, kernel, block: int) -> str:
        return f"{device_facts().sm_count} SMs x resident blocks per SM at block {block}"

    def free_memory(self) -> int | None:
        return int(cuda.current_context().get_memory_info()[0])


class SimulatorBackend(Backend):
    """numba's CUDA simulator: every GPU thread a Python thread, a grid's blocks one after another."""

    name, where = "simulator", "the simulator"
    can_trace = True
    python_threads = True
    untimed = "timings need a GPU: the simulator runs kernels as Python threads"
    blocks_run_together = False
    synchronous_launches = True
    atomic_add_reads = 2  # its atomic add reads the word twice (the old value, then for +=): the trace sees both
    models_weak_memory = True
    # Set by time, not memory: `profile elementwise` (4 variants, traced) took 20 s at 2^15 elements on two
    # cores and 160 s at 2^18 (2026-12-04); past this the CLI refuses, saying so.
    sizes = Sizes(persistent_blocks=2, max_elements=1 << 15)
    # performance hints its jit does not take (they change no result)
    _dropped_options = ("launch_bounds", "forceinline", "lineinfo", "max_registers")

    def start(self, kernel, grid: int, block: int, args: tuple) -> Running:
        return _ThreadRunning(kernel, grid, block, args)

    def resident_limit(self, kernel, signature: Sequence[Any] | None, block: int, dynamic_smem: int = 0) -> int:
        # its grid sync is a block barrier: one block; a kernel marked coresident runs its blocks side by side
        from .sim_coresident import RESIDENT_BLOCKS, is_marked
        return RESIDENT_BLOCKS if is_marked(kernel) else 1

    def _resident_words(self, kernel, block: int) -> str:
        from .sim_coresident import is_marked
        return "the simulator's side-by-side limit" if is_marked(kernel) else \
            "the simulator runs grid sync in one block only"

    def coresident(self, kernel) -> Any:
        from .sim_coresident import mark
        mark(kernel)
        return kernel

    def weak_memory(self, seed: int = 0) -> Any:
        from .sim_weak import weak_memory
        return weak_memory(seed)

    def host_view(self, mapped) -> np.ndarray:
        return mapped._ary  # the simulator's FakeCUDAArray holds the shared buffer here

    def address(self, array) -> int:
        # host memory stands for the device's here; its views start where a GPU's would
        return int(np.asarray(getattr(array, "_ary", array)).__array_interface__["data"][0])


class PtxBackend(Backend):
    """numba's real compiler without a GPU: the GPU's kernels and sizes, compiled to PTX, never launched."""

    name, where = "ptx", "PTX-only"
    can_launch = False
    untimed = "timings need a GPU: the ptx back-end compiles kernels and launches none"
    sizes = Sizes(persistent_blocks=2, max_elements=None)  # no device to size a grid from: plans only


BACKEND: Backend = {"gpu": GpuBackend, "simulator": SimulatorBackend, "ptx": PtxBackend}[BACKEND_NAME]()
