"""The block chain's study (`kernels-lab bench block_chain`: its table, then every line's us per pass and the
issue's goals, from figures.py): every variant at hidden 1024 and 2048, groups of 32, 8 layers and 1 layer,
against torch's eager loop, that loop in a torch CUDA graph and (hidden 1024, 8 layers only: it compiles for tens
of seconds) torch.compile(mode="reduce-overhead") of it. TF32 off: float32, as ours.
"""

from __future__ import annotations

from typing import Any

from ...backend import BACKEND
from ...core import Size
from ...profile.anchors import torch_cuda
from ...profile.study import Anchor, AnchorUnavailable, Group, Study, version
from .workload import WORKLOAD as W
from .workload import fewer_blocks_variant

HIDDEN, GROUP = (1024, 2048), 32


def torch_chain(torch, t: dict[str, Any], size: Size):
    """The chain in torch: per layer x_l padded by a group each side, cut into each tile's 3 groups (unfold: a
    view), one batched matrix-vector product over the tiles (bmm), + bias, tanh-GELU. Needs hidden a multiple of
    the group (the tiles' bmm reshapes W)."""
    L, H, G = size.layers, size.hidden, size.group
    if H % G:
        raise AnchorUnavailable(f"torch's chain reshapes W into whole tiles: hidden={H} is not a multiple of group={G}")
    F = torch.nn.functional
    T = H // G
    Wt = t["W"].view(L, T, G, 3 * G)
    h = t["x"]
    for l in range(L):
        win = F.pad(h, (G, 2 * G)).unfold(0, 3 * G, G)[:T]  # (T, 3G): tile t's inputs (t - 1) G .. (t + 2) G
        z = torch.bmm(Wt[l], win.unsqueeze(2)).reshape(H) + t["bias"][l]
        h = F.gelu(z, approximate="tanh")
    return h


def _torch(dev_in: dict[str, Any], size: Size):
    """(torch, the chain as a function of no arguments) on the lines' own device buffers."""
    torch = torch_cuda()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32, as ours (set here: torch.compile traces the chain)
    t = {k: torch.as_tensor(v, device="cuda") for k, v in dev_in.items()}
    torch_chain(torch, t, size)  # refuses a size it cannot reshape before anything is captured
    return torch, lambda: torch_chain(torch, t, size)


def _make_eager(dev_in: dict[str, Any], size: Size):
    _, chain = _torch(dev_in, size)
    held: dict[str, Any] = {}

    def eager():
        held["out"] = chain()
    return eager, lambda: dict(held)


def _make_graph(dev_in: dict[str, Any], size: Size):
    torch, chain = _torch(dev_in, size)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()  # warm up (cuBLAS picks its kernels) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = chain()
    return graph.replay, lambda: {"out": out}


def _make_compiled(dev_in: dict[str, Any], size: Size):
    torch, chain = _torch(dev_in, size)
    compiled = torch.compile(chain, mode="reduce-overhead")
    for _ in range(3):
        compiled()  # compile, record its graph, replay: outside the timed loop
    held: dict[str, Any] = {}

    def run():
        held["out"] = compiled()
    return run, lambda: dict(held)


ANCHORS = (
    Anchor("torch_eager", "per layer: pad, unfold, bmm over the tiles, + bias, tanh-GELU: eager", _make_eager),
    Anchor("torch_graph", "the eager loop captured in a torch CUDA graph, replayed", _make_graph),
    Anchor("torch_compile", 'torch.compile(mode="reduce-overhead") of the loop', _make_compiled, launches=1),
)


def useful_bytes(size: Size) -> int:
    """The band's weights (edges included: the problem's input), the biases, x in and out."""
    return 4 * (size.layers * size.hidden * (3 * size.group + 1) + 2 * size.hidden)


def derive(rec: dict[str, Any]) -> dict[str, Any]:
    """us per pass on both clocks, and per layer (steady state)."""
    steady = rec["time_ms_steady"] * 1e3 if rec["time_ms_steady"] else None
    return {"us_per_pass": steady, "latency_us": rec["time_ms"] * 1e3 if rec["time_ms"] else None,
            "us_per_layer": steady / rec["size"]["layers"] if steady else None}


def report(doc: dict[str, Any]) -> str:
    """us per pass and per layer of every line, the per-layer slope, and the issue's goals at 8 layers; then the
    grid sweep's own table (its graph_pdl and megakernels are timed again there: kept apart)."""
    from .figures import split_grid, tables, targets  # matplotlib only when a run reports
    main, grid = split_grid(doc["records"])
    return "\n\n".join([tables(main), targets(main), *([f"the grid sweep:\n{tables(grid)}"] if grid else [])])


def _sizes(layers: int) -> tuple[Size, ...]:
    return tuple(W.size(hidden=h, layers=layers, group=GROUP) for h in HIDDEN)


UNCOMPILED = (*W.variants, *(a.name for a in ANCHORS if a.name != "torch_compile"))
# the grid sweep: why a megakernel's cost per layer grows at hidden 2048 (a block per (layer, tile), 4 an SM,
# three of them polling while one computes?): the same kernels on half and a quarter of their grid
GRID_SWEEP = tuple(version(v.name, v, v.about) for v in (fewer_blocks_variant(marked, d)
                                                          for marked in (False, True) for d in (2, 4)))
STUDY = Study(
    W,
    # the sizes first (torch.compile at the first only: it compiles for tens of seconds a shape); then 1
    # layer, which tells the per-layer cost from a pass's fixed cost
    groups=(Group("targets", _sizes(8)[:1], lines=(*W.variants, *(a.name for a in ANCHORS))),
            Group("wide", _sizes(8)[1:], lines=UNCOMPILED),
            Group("one_layer", _sizes(1), lines=UNCOMPILED),
            Group("grid", _sizes(8) + _sizes(1),
                  lines=("graph_pdl", "megakernel", "megakernel_marked", *(v.name for v in GRID_SWEEP)))),
    versions=GRID_SWEEP,
    useful_bytes=useful_bytes,
    weight_bytes=lambda size: 4 * size.layers * size.hidden * 3 * size.group,
    # checked on the GPU at the timed size (its kernels are compiled for it: a smaller one would compile them
    # again); partial tiles and widths that are no multiple of the group are the simulator's check sizes
    check_sizes=(W.size(hidden=7, layers=2, group=3), W.size(hidden=7, layers=2, group=4)),  # an odd group; an even
    reps=30,
    anchors=ANCHORS,
    derive=derive,
    meta=lambda: {"l2_bytes": BACKEND.facts().l2_bytes, "sm_count": BACKEND.facts().sm_count},
    report=report,
    about="locally connected layers at hidden 1024 and 2048: a kernel boundary per layer against a counter per tile",
)
