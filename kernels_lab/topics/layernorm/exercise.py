"""Lesson 08's graded exercise, `welford_combine`: the student writes the device function that merges two
partial statistics (count, mean, M2); the judge (COMBINE_JUDGE, an exercise of kind "data") runs it on pairs
of partials chosen so that each wrong rule shows in its own check, and inside the one-pass layernorm
(welford.welford_layernorm) against float64.

    check                                   probes                                   the bug it catches
    means weighted by counts                unequal counts; one partial empty; the   averaged means, swapped weights,
                                            means either way round; equal counts;    a distance |mb - ma| for delta,
                                            equal means; an empty and a one-element  n <= 1 taken for "nothing to
                                            partial                                  merge", shortcuts
    M2 gains the spread between the means   the same                                 no delta^2 na nb / n, wrong weight,
                                                                                     a shortcut that drops Mb
    two empty partials                      (0, 0, 0) with (0, 0, 0)                 a division by n = 0
    precise far from 0                      equal counts and means near 1e4, and     sums of squares, (mb - ma)^2
                                            unequal ones with means apart            expanded (they cancel)
    layernorm with your combine             whole rows, short rows (empty lanes),    every one of them, in use
                                            rows around 1e4 with spread 1
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core import Case, Exercise
from . import welford
from .welford import layernorm_with, merge_kernel, merge_pairs, welford_layernorm
from .workload import WORKLOAD

WEIGHTS = "means weighted by counts"
SPREAD = "M2 gains the spread between the means"
EMPTY = "two empty partials"
FAR = "precise far from 0"
ROWS = "layernorm with your combine"

FAR_MEAN = 1e4          # rows and partials far from 0: what sums of squares cannot survive in float32
FAR_ATOL = 5e-3         # a float32 x near 1e4 is known to ~1e-3: no merge does better on out = (x - mean) * rstd
SHORT_COLS = 13         # fewer than 16 columns: lanes 13..31 are empty, and the butterfly merges two empty ones


def pairs(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The partials merged on their own, (a, b) per group, float32 (k, 3) arrays of (count, mean, M2)."""
    rng = np.random.default_rng(seed)
    k = 6
    na = rng.integers(1, 20, k)
    nb = na + rng.integers(3, 20, k)  # never equal: a rule that ignores or swaps the counts shows
    swap = np.arange(k) % 2 == 1      # the larger partial on either side
    na, nb = np.where(swap, nb, na), np.where(swap, na, nb)
    ma, mb = rng.uniform(-3, -0.5, k), rng.uniform(0.5, 3, k)  # always apart: the spread between them counts
    partial = lambda n, m: np.stack([n, m, (n - 1) * rng.uniform(0.5, 2.0, k)], axis=1)  # noqa: E731
    a, b = partial(na, ma), partial(nb, mb)
    empty = np.zeros((1, 3))
    far_n = np.array([[64.0], [200.0]])
    far_m = np.float32(FAR_MEAN + rng.uniform(0.1, 0.9))
    far_a = np.hstack([far_n, [[far_m], [far_m]], rng.uniform(40, 260, (2, 1))])
    far_b = np.hstack([far_n, [[far_m], [far_m]], rng.uniform(40, 260, (2, 1))])
    # drawn after the probes above (their values stay): merges a rule can get wrong in other ways
    x = rng.uniform(0.5, 3.0)
    one = np.array([[1.0, x, 0.0]])  # a single element, merged with an empty partial: n = 1
    n_eq, m_eq = rng.integers(4, 20), np.float32(rng.uniform(-2, 2))
    equal_n = (np.array([[n_eq, ma[0], (n_eq - 1) * 0.7]]), np.array([[n_eq, mb[0], (n_eq - 1) * 1.3]]))
    equal_m = (np.array([[na[2], m_eq, (na[2] - 1) * 0.8]]), np.array([[nb[2], m_eq, (nb[2] - 1) * 1.6]]))
    far_apart = (np.array([[40.0, far_m, rng.uniform(40, 260)]]),
                 np.array([[90.0, np.float32(far_m + rng.uniform(0.3, 0.8)), rng.uniform(40, 260)]]))
    f32 = lambda v: np.asarray(v, np.float32)  # noqa: E731
    return {"unequal": (f32(np.vstack([a, a[:1], empty, b[:2], equal_n[0], equal_m[0], empty, one])),
                        f32(np.vstack([b, empty, b[:1], a[:2], equal_n[1], equal_m[1], one, empty]))),
            "empty": (f32(empty), f32(empty)),
            "far": (f32(np.vstack([far_a, far_apart[0]])), f32(np.vstack([far_b, far_apart[1]])))}


def merged(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The float64 merge of each pair (an empty pair merges to (0, 0, 0))."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    n = a[:, 0] + b[:, 0]
    safe = np.where(n > 0, n, 1)
    delta = b[:, 1] - a[:, 1]
    return np.stack([n, a[:, 1] + delta * b[:, 0] / safe, a[:, 2] + b[:, 2] + delta ** 2 * a[:, 0] * b[:, 0] / safe], 1)


def row_sets(size: Any, seed: int) -> list[tuple[str, dict[str, np.ndarray], float]]:
    """(what, the workload's inputs, the absolute tolerance) for each set of rows layernorm runs on."""
    rng = np.random.default_rng(seed)
    far = WORKLOAD.make_inputs(WORKLOAD.size(rows=2, cols=40), rng)
    far["x"] = (FAR_MEAN + rng.standard_normal(far["x"].shape)).astype(np.float32)
    return [(f"{size.rows} x {size.cols} rows", WORKLOAD.make_inputs(size, rng), WORKLOAD.tolerance.atol),
            (f"2 x {SHORT_COLS} rows (lanes {SHORT_COLS} to 31 hold no element)",
             WORKLOAD.make_inputs(WORKLOAD.size(rows=2, cols=SHORT_COLS), rng), WORKLOAD.tolerance.atol),
            (f"2 x 40 rows around {FAR_MEAN:g} with spread 1", far, FAR_ATOL)]


def _call(a: np.ndarray, b: np.ndarray, i: int) -> str:
    show = lambda p: f"({p[0]:g}, {p[1]:.6g}, {p[2]:.6g})"  # noqa: E731
    return f"combine{show(a[i])[:-1]}, {show(b[i])[1:]}"


def _one_m2(a: np.ndarray, b: np.ndarray, got: np.ndarray, want: np.ndarray, i: int) -> bool:
    """Merge i's M2 is one partial's own, the other's dropped."""
    return min(abs(got[i, 2] - a[i, 2]), abs(got[i, 2] - b[i, 2])) < 1e-3 * abs(want[i, 2])


def _nan(got: np.ndarray) -> bool:
    return not np.all(np.isfinite(got))


def _attempt(run: Any, *args: Any) -> Any:
    """run(*args) as a plain list, or {"error": what it raised} (the simulator raises where a GPU gives NaN:
    math.sqrt of a negative variance)."""
    from ...grading.api import launch_failure  # numba's compiler refusing the combine on a GPU, worded as the gate's
    try:
        return run(*args).tolist()
    except Exception as e:  # noqa: BLE001  (a student's function: its failure is a graded outcome)
        return launch_failure(e, welford.__file__)  # the probe kernels' module


def _error(error: str) -> str:
    """What a run raised, with why where the simulator raises and a GPU would not."""
    if not error.startswith("ZeroDivision"):
        return error
    return error + (" (the simulator runs your function as Python, where a float division by 0 raises; on a GPU "
                    "it gives inf or NaN: divide only after the n == 0 guard)")


def _raised(got: Any) -> tuple[bool, str] | None:
    return (False, f"merging the partials with your combine raised {_error(got['error'])}") if isinstance(got, dict) \
        else None


PROBED = "unequal and equal counts, the means either way round and equal, one partial empty or a single element"
ROWS_WHICH = "the checks above say which rule"
ROWS_UNPROBED = ("the merges above all came out right, so your rule goes wrong on partials they do not make: try "
                 "yours by hand on a few pairs of partials against the rule in the lesson")
ONE_M2 = "one partial's M2 alone: the other partial's deviations count too"
DIVIDED_BY_ZERO = ("NaN or inf: a division by a count of 0, or a NaN returned for an empty partial (guard n == 0: "
                   "two empty partials merge to the empty partial (0, 0, 0), which changes nothing it merges with)")


class CombineJudge:
    """Grades welford_combine (grading/grade.py, kind "data") and lessons.check.

      call(entry)            the entry is the student's @cuda.jit(device=True) combine
      job(case)              the seed of the partials and rows, the rows' size
      run(value, job)        (child / notebook) every pair merged on the device, and layernorm with it
      score(case, job, got)  (parent) [(check, ok, message)], each check on its own probes (module docstring)
    """

    checks = (WEIGHTS, SPREAD, EMPTY, FAR, ROWS)

    def call(self, entry: Any) -> Any:
        if not getattr(entry, "_device", False) and not getattr(entry, "targetoptions", {}).get("device"):
            raise TypeError(f"combine must be a @cuda.jit(device=True) function, got {type(entry).__name__}: "
                            f"define combine(na, ma, qa, nb, mb, qb) -> (n, mean, m2)")
        return entry

    def job(self, case: Case) -> dict[str, Any]:
        return {"seed": case.seed, "rows": case.size.rows, "cols": case.size.cols,
                "about": f"merges of chosen partials, and layernorm with your combine at {case.size}"}

    def run(self, value: Any, job: dict[str, Any]) -> dict[str, Any]:
        from numba import types

        from ...grading.api import Probe, not_compiled, rejection, where_not_compiled
        f32, partials = types.Array(types.float32, 1, "C"), types.Array(types.float32, 2, "C")
        # the simulator compiles nothing: both kernels go through numba's compiler in a child, as on a GPU
        compiled = where_not_compiled({
            "merge": Probe(merge_kernel, (value,), (partials, partials, partials)),
            "layernorm": Probe(welford_layernorm, (value,), (f32, f32, f32, f32, types.int64, types.int64,
                                                            types.float32))})
        if (refused := rejection(compiled)) is not None:
            return {"rejected": refused}
        ran: dict[str, Any] = {"pairs": {}, "rows": [], "not_compiled": not_compiled(compiled)}
        for name, (a, b) in pairs(job["seed"]).items():  # each run on its own: one that raises costs its checks only
            ran["pairs"][name] = _attempt(merge_pairs, value, a, b)
        for _, inputs, _ in row_sets(WORKLOAD.size(rows=job["rows"], cols=job["cols"]), job["seed"]):
            ran["rows"].append(_attempt(layernorm_with, value, inputs["x"], inputs["gamma"], inputs["beta"]))
        return ran

    def score(self, case: Case, job: dict[str, Any], got: Any) -> list[tuple[str, bool | None, str]]:
        """got: the case's grading.records.Run (value, ran, run_error)."""
        if (why := got.data_failure(job["about"])) is not None:
            return [(c, False, why) for c in self.checks]
        from ...grading.api import refusal, refused
        ran = got.ran
        if (words := refusal(ran, [*ran.get("pairs", {}).values(), *ran.get("rows", [])], "your combine")) is not None:
            return refused(self.checks, words, "your combine")
        probes, found = pairs(job["seed"]), got.ran["pairs"]
        spread = _raised(found["unequal"]) or self._spread(*probes["unequal"], found["unequal"])
        marks = {WEIGHTS: _raised(found["unequal"]) or self._weights(*probes["unequal"], found["unequal"]),
                 SPREAD: spread, EMPTY: _raised(found["empty"]) or self._empty(found["empty"]),
                 # a rule wrong near 0 has lost SPREAD: far from 0 only the equal means then judge, and a miss
                 # there is the rule's, not precision's
                 FAR: _raised(found["far"]) or self._far(*probes["far"], found["far"], rule_wrong=not spread[0])}
        marks[ROWS] = self._rows(case, job, got.ran["rows"], all(ok for ok, _ in marks.values()))
        marks[WEIGHTS] = (marks[WEIGHTS][0], marks[WEIGHTS][1] + got.ran.get("not_compiled", ""))
        return [(c, *marks[c]) for c in self.checks]

    @staticmethod
    def _weights(a: np.ndarray, b: np.ndarray, got: Any) -> tuple[bool, str]:
        want, got = merged(a, b), np.asarray(got, np.float64)
        for i in range(len(a)):
            call = _call(a, b, i)
            if _nan(got[i, :2]):
                return False, f"{call} gave count {got[i, 0]:g}, mean {got[i, 1]:g}: {DIVIDED_BY_ZERO}"
            if abs(got[i, 0] - want[i, 0]) > 1e-3:
                return False, f"{call} gave count {got[i, 0]:g}: the union of the two has na + nb = {want[i, 0]:g}"
            if abs(got[i, 1] - want[i, 1]) > 1e-5 + 1e-5 * abs(want[i, 1]):
                (na, ma, _), (nb, mb, _) = a[i].astype(np.float64), b[i].astype(np.float64)
                why = ("merged with an empty partial, a partial must come back unchanged" if na == 0 or nb == 0 else
                       "the plain average of the two means: a partial of many elements must weigh more than one of few"
                       if abs(got[i, 1] - (ma + mb) / 2) < 1e-4 else
                       "each mean weighed by the OTHER partial's count (a and b swapped in the weight)"
                       if abs(got[i, 1] - (nb * ma + na * mb) / (na + nb)) < 1e-4 else
                       "the mean stayed ma: the weight nb / n came out 0 (an integer division, //?)"
                       if abs(got[i, 1] - ma) < 1e-5 + 1e-5 * abs(ma) else "not the union's mean")
                return False, (f"{call} gave mean {got[i, 1]:.6g}, want {want[i, 1]:.6g}: {why}; "
                               f"mean = ma + (mb - ma) * nb / n")
        return True, f"count and mean right in all {len(a)} merges ({PROBED})"

    @staticmethod
    def _spread(a: np.ndarray, b: np.ndarray, got: Any) -> tuple[bool, str]:
        want, got = merged(a, b), np.asarray(got, np.float64)
        for i in range(len(a)):
            call = _call(a, b, i)
            if _nan(got[i, 2:]):
                return False, f"{call} gave M2 {got[i, 2]:g}: {DIVIDED_BY_ZERO}"
            if abs(got[i, 2] - want[i, 2]) > 1e-4 + 1e-4 * abs(want[i, 2]):
                why = ("Ma + Mb alone: the spread term is missing or 0 (each M2 is measured from its own mean, and "
                       "the two means differ)" if abs(got[i, 2] - (a[i, 2] + b[i, 2])) < 1e-3 * abs(want[i, 2]) else
                       ONE_M2 if _one_m2(a, b, got, want, i) else "not the union's M2")
                return False, (f"{call} gave M2 {got[i, 2]:.6g}, want {want[i, 2]:.6g}: {why}; "
                               f"M2 = Ma + Mb + (mb - ma)^2 * na * nb / n")
        return True, f"M2 right in all {len(a)} merges ({PROBED})"

    @staticmethod
    def _empty(got: Any) -> tuple[bool, str]:
        got = np.asarray(got, np.float64)
        n, mean, m2 = got[0]
        if _nan(got[0]):
            return False, f"combine(0, 0, 0, 0, 0, 0) gave ({n:g}, {mean:g}, {m2:g}): {DIVIDED_BY_ZERO}"
        if n != 0 or m2 != 0:
            return False, f"combine(0, 0, 0, 0, 0, 0) gave ({n:g}, {mean:g}, {m2:g}): two empty partials merge to an " \
                          f"empty one, count 0 and M2 0"
        return True, f"two empty partials merged to an empty one ({n:g}, {mean:g}, {m2:g})"

    @staticmethod
    def _far(a: np.ndarray, b: np.ndarray, got: Any, rule_wrong: bool = False) -> tuple[bool, str]:
        """rule_wrong: the merge rule already failed near 0 (SPREAD): only the equal means are judged, and a miss
        is said to be the rule's."""
        want, got = merged(a, b), np.asarray(got, np.float64)
        judged = [i for i in range(len(a)) if a[i, 1] == b[i, 1] or not rule_wrong]
        for i in judged:
            if not abs(got[i, 2] - want[i, 2]) <= 1e-3 * abs(want[i, 2]):
                equal = a[i, 1] == b[i, 1]
                rule = "the two means are equal: M2 = Ma + Mb" if equal else "M2 = Ma + Mb + (mb - ma)^2 * na * nb / n"
                why = ("M2 is wrong near 0 too (above)" if rule_wrong else ONE_M2 if _one_m2(a, b, got, want, i) else
                       f"near {FAR_MEAN:g} a square of a value (x^2, M2 + n mean^2, mb * mb) is ~1e8 to 1e10 and "
                       f"float32 keeps 7 digits, so M2 cancels away; merge deviations from the means "
                       f"(delta = mb - ma, squared after the subtraction), never sums of squares")
                return False, f"{_call(a, b, i)} gave M2 {got[i, 2]:.6g}, want {want[i, 2]:.6g} ({rule}): {why}"
        return True, f"M2 right in {len(judged)} merges of partials near {FAR_MEAN:g}"

    @staticmethod
    def _rows(case: Case, job: dict[str, Any], rows: list[Any], merges_right: bool) -> tuple[bool, str]:
        from ...checks import compare
        from ...core import Tolerance
        done = []
        for (what, inputs, atol), out in zip(row_sets(case.size, job["seed"]), rows):
            if isinstance(out, dict):
                return False, f"{what}: layernorm with your combine raised {_error(out['error'])}"
            want = WORKLOAD.reference(inputs)["out"]
            _, bad = compare("out", np.asarray(out, np.float32), want, Tolerance(WORKLOAD.tolerance.rtol, atol))
            if bad is not None:
                return False, (f"{what}: {bad.bad} elements wrong, first out{list(bad.index)}: expected "
                               f"{bad.expected:.6g}, got {bad.got:.6g} (each lane folds its elements in as "
                               f"(1, x, 0) and the lanes merge in a butterfly: "
                               f"{ROWS_UNPROBED if merges_right else ROWS_WHICH})")
            done.append(what)
        return True, f"every element right against float64: {'; '.join(done)}"


COMBINE_JUDGE = CombineJudge()

WORKLOAD.add_exercise(Exercise(
    name="welford_combine", workload="layernorm", variant="fused", lesson="08",
    title="merge two partial statistics (count, mean, M2): Welford's rule, the sequel to lesson 04's (m, d)",
    kind="data", entry="combine",
    signature="@cuda.jit(device=True)\ndef combine(na, ma, qa, nb, mb, qb):  # float32 partials (count, mean, M2) "
              "-> (n, mean, m2) of their union",
    cases=(Case(WORKLOAD.size(rows=3, cols=67), 81), Case(WORKLOAD.size(rows=2, cols=45), 82, hidden=True)),
    argument_order=("combine",), judge="kernels_lab.topics.layernorm.exercise:COMBINE_JUDGE",
    points={WEIGHTS: 1.5, SPREAD: 1.5, EMPTY: 1, FAR: 1, ROWS: 2}))
