"""Grade lesson 08's exercise (welford_combine) on a GPU through the grader (each submission in its confined child,
the hidden case too): the lesson's solution, the other correct styles and each bug class of
tests/welford_submissions.py, each grade against the points the simulator's tests expect.

    PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 benchmarks/grade_welford.py OUT_DIR

Writes OUT_DIR/grades_welford.json (command, device, date, versions; per submission the points per check, the
expected ones and the feedback), the same as text (grades_welford.txt, what figures/data/ keeps) and prints a
table last: one line per submission, expected against graded.
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
    command = f"PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 benchmarks/grade_welford.py {out_dir}"
    doc = {"meta": make_meta(command), "records": records}
    (out / "grades_welford.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "grades_welford.txt").write_text(as_text(doc))
    print(f"wrote {out / 'grades_welford.json'} and grades_welford.txt\n")
    print(table(records))
    return 0 if all(r["as_expected"] for r in records) else 1


def table(records: list[dict]) -> str:
    """One line per submission: the points expected against those graded."""
    lines = [f"{'submission':<30}{'expected':>9}{'graded':>8}  {'as expected':<12}{'s':>6}"]
    lines += [f"{r['submission']:<30}{sum(r['expected'].values()):>9g}{r['score']:>8g}  "
              f"{'yes' if r['as_expected'] else 'NO: ' + r['outcome']:<12}{r['seconds']:>6}" for r in records]
    return "\n".join(lines)


def as_text(doc: dict) -> str:
    """The run as the text figures/data/ keeps of a grading run: command, device, the table, every feedback."""
    m = doc["meta"]
    head = [f"# command: {m['command']}", f"# device: {m['device']}; date {m['date']}; "
            + ", ".join(f"{k} {v}" for k, v in m["versions"].items())]
    words = [f"{r['submission']}: {r['score']:g} ({r['outcome']})\n" + "\n".join(
        f"  {check} ({r['got'].get(check, 0):g}, expected {r['expected'].get(check, 0):g}): {said}"
        for check, said in r["feedback"].items()) for r in doc["records"]]
    return "\n".join(head + ["", table(doc["records"]), ""] + words) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--text"]:  # a run's JSON as the text figures/data/ keeps
        if len(sys.argv) != 3:
            sys.exit("usage: grade_welford.py --text OUT_DIR/grades_welford.json")
        sys.exit(print(as_text(json.loads(Path(sys.argv[2]).read_text())), end=""))
    if len(sys.argv) != 2:
        sys.exit("usage: grade_welford.py OUT_DIR  |  grade_welford.py --text OUT_DIR/grades_welford.json")
    sys.exit(main(sys.argv[1]))
