# %% [markdown]
# # 06 The launch-side answers: graphs, PDL, one grouped kernel
#
# **Goals:** know what a dependent launch waits for by default and what that costs a group of small
# kernels; replay the group as a CUDA graph; overlap its members with Programmatic Dependent Launch (PDL)
# and place PDL's two instructions so that the result stays right; know when PDL does not pay; and end at
# the grouped kernel, which has no boundaries at all.
#
# The setting (`kernels_lab/topics/pdl/workload.py`): an **earlier** kernel writes G float32 tensors
# of different sizes; a **group** of G small kernels quantizes them, one kernel of one block per tensor
# (absmax, `scale = absmax / 127`, int8 values); a **later** kernel reads every quantized tensor. The
# earlier and the later kernel stand for work that is not ours (in a framework: whatever runs before and
# after), so the group may assume nothing about them: the earlier one may let its successor start early,
# the later one may read without waiting.

# %%
import warnings
import numpy as np
from kernels_lab import lessons
from kernels_lab.topics.pdl import rules as pdl_rules
from kernels_lab.runtime import cuda
from kernels_lab.topics.pdl import workload as pdl
print(lessons.setup())

# %% [markdown]
# ## The group, run here
# Every variant of the group computes the same values; the check compares each quantized tensor, scale
# and the later kernel's checksums with a float64 reference. On the simulator (or a GPU older than
# compute capability 9.0) the PDL variants say so and run as plain launches.

# %%
group = pdl.Group([90, 7, 40])
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    for variant in pdl.VARIANTS:
        problem = pdl.check(group, pdl.run_once(group, variant))
        print(f"{variant:<10} {'right' if problem is None else problem}")
for message in sorted({str(w.message) for w in said}):
    print("note:", message)

# %% [markdown]
# ## What a dependent launch waits for
# In one stream, a kernel starts only when the kernel before it has **finished**: every block exited and
# its writes visible. And before that, the host has to issue the launch. The committed H200 study
# (`figures/data/pdl_h200.json`, `kernels-lab bench pdl`) stamps the start and end of every block with
# `%globaltimer`, so the gaps between kernels come from the kernels themselves:

# %%
study = lessons.committed("pdl_h200.json")
rec = {(r["G"], r["size_class"], r["variant"]): r for r in study["records"]}
plain = rec[8, "tiny", "plain"]
members = plain["timeline"][1:-1]
runs = [s["end_us"] - s["start_us"] for s in members]
print(f"G = 8 tiny tensors ({plain['elements']:,} elements), plain launches: {plain['e2e_us']:.0f} us end to end; "
      f"the host spent {plain['host_us']:.0f} us issuing the launches")
print(f"each member runs {min(runs):.1f} to {max(runs):.1f} us; the median gap between two members is "
      f"{plain['gap_us']:.1f} us")

# %% [markdown]
# ![G = 8 tiny tensors, one row per kernel](../figures/pdl_h200_timeline_tiny.png)
#
# One row per kernel (earlier kernel at the top, later kernel at the bottom), one panel per variant. In
# the `plain` panel the members run for a couple of microseconds each and wait longer than that for the
# next launch: the group is **host-bound**. The host, not the GPU, sets the pace.
#
# ## First answer: a CUDA graph
# A graph records the G launches once and replays them with one call: the host's cost per launch goes,
# the GPU's own cost per boundary stays. Lesson 02's ladder measured both:

# %%
ladder = {r["path"]: r for r in lessons.committed("ladder_h200.json")["records"]}
prebound, graph = ladder["pre-bound cuda.core launch, 4 array args"], ladder["CUDA graph replay, 4 array args"]
print(f"ladder: a pre-bound launch costs the host {prebound['host_us_per_launch']:.1f} us; a graph replay "
      f"{graph['host_us_per_launch'] * 1e3:.0f} ns per kernel on the host and {graph['device_us_per_boundary']:.2f} us "
      f"per boundary on the GPU")
for g in (8, 32, 64):
    p, gr = rec[g, "tiny", "plain"], rec[g, "tiny", "graph"]
    print(f"G = {g:>2} tiny: plain {p['e2e_us']:4.0f} us (gap {p['gap_us']:.2f} us)   "
          f"graph {gr['e2e_us']:4.0f} us (gap {gr['gap_us']:.2f} us)")

# %% [markdown]
# A graph keeps stream order: member k+1 still starts only after member k has finished. What is left
# between them is the GPU's own boundary.
#
# ## Second answer: Programmatic Dependent Launch
# With PDL (compute capability 9.0 and later), a kernel launched with the attribute
# `programmatic_stream_serialization` may start **before** the kernel before it has finished. Two PTX
# instructions steer it (`kernels_lab/intrinsics.py`: `launch_dependents()`, `grid_dependency_wait()`):
#
# - `griddepcontrol.launch_dependents`, the **trigger**: the next kernel may launch once every block of
#   this one has triggered or exited. It is a hint: the launch may come later, never earlier. It says
#   nothing about this kernel's writes. An exit counts as a trigger.
# - `griddepcontrol.wait`: returns when the kernel before has **completed and its writes are visible**.
#   This is the only promise of visibility. A kernel that started early and did not wait may read what
#   was there before; starting late (even after the kernel before exited) is not seeing its writes.
#
# ### The two rules the project started from
# After a TransformerEngine design, for a group whose members do not read each other's outputs:
# **wait only in the first kernel of the group** (only it reads what the earlier kernel wrote, and every
# later member launches from a trigger that comes after that wait); **trigger in all but the last** (member
# k+1 may start while member k runs, but the later kernel, which may not wait, launches only when the last
# member has ended); and **the attribute always set on the host**, on every launch.
#
# ### Why two rules are not enough
# PDL orders *launches*, not *completions*. Under the two rules the later kernel starts once the **last**
# member ends, and nothing makes the last member end after the others. When an earlier member has more
# work, it is still writing its tensor when the later kernel reads it. The H200 runs found exactly that.
# The study keeps two labelled wrong variants: `wrong_unordered` (the two rules) and `wrong_trigger` (the
# last member triggers too). For each, when the later kernel started, against the end of the group's last
# member to finish:

# %%
for r in study["records"]:
    early = r["consumer_start_minus_group_end_us"]
    if r["variant"] in pdl.WRONG and (early < 0 or r["wrong_output"]):
        print(f"{r['variant']:<16} G = {r['G']:>2} {r['size_class']:<5}  later kernel started {-early:7.1f} us "
              f"before the group ended   {r['wrong_output'] or 'values right this time'}")
safe = min(r["consumer_start_minus_group_end_us"] for r in study["records"] if r["variant"] in ("pdl", "graph_pdl"))
print(f"with the three rules (pdl, graph_pdl), the later kernel started at least {safe:.2f} us after the group ended")

# %% [markdown]
# A start before the group's end is a race; it shows up as a wrong checksum only when the later kernel
# reaches a tensor before its member has written it, which here happened with large tensors only.
#
# ![G = 8 large tensors, one row per kernel](../figures/pdl_h200_timeline_large.png)
#
# In the last panel (`wrong_unordered`) the members end in no particular order, and the later kernel (the
# bottom row, drawn dark red because it starts before the group has ended, at the dashed line) starts
# while some of them are still running:

# %%
spans = rec[8, "large", "wrong_unordered"]["timeline"]
later = spans[-1]["start_us"]
running = [s["kernel"] for s in spans[1:-1] if s["end_us"] > later]
print(f"wrong_unordered, G = 8 large: the later kernel started at {later:.1f} us; still running then: {', '.join(running)}")

# %% [markdown]
# ### The third rule
# **Every member after the first waits once more, at its end** (the `order` switch). That wait returns when
# the member before has completed, so the members end in stream order and the last one ends after all of
# them; their bodies, which come before the wait, still overlap (the `pdl` and `graph_pdl` panels above).
# With it, `quantize_group.pdl_switches(g)` gives each member its `(wait, trigger, order)`; and
# `kernels_lab/topics/pdl/rules.py` judges any such list against the two promises above:

# %%
print("the three rules, G = 4:", pdl.pdl_switches(4))
print("the two rules,   G = 4:", pdl.pdl_switches(4, "unordered"))
for f in pdl_rules.findings(pdl.pdl_switches(4, "unordered")):
    print(f"  {f.kind}: {f.message}")

# %% [markdown]
# What the rules rely on: a later kernel that does not wait is kept back by timing alone (the last
# member does not trigger, so the later kernel launches when its blocks exit). Strictly, only a wait
# promises visibility; a later kernel you write yourself should wait before it reads (the instruction does
# nothing without PDL, so it costs nothing there). In the study's checked runs of the correct variants
# (one per configuration, before the timed ones), the later kernel, which does not wait, read every tensor
# right.
#
# ### Exercise 1: place the switches
# Write `group_switches(g)`: a list of g tuples `(wait, trigger, order)`, one per member, in launch order,
# such that no member reads the earlier kernel's tensors too early, the later kernel (which does not wait)
# never reads a tensor whose member is still running, and **every boundary can overlap** (a member that
# waits at its start for the member before it is right, but serial). The check judges your switches
# against PDL's promises for G = 1, 2, 3, 5 and 8 and names every member that could read too early and
# every boundary that loses its overlap; then it runs a group of 4 with your switches (the simulator has
# no PDL: there it runs plain launches, which checks the values, not the timing).
#
# The graded version (`kernels-lab grade group_switches your_file.py`) runs each case's group on a GPU with
# PDL and reads its timeline: its last point needs every member to begin its work while the member before
# it still runs. It also takes the end point of this lesson as an answer: `group_switches(g)` may return one
# `@cuda.jit` kernel of yours, `grouped(data, offsets, q, scales)`, that quantizes all g tensors (block t,
# tensor t; `cuda.blockDim.x` threads), launched with g blocks. Every launch there carries the PDL attribute,
# so a group of one follows the same rules: it waits before it reads (`from kernels_lab.intrinsics import
# grid_dependency_wait`) and does not trigger.

# %% tags=["stub"]
def group_switches(g):
    # YOUR CODE: one (wait, trigger, order) tuple per member
    return [(False, False, False) for k in range(g)]


# %% tags=["exercise"]
# EXERCISE: group_switches
def group_switches(g):
    return [(k == 0,       # wait before reading: only the first member can start before the earlier kernel is done
             k < g - 1,    # trigger: the next member may start; never the last (the later kernel may not wait)
             k > 0)        # order: wait at the end, so every member ends after the one before it
            for k in range(g)]


# %%
print(pdl_rules.check_switches(globals().get("group_switches")))

# %% [markdown]
# ## What the kernels' own stamps show
# ![G = 8 small tensors, one row per kernel](../figures/pdl_h200_timeline_small.png)
#
# Read the three timelines (tiny above, small here, large before the third rule) panel by panel:
# - `pdl` (host-launched) overlaps only where a member runs longer than the host takes to issue the next
#   launch: with tiny tensors the next launch is not there yet, so there is nothing to overlap, and `pdl`
#   looks like `plain`.
# - In a graph every launch is queued before the first member starts: `graph_pdl`'s members overlap even
#   when they are tiny, and its boundaries become negative.
# - With large tensors every member runs long enough; each is one block on a 132-SM GPU, so all eight run
#   side by side.
#
# The same in numbers (G = 8; a negative gap is an overlap):

# %%
for cls in ("tiny", "small", "large"):
    runs = [s["end_us"] - s["start_us"] for s in rec[8, cls, "plain"]["timeline"][1:-1]]
    gaps = "   ".join(f"{v} {rec[8, cls, v]['gap_us']:+8.2f}" for v in ("plain", "pdl", "graph", "graph_pdl"))
    print(f"{cls:<5}  a member runs {np.median(runs):7.1f} us (median)   gap per boundary, us: {gaps}")

# %% [markdown]
# ### Exercise 2: predict
# For **G = 64**, which of `plain`, `graph`, `graph_pdl` and `grouped` (one kernel, one block per tensor)
# is fastest end to end, for tiny tensors and for large ones? Reason from what you have: the host's cost
# per launch and the GPU's per boundary (the ladder), how long a member runs and whether members overlap
# (the numbers above). The check compares with the committed study; two variants within each other's
# quartiles both count.

# %% tags=["stub"]
fastest = {"tiny": ..., "large": ...}  # YOUR PREDICTION: "plain", "graph", "graph_pdl" or "grouped"

# %% tags=["exercise"]
# EXERCISE: fastest_at_g64
fastest = {"tiny": "grouped",   # one launch and no boundary beat 64 launches, even replayed and overlapped
           "large": "grouped"}  # the 64 blocks run side by side in one launch; graph_pdl gets there by overlap

# %%
print(pdl_rules.check_fastest(fastest, g=64))

# %% [markdown]
# ## End to end over G
# ![end to end over G](../figures/pdl_h200_e2e.png)
#
# What one more member costs, end to end, from G = 8 to G = 64 (the slope of each curve):

# %%
for cls in ("tiny", "small", "large"):
    slopes = "  ".join(f"{v} {(rec[64, cls, v]['e2e_us'] - rec[8, cls, v]['e2e_us']) / 56:7.2f}"
                       for v in ("plain", "pdl", "graph", "graph_pdl", "grouped"))
    print(f"{cls:<5} us per extra member: {slopes}")
host_slope = (rec[64, "tiny", "plain"]["host_us"] - rec[8, "tiny", "plain"]["host_us"]) / 56
print(f"tiny, plain: the host's time per extra launch {host_slope:.1f} us")

# %% [markdown]
# For tiny tensors, a plain member costs what the host takes to launch it; a graph removes that and
# leaves the member's own run and its boundary; graph + PDL overlaps those too; the grouped kernel pays
# almost nothing per tensor. For large tensors the members' own work dominates, and only running them
# side by side helps: `graph_pdl` and `grouped` do (each member is one block); host-launched `pdl` does at
# G = 8 (the large timeline) but falls behind at larger G (below).
#
# ## When PDL does not pay
# Where the committed study shows PDL no faster, or slower, than the same launches without it:

# %%
for (g, cls, v), r in rec.items():
    if v in ("pdl", "graph_pdl"):
        base = rec[g, cls, "plain" if v == "pdl" else "graph"]
        if r["e2e_us"] > base["e2e_us_q1"]:
            print(f"G = {g:>2} {cls:<5} {v:<9} {r['e2e_us']:7.1f} us   vs {base['variant']:<5} {base['e2e_us']:7.1f} us   "
                  f"host time {r['host_us']:6.1f} vs {base['host_us']:6.1f} us")
for g in (8, 32, 64):
    hp, gp = rec[g, "large", "pdl"], rec[g, "large", "graph_pdl"]
    print(f"G = {g:>2} large: host-launched pdl {hp['e2e_us']:7.1f} us = {hp['e2e_us'] / gp['e2e_us']:.1f}x graph_pdl "
          f"(the host issued its launches in {hp['host_us']:.0f} us)")

# %% [markdown]
# - **Nothing to overlap.** One member (G = 1) has no boundary inside the group, so the G = 1 rows above
#   differ by noise. A host-launched group of tiny kernels is paced by the host, and PDL cannot start a
#   kernel the host has not launched yet. Where a host-launched row shows PDL slower, compare the host
#   times printed beside it: when they differ by as much, the host, not the GPU, lost that time. Host
#   times of tiny groups vary from run to run (an earlier H200 run had G = 64 tiny `pdl` slower than
#   `plain`; benchmarks/NOTES.md keeps the runs side by side): read those rows as the host's, not PDL's.
# - **Big grids.** Every member here is one block, so there is always room beside it. A kernel whose
#   grid fills the GPU leaves none: the next kernel may launch only once every block of this one has
#   triggered or exited, that is once its last wave has started, and its blocks find SMs only as that
#   wave drains.
#   What PDL can save is then a launch latency and one wave's tail, a small part of a long kernel; and a
#   dependent that starts early must still wait before it reads, holding its SM's registers and shared
#   memory meanwhile. The study has no group of grid-filling kernels: this is the prediction to measure
#   next, not a measurement.
# - **Host-launched, large G.** With large tensors at G = 32 and 64, host-launched `pdl` took far longer
#   than `graph_pdl` with the same switches (the ratios in the last lines printed), though the host had
#   issued every launch long before the group ended. At G = 8 the two agree (the large timeline above).
#   The study keeps one run's timeline at G = 32 large too: count, from the stamps, how many members
#   run at the same moment (`members_at_once` walks the starts and ends in time order).

# %%
from kernels_lab.topics.pdl.bench import members_at_once
for v in ("plain", "pdl", "graph", "graph_pdl"):
    r = rec[32, "large", v]
    print(f"G = 32 large, {v:<9}: at most {members_at_once(r['timeline']):>2} of {len(r['timeline']) - 2} members "
          f"running at once in the run drawn; median end to end {r['e2e_us']:7,.0f} us")
# a wrong variant is a useful witness here: its members do not wait at their end, so some end early
u = rec[32, "large", "wrong_unordered"]["timeline"][1:-1]
print(f"wrong_unordered: member 8 began {u[8]['start_us'] - u[0]['end_us']:+.1f} us after member 0 ended, and "
      f"{u[8]['start_us'] - min(k['end_us'] for k in u[:8]):+.1f} us after the first of members 0-7 to end")

# %% [markdown]
# ![G = 32 large tensors, one row per kernel](../figures/pdl_h200_timeline_large_g32.png)
#
# Host-launched `pdl` runs its members in waves: member k + 8 begins as member k ends, and not before,
# even when a member between them ended long ago (the wrong variant's line): in one stream, at most
# eight host-launched kernels were in flight at once. A graph with the same switches ran all 32
# together. A prediction to test: the width of a wave is `CUDA_DEVICE_MAX_CONNECTIONS`, the number
# of hardware work queues the driver gives a context (8 unless set), because a kernel that launches
# before the one ahead of it has finished needs a queue of its own; a graph, whose edges the driver
# lays out itself, would not be limited by it. `kernels_lab/topics/pdl/window.py` ran a G = 32 group of large
# tensors under several settings, each in a fresh process (`figures/data/pdl_window_h200.json`). So that
# a window that does not move cannot be a setting the driver ignored, each process also ran a control:
# two spinning kernels A1 -> A2 on one stream, then B1 on another. With one queue, B1 waits behind A2,
# which waits for A1 (a false dependency); with several, B1 runs beside A1.

# %%
window = lessons.committed("pdl_window_h200.json")
for r in sorted(window["records"], key=lambda r: (r["variant"] != "pdl", r["max_connections"] or 0)):
    setting = r["max_connections"] or "unset"
    print(f"CUDA_DEVICE_MAX_CONNECTIONS={setting!s:<6} {r['variant']:<9}: at most {r['members_at_once']:>2} of "
          f"{r['G']} members at once; median end to end {r['e2e_us']:7,.0f} us")
for r in (r for r in window["records"] if r["variant"] == "pdl"):
    print(f"control, CUDA_DEVICE_MAX_CONNECTIONS={r['max_connections'] or 'unset'!s:<6}: B1 began "
          f"{r['control_b1_after_a1_us']:6.1f} us after A1 (each kernel spins {r['control_spin_us']} us)")

# %% [markdown]
# ![one group under each setting](../figures/pdl_window_h200_gantt.png)
#
# The control shows the setting took effect: with one queue, B1 waited about one spin behind A1; with
# more, it began within the time the host takes to issue two launches. The window did not follow: eight
# under every setting, one queue included. So the prediction failed: the eight is not the driver's work
# queues. What the measurements do establish: host-launched PDL overlaps a stream's kernels at most
# eight deep, in stream order (kernel k + 8 waits for kernel k); a graph's programmatic edges have no
# such window here. Where the window comes from, these runs do not tell. For a group longer than eight
# whose members run long, capture it in a graph.
#
# ## The end point: one grouped kernel
# One launch for the whole group: block t quantizes tensor t. There is no boundary inside the group, so
# nothing to overlap and nothing to order; the later kernel follows one kernel, as in any stream.

# %%
import inspect
print(inspect.getsource(getattr(pdl.grouped_quantize_kernel, "py_func", pdl.grouped_quantize_kernel)))
for cls in ("tiny", "small", "large"):
    gp, gq = rec[64, cls, "graph_pdl"], rec[64, cls, "grouped"]
    print(f"G = 64 {cls:<5}: graph_pdl {gp['e2e_us']:7.1f} us   grouped {gq['e2e_us']:7.1f} us")

# %% [markdown]
# The grouped kernel is fusion applied to launches (lesson 01's idea): it needs the members to be one kind
# of work that one kernel can do. When the members are different kernels, or not yours, a graph with the
# three PDL rules is what is left.
#
# ### Exercise 3 (optional): the grouped kernel's index mapping
# Write `grouped_dequantize(q, offsets, scales, out)`, the later kernel's step as one grouped kernel: block
# t handles tensor t, the elements `offsets[t]` to `offsets[t + 1] - 1` of the concatenated `q` (int8), and
# writes `out[i] = q[i] * scales[t]` (float32). A tensor may be longer than the block, or a single element.
# The check launches it with one block per tensor, blocks of 32 and of 64 threads, into an output
# poisoned with NaN.

# %% tags=["stub"]
@cuda.jit
def grouped_dequantize(q, offsets, scales, out):
    # YOUR CODE: which tensor is this block's, and which of its elements are this thread's?
    pass


# %% tags=["exercise"]
# EXERCISE: grouped_dequantize
@cuda.jit
def grouped_dequantize(q, offsets, scales, out):
    t = cuda.blockIdx.x                  # one block per tensor
    i = offsets[t] + cuda.threadIdx.x
    while i < offsets[t + 1]:            # a block-stride loop inside the tensor
        out[i] = np.float32(q[i]) * scales[t]
        i += cuda.blockDim.x


# %%
print(pdl_rules.check_grouped(globals().get("grouped_dequantize")))

# %% [markdown]
# ## Summary
# - By default a dependent launch waits for the kernel before it to finish, and for the host to issue it:
#   a group of small kernels is host-bound.
# - A CUDA graph removes the host's cost per launch and keeps stream order.
# - PDL lets a kernel start early. The trigger is a hint; only `griddepcontrol.wait` promises the writes
#   of the kernel before. Three rules for a group between kernels that are not yours: the first member
#   waits before it reads; all but the last trigger; every member after the first waits at its end,
#   because PDL orders launches, not completions.
# - PDL pays where there is room and time to overlap: queued launches (a graph), members that leave SMs
#   free. It cannot help a host-bound group, and a grid-filling kernel leaves it little to save.
# - The end point is one grouped kernel: no boundaries, nothing to order.
