"""The verdict on one run, and the budgets: the one place the grader and the lessons' own checks
(kernels_lab.lessons.check) decide what is right, what is over budget, and which hint applies."""

from __future__ import annotations

from typing import Any

import numpy as np

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
    "traffic": "{got:,} bytes of global-memory traffic where the plan needs {budget:,}: an intermediate goes "
               "through global memory (or an input is read twice); keep it in a register",
}


def case_verdict(ex: Exercise, sent: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """Correctness of one run, with the first wrong element and who wrote it."""
    if got.get("error"):
        e = got["error"]
        hint = "bounds" if e["type"] == "IndexError" else None
        return {"ok": False, "why": f"{e['type']} {e['where']}: {e['message']}", "hint": hint}
    ref = ex.spec.reference(sent["inputs"])
    for name, expected in ref.items():
        out = got["outputs"][name]
        _, bad = compare(name, out, expected, ex.tol())
        if bad is not None:
            where = ""
            for (label, flat), (blk, thr) in (got.get("last_writer") or {}).items():
                if flat == bad.index[0]:
                    where = f"; last written by block {list(blk)} thread {list(thr)}"
                    break
            unwritten = np.flatnonzero(~np.isfinite(out.astype(np.float64)))
            hint = None
            if len(unwritten):
                tail = unwritten[0] > 0 and np.all(unwritten == np.arange(unwritten[0], out.size))
                hint = ("stride", {"first": int(unwritten[0])}) if tail and ex.pattern == "persistent" else \
                    ("unwritten", {"count": len(unwritten), "first": int(unwritten[0])})
            return {"ok": False, "hint": hint,
                    "why": f"{sent['case'].size}, config {sent['config']}: {bad.bad} wrong element(s); first {name}{list(bad.index)}:"
                           f" expected {bad.expected:.6g}, got {bad.got:.6g}{where}"}
    return {"ok": True}


def hint_text(hint) -> str | None:
    if hint is None:
        return None
    key, args = hint if isinstance(hint, tuple) else (hint, {})
    return HINTS[key].format(**args)




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
