"""The grade of one submission: its confined children, then the judge (judge.py), in the parent.

One submission is run in a confined child (lifecycle.run_child); everything it reports is judged
here, against the reference, after its whole process tree is dead. What the checks are, what they
need and how they score is judge.CHECKS (the lessons' own check runs the same objects); what this
module adds is the evidence only the grader can gather:

  on a GPU machine  memcheck (compute-sanitizer) charges each run it finds a bad access in; every
                    graded run is repeated on the simulator (the same inputs: one hidden seed per
                    grade), which checks every index AND runs the blocks of a launch one after
                    another: a run right on the GPU but wrong there costs correctness too (the GPU's
                    schedule hid a missing grid-wide barrier or fence), so the verdict is the same on
                    both back-ends; racecheck stands for the perturbed schedules; the traffic is traced
                    in the simulator's rerun
  everywhere        the symmetric probe, the compile gate (numba's real compiler, in a child: counted
                    on every machine, the point given where the toolchain is missing) and speed (GPU)
  a hang            a run that never finished is not run again by a later phase, and once a run has
                    hung, no later phase gives a run more than AFTER_HANG_S: a kernel that spins in
                    every run costs one limit

counted_checks() says which checks count on this back-end and machine: the maximum is the same
for every submission and every outcome (a crash, a timeout, a missing file) and in `--list`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core import Exercise
from ..backend import BACKEND
from ..runtime import BACKEND_NAME
from . import compile_gate as gate_module
from . import judge as J
from .cases import build_cases, describe_case, hidden_seed, run_key
from .confine import RUN_TIMEOUT_S, SANDBOX_ENV, protections
from .judge import Evidence, Machine
from .lifecycle import run_child
from .records import ChildRun, Run, TestResult, Verdict
from .sanitizer import find_sanitizer, sanitize
from .verdict import HINTS, case_verdict

# how a run's bad access is named, by whoever caught it (tests and benchmarks/grade_adversarial.sh look for these)
MEMCHECK_FOUND = "memcheck (compute-sanitizer) found"
SIMULATOR_FOUND = "on the simulator, which checks every index"
SIMULATOR_WRONG = "right on the GPU, wrong on the simulator (which runs the blocks one after another)"
SIMULATOR_RUN_S = 60.0  # the simulator's rerun: at least this long per run (it is ~1000x slower than a GPU)
AFTER_HANG_S = 10.0     # once a run has hung: what any later phase gives one run (sanitizers, the simulator;
                        # a first run includes numba's compile: a few seconds more than the run itself)


@dataclass
class Grade:
    exercise: str
    submission: str
    score: float
    max_score: float
    outcome: str
    summary: str
    tests: list[TestResult] = field(default_factory=list)
    execution_time: float = 0.0
    leaderboard: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    content_hash: str = ""   # sha256 of the graded source: a re-run skips a submission that did not change
    backend: str = BACKEND_NAME
    protections: list[tuple[str, bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # for the instructor: the environment, not the student

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def content_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def machine(compile_gate: bool = True, sanitizers: bool = True, notebook: bool = False) -> Machine:
    """This machine, as the checks see it (the instructor's switches included; `notebook`: lessons.check's,
    in the student's process)."""
    # `simulator`: perturbed schedules and the byte trace, both the simulator's tracer's
    return Machine(gpu=BACKEND.on_device, simulator=BACKEND.can_trace,
                   sanitizer=sanitizers and find_sanitizer() is not None, compile_gate=compile_gate,
                   notebook=notebook)


def counted_checks(ex: Exercise, compile_gate: bool = True, sanitizers: bool = True) -> dict[str, float]:
    """The points each check of `ex` is worth on this back-end and machine (0: not counted here,
    the same for everyone). Decided by the machine, never by the submission."""
    return J.counted_checks(ex, machine(compile_gate, sanitizers))


def max_score(ex: Exercise, compile_gate: bool = True, sanitizers: bool = True) -> float:
    return float(sum(counted_checks(ex, compile_gate, sanitizers).values()))


def not_counted_reason(name: str, compile_gate: bool = True, sanitizers: bool = True,
                       ex: Exercise | None = None) -> str:
    return (J.not_counted(ex, name, machine(compile_gate, sanitizers)) if ex is not None else None) \
        or "not counted here"


def _missing_result(c: dict[str, Any], run: ChildRun, first_missing: bool) -> Run:
    """What stands for a run the child never finished."""
    if first_missing:
        kind = {"timeout": "Timeout", "memory": "MemoryLimit", "flooding": "OutputFlooding"}.get(run.outcome, "Crash")
        return Run.missing(c["id"], kind, run.detail)
    return Run.missing(c["id"], "NotRun", f"not run: the child was stopped earlier ({run.outcome})")


def grade(ex: Exercise, source: str, submission: str = "submission", timeout_s: float = RUN_TIMEOUT_S,
          memory_bytes: int = 4 << 30, compile_gate: bool = True, sanitizers: bool = True) -> Grade:
    """Grade one submission. timeout_s: seconds each run may take (a case in one launch configuration
    and schedule); sanitizers: on a GPU, also run the cases under compute-sanitizer (memcheck, and
    racecheck for exercises with a race check), each in its own confined child."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    if not memory_bytes > 0:
        raise ValueError(f"memory_bytes must be > 0, got {memory_bytes}")
    here = machine(compile_gate, sanitizers)
    counted = J.counted_checks(ex, here)
    hidden = hidden_seed()  # one per grade: every child of it runs the same hidden inputs
    run = run_child(ex, source, timeout_s, memory_bytes, speed=True, hidden=hidden)
    if not run.imported:
        return _failed_grade(ex, submission, run, counted, content_hash(source), compile_gate, sanitizers)
    results = {r["id"]: Run.from_report(r) for r in run.report["cases"] if isinstance(r, dict) and "id" in r}
    missing = [c for c in run.cases if c["id"] not in results]
    for k, c in enumerate(missing):
        results[c["id"]] = _missing_result(c, run, k == 0)
    driver = next((e for r in results.values() for e in (r.error, r.run_error)
                   if e is not None and e.type == "CudaSupportError"), None)
    if driver is not None:  # CUDA could not start in the child: the machine's fault, never the student's
        return failed_grade(ex, submission, "grader_error",
                            f"the CUDA driver could not start in the grader's child ({driver.message[:300]}); "
                            f"not the submission's doing (instructors: `kernels-lab doctor`; {SANDBOX_ENV}=off "
                            f"turns the sandbox's namespaces and Landlock off)", seconds=run.seconds,
                            stdout=run.stdout, stderr=run.stderr, source_hash=content_hash(source),
                            compile_gate=compile_gate, sanitizers=sanitizers)
    if ex.kind == "data":
        return _grade_data(ex, run, results, counted, submission, source)
    ev = Evidence(ex, here, run.cases, results, {c["id"]: case_verdict(ex, c, results[c["id"]]) for c in run.cases},
                  speed_run=run)

    # a run that never finished (the one that hung, or one the child never reached) has no credit to lose: no
    # later phase runs it again; and once a run has hung, no later phase gives a run more than AFTER_HANG_S
    # (a kernel that spins in every run costs its one limit, not one more per phase)
    unfinished = frozenset(run_key(ex, c) for c in missing)
    after_hang = AFTER_HANG_S if run.outcome == "timeout" else None
    memcheck = sanitize(ex, source, "memcheck", timeout_s, max(memory_bytes, 8 << 30), hung=unfinished,
                        hidden=hidden, run_limit_s=after_hang) \
        if sanitizers and BACKEND.on_device and find_sanitizer() else None
    _charge_memcheck(ev, memcheck)
    ev.sim_rerun = _simulator_runs(ex, source, after_hang or max(timeout_s, SIMULATOR_RUN_S), memory_bytes, unfinished,
                                   hidden) if not BACKEND.can_trace else None
    _charge_simulator(ev)
    ev.racecheck = lambda: sanitize(ex, source, "racecheck", timeout_s, hung=unfinished, run_limit_s=after_hang)
    ev.compile = lambda: gate_module.gate(ex, source, max(timeout_s, 60.0), memory_bytes)
    symmetric_hint(ev)
    tests = J.judge(ev)
    return _assemble(ex, submission, source, run, tests, ev.hints.texts(), ev.leaderboard, ev.notes)


def _charge_memcheck(ev: Evidence, memcheck) -> None:
    """Each graded run memcheck (sanitizer.SanitizerResult, or None) found a bad access in is wrong."""
    if memcheck is None:
        return
    if memcheck.status == "errors":
        for c in ev.plain:
            key = run_key(ev.ex, c)
            if n := memcheck.by_case.get(key, 0) + memcheck.unattributed:
                first = memcheck.first.get(key) or (memcheck.report.splitlines() or [""])[0]
                ev.verdicts[c["id"]] = _bounds_verdict(c, f"{MEMCHECK_FOUND} {n} bad memory access(es): {first}")
    elif memcheck.status in ("clean", "failed"):
        ev.memcheck_note = f"memcheck (compute-sanitizer): {memcheck.status}" + \
            ("" if memcheck.status == "clean" else f" ({memcheck.report})")
        if memcheck.status == "failed":
            ev.notes.append(f"memcheck could not run: {memcheck.report}")


def _charge_simulator(ev: Evidence) -> None:
    """On a GPU machine: each graded run right on the GPU but not in the simulator's rerun is wrong."""
    for c, got, v in _simulator_wrong(ev.ex, ev.plain, ev.sim_rerun):
        if not ev.verdicts[c["id"]].ok:
            continue
        if got.error is not None:  # memcheck misses an overrun that lands in padding or the next array
            ev.verdicts[c["id"]] = _bounds_verdict(c, f"{SIMULATOR_FOUND}: {got.error.describe()}: "
                                                      f"{got.error.message}")
        else:  # the GPU's schedule hid it: the verdict is the same on both back-ends
            ev.verdicts[c["id"]] = Verdict(False, "wrong", f"{describe_case(c)}: {SIMULATOR_WRONG}: "
                                                           f"{v.why.split(': ', 1)[-1]}",
                                           ("schedule", {"where": describe_case(c)}))


def symmetric_hint(ev: Evidence) -> None:
    """The symmetric probe: said only when the probe passes and its twin (same size and config) fails."""
    for twin in (c for c in ev.cases if c["role"] == "twin"):
        if ev.verdicts[twin["of"]].ok and not ev.verdicts[twin["id"]].ok:
            ev.hints.add(("symmetric", {"where": describe_case(twin)}), first=True)
            return


def _assemble(ex: Exercise, submission: str, source: str, run: ChildRun, tests: list[TestResult],
              hint_texts: list[str], leaderboard: list[dict[str, Any]], notes: list[str]) -> Grade:
    """The grade of a submission whose checks ran: the sum, the summary line, the outcome and hints."""
    score = sum(t.score for t in tests)
    total = float(sum(t.max_score for t in tests))
    head = f"{score:g} / {total:g}"
    if run.outcome != "ok":
        head += f"\n{run.outcome}: {run.detail}"
    elif run.detail:
        head += f"\nnote: {run.detail}"
    summary = head + ("" if not hint_texts else "\nhints:\n" + "\n".join(f"- {h}" for h in hint_texts))
    return Grade(ex.name, submission, round(score, 3), total, "graded" if run.outcome == "ok" else run.outcome,
                 summary, tests, run.seconds, [{"name": "score", "value": round(score, 3)}, *leaderboard],
                 run.stdout, run.stderr, content_hash(source), BACKEND_NAME, protections(), notes)


def _grade_data(ex: Exercise, run: ChildRun, results: dict[int, Run], counted: dict[str, float], submission: str,
                source: str) -> Grade:
    """A "data" exercise: its judge scores each case (judge.judge_data)."""
    tests = J.judge_data(ex, run.cases, results, {name: not counted[name] for name in ex.points})
    return _assemble(ex, submission, source, run, tests, [], [], [])


def _bounds_verdict(c: dict[str, Any], found: str) -> Verdict:
    """A run charged with a bad access that its output did not show (memcheck, or the simulator)."""
    return Verdict(False, "error", f"{describe_case(c)}: {found}", ("bounds", {"where": describe_case(c)}))


def _simulator_runs(ex: Exercise, source: str, run_s: float, memory_bytes: int,
                    leave_out: frozenset[tuple[int, int]] = frozenset(), hidden: int | None = None) -> ChildRun | None:
    """On a GPU machine: every graded run once more (but those that never finished), in a child on the
    simulator, which traces the bytes and checks every index (memcheck cannot see a small overrun that
    lands in an allocation's padding or in the next array); each run gets run_s seconds. None: no run left."""
    cases = build_cases(ex, perturbed=False, probes=False, leave_out=leave_out, hidden=hidden)
    return run_child(ex, source, run_s, memory_bytes, backend="sim", cases=cases) if cases else None


def _simulator_wrong(ex: Exercise, plain: list, sim: ChildRun | None) -> list[tuple[dict, Run, Verdict]]:
    """(graded run, the simulator's run of it, its verdict) for each graded run the simulator's rerun
    indexed past the end in, or got wrong (its inputs are the graded run's: the same seeds). An error of
    another kind there (a feature the simulator lacks, its own time limit) is not the student's: not listed."""
    if sim is None or sim.report is None:
        return []
    reports = {r.get("id"): r for r in sim.report["cases"] if isinstance(r, dict)}
    rerun = {run_key(ex, c): c for c in sim.cases}
    out = []
    for c in plain:
        twin = rerun.get(run_key(ex, c))
        if twin is None or twin["id"] not in reports:
            continue
        got = Run.from_report(reports[twin["id"]])
        v = case_verdict(ex, twin, got)
        if v.kind == "wrong" or (got.error is not None and got.error.type == "IndexError"):
            out.append((c, got, v))
    return out


_ADVICE = {"timeout": "Look for a loop whose exit condition never becomes true (a spin on a flag, a while "
                      "loop without an increment).",
           "crash": "The process died: a segmentation fault, an abort, os._exit, or output flooding.",
           "memory": "Allocate only what the exercise needs.",
           "import_error": "Fix the error above; the grader could not load your code.",
           "exited": "Do not call sys.exit(), exit() or os._exit() in a submission.",
           "flooding": "Print less: the grader keeps only the start of the output.",
           "forged": "The report was not the grader's own.",
           "unreadable": "Submit a .py file or the lesson's .ipynb with its '# EXERCISE:' cells.",
           "grader_error": "This is the grading machine's problem, not your code's: tell the instructor."}


def failed_grade(ex: Exercise, submission: str, outcome: str, detail: str, *, seconds: float = 0.0,
                 stdout: str = "", stderr: str = "", source_hash: str = "", compile_gate: bool = True,
                 sanitizers: bool = True) -> Grade:
    """A submission that produced no graded runs: every counted check fails, with the reason;
    the maximum is the same as for a graded one."""
    counted = counted_checks(ex, compile_gate, sanitizers)
    detail = detail.removeprefix(f"{outcome}: ")  # said once: "unreadable: x.py: no such file"
    text = f"{outcome}: {detail}\n{_ADVICE.get(outcome, '')}".rstrip()
    # the reason is the grade's summary, said once; each check only points to it
    not_run = f"not checked: no run of the submission was graded ({outcome}: the reason is above)"
    tests = [TestResult(name, 0, counted[name], "failed", not_run) if counted[name] else
             TestResult(name, 0, 0, "skipped", not_counted_reason(name, compile_gate, sanitizers, ex))
             for name in ex.points]
    notes = [detail] if outcome == "grader_error" else []
    return Grade(ex.name, submission, 0.0, float(sum(counted.values())), outcome, text, tests, seconds,
                 [{"name": "score", "value": 0}], stdout, stderr, source_hash, BACKEND_NAME, protections(), notes)


def _failed_grade(ex: Exercise, submission: str, run: ChildRun, counted: dict[str, float], source_hash: str,
                  compile_gate: bool, sanitizers: bool) -> Grade:
    outcome = run.outcome if run.outcome != "ok" else "crash"
    return failed_grade(ex, submission, outcome, run.detail or "the submission did not load", seconds=run.seconds,
                        stdout=run.stdout, stderr=run.stderr, source_hash=source_hash, compile_gate=compile_gate,
                        sanitizers=sanitizers)


__all__ = ["Grade", "TestResult", "HINTS", "grade", "failed_grade", "counted_checks", "max_score", "content_hash"]
