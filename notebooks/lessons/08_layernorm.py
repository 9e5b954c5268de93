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
# merged (n, mean, m2). The check runs it on chosen pairs of partials (unequal and equal counts, the means
# either way round and equal, an empty one beside a single element, two empty ones, pairs near 10000) and
# inside a one-pass layernorm (`kernels_lab/topics/layernorm/welford.py`:
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
def shapes_of(run):
    """A committed results file's records as {(rows, cols): {line: record}}, in the order they ran."""
    found = {}
    for r in run["records"]:
        found.setdefault((r["size"]["rows"], r["size"]["cols"]), {})[r["line"]] = r
    return found


from kernels_lab.topics.layernorm.study import named_today


def committed(name):
    """A committed results file, its layernorm lines under today's names: runs made before 2026-12-08 called v3
    `cluster`, which is v9 since (`named_today` in kernels_lab/topics/layernorm/study.py)."""
    return named_today(lessons.committed(name))


res = committed("layernorm_h100.json")
ceiling = res["meta"]["ceiling_GBs"]
shapes = shapes_of(res)
names = [n for n in ("unfused", "fused", "persistent", "cluster", "v1", "v2", "v3", "torch.layer_norm",
                     "torch.compile") if any(n in got for got in shapes.values())]
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
# `cluster` spreads each row over a thread-block cluster that meets in distributed shared memory (lesson 04's
# layout for long rows). It is meant for rows one block cannot hold (past `MAX_COLS` in
# `kernels_lab/topics/layernorm/workload.py`): the last three rows of the table (the study's `long` group),
# where only it, its numbered versions, `unfused` and torch run (this run is older than the ninth version's
# registration, so it has no `cluster` column: its cluster kernels are the versions). The first four shapes,
# which one block holds, are what `fused` is built for (the section on v8 below prints a later cluster version
# passing it at two of them, and torch's eager kernel at 1000 columns). The kernel was written in numbered versions
# (`kernels_lab/topics/layernorm/cluster.py`, the versions side by side), and the study times them beside the
# registered `cluster`, which runs the ninth (the section on the tests' cost below). This section follows the
# first three; the runs made before the ninth was registered (2026-12-08) called the third `cluster`, and the
# lesson reads every file under today's names:
# - `v1` computes the mean, exchanges the k block sums through DSMEM, waits at a cluster barrier, then the
#   squared deviations, a second exchange and barrier, and stores one float at a time;
# - `v2` is v1 with 16-byte stores and 16-byte loads of gamma and beta;
# - `v3` makes one exchange a row: each thread folds its elements into (count, mean,
#   M2), the block merges them with **the exercise's Chan rule**, the k blocks swap their triples, one cluster
#   barrier, and every thread merges the k triples. It stores 16 bytes at a time, as v2 does, and its launch
#   bound asks for 1024 resident threads an SM, so the compiler fits it in 64 registers a thread.
#
# The figure also draws the later versions, each in a section below: `v4` and `v5` (v3 without its spill, two
# ways) and `v8` (v3 without its per-element tests).
#
# The long rows, from the same file:

# %%
def long_rows(by_shape, lines):
    """The share of the copy ceiling of each line at the rows no one block holds; yields each shape's lines."""
    print("share of the copy ceiling")
    print(f"{'rows x cols':<16}" + "".join(f"{n:>{max(len(n), 4) + 2}}" for n in lines))
    for (rows, cols), got in by_shape.items():
        if "fused" not in got:  # one block holds the other rows
            print(f"{rows:>6} x {cols:<8}"
                  + "".join(f"{got[n]['of_ceiling']:>{max(len(n), 4) + 2}.0%}" for n in lines))
            yield got


for got in long_rows(shapes, ("v1", "v2", "v3", "unfused", "torch.layer_norm", "torch.compile")):
    c = got["v3"]["time_ms"]
    print(f"{'':16}v3 takes {c / got['v1']['time_ms']:.2f} of v1's time, {c / got['unfused']['time_ms']:.2f} "
          f"of unfused's; {got['torch.layer_norm']['time_ms'] / c:.2f}x torch.layer_norm, "
          f"{got['torch.compile']['time_ms'] / c:.2f}x torch.compile")

# %% [markdown]
# One exchange instead of two and 16-byte stores in 64 registers: v3 beats `unfused` and
# torch's eager `layer_norm` on every long row, and takes about half of `v1`'s time. It is not at the copy
# ceiling, and where `torch.compile`'s kernel stands against it changes from run to run and GPU to GPU (the
# H200 tables below). Why v1 and v2 were slow, and what is left in v3, is in the profile.
#
# ### Why: the cluster kernels' profile
# Nsight Compute ran each kernel once on the same H100 in the same call (`python -m
# kernels_lab.profile.ncu_lines layernorm ...` under `ncu --section SpeedOfLight --section Occupancy --section
# LaunchStats --section MemoryWorkloadAnalysis`; the command is in each file's first line): at 8192 columns
# `fused` beside the cluster versions, at 32768 the three kernels of `unfused` beside them (a kernel's name
# says its layout: `cluster2_512x8` is 2 blocks a row of 512 threads holding 8 vectors of 4 floats each; the
# name ends in `_v3` for v3, `_v2` for v2 and nothing for v1; the registered `cluster` ends in `_v9`). The last
# two columns: the local-memory (spill) requests, and the 32-byte sectors that entered L2's write path (ncu's
# *L2 Compression Input Sectors*) per sector of the output: 1.0 is every sector written once.

# %%
def profile_table(gpu):
    print(f"{'rows x cols':<14}{'kernel':<38}{'us':>5}{'DRAM %':>7}{'regs':>5}{'occupancy':>10}{'L1 hit':>7}"
          f"{'spills':>9}{'L2 writes':>10}")
    for rows, cols in ((8192, 8192), (2048, 32768)):
        out_sectors = rows * cols * 4 / 32
        for kernel, m in lessons.committed_ncu(f"ncu_layernorm_{rows}x{cols}_{gpu}.csv").items():
            print(f"{rows:>6} x {cols:<6}{kernel:<38}{m['Duration'] / 1e3:5.0f}{m['DRAM Throughput']:7.0f}"
                  f"{m['Registers Per Thread']:5.0f}{m['Achieved Occupancy']:9.0f}%{m['L1/TEX Hit Rate']:6.0f}%"
                  f"{m['Local Memory Spilling Requests']:9.0f}{m['L2 Compression Input Sectors'] / out_sectors:10.2f}")


profile_table("h100")

# %% [markdown]
# One cause for each version, and what is left:
# - **`v1` writes every sector four times.** Each thread holds four consecutive floats of the row, so
#   when every thread stores its first float, a warp's 32 stores land 16 bytes apart: each 32-byte sector
#   receives 4 bytes from this instruction and the rest from three more. L2 takes about four partial writes
#   per sector of the output (the last column), and DRAM runs at a fraction of its peak. Softmax's cluster
#   kernel stores its four floats as one 16-byte vector, which is why the same layout serves it well.
# - **`v2` stores 16 bytes at a time**, and the last column drops to 1. What is left is residency: the
#   registers column (the count the H100's driver compiled) keeps occupancy at half of `fused`'s or less, so an
#   SM has half the warps to hide the same load and barrier latencies with; at 32768 columns v2 needs the most
#   registers of all and gains little.
# - **`v3` asks the compiler for residency** (the launch bound) and gets 64 registers a thread
#   at about v1's occupancy, with v2's stores and one cluster barrier a row instead of two. The price shows in
#   the spills column: at 64 registers ptxas keeps a few bytes a thread in local memory (the register table
#   below says how many), and those stores pass through L2 too (the last column is a little above 1).
#
# Is the spill what holds v3 back? The study asked on an H200: `v4` is v3's code holding 16 floats a thread
# instead of 32 (twice the blocks a row, no spill), `v5` is v4 asking for 1536 resident threads (fewer
# registers, some spill again; the register table below has both). The H200's run of the study, and its
# profile (v4's kernel is v3's code at v4's layout, `cluster4_512x4_v3` at 32768 columns; v5's ends in `_r1536`):

# %%
h200 = committed("layernorm_h200.json")
print(f"{h200['meta']['device']}, {h200['meta']['date'][:10]}, copy ceiling {h200['meta']['ceiling_GBs']:.0f} GB/s\n")
wide = shapes_of(h200)
list(long_rows(wide, ("v1", "v2", "v3", "v4", "v5", "unfused", "torch.layer_norm", "torch.compile")))
print()
profile_table("h200")

# %% [markdown]
# Without the spill, v4 is slower than v3, not faster, and v5's extra warps do not make up for it: removing
# the spill by halving what a thread holds does not help. Each thread of v4 has half of v3's bytes in flight,
# and at the same occupancy (the profile) the SM has half as many loads outstanding, which is consistent with
# its loss (it also has twice the blocks a row meeting at each barrier). Lesson 04's H200 section weighs the
# same explanation (Little's law: bytes in flight) for the softmax kernels on this GPU. Here v3
# is still ahead of `unfused` and eager torch on the long rows, but further from the copy ceiling than on the
# H100, and `torch.compile` beats it at every long width.
#
# ## Staging the slice in shared memory: tried, and slower
# One more idea for the pause at every row's exchange: in v3 every load of a row is in flight at once, then
# the block reads nothing while it reduces, waits at the cluster barrier and writes, and only the other
# resident blocks' loads keep DRAM busy. A persistent version can keep reading through the pause. A grid of
# as many clusters as the GPU holds strides over the rows; before it reduces row r, each thread starts copying
# its vectors of its cluster's next row into the other half of a two-row buffer in shared memory with
# `cp.async`, an asynchronous copy that holds no register while in flight (`copy16_async` in
# `kernels_lab/intrinsics.py`; the pipeline, `row_stager`, in `kernels_lab/topics/softmax/staged.py`). A
# thread waits for its own copies only (`cp.async.wait_group`), and reads only what it copied, so no block
# barrier guards the buffer. On the simulator a copy lands when its group is waited for, so a kernel that
# reads a stage before waiting for it computes a wrong answer there too (`tests/test_clusters.py`).
#
# `v6` (`kernels_lab/topics/layernorm/staged.py`) is v3 with its slice staged this way; it reads its stage three
# times (for the sum, the squared deviations and the output). Softmax's cluster kernel staged the same way is
# v20 of lesson 04's study. Before the study's group `staged` was settled, an exploration on an H100 asked
# three questions at once (`python3 benchmarks/staged_probe.py OUT layernorm`, and `softmax`; the study's
# harness: every line checked against float64 before and after timing): is the staged kernel faster than the
# register kernel, is two rows of pipeline too shallow (`s3`: three stages, two rows in flight), and are the
# blocks too large (`c4`: 4 vectors a thread in 16 KB stages, more and smaller blocks; `c4s4`: four of those
# stages)? `percluster` is the control: a cluster per row, no row ahead at all.

# %%
for study, first in (("layernorm", "v6"), ("softmax", "v20")):
    probe = committed(f"staged_probe_{study}_h100.json")
    by_shape = shapes_of(probe)
    base = "v3" if study == "layernorm" else "cluster"  # the register kernel the staged one comes from
    print(f"{study}: {probe['meta']['device'].split(' (')[0]}, {probe['meta']['date'][:10]}")
    rows_seen = list(long_rows(by_shape, (base, first, "s3", "c4", "c4s4", "percluster", "torch.compile")))
    ahead = [100 * (got[first]["of_ceiling"] - got["percluster"]["of_ceiling"]) for got in rows_seen]
    staging = [100 * (got[base]["of_ceiling"] - got[first]["of_ceiling"]) for got in rows_seen]
    print(f"the row ahead is worth {min(ahead):.0f} to {max(ahead):.0f} points of the ceiling to {first}; "
          f"staging costs {min(staging):.0f} to {max(staging):.0f} points against `{base}`\n")

# %% [markdown]
# Every staged line is slower than the register kernel it comes from, at every long row, for both topics, and
# every deeper pipeline is slower still: each stage is 32 KB (or 16 KB) of shared memory a block, so more
# stages mean fewer resident blocks (smaller blocks, `c4`, help softmax at 32768 columns only). Without the row
# ahead (`percluster`) the staged kernel loses a few points (each table's last line): the row ahead covers part
# of the pause at the exchange, but staging cost more than that against v3 and softmax's cluster kernel to begin
# with.
# (`c4s3`, four-vector stages three deep, did not launch at two widths in this run: the launcher's opt-in for
# more than 48 KB of shared memory a block counted only the dynamic bytes, now fixed.) Nsight Compute on the
# same H100, same call (a kernel's name says its layout; the staged ones end in `_v6` and `_staged`; *SM %* is
# ncu's compute throughput, the busiest of the SM's units as a share of its peak):

# %%
print(f"{'kernel':<36}{'us':>6}{'DRAM %':>8}{'SM %':>6}{'regs':>6}{'occupancy':>10}{'cycles/issue':>13}")
for study, shape in (("layernorm", "2048x32768"), ("softmax", "4096x32768")):
    for kernel, m in lessons.committed_ncu(f"ncu_{study}_staged_probe_{shape}_h100.csv").items():
        print(f"{kernel:<36}{m['Duration'] / 1e3:6.0f}{m['DRAM Throughput']:8.0f}{m['Compute (SM) Throughput']:6.0f}"
              f"{m['Registers Per Thread']:6.0f}{m['Achieved Occupancy']:9.0f}%"
              f"{m['Warp Cycles Per Issued Instruction']:13.1f}")

# %% [markdown]
# The staged kernels run at lower occupancy (two 32 KB stages a block: three blocks of 256 threads an SM), their
# warps wait about half as many cycles between two instructions as the register kernels' (the last column:
# *warp cycles per issued instruction*), and the SM's compute throughput rises while DRAM's falls. They do more
# instruction work for every byte they move: every element is read from shared memory three times with a bounds
# check each time, and softmax's v20 computes each exponential twice. Neither column is at its limit (this
# profile did not collect the issue slots), so the reading is "more work a byte with fewer warps to hide it",
# not a proof of which unit binds. The next version follows from it:
# `v7` (and softmax's v21) reads the stage once into registers and goes on as v3, asking the compiler for
# the three blocks an SM the shared memory allows (the register table below counts it). The study's group
# `staged` times both beside the registered `cluster` (`kernels-lab bench layernorm --group staged`, and
# `softmax`), here on an H200, in a run made when layernorm's `cluster` was v3:

# %%
for study, lines in (("layernorm", ("v3", "v6", "v7")), ("softmax", ("cluster", "v20", "v21"))):
    run = committed(f"{study}_staged_h200.json")
    by_shape = shapes_of(run)
    print(f"{study}: {run['meta']['device'].split(' (')[0]}, {run['meta']['date'][:10]} "
          f"(`{run['meta']['command'].split(' --json')[0]}`)")
    list(long_rows(by_shape, lines + ("torch.compile",)))
    print()

# %% [markdown]
# Reading the stage once wins back part of the loss, and no staged kernel beats the register kernel it comes
# from. Nsight Compute in the same H200 run, this time with the scheduler's statistics (*issued*: the
# instructions a warp scheduler issues per cycle, at most 1; *idle %*: the cycles it had no eligible warp):

# %%
def scheduler_table(files):
    print(f"{'kernel':<36}{'us':>6}{'DRAM %':>8}{'SM %':>6}{'regs':>6}{'occupancy':>10}{'issued':>8}{'idle %':>8}"
          f"{'spills':>9}")
    for name in files:
        for kernel, m in lessons.committed_ncu(name).items():
            print(f"{kernel:<36}{m['Duration'] / 1e3:6.0f}{m['DRAM Throughput']:8.0f}"
                  f"{m['Compute (SM) Throughput']:6.0f}{m['Registers Per Thread']:6.0f}"
                  f"{m['Achieved Occupancy']:9.0f}%{m['Issued Warp Per Scheduler']:8.2f}{m['No Eligible']:8.0f}"
                  f"{m['Local Memory Spilling Requests']:9.0f}")


scheduler_table(("ncu_layernorm_staged_2048x32768_h200.csv", "ncu_softmax_staged_4096x32768_h200.csv"))

# %% [markdown]
# Look at v3's row (`layernorm_cluster2_512x8_v3`) before the staged ones: its schedulers issue an instruction
# on most cycles while DRAM runs at half its peak, and it issues nearly as many instructions as softmax's
# cluster kernel (`softmax_cluster2_512x8`) for half the bytes. A kernel that should wait on memory is
# spending its time issuing instructions. The staged kernels add instructions (shared-memory reads, a second
# exponential); what v3 spends them on is the next section.
#
# ## The tests cost issue slots: v8 and v9
# Every element v3 touches is tested against the row's ends: `load_vector` asks whether the 16-byte vector
# lies inside the row, `_in_row` counts its elements, each deviation asks again per element, each weight load
# and each store asks again (`_edge_stats` and the last loop of `layernorm_chan_kernel` in
# `kernels_lab/topics/layernorm/cluster.py`). Only the last threads of each block's slice need any of it: when
# the width is a multiple of 4, every other thread's vectors lie wholly inside the row. `v8` gives those
# threads a path with no test at all (`_whole_stats`, `_whole_out`: 16-byte loads, 16-byte weight loads,
# 16-byte stores), chosen once a row per thread. ptxas then fits it in v3's registers without v3's spill (the
# register table below). Measured on an H100 (the study's `shapes` and `long` groups):

# %%
def versions_table(name, lines=("fused", "v3", "v8", "cluster", "torch.layer_norm", "torch.compile")):
    """Each shape's share of the copy ceiling for these lines (those the file has), and the fastest line."""
    run = committed(name)
    print(f"{run['meta']['device']}, {run['meta']['date'][:10]}, {run['meta']['reps']} repetitions "
          f"(`{run['meta']['command'].split(' --json')[0]}`)\n")
    by_shape = shapes_of(run)
    names = [n for n in lines if any(n in got for got in by_shape.values())]
    print("share of the copy ceiling; the last column: the fastest of all the study's lines")
    width = {n: max(6, len(n) + 2) for n in names}  # narrow columns: up to seven lines fit a page
    print(f"{'rows x cols':<16}" + "".join(f"{n:>{width[n]}}" for n in names) + "  fastest")
    for (rows, cols), got in by_shape.items():
        best = max(got.values(), key=lambda r: r["of_ceiling"])["line"]
        print(f"{rows:>6} x {cols:<8}" + "".join(f"{got[n]['of_ceiling']:>{width[n]}.0%}" if n in got
                                                   else f"{'-':>{width[n]}}" for n in names) + f"  {best}")


versions_table("layernorm_h100.json")
print()
scheduler_table(("ncu_layernorm_v8_2048x32768_h100.csv", "ncu_layernorm_v8_8192x8192_h100.csv"))

# %% [markdown]
# With the tests gone the schedulers issue far fewer instructions for the same bytes, sit idle more often
# (waiting on memory, as a memory-bound kernel should), and DRAM's share rises; the last column names the
# fastest of all the study's lines at each shape (v1 to v5 and `unfused` included). One shape goes the other
# way: at 1000 columns a row is 250 vectors, a block of 32 threads holds 8 each, and
# lanes 26 to 31 reach past the row: the warp's lanes take different paths, and a warp that diverges runs
# both paths one after the other. `v9`, the registered `cluster` today (the tables' `cluster` column), decides a
# warp at a time instead (`cuda.all_sync`: the fast path only if all 32 lanes can take it), so no warp runs
# both; softmax's cluster kernel with the same path is lesson 04's study line v22 (`kernels-lab bench softmax
# --group whole`). Both versions on an H200, in a run of the same study that its time limit cut before the
# 131072-column shape, with fewer repetitions than the study's (the header says how many):

# %%
versions_table("layernorm_v9_h200.json")

# %% [markdown]
# At 1000 columns v9 takes back what v8 lost to divergence, and elsewhere the two are close (a run of few
# repetitions: a point or two either way). Deciding per warp costs little where every lane agrees, but not
# nothing: v9 keeps its vote across the row's exchange, and the register table shows it spilling a few bytes
# at the long rows where v8 spills none. The gain over v3 holds on the H200, the GPU issue 36's
# targets are set on, but the targets do not: the rows past one block stay well short of 0.9 of the copy
# ceiling there. v9 became the registered `cluster` on 2026-12-08, once the H100 runs in the section on v10
# and v11 below had timed it at or above v3 at all seven shapes (this H200 run has no 131072 columns).
#
# The same path in softmax's cluster kernel (v22) buys nothing, measured on an H100:

# %%
whole = lessons.committed("softmax_whole_h100.json")
print(f"{whole['meta']['device']}, `{whole['meta']['command'].split(' --json')[0]}`: share of the copy ceiling")
for (rows, cols), got in shapes_of(whole).items():
    if "v22" in got:
        share = {line: f"{got[line]['of_ceiling']:4.0%}" for line in ("cluster", "v22")}
        print(f"{rows:>6} x {cols:<7} cluster {share['cluster']}   v22 {share['v22']}")

# %% [markdown]
# Softmax's cluster kernel tests its elements too, but does less work per element (no deviations, no
# weights), and the scheduler table earlier in this lesson (an H200's, at 32768 columns) shows its schedulers
# idle more often than layernorm v3's:
# its instructions were not its limit, so taking tests away changes nothing there. Layernorm's v3 issued an
# instruction on most cycles; there the same change paid.
#
# ## What each kernel holds on an SM: registers and occupancy, from the compiled kernels
# The register count is the compiler's, not a guess: numba compiles each kernel as the variants do (cc 9.0,
# fastmath, its launch bound) and `ptxas -arch=sm_90 -v` says how many registers a thread uses
# (`kernels_lab/topics/layernorm/registers.py`; committed output, no GPU needed). From it, the blocks an
# H100 or H200 SM can hold (65536 registers, allocated per warp in units of 256; 2048 threads; 32 blocks;
# 228 KB of shared memory, which v6 and v7's two stages fill three blocks at a time), the rows those blocks
# work on at once, and the share of the SM's 2048 threads that are resident (a cluster's
# blocks share a row, and must also fit on one GPC together, which this count leaves out).

# %%
import json
compiled = json.loads((lessons.DATA / "compiled" / "layernorm_registers_sm90.json").read_text())
print(f"{compiled['meta']['arch']}, ptxas {compiled['meta']['versions']['ptxas']}\n")
print(f"{'rows x cols':<15}{'kernel':<19}{'threads':>8}{'regs':>6}{'spill':>7}{'blocks/SM':>10}{'rows/SM':>8}"
      f"{'occupancy':>10}{'of ceiling':>11}")
held = {}
for r in compiled["records"]:
    shape = (r["size"]["rows"], r["size"]["cols"])
    measured = shapes.get(shape, {}).get(r["variant"].removeprefix("cluster "))  # "cluster v1": the study's v1
    share = f"{measured['of_ceiling']:.0%}" if measured else ""
    held.setdefault(shape, {})[r["variant"]] = r
    print(f"{shape[0]:>6} x {shape[1]:<7}{r['variant']:<19}{r['threads']:>8}{r['registers']:>6}{r['spill_bytes']:>7}"
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
# quarters occupancy at the 256 MiB shapes and reaches most of the copy ceiling at each of them: past some
# number of resident warps, enough bytes are in flight, and more residency buys nothing. (The 1000-column
# shape moves a quarter of the bytes, where a launch's fixed costs weigh more.) Occupancy is
# a cause only below that point, as for the cluster kernels above.

# %% [markdown]
# ## Weights on chip for the cluster kernel: v10 and v11, a prediction measured
# The section on persistence above found holding the weights no faster for `fused`: they come from L1 and L2
# anyway. The cluster kernels may differ in one step. v8 and v9 store a row in the last loop of the kernel,
# after the exchange, with no load of x in flight, and each stored vector waits for its gamma and beta (from
# L1 or L2); softmax's cluster kernel has the same layout and no loads at all in that step, and it holds more of
# the copy ceiling (lesson 04). `v10` (`kernels_lab/topics/layernorm/onchip.py`) runs v9's code the
# persistent RNN's way (lesson 05): a grid of as many clusters as the GPU holds at once strides over the rows,
# each block copies its slice of gamma and beta into shared memory once, and every row's last step reads them
# there. It also takes v4's layout (16 floats a thread: twice the blocks a row, or twice the threads a block
# where the cluster is already sixteen blocks) and asks 1536 resident threads
# an SM, so that three blocks fit their weights; `v11` asks v9's 1024. What that costs on chip, from the
# compiled kernels (the table above, at the long rows):

# %%
print(f"{'rows x cols':<16}{'kernel':<13}{'regs':>5}{'spill':>6}{'weights in shared':>18}{'threads/SM':>11}"
      "  limited by")
for shape, got in held.items():
    if "cluster v10" in got and shape[1] > 16384:  # the long rows
        for v in ("cluster", "cluster v10", "cluster v11"):  # `cluster` runs v9
            r = got[v]
            print(f"{shape[0]:>6} x {shape[1]:<7}{v:<13}{r['registers']:>5}{r['spill_bytes']:>6}"
                  f"{r.get('dynamic_shared_bytes', 0) // 1024:>15} KB{r['threads_per_sm']:>11}  {r['limited_by']}")

# %% [markdown]
# The prediction, written before any GPU ran them (`benchmarks/NOTES.md`): v10 or v11 at or above v9 at every
# long row, and close to softmax's cluster kernel. A review corrected it before the run: a result would not speak
# for the weights alone, since v10 changes the layout and the residency too, and v4's layout by itself had
# measured below v3's at the long rows on both GPUs. Both were tested against float64 on the simulator (a
# cluster striding over rows, each block's own slice of the weights, a block whose two warps take different
# paths) and then on an H100 at five shapes, odd widths included (`figures/data/gpu_tests_clusters_h100.txt`).
# Measured on the H100, beside `cluster` (v9), v3 and v4 / v5 (v3's code on v10's layout, at v11's and v10's
# residency), in two runs of the study, its `shapes` group and its `long` group:

# %%
ONCHIP_LINES = ("v3", "v4", "v5", "cluster", "v10", "v11", "torch.compile")
onchip = {}
for name in ("layernorm_shapes_h100.json", "layernorm_long_h100.json"):
    versions_table(name, ONCHIP_LINES)
    onchip.update(shapes_of(committed(name)))
    print()
print("points of the copy ceiling against `cluster`, v9 (negative: below it)")
print(f"{'rows x cols':<16}{'v10':>6}{'v11':>6}")
for (rows, cols), got in onchip.items():
    v9 = got["cluster"]["of_ceiling"]
    print(f"{rows:>6} x {cols:<8}" + "".join(f"{100 * (got[v]['of_ceiling'] - v9):>+6.0f}" for v in ("v10", "v11")))
print()
scheduler_table(("ncu_layernorm_onchip_2048x32768_h100.csv",))

# %% [markdown]
# The prediction is refuted. From 4096 columns on, v10 and v11 sit below v9 at every shape, most at the
# longest rows, and never reach softmax's cluster kernel. Only at 1000 and 1024 columns are they level with v9
# (the differences table), and there v10's layout, registers and residency are v9's (a cluster of eight blocks
# of 32 threads): what differs is the weights on chip and the grid of resident clusters striding over the rows,
# and together they move little. Against v4 and v5, which run v3's code on v10's layout, they are faster: the
# weights on chip and v9's test-free path do buy something on that layout, but the layout costs more than
# they buy.
#
# What the layout costs is what the v4 section found: each thread holds half the floats, so at v11's residency,
# which is v9's, an SM has half the bytes in flight, at every long row (at 131072 columns both layouts split a
# row over sixteen blocks, v10's of twice the threads). The profile, taken at 2048 x 32768 only (the last
# table; v11 is `..._v10_r1024` there), shows the instruction side of it: v10 and v11 issue as many
# instructions a scheduler-cycle as v3 does, where v9 issues far fewer for the same bytes, since each thread
# does its share of a row's fixed work (the block's reduction, the exchange, the barrier, the vote) for half
# as many bytes. v10's 40 registers spill as v3's did (the spill column), where v11 and v9 make no spill
# request in this profile (ptxas keeps 4 bytes of v9's in local memory at the long rows, the register table), and
# v10's higher occupancy did not make up for any of it.
#
# Why not v9's own layout with the weights on chip? Arithmetic, no GPU needed: a block's slice of gamma and beta
# is two floats for every float of the row the block holds, so a block that holds 32 floats a thread of a 32768-
# or 65536-column row needs twice its slice of x in shared memory: 128 KB for a block of 512 threads, one such
# block an SM, a quarter of the SM's threads (v9's blocks of 256 threads, at 8192 and 131072 columns, would need
# 64 KB: three an SM, fewer than v9's four). The weights on chip and the floats in flight compete for the same
# SM, and what they could win is small: L2 already serves them to every row (v9 reads them from there), so
# keeping them on chip saves accesses that were cache hits, the same finding as for `fused` and `persistent`
# above. What the H200, issue 36's GPU, does with them is not measured: the device gave an H100 for this run.

# %% [markdown]
# ## Summary
# - Layernorm is two dependent reductions (mean, then variance) and an elementwise step with weights:
#   unfused, x crosses DRAM three times plus the output; fused, once plus the output.
# - Compute the variance from deviations: E[x^2] - mean^2 cancels in float32 for rows far from 0.
# - In one pass, carry (n, mean, M2) and merge partials with Welford and Chan's rule: it folds in one
#   element, merges lanes and blocks, and never forms a sum of squares.
# - Rows too long for a block: split them over a thread-block cluster and merge the blocks' (n, mean, M2)
#   with the same rule, one exchange through distributed shared memory and one cluster barrier a row; a launch
#   bound asks the compiler for the residency (registers) the loads need.
# - Staging the slice in shared memory with asynchronous copies (`cp.async`), the next row in flight during
#   the exchange, was built, tested (the simulator lands a copy only at its wait) and measured: slower than
#   the register kernel: more instruction work a byte, at lower occupancy. A measured negative result is a result.
# - Read the scheduler's statistics before blaming memory: v3 issued an instruction on most cycles with DRAM
#   at half its peak, and a path with no test for the threads (v8) or warps (v9) that need none cut its
#   instructions by about half and moved it closer to the copy ceiling than any layout or staging change; a
#   warp whose lanes split between two paths runs both.
# - A store pattern can cost more than a statistic: a warp whose threads store one float each, 16 bytes
#   apart, writes every sector four times (ncu counts it); 16-byte stores write it once.
# - Weights every row shares can stay in registers across rows in a persistent kernel, at a price in
#   registers that the compiler reports (ptxas -v) and occupancy follows; measure it: here the caches
#   already keep them, and holding them is no faster at any shape.
# - Keeping gamma and beta in shared memory across rows (v10, v11) cost the layout more than it saved: the
#   weights take twice the shared memory of the slice of x they serve, and L2 already served them.
