# %% [markdown]
# # 01 Memory traffic and kernel fusion
#
# **Goals:** count the bytes a chain of kernels moves three ways (the plan, the simulator's trace, Nsight
# Compute on an H200), see why one fused kernel beats three, and write the fused kernel.
#
# The chain, on float32 vectors: `h = x + b` (bias add), `g = gelu(h)`, `out = alpha * g` (scale).
# Each stage is a few flops per element: the chain is limited by memory traffic.
#
# The GELU here, in every lesson and in the checks' float64 reference, is the **tanh approximation**
#
#     gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
#
# (the exact form `0.5 h (1 + erf(h / sqrt(2)))` differs from it by more than the checks' tolerance).
# Since `0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u))`, the kernels compute it as `h / (1 + exp(-2u))`
# with `u = sqrt(2/pi) (h + 0.044715 h^3)`: one `exp`, no `tanh`; either form passes.

# %%
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
print(lessons.setup())

# %%
w = get_workload("elementwise")
for v in w.variants.values():
    plan = v.plan(w.size(1000))      # a size names the workload's axes: here one, n
    print(f"{v.name:<12} {plan.n_launches} launch(es)  {plan.bytes_total / 1000:g} B/element   {v.about}")

# %% [markdown]
# ## Bytes, counted by the code that runs
# The plan is what a variant *declares*. On the simulator every global-memory element access is traced,
# so we can check the declaration against what the kernels really do.

# %%
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.profile.measure import trace_if_simulated  # the trace on the simulator, None on a GPU
size = w.size(1031)
inputs = w.make_inputs(size, np.random.default_rng(1))
for v in w.variants.values():
    launch = v.bind(to_device(inputs), poisoned(w.output_specs(size)))
    with count_launches() as seen, trace_if_simulated() as trace:
        launch()
    traced = f"traced {trace.bytes_total:>7,} B  " if trace else ""
    print(f"{v.name:<12} launches {len(seen)}  {traced}plan {v.plan(size).bytes_total:>7,} B")

# %% [markdown]
# ### Exercise 1: predict
# How many bytes per element does the **unfused** chain move? (Stage 1 reads x and b and writes h;
# stage 2 reads h, writes g; stage 3 reads g, writes out; 4 bytes per float32.)

# %% tags=["stub"]
unfused_bytes_per_element = ...  # YOUR ANSWER

# %% tags=["exercise"]
# EXERCISE: predict_unfused_bytes
unfused_bytes_per_element = (8 + 4) + (4 + 4) + (4 + 4)

# %%
print(lessons.expect("unfused bytes per element", unfused_bytes_per_element, 28))


# %% [markdown]
# ### Exercise 2: fuse the chain
# Write `fused_chain(x, b, alpha, out)`: one kernel, one thread per element, `h` and `g` in registers,
# `out[i] = alpha * gelu(x[i] + b[i])` with the tanh GELU above (`math.tanh` and `math.exp` both work
# in a kernel; keep the constants float32: `np.float32(0.044715)`). The check runs it at sizes that are
# not multiples of the block size (1, 255, 257, 1031), with three block sizes, into outputs poisoned
# with NaN, against a float64 reference; it also counts launches and traced bytes (at most 1 launch,
# 12 bytes per element).

# %% tags=["stub"]
@cuda.jit
def fused_chain(x, b, alpha, out):
    # YOUR CODE: one thread per element, out[i] = alpha * gelu(x[i] + b[i]),
    # gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))),
    # with h = x[i] + b[i] kept in a register (never written to global memory)
    pass


# %% tags=["exercise"]
# EXERCISE: fuse_chain
import math
SQ, C = np.float32(math.sqrt(2 / math.pi)), np.float32(0.044715)

@cuda.jit
def fused_chain(x, b, alpha, out):
    i = cuda.grid(1)
    if i < out.size:                 # the bounds guard: the last block is partly empty
        h = x[i] + b[i]              # stays in a register
        u = SQ * (h + C * h * h * h)
        out[i] = alpha * (h / (np.float32(1) + math.exp(np.float32(-2) * u)))


# %%
print(lessons.check("fuse_chain", globals().get("fused_chain")))

# %% [markdown]
# ## Measured on a GPU (committed results)
# At the sweep's largest size, Nsight Compute's DRAM bytes against the plan (the small shortfall: writes
# still in L2 when the kernel ends), and the time, which follows the bytes. Each cell prints the GPU its
# run was on (two runs, two GPUs).

# %%
sweep = lessons.committed("profile_elementwise_h200.json")
big = {r["variant"]: r for r in sweep["records"] if r["n"] == max(x["n"] for x in sweep["records"])}
for name, r in big.items():
    dram = r["bytes_dram_read"] + r["bytes_dram_write"]
    print(f"{name:<12} plan {r['bytes_model']/2**20:8.1f} MiB   ncu {dram/2**20:8.1f} MiB ({dram/r['bytes_model']-1:+.1%})"
          f"   {r['time_ms']*1e3:7.1f} us   {r['GBs']:6.0f} GB/s")
print("copy ceiling in that run:", round(sweep["meta"]["ceiling_GBs"]), "GB/s, on", sweep["meta"]["device"])

# %% [markdown]
# ![bytes and time per variant, on an H100](../figures/elementwise_h100_bytes.png)
#
# The labels divide the planned bytes by the time, so a kernel can reach a little more than 100% of the
# copy ceiling: L2 keeps part of the planned traffic from DRAM (the last writes of a kernel, an
# intermediate read back soon after it was written: Nsight Compute's bytes above are below the plan), and
# the ceiling is itself a measured copy kernel, not the hardware's peak.

# %% [markdown]
# Why is `fused_naive` slower than `fused` when both move 12 bytes per element? Each thread of the naive
# kernel keeps 8 bytes of loads in flight; DRAM latency times the DRAM bandwidth needs more than a full SM of such
# threads can hold (Little's law). `fused` loads 16 bytes per instruction (`ld.global.v4.f32`), four times
# the bytes in flight, and reaches the copy ceiling (above 100%: it reads twice what it writes, which DRAM
# serves better than the copy's one read per write). The same run timed torch on the same chain: eager
# (three kernels, as `unfused`) and `torch.compile` (which fuses it); their rate counts the 12 bytes per
# element the chain must move:

# %%
demo = lessons.committed("elementwise_h100.json")
print(demo["meta"]["device"])
for r in demo["records"]:
    gbs = r["GBs_model"] or r["GBs_useful"]  # ours: our planned bytes; torch's (anchors): the chain's 12 B
    print(f"{r['variant']:<13} {gbs:6.0f} GB/s = {gbs / demo['meta']['ceiling_GBs']:5.0%} of the copy ceiling "
          f"({demo['meta']['ceiling_GBs']:.0f} GB/s), n = 2^{r['n'].bit_length() - 1}")

# %% [markdown]
# ### Exercise 3: read the data
# From the committed run at 2^28 elements (`kernels-lab bench elementwise` measures it again on a GPU), how
# many times faster is `fused` than `unfused`? The data: `lessons.committed("elementwise_h100.json")["records"]`,
# one record per variant (field `variant`), its median time in `time_ms`. Compare with the bytes ratio 28 / 12 = 2.33.

# %% tags=["stub"]
demo = lessons.committed("elementwise_h100.json")
speedup = ...  # YOUR ANSWER, from demo['records']

# %% tags=["exercise"]
# EXERCISE: fusion_speedup
demo = lessons.committed("elementwise_h100.json")
by = {r['variant']: r for r in demo['records']}
speedup = by['unfused']['time_ms'] / by['fused']['time_ms']

# %%
by_ = {r['variant']: r for r in lessons.committed("elementwise_h100.json")["records"]}
print(lessons.expect("speedup", speedup, by_['unfused']['time_ms'] / by_['fused']['time_ms']))

# %% [markdown]
# ## Summary
# - A chain of elementwise kernels is paid for in bytes: unfused 28 B/element, fused 12.
# - The plan, the simulator's trace and Nsight Compute agree; the time follows the bytes (your speedup
#   from exercise 3 against the bytes ratio 2.33).
# - Bytes in flight matter too: 16-byte accesses take the fused kernel from short of the copy ceiling
#   (`fused_naive`) to the ceiling (the fractions printed above).
