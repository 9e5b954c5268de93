"""Demo: a recurrent layer's time loop, one launch per step vs one persistent kernel for all steps.

On a machine without a GPU it shows the committed H200 run of its study (`kernels-lab bench rnn`) (its
numbers, and the figures figures.py draws from it)."""

from __future__ import annotations

from typing import Any, Sequence

from ...demos.common import Column, DemoRun, workload_columns, workload_demo

COMMITTED = "rnn_h100.json"


def per_step(rec: dict[str, Any]) -> dict[str, Any]:
    """us per step and TFLOP/s of the recurrent part (2 hidden^2 batch flops per step), when timed."""
    size = rec["size"]
    if rec.get("time_ms") is None:
        return {"us_per_step": None, "tflops": None}
    seconds = rec["time_ms"] * 1e-3
    return {"us_per_step": seconds * 1e6 / size["steps"],
            "tflops": 2 * size["hidden"] ** 2 * size["batch"] * size["steps"] / seconds / 1e12}


COLUMNS = workload_columns(22, 16) + [Column("us/step", "us_per_step", 10, "{:.2f}", "n/a"),
                                      Column("TFLOP/s", "tflops", 9, "{:.2f}", "n/a")]


def narrate(records: Sequence[dict[str, Any]], run: DemoRun) -> str:
    size, refused = run.size, run.refused
    by = {r["variant"]: r for r in records}
    lines = [f"Every step needs all of the step before, so per-step variants pay a kernel boundary per step: "
             f"unfused {by['unfused']['launches']} launches, fused {by['fused']['launches']}; and they read W "
             f"({4 * size.hidden ** 2:,} bytes) from memory at every step."]
    if "persistent" in by:
        p = by["persistent"]
        lines.append(f"persistent launches once and keeps W in registers: {p['bytes_model']:,} bytes planned against "
                     f"fused's {by['fused']['bytes_model']:,} ({by['fused']['bytes_model'] / p['bytes_model']:.1f}x "
                     f"fewer); a grid barrier replaces each boundary.")
    lines += [f"{name} does not run at {size}: {why}" for name, why in refused.items()]
    if by["fused"].get("us_per_step") is not None:
        base = by["fused"]["us_per_step"]
        lines += [f"  {r['variant']:<20} {r['us_per_step']:7.2f} us per step, {r['tflops']:5.2f} TFLOP/s "
                  f"({base / r['us_per_step']:.1f}x fused)" for r in records]
    else:
        lines.append("The simulator cannot time kernels; the bytes above were traced element by element and match "
                     "the plan.")
    return "\n".join(lines)


def benchmark_table(doc: dict[str, Any]) -> str:
    """The study's results (`kernels-lab bench rnn`): us per step of every variant and anchor at each hidden size
    and batch (the medians its figure draws)."""
    from .figures import as_drawn
    doc = as_drawn(doc)  # a study's records, or the committed file's older kind
    recs = [r for r in doc["records"] if r.get("us_per_step") is not None and r.get("version") is None]
    configs = list(dict.fromkeys((r["size"]["hidden"], r["size"]["batch"]) for r in recs))
    steps = sorted({r["size"]["steps"] for r in recs})
    lines = [f"us per step (median; {', '.join(map(str, steps))} steps a run); columns: hidden / batch",
             f"  {'variant':<22}" + "".join(f"{f'{h} / {b}':>12}" for h, b in configs)]
    for name in dict.fromkeys(r["variant"] for r in recs):
        at = {(r["size"]["hidden"], r["size"]["batch"]): r["us_per_step"] for r in recs if r["variant"] == name}
        lines.append(f"  {name:<22}" + "".join(f"{at[c]:>12.2f}" if c in at else f"{'-':>12}" for c in configs))
    return "\n".join(lines + ["  (-: not run at that size)"])


# -- the benchmark's figures ----------------------------------------------------------------------

# -- the demo ---------------------------------------------------------------------------------------

DEMO = workload_demo(
    "rnn", "a recurrent layer: per-step launches (unfused, fused, graph) vs one persistent kernel with W in registers",
    5, narrate=narrate, columns=COLUMNS, committed=COMMITTED, committed_numbers=benchmark_table, derive=per_step,
    check_first=False)
