"""`kernels-lab doctor`: what this machine can run, and what to do about each problem found."""

from __future__ import annotations

import shutil
from importlib.metadata import PackageNotFoundError, version

from . import runtime


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def _nvvm_version() -> str | None:
    """The NVVM that numba-cuda would load (found by cuda.pathfinder), without loading numba's driver."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        lib = load_nvidia_dynamic_lib("nvvm")
    except Exception:  # noqa: BLE001  (absent or broken NVVM: reported, not fatal)
        return None
    import ctypes
    major, minor = ctypes.c_int(), ctypes.c_int()
    handle = ctypes.CDLL(lib.abs_path)
    if handle.nvvmVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        return "present (version unreadable)"
    return f"{major.value}.{minor.value}"


def report() -> tuple[str, list[str]]:
    lines, problems = [], []

    def item(name: str, value: str) -> None:
        lines.append(f"  {name:<22} {value}")

    lines.append("kernels-lab doctor")
    item("backend", f"{runtime.BACKEND} (set {runtime.BACKEND_ENV}=gpu|sim|ptx to choose)")
    item("device", runtime.device_facts().describe())
    if runtime.ON_SIMULATOR:
        ok, why = runtime._gpu_visible()
        item("GPU", "visible, but the simulator was chosen" if ok else f"none: {why}")
    numpy_v, numba_cuda_v = _version("numpy"), _version("numba-cuda")
    for pkg in ("numba", "numba-cuda", "llvmlite", "numpy", "cuda-core", "cuda-bindings", "matplotlib"):
        item(pkg, _version(pkg) or "not installed")
    if numpy_v and tuple(int(p) for p in numpy_v.split(".")[:2]) >= (2, 5):
        problems.append(f"numpy {numpy_v} >= 2.5 breaks numba-cuda 0.30 compilation (numpy.row_stack is gone). "
                        f"kernels_lab applies a shim (runtime.apply_numpy_shim), but installing numpy<2.5 "
                        f"is the real fix: pip install 'numpy<2.5'")
    if numba_cuda_v and not numba_cuda_v.startswith("0.30."):
        problems.append(f"numba-cuda {numba_cuda_v}: kernels-lab is pinned to 0.30.*; pip install 'numba-cuda==0.30.*'")
    nvvm = _nvvm_version()
    item("NVVM (compiler)", nvvm or "not found: kernels run on the simulator only; "
                                    "pip install 'kernels-lab[cu13]' for PTX checks")
    if runtime.ON_GPU:
        from numba import cuda
        drv = cuda.cudadrv.driver.driver.get_version()
        item("CUDA driver", ".".join(map(str, drv)))
        if nvvm and nvvm[0].isdigit() and tuple(int(p) for p in nvvm.split(".")[:2]) > tuple(drv[:2]):
            lines.append("  note: NVVM is newer than the driver; numba-cuda links through nvJitLink, which "
                         "handles this. If a kernel fails to load with a PTX version error, install the "
                         "toolkit matching the driver (numba-cuda[cu13] for a CUDA 13 driver).")
    ncu = shutil.which("ncu")
    item("Nsight Compute (ncu)", ncu or "not found: DRAM byte measurements are skipped (model and trace still work)")
    item("compute-sanitizer", shutil.which("compute-sanitizer") or "not found: the grader skips memcheck/racecheck")
    if problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append("no problems found")
    return "\n".join(lines), problems
