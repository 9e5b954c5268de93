"""The numbers the README quotes about the block chain (block_chain_h200.json, `kernels-lab bench block_chain`)."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, gpu, records

CHAIN = "block_chain_h200.json"


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    from .figures import at, split_grid
    main, _ = split_grid(records(CHAIN, data, "study"))

    def over(ref: str, hidden: int) -> float:  # the speed-up over `ref`, 8 layers, steady state
        return at(main, hidden, 8, ref)["us_per_pass"] / at(main, hidden, 8, "megakernel_marked")["us_per_pass"]
    ratios = [f"{over('graph_pdl', h):.2f}x, {over('torch_graph', h):.2f}x" for h in (1024, 2048)]
    return [(f"{gpu(CHAIN, data)}: block chain (a tile waits on 3 tiles, not a layer), 8 layers, hidden 1024 / 2048: "
             "megakernel_marked's speed-up over graph_pdl, and over torch's CUDA graph", " / ".join(ratios))]
