"""The simulator's weak-memory mode (kernels_lab/sim_weak.py): litmus tests of what it models, the same
seed giving the same run, the hooks it shares with the byte tracer, and the real kernels: lesson 07's
megakernel right with a correct protocol and wrong with each classic ordering bug, the split softmax right."""

import numpy as np
import pytest

from kernels_lab import sim_weak
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.backend import BACKEND
from kernels_lab.core import get_workload
from kernels_lab.instrument.trace import per_array, tracing
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep, poll_relaxed_sys
from kernels_lab.runtime import ON_SIMULATOR, cuda
from kernels_lab.topics.decode import kernels as dk
from kernels_lab.topics.decode import workload as decode
from sources import submission

pytestmark = pytest.mark.skipif(not ON_SIMULATOR, reason="the simulator's weak-memory mode")

N = 40  # values a message carries: a wrong protocol shows in some of them under any seed (each read stale w.p. 3/4)


def test_numba_is_the_simulator_the_hooks_were_written_for():
    sim_weak.check_numba()  # raises, naming what moved, on another numba-cuda
    sim_weak.install()
    from numba.cuda.simulator import kernelapi
    from numba.cuda.simulator.cudadrv import devicearray
    assert devicearray.FakeCUDAArray.__getitem__.__module__ == sim_weak.__name__
    assert kernelapi.FakeCUDAModule.threadfence.__module__ == sim_weak.__name__
    assert kernelapi.FakeCUDAAtomic.add.__module__ == sim_weak.__name__


# -- litmus: message passing between two blocks (block 0 writes, block 1 reads after it, as the simulator runs them)

RELEASES = {"fence then atomic add": "fence", "add_release_gpu": "release", "atomic add alone": "none",
            "threadfence_block then atomic add": "block"}
ACQUIRES = {"load_acquire_gpu": "acquire", "relaxed poll then fence": "relaxed_fence", "plain load": "plain",
            "relaxed poll, fence only while not yet": "fence_not_yet", "atomic poll then fence": "atomic_fence"}


def _message_passing(release: str, acquire: str):
    @cuda.jit
    def mp(data, flag, out):
        i = cuda.threadIdx.x
        if cuda.blockIdx.x == 0:
            if i < data.size:
                data[i] = np.float32(i + 1)
            cuda.syncthreads()
            if i == 0:
                if release == "release":
                    add_release_gpu(flag, 0, 1)
                else:
                    if release == "fence":
                        cuda.threadfence()
                    elif release == "block":
                        cuda.threadfence_block()
                    cuda.atomic.add(flag, 0, 1)
        else:
            if i == 0:
                for _ in range(1000):  # bounded
                    if acquire == "acquire":
                        if load_acquire_gpu(flag, 0) >= 1:
                            break
                    elif acquire == "relaxed_fence":
                        if poll_relaxed_sys(flag, 0) >= 1:
                            cuda.threadfence()
                            break
                    elif acquire == "atomic_fence":
                        if cuda.atomic.add(flag, 0, 0) >= 1:
                            cuda.threadfence()
                            break
                    elif acquire == "fence_not_yet":
                        if cuda.atomic.add(flag, 0, 0) >= 1:
                            break
                        cuda.threadfence()
                    elif flag[0] >= 1:
                        break
                    nanosleep(10_000)  # blocks side by side: the writer gets the GIL
            cuda.syncthreads()
            if i < out.size:
                out[i] = data[i]
    return mp


def _run_mp(release: str, acquire: str, seed: int = 0, weak: bool = True) -> np.ndarray:
    kernel = _message_passing(release, acquire)
    data, flag = cuda.to_device(np.zeros(N, np.float32)), cuda.to_device(np.zeros(1, np.int32))
    out = cuda.to_device(np.full(N, -1, np.float32))
    if weak:
        with sim_weak.weak_memory(seed):
            kernel[2, N + 3](data, flag, out)
    else:
        kernel[2, N + 3](data, flag, out)
    return out.copy_to_host()


EXPECTED = np.arange(1, N + 1, dtype=np.float32)


@pytest.mark.parametrize("release", ["fence", "release"])
@pytest.mark.parametrize("acquire", ["acquire", "relaxed_fence", "atomic_fence"])
def test_a_released_message_read_after_an_acquire_is_right(release, acquire):
    for seed in (0, 1):
        np.testing.assert_array_equal(_run_mp(release, acquire, seed), EXPECTED)


@pytest.mark.parametrize("release,acquire", [("none", "acquire"), ("block", "acquire"), ("fence", "plain"),
                                             ("release", "fence_not_yet"), ("none", "plain")])
def test_a_message_without_its_release_or_its_acquire_is_read_stale(release, acquire):
    for seed in (0, 1):
        out = _run_mp(release, acquire, seed)
        assert (out != EXPECTED).any(), (release, acquire, seed)
        assert ((out == EXPECTED) | (out == 0)).all(), "a stale read returns the old value, never another"
    # outside the mode the simulator's memory is coherent: the same bug gives the right answer
    np.testing.assert_array_equal(_run_mp(release, acquire, weak=False), EXPECTED)


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    runs = {seed: [_run_mp("none", "acquire", seed) for _ in range(2)] for seed in range(4)}
    for first, second in runs.values():
        np.testing.assert_array_equal(first, second)
    assert len({r[0].tobytes() for r in runs.values()}) > 1


def test_a_blocks_own_stores_are_seen_by_its_threads_and_the_kernels_end_drains_every_buffer():
    @cuda.jit
    def own(a, out, s):
        i = cuda.threadIdx.x
        tile = cuda.shared.array(64, np.float32)
        a[i] = np.float32(i + 1)          # a plain global store, no fence
        tile[i] = np.float32(2 * (i + 1))  # shared memory: coherent within the block
        cuda.syncthreads()
        j = (i + 1) % cuda.blockDim.x
        out[i] = a[j] + tile[j]
        s[i] = a[j]
    a, out, s = (cuda.to_device(np.zeros(33, np.float32)) for _ in range(3))
    with sim_weak.weak_memory(0) as mode:
        own[1, 33](a, out, s)
    expected = np.roll(np.arange(1, 34, dtype=np.float32), -1)
    np.testing.assert_array_equal(out.copy_to_host(), 3 * expected)
    np.testing.assert_array_equal(a.copy_to_host(), np.arange(1, 34, dtype=np.float32))  # drained at the end
    assert mode.buffered_stores == 3 * 33 and mode.stale_reads == 0 and mode.launches == 1


def test_blocks_side_by_side_are_told_apart():
    # sim_coresident's blocks run in threads of their own: block 1 polls while block 0 writes
    for release, right in (("fence", True), ("none", False)):
        kernel = BACKEND.coresident(_message_passing(release, "acquire"))
        data, flag = cuda.to_device(np.zeros(N, np.float32)), cuda.to_device(np.zeros(1, np.int32))
        out = cuda.to_device(np.full(N, -1, np.float32))
        with sim_weak.weak_memory(3):
            kernel[2, N + 3](data, flag, out)
        assert (out.copy_to_host() == EXPECTED).all() == right, release


def test_device_arrays_made_inside_the_mode_are_poisoned_and_the_allocators_restored():
    with sim_weak.weak_memory(0):
        f, i = cuda.device_array(5, np.float32), cuda.device_array_like(np.zeros(3, np.int32))
    assert np.isnan(f.copy_to_host()).all() and (i.copy_to_host() == -1).all()
    assert cuda.device_array.__module__ != sim_weak.__name__ and sim_weak.active() is None


def test_bad_settings_and_nesting_are_refused():
    with pytest.raises(ValueError, match="fresh"):
        with sim_weak.weak_memory(0, fresh=1.5):
            pass
    with sim_weak.weak_memory(0):
        with pytest.raises(RuntimeError, match="already on"):
            with sim_weak.weak_memory(1):
                pass


def test_the_back_end_object_and_run_weak():
    assert BACKEND.models_weak_memory
    with BACKEND.weak_memory(2) as mode:
        assert sim_weak.active() is mode and mode.seed == 2
    ran = sim_weak.run_weak(lambda: _run_mp("none", "acquire", weak=False), seed=0)
    assert (ran.result != EXPECTED).any() and ran.memory.stale_reads > 0
    assert "data" in ran.memory.stale_by_array and "stale reads" in ran.memory.describe()


# -- the real kernels ---------------------------------------------------------------------------------------------

W = get_workload("decode")
SIZE = W.size(hidden=11, layers=3, batch=2)


def _protocol(name: str):
    space = {"cuda": cuda, "np": np}
    exec(compile(submission(name), name, "exec"), space)
    return space["signal"], space["wait"]


@cuda.jit(device=True)
def _wait_fence_only_while_not_yet(counters, layer, tiles, spin_limit):
    for _ in range(spin_limit + 1):
        if cuda.atomic.add(counters, layer, 0) >= tiles:
            return True  # no fence after the read that saw the count: the reads of x_l may be stale
        cuda.threadfence()
    return False


def _megakernel(protocol, seed: int, rng_seed: int = 7):
    rng = np.random.default_rng(rng_seed)
    inputs = W.make_inputs(SIZE, rng)
    out = poisoned(W.output_specs(SIZE))
    with sim_weak.weak_memory(seed) as mode:
        launch = decode.bind_megakernel_with(to_device(inputs), out, protocol=protocol, spin_limit=100)
        launch()
    assert launch.timed_out_waiting_for() is None
    got, ref = out["out"].copy_to_host(), W.reference(inputs)["out"]
    return got, ~np.isclose(got, ref, rtol=W.tolerance.rtol, atol=W.tolerance.atol), mode


@pytest.mark.parametrize("name", ["lesson", "decode_fence_atomic", "decode_relaxed_poll_fence"])
def test_the_megakernel_with_a_correct_protocol_is_right_in_weak_memory(name):
    protocol = dk.PROTOCOL if name == "lesson" else _protocol(name)
    for seed in (0, 1):
        _, wrong, mode = _megakernel(protocol, seed)
        assert not wrong.any() and mode.stale_reads == 0, mode.describe()


@pytest.mark.parametrize("name", ["decode_no_fence", "decode_plain_load", "fence only while not yet"])
def test_the_megakernel_with_an_ordering_bug_is_wrong_the_same_way_for_a_seed(name):
    protocol = (dk.PROTOCOL[0], _wait_fence_only_while_not_yet) if name.startswith("fence") else _protocol(name)
    for seed in (0, 1):
        got, wrong, mode = _megakernel(protocol, seed)
        assert wrong.any() and mode.stale_by_array.get("acts", 0) > 0, mode.describe()
        again, _, _ = _megakernel(protocol, seed)
        np.testing.assert_array_equal(got, again)


def test_the_split_softmax_stays_right_in_weak_memory_with_the_tracer_on(rng):
    from kernels_lab.checks import compare
    from kernels_lab.topics.softmax import split as sp
    softmax = get_workload("softmax")
    rows, cols = 5, 301
    shape = sp.split_shape(cols, slices=3)
    size = softmax.size(rows=rows, cols=cols)
    inputs = softmax.make_inputs(size, rng)
    out = poisoned(softmax.output_specs(size))
    launch = sp.bind_split(to_device(inputs), out, shape=shape)
    for seed in (0, 1):  # a second launch: the flags go on from where the first left them
        with sim_weak.weak_memory(seed) as mode, tracing() as trace:
            launch()
        _, bad = compare("out", out["out"].copy_to_host(), softmax.reference(inputs)["out"], softmax.tolerance)
        assert bad is None, (bad, mode.describe())
        assert mode.fences > 0
    plan = sp.plan_split_for(size, shape).launches[0]
    (traced,) = trace.launches  # the tracer counts every access the weak mode serves
    assert traced.bytes_written == plan.bytes_written and per_array(trace)["x"].bytes_read == 4 * rows * cols
