"""A topic's study: everything its published numbers come from, declared once, run by one function.

A topic declares STUDY in topics/NAME/study.py (docs: /README.md "Add a topic"):

    STUDY = Study(workload, groups=(Group("shapes", sizes),), useful_bytes=..., check_sizes=(...), reps=...)

and `kernels-lab bench NAME` runs it (run_study): for each group, each size, each line that fits

  1. check: the line at check_size(size), fresh random inputs, poisoned outputs, against float64 (again on each
     of the study's `harder` inputs); a wrong or failing line is recorded as such and not timed;
  2. bind at the full size (one output each), one launch counted through the launch hook, the anchors made;
  3. time everything interleaved on two clocks: one-pass latency (cold L2, median; instrument.timing.
     time_launchers) and the steady state (back to back; time_steady);
  4. re-check every output after timing: windows along `rows_axis` (rows are independent), else the whole;
  5. one record per line (below); the copy ceiling measured first, ncu's DRAM bytes on request.

Lines: every registered variant of the workload (found when the study runs: a variant registered later
appears without editing the study), the study's `versions` (numbered variants that are not registered: a
layout, a tiling), and its `anchors` (torch and the like: same inputs, same checks, timed in the same loop).

On a back-end that cannot time (the simulator), run_study runs the check sizes instead: every line checked,
timings and anchors skipped with the back-end's reason (meta "skipped"). CI does this (tests/test_studies.py).

One record schema (results v1, kind "study"):

    workload, group, line, variant, registered, pattern, what, n, size,
    launches, bytes_model (the line's own plan), bytes_useful (what the problem must move: the same for every
    line and anchor), bytes_weight (the weights' bytes, where the study declares them; else None),
    checked (True / False / None: not checked), problem, max_rel_err,
    time_ms, time_ms_q1, time_ms_q3 (one-pass latency, cold L2), time_ms_steady, host_us_per_launch,
    GBs_model = bytes_model / time_ms, GBs_useful = bytes_useful / time_ms, GBs_weight = bytes_weight / time_ms,
    of_ceiling = GBs_useful / the study's ceiling (the copy ceiling; the read ceiling where the study says
    ceiling="read": problems that read x and write next to nothing, as cross-entropy),
    vs_anchor = the first anchor's time / this line's (same size),
    and whatever the line's `describe(size)` and the study's `derive(record)` add (a layout, us per step).
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ..arrays import poisoned, to_device
from ..checks import compare
from ..core import Size, Variant, Workload
from ..instrument.launch_hook import count_launches
from ..instrument.timing import time_launchers, time_steady, why_untimed
from ..runtime import cuda
from . import results
from .ceiling import measure_copy_ceiling, measure_read_ceiling

SCHEMA_KIND = "study"
WINDOW = 8      # rows per window in the re-check after timing
GBS_MEANING = {
    "GBs_model": "the line's own planned bytes (its plan: intermediates and re-reads included) per second",
    "GBs_useful": "the bytes the problem must move (the study's useful_bytes, the same for every line and anchor) "
                  "per second",
    "GBs_weight": "the weights' bytes (read once per pass) per second, where the study declares weight_bytes",
}

Launch = Callable[[], None]


class StudyError(RuntimeError):
    """A study that cannot run as declared (an unknown line in a group, no sizes)."""


class AnchorUnavailable(RuntimeError):
    """An anchor that cannot run here (torch missing, no CUDA): the study goes on without it."""


@dataclass(frozen=True)
class Line:
    """One thing a study measures that is ours: a workload variant, registered or a numbered version of one.

    fits(size)      -> False where this line does not run (beyond its variant's own limit)
    repeats(size)   -> True where it would time what another line times (a version whose layout is the
                       registered one's at this width): checked there, never timed twice
    describe(size)  -> fields its records carry (its layout, its kernels' names)
    """

    name: str
    variant: Variant
    registered: bool = False
    what: str = ""
    fits: Callable[[Size], bool] | None = None
    describe: Callable[[Size], dict[str, Any]] | None = None
    repeats: Callable[[Size], bool] | None = None

    def runs(self, size: Size) -> bool:
        return self.variant.why_not(size) is None and (self.fits is None or bool(self.fits(size)))


def version(name: str, variant: Variant, what: str, *, fits: Callable[[Size], bool] | None = None,
            describe: Callable[[Size], dict[str, Any]] | None = None,
            repeats: Callable[[Size], bool] | None = None) -> Line:
    """A numbered version (v3, a tiling): a variant that is not registered, measured as a line of the study."""
    return Line(name, variant, False, what, fits, describe, repeats)


@dataclass(frozen=True)
class Anchor:
    """Someone else's implementation (torch.softmax, cuDNN) on the same inputs, checked and timed alike.

    make(device inputs, size) -> (launch, outputs): launch enqueues one pass; outputs() returns {output
    name: the last pass's result (a host array, a device array or a torch tensor)}. It raises
    AnchorUnavailable (or ImportError) where it cannot run; any other exception is reported as a problem
    and the study goes on. profile/anchors.py makes torch's.
    """

    name: str
    what: str
    make: Callable[[dict[str, Any], Size], tuple[Launch, Callable[[], dict[str, np.ndarray]]]]
    launches: int | None = None


@dataclass(frozen=True)
class Group:
    """Sizes measured together (a figure's panel): `lines` names the lines and anchors timed there (None: all)."""

    name: str
    sizes: tuple[Size, ...]
    lines: tuple[str, ...] | None = None
    reps: int | None = None           # None: the study's


@dataclass(frozen=True)
class Study:
    """What a topic's numbers come from; see the module's docstring.

    useful_bytes(size)  the bytes the problem must move, the same for every line: GBs_useful
    weight_bytes(size)  the weights' bytes read per pass, where there are weights: GBs_weight
    check_size(size)    the smaller size a line is checked at before it is timed at `size` (default: `size`)
    check_sizes         what a back-end that cannot time runs (CI on the simulator): each line is checked at the
                        first of them it runs (list them cheapest first); every line must run at one
    rows_axis           an axis whose rows are independent: the re-check after timing compares windows of it
                        (every input and output whose first dimension is that axis is cut); None: the whole
    harder              {name: inputs -> inputs}: more checks on transformed inputs (x * 64), for the lines whose
                        variant `harder_for` names (None: every line)
    describe(line, size) more fields for every line's records (a registered variant's layout at this size)
    derive(record)      more fields from a finished record (us per step, TFLOP/s)
    meta()              more fields for the results file's meta
    ceiling             what of_ceiling divides by: "copy" (bytes read + written) or "read" (bytes read; the
                        meta then holds both, read_ceiling_GBs beside ceiling_GBs)
    report(doc)         the run's report beyond the table, as text, from its results file ({"meta", "records"}):
                        the topic's ratios and its goals, met or missed (printed by `kernels-lab bench NAME` after
                        the table; never by a lesson or a demo)
    """

    workload: Workload
    groups: tuple[Group, ...]
    useful_bytes: Callable[[Size], int]
    check_sizes: tuple[Size, ...]
    reps: int = 20
    versions: tuple[Line, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    weight_bytes: Callable[[Size], int] | None = None
    check_size: Callable[[Size], Size] | None = None
    rows_axis: str | None = None
    harder: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)
    harder_for: tuple[str, ...] | None = None
    describe: Callable[[Line, Size], dict[str, Any]] | None = None
    derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    meta: Callable[[], dict[str, Any]] | None = None
    ceiling: str = "copy"
    about: str = ""
    report: Callable[[dict[str, Any]], str] | None = None

    @property
    def name(self) -> str:
        return self.workload.name

    def lines(self) -> list[Line]:
        """Every registered variant (as registered now), then the versions."""
        registered = [Line(v.name, v, True, v.about) for v in self.workload.variants.values()]
        return registered + list(self.versions)

    def line_names(self) -> list[str]:
        return [line.name for line in self.lines()] + [a.name for a in self.anchors]

    def validate(self) -> None:
        names = self.line_names()
        if len(set(names)) != len(names):
            raise StudyError(f"study {self.name}: a line name twice in {names}")
        for g in self.groups:
            unknown = [n for n in g.lines or () if n not in names]
            if unknown:
                raise StudyError(f"study {self.name}, group {g.name}: unknown lines {unknown}; lines: {names}")
            if not g.sizes:
                raise StudyError(f"study {self.name}, group {g.name}: no sizes")
        if not self.check_sizes:
            raise StudyError(f"study {self.name}: no check sizes")
        if self.ceiling not in ("copy", "read"):
            raise StudyError(f"study {self.name}: ceiling {self.ceiling!r} is neither 'copy' nor 'read'")


# -- checks ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    ok: bool
    max_rel_err: float | None
    problem: str | None


def check_line(study: Study, line: Line, size: Size, seed: int) -> Check:
    """The line once on fresh inputs (and on each of the study's harder ones) into poisoned outputs, against
    float64. A failure to compile or launch is a failed check, with its exception."""
    w = study.workload
    worst = 0.0
    harder = study.harder if study.harder_for is None or line.variant.name in study.harder_for else {}
    for label, transform in (("", None), *harder.items()):
        inputs = w.make_inputs(size, np.random.default_rng(seed))
        if transform is not None:
            inputs = transform(inputs)
        outputs = poisoned(w.output_specs(size))
        try:
            line.variant.bind(to_device(inputs), outputs)()
            cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (a line that cannot run is a finding, not the end of the study)
            traceback.print_exc(file=sys.stderr)
            return Check(False, None, f"{label + ': ' if label else ''}{type(e).__name__}: {e}"[:600])
        wrong = mismatch(w, {k: v.copy_to_host() for k, v in outputs.items()}, w.reference(inputs))
        if isinstance(wrong, str):
            return Check(False, None, f"{label + ': ' if label else ''}{wrong}")
        worst = max(worst, wrong)
    return Check(True, worst, None)


def mismatch(w: Workload, got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray]) -> str | float:
    """What is wrong with `got` (host arrays by output name) against float64, or the largest relative error
    when nothing is."""
    worst = 0.0
    for name, expected in ref.items():
        if name not in got:
            return f"no output {name!r} (it gave {sorted(got) or 'none'})"
        rel, bad = compare(name, np.asarray(got[name]), expected, w.tolerance)
        if bad is not None:
            return (f"{bad.bad} bad ({bad.unwritten} unwritten), first {name}{list(bad.index)}: expected "
                    f"{bad.expected:.6g}, got {bad.got:.6g}")
        worst = max(worst, rel)
    return worst


def windows(rows: int, rng: np.random.Generator) -> list[slice]:
    """First, a random and the last WINDOW rows."""
    middle = int(rng.integers(0, max(1, rows - WINDOW)))
    starts = dict.fromkeys((0, middle, max(0, rows - WINDOW)))
    return [slice(r, min(rows, r + WINDOW)) for r in starts]


def recheck(study: Study, size: Size, inputs: dict[str, Any], outputs: Callable[[slice | None], dict[str, Any]],
            rng: np.random.Generator, reference: dict[str, np.ndarray] | None) -> str | None:
    """After timing: the timed outputs against float64, in windows of rows_axis or whole (`reference`)."""
    if study.rows_axis is None:
        wrong = mismatch(study.workload, outputs(None), reference)
        return wrong if isinstance(wrong, str) else None
    rows, per_row = size[study.rows_axis], row_inputs(study, size)
    for window in windows(rows, rng):
        cut = {k: (v[window] if k in per_row else v) for k, v in inputs.items()}
        wrong = mismatch(study.workload, outputs(window), study.workload.reference(cut))
        if isinstance(wrong, str):
            return f"rows {window.start}..{window.stop - 1}: {wrong}"
    return None


def row_inputs(study: Study, size: Size) -> set[str]:
    """The inputs indexed by rows_axis, found by making them at 1 and at 2 rows: a per-column vector as long
    as the rows are many (layernorm's gamma at a square size) is not one, and is never cut."""
    one, two = (study.workload.make_inputs(size.replace(**{study.rows_axis: r}), np.random.default_rng(0))
                for r in (1, 2))
    return {k for k, v in two.items() if np.ndim(v) and np.shape(v)[0] == 2 and np.shape(one[k])[0] == 1}


def _host(value: Any, window: slice | None) -> np.ndarray:
    """A device array, a torch tensor or a host array, cut to `window` rows, as a host array."""
    part = value if window is None else value[window]
    if hasattr(part, "copy_to_host"):
        return part.copy_to_host()
    if hasattr(part, "cpu"):
        return part.float().cpu().numpy()
    return np.asarray(part)


# -- one size ------------------------------------------------------------------------------------

@dataclass
class _Entry:
    name: str
    launch: Launch
    outputs: Callable[[slice | None], dict[str, np.ndarray]]
    fields: dict[str, Any]


def _line_fields(study: Study, line: Line, size: Size, check: Check | None) -> dict[str, Any]:
    plan = line.variant.plan(size)
    return {"kind": SCHEMA_KIND, "workload": study.name, "line": line.name, "variant": line.variant.name,
            "registered": line.registered, "pattern": line.variant.pattern, "what": line.what, "n": size.elements,
            "size": dict(size), "launches": plan.n_launches, "bytes_model": plan.bytes_total,
            "checked": None if check is None else check.ok, "problem": None if check is None else check.problem,
            "max_rel_err": None if check is None else check.max_rel_err,
            **(study.describe(line, size) if study.describe is not None else {}),
            **(line.describe(size) if line.describe is not None else {})}


def _anchor_fields(study: Study, anchor: Anchor, size: Size) -> dict[str, Any]:
    return {"kind": SCHEMA_KIND, "workload": study.name, "line": anchor.name, "variant": anchor.name,
            "registered": False, "pattern": "anchor", "what": anchor.what, "n": size.elements, "size": dict(size),
            "launches": anchor.launches, "bytes_model": None, "checked": None, "problem": None, "max_rel_err": None}


def _untimed(study: Study, group: Group, fields: dict[str, Any], size: Size) -> dict[str, Any]:
    return _finish(study, group, {**fields, "time_ms": None, "time_ms_q1": None, "time_ms_q3": None,
                                  "time_ms_steady": None, "host_us_per_launch": None}, size, None)


def _finish(study: Study, group: Group, rec: dict[str, Any], size: Size, ceiling: float | None) -> dict[str, Any]:
    useful = int(study.useful_bytes(size))
    weight = int(study.weight_bytes(size)) if study.weight_bytes is not None else None
    t = rec["time_ms"]

    def rate(b):
        return b / (t * 1e-3) / 1e9 if t and b is not None else None
    rec.update(group=group.name, bytes_useful=useful, bytes_weight=weight, GBs_model=rate(rec["bytes_model"]),
               GBs_useful=rate(useful), GBs_weight=rate(weight))
    rec["of_ceiling"] = rec["GBs_useful"] / ceiling if ceiling and rec["GBs_useful"] else None
    rec["vs_anchor"] = None  # set once every line of the size is timed
    if study.derive is not None:
        rec.update(study.derive(rec))
    return rec


def measure_size(study: Study, group: Group, size: Size, *, reps: int, seed: int, ceiling: float | None,
                 problems: list[str], say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every line (and anchor) of `group` that runs `size`: checked, timed on both clocks, re-checked."""
    w = study.workload
    wanted = set(group.lines) if group.lines is not None else None
    lines = [ln for ln in study.lines() if (wanted is None or ln.name in wanted) and ln.runs(size)
             and not (ln.repeats is not None and ln.repeats(size))]
    anchors = [a for a in study.anchors if wanted is None or a.name in wanted]
    small = study.check_size(size) if study.check_size is not None else size
    checks = {ln.name: check_line(study, ln, small, seed) for ln in lines}
    for ln in lines:
        if not checks[ln.name].ok:
            problems.append(f"{w.name} {ln.name} at {small}: WRONG, not timed: {checks[ln.name].problem}")
        say(f"  {str(small):<26} {ln.name:<14} " + ("ok" if checks[ln.name].ok else "WRONG " + checks[ln.name].problem))
    records = [_untimed(study, group, _line_fields(study, ln, size, checks[ln.name]), size)
               for ln in lines if not checks[ln.name].ok]
    rng = np.random.default_rng(seed + 1)
    inputs = w.make_inputs(size, rng)
    dev_in = to_device(inputs)
    entries: list[_Entry] = []
    for ln in (ln for ln in lines if checks[ln.name].ok):
        out = poisoned(w.output_specs(size))
        try:
            launch = ln.variant.bind(dev_in, out)
            with count_launches() as seen:
                launch()
        except Exception as e:  # noqa: BLE001  (checked small, failing large: a finding; the others still run)
            problems.append(f"{w.name} {ln.name} at {size}: {type(e).__name__}: {e}"[:600])
            continue
        fields = {**_line_fields(study, ln, size, checks[ln.name]), "launches": len(seen)}
        entries.append(_Entry(ln.name, launch, lambda win, out=out: {k: _host(v, win) for k, v in out.items()},
                              fields))
    for a in anchors:
        try:
            launch, got = a.make(dev_in, size)
            launch()  # a first pass, outside the timed loop: there is an output even where nothing is timed
        except (AnchorUnavailable, ImportError) as e:
            problems.append(f"anchor {a.name} at {size}: not run: {e}"[:400])
            continue
        except Exception as e:  # noqa: BLE001  (torch.compile without Triton, say: the other lines stand)
            problems.append(f"anchor {a.name} at {size}: {type(e).__name__}: {e}"[:400])
            continue
        entries.append(_Entry(a.name, launch, lambda win, got=got: {k: _host(v, win) for k, v in got().items()},
                              _anchor_fields(study, a, size)))
    if not entries:
        return records
    once = time_launchers([e.launch for e in entries], reps=reps)
    steady = time_steady([e.launch for e in entries], reps=max(5, reps // 3), once_ms=[t.median_ms for t in once])
    cuda.synchronize()
    reference = w.reference(inputs) if study.rows_axis is None else None
    for e, t, s in zip(entries, once, steady):
        wrong = recheck(study, size, inputs, e.outputs, rng, reference)
        if wrong:
            problems.append(f"{w.name} {e.name} at {size}: wrong after timing: {wrong}")
        if e.fields["pattern"] == "anchor":
            e.fields.update(checked=wrong is None, problem=wrong)
        elif wrong:
            e.fields.update(checked=False, problem=f"after timing: {wrong}")
        records.append(_finish(study, group, {**e.fields, "time_ms": t.median_ms, "time_ms_q1": t.q1_ms,
                                              "time_ms_q3": t.q3_ms, "time_ms_steady": s.median_ms,
                                              "host_us_per_launch": t.host_us_per_call}, size, ceiling))
    anchor_ms = next((r["time_ms"] for r in records if r["pattern"] == "anchor" and r["time_ms"]), None)
    for r in records:
        r["vs_anchor"] = anchor_ms / r["time_ms"] if anchor_ms and r["time_ms"] else None
    return records


def check_size_records(study: Study, size: Size, seed: int, problems: list[str], say: Callable[[str], None],
                       done: set[str]) -> list[dict[str, Any]]:
    """Where nothing can be timed: every line that runs `size` and is not in `done` (checked at an earlier
    check size), checked here, recorded untimed; adds them to `done`."""
    group = Group("check", (size,))
    out = []
    for ln in study.lines():
        if ln.name in done or not ln.runs(size):
            continue
        done.add(ln.name)
        c = check_line(study, ln, size, seed)
        if not c.ok:
            problems.append(f"{study.name} {ln.name} at {size}: WRONG: {c.problem}")
        say(f"  {str(size):<26} {ln.name:<14} " + ("ok" if c.ok else "WRONG " + c.problem))
        out.append(_untimed(study, group, _line_fields(study, ln, size, c), size))
    return out


# -- the run -------------------------------------------------------------------------------------

@dataclass
class StudyRun:
    records: list[dict[str, Any]]
    problems: list[str]
    skipped: dict[str, str]        # what was not done here, and why (timing, anchors, ncu)
    path: Path

    @property
    def wrong(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["checked"] is False and r["pattern"] != "anchor"]


def run_study(study: Study, json_path: str | Path, *, command: str, reps: int | None = None, ncu: bool = False,
              check_only: bool = False, seed: int = 0, say: Callable[[str], None] = print) -> StudyRun:
    """Run `study` and write one results file (rewritten after every size: a run cut short keeps what it measured).
    check_only, or a back-end that cannot time: the check sizes, every line checked, nothing timed."""
    study.validate()
    t0 = time.monotonic()
    untimed = why_untimed()
    skipped = {}
    if untimed or check_only:
        why = untimed or "asked for the check sizes only (--check)"
        skipped = {"timing": why, "anchors": f"anchors are timed beside the lines ({why})",
                   "copy ceiling": f"a timing ({why})"}
    if ncu and skipped:
        skipped["ncu"] = skipped["timing"]
    problems: list[str] = []
    records: list[dict[str, Any]] = []
    ceiling = None
    ceiling_candidates = None
    ceilings: dict[str, Any] = {"of_ceiling": study.ceiling}
    if not skipped:
        c = measure_copy_ceiling()
        ceiling, ceiling_candidates = c.GBs, c.candidates
        say(f"copy ceiling {ceiling:.0f} GB/s ({c.best})")
        if study.ceiling == "read":
            r = measure_read_ceiling()
            ceilings.update(read_ceiling_GBs=r.GBs, read_ceiling_candidates=r.candidates)
            say(f"read ceiling {r.GBs:.0f} GB/s ({r.best})")
    else:
        say(f"{study.name}: check sizes only; " + "; ".join(f"{k} skipped: {v}" for k, v in skipped.items()
                                                           if k == "timing"))
    of = ceilings.get("read_ceiling_GBs", ceiling)

    def save() -> Path:
        extra = study.meta() if study.meta is not None else {}
        meta = results.make_meta(command, ceiling, ceiling_candidates=ceiling_candidates, study=study.name,
                                 reps=reps or study.reps, gbs=GBS_MEANING, skipped=skipped, problems=problems,
                                 seconds=round(time.monotonic() - t0, 1), **ceilings, **extra)
        return results.dump(meta, records, json_path)

    if skipped:
        done: set[str] = set()
        for size in study.check_sizes:
            records += check_size_records(study, size, seed, problems, say, done)
            path = save()
        return StudyRun(records, problems, skipped, path)
    path = save()
    for group in study.groups:
        for size in group.sizes:
            say(f"{study.name} {group.name} {size} ({time.monotonic() - t0:.0f} s)")
            records += measure_size(study, group, size, reps=group.reps or reps or study.reps, seed=seed,
                                    ceiling=of, problems=problems, say=say)
            path = save()
    if ncu:
        if (why := attach_ncu(study, records)) is not None:
            skipped["ncu"] = why
            problems.append(why)
        path = save()
    return StudyRun(records, problems, skipped, path)


def attach_ncu(study: Study, records: list[dict[str, Any]]) -> str | None:
    """Nsight Compute's DRAM bytes for the registered lines at the largest size of the first group;
    None, or why it could not measure."""
    from ..instrument import ncu
    size = max(study.groups[0].sizes, key=lambda s: s.elements)
    names = [r["line"] for r in records if r["registered"] and r["size"] == dict(size) and r["time_ms"]]
    names = list(dict.fromkeys(names))
    try:
        found = ncu.measure(study.name, size, names)
    except ncu.NcuError as e:
        return f"ncu: {e}"
    for r in records:
        if r["size"] == dict(size) and r["line"] in found:
            kernels = found[r["line"]]
            r["bytes_dram_read"] = int(sum(k.dram_read for k in kernels))
            r["bytes_dram_write"] = int(sum(k.dram_write for k in kernels))
    return None


# -- the figures' view --------------------------------------------------------------------------------

def as_before(doc: dict[str, Any], gbs: str = "GBs_useful") -> dict[str, Any]:
    """A study's results in the shape the figures drew before studies (the topics' committed files keep their
    old kinds until a GPU run replaces them): its timed records, "variant" the line's name, "version" too,
    "GBs" the rate `gbs` names, "correct" its check; a file of older records unchanged."""
    if not any(r.get("kind") == SCHEMA_KIND for r in doc["records"]):
        return doc
    records = [{**r, "variant": r["line"], "version": r["line"], "GBs": r[gbs], "correct": r["checked"] is not False}
               for r in doc["records"] if r.get("kind") == SCHEMA_KIND and r["time_ms"] is not None]
    return {**doc, "records": records}


# -- what `kernels-lab bench` lists ----------------------------------------------------------------

def studies() -> dict[str, Study]:
    """Every topic's STUDY (topics/NAME/study.py), by workload name, in the topics' order; a topic with several
    workloads lists their studies as STUDIES (softmax: softmax's and cross-entropy's)."""
    from .. import topics
    topics.load()  # the workloads first, in the topics' order, as every command finds them
    return {s.name: s for m in topics.modules("study") for s in getattr(m, "STUDIES", (m.STUDY,))}


def best_registered(records: Iterable[dict[str, Any]], group: str | None = None) -> dict[tuple, dict[str, Any]]:
    """The fastest registered line at each size of a study's results (one-pass clock; checked and timed records
    only, of `group` where given): {size as a tuple of its values: that line's record}."""
    best: dict[tuple, dict[str, Any]] = {}
    for r in records:
        if r.get("registered") and r.get("time_ms") and r["checked"] and (group is None or r["group"] == group):
            key = tuple(r["size"].values())
            if key not in best or r["time_ms"] < best[key]["time_ms"]:
                best[key] = r
    return best


def table(records: Iterable[dict[str, Any]]) -> str:
    """The run as text: one row per record, grouped by size."""
    head = (f"{'group':<8}{'size':>26}  {'line':<16}{'check':>6}{'ms':>9}{'steady':>9}{'useful GB/s':>12}{'of ceil':>8}"
            f"{'vs anchor':>10}")
    lines = [head, "-" * len(head)]
    for r in records:
        size = ",".join(f"{k}={v}" for k, v in r["size"].items())
        t = f"{r['time_ms']:9.4f}" if r["time_ms"] else f"{'-':>9}"
        steady = f"{r['time_ms_steady']:9.4f}" if r["time_ms_steady"] else f"{'-':>9}"
        gbs = f"{r['GBs_useful']:12.0f}" if r["GBs_useful"] else f"{'-':>12}"
        ceil = f"{r['of_ceiling']:8.0%}" if r.get("of_ceiling") else f"{'-':>8}"
        vs = f"{r['vs_anchor']:9.2f}x" if r.get("vs_anchor") else f"{'-':>10}"
        check = {True: "ok", False: "WRONG", None: "-"}[r["checked"]]
        flag = f"  {r['problem']}" if r["problem"] else ""
        lines.append(f"{r['group']:<8}{size:>26}  {r['line']:<16}{check:>6}{t}{steady}{gbs}{ceil}{vs}{flag}")
    return "\n".join(lines)
