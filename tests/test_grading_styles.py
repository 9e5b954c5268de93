"""Student-style submissions for persistent_chain, two_launches, fused_softmax, rnn_step and group_switches, written against the documented
interface: correct ones in other styles than the lessons' (a warp per row with shuffles, a block-stride loop
with shared-memory atomics, a block per sequence, a warp per unit, a grouped kernel reduced by shuffles) get
full marks on the simulator, and wrong ones (a max started at 0, a warp's reduction taken for the block's,
batch row 0 for every row, a butterfly that misses half the warp, lane 0's shuffle total read by every lane)
lose exactly the points of the runs they get wrong, with no false hint.

Each is one confined grade (a child process): the two slowest (a warp per unit: 32 simulated threads per
unit) run only with KERNELS_LAB_SLOW_TESTS=1; benchmarks/grade_adversarial.sh grades all of them on a GPU."""

import os

import numpy as np
import pytest

from kernels_lab import lessons
from kernels_lab.topics.pdl import rules as pdl_rules
from kernels_lab.grading import report
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import grade
from kernels_lab.runtime import ON_SIMULATOR, cuda
from sources import submission

# (lesson 01's advice is a false hint where the exercise asks for separate launches)
FALSE_HINTS = ("missing barrier", "symmetric inputs", "grid too small", "missing bounds guard",
               "fuse the stages into one kernel", "keep it in a register")
SLOW = pytest.mark.skipif(os.environ.get("KERNELS_LAB_SLOW_TESTS") != "1",
                          reason="a slow simulator grade: KERNELS_LAB_SLOW_TESTS=1 runs it")
PUB, HID, LAUNCH, TRAFFIC = "correct (public)", "correct (hidden)", "launch budget", "traffic budget"
RULES, OVERLAP, RUN = pdl_rules.RULES, pdl_rules.OVERLAP, pdl_rules.RUN
STAGES, BETWEEN = "launches as asked", "one intermediate in global memory"
GRID = "grid independent of n"

# (exercise, submission, the score of each check, a phrase the feedback must hold)
SOFTMAX, RNN, PDL, TWO, PERSISTENT = "fused_softmax", "rnn_step", "group_switches", "two_launches", "persistent_chain"
VERDICTS = [
    # persistent_chain in other right styles: a for-range grid stride, a contiguous chunk per block, 16-byte vectors
    # with a grid-stride tail (12 B per element traced in every run, on both back-ends: tests/test_grading.py)
    (PERSISTENT, "persistent_for_range", {PUB: 3, HID: 3, GRID: 2, TRAFFIC: 1}, None),
    (PERSISTENT, "persistent_block_chunks", {PUB: 3, HID: 3, GRID: 2, TRAFFIC: 1}, None),
    (PERSISTENT, "persistent_vec4", {PUB: 3, HID: 3, GRID: 2, TRAFFIC: 1}, None),
    # two_launches asks for two kernels and one intermediate: other right styles get full marks; one fused launch,
    # three launches and an in-place second stage lose exactly the structure's points (and the 28 B per element
    # of three launches its traffic point)
    (TWO, "two_launches_grid_stride", {PUB: 3, HID: 3, STAGES: 2, BETWEEN: 1, TRAFFIC: 1}, None),
    (TWO, "two_launches_blocks_of_96", {PUB: 3, HID: 3, STAGES: 2, BETWEEN: 1, TRAFFIC: 1}, None),
    (TWO, "two_launches_fused", {PUB: 3, HID: 3, STAGES: 0, BETWEEN: 0, TRAFFIC: 1},
     "1 launch(es) where the exercise asks for exactly 2"),
    (TWO, "two_launches_three_kernels", {PUB: 3, HID: 3, STAGES: 0, BETWEEN: 0, TRAFFIC: 0},
     "2 arrays of yours went through global memory between launches"),
    (TWO, "two_launches_no_intermediate", {PUB: 3, HID: 3, STAGES: 2, BETWEEN: 0, TRAFFIC: 1},
     "no array of yours was written by one launch and read by a later one"),
    (SOFTMAX, "softmax_warp_per_row", {PUB: 3, HID: 3, LAUNCH: 1, TRAFFIC: 1}, None),
    (SOFTMAX, "softmax_block_stride_atomics", {PUB: 3, HID: 3, LAUNCH: 1, TRAFFIC: 1}, None),
    # row 1 sits near -120 at every size of 2 rows: (2, 67) public and (3, 129) hidden, in both configurations
    (SOFTMAX, "softmax_max_from_zero", {PUB: 1.5, HID: 1.5, LAUNCH: 1, TRAFFIC: 1}, "first out[1, 0]"),
    # 64 threads = two warps, each with its own "row max and sum": wrong there unless the row fits one warp
    (SOFTMAX, "softmax_warp_reduce_only", {PUB: 1.5, HID: 2.25, LAUNCH: 1, TRAFFIC: 1}, "config (2, 64)"),
    (SOFTMAX, "softmax_shfl_down_every_lane", {PUB: 0, HID: 0, LAUNCH: 0, TRAFFIC: 0}, "4 of 4 hidden runs wrong"),
    (RNN, "rnn_block_per_sequence", {PUB: 4, HID: 4, LAUNCH: 2}, None),
    pytest.param(RNN, "rnn_warp_per_unit", {PUB: 4, HID: 4, LAUNCH: 2}, None, marks=SLOW),
    # right only in the public case of batch 1: its batch row 1 is where it first goes wrong
    (RNN, "rnn_batch0_only", {PUB: 1.333, HID: 0, LAUNCH: 2}, "first h[0, 1, 0]"),
    # right while hidden <= 16: wrong at hidden 24 (public) and 17 (hidden)
    pytest.param(RNN, "rnn_half_warp_sum", {PUB: 2.667, HID: 2, LAUNCH: 2}, "hidden=24,batch=3,steps=2", marks=SLOW),
    (PDL, "pdl_grouped_shuffles", {RULES: 4, OVERLAP: 2, RUN: 3}, None),
    (PDL, "pdl_grouped_shfl_down_every_lane", {RULES: 4, OVERLAP: 2, RUN: 0}, "tensor 0: q["),
]

CORRECT = {"persistent_for_range", "persistent_block_chunks", "persistent_vec4", "two_launches_grid_stride", "two_launches_blocks_of_96", "softmax_warp_per_row", "softmax_block_stride_atomics", "rnn_block_per_sequence", "rnn_warp_per_unit",
           "pdl_grouped_shuffles"}


def _ids(v):
    return v.values[1] if hasattr(v, "values") else v[1]


@pytest.mark.parametrize("exercise, name, scores, phrase", VERDICTS, ids=[_ids(v) for v in VERDICTS])
def test_each_style_gets_exactly_its_verdict(exercise, name, scores, phrase):
    g = grade(get_exercise(exercise), submission(name), name, compile_gate=False, timeout_s=60)
    text = report.text(g)
    assert g.outcome == "graded", text
    got = {t.name: t.score for t in g.tests if t.name in scores}
    assert got == pytest.approx(scores, abs=1e-3), text
    assert (g.score == g.max_score) == (name in CORRECT), text
    if phrase is not None:
        assert phrase in text, text
    for hint in FALSE_HINTS:
        assert hint not in text, text
    assert "AttributeError" not in text and "WarpError" not in text  # every warp operation ran


def _entry(name, exercise):
    namespace = {"cuda": cuda, "np": np, "math": __import__("math")}
    exec(compile(submission(name), name, "exec"), namespace)
    return namespace[get_exercise(exercise).entry]


@pytest.mark.skipif(not ON_SIMULATOR, reason="the notebook's check of a simulator run")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # its 0 / 0 on the row near -120
def test_the_notebook_check_agrees_on_a_warp_per_row_and_on_a_max_from_zero():
    assert "runs correct" in lessons.check(SOFTMAX, _entry("softmax_warp_per_row", SOFTMAX))
    with pytest.raises(AssertionError, match=r"out\[1, 0\]"):
        lessons.check(SOFTMAX, _entry("softmax_max_from_zero", SOFTMAX))
