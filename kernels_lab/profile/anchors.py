"""Anchors from torch: someone else's kernel on the very device buffers a study's lines read (zero copy).

torch_anchor("torch.softmax", "...", lambda torch, t, size: torch.softmax(t["x"], dim=-1)) is an Anchor
(profile/study.py) that wraps every device input as a tensor, runs `call` once per pass, and hands the
study its result as the output `output`; compiled=True runs it through torch.compile (compiled outside the
timed loop). Where torch, or its CUDA, is missing the anchor says so and the study goes on without it.
"""

from __future__ import annotations

from typing import Any, Callable

from ..core import Size
from .study import Anchor, AnchorUnavailable


def torch_cuda():
    """torch, when it imports and sees a GPU; else AnchorUnavailable saying which is missing."""
    try:
        import torch
    except ImportError:
        raise AnchorUnavailable("torch does not import here") from None
    if not torch.cuda.is_available():
        raise AnchorUnavailable("torch sees no CUDA device")
    return torch


def _no_recompile_limit(torch) -> None:
    """Every make compiles the same code object (fn below) for a new size: dynamo counts those as recompiles
    and past its limit (8) runs the function eagerly without a word but a log line, so a study of many sizes
    timed eager torch under the name torch.compile (cross_entropy, H100, 12-06: 131072 and 262144 columns)."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 4096))


def torch_anchor(name: str, what: str, call: Callable[[Any, dict[str, Any], Size], Any], *, output: str = "out",
                 compiled: bool = False, launches: int | None = None) -> Anchor:
    """An Anchor running call(torch, {input name: tensor or scalar}, size) -> the output tensor."""
    def make(dev_in: dict[str, Any], size: Size):
        torch = torch_cuda()
        names = list(dev_in)
        args = [torch.as_tensor(v, device="cuda") if hasattr(v, "__cuda_array_interface__") else v
                for v in dev_in.values()]

        def fn(*a):
            return call(torch, dict(zip(names, a)), size)
        if compiled:
            _no_recompile_limit(torch)
            fn = torch.compile(fn, dynamic=False)
        held: dict[str, Any] = {}

        def launch() -> None:
            held[output] = fn(*args)
        launch()  # compiles (torch.compile) and warms up outside the timed loop
        torch.cuda.synchronize()
        return launch, lambda: dict(held)
    return Anchor(name, what, make, launches)
