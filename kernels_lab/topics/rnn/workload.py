"""Lesson: a recurrent network's time loop, one launch per step or one launch for all steps.

    h_t = tanh(W h_{t-1} + u_t)      t = 0 .. steps-1, h_{-1} = 0, float32

W is hidden x hidden, u (steps x batch x hidden) the input projection, computed beforehand for
every step at once (one big GEMM: not the hard part). What is left is a chain: step t needs
all of h_{t-1}, so the steps cannot run side by side, and at small batch each step is a
matrix-vector product: W (4 MB at hidden 1024) is read for 2 x hidden^2 x batch flops, a few
flops per byte. Read from DRAM (or L2) every step, W sets the pace; kept on chip, it does not.

    variant          launches  W crosses memory  what stays on chip between steps
    unfused          2 x steps steps times        nothing: W h + u goes through memory to a tanh kernel
    fused            steps     steps times        nothing: each step is its own kernel
    graph            steps     steps times        as fused; the launches replayed from a CUDA graph
    persistent       1         once               each block's rows of W, in registers, for all steps;
                                                  h_t goes through L2, a grid barrier per step
    persistent_flag  1         once               as persistent, with a flag barrier instead of grid.sync
                                                  (per-block flags, acquire polls, bounded: see _flag_barrier)

The persistent kernel follows Persistent RNNs (Diamos et al. 2016): every SM holds a slice of
W in its register file, so per step only h (batch x hidden floats) moves, and a grid-wide
barrier replaces the kernel boundary.

Accuracy: tanh is 1-Lipschitz and make_inputs scales W so that ||W||_2 ~ 0.9 (2 sigma sqrt(hidden)
for iid entries of standard deviation sigma). Each step is then a contraction: an error e in
h_{t-1} becomes at most 0.9 e in h_t, plus this step's float32 rounding r (a sum of hidden
products: ~1e-7 to 1e-6). Errors never grow: they stay below r / (1 - 0.9) at every step,
however many steps. Measured in NumPy float32 at hidden 2048, batch 4, 512 steps: 3.4e-7.
The tolerance (atol 1e-5, rtol 1e-4) leaves 30x room for other summation orders and the GPU's
tanh; a transposed index or a wrong batch row is off by ~0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Callable, Mapping

import numpy as np

from ...arrays import ArgumentError, device_array
from ...backend import BACKEND, in_order
from ...core import (Axis, Case, Exercise, HardInput, KernelLaunch, Plan, Size, Tolerance, Variant, Workload,
                    kernel_name, register)
from ...give_up import GiveUpWord
from ...intrinsics import load_acquire_sys
from ...rows import pow2_at_least
from ...runtime import cuda

F32 = 4
_FULL_MASK = 0xFFFFFFFF


# -- the specification: float64 NumPy ------------------------------------------------------

def reference(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    W = inputs["W"].astype(np.float64)
    u = inputs["u"].astype(np.float64)
    h, out = np.zeros(u.shape[1:]), np.empty(u.shape)
    for t in range(u.shape[0]):
        h = np.tanh(h @ W.T + u[t])  # rows of h are batch columns: (W h)_i = sum_j W[i, j] h_j
        out[t] = h
    return {"h": out}


def _scale(hidden: int) -> float:
    # entries of standard deviation 0.9 / (2 sqrt(hidden)): ||W||_2 ~ 0.9, a contraction
    return 0.9 * math.sqrt(3.0) / (2.0 * math.sqrt(hidden))  # uniform(-1, 1) has deviation 1/sqrt(3)


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # iid W is asymmetric (a transposed index shows); u differs per step, batch row and unit.
    H = size.hidden
    W = (rng.uniform(-1.0, 1.0, (H, H)) * _scale(H)).astype(np.float32)
    u = (rng.standard_normal((size.steps, size.batch, H)) * 0.8).astype(np.float32)
    return {"W": W, "u": u}


def _distinct_sequences(size: Size, inputs: Mapping[str, Any]) -> bool:
    u = inputs["u"]
    return all(not np.array_equal(u[:, 0], u[:, b]) for b in range(1, size.batch))


HARD_INPUTS = (
    HardInput("a batch of 2 or more distinct sequences: a kernel that steps batch row 0 only, or mixes rows up",
              sizes=lambda s: s.batch >= 2, present=_distinct_sequences),
    HardInput("2 or more steps: step t reads h[t-1], which the launch before wrote", sizes=lambda s: s.steps >= 2),
    HardInput("a hidden size that is not a multiple of 32: the last rows of W past the last full warp",
              sizes=lambda s: s.hidden % 32 != 0),
)


def symmetric_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # W == W.T: a kernel that reads W[j, i] for W[i, j] passes here, and only here
    inputs = make_inputs(size, rng)
    W = inputs["W"].astype(np.float64)
    inputs["W"] = ((W + W.T) / math.sqrt(2.0)).astype(np.float32)
    return inputs


def output_specs(size: Size) -> dict[str, tuple[tuple[int, ...], Any]]:
    return {"h": ((size.steps, size.batch, size.hidden), np.float32)}


def _check(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    W = device_array("W", inputs.get("W"), np.float32, (None, None))
    if W.shape[0] != W.shape[1] or W.shape[0] == 0:
        raise ArgumentError(f"W: shape {tuple(W.shape)}; a square hidden x hidden matrix is required")
    hidden = W.shape[0]
    u = device_array("u", inputs.get("u"), np.float32, (None, None, hidden))
    if 0 in u.shape:
        raise ArgumentError(f"u: shape {tuple(u.shape)}; at least one step and one batch row are required")
    h = device_array("h", outputs.get("h"), np.float32, tuple(u.shape))
    return W, u, h


# device functions are inlined into their kernel by NVVM (numba's own IR inlining took minutes on the
# chains below)
_INLINE = {"forceinline": True}


# -- the lanes of a row exchange partial sums -----------------------------------------------
# A warp shuffle: registers to registers, no memory, no barrier (the simulator runs it as
# sim_device's warp meeting). Every lane of the block calls it, as every lane does here.

@BACKEND.jit(device=True, **_INLINE)
def _exchange(send, recv, count, mask):
    """recv[k] = the send[k] of the lane whose index differs from ours by xor `mask`."""
    for k in range(count):
        recv[k] = cuda.shfl_xor_sync(_FULL_MASK, send[k], mask)


def _jit_options(threads: int, blocks_per_sm: int = 1) -> dict[str, Any]:
    # launch bounds cap the registers so that the block (or blocks_per_sm of them) fits an SM
    return {"launch_bounds": (threads, blocks_per_sm)}


# -- per-step kernels: unfused (matvec, then tanh) and fused ---------------------------------
# One block of STEP_ROWS x STEP_LANES threads computes STEP_ROWS rows of W h_{t-1}: the lanes of a
# row split its columns (coalesced reads of W) and add their partial sums with a butterfly.
# h_{t-1} is staged in shared memory per block, STAGE_FLOATS at a time; W is read once per step.
# The simulator uses 2 lanes per row (each lane is a Python thread there).

STEP_LANES = BACKEND.size(gpu=32, simulator=2)
STEP_ROWS = BACKEND.size(gpu=16, simulator=8)
STEP_THREADS = STEP_ROWS * STEP_LANES
STAGE_FLOATS = 8192  # 32 KB of h_{t-1} per staging pass
TANH_BLOCK = 128


@lru_cache(maxsize=None)
def step_kernels(batch: int) -> tuple[Any, Any]:
    """(rnn_matvec, rnn_step) compiled for one batch size (the accumulators are registers)."""
    if batch > STAGE_FLOATS:
        raise ArgumentError(f"batch={batch}: the per-step kernels stage at least one column of h per pass, "
                            f"at most {STAGE_FLOATS} batch rows")
    tile = STAGE_FLOATS // batch

    @BACKEND.jit(device=True, **_INLINE)
    def row_sums(W, h, t, acc):
        """acc[b] = (W h_{t-1})[b, row] on every lane of the row (0 at t = 0); returns the row and the lane."""
        send = cuda.local.array(batch, np.float32)  # scratch of the butterfly and of the staging (inlined:
        recv = cuda.local.array(batch, np.float32)  # the calling kernel's own registers and shared memory)
        stage = cuda.shared.array((batch, tile), np.float32)
        hidden = W.shape[0]
        tid = cuda.threadIdx.x
        row = cuda.blockIdx.x * STEP_ROWS + tid // STEP_LANES
        lane = tid % STEP_LANES
        for b in range(batch):
            acc[b] = np.float32(0)
        if t > 0:
            for c0 in range(0, hidden, tile):
                width = min(tile, hidden - c0)
                cuda.syncthreads()  # nobody still reads the previous tile
                for e in range(tid, batch * width, STEP_THREADS):
                    stage[e // width, e % width] = h[t - 1, e // width, c0 + e % width]
                cuda.syncthreads()
                if row < hidden:
                    for c in range(lane, width, STEP_LANES):
                        w = W[row, c0 + c]
                        for b in range(batch):
                            acc[b] += w * stage[b, c]
        m = STEP_LANES // 2
        while m > 0:  # butterfly: afterwards every lane of the row holds its sums
            for b in range(batch):
                send[b] = acc[b]
            _exchange(send, recv, batch, m)
            for b in range(batch):
                acc[b] += recv[b]
            m //= 2
        return row, lane

    def rnn_matvec(W, u, h, t, z):
        # unfused, step t, first kernel: z = W h_{t-1} + u_t, written to memory
        acc = cuda.local.array(batch, np.float32)
        row, lane = row_sums(W, h, t, acc)
        if row < W.shape[0]:
            for b in range(batch):
                if b % STEP_LANES == lane:  # the lanes share the stores
                    z[b, row] = acc[b] + u[t, b, row]

    def rnn_step(W, u, h, t):
        # fused, step t: h_t = tanh(W h_{t-1} + u_t); only h_t is written
        acc = cuda.local.array(batch, np.float32)
        row, lane = row_sums(W, h, t, acc)
        if row < W.shape[0]:
            for b in range(batch):
                if b % STEP_LANES == lane:
                    h[t, b, row] = math.tanh(acc[b] + u[t, b, row])

    options = _jit_options(STEP_THREADS)
    return BACKEND.jit(rnn_matvec, **options), BACKEND.jit(rnn_step, **options)


@BACKEND.jit
def rnn_tanh(z, h, t):
    # unfused, step t, second kernel: h_t = tanh(z), one element per thread
    i = cuda.grid(1)
    if i < z.size:
        b = i // z.shape[1]
        r = i % z.shape[1]
        h[t, b, r] = math.tanh(z[b, r])


def _step_grid(hidden: int) -> int:
    return -(-hidden // STEP_ROWS)


def _step_reads(size: Size, t: int) -> int:
    """Bytes one matvec (or fused step) reads at step t: W and h_{t-1} (each block stages all of
    it) from step 1 on, u_t always."""
    H, B = size.hidden, size.batch
    return F32 * ((H * H + _step_grid(H) * B * H if t > 0 else 0) + B * H)


def plan_unfused(size: Size) -> Plan:
    bh, g = size.batch * size.hidden, _step_grid(size.hidden)
    tanh_grid = -(-bh // TANH_BLOCK)
    launches = []
    for t in range(size.steps):
        launches += [KernelLaunch("rnn_matvec", g, STEP_THREADS, _step_reads(size, t), F32 * bh),
                     KernelLaunch(kernel_name(rnn_tanh), tanh_grid, TANH_BLOCK, F32 * bh, F32 * bh)]
    return Plan(tuple(launches))


def plan_fused(size: Size) -> Plan:
    g, bh = _step_grid(size.hidden), size.batch * size.hidden
    return Plan(tuple(KernelLaunch("rnn_step", g, STEP_THREADS, _step_reads(size, t), F32 * bh)
                      for t in range(size.steps)))


def bind_unfused(inputs, outputs, stream=0):
    W, u, h = _check(inputs, outputs)
    steps, batch, hidden = h.shape
    matvec, _ = step_kernels(batch)
    z = cuda.device_array((batch, hidden), np.float32, stream=stream)  # W h + u: through memory
    tanh_grid = -(-(batch * hidden) // TANH_BLOCK)
    launches = []
    for t in range(steps):
        launches.append(BACKEND.launcher(matvec, _step_grid(hidden), STEP_THREADS, (W, u, h, t, z), stream))
        launches.append(BACKEND.launcher(rnn_tanh, tanh_grid, TANH_BLOCK, (z, h, t), stream))
    return in_order(launches)


def _fused_launches(inputs, outputs, stream) -> list[Callable[..., None]]:
    W, u, h = _check(inputs, outputs)
    steps, batch, hidden = h.shape
    _, step = step_kernels(batch)
    return [BACKEND.launcher(step, _step_grid(hidden), STEP_THREADS, (W, u, h, t), stream) for t in range(steps)]


def bind_fused(inputs, outputs, stream=0):
    return in_order(_fused_launches(inputs, outputs, stream))


def bind_graph(inputs, outputs, stream=0):
    return BACKEND.graph(_fused_launches(inputs, outputs, stream), stream, "rnn graph")


def limit_per_step(size: Size) -> str | None:
    if size.batch > STAGE_FLOATS:
        return (f"batch={size.batch}: the per-step kernels stage h in shared memory, at most {STAGE_FLOATS} "
                f"batch rows; split the batch")
    return None


# -- persistent: W in registers for all steps, a grid barrier per step -------------------------
# Block b owns rows [b R, (b + 1) R) of W. Its threads form RG row groups of TR rows; the CC
# threads of a row group split the columns (thread cc takes columns cc, cc + CC, cc + 2 CC, ...:
# coalesced). Each thread keeps its TR x TC tile of W in registers, read from DRAM once.
# Per step and per pass over BC batch columns, a thread
#   1. reads its TC columns of h_{t-1} for BC batch rows (L2; the RG row groups share them via L1),
#   2. forms TR x BC partial sums (TR x TC x BC fused multiply-adds),
#   3. reduce-scatters them across the 32 lanes of its warp (log2 32 = 5 shuffle stages, each
#      halving what is sent: TR x BC shuffles in all, not 5 x TR x BC), and the warps of the row
#      group add theirs through shared memory,
# then R x BC threads apply tanh and store h_t, and the block waits at the grid barrier.
# u_{t+1} is fetched into shared memory while step t computes (off the critical path).


@dataclass(frozen=True)
class Tiling:
    """How a persistent block shares its rows of W among its threads (compile-time constants)."""

    threads: int               # per block, a power of two
    rows_per_thread: int       # TR: rows of W in each thread's tile
    batch_chunk: int           # BC: batch columns per pass (a thread holds TR x BC partial sums)
    blocks_per_sm: int = 1
    about: str = ""

    @property
    def w_registers(self) -> int:
        """Registers per thread for W: at most half of what each thread may have, and 64."""
        return min(64, 65536 // (self.threads * self.blocks_per_sm) // 2)


# llm.c-style numbered versions: ONE GPU run of its study (`kernels-lab bench rnn`) times them side by side.
TILINGS = {
    "v1": Tiling(512, 4, 4, about="512 threads, 4 rows x 4 batch columns each: 16 partial sums per thread"),
    "v2": Tiling(512, 8, 4, about="as v1 with 8 rows per thread: half the row groups re-reading h, "
                                  "twice the partial sums (more registers)"),
    "v3": Tiling(1024, 4, 2, about="1024 threads, 2 batch columns per pass: more warps to hide latency, "
                                   "32 W registers each"),
    "v4": Tiling(256, 4, 4, blocks_per_sm=2, about="256-thread blocks, 2 per SM: smaller blocks, "
                                                   "cheaper block barriers"),
}
GPU_TILING = "v1"


def default_tiling() -> Tiling:
    """GPU_TILING; the simulator runs it with 64-thread blocks (every thread a Python thread there)."""
    tiling = TILINGS[GPU_TILING]
    threads = BACKEND.size(gpu=tiling.threads, simulator=64)
    if threads == tiling.threads:
        return tiling
    return replace(tiling, threads=threads, about=f"{GPU_TILING} with {threads}-thread blocks")


@dataclass(frozen=True)
class Layout:
    """A tiling applied to one (hidden, batch) on one machine: every compile-time constant."""

    hidden: int
    batch: int
    tiling: Tiling
    blocks: int        # G
    rows: int          # R = RG x TR rows per block
    row_groups: int    # RG
    chunks: int        # CC threads per row group
    cols: int          # TC columns per thread
    chunk: int         # BC batch columns per pass
    padded: int        # N0: TR x BC partial sums, padded to a power of two
    stages: int        # S: shuffle stages (lanes exchanging = 2^S)

    @property
    def threads(self) -> int:
        return self.tiling.threads

    @property
    def w_registers(self) -> int:
        return self.tiling.rows_per_thread * self.cols

    @property
    def fits(self) -> bool:
        return self.w_registers <= self.tiling.w_registers

    @property
    def warps_per_group(self) -> int:
        return max(1, self.chunks >> self.stages)


def make_layout(hidden: int, batch: int, tiling: Tiling, max_blocks: int) -> Layout:
    tr = tiling.rows_per_thread
    rg = 1  # the fewest row groups (a power of two) that cover hidden with max_blocks blocks
    while -(-hidden // (rg * tr)) > max_blocks and rg < tiling.threads:
        rg *= 2
    chunks = tiling.threads // rg
    bc = min(tiling.batch_chunk, batch)
    return Layout(hidden, batch, tiling, blocks=-(-hidden // (rg * tr)), rows=rg * tr, row_groups=rg,
                  chunks=chunks, cols=-(-hidden // chunks), chunk=bc,
                  padded=pow2_at_least(tr * bc), stages=min(chunks, 32).bit_length() - 1)


def max_resident_blocks(tiling: Tiling) -> int:
    """Blocks that can hold a slice of W at once: blocks_per_sm per SM (one, on the simulator)."""
    return BACKEND.resident_blocks(tiling.blocks_per_sm)


def persistent_limit(size: Size, tiling: Tiling | None = None) -> str | None:
    """Why the persistent kernel cannot hold W on chip at this size, with the numbers; or None."""
    tiling = tiling or default_tiling()
    blocks = max_resident_blocks(tiling)
    lay = make_layout(size.hidden, size.batch, tiling, blocks)
    if lay.fits:
        return None
    largest = size.hidden
    while largest > 1 and not make_layout(largest, size.batch, tiling, blocks).fits:
        largest -= 1
    need, have = F32 * lay.rows * size.hidden, F32 * tiling.threads * tiling.w_registers
    return (f"hidden={size.hidden}: each of {lay.blocks} blocks (at most {blocks} resident here) must hold {lay.rows} rows of W "
            f"on chip: {need:,} bytes, {lay.w_registers} registers per thread; the registers hold {have:,} bytes "
            f"per block ({tiling.threads} threads x {tiling.w_registers} registers). The largest hidden that fits "
            f"is {largest}. Use the 'graph' or 'fused' variant, which read W from memory every step.")


def _reduce_scatter(padded: int, stages: int):
    """A device function: the `padded` sums of 2^stages lanes, scattered over the lanes.

    Stage s exchanges with the lane whose index differs in bit (stages - 1 - s). While a lane holds
    several values it keeps one half (the upper half if that bit is set) and sends the other: the
    halves shrink, so the whole reduction costs ~padded shuffles. Afterwards lane l holds the
    totals of values (l * padded >> stages) + q, q < max(1, padded >> stages), in vals[q] (when
    there are fewer values than lanes, 2^stages / padded neighbouring lanes hold the same one).
    Built stage by stage in Python so that every loop has a constant trip count (registers only).
    """
    @BACKEND.jit(device=True, **_INLINE)
    def done(vals, send, recv, lane):
        pass

    step, n = done, padded
    plan = []
    for s in range(stages):
        plan.append((1 << (stages - 1 - s), n // 2 if n > 1 else 0))
        n = max(1, n // 2)
    for mask, half in reversed(plan):
        step = _scatter_stage(mask, half, step)
    return step


def _each_chunk(one_pass, starts: tuple[int, ...]):
    """A device function running one_pass(b0, ...) for each b0 in `starts`, unrolled here in Python:
    b0 is a constant in every call, so its guards fold and its loops unroll (a run-time loop over
    the passes kept LLVM from unrolling the loops inside, and w[] went to local memory)."""
    @BACKEND.jit(device=True, **_INLINE)
    def done(t, h, w, vals, send, recv, part, us):
        pass

    chain = done
    for b0 in reversed(starts):
        chain = _then_pass(one_pass, b0, chain)
    return chain


def _then_pass(one_pass, b0: int, rest):
    @BACKEND.jit(device=True, **_INLINE)
    def run(t, h, w, vals, send, recv, part, us):
        one_pass(b0, t, h, w, vals, send, recv, part, us)
        rest(t, h, w, vals, send, recv, part, us)
    return run


def _scatter_stage(mask: int, half: int, then):
    if half:
        @BACKEND.jit(device=True, **_INLINE)
        def stage(vals, send, recv, lane):
            upper = (lane & mask) != 0
            for k in range(half):
                send[k] = vals[k] if upper else vals[k + half]
            _exchange(send, recv, half, mask)
            for k in range(half):
                vals[k] = (vals[k + half] if upper else vals[k]) + recv[k]
            then(vals, send, recv, lane)
    else:  # one value left: a plain butterfly add
        @BACKEND.jit(device=True, **_INLINE)
        def stage(vals, send, recv, lane):
            send[0] = vals[0]
            _exchange(send, recv, 1, mask)
            vals[0] += recv[0]
            then(vals, send, recv, lane)
    return stage


BARRIERS = ("grid", "flag")
SPIN_LIMIT = 1 << 22  # polls of one flag before a barrier gives up (~seconds on a GPU): never a hang


class BarrierTimeout(RuntimeError):
    """A persistent kernel's flag barrier gave up waiting: some block never arrived."""


class DoesNotFit(ValueError):
    """This size cannot run with this variant on this machine (the message says why and what instead)."""


@BACKEND.jit(device=True, **_INLINE)
def _grid_barrier(flags, status, ctl, t, spin_limit):
    cuda.cg.this_grid().sync()
    return True


@BACKEND.jit(device=True, **_INLINE)
def _flag_barrier(flags, status, ctl, t, spin_limit):
    """Publish 'step t done' in this block's flag, wait until every block's flag says so.

    flags[k] holds launch base + step + 1 of block k (the base is flags[grid] x steps at the
    start of this launch, so a new launch never mistakes old flags for new ones). Thread k of each
    block polls flag k with an acquire load (never hoisted, never served from a stale line), all
    in parallel. A poll that exceeds spin_limit stores the step in status and the block stops:
    an error, never a hang. Returns False when this block must stop.
    """
    cuda.syncthreads()  # every thread's stores of h_t are issued
    tid = cuda.threadIdx.x
    target = ctl[0] + t + 1
    if tid == 0:
        cuda.threadfence()  # ... and visible GPU-wide before the flag says so
        cuda.atomic.exch(flags, cuda.blockIdx.x, np.int32(target))
    k = tid
    while k < cuda.gridDim.x:
        spins = 0
        while load_acquire_sys(flags, k) < target and spins <= spin_limit:
            spins += 1
        if spins > spin_limit:
            status[0] = np.int32(t + 1)
            ctl[1] = 1
            k = cuda.gridDim.x
        k += cuda.blockDim.x
    cuda.syncthreads()
    return ctl[1] == 0


@lru_cache(maxsize=None)
def persistent_kernel(lay: Layout, barrier: str):
    """The persistent kernel for one layout and barrier ("grid" or "flag")."""
    if barrier not in BARRIERS:
        raise ValueError(f"barrier {barrier!r}: expected one of {BARRIERS}")
    H, B = lay.hidden, lay.batch
    NT, R, RG, CC = lay.threads, lay.rows, lay.row_groups, lay.chunks
    TR, TC, BC, N0, S = lay.tiling.rows_per_thread, lay.cols, lay.chunk, lay.padded, lay.stages
    WG = lay.warps_per_group
    HELD = max(1, N0 >> S)          # values a lane holds after the reduce-scatter
    SPREAD = max(1, (1 << S) // N0)  # lanes holding the same value: the first one stores it
    HALF = max(1, N0 // 2)
    W_TILE, U_ROWS = TR * TC, B * R  # array sizes must be constants, not expressions
    # guards that are always true at this size fold away: the loops they sit in stay small enough
    # to unroll fully, which keeps w[] in registers (a partly unrolled loop indexes it at run time)
    COLS_EXACT, BATCH_EXACT = CC * TC == H, B % BC == 0
    flagged = barrier == "flag"
    step_barrier = _flag_barrier if flagged else _grid_barrier
    reduce_scatter = _reduce_scatter(N0, S)

    @BACKEND.jit(device=True, **_INLINE)
    def one_pass(b0, t, h, w, vals, send, recv, part, us):
        """Step t for batch rows b0 .. b0 + BC - 1: partial sums, reduction, tanh, store of h_t."""
        tid = cuda.threadIdx.x
        rg, cc = tid // CC, tid % CC
        lane = cc % (1 << S)
        row0 = cuda.blockIdx.x * R
        first = row0 + rg * TR
        for v in range(N0):
            vals[v] = np.float32(0)
        if t > 0 and first < H:
            for k in range(TC):
                c = cc + CC * k
                if COLS_EXACT or c < H:
                    for bb in range(BC):
                        if BATCH_EXACT or b0 + bb < B:
                            hv = h[t - 1, b0 + bb, c]
                            for i in range(TR):
                                vals[i * BC + bb] += w[i * TC + k] * hv
        reduce_scatter(vals, send, recv, lane)
        if lane % SPREAD == 0:
            for q in range(HELD):
                part[rg, cc >> S, ((lane * N0) >> S) + q] = vals[q]
        cuda.syncthreads()
        for f in range(tid, R * BC, NT):
            row, b = f // BC, b0 + f % BC
            if row0 + row < H and b < B:
                z = us[t % 2, b * R + row]
                for j in range(WG):
                    z += part[row // TR, j, (row % TR) * BC + f % BC]
                h[t, b, row0 + row] = math.tanh(z)
        cuda.syncthreads()  # part is rewritten by the next pass

    all_passes = _each_chunk(one_pass, tuple(range(0, B, BC)))

    def rnn_persistent(W, u, h, flags, status, spin_limit):
        w = cuda.local.array(W_TILE, np.float32)  # this thread's tile of W: registers, all steps
        vals = cuda.local.array(N0, np.float32)
        send = cuda.local.array(HALF, np.float32)
        recv = cuda.local.array(HALF, np.float32)
        part = cuda.shared.array((RG, WG, N0), np.float32)  # one warp's sums per row group
        us = cuda.shared.array((2, U_ROWS), np.float32)      # u_t and u_{t+1} for this block's rows
        ctl = cuda.shared.array(3, np.int32)                # flag barrier: base, stop, launch number
        steps = h.shape[0]
        tid = cuda.threadIdx.x
        rg, cc = tid // CC, tid % CC
        row0 = cuda.blockIdx.x * R
        for i in range(TR):
            for k in range(TC):
                r, c = row0 + rg * TR + i, cc + CC * k
                w[i * TC + k] = W[r, c] if r < H and c < H else np.float32(0)
        for f in range(tid, U_ROWS, NT):
            us[0, f] = u[0, f // R, row0 + f % R] if row0 + f % R < H else np.float32(0)
        if flagged and tid == 0:
            ctl[2] = flags[cuda.gridDim.x]
            ctl[0] = ctl[2] * steps
            ctl[1] = 0
        cuda.syncthreads()
        for t in range(steps):
            if t + 1 < steps:  # fetched now, used after the next barrier
                for f in range(tid, U_ROWS, NT):
                    us[(t + 1) % 2, f] = u[t + 1, f // R, row0 + f % R] if row0 + f % R < H else np.float32(0)
            all_passes(t, h, w, vals, send, recv, part, us)
            if t + 1 < steps and not step_barrier(flags, status, ctl, t, spin_limit):
                break
        if flagged and cuda.blockIdx.x == 0 and tid == 0:
            flags[cuda.gridDim.x] = ctl[2] + 1  # the next launch's flags start above this one's

    rnn_persistent.__name__ = rnn_persistent.__qualname__ = f"rnn_persistent_{barrier}"
    return BACKEND.jit(rnn_persistent, **_jit_options(NT, lay.tiling.blocks_per_sm))


def _barrier_bytes(lay: Layout, steps: int, barrier: str) -> tuple[int, int]:
    """(read, written) bytes of the flag barrier: each block reads the launch number once; per
    step but the last, one atomic exchange (read + write) and at least one poll of every block's
    flag; block 0 bumps the launch number at the end. A GPU polls more while it waits: this is
    the floor (exact on the simulator's single block). grid.sync's own words are not counted."""
    if barrier != "flag":
        return 0, 0
    g = lay.blocks
    return F32 * (g + (steps - 1) * (g + g * g)), F32 * ((steps - 1) * g + 1)


def plan_persistent_for(size: Size, tiling: Tiling, barrier: str) -> Plan:
    H, B, T = size.hidden, size.batch, size.steps
    lay = make_layout(H, B, tiling, max_resident_blocks(tiling))
    # W once; from step 1 on every active row group (ceil(H / TR) of them) reads all of h_{t-1}
    # (its RG groups per block share it through L1); u and h_t once
    h_reads = (T - 1) * -(-H // tiling.rows_per_thread) * B * H
    sync_read, sync_write = _barrier_bytes(lay, T, barrier)
    return Plan((KernelLaunch(f"rnn_persistent_{barrier}", lay.blocks, lay.threads,
                              bytes_read=F32 * (H * H + h_reads + T * B * H) + sync_read,
                              bytes_written=F32 * T * B * H + sync_write),))


class PersistentLaunch:
    """One launch of the persistent kernel, bound once; refuses to go on after a barrier timeout."""

    def __init__(self, kernel, lay: Layout, args: tuple, gave_up: GiveUpWord, stream):
        self.configured = kernel[lay.blocks, lay.threads, stream]
        self.args, self.lay, self.gave_up = args, lay, gave_up

    def __call__(self) -> None:
        if (step := self.gave_up.at()) is not None:  # the step whose barrier timed out in an earlier launch
            raise BarrierTimeout(f"a flag barrier of rnn_persistent timed out at step {step} (some of the "
                                 f"{self.lay.blocks} blocks never arrived: were they all resident?); the output "
                                 f"of that launch is wrong")
        self.configured(*self.args)


def bind_persistent_with(inputs, outputs, stream=0, *, tiling: Tiling | None = None, barrier: str = "grid",
                         spin_limit: int = SPIN_LIMIT) -> PersistentLaunch:
    W, u, h = _check(inputs, outputs)
    steps, batch, hidden = h.shape
    tiling = tiling or default_tiling()
    size = Size(hidden=hidden, batch=batch, steps=steps)
    if (why := persistent_limit(size, tiling)) is not None:
        raise DoesNotFit(why)
    lay = make_layout(hidden, batch, tiling, max_resident_blocks(tiling))
    kernel = persistent_kernel(lay, barrier)
    flags = cuda.to_device(np.zeros(lay.blocks + 1, np.int32), stream=stream)
    gave_up = GiveUpWord()
    args = (W, u, h, flags, gave_up.word, np.int32(spin_limit))
    BACKEND.require_coresident(kernel, args, lay.blocks, lay.threads)
    return PersistentLaunch(kernel, lay, args, gave_up, stream)


def persistent_variant(name: str, barrier: str, tiling: Tiling | None = None, about: str = "") -> Variant:
    """A persistent variant with this barrier and tiling (the bench builds one per numbered tiling)."""
    def plan(size: Size) -> Plan:
        return plan_persistent_for(size, tiling or default_tiling(), barrier)

    def bind(inputs, outputs, stream=0):
        return bind_persistent_with(inputs, outputs, stream, tiling=tiling, barrier=barrier)

    return Variant(name, "persistent", about, plan, bind, limit=lambda size: persistent_limit(size, tiling))


# Which barrier the plain "persistent" variant uses: the one its study (`kernels-lab bench rnn`) measured faster
# on an H200 and again on an H100 (figures/data/rnn_h100.json: the flag barrier at batch 1 and 4, both hidden
# sizes; grid.sync only at hidden 2048, batch 32). The other stays as a labelled comparison (persistent_gridsync here).
PERSISTENT_BARRIER = "flag"

WORKLOAD = register(Workload(
    name="rnn",
    about="h_t = tanh(W h_{t-1} + u_t) over all steps, float32: per-step launches vs one persistent kernel",
    axes=(Axis("hidden", sim=37, gpu=1024, sweep=(256, 512, 1024, 2048), sim_sweep=(13,),
               unit="units", about="rows (and columns) of W"),
          Axis("batch", sim=3, gpu=4, sweep=(1, 4, 32), sim_sweep=(1,), unit="sequences",
               about="independent sequences stepped together"),
          Axis("steps", sim=4, gpu=512, sweep=(64, 512), sim_sweep=(1,), unit="steps",
               about="time steps (each needs the one before)")),
    make_inputs=make_inputs,
    reference=reference,
    output_specs=output_specs,
    tolerance=Tolerance(rtol=1e-4, atol=1e-5),
    symmetric_inputs=symmetric_inputs,
    hard_inputs=HARD_INPUTS,
))
WORKLOAD.add(Variant("unfused", "unfused", "per step: a matvec kernel writes W h + u to memory, a tanh kernel "
                     "reads it; W read every step", plan_unfused, bind_unfused, limit=limit_per_step))
WORKLOAD.add(Variant("fused", "fused", "one kernel per step: W h + u and tanh together; W read every step",
                     plan_fused, bind_fused, limit=limit_per_step))
WORKLOAD.add(Variant("graph", "graph", "the fused per-step launches captured once in a CUDA graph, replayed",
                     plan_fused, bind_graph, limit=limit_per_step))
_OTHER = next(b for b in BARRIERS if b != PERSISTENT_BARRIER)
PERSISTENT_VARIANTS = {"persistent": PERSISTENT_BARRIER,  # registered name -> its barrier
                       {"grid": "persistent_gridsync", "flag": "persistent_flag"}[_OTHER]: _OTHER}
for _name, _barrier in PERSISTENT_VARIANTS.items():
    WORKLOAD.add(persistent_variant(_name, _barrier, about=(
        f"one launch: W in registers for all steps, a {_barrier} barrier per step" if _barrier == PERSISTENT_BARRIER
        else f"comparison: as persistent, with a {_barrier} barrier per step")))


# -- the exercise: one step kernel, launched once per step (lesson 05) -------------------------

def _cases() -> tuple[Case, ...]:
    s = WORKLOAD.size
    return (Case(s(hidden=8, batch=2, steps=3), 51), Case(s(hidden=13, batch=1, steps=4), 52),
            Case(s(hidden=24, batch=3, steps=2), 53),
            Case(s(hidden=17, batch=2, steps=3), 61, hidden=True), Case(s(hidden=5, batch=4, steps=1), 62, hidden=True),
            Case(s(hidden=12, batch=2, steps=3), 63, hidden=True, probe=True))


WORKLOAD.add_exercise(Exercise(
    name="rnn_step", workload="rnn", variant="fused", lesson="05",
    title="Step a recurrent layer: one kernel computes h_t = tanh(W h_{t-1} + u_t); launch it once per step",
    kind="host", entry="run_rnn",
    signature="def run_rnn(W, u, h):  # W (hidden, hidden); u, h (steps, batch, hidden); "
              "h[t] = tanh(W h[t-1] + u[t]), h[-1] = 0",
    cases=_cases(), argument_order=("W", "u", "h"),
    budget_note="one launch per step: step t needs every element of h[t-1], so it cannot start before "
                "the launch that wrote it has finished",
    points={"correct (public)": 4, "correct (hidden)": 4, "launch budget": 2}))
