"""A data exercise's probe kernels, built with the student's own device functions, compiled by numba's real
compiler in a child process: the PTX a judge reads, and the compile gate of every data exercise.

On a GPU a judge's probe is compiled when it launches, and numba's compiler refuses code no GPU can run (a Python
list, a dict, a NumPy call). The simulator runs the same probe as Python and accepts it, so a judge on the
simulator asks this module instead; the refusal then costs the same points on both back-ends.

    compile_probes({"name": Probe(factory, functions, signature)}) -> {"name": {"status", "ptx" | "message"}}
        status: "compiled" (with "ptx"), "rejected" (the student's code: numba's words for it) or
        "environment" (the grader's own known-good kernel did not compile there: the machine's problem, said so)
    where_not_compiled(probes) -> the same, on a back-end that compiles nothing (the simulator); {} on a GPU
                                  (its launch compiles); "environment" for each probe where no compiler is
    rejection(compiled) -> numba's words for the first probe its compiler rejected, or None
    refusal(ran, runs, what), refused(checks, words, what) -> a judge's words for a refusal (the gate's on the
                                  simulator, a launch's on a GPU), and every check failed by it
    not_compiled(compiled) -> words for a check's message where the gate could not run, or ""

A function travels to the child as data (`portable`): its code, and each global and closure value it uses as
what it is (numbers, NumPy scalars and arrays, tuples, a module or name a submission may use, another device
function); nothing is pickled, so the compiler's process runs no code of the submission's. What this guards
against is code that does not name the grader: a submission that reaches into the grader's own objects in its
process (the judge's run is there too) is beyond any check made in that process.
"""

from __future__ import annotations

import builtins
import dis
import importlib
import json
import linecache
import marshal
import os
import pickle
import subprocess
import sys
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

COMPILE_S = 120.0   # numba's import and a few small kernels: seconds, on a busy machine tens of them
READY = "probe_ptx: compiling"  # the child's line once the known-good kernel compiled: a failure after it is the
                                # code's
# the interpreter and environment before any submission ran (grading/child.py imports this module first): a
# submission that changes sys.executable or os.environ does not change how the compiler's process starts
_STARTED_WITH = (sys.executable, dict(os.environ))


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


_HANDING_MODULES = ("math", "cmath", "numpy", "numba")  # beside ALLOWED_IMPORTS: what a device function may name
_DATA = (bool, int, float, complex, str, type(None))


def portable(fn: Any, calling: tuple[int, ...] = ()) -> dict[str, Any]:
    """A device function as data, to rebuild in another process (`rebuild`). Its values travel as what they
    are, never pickled: numbers, strings, NumPy scalars and arrays, tuples of them, the modules and names a
    submission may use, and its other device functions; anything else is refused here, naming it (ValueError).
    So the compiler's process never runs code of the submission's."""
    from ..runtime import kernel_class
    from .child import ALLOWED_IMPORTS
    if not isinstance(fn, kernel_class()):
        raise ValueError(f"a {type(fn).__name__} is not a @cuda.jit(device=True) function: only those compile "
                         f"for a GPU")
    py = fn.py_func
    calling += (id(py),)  # the call chain down to here: a helper two functions share is no recursion
    modules = set(ALLOWED_IMPORTS) | set(_HANDING_MODULES)
    handed_out = {id(v): (m, k) for m in sorted(modules) for k, v in vars(importlib.import_module(m)).items()
                  if not isinstance(v, (*_DATA, np.generic, np.ndarray, tuple))}  # data is sent as data

    def value(v: Any) -> tuple:
        # exact types only: a subclass's own __reduce__ would run in the compiler's process when the job is read
        if type(v) in _DATA:
            return ("data", v)
        if (type(v) is np.ndarray or isinstance(v, np.generic) and type(v).__module__ == "numpy") \
                and v.dtype.kind in "biufc":
            return ("array", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes(), isinstance(v, np.generic))
        if type(v) is tuple:
            return ("tuple", [value(x) for x in v])
        if id(v) in handed_out:
            return ("attr", *handed_out[id(v)])
        if isinstance(v, types.ModuleType) and v.__name__ in modules:
            return ("module", v.__name__)
        if isinstance(v, kernel_class()):
            if id(v.py_func) in calling:
                raise ValueError(f"{v.py_func.__name__} calls itself: a device function cannot recurse")
            return ("device", portable(v, calling))
        what = (f"the module {v.__name__}" if isinstance(v, types.ModuleType) else
                f"a plain Python function ({getattr(v, '__name__', '?')}): numba compiles only @cuda.jit(device=True) "
                f"functions into a kernel" if isinstance(v, types.FunctionType) else
                f"a {type(v).__name__}: CUDA code has no lists, dicts or objects" if isinstance(v, (list, dict, set))
                else f"a {type(v).__name__}")
        raise ValueError(f"{py.__name__} uses {what}. A device function may use numbers, NumPy scalars and arrays, "
                         f"tuples of them, math, numpy, cuda and the kernels_lab modules a submission may import")

    names, codes = set(), [py.__code__]
    while codes:  # the globals it loads (co_names holds attribute names too)
        c = codes.pop()
        names |= {i.argval for i in dis.get_instructions(c) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    env = {n: value(py.__globals__[n]) for n in names if n in py.__globals__}
    return {"name": py.__name__, "code": marshal.dumps(py.__code__), "defaults": value(py.__defaults__),
            "env": env, "closure": [value(c.cell_contents) for c in py.__closure__ or ()]}


def rebuild(d: dict[str, Any]) -> Any:
    """`portable`'s data back into a @cuda.jit(device=True) function of this process's back-end."""
    from ..runtime import cuda

    def value(v: tuple) -> Any:
        kind = v[0]
        if kind == "data":
            return v[1]
        if kind == "array":
            found = np.frombuffer(v[3], np.dtype(v[1])).reshape(v[2]).copy()
            return found[()] if v[4] else found
        if kind == "tuple":
            return tuple(value(x) for x in v[1])
        if kind == "attr":
            return getattr(importlib.import_module(v[1]), v[2])
        if kind == "module":
            return importlib.import_module(v[1])
        return rebuild(v[1])  # "device"

    space = {"__builtins__": builtins, **{n: value(v) for n, v in d["env"].items()}}
    fn = types.FunctionType(marshal.loads(d["code"]), space, d["name"], value(d["defaults"]),
                            tuple(types.CellType(value(c)) for c in d["closure"]) or None)
    return cuda.jit(device=True)(fn)


def _every(names: Iterable[str], status: str, message: str) -> dict[str, dict[str, str]]:
    """One answer for every probe (a job that failed as a whole)."""
    return {name: {"status": status, "message": message} for name in names}


_COMPILED: dict[bytes, str] = {}  # a judge's cases (visible, hidden) send the same job: its child's answer, once


def compile_probes(probes: dict[str, Probe]) -> dict[str, dict[str, str]]:
    """Each probe compiled apart, in a child on the PTX back-end (no GPU needed), started from the interpreter
    and environment this process had before any submission ran; a job this process has compiled is answered
    again from that child's words (a child costs numba's import and a compile: ~1.5 s)."""
    env = {**_STARTED_WITH[1], "KERNELS_LAB_BACKEND": "ptx", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        sent = {name: {"factory": (p.factory.__module__, p.factory.__name__),
                       "functions": [portable(f) for f in p.functions], "options": p.options, "cc": p.cc,
                       "sources": _sources(p.functions)}
                for name, p in probes.items()}
    except ValueError as e:  # a recursive device function, a value no device function can use
        return _every(probes, "rejected", str(e))
    # numba's types pickle with a counter of their own: the same job is known by the types' names
    seen = pickle.dumps({name: {**d, "signature": [str(t) for t in probes[name].signature]}
                         for name, d in sent.items()})
    if seen in _COMPILED:
        return json.loads(_COMPILED[seen])
    job = pickle.dumps({name: {**d, "signature": probes[name].signature} for name, d in sent.items()})
    try:
        proc = subprocess.run([_STARTED_WITH[0], "-m", "kernels_lab.grading.probe_ptx"], input=job,
                              capture_output=True, env=env, timeout=COMPILE_S)
    except subprocess.TimeoutExpired:  # as the kernel gate's: a compile that never ends is the code's
        return _every(probes, "rejected",
                      f"compiling your function inside the probe did not finish within {COMPILE_S:g} s")
    lines = proc.stdout.decode().strip().splitlines()
    try:
        found = json.loads(lines[-1])
        if all(got["status"] != "environment" for got in found.values()):  # a broken toolchain is asked again
            _COMPILED[seen] = lines[-1]
        return found
    except (ValueError, IndexError):
        said = f"(exit code {proc.returncode}): {proc.stderr.decode()[-400:]}"
        if READY in lines:  # the known-good kernel compiled: what ended the child was the submission's code
            return _every(probes, "rejected", f"the compiler's process ended while it compiled your function {said}")
        # NVVM and NVRTC are here (where_not_compiled asked) and the interpreter is the grader's own: a child that
        # cannot start is most likely the submission's doing (its process's limits), and a gate it could skip
        # would be a way round it
        return _every(probes, "rejected", f"the compiler's process could not start from your submission's process "
                                          f"{said}. If your code changes no limits of its process, this is the "
                                          f"grading machine's problem: tell your instructor (kernels-lab doctor)")


def _sources(functions: Iterable[Any]) -> dict[str, str]:
    """The text of the files the functions come from, as this process's linecache holds it ("<submission>": the
    grading child puts it there), so that numba's errors in the compiler's process quote the student's line."""
    files = {f.py_func.__code__.co_filename for f in functions}  # portable has made sure they are dispatchers
    return {path: text for path in sorted(files) if (text := "".join(linecache.getlines(path)))}


def where_not_compiled(probes: dict[str, Probe]) -> dict[str, dict[str, str]]:
    """compile_probes where kernels are not compiled when they launch (the simulator); {} on a GPU, whose launch
    compiles (its refusal is the judge's outcome already); "environment" for each probe where no compiler is."""
    from ..backend import BACKEND
    from ..capabilities import ptx_libraries
    if BACKEND.on_device:
        return {}
    libs = ptx_libraries()
    if not libs.available:
        return _every(probes, "environment", f"no NVVM / NVRTC here ({libs.detail})")
    return compile_probes(probes)


def rejection(compiled: dict[str, dict[str, str]]) -> str | None:
    """numba's words for the first probe its compiler rejected (the student's code), or None."""
    return next((got["message"] for got in compiled.values() if got["status"] == "rejected"), None)


def refusal(ran: dict[str, Any], runs: Iterable[Any], what: str) -> str | None:
    """A judge's words for numba's refusal of `what` (the student's function), or None: on the simulator from the
    gate (ran["rejected"], set by the judge's run from `rejection`), on a GPU from a launch that failed to compile
    (one of `runs` is {"error": ..., "rejected": True})."""
    if "rejected" in ran:
        return (f"numba's compiler rejects {what} (the simulator would run it as Python; a GPU cannot compile it): "
                f"{ran['rejected']}")
    failed = next((r for r in runs if isinstance(r, dict) and r.get("rejected")), None)
    return None if failed is None else f"numba's compiler rejects {what}: {failed['error']}"


def launch_failure(e: BaseException, probe_file: str) -> dict[str, Any]:
    """A judge's probe launch that raised, as its run records it: numba's compiler refusing the student's function
    (a GPU compiles at the first launch) in compiler_message's words, the same as the simulator's gate gives
    (no terminal colours, the line that names the problem, a hint; no line of probe_file, the judge's probe);
    anything else, its first line."""
    from numba.core.errors import NumbaError
    from .compile_gate import compiler_message
    if isinstance(e, NumbaError):
        return {"error": compiler_message(e, skip_file=os.path.basename(probe_file)), "rejected": True}
    first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return {"error": f"{type(e).__name__}: {first}", "rejected": False}


def refused(checks: Iterable[str], words: str, what: str) -> list[tuple[str, bool, str]]:
    """Every check failed by numba's refusal: its words once, under the first check."""
    return [(c, False, words if i == 0 else f"numba's compiler rejected {what} (above)")
            for i, c in enumerate(checks)]


def not_compiled(compiled: dict[str, dict[str, str]]) -> str:
    """For a check's message: where the gate could not run here, that the simulator ran the function unchecked."""
    why = next((got["message"] for got in compiled.values() if got["status"] == "environment"), None)
    return "" if why is None else (f" (NOT COMPILED HERE: {why}; the simulator runs code a GPU's compiler may "
                                   f"refuse, so a GPU may grade it lower; instructors: kernels-lab doctor)")


class _GradersData(pickle.Unpickler):
    """The job's reader: builds numba's types and nothing else (portable sends values as data, never objects)."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("numba.") or (module, name) in (("copyreg", "_reconstructor"), ("builtins", "object")):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"the compiler's job holds {module}.{name}: only numba's types are sent")


def _child() -> None:
    """The job on stdin; on stdout, as JSON, each probe: {"status": compiled | rejected | environment, ...}. A
    kernel of the grader's own compiles first: if it does not, the toolchain is broken here ("environment"), and
    once it has, whatever fails is the submission's code (never judged from the words of an error)."""
    from ..capabilities import compile_ptx
    from .compile_gate import compile_known_good, compiler_message, target_cc
    warnings.simplefilter("ignore")
    job = _GradersData(sys.stdin.buffer).load()  # the functions as `portable` made them, and numba's types
    try:
        compile_known_good()
    except Exception as e:  # noqa: BLE001  (no code of the submission's has been read yet)
        print(json.dumps(_every(job, "environment", f"{type(e).__name__}: {e}"[:600])))
        return
    print(READY, flush=True)
    out = {}
    for name, p in job.items():
        for path, text in p["sources"].items():  # numba reads a function's lines from linecache
            linecache.cache[path] = (len(text), None, text.splitlines(True), path)
        factory = getattr(importlib.import_module(p["factory"][0]), p["factory"][1])
        cc = max(target_cc(), tuple(p["cc"])) if p["cc"] else target_cc()
        try:
            kernel = factory(*(rebuild(f) for f in p["functions"]), *p["options"])
            out[name] = {"status": "compiled", "ptx": compile_ptx(kernel.py_func, p["signature"], cc)}
        except Exception as e:  # noqa: BLE001  (the known-good kernel compiled: this is the code's)
            out[name] = {"status": "rejected", "message": compiler_message(e, skip_file=os.path.basename(
                sys.modules[p["factory"][0]].__file__))[:1500]}
    print(json.dumps(out))


if __name__ == "__main__":
    _child()
