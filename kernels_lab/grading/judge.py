"""The checks of a kernel or host exercise, as objects: one judge for `kernels-lab grade` and for the
lessons' own checks (kernels_lab.lessons.check).

A Check has an id (the key of Exercise.points), what it needs to run (NEEDS), how it scores (a
function of the Evidence and its points) and what it checks, in a line. An exercise's points are
validated against the checks when the exercise is built (core.validate_points, against core.GRADED_CHECKS):
an unknown id is an error there, not a KeyError in the middle of a grade. A "data" exercise's checks
are its judge's (its `checks` attribute).

Evidence is everything the runs showed: the cases, each Run and its Verdict, the simulator's rerun
on a GPU machine, and hooks for what only the grader's process can do (racecheck, the compile gate,
the speed run). The grader fills it from its confined children, the notebook from runs in its own
process; `judge` then scores the same checks, in the same words, for both. Which checks count here
is the Machine's to say (counted_checks): never the submission's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..checks import compare
from ..core import GRADED_CHECKS, Exercise
from . import speed as speed_check
from .records import Run, TestResult, Verdict
from .verdict import hint_text, launch_problem, same_result, traffic_problem

RACE = "no race under perturbed schedules"
GATE = "compiles for the course's GPUs"
SPEED = "speed"
STAGES = "launches as asked"
INTERMEDIATE = "one intermediate in global memory"

# what a check may need, and where it is missing
HIDDEN = "the hidden cases"              # the grader only: a notebook runs the public cases
SCHEDULES = "perturbed schedules or racecheck"
BYTES = "traced global traffic"
COMPILER = "the compile gate"            # numba's real compiler, in a child of the grader
GPU_TIMING = "a GPU and the reference's timing"


@dataclass(frozen=True)
class Machine:
    """Where a check runs. notebook: lessons.check, in the student's process (public cases only, no
    child processes); compile_gate / sanitizers: the instructor's switches."""

    gpu: bool
    simulator: bool
    sanitizer: bool = False
    compile_gate: bool = True
    notebook: bool = False

    def lacks(self, need: str, ex: Exercise) -> str | None:
        """Why `need` cannot be met here (None: it can)."""
        if need == HIDDEN and self.notebook:
            return "the hidden cases are graded by `kernels-lab grade` only"
        if need == SCHEDULES and not self.simulator and (self.notebook or not self.sanitizer):
            return ("no perturbed schedules on a GPU; racecheck runs in `kernels-lab grade`" if self.notebook else
                    "no perturbed schedules on a GPU, and racecheck cannot run here (sanitizers turned off, or "
                    "compute-sanitizer is not installed); not counted")
        if need == BYTES and not self.simulator and self.notebook:
            return "traffic is traced on the simulator: on a GPU `kernels-lab grade` traces it in a child; not counted here"
        if need == COMPILER:
            if not self.compile_gate:
                return "compile gate turned off; not counted"
            if self.notebook:
                return "the compile gate runs in `kernels-lab grade` (numba's real compiler, in a child process)"
            if ex.kind != "kernel":
                return "only a kernel exercise is compiled; not counted"
        if need == GPU_TIMING:
            if not self.gpu or self.notebook:
                return "speed is measured on a GPU only; not counted here"
            if ex.speed is None or ex.kind != "kernel":
                return "this exercise has no speed measurement"
        return None


class Hints:
    """Each hint once, in the words of the first run it was seen in."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def add(self, hint, first: bool = False) -> None:
        if hint is None:
            return
        key = hint[0] if isinstance(hint, tuple) else hint
        if key in self.items:
            return
        text = hint_text(hint)
        self.items = {key: text, **self.items} if first else {**self.items, key: text}

    def texts(self) -> list[str]:
        return list(self.items.values())


@dataclass
class Evidence:
    """What the runs of one submission showed, for the checks to score.

    cases: every run made (build_cases's dicts, with their roles); runs / verdicts: by case id;
    sim_rerun: on a GPU machine, the simulator's child (records.ChildRun: traced bytes, every index
    checked); racecheck / compile / speed_run: the grader's hooks (None in a notebook)."""

    ex: Exercise
    machine: Machine
    cases: list[dict[str, Any]]
    runs: dict[int, Run]
    verdicts: dict[int, Verdict]
    hints: Hints = field(default_factory=Hints)
    notes: list[str] = field(default_factory=list)
    sim_rerun: Any = None
    memcheck_note: str = ""
    racecheck: Callable[[], Any] | None = None
    compile: Callable[[], Any] | None = None
    speed_run: Any = None
    leaderboard: list[dict[str, Any]] = field(default_factory=list)

    @property
    def plain(self) -> list[dict[str, Any]]:
        return [c for c in self.cases if c["role"] == "plain"]

    @property
    def right(self) -> list[dict[str, Any]]:
        return [c for c in self.plain if self.verdicts[c["id"]].ok]


@dataclass(frozen=True)
class Check:
    id: str
    needs: tuple[str, ...]
    score: Callable[[Evidence, float], TestResult]
    says: str


def score_share(name: str, points: float, ok_count: int, total: int, lines: list[str],
                visibility: str = "visible") -> TestResult:
    """points * ok / total; no run to check on: nothing earned, and why."""
    score = points * ok_count / total if total else 0.0
    status = "passed" if total and ok_count == total else "failed"
    if not total:
        lines = lines or ["no correct run to check this on: fix correctness first"]
    return TestResult(name, round(score, 3), points, status, "\n".join(lines) or "all runs correct", visibility)


def _describe(c: dict[str, Any]) -> str:
    from .cases import describe_case
    return describe_case(c)


def _correct(hidden: bool) -> Callable[[Evidence, float], TestResult]:
    def score(ev: Evidence, points: float) -> TestResult:
        name = "correct (hidden)" if hidden else "correct (public)"
        chosen = [c for c in ev.plain if c["case"].hidden == hidden]
        bad = [ev.verdicts[c["id"]] for c in chosen if not ev.verdicts[c["id"]].ok]
        for v in bad:
            ev.hints.add(v.hint)
        # one line per reason: runs that fail for the same reason (the words after the run's name) are counted
        by_reason: dict[str, list[Verdict]] = {}
        for v in bad:
            by_reason.setdefault(v.why.split(": ", 1)[-1], []).append(v)
        lines = [same[0].why + (f" (in all {len(bad)} runs)" if len(by_reason) == 1 else
                                f" (and {len(same) - 1} more run(s))") if len(same) > 1 else same[0].why
                 for same in list(by_reason.values())[:3]]
        lines += [f"... and {len(by_reason) - 3} more"] if len(by_reason) > 3 else []
        if hidden:
            lines = [f"{len(bad)} of {len(chosen)} hidden runs wrong"] + lines[:1] if bad else []
        result = score_share(name, points, len(chosen) - len(bad), len(chosen), lines,
                             "after_published" if hidden else "visible")
        if not hidden and ev.memcheck_note:
            result.output += "\n" + ev.memcheck_note
        return result
    return score


def _launches(ev: Evidence, points: float) -> TestResult:
    ex = ev.ex
    counted = [(c, len(ev.runs[c["id"]].launches)) for c in ev.right if ev.runs[c["id"]].launches is not None]
    over = [(c, n) for c, n in counted if launch_problem(ex, c["case"].size, n)]
    if over:
        c, n = max(over, key=lambda cn: cn[1])
        ev.hints.add(("launches", {"got": n, "budget": ex.launch_budget(c["case"].size), "where": _describe(c)}))
    return score_share("launch budget", points, len(counted) - len(over), len(counted),
                       [launch_problem(ex, c["case"].size, n)] if over else [])


def _traced(ev: Evidence, check: str, points: float) -> tuple[list[tuple[dict[str, Any], Run]], str] | TestResult:
    """The right runs whose global accesses were traced, (case, Run) each, and the words that say where they
    were traced; or the failed result of `check` when there is none to count. On the simulator: the graded
    runs. On a GPU machine: the simulator's rerun of the same runs (every case and configuration the
    simulator's own grade counts, with the same inputs), right there too: the verdict is the same on both."""
    from .verdict import case_verdict
    sim = ev.sim_rerun
    if sim is None:
        return [(c, ev.runs[c["id"]]) for c in ev.right if ev.runs[c["id"]].bytes is not None], ""
    if not sim.imported or sim.report is None:
        return TestResult(check, 0, points, "failed", f"the trace (on the simulator) did not run: "
                                                      f"{sim.outcome}: {sim.detail}")
    got = {c["id"]: Run.from_report(c) for c in sim.report["cases"] if isinstance(c, dict)}
    cases = [c for c in sim.cases if c["role"] == "plain"]
    verdicts = {c["id"]: case_verdict(ev.ex, c, got[c["id"]]) for c in cases if c["id"] in got}
    rows = [(c, got[c["id"]]) for c in cases if c["id"] in got and got[c["id"]].bytes is not None
            and verdicts[c["id"]].ok]
    if not rows:  # right on the GPU but not traced right: say what the simulator's runs did
        why = next((v.why for v in verdicts.values() if not v.ok), None) or \
            (f"{sim.outcome}: {sim.detail}" if sim.outcome != "ok" else
             f"{len(got)} of {len(cases)} run(s) reported, none with traced bytes")
        return TestResult(check, 0, points, "failed", f"the trace (on the simulator) has no right run to "
                                                      f"count: {why}")
    return rows, " (traced on the simulator)"


def _staged(ex: Exercise) -> bool:
    """Does the exercise ask for its stages as separate launches (its hints then say so, not 'fuse')?"""
    return STAGES in ex.points


def _traffic(ev: Evidence, points: float) -> TestResult:
    """Bytes over the budget on the runs whose output is right (traced: see _traced)."""
    ex, name = ev.ex, "traffic budget"
    traced = _traced(ev, name, points)
    if isinstance(traced, TestResult):
        return traced
    rows, where = [(c, r.bytes) for c, r in traced[0]], traced[1]
    over = [(c, b) for c, b in rows if traffic_problem(ex, c["case"].size, b)]
    if over:
        c, b = over[0]
        ev.hints.add(("traffic_staged" if _staged(ex) else "traffic",
                      {"got": b, "budget": ex.byte_budget(c["case"].size), "size": c["case"].size}))
    lines = [traffic_problem(ex, over[0][0]["case"].size, over[0][1]) + where] if over else []
    if not over and rows:
        lines = [f"within the byte budget in {len(rows)} run(s){where}"]
    return score_share(name, points, len(rows) - len(over), len(rows), lines)


def _stages(ev: Evidence, points: float) -> TestResult:
    """Exactly the plan's launches (an exercise about the launches themselves: fewer is not better)."""
    ex = ev.ex
    counted = [(c, len(ev.runs[c["id"]].launches)) for c in ev.right if ev.runs[c["id"]].launches is not None]
    off = [(c, n) for c, n in counted if n != ex.launch_budget(c["case"].size)]
    lines = []
    if off:
        c, n = off[0]
        asked = ex.launch_budget(c["case"].size)
        ev.hints.add(("stages_fewer" if n < asked else "stages_more", {"got": n, "asked": asked, "title": ex.title,
                                                                       "where": _describe(c)}))
        lines = [f"{n} launch(es) at {_describe(c)}; the exercise asks for exactly {asked}"
                 + (f" (and {len(off) - 1} more run(s) off)" if len(off) > 1 else "")]
    return score_share(STAGES, points, len(counted) - len(off), len(counted), lines)


def _handed_on(arrays: list[dict[str, list[str]]]) -> list[str]:
    """The arrays the submission allocated that one launch wrote and a later launch read."""
    found = []
    for k, launch in enumerate(arrays):
        for name in launch["written"]:
            if name.startswith("temporary") and name not in found and \
                    any(name in later["read"] for later in arrays[k + 1:]):
                found.append(name)
    return found


def _intermediate(ev: Evidence, points: float) -> TestResult:
    """One array of the submission's own, written by a launch and read by a later one (traced: _traced)."""
    traced = _traced(ev, INTERMEDIATE, points)
    if isinstance(traced, TestResult):
        return traced
    rows, where = traced
    counted = [(c, _handed_on(r.arrays)) for c, r in rows if r.arrays is not None]
    off = [(c, h) for c, h in counted if len(h) != 1]
    lines = [f"within the plan in {len(counted)} run(s){where}"] if counted and not off else []
    if off:
        c, handed = off[0]
        found = ("no array of yours was written by one launch and read by a later one" if not handed else
                 f"{len(handed)} arrays of yours went through global memory between launches")
        ev.hints.add(("intermediate", {"found": found, "where": _describe(c)}))
        lines = [f"{_describe(c)}: {found}{where}"]
    return score_share(INTERMEDIATE, points, len(counted) - len(off), len(counted), lines)


def _grid(ev: Evidence, points: float) -> TestResult:
    big = [c for c in ev.plain if c["config"] and c["config"][0] * c["config"][1] < c["case"].size.elements]
    if not big:  # validate_points makes sure the grader has such a run: a notebook's public cases may not
        return TestResult("grid independent of n", 0, 0, "skipped", "no public case is larger than its grid: "
                                                                    "`kernels-lab grade` checks this on the hidden cases")
    ok_big = [ev.verdicts[c["id"]].ok for c in big]
    first_bad = next((c for c, ok in zip(big, ok_big) if not ok), None)
    return score_share("grid independent of n", points, sum(ok_big), len(ok_big),
                       [] if first_bad is None else
                       [f"wrong when the grid ({first_bad['config']}) has fewer threads than elements "
                        f"({first_bad['case'].size})"])


def _race(ev: Evidence, points: float) -> TestResult:
    """Simulator: a race is the SAME inputs giving DIFFERENT results under different schedules;
    on a GPU, racecheck's shared-memory hazards."""
    if not ev.machine.simulator:
        return _racecheck(ev, points)
    groups: dict[int, list[dict[str, Any]]] = {}
    for c in ev.cases:
        if c["role"] == "perturbed":
            groups.setdefault(c["of"], []).append(c)
    by_id = {c["id"]: c for c in ev.cases}
    divergent = []
    for plain_id, perturbed in groups.items():
        for p in perturbed:
            if not ev.runs[p["id"]].finished:
                continue
            if not same_result(ev.ex, ev.runs[plain_id], ev.runs[p["id"]]):
                divergent.append((by_id[plain_id], p))
                break
    if divergent:
        plain_c, p = divergent[0]
        ev.hints.add(("barrier", {"where": _describe(plain_c)}))
        a, b = ev.verdicts[plain_c["id"]], ev.verdicts[p["id"]]
        say = lambda v: "right" if v.ok else v.why.split(": ", 1)[-1]  # noqa: E731
        return TestResult(RACE, 0, points, "failed",
                          f"the same inputs gave different results under different thread schedules in "
                          f"{len(divergent)} of {len(groups)} case(s); e.g. {_describe(plain_c)}: the normal "
                          f"schedule {say(a)}, perturbed schedule seed {p['perturb_seed']} {say(b)}")
    checked = [pid for pid in groups if ev.verdicts[pid].ok]
    if not checked:
        return score_share(RACE, points, 0, 0, [])
    return TestResult(RACE, points, points, "passed",
                      f"the same result under {sum(len(groups[g]) for g in checked)} perturbed schedules")


def _racecheck(ev: Evidence, points: float) -> TestResult:
    """On a GPU: racecheck instead of perturbed schedules (which only the simulator can do)."""
    found = ev.racecheck()
    if found.status in ("skipped", "failed"):
        return TestResult(RACE, 0, points, "failed", f"racecheck did not complete ({found.report}); no credit for a "
                                                      f"race check that did not run")
    if found.status == "errors":
        ev.hints.add(("barrier", {"where": "racecheck on the public cases"}))
        return TestResult(RACE, 0, points, "failed", f"racecheck (compute-sanitizer) found {found.errors} "
                                                      f"shared-memory hazard(s):\n{found.report}")
    return TestResult(RACE, points, points, "passed", "racecheck (compute-sanitizer): no hazards")


def _gate(ev: Evidence, points: float) -> TestResult:
    """Counted on every machine (one maximum everywhere): where the compiler cannot run, the point is
    given, never lost (the machine's fault, not the kernel's), and the instructor is told. Like the
    budgets it counts for a kernel that works only."""
    if not ev.right:
        return score_share(GATE, points, 0, 0, [])
    g = ev.compile()
    if g.environment:
        ev.notes.append(f"compile gate: {g.message}")
        return TestResult(GATE, points, points, "skipped", g.message)
    return TestResult(GATE, points if g.status == "passed" else 0, points, g.status, g.message)


def speed_test(ex: Exercise, run: Any, points: float,
               timer: Callable[..., dict[str, Any]] = speed_check.timed) -> tuple[TestResult, list[dict[str, Any]]]:
    """The speed check of a graded child's run (records.ChildRun): its exported kernel timed in a clean
    process (timer: speed.timed), right in every timed run and at the sampled indices against float64."""
    from .cases import speed_inputs
    exported, job = (run.report or {}).get("speed"), run.speed_job
    if job is None:
        return TestResult(SPEED, 0, 0, "skipped", "this exercise has no speed measurement"), []
    if exported is None:
        return TestResult(SPEED, 0, points, "failed", f"the speed run did not finish ({run.detail or run.outcome})"), []
    data = exported if exported.get("error") else timer(ex, job, exported)
    if data.get("error"):
        e = data["error"]
        return TestResult(SPEED, 0, points, "failed", f"the speed run failed: {e['type']} {e['where']}: "
                                                       f"{e['message']}"), []
    if data["wrong_reps"]:
        rep, bad = data["wrong_reps"][0]
        return TestResult(SPEED, 0, points, "failed", f"wrong in {len(data['wrong_reps'])} of {job['reps']} timed "
                                                       f"runs at the speed size {job['size']} (first: run {rep + 1}, "
                                                       f"{bad} element(s) differ from the reference's; each run "
                                                       f"starts from outputs that hold no answer): no speed credit"), []
    ref, idx = ex.spec.reference(speed_inputs(job["workload"], job["size"], data["seed"], data["input_set"])), \
        data["check_indices"]
    for out_name, expected in ref.items():
        _, bad = compare(out_name, data["outputs"][out_name], expected.reshape(-1)[idx], ex.tol())
        if bad is not None:
            return TestResult(SPEED, 0, points, "failed", f"wrong at the speed size {job['size']} (index "
                                                           f"{int(idx[bad.index[0]])}): no speed credit"), []
    verdict = speed_check.classify(data["student_ms"], data["reference_ms"])
    earned = speed_check.points_for(verdict, points)
    return (TestResult(SPEED, earned, points, "passed" if earned else "failed", verdict.describe()),
            [{"name": "time vs reference", "value": round(verdict.ratio, 3), "order": "asc"}])


def _speed(ev: Evidence, points: float) -> TestResult:
    if not ev.right and ev.speed_run is not None and ev.speed_run.speed_job is not None:
        # as the compile gate: the correctness checks already say why no run was right; timing it would only
        # repeat that failure in other words (an object that is no kernel: "has no attribute typeof_pyval")
        return TestResult(SPEED, 0, points, "failed", "no correct run to time: fix correctness first")
    result, board = speed_test(ev.ex, ev.speed_run, points)
    ev.leaderboard += board
    return result


CHECKS: dict[str, Check] = {c.id: c for c in (
    Check("correct (public)", (), _correct(False), "each public run right, computed by your own kernel"),
    Check("correct (hidden)", (HIDDEN,), _correct(True), "each hidden run right, computed by your own kernel"),
    Check("launch budget", (), _launches, "no more launches than the plan, on the runs whose output is right"),
    Check("traffic budget", (BYTES,), _traffic, "no more global-memory bytes than the plan, on the right runs"),
    Check(STAGES, (), _stages, "exactly the launches the exercise asks for, on the runs whose output is right"),
    Check(INTERMEDIATE, (BYTES,), _intermediate, "one array of yours written by a launch and read by a later one"),
    Check("grid independent of n", (), _grid, "right when the grid has fewer threads than elements"),
    Check(RACE, (SCHEDULES,), _race, "the same result under every perturbed schedule (racecheck on a GPU)"),
    Check(GATE, (COMPILER,), _gate, "numba's real compiler accepts the kernel for the course's GPUs"),
    Check(SPEED, (GPU_TIMING,), _speed, "as fast as the reference, timed interleaved on a GPU"),
)}
if tuple(CHECKS) != GRADED_CHECKS:  # the exercises' points were validated against core's list
    raise RuntimeError(f"grading.judge.CHECKS {tuple(CHECKS)} differ from core.GRADED_CHECKS {GRADED_CHECKS}")


def not_counted(ex: Exercise, name: str, machine: Machine) -> str | None:
    """Why check `name` of `ex` does not count on this machine (None: it counts). Decided by the
    machine, never by the submission: the maximum is the same for every outcome."""
    if ex.kind == "data":
        from .speed import load_reference
        return getattr(load_reference(ex.judge), "not_counted", lambda _: None)(name)
    return next((why for need in CHECKS[name].needs if (why := machine.lacks(need, ex))), None)


def counted_checks(ex: Exercise, machine: Machine) -> dict[str, float]:
    """The points each check of `ex` is worth on this machine (0: not counted here)."""
    return {name: 0.0 if not_counted(ex, name, machine) else float(points) for name, points in ex.points.items()}


def judge(ev: Evidence) -> list[TestResult]:
    """Every check of the exercise, in the order of its points: scored, or skipped with the reason."""
    tests = []
    for name, points in ev.ex.points.items():
        why = not_counted(ev.ex, name, ev.machine)
        tests.append(TestResult(name, 0, 0, "skipped", why) if why else CHECKS[name].score(ev, float(points)))
    return tests


def judge_data(ex: Exercise, cases: list[dict[str, Any]], runs: dict[int, Run], skipped: dict[str, bool],
               machine: Machine | None = None) -> list[TestResult]:
    """A "data" exercise: its judge scores each case's value and what was run with it; each check earns
    its points times the share of the cases it was checked in (a case where the judge says None does
    not count for that check). skipped: the checks not counted here (their reason: not_counted)."""
    from .speed import load_reference
    judge_ = load_reference(ex.judge)
    seen: dict[str, list[tuple[bool | None, str]]] = {name: [] for name in ex.points}
    for c in cases:
        got = runs[c["id"]]
        if got.error:  # the entry raised, or never ran (a timeout, a crash): every check of the case fails
            call = f"{ex.entry}({c['job'].get('argument')!r})" if "argument" in c["job"] else ex.entry
            checks = [(name, False, f"{call}: {got.error.describe()}: {got.error.message[:300]}") for name in ex.points]
        else:
            checks = judge_.score(c["case"], c["job"], got)
        for name, ok, message in checks:
            if name not in seen:
                raise KeyError(f"exercise {ex.name}: the judge scored {name!r}, which has no points")
            seen[name].append((ok, message))
    tests = []
    for name, points in ex.points.items():
        if skipped[name]:
            tests.append(TestResult(name, 0, 0, "skipped", not_counted(ex, name, machine) or "not counted here"))
            continue
        marks = [(ok, m) for ok, m in seen[name] if ok is not None]
        good = sum(1 for ok, _ in marks if ok)
        shown = [m for ok, m in marks if not ok] or [m for _, m in marks] or [m for _, m in seen[name]]
        lines = list(dict.fromkeys(shown))
        lines = lines[:3] + ([f"... and {len(lines) - 3} more"] if len(lines) > 3 else [])
        if not marks:
            lines = lines or ["not checked in any case"]
        score = points * good / len(marks) if marks else 0.0
        tests.append(TestResult(name, round(score, 3), points, "passed" if marks and good == len(marks) else "failed",
                                "\n".join(lines)))
    return tests
