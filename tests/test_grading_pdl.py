"""Exercise group_switches (lesson 06, exercise 1) graded: an Exercise of kind "data".

The student's function returns the (wait, trigger, order) switches of a group of G; the grader's
child calls it for each case (G = 1, 2, 3, 8), runs the group with the returned switches and
returns the outputs; the parent scores the rules (pdl_rules.findings), the overlap, and the run
against the float64 reference. On the simulator (no PDL) the run checks the kernels only, so every
well-formed answer passes it and the rules decide the placement.
"""

import numpy as np
import pytest

from kernels_lab import pdl_rules
from kernels_lab.core import Case, Exercise, Size
from kernels_lab.grading import report
from kernels_lab.grading.child import run_data_case
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import _grade_data, counted_checks, grade, max_score
from kernels_lab.grading.sandbox import ChildRun, build_cases, load_judge
from kernels_lab.lessons import solution_source
from kernels_lab.runtime import ON_SIMULATOR
from sources import SUBMISSIONS

EX = get_exercise("group_switches")
RULES, OVERLAP, RUN = pdl_rules.RULES, pdl_rules.OVERLAP, pdl_rules.RUN


def _grade(name):
    source = solution_source("group_switches") if name == "solution" else (SUBMISSIONS / f"{name}.py").read_text()
    return grade(EX, source, name, compile_gate=False, timeout_s=30)


def _scores(g):
    return {t.name: t.score for t in g.tests}


def _out(g, name):
    return next(t.output for t in g.tests if t.name == name)


def _in_process(entry, name):
    """The grade of `entry` with the child's and the parent's code, both in this process (no sandbox)."""
    judge, cases = load_judge(EX), build_cases(EX)
    results = {c["id"]: run_data_case(entry, judge, c, "group_switches") for c in cases}
    return _grade_data(EX, ChildRun("ok", cases=cases), results, counted_checks(EX), name, "")


def test_the_exercise_is_declared_with_one_maximum():
    assert EX.kind == "data" and EX.lesson == "06" and EX.variant == "pdl" and EX.workload == "quantize_group"
    assert counted_checks(EX) == {RULES: 4.0, OVERLAP: 2.0, RUN: 3.0} and max_score(EX) == EX.max_score == 9
    cases = build_cases(EX)
    assert [c["job"]["argument"] for c in cases] == [1, 2, 3, 8] and len({c["job"]["seed"] for c in cases}) == 4
    for c in cases:  # the first tensor is much the largest: it outlasts the others on a GPU
        sizes = c["job"]["sizes"]
        assert len(sizes) == c["job"]["argument"] and all(s >= 1 for s in sizes)
        assert all(sizes[0] > 4 * s for s in sizes[1:])
    with pytest.raises(ValueError, match="needs a judge"):
        Exercise(name="x", workload="quantize_group", variant="pdl", lesson="06", title="", kind="data", entry="f",
                 signature="", cases=(), points={"a": 1})


def test_the_host_recomputes_what_the_earlier_kernel_writes():
    sizes = pdl_rules.case_sizes(60, 3, 7)
    out = pdl_rules.group_outputs(pdl_rules.group_switches_by_the_rules(3), sizes, 7)
    assert np.array_equal(out["data"], pdl_rules.producer_data(sizes, 7)) and out["pdl"] is False


def test_the_judge_names_a_bad_value_and_a_wrong_run():
    judge = load_judge(EX)
    case = Case(Size(n=40, g=3), 5)
    job = judge.job(case)
    assert job["argument"] == 3 and "G = 3" in job["about"]
    def score(got):
        return {name: (ok, msg) for name, ok, msg in judge.score(case, job, got)}
    short = score({"value": [[True, True, False]] * 2})
    assert [ok for ok, _ in short.values()] == [False, None, False]
    assert "2 tuples for a group of G = 3" in short[RULES][1]
    right = pdl_rules.group_switches_by_the_rules(3)
    ran = judge.run(right, job)
    assert [ok for ok, _ in score({"value": right, "ran": ran}).values()] == [True, True, True]
    # a later kernel that read tensor 1 too early: its checksum does not match the values written
    early = score({"value": right, "ran": {**ran, "checksums": ran["checksums"] * np.float32([1, -1, 1])}})
    assert early[RUN][0] is False and "tensor 1: consumer checksum" in early[RUN][1]


def test_an_entry_that_raises_fails_every_check_of_that_case_only():
    def group_switches(g):
        if g == 8:
            raise RuntimeError("no idea for eight")
        return pdl_rules.group_switches_by_the_rules(g)
    g = _in_process(group_switches, "raises")
    assert _scores(g) == {RULES: 3.0, OVERLAP: 1.5, RUN: 2.25} and g.max_score == 9
    assert "group_switches(8): RuntimeError: no idea for eight" in _out(g, RULES)


def test_the_lesson_solution_gets_full_marks():
    g = _grade("solution")
    assert g.outcome == "graded" and g.score == g.max_score == 9, report.text(g)
    if ON_SIMULATOR:
        assert pdl_rules.SIM_NOTE in _out(g, RUN)


# (submission, scores on the simulator, what the rules' feedback must say: the member that reads too early
# or the boundary that loses its overlap)
WRONG = [
    ("pdl_two_rules", {RULES: 1.0, OVERLAP: 2.0, RUN: 3.0},
     (RULES, "G = 3: quantize[1] does not wait at its end (order=False)", "may read tensor 0 while quantize[0] still "
                                                                           "writes it")),
    ("pdl_every_member_waits", {RULES: 4.0, OVERLAP: 0.5, RUN: 3.0},
     (OVERLAP, "G = 2: quantize[1] waits at its start (wait=True)", "no overlap at this boundary")),
    ("pdl_first_does_not_wait", {RULES: 0.0, OVERLAP: 0.0, RUN: 0.0},
     (RULES, "G = 1: quantize[0] does not wait (wait=False)", "may read tensor 0 too early")),
    ("pdl_last_triggers", {RULES: 0.0, OVERLAP: 0.0, RUN: 0.0},
     (RULES, "G = 3: quantize[2], the last member, triggers (trigger=True)", "the last member must not trigger")),
]


@pytest.mark.parametrize("name,scores,said", WRONG, ids=[w[0] for w in WRONG])
def test_wrong_placements_lose_exactly_their_points_and_name_the_member(name, scores, said):
    g = _grade(name)
    assert g.outcome == "graded" and g.max_score == 9, report.text(g)
    check, *phrases = said
    assert all(p in _out(g, check) for p in phrases), report.text(g)
    got = _scores(g)
    assert {k: got[k] for k in (RULES, OVERLAP)} == {k: scores[k] for k in (RULES, OVERLAP)}, report.text(g)
    if ON_SIMULATOR:  # plain launches: right whatever the switches, credited only where the rules hold
        assert got == scores and g.score == sum(scores.values()), report.text(g)
        assert pdl_rules.SIM_NOTE in _out(g, RUN)
    if not scores[RULES]:
        assert "not checked where a member may read too early" in _out(g, OVERLAP)
        if ON_SIMULATOR:  # on a GPU with PDL a run of these switches may come out wrong: then it says how
            assert "not credited where a member may read too early" in _out(g, RUN)


def test_the_untouched_stub_earns_nothing():
    from kernels_lab.lessons import lesson_sources, read_lesson
    stub = next(c.stub for path in lesson_sources().values() for c in read_lesson(path)
                if c.kind == "exercise" and c.exercise == "group_switches")
    namespace = {}
    exec(stub, namespace)  # in this process: the judge's own runs, without a child (the other tests have one)
    g = _in_process(namespace["group_switches"], "stub")
    assert g.outcome == "graded" and g.score == 0 and g.max_score == 9, report.text(g)
    assert "G = 1: quantize[0] does not wait" in _out(g, RULES)


@pytest.mark.gpu
def test_on_a_gpu_with_pdl_the_run_uses_pdl():
    from kernels_lab.workloads.quantize_group import pdl_available
    g = _grade("solution")
    assert g.score == 9, report.text(g)
    if pdl_available()[0]:
        assert "run with PDL on this GPU" in _out(g, RUN)
