"""Demo: softmax over rows, unfused vs shared memory vs registers vs online vs persistent."""

from __future__ import annotations

import argparse

from ...backend import BACKEND
from ...core import get_workload
from ...demos.common import TIMED_COLUMNS, DemoRun, chosen_size, workload_demo
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
        for r in records:
            useful = USEFUL_BYTES * n / (r["time_ms"] * 1e-3) / 1e9
            share = f" = {useful / ceiling:.0%} of the {ceiling:.0f} GB/s copy ceiling" if ceiling else ""
            lines.append(f"  {r['variant']:<13} {useful:6.0f} GB/s of useful traffic (one read + one write){share}")
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element and match "
                     "the plan.")
    return "\n".join(lines)


def benchmark_table(doc: dict) -> str:
    """The study's results (`kernels-lab bench softmax`): each registered variant and torch.softmax at every shape,
    in GB/s of useful traffic (one read + one write), as a share of the copy ceiling, and against torch."""
    doc = as_drawn(doc)  # a study's records, or the committed file's older kinds
    ceiling = doc["meta"]["ceiling_GBs"]
    recs = [r for r in doc["records"] if r.get("kind") == "softmax_shape"
            and (r.get("registered") or r["variant"] == "torch.softmax")]
    names = list(dict.fromkeys(r["variant"] for r in recs))
    lines = [f"GB/s of useful traffic (x read once, out written once), share of the {ceiling:.0f} GB/s copy ceiling "
             f"measured in the same run, and time against torch.softmax (above 1x: faster):",
             f"  {'rows x cols':<14}" + "".join(f"{n:>20}" for n in names)]
    for rows, cols in dict.fromkeys((r["size"]["rows"], r["size"]["cols"]) for r in recs):
        at = {r["variant"]: r for r in recs if (r["size"]["rows"], r["size"]["cols"]) == (rows, cols)}
        cells = [f"{at[n]['GBs']:5.0f} {at[n]['of_ceiling']:4.0%} {at[n]['vs_torch']:5.2f}x" if n in at else "-"
                 for n in names]
        lines.append(f"  {f'{rows} x {cols}':<14}" + "".join(f"{c:>20}" for c in cells))
    return "\n".join(lines + ["  (-: the variant does not run that shape)"])


def choose_size(workload, args: argparse.Namespace):
    """--size / --n, else DEMO_ROWS rows of the default width."""
    size = chosen_size(workload, args)
    return (size if args.size else size.replace(rows=DEMO_ROWS)), None


DEMO = workload_demo(
    "softmax", "softmax over rows: unfused (3 kernels) vs the row in shared memory, in registers, online, persistent",
    4, narrate=narrate, columns=TIMED_COLUMNS, committed="softmax_h200.json", committed_numbers=benchmark_table,
    choose_size=choose_size, with_ceiling=True)
