"""Lesson 07: a decode step, a chain of dense layers where each layer needs all of the one before.

    x_{l+1} = gelu(W_l x_l + b_l)      l = 0 .. layers-1, float32, tanh-GELU as in the elementwise chain

x is batch x hidden (batch 1: a matrix-vector product per layer), W_l hidden x hidden. Each layer
streams its own weights (4 hidden^2 bytes) and cannot start its sums before the layer before has
finished: the weights, read once per pass, set the floor (weight bytes / copy bandwidth), and every
kernel boundary between layers is paid on top of it. The variants, in reading order:

    variant      launches     between two layers
    unfused      3 x layers   matvec -> z, bias kernel, GELU kernel: two extra round trips of z
    fused        layers       nothing but the kernel boundary: one kernel per layer, bias + GELU in its
                              epilogue, 16-byte weight loads, every load of a thread in flight at once
    graph        layers       the fused launches captured once in a CUDA graph and replayed
    graph_pdl    layers       as graph, with Programmatic Dependent Launch: each layer launches while the
                              one before still runs and loads its weights before griddepcontrol.wait
                              (weights do not depend on the layer before: PDL's canonical use in decode)
    persistent   1            one cooperative kernel; a grid barrier between layers, the next layer's
                              weights loaded before the barrier
    megakernel   1            a few blocks per SM run a host-built instruction table (opcode, layer, tile);
                              a counter per layer in global memory instead of a barrier: the producer of a
                              tile stores, then increments with a release add (fence and increment in one
                              instruction); a consumer polls its layer-before's counter with an acquire load
                              and nanosleep, bounded (an error flag, never a hang), after loading its tile's
                              weights and asking L2 for its next tile's
    megakernel_db 1           the megakernel with two tiles in flight per block: the next tile's weights load
                              into a second register buffer while this one waits and computes; a block polls
                              once per layer and counts its run of tiles of a layer with one release add
    megakernel_db_p0 1        megakernel_db asking L2 for no tile beyond its two (the fastest layout of the
                              hidden-4096 sweep on the H100 and the H200: figures/data/decode_h{100,200}.json)

The kernels are in kernels.py. Accuracy: W has entries of deviation 1.35 / sqrt(hidden) and b
is uniform(-0.5, 0.5), so activations stay O(1) through 16 layers (rms ~0.3, max ~1.7 at hidden 4096;
measured in NumPy); float32 against float64 after 16 layers of hidden 4096: 2e-6. The tolerance
(rtol 1e-4, atol 2e-5) leaves 10x room; a wrong row or layer is off by ~0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND
from ...core import Axis, KernelLaunch, Plan, Size, Tolerance, Variant, Workload, kernel_name, register
from ...give_up import GiveUpWord
from ...runtime import cuda
from . import kernels as dk
from .per_layer import PerLayer

F32 = 4
GAIN = 1.35
MEGA_BLOCKS_PER_SM = 2   # "a few blocks per SM": two 256-thread blocks of ~100 registers a thread fit
DB_VECTORS = dk.MAX_VECTORS // 2  # the double-buffered megakernel: two tiles of half as many vectors a thread
DB_PREFETCH = 1          # and the tiles after those two asked of L2
SPIN_LIMIT = 1 << 20     # polls of one counter before the megakernel gives up (~tens of ms on a GPU)


# -- the specification: float64 NumPy ------------------------------------------------------------

def gelu64(h: np.ndarray) -> np.ndarray:
    return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))


def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    W, b = inputs["W"].astype(np.float64), inputs["bias"].astype(np.float64)
    x = inputs["x"].astype(np.float64)
    for l in range(W.shape[0]):
        x = gelu64(x @ W[l].T + b[l])  # rows of x are batch rows: (W x)_i = sum_j W[i, j] x_j
    return {"out": x}


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # fresh weights per layer (iid: a transposed index shows), a bias per unit, a different input per batch row
    L, H = size.layers, size.hidden
    sd = GAIN / math.sqrt(H)
    return {"W": (rng.uniform(-1.0, 1.0, (L, H, H)) * (sd * math.sqrt(3.0))).astype(np.float32),
            "bias": rng.uniform(-0.5, 0.5, (L, H)).astype(np.float32),
            "x": rng.standard_normal((size.batch, H)).astype(np.float32)}


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"out": ((size.batch, size.hidden), np.float32)}


class Buffers:
    """The checked arrays, as the flat vectors the kernels index, and the activations between layers."""

    def __init__(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any], stream=0,
                 geometry: dk.Geometry | None = None, threads: int = dk.THREADS,
                 protocol: tuple[Any, Any] = dk.PROTOCOL):
        x = device_array("x", inputs.get("x"), np.float32, (None, None))
        batch, hidden = x.shape
        if 0 in x.shape:
            raise ArgumentError(f"x: shape {tuple(x.shape)}; at least one batch row and one unit are required")
        W = device_array("W", inputs.get("W"), np.float32, (None, hidden, hidden))
        if W.shape[0] == 0:
            raise ArgumentError("W: no layers; shape (layers, hidden, hidden) with layers >= 1 is required")
        bias = device_array("bias", inputs.get("bias"), np.float32, (W.shape[0], hidden))
        out = device_array("out", outputs.get("out"), np.float32, (batch, hidden))
        self.layers, self.batch, self.hidden = W.shape[0], batch, hidden
        self.geo = geometry or dk.geometry(hidden, batch, threads=threads)
        if (self.geo.hidden, self.geo.batch) != (hidden, batch):
            raise ArgumentError(f"a geometry for hidden={self.geo.hidden}, batch={self.geo.batch} was given for "
                                f"arrays of hidden={hidden}, batch={batch}")
        if (why := dk.too_large(self.geo)) is not None:
            raise ArgumentError(why)
        self.W, self.bias, self.x, self.out = (a.reshape(a.size) for a in (W, bias, x, out))
        self.acts = cuda.device_array(max(1, self.layers - 1) * batch * hidden, np.float32, stream=stream)
        self.protocol = protocol
        self.kernels = dk.kernels(self.geo, protocol)

    @property
    def chain(self) -> tuple:
        return self.W, self.bias, self.x, self.acts, self.out


def _limit(size: Size) -> str | None:
    return dk.too_large(dk.geometry(size.hidden, size.batch))


# -- launches ---------------------------------------------------------------------------------------

# -- unfused and fused: a kernel (or three) per layer (per_layer.py, shared with block_chain) ----------

def _tile_bytes(size: Size, bias: bool) -> tuple[int, int]:
    """(read, written) by one layer's tiles: W once; each row's threads read all of x_l (L1 serves the
    block's rows after the first); the writer reads the row's bias once."""
    H, B = size.hidden, size.batch
    return F32 * (H * H + H * B * H + (H if bias else 0)), F32 * B * H


def _tile_launch(size: Size, kernel: Any, bias: bool) -> KernelLaunch:
    geo = dk.geometry(size.hidden, size.batch)
    return KernelLaunch(kernel_name(kernel), geo.tiles, geo.threads, *_tile_bytes(size, bias),
                        read_bytes_in_flight=F32 * geo.vec * geo.per_thread)


PER_LAYER = PerLayer("decode", Buffers, lambda size: dk.kernels(dk.geometry(size.hidden, size.batch)), _tile_launch)


# -- persistent and megakernel: one launch for all layers ---------------------------------------------

def _persistent_signature() -> tuple:
    """The argument types the persistent kernel is compiled for (a GPU sizes its grid from them)."""
    from numba import types
    return (types.float32[::1],) * 5


def persistent_blocks(geo: dk.Geometry) -> int:
    """Tiles per layer, or fewer: as many blocks as can be co-resident (grid sync needs all of them;
    the simulator's grid sync is a block barrier: one block there)."""
    k = dk.kernels(geo).persistent
    return min(geo.tiles, BACKEND.resident_limit(k, _persistent_signature(), geo.threads))


def plan_persistent(size: Size) -> Plan:
    geo = dk.geometry(size.hidden, size.batch)
    read, written = _tile_bytes(size, bias=True)
    return Plan((KernelLaunch(kernel_name(dk.kernels(geo).persistent), persistent_blocks(geo), geo.threads,
                              size.layers * read, size.layers * written,
                              read_bytes_in_flight=F32 * geo.vec * geo.per_thread),))


def bind_persistent(inputs, outputs, stream=0):
    buf = Buffers(inputs, outputs, stream)
    return BACKEND.launcher(buf.kernels.persistent, persistent_blocks(buf.geo), buf.geo.threads, buf.chain, stream)


@dataclass(frozen=True)
class Mega:
    """Which megakernel, and its shape: the exercise's (signal/wait plug in) or the double-buffered one with
    counters or with marked activations (data and flag in one word)."""

    per_sm: int = MEGA_BLOCKS_PER_SM  # blocks per SM, at most the resident ones
    threads: int = dk.THREADS
    row_threads: int | None = None    # None: the geometry's own
    double_buffered: bool = False     # two tiles in flight per block (dk.megakernel_db)
    prefetch: int = DB_PREFETCH       # double-buffered: tiles asked of L2 beyond its two
    marked: bool = False              # double-buffered: data and flag in one word instead of counters
    min_blocks: int = 0               # double-buffered: launch bounds for that many blocks per SM (0: none)

    def __post_init__(self):
        if (self.marked or self.min_blocks) and not self.double_buffered:
            raise ValueError("Mega: marked activations and launch bounds are options of the double-buffered megakernel")

    def geometry(self, hidden: int, batch: int) -> dk.Geometry:
        """The double-buffered megakernel holds two tiles of half the vectors each."""
        return dk.geometry(hidden, batch, threads=self.threads, row_threads=self.row_threads,
                           max_vectors=DB_VECTORS if self.double_buffered else dk.MAX_VECTORS)

    def kernel(self, geo: dk.Geometry, protocol: tuple[Any, Any] = dk.PROTOCOL):
        """The kernel (compiled on first use): the exercise's with `protocol`, or the double-buffered one."""
        if self.double_buffered:
            return dk.megakernel_db(geo, self.prefetch, self.marked, self.min_blocks)
        return dk.kernels(geo, protocol).megakernel

    def blocks(self, geo: dk.Geometry, layers: int) -> int:
        """A few blocks per SM, every one resident (a block that polls must not wait for a slot held by
        another poller); the simulator's persistent grid, its blocks run one after another."""
        resident = BACKEND.persistent_grid(self.kernel(geo), self.signature(), geo.threads)
        return min(self.per_sm * BACKEND.facts().sm_count, resident, layers * geo.tiles)

    def signature(self) -> tuple:
        """The argument types the kernel is compiled for (a GPU sizes its grid from them)."""
        from numba import types
        vec = types.float32[::1]
        acts = types.int64[::1] if self.marked else vec
        return (vec, vec, vec, acts, vec, types.int32[:, :, ::1], types.int32[::1], types.int32[::1], types.int64,
                types.int64[::1])

    def why_not(self, size: Size) -> str | None:
        geo = self.geometry(size.hidden, size.batch)
        return dk.too_large(geo) or (dk.marked_fits(geo) if self.marked else None)


EXERCISE_MEGA = Mega()                       # the registered megakernel: lesson 07's protocol plugs in
DB_MEGA = Mega(double_buffered=True)          # megakernel_db
DB_P0_MEGA = Mega(double_buffered=True, prefetch=0)  # megakernel_db_p0: its two tiles, no L2 look-ahead
MARKED_MEGA = Mega(double_buffered=True, marked=True)  # megakernel_marked


def megakernel_table(geo: dk.Geometry, layers: int, mega: Mega = EXERCISE_MEGA) -> np.ndarray:
    return dk.instruction_table(layers, geo.tiles, mega.blocks(geo, layers), serial=not BACKEND.blocks_run_together)


def _megakernel_bytes(table: np.ndarray, size: Size, threads: int, mega: Mega) -> tuple[int, int]:
    """(read, written) beyond the tiles' weights and biases (_tile_bytes).
    The megakernel: each tile's rows read x_l; every thread reads each instruction (3 words) and the END
    (1 word); thread 0 polls once per waiting instruction (the floor: a GPU polls more while it waits;
    exact on the simulator, where the table never waits), adds 1 per tile (a release add) and 1 per block
    (an atomic add); the last block out zeroes the layers + 1 counters.
    Double-buffered: its threads read the table entries they prefetch too; with counters, it polls and
    adds once per run of a block's consecutive tiles of a layer; marked, a block reads x_l once per run
    (layer 0's floats, a later layer's 16-byte pairs of words; the floor again: a GPU re-reads the words
    that were not there yet), writes each activation as an 8-byte exchange (read and written), every thread
    reads the epoch and the last block out writes it."""
    H, B, L = size.hidden, size.batch, size.layers
    tiles = table[:, :, 0] == dk.OP_TILE
    instructions, blocks = int(tiles.sum()), table.shape[0]
    if not mega.double_buffered:
        starts, table_words = tiles, 3 * instructions + blocks
    else:  # a run starts where the layer differs from the instruction before (or at slot 0)
        starts = tiles.copy()
        starts[:, 1:] &= table[:, 1:, 1] != table[:, :-1, 1]
        table_words = dk.db_table_words(table, mega.prefetch)
    runs = int(starts.sum())
    done = BACKEND.atomic_add_reads * blocks
    if not mega.marked:
        waiting = int((starts & (table[:, :, 1] > 0)).sum())
        x_per_layer = F32 * H * B * H  # each row's threads read all of x_l (L1 serves the block's other rows)
        return (L * x_per_layer + F32 * (threads * table_words + runs + waiting + done),
                F32 * (runs + blocks + L + 1))
    first_runs = int((starts & (table[:, :, 1] == 0)).sum())
    staged = first_runs * F32 * B * H + (runs - first_runs) * 16 * (-(-B * H // 2))
    exchanged = 8 * (L - 1) * B * H
    return (staged + exchanged + F32 * (threads * table_words + threads * blocks + done),
            exchanged + F32 * (blocks + L + 1 + 1))


def plan_megakernel(size: Size, mega: Mega = EXERCISE_MEGA) -> Plan:
    geo = mega.geometry(size.hidden, size.batch)
    table = megakernel_table(geo, size.layers, mega)
    read, written = _tile_bytes(size, bias=True)
    x_read = F32 * size.hidden * size.batch * size.hidden
    extra_read, extra_written = _megakernel_bytes(table, size, geo.threads, mega)
    last = F32 * size.batch * size.hidden  # the last layer's out (a marked megakernel writes the others' words)
    written_total = (last if mega.marked else size.layers * written) + extra_written
    in_flight = F32 * geo.vec * geo.per_thread * (2 if mega.double_buffered else 1)
    return Plan((KernelLaunch(kernel_name(mega.kernel(geo)), table.shape[0], geo.threads,
                              size.layers * (read - x_read) + extra_read, written_total,
                              read_bytes_in_flight=in_flight),))


class DependencyTimeout(RuntimeError):
    """A megakernel block gave up waiting for a layer's counter: the table made it wait on work that
    could not finish (or a block never ran)."""


class MegakernelLaunch:
    """The megakernel bound once (table, counters, error flag); refuses to go on after a timed-out wait."""

    def __init__(self, buf: Buffers, table: np.ndarray, spin_limit: int, stream, stamped: bool = False,
                 mega: Mega = EXERCISE_MEGA):
        self.table, self.layers, self.tiles = table, buf.layers, buf.geo.tiles
        # a count per layer, the finished blocks, and (marked) the last launch's epoch
        self.counters = cuda.to_device(np.zeros(buf.layers + 2, np.int32), stream=stream)
        self.gave_up = GiveUpWord()  # a waiting block of layer l stores l: layer l - 1 never completed
        # %globaltimer stamps, 3 per tile (start, after the wait, after the count), or a 1-word stand-in
        self.stamps = cuda.to_device(np.zeros(3 * buf.layers * buf.geo.tiles if stamped else 1, np.int64),
                                     stream=stream)
        chain = buf.chain
        if mega.marked:  # the activations as marked words, epoch 0: none carries a launch's epoch yet
            words = np.zeros(max(1, buf.layers - 1) * dk.marked_slot(buf.geo), np.int64)
            chain = (*chain[:3], cuda.to_device(words, stream=stream), chain[4])
        args = (*chain, cuda.to_device(table, stream=stream), self.counters, self.gave_up.word, np.int64(spin_limit),
                self.stamps)
        self.kernel = mega.kernel(buf.geo, buf.protocol)
        self.geo = buf.geo
        # per block: tiles of weights held in registers, and asked of L2 beyond them
        self.tiles_held = (2, mega.prefetch) if mega.double_buffered else (1, 1)
        self._launch = BACKEND.launcher(self.kernel, table.shape[0], buf.geo.threads, args, stream)
        self.args = args

    def timed_out_waiting_for(self) -> int | None:
        """A layer whose counter a block gave up on in an earlier launch, or None (when one layer never
        completes, the blocks waiting on the layers after it give up too: any of them may be named)."""
        return self.gave_up.at()

    def raise_if_timed_out(self) -> None:
        if (layer := self.timed_out_waiting_for()) is not None:
            raise DependencyTimeout(
                f"decode_megakernel: a block gave up waiting for layer {layer} to count all its tiles (the "
                f"{int(self.table.shape[0])}-block table makes a block wait on work that did not finish; on the "
                f"simulator blocks run one after another, so a block may only wait on blocks before it); the "
                f"output of that launch is wrong")

    def __call__(self, target=None) -> None:
        self.raise_if_timed_out()
        self._launch(target)

    def timeline(self) -> list[dict[str, float]]:
        """Per layer, from the last launch's stamps (a stamped launch only), in us from the first tile's start:
        when its first tile started, when its first and last tiles were let past their wait, when its last
        tile was counted."""
        if self.stamps.size == 1:
            raise ValueError("this megakernel was bound without stamps (bind_megakernel_with(..., stamped=True))")
        st = self.stamps.copy_to_host().reshape(self.layers, self.tiles, 3).astype(np.float64)
        t0 = st[:, :, 0].min()
        return [{"layer": l, "start_us": float(st[l, :, 0].min() - t0) / 1e3,
                 "first_go_us": float(st[l, :, 1].min() - t0) / 1e3, "last_go_us": float(st[l, :, 1].max() - t0) / 1e3,
                 "end_us": float(st[l, :, 2].max() - t0) / 1e3} for l in range(self.layers)]


def bind_megakernel_with(inputs, outputs, stream=0, *, table: np.ndarray | None = None,
                         spin_limit: int = SPIN_LIMIT, geometry: dk.Geometry | None = None,
                         mega: Mega = EXERCISE_MEGA, stamped: bool = False,
                         protocol: tuple[Any, Any] = dk.PROTOCOL) -> MegakernelLaunch:
    """The megakernel with the default table, geometry and (signal, wait) protocol, or the ones given (the
    tests' way to make a block wait in vain or to run GPU-shaped rows on the simulator; lesson 07's check of
    a student's protocol); `mega`: another megakernel or shape (the double-buffered ones have their own
    protocols: a (signal, wait) plugs into the exercise's only)."""
    if mega.double_buffered and protocol is not dk.PROTOCOL:
        raise ArgumentError("the double-buffered megakernel has its own protocol (one count per run of tiles, or "
                            "marked activations); a (signal, wait) protocol plugs into the megakernel only")
    x = inputs.get("x")
    if geometry is None and x is not None and len(getattr(x, "shape", ())) == 2:
        geometry = mega.geometry(x.shape[1], x.shape[0])
    buf = Buffers(inputs, outputs, stream, geometry, mega.threads, protocol)
    if mega.marked and (why := dk.marked_fits(buf.geo)) is not None:
        raise ArgumentError(why)
    if table is None:
        table = megakernel_table(buf.geo, buf.layers, mega)
    return MegakernelLaunch(buf, np.ascontiguousarray(table, np.int32), spin_limit, stream, stamped, mega)


def megakernel_variant(name: str, mega: Mega = EXERCISE_MEGA, about: str = "") -> Variant:
    """A megakernel of the given kind and shape as a variant (the benchmark times other shapes beside the
    registered ones)."""
    return Variant(name, "persistent", about, lambda size: plan_megakernel(size, mega),
                   lambda inputs, outputs, stream=0: bind_megakernel_with(inputs, outputs, stream, mega=mega),
                   limit=mega.why_not)


WORKLOAD = register(Workload(
    name="decode",
    about="x_{l+1} = gelu(W_l x_l + b_l) through all layers, float32: a launch per op to one megakernel",
    axes=(Axis("hidden", sim=13, gpu=1024, sweep=(1024, 2048, 4096), sim_sweep=(20,), unit="units",
               about="rows (and columns) of each W_l"),
          Axis("layers", sim=3, gpu=8, sweep=(8, 16), sim_sweep=(1,), unit="layers",
               about="dense layers, each needing all of the one before"),
          Axis("batch", sim=2, gpu=1, sweep=(1, 4, 16), unit="rows", about="independent inputs (tokens)")),
    make_inputs=make_inputs, reference=reference, output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=2e-5),
))
for _name, _pattern, _about, _plan, _bind in (
        ("unfused", "unfused", "per layer: a matvec kernel writes W x to memory, a bias kernel, a GELU kernel",
         PER_LAYER.plan_unfused, PER_LAYER.bind_unfused),
        ("fused", "fused", "one kernel per layer: matvec + bias + GELU epilogue, 16-byte weight loads",
         PER_LAYER.plan_layers(False), PER_LAYER.bind_fused),
        ("graph", "graph", "the fused layer launches captured once in a CUDA graph, replayed",
         PER_LAYER.plan_layers(False), PER_LAYER.bind_graph),
        ("graph_pdl", "pdl", "as graph, with PDL: each layer loads its weights before griddepcontrol.wait",
         PER_LAYER.plan_layers(True), PER_LAYER.bind_graph_pdl),
        ("persistent", "persistent", "one cooperative kernel, a grid barrier between layers, the next layer's "
         "weights loaded before it", plan_persistent, bind_persistent)):
    WORKLOAD.add(Variant(_name, _pattern, _about, _plan, _bind, limit=_limit))
WORKLOAD.add(megakernel_variant(
    "megakernel", EXERCISE_MEGA, f"up to {MEGA_BLOCKS_PER_SM} resident blocks per SM run an instruction table; a "
    "counter per layer (the producer's release add after its stores, the consumer's bounded acquire poll); each "
    "tile's weights loaded before its wait, the block's next tile asked of L2"))
WORKLOAD.add(megakernel_variant(
    "megakernel_db", DB_MEGA, "megakernel with two tiles in flight per block (the next tile's weights load into "
    "a second register buffer while this one waits and computes); one poll per layer per block, one release add "
    "per run of a block's tiles of a layer"))
WORKLOAD.add(megakernel_variant(
    "megakernel_db_p0", DB_P0_MEGA, "megakernel_db asking L2 for no tile beyond its two (its two register tiles "
    "are the only weights a block has in flight)"))
WORKLOAD.add(megakernel_variant(
    "megakernel_marked", MARKED_MEGA, "megakernel_db with data and flag in one word: each activation stored with "
    "the launch's epoch in one 64-bit exchange; a block stages x_l in shared memory, polling the words themselves: "
    "no counter, fence or acquire between layers"))

from . import protocol  # noqa: E402,F401  (it registers lesson 07's graded exercise on the megakernel)
