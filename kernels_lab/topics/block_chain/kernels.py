"""The block chain's kernels: one tile of a locally connected layer, and four ways to chain the layers.

A tile is one group of G consecutive units of one layer (the last group may be partial). Unit r of
group t reads the 3G inputs of groups t - 1, t, t + 1 (those inside [0, hidden)): its weights are the
row W_l[r, 0:3G], column c standing for input (t - 1) G + c. A tile's block gives each unit
ROW_THREADS threads; thread `lane` holds the row's columns lane, lane + ROW_THREADS, ... in registers:

    load_tile(W, l, tile, w)      W_l's rows of the tile -> registers (needs nothing of layer l - 1)
    dot(x, acts, l, tile, w, acc) this thread's part of the tile's sums, x_l read from global memory
    combine(tile, acc, part)      decode's: the row's parts added through shared memory (ROW_THREADS of them,
                                  no shuffle stage: decode's geometry with slot_lanes 1, rows = G)
    finish(...)                   decode's: + bias, GELU, store x_{l+1}

What sits between load_tile and dot is what the variants differ in: a kernel boundary (fused, graph),
griddepcontrol.wait (graph_pdl), or the acquire polls of the three tiles of layer l - 1 that the
tile reads (the megakernel, decode's signal/wait protocol on a counter per tile).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...backend import BACKEND
from ...intrinsics import float_bits, globaltimer, grid_dependency_wait, launch_dependents, load_marked2_sys, nanosleep
from ...runtime import cuda
from ..decode import kernels as dk
from ..decode.kernels import signal_release, wait_acquire
from ..elementwise.workload import gelu

ROW_THREADS = BACKEND.size(gpu=4, simulator=2)  # threads per unit (row of W): 3G / 4 = 24 weights each at G = 32
MAX_WEIGHTS = 64                                 # weights per thread in registers
MAX_THREADS = 1024                               # per block: G x ROW_THREADS
NEIGHBOURS = 3                                   # tiles of layer l - 1 a tile reads: t - 1, t, t + 1
MEGA_BLOCKS_PER_SM = 4                           # the megakernels' launch bounds (128 registers at 128 threads)
# a stamped megakernel's %globaltimer stamps, per item k = l * T + tile at STAMPS * k + ...: decode's start and
# after-the-wait, then two more (decode's third, after its count, is our RELEASED)
STAMPS = 4
STARTED, WAITED, COMPUTED, RELEASED = range(STAMPS)
_INLINE = {"forceinline": True}


@dataclass(frozen=True)
class Geometry:
    """How (hidden, group) maps onto threads: every number a kernel is compiled with."""

    hidden: int
    group: int
    row_threads: int = ROW_THREADS

    @property
    def band(self) -> int:
        """Weights per unit: the 3 groups it reads."""
        return NEIGHBOURS * self.group

    @property
    def per_thread(self) -> int:
        return -(-self.band // self.row_threads)

    @property
    def threads(self) -> int:
        return self.group * self.row_threads

    @property
    def tiles(self) -> int:
        return -(-self.hidden // self.group)

    def columns(self, tile: int) -> int:
        """Inputs a unit of `tile` reads (fewer at either edge)."""
        return min(self.hidden, (tile + 2) * self.group) - max(0, (tile - 1) * self.group)

    def rows(self, tile: int) -> int:
        return min(self.group, self.hidden - tile * self.group)

    def band_reads(self) -> int:
        """Weights (and inputs) one layer's tiles read: each unit, each input it reads, once."""
        return sum(self.rows(t) * self.columns(t) for t in range(self.tiles))


def too_large(geo: Geometry) -> str | None:
    """Why these kernels cannot run this group size, or None."""
    if geo.threads > MAX_THREADS:
        return (f"group={geo.group}: {geo.row_threads} threads per unit make {geo.threads} threads per block, more "
                f"than {MAX_THREADS}; at most group={MAX_THREADS // geo.row_threads}")
    if geo.per_thread > MAX_WEIGHTS:
        return f"group={geo.group}: {geo.per_thread} weights per thread, more than the {MAX_WEIGHTS} held in registers"
    return None


def decode_geometry(geo: Geometry) -> dk.Geometry:
    """The decode geometry whose tiles are ours: G rows of ROW_THREADS threads, batch 1, the row's parts added
    through shared memory (no shuffle stage), so that decode's load_bias, combine and finish serve as they are."""
    return dk.geometry(geo.hidden, 1, threads=geo.threads, slot_lanes=1, row_threads=geo.row_threads)


@dataclass(frozen=True)
class TileOps:
    load_tile: Any   # (W, l, tile, w): the tile's band of W_l -> registers
    dot: Any         # (x, acts, l, tile, w, acc): acc[0] = this thread's part of its unit's sum
    load_bias: Any   # decode's: (bias, l, tile) -> the unit's bias in its writer, 0 elsewhere
    combine: Any     # decode's: (tile, acc, part) -> (unit, writer), acc[0] the unit's sum in its writer
    finish: Any      # decode's: (bb, acts, out, l, layers, r, acc): + bias, GELU, store


@lru_cache(maxsize=None)
def tile_ops(geo: Geometry) -> TileOps:
    H, G, TPR, K, BAND = geo.hidden, geo.group, geo.row_threads, geo.per_thread, geo.band
    EXACT = BAND % TPR == 0  # every thread's every column is inside the band: that guard folds away

    @BACKEND.jit(device=True, **_INLINE)
    def load_tile(W, l, tile, w):
        tid = cuda.threadIdx.x
        r = tile * G + tid // TPR
        first = (tile - 1) * G  # the input column 0 of the band stands for
        if r < H:
            for k in range(K):
                c = tid % TPR + TPR * k
                if (EXACT or c < BAND) and first + c >= 0 and first + c < H:
                    w[k] = W[(l * H + r) * BAND + c]

    @BACKEND.jit(device=True, **_INLINE)
    def dot(x, acts, l, tile, w, acc):
        tid = cuda.threadIdx.x
        r = tile * G + tid // TPR
        first = (tile - 1) * G
        src = x if l == 0 else acts  # layer l's input: x, else the layer before's output
        base = 0 if l == 0 else (l - 1) * H
        acc[0] = np.float32(0)
        if r < H:
            for k in range(K):
                c = tid % TPR + TPR * k
                if (EXACT or c < BAND) and first + c >= 0 and first + c < H:
                    acc[0] += w[k] * src[base + first + c]

    shared = dk.tile_ops(decode_geometry(geo))
    return TileOps(load_tile, dot, shared.load_bias, shared.combine, shared.finish)


@BACKEND.jit(device=True, **_INLINE)
def retire(counters, flags, last):
    """Every thread of a block that has run its list: thread 0 counts the block done (counters[flags]);
    the last block out zeroes the flags and that count, all its threads at once, for the next launch, and
    returns True."""
    tid = cuda.threadIdx.x
    if tid == 0:
        cuda.threadfence()  # this block's counts land before its 'done'
        last[0] = np.int32(cuda.atomic.add(counters, flags, 1) == cuda.gridDim.x - 1)
    cuda.syncthreads()
    if last[0] != 0:
        for k in range(tid, flags + 1, cuda.blockDim.x):
            counters[k] = 0
    return last[0] != 0


@dataclass(frozen=True)
class ChainKernels:
    matvec: Any      # unfused: z = W_l x_l (the band's sums), one tile per block
    layer: Any       # fused: x_{l+1} = gelu(W_l x_l + b_l), one tile per block
    layer_pdl: Any   # as layer, weights loaded before griddepcontrol.wait
    megakernel: Any  # every layer in one launch, a counter per tile
    marked: Any      # every layer in one launch, each activation a word carrying its launch's epoch


@lru_cache(maxsize=None)
def kernels(geo: Geometry) -> ChainKernels:
    """The kernels for one geometry (its numbers compile-time constants: w[] stays in registers)."""
    H, T, K, G, TPR = geo.hidden, geo.tiles, geo.per_thread, geo.group, geo.row_threads
    ops = tile_ops(geo)
    load_tile, load_bias, dot, combine, finish = ops.load_tile, ops.load_bias, ops.dot, ops.combine, ops.finish

    def chain_matvec(W, x, acts, l, z):
        # unfused, the first of three kernels per layer: z = W_l x_l through memory
        w = cuda.local.array(K, np.float32)
        acc = cuda.local.array(1, np.float32)
        part = cuda.shared.array((G, TPR, 1), np.float32)
        tile = cuda.blockIdx.x
        load_tile(W, l, tile, w)
        dot(x, acts, l, tile, w, acc)
        r, writer = combine(tile, acc, part)
        if writer:
            z[r] = acc[0]

    def one_layer(pdl: bool):
        """The fused layer's tile (pdl: with griddepcontrol between the weights and x_l; a compile-time switch)."""
        @BACKEND.jit(device=True, **_INLINE)
        def layer_tile(W, bias, x, acts, out, l, trigger):
            w = cuda.local.array(K, np.float32)
            acc = cuda.local.array(1, np.float32)
            part = cuda.shared.array((G, TPR, 1), np.float32)
            tile = cuda.blockIdx.x
            load_tile(W, l, tile, w)  # the weights and bias do not depend on the layer before (PDL: it still runs)
            bb = load_bias(bias, l, tile)
            if pdl:
                if trigger:
                    launch_dependents()
                grid_dependency_wait()  # the whole layer before has finished and flushed: all of it, not 3 tiles
            dot(x, acts, l, tile, w, acc)
            r, writer = combine(tile, acc, part)
            if writer:
                finish(bb, acts, out, l, bias.size // H, r, acc)
        return layer_tile

    fused_tile, pdl_tile = one_layer(False), one_layer(True)

    def chain_layer(W, bias, x, acts, out, l):
        fused_tile(W, bias, x, acts, out, l, False)

    def chain_layer_pdl(W, bias, x, acts, out, l, trigger):
        pdl_tile(W, bias, x, acts, out, l, trigger)

    def chain_megakernel(W, bias, x, acts, out, counters, status, spin_limit, stamps):
        # the layers' tiles in layer-major order, item k = l * T + tile, split into gridDim.x contiguous runs:
        # block b runs items [b N / grid, (b + 1) N / grid); every item a tile waits on comes earlier in that
        # order (an earlier block, or earlier in its own run), so blocks that run one after another finish too.
        # counters[k] counts item k done (0 or 1), counters[N] the blocks done. stamps (when it has room,
        # STAMPS per item; else a 1-word stand-in): thread 0's %globaltimer at the item's start, after its wait,
        # before its release add, after it
        w = cuda.local.array(K, np.float32)
        acc = cuda.local.array(1, np.float32)
        part = cuda.shared.array((G, TPR, 1), np.float32)
        last = cuda.shared.array(1, np.int32)
        layers = bias.size // H
        n = layers * T
        tid, blk, grid = cuda.threadIdx.x, cuda.blockIdx.x, cuda.gridDim.x
        stamped = stamps.size > 1
        end = (blk + 1) * n // grid
        for k in range(blk * n // grid, end):
            l, tile = k // T, k % T
            if stamped and tid == 0:
                stamps[STAMPS * k + STARTED] = globaltimer()
            load_tile(W, l, tile, w)  # before the wait: W_l needs nothing of layer l - 1
            bb = load_bias(bias, l, tile)
            if l > 0:
                late = False
                near = tile - 1 + tid  # threads 0, 1, 2 poll the tiles t - 1, t, t + 1 of layer l - 1, at once
                if tid < 3 and near >= 0 and near < T:
                    late = not wait_acquire(counters, (l - 1) * T + near, 1, spin_limit)
                if cuda.syncthreads_or(np.int32(late)):  # after the barrier the block reads what they acquired
                    if tid == 0:
                        status[0] = l  # a tile of layer l - 1 never came: an error for the host, never a hang
                    break
            if stamped and tid == 0:
                stamps[STAMPS * k + WAITED] = globaltimer()
            dot(x, acts, l, tile, w, acc)
            r, writer = combine(tile, acc, part)
            if writer:
                finish(bb, acts, out, l, layers, r, acc)
            cuda.syncthreads()  # every store of the tile is issued, then released with its count
            if tid == 0:
                if stamped:
                    stamps[STAMPS * k + COMPUTED] = globaltimer()
                signal_release(counters, k)
                if stamped:
                    stamps[STAMPS * k + RELEASED] = globaltimer()  # the add issued (its fence done), not arrived
            if k + 1 < end:
                cuda.syncthreads()  # the block's next tile may read this one: its pollers start after the count
        retire(counters, n, last)

    BAND, SLOT, PAIRS = geo.band, marked_slot(geo), geo.band // 2

    @BACKEND.jit(device=True, **_INLINE)
    def stage(x, marks, l, tile, xs, epoch, spin_limit):
        """The tile's 3G inputs into shared memory (0 outside [0, hidden)), each thread a share: layer 0's from x;
        a later layer's as 16-byte pairs of marked words, all loaded at once, and again after a pause (at most
        spin_limit more times) while any inside [0, hidden) lacks this launch's epoch. True when one never got it."""
        tid = cuda.threadIdx.x
        first = (tile - 1) * G
        if l == 0:
            for c in range(tid, BAND, cuda.blockDim.x):
                xs[c] = x[first + c] if first + c >= 0 and first + c < H else np.float32(0)
            return False
        pair0 = ((l - 1) * SLOT + tile * G) // 2  # the slot's word G + j holds unit j: word tG is unit (t - 1) G
        spins = 0
        late = True
        while late and spins <= spin_limit:
            if spins > 0:
                nanosleep(dk.POLL_SLEEP_NS)
            late = False
            for p in range(tid, PAIRS, cuda.blockDim.x):
                a0, m0, a1, m1 = load_marked2_sys(marks, pair0 + p)
                j = first + 2 * p
                xs[2 * p] = a0 if j >= 0 and j < H else np.float32(0)
                xs[2 * p + 1] = a1 if j + 1 >= 0 and j + 1 < H else np.float32(0)
                late = late or (j >= 0 and j < H and m0 != epoch) or (j + 1 >= 0 and j + 1 < H and m1 != epoch)
            spins += 1
        return late

    @BACKEND.jit(device=True, **_INLINE)
    def dot_staged(xs, tile, w, acc):
        """acc[0] = this thread's part of its unit's sum, the inputs from shared memory."""
        tid = cuda.threadIdx.x
        r = tile * G + tid // TPR
        first = (tile - 1) * G
        acc[0] = np.float32(0)
        if r < H:
            for k in range(K):
                c = tid % TPR + TPR * k
                if c < BAND and first + c >= 0 and first + c < H:
                    acc[0] += w[k] * xs[c]

    def chain_megakernel_marked(W, bias, x, marks, out, counters, status, spin_limit, stamps):
        # the items and their split as chain_megakernel's; no counter between layers: unit j of layer l < L - 1
        # is the word marks[l * SLOT + G + j] = (epoch << 32) | its float's bits, written in one 64-bit exchange
        # (single-copy atomic: a reader sees the old word or the new one, whole), so the value arrives with its
        # flag. counters[0] counts the blocks done, counters[1] holds the last launch's epoch. stamps as
        # chain_megakernel's: the wait is the staging of the inputs (polls and loads at once), the release thread
        # 0's own exchange (unit 0 of the tile; the other units' writers issue theirs beside it)
        w = cuda.local.array(K, np.float32)
        acc = cuda.local.array(1, np.float32)
        part = cuda.shared.array((G, TPR, 1), np.float32)
        xs = cuda.shared.array(BAND, np.float32)
        last = cuda.shared.array(1, np.int32)
        layers = bias.size // H
        n = layers * T
        tid, blk, grid = cuda.threadIdx.x, cuda.blockIdx.x, cuda.gridDim.x
        epoch = counters[1] + 1  # this launch's
        stamped = stamps.size > 1
        end = (blk + 1) * n // grid
        for k in range(blk * n // grid, end):
            l, tile = k // T, k % T
            if stamped and tid == 0:
                stamps[STAMPS * k + STARTED] = globaltimer()
            load_tile(W, l, tile, w)  # before the wait: W_l needs nothing of layer l - 1
            bb = load_bias(bias, l, tile)
            if cuda.syncthreads_or(np.int32(stage(x, marks, l, tile, xs, epoch, spin_limit))):
                if tid == 0:
                    status[0] = l  # a word of layer l - 1 never came: an error for the host, never a hang
                break
            if stamped and tid == 0:
                stamps[STAMPS * k + WAITED] = globaltimer()
            dot_staged(xs, tile, w, acc)
            r, writer = combine(tile, acc, part)
            if writer:
                y = gelu(acc[0] + bb, bb, bb)
                if stamped and tid == 0:
                    stamps[STAMPS * k + COMPUTED] = globaltimer()
                if l == layers - 1:
                    out[r] = y
                else:
                    word = (np.int64(epoch) << 32) | (np.int64(float_bits(y)) & 0xFFFFFFFF)
                    cuda.atomic.exch(marks, l * SLOT + G + r, word)
                if stamped and tid == 0:
                    stamps[STAMPS * k + RELEASED] = globaltimer()
            if k + 1 < end:
                cuda.syncthreads()  # the block's next tile may read this one: its loads start after these stores
        if retire(counters, 0, last) and tid == 0:
            counters[1] = epoch  # the next launch's blocks read it after this one has ended

    built = {fn.__name__: BACKEND.jit(fn, fastmath=True) for fn in (chain_matvec, chain_layer, chain_layer_pdl)}
    # the megakernels' registers capped so that MEGA_BLOCKS_PER_SM blocks fit an SM: a block per (layer, tile)
    # at hidden 2048 (512 of 128 threads) is resident at once on 132 SMs (uncapped: 128 and 159 registers)
    bounds = {"launch_bounds": (geo.threads, MEGA_BLOCKS_PER_SM)}
    built.update({fn.__name__: BACKEND.jit(fn, fastmath=True, **bounds)
                  for fn in (chain_megakernel, chain_megakernel_marked)})
    return ChainKernels(built["chain_matvec"], built["chain_layer"], built["chain_layer_pdl"],
                        built["chain_megakernel"], built["chain_megakernel_marked"])


def marked_slot(geo: Geometry) -> int:
    """Words per layer in the marked activations: a group of padding each side of the units (tile t's 3 groups are
    the words tG .. tG + 3G of its layer, in 16-byte pairs when G is even), made even."""
    words = (geo.tiles + 2) * geo.group
    return words + words % 2


def marked_fits(geo: Geometry) -> str | None:
    """Why the marked megakernel cannot run this group, or None."""
    if geo.group % 2:
        return (f"group={geo.group}: the marked megakernel loads its inputs as 16-byte pairs of words, from a word "
                f"that is a multiple of the group: an even group is required")
    return None
