"""Launch paths beside numba's own: a pre-bound cuda.core launch and CUDA graph capture.

numba's dispatch re-types and re-flattens every argument on every call (about 20-30 us on
an H200 with a few arrays). A pre-bound launch flattens them once with numba's own code and
then each call is a single cuda.core launch. A graph records launches once and replays them
for about a microsecond each.

numba internals touched here and nowhere else (numba-cuda 0.30): _Kernel._prepare_args
(argument flattening), _Kernel._codelibrary.get_cufunc().kernel (the cuda.core kernel) and
cudadrv.driver._to_core_stream. tests/test_launch.py fails loudly if they move.
"""

from __future__ import annotations

from typing import Any, Callable

from .profile.launch_hook import check_numba_cuda_version, external_launch
from .runtime import ON_GPU


class LaunchPathUnavailable(RuntimeError):
    """This launch path needs a GPU (the simulator has no driver to launch through)."""


def _require_gpu(what: str) -> None:
    if not ON_GPU:
        raise LaunchPathUnavailable(f"{what} needs a GPU; on the simulator use plain numba launches")
    check_numba_cuda_version("kernels_lab/launch.py")


def core_stream(stream: Any = 0):
    """A numba stream (or 0, or a cuda.core GraphBuilder) as the cuda.core object launch() takes."""
    from numba.cuda.cudadrv import driver
    return driver._to_core_stream(stream)


def compiled_for(kernel, args: tuple):
    """The compiled numba kernel (_Kernel) for these argument values."""
    sig = tuple(kernel.typeof_pyval(a) for a in args)
    return kernel.compile(sig)


class PreboundLaunch:
    """kernel[grid, block](*args), with the arguments flattened once, launched via cuda.core.

    Extra keyword arguments go to cuda.core.LaunchConfig (for example
    programmatic_stream_serialization=True for PDL).
    """

    def __init__(self, kernel, grid: int | tuple, block: int | tuple, args: tuple, stream: Any = 0,
                 **config: Any):
        _require_gpu("a pre-bound cuda.core launch")
        from cuda.core import LaunchConfig
        compiled = compiled_for(kernel, args)
        self._keep, self.params = [], []
        for ty, val in zip(compiled.argument_types, args):
            compiled._prepare_args(ty, val, stream, self._keep, self.params)
        self.kernel = compiled._codelibrary.get_cufunc().kernel
        self.config = LaunchConfig(grid=grid, block=block, **config)
        self.stream = core_stream(stream)
        self.name = compiled.py_func.__name__
        self.grid, self.block = grid, block

    def __call__(self, stream: Any = None) -> None:
        from cuda.core import launch
        target = self.stream if stream is None else core_stream(stream)
        with external_launch(self.name, self.grid, self.block, "cuda.core", target):
            launch(target, self.config, self.kernel, *self.params)


class CapturedGraph:
    """Record what `enqueue(stream)` launches into a CUDA graph once; replay it with one call."""

    def __init__(self, enqueue: Callable[[Any], None]):
        _require_gpu("CUDA graph capture")
        from cuda.core import Device
        builder = Device().create_graph_builder()
        builder.begin_building()
        enqueue(builder)
        self.graph = builder.end_building().complete()

    def __call__(self, stream: Any = 0) -> None:
        target = core_stream(stream)
        with external_launch("graph replay", 1, 1, "graph", target):
            self.graph.launch(target)
