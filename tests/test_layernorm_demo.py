"""`kernels-lab demo layernorm` on the simulator: every variant checked and traced at a small size, its narration,
its results file and figure, then the committed H200 numbers of the topic's study under their heading (what it
prints from them: tests/test_demos.py)."""

from __future__ import annotations

import json

from kernels_lab.cli import main
from kernels_lab.core import get_workload
from kernels_lab.demos import demos


def test_the_demo_runs_here_and_shows_the_committed_numbers(tmp_path, capsys):
    assert "layernorm" in demos()
    rc = main(["demo", "layernorm", "--size", "rows=3,cols=45", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "simulator" in out and "3 launches" in out and "the bytes above were traced" in out
    written = json.loads((tmp_path / "layernorm.json").read_text())
    assert {r["variant"] for r in written["records"]} == set(get_workload("layernorm").variants)
    assert all(r["bytes_traced"] == r["bytes_model"] for r in written["records"])
    assert "figures/data/layernorm_h100.json (committed)" in out

