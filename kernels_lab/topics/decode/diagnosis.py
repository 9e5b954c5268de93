"""Lesson 07's first exercise, a diagnosis: three dependency protocols for the megakernel, run in the
simulator's weak-memory mode (kernels_lab/sim_weak.py) under a seed; the student says which break and why.

    A   signal: cuda.atomic.add (relaxed), no fence      wait: load_acquire_gpu poll
    B   signal: cuda.threadfence(), then cuda.atomic.add  wait: load_acquire_gpu poll
    C   signal: add_release_gpu                           wait: a plain load, counters[layer]

B is right (a fence before the count is a release). A's count can be seen before the block's stores of
x_{l+1} (nothing releases them); C sees the count but nothing orders its reads of x_l after the poll (a plain
load is no acquire, and the compiler may hoist it). On a GPU both usually give right answers; in weak memory
they give wrong ones, the same for a seed.

    outcomes = run(seed)              every protocol's megakernel run in weak memory: an Outcome each
                                      (run((0, 1, 2)): under three seeds, in one child where needed)
    print(show(outcomes))             which outputs are wrong, and which arrays were read stale
    print(check({"A": "signal", "B": "right", "C": "wait"}, outcomes))   the student's answer, what to look at

Where the back-end has no weak-memory mode (a GPU), run() runs the same in a child process on the simulator
(python -m kernels_lab.topics.decode.diagnosis SEED prints the outcomes as JSON).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ...arrays import poisoned, to_device
from ...backend import BACKEND
from ...intrinsics import add_release_gpu, load_acquire_gpu, nanosleep
from ...runtime import BACKEND_ENV, cuda
from . import workload as decode

HIDDEN, LAYERS, BATCH = 16, 4, 1   # the simulator's serial table: block 1 reads what block 0 wrote at layer 2
SPIN_LIMIT = 100                   # a stale plain poll sees the count after a few polls (each is fresh w.p. 1/4)
SEEDS = (0, 1, 2)                  # check() holds an answer against every one of them
CHILD_S = 300.0                    # the child on the simulator: numba's import and three small megakernels


# -- the three protocols ------------------------------------------------------------------------------------------

@cuda.jit(device=True)
def signal_a(counters, layer):
    cuda.atomic.add(counters, layer, 1)


@cuda.jit(device=True)
def wait_a(counters, layer, tiles, spin_limit):
    for _ in range(spin_limit + 1):
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
    return False


@cuda.jit(device=True)
def signal_b(counters, layer):
    cuda.threadfence()
    cuda.atomic.add(counters, layer, 1)


@cuda.jit(device=True)
def signal_c(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait_c(counters, layer, tiles, spin_limit):
    for _ in range(spin_limit + 1):
        if counters[layer] >= tiles:
            return True
        nanosleep(32)
    return False


PROTOCOLS: dict[str, tuple[Any, Any]] = {"A": (signal_a, wait_a), "B": (signal_b, wait_a), "C": (signal_c, wait_c)}
FAULT = {"A": "signal", "B": "right", "C": "wait"}   # where each protocol's ordering bug is
WHY = {
    "signal": "its count is a relaxed atomic with no fence before it: nothing releases the block's stores of "
              "x_{l+1}, so another block can see the count and still read the old values (cuda.threadfence() "
              "before the add, or add_release_gpu, is the release)",
    "wait": "it polls with a plain load: that sees the count (sooner or later) but orders nothing, so the reads of "
            "x_l after it can be served stale (and a compiler may hoist a plain load out of the loop); "
            "load_acquire_gpu, or a relaxed/atomic read followed by cuda.threadfence(), is the acquire",
    "right": "its fence before the count releases the block's stores, and its acquire poll orders the block's "
             "reads after the count: every seed gives the float64 answer",
}


def source(name: str) -> str:
    """The Python source of protocol `name`'s signal and wait (for the lesson to print)."""
    signal, wait = PROTOCOLS[_protocol(name)]
    return "\n".join(inspect.getsource(f.py_func) for f in (signal, wait) if f is not None)


def _protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise ValueError(f"protocol {name!r}: the protocols are {', '.join(PROTOCOLS)}")
    return name


# -- running them in weak memory ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """One protocol's megakernel in weak memory under one seed."""

    protocol: str
    seed: int
    wrong: int                        # outputs outside the workload's tolerance
    total: int
    first_wrong: list[tuple[int, float, float]]   # (unit, got, float64) of the first few
    stale_reads: dict[str, int]       # kernel parameter -> plain loads served a stale value
    gave_up: bool                     # a wait gave up (the decode error), instead of an output

    @property
    def right(self) -> bool:
        return self.wrong == 0 and not self.gave_up


def _run_here(name: str, seed: int) -> Outcome:
    W = decode.WORKLOAD
    size = W.size(hidden=HIDDEN, layers=LAYERS, batch=BATCH)
    inputs = W.make_inputs(size, np.random.default_rng(seed))
    out = poisoned(W.output_specs(size))
    with BACKEND.weak_memory(seed) as mode:
        launch = decode.bind_megakernel_with(to_device(inputs), out, protocol=PROTOCOLS[name], spin_limit=SPIN_LIMIT)
        launch()
    got, want = out["out"].copy_to_host().ravel(), W.reference(inputs)["out"].ravel()
    bad = np.flatnonzero(~np.isclose(got, want, rtol=W.tolerance.rtol, atol=W.tolerance.atol))
    return Outcome(name, seed, int(bad.size), int(got.size), [(int(i), float(got[i]), float(want[i])) for i in bad[:4]],
                   dict(mode.stale_by_array), launch.timed_out_waiting_for() is not None)


def run(seed: int | Sequence[int] = 0, protocols: tuple[str, ...] = tuple(PROTOCOLS)) -> list[Outcome]:
    """Each protocol's megakernel in weak memory under `seed` (or under each of several seeds, seed by seed);
    in one child on the simulator where this back-end has no weak-memory mode."""
    names = [_protocol(p) for p in protocols]
    seeds = [int(seed)] if isinstance(seed, (int, np.integer)) else [int(s) for s in seed]
    if BACKEND.models_weak_memory:
        return [_run_here(p, s) for s in seeds for p in names]
    env = {**os.environ, BACKEND_ENV: "sim"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        proc = subprocess.run([sys.executable, "-m", __spec__.name, ",".join(map(str, seeds)), *names], env=env,
                              capture_output=True, text=True, timeout=CHILD_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the diagnosis on the simulator did not finish within {CHILD_S:.0f} s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"the diagnosis on the simulator failed:\n{proc.stderr[-2000:]}")
    return [Outcome(**{**o, "first_wrong": [tuple(w) for w in o["first_wrong"]]})
            for o in json.loads(proc.stdout.strip().splitlines()[-1])]


def show(outcomes: list[Outcome]) -> str:
    """A line per protocol: right, or how many outputs are wrong, the first few, and what was read stale."""
    lines = []
    for o in outcomes:
        stale = ", ".join(f"{k} {v}x" for k, v in sorted(o.stale_reads.items())) or "none"
        if o.gave_up:
            verdict = "a wait gave up (no output)"
        elif o.right:
            verdict = f"right: all {o.total} outputs match float64"
        else:
            first = "; ".join(f"unit {i}: {g:.4g} (float64 {w:.4g})" for i, g, w in o.first_wrong)
            verdict = f"WRONG: {o.wrong} of {o.total} outputs, e.g. {first}"
        lines.append(f"protocol {o.protocol} (weak memory, seed {o.seed}): {verdict}; stale reads: {stale}")
    return "\n".join(lines)


# -- the student's answer -----------------------------------------------------------------------------------------

_SAYS = {"right": "right", "correct": "right", "ok": "right", "none": "right", "fine": "right",
         "signal": "signal", "release": "signal", "fence": "signal", "no fence": "signal", "no release": "signal",
         "wait": "wait", "acquire": "wait", "poll": "wait", "plain load": "wait", "no acquire": "wait"}


@dataclass(frozen=True)
class Diagnosis:
    """The verdict on a student's answer: right or not, and a line per protocol."""

    correct: bool
    lines: tuple[str, ...]

    def __str__(self) -> str:
        head = "diagnosis right: " if self.correct else "diagnosis not yet right: "
        return head + f"{sum(line.startswith('ok') for line in self.lines)} of {len(self.lines)} protocols\n" + \
            "\n".join(self.lines)


def _reading(said: Any) -> str | None:
    text = "none" if said is None else str(said).strip().lower()
    return _SAYS.get(text)


def _answered(answer: Mapping[str, Any], name: str) -> bool:
    return name in answer and answer[name] is not Ellipsis  # the lesson's stub leaves `...`


def check(answer: Mapping[str, Any], outcomes: list[Outcome] | None = None) -> Diagnosis:
    """The student's answer, {protocol: "right" | "signal" | "wait"} (where its ordering bug is; "release" and
    "acquire" are read as "signal" and "wait"), against what the protocols do in weak memory (`outcomes`, or a
    run under each of SEEDS)."""
    if not isinstance(answer, Mapping):
        raise TypeError(f"the answer is a dict {{protocol: 'right' | 'signal' | 'wait'}}, got {type(answer).__name__}")
    unknown = sorted(set(answer) - set(PROTOCOLS))
    if unknown:
        raise ValueError(f"protocols {unknown}: the protocols are {', '.join(PROTOCOLS)}")
    outcomes = outcomes if outcomes is not None else run(SEEDS)
    lines = []
    for name in PROTOCOLS:
        seen = [o for o in outcomes if o.protocol == name]
        broke = [o for o in seen if not o.right]
        evidence = (f"wrong under seed(s) {', '.join(str(o.seed) for o in broke)} ({broke[0].wrong} of "
                    f"{broke[0].total} outputs under seed {broke[0].seed})" if broke else
                    f"right under seed(s) {', '.join(str(o.seed) for o in seen)}")
        said, truth = _reading(answer.get(name, "?")), FAULT[name]
        if not _answered(answer, name):
            lines.append(f"missing {name}: say 'right', 'signal' or 'wait' ({evidence})")
        elif said is None:
            lines.append(f"unread {name}: {answer[name]!r} is none of 'right', 'signal', 'wait' ({evidence})")
        elif said == truth:
            lines.append(f"ok {name}: {said}: {WHY[truth]}")
        elif truth == "right":
            lines.append(f"no {name}: it does not break ({evidence}): what makes its count a release, and its "
                         f"poll an acquire?")
        elif said == "right":
            lines.append(f"no {name}: it breaks ({evidence}; the stale reads are of "
                         f"{', '.join(sorted(broke[0].stale_reads)) or 'nothing'}): is every store of x_(l+1) "
                         f"released before the count, and is every read of x_l ordered after the poll that saw it?")
        else:
            lines.append(f"no {name}: it breaks ({evidence}), but its {said} is fine; look at its {truth}")
    return Diagnosis(all(line.startswith("ok") for line in lines), tuple(lines))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("python -m kernels_lab.topics.decode.diagnosis SEED[,SEED...] [PROTOCOL...]  (on the simulator)")
    seeds = [int(s) for s in sys.argv[1].split(",")]
    print(json.dumps([asdict(o) for o in run(seeds, tuple(sys.argv[2:]) or tuple(PROTOCOLS))]))
