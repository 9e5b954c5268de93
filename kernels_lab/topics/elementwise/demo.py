"""Demo: the elementwise chain unfused, fused and persistent; bytes, launches and time."""

from __future__ import annotations

from typing import Any

from ...backend import BACKEND
from ...profile.measure import bytes_needed
from ...demos import DemoRequest
from ...demos.common import TIMED_COLUMNS, DemoRun, chosen_size, results_table, workload_demo
from .figures import as_drawn

SMALLEST_GPU_N = 1 << 20
DEMO_N = 1 << 26  # 256 MiB an array, 5x the H200's L2: DRAM-bound like the benchmark's 2^28, and the demo runs in
                  # seconds (at 2^28 it took 18 s on the H200, 2026-12-04, most of it making and copying inputs)


def sized_for_this_device(workload):
    """The demo's size (DEMO_N, or the default where that is smaller), halved until every variant's inputs,
    outputs and intermediates fit in the GPU's free memory (with room for the L2 flush buffer): a 16 GiB T4
    runs what an H200 runs, smaller. Returns (size, a note saying why it is smaller, or None)."""
    size = workload.default_size()
    free = BACKEND.free_memory()
    if free is None:
        return size, None
    size = workload.size(min(size.n, DEMO_N))
    def need(s):
        return max(bytes_needed(workload, v, s) for v in workload.variants.values()) + (512 << 20)
    n = size.n
    while n > SMALLEST_GPU_N and need(workload.size(n)) > free:
        n //= 2
    if n == size.n:
        return size, None
    return workload.size(n), (f"this GPU has {free / 2**30:.1f} GiB free: n = 2^{n.bit_length() - 1} "
                              f"instead of the demo's 2^{size.n.bit_length() - 1} (pass --n to choose)")


def narrate(records: list[dict], run: DemoRun) -> str:
    ceiling = run.ceiling
    by = {r["variant"]: r for r in records}
    un, fu = by["unfused"], by["fused"]
    ratio = un["bytes_model"] / fu["bytes_model"]
    lines = [f"Fusing three kernels into one keeps h and g in registers: {un['launches']} launches become "
             f"{fu['launches']}, and {un['bytes_model']:,} bytes of traffic become {fu['bytes_model']:,} "
             f"({ratio:.2f}x fewer)."]
    if fu.get("time_ms"):
        speed = un["time_ms"] / fu["time_ms"]
        lines.append(f"On the GPU the fused kernel is {speed:.2f}x faster than the unfused chain "
                     f"(the bytes predict {ratio:.2f}x).")
        if ceiling:
            for name in ("fused_naive", "fused", "persistent"):
                if name in by and by[name].get("GBs"):
                    lines.append(f"  {name}: {by[name]['GBs']:.0f} GB/s = {by[name]['GBs'] / ceiling:.0%} of the "
                                 f"{ceiling:.0f} GB/s copy ceiling measured in this run")
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element "
                     "and match the plan.")
    return "\n".join(lines)


def choose_size(workload, request: DemoRequest):
    """--size / --n when given, else the demo's size for this device."""
    if request.sized:
        return chosen_size(workload, request), None
    return sized_for_this_device(workload)


def committed_table(doc: dict[str, Any]) -> str:
    """The committed run: our variants as the demo prints its own (GB/s of their planned bytes), then torch's
    lines of the same run (the study's anchors: eager and torch.compile), by time."""
    drawn = as_drawn(doc)
    text = (results_table(drawn["records"], TIMED_COLUMNS) + "\n"
            + narrate(drawn["records"], DemoRun(None, {}, doc["meta"].get("ceiling_GBs"))))
    anchors = [r for r in doc["records"] if r.get("pattern") == "anchor" and r.get("time_ms")]
    if anchors:
        text += "\nin the same run: " + ", ".join(f"{r['line']} {r['time_ms']:.3f} ms" for r in anchors)
    return text


DEMO = workload_demo(
    "elementwise", "bias add -> GELU -> scale: unfused (3 kernels) vs fused vs persistent", 1, narrate=narrate,
    columns=TIMED_COLUMNS, committed="elementwise_h100.json", choose_size=choose_size, with_ceiling=True,
    committed_numbers=committed_table)
