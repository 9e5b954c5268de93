"""The lessons: valid, built from notebooks/build.py, solutions run top to bottom, exercises' checks fail."""

import importlib.util
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the [test] extra (nbformat, nbclient)")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

NB = Path(__file__).parent.parent / "notebooks"
spec = importlib.util.spec_from_file_location("build", NB / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)
LESSONS = list(build.LESSONS)


def _run(path, allow_errors):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(NB)}}).execute()
    return nb


@pytest.mark.parametrize("lesson", LESSONS)
def test_committed_notebooks_are_what_build_py_builds(lesson):
    exercise, solution = build.paths(lesson)
    for path, is_solution in ((exercise, False), (solution, True)):
        committed = json.loads(path.read_text())
        built = build.build(lesson, build.LESSONS[lesson], is_solution)
        assert [c["source"] for c in committed["cells"]] == [c["source"] for c in built["cells"]], \
            f"{path.name} is stale: run python notebooks/build.py"


@pytest.mark.parametrize("lesson", LESSONS)
def test_valid_nbformat_with_the_expected_kernel_and_no_exercise_outputs(lesson):
    exercise, solution = build.paths(lesson)
    for path in (exercise, solution):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.kernelspec.name == "python3" and nb.metadata.kernels_lab.lesson == lesson
    ex = nbformat.read(exercise, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in ex.cells if c.cell_type == "code")


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_runs_top_to_bottom(lesson):
    _run(build.paths(lesson)[1], allow_errors=False)


@pytest.mark.parametrize("lesson", [name for name in LESSONS if name != "00_start"])
def test_unfilled_exercises_fail_their_checks_and_nothing_else_fails(lesson):
    nb = _run(build.paths(lesson)[0], allow_errors=True)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    checks = {i + 1 for i, c in enumerate(cells) if c.source.startswith("# EXERCISE:")}
    assert checks
    for i, c in enumerate(cells):
        errors = [o for o in c.outputs if o.output_type == "error"]
        if i in checks:
            assert errors and errors[0].ename == "AssertionError", (lesson, c.source[:80])
        else:
            assert not errors, (lesson, c.source[:80], errors and errors[0].evalue)
