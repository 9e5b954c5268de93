"""decode_protocol (lesson 07): student-style signal / wait pairs graded on the simulator, each with its exact
points per check and the words that name its problem; the lesson's check gives the grader's verdict; the
PTX rules on listings of every kind they judge.

A grade takes ~3 s (one child, and a PTX child on the PTX back-end); the default run keeps a
correct style and the two bugs only the PTX shows, KERNELS_LAB_SLOW_TESTS=1 the rest (the lesson's solution is
graded in test_workloads.py). benchmarks/grade_adversarial.sh grades them all on a GPU."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from kernels_lab import capabilities, lessons
from kernels_lab.grading import compile_gate, report
from kernels_lab.grading import ptx as ptx_scan
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import grade
from kernels_lab.runtime import ON_SIMULATOR, cuda
from kernels_lab.topics.decode import kernels as dk
from kernels_lab.topics.decode import protocol as dp
from sources import submission

pytestmark = [
    pytest.mark.skipif(not ON_SIMULATOR, reason="simulator grades (the GPU's: benchmarks/grade_adversarial.sh)"),
    pytest.mark.skipif(not capabilities.ptx_libraries().available,
                       reason="the ordering checks need numba's compiler (the cu13 extra)"),
]
SLOW = pytest.mark.skipif(os.environ.get("KERNELS_LAB_SLOW_TESTS") != "1",
                          reason="a simulator grade: KERNELS_LAB_SLOW_TESTS=1 runs it")
FULL = dict(get_exercise("decode_protocol").points)
GATED = {dp.BELOW: 0, dp.BOUNDED: 0}  # scored only once "wait returns at the count" passes

# (submission, the checks it loses, a phrase its feedback must hold)
VERDICTS = [
    ("decode_fence_atomic", {}, "`membar.gl;` comes before the count `atom.global.add"),
    pytest.param("decode_relaxed_poll_fence", {}, "is relaxed, and `membar.gl;` follows it on every path", marks=SLOW),
    pytest.param("decode_backoff", {}, "is an acquire; re-read in its loop", marks=SLOW),
    # (and in the default run through the notebook's check below)
    pytest.param("decode_no_fence", {dp.RELEASE: 0, dp.WEAK: 0}, "is a relaxed atomic with no fence before it", marks=SLOW),
    pytest.param("decode_plain_load", {dp.ACQUIRE: 0, dp.WEAK: 0}, "is a plain load: the compiler may hoist it", marks=SLOW),
    ("decode_fence_not_yet_path", {dp.ACQUIRE: 0, dp.WEAK: 0}, "`membar.gl;` is only on another path (polling again)"),
    pytest.param("decode_count_short", {dp.BELOW: 0}, "returned True with 2 of 3 tiles of layer 1 counted",
                 marks=SLOW),
    # a count that never comes: the megakernel's waits give up too (a wrong run, said by the host)
    pytest.param("decode_count_past", {dp.AT_COUNT: 0, **GATED, dp.RUN: 0, dp.WEAK: 0}, "returned False: it must return True once",
                 marks=SLOW),
    pytest.param("decode_wrong_counter", {dp.AT_COUNT: 0, **GATED, dp.RUN: 0, dp.WEAK: 0}, "it reads another layer's counter", marks=SLOW),
    ("decode_stub", {c: 0 for c in FULL}, "not credited until wait returns at the count"),
    # the count arrives on the device 20 ms after wait began (its poll budget far longer): decided on every machine
    ("decode_read_once", {dp.AT_COUNT: 0, **GATED}, "returned False before the count came"),
    pytest.param("decode_signal_adds_two", {dp.SIGNAL_ONE: 0}, "it added 2, not 1", marks=SLOW),
    # judged apart on every back-end: the rejected one probed on the simulator, the lesson's in the megakernel
    ("decode_signal_rejected", {dp.RELEASE: 0}, "your wait with the lesson's signal in place of yours"),
    pytest.param("decode_wait_rejected", {dp.ACQUIRE: 0}, "wait's probes run on the simulator (numba's compiler "
                 "rejects it", marks=SLOW),
    pytest.param("decode_barrier_in_signal", {dp.RUN: 0, dp.WEAK: 0}, "signal calls cuda.syncthreads(): only thread 0 calls signal", marks=SLOW),
    pytest.param("decode_unbounded", {dp.BOUNDED: 0}, "kept polling until the last tile was counted", marks=SLOW),
    pytest.param("decode_no_poll", {dp.BELOW: 0, dp.ACQUIRE: 0, dp.WEAK: 0}, "wait never reads counters", marks=SLOW),
    # never gives up, never re-reads: it never returns once the count came while it spun (abandoned on the simulator,
    # the probe after it not run), the grade goes on
    pytest.param("decode_spin_forever", {dp.AT_COUNT: 0, **GATED, dp.ACQUIRE: 0, dp.WEAK: 0},
                 "never returned, though the last tile was counted", marks=SLOW),
]


def _ids(v):
    return v.values[0] if hasattr(v, "values") else v[0]


@pytest.mark.parametrize("name, lost, phrase", VERDICTS, ids=[_ids(v) for v in VERDICTS])
def test_each_submission_loses_exactly_its_points_and_the_lessons_check_agrees(name, lost, phrase):
    g = grade(get_exercise("decode_protocol"), submission(name), name, compile_gate=False, timeout_s=90)
    text = report.text(g)
    assert g.outcome == "graded" and g.max_score == 10, text
    assert {t.name: t.score for t in g.tests} == pytest.approx({**FULL, **lost}, abs=1e-3), text
    assert phrase in text, text
    for t in g.tests:  # a check that passes says what it saw; one that fails, the problem, never a pass's words
        assert (t.status == "passed") == (t.name not in lost), text
    if name == "decode_spin_forever":
        return  # in this process its abandoned probe would spin beside every later test
    nb = lessons.judged("decode_protocol", _entry(name))  # the notebook's check: the same checks, words, points
    assert [(t.name, t.score) for t in nb.tests] == [(t.name, t.score) for t in g.tests]
    assert [t.output for t in nb.tests] == [t.output for t in g.tests]  # every probe decides: the same words
    assert nb.passed == (not lost)


def _entry(name: str):
    """wait, defined as a notebook cell defines it (signal beside it)."""
    namespace = {"cuda": cuda, "np": np, "math": math}
    exec(compile(submission(name), name, "exec"), namespace)
    return namespace["wait"]


def test_a_failing_check_raises_what_it_found():
    with pytest.raises(AssertionError, match="signal releases the stores: 0/1.5"):
        lessons.check("decode_protocol", _entry("decode_no_fence"))


@pytest.mark.parametrize("name, lost, says", [
    ("decode_fence_atomic", {}, "your signal with the lesson's wait in weak memory (seeds 0, 1"),
    pytest.param("decode_no_fence", {dp.RELEASE: 0, dp.WEAK: 0}, "your signal with the lesson's wait in weak memory "
                 "(seed 0", marks=SLOW),
    ("decode_plain_load", {dp.ACQUIRE: 0, dp.WEAK: 0}, "the lesson's signal with your wait in weak memory (seed 0"),
])
def test_without_the_compiler_ordering_is_judged_in_weak_memory_and_said_loudly(monkeypatch, name, lost, says):
    missing = capabilities.Capability("PTX compile", False, "libnvvm not found (a test)")
    monkeypatch.setattr(capabilities, "ptx_libraries", lambda: missing)
    with pytest.warns(UserWarning, match="MEMORY ORDERING IS NOT READ FROM THE PTX HERE"):
        nb = lessons.judged("decode_protocol", _entry(name))
    assert {t.name: t.score for t in nb.tests} == pytest.approx({**FULL, **lost})  # the same ten points
    assert sum(t.max_score for t in nb.tests) == 10 and not nb.not_made
    ordering = {t.name: t.output for t in nb.tests if t.name in (dp.RELEASE, dp.ACQUIRE)}
    assert all(out.startswith("JUDGED WITHOUT THE PTX") for out in ordering.values()), ordering
    assert says in "\n".join(ordering.values()), ordering


def test_a_passing_check_names_every_check_it_made():
    said = lessons.check("decode_protocol", _entry("decode_fence_atomic"))
    assert said.startswith("decode_protocol: every check made here passed (")
    assert all(name in said for name in FULL), said


def test_a_missing_signal_and_kernels_labs_own_protocol_are_refused():
    namespace = {"cuda": cuda, "np": np, "math": math}
    exec("@cuda.jit(device=True)\ndef wait(counters, layer, tiles, spin_limit):\n    return False\n", namespace)
    with pytest.raises(AssertionError, match="signal must be a @cuda.jit.device=True. function, got nothing"):
        lessons.check("decode_protocol", namespace["wait"])
    namespace["signal"] = dk.signal_release  # the megakernel's own, with a wait of one's own
    with pytest.raises(AssertionError, match="signal is kernels_lab's own"):
        lessons.check("decode_protocol", namespace["wait"])


def test_the_megakernels_own_protocol_passes_the_ptx_rules():
    ptx = dp._ptx(*dk.PROTOCOL)
    assert ptx["signal"]["status"] == ptx["wait"]["status"] == "compiled", ptx
    assert dp.release_problem(ptx["signal"]["ptx"])[0] is None and dp.acquire_problem(ptx["wait"]["ptx"])[0] is None


def test_the_probes_kernels_compile_for_the_gpu():
    """The probe that counts late (the GPU's path: its blocks side by side, a handshake and a delay on the device)
    compiles with numba's real compiler for sm_90, with the lesson's wait in it."""
    code = ("from numba import types as nt\n"
            "from kernels_lab.capabilities import compile_ptx\n"
            "from kernels_lab.topics.decode import protocol as dp, kernels as dk\n"
            "i32, i64 = nt.Array(nt.int32, 1, 'C'), nt.Array(nt.int64, 1, 'C')\n"
            "sig = (i32, i32, i64, i32, nt.int64, nt.int64, nt.int64, nt.int32, nt.int64, nt.int64)\n"
            "print(compile_ptx(dp._late_count_probe(dk.wait_acquire).py_func, sig, (9, 0)))\n")
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = ptx_scan.listing(proc.stdout)
    # the second block's read of block 0's start flag is re-made in its loop (never hoisted), and the wait's acquire
    assert any(i.text.startswith("ld.relaxed.sys") and found.in_loop(i.index) for i in found.instrs), proc.stdout
    assert "ld.acquire.gpu" in proc.stdout and "%globaltimer" in proc.stdout


# -- the rules on PTX listings (what numba's compiler emits for each style, reduced to its memory operations) ---
# The probes' own data is float64: their store (signal's probe) and read (wait's, once it returned True) are the
# .f64 accesses; every other global access is the student's function's.

STORE = "st.global.f64 [%rd3], %fd1;"


@pytest.mark.parametrize("body, says", [
    ([STORE, "red.release.gpu.global.add.s32 [%rd2], %r2;"], "the count `red.release.gpu.global.add.s32"),
    ([STORE, "membar.gl;", "atom.global.add.u32 %r3, [%rd4], 1;"], "`membar.gl;` comes before the count"),
    ([STORE, "fence.acq_rel.sys;", "red.global.add.u32 [%rd4], 1;"], "`fence.acq_rel.sys;` comes before"),
    ([STORE, "atom.global.add.u32 %r3, [%rd4], 1;"], "no fence before it"),
    ([STORE, "atom.global.add.u32 %r3, [%rd4], 1;", "membar.gl;"], "its fence after it, too late"),
    ([STORE, "membar.cta;", "atom.global.add.u32 %r3, [%rd4], 1;"], "block-scoped"),
    ([STORE, "red.release.cta.global.add.s32 [%rd2], %r2;"], "releases at cta scope"),
    ([STORE, "membar.gl;", "ld.global.u32 %r3, [%rd3];", "st.global.u32 [%rd3], %r4;"], "no atomic add"),
    # the fence on one path only: the other path counts unordered
    ([STORE, "@%p1 bra $L__BB0_2;", "membar.gl;", "$L__BB0_2:", "atom.global.add.u32 %r3, [%rd4], 1;"],
     "no fence before it on some of its paths"),
])
def test_the_release_rule(body, says):
    problem, seen = dp.release_problem("\n".join(body + ["ret;"]))
    assert says in (seen if problem is None else problem), (problem, seen)
    assert (problem is None) == says.startswith(("the count", "`"))


# wait's probe as numba compiles it: the poll, the not-yet path (polls again), the True path (reads the data)
LOOP = ["$L__BB0_3:", "{poll}", "setp.lt.s64 %p5, %rd18, %rd11;", "@%p5 bra $L__BB0_5;", "bra.uni $L__BB0_4;",
        "$L__BB0_5:", "{again}", "@%p6 bra $L__BB0_3;", "bra.uni $L__BB0_6;",
        "$L__BB0_4:", "{returns}", "ld.global.f64 %fd1, [%rd4];", "st.global.f64 [%rd3], %fd1;",
        "$L__BB0_6:", "ret;"]
ONCE = ["{poll}", "setp.lt.s64 %p4, %rd14, %rd6;", "@%p4 bra $L__BB0_3;", "ld.global.f64 %fd1, [%rd15];",
        "st.global.f64 [%rd16], %fd1;", "$L__BB0_3:", "ret;"]


def _wait_ptx(poll: str, again: str = "nanosleep.u32 %r6;", returns: str = "", shape=LOOP) -> str:
    return "\n".join(ln.format(poll=poll, again=again, returns=returns) for ln in shape)


@pytest.mark.parametrize("ptx, says", [
    (_wait_ptx("ld.acquire.gpu.global.s32 %r4, [%rd3];"), "is an acquire; re-read in its loop"),
    (_wait_ptx("ld.acquire.sys.global.s32 %r4, [%rd3];"), "is an acquire; re-read in its loop"),
    (_wait_ptx("atom.global.add.u32 %r4, [%rd1], 0;", returns="membar.gl;"),
     "is relaxed, and `membar.gl;` follows it on every path to the return"),
    (_wait_ptx("ld.relaxed.sys.global.s32 %r4, [%rd3];", returns="fence.sc.gpu;"), "`fence.sc.gpu;` follows it"),
    # the hole: a fence on the path that polls again orders nothing on the path that returns True
    (_wait_ptx("atom.global.add.u32 %r4, [%rd1], 0;", again="membar.gl;"),
     "PROBLEM `membar.gl;` is only on another path (polling again), not on the one that returns True"),
    (_wait_ptx("ld.relaxed.gpu.global.s32 %r4, [%rd3];"), "PROBLEM is relaxed and no fence follows it"),
    (_wait_ptx("ld.volatile.global.s32 %r4, [%rd3];", returns="membar.cta;"),
     "PROBLEM the fence on that path, `membar.cta;`, is block-scoped"),
    (_wait_ptx("ld.global.s32 %rd9, [%rd1];"), "PROBLEM is a plain load: the compiler may hoist it out of the loop,"),
    (_wait_ptx("ld.global.s32 %rd9, [%rd1];", returns="membar.gl;"), "PROBLEM is a plain load"),  # not morally strong
    (_wait_ptx("ld.acquire.cta.global.s32 %r4, [%rd3];"), "PROBLEM is cta-scoped"),
    (_wait_ptx("ld.global.s32 %rd6, [%rd5];", shape=ONCE), "PROBLEM (here it did: the PTX has no loop left)"),
    (_wait_ptx("ld.acquire.gpu.global.s32 %r2, [%rd6];", shape=ONCE), "is an acquire; read once: the PTX has no loop"),
    ("ld.global.s32 %rd6, [%rd5];\n" + _wait_ptx("add.s64 %rd3, %rd11, 1;"), "PROBLEM stands before the loop"),
    (_wait_ptx("add.s64 %rd3, %rd11, 1;"), "PROBLEM never reads counters"),
    ("ld.acquire.gpu.global.s32 %r2, [%rd6];\nret;", "PROBLEM wait never returns True in its PTX"),
])
def test_the_acquire_rule(ptx, says):
    problem, seen = dp.acquire_problem(ptx)
    if says.startswith("PROBLEM "):
        assert problem is not None and says.removeprefix("PROBLEM ") in problem, (problem, seen)
    else:
        assert problem is None and says in seen, (problem, seen)


def test_a_barrier_is_found_in_the_code_and_in_the_ptx():
    namespace = {"cuda": cuda, "np": np}
    exec(submission("decode_barrier_in_signal"), namespace)
    assert dp.barrier_calls(namespace["signal"]) == ["cuda.syncthreads()"]
    assert dp.barrier_calls(namespace["wait"]) == []
    assert ptx_scan.listing("bar.sync 0;\nret;").instrs[0].mem.kind == "barrier"


def test_a_compiler_error_says_its_cause_not_its_last_line():
    from numba.core.errors import TypingError
    e = TypingError("No implementation of function Function(<class 'int'>) found for signature:\n \n >>> "
                    "int(Literal[str](1))\n \nThere are 4 candidate implementations:\n  No match.\n"
                    'File "submission.py", line 9:\n    cuda.atomic.add(counters, layer, int("1"))\n')
    said = compile_gate.compiler_message(e)
    assert said.splitlines()[0] == "TypingError: No implementation of function Function(<class 'int'>) found for " \
                                   "signature:"
    assert '>>> int(Literal[str](1))' in said and 'line 9: cuda.atomic.add(counters, layer, int("1"))' in said
    assert "No match" not in said
