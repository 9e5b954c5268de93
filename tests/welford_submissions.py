"""welford_combine's submissions, shared by tests/test_grading_welford.py (the simulator) and
benchmarks/grade_welford.py (the grader on a GPU): the lesson's solution, other correct styles, and each bug
class made from the solution by a named mutation, with the checks it must lose."""

from __future__ import annotations

from kernels_lab import lessons
from kernels_lab.topics.layernorm import exercise as lx

SOLUTION = lessons.solution_source("welford_combine")
RETURN = "return n, ma + delta * wb, qa + qb + delta * delta * na * wb"
GUARD = "    if n == 0:  # two empty partials (lanes past a short row): nothing to divide by\n        return n, ma, qa\n"

# name: (what is replaced in the solution, by what)
MUTATIONS = {
    "averaged_means": ("ma + delta * wb,", "(ma + mb) / 2,"),
    "swapped_mean_weight": ("ma + delta * wb,", "ma + delta * na / n,"),
    "no_spread_term": ("qa + qb + delta * delta * na * wb", "qa + qb"),
    "spread_not_divided": ("delta * delta * na * wb", "delta * delta * na * nb"),
    "no_zero_guard": (GUARD, ""),
    "sums_of_squares": (RETURN, "s = na * ma + nb * mb\n    return n, s / n, (qa + na * ma * ma) + (qb + nb * mb * mb) - s * s / n"),
}

# (mutation, the checks it loses, a phrase its feedback must hold)
BUGS = [
    ("averaged_means", {lx.WEIGHTS, lx.ROWS}, "the plain average of the two means"),
    ("swapped_mean_weight", {lx.WEIGHTS, lx.ROWS}, "weighed by the OTHER partial's count"),
    ("no_spread_term", {lx.SPREAD, lx.ROWS}, "Ma + Mb alone"),
    ("spread_not_divided", {lx.SPREAD, lx.ROWS}, "M2 = Ma + Mb + (mb - ma)^2 * na * nb / n"),
    ("no_zero_guard", {lx.EMPTY, lx.ROWS}, "a division by a count of 0"),
    ("sums_of_squares", {lx.FAR, lx.ROWS}, "M2 cancels away"),
]
# words that belong to one bug only: no other submission's feedback may say them
OWN_WORDS = {"a division by a count of 0": "no_zero_guard", "cancels away": "sums_of_squares",
             "plain average": "averaged_means", "OTHER partial's count": "swapped_mean_weight",
             "Ma + Mb alone": "no_spread_term"}

STYLES = {  # other correct ways to write it
    "weighted_sums": """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    n = na + nb
    safe = max(n, np.float32(1))
    delta = mb - ma
    return n, (na * ma + nb * mb) / safe, qa + qb + delta * delta * (na * nb / safe)
""",
    "branch_on_empty": """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    if nb == 0:
        return na, ma, qa
    if na == 0:
        return nb, mb, qb
    n = na + nb
    delta = mb - ma
    mean = ma + delta * (nb / n)
    return n, mean, qa + qb + delta * (mb - mean) * nb
""",
    "reciprocal": """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    n = na + nb
    inv = np.float32(1) / n if n > 0 else np.float32(0)
    delta = mb - ma
    return n, ma + delta * nb * inv, qa + qb + delta * delta * na * nb * inv
""",
}


def mutated(name: str) -> str:
    old, new = MUTATIONS[name]
    assert SOLUTION.count(old) == 1, f"mutation {name}: {old!r} is not once in the lesson's solution"
    return SOLUTION.replace(old, new)
