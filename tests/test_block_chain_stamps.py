"""The stamped megakernel's summary (topics/block_chain/stamps.py) and its figure: phases from hand-made stamps
whose answer is known, then one real (simulator) pass of each megakernel through measure()."""

import json

import numpy as np
import pytest

from kernels_lab.core import get_workload
from kernels_lab.profile import results
from kernels_lab.topics.block_chain import figures, stamps

W = get_workload("block_chain")


def test_phases_and_done_times_from_known_stamps():
    # 3 passes, 2 layers, 2 tiles: tile t of layer l starts at 1000 l ns, waits 100 + 10 t, works 400, releases 50;
    # each pass shifted by its own start (the clock runs on), which the summary removes
    base = np.zeros((3, 2, 2, 4), np.int64)
    for l in range(2):
        for t in range(2):
            s = 1000 * l
            base[:, l, t] = [s, s + 100 + 10 * t, s + 500 + 10 * t, s + 550 + 10 * t]
    shifted = base + np.array([5_000, 90_000, 7_000_000])[:, None, None, None]
    got = stamps.summarise(shifted)
    assert got["phases_us"] == {"wait": [0.105, 0.105], "work": [0.4, 0.4], "release": [0.05, 0.05]}
    assert got["done_us"] == [0.56, 1.56]
    assert got["span_us"] == pytest.approx(1.56)
    # layer 1's tiles wait until 1100 and 1110 ns; their producers (tiles 0 and 1 of layer 0) computed by 510
    assert got["handoff_us"] == pytest.approx(0.595)
    assert np.allclose(got["pass_us"], base[0] / 1e3)


@pytest.mark.parametrize("marked", [False, True])
def test_a_simulator_pass_is_checked_stamped_in_order_and_drawn(marked, tmp_path):
    size = W.size(hidden=12, layers=3, group=2)
    rec = stamps.measure(size, marked, passes=2, rng=np.random.default_rng(7))
    assert rec["line"] == ("megakernel_marked" if marked else "megakernel")
    p = np.asarray(rec["pass_us"])
    assert p.shape == (3, rec["tiles"], 4)
    assert (np.diff(p, axis=2) >= 0).all(), "stamps out of order within a tile"
    assert rec["handoff_us"] >= 0
    # a tile of layer l + 1 stops waiting after the tiles of layer l it reads (t - 1, t, t + 1) finished computing
    # (not after their RELEASED stamps: a count can be seen before its adder's thread stamps the add)
    for l in range(2):
        for t in range(rec["tiles"]):
            near = [u for u in (t - 1, t, t + 1) if 0 <= u < rec["tiles"]]
            assert p[l + 1, t, 1] >= max(p[l, u, 2] for u in near) - 1e-9
    doc = {"meta": results.make_meta(command="test"), "records": [rec]}
    path = results.dump(doc["meta"], doc["records"], tmp_path / "block_chain_tiles.json")
    drawn = figures.tiles_figure(json.loads(path.read_text()), tmp_path, "block_chain")
    assert [f.name for f in drawn] == ["block_chain_tiles.png"] and drawn[0].stat().st_size > 10_000
