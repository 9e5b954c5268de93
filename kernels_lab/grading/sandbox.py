"""The parent side of the sandbox: one confined child process per submission, and what it did.

Every child (the graded runs, the compile gate, the sanitizer runs, the simulator's traffic
trace on a GPU machine) starts through the warden (warden.py, a standard-library script), which
puts it under every protection this kernel allows and kills every process it started before
the grader reads anything back. `protections()` says which are in force here:

  process containment  a PID namespace (the child is its PID 1: when it exits the kernel kills
                       every process it started), or else the warden as a child subreaper that
                       kills and reaps every leftover descendant (double forks, new sessions);
  filesystem writes    Landlock: the child writes only beneath its own scratch folder (and opens
                       character devices such as /dev/null and the GPU's); not the package, not
                       the results, not another submission's folder;
  signals and ptrace   Landlock's signal scope (ABI >= 6), the PID namespace, or an unprivileged
                       user: the child cannot kill or trace the warden or the grader;
  unprivileged user    when the grader runs as root and the interpreter is readable by others,
                       the child runs as `nobody`;
  network              its own network namespace (nothing reachable), else Landlock's TCP rules;
  resource limits      wall clock per run (each run of a case restarts its clock, under a total
                       cap), resident memory of the whole process tree, address space on the
                       simulator, file size (output flooding stops at FILE_LIMIT), no core dumps,
                       no standard input.

What the child can influence: its own outputs (checked here against the reference), the launch
and provenance records and traced bytes it reports, its stdout/stderr (kept, truncated) and how
long it takes (bounded). The child is the submission's own process: code that rewrites the
grader's objects in its memory could forge those records; the outputs, the compile gate (a
separate process that compiles the kernel with the real compiler) and the sanitizer's view on a
GPU are what such a forger cannot fake without doing the work. What it cannot do: see the
reference or the hidden cases' expected values (never sent), write the results (the parent
writes them, atomically, after the warden has killed the whole child tree), or touch another
submission (one confined process tree each). Its report is JSON decoded with a strict decoder
(never unpickled), and must carry the per-run nonce.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import pickle
import pwd
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..runtime import ON_GPU, ON_SIMULATOR
from ..core import Case, Exercise

OUTPUT_KEEP = 8_000           # characters of stdout/stderr shown in a report
FILE_LIMIT = 64 << 20         # bytes any file of the child may reach (flooding stops here)
COLLECT_LIMIT = 32 << 20      # characters of a collected file (a sanitizer's log) the grader reads
RUN_TIMEOUT_S = 20.0          # default: seconds one run (one case, configuration, schedule) may take
STARTUP_S = 90.0              # Python, NumPy and numba starting in the child: the grader's cost, not the student's
EXIT_GRACE_S = 15.0           # after its last run, the child may take this long to exit
NPROC_LIMIT = 4096            # processes (threads count) of the unprivileged user, all grades together
WARDEN = Path(__file__).with_name("warden.py")
SANDBOX_ENV = "KERNELS_LAB_SANDBOX"  # "off": no namespaces, Landlock or user drop (limits only)
# Measured on the H200 (2026-12-03, benchmarks/sandbox_probe.py, figures/data/sandbox_probe*_h200.txt):
# cuInit returns CUDA_ERROR_OPERATING_SYSTEM inside a PID namespace unless the child mounts a /proc of
# its own (the warden does: warden._own_proc), and under Landlock unless /proc is writable (the
# driver writes there; the child, PID 1 of its own namespace and an unprivileged user, reaches only
# its own processes' files). A child that needs the driver gets /proc among its writable folders.
DRIVER_WRITES = ("/proc",)
# compute-sanitizer runs the child under its own launcher and injection library: those runs keep the
# limits and the subreaper only (what they were measured to work with on the H200)
SANITIZER_CONFINEMENT = "compute-sanitizer runs: limits and the subreaper only"


def confinement_off() -> str | None:
    """Why namespaces, Landlock and the user drop are not used here, or None when they are."""
    if os.environ.get(SANDBOX_ENV, "").lower() == "off":
        return f"{SANDBOX_ENV}=off"
    return None


@dataclass
class ChildRun:
    outcome: str  # "ok", "timeout", "crash", "memory", "import_error", "exited", "flooding", "forged", "grader_error"
    detail: str = ""
    report: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)   # what was sent (with inputs)
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    speed_job: dict[str, Any] | None = None  # what the speed run was given (the parent checks its output)
    imported: bool = False       # the submission loaded: the runs it finished can be graded
    files: dict[str, str] = field(default_factory=dict)   # files collected from the scratch folder
    status: dict[str, Any] = field(default_factory=dict)  # the warden's own observation
    stopped: str = ""            # what the child was doing when it was stopped (timeouts, crashes)


# -- protections ------------------------------------------------------------------------------

def _world_usable(paths: Sequence[str]) -> tuple[bool, str]:
    """Can an unprivileged user read these files and traverse to them?"""
    import stat
    for p in paths:
        path = Path(p).resolve()
        for d in [*reversed(path.parents), path]:
            try:
                mode = d.stat().st_mode
            except OSError as e:
                return False, f"{d}: {e.strerror}"
            need = (stat.S_IXOTH | stat.S_IROTH) if d.is_dir() and d == path else \
                stat.S_IXOTH if d.is_dir() else stat.S_IROTH
            if mode & need != need:
                return False, f"{d} is not readable by other users"
    return True, ""


@functools.lru_cache(maxsize=1)
def _drop_target() -> tuple[tuple[int, int] | None, str]:
    """The user the child runs as (when the grader is root), or None and why not."""
    if (why := confinement_off()) is not None:
        return None, why
    if os.geteuid() != 0:
        return None, f"the grader runs as uid {os.geteuid()}, not root: the child keeps that user"
    try:
        pw = pwd.getpwnam("nobody")
        target = (pw.pw_uid, pw.pw_gid)
    except KeyError:
        target = (65534, 65534)
    import numba
    here = Path(__file__).resolve().parents[1]
    ok, why = _world_usable([os.path.realpath(sys.executable), str(here / "__init__.py"),
                             str(Path(np.__file__)), str(Path(numba.__file__))])
    if not ok:
        return None, f"the child needs the interpreter and packages, but {why}"
    return target, ""


@functools.lru_cache(maxsize=1)
def _probe() -> dict[str, Any]:
    if confinement_off() is not None:
        return {}
    drop, _ = _drop_target()
    try:
        out = subprocess.run([sys.executable, "-I", "-S", str(WARDEN), "--probe",
                              f"{drop[0]}:{drop[1]}" if drop else "none"], capture_output=True, text=True, timeout=60)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def protections() -> list[tuple[str, bool, str]]:
    """What confines a submission on this machine: (name, in force, how / why not).

    Measured by starting a trivial child through the warden (cached for the process), so it
    says what is, not what should be. `kernels-lab doctor` shows it; every grade records it.
    """
    off = confinement_off()
    p = _probe()
    st, seen = p.get("status") or {}, p.get("seen") or {}
    rows: list[tuple[str, bool, str]] = []
    if off:
        why = off
        rows.append(("process containment", True, f"the warden (a child subreaper) kills every leftover process "
                                                  f"after each run; no PID namespace ({why})"))
        rows += [("filesystem writes", False, why), ("signals and ptrace", False, why),
                 ("unprivileged user", False, why), ("network", False, why)]
    else:
        if st.get("pid_namespace"):
            rows.append(("process containment", True, "PID namespace: the child is its PID 1, and every process it "
                                                      "started dies with it; the warden reaps the rest"
                                                      + ("; its own /proc" if seen.get("own_proc") else "")))
        elif st.get("subreaper"):
            rows.append(("process containment", True, "the warden is a child subreaper: every process the child "
                                                      "leaves behind (double fork, new session) is killed and reaped "
                                                      "before results are written (no PID namespace here)"))
        else:
            rows.append(("process containment", False, p.get("error") or "neither a PID namespace nor a subreaper"))
        abi = p.get("landlock_abi", 0)
        wrote = seen.get("outside_write")
        if abi and wrote is False:
            rows.append(("filesystem writes", True, f"Landlock ABI {abi}: the child writes only beneath its own "
                                                    f"scratch folder (and opens character devices in /dev"
                                                    + (", and /proc, where the CUDA driver writes; "
                                                       + SANITIZER_CONFINEMENT if ON_GPU else "") + ")"))
        else:
            why = p.get("landlock_why") or ("a write outside the scratch folder succeeded" if wrote else
                                            p.get("error", "not measured"))
            rows.append(("filesystem writes", False, f"Landlock unavailable ({why}): the child can write wherever "
                                                     f"its user can"))
        drop, drop_why = _drop_target()
        scoped = abi >= 6 and seen.get("signal_out") is False
        how = [w for w, on in (("Landlock signal scope", abi >= 6), ("PID namespace", st.get("pid_namespace")),
                               ("unprivileged user", drop is not None)) if on]
        rows.append(("signals and ptrace", bool(how) or scoped,
                     ("the child cannot signal or trace the warden or the grader: " + ", ".join(how)) if how else
                     "the child runs as the grader's user with no signal scope: it could kill its warden"))
        rows.append(("unprivileged user", drop is not None,
                     f"the child runs as uid {drop[0]}" if drop else drop_why))
        if st.get("net_namespace"):
            rows.append(("network", True, "own network namespace: nothing reachable (sanitizer runs keep the "
                                          "grader's network, Landlock still denying TCP where it can)"))
        elif abi >= 4:
            rows.append(("network", True, "Landlock denies TCP bind and connect"))
        else:
            rows.append(("network", False, "no network namespace and no Landlock TCP rules"))
    rows.append(("resource limits", True, f"wall clock per run (default {RUN_TIMEOUT_S:g} s) under a total cap, "
                                          f"resident memory of the process tree, address space on the simulator, "
                                          f"files up to {FILE_LIMIT >> 20} MiB, no core dumps, no stdin"))
    rows.append(("results", True, "written by the grader, atomically (temp file + rename), after the child's whole "
                                  "process tree is dead"))
    return rows


# -- running one confined child ------------------------------------------------------------------

@dataclass
class Confined:
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


def scratch_folder(tmp: Path) -> Path:
    """The child's working directory: the only place it may write (made writable for its user)."""
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    drop, _ = _drop_target()
    if drop:
        os.chmod(tmp, 0o711)
        os.chown(scratch, *drop)
    return scratch


def hand_over(path: Path) -> None:
    """A file the grader put in the scratch folder, made the child's (it deletes it when read)."""
    drop, _ = _drop_target()
    if drop:
        os.chown(path, *drop)
    os.chmod(path, 0o600)


def confine(argv: Sequence[str], tmp: Path, *, env: dict[str, str] | None = None, run_s: float = RUN_TIMEOUT_S,
            phase_limits: dict[str, float] | None = None, total_s: float | None = None,
            memory_bytes: int = 4 << 30, address_limit: bool = ON_SIMULATOR, progress: bool = True,
            network: bool = True, extra_writable: Sequence[str] = (), full: bool = True) -> Confined:
    """Run argv through the warden, in tmp/scratch (see scratch_folder), and wait for it and its
    whole process tree. run_s: the default clock of a phase (progress.json steps restart it);
    full=False: limits and the subreaper only (SANITIZER_CONFINEMENT)."""
    scratch = scratch_folder(tmp)
    off = confinement_off() is not None or not full
    drop = _drop_target()[0] if full else None
    env = dict(os.environ if env is None else env)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(scratch),
                "TMPDIR": str(scratch), "NUMBA_CACHE_DIR": str(scratch / ".numba"),
                "CUDA_CACHE_PATH": str(scratch / ".nv"), "MPLCONFIGDIR": str(scratch / ".mpl")})
    limits = {"RLIMIT_FSIZE": FILE_LIMIT, "RLIMIT_CORE": 0}
    if address_limit:  # a CUDA context reserves far more address space than it uses: there, RSS is watched
        limits["RLIMIT_AS"] = int(memory_bytes)
    if drop:
        limits["RLIMIT_NPROC"] = NPROC_LIMIT
    phases = {"start": STARTUP_S + run_s, "import": run_s, "run": run_s, "speed": max(run_s, 60.0),
              "done": EXIT_GRACE_S, **(phase_limits or {})}
    total = total_s if total_s is not None else STARTUP_S + 10 * run_s
    spec = {"argv": list(argv), "cwd": str(scratch), "env": env, "stdout": str(tmp / "stdout.txt"),
            "stderr": str(tmp / "stderr.txt"), "status": str(tmp / "warden.json"),
            "writable": [str(scratch), *extra_writable], "drop_to": list(drop) if drop else None,
            "rlimits": limits, "namespaces": not off, "landlock": not off, "network_namespace": network,
            "deny_tcp": network, "phase_limits": phases, "default_limit": run_s, "total_limit": total,
            "memory_bytes": int(memory_bytes), "progress": str(scratch / "progress.json") if progress else None}
    spec_path = tmp / "warden-spec.json"
    spec_path.write_text(json.dumps(spec))
    os.chmod(spec_path, 0o600)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(WARDEN), str(spec_path)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, warden_err = proc.communicate(timeout=total + 60)
    except subprocess.TimeoutExpired:  # the warden itself stuck: kill it (its child dies with it)
        os.killpg(proc.pid, signal.SIGKILL)
        _, warden_err = proc.communicate()
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


# -- the cases -----------------------------------------------------------------------------------

def hidden_seed() -> int:
    """A seed for the hidden cases' inputs, drawn at grading time (in the parent): their values cannot be
    learnt from the repository or from an earlier grade, as GPU MODE's evaluator does."""
    return secrets.randbits(63)


def _case_rng(case: Case, offset: int, fresh: int) -> np.random.Generator:
    key = case.seed * 7919 + offset
    return np.random.default_rng([key, fresh] if case.hidden else key)


def build_cases(exercise: Exercise, public_only: bool = False, perturbed: bool | None = None,
                probes: bool = True, leave_out: frozenset[tuple[int, int]] = frozenset(),
                hidden: int | None = None) -> list[dict[str, Any]]:
    """Every (case, launch configuration, schedule) the child runs, with fresh inputs; but the runs
    whose run_key is in leave_out (with their schedules).

    Inputs: a public case's come from its own seed (a student can reproduce them); a hidden case's
    (and its probe's) from that seed and `hidden` (default: a fresh hidden_seed(); pass one to give
    several children of one grade the same hidden inputs). make_inputs puts the workload's hard
    inputs (core.HardInput) in every size that can hold them.

    role: "plain" (graded), "perturbed" (the same inputs under a perturbed thread schedule:
    races show as results that differ between schedules; simulator only), "probe" (the
    workload's symmetric inputs) and "twin" (asymmetric inputs at the probe's size and
    configuration: "symmetric inputs would have hidden this" is said only when the probe
    passes and its twin fails). Probes, twins and perturbed runs are never graded themselves.
    """
    if exercise.kind == "data":  # the judge says what each case calls the entry with: no inputs, no probes
        judge = load_judge(exercise)
        return [{"id": k, "case": case, "config_index": 0, "inputs": {}, "output_specs": {}, "perturb_seed": None,
                 "config": None, "role": "plain", "of": None, "job": judge.job(case)}
                for k, case in enumerate(c for i, c in enumerate(exercise.cases)
                                         if not (public_only and c.hidden) and (i, 0) not in leave_out)]
    cases = []
    workload = exercise.spec
    configs = exercise.configs or (None,)
    seeds = exercise.race_seeds if (ON_SIMULATOR if perturbed is None else perturbed) else ()
    fresh = hidden_seed() if hidden is None else hidden
    for i, case in enumerate(exercise.cases):
        if public_only and (case.hidden or case.probe):
            continue
        if case.probe and (not probes or workload.symmetric_inputs is None):
            continue
        for c, config in enumerate(configs):
            if (i, c) in leave_out:
                continue
            rng = _case_rng(case, c, fresh)
            inputs = (workload.symmetric_inputs if case.probe else workload.make_inputs)(case.size, rng)
            entry = {"id": len(cases), "case": case, "config_index": c, "inputs": inputs,
                     "output_specs": workload.output_specs(case.size), "perturb_seed": None,
                     "config": config(case.size) if config else None, "role": "probe" if case.probe else "plain",
                     "of": None}
            cases.append(entry)
            if case.probe:
                twin_rng = _case_rng(case, c + 104729, fresh)
                cases.append({**entry, "id": len(cases), "role": "twin", "of": entry["id"],
                              "inputs": workload.make_inputs(case.size, twin_rng)})
                continue
            for seed in seeds if not case.hidden else ():
                cases.append({**entry, "id": len(cases), "perturb_seed": seed, "role": "perturbed",
                              "of": entry["id"]})
    return cases


def run_key(exercise: Exercise, c: dict[str, Any]) -> tuple[int, int]:
    """A run's identity across children (ids are positions in one child's list, which differ between
    the grade's run and a sanitizer's): the index of its case in the exercise, its configuration
    (what build_cases's leave_out names)."""
    return next(k for k, case in enumerate(exercise.cases) if case is c["case"]), c["config_index"]


def describe_case(c: dict[str, Any]) -> str:
    """'n=257, config (2, 128)' (+ the schedule seed): how a message names one run."""
    if c.get("job"):
        return str(c["job"].get("about") or c["case"].size)
    text = f"{c['case'].size}"
    if c.get("config") is not None:
        text += f", config {tuple(c['config'])}"
    if c.get("perturb_seed") is not None:
        text += f", perturbed schedule seed {c['perturb_seed']}"
    if c.get("role") == "probe":
        text += ", symmetric inputs"
    return text


def load_judge(exercise: Exercise) -> Any:
    """The judge of a "data" exercise ("module:attribute"): job(case), run(value, job) in the
    child, score(case, job, got) -> [(check, ok or None, message)] in the parent."""
    from .speed import load_reference
    return load_reference(exercise.judge)


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


# -- the child's report: strict JSON, never pickle -----------------------------------------------

_DTYPES = {"<f4", "<f8", "<i4", "<i8", "<u4", "<u8", "|u1", "|i1", "|b1", "<f2", "<i2", "<u2"}


class ReportError(ValueError):
    """The child's report is not what the grader's child writes."""


def encode(obj: Any) -> Any:
    """JSON-ready: arrays as {"__nd__": [dtype, shape, base64]}, tuples as lists."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {"__nd__": [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]}
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def decode(obj: Any, depth: int = 0) -> Any:
    if depth > 32:
        raise ReportError("nested too deeply")
    if isinstance(obj, dict):
        if set(obj) == {"__nd__"}:
            try:
                dtype, shape, data = obj["__nd__"]
                if dtype not in _DTYPES or not all(isinstance(s, int) and s >= 0 for s in shape):
                    raise ReportError(f"array of dtype {dtype!r}")
                return np.frombuffer(base64.b64decode(data), dtype=np.dtype(dtype)).reshape(shape).copy()
            except (TypeError, ValueError) as e:
                raise ReportError(f"bad array: {e}") from None
        return {k: decode(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v, depth + 1) for v in obj]
    return obj


def read_report(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    with open(path, "rb") as f:
        raw = f.read(FILE_LIMIT + 1)
    try:
        doc = decode(json.loads(raw))
    except (ValueError, RecursionError) as e:
        raise ReportError(f"not the grader's report format ({type(e).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cases", []), list):
        raise ReportError("not the grader's report format")
    return doc


# -- one submission's runs -----------------------------------------------------------------------

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
    sim_child = backend == "sim" or (backend is None and ON_SIMULATOR)
    if cases is None:
        cases = build_cases(exercise, public_only, perturbed=sim_child, hidden=hidden)
    speed_job = _speed_job(exercise) if speed and ON_GPU and not sim_child and exercise.speed \
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
                         "speed": speed_job, "keep_arrays": bool(prefix)}, f)
        hand_over(job)
        argv = [*(a.replace("{scratch}", str(scratch)) for a in prefix),
                sys.executable, "-m", "kernels_lab.grading.child", str(job), str(report_path),
                str(scratch / "progress.json")]
        total = STARTUP_S * slowdown + run_s * (len(cases) + 3) + (max(run_s, 60.0) if speed_job else 0)
        got = confine(argv, tmp, env=env, run_s=run_s, total_s=total, memory_bytes=memory_bytes,
                      address_limit=sim_child and not prefix, network=not prefix, full=not prefix,
                      extra_writable=("/dev/shm",) if prefix else DRIVER_WRITES if ON_GPU and not sim_child else (),
                      phase_limits={"start": STARTUP_S * slowdown + run_s})
        run = ChildRun("ok", cases=cases, stdout=got.stdout, stderr=got.stderr, seconds=got.seconds,
                       speed_job=speed_job, status=got.status)
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
        return _set(run, "timeout", f"did not finish within {limit_text} {where} (an infinite loop or a spin that "
                                    f"never ends?); {done} of {len(run.cases)} runs completed")
    if got.memory_tripped or "MemoryError" in run.stderr or "Cannot allocate memory" in run.stderr \
            or "std::bad_alloc" in run.stderr:
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


if __name__ == "__main__":  # python -m kernels_lab.grading.sandbox: the protections as a results file's header
    print("# sandbox:")
    for name, on, how in protections():
        print(f"#   [{'on ' if on else 'OFF'}] {name}: {how}")
