"""The numbers the README quotes about the launch ladder (ladder_h200.json, `kernels-lab bench launch`)."""

from __future__ import annotations

from pathlib import Path

from ...profile.numbers import DATA, records

LADDER = "ladder_h200.json"


def ladder(data: Path = DATA) -> dict[str, dict[str, float]]:
    return {r["path"]: r for r in records(LADDER, data, "launch")}


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    lad = ladder(data)
    host = [lad[f"numba dispatch, {k} array arg{'s' if k != 1 else ''}"]["host_us_per_launch"] for k in (0, 1, 4)]
    return [
        ("host us per launch: numba dispatch 0 / 1 / 4 array args", " / ".join(f"{h:.1f}" for h in host) + " us"),
        ("pre-bound cuda.core launch (arguments flattened once), 4 args",
         f"{lad['pre-bound cuda.core launch, 4 array args']['host_us_per_launch']:.1f} us"),
        ("CUDA graph replay, device us per kernel boundary",
         f"{lad['CUDA graph replay, 4 array args']['device_us_per_boundary']:.2f} us"),
        ("persistent kernel, one grid-sync step",
         f"{lad['persistent kernel, one grid-sync step']['device_us_per_boundary']:.2f} us"),
    ]
