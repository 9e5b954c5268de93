# %% [markdown]
# # 02 Launch overhead
#
# **Goals:** see where the microseconds of a kernel launch go (Python dispatch, the driver, the GPU), when a
# kernel is launch-bound, and what pre-bound launches, CUDA graphs and fusion do about it.

# %%
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
print(lessons.setup())

# %% [markdown]
# ## The ladder
# The same tiny kernel launched 2000 times back to back, per launch path. Measured live on a GPU; on the
# simulator, read from the committed H200 run.

# %%
if lessons.live():
    from kernels_lab.topics.launch.bench import measure_ladder
    rungs = measure_ladder()
else:
    rungs = lessons.committed("ladder_h200.json")["records"]
for r in rungs:
    print(f"{r['path']:<44} host {r['host_us_per_launch']:7.2f} us/launch   device {r['device_us_per_boundary']:6.2f} us/boundary")

# %% [markdown]
# ![what one kernel boundary costs, launch path by launch path](../figures/ladder_h200_ladder.png)
#
# Where a row's two bars are equal (the device bar dotted), the launches came slower than the GPU ran
# them: it finished each tiny kernel in far less time and waited for the next launch, so the spacing it
# saw between kernels is the host's time per launch. Only the graph and the persistent kernel, which
# take the host out of each boundary, show what a boundary costs the GPU itself.
#
# numba re-types and re-flattens every argument on every call (each array is 7 kernel parameters).
# How much of a launch that is, from the rungs above:

# %%
host = {r["path"]: r["host_us_per_launch"] for r in rungs}
device = {r["path"]: r["device_us_per_boundary"] for r in rungs}
bare, one, four = (host[f"numba dispatch, {k}"] for k in ("0 array args", "1 array arg", "4 array args"))
print(f"numba dispatch: {bare:.1f} us with no array argument, {one:.1f} us with one, {four:.1f} us with four: "
      f"{(four - bare) / 4:.1f} us per array, {1 - bare / four:.0%} of the 4-array launch")
print(f"pre-bound launch, 4 arrays: {host['pre-bound cuda.core launch, 4 array args']:.1f} us of host time")
print(f"graph replay: {host['CUDA graph replay, 4 array args'] * 1e3:.0f} ns of host time per kernel; the GPU's own cost "
      f"per boundary {device['CUDA graph replay, 4 array args']:.2f} us (grid-sync step: "
      f"{device['persistent kernel, one grid-sync step']:.2f} us)")

# %% [markdown]
# A pre-bound launch flattens once; a graph replays recorded launches; a persistent kernel replaces a
# launch by a grid-wide barrier; a fused kernel has no boundary at all.
#
# ### Exercise 1: read the ladder
# How many times cheaper on the host is the pre-bound cuda.core launch than numba dispatch with 4 arrays?
# The data: `rungs`, one record per launch path (field `path`: the rungs named
# `'numba dispatch, 4 array args'` and `'pre-bound cuda.core launch, 4 array args'`), the host's cost in
# `host_us_per_launch`.

# %% tags=["stub"]
prebound_ratio = ...  # YOUR ANSWER, from rungs

# %% tags=["exercise"]
# EXERCISE: prebound_ratio
by = {r['path']: r for r in rungs}
prebound_ratio = (by['numba dispatch, 4 array args']['host_us_per_launch']
                  / by['pre-bound cuda.core launch, 4 array args']['host_us_per_launch'])

# %%
by_ = {r['path']: r for r in rungs}
print(lessons.expect("pre-bound vs numba", prebound_ratio, by_['numba dispatch, 4 array args']['host_us_per_launch']
                     / by_['pre-bound cuda.core launch, 4 array args']['host_us_per_launch'], rel=0.05))

# %% [markdown]
# ## Launch-bound or bandwidth-bound?
# Over a sweep of sizes, the time of each variant against the model `launches x launch cost + bytes /
# bandwidth` (bandwidth = the measured copy ceiling, or less when a kernel's threads keep too few bytes
# in flight to cover the DRAM latency: Little's law; launch costs and the latency fitted). At small n
# the three-kernel chain costs what its dependent launches cost, whatever its bytes; at large n the
# 4-byte-per-load kernel falls short of the ceiling by exactly the bytes it does not keep in flight.

# %% [markdown]
# ![time against size, measured and modelled](../figures/profile_elementwise_h200_time.png)
#
# Points are the measured medians, lines the model, one per variant in its colour and dash; `fused` and
# `persistent` plan the same launches and bytes, so their model is the same line, drawn twice.

# %% [markdown]
# ### Exercise 2: the crossover
# At what n does one 12-byte-per-element kernel take as long to move its bytes as a launch costs?
# `n = c * bandwidth / 12`, with, from the sweep behind the figure
# (`lessons.committed("profile_elementwise_h200.json")`):
# - c, the fitted exposed launch cost: `records[i]["model_launch_us"]`, in microseconds (the same in
#   every record: one fit for the whole sweep);
# - bandwidth, the copy ceiling measured in the same run: `meta["ceiling_GBs"]`, in GB/s (10^9 B/s).
#
# Mind the units: seconds times bytes per second over bytes per element gives elements.

# %% tags=["stub"]
crossover_n = ...  # YOUR ANSWER

# %% tags=["exercise"]
# EXERCISE: crossover_n
sweep = lessons.committed('profile_elementwise_h200.json')
c_us = sweep['records'][0]['model_launch_us']
crossover_n = c_us * 1e-6 * sweep['meta']['ceiling_GBs'] * 1e9 / 12

# %%
s_ = lessons.committed('profile_elementwise_h200.json')
print(lessons.expect("crossover n", crossover_n, s_['records'][0]['model_launch_us'] * 1e-6 * s_['meta']['ceiling_GBs'] * 1e9 / 12))


# %% [markdown]
# ### Exercise 3: two launches instead of three
# Write `run_two(x, b, alpha, out)`: a host function that launches **two** kernels, the first doing bias add
# and GELU into one intermediate array, the second the scale. Budget: 2 launches, 20 bytes per element.
# The GELU is lesson 01's tanh approximation, `gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))`.

# %% tags=["stub"]
def run_two(x, b, alpha, out):
    # YOUR CODE: allocate g = cuda.device_array_like(out), launch two kernels
    pass


# %% tags=["exercise"]
# EXERCISE: two_launches
import math

@cuda.jit
def add_gelu(x, b, g):
    i = cuda.grid(1)
    if i < g.size:
        h = x[i] + b[i]
        u = np.float32(math.sqrt(2 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        g[i] = h / (np.float32(1) + math.exp(np.float32(-2) * u))

@cuda.jit
def scale(g, alpha, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * g[i]

def run_two(x, b, alpha, out):
    g = cuda.device_array_like(out)
    grid = (out.size + 255) // 256
    add_gelu[grid, 256](x, b, g)
    scale[grid, 256](g, alpha, out)


# %%
print(lessons.check("two_launches", globals().get("run_two")))

# %% [markdown]
# ## Summary
# - A numba launch costs the host microseconds of Python, more with every array argument; the
#   GPU's own cost per boundary is a small fraction of that (both printed after the ladder above).
# - A kernel shorter than the launch cost is launch-bound: fewer launches (fusion), cheaper launches
#   (pre-bound, graphs) or no launches (persistent) are the answers.
# - The crossover is near n = c x bandwidth / bytes per element: millions of elements, not thousands.
