import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.checks import check_variant, run_variant
from kernels_lab.topics.elementwise.workload import BLOCK
from kernels_lab.runtime import cuda

W = get_workload("elementwise")
VARIANTS = list(W.variants)
# n = 1, < block, block +- 1, a prime, not a multiple of 4 (the 16-byte path has a tail)
SIZES = [1, 2, 3, 5, BLOCK - 1, BLOCK + 1, 4 * BLOCK + 3, 1031]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n", SIZES)
def test_matches_float64_reference(variant, n, rng):
    result = check_variant(W, W.variant(variant), W.size(n), seed=int(rng.integers(2**31)))
    assert result.ok, result.explain()


def test_reference_is_not_symmetric_in_its_inputs(rng):
    inputs = W.make_inputs(W.size(64), rng)
    swapped = dict(inputs, x=inputs["b"], b=inputs["x"])
    # x + b is symmetric; the inputs' distributions are not, which is what lets a check see a swap
    assert not np.allclose(inputs["x"], inputs["b"])
    assert np.allclose(W.reference(inputs)["out"], W.reference(swapped)["out"])


def test_check_catches_a_wrong_variant(rng):
    from dataclasses import replace
    fused = W.variant("fused")

    def bind_off_by_one(inputs, outputs, stream=0):
        launch = fused.bind(inputs, outputs, stream)
        return lambda: (launch(), outputs["out"].copy_to_device(np.full(outputs["out"].shape, 0.5, np.float32)))

    broken = replace(fused, name="broken", bind=bind_off_by_one)
    result = check_variant(W, broken, W.size(37), seed=1)
    assert not result.ok and "WRONG" in result.explain()


def test_poisoned_outputs_show_unwritten_elements(rng):
    from dataclasses import replace
    fused = W.variant("fused")
    lazy = replace(fused, name="lazy", bind=lambda i, o, stream=0: (lambda: None))
    result = check_variant(W, lazy, W.size(9), seed=2)
    assert not result.ok and result.mismatch.unwritten == 9


def _args(n, rng, **override):
    d = to_device(W.make_inputs(W.size(n), rng))
    out = poisoned(W.output_specs(W.size(n)))
    d.update({k: v for k, v in override.items() if k != "out"})
    if "out" in override:
        out["out"] = override["out"]
    return d, out


@pytest.mark.parametrize("variant", VARIANTS)
def test_bad_inputs_name_the_problem(variant, rng):
    bind = W.variant(variant).bind
    n = 10
    cases = {
        "dtype float64": dict(x=cuda.to_device(np.ones(n))),
        "host NumPy array": dict(b=np.ones(n, np.float32)),
        "not contiguous": dict(x=cuda.to_device(np.ones(2 * n, np.float32))[::2]),
        "mismatched lengths": dict(b=cuda.to_device(np.ones(n + 1, np.float32))),
        "not 1-D": dict(out=cuda.to_device(np.ones((2, 5), np.float32))),
        "alpha": dict(alpha="two"),
    }
    for expected, override in cases.items():
        inputs, outputs = _args(n, rng, **override)
        with pytest.raises(ArgumentError, match=expected.split()[0]):
            bind(inputs, outputs)


@pytest.mark.parametrize("variant", VARIANTS)
def test_size_zero_returns_without_launching(variant):
    from kernels_lab.instrument.launch_hook import count_launches
    empty = cuda.device_array(0, np.float32)  # a Size cannot be 0; a bound array still can
    inputs, outputs = {"x": empty, "b": empty, "alpha": np.float32(1)}, {"out": empty}
    with count_launches() as seen:
        W.variant(variant).bind(inputs, outputs)()
    assert seen == []


def test_results_do_not_depend_on_the_launch_configuration(rng):
    # The persistent kernel is correct for any grid: 1 block, 3 blocks, a grid larger than the data.
    from kernels_lab.topics.elementwise.workload import persistent_kernel
    n = 2 * BLOCK + 7
    inputs = W.make_inputs(W.size(n), rng)
    ref = W.reference(inputs)["out"]
    for grid, block in [(1, 32), (3, 64), (50, 128)]:
        d = to_device(inputs)
        out = poisoned(W.output_specs(W.size(n)))["out"]
        persistent_kernel[grid, block](d["x"], d["b"], np.float32(d["alpha"]), out)
        np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=1e-5)


def test_run_variant_returns_host_arrays(rng):
    got = run_variant(W, W.variant("fused"), W.size(7), W.make_inputs(W.size(7), rng))
    assert isinstance(got["out"], np.ndarray) and got["out"].shape == (7,)


def test_unknown_names_are_clear_errors():
    from kernels_lab.core import get_workload as get
    with pytest.raises(KeyError, match="has no variant 'nosuch'; it has: unfused"):
        W.variant("nosuch")
    with pytest.raises(KeyError, match="unknown workload 'nope'"):
        get("nope")
