"""The decode workload beyond what tests/test_workloads.py checks for every registered workload (each
variant against float64 at the odd test sizes into poisoned outputs, traced bytes equal to the plan):
the megakernel's instruction table, its counters and its bounded wait, GPU-shaped rows (warp shuffles,
two warps per row) on the simulator, PDL's switches per layer, the plans, and bad arguments."""

import warnings

import numpy as np
import pytest

from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.core import get_workload
from kernels_lab.runtime import ON_GPU, ON_SIMULATOR
from kernels_lab.topics.decode import workload as decode
from kernels_lab.topics.decode import kernels as dk

W = get_workload("decode")


@pytest.fixture(autouse=True)
def _quiet_graph():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "decode graph")
        yield


def _run(size, rng, **kwargs):
    """The megakernel once on fresh inputs into poisoned outputs: (launch, output, float64 reference)."""
    inputs = W.make_inputs(size, rng)
    out = poisoned(W.output_specs(size))
    launch = decode.bind_megakernel_with(to_device(inputs), out, **kwargs)
    launch()
    return launch, out["out"], W.reference(inputs)["out"]


@pytest.mark.parametrize("layers,tiles,blocks", [(3, 7, 2), (1, 4, 3), (5, 3, 8), (4, 10, 3)])
def test_the_table_runs_every_tile_once_and_each_block_in_layer_order(layers, tiles, blocks):
    for serial in (False, True):
        table = dk.instruction_table(layers, tiles, blocks, serial)
        assert table.shape[0] == blocks and (table[:, -1, 0] == dk.OP_END).all()
        seen = []
        for row in table:
            ops = row[row[:, 0] == dk.OP_TILE]
            assert (np.diff(ops[:, 1]) >= 0).all(), "a block would wait on a layer it runs itself later"
            assert (row[len(ops):, 0] == dk.OP_END).all()
            seen += [tuple(t) for t in ops[:, 1:]]
        assert sorted(seen) == [(l, t) for l in range(layers) for t in range(tiles)]
        # one block after another (the simulator) completes the serial table; the GPU's spreads each
        # layer over the blocks, so its first block waits on later ones
        assert dk.waits_only_on_earlier_blocks(table, tiles) == (serial or layers == 1 or blocks == 1)


@pytest.mark.skipif(ON_GPU, reason="the simulator's serial blocks")
def test_the_megakernel_counts_every_tile_and_leaves_its_counters_at_zero(rng):
    size = W.size(hidden=11, layers=3, batch=2)
    launch, out, ref = _run(size, rng)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)
    assert launch.timed_out_waiting_for() is None
    assert (launch.counters.copy_to_host() == 0).all()  # the last block out zeroed them for the next launch
    launch()  # and the next launch runs as the first did
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)


@pytest.mark.skipif(ON_GPU, reason="the simulator's serial blocks")
def test_a_wait_for_fewer_tiles_than_the_layer_has_fails(rng):
    # a table that leaves out one tile of layer 0: layer 1 waits for a count that never comes
    size = W.size(hidden=11, layers=2, batch=1)
    geo = dk.geometry(11, 1)
    table = dk.instruction_table(2, geo.tiles, 2, serial=True)
    first = table[0][table[0, :, 0] == dk.OP_TILE]
    table[0, :len(first) - 1] = first[1:]  # block 0 runs tiles 1.. of layer 0 only
    table[0, len(first) - 1] = (dk.OP_END, 0, 0)
    launch, out, ref = _run(size, rng, table=table, spin_limit=3)
    assert launch.timed_out_waiting_for() == 0
    with pytest.raises(decode.DependencyTimeout, match="gave up waiting for layer 0"):
        launch()


@pytest.mark.skipif(ON_GPU, reason="the simulator's serial blocks")
def test_a_block_waiting_on_a_later_block_gives_up_with_a_clear_error(rng):
    # the GPU's table on the simulator: block 0 waits for layer-0 tiles that block 1 runs after it.
    # The bounded wait gives up, sets the error flag, and the host refuses to go on, saying why.
    size = W.size(hidden=11, layers=3, batch=1)
    geo = dk.geometry(11, 1)
    table = dk.instruction_table(3, geo.tiles, 2, serial=False)
    launch, out, ref = _run(size, rng, table=table, spin_limit=5)
    assert not np.allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)
    with pytest.raises(decode.DependencyTimeout, match="blocks run one after another"):
        launch.raise_if_timed_out()
    with pytest.raises(decode.DependencyTimeout):
        launch()
    assert (launch.counters.copy_to_host() == 0).all()  # the blocks that gave up still reset them


@pytest.mark.skipif(not ON_SIMULATOR, reason="GPU-shaped rows on the simulator")
def test_gpu_shaped_rows_two_warps_each_on_the_simulator(rng):
    # what the H200 runs: warp shuffles within a row's warps, then shared memory across its two warps,
    # 16-byte loads with lanes past the row's end (hidden 40: 10 vectors for 64 threads)
    geo = dk.geometry(40, 2, threads=64, slot_lanes=32, row_threads=64)
    assert geo.rows == 1 and geo.vec == 4 and geo.per_thread == 1
    launch, out, ref = _run(W.size(hidden=40, layers=2, batch=2), rng, geometry=geo)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)


@pytest.mark.skipif(not ON_SIMULATOR, reason="the simulator counts the PDL instructions")
def test_graph_pdl_waits_in_every_layer_and_triggers_in_all_but_the_last(rng):
    from kernels_lab.intrinsics import SIM_CALLS
    size = W.size(hidden=9, layers=3, batch=1)
    launch = W.variant("graph_pdl").bind(to_device(W.make_inputs(size, rng)), poisoned(W.output_specs(size)))
    before = dict(SIM_CALLS)
    launch()
    tiles = dk.geometry(9, 1).tiles
    threads = dk.geometry(9, 1).threads
    assert SIM_CALLS["wait"] - before["wait"] == 3 * tiles * threads
    assert SIM_CALLS["trigger"] - before["trigger"] == 2 * tiles * threads


def test_plans_count_the_weights_once_per_layer_and_the_launches():
    size = W.size(hidden=21, layers=4, batch=3)
    plans = {v: W.variant(v).plan(size) for v in W.variants}
    assert {v: p.n_launches for v, p in plans.items()} == {
        "unfused": 12, "fused": 4, "graph": 4, "graph_pdl": 4, "persistent": 1, "megakernel": 1}
    weights = 4 * 4 * 21 * 21
    for v, p in plans.items():
        assert p.bytes_read >= weights, v
    # one-launch variants move what the per-layer ones do, plus the megakernel's table and counters
    assert plans["persistent"].bytes_total == plans["fused"].bytes_total
    assert plans["megakernel"].bytes_total > plans["persistent"].bytes_total
    # unfused, per layer: z written, read + written by the bias kernel (which reads a bias per element),
    # read by the GELU kernel: 5 batch x hidden words more, where fused reads each row's bias once
    assert plans["unfused"].bytes_total - plans["fused"].bytes_total == 4 * 4 * (5 * 3 * 21 - 21)


def test_bad_arguments_are_named(rng):
    size = W.size(hidden=6, layers=2, batch=1)
    inputs = to_device(W.make_inputs(size, rng))
    out = poisoned(W.output_specs(size))
    with pytest.raises(ArgumentError, match="W: shape"):
        W.variant("fused").bind({**inputs, "W": to_device({"W": np.zeros((2, 6, 5), np.float32)})["W"]}, out)
    with pytest.raises(ArgumentError, match="bias: shape"):
        W.variant("megakernel").bind({**inputs, "bias": to_device({"b": np.zeros((3, 6), np.float32)})["b"]}, out)
    why = W.variant("megakernel").why_not(W.size(hidden=6, layers=2, batch=dk.MAX_BATCH + 1))
    assert why is not None and f"batch={dk.MAX_BATCH + 1}" in why
    big = dk.geometry(70000, 1)
    assert "hidden=70000" in dk.too_large(big)


@pytest.mark.gpu
def test_on_a_gpu_the_megakernel_waits_for_real_and_gives_up_when_a_tile_is_missing(rng):
    # every block resident and running at once: the GPU's own table (layers spread over the blocks), and
    # the same table without one tile of layer 0, where the bounded wait must end in the error
    size = W.size(hidden=1000, layers=4, batch=3)
    launch, out, ref = _run(size, rng)
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)
    launch()  # the counters were zeroed for this second launch
    np.testing.assert_allclose(out.copy_to_host(), ref, rtol=1e-4, atol=2e-5)
    table = launch.table.copy()
    blk, slot = np.argwhere((table[:, :, 0] == dk.OP_TILE) & (table[:, :, 1] == 0))[0]
    table[blk] = np.concatenate([np.delete(table[blk], slot, axis=0), [(dk.OP_END, 0, 0)]])
    broken, _, _ = _run(size, rng, table=table, spin_limit=1000)
    from kernels_lab.runtime import cuda
    cuda.synchronize()
    assert broken.timed_out_waiting_for() is not None  # layer 0, or a later one whose waiters gave up in turn
    with pytest.raises(decode.DependencyTimeout):
        broken()


