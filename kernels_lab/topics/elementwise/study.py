"""The elementwise chain's study (`kernels-lab bench elementwise`): out = alpha * gelu(x + b) at 2^28 float32
elements, every variant against torch (eager: three kernels; torch.compile: one) and the copy ceiling; the
README's first figure and caption and lesson 01 quote it. Useful bytes: x and b read, out written (12 per
element); GBs_model counts each line's own plan (the unfused chain's intermediates too).
"""

from __future__ import annotations

import math

from ...profile.anchors import torch_anchor
from ...profile.study import Group, Study
from .workload import WORKLOAD as W

N = 1 << 28


def _chain(torch, t, size):
    return torch.nn.functional.gelu(t["x"] + t["b"], approximate="tanh") * float(t["alpha"])


STUDY = Study(
    W,
    groups=(Group("n", (W.size(N),)),),
    useful_bytes=lambda size: 12 * size.n,
    check_size=lambda size: W.size(min(size.n, (1 << 20) + 3)),  # not a multiple of the block, nor of 4
    check_sizes=(W.size(1027),),
    reps=30,
    anchors=(torch_anchor("torch", "x + b, gelu (tanh), * alpha: eager, three kernels", _chain),
             torch_anchor("torch.compile", "the same through torch.compile: one fused kernel", _chain,
                          compiled=True)),
    about=f"unfused, fused (4- and 16-byte accesses) and persistent at 2^{int(math.log2(N))} against torch",
)
