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
    # found by an attack on the grader (12-07): each passed a check that should have caught it
    "abs_delta": ("delta = mb - ma", "delta = abs(mb - ma)"),
    "expanded_delta_squared": ("delta * delta * na * wb", "(mb * mb - 2 * ma * mb + ma * ma) * na * wb"),
    "equal_counts_shortcut": (GUARD, GUARD + "    if na == nb:\n        return n, (ma + mb) / 2, qa + qb\n"),
    "equal_means_shortcut": (GUARD, GUARD + "    if ma == mb:\n        return n, ma, qa\n"),
    "one_element_skipped": ("if n == 0:", "if n <= 1:"),
    "floor_division": ("wb = nb / n", "wb = nb // n"),
    # right as Python, refused by numba's compiler (a list needs NRT): the simulator's compile gate catches it
    "python_list": ("delta = mb - ma", "delta = [mb - ma][0]"),
}

# (mutation, the checks it loses, a phrase its feedback must hold)
BUGS = [
    ("averaged_means", {lx.WEIGHTS, lx.ROWS}, "the plain average of the two means"),
    ("swapped_mean_weight", {lx.WEIGHTS, lx.ROWS}, "weighed by the OTHER partial's count"),
    ("no_spread_term", {lx.SPREAD, lx.ROWS}, "Ma + Mb alone"),
    ("spread_not_divided", {lx.SPREAD, lx.ROWS}, "M2 = Ma + Mb + (mb - ma)^2 * na * nb / n"),
    ("no_zero_guard", {lx.EMPTY, lx.ROWS}, "a division by a count of 0"),
    ("sums_of_squares", {lx.FAR, lx.ROWS}, "M2 cancels away"),
    ("abs_delta", {lx.WEIGHTS, lx.ROWS}, "not the union's mean"),
    ("expanded_delta_squared", {lx.FAR, lx.ROWS}, "M2 cancels away"),
    ("equal_counts_shortcut", {lx.SPREAD, lx.ROWS}, "Ma + Mb alone"),
    ("equal_means_shortcut", {lx.SPREAD, lx.FAR}, "one partial's M2 alone"),
    ("one_element_skipped", {lx.WEIGHTS, lx.ROWS}, "merged with an empty partial, a partial must come back unchanged"),
    ("floor_division", {lx.WEIGHTS, lx.SPREAD, lx.ROWS}, "an integer division"),
    ("python_list", {lx.WEIGHTS, lx.SPREAD, lx.EMPTY, lx.FAR, lx.ROWS}, "numba's compiler rejects your combine"),
]
COMPILER_ONLY = {"python_list"}  # caught where numba's compiler is (a GPU, or the simulator with NVVM / NVRTC)
# words that belong to some bugs only: no other submission's feedback may say them
OWN_WORDS = {"a division by a count of 0": {"no_zero_guard"},
             "cancels away": {"sums_of_squares", "expanded_delta_squared"},
             "plain average": {"averaged_means"}, "OTHER partial's count": {"swapped_mean_weight"},
             "Ma + Mb alone": {"no_spread_term", "equal_counts_shortcut", "floor_division"},
             "one partial's M2 alone": {"equal_means_shortcut"}, "an integer division": {"floor_division"},
             "merged with an empty partial": {"one_element_skipped"}}

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
    "two_sided_deviations": """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    n = na + nb
    if n > 0:
        mean = (na * ma + nb * mb) / n
        da = ma - mean
        db = mb - mean
        return n, mean, qa + qb + na * da * da + nb * db * db
    return n, np.float32(0), np.float32(0)
""",
    "anchored_at_b_with_pow": """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    if na == 0:
        return nb, mb, qb
    if nb == 0:
        return na, ma, qa
    n = na + nb
    delta = ma - mb
    return n, mb + delta * (na / n), qa + qb + math.pow(delta, 2.0) * na * nb / n
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
