"""Demo: softmax over rows, unfused vs shared memory vs registers vs online vs persistent."""

from __future__ import annotations

from ...backend import BACKEND
from ...core import get_workload
from ...demos.common import TIMED_COLUMNS, DemoRun, default_rows, shapes_table, useful_rates, workload_demo
from .figures import as_drawn

USEFUL_BYTES = 8  # per element: x read once, out written once, what every variant's GB/s is counted on
# The demo's rows unless --size says otherwise: 8192 x 4096 floats is 128 MiB of x, twice the H200's L2, so the
# kernels still stream from DRAM, and the demo stays under 15 s (the workload's 16384 rows took 15 s, 2026-12-04)
DEMO_ROWS = BACKEND.size(gpu=8192, simulator=get_workload("softmax").default_size()["rows"])


def narrate(records: list[dict], run: DemoRun) -> str:
    size, refused, ceiling = run.size, run.refused, run.ceiling
    by = {r["variant"]: r for r in records}
    n = size.elements
    un, one = by["unfused"], by.get("fused") or by["online"]
    lines = [f"Unfused, the row goes through DRAM between the steps (max, exp and sum, normalize): "
             f"{un['launches']} launches, {un['bytes_model'] / n:.1f} bytes per element. {one['variant']} keeps it "
             f"on chip: {one['launches']} launch, {one['bytes_model'] / n:.1f} bytes per element "
             f"({un['bytes_model'] / one['bytes_model']:.2f}x fewer)."]
    if "online" in by:
        lines.append(f"online holds no row: it reads x twice ({by['online']['bytes_model'] / n:.0f} bytes per element "
                     f"planned); on a GPU the second read can find the row still in L2 (ncu's DRAM bytes tell).")
    lines += [f"{name} does not run at {size}: {why}" for name, why in refused.items()]
    if one.get("time_ms"):
        lines.append(f"On the GPU unfused takes {un['time_ms'] / one['time_ms']:.2f}x {one['variant']}'s time "
                     f"(the bytes predict {un['bytes_model'] / one['bytes_model']:.2f}x).")
    return "\n".join(lines + useful_rates(records, USEFUL_BYTES * n, ceiling))


def benchmark_table(doc: dict) -> str:
    """The study's results (`kernels-lab bench softmax`): each registered variant and torch.softmax at every shape,
    in GB/s of useful traffic (one read + one write), as a share of the copy ceiling, and against torch."""
    doc = as_drawn(doc)  # a study's records, or the committed file's older kinds
    ceiling = doc["meta"]["ceiling_GBs"]
    recs = [r for r in doc["records"] if r.get("kind") == "softmax_shape"
            and (r.get("registered") or r["variant"] == "torch.softmax")]
    names = list(dict.fromkeys(r["variant"] for r in recs))
    return "\n".join([f"GB/s of useful traffic (x read once, out written once), share of the {ceiling:.0f} GB/s copy "
                      f"ceiling measured in the same run, and time against torch.softmax (above 1x: faster):",
                      *shapes_table(recs, names, lambda r: f"{r['GBs']:5.0f} {r['of_ceiling']:4.0%} {r['vs_torch']:5.2f}x",
                                    20),
                      "  (-: the variant does not run that shape)"])


DEMO = workload_demo(
    "softmax", "softmax over rows: unfused (3 kernels) vs the row in shared memory, in registers, online, persistent",
    4, narrate=narrate, columns=TIMED_COLUMNS, committed="softmax_h100.json", committed_numbers=benchmark_table,
    choose_size=default_rows(DEMO_ROWS), with_ceiling=True)
