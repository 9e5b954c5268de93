"""The numbers the README quotes about layernorm's long rows (`kernels-lab bench layernorm`): our fastest registered
line past one block's reach, against torch's eager layer_norm, and its share of the copy ceiling, one pass each.
Each GPU's latest run that timed the registered `cluster` (v9), at the widths it reached: the H200's of 12-07 was
cut before 131072 columns."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, best_by_width, gpu
from .study import named_today

RUNS = (("layernorm_v9_h200.json", (32768, 65536)), ("layernorm_long_h100.json", (32768, 131072)))


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    return [(f"{gpu(name, data)}: layernorm, 256 MiB of x, {' / '.join(map(str, widths))} columns (past one "
             f"block): our fastest against torch.layer_norm, and its share of the copy ceiling",
             best_by_width(name, "long", widths, data, named_today)) for name, widths in RUNS]
