"""What a submission's child may touch, and which of those protections are in force on this machine.

Every child (the graded runs, the compile gate, the sanitizer runs, the simulator's traffic trace
on a GPU machine) starts through the warden (warden.py, a standard-library script; lifecycle.py
starts it), which puts it under every protection this kernel allows. `protections()` says which
are in force here:

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

    python -m kernels_lab.grading.confine    the protections, as a results file's header
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..backend import BACKEND

FILE_LIMIT = 64 << 20         # bytes any file of the child may reach (flooding stops here)
NPROC_LIMIT = 4096            # processes (threads count) of the unprivileged user, all grades together
RUN_TIMEOUT_S = 20.0          # default: seconds one run (one case, configuration, schedule) may take
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
                                                       + SANITIZER_CONFINEMENT if BACKEND.on_device else "") + ")"))
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


def confinement(scratch: Path, env: dict[str, str] | None, *, memory_bytes: int, address_limit: bool,
                network: bool = True, extra_writable: Sequence[str] = (), full: bool = True) -> dict[str, Any]:
    """The part of the warden's spec that says what the child may touch: its folder and environment,
    its user, its rlimits, namespaces, Landlock and the network. full=False: limits only
    (SANITIZER_CONFINEMENT); address_limit: cap the address space (the simulator's children)."""
    off = confinement_off() is not None or not full
    drop = _drop_target()[0] if full else None
    env = dict(os.environ if env is None else env)
    # everything the child's tools write goes to the one folder it may write
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(scratch),
                "TMPDIR": str(scratch), "NUMBA_CACHE_DIR": str(scratch / ".numba"),
                "CUDA_CACHE_PATH": str(scratch / ".nv"), "MPLCONFIGDIR": str(scratch / ".mpl")})
    limits = {"RLIMIT_FSIZE": FILE_LIMIT, "RLIMIT_CORE": 0}
    if address_limit:  # a CUDA context reserves far more address space than it uses: there, RSS is watched
        limits["RLIMIT_AS"] = int(memory_bytes)
    if drop:
        limits["RLIMIT_NPROC"] = NPROC_LIMIT
    return {"cwd": str(scratch), "env": env, "writable": [str(scratch), *extra_writable],
            "drop_to": list(drop) if drop else None, "rlimits": limits, "namespaces": not off, "landlock": not off,
            "network_namespace": network, "deny_tcp": network}


if __name__ == "__main__":  # python -m kernels_lab.grading.confine: the protections as a results file's header
    print("# sandbox:")
    for name, on, how in protections():
        print(f"#   [{'on ' if on else 'OFF'}] {name}: {how}")
