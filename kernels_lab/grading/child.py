"""The child side of the sandbox: import the submission, run it on the given inputs, report.

    python -m kernels_lab.grading.child JOB.pkl REPORT.json PROGRESS.json

The child never sees a reference or a verdict: it gets inputs, and returns outputs and what it
saw happen (launch records, who wrote each output element, traced bytes). Everything it reports
is checked by the parent. Before each step it writes PROGRESS.json ({"phase", "case", "step"}):
the warden restarts that phase's clock there, and a timeout names the run that hung.

The work must be a kernel's: run_case watches every launch (kernels_lab.instrument.launch_hook) and
snapshots the outputs before and after each one, so each output element's last change is
attributed to a launch of the submission's own kernel, to a kernel it did not write (a copied
reference), or to the host (an answer computed with NumPy and copied in). The submission may not
import kernels_lab beyond ALLOWED_IMPORTS (the grader and the reference solutions live
there); a kernel exercise's entry must be a real @cuda.jit kernel defined in the submission.
"""

from __future__ import annotations

import dis
import json
import linecache
import os
import sys
import threading
import traceback
import types
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from . import probe_ptx  # noqa: F401  (first: its record of the interpreter and environment, before any submission)

SUBMISSION_FILE = "<submission>"
# what a submission may import from kernels_lab: what the lessons teach it to use in an answer (the
# back-end; the device operations numba lacks: griddepcontrol for lesson 06's grouped answer, the 16-byte
# loads; lesson 04's warp and block reductions); no solutions live there. tests/test_grading.py checks
# that every module a lesson imports and that holds device functions is here (but the workloads and topics: the
# reference solutions).
ALLOWED_IMPORTS = ("kernels_lab.runtime", "kernels_lab.intrinsics", "kernels_lab.reduce", "kernels_lab.clusters")


def _allowed(module: str) -> bool:
    return not (module == "kernels_lab" or module.startswith("kernels_lab.")) or \
        any(module == a or module.startswith(a + ".") for a in ALLOWED_IMPORTS)


def import_refusal(module: str) -> str:
    """The words for a kernels_lab module a submission may not use (the grader's child and the notebook)."""
    return (f"a submission may not import {module}: the grader and the exercises' reference solutions live in "
            f"kernels_lab (cuda, np and math are already defined for you; {', '.join(ALLOWED_IMPORTS)} are allowed)")


def forbidden_import(entry: Any) -> str | None:
    """In a notebook (lessons.check): the refusal of the first kernels_lab module outside ALLOWED_IMPORTS
    that the entry's code uses, directly or through the functions and kernels of the student's it calls
    (the grader's child refuses the import itself, in _guard_imports); None when there is none."""
    import importlib
    # what the allowed modules hand out is allowed, wherever it was defined (the simulator's cuda, say)
    handed_out = {id(v) for m in ALLOWED_IMPORTS for v in vars(importlib.import_module(m)).values()}
    todo, seen = [getattr(entry, "py_func", entry)], set()
    while todo:
        func = todo.pop()
        code = getattr(func, "__code__", None)
        if code is None or id(func) in seen or not defined_outside_kernels_lab(func):
            continue
        seen.add(id(func))
        names, codes = set(), [code]
        while codes:  # the globals it loads (not co_names: attribute names such as out.size are there too)
            c = codes.pop()
            names |= {i.argval for i in dis.get_instructions(c) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        space = getattr(func, "__globals__", {})
        for name in names:
            value = space.get(name)
            if id(value) in handed_out:
                continue
            inner = getattr(value, "py_func", value)
            module = value.__name__ if isinstance(value, types.ModuleType) else getattr(inner, "__module__", None)
            if isinstance(module, str) and not _allowed(module):
                return import_refusal(module)
            if callable(inner) and hasattr(inner, "__code__"):
                todo.append(inner)
    return None


def _describe(exc: BaseException) -> dict:
    tb = traceback.extract_tb(exc.__traceback__)
    student = [f for f in tb if f.filename == SUBMISSION_FILE]
    where = f"line {student[-1].lineno}" if student else ""
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "where": where,
            "traceback": "".join(traceback.format_exception(exc))[-4000:]}


def _package_dir() -> str:
    return str(Path(__file__).resolve().parents[1])


def defined_outside_kernels_lab(py_func: Any) -> bool:
    """The default test of 'the student's own kernel' (in a notebook): not one of kernels_lab's."""
    code = getattr(py_func, "__code__", None)
    if code is None:
        return False
    path = code.co_filename
    return not (os.path.isabs(path) and os.path.realpath(path).startswith(_package_dir() + os.sep))


def defined_in_submission(py_func: Any) -> bool:
    code = getattr(py_func, "__code__", None)
    return code is not None and code.co_filename == SUBMISSION_FILE


def entry_problem(entry: Any, kind: str, name: str, own: Callable[[Any], bool] = defined_outside_kernels_lab) -> str | None:
    """Why `entry` cannot be graded as the exercise's kernel (None when it can)."""
    if kind != "kernel":
        return None if callable(entry) else f"{name} must be a function, got {type(entry).__name__}"
    from kernels_lab.runtime import kernel_class
    if not isinstance(entry, kernel_class()) or getattr(entry, "_device", False):
        what = "a device function" if getattr(entry, "_device", False) else f"a {type(entry).__name__} object"
        return (f"{name} is {what}, not a @cuda.jit kernel: the grader launches your kernel itself "
                f"({name}[grid, block](...)), so {name} must be the kernel")
    if not own(entry.py_func):
        where = getattr(getattr(entry.py_func, "__code__", None), "co_filename", "?")
        return (f"{name} is a kernel defined in {where}, not in your submission: write the kernel yourself "
                f"(a copied reference earns no credit)")
    return None


class _Provenance:
    """Who last changed each output element: 0 nobody, 1 the host, 2 an own kernel, 3 another kernel."""

    HOST, OWN, FOREIGN = 1, 2, 3

    def __init__(self, outputs: dict[str, Any], sync: Callable[[], None]):
        import numpy as np
        self.np, self.outputs, self.sync = np, outputs, sync
        self.state = {k: self._bits(v) for k, v in outputs.items()}
        self.who = {k: np.zeros(s.shape, np.uint8) for k, s in self.state.items()}
        self.foreign_names: set[str] = set()

    def _bits(self, dev):
        a = dev.copy_to_host()
        return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fc" and a.dtype.itemsize in (2, 4, 8) else a

    def _mark(self, by: int) -> None:
        for k, dev in self.outputs.items():
            now = self._bits(dev)
            changed = now != self.state[k]
            self.who[k][changed] = by
            self.state[k] = now

    def begin(self) -> None:  # anything changed since the last launch ended was the host
        self.sync()
        self._mark(self.HOST)

    def end(self, own: bool, name: str) -> None:
        self.sync()
        self._mark(self.OWN if own else self.FOREIGN)
        if not own:
            self.foreign_names.add(name)

    def summary(self) -> dict[str, Any]:
        np = self.np
        out = {}
        for k, who in self.who.items():
            flat = who.reshape(-1)
            host, foreign = np.flatnonzero(flat == self.HOST), np.flatnonzero(flat == self.FOREIGN)
            out[k] = {"host": int(host.size), "first_host": int(host[0]) if host.size else None,
                      "foreign": int(foreign.size), "first_foreign": int(foreign[0]) if foreign.size else None}
        return out


def _root(ary: Any) -> Any:
    """The buffer a NumPy view looks into (the simulator's device arrays are NumPy arrays inside)."""
    while getattr(ary, "base", None) is not None and hasattr(ary.base, "__array_interface__"):
        ary = ary.base
    return ary


class _ArrayRoles:
    """Which arrays each launch read and wrote (simulator: every global access is seen), by role: the
    exercise's own names for its inputs and outputs, "temporary 1", "temporary 2", ... for arrays the
    submission allocated (in the order first touched). The evidence of an intermediate that one launch
    writes and a later one reads (judge's "one intermediate in global memory")."""

    def __init__(self, named: dict[str, Any], launches: list):
        self.names = {id(_root(a._ary)): k for k, a in named.items() if hasattr(a, "_ary")}
        self.launches = launches   # run_case's list of launches so far: the current one is the last
        self.seen: dict[int, tuple[set[str], set[str]]] = {}
        self.temporaries = 0

    def saw(self, ary, _index, write: bool) -> None:
        key = id(_root(ary))
        name = self.names.get(key)
        if name is None:
            self.temporaries += 1
            name = self.names[key] = f"temporary {self.temporaries}"
        read, written = self.seen.setdefault(len(self.launches) - 1, (set(), set()))
        (written if write else read).add(name)

    def by_launch(self) -> list[dict[str, list[str]]]:
        empty = (set(), set())
        return [{"read": sorted(self.seen.get(k, empty)[0]), "written": sorted(self.seen.get(k, empty)[1])}
                for k in range(len(self.launches))]


def run_case(entry, kind: str, argument_order, case: dict, own: Callable[[Any], bool] | None = None,
             keep: list | None = None, entry_name: str | None = None) -> dict:
    """Run the student's code once on a case's inputs: outputs, launches, who wrote what, traced bytes.

    own(py_func) -> bool: is this kernel the student's (default: not defined inside kernels_lab;
    the grader's child requires the submission itself). keep: a list that holds the run's device
    arrays alive (so a sanitizer's addresses stay unique to one run)."""
    from kernels_lab.arrays import poisoned, to_device
    from kernels_lab.instrument.launch_hook import listening
    from kernels_lab.backend import BACKEND
    from kernels_lab.runtime import cuda
    own = own or defined_outside_kernels_lab
    result = {"id": case["id"], "outputs": None, "error": None, "launches": None, "bytes": None,
              "last_writer": None, "own_launches": 0, "entry_launches": 0, "foreign": [], "provenance": None,
              "allocations": None, "entry_problem": None, "arrays": None}
    name = entry_name or getattr(getattr(entry, "py_func", entry), "__name__", None) or "the entry"
    problem = entry_problem(entry, kind, name, own)
    if problem:
        result["entry_problem"] = problem
        return result
    try:
        dev_in = to_device(case["inputs"])
        dev_out = poisoned(case["output_specs"])
        if keep is not None:
            keep.append((dev_in, dev_out))
        if BACKEND.on_device:
            result["allocations"] = [[int(a.device_ctypes_pointer.value or 0), int(a.nbytes)]
                                     for a in (*dev_in.values(), *dev_out.values())
                                     if hasattr(a, "device_ctypes_pointer")]  # arrays, not scalars
        args = [dev_out[k] if k in dev_out else dev_in[k] for k in argument_order]
        prov = _Provenance(dev_out, cuda.synchronize if BACKEND.on_device else (lambda: None))
        launches: list = []
        entry_func = getattr(entry, "py_func", None)

        def begin(rec, _args, py_func):
            prov.begin()
            launches.append((rec, py_func))

        def end(rec):
            py_func = next((f for r, f in reversed(launches) if r is rec), None)
            prov.end(py_func is not None and own(py_func), rec.kernel)

        tracer, watcher, roles = nullcontext(), nullcontext(), None
        if BACKEND.can_trace:
            from kernels_lab.instrument.trace import tracing, watching
            tracer = tracing(writers=True, perturb_seed=case.get("perturb_seed"), yield_probability=0.5)
            roles = _ArrayRoles({**dev_in, **dev_out}, launches)
            watcher = watching(roles.saw)
        with listening(begin, end), tracer as trace, watcher:
            if kind == "kernel":
                grid, block = case["config"]
                entry[grid, block](*args)
            else:
                entry(*args)
        if BACKEND.on_device:
            cuda.synchronize()
        prov.begin()  # whatever changed after the last launch was the host
        result["outputs"] = {k: v.copy_to_host() for k, v in dev_out.items()}
        result["launches"] = [(r.kernel, r.grid, r.block) for r, _ in launches]
        result["own_launches"] = sum(1 for _, f in launches if f is not None and own(f))
        code = getattr(entry_func, "__code__", None)
        result["entry_launches"] = sum(1 for _, f in launches if f is not None and
                                       (f is entry_func or (code is not None and getattr(f, "__code__", None) is code)))
        result["foreign"] = sorted(prov.foreign_names | {r.kernel for r, f in launches if f is None or not own(f)})
        result["provenance"] = prov.summary()
        if trace is not None:
            result["bytes"] = trace.bytes_total
            result["arrays"] = roles.by_launch()
            result["last_writer"] = dict(trace.last_writer)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a failing run is a graded outcome)
        result["error"] = _describe(e)
    return result


def _guard_imports() -> None:
    """Code of the submission may not import kernels_lab (bar ALLOWED_IMPORTS)."""
    import builtins
    original = builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (globals or {}).get("__name__") == "submission" and not _allowed(name):
            raise ImportError(import_refusal(name))
        return original(name, globals, locals, fromlist, level)
    builtins.__import__ = guarded


SIM_THREAD_STACK = 2 << 20  # bytes of stack per simulated CUDA thread (a Python thread each)


def main(job_path: str, report_path: str, progress_path: str | None = None) -> int:
    sys.setswitchinterval(5e-5)  # simulated threads hand over the GIL sooner
    # Each simulated thread's stack counts against the child's address-space limit; the default comes
    # from the machine's stack limit (32 MiB a thread where that is unlimited, as on the H200 image:
    # "can't start new thread" in the traffic trace there). Kernel code needs little stack.
    threading.stack_size(SIM_THREAD_STACK)
    warnings.simplefilter("ignore")  # numba's performance warnings never cost points
    step = [0]

    def progress(phase: str, case: int | None = None) -> None:
        if not progress_path:
            return
        step[0] += 1
        tmp = progress_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"phase": phase, "case": case, "step": step[0]}, f)
        os.replace(tmp, progress_path)

    import pickle
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    os.unlink(job_path)  # the inputs stay in memory only
    nonce = job.pop("nonce")
    report: dict[str, Any] = {"nonce": nonce, "imported": False, "import_error": None, "cases": []}

    import numpy as np

    from kernels_lab.grading.records import encode
    from kernels_lab.instrument import launch_hook
    from kernels_lab.runtime import cuda

    encoded: list[str] = []  # each finished case's JSON, encoded once: re-encoding them all at every save was
    # quadratic (two thirds of a 24-run grade's time went to it)

    def save():
        encoded.extend(json.dumps(encode(c)) for c in report["cases"][len(encoded):])
        fields = (f"{json.dumps(k)}: " + ("[" + ", ".join(encoded) + "]" if k == "cases" else json.dumps(encode(v)))
                  for k, v in report.items())
        tmp = report_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("{" + ", ".join(fields) + "}")
        os.replace(tmp, report_path)

    launch_hook.install()  # before the submission runs, so its launches are heard
    _guard_imports()
    module = types.ModuleType("submission")
    module.__dict__.update({"cuda": cuda, "np": np, "numpy": np, "math": __import__("math")})
    sys.modules["submission"] = module
    # its lines for numba's errors and tracebacks (here and in the data gate's compiler): not a file on disk
    linecache.cache[SUBMISSION_FILE] = (len(job["source"]), None, job["source"].splitlines(True), SUBMISSION_FILE)
    progress("import")
    try:
        exec(compile(job["source"], SUBMISSION_FILE, "exec"), module.__dict__)
        entry = module.__dict__.get(job["entry"])
        if entry is None:
            raise NameError(f"the submission defines no {job['entry']!r}")
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a broken submission is a graded outcome)
        report["import_error"] = _describe(e)
        save()
        progress("done")
        return 0
    report["imported"] = True
    save()  # an import that worked is on record even if a case then hangs

    if job["kind"] == "data":
        from kernels_lab.grading.cases import load_judge
        judge = load_judge(types.SimpleNamespace(judge=job["judge"]))
        for case in job["cases"]:
            progress("run", case["id"])
            report["cases"].append(run_data_case(entry, judge, case, job["entry"]))
            save()
        progress("done")
        return 0
    keep: list | None = [] if job.get("keep_arrays") else None
    for case in job["cases"]:
        progress("run", case["id"])
        got = run_case(entry, job["kind"], job["argument_order"], case, own=defined_in_submission, keep=keep,
                       entry_name=job["entry"])
        if got["last_writer"] is not None:  # JSON: [[label, flat, block, thread], ...]
            got["last_writer"] = [[k[0], k[1], list(v[0]), list(v[1])] for k, v in got["last_writer"].items()]
        report["cases"].append(got)
        save()
    if job.get("speed"):
        progress("speed")
        report["speed"] = run_speed(entry, job["argument_order"], job["cases"][0])
        save()
    progress("done")
    return 0


def _plain(value: Any) -> Any:
    """The student's value as the report can carry it (JSON), else its repr (which no judge accepts)."""
    from kernels_lab.grading.records import encode
    try:
        plain = encode(value)
        json.dumps(plain)
        return plain
    except Exception:  # noqa: BLE001  (an object JSON cannot hold: a cycle, a custom class)
        return f"<{type(value).__name__}: {repr(value)[:200]}>"


def run_data_case(entry, judge, case: dict, name: str) -> dict:
    """A "data" exercise: call the entry with the case's argument, then let the judge run what the
    value configures (here, in the child: never in the parent); the parent scores both."""
    result = {"id": case["id"], "value": None, "ran": None, "error": None, "run_error": None, "entry_problem": None}
    problem = entry_problem(entry, "data", name)
    if problem:
        result["entry_problem"] = result["error"] = {"type": "TypeError", "where": "", "message": problem}
        return result
    call = getattr(judge, "call", None)  # a judge whose entry is no host function (device functions) calls it
    try:
        value = call(entry) if call else entry(case["job"]["argument"])
        result["value"] = _plain(value)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a failing call is a graded outcome)
        result["error"] = _describe(e)
        return result
    try:  # the judge gets the value itself (it may be a kernel); the report carries its plain form
        result["ran"] = judge.run(value, case["job"])
    except (Exception, SystemExit) as e:  # noqa: BLE001
        result["run_error"] = _describe(e)
    return result


def run_speed(entry, argument_order, case: dict) -> dict:
    """The kernel compiled for the speed run's argument types (those of a graded case's arguments): its image
    and entry name, for the clean timing process (speed.export); nothing is timed in this process."""
    from kernels_lab.arrays import poisoned, to_device
    from kernels_lab.grading.speed import export
    try:
        dev_in, dev_out = to_device(case["inputs"]), poisoned(case["output_specs"])
        return {**export(entry, tuple(dev_out[k] if k in dev_out else dev_in[k] for k in argument_order)),
                "error": None}
    except Exception as e:  # noqa: BLE001  (a kernel that fails here loses the speed check only)
        return {"error": _describe(e)}


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
