"""The numbers the README quotes about the decode chain (decode_h200.json, `kernels-lab bench decode`)."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, gpu, load

DECODE = "decode_h200.json"


def _at(data: Path, hidden: int) -> dict[str, dict]:
    from .figures import as_drawn  # us per pass and the share of the ceiling, as the lesson reads them
    doc = as_drawn(load(DECODE, data))
    return {r["variant"]: r for r in doc["records"]
            if (r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"]) == (hidden, 8, 1) and r["us_per_pass"]}


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    small, big = _at(data, 1024), _at(data, 4096)
    names = ("graph_pdl", "megakernel_db_p0", "torch_graph")
    return [
        (f"{gpu(DECODE, data)}: 8 dense layers, hidden 1024, batch 1, us per pass (steady state): "
         + " / ".join(names).replace("torch_graph", "torch's CUDA graph"),
         " / ".join(f"{small[n]['us_per_pass']:.1f}" for n in names) + " us"),
        (f"{gpu(DECODE, data)}: the same at hidden 4096 (weights from DRAM), share of the copy ceiling: "
         "megakernel_db_p0 / graph_pdl",
         f"{big['megakernel_db_p0']['of_ceiling']:.2f} / {big['graph_pdl']['of_ceiling']:.2f}"),
    ]
