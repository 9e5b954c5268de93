"""Decode's study (`kernels-lab bench decode`): a chain of dense layers, every variant at hidden 1024 / 2048 /
4096, 8 and 16 layers, batch 1 / 4 / 16, against torch; lesson 07, the demo's committed table and
figures/decode_h100_*.png quote it.

Lines: the registered variants; at batch 1 the megakernel's other shapes (blocks per SM, 128-thread blocks,
launch bounds: MEGA_VERSIONS); at hidden 4096, 8 layers, batch 1 (the deficit: the weights at the copy ceiling
against what the megakernels reach) the double-buffered megakernel's sweep (L2 look-ahead, blocks per SM, tile
and block size: DB_SWEEP); and anchors: torch's eager loop (F.linear + tanh-GELU per layer), that loop captured
in a torch CUDA graph and, at 8 layers and batch 1 only (each shape compiles anew, for tens of seconds),
torch.compile(mode="reduce-overhead") of it. TF32 off: float32, as ours.

Useful bytes: the weights and biases read once, x read and out written. GBs_weight counts the weights alone
(4 layers hidden^2 bytes a pass): the DRAM floor is those bytes at the copy ceiling, and where they fit in L2
(hidden 1024, 8 layers: 32 MB in the H200's 60 MiB) back-to-back passes read them from L2 instead. Every record
also carries its kernel's residency on a GPU (registers, blocks an SM holds, weight bytes in flight per SM:
occupancy.py), and the three registered megakernels their own %globaltimer timeline at hidden 1024 and 4096.

Groups, in the order they run (a run cut short keeps the first): targets (1024 and 2048, 8 layers, batch 1),
deficit (4096, 8 layers, batch 1: the sweep's versions too), sweep (the other 15 sizes, no torch.compile);
`kernels-lab bench decode --group targets,deficit` runs the first two alone.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ...arrays import poisoned, to_device
from ...backend import BACKEND
from ...core import Size
from ...profile.anchors import torch_cuda
from ...profile.study import Anchor, Group, Line, Study, version
from ...runtime import cuda
from . import occupancy, workload as decode

W = decode.WORKLOAD
Mega = decode.Mega
HIDDEN, LAYERS, BATCH = (1024, 2048, 4096), (8, 16), (1, 4, 16)
DEFICIT_HIDDEN = 4096          # the double-buffered megakernel's sweep runs here (8 layers, batch 1)
CHECK_LAYERS = 2               # a line is checked at its size's hidden and batch (its kernels' geometry), 2 layers
TIMELINE_AT = ((1024, 8, 1), (4096, 8, 1))  # (hidden, layers, batch): the megakernels' stamped runs
TIMELINE_LINES = ("megakernel", "megakernel_db", "megakernel_marked")

# every megakernel of the study by name: the registered ones, then the shapes only the study times (on the
# simulator at the same ratios to its smaller blocks as on a GPU: every thread is a Python thread there)
HALF_BLOCK = BACKEND.size(gpu=128, simulator=4)      # half the registered blocks' threads (dk.THREADS)
WIDE_ROW = BACKEND.size(gpu=64, simulator=8)         # twice the fewest threads a row (dk.ROW_THREADS)
MEGAS: dict[str, Mega] = {
    "megakernel": decode.EXERCISE_MEGA, "megakernel_db": decode.DB_MEGA, "megakernel_db_p0": decode.DB_P0_MEGA,
    "megakernel_marked": decode.MARKED_MEGA,
    **{f"megakernel_{k}sm": Mega(per_sm=k) for k in (1, 4) if k != decode.MEGA_BLOCKS_PER_SM},
    "megakernel_t128": Mega(per_sm=4, threads=HALF_BLOCK),
    "megakernel_marked_lb2": Mega(double_buffered=True, marked=True, min_blocks=2),
    **{f"megakernel_db_p{p}": Mega(double_buffered=True, prefetch=p) for p in (2, 4)},
    "megakernel_db_1sm": Mega(per_sm=1, double_buffered=True),
    "megakernel_db_rt64": Mega(double_buffered=True, row_threads=WIDE_ROW),
    "megakernel_db_t128": Mega(per_sm=4, threads=HALF_BLOCK, double_buffered=True),
}
ABOUT = {
    "megakernel_1sm": "megakernel, 1 block per SM", "megakernel_4sm": "megakernel, 4 blocks per SM",
    "megakernel_t128": "megakernel, 4 blocks of 128 threads per SM",
    "megakernel_marked_lb2": "megakernel_marked, registers capped for 2 blocks per SM (launch bounds)",
    **{f"megakernel_db_p{p}": f"megakernel_db, {p} tiles asked of L2 beyond its two" for p in (2, 4)},
    "megakernel_db_1sm": "megakernel_db, 1 block per SM",
    "megakernel_db_rt64": "megakernel_db, 64 threads a row: two 4-row tiles (64 KB each) a block",
    "megakernel_db_t128": "megakernel_db, 4 blocks of 128 threads per SM",
}
DB_SWEEP = ("megakernel_db_p2", "megakernel_db_p4", "megakernel_db_1sm", "megakernel_db_rt64",
            "megakernel_db_t128")


def _version(name: str, fits) -> Line:
    return version(name, decode.megakernel_variant(name, MEGAS[name], ABOUT[name]), ABOUT[name], fits=fits)


MEGA_VERSIONS = tuple(_version(n, lambda size: size.batch == 1) for n in ABOUT if n not in DB_SWEEP)
SWEEP_VERSIONS = tuple(_version(n, None) for n in DB_SWEEP)


# -- what each record carries beside its times ------------------------------------------------------------

def describe(line: Line, size: Size) -> dict[str, Any]:
    """Blocks of a one-launch line; on a GPU its kernel's residency (read from the kernel compiled for this
    size, so after it ran) and, for the registered megakernels (TIMELINE_LINES) at TIMELINE_AT, one stamped pass's timeline."""
    plan = line.variant.plan(size)
    found: dict[str, Any] = {"blocks": plan.launches[0].grid} if plan.n_launches == 1 else {}
    if not BACKEND.can_time:  # the simulator compiles nothing: no registers to read
        return found
    try:
        mega = MEGAS.get(line.variant.name)
        held = occupancy.of_mega(mega, size) if mega else occupancy.of_variant(line.variant.name, None, size)
        if held is not None:
            found["residency"] = held.record()
    except Exception as e:  # noqa: BLE001  (a missing residency must not cost the timing)
        found["residency_problem"] = f"{type(e).__name__}: {e}"[:400]
    if line.name in TIMELINE_LINES and (size.hidden, size.layers, size.batch) in TIMELINE_AT:
        try:
            found["timeline"] = stamped_timeline(size, MEGAS[line.name])
        except Exception as e:  # noqa: BLE001  (a wrong megakernel's stamped run: its check already says so)
            found["timeline_problem"] = f"{type(e).__name__}: {e}"[:400]
    return found


@lru_cache(maxsize=1)
def _timeline_inputs(size: Size) -> dict[str, Any]:
    import numpy as np
    return to_device(W.make_inputs(size, np.random.default_rng(7)))


def stamped_timeline(size: Size, mega: Mega) -> list[dict[str, float]]:
    """One warm pass of a megakernel with its %globaltimer stamps on: per layer, its start, its first and last
    tile let past the wait, its last tile counted (us)."""
    launch = decode.bind_megakernel_with(_timeline_inputs(size), poisoned(W.output_specs(size)), stamped=True,
                                         mega=mega)
    launch()
    launch()  # the second pass: weights as warm as in the steady state
    cuda.synchronize()
    return launch.timeline()


def derive(rec: dict[str, Any]) -> dict[str, Any]:
    """us per pass on both clocks (the figures' and the tables' unit)."""
    return {"us_per_pass": rec["time_ms_steady"] * 1e3 if rec["time_ms_steady"] else None,
            "latency_us": rec["time_ms"] * 1e3 if rec["time_ms"] else None}


# -- anchors: torch on the same weights ----------------------------------------------------------------------

def _torch_chain(dev_in: dict[str, Any], size: Size):
    """(torch, the chain as a function of x, x): F.linear + tanh-GELU per layer on the lines' own buffers."""
    torch = torch_cuda()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32, as ours
    weights, bias, x = (torch.as_tensor(dev_in[k], device="cuda") for k in ("W", "bias", "x"))
    F = torch.nn.functional

    def chain(h):
        for layer in range(size.layers):
            h = F.gelu(F.linear(h, weights[layer], bias[layer]), approximate="tanh")
        return h
    return torch, chain, x


def _make_eager(dev_in: dict[str, Any], size: Size):
    _, chain, x = _torch_chain(dev_in, size)
    held: dict[str, Any] = {}

    def eager():
        held["out"] = chain(x)
    return eager, lambda: dict(held)


def _make_graph(dev_in: dict[str, Any], size: Size):
    torch, chain, x = _torch_chain(dev_in, size)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain(x)  # warm up (cuBLAS picks its kernels) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = chain(x)
    return graph.replay, lambda: {"out": out}


def _make_compiled(dev_in: dict[str, Any], size: Size):
    torch, chain, x = _torch_chain(dev_in, size)
    compiled = torch.compile(chain, mode="reduce-overhead")
    for _ in range(3):
        compiled(x)  # compile, record its graph, replay: outside the timed loop
    held: dict[str, Any] = {}

    def run():
        held["out"] = compiled(x)
    return run, lambda: dict(held)


ANCHORS = (
    Anchor("torch_eager", "F.linear + tanh-GELU per layer, eager", _make_eager),
    Anchor("torch_graph", "the eager loop captured in a torch CUDA graph", _make_graph),
    Anchor("torch_compile", 'torch.compile(mode="reduce-overhead") of the loop', _make_compiled, launches=1),
)


# -- the study -----------------------------------------------------------------------------------------------

def _sizes(hidden, layers, batch) -> tuple[Size, ...]:
    return tuple(W.size(hidden=h, layers=l, batch=b) for h in hidden for l in layers for b in batch)


def report(doc: dict[str, Any]) -> str:
    """The issue's goals at 8 layers, batch 1, as this run reached them (figures.targets, on the records as the
    figures read them: us per pass, share of the ceiling)."""
    from .figures import as_drawn, targets  # matplotlib only when a run reports
    return targets(as_drawn(doc)["records"])


# the targets first (8 layers, batch 1; a run cut short keeps them), then the deficit's sweep at hidden
# 4096, then every other size without torch.compile
TARGETS = _sizes((1024, 2048), (8,), (1,))
DEFICIT = _sizes((DEFICIT_HIDDEN,), (8,), (1,))
REST = tuple(s for s in _sizes(HIDDEN, LAYERS, BATCH) if (s.layers, s.batch) != (8, 1))
SWEEP_NAMES = tuple(v.name for v in SWEEP_VERSIONS)
EVERY = (*W.variants, *(v.name for v in MEGA_VERSIONS), *SWEEP_NAMES, *(a.name for a in ANCHORS))

STUDY = Study(
    W,
    groups=(Group("targets", TARGETS, lines=tuple(n for n in EVERY if n not in SWEEP_NAMES)),
            Group("deficit", DEFICIT),
            Group("sweep", REST, lines=tuple(n for n in EVERY if n not in SWEEP_NAMES and n != "torch_compile"))),
    useful_bytes=lambda size: 4 * (size.layers * size.hidden * (size.hidden + 1) + 2 * size.batch * size.hidden),
    weight_bytes=lambda size: 4 * size.layers * size.hidden ** 2,
    check_size=lambda size: size.replace(layers=min(size.layers, CHECK_LAYERS)),
    # hidden 13 (no multiple of a vector), 2 layers: the registered lines at batch 2, the versions at their batch 1
    check_sizes=(W.size(hidden=13, layers=2, batch=2), W.size(hidden=13, layers=2, batch=1)),
    reps=20,
    versions=MEGA_VERSIONS + SWEEP_VERSIONS,
    anchors=ANCHORS,
    describe=describe,
    derive=derive,
    meta=lambda: {"l2_bytes": BACKEND.facts().l2_bytes, "sm_count": BACKEND.facts().sm_count},
    report=report,
    about="a launch per op to one megakernel at 18 sizes, its shapes and the hidden-4096 sweep, against torch",
)
