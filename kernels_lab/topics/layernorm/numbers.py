"""The numbers the README quotes about layernorm's long rows (layernorm_h200.json and layernorm_h100.json,
`kernels-lab bench layernorm`): our fastest registered line past one block's reach, against torch's eager
layer_norm, and its share of the copy ceiling, one pass each."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, best_by_width, gpu
from .study import named_today

RUNS = ("layernorm_h200.json", "layernorm_h100.json")
WIDTHS = (32768, 131072)


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    return [(f"{gpu(name, data)}: layernorm, 256 MiB of x, {' / '.join(map(str, WIDTHS))} columns (past one "
             f"block): our fastest against torch.layer_norm, and its share of the copy ceiling",
             best_by_width(name, "long", WIDTHS, data, named_today)) for name in RUNS]
