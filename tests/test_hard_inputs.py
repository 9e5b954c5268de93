"""Every graded case holds the hard inputs its workload declares (core.HardInput), and hidden cases draw
their inputs at grading time. Nothing is launched here: these check the cases the grader builds."""

import numpy as np
import pytest

from kernels_lab.core import Case, Exercise, HardInput
from kernels_lab.grading.cases import build_cases
from kernels_lab.grading.exercises import exercises

GRADED = {name: ex for name, ex in exercises().items() if ex.kind != "data"}


@pytest.mark.parametrize("name", sorted(GRADED))
def test_every_graded_case_holds_each_hard_input_its_size_can(name):
    ex = GRADED[name]
    for c in build_cases(ex, perturbed=False):
        if c["role"] == "probe":  # the symmetric probe is a different promise
            continue
        size = c["case"].size
        for hard in ex.spec.all_hard_inputs(size):
            if hard.present is not None and hard.fits(size):
                assert hard.present(size, c["inputs"]), f"{name} {size}: {hard.about}"


def test_softmax_and_rnn_declare_the_cases_their_lessons_promise():
    def about(name):
        ex = GRADED[name]
        return " | ".join(h.about for h in ex.spec.all_hard_inputs(ex.cases[0].size))
    assert "+100" in about("fused_softmax") and "-120" in about("fused_softmax")
    assert "multiple of neither 32 nor 4" in about("fused_softmax") and "non-square" in about("fused_softmax")
    assert "distinct sequences" in about("rnn_step") and "non-square" in about("rnn_step")


def test_the_underflowing_row_is_in_every_softmax_case_of_two_rows():
    """The class bug this guards: a max started at 0, not -inf, kept full marks when the -100 row was row 3
    (and, near -100, the largest elements of a row still had a float32 exp)."""
    ex = GRADED["fused_softmax"]
    seen = 0
    for c in build_cases(ex, perturbed=False):
        x = c["inputs"]["x"]
        if x.shape[0] >= 2 and c["role"] != "probe":
            assert x[1].max() < -104 and x[0].min() > 88.8  # float32 exp underflows / overflows everywhere
            seen += 1
    assert seen >= 2


def test_an_exercise_without_a_size_for_a_hard_input_is_refused():
    softmax = GRADED["fused_softmax"]
    w = softmax.spec
    with pytest.raises(ValueError, match="multiple of neither 32 nor 4"):
        w.add_exercise(Exercise(
            name="softmax_even_widths", workload="softmax", variant="fused", lesson="04", title="t", kind="kernel",
            entry="softmax_rows", signature="", configs=softmax.configs, points={"correct (public)": 1},
            cases=(Case(w.size(rows=2, cols=64), 1), Case(w.size(rows=3, cols=128), 2, hidden=True))))
    assert "softmax_even_widths" not in w.exercises


def test_a_shape_promise_is_kept_by_any_one_graded_size():
    hard = HardInput("two rows", sizes=lambda s: s.rows >= 2)
    w = GRADED["fused_softmax"].spec
    assert hard.fits(w.size(rows=2, cols=3)) and not hard.fits(w.size(rows=1, cols=3))
    assert HardInput("anything").fits(w.size(rows=1, cols=1))


def test_hidden_inputs_are_drawn_at_grading_time_public_ones_are_fixed():
    ex = GRADED["fused_softmax"]
    a, b = build_cases(ex, perturbed=False), build_cases(ex, perturbed=False)
    for ca, cb in zip(a, b):
        same = np.array_equal(ca["inputs"]["x"], cb["inputs"]["x"])
        assert same != ca["case"].hidden, (ca["case"], ca["role"])
    again = [build_cases(ex, perturbed=False, hidden=12345) for _ in range(2)]
    assert all(np.array_equal(p["inputs"]["x"], q["inputs"]["x"]) for p, q in zip(*again))


@pytest.mark.parametrize("name", sorted(GRADED))
def test_every_graded_workload_declares_what_it_promises(name):
    """A workload graded by an exercise says which inputs are hard for it (core.Workload.hard_inputs)."""
    assert GRADED[name].spec.hard_inputs, f"{GRADED[name].workload}: declare its hard_inputs"
