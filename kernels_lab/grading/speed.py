"""Speed on a GPU: the student's kernel against the reference solution, interleaved, classed conservatively.

The submission's child only compiles: it hands over the image numba linked for the speed size's
argument types (export). The parent then starts a clean timing process (timing_child, confined like
every child; timed), where the submission's Python never ran: both kernels run on inputs made there,
rep by rep in turn, each after its output is filled with numbers that are not the answer and an L2
flush, timed with CUDA events, and every repetition's output is checked against the reference's.
Each repetition gives one ratio student / reference; a wrong result in any of them loses the point.

In the parent: the ratios' median is the leaderboard value (lower is faster); the class
comes from their quartiles, so a claim needs the spread to back it:
    faster   q3 < 1 - margin     slower   q1 > 1 + margin
    same     q1 >= 1 - margin and q3 <= 1 + margin          unclear  anything else
Only a correct kernel at the speed size is classed; a wrong one gets no speed credit.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from ..core import Exercise

MARGIN = 0.05


@dataclass(frozen=True)
class SpeedSpec:
    n: int                               # elements: large enough that launch noise does not matter
    reference: str                       # "module:attribute" of the reference solution's kernel
    reference_config: Callable[[int], tuple[int, int]]
    reps: int = 40


def load_reference(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def export(kernel, args: tuple) -> dict[str, Any]:
    """Submission's child: the image (cubin) numba links for `kernel` with these arguments' types, and its
    entry name. numba internals (numba-cuda 0.30): _Kernel._codelibrary.get_cubin() (a cuda.core ObjectCode,
    its bytes in .code) and ._entry_name; tests/test_grading_adversarial.py fails loudly if they move."""
    import numpy as np
    from ..launch_paths import compiled_for
    library = compiled_for(kernel, args)._codelibrary
    image = library.get_cubin()
    return {"image": np.frombuffer(bytes(getattr(image, "code", image)), np.uint8),
            "entry_name": str(library._entry_name)}


def timed(ex: "Exercise", job: dict[str, Any], exported: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    """Parent: the exported image timed and checked in a clean confined process (timing_child). Its inputs'
    seed and the output indices it sends back are drawn here, never sent to the submission's child."""
    import pickle
    import secrets
    import sys
    import tempfile
    from pathlib import Path

    import numpy as np

    from .confine import DRIVER_WRITES, hand_over, scratch_folder
    from .lifecycle import read_report, run_confined
    from .records import ReportError
    seed, nonce = secrets.randbits(63), secrets.token_hex(16)
    n = min(int(np.prod(shape)) for shape, _ in ex.spec.output_specs(job["size"]).values())
    check = np.unique(np.append(np.random.default_rng(seed).integers(0, n, 1 << 16), n - 1))
    with tempfile.TemporaryDirectory(prefix="kl-speed-") as tmp:
        tmp = Path(tmp)
        scratch = scratch_folder(tmp)
        job_path, report_path = scratch / "job.pkl", scratch / "report.json"
        with open(job_path, "wb") as f:
            pickle.dump({**job, "seed": seed, "check_indices": check, "nonce": nonce,
                         "image": bytes(np.asarray(exported["image"], np.uint8)), "entry_name": exported["entry_name"]},
                        f)
        hand_over(job_path)
        got = run_confined([sys.executable, "-m", "kernels_lab.grading.timing_child", str(job_path), str(report_path),
                            str(scratch / "progress.json")], tmp, run_s=timeout_s, total_s=timeout_s + 120,
                           address_limit=False, extra_writable=DRIVER_WRITES,
                           phase_limits={"speed": timeout_s, "start": 120.0})
        try:
            report = read_report(report_path)
        except ReportError as e:
            return {"error": {"type": "ReportError", "message": f"the timing process's report: {e}", "where": ""}}
    if report is None or report.get("nonce") != nonce:
        why = "timed out" if got.timed_out else f"exit {got.exit_code}, signal {got.signal}"
        return {"error": {"type": "TimingProcess", "where": "", "message": f"the timing process wrote no report "
                                                                           f"({why}): {got.stderr[-300:]}"}}
    return {**report, "seed": seed, "check_indices": check}


@dataclass(frozen=True)
class SpeedVerdict:
    ratio: float   # median of student / reference over the repetitions (lower is faster)
    q1: float
    q3: float
    label: str     # faster / same / slower / unclear

    def describe(self) -> str:
        return (f"{self.label}: your kernel takes {self.ratio:.2f}x the reference's time "
                f"(quartiles {self.q1:.2f}-{self.q3:.2f} over interleaved runs)")


def classify(student_ms: list[float], reference_ms: list[float], margin: float = MARGIN) -> SpeedVerdict:
    ratios = np.asarray(student_ms) / np.asarray(reference_ms)
    q1, med, q3 = (float(v) for v in np.percentile(ratios, [25, 50, 75]))
    if q3 < 1 - margin:
        label = "faster"
    elif q1 > 1 + margin:
        label = "slower"
    elif q1 >= 1 - margin and q3 <= 1 + margin:
        label = "same"
    else:
        label = "unclear"
    return SpeedVerdict(med, q1, q3, label)


def points_for(verdict: SpeedVerdict, points: float) -> float:
    """Full points unless clearly slower: the class is conservative, the points are too."""
    return 0.0 if verdict.label == "slower" else points
