"""Demo: layernorm over rows, unfused (3 kernels) vs the row in registers vs the weights held in registers too.

On a machine without a GPU it shows the committed H200 run of its study (`kernels-lab bench layernorm`)."""

from __future__ import annotations

from ...backend import BACKEND
from ...core import Size, Workload, get_workload
from ...demos import DemoRequest
from ...demos.common import TIMED_COLUMNS, DemoRun, chosen_size, workload_demo
from ...profile.study import as_before

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
    lines += [f"{name} does not run at {size}: {why}" for name, why in refused.items()]
    if un.get("time_ms"):
        for r in records:
            useful = USEFUL_BYTES * n / (r["time_ms"] * 1e-3) / 1e9
            share = f" = {useful / ceiling:.0%} of the {ceiling:.0f} GB/s copy ceiling" if ceiling else ""
            lines.append(f"  {r['variant']:<11} {useful:6.0f} GB/s of useful traffic (one read + one write){share}")
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element and match "
                     "the plan.")
    return "\n".join(lines)


def benchmark_table(doc: dict) -> str:
    """The study's results (`kernels-lab bench layernorm`): every variant and torch at each shape, in GB/s of useful
    traffic (one read + one write of x) and as a share of the copy ceiling measured in the same run."""
    doc = as_before(doc)  # a study's records, or the committed file's older kind
    ceiling = doc["meta"]["ceiling_GBs"]
    names = list(dict.fromkeys(r["variant"] for r in doc["records"]))
    lines = [f"GB/s of useful traffic (x read once, out written once) and share of the {ceiling:.0f} GB/s copy ceiling:",
             f"  {'rows x cols':<14}" + "".join(f"{n:>18}" for n in names)]
    for rows, cols in dict.fromkeys((r["size"]["rows"], r["size"]["cols"]) for r in doc["records"]):
        at = {r["variant"]: r for r in doc["records"] if (r["size"]["rows"], r["size"]["cols"]) == (rows, cols)}
        cells = [f"{at[n]['GBs']:6.0f} ({at[n]['of_ceiling']:4.0%})" if n in at else "-" for n in names]
        lines.append(f"  {f'{rows} x {cols}':<14}" + "".join(f"{c:>18}" for c in cells))
    return "\n".join(lines + ["  (-: the variant does not run that shape)"])


def choose_size(workload: Workload, request: DemoRequest) -> tuple[Size, None]:
    """--size / --n, else DEMO_ROWS rows of the default width."""
    size = chosen_size(workload, request)
    return (size if request.sized else size.replace(rows=DEMO_ROWS)), None


DEMO = workload_demo(
    "layernorm", "layernorm over rows: unfused (3 kernels) vs the row in registers vs gamma and beta held too",
    8, narrate=narrate, columns=TIMED_COLUMNS, committed="layernorm_h200.json", committed_numbers=benchmark_table,
    choose_size=choose_size, with_ceiling=True)
