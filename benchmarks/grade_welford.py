"""Grade lesson 08's exercise (welford_combine) on a GPU through the grader (each submission in its confined child,
the hidden case too): the lesson's solution, the other correct styles and each bug class of
tests/welford_submissions.py, each grade against the points the simulator's tests expect.

    PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 benchmarks/grade_welford.py OUT_DIR

Writes OUT_DIR/grades_welford.json (command, device, date, versions; per submission the points per check, the
expected ones and the feedback) and prints a table last: one line per submission, expected against graded.
About a minute on an H200: 10 grades, one at a time, each compiling two kernels with the submission's combine.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from kernels_lab.grading.exercises import get_exercise  # noqa: E402
from kernels_lab.grading.grade import grade  # noqa: E402
from kernels_lab.profile.results import make_meta  # noqa: E402
from welford_submissions import BUGS, SOLUTION, STYLES, mutated  # noqa: E402


def main(out_dir: str) -> int:
    ex = get_exercise("welford_combine")
    full = {name: float(p) for name, p in ex.points.items()}
    cases = [("solution", SOLUTION, full)] + [(f"style {n}", src, full) for n, src in STYLES.items()] + \
        [(f"bug {n}", mutated(n), {c: 0.0 if c in loses else p for c, p in full.items()}) for n, loses, _ in BUGS]
    records = []
    for name, source, expected in cases:
        t0 = time.time()
        g = grade(ex, source, name, timeout_s=120)
        got = {t.name: t.score for t in g.tests}
        records.append({"submission": name, "outcome": g.outcome, "score": g.score, "expected": expected, "got": got,
                        "as_expected": g.outcome == "graded" and got == expected, "seconds": round(time.time() - t0, 1),
                        "feedback": {t.name: t.output for t in g.tests}})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "grades_welford.json"
    command = f"PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 benchmarks/grade_welford.py {out_dir}"
    path.write_text(json.dumps({"meta": make_meta(command), "records": records}, indent=1) + "\n")
    print(f"wrote {path}\n")
    print(f"{'submission':<30}{'expected':>9}{'graded':>8}  {'as expected':<12}{'s':>6}")
    for r in records:
        print(f"{r['submission']:<30}{sum(r['expected'].values()):>9g}{r['score']:>8g}  "
              f"{'yes' if r['as_expected'] else 'NO: ' + r['outcome']:<12}{r['seconds']:>6}")
    return 0 if all(r["as_expected"] for r in records) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: grade_welford.py OUT_DIR")
    sys.exit(main(sys.argv[1]))
