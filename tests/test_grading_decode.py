"""decode_protocol (lesson 07): student-style signal / wait pairs graded on the simulator, each with its exact
points per check and the words that name its problem; the lesson's check gives the grader's verdict; the
PTX rules on listings of every kind they judge.

A grade takes ~3 s (one child, and a PTX child on the PTX back-end); the default run keeps a
correct style and the two bugs only the PTX shows, KERNELS_LAB_SLOW_TESTS=1 the rest (the lesson's solution is
graded in test_workloads.py). benchmarks/grade_adversarial.sh grades them all on a GPU."""

import math
import os

import numpy as np
import pytest

from kernels_lab import capabilities, lessons
from kernels_lab.grading import report
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
FULL = {dp.SIGNAL_ONE: 1, dp.RELEASE: 1.5, dp.AT_COUNT: 1, dp.BELOW: 1.5, dp.BOUNDED: 1.5, dp.ACQUIRE: 1.5, dp.RUN: 2}

# (submission, the checks it loses, a phrase its feedback must hold)
VERDICTS = [
    ("decode_fence_atomic", {}, "from its PTX: the count is released"),
    pytest.param("decode_relaxed_poll_fence", {}, "from its PTX: the poll is an acquire", marks=SLOW),
    # (and in the default run through the notebook's check below)
    pytest.param("decode_no_fence", {dp.RELEASE: 0}, "is a relaxed atomic with no fence before it", marks=SLOW),
    ("decode_plain_load", {dp.ACQUIRE: 0}, "is a plain load: the compiler may hoist it"),
    pytest.param("decode_count_short", {dp.BELOW: 0}, "returned True with 2 of 3 tiles counted", marks=SLOW),
    # a count that never comes: the megakernel's waits give up too (a wrong run, said by the host)
    pytest.param("decode_count_past", {dp.AT_COUNT: 0, dp.RUN: 0}, "returned False: it must return True once",
                 marks=SLOW),
    pytest.param("decode_signal_adds_two", {dp.SIGNAL_ONE: 0}, "it added 2, not 1", marks=SLOW),
    pytest.param("decode_unbounded", {dp.BOUNDED: 0}, "kept polling until the last tile was counted", marks=SLOW),
    pytest.param("decode_no_poll", {dp.BELOW: 0, dp.ACQUIRE: 0}, "wait never reads counters", marks=SLOW),
    # never gives up, never re-reads: abandoned on the simulator, the grade goes on
    pytest.param("decode_spin_forever", {dp.BOUNDED: 0, dp.ACQUIRE: 0}, "stands before the loop in the PTX",
                 marks=SLOW),
]


def _ids(v):
    return v.values[0] if hasattr(v, "values") else v[0]


@pytest.mark.parametrize("name, lost, phrase", VERDICTS, ids=[_ids(v) for v in VERDICTS])
def test_each_submission_loses_exactly_its_points(name, lost, phrase):
    g = grade(get_exercise("decode_protocol"), submission(name), name, compile_gate=False, timeout_s=60)
    text = report.text(g)
    assert g.outcome == "graded" and g.max_score == 10, text
    assert {t.name: t.score for t in g.tests} == pytest.approx({**FULL, **lost}, abs=1e-3), text
    assert phrase in text, text
    for t in g.tests:  # a check that passes says what it saw; one that fails, the problem, never a pass's words
        assert (t.status == "passed") == (t.name not in lost), text


def _entry(name: str):
    """wait, defined as a notebook cell defines it (signal beside it)."""
    namespace = {"cuda": cuda, "np": np, "math": math}
    exec(compile(submission(name), name, "exec"), namespace)
    return namespace["wait"]


def test_the_lessons_check_is_the_graders_judge():
    nb = lessons.judged("decode_protocol", _entry("decode_no_fence"))
    graded = grade(get_exercise("decode_protocol"), submission("decode_no_fence"), "decode_no_fence",
                   compile_gate=False, timeout_s=60)
    assert {t.name: t.score for t in graded.tests} == pytest.approx({**FULL, dp.RELEASE: 0}), report.text(graded)
    assert [(t.name, t.score, t.output) for t in nb.tests] == [(t.name, t.score, t.output) for t in graded.tests]
    assert not nb.passed and "signal releases the stores: 0/1.5" in nb.explain()  # what lessons.check raises


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
    assert ptx["status"] == "compiled", ptx
    assert dp.release_problem(ptx["signal"]) is None and dp.acquire_problem(ptx["wait"]) is None


# -- the rules on PTX listings (what numba's compiler emits for each style, reduced to its memory operations) ---

STORE = "st.global.u32 [%rd3], %r2;"


@pytest.mark.parametrize("body, says", [
    ([STORE, "red.release.gpu.global.add.s32 [%rd2], %r2;"], None),
    ([STORE, "membar.gl;", "atom.global.add.u32 %r3, [%rd4], 1;"], None),
    ([STORE, "fence.acq_rel.sys;", "red.global.add.u32 [%rd4], 1;"], None),
    ([STORE, "atom.global.add.u32 %r3, [%rd4], 1;"], "no fence before it"),
    ([STORE, "atom.global.add.u32 %r3, [%rd4], 1;", "membar.gl;"], "its fence after it, too late"),
    ([STORE, "membar.cta;", "atom.global.add.u32 %r3, [%rd4], 1;"], "block-scoped"),
    ([STORE, "red.release.cta.global.add.s32 [%rd2], %r2;"], "releases at cta scope"),
    ([STORE, "membar.gl;", "ld.global.u32 %r3, [%rd3];", "st.global.u32 [%rd3], %r4;"], "no atomic add"),
])
def test_the_release_rule(body, says):
    found = dp.release_problem("\n".join(body))
    assert found is None if says is None else says in found, found


LOOP = ["$L__BB0_3:", "{poll}", "setp.ge.s64 %p3, %rd9, %rd5;", "@%p3 bra $L__BB0_5;", "{after}",
        "@%p4 bra $L__BB0_3;", "$L__BB0_5:", "{exit}", "st.global.u32 [%rd10], %r8;"]


def _wait_ptx(poll: str, after: str = "nanosleep.u32 %r6;", exit: str = "") -> str:
    return "\n".join(ln.format(poll=poll, after=after, exit=exit) for ln in LOOP)


@pytest.mark.parametrize("ptx, says", [
    (_wait_ptx("ld.acquire.gpu.global.s32 %r4, [%rd3];"), None),
    (_wait_ptx("ld.acquire.sys.global.s32 %r4, [%rd3];"), None),
    (_wait_ptx("atom.global.add.u32 %r4, [%rd1], 0;", exit="membar.gl;"), None),
    (_wait_ptx("ld.relaxed.sys.global.s32 %r4, [%rd3];", after="membar.gl;"), None),
    (_wait_ptx("ld.relaxed.gpu.global.s32 %r4, [%rd3];"), "is relaxed and no gpu-scope fence follows it"),
    (_wait_ptx("ld.volatile.global.s32 %r4, [%rd3];", exit="membar.cta;"), "is relaxed and no gpu-scope fence"),
    (_wait_ptx("ld.global.s32 %rd9, [%rd1];"), "is a plain load: the compiler may hoist it out of the loop,"),
    (_wait_ptx("ld.acquire.cta.global.s32 %r4, [%rd3];"), "is cta-scoped"),
    ("ld.global.s32 %rd6, [%rd5];\nsetp.ge.s64 %p3, %rd6, %rd3;", "(here it did: the PTX has no loop left)"),
    ("ld.global.s32 %rd6, [%rd5];\n" + _wait_ptx("add.s64 %rd3, %rd11, 1;"), "stands before the loop"),
    (_wait_ptx("add.s64 %rd3, %rd11, 1;"), "never reads counters"),
])
def test_the_acquire_rule(ptx, says):
    found = dp.acquire_problem(ptx)
    assert found is None if says is None else says in found, found
