"""Exercise group_switches (lesson 06, exercise 1) graded: an Exercise of kind "data".

The student's function returns the (wait, trigger, order) switches of a group of G; the grader's
child calls it for each case (G = 1, 2, 3, 8), runs the group with the returned switches and
returns the outputs; the parent scores the rules (pdl_rules.findings), the overlap, and the run
against the float64 reference. On the simulator (no PDL) the run checks the kernels only, so every
well-formed answer passes it and the rules decide the placement.
"""

import os
import re

import numpy as np
import pytest

from kernels_lab.topics.pdl import rules as pdl_rules
from kernels_lab.backend import BACKEND
from kernels_lab.core import Case, Exercise, Size
from kernels_lab.grading import report
from kernels_lab.grading.cases import build_cases, load_judge
from kernels_lab.grading.child import run_data_case
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import _grade_data, counted_checks, grade, max_score
from kernels_lab.grading.records import ChildRun, Run
from kernels_lab.lessons import solution_source
from kernels_lab.runtime import ON_SIMULATOR
from sources import SUBMISSIONS, submission

EX = get_exercise("group_switches")
RULES, OVERLAP, RUN, TIMELINE = pdl_rules.RULES, pdl_rules.OVERLAP, pdl_rules.RUN, pdl_rules.TIMELINE
GROUPED = (SUBMISSIONS / "pdl_grouped_kernel.py").read_text()
WAIT_LINE = "    grid_dependency_wait()  # the earlier kernel's writes are visible from here on\n"


def _grade(name, source=None):
    if source is None:
        source = solution_source("group_switches") if name == "solution" else submission(name)
    return grade(EX, source, name, compile_gate=False, timeout_s=30)


def _scores(g):
    return {t.name: t.score for t in g.tests}


def _out(g, name):
    return next(t.output for t in g.tests if t.name == name)


def _in_process(entry, name):
    """The grade of `entry` with the child's and the parent's code, both in this process (no sandbox)."""
    judge, cases = load_judge(EX), build_cases(EX)
    results = {c["id"]: Run.from_report(run_data_case(entry, judge, c, "group_switches")) for c in cases}
    return _grade_data(EX, ChildRun("ok", cases=cases), results, counted_checks(EX), name, "")


def test_the_exercise_is_declared_with_one_maximum():
    assert EX.kind == "data" and EX.lesson == "06" and EX.variant == "pdl" and EX.workload == "quantize_group"
    timeline = 1.0 if BACKEND.pdl()[0] else 0.0  # the timeline counts on a GPU with PDL only
    assert counted_checks(EX) == {RULES: 4.0, OVERLAP: 2.0, RUN: 3.0, TIMELINE: timeline}
    assert max_score(EX) == 9 + timeline and EX.max_score == 10
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
        return {name: (ok, msg) for name, ok, msg in judge.score(case, job, Run.from_report({"id": 0, **got}))}
    short = score({"value": [[True, True, False]] * 2})
    assert [ok for ok, _ in short.values()] == [False, None, False, None]
    assert "2 tuples for a group of G = 3" in short[RULES][1]
    right = pdl_rules.group_switches_by_the_rules(3)
    ran = judge.run(right, job)
    assert [ok for ok, _ in score({"value": right, "ran": ran}).values()][:3] == [True, True, True]
    # a later kernel that read tensor 1 too early: its checksum does not match the values written
    early = score({"value": right, "ran": {**ran, "checksums": ran["checksums"] * np.float32([1, -1, 1])}})
    assert early[RUN][0] is False and "tensor 1: consumer checksum" in early[RUN][1]


def test_an_entry_that_raises_fails_every_check_of_that_case_only():
    def group_switches(g):
        if g == 8:
            raise RuntimeError("no idea for eight")
        return pdl_rules.group_switches_by_the_rules(g)
    g = _in_process(group_switches, "raises")
    assert {k: v for k, v in _scores(g).items() if k != TIMELINE} == {RULES: 3.0, OVERLAP: 1.5, RUN: 2.25}
    assert g.max_score == max_score(EX)
    assert "group_switches(8): RuntimeError: no idea for eight" in _out(g, RULES)


def test_the_lesson_solution_gets_full_marks():
    g = _grade("solution")
    assert g.outcome == "graded" and g.score == g.max_score == max_score(EX), report.text(g)
    if ON_SIMULATOR:
        assert pdl_rules.NO_PDL_NOTE in _out(g, RUN)
        assert "on a GPU with PDL" in _out(g, TIMELINE)


def test_a_grouped_kernel_answer_gets_full_marks():
    g = _grade("grouped", GROUPED)
    assert g.outcome == "graded" and g.score == g.max_score == max_score(EX), report.text(g)
    assert "one grouped kernel that waits before it reads and does not trigger" in _out(g, RULES)
    assert "no boundaries inside the group" in _out(g, OVERLAP)


# a grouped kernel that breaks one of the rules of a group of one: the rules and the overlap earn nothing
GROUPED_WRONG = [
    ("no_wait", GROUPED.replace(WAIT_LINE, ""), "the grouped kernel does not wait"),
    ("triggers", GROUPED.replace(WAIT_LINE, WAIT_LINE + "    launch_dependents()\n").replace(
        "import grid_dependency_wait", "import grid_dependency_wait, launch_dependents"), "the grouped kernel triggers"),
]


@pytest.mark.parametrize("name,source,said", GROUPED_WRONG, ids=[w[0] for w in GROUPED_WRONG])
def test_a_grouped_kernel_that_breaks_a_rule_loses_the_rules(name, source, said):
    assert source != GROUPED
    g = _grade(name, source)
    assert g.outcome == "graded" and said in _out(g, RULES), report.text(g)
    got = _scores(g)
    assert got[RULES] == got[OVERLAP] == 0 and g.score < g.max_score, report.text(g)
    if ON_SIMULATOR:
        assert got[RUN] == 0 and "not credited where a member may read too early" in _out(g, RUN), report.text(g)


def test_a_grouped_answer_must_be_the_students_kernel():
    def group_switches(g):
        from kernels_lab.topics.pdl.workload import grouped_quantize_kernel
        return grouped_quantize_kernel  # the project's own kernel: a copied reference
    g = _in_process(group_switches, "copied")
    assert g.score == 0 and "not in your submission" in _out(g, RULES), report.text(g)


def test_the_timeline_tells_overlap_from_a_serial_group():
    judge = load_judge(EX)
    us = 1000  # stamps are ns
    # rows: earlier kernel, members 0..2, later kernel; columns: first start, last end, start of work
    overlapped = np.array([[0, 10, 0], [5, 900, 12], [20, 905, 25], [30, 910, 31], [911, 950, 0]]) * us
    serial = overlapped.copy()
    serial[2, 2] = 903 * us  # member 1 works only after member 0 ended
    assert [k for k, gap in pdl_rules.timeline_overlap(overlapped) if gap >= 0] == []
    assert [k for k, gap in pdl_rules.timeline_overlap(serial) if gap >= 0] == [1]
    ok, msg = judge._timeline(3, {"stamps": serial}, None, credited=True)[1:]
    if judge.not_counted(TIMELINE):
        assert ok is None and "on a GPU with PDL" in msg
    else:
        assert ok is False and "quantize[1] began its work 3.0 us after quantize[0] ended" in msg
        assert judge._timeline(3, {"stamps": overlapped}, None, credited=True)[1] is True


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
    assert g.outcome == "graded" and g.max_score == max_score(EX), report.text(g)
    check, *phrases = said
    assert all(p in _out(g, check) for p in phrases), report.text(g)
    got = _scores(g)
    assert {k: got[k] for k in (RULES, OVERLAP)} == {k: scores[k] for k in (RULES, OVERLAP)}, report.text(g)
    if ON_SIMULATOR:  # plain launches: right whatever the switches, credited only where the rules hold
        assert got == {**scores, TIMELINE: 0} and g.score == sum(scores.values()), report.text(g)
        assert pdl_rules.NO_PDL_NOTE in _out(g, RUN)
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
    assert g.outcome == "graded" and g.score == 0 and g.max_score == max_score(EX), report.text(g)
    assert "G = 1: quantize[0] does not wait" in _out(g, RULES)


@pytest.mark.gpu
def test_on_a_gpu_with_pdl_the_run_uses_pdl():
    g = _grade("solution")
    assert g.score == g.max_score == max_score(EX), report.text(g)
    if BACKEND.pdl()[0]:
        assert g.max_score == 10 and "run with PDL on this GPU" in _out(g, RUN)
        assert "every member began its work while the member before it still ran" in _out(g, TIMELINE)


def test_the_lesson_check_takes_a_grouped_kernel_too():
    namespace = {"cuda": __import__("kernels_lab.runtime", fromlist=["cuda"]).cuda, "np": np}
    exec(GROUPED, namespace)
    assert "one grouped kernel that waits" in pdl_rules.check_switches(namespace["group_switches"])
    exec(GROUPED.replace(WAIT_LINE, ""), namespace)
    with pytest.raises(AssertionError, match="the grouped kernel does not wait"):
        pdl_rules.check_switches(namespace["group_switches"])


# each case grades the group in full (~5 s on the simulator): the default run keeps the solution, a wrong rule
# and a read before the wait; KERNELS_LAB_SLOW_TESTS=1 adds the other wrong answers (their grades are checked
# by the tests above either way)
_SLOW = pytest.mark.skipif(os.environ.get("KERNELS_LAB_SLOW_TESTS") != "1",
                           reason="a slow simulator grade: KERNELS_LAB_SLOW_TESTS=1 runs it")


@pytest.mark.parametrize("name", ["solution", "pdl_two_rules", pytest.param("pdl_every_member_waits", marks=_SLOW),
                                  pytest.param("pdl_first_does_not_wait", marks=_SLOW),
                                  pytest.param("pdl_last_triggers", marks=_SLOW),
                                  pytest.param("pdl_grouped_kernel", marks=_SLOW), "pdl_reads_before_wait"])
def test_the_notebook_check_runs_the_graders_checks(name):
    from kernels_lab import lessons
    source = solution_source("group_switches") if name == "solution" else submission(name)
    namespace = {"cuda": __import__("kernels_lab.runtime", fromlist=["cuda"]).cuda, "np": np}
    exec(source, namespace)
    # (a generous limit: the grade must not differ for a run slowed by a busy machine)
    nb, g = lessons.judged("group_switches", namespace["group_switches"]), \
        grade(EX, source, name, compile_gate=False, timeout_s=120)
    graded = {t.name: t for t in g.tests}
    assert [t.name for t in nb.tests] == [t.name for t in g.tests if t.status != "skipped"]
    def same(text):  # which thread of a block reads first is the schedule's
        return re.sub(r"thread \d+", "thread #", text)
    for t in nb.tests:  # the same cases (all public), the same judge: the same score and words
        assert (t.score, t.status, same(t.output)) == (graded[t.name].score, graded[t.name].status,
                                                       same(graded[t.name].output))
    assert nb.passed == (g.score == g.max_score)


def test_a_grouped_kernel_that_reads_before_it_waits_loses_the_rules():
    # it waits and does not trigger: only where the wait stands is wrong (the simulator sees each thread's reads
    # and its wait in order; a GPU reads the order in the PTX)
    g = _grade("pdl_reads_before_wait")
    assert g.outcome == "graded", report.text(g)
    rules = _out(g, RULES)
    assert "the grouped kernel reads before it waits (block " in rules and "before its grid_dependency_wait()" in rules
    assert "does not wait" not in rules and "waits before it reads" not in rules
    assert {k: v for k, v in _scores(g).items() if k != TIMELINE} == {RULES: 0, OVERLAP: 0, RUN: 0}, report.text(g)
    assert "not checked where the kernel may read too early" in _out(g, OVERLAP)
    namespace = {"cuda": __import__("kernels_lab.runtime", fromlist=["cuda"]).cuda, "np": np}
    exec((SUBMISSIONS / "pdl_reads_before_wait.py").read_text(), namespace)
    with pytest.raises(AssertionError, match="the grouped kernel reads before it waits"):
        pdl_rules.check_switches(namespace["group_switches"])


def test_the_ptx_shows_a_read_before_the_wait():
    # what a GPU grader reads: the kernel's PTX, compiled here with numba's real compiler (no GPU needed)
    import os
    import subprocess
    import sys

    from kernels_lab.grading import compile_gate
    if not compile_gate.available()[0]:
        pytest.skip(compile_gate.available()[1])
    script = """
import sys, numpy as np
from numba import cuda, types
from kernels_lab.topics.pdl.rules import ptx_read_before_wait
sig = (types.float32[::1], types.int64[::1], types.int8[::1], types.float32[::1])
for path in sys.argv[1:]:
    ns = {"cuda": cuda, "np": np}
    exec(open(path).read(), ns)
    print(ptx_read_before_wait(cuda.compile_ptx(ns["grouped"].py_func, sig, cc=(9, 0))[0]))
"""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["KERNELS_LAB_BACKEND"] = "ptx"
    out = subprocess.run([sys.executable, "-c", script, str(SUBMISSIONS / "pdl_grouped_kernel.py"),
                          str(SUBMISSIONS / "pdl_reads_before_wait.py")], capture_output=True, text=True, env=env,
                         timeout=300)
    right, early = out.stdout.strip().splitlines()[-2:]
    assert right == "None", out.stderr
    assert early.startswith("`ld.global") and early.endswith("comes before griddepcontrol.wait in its PTX"), out.stdout


def test_a_load_before_the_wait_is_found_in_sample_ptx():
    ptx = """.visible .func helper()
{
\tld.global.f32 \t%f9, [%rd9];
}
.visible .entry grouped(
\t.param .u64 grouped_param_0
)
{
\tld.param.u64 \t%rd1, [grouped_param_0];
\tld.shared.f32 \t%f1, [%r1];
\tgriddepcontrol.wait;
\tld.f32 \t%f2, [%rd1];
}"""
    assert pdl_rules.ptx_read_before_wait(ptx) is None  # parameters, shared memory, another function: not reads
    early = ptx.replace("\tld.shared.f32", "\tld.f32 \t%f3, [%rd1];\n\tld.shared.f32")
    assert pdl_rules.ptx_read_before_wait(early) == "`ld.f32 \t%f3, [%rd1];` comes before griddepcontrol.wait in its PTX"
    assert pdl_rules.ptx_read_before_wait(early.replace("griddepcontrol.wait;", "")) is None  # no wait: its own finding
