"""Softmax's study (`kernels-lab bench softmax`): every variant and every numbered version at six shapes
against torch.softmax and a torch.compile'd softmax, and a sweep of the row width at fixed bytes; lesson 04,
the demo's committed table and figures/softmax_h100_*.png quote it.

The versions, llm.c dev/cuda style: each registered variant (v1 fused_shared, v2 fused, v8 persistent, v9
online, v13 unfused, v14 split: NUMBERS) and other layouts of their kernels (v3.., VERSIONS), each saying what
it changes; v20 and v21, the cluster kernel staged through shared memory (staged.py), are timed by the group
`staged` at the long rows; v22, the cluster kernel with a test-free path (layernorm's v9), by the group `whole`
at all six shapes. A version whose layout is an earlier line's at a width is checked there, not timed
twice. Every useful GB/s counts one read and one write of x (8 bytes per element) for everyone, torch
included; split, cluster, v20, v21 and v22 are also checked on x * 64 (rows near +-6400: their blocks combine partial
maxima of a row).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from ...core import Size, Variant, kernel_name
from ...profile.anchors import torch_anchor
from ...profile.study import Group, Line, Study, version
from ...rows import pow2_at_least
from . import workload as sm  # first: the workload imports split at its end (split needs it whole)
from . import split as sp
from .cluster import CLUSTER_WHOLE
from .staged import STAGED, STAGED_HELD

W = sm.WORKLOAD
SHAPES = tuple(W.size(rows=r, cols=c) for r, c in
               ((65536, 1024), (16384, 4096), (4096, 32768), (16384, 1000), (8192, 50257), (4096, 131072)))
SWEEP_BYTES = 1 << 28               # bytes of x at every sweep point
SWEEP = tuple(W.size(rows=SWEEP_BYTES // (4 * (1 << k)), cols=1 << k) for k in range(8, 18))
SWEEP_LINES = ("fused", "online", "split", "v16", "v18", "torch.softmax")
STAGED_SHAPES = SHAPES[2], SHAPES[4], SHAPES[5]  # the long rows, where the cluster kernels run
STAGED_LINES = ("split", "cluster", "v20", "v21", "torch.softmax", "torch.compile")
WHOLE_LINES = ("fused", "split", "cluster", "v22", "torch.softmax", "torch.compile")  # group `whole`
CHECK_ROWS = 67                     # odd: the last block of a row-per-warp layout is partly idle
BIG = 64                            # the second check: x scaled by this, rows near +-6400, one element ~1
NUMBERS = {"fused_shared": "v1", "fused": "v2", "persistent": "v8", "online": "v9", "unfused": "v13", "split": "v14"}
Layout = Callable[[int], Any]       # cols -> a RowShape / SplitShape, or None where it does not fit
DEFAULT_LAYOUT: dict[str, Layout] = {"fused": sm.fused_shape, "persistent": sm.fused_shape,
                                     "online": sm.stream_shape, "split": sp.split_shape}


def _block_row(chunks: int) -> Layout:
    """A block per row, about `chunks` chunks a thread (threads a power of two, 64 to 1024)."""
    def layout(cols: int) -> sm.RowShape | None:
        units = -(-cols // sm.CHUNK)
        return sm.fused_shape(cols, threads=min(sm.MAX_THREADS, max(64, pow2_at_least(-(-units // chunks)))))
    return layout


def _half_threads(cols: int) -> sm.RowShape | None:
    threads = sm.stream_shape(cols).threads // 2
    return sm.stream_shape(cols, threads=threads) if threads >= sm.WARP else None


def _slices_of(threads: int | None, prefetch: bool = False, chunks: int = 8, min_cols: int | None = None) -> Layout:
    """Split layouts other than the registered one: slices of `threads` x `chunks` chunks (None: the registered
    slices), with or without the prefetch, for rows of at least `min_cols` (the registered split's minimum)."""
    def layout(cols: int) -> sp.SplitShape | None:
        if cols < (sp.SPLIT_MIN_COLS if min_cols is None else min_cols):
            return None
        if threads is None:
            return sp.split_shape(cols, prefetch=prefetch)
        return sp.split_shape(cols, slices=-(-cols // (threads * chunks * sm.CHUNK)), threads=threads,
                              prefetch=prefetch)
    return layout


def _layout_fields(shape: Any, grid: int | None = None) -> dict[str, Any] | None:
    if isinstance(shape, sp.SplitShape):
        return {"threads": shape.threads, "chunks": shape.chunks, "block": shape.threads, "vector": True,
                "slices": shape.slices, "prefetch": shape.prefetch, "grid": grid}
    if shape is not None:
        return {"threads": shape.threads, "chunks": shape.chunks, "block": shape.block, "vector": shape.vector}
    return None


def _at_layout(family: str, layout: Layout) -> Variant:
    """The registered variant `family` with its kernel at `layout` (not registered: a version's)."""
    base = W.variant(family)
    binders = {"online": sm.bind_online, "split": sp.bind_split, "fused": sm.bind_fused}

    def bind(inputs, outputs, stream=0):
        return binders[family](inputs, outputs, stream, shape=layout(inputs["x"].shape[1]))

    def plan(size: Size):
        if family == "split":  # its exchange's bytes follow its slices
            return sp.plan_split_for(size, layout(size.cols))
        return base.plan(size)
    return dataclasses.replace(base, bind=bind, plan=plan)


def _describe_version(family: str, layout: Layout) -> Callable[[Size], dict[str, Any]]:
    def describe(size: Size) -> dict[str, Any]:
        shape = layout(size.cols)
        if family == "split":
            plan = sp.plan_split_for(size, shape)
            return {"layout": _layout_fields(shape, plan.launches[0].grid),
                    "kernels": [k.kernel for k in plan.launches]}
        kernel = sm.online_kernel(shape) if family == "online" else sm.fused_kernel(shape)
        return {"layout": _layout_fields(shape), "kernels": [kernel_name(kernel)]}
    return describe


# (key, the variant it is a layout of, what it changes, its layout)
LAYOUTS: tuple[tuple[str, str, str, Layout], ...] = (
    ("v3", "fused", "a row per warp, 2 rows a block", lambda c: sm.fused_shape(c, threads=32, block=64)),
    ("v4", "fused", "a row per warp, 8 rows a block", lambda c: sm.fused_shape(c, threads=32, block=256)),
    ("v5", "fused", "a block per row, 8 chunks (32 floats) a thread: fewer threads, more registers", _block_row(8)),
    ("v6", "fused", "a block per row, 2 chunks a thread: more threads, 32 bytes in flight each", _block_row(2)),
    ("v7", "fused", "a block per row, 1 chunk a thread: the most threads, 16 bytes in flight each", _block_row(1)),
    ("v10", "online", "8 chunks (128 bytes) loaded together; threads from the width",
     lambda c: sm.stream_shape(c, chunks=8)),
    ("v11", "online", "2 chunks (32 bytes) loaded together", lambda c: sm.stream_shape(c, chunks=2)),
    ("v12", "online", "half v9's threads, each loops twice as often", _half_threads),
    ("v15", "split", "v14 with a prefetch: the next row's slice loaded during the exchange (two slices in registers: "
                     "fewer blocks per SM)", _slices_of(None, True)),
    ("v16", "split", "slices of 2048 floats, 128 threads x 4 chunks: more, smaller blocks",
     _slices_of(128, chunks=4, min_cols=4096)),
    ("v17", "split", "slices of 8192 floats, 256 threads x 8 chunks", _slices_of(256)),
    ("v18", "split", "slices of 4096 floats at every width, 128 threads x 8 chunks (up to 32 slices)",
     _slices_of(128, min_cols=4096)),
    ("v19", "split", "slices of 4096 floats, 256 threads x 4 chunks", _slices_of(256, chunks=4, min_cols=4096)),
)


def _repeats(k: int) -> Callable[[Size], bool]:
    """Whether LAYOUTS[k] at this width is its family's registered layout, or an earlier version's."""
    key, family, _, layout = LAYOUTS[k]

    def repeats(size: Size) -> bool:
        mine = layout(size.cols)
        earlier = [DEFAULT_LAYOUT[family]] + [lay for _, fam, _, lay in LAYOUTS[:k] if fam == family]
        return any(other(size.cols) == mine for other in earlier)
    return repeats


VERSIONS: tuple[Line, ...] = tuple(
    version(key, _at_layout(family, layout), what, fits=lambda size, layout=layout: layout(size.cols) is not None,
            describe=_describe_version(family, layout), repeats=_repeats(k))
    for k, (key, family, what, layout) in enumerate(LAYOUTS)) + (
    version("v20", STAGED, "cluster with each slice staged in shared memory by asynchronous copies, the next row's "
            "in flight during this row's exchange (staged.py)", fits=lambda size: size.cols >= 4096),
    version("v21", STAGED_HELD, "v20 reading its stage once into registers: one shared read and one exp an element",
            fits=lambda size: size.cols >= 4096),
    version("v22", CLUSTER_WHOLE, "cluster with no test for the warps whose vectors all lie inside the row (a warp "
            "vote): the tests cost issue slots (layernorm's v8 / v9)"))


def describe(line: Line, size: Size) -> dict[str, Any]:
    """A registered variant's number and layout at this width (versions describe their own)."""
    if not line.registered:
        return {"family": line.variant.name}
    shape = DEFAULT_LAYOUT.get(line.name, lambda c: None)(size.cols)
    grid = sp.plan_split_for(size, shape).launches[0].grid if line.name == "split" else None
    return {"family": line.name, "number": NUMBERS.get(line.name), "layout": _layout_fields(shape, grid)}


# every line but the staged kernels and v22, which the groups `staged` and `whole` time
SHAPES_LINES = tuple(W.variants) + tuple(line.name for line in VERSIONS
                                         if line.name not in STAGED_LINES + WHOLE_LINES) + (
    "torch.softmax", "torch.compile")


def _softmax(torch, t, size):
    return torch.softmax(t["x"], dim=-1)


STUDY = Study(
    W,
    groups=(Group("shapes", SHAPES, lines=SHAPES_LINES), Group("sweep", SWEEP, lines=SWEEP_LINES, reps=10),
            Group("staged", STAGED_SHAPES, lines=STAGED_LINES), Group("whole", SHAPES, lines=WHOLE_LINES)),
    useful_bytes=lambda size: 8 * size.elements,
    check_size=lambda size: size.replace(rows=CHECK_ROWS),
    # one row: a row-per-warp block partly idle; 4096 columns for the splits of 4096-float slices
    check_sizes=(W.size(rows=1, cols=260), W.size(rows=1, cols=1000), W.size(rows=1, cols=4096)),
    reps=20,
    versions=VERSIONS,
    anchors=(torch_anchor("torch.softmax", "torch.softmax, eager", _softmax),
             torch_anchor("torch.compile", "torch.softmax through torch.compile", _softmax, compiled=True)),
    rows_axis="rows",
    harder={f"x * {BIG}": lambda inputs: {**inputs, "x": inputs["x"] * np.float32(BIG)}},
    harder_for=("split", "cluster", "v20", "v21", "v22"),  # the kernels whose blocks combine partial maxima of one row
    describe=describe,
    about="every variant and numbered version at six shapes and a width sweep, against torch",
)

from .cross_entropy_study import STUDY as CROSS_ENTROPY  # noqa: E402  (the topic's second workload)

STUDIES = (STUDY, CROSS_ENTROPY)
