"""Build the lessons: each lesson's cells are written once here, and come out twice:

    NN_topic.ipynb           the exercise notebook: student cells hold a stub, no outputs
    NN_topic_solution.ipynb  the solution notebook: student cells hold the solution

Student cells start with `# EXERCISE: <name>` (the grader takes exactly those cells from a
submitted notebook). Run `python notebooks/build.py` after editing; tests/test_notebooks.py
checks that the committed notebooks are what this file builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

SETUP = """import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
print(lessons.setup())"""


def md(text):
    return ("markdown", text.strip("\n"))


def code(text):
    return ("code", text.strip("\n"))


def exercise(name, stub, solution):
    return ("exercise", name, stub.strip("\n"), solution.strip("\n"))


CHAIN_STUB = '''@cuda.jit
def fused_chain(x, b, alpha, out):
    # YOUR CODE: one thread per element, out[i] = alpha * gelu(x[i] + b[i]),
    # with h = x[i] + b[i] kept in a register (never written to global memory)
    pass'''

CHAIN_SOLUTION = '''import math
SQ, C = np.float32(math.sqrt(2 / math.pi)), np.float32(0.044715)

@cuda.jit
def fused_chain(x, b, alpha, out):
    i = cuda.grid(1)
    if i < out.size:                 # the bounds guard: the last block is partly empty
        h = x[i] + b[i]              # stays in a register
        u = SQ * (h + C * h * h * h)
        out[i] = alpha * (h / (np.float32(1) + math.exp(np.float32(-2) * u)))'''

LESSONS = {
    "00_start": [
        md("""
# 00 Start here

kernels-lab puts three ways to run dependent GPU work side by side, as real Numba-CUDA kernels:
**unfused** (one kernel per stage), **fused** (one kernel, intermediates on chip) and **persistent**
(a grid sized to the machine that loops). Every lesson runs on a GPU, or on numba's CUDA simulator
when there is none: the same kernels, the same checks, small sizes, and timings taken from the
committed H200 results in `figures/data/`.

**Goals:** know where this notebook runs, how to get help, and what the demos show."""),
        code(SETUP),
        md("""
## Where am I running?
`kernels-lab doctor` (in a terminal) or the cell below reports the back-end, the versions, and what to do
about each problem it finds (numpy >= 2.5, a missing NVVM, no Nsight Compute)."""),
        code("""from kernels_lab.doctor import report
text, problems = report()
print(text)"""),
        md("""
To choose the back-end yourself, set `KERNELS_LAB_BACKEND=gpu` or `KERNELS_LAB_BACKEND=sim` **before**
Python starts (the choice is made when kernels_lab is imported).

## The demos an instructor runs
Each prints a narration and writes a figure (`kernels-lab demo NAME --out figs/x.png`)."""),
        code("""from kernels_lab.demos import demos
for d in demos().values():
    print(f"kernels-lab demo {d.name:<12} {d.about}")"""),
        md("""
## Summary
- The lessons: 01 memory traffic and fusion, 02 launch overhead, 03 persistent kernels.
- Cells that start with `# EXERCISE:` are yours; the cell after each runs its check. The grader
  (`kernels-lab grade`) takes exactly those cells from your notebook."""),
    ],
    "01_fusion": [
        md("""
# 01 Memory traffic and kernel fusion

**Goals:** count the bytes a chain of kernels moves three ways (the plan, the simulator's trace, Nsight
Compute on an H200), see why one fused kernel beats three, and write the fused kernel.

The chain, on float32 vectors: `h = x + b` (bias add), `g = gelu(h)`, `out = alpha * g` (scale).
Each stage is a few flops per element: the chain is limited by memory traffic."""),
        code(SETUP),
        code("""w = get_workload("elementwise")
for v in w.variants.values():
    plan = v.plan(w.size(1000))      # a size names the workload's axes: here one, n
    print(f"{v.name:<12} {plan.n_launches} launch(es)  {plan.bytes_total / 1000:g} B/element   {v.about}")"""),
        md("""
## Bytes, counted by the code that runs
The plan is what a variant *declares*. On the simulator every global-memory element access is traced,
so we can check the declaration against what the kernels really do."""),
        code("""from kernels_lab.arrays import poisoned, to_device
from kernels_lab.profile.launch_hook import count_launches
from kernels_lab.runtime import ON_SIMULATOR
size = w.size(1031)
inputs = w.make_inputs(size, np.random.default_rng(1))
for v in w.variants.values():
    launch = v.bind(to_device(inputs), poisoned(w.output_specs(size)))
    if ON_SIMULATOR:
        from kernels_lab.profile.trace import tracing
        with count_launches() as seen, tracing() as trace:
            launch()
        print(f"{v.name:<12} launches {len(seen)}  traced {trace.bytes_total:>7,} B  plan {v.plan(size).bytes_total:>7,} B")
    else:
        with count_launches() as seen:
            launch()
        print(f"{v.name:<12} launches {len(seen)}  plan {v.plan(size).bytes_total:>7,} B")"""),
        md("""
### Exercise 1: predict
How many bytes per element does the **unfused** chain move? (Stage 1 reads x and b and writes h;
stage 2 reads h, writes g; stage 3 reads g, writes out; 4 bytes per float32.)"""),
        exercise("predict_unfused_bytes", "unfused_bytes_per_element = ...  # YOUR ANSWER",
                 "unfused_bytes_per_element = (8 + 4) + (4 + 4) + (4 + 4)"),
        code("""print(lessons.expect("unfused bytes per element", unfused_bytes_per_element, 28))"""),
        md("""
### Exercise 2: fuse the chain
Write `fused_chain(x, b, alpha, out)`: one kernel, one thread per element, `h` and `g` in registers.
The check runs it at sizes that are not multiples of the block size (1, 255, 257, 1031), with three
block sizes, into outputs poisoned with NaN, against a float64 reference; it also counts launches and
traced bytes (at most 1 launch, 12 bytes per element)."""),
        exercise("fuse_chain", CHAIN_STUB, CHAIN_SOLUTION),
        code("""print(lessons.check("fuse_chain", globals().get("fused_chain")))"""),
        md("""
## Measured on an H200 (committed results)
Nsight Compute's DRAM bytes agree with the plan within 2% at 2^27 elements (writes still in the 60 MB L2
at kernel end are the difference), and the time follows the bytes."""),
        code("""sweep = lessons.committed("profile_elementwise_h200.json")
big = {r["variant"]: r for r in sweep["records"] if r["n"] == max(x["n"] for x in sweep["records"])}
for name, r in big.items():
    dram = r["bytes_dram_read"] + r["bytes_dram_write"]
    print(f"{name:<12} plan {r['bytes_model']/2**20:8.1f} MiB   ncu {dram/2**20:8.1f} MiB ({dram/r['bytes_model']-1:+.1%})"
          f"   {r['time_ms']*1e3:7.1f} us   {r['GBs']:6.0f} GB/s")
print("copy ceiling in that run:", round(sweep["meta"]["ceiling_GBs"]), "GB/s")"""),
        code("""from IPython.display import Image
Image(filename=str(lessons.DATA.parent / "elementwise_h200_bytes.png"))"""),
        md("""
Why is `fused_naive` slower than `fused` when both move 12 bytes per element? Each thread of the naive
kernel keeps 8 bytes of loads in flight; DRAM latency times 4.8 TB/s needs more than a full SM of such
threads can hold (Little's law). `fused` loads 16 bytes per instruction (`ld.global.v4.f32`), four times
the bytes in flight, and reaches the copy ceiling.

### Exercise 3: read the data
From the demo run at 2^28 elements (`elementwise_h200.json`), how many times faster is `fused` than
`unfused`? Compare with the bytes ratio 28 / 12 = 2.33."""),
        exercise("fusion_speedup",
                 "demo = lessons.committed(\"elementwise_h200.json\")\nspeedup = ...  # YOUR ANSWER, from demo['records']",
                 "demo = lessons.committed(\"elementwise_h200.json\")\n"
                 "by = {r['variant']: r for r in demo['records']}\nspeedup = by['unfused']['time_ms'] / by['fused']['time_ms']"),
        code("""by_ = {r['variant']: r for r in lessons.committed("elementwise_h200.json")["records"]}
print(lessons.expect("speedup", speedup, by_['unfused']['time_ms'] / by_['fused']['time_ms']))"""),
        md("""
## Summary
- A chain of elementwise kernels is paid for in bytes: unfused 28 B/element, fused 12.
- The plan, the simulator's trace and Nsight Compute agree; the time follows the bytes (2.35x vs 2.33x).
- Bytes in flight matter too: 16-byte accesses take the fused kernel from 78% to the copy ceiling."""),
    ],
    "02_launch_overhead": [
        md("""
# 02 Launch overhead

**Goals:** see where the microseconds of a kernel launch go (Python dispatch, the driver, the GPU), when a
kernel is launch-bound, and what pre-bound launches, CUDA graphs and fusion do about it."""),
        code(SETUP),
        md("""
## The ladder
The same tiny kernel launched 2000 times back to back, per launch path. Measured live on a GPU; on the
simulator, read from the committed H200 run."""),
        code("""if lessons.live():
    from kernels_lab.profile.launch_ladder import measure_ladder
    rungs = measure_ladder()
else:
    rungs = lessons.committed("ladder_h200.json")["records"]
for r in rungs:
    print(f"{r['path']:<44} host {r['host_us_per_launch']:7.2f} us/launch   device {r['device_us_per_boundary']:6.2f} us/boundary")"""),
        code("""from IPython.display import Image
Image(filename=str(lessons.DATA.parent / "ladder_h200_ladder.png"))"""),
        md("""
numba re-types and re-flattens every argument on every call (each array is 7 kernel parameters):
that is most of the 30 us. A pre-bound launch flattens once; a graph replays recorded launches; a
persistent kernel replaces a launch by a grid-wide barrier; a fused kernel has no boundary at all.

### Exercise 1: read the ladder
How many times cheaper on the host is the pre-bound cuda.core launch than numba dispatch with 4 arrays?"""),
        exercise("prebound_ratio", "prebound_ratio = ...  # YOUR ANSWER, from rungs",
                 "by = {r['path']: r for r in rungs}\n"
                 "prebound_ratio = (by['numba dispatch, 4 array args']['host_us_per_launch']\n"
                 "                  / by['pre-bound cuda.core launch, 4 array args']['host_us_per_launch'])"),
        code("""by_ = {r['path']: r for r in rungs}
print(lessons.expect("pre-bound vs numba", prebound_ratio, by_['numba dispatch, 4 array args']['host_us_per_launch']
                     / by_['pre-bound cuda.core launch, 4 array args']['host_us_per_launch'], rel=0.05))"""),
        md("""
## Launch-bound or bandwidth-bound?
Over a sweep of sizes, the time of each variant against the model `launches x launch cost + bytes /
bandwidth` (bandwidth = the measured copy ceiling, or less when a kernel's threads keep too few bytes
in flight to cover the DRAM latency: Little's law; launch costs and the latency fitted). At small n
the three-kernel chain costs what its dependent launches cost, whatever its bytes; at large n the
4-byte-per-load kernel falls short of the ceiling by exactly the bytes it does not keep in flight."""),
        code("""Image(filename=str(lessons.DATA.parent / "profile_elementwise_h200_time.png"))"""),
        md("""
### Exercise 2: the crossover
With the fitted exposed launch cost c (in the sweep's records, `model_launch_us`) and the copy ceiling,
at what n does one 12-byte-per-element kernel take as long to move its bytes as a launch costs?
(`n = c * bandwidth / 12`)"""),
        exercise("crossover_n", "crossover_n = ...  # YOUR ANSWER",
                 "sweep = lessons.committed('profile_elementwise_h200.json')\n"
                 "c_us = sweep['records'][0]['model_launch_us']\n"
                 "crossover_n = c_us * 1e-6 * sweep['meta']['ceiling_GBs'] * 1e9 / 12"),
        code("""s_ = lessons.committed('profile_elementwise_h200.json')
print(lessons.expect("crossover n", crossover_n, s_['records'][0]['model_launch_us'] * 1e-6 * s_['meta']['ceiling_GBs'] * 1e9 / 12))"""),
        md("""
### Exercise 3: two launches instead of three
Write `run_two(x, b, alpha, out)`: a host function that launches **two** kernels, the first doing bias add
and GELU into one intermediate array, the second the scale. Budget: 2 launches, 20 bytes per element."""),
        exercise("two_launches", '''def run_two(x, b, alpha, out):
    # YOUR CODE: allocate g = cuda.device_array_like(out), launch two kernels
    pass''', '''import math

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
    scale[grid, 256](g, alpha, out)'''),
        code("""print(lessons.check("two_launches", globals().get("run_two")))"""),
        md("""
## Summary
- A numba launch costs ~17-33 us of Python on the host; the GPU's own cost per boundary is ~1 us.
- A kernel shorter than the launch cost is launch-bound: fewer launches (fusion), cheaper launches
  (pre-bound, graphs) or no launches (persistent) are the answers.
- The crossover is near n = c x bandwidth / bytes per element: millions of elements, not thousands."""),
    ],
    "03_persistent": [
        md("""
# 03 Persistent kernels

**Goals:** write a grid-stride kernel whose grid is sized to the machine, not the data; see a resident
kernel serve a host-fed queue; and know the dangers: hoisted loads, unbounded spins, grids that cannot
all be resident, and frees that wait for a GPU that never goes idle."""),
        code(SETUP),
        md("""
## A grid sized to the machine
`persistent_grid` asks the occupancy calculator how many blocks fit per SM and multiplies by the SMs
(1056 blocks of 256 on an H200). The kernel loops: `i += cuda.gridsize(1)`."""),
        code("""from kernels_lab.runtime import persistent_grid
from kernels_lab.workloads import elementwise as E
print("persistent grid here:", E._persistent_blocks(), "blocks of", E.BLOCK)"""),
        md("""
### Exercise 1: write it persistent
`persistent_chain(x, b, alpha, out)` must be right for **any** grid: the check launches it with
2 x 64, 3 x 32 and 1 x 128 threads on up to 1031 elements."""),
        exercise("persistent_chain", '''@cuda.jit
def persistent_chain(x, b, alpha, out):
    # YOUR CODE: start at cuda.grid(1), step by cuda.gridsize(1)
    pass''', '''import math

@cuda.jit
def persistent_chain(x, b, alpha, out):
    i = cuda.grid(1)
    while i < out.size:
        h = x[i] + b[i]
        u = np.float32(math.sqrt(2 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        out[i] = alpha * (h / (np.float32(1) + math.exp(np.float32(-2) * u)))
        i += cuda.gridsize(1)'''),
        code("""print(lessons.check("persistent_chain", globals().get("persistent_chain")))"""),
        md("""
## A kernel that never exits: the persistent consumer
The host writes requests into a ring in mapped host memory; a resident kernel polls it with `.sys`
loads the compiler cannot hoist, answers with one 8-byte store (value and mark together), and waits
again. Two protocols: `seq` polls one word per slot, then reads the payload (two PCIe round trips);
`ll` (NCCL's low-latency protocol) puts the ticket's mark in every 8-byte payload word, so the poll
*is* the payload read (one round trip, twice the bytes): it wins for small payloads. A request is
one call into machine code that releases the GIL (`kernels_lab/consumer/hostpath.py`): take a ticket with an
atomic compare-and-swap, publish, wait for the answer, collect it; no Python lock on the way. Every wait is bounded by an idle budget. On the simulator the kernel
runs on a Python thread with one block."""),
        code("""from kernels_lab.consumer import PersistentConsumer, reference
rng = np.random.default_rng(0)
weights = rng.standard_normal(64).astype(np.float32)
with PersistentConsumer(weights, slots=2, idle_timeout_s=30) as c:
    for _ in range(3):
        p = rng.standard_normal(64).astype(np.float32)
        print(f"answer {c.result(c.submit(p, timeout=30), timeout=30):+.4f}   reference {reference(p, weights):+.4f}")
print(c.status())"""),
        md("""
On the H200 (committed results): the round trip of a request through the resident kernel against one
launch per request."""),
        code("""import os
path = lessons.DATA / "consumer_h200.json"
if path.exists():
    recs = [r for r in lessons.committed("consumer_h200.json")["records"] if r["producers"] == 1]
    for r in recs:
        print(f"{r['mode']:<11} {r['payload_bytes']:>6} B  p50 {r['p50_us']:6.1f} us   p99 {r['p99_us']:6.1f} us")
else:
    print("no committed consumer results in figures/data yet")"""),
        md("""
## The dangers, shown
**An unbounded spin** would wedge the GPU. Here the idle budget runs out and the kernel returns with a
status the host can read:"""),
        code("""import time
c = PersistentConsumer(weights, slots=2, idle_timeout_s=0.2).start()
while not c.kernel_exited():
    time.sleep(0.05)
print(c.status())   # exit code 3: the idle budget ran out"""),
        md("""**A grid that cannot be co-resident** deadlocks at its first grid-wide barrier (blocks that never
start never arrive). kernels-lab refuses it before launch:"""),
        code("""from kernels_lab.runtime import require_coresident, cooperative_grid_limit, BackendError
from kernels_lab.profile.launch_ladder import persistent_steps
from numba import types
sig = (types.Array(types.float32, 1, "C"), types.int64)
limit = cooperative_grid_limit(persistent_steps, sig, 128)
try:
    require_coresident(persistent_steps, sig, limit + 1, 128)
except BackendError as e:
    print(e)"""),
        md("""
**A hoisted load**: `while flag[0] == 0: pass` compiles to a load before the loop and an endless loop on a
register. Volatile/acquire loads (`kernels_lab.intrinsics.load_acquire_sys`) are re-issued every time.

### Exercise 2: a barrier you cannot skip
`block_sums(x, out)`: each block of 64 threads sums its 64 elements through shared memory. The check runs
it again under perturbed thread schedules: without `cuda.syncthreads()` it fails."""),
        exercise("block_sums", '''@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(64, dtype=np.float32)
    # YOUR CODE: load, barrier, tree reduction with a barrier per step, thread 0 writes out[block]
    pass''', '''@cuda.jit
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
        out[cuda.blockIdx.x] = tile[0]'''),
        code("""print(lessons.check("block_sums", globals().get("block_sums")))"""),
        md("""
## Summary
- A grid-stride loop makes a kernel right for any grid; size the grid to the machine.
- A resident kernel answers a host request without a launch; bound every spin and read flags with loads
  the compiler must re-issue.
- A persistent grid must fit on the GPU at once, and while it runs, frees (cudaFree) wait for it."""),
    ],
}


def _cell(kind, text, index):
    base = {"cell_type": kind, "id": f"cell-{index:02d}", "metadata": {}, "source": text.splitlines(keepends=True)}
    if kind == "code":
        base.update(execution_count=None, outputs=[])
    return base


def build(lesson: str, cells, solution: bool) -> dict:
    out = []
    for k, c in enumerate(cells):
        if c[0] == "exercise":
            _, name, stub, sol = c
            out.append(_cell("code", f"# EXERCISE: {name}\n" + (sol if solution else stub), k))
        else:
            out.append(_cell(c[0], c[1], k))
    return {"cells": out, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": KERNELSPEC, "language_info": {"name": "python"},
                         "kernels_lab": {"lesson": lesson, "kind": "solution" if solution else "exercise"}}}


def paths(lesson: str) -> tuple[Path, Path]:
    return HERE / f"{lesson}.ipynb", HERE / f"{lesson}_solution.ipynb"


def main() -> int:
    for lesson, cells in LESSONS.items():
        ex, sol = paths(lesson)
        ex.write_text(json.dumps(build(lesson, cells, False), indent=1) + "\n")
        if not sol.exists() or "--force" in sys.argv:
            sol.write_text(json.dumps(build(lesson, cells, True), indent=1) + "\n")
        else:  # keep the outputs of an executed solution; refresh only its sources
            old = json.loads(sol.read_text())
            new = build(lesson, cells, True)
            if [c["source"] for c in old["cells"]] != [c["source"] for c in new["cells"]]:
                sol.write_text(json.dumps(new, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
