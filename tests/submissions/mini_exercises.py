"""Small views of the lesson exercises, for the grader's tests: the same workloads, checks and points,
but few and small cases in one launch configuration, so a grade costs about a second of CPU.
Also an instructor exercise file (`kernels-lab grade --exercises tests/submissions/mini_exercises.py`)."""

from kernels_lab import Case, Exercise, fixed, get_workload, grid_for

E = get_workload("elementwise")
B = get_workload("block_sums")
CASES = (Case(E.size(1), 11), Case(E.size(37), 12), Case(E.size(70), 21, hidden=True),
         Case(E.size(33), 23, hidden=True, probe=True))
CHAIN = "@cuda.jit\ndef fused_chain(x, b, alpha, out):  # out[i] = alpha * gelu(x[i] + b[i])"

fuse_mini = Exercise(
    name="fuse_mini", workload="elementwise", variant="fused_naive", lesson="01", title="fuse_chain, small",
    kind="kernel", entry="fused_chain", signature=CHAIN, cases=CASES, configs=(grid_for(32),),
    points={"correct (public)": 3, "correct (hidden)": 3, "launch budget": 1, "traffic budget": 1,
            "compiles for the course's GPUs": 1, "speed": 1})
two_launches_mini = Exercise(
    name="two_launches_mini", workload="elementwise", variant="unfused", lesson="02", title="two_launches, small",
    kind="host", entry="run_two", signature="def run_two(x, b, alpha, out):", cases=CASES, max_launches=2,
    max_bytes=lambda s: 20 * s.n, budget_note="two kernels: 20 B per element",
    points={"correct (public)": 3, "correct (hidden)": 3, "launches as asked": 2,
            "one intermediate in global memory": 1, "traffic budget": 1})
persistent_mini = Exercise(
    name="persistent_mini", workload="elementwise", variant="persistent", lesson="03", title="persistent, small",
    kind="kernel", entry="persistent_chain", signature="@cuda.jit\ndef persistent_chain(x, b, alpha, out):",
    cases=CASES, configs=(fixed(2, 32),),
    points={"correct (public)": 3, "correct (hidden)": 3, "grid independent of n": 2, "traffic budget": 1,
            "compiles for the course's GPUs": 1})
block_sums_mini = Exercise(
    name="block_sums_mini", workload="block_sums", variant="fused", lesson="03", title="block_sums, small",
    kind="kernel", entry="block_sums", signature="@cuda.jit\ndef block_sums(x, out):",
    cases=(Case(B.size(64), 31), Case(B.size(130), 32), Case(B.size(200), 41, hidden=True)),
    configs=(lambda s: (-(-s.n // 64), 64),), race_seeds=(1, 2, 3),
    points={"correct (public)": 3, "correct (hidden)": 2, "no race under perturbed schedules": 3,
            "compiles for the course's GPUs": 1})

EXERCISES = [fuse_mini, two_launches_mini, persistent_mini, block_sums_mini]
