"""Where the tests' submissions come from. A correct submission for a lesson's exercise is that
lesson's solution (written once, in notebooks/lessons/); a wrong one that is the solution with a small change
is that change, named (tests/mutations.py); every other submission is a file in tests/submissions/ (the wrong,
broken and hostile ones)."""

from __future__ import annotations

from pathlib import Path

from kernels_lab.lessons import solution_source
from mutations import MUTANTS, mutant

SUBMISSIONS = Path(__file__).parent / "submissions"
LESSON_SOLUTIONS = {"fuse_correct": "fuse_chain", "persistent_correct": "persistent_chain",
                    "block_sums_correct": "block_sums", "two_launches_correct": "two_launches",
                    "softmax_correct": "fused_softmax", "rnn_correct": "rnn_step",
                    "cluster_correct": "cluster_combine"}


def submission(name: str) -> str:
    """The source of the submission called `name` (no .py)."""
    if name in LESSON_SOLUTIONS:
        return solution_source(LESSON_SOLUTIONS[name])
    if name in MUTANTS:  # a solution with a named mutation (tests/mutations.py)
        return mutant(name)
    return (SUBMISSIONS / f"{name}.py").read_text()


def write_submission(name: str, folder: Path) -> Path:
    """The submission as a file `name`.py in `folder` (for the CLI and batch grading)."""
    path = Path(folder) / f"{name}.py"
    path.write_text(submission(name))
    return path
