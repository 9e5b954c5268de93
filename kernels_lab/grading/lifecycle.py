"""One confined child's life, seen from the parent: start it through the warden, give each phase its
clock, kill its whole process tree, then collect what it left and say how it ended.

run_child runs a submission's cases (cases.py plans them, confine.py says what the child may touch,
child.py is what runs inside); run_confined runs any command that way (the compile gate's too).

What the child can influence: its own outputs (checked against the reference), the launch and
provenance records and traced bytes it reports, its stdout/stderr (kept, truncated) and how long it
takes (bounded). The child is the submission's own process: code that rewrites the grader's objects
in its memory could forge those records; the outputs, the compile gate (a separate process that
compiles the kernel with the real compiler) and the sanitizer's view on a GPU are what such a forger
cannot fake without doing the work. What it cannot do: see the reference or the hidden cases'
expected values (never sent), write the results (the parent writes them, atomically, after the
warden has killed the whole child tree), or touch another submission (one confined process tree
each). Its report is JSON decoded with a strict decoder (records.decode; never unpickled), and must
carry the per-run nonce.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..core import Exercise
from ..backend import BACKEND
from .cases import build_cases, describe_case, speed_job
from .confine import (DRIVER_WRITES, FILE_LIMIT, RUN_TIMEOUT_S, WARDEN, confinement, hand_over,
                      scratch_folder)
from .records import ChildRun, ReportError, decode

OUTPUT_KEEP = 8_000           # characters of stdout/stderr shown in a report
COLLECT_LIMIT = 32 << 20      # characters of a collected file (a sanitizer's log) the grader reads
STARTUP_S = 90.0              # Python, NumPy and numba starting in the child: the grader's cost, not the student's
EXIT_GRACE_S = 15.0           # after its last run, the child may take this long to exit
# the least memory limit a grade may run under: the child's own Python, NumPy and numba, before any line of a
# submission. Measured (2026-12-05, simulator, address-space limit) with a correct fuse_mini: 9/9 at 0.5 GiB (4 s),
# 9/9 at 0.4 GiB but 24 s, 0/9 at 0.35 and 0.3 (the child died starting); `--memory-gb` below it is refused
MIN_MEMORY_GB = 0.5
STOP_GRACE_S = 0.5            # a warden told to stop (SIGTERM: it kills its child's tree) gets this long, then SIGKILL


class GradingStopped(BaseException):
    """The grading was stopped (Ctrl-C): no confined child starts any more and every running one was
    killed. A BaseException, as KeyboardInterrupt is: no `except Exception` turns it into a grade."""


_live: set[subprocess.Popen] = set()   # the wardens running now (one per confined child)
_live_lock = threading.Lock()
_stopped = threading.Event()


def stop_all() -> None:
    """Stop grading now (Ctrl-C): start no more children, and end every running one within a second.
    Each warden is told to stop (it kills its child's whole tree, as at a timeout), then killed."""
    with _live_lock:
        _stopped.set()
        wardens = list(_live)
    for proc in wardens:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in wardens:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended just after the wait (its worker reaped it): the interrupt goes on
                pass


def allow_children() -> None:
    """A new grading run may start children again (after an earlier one was stopped in this process)."""
    _stopped.clear()


@dataclass
class Confined:
    """How a confined command ended, as the warden saw it (status) and what it printed (truncated)."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    memory_tripped: bool
    status: dict[str, Any]
    stdout: str
    stderr: str
    seconds: float


def _read_capped(path: Path) -> str:
    if not path.exists():
        return ""
    size = path.stat().st_size
    with open(path, "rb") as f:
        text = f.read(OUTPUT_KEEP).decode(errors="replace")
    if size > OUTPUT_KEEP:
        text += f"\n[... {size - OUTPUT_KEEP:,} more bytes of output not shown]"
    return text


def run_confined(argv: Sequence[str], tmp: Path, *, env: dict[str, str] | None = None, run_s: float = RUN_TIMEOUT_S,
                 phase_limits: dict[str, float] | None = None, total_s: float | None = None,
                 memory_bytes: int = 4 << 30, address_limit: bool, network: bool = True,
                 extra_writable: Sequence[str] = (), full: bool = True) -> Confined:
    """Run argv through the warden, in tmp/scratch (confine.scratch_folder), and wait for it and its
    whole process tree. run_s: the default clock of a phase (progress.json steps restart it);
    full=False: limits and the subreaper only (confine.SANITIZER_CONFINEMENT)."""
    scratch = scratch_folder(tmp)
    phases = {"start": STARTUP_S + run_s, "import": run_s, "run": run_s, "speed": max(run_s, 60.0),
              "done": EXIT_GRACE_S, **(phase_limits or {})}
    total = total_s if total_s is not None else STARTUP_S + 10 * run_s
    spec = {"argv": list(argv), "stdout": str(tmp / "stdout.txt"), "stderr": str(tmp / "stderr.txt"),
            "status": str(tmp / "warden.json"),
            **confinement(scratch, env, memory_bytes=memory_bytes, address_limit=address_limit, network=network,
                          extra_writable=extra_writable, full=full),
            "phase_limits": phases, "default_limit": run_s, "total_limit": total,
            "memory_bytes": int(memory_bytes), "progress": str(scratch / "progress.json")}
    spec_path = tmp / "warden-spec.json"
    spec_path.write_text(json.dumps(spec))
    os.chmod(spec_path, 0o600)
    t0 = time.monotonic()
    with _live_lock:
        if _stopped.is_set():
            raise GradingStopped()
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(WARDEN), str(spec_path)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        _live.add(proc)
    try:
        _, warden_err = proc.communicate(timeout=total + 60)
    except subprocess.TimeoutExpired:  # the warden itself stuck: kill it (its child dies with it)
        os.killpg(proc.pid, signal.SIGKILL)
        _, warden_err = proc.communicate()
    finally:
        with _live_lock:
            _live.discard(proc)
    if _stopped.is_set():  # killed by stop_all: what it left is no run of the submission's
        raise GradingStopped()
    seconds = time.monotonic() - t0
    try:
        status = json.loads((tmp / "warden.json").read_text())
        if not isinstance(status, dict):
            raise ValueError("not an object")
    except (OSError, ValueError) as e:
        status = {"warden_error": f"no status from the warden ({type(e).__name__}; exit {proc.returncode}): "
                                  f"{warden_err.decode(errors='replace')[-500:]}"}

    def num(key):
        v = status.get(key)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    return Confined(num("exit_code"), num("signal"), status.get("timed_out") is True,
                    status.get("memory_tripped") is True, status, _read_capped(tmp / "stdout.txt"),
                    _read_capped(tmp / "stderr.txt"), seconds)


def read_report(path: Path) -> dict[str, Any] | None:
    """The child's report (None: it wrote none), strictly decoded; ReportError if it is not one."""
    if not path.exists():
        return None
    with open(path, "rb") as f:
        raw = f.read(FILE_LIMIT + 1)  # no file of the child's can be longer
    try:
        doc = decode(json.loads(raw))
    except (ValueError, RecursionError) as e:
        raise ReportError(f"not the grader's report format ({type(e).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cases", []), list):
        raise ReportError("not the grader's report format")
    return doc


def run_child(exercise: Exercise, source: str, timeout_s: float = RUN_TIMEOUT_S, memory_bytes: int = 4 << 30,
              *, public_only: bool = False, speed: bool = False, prefix: Sequence[str] = (),
              backend: str | None = None, cases: list[dict[str, Any]] | None = None,
              collect: Sequence[str] = (), slowdown: float = 1.0, hidden: int | None = None) -> ChildRun:
    """Run the submission in a confined child process.

    timeout_s: seconds each run may take (loading the submission gets as long; the process as a
    whole gets a cap of about that per run); prefix: a command the child runs under (a sanitizer;
    "{scratch}" in it becomes the scratch folder); public_only: public cases only; speed: also
    time it against the reference (GPU, kernel exercises); backend: "sim" runs the child on the
    simulator whatever this process runs on (the traffic trace on a GPU machine); cases: the runs
    to make (default build_cases); collect: files of the scratch folder to return (a sanitizer's
    log); slowdown: how much slower each run is expected to be (under a sanitizer); hidden: the hidden
    cases' seed (build_cases; one per grade, so every child of a grade runs the same inputs).
    """
    sim_child = backend == "sim" or (backend is None and BACKEND.can_trace)  # a child that traces every access
    if cases is None:
        cases = build_cases(exercise, public_only, perturbed=sim_child, hidden=hidden)
    job_for_speed = speed_job(exercise) if speed and BACKEND.can_time and not sim_child and exercise.speed \
        and exercise.kind == "kernel" else None
    nonce = secrets.token_hex(16)
    env = dict(os.environ)
    if backend == "sim":
        env.update({"KERNELS_LAB_BACKEND": "sim", "NUMBA_ENABLE_CUDASIM": "1"})
    run_s = float(timeout_s) * slowdown
    with tempfile.TemporaryDirectory(prefix="kl-grade-") as tmp:
        tmp = Path(tmp)
        scratch = scratch_folder(tmp)
        job, report_path = scratch / "job.pkl", scratch / "report.json"
        sent = [{k: v for k, v in c.items() if k != "case"} for c in cases]
        with open(job, "wb") as f:
            pickle.dump({"nonce": nonce, "source": source, "entry": exercise.entry, "kind": exercise.kind,
                         "judge": exercise.judge,
                         "argument_order": exercise.arguments(exercise.cases[0].size), "cases": sent,
                         "speed": job_for_speed, "keep_arrays": bool(prefix)}, f)
        hand_over(job)
        argv = [*(a.replace("{scratch}", str(scratch)) for a in prefix),
                sys.executable, "-m", "kernels_lab.grading.child", str(job), str(report_path),
                str(scratch / "progress.json")]
        total = STARTUP_S * slowdown + run_s * (len(cases) + 3) + (max(run_s, 60.0) if job_for_speed else 0)
        writable = ("/dev/shm",) if prefix else DRIVER_WRITES if BACKEND.on_device and not sim_child else ()
        got = run_confined(argv, tmp, env=env, run_s=run_s, total_s=total, memory_bytes=memory_bytes,
                           address_limit=sim_child and not prefix, network=not prefix, full=not prefix,
                           extra_writable=writable, phase_limits={"start": STARTUP_S * slowdown + run_s})
        run = ChildRun("ok", cases=cases, stdout=got.stdout, stderr=got.stderr, seconds=got.seconds,
                       speed_job=job_for_speed, status=got.status)
        for name in collect:
            p = scratch / name
            run.files[name] = p.read_text(errors="replace")[:COLLECT_LIMIT] if p.exists() else ""
        try:
            report = read_report(report_path)
        except ReportError as e:
            return _set(run, "forged", f"the child's report cannot be read as the grader's ({e}): not trusted")
    if report is not None and report.get("nonce") != nonce:
        return _set(run, "forged", "the child's report does not carry this run's nonce: not trusted")
    return classify(run, report, got, timeout_s=run_s, memory_bytes=memory_bytes)


_SIGNALS = {signal.SIGSEGV: "segmentation fault", signal.SIGABRT: "abort", signal.SIGKILL: "killed",
            signal.SIGBUS: "bus error", signal.SIGFPE: "floating-point exception", signal.SIGXFSZ: "file too large",
            signal.SIGILL: "illegal instruction"}


def _stopped_at(run: ChildRun, progress: Any) -> tuple[str, str]:
    """(phase, words) for where the child was, from its last progress (parsed defensively)."""
    if not isinstance(progress, dict):
        return "start", "while starting Python (before the submission was loaded)"
    phase = progress.get("phase")
    if phase == "import":
        return "import", "while loading the submission"
    if phase == "run":
        k = progress.get("case")
        by_id = {c["id"]: c for c in run.cases}
        if isinstance(k, int) and k in by_id:
            order = [c["id"] for c in run.cases].index(k)
            return "run", f"during run {order + 1} of {len(run.cases)} ({describe_case(by_id[k])})"
        return "run", "during a run"
    if phase == "speed":
        return "speed", "during the speed measurement (after every graded run had finished)"
    if phase == "done":
        return "done", "while exiting, after every run had finished"
    return "start", "while starting Python (before the submission was loaded)"


def classify(run: ChildRun, report: dict[str, Any] | None, got: Confined, *, timeout_s: float,
             memory_bytes: int) -> ChildRun:
    """The run's outcome and its words, from the report and how the warden saw the child end."""
    run.report = report
    done = len(report["cases"]) if report else 0
    phase, where = _stopped_at(run, got.status.get("progress"))
    run.stopped = where
    run.imported = bool(report) and report.get("imported") is True and not report.get("import_error")
    gib = f"{memory_bytes / 2**30:g} GiB"
    if got.status.get("warden_error"):
        return _set(run, "grader_error", f"the grader's sandbox failed (not the submission's doing): "
                                         f"{got.status['warden_error']}")
    if report and report.get("import_error"):
        e = report["import_error"]
        what = f"{e.get('type')} while loading the submission {e.get('where', '')}: {e.get('message', '')}"
        if e.get("type") == "MemoryError":
            return _set(run, "memory", f"ran out of its {gib} memory limit ({what})")
        if e.get("type") == "SystemExit":
            return _set(run, "exited", f"the submission called sys.exit({e.get('message')}) while loading the "
                                       f"submission")
        if "File too large" in str(e.get("message")):
            return _set(run, "flooding", f"output flooding: a file passed {FILE_LIMIT >> 20} MiB ({what})")
        return _set(run, "import_error", what)
    complete = report is not None and done == len(run.cases)
    if got.timed_out:
        limit = got.status.get("phase_limit")
        limit_text = f"{limit:g} s" if isinstance(limit, (int, float)) else f"{timeout_s:g} s"
        if complete:  # every graded run finished: the speed run or the exit did not
            return _set(run, "ok", f"stopped {where}: that phase passed its {limit_text} limit")
        return _set(run, "timeout", f"did not finish within {limit_text} {where} (an infinite loop, a spin that "
                                    f"never ends, or a barrier that not every thread reaches?); {done} of "
                                    f"{len(run.cases)} runs completed")
    if got.memory_tripped or "MemoryError" in run.stderr or "Cannot allocate memory" in run.stderr \
            or "std::bad_alloc" in run.stderr:
        if not complete and phase == "start":  # no line of the submission had run: the limit is the grader's
            return _set(run, "grader_error", f"the memory limit ({gib}) is too small for the grader's own child, "
                                             f"which ran out {where}: not the submission's doing (give more "
                                             f"memory, at least {MIN_MEMORY_GB:g} GiB)")
        if not complete:
            return _set(run, "memory", f"ran out of its {gib} memory limit {where}")
    sig, code = got.signal, got.exit_code
    if complete and (sig is None and code == 0 or phase in ("speed", "done")):
        return run
    if complete:
        return _set(run, "ok", f"the child process ended badly {where} ({_why(sig, code)})")
    if sig == signal.SIGXFSZ:
        return _set(run, "flooding", f"output flooding: a file passed {FILE_LIMIT >> 20} MiB {where}")
    if phase == "start" and sig is None:  # no line of the submission had run yet: the grader's own failure
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return _set(run, "grader_error", f"the grader's child failed {where} ({_why(sig, code)}): {last}")
    if phase == "import" and sig is None:
        return _set(run, "exited", f"the submission exited ({_why(sig, code)}) {where}")
    return _set(run, "crash", f"the child process died ({_why(sig, code)}) {where}" +
                (f"; {done} of {len(run.cases)} runs completed" if phase == "run" else ""))


def _why(sig: int | None, code: int | None) -> str:
    if sig is not None:
        name = _SIGNALS.get(sig, "")
        return f"signal {sig}" + (f", {name}" if name else "")
    return f"exit code {code}"


def _set(run: ChildRun, outcome: str, detail: str) -> ChildRun:
    run.outcome, run.detail = outcome, detail
    return run
