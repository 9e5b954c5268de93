"""Which of the grader's protections let the CUDA driver start (cuInit), one forked child each.

The first probe (figures/data/sandbox_probe_h200.txt) found cuInit failing inside a PID namespace and
under Landlock. This one narrows down why: no_new_privs alone, Landlock with everything writable, Landlock
without its signal scope, Landlock with /dev/shm and /tmp writable, and a PID namespace with its own /proc.

    python benchmarks/sandbox_probe.py > figures/data/sandbox_probe2_h200.txt      (as root, on the GPU)
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels_lab" / "grading"))
import warden  # noqa: E402  (a script of the package, imported by path as the grader runs it)

CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 0x4000, 1 << 18


def cu_init() -> str:
    from cuda.bindings import driver
    return str(driver.cuInit(0)[0])


def forked(body) -> str:
    """body() in a forked child; what it returns (or the exception it raised), as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            text = body()
        except BaseException as e:  # noqa: BLE001
            text = f"failed: {type(e).__name__}: {e}"
        os.write(w, text.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return out


def in_child(setup) -> str:
    """cuInit in a forked child after setup() (which says how it set up, or None)."""
    def body() -> str:
        how = setup() or ""
        return f"{cu_init()} {how}"
    return forked(body)


def nnp():
    warden._libc.prctl(warden.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def landlock(writable, scope=True):
    def setup():
        saved = warden.SCOPE_SIGNAL
        if not scope:
            warden.SCOPE_SIGNAL = 0
        try:
            return str(warden.apply_landlock(writable, deny_tcp=False))
        finally:
            warden.SCOPE_SIGNAL = saved
    return setup


def pid_ns_with_proc() -> str:
    """unshare PID + mount namespaces, then in a grandchild (PID 1) mount a fresh /proc."""
    libc = warden._libc
    if libc.unshare(ctypes.c_int(warden.CLONE_NEWPID | CLONE_NEWNS)) != 0:
        return f"unshare: errno {ctypes.get_errno()}"

    def inner() -> str:
        libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        rc = libc.mount(b"proc", b"/proc", b"proc", 0, None)
        return f"{cu_init()} (pid {os.getpid()}, proc mount rc {rc})"
    return forked(inner)


def as_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def pid_net_ns_in_warden() -> str:
    """The warden's own way (make_namespaces, then _own_proc in the child), PID + network."""
    ok, net, how = warden.make_namespaces(True)
    return forked(lambda: f"{warden._own_proc()!r} {cu_init()} (pid {os.getpid()}; {ok}, net {net}, {how})")


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="kl-probe-")
    print(f"# {sys.argv[0]}: uid {os.geteuid()}, Landlock ABI {warden.landlock_abi()[0]}")
    print(f"{'pid+net (warden)':<20} cuInit -> {forked(pid_net_ns_in_warden)}", flush=True)
    print(f"{'user nobody':<20} cuInit -> {in_child(as_nobody)}", flush=True)
    for d in sorted(os.listdir("/")):  # which folder must be writable for cuInit under Landlock
        if os.path.isdir("/" + d) and not os.path.islink("/" + d):
            print(f"{'landlock +/' + d:<20} cuInit -> {in_child(landlock([scratch, '/' + d]))[:40]}", flush=True)
    for label, setup in (("nothing", lambda: None),
                         ("no_new_privs", nnp),
                         ("landlock, / writable", landlock(["/"])),
                         ("landlock, no scope", landlock([scratch], scope=False)),
                         ("landlock +shm +tmp", landlock([scratch, "/dev/shm", "/tmp"])),
                         ("landlock, scratch", landlock([scratch]))):
        print(f"{label:<20} cuInit -> {in_child(setup)}", flush=True)
    print(f"{'pid ns + own /proc':<20} cuInit -> {forked(pid_ns_with_proc)}", flush=True)


if __name__ == "__main__":
    main()
