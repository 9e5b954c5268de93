"""Launch paths beside numba's own: a pre-bound driver launch and CUDA graph capture.

numba's dispatch re-types and re-flattens every argument on every call (about 20-50 us on
an H200 with a few arrays). cuda.core's launch() takes flattened arguments but still packs
every one of them into a parameter buffer on every call (8.4 us with 4 arrays, against 5.7 us
for CuPy's RawKernel). A pre-bound launch does all of that once: numba flattens the
arguments, cuda.core's ParamHolder packs them into the array of parameter pointers the driver
reads, and a CUlaunchConfig holds grid, block, stream and launch attributes (PDL, cooperative).
Each call is then one cuLaunchKernelEx through cuda.bindings with nothing left to convert.
A graph records launches once and replays them for about a microsecond each.

numba internals touched here and nowhere else (numba-cuda 0.30): _Kernel._prepare_args
(argument flattening), _Kernel._codelibrary.get_cufunc().kernel (the cuda.core kernel),
_Kernel.cooperative and cudadrv.driver._to_core_stream; and cuda.core's ParamHolder
(cuda-core 1.x). tests/test_launch_paths.py fails loudly if they move.
"""

from __future__ import annotations

from typing import Any, Callable

from .instrument.launch_hook import check_numba_cuda_version, external_launch


class LaunchPathUnavailable(RuntimeError):
    """This launch path needs a GPU (the simulator has no driver to launch through)."""


class LaunchFailed(RuntimeError):
    """The driver refused a launch (the CUresult is in the message)."""


def _require_gpu(what: str) -> None:
    from .backend import BACKEND
    if not BACKEND.on_device:
        raise LaunchPathUnavailable(f"{what} needs a GPU; on the simulator use plain numba launches")
    check_numba_cuda_version("kernels_lab/launch_paths.py")


def core_stream(stream: Any = 0):
    """A numba stream (or 0, or a cuda.core GraphBuilder) as the cuda.core object launch() takes."""
    from numba.cuda.cudadrv import driver
    return driver._to_core_stream(stream)


def compiled_for(kernel, args: tuple):
    """The compiled numba kernel (_Kernel) for these argument values."""
    sig = tuple(kernel.typeof_pyval(a) for a in args)
    return kernel.compile(sig)


def _dim3(d: int | tuple) -> tuple[int, int, int]:
    t = (d,) if isinstance(d, int) else tuple(d)
    return (tuple(int(x) for x in t) + (1, 1))[:3]


class PreboundLaunch:
    """kernel[grid, block](*args), bound once: each call is one cuLaunchKernelEx.

    Keyword switches: programmatic_stream_serialization=True (PDL). A kernel that uses a grid
    sync is launched cooperatively, as numba would. `params` (the flattened arguments) stays
    readable for callers that build their own launches.
    """

    def __init__(self, kernel, grid: int | tuple, block: int | tuple, args: tuple, stream: Any = 0,
                 programmatic_stream_serialization: bool = False):
        _require_gpu("a pre-bound launch")
        from cuda.bindings import driver
        from cuda.core._kernel_arg_handler import ParamHolder
        compiled = compiled_for(kernel, args)
        self._keep, self.params = [], []
        for ty, val in zip(compiled.argument_types, args):
            compiled._prepare_args(ty, val, stream, self._keep, self.params)
        self._args = args                        # the arrays must outlive every launch
        self._holder = ParamHolder(self.params)  # the void*[] the driver reads, packed once
        self._params_ptr = self._holder.ptr
        self.kernel = compiled._codelibrary.get_cufunc().kernel
        self._function = driver.CUfunction(int(self.kernel.handle))  # a CUkernel launches as a function
        self.name = compiled.py_func.__name__
        self.grid, self.block = grid, block
        self.stream = core_stream(stream)
        self._config = config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = _dim3(grid)
        config.blockDimX, config.blockDimY, config.blockDimZ = _dim3(block)
        config.sharedMemBytes = 0
        attrs = []
        for wanted, attr_id, field in (
                (programmatic_stream_serialization, "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION",
                 "programmaticStreamSerializationAllowed"),
                (compiled.cooperative, "CU_LAUNCH_ATTRIBUTE_COOPERATIVE", "cooperative")):
            if wanted:
                attr = driver.CUlaunchAttribute()
                attr.id = getattr(driver.CUlaunchAttributeID, attr_id)
                setattr(attr.value, field, 1)
                attrs.append(attr)
        config.attrs, config.numAttrs = attrs, len(attrs)
        self._default_stream = self._handle(self.stream)
        config.hStream = self._default_stream
        self._launch = driver.cuLaunchKernelEx
        self._success = driver.CUresult.CUDA_SUCCESS

    def launch_attributes(self) -> list[str]:
        """The names of the launch attributes every call passes to the driver (PDL, cooperative)."""
        return [self._config.attrs[k].id.name for k in range(self._config.numAttrs)]

    @staticmethod
    def _handle(stream):
        from cuda.bindings import driver
        return driver.CUstream(int(stream.handle))

    def __call__(self, stream: Any = None) -> None:
        if stream is None:
            return self._enqueue(self.stream)
        target = core_stream(stream)  # another stream, or a graph being built: this call only
        self._config.hStream = self._handle(target)
        try:
            self._enqueue(target)
        finally:
            self._config.hStream = self._default_stream

    def _enqueue(self, target) -> None:
        with external_launch(self.name, self.grid, self.block, "cuda.core", target):
            err, = self._launch(self._config, self._function, self._params_ptr, 0)
        if err != self._success:
            raise LaunchFailed(f"cuLaunchKernelEx({self.name}, grid {self.grid}, block {self.block}): {err!r}")


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
