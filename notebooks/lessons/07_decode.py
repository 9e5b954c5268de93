# %% [markdown]
# # 07 Decode: a chain of dense layers, from a launch per op to a megakernel
#
# **Goals:** know what a kernel boundary costs between two dependent layers (drain, launch, fill) and
# which answer removes which part: fusion inside a layer (the epilogue), a CUDA graph, PDL's prologue
# overlap, a persistent kernel, and a megakernel with an instruction table and a counter per layer; know
# why the producer's fence (a release) and the consumer's acquire load are what make the counters
# correct, and write that protocol; and read on the H200 where the megakernel pays and where graphs + PDL
# do as well or better.
#
# The workload (`kernels_lab/topics/decode/workload.py`, kernels in `decode_kernels.py`), float32:
#
#     x_{l+1} = gelu(W_l x_l + b_l)      l = 0 .. layers-1;  W_l: hidden x hidden;  x: batch x hidden
#
# A decode step of a language model at batch 1 is this shape: every layer streams its own weights
# (`4 hidden^2` bytes) for `2 hidden^2 batch` flops, and cannot start its sums before the layer before has
# finished. The weights set a floor: read once per pass, at the copy ceiling. Everything else is overhead.

# %%
import inspect
import warnings
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
from kernels_lab.topics.decode import kernels as dk, workload as decode
print(lessons.setup())
w = get_workload("decode")

# %% [markdown]
# ## The variants and their plans
# Each variant states what it launches and the bytes each launch moves. At the benchmark's headline size
# (hidden 1024, 8 layers, batch 1) the weights are 32 MiB a pass; `unfused` also sends `W x` through memory
# to a bias kernel and a GELU kernel, the others keep it in registers (the epilogue). Every variant but
# `unfused` reads each weight once: they differ in what sits between two layers. (The plans of this
# back-end: the megakernel's table, and so its bytes, depend on how many blocks it runs.)

# %%
head = w.size(hidden=1024, layers=8, batch=1)
weights = 4 * head.layers * head.hidden ** 2
print(f"{head}: weights {weights / 2**20:.0f} MiB a pass")
for v in w.variants.values():
    plan = v.plan(head)
    print(f"{v.name:<11} {plan.n_launches:>3} launch(es)  {plan.bytes_total / 2**20:6.1f} MiB planned   {v.about}")

# %% [markdown]
# The planned bytes are more than the weights: every row's threads read all of `x_l` (from L1 after the
# first), and the megakernel reads its instruction table. Those are cache hits; the weights are what comes
# from DRAM (or, at hidden 1024, from the 60 MB L2: 32 MiB fits).
#
# ## Run here, bytes traced
# Every variant at the workload's small default size into poisoned outputs, against float64, launches
# counted, and on the simulator every global access traced against the plan. On the simulator `graph` and
# `graph_pdl` run their launches one by one (it has no graphs and no PDL).

# %%
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import count_launches
from kernels_lab.profile.measure import trace_if_simulated
size = w.size()
inputs = w.make_inputs(size, np.random.default_rng(7))
want = w.reference(inputs)["out"]
print(f"{size}")
for v in w.variants.values():
    outputs = poisoned(w.output_specs(size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph variants on the simulator: said above
        launch = v.bind(to_device(inputs), outputs)
    with count_launches() as seen, trace_if_simulated() as trace:
        launch()
    traced = f"traced {trace.bytes_total:>6,} B  " if trace else ""
    err = np.abs(outputs["out"].copy_to_host() - want).max()
    print(f"{v.name:<11} launches {len(seen):>2}  {traced}plan {v.plan(size).bytes_total:>6,} B  max error {err:.1e}")

# %% [markdown]
# ## What a boundary costs, and what each answer removes
# Between two layers a kernel-per-layer chain pays three things: the **drain** (the last blocks of layer l
# finish while most SMs idle), the **launch** (the host issues layer l+1; nothing overlaps it unless it was
# issued ahead), and the **fill** (layer l+1's blocks start, load their weights, and only then compute).
#
# - `fused`: one kernel per layer, bias and GELU in the epilogue (no trip of `W x` through memory), 16-byte
#   weight loads, every load of a thread issued before the first is used. Launched from the host, pre-bound.
# - `graph`: the same launches recorded once in a CUDA graph: the launch cost goes; drain and fill stay.
# - `graph_pdl`: each layer launched with Programmatic Dependent Launch. Its weights do not depend on the
#   layer before, so it loads them **before** `griddepcontrol.wait`, while the layer before still runs:
#   the fill overlaps the drain. Every layer waits before it reads `x_l`; all but the last trigger (the
#   rules of lesson 06: nothing after the chain may start early). The kernel:

# %%
source = inspect.getsource(dk.kernels)
start = source.index("    def decode_layer_pdl")
print(source[start:source.index("    @BACKEND.jit", start)])

# %% [markdown]
# - `persistent`: one cooperative launch; each block takes tiles of every layer, a grid barrier between
#   layers, and the first tile of the next layer's weights is loaded **before** the barrier. The grid must
#   be co-resident (lesson 05): on the simulator, whose grid sync is a block barrier, that is one block.
# - `megakernel`: no barrier at all, next.
#
# ## The megakernel: an instruction table and a counter per layer
# A few blocks per SM (every one resident) each run a row of a table built on the host: `(opcode, layer,
# tile)` per instruction, then `OP_END`. A tile is a few rows of one layer. For each instruction a block
# loads its tile's weights into registers (and asks L2 for the next instruction's), then waits until the
# layer before has counted all its tiles, computes, stores `x_{l+1}` for its rows, and adds 1 to its
# layer's counter. On a GPU tile t of layer l goes to block `(l tiles + t) % blocks`, so consecutive layers
# sit on different blocks and a block idle during layer l already holds its layer-(l+1) weights:

# %%
gpu_table = dk.instruction_table(layers=8, tiles=128, blocks=264, serial=False)  # hidden 1024 on the H200
for blk in (0, 1, 130, 263):
    row = gpu_table[blk]
    ops = row[row[:, 0] == dk.OP_TILE]
    print(f"block {blk:>3}: " + ", ".join(f"L{l}/t{t}" for _, l, t in ops))

# %% [markdown]
# **On the simulator blocks run one after another**, each to its end, so a block may only wait on blocks
# before it: the GPU's table would make block 0 wait for layer-0 tiles that block 1 runs later. There the
# table gives whole layers to blocks in order (`serial=True`), the same kernel code runs, and every wait is
# met at its first poll. `waits_only_on_earlier_blocks` says which tables a serial machine completes:

# %%
print("GPU table on a serial machine:", dk.waits_only_on_earlier_blocks(gpu_table, 128))
print("serial table:                 ", dk.waits_only_on_earlier_blocks(
    dk.instruction_table(layers=8, tiles=128, blocks=264, serial=True), 128))

# %% [markdown]
# ### The protocol, and why the fence and the acquire load matter
# The producer, after its tile's stores (CUTLASS's arrive / wait pattern):
#
#     cuda.syncthreads()                      # every thread of the block has issued its stores
#     if tid == 0: add_release_gpu(counters, l, 1)   # red.release.gpu: those stores are visible GPU-wide first
#
# The consumer, before it reads `x_l`:
#
#     if tid == 0: poll load_acquire_gpu(counters, l - 1) until it reaches the tiles of a layer,
#                  nanosleep between polls, at most spin_limit times (then: an error flag, never a hang)
#     cuda.syncthreads()                      # the block reads x_l only after thread 0's acquire
#
# Take out the **release** (a plain atomic add, no fence) and the count may become visible before the
# stores it announces: a consumer sees "all tiles done" and reads a stale `x_l`. Take out the **acquire**
# (a plain load) and the compiler hoists the load out of the loop (it never sees the new count), or the
# consumer's later reads of `x_l` are served from a stale L1 line. Wait for the **wrong count** (fewer
# tiles than the layer has) and it reads rows not yet written. No run on the simulator shows the first two
# (its memory is one coherent NumPy buffer), and a GPU shows them only sometimes: exercise 1's check reads
# them from the PTX, where the release add, the fence and the acquire load are plain to see.
#
# The bounded wait, made to fail: a table that leaves out one tile of layer 0. Layer 1 waits for a count
# that never comes; the wait gives up, sets a flag in mapped memory, and the host refuses to go on:

# %%
small = w.size(hidden=11, layers=2, batch=1)
geo = dk.geometry(11, 1)
table = decode.megakernel_table(geo, small.layers)
blk, slot = np.argwhere((table[:, :, 0] == dk.OP_TILE) & (table[:, :, 1] == 0))[0]
table[blk] = np.concatenate([np.delete(table[blk], slot, axis=0), [(dk.OP_END, 0, 0)]])
broken = decode.bind_megakernel_with(to_device(w.make_inputs(small, np.random.default_rng(1))),
                                     poisoned(w.output_specs(small)), table=table, spin_limit=1000)
broken()
cuda.synchronize()  # the flag is in mapped memory: the host reads it once the launch has ended
try:
    broken.raise_if_timed_out()  # (every later launch of it refuses too)
except decode.DependencyTimeout as e:
    print(e)

# %% [markdown]
# ### Exercise 1: the protocol
# Write the two device functions the megakernel calls (thread 0 of a block calls each):
# `signal(counters, layer)`, after the block's barrier: one more tile of `layer` is done, and its stores
# must be visible GPU-wide before the count is; `wait(counters, layer, tiles, spin_limit)`: True once
# `counters[layer] >= tiles`, polling with an acquire load and a `nanosleep` between polls; False after at
# most `spin_limit + 1` polls. The intrinsics: `add_release_gpu(a, i, v)` (`red.release.gpu`: a release add),
# `load_acquire_gpu(a, i)` (`ld.acquire.gpu`), `nanosleep(ns)`; `cuda.threadfence()` before a plain
# `cuda.atomic.add` is a release too. The check is the grader's (`kernels-lab grade decode_protocol`, same
# checks and points): signal once (it must add exactly 1); wait with every tile counted (True at once), and
# with one short while a second block counts the last tile later (False, before then: it gave up after
# `spin_limit + 1` polls); the megakernel with yours against float64; and, since no run can show memory
# ordering (the simulator's memory is coherent, a GPU shows a stale read only sometimes), the PTX numba's
# compiler makes of a kernel calling each: the count must be a release (or follow a gpu-scope fence), the poll
# an acquire (or a relaxed read followed by a fence), re-read in the loop. Without the compiler (the `cu13`
# extra) those two are not checked here. On a GPU, check on the simulator first: a wait that never gives up
# and never re-reads its count would hang the GPU.

# %% tags=["stub"]
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    # YOUR CODE: add 1 to counters[layer], after this block's stores are visible GPU-wide (a release add)
    pass


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    # YOUR CODE: poll counters[layer] with an acquire load until it reaches tiles (return True); nanosleep
    # between polls; return False after spin_limit + 1 polls
    return False


# %% tags=["exercise"]
# EXERCISE: decode_protocol
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)  # the block's stores (issued before its barrier) land first


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:  # re-read every time; later reads see the stores
            return True
        nanosleep(32)
        spins += 1
    return False


# %%
print(lessons.check("decode_protocol", globals().get("wait")))  # wait, and the signal beside it

# %% [markdown]
# ### Exercise 2: the floor a pass cannot beat
# At hidden 4096, 8 layers, batch 1, the weights come from DRAM (537 MB, far more than L2). Using the copy
# ceiling measured in the same H200 run (`ceiling` below, GB/s), how many microseconds does one pass need
# at least, to read every weight once?

# %%
bench = lessons.committed("decode_h200.json")
ceiling = bench["meta"]["ceiling_GBs"]
print(f"{bench['meta']['device']}, {bench['meta']['date'][:10]}: copy ceiling {ceiling:.0f} GB/s")

# %% tags=["stub"]
floor_us_4096 = ...  # YOUR ANSWER: microseconds to read 8 layers of 4096 x 4096 float32 weights at the ceiling

# %% tags=["exercise"]
# EXERCISE: decode_weight_floor
floor_us_4096 = 4 * 8 * 4096 ** 2 / (ceiling * 1e9) * 1e6

# %%
recs = [r for r in bench["records"] if r.get("kind") == "decode" and r.get("version") is None]
at = {(r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"], r["variant"]): r for r in recs}
print(lessons.expect("the weight floor at 4096, 8 layers", floor_us_4096, at[4096, 8, 1, "graph"]["floor_us"]))

# %% [markdown]
# ### Exercise 3: what the epilogue saves
# `unfused` writes `z = W x` (batch x hidden floats) to memory, a bias kernel reads it with a bias per
# element and writes it back, a GELU kernel reads it and writes `x_{l+1}`. `fused` does bias and GELU in
# registers and reads each row's bias once. How many more bytes per layer does `unfused` plan than `fused`,
# at hidden 1024 and batch 16? (Count float32 words of `z`, of the bias, of `x_{l+1}`.)

# %% tags=["stub"]
extra_bytes_per_layer = ...  # YOUR ANSWER: bytes per layer, unfused minus fused, hidden 1024, batch 16

# %% tags=["exercise"]
# EXERCISE: decode_epilogue_bytes
extra_bytes_per_layer = 4 * (5 * 16 * 1024 - 1024)

# %%
one = w.size(hidden=1024, layers=1, batch=16)
planned = w.variant("unfused").plan(one).bytes_total - w.variant("fused").plan(one).bytes_total
print(lessons.expect("extra bytes per layer", extra_bytes_per_layer, planned, rel=0.001))

# %% [markdown]
# At batch 1 that is a few KB a layer against 4 MB of weights: the epilogue matters here for its two
# **launches** per layer, not for its bytes.
#
# ## Measured on an H200 (committed results)
# `kernels_lab/topics/decode/bench.py` checked every variant and anchor against float64, then timed each: steady
# state (20 passes back to back between two events, median) and one pass with its launch (host clock to the
# end of a synchronize). Anchors: torch's eager loop (`F.linear` + tanh-GELU per layer), that loop in a
# torch CUDA graph, and `torch.compile(mode="reduce-overhead")` (batch 1, 8 layers). us per pass:

# %%
from kernels_lab.topics.decode.demo import table as bench_table
print(bench_table({"meta": bench["meta"], "records": recs}))

# %% [markdown]
# ![us per pass against the weight bytes of a pass](../figures/decode_h200_us_per_pass.png)
#
# ![batch 1, 8 layers: steady state and one pass with its launch](../figures/decode_h200_batch1.png)
#
# Per layer at batch 1, 8 layers: what each answer removed, read from the steady-state times (the launch
# from fused to graph, the fill from graph to graph_pdl), and where the one-launch variants land:

# %%
for hidden in (1024, 2048, 4096):
    t = {v: at[hidden, 8, 1, v]["us_per_pass"] / 8 for v in ("fused", "graph", "graph_pdl", "persistent", "megakernel")}
    floor = at[hidden, 8, 1, "graph"]["floor_us"] / 8
    print(f"hidden {hidden}: us per layer: floor {floor:5.2f}  fused {t['fused']:6.2f}  graph {t['graph']:6.2f} "
          f"(launch {t['fused'] - t['graph']:5.2f})  graph_pdl {t['graph_pdl']:6.2f} (fill {t['graph'] - t['graph_pdl']:5.2f})"
          f"  persistent {t['persistent']:6.2f}  megakernel {t['megakernel']:6.2f}")

# %% [markdown]
# ## What limited the megakernel: its own clock
# The benchmark ran the megakernel once more with `%globaltimer` stamps: per tile when it started, when
# its wait let it go, and when its count was added. Per layer: grey from its first tile's start to the
# first tile let go (weights loading, waiting on the layer before), colour from there to its last tile
# counted:
#
# ![the megakernel's layers, from its own stamps](../figures/decode_h200_timeline.png)

# %%
for r in recs:
    if r["variant"] == "megakernel" and r.get("timeline"):
        spans = r["timeline"]
        handoff = np.median([b["first_go_us"] - a["end_us"] for a, b in zip(spans, spans[1:])])
        work = np.median([s["end_us"] - s["first_go_us"] for s in spans[1:]])
        print(f"hidden {r['size']['hidden']}: layer to layer handoff (last count -> first go) {handoff:5.2f} us; "
              f"a layer from its first go to its last count {work:6.2f} us (median)")

# %% [markdown]
# At hidden 1024 the counters hand a layer over in a fraction of a microsecond; what remains per layer is
# the tile after its wait: read all of `x_l` from L2, reduce, store, and release (wait for the stores to be
# acknowledged). Those are the round trips a kernel boundary under PDL pays too, and PDL also lets the
# next layer's blocks load their weights early. So here graphs + PDL match or beat the megakernel, as the
# published counterpoint found on an H200 (CUDA graphs with PDL within 4.6% of a Llama megakernel).
#
# **When not to write one.** A megakernel owns its scheduling: the table, residency (every block must be
# on the GPU at once, or a wait never ends), the memory ordering of every dependency, and a bounded wait
# with an error path. It pays where a boundary costs more than a handoff: many small dependent steps whose
# data stay on chip, or work a launch cannot overlap. For a chain of layers that each stream their own
# weights, measure first: a graph of well-fused kernels with PDL is most of the way there.
