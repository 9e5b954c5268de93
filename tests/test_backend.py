"""The back-end object: what each back-end answers, and that topic code asks it instead of reading flags."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kernels_lab import backend as B
from kernels_lab.backend import BACKEND
from kernels_lab.runtime import BACKEND_NAME, BackendError, cuda

PACKAGE = Path(B.__file__).resolve().parent


def test_the_object_is_the_back_end_runtime_chose():
    assert BACKEND.name == BACKEND_NAME
    assert isinstance(BACKEND, {"gpu": B.GpuBackend, "simulator": B.SimulatorBackend, "ptx": B.PtxBackend}[BACKEND_NAME])


@pytest.mark.parametrize("kind, answers", [
    (B.GpuBackend, dict(can_launch=True, can_time=True, can_trace=False, has_graphs=True, blocks_run_together=True,
                        synchronous_launches=False, atomic_add_reads=1, on_device=True, python_threads=False,
                        size=256)),
    (B.SimulatorBackend, dict(can_launch=True, can_time=False, can_trace=True, has_graphs=False,
                              blocks_run_together=False, synchronous_launches=True, atomic_add_reads=2,
                              on_device=False, python_threads=True, size=32)),
    (B.PtxBackend, dict(can_launch=False, can_time=False, can_trace=False, has_graphs=False, blocks_run_together=True,
                        synchronous_launches=False, atomic_add_reads=1, on_device=False, python_threads=False,
                        size=256)),
])
def test_what_each_back_end_answers(kind, answers):
    b = kind()
    assert b.size(gpu=256, simulator=32) == answers.pop("size")  # PTX compiles the GPU's kernels: its sizes
    for name, want in answers.items():
        assert getattr(b, name) == want, name
    assert (b.untimed is None) == b.can_time and (b.untimed or "timings need a GPU").startswith("timings need a GPU")


def test_only_the_simulator_limits_sizes_and_drops_performance_hints():
    sim, gpu, ptx = B.SimulatorBackend(), B.GpuBackend(), B.PtxBackend()
    assert sim.sizes.max_elements == 1 << 15 and gpu.sizes.max_elements is None and ptx.sizes.max_elements is None
    assert sim.size_problem(1 << 15, "n=32768") is None
    assert "at most 32,768 elements" in sim.size_problem((1 << 15) + 1, "n=32769")
    assert gpu.size_problem(1 << 30, "n=2^30") is None
    assert {"launch_bounds", "forceinline"} <= set(sim._dropped_options) and not gpu._dropped_options


def test_the_simulator_and_ptx_say_why_there_is_no_pdl():
    assert B.SimulatorBackend().pdl() == (False, "the simulator has no Programmatic Dependent Launch")
    assert not B.PtxBackend().pdl()[0]
    assert B.SimulatorBackend().runs_griddepcontrol  # its griddepcontrol does nothing: the PDL kernels run


def test_a_size_is_a_number_never_a_code_path():
    with pytest.raises(TypeError, match="a size is an int"):
        BACKEND.size(gpu=lambda: 1, simulator=lambda: 2)
    with pytest.raises(TypeError, match="a size is an int"):
        BACKEND.size(gpu=True, simulator=False)


def test_ptx_runs_nothing_and_says_so():
    with pytest.raises(BackendError, match="runs no kernels"):
        B.PtxBackend().start(None, 1, 1, ())


def test_persistent_grid_is_sized_to_the_machine():
    from kernels_lab.topics.elementwise.workload import _persistent_blocks
    blocks, facts = _persistent_blocks(), BACKEND.facts()
    if BACKEND.name == "gpu":
        assert blocks % facts.sm_count == 0 and blocks >= facts.sm_count
    else:
        assert blocks == BACKEND.sizes.persistent_blocks


def test_a_grid_that_cannot_be_coresident_is_refused_before_launch():
    from numba import types

    from kernels_lab.topics.launch.bench import BLOCK, persistent_steps
    sig = (types.Array(types.float32, 1, "C"), types.int64)
    limit = BACKEND.resident_limit(persistent_steps, sig, BLOCK)
    BACKEND.require_coresident(persistent_steps, sig, limit, BLOCK)
    with pytest.raises(BackendError, match=f"cannot be co-resident: at most {limit}"):
        BACKEND.require_coresident(persistent_steps, sig, limit + 1, BLOCK)


@pytest.mark.skipif(BACKEND.name != "simulator", reason="the simulator's side-by-side blocks")
def test_a_kernel_marked_coresident_runs_blocks_side_by_side_on_the_simulator():
    from kernels_lab.sim_coresident import RESIDENT_BLOCKS

    def waits_for_its_neighbours(a):
        a[cuda.blockIdx.x] = 1

    kernel = cuda.jit(waits_for_its_neighbours)
    assert BACKEND.resident_limit(kernel, None, 32) == 1  # grid sync there is a block barrier
    assert BACKEND.coresident(kernel) is kernel
    assert BACKEND.resident_limit(kernel, None, 32) == RESIDENT_BLOCKS
    with pytest.raises(BackendError, match="side-by-side limit"):
        BACKEND.require_coresident(kernel, None, RESIDENT_BLOCKS + 1, 32)


@pytest.mark.skipif(not BACKEND.can_launch, reason="launches kernels")
def test_launcher_graph_and_host_view_run_the_same_kernel_everywhere():
    import warnings

    @BACKEND.jit(launch_bounds=32, fastmath=True)
    def add_one(a, i):
        a[i] += np.float32(1)

    a = cuda.to_device(np.zeros(3, np.float32))
    launches = [BACKEND.launcher(add_one, 1, 1, (a, i)) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # where there are no graphs, it says so and runs them in order
        BACKEND.graph(launches, 0, "test graph")()
    B.in_order(launches)()
    cuda.synchronize()
    assert a.copy_to_host().tolist() == [2, 2, 2]
    mapped = cuda.mapped_array(2, np.int32)
    BACKEND.host_view(mapped)[:] = (7, 8)
    assert BACKEND.host_view(mapped).tolist() == [7, 8] and isinstance(BACKEND.host_view(mapped), np.ndarray)


# -- topics ask the object: no module under these reads a back-end flag ------------------------------

TOPIC_CODE = ("topics", "demos")
# the flags, and the object's name compared: `BACKEND.name == ...` is a flag by another name
FLAG = re.compile(r"\b(ON_GPU|ON_SIMULATOR|BACKEND_NAME)\b|BACKEND\.name\b|\bruntime\.BACKEND\b")


def _topic_files() -> list[Path]:
    files = []
    for part in TOPIC_CODE:
        path = PACKAGE / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def _lines_matching(pattern: re.Pattern, paths: list[Path]) -> list[str]:
    """Each line of code (comments left out) of these files that `pattern` finds, as path:line: text."""
    return [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for path in paths
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line.split("#", 1)[0])]


def test_no_topic_module_reads_a_back_end_flag():
    found = _lines_matching(FLAG, _topic_files())
    assert not found, ("topic code asks kernels_lab.backend.BACKEND for a size, a grid, a launch or a capability, "
                       "never which machine this is:\n  " + "\n  ".join(found))


# the modules that define or patch numba's own objects per back-end, at import (numba internals, one module each)
NUMBA_INTERNALS = {"runtime.py", "backend.py", "intrinsics.py", "sim_weak.py", "capabilities.py",
                   "instrument/launch_hook.py"}


def test_the_package_asks_capabilities_not_which_machine():
    # the grader and the reports record the back-end's name (data), but nothing else branches on it
    branch = re.compile(r"\b(ON_GPU|ON_SIMULATOR)\b|BACKEND(_NAME|\.name)\s*[!=]=")
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if str(p.relative_to(PACKAGE)) not in NUMBA_INTERNALS]
    found = _lines_matching(branch, files)
    assert not found, ("ask BACKEND for a capability (on_device, can_time, can_trace, python_threads, untimed...), "
                       "not which machine this is:\n  " + "\n  ".join(found))
    assert branch.search("if BACKEND.name != 'gpu':") and not branch.search("backend: str = BACKEND_NAME")
    assert all((PACKAGE / name).is_file() for name in NUMBA_INTERNALS) and len(files) > 100


def test_the_flag_test_sees_a_flag():
    assert FLAG.search("X = 2 if ON_SIMULATOR else 1") and FLAG.search("if BACKEND.name == 'gpu':")
    assert not FLAG.search("X = BACKEND.size(gpu=2, simulator=1)")
    assert len(_topic_files()) > 20
