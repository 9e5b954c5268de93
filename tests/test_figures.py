"""Every committed figure re-renders from its committed GPU results file."""

from pathlib import Path

import pytest

from kernels_lab.profile import plots, results

DATA = Path(__file__).parent.parent / "figures" / "data"
FILES = sorted(DATA.glob("*.json"))


def test_there_are_committed_gpu_results():
    assert FILES, "figures/data/ holds no results"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_results_come_from_a_gpu_and_re_render(path, tmp_path):
    doc = results.load(path)
    meta = doc["meta"]
    assert meta["backend"] == "gpu" and "H200" in meta["device"]
    assert meta["command"] and meta["date"] and meta["versions"].get("numba-cuda")
    made = plots.render(doc, tmp_path, path.stem)
    assert made and all(p.stat().st_size > 10_000 for p in made)
    committed = {p.name for p in (DATA.parent).glob(f"{path.stem}_*.png")}
    assert {p.name for p in made} <= committed, "figures/ is missing a figure of this results file"
