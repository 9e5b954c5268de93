"""What this machine can run: the probes `doctor`, the tests and the tools all ask.

One probe per capability, each answering (available, how or why not) in words a person can act
on. Nothing here imports numba: the probes ask the libraries and tools themselves, so they run
under any back-end (and `doctor` runs even when the requested back-end is unusable).

  ptx_compile()        numba's real compiler without a GPU (cuda.compile_ptx): NVVM and NVRTC,
                       found the way numba-cuda finds them (cuda.pathfinder); probe=True also
                       compiles a small kernel for sm_75 in a child process (the real test)
  ncu()                Nsight Compute, for measured DRAM bytes (a GPU is needed as well)
  compute_sanitizer()  memcheck / racecheck in the grader (a GPU is needed as well)
  gpu()                a CUDA driver that sees a device (asked through ctypes, no numba)

The grader's compile gate and sandbox report through kernels_lab.grading (compile_gate.available,
confine.protections); `doctor` shows those beside these.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

CU13_HINT = "pip install 'kernels-lab[cu13]' (NVVM, NVRTC and nvJitLink for CUDA 13, ~450 MB)"
# The compute capabilities the course's GPUs have: T4 (7.5), A100 (8.0), H100/H200 (9.0).
STUDENT_CCS = ((7, 5), (8, 0), (9, 0))


@dataclass(frozen=True)
class Capability:
    name: str
    available: bool
    detail: str  # where it is, or why not and what to do

    def __iter__(self):  # ok, detail = probe()
        return iter((self.available, self.detail))


def _load_library(name: str) -> tuple[str | None, str]:
    """(path, "") when cuda.pathfinder finds the NVIDIA library `name` as numba-cuda would, else (None, why)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return None, "cuda.pathfinder is not installed"
    try:
        return load_nvidia_dynamic_lib(name).abs_path, ""
    except Exception as e:  # noqa: BLE001  (absent or broken: reported, never fatal)
        return None, f"lib{name} not found ({type(e).__name__})"


def nvvm_version() -> str | None:
    """The NVVM version numba-cuda would load ("2.0"), or None when there is none."""
    path, _ = _load_library("nvvm")
    if path is None:
        return None
    import ctypes
    major, minor = ctypes.c_int(), ctypes.c_int()
    try:
        if ctypes.CDLL(path).nvvmVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
            return "present (version unreadable)"
    except (OSError, AttributeError):
        return "present (version unreadable)"
    return f"{major.value}.{minor.value}"


_PROBE_KERNEL = """
from numba import types
from kernels_lab.capabilities import compile_ptx
from kernels_lab.runtime import cuda

@cuda.jit(device=True)
def twice_plus_one(v):
    return v * 2.0 + 1.0

def probe(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] = twice_plus_one(a[i])

for cc in {ccs!r}:
    compile_ptx(probe, (types.float32[::1], types.int64), cc)
print("compiled")
"""


def ptx_libraries() -> Capability:
    """Cheap: are NVVM and NVRTC both where numba-cuda looks? (compile_ptx needs both: NVRTC
    answers which architectures may be targeted.)"""
    found, missing = [], []
    for lib in ("nvvm", "nvrtc"):
        path, why = _load_library(lib)
        (found if path else missing).append(path or why)
    if missing:
        return Capability("PTX compile", False, f"{'; '.join(missing)}: {CU13_HINT}")
    return Capability("PTX compile", True, f"NVVM {nvvm_version()} ({found[0]}), NVRTC ({found[1]})")


@functools.lru_cache(maxsize=None)
def ptx_compile(probe: bool = False, timeout_s: float = 120) -> Capability:
    """Can numba's real compiler turn a kernel into PTX here (no GPU needed)?

    probe=False: the libraries are there (milliseconds). probe=True: a child process with
    KERNELS_LAB_BACKEND=ptx compiles a small kernel that calls a device function for sm_75, sm_80
    and sm_90 through compile_ptx below (a few seconds): what tests/test_ptx.py does."""
    libs = ptx_libraries()
    if not libs.available or not probe:
        return libs
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    code = _PROBE_KERNEL.format(ccs=STUDENT_CCS)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=timeout_s, cwd=str(Path(__file__).resolve().parents[1]))
    except subprocess.TimeoutExpired:
        return Capability("PTX compile", False, f"compiling a small kernel did not finish within {timeout_s:g} s")
    if proc.returncode == 0 and "compiled" in proc.stdout:
        ccs = ", ".join(f"sm_{a}{b}" for a, b in STUDENT_CCS)
        return Capability("PTX compile", True, f"{libs.detail}; a test kernel compiles for {ccs}")
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return Capability("PTX compile", False, f"the libraries load but compiling a small kernel fails: {last}")


# -- compiling without a GPU -----------------------------------------------------------------
# numba internals touched here and nowhere else (pinned to numba-cuda 0.30, tests/test_ptx.py):
#   numba.cuda.dispatcher.get_current_device, which Dispatcher.compile_device calls to pick the
#   compute capability a *device function* is compiled for. Without a GPU it raises, so
#   cuda.compile_ptx fails for any kernel that calls a @cuda.jit(device=True) function;
#   numba.cuda.compiler._compile_pyfunc_with_fixup, what cuda.compile_ptx calls before NVVM: its library
#   gives PTX for any cc (compile_ptx_each).

SUPPORTED_NUMBA_CUDA = "0.30."
_compile_lock = threading.Lock()


@dataclass(frozen=True)
class _TargetDevice:
    """What compile_device asks of the current device: only its compute capability."""

    compute_capability: tuple[int, int]


def compile_ptx(pyfunc, signature, cc: tuple[int, int], **options) -> str:
    """PTX for `pyfunc` (a plain Python function, or a @cuda.jit kernel's py_func) at compute capability
    `cc`, with or without a GPU. The device functions it calls compile for `cc` too (numba-cuda 0.30
    would ask the current device, and fail without one). A device function is compiled once per
    process and signature: compile one cc per process where the difference matters. Needs numba's
    real compiler: KERNELS_LAB_BACKEND=ptx (no GPU) or a GPU, and NVVM + NVRTC (ptx_compile())."""
    return compile_ptx_each(pyfunc, signature, [cc], **options)[tuple(cc)]


def compile_ptx_each(pyfunc, signature, ccs, **options) -> dict[tuple[int, int], str]:
    """compile_ptx for several compute capabilities from one lowering: numba types and lowers the kernel
    once, at the lowest of them (as its device functions are, once a process), and NVVM turns that into
    PTX for each. Typing and lowering are nearly all of a kernel's compile time; what numba-cuda 0.30
    lowers differently by cc is gated at 6.0 and 7.5 (double atomics, fast tanh), met by every cc here."""
    from importlib.metadata import version

    from .runtime import ON_SIMULATOR
    if ON_SIMULATOR:
        raise RuntimeError("the CUDA simulator has no compiler: run with KERNELS_LAB_BACKEND=ptx to compile PTX")
    found = version("numba-cuda")
    if not found.startswith(SUPPORTED_NUMBA_CUDA):
        raise RuntimeError(f"kernels_lab/capabilities.py patches numba-cuda {SUPPORTED_NUMBA_CUDA}* internals "
                           f"to compile without a GPU; found {found}: re-check it")
    from numba.cuda import compiler, dispatcher
    from numba.cuda.core.compiler_lock import global_compiler_lock  # what cuda.compile_ptx holds throughout
    ccs = sorted({tuple(cc) for cc in ccs})
    if len(ccs) > 1 and ccs[0] < _SAME_LOWERING_FROM:
        raise ValueError(f"numba lowers differently below sm_{_SAME_LOWERING_FROM[0]}{_SAME_LOWERING_FROM[1]}: "
                         f"compile {ccs[0]} on its own")
    with _compile_lock, global_compiler_lock:
        original = dispatcher.get_current_device
        dispatcher.get_current_device = lambda: _TargetDevice(ccs[0])
        try:  # what cuda.compile_ptx does (a kernel, numba's ABI), keeping the library for each cc
            lib, _ = compiler._compile_pyfunc_with_fixup(pyfunc, signature, device=False, abi="numba", cc=ccs[0],
                                                         **options)
            return {cc: _ptx_at(lib, cc) for cc in ccs}
        finally:
            dispatcher.get_current_device = original


_SAME_LOWERING_FROM = (7, 5)  # numba-cuda 0.30's last cc gate in lowering (fast tanh); double atomics at 6.0


def _ptx_at(lib, cc: tuple[int, int]) -> str:
    """NVVM's PTX of a lowered kernel for one cc; its failure names the cc (the lowering served them all)."""
    try:
        codes = lib.get_asm_strs(cc=cc)
    except Exception as e:  # noqa: BLE001  (NVVM's errors have no common type)
        raise RuntimeError(f"NVVM for sm_{cc[0]}{cc[1]}: {e}") from e
    if len(codes) != 1:
        raise RuntimeError(f"compiling this kernel gives {len(codes)} PTX files, not one")
    return codes[0]


def ncu() -> Capability:
    path = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if Path(p).exists()), None)
    if path:
        return Capability("Nsight Compute", True, path)
    return Capability("Nsight Compute", False, "ncu not on PATH (install Nsight Compute, part of the CUDA toolkit)")


def compute_sanitizer() -> Capability:
    path = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if Path(p).exists()), None)
    if path:
        return Capability("compute-sanitizer", True, path)
    return Capability("compute-sanitizer", False,
                      "compute-sanitizer not on PATH (it comes with the CUDA toolkit)")


def gpu() -> Capability:
    """A CUDA driver that sees a GPU (ctypes; numba is not imported to find out)."""
    import ctypes
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return Capability("GPU", False, "no CUDA driver library (libcuda) on this machine")
    if lib.cuInit(0) != 0:
        return Capability("GPU", False, "the CUDA driver is present but cuInit failed (no usable GPU)")
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return Capability("GPU", False, "the CUDA driver sees no GPU")
    return Capability("GPU", True, f"{count.value} GPU(s) visible")
