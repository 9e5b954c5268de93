"""Layernorm on one GPU in one run: every variant validated, then timed against torch and the copy ceiling.

    KERNELS_LAB_BACKEND=gpu python -m kernels_lab.topics.layernorm.bench OUT.json [--reps 30]

1. validate: every variant against float64 at each width it is timed at (CHECK_ROWS rows, fresh random
   inputs, poisoned outputs); a wrong variant is reported and not timed;
2. the copy ceiling (profile.ceiling), measured in this run;
3. at each shape, every variant and torch's F.layer_norm / a torch.compile'd one (when torch imports)
   timed interleaved (instrument.timing: cold L2, medians), then rows of every output re-checked;
4. OUT.json (results v1, kind "layernorm"); a table last.

Every GB/s counts one read and one write of x (8 bytes per element) for everyone, torch included: gamma
and beta are 2 cols floats, noise at these shapes. bytes_model is each variant's own plan.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ...arrays import poisoned, to_device
from ...checks import compare
from ...core import get_workload
from ...instrument.timing import time_launchers
from ...profile.ceiling import measure_copy_ceiling
from ...profile.results import dump, make_meta
from ...runtime import cuda
from .workload import EPS

W = get_workload("layernorm")
SHAPES = ((65536, 1024), (16384, 4096), (8192, 8192), (16384, 1000))
CHECK_ROWS = 67
USEFUL = 8  # bytes per element every GB/s is counted on


def _check(variant: str, cols: int, seed: int) -> str | None:
    size = W.size(rows=CHECK_ROWS, cols=cols)
    inputs = W.make_inputs(size, np.random.default_rng(seed))
    outputs = poisoned(W.output_specs(size))
    W.variant(variant).bind(to_device(inputs), outputs)()
    cuda.synchronize()
    _, bad = compare("out", outputs["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)
    return None if bad is None else f"{bad.bad} bad ({bad.unwritten} unwritten), first out{list(bad.index)}"


def _window_ok(inputs: dict, got: np.ndarray, r0: int) -> str | None:
    window = slice(r0, r0 + 8)
    ref = W.reference({"x": inputs["x"][window], "gamma": inputs["gamma"], "beta": inputs["beta"]})["out"]
    _, bad = compare("out", got, ref, W.tolerance)
    return None if bad is None else f"rows {r0}..{r0 + 7}: {bad.bad} bad"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="results JSON to write")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    problems: list[str] = []
    ceiling = measure_copy_ceiling()
    print(f"copy ceiling {ceiling.GBs:.0f} GB/s ({ceiling.best})", flush=True)
    records = []
    for rows, cols in SHAPES:
        size = W.size(rows=rows, cols=cols)
        todo = []
        for name, v in W.variants.items():
            if v.why_not(size) is not None:
                continue
            wrong = _check(name, cols, seed=rows + cols)
            if wrong:
                problems.append(f"{name} at cols={cols} is WRONG, not timed: {wrong}")
                continue
            todo.append(name)
        inputs = W.make_inputs(size, np.random.default_rng(7 * rows + cols))
        dev = to_device(inputs)
        outs = {name: poisoned(W.output_specs(size)) for name in todo}
        launchers = [W.variant(name).bind(dev, outs[name]) for name in todo]
        names = list(todo)
        held: dict = {}
        if torch is not None:
            xt, gt, bt = (torch.as_tensor(dev[k], device="cuda") for k in ("x", "gamma", "beta"))
            eager = lambda: held.__setitem__("torch.layer_norm", F.layer_norm(xt, (cols,), gt, bt, EPS))  # noqa: E731
            launchers.append(eager)
            names.append("torch.layer_norm")
            try:
                comp = torch.compile(lambda t: F.layer_norm(t, (cols,), gt, bt, EPS), dynamic=False)
                comp(xt)
                torch.cuda.synchronize()
                launchers.append(lambda: held.__setitem__("torch.compile", comp(xt)))
                names.append("torch.compile")
            except Exception as e:  # noqa: BLE001  (no Triton: the other anchors stand)
                problems.append(f"torch.compile failed at {rows}x{cols}: {type(e).__name__}: {e}"[:300])
        timings = time_launchers(launchers, reps=args.reps)
        cuda.synchronize()
        for name, t in zip(names, timings):
            got_all = held[name] if name in held else outs[name]["out"]
            bad = None
            for r0 in (0, rows // 2, rows - 8):
                got = got_all[r0:r0 + 8].cpu().numpy() if name in held else got_all[r0:r0 + 8].copy_to_host()
                bad = bad or _window_ok(inputs, got, r0)
            if bad:
                problems.append(f"{name} at {rows}x{cols}: wrong after timing: {bad}")
            plan = W.variant(name).plan(size) if name in W.variants else None
            gbs = USEFUL * size.elements / (t.median_ms * 1e-3) / 1e9
            records.append({"kind": "layernorm", "workload": "layernorm", "variant": name,
                            "pattern": W.variant(name).pattern if plan else "anchor", "n": size.elements,
                            "size": dict(size), "launches": plan.n_launches if plan else None,
                            "bytes_model": plan.bytes_total if plan else None, "time_ms": t.median_ms,
                            "time_ms_q1": t.q1_ms, "time_ms_q3": t.q3_ms, "GBs": gbs,
                            "of_ceiling": gbs / ceiling.GBs, "checked": bad is None})
    torch_rows = {(r["size"]["rows"], r["size"]["cols"]): r for r in records if r["variant"] == "torch.layer_norm"}
    for r in records:
        anchor = torch_rows.get((r["size"]["rows"], r["size"]["cols"]))
        r["vs_torch"] = anchor["time_ms"] / r["time_ms"] if anchor else None
    path = dump(make_meta(ceiling_GBs=ceiling.GBs, ceiling=ceiling.candidates, problems=problems), records, args.out)
    print(f"{'shape':>12} {'variant':>17} {'us':>9} {'GB/s':>7} {'ceil':>5} {'vs torch':>8}")
    for r in records:
        shape = f"{r['size']['rows']}x{r['size']['cols']}"
        vs = f"{r['vs_torch']:.2f}x" if r["vs_torch"] else "-"
        print(f"{shape:>12} {r['variant']:>17} {1e3 * r['time_ms']:9.1f} {r['GBs']:7.0f} {r['of_ceiling']:5.2f} {vs:>8}")
    for p in problems:
        print("PROBLEM:", p)
    print(f"wrote {path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
