"""The verdict on one run, and the budgets: the one place the grader and the lessons' own checks
(kernels_lab.lessons.check) decide what is right, what is over budget, and which hint applies.

A run is right only when its output matches the reference AND a kernel did the work: the entry
of a kernel exercise is a real kernel of the student's, launched; a host exercise launched at
least one kernel of its own; and every output element was last changed by a launch of the
student's own kernels (not by the host, not by a copied reference kernel). Hints are said only
when the evidence is there, and each names the run it was seen in (size, configuration, and the
index, block and thread where one is known):

  bounds     an index error (simulator) or a memcheck error (GPU) in that run
  stride     a persistent kernel left the tail of the output unwritten
  unwritten  some elements never written
  barrier    the SAME inputs gave DIFFERENT results under different thread schedules (decided in
             the grader, across runs; or racecheck's hazards on a GPU)
  symmetric  the symmetric probe passed and its asymmetric twin (same size, same configuration) failed
  launches / traffic   over budget on a run whose output was right
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import unwritten
from ..checks import compare
from ..core import Exercise, Size

HINTS = {
    "bounds": "missing bounds guard: a thread indexed past the end of an array; guard with `if i < out.size:`",
    "stride": "grid too small without a stride loop: elements from index {first} on were never written; loop "
              "`i = cuda.grid(1)` ... `i += cuda.gridsize(1)` until the end",
    "barrier": "missing barrier: the result changes with the thread schedule; call cuda.syncthreads() between "
               "writing shared memory and reading what other threads wrote",
    "symmetric": "wrong indexing: the kernel gives the right answer only when x == b (it reads one input where it "
                 "should read the other, or uses the wrong index); symmetric inputs would have hidden this",
    "unwritten": "{count} element(s) were never written (first at index {first}), or were computed from a "
                 "temporary read before it was written",
    "launches": "{got} kernel launch(es) where the exercise allows {budget}: fuse the stages into one kernel",
    "traffic": "{got:,} bytes of global-memory traffic at {size} where the plan needs {budget:,}: an intermediate "
               "goes through global memory (or an input is read twice); keep it in a register",
    "work": "the answer must be computed by your own kernel on the GPU: no credit for a result computed on the "
            "host, copied from a reference, or produced without launching your kernel",
}


def _where(sent: dict[str, Any]) -> str:
    text = f"{sent['case'].size}" if "case" in sent else ""
    if sent.get("config") is not None:
        text += f", config {tuple(sent['config'])}"
    if sent.get("perturb_seed") is not None:
        text += f", perturbed schedule seed {sent['perturb_seed']}"
    return text


def _writer(got: dict[str, Any], index: int) -> str:
    lw = got.get("last_writer") or {}
    rows = lw.items() if isinstance(lw, dict) else (((r[0], r[1]), (r[2], r[3])) for r in lw)
    for (label, flat), (blk, thr) in rows:
        if flat == index:
            return f"; last written by block {list(blk)} thread {list(thr)}"
    return ""


def work_problem(ex: Exercise, got: dict[str, Any]) -> str | None:
    """Why this run's output cannot be credited to the student's kernel (None when it can)."""
    if got.get("entry_problem"):
        return got["entry_problem"]
    if "own_launches" not in got:  # a report from before provenance was recorded
        return None
    if ex.kind == "kernel" and not got.get("entry_launches"):
        return f"{ex.entry} was never launched as a kernel (the launch object was replaced or bypassed)"
    if ex.kind == "host" and not got.get("own_launches"):
        foreign = got.get("foreign") or []
        return (f"{ex.entry} launched no kernel of its own" +
                (f" (only {', '.join(foreign)}, which it did not define)" if foreign else "") +
                ": the answer must come from a kernel launch")
    for name, p in (got.get("provenance") or {}).items():
        if p.get("host"):
            return (f"{p['host']} element(s) of {name} were written on the host, not by a kernel (first at index "
                    f"{p['first_host']})")
        if p.get("foreign"):
            return (f"{p['foreign']} element(s) of {name} were written by a kernel you did not write "
                    f"({', '.join(got.get('foreign') or ['?'])}; first at index {p['first_foreign']})")
    return None


def case_verdict(ex: Exercise, sent: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """Correctness of one run, with the first wrong element and who wrote it.

    Returns {"ok", "why", "hint": (key, args) or None, "kind": "ok" | "error" | "work" | "wrong"}."""
    where = _where(sent)
    if got.get("entry_problem"):
        return {"ok": False, "kind": "work", "why": got["entry_problem"], "hint": ("work", {})}
    if got.get("error"):
        e = got["error"]
        what = " ".join(filter(None, (e.get("type"), e.get("where"))))
        hint = ("bounds", {"where": f"{where}: {what}"}) if e["type"] == "IndexError" else None
        return {"ok": False, "kind": "error", "why": f"{where}: {what}: {e['message']}", "hint": hint}
    problem = work_problem(ex, got)
    if problem:
        return {"ok": False, "kind": "work", "why": f"{where}: {problem}: no credit", "hint": ("work", {})}
    ref = ex.spec.reference(sent["inputs"])
    for name, expected in ref.items():
        out = got["outputs"][name]
        _, bad = compare(name, out, expected, ex.tol())
        if bad is not None:
            never = np.flatnonzero(unwritten(out).reshape(-1))  # still the poison (a NaN of its own is not)
            hint = None
            if len(never):
                tail = never[0] > 0 and np.all(never == np.arange(never[0], out.size))
                args = {"first": int(never[0]), "count": len(never), "where": where}
                hint = ("stride", args) if tail and ex.pattern == "persistent" else ("unwritten", args)
            return {"ok": False, "kind": "wrong", "hint": hint,
                    "why": f"{where}: {bad.bad} wrong element(s); first {name}{list(bad.index)}: expected "
                           f"{bad.expected:.6g}, got {bad.got:.6g}{_writer(got, bad.index[0])}"}
    return {"ok": True, "kind": "ok", "hint": None}


def same_result(ex: Exercise, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Did two runs on the SAME inputs give the same result (within the tolerance, NaN equal to NaN;
    two errors of the same type count as the same)? Used to tell a race from a deterministic bug."""
    if a.get("error") or b.get("error"):
        return bool(a.get("error")) and bool(b.get("error")) and a["error"]["type"] == b["error"]["type"]
    if a.get("outputs") is None or b.get("outputs") is None:
        return a.get("outputs") is None and b.get("outputs") is None
    tol = ex.tol()
    for name, x in a["outputs"].items():
        y = b["outputs"].get(name)
        if y is None or x.shape != y.shape:
            return False
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        if not np.allclose(x64, y64, rtol=tol.rtol, atol=tol.atol, equal_nan=True):
            return False
    return True


def hint_text(hint) -> str | None:
    """The words of a hint, naming the run it was first seen in when known."""
    if hint is None:
        return None
    key, args = hint if isinstance(hint, tuple) else (hint, {})
    text = HINTS[key].format(**args)
    if args.get("where") and "{where}" not in HINTS[key]:
        text += f" (first seen at {args['where']})"
    return text


def launch_problem(ex: Exercise, size: Size, launches: int) -> str | None:
    """None when the launch count is within the budget (the budget variant's plan, or the override)."""
    budget = ex.launch_budget(size)
    if launches > budget:
        return f"{launches} launch(es) at {size}; the budget is {budget}" + (f" ({ex.budget_note})" if ex.budget_note else "")
    return None


def traffic_problem(ex: Exercise, size: Size, traced_bytes: int) -> str | None:
    """None when the traced global traffic is within the byte budget at this size."""
    budget = ex.byte_budget(size)
    if traced_bytes > budget:
        return (f"{traced_bytes:,} bytes of global traffic at {size}; the plan needs {budget:,}"
                + (f" ({ex.budget_note})" if ex.budget_note else ""))
    return None
