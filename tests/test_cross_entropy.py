"""Cross-entropy over rows beyond what tests/test_workloads.py checks for every workload (float64 reference at
odd sizes, traced bytes equal to the plan): k blocks per row combined by the last to arrive, launched twice
(the arrival counts reset themselves), labels that are not columns, and the real widths on a GPU."""

import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.checks import check_variant, compare
from kernels_lab.runtime import cuda
from kernels_lab.topics.softmax import cross_entropy as ce
from kernels_lab.topics.softmax import split as sp

W = get_workload("cross_entropy")


def test_a_row_in_k_slices_is_combined_by_its_last_block_launch_after_launch(rng, monkeypatch):
    # 3 slices a row; the simulator runs blocks one after another, which this kernel needs no help with:
    # no block waits, the last to arrive combines
    monkeypatch.setattr(sp, "split_shape", lambda cols: sp.SplitShape(3, sp.SLICE_THREADS, 1))
    size = W.size(rows=4, cols=301)
    assert ce.shape_for(size.cols, split=True).slices == 3
    inputs = W.make_inputs(size, rng)
    inputs["x"] *= np.float32(64)  # rows near +-6400: the row max must come from the right slice
    out = poisoned(W.output_specs(size))
    launch = W.variant("split").bind(to_device(inputs), out)
    for _ in range(2):
        launch()
        _, bad = compare("loss", out["loss"].copy_to_host(), W.reference(inputs)["loss"], W.tolerance)
        assert bad is None, bad


def test_plans_read_x_once_and_a_few_bytes_a_row():
    size = W.size(rows=4096, cols=50257)
    for name in ("fused", "split"):
        launch = W.variant(name).plan(size).launches[0]
        assert 4 * size.rows * size.cols < launch.bytes_read < 4 * size.rows * size.cols * 1.01
        assert launch.bytes_written < 64 * size.rows * sp.MAX_SLICES


@pytest.mark.parametrize("label,says", [(-1, r"labels\[1\] = -1 is not a column of x \(0 \.\. 66\)"),
                                        (67, r"labels\[1\] = 67 is not a column")])
def test_a_label_that_is_not_a_column_is_refused_naming_it(label, says, rng):
    size = W.size(rows=3, cols=67)
    inputs = W.make_inputs(size, rng)
    inputs["labels"][1] = label
    with pytest.raises(ArgumentError, match=says):
        W.variant("fused").bind(to_device(inputs), poisoned(W.output_specs(size)))
    inputs["labels"] = inputs["labels"].astype(np.int64)
    with pytest.raises(ArgumentError, match="labels: dtype int64"):
        W.variant("split").bind(to_device(inputs), poisoned(W.output_specs(size)))


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [1024, 32768, 32769, 50257, 131072])
@pytest.mark.parametrize("variant", list(W.variants))
def test_on_the_gpu_at_real_widths(variant, cols):
    result = check_variant(W, W.variant(variant), W.size(rows=67, cols=cols), seed=cols)
    assert result.ok, result.explain()


def test_labels_are_device_int32_of_one_per_row():
    size = W.size(rows=3, cols=8)
    inputs = to_device(W.make_inputs(size, np.random.default_rng(0)))
    inputs["labels"] = cuda.to_device(np.zeros(2, np.int32))
    with pytest.raises(ArgumentError, match="labels"):
        W.variant("fused").bind(inputs, poisoned(W.output_specs(size)))
