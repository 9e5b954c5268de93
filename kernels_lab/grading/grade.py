"""The grade: checks, points and feedback a student can act on, computed in the parent.

One submission is run in a confined child (sandbox.run_child); everything it reports is judged
here, against the reference, after its whole process tree is dead. The checks:

  correct (public) / (hidden)   each graded run right (verdict.case_verdict: the output matches
                                AND the student's own kernel produced it); on a GPU, a run in
                                which memcheck found a bad access, or the simulator's child (below)
                                an index past the end, is wrong too, public or hidden
  launch budget / traffic budget   over the runs whose output is right only (a kernel that does
                                nothing earns nothing); bytes are traced on the simulator, also on
                                a GPU machine (a second child runs every graded run on the simulator:
                                the bytes of the public ones count, and it checks every index)
  grid independent of n         right in the runs whose grid has fewer threads than elements
  no race under perturbed schedules   simulator: the same inputs must give the same result under
                                every perturbed schedule (a difference proves a race; a bug every
                                schedule repeats is not one); GPU: racecheck finds no hazard
  compiles for the course's GPUs            compile_gate.gate: numba's real compiler (skipped, never lost,
                                when the toolchain is missing)
  speed                         GPU only: against the reference, interleaved

counted_checks() says which checks count on this back-end and machine: the maximum is the same
for every submission and every outcome (a crash, a timeout, a missing file) and in `--list`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from ..checks import compare
from ..core import Exercise
from ..runtime import BACKEND, ON_GPU, ON_SIMULATOR
from . import compile_gate as gate_module
from . import sandbox
from . import speed as speed_check
from .sandbox import RUN_TIMEOUT_S, ChildRun, build_cases, describe_case, protections, run_child, run_key
from .sanitizer import find_sanitizer, sanitize
from .verdict import HINTS, case_verdict, hint_text, launch_problem, same_result, traffic_problem

RACE = "no race under perturbed schedules"
GATE = "compiles for the course's GPUs"
# how a run's bad access is named, by whoever caught it (tests and benchmarks/grade_adversarial.sh look for these)
MEMCHECK_FOUND = "memcheck (compute-sanitizer) found"
SIMULATOR_FOUND = "on the simulator, which checks every index"


@dataclass
class TestResult:
    name: str
    score: float
    max_score: float
    status: str              # "passed", "failed", "skipped"
    output: str
    visibility: str = "visible"


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
    backend: str = BACKEND
    protections: list[tuple[str, bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # for the instructor: the environment, not the student

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def content_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


def counted_checks(ex: Exercise, compile_gate: bool = True, sanitizers: bool = True) -> dict[str, float]:
    """The points each check of `ex` is worth on this back-end and machine (0: not counted here,
    the same for everyone). Decided by the machine, never by the submission."""
    counted: dict[str, float] = {}
    for name, points in ex.points.items():
        if name == "speed":
            on = ON_GPU and ex.speed is not None and ex.kind == "kernel"
        elif name == GATE:
            on = compile_gate and ex.kind == "kernel" and gate_module.available()[0]
        elif name == RACE:
            on = ON_SIMULATOR or (sanitizers and find_sanitizer() is not None)
        elif ex.kind == "data":  # the judge knows which of its checks this machine can make
            on = _judge_skips(ex, name) is None
        else:
            on = True
        counted[name] = float(points) if on else 0.0
    return counted


def max_score(ex: Exercise, compile_gate: bool = True, sanitizers: bool = True) -> float:
    return float(sum(counted_checks(ex, compile_gate, sanitizers).values()))


def _judge_skips(ex: Exercise, name: str) -> str | None:
    """Why the judge of a "data" exercise does not count this check here (None: it counts)."""
    return getattr(sandbox.load_judge(ex), "not_counted", lambda _: None)(name)


def not_counted_reason(name: str, compile_gate: bool = True, sanitizers: bool = True,
                       ex: Exercise | None = None) -> str:
    if ex is not None and ex.kind == "data" and (why := _judge_skips(ex, name)):
        return why
    if name == "speed":
        return "speed is measured on a GPU only; not counted here"
    if name == GATE:
        return "compile gate turned off; not counted" if not compile_gate else \
            f"not checked here: {gate_module.available()[1]}; not counted"
    if name == RACE:
        return "no perturbed schedules on a GPU, and racecheck cannot run here (" + \
            ("sanitizers turned off" if not sanitizers else "compute-sanitizer is not installed") + "); not counted"
    return "not counted here"


def _score(name: str, points: float, ok_count: int, total: int, lines: list[str],
           visibility: str = "visible") -> TestResult:
    score = points * ok_count / total if total else 0.0
    status = "passed" if total and ok_count == total else "failed"
    if not total:
        lines = lines or ["no correct run to check this on: fix correctness first"]
    return TestResult(name, round(score, 3), points, status, "\n".join(lines) or "all runs correct", visibility)


class _Hints:
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


def _missing_result(c: dict[str, Any], run: ChildRun, first_missing: bool) -> dict[str, Any]:
    """What stands for a run the child never finished."""
    if first_missing:
        kind = {"timeout": "Timeout", "memory": "MemoryLimit", "flooding": "OutputFlooding"}.get(run.outcome, "Crash")
        return {"id": c["id"], "outputs": None, "error": {"type": kind, "where": "", "message": run.detail}}
    return {"id": c["id"], "outputs": None,
            "error": {"type": "NotRun", "where": "", "message": f"not run: the child was stopped earlier ({run.outcome})"}}


def grade(ex: Exercise, source: str, submission: str = "submission", timeout_s: float = RUN_TIMEOUT_S,
          memory_bytes: int = 4 << 30, compile_gate: bool = True, sanitizers: bool = True) -> Grade:
    """Grade one submission. timeout_s: seconds each run may take (a case in one launch configuration
    and schedule); sanitizers: on a GPU, also run the cases under compute-sanitizer (memcheck, and
    racecheck for exercises with a race check), each in its own confined child."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    if not memory_bytes > 0:
        raise ValueError(f"memory_bytes must be > 0, got {memory_bytes}")
    counted = counted_checks(ex, compile_gate, sanitizers)
    run = run_child(ex, source, timeout_s, memory_bytes, speed=True)
    if not run.imported:
        return _failed_grade(ex, submission, run, counted, content_hash(source), compile_gate, sanitizers)
    hints = _Hints()
    notes: list[str] = []
    results = {c["id"]: c for c in run.report["cases"] if isinstance(c, dict)}
    missing = [c for c in run.cases if c["id"] not in results]
    for k, c in enumerate(missing):
        results[c["id"]] = _missing_result(c, run, k == 0)
    driver = next((e for r in results.values() for e in (r.get("error"), r.get("run_error"))
                   if (e or {}).get("type") == "CudaSupportError"), None)
    if driver is not None:  # CUDA could not start in the child: the machine's fault, never the student's
        return failed_grade(ex, submission, "grader_error",
                            f"the CUDA driver could not start in the grader's child ({driver.get('message', '')[:300]}); "
                            f"not the submission's doing (instructors: `kernels-lab doctor`; {sandbox.SANDBOX_ENV}=off "
                            f"turns the sandbox's namespaces and Landlock off)", seconds=run.seconds,
                            stdout=run.stdout, stderr=run.stderr, source_hash=content_hash(source),
                            compile_gate=compile_gate, sanitizers=sanitizers)
    if ex.kind == "data":
        return _grade_data(ex, run, results, counted, submission, source)
    verdicts = {c["id"]: case_verdict(ex, c, results[c["id"]]) for c in run.cases}
    plain = [c for c in run.cases if c["role"] == "plain"]

    # the run that hung has no credit to lose: it is not run again under a sanitizer (SLOWDOWN times
    # the limit there) or on the simulator
    hung = frozenset(run_key(ex, c) for c in missing[:1]) if run.outcome == "timeout" else frozenset()
    memcheck = sanitize(ex, source, "memcheck", timeout_s, max(memory_bytes, 8 << 30), hung=hung) \
        if sanitizers and ON_GPU and find_sanitizer() else None
    if memcheck is not None and memcheck.status == "errors":
        for c in plain:
            n = memcheck.by_case.get(run_key(ex, c), 0) + memcheck.unattributed
            if n:
                first = memcheck.first.get(run_key(ex, c)) or (memcheck.report.splitlines() or [""])[0]
                verdicts[c["id"]] = _bounds_verdict(c, f"{MEMCHECK_FOUND} {n} bad memory access(es): {first}")
    elif memcheck is not None and memcheck.status == "failed":
        notes.append(f"memcheck could not run: {memcheck.report}")
    sim = _simulator_runs(ex, source, timeout_s, memory_bytes, hung) if not ON_SIMULATOR else None
    for c, e in _simulator_bounds(ex, plain, sim):
        if verdicts[c["id"]]["ok"]:  # memcheck misses an overrun that lands in padding or the next array
            verdicts[c["id"]] = _bounds_verdict(c, f"{SIMULATOR_FOUND}: {e.get('type')} {e.get('where', '')}: "
                                                   f"{e.get('message')}")

    # the symmetric probe: said only when the probe passes and its twin (same size and config) fails
    for twin in (c for c in run.cases if c["role"] == "twin"):
        if verdicts[twin["of"]]["ok"] and not verdicts[twin["id"]]["ok"]:
            hints.add(("symmetric", {"where": describe_case(twin)}), first=True)
            break

    def group(hidden: bool):
        chosen = [c for c in plain if c["case"].hidden == hidden]
        bad = [verdicts[c["id"]] for c in chosen if not verdicts[c["id"]]["ok"]]
        for v in bad:
            hints.add(v.get("hint"))
        whys = list(dict.fromkeys(v["why"] for v in bad))  # a reason every run shares is said once
        lines = [w + (f" (in all {len(bad)} runs)" if len(whys) == 1 and len(bad) > 1 else "") for w in whys[:3]]
        lines += [f"... and {len(whys) - 3} more"] if len(whys) > 3 else []
        if hidden:
            lines = [f"{len(bad)} of {len(chosen)} hidden runs wrong"] + lines[:1] if bad else []
        return len(chosen) - len(bad), len(chosen), lines

    tests: list[TestResult] = []
    leaderboard: list[dict[str, Any]] = []
    right = [c for c in plain if verdicts[c["id"]]["ok"]]
    for name, points in ex.points.items():
        if not counted[name]:
            tests.append(TestResult(name, 0, 0, "skipped", not_counted_reason(name, compile_gate, sanitizers)))
        elif name == "correct (public)":
            tests.append(_score(name, points, *group(False)))
            if memcheck is not None and memcheck.status in ("clean", "failed"):
                tests[-1].output += f"\nmemcheck (compute-sanitizer): {memcheck.status}" + \
                    ("" if memcheck.status == "clean" else f" ({memcheck.report})")
        elif name == "correct (hidden)":
            ok, total, lines = group(True)
            tests.append(_score(name, points, ok, total, lines, visibility="after_published"))
        elif name == "launch budget":
            counted_runs = [(c, len(results[c["id"]]["launches"])) for c in right
                            if results[c["id"]].get("launches") is not None]
            over = [(c, n) for c, n in counted_runs if launch_problem(ex, c["case"].size, n)]
            if over:
                c, n = max(over, key=lambda cn: cn[1])
                hints.add(("launches", {"got": n, "budget": ex.launch_budget(c["case"].size),
                                        "where": describe_case(c)}))
            tests.append(_score(name, points, len(counted_runs) - len(over), len(counted_runs),
                                [launch_problem(ex, c["case"].size, n)] if over else []))
        elif name == "traffic budget":
            tests.append(_traffic(ex, sim, right, results, name, points, hints))
        elif name == "grid independent of n":
            big = [c for c in plain if c["config"] and c["config"][0] * c["config"][1] < c["case"].size.elements]
            ok_big = [verdicts[c["id"]]["ok"] for c in big]
            first_bad = next((c for c, ok in zip(big, ok_big) if not ok), None)
            tests.append(_score(name, points, sum(ok_big), len(ok_big),
                                [] if first_bad is None else
                                [f"wrong when the grid ({first_bad['config']}) has fewer threads than elements "
                                 f"({first_bad['case'].size})"]))
        elif name == RACE and not ON_SIMULATOR:
            tests.append(_racecheck(ex, source, name, points, hints, timeout_s, hung))
        elif name == RACE:
            tests.append(_races(ex, run, results, verdicts, name, points, hints))
        elif name == GATE and not right:  # like the budgets: compiling counts for a kernel that works
            tests.append(_score(name, points, 0, 0, []))
        elif name == GATE:
            g = gate_module.gate(ex, source, max(timeout_s, 60.0), memory_bytes)
            if g.environment:
                notes.append(f"compile gate: {g.message}")
                tests.append(TestResult(name, points, points, "skipped", g.message))
            else:
                tests.append(TestResult(name, points if g.status == "passed" else 0, points, g.status, g.message))
        elif name == "speed":
            result, entry = _speed(ex, run, name, points)
            tests.append(result)
            leaderboard += entry
        else:
            raise KeyError(f"exercise {ex.name}: no check named {name!r}")
    return _assemble(ex, submission, source, run, tests, hints.texts(), leaderboard, notes)


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
                 run.stdout, run.stderr, content_hash(source), BACKEND, protections(), notes)


def _grade_data(ex: Exercise, run: ChildRun, results: dict, counted: dict[str, float], submission: str,
                source: str) -> Grade:
    """A "data" exercise: the judge scores each case's value and what the child ran with it;
    each check earns its points times the share of the cases it was checked in that pass (a case
    where the judge says None does not count for that check)."""
    judge = sandbox.load_judge(ex)
    seen: dict[str, list[tuple[bool | None, str]]] = {name: [] for name in ex.points}
    for c in run.cases:
        got = results[c["id"]]
        if got.get("error"):  # the entry raised, or never ran (a timeout, a crash): every check of the case fails
            e = got["error"]
            call = f"{ex.entry}({c['job'].get('argument')!r})" if "argument" in c["job"] else ex.entry
            why = f"{call}: {' '.join(filter(None, (e.get('type'), e.get('where'))))}: {str(e.get('message'))[:300]}"
            checks = [(name, False, why) for name in ex.points]
        else:
            checks = judge.score(c["case"], c["job"], got)
        for name, ok, message in checks:
            if name not in seen:
                raise KeyError(f"exercise {ex.name}: the judge scored {name!r}, which has no points")
            seen[name].append((ok, message))
    tests = []
    for name, points in ex.points.items():
        if not counted[name]:
            tests.append(TestResult(name, 0, 0, "skipped", not_counted_reason(name, ex=ex)))
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
    return _assemble(ex, submission, source, run, tests, [], [], [])


def _races(ex: Exercise, run: ChildRun, results: dict, verdicts: dict, name: str, points: float,
           hints: _Hints) -> TestResult:
    """Simulator: a race is the SAME inputs giving DIFFERENT results under different schedules."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for c in run.cases:
        if c["role"] == "perturbed":
            groups.setdefault(c["of"], []).append(c)
    by_id = {c["id"]: c for c in run.cases}
    divergent = []
    for plain_id, perturbed in groups.items():
        base = results[plain_id]
        for p in perturbed:
            if results[p["id"]].get("error", {}) and results[p["id"]]["error"].get("type") in ("NotRun", "Timeout"):
                continue
            if not same_result(ex, base, results[p["id"]]):
                divergent.append((by_id[plain_id], p))
                break
    if divergent:
        plain_c, p = divergent[0]
        hints.add(("barrier", {"where": describe_case(plain_c)}))
        a = verdicts[plain_c["id"]]
        b = verdicts[p["id"]]
        say = lambda v: "right" if v["ok"] else v["why"].split(": ", 1)[-1]  # noqa: E731
        return TestResult(name, 0, points, "failed",
                          f"the same inputs gave different results under different thread schedules in "
                          f"{len(divergent)} of {len(groups)} case(s); e.g. {describe_case(plain_c)}: the normal "
                          f"schedule {say(a)}, perturbed schedule seed {p['perturb_seed']} {say(b)}")
    checked = [pid for pid in groups if verdicts[pid]["ok"]]
    if not checked:
        return _score(name, points, 0, 0, [])
    return TestResult(name, points, points, "passed",
                      f"the same result under {sum(len(groups[g]) for g in checked)} perturbed schedules")


def _bounds_verdict(c: dict[str, Any], found: str) -> dict[str, Any]:
    """A run charged with a bad access that its output did not show (memcheck, or the simulator)."""
    return {"ok": False, "kind": "error", "hint": ("bounds", {"where": describe_case(c)}),
            "why": f"{describe_case(c)}: {found}"}


def _simulator_runs(ex: Exercise, source: str, timeout_s: float, memory_bytes: int,
                    hung: frozenset[tuple[int, int]] = frozenset()) -> ChildRun:
    """On a GPU machine: every graded run once more (but the one that hung), in a child on the
    simulator, which traces the bytes and checks every index (memcheck cannot see a small overrun that
    lands in an allocation's padding or in the next array)."""
    cases = build_cases(ex, perturbed=False, probes=False, leave_out=hung)
    return run_child(ex, source, max(timeout_s, 60.0), memory_bytes, backend="sim", cases=cases)


def _simulator_bounds(ex: Exercise, plain: list, sim: ChildRun | None) -> list[tuple[dict, dict]]:
    """(graded run, the simulator's IndexError) for each run the simulator caught indexing past the end."""
    if sim is None or sim.report is None:
        return []
    reports = {r.get("id"): r for r in sim.report["cases"] if isinstance(r, dict)}
    got = {run_key(ex, c): reports.get(c["id"]) for c in sim.cases}
    out = []
    for c in plain:
        e = (got.get(run_key(ex, c)) or {}).get("error") or {}
        if e.get("type") == "IndexError":
            out.append((c, e))
    return out


def _traffic(ex: Exercise, sim: ChildRun | None, right: list, results: dict, name: str, points: float,
             hints: _Hints) -> TestResult:
    """Bytes over the budget on the runs whose output is right. On a GPU machine the bytes come from
    the simulator's child (_simulator_runs; public cases, first configuration): the budget counts
    everywhere."""
    if sim is None:
        rows = [(c, results[c["id"]]["bytes"]) for c in right if results[c["id"]].get("bytes") is not None]
        where = ""
    else:
        if not sim.imported or sim.report is None:
            return TestResult(name, 0, points, "failed", f"the traffic trace (on the simulator) did not run: "
                                                         f"{sim.outcome}: {sim.detail}")
        got = {c["id"]: c for c in sim.report["cases"] if isinstance(c, dict)}
        cases = [c for c in sim.cases if not c["case"].hidden and c["config_index"] == 0]
        verdicts = {c["id"]: case_verdict(ex, c, got[c["id"]]) for c in cases if c["id"] in got}
        rows = [(c, got[c["id"]]["bytes"]) for c in cases if c["id"] in got and got[c["id"]].get("bytes") is not None
                and verdicts[c["id"]]["ok"]]
        where = " (traced on the simulator)"
        if not rows:  # right on the GPU but not traced right: say what the simulator's runs did
            why = next((v["why"] for v in verdicts.values() if not v["ok"]), None) or \
                (f"{sim.outcome}: {sim.detail}" if sim.outcome != "ok" else
                 f"{len(got)} of {len(cases)} run(s) reported, none with traced bytes")
            return TestResult(name, 0, points, "failed", f"the traffic trace (on the simulator) has no right run to "
                                                         f"count: {why}")
    over = [(c, b) for c, b in rows if traffic_problem(ex, c["case"].size, b)]
    if over:
        c, b = over[0]
        hints.add(("traffic", {"got": b, "budget": ex.byte_budget(c["case"].size), "size": c["case"].size}))
    lines = [traffic_problem(ex, over[0][0]["case"].size, over[0][1]) + where] if over else []
    if not over and rows:
        lines = [f"within the byte budget in {len(rows)} run(s){where}"]
    return _score(name, points, len(rows) - len(over), len(rows), lines)


def _racecheck(ex: Exercise, source: str, name: str, points: float, hints: _Hints, timeout_s: float,
               hung: frozenset[tuple[int, int]]) -> TestResult:
    """On a GPU: racecheck instead of perturbed schedules (which only the simulator can do)."""
    found = sanitize(ex, source, "racecheck", timeout_s, hung=hung)
    if found.status in ("skipped", "failed"):
        return TestResult(name, 0, points, "failed", f"racecheck did not complete ({found.report}); no credit for a "
                                                      f"race check that did not run")
    if found.status == "errors":
        hints.add(("barrier", {"where": "racecheck on the public cases"}))
        return TestResult(name, 0, points, "failed", f"racecheck (compute-sanitizer) found {found.errors} "
                                                      f"shared-memory hazard(s):\n{found.report}")
    return TestResult(name, points, points, "passed", "racecheck (compute-sanitizer): no hazards")


def _speed(ex: Exercise, run: ChildRun, name: str, points: float) -> tuple[TestResult, list[dict[str, Any]]]:
    """The speed check: counted on a GPU only, for a kernel correct at the speed size."""
    if not ON_GPU:
        return TestResult(name, 0, 0, "skipped", "speed is measured on a GPU only; not counted here"), []
    data, job = (run.report or {}).get("speed"), run.speed_job
    if job is None:
        return TestResult(name, 0, 0, "skipped", "this exercise has no speed measurement"), []
    if data is None:
        return TestResult(name, 0, points, "failed", f"the speed run did not finish ({run.detail or run.outcome})"), []
    if data["error"]:
        e = data["error"]
        return TestResult(name, 0, points, "failed", f"the speed run failed: {e['type']} {e['where']}: "
                                                      f"{e['message']}"), []
    ref, idx = ex.spec.reference(job["inputs"]), job["check_indices"]
    for out_name, expected in ref.items():
        _, bad = compare(out_name, data["outputs"][out_name], expected.reshape(-1)[idx], ex.tol())
        if bad is not None:
            return TestResult(name, 0, points, "failed", f"wrong at the speed size {job['size']} (index "
                                                          f"{int(idx[bad.index[0]])}): no speed credit"), []
    verdict = speed_check.classify(data["student_ms"], data["reference_ms"])
    earned = speed_check.points_for(verdict, points)
    return (TestResult(name, earned, points, "passed" if earned else "failed", verdict.describe()),
            [{"name": "time vs reference", "value": round(verdict.ratio, 3), "order": "asc"}])


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
    text = f"{outcome}: {detail}\n{_ADVICE.get(outcome, '')}".rstrip()
    tests = [TestResult(name, 0, counted[name], "failed", text) if counted[name] else
             TestResult(name, 0, 0, "skipped", not_counted_reason(name, compile_gate, sanitizers, ex))
             for name in ex.points]
    notes = [detail] if outcome == "grader_error" else []
    return Grade(ex.name, submission, 0.0, float(sum(counted.values())), outcome, text, tests, seconds,
                 [{"name": "score", "value": 0}], stdout, stderr, source_hash, BACKEND, protections(), notes)


def _failed_grade(ex: Exercise, submission: str, run: ChildRun, counted: dict[str, float], source_hash: str,
                  compile_gate: bool, sanitizers: bool) -> Grade:
    outcome = run.outcome if run.outcome != "ok" else "crash"
    return failed_grade(ex, submission, outcome, run.detail or "the submission did not load", seconds=run.seconds,
                        stdout=run.stdout, stderr=run.stderr, source_hash=source_hash, compile_gate=compile_gate,
                        sanitizers=sanitizers)


__all__ = ["Grade", "TestResult", "HINTS", "grade", "failed_grade", "counted_checks", "max_score", "content_hash"]
