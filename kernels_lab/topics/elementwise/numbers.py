"""The numbers the README quotes about the elementwise chain: its run at 2^28 (elementwise_h100.json,
`kernels-lab bench elementwise`) and the harness's sweep with Nsight Compute (profile_elementwise_h200.json):
two runs, on two GPUs, each row and caption naming its own.
kernels_lab/profile/numbers.py gathers ROWS into the measured table and BLOCKS by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import math
import statistics

from ...profile.numbers import DATA, gpu, load, pow2, records
from .figures import as_drawn

ELEMENTWISE = "elementwise_h100.json"


def elementwise(data: Path = DATA) -> dict[str, Any]:
    doc = as_drawn(load(ELEMENTWISE, data))  # the study's records (`kernels-lab bench elementwise`), or the demo's
    by = {r["variant"]: r for r in doc["records"]}
    ceiling = doc["meta"]["ceiling_GBs"]
    un, fu = by["unfused"], by["fused"]
    return {
        "n": pow2(fu["n"]),
        "bytes_ratio": un["bytes_model"] / fu["bytes_model"],
        "time_ratio": un["time_ms"] / fu["time_ms"],
        "ceiling": ceiling,
        "GBs": {v: r["GBs"] for v, r in by.items()},
        "of_ceiling": {v: r["GBs"] / ceiling for v, r in by.items()},
    }


PROFILE = "profile_elementwise_h200.json"


def ncu_vs_plan(data: Path = DATA) -> dict[str, Any]:
    recs = [r for r in records(PROFILE, data) if r.get("bytes_dram_read") is not None]
    diffs = sorted(((r["bytes_dram_read"] + r["bytes_dram_write"]) / r["bytes_model"] - 1 for r in recs), key=abs)
    return {"n": pow2(recs[0]["n"]), "variants": len(recs), "closest": diffs[0], "farthest": diffs[-1]}


def sweep_fit(data: Path = DATA) -> dict[str, Any]:
    recs = [r for r in records(PROFILE, data) if r.get("model_error") is not None]
    errors = [abs(r["model_error"]) for r in recs]
    fit = recs[0]
    return {"lo": pow2(min(r["n"] for r in recs)), "hi": pow2(max(r["n"] for r in recs)), "points": len(recs),
            "kernel_us": fit["model_fixed_kernel_us"], "launch_us": fit["model_launch_us"],
            "latency_ns": fit.get("model_latency_ns") or 0.0,
            "within_pct": 5 * math.ceil(max(errors) * 100 / 5), "mean_pct": 100 * statistics.mean(errors)}


def elementwise_caption(data: Path = DATA) -> str:
    e = elementwise(data)
    return (f"*`out = alpha * gelu(x + b)` on {e['n']} float32 elements, NVIDIA {gpu(ELEMENTWISE, data)}: "
            f"fusing three kernels cuts the traffic {e['bytes_ratio']:.2f}x and the time {e['time_ratio']:.2f}x; "
            f"the fused kernel with 16-byte accesses moves {e['GBs']['fused']:.0f} GB/s, {e['of_ceiling']['fused']:.0%} of the "
            f"{e['ceiling']:.0f} GB/s copy ceiling measured in the same run, where the one-element-per-thread "
            f"version reaches {e['of_ceiling']['fused_naive']:.0%} (`figures/data/{ELEMENTWISE}`).*")


def sweep_caption(data: Path = DATA) -> str:
    sw = sweep_fit(data)
    return (f"*Median device time against n, {sw['lo']}..{sw['hi']} elements, cold L2 (points, quartile bars) and "
            f"the model (lines): every one of the {sw['points']} points within {sw['within_pct']}% of the model, "
            f"mean {sw['mean_pct']:.1f}% (`figures/data/{PROFILE}`).*")


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    e, nc, sw = elementwise(data), ncu_vs_plan(data), sweep_fit(data)
    run, swept = gpu(ELEMENTWISE, data), gpu(PROFILE, data)  # two runs on two GPUs: each row names its own
    return [
        (f"{run}: copy ceiling (the better of driver memcpy and a 16-byte copy kernel, same run)",
         f"{e['ceiling']:.0f} GB/s"),
        (f"{run}: fused chain, 16-byte accesses / 4-byte accesses / persistent grid-stride ({e['n']} elements)",
         " / ".join(f"{e['GBs'][v]:.0f}" for v in ("fused", "fused_naive", "persistent")) + " GB/s"),
        (f"{run}: unfused / fused time, against planned bytes {e['bytes_ratio']:.2f}x", f"{e['time_ratio']:.2f}x"),
        (f"{swept}: Nsight Compute DRAM bytes vs plan at {nc['n']} elements (all {nc['variants']} variants)",
         f"{nc['closest']:+.1%} to {nc['farthest']:+.1%}".replace("+-", "-")),
        (f"{swept}: sweep {sw['lo']}..{sw['hi']}, model vs measured median, {sw['points']} points (fitted: kernel "
         f"{sw['kernel_us']:.1f} us, launch {sw['launch_us']:.0f} us, DRAM latency {sw['latency_ns']:.0f} ns)",
         f"all within {sw['within_pct']}%, mean {sw['mean_pct']:.1f}%"),
    ]


BLOCKS = {"elementwise-caption": elementwise_caption, "sweep-caption": sweep_caption}
