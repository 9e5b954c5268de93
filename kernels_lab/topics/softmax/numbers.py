"""The numbers the README quotes about long rows (softmax_h200.json and cross_entropy_h200.json, `kernels-lab bench
softmax` and `kernels-lab bench cross_entropy`): our fastest registered line against torch, and its share of the
ceiling, one pass each."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, gpu, records
from ...profile.study import best_registered

SOFTMAX, CROSS_ENTROPY = "softmax_h200.json", "cross_entropy_h200.json"


def _best(name: str, group: str, data: Path, cols: tuple[int, ...]) -> str:
    best = {size[1]: r for size, r in best_registered(records(name, data, "study"), group).items()}
    return " / ".join(f"{best[c]['line']} {best[c]['vs_anchor']:.2f}x, {best[c]['of_ceiling']:.2f}" for c in cols)


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    return [
        (f"{gpu(SOFTMAX, data)}: softmax, 256 MiB of x, 32768 / 131072 columns: our fastest against torch.softmax, "
         f"and its share of the copy ceiling", _best(SOFTMAX, "sweep", data, (32768, 131072))),
        (f"{gpu(CROSS_ENTROPY, data)}: cross-entropy, 256 MiB of logits, 50257 / 262144 columns: our fastest against "
         f"torch's eager cross_entropy, and its share of the read ceiling",
         _best(CROSS_ENTROPY, "vocab", data, (50257, 262144))),
    ]
