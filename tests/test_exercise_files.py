"""An instructor writes a new exercise for an existing workload in a few lines, outside the package."""

import os
import subprocess
import sys

import pytest

from kernels_lab.grading.exercises import ExerciseFileError, load_exercise_file
from sources import write_submission

MY_EXERCISE = '''
from kernels_lab import Case, Exercise, get_workload, grid_for

w = get_workload("elementwise")
wide_blocks = Exercise(
    name="fuse_chain_wide", workload="elementwise", variant="fused_naive", lesson="01",
    title="The fused chain, launched with 512-thread blocks", kind="kernel", entry="fused_chain",
    signature="@cuda.jit\\ndef fused_chain(x, b, alpha, out)",
    cases=(Case(w.size(1000), 1), Case(w.size(513), 2, hidden=True)),
    configs=(grid_for(512),), points={"correct (public)": 2, "correct (hidden)": 2, "traffic budget": 1})
'''


def test_an_exercise_file_adds_a_gradable_exercise(tmp_path):
    path = tmp_path / "my_exercises.py"
    path.write_text(MY_EXERCISE)
    env = {**os.environ, "KERNELS_LAB_BACKEND": "sim"}
    cli = [sys.executable, "-m", "kernels_lab.cli", "grade", "--exercises", str(path)]
    listed = subprocess.run(cli + ["--list"], capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0 and "fuse_chain_wide" in listed.stdout and "5 points" in listed.stdout
    graded = subprocess.run(cli + ["fuse_chain_wide", str(write_submission("fuse_correct", tmp_path))],
                            capture_output=True, text=True, env=env, timeout=300)
    assert graded.returncode == 0, graded.stderr
    assert "fuse_chain_wide - fuse_correct.py: 5 / 5" in graded.stdout


@pytest.mark.parametrize("text,why", [
    ("x = 1\n", "defines no Exercise"),
    ("raise RuntimeError('oops')\n", "RuntimeError: oops"),
    (MY_EXERCISE.replace('workload="elementwise", variant="fused_naive"', 'workload="elementwise", variant="nosuch"'),
     "has no variant 'nosuch'"),
])
def test_a_bad_exercise_file_is_a_clear_error(tmp_path, text, why):
    path = tmp_path / "bad.py"
    path.write_text(text)
    with pytest.raises(ExerciseFileError, match=why):
        load_exercise_file(path)
