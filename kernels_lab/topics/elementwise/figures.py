"""What the elementwise chain's study draws (study.py, `kernels-lab bench elementwise`: record kind study):
STEM_bytes.png, the harness's bars of bytes and time per variant (profile/plots.variant_bars), as the
committed demo run's records (kind-less variant measurements) draw; benchmarks/render_figures.py finds it in
FIGURES."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...profile.plots import variant_bars
from ...profile.study import as_before


def as_drawn(doc: dict[str, Any]) -> dict[str, Any]:
    """A results file in the shape the harness's variant figures, numbers.py and lesson 01 read: the study's timed
    lines (not its anchors, which have no plan) as variant measurements, "GBs" their planned bytes' rate; a file
    of variant measurements unchanged."""
    before = as_before(doc, gbs="GBs_model")
    if before is doc:
        return doc
    records = [{k: v for k, v in r.items() if k != "kind"} for r in before["records"] if r["pattern"] != "anchor"]
    return {**doc, "records": records}


def bytes_figure(doc: dict[str, Any], out: Path, stem: str) -> list[Path]:
    doc = as_drawn(doc)
    return [variant_bars(doc["records"], doc["meta"], Path(out) / f"{stem}_bytes.png")]


FIGURES = {"study:elementwise": bytes_figure}
