"""The numbers the README quotes about long rows (softmax_h200.json and cross_entropy_h200.json, `kernels-lab bench
softmax` and `kernels-lab bench cross_entropy`): our fastest registered line against torch, and its share of the
ceiling, one pass each."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, best_by_width, gpu

SOFTMAX, CROSS_ENTROPY = "softmax_h200.json", "cross_entropy_h200.json"


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    return [
        (f"{gpu(SOFTMAX, data)}: softmax, 256 MiB of x, 32768 / 131072 columns: our fastest against torch.softmax, "
         f"and its share of the copy ceiling", best_by_width(SOFTMAX, "sweep", (32768, 131072), data)),
        (f"{gpu(CROSS_ENTROPY, data)}: cross-entropy, 256 MiB of logits, 50257 / 262144 columns: our fastest against "
         f"torch's eager cross_entropy, and its share of the read ceiling",
         best_by_width(CROSS_ENTROPY, "vocab", (50257, 262144), data)),
    ]
