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
  grid_barrier  values read before another block wrote them, in fewer launches than allowed (steps that
             need a grid-wide barrier, run in one launch)
  unwritten  some elements never written
  schedule   right on the GPU, wrong in the simulator's rerun (grade.py): the GPU's schedule hid it
  barrier    the SAME inputs gave DIFFERENT results under different thread schedules (decided in
             the grader, across runs; or racecheck's hazards on a GPU)
  symmetric  the symmetric probe passed and its asymmetric twin (same size, same configuration) failed
  launches / traffic   over budget on a run whose output was right
  stages_fewer / stages_more / intermediate / traffic_staged   an exercise that asks for its stages as
             separate launches (two_launches): not the launches it asks for, not one intermediate between
             them, or more traffic than that intermediate (their words never say "fuse")
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import unwritten
from ..checks import compare
from ..core import Exercise, Size
from .cases import describe_case
from .records import Run, Verdict

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
    "grid_barrier": "{launches} launch(es) where the exercise allows {budget}, and values read before another block "
                    "wrote them: the blocks of one launch run in no fixed order (the simulator runs them one after "
                    "another), and cuda.syncthreads() orders the threads of one block only; a step that reads what "
                    "other blocks wrote in the step before needs a grid-wide barrier: launch once per step",
    "schedule": "the result depends on the order the blocks run in: right on the GPU, wrong on the simulator, which "
                "runs the blocks of a launch one after another ({where}); the GPU's schedule hid it. Typically "
                "missing: a grid-wide barrier between steps (one launch per step), or a fence (cuda.threadfence()) "
                "before setting a flag that another block waits on",
    "launches": "{got} kernel launch(es) where the exercise allows {budget}: fuse the stages into one kernel",
    "traffic": "{got:,} bytes of global-memory traffic at {size} where the plan needs {budget:,}: an intermediate "
               "goes through global memory (or an input is read twice); keep it in a register",
    "traffic_staged": "{got:,} bytes of global-memory traffic at {size} where the plan needs {budget:,}: only the "
                      "one intermediate between the two kernels goes through global memory (written once, read "
                      "once); what a kernel computes on the way (h = x + b) stays in registers",
    "stages_fewer": "{got} launch(es) where the exercise asks for exactly {asked} ({title}): this exercise is about "
                    "the launches themselves, so write one kernel per stage it names, even though fusing them would "
                    "be faster",
    "stages_more": "{got} launches where the exercise asks for exactly {asked} ({title}): put the stages it groups "
                   "into one kernel each",
    "intermediate": "{found}: the exercise asks for one intermediate array (g = cuda.device_array_like(out)) that the "
                    "first kernel writes and the second reads",
    "work": "the answer must be computed by your own kernel on the GPU: no credit for {how}",
}


def _writer(got: Run, name: str, flat: int) -> str:
    """Who last wrote element `flat` (a row-major flat index, as the trace keys it) of output `name`."""
    labels = {label for (label, _), _ in got.last_writer}
    # the trace names an array by the kernel's parameter: the output's own name, unless the student named
    # the parameter otherwise (then only an unambiguous single written array is taken for it)
    label = name if name in labels or len(labels) != 1 else next(iter(labels))
    for (lab, index), (blk, thr) in got.last_writer:
        if index == flat and lab == label:
            return f"; last written by block {list(blk)} thread {list(thr)}"
    return ""


def _one_tail(never: np.ndarray, size: int) -> bool:
    """Are the unwritten flat indices (sorted, unique) one contiguous run that ends the array (and does
    not start it)? Holes anywhere else (a row's last columns, a skipped unit) are not a stride problem."""
    return bool(never[0] > 0 and never[-1] == size - 1 and len(never) == size - never[0])


def _at(shape: tuple[int, ...], flat: int) -> str:
    """An element's position as a student indexes it: 17 for a 1-D array, [2, 5] for a 2-D one."""
    return str(flat) if len(shape) <= 1 else str([int(i) for i in np.unravel_index(flat, shape)])


def _steps_in_one_launch(ex: Exercise, sent: dict[str, Any], got: Run) -> tuple[str, dict[str, Any]] | None:
    """The grid_barrier hint, for a run that read values before another block wrote them (poison in its
    output) with fewer launches than the exercise allows and several blocks in a launch: steps that need
    a grid-wide barrier between them, run in one launch."""
    budget = ex.launch_budget(sent["case"].size)
    launches = got.launches or []
    if launches and len(launches) < budget and any(int(np.prod(grid)) > 1 for _, grid, *_ in launches):
        return "grid_barrier", {"launches": len(launches), "budget": budget, "where": describe_case(sent)}
    return None


# what a work problem's hint says the output was (verdict.HINTS["work"])
_HOST, _FOREIGN, _UNLAUNCHED = ("a result computed on the host", "a result from a kernel you did not write (a copied "
                                "reference)", "a result produced without launching your kernel")
_NOTHING = "code that launches no kernel and writes no output (is the exercise filled in?)"


def work_problem(ex: Exercise, got: Run) -> tuple[str, str] | None:
    """Why this run's output cannot be credited to the student's kernel, and what it was instead (the
    work hint's words); None when it can be credited."""
    if got.entry_problem:
        copied = "not in your submission" in got.entry_problem
        return got.entry_problem, _FOREIGN if copied else _UNLAUNCHED
    if got.own_launches is None:  # a report from before provenance was recorded
        return None
    if ex.kind == "kernel" and not got.entry_launches:
        return f"{ex.entry} was never launched as a kernel (the launch object was replaced or bypassed)", _UNLAUNCHED
    written = any(p.get("host") or p.get("foreign") for p in got.provenance.values())
    if ex.kind == "host" and not got.own_launches:
        how = _FOREIGN if got.foreign else _HOST if written else _NOTHING
        return (f"{ex.entry} launched no kernel of its own" +
                (f" (only {', '.join(got.foreign)}, which it did not define)" if got.foreign else "") +
                ": the answer must come from a kernel launch", how)
    for name, p in got.provenance.items():
        if p.get("host"):
            return (f"{p['host']} element(s) of {name} were written on the host, not by a kernel (first at index "
                    f"{p['first_host']})", _HOST)
        if p.get("foreign"):
            return (f"{p['foreign']} element(s) of {name} were written by a kernel you did not write "
                    f"({', '.join(got.foreign or ['?'])}; first at index {p['first_foreign']})", _FOREIGN)
    return None


def case_verdict(ex: Exercise, sent: dict[str, Any], got: Run) -> Verdict:
    """Correctness of one run, with the first wrong element and who wrote it."""
    where = describe_case(sent)
    if got.entry_problem:
        return Verdict(False, "work", got.entry_problem, ("work", {"how": work_problem(ex, got)[1]}))
    if got.error:
        e = got.error
        hint = ("bounds", {"where": f"{where}: {e.describe()}"}) if e.type == "IndexError" else None
        return Verdict(False, "error", f"{where}: {e.describe()}: {e.message}", hint)
    problem = work_problem(ex, got)
    if problem:
        return Verdict(False, "work", f"{where}: {problem[0]}: no credit", ("work", {"how": problem[1]}))
    if got.outputs is None:
        return Verdict(False, "error", f"{where}: the run reported no outputs")
    ref = ex.spec.reference(sent["inputs"])
    for name, expected in ref.items():
        out = got.outputs[name]
        _, bad = compare(name, out, expected, ex.tol())
        if bad is not None:
            never = np.flatnonzero(unwritten(out).reshape(-1))  # still the poison (a NaN of its own is not)
            hint = None
            if len(never):
                args = {"first": _at(out.shape, int(never[0])), "count": len(never), "where": where}
                hint = ("stride", args) if _one_tail(never, out.size) and ex.pattern == "persistent" \
                    else _steps_in_one_launch(ex, sent, got) or ("unwritten", args)
            flat = int(np.ravel_multi_index(bad.index, out.shape)) if out.ndim else 0
            return Verdict(False, "wrong", f"{where}: {bad.bad} wrong element(s); first {name}{list(bad.index)}: "
                                           f"expected {bad.expected:.6g}, got {bad.got:.6g}"
                                           f"{_writer(got, name, flat)}", hint)
    return Verdict(True, "ok")


def same_result(ex: Exercise, a: Run, b: Run) -> bool:
    """Did two runs on the SAME inputs give the same result (within the tolerance, NaN equal to NaN;
    two errors of the same type count as the same)? Used to tell a race from a deterministic bug."""
    if a.error or b.error:
        return bool(a.error) and bool(b.error) and a.error.type == b.error.type
    if a.outputs is None or b.outputs is None:
        return a.outputs is None and b.outputs is None
    tol = ex.tol()
    for name, x in a.outputs.items():
        y = b.outputs.get(name)
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
