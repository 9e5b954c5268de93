"""The lessons: one Jupytext source each (notebooks/lessons/), and the committed notebooks are what
notebooks/build.py makes of them; valid notebooks, exercise notebooks without outputs; each lesson runs top to
bottom with its exercises unfilled (each check fails, nothing else does) and then solved (each check passes)."""

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the [test] extra (nbformat, nbclient)")
NotebookClient = pytest.importorskip("nbclient").NotebookClient
jupytext = pytest.importorskip("jupytext", reason="the lessons' sources are Jupytext scripts (the [test] extra)")

from kernels_lab import lessons  # noqa: E402
from kernels_lab.grading.submission import load_source  # noqa: E402
from kernels_lab.runtime import cuda  # noqa: E402  (a module global: the simulator swaps it inside kernels)

NB = Path(__file__).parent.parent / "notebooks"
spec = importlib.util.spec_from_file_location("build", NB / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)
LESSONS = list(build.sources())
WITH_EXERCISES = [name for name in LESSONS
                  if any(c.kind == "exercise" for c in lessons.read_lesson(build.sources()[name]))]


def test_every_lesson_has_a_source_and_every_notebook_a_lesson():
    assert LESSONS and LESSONS == sorted(LESSONS)
    made = {p.name for name in LESSONS for p in build.paths(name)}
    assert {p.name for p in NB.glob("*.ipynb")} == made, "a notebook without a source in notebooks/lessons/"


@pytest.mark.parametrize("lesson", LESSONS)
def test_source_keeps_its_form_through_jupytext(lesson):
    # what someone edits in Jupyter through Jupytext comes back as it was: the percent form is canonical
    text = build.sources()[lesson].read_text()
    assert jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="py:percent") == text


@pytest.mark.parametrize("lesson", LESSONS)
def test_committed_notebooks_are_what_the_source_builds(lesson):
    assert not build.stale(lesson), f"stale: run python notebooks/build.py ({lesson})"


@pytest.mark.parametrize("lesson", LESSONS)
def test_valid_nbformat_with_the_expected_kernel_and_no_exercise_outputs(lesson):
    exercise, solution = build.paths(lesson)
    for path in (exercise, solution):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.kernelspec.name == "python3" and nb.metadata.kernels_lab.lesson == lesson
    ex = nbformat.read(exercise, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in ex.cells if c.cell_type == "code")


@pytest.mark.parametrize("lesson", WITH_EXERCISES)
def test_each_solution_is_written_once_and_is_what_the_grader_takes(lesson):
    exercise, solution = build.paths(lesson)
    for c in lessons.read_lesson(build.sources()[lesson]):
        if c.kind == "exercise":
            assert lessons.solution_source(c.exercise) == c.source
            assert load_source(solution, c.exercise) == c.source  # the cell `kernels-lab grade` takes
            assert load_source(exercise, c.exercise) == c.stub and c.stub.startswith(f"# EXERCISE: {c.exercise}\n")


@pytest.mark.parametrize("broken,says", [
    ('# %% tags=["stub"]\nx = ...\n', "stub without its exercise cell"),
    ('# %% tags=["stub"]\nx = ...\n\n# %%\nprint(x)\n', "must be followed by its exercise cell"),
    ('# %% tags=["exercise"]\n# EXERCISE: guess\nx = 1\n', "has no stub cell before it"),
    ('# %% tags=["stub"]\nx = ...\n\n# %% tags=["exercise"]\nx = 1\n', "starts with '# EXERCISE: <name>'"),
    ('# %%\n# EXERCISE: guess\nx = 1\n', "must be tagged exercise"),
])
def test_a_source_that_breaks_the_convention_is_refused_with_where(tmp_path, broken, says):
    path = tmp_path / "07_broken.py"
    path.write_text(broken)
    with pytest.raises(lessons.LessonSourceError, match="07_broken.py") as e:
        lessons.read_lesson(path)
    assert says in str(e.value)


def test_solution_source_names_the_exercises_it_knows():
    with pytest.raises(KeyError, match="fuse_chain"):
        lessons.solution_source("no_such_exercise")


def test_pdl_rules_pass_exactly_the_three_rules_and_name_the_member_that_reads_too_early():
    import itertools
    from kernels_lab.topics.pdl import rules as pdl_rules
    from kernels_lab.topics.pdl.workload import pdl_switches
    for g in (1, 2, 3, 4):
        passing = [list(sw) for sw in itertools.product(itertools.product((False, True), repeat=3), repeat=g)
                   if not pdl_rules.findings(list(sw))]
        # the three rules; the first member's wait at its end changes nothing (it already waited)
        assert passing == [pdl_switches(g), [(True, g > 1, True)] + pdl_switches(g)[1:]][:len(passing)]
        assert len(passing) == 2
    two_rules = pdl_rules.findings(pdl_switches(3, "unordered"))
    assert [(f.kind, f.member) for f in two_rules] == [("too early", 1), ("too early", 2)]
    assert "may read tensor 0 while quantize[0] still writes it" in two_rules[0].message
    last_triggers = pdl_rules.findings(pdl_switches(3, "trigger"))
    assert [(f.kind, f.member) for f in last_triggers] == [("too early", 2)]
    serial = pdl_rules.findings([(True, True, False), (True, False, False), (False, False, True)])
    assert [(f.kind, f.member) for f in serial] == [("serial", 1), ("serial", 1)]
    with pytest.raises(AssertionError, match=r"(?s)G = 3: 1 way\(s\) to read too early.*quantize\[0\] does not wait"):
        pdl_rules.check_switches(lambda g: [(False, False, False)] * g)
    with pytest.raises(AssertionError, match="return a list"):
        pdl_rules.check_switches(lambda g: None)


def test_lesson_06_checks_accept_ties_and_name_the_unwritten_element():
    from kernels_lab.topics.pdl import rules as pdl_rules
    assert "a tie" in pdl_rules.check_fastest({"tiny": "grouped", "large": "graph_pdl"})
    assert "large: grouped, right" in pdl_rules.check_fastest({"tiny": "grouped", "large": "grouped"})
    with pytest.raises(AssertionError, match="tiny: graph is not the fastest"):
        pdl_rules.check_fastest({"tiny": "graph", "large": "grouped"})

    @cuda.jit
    def no_stride(q, offsets, scales, out):
        t = cuda.blockIdx.x
        i = offsets[t] + cuda.threadIdx.x
        if i < offsets[t + 1]:
            out[i] = q[i] * scales[t]
    with pytest.raises(AssertionError, match="is never written.*steps of cuda.blockDim.x"):
        pdl_rules.check_grouped(no_stride)


def _errors(cell):
    return [o for o in cell.outputs if o.output_type == "error"]


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_lesson_runs_unfilled_then_solved_in_one_kernel(lesson):
    """The exercise notebook top to bottom: each unfilled exercise's check (the cell after it) fails with an
    AssertionError and nothing else fails. Then, in the same kernel, each exercise's solution cell and its check
    again: they pass. The solution notebook is the exercise notebook with the solution cells in place of the
    stubs (asserted), and a cell other than a check that read what an exercise defines would fail in the unfilled
    run, so this is the solution notebook's run too, without running a lesson's other cells a second time (they
    are most of these tests' time). No output anywhere is a warning."""
    exercise, solution = (nbformat.read(p, as_version=4) for p in build.paths(lesson))
    marked = [i for i, c in enumerate(exercise.cells) if "exercise" in c.metadata.get("tags", [])]
    same = [(c.cell_type, c.source) for i, c in enumerate(exercise.cells) if i not in marked]
    assert same == [(c.cell_type, c.source) for i, c in enumerate(solution.cells) if i not in marked]
    checks = set()
    for i in marked:
        check = next(j for j in range(i + 1, len(exercise.cells)) if exercise.cells[j].cell_type == "code")
        checks.add(check)
        for cell in (solution.cells[i], exercise.cells[check]):  # appended: the solution, then its check
            exercise.cells.append(nbformat.v4.new_code_cell(cell.source))
    NotebookClient(exercise, timeout=240, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(NB)}}).execute()
    for i, c in enumerate(exercise.cells):
        if c.cell_type != "code":
            continue
        if i in checks:
            errors = _errors(c)
            assert errors and errors[0].ename == "AssertionError", (lesson, "unfilled", c.source[:80])
        else:
            assert not _errors(c), (lesson, c.source[:80], _errors(c)[0].evalue)
        noise = [o.text for o in c.outputs
                 if o.output_type == "stream" and o.name == "stderr" and "Warning" in o.text]
        assert not noise, f"{lesson}: warnings in the outputs: {noise[0][:300]}"


def test_the_notebook_check_judges_what_the_grader_takes_from_the_notebook(tmp_path):
    """Issue 33 item 7: a name an earlier cell defines (the grader runs the marked cell alone), and a comment
    above the marker (both accept it)."""
    from IPython.core.interactiveshell import InteractiveShell
    solution = lessons.solution_source("fuse_chain")
    helper = "@cuda.jit(device=True)\ndef scaled(v):\n    return v\n"
    borrowing = solution.replace("alpha * (", "alpha * scaled(", 1)
    assert borrowing != solution
    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from kernels_lab import lessons\nfrom kernels_lab.runtime import cuda\nimport math, numpy as np",
                       store_history=True)
        # the lesson's own solution, with a comment above the marker: the check passes, the grader takes the cell
        commented = "# my second try\n\n" + solution
        assert shell.run_cell(commented, store_history=True).success
        said = shell.run_cell('lessons.check("fuse_chain", fused_chain)', store_history=True)
        assert said.success and "runs correct" in said.result, said.error_in_exec
        nb = tmp_path / "mine.ipynb"
        nb.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(commented)])))
        assert load_source(nb, "fuse_chain") == commented
        # a helper from an earlier cell: the check fails naming it, as the grader would fail the cell alone
        shell.run_cell(helper, store_history=True)
        assert shell.run_cell(borrowing, store_history=True).success
        failed = shell.run_cell('lessons.check("fuse_chain", fused_chain)', store_history=True)
        assert isinstance(failed.error_in_exec, AssertionError)
        assert str(failed.error_in_exec) == (
            "fuse_chain: the grader runs the '# EXERCISE: fuse_chain' cell alone, and it uses scaled, defined in an "
            "earlier cell: there scaled would be undefined (0 points); define or import scaled inside the exercise "
            "cell")
    finally:
        InteractiveShell.clear_instance()
