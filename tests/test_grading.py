"""Submissions written as students write them, each graded to the outcome it deserves."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernels_lab.grading import report
from kernels_lab.grading.exercises import exercises, get_exercise
from kernels_lab.grading.grade import grade
from kernels_lab.grading.submission import SubmissionError, load_source

SUBMISSIONS = Path(__file__).parent / "submissions"


def _grade(exercise, name, **kw):
    kw.setdefault("compile_gate", False)
    kw.setdefault("timeout_s", 60)
    return grade(get_exercise(exercise), (SUBMISSIONS / f"{name}.py").read_text(), name, **kw)


def _test(g, name):
    return next(t for t in g.tests if t.name == name)


@pytest.mark.parametrize("exercise,name", [("fuse_chain", "fuse_correct"), ("persistent_chain", "persistent_correct"),
                                           ("block_sums", "block_sums_correct"), ("two_launches", "two_launches_correct")])
def test_correct_submissions_get_full_marks(exercise, name):
    g = _grade(exercise, name)
    assert g.outcome == "graded" and g.score == g.max_score > 0, report.text(g)
    assert "hints" not in g.summary


def test_missing_bounds_guard():
    g = _grade("fuse_chain", "fuse_no_bounds_guard")
    assert _test(g, "correct (hidden)").score == 0
    assert "missing bounds guard" in g.summary and "IndexError" in _test(g, "correct (hidden)").output


def test_wrong_indexing_that_symmetric_inputs_would_hide():
    g = _grade("fuse_chain", "fuse_wrong_index")
    assert _test(g, "correct (public)").score == 0
    assert "symmetric inputs would have hidden this" in g.summary
    assert "expected" in _test(g, "correct (public)").output and "last written by block" in _test(g, "correct (public)").output


def test_extra_launch_loses_the_launch_budget_only():
    g = _grade("fuse_chain", "fuse_two_launches")
    assert _test(g, "correct (public)").status == "passed" and _test(g, "correct (hidden)").status == "passed"
    assert _test(g, "launch budget").score == 0 and "2 kernel launch(es) where the exercise allows 1" in g.summary


def test_temporary_through_global_memory_loses_the_traffic_budget_only():
    g = _grade("fuse_chain", "fuse_global_temporary")
    assert _test(g, "correct (public)").status == "passed" and _test(g, "launch budget").status == "passed"
    assert _test(g, "traffic budget").score == 0 and "an intermediate goes through global memory" in g.summary


def test_grid_too_small_without_a_stride_loop():
    g = _grade("persistent_chain", "persistent_no_stride")
    assert _test(g, "grid independent of n").score == 0
    assert "grid too small without a stride loop" in g.summary


def test_missing_barrier_is_caught_every_time():
    for _ in range(3):  # reliably, not by luck
        g = _grade("block_sums", "block_sums_no_barrier")
        assert _test(g, "no race under perturbed schedules").score == 0
        assert "missing barrier" in g.summary


@pytest.mark.parametrize("name,outcome,phrase", [
    ("fuse_infinite_spin", "timeout", "did not finish within 8 s"),
    ("fuse_crash", "crash", "signal 11"),
    ("fuse_huge_allocation", "memory", "memory limit"),
    ("fuse_import_error", "import_error", "No module named 'numba_cuda_helpers_that_do_not_exist'"),
    ("fuse_sys_exit", "exited", "sys.exit"),
    ("fuse_flood", "flooding", "output flooding"),
])
def test_broken_submissions_become_explained_grades_within_the_limit(name, outcome, phrase):
    t0 = time.monotonic()
    g = _grade("fuse_chain", name, timeout_s=8, memory_bytes=3 << 30)
    assert time.monotonic() - t0 < 30
    assert g.outcome == outcome and g.score == 0 and phrase in g.summary, g.summary
    assert all(t.status == "failed" and phrase in t.output for t in g.tests)


def test_a_submission_cannot_write_the_results_file(tmp_path):
    results = tmp_path / "results.json"
    env = {**os.environ, "KERNELS_LAB_BACKEND": "sim"}
    out = subprocess.run([sys.executable, "-m", "kernels_lab.cli", "grade", "fuse_chain",
                          str(SUBMISSIONS / "fuse_writes_results.py"), "--gradescope", str(results)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(results.read_text())
    assert doc["score"] < 9 and doc["score"] != 100


def test_gradescope_results_have_the_documented_fields():
    g = _grade("fuse_chain", "fuse_correct")
    doc = report.gradescope(g)
    assert set(doc) == {"score", "execution_time", "output", "tests", "leaderboard"}
    for t in doc["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and t["visibility"] in ("visible", "hidden", "after_published")
    assert doc["leaderboard"][0]["name"] == "score"
    json.dumps(doc)
    crashed = report.crashed_gradescope("boom")
    assert crashed["score"] == 0 and "boom" in crashed["output"]


def test_notebook_submissions_take_only_the_marked_cells(tmp_path):
    source = (SUBMISSIONS / "fuse_correct.py").read_text()
    nb = {"cells": [{"cell_type": "code", "source": ["x = 1 / 0  # not the student's exercise cell"]},
                    {"cell_type": "code", "source": ["# EXERCISE: fuse_chain\n", source]},
                    {"cell_type": "markdown", "source": ["# EXERCISE: fuse_chain"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "lesson.ipynb"
    path.write_text(json.dumps(nb))
    assert "1 / 0" not in load_source(path, "fuse_chain")
    g = grade(get_exercise("fuse_chain"), load_source(path, "fuse_chain"), "lesson.ipynb", compile_gate=False)
    assert g.score == g.max_score
    with pytest.raises(SubmissionError, match="no code cell starts with '# EXERCISE: block_sums'"):
        load_source(path, "block_sums")


def test_compile_gate_catches_what_only_the_simulator_accepts():
    from kernels_lab.grading.grade import _compile_gate
    ex = get_exercise("fuse_chain")
    ok_status, _ = _compile_gate(ex, (SUBMISSIONS / "fuse_correct.py").read_text())
    if ok_status == "skipped":
        pytest.skip("no NVVM here")
    bad = "@cuda.jit\ndef fused_chain(x, b, alpha, out):\n    out[0] = {'a': 1}['a'] + len(str(x))\n"
    status, msg = _compile_gate(ex, bad)
    assert ok_status == "passed" and status == "failed" and "rejects" in msg


def test_a_submission_writes_nothing_into_the_graders_directory(tmp_path, monkeypatch):
    # its top level runs in the child and in the compile gate: both in directories of their own
    source = ("open('escaped.txt', 'w').write('x')\n" + (SUBMISSIONS / "fuse_correct.py").read_text())
    monkeypatch.chdir(tmp_path)
    g = grade(get_exercise("fuse_chain"), source, "escape", timeout_s=60)
    assert g.outcome == "graded" and list(tmp_path.iterdir()) == [], report.text(g)


def test_every_exercise_is_listed_and_points_add_up():
    out = subprocess.run([sys.executable, "-m", "kernels_lab.cli", "grade", "--list"], capture_output=True,
                         text=True, env={**os.environ, "KERNELS_LAB_BACKEND": "sim"}, timeout=120)
    for name, ex in exercises().items():
        assert name in out.stdout and ex.max_score > 0


def test_batch_grading_writes_a_gradebook(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("fuse_correct", "fuse_wrong_index", "fuse_import_error"):
        (folder / f"{name}.py").write_text((SUBMISSIONS / f"{name}.py").read_text())
    env = {**os.environ, "KERNELS_LAB_BACKEND": "sim"}
    out = subprocess.run([sys.executable, "-m", "kernels_lab.cli", "grade", "fuse_chain", str(folder),
                          "--csv", str(tmp_path / "book.csv"), "--workers", "2"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = (tmp_path / "book.csv").read_text().splitlines()
    assert rows[0].startswith("submission,exercise,score,max_score,outcome") and len(rows) == 4
    assert any("fuse_import_error.py" in r and "import_error" in r for r in rows)


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


def test_on_the_simulator_gpu_only_checks_say_so_and_cost_nothing():
    from kernels_lab.grading.sanitizer import sanitize
    assert sanitize(get_exercise("fuse_chain"), "", "memcheck").status == "skipped"
    g = _grade("fuse_chain", "fuse_correct")
    speed = _test(g, "speed")
    assert speed.status == "skipped" and speed.max_score == 0 and "GPU only" in speed.output
    assert [e["name"] for e in g.leaderboard] == ["score"]


@pytest.mark.gpu
def test_gpu_grading_times_against_the_reference_and_runs_the_sanitizers():
    g = _grade("fuse_chain", "fuse_correct")
    speed = _test(g, "speed")
    assert speed.max_score == 1 and "reference's time" in speed.output
    assert any(e["name"] == "time vs reference" and e["value"] > 0 for e in g.leaderboard)
    assert "memcheck (compute-sanitizer): clean" in _test(g, "correct (public)").output
    unguarded = _grade("fuse_chain", "fuse_no_bounds_guard")
    assert _test(unguarded, "correct (public)").score == 0 and "memcheck" in _test(unguarded, "correct (public)").output
    racy = _grade("block_sums", "block_sums_no_barrier")
    assert _test(racy, "no race under perturbed schedules").score == 0
    assert _test(_grade("block_sums", "block_sums_correct"), "no race under perturbed schedules").status == "passed"


def test_speed_credit_needs_a_correct_output_at_the_speed_size(monkeypatch):
    from kernels_lab.grading import grade as G
    from kernels_lab.grading.sandbox import ChildRun
    ex = get_exercise("fuse_chain")
    n = 1000
    inputs = ex.spec.make_inputs(ex.spec.size(n), np.random.default_rng(0))
    idx = np.array([0, 17, n - 1])
    want = ex.spec.reference(inputs)["out"].astype(np.float32)
    times = {"student_ms": [1.0] * 9, "reference_ms": [2.0] * 9, "error": None}
    monkeypatch.setattr(G, "ON_GPU", True)
    job = {"size": ex.spec.size(n), "inputs": inputs, "check_indices": idx}
    good = ChildRun("ok", report={"speed": {**times, "outputs": {"out": want[idx]}}}, speed_job=job)
    result, board = G._speed(ex, good, "speed", 1)
    assert result.score == 1 and "faster" in result.output and board[0]["value"] == 0.5
    wrong = want[idx].copy()
    wrong[1] += 1
    bad = ChildRun("ok", report={"speed": {**times, "outputs": {"out": wrong}}}, speed_job=job)
    result, board = G._speed(ex, bad, "speed", 1)
    assert result.score == 0 and "index 17" in result.output and board == []
