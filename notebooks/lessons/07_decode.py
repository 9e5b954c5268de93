# %% [markdown]
# # 07 Decode: a chain of dense layers, from a launch per op to a megakernel
#
# **Goals:** know what a kernel boundary between two dependent layers costs (the drain, the host's issue
# of the next launch, the GPU's own boundary, the fill) and which answer removes which part: fusion
# inside a layer (the epilogue), a CUDA graph, PDL's prologue overlap, a persistent kernel, and a
# megakernel with an instruction table and a counter per layer; see a dependency protocol without its
# release or its acquire give wrong answers, and write a right one; and read on a GPU where this
# megakernel loses to graphs + PDL, and what two tiles in flight per block win back.
#
# **Sources.** Hazy Research, [*Look Ma, No Bubbles! Designing a Low-Latency Megakernel for
# Llama-1B*](https://hazyresearch.stanford.edu/blog/2025-05-27-no-bubbles) (2025); M. Saroufim,
# [megakernels-vs-cuda-graphs](https://github.com/msaroufim/megakernels-vs-cuda-graphs) (the
# counterpoint); the CUDA Programming Guide, [Programmatic Dependent
# Launch](https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/programmatic-dependent-launch.html);
# the PTX ISA, [memory consistency
# model](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#memory-consistency-model) and
# [griddepcontrol](https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#parallel-synchronization-and-communication-instructions-griddepcontrol);
# CUTLASS's [`barrier.h`](https://github.com/NVIDIA/cutlass/blob/main/include/cutlass/barrier.h); the
# memory-model primer, `docs/memory-model.md` (*Memory model* on the lesson site).
#
# The workload (`kernels_lab/topics/decode/workload.py`, kernels in `kernels_lab/topics/decode/kernels.py`),
# float32:
#
#     x_{l+1} = gelu(W_l x_l + b_l)      l = 0 .. layers-1;  W_l: hidden x hidden;  x: batch x hidden
#
# A decode step of a language model at batch 1 is this shape: every layer streams its own weights
# (`4 hidden^2` bytes) for `2 hidden^2 batch` flops, and cannot start its sums before the layer before has
# finished. Where the weights exceed L2 they set a floor: read once per pass from DRAM, at the copy
# ceiling. Everything else is overhead.

# %%
import inspect
import textwrap
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
# (hidden 1024, 8 layers, batch 1) `unfused` also sends `W x` through memory to a bias kernel and a GELU
# kernel; the others keep it in registers (the epilogue). Every variant but `unfused` reads each weight
# once: they differ in what sits between two layers. (The plans of this back-end: the megakernel's table,
# and so its bytes, depend on how many blocks it runs.)

# %%
head = w.size(hidden=1024, layers=8, batch=1)
weights = 4 * head.layers * head.hidden ** 2
print(f"{head}: weights {weights / 2**20:.0f} MiB a pass")
for v in w.variants.values():
    plan = v.plan(head)
    print(f"{v.name:<17} {plan.n_launches:>3} launch(es) {plan.bytes_total / 2**20:6.1f} MiB planned")
    print(textwrap.fill(v.about, 96, initial_indent="    ", subsequent_indent="    "))

# %% [markdown]
# The planned bytes are more than the weights: every row's threads read all of `x_l` (from L1 after the
# first), and the megakernels read their instruction table. Those are cache hits; the weights are what
# comes from DRAM, or from L2 where a pass's weights fit in it (the L2 of the run's GPU, from its meta):

# %%
from kernels_lab.topics.decode import figures
bench = figures.as_drawn(lessons.committed("decode_h100.json"))  # the study's records, us per pass derived
l2 = bench["meta"].get("l2_bytes") or int(bench["meta"]["device"].split(" MiB L2")[0].split()[-1]) * 2**20
for hidden, layers in ((1024, 8), (1024, 16), (2048, 8)):
    pass_bytes = 4 * layers * hidden ** 2
    print(f"hidden {hidden}, {layers:>2} layers: weights {pass_bytes / 2**20:4.0f} MiB a pass, "
          f"{'in' if pass_bytes <= l2 else 'more than'} the {l2 / 2**20:.0f} MiB L2")

# %% [markdown]
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
    print(f"{v.name:<17} launches {len(seen):>2}  {traced}plan {v.plan(size).bytes_total:>6,} B  "
          f"max error {err:.1e}")

# %% [markdown]
# ## What a boundary costs, and what each answer removes
# Between two layers a kernel-per-layer chain pays: the **drain** (the last blocks of layer l finish
# while most SMs idle), the **host's issue** of layer l+1 (when the host launches kernel by kernel and
# cannot keep ahead of the GPU), the **GPU's boundary** (it retires layer l and starts layer l+1: paid
# even when every launch is queued ahead), and the **fill** (layer l+1's blocks start, load their
# weights, and only then compute).
#
# - `fused`: one kernel per layer, bias and GELU in the epilogue (no trip of `W x` through memory), 16-byte
#   weight loads, every load of a thread issued before the first is used. Launched from the host, pre-bound.
# - `graph`: the same launches recorded once in a CUDA graph and replayed: the host's share of each launch
#   goes (lesson 06); the GPU's boundary, the drain and the fill stay. What stays, from lesson 02's ladder:

# %%
replay = next(r for r in lessons.committed("ladder_h200.json")["records"]
              if r["path"] == "CUDA graph replay, 4 array args")
print(f"replayed from a graph, a kernel still costs the GPU {replay['device_us_per_boundary']:.2f} us per boundary")

# %% [markdown]
# - `graph_pdl`: each layer launched with Programmatic Dependent Launch, which "allows a dependent
#   secondary kernel to launch before the primary kernel it depends on in the same CUDA stream has finished
#   executing" (CUDA guide). Its weights do not depend on the layer before, so it loads them **before**
#   `griddepcontrol.wait` (PTX ISA), while the layer before still runs: the fill overlaps the drain. Every
#   layer waits before it reads `x_l`; all but the last trigger (the rules of lesson 06: nothing after the
#   chain may start early). The kernel:

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
# A few blocks per SM each run a row of a table built on the host: `(opcode, layer, tile)` per
# instruction, then `OP_END`. A tile is a few rows of one layer. For each instruction a block loads its
# tile's weights into registers (and asks L2 for the next instruction's), then waits until the layer
# before has counted all its tiles, computes, stores `x_{l+1}` for its rows, and adds 1 to its layer's
# counter.
#
# A waiting block keeps its SM slot while it polls, so every block must be resident at once: a block
# waiting on a tile whose block never got an SM would wait for ever (here: until its bounded wait gives
# up). A normal launch promises nothing of the kind. The grid is sized by the occupancy query
# (`BACKEND.persistent_grid`: at most the blocks that fit at once), so on an otherwise idle GPU they all
# start; only a cooperative launch guarantees it (it refuses a grid that cannot be co-resident), and
# `persistent`, whose grid barrier needs the same, uses one.
#
# On a GPU tile t of layer l goes to block `(l tiles + t) % blocks`. Where a layer has fewer tiles than
# there are blocks, consecutive layers land on different blocks, and a block idle during layer l already
# holds its layer-(l+1) weights; where it has more, every block runs tiles of every layer. The run's
# tiles (from each megakernel's tile size) and blocks:

# %%
mk = {(r["size"]["hidden"], r["variant"]): r for r in bench["records"]
      if r.get("kind") == "decode" and (r["size"]["layers"], r["size"]["batch"]) == (8, 1)}
gpu_tables = {}
for hidden in (1024, 2048, 4096):
    r = mk[hidden, "megakernel"]
    tiles = -(-hidden // (r["residency"]["tile_bytes"] // (4 * hidden)))
    gpu_tables[hidden] = (dk.instruction_table(layers=8, tiles=tiles, blocks=r["blocks"], serial=False), tiles)
    both = sum({0, 1} <= set(row[row[:, 0] == dk.OP_TILE][:, 1]) for row in gpu_tables[hidden][0])
    print(f"hidden {hidden}: {tiles:>4} tiles a layer on {r['blocks']} blocks: {both:>3} blocks run tiles of "
          f"both layer 0 and layer 1")
for blk in (0, 1, 130, 263):  # hidden 1024
    row = gpu_tables[1024][0][blk]
    ops = row[row[:, 0] == dk.OP_TILE]
    print(f"hidden 1024, block {blk:>3}: " + ", ".join(f"L{l}/t{t}" for _, l, t in ops))

# %% [markdown]
# **On the simulator blocks run one after another**, each to its end, so a block may only wait on blocks
# before it: the GPU's table would make block 0 wait for layer-0 tiles that block 1 runs later. There the
# table gives whole layers to blocks in order (`serial=True`), the same kernel code runs, and every wait is
# met at its first poll. `waits_only_on_earlier_blocks` says which tables a serial machine completes:

# %%
gpu_table, tiles = gpu_tables[1024]
print("GPU table on a serial machine:", dk.waits_only_on_earlier_blocks(gpu_table, tiles))
print("serial table:                 ", dk.waits_only_on_earlier_blocks(
    dk.instruction_table(layers=8, tiles=tiles, blocks=gpu_table.shape[0], serial=True), tiles))

# %% [markdown]
# ### The protocol, and why the fence and the acquire load matter
# The producer, after its tile's stores (the arrive / wait pattern of CUTLASS's `Barrier`: its `arrive_inc`
# is a `__syncthreads()`, then thread 0's `fence.acq_rel.gpu` and a relaxed `red.add`; its `wait_eq` spins
# on `ld.global.acquire.gpu`, then `__syncthreads()`):
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
# (a plain load) and the compiler may hoist the load out of the loop (it never sees the new count), or
# the consumer's later reads of `x_l` are served from a stale L1 line. Wait for the **wrong count** (fewer
# tiles than the layer has) and it reads rows not yet written. The rules are the PTX memory model's
# (release, acquire, their scope `.gpu`, and a fence's cumulativity through the barrier); the primer
# `docs/memory-model.md` shows each one breaking. On a GPU the first two usually give right answers
# anyway, so a run there proves little; exercise 1 shows them failing in the simulator's weak-memory
# mode.
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
# ### Exercise 1: which protocols break, and why
# The megakernel's blocks talk through global memory: a producer stores its tile of `x_{l+1}`, then counts
# it (`signal`); a consumer polls the count (`wait`), then reads `x_l`. Below are three versions of the
# pair. On a GPU all three usually give the right answer, which is exactly why ordering bugs survive. The
# simulator's **weak-memory mode** (`BACKEND.weak_memory(seed)`, `kernels_lab/sim_weak.py`) behaves as the
# PTX memory model allows a GPU to: a block's plain stores wait in a buffer until a fence or a release
# drains them, and a block reads other blocks' data as of its last acquire, so a value may be served stale
# (as from an L1 line cached before the producer's stores landed). The seed decides what is random, and the
# same seed gives the same run. The rules, with their sources (PTX ISA, CUDA guide, CUTLASS's barrier) and
# a small example of each: `docs/memory-model.md` (*Memory model* on the lesson site).

# %%
from kernels_lab.topics.decode import diagnosis

for name in diagnosis.PROTOCOLS:
    print(f"--- protocol {name}\n{diagnosis.source(name)}")

# %% [markdown]
# Each protocol runs the megakernel (hidden 16, 4 layers, batch 1: the simulator's table gives layers 0-1 to
# block 0 and layers 2-3 to block 1, so block 1 reads what block 0 wrote) in weak memory, under seeds 0, 1
# and 2, against float64. (On a GPU this cell runs them on the simulator, in a child process: the weak mode
# is the simulator's.)

# %%
outcomes = diagnosis.run((0, 1, 2))
print(diagnosis.show([o for o in outcomes if o.seed == 0]))

# %% [markdown]
# `nan` is memory no store had reached: the mode fills new device arrays with NaN, as a GPU's are
# uninitialised. "stale reads: acts" counts the reads of `x_l` that were served an old value, "counters"
# the polls that were. For each protocol, say whether it is `"right"` or where its ordering bug is:
# `"signal"` (the stores of the tile are not released before the count) or `"wait"` (the reads of `x_l` are
# not ordered after the poll that saw the count).

# %% tags=["stub"]
diagnosis_answer = {"A": ..., "B": ..., "C": ...}  # YOUR ANSWER: "right", "signal" or "wait" for each

# %% tags=["exercise"]
# EXERCISE: decode_diagnosis
diagnosis_answer = {"A": "signal", "B": "right", "C": "wait"}

# %%
verdict = diagnosis.check(diagnosis_answer, outcomes)
assert verdict.correct, str(verdict)
print(verdict)

# %% [markdown]
# ### Exercise 2: the protocol
# Write the two device functions the megakernel calls (thread 0 of a block calls each):
# `signal(counters, layer)`, after the block's barrier: one more tile of `layer` is done, and its stores
# must be visible GPU-wide before the count is; `wait(counters, layer, tiles, spin_limit)`: True once
# `counters[layer] >= tiles`, polling with an acquire load and a `nanosleep` between polls; False after at
# most `spin_limit + 1` polls. The intrinsics: `add_release_gpu(a, i, v)` (`red.release.gpu`: a release add),
# `load_acquire_gpu(a, i)` (`ld.acquire.gpu`), `nanosleep(ns)`; `cuda.threadfence()` before a plain
# `cuda.atomic.add` is a release too. The check is the grader's (`kernels-lab grade decode_protocol`, same
# checks and points): signal once (it must add exactly 1); wait with every tile counted (True at once), and
# with one short while a second block counts the last tile later (False, before then: it gave up after
# `spin_limit + 1` polls); the megakernel with yours against float64; the same megakernel in weak memory
# (seeds 0 and 1: a missing fence or acquire shows, as in exercise 1); and the PTX numba's compiler makes of
# a kernel calling each: the count must be a release (or follow a gpu-scope fence), the poll an acquire (or
# a relaxed read followed by a fence), re-read in the loop. Without the compiler (the `cu13` extra) those
# two are judged by weak-memory runs instead, and the check says so. On a GPU, check on the simulator
# first: a wait that never gives up and never re-reads its count would hang the GPU.

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
# ### Exercise 3: the floor a pass cannot beat
# At hidden 4096, 8 layers, batch 1, the weights come from DRAM (537 MB, far more than L2). Using the copy
# ceiling measured in the same run (`ceiling` below, GB/s), how many microseconds does one pass need
# at least, to read every weight once?

# %%
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
# ### Exercise 4: what the epilogue saves
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
# At batch 1 that is a few KB a layer against 4 MiB of weights: the epilogue matters here for its two
# **launches** per layer, not for its bytes.
#
# ## Measured on a GPU (committed results)
# `kernels-lab bench decode` (the topic's study) checked every variant and anchor against float64, then timed
# each on two clocks: the steady state (passes back to back between two events, about 2 ms of them, median)
# and one pass with a cold L2 (events around a single pass after a flush, median). Anchors: torch's eager loop (`F.linear` + tanh-GELU per layer), that loop in a
# torch CUDA graph, and `torch.compile(mode="reduce-overhead")` (batch 1, 8 layers). us per pass, and
# the DRAM floor (the weights at the copy ceiling) where a pass's weights exceed L2:

# %%
from kernels_lab.topics.decode.demo import table as bench_table
print(bench_table({"meta": bench["meta"], "records": recs}))

# %% [markdown]
# ![us per pass against the weight bytes of a pass](../figures/decode_h100_us_per_pass.png)
#
# ![batch 1, 8 layers: steady state and one pass with its launch](../figures/decode_h100_batch1.png)
#
# Per layer at batch 1, 8 layers, each difference of steady-state times named for what it measures
# (`figures.layer_gaps`): `host_issue` = fused - graph (what the host's launch path adds per kernel when
# it cannot keep ahead of the GPU; the GPU's own boundary is in both), `pdl_overlap` = graph - graph_pdl
# (the part of each boundary PDL hides: the next layer launched and loading its weights while this one
# drains), `boundary_left` = graph_pdl - megakernel (what the megakernel's counters save on what PDL
# leaves; negative: the megakernel is slower). The weights' DRAM floor per layer only where they exceed L2:

# %%
from kernels_lab.topics.decode import figures
for hidden in (1024, 2048, 4096):
    t = {v: at[hidden, 8, 1, v]["us_per_pass"] / 8 for v in ("graph_pdl", "persistent", "megakernel")}
    first = at[hidden, 8, 1, "graph"]
    floor = "in L2" if figures.in_l2(first, bench["meta"]) else f"{first['floor_us'] / 8:.2f} us"
    gaps = "  ".join(f"{k} {v:+5.2f}" for k, v in figures.layer_gaps(recs, hidden).items())
    print(f"hidden {hidden} (DRAM floor {floor}), us per layer:\n    {gaps}\n    "
          + "  ".join(f"{v} {t[v]:.2f}" for v in t))
pairs = {c[:3]: (at[c[:3] + ("graph_pdl",)]["us_per_pass"], at[c[:3] + ("megakernel",)]["us_per_pass"])
         for c in at if c[3] == "megakernel"}
ahead = sorted(f"{h}/{l}/{b}" for (h, l, b), (pdl, mega) in pairs.items() if mega < pdl)
print(f"graph_pdl faster than the megakernel at {len(pairs) - len(ahead)} of {len(pairs)} sizes;\n"
      f"the megakernel faster at (hidden/layers/batch): {', '.join(ahead) or 'none'}")
batch1 = [(pdl, mega) for (h, l, b), (pdl, mega) in pairs.items() if b == 1]
print(f"at batch 1, graph_pdl faster at {sum(p < m for p, m in batch1)} of {len(batch1)} sizes")

# %% [markdown]
# ## What limited the megakernel: its own clock
# The benchmark ran the megakernel once more with `%globaltimer` stamps: per tile when it started, when
# its wait let it go, and when its count was added. Per layer: grey from its first tile's start to the
# first tile let go (weights loading, waiting on the layer before), colour from there to its last tile
# counted:
#
# ![the megakernel's layers, from its own stamps](../figures/decode_h100_timeline.png)

# %%
stamps_ns = [round(v * 1e3) for r in recs if r.get("timeline") for span in r["timeline"]
             for k, v in span.items() if k != "layer"]
tick = int(np.gcd.reduce(stamps_ns))
print(f"every stamp is a multiple of {tick} ns: the global timer's step on this GPU")
for r in recs:
    if r["variant"] == "megakernel" and r.get("timeline"):
        spans = r["timeline"]
        handoffs = [b["first_go_us"] - a["end_us"] for a, b in zip(spans, spans[1:])]
        work = np.median([s["end_us"] - s["first_go_us"] for s in spans[1:]])
        print(f"hidden {r['size']['hidden']}: handoff (last count -> first go) {np.median(handoffs):.2f} us median, "
              f"{max(handoffs) * 1e3 / tick:.0f} tick(s) at most;\n    a layer from its first go to its last "
              f"count {work:.2f} us (median)")

# %% [markdown]
# The median handoff is one step of the timer, below what this clock resolves: two stamps one step apart
# may lie anywhere from 0 to 2 steps apart in time. What the stamps do show is that the counters' handoff
# is not where the time goes. What remains per layer is the tile after its wait: read all of `x_l` from L2,
# reduce, store, and release (wait for the stores to be acknowledged). Those are round trips a kernel
# boundary under PDL pays too, and PDL also lets the next layer's blocks load their weights early.
#
# ## Hidden 4096: where the megakernel's bytes stall
# At hidden 4096 every layer's weights (64 MiB) come from DRAM, and a pass is a stream. By Little's law a
# stream reaches the copy ceiling only while `ceiling x latency` bytes are in flight, so what matters is
# how many weight bytes each SM has asked for at once. The megakernel's block holds one tile in registers
# and runs **load -> wait -> compute -> release** for it: the next tile's loads can only go into the
# registers once this tile's sums are done, so once this tile has landed, through the rest of the wait,
# the sums, the stores and the release round trip, the block has only the next tile's L2 prefetch in
# flight. `graph_pdl`'s blocks also hold one
# tile, but each block ends after its tile and another, of this layer or (with PDL) already of the next,
# starts in its place and issues its weight loads before it waits.
#
# The fix tried: **two tiles in flight** per block (`megakernel_db`: two register buffers of half the
# size; the next tile's weights load while this one waits, computes and releases; one poll per layer and
# one release add per run of a block's tiles). The study's `deficit` group timed it and a sweep of its
# layouts at hidden 4096 in the same run: residency from the compiled kernels, bytes in flight per SM
# from the model (`occupancy.py`: the most an SM can have asked for at once, not what it keeps asked for;
# the one-tile megakernel reaches it only between issuing a tile's loads and using them), fraction of the
# copy ceiling:

# %%
print(figures.deficit_table(bench))
kinds = ("megakernel", "megakernel_db", "megakernel_db_p0", "graph_pdl")
print("\nhidden 4096, of the copy ceiling (same run): "
      + ", ".join(f"{v} {mk[4096, v]['of_ceiling']:.2f}" for v in kinds))
print(f"one layer's weights at the ceiling: {mk[4096, 'megakernel']['floor_us'] / 8:.1f} us")
for v in ("megakernel", "megakernel_db"):
    ends = [span["end_us"] for span in mk[4096, v]["timeline"]]
    print(f"{v:<14} a layer every {np.median(np.diff(ends)):5.1f} us (median, its own stamps)")

# %% [markdown]
# The same study ran on an H200 (`figures/data/decode_h200.json`, the same command), a GPU with faster
# memory and a larger L2; at hidden 4096 the same four lines, as a share of that GPU's copy ceiling:

# %%
h200 = figures.as_drawn(lessons.committed("decode_h200.json"))
at = {r["variant"]: r for r in h200["records"]
      if (r["size"]["hidden"], r["size"]["layers"], r["size"]["batch"]) == (4096, 8, 1) and r.get("of_ceiling")}
print(f"{h200['meta']['device']}, hidden 4096, 8 layers, batch 1, of the copy ceiling: "
      + ", ".join(f"{v} {at[v]['of_ceiling']:.2f}" for v in kinds))

# %% [markdown]
# Two tiles in flight per block close most of the gap to `graph_pdl`. Asking L2 for more tiles beyond the
# two made it no faster (`megakernel_db_p2`) or slower (`_p4`), and asking for none was fastest, within a
# hair of `graph_pdl`: `megakernel_db_p0`, registered as a variant of the workload. The table shows that
# order; this run does not show its cause. One block an SM with two tiles (`_db_1sm`) came close to `_p0`;
# one with 64 KB tiles (`_rt64`) did not. (The H200 run, `decode_h200.json`, has `_db_1sm` behind
# `megakernel_db`: at this distance from the ceiling, the order of the close ones is not a property of the
# kernel alone.)
#
# **What the published work found.** Hazy Research's Llama-1B megakernel (*Look Ma, No Bubbles!*) used
# 78% of an H100's memory bandwidth where vLLM and SGLang used at most 50%, and ran more than 1.5x
# faster; they measured about 1.3 us per kernel launch even inside a CUDA graph. Saroufim's counterpoint
# (*megakernels-vs-cuda-graphs*) put CUDA graphs + PDL beside megakernels and found them "roughly on par":
# the megakernel still ahead, by 0.7% on an H100 (Llama-1B: 972.8 us against 979.5 us with graphs + PDL)
# and 4.6% on an H200 (759.8 against 794.7 us). On this chain of dense layers, with a megakernel far
# simpler than Hazy's, the lines above say where graphs + PDL are ahead.
#
# ## Where a megakernel wins: dependencies a kernel boundary cannot express
# In the dense chain every tile of layer l+1 reads **all** of layer l, so a counter handoff and a kernel
# boundary wait for the same thing. `kernels_lab/topics/block_chain/` changes one fact: each unit reads
# only its own group of units and the groups on either side (a banded, locally connected layer). A tile of
# layer l+1 then waits on three counters, not on the whole layer: it can start while the far side of
# layer l is still running, and layers overlap as a wavefront. A kernel boundary cannot say "three tiles";
# it waits for all of them. Variants: `unfused` (three kernels a layer), `fused` (one), `graph`,
# `graph_pdl`, `megakernel` (a counter per tile, release/acquire as above) and `megakernel_marked` (each
# value stored with its layer's mark in one 64-bit word, so the poll reads the data itself: no counter,
# no fence). The weights (a few MB) sit in L2: a pure latency chain. Measured on the H200
# (`kernels-lab bench block_chain`; ratios are the other line's time over this one's, above 1: faster):

# %%
from kernels_lab.topics.block_chain.figures import tables as chain_tables
chain = lessons.committed("block_chain_h200.json")
print(chain["meta"]["device"], "|", chain["meta"]["command"])
print(chain_tables([r for r in chain["records"] if r.get("us_per_pass") and r["group"] != "grid"]))  # the grid sweep: the H100's, below

# %% [markdown]
# ![block chain: a kernel boundary per layer against a counter per tile](../figures/block_chain_h200_time.png)
#
# Read the ratio columns at 8 layers: where a tile waits on three tiles, not a layer, the marked megakernel
# beats graph + PDL at both widths and torch's CUDA graph by more; the counter megakernel beats torch's
# graph but only ties graph + PDL (after its poll it reads the inputs again: a second trip to L2 that the
# marked kernel's poll already made). The second table splits a pass: the marked kernel's cost per layer
# (the slope from 1 to 8 layers) is the lowest of all, and grows a little with the width. With one layer
# the single fused kernel wins: there is no boundary to save, and a persistent grid pays for its size.
#
# **Why a layer seems to cost more at the wider width: the grid sweep.** A second run, on an H100
# (`kernels-lab bench block_chain --group grid`), put both megakernels on their full grid (a block for every (layer, tile)
# where that many fit at once, every one loading its weights and then waiting) and on 1/2 and 1/4 of it,
# where each block runs 2 or 4 tiles of a layer in turn, beside graph + PDL, at 1 and 8 layers. The cost
# of a layer is the slope (t_8 - t_1) / 7 of the steady-state times:

# %%
grid = lessons.committed("block_chain_grid_h100.json")
t = {(r["line"], r["size"]["hidden"], r["size"]["layers"]): r["us_per_pass"] for r in grid["records"]
     if r.get("us_per_pass")}
print(grid["meta"]["device"])
print(f"{'us per layer, hidden':<25}{'1024':>7}{'2048':>7}{'2048 - 1024':>13}")
for line in dict.fromkeys(k[0] for k in t):
    per = [(t[line, h, 8] - t[line, h, 1]) / 7 for h in (1024, 2048)]
    print(f"{line:<25}" + "".join(f"{p:7.2f}" for p in per) + f"{per[1] - per[0]:+13.2f}")
for h in (1024, 2048):
    print(f"hidden {h}, 8 layers: graph_pdl / megakernel_marked {t['graph_pdl', h, 8] / t['megakernel_marked', h, 8]:.2f}x")

# %% [markdown]
# ![both megakernels on their full grid and on 1/2 and 1/4 of it](../figures/block_chain_grid_h100_time.png)
#
# Read the first two columns: halving the grid doubles the cost of a layer and quartering it quadruples it.
# A layer costs what one tile costs from its wait to its release (its inputs from L2, its sums, its
# stores): the tiles of a layer run side by side only because each has a block of its own, and a block
# holding two tiles runs them one after the other. So fewer blocks is no fix. The last column is what the
# width adds: largest for the marked kernel on its full grid, and mostly gone on half of it. On the full
# grid at hidden 2048 there are twice as many blocks as at 1024 (twice the tiles, each with its block),
# most of them polling for a later layer on the same SMs as the tiles that compute, and the marked kernel's
# pollers read the data words themselves, 16 bytes a thread at a time, where the counter megakernel's three
# threads read one counter each. Do those pollers slow the tiles that compute? A guess; the stamps below
# test it.
#
# **The per-tile timeline.** `python -m kernels_lab.topics.block_chain.stamps OUT.json 1024 2048` runs each
# megakernel (checked against float64 first) with thread 0 of every (layer, tile) reading `%globaltimer`
# four times: at its start, when its three producers' counts (or marked words) have all been seen, before
# its release and after it. From 200 passes: a layer's **step** (its last tile released, minus the layer
# before's), the **hand-off** (the last of a tile's producers about to release, to the tile let go: the
# protocol's own latency), **work** (inputs, sums, stores) and **release**; and **fill**, when the last
# block of the grid made its first stamp. The stamps cost little (the two us-a-pass columns, same clock):

# %%
tiles = lessons.committed("block_chain_tiles_h100.json")
print(tiles["meta"]["device"], "|", tiles["meta"]["command"])
print(f"{'line':<19}{'hidden':>6}{'blocks':>7}{'us/pass':>8}{'stamped':>8}{'layer 0':>8}{'step':>6}{'hand-off':>9}"
      f"{'work':>6}{'release':>8}{'fill':>6}")
for r in tiles["records"]:
    one = np.asarray(r["pass_us"])  # the median pass: (layers, tiles, 4)
    print(f"{r['line']:<19}{r['size']['hidden']:>6}{r['blocks']:>7}{r['us_per_pass']:8.2f}{r['us_per_pass_stamped']:8.2f}"
          f"{r['done_us'][0]:8.2f}{np.mean(np.diff(r['done_us'])):6.2f}{r['handoff_us']:9.2f}"
          f"{np.mean(r['phases_us']['work'][1:]):6.2f}{np.mean(r['phases_us']['release'][1:]):8.2f}"
          f"{one[..., 0].max():6.2f}")

# %% [markdown]
# ![one pass of each megakernel, tile by tile](../figures/block_chain_tiles_h100_tiles.png)
#
# Read the step, hand-off and work columns across the two widths: they hardly move. The tiles that
# compute are not slowed by twice as many pollers. What grows with the width is the start: layer 0 ends
# later, and the fill column (also the late grey bars at the top of the hidden-2048 panels) shows the
# grid's last blocks starting well after its first. A block per (layer, tile) is 8 x 64
# blocks at hidden 2048, four to an SM, and a GPU places a launch's blocks over time; every block also
# loads its weights at once, as the pollers of the later layers begin to poll. So the width penalty is a
# fill cost, paid once a pass, and it is what the slope (t_8 - t_1) / 7 above counted as a per-layer cost:
# the one-layer runs have 8 times fewer blocks to place. Inside a layer, the marked kernel's
# advantage is where the figure puts it: its work is shorter (the inputs arrived with the poll: no second
# L2 round trip after the flag) and its release is an ordinary store.
#
# The same H100 ran the whole study minutes later (`kernels-lab bench block_chain`, steady-state clock):

# %%
same = lessons.committed("block_chain_h100.json")
steady = {(r["line"], r["size"]["hidden"], r["size"]["layers"]): r["time_ms_steady"] * 1e3
          for r in same["records"] if r["group"] != "grid" and r.get("time_ms_steady")}  # grid: the block-count sweep
for h in (1024, 2048):
    m = steady["megakernel_marked", h, 8]
    print(f"hidden {h}, 8 layers: megakernel_marked {m:.1f} us a pass; graph_pdl / it "
          f"{steady['graph_pdl', h, 8] / m:.2f}x, torch's CUDA graph / it {steady['torch_graph', h, 8] / m:.2f}x")

# %% [markdown]
# At 8 layers the two GPUs agree: the marked megakernel leads graph + PDL at both widths on each. (The H200
# file holds a grid sweep too, not printed here; its width cost does not split by grid size as the H100's
# does.) Not tried here:
# placing fewer blocks (a block that runs the tiles of several layers, polling for a later one only when
# its turn is near), which the fill column says is where the width's cost is.
#
# **When not to write one.** A megakernel owns its scheduling: the table, residency (every block on the
# GPU at once, or a wait never ends), the memory ordering of every dependency, and a bounded wait with
# an error path. It pays where a boundary costs more than a handoff: many small dependent steps whose
# data stay on chip, or work a launch cannot overlap. For a chain of layers that each stream their own
# weights, measure first: a graph of well-fused kernels with PDL is most of the way there.
