"""Lesson 07's graded exercise (decode_protocol): the megakernel's dependency protocol, written by the student.

    signal(counters, layer)                    thread 0 of a block, after a block barrier: one more tile of
                                               `layer` is done (its stores must be visible before the count)
    wait(counters, layer, tiles, spin_limit)   thread 0, before its block reads layer + 1's input: True once
                                               counters[layer] >= tiles; False after at most spin_limit + 1 polls

Both are @cuda.jit(device=True) functions; the exercise's entry is `wait`, and `signal` is taken from the
namespace wait was defined in (the submission, or the notebook). ProtocolJudge grades them for
`kernels-lab grade` and for the lesson's check (lessons.check): the same checks, words and points.
One case, every check, in this order (the last probe is the one a wrong wait may never return from):

  signal once on counters [5, 7, 9] at layer 1: [5, 8, 9]                       -> "signal adds 1"
  wait with all tiles counted, and with more: True, at once                     -> "wait returns at the count"
  the PTX of a kernel that calls each (numba's real compiler, in a child process
  on the PTX back-end, so the same on every machine): signal's count an atomic
  add with .release, or after a gpu-scope fence; wait's poll an ld.acquire, or  -> "signal releases the stores"
  a relaxed / volatile / atomic read followed by a fence, re-read in the loop      "wait polls with an acquire"
  the megakernel with the back-end's own table, against float64                -> "megakernel right"
  wait with one tile short while a second block of the probe adds the missing   -> "wait holds below the count",
  count only later: it must return False before then                               "wait gives up"

The probes' kernels run their blocks side by side on the simulator too (BACKEND.coresident), so a wait that
ignores spin_limit sees the late count there as on a GPU and the grade says so. A wait that never gives up AND
never re-reads the counter spins forever: on the simulator the probe is abandoned after PROBE_SECONDS; on a
GPU it is abandoned too, spinning on its own stream after every result is in, and the grader's time limit ends
the child at its exit. (A wait that never re-reads hangs the megakernel on a GPU before that: a timeout, every
check failed, said so.) Memory ordering cannot be seen by running (the simulator's memory is coherent, a GPU
shows a stale read only sometimes): it is read from the PTX. Where numba's compiler is not installed (the
[cu13] extra) those two checks are not counted, saying so.
"""

from __future__ import annotations

import builtins
import dis
import marshal
import os
import pickle
import re
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...backend import BACKEND
from ...core import Case, Exercise
from ...intrinsics import globaltimer
from ...runtime import cuda
from . import workload as decode

SIGNAL_ONE, RELEASE = "signal adds 1", "signal releases the stores"
AT_COUNT, BELOW, BOUNDED = "wait returns at the count", "wait holds below the count", "wait gives up"
ACQUIRE, RUN = "wait polls with an acquire", "megakernel right"

TILES, SPIN_LIMIT = 3, 3              # the probes' wait(counters, 0, TILES, SPIN_LIMIT)
LATE_NS = BACKEND.size(gpu=50_000_000, simulator=500_000_000)  # when the probe's second block counts
PROBE_SECONDS = 2.0                   # after LATE_NS: a probe still running then never returns
COMPILE_S = 120.0                     # the PTX child (numba's import and two small kernels: a few seconds)


# -- the probes' kernels ------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _signal_probe(signal: Any) -> Any:
    def signal_probe(data, counters, layer):
        if cuda.threadIdx.x == 0:
            data[0] = np.float32(1)  # the store the count announces
            signal(counters, layer)
    return cuda.jit(signal_probe)


@lru_cache(maxsize=None)
def _wait_ptx_probe(wait: Any) -> Any:
    # compiled only: every global read in its PTX is wait's (the probe below also counts, in its block 1)
    def wait_probe(counters, result, tiles, spin_limit):
        if cuda.threadIdx.x == 0:
            result[0] = 1 if wait(counters, 0, tiles, spin_limit) else 0
    return cuda.jit(wait_probe)


@lru_cache(maxsize=None)
def _late_count_probe(wait: Any) -> Any:
    """Block 0 waits and stamps when it returned; block 1 raises the count to `late` after late_ns, stamped.
    Blocks side by side on every back-end (the simulator's runs them in threads of their own)."""
    def late_count_probe(counters, result, stamps, tiles, spin_limit, late, late_ns):
        if cuda.threadIdx.x == 0:
            if cuda.blockIdx.x == 0:
                got = wait(counters, 0, tiles, spin_limit)
                stamps[0] = globaltimer()
                result[0] = 1 if got else 0
            else:
                start = globaltimer()
                while globaltimer() - start < late_ns:  # bounded by the clock
                    pass
                stamps[1] = globaltimer()
                cuda.atomic.exch(counters, 0, late)
    return BACKEND.coresident(cuda.jit(late_count_probe))


_ABANDONED: list[tuple] = []


def _signal_once(signal: Any) -> list[int]:
    counters = cuda.to_device(np.array([5, 7, 9], np.int32))
    _signal_probe(signal)[1, 1](cuda.to_device(np.zeros(1, np.float32)), counters, np.int64(1))
    cuda.synchronize()
    return [int(v) for v in counters.copy_to_host()]


def _wait_with_late_count(wait: Any, start: int, late: int) -> dict[str, Any]:
    """wait(counters, 0, TILES, SPIN_LIMIT) from counters[0] = start; the count becomes `late` after LATE_NS.
    returned: its value (None: still running PROBE_SECONDS after that); late: whether it returned after then."""
    counters = cuda.to_device(np.array([start], np.int32))
    result, stamps = cuda.to_device(np.full(1, -1, np.int32)), cuda.to_device(np.zeros(2, np.int64))
    running = BACKEND.start(_late_count_probe(wait), 2, 1, (counters, result, stamps, np.int64(TILES),
                                                             np.int64(SPIN_LIMIT), np.int32(late), np.int64(LATE_NS)))
    deadline = time.monotonic() + LATE_NS / 1e9 + PROBE_SECONDS
    while not running.done() and time.monotonic() < deadline:
        running.settle(0.01)
        time.sleep(0.01)
    if not running.done():  # abandoned: nothing stops a running kernel (a simulated one is a daemon thread)
        _ABANDONED.append((running, counters, result, stamps))  # a GPU's cudaFree would wait for it to end
        return {"start": start, "returned": None, "late": True}
    running.finish()
    got, (returned_at, counted_at) = int(result.copy_to_host()[0]), stamps.copy_to_host()
    return {"start": start, "returned": bool(got), "late": bool(returned_at >= counted_at)}


# -- memory ordering, from the PTX ----------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One memory instruction of a PTX listing: index (its line), kind (load, atomic, fence), sem (weak,
    relaxed, acquire, release, acq_rel, sc), wide (gpu or system scope, not cta / cluster), text."""

    index: int
    kind: str
    sem: str
    wide: bool
    text: str


_LOCAL = (".param", ".shared", ".local", ".const")


def memory_ops(ptx: str) -> tuple[list[Op], list[tuple[int, int]]]:
    """The loads of global (or generic) memory, the atomics and the fences of a PTX listing, in order, and
    its loops: (first line, backward branch) for every branch to a label above it."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    ops, labels, loops = [], {}, []
    for i, ln in enumerate(lines):
        if ln.endswith(":") and ln.startswith("$"):
            labels[ln[:-1]] = i
            continue
        words = re.sub(r"^@!?%\w+\s+", "", ln).replace(";", " ").split()
        if not words:
            continue
        op, parts = words[0], words[0].split(".")
        if op.startswith("bra") and len(words) > 1 and words[-1] in labels:
            loops.append((labels[words[-1]], i))
        if op.startswith(("atom.", "red.")) or (op.startswith("ld.") and not any(k in op for k in _LOCAL)):
            sem = next((s for s in ("acquire", "release", "acq_rel", "relaxed", "volatile") if s in parts),
                       "relaxed" if parts[0] in ("atom", "red") else "weak")
            ops.append(Op(i, "load" if parts[0] == "ld" else "atomic", "relaxed" if sem == "volatile" else sem,
                          "cta" not in parts and "cluster" not in parts, ln))
        elif parts[0] == "membar" or (parts[0] == "fence" and "proxy" not in parts):
            ops.append(Op(i, "fence", "sc" if parts[0] == "membar" else parts[1],
                          not any(s in parts for s in ("cta", "cluster")), ln))
    return ops, loops


def release_problem(ptx: str) -> str | None:
    """None when signal's count (its first atom / red) is a release at gpu scope or comes after a gpu-scope
    fence; else what is wrong, quoting the PTX."""
    ops, _ = memory_ops(ptx)
    counts = [o for o in ops if o.kind == "atomic"]
    if not counts:
        return ("signal has no atomic add in its PTX (no atom / red): a plain counters[layer] += 1 is a read and a "
                "write, and two blocks that finish tiles of one layer at once lose a count")
    count = counts[0]
    if count.sem in ("release", "acq_rel"):
        return None if count.wide else (f"`{count.text}` releases at cta scope: it orders this block's stores for "
                                        f"this block only; other blocks may see the count first (use gpu scope)")
    fences = [o for o in ops if o.kind == "fence" and o.index < count.index]
    if any(f.wide for f in fences):
        return None
    if fences:
        return (f"the fence before the count, `{fences[-1].text}`, is block-scoped (cuda.threadfence_block): it "
                f"orders the stores for this block only; other blocks may see `{count.text}` first: use "
                f"cuda.threadfence() (gpu scope) or add_release_gpu")
    after = any(o.kind == "fence" for o in ops if o.index > count.index)
    return (f"the count `{count.text}` is a relaxed atomic with " +
            ("its fence after it, too late" if after else "no fence before it") +
            ": another block may see the count before this block's stores of x_{l+1} and read stale values; "
            "put cuda.threadfence() before the add, or use add_release_gpu (red.release.gpu)")


def acquire_problem(ptx: str) -> str | None:
    """None when wait polls counters with an ld.acquire at gpu scope, or with a relaxed / volatile / atomic read
    that a gpu-scope fence follows, inside its loop; else what is wrong, quoting the PTX."""
    ops, loops = memory_ops(ptx)
    reads = [o for o in ops if o.kind in ("load", "atomic")]
    if not reads:
        return ("wait never reads counters (no load of it in its PTX): it cannot know that the layer is done; poll "
                "counters[layer] with load_acquire_gpu")
    polls = [r for r in reads if any(a <= r.index <= b for a, b in loops)] if loops else reads
    if not polls:
        return (f"the read of counters, `{reads[0].text}`, stands before the loop in the PTX: the compiler hoisted "
                f"it, so the loop never sees a new count; poll with load_acquire_gpu (an acquire is re-read every "
                f"time)")
    fenced = lambda r: any(o.kind == "fence" and o.wide and o.index > r.index for o in ops)  # noqa: E731
    if any(r.wide and (r.sem == "acquire" or (r.sem in ("relaxed", "acq_rel") and fenced(r))) for r in polls):
        return None
    poll = polls[0]
    if not poll.wide:
        return (f"the poll `{poll.text}` is cta-scoped: it orders nothing with the other blocks, which wrote x_l; "
                f"use gpu scope (load_acquire_gpu)")
    if poll.sem == "weak":
        return (f"the poll `{poll.text}` is a plain load: the compiler may hoist it out of the loop" +
                ("" if loops else " (here it did: the PTX has no loop left)") +
                ", and nothing orders the block's reads of x_l after it, so they may be stale; poll with "
                "load_acquire_gpu (ld.acquire.gpu)")
    return (f"the poll `{poll.text}` is relaxed and no gpu-scope fence follows it: it sees the count but orders "
            f"nothing, so the reads of x_l after it may be stale; use load_acquire_gpu, or cuda.threadfence() after "
            f"the poll that saw the count")


# -- the PTX child: the student's functions rebuilt on the PTX back-end ----------------------------------

def _portable(fn: Any, seen: dict[int, Any] | None = None) -> dict[str, Any]:
    """A device function as data: its code, and each global and closure value it uses, by what it is (a
    module, a name in an allowed kernels_lab module, another device function, or a pickled value)."""
    from ...grading.child import ALLOWED_IMPORTS
    import importlib
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
            return ("device", _portable(v, seen))
        return ("value", pickle.dumps(v))

    names, codes = set(), [py.__code__]
    while codes:  # the globals it loads (co_names holds attribute names too)
        c = codes.pop()
        names |= {i.argval for i in dis.get_instructions(c) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    env = {n: value(py.__globals__[n]) for n in names if n in py.__globals__}
    return {"name": py.__name__, "code": marshal.dumps(py.__code__), "defaults": pickle.dumps(py.__defaults__),
            "env": env, "closure": [value(c.cell_contents) for c in py.__closure__ or ()]}


def _rebuild(d: dict[str, Any]) -> Any:
    import importlib

    def value(v: tuple) -> Any:
        kind = v[0]
        if kind == "attr":
            return getattr(importlib.import_module(v[1]), v[2])
        if kind == "module":
            return importlib.import_module(v[1])
        return _rebuild(v[1]) if kind == "device" else pickle.loads(v[1])

    space = {"__builtins__": builtins, **{n: value(v) for n, v in d["env"].items()}}
    fn = types.FunctionType(marshal.loads(d["code"]), space, d["name"], pickle.loads(d["defaults"]),
                            tuple(types.CellType(value(c)) for c in d["closure"]) or None)
    return cuda.jit(device=True)(fn)


def _compile_child() -> None:
    """The PTX child (_ptx): the job on stdin, the probes' PTX as JSON on stdout."""
    import json
    import warnings

    from numba import types as nt

    from ...capabilities import compile_ptx
    from ...grading.compile_gate import _environmental, target_cc
    warnings.simplefilter("ignore")
    job = pickle.loads(sys.stdin.buffer.read())
    i32, f32 = nt.Array(nt.int32, 1, "C"), nt.Array(nt.float32, 1, "C")
    try:
        signal, wait = _rebuild(job["signal"]), _rebuild(job["wait"])
        out = {"status": "compiled",
               "signal": compile_ptx(_signal_probe(signal).py_func, (f32, i32, nt.int64), target_cc()),
               "wait": compile_ptx(_wait_ptx_probe(wait).py_func, (i32, i32, nt.int64, nt.int64), target_cc())}
    except Exception as e:  # noqa: BLE001  (the student's code, or the toolchain: said which)
        lines = (str(e).strip().splitlines() or [""])
        out = {"status": "environment" if _environmental(e) else "rejected",
               "message": f"{type(e).__name__}: {lines[-1][:1500]}"}
    print(json.dumps(out))


_CHILD = "from kernels_lab.topics.decode.protocol import _compile_child; _compile_child()"


def _ptx(signal: Any, wait: Any) -> dict[str, str]:
    """The PTX of the probes for the course's architecture, compiled in a child on the PTX back-end."""
    import json
    job = pickle.dumps({"signal": _portable(signal), "wait": _portable(wait)})
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD], input=job,
                              capture_output=True, env=env, timeout=COMPILE_S)
    except subprocess.TimeoutExpired:
        return {"status": "environment", "message": f"compiling did not finish within {COMPILE_S:g} s"}
    try:
        return json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"status": "environment", "message": f"the compiler's child ended without a result (exit code "
                                                    f"{proc.returncode}): {proc.stderr.decode()[-400:]}"}


# -- the judge ------------------------------------------------------------------------------------------

def _call(w: int, start: int) -> str:
    return f"wait(counters, 0, tiles={w}, spin_limit={SPIN_LIMIT}) with counters[0] = {start}"


class ProtocolJudge:
    """Grades decode_protocol for the grader (grading/grade.py, kind "data") and lessons.check.

      call(entry)            (child / notebook) the entry is `wait`; returns (signal, wait), both device
                             functions of the student's own
      job(case)              the megakernel's size and inputs' seed
      run(value, job)        (child / notebook) the probes, the PTX, the megakernel, the probe that may hang
      score(case, job, got)  (parent) [(check, ok or None: not judged in this case, message)]
      not_counted(check)     the two memory-ordering checks where numba's compiler is missing
    """

    checks = (SIGNAL_ONE, RELEASE, AT_COUNT, BELOW, BOUNDED, ACQUIRE, RUN)
    ordering = (RELEASE, ACQUIRE)

    def not_counted(self, check: str) -> str | None:
        from ...capabilities import ptx_libraries
        if check in self.ordering and not (libs := ptx_libraries()).available:
            return (f"memory ordering is read from the PTX, and numba's compiler is not installed here ({libs.detail}); "
                    f"not counted here: `kernels-lab grade` where it is installed checks it")
        return None

    def call(self, entry: Any) -> tuple[Any, Any]:
        from ...grading.child import defined_outside_kernels_lab, forbidden_import
        signal = getattr(entry, "py_func", entry).__globals__.get("signal")
        for name, fn in (("signal", signal), ("wait", entry)):
            if fn is None or not getattr(fn, "_device", False) and not getattr(fn, "targetoptions", {}).get("device"):
                raise TypeError(f"{name} must be a @cuda.jit(device=True) function, got "
                                f"{'nothing' if fn is None else type(fn).__name__}: define signal(counters, layer) "
                                f"and wait(counters, layer, tiles, spin_limit) side by side")
            if not defined_outside_kernels_lab(fn.py_func):
                raise TypeError(f"{name} is kernels_lab's own ({fn.py_func.__module__}), not yours: write it yourself")
            if (refused := forbidden_import(fn)) is not None:
                raise TypeError(refused)
        return signal, entry

    def job(self, case: Case) -> dict[str, Any]:
        return {"size": {k: case.size[k] for k in ("hidden", "layers", "batch")}, "seed": case.seed,
                "about": f"signal and wait alone, their PTX, and the megakernel at {case.size}"}

    def run(self, value: tuple[Any, Any], job: dict[str, Any]) -> dict[str, Any]:
        from ...arrays import poisoned, to_device
        from ...capabilities import ptx_libraries
        signal, wait = value
        ran: dict[str, Any] = {
            "signal": _signal_once(signal),
            "at": [_wait_with_late_count(wait, start, TILES + 100) for start in (TILES, TILES + 3)],
            "ptx": _ptx(signal, wait) if ptx_libraries().available else None}
        w = decode.WORKLOAD
        size = w.size(**job["size"])
        out = poisoned(w.output_specs(size))
        # the simulator's table meets every wait at its first poll: a few polls are plenty, and a wait that never
        # returns True gives up in a second there, not after the GPU's budget of polls
        launch = decode.bind_megakernel_with(to_device(w.make_inputs(size, np.random.default_rng(job["seed"]))), out,
                                             protocol=(signal, wait),
                                             spin_limit=BACKEND.size(gpu=decode.SPIN_LIMIT, simulator=50))
        launch()
        cuda.synchronize()
        ran.update(out=out["out"].copy_to_host(), gave_up=launch.timed_out_waiting_for())
        ran["below"] = _wait_with_late_count(wait, TILES - 1, TILES)  # last: it may never return
        return ran

    def score(self, case: Case, job: dict[str, Any], got: Any) -> list[tuple[str, bool | None, str]]:
        """got: the case's grading.records.Run (value, ran, run_error)."""
        ran = got.ran if isinstance(got.ran, dict) else None
        if got.run_error is not None or ran is None:
            why = (f"{job['about']}: {got.run_error.type}: {got.run_error.message[:400]}" if got.run_error else
                   f"{job['about']}: the run returned nothing")
            return [(c, False, why) for c in self.checks]
        marks = {SIGNAL_ONE: self._signal(ran["signal"]), AT_COUNT: self._at_count(ran["at"]),
                 **self._ordering(ran["ptx"]), RUN: self._run(job, ran), **self._below(ran["below"])}
        return [(c, *marks[c]) for c in self.checks]

    @staticmethod
    def _signal(after: list[int]) -> tuple[bool, str]:
        if after == [5, 8, 9]:
            return True, "signal(counters, 1) on [5, 7, 9] left [5, 8, 9]: one more tile of layer 1"
        step = after[1] - 7
        if after[0] != 5 or after[2] != 9:
            return False, (f"signal(counters, 1) on [5, 7, 9] left {after}: it changed another layer's counter; "
                           f"add to counters[layer] only")
        return False, (f"signal(counters, 1) on [5, 7, 9] left {after}: it added {step}, not 1; each tile counts once, "
                       f"and wait compares the count with the number of tiles")

    @staticmethod
    def _at_count(probes: list[dict[str, Any]]) -> tuple[bool, str]:
        for p in probes:
            what = "all" if p["start"] == TILES else "more than all"
            if p["returned"] is None:
                return False, (f"{_call(TILES, p['start'])} ({what} tiles counted) never returned, not even once the "
                               f"count had grown: compare with >= tiles, re-read counters[layer] on every poll")
            if not p["returned"]:
                return False, (f"{_call(TILES, p['start'])} ({what} tiles counted) returned False: it must return "
                               f"True once counters[layer] >= tiles" + (" (not == tiles)" if p["start"] > TILES else
                                                                         " (not > tiles)"))
            if p["late"]:
                return False, (f"{_call(TILES, p['start'])} ({what} tiles counted) returned True only after the count "
                               f"grew past it: compare counters[layer] >= tiles")
        return True, f"True at once with {TILES} of {TILES} tiles counted, and with more"

    @staticmethod
    def _below(p: dict[str, Any]) -> dict[str, tuple[bool, str]]:
        seconds = LATE_NS / 1e9
        if p["returned"] is None:
            return {BELOW: (True, "it never returned True below the count"),
                    BOUNDED: (False, f"{_call(TILES, TILES - 1)} never returned: not after spin_limit + 1 polls, and "
                                     f"not when the last tile was counted {seconds:g} s later (abandoned after "
                                     f"{PROBE_SECONDS:g} s more): count your polls and return False after spin_limit + 1, "
                                     f"and re-read counters[layer] each time")}
        if p["returned"] and not p["late"]:
            return {BELOW: (False, f"{_call(TILES, TILES - 1)} returned True with {TILES - 1} of {TILES} tiles counted: "
                                   f"the block would read rows of x_l nobody has written yet; return True only once "
                                   f"counters[layer] >= tiles (and poll: do not assume)"),
                    BOUNDED: (True, "it returned before the last tile was counted")}
        if p["returned"]:
            return {BELOW: (True, "it did not return True below the count"),
                    BOUNDED: (False, f"{_call(TILES, TILES - 1)} kept polling until the last tile was counted "
                                     f"{seconds:g} s later: after spin_limit + 1 = {SPIN_LIMIT + 1} polls it must give "
                                     f"up and return False (the megakernel then reports the error: never a hang)")}
        return {BELOW: (True, f"False with {TILES - 1} of {TILES} tiles counted"),
                BOUNDED: (True, f"it gave up (False) before the last tile was counted, {seconds:g} s later")}

    def _ordering(self, ptx: dict[str, str] | None) -> dict[str, tuple[bool | None, str]]:
        if ptx is None:
            return {c: (None, self.not_counted(c) or "") for c in self.ordering}
        if ptx["status"] == "environment":  # the machine's fault: given, never lost (as the compile gate does)
            why = (f"not checked: numba's compiler failed here ({ptx['message']}); the grading machine's problem, "
                   f"not your code's: the points are given (instructors: `kernels-lab doctor`)")
            return {c: (True, why) for c in self.ordering}
        if ptx["status"] != "compiled":
            why = f"numba's real compiler rejects the probe kernel that calls your functions: {ptx['message']}"
            return {c: (False, why) for c in self.ordering}
        release, acquire = release_problem(ptx["signal"]), acquire_problem(ptx["wait"])
        return {RELEASE: (release is None, release or "from its PTX: the count is released after the block's stores"),
                ACQUIRE: (acquire is None, acquire or "from its PTX: the poll is an acquire, re-read in the loop")}

    @staticmethod
    def _run(job: dict[str, Any], ran: dict[str, Any]) -> tuple[bool, str]:
        from ...checks import compare
        w = decode.WORKLOAD
        size = w.size(**job["size"])
        want = w.reference(w.make_inputs(size, np.random.default_rng(job["seed"])))["out"]
        if ran["gave_up"] is not None:
            return False, (f"at {size} a wait for layer {ran['gave_up']} gave up: does signal add 1 to counters[layer] "
                           f"for every tile, and does wait return True once counters[layer] >= tiles?")
        _, bad = compare("out", np.asarray(ran["out"]), want, w.tolerance)
        if bad is not None:
            return False, (f"at {size}: {bad.bad} elements wrong, first out{list(bad.index)}: expected "
                           f"{bad.expected:.6g}, got {bad.got:.6g}")
        return True, f"at {size}: every element right against float64, no wait gave up"


PROTOCOL_JUDGE = ProtocolJudge()

decode.WORKLOAD.add_exercise(Exercise(
    name="decode_protocol", workload="decode", variant="megakernel", lesson="07",
    title="the megakernel's dependency protocol: signal (a release count) and wait (a bounded acquire poll)",
    kind="data", entry="wait",
    signature="@cuda.jit(device=True)\ndef signal(counters, layer):  # thread 0, after the block's barrier\n"
              "@cuda.jit(device=True)\ndef wait(counters, layer, tiles, spin_limit) -> bool:  # thread 0",
    cases=(Case(decode.WORKLOAD.size(hidden=BACKEND.size(gpu=1000, simulator=11),
                                     layers=BACKEND.size(gpu=8, simulator=2), batch=2), 71),),
    argument_order=("signal", "wait"), judge="kernels_lab.topics.decode.protocol:PROTOCOL_JUDGE",
    points={SIGNAL_ONE: 1, RELEASE: 1.5, AT_COUNT: 1, BELOW: 1.5, BOUNDED: 1.5, ACQUIRE: 1.5, RUN: 2}))

