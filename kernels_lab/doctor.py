"""`kernels-lab doctor`: what this machine will run and skip, and what to do about each problem.

It asks the same probes the tools act on (kernels_lab.capabilities, and the grader's own
compile gate and sandbox where they report), so what it says runs is what runs: a feature
listed as skipped here is skipped by the tests, the grader and the profiler too. It always
runs: a back-end request that cannot be met is reported as a problem, not a crash.
"""

from __future__ import annotations

import importlib
import os
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from typing import Callable

from . import capabilities, runtime
from .backend import BACKEND

RUNS, SKIPPED = "runs", "skipped"


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def _nvvm_version() -> str | None:
    """The NVVM that numba-cuda would load (kept for callers of the old name)."""
    return capabilities.nvvm_version()


def _optional(module: str, attr: str) -> Callable | None:
    """A probe another part of the package offers (the grader's), or None where it has none yet."""
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None


def _safely(probe: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    try:
        ok, detail = probe()
        return bool(ok), str(detail)
    except Exception as e:  # noqa: BLE001  (a probe that breaks is reported, never fatal)
        return False, f"the probe itself failed: {type(e).__name__}: {e}"


def _grid_sync() -> tuple[bool, str]:
    """A grid-wide barrier across blocks (persistent variants that step with grid.sync())."""
    if BACKEND.python_threads:
        return False, ("the simulator runs grid sync within one block only: persistent grid-sync variants run "
                       "with 1 block here (correctness, not co-residency)")
    if not BACKEND.on_device:
        return False, "needs a GPU (the PTX-only back-end cannot launch)"
    import numpy as np
    from numba import types

    from .runtime import cuda

    @cuda.jit
    def _probe(a):
        g = cuda.cg.this_grid()
        if cuda.threadIdx.x == 0:
            a[cuda.blockIdx.x] = 1
        g.sync()
        if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
            a[0] = a[0] + a[1]

    sig = (types.int32[::1],)
    blocks = min(2, BACKEND.resident_limit(_probe, sig, 32))
    a = cuda.to_device(np.zeros(2, np.int32))
    _probe[blocks, 32](a)
    cuda.synchronize()
    got = int(a.copy_to_host()[0])
    if got != blocks:
        return False, f"a two-block grid sync gave {got}, expected {blocks}"
    return True, f"a {blocks}-block grid sync runs (libcudadevrt linked)"


def _pdl() -> tuple[bool, str]:
    if BACKEND.on_device:
        cc = runtime.device_facts().compute_capability
        if tuple(cc) >= (9, 0):
            return True, f"compute capability {cc[0]}.{cc[1]}"
        return False, (f"PDL needs compute capability 9.0; this GPU is {cc[0]}.{cc[1]}: the pdl variants run as "
                       f"plain launches and say so")
    return False, "needs a GPU of compute capability 9.0: the pdl variants run as plain launches and say so"


def report() -> tuple[str, list[str]]:
    lines, problems = [], []

    def item(name: str, value: str) -> None:
        lines.append(f"  {name:<22} {value}")

    def feature(ok: bool, name: str, detail: str) -> None:
        lines.append(f"  [{RUNS if ok else SKIPPED:<7}] {name}: {detail}")

    def probed(name: str, probe: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
        ok, detail = _safely(probe)
        feature(ok, name, detail)
        return ok, detail

    lines.append("kernels-lab doctor")
    requested = os.environ.get(runtime.BACKEND_ENV, "") or "auto"
    if runtime.BACKEND_ERROR:
        item("backend", f"{runtime.BACKEND_NAME} for this report only: {runtime.BACKEND_ENV}={requested} cannot be used")
        problems.append(runtime.BACKEND_ERROR)
    else:
        item("backend", f"{runtime.BACKEND_NAME} ({runtime.BACKEND_ENV}={requested}; set gpu|sim|ptx to choose)")
    item("device", _safely(lambda: (True, runtime.device_facts().describe()))[1])
    gpu_ok, gpu_why = _safely(capabilities.gpu)
    if not BACKEND.on_device:
        item("GPU", "visible, but another back-end was chosen" if gpu_ok else f"none: {gpu_why}")
    numpy_v, numba_cuda_v = _version("numpy"), _version("numba-cuda")
    for pkg in ("numba", "numba-cuda", "llvmlite", "numpy", "cuda-core", "cuda-bindings", "matplotlib", "tqdm"):
        item(pkg, _version(pkg) or "not installed")
    if numpy_v and tuple(int(p) for p in numpy_v.split(".")[:2]) >= (2, 5):
        problems.append(f"numpy {numpy_v} >= 2.5 breaks numba-cuda 0.30 compilation (numpy.row_stack is gone). "
                        f"kernels_lab applies a shim (runtime.apply_numpy_shim), but installing numpy<2.5 "
                        f"is the real fix: pip install 'numpy<2.5'")
    if numba_cuda_v and not numba_cuda_v.startswith("0.30."):
        problems.append(f"numba-cuda {numba_cuda_v}: kernels-lab is pinned to 0.30.*; pip install 'numba-cuda==0.30.*'")
    nvvm = capabilities.nvvm_version()
    item("NVVM", nvvm or "not found")
    if BACKEND.on_device:
        from .runtime import cuda
        drv = cuda.cudadrv.driver.driver.get_version()
        item("CUDA driver", ".".join(map(str, drv)))
        if nvvm is None:
            problems.append(f"a GPU is here but no NVVM: no kernel can compile. {capabilities.CU13_HINT}")
        elif nvvm[0].isdigit() and tuple(int(p) for p in nvvm.split(".")[:2]) > tuple(drv[:2]):
            lines.append("  note: NVVM is newer than the driver; numba-cuda links through nvJitLink, which "
                         "handles this. If a kernel fails to load with a PTX version error, install the "
                         "toolkit matching the driver (numba-cuda[cu13] for a CUDA 13 driver).")

    lines.append("what runs here, and what is skipped:")
    if BACKEND.on_device:
        feature(True, "correctness, launch counts", "every variant against float64 on the GPU")
        feature(True, "timings", "CUDA events, medians, L2 flushed")
        feature(False, "traced bytes", "the byte tracer runs on the simulator only (KERNELS_LAB_BACKEND=sim)")
    elif BACKEND.python_threads:
        feature(True, "correctness, launch counts, traced bytes", "on numba's CUDA simulator, at small sizes")
        feature(False, "timings", "the simulator cannot time kernels: run on a GPU")
    else:
        feature(False, "launching kernels", "the PTX-only back-end compiles but never launches")
    gate = _optional("kernels_lab.grading.compile_gate", "available")
    pool = ThreadPoolExecutor(2)  # each probe compiles in a child of its own: side by side, not in turn
    try:
        ptx = pool.submit(_safely, lambda: capabilities.ptx_compile(probe=True))
        gated = pool.submit(_safely, gate) if gate is not None else None
        ptx_ok, ptx_detail = ptx.result()
        feature(ptx_ok, "PTX compile for sm_75 / sm_80 / sm_90 (tests/test_ptx.py)", ptx_detail)
        if gated is None:
            feature(ptx_ok, "grader's compile gate", "not reported by the grader (kernels_lab.grading.compile_gate "
                                                     "is absent); it needs the PTX compile above")
        else:
            gate_ok, gate_detail = gated.result()
            feature(gate_ok, "grader's compile gate", gate_detail)
    finally:  # on Ctrl-C, do not wait for a compile nobody will read (the probes' children have time limits)
        pool.shutdown(wait=False, cancel_futures=True)
    probed("grid sync across blocks", _grid_sync)
    probed("Programmatic Dependent Launch", _pdl)
    for name, probe, what in (("Nsight Compute DRAM bytes", capabilities.ncu, "ncu"),
                              ("compute-sanitizer memcheck / racecheck (grader)", capabilities.compute_sanitizer,
                               "compute-sanitizer")):
        found, where = _safely(probe)
        if found and BACKEND.on_device:
            feature(True, name, where)
        elif found:
            feature(False, name, f"{what} is here ({where}) but needs a GPU")
        else:
            feature(False, name, where + ("" if BACKEND.on_device else "; it needs a GPU as well"))
    protections = _optional("kernels_lab.grading.confine", "protections")
    if protections is None:
        lines.append("  grader sandbox: not reported (kernels_lab.grading.confine.protections is absent)")
    else:
        try:
            rows = list(protections())
        except Exception as e:  # noqa: BLE001
            rows = []
            lines.append(f"  grader sandbox: the probe itself failed: {type(e).__name__}: {e}")
        if rows:
            lines.append("grader sandbox (each submission's child process):")
        for name, in_force, how in rows:
            lines.append(f"  [{'on' if in_force else 'off':<7}] {name}: {how}")

    if problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append("no problems found (skipped features are listed above with what they need)")
    return "\n".join(lines), problems
