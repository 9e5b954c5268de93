"""Every registered workload gets these for free: each variant against the float64 reference at
odd sizes into poisoned outputs, its traced global bytes equal to its plan, its sizes and limits
well-formed, and each exercise's solution graded at full marks.

The parameters come from the registry: a new workload module is tested without editing this file.
"""

from contextlib import nullcontext

import pytest

from kernels_lab import all_workloads
from kernels_lab.checks import check_variant
from kernels_lab.core import Size, SizeError
from kernels_lab.grading.exercises import FROM_FILES
from kernels_lab.instrument.trace import per_array, tracing
from kernels_lab.runtime import ON_SIMULATOR

WORKLOADS = all_workloads()
VARIANTS = [(w.name, v) for w in WORKLOADS.values() for v in w.variants]
# the package's own exercises (exercise files that other tests load add theirs to the same registry)
EXERCISES = [(w.name, e) for w in WORKLOADS.values() for e in w.exercises if e not in FROM_FILES]


def _runnable(w, variant):
    return [s for s in w.test_sizes() if w.variant(variant).why_not(s) is None]


TRACED_SIZES = 2  # the first sizes each variant's traced bytes are held to its plan at (on the simulator)


@pytest.mark.parametrize("workload,variant", VARIANTS)
def test_every_variant_matches_the_float64_reference_and_moves_its_planned_bytes(workload, variant):
    """Each variant against float64 at every odd test size, into poisoned outputs; on the simulator the first
    TRACED_SIZES of those runs are traced, and the global bytes each kernel really moved must equal its plan
    (the check that keeps plans honest). One simulation per size serves both checks."""
    w = WORKLOADS[workload]
    sizes = _runnable(w, variant)
    if variant == "cluster" and ON_SIMULATOR:  # its largest test size is 8-block clusters a row, 1-2 min of
        sizes = sizes[:-1]                      # simulated threads: tests/test_clusters.py runs those layouts
    assert sizes, f"{workload}/{variant} runs none of the workload's test sizes"
    for k, size in enumerate(sizes):
        traced = ON_SIMULATOR and k < TRACED_SIZES
        with tracing() if traced else nullcontext() as trace:
            result = check_variant(w, w.variant(variant), size, seed=1000 + k)
        assert result.ok, result.explain()
        if traced:
            _assert_traffic_is_the_plan(trace, w.variant(variant), size)


def _assert_traffic_is_the_plan(trace, v, size) -> None:
    plan = v.plan(size)
    assert len(trace.launches) == plan.n_launches, f"{v.name} at {size}"
    for traced, planned in zip(trace.launches, plan.launches):
        assert traced.kernel == planned.kernel
        assert (traced.bytes_read, traced.bytes_written) == (planned.bytes_read, planned.bytes_written), \
            f"{v.name} at {size}, {planned.kernel}: traced {per_array(trace)}"


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_axes_defaults_and_size_parsing(workload):
    w = WORKLOADS[workload]
    for on_gpu in (False, True):
        size = w.default_size(on_gpu)
        assert isinstance(size, Size) and tuple(size) == w.axis_names
        assert w.parse_size(str(size)) == size  # the CLI's form reads back
    with pytest.raises(SizeError, match="has no axis 'nosuch'"):
        w.parse_size("nosuch=3")
    with pytest.raises(SizeError, match="at least 1"):
        w.parse_size(f"{w.axis_names[0]}=0")
    axis, swept = w.parse_sweep(f"{w.axis_names[-1]}=2^3..2^5")
    assert axis == w.axis_names[-1] and [s[axis] for s in swept] == [8, 16, 32]


@pytest.mark.parametrize("workload,exercise", EXERCISES)
def test_each_exercise_budget_comes_from_its_variant_plan(workload, exercise):
    w = WORKLOADS[workload]
    ex = w.exercises[exercise]
    size = ex.cases[0].size
    plan = w.variant(ex.variant).plan(size)
    if ex.max_launches is None:
        assert ex.launch_budget(size) == plan.n_launches
    if ex.max_bytes is None:
        assert ex.byte_budget(size) == plan.bytes_total
    else:
        assert ex.budget_note, f"{exercise} overrides its byte budget: budget_note must say why"
    assert ex.arguments(size), "the grader needs the argument order"


@pytest.mark.parametrize("workload,exercise", EXERCISES)
def test_each_exercise_gives_its_lesson_solution_full_marks(workload, exercise):
    # The solution is written once, in its lesson (notebooks/lessons/); graded here on a small view of
    # the exercise (a public and a hidden case, one launch configuration, one perturbed schedule) to
    # keep the suite fast: the full exercises are graded in the grading tests and on the GPU.
    import dataclasses

    from kernels_lab.grading.grade import grade
    from kernels_lab.lessons import solution_source
    ex = WORKLOADS[workload].exercises[exercise]
    public = [c for c in ex.cases if not c.hidden and not c.probe][:1]
    hidden = [c for c in ex.cases if c.hidden][:1]
    small = dataclasses.replace(ex, cases=tuple(public + hidden), configs=ex.configs[:1],
                                race_seeds=ex.race_seeds[:1], speed=None)
    g = grade(small, solution_source(exercise), f"lesson solution of {exercise}", compile_gate=False, timeout_s=120)
    assert g.outcome == "graded" and g.score == g.max_score > 0, g.summary
