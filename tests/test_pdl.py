import warnings

import numpy as np
import pytest

from kernels_lab.topics.pdl import workload as pdl
from kernels_lab.runtime import ON_GPU


@pytest.mark.parametrize("g,variants", [
    (3, pdl.VARIANTS),           # a first, a middle and a last member: every PDL switch pattern
    (1, ("plain", "grouped")),   # the one-member edge (on the simulator the PDL and graph variants
])                               # run these same plain launches, so once each is enough)
def test_all_correct_variants_agree_with_the_reference(g, variants, rng):
    group = pdl.Group(pdl.make_sizes(g, rng, 1, 40))  # each tensor is one 256-thread block whatever its size
    seed = int(rng.integers(1 << 20))
    outs = {}
    for variant in variants:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the simulator's PDL fallback warns
            outs[variant] = pdl.run_once(group, variant, seed=seed)
        assert pdl.check(group, outs[variant]) is None, variant
    # identical results across variants for the same input
    for variant in variants[1:]:
        np.testing.assert_array_equal(outs[variant]["q"], outs["plain"]["q"])
        np.testing.assert_array_equal(outs[variant]["scales"], outs["plain"]["scales"])


@pytest.mark.parametrize("g,expected", [
    (1, [(True, False, False)]),
    (2, [(True, True, False), (False, False, True)]),
    (5, [(True, True, False)] + [(False, True, True)] * 3 + [(False, False, True)]),
])
def test_only_the_first_waits_all_but_the_last_trigger_later_ones_finish_in_order(g, expected):
    assert pdl.pdl_switches(g) == expected
    assert pdl.pdl_switches(g, "trigger")[-1][1] is True  # wrong: the last kernel triggers too
    assert not any(order for _, _, order in pdl.pdl_switches(g, "unordered"))


def test_launcher_builds_each_member_with_its_switches():
    group = pdl.Group([3, 4, 5])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launcher = pdl.GroupLauncher(group, "pdl")
    if ON_GPU:
        assert launcher.uses_pdl and launcher.switches == pdl.pdl_switches(3)
        assert [m.name for m in launcher.members] == ["quantize_wait_trigger", "quantize_trigger_ordered",
                                                      "quantize_ordered"]
    else:  # the simulator says so once and runs plain launches: never a crash
        assert not launcher.uses_pdl
        assert any("no Programmatic Dependent Launch" in str(w.message) for w in caught)
        assert launcher.switches == [(False, False, False)] * 3


def test_timeline_spans_are_well_formed(rng):
    group = pdl.Group([50, 60])
    out = pdl.run_once(group, "plain")
    spans = group.timeline(out["stamps"], "plain")
    assert [s["kernel"] for s in spans] == ["producer", "quantize[0]", "quantize[1]", "consumer"]
    assert spans[0]["start_us"] == 0 and all(s["end_us"] >= s["start_us"] >= 0 for s in spans)
    starts = [s["start_us"] for s in spans]
    assert starts == sorted(starts)  # plain launches run in stream order
    with pytest.raises(ValueError, match="end stamp before start"):
        pdl.spans(np.array([[5, 1]]), ["k"])


def test_bad_input_is_a_clear_error(rng):
    with pytest.raises(ValueError, match="G = 0"):
        pdl.Group([])
    with pytest.raises(ValueError, match="G = 0"):
        pdl.pdl_switches(0)
    with pytest.raises(ValueError, match="G = 0"):
        pdl.quantize([])
    with pytest.raises(ValueError, match="tensor 1: dtype float64"):
        pdl.quantize([np.ones(3, np.float32), np.ones(3)])
    with pytest.raises(ValueError, match="mismatched lists: 2 tensors but 1 outputs"):
        pdl.quantize([np.ones(3, np.float32)] * 2, outputs=[np.zeros(3, np.int8)])
    with pytest.raises(KeyError, match="unknown PDL variant"):
        pdl.GroupLauncher(pdl.Group([3]), "fast")
    x = rng.standard_normal(33).astype(np.float32)
    (q, scale), = pdl.quantize([x])
    want_q, want_scale = pdl.reference_quantize(x)
    assert scale == pytest.approx(want_scale) and np.abs(q.astype(int) - want_q).max() <= 1


@pytest.mark.gpu
def test_pdl_kernels_carry_the_instructions_and_the_attribute():
    from numba import types
    arr_f, arr_i8 = types.Array(types.float32, 1, "C"), types.Array(types.int8, 1, "C")
    sig = (arr_f, types.Array(types.int64, 1, "C"), types.int64, arr_i8, arr_f,
           types.Array(types.int64, 2, "C"), types.int64)
    from kernels_lab.runtime import cuda
    for switches in [(True, True, False), (False, False, False)]:
        kernel = pdl.QUANTIZE[switches]
        kernel.compile(sig)
        ptx = kernel.inspect_asm(sig)
        assert ("griddepcontrol.wait" in ptx) is switches[0]
        assert ("griddepcontrol.launch_dependents" in ptx) is switches[1]
    group = pdl.Group([100, 200, 300])
    group.reset(0)
    launcher = pdl.GroupLauncher(group, "pdl")
    launcher()
    cuda.synchronize()
    # the attribute the driver receives with every member's launch
    assert all(m.launch_attributes() == ["CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"]
               for m in launcher.members)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", pdl.VARIANTS)
def test_variants_are_correct_on_the_gpu_with_a_large_tensor_first(variant):
    group = pdl.Group([1 << 20, 300, 5000, 17, 1 << 16])  # the first member runs longest
    for seed in (1, 2, 3):
        assert pdl.check(group, pdl.run_once(group, variant, seed=seed)) is None


def test_members_at_once_counts_overlap_from_the_stamps_and_touching_is_not_overlap():
    from kernels_lab.topics.pdl.bench import members_at_once

    def span(kernel, start, end):
        return {"kernel": kernel, "start_us": start, "end_us": end}
    around = [span("producer", 0, 1)], [span("consumer", 50, 51)]
    in_turn = [span(f"quantize[{i}]", 1 + 5 * i, 6 + 5 * i) for i in range(4)]  # each ends as the next begins
    assert members_at_once(around[0] + in_turn + around[1]) == 1
    waves = [span(f"quantize[{i}]", 2 + 10 * (i // 3), 12 + 10 * (i // 3)) for i in range(7)]  # 3, 3, then 1
    assert members_at_once(around[0] + waves + around[1]) == 3
    # the producer and the consumer are not members, however they overlap the group
    assert members_at_once([span("producer", 0, 100)] + in_turn + [span("consumer", 0, 100)]) == 1


def test_the_g32_timeline_and_the_window_study_are_drawn_from_the_committed_runs(tmp_path):
    from kernels_lab.profile import plots, results
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "figures" / "data"
    study = results.load(data / "pdl_h200.json")
    kept = {(r["G"], r["size_class"]) for r in study["records"] if r.get("timeline")}
    assert (32, "large") in kept and {(8, c) for c in ("tiny", "small", "large")} <= kept
    window = results.load(data / "pdl_window_h200.json")
    settings = {r["max_connections"] for r in window["records"]}
    assert None in settings and len(settings) > 1  # the default and at least one setting beside it
    made = plots.render(window, tmp_path, "w")
    assert [p.name for p in made] == ["w_gantt.png"] and made[0].stat().st_size > 10_000
