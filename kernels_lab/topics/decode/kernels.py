"""The decode workload's kernels: one dense layer's tile, and the five ways to chain the layers.

All activations are flat float32 vectors: x (batch x hidden, the input), acts ((layers - 1) x batch x
hidden, the layers' outputs but the last) and out (batch x hidden); W is layers x hidden x hidden and
bias layers x hidden, flat too, so that a 16-byte load takes a vector index (intrinsics.load4).

A tile is `rows` consecutive rows of one layer's W. Its block gives each row `row_threads` threads;
thread `lane` of a row holds the row's vectors lane, lane + row_threads, ... in registers (`per_thread`
of them, 16 bytes each when hidden is a multiple of 4: the guards fold away at the GPU's sizes), so
that a tile is loaded in one go, every load in flight at once, before anything waits:

    load_tile(W, l, tile, w)        W_l's rows of this tile -> registers (needs nothing of layer l - 1)
    row_sums(x, acts, l, tile, ...) (W_l x_l) for those rows: multiply with x_l, add across the row's
                                    threads (warp shuffles on a GPU, then shared memory across warps)
    finish(...)                     + bias, GELU, store x_{l+1} (the epilogue: no trip through memory)

Every kernel below is these three steps; they differ in what sits between load_tile and row_sums:
nothing (a kernel per layer, stream order is the wait), griddepcontrol.wait (PDL), a grid barrier, or
a poll of the layer before's counter (the megakernel).

The simulator runs every thread as a Python thread: there a row starts at 4 threads and has no shuffle
stage (SLOT_LANES = 1: each thread posts its own partial sum); the kernels' code is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...backend import BACKEND
from ...intrinsics import (add_release_gpu, float_bits, globaltimer, grid_dependency_wait, launch_dependents, load4,
                          load_acquire_gpu, load_marked2_sys, nanosleep, prefetch_l2)
from ...reduce import warp_sum
from ...runtime import cuda
from ..elementwise.workload import gelu

THREADS = BACKEND.size(gpu=256, simulator=8)   # per tile's block
SLOT_LANES = BACKEND.size(gpu=32, simulator=1)  # threads whose sums one shuffle stage adds (a warp on a GPU)
ROW_THREADS = BACKEND.size(gpu=32, simulator=4)  # the fewest threads per row (a warp on a GPU)
MAX_VECTORS = 16                        # vectors of W per thread: 64 registers of weights at most
MAX_BATCH = 32                          # partial sums per thread (registers)
MAX_STAGED = 8192                       # floats of x_l the marked megakernel stages in shared memory (32 KB)
EW_BLOCK = BACKEND.size(gpu=256, simulator=32)  # the unfused bias and GELU kernels: one thread per element
POLL_SLEEP_NS = 32                      # between two polls of a counter
OP_END, OP_TILE = 0, 1                  # the megakernel's opcodes
_INLINE = {"forceinline": True}


@dataclass(frozen=True)
class Geometry:
    """How one (hidden, batch) maps onto threads: every number a kernel is compiled with."""

    hidden: int
    batch: int
    vec: int           # floats per load: 4 (16-byte loads) when hidden % 4 == 0, else 1
    row_threads: int   # threads per row of W
    per_thread: int    # vectors of the row each thread holds
    threads: int       # per block
    slot_lanes: int    # threads a warp shuffle adds before the sums go through shared memory (1: none)

    @property
    def vectors(self) -> int:
        return self.hidden // self.vec

    @property
    def rows(self) -> int:
        """Rows per tile: one block's."""
        return self.threads // self.row_threads

    @property
    def tiles(self) -> int:
        return -(-self.hidden // self.rows)

    def tile_rows(self, tile: int) -> int:
        """Rows of `tile` inside the matrix (the last tile may be partial)."""
        return min(self.rows, self.hidden - tile * self.rows)


def geometry(hidden: int, batch: int, *, threads: int = THREADS, slot_lanes: int = SLOT_LANES,
             row_threads: int | None = None, max_vectors: int = MAX_VECTORS) -> Geometry:
    """The back-end's geometry for (hidden, batch); the keywords give another (the tests run GPU-shaped
    rows, warp shuffles included, on the simulator); max_vectors: vectors of W a thread holds for one tile
    (the double-buffered megakernel holds two tiles: half as many each)."""
    vec = 4 if hidden % 4 == 0 else 1
    vectors = hidden // vec
    if row_threads is None:  # the fewest (a power of two) that keep each thread at MAX_VECTORS or fewer
        # (half as many past batch 4: the loops over vectors x batch rows must stay short enough to unroll,
        # or w[] goes to local memory)
        budget = max_vectors if batch <= 4 else max_vectors // 2
        row_threads = ROW_THREADS
        while row_threads * budget < vectors and row_threads < threads:
            row_threads *= 2
    if threads % row_threads or row_threads % slot_lanes:
        raise ValueError(f"geometry: {threads} threads per block, {row_threads} per row, {slot_lanes} per shuffle: "
                         f"each must divide the one before")
    return Geometry(hidden, batch, vec, row_threads, -(-vectors // row_threads), threads, slot_lanes)


def too_large(geo: Geometry) -> str | None:
    """Why these kernels cannot hold this size's tile in registers, or None."""
    if geo.per_thread > MAX_VECTORS:
        return (f"hidden={geo.hidden}: a row of W needs {geo.per_thread} vectors per thread over {geo.row_threads} "
                f"threads, more than the {MAX_VECTORS} a thread holds in registers; at most hidden="
                f"{geo.threads * MAX_VECTORS * 4} (a multiple of 4) or {geo.threads * MAX_VECTORS} (otherwise)")
    if geo.batch > MAX_BATCH:
        return f"batch={geo.batch}: each thread keeps one partial sum per batch row, at most {MAX_BATCH}; split the batch"
    return None


@dataclass(frozen=True)
class DecodeKernels:
    matvec: Any       # unfused: z = W_l x_l
    layer: Any        # fused: x_{l+1} = gelu(W_l x_l + b_l), one tile per block
    layer_pdl: Any    # as layer, weights loaded before griddepcontrol.wait
    persistent: Any   # all layers, a grid barrier between them
    megakernel: Any   # all layers, an instruction table and a counter per layer


# -- the megakernel's dependency protocol (CUTLASS's arrive / wait pattern), thread 0 of a block each --------

@BACKEND.jit(device=True, **_INLINE)
def signal_release(counters, k):
    """One more tile of layer k is done. Called after a block barrier: the block's stores of the tile are
    issued, and the release makes them visible GPU-wide before the count (fence and add in one instruction)."""
    add_release_gpu(counters, k, 1)


@BACKEND.jit(device=True, **_INLINE)
def wait_acquire(counters, k, tiles, spin_limit):
    """Poll until all `tiles` tiles of layer k are counted: an acquire load (re-read every time, and the reads
    after it, the block's after a barrier, see what the producers stored before their count), a pause between
    polls, at most spin_limit + 1 polls. False when it gave up."""
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, k) >= tiles:
            return True
        nanosleep(POLL_SLEEP_NS)
        spins += 1
    return False


PROTOCOL = (signal_release, wait_acquire)


@BACKEND.jit(device=True, **_INLINE)
def retire_block(counters, layers):
    """Thread 0 of a block that has run its list: count the block done; the last block out zeroes the
    counters, so that the next launch counts from zero, and returns True."""
    cuda.threadfence()  # this block's counts land before its 'done' (off the critical path)
    if cuda.atomic.add(counters, layers, 1) == cuda.gridDim.x - 1:
        for k in range(layers + 1):
            counters[k] = 0
        return True
    return False


@dataclass(frozen=True)
class TileOps:
    """One geometry's device functions for a tile (compile-time constants folded in), shared by every kernel."""

    load_tile: Any      # (W, l, tile, w): W_l's rows of the tile -> registers w
    load_bias: Any      # (bias, l, tile) -> the row's bias in its writer, 0 elsewhere
    prefetch_tile: Any  # (W, l, tile, layers): the tile's weights asked of L2, no register held
    row_sums: Any       # (x, acts, l, tile, w, acc, part) -> (row, writer); two block barriers: a dot, combine
    dot_shared: Any     # (xs, 0, tile, w, acc): this thread's part of the rows' sums, x_l from shared memory
    combine: Any        # (tile, acc, part) -> (row, writer): the parts added; two block barriers
    finish: Any         # (bb, acts, out, l, layers, r, acc): + bias, GELU, store


@lru_cache(maxsize=None)
def tile_ops(geo: Geometry) -> TileOps:
    """The three steps of a tile (and the bias and the L2 prefetch) for one geometry."""
    H, B, VEC, TPR, V = geo.hidden, geo.batch, geo.vec, geo.row_threads, geo.per_thread
    NV, ROWS, T = geo.vectors, geo.rows, geo.tiles
    LANES = geo.slot_lanes
    SLOTS = TPR // LANES
    EXACT = NV % TPR == 0  # every thread's every vector is inside the row: the guard folds away

    @BACKEND.jit(device=True, **_INLINE)
    def lane_total(v):
        return v if LANES == 1 else warp_sum(v)

    @BACKEND.jit(device=True, **_INLINE)
    def load_tile(W, l, tile, w):
        tid = cuda.threadIdx.x
        r = tile * ROWS + tid // TPR
        lane = tid % TPR
        if r < H:
            row = (l * H + r) * NV  # the row's first vector
            for k in range(V):
                v = lane + TPR * k
                if EXACT or v < NV:
                    if VEC == 4:
                        w0, w1, w2, w3 = load4(W, row + v)
                        w[4 * k] = w0
                        w[4 * k + 1] = w1
                        w[4 * k + 2] = w2
                        w[4 * k + 3] = w3
                    else:
                        w[k] = W[row + v]

    @BACKEND.jit(device=True, **_INLINE)
    def load_bias(bias, l, tile):
        """The row's bias in its writer (0 elsewhere): fetched with the weights, before any wait."""
        tid = cuda.threadIdx.x
        r = tile * ROWS + tid // TPR
        if tid % TPR == 0 and r < H:
            return bias[l * H + r]
        return np.float32(0)

    @BACKEND.jit(device=True, **_INLINE)
    def prefetch_tile(W, l, tile, layers):
        """Ask L2 for the weights of a tile this block runs next (nothing if there is none): they stream
        from DRAM while this tile waits and computes, with no register held."""
        tid = cuda.threadIdx.x
        r = tile * ROWS + tid // TPR
        if tile < T and l < layers and r < H:
            row = (l * H + r) * NV
            for k in range(V):
                v = tid % TPR + TPR * k
                if EXACT or v < NV:
                    prefetch_l2(W, (row + v) * VEC)

    @BACKEND.jit(device=True, **_INLINE)
    def global4(src, base, b, v):
        return load4(src, base + b * NV + v)

    @BACKEND.jit(device=True, **_INLINE)
    def shared4(xs, base, b, v):  # base 0: the block staged x_l alone
        f = b * H + 4 * v
        return xs[f], xs[f + 1], xs[f + 2], xs[f + 3]

    @BACKEND.jit(device=True, **_INLINE)
    def at(src, base, b, v):  # VEC == 1 (NV == H): global or shared alike
        return src[base + b * NV + v]

    def dot_reading(x4):
        """dot(src, base, tile, w, acc): acc[b] = this thread's part of (W_l x_l)[b, row], x_l's vector v of
        batch row b read from src (from `base` on) by x4 (its 4 floats) or at (VEC == 1: its float)."""
        @BACKEND.jit(device=True, **_INLINE)
        def dot(src, base, tile, w, acc):
            tid = cuda.threadIdx.x
            lane = tid % TPR
            r = tile * ROWS + tid // TPR
            for b in range(B):
                acc[b] = np.float32(0)
            if r < H:
                for k in range(V):
                    v = lane + TPR * k
                    if EXACT or v < NV:
                        for b in range(B):
                            if VEC == 4:
                                a0, a1, a2, a3 = x4(src, base, b, v)
                                acc[b] += w[4 * k] * a0 + w[4 * k + 1] * a1 + w[4 * k + 2] * a2 + w[4 * k + 3] * a3
                            else:
                                acc[b] += w[k] * at(src, base, b, v)
        return dot

    dot_global, dot_shared = dot_reading(global4), dot_reading(shared4)

    @BACKEND.jit(device=True, **_INLINE)
    def combine(tile, acc, part):
        """The row's threads' parts added: acc[b] = (W_l x_l)[b, row] in the row's first thread; returns (row,
        whether this thread writes it). Every thread of the block must call it (two barriers)."""
        tid = cuda.threadIdx.x
        rr, lane = tid // TPR, tid % TPR
        r = tile * ROWS + rr
        for b in range(B):
            s = lane_total(acc[b])
            if lane % LANES == 0:
                part[rr, lane // LANES, b] = s
        cuda.syncthreads()
        writer = lane == 0 and r < H
        if writer:
            for b in range(B):
                total = part[rr, 0, b]
                for j in range(1, SLOTS):
                    total += part[rr, j, b]
                acc[b] = total
        cuda.syncthreads()  # part is written again by the next tile
        return r, writer

    @BACKEND.jit(device=True, **_INLINE)
    def row_sums(x, acts, l, tile, w, acc, part):
        """acc[b] = (W_l x_l)[b, row] in the row's first thread; returns (row, whether this thread writes it).
        Every thread of the block must call it (two barriers)."""
        # layer l's input: x for the first layer, else the layer before's output (one array type: the
        # loops of dot are written once, which keeps them small enough to unroll)
        dot_global(x if l == 0 else acts, 0 if l == 0 else (l - 1) * B * NV, tile, w, acc)
        return combine(tile, acc, part)

    @BACKEND.jit(device=True, **_INLINE)
    def finish(bb, acts, out, l, layers, r, acc):
        """The epilogue, in the row's writer: + bias, GELU, store (x_{l+1} into acts, the last layer's into out)."""
        for b in range(B):
            y = gelu(acc[b] + bb, bb, bb)
            if l == layers - 1:
                out[b * H + r] = y
            else:
                acts[(l * B + b) * H + r] = y

    return TileOps(load_tile, load_bias, prefetch_tile, row_sums, dot_shared, combine, finish)


@lru_cache(maxsize=None)
def kernels(geo: Geometry, protocol: tuple[Any, Any] = PROTOCOL) -> DecodeKernels:
    """The kernels for one geometry (its numbers are compile-time constants: the loops unroll, w[] stays
    in registers); the megakernel with the (signal, wait) device functions given (lesson 07's exercise)."""
    signal, wait = protocol
    H, B, ROWS, T = geo.hidden, geo.batch, geo.rows, geo.tiles
    SLOTS = geo.row_threads // geo.slot_lanes
    W_REGS = geo.per_thread * geo.vec
    ops = tile_ops(geo)
    load_tile, load_bias, prefetch_tile, row_sums, finish = (ops.load_tile, ops.load_bias, ops.prefetch_tile,
                                                             ops.row_sums, ops.finish)

    def decode_matvec(W, x, acts, l, z):
        # unfused, first of three kernels per layer: z = W_l x_l, through memory
        w = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        load_tile(W, l, cuda.blockIdx.x, w)
        r, writer = row_sums(x, acts, l, cuda.blockIdx.x, w, acc, part)
        if writer:
            for b in range(B):
                z[b * H + r] = acc[b]

    def decode_layer(W, bias, x, acts, out, l):
        # fused: one layer, the epilogue in registers
        w = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        load_tile(W, l, cuda.blockIdx.x, w)
        bb = load_bias(bias, l, cuda.blockIdx.x)
        r, writer = row_sums(x, acts, l, cuda.blockIdx.x, w, acc, part)
        if writer:
            finish(bb, acts, out, l, bias.size // H, r, acc)

    def decode_layer_pdl(W, bias, x, acts, out, l, trigger):
        # as decode_layer, launched with PDL: the weights do not depend on the layer before, so they are
        # loaded while it still runs; only x_l waits (griddepcontrol.wait: the layer before has finished
        # and its stores are visible)
        w = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        load_tile(W, l, cuda.blockIdx.x, w)
        bb = load_bias(bias, l, cuda.blockIdx.x)
        if trigger:
            launch_dependents()  # the next layer may launch and load its weights now
        grid_dependency_wait()
        r, writer = row_sums(x, acts, l, cuda.blockIdx.x, w, acc, part)
        if writer:
            finish(bb, acts, out, l, bias.size // H, r, acc)

    @BACKEND.jit(device=True, **_INLINE)
    def prefetch_next(W, l, tile, layers):
        """The persistent kernel's next tile after `tile`: the next of this layer, else the first of the next."""
        if tile + cuda.gridDim.x < T:
            prefetch_tile(W, l, tile + cuda.gridDim.x, layers)
        else:
            prefetch_tile(W, l + 1, cuda.blockIdx.x, layers)

    def decode_persistent(W, bias, x, acts, out):
        # one cooperative launch; block k takes tiles k, k + grid, ... of every layer
        w = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        layers = bias.size // H
        grid = cuda.cg.this_grid()
        bb = np.float32(0)
        for l in range(layers):
            tile = cuda.blockIdx.x
            if tile < T:
                load_tile(W, l, tile, w)  # before the barrier: W_l needs nothing of layer l - 1
                bb = load_bias(bias, l, tile)
                prefetch_next(W, l, tile, layers)
            if l > 0:
                grid.sync()
            while tile < T:
                r, writer = row_sums(x, acts, l, tile, w, acc, part)
                if writer:
                    finish(bb, acts, out, l, layers, r, acc)
                tile += cuda.gridDim.x
                if tile < T:
                    load_tile(W, l, tile, w)
                    bb = load_bias(bias, l, tile)
                    prefetch_next(W, l, tile, layers)

    def decode_megakernel(W, bias, x, acts, out, table, counters, status, spin_limit, stamps):
        # a few blocks per SM, each running its row of the instruction table (opcode, layer, tile);
        # counters[l] counts the finished tiles of layer l, counters[layers] the finished blocks.
        # stamps (when it has room: 3 per tile): %globaltimer at the tile's start, after its wait, after its count
        w = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        stop = cuda.shared.array(1, np.int32)
        layers = bias.size // H
        tid, blk = cuda.threadIdx.x, cuda.blockIdx.x
        if tid == 0:
            stop[0] = 0
        s = 0
        op, l, tile = table[blk, 0, 0], 0, 0
        if op != OP_END:
            l, tile = table[blk, 0, 1], table[blk, 0, 2]
        stamped = stamps.size > 1
        while op != OP_END:
            if stamped and tid == 0:
                stamps[3 * (l * T + tile)] = globaltimer()
            load_tile(W, l, tile, w)  # before the wait: W_l needs nothing of layer l - 1
            bb = load_bias(bias, l, tile)
            next_op, next_l, next_tile = table[blk, s + 1, 0], 0, 0  # each entry is read once
            if next_op != OP_END:
                next_l, next_tile = table[blk, s + 1, 1], table[blk, s + 1, 2]
                prefetch_tile(W, next_l, next_tile, layers)  # streams while this tile waits
            if l > 0:
                if tid == 0 and not wait(counters, l - 1, T, spin_limit):
                    status[0] = l  # layer l - 1 never completed: an error for the host, never a hang
                    stop[0] = 1
                cuda.syncthreads()  # the whole block reads x_l only after thread 0's acquire
                if stop[0] != 0:
                    break
            if stamped and tid == 0:
                stamps[3 * (l * T + tile) + 1] = globaltimer()
            r, writer = row_sums(x, acts, l, tile, w, acc, part)
            if writer:
                finish(bb, acts, out, l, layers, r, acc)
            cuda.syncthreads()  # every store of the tile is issued, then released with the count
            if tid == 0:
                signal(counters, l)
                if stamped:
                    stamps[3 * (l * T + tile) + 2] = globaltimer()
            s += 1
            op, l, tile = next_op, next_l, next_tile
        if tid == 0:
            retire_block(counters, layers)

    built = {}
    for fn in (decode_matvec, decode_layer, decode_layer_pdl, decode_persistent, decode_megakernel):
        built[fn.__name__] = BACKEND.jit(fn, fastmath=True)
    return DecodeKernels(built["decode_matvec"], built["decode_layer"], built["decode_layer_pdl"],
                         built["decode_persistent"], built["decode_megakernel"])



# -- the double-buffered megakernel: two tiles in flight per block --------------------------------------------

@BACKEND.jit(device=True, **_INLINE)
def instruction(table, blk, s):
    """Entry s of block blk's list: (opcode, layer, tile); the layer and tile words are read for a tile only
    (-1, 0 at the end)."""
    op = table[blk, s, 0]
    if op == OP_END:
        return op, -1, 0
    return op, table[blk, s, 1], table[blk, s, 2]


def marked_slot(geo: Geometry) -> int:
    """Words of one layer's output in the marked megakernel's acts: batch x hidden, made even."""
    return geo.batch * geo.hidden + geo.batch * geo.hidden % 2


def marked_fits(geo: Geometry) -> str | None:
    """Why the marked megakernel cannot stage x_l of this size in shared memory, or None."""
    if geo.batch * geo.hidden > MAX_STAGED:
        return (f"batch x hidden = {geo.batch * geo.hidden}: the marked megakernel stages x_l in shared memory, "
                f"at most {MAX_STAGED} floats")
    return None


@lru_cache(maxsize=None)
def megakernel_db(geo: Geometry, prefetch: int = 1, marked: bool = False, min_blocks: int = 0) -> Any:
    """The megakernel with two tiles in flight per block: the next instruction's weights are loaded into a
    second register buffer before this one waits and computes, so a block's loads are in flight through its
    wait, its sums and its count (the registered megakernel's block streams nothing of its own in between).
    `prefetch`: the tiles after those two (instructions s + 2 .. s + 1 + prefetch) asked of L2, more bytes in
    flight without registers. Its own protocol, beside the exercise's, one of two:

    counters (marked=False): a block that has seen layer l - 1 complete does not poll again for its next
    tiles of layer l (the barrier after its acquire covers them), and it counts its consecutive tiles of a
    layer with one release add after the last of them (one fence per run of tiles, not one per tile).
    Arguments, table, counters, error flag and stamps as the megakernel's.

    data and flag in one word (marked=True): acts is int64, each word (epoch << 32) | the float's bits,
    written with one 64-bit atomic exchange (single-copy atomic: a reader sees the old word or the new one,
    whole); the epoch counts launches (counters[layers + 1], advanced by the last block out). A block
    starting a layer stages x_l into shared memory: each thread loads its share of the words, all at once,
    and polls again (bounded) until every one carries this launch's epoch; the value arrives with its flag,
    so there is no counter, no release fence and no acquire poll between the layers, and x_l crosses L2 once
    per block and layer. counters has layers + 2 words.

    min_blocks (> 0): launch bounds asking the compiler to fit that many blocks per SM (registers capped,
    spilling if it must)."""
    H, B, ROWS, T = geo.hidden, geo.batch, geo.rows, geo.tiles
    SLOTS = geo.row_threads // geo.slot_lanes
    W_REGS = geo.per_thread * geo.vec
    STAGED = B * H if marked else 1
    SLOT = marked_slot(geo)  # words per layer in acts (even: a layer's first pair of words is 16-byte aligned)
    if marked and (why := marked_fits(geo)) is not None:
        raise ValueError(why)
    ops = tile_ops(geo)
    load_tile, load_bias, row_sums, finish = ops.load_tile, ops.load_bias, ops.row_sums, ops.finish
    prefetch_tile, dot_shared, combine = ops.prefetch_tile, ops.dot_shared, ops.combine

    @BACKEND.jit(device=True, **_INLINE)
    def load_next(W, bias, table, blk, s, layers, w):
        """Instruction s + 1's weights into w (and its bias), and L2 asked for the instructions up to
        s + 1 + prefetch (all of them at the start, s = -1; after it, the one that enters the window);
        returns (opcode, layer, tile, bias) of instruction s + 1."""
        op, l, tile = instruction(table, blk, s + 1)
        bb = np.float32(0)
        if op != OP_END:
            load_tile(W, l, tile, w)  # in flight while instruction s waits and computes
            bb = load_bias(bias, l, tile)
            for e in range(s + 2 if s < 0 else max(s + 2, s + 1 + prefetch), min(s + 2 + prefetch, table.shape[1])):
                pop, pl, ptile = instruction(table, blk, e)
                if pop == OP_END:
                    break
                prefetch_tile(W, pl, ptile, layers)
        return op, l, tile, bb

    @BACKEND.jit(device=True, **_INLINE)
    def stage_marked(x, marks, l, xs, epoch, spin_limit):
        """x_l into shared memory, thread by thread a share of it: layer 0's x as it is; a later layer's words
        loaded all at once, and again after a pause (at most spin_limit more times) while any lacks the
        epoch. Returns True when one never got it."""
        tid = cuda.threadIdx.x
        if l == 0:
            for i in range(tid, B * H, cuda.blockDim.x):
                xs[i] = x[i]
            return False
        base = (l - 1) * SLOT  # the layer before's output, in words
        cuda.syncthreads()  # this block's own words of layer l - 1 (its writers' stores) are in: no poll for them
        spins = 0
        late = True
        while late and spins <= spin_limit:
            if spins > 0:
                nanosleep(POLL_SLEEP_NS)
            late = False
            for p in range(tid, -(-B * H // 2), cuda.blockDim.x):  # pairs of words, 16 bytes a load
                a0, m0, a1, m1 = load_marked2_sys(marks, (base >> 1) + p)
                xs[2 * p] = a0
                late = late or m0 != epoch
                if 2 * p + 1 < B * H:
                    xs[2 * p + 1] = a1
                    late = late or m1 != epoch
            spins += 1
        return late

    @BACKEND.jit(device=True, **_INLINE)
    def finish_marked(bb, marks, out, l, layers, r, acc, epoch):
        """The epilogue with the epoch: the last layer's plain floats into out, the others' marked words."""
        for b in range(B):
            y = gelu(acc[b] + bb, bb, bb)
            if l == layers - 1:
                out[b * H + r] = y
            else:
                word = (np.int64(epoch) << 32) | (np.int64(float_bits(y)) & 0xFFFFFFFF)
                cuda.atomic.exch(marks, l * SLOT + b * H + r, word)

    @BACKEND.jit(device=True, **_INLINE)
    def run_tile(x, acts, out, counters, status, stop, part, acc, xs, w, bb, l, tile, next_l, layers, seen, done,
                 epoch, spin_limit, stamps):
        """Wait (unless this block already saw layer l - 1 complete), sum, finish; count the block's run of
        tiles of layer l when the next instruction is of another layer (marked: stage x_l when the block
        starts layer l, sum, store words). Returns (went on, seen, done)."""
        tid = cuda.threadIdx.x
        stamped = stamps.size > 1
        if stamped and tid == 0:
            stamps[3 * (l * T + tile)] = globaltimer()
        if marked:
            if l != seen:  # the same for every thread of the block: the barriers are safe
                late = stage_marked(x, acts, l, xs, epoch, spin_limit)
                if cuda.syncthreads_or(np.int32(late)):  # x_l staged by every thread, or one gave up
                    if tid == 0:
                        status[0] = l  # layer l - 1 never completed: an error for the host, never a hang
                    return False, seen, done
                seen = l
        elif l > 0 and l != seen:  # the same for every thread of the block: the barrier inside is safe
            if tid == 0 and not wait_acquire(counters, l - 1, T, spin_limit):
                status[0] = l  # layer l - 1 never completed: an error for the host, never a hang
                stop[0] = 1
            cuda.syncthreads()  # the whole block reads x_l only after thread 0's acquire
            if stop[0] != 0:
                return False, seen, done
            seen = l
        if stamped and tid == 0:
            stamps[3 * (l * T + tile) + 1] = globaltimer()
        if marked:
            dot_shared(xs, 0, tile, w, acc)  # xs: batch x hidden floats the block staged
            r, writer = combine(tile, acc, part)
            if writer:
                finish_marked(bb, acts, out, l, layers, r, acc, epoch)
        else:
            r, writer = row_sums(x, acts, l, tile, w, acc, part)
            if writer:
                finish(bb, acts, out, l, layers, r, acc)
            done += 1
            if next_l != l:
                cuda.syncthreads()  # every store of the run's tiles is issued, then released with one count
                if tid == 0:
                    add_release_gpu(counters, l, done)
                done = 0
        if stamped and tid == 0:
            stamps[3 * (l * T + tile) + 2] = globaltimer()  # the tile's end (its count, for a run's last tile)
        return True, seen, done

    @BACKEND.jit(device=True, **_INLINE)
    def step(W, bias, table, blk, s, w_next, x, acts, out, counters, status, stop, part, acc, xs, w, bb, l, tile,
             layers, seen, done, epoch, spin_limit, stamps):
        """Instruction s + 1 into w_next (its loads in flight meanwhile), then instruction s (tile `tile` of
        layer l, its weights in w) run. Returns (went on, the next opcode, layer, tile and bias, seen, done)."""
        op, next_l, next_tile, next_bb = load_next(W, bias, table, blk, s, layers, w_next)
        went, seen, done = run_tile(x, acts, out, counters, status, stop, part, acc, xs, w, bb, l, tile, next_l,
                                    layers, seen, done, epoch, spin_limit, stamps)
        return went, op, next_l, next_tile, next_bb, seen, done

    def decode_megakernel_db(W, bias, x, acts, out, table, counters, status, spin_limit, stamps):
        # buffer a holds instruction s while b loads s + 1, then the roles swap: the loop body is two steps
        # so that each buffer is a fixed set of registers (no indexing by a run-time buffer number)
        wa = cuda.local.array(W_REGS, np.float32)
        wb = cuda.local.array(W_REGS, np.float32)
        acc = cuda.local.array(B, np.float32)
        part = cuda.shared.array((ROWS, SLOTS, B), np.float32)
        stop = cuda.shared.array(1, np.int32)
        xs = cuda.shared.array(STAGED, np.float32)
        layers = bias.size // H
        tid, blk = cuda.threadIdx.x, cuda.blockIdx.x
        if tid == 0:
            stop[0] = 0
        epoch = counters[layers + 1] + 1 if marked else 0  # this launch's (the last one's, advanced)
        # seen: the layer whose input this block has (counters: layer 0 never waits; marked: none staged yet)
        seen, done, s = -1 if marked else 0, 0, 0
        op, l, tile, bba = load_next(W, bias, table, blk, -1, layers, wa)
        while op != OP_END:
            went, op, l, tile, bbb, seen, done = step(W, bias, table, blk, s, wb, x, acts, out, counters, status, stop,
                                                      part, acc, xs, wa, bba, l, tile, layers, seen, done, epoch,
                                                      spin_limit, stamps)
            if not went or op == OP_END:
                break
            s += 1
            went, op, l, tile, bba, seen, done = step(W, bias, table, blk, s, wa, x, acts, out, counters, status, stop,
                                                      part, acc, xs, wb, bbb, l, tile, layers, seen, done, epoch,
                                                      spin_limit, stamps)
            if not went:
                break
            s += 1
        if tid == 0 and retire_block(counters, layers) and marked:
            counters[layers + 1] = epoch  # the next launch's blocks read it after this one has ended

    bounds = {"launch_bounds": (geo.threads, min_blocks)} if min_blocks else {}
    return BACKEND.jit(decode_megakernel_db, fastmath=True, **bounds)

# -- unfused: the bias and the GELU as kernels of their own, one thread per element ------------------

@cuda.jit
def decode_bias(z, bias, l, hidden):
    i = cuda.grid(1)
    if i < z.size:
        z[i] += bias[l * hidden + i % hidden]


@cuda.jit
def decode_gelu(z, dst, offset):
    i = cuda.grid(1)
    if i < z.size:
        v = z[i]
        dst[offset + i] = gelu(v, v, v)


# -- the megakernel's instruction table --------------------------------------------------------------

def instruction_table(layers: int, tiles: int, blocks: int, serial: bool) -> np.ndarray:
    """int32 (blocks, slots, 3): each block's instructions (OP_TILE, layer, tile) in order, then OP_END.

    Every block's list is in layer order, so a block never waits on a tile it must itself run later.
    GPU (serial=False): tile t of layer l goes to block (l x tiles + t) % blocks. Consecutive layers land
    on different blocks when there are more blocks than tiles, so a block that is not busy with layer l
    already holds its layer-(l+1) weights in registers while layer l finishes.
    Simulator (serial=True): its blocks run one after another, so a block may only wait on blocks before
    it: every tile of layer l goes to block l x blocks // layers (whole layers, in block order).
    """
    lists: list[list[tuple[int, int, int]]] = [[] for _ in range(blocks)]
    for l in range(layers):
        for t in range(tiles):
            blk = l * blocks // layers if serial else (l * tiles + t) % blocks
            lists[blk].append((OP_TILE, l, t))
    table = np.full((blocks, max(len(x) for x in lists) + 1, 3), OP_END, np.int32)
    for blk, instructions in enumerate(lists):
        if instructions:
            table[blk, :len(instructions)] = instructions
    return table


def db_table_words(table: np.ndarray, prefetch: int) -> int:
    """Table words one thread of the double-buffered megakernel reads (its load_next, step by step): every
    instruction as the next one (3 words, the END 1), and the entries its L2 prefetch looks ahead to."""
    words = 0
    for row in table:
        ops = row[:, 0]
        n = int((ops == OP_TILE).sum())
        for s in range(-1, n):
            words += 3 if s + 1 < n else 1
            if s + 1 < n:
                for e in range(s + 2 if s < 0 else max(s + 2, s + 1 + prefetch), min(s + 2 + prefetch, len(row))):
                    words += 3 if ops[e] == OP_TILE else 1
                    if ops[e] == OP_END:
                        break
    return words


def waits_only_on_earlier_blocks(table: np.ndarray, tiles: int) -> bool:
    """Whether a simulator (blocks run in order, each to its end) completes this table: every tile of the
    layer an instruction waits for sits in an earlier block, or earlier in the same block."""
    done_before: dict[int, int] = {}  # layer -> tiles finished so far, in run order
    for block in table:
        for op, layer, tile in block:
            if op == OP_END:
                break
            if layer > 0 and done_before.get(layer - 1, 0) < tiles:
                return False
            done_before[layer] = done_before.get(layer, 0) + 1
    return True
