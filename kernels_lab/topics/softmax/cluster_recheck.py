"""One short GPU run after the cluster layouts were chosen from the data (issue 36): grade lesson 04's exercise
cluster_combine on the GPU, and re-time the new default layout beside the previous one, split and torch.

    PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 -m kernels_lab.topics.softmax.cluster_recheck OUT_DIR

1. grades (kernels-lab's grader, its confined child on the GPU; no compile gate, no sanitizers: ~10 s each) of
   the lesson's solution, three wrong combines and one numba's compiler refuses (tests/mutations.py): each
   one's points against those the simulator gives it (tests/test_grading_cluster.py);
2. at 32768, 65536 and 131072 columns (256 MiB of x): the default layout (cluster.cluster_shape, the best
   measured) and the previous default (k = portable_slices, the fewest threads), `split` and torch.softmax,
   each checked against float64 into poisoned outputs first, timed interleaved, re-checked after;
3. layernorm's cluster variant at 65536 and 131072 columns (past `fused`'s 16384): checked against float64 into
   poisoned outputs, timed beside `unfused` and torch's layer_norm (GB/s counting x read once, out written once);
4. OUT_DIR/cluster_recheck.json (command, device, date, versions; rewritten after every stage) and a table last.
   About 60-80 s on an H200.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...arrays import poisoned, to_device
from ...core import get_workload
from ...profile.ceiling import measure_copy_ceiling
from ...profile.results import SCHEMA, make_meta
from . import cluster as cl
from . import cluster_exercise as ce
from . import cluster_probe as cp
from . import split as sp

ROOT = Path(__file__).resolve().parents[3]
WIDTHS = (32768, 65536, 131072)
EXPECTED = {"lesson solution": {}, "cluster_no_barrier_before": {ce.WAITS: 0},
            "cluster_no_barrier_after": {ce.HOLDS: 0}, "cluster_no_rescale": {ce.COMBINE: 0},
            "cluster_python_list": {ce.COMBINE: 0, ce.WAITS: 0, ce.HOLDS: 0}}
FULL = {ce.COMBINE: 4.0, ce.WAITS: 3.0, ce.HOLDS: 3.0}


def grades() -> list[dict[str, Any]]:
    from ...grading.api import get_exercise, grade
    from ...lessons import solution_source
    found = []
    for name, lost in EXPECTED.items():
        try:
            # the wrong combines are named mutations of the solution (tests/mutations.py)
            source = solution_source("cluster_combine") if name == "lesson solution" else \
                runpy.run_path(str(ROOT / "tests" / "mutations.py"))["mutant"](name)
        except Exception as e:  # noqa: BLE001  (jupytext missing: the [lessons] extra; said, the rest goes on)
            found.append({"submission": name, "outcome": f"not graded: {type(e).__name__}: {e}", "scores": {},
                          "expected": {**FULL, **lost}, "as_expected": False})
            continue
        start = time.time()
        g = grade(get_exercise("cluster_combine"), source, name, compile_gate=False, sanitizers=False, timeout_s=60)
        got = {t.name: t.score for t in g.tests}
        want = {**FULL, **lost}
        found.append({"submission": name, "outcome": g.outcome, "scores": got, "expected": want,
                      "as_expected": g.outcome == "graded" and all(abs(got.get(k, -1) - v) < 1e-3
                                                                   for k, v in want.items()),
                      "words": {t.name: t.output for t in g.tests}, "seconds": round(time.time() - start, 1)})
        print(f"{name}: {found[-1]['outcome']} {got} {'as expected' if found[-1]['as_expected'] else 'UNEXPECTED'}",
              flush=True)
    return found


def previous_default(cols: int) -> cl.ClusterShape | None:
    """The layout cluster_shape chose before the data did: portable_slices blocks of the fewest threads."""
    return cl.cluster_shape(cols, slices=cl.portable_slices(cols))


def entries(cols: int) -> list[tuple[str, Any]]:
    """The new default, the previous default (where it differs) and split, as cluster_probe times them."""
    new, old = cl.cluster_shape(cols), previous_default(cols)
    found: list[tuple[str, Any]] = [(f"{cp.name_of(new)} (default)", lambda i, o: cl.bind_cluster(i, o))]
    if old is not None and old != new:
        found.append((f"{cp.name_of(old)} (previous default)", lambda i, o, s=old: cl.bind_cluster(i, o, shape=s)))
    return found + [("split (registered)", lambda i, o: sp.bind_split(i, o))]


LN_WIDTHS = (65536, 131072)


def layernorm_width(cols: int, reps: int, torch, ceiling: float, problems: list[str]) -> list[dict[str, Any]]:
    """layernorm's cluster and unfused variants and torch's layer_norm at one width, 256 MiB of x."""
    w = get_workload("layernorm")
    rows = max(1, cp.X_BYTES // (4 * cols))

    ok = cp.checked_binds(cols, [(f"layernorm {n}", w.variant(n).bind) for n in ("cluster", "unfused")],
                          lambda bind: cp.check(w, bind, w.size(rows=cp.CHECK_ROWS, cols=cols), cols), problems)
    inputs = w.make_inputs(w.size(rows=rows, cols=cols), np.random.default_rng(cols + 3))
    device = to_device(inputs)
    lines = []
    for name, bind in ok:
        out = poisoned(w.output_specs(w.size(rows=rows, cols=cols)))
        lines.append((name, bind(device, out), lambda win, o=out["out"]: o[win].copy_to_host()))
    holder: dict[str, Any] = {}
    if torch is not None:
        xt, gt, bt = (torch.as_tensor(device[k], device="cuda") for k in ("x", "gamma", "beta"))
        lines.append(("torch layer_norm", lambda: holder.__setitem__(
            "t", torch.nn.functional.layer_norm(xt, (cols,), gt, bt, eps=1e-5)),
            lambda win: holder["t"][win].cpu().numpy()))
    rng = np.random.default_rng(9)
    return cp.time_lines("layernorm", cols, rows, cp.USEFUL, lines, lambda got: cp.check_rows(w, inputs, got, rng),
                         ceiling, problems, reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    start, problems = time.time(), []
    meta = make_meta(command="PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 -m kernels_lab.topics.softmax."
                             "cluster_recheck " + " ".join(sys.argv[1:]))
    graded: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        (args.out_dir / "cluster_recheck.json").write_text(json.dumps(
            {"schema": SCHEMA, "meta": meta, "grades": graded, "records": records, "problems": problems,
             "seconds": round(time.time() - start, 1)}, indent=1) + "\n")
    graded += grades()
    save()
    meta["ceiling_GBs"] = ceiling = measure_copy_ceiling().GBs
    torch = cp.torch_or_none()
    for cols in WIDTHS:
        records += cp.one_width(cols, args.reps, torch, ceiling, problems, entries(cols))
        save()
        print(f"{cols} done at {time.time() - start:.0f} s", flush=True)
    for cols in LN_WIDTHS:
        records += layernorm_width(cols, args.reps, torch, ceiling, problems)
        save()
        print(f"layernorm {cols} done at {time.time() - start:.0f} s", flush=True)
    print("\n".join(["problems:"] + problems) if problems else "no problems")
    for g in graded:
        print(f"grade {g['submission']:<28} {g['outcome']:<8} {sum(g['scores'].values()):>4.1f}/10 "
              f"{'as expected' if g['as_expected'] else 'UNEXPECTED: ' + json.dumps(g['scores'])}")
    print(cp.table(records, ceiling))
    return 0 if not problems and all(g["as_expected"] for g in graded) else 1


if __name__ == "__main__":
    sys.exit(main())
