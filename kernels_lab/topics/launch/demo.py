"""Demo: what one kernel boundary costs, launch path by launch path."""

from __future__ import annotations

from ...backend import BACKEND
from ...demos import Demo, DemoRequest
from .figures import ladder
from ...demos.common import show_committed, write_measured


def narrate(rungs: list[dict]) -> str:
    by = {r["path"]: r for r in rungs}
    numba4 = by["numba dispatch, 4 array args"]["host_us_per_launch"]
    pre = by["pre-bound cuda.core launch, 4 array args"]["host_us_per_launch"]
    graph = by["CUDA graph replay, 4 array args"]["device_us_per_boundary"]
    step = by["persistent kernel, one grid-sync step"]["device_us_per_boundary"]
    return (f"numba spends {numba4:.0f} us in Python per launch with 4 arrays; flattening the arguments once "
            f"brings it to {pre:.1f} us ({numba4 / pre:.1f}x). A CUDA graph replays a kernel boundary in "
            f"{graph:.2f} us, a persistent kernel crosses one with a grid sync in {step:.2f} us, and a fused kernel "
            f"has none. When a kernel runs for less than ~{numba4:.0f} us, numba's dispatch, not the GPU, sets the "
            f"pace: "
            f"where host and device are equal above, the GPU ran each tiny kernel in far less time and then waited "
            f"for the next launch, so the spacing it saw is the host's time per launch.")


def rung_lines(rungs: list[dict]) -> str:
    width = max(len(r["path"]) for r in rungs)
    return "\n".join(f"  {r['path']:<{width}}  host {r['host_us_per_launch']:8.2f} us per launch   "
                     f"device {r['device_us_per_boundary']:8.2f} us per boundary" for r in rungs)


def run(request: DemoRequest) -> int:
    print(f"backend: {BACKEND.describe()}")
    if not BACKEND.can_time:
        print("Nothing runs here: the simulator cannot time launches (it runs kernels as Python threads).")
        show_committed("ladder_h200.json", lambda doc: rung_lines(doc["records"]) + "\n" + narrate(doc["records"]),
                       request.out, "launch")
        return 0
    from .bench import measure_ladder
    rungs = measure_ladder()
    print(rung_lines(rungs))
    print(narrate(rungs))
    write_measured(request, rungs, {"ladder": ladder})
    return 0


DEMO = Demo("launch", "the launch-overhead ladder: numba dispatch, pre-bound, graph, persistent step, fused", run, order=2,
            takes_size=False, writes_results_here=False)
