"""A data exercise's probe kernels, built with the student's own device functions, compiled by numba's real
compiler in a child process: the PTX a judge reads, and the compile gate of every data exercise.

On a GPU a judge's probe is compiled when it launches, and numba's compiler refuses code no GPU can run (a Python
list, a dict, a NumPy call). The simulator runs the same probe as Python and accepts it, so a judge on the
simulator asks this module instead; the refusal then costs the same points on both back-ends.

    compile_probes({"name": Probe(factory, functions, signature)}) -> {"name": {"status", "ptx" | "message"}}
        status: "compiled" (with "ptx"), "rejected" (the student's code: numba's words for it) or
        "environment" (no NVVM / NVRTC, or the child failed: the grading machine's problem, said so)
    where_not_compiled(probes) -> the same, on a back-end that compiles nothing (the simulator); {} on a GPU
                                  (its launch compiles) and where no compiler is (with a warning)
    rejection(compiled) -> numba's words for the first probe its compiler rejected, or None

A function travels to the child as data (`portable`): its code, and each global and closure value it uses by
what it is (a module, a name in a module a submission may import, another device function, or a pickled value).
"""

from __future__ import annotations

import builtins
import dis
import importlib
import json
import marshal
import os
import pickle
import subprocess
import sys
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable

COMPILE_S = 120.0   # numba's import and a few small kernels: seconds, on a busy machine tens of them
READY = "probe_ptx: compiling"  # the child's line once numba is imported: a failure after it is the code's


@dataclass(frozen=True)
class Probe:
    """factory(*functions, *options) -> a @cuda.jit kernel (a module-level function: the child imports it by
    name); signature: its arguments' numba types; cc: the lowest architecture it needs (clusters: (9, 0)), else
    the course's."""
    factory: Callable[..., Any]
    functions: tuple[Any, ...]
    signature: tuple[Any, ...]
    options: tuple[Any, ...] = ()
    cc: tuple[int, int] | None = None


def portable(fn: Any, seen: dict[int, Any] | None = None) -> dict[str, Any]:
    """A device function as data, to rebuild in another process (`rebuild`)."""
    from .child import ALLOWED_IMPORTS
    seen = {} if seen is None else seen
    py = getattr(fn, "py_func", fn)
    seen[id(py)] = True
    handed_out = {id(v): (m, k) for m in ALLOWED_IMPORTS for k, v in vars(importlib.import_module(m)).items()}

    def value(v: Any) -> tuple:
        if id(v) in handed_out:
            return ("attr", *handed_out[id(v)])
        if isinstance(v, types.ModuleType):
            return ("module", v.__name__)
        if hasattr(v, "py_func"):
            if id(v.py_func) in seen:
                raise ValueError(f"{v.py_func.__name__} calls itself: a device function cannot recurse")
            return ("device", portable(v, seen))
        try:
            return ("value", pickle.dumps(v))
        except Exception as e:  # noqa: BLE001  (pickle raises many kinds: a value of the submission's own class)
            raise ValueError(f"{py.__name__} uses a {type(v).__name__}, which cannot be compiled into a device "
                             f"function ({type(e).__name__}: {e}): use numbers, NumPy scalars or arrays") from e

    names, codes = set(), [py.__code__]
    while codes:  # the globals it loads (co_names holds attribute names too)
        c = codes.pop()
        names |= {i.argval for i in dis.get_instructions(c) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    env = {n: value(py.__globals__[n]) for n in names if n in py.__globals__}
    return {"name": py.__name__, "code": marshal.dumps(py.__code__), "defaults": pickle.dumps(py.__defaults__),
            "env": env, "closure": [value(c.cell_contents) for c in py.__closure__ or ()]}


def rebuild(d: dict[str, Any]) -> Any:
    """`portable`'s data back into a @cuda.jit(device=True) function of this process's back-end."""
    from ..runtime import cuda

    def value(v: tuple) -> Any:
        kind = v[0]
        if kind == "attr":
            return getattr(importlib.import_module(v[1]), v[2])
        if kind == "module":
            return importlib.import_module(v[1])
        return rebuild(v[1]) if kind == "device" else pickle.loads(v[1])

    space = {"__builtins__": builtins, **{n: value(v) for n, v in d["env"].items()}}
    fn = types.FunctionType(marshal.loads(d["code"]), space, d["name"], pickle.loads(d["defaults"]),
                            tuple(types.CellType(value(c)) for c in d["closure"]) or None)
    return cuda.jit(device=True)(fn)


def compile_probes(probes: dict[str, Probe]) -> dict[str, dict[str, str]]:
    """Each probe compiled apart, in a child on the PTX back-end (no GPU needed)."""
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)

    def each(status: str, message: str) -> dict[str, dict[str, str]]:
        return {name: {"status": status, "message": message} for name in probes}
    try:
        job = pickle.dumps({name: {"factory": (p.factory.__module__, p.factory.__name__),
                                   "functions": [portable(f) for f in p.functions],
                                   "options": p.options, "signature": p.signature, "cc": p.cc}
                            for name, p in probes.items()})
    except ValueError as e:  # a recursive device function, a value that cannot be sent
        return each("rejected", str(e))
    try:
        proc = subprocess.run([sys.executable, "-m", "kernels_lab.grading.probe_ptx"], input=job,
                              capture_output=True, env=env, timeout=COMPILE_S)
    except subprocess.TimeoutExpired:  # as the kernel gate's: a compile that never ends is the code's
        return each("rejected", f"compiling your function inside the probe did not finish within {COMPILE_S:g} s")
    lines = proc.stdout.decode().strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (ValueError, IndexError):
        said = f"(exit code {proc.returncode}): {proc.stderr.decode()[-400:]}"
        # past READY, the child was rebuilding the student's functions (their pickled values) or compiling them
        return each("rejected", f"the compiler's process ended while it rebuilt or compiled your function {said}") \
            if READY in lines else each("environment", f"the compiler's child ended without a result {said}")


def where_not_compiled(probes: dict[str, Probe]) -> dict[str, dict[str, str]]:
    """compile_probes where kernels are not compiled when they launch (the simulator); {} on a GPU, whose launch
    compiles (its refusal is the judge's outcome already), and {} without a compiler here (no NVVM / NVRTC),
    with a warning: the simulator then accepts code a GPU's compiler would refuse."""
    from ..backend import BACKEND
    from ..capabilities import ptx_libraries
    if BACKEND.on_device:
        return {}
    libs = ptx_libraries()
    if not libs.available:
        warnings.warn(f"no compiler here ({libs.detail}): the simulator runs code a GPU's compiler would refuse",
                      stacklevel=2)
        return {}
    compiled = compile_probes(probes)
    for name, got in compiled.items():
        if got["status"] == "environment":
            warnings.warn(f"the probe {name} was not compiled here: {got['message']}", stacklevel=2)
    return compiled


def rejection(compiled: dict[str, dict[str, str]]) -> str | None:
    """numba's words for the first probe its compiler rejected (the student's code), or None."""
    return next((got["message"] for got in compiled.values() if got["status"] == "rejected"), None)


def _child() -> None:
    """The job on stdin; on stdout, as JSON, each probe: {"status": compiled | rejected | environment, ...}."""
    from ..capabilities import compile_ptx
    from .compile_gate import compiler_message, is_environmental, target_cc
    warnings.simplefilter("ignore")
    job = pickle.loads(sys.stdin.buffer.read())  # the grader's data: each function's own values stay bytes here
    print(READY, flush=True)
    out = {}
    for name, p in job.items():
        factory = getattr(importlib.import_module(p["factory"][0]), p["factory"][1])
        cc = max(target_cc(), tuple(p["cc"])) if p["cc"] else target_cc()
        try:
            kernel = factory(*(rebuild(f) for f in p["functions"]), *p["options"])
            out[name] = {"status": "compiled", "ptx": compile_ptx(kernel.py_func, p["signature"], cc)}
        except Exception as e:  # noqa: BLE001  (the student's code, or the toolchain: said which)
            out[name] = {"status": "environment" if is_environmental(e) else "rejected",
                         "message": compiler_message(e, skip_file=os.path.basename(
                             sys.modules[p["factory"][0]].__file__))[:1500]}
    print(json.dumps(out))


if __name__ == "__main__":
    _child()
