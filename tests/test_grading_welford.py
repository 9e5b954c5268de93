"""welford_combine (lesson 08): the merge of two partials (count, mean, M2), graded on the simulator. Correct styles
earn every point; each bug class, made from the lesson's own solution by a named mutation, loses exactly its
check and the layernorm that uses it, with words that name its problem and no word of another's. In the
notebook's process (lessons.judged: the grader's judge on the public case, ~1 s each); one grade through the
grader's child (the hidden case too) for the solution and for one bug. The same tests run on a GPU, every
submission compiled for real: KERNELS_LAB_BACKEND=gpu python -m pytest -q tests/test_grading_welford.py"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernels_lab import capabilities, lessons
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import grade
from kernels_lab.runtime import cuda
from kernels_lab.topics.layernorm import exercise as lx
from welford_submissions import BUGS, COMPILER_ONLY, OWN_WORDS, RETURN, SOLUTION, STYLES, mutated

EX = get_exercise("welford_combine")
FULL = dict(EX.points)


def judged(source: str):
    space = {"cuda": cuda, "np": np, "math": math}
    exec(compile(source, "<submission>", "exec"), space)
    result = lessons.judged("welford_combine", space["combine"])
    return {t.name: t for t in result.tests}


def test_the_lessons_solution_earns_every_point():
    tests = judged(SOLUTION)
    assert {n: t.score for n, t in tests.items()} == FULL, {n: t.output for n, t in tests.items()}


@pytest.mark.parametrize("style", list(STYLES))
def test_other_correct_styles_earn_every_point(style):
    tests = judged(STYLES[style])
    assert {n: t.score for n, t in tests.items()} == FULL, {n: t.output for n, t in tests.items()}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # 0 / 0: the no_zero_guard bug
@pytest.mark.parametrize("name,loses,says", BUGS, ids=[b[0] for b in BUGS])
def test_each_bug_loses_exactly_its_checks(name, loses, says):
    if name in COMPILER_ONLY and not capabilities.ptx_libraries().available:
        pytest.skip("no numba compiler here (NVVM / NVRTC): the simulator runs the combine as Python")
    tests = judged(mutated(name))
    assert {n: t.score for n, t in tests.items()} == {n: 0 if n in loses else p for n, p in FULL.items()}, \
        {n: t.output for n, t in tests.items()}
    failed = "\n".join(tests[n].output for n in loses)
    assert says in failed
    everything = "\n".join(t.output for t in tests.values())
    assert not [w for w, owners in OWN_WORDS.items() if name not in owners and w in everything]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the stub divides by 0 in layernorm
def test_the_stub_fails_its_check():
    stub = next(c.stub for c in lessons.read_lesson(lessons.SOURCES / "08_layernorm.py") if c.exercise == EX.name)
    space = {"cuda": cuda, "np": np, "math": math}
    exec(compile(stub, "<stub>", "exec"), space)
    with pytest.raises(AssertionError, match="means weighted by counts"):
        lessons.check("welford_combine", space["combine"])


def test_a_kernel_instead_of_a_device_function_is_refused_with_its_reason():
    tests = judged(SOLUTION.replace("@cuda.jit(device=True)", "@cuda.jit"))
    assert all(t.score == 0 for t in tests.values())
    assert "must be a @cuda.jit(device=True) function" in tests[lx.WEIGHTS].output


def test_the_probes_catch_what_they_claim():
    """Each kind of merge the module's docstring names is among the probes, at both cases' seeds."""
    for seed in (81, 82):
        probes = lx.pairs(seed)
        a, b = probes["far"]
        assert (a[:, 1] > 9000).all() and (b[:, 1] > 9000).all()
        same = (a[:, 1] == b[:, 1]) & (a[:, 0] == b[:, 0])
        assert same.sum() == 2 and ((b[:, 1] - a[:, 1] > 0.1) & (a[:, 0] != b[:, 0])).sum() == 1
        a, b = probes["unequal"]
        both = (a[:, 0] > 0) & (b[:, 0] > 0)
        apart = both & (a[:, 0] != b[:, 0]) & (a[:, 1] != b[:, 1])
        assert (apart & (a[:, 1] < b[:, 1])).sum() >= 6 and (apart & (a[:, 1] > b[:, 1])).sum() >= 2
        assert (apart & (a[:, 0] > b[:, 0])).any() and (apart & (a[:, 0] < b[:, 0])).any()
        assert (both & (a[:, 0] == b[:, 0]) & (a[:, 1] != b[:, 1])).sum() == 1  # equal counts, means apart
        assert (both & (a[:, 0] != b[:, 0]) & (a[:, 1] == b[:, 1])).sum() == 1  # equal means
        single = (a[:, 0] + b[:, 0] == 1) & (a[:, 1] + b[:, 1] != 0)
        assert single[a[:, 0] == 0].sum() == 1 and single[b[:, 0] == 0].sum() == 1  # an empty and one element
        assert (~both).sum() == 4


@pytest.mark.parametrize("name,score", [(None, 7.0), ("no_zero_guard", 4.0)])
def test_the_grader_gives_the_same_points_in_its_child(name, score):
    g = grade(EX, SOLUTION if name is None else mutated(name), timeout_s=120)
    assert g.outcome == "graded" and g.score == score == sum(FULL.values()) - (3 if name else 0), g.summary


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # its M2 stays 0 in layernorm: 0 / 0
def test_a_merge_wrong_everywhere_is_not_blamed_on_precision():
    """Returning a unchanged is wrong near 0 as far from it: the far check says so, not 'sums of squares'."""
    tests = judged(SOLUTION.replace(RETURN, "return na, ma, qa"))
    assert tests[lx.FAR].score == 0 and "M2 is wrong near 0 too" in tests[lx.FAR].output
    assert "cancels" not in "\n".join(t.output for t in tests.values())
