"""The compile gate: the student's kernel through numba's real compiler for the course's GPU architecture.

The simulator runs a kernel body as Python, so it accepts code no GPU could run (a dict, a
string, a NumPy call inside a kernel). The gate compiles the kernel with cuda.compile_ptx in a
confined child (KERNELS_LAB_BACKEND=ptx), with the signature of the exercise's first case.

    available() -> (ok, how or why not)     the probe `kernels-lab doctor` shows and the grader
                                             uses: NVVM and NVRTC found, and a small kernel that
                                             calls a plain @cuda.jit(device=True) helper compiles
    gate(ex, source) -> GateResult          one submission: passed, failed (the compiler rejects
                                             the kernel), or skipped (the toolchain or a driver
                                             is missing: the environment's fault, never a lost point)

Device functions: numba compiles a plain (not inline) device function on first call from a kernel
for "the current device", which asks the CUDA driver for its compute capability even inside
compile_ptx. Without a driver that was a CudaSupportError blamed on the student; the gate's child
answers that question with the target instead, so no driver is needed.

The target is the architecture the course configures, KERNELS_LAB_COURSE_ARCH (e.g. sm_80), by
default the oldest GPU the course supports (capabilities.STUDENT_CCS: sm_75, Colab's T4): a
kernel that compiles there compiles for the newer ones too, except for sm_90-only features (PDL),
which an exercise that needs them would configure.

    python -m kernels_lab.grading.compile_gate SUBMISSION.py ENTRY SIGNATURE RESULT.json
"""

from __future__ import annotations

import functools
import json
import linecache
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core import Exercise

COURSE_ARCH_ENV = "KERNELS_LAB_COURSE_ARCH"


def target_cc() -> tuple[int, int]:
    """The compute capability the gate compiles for (KERNELS_LAB_COURSE_ARCH=sm_XY, else the oldest
    of the course's GPUs). A malformed value is an error that names it."""
    from ..capabilities import STUDENT_CCS
    text = os.environ.get(COURSE_ARCH_ENV, "").strip().lower()
    if not text:
        return min(STUDENT_CCS)
    digits = text.removeprefix("sm_")
    if not digits.isdigit() or len(digits) < 2:
        raise ValueError(f"{COURSE_ARCH_ENV}={text!r}: write the architecture as sm_XY, e.g. sm_75 or sm_90")
    return int(digits[:-1]), int(digits[-1])


def target_name() -> str:
    major, minor = target_cc()
    return f"sm_{major}{minor}"

COMPILE_S = 180.0   # numba's first compile with NVVM can take a while on a busy machine
CU13_HINT = "pip install 'kernels-lab[cu13]'"
_ENV_ERRORS = ("CudaSupportError", "NvvmSupportError", "NvrtcSupportError", "CudaDriverError",
               "DynamicLibNotFoundError", "CCSupportError")

_PROBE_SOURCE = """
@cuda.jit(device=True)
def _twice(v):
    return v * np.float32(2)


@cuda.jit
def probe_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _twice(x[i])
"""
_PROBE_SIG = "(types.Array(types.float32, 1, 'C'), types.Array(types.float32, 1, 'C'))"


@dataclass(frozen=True)
class GateResult:
    status: str          # "passed", "failed", "skipped"
    message: str
    environment: bool = False   # skipped because the grader's environment failed, not the student


def _libraries() -> tuple[bool, str]:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return False, f"cuda.pathfinder is not installed ({CU13_HINT})"
    found = []
    for lib in ("nvvm", "nvrtc"):
        try:
            found.append(load_nvidia_dynamic_lib(lib).abs_path)
        except Exception as e:  # noqa: BLE001  (absent or broken: the gate is skipped, never fatal)
            return False, f"lib{lib} not found ({type(e).__name__}); {CU13_HINT}"
    return True, ", ".join(found)


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """Can the gate run here? NVVM and NVRTC found, and a kernel calling a plain device function
    compiles for the course's GPUs in a confined child (the check the grader makes, on a known-good kernel)."""
    ok, how = _libraries()
    if not ok:
        return False, f"no NVVM/NVRTC to compile with: {how}"
    result = _run(_PROBE_SOURCE, "probe_kernel", _PROBE_SIG, 60.0, 4 << 30)
    if result.get("status") == "compiled":
        return True, f"NVVM and NVRTC found ({how}); a kernel with a device function compiles for {target_name()}"
    return False, f"the toolchain is there but a known-good kernel does not compile: {result.get('message', '?')}"


def compile_known_good() -> None:
    """The grader's own known-good kernel (it calls a plain device function) compiled here for the course's
    GPUs; raises where the toolchain is broken. Every compile child runs it before any code of a submission's,
    so a failure after it is the submission's."""
    from numba import types

    from ..capabilities import compile_ptx
    from ..runtime import cuda
    space = {"cuda": cuda, "np": np}
    exec(_PROBE_SOURCE, space)
    compile_ptx(space["probe_kernel"].py_func, eval(_PROBE_SIG, {"types": types}), target_cc())


def signature_expr(ex: Exercise) -> str:
    """numba types of the entry's arguments at the exercise's first case, as Python source
    (any rank, any dtype numba knows: arrays are C-contiguous, as the grader passes them)."""
    size = ex.cases[0].size
    inputs = ex.spec.make_inputs(size, np.random.default_rng(0))
    outs = ex.spec.output_specs(size)
    parts = []
    for arg in ex.arguments(size):
        if arg in outs:
            shape, dtype = outs[arg]
            parts.append(f"types.Array(types.{_scalar(dtype)}, {len(shape)}, 'C')")
        elif isinstance(inputs[arg], np.ndarray):
            parts.append(f"types.Array(types.{_scalar(inputs[arg].dtype)}, {inputs[arg].ndim}, 'C')")
        else:
            v = inputs[arg]
            parts.append(f"types.{_scalar(getattr(v, 'dtype', None) or np.result_type(type(v)))}")
    return "(" + ", ".join(parts) + ",)"


def _scalar(dtype) -> str:
    """numba's name of a NumPy dtype (float32, int64, uint8, complex64, ...)."""
    from numba.np.numpy_support import from_dtype
    return str(from_dtype(np.dtype(dtype)))


def _run(source: str, entry: str, sig: str, run_s: float, memory_bytes: int) -> dict:
    """The gate's child, confined like every child; its JSON result (or why there is none)."""
    from .confine import hand_over, scratch_folder
    from .lifecycle import run_confined
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    with tempfile.TemporaryDirectory(prefix="kl-compile-") as tmp:
        tmp = Path(tmp)
        scratch = scratch_folder(tmp)
        (scratch / "submission.py").write_text(source)
        hand_over(scratch / "submission.py")
        result = scratch / "result.json"
        got = run_confined([sys.executable, "-m", "kernels_lab.grading.compile_gate", str(scratch / "submission.py"),
                            entry, sig, str(result)], tmp, env=env, run_s=run_s, address_limit=False,
                           memory_bytes=memory_bytes, phase_limits={"compile": COMPILE_S},
                           total_s=COMPILE_S + run_s + 120)
        try:
            doc = json.loads(result.read_text()) if result.exists() else None
        except ValueError:
            doc = None
    if isinstance(doc, dict) and doc.get("status") in ("compiled", "rejected", "environment", "load_error"):
        return {k: str(v)[:4000] for k, v in doc.items()}
    if got.timed_out:
        return {"status": "timeout", "message": f"did not finish within {got.status.get('phase_limit', run_s)} s"}
    if got.memory_tripped:
        return {"status": "memory", "message": f"ran out of its {memory_bytes / 2**30:g} GiB memory limit"}
    if got.status.get("warden_error"):
        return {"status": "environment", "type": "sandbox", "message": got.status["warden_error"]}
    return {"status": "died", "message": f"the compile process ended without a result "
                                         f"({got.signal and f'signal {got.signal}' or f'exit code {got.exit_code}'})"
                                         f": {got.stderr.strip()[-500:]}"}


def gate(ex: Exercise, source: str, timeout_s: float = 60.0, memory_bytes: int = 4 << 30) -> GateResult:
    """Compile the student's kernel for the course's architecture (the submission's top level runs here
    too, confined)."""
    if ex.kind != "kernel":
        return GateResult("skipped", "host functions are compiled when they launch")
    ok, why = available()
    if not ok:
        # counted on every machine all the same (grading.judge: one maximum for every grader of a course)
        return GateResult("skipped", f"not checked here ({why}): the grading machine's gap, not your kernel's: the "
                                     f"point is given, not lost (instructors: `kernels-lab doctor`)", environment=True)
    r = _run(source, ex.entry, signature_expr(ex), timeout_s, memory_bytes)
    status, msg = r.get("status"), r.get("message", "")
    if status == "compiled":
        return GateResult("passed", f"compiles for {target_name()} with NVVM")
    if status == "environment":
        return GateResult("skipped", f"not checked: the grader's toolchain failed ({r.get('type', '')}: {msg}). "
                                     f"This is the grading machine's problem, not your kernel's: the point is given, "
                                     f"not lost (instructors: `kernels-lab doctor`)", environment=True)
    if status == "rejected":
        return GateResult("failed", "numba's real compiler rejects the kernel (the simulator accepts more):\n" + msg)
    if status == "load_error":
        return GateResult("failed", f"the submission does not load for compiling: {msg}")
    if status == "timeout":
        return GateResult("failed", f"compiling for {target_name()} {msg}")
    if status == "memory":
        return GateResult("failed", f"compiling for {target_name()} {msg}")
    return GateResult("failed", f"compiling for {target_name()} failed: {msg}")


# -- the child --------------------------------------------------------------------------------------

def _fake_current_device() -> None:
    """numba asks the driver for the current device's compute capability when it compiles a plain
    device function; without a GPU, answer with the target instead."""
    from numba.cuda import compiler, dispatcher

    class _Target:
        compute_capability = target_cc()
        id = 0

    for module in (dispatcher, compiler):
        module.get_current_device = lambda: _Target()


def is_environmental(e: BaseException) -> bool:
    """Did compiling fail for the machine's reasons (no driver, no NVVM / NVRTC), not the code's? By the error's
    type alone: its words may quote the submission's own names (a global called libnvvm)."""
    return bool({t.__name__ for t in type(e).__mro__} & set(_ENV_ERRORS))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOWERING_AT = re.compile(r"\bat (\S+) \((\d+)\)$")
_CAUSES = ("No implementation of function", "Unknown attribute", "Untyped global name", "NameError",
           "Cannot determine Numba type", "Use of unsupported", "Invalid use of", "is not supported",
           "has no attribute", "Cannot unify", "Can't unify", "unsupported")


def compiler_message(e: BaseException, skip_file: str = "") -> str:
    """The lines of a compiler error that name the problem: its cause (numba's TypingError ends in "No match."
    or a "During: ..." line, which say nothing), the signature it tried, and the student's source line it
    points at (not a line of `skip_file`, the grader's own probe)."""
    lines = [ln.rstrip() for ln in _ANSI.sub("", str(e)).splitlines()]
    text = [ln.strip() for ln in lines if ln.strip()]
    cause = next((ln for ln in text if any(c in ln for c in _CAUSES)),
                 next((ln for ln in text if not ln.startswith(("Failed in", "During:", "File ", "<source"))),
                      type(e).__name__))
    said = [cause if cause.startswith(type(e).__name__) else f"{type(e).__name__}: {cause}"]
    said += [ln for ln in text if ln.startswith(">>>")][:1]
    for i, ln in enumerate(lines):
        if ln.strip().startswith('File "') and (not skip_file or skip_file not in ln):
            source = next((s.strip() for s in lines[i + 1:] if s.strip() and s.strip() != "<source elided>"), "")
            missing = source.startswith("<source missing")  # code rebuilt from data: numba has no text of it
            said.append(f"at {ln.strip().rstrip(':')}" + ("" if missing else f": {source}"))
    at = next((m for m in map(_LOWERING_AT.search, text) if m and (not skip_file or skip_file not in m[1])), None)
    if at and not any(s.startswith("at ") for s in said):  # a lowering error (NRT's) names its place only so
        source = linecache.getline(at[1], int(at[2])).strip()
        said.append(f'at File "{at[1]}", line {at[2]}' + (f": {source}" if source else ""))
    if "yield in a closure" in cause:
        said.append("a list comprehension or generator expression: CUDA code has neither; loop with range and keep "
                    "the values in scalars")
    if "unpack none" in cause.lower():
        said.append("the function returns None on some path (a bare return, or none at all): return every value "
                    "on every path")
    if "NRT required" in cause:  # numba's words name neither the line nor the cause
        said.append("a list, dict, set or NumPy array made inside a device function needs numba's "
                    "runtime (NRT), which CUDA code does not have: keep values in scalars, or use cuda.local.array")
    return "\n".join(dict.fromkeys(said))


def _child(path: str, entry: str, sig: str, result_path: str) -> int:
    import math
    import traceback
    import warnings

    warnings.simplefilter("ignore")
    result: dict = {}
    step = [0]

    def progress(phase: str) -> None:
        step[0] += 1
        with open("progress.json.tmp", "w") as f:
            json.dump({"phase": phase, "case": None, "step": step[0]}, f)
        os.replace("progress.json.tmp", "progress.json")

    def save() -> None:
        with open(result_path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(result_path + ".tmp", result_path)

    from numba import types

    from kernels_lab.grading.child import SUBMISSION_FILE, _guard_imports
    from kernels_lab.runtime import cuda
    _fake_current_device()
    try:  # the grader's own known-good kernel first: after it compiles, a failure is the submission's
        compile_known_good()
    except Exception as e:  # noqa: BLE001  (no code of the submission's has run)
        result.update(status="environment", type=type(e).__name__, message=str(e)[:2000])
        save()
        return 0
    _guard_imports()
    source = Path(path).read_text()
    os.unlink(path)
    module = __import__("types").ModuleType("submission")
    module.__dict__.update({"cuda": cuda, "np": np, "numpy": np, "math": math})
    sys.modules["submission"] = module
    progress("import")
    try:
        exec(compile(source, SUBMISSION_FILE, "exec"), module.__dict__)
        kernel = module.__dict__[entry]
        from ..runtime import kernel_class
        if not isinstance(kernel, kernel_class()):  # numba's dispatcher: this child runs on the PTX back-end
            result.update(status="rejected", type="TypeError",
                          message=f"{entry} is a {type(kernel).__name__} object, not a @cuda.jit kernel")
            save()
            return 0
    except (Exception, SystemExit) as e:  # noqa: BLE001
        result.update(status="load_error", type=type(e).__name__,
                      message=f"{type(e).__name__}: {e}"[:2000])
        save()
        return 0
    progress("compile")
    try:
        options = {k: v for k, v in kernel.targetoptions.items() if k in ("fastmath", "launch_bounds", "lineinfo")}
        cuda.compile_ptx(kernel.py_func, eval(sig, {"types": types}), cc=target_cc(), **options)
        result.update(status="compiled")
    except Exception as e:  # noqa: BLE001
        if is_environmental(e):
            result.update(status="environment", type=type(e).__name__, message=str(e)[:2000])
        else:
            lines = "".join(traceback.format_exception_only(e)).strip().splitlines()
            result.update(status="rejected", type=type(e).__name__, message="\n".join(lines[-6:])[:4000])
    save()
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:5]))
