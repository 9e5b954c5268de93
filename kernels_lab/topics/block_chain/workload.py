"""Lesson 07's second chain: locally connected layers, where a tile waits for 3 tiles, not for a whole layer.

    x_{l+1}[r] = gelu(b_l[r] + sum_c W_l[r, c] x_l[(g - 1) G + c])    g = r // G, c = 0 .. 3G - 1,
                                                                   terms with the input outside [0, hidden) dropped

float32, batch 1, tanh-GELU as in the elementwise chain. Unit r of group g (G consecutive units) reads
only the groups g - 1, g, g + 1 of the layer before: a banded (block-tridiagonal) W_l, stored as its
band, hidden x 3G. It is a 1-D locally connected layer (a convolution whose weights differ per
position), the shape of a stencil time step or a stack of short convolutions.

Why this workload, beside the dense decode chain (topics/decode), where graph_pdl beats the megakernel:
in decode every tile of layer l + 1 needs all of x_l, so a counter per layer is a grid barrier by
another name and saves only the barrier's mechanism. Here a tile needs 3 tiles of the layer before, a
dependency a kernel boundary cannot express: a kernel boundary (with or without PDL) makes every tile
of layer l + 1 wait for every tile of layer l and for the grid to drain, while a counter per tile
lets a tile start as soon as its three producers have counted.

What a layer costs (hidden 2048, G = 32: 64 tiles of 32 units; hidden 1024: 32 tiles):
  weights 4 x hidden x 3G bytes = 768 KB (384 KB) per layer, 6 MB (3 MB) for 8 layers: they sit in the
  50-60 MB L2 after the first pass and stream in well under 0.1 us per layer at L2 bandwidth.
  So the chain is all latency: per layer an L2 round trip for x_l's 3G inputs (~0.6-0.8 us), a few
  hundred FMAs, one block barrier, the stores, and then the hand-off to the next layer:
  - a kernel boundary in a CUDA graph: the grid drains, its stores are flushed, the next grid's blocks
    are placed and start (lesson 06 measures ~0.85 us a boundary beyond the work); with PDL the next
    grid is already resident with its weights loaded, but griddepcontrol.wait still returns only after
    the whole previous grid has finished and flushed;
  - a counter per tile: the producer's release add after its stores (the release waits for them to
    reach L2), three threads of the consumer polling with acquire loads (32 ns pauses), then the
    consumer's load of x_l: about three L2 round trips in a row, but no drain and no placement;
  - data and flag in one word (megakernel_marked): the producer's store, the consumer's poll of those
    very words: about two L2 round trips, nothing else.
Expected, per layer at hidden 1024-2048: graph_pdl ~2 us, the counter megakernel ~1.5-2 us (its
fence and its second round trip eat most of what the boundary costs), the marked one ~1-1.3 us; over
8 layers, megakernel_marked / graph_pdl ~1.3-1.6x, and 3x or more against torch's CUDA graph (4-5
kernels a layer: pad, bmm over the tiles, bias add, GELU). bench.py measures it (its table says which
held); the lesson quotes the data, never these guesses.

The variants, in reading order:

    variant            launches      between two layers
    unfused            3 x layers    band matvec -> z, decode's bias kernel, decode's GELU kernel
    fused              layers        a kernel boundary: one kernel per layer, bias + GELU in its epilogue
    graph              layers        the fused launches captured once in a CUDA graph and replayed
    graph_pdl          layers        as graph, with PDL: each layer's weights load before griddepcontrol.wait
    megakernel         1             every (layer, tile) in layer-major order, split into contiguous runs,
                                     one run per block (one tile per block at the GPU's sizes: every block
                                     loads its weights at once); a counter per tile, decode's protocol
                                     (signal_release: release add after a barrier; wait_acquire: bounded
                                     acquire poll); threads 0-2 poll the three tiles a tile reads; the last
                                     block out zeroes the counters
    megakernel_marked  1             the megakernel with data and flag in one word (as decode's
                                     megakernel_marked): each activation a 64-bit word (epoch << 32 | its
                                     float's bits) written in one exchange; a tile stages its 3G inputs in
                                     shared memory as 16-byte pairs of words, polling the words themselves
                                     until each carries this launch's epoch: no fence, no counter, no second
                                     load of x_l after the flag (an even group: the pairs must be aligned)

The kernels are in kernels.py. Accuracy: W uniform with deviation 1.35 / sqrt(3G), b uniform(-0.5, 0.5),
x standard normal: activations stay O(1); float32 sums of 3G terms against float64: ~1e-6; the tolerance
(rtol 1e-4, atol 2e-5) as decode's.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND
from ...core import Axis, KernelLaunch, Plan, Size, Tolerance, Variant, Workload, kernel_name, register
from ...give_up import GiveUpWord
from ...runtime import cuda
from ..decode.per_layer import PerLayer
from ..decode.workload import SPIN_LIMIT, DependencyTimeout, gelu64
from . import kernels as ck

F32 = 4
GAIN = 1.35


# -- the specification: float64 NumPy ------------------------------------------------------------

def windows(x: np.ndarray, group: int) -> np.ndarray:
    """(hidden, 3G): row r holds the inputs unit r reads, x[(r // G - 1) G + c], 0 outside x."""
    H = x.size
    tiles = -(-H // group)
    padded = np.zeros((tiles + 2) * group, x.dtype)
    padded[group:group + H] = x
    per_tile = np.lib.stride_tricks.sliding_window_view(padded, 3 * group)[::group][:tiles]
    return per_tile[np.arange(H) // group]


def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    W, b = inputs["W"].astype(np.float64), inputs["bias"].astype(np.float64)
    x = inputs["x"].astype(np.float64)
    group = W.shape[2] // 3
    for l in range(W.shape[0]):
        x = gelu64(np.einsum("rc,rc->r", W[l], windows(x, group)) + b[l])
    return {"out": x}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # every weight random, the band's columns outside [0, hidden) too (a kernel that wraps around reads them)
    L, H, G = size.layers, size.hidden, size.group
    sd = GAIN / math.sqrt(3 * G)
    return {"W": (rng.uniform(-1.0, 1.0, (L, H, 3 * G)) * (sd * math.sqrt(3.0))).astype(np.float32),
            "bias": rng.uniform(-0.5, 0.5, (L, H)).astype(np.float32),
            "x": rng.standard_normal(H).astype(np.float32)}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((size.hidden,), np.float32)}


def geometry(size: Size) -> ck.Geometry:
    return ck.Geometry(size.hidden, size.group)


def _limit(size: Size) -> str | None:
    return ck.too_large(geometry(size))


class Buffers:
    """The checked arrays as flat vectors, the activations between layers, and the kernels for their shape."""

    def __init__(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], stream=0):
        x = device_array("x", inputs.get("x"), np.float32, (None,))
        hidden = x.shape[0]
        if hidden == 0:
            raise ArgumentError("x: no units; shape (hidden,) with hidden >= 1 is required")
        W = device_array("W", inputs.get("W"), np.float32, (None, hidden, None))
        if W.shape[0] == 0 or W.shape[2] == 0 or W.shape[2] % 3:
            raise ArgumentError(f"W: shape {tuple(W.shape)}; (layers, hidden, 3 x group) with layers >= 1 and "
                                f"group >= 1 is required (each unit's weights for its 3 groups of inputs)")
        bias = device_array("bias", inputs.get("bias"), np.float32, (W.shape[0], hidden))
        out = device_array("out", outputs.get("out"), np.float32, (hidden,))
        self.layers, self.hidden = W.shape[0], hidden
        self.geo = ck.Geometry(hidden, W.shape[2] // 3)
        if (why := ck.too_large(self.geo)) is not None:
            raise ArgumentError(why)
        self.W, self.bias, self.x, self.out = (a.reshape(a.size) for a in (W, bias, x, out))
        self.acts = cuda.device_array(max(1, self.layers - 1) * hidden, np.float32, stream=stream)
        self.kernels = ck.kernels(self.geo)

    @property
    def chain(self) -> tuple:
        return self.W, self.bias, self.x, self.acts, self.out


# -- a kernel (or three) per layer (decode/per_layer.py) -----------------------------------------------

def _tile_bytes(size: Size, bias: bool) -> tuple[int, int]:
    """(read, written) by one layer's tiles: each unit's weights and inputs once (and its bias), its output."""
    band = geometry(size).band_reads()
    return F32 * (2 * band + (size.hidden if bias else 0)), F32 * size.hidden


def _tile_launch(size: Size, kernel: Any, bias: bool) -> KernelLaunch:
    geo = geometry(size)
    return KernelLaunch(kernel_name(kernel), geo.tiles, geo.threads, *_tile_bytes(size, bias),
                        read_bytes_in_flight=F32 * geo.per_thread)


PER_LAYER = PerLayer("block_chain", Buffers, lambda size: ck.kernels(geometry(size)), _tile_launch)


# -- the megakernel: one launch, a counter per tile ------------------------------------------------------

def megakernel_signature(marked: bool = False) -> tuple:
    """The argument types a megakernel is compiled for (a GPU sizes its grid from them)."""
    from numba import types
    vec = types.float32[::1]
    acts = types.int64[::1] if marked else vec
    return (vec, vec, vec, acts, vec, types.int32[::1], types.int32[::1], types.int64, types.int64[::1])


def _mega_kernel(geo: ck.Geometry, marked: bool):
    k = ck.kernels(geo)
    return k.marked if marked else k.megakernel


def megakernel_blocks(geo: ck.Geometry, layers: int, marked: bool = False, divisor: int = 1) -> int:
    """A block per (layer, tile) where that many are resident at once (every block loads its weights before
    any waits), else as many as are (runs of several tiles each); the simulator's persistent grid.
    divisor: 1/divisor of that grid (the study's sweep: fewer blocks an SM, each running its tiles in turn)."""
    resident = BACKEND.persistent_grid(_mega_kernel(geo, marked), megakernel_signature(marked), geo.threads)
    return max(1, min(layers * geo.tiles, resident) // divisor)


def _megakernel_bytes(size: Size, blocks: int) -> tuple[int, int]:
    """(read, written) beyond the tiles' own (_tile_bytes, every layer): one acquire poll of each tile a tile
    of layer l > 0 reads (the floor: a GPU polls more while it waits; exact where blocks run one after
    another), a release add per tile (read and written), an atomic add per block, the counters zeroed."""
    geo = geometry(size)
    items = size.layers * geo.tiles
    polls = (size.layers - 1) * sum(min(geo.tiles, t + 2) - max(0, t - 1) for t in range(geo.tiles))
    return (F32 * (polls + items + BACKEND.atomic_add_reads * blocks),
            F32 * (items + blocks + items + 1))


def _marked_bytes(size: Size, blocks: int) -> tuple[int, int]:
    """(read, written) of the marked megakernel: each layer's weights and biases; a tile of layer 0 stages the x
    inside its 3 groups, a later one all 3G words of its 3 groups (8 bytes each: the floor, a GPU re-reads the
    words that were not there yet); every activation but the last layer's an 8-byte exchange (read and
    written), the last layer's a float; every thread reads the epoch, each block adds 1 to the blocks done (an
    atomic add), the last out zeroes that count and writes the epoch."""
    geo, L, H = geometry(size), size.layers, size.hidden
    weights = L * F32 * (geo.band_reads() + H)
    staged = F32 * sum(geo.columns(t) for t in range(geo.tiles)) + 8 * (L - 1) * geo.tiles * geo.band
    exchanged = 8 * (L - 1) * H
    return (weights + staged + exchanged + F32 * (geo.threads * blocks + BACKEND.atomic_add_reads * blocks),
            F32 * H + exchanged + F32 * (blocks + 2))


def _plan_mega(marked: bool, divisor: int = 1):
    def plan(size: Size) -> Plan:
        geo = geometry(size)
        blocks = megakernel_blocks(geo, size.layers, marked, divisor)
        if marked:
            read, written = _marked_bytes(size, blocks)
        else:
            per_layer_read, per_layer_written = _tile_bytes(size, bias=True)
            extra_read, extra_written = _megakernel_bytes(size, blocks)
            read, written = size.layers * per_layer_read + extra_read, size.layers * per_layer_written + extra_written
        return Plan((KernelLaunch(kernel_name(_mega_kernel(geo, marked)), blocks, geo.threads, read, written,
                                  read_bytes_in_flight=F32 * geo.per_thread),))
    return plan


class MegakernelLaunch:
    """A megakernel bound once (counters, error flag; marked: its activations as words; stamped: room for its
    %globaltimer stamps); refuses to go on after a timed-out wait."""

    def __init__(self, buf: Buffers, blocks: int, spin_limit: int, stream, marked: bool = False,
                 stamped: bool = False):
        self.layers, self.tiles, self.blocks = buf.layers, buf.geo.tiles, blocks
        # a count per tile and the blocks done; marked: the blocks done and the last launch's epoch
        self.counters = cuda.to_device(np.zeros(2 if marked else buf.layers * buf.geo.tiles + 1, np.int32),
                                       stream=stream)
        self.gave_up = GiveUpWord()  # a waiting block of layer l stores l: a tile of layer l - 1 never came
        # ck.STAMPS %globaltimer stamps per (layer, tile), or the 1-word stand-in that turns them off
        self.stamps = cuda.to_device(np.zeros(ck.STAMPS * buf.layers * buf.geo.tiles if stamped else 1, np.int64),
                                     stream=stream)
        acts = buf.acts
        if marked:  # epoch 0 everywhere: no word carries a launch's epoch yet
            acts = cuda.to_device(np.zeros(max(1, buf.layers - 1) * ck.marked_slot(buf.geo), np.int64), stream=stream)
        args = (buf.W, buf.bias, buf.x, acts, buf.out, self.counters, self.gave_up.word, np.int64(spin_limit),
                self.stamps)
        self._launch = BACKEND.launcher(_mega_kernel(buf.geo, marked), blocks, buf.geo.threads, args, stream)

    def timed_out_at(self) -> int | None:
        """A layer whose input (a tile of the layer before) a block gave up waiting for, or None."""
        return None if (before := self.gave_up.at()) is None else before + 1

    def raise_if_timed_out(self) -> None:
        if (layer := self.timed_out_at()) is not None:
            raise DependencyTimeout(
                f"block_chain megakernel: a block of layer {layer} gave up waiting for a tile of layer {layer - 1} "
                f"({self.blocks} blocks; every block must be resident, or run after the blocks it waits on); the "
                f"output of that launch is wrong")

    def __call__(self, target=None) -> None:
        self.raise_if_timed_out()
        self._launch(target)

    def stamps_ns(self) -> np.ndarray:
        """The last launch's stamps (a stamped launch only), (layers, tiles, ck.STAMPS) in ns of the GPU's clock:
        thread 0 of each tile at its start, after its wait, before its release, after it (ck.STARTED ..)."""
        if self.stamps.size == 1:
            raise ValueError("this megakernel was bound without stamps (bind_megakernel_with(..., stamped=True))")
        return self.stamps.copy_to_host().reshape(self.layers, self.tiles, ck.STAMPS)


def bind_megakernel_with(inputs, outputs, stream=0, *, blocks: int | None = None, spin_limit: int = SPIN_LIMIT,
                         marked: bool = False, divisor: int = 1, stamped: bool = False) -> MegakernelLaunch:
    """A megakernel (marked: data and flag in one word) on its default grid (divisor: 1/divisor of it), or on
    `blocks` blocks (the tests' other splits of the items); stamped: thread 0 of each tile stamps %globaltimer
    four times (MegakernelLaunch.stamps_ns; the timeline's measurement)."""
    buf = Buffers(inputs, outputs, stream)
    if marked and (why := ck.marked_fits(buf.geo)) is not None:
        raise ArgumentError(why)
    if blocks is not None and not 1 <= blocks <= buf.layers * buf.geo.tiles:
        raise ArgumentError(f"blocks={blocks}: between 1 and the {buf.layers * buf.geo.tiles} tiles of all layers")
    return MegakernelLaunch(buf, blocks or megakernel_blocks(buf.geo, buf.layers, marked, divisor), spin_limit, stream,
                            marked, stamped)


def bind_megakernel(inputs, outputs, stream=0):
    return bind_megakernel_with(inputs, outputs, stream)


def bind_megakernel_marked(inputs, outputs, stream=0):
    return bind_megakernel_with(inputs, outputs, stream, marked=True)


def _marked_limit(size: Size) -> str | None:
    return _limit(size) or ck.marked_fits(geometry(size))


def fewer_blocks_variant(marked: bool, divisor: int) -> Variant:
    """A megakernel on 1/divisor of its default grid, unregistered (the study's grid sweep): fewer blocks share
    an SM, so fewer poll while a tile computes beside them, and each block runs `divisor` tiles in turn."""
    name = "megakernel_marked" if marked else "megakernel"
    return Variant(f"{name}_grid_{divisor}", "persistent", f"{name} on 1/{divisor} of its grid",
                   _plan_mega(marked, divisor), partial(bind_megakernel_with, marked=marked, divisor=divisor),
                   limit=_marked_limit if marked else _limit)


WORKLOAD = register(Workload(
    name="block_chain",
    about="x_{l+1} = gelu(band(W_l) x_l + b_l): each unit reads 3 groups of the layer before; a counter per tile",
    axes=(Axis("hidden", sim=13, gpu=1024, sweep=(1024, 2048), sim_sweep=(5,), unit="units",
               about="units per layer (not a multiple of the group at the simulator's sizes)"),
          Axis("layers", sim=3, gpu=8, sweep=(8,), sim_sweep=(1,), unit="layers",
               about="locally connected layers"),
          Axis("group", sim=3, gpu=32, sweep=(32,), sim_sweep=(4,), unit="units",
               about="units per group (a tile): each unit reads its group and the two beside it")),
    make_inputs=make_inputs, reference=reference, output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=2e-5),
))
for _name, _pattern, _about, _plan, _bind in (
        ("unfused", "unfused", "per layer: a band matvec kernel writes W x to memory, a bias kernel, a GELU kernel",
         PER_LAYER.plan_unfused, PER_LAYER.bind_unfused),
        ("fused", "fused", "one kernel per layer: band matvec + bias + GELU epilogue", PER_LAYER.plan_layers(False),
         PER_LAYER.bind_fused),
        ("graph", "graph", "the fused layer launches captured once in a CUDA graph, replayed",
         PER_LAYER.plan_layers(False), PER_LAYER.bind_graph),
        ("graph_pdl", "pdl", "as graph, with PDL: each layer loads its weights before griddepcontrol.wait",
         PER_LAYER.plan_layers(True), PER_LAYER.bind_graph_pdl),
        ("megakernel", "persistent", "one launch, a block per (layer, tile); a counter per tile: a tile waits only "
         "for the 3 tiles it reads (release add after the stores, bounded acquire polls)", _plan_mega(False),
         bind_megakernel)):
    WORKLOAD.add(Variant(_name, _pattern, _about, _plan, _bind, limit=_limit))
WORKLOAD.add(Variant("megakernel_marked", "persistent", "megakernel with data and flag in one word: each activation "
                     "stored with the launch's epoch in one 64-bit exchange, a tile polls the 3G words it reads "
                     "themselves (no counter, fence or acquire between layers)", _plan_mega(True),
                     bind_megakernel_marked, limit=_marked_limit))
