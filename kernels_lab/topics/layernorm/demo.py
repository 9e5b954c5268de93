"""Demo: layernorm over rows, unfused (3 kernels) vs the row in registers vs the weights held in registers too.

On a machine without a GPU it shows the committed H100 run of its study (`kernels-lab bench layernorm`)."""

from __future__ import annotations

from ...backend import BACKEND
from ...core import get_workload
from ...demos.common import TIMED_COLUMNS, DemoRun, default_rows, shapes_table, useful_rates, workload_demo
from ...profile.study import as_before
from .study import named_today

USEFUL_BYTES = 8  # per element: x read once, out written once, what every variant's GB/s is counted on (study.py)
# The demo's rows unless --size says otherwise: 32768 x 1024 floats is 128 MiB of x, twice the H200's L2, so the
# kernels still stream from DRAM, at half the study's 65536 rows
DEMO_ROWS = BACKEND.size(gpu=32768, simulator=get_workload("layernorm").default_size()["rows"])


def narrate(records: list[dict], run: DemoRun) -> str:
    size, refused, ceiling = run.size, run.refused, run.ceiling
    by = {r["variant"]: r for r in records}
    n = size.elements
    un = by["unfused"]
    lines = [f"Unfused, x goes through DRAM for each statistic and again to normalize: {un['launches']} launches, "
             f"{un['bytes_model'] / n:.1f} bytes per element planned (gamma and beta read for every row)."]
    if "fused" in by:
        fu = by["fused"]
        lines.append(f"fused keeps the row in registers between the mean, the variance and the store: {fu['launches']} "
                     f"launch, {fu['bytes_model'] / n:.1f} bytes per element ({un['bytes_model'] / fu['bytes_model']:.2f}x "
                     f"fewer); the variance is computed from the held row's deviations, not E[x^2] - mean^2.")
    if "persistent" in by:
        lines.append(f"persistent also holds gamma and beta in registers across rows: "
                     f"{by['persistent']['bytes_model'] / n:.2f} bytes per element, at a price in registers "
                     f"(lesson 08's table: fewer threads resident per SM).")
    if "cluster" in by:
        lines.append(f"cluster splits each row across the blocks of a thread-block cluster, which swap their partial "
                     f"(count, mean, M2) through distributed shared memory and merge them with Chan's rule: "
                     f"{by['cluster']['bytes_model'] / n:.2f} bytes per element.")
    lines += [f"{name} does not run at {size}: {why}" for name, why in refused.items()]
    return "\n".join(lines + useful_rates(records, USEFUL_BYTES * n, ceiling))


def benchmark_table(doc: dict) -> str:
    """The study's results (`kernels-lab bench layernorm`): every variant and torch at each shape, in GB/s of useful
    traffic (one read + one write of x) and as a share of the copy ceiling measured in the same run."""
    doc = as_before(named_today(doc))  # a study's records (an older run's lines under today's names)
    ceiling = doc["meta"]["ceiling_GBs"]
    names = list(dict.fromkeys(r["variant"] for r in doc["records"]))
    return "\n".join([f"GB/s of useful traffic (x read once, out written once) and share of the {ceiling:.0f} GB/s "
                      f"copy ceiling:",
                      *shapes_table(doc["records"], names, lambda r: f"{r['GBs']:6.0f} ({r['of_ceiling']:4.0%})", 18),
                      "  (-: the variant does not run that shape)"])


DEMO = workload_demo(
    "layernorm", "layernorm over rows: unfused (3 kernels) vs the row in registers vs gamma and beta held too",
    8, narrate=narrate, columns=TIMED_COLUMNS, committed="layernorm_h100.json", committed_numbers=benchmark_table,
    choose_size=default_rows(DEMO_ROWS), with_ceiling=True)
