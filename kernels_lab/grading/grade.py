"""The verdict: checks, points and feedback a student can act on, computed in the parent."""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import compare
from ..core import Exercise
from ..runtime import ON_GPU, ON_SIMULATOR
from . import speed as speed_check
from .sandbox import ChildRun, run_child, run_limited
from .sanitizer import sanitize
from .verdict import HINTS, case_verdict, hint_text, launch_problem, traffic_problem

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _score(name: str, points: float, ok_count: int, total: int, lines: list[str],
           visibility: str = "visible") -> TestResult:
    score = points * ok_count / total if total else 0.0
    status = "passed" if total and ok_count == total else "failed"
    if not total:
        lines = lines or ["no correct run to check this on: fix correctness first"]
    return TestResult(name, round(score, 3), points, status, "\n".join(lines) or "all runs correct", visibility)


def _compile_gate(ex: Exercise, source: str, timeout_s: float = 120, memory_bytes: int = 4 << 30) -> tuple[str, str]:
    """Compile the student's kernel for sm_90 with the real compiler (no GPU needed): status, message.
    The submission's top level runs here too, so it runs like the child: limits, its own directory."""
    if ex.kind != "kernel":
        return "skipped", "host functions are compiled when they launch"
    code = ("import sys, numpy as np\n"
            "try:\n"
            "    from cuda.pathfinder import load_nvidia_dynamic_lib\n"
            "    for lib in ('nvvm', 'nvrtc'):\n"
            "        load_nvidia_dynamic_lib(lib)\n"
            "except Exception as e:\n"
            "    print('NO_TOOLCHAIN', type(e).__name__); sys.exit(0)\n"
            "from kernels_lab.runtime import cuda\n"
            "from numba import types\n"
            "ns = {'cuda': cuda, 'np': np, 'numpy': np, 'math': __import__('math')}\n"
            "exec(compile(open('submission.py').read(), '<submission>', 'exec'), ns)\n"
            f"k = ns[{ex.entry!r}]\n"
            f"sig = {_signature_expr(ex)}\n"
            "cuda.compile_ptx(k.py_func, sig, cc=(9, 0))\n"
            "print('compiled')\n")
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    with tempfile.TemporaryDirectory(prefix="kl-compile-") as tmp:
        tmp = Path(tmp)
        (tmp / "submission.py").write_text(source)
        code_rc, timed_out, tripped = run_limited([sys.executable, "-c", code], tmp, tmp / "stdout.txt",
                                                  tmp / "stderr.txt", timeout_s, memory_bytes, env)
        stdout = (tmp / "stdout.txt").read_text(errors="replace")
        stderr = (tmp / "stderr.txt").read_text(errors="replace")
    if timed_out:
        return "failed", f"compiling for sm_90 did not finish within {timeout_s:g} s"
    if tripped:
        return "failed", f"compiling for sm_90 ran out of its {memory_bytes / 2**30:g} GiB memory limit"
    if "NO_TOOLCHAIN" in stdout:
        return "skipped", "no NVVM/NVRTC here to compile with (pip install 'kernels-lab[cu13]'); not counted"
    if code_rc == 0 and "compiled" in stdout:
        return "passed", "compiles for sm_90 with NVVM"
    err = stderr.strip().splitlines()
    return "failed", "numba's real compiler rejects the kernel (the simulator accepts more):\n" + "\n".join(err[-6:])


def _signature_expr(ex: Exercise) -> str:
    names = {np.dtype(np.float32): "types.float32", np.dtype(np.int32): "types.int32"}
    size = ex.cases[0].size
    inputs = ex.spec.make_inputs(size, np.random.default_rng(0))
    outs = ex.spec.output_specs(size)
    parts = []
    for arg in ex.arguments(size):
        v = outs[arg][1] if arg in outs else inputs[arg]
        dtype = np.dtype(v if arg in outs else getattr(v, "dtype", type(v)))
        scalar = names[dtype]
        is_array = arg in outs or isinstance(v, np.ndarray)
        parts.append(f"types.Array({scalar}, 1, 'C')" if is_array else scalar)
    return "(" + ", ".join(parts) + ",)"


def grade(ex: Exercise, source: str, submission: str = "submission", timeout_s: float = 120,
          memory_bytes: int = 4 << 30, compile_gate: bool = True, sanitizers: bool = True) -> Grade:
    """sanitizers: on a GPU, also run the public cases under compute-sanitizer (memcheck, and
    racecheck for exercises with a race check); each in its own child process."""
    run = run_child(ex, source, timeout_s, memory_bytes, speed=True)
    tests: list[TestResult] = []
    if run.outcome != "ok":
        return _failed_grade(ex, submission, run)
    leaderboard = []
    memcheck = sanitize(ex, source, "memcheck") if sanitizers and ON_GPU else None
    results = {c["id"]: c for c in run.report["cases"]}
    verdicts = {c["id"]: case_verdict(ex, c, results[c["id"]]) for c in run.cases}
    plain = [c for c in run.cases if c["perturb_seed"] is None and not c["case"].probe]
    hints: list[str] = []

    def group(hidden: bool):
        chosen = [c for c in plain if c["case"].hidden == hidden]
        bad = [verdicts[c["id"]] for c in chosen if not verdicts[c["id"]]["ok"]]
        for v in bad:
            if (h := hint_text(v.get("hint"))) and h not in hints:
                hints.append(h)
        lines = [v["why"] for v in bad[:3]] + ([f"... and {len(bad) - 3} more"] if len(bad) > 3 else [])
        if hidden:
            lines = [f"{len(bad)} of {len(chosen)} hidden runs wrong"] + lines[:1] if bad else []
        return len(chosen) - len(bad), len(chosen), lines

    for name, points in ex.points.items():
        if name == "correct (public)":
            tests.append(_score(name, points, *group(False)))
            if memcheck is not None and memcheck.status == "errors":  # on a GPU a stray access may not show
                hints.insert(0, HINTS["bounds"])
                tests[-1] = TestResult(name, 0, points, "failed", f"memcheck (compute-sanitizer) found "
                                       f"{memcheck.errors} bad memory access(es):\n{memcheck.report}")
            elif memcheck is not None:
                tests[-1].output += f"\nmemcheck (compute-sanitizer): {memcheck.status}" + \
                    ("" if memcheck.status == "clean" else f" ({memcheck.report})")
        elif name == "correct (hidden)":
            ok, total, lines = group(True)
            tests.append(_score(name, points, ok, total, lines, visibility="after_published"))
        elif name == "launch budget":
            counted = [(c, len(results[c["id"]]["launches"])) for c in plain
                       if results[c["id"]]["launches"] is not None]
            over = [(c, n) for c, n in counted if launch_problem(ex, c["case"].size, n)]
            if over:
                c, n = max(over, key=lambda cn: cn[1])
                hints.append(HINTS["launches"].format(got=n, budget=ex.launch_budget(c["case"].size)))
            tests.append(_score(name, points, len(counted) - len(over), len(counted),
                                [launch_problem(ex, c["case"].size, n)] if over else []))
        elif name == "traffic budget":
            if not ON_SIMULATOR:
                tests.append(TestResult(name, 0, 0, "skipped", "traced on the simulator only; not counted here"))
                continue
            rows = [(c, results[c["id"]]["bytes"]) for c in plain
                    if results[c["id"]]["bytes"] is not None and verdicts[c["id"]]["ok"]]
            over = [(c, b) for c, b in rows if traffic_problem(ex, c["case"].size, b)]
            if over:
                c, b = over[0]
                hints.append(HINTS["traffic"].format(got=b, budget=ex.byte_budget(c["case"].size)))
            tests.append(_score(name, points, len(rows) - len(over), len(rows),
                                [traffic_problem(ex, over[0][0]["case"].size, over[0][1])] if over else []))
        elif name == "grid independent of n":
            big = [c for c in plain if c["config"][0] * c["config"][1] < c["case"].size.elements]
            ok_big = [verdicts[c["id"]]["ok"] for c in big]
            tests.append(_score(name, points, sum(ok_big), len(ok_big),
                                [] if all(ok_big) else [f"wrong when the grid ({big[0]['config']}) has fewer threads "
                                                        f"than elements ({big[0]['case'].size})"]))
        elif name == "no race under perturbed schedules" and not ON_SIMULATOR:
            tests.append(_racecheck(ex, source, name, points, sanitizers, hints))
        elif name == "no race under perturbed schedules":
            perturbed = [c for c in run.cases if c["perturb_seed"] is not None]
            bad = [c for c in perturbed if not verdicts[c["id"]]["ok"]]
            if bad and HINTS["barrier"] not in hints:
                hints.append(HINTS["barrier"])
            # all or nothing: one schedule that breaks it proves the race
            tests.append(_score(name, points, 0 if bad else len(perturbed), len(perturbed),
                                [f"wrong under {len(bad)} of {len(perturbed)} perturbed schedules; e.g. seed "
                                 f"{bad[0]['perturb_seed']}: {verdicts[bad[0]['id']]['why']}"] if bad else []))
        elif name == "compiles for sm_90":
            if not compile_gate:
                tests.append(TestResult(name, 0, 0, "skipped", "compile gate turned off"))
                continue
            status, msg = _compile_gate(ex, source)
            tests.append(TestResult(name, points if status == "passed" else 0, points if status != "skipped" else 0,
                                    status, msg))
        elif name == "speed":
            result, entry = _speed(ex, run, name, points)
            tests.append(result)
            leaderboard += entry
        else:
            raise KeyError(f"exercise {ex.name}: no check named {name!r}")
    probes = [c for c in run.cases if c["case"].probe]
    if probes and any(verdicts[c["id"]]["ok"] for c in probes) and any(not verdicts[c["id"]]["ok"] for c in plain):
        hints.insert(0, HINTS["symmetric"])
    score = sum(t.score for t in tests)
    max_score = sum(t.max_score for t in tests)
    summary = f"{score:g} / {max_score:g}" + ("" if not hints else "\nhints:\n" + "\n".join(f"- {h}" for h in hints))
    return Grade(ex.name, submission, round(score, 3), max_score, "graded", summary, tests, run.seconds,
                 [{"name": "score", "value": round(score, 3)}, *leaderboard], run.stdout, run.stderr)


def _racecheck(ex: Exercise, source: str, name: str, points: float, sanitizers: bool, hints: list[str]) -> TestResult:
    """On a GPU: racecheck instead of perturbed schedules (which only the simulator can do)."""
    found = sanitize(ex, source, "racecheck") if sanitizers else None
    if found is None or found.status in ("skipped", "failed"):
        why = found.report if found else "sanitizers turned off"
        return TestResult(name, 0, 0, "skipped", f"no perturbed schedules on a GPU, and racecheck did not run "
                                                  f"({why}); not counted")
    if found.status == "errors":
        if HINTS["barrier"] not in hints:
            hints.append(HINTS["barrier"])
        return TestResult(name, 0, points, "failed", f"racecheck (compute-sanitizer) found {found.errors} "
                                                      f"shared-memory hazard(s):\n{found.report}")
    return TestResult(name, points, points, "passed", "racecheck (compute-sanitizer): no hazards")


def _speed(ex: Exercise, run: ChildRun, name: str, points: float) -> tuple[TestResult, list[dict[str, Any]]]:
    """The speed check: counted on a GPU only, for a kernel correct at the speed size."""
    if not ON_GPU:
        return TestResult(name, 0, 0, "skipped", "speed is measured on a GPU only; not counted here"), []
    data, job = (run.report or {}).get("speed"), run.speed_job
    if data is None or job is None:
        return TestResult(name, 0, 0, "skipped", "this exercise has no speed measurement"), []
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


def _failed_grade(ex: Exercise, submission: str, run: ChildRun) -> Grade:
    """A submission that never produced results: every check fails, with the reason."""
    advice = {"timeout": "Look for a loop whose exit condition never becomes true (a spin on a flag, a while "
                         "loop without an increment).",
              "crash": "The process died: a segmentation fault, an abort, os._exit, or output flooding.",
              "memory": "Allocate only what the exercise needs.",
              "import_error": "Fix the error above; the grader could not load your code.",
              "exited": "Do not call sys.exit() or exit() in a submission.",
              "flooding": "Print less: the grader keeps only the start of the output.",
              "forged": "The report was not the grader's own."}[run.outcome]
    text = f"{run.outcome}: {run.detail}\n{advice}"
    tests = [TestResult(name, 0, pts, "failed", text) for name, pts in ex.points.items()
             if not (name == "speed" and not ON_GPU)]
    return Grade(ex.name, submission, 0.0, sum(t.max_score for t in tests), run.outcome, text, tests, run.seconds,
                 [{"name": "score", "value": 0}], run.stdout, run.stderr)
