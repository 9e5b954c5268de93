"""Every kernel of every variant of every workload compiles for the oldest and the newest GPUs students have:
sm_75 (T4) and sm_90 (H100/H200), with numba's real compiler and no GPU (sm_80, the A100, between them: what
sm_75 has, it has; nothing the kernels use is new in it and absent from sm_90).

The kernels and their signatures come from launches: each variant is launched here on the simulator
(at the smallest and the largest of the workload's test sizes, so that kernels specialised on the size,
4-byte and 16-byte accesses, are seen in each form) in a dry run (launch_hook.dry_run: the launch hook
records every kernel's Python function and the numba types of the arguments it was given, and no thread
is simulated). A child process on the PTX back-end (KERNELS_LAB_BACKEND=ptx) rebuilds each function from
its code, module and closure (device functions in the closure are rebuilt as device functions, one
dispatcher each) and compiles it with kernels_lab.capabilities.compile_ptx_each: numba types and lowers it
once, at the lowest compute capability, and NVVM makes the PTX for each (lowering is nearly all of the
time; a device function is lowered once per process anyway, so the sm_90 kernels always linked the one
lowered for sm_75: what sm_75 has, the later ones have too).

Needs NVVM and NVRTC (pip install 'kernels-lab[cu13]'; CI installs them); skips saying so otherwise.
PDL's griddepcontrol kernels run only on sm_90 (the variants fall back to plain launches below it);
they are compiled for sm_90 in tests/test_pdl.py on a GPU.
"""

from __future__ import annotations

import json
import marshal
import os
import pickle
import select
import subprocess
import sys
import time
import types as pytypes
from pathlib import Path

import numpy as np
import pytest

from kernels_lab import all_workloads, capabilities
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.instrument.launch_hook import dry_run, listening
from kernels_lab.runtime import ON_SIMULATOR

ROOT = Path(__file__).resolve().parents[1]
LIBS = capabilities.ptx_libraries()
pytestmark = [
    pytest.mark.skipif(not ON_SIMULATOR, reason="the kernels are collected by running them on the simulator"),
    pytest.mark.skipif(not LIBS.available, reason=f"no PTX compiler here: {LIBS.detail}"),
]

CHILD = r"""
import json, marshal, os, pickle, sys, types
from importlib import import_module
from kernels_lab.capabilities import compile_ptx_each
from kernels_lab.runtime import cuda

device_functions = {}

def function(d):
    cells = tuple(types.CellType(rebuild(c)) for c in d["closure"])
    fn = types.FunctionType(marshal.loads(d["code"]), vars(import_module(d["module"])), d["name"],
                            pickle.loads(d["defaults"]), cells or None)
    fn.__qualname__ = d["qualname"]
    return fn

def rebuild(d):
    if d["kind"] == "value":
        return pickle.loads(d["pickle"])
    if not d.get("device"):
        return function(d)
    key = pickle.dumps(d)  # one dispatcher per device function, as for module-level ones
    if key not in device_functions:
        device_functions[key] = cuda.jit(device=True, fastmath=d["fastmath"])(function(d))
    return device_functions[key]

def compile_all(path, ccs):
    jobs = pickle.load(open(path, "rb"))
    ccs = [tuple(int(x) for x in a.split(".")) for a in ccs]
    failed, compiled = [], 0
    for job in jobs:  # lowered once, at the lowest cc; NVVM makes each cc's PTX (compile_ptx_each)
        try:
            compile_ptx_each(rebuild(job["fn"]), job["sig"], ccs, fastmath=job["fn"]["fastmath"])
            compiled += 1
        except Exception as e:
            failed.append({"kernel": f"sm_{'/'.join(f'{a}{b}' for a, b in ccs)}: {job['where']}",
                           "error": f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1]}"})
    return {"compiled": compiled, "failed": failed}

answers, sys.stdout = sys.stdout, sys.stderr  # anything else printed goes to stderr
for request in sys.stdin:  # one line per workload: its jobs' file, then the ccs; one marked JSON line back
    path, *ccs = request.split()
    print("REPORT", json.dumps(compile_all(path, ccs)), file=answers, flush=True)
os._exit(0)  # stdin closed: done (skips a 2 s interpreter teardown of numba's objects)
"""


def _describe(fn, fastmath=False, device=False) -> dict:
    """What the child needs to rebuild `fn`: its code, module, defaults and closure, recursively."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    closure = []
    for cell in fn.__closure__ or ():
        v = cell.cell_contents
        if isinstance(v, FakeCUDAKernel):
            closure.append(_describe(v.fn, v._fastmath, device=True))
        elif isinstance(v, pytypes.FunctionType):
            closure.append(_describe(v))
        else:
            closure.append({"kind": "value", "pickle": pickle.dumps(v)})
    return {"kind": "function", "module": fn.__module__, "name": fn.__name__, "qualname": fn.__qualname__,
            "code": marshal.dumps(fn.__code__), "defaults": pickle.dumps(fn.__defaults__), "closure": closure,
            "fastmath": bool(fastmath), "device": device}


def _signature(args) -> tuple:
    from numba import typeof
    return tuple(typeof(a._ary if hasattr(a, "_ary") else a) for a in args)  # a simulator array wraps a NumPy one


def _sizes(w):
    """The smallest and the largest of the sizes the workload is tested at on the simulator."""
    tests = w.test_sizes()
    return list(dict.fromkeys([min(tests, key=lambda s: s.elements), max(tests, key=lambda s: s.elements)]))


def collect(w) -> list[dict]:
    """Every distinct (kernel, signature) the workload's variants launch, from real launches. (A kernel's
    own fastmath flag is not visible to the launch hook: kernels compile without it, which only makes
    the math exact; the device functions in their closures keep theirs.)"""
    jobs: dict = {}
    for size in _sizes(w):
        for v in w.variants.values():
            if v.why_not(size) is not None:
                continue

            def begin(rec, args, fn, size=size, v=v):
                desc, sig = _describe(fn), _signature(args)
                jobs.setdefault(pickle.dumps((desc, sig)),
                                {"fn": desc, "sig": sig, "where": f"{w.name}/{v.name} at {size}: {fn.__qualname__}"})

            launch = v.bind(to_device(w.make_inputs(size, np.random.default_rng(0))), poisoned(w.output_specs(size)))
            with listening(begin), dry_run():  # the kernels are compiled, not run: their types are enough
                launch()
    return list(jobs.values())


COMPILE_LIMIT_S = 900  # one workload's kernels, both ccs


class Compiler:
    """The compiling child on the PTX back-end, one per test process (each xdist worker starts its own): the
    workloads' tests hand it their jobs in turn, so numba and NVVM start once, not once a workload. A device
    function is compiled once per process (see the module's docstring): a later workload's sm_90 kernels
    link one lowered for sm_75, as its own sm_75 kernels do."""

    def __init__(self, tmp: Path):
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        env["KERNELS_LAB_BACKEND"] = "ptx"
        self.stderr = tmp / "stderr.txt"
        with open(self.stderr, "w") as err:
            self.child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=err, env=env, cwd=ROOT)
        self.unread = b""  # the child's output after its last line read

    def compile(self, jobs_file: Path, ccs: list[str]) -> dict:
        assert self.child.poll() is None, f"the compiling child ended earlier: {self.detail()}"
        self.child.stdin.write((" ".join([str(jobs_file), *ccs]) + "\n").encode())
        self.child.stdin.flush()
        deadline, out = time.monotonic() + COMPILE_LIMIT_S, self.child.stdout.fileno()
        while True:
            *lines, self.unread = self.unread.split(b"\n")
            report = next((x for x in lines if x.startswith(b"REPORT ")), None)
            if report is not None:
                return json.loads(report.removeprefix(b"REPORT "))
            if not select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]:
                self.child.kill()
                pytest.fail(f"the compiling child took more than {COMPILE_LIMIT_S} s: {self.detail()}")
            chunk = os.read(out, 1 << 16)
            assert chunk, f"the compiling child failed: {self.detail()}"  # it ended: end of file
            self.unread += chunk

    def detail(self) -> str:
        return self.stderr.read_text().strip()[-2000:]

    def close(self) -> None:
        self.child.stdin.close()
        try:
            self.child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


@pytest.fixture(scope="module")
def compiler(tmp_path_factory):
    c = Compiler(tmp_path_factory.mktemp("ptx_child"))
    yield c
    c.close()


@pytest.mark.parametrize("name", sorted(all_workloads()))
def test_every_kernel_compiles_for_sm75_and_sm90(name, compiler, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the simulator's PDL fallback warns
        jobs = collect(all_workloads()[name])
    assert jobs, f"{name}: no kernel launched"
    (tmp_path / "jobs.pkl").write_bytes(pickle.dumps(jobs))
    # the oldest and the newest (lowest first: see the module's docstring); sm_80 between them adds no
    # instruction the kernels use that sm_75 lacks and sm_90 has not checked, and a third of the time
    ccs = [f"{a}.{b}" for a, b in (min(capabilities.STUDENT_CCS), max(capabilities.STUDENT_CCS))]
    report = compiler.compile(tmp_path / "jobs.pkl", ccs)
    assert report["compiled"] + len(report["failed"]) == len(jobs)  # each kernel for every cc, or failed
    assert not report["failed"], "\n".join(f"{f['kernel']}: {f['error']}" for f in report["failed"])


def test_compiling_without_a_gpu_patches_what_numba_cuda_0_30_has():
    # capabilities.compile_ptx answers numba's "which device?" for device functions: the name it
    # replaces must still be where it was (a numba-cuda upgrade fails here, loudly)
    code = ("from numba.cuda import dispatcher; import inspect; "
            "assert 'get_current_device().compute_capability' in inspect.getsource(dispatcher.CUDADispatcher.compile_device); "
            "assert callable(dispatcher.get_current_device); "
            # compile_ptx_each keeps the library cuda.compile_ptx makes: its one step before NVVM must still be
            "from numba.cuda import compiler; "
            "assert 'lib, resty = _compile_pyfunc_with_fixup(' in inspect.getsource(compiler.compile); "
            # and it refuses ccs that numba would lower differently (sm_70 has no fast tanh)
            "from kernels_lab.capabilities import compile_ptx_each\n"
            "try:\n compile_ptx_each(lambda: None, (), [(7, 0), (9, 0)])\n"
            "except ValueError as e:\n assert 'below sm_75' in str(e), e; print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["KERNELS_LAB_BACKEND"] = "ptx"
    out = subprocess.run([sys.executable, "-c", "import kernels_lab; " + code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_doctor_and_the_probe_agree_that_ptx_compiles_here():
    probe = capabilities.ptx_compile(probe=True)
    assert probe.available, probe.detail
