"""Demo: a decode step's chain of dense layers, a launch per op to one megakernel (lesson 07).

On a machine without a GPU it shows the committed H200 run of decode's study (`kernels-lab bench decode`:
its table, and the figures figures.py draws from it)."""

from __future__ import annotations

from typing import Any, Sequence

from ...demos.common import Column, DemoRun, workload_columns, workload_demo
from .figures import table

COMMITTED = "decode_h100.json"

# -- the demo ---------------------------------------------------------------------------------------

# 18 characters of variant name: megakernel_marked and megakernel_db_p0 fit
COLUMNS = workload_columns(18, 16) + [Column("us/pass", "us_per_pass", 10, "{:.1f}", "n/a")]


def narrate(records: Sequence[dict[str, Any]], run: DemoRun) -> str:
    size = run.size
    by = {r["variant"]: r for r in records}
    weights = 4 * size.layers * size.hidden ** 2
    lines = [f"Each layer needs all of the one before: the weights ({weights:,} bytes a pass) are read once by every "
             f"variant but unfused, whose W x goes through memory to a bias and a GELU kernel "
             f"({by['unfused']['launches']} launches against fused's {by['fused']['launches']}).",
             "graph replays the fused launches; graph_pdl lets each layer load its weights before it waits; "
             "persistent and the megakernels launch once (a grid barrier, or a counter per layer; megakernel_db and "
             "megakernel_db_p0 keep two tiles in flight per block, megakernel_marked puts data and flag in one word)."]
    if by["fused"].get("us_per_pass") is not None:
        best = min(records, key=lambda r: r["us_per_pass"])
        lines.append(f"fastest here: {best['variant']} ({best['us_per_pass']:.1f} us per pass, one pass after a "
                     f"cold L2; the weights at the copy ceiling would take less)")
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element and match "
                     "the plan. On the simulator the megakernel's table gives whole layers to its blocks in order "
                     "(they run one after another there); on a GPU it spreads every layer over all of them.")
    return "\n".join(lines)


def us_per_pass(record: dict[str, Any]) -> dict[str, Any]:
    return {"us_per_pass": None if record.get("time_ms") is None else record["time_ms"] * 1e3}


DEMO = workload_demo(
    "decode", "a chain of dense layers: a kernel per op, fused, graph, graph + PDL, persistent, megakernel", 7,
    narrate=narrate, columns=COLUMNS, committed=COMMITTED, committed_numbers=table, derive=us_per_pass,
    check_first=False, quiet=("decode graph",))  # no graphs on the simulator: the narration says so
