"""Lesson 07's graded exercise (decode_protocol): the megakernel's dependency protocol, written by the student.

    signal(counters, layer)                    thread 0 of a block, after a block barrier: one more tile of
                                               `layer` is done (its stores must be visible before the count)
    wait(counters, layer, tiles, spin_limit)   thread 0, before its block reads layer + 1's input: True once
                                               counters[layer] >= tiles; False after at most spin_limit + 1 polls

Both are @cuda.jit(device=True) functions; the exercise's entry is `wait`, and `signal` is taken from the
namespace wait was defined in (the submission, or the notebook). ProtocolJudge grades them for
`kernels-lab grade` and for the lesson's check (lessons.check): the same checks, words and points, and the
same maximum on every machine. Every probe uses three counters and layer 1, so a wait that reads a
neighbour's counter is caught. One case, every check, in this order (the last probes are the ones a wrong
wait may never return from):

  signal once on counters [5, 7, 9] at layer 1: [5, 8, 9]                       -> "signal adds 1"
  wait with its layer's tiles all counted (the neighbours' not), and with more:
  True at once; with one tile short and the last counted by a second block of
  the probe ARRIVE_NS after wait began (a device-side start flag and delay, far
  within its generous spin_limit): True, after the count came; anything else
  (False, or never returning) missed the count: decided on every machine        -> "wait returns at the count"
  the PTX of a kernel that calls each (numba's real compiler, in a child process
  on the PTX back-end, each compiled apart): every path from the probe's store
  to signal's end passes an atomic add with .release, or a gpu-scope fence and
  then the add; on every path to the read wait's True allows, the last read of  -> "signal releases the stores"
  counters is an acquire or a gpu-scope fence follows it (topics' rules on         "wait polls with an acquire"
  grading.ptx's listings)
  the megakernel with the back-end's own table, against float64; a barrier
  inside signal or wait (only thread 0 calls them) is named and fails it        -> "megakernel right"
  the megakernel on the simulator's weak memory (sim_weak: stores a block has
  not released stay unseen, plain loads may be served stale), seeds 0 and 1,
  in a child on the simulator on every machine (so a wrong ordering gives wrong
  values there); scored only once "megakernel right" passes                     -> "megakernel right in weak memory"
  wait with one tile short (the neighbours done) while a second block of the    -> "wait holds below the count",
  probe counts the last tile only later: it must return False before then          "wait gives up"
  (both scored only once "wait returns at the count" passes: the stub's
  `return False` holds below and gives up without doing anything)

Signal and wait are judged apart, the same way on every back-end: where numba's real compiler rejects one (its
ordering check says so, with the compiler's line), that one's probes run on the simulator in a child, and the
lesson's own function stands in for it in the megakernel (whose words say so); so a signal only the simulator runs
costs only "signal releases the stores", on a GPU as here.

The probes' kernels run their blocks side by side on the simulator too (BACKEND.coresident), so a wait that
ignores spin_limit sees the late count there as on a GPU and the grade says so. A probe that never returns is
abandoned after PROBE_SECONDS (on a GPU it spins on its own stream after every result is in, and the grader's
time limit ends the child at its exit); the probes after it are not run.

Ordering is judged on every install, for the same ten points: from the PTX where numba's compiler is (the [cu13]
extra, which the lessons extra and the Gradescope bundle bring), plus the weak-memory run; where the compiler is
missing, "signal releases the stores" and "wait polls with an acquire" are judged by weak-memory runs of the
student's signal beside the lesson's wait, and of the lesson's signal beside the student's wait, and the words and a
warning say so loudly.
"""

from __future__ import annotations

import dis
import os
import pickle
import subprocess
import sys
import time
import types
import warnings
from functools import lru_cache
from typing import Any, Callable, Hashable

import numpy as np

from ...backend import BACKEND
from ...core import Case, Exercise
from ...grading.api import Instr, Listing, listing, portable, rebuild
from ...intrinsics import globaltimer, poll_relaxed_sys
from ...runtime import cuda
from . import workload as decode

# the host's calls, bound once: while a simulated probe kernel runs (an abandoned one runs on), numba's simulator
# swaps every global of this module bound to the cuda module for its fake, which has none of these
_jit, _to_device, _synchronize = cuda.jit, cuda.to_device, cuda.synchronize

SIGNAL_ONE, RELEASE = "signal adds 1", "signal releases the stores"
AT_COUNT, BELOW, BOUNDED = "wait returns at the count", "wait holds below the count", "wait gives up"
ACQUIRE, RUN = "wait polls with an acquire", "megakernel right"
WEAK = "megakernel right in weak memory"

LAYER, TILES, SPIN_LIMIT = 1, 3, 3    # the probes' wait(counters, LAYER, TILES, SPIN_LIMIT) on three counters
LATE_NS = BACKEND.size(gpu=50_000_000, simulator=500_000_000)  # when the below probe's second block counts
ARRIVE_NS = BACKEND.size(gpu=1_000_000, simulator=20_000_000)  # when the last tile comes while a wait polls,
ARRIVE_POLLS = BACKEND.size(gpu=100_000, simulator=200_000)    # with polls that take far longer (a GPU's >= 0.3
                                                               # us: >= 30 ms; the simulator's >= 1 us: >= 0.2 s)
PROBE_SECONDS = 2.0                   # after the late count: a probe still running then never returns
SIMULATED_S = 90.0                    # the child that probes a function numba's compiler rejects, on the simulator
WEAK_SIZE, WEAK_SEEDS, WEAK_SPIN = {"hidden": 11, "layers": 3, "batch": 2}, (0, 1), 100  # sim_weak's: a stale
WEAK_S = 60.0                         # poll sees the count within a few of 100 polls; the child's time limit
BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp")


# -- the probes' kernels ------------------------------------------------------------------------------
# The data they store and read is float64, the counters int32: in the PTX, the probe's own accesses are the
# .f64 ones, and every other global access is the student's function's.

@lru_cache(maxsize=None)
def _signal_probe(signal: Any) -> Any:
    def signal_probe(data, value, counters, layer):
        if cuda.threadIdx.x == 0:
            data[0] = value  # the store the count announces (a float64 from a register: st.global.f64)
            signal(counters, layer)
    return _jit(signal_probe)


@lru_cache(maxsize=None)
def _wait_ptx_probe(wait: Any) -> Any:
    def wait_probe(counters, data, result, layer, tiles, spin_limit):
        if cuda.threadIdx.x == 0:
            if wait(counters, layer, tiles, spin_limit):
                result[0] = data[0]  # the read the poll must order: it may see only what came before the count
    return _jit(wait_probe)


@lru_cache(maxsize=None)
def _late_count_probe(wait: Any) -> Any:
    """Block 0 says it has started, waits and stamps when it returned; block 1, once block 0 has started (or
    after start_ns), sets counters[layer] to `late` late_ns later, stamped, and sets it again wherever a poll's
    read-modify-write wrote the old count back, until block 0 has returned (or start_ns passed). The delay runs
    on the device from wait's start, so no host timing (a GPU shared with another process, a busy simulator)
    can move the count before the first poll. Blocks side by side on every back-end (the simulator's in threads
    of their own)."""
    def late_count_probe(counters, result, stamps, started, layer, tiles, spin_limit, late, late_ns, start_ns):
        if cuda.threadIdx.x == 0:
            if cuda.blockIdx.x == 0:
                started[0] = 1
                cuda.threadfence()
                got = wait(counters, layer, tiles, spin_limit)
                stamps[0] = globaltimer()
                result[0] = 1 if got else 0
            else:
                start = globaltimer()
                # a relaxed read, re-made each time (never hoisted), bounded by the clock; no atomic: it would
                # queue behind a poller's atomics for the simulator's one lock
                while poll_relaxed_sys(started, 0) == 0 and globaltimer() - start < start_ns:
                    pass
                start = globaltimer()
                while globaltimer() - start < late_ns:  # bounded by the clock
                    pass
                stamps[1] = globaltimer()
                # a plain store (an atomic would queue behind the poller's, as above); on a GPU it reaches L2,
                # where polls read
                counters[layer] = late
                # numba's simulated atomics read, then write back: a poll by an atomic (an add of 0) can write
                # the old count over this store, and the count never comes (a GPU's atomics are indivisible).
                # So it is stored again while block 0 has not returned, bounded by the clock as above
                start = globaltimer()
                while poll_relaxed_sys(result, 0) < 0 and globaltimer() - start < start_ns:
                    if poll_relaxed_sys(counters, layer) != late:
                        counters[layer] = late
    return BACKEND.coresident(_jit(late_count_probe))


_ABANDONED: list[tuple] = []


def _signal_once(signal: Any) -> list[int]:
    counters = _to_device(np.array([5, 7, 9], np.int32))
    _signal_probe(signal)[1, 1](_to_device(np.zeros(1, np.float64)), np.float64(1), counters, np.int64(LAYER))
    _synchronize()
    return [int(v) for v in counters.copy_to_host()]


def _counters(at: int, others: int) -> list[int]:
    return [others, at, others]


def _late_count(wait: Any, counters: list[int], late: int, late_ns: int, spin_limit: int) -> dict[str, Any]:
    """wait(counters, LAYER, TILES, spin_limit); counters[LAYER] becomes `late` late_ns after wait began.
    returned: its value (None: still running PROBE_SECONDS after the count); after: whether it returned once the
    count had come (the device's stamps)."""
    dev = _to_device(np.array(counters, np.int32))
    result, stamps = _to_device(np.full(1, -1, np.int32)), _to_device(np.zeros(2, np.int64))
    started = _to_device(np.zeros(1, np.int32))
    running = BACKEND.start(_late_count_probe(wait), 2, 1, (
        dev, result, stamps, started, np.int64(LAYER), np.int64(TILES), np.int64(spin_limit), np.int32(late),
        np.int64(late_ns), np.int64(PROBE_SECONDS * 1e9)))
    deadline = time.monotonic() + late_ns / 1e9 + 2 * PROBE_SECONDS  # the start, the delay, then PROBE_SECONDS
    about = {"counters": counters, "late": late, "late_ns": late_ns, "spin_limit": spin_limit}
    while not running.done() and time.monotonic() < deadline:
        running.settle(0.01)
        time.sleep(0.01)
    if not running.done():  # abandoned: nothing stops a running kernel (a simulated one is a daemon thread)
        _ABANDONED.append((running, dev, result, stamps, started))  # a GPU's cudaFree would wait for it to end
        return {**about, "returned": None, "after": True}
    running.finish()
    got, (returned_at, counted_at) = int(result.copy_to_host()[0]), stamps.copy_to_host()
    return {**about, "returned": bool(got), "after": bool(returned_at >= counted_at)}


def _at_probes(wait: Any) -> list[Any]:
    """wait with its layer's tiles all counted (the neighbours' not), with more, and with every layer's: each
    count grows far past it LATE_NS later (a wait that returns only then compares wrongly)."""
    return [_attempt(_late_count, wait, counters, TILES + 100, LATE_NS, SPIN_LIMIT)
            for counters in (_counters(TILES, 0), _counters(TILES + 3, 0), _counters(TILES, TILES))]


def _late_probes(wait: Any, at: list[Any]) -> tuple[Any, Any]:
    """(arrives, below), the probes a wrong wait may never return from: run last, and only once wait returned
    True at once at the count (both score only then). arrives: one tile short, the last counted ARRIVE_NS after
    wait began, far within ARRIVE_POLLS polls (a poll takes >= 0.3 us on a GPU, >= 1 us on the simulator): a
    wait that returns anything but True missed it. below: one tile short (the neighbours done), the last counted
    only LATE_NS later: it must give up (False) before then. After an abandoned probe none is run."""
    if not all(isinstance(p, dict) and p.get("returned") is True and not p["after"] for p in at[:2]):
        return None, None
    arrives = _attempt(_late_count, wait, _counters(TILES - 1, 0), TILES, ARRIVE_NS, ARRIVE_POLLS)
    if arrives.get("returned", False) is None:
        return arrives, None
    return arrives, _attempt(_late_count, wait, _counters(TILES - 1, TILES + 5), TILES, LATE_NS, SPIN_LIMIT)


def _attempt(fn: Callable[..., Any], *args: Any) -> Any:
    """A probe's result, or {"error": what the student's code raised} (signal's failure never hides wait's)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001  (the student's code: said, judged apart)
        return {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:400] if str(e).strip() else ''}"}


def barrier_calls(fn: Any) -> list[str]:
    """The block / warp barriers a device function (or a device function it calls) names in its code."""
    py, found, codes, seen = getattr(fn, "py_func", fn), [], [], set()
    codes.append((py.__code__, py.__globals__))
    while codes:
        code, space = codes.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        for ins in dis.get_instructions(code):
            if ins.opname.startswith("LOAD_") and ins.argval in BARRIERS:
                found.append(f"cuda.{ins.argval}()")
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and hasattr(callee := space.get(ins.argval), "py_func"):
                codes.append((callee.py_func.__code__, callee.py_func.__globals__))
        codes += [(k, space) for k in code.co_consts if isinstance(k, types.CodeType)]
    return list(dict.fromkeys(found))


# -- memory ordering, from the PTX (grading.ptx's listing, the rules here) ---------------------------------

def _count(ins: Instr) -> bool:
    """An access of counters: a load or atomic that is not the probe's own float64 data."""
    return ins.mem is not None and ins.mem.kind in ("load", "atomic") and ins.mem.dtype != "f64"


def _data(ins: Instr, kind: str) -> bool:
    return ins.mem is not None and ins.mem.kind == kind and ins.mem.dtype == "f64"


def _ends(found: Listing) -> list[int]:
    return [i for i in range(len(found.instrs)) if not found.successors(i)]


def release_problem(ptx: str) -> tuple[str | None, str]:
    """(None, what the listing shows) when, on every path from the probe's store to signal's end, the count is an
    atomic with .release at gpu scope or an atomic after a gpu-scope fence; else (what is wrong, quoting the
    PTX, "")."""
    found = listing(ptx)
    atomics = [i for i in found.instrs if _count(i) and i.mem.kind == "atomic"]
    if not atomics:
        return ("signal has no atomic add in its PTX (no atom / red): a plain counters[layer] += 1 is a read and a "
                "write, and two blocks that finish tiles of one layer at once lose a count"), ""

    def transfer(ins: Instr, state: Hashable) -> Hashable:
        phase, count, cta, fence = state  # phase: before the store, stored (unordered), fenced, counted
        if _data(ins, "store"):
            return "stored", None, None, None
        if phase in ("before", "counted") or ins.mem is None:
            return state
        if ins.mem.kind == "fence":
            return ("fenced", count, cta, ins.text) if ins.mem.wide else (phase, count, ins.text, fence)
        if _count(ins) and ins.mem.kind == "atomic":
            if phase == "fenced" or (ins.mem.sem in ("release", "acq_rel") and ins.mem.wide):
                return "counted", ins.text, cta, fence
            return phase, ins.text, cta, fence
        return state

    stores = any(_data(i, "store") for i in found.instrs)  # (else every count must be ordered from the start)
    arriving = found.reaching(transfer, ("before" if stores else "stored", None, None, None))
    states = {transfer(found.instrs[i], s) for i in _ends(found) for s in arriving[i]}
    wrong = [s for s in sorted(states, key=str) if s[0] in ("stored", "fenced")]
    if not wrong:
        _, count, _, fence = next(s for s in sorted(states, key=str) if s[0] == "counted")
        return None, ("from its PTX: on every path from the block's store, " +
                      (f"`{fence}` comes before the count `{count}`" if fence else f"the count `{count}` is a release")
                      + " (at gpu scope)")
    some = " on some of its paths" if any(s[0] == "counted" for s in states) else ""
    phase, count, cta, _ = wrong[0]
    if phase == "fenced" and count is None:
        return (f"after its fence, signal's PTX has no atomic add{some}: a plain counters[layer] += 1 is a read and "
                f"a write, and two blocks that finish tiles of one layer at once lose a count"), ""
    if count is None:
        return f"signal ends without counting{some}: add 1 to counters[layer] with add_release_gpu", ""
    if "release" in count or "acq_rel" in count:
        return (f"`{count}` releases at cta scope{some}: it orders this block's stores for this block only; other "
                f"blocks may see the count first (use gpu scope)"), ""
    if cta:
        return (f"the fence before the count, `{cta}`, is block-scoped (cuda.threadfence_block){some}: it orders the "
                f"stores for this block only; other blocks may see `{count}` first: use cuda.threadfence() (gpu "
                f"scope) or add_release_gpu"), ""
    return (f"the count `{count}` is a relaxed atomic with " +
            ("its fence after it, too late" if phase == "fenced" else "no fence before it") + some +
            ": another block may see the count before this block's stores of x_{l+1} and read stale values; "
            "put cuda.threadfence() before the add, or use add_release_gpu (red.release.gpu)"), ""


def _ordered(read: Instr) -> bool:
    return read.mem.wide and read.mem.sem in ("acquire", "acq_rel", "sc")


def acquire_problem(ptx: str) -> tuple[str | None, str]:
    """(None, what the listing shows) when, on every path to the read the probe makes once wait returned True,
    the last read of counters is an acquire at gpu scope, or a relaxed (volatile, atomic) one that a gpu-scope
    fence follows on that path; else (what is wrong, quoting the PTX, ""). The words say what was seen: the
    loop or its absence, the kind of read, the fence and on which path."""
    found = listing(ptx)
    reads = [i for i in found.instrs if _count(i)]
    uses = [i for i in found.instrs if _data(i, "load")]
    loop = ("re-read in its loop" if any(found.in_loop(r.index) for r in reads) else
            "read once: the PTX has no loop" if not found.loops() else "")
    if not reads:
        return ("wait never reads counters (no load of it in its PTX): it cannot know that the layer is done; poll "
                "counters[layer] with load_acquire_gpu"), ""
    if not uses:
        return (f"wait never returns True in its PTX (the compiler found no path to the read the probe makes after "
                f"it): it reads `{reads[0].text}` but no count makes it return True"), ""
    if not loop:
        return (f"the read of counters, `{reads[0].text}`, stands before the loop in the PTX: the compiler hoisted "
                f"it, so the loop never sees a new count; poll with load_acquire_gpu (an acquire is re-read every "
                f"time)"), ""

    def transfer(ins: Instr, state: Hashable) -> Hashable:
        last, fence = state
        if _count(ins):
            return ins.index, None
        if ins.mem is not None and ins.mem.kind == "fence" and last is not None and (fence is None or ins.mem.wide):
            return last, ins.index if ins.mem.wide else -ins.index - 1  # a cta fence: negative, said so
        return state

    arriving = found.reaching(transfer, (None, None))
    states = {s for u in uses for s in arriving[u.index]}
    if any(last is None for last, _ in states):
        return ("on a path to the return of True, wait reads no counter: the block would read x_l without knowing "
                "it is done; return True only after a read of counters[layer] that saw the count"), ""
    fenced = lambda read, fence: read.mem.sem != "weak" and fence is not None and fence >= 0  # noqa: E731
    bad = [(found.instrs[last], fence) for last, fence in sorted(states, key=str)
           if not _ordered(found.instrs[last]) and not fenced(found.instrs[last], fence)]
    if not bad:
        read, fence = sorted(((found.instrs[last], f) for last, f in states), key=lambda rf: _ordered(rf[0]))[0]
        how = (f"is an acquire" if _ordered(read) else
               f"is relaxed, and `{found.instrs[fence].text}` follows it on every path to the return")
        return None, f"from its PTX: the read that returns True, `{read.text}`, {how}; {loop}"
    read, fence = bad[0]
    if not read.mem.wide:
        return (f"the poll `{read.text}` is cta-scoped: it orders nothing with the other blocks, which wrote x_l; use "
                f"gpu scope (load_acquire_gpu)"), ""
    if read.mem.sem == "weak":
        return (f"the poll `{read.text}` is a plain load: the compiler may hoist it out of the loop" +
                (" (here it did: the PTX has no loop left)" if not found.loops() else "") +
                ", and nothing orders the block's reads of x_l after it, so they may be stale; poll with "
                "load_acquire_gpu (ld.acquire.gpu)"), ""
    elsewhere = [i for i in found.instrs if i.mem is not None and i.mem.kind == "fence" and i.mem.wide
                 and i.index > read.index]
    if fence is not None:  # a block-scoped fence on the path
        why = f"the fence on that path, `{found.instrs[-fence - 1].text}`, is block-scoped"
    elif elsewhere:
        why = (f"`{elsewhere[0].text}` is only on another path (polling again), not on the one that returns True")
    else:
        why = "no fence follows it"
    return (f"the poll `{read.text}` is relaxed and {why}: it sees the count but orders nothing, so the reads of "
            f"x_l after wait returns True may be stale; use load_acquire_gpu, or cuda.threadfence() after the poll "
            f"that saw the count, before `return True`"), ""


# -- the PTX: each probe with the student's function in it, compiled in a child (grading.api) ------------------

def _ptx(signal: Any, wait: Any) -> dict[str, dict[str, str]]:
    """The PTX of each probe for the course's architecture (or numba's words for why it has none)."""
    from numba import types as nt

    from ...grading.api import Probe, compile_probes
    i32, f64 = nt.Array(nt.int32, 1, "C"), nt.Array(nt.float64, 1, "C")
    return compile_probes({"signal": Probe(_signal_probe, (signal,), (f64, nt.float64, i32, nt.int64)),
                           "wait": Probe(_wait_ptx_probe, (wait,), (i32, f64, f64, nt.int64, nt.int64, nt.int64))})


# -- memory ordering, by running: the megakernel on the simulator's weak memory (sim_weak), in a child -------

def weak_runs(protocols: dict[str, tuple[Any, Any]]) -> dict[str, dict[str, Any]]:
    """Each (signal, wait) runs the megakernel at WEAK_SIZE with global memory as weak as a GPU's may be, seed by
    seed (WEAK_SEEDS; the first wrong one ends it): {label: {seed, gave_up, bad, first, expected, got, memory}}.
    The simulator only (BACKEND.weak_memory refuses elsewhere)."""
    from ...arrays import poisoned, to_device
    from ...checks import compare
    w = decode.WORKLOAD
    size = w.size(**WEAK_SIZE)
    found = {}
    for label, protocol in protocols.items():
        for seed in WEAK_SEEDS:
            inputs = w.make_inputs(size, np.random.default_rng(seed))
            out = poisoned(w.output_specs(size))
            with BACKEND.weak_memory(seed) as mode:
                launch = decode.bind_megakernel_with(to_device(inputs), out, protocol=protocol, spin_limit=WEAK_SPIN)
                launch()
            _, bad = compare("out", out["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)
            found[label] = {"seed": seed, "gave_up": launch.timed_out_waiting_for(), "memory": mode.describe(),
                            "bad": bad and {"count": bad.bad, "index": list(bad.index), "expected": bad.expected,
                                            "got": bad.got}}
            if found[label]["bad"] or found[label]["gave_up"] is not None:
                break
    return found


def _weak_child() -> None:
    """The weak-memory child (_weak): the job on stdin, weak_runs' findings as JSON on stdout."""
    import json

    from . import kernels as dk
    warnings.simplefilter("ignore")
    job = pickle.loads(sys.stdin.buffer.read())
    signal, wait = rebuild(job["signal"]), rebuild(job["wait"])
    protocols = {"yours": (signal, wait)}
    if job["halves"]:  # each of the student's functions beside the lesson's other one: which of them is wrong
        protocols.update({"signal": (signal, dk.wait_acquire), "wait": (dk.signal_release, wait)})
    print(json.dumps(weak_runs(protocols)))


def _on_simulator(child: str, job: dict[str, Any], limit_s: float) -> dict[str, Any]:
    """Run protocol.<child>() in a child on the simulator (the same on every machine, bounded by limit_s), the
    device functions in `job` as data: {"status": ran | timeout | environment | rejected, "found" | "message"}."""
    import json
    env = {**os.environ, "KERNELS_LAB_BACKEND": "sim", "NUMBA_ENABLE_CUDASIM": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    code = f"from kernels_lab.topics.decode.protocol import {child}; {child}()"
    try:
        data = pickle.dumps({k: portable(v) if hasattr(v, "py_func") else v for k, v in job.items()})
        proc = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, env=env,
                              timeout=limit_s)
    except ValueError as e:  # a recursive device function
        return {"status": "rejected", "message": str(e)}
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"did not finish on the simulator within {limit_s:g} s"}
    try:
        return {"status": "ran", "found": json.loads(proc.stdout.decode().strip().splitlines()[-1])}
    except (ValueError, IndexError):
        why = proc.stderr.decode().strip().splitlines()
        return {"status": "rejected" if proc.returncode == 0 or why else "environment",
                "message": (why or [f"exit code {proc.returncode}"])[-1][:400]}


def _weak(signal: Any, wait: Any, halves: bool) -> dict[str, Any]:
    """weak_runs in a child on the simulator (a wait that never returns in weak memory ends at WEAK_S):
    {"status": ran | timeout | environment | rejected, "runs" | "message"}."""
    got = _on_simulator("_weak_child", {"signal": signal, "wait": wait, "halves": halves}, WEAK_S)
    if got["status"] == "timeout":
        return {"status": "timeout", "message": f"the megakernel did not finish in weak memory within {WEAK_S:g} s"}
    return {"status": "ran", "runs": got["found"]} if got["status"] == "ran" else got


def _simulated_child() -> None:
    """The child of _simulated: the job on stdin; the probes of the functions in it, as JSON on stdout."""
    import json
    warnings.simplefilter("ignore")
    job = pickle.loads(sys.stdin.buffer.read())
    found: dict[str, Any] = {}
    if "signal" in job:
        found["signal"] = _attempt(_signal_once, rebuild(job["signal"]))
    if "wait" in job:
        wait = rebuild(job["wait"])
        found["at"] = _at_probes(wait)
        found["arrives"], found["below"] = _late_probes(wait, found["at"])
    print(json.dumps(found), flush=True)
    os._exit(0)  # an abandoned probe's thread ends with the process


def _simulated(**functions: Any) -> dict[str, Any]:
    """The probes of `functions` (signal, wait or both: those numba's compiler rejects) run on the simulator in
    a child: {"signal": ...} and {"at", "arrives", "below"} as the probes here would give them, each probe an
    {"error": why} where the child gave nothing; {} for no function."""
    if not functions:
        return {}
    got = _on_simulator("_simulated_child", functions, SIMULATED_S)
    if got["status"] == "ran":
        return got["found"]
    failed = {"error": f"on the simulator (numba's compiler rejects it): {got['message']}"}
    return {**({"signal": failed} if "signal" in functions else {}),
            **({"at": [failed] * 3, "arrives": None, "below": None} if "wait" in functions else {})}


def weak_verdict(run: dict[str, Any] | None, who: str) -> tuple[bool, str]:
    """(right, words) of one weak_runs finding; who: whose protocol ran ("your signal with the lesson's wait")."""
    size = ",".join(f"{k}={v}" for k, v in WEAK_SIZE.items())
    if run is None:
        return False, f"{who}: no weak-memory run came back"
    if run["gave_up"] is not None:
        return False, (f"{who} in weak memory (seed {run['seed']}, {size}): a wait for layer {run['gave_up']} gave up, "
                       f"so the run shows nothing about ordering")
    if run["bad"]:
        bad = run["bad"]
        return False, (f"{who} in weak memory (seed {run['seed']}, {size}): {bad['count']} elements wrong, first "
                       f"out{bad['index']}: expected {bad['expected']:.6g}, got {bad['got']:.6g}: a block read x_l "
                       f"before the stores its count announced were visible to it ({run['memory']})")
    return True, (f"{who} in weak memory (seeds {', '.join(map(str, WEAK_SEEDS))}, {size}): every element right "
                  f"({run['memory']})")


# -- the judge ------------------------------------------------------------------------------------------

def _call(counters: list[int], spin_limit: int) -> str:
    return f"wait(counters, {LAYER}, tiles={TILES}, spin_limit={spin_limit}) with counters = {counters}"


class ProtocolJudge:
    """Grades decode_protocol for the grader (grading/grade.py, kind "data") and lessons.check.

      call(entry)            (child / notebook) the entry is `wait`; returns (signal, wait), both device
                             functions of the student's own
      job(case)              the megakernel's size and inputs' seed
      run(value, job)        (child / notebook) the probes, the PTX, the megakernel, the probes that may hang
      score(case, job, got)  (parent) [(check, ok or None: not judged in this case, message)]
    Every check counts on every machine (one maximum): where numba's compiler is missing, the two ordering
    checks are judged by the weak-memory runs of each function beside the lesson's other one, saying so loudly.
    """

    checks = (SIGNAL_ONE, RELEASE, AT_COUNT, BELOW, BOUNDED, ACQUIRE, RUN, WEAK)

    def call(self, entry: Any) -> tuple[Any, Any]:
        from ...grading.api import defined_outside_kernels_lab, forbidden_import
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
        from . import kernels as dk
        signal, wait = value
        ran: dict[str, Any] = {"barriers": {"signal": barrier_calls(signal), "wait": barrier_calls(wait)},
                               "ptx": _ptx(signal, wait) if ptx_libraries().available else None}
        if ran["ptx"] is None:
            ran["no_ptx"] = ptx_libraries().detail
            warnings.warn(f"decode_protocol: MEMORY ORDERING IS NOT READ FROM THE PTX HERE: numba's compiler is missing "
                          f"({ran['no_ptx']}); the release and acquire checks are judged by weak-memory runs on the "
                          f"simulator only, which show a missing fence or acquire as wrong values (pip install -e "
                          f"'.[lessons]' brings numba-cuda[cu13])", stacklevel=2)
        # signal and wait judged apart, the same way on every back-end: one that numba's real compiler rejects
        # (its "releases"/"acquire" check says so) is probed on the simulator, in a child, and the lesson's own
        # stands in for it in the megakernel; the GPU could not compile it, the simulator would run it as Python
        ran["rejected"] = [n for n in ("signal", "wait") if (ran["ptx"] or {}).get(n, {}).get("status") == "rejected"]
        simulated = _simulated(**{n: value[i] for i, n in enumerate(("signal", "wait")) if n in ran["rejected"]})
        ran["signal"] = simulated["signal"] if "signal" in simulated else _attempt(_signal_once, signal)
        ran["at"] = simulated["at"] if "at" in simulated else _at_probes(wait)
        w = decode.WORKLOAD
        size = w.size(**job["size"])
        out = poisoned(w.output_specs(size))
        protocol = (dk.signal_release if "signal" in ran["rejected"] else signal,
                    dk.wait_acquire if "wait" in ran["rejected"] else wait)

        def megakernel() -> dict[str, Any]:
            if len(ran["rejected"]) == 2:
                raise TypeError("numba's compiler rejects both signal and wait: no megakernel of yours to run")
            # the simulator's table meets every wait at its first poll: a few polls are plenty, and a wait that
            # never returns True gives up in a second there, not after the GPU's budget of polls
            launch = decode.bind_megakernel_with(to_device(w.make_inputs(size, np.random.default_rng(job["seed"]))),
                                                 out, protocol=protocol,
                                                 spin_limit=BACKEND.size(gpu=decode.SPIN_LIMIT, simulator=50))
            launch()
            _synchronize()
            return {"out": out["out"].copy_to_host(), "gave_up": launch.timed_out_waiting_for()}
        ran["run"] = _attempt(megakernel)
        # after the megakernel, whose hang (a GPU's) ends the grade first; bounded by WEAK_S in its child
        ran["weak"] = _weak(signal, wait, halves=ran["ptx"] is None)
        # last: they may never return
        ran["arrives"], ran["below"] = ((simulated["arrives"], simulated["below"]) if "at" in simulated else
                                        _late_probes(wait, ran["at"]))
        return ran

    def score(self, case: Case, job: dict[str, Any], got: Any) -> list[tuple[str, bool | None, str]]:
        """got: the case's grading.records.Run (value, ran, run_error)."""
        if (why := got.data_failure(job["about"])) is not None:
            return [(c, False, why) for c in self.checks]
        ran = got.ran
        at_count = self._at_count(ran["at"], ran["arrives"])
        marks = {SIGNAL_ONE: self._signal(ran["signal"]), AT_COUNT: at_count,
                 **self._ordering(ran["ptx"], ran["weak"], ran.get("no_ptx")), **self._runs(job, ran),
                 **self._below(ran["below"], at_count)}
        for name, check in (("signal", RELEASE), ("wait", ACQUIRE)):  # judged apart: the words say how
            if name in ran["rejected"]:
                said = (f"{name} run on the simulator (numba's compiler rejects it: see '{check}')" if name == "signal"
                        else f"wait's probes run on the simulator (numba's compiler rejects it: see '{check}')")
                for c in ((SIGNAL_ONE,) if name == "signal" else (AT_COUNT, BELOW, BOUNDED)):
                    marks[c] = (marks[c][0], f"{said}: {marks[c][1]}")
                if len(ran["rejected"]) == 1:
                    other = "signal" if name == "wait" else "wait"
                    marks[RUN] = (marks[RUN][0], f"your {other} with the lesson's {name} in place of yours (numba's "
                                                 f"compiler rejects yours: see '{check}'): {marks[RUN][1]}")
        return [(c, *marks[c]) for c in self.checks]

    @staticmethod
    def _signal(after: Any) -> tuple[bool, str]:
        if isinstance(after, dict):
            return False, f"signal(counters, {LAYER}) on [5, 7, 9] raised {after['error']}"
        if after == [5, 8, 9]:
            return True, f"signal(counters, {LAYER}) on [5, 7, 9] left [5, 8, 9]: one more tile of layer {LAYER}"
        step = after[1] - 7
        if after[0] != 5 or after[2] != 9:
            return False, (f"signal(counters, {LAYER}) on [5, 7, 9] left {after}: it changed another layer's "
                           f"counter; add to counters[layer] only")
        return False, (f"signal(counters, {LAYER}) on [5, 7, 9] left {after}: it added {step}, not 1; each tile counts "
                       f"once, and wait compares the count with the number of tiles")

    @staticmethod
    def _at_count(probes: list[Any], arrives: Any) -> tuple[bool, str]:
        for p in (*probes, arrives or {}):
            if "error" in p:
                return False, f"wait(counters, {LAYER}, ...) raised {p['error']}"
        alone, more, everyone = probes
        for p in (alone, more):
            call = _call(p["counters"], p["spin_limit"])
            if p["returned"] is None:
                return False, (f"{call} never returned, not even once the count had grown: compare with >= tiles, "
                               f"re-read counters[layer] on every poll")
            if not p["returned"]:
                if everyone["returned"] and not everyone["after"]:
                    return False, (f"{call} returned False, and True with counters = {everyone['counters']}: it reads "
                                   f"another layer's counter; read counters[layer]")
                return False, (f"{call} returned False: it must return True once counters[layer] >= tiles" +
                               (" (not == tiles)" if p is more else " (not > tiles)"))
            if p["after"]:
                return False, (f"{call} returned True only after the count grew past it: compare counters[layer] "
                               f">= tiles")
        call = _call(arrives["counters"], arrives["spin_limit"])
        came = (f"the last tile was counted {arrives['late_ns'] / 1e6:g} ms after it began, well within its "
                f"{arrives['spin_limit']} polls")
        if arrives["returned"] is None:
            return False, (f"{call} never returned, though {came}: re-read counters[layer] on every poll (a read "
                           f"before the loop, or a plain load the compiler hoists, never sees the count come)")
        if not arrives["returned"]:
            if arrives["after"]:
                return False, (f"{call} returned False after {came}: it polled without seeing the count; re-read "
                               f"counters[layer] on every poll with load_acquire_gpu (the compiler may hoist a plain "
                               f"load out of the loop)")
            return False, (f"{call} returned False before the count came ({came}): keep polling counters[layer] "
                           f"until it reaches tiles or spin_limit + 1 polls have been made")
        return True, (f"True at once with {TILES} of {TILES} tiles counted and with more (its neighbours' not), and "
                      f"True once the last tile was counted while it polled")

    @staticmethod
    def _below(p: Any, at_count: tuple[bool, str]) -> dict[str, tuple[bool, str]]:
        if not at_count[0]:
            why = ("not credited until wait returns at the count (above): a wait that never returns True holds below "
                   "the count and gives up without doing anything")
            return {BELOW: (False, why), BOUNDED: (False, why)}
        if "error" in p:
            return {BELOW: (False, f"wait raised {p['error']}"), BOUNDED: (False, f"wait raised {p['error']}")}
        seconds, call = LATE_NS / 1e9, _call(p["counters"], p["spin_limit"])
        if p["returned"] is None:
            return {BELOW: (True, "it never returned True below the count"),
                    BOUNDED: (False, f"{call} never returned: not after spin_limit + 1 polls, and not when the last "
                                     f"tile was counted {seconds:g} s later (abandoned after {PROBE_SECONDS:g} s more): "
                                     f"count your polls and return False after spin_limit + 1, and re-read "
                                     f"counters[layer] each time")}
        if p["returned"] and not p["after"]:
            return {BELOW: (False, f"{call} returned True with {TILES - 1} of {TILES} tiles of layer {LAYER} counted: "
                                   f"the block would read rows of x_l nobody has written yet; return True only once "
                                   f"counters[layer] >= tiles (and poll: do not assume)"),
                    BOUNDED: (True, "it returned before the last tile was counted")}
        if p["returned"]:
            return {BELOW: (True, "it did not return True below the count"),
                    BOUNDED: (False, f"{call} kept polling until the last tile was counted {seconds:g} s later: after "
                                     f"spin_limit + 1 = {SPIN_LIMIT + 1} polls it must give up and return False (the "
                                     f"megakernel then reports the error: never a hang)")}
        return {BELOW: (True, f"False with {TILES - 1} of {TILES} tiles counted (the other layers' done)"),
                BOUNDED: (True, f"it gave up (False) before the last tile was counted, {seconds:g} s later")}

    def _ordering(self, ptx: dict[str, dict[str, str]] | None, weak: dict[str, Any],
                  no_ptx: str | None) -> dict[str, tuple[bool | None, str]]:
        if ptx is None:
            loud = (f"JUDGED WITHOUT THE PTX (numba's compiler is missing here: {no_ptx}; pip install -e '.[lessons]' "
                    f"brings it): ")
            if weak["status"] != "ran":
                return {c: (weak["status"] == "environment", loud + weak["message"]) for c in (RELEASE, ACQUIRE)}
            verdicts = {RELEASE: weak_verdict(weak["runs"].get("signal"), "your signal with the lesson's wait"),
                        ACQUIRE: weak_verdict(weak["runs"].get("wait"), "the lesson's signal with your wait")}
            return {c: (ok, loud + words) for c, (ok, words) in verdicts.items()}
        marks = {}
        for check, name in ((RELEASE, "signal"), (ACQUIRE, "wait")):
            got = ptx[name]
            if got["status"] == "environment":  # the machine's fault: given, never lost (as the compile gate does)
                marks[check] = (True, f"not checked: numba's compiler failed here ({got['message']}); the grading "
                                      f"machine's problem, not your code's: the points are given (instructors: "
                                      f"`kernels-lab doctor`)")
            elif got["status"] != "compiled":
                marks[check] = (False, f"numba's real compiler rejects {name} (the simulator runs more than a GPU "
                                       f"compiles):\n{got['message']}")
            else:
                problem, seen = (release_problem if check == RELEASE else acquire_problem)(got["ptx"])
                marks[check] = (problem is None, problem or seen)
        return marks

    @classmethod
    def _runs(cls, job: dict[str, Any], ran: dict[str, Any]) -> dict[str, tuple[bool, str]]:
        """The megakernel's run, and (scored only once it is right) its run in weak memory."""
        run = cls._run(job, ran)
        weak = ran["weak"]
        if not run[0]:
            return {RUN: run, WEAK: (False, "not credited until the megakernel is right (above): a run that is wrong "
                                            "in coherent memory shows nothing about ordering")}
        if weak["status"] == "environment":  # the machine's fault: given, never lost
            return {RUN: run, WEAK: (True, f"not checked: the weak-memory child failed here ({weak['message']}); the "
                                           f"grading machine's problem, not your code's: the point is given")}
        if weak["status"] != "ran":
            return {RUN: run, WEAK: (False, f"your protocol in weak memory: {weak['message']}" +
                                            (": a wait that never gives up, on a poll the compiler may serve stale"
                                             if weak["status"] == "timeout" else ""))}
        return {RUN: run, WEAK: weak_verdict(weak["runs"].get("yours"), "your protocol")}

    @staticmethod
    def _run(job: dict[str, Any], ran: dict[str, Any]) -> tuple[bool, str]:
        from ...checks import compare
        w = decode.WORKLOAD
        size = w.size(**job["size"])
        barrier = [f"{name} calls {', '.join(calls)}" for name, calls in ran["barriers"].items() if calls]
        if barrier:
            return False, (f"{'; '.join(barrier)}: only thread 0 calls signal and wait, so that barrier waits for "
                           f"threads that never come to it (on a GPU the block deadlocks, or it meets the block's "
                           f"next barrier and the threads run out of step); the megakernel's own barrier before "
                           f"signal is the one that orders the block's stores: remove it")
        got = ran["run"]
        if "error" in got:
            return False, f"at {size} the megakernel raised {got['error']}"
        want = w.reference(w.make_inputs(size, np.random.default_rng(job["seed"])))["out"]
        if got["gave_up"] is not None:
            return False, (f"at {size} a wait for layer {got['gave_up']} gave up: does signal add 1 to counters[layer] "
                           f"for every tile, and does wait return True once counters[layer] >= tiles?")
        _, bad = compare("out", np.asarray(got["out"]), want, w.tolerance)
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
    points={SIGNAL_ONE: 1, RELEASE: 1.5, AT_COUNT: 1.5, BELOW: 1, BOUNDED: 1, ACQUIRE: 1.5, RUN: 1.5, WEAK: 1}))
