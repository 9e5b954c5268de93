"""The numbers the README quotes about the block chain (block_chain_h200.json, `kernels-lab bench block_chain`)."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, gpu, records

CHAIN = "block_chain_h200.json"


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    us = {(r["line"], r["size"]["hidden"]): r["time_ms_steady"] for r in records(CHAIN, data, "study")
          if r["group"] != "grid" and r["size"]["layers"] == 8 and r["time_ms_steady"]}
    ratios = [f"{us['graph_pdl', h] / us['megakernel_marked', h]:.2f}x, {us['torch_graph', h] / us['megakernel_marked', h]:.2f}x"
              for h in (1024, 2048)]
    return [(f"{gpu(CHAIN, data)}: block chain (a tile waits on 3 tiles, not a layer), 8 layers, hidden 1024 / 2048: "
             "megakernel_marked's speed-up over graph_pdl, and over torch's CUDA graph", " / ".join(ratios))]
