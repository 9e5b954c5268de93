"""cluster_combine (lesson 04): student-style combines of a cluster's (max, sum) pairs graded on the simulator,
each with its exact points per check and the words that name its problem; the PTX rule a GPU adds for the
barrier after the reads, on the PTX numba's compiler makes of the probe kernel for sm_90.

A combine takes ~9 s to judge on the simulator (fifteen launches, twelve of them slowed on purpose): the default run
keeps two right styles and the two barrier bugs, KERNELS_LAB_SLOW_TESTS=1 the rest."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels_lab import capabilities, lessons
from kernels_lab.grading import report
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.grading.grade import grade
from kernels_lab.runtime import ON_SIMULATOR, cuda
from kernels_lab.topics.softmax import cluster_exercise as ce
from sources import submission

ROOT = Path(__file__).resolve().parents[1]
SLOW = pytest.mark.skipif(os.environ.get("KERNELS_LAB_SLOW_TESTS") != "1",
                          reason="a simulator grade: KERNELS_LAB_SLOW_TESTS=1 runs it")
sim_only = pytest.mark.skipif(not ON_SIMULATOR, reason="simulator grades (the GPU's: python3 -m kernels_lab.topics.softmax.cluster_recheck)")
FULL = {ce.COMBINE: 4, ce.WAITS: 3, ce.HOLDS: 3}

# (submission, the checks it loses, a phrase its feedback must hold)
VERDICTS = [
    ("cluster_correct", {}, "right against float64 in every thread of every block"),
    ("cluster_no_barrier_before", {ce.WAITS: 0}, "a pair was read before its block had written it"),
    ("cluster_no_barrier_after", {ce.HOLDS: 0}, "a block overwrote (or left) its pair while another block"),
    pytest.param("cluster_arrive_wait_from_own_rank", {}, "the same outcome as with the probe's barriers", marks=SLOW),
    pytest.param("cluster_thread0_broadcast", {}, "the same outcome as with the probe's barriers", marks=SLOW),
    pytest.param("cluster_no_rescale", {ce.COMBINE: 0}, "the sums were added without rescaling", marks=SLOW),
    pytest.param("cluster_own_rank_only", {ce.COMBINE: 0}, "every block returned its own pair", marks=SLOW),
    pytest.param("cluster_ranks_from_one", {ce.COMBINE: 0}, "rank 0 was left out", marks=SLOW),
    pytest.param("cluster_ranks_past_end", {ce.COMBINE: 0}, "DSMEM access to block rank 2 of a cluster of 2",
                 marks=SLOW),
    # rank 0 read early: only the run where rank 0 writes last sees it; the last rank read after the closing barrier:
    # only the run where the last rank reads first (and returns first) sees it
    pytest.param("cluster_first_pair_before_barrier", {ce.WAITS: 0}, "rank 0's 400 ms late", marks=SLOW),
    pytest.param("cluster_last_rank_after_barrier", {ce.HOLDS: 0}, "delayed (k - 1 - r) x 20 ms", marks=SLOW),
    # the simulator would run it as Python; the probe is compiled by numba first, as a GPU's launch compiles it
    pytest.param("cluster_python_list", {ce.COMBINE: 0, ce.WAITS: 0, ce.HOLDS: 0}, "numba's compiler rejects the "
                 "combine", marks=pytest.mark.skipif(not capabilities.ptx_libraries().available,
                                                     reason="no numba compiler here (NVVM / NVRTC)")),
]


def _entry(name: str):
    """cluster_combine, defined as a notebook cell defines it."""
    namespace = {"cuda": cuda, "np": np, "math": math}
    exec(compile(submission(name), name, "exec"), namespace)
    return namespace["cluster_combine"]


def _ids(v):
    return v.values[0] if hasattr(v, "values") else v[0]


@sim_only
@pytest.mark.parametrize("name, lost, phrase", VERDICTS, ids=[_ids(v) for v in VERDICTS])
def test_each_combine_loses_exactly_its_points(name, lost, phrase):
    nb = lessons.judged("cluster_combine", _entry(name))
    text = "\n".join(f"{t.name}: {t.score}/{t.max_score} {t.output}" for t in nb.tests)
    assert {t.name: t.score for t in nb.tests} == pytest.approx({**FULL, **lost}), text
    assert sum(t.max_score for t in nb.tests) == 10, text
    assert phrase in text, text
    for t in nb.tests:  # a check that passes says what it saw; one that fails, the problem, never a pass's words
        assert (t.status == "passed") == (t.name not in lost), text
        assert t.output.startswith(("the same outcome", "(M, D) right")) == (t.name not in lost), text


@sim_only
def test_the_grader_gives_the_notebooks_verdict_in_its_child():
    g = grade(get_exercise("cluster_combine"), submission("cluster_no_barrier_after"), "cluster_no_barrier_after",
              compile_gate=False, timeout_s=120)
    text = report.text(g)
    assert g.outcome == "graded" and g.max_score == 10, text
    assert {t.name: t.score for t in g.tests} == pytest.approx({**FULL, ce.HOLDS: 0}), text


def test_a_host_function_and_kernels_labs_own_are_refused():
    with pytest.raises(AssertionError, match="must be a @cuda.jit.device=True. function"):
        lessons.check("cluster_combine", lambda pair_m, pair_d: (0, 0))
    from kernels_lab.reduce import block_md
    with pytest.raises(AssertionError, match="kernels_lab's own"):
        lessons.check("cluster_combine", block_md)


PTX_CHILD = r"""
import math, sys
import numpy as np
from numba import types
from kernels_lab.capabilities import compile_ptx
from kernels_lab.runtime import cuda
from kernels_lab.topics.softmax import cluster_exercise as ce
ns = {"cuda": cuda, "np": np, "math": math}
exec(open(sys.argv[1]).read(), ns)
f32 = types.float32[::1]
print(compile_ptx(ce._probe(ns["cluster_combine"], True, False).py_func, (f32, f32, f32, f32, types.int64[::1]),
                  cc=(9, 0)))
"""


@pytest.mark.parametrize("name, problem", [("cluster_correct", None), ("cluster_thread0_broadcast", None),
                                           ("cluster_no_barrier_after", "no barrier.cluster.wait follows")])
def test_the_ptx_rule_a_gpu_adds_for_the_barrier_after_the_reads(tmp_path, name, problem):
    libs = capabilities.ptx_libraries()
    if not libs.available:
        pytest.skip(f"no PTX compiler here: {libs.detail}")
    path = tmp_path / f"{name}.py"
    path.write_text(submission(name))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(KERNELS_LAB_BACKEND="ptx", PYTHONPATH=str(ROOT))
    ptx = subprocess.run([sys.executable, "-c", PTX_CHILD, str(path)], check=True, env=env, timeout=300,
                         capture_output=True, text=True).stdout
    assert "ld.shared::cluster" in ptx
    found = ce.holds_in_ptx(ptx)
    assert (found is None) if problem is None else (problem in found), found
