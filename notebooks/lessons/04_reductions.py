# %% [markdown]
# # 04 Reductions: softmax over rows
#
# **Goals:** see why a reduction breaks the elementwise fusion of lesson 01 and what it costs in bytes;
# know how a warp and a block reduce (shuffles, one barrier); subtract the max and know why; write the
# online (max, sum) rule that saves a pass; write a fused softmax kernel; read the H200 results.
#
#     out[r, c] = exp(x[r, c] - m_r) / sum_j exp(x[r, j] - m_r),    m_r = max_j x[r, j]
#
# In lesson 01 every output needed one input element. Here every output of a row needs the **whole
# row's** max and sum first: a row takes three steps in order (max; sum of exps; scale), and the
# variants differ in where the row waits between them (`kernels_lab/topics/softmax/workload.py`).

# %%
import math
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
from kernels_lab.topics.softmax import workload as sm
print(lessons.setup())

# %% [markdown]
# ## Bytes per element, from the plans
# `unfused` is three kernels: a row max; `e = exp(x - max)` and its sum, with `e` written to DRAM; a
# normalize that reads `e` back. A row-sized array crosses DRAM five times (x twice, e twice, out once),
# plus the per-row max and sum that every thread of the next kernel reads. A fused kernel keeps the row
# on chip: x in, out out. `online` keeps nothing but a running (max, sum) and reads x a second time.

# %%
w = get_workload("softmax")
big = w.size(rows=65536, cols=1024)          # a shape the H200 benchmark timed
per_el = big.rows * big.cols
for v in w.variants.values():
    plan = v.plan(big)
    print(f"{v.name:<12} {plan.n_launches} launch(es)  {plan.bytes_total / per_el:7.3f} B/element   {v.about}")
print("\nunfused, launch by launch:")
for k in w.variant("unfused").plan(big).launches:
    print(f"  {k.kernel:<30} reads {k.bytes_read / per_el:6.3f}  writes {k.bytes_written / per_el:6.3f} B/element")

# %% [markdown]
# ## Why the max is subtracted
# Mathematically `exp(x - m) / sum exp(x - m)` is the same softmax for any `m`. Numerically it is not:
# float32's `exp` overflows to inf just above 88.7, and a row of logits near 100 gives inf / inf = NaN.
# With `m` = the row max every `exp(x - m)` is at most 1.

# %%
print(f"float32 exp overflows above x = {np.log(np.finfo(np.float32).max):.2f}")
row = np.float32(100) + np.random.default_rng(0).standard_normal(6, dtype=np.float32)
with np.errstate(over="ignore", invalid="ignore"):   # the overflow is the point here
    e = np.exp(row)
    print("exp(x)           ", e, "  softmax", e / e.sum())
e = np.exp(row - row.max())
print("exp(x - max)     ", e, "  softmax", e / e.sum())
r64 = np.exp(row.astype(np.float64) - row.max())
print("float64 reference", "  softmax", (r64 / r64.sum()).astype(np.float32))

# %% [markdown]
# The test inputs (`make_inputs`) put row 0 near +100, row 1 near -120 and every third row after them near
# one or the other, on purpose: exp overflows float32 on the first kind, and underflows on the second
# unless the max subtracted really is the row's (a max started at 0 instead of -inf fails there).
#
# ## Bytes, counted by the code that runs
# As in lesson 01: every variant at a tiny size (5 rows of 67 columns: odd, so the last partial chunk of
# every row is exercised), launches counted and, on the simulator, every global access traced.

# %%
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.profile.measure import trace_if_simulated
size = w.size(rows=5, cols=67)
inputs = w.make_inputs(size, np.random.default_rng(1))
want = w.reference(inputs)["out"]
for v in w.variants.values():
    outputs = poisoned(w.output_specs(size))
    launch = v.bind(to_device(inputs), outputs)
    with count_launches() as seen, trace_if_simulated() as trace:
        launch()
    traced = f"traced {trace.bytes_total:>6,} B  " if trace else ""
    err = np.abs(outputs["out"].copy_to_host() - want).max()
    print(f"{v.name:<12} launches {len(seen)}  {traced}plan {v.plan(size).bytes_total:>6,} B   max error {err:.1e}")

# %% [markdown]
# ## How a warp and a block reduce
# `cuda.shfl_xor_sync(mask, v, k)` hands each lane of a warp the `v` of lane `lane XOR k`, register to
# register: no memory, no barrier. Adding what comes back for k = 16, 8, 4, 2, 1 is the **butterfly**:
# after five steps every one of the 32 lanes holds the warp's total (`warp_sum` in
# `kernels_lab/reduce.py`). Here it is in NumPy, one array element per lane:

# %%
lanes = np.arange(32)
v = lanes.astype(np.float32)          # lane i holds i
k = 16
while k:
    print(f"xor {k:>2}: lane 0 takes lane {0 ^ k:>2}'s value, lane 5 takes lane {5 ^ k:>2}'s")
    v = v + v[lanes ^ k]
    k //= 2
print("every lane holds", sorted(set(v.tolist())), "= 0 + 1 + ... + 31 =", sum(range(32)))

# %% [markdown]
# A **block** reduction (`block_sum`): each warp reduces with shuffles, lane 0 of each warp writes its
# result to shared memory, **one** `cuda.syncthreads()`, and every thread combines the blockDim/32 warp
# results. A shared-memory tree (lesson 03's `block_sums`) needs a barrier per halving step: 7 for 64
# threads. Max works the same way with `max` in place of `+`.
#
# The simulator runs the same shuffles (`kernels_lab/sim_device.py` gives it what numba's lacks): each is
# a meeting of the lanes in its mask, so a lane that skips a shuffle its warp-mates wait at is an error
# there (or, if it has returned, the value read from it is NaN), where a GPU hangs or gives garbage. The
# rule for you: every lane of the mask calls each shuffle, and every thread of the block calls a block
# reduction.

# %%
from kernels_lab.reduce import warp_sum, block_sum

@cuda.jit
def sums(x, warp_out, block_out):
    scratch = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    ws = warp_sum(x[t])
    bs = block_sum(x[t], scratch)
    warp_out[t] = ws
    block_out[t] = bs


d_x = cuda.to_device(np.arange(64, dtype=np.float32))
d_w, d_b = cuda.device_array(64, np.float32), cuda.device_array(64, np.float32)
sums[1, 64](d_x, d_w, d_b)
print("warp_sum  at lanes 0, 31, 32, 63:", d_w.copy_to_host()[[0, 31, 32, 63]], "(0+..+31 = 496, 32+..+63 = 1520)")
print("block_sum at threads 0, 63:      ", d_b.copy_to_host()[[0, 63]], "(0+..+63 = 2016)")

# %% [markdown]
# ## The online rule: max and sum in one pass
# Max first, then the sum of `exp(x - max)`: two passes over the row. Milakov & Gimelshein (2018,
# "Online normalizer calculation for softmax") keep a running pair instead: `m`, the max so far, and
# `d`, the sum so far of `exp(x - m)`. When `x` arrives,
#
#     m' = max(m, x)
#     d' = d * exp(m - m') + exp(x - m')
#
# (the old sum is rescaled to the new max; both exps are at most 1, so nothing overflows). Start from
# the empty pair `m = -inf, d = 0`. Two partial pairs, say of two halves of a row or two threads'
# slices, combine the same way; one element `x` is the pair `(x, 1)`.
#
# Why it saves a pass: a row too wide to keep on chip needs three reads of x the plain way (max; sum;
# normalize: 12 + 4 = 16 B/element) but two with the online pair (12 B/element, the `online` variant).
# Each thread folds its slice of the row into a pair, and the threads' pairs meet in a butterfly of
# `combine`s (`warp_md`, `block_md` in `reduce.py`).
#
# The check below folds rows with your `online_update`, combines the pairs of their two halves with
# your `combine` (both orders), and compares with float64 NumPy: `m = max(row)`,
# `d = sum(exp(row - m))`. The rows sit near 0, +-100 and +-1000 (float64's `exp` overflows at 709.8:
# subtract before you exponentiate).

# %%
def check_online(online_update, combine, rows=24, seed=4):
    """Your online_update and combine against float64 NumPy on random rows (see the text above)."""
    if online_update is None or combine is None:
        raise AssertionError("define online_update and combine first")
    rng = np.random.default_rng(seed)

    def pair(call, *args):
        try:
            got = call(*args)
        except (ArithmeticError, ValueError) as e:   # math.exp(1000) raises OverflowError
            raise AssertionError(f"{call.__name__}{tuple(round(float(a), 3) for a in args)} raised "
                                 f"{type(e).__name__}: {e} (exponentiate differences from the max)") from None
        try:
            m, d = (float(g) for g in got)
        except (TypeError, ValueError):
            raise AssertionError(f"{call.__name__} must return the pair (m, d), not {got!r}") from None
        return m, d

    def close(got, want, what):
        m, d = got
        wm, wd = want
        if not (abs(m - wm) <= 1e-6 * abs(wm) and abs(d - wd) <= 1e-5 * abs(wd)):
            raise AssertionError(f"{what}: got (m, d) = ({m:.6g}, {d:.6g}), want ({wm:.6g}, {wd:.6g})")

    centres = [0.0, 100.0, -100.0, 1000.0, -1000.0]
    for i in range(rows):
        n = 1 + i % 13 if i % 4 else 1 + int(rng.integers(13, 40))
        x = (centres[i % 5] + rng.uniform(0.3, 4.0) * rng.standard_normal(n)).astype(np.float32)
        if i % 6 == 5:
            x.sort()                                       # ascending: a new max at every step
        x64 = x.astype(np.float64)
        folded = []
        for part in (x64[: n // 2], x64[n // 2:], x64):
            m, d = -math.inf, 0.0
            for v in part:
                m, d = pair(online_update, m, d, float(v))
            if len(part):
                close((m, d), (part.max(), np.exp(part - part.max()).sum()),
                      f"online_update over a row near {centres[i % 5]:+g} ({len(part)} values)")
            folded.append((m, d))
        if n >= 2:
            want = (x64.max(), np.exp(x64 - x64.max()).sum())
            (m1, d1), (m2, d2) = folded[:2]
            close(pair(combine, m1, d1, m2, d2), want, f"combine of two halves of a row near {centres[i % 5]:+g}")
            close(pair(combine, m2, d2, m1, d1), want, f"combine of the halves swapped, row near {centres[i % 5]:+g}")
    return f"online_softmax: right on {rows} rows (folded, and combined from halves)"


# %% [markdown]
# ### Exercise 1: the online rule
# Write `online_update(m, d, x)`, the recurrence above, and `combine(m1, d1, m2, d2)`, the pair of the
# union of two partials (derive it: what must `d1` be multiplied by when the max becomes `max(m1, m2)`?).
# Plain Python: `math.exp`, `max`.

# %% tags=["stub"]
def online_update(m, d, x):
    # YOUR CODE: return the new pair (m, d) after element x
    pass


def combine(m1, d1, m2, d2):
    # YOUR CODE: return the pair (m, d) of the union of two partials
    pass


# %% tags=["exercise"]
# EXERCISE: online_softmax
def online_update(m, d, x):
    m_new = max(m, x)
    return m_new, d * math.exp(m - m_new) + math.exp(x - m_new)


def combine(m1, d1, m2, d2):
    m = max(m1, m2)
    return m, d1 * math.exp(m1 - m) + d2 * math.exp(m2 - m)


# %%
print(check_online(globals().get("online_update"), globals().get("combine")))

# %% [markdown]
# The GPU kernels use the same `combine` (`md_combine` in `reduce.py`). Here is what `online` does with
# it across a warp: 32 lanes each fold their strided slice of a row near 100 into a pair, then the
# butterfly from above, with `combine` in place of `+`:

# %%
from kernels_lab.reduce import md_combine
row = (100 + 3 * np.random.default_rng(2).standard_normal(1000)).astype(np.float32).astype(np.float64)
pairs = [(row[lane::32].max(), np.exp(row[lane::32] - row[lane::32].max()).sum()) for lane in range(32)]
k = 16
while k:
    pairs = [md_combine.py_func(*pairs[lane], *pairs[lane ^ k]) for lane in range(32)]
    k //= 2
m, d = pairs[0]
print(f"after 5 steps every lane holds m = {m:.4f}, d = {d:.4f} (lanes agree: {len(set(pairs)) == 1})")
print(f"float64 NumPy:                  m = {row.max():.4f}, d = {np.exp(row - row.max()).sum():.4f}")

# %% [markdown]
# ### Exercise 2: softmax over rows in one kernel
# Write `softmax_rows(x, out)` for the grader's exercise `fused_softmax`: one block per row
# (`row = cuda.blockIdx.x`), `cuda.blockDim.x` threads (the check launches 64 and 32), `cols <= 4096`.
# Read each element of x **once** from global memory (keep the row in a shared array of 4096 floats,
# 16 KiB), reduce the max and then the sum over the block (a shared-memory tree with a barrier per step,
# as in lesson 03, is enough), subtract the max, write out. The check runs odd widths (67, 300) into
# outputs poisoned with NaN, with rows near +100 and -120, against float64; it counts launches (1) and traced
# bytes (8 per element: a second read of x fails). The declaration:

# %%
from kernels_lab.grading.exercises import get_exercise
print(get_exercise("fused_softmax").signature)

# %% tags=["stub"]
@cuda.jit
def softmax_rows(x, out):
    # YOUR CODE: row = cuda.blockIdx.x; each thread takes columns t, t + blockDim.x, ...;
    # stage the row in cuda.shared.array(4096, np.float32) while taking the max,
    # block max; exp(x - max) and block sum; out = e / sum
    pass


# %% tags=["exercise"]
# EXERCISE: fused_softmax
MAX_COLS = 4096      # the widest row the exercise sends
MAX_THREADS = 1024   # the largest block
LOWEST = np.float32(-3.0e38)


@cuda.jit
def softmax_rows(x, out):
    row_buf = cuda.shared.array(MAX_COLS, np.float32)   # the row, read from global memory once
    part = cuda.shared.array(MAX_THREADS, np.float32)   # one partial result per thread
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    cols = x.shape[1]

    m = LOWEST
    for j in range(t, cols, nt):
        v = x[row, j]
        row_buf[j] = v
        m = max(m, v)
    part[t] = m
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if t < step:
            part[t] = max(part[t], part[t + step])
        cuda.syncthreads()
        step //= 2
    m = part[0]
    cuda.syncthreads()  # everyone has read the max before part is reused

    s = np.float32(0)
    for j in range(t, cols, nt):
        e = math.exp(row_buf[j] - m)
        row_buf[j] = e
        s += e
    part[t] = s
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    s = part[0]

    for j in range(t, cols, nt):
        out[row, j] = row_buf[j] / s


# %%
print(lessons.check("fused_softmax", globals().get("softmax_rows")))

# %% [markdown]
# Your kernel is the `fused_shared` variant: the same 8 bytes per element as `fused`, but 4 bytes per
# access from a 64-thread block, and a tree of barriers. `fused` keeps each thread's slice of the row in
# registers, loads 16 bytes at a time and reduces with shuffles. The H200 tells the difference below.
#
# ### Exercise 3: predict
# At the benchmark's 65536 x 1024, how many times the bytes of `fused` does `unfused` move? Read it off
# the plans (the table at the top, or `w.variant(name).plan(big).bytes_total`). If both kernels ran at
# the same GB/s, this would be their time ratio.

# %% tags=["stub"]
bytes_ratio = ...  # YOUR ANSWER: unfused bytes / fused bytes at 65536 x 1024

# %% tags=["exercise"]
# EXERCISE: softmax_bytes_ratio
bytes_ratio = w.variant("unfused").plan(big).bytes_total / w.variant("fused").plan(big).bytes_total

# %%
print(lessons.expect("unfused / fused bytes", bytes_ratio,
                     w.variant("unfused").plan(big).bytes_total / w.variant("fused").plan(big).bytes_total, rel=0.03))

# %% [markdown]
# ## Measured on a GPU (committed results)
# `kernels-lab bench softmax` (the topic's study) timed every variant (and torch.softmax) at five shapes with a
# cold L2, counting every GB/s as one read and one write of x (8 bytes per element) for everyone. Against
# torch.softmax (above 1: faster) and against the copy ceiling measured in the same run:

# %%
res = lessons.committed("softmax_h100.json")
ceiling = res["meta"]["ceiling_GBs"]
names = ("unfused", "fused_shared", "fused", "persistent", "online", "split", "cluster")
shape = {}
for r in res["records"]:
    if r["group"] == "shapes" and (r["registered"] or r["line"] == "torch.softmax"):
        shape.setdefault((r["size"]["rows"], r["size"]["cols"]), {})[r["line"]] = r
print(f"{res['meta']['device']}, copy ceiling {ceiling:.0f} GB/s")
for title, field, fmt in (("vs torch.softmax", "vs_anchor", "{:12.2f}x"), ("share of the copy ceiling", "of_ceiling", "{:13.0%}")):
    print(f"\n{title}:\n{'rows x cols':<14}" + "".join(f"{n:>13}" for n in names + ("torch",)))
    for (rows, cols), got in shape.items():
        cells = [fmt.format(got[n][field]) if n in got else f"{'-':>13}" for n in names]
        cells.append(fmt.format(got["torch.softmax"][field]) if field == "of_ceiling" else f"{got['torch.softmax']['GBs_useful']:8.0f} GB/s")
        print(f"{rows:>6} x {cols:<5}" + "".join(cells))

# %% [markdown]
# ![each registered variant's time against torch.softmax, per shape](../figures/softmax_h100_vs_torch.png)

# %% [markdown]
# Every version the benchmark tried, in GB/s, coloured by variant: v1 is `fused_shared` (the exercise's
# answer); v2 is `fused` at the layout `fused_shape` picks for the width, v3 to v7 the same kernel at other
# layouts (rows per warp or per block, chunks per thread); v8 is `persistent` (v2's kernel on a grid of
# resident blocks); v9 is `online` and v10 to v12 its other layouts; v13 is `unfused`; v14 is `split` (a
# row across k cooperating blocks), v15 the same with the next row's slice loaded during the exchange (a
# prefetch: two slices in registers), v16 smaller slices (more blocks a row), v17 and v19 other block
# shapes, v18 slices of 4096 floats at every width. The last two bars
# are the anchors: `softmax` is torch.softmax, `compile` a softmax compiled by torch.compile. A version
# missing from a shape does not run that width (or repeats another's layout there); the dashed line is
# the copy ceiling measured in the same run.
#
# ![every version at every shape](../figures/softmax_h100_versions.png)

# %% [markdown]
# Your prediction against the clock: the unfused/fused time ratio at each shape where both ran, next to
# the bytes ratio of the plans. Where the two differ, the share of the ceiling above says which kernel
# fell short of streaming at full speed. Where Nsight Compute counted the DRAM bytes of a run
# (`kernels-lab bench softmax --ncu`): how many x-sized arrays really crossed DRAM (plan: unfused 5, online
# 3, fused 2)? The plans cannot know what L2 (50 MiB on an H100, 60 on an H200) catches: the `e` that `normalize` reads back, the row that `online`'s second pass re-reads
# (and writes below 1: the last writes still sit in L2 when the kernel ends, as in lesson 01).

# %%
for (rows, cols), got in shape.items():
    if "fused" in got and "unfused" in got:
        print(f"{rows:>6} x {cols:<5}  time ratio {got['unfused']['time_ms'] / got['fused']['time_ms']:5.2f}"
              f"   bytes ratio {got['unfused']['bytes_model'] / got['fused']['bytes_model']:5.2f}")
print()
counted = [((rows, cols), n, got[n]) for (rows, cols), got in shape.items() for n in names
           if n in got and got[n].get("bytes_dram_read") is not None]
for (rows, cols), n, r in counted:
    x_bytes = 4 * rows * cols
    print(f"{rows:>6} x {cols:<5} {n:<12} DRAM: reads {r['bytes_dram_read'] / x_bytes:4.2f} x-sized arrays, "
          f"writes {r['bytes_dram_write'] / x_bytes:4.2f}; plan {r['bytes_model'] / x_bytes:4.2f} in all")
if not counted:
    print("(this run has no Nsight Compute counts: `kernels-lab bench softmax --ncu` adds them)")

# %% [markdown]
# ## Where fused stops fitting
# The sweep keeps 256 MiB of x and widens the rows. `fused` holds a thread's slice of the row in
# registers: wider rows need more threads per row or more registers a thread, so fewer rows are resident
# per SM, and past `FUSED_MAX_COLS` (1024 threads x 32 floats) the row does not fit at all: `fused`
# refuses and names `online`, which holds only its pair and pays the second read of x.

# %%
sweep = {}
for r in res["records"]:
    if r["group"] == "sweep":
        sweep.setdefault(r["size"]["cols"], {})[r["line"]] = r
gbs = lambda r: f"{r['GBs_useful']:.0f}" if r else "-"
print(f"{'cols':>6} {'fused GB/s':>11} {'layout':>9} {'online GB/s':>12} {'torch GB/s':>11}   faster of the two")
for cols, got in sorted(sweep.items()):
    f, o = got.get("fused"), got.get("online")
    lay = f"{f['layout']['threads']}x{f['layout']['chunks']}" if f and f.get("layout") else "-"
    faster = "online" if o and (not f or o["time_ms"] < f["time_ms"]) else "fused"
    print(f"{cols:>6} {gbs(f):>11} {lay:>9} {gbs(o):>12} {gbs(got.get('torch.softmax')):>11}   {faster}")
widest = max(c for c, got in sweep.items() if "fused" in got)
ahead = [c for c, got in sorted(sweep.items())
         if "online" in got and ("fused" not in got or got["online"]["time_ms"] < got["fused"]["time_ms"])]
from_on = min((c for c in ahead if all(cc in ahead for cc in sweep if cc >= c)), default=None)
print(f"\nfused's widest row here: {widest} columns (FUSED_MAX_COLS = {sm.FUSED_MAX_COLS}); wider rows: online only")
print(f"online is faster than fused at every width from {from_on} columns on" if from_on else "fused is never behind")
print("(layout: threads per row x 4-float chunks a thread)")

# %% [markdown]
# ![GB/s against the row width](../figures/softmax_h100_cols.png)

# %% [markdown]
# ## Splitting a row across blocks
# A row of 32768 floats fills a 1024-thread block: one block per SM, so while it reduces nothing else
# on that SM streams (the sweep above: how far under the ceiling the wide rows fall). `split`
# (`kernels_lab/topics/softmax/split.py`) gives each row to **k blocks**, each holding a slice of the
# row in registers (4096 floats in 128 threads at 32768 columns), so several blocks share an SM. Each block
# folds its slice into the online pair (m, d), and then the k blocks of a row must meet: each writes
# its pair to global memory and raises a flag (after a fence: a release), waits with acquire loads,
# bounded in time, until the other k - 1 flags of its row are up, combines the k pairs with exercise
# 1's `combine`, and scales the slice it still holds. x is read once and written once; the exchange
# adds 12 bytes per block and row, and the polls. While the pairs travel, each block already loads
# its next row's slice. Why the fence and the acquire loads, each seen breaking without them on the simulator:
# the memory-model primer, `docs/memory-model.md` (*Memory model* on the lesson site).
#
# Waiting for another block is safe only if that block is running. So the grid holds no more blocks
# than the GPU keeps resident at once (from this kernel's occupancy), k blocks form a group, and each
# group loops over its rows: **lesson 03's persistent kernel, at the scale of a row**. The row's max and
# sum are an inter-block dependency, met inside one launch through global memory instead of at a kernel
# boundary (where `unfused` meets it, paying the launch and e's round trip through DRAM). A machine that
# cannot hold k blocks at once is refused, and a wait that runs out of time is an error, never a hang.
#
# The simulator runs blocks one after another, where a block waiting for a later one would wait forever;
# there the split kernel's blocks run side by side (`kernels_lab/sim_coresident.py`), same kernel code.
# Three slices per row, 5 rows, one group looping over them:

# %%
from kernels_lab.instrument.trace import per_array
from kernels_lab.topics.softmax import split as sp
small = w.size(rows=5, cols=301)
three = sp.split_shape(small.cols, slices=3)
inputs = w.make_inputs(small, np.random.default_rng(5))
outputs = poisoned(w.output_specs(small))
launch = sp.bind_split(to_device(inputs), outputs, shape=three)
with trace_if_simulated() as trace:
    launch()
err = np.abs(outputs["out"].copy_to_host() - w.reference(inputs)["out"]).max()
print(f"{three.slices} slices of up to {three.slice_vectors(small.cols)} 16-byte vectors, {launch.grid} blocks "
      f"({launch.grid // three.slices} group(s) for {small.rows} rows): max error {err:.1e}")
if trace:
    for name, a in per_array(trace).items():
        print(f"  {name:<6} read {a.bytes_read:>7,} B  written {a.bytes_written:>6,} B")
    print("(x and out: 4 bytes per element each; flags: each poll is a read, so their count varies with the timing)")

# %% [markdown]
# In the same run as above (`v14` is the registered layout, `v15` the same with the next row's
# slice loaded during the exchange); best other: the fastest `fused` or `online` version at that shape.
# The prefetch was meant to hide the wait, and it is slower everywhere: two slices in registers halve the
# blocks an SM holds, and more blocks per SM hide the wait better than loads in flight do.

# %%
if not any(r["variant"] == "split" for r in res["records"]):
    print("(this results file has no split runs yet: `kernels-lab bench softmax` writes them)")
print(f"{'rows x cols':<14}{'split: k x threads':>19}{'GB/s':>6}{'of ceiling':>11}{'vs torch':>9}"
      f"{'prefetch':>12}{'best other':>16}{'torch':>7}{'compile':>8}")
for (rows, cols), got in shape.items():
    here = [r for r in res["records"] if r["group"] == "shapes" and r["size"] == {"rows": rows, "cols": cols}]
    mine = got.get("split")
    if cols < 8192 or mine is None:  # narrower rows are one slice: split is fused plus an exchange
        continue
    by_version = {r["line"]: r for r in here}
    others = [r for r in here if r["variant"] in ("fused", "online") and r["checked"]]
    other = max(others, key=lambda r: r["GBs_useful"]) if others else None
    lay = mine["layout"]
    cells = [f"{lay['slices']} x {lay['threads']}", f"{mine['GBs_useful']:.0f}", f"{mine['of_ceiling']:.0%}",
             f"{mine['vs_anchor']:.2f}x", gbs(by_version.get("v15")),
             f"{other['GBs_useful']:.0f} ({other['line']})" if other else "-",
             gbs(by_version.get("torch.softmax")), gbs(by_version.get("torch.compile"))]
    print(f"{rows:>6} x {cols:<6}" + "".join(f"{c:>{n}}" for c, n in zip(cells, (19, 6, 11, 9, 12, 16, 7, 8))))

# %% [markdown]
# ## Long rows in a thread-block cluster
# Why one block cannot hold a long row: a block runs on **one SM**, and an SM has a fixed store on chip: a
# register file of 64K 32-bit registers (256 KiB) and at most 228 KiB of shared memory on Hopper, shared by
# every block resident there. A row held on chip for its one read must fit there, next to everything else;
# `fused` holds at most 1024 threads x 32 floats, and `split` spreads a wider row over several SMs that meet
# through global memory (a store, a fence, a flag and polls per block and row: the exchange above).
#
# On compute capability 9.0 (Hopper) the GPU offers a middle ground: a **thread-block cluster** of k blocks
# (k <= 8 portable, 16 with an opt-in) that the hardware starts together on one GPC (a group of SMs). The
# blocks of a cluster can read and write each other's shared memory (**distributed shared memory**, DSMEM:
# `mapa` maps an address into block r's window, `ld/st.shared::cluster` reach it) and wait at **one hardware
# barrier** of all their threads (`barrier.cluster.arrive.release` / `wait.acquire`). numba has neither;
# `kernels_lab/clusters.py` adds them as intrinsics (`cluster_rank`, `cluster_size`, `dsmem_load`,
# `dsmem_store`, `cluster_sync`, ...) and launches through the driver with the cluster attribute.
#
# | exchange of the k pairs | global memory (`split`) | DSMEM (`cluster`) |
# |---|---|---|
# | where the pairs go | L2 / DRAM, 12 bytes a block and row | the peers' shared memory, on the GPC |
# | how a block knows they arrived | release flag, bounded acquire polls | one cluster barrier |
# | blocks of a row resident at once | the grid must be persistent (resident), checked | guaranteed by the launch |
#
# The cluster softmax (`kernels_lab/topics/softmax/cluster.py`): each block folds its slice into (m, d),
# stores the pair into every peer's shared memory, waits at the cluster barrier once, and combines the k
# pairs from its own shared memory; two slots (row parity) let it skip the barrier after the reads. The
# simulator runs a cluster's blocks side by side, DSMEM as the other block's shared array, the barrier a
# real one: the same kernel, at small widths.

# %%
from kernels_lab.clusters import cluster_refusal
from kernels_lab.topics.softmax import cluster as cl
small = w.size(rows=3, cols=203)
inputs = w.make_inputs(small, np.random.default_rng(8))
outputs = poisoned(w.output_specs(small))
shape = cl.cluster_shape(small.cols)
if cluster_refusal() is None:
    cl.bind_cluster(to_device(inputs), outputs)()
    err = np.abs(outputs["out"].copy_to_host() - w.reference(inputs)["out"]).max()
    print(f"{small}: clusters of {shape.slices} blocks x {shape.threads} threads, max error {err:.1e}")
else:
    print(cluster_refusal())
print("the layout per width (blocks x threads x 4-float chunks), the best of every layout measured below:")
for cols in (8192, 16384, 32768, 50257, 65536, 131072, 262144):
    s = cl.cluster_shape(cols)
    print(f"  {cols:>6} columns: {s.slices:>2} x {s.threads:>4} x {s.chunks}  = {4 * s.threads * s.chunks:>5} "
          f"floats a block, {4 * 4 * s.threads * s.chunks // 1024} KiB of registers")

# %% [markdown]
# ### Measured on an H200
# `kernels_lab/topics/softmax/cluster_probe.py` checked every layout (1 to 16 blocks a cluster, 128 to 1024
# threads a block) against float64 and timed it beside `split` and torch.softmax, at 256 MiB of x per width
# (fraction of the copy ceiling measured in the same run; every GB/s counts 8 bytes an element). Best cluster
# size per width:
#
# ![the best layout per cluster size, against the row width](../figures/softmax_cluster_h200_clusters.png)

# %%
probe = lessons.committed("softmax_cluster_h200.json")
by_width = {}
for r in probe["records"]:
    if r["workload"] == "softmax":
        by_width.setdefault(r["cols"], []).append(r)
print(f"{probe['meta']['device']}, copy ceiling {probe['meta']['ceiling_GBs']:.0f} GB/s")
print(f"{'cols':>7}{'best layout':>17}{'of ceiling':>11}{'vs torch':>9}{'split':>7}{'torch':>7}   >= 0.90?")
short = []
for cols, rs in sorted(by_width.items()):
    layouts = [r for r in rs if r["version"].startswith("cluster")]
    best = max(layouts, key=lambda r: r["of_ceiling"])
    split = next(r for r in rs if r["version"].startswith("split"))
    torch = next(r for r in rs if r["version"] == "torch.softmax")
    met = best["of_ceiling"] >= 0.90
    short += [] if met else [(cols, best, torch)]
    print(f"{cols:>7}{best['version'].split()[0]:>17}{best['of_ceiling']:>11.2f}{best['vs_torch']:>8.2f}x"
          f"{split['of_ceiling']:>7.2f}{torch['of_ceiling']:>7.2f}   {'yes' if met else 'no'}")

# %% [markdown]
# The target was 0.90 of the copy ceiling at every width. What this run shows about where it is
# missed: the best layout holds 32 floats a thread at every width (1024-thread blocks are always far behind),
# torch.softmax falls from its best share too, and a bigger cluster fits fewer blocks on the GPU at once
# (the probe's `cuOccupancyMaxActiveClusters` for its small kernel: a cluster must fit on one GPC). What it
# does not show is which of these costs the time: the profile below does.

# %%
for cols, best, torch in short:
    print(f"{cols:>7}: best {best['of_ceiling']:.2f} of the ceiling, {best['vs_torch']:.2f}x torch.softmax "
          f"(torch itself {torch['of_ceiling']:.2f})")
for p in probe["probes"]:
    if "cluster" in p:
        print(f"clusters of {p['cluster']:>2} blocks (64 threads): {p['max_active_clusters']:>4} at once "
              f"= {p['cluster'] * p['max_active_clusters']} blocks resident")

# %% [markdown]
# ### Where the time goes: Nsight Compute on an H100
# The study run at the top of this lesson timed the registered `cluster` (its layout chosen per width from the
# probe above) beside `split` and torch at the long shapes (first table). Nsight Compute profiled one launch of
# each at 2048 x 32768 and 512 x 131072 on the same kind of GPU (`figures/data/ncu_softmax_cluster_*_h100.csv`;
# the command is in each file's first line): how busy DRAM was, and how many warps each SM could hold.

# %%
for name in ("ncu_softmax_cluster_2048x32768_h100.csv", "ncu_softmax_cluster_512x131072_h100.csv"):
    print(name.split("_")[3].replace("x", " x "))
    for kernel, m in lessons.committed_ncu(name).items():  # {kernel: {metric: value}}; the markers left out
        cluster = f"a cluster of {m['Cluster Size']:g}" if m["Cluster Size"] else "no cluster"
        print(f"  {kernel}: {m['Registers Per Thread']:g} registers x {m['Block Size']:g} threads, "
              f"{cluster}\n      DRAM {m['DRAM Throughput']:g}% of peak; occupancy {m['Achieved Occupancy']:g}% of a "
              f"possible {m['Theoretical Occupancy']:g}% (registers: {m['Block Limit Registers']:g} blocks an SM)")

# %% [markdown]
# Read it with lesson 01's Little's law: a kernel that streams needs enough bytes in flight per SM. Both
# kernels hold their slice of the row in registers, so registers cap them at half the warps an SM can hold or
# fewer (Nsight's occupancy rule names registers as the limiter), and both leave DRAM equally short of busy:
# exchanging the partial (max, sum) through DSMEM instead of global memory did not change that, because the
# exchange is not what limits them. What would: the same bytes in flight with fewer registers a thread, e.g.
# the slice staged in shared memory by bulk asynchronous copies (TMA, as QuACK does on Hopper): from Numba a
# `cp.async.bulk` intrinsic in hand-written PTX, like the cluster intrinsics of `kernels_lab/intrinsics.py`;
# not built here.

# %% [markdown]
# ### The same row read once: cross-entropy
# A language model's loss reads a row of logits per token, as wide as the vocabulary, and writes one float:
# `loss = m + log d - x[label]`, with (m, d) the row's online pair. It is softmax without the second pass over
# the row, so a row split over k blocks needs no block to wait: each publishes its pair and the last to arrive
# combines them (`kernels_lab/topics/softmax/cross_entropy.py`: `fused`, `split`; `cross_entropy_cluster.py`:
# the pairs met in DSMEM). Nothing per element is written back, so the limit is how fast the GPU *reads*: the
# read ceiling, measured in the same run by a kernel that only reads. `kernels-lab bench cross_entropy`, 256 MiB
# of logits at every width, against torch's `F.cross_entropy` (eager: it writes the whole `log_softmax` before
# it picks one value a row) and the same call through `torch.compile`:

# %%
ce_run = lessons.committed("cross_entropy_h100.json")
read = ce_run["meta"]["read_ceiling_GBs"]
ce_lines = ("fused", "split", "cluster", "torch.cross_entropy", "torch.compile")
by_cols = {}
for r in ce_run["records"]:
    if r.get("time_ms") and r["line"] in ce_lines:
        by_cols.setdefault((r["size"]["rows"], r["size"]["cols"]), {})[r["line"]] = r
print(f"{ce_run['meta']['device']}, read ceiling {read:.0f} GB/s; share of it (GB/s of x read / the ceiling):")
print(f"{'rows x cols':<15}" + "".join(f"{n:>20}" for n in ce_lines) + "   best / torch eager")
for (rows, cols), got in sorted(by_cols.items(), key=lambda kv: kv[0][1]):
    best = min((n for n in ce_lines[:3] if n in got), key=lambda n: got[n]["time_ms"])
    print(f"{rows:>5} x {cols:<7}" + "".join(f"{got[n]['GBs_useful'] / read:>20.2f}" if n in got else f"{'-':>20}"
                                         for n in ce_lines)
          + f"   {best} {got['torch.cross_entropy']['time_ms'] / got[best]['time_ms']:.1f}x")

# %% [markdown]
# ![every cross-entropy line as a share of the read ceiling](../figures/cross_entropy_h100_read.png)
#
# `split` is the fastest of ours at every width of this run and stays close to flat out to 262144 columns,
# while one block a row (`fused`) falls at the widest rows, and the DSMEM exchange (`cluster`) buys nothing
# over the global one here either. None of them reads at the ceiling. At 50257 columns `fused` and
# `cluster` dip and `split` does not (there most rows start off a 16-byte boundary; for `fused`, the waves
# below may explain part of it). `torch.compile` falls at the widest row, where its run logged that Inductor
# split the reduction and dropped its online softmax.
#
# **Waves.** How many blocks an SM holds at once follows from each kernel's registers, threads and shared
# memory; ptxas counts them with no GPU (`python -m kernels_lab.topics.softmax.ce_waves OUT.json`, committed as
# `figures/data/compiled/cross_entropy_waves_sm90.json`). A launch's blocks over 132 SMs times that is its
# number of **waves**, printed here beside each line's share of the read ceiling on both GPUs (one pass):

# %%
import json

waves = json.loads((lessons.DATA / "compiled" / "cross_entropy_waves_sm90.json").read_text())
shares = {gpu: {(r["size"]["cols"], r["line"]): r["of_ceiling"]
                for r in lessons.committed(f"cross_entropy_{gpu}.json")["records"] if r.get("of_ceiling")}
          for gpu in ("h100", "h200")}
print(f"{'rows x cols':<15}{'line':<7}{'blocks':>7}{'a SM':>6}{'waves':>7}{'H100':>7}{'H200':>7}")
for r in waves["records"]:
    rows, cols = r["size"]["rows"], r["size"]["cols"]
    print(f"{rows:>6} x {cols:<7}{r['variant']:<7}{r['blocks']:>7}{r['blocks_per_sm']:>6}{r['waves']:>7.2f}"
          + "".join(f"{shares[gpu][cols, r['variant']]:>7.2f}" for gpu in ("h100", "h200")))

# %% [markdown]
# `fused` launches a block a row. At 50257 columns its rows make just over one wave: the few blocks past the
# first wave start only as others finish and then run nearly alone, each reading a whole row, while most SMs
# have nothing left to do, and the pass waits for them. From 65536 columns on it is under one wave: every
# block starts at once, and at 65536 that costs nothing, but at 131072 and 262144 each SM holds only a few
# blocks, so few bytes are in flight (lesson 01's Little's law), and the share falls. `split` cuts every row
# into slices and launches many waves at every width, so neither happens to it; waves do not explain its
# dips on the H200 (at 50257 and 131072 columns: the unaligned row starts at 50257 are not ruled out), nor
# `fused`'s low share at 8192 there. (`cluster` is not counted: its blocks are placed a cluster at a time.)

# %% [markdown]
# ### The same studies on an H200
# Both studies ran again on an H200 (`figures/data/softmax_h200.json`, `cross_entropy_h200.json`: the same
# commands). Its memory is faster (compare the two ceilings) and it has the same 132 SMs. Per width, our
# fastest registered line on each GPU: its share of that GPU's ceiling, and torch's time over its time:

# %%
from kernels_lab.profile.study import best_registered

for study, group in (("softmax", "sweep"), ("cross_entropy", "vocab")):
    runs = {gpu: lessons.committed(f"{study}_{gpu}.json") for gpu in ("h100", "h200")}
    best = {gpu: best_registered(doc["records"], group) for gpu, doc in runs.items()}
    kind, key = ("read", "read_ceiling_GBs") if study == "cross_entropy" else ("copy", "ceiling_GBs")
    print(f"{study}, share of the {kind} ceiling: "
          + ", ".join(f"{doc['meta']['device'].split(' (')[0]} {doc['meta'][key]:.0f} GB/s" for doc in runs.values()))
    print(f"{'rows x cols':<15}" + "".join(f"{gpu.upper() + ': best  1 pass  steady  vs torch':>40}" for gpu in runs))
    for rows, cols in sorted(best["h100"], key=lambda size: size[1]):
        if cols < 8192 or (rows, cols) not in best["h200"]:
            continue  # the long rows: 8192 columns and wider
        cells = []
        for gpu, b in best.items():
            r, ceiling = b[rows, cols], runs[gpu]["meta"][key]
            steady = r["bytes_useful"] / (r["time_ms_steady"] * 1e6) / ceiling
            cells.append(f"{r['line']:>16}{r['of_ceiling']:8.2f}{steady:8.2f}{r['vs_anchor']:7.2f}x")
        print(f"{rows:>6} x {cols:<7}" + "".join(cells))

# %% [markdown]
# ![softmax by row width on the H200](../figures/softmax_h200_cols.png)
# ![cross-entropy on the H200](../figures/cross_entropy_h200_read.png)
#
# Read the columns in pairs. **1 pass** is the study's share (one launch timed alone, L2 cold); **steady** is
# the same line run back to back, where one pass's launch and drain overlap the next. They agree for softmax,
# whose pass reads and writes 256 MiB. For cross-entropy, whose pass only reads, steady is clearly higher:
# a fixed cost per pass (the launch the events see, the grid filling the GPU, the last blocks finishing
# alone) is a visible part of so short a pass, and the ceilings it is divided by were measured on 1 GiB,
# four passes' worth, where that cost weighs a quarter as much.
#
# Across the GPUs, the same kernels move more bytes a second on the H200 than on the H100, but a smaller
# share of its faster ceiling, on both clocks; the lead over torch holds, and the winner at a width can
# change (on the H200 the DSMEM `cluster` wins cross-entropy at two widths). Lesson 01's Little's law is
# consistent with part of it: at the same latency, a faster memory needs more bytes in flight per SM to
# stay busy, and the same sm_90 code holds the same registers a thread on both GPUs (the Nsight rows above
# are the H100's; the H200's occupancy was not measured). If the shares fell by the whole ratio of the
# ceilings, the GB/s would be the same on both GPUs: they are not, so this is not the whole story. One
# candidate was built and measured on an H100: the cluster kernel with each slice staged in shared memory by
# asynchronous copies, the next row's in flight during this row's exchange
# (`kernels_lab/topics/softmax/staged.py`, timed by an exploration through the study's harness). It was slower; lesson 08 shows it beside layernorm's versions of the
# same kernel, with their profile. What closes the gap on the H200 is still open.

# %% [markdown]
# The fixed cost, measured directly on an H100 (`python -m kernels_lab.profile.ceiling_sizes OUT.json`,
# `figures/data/ceiling_sizes_h100.json`): the ceilings' own read and copy kernels at a quarter of a study's
# x, at a study's 256 MiB and at the ceilings' 1 GiB, each as a share of its own 1 GiB one-pass rate; then
# cross-entropy's best line of the H100 run divided by the read kernel at the same 256 MiB, one pass each
# (two runs on H100s, hours apart: each file's meta says when):

# %%
sizes = lessons.committed("ceiling_sizes_h100.json")
full = {r["what"]: r["GBs"] for r in sizes["records"] if r["floats"] == 1 << 28}
print(sizes["meta"]["device"])
for r in sizes["records"]:
    print(f"{r['what']:<5} x of {4 * r['floats'] >> 20:>5} MiB: one pass {r['GBs'] / full[r['what']]:.2f}, "
          f"steady {r['GBs_steady'] / full[r['what']]:.2f} of its 1 GiB one-pass rate")
read_256 = next(r["GBs"] for r in sizes["records"] if r["what"] == "read" and r["floats"] == 1 << 26)
ce_h100 = best_registered(lessons.committed("cross_entropy_h100.json")["records"], "vocab")
print("cross-entropy's best (H100) / the read kernel on 256 MiB: "
      + ", ".join(f"{cols} {r['GBs_useful'] / read_256:.2f}" for (_, cols), r in sorted(ce_h100.items(),
                                                                                   key=lambda kv: kv[0][1])))

# %% [markdown]
# ![the read and copy kernels against the size of x, both clocks](../figures/ceiling_sizes_h100_rates.png)
#
# A pass of 256 MiB does not reach the 1 GiB rate even for the read kernel, on one pass; back to back it
# nearly does. So the one-pass share of a short read-only pass is taken against a rate its size cannot reach:
# against the read kernel at its own size, cross-entropy's best line is close to it. (The 64 MiB rows, x
# about the size of the 50 MiB L2, are no study's size; their steady read, slower than one pass, is not
# explained here.)

# %% [markdown]
# ### Exercise 4: the cluster's combine
# Write `cluster_combine(pair_m, pair_d)` for the grader's exercise `cluster_combine`: a device function that
# every thread of every block of a cluster calls, after thread 0 has written its block's pair to `pair_m[0]`,
# `pair_d[0]` (shared arrays of one float). It returns the cluster's (M, D) in every thread: read every block's
# pair with `dsmem_load(pair_m, 0, rank)`, rank 0 .. `cluster_size() - 1`, and fold them with exercise 1's
# `combine`. Two barriers matter: **before** the first read (a peer may not have written its pair yet) and
# **after** the last (once you return, the caller overwrites its pair with the next row's, or its block
# leaves and its shared memory is gone). The check runs clusters of 2, 3 and 4 blocks: with its own barriers
# around your call; twice with the blocks writing their pairs late, rank by rank (the last rank latest, then
# rank 0 latest), and no barrier of its own before; with each pair poisoned as soon as the call returns (on
# the simulator the loads are slowed rank by rank, the higher ranks' and then the lower ranks', so a missing
# barrier shows). The probe is compiled by numba's real compiler first, on the simulator too: its PTX must
# show a `barrier.cluster.wait` after the last `ld.shared::cluster`, and a combine the compiler rejects (a
# Python list, say) earns nothing, as it would on a GPU.

# %%
print(get_exercise("cluster_combine").signature)

# %% tags=["stub"]
from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    # YOUR CODE: wait, read every rank's pair, combine them, wait; return (M, D)
    return pair_m[0], pair_d[0]


# %% tags=["exercise"]
# EXERCISE: cluster_combine
from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    cluster_sync()  # every block's pair is written
    m = dsmem_load(pair_m, 0, 0)
    s = dsmem_load(pair_d, 0, 0)
    for r in range(1, cluster_size()):
        m2 = dsmem_load(pair_m, 0, r)
        s2 = dsmem_load(pair_d, 0, r)
        big = max(m, m2)
        s = s * math.exp(m - big) + s2 * math.exp(m2 - big)
        m = big
    cluster_sync()  # nobody overwrites or leaves while another block still reads its pair
    return m, s


# %%
print(cluster_refusal() or lessons.check("cluster_combine", globals().get("cluster_combine")))

# %% [markdown]
# ## Summary
# - A reduction makes every output of a row wait for the whole row: unfused, the row crosses DRAM five
#   times (20 B/element); fused, twice (8); online, three times by the plan (12), fewer when L2 still
#   holds the row for the second read.
# - A warp reduces with five `shfl_xor` steps and no memory; a block adds one barrier and a shared array
#   of one value per warp.
# - Subtract the row max: float32 `exp` overflows above 88.7, and `exp(x - max) <= 1` never does.
# - The online pair (m, d) and its `combine` give max and sum in one pass, and combine across threads.
# - On the H200 the fused kernel's time follows its bytes where it streams near the copy ceiling; where
#   the row is too wide for registers, the online kernel takes over (the tables above say from where).
# - A row too long for one block can be split across k blocks that meet through global memory (pairs,
#   flags, bounded acquire polls) inside one launch: the grid must be resident at once, so it is a
#   persistent kernel, one row group at a time.
# - Past what one SM holds, a **thread-block cluster** (Hopper) keeps the row on chip across k SMs of one
#   GPC: the pairs travel through distributed shared memory and meet at one hardware barrier, with a barrier
#   before the first read of a peer and one after the last (or two slots); the table above says how close to
#   the copy ceiling that came, and where not.
