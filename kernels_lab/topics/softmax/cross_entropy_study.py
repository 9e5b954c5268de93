"""Cross-entropy's study (`kernels-lab bench cross_entropy`): fused, split and cluster at vocabulary widths
against torch's F.cross_entropy (reduction="none"), eager and torch.compile'd. The problem reads x and writes a
float per row, so its ceiling is the read ceiling (profile/ceiling.py, measured in the same run), not the copy
ceiling: useful bytes are x read once (4 per element; labels and losses, 8 bytes a row, are noise). Issue 36's
target: the best variant >= 0.90 of the read ceiling from 50257 to 262144 columns.
"""

from __future__ import annotations


import numpy as np

from ...profile.anchors import torch_anchor
from ...profile.study import Group, Study
from . import cross_entropy as ce

W = ce.WORKLOAD
X_BYTES = 1 << 28  # 256 MiB of logits at every width: well past the L2
WIDTHS = (8192, 32768, 50257, 65536, 131072, 262144)
VOCAB = tuple(W.size(rows=X_BYTES // (4 * c), cols=c) for c in WIDTHS)
CHECK_ROWS = 67
BIG = 64  # the second check: logits scaled by this, blocks combining partial maxima far apart


def _cross_entropy(torch, t, size):
    return torch.nn.functional.cross_entropy(t["x"], _long(torch, t["labels"]), reduction="none")


def _long(torch, labels):
    """torch wants int64 class indices: the int32 labels converted once per tensor, outside the timed passes
    (the anchor's first pass, untimed, makes it), and kept on the tensor, so the copy dies with it (a cache keyed
    by address found a freed buffer's labels at the same address: the 12-06 H100 run, 1024 labels for 256 rows)."""
    if getattr(labels, "kl_long", None) is None:
        labels.kl_long = labels.long()
    return labels.kl_long


STUDY = Study(
    W,
    groups=(Group("vocab", VOCAB),),
    useful_bytes=lambda size: 4 * size.elements,
    check_size=lambda size: size.replace(rows=CHECK_ROWS),
    check_sizes=(W.size(rows=3, cols=67),),
    anchors=(torch_anchor("torch.cross_entropy", "F.cross_entropy(reduction='none'), eager", _cross_entropy,
                          output="loss"),
             torch_anchor("torch.compile", "F.cross_entropy through torch.compile", _cross_entropy, output="loss",
                          compiled=True)),
    rows_axis="rows",
    harder={f"x * {BIG}": lambda inputs: {**inputs, "x": inputs["x"] * np.float32(BIG)}},
    harder_for=("split", "cluster"),
    ceiling="read",
    reps=20,
    about="fused, split and cluster at vocabulary widths 8192..262144 against torch, of the read ceiling",
)
