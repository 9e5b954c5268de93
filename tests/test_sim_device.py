"""The simulator's warp operations (kernels_lab/sim_device.py) behave as PTX says they do on a GPU, and
fail loudly where a GPU would hang or give undefined values; numba-cuda's internals they patch are pinned."""

import time

import numpy as np
import pytest

from kernels_lab import sim_device
from kernels_lab.intrinsics import (async_commit, async_wait_group, copy16_async, load4,
                                    store4)
from kernels_lab.runtime import ON_SIMULATOR, cuda

pytestmark = pytest.mark.skipif(not ON_SIMULATOR, reason="the simulator's own warp operations")
FULL = 0xFFFFFFFF


def test_the_patched_internals_are_numba_cuda_0_30s():
    """When numba-cuda changes, this fails first: re-check what sim_device patches, then the pin."""
    import numba_cuda
    from numba.cuda.simulator import kernel, kernelapi
    assert numba_cuda.__version__.startswith(sim_device.PINNED + "."), numba_cuda.__version__
    assert sim_device.installed()
    for name in sim_device.DEVICE_OPERATIONS:
        assert getattr(kernelapi.FakeCUDAModule, name) is sim_device.DEVICE_OPERATIONS[name]
    for attr in ("thread_id", "threadIdx", "blockIdx", "abort", "_manager", "syncthreads_blocked"):
        assert attr in vars(kernel.BlockThread(lambda: None, _Manager(), (0, 0, 0), (0, 0, 0), False)), attr
    assert "_block_dim" in vars(kernel.BlockManager(lambda: None, (1, 1, 1), (4, 1, 1), False))


class _Manager:
    _block_dim = (4, 1, 1)


@cuda.jit
def _shuffles(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    out[0, t] = cuda.shfl_sync(FULL, v, (t * 7 + 3) % 32)
    out[1, t] = cuda.shfl_up_sync(FULL, v, 3)
    out[2, t] = cuda.shfl_down_sync(FULL, v, 5)
    out[3, t] = cuda.shfl_xor_sync(FULL, v, 9)
    out[4, t] = cuda.shfl_xor_sync(FULL, v, 32)  # PTX takes the low 5 bits: lane ^ 0


def _expected(x):
    n = x.size
    lanes = np.arange(n) % 32
    base = np.arange(n) - lanes

    def read(src):
        got = np.empty(n, np.float32)
        for t in range(n):
            s = src[t]
            if s is None:
                got[t] = x[t]
            else:
                got[t] = x[base[t] + s] if base[t] + s < n else np.nan  # a lane past a partial warp
        return got
    return np.stack([read([(t * 7 + 3) % 32 for t in range(n)]),
                     read([lanes[t] - 3 if lanes[t] >= 3 else None for t in range(n)]),
                     read([lanes[t] + 5 if lanes[t] + 5 < 32 else None for t in range(n)]),
                     read([lanes[t] ^ 9 for t in range(n)]), x.copy()])


@pytest.mark.parametrize("threads", [64, 48])  # 48: a partial second warp of 16 lanes
def test_shuffles_read_the_lanes_ptx_names(rng, threads):
    x = rng.standard_normal(threads).astype(np.float32)
    out = np.zeros((5, threads), np.float32)
    _shuffles[1, threads](x, out)
    np.testing.assert_array_equal(out, _expected(x))


@cuda.jit
def _votes(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    ballot = cuda.ballot_sync(FULL, v > 0)
    out[t, 0] = ballot
    out[t, 1] = cuda.popc(ballot)
    out[t, 2] = cuda.all_sync(FULL, v > -10)
    out[t, 3] = cuda.any_sync(FULL, v > 10)
    out[t, 4] = cuda.eq_sync(FULL, v > 0)
    out[t, 5] = cuda.match_any_sync(FULL, np.int32(t % 3))
    out[t, 6] = cuda.lanemask_lt()
    out[t, 7] = cuda.activemask()


def test_votes_count_the_warps_lanes(rng):
    x = rng.standard_normal(64).astype(np.float32)
    x[31] = 1.0  # lane 31 set: the ballot is a negative int32, as on a GPU
    out = np.zeros((64, 8), np.int64)
    _votes[1, 64](x, out)
    for w in range(2):
        lanes = slice(32 * w, 32 * w + 32)
        bits = sum(1 << k for k in range(32) if x[32 * w + k] > 0)
        assert (out[lanes, 0] == np.uint32(bits).view(np.int32)).all()
        assert (out[lanes, 1] == bin(bits).count("1")).all()
        assert (out[lanes, 2] == 1).all() and (out[lanes, 3] == 0).all()
        assert (out[lanes, 4] == int(bits in (0, FULL))).all()
    for t in range(64):
        same = sum(1 << k for k in range(32) if (32 * (t // 32) + k) % 3 == t % 3)
        assert out[t, 5] == np.uint32(same).view(np.int32)
        assert out[t, 6] == (1 << (t % 32)) - 1 and out[t, 7] == FULL


def _assert_group_sums(got, x, size, repeated=True):
    """got: the float32 sum of each `size` consecutive values of x (once per value, or once), against float64. The error
    of a float32 sum scales with the sum of magnitudes, not with the sum, which can be near 0 (a relative
    tolerance failed one seed in CI)."""
    groups = x.astype(np.float64).reshape(-1, size)
    want = groups.sum(axis=1)
    np.testing.assert_allclose(got, np.repeat(want, size) if repeated else want, rtol=0,
                               atol=1e-6 * float(np.abs(groups).sum(axis=1).max()))


@cuda.jit
def _half_warps(x, out):
    t = cuda.threadIdx.x
    mask = 0x0000FFFF if t % 32 < 16 else 0xFFFF0000  # two groups shuffle apart
    v = x[t]
    for k in (8, 4, 2, 1):
        v += cuda.shfl_xor_sync(mask, v, k)
    out[t] = v


def test_lanes_of_different_masks_shuffle_apart(rng):
    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    _half_warps[1, 64](x, out)
    _assert_group_sums(out, x, 16)


@cuda.jit
def _early_exit(x, out):
    t = cuda.threadIdx.x
    if t >= 20:
        return  # lanes 20..31 never reach the shuffle: the others must not wait for them
    out[0, t] = cuda.shfl_down_sync(FULL, x[t], 4)
    out[1, t] = cuda.ballot_sync(FULL, True)
    out[2, t] = cuda.activemask()


def test_returned_lanes_are_not_waited_for_and_their_values_are_undefined(rng):
    x = rng.standard_normal(32).astype(np.float32)
    out = np.zeros((3, 32), np.float32)
    t0 = time.monotonic()
    _early_exit[1, 32](x, out)
    assert time.monotonic() - t0 < 5
    np.testing.assert_array_equal(out[0, :16], x[4:20])
    assert np.isnan(out[0, 16:20]).all()  # read from lanes that had returned: NaN, so using it shows
    assert (out[1, :20] == (1 << 20) - 1).all() and (out[2, :20] == (1 << 20) - 1).all()


@cuda.jit
def _divergent_activemask(out):
    t = cuda.threadIdx.x
    if t % 32 < 5:
        out[t] = cuda.activemask()
    else:
        out[t] = -1


def test_activemask_is_the_lanes_converged_at_the_call():
    out = np.zeros(64, np.int64)
    _divergent_activemask[1, 64](out)
    assert (out.reshape(2, 32)[:, :5] == 0x1F).all() and (out.reshape(2, 32)[:, 5:] == -1).all()


@cuda.jit
def _shuffle_against_barrier(x, out):
    t = cuda.threadIdx.x
    if t == 3:
        cuda.syncthreads()  # the others wait at a shuffle for lane 3: on a GPU, a hang
    out[t] = cuda.shfl_xor_sync(FULL, x[t], 1)
    if t != 3:
        cuda.syncthreads()


@cuda.jit
def _not_in_own_mask(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_xor_sync(0xFFFFFFFE, x[t], 1)  # lane 0 is not in its mask


@cuda.jit
def _different_operations(x, out):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_xor_sync(FULL, x[t], 1)
    else:
        out[t] = cuda.ballot_sync(FULL, x[t] > 0)


@pytest.mark.parametrize("kernel, says", [
    (_shuffle_against_barrier, "waits at syncthreads"),
    (_not_in_own_mask, "does not name that lane"),
    (_different_operations, "different warp operations"),
])
def test_what_a_gpu_would_not_run_is_an_error_not_a_hang(kernel, says):
    x, out = np.ones(32, np.float32), np.zeros(32, np.float32)
    t0 = time.monotonic()
    with pytest.raises(sim_device.WarpError, match=says):
        kernel[1, 32](x, out)
    assert time.monotonic() - t0 < 10


@cuda.jit
def _shared_atomics(x, out):
    acc = cuda.shared.array(2, np.float32)
    count = cuda.shared.array(1, np.int32)
    t = cuda.threadIdx.x
    if t == 0:
        acc[0], acc[1], count[0] = 0, -1e30, 0
    cuda.syncthreads()
    cuda.atomic.add(acc, 0, x[t])
    cuda.atomic.max(acc, 1, x[t])
    cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        out[0], out[1], out[2] = acc[0], acc[1], count[0]


def test_shared_memory_atomics(rng):
    x = rng.standard_normal(96).astype(np.float32)
    out = np.zeros(3, np.float32)
    _shared_atomics[1, 96](x, out)
    _assert_group_sums(out[:1], x, 96, repeated=False)
    assert out[1] == x.max() and out[2] == 96


@cuda.jit
def _intrinsics(a, out):
    v = cuda.threadIdx.x
    p, q, r, s = load4(a, v)
    store4(out, v, s, r, q, p)


def test_the_projects_intrinsics_run_on_the_simulator(rng):
    a = rng.standard_normal(32).astype(np.float32)
    out = np.zeros(32, np.float32)
    _intrinsics[1, 8](a, out)
    np.testing.assert_array_equal(out, a.reshape(8, 4)[:, ::-1].reshape(-1))


def test_the_reductions_use_the_gpus_shuffles_here_too(rng):
    """kernels_lab.reduce has one implementation: the shuffle code a GPU runs is what the simulator checks."""
    from kernels_lab import reduce

    @cuda.jit
    def sums(x, out):
        scratch = cuda.shared.array(4, np.float32)
        t = cuda.threadIdx.x
        out[0, t] = reduce.warp_sum(x[t])
        out[1, t] = reduce.block_max(x[t], scratch)

    x = rng.standard_normal(128).astype(np.float32)
    out = np.zeros((2, 128), np.float32)
    sums[1, 128](x, out)
    _assert_group_sums(out[0], x, 32)
    assert (out[1] == x.max()).all()


def test_every_device_operation_the_lessons_and_submissions_call_exists_here():
    """A lesson, a workload or a submission that calls a device operation the simulator lacks would fail with a
    raw AttributeError there (and lose every point on the simulator's grader)."""
    import re
    from pathlib import Path

    from numba.cuda import stubs
    from numba.cuda.simulator.kernelapi import FakeCUDAModule
    root = Path(__file__).resolve().parents[1]
    device = {n for n in dir(stubs) if n.islower() and isinstance(getattr(stubs, n), type)
              and issubclass(getattr(stubs, n), stubs.Stub)}
    device |= {"shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync", "eq_sync",
               "ballot_sync", "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "grid", "gridsize"}
    sources = [*root.glob("notebooks/lessons/*.py"), *root.glob("kernels_lab/**/*.py"),
               *root.glob("tests/submissions/**/*.py")]
    called = {name for path in sources for name in re.findall(r"\bcuda\.([a-z_0-9]+)\(", path.read_text())}
    used = called & device
    assert {"shfl_xor_sync", "shfl_down_sync", "syncthreads"} <= used  # the scan sees the lessons' kernels
    here = FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    missing = [n for n in sorted(device) if not (hasattr(FakeCUDAModule, n) or hasattr(here, n))]
    assert missing == []  # every one numba offers, so every one `used` names


@cuda.jit
def _copy_then_read(src, out):
    buf = cuda.shared.array(4, np.float32)
    for i in range(4):
        buf[i] = 1.0
    copy16_async(buf, 0, src, 1, 3)  # src[4:7], then a zero
    async_commit()
    out[0] = buf[0]  # between the copy's start and its wait: undefined on a GPU
    async_wait_group(0)
    for i in range(4):
        out[1 + i] = buf[i]


def test_an_async_copy_is_undefined_until_its_wait_then_lands_with_zeros_after_n():
    src = np.arange(8, dtype=np.float32) + 10
    out = np.zeros(5, np.float32)
    _copy_then_read[1, 1](src, out)
    assert np.isnan(out[0])  # read before the wait: the simulator's NaN, so the kernel's answer is wrong
    assert out[1:].tolist() == [14.0, 15.0, 16.0, 0.0]
