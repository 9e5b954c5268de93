"""Correctness: run a variant on fresh random inputs into poisoned outputs, compare with float64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .arrays import poisoned, to_device, unwritten
from .core import Size, Tolerance, Variant, Workload


@dataclass(frozen=True)
class Mismatch:
    output: str
    index: tuple[int, ...]
    expected: float
    got: float
    bad: int        # elements outside tolerance (NaN counts: an element never written)
    unwritten: int  # elements still holding the poison


@dataclass(frozen=True)
class CheckResult:
    variant: str
    size: Size
    seed: int
    max_rel_err: float
    mismatch: Mismatch | None

    @property
    def ok(self) -> bool:
        return self.mismatch is None

    def explain(self) -> str:
        if self.ok:
            return f"{self.variant}: {self.size} ok (max relative error {self.max_rel_err:.1e})"
        m = self.mismatch
        what = (f"{m.unwritten} element(s) never written" if m.unwritten
                else f"{m.bad} element(s) outside tolerance")
        return (f"{self.variant}: {self.size} seed={self.seed} WRONG: {what}; first at {m.output}{list(m.index)}: "
                f"expected {m.expected:.6g}, got {m.got:.6g}")


def compare(name: str, got: np.ndarray, ref: np.ndarray, tol: Tolerance) -> tuple[float, Mismatch | None]:
    """Relative error of the whole output, and the first element outside tolerance (if any)."""
    got64 = got.astype(np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"{name}: shape {got.shape} != reference shape {ref.shape}")
    finite = np.isfinite(got64)
    norm = float(np.linalg.norm(ref)) or 1.0
    rel = float(np.linalg.norm(np.where(finite, got64 - ref, 0.0)) / norm)
    close = finite & np.isclose(got64, ref, rtol=tol.rtol, atol=tol.atol)
    if close.all():
        return rel, None
    bad = np.argwhere(~close)
    first = tuple(int(i) for i in bad[0])
    never = int(unwritten(got).sum())
    return rel, Mismatch(name, first, float(ref[first]), float(got64[first]), int(len(bad)), never)


def run_variant(workload: Workload, variant: Variant, size: Size, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Copy inputs in, run once into poisoned outputs, copy outputs back."""
    dev_in = to_device(dict(inputs))
    dev_out = poisoned(workload.output_specs(size))
    variant.bind(dev_in, dev_out)()
    return {k: v.copy_to_host() for k, v in dev_out.items()}


def check_variant(workload: Workload, variant: Variant, size: Size, seed: int) -> CheckResult:
    inputs = workload.make_inputs(size, np.random.default_rng(seed))
    ref = workload.reference(inputs)
    got = run_variant(workload, variant, size, inputs)
    worst, first_bad = 0.0, None
    for name, expected in ref.items():
        rel, bad = compare(name, got[name], expected, workload.tolerance)
        worst = max(worst, rel)
        first_bad = first_bad or bad
    return CheckResult(variant.name, size, seed, worst, first_bad)
