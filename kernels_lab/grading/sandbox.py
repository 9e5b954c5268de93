"""The parent side of the sandbox: one child process per submission, limits, and the verdict.

What the child can influence: its own outputs, launches and traced bytes (that is what is
graded), its stdout/stderr (kept, truncated), and how long it takes (bounded). On a GPU also
its speed timings: both kernels are timed in its process, so a submission that patches the
timer could fake them; speed is a leaderboard value worth one point, not proof. Its output
at the speed size is still checked here.
What it cannot: the reference and the verdict (computed here, after it has exited), the
hidden cases' expected values (never sent), the results files (written by the parent after
the child is dead, to paths the child is not told), other submissions (one process each).
A report without the per-run nonce the parent sent is rejected as forged.

Limits: wall clock (the whole process group is killed), memory (resident set watched by the
parent, and RLIMIT_AS on the simulator: a CUDA context reserves more address space than any
limit would allow), file size (RLIMIT_FSIZE, which stops output flooding), no standard input.
"""

from __future__ import annotations

import os
import pickle
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..runtime import ON_GPU, ON_SIMULATOR
from ..core import Exercise

OUTPUT_KEEP = 8_000           # characters of stdout/stderr shown in a report
FILE_LIMIT = 64 << 20         # bytes any file of the child may reach (flooding stops here)


@dataclass
class ChildRun:
    outcome: str  # "ok", "timeout", "crash", "memory", "import_error", "exited", "flooding", "forged"
    detail: str = ""
    report: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)   # what was sent (with inputs)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    speed_job: dict[str, Any] | None = None  # what the speed run was given (the parent checks its output)


def _limits(memory_bytes: int):
    def apply():
        os.setsid()  # its own process group: a timeout kills everything it started
        if ON_SIMULATOR:  # a CUDA context reserves far more address space than it uses: there, RSS is watched
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _watch_memory(proc: subprocess.Popen, limit: int, tripped: list) -> None:
    """Kill the child's process group when its resident memory passes the limit."""
    while proc.poll() is None:
        if _rss_bytes(proc.pid) > limit:
            tripped.append(True)
            os.killpg(proc.pid, signal.SIGKILL)
            return
        time.sleep(0.05)


def _read_capped(path: Path) -> str:
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") as f:
        text = f.read(OUTPUT_KEEP).decode(errors="replace")
    if size > OUTPUT_KEEP:
        text += f"\n[... {size - OUTPUT_KEEP:,} more bytes of output not shown]"
    return text


def build_cases(exercise: Exercise, public_only: bool = False) -> list[dict[str, Any]]:
    """Every (case, launch configuration, schedule) the child runs, with fresh inputs.
    Perturbed schedules exist on the simulator only (on a GPU, racecheck looks for races)."""
    cases = []
    workload = exercise.spec
    configs = exercise.configs or (None,)
    seeds = exercise.race_seeds if ON_SIMULATOR else ()
    for case in exercise.cases:
        if public_only and (case.hidden or case.probe):
            continue
        for c, config in enumerate(configs):
            rng = np.random.default_rng(case.seed * 7919 + c)
            inputs = (workload.symmetric_inputs if case.probe else workload.make_inputs)(case.size, rng)
            entry = {"id": len(cases), "case": case, "config_index": c, "inputs": inputs,
                     "output_specs": workload.output_specs(case.size), "perturb_seed": None,
                     "config": config(case.size) if config else None}
            cases.append(entry)
            for seed in seeds if not case.hidden else ():
                cases.append({**entry, "id": len(cases), "perturb_seed": seed})
    return cases


def _speed_job(exercise: Exercise) -> dict[str, Any]:
    spec, workload = exercise.speed, exercise.spec
    rng = np.random.default_rng(90210)
    inputs = workload.make_inputs(spec.size, rng)
    outputs = workload.output_specs(spec.size)
    n = min(int(np.prod(shape)) for shape, _ in outputs.values())
    # the child returns the output at these indices only (a whole large output would pass the
    # child's file-size limit); the last element is always among them
    check = np.unique(np.append(rng.integers(0, n, 1 << 16), n - 1))
    return {"size": spec.size, "inputs": inputs, "output_specs": outputs, "check_indices": check,
            "config": exercise.configs[0](spec.size), "reference": spec.reference,
            "reference_config": spec.reference_config(spec.size), "reps": spec.reps}


def run_limited(argv: Sequence[str], cwd: Path, stdout: Path, stderr: Path, timeout_s: float,
                memory_bytes: int, env: dict[str, str] | None = None) -> tuple[int, bool, bool]:
    """Run argv under the child limits, in `cwd` (a directory of the grader's, never its own
    working directory: whatever the submission writes stays there). Returns (exit code,
    timed out, memory limit tripped); on a timeout its whole process group is killed."""
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    with open(stdout, "wb") as fo, open(stderr, "wb") as fe:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=cwd, env=env,
                                preexec_fn=_limits(memory_bytes))
        tripped: list = []
        threading.Thread(target=_watch_memory, args=(proc, memory_bytes, tripped), daemon=True).start()
        try:
            return proc.wait(timeout=timeout_s), False, bool(tripped)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(), True, bool(tripped)


def run_child(exercise: Exercise, source: str, timeout_s: float = 120.0, memory_bytes: int = 4 << 30,
              *, public_only: bool = False, speed: bool = False, prefix: Sequence[str] = ()) -> ChildRun:
    """Run the submission in a child process. prefix: a command the child runs under (a sanitizer);
    public_only: public cases only; speed: also time it against the reference (GPU, kernel exercises)."""
    cases = build_cases(exercise, public_only)
    speed_job = _speed_job(exercise) if speed and ON_GPU and exercise.speed and exercise.kind == "kernel" else None
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="kl-grade-") as tmp:
        tmp = Path(tmp)
        job, report_path = tmp / "job.pkl", tmp / "report.pkl"
        sent = [{k: v for k, v in c.items() if k != "case"} for c in cases]
        with open(job, "wb") as f:
            pickle.dump({"nonce": nonce, "source": source, "entry": exercise.entry, "kind": exercise.kind,
                         "argument_order": exercise.arguments(exercise.cases[0].size), "cases": sent, "speed": speed_job}, f)
        out, err = tmp / "stdout.txt", tmp / "stderr.txt"
        t0 = time.monotonic()
        code, timed_out, tripped = run_limited(
            [*prefix, sys.executable, "-m", "kernels_lab.grading.child", str(job), str(report_path)],
            tmp, out, err, timeout_s, memory_bytes)
        run = ChildRun("ok", cases=cases, stdout=_read_capped(out), stderr=_read_capped(err),
                       seconds=time.monotonic() - t0, speed_job=speed_job)
        report = None
        if report_path.exists():
            with open(report_path, "rb") as f:
                report = pickle.load(f)
        if report is not None and report.get("nonce") != nonce:
            return _set(run, "forged", "the child's report does not carry this run's nonce: not trusted")
        run.report = report
        done = len(report["cases"]) if report else 0
        if timed_out:
            return _set(run, "timeout", f"did not finish within {timeout_s:g} s (an infinite loop or a spin "
                                        f"that never ends?); {done} of {len(cases)} runs completed")
        if report and report.get("import_error"):
            e = report["import_error"]
            what = f"{e['type']} while loading the submission {e['where']}: {e['message']}"
            if e["type"] == "MemoryError":
                return _set(run, "memory", f"ran out of its {memory_bytes / 2**30:g} GiB memory limit ({what})")
            if e["type"] == "SystemExit":
                return _set(run, "exited", f"the submission called sys.exit({e['message']}) while loading")
            if "File too large" in e["message"]:
                return _set(run, "flooding", f"output flooding: a file passed {FILE_LIMIT >> 20} MiB ({what})")
            return _set(run, "import_error", what)
        if tripped or "MemoryError" in run.stderr or (code != 0 and _memory_kill(code, run.stderr)):
            return _set(run, "memory", f"ran out of its {memory_bytes / 2**30:g} GiB memory limit")
        if code != 0 or report is None or done < len(cases):
            why = f"signal {-code}" if code < 0 else f"exit code {code}"
            if code == -signal.SIGXFSZ:
                why += f" (output flooding: a file passed {FILE_LIMIT >> 20} MiB)"
            return _set(run, "crash", f"the child process died ({why}) after {done} of {len(cases)} runs")
        return run


def _memory_kill(code: int, stderr: str) -> bool:
    return "Cannot allocate memory" in stderr or "std::bad_alloc" in stderr


def _set(run: ChildRun, outcome: str, detail: str) -> ChildRun:
    run.outcome, run.detail = outcome, detail
    return run
