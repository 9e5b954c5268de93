"""The warden: the one process between the grader and a submission's child. Standard library only.

    python -I -S warden.py SPEC.json      run one child under every protection this kernel allows
    python -I -S warden.py --probe [UID:GID|none]   which protections would be in force (JSON)

It runs as a script, never imported by the child, so nothing of kernels_lab (nor numba) is
loaded in it. What it does for one child, in order:

  1. becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): any process the child starts and
     leaves behind (a double fork, a new session) is reparented to the warden, not to init;
  2. when it may (root, or an unprivileged user namespace), unshares a PID namespace (the child is
     its PID 1: when it exits the kernel kills every process it started, and it mounts a /proc of
     its own, in a mount namespace of its own) and a network namespace (no network);
  3. forks the child, which: dies if the warden dies (PR_SET_PDEATHSIG), drops to an unprivileged
     user when the grader runs as root, takes its resource limits (file size, no core dumps,
     address space on the simulator, process count), sets no_new_privs, and enters a Landlock
     domain where it can write only beneath its scratch folder (and open character devices such
     as /dev/null and the GPU's for writing), cannot signal or ptrace processes outside the
     domain (ABI >= 6), and, where Landlock handles TCP (ABI >= 4) and no network namespace was
     made, cannot bind or connect TCP sockets; then execs the command;
  4. waits, watching the child's wall clock per phase (the child writes progress.json into its
     scratch folder: each new step restarts that phase's clock, under a total cap) and the
     resident memory of the child's whole process tree;
  5. when the child exits or a limit trips: SIGKILLs the child and then every remaining
     descendant (they are its children by then, as a subreaper), reaps them all, and only then
     writes its status JSON (outside the scratch folder) and exits.

The status is the warden's own observation (exit code or signal, which limit tripped, how many
leftover processes it killed, the last progress it read); the grader writes results only after
the warden has exited, so nothing of the submission is alive by then.
"""

import ctypes
import json
import os
import resource
import signal
import stat
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on x86-64 and arm64
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_WRITE_FILE, FS_REMOVE_DIR, FS_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
FS_MAKE = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)  # char dir reg sock fifo block sym
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_SIGNAL = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _err(what):
    e = ctypes.get_errno()
    return f"{what}: {os.strerror(e) if e else 'failed'}"


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 with why not."""
    v = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                      ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if v < 0:
        return 0, _err("landlock_create_ruleset")
    return int(v), ""


def _fs_rights(abi):
    rights = FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def apply_landlock(writable, deny_tcp):
    """Restrict this process (and what it execs) to writing beneath `writable` folders and to
    opening character devices in /dev for writing. Returns (in force, description)."""
    abi, why = landlock_abi()
    if abi < 1:
        return False, why
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0,
                        SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    fd = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return False, _err("landlock_create_ruleset")
    try:
        def allow(path, rights):
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                return
            try:
                rule = _PathBeneath(rights, pfd)
                if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                                 ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), _err(f"landlock_add_rule {path}"))
            finally:
                os.close(pfd)
        for w in writable:
            allow(w, handled)
        file_rights = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
        for dirpath in ("/dev", "/dev/nvidia-caps"):
            try:
                entries = list(os.scandir(dirpath))
            except OSError:
                continue
            for e in entries:
                try:
                    if stat.S_ISCHR(os.stat(e.path).st_mode):
                        allow(e.path, file_rights)
                except OSError:
                    pass
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False, _err("no_new_privs")
        if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            return False, _err("landlock_restrict_self")
    except OSError as e:
        return False, str(e)
    finally:
        os.close(fd)
    extra = []
    if abi >= 6:
        extra.append("no signals or ptrace outside it")
    if deny_tcp and abi >= 4:
        extra.append("no TCP")
    return True, f"Landlock ABI {abi}: writes only beneath the run's scratch folder" + \
        (f" ({', '.join(extra)})" if extra else "")


def _unshare(flags):
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        return _err("unshare")
    return ""


def make_namespaces(want_net):
    """PID (and network) namespaces for the next fork. Returns (pid ns, net ns, how)."""
    net = CLONE_NEWNET if want_net else 0
    if os.geteuid() == 0:
        why = _unshare(CLONE_NEWPID | net)
        if not why:
            return True, bool(net), "as root"
        if net and not _unshare(CLONE_NEWPID):
            return True, False, "as root (no network namespace: " + why + ")"
        return False, False, why
    uid, gid = os.geteuid(), os.getegid()
    why = _unshare(CLONE_NEWUSER | CLONE_NEWPID | net)
    if why and net:
        net = 0
        why = _unshare(CLONE_NEWUSER | CLONE_NEWPID)
    if why:
        return False, False, why + " (no privileges, and no unprivileged user namespaces)"
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
    except OSError:
        pass  # the map only matters for file ownership as the child sees it
    return True, bool(net), "in an unprivileged user namespace"


CLONE_NEWNS, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x20000, 2, 4, 8, 0x4000, 1 << 18


def _own_proc():
    """In the child, PID 1 of its own PID namespace: a mount namespace of its own with a fresh /proc
    that shows only its namespace's processes. Without it /proc is the grader's, and a lookup of
    /proc/<own pid> finds another process: the CUDA driver then fails to initialise
    (CUDA_ERROR_OPERATING_SYSTEM, measured on the H200). Returns "" or why not."""
    if _libc.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
        return _err("unshare(CLONE_NEWNS)")
    if _libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return _err("mount --make-rprivate /")
    if _libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None) != 0:
        return _err("mount proc")
    return ""


def _children(pid):
    """Direct children of pid (from /proc/PID/task/*/children; else a scan of /proc)."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(k) for k in f.read().split()]
        return kids
    except OSError:
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    kids.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _tree(pid, limit=4096):
    seen, todo = [], [pid]
    while todo and len(seen) < limit:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return 0


def _kill_descendants():
    """SIGKILL and reap every child of this (subreaper) process until none is left."""
    killed = set()
    for _ in range(10000):
        kids = _children(os.getpid())
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
                killed.add(k)
            except ProcessLookupError:
                pass
        reaped = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return len(killed)
            if pid == 0:
                break
            reaped = True
        if not kids and not reaped:
            time.sleep(0.005)
            if not _children(os.getpid()):
                try:
                    os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pass
                return len(killed)
    return len(killed)


def _read_progress(path, last):
    try:
        st = os.stat(path)
    except OSError:
        return last, None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    if last is not None and last[0] == key:
        return last, None
    try:
        with open(path) as f:
            doc = json.loads(f.read(4096))
        if not isinstance(doc, dict):
            return (key, None), None
    except (OSError, ValueError):
        return (key, None), None
    return (key, doc), doc


def _drop_user(uid, gid):
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _child(spec, fds_out, fds_err):
    """In the forked child: limits, user, Landlock, exec. Never returns."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds_out, 1)
        os.dup2(fds_err, 2)
        if spec.get("own_proc") and (why := _own_proc()):
            os.write(2, f"warden: the child keeps the grader's /proc: {why}\n".encode())
        for lim, value in spec.get("rlimits", {}).items():
            resource.setrlimit(getattr(resource, lim), (value, value))
        if spec.get("drop_to") and os.geteuid() == 0:
            _drop_user(*spec["drop_to"])
        if spec.get("landlock", True):
            ok, why = apply_landlock(spec["writable"], spec.get("deny_tcp", False))
            if not ok and spec.get("require_landlock"):
                os.write(2, f"warden: Landlock required but not in force: {why}\n".encode())
                os._exit(126)
        os.chdir(spec["cwd"])
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as e:  # noqa: BLE001  (the child must never return into the warden)
        try:
            os.write(2, f"warden: could not start the child: {type(e).__name__}: {e}\n".encode())
        finally:
            os._exit(127)


def run(spec):
    status = {"started": False, "exit_code": None, "signal": None, "timed_out": False, "memory_tripped": False,
              "leftover_killed": 0, "progress": None, "phase_limit": None, "elapsed": 0.0,
              "pid_namespace": False, "net_namespace": False, "subreaper": False, "warden_error": None}
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
        status["subreaper"] = True
    if spec.get("namespaces", True):
        pidns, netns, _ = make_namespaces(spec.get("network_namespace", True))
        status["pid_namespace"], status["net_namespace"] = pidns, netns
        spec["own_proc"] = pidns
    spec["deny_tcp"] = spec.get("deny_tcp", True) and not status["net_namespace"]
    out = os.open(spec["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    err = os.open(spec["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    stop = [False]
    # before the fork: a stop (SIGTERM) that comes while the child starts must kill it below, never end the warden
    # at once and leave the child running, unwatched
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(spec, out, err)
    os.close(out)
    os.close(err)
    status["started"] = True

    limits = spec.get("phase_limits", {})
    default_limit = float(spec.get("default_limit", 60))
    total = float(spec.get("total_limit", 600))
    memory = int(spec.get("memory_bytes", 0))
    progress_path = spec.get("progress")
    phase_start, limit = t0, float(limits.get("start", default_limit))
    last, last_mem, last_tree, tree = None, 0.0, 0.0, [pid]
    code = None
    while True:
        while True:  # the child, or leftovers that already reached this subreaper (no zombies)
            try:
                got, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                got, wstatus = pid, 0
            if got == 0 or got == pid:
                break
        if got == pid:
            code = wstatus
            break
        now = time.monotonic()
        if progress_path:
            last, doc = _read_progress(progress_path, last)
            if doc is not None:
                status["progress"] = doc
                phase_start = now
                limit = float(limits.get(str(doc.get("phase")), default_limit))
        if stop[0] or now - phase_start > limit or now - t0 > total:
            status["timed_out"] = not stop[0]
            status["phase_limit"] = limit if now - phase_start > limit else total
            break
        if memory and now - last_mem > 0.1:  # the tree is re-listed every 0.5 s (a simulated block has
            last_mem = now                    # hundreds of threads, each with a children file to read)
            if now - last_tree > 0.5:
                last_tree, tree = now, _tree(pid)
            if sum(_rss(p) for p in tree) > memory:
                status["memory_tripped"] = True
                break
        time.sleep(0.01)
    if code is None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            _, code = os.waitpid(pid, 0)
        except ChildProcessError:
            code = 0
    status["elapsed"] = time.monotonic() - t0
    if progress_path:  # the last word of the child, even if it came just before the end
        last, doc = _read_progress(progress_path, last)
        if doc is not None:
            status["progress"] = doc
    if os.WIFSIGNALED(code):
        status["signal"] = os.WTERMSIG(code)
    elif os.WIFEXITED(code):
        status["exit_code"] = os.WEXITSTATUS(code)
    status["leftover_killed"] = _kill_descendants()
    return status


def probe(drop=None):
    """Start a trivial child under every protection (running as `drop`, a [uid, gid] or None) and
    report what was in force."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="kl-probe-") as tmp:
        scratch = os.path.join(tmp, "scratch")
        os.mkdir(scratch)
        report = os.path.join(tmp, "probe.json")
        if drop:
            os.chmod(tmp, 0o711)
            os.chown(scratch, *drop)
        code = ("import json, os, ctypes\n"
                "r = {'uid': os.geteuid(), 'pid': os.getpid()}\n"
                "try:\n    open(%r, 'w').write('x'); r['outside_write'] = True\n"
                "except OSError:\n    r['outside_write'] = False\n"
                "try:\n    os.kill(os.getppid() or 1, 0); r['signal_out'] = True\n"
                "except OSError:\n    r['signal_out'] = False\n"
                "r['own_proc'] = os.readlink('/proc/self') == str(os.getpid())\n"
                "print(json.dumps(r))\n") % os.path.join(tmp, "outside.txt")
        spec = {"argv": [sys.executable, "-I", "-S", "-c", code], "cwd": scratch, "env": {"PATH": "/usr/bin:/bin"},
                "stdout": os.path.join(tmp, "out.txt"), "stderr": os.path.join(tmp, "err.txt"),
                "writable": [scratch], "drop_to": drop, "default_limit": 20, "total_limit": 20}
        status = run(spec)
        try:
            with open(spec["stdout"]) as f:
                seen = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            seen = {}
        abi, why = landlock_abi()
        result = {"status": status, "seen": seen, "landlock_abi": abi, "landlock_why": why,
                  "euid": os.geteuid(), "wrote": report}
    return result


def main(argv):
    if argv[1:2] == ["--probe"]:
        drop = [int(v) for v in argv[2].split(":")] if len(argv) > 2 and argv[2] != "none" else None
        print(json.dumps(probe(drop)))
        return 0
    with open(argv[1]) as f:
        spec = json.load(f)
    try:
        status = run(spec)
    except BaseException as e:  # noqa: BLE001  (the grader must learn why, in the status file)
        status = {"warden_error": f"{type(e).__name__}: {e}", "started": False}
        try:
            _kill_descendants()
        except BaseException:  # noqa: BLE001
            pass
    tmp = spec["status"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(status, f)
    os.replace(tmp, spec["status"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
