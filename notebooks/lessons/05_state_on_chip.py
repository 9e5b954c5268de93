# %% [markdown]
# # 05 State on chip: a persistent RNN
#
# **Goals:** see what "persistent" means for a loop over time steps (one kernel that keeps its state, the
# recurrent weights, on chip for all of them); size the on-chip memory and read from it the largest layer
# that fits; know what the grid barrier between steps costs and why every block must be resident at once;
# write the per-step kernel that the persistent one replaces; and read on the H200 where keeping W on chip
# pays and where it stops paying.
#
# The workload (`kernels_lab/topics/rnn/workload.py`), float32, `h_{-1} = 0`:
#
#     h_t = tanh(W h_{t-1} + u_t)      t = 0 .. T-1;  W: hidden x hidden;  u, h: T x batch x hidden
#
# `u` (the input projection of every step) is computed beforehand in one large GEMM. What is left is a
# chain: step t needs **all** of `h_{t-1}`, so the steps cannot overlap, and between two steps every block
# must wait for every other: a kernel boundary, or a barrier across the whole grid.

# %%
import math
import re
import warnings
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.backend import BACKEND
from kernels_lab.runtime import cuda, device_facts
from kernels_lab.topics.rnn import workload as rnn
print(lessons.setup())
w = get_workload("rnn")

# %% [markdown]
# ## What persists: W
# Per step, `W h` is `batch` matrix-vector products: `2 hidden^2 batch` flops for the `4 hidden^2` bytes
# of W, so **batch / 2 flops per byte of W**. At small batch that is far too few flops to hide a read of W:
# whoever reads W at every step is paced by it. The per-step variants (`unfused`, `fused`, `graph`) launch
# a kernel per step and read W at every step but the first (step 0 has no `h_{-1}` to multiply).
# `persistent` follows Persistent RNNs (Diamos et al., ICML 2016): **one** launch loops over the steps;
# each block loads its rows of W into its threads' **registers** once and keeps them there for all T steps.
# Only `h` moves between steps (through L2), and a grid barrier stands where the kernel boundary was.
# The plans, at a size the H200 benchmark timed:

# %%
big = w.size(hidden=1024, batch=4, steps=512)
print(f"{big}: W is {4 * big.hidden ** 2 / 2**20:.0f} MiB; flops per byte of W per step = batch / 2 = {big.batch / 2:g}")
for v in w.variants.values():
    plan = v.plan(big)
    print(f"{v.name:<20} {plan.n_launches:>4} launch(es)  {plan.bytes_total / big.steps / 2**20:6.2f} MiB per step   {v.about}")
print("the barrier of each persistent variant:", ", ".join(f"{n}: {b}" for n, b in rnn.PERSISTENT_VARIANTS.items()))

# %% [markdown]
# ## Bytes, counted by the code that runs
# As in lesson 01: every variant at the workload's small default size, launches counted and, on the
# simulator, every global access traced, here **per array**, so W's bytes can be read off each launch.
# On the simulator `graph` runs its per-step launches one by one (the simulator has no CUDA graphs).

# %%
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.profile.measure import trace_if_simulated
size = w.size()  # the back-end's default: tiny on the simulator
inputs = w.make_inputs(size, np.random.default_rng(1))
want = w.reference(inputs)["h"]
w_bytes = 4 * size.hidden ** 2
traces, launchers = {}, {}
print(f"{size}: W is {w_bytes:,} B")
for v in w.variants.values():
    outputs = poisoned(w.output_specs(size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph on the simulator: "no CUDA graphs", said above
        launch = v.bind(to_device(inputs), outputs)
    launchers[v.name] = launch
    with count_launches() as seen, trace_if_simulated() as trace:
        launch()
    traces[v.name] = trace
    traced = f"traced {trace.bytes_total:>7,} B  " if trace else ""
    err = np.abs(outputs["h"].copy_to_host() - want).max()
    print(f"{v.name:<20} launches {len(seen):>2}  {traced}plan {v.plan(size).bytes_total:>7,} B   max error {err:.1e}")

# %% [markdown]
# W's bytes, launch by launch (traced; on a GPU, what the plan says: W at every step but the first for a
# per-step variant, once for a persistent one):

# %%
for name in ("fused", "persistent"):
    if BACKEND.can_trace:  # the byte trace: the simulator sees every access
        per_launch = [t.arrays["W"].bytes_read if "W" in t.arrays else 0 for t in traces[name].launches]
    else:
        per_launch = [0] + [w_bytes] * (size.steps - 1) if name == "fused" else [w_bytes]
    shown = per_launch if len(per_launch) <= 6 else per_launch[:4] + ["..."]
    print(f"{name:<11} {len(per_launch)} launch(es), W bytes per launch {shown}: "
          f"{sum(per_launch):,} B = {sum(per_launch) / w_bytes:g} x W over {size.steps} steps")

# %% [markdown]
# **The simulator's grid barrier is only a block barrier.** numba's simulator runs blocks one after
# another, so `cuda.cg.this_grid().sync()` there waits for the threads of one block and no others: with
# two blocks the results would be silently wrong. kernels-lab therefore runs the persistent variants with
# **one block** on the simulator (`rnn.default_tiling()` there: 64 threads), and its limit refuses any hidden one block cannot hold.
# On a GPU the same kernel runs one block per SM:

# %%
lay = launchers["persistent"].lay
print(f"here: {lay.blocks} block(s) of {lay.threads} threads, {lay.rows} rows of W per block, "
      f"{lay.w_registers} W values per thread ({rnn.default_tiling().about})")

# %% [markdown]
# ### Exercise 1: one kernel per step
# Before the persistent kernel, the baseline it replaces. Write `run_rnn(W, u, h)`: a kernel `rnn_step(W,
# u, h, t)` that computes step t, `h[t, b, i] = tanh(sum_j W[i, j] h[t-1, b, j] + u[t, b, i])` (for t = 0
# the sum is empty), one thread per (batch row b, unit i); and a host loop that launches it once per step.
# It cannot be one launch: step t reads every element of `h[t-1]`, which other blocks write. The check runs
# small odd sizes into outputs poisoned with NaN, against float64, and counts launches (one per step).
# The declaration:

# %%
from kernels_lab.grading.exercises import get_exercise
print(get_exercise("rnn_step").signature)

# %% tags=["stub"]
@cuda.jit
def rnn_step(W, u, h, t):
    # YOUR CODE: k = cuda.grid(1); b, i from k; z = u[t, b, i] + (t > 0: sum over j of W[i, j] * h[t-1, b, j]);
    # h[t, b, i] = math.tanh(z)
    pass


def run_rnn(W, u, h):
    # YOUR CODE: steps, batch, hidden = u.shape; launch rnn_step once per step, enough threads for batch x hidden
    pass


# %% tags=["exercise"]
# EXERCISE: rnn_step
import math


@cuda.jit
def rnn_step(W, u, h, t):
    # one thread per (batch row b, unit i): h[t, b, i] = tanh(sum_j W[i, j] h[t-1, b, j] + u[t, b, i])
    k = cuda.grid(1)
    batch, hidden = u.shape[1], u.shape[2]
    if k < batch * hidden:
        b = k // hidden
        i = k % hidden
        z = u[t, b, i]
        if t > 0:
            for j in range(hidden):
                z += W[i, j] * h[t - 1, b, j]
        h[t, b, i] = math.tanh(z)


def run_rnn(W, u, h):
    steps, batch, hidden = u.shape
    threads = 128
    blocks = (batch * hidden + threads - 1) // threads
    for t in range(steps):
        rnn_step[blocks, threads](W, u, h, t)


# %%
print(lessons.check("rnn_step", globals().get("run_rnn")))

# %% [markdown]
# Your kernel reads W at every step, and each thread reads a whole row of W alone (uncoalesced: the threads
# of a warp read 32 different rows). The workload's `fused` variant lets the 32 lanes of a warp split a row
# and add their partial sums with shuffles; `persistent` goes further and never reads W again.
#
# ## The on-chip budget
# On chip there are two stores a kernel controls: the **register file**, 64K 32-bit registers per SM on
# compute capability 9.0 (at most 255 per thread), and **shared memory**, 228 KiB per SM (at most 227 KiB
# per block; numba's static `cuda.shared.array` stops at 48 KiB per block). Everything scales with the SMs.
# The numbers below take the H200's SM count from the committed runs (`figures/data/ladder_h200.json`;
# on a GPU, from the device itself):

# %%
REGISTERS_PER_SM = 65536         # 32-bit registers per SM, compute capability 9.0 (CUDA C Programming Guide)
SHARED_PER_SM = 228 * 1024       # bytes of shared memory per SM, compute capability 9.0
STATIC_SHARED_PER_BLOCK = 48 * 1024  # numba-cuda 0.30 declares shared arrays statically: 48 KiB a block at most
h200 = lessons.committed("ladder_h200.json")["meta"]["device"]
sms = int(re.search(r"(\d+) SMs", h200).group(1))
l2_bytes = int(re.search(r"(\d+) MiB L2", h200).group(1)) * 2**20
if BACKEND.can_time:  # a GPU: the machine this runs on
    dev = cuda.get_current_device()
    sms, l2_bytes = device_facts().sm_count, device_facts().l2_bytes
    REGISTERS_PER_SM = getattr(dev, "MAX_REGISTERS_PER_MULTIPROCESSOR", REGISTERS_PER_SM)
    SHARED_PER_SM = getattr(dev, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", SHARED_PER_SM)
regs_total = sms * REGISTERS_PER_SM * 4
shared_total = sms * SHARED_PER_SM
print(device_facts().describe() if BACKEND.can_time else h200)
print(f"registers:     {sms} SMs x {REGISTERS_PER_SM:,} x 4 B = {regs_total / 2**20:6.2f} MiB")
print(f"shared memory: {sms} SMs x {SHARED_PER_SM // 1024} KiB    = {shared_total / 2**20:6.2f} MiB")
print(f"(L2, for comparison: {l2_bytes / 2**20:.0f} MiB, shared by all SMs, off the SMs)")
for hidden in (1024, 2048, 4096):
    print(f"W at hidden {hidden}: {4 * hidden ** 2 / 2**20:5.0f} MiB")
print(f"every register holding W, nothing else: hidden <= {math.isqrt(regs_total // 4)}")
print(f"W in numba's static shared memory (48 KiB a block, one block per SM): "
      f"hidden <= {math.isqrt(sms * STATIC_SHARED_PER_BLOCK // 4)}")

# %% [markdown]
# A thread needs registers besides W: its partial sums, the `h` values it multiplies, indices. The
# workload's tilings (`rnn.TILINGS`, the H200 one is `rnn.GPU_TILING`) give W at most **half** of what each
# thread may have, and 64 at most: `Tiling.w_registers`. A block of `threads` threads owns `rows` rows of
# W, split so that each thread holds a tile of `rows_per_thread` rows x `cols` columns: W stays in
# registers if `rows_per_thread x cols <= w_registers`, one block per SM (`blocks_per_sm` for `v4`).

# %%
tiling = rnn.TILINGS[rnn.GPU_TILING]
print(f"the H200 tiling {rnn.GPU_TILING}: {tiling.threads} threads x {tiling.blocks_per_sm} block(s) per SM, "
      f"{tiling.rows_per_thread} rows per thread, W registers per thread at most {tiling.w_registers} "
      f"({REGISTERS_PER_SM // (tiling.threads * tiling.blocks_per_sm)} per thread in all)")


def largest_that_fits(tiling, blocks, batch=4, start=8192):
    """The workload's own answer (as rnn.persistent_limit finds it): counting down, the first hidden
    whose layout on `blocks` blocks keeps each thread's tile of W in its W registers."""
    return next(h for h in range(start, 0, -1) if rnn.make_layout(h, batch, tiling, blocks).fits)


# %% [markdown]
# ### Exercise 2: the largest layer the registers hold
# Predict the largest `hidden` whose W fits in W's share of the H200's registers at this tiling: `sms` SMs,
# `tiling.blocks_per_sm` blocks of `tiling.threads` threads on each, and `tiling.w_registers` registers of
# W (4 bytes each) per thread. A budget, not the exact layout: the check takes it within 2 %.

# %% tags=["stub"]
largest_hidden = ...  # YOUR ANSWER: the largest hidden with 4 hidden^2 bytes <= W's share of the registers

# %% tags=["exercise"]
# EXERCISE: rnn_register_budget
largest_hidden = math.isqrt(sms * tiling.blocks_per_sm * tiling.threads * tiling.w_registers)

# %%
print(lessons.expect("largest hidden in registers", largest_hidden,
                     largest_that_fits(tiling, sms * tiling.blocks_per_sm), rel=0.02))

# %% [markdown]
# The workload's exact answer is a little lower than the budget: a block owns whole rows, the rows of a
# block come in powers of two of row groups, and there are only `sms` blocks. Its layouts on the H200, and
# the limit at work: asked for a hidden it cannot hold, the persistent variant refuses before it launches
# anything, says why with the numbers, and names the variants that can run it (`why_not`, from
# `rnn.persistent_limit`; on the simulator its machine is the one block).

# %%
exact = largest_that_fits(tiling, sms * tiling.blocks_per_sm)
print(f"the workload's largest hidden on the H200 at {rnn.GPU_TILING}: {exact}")
for hidden in (1024, exact, 4096):
    lay = rnn.make_layout(hidden, 4, tiling, sms * tiling.blocks_per_sm)
    print(f"  hidden {hidden}: {lay.blocks} blocks of {lay.rows} rows, each thread {tiling.rows_per_thread} rows x "
          f"{lay.cols} columns = {lay.w_registers} W registers: {'fits' if lay.fits else 'does NOT fit'}")
too_big = w.size(hidden=4096, batch=4, steps=512)
print(f"\npersistent at {too_big}, on this machine:\n  {w.variant('persistent').why_not(too_big)}")
print(f"fused at {too_big}: {w.variant('fused').why_not(too_big) or 'runs (W read from memory every step)'}")

# %% [markdown]
# ## The grid barrier, and why every block must be resident
# Between two steps every block must have written its rows of `h_t` before any block reads `h_t`. Inside
# one kernel that is a **grid barrier**. The workload has two (the list above): `grid`, CUDA's
# `cuda.cg.this_grid().sync()`, and `flag`: each block publishes its step in a flag, and every block polls
# all the flags with loads the compiler cannot hoist, a bounded number of times (`rnn._flag_barrier`).
# What makes a flag publish the rows before it (scopes, release/acquire, cumulativity through the block
# barrier), each seen breaking on the simulator: the memory-model primer, `docs/memory-model.md`.
# What a grid sync costs, from the committed launch ladder (`kernels-lab bench launch`: 2000 boundaries
# each way on the H200):

# %%
ladder = {r["path"]: r for r in lessons.committed("ladder_h200.json")["records"]}
for path in ("pre-bound cuda.core launch, 4 array args", "CUDA graph replay, 4 array args",
             "persistent kernel, one grid-sync step"):
    print(f"{path:<42} {ladder[path]['device_us_per_boundary']:5.2f} us per boundary")
sync_us = ladder["persistent kernel, one grid-sync step"]["device_us_per_boundary"]
replay_us = ladder["CUDA graph replay, 4 array args"]["device_us_per_boundary"]
print(f"\na grid sync costs {sync_us / replay_us:.2f}x what a graph replay pays per kernel boundary: "
      f"{'more' if sync_us > replay_us else 'less'}; the barrier alone is not what a persistent kernel gains")

# %% [markdown]
# So a persistent kernel does not win by a cheaper boundary than a CUDA graph's: it wins by what stays on
# chip across the boundary (W), and by not relaunching from the host.
#
# **Co-residency.** A block that waits at the barrier keeps its SM; a block that has not started yet never
# arrives. If the grid has more blocks than fit on the GPU at once, the first blocks wait for ones that
# can only start when they leave: a deadlock. So the grid is sized to the machine, never to the data: at
# most `blocks_per_sm x SMs` blocks (the layouts above), and the rows of W are split over them. With
# `grid.sync()` CUDA's cooperative launch refuses a grid that cannot be co-resident; with the flag barrier
# nothing would, and the blocks' bounded polls would time out (`rnn.BarrierTimeout`). So the workload
# checks before every launch (`BACKEND.require_coresident`). One block more than fits:

# %%
from kernels_lab.backend import BACKEND
from kernels_lab.runtime import BackendError
bound = launchers["persistent"]
kernel = rnn.persistent_kernel(bound.lay, rnn.PERSISTENT_BARRIER)
limit = BACKEND.resident_limit(kernel, bound.args, bound.lay.threads)  # the arguments give the types
print(f"this machine: at most {limit} co-resident block(s) of {bound.lay.threads} threads for this kernel")
try:
    BACKEND.require_coresident(kernel, bound.args, limit + 1, bound.lay.threads)
except BackendError as e:
    print(e)

# %% [markdown]
# ### Exercise 3: W's bytes over a run
# At hidden 1024, batch 4, T = 512 steps (the H200 benchmark's size `big`): how many bytes of W does `fused`
# read over the whole run, and how many does `persistent`? (W is `4 hidden^2` bytes; look at the per-launch
# list above for when W is read.) The check takes W's share from the plans: the one term of a plan that
# does not grow with the batch.

# %% tags=["stub"]
w_bytes_fused = ...       # YOUR ANSWER: bytes of W read by fused over 512 steps
w_bytes_persistent = ...  # YOUR ANSWER: bytes of W read by persistent over 512 steps

# %% tags=["exercise"]
# EXERCISE: rnn_w_bytes
w_bytes_fused = 4 * big.hidden ** 2 * (big.steps - 1)
w_bytes_persistent = 4 * big.hidden ** 2


# %%
def w_share(plan_of, size):
    """W's bytes in a plan: everything else (h, u) grows with the batch, W does not."""
    return 2 * plan_of(size).bytes_total - plan_of(size.replace(batch=2 * size.batch)).bytes_total


print(lessons.expect("W bytes, fused", w_bytes_fused, w_share(w.variant("fused").plan, big)))
print(lessons.expect("W bytes, persistent", w_bytes_persistent,
                     w_share(lambda s: rnn.plan_persistent_for(s, tiling, "grid"), big)))
print(f"fused reads W {w_bytes_fused / w_bytes_persistent:.0f} times as often")

# %% [markdown]
# ## Measured on a GPU (committed results)
# `kernels-lab bench rnn` (the topic's study) checked every variant against float64 over all steps, then timed
# them (cold L2, medians) at hidden 1024 and 2048 and batch 1, 4 and 32, with three anchors: torch's eager
# `addmm + tanh` loop, that loop captured in a torch CUDA graph, and `torch.nn.RNN` (cuDNN). Time per step:

# %%
path = lessons.DATA / "rnn_h100.json"
res = lessons.committed("rnn_h100.json") if path.exists() else None
by_size = {}
if res is None:
    print("The results (figures/data/rnn_h100.json) are not committed yet; the cells below skip.")
else:
    meta = res["meta"]
    print(f"{meta['device']}, {meta['date'][:10]}, {meta.get('steps')} steps; persistent barrier "
          f"'{meta.get('persistent_barrier')}', tiling {meta.get('tiling')}")
    for problem in meta.get("problems", []):
        print("  problem reported by the run:", problem)
    for r in res["records"]:
        if r.get("us_per_step") is not None and (r["registered"] or r["pattern"] == "anchor"):  # no versions
            by_size.setdefault((r["size"]["hidden"], r["size"]["batch"]), {})[r["line"]] = r
    names = [n for n in w.variants if any(n in got for got in by_size.values())]
    names += sorted({n for got in by_size.values() for n in got} - set(names))  # the anchors
    sizes = sorted(by_size)
    print(f"\n{'us per step':<21}" + "".join(f"{f'{h}/{b}':>10}" for h, b in sizes) + "   (hidden/batch)")
    for n in names:
        print(f"{n:<21}" + "".join(f"{by_size[s][n]['us_per_step']:10.2f}" if n in by_size[s] else f"{'-':>10}"
                                   for s in sizes))

# %% [markdown]
# Who wins where: at each size, the fastest of everything timed, and the persistent kernel against the
# fastest per-step launch of ours and against torch (above 1: persistent is faster). The two barriers
# side by side, and the ladder's grid sync as a share of the step of the kernel that uses it:

# %%
def fastest(records):
    return min(records, key=lambda r: r["us_per_step"], default=None)


winners = {}
for (hidden, batch), got in sorted(by_size.items()):
    best = fastest(got.values())
    winners.setdefault(hidden, {})[batch] = best
    line = f"hidden {hidden:>4}, batch {batch:>2}: fastest {best['variant']:<16} {best['us_per_step']:6.2f} us"
    p = got.get("persistent")
    if p is not None:
        launched = fastest([r for r in got.values() if r["pattern"] not in ("persistent", "anchor")])
        torch = fastest([r for r in got.values() if r["pattern"] == "anchor"])
        line += "; persistent vs " + ", ".join(f"{o['variant']} {o['us_per_step'] / p['us_per_step']:.2f}x"
                                                for o in (launched, torch) if o is not None)
    print(line)
    by_barrier = {r.get("barrier"): r for r in got.values() if r["pattern"] == "persistent"}
    if "grid" in by_barrier and "flag" in by_barrier:
        grid, flag = by_barrier["grid"], by_barrier["flag"]
        print(f"{'':<22}barriers: flag {flag['us_per_step']:.2f} us, grid.sync {grid['us_per_step']:.2f} us "
              f"({'flag' if flag['us_per_step'] < grid['us_per_step'] else 'grid.sync'} faster); "
              f"one grid sync (the ladder run's) = {sync_us / grid['us_per_step']:.0%} of a grid.sync step")
for hidden, best in winners.items():
    ahead = [b for b, r in sorted(best.items()) if r["pattern"] == "persistent"]
    print(f"hidden {hidden}: a persistent kernel is the fastest at batch {', '.join(map(str, ahead)) or 'none'}"
          + "".join(f"; at batch {b}: {r['variant']}" for b, r in sorted(best.items()) if r["pattern"] != "persistent"))
if not by_size:
    print("(no results committed yet)")

# %%
from IPython.display import Image, display
for figure in ("rnn_h100_us_per_step.png", "rnn_h100_bytes.png"):
    where = lessons.DATA.parent / figure
    if where.exists():
        display(Image(filename=str(where)))
    else:
        print(f"figures/{figure} is not committed yet (kernels-lab plot draws it from the committed results)")

# %% [markdown]
# ## Where keeping W on chip stops paying
# The persistent kernel saves W's reads, `4 hidden^2` bytes a step, whatever the batch. What it pays grows
# with the batch: every row group of every block reads all of `h_{t-1}` (`batch x hidden` floats) at every
# step, and all the flops (`2 hidden^2 batch` a step) run as plain float32 multiply-adds on the tiles in
# registers. The plans, per step (most of this is L2 and L1 traffic: W at these sizes fits in L2):

# %%
print(f"{'hidden':>6} {'batch':>5} {'flop/B of W':>12} {'fused MiB':>10} {'persistent MiB':>15}   per step, planned")
for hidden in (1024, 2048):
    for batch in (1, 4, 32):
        s = w.size(hidden=hidden, batch=batch, steps=512)
        f, p = (w.variant(n).plan(s).bytes_total / s.steps / 2**20 for n in ("fused", "persistent"))
        print(f"{hidden:>6} {batch:>5} {batch / 2:>12g} {f:>10.2f} {p:>15.2f}   "
              f"{'persistent moves fewer' if p < f else 'persistent moves MORE'}")
print(f"\nW fits in L2 ({l2_bytes / 2**20:.0f} MiB) at hidden 1024 ({4 * 1024 ** 2 / 2**20:.0f} MiB) and 2048 "
      f"({4 * 2048 ** 2 / 2**20:.0f} MiB): the per-step variants read it from L2, not DRAM, after the first step")

# %% [markdown]
# At large batch a step is a real matrix product (`hidden x hidden` times `hidden x batch`): enough flops
# per byte that the per-step GEMM runs compute-bound, the kernel boundary is a small share of a step, and
# a tuned GEMM (cuBLAS, cuDNN) can use the SMs better than the persistent kernel's register tiles do.
# Whether it does here: the measured TFLOP/s of the recurrent part (`2 hidden^2 batch` flops a step):

# %%
for (hidden, batch), got in sorted(by_size.items()):
    shown = [n for n in got if got[n]["pattern"] == "persistent"] + \
            [n for n in ("graph", "torch_graph", "torch_cudnn") if n in got]
    print(f"hidden {hidden:>4}, batch {batch:>2}: " + ",  ".join(f"{n} {got[n]['tflops']:.2f}" for n in shown))
if res is not None:
    kept = sorted((r for r in res["records"] if r.get("pattern") == "persistent" and r.get("regs_per_thread") is not None),
                  key=lambda r: (r["size"]["hidden"], r["size"]["batch"], r["variant"]))
    print("\npersistent kernels as compiled: registers per thread, and local memory per thread (above 0 B: the "
          "compiler spilled values, W's tile or partial sums, out of the registers into memory behind L1):")
    for r in kept:
        print(f"  {r['variant']:<22} hidden {r['size']['hidden']:>4}, batch {r['size']['batch']:>2}: {r['blocks']} blocks "
              f"x {r['threads']} threads, {r['regs_per_thread']} registers, local {r['local_bytes_per_thread']} B"
              + (f", {r['us_per_step']:.2f} us" if r.get("us_per_step") else ""))
else:
    print("The results are not committed yet: no measured TFLOP/s here.")

# %% [markdown]
# ## Summary
# - A persistent kernel over time steps keeps its state on chip: here W, in registers, read from memory
#   once instead of at every step; a grid barrier replaces the kernel boundary.
# - The register file bounds the layer: `SMs x 64K registers x 4 B`, of which the tiling gives W a share;
#   past the largest hidden that fits, the variant refuses and names the per-step variants.
# - Every block must be resident at once, or the first grid barrier deadlocks: size the grid to the
#   machine. On the simulator grid sync is only a block barrier, so the persistent kernel runs one block.
# - A grid sync is no cheaper than a CUDA graph's kernel boundary: persistence pays when W's reads
#   dominate a step (small batch), and stops paying as the step becomes a compute-bound GEMM (large
#   batch); the tables above say where the crossing lies.
