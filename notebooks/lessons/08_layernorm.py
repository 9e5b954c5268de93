# %% [markdown]
# # 08 Layernorm: two dependent reductions, and weights kept in registers
#
# **Goals:** apply lesson 04's row reduction to a second problem with two statistics that depend on
# each other; see why the variance is computed from deviations and not as E[x^2] - mean^2; see what
# keeping gamma and beta in registers across rows buys and costs, read from the compiled kernels' register
# counts; write the one-pass merge of partial statistics (Welford and Chan), the sequel to lesson 04's
# (m, d); read the measured results against torch.
#
#     out[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * gamma[c] + beta[c]
#     mean_r = sum_c x[r, c] / cols,      var_r = sum_c (x[r, c] - mean_r)^2 / cols
#
# Every output of a row waits for the row's mean, and the variance waits for the mean too: two
# reductions in order, then an elementwise step with two weight vectors that every row shares
# (`kernels_lab/topics/layernorm/workload.py`).

# %%
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.profile.measure import trace_if_simulated
from kernels_lab.runtime import cuda
print(lessons.setup())

# %% [markdown]
# ## Bytes per element, from the plans
# `unfused` is a kernel per step: the mean, the variance (x read again), and the normalization (x read
# a third time, with gamma and beta for every row). `fused` keeps the row in registers between the steps:
# x in, out out, and gamma and beta read at the store (the same 2 x cols floats for every row: cache hits,
# but still accesses). `persistent` loads each thread's slice of gamma and beta once and keeps it in
# registers while the thread strides over rows.

# %%
w = get_workload("layernorm")
big = w.size(rows=65536, cols=1024)          # a shape the GPU benchmark timed
per_el = big.rows * big.cols
for v in w.variants.values():
    plan = v.plan(big)
    print(f"{v.name:<11} {plan.n_launches} launch(es)  {plan.bytes_total / per_el:6.3f} B/element   {v.about}")

# %% [markdown]
# ## Why the variance is computed from deviations
# E[x^2] - mean^2 is the same number in exact arithmetic, and one pass instead of two. In float32 it is
# a difference of two large, nearly equal numbers when the row sits far from 0: the digits that survive
# are rounding noise. A row near 300 with spread 0.5:

# %%
rng = np.random.default_rng(0)
row = (300 + 0.5 * rng.standard_normal(1024)).astype(np.float32)
exact = row.astype(np.float64).var()
mean = row.mean(dtype=np.float32)
one_pass = (row * row).mean(dtype=np.float32) - mean * mean
two_pass = ((row - mean) ** 2).mean(dtype=np.float32)
print(f"float64 variance      {exact:.6f}")
print(f"E[x^2] - mean^2 (f32) {one_pass:.6f}   relative error {abs(one_pass - exact) / exact:.1e}")
print(f"mean of (x - mean)^2  {two_pass:.6f}   relative error {abs(two_pass - exact) / exact:.1e}")

# %% [markdown]
# ### Exercise: merge two partial statistics (Welford and Chan)
# Two passes over a row in registers are free; a row that is streamed, or split across warps and blocks,
# needs the variance in ONE pass, without E[x^2] - mean^2. Keep, for any part of the row, a partial
# (n, mean, M2): its count, its mean and the sum of its squared deviations from that mean. Two partials
# merge as (Chan, Golub and LeVeque, 1979)
#
#     n = na + nb,   delta = mb - ma,   mean = ma + delta * nb / n,   M2 = Ma + Mb + delta^2 * na * nb / n
#
# and one element x is the partial (1, x, 0): the same rule folds elements in and merges lanes, as lesson
# 04's (m, d) pair did for softmax. Nothing here is a sum of squares, so nothing cancels far from 0.
#
# Write the device function `combine(na, ma, qa, nb, mb, qb)` (float32 in, float32 out) returning the
# merged (n, mean, m2). The check runs it on chosen pairs of partials (unequal counts, an empty one, two
# empty ones, two near 10000) and inside a one-pass layernorm (`kernels_lab/topics/layernorm/welford.py`:
# a warp per row, each lane folds its elements in, five butterfly shuffles merge the lanes). A row of 13
# columns leaves lanes 13 to 31 empty: two empty partials must merge to an empty one.

# %% tags=["stub"]
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    # YOUR CODE: return the merged (n, mean, m2) of two partials (count, mean, M2)
    pass


# %% tags=["exercise"]
# EXERCISE: welford_combine
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    n = na + nb
    if n == 0:  # two empty partials (lanes past a short row): nothing to divide by
        return n, ma, qa
    delta = mb - ma
    wb = nb / n
    return n, ma + delta * wb, qa + qb + delta * delta * na * wb


# %%
print(lessons.check("welford_combine", globals().get("combine")))

# %% [markdown]
# The fused kernel has the whole row in registers, so the second pass over it costs no memory at all.
# (The kernels pad a row's last chunk with zeros, which a sum needs; the variance skips them, since a
# padded zero would add mean^2.)
#
# ## Bytes, counted by the code that runs
# Every variant at a tiny size (5 rows of 67 columns: odd, so the last partial chunk of every row is
# exercised), launches counted and, on the simulator, every global access traced.

# %%
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
    print(f"{v.name:<11} launches {len(seen)}  {traced}plan {v.plan(size).bytes_total:>6,} B   max error {err:.1e}")

# %% [markdown]
# ## Weights in registers: what persistence buys here
# Gamma and beta do not depend on the row, so a thread that strides over rows can load its slice once,
# as the persistent RNN of lesson 05 keeps its weights on chip across time steps. The price is registers:
# up to 2 x 16 more floats a thread at 4 chunks, which lowers how many threads an SM holds, and with it the
# bytes in flight. Which effect wins depends on the width: the measurements below say.
#
# ## Measured on a GPU (committed results)
# Every variant, torch's `F.layer_norm` and a `torch.compile`d one at four shapes with a cold L2, interleaved,
# after checking each variant against float64; every GB/s counts one read and one write of x (8 bytes per
# element) for everyone. The committed run's command is printed below; `kernels-lab bench layernorm` (the
# topic's study, `kernels_lab/topics/layernorm/study.py`) measures the same lines today.

# %%
res = lessons.committed("layernorm_h100.json")
ceiling = res["meta"]["ceiling_GBs"]
shapes = {}
for r in res["records"]:
    shapes.setdefault((r["size"]["rows"], r["size"]["cols"]), {})[r["line"]] = r
names = [n for n in ("unfused", "fused", "persistent", "cluster", "v2", "torch.layer_norm", "torch.compile")
         if any(n in got for got in shapes.values())]
print(f"{res['meta']['device']}, {res['meta']['date'][:10]}, copy ceiling {ceiling:.0f} GB/s "
      f"(measured by `{res['meta']['command']}`)\n")
print(f"{'rows x cols':<14}" + "".join(f"{n:>17}" for n in names) + "   (GB/s, share of the ceiling)")
for (rows, cols), got in shapes.items():
    cells = [f"{got[n]['GBs_useful']:6.0f} ({got[n]['of_ceiling']:4.0%})" if n in got else "-" for n in names]
    print(f"{rows:>6} x {cols:<5}" + "".join(f"{c:>17}" for c in cells))
print("\nweights held (persistent) against weights re-read (fused), time ratio (> 1: holding is slower):")
for (rows, cols), got in shapes.items():
    if "fused" in got and "persistent" in got:
        print(f"{rows:>6} x {cols:<5} {got['persistent']['time_ms'] / got['fused']['time_ms']:5.2f}")

# %% [markdown]
# ![every variant and torch at each shape, GB/s](../figures/layernorm_h100_shapes.png)
#
# `cluster` spreads each row over a thread-block cluster that meets in distributed shared memory (lesson
# 04's layout for long rows). At the first four shapes, which one block holds, it is the slowest line,
# behind even `unfused`. It is meant for rows one block cannot hold (past `MAX_COLS` in
# `kernels_lab/topics/layernorm/workload.py`): the last three rows of the table (the study's `long` group),
# where only it, `unfused` and torch run, and it is still behind `unfused`. `v2` is the same kernel with
# 16-byte stores and 16-byte loads of gamma and beta (below: why). An earlier run on an H200
# (`kernels_lab/topics/softmax/cluster_recheck.py`, before `v2`) timed the long rows too, 256 MiB of x each:

# %%
recheck = lessons.committed("softmax_cluster_recheck_h200.json")
print(recheck["meta"]["device"])
for r in recheck["records"]:
    if r["workload"] == "layernorm":
        print(f"{r['rows']:>5} x {r['cols']:<7}{r['version']:<19}{r['GBs']:6.0f} GB/s = {r['of_ceiling']:4.0%} of the "
              f"copy ceiling, {r['vs_torch']:.2f}x torch's layer_norm")

# %% [markdown]
# There too the cluster kernel is behind `unfused` and far from the ceiling, where lesson 04's cluster softmax,
# the same layouts with one statistic less, reaches far more of it.
#
# ### Why: the cluster kernel's profile
# Nsight Compute ran each kernel once on the H100 (`python -m kernels_lab.profile.ncu_lines layernorm ...`
# under `ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis`;
# the command is in each file's first line): at 8192 columns `fused` beside `cluster` and `v2`, at 32768 the
# three kernels of `unfused` beside them. The last column counts the 32-byte sectors that entered L2's write
# path (ncu's *L2 Compression Input Sectors*) per sector of the output: 1.0 is every sector written once.

# %%
print(f"{'rows x cols':<14}{'kernel':<38}{'us':>5}{'DRAM %':>7}{'regs':>5}{'occupancy':>10}{'L1 hit':>7}{'L2 hit':>7}"
      f"{'L2 writes':>10}")
for rows, cols in ((8192, 8192), (2048, 32768)):
    out_sectors = rows * cols * 4 / 32
    for kernel, m in lessons.committed_ncu(f"ncu_layernorm_{rows}x{cols}_h100.csv").items():
        print(f"{rows:>6} x {cols:<6}{kernel:<38}{m['Duration'] / 1e3:5.0f}{m['DRAM Throughput']:7.0f}"
              f"{m['Registers Per Thread']:5.0f}{m['Achieved Occupancy']:9.0f}%{m['L1/TEX Hit Rate']:6.0f}%"
              f"{m['L2 Hit Rate']:6.0f}%{m['L2 Compression Input Sectors'] / out_sectors:10.2f}")

# %% [markdown]
# Two causes, one for each version:
# - **`cluster` writes every sector four times.** Each thread holds four consecutive floats of the row, so
#   when every thread stores its first float, a warp's 32 stores land 16 bytes apart: each 32-byte sector
#   receives 4 bytes from this instruction and the rest from three more. L2 takes about four partial writes
#   per sector of the output (the last column), and DRAM runs at a fraction of its peak. Softmax's cluster
#   kernel stores its four floats as one 16-byte vector, which is why the same layout serves it well.
# - **`v2` stores 16 bytes at a time**, and the last column drops to 1: at 8192 columns it takes about a third
#   less time than `cluster`. What is left is residency: the registers column (the count the H100's driver
#   compiled; at 8192 columns above the ptxas count in the next table) keeps occupancy at half of `fused`'s or less, so an SM has
#   half the warps to hide the same load and barrier latencies with; at 32768 columns `v2` needs the most
#   registers of all and gains little. `unfused`'s three kernels, each simple, keep their SMs full
#   and together take less time than either.
#
# So the cluster layernorm does not yet do what it is for. Not tried here: a layout with fewer floats held
# per thread (fewer registers, more resident warps), and one exchange per row instead of two (each block
# sends its (count, mean, M2) and the blocks merge them with the exercise's Chan rule: one cluster barrier
# where there are two).
#
# ## What each kernel holds on an SM: registers and occupancy, from the compiled kernels
# The register count is the compiler's, not a guess: numba compiles each kernel as the variants do (cc 9.0,
# fastmath, the block as launch bound) and `ptxas -arch=sm_90 -v` says how many registers a thread uses
# (`kernels_lab/topics/layernorm/registers.py`; committed output, no GPU needed). From it, the blocks an
# H100 or H200 SM can hold (65536 registers, allocated per warp in units of 256; 2048 threads; 32 blocks),
# the rows those blocks work on at once, and the share of the SM's 2048 threads that are resident (a cluster's
# blocks share a row, and must also fit on one GPC together, which this count leaves out).

# %%
import json
compiled = json.loads((lessons.DATA / "compiled" / "layernorm_registers_sm90.json").read_text())
print(f"{compiled['meta']['arch']}, ptxas {compiled['meta']['versions']['ptxas']}\n")
print(f"{'rows x cols':<14}{'kernel':<19}{'threads':>8}{'regs':>6}{'blocks/SM':>10}{'rows/SM':>8}{'occupancy':>10}"
      f"{'of ceiling':>11}")
held = {}
for r in compiled["records"]:
    shape = (r["size"]["rows"], r["size"]["cols"])
    measured = shapes.get(shape, {}).get(r["variant"].removeprefix("cluster "))  # "cluster v1": the study's v1
    share = f"{measured['of_ceiling']:.0%}" if measured else ""
    held.setdefault(shape, {})[r["variant"]] = r
    print(f"{shape[0]:>6} x {shape[1]:<6}{r['variant']:<19}{r['threads']:>8}{r['registers']:>6}"
          f"{r['blocks_per_sm']:>10}{r['rows_per_sm']:>8g}{r['occupancy']:>10.0%}{share:>11}")
fused = {shape: got["fused"] for shape, got in held.items()
         if "fused" in got and shape[0] * shape[1] == 1 << 26}  # 256 MiB of x, rows fused holds
occupancy = [f["occupancy"] for f in fused.values()]
share = [shapes[k]["fused"]["of_ceiling"] for k in fused]
print(f"\nfused at the 256 MiB shapes: occupancy {min(occupancy):.0%} to {max(occupancy):.0%}, share of the ceiling "
      f"{min(share):.0%} to {max(share):.0%}")
print("holding gamma and beta (persistent) against re-reading them (fused):")
for shape, got in held.items():
    if "persistent" not in got:  # the long rows: no one-block kernel holds them
        continue
    f, p = got["fused"], got["persistent"]
    print(f"{shape[0]:>6} x {shape[1]:<6} +{p['registers'] - f['registers']} registers a thread, resident threads "
          f"{f['threads_per_sm']} -> {p['threads_per_sm']} per SM")

# %% [markdown]
# The ratios and the table weigh the two effects. Holding the weights saves accesses that were cache hits
# (every row reads the same 2 x cols floats, and they stay in L1 and L2), so there is little to win; the
# registers it adds (fewer than the 32 floats it holds: fused's own peak already counts registers for the
# weights it loads at the store) cost resident threads at every shape, and the persistent kernel is slower,
# or at best level (the time ratios above), at every shape. Persistence pays when
# what it keeps on chip would otherwise come from DRAM (the RNN's weights, lesson 05), not when the caches
# already keep it.
#
# The table also says where registers do *not* matter. `fused` runs between about two thirds and three
# quarters occupancy at the 256 MiB shapes and reaches nearly the copy ceiling at each of them: past some
# number of resident warps, enough bytes are in flight, and more residency buys nothing. (The 1000-column
# shape moves a quarter of the bytes, where a launch's fixed costs weigh more, for torch too.) Occupancy is
# a cause only below that point, as for the cluster kernels above.
#
# ## Summary
# - Layernorm is two dependent reductions (mean, then variance) and an elementwise step with weights:
#   unfused, x crosses DRAM three times plus the output; fused, once plus the output.
# - Compute the variance from deviations: E[x^2] - mean^2 cancels in float32 for rows far from 0.
# - In one pass, carry (n, mean, M2) and merge partials with Welford and Chan's rule: it folds in one
#   element, merges lanes and blocks, and never forms a sum of squares.
# - A store pattern can cost more than a statistic: a warp whose threads store one float each, 16 bytes
#   apart, writes every sector four times (ncu counts it); 16-byte stores write it once.
# - Weights every row shares can stay in registers across rows in a persistent kernel, at a price in
#   registers that the compiler reports (ptxas -v) and occupancy follows; measure it: here the caches
#   already keep them, and holding them is no faster at any shape.
