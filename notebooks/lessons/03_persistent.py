# %% [markdown]
# # 03 Persistent kernels
#
# **Goals:** write a grid-stride kernel whose grid is sized to the machine, not the data; see a resident
# kernel serve a host-fed queue; and know the dangers: hoisted loads, unbounded spins, grids that cannot
# all be resident, and frees that wait for a GPU that never goes idle.

# %%
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
print(lessons.setup())

# %% [markdown]
# ## A grid sized to the machine
# `BACKEND.persistent_grid` asks the occupancy calculator how many blocks fit per SM and multiplies by the
# SMs (1056 blocks of 256 on an H200). The kernel loops: `i += cuda.gridsize(1)`.

# %%
from kernels_lab.topics.elementwise import workload as E
print("persistent grid here:", E._persistent_blocks(), "blocks of", E.BLOCK)


# %% [markdown]
# ### Exercise 1: write it persistent
# `persistent_chain(x, b, alpha, out)` must be right for **any** grid: the check launches it with
# 2 x 64, 3 x 32 and 1 x 128 threads on up to 1031 elements. It computes lesson 01's chain,
# `out[i] = alpha * gelu(x[i] + b[i])`, with the tanh GELU
# `gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))`.

# %% tags=["stub"]
@cuda.jit
def persistent_chain(x, b, alpha, out):
    # YOUR CODE: start at cuda.grid(1), step by cuda.gridsize(1)
    pass


# %% tags=["exercise"]
# EXERCISE: persistent_chain
import math

@cuda.jit
def persistent_chain(x, b, alpha, out):
    i = cuda.grid(1)
    while i < out.size:
        h = x[i] + b[i]
        u = np.float32(math.sqrt(2 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        out[i] = alpha * (h / (np.float32(1) + math.exp(np.float32(-2) * u)))
        i += cuda.gridsize(1)


# %%
print(lessons.check("persistent_chain", globals().get("persistent_chain")))

# %% [markdown]
# ## A kernel that never exits: the persistent consumer
# The host writes requests into a ring in mapped host memory; a resident kernel polls it with `.sys`
# loads the compiler cannot hoist, answers with one 8-byte store (value and mark together), and waits
# again. Two protocols: `seq` polls one word per slot, then reads the payload (two PCIe round trips);
# `ll` (NCCL's low-latency protocol) puts the ticket's mark in every 8-byte payload word, so the poll
# *is* the payload read (one round trip, twice the bytes): it wins for small payloads. A request is
# one call into machine code that releases the GIL (`kernels_lab/topics/consumer/hostpath.py`): take a ticket with an
# atomic compare-and-swap, publish, wait for the answer, collect it; no Python lock on the way. Every wait is bounded by an idle budget. On the simulator the kernel
# runs on a Python thread with one block.

# %%
from kernels_lab.topics.consumer import PersistentConsumer, reference
rng = np.random.default_rng(0)
weights = rng.standard_normal(64).astype(np.float32)
with PersistentConsumer(weights, slots=2, idle_timeout_s=30) as c:
    for _ in range(3):
        p = rng.standard_normal(64).astype(np.float32)
        print(f"answer {c.result(c.submit(p, timeout=30), timeout=30):+.4f}   reference {reference(p, weights):+.4f}")
print(c.status())

# %% [markdown]
# On the H200 (committed results): the round trip of a request through the resident kernel against one
# launch per request.

# %%
import os
path = lessons.DATA / "consumer_h200.json"
if path.exists():
    recs = [r for r in lessons.committed("consumer_h200.json")["records"] if r["producers"] == 1]
    for r in recs:
        print(f"{r['mode']:<14} {r['payload_bytes']:>6} B  p50 {r['p50_us']:6.1f} us   p99 {r['p99_us']:6.1f} us")
else:
    print("no committed consumer results in figures/data yet")

# %% [markdown]
# A surprise in that table: at 1 KiB the row called `ideal` is *slower* than the persistent consumer doing
# its job. `ideal` is the benchmark's name for the consumer in echo mode on the **'seq'** protocol: no
# job, but seq's way of noticing a request: thread 0 polls one word, one PCIe read at a time. It is the
# floor of 'seq', not of every protocol: 'll' notices a request in the payload words themselves
# (`kernels_lab/topics/consumer/kernel.py`). The poll diagnostic, run the same day, measured both protocols in
# echo mode side by side (`consumer_polls_h200.json`):

# %%
one = {(r["mode"], r["payload_bytes"]): r for r in recs}
diag = {(r["protocol"], r["mode"]): r for r in lessons.committed("consumer_polls_h200.json")["records"]
        if r["kind"] == "consumer_poll"}
print(f"1 KiB: 'ideal' (seq, echo) p50 {one['ideal', 1024]['p50_us']:.1f} us; persistent-ll with the job "
      f"{one['persistent-ll', 1024]['p50_us']:.1f} us (its GPU share {one['persistent-ll', 1024]['gpu_us_p50']:.2f} us)")
for mode in ("raw echo", "api echo", "api job"):
    print(f"poll diagnostic, {mode:<8}: ll {diag['ll', mode]['p50_us']:.2f} us   seq {diag['seq', mode]['p50_us']:.2f} us")
sooner = diag['seq', 'api echo']['p50_us'] - diag['ll', 'api echo']['p50_us']
print(f"through the API, ll's echo is {sooner:.2f} us sooner than seq's; ll's job costs the GPU "
      f"{diag['ll', 'api job']['gpu_us_p50']:.2f} us")
print("'ideal' by payload: " + ", ".join(f"{b // 1024} KiB {one['ideal', b]['p50_us']:.1f} us" for b in (1024, 4096, 16384)))

# %% [markdown]
# So: in echo mode 'll' notices a request sooner than 'seq' does, by more than the job costs the GPU.
# And in this run `ideal` does not grow with the payload; it is not even monotonic. Requests go
# back to back, so each lands at a fixed phase of the GPU's poll loop, not a random one; a request that
# just misses a poll waits for a whole PCIe read (`benchmarks/NOTES.md`, the second session of
# 2026-12-03, where a second poll in flight was tried and removed). That spread, a microsecond or two
# between runs and payloads, is why these lessons compare the resident kernel with one launch per
# request as a ratio, and protocols only within one run.
# %% [markdown]
# ## The dangers, shown
# **An unbounded spin** would wedge the GPU. Here the idle budget runs out and the kernel returns with a
# status the host can read:

# %%
import time
c = PersistentConsumer(weights, slots=2, idle_timeout_s=0.2).start()
while not c.kernel_exited():
    time.sleep(0.05)
print(c.status())   # exit code 3: the idle budget ran out

# %% [markdown]
# **A grid that cannot be co-resident** deadlocks at its first grid-wide barrier (blocks that never
# start never arrive). kernels-lab refuses it before launch:

# %%
from kernels_lab.backend import BACKEND
from kernels_lab.runtime import BackendError
from kernels_lab.topics.launch.bench import persistent_steps
from numba import types
sig = (types.Array(types.float32, 1, "C"), types.int64)
limit = BACKEND.resident_limit(persistent_steps, sig, 128)
try:
    BACKEND.require_coresident(persistent_steps, sig, limit + 1, 128)
except BackendError as e:
    print(e)


# %% [markdown]
# **A free that waits for a GPU that never goes idle.** Freeing device or pinned memory (`cudaFree`,
# `cudaFreeHost`) waits until the GPU is idle, and a resident kernel keeps it busy until it exits. numba
# frees lazily: an array you drop joins a queue, and the queue is flushed when it has grown enough, at a
# moment you do not choose. On the H200 a garbage-collected buffer did exactly that while the consumer
# ran: the host stalled for the whole idle budget (`kernels_lab/topics/consumer/kernel.py`, "The dangers").
# `PersistentConsumer` holds numba's deferred cleanup from `start()` to `stop()`
# (`kernels_lab/topics/consumer/host.py`); around a resident kernel of your own, do the same:

# %%
with cuda.defer_cleanup():   # from before the resident kernel starts until after it has exited
    scratch = cuda.device_array(1 << 16, np.float32)
    del scratch              # queued, not freed: a cudaFree now would wait for the resident kernel
    print("inside: frees are queued while the resident kernel would run")
print("outside: the queued frees may run; the GPU can go idle again")

# %% [markdown]
# **A hoisted load**: `while flag[0] == 0: pass` compiles to a load before the loop and an endless loop on a
# register. Volatile/acquire loads (`kernels_lab.intrinsics.load_acquire_sys`) are re-issued every time.
# Scopes, acquire/release and why a plain poll reads stale data, each seen breaking on the simulator: the
# memory-model primer, `docs/memory-model.md` (*Memory model* on the lesson site).
#
# ### Exercise 2: a barrier you cannot skip
# `block_sums(x, out)`: each block of 64 threads sums its 64 elements through shared memory. The check runs
# it again under perturbed thread schedules: without `cuda.syncthreads()` it fails.

# %% tags=["stub"]
@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(64, dtype=np.float32)
    # YOUR CODE: load, barrier, tree reduction with a barrier per step, thread 0 writes out[block]
    pass


# %% tags=["exercise"]
# EXERCISE: block_sums
@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(64, dtype=np.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 64 + t
    tile[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    step = 32
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]


# %%
print(lessons.check("block_sums", globals().get("block_sums")))

# %% [markdown]
# ## Summary
# - A grid-stride loop makes a kernel right for any grid; size the grid to the machine.
# - A resident kernel answers a host request without a launch; bound every spin and read flags with loads
#   the compiler must re-issue.
# - A persistent grid must fit on the GPU at once, and while it runs, frees (cudaFree) wait for it.
