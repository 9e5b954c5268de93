"""Softmax with each row split across k cooperating blocks: rows too long for one block to stream well.

One block per row (`fused`) holds a 32768-column row with 1024 threads, one block per SM: its loads,
its two block reductions and its stores cannot overlap with another block's, and the H200 streams well
under its copy ceiling there (benchmarks/NOTES.md). `split` cuts the row into k slices of about SLICE_FLOATS
floats (4096 on a GPU), one block each, so several blocks share an SM and one's reductions hide behind
another's loads. The row's max and sum are now spread over k blocks: each block folds its slice into
the online pair (m, d) (reduce.py), publishes it in global memory with a flag, waits until the other
k - 1 blocks of its row have published theirs, combines the k pairs and scales the slice it still
holds in registers. One read and one write of x, as `fused`; the exchange is 12 bytes per block and
row, plus the polls.

    block b = g k + j: group g (rows g, g + G, g + 2G, ...), slice j (columns j S .. j S + S - 1)
    per row:  the slice in registers (16-byte accesses at any width) -> thread pairs -> block pair
              thread 0: part[g, i % 2, j] = pair; fence; flags[b] = base + i + 1  (release)
              [prefetch versions: every thread loads the slice of the block's next row, in flight during the wait]
              thread p < k: poll flags[g k + p] with acquire loads until >= base + i + 1, bounded in
              time (a timeout stores the row in `status` and the blocks stop); read part[g, i % 2, p]
              barrier; every thread combines the k pairs; out = e * exp(m_t - M) / D

Why the flags can wait at all: a block spins until its row's other blocks arrive, which only works
if they are running. The grid is persistent (groups x k blocks, no more than the GPU holds at once:
resident blocks per SM x SMs, from the occupancy of this kernel) and each group loops over its
rows: persistence at the scale of a row. A machine that cannot hold k blocks at once is refused.
Two slots per group (i % 2) suffice: a block writes slot i % 2 again at row i + 2 only after it saw
every flag of row i + 1, which its peers raise after they have read row i's slots.
The flags count rows over launches (base = the block's own flag at launch start, equal across the
group because every block of a group does the same rows), so nothing is reset between launches.

On the simulator (one block at a time, where any wait for a later block is forever) the kernel runs
unchanged with its blocks side by side (kernels_lab/sim_coresident.py).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...arrays import ArgumentError
from ...backend import BACKEND
from ...core import KernelLaunch, Plan, Size, Variant, kernel_name
from ...give_up import GiveUpWord
from ...intrinsics import globaltimer, load4, load_acquire_gpu, store4
from ...reduce import LOWEST, block_md, exp_shifted_sum, md_combine
from ...rows import pow2_at_least, row_jit
from ...runtime import cuda
from . import workload as sm

SLICE_THREADS = BACKEND.size(gpu=128, simulator=32)  # threads per block (the simulator's barriers cost per thread)
SLICE_CHUNKS = 8                             # at most 8 chunks (32 floats) a thread, as `fused`
SLICE_FLOATS = SLICE_THREADS * SLICE_CHUNKS * sm.CHUNK  # floats of a slice: 4096 on a GPU
WIDE_SLICES = 16   # past this many slices a row takes bigger blocks instead (H200, 2026-12-04, 131072 columns:
                   # 32 slices of 4096 floats were slower than 16 of 8192 and 8 of 16384)
MAX_SLICES = 64
SPLIT_MIN_COLS = BACKEND.size(gpu=8192, simulator=1)  # narrower rows are one slice (k = 1): `fused` is the better kernel
TIMEOUT_NS = BACKEND.size(gpu=2_000_000_000, simulator=120_000_000_000)  # how long a block waits for its row's others
COUNT_LIMIT = (1 << 31) - 1                  # the flags are int32 row counters


class ExchangeTimeout(RuntimeError):
    """A block of softmax_split waited too long for the other blocks of its row (were they resident?)."""


@dataclass(frozen=True)
class SplitShape:
    """k blocks per row, each `threads` threads holding `chunks` 4-float chunks of its slice;
    prefetch: load the slice of the block's next row while this row's pairs are exchanged
    (twice the registers: two slices held, so fewer blocks per SM; measured slower on the H200, kept as a version)."""

    slices: int
    threads: int
    chunks: int
    prefetch: bool = False

    def slice_vectors(self, cols: int) -> int:
        """16-byte vectors per slice: those that cover a row (one more when rows do not start on a
        16-byte boundary, cols % 4 != 0), shared out over the k slices."""
        return -(-_row_vectors(cols) // self.slices)


def _row_vectors(cols: int) -> int:
    """The most 16-byte vectors (aligned in memory) that hold part of one row of `cols` floats."""
    return sm._chunks_per_row(cols) + (1 if cols % sm.CHUNK else 0)


def split_shape(cols: int, slices: int | None = None, threads: int | None = None,
                prefetch: bool = False) -> SplitShape | None:
    """The layout for rows of `cols` floats (None: it does not fit). Default: one slice below
    SPLIT_MIN_COLS; else slices of SLICE_FLOATS, blocks of SLICE_THREADS, and past WIDE_SLICES slices
    blocks twice (four times...) as large. `slices` / `threads` force a layout (the benchmark compares)."""
    if threads is None:
        threads = SLICE_THREADS
        while slices is None and -(-cols // (threads * SLICE_CHUNKS * sm.CHUNK)) > WIDE_SLICES \
                and threads < sm.MAX_THREADS:
            threads *= 2
    if slices is None:
        slices = 1 if cols < SPLIT_MIN_COLS else -(-cols // (threads * SLICE_CHUNKS * sm.CHUNK))
    if slices > min(MAX_SLICES, threads):  # thread p < k of each block polls block p's flag
        return None
    per_slice = -(-_row_vectors(cols) // slices)  # 16-byte vectors of one slice
    chunks = pow2_at_least(-(-per_slice // threads))
    if chunks > SLICE_CHUNKS:
        return None
    return SplitShape(slices, threads, chunks, prefetch)


def split_refusal(cols: int) -> str | None:
    """None when `split` runs rows of `cols` floats here; else why not, and what to use."""
    shape = split_shape(cols)
    if shape is None:
        return (f"a row of {cols} floats needs more than {MAX_SLICES} slices of {sm.FUSED_MAX_COLS} floats; use "
                f"the `online` variant, which streams the row twice")
    return residency_refusal(shape)


def residency_refusal(shape: SplitShape) -> str | None:
    """Why the k blocks of a row cannot all run at once here (they would wait for blocks that cannot
    start), or None."""
    resident = resident_blocks(shape)
    if resident >= shape.slices:
        return None
    return (f"softmax_split: a row in {shape.slices} slices needs {shape.slices} blocks of {shape.threads} threads "
            f"resident at once; this machine holds {resident}; use the `online` variant")


# -- a slice in 16-byte vectors, whatever the width ---------------------------------------------------
# Row r holds elements [r cols, r cols + cols). The aligned 16-byte vectors that hold any of them,
# [first, last), are shared out over the k slices; thread t of a block takes vectors t, t + T, ... of
# its slice. A vector wholly inside the row is one 16-byte access; the (at most two) vectors a row shares
# with its neighbours are read and written element by element, only their elements of this row (the
# neighbours' belong to other blocks, which write them at the same time). So odd widths (50257) stream
# in 16-byte accesses too, and every element is read and written exactly once.

@cuda.jit(device=True, inline=True)
def slice_bounds(row, cols, slice_vectors, j):
    """(row_lo, first, end): row `row`'s first element, and the vectors [first, end) of its slice j."""
    row_lo = row * cols
    first = (row_lo >> 2) + j * slice_vectors
    return row_lo, first, min(first + slice_vectors, (row_lo + cols + 3) >> 2)


@cuda.jit(device=True, inline=True)
def load_vector(x, v, row_lo, row_hi, fill):
    """Elements 4v .. 4v+3 of x, those outside [row_lo, row_hi) as `fill` (LOWEST for a max, 0 for a sum): one
    16-byte load where all four are inside the row."""
    e = 4 * v
    if e >= row_lo and e + 3 < row_hi:
        return load4(x, v)
    return (x[e] if row_lo <= e < row_hi else fill, x[e + 1] if row_lo <= e + 1 < row_hi else fill,
            x[e + 2] if row_lo <= e + 2 < row_hi else fill, x[e + 3] if row_lo <= e + 3 < row_hi else fill)


@cuda.jit(device=True, inline=True)
def store_vector(out, v, row_lo, row_hi, a0, a1, a2, a3):
    """Elements 4v .. 4v+3 of out, only those inside [row_lo, row_hi)."""
    e = 4 * v
    if e >= row_lo and e + 3 < row_hi:
        store4(out, v, a0, a1, a2, a3)
    else:
        if row_lo <= e < row_hi:
            out[e] = a0
        if row_lo <= e + 1 < row_hi:
            out[e + 1] = a1
        if row_lo <= e + 2 < row_hi:
            out[e + 2] = a2
        if row_lo <= e + 3 < row_hi:
            out[e + 3] = a3


@functools.lru_cache(maxsize=None)
def split_kernel(shape: SplitShape):
    K, T, C, PREFETCH = shape.slices, shape.threads, shape.chunks, shape.prefetch  # compile-time constants
    held = sm.CHUNK * C
    ahead_size = held if PREFETCH else 1  # array sizes must be constants, not expressions

    @cuda.jit(device=True, inline=True)
    def load_slice(vals, x, row, cols, slice_vectors, tid):
        """This block's slice of `row` into vals (all loads first, each independent: 16 C bytes in flight)."""
        row_lo, first, end = slice_bounds(row, cols, slice_vectors, cuda.blockIdx.x % K)
        for k in range(C):
            v = first + tid + k * T
            if v < end:
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = load_vector(x, v, row_lo,
                                                                                          row_lo + cols, LOWEST)
            else:
                vals[4 * k], vals[4 * k + 1], vals[4 * k + 2], vals[4 * k + 3] = LOWEST, LOWEST, LOWEST, LOWEST

    @cuda.jit(device=True, inline=True)
    def store_slice(vals, scale, out, row, cols, slice_vectors, tid):
        row_lo, first, end = slice_bounds(row, cols, slice_vectors, cuda.blockIdx.x % K)
        for k in range(C):
            v = first + tid + k * T
            if v < end:
                store_vector(out, v, row_lo, row_lo + cols, vals[4 * k] * scale, vals[4 * k + 1] * scale,
                             vals[4 * k + 2] * scale, vals[4 * k + 3] * scale)

    @cuda.jit(device=True, inline=True)
    def one_row(vals, ahead, x, out, part, flags, status, rows, cols, slice_vectors, row, i, limit_ns, scratch_m,
                scratch_d, peer_m, peer_d, ctl):
        """Row `row` (its slice already in vals): fold, publish, [load the next row into ahead,] wait,
        combine, store. Returns False when a wait timed out (the block must stop)."""
        tid, b = cuda.threadIdx.x, cuda.blockIdx.x
        g = b // K
        m = LOWEST
        for j in range(held):
            m = max(m, vals[j])
        bm, bd = block_md(m, exp_shifted_sum(vals, held, m), scratch_m, scratch_d)
        slots = (2 * g + (i & 1)) * K
        target = ctl[1] + i + 1
        if tid == 0:  # publish: the pair, then (after a fence) the flag that announces it
            part[2 * (slots + b - g * K)] = bm
            part[2 * (slots + b - g * K) + 1] = bd
            cuda.threadfence()
            cuda.atomic.exch(flags, b, np.int32(target))
        nxt = row + cuda.gridDim.x // K
        if PREFETCH and nxt < rows:  # in flight while the pairs travel
            load_slice(ahead, x, nxt, cols, slice_vectors, tid)
        if tid < K:  # thread p waits for block p of the row, then takes its pair
            waited_from = globaltimer()
            while load_acquire_gpu(flags, g * K + tid) < target:  # gpu scope: the peers are on this GPU
                if globaltimer() - waited_from > limit_ns:
                    status[0] = np.int32(row + 1)
                    ctl[0] = 1
                    break
            peer_m[tid] = part[2 * (slots + tid)]
            peer_d[tid] = part[2 * (slots + tid) + 1]
        cuda.syncthreads()
        if ctl[0] != 0:
            return False
        rm, rd = peer_m[0], peer_d[0]
        for p in range(1, K):
            rm, rd = md_combine(rm, rd, peer_m[p], peer_d[p])
        scale = math.exp(m - rm) / rd  # this thread's e = exp(x - m) rescaled to the row's max and sum
        store_slice(vals, scale, out, row, cols, slice_vectors, tid)
        return True

    @row_jit(f"softmax_split{K}_{T}x{C}{'_prefetch' if PREFETCH else ''}", T)
    def split(x, out, part, flags, status, rows, cols, slice_vectors, limit_ns):
        vals = cuda.local.array(held, np.float32)
        ahead = cuda.local.array(ahead_size, np.float32)  # the next row's slice (prefetch)
        scratch_m = cuda.shared.array(T, np.float32)
        scratch_d = cuda.shared.array(T, np.float32)
        peer_m = cuda.shared.array(K, np.float32)   # the k pairs of the row, read by threads 0 .. k-1
        peer_d = cuda.shared.array(K, np.float32)
        ctl = cuda.shared.array(2, np.int32)        # [0]: stop (a wait timed out); [1]: base
        tid, b = cuda.threadIdx.x, cuda.blockIdx.x
        groups = cuda.gridDim.x // K
        if tid == 0:  # read by all after the first barrier (inside block_md)
            ctl[0] = 0
            ctl[1] = flags[b]  # rows this block finished in earlier launches: only this block writes flags[b]
        row, i = b // K, 0
        if PREFETCH and row < rows:
            load_slice(vals, x, row, cols, slice_vectors, tid)
        while row < rows:  # uniform across the block: every thread reaches every barrier
            if not PREFETCH:
                load_slice(vals, x, row, cols, slice_vectors, tid)
            ok = one_row(vals, ahead, x, out, part, flags, status, rows, cols, slice_vectors, row, i, limit_ns,
                         scratch_m, scratch_d, peer_m, peer_d, ctl)
            row += groups
            i += 1
            if ok and PREFETCH and row < rows:  # the same with the two slices' roles swapped
                ok = one_row(ahead, vals, x, out, part, flags, status, rows, cols, slice_vectors, row, i, limit_ns,
                             scratch_m, scratch_d, peer_m, peer_d, ctl)
                row += groups
                i += 1
            if not ok:
                break

    return BACKEND.coresident(split)


@functools.lru_cache(maxsize=None)
def resident_blocks(shape: SplitShape) -> int:
    """Blocks of this kernel the machine holds at once (occupancy x SMs; the simulator's side-by-side cap)."""
    from numba import types
    f32, i32 = types.Array(types.float32, 1, "C"), types.Array(types.int32, 1, "C")
    signature = (f32, f32, f32, i32, i32, types.int64, types.int64, types.int64, types.int64)
    return BACKEND.resident_limit(split_kernel(shape), signature, shape.threads)


def split_groups(shape: SplitShape, rows: int) -> int:
    """Row groups of k blocks the machine holds at once (no more than there are rows); refused when
    fewer than k blocks fit: the blocks of a row would wait for blocks that cannot start."""
    if (why := residency_refusal(shape)) is not None:
        raise ArgumentError(why)
    return min(rows, resident_blocks(shape) // shape.slices)


def plan_split_for(size: Size, shape: SplitShape | None = None) -> Plan:
    """x once and out once; the exchange: per block and row one pair (8 B) and a flag exchange (4 B read,
    4 written), k polls (at least one each: a GPU may poll more) and k pairs read; each block reads its
    own flag once at launch."""
    rows, cols = size.rows, size.cols
    shape = shape or split_shape(cols)
    if shape is None:
        raise ValueError(split_refusal(cols))
    k, grid = shape.slices, split_groups(shape, rows) * shape.slices
    return Plan((KernelLaunch(kernel_name(split_kernel(shape)), grid, shape.threads,
                              bytes_read=sm.F32 * (rows * cols + grid + rows * k * (1 + 3 * k)),
                              bytes_written=sm.F32 * (rows * cols + rows * k * 3),
                              read_bytes_in_flight=16 * shape.chunks),))


class SplitLaunch:
    """One bound launch of the split kernel, with its exchange buffers; refuses to go on after a timeout."""

    def __init__(self, x, out, rows: int, cols: int, shape: SplitShape, stream, limit_ns: int):
        self.shape, self.rows = shape, rows
        groups = split_groups(shape, rows)
        self.grid = groups * shape.slices
        self.rows_per_launch = -(-rows // groups)  # the most a flag rises in one launch
        self.flags = cuda.to_device(np.zeros(self.grid, np.int32), stream=stream)
        self.count, self.stream = 0, stream
        self.gave_up = GiveUpWord()
        part = cuda.device_array(2 * 2 * self.grid, np.float32, stream=stream)  # 2 slots x (m, d) per block
        self.configured = split_kernel(shape)[self.grid, shape.threads, stream]
        self.args = (sm._flat(x, rows, cols), sm._flat(out, rows, cols), part, self.flags, self.gave_up.word, rows,
                     cols, shape.slice_vectors(cols), np.int64(limit_ns))

    def _raise_if_timed_out(self) -> None:
        if (row := self.gave_up.at()) is not None:  # the row whose exchange timed out in an earlier launch
            raise ExchangeTimeout(f"softmax_split: a block waited more than its limit for the other "
                                  f"{self.shape.slices - 1} block(s) of row {row} (were all {self.grid} blocks "
                                  f"resident?); the output of that launch is wrong")

    def __call__(self) -> None:
        self._raise_if_timed_out()
        if self.count + self.rows_per_launch > COUNT_LIMIT:  # the int32 row counters would wrap: start over
            self.flags.copy_to_device(np.zeros(self.grid, np.int32), stream=self.stream)
            self.count = 0
        self.configured(*self.args)
        self.count += self.rows_per_launch
        if BACKEND.synchronous_launches:  # the launch has finished here: say so now
            self._raise_if_timed_out()


def bind_split(inputs, outputs, stream=0, *, shape: SplitShape | None = None, limit_ns: int = TIMEOUT_NS):
    """The split kernel's launcher. shape: another layout than the width's default (the benchmark and
    the tests compare several); limit_ns: how long a block waits for its row's other blocks."""
    x, out, rows, cols = sm._check(inputs, outputs, vectors=True)  # 16-byte accesses at every width
    if x.size == 0:
        return sm._no_op
    shape = shape or split_shape(cols)
    if shape is None:
        raise ArgumentError(split_refusal(cols))
    return SplitLaunch(x, out, rows, cols, shape, stream, limit_ns)


sm.WORKLOAD.add(Variant("split", "persistent", "1 kernel, each row split across k blocks (k from the width: "
                                               f"slices of {SLICE_FLOATS} floats), each slice in registers; "
                                               "the blocks of a row exchange (max, sum) through global memory "
                                               "with flags; a persistent grid of row groups",
                        plan_split_for, bind_split, lambda size: split_refusal(size.cols)))

