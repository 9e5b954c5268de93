"""Submissions written as students write them, each graded to the outcome it deserves.

Most grades use the small views of the lesson exercises in tests/submissions/mini_exercises.py
(the same checks, few small cases): a grade there costs about a second of CPU. The hostile
submissions are in test_grading_adversarial.py; batch, bundle and CLI in test_grading_batch.py.
"""

import functools
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from kernels_lab.grading import report
from kernels_lab.grading.exercises import exercises, get_exercise, load_exercise_file
from kernels_lab.grading.grade import grade, max_score
from kernels_lab.grading.submission import SubmissionError, load_source
from sources import submission

SUBMISSIONS = Path(__file__).parent / "submissions"
MINI = {ex.name: ex for ex in load_exercise_file(SUBMISSIONS / "mini_exercises.py")}


def _grade(exercise, name, **kw):
    if not kw:  # the same grade is asked for by several tests: made once
        return _graded(exercise, name)
    kw.setdefault("compile_gate", False)
    kw.setdefault("timeout_s", 30)
    ex = MINI.get(exercise) or get_exercise(exercise)
    return grade(ex, submission(name), name, **kw)


@functools.lru_cache(maxsize=None)
def _graded(exercise, name):
    return _grade(exercise, name, compile_gate=False, timeout_s=120)  # generous: a busy machine slows a run


def _test(g, name):
    return next(t for t in g.tests if t.name == name)


@pytest.fixture(scope="module")
def fuse_correct():
    """One grade of the correct fused kernel, with the compile gate as this machine has it."""
    return _grade("fuse_mini", "fuse_correct", compile_gate=True)


@pytest.mark.parametrize("exercise,name", [("fuse_mini", "fuse_correct"), ("persistent_mini", "persistent_correct"),
                                           ("block_sums_mini", "block_sums_correct"),
                                           ("two_launches_mini", "two_launches_correct")])
def test_correct_submissions_get_full_marks(exercise, name, request):
    g = request.getfixturevalue("fuse_correct") if name == "fuse_correct" else _grade(exercise, name)
    assert g.outcome == "graded" and g.score == g.max_score > 0, report.text(g)
    assert "hints" not in g.summary


def test_missing_bounds_guard_is_named_once_with_its_run():
    g = _grade("fuse_mini", "fuse_no_bounds_guard")
    assert _test(g, "correct (public)").score < 3 and "IndexError" in _test(g, "correct (public)").output
    assert g.summary.count("missing bounds guard") == 1 and "(first seen at n=" in g.summary
    assert "missing barrier" not in g.summary and "symmetric" not in g.summary


def test_wrong_indexing_that_symmetric_inputs_would_hide():
    g = _grade("fuse_mini", "fuse_wrong_index")
    assert _test(g, "correct (public)").score == 0
    # said because the symmetric probe (n=33) passed and its asymmetric twin (same size, same config) failed
    assert "symmetric inputs would have hidden this (first seen at n=33" in g.summary
    assert "expected" in _test(g, "correct (public)").output and "last written by block" in _test(g, "correct (public)").output


def test_an_extra_launch_loses_the_launch_budget_only():
    from kernels_lab import Exercise
    two = MINI["two_launches_mini"]  # an instructor's view that caps the launches instead of asking for two
    at_most_two = Exercise(name="at_most_two", workload="elementwise", variant="unfused", lesson="02",
                           title="at most two launches", kind="host", entry="run_two", signature=two.signature,
                           cases=two.cases, max_launches=2,
                           points={"correct (public)": 3, "correct (hidden)": 3, "launch budget": 2})
    g = grade(at_most_two, submission("two_launches_three_kernels"), "three", compile_gate=False, timeout_s=120)
    assert _test(g, "correct (public)").status == "passed" and _test(g, "correct (hidden)").status == "passed"
    assert _test(g, "launch budget").score == 0 and "3 kernel launch(es) where the exercise allows 2" in g.summary


def test_temporary_through_global_memory_loses_the_traffic_budget_only():
    g = _grade("fuse_mini", "fuse_global_temporary")
    assert _test(g, "correct (public)").status == "passed" and _test(g, "launch budget").status == "passed"
    traffic = _test(g, "traffic budget")
    assert traffic.score == 0 and "an intermediate goes through global memory" in g.summary
    assert "bytes of global-memory traffic at n=" in g.summary and "global traffic at n=" in traffic.output


def test_grid_too_small_without_a_stride_loop_is_not_called_symmetric():
    g = _grade("persistent_mini", "persistent_no_stride")
    assert _test(g, "grid independent of n").score == 0
    assert "grid too small without a stride loop" in g.summary
    assert "symmetric" not in g.summary and "missing barrier" not in g.summary


def test_missing_barrier_is_caught_in_every_case():
    g = _grade("block_sums_mini", "block_sums_no_barrier")
    race = _test(g, "no race under perturbed schedules")
    # reliably, not by luck: every case's schedules disagree, and the hint is said once
    assert race.score == 0 and "different thread schedules in 2 of 2 case(s)" in race.output
    assert g.summary.count("missing barrier") == 1 and "(first seen at n=64, config (1, 64))" in g.summary


@pytest.mark.parametrize("name,outcome,phrase", [
    ("fuse_infinite_spin", "timeout", "did not finish within 2 s during run 1 of 5 (n=1, config (1, 32))"),
    ("fuse_crash", "crash", "signal 11, segmentation fault) while loading the submission"),
    ("fuse_huge_allocation", "memory", "memory limit"),
    ("fuse_import_error", "import_error", "No module named 'numba_cuda_helpers_that_do_not_exist'"),
    ("fuse_sys_exit", "exited", "sys.exit(0) while loading the submission"),
    ("fuse_flood", "flooding", "output flooding"),
])
def test_broken_submissions_become_explained_grades_within_the_limit(name, outcome, phrase):
    t0 = time.monotonic()
    g = _grade("fuse_mini", name, timeout_s=2, memory_bytes=3 << 30)
    assert time.monotonic() - t0 < 25  # a hang costs its per-run limit, not minutes
    assert g.outcome == outcome and g.score == 0 and phrase in g.summary, g.summary
    assert g.max_score == max_score(MINI["fuse_mini"], compile_gate=False)  # the same maximum as a graded one
    assert all(t.status == "failed" for t in g.tests if t.max_score)


def test_gradescope_results_have_the_documented_fields(fuse_correct):
    g = fuse_correct
    doc = report.gradescope(g)
    assert set(doc) == {"score", "execution_time", "output", "tests", "leaderboard"}
    for t in doc["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and t["visibility"] in ("visible", "hidden", "after_published")
    assert doc["leaderboard"][0]["name"] == "score"
    json.dumps(doc)
    crashed = report.crashed_gradescope("boom")
    assert crashed["score"] == 0 and "boom" in crashed["output"]
    # the grade's own JSON records the sandbox it ran in and the content it graded
    d = g.to_dict()
    assert len(d["content_hash"]) == 64 and d["backend"] == "simulator"
    assert {p[0] for p in d["protections"]} >= {"process containment", "filesystem writes", "results"}
    speed = _test(g, "speed")  # on the simulator the GPU-only checks say so and cost nothing
    assert speed.status == "skipped" and speed.max_score == 0 and "GPU only" in speed.output
    assert [e["name"] for e in g.leaderboard] == ["score"]


def test_notebook_submissions_take_only_the_marked_cells(tmp_path):
    source = submission("fuse_correct")
    nb = {"cells": [{"cell_type": "code", "source": ["x = 1 / 0  # not the student's exercise cell"]},
                    {"cell_type": "code", "source": ["# EXERCISE: fuse_mini\n", source]},
                    {"cell_type": "markdown", "source": ["# EXERCISE: fuse_mini"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(nb))
    assert load_source(path, "fuse_mini").strip() == ("# EXERCISE: fuse_mini\n" + source).strip()
    with pytest.raises(SubmissionError, match="no code cell starts with '# EXERCISE: block_sums'"):
        load_source(path, "block_sums")


def test_every_exercise_has_points():
    for name, ex in exercises().items():
        assert ex.max_score > 0, name


def test_speed_is_classed_conservatively_from_interleaved_ratios():
    from kernels_lab.grading.speed import classify, points_for
    rng = np.random.default_rng(5)
    ref = 1.0 + 0.01 * rng.standard_normal(40)
    assert classify(0.5 * ref, ref).label == "faster"
    assert classify(1.5 * ref, ref).label == "slower"
    assert classify(ref * (1 + 0.01 * rng.standard_normal(40)), ref).label == "same"
    noisy = ref * rng.choice([0.7, 1.3], 40)  # a spread that backs no claim
    v = classify(noisy, ref)
    assert v.label == "unclear" and "quartiles" in v.describe()
    assert points_for(classify(1.5 * ref, ref), 1) == 0 and points_for(v, 1) == 1


def test_the_sanitizer_is_skipped_on_the_simulator():
    from kernels_lab.grading.sanitizer import sanitize
    assert sanitize(get_exercise("fuse_chain"), "", "memcheck").status == "skipped"


@pytest.mark.gpu
def test_gpu_grading_times_against_the_reference_and_runs_the_sanitizers():
    g = _grade("fuse_chain", "fuse_correct")
    speed = _test(g, "speed")
    assert speed.max_score == 1 and "reference's time" in speed.output
    assert any(e["name"] == "time vs reference" and e["value"] > 0 for e in g.leaderboard)
    assert "memcheck (compute-sanitizer): clean" in _test(g, "correct (public)").output
    assert _test(g, "traffic budget").max_score == 1 and "traced on the simulator" in _test(g, "traffic budget").output
    unguarded = _grade("fuse_chain", "fuse_no_bounds_guard")
    # memcheck runs and charges the runs it catches (the first public one: 192 bad reads on the H200) ...
    from kernels_lab.grading.grade import MEMCHECK_FOUND, SIMULATOR_FOUND
    assert MEMCHECK_FOUND in _test(unguarded, "correct (public)").output
    # ... and the hidden runs are charged too: by memcheck, or by the simulator's rerun of every graded run
    # where memcheck missed it (an overrun into an allocation's padding or the next array)
    hidden = _test(unguarded, "correct (hidden)")
    assert hidden.score < 3 and any(e in hidden.output for e in (MEMCHECK_FOUND, SIMULATOR_FOUND + ": IndexError"))
    racy = _grade("block_sums", "block_sums_no_barrier")
    assert _test(racy, "no race under perturbed schedules").score == 0
    assert _test(_grade("block_sums", "block_sums_correct"), "no race under perturbed schedules").status == "passed"


def test_speed_credit_needs_a_correct_output_at_the_speed_size():
    from kernels_lab.grading.cases import speed_inputs, speed_job
    from kernels_lab.grading.judge import speed_test
    from kernels_lab.grading.records import ChildRun
    ex = get_exercise("fuse_chain")
    job = {**speed_job(ex), "size": ex.spec.size(1000)}
    idx = np.array([0, 17, 999])
    want = ex.spec.reference(speed_inputs("elementwise", job["size"], 7, 1))["out"].astype(np.float32)
    times = {"student_ms": [1.0] * 9, "reference_ms": [2.0] * 9, "wrong_reps": [], "error": None, "seed": 7,
             "input_set": 1, "check_indices": idx}
    # the submission's child sends only its compiled kernel: whatever else its report says is never read
    forged = {"image": np.zeros(4, np.uint8), "entry_name": "k", "error": None, "student_ms": [1e-6] * 9}
    child = ChildRun("ok", report={"speed": forged}, speed_job=job)

    def timer(outputs, wrong=()):
        return lambda ex_, job_, exported: {**times, "outputs": {"out": outputs}, "wrong_reps": list(wrong)}
    result, board = speed_test(ex, child, 1, timer(want[idx]))
    assert result.score == 1 and "faster" in result.output and board[0]["value"] == 0.5
    wrong = want[idx].copy()
    wrong[1] += 1
    result, board = speed_test(ex, child, 1, timer(wrong))
    assert result.score == 0 and "index 17" in result.output and board == []
    result, board = speed_test(ex, child, 1, timer(want[idx], wrong=[[3, 1000]]))  # right at the end, not always
    assert result.score == 0 and board == [] and "wrong in 1 of 80 timed runs" in result.output
    assert "first: run 4, 1000 element(s) differ" in result.output


def test_no_speed_run_is_timed_when_no_run_was_right():
    # (a GPU's fuse_two_launches: its entry is no kernel; timing it said "'_TwoKernels' object has no attribute
    # 'typeof_pyval'", words about the grader's timer, not the student's kernel)
    from kernels_lab.grading.cases import speed_job
    from kernels_lab.grading.judge import CHECKS, Evidence
    from kernels_lab.grading.records import ChildRun
    ex = get_exercise("fuse_chain")
    child = ChildRun("ok", report={"speed": {"error": {"type": "AttributeError", "where": "", "message": "x"}}},
                     speed_job=speed_job(ex))
    case = {"id": 0, "role": "plain"}

    def evidence(ok):
        return Evidence(ex, None, [case], {}, {0: type("V", (), {"ok": ok})()}, speed_run=child)
    untimed = CHECKS["speed"].score(evidence(False), 1)
    assert untimed.score == 0 and untimed.output == "no correct run to time: fix correctness first"
    assert "AttributeError" in CHECKS["speed"].score(evidence(True), 1).output  # a right run: its timing is judged


def test_the_compile_gate_targets_the_course_architecture(monkeypatch):
    from kernels_lab.grading import compile_gate
    monkeypatch.delenv(compile_gate.COURSE_ARCH_ENV, raising=False)
    assert compile_gate.target_name() == "sm_75"  # the oldest GPU the course supports (Colab's T4)
    monkeypatch.setenv(compile_gate.COURSE_ARCH_ENV, "sm_90")
    assert compile_gate.target_cc() == (9, 0)
    monkeypatch.setenv(compile_gate.COURSE_ARCH_ENV, "ampere")
    with pytest.raises(ValueError, match="write the architecture as sm_XY"):
        compile_gate.target_cc()


# -- outputs with holes, and N-D outputs -------------------------------------------------------------

@pytest.mark.parametrize("exercise,name,output,first", [
    ("fused_softmax", "softmax_skips_last_cols", "out", "[0, 64]"),   # each row's last columns
    ("rnn_step", "rnn_holes_last_unit", "h", "[0, 0, 7]"),           # each batch row's last unit, every step
])
def test_holes_that_are_not_one_tail_are_graded_and_named(exercise, name, output, first):
    g = _grade(exercise, name)  # used to crash: "operands could not be broadcast together"
    assert g.outcome == "graded" and _test(g, "correct (public)").score == 0, report.text(g)
    assert f"were never written (first at index {first})" in g.summary
    assert g.summary.count("never written") == 1 and "grid too small" not in g.summary
    assert f"first {output}{first}: expected" in _test(g, "correct (public)").output


def test_the_last_writer_of_an_n_d_element_is_the_thread_that_wrote_it():
    # rnn_transposed: thread k of block 0 writes h[t, k // hidden, k % hidden] (128 threads a block)
    g = _grade("rnn_step", "rnn_transposed")
    line = next(ln for ln in _test(g, "correct (public)").output.splitlines() if "first h[" in ln)
    t, b, i = (int(v) for v in line.split("first h[")[1].split("]")[0].split(","))
    hidden = int(line.split("hidden=")[1].split(",")[0])
    k = b * hidden + i
    assert f"last written by block [{k // 128}, 0, 0] thread [{k % 128}, 0, 0]" in line, line


# -- the same traffic verdict on both back-ends (issue 33 item 5) ----------------------------------------------------

PERSISTENT_STYLES = ["persistent_correct", "persistent_for_range", "persistent_block_chunks", "persistent_vec4"]


@pytest.mark.parametrize("name", PERSISTENT_STYLES)
def test_a_correct_persistent_kernel_gets_the_same_traffic_verdict_from_the_gpu_path_and_the_simulator(name):
    # the GPU's traffic check judges the simulator child a GPU machine's grade starts (grade._simulator_runs), on
    # the same runs the simulator's own grade counts; here with a grid of more threads than elements too (as a grid
    # sized to a GPU's SMs is at these sizes): the idle threads of a grid-stride loop read nothing
    from kernels_lab import Case, Exercise, fixed
    from kernels_lab.grading import judge as J
    from kernels_lab.grading.grade import _simulator_runs
    from kernels_lab.grading.records import Run
    from kernels_lab.grading.verdict import case_verdict
    ex0 = get_exercise("persistent_chain")
    s = ex0.spec.size
    ex = Exercise(name="persistent_both", workload="elementwise", variant="persistent", lesson="03",
                  title="persistent, both back-ends", kind="kernel", entry="persistent_chain", signature=ex0.signature,
                  cases=(Case(s(255), 12), Case(s(257), 13), Case(s(70), 22, hidden=True)),
                  configs=(fixed(2, 64), fixed(3, 128)), points={"correct (public)": 3, "traffic budget": 1})
    source = submission(name)
    on_sim = _test(grade(ex, source, name, compile_gate=False, timeout_s=120), "traffic budget")
    rerun = _simulator_runs(ex, source, 120, 4 << 30)
    runs = {c["id"]: Run.from_report(r) for c, r in zip(rerun.cases, rerun.report["cases"])}
    assert all(r.bytes == 12 * c["case"].size.n for c, r in zip(rerun.cases, runs.values())), \
        [(c["case"].size, c["config"], r.bytes) for c, r in zip(rerun.cases, runs.values())]
    ev = J.Evidence(ex, J.Machine(gpu=True, simulator=False), rerun.cases, runs,
                    {c["id"]: case_verdict(ex, c, runs[c["id"]]) for c in rerun.cases}, sim_rerun=rerun)
    on_gpu = J.CHECKS["traffic budget"].score(ev, 1.0)
    assert on_sim.score == on_gpu.score == 1 and on_gpu.status == on_sim.status == "passed"
    assert on_gpu.output == on_sim.output.replace("run(s)", "run(s) (traced on the simulator)") == \
        "within the byte budget in 6 run(s) (traced on the simulator)"


# -- one judge: the lessons' own check and the grader ---------------------------------------------------

SAME_VERDICT = [("fuse_mini", n) for n in ("fuse_correct", "fuse_no_bounds_guard", "fuse_wrong_index",
                                           "fuse_global_temporary")] + [
    ("persistent_mini", "persistent_correct"), ("persistent_mini", "persistent_no_stride"),
    ("persistent_chain", "persistent_vec4"), ("persistent_chain", "persistent_block_chunks"),
    ("persistent_chain", "persistent_no_stride"),
    ("block_sums_mini", "block_sums_correct"), ("block_sums_mini", "block_sums_no_barrier"),
    ("two_launches_mini", "two_launches_correct"), ("two_launches_mini", "two_launches_three_kernels"),
    ("two_launches_mini", "two_launches_fused"), ("two_launches_mini", "two_launches_no_intermediate"),
    ("two_launches_mini", "two_launches_grid_stride"),
    ("fused_softmax", "softmax_correct"), ("fused_softmax", "softmax_two_pass_global"),
    ("fused_softmax", "softmax_no_max_subtraction"), ("fused_softmax", "softmax_skips_last_cols"),
    ("rnn_step", "rnn_correct"), ("rnn_step", "rnn_transposed"), ("rnn_step", "rnn_holes_last_unit")]


def _in_notebook(exercise, name):
    """lessons.judged on the submission's entry, defined as a notebook cell defines it."""
    import math

    from kernels_lab import lessons
    from kernels_lab.runtime import cuda
    namespace = {"cuda": cuda, "np": np, "numpy": np, "math": math}
    exec(submission(name), namespace)
    ex = MINI.get(exercise) or get_exercise(exercise)
    return lessons.judged(exercise, namespace[ex.entry])


@pytest.mark.parametrize("exercise,name", SAME_VERDICT, ids=[f"{e}-{n}" for e, n in SAME_VERDICT])
def test_the_notebook_check_and_the_grader_give_the_same_verdict(exercise, name):
    g, nb = _grade(exercise, name), _in_notebook(exercise, name)
    graded = {t.name: t for t in g.tests}
    assert nb.tests and {t.name for t in nb.tests} <= {t.name for t in g.tests if t.max_score}
    for t in nb.tests:  # every check the notebook makes, with the grader's verdict and, for correctness, its words
        if "no correct run to check this on" not in t.output:  # (the grader may have a right hidden run to check)
            assert t.status == graded[t.name].status, (t, graded[t.name])
    public = next(t for t in nb.tests if t.name == "correct (public)")
    # the same words but the submission's line (the child compiles it as <submission>) and which thread of a
    # racing overrun was first
    def same(text):
        return re.sub(r"\d+", "#", re.sub(r" line \d+", "", text))
    racy = graded.get("no race under perturbed schedules")
    if racy is None or racy.status != "failed":  # a race's values are the schedule's
        assert same(public.output) == same(graded["correct (public)"].output)
        assert public.score == graded["correct (public)"].score
    assert all(same(h) in same(g.summary) for h in nb.hints), (nb.hints, g.summary)
    # a notebook runs the public cases only: what it finds wrong costs in the grade too (not the other way round:
    # the mini views' public cases are too small to show a missing stride loop; persistent_chain's show it)
    assert nb.passed or g.score < g.max_score, (nb.explain(), report.text(g))


def test_reading_x_three_times_is_right_values_and_the_traffic_point_in_the_notebook_too():
    nb = _in_notebook("fused_softmax", "softmax_two_pass_global")
    assert [t.name for t in nb.tests if t.status != "passed"] == ["traffic budget"]
    text = nb.explain()
    assert "runs wrong" not in text and "4 of 5 points on the 4 public runs" in text
    assert "an intermediate goes through global memory (or an input is read twice)" in text


def test_what_a_lesson_teaches_a_submission_may_use():
    # every kernels_lab module a lesson imports that holds device functions may be imported by a submission
    # (and so used in the notebook's check), but the workloads and topics (the reference solutions live there)
    import importlib
    import re

    from kernels_lab.grading.child import ALLOWED_IMPORTS, _allowed
    from kernels_lab.lessons import lesson_sources
    imported = {m for p in lesson_sources().values()
                for m in re.findall(r"from (kernels_lab\.[\w.]+) import", p.read_text())}
    assert {"kernels_lab.reduce", "kernels_lab.intrinsics", "kernels_lab.runtime"} <= imported
    for module in sorted(imported):
        values = vars(importlib.import_module(module)).values()
        device = any(getattr(v, "_device", False) or getattr(getattr(v, "targetoptions", {}), "get",
                                                             lambda _: False)("device") for v in values)
        if device and not module.startswith(("kernels_lab.workloads", "kernels_lab.topics")):
            assert _allowed(module), f"{module}: a lesson teaches its device functions; ALLOWED_IMPORTS {ALLOWED_IMPORTS}"
    assert not _allowed("kernels_lab.topics.softmax.workload") and not _allowed("kernels_lab.grading.grade")
    assert not _allowed("kernels_lab.topics.layernorm.workload")


def test_a_submission_using_the_lessons_reductions_is_graded_and_a_reference_is_refused_in_both(tmp_path):
    from kernels_lab import lessons
    from kernels_lab.runtime import cuda
    source = ("from kernels_lab.reduce import block_sum\n" + submission("block_sums_correct"))
    g = grade(MINI["block_sums_mini"], source, "reduce", compile_gate=False, timeout_s=30)
    assert g.outcome == "graded" and "may not import" not in g.summary, report.text(g)
    copied = "from kernels_lab.topics.elementwise import workload as E\n\n@cuda.jit\ndef fused_chain(x, b, alpha, out):\n" \
             "    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = E.scale(E.gelu(x[i] + b[i], 0, alpha), 0, alpha)\n"
    g = grade(MINI["fuse_mini"], copied, "copied", compile_gate=False, timeout_s=30)
    assert g.outcome == "import_error" and "a submission may not import kernels_lab.topics" in g.summary
    namespace = {"cuda": cuda, "np": np}
    exec(copied, namespace)
    with pytest.raises(AssertionError, match="a submission may not import kernels_lab.topics"):
        lessons.check("fuse_mini", namespace["fused_chain"])


def test_the_notebooks_import_check_looks_at_the_globals_a_kernel_loads_not_attribute_names():
    # a lesson's notebook has `size = w.size(1031)` (a kernels_lab object) at its top level; `out.size` in the
    # student's kernel is an attribute, not that global
    from kernels_lab.grading.child import forbidden_import
    from kernels_lab.runtime import cuda
    namespace = {"cuda": cuda, "np": np, "size": get_exercise("fuse_chain").cases[0].size}
    exec(submission("fuse_correct"), namespace)
    assert forbidden_import(namespace["fused_chain"]) is None
    exec("def run(out):\n    return size\n", namespace)  # a function that does use it is refused
    assert "may not import kernels_lab.core" in forbidden_import(namespace["run"])


def test_points_name_checks_the_grader_has_when_the_exercise_is_built(tmp_path):
    from kernels_lab import Case, Exercise, grid_for
    from kernels_lab.grading.exercises import ExerciseFileError
    from kernels_lab.grading.judge import CHECKS
    w = get_exercise("fuse_chain").spec
    common = dict(workload="elementwise", variant="fused_naive", lesson="01", title="t", kind="kernel",
                  entry="fused_chain", signature="", cases=(Case(w.size(100), 1),), configs=(grid_for(32),))
    with pytest.raises(ValueError, match=re.escape("no check named 'correct (publik)'; the checks of a kernel "
                                                   "exercise: correct (public), correct (hidden)")):
        Exercise(name="typo", points={"correct (publik)": 3}, **common)
    with pytest.raises(ValueError, match="'grid independent of n' needs a case with more elements"):
        Exercise(name="small", points={"grid independent of n": 1}, **{**common, "configs": (grid_for(256),)})
    with pytest.raises(ValueError, match="is worth -1; points are a number >= 0"):
        Exercise(name="negative", points={"launch budget": -1}, **common)
    with pytest.raises(ValueError, match="no check named 'speedy'; the checks of a data exercise: rules"):
        Exercise(name="d", workload="quantize_group", variant="pdl", lesson="06", title="", kind="data", entry="f",
                 signature="", cases=(), points={"speedy": 1}, judge="kernels_lab.topics.pdl.rules:GROUP_SWITCHES")
    bad = tmp_path / "bad_exercises.py"  # an instructor's file: said at load time, naming the file
    bad.write_text("from kernels_lab import Case, Exercise, get_workload, grid_for\nw = get_workload('elementwise')\n"
                   "x = Exercise(name='x', workload='elementwise', variant='fused_naive', lesson='01', title='t', "
                   "kind='kernel', entry='f', signature='', cases=(Case(w.size(9), 1),), configs=(grid_for(32),), "
                   "points={'traffic': 1})\n")
    with pytest.raises(ExerciseFileError, match="bad_exercises.py: ValueError: exercise 'x': no check named 'traffic'"):
        load_exercise_file(bad)
    assert set(CHECKS) >= {"correct (public)", "traffic budget", "speed"}
