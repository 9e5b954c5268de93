"""The block chain's study (`kernels-lab bench block_chain`): every variant at hidden 1024 and 2048, 8
layers, groups of 32, against torch (eager; torch.compile). Its GPU numbers with torch's CUDA graph beside
them come from bench.py (`python -m kernels_lab.topics.block_chain.bench OUT`), the issue's targets' run.
Useful bytes: the band's weights (edges included: the problem's input), the biases, x in and out.
"""

from __future__ import annotations

from typing import Any

from ...core import Size
from ...profile.anchors import torch_anchor
from ...profile.study import AnchorUnavailable, Group, Study
from .workload import WORKLOAD as W


def torch_chain(torch, t: dict[str, Any], size: Size):
    """The chain in torch: per layer x_l padded by a group each side, cut into each tile's 3 groups (unfold: a
    view), one batched matrix-vector product over the tiles (bmm), + bias, tanh-GELU. Needs hidden a multiple of
    the group (the tiles' bmm reshapes W); float32 throughout (TF32 off)."""
    L, H, G = size.layers, size.hidden, size.group
    if H % G:
        raise AnchorUnavailable(f"torch's chain reshapes W into whole tiles: hidden={H} is not a multiple of group={G}")
    torch.backends.cuda.matmul.allow_tf32 = False
    F = torch.nn.functional
    T = H // G
    Wt = t["W"].view(L, T, G, 3 * G)
    h = t["x"]
    for l in range(L):
        win = F.pad(h, (G, 2 * G)).unfold(0, 3 * G, G)[:T]  # (T, 3G): tile t's inputs (t - 1) G .. (t + 2) G
        z = torch.bmm(Wt[l], win.unsqueeze(2)).reshape(H) + t["bias"][l]
        h = F.gelu(z, approximate="tanh")
    return h


def useful_bytes(size: Size) -> int:
    return 4 * (size.layers * size.hidden * (3 * size.group + 1) + 2 * size.hidden)


STUDY = Study(
    W,
    groups=(Group("hidden", tuple(W.size(hidden=h, layers=8, group=32) for h in (1024, 2048))),),
    useful_bytes=useful_bytes,
    weight_bytes=lambda size: 4 * size.layers * size.hidden * 3 * size.group,
    check_size=lambda size: size.replace(hidden=size.hidden - 5),  # a partial last tile, not a multiple of 4
    check_sizes=(W.size(hidden=7, layers=2, group=3),),
    reps=30,
    anchors=(torch_anchor("torch", "per layer: pad, unfold, bmm over the tiles, + bias, GELU: eager", torch_chain),
             torch_anchor("torch.compile", "the same through torch.compile", torch_chain, compiled=True)),
    about="locally connected layers at hidden 1024 and 2048: kernel boundaries against a counter per tile",
)
